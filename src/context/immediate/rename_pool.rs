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

use crate::kernel::AllocationHandle;
use crate::mapping::CpuMapping;

/// Trims an idle allocation survives: amortised processing runs about once a millisecond of
/// activity (R-A1), so this is a few frames' worth at 60 Hz, longer than a resource
/// discarded once a frame waits between two of its discards.
pub(super) const KEEP_TRIMS: u64 = 64;

/// One size's place in the pool: found once per resource ([`RenamePool::class`]) and kept
/// in its immediate-context side, so that a rename reaches its allocations without a
/// search. Valid for the pool's life (a class is never removed).
pub(super) type ClassId = u32;

/// A renamed-away allocation.
#[derive(Debug)]
pub(super) struct Idle {
    pub(super) allocation: AllocationHandle,
    /// Its persistent lock, where the kernel keeps locks across Maps
    /// ([`crate::Kernel::persistent_locks`]): a rename that takes it calls no kernel.
    pub(super) lock: Option<CpuMapping>,
    /// The newest buffer that may read it: reusable once the completed fence reaches it.
    last_buffer: u64,
    /// The pool's trim count when it came back.
    trims: u64,
}

/// The allocations of one size.
#[derive(Debug)]
struct SizeClass {
    size: u64,
    /// Oldest first: stamps grow along the queue, so the front is the first to be done and
    /// a take is one look at it.
    idle: Fifo,
}

/// A first-in first-out queue of idle allocations: a ring whose size is a power of two,
/// doubled when full (its capacity kept, so a steady pattern of discards allocates
/// nothing). A `VecDeque` cost a rename twice as many instructions (its push is not
/// inlined, and its index wraps with a comparison).
#[derive(Debug, Default)]
struct Fifo {
    /// `slots[(head + i) & mask]` for `i < len` hold the queue, the rest `None`.
    slots: Vec<Option<Idle>>,
    head: usize,
    len: usize,
}

impl Fifo {
    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    fn len(&self) -> usize {
        self.len
    }

    fn front(&self) -> Option<&Idle> {
        match self.len {
            0 => None,
            _ => self.slots[self.head].as_ref(),
        }
    }

    fn back(&self) -> Option<&Idle> {
        match self.len {
            0 => None,
            len => self.slots[(self.head + len - 1) & self.mask()].as_ref(),
        }
    }

    #[inline]
    fn pop_front(&mut self) -> Option<Idle> {
        if self.len == 0 {
            return None;
        }
        let idle = self.slots[self.head].take();
        self.head = (self.head + 1) & self.mask();
        self.len -= 1;
        idle
    }

    #[inline]
    fn push_back(&mut self, idle: Idle) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let at = (self.head + self.len) & self.mask();
        // Past the queue every slot is empty: nothing to drop.
        let empty = self.slots[at].replace(idle);
        debug_assert!(empty.is_none());
        core::mem::forget(empty);
        self.len += 1;
    }

    /// Doubles the ring (at least 4 slots), its queue laid out from slot 0.
    #[cold]
    fn grow(&mut self) {
        let capacity = (2 * self.slots.len()).max(4);
        let mut slots = Vec::with_capacity(capacity);
        let mask = self.mask();
        for i in 0..self.len {
            slots.push(self.slots[(self.head + i) & mask].take());
        }
        slots.resize_with(capacity, || None);
        self.slots = slots;
        self.head = 0;
    }
}

/// The pool: see the module docs. Owned by the immediate context (its thread only).
#[derive(Debug, Default)]
pub(super) struct RenamePool {
    classes: Vec<SizeClass>,
    trims: u64,
}

impl RenamePool {
    /// The class of allocations of `size` bytes, made on its first use.
    pub(super) fn class(&mut self, size: u64) -> ClassId {
        let index = match self.classes.iter().position(|c| c.size == size) {
            Some(index) => index,
            None => {
                self.classes.push(SizeClass {
                    size,
                    idle: Fifo::default(),
                });
                self.classes.len() - 1
            }
        };
        index as ClassId
    }

