//! Two lock-free stacks of `u32` indices, linked through per-index `AtomicU32` "next" cells
//! that the caller owns (intrusive: pushing never allocates).
//!
//! - [`IndexStack`]: push and pop from any thread (the registry's free slots). The head packs
//!   the top index with a 32-bit tag bumped on every change, so a pop that raced with a
//!   pop-push of the same index fails its CAS instead of installing a stale next (ABA).
//! - [`TakeAllStack`]: many producers push, one consumer takes the whole stack at once (the
//!   retire queue of R-D1, a deferred context's destroyed command lists of R-R7). Taking all
//!   is one swap, and a Treiber push is ABA-safe, so no tag is needed.
//!
//! Invariant for both: an index is in at most one stack at a time, and its next cell is
//! written only by the thread pushing it (before the publishing CAS).

use crate::primitive::{AtomicU32, AtomicU64, Ordering};

/// The "no index" marker.
pub(crate) const NIL: u32 = u32::MAX;

fn pack(index: u32, tag: u32) -> u64 {
    ((tag as u64) << 32) | index as u64
}

fn unpack(word: u64) -> (u32, u32) {
    (word as u32, (word >> 32) as u32)
}

/// A lock-free LIFO of indices: push and pop from any thread.
pub(crate) struct IndexStack {
    head: AtomicU64,
}

impl IndexStack {
    pub(crate) fn new() -> Self {
        IndexStack {
            head: AtomicU64::new(pack(NIL, 0)),
        }
    }

    /// Pushes `index`; `next_of` gives its next cell.
    pub(crate) fn push<'a>(&self, index: u32, next_of: impl Fn(u32) -> &'a AtomicU32) {
        self.push_chain(index, index, next_of);
    }

    /// Pushes a chain of indices at once (one CAS): `first` becomes the top, and `last`,
    /// reached from `first` through the next cells the caller linked, gets the old top as
    /// its next. The caller owns every index of the chain until this returns.
    pub(crate) fn push_chain<'a>(
        &self,
        first: u32,
        last: u32,
        next_of: impl Fn(u32) -> &'a AtomicU32,
    ) {
        debug_assert_ne!(first, NIL);
        debug_assert_ne!(last, NIL);
        let index = first;
        let next = next_of(last);
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            let (top, tag) = unpack(head);
            next.store(top, Ordering::Relaxed);
            // Release: a popper that sees `index` on top also sees its next cell.
            match self.head.compare_exchange_weak(
                head,
                pack(index, tag.wrapping_add(1)),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// Pops the top index, if any.
    pub(crate) fn pop<'a>(&self, next_of: impl Fn(u32) -> &'a AtomicU32) -> Option<u32> {
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            let (top, tag) = unpack(head);
            if top == NIL {
                return None;
            }
            // May read a next that a racing pop-push already changed: the tag makes the CAS
            // below fail in that case, so a stale value is never installed.
            let next = next_of(top).load(Ordering::Relaxed);
            match self.head.compare_exchange_weak(
                head,
                pack(next, tag.wrapping_add(1)),
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(top),
                Err(now) => head = now,
            }
        }
    }
}

/// A lock-free stack that many threads push onto and one consumer empties at once.
pub(crate) struct TakeAllStack {
    head: AtomicU32,
}

impl TakeAllStack {
    pub(crate) fn new() -> Self {
        TakeAllStack {
            head: AtomicU32::new(NIL),
        }
    }

