//! The positions of the handles a deferred context named last: see [`RecentHandles`].

use core::cell::Cell;

use crate::handle::AnyHandle;

/// How many handles [`RecentHandles`] remembers: one per slot modulo this, enough for the
/// objects of a few draws (a draw names a few buffers, views and shaders) in 512 bytes.
const RECENT: usize = 32;

/// Where the open context-local handles a recording named last are in its table, found with
/// one compare: an object named again (the constant buffer mapped each draw, the shaders and
/// views bound each draw) skips the two-level slot table and its checks.
///
/// Direct-mapped by slot. An entry is the whole handle, generation and type included, so a
/// handle that only shares a slot never matches; it is written when a handle is found in the
/// table (a handle's first use after it opened pays for the table once), and erased when
/// that handle closes, so a match is always a handle open at that position (positions do not move while open: handles are pushed at the end
/// and closed from the end). Interior mutability, so that lookups through `&self` remember
/// what they found: the table belongs to one context on one thread (`Send`, not `Sync`).
#[derive(Debug)]
pub(crate) struct RecentHandles {
    /// A handle's bits (0: none, which no handle is) and its position.
    entries: [Cell<(u64, u32)>; RECENT],
}

impl Default for RecentHandles {
    fn default() -> Self {
        RecentHandles {
            entries: core::array::from_fn(|_| Cell::new((0, 0))),
        }
    }
}

impl RecentHandles {
    /// The position of `handle` if it is remembered.
    #[inline(always)]
    pub(crate) fn find(&self, handle: AnyHandle) -> Option<usize> {
        let (bits, at) = self.entry(handle).get();
        (bits == handle.to_bits()).then_some(at as usize)
    }

    /// Remembers that `handle` is open at `at`, in place of the handle it shares an entry with.
    #[inline(always)]
    pub(crate) fn note(&self, handle: AnyHandle, at: usize) {
        self.entry(handle).set((handle.to_bits(), at as u32));
    }

    /// Forgets `handle`, which is closing.
    #[inline(always)]
    pub(crate) fn forget(&self, handle: AnyHandle) {
        let entry = self.entry(handle);
        if entry.get().0 == handle.to_bits() {
            entry.set((0, 0));
        }
    }

    #[inline(always)]
    fn entry(&self, handle: AnyHandle) -> &Cell<(u64, u32)> {
        &self.entries[handle.slot() as usize % RECENT]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(slot: u32, generation: u32) -> AnyHandle {
        AnyHandle::from_bits((u64::from(generation) << 32) | u64::from(slot)).unwrap()
    }

    #[test]
    fn finds_what_it_noted_until_forgotten() {
        let recent = RecentHandles::default();
        let a = handle(3, 1);
        assert_eq!(recent.find(a), None);
        recent.note(a, 7);
        assert_eq!(recent.find(a), Some(7));
        recent.forget(a);
        assert_eq!(recent.find(a), None);
    }

    #[test]
    fn a_handle_sharing_an_entry_never_matches_and_replaces_it() {
        let recent = RecentHandles::default();
        let a = handle(3, 1);
        // The same slot, another generation; another slot with the same entry.
        let reused = handle(3, 2);
        let other = handle(3 + RECENT as u32, 1);
        recent.note(a, 1);
        assert_eq!(recent.find(reused), None);
        assert_eq!(recent.find(other), None);
        recent.note(other, 2);
        assert_eq!(recent.find(a), None);
        assert_eq!(recent.find(other), Some(2));
        // Forgetting a handle the entry no longer holds leaves the entry alone.
        recent.forget(a);
        assert_eq!(recent.find(other), Some(2));
    }
}
