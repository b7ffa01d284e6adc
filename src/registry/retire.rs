//! Deferred destruction on the submission clock (R-D1..R-D4), the immediate context's half.
//!
//! A destroy from any thread marks the object destroyed, tags it with the immediate
//! context's *open* command-buffer number (one atomic read, no lock) and pushes its slot onto
//! the device's lock-free retire stack (no allocation: the link lives in the slot). Nothing
//! else happens on that thread.
//!
//! The immediate context's thread runs the rest in `RetireQueue::process`, which every
//! flush calls after submitting, *even when the buffer was empty* (R-D2):
//!
//! 1. It takes the whole retire stack at once.
//! 2. **Destruction** (R-D1): an object whose tag is at or before the newest submitted buffer
//!    can no longer be referenced by the immediate context, so the driver's destroy hook runs
//!    and the slot is freed (the handle is dead for good). Objects something still holds
//!    (a resource with live views, R-H3) wait; dependents go before what they depend on.
//! 3. **Deallocation**: the object's kernel memory is deallocated at once under
//!    [`Clock::Submitted`] (a kernel that tracks GPU use itself), or once the completed fence
//!    has passed the last buffer that referenced it under [`Clock::Completed`] (the GPU may
//!    still read it until then), so R-D4's heavy pattern (flush, wait for an event query,
//!    flush) leaves it fully destroyed.
//!
//! Device destruction (R-D3) waits for the last fence and runs all of it unconditionally.

use crossbeam_epoch::Guard;

use crate::driver::Driver;
use crate::handle::HandleType;
use crate::kernel::{AllocationHandle, Kernel};
use crate::primitive::Ordering;
use crate::registry::{Entry, IcToken, Registry};
use scopeguard::ScopeGuard;

/// When an object's kernel memory may be deallocated after its destruction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Clock {
    /// Once the buffer that could reference it was submitted (R-D1's minimum): for kernels
    /// that keep an allocation alive while the GPU uses it.
    Submitted,
    /// Once the GPU has completed the last buffer that referenced it (R-D4's full
    /// destruction).
    #[default]
    Completed,
}

/// Counters of the deferred-destruction queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetireStats {
    /// Objects whose real destruction has run (driver hook called, handle dead), primaries
    /// included.
    pub destroyed: u64,
    /// Kernel allocations deallocated.
    pub deallocated: u64,
    /// Destroyed objects the immediate context has taken in (at its flushes) that wait for
    /// their buffer's submit or for their holders. Destroys since the last flush are not
    /// counted yet: they sit on the device's lock-free retire stack.
    pub waiting_destruction: usize,
    /// Allocations waiting for the completed fence.
    pub waiting_deallocation: usize,
    /// Bytes the queue keeps (its capacity).
    pub retained_bytes: usize,
    /// Objects really destroyed whose entries wait until no thread that may have looked
    /// them up is still pinned (the CPU clock); dropped at later flushes, and all of them
    /// with the device.
    pub waiting_reclamation: usize,
}

#[derive(Clone, Copy, Debug)]
struct Waiting {
    index: u32,
    tag: u64,
}

#[derive(Clone, Copy, Debug)]
struct Deallocation {
    allocation: AllocationHandle,
    fence: u64,
}

/// Where the clocks stand when the queue is processed.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clocks {
    /// Every buffer numbered at or below this was submitted (or was empty).
    pub(crate) submitted_through: u64,
    /// The kernel's completed fence.
    pub(crate) completed: u64,
    /// Whether this is device destruction's drain, and what it leaves.
    pub(crate) drain: Drain,
}

/// Device destruction's drain (R-D3): the GPU is idle, every object is due, and what
/// happens to an object something still holds depends on who may still hear it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drain {
    /// Not a drain: the clocks and the holds decide.
    No,
    /// No deferred context is alive, so nothing can hear an object any more (a command list
    /// the application still has can only be dropped): everything is destroyed, held or
    /// not.
    Everything,
    /// Deferred contexts are alive (the immediate context was dropped under them): one may
    /// be in a call that began before the removal and hands the driver an object it holds,
    /// so what is held is left to its holders. The device's last reference destroys it
    /// ([`Registry::destroy_left`]); what nothing holds is destroyed now, and no hold can be
    /// taken on it afterwards (a hold needs the object not freed).
    LeaveHeld,
}

impl Drain {
    fn is_on(self) -> bool {
        self != Drain::No
    }
}