    /// An allocation of `class` that no buffer the GPU has not finished reads, if the pool
    /// has one: its oldest, in O(1).
    #[inline(always)]
    pub(super) fn take(&mut self, class: ClassId, completed: u64) -> Option<Idle> {
        let idle = &mut self.classes[class as usize].idle;
        match idle.front() {
            Some(front) if front.last_buffer <= completed => idle.pop_front(),
            _ => None,
        }
    }

    /// Allocations of `class` the pool holds, whether the GPU is done with them or not.
    pub(super) fn waiting(&self, class: ClassId) -> usize {
        self.classes[class as usize].idle.len()
    }

    /// Takes back `allocation` of `class` (with its persistent lock, if it has one), which
    /// buffers up to `last_buffer` may read: the open buffer at a rename, never below an
    /// earlier rename's, or 0 for an allocation no buffer read (it takes the newest stamp). Its queue keeps its capacity, so a steady
    /// pattern of discards allocates nothing.
    #[inline(always)]
    pub(super) fn give(
        &mut self,
        class: ClassId,
        allocation: AllocationHandle,
        lock: Option<CpuMapping>,
        last_buffer: u64,
    ) {
        let trims = self.trims;
        let idle = &mut self.classes[class as usize].idle;
        // Stamps only grow along the queue, so that its front is the first to be done: a
        // rename stamps with the open buffer, whose number never falls (so never below the
        // back's), and an allocation given back unused (stamp 0) waits behind the others.
        let last_buffer = match last_buffer {
            0 => idle.back().map_or(0, |b| b.last_buffer),
            stamp => stamp,
        };
        debug_assert!(idle.back().is_none_or(|b| b.last_buffer <= last_buffer));
        idle.push_back(Idle {
            allocation,
            lock,
            last_buffer,
            trims,
        });
    }

    /// Amortised processing (R-A1): each allocation the GPU is done with that sat unused
    /// through [`KEEP_TRIMS`] trims goes to `deallocate` with its persistent lock, which it
    /// ends first (R-M4); the pool lets go of it before the call.
    pub(super) fn trim(
        &mut self,
        completed: u64,
        mut deallocate: impl FnMut(AllocationHandle, Option<CpuMapping>),
    ) {
        self.trims += 1;
        let trims = self.trims;
        for class in &mut self.classes {
            while let Some(idle) = class.idle.front() {
                if idle.last_buffer > completed || idle.trims + KEEP_TRIMS > trims {
                    break;
                }
                let idle = class.idle.pop_front().expect("the front was there");
                deallocate(idle.allocation, idle.lock);
            }
        }
    }

    /// Every allocation the GPU is done with (the completed fence reached its buffer) to
    /// `deallocate`, whatever its age: an explicit trim.
    pub(super) fn release_done(
        &mut self,
        completed: u64,
        mut deallocate: impl FnMut(AllocationHandle, Option<CpuMapping>),
    ) {
        for class in &mut self.classes {
            while class
                .idle
                .front()
                .is_some_and(|idle| idle.last_buffer <= completed)
            {
                let idle = class.idle.pop_front().expect("the front was there");
                deallocate(idle.allocation, idle.lock);
            }
        }
    }

