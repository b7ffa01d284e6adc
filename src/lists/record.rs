//! Recording: what a deferred context writes and a command list replays.
//!
//! Commands are plain values that name objects by handle ([`Recorded`]); their variable
//! payloads (UpdateSubresource bytes, the contents written through a recorded Map(DISCARD))
//! go into a bump arena ([`Payloads`], bumpalo) whose chunks never move, so a mapped pointer
//! handed to the application stays valid while other calls are recorded, and a whole
//! recording is released or reset at once. A recording's memory is proportional to what it
//! holds: an empty arena owns no chunk, and the operation vector grows from empty.
//!
//! The recording counts its own bytes against the context's budget; going over it is the
//! out-of-memory of R-E3 (context-local removal, handled by the deferred context).

use core::alloc::Layout;
use core::ptr::NonNull;

use bumpalo::Bump;

use crate::bind::BindPoint;
use crate::error::{Error, Result};
use crate::handle::{AnyHandle, Handle, Query, Resource};

/// Bytes in a recording's arena.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Payload {
    ptr: NonNull<u8>,
    len: usize,
}

impl Payload {
    /// Its length in bytes.
    pub(crate) fn len(self) -> usize {
        self.len
    }
}

// SAFETY: a `Payload` is an address and a length into an arena that the same recording or
// command list owns; it is only dereferenced through that owner (see `Payloads::bytes`), so
// moving or sharing the pair across threads shares nothing by itself.
unsafe impl Send for Payload {}
// SAFETY: as above: the pair is plain data until dereferenced through its owner.
unsafe impl Sync for Payload {}

/// One recorded operation.
#[derive(Debug)]
pub(crate) enum Recorded<C> {
    Command(C),
    Update {
        resource: Handle<Resource>,
        offset: u64,
        payload: Payload,
    },
    WriteDiscard {
        resource: Handle<Resource>,
        payload: Payload,
    },
    Bind {
        point: BindPoint,
        object: Option<AnyHandle>,
    },
    BeginQuery(Handle<Query>),
    EndQuery(Handle<Query>),
    /// A finished list executed here (nested execution): the index of its owner in
    /// [`Recording::lists`]; a clear-state follows its operations (R-C3).
    ExecuteList(u32),
}

/// A recording's payload arena.
#[derive(Debug, Default)]
pub(crate) struct Payloads {
    bump: Bump,
    /// Whether anything was allocated since the last reset: most small lists carry no
    /// payload, and their reset is then nothing.
    used: bool,
    /// The bytes of the arena known written: see [`Written`].
    written: Written,
}

/// Where the arena's bytes are known written (initialised), so that a Map(DISCARD)'s bytes,
/// whose values are undefined (R-M1), are zeroed only the first time they are handed out.
///
/// Every payload is bytes (alignment 1), each of them initialised when the payload is
/// handed out (copied in, zeroed, or written by an earlier payload); bumpalo fills a chunk
/// downward from its end without gaps, and its reset keeps the current chunk without
/// writing its bytes. So in the chunk of the last allocation
/// (known by where its data begins), every byte from the lowest address handed out in it
/// to the chunk's end was written at least once, in this recording or an earlier one.
#[derive(Clone, Copy, Debug, Default)]
struct Written {
    /// The address where the data of the chunk of the last allocation begins (0: none).
    chunk: usize,
    /// The lowest address handed out in that chunk.
    low: usize,
}

// SAFETY: `Bump` is `!Sync` because its allocation methods use `Cell`s; those are only
// reached through `&mut self` here. Through `&self`, `Payloads` only reads bytes through
// payload pointers (`bytes`), which needs no interior mutability.
unsafe impl Sync for Payloads {}

impl Payloads {
    /// A copy of `data` in the arena.
    pub(crate) fn copy(&mut self, data: &[u8]) -> Result<Payload> {
        self.used = true;
        let bytes = self
            .bump
            .try_alloc_slice_copy(data)
            .map_err(|_| Error::OutOfMemory)?;
        let ptr: NonNull<u8> = NonNull::from(&mut bytes[0..]).cast();
        // Written whole by the copy.
        self.first_written(ptr);
        Ok(Payload {
            ptr,
            len: data.len(),
        })
    }

