//! The soft kernel: CPU memory, a fence timeline and the protocol checks.

use std::num::NonZeroU64;
use std::sync::Arc;

use super::world::{Allocation, Gpu, Hook, SoftWorld, State, TraceEvent};
use crate::dxgi::{
    DisplayModeCallback, DisplayModeOutcome, PresentCallback, PresentStatus, ResidencyStatus,
};
use crate::error::{Error, Result};
use crate::kernel::{AllocationDesc, AllocationHandle, ContextId, Kernel, Submission};
use crate::mapping::{CpuMapping, LockFlags};

/// The soft kernel. See the module docs of [`crate::soft`].
#[derive(Debug, Clone)]
pub struct SoftKernel {
    world: Arc<SoftWorld>,
}

impl SoftKernel {
    pub(crate) fn new(world: Arc<SoftWorld>) -> Self {
        SoftKernel { world }
    }

    /// The shared world.
    pub fn world(&self) -> &Arc<SoftWorld> {
        &self.world
    }
}

/// The most bytes one soft allocation may hold (a larger request is out of memory).
const MAX_ALLOCATION: u64 = 1 << 30;

impl Kernel for SoftKernel {
    fn allocate(&self, desc: &AllocationDesc) -> Result<AllocationHandle> {
        if desc.size > MAX_ALLOCATION {
            return Err(Error::OutOfMemory);
        }
        // Fallibly: a 32-bit process may not find a gigabyte of address space, and that is
        // out of memory for the create, not an abort.
        let size = usize::try_from(desc.size).map_err(|_| Error::OutOfMemory)?;
        let mut bytes = Vec::new();
        bytes
            .try_reserve_exact(size)
            .map_err(|_| Error::OutOfMemory)?;
        bytes.resize(size, 0);
        let mut s = self.world.lock();
        s.next_allocation += 1;
        let id = s.next_allocation;
        s.allocations.insert(
            id,
            Allocation {
                bytes,
                in_open_buffer: false,
                last_submitted: 0,
                ever_referenced: false,
            },
        );
        self.world
            .note(&mut s, TraceEvent::of(Hook::Allocate).allocation(id));
        Ok(AllocationHandle(
            NonZeroU64::new(id).expect("ids start at 1"),
        ))
    }

    fn deallocate(&self, allocation: AllocationHandle) {
        let id = allocation.0.get();
        let mut s = self.world.lock();
        self.world
            .note(&mut s, TraceEvent::of(Hook::Deallocate).allocation(id));
        let thread = std::thread::current().id();
        if s.locked.remove(&id).is_some() {
            let what = format!("allocation {id} deallocated while locked (R-M4)");
            SoftWorld::violate(&mut s, "R-M4", what);
        }
        let completed = s.completed;
        let ic_thread = s.ic_thread;
        match s.allocations.remove(&id) {
            // Ids are handed out in order and never reused: a known id that is gone was
            // freed before (no set of freed ids to grow without bound).
            None if id != 0 && id <= s.next_allocation => {
                SoftWorld::violate(
                    &mut s,
                    "double-free",
                    format!("allocation {id} deallocated twice"),
                );
            }
            None => SoftWorld::violate(
                &mut s,
                "unknown-free",
                format!("allocation {id} never allocated"),
            ),
            Some(a) => {
                if a.in_open_buffer {
                    SoftWorld::violate(
                        &mut s,
                        "R-D1",
                        format!("allocation {id} deallocated while the open command buffer references it"),
                    );
                }
                if self.world.config.strict_gpu && a.last_submitted > completed {
                    SoftWorld::violate(
                        &mut s,
                        "R-D4",
                        format!(
                            "allocation {id} deallocated while buffer {} that references it runs (completed {completed})",
                            a.last_submitted
                        ),
                    );
                }
                if a.ever_referenced
                    && !s.ic_ended
                    && ic_thread.is_some()
                    && ic_thread != Some(thread)
                {
                    SoftWorld::violate(
                        &mut s,
                        "R-D1",
                        format!("allocation {id} deallocated off the immediate context's thread"),
                    );
                }
            }
        }
    }

