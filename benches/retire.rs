//! Deferred destruction beside its baseline, in one criterion group (`retire`).
//!
//! Both functions reclaim `N` heap objects of the same size per iteration and report the
//! time per object (`Throughput::Elements(N)`). Each batch of objects is created outside the
//! timed part (`iter_custom`); the timed part is only the destruction:
//!
//! - `cmdlist`: `N` x `Device::destroy(h)` then one `ImmediateContext::flush()`, on a soft
//!   device without trace. The objects are blend states: no kernel allocation, so the soft
//!   kernel's allocation table stays out of the figure. `destroy` looks the handle up (device
//!   tag, generation, type), marks the entry destroyed (CAS), reads the IC's open buffer and
//!   pushes the slot on the lock-free retire stack; `flush` (an empty buffer: no submit)
//!   takes the stack, checks each tag against the submitted clock, seals the entry, runs the
//!   driver's destroy hook and unlinks the entry onto the device's chain of slots waiting
//!   for the epoch (a link write), then defers one closure for the whole batch; a later
//!   flush puts the chain back on the free list with one CAS, and the create that reuses a
//!   slot drops the old entry in place. The flush is asserted to leave nothing waiting.
//! - `crossbeam_epoch`: the same payload reclaimed with crossbeam-epoch alone: per object
//!   `pin()`, swap the published `Atomic` to null, `defer_destroy`; then one
//!   `pin().flush()` so the garbage is handed to the collector.
//!
//! What the comparison says: the payload is a 256-byte, 128-byte-aligned struct, the size
//! and alignment of `registry::Entry<SoftDriver>` (its IC half is `CachePadded`), reclaimed
//! on one thread in batches of the same size, and both sides pin once per destroyed object.
//! The baseline frees each object through the epoch collector and the allocator; cmdlist
//! keeps each entry's memory with its slot (the next create drops it in place), and adds
//! its own bookkeeping: handle validation, the lifecycle CASes, the two clocks, the driver
//! hook and the slot recycling.
//!
//! Where the frees land: crossbeam drops deferred garbage two epochs later, from the
//! collection that every 128th outermost `pin()` (and `Guard::flush`) runs. Untimed
//! creation pins too (cmdlist's `create` pins once per object), so on its own it would run
//! those collections and free the previous batch outside the timed part, on one side more
//! than the other. Both sides therefore create under one outer pin (nested pins never
//! collect): the previous batch's objects are then freed by the pins of the timed part, on
//! both sides, and each figure is the full steady-state cost of retiring one object,
//! its `free` included.

#[path = "common/retire.rs"]
mod batch;

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use crossbeam_epoch::Atomic;

use batch::{blend, create_batch, defer_batch, destroy_batch, publish_batch, Payload, N};

fn retire(c: &mut Criterion) {
    let mut group = c.benchmark_group("retire");
    group.throughput(Throughput::Elements(N as u64));

    let (device, mut ic, _world) = batch::device();
    let bytes = [0u8; 32];
    let desc = blend(&bytes);
    let mut handles = Vec::with_capacity(N);
    group.bench_function("cmdlist", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                create_batch(&device, &desc, &mut handles); // see "Where the frees land"
                let start = Instant::now();
                destroy_batch(&device, &mut ic, &handles);
                total += start.elapsed();
                handles.clear();
                assert_eq!(
                    ic.retire_stats().waiting_destruction,
                    0,
                    "flush destroyed all"
                );
            }
            total
        })
    });

    let slots: Vec<Atomic<Payload>> = (0..N).map(|_| Atomic::null()).collect();
    group.bench_function("crossbeam_epoch", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for i in 0..iters {
                publish_batch(&slots, i); // see "Where the frees land"
                let start = Instant::now();
                defer_batch(&slots);
                total += start.elapsed();
            }
            total
        })
    });

    group.finish();
}

criterion_group!(benches, retire);
criterion_main!(benches);
