//! The kernel services on Vulkan ([`VulkanKernel`]): allocations are `VkBuffer`s over
//! host-visible memory, the submission clock is one timeline semaphore.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cmdlist::dxgi::{PresentCallback, PresentStatus};
use cmdlist::{
    AllocationDesc, AllocationHandle, Clock, ContextId, CpuMapping, Error, Kernel, LockFlags,
    Result, Submission,
};

use crate::world::{lock, HostBuffer, VulkanWorld};

/// How long [`Kernel::wait_for_fence`] waits before it takes the device as lost.
const WAIT: Duration = Duration::from_secs(60);

/// The kernel side: memory, submission and fences over a [`VulkanWorld`].
///
/// - `allocate`: a `VkBuffer` with its own host-visible, host-coherent `VkDeviceMemory`,
///   persistently mapped (tests read the bytes back), under a non-zero id in a table behind
///   a read-write lock (allocate and deallocate are create and destroy paths, not per-draw
///   ones; the driver's per-command lookups take the read side).
/// - `submit`: the primary the driver closed in [`cmdlist::Driver::flush`], submitted with
///   the timeline semaphore signalled to [`Submission::fence`].
/// - `completed_fence`: `vkGetSemaphoreCounterValue`; `wait_for_fence`: `vkWaitSemaphores`.
/// - `submit` also checks the engine's allocation list against what the buffer's commands
///   really reference (every allocation the driver recorded a command on, those of the
///   driver-built lists it executes included), and `deallocate` that no buffer not yet
///   submitted references the allocation (R-D1).
/// - `deallocate`: checks the timeline against the newest submitted buffer that named the
///   allocation (a violation under [`Clock::Completed`], R-D4), and frees the memory then,
///   or, if that buffer is still pending, once the timeline passes it (and never before the
///   unlock of a lock still open on it).
/// - `lock` / `unlock` (R-M4: a staging Map, the immediate context's Map(NO_OVERWRITE)):
///   the allocation's own memory, in place, with no copy: it is persistently mapped and
///   host-coherent (the world allocates from a `HOST_VISIBLE | HOST_COHERENT` memory type
///   and refuses a device without one), so the lock hands out
///   [`CpuMapping::from_raw`] into the mapping, its length the size the allocation was
///   asked for, and the unlock has nothing to write back. So the kernel answers
///   [`Kernel::persistent_locks`] with `true`: the engine locks an allocation at its first
///   Map (with [`LockFlags::PERSISTENT`]) and keeps the lock across Maps, so the checks
///   below run at that first lock, and unlocks it before deallocating it. Coherent memory needs no
///   `vkFlushMappedMemoryRanges` nor `vkInvalidateMappedMemoryRanges`: what the host wrote
///   before a `vkQueueSubmit` is visible to the buffers it submits (the submit's host-write
///   guarantee), and what a buffer wrote is visible to the host once its fence passed on
///   the timeline, the engine's wait ([`Kernel::wait_for_fence`]: `vkWaitSemaphores` for
///   that buffer's value), after the host-read barrier every primary ends with. A lock
///   never waits (a staging Map's lock, without [`LockFlags::IGNORE_SYNC`], comes after the
///   engine's own wait; a Map(NO_OVERWRITE)'s has it); a synchronised lock of memory a
///   buffer not yet finished uses, `IGNORE_SYNC` on a lock that reads, a second lock of a
///   locked allocation (refused) and an unlock of one not locked are [`crate::Violation`]s
///   (R-M4). Unlike the soft kernel, which copies,
///   bytes written through a Map(READ) land in the memory (D3D11 leaves them undefined).
///   The immediate context's Map(DISCARD) reaches the memory by a GPU copy; the engine has a
///   Map(NO_OVERWRITE) wait for that copy's buffer first (R-M3), so the lock sees the
///   discard's bytes and no GPU write is pending on what it hands out.
#[derive(Clone)]
pub struct VulkanKernel {
    world: Arc<VulkanWorld>,
    /// The allocations locked, until their unlock.
    locked: Arc<Mutex<HashMap<u64, Locked>>>,
}

/// A lock open on an allocation.
struct Locked {
    /// The memory of an allocation deallocated while locked (its resource destroyed while
    /// mapped), kept for the mapping until the unlock, with the fence the timeline must
    /// pass before it is freed.
    kept: Option<(u64, HostBuffer)>,
}

impl VulkanKernel {
    pub(crate) fn new(world: Arc<VulkanWorld>) -> Self {
        VulkanKernel {
            world,
            locked: Arc::default(),
        }
    }

    /// The shared world.
    pub fn world(&self) -> &Arc<VulkanWorld> {
        &self.world
    }

    fn check_ic_thread(&self, what: &str) {
        let ic = *lock(&self.world.ic_thread);
        if ic.is_some_and(|t| t != std::thread::current().id()) {
            let what = format!("{what} off the immediate context's thread");
            self.world.violate("R-T2", what);
        }
    }
}

