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

use slab::Slab;

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

/// An allocation's record in the pool ([`RenamePool::take`], [`RenamePool::admit`]): it
/// stays in place while the allocation waits and while a Map holds it, so that a rename
/// moves its number, not the allocation and its lock.
pub(super) type RecordId = u32;

/// An allocation the pool holds: waiting in its class's queue, or lent to an open
/// Map(DISCARD) until the Unmap exchanges it for the one the resource gives up.
#[derive(Debug)]
pub(super) struct Record {
    pub(super) allocation: AllocationHandle,
    /// Its lock: a persistent one waiting with it ([`crate::Kernel::persistent_locks`]: a
    /// rename that takes it calls no kernel), or the Map's while lent.
    pub(super) lock: Option<CpuMapping>,
}

/// A record waiting in its class's queue, with what decides when it may go: a take looks
/// at the queue alone.
#[derive(Clone, Copy, Debug, Default)]
struct Waiting {
    /// The newest buffer that may read it: reusable once the completed fence reaches it.
    last_buffer: u64,
    /// The pool's trim count when it came back.
    trims: u64,
    record: RecordId,
}

/// The records of one size waiting.
#[derive(Debug)]
struct SizeClass {
    size: u64,
    /// Oldest first: stamps grow along the queue, so the front is the first to be done and
    /// a take is one look at it.
    idle: Fifo,
}

/// A first-in first-out queue of waiting records: a ring whose size is a power of two,
/// doubled when full (its capacity kept, so a steady pattern of discards allocates
/// nothing). A `VecDeque` cost a rename twice as many instructions (its push is not
/// inlined, and its index wraps with a comparison).
#[derive(Debug, Default)]
struct Fifo {
    /// `slots[(head + i) & mask]` for `i < len` hold the queue; the rest mean nothing.
    slots: Vec<Waiting>,
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

    #[inline]
    fn front(&self) -> Option<Waiting> {
        match self.len {
            0 => None,
            _ => Some(self.slots[self.head]),
        }
    }

    fn back(&self) -> Option<Waiting> {
        match self.len {
            0 => None,
            len => Some(self.slots[(self.head + len - 1) & self.mask()]),
        }
    }

    #[inline]
    fn pop_front(&mut self) -> Option<Waiting> {
        let front = self.front()?;
        self.head = (self.head + 1) & self.mask();
        self.len -= 1;
        Some(front)
    }

    #[inline]
    fn push_back(&mut self, waiting: Waiting) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let at = (self.head + self.len) & self.mask();
        self.slots[at] = waiting;
        self.len += 1;
    }

    /// Doubles the ring (at least 4 slots), its queue laid out from slot 0.
    #[cold]
    fn grow(&mut self) {
        let capacity = (2 * self.slots.len()).max(4);
        let mask = self.mask();
        let mut slots: Vec<Waiting> = (0..self.len)
            .map(|i| self.slots[(self.head + i) & mask])
            .collect();
        slots.resize(capacity, Waiting::default());
        self.slots = slots;
        self.head = 0;
    }
}

/// The pool: see the module docs. Owned by the immediate context (its thread only).
///
/// Every record is in exactly one place: its class's queue, or an open Map (lent by
/// [`RenamePool::take`] or [`RenamePool::admit`], until [`RenamePool::exchange`] or
/// [`RenamePool::put_back`] queues it again). `slab` keeps the records: numbers that stay
/// valid while others come and go, and a record's place reused once it is let go.
#[derive(Debug, Default)]
pub(super) struct RenamePool {
    classes: Vec<SizeClass>,
    records: Slab<Record>,
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

    /// The record of an allocation of `class` that no buffer the GPU has not finished
    /// reads, if the pool has one, lent until it is exchanged or put back: its oldest, in
    /// O(1).
    #[inline(always)]
    pub(super) fn take(&mut self, class: ClassId, completed: u64) -> Option<RecordId> {
        let idle = &mut self.classes[class as usize].idle;
        match idle.front()?.last_buffer <= completed {
            true => idle.pop_front().map(|w| w.record),
            false => None,
        }
    }

    /// A new allocation's record, without a lock yet, lent at once as a taken one is.
    pub(super) fn admit(&mut self, allocation: AllocationHandle) -> RecordId {
        let id = self.records.insert(Record {
            allocation,
            lock: None,
        });
        // More records than `u32` numbers would be more allocations than memory holds.
        RecordId::try_from(id).expect("a record number fits in 32 bits")
    }

    /// A record, lent or waiting.
    #[inline(always)]
    pub(super) fn record_mut(&mut self, id: RecordId) -> &mut Record {
        &mut self.records[id as usize]
    }

    /// Allocations of `class` the pool holds, whether the GPU is done with them or not.
    pub(super) fn waiting(&self, class: ClassId) -> usize {
        self.classes[class as usize].idle.len()
    }

