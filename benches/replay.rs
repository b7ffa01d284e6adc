//! How fast the immediate context replays: the figure `DeviceConfig::replay_limit`'s default
//! is chosen from (BENCHMARKS.md, `## replay`).
//!
//! `replay/nested_2^20`: one CommandListExecute of a list that replays 2^20 (1,048,576)
//! operations, with the null driver of `soft::null` (every hook a no-op, so the figure is
//! the engine's own cost per replayed operation): a list of 16 copies, then 16 levels that
//! each execute the level below twice, as the exponential lists the limit guards against
//! are built. The execute goes into the open buffer, and a flush after it submits that.

use std::hint::black_box;

use cmdlist::soft::null::{copy_of, null_device};
use cmdlist::DeviceConfig;
use criterion::{criterion_group, criterion_main, Criterion};

fn replay(c: &mut Criterion) {
    let (device, mut ic) = null_device(DeviceConfig::default()).unwrap();
    assert!(DeviceConfig::default().replay_limit >= 1 << 21);
    let copy = copy_of(&device);
    let mut dc = device.create_deferred_context().expect("context");
    for _ in 0..16 {
        dc.command(copy).expect("copy");
    }
    let mut list = dc.finish().expect("finish");
    for _ in 0..16 {
        dc.execute_command_list(&list).expect("execute");
        dc.execute_command_list(&list).expect("execute");
        list = dc.finish().expect("finish");
    }
    let replayed = list.stats().replayed_operations;
    assert!((1 << 20..1 << 21).contains(&replayed), "{replayed}");
    let mut group = c.benchmark_group("replay");
    group.sample_size(20);
    group.bench_function("nested_2^20", |b| {
        b.iter(|| {
            ic.execute_command_list(black_box(&list)).expect("execute");
            ic.flush().expect("flush");
        })
    });
    group.finish();
}

criterion_group!(benches, replay);
criterion_main!(benches);
