//! Instruction counts of the runtime's share of a draw, with gungraun on callgrind over the
//! null driver (`cmdlist::soft::null`, hooks that do nothing): what a recording thread
//! spends in the engine per draw, besides the driver's own work.
//!
//! One draw is what a game records per draw call: Map(WRITE_DISCARD) of a 64-byte dynamic
//! constant buffer, 64 bytes written, Unmap, and a command naming two objects (the null
//! driver's copy). Each function records a run of [`DRAWS`] draws in the middle of a warm
//! frame, so the figure divided by [`DRAWS`] is the instructions per draw in a warm steady
//! state (the loop's own few instructions included).
//!
//! - `recorded_draw::run deferred_*`: on a deferred context, in each list mode. Setup
//!   (`common/draw.rs`): 16 frames of 64 draws, each list finished, executed, dropped and
//!   flushed (the recording's vectors, arena and the recycled list all at their working
//!   size), then [`DRAWS`] draws into the next recording: every handle the draw names is
//!   open in this context and every vector has room.
//! - `recorded_draw::run immediate_*`: on the immediate context, the same warm-up, then
//!   [`DRAWS`] draws into the open buffer (every object already referenced by it). The
//!   flush is per buffer, not per draw, and is not counted.
//! - `recorded_draw::through_ddi *`: the same draw with each of its calls made through a
//!   function of its own, kept out of line (`common/ddi.rs`), as a driver's DDI entry points
//!   call the engine: each call pays its own frame, and the count moves only with the
//!   engine's code, not with how the bench's loop inlines it.
//! - `recorded_draw::ring deferred_*`: a ring draw on a deferred context (R-M2): the draw's
//!   64 bytes appended with Map(WRITE_NO_OVERWRITE) into a dynamic vertex buffer of 1 MiB
//!   or 16 MiB that the recording discarded once when it began, Unmap, the same command.
//!   Setup: 4 frames of 64 ring draws, then the ring started and [`DRAWS`] draws to go.
//!   Gated as the others; the two sizes must cost the same within 5% (an append touches
//!   only its stretch), and no more than the Map(DISCARD) draw of a 64-byte buffer.
//! - `recorded_draw::ring immediate_*`: the same ring draw on the immediate context (R-M3):
//!   Map(WRITE_NO_OVERWRITE) of the ring's own memory through the kernel's lock (the null
//!   kernel's locks persist across Maps, `Kernel::persistent_locks`: a pointer into memory
//!   locked already), 64 bytes written at the draw's stretch, Unmap, the command; each frame
//!   starts the ring with a Map(WRITE_DISCARD), which renames (R-M5). Gated as the others,
//!   1 MiB and 16 MiB alike.
//! - `recorded_draw::ring_through_ddi *`: the ring draw with each call through a function of
//!   its own (`common/ddi.rs`), as `through_ddi` makes the draw; a 1 MiB ring.
//! - `recorded_draw::staging immediate`: [`DRAWS`] staging reads on the immediate context
//!   (R-M4): Map(READ) of an idle 64-byte staging resource, one byte read, Unmap. Setup:
//!   16 flushed frames of 64 reads.
//! - `recorded_draw::floor`: the application's share alone, the same loop writing the same
//!   64 bytes per draw into memory of its own; a run minus the floor is the engine's share.
//!
//! Setup and teardown run outside the count (`common/ic.rs`); the teardown checks that the
//! run recorded exactly [`DRAWS`] draws and that nothing failed.
//!
//! # The gate
//! Every deferred and immediate run carries a hard limit: its budget below plus 10%, and no
//! locked instruction at all (`Ge`, callgrind's global bus events: every lock-prefixed
//! read-modify-write and every `xchg` with memory, which an epoch pin, a reference count or
//! a shared counter would cost; the null kernel's lock takes its table's mutex, but only at
//! an allocation's first Map, its locks persisting). `cargo bench -p cmdlist-benches
//! --bench draw_ic` exits with an error above a limit; when a draw gets cheaper, record the
//! new count here. With
//! the feature `trace` the counts are reported and not gated. The plain writes to memory
//! other contexts share are counted by `examples/draw_writes.rs` (BENCHMARKS.md).

// gungraun's macros generate public modules, constants and functions without docs.
#![allow(missing_docs)]

#[path = "common/ddi.rs"]
mod ddi_calls;
#[path = "common/draw.rs"]
mod draw;
#[path = "common/ic.rs"]
mod ic;
#[path = "common/ring_draw.rs"]
mod ring_draw;