    fn submit(&self, submission: &Submission<'_>) -> Result<()> {
        let mut s = self.world.lock();
        self.world
            .note(&mut s, TraceEvent::of(Hook::Submit).fence(submission.fence));
        if s.ic_thread.is_some() && s.ic_thread != Some(std::thread::current().id()) {
            SoftWorld::violate(
                &mut s,
                "R-T2",
                "submit off the immediate context's thread".into(),
            );
        }
        if let Some(told) = s.open_buffer.take() {
            if told != submission.fence {
                let what = format!(
                    "hooks were told buffer {told}, the submit carries fence {}",
                    submission.fence
                );
                SoftWorld::violate(&mut s, "R-D1", what);
            }
        }
        if submission.fence <= s.last_submitted {
            let what = format!(
                "fence {} submitted after {}",
                submission.fence, s.last_submitted
            );
            SoftWorld::violate(&mut s, "R-T1", what);
        }
        // The engine's allocation list must cover what the driver's commands referenced.
        let refs = std::mem::take(&mut s.open_refs);
        for id in &refs {
            if !submission.allocations.iter().any(|a| a.0.get() == *id) {
                SoftWorld::violate(
                    &mut s,
                    "R-D1",
                    format!(
                        "allocation {id} referenced by buffer {} but not in its allocation list",
                        submission.fence
                    ),
                );
            }
            if let Some(a) = s.allocations.get_mut(id) {
                a.in_open_buffer = false;
                a.last_submitted = submission.fence;
            }
        }
        s.open_refs = refs;
        s.open_refs.clear();
        let lists = std::mem::take(&mut s.open_lists);
        for id in &lists {
            s.list_refs.insert(*id, submission.fence);
        }
        s.open_lists = lists;
        s.open_lists.clear();
        s.submitted.push_back((submission.fence, 0));
        s.last_submitted = submission.fence;
        s.submits += 1;
        if self.world.config.gpu == Gpu::Immediate {
            SoftWorld::complete(&mut s, submission.fence);
        }
        Ok(())
    }

    fn completed_fence(&self) -> u64 {
        let mut s = self.world.lock();
        if let Gpu::PollLag(lag) = self.world.config.gpu {
            for (_, polls) in s.submitted.iter_mut() {
                *polls += 1;
            }
            while let Some(&(fence, polls)) = s.submitted.front() {
                if polls < lag {
                    break;
                }
                s.submitted.pop_front();
                s.completed = fence;
            }
        }
        s.completed
    }

    fn wait_for_fence(&self, fence: u64) -> Result<()> {
        let mut s = self.world.lock();
        self.world
            .note(&mut s, TraceEvent::of(Hook::WaitForFence).fence(fence));
        SoftWorld::complete(&mut s, fence);
        Ok(())
    }

    /// A copy of the allocation's bytes, written back at the unlock unless read-only (for a
    /// Map(NO_OVERWRITE), only the bytes the application changed: the GPU may have written
    /// the rest since). A lock of memory a buffer the GPU has not finished uses, or the
    /// open buffer, is a violation (R-M4: the engine waits first), except for a lock with
    /// IgnoreSync, a Map(NO_OVERWRITE) whose application writes where the GPU does not read
    /// (R-M2), or a rename's memory, checked unreferenced (R-M5). Locking what is locked
    /// is a violation too (the engine maps a resource once at a time, R-C4).
    fn lock(&self, allocation: AllocationHandle, flags: LockFlags) -> Result<CpuMapping> {
        let id = allocation.0.get();
        let mut s = self.world.lock();
        self.world
            .note(&mut s, TraceEvent::of(Hook::Lock).allocation(id));
        Self::check_ic_thread(&mut s, "lock callback");
        if flags.contains(LockFlags::IGNORE_SYNC) && !flags.contains(LockFlags::WRITE_ONLY) {
            let what = format!("allocation {id} locked with IgnoreSync to read");
            SoftWorld::violate(&mut s, "R-M4", what);
        }
        let completed = s.completed;
        let Some(a) = s.allocations.get(&id) else {
            let what = format!("allocation {id} locked, never allocated or freed");
            SoftWorld::violate(&mut s, "R-M4", what);
            return Err(Error::InvalidArg);
        };
        let busy = a.in_open_buffer || a.last_submitted > completed;
        let bytes = a.bytes.clone().into_boxed_slice();
        if flags.contains(LockFlags::NO_EXISTING_REFERENCE) {
            if busy {
                // A rename's memory handed out while a buffer may still read what it holds.
                let what = format!(
                    "allocation {id} locked as unreferenced while a buffer the GPU has not \
                     finished uses it (completed {completed})"
                );
                SoftWorld::violate(&mut s, "R-M5", what);
            }
        } else if busy && !flags.contains(LockFlags::IGNORE_SYNC) {
            // A synchronised lock (a staging Map's): the kernel would wait.
            let what = format!(
                "allocation {id} locked while a buffer the GPU has not finished uses it \
                 (completed {completed})"
            );
            SoftWorld::violate(&mut s, "R-M4", what);
        }
        // A Map(NO_OVERWRITE)'s: the GPU may write the rest of the buffer before the unlock.
        let no_overwrite = flags.contains(LockFlags::IGNORE_SYNC)
            && !flags.contains(LockFlags::NO_EXISTING_REFERENCE);
        let copied_in = no_overwrite.then(|| bytes.clone());
        if s.locked.insert(id, (flags, copied_in)).is_some() {
            let what = format!("allocation {id} locked twice");
            SoftWorld::violate(&mut s, "R-M4", what);
        }
        Ok(CpuMapping::owned(bytes))
    }

