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
use crate::registry::{IcToken, Registry};

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
    /// Device destruction: the GPU is idle, destroy everything.
    pub(crate) drain: bool,
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

    /// Counts a destruction that ran outside the queue (a primary's, R-P1).
    pub(crate) fn count_destroyed(&mut self, deallocated: bool) {
        self.destroyed += 1;
        self.deallocated += u64::from(deallocated);
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
    /// unlinked for reclamation. Immediate context's thread (its `token`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn process<D: Driver, K: Kernel>(
        &mut self,
        registry: &Registry<D>,
        token: &mut IcToken,
        driver: &D,
        kernel: &K,
        clock: Clock,
        clocks: Clocks,
        guard: &Guard,
    ) {
        self.collect(registry);
        self.peak_waiting = self.peak_waiting.max(self.waiting.len());
        // Dependents (views) before what they depend on (resources), R-H3.
        for resources in [false, true] {
            let mut i = 0;
            while i < self.waiting.len() {
                let w = self.waiting[i];
                if (clocks.drain || w.tag <= clocks.submitted_through)
                    && self.destroy(
                        registry, token, driver, kernel, clock, clocks, guard, w.index, resources,
                    )
                {
                    self.waiting.swap_remove(i);
                } else {
                    i += 1;
                }
            }
        }
        self.peak_deallocations = self.peak_deallocations.max(self.deallocations.len());
        let mut deallocated = 0;
        self.deallocations.retain(|d| {
            let due = clocks.drain || d.fence <= clocks.completed;
            if due {
                kernel.deallocate(d.allocation);
                deallocated += 1;
            }
            !due
        });
        self.deallocated += deallocated;
        registry.seal(token, guard);
    }

    /// Really destroys the object in slot `index` if it is of the pass's kind and nothing
    /// holds it; returns whether it did.
    #[allow(clippy::too_many_arguments)]
    fn destroy<D: Driver, K: Kernel>(
        &mut self,
        registry: &Registry<D>,
        token: &mut IcToken,
        driver: &D,
        kernel: &K,
        clock: Clock,
        clocks: Clocks,
        guard: &Guard,
        index: u32,
        resources: bool,
    ) -> bool {
        let Some(entry) = registry.linked(index, guard) else {
            return true; // already reclaimed (cannot happen: each destroy is queued once)
        };
        if (entry.ty() == HandleType::Resource) != resources {
            return false;
        }
        if clocks.drain {
            entry.seal();
        } else if !entry.try_seal() {
            return false; // held by views (R-H3), context-local handles or command lists
        }
        // SAFETY: this runs on the immediate context's thread (the queue is the IC's), and no
        // other reference to this entry's IC side is alive during the call.
        let ic = unsafe { entry.ic_side() };
        driver.destroy_object(entry.ty(), entry.object(), &mut ic.data);
        if let Some(dep) = entry.dependency() {
            if let Ok(dep) = registry.find_linked(dep, guard) {
                dep.release();
            }
        }
        if let Some(allocation) = entry.allocation() {
            let fence = ic.last_buffer;
            if clock == Clock::Submitted || clocks.drain || fence <= clocks.completed {
                kernel.deallocate(allocation);
                self.deallocated += 1;
            } else {
                self.deallocations.push(Deallocation { allocation, fence });
            }
        }
        registry.free(token, index, guard);
        self.destroyed += 1;
        true
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