use std::hint::black_box;

use cmdlist::handle::Resource;
use cmdlist::soft::null::{null_device, NullDriver, NullKernel};
use cmdlist::{
    DeferredContext, DeviceConfig, Handle, ImmediateContext, ListMode, MapFlags, MapType,
    ResourceDesc, Usage,
};
use draw::{draw_deferred, draw_immediate, warm_device, Draw, FRAMES, PER_LIST};
use gungraun::prelude::*;
use ring_draw::{draw_ring, draw_ring_immediate, RingDraw};

/// Draws per measured run.
pub const DRAWS: u64 = 32;

/// Instructions of a run of [`DRAWS`] draws on a deferred context whose lists the engine
/// replays, as last recorded (BENCHMARKS.md says when).
const DEFERRED_REPLAYED_BUDGET_IR: u64 = 8_181;
/// The same where the driver builds its lists.
const DEFERRED_DRIVER_BUILT_BUDGET_IR: u64 = 7_349;
/// The same on a deferred context the engine emulates (a driver without command lists).
const DEFERRED_EMULATED_BUDGET_IR: u64 = 8_181;
/// Instructions of a run of [`DRAWS`] draws on the immediate context.
const IMMEDIATE_BUDGET_IR: u64 = 11_016;
/// Instructions of a run of [`DRAWS`] ring draws (Map(NO_OVERWRITE) appends) on a deferred
/// context whose lists the engine replays, whatever the ring's size.
const RING_REPLAYED_BUDGET_IR: u64 = 7_127;
/// The same where the driver builds its lists.
const RING_DRIVER_BUILT_BUDGET_IR: u64 = 7_319;
/// The same on a deferred context the engine emulates.
const RING_EMULATED_BUDGET_IR: u64 = 7_127;
/// Instructions of a run of [`DRAWS`] ring draws on the immediate context (Map(NO_OVERWRITE)
/// of the ring's own memory through the kernel's lock, R-M3), whatever the ring's size.
const RING_IMMEDIATE_BUDGET_IR: u64 = 8_648;
/// Instructions of a run of [`DRAWS`] staging reads on the immediate context: Map(READ) of
/// an idle 64-byte staging resource (R-M4), one byte read, Unmap.
const STAGING_IMMEDIATE_BUDGET_IR: u64 = 5_170;
/// Instructions of a run of [`DRAWS`] draws made through DDI-shaped entry points
/// (`common/ddi.rs`) on a deferred context whose lists the engine replays.
const DDI_REPLAYED_BUDGET_IR: u64 = 9_097;
/// The same where the driver builds its lists.
const DDI_DRIVER_BUILT_BUDGET_IR: u64 = 8_297;
/// The same on the immediate context.
const DDI_IMMEDIATE_BUDGET_IR: u64 = 11_048;
/// Instructions of a run of [`DRAWS`] ring draws made through DDI-shaped entry points on a
/// deferred context whose lists the engine replays.
const DDI_RING_REPLAYED_BUDGET_IR: u64 = 8_078;
/// The same where the driver builds its lists.
const DDI_RING_DRIVER_BUILT_BUDGET_IR: u64 = 8_014;
/// The same on the immediate context.
const DDI_RING_IMMEDIATE_BUDGET_IR: u64 = 8_648;
/// The rings' sizes.
const MIB: usize = 1 << 20;

/// A warm device in list mode `mode`, its deferred context, and the draw's objects.
struct Warm {
    dc: DeferredContext<NullDriver, NullKernel>,
    ic: ImmediateContext<NullDriver, NullKernel>,
    draw: Draw,
    on_immediate: bool,
    operations: usize,
}

/// [`draw::warm_device`], with [`DRAWS`] draws to go in the list being recorded.
fn warm((mode, on_immediate): (ListMode, bool)) -> Box<Warm> {
    ic::prepared(move || {
        let (dc, ic, draw) = warm_device(mode, on_immediate, PER_LIST - DRAWS);
        let operations = dc.stats().operations;
        Box::new(Warm {
            dc,
            ic,
            draw,
            on_immediate,
            operations,
        })
    })
}

