//! The kernel services on Vulkan ([`VulkanKernel`]): allocations are `VkBuffer`s over
//! host-visible memory, the submission clock is one timeline semaphore.

use std::sync::Arc;
use std::time::Duration;

use cmdlist::dxgi::{PresentCallback, PresentStatus};
use cmdlist::{
    AllocationDesc, AllocationHandle, Clock, ContextId, Error, Kernel, Result, Submission,
};

use crate::world::{lock, VulkanWorld};

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
///   or, if that buffer is still pending, once the timeline passes it.
#[derive(Clone)]
pub struct VulkanKernel {
    world: Arc<VulkanWorld>,
}

impl VulkanKernel {
    pub(crate) fn new(world: Arc<VulkanWorld>) -> Self {
        VulkanKernel { world }
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