    /// Device destruction, once the GPU is idle (R-D3): every allocation to `deallocate`,
    /// each leaving the pool before its call (a call that panics repeats none). The classes
    /// stay, empty, so that a class kept by a resource stays valid.
    pub(super) fn drain(
        &mut self,
        mut deallocate: impl FnMut(AllocationHandle, Option<CpuMapping>),
    ) {
        for class in &mut self.classes {
            while let Some(idle) = class.idle.pop_front() {
                deallocate(idle.allocation, idle.lock);
            }
        }
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

    fn taken(pool: &mut RenamePool, class: ClassId, completed: u64) -> Option<AllocationHandle> {
        pool.take(class, completed).map(|idle| idle.allocation)
    }

    #[test]
    fn an_allocation_is_reused_only_once_its_buffer_completed_and_only_at_its_size() {
        let mut pool = RenamePool::default();
        let (c64, c128) = (pool.class(64), pool.class(128));
        assert_eq!(pool.class(64), c64, "one class per size");
        assert_ne!(c64, c128);
        pool.give(c64, a(1), None, 3);
        assert_eq!(taken(&mut pool, c64, 2), None, "buffer 3 not finished");
        assert_eq!(taken(&mut pool, c128, 3), None, "another size");
        assert_eq!(taken(&mut pool, c64, 3), Some(a(1)));
        assert_eq!(taken(&mut pool, c64, 3), None);
    }

    /// An allocation given back unused (stamp 0) waits behind the others, with the newest
    /// stamp.
    #[test]
    fn stamps_never_fall_along_a_class() {
        let mut pool = RenamePool::default();
        let c = pool.class(64);
        pool.give(c, a(1), None, 5);
        pool.give(c, a(2), None, 0);
        let back = pool.classes[c as usize].idle.back();
        assert_eq!(back.map(|b| (b.allocation, b.last_buffer)), Some((a(2), 5)));
        assert_eq!(taken(&mut pool, c, 4), None);
        assert_eq!(taken(&mut pool, c, 5), Some(a(1)));
        assert_eq!(taken(&mut pool, c, 5), Some(a(2)));
    }

    /// A persistent lock waits with its allocation and comes back with it, and goes to the
    /// deallocation with it (R-M4: ended before the allocation goes).
    #[test]
    fn r_m4_r_m5_a_persistent_lock_stays_with_its_allocation() {
        let mut pool = RenamePool::default();
        let c = pool.class(8);
        let lock = || Some(CpuMapping::owned(vec![0; 8].into_boxed_slice()));
        pool.give(c, a(1), lock(), 1);
        pool.give(c, a(2), None, 1);
        let idle = pool.take(c, 1).unwrap();
        assert_eq!((idle.allocation, idle.lock.is_some()), (a(1), true));
        pool.give(c, a(3), lock(), 2);
        let mut gone = vec![];
        pool.release_done(2, |x, lock| gone.push((x, lock.is_some())));
        assert_eq!(gone, [(a(2), false), (a(3), true)]);
    }

    /// A class's queue stays first-in first-out as its ring grows, from slot 0 and from a
    /// head past it (a ring that wrapped).
    #[test]
    fn a_queue_keeps_its_order_as_it_grows_and_wraps() {
        let mut pool = RenamePool::default();
        let c = pool.class(64);
        for id in 1..=6 {
            pool.give(c, a(id), None, id);
        }
        for id in 1..=3 {
            assert_eq!(taken(&mut pool, c, 6), Some(a(id)));
        }
        // Eight slots, the head at 3: five more wrap, then one more grows the ring again.
        for id in 7..=13 {
            pool.give(c, a(id), None, id);
        }
        for id in 4..=13 {
            assert_eq!(taken(&mut pool, c, 13), Some(a(id)));
        }
        assert_eq!(taken(&mut pool, c, 13), None);
    }

    #[test]
    fn trim_gives_back_what_sat_unused_and_done_only() {
        let mut pool = RenamePool::default();
        let c = pool.class(64);
        pool.give(c, a(1), None, 1);
        let mut gone = vec![];
        for _ in 0..KEEP_TRIMS - 1 {
            pool.trim(1, |x, _| gone.push(x));
        }
        assert!(gone.is_empty(), "not idle long enough");
        pool.give(c, a(2), None, 9);
        pool.trim(1, |x, _| gone.push(x));
        assert_eq!(gone, [a(1)]);
        for _ in 0..2 * KEEP_TRIMS {
            pool.trim(8, |x, _| gone.push(x));
        }
        assert_eq!(gone, [a(1)], "buffer 9 not finished");
        pool.trim(9, |x, _| gone.push(x));
        assert_eq!(gone, [a(1), a(2)]);
        assert_eq!(pool.len(), 0);
    }

    #[test]
    fn drain_gives_back_everything_and_keeps_the_classes() {
        let mut pool = RenamePool::default();
        let (c64, c32) = (pool.class(64), pool.class(32));
        pool.give(c64, a(1), None, 7);
        pool.give(c32, a(2), None, 8);
        let mut gone = vec![];
        pool.drain(|x, _| gone.push(x));
        gone.sort_by_key(|x| x.0);
        assert_eq!(gone, [a(1), a(2)]);
        assert_eq!(pool.len(), 0);
        assert_eq!(pool.class(32), c32, "a class a resource keeps stays valid");
    }
}