impl Kernel for VulkanKernel {
    fn allocate(&self, desc: &AllocationDesc) -> Result<AllocationHandle> {
        self.world.allocate(desc.size)
    }

    fn deallocate(&self, allocation: AllocationHandle) {
        let Some(a) = self.world.take_allocation(allocation) else {
            let what = format!("allocation {} deallocated twice", allocation.0);
            self.world.violate("R-D1", what);
            return;
        };
        let last = a.last_fence.into_inner();
        let mut ic = lock(&self.world.ic);
        let id = allocation.0.get();
        let unsubmitted = ic.open_refs.contains(&id)
            || ic.closed.iter().any(|c| c.refs.binary_search(&id).is_ok());
        if unsubmitted {
            let what = format!(
                "allocation {id} deallocated while a buffer not yet submitted references it"
            );
            self.world.violate("R-D1", what);
        }
        self.world.retire(&mut ic);
        if last > ic.last_submitted {
            // Cannot happen: the fence is a submitted one.
            self.world.violate(
                "R-D1",
                format!("allocation {} freed unsubmitted", allocation.0),
            );
        }
        let done = self.world.completed();
        if let Some(l) = lock(&self.locked).get_mut(&id) {
            // Destroyed while mapped: the mapping points into this memory until the unlock,
            // which hands it to the timeline (freed once it passes the buffers that used it).
            let until = if unsubmitted {
                ic.last_submitted + 1
            } else {
                last
            };
            l.kept = Some((until, a.memory));
            return;
        }
        if unsubmitted {
            // Still kept from the GPU's harm: freed once the next buffer completed.
            let next = ic.last_submitted + 1;
            ic.zombies.push((next, a.memory));
        } else if last > done {
            if self.world.config.retire_clock == Clock::Completed {
                let what = format!(
                    "allocation {} deallocated while buffer {last} that references it is \
                     pending on the GPU (timeline at {done})",
                    allocation.0
                );
                self.world.violate("R-D4", what);
            }
            // The GPU may still read it: freed when the timeline passes that buffer.
            ic.zombies.push((last, a.memory));
        } else {
            drop(ic);
            self.world.free_host_buffer(a.memory);
        }
    }

    fn submit(&self, submission: &Submission<'_>) -> Result<()> {
        self.check_ic_thread("a submit");
        let mut ic = lock(&self.world.ic);
        let closed = std::mem::take(&mut ic.closed);
        // Every allocation the GPU commands read or write must be in the allocation list.
        let mut listed: Vec<u64> = submission.allocations.iter().map(|a| a.0.get()).collect();
        listed.sort_unstable();
        for c in &closed {
            for id in &c.refs {
                if listed.binary_search(id).is_err() {
                    let what = format!(
                        "buffer {} references allocation {id}, missing from its allocation \
                         list",
                        submission.fence
                    );
                    self.world.violate("R-D1", what);
                }
            }
        }
        let cmds: Vec<_> = closed.iter().map(|c| c.cmd).collect();
        let hold = ic.hold;
        match self.world.queue_submit(&cmds, submission.fence, hold) {
            Ok(()) => {
                self.world
                    .note_submitted(submission.allocations, submission.fence);
                ic.last_submitted = submission.fence;
                let mut closed = closed.into_iter();
                // The buffers go in flight under this submission's fence (one entry each;
                // an empty submission still advances the clock).
                for c in closed.by_ref() {
                    ic.in_flight.push_back((submission.fence, c));
                }
                self.world.retire(&mut ic);
                Ok(())
            }
            Err(e) => {
                // Refused: the buffers stay closed and go with the next submit (R-D1).
                ic.closed = closed;
                Err(e)
            }
        }
    }

    /// The present callback (R-X1, R-T2): headless, it names the buffer that copied the
    /// presented surface into the screen (the driver's part of the present, submitted by the
    /// flush just before), which [`crate::VulkanWorld::screen`] waits for. Checks that the
    /// surfaces are allocated and that no buffer not yet submitted references them.
    fn present(&self, call: &PresentCallback) -> Result<PresentStatus> {
        self.check_ic_thread("the present callback");
        let ic = lock(&self.world.ic);
        for allocation in std::iter::once(call.src).chain(call.dst) {
            let id = allocation.0.get();
            let unsubmitted = ic.open_refs.contains(&id)
                || ic.closed.iter().any(|c| c.refs.binary_search(&id).is_ok());
            if unsubmitted {
                let what = format!(
                    "allocation {id} presented while a buffer not yet submitted references it"
                );
                self.world.violate("R-X1", what);
            }
            if !self.world.is_allocated(allocation) {
                let what = format!("allocation {id} presented but not allocated");
                self.world.violate("R-X1", what);
            }
        }
        let fence = ic.last_submitted;
        drop(ic);
        lock(&self.world.screen).fence = Some(fence);
        Ok(PresentStatus::default())
    }

    fn completed_fence(&self) -> u64 {
        self.world.completed()
    }

