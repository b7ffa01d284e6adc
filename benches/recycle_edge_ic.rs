//! Recycling's edge in instructions, independent of the heap's layout: the warm one-copy
//! cycle of `cycle_ic` (record one copy, Finish, CommandListExecute, drop the list, Flush),
//! recycled and not, counted with gungraun on callgrind in a process whose global allocator
//! is `common/size_class_alloc.rs`: size-class free lists in front of the system allocator,
//! whose every steady-state allocation and free is a fixed handful of instructions.
//!
//! `cycle_ic`'s `no_recycle` runs on the C library's allocator, whose count moves by
//! hundreds of instructions with the heap's layout (another machine, another C library,
//! another setup): its ratio to `recycled` is that machine's. Here the ratio repeats on any
//! machine, and, the allocator being about as cheap as a general one gets, it is a lower
//! bound of what recycling saves. The teardown checks how many allocation calls the
//! measured cycle made: none recycled (R-R1), [`NO_RECYCLE_ALLOCATIONS`] not.
//!
//! # The gate
//! `recycled` carries a hard limit (its budget plus the headroom of `common/ic.rs`), as in
//! `cycle_ic`; `no_recycle` is the baseline and is reported only.

// gungraun's macros generate public modules, constants and functions without docs.
#![allow(missing_docs)]

#[path = "common/cycle.rs"]
mod cycle;
#[path = "common/cycle_warm.rs"]
mod cycle_warm;
#[path = "common/ic.rs"]
mod ic;
#[path = "common/size_class_alloc.rs"]
mod size_class_alloc;

use cmdlist::ListMode;
use cycle_warm::{check, warm, Warm};
use gungraun::prelude::*;
use size_class_alloc::{allocations, SizeClassAlloc};

#[global_allocator]
static ALLOCATOR: SizeClassAlloc = SizeClassAlloc;

/// Instructions of one warm recycled cycle on this allocator, as last recorded.
const RECYCLED_BUDGET_IR: u64 = 1_111;
/// Allocation calls one cycle makes without recycling: the list's node and its vectors.
const NO_RECYCLE_ALLOCATIONS: u64 = 6;

/// [`cycle_warm::warm`], with the allocation count at its end.
fn warm_counted(args: (ListMode, bool)) -> (Box<Warm>, u64) {
    let w = warm(args);
    (w, allocations())
}

/// Checks how many allocation calls the measured cycle made, then [`cycle_warm::check`].
fn check_counted((w, before): (Box<Warm>, u64)) {
    let made = allocations() - before;
    let expected = if w.recycles() {
        0
    } else {
        NO_RECYCLE_ALLOCATIONS
    };
    assert_eq!(made, expected, "allocation calls in the measured cycle");
    check(w);
}

#[library_benchmark(teardown = check_counted)]
#[bench::recycled(
    args = ((ListMode::Replayed, true)),
    setup = warm_counted,
    config = ic::gated(RECYCLED_BUDGET_IR, None)
)]
#[bench::no_recycle(args = ((ListMode::Replayed, false)), setup = warm_counted)]
fn edge_cycle((mut w, before): (Box<Warm>, u64)) -> (Box<Warm>, u64) {
    cycle::cycle(&mut w.dc, &mut w.ic, w.copy);
    (w, before)
}

library_benchmark_group!(name = recycle_edge, benchmarks = [edge_cycle]);

main!(config = ic::config(); library_benchmark_groups = recycle_edge);
