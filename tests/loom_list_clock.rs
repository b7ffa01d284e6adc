//! A loom model of "a destroyed command list waits for its submission" (DESIGN.md, "Two
//! clocks"; R-D1 applied to command-list memory).
//!
//! The protocol, as `src/immediate.rs`, `src/command_list.rs` and `src/deferred.rs` run it:
//!
//! 1. The immediate context (IC) executes the list: it stamps `last_executed` with its open
//!    buffer's number (Relaxed) and replays the list's memory. The open buffer keeps
//!    pointing into that memory until it is submitted.
//! 2. The list's owner, another thread, drops it once the execute returned (here an
//!    Acquire/Release handoff, as a `&CommandList` borrow ending across threads would be)
//!    and pushes it onto its deferred context's lock-free list (Release).
//! 3. The IC flushes: it submits the buffer (the kernel reads it, and through it the list's
//!    memory), then publishes `submitted_through` (Release).
//! 4. The deferred context (DC) takes the destroyed lists (Acquire), reads
//!    `submitted_through` (Acquire) and `last_executed` (Relaxed), and recycles, that is
//!    writes, the list's memory only if `last_executed <= submitted_through`; otherwise the
//!    list waits for a later Finish.
//!
//! The model checks, over every interleaving, that the DC never recycles a list whose
//! executing buffer was not yet submitted: the kernel's submitted fence (ground truth) is
//! asserted, and the list's memory is a loom `UnsafeCell`, so a recycle not ordered after
//! the submit's read is reported as a data race. Two `should_panic` models weaken one
//! ordering each and show that the model catches it.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release --test
//! loom_list_clock`.
#![cfg(loom)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

/// What the threads share: one list, its context's destroyed-list slot, the IC's clock.
struct Shared {
    /// `ListData::last_executed`: the IC buffer that last executed the list.
    last_executed: AtomicU64,
    /// The list's memory (its recorded commands).
    memory: UnsafeCell<u64>,
    /// The execute returned: the owner may drop the list.
    executed: AtomicBool,
    /// The DC's lock-free list of destroyed lists, reduced to the one list.
    destroyed: AtomicBool,
    /// `DeviceShared::submitted_through`.
    submitted_through: AtomicU64,
    /// Ground truth: the newest fence the kernel was handed.
    kernel_submitted: AtomicU64,
}

// SAFETY: `memory` is only reached through loom's `with`/`with_mut`, which check that every
// pair of accesses from different threads is ordered by happens-before and fail the model
// (before the access) when one is not; the other fields are atomics.
unsafe impl Sync for Shared {}

/// The orderings under test; [`ENGINE`] is the engine's.
#[derive(Clone, Copy)]
struct Orderings {
    /// The IC's store of `submitted_through` after a submit.
    publish: Ordering,
    /// The owner's push of the destroyed list.
    push: Ordering,
}

const ENGINE: Orderings = Orderings {
    publish: Ordering::Release,
    push: Ordering::Release,
};

impl Shared {
    fn new() -> Self {
        Shared {
            last_executed: AtomicU64::new(0),
            memory: UnsafeCell::new(7),
            executed: AtomicBool::new(false),
            destroyed: AtomicBool::new(false),
            submitted_through: AtomicU64::new(0),
            kernel_submitted: AtomicU64::new(0),
        }
    }

    fn read_memory(&self) -> u64 {
        // SAFETY: see `impl Sync for Shared`: loom checks this read against every write.
        self.memory.with(|p| unsafe { *p })
    }

    /// CommandListExecute in buffer `n`: the stamp, then the replay.
    fn execute(&self, n: u64) {
        self.last_executed.store(n, Ordering::Relaxed);
        assert_eq!(self.read_memory(), 7, "replayed a recycled list");
    }

    /// Flush of buffer `n`: submit (the kernel reads the buffer and the list memory it
    /// points into), then publish the clock.
    fn flush(&self, n: u64, o: Orderings) {
        assert_eq!(self.read_memory(), 7, "submitted a recycled list");
        self.kernel_submitted.store(n, Ordering::Relaxed);
        self.submitted_through.store(n, o.publish);
    }

    /// One Finish's recycling step. `Some(true)`: recycled; `Some(false)`: waits; `None`:
    /// nothing was destroyed yet. `last` is the buffer that really executed the list last.
    fn finish(&self, waiting: &mut bool, last: u64) -> Option<bool> {
        if !*waiting && !self.destroyed.swap(false, Ordering::Acquire) {
            return None;
        }
        let executed = self.last_executed.load(Ordering::Relaxed);
        let safe = self.submitted_through.load(Ordering::Acquire);
        if executed > safe {
            *waiting = true;
            return Some(false);
        }
        assert_eq!(executed, last, "the stamp of the last execute is seen");
        assert!(
            self.kernel_submitted.load(Ordering::Relaxed) >= last,
            "recycled before buffer {last} was submitted"
        );
        // RecycleCommandList: the driver reuses the memory.
        // SAFETY: see `impl Sync for Shared`: loom checks this write against every access.
        self.memory.with_mut(|p| unsafe { *p = 0 });
        *waiting = false;
        Some(true)
    }
}

/// The IC executes the list in buffers `1..=times` (flushing between them), the owner drops
/// it after the last execute, and the DC runs two Finishes concurrently and one after all
/// threads are done; the list must be recycled by then.
fn model(times: u64, o: Orderings) {
    loom::model(move || {
        let s = Arc::new(Shared::new());
        let ic = {
            let s = Arc::clone(&s);
            thread::spawn(move || {
                for n in 1..=times {
                    s.execute(n);
                    if n == times {
                        s.executed.store(true, Ordering::Release);
                    }
                    s.flush(n, o);
                }
            })
        };
        let owner = {
            let s = Arc::clone(&s);
            thread::spawn(move || {
                while !s.executed.load(Ordering::Acquire) {
                    thread::yield_now();
                }
                // Drop: RecycleDestroyCommandList keeps the memory; push (a CAS, as
                // `DropStack::push`; a plain store would also meet loom's tokio-rs/loom#254,
                // where a store slips between a concurrent swap's read and write).
                let pushed = s
                    .destroyed
                    .compare_exchange(false, true, o.push, Ordering::Relaxed);
                assert_eq!(pushed, Ok(false), "one list, pushed once");
            })
        };
        // Two Finishes while the others run, one after: the list is recycled by then.
        let mut waiting = false;
        let recycled = (0..2).any(|_| s.finish(&mut waiting, times) == Some(true));
        ic.join().unwrap();
        owner.join().unwrap();
        if !recycled {
            assert_eq!(
                s.finish(&mut waiting, times),
                Some(true),
                "recycled once submitted"
            );
        }
    });
}

#[test]
fn loom_list_waits_for_the_buffer_that_executed_it() {
    model(1, ENGINE);
}

#[test]
fn loom_list_executed_twice_waits_for_the_later_buffer() {
    model(2, ENGINE);
}

/// A Relaxed `submitted_through` lets the DC see the number before the submit it stands for.
#[test]
#[should_panic(expected = "recycled before buffer 1 was submitted")]
fn loom_relaxed_clock_publication_is_caught() {
    model(
        1,
        Orderings {
            publish: Ordering::Relaxed,
            ..ENGINE
        },
    );
}

/// A Relaxed push lets the DC take the list without seeing its latest stamp.
#[test]
#[should_panic(expected = "the stamp of the last execute is seen")]
fn loom_relaxed_push_is_caught() {
    model(
        2,
        Orderings {
            push: Ordering::Relaxed,
            ..ENGINE
        },
    );
}