    /// `len` bytes in the arena for a Map(DISCARD), whose values are undefined (R-M1): an
    /// earlier payload's where the arena handed these bytes out before, zero where it never
    /// did, so that every byte handed out is initialised ([`Written`]).
    #[inline]
    pub(crate) fn for_discard(&mut self, len: usize) -> Result<Payload> {
        self.used = true;
        let layout = Layout::from_size_align(len, 1).map_err(|_| Error::OutOfMemory)?;
        let ptr = self
            .bump
            .try_alloc_layout(layout)
            .map_err(|_| Error::OutOfMemory)?;
        if self.first_written(ptr) {
            // SAFETY: `ptr` addresses `len` bytes just allocated for this payload alone,
            // which nothing refers to yet; one `memset` initialises them all.
            unsafe { ptr.as_ptr().write_bytes(0, len) };
        }
        Ok(Payload { ptr, len })
    }

    /// Whether the allocation just made at `ptr` is handed out for the first time (in
    /// another chunk than the allocation before it, or below the lowest address handed out
    /// in that chunk: [`Written`]), noting it written from here on: its caller writes it
    /// whole. Addresses are compared, never dereferenced.
    #[inline]
    fn first_written(&mut self, ptr: NonNull<u8>) -> bool {
        let at = ptr.as_ptr().addr();
        // The allocation just made is the current chunk's lowest: its data begins the
        // chunk's remaining capacity below it. (Wrapping: a zero-length allocation may be a
        // dangling address below any chunk; its answer does not matter, it hands out no
        // byte.)
        let chunk = at.wrapping_sub(self.bump.chunk_capacity());
        if chunk == self.written.chunk && at >= self.written.low {
            return false;
        }
        // A new chunk starts its own record; in the same chunk, a chunk filled downward
        // makes this the lowest address handed out.
        self.written = Written { chunk, low: at };
        true
    }

    /// The bytes of `payload`.
    ///
    /// # Safety
    /// `payload` came from this arena and the arena was not reset since.
    pub(crate) unsafe fn bytes(&self, payload: Payload) -> &[u8] {
        // SAFETY: by the contract the pointer addresses `len` initialised bytes of a live
        // chunk of this arena; chunks never move, and `&self` keeps them alive and unreset.
        unsafe { core::slice::from_raw_parts(payload.ptr.as_ptr(), payload.len) }
    }