/// Checks that the run recorded its draws and nothing failed, then destroys the device.
fn check(w: Box<Warm>) {
    let Warm {
        dc,
        mut ic,
        on_immediate,
        operations,
        ..
    } = *w;
    // Two operations per draw on a deferred context (the Unmap with the written contents,
    // the command), none on the immediate one.
    let recorded = if on_immediate { 0 } else { 2 * DRAWS as usize };
    assert_eq!(dc.stats().operations, operations + recorded);
    assert_eq!(ic.device().kernel().errors(), 0, "a call failed");
    drop(dc);
    ic.destroy_device().expect("destroy device");
}

#[library_benchmark(teardown = check)]
#[bench::deferred_replayed(
    args = ((ListMode::Replayed, false)),
    setup = warm,
    config = ic::gated(DEFERRED_REPLAYED_BUDGET_IR, Some(0))
)]
#[bench::deferred_driver_built(
    args = ((ListMode::DriverBuilt, false)),
    setup = warm,
    config = ic::gated(DEFERRED_DRIVER_BUILT_BUDGET_IR, Some(0))
)]
#[bench::deferred_emulated(
    args = ((ListMode::Emulated, false)),
    setup = warm,
    config = ic::gated(DEFERRED_EMULATED_BUDGET_IR, Some(0))
)]
#[bench::immediate_replayed(
    args = ((ListMode::Replayed, true)),
    setup = warm,
    config = ic::gated(IMMEDIATE_BUDGET_IR, Some(0))
)]
#[bench::immediate_driver_built(
    args = ((ListMode::DriverBuilt, true)),
    setup = warm,
    config = ic::gated(IMMEDIATE_BUDGET_IR, Some(0))
)]
fn run(mut w: Box<Warm>) -> Box<Warm> {
    let draw = w.draw;
    match w.on_immediate {
        true => draws_immediate(&mut w.ic, draw),
        false => draws_deferred(&mut w.dc, draw),
    }
    w
}

/// [`run`]'s draws on a deferred context: a loop of its own, out of line, so that its code
/// (and count) does not move with the immediate context's. Kept in this file, not shared
/// through `common/draw.rs`: the compiler inlines within a codegen unit, and the same loop
/// moved there counted 8,281 Ir a driver-built run, not 7,349.
#[inline(never)]
fn draws_deferred(dc: &mut DeferredContext<NullDriver, NullKernel>, draw: Draw) {
    for n in 0..DRAWS {
        draw_deferred(dc, draw, n);
    }
}

/// [`run`]'s draws on the immediate context, out of line as [`draws_deferred`] is.
#[inline(never)]
fn draws_immediate(ic: &mut ImmediateContext<NullDriver, NullKernel>, draw: Draw) {
    for n in 0..DRAWS {
        draw_immediate(ic, draw, n);
    }
}

#[library_benchmark(teardown = check)]
#[bench::deferred_replayed(
    args = ((ListMode::Replayed, false)),
    setup = warm,
    config = ic::gated(DDI_REPLAYED_BUDGET_IR, Some(0))
)]
#[bench::deferred_driver_built(
    args = ((ListMode::DriverBuilt, false)),
    setup = warm,
    config = ic::gated(DDI_DRIVER_BUILT_BUDGET_IR, Some(0))
)]
#[bench::immediate(
    args = ((ListMode::Replayed, true)),
    setup = warm,
    config = ic::gated(DDI_IMMEDIATE_BUDGET_IR, Some(0))
)]
fn through_ddi(mut w: Box<Warm>) -> Box<Warm> {
    let draw = w.draw;
    match w.on_immediate {
        true => ddi_draws_immediate(&mut w.ic, draw),
        false => ddi_draws_deferred(&mut w.dc, draw),
    }
    w
}

/// [`through_ddi`]'s draws on a deferred context, out of line as [`draws_deferred`] is.
#[inline(never)]
fn ddi_draws_deferred(dc: &mut DeferredContext<NullDriver, NullKernel>, draw: Draw) {
    for n in 0..DRAWS {
        ddi_calls::draw_deferred(dc, draw, n);
    }
}

/// [`through_ddi`]'s draws on the immediate context, out of line as [`draws_deferred`] is.
#[inline(never)]
fn ddi_draws_immediate(ic: &mut ImmediateContext<NullDriver, NullKernel>, draw: Draw) {
    for n in 0..DRAWS {
        ddi_calls::draw_immediate(ic, draw, n);
    }
}

/// A warm device with a ring of `bytes` in list mode `mode`.
struct WarmRing {
    dc: DeferredContext<NullDriver, NullKernel>,
    ic: ImmediateContext<NullDriver, NullKernel>,
    draw: RingDraw,
    on_immediate: bool,
    operations: usize,
}

