//! Instruction counts of the small-command-list cycle (R-R1), one warm cycle per function,
//! with gungraun on callgrind: the same cycle and null driver as the criterion bench
//! `recycle` (`common/cycle.rs`, `cmdlist::soft::null`), counted instead of timed, so the figures
//! repeat exactly on a loaded machine.
//!
//! - `cycle_1cmd::warm_cycle recycled`: record one copy, Finish, CommandListExecute, drop the
//!   list, Flush, with recycling on: exactly one iteration of criterion's
//!   `cycle_1cmd/recycled`.
//! - `cycle_1cmd::warm_cycle no_recycle`: the same without the recycle hooks
//!   (`cycle_1cmd/no_recycle`).
//! - `cycle_1cmd::warm_cycle driver_built`: the recycled cycle where the driver builds its
//!   lists (`ListMode::DriverBuilt`): the copy reaches the driver when recorded, and the
//!   execute is one `Driver::execute_command_list`, with no replay.
//! - `cycle_1cmd::floor`: the physical floor of the payload (`cycle_1cmd/floor`).
//!
//! Setup, not counted, on a thread of its own (see `common/ic.rs`): the device, the two
//! resources and the context, then the warm-up of the criterion bench (`WARM` cycles,
//! checked to recycle exactly when they should), then a frame end and two more cycles. The
//! frame end (or, when nothing was due, the first flush after it) performs amortised
//! processing; the next flush reads the clock and, the millisecond being far from over,
//! lets the following flushes go by without reading it. The measured flush is one of
//! those, as almost every flush is (the clock is read a handful of times per millisecond).
//! Otherwise whether the one measured flush reads the clock, or trims the pools, would
//! depend on how fast the warm-up ran under valgrind. The teardown checks that the
//! measured cycle did not perform amortised processing and that it recycled (or did not)
//! as its function says.
//!
//! # The gate
//! `recycled` carries a hard limit on its instruction count: [`RECYCLED_BUDGET_IR`], the
//! count recorded when the budget was last set, plus `common/ic.rs`'s headroom (10%);
//! `driver_built` one of its own, [`DRIVER_BUILT_BUDGET_IR`] plus the same. A run above
//! either is a regression and
//! `cargo bench -p cmdlist-benches --bench cycle_ic` exits with an error. When a cycle gets
//! cheaper, record the new count here. The budgets are the engine's without instrumentation:
//! with the feature `trace` (`--features trace`, to measure what the spans cost) the counts
//! are reported and not gated.

// gungraun's macros generate public modules, constants and functions without docs.
#![allow(missing_docs)]

#[path = "common/cycle.rs"]
mod cycle;
#[path = "common/cycle_warm.rs"]
mod cycle_warm;
#[path = "common/ic.rs"]
mod ic;

use std::hint::black_box;

use cmdlist::ListMode;
use cycle_warm::{check, warm, Warm};
use gungraun::prelude::*;

/// Instructions of one warm recycled cycle (`cycle_1cmd::warm_cycle recycled`), as last
/// recorded (BENCHMARKS.md says when and why).
const RECYCLED_BUDGET_IR: u64 = 1_112;
/// Instructions of one warm recycled cycle where the driver builds its lists
/// (`cycle_1cmd::warm_cycle driver_built`), as last recorded.
const DRIVER_BUILT_BUDGET_IR: u64 = 1_071;

#[library_benchmark(teardown = check)]
#[bench::recycled(args = ((ListMode::Replayed, true)), setup = warm, config = ic::gated(RECYCLED_BUDGET_IR, None))]
#[bench::no_recycle(args = ((ListMode::Replayed, false)), setup = warm)]
#[bench::driver_built(
    args = ((ListMode::DriverBuilt, true)),
    setup = warm,
    config = ic::gated(DRIVER_BUILT_BUDGET_IR, None)
)]
fn warm_cycle(mut w: Box<Warm>) -> Box<Warm> {
    cycle::cycle(&mut w.dc, &mut w.ic, w.copy);
    w
}

/// The floor's command vector, its one slot allocated.
fn commands() -> Vec<[u64; 2]> {
    Vec::with_capacity(1)
}

#[library_benchmark]
#[bench::floor(setup = commands)]
fn floor(mut commands: Vec<[u64; 2]>) -> Vec<[u64; 2]> {
    cycle::floor(&mut commands, black_box([1u64 << 32, 2u64 << 32]));
    commands
}

library_benchmark_group!(name = cycle_1cmd, benchmarks = [warm_cycle, floor]);

main!(config = ic::config(); library_benchmark_groups = cycle_1cmd);