    fn unlock(&self, allocation: AllocationHandle, mapping: CpuMapping) {
        let id = allocation.0.get();
        let mut s = self.world.lock();
        self.world
            .note(&mut s, TraceEvent::of(Hook::Unlock).allocation(id));
        let Some((flags, copied_in)) = s.locked.remove(&id) else {
            let what = format!("allocation {id} unlocked, not locked");
            SoftWorld::violate(&mut s, "R-M4", what);
            return;
        };
        if flags.contains(LockFlags::READ_ONLY) {
            return;
        }
        let written = mapping.into_owned().unwrap_or_default();
        match s.allocations.get_mut(&id) {
            Some(a) if a.bytes.len() == written.len() => match copied_in {
                // Only what the application changed: what the GPU wrote since stays.
                // (Copied from these bytes into a mapping of their length: as long.)
                Some(before) => {
                    for ((now, was), new) in a.bytes.iter_mut().zip(&before[..]).zip(&written) {
                        if was != new {
                            *now = *new;
                        }
                    }
                }
                _ => a.bytes.copy_from_slice(&written),
            },
            _ => {
                let what = format!("allocation {id} unlocked after it changed or went");
                SoftWorld::violate(&mut s, "R-M4", what);
            }
        }
    }

    fn set_error(&self, context: ContextId, error: Error) {
        let mut s = self.world.lock();
        self.world.note(&mut s, TraceEvent::of(Hook::SetError));
        s.errors.push((context, error));
    }

    fn perform_amortized_processing(&self, _context: ContextId) {
        let mut s = self.world.lock();
        self.world
            .note(&mut s, TraceEvent::of(Hook::AmortizedProcessing));
        s.amortized += 1;
    }