    fn wait_for_fence(&self, fence: u64) -> Result<()> {
        self.check_ic_thread("a wait");
        self.world.wait(fence, WAIT)?;
        let mut ic = lock(&self.world.ic);
        self.world.retire(&mut ic);
        Ok(())
    }

    /// The memory is the allocation's own, persistently mapped and host-coherent: the
    /// engine may keep a lock from Map to Map (R-M3..R-M5), and ends it before the
    /// deallocation (R-M4).
    fn persistent_locks(&self) -> bool {
        true
    }

    fn lock(&self, allocation: AllocationHandle, flags: LockFlags) -> Result<CpuMapping> {
        self.check_ic_thread("a lock");
        let id = allocation.0.get();
        if flags.contains(LockFlags::IGNORE_SYNC) && !flags.contains(LockFlags::WRITE_ONLY) {
            let what = format!("allocation {id} locked with IgnoreSync to read");
            self.world.violate("R-M4", what);
        }
        let Some((ptr, len, last)) = self.world.host_bytes(allocation) else {
            let what = format!("allocation {id} locked, never allocated or freed");
            self.world.violate("R-M4", what);
            return Err(Error::InvalidArg);
        };
        // A synchronised lock (a staging Map's), or a rename's memory (R-M5), needs every
        // buffer that uses the allocation finished: the engine waited for them (R-M4) or the
        // pool did. (IgnoreSync alone is a Map(NO_OVERWRITE), which does not wait.)
        let unreferenced = flags.contains(LockFlags::NO_EXISTING_REFERENCE);
        if unreferenced || !flags.contains(LockFlags::IGNORE_SYNC) {
            let ic = lock(&self.world.ic);
            let unsubmitted = ic.open_refs.contains(&id)
                || ic.closed.iter().any(|c| c.refs.binary_search(&id).is_ok());
            drop(ic);
            let done = self.world.completed();
            if unsubmitted || last > done {
                let (rule, how) = match unreferenced {
                    true => ("R-M5", "as unreferenced"),
                    false => ("R-M4", "to read"),
                };
                let what = format!(
                    "allocation {id} locked {how} while a buffer the GPU has not finished \
                     uses it (buffer {last}, timeline at {done})"
                );
                self.world.violate(rule, what);
            }
        }
        let len = usize::try_from(len).map_err(|_| Error::OutOfMemory)?;
        let mut locked = lock(&self.locked);
        if locked.contains_key(&id) {
            // A second mapping of the same bytes would alias the first.
            drop(locked);
            self.world
                .violate("R-M4", format!("allocation {id} locked twice"));
            return Err(Error::InvalidArg);
        }
        locked.insert(id, Locked { kept: None });
        // SAFETY: `ptr` is the start of the allocation's memory, mapped whole and persistently
        // (`VulkanWorld::host_buffer`), at least `len` bytes long (`host_bytes` caps `len` at the
        // buffer's size), its bytes initialised (memory the Vulkan driver maps holds whatever
        // values it holds, never Rust's uninitialised bytes); it stays mapped until the memory is
        // freed, which waits for this lock's unlock (`deallocate` keeps the memory of a locked
        // allocation in its `Locked::kept` until `unlock`, and the world, which frees what is left
        // when it is dropped, outlives this kernel's mappings: the device holds the kernel, and the
        // immediate context that holds the mapping holds the device). Nothing else on the host
        // writes the memory (the driver writes resources through upload memory and GPU copies) or
        // maps it again until the unlock (a second lock is refused above); only
        // `VulkanWorld::read`, a test hook, reads it. The GPU: a staging Map waited for the newest
        // buffer that uses the resource (checked above when the lock reads), and until the Unmap
        // the application promises, as under D3D11, not to make the GPU use a mapped staging
        // resource, nor, after a Map(NO_OVERWRITE), to make it write the bytes it writes or read
        // them (R-M2). This driver's immediate-context Map(DISCARD) is a GPU copy of the whole
        // resource: the engine waits for its buffer before a Map(NO_OVERWRITE) locks the resource
        // (R-M3), so no GPU write is pending here.
        Ok(unsafe { CpuMapping::from_raw(ptr, len) })
    }

    fn unlock(&self, allocation: AllocationHandle, mapping: CpuMapping) {
        self.check_ic_thread("an unlock");
        let id = allocation.0.get();
        let Some(locked) = lock(&self.locked).remove(&id) else {
            let what = format!("allocation {id} unlocked, not locked");
            self.world.violate("R-M4", what);
            return;
        };
        // The bytes are the memory's own, and coherent: nothing to copy back or flush, whatever
        // the lock's flags.
        drop(mapping);
        if let Some(kept) = locked.kept {
            let mut ic = lock(&self.world.ic);
            ic.zombies.push(kept);
            self.world.retire(&mut ic);
        }
    }

    fn set_error(&self, context: ContextId, error: Error) {
        self.world.set_error(context, error);
    }

    fn perform_amortized_processing(&self, context: ContextId) {
        if context == ContextId::Immediate {
            let mut ic = lock(&self.world.ic);
            self.world.retire(&mut ic);
        }
    }
}
