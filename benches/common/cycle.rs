//! The small-command-list cycle (R-R1) that the criterion bench `recycle` times and the
//! instruction-count bench `cycle_ic` counts: the same code for both.

use std::hint::black_box;

use cmdlist::{DeferredContext, Driver, ImmediateContext, Kernel};

/// Cycles run before timing: the context's pools, the list cache and the epoch handle warm.
pub const WARM: usize = 1_000;

/// One warm cycle: record one copy, Finish, CommandListExecute, drop the list, Flush.
#[inline(never)]
pub fn cycle<D: Driver, K: Kernel>(
    dc: &mut DeferredContext<D, K>,
    ic: &mut ImmediateContext<D, K>,
    command: D::Command,
) {
    dc.command(black_box(command)).expect("record");
    let list = dc.finish().expect("finish");
    ic.execute_command_list(black_box(&list)).expect("execute");
    drop(list);
    ic.flush().expect("flush");
}

/// Warms `dc` and checks that it recycles exactly when `recycle` says.
pub fn warm<D: Driver, K: Kernel>(
    dc: &mut DeferredContext<D, K>,
    ic: &mut ImmediateContext<D, K>,
    command: D::Command,
    recycle: bool,
) where
    D::Command: Copy,
{
    for _ in 0..WARM {
        cycle(dc, ic, command);
    }
    let stats = dc.stats();
    if recycle {
        assert_eq!(
            stats.created, 1,
            "only the first list is created: {stats:?}"
        );
        assert_eq!(
            stats.recycled,
            WARM as u64 - 1,
            "every later one is recycled: {stats:?}"
        );
    } else {
        assert_eq!(stats.recycled, 0, "nothing recycled: {stats:?}");
        assert_eq!(stats.created, WARM as u64, "every list created: {stats:?}");
    }
}

/// The physical floor of the cycle's payload: reuse a `Vec`, push one two-word command,
/// iterate it. Always inlined, so it costs what the same code written in place does.
#[inline(always)]
#[allow(dead_code)] // the floors' (cycle_ic, recycle), not every includer's
pub fn floor(commands: &mut Vec<[u64; 2]>, words: [u64; 2]) {
    commands.clear();
    commands.push(black_box(words));
    for command in commands.iter() {
        black_box(command);
    }
}