    fn present(&self, call: &PresentCallback) -> Result<PresentStatus> {
        let mut s = self.world.lock();
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::Present).allocation(call.src.0.get()),
        );
        Self::check_ic_thread(&mut s, "present callback");
        for allocation in std::iter::once(call.src).chain(call.dst) {
            match s.allocations.get(&allocation.0.get()) {
                Some(a) if a.in_open_buffer => {
                    let what = format!(
                        "allocation {} presented while the unsubmitted buffer references it",
                        allocation.0
                    );
                    SoftWorld::violate(&mut s, "R-X1", what);
                }
                Some(_) => {}
                None => {
                    let what = format!("allocation {} presented but not allocated", allocation.0);
                    SoftWorld::violate(&mut s, "R-X1", what);
                }
            }
        }
        // The screen keeps its memory from one present to the next.
        let mut screen = s.dxgi.screen.take().unwrap_or_default();
        let presented = match s.allocations.get(&call.src.0.get()) {
            Some(a) => {
                screen.clear();
                screen.extend_from_slice(&a.bytes);
                true
            }
            None => false,
        };
        s.dxgi.screen = presented.then_some(screen);
        if self.world.config.trace {
            s.dxgi.presents.push(*call);
        }
        Ok(s.dxgi.present_status)
    }

    fn set_display_mode(&self, call: &DisplayModeCallback) -> Result<DisplayModeOutcome> {
        let mut s = self.world.lock();
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::SetDisplayMode).allocation(call.primary.0.get()),
        );
        Self::check_ic_thread(&mut s, "set-display-mode callback");
        if !s.allocations.contains_key(&call.primary.0.get()) {
            let what = format!("display mode set on unallocated {}", call.primary.0);
            SoftWorld::violate(&mut s, "R-X2", what);
        }
        s.dxgi.display_modes.push(call.primary);
        Ok(DisplayModeOutcome::Set)
    }

    fn set_priority(&self, allocations: &[AllocationHandle], priority: u32) -> Result<()> {
        let mut s = self.world.lock();
        self.world.note(&mut s, TraceEvent::of(Hook::SetPriority));
        Self::check_ic_thread(&mut s, "set-priority callback");
        Self::check_allocated(&mut s, allocations, "R-X3");
        s.dxgi.priorities.push((allocations.to_vec(), priority));
        Ok(())
    }

    fn query_residency(
        &self,
        allocations: &[AllocationHandle],
        out: &mut [ResidencyStatus],
    ) -> Result<()> {
        let mut s = self.world.lock();
        self.world
            .note(&mut s, TraceEvent::of(Hook::QueryResidency));
        Self::check_ic_thread(&mut s, "query-residency callback");
        Self::check_allocated(&mut s, allocations, "R-X4");
        if allocations.len() != out.len() {
            return Err(Error::InvalidArg);
        }
        for (status, allocation) in out.iter_mut().zip(allocations) {
            *status = s
                .dxgi
                .residency
                .get(&allocation.0.get())
                .copied()
                .unwrap_or_default();
        }
        Ok(())
    }
}

impl SoftKernel {
    /// Flags a DXGI callback off the immediate context's thread (R-T2).
    fn check_ic_thread(s: &mut State, what: &str) {
        if s.ic_thread.is_some() && s.ic_thread != Some(std::thread::current().id()) {
            SoftWorld::violate(
                s,
                "R-T2",
                format!("{what} off the immediate context's thread"),
            );
        }
    }

    /// Flags a callback naming an allocation the kernel does not have.
    fn check_allocated(s: &mut State, allocations: &[AllocationHandle], rule: &'static str) {
        for allocation in allocations {
            if !s.allocations.contains_key(&allocation.0.get()) {
                let what = format!("callback names unallocated {}", allocation.0);
                SoftWorld::violate(s, rule, what);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::dxgi::{DxgiContext, PresentArgs, PresentFlags};
    use crate::soft::{self, SoftConfig};
    use crate::{BindFlags, DeviceConfig, ResourceDesc, Texture2d};

    /// R-T2: only the engine makes a present callback's argument, inside a present on the
    /// immediate context's thread; should one reach the kernel from another thread, the soft
    /// kernel flags it.
    #[test]
    fn r_t2_present_callback_off_the_ic_thread_is_flagged() {
        let (device, mut ic, world) =
            soft::device(SoftConfig::from_env().unwrap(), DeviceConfig::default()).unwrap();
        let texture = Texture2d::default(); // one B8G8R8A8_UNORM pixel
        let bb = device
            .create_resource(ResourceDesc {
                byte_size: 4,
                bind: BindFlags::PRESENT,
                texture: Some(texture),
                ..Default::default()
            })
            .unwrap();
        let args = PresentArgs {
            src: bb,
            src_subresource: 0,
            dst: None,
            dxgi_context: DxgiContext(1),
            flags: PresentFlags::empty(),
            flip_interval: 0,
        };
        ic.present(&args).unwrap();
        assert!(world.violations().is_empty(), "{:?}", world.violations());
        let call = world.presents()[0];
        std::thread::scope(|s| {
            s.spawn(|| crate::Kernel::present(device.kernel(), &call));
        });
        let rules: Vec<_> = world.violations().iter().map(|v| v.rule).collect();
        assert_eq!(rules, ["R-T2"]);
        drop(device);
        ic.destroy_device().unwrap();
    }
}
