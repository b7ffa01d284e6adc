//! The list clock: when a destroyed command list's memory may be reused (R-D1 applied to
//! command-list memory, R-D4 for drivers whose GPU reads it).
//!
//! A command list executed on the immediate context is *stamped* with the buffer that
//! executed it ([`ListStamp`]); that buffer keeps pointing into the list's memory until it
//! is submitted (or, for a driver whose GPU reads the list itself, completed). The immediate
//! context *publishes* the clock after each flush ([`ListClock::publish`]): every buffer
//! numbered at or below `submitted_through` was submitted or was empty, and the GPU finished
//! every buffer up to `completed`. Any thread *asks* whether a stamp has passed
//! ([`ListClock::passed`]) before it recycles or frees a list.
//!
//! # Orderings, once
//! - The stamp is written by the immediate context before it replays the list, and read by
//!   whoever reuses the list after taking it from a lock-free list the list's dropper pushed
//!   with Release: the push orders the stamp before the reader, so the stamp itself is
//!   Relaxed.
//! - `publish` stores with Release after the submit; `passed` loads with Acquire: a reader
//!   that sees a number also sees everything the immediate context did before publishing it,
//!   the submit that read the list's memory included, so reusing the memory cannot race it.
//!
//! The loom model below runs these two types on every interleaving of an executing
//! immediate context, a dropping owner and a recycling deferred context (the drop stack that
//! carries the list between them has loom models of its own, in `recycle`).

use crossbeam_utils::CachePadded;

use crate::primitive::{AtomicU64, Ordering};
use crate::registry::retire::Clock;

/// The device-wide list clock. See the module docs.
#[derive(Debug)]
pub(crate) struct ListClock {
    /// What the stamp is checked against ([`crate::DeviceConfig::list_clock`]).
    policy: Clock,
    /// Every buffer numbered at or below this was submitted (or was empty).
    submitted_through: CachePadded<AtomicU64>,
    /// The newest buffer the GPU has finished.
    completed: CachePadded<AtomicU64>,
}