/// What a pass over the queue needs: the immediate context's view of its device.
pub(crate) struct Pass<'a, D: Driver, K: Kernel> {
    pub(crate) registry: &'a Registry<D>,
    /// Proves the immediate context runs the pass (the single reclaimer).
    pub(crate) token: &'a mut IcToken,
    pub(crate) driver: &'a D,
    pub(crate) kernel: &'a K,
    /// When deallocations are due ([`crate::DeviceConfig::retire_clock`]).
    pub(crate) clock: Clock,
    pub(crate) clocks: Clocks,
    pub(crate) guard: &'a Guard,
    /// Allocations an open Map on the immediate context holds locked (R-M4): none is
    /// deallocated before its unlock, whatever the clocks say.
    pub(crate) locked: &'a [AllocationHandle],
}

/// The immediate context's queue of pending destructions and deallocations. Its vectors keep
/// their capacity, so steady state allocates nothing; [`RetireQueue::trim`] gives it back.
#[derive(Debug, Default)]
pub(crate) struct RetireQueue {
    waiting: Vec<Waiting>,
    deallocations: Vec<Deallocation>,
    destroyed: u64,
    deallocated: u64,
    /// The most entries each vector held since the last trim.
    peak_waiting: usize,
    peak_deallocations: usize,
}

impl RetireQueue {
    pub(crate) fn stats(&self) -> RetireStats {
        RetireStats {
            destroyed: self.destroyed,
            deallocated: self.deallocated,
            waiting_destruction: self.waiting.len(),
            waiting_deallocation: self.deallocations.len(),
            retained_bytes: self.retained_bytes(),
            waiting_reclamation: 0,
        }
    }

    /// Whether a flush has anything to do here (else it skips pinning the epoch).
    pub(crate) fn has_work<D: Driver>(&self, registry: &Registry<D>) -> bool {
        !self.waiting.is_empty() || !self.deallocations.is_empty() || !registry.retired.is_empty()
    }

    /// The slots queued now (device destruction).
    pub(crate) fn queued_slots(&self) -> std::collections::HashSet<u32> {
        self.waiting.iter().map(|w| w.index).collect()
    }

    /// Queues slot `index` for destruction at tag 0 (device destruction).
    pub(crate) fn push_now(&mut self, index: u32) {
        self.waiting.push(Waiting { index, tag: 0 });
    }

    /// Takes the device's retire stack into the queue.
    pub(crate) fn collect<D: Driver>(&mut self, registry: &Registry<D>) {
        let next_of = |i| &registry.slot(i).expect("retired slots exist").next_retired;
        registry.retired.take_all(next_of, |index| {
            let slot = registry.slot(index).expect("retired slots exist");
            let tag = slot.retire_tag.load(Ordering::Relaxed);
            self.waiting.push(Waiting { index, tag });
        });
    }

    /// Runs every destruction and deallocation the clocks allow, and seals the entries it
    /// unlinked for reclamation. Immediate context's thread (its token, in `pass`).
    ///
    /// Panic-safe: each object and each deallocation leaves the queue before its hook runs,
    /// and an object's remaining steps run even when its destroy hook panics, so a hook that
    /// panics never makes the queue destroy or free anything twice, and the next pass (or
    /// the resumed drain) carries on with the rest.
    pub(crate) fn process<D: Driver, K: Kernel>(&mut self, mut pass: Pass<'_, D, K>) {
        self.collect(pass.registry);
        self.peak_waiting = self.peak_waiting.max(self.waiting.len());
        let clocks = pass.clocks;
        // Dependents (views) before what they depend on (resources), R-H3.
        for resources in [false, true] {
            let mut i = 0;
            while i < self.waiting.len() {
                let w = self.waiting[i];
                let due = clocks.drain.is_on() || w.tag <= clocks.submitted_through;
                match due
                    .then(|| Self::claim(&pass, w.index, resources))
                    .flatten()
                {
                    Some(entry) => {
                        self.waiting.swap_remove(i);
                        self.destroy_now(&mut pass, w.index, entry);
                    }
                    None => i += 1,
                }
            }
        }
        self.peak_deallocations = self.peak_deallocations.max(self.deallocations.len());
        let mut i = 0;
        while i < self.deallocations.len() {
            let d = self.deallocations[i];
            let due = clocks.drain.is_on() || d.fence <= clocks.completed;
            if due && !pass.locked.contains(&d.allocation) {
                self.deallocations.swap_remove(i);
                self.deallocated += 1;
                pass.kernel.deallocate(d.allocation);
            } else {
                i += 1;
            }
        }
        pass.registry.seal(pass.token, pass.guard);
    }