    /// The rename (R-M5): the lent record `id` of `class` takes `previous`, the allocation
    /// the resource gives up, and its lock (`lock`, exchanged for the record's: a persistent
    /// lock stays with its allocation), and waits in its queue, read by buffers up to
    /// `last_buffer`; the allocation it held is the answer, the resource's from now on.
    /// Stamps only grow along the queue (the open buffer's number never falls), and its
    /// capacity is kept: a steady pattern of discards allocates nothing.
    #[inline(always)]
    pub(super) fn exchange(
        &mut self,
        class: ClassId,
        id: RecordId,
        previous: AllocationHandle,
        lock: &mut Option<CpuMapping>,
        last_buffer: u64,
    ) -> AllocationHandle {
        let record = &mut self.records[id as usize];
        let allocation = core::mem::replace(&mut record.allocation, previous);
        core::mem::swap(&mut record.lock, lock);
        let idle = &mut self.classes[class as usize].idle;
        debug_assert!(idle.back().is_none_or(|b| b.last_buffer <= last_buffer));
        idle.push_back(Waiting {
            last_buffer,
            trims: self.trims,
            record: id,
        });
        allocation
    }

    /// A lent record no buffer read (its Map refused, or ended by device destruction)
    /// waits again, behind the others with the newest stamp, so that stamps still only
    /// grow along the queue. Its lock is the caller's to end first where it is not
    /// persistent.
    pub(super) fn put_back(&mut self, class: ClassId, id: RecordId) {
        let idle = &mut self.classes[class as usize].idle;
        idle.push_back(Waiting {
            last_buffer: idle.back().map_or(0, |b| b.last_buffer),
            trims: self.trims,
            record: id,
        });
    }

    /// Amortised processing (R-A1): each allocation the GPU is done with that sat unused
    /// through [`KEEP_TRIMS`] trims goes to `deallocate` with its persistent lock, which it
    /// ends first (R-M4); the pool lets go of it before the call.
    pub(super) fn trim(
        &mut self,
        completed: u64,
        deallocate: impl FnMut(AllocationHandle, Option<CpuMapping>),
    ) {
        self.trims += 1;
        let trims = self.trims;
        self.let_go(deallocate, |r| {
            r.last_buffer <= completed && r.trims + KEEP_TRIMS <= trims
        });
    }

    /// Every allocation the GPU is done with (the completed fence reached its buffer) to
    /// `deallocate`, whatever its age: an explicit trim.
    pub(super) fn release_done(
        &mut self,
        completed: u64,
        deallocate: impl FnMut(AllocationHandle, Option<CpuMapping>),
    ) {
        self.let_go(deallocate, |r| r.last_buffer <= completed);
    }

    /// Device destruction, once the GPU is idle (R-D3): every allocation to `deallocate`,
    /// each leaving the pool before its call (a call that panics repeats none). The classes
    /// stay, empty, so that a class kept by a resource stays valid.
    pub(super) fn drain(&mut self, deallocate: impl FnMut(AllocationHandle, Option<CpuMapping>)) {
        self.let_go(deallocate, |_| true);
    }