impl ListClock {
    pub(crate) fn new(policy: Clock) -> Self {
        ListClock {
            policy,
            submitted_through: CachePadded::new(AtomicU64::new(0)),
            completed: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// After a flush, on the immediate context's thread: where the clocks stand now.
    #[inline]
    pub(crate) fn publish(&self, submitted_through: u64, completed: u64) {
        self.submitted_through
            .store(submitted_through, Ordering::Release);
        self.completed.store(completed, Ordering::Release);
    }

    /// Whether a list stamped `stamp` (0: never executed) may be reused now: its buffer
    /// passed the clock. Any thread.
    #[inline]
    pub(crate) fn passed(&self, stamp: &ListStamp) -> bool {
        let stamp = stamp.get();
        stamp == 0
            || stamp
                <= match self.policy {
                    Clock::Submitted => self.submitted_through.load(Ordering::Acquire),
                    Clock::Completed => self.completed.load(Ordering::Acquire),
                }
    }
}

/// The immediate-context buffer that last executed a list (0: none since its creation).
#[derive(Debug, Default)]
pub(crate) struct ListStamp(AtomicU64);

impl ListStamp {
    /// The immediate context executes the list in buffer `buffer`.
    #[inline]
    pub(crate) fn executed_in(&self, buffer: u64) {
        // Relaxed: see the module docs (the list's drop and push order it).
        self.0.store(buffer, Ordering::Relaxed);
    }

    /// Whether the list's last execute was in buffer `buffer` (the immediate context's
    /// own question: it alone writes the stamp).
    #[inline]
    pub(crate) fn is(&self, buffer: u64) -> bool {
        self.get() == buffer
    }

    /// A new life of the list: never executed.
    #[inline]
    pub(crate) fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }

    #[inline]
    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
#[cfg(loom)]
mod loom_models {
    use super::*;
    use crate::primitive::AtomicBool;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::thread;

    /// One list and the threads around it: its stamp and its memory (a loom cell, so a reuse
    /// not ordered after the submit that read it is a reported data race), the DC's inbox of
    /// destroyed lists reduced to this one list (the drop stack's own models check the
    /// stack), the device's clock, and the kernel's ground truth.
    struct World {
        stamp: ListStamp,
        memory: UnsafeCell<u64>,
        /// The execute returned: the owner may drop the list.
        executed: AtomicBool,
        /// The list is in the DC's inbox.
        destroyed: AtomicBool,
        clock: ListClock,
        kernel_submitted: crate::primitive::AtomicU64,
    }

    // SAFETY: `memory` is only reached through loom's `with`/`with_mut`, which check every
    // pair of accesses from different threads for happens-before; the rest is atomic.
    unsafe impl Sync for World {}

    impl World {
        fn read(&self) -> u64 {
            // SAFETY: see `impl Sync for World`: loom checks this read.
            self.memory.with(|p| unsafe { *p })
        }

        /// One Finish's recycling step: whether it recycled the list. `last` is the buffer
        /// that really executed it last.
        fn finish(&self, waiting: &mut bool, last: u64) -> bool {
            // Taking the inbox: Acquire, as `DropStack::take_all`'s swap.
            if !*waiting && !self.destroyed.swap(false, Ordering::Acquire) {
                return false;
            }
            if !self.clock.passed(&self.stamp) {
                *waiting = true;
                return false;
            }
            assert_eq!(
                self.stamp.get(),
                last,
                "the stamp of the last execute is seen"
            );
            assert!(
                self.kernel_submitted.load(Ordering::Relaxed) >= last,
                "recycled before buffer {last} was submitted"
            );
            // RecycleCommandList: the driver reuses the memory.
            // SAFETY: see `impl Sync for World`: loom checks this write.
            self.memory.with_mut(|p| unsafe { *p = 0 });
            *waiting = false;
            true
        }
    }

    /// The IC executes the list in buffers `1..=times` (flushing after each: submit, then
    /// publish), the owner drops it after the last execute (pushes it, a Release CAS as
    /// `DropStack::push`), and the DC runs two Finishes concurrently and one after all
    /// threads are done; the list must be recycled by then, never early.
    fn model(times: u64) {
        loom::model(move || {
            let w = Arc::new(World {
                stamp: ListStamp::default(),
                memory: UnsafeCell::new(7),
                executed: AtomicBool::new(false),
                destroyed: AtomicBool::new(false),
                clock: ListClock::new(Clock::Submitted),
                kernel_submitted: crate::primitive::AtomicU64::new(0),
            });
            let ic = {
                let w = Arc::clone(&w);
                thread::spawn(move || {
                    for n in 1..=times {
                        w.stamp.executed_in(n);
                        assert_eq!(w.read(), 7, "replayed a recycled list");
                        if n == times {
                            w.executed.store(true, Ordering::Release);
                        }
                        assert_eq!(w.read(), 7, "submitted a recycled list");
                        w.kernel_submitted.store(n, Ordering::Relaxed);
                        w.clock.publish(n, 0);
                    }
                })
            };
            let owner = {
                let w = Arc::clone(&w);
                thread::spawn(move || {
                    while !w.executed.load(Ordering::Acquire) {
                        thread::yield_now();
                    }
                    let pushed = w.destroyed.compare_exchange(
                        false,
                        true,
                        Ordering::Release,
                        Ordering::Relaxed,
                    );
                    assert_eq!(pushed, Ok(false), "one list, pushed once");
                })
            };
            let mut waiting = false;
            let recycled = (0..2).any(|_| w.finish(&mut waiting, times));
            ic.join().unwrap();
            owner.join().unwrap();
            if !recycled {
                assert!(w.finish(&mut waiting, times), "recycled once submitted");
            }
        });
    }

    #[test]
    fn loom_list_waits_for_the_buffer_that_executed_it() {
        model(1);
    }

    #[test]
    fn loom_list_executed_twice_waits_for_the_later_buffer() {
        model(2);
    }
}