/// [`draw::warm_ring`], with [`DRAWS`] ring draws to go in the list being recorded (or the
/// immediate context's open buffer).
fn warm_ring((mode, bytes, on_immediate): (ListMode, usize, bool)) -> Box<WarmRing> {
    ic::prepared(move || {
        let (dc, ic, draw) =
            ring_draw::warm_ring(mode, bytes, on_immediate, 4, PER_LIST - 1 - DRAWS);
        let operations = dc.stats().operations;
        Box::new(WarmRing {
            dc,
            ic,
            draw,
            on_immediate,
            operations,
        })
    })
}

/// Checks that the run recorded its ring draws (one operation each: the command; an append
/// records none) and nothing failed, then destroys the device.
fn check_ring(w: Box<WarmRing>) {
    let WarmRing {
        dc,
        mut ic,
        on_immediate,
        operations,
        ..
    } = *w;
    let recorded = if on_immediate { 0 } else { DRAWS as usize };
    assert_eq!(dc.stats().operations, operations + recorded);
    assert_eq!(ic.device().kernel().errors(), 0, "a call failed");
    drop(dc);
    ic.destroy_device().expect("destroy device");
}

#[library_benchmark(teardown = check_ring)]
#[bench::deferred_replayed_1mib(
    args = ((ListMode::Replayed, MIB, false)),
    setup = warm_ring,
    config = ic::gated(RING_REPLAYED_BUDGET_IR, Some(0))
)]
#[bench::deferred_replayed_16mib(
    args = ((ListMode::Replayed, 16 * MIB, false)),
    setup = warm_ring,
    config = ic::gated(RING_REPLAYED_BUDGET_IR, Some(0))
)]
#[bench::deferred_driver_built_1mib(
    args = ((ListMode::DriverBuilt, MIB, false)),
    setup = warm_ring,
    config = ic::gated(RING_DRIVER_BUILT_BUDGET_IR, Some(0))
)]
#[bench::deferred_driver_built_16mib(
    args = ((ListMode::DriverBuilt, 16 * MIB, false)),
    setup = warm_ring,
    config = ic::gated(RING_DRIVER_BUILT_BUDGET_IR, Some(0))
)]
#[bench::deferred_emulated_1mib(
    args = ((ListMode::Emulated, MIB, false)),
    setup = warm_ring,
    config = ic::gated(RING_EMULATED_BUDGET_IR, Some(0))
)]
#[bench::immediate_1mib(
    args = ((ListMode::Replayed, MIB, true)),
    setup = warm_ring,
    config = ic::gated(RING_IMMEDIATE_BUDGET_IR, Some(0))
)]
#[bench::immediate_16mib(
    args = ((ListMode::Replayed, 16 * MIB, true)),
    setup = warm_ring,
    config = ic::gated(RING_IMMEDIATE_BUDGET_IR, Some(0))
)]
fn ring(mut w: Box<WarmRing>) -> Box<WarmRing> {
    let draw = w.draw;
    match w.on_immediate {
        true => ring_draws_immediate(&mut w.ic, draw),
        false => ring_draws_deferred(&mut w.dc, draw),
    }
    w
}

/// [`ring`]'s draws on a deferred context, out of line as [`draws_deferred`] is.
#[inline(never)]
fn ring_draws_deferred(dc: &mut DeferredContext<NullDriver, NullKernel>, draw: RingDraw) {
    for n in 0..DRAWS {
        draw_ring(dc, draw, PER_LIST - DRAWS + n);
    }
}

/// [`ring`]'s draws on the immediate context, out of line as [`draws_deferred`] is.
#[inline(never)]
fn ring_draws_immediate(ic: &mut ImmediateContext<NullDriver, NullKernel>, draw: RingDraw) {
    for n in 0..DRAWS {
        draw_ring_immediate(ic, draw, PER_LIST - DRAWS + n);
    }
}

