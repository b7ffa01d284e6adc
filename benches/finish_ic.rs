//! Instruction counts of recording and Finish as a list names more objects, with gungraun on
//! callgrind, on the null driver of `cmdlist::soft::null` (recycling on).
//!
//! A device holds `live` resources (1,000 or 100,000). A list records `handles` commands
//! (1, 10, 100 or 1,000), each a copy of one resource onto itself, the resources spread
//! evenly over the live ones: each command names one object the recording has not named
//! yet, so a recording of `handles` commands opens `handles` context-local handles (and the
//! list holds as many objects). The two steps are counted separately:
//!
//! - `finish::record_commands`: the `handles` calls of `DeferredContext::command` (each looks its
//!   object up, opens its handle, takes a hold, records the operation).
//! - `finish::finish_drop`: `DeferredContext::finish` (closes every handle, makes the list
//!   from the context's recycled one) and dropping the list (releases every hold, puts the
//!   list back on the context's list of destroyed lists).
//!
//! Per handle = the figure divided by `handles`; at 1 handle it is mostly the fixed cost.
//!
//! Setup, not counted: the device, its live resources and the context, then `WARM_LISTS`
//! lists of the same commands recorded, finished and dropped (never executed, so each is
//! recycled at the next Finish), so the context's pools hold what `handles` needs. The
//! teardown checks what the counted part did.

// gungraun's macros generate public modules, constants and functions without docs.
#![allow(missing_docs)]

#[path = "common/ic.rs"]
mod ic;

use std::hint::black_box;

use cmdlist::{DeferredContext, DeviceConfig, ImmediateContext, ResourceDesc};
use gungraun::prelude::*;

use cmdlist::soft::null::{null_device, CopyCommand, NullDriver, NullKernel};

/// Lists recorded, finished and dropped before the counted one.
const WARM_LISTS: u64 = 8;

/// A warm context on a device with live objects, and the commands of one list.
struct Lists {
    dc: DeferredContext<NullDriver, NullKernel>,
    /// Kept alive: dropping it would destroy the device's objects (R-D3).
    ic: ImmediateContext<NullDriver, NullKernel>,
    commands: Vec<CopyCommand>,
}

/// `live` resources on a null device, the commands of a list naming `handles` of them, and
/// a context warmed with `WARM_LISTS` such lists.
fn lists(handles: usize, live: usize) -> Lists {
    assert!(handles <= live);
    let (device, ic) = null_device(DeviceConfig::default()).unwrap();
    let desc = ResourceDesc {
        byte_size: 256,
        ..Default::default()
    };
    let resources: Vec<_> = (0..live)
        .map(|_| device.create_resource(desc).expect("resource"))
        .collect();
    let commands: Vec<CopyCommand> = (0..handles)
        .map(|i| {
            let r = resources[i * live / handles];
            CopyCommand { dst: r, src: r }
        })
        .collect();
    let mut dc = device.create_deferred_context().expect("dc");
    for _ in 0..WARM_LISTS {
        record(&mut dc, &commands);
        drop(dc.finish().expect("finish"));
    }
    Lists { dc, ic, commands }
}

/// Records one command per element of `commands`.
fn record(dc: &mut DeferredContext<NullDriver, NullKernel>, commands: &[CopyCommand]) {
    for &command in commands {
        dc.command(black_box(command)).expect("record");
    }
}

/// A warm context with nothing recorded.
fn empty(handles: usize, live: usize) -> Box<Lists> {
    ic::prepared(move || Box::new(lists(handles, live)))
}

/// A warm context with the list's commands recorded.
fn recorded(handles: usize, live: usize) -> Box<Lists> {
    ic::prepared(move || {
        let mut w = lists(handles, live);
        record(&mut w.dc, &w.commands);
        Box::new(w)
    })
}

/// After `record`: every command recorded, one handle open per command.
fn check_recorded(w: Box<Lists>) {
    let Lists {
        mut dc,
        mut ic,
        commands,
    } = *w;
    let stats = dc.stats();
    assert_eq!(stats.operations, commands.len(), "{stats:?}");
    assert_eq!(stats.open_handles, commands.len(), "{stats:?}");
    drop(dc.finish().expect("finish"));
    drop(dc);
    ic.destroy_device().expect("destroy device");
}

/// After `finish_drop`: every handle closed, the list made from recycled memory, and its
/// memory recycled again by the next Finish.
fn check_finished(w: Box<Lists>) {
    let Lists { mut dc, mut ic, .. } = *w;
    let stats = dc.stats();
    assert_eq!(stats.open_handles, 0, "{stats:?}");
    assert_eq!(
        (stats.finished, stats.created),
        (WARM_LISTS + 1, 1),
        "{stats:?}"
    );
    drop(dc.finish().expect("finish"));
    assert_eq!(dc.stats().created, 1, "the dropped list was recycled");
    drop(dc);
    ic.destroy_device().expect("destroy device");
}

#[library_benchmark(setup = empty, teardown = check_recorded)]
#[bench::h1_live_1k(1, 1_000)]
#[bench::h10_live_1k(10, 1_000)]
#[bench::h100_live_1k(100, 1_000)]
#[bench::h1000_live_1k(1_000, 1_000)]
#[bench::h1_live_100k(1, 100_000)]
#[bench::h10_live_100k(10, 100_000)]
#[bench::h100_live_100k(100, 100_000)]
#[bench::h1000_live_100k(1_000, 100_000)]
fn record_commands(mut w: Box<Lists>) -> Box<Lists> {
    record(&mut w.dc, &w.commands);
    w
}

#[library_benchmark(setup = recorded, teardown = check_finished)]
#[bench::h1_live_1k(1, 1_000)]
#[bench::h10_live_1k(10, 1_000)]
#[bench::h100_live_1k(100, 1_000)]
#[bench::h1000_live_1k(1_000, 1_000)]
#[bench::h1_live_100k(1, 100_000)]
#[bench::h10_live_100k(10, 100_000)]
#[bench::h100_live_100k(100, 100_000)]
#[bench::h1000_live_100k(1_000, 100_000)]
fn finish_drop(mut w: Box<Lists>) -> Box<Lists> {
    let list = w.dc.finish().expect("finish");
    drop(black_box(list));
    w
}

library_benchmark_group!(name = finish, benchmarks = [record_commands, finish_drop]);

main!(config = ic::config(); library_benchmark_groups = finish);
