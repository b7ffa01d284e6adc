//! The allocations a Map(DISCARD) on the immediate context renames a resource to (R-M5).
//!
//! A renamed-away allocation waits here, stamped with the newest buffer that may read it,
//! until the GPU has finished that buffer; only then is it handed out again, to a resource
//! whose allocation has the same size. Allocations of one size are interchangeable (the
//! driver's private-size answer fixed the layout), so a class is one exact size, and a
//! steady pattern of discards cycles through a few allocations without allocating.
//!
//! Trimmed at amortised processing (R-A1) by age rather than by a count: an allocation that
//! sat unused through [`KEEP_TRIMS`] trims is given back to the kernel, so a ring discarded
//! once a frame keeps its few allocations while a burst's extra ones go. How many of one size
//! may wait at all is the device's `rename_waiting`, which the context checks
//! ([`RenamePool::waiting`]) before it allocates another.

use std::collections::VecDeque;

use crate::kernel::AllocationHandle;

/// Trims an idle allocation survives: amortised processing runs about once a millisecond of
/// activity (R-A1), so this is a few frames' worth at 60 Hz, longer than a resource
/// discarded once a frame waits between two of its discards.
pub(super) const KEEP_TRIMS: u64 = 64;

/// A renamed-away allocation.
#[derive(Clone, Copy, Debug)]
struct Idle {
    allocation: AllocationHandle,
    /// The newest buffer that may read it: reusable once the completed fence reaches it.
    last_buffer: u64,
    /// The pool's trim count when it came back.
    trims: u64,
}

/// The allocations of one size.
#[derive(Debug)]
struct SizeClass {
    size: u64,
    /// Oldest first: stamps grow along the queue, so the front is the first to be done.
    idle: VecDeque<Idle>,
}

/// The pool: see the module docs. Owned by the immediate context (its thread only).
#[derive(Debug, Default)]
pub(super) struct RenamePool {
    classes: Vec<SizeClass>,
    trims: u64,
}

impl RenamePool {
    /// An allocation of `size` bytes that no buffer the GPU has not finished reads, if the
    /// pool has one.
    pub(super) fn take(&mut self, size: u64, completed: u64) -> Option<AllocationHandle> {
        let class = self.classes.iter_mut().find(|c| c.size == size)?;
        match class.idle.front() {
            Some(idle) if idle.last_buffer <= completed => {
                class.idle.pop_front().map(|idle| idle.allocation)
            }
            _ => None,
        }
    }

    /// Allocations of `size` bytes the pool holds, whether the GPU is done with them or not.
    pub(super) fn waiting(&self, size: u64) -> usize {
        self.classes
            .iter()
            .find(|c| c.size == size)
            .map_or(0, |c| c.idle.len())
    }

    /// Takes back `allocation` (`size` bytes), which buffers up to `last_buffer` may read.
    /// Its queue keeps its capacity, so a steady pattern of discards allocates nothing.
    pub(super) fn give(&mut self, size: u64, allocation: AllocationHandle, last_buffer: u64) {
        let trims = self.trims;
        let index = match self.classes.iter().position(|c| c.size == size) {
            Some(index) => index,
            None => {
                self.classes.push(SizeClass {
                    size,
                    idle: VecDeque::new(),
                });
                self.classes.len() - 1
            }
        };
        let idle = &mut self.classes[index].idle;
        // Stamps only grow along the queue, so that its front is the first to be done: a
        // rename stamps with the open buffer, whose number never falls, and an allocation
        // given back unused (stamp 0) waits behind the others.
        let last_buffer = idle
            .back()
            .map_or(last_buffer, |b| b.last_buffer.max(last_buffer));
        idle.push_back(Idle {
            allocation,
            last_buffer,
            trims,
        });
    }

    /// Amortised processing (R-A1): each allocation the GPU is done with that sat unused
    /// through [`KEEP_TRIMS`] trims goes to `deallocate` (the pool lets go of it first).
    pub(super) fn trim(&mut self, completed: u64, mut deallocate: impl FnMut(AllocationHandle)) {
        self.trims += 1;
        let trims = self.trims;
        for class in &mut self.classes {
            while let Some(idle) = class.idle.front() {
                if idle.last_buffer > completed || idle.trims + KEEP_TRIMS > trims {
                    break;
                }
                let idle = class.idle.pop_front().expect("the front was there");
                deallocate(idle.allocation);
            }
        }
    }

    /// Every allocation the GPU is done with (the completed fence reached its buffer) to
    /// `deallocate`, whatever its age: an explicit trim.
    pub(super) fn release_done(
        &mut self,
        completed: u64,
        mut deallocate: impl FnMut(AllocationHandle),
    ) {
        for class in &mut self.classes {
            while class
                .idle
                .front()
                .is_some_and(|idle| idle.last_buffer <= completed)
            {
                let idle = class.idle.pop_front().expect("the front was there");
                deallocate(idle.allocation);
            }
        }
    }

    /// Device destruction, once the GPU is idle (R-D3): every allocation to `deallocate`,
    /// each leaving the pool before its call (a call that panics repeats none).
    pub(super) fn drain(&mut self, mut deallocate: impl FnMut(AllocationHandle)) {
        for class in &mut self.classes {
            while let Some(idle) = class.idle.pop_front() {
                deallocate(idle.allocation);
            }
        }
        self.classes.clear();
    }

    /// Allocations waiting in the pool.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.classes.iter().map(|c| c.idle.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU64;

    fn a(id: u64) -> AllocationHandle {
        AllocationHandle(NonZeroU64::new(id).unwrap())
    }

    #[test]
    fn an_allocation_is_reused_only_once_its_buffer_completed_and_only_at_its_size() {
        let mut pool = RenamePool::default();
        pool.give(64, a(1), 3);
        assert_eq!(pool.take(64, 2), None, "buffer 3 not finished");
        assert_eq!(pool.take(128, 3), None, "another size");
        assert_eq!(pool.take(64, 3), Some(a(1)));
        assert_eq!(pool.take(64, 3), None);
    }

    #[test]
    fn stamps_never_fall_along_a_class() {
        let mut pool = RenamePool::default();
        pool.give(64, a(1), 5);
        pool.give(64, a(2), 4);
        assert_eq!(pool.take(64, 4), None);
        assert_eq!(pool.take(64, 5), Some(a(1)));
        assert_eq!(pool.take(64, 5), Some(a(2)));
    }

    #[test]
    fn trim_gives_back_what_sat_unused_and_done_only() {
        let mut pool = RenamePool::default();
        pool.give(64, a(1), 1);
        let mut gone = vec![];
        for _ in 0..KEEP_TRIMS - 1 {
            pool.trim(1, |x| gone.push(x));
        }
        assert!(gone.is_empty(), "not idle long enough");
        pool.give(64, a(2), 9);
        pool.trim(1, |x| gone.push(x));
        assert_eq!(gone, [a(1)]);
        for _ in 0..2 * KEEP_TRIMS {
            pool.trim(8, |x| gone.push(x));
        }
        assert_eq!(gone, [a(1)], "buffer 9 not finished");
        pool.trim(9, |x| gone.push(x));
        assert_eq!(gone, [a(1), a(2)]);
        assert_eq!(pool.len(), 0);
    }

    #[test]
    fn drain_gives_back_everything() {
        let mut pool = RenamePool::default();
        pool.give(64, a(1), 7);
        pool.give(32, a(2), 8);
        let mut gone = vec![];
        pool.drain(|x| gone.push(x));
        gone.sort_by_key(|x| x.0);
        assert_eq!(gone, [a(1), a(2)]);
        assert_eq!(pool.len(), 0);
    }
}
