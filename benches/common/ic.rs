//! What the instruction-count benches (`*_ic.rs`, gungraun on callgrind) share: the
//! callgrind configuration and the rule that keeps the measured part free of
//! crossbeam-epoch's periodic collection.
//!
//! gungraun runs each benchmark in a process of its own under callgrind, counting only
//! inside the benchmark function: its setup (device creation, warm-up, object creation)
//! and its teardown are not counted. So each figure is one run of the measured code, and it
//! repeats exactly from run to run as long as the code and its inputs do.

use gungraun::{Callgrind, CallgrindMetrics, EventKind, LibraryBenchmarkConfig};

/// Callgrind with the cache simulator (`--cache-sim=yes`: reads, writes, misses per cache
/// level, estimated cycles) and the global bus events (`--collect-bus=yes`, event `Ge`): on
/// x86-64 those are the locked instructions, every lock-prefixed read-modify-write and every
/// `xchg` with memory (Rust's SeqCst stores and fences compile to such instructions).
pub fn callgrind() -> Callgrind {
    let mut callgrind = Callgrind::with_args(["--cache-sim=yes", "--collect-bus=yes"]);
    callgrind.format([
        EventKind::Ir.into(),
        EventKind::Ge.into(),
        EventKind::Dr.into(),
        EventKind::Dw.into(),
        CallgrindMetrics::CacheMisses,
        CallgrindMetrics::CacheHits,
        EventKind::EstimatedCycles.into(),
    ]);
    callgrind
}

/// The room a gate leaves above the count it guards, in percent: a limit to keep far from,
/// so that a change that costs a few instructions more than it should is seen before a
/// budget is spent.
pub const HEADROOM_PERCENT: u64 = 10;

/// A gate's configuration: [`callgrind`] with hard limits of `budget` instructions plus
/// [`HEADROOM_PERCENT`], and of `max_locked` locked instructions (`Ge`) where one is given.
/// With the feature `trace` the counts are reported and not gated: the budgets are the
/// engine's without instrumentation.
#[allow(dead_code)] // the gated benches', not every includer's
pub fn gated(budget: u64, max_locked: Option<u64>) -> LibraryBenchmarkConfig {
    let mut callgrind = callgrind();
    if cfg!(not(feature = "trace")) {
        let instructions = (EventKind::Ir, budget + budget * HEADROOM_PERCENT / 100);
        match max_locked {
            Some(locked) => callgrind.hard_limits([instructions, (EventKind::Ge, locked)]),
            None => callgrind.hard_limits([instructions]),
        };
    }
    let mut config = LibraryBenchmarkConfig::default();
    config.tool(callgrind);
    config
}

/// Every instruction-count bench runs [`callgrind`].
pub fn config() -> LibraryBenchmarkConfig {
    let mut config = LibraryBenchmarkConfig::default();
    config.tool(callgrind());
    config
}

/// Runs `setup` on a thread of its own and returns what it made, with this thread pinned
/// exactly once before the measured part.
///
/// crossbeam-epoch collects garbage at every 128th outermost pin of a thread, counted from
/// the thread's first pin. Had the setup pinned on the measuring thread, whether a collection
/// fell in the measured part would depend on how many pins every earlier step made, and a
/// change anywhere in the engine could move a collection into or out of a one-cycle figure.
/// Here the measured part's pins are always this thread's 2nd, 3rd, ...: a part with fewer
/// than 127 pins never collects, and one with more collects at every 128th, its steady rate.
pub fn prepared<T: Send + 'static>(setup: impl FnOnce() -> T + Send + 'static) -> T {
    let made = std::thread::spawn(setup).join().expect("setup thread");
    drop(crossbeam_epoch::pin());
    made
}
