//! Reclaiming registry slots: the CPU clock, the immediate context's half.
//!
//! Other threads find entries without locks, under a crossbeam-epoch pin. The immediate
//! context (the single reclaimer) unlinks an entry from its slot when the object is really
//! destroyed; from then on no new reader can reach it, but readers pinned earlier may still
//! hold it, so the slot cannot be reused yet. Instead of deferring each entry into
//! crossbeam-epoch's global collector (whose collection, a few bags per pin, falls behind a
//! flush that retires thousands of entries, and which may never run a device's garbage at
//! all once its threads are idle), the unlinked slots wait here, chained through their
//! free-stack links, owned by the device:
//!
//! 1. **Chain**: each slot unlinked during one pass (a flush, a primary's destruction) is
//!    linked onto the open chain: O(1), no allocation.
//! 2. **Seal**: at the end of the pass the chain gets the next ticket number, and one small
//!    closure is deferred through the epoch: when it runs, every thread pinned at the time of
//!    the unlinks has unpinned, and it publishes "tickets up to this one have passed". One
//!    deferred function per pass, however many slots: collection keeps up at any rate. When
//!    many slots wait, the thread's epoch bag is flushed to the global queue so that the
//!    epoch moves on without waiting for the bag to fill.
//! 3. **Collect**: at the next passes, each chain whose ticket has passed is handed back
//!    whole, to go onto the free stack with one CAS. The entry left in each slot is dropped
//!    by the create that reuses the slot (it writes that memory next anyway), or with the
//!    device.
//!
//! So the immediate context's share of reclaiming an object is a link write, and its share
//! of freeing a whole pass is one CAS: it keeps up with any number of threads destroying.
//!
//! # Invariant
//! A chain is handed back only after its ticket passed: no reader pinned before its slots
//! were unlinked is still pinned.

use std::collections::VecDeque;
use std::sync::Arc;

use crossbeam_epoch::Guard;

use crate::primitive::{AtomicU64, Ordering};
use crate::registry::index_stack::NIL;

/// Slots in one pass from which sealing it also flushes the thread's epoch bag, so the epoch
/// advances now rather than after 64 more deferred functions. Small enough to bound the
/// memory of a burst, large enough that a steady trickle of destroys rarely seals a bag
/// (sealing allocates).
const FLUSH_AT: usize = 256;

/// Slots chained through their next links: `top` first, `bottom` last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Chain {
    pub(crate) top: u32,
    pub(crate) bottom: u32,
    pub(crate) len: usize,
}

/// What one pass unlinked, waiting for its ticket.
#[derive(Debug)]
struct Batch {
    ticket: u64,
    chain: Chain,
}

/// The slots one registry unlinked and readers may still hold. See the module docs.
#[derive(Debug)]
pub(crate) struct Limbo {
    /// Sealed chains, oldest (lowest ticket) first.
    sealed: VecDeque<Batch>,
    /// The chain of the pass under way.
    open: Option<Chain>,
    /// Slots in `sealed` and `open`.
    waiting: usize,
    next_ticket: u64,
    /// The highest ticket whose epoch has passed, written by the deferred closures.
    passed: Arc<AtomicU64>,
}

