//! Instruction counts of deferred destruction beside its baseline, with gungraun on
//! callgrind: one batch of the criterion bench `retire` each, the same code
//! (`common/retire.rs`), counted instead of timed. Per object = the figure / `N` (256).
//!
//! - `retire::destroy_flush` (criterion's `retire/cmdlist`): `N` x `Device::destroy`, then
//!   one `ImmediateContext::flush` that runs the destroy hooks and reclaims the slots (soft
//!   device, trace off, blend states).
//! - `retire::pin_defer_destroy` (criterion's `retire/crossbeam_epoch`, the baseline): per
//!   object `pin()`, swap the published `Atomic` to null, `defer_destroy`; then one
//!   `pin().flush()`.
//!
//! Setup, not counted: `WARM_BATCHES` batches created and reclaimed as the criterion bench
//! does, then the counted batch created under one outer pin. As in the criterion bench
//! ("Where the frees land" in `benches/retire.rs`), the counted part's pins run the
//! collections that free earlier batches, on both sides: each figure is the steady-state
//! cost of retiring one object, its `free` included. Everything runs on one thread, the
//! immediate context's.

// gungraun's macros generate public modules, constants and functions without docs.
#![allow(missing_docs)]

#[path = "common/retire.rs"]
mod batch;
#[allow(dead_code)] // one thread throughout: `prepared` is not needed
#[path = "common/ic.rs"]
mod ic;

use std::sync::Arc;

use cmdlist::soft::{SoftDevice, SoftImmediate, SoftWorld};
use cmdlist::AnyHandle;
use crossbeam_epoch::Atomic;
use gungraun::prelude::*;

use batch::{blend, create_batch, defer_batch, destroy_batch, publish_batch, Payload, N};

/// Batches created and reclaimed before the counted one.
const WARM_BATCHES: u64 = 16;

/// The blend state every object is made from.
const BLEND: [u8; 32] = [0; 32];

/// A soft device with a batch of objects created, ready to be destroyed.
struct Objects {
    device: SoftDevice,
    ic: SoftImmediate,
    world: Arc<SoftWorld>,
    handles: Vec<AnyHandle>,
}

fn objects() -> Box<Objects> {
    let (device, mut ic, world) = batch::device();
    let mut handles = Vec::with_capacity(N);
    for _ in 0..WARM_BATCHES {
        create_batch(&device, &blend(&BLEND), &mut handles);
        destroy_batch(&device, &mut ic, &handles);
        handles.clear();
    }
    create_batch(&device, &blend(&BLEND), &mut handles);
    Box::new(Objects {
        device,
        ic,
        world,
        handles,
    })
}

/// After `destroy_flush`: the flush destroyed every object; then the device goes, clean.
fn check_destroyed(o: Box<Objects>) {
    let Objects {
        device,
        mut ic,
        world,
        ..
    } = *o;
    assert_eq!(
        ic.retire_stats().waiting_destruction,
        0,
        "flush destroyed all"
    );
    drop(device);
    ic.destroy_device().expect("destroy device");
    world.assert_clean();
}

#[library_benchmark]
#[bench::batch_256(setup = objects, teardown = check_destroyed)]
fn destroy_flush(mut o: Box<Objects>) -> Box<Objects> {
    let Objects {
        device,
        ic,
        handles,
        ..
    } = &mut *o;
    destroy_batch(device, ic, handles);
    o
}

/// `N` published payloads, after `WARM_BATCHES` batches published and deferred.
fn payloads() -> Vec<Atomic<Payload>> {
    let slots: Vec<Atomic<Payload>> = (0..N).map(|_| Atomic::null()).collect();
    for i in 0..WARM_BATCHES {
        publish_batch(&slots, i);
        defer_batch(&slots);
    }
    publish_batch(&slots, WARM_BATCHES);
    slots
}

#[library_benchmark]
#[bench::batch_256(setup = payloads)]
fn pin_defer_destroy(slots: Vec<Atomic<Payload>>) -> Vec<Atomic<Payload>> {
    defer_batch(&slots);
    slots
}

library_benchmark_group!(
    name = retire,
    benchmarks = [destroy_flush, pin_defer_destroy]
);

main!(config = ic::config(); library_benchmark_groups = retire);