    /// The entry in slot `index`, sealed for its real destruction, if it is of the pass's
    /// kind and nothing holds it (at a drain of everything, whatever holds it).
    fn claim<'g, D: Driver, K: Kernel>(
        pass: &Pass<'g, D, K>,
        index: u32,
        resources: bool,
    ) -> Option<&'g Entry<D>> {
        // Always linked: each destroy is queued once and only this pass unlinks.
        let entry = pass.registry.linked(index, pass.guard)?;
        if (entry.ty() == HandleType::Resource) != resources {
            return None;
        }
        if pass.clocks.drain == Drain::Everything {
            entry.seal();
        } else if entry.ic_side_ref(pass.token).bound != 0 || !entry.try_seal() {
            // Bound on the immediate context, or held by views (R-H3), context-local handles
            // or command lists: at a drain that leaves what is held, it stays queued until
            // the queue goes with its context.
            return None;
        }
        Some(entry)
    }

    /// Really destroys a sealed entry that left the queue: the driver's destroy hook, then,
    /// also when that hook panics, the allocation's persistent lock ended (R-M4), the
    /// dependency's hold released, the slot unlinked, and the kernel memory deallocated (or
    /// queued for the completed fence).
    pub(crate) fn destroy_now<D: Driver, K: Kernel>(
        &mut self,
        pass: &mut Pass<'_, D, K>,
        index: u32,
        entry: &Entry<D>,
    ) {
        let allocation = entry.allocation();
        let fence = entry.ic_side(pass.token).last_buffer;
        let (registry, guard, clock, clocks) = (pass.registry, pass.guard, pass.clock, pass.clocks);
        let (kernel, locked) = (pass.kernel, pass.locked);
        let token = &mut *pass.token;
        // The rest, after the hook: run in place when it returns (inlined into the pass), by
        // the guard when it unwinds.
        let rest = |queue: &mut Self, token: &mut IcToken| {
            // A persistent lock of the allocation ends before the allocation can go (R-M4).
            // (An open Map's lock is lent to the Map: `locked` keeps that allocation.)
            if let (Some(allocation), Some(lock)) = (allocation, entry.ic_side(token).lock.take()) {
                kernel.unlock(allocation, lock);
            }
            if let Some(dep) = entry.dependency() {
                if let Ok(dep) = registry.find_linked(dep, guard) {
                    dep.release();
                }
            }
            registry.free(token, index, guard);
            queue.destroyed += 1;
            if let Some(allocation) = allocation {
                let due =
                    clock == Clock::Submitted || clocks.drain.is_on() || fence <= clocks.completed;
                if due && !locked.contains(&allocation) {
                    queue.deallocated += 1;
                    kernel.deallocate(allocation);
                } else {
                    queue.deallocations.push(Deallocation { allocation, fence });
                }
            }
        };
        let mut unwinding =
            scopeguard::guard_on_unwind((self, token), |(queue, token)| rest(queue, token));
        let ic = entry.ic_side(unwinding.1);
        pass.driver
            .destroy_object(entry.ty(), entry.object(), &mut ic.data);
        let (queue, token) = ScopeGuard::into_inner(unwinding);
        rest(queue, token);
    }

    /// Gives back capacity beyond the high watermark since the last trim (R-A1), with
    /// hysteresis so that a steady load never shrinks and regrows.
    pub(crate) fn trim(&mut self) {
        if self.waiting.capacity() > 2 * self.peak_waiting.max(8) {
            self.waiting
                .shrink_to(self.peak_waiting.max(self.waiting.len()));
        }
        if self.deallocations.capacity() > 2 * self.peak_deallocations.max(8) {
            self.deallocations
                .shrink_to(self.peak_deallocations.max(self.deallocations.len()));
        }
        self.peak_waiting = self.waiting.len();
        self.peak_deallocations = self.deallocations.len();
    }

    /// Memory the queue keeps.
    pub(crate) fn retained_bytes(&self) -> usize {
        self.waiting.capacity() * core::mem::size_of::<Waiting>()
            + self.deallocations.capacity() * core::mem::size_of::<Deallocation>()
    }
}