impl Default for Limbo {
    fn default() -> Self {
        Limbo {
            sealed: VecDeque::new(),
            open: None,
            waiting: 0,
            next_ticket: 1,
            passed: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Limbo {
    /// Slots unlinked and not yet handed back.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting
    }

    /// Takes a slot just unlinked; returns what its next link must be set to (the chain's
    /// previous top, or [`NIL`]).
    pub(crate) fn push(&mut self, index: u32) -> u32 {
        self.waiting += 1;
        match &mut self.open {
            Some(chain) => {
                let next = chain.top;
                chain.top = index;
                chain.len += 1;
                next
            }
            None => {
                self.open = Some(Chain {
                    top: index,
                    bottom: index,
                    len: 1,
                });
                NIL
            }
        }
    }

    /// Seals the open chain under `guard` (pinned after every unlink of the pass), so that
    /// it is handed back once every reader pinned before has unpinned.
    pub(crate) fn seal(&mut self, guard: &Guard) {
        let Some(chain) = self.open.take() else {
            return;
        };
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.sealed.push_back(Batch { ticket, chain });
        let passed = Arc::clone(&self.passed);
        // Release: the collector that reads the ticket (Acquire) is ordered after every
        // reader that was pinned when the slots were unlinked.
        guard.defer(move || passed.fetch_max(ticket, Ordering::Release));
        // A large pass hands its closure to the global queue now; small ones ride in the
        // thread's bag until it fills, or until amortised processing flushes it (a flush
        // seals a bag, which allocates: not once per small pass).
        if chain.len >= FLUSH_AT {
            guard.flush();
        }
    }

    /// Hands every chain whose ticket has passed to `each`, oldest first. Returns how many
    /// slots it handed back. Inlined for its test: most flushes find nothing sealed.
    #[inline(always)]
    pub(crate) fn collect(&mut self, each: impl FnMut(Chain)) -> usize {
        if self.sealed.is_empty() {
            return 0;
        }
        self.collect_passed(each)
    }

    /// [`Limbo::collect`] where something is sealed.
    #[inline(never)]
    fn collect_passed(&mut self, mut each: impl FnMut(Chain)) -> usize {
        let passed = self.passed.load(Ordering::Acquire);
        let mut handed = 0;
        while self.sealed.front().is_some_and(|b| b.ticket <= passed) {
            let batch = self.sealed.pop_front().expect("checked above");
            handed += batch.chain.len;
            each(batch.chain);
        }
        self.waiting -= handed;
        handed
    }

    /// Gives back the queue's spare capacity (R-A1).
    pub(crate) fn trim(&mut self) {
        self.sealed.shrink_to_fit();
    }

    /// Memory the limbo keeps.
    pub(crate) fn retained_bytes(&self) -> usize {
        self.sealed.capacity() * core::mem::size_of::<Batch>()
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;
    use crate::primitive::AtomicU32;
    use crossbeam_epoch as epoch;

    /// Unlinks `count` slots from `next` on, linking them as the limbo says.
    fn unlink(limbo: &mut Limbo, links: &[AtomicU32], next: &mut u32, count: u32) {
        for _ in 0..count {
            let link = limbo.push(*next);
            links[*next as usize].store(link, Ordering::Relaxed);
            *next += 1;
        }
    }

    /// Walks a chain through its links.
    fn walk(chain: Chain, links: &[AtomicU32], into: &mut Vec<u32>) {
        let mut at = chain.top;
        for _ in 0..chain.len {
            into.push(at);
            at = links[at as usize].load(Ordering::Relaxed);
        }
        assert_eq!(*into.last().expect("chains are not empty"), chain.bottom);
    }

    /// Moves the epoch on until every chain came back (or gives up); how many tries it took.
    fn drain(
        limbo: &mut Limbo,
        links: &[AtomicU32],
        back: &mut Vec<u32>,
        local: &epoch::LocalHandle,
    ) -> usize {
        let mut spins = 0;
        while limbo.waiting() > 0 && spins < 100_000 {
            let guard = local.pin();
            guard.flush();
            limbo.collect(|c| walk(c, links, back));
            spins += 1;
        }
        spins
    }

    /// Chains come back once their epoch passed, oldest first, each slot exactly once, and
    /// the backlog stays a few passes whatever the rate. Each test has a collector of its
    /// own: under the global one, a reader another test keeps pinned holds this test's
    /// epoch back, and the test failed about one run in five.
    #[test]
    fn chains_come_back_after_their_epoch_each_slot_once() {
        let collector = epoch::Collector::new();
        let local = collector.register();
        let per = if cfg!(miri) { 4 } else { 1000 };
        let passes = if cfg!(miri) { 3 } else { 50 };
        let links: Vec<AtomicU32> = (0..per * passes).map(|_| AtomicU32::new(NIL)).collect();
        let mut back = Vec::new();
        let mut limbo = Limbo::default();
        let mut next = 0u32;
        for _ in 0..passes {
            let guard = local.pin();
            limbo.collect(|c| walk(c, &links, &mut back));
            unlink(&mut limbo, &links, &mut next, per);
            limbo.seal(&guard);
        }
        let spins = drain(&mut limbo, &links, &mut back, &local);
        assert_eq!(
            limbo.waiting(),
            0,
            "still waiting after {spins} collections"
        );
        back.sort_unstable();
        assert_eq!(back, (0..next).collect::<Vec<_>>());
    }

    /// A reader pinned before the unlink keeps the chain until it unpins.
    #[test]
    fn a_pinned_reader_holds_its_chain() {
        let collector = epoch::Collector::new();
        let local = collector.register();
        let links: Vec<AtomicU32> = (0..2).map(|_| AtomicU32::new(NIL)).collect();
        let mut limbo = Limbo::default();
        let (pinned_tx, pinned_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let readers = collector.clone();
        let reader = std::thread::spawn(move || {
            let handle = readers.register();
            let _guard = handle.pin();
            pinned_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        });
        pinned_rx.recv().unwrap();
        {
            let guard = local.pin();
            let mut next = 0;
            unlink(&mut limbo, &links, &mut next, 2);
            limbo.seal(&guard);
        }
        let mut back = Vec::new();
        for _ in 0..if cfg!(miri) { 10 } else { 200 } {
            let guard = local.pin();
            guard.flush();
            limbo.collect(|c| walk(c, &links, &mut back));
        }
        assert!(back.is_empty(), "handed back under a pinned reader");
        release_tx.send(()).unwrap();
        reader.join().unwrap();
        let spins = drain(&mut limbo, &links, &mut back, &local);
        assert_eq!(back, [1, 0], "after {spins} collections");
    }
}