#[library_benchmark(teardown = check_ring)]
#[bench::deferred_replayed(
    args = ((ListMode::Replayed, MIB, false)),
    setup = warm_ring,
    config = ic::gated(DDI_RING_REPLAYED_BUDGET_IR, Some(0))
)]
#[bench::deferred_driver_built(
    args = ((ListMode::DriverBuilt, MIB, false)),
    setup = warm_ring,
    config = ic::gated(DDI_RING_DRIVER_BUILT_BUDGET_IR, Some(0))
)]
#[bench::immediate(
    args = ((ListMode::Replayed, MIB, true)),
    setup = warm_ring,
    config = ic::gated(DDI_RING_IMMEDIATE_BUDGET_IR, Some(0))
)]
fn ring_through_ddi(mut w: Box<WarmRing>) -> Box<WarmRing> {
    let draw = w.draw;
    match w.on_immediate {
        true => ddi_ring_draws_immediate(&mut w.ic, draw),
        false => ddi_ring_draws_deferred(&mut w.dc, draw),
    }
    w
}

/// [`ring_through_ddi`]'s draws on a deferred context, out of line as [`draws_deferred`] is.
#[inline(never)]
fn ddi_ring_draws_deferred(dc: &mut DeferredContext<NullDriver, NullKernel>, draw: RingDraw) {
    for n in 0..DRAWS {
        ddi_calls::draw_ring_deferred(dc, draw, PER_LIST - DRAWS + n);
    }
}

/// [`ring_through_ddi`]'s draws on the immediate context, out of line as [`draws_deferred`]
/// is.
#[inline(never)]
fn ddi_ring_draws_immediate(ic: &mut ImmediateContext<NullDriver, NullKernel>, draw: RingDraw) {
    for n in 0..DRAWS {
        ddi_calls::draw_ring_immediate(ic, draw, PER_LIST - DRAWS + n);
    }
}

/// A warm immediate context and an idle 64-byte staging resource it read before.
struct WarmStaging {
    ic: ImmediateContext<NullDriver, NullKernel>,
    staging: Handle<Resource>,
}

/// One staging read: Map(READ) of the idle staging resource (R-M4: nothing to wait for),
/// its last byte read, Unmap.
#[inline(always)]
fn read_staging(ic: &mut ImmediateContext<NullDriver, NullKernel>, staging: Handle<Resource>) {
    let bytes = ic
        .map_staging(staging, MapType::Read, MapFlags::empty())
        .expect("map");
    black_box(black_box(&*bytes)[63]);
    ic.unmap(staging).expect("unmap");
}

/// A null device whose immediate context read its staging resource through [`FRAMES`]
/// flushed frames of [`PER_LIST`] reads.
fn warm_staging() -> Box<WarmStaging> {
    ic::prepared(|| {
        let (device, mut ic) = null_device(DeviceConfig::default()).expect("null device");
        let desc = ResourceDesc {
            byte_size: 64,
            usage: Usage::Staging,
            ..Default::default()
        };
        let staging = device.create_resource(desc).expect("staging");
        for _ in 0..FRAMES {
            for _ in 0..PER_LIST {
                read_staging(&mut ic, staging);
            }
            ic.flush().expect("flush");
            ic.end_frame().expect("end frame");
        }
        Box::new(WarmStaging { ic, staging })
    })
}

/// Checks that nothing failed, then destroys the device.
fn check_staging(w: Box<WarmStaging>) {
    let WarmStaging { mut ic, .. } = *w;
    assert_eq!(ic.device().kernel().errors(), 0, "a call failed");
    ic.destroy_device().expect("destroy device");
}

#[library_benchmark(teardown = check_staging)]
#[bench::immediate(
    setup = warm_staging,
    config = ic::gated(STAGING_IMMEDIATE_BUDGET_IR, Some(0))
)]
fn staging(mut w: Box<WarmStaging>) -> Box<WarmStaging> {
    let staging = w.staging;
    for _ in 0..DRAWS {
        read_staging(&mut w.ic, staging);
    }
    w
}

/// The floor's constant buffer: the application's own 64 bytes.
fn constants() -> Box<[u8; 64]> {
    Box::new([0; 64])
}

// The application's share of a run, without the engine: the same loop writing the same 64
// bytes per draw into memory of its own. Subtracted from a run, it leaves the engine's share.
#[library_benchmark]
#[bench::floor(setup = constants)]
fn floor(mut bytes: Box<[u8; 64]>) -> Box<[u8; 64]> {
    for n in 0..DRAWS {
        let bytes = black_box(&mut *bytes);
        bytes.fill(black_box(n) as u8);
        black_box(black_box(bytes).as_ptr());
    }
    bytes
}

library_benchmark_group!(
    name = recorded_draw,
    benchmarks = [run, through_ddi, ring, ring_through_ddi, staging, floor]
);

main!(config = ic::config(); library_benchmark_groups = recorded_draw);