    /// Lets go of each class's waiting records from its front while `done` says so: each
    /// leaves the pool, then goes to `deallocate`.
    fn let_go(
        &mut self,
        mut deallocate: impl FnMut(AllocationHandle, Option<CpuMapping>),
        done: impl Fn(Waiting) -> bool,
    ) {
        for class in &mut self.classes {
            while let Some(front) = class.idle.front() {
                if !done(front) {
                    break;
                }
                class.idle.pop_front();
                let record = self.records.remove(front.record as usize);
                deallocate(record.allocation, record.lock);
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

    /// `allocation` into the pool as a rename gives it up: read by buffers up to `stamp`, or
    /// given back unused (0).
    fn give(
        pool: &mut RenamePool,
        class: ClassId,
        allocation: AllocationHandle,
        lock: Option<CpuMapping>,
        stamp: u64,
    ) {
        let id = pool.admit(allocation);
        if stamp == 0 {
            pool.record_mut(id).lock = lock;
            return pool.put_back(class, id);
        }
        let mut lock = lock;
        assert_eq!(
            pool.exchange(class, id, allocation, &mut lock, stamp),
            allocation
        );
        assert!(lock.is_none(), "a new record has no lock");
    }

    fn taken(pool: &mut RenamePool, class: ClassId, completed: u64) -> Option<AllocationHandle> {
        let id = pool.take(class, completed)?;
        Some(pool.record_mut(id).allocation)
    }

    #[test]
    fn an_allocation_is_reused_only_once_its_buffer_completed_and_only_at_its_size() {
        let mut pool = RenamePool::default();
        let (c64, c128) = (pool.class(64), pool.class(128));
        assert_eq!(pool.class(64), c64, "one class per size");
        assert_ne!(c64, c128);
        give(&mut pool, c64, a(1), None, 3);
        assert_eq!(taken(&mut pool, c64, 2), None, "buffer 3 not finished");
        assert_eq!(taken(&mut pool, c128, 3), None, "another size");
        assert_eq!(taken(&mut pool, c64, 3), Some(a(1)));
        assert_eq!(taken(&mut pool, c64, 3), None);
    }

    /// A rename's exchange: the record lent to the Map takes the allocation the resource
    /// gives up, stamped, and answers the one it held, whose lock comes with it (R-M5).
    #[test]
    fn r_m5_an_exchange_swaps_the_lent_allocation_for_the_resources() {
        let mut pool = RenamePool::default();
        let c = pool.class(8);
        let lock = || Some(CpuMapping::owned(vec![7; 8].into_boxed_slice()));
        give(&mut pool, c, a(1), lock(), 2);
        let id = pool.take(c, 2).expect("done");
        let lent = pool.record_mut(id).lock.as_ref().expect("locked");
        assert_eq!(lent.bytes(), [7; 8], "the Map's bytes: the lock's");
        assert_eq!(pool.waiting(c), 0, "lent, not waiting");
        let mut held = None;
        assert_eq!(pool.exchange(c, id, a(2), &mut held, 5), a(1));
        assert!(held.is_some(), "the lock came with its allocation");
        assert_eq!(pool.waiting(c), 1);
        assert_eq!(taken(&mut pool, c, 4), None, "stamped with buffer 5");
        assert_eq!(taken(&mut pool, c, 5), Some(a(2)));
    }

    /// An allocation given back unused (stamp 0) waits behind the others, with the newest
    /// stamp.
    #[test]
    fn stamps_never_fall_along_a_class() {
        let mut pool = RenamePool::default();
        let c = pool.class(64);
        give(&mut pool, c, a(1), None, 5);
        give(&mut pool, c, a(2), None, 0);
        let back = pool.classes[c as usize].idle.back().unwrap();
        assert_eq!(
            (pool.record_mut(back.record).allocation, back.last_buffer),
            (a(2), 5)
        );
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
        give(&mut pool, c, a(1), lock(), 1);
        give(&mut pool, c, a(2), None, 1);
        let id = pool.take(c, 1).unwrap();
        let record = pool.record_mut(id);
        assert_eq!((record.allocation, record.lock.is_some()), (a(1), true));
        give(&mut pool, c, a(3), lock(), 2);
        let mut gone = vec![];
        pool.release_done(2, |x, lock| gone.push((x, lock.is_some())));
        assert_eq!(gone, [(a(2), false), (a(3), true)]);
        assert_eq!(pool.record_mut(id).allocation, a(1), "a lent record stays");
    }

    /// A class's queue stays first-in first-out as its ring grows, from slot 0 and from a
    /// head past it (a ring that wrapped).
    #[test]
    fn a_queue_keeps_its_order_as_it_grows_and_wraps() {
        let mut pool = RenamePool::default();
        let c = pool.class(64);
        for id in 1..=6 {
            give(&mut pool, c, a(id), None, id);
        }
        for id in 1..=3 {
            assert_eq!(taken(&mut pool, c, 6), Some(a(id)));
        }
        // Eight slots, the head at 3: five more wrap, then one more grows the ring again.
        for id in 7..=13 {
            give(&mut pool, c, a(id), None, id);
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
        give(&mut pool, c, a(1), None, 1);
        let mut gone = vec![];
        for _ in 0..KEEP_TRIMS - 1 {
            pool.trim(1, |x, _| gone.push(x));
        }
        assert!(gone.is_empty(), "not idle long enough");
        give(&mut pool, c, a(2), None, 9);
        pool.trim(1, |x, _| gone.push(x));
        assert_eq!(gone, [a(1)]);
        for _ in 0..2 * KEEP_TRIMS {
            pool.trim(8, |x, _| gone.push(x));
        }
        assert_eq!(gone, [a(1)], "buffer 9 not finished");
        pool.trim(9, |x, _| gone.push(x));
        assert_eq!(gone, [a(1), a(2)]);
        assert_eq!(pool.len(), 0);
        assert!(pool.records.is_empty(), "every record let go");
    }

    #[test]
    fn drain_gives_back_everything_and_keeps_the_classes() {
        let mut pool = RenamePool::default();
        let (c64, c32) = (pool.class(64), pool.class(32));
        give(&mut pool, c64, a(1), None, 7);
        give(&mut pool, c32, a(2), None, 8);
        let mut gone = vec![];
        pool.drain(|x, _| gone.push(x));
        gone.sort_by_key(|x| x.0);
        assert_eq!(gone, [a(1), a(2)]);
        assert_eq!(pool.len(), 0);
        assert_eq!(pool.class(32), c32, "a class a resource keeps stays valid");
    }
}