    /// Pushes `index` (any thread): one CAS in the common case.
    pub(crate) fn push<'a>(&self, index: u32, next_of: impl Fn(u32) -> &'a AtomicU32) {
        debug_assert_ne!(index, NIL);
        let next = next_of(index);
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            next.store(head, Ordering::Relaxed);
            match self
                .head
                .compare_exchange_weak(head, index, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => head = now,
            }
        }
    }

    /// Whether the stack looks empty (a relaxed hint: a racing push is seen next time).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.head.load(Ordering::Relaxed) == NIL
    }

    /// Takes every pushed index (one swap) and calls `each` on them, newest first.
    pub(crate) fn take_all<'a>(
        &self,
        next_of: impl Fn(u32) -> &'a AtomicU32,
        mut each: impl FnMut(u32),
    ) {
        if self.head.load(Ordering::Relaxed) == NIL {
            return;
        }
        let mut top = self.head.swap(NIL, Ordering::Acquire);
        while top != NIL {
            // Read next before `each`, which may push the index somewhere else.
            let next = next_of(top).load(Ordering::Relaxed);
            each(top);
            top = next;
        }
    }
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn cells(n: usize) -> Vec<AtomicU32> {
        (0..n).map(|_| AtomicU32::new(NIL)).collect()
    }

    #[test]
    fn index_stack_is_lifo_and_empties() {
        let next = cells(4);
        let s = IndexStack::new();
        for i in 0..4 {
            s.push(i, |i| &next[i as usize]);
        }
        let popped: Vec<u32> = std::iter::from_fn(|| s.pop(|i| &next[i as usize])).collect();
        assert_eq!(popped, vec![3, 2, 1, 0]);
    }

    #[test]
    fn take_all_sees_every_push_once() {
        let next = cells(8);
        let s = TakeAllStack::new();
        for i in 0..8 {
            s.push(i, |i| &next[i as usize]);
        }
        let mut seen = Vec::new();
        s.take_all(|i| &next[i as usize], |i| seen.push(i));
        assert_eq!(seen, vec![7, 6, 5, 4, 3, 2, 1, 0]);
    }

    #[test]
    fn index_stack_threads_never_lose_or_duplicate() {
        const N: u32 = if cfg!(miri) { 16 } else { 256 };
        let next: Arc<Vec<AtomicU32>> = Arc::new(cells(N as usize));
        let s = Arc::new(IndexStack::new());
        for i in 0..N {
            s.push(i, |i| &next[i as usize]);
        }
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (s, next) = (s.clone(), next.clone());
                std::thread::spawn(move || {
                    for _ in 0..if cfg!(miri) { 50 } else { 10_000 } {
                        if let Some(i) = s.pop(|i| &next[i as usize]) {
                            s.push(i, |i| &next[i as usize]);
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let mut all: Vec<u32> = std::iter::from_fn(|| s.pop(|i| &next[i as usize])).collect();
        all.sort_unstable();
        assert_eq!(all, (0..N).collect::<Vec<_>>());
    }
}

#[cfg(test)]
#[cfg(loom)]
mod loom_models {
    use super::*;
    use loom::sync::Arc;

    fn cells(n: usize) -> Vec<AtomicU32> {
        (0..n).map(|_| AtomicU32::new(NIL)).collect()
    }

    /// Two threads pop and push back while the stack holds two indices: at the end both
    /// indices are in it exactly once (no loss, no duplication, no ABA corruption).
    #[test]
    fn loom_index_stack_pop_push_race() {
        loom::model(|| {
            let next = Arc::new(cells(2));
            let s = Arc::new(IndexStack::new());
            s.push(0, |i| &next[i as usize]);
            s.push(1, |i| &next[i as usize]);
            let t: Vec<_> = (0..2)
                .map(|_| {
                    let (s, next) = (s.clone(), next.clone());
                    loom::thread::spawn(move || {
                        if let Some(i) = s.pop(|i| &next[i as usize]) {
                            s.push(i, |i| &next[i as usize]);
                        }
                    })
                })
                .collect();
            for t in t {
                t.join().unwrap();
            }
            let mut all = Vec::new();
            while let Some(i) = s.pop(|i| &next[i as usize]) {
                all.push(i);
            }
            all.sort_unstable();
            assert_eq!(all, vec![0, 1]);
        });
    }

    /// The ABA schedule the tag exists for. The stack holds A, B, C (A on top). One thread
    /// pops once; the other pops A, pops B and pushes A back while keeping B. Interleaved
    /// so that the first thread reads head A and A's next (B), stalls, and then tries its
    /// CAS after the other thread's three operations, an untagged head still equals A, the
    /// CAS installs the stale B, and B ends up both in the stack and owned by the second
    /// thread while C is lost. With the tag, that CAS fails and the pop retries.
    ///
    /// At the end every index is owned by exactly one party (a thread or the stack).
    /// Catches the mutant without the ABA tag (push and pop installing `pack(_, tag)`
    /// instead of `pack(_, tag + 1)`, which leaves the head comparing by index only), on
    /// which `loom_index_stack_pop_push_race` still passes: with two indices and one
    /// pop-push per thread, no thread can pop two indices and push the first back. A tag
    /// bumped by only one of push and pop still makes the stale CAS fail (the schedule needs
    /// both a pop and a push of A), and the model passes on those two variants.
    #[test]
    fn loom_index_stack_aba_pop_pop_push() {
        const A: u32 = 0;
        const B: u32 = 1;
        const C: u32 = 2;
        loom::model(|| {
            let next = Arc::new(cells(3));
            let s = Arc::new(IndexStack::new());
            for i in [C, B, A] {
                s.push(i, |i| &next[i as usize]);
            }
            let popper = {
                let (s, next) = (s.clone(), next.clone());
                loom::thread::spawn(move || s.pop(|i| &next[i as usize]))
            };
            let kept = {
                let (s, next) = (s.clone(), next.clone());
                loom::thread::spawn(move || {
                    let first = s.pop(|i| &next[i as usize]);
                    let second = s.pop(|i| &next[i as usize]);
                    if let Some(first) = first {
                        s.push(first, |i| &next[i as usize]);
                    }
                    second
                })
            };
            let mut all: Vec<u32> = popper.join().unwrap().into_iter().collect();
            all.extend(kept.join().unwrap());
            while let Some(i) = s.pop(|i| &next[i as usize]) {
                // Bounded: a corrupted stack can hold a cycle.
                assert!(
                    all.len() < 3,
                    "the stack holds more than was pushed: {all:?}"
                );
                all.push(i);
            }
            all.sort_unstable();
            assert_eq!(all, vec![A, B, C], "every index owned exactly once");
        });
    }

    /// Two producers push while the consumer takes all: every index is taken exactly once.
    #[test]
    fn loom_take_all_many_producers_one_consumer() {
        loom::model(|| {
            let next = Arc::new(cells(3));
            let s = Arc::new(TakeAllStack::new());
            let producers: Vec<_> = (0..2u32)
                .map(|p| {
                    let (s, next) = (s.clone(), next.clone());
                    loom::thread::spawn(move || s.push(p, |i| &next[i as usize]))
                })
                .collect();
            let mut seen = Vec::new();
            s.take_all(|i| &next[i as usize], |i| seen.push(i));
            s.push(2, |i| &next[i as usize]);
            for p in producers {
                p.join().unwrap();
            }
            s.take_all(|i| &next[i as usize], |i| seen.push(i));
            seen.sort_unstable();
            assert_eq!(seen, vec![0, 1, 2]);
        });
    }
}