    /// The bytes of `payload`, writable.
    ///
    /// # Safety
    /// As [`Payloads::bytes`], and no other reference to these bytes is alive.
    pub(crate) unsafe fn bytes_mut(&mut self, payload: Payload) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` and the contract make this the only reference.
        unsafe { core::slice::from_raw_parts_mut(payload.ptr.as_ptr(), payload.len) }
    }

    /// Bytes the arena has taken from the system (its chunks).
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.bump.allocated_bytes()
    }

    /// Frees every payload at once; keeps the largest chunk for reuse (bumpalo's reset).
    #[inline]
    pub(crate) fn reset(&mut self) {
        if core::mem::take(&mut self.used) {
            self.bump.reset();
        }
    }
}

/// A recording in progress or finished: operations, payloads, the lists it executes and
/// what R-C4 needs to know. `L` owns an executed list (the deferred context's
/// `SharedList`): the recording holds each list it executes, without a copy of its
/// operations.
#[derive(Debug)]
pub(crate) struct Recording<C, L> {
    /// The operations the engine keeps to replay; empty where the driver builds its lists
    /// ([`crate::ListMode::DriverBuilt`]), which count them only.
    pub(crate) ops: Vec<Recorded<C>>,
    /// Operations recorded, kept or not: what the budget and the replay count.
    pub(crate) operations: usize,
    pub(crate) payloads: Payloads,
    /// Bytes of payload recorded (what the budget counts, besides the operations).
    pub(crate) payload_bytes: usize,
    /// Resources whose Map(DISCARD) the recording, or a list it executes, holds (R-C4).
    /// Noted by appending while recording ([`note_in_set`]); from Finish on sorted, each
    /// once ([`sort_set`]), so that a check never walks the nested lists and looks each of
    /// the context's maps up by binary search.
    pub(crate) maps: Vec<Handle<Resource>>,
    /// Queries the recording, or a list it executes, begins or ends (R-C4): noted and sorted
    /// as `maps` are.
    pub(crate) queries: Vec<Handle<Query>>,
    /// Operations a replay of the lists the recording executes performs, at any depth
    /// (saturating): with `ops`, what executing the recording costs
    /// ([`crate::DeviceConfig::replay_limit`]).
    pub(crate) nested_ops: u64,
    /// The lists the recording executes, in the order of their [`Recorded::ExecuteList`]s (a
    /// list executed twice is here twice).
    pub(crate) lists: Vec<L>,
    /// Where the driver builds its lists, the resources the recording itself discarded
    /// (not the lists it executes): noted as `maps` is, for a resource's first
    /// Map(NO_OVERWRITE) (R-M2).
    pub(crate) discarded: Vec<Handle<Resource>>,
    /// Each resource mapped with NO_OVERWRITE in the recording and where its appends write;
    /// where the engine replays lists, kept current by each later discard's Unmap (R-M2).
    pub(crate) rings: Vec<Ring>,
}

/// A resource a recording maps with NO_OVERWRITE, and where its appends write. An entry is
/// made only once the resource passed the NO_OVERWRITE checks, which depend on its
/// description alone: a later Map finds it here without checking them again.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ring {
    pub(crate) resource: Handle<Resource>,
    pub(crate) memory: RingMemory,
}

/// Where a ring's appends write (R-M2).
#[derive(Clone, Copy, Debug)]
pub(crate) enum RingMemory {
    /// Where the engine replays lists: the payload of the resource's last Map(DISCARD).
    Arena(Payload),
    /// Where the driver builds them: the driver's memory of that discard, of this many
    /// bytes.
    Driver(usize),
}

impl<C, L> Default for Recording<C, L> {
    fn default() -> Self {
        Recording {
            ops: Vec::new(),
            operations: 0,
            payloads: Payloads::default(),
            payload_bytes: 0,
            maps: Vec::new(),
            queries: Vec::new(),
            nested_ops: 0,
            lists: Vec::new(),
            discarded: Vec::new(),
            rings: Vec::new(),
        }
    }
}

/// Notes `item` in `set` while a recording runs: an append, not an insertion, and none
/// when `item` is the last one noted (a draw loop maps the same constant buffer again and
/// again). The set is sorted and made duplicate-free at Finish ([`sort_set`]); before the
/// vector would grow it is made so early, and then grown if that left less than half of it
/// free: a sort of n items comes after at least n/2 appends, so each append's share of the
/// sorting is O(log n) comparisons, and the vector holds about twice the distinct items at
/// most (memory proportional to content).
#[inline(always)]
pub(crate) fn note_in_set<T: Ord + Copy>(set: &mut Vec<T>, item: T) {
    if set.last() == Some(&item) {
        return;
    }
    if set.len() == set.capacity() {
        return note_in_full_set(set, item);
    }
    set.push(item);
}

/// [`note_in_set`] where the vector is full, out of line: sorted and made duplicate-free
/// first (an empty one is only grown), grown if that left less than half of it free.
#[cold]
#[inline(never)]
fn note_in_full_set<T: Ord + Copy>(set: &mut Vec<T>, item: T) {
    if !set.is_empty() {
        sort_set(set);
        if set.len() > set.capacity() / 2 {
            set.reserve(set.len());
        }
        if set.binary_search(&item).is_ok() {
            return;
        }
    }
    set.push(item);
}

/// Makes a set that [`note_in_set`] appended to sorted and duplicate-free.
#[inline]
pub(crate) fn sort_set<T: Ord>(set: &mut Vec<T>) {
    if set.len() > 1 {
        set.sort_unstable();
        set.dedup();
    }
}

/// What one recorded operation counts against [`crate::DeviceConfig::deferred_budget`],
/// whatever its kind (a command, an update, a bind, a Map(DISCARD), a query's Begin or End),
/// besides its payload (R-E3). A fixed figure, so that a budget means the same on every
/// target and for every driver: it covers the engine's own record of an operation when the
/// driver's [`crate::Driver::Command`] is at most 48 bytes (`size_of`); a driver with larger
/// commands keeps about `size_of::<Command>() - 48` more bytes per operation than it is
/// counted, and sets its budget with that in mind.
pub const OPERATION_BYTES: usize = 64;

impl<C, L> Recording<C, L> {
    /// Operations executing the recording performs, nested lists included (saturating).
    pub(crate) fn replayed_ops(&self) -> u64 {
        (self.operations as u64).saturating_add(self.nested_ops)
    }

    /// Bytes the recording counts against its context's budget (R-E3): [`OPERATION_BYTES`]
    /// per operation, plus the payloads.
    pub(crate) fn bytes(&self) -> usize {
        self.operations * OPERATION_BYTES + self.payload_bytes
    }

    /// Memory the recording keeps (capacity, not content).
    pub(crate) fn retained_bytes(&self) -> usize {
        self.ops.capacity() * core::mem::size_of::<Recorded<C>>()
            + self.payloads.allocated_bytes()
            + self.maps.capacity() * core::mem::size_of::<Handle<Resource>>()
            + self.queries.capacity() * core::mem::size_of::<Handle<Query>>()
            + self.lists.capacity() * core::mem::size_of::<L>()
            + self.discarded.capacity() * core::mem::size_of::<Handle<Resource>>()
            + self.rings.capacity() * core::mem::size_of::<Ring>()
    }

    /// Sorts the sets of Maps and queries noted while recording ([`note_in_set`]), at Finish.
    #[inline]
    pub(crate) fn sort_sets(&mut self) {
        // Most lists map nothing and use no query: one test for both.
        if self.maps.len() + self.queries.len() > 1 {
            sort_set(&mut self.maps);
            sort_set(&mut self.queries);
        }
    }

    /// Empties the recording, keeping its capacity; the lists it executed are given up.
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.ops.clear();
        self.operations = 0;
        self.payloads.reset();
        self.payload_bytes = 0;
        self.maps.clear();
        self.queries.clear();
        self.nested_ops = 0;
        self.lists.clear();
        self.discarded.clear();
        self.rings.clear();
    }

    /// A discard of `resource` recorded: if it is a ring, its appends from now on write the
    /// new `payload` (R-M2). Out of line, so that a discard of a resource no append follows
    /// costs no more than a look at whether the recording has rings.
    #[inline(never)]
    pub(crate) fn renew_ring(&mut self, resource: Handle<Resource>, payload: Payload) {
        if let Some(ring) = self.rings.iter_mut().find(|r| r.resource == resource) {
            ring.memory = RingMemory::Arena(payload);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a recording keeps is each vector's capacity at its element's size, plus the
    /// arena's chunks: every term counted once (the capacities distinct primes, so that no
    /// other sum or product of them gives the same total).
    #[test]
    fn retained_bytes_count_every_vector_and_the_arena() {
        use core::mem::size_of;
        let mut rec = Recording::<u64, [u8; 24]>::default();
        assert_eq!(rec.retained_bytes(), 0, "an empty recording keeps nothing");
        rec.ops.reserve_exact(3);
        rec.maps.reserve_exact(5);
        rec.queries.reserve_exact(7);
        rec.lists.reserve_exact(11);
        rec.discarded.reserve_exact(13);
        rec.rings.reserve_exact(17);
        let payload = rec.payloads.copy(&[1; 40]).unwrap();
        assert_eq!(payload.len(), 40);
        let arena = rec.payloads.allocated_bytes();
        assert!(arena >= 40, "the arena counts its chunk: {arena}");
        let capacities = [
            rec.ops.capacity() * size_of::<Recorded<u64>>(),
            rec.maps.capacity() * size_of::<Handle<Resource>>(),
            rec.queries.capacity() * size_of::<Handle<Query>>(),
            rec.lists.capacity() * 24,
            rec.discarded.capacity() * size_of::<Handle<Resource>>(),
            rec.rings.capacity() * size_of::<Ring>(),
        ];
        assert_eq!(
            rec.retained_bytes(),
            capacities.iter().sum::<usize>() + arena
        );
        // Clearing keeps the capacities.
        rec.clear();
        assert_eq!(
            rec.retained_bytes(),
            capacities.iter().sum::<usize>() + arena
        );
    }

    #[test]
    fn payloads_keep_their_bytes_and_addresses_across_growth() {
        let mut arena = Payloads::default();
        assert_eq!(
            arena.allocated_bytes(),
            0,
            "an empty recording owns no chunk"
        );
        let first = arena.copy(&[1, 2, 3]).unwrap();
        let mapped = arena.for_discard(100).unwrap();
        // SAFETY: both payloads come from `arena`, not reset since.
        let bytes = unsafe { arena.bytes_mut(mapped) };
        bytes[99] = 7;
        let many: Vec<Payload> = (0..if cfg!(miri) { 20 } else { 2000 })
            .map(|i| arena.copy(&[i as u8; 33]).unwrap())
            .collect();
        // SAFETY: as above; chunks never move, so earlier payloads survive later growth.
        unsafe {
            assert_eq!(arena.bytes(first), &[1, 2, 3]);
            assert_eq!(arena.bytes(mapped)[99], 7);
            for (i, p) in many.iter().enumerate() {
                assert_eq!(arena.bytes(*p), &[i as u8; 33]);
            }
        }
        arena.reset();
        let after = arena.copy(&[9]).unwrap();
        // SAFETY: allocated after the reset.
        assert_eq!(unsafe { arena.bytes(after) }, &[9]);
    }

    /// A reset gives the whole arena back (the next payload reuses the first one's bytes),
    /// and a reset with nothing allocated since changes nothing.
    #[test]
    fn reset_reuses_the_arena_from_its_start() {
        let mut arena = Payloads::default();
        let a = arena.copy(&[1; 8]).unwrap();
        arena.reset();
        let b = arena.copy(&[2; 8]).unwrap();
        assert_eq!(a.ptr, b.ptr);
        arena.reset();
        arena.reset();
        let c = arena.for_discard(8).unwrap();
        assert_eq!(b.ptr, c.ptr);
        arena.reset();
        let d = arena.copy(&[4; 8]).unwrap();
        assert_eq!(
            c.ptr, d.ptr,
            "a discard's payload is freed by the reset too"
        );
    }

    /// R-M1: a discard's bytes are zero where the arena never handed them out, and an
    /// earlier payload's where it did (a recycled recording's), read as initialised bytes
    /// (miri checks the reads); the record of what was written follows a new chunk.
    #[test]
    fn r_m1_a_discard_hands_out_zeroes_first_then_the_bytes_written_before() {
        let mut arena = Payloads::default();
        let first = arena.for_discard(64).unwrap();
        // SAFETY: every payload here comes from `arena`, not reset since it was made.
        let bytes = unsafe { arena.bytes_mut(first) };
        assert_eq!(bytes, &[0; 64][..], "never handed out: zeroed");
        bytes.fill(0xA5);
        let copied = arena.copy(&[7; 16]).unwrap();
        arena.reset();
        // The same bytes again, top down: the discard's, then the copy's.
        let again = arena.for_discard(64).unwrap();
        assert_eq!(again.ptr, first.ptr);
        // SAFETY: as above.
        assert_eq!(unsafe { arena.bytes(again) }, &[0xA5; 64][..]);
        let over_the_copy = arena.for_discard(16).unwrap();
        assert_eq!(over_the_copy.ptr, copied.ptr);
        // SAFETY: as above.
        assert_eq!(unsafe { arena.bytes(over_the_copy) }, &[7; 16][..]);
        // Below everything handed out before: zeroed.
        let below = arena.for_discard(32).unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { arena.bytes(below) }, &[0; 32][..]);
        // A payload larger than the chunk has room for: a new chunk, zeroed.
        let capacity = arena.bump.chunk_capacity();
        let big = arena.for_discard(capacity + 4096).unwrap();
        // SAFETY: as above.
        let big_bytes = unsafe { arena.bytes_mut(big) };
        assert!(
            big_bytes.iter().all(|&b| b == 0),
            "a new chunk's bytes are zeroed"
        );
        big_bytes.fill(0x3C);
        arena.reset();
        // The reset keeps the newest chunk, whose bytes were written: handed out as they are.
        let kept = arena.for_discard(64).unwrap();
        // SAFETY: as above.
        assert_eq!(unsafe { arena.bytes(kept) }, &[0x3C; 64][..]);
        let empty = arena.for_discard(0).unwrap();
        assert_eq!(empty.len(), 0);
    }

    /// The figure `OPERATION_BYTES` documents: the engine's record of an operation fits in
    /// it for any command of up to 48 bytes, of any alignment up to 8.
    #[test]
    fn r_e3_an_operation_counts_at_least_its_memory() {
        assert!(core::mem::size_of::<Recorded<[u8; 48]>>() <= OPERATION_BYTES);
        assert!(core::mem::size_of::<Recorded<[u64; 6]>>() <= OPERATION_BYTES);
        assert!(core::mem::size_of::<Recorded<()>>() <= OPERATION_BYTES);
    }

    #[test]
    fn noted_sets_sort_at_the_end_and_stay_small() {
        let mut set = Vec::new();
        for i in 0..1000u32 {
            note_in_set(&mut set, [7, 3, 3, 9, 1][i as usize % 5]);
            assert!(set.len() <= 8, "{set:?}");
        }
        sort_set(&mut set);
        assert_eq!(set, [1, 3, 7, 9]);
        let mut many = Vec::new();
        for i in (0..100u32).rev().chain(0..100) {
            note_in_set(&mut many, i);
        }
        assert!(many.capacity() <= 256, "{}", many.capacity());
        sort_set(&mut many);
        assert_eq!(many, (0..100).collect::<Vec<_>>());
    }

    /// Distinct items noted in rotation, as many as fill the vector but one, cost a few
    /// comparisons each, not a sort each (a vector left nearly full after a sort would be
    /// sorted again at almost every note).
    #[test]
    fn noted_sets_sort_rarely_whatever_the_rotation() {
        use core::cell::Cell;
        use core::cmp::Ordering;
        thread_local!(static COMPARED: Cell<u64> = const { Cell::new(0) });
        #[derive(Clone, Copy, PartialEq, Eq)]
        struct Counted(u32);
        impl PartialOrd for Counted {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                Some(self.cmp(other))
            }
        }
        impl Ord for Counted {
            fn cmp(&self, other: &Self) -> Ordering {
                COMPARED.with(|c| c.set(c.get() + 1));
                self.0.cmp(&other.0)
            }
        }
        let rounds = if cfg!(miri) { 3 } else { 50 };
        for distinct in [63u32, 64, 1023, 1024] {
            let mut set = Vec::new();
            COMPARED.with(|c| c.set(0));
            for _ in 0..rounds {
                for i in 0..distinct {
                    note_in_set(&mut set, Counted(i));
                }
            }
            let notes = u64::from(distinct) * rounds;
            let per_note = COMPARED.with(Cell::get) as f64 / notes as f64;
            assert!(
                per_note < 40.0,
                "{distinct} in rotation: {per_note:.1} per note"
            );
            assert!(
                set.capacity() <= 4 * distinct as usize,
                "{}",
                set.capacity()
            );
            sort_set(&mut set);
            assert_eq!(set.len(), distinct as usize);
        }
    }

    #[test]
    fn recording_counts_bytes_for_the_budget() {
        let mut rec: Recording<u8, ()> = Recording::default();
        assert_eq!(rec.bytes(), 0);
        rec.ops.push(Recorded::Command(1));
        rec.operations += 1;
        let payload = rec.payloads.copy(&[0; 40]).unwrap();
        rec.payload_bytes += 40;
        rec.ops.push(Recorded::WriteDiscard {
            resource: Handle::from_bits(1 << 32).unwrap(),
            payload,
        });
        rec.operations += 1;
        assert_eq!(rec.bytes(), 2 * OPERATION_BYTES + 40);
        rec.clear();
        assert_eq!(rec.bytes(), 0);
    }
}
