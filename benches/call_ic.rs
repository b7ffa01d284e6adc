//! Instruction counts of each call kind alone, with gungraun on callgrind over the null driver
//! (`cmdlist::soft::null`, hooks that do nothing): the ledger's rows (BENCHMARKS.md, "Each
//! call kind"), and a gate on each.
//!
//! Each function makes [`CALLS`] calls of one kind on a warm device (the recorded draw's
//! warm-up, `common/draw.rs`, then, on a deferred context, two recordings of what the runs
//! record, finished and dropped, so that the run's recording is a recycled one whose arena
//! handed its bytes out before), so the figure divided
//! by [`CALLS`] is one call's instructions in a warm steady state, the loop's own few
//! included; `floor` is the application's share (the same loop writing the same 64 bytes
//! into memory of its own), to subtract from the Map rows.
//!
//! - `command`: a command naming two objects, both open in the recording (deferred) or
//!   referenced by the open buffer already (immediate).
//! - `discard`: Map(WRITE_DISCARD) of a 64-byte dynamic constant buffer, 64 bytes written,
//!   Unmap (R-M1; on the immediate context a rename, R-M5).
//! - `append`: a ring's append (R-M2, R-M3): Map(WRITE_NO_OVERWRITE) of a 1 MiB dynamic
//!   vertex buffer discarded once this recording (or this frame), 64 bytes written at the
//!   next stretch, Unmap.
//! - `bind`: a bind at the pixel stage's shader-resource slot 0 of one of two objects in
//!   turn, each replacing the other (R-C1), both open in the recording (deferred) or
//!   referenced by the open buffer already (immediate); the table bound once before.
//!
//! A staging read (Map(READ) of an idle staging buffer, Unmap) is `draw_ic`'s
//! `staging immediate`.
//!
//! # The gate
//! Each function carries a hard limit: its budget below plus the headroom of
//! `common/ic.rs`, and no locked instruction (the null kernel keeps its locks across Maps,
//! so a warm Map reaches no kernel lock).

// gungraun's macros generate public modules, constants and functions without docs.
#![allow(missing_docs)]

#[path = "common/draw.rs"]
mod draw;
#[path = "common/ic.rs"]
mod ic;
// Its ring and starts; the ring draw itself is draw_ic's.
#[allow(dead_code)]
#[path = "common/ring_draw.rs"]
mod ring_draw;

use std::hint::black_box;

use cmdlist::handle::Resource;
use cmdlist::soft::null::{CopyCommand, NullDriver, NullKernel};
use cmdlist::{
    AnyHandle, BindClass, BindPoint, DeferredContext, Handle, ImmediateContext, ListMode,
    ResourceDesc, Stage, Usage,
};
use draw::{warm_device, Draw};
use gungraun::prelude::*;
use ring_draw::RingDraw;

/// Calls per measured run.
pub const CALLS: u64 = 32;

/// The deferred context the calls are made on.
type Dc = DeferredContext<NullDriver, NullKernel>;
/// The immediate context the calls are made on.
type Ic = ImmediateContext<NullDriver, NullKernel>;

/// Instructions of [`CALLS`] commands on a deferred context whose lists the engine replays,
/// as last recorded (BENCHMARKS.md says when).
const COMMAND_REPLAYED_IR: u64 = 2_986;
/// The same where the driver builds its lists.
const COMMAND_DRIVER_BUILT_IR: u64 = 2_666;
/// The same on the immediate context.
const COMMAND_IMMEDIATE_IR: u64 = 2_471;
/// Instructions of [`CALLS`] Map(DISCARD)s, 64 bytes written, Unmaps, on a deferred context
/// whose lists the engine replays.
const DISCARD_REPLAYED_IR: u64 = 6_103;
/// The same where the driver builds its lists.
const DISCARD_DRIVER_BUILT_IR: u64 = 5_778;
/// The same on the immediate context.
const DISCARD_IMMEDIATE_IR: u64 = 7_811;
/// Instructions of [`CALLS`] ring appends on a deferred context whose lists the engine
/// replays.
const APPEND_REPLAYED_IR: u64 = 3_922;
/// The same where the driver builds its lists.
const APPEND_DRIVER_BUILT_IR: u64 = 4_434;
/// The same on the immediate context.
const APPEND_IMMEDIATE_IR: u64 = 5_095;
/// Instructions of [`CALLS`] binds on a deferred context whose lists the engine replays.
const BIND_REPLAYED_IR: u64 = 2_105;
/// The same where the driver builds its lists.
const BIND_DRIVER_BUILT_IR: u64 = 1_625;
/// The same on the immediate context.
const BIND_IMMEDIATE_IR: u64 = 2_020;
/// Where `bind` binds.
const BIND_AT: BindPoint = BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0);
/// The ring's size.
const MIB: usize = 1 << 20;

/// Which context a run's calls go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum On {
    Deferred,
    Immediate,
}

/// A warm device, its deferred context, the draw's objects and a ring.
struct Warm {
    dc: DeferredContext<NullDriver, NullKernel>,
    ic: ImmediateContext<NullDriver, NullKernel>,
    draw: Draw,
    ring: RingDraw,
    on: On,
    operations: usize,
}

/// A warm device in list mode `mode` ([`draw::warm_device`], one draw recorded in the
/// recording), its ring discarded once in the recording (and in the immediate context's
/// open buffer). On a deferred context recordings of what the runs record come first,
/// finished, executed and dropped: the measured recording is a recycled one, its arena's
/// bytes written before, as a frame's lists are from the second frame on.
fn warm((mode, on): (ListMode, On)) -> Box<Warm> {
    ic::prepared(move || make(mode, on))
}

/// [`warm`]'s device, made on the thread that calls it.
fn make(mode: ListMode, on: On) -> Box<Warm> {
    {
        let (mut dc, mut ic, draw) = warm_device(mode, on == On::Immediate, 1);
        let device = ic.device().clone();
        let ring = RingDraw {
            ring: device
                .create_resource(ResourceDesc {
                    byte_size: MIB as u64,
                    bind: cmdlist::BindFlags::VERTEX_BUFFER,
                    usage: Usage::Dynamic,
                    ..Default::default()
                })
                .expect("ring"),
            bytes: MIB,
            copy: draw.copy,
        };
        match on {
            On::Deferred => {
                // Twice: a Finish takes the next recording from the context's cache before
                // the list it made is dropped, so recordings alternate.
                for _ in 0..2 {
                    ring_draw::start_ring(&mut dc, ring);
                    append_deferred(&mut dc, ring, 1);
                    for n in 0..CALLS {
                        dc.map_discard(draw.constants).expect("map").fill(n as u8);
                        dc.unmap(draw.constants).expect("unmap");
                    }
                    let list = dc.finish().expect("finish");
                    ic.execute_command_list(&list).expect("execute");
                    drop(list);
                    ic.flush().expect("flush");
                    draw::draw_deferred(&mut dc, draw, 0);
                }
                ring_draw::start_ring(&mut dc, ring);
                append_deferred(&mut dc, ring, 1);
            }
            On::Immediate => {
                ring_draw::start_ring_immediate(&mut ic, ring);
                append_immediate(&mut ic, ring, 1);
            }
        }
        let operations = dc.stats().operations;
        Box::new(Warm {
            dc,
            ic,
            draw,
            ring,
            on,
            operations,
        })
    }
}

/// Checks that the run recorded what its calls record (`per_call` operations each on a
/// deferred context) and that nothing failed, then destroys the device.
fn check(w: Box<Warm>, per_call: usize) {
    let Warm {
        dc,
        mut ic,
        on,
        operations,
        ..
    } = *w;
    let recorded = match on {
        On::Deferred => per_call * CALLS as usize,
        On::Immediate => 0,
    };
    assert_eq!(dc.stats().operations, operations + recorded);
    assert_eq!(ic.device().kernel().errors(), 0, "a call failed");
    drop(dc);
    ic.destroy_device().expect("destroy device");
}

/// A command records one operation; a Map(DISCARD)'s Unmap one.
fn check_one_each(w: Box<Warm>) {
    check(w, 1);
}

/// An append records none.
fn check_none(w: Box<Warm>) {
    check(w, 0);
}

/// A ring append on a deferred context: Map(NO_OVERWRITE), 64 bytes at the `n`th stretch,
/// Unmap.
#[inline(always)]
fn append_deferred(dc: &mut Dc, ring: RingDraw, n: u64) {
    let bytes = dc.map_no_overwrite(ring.ring).expect("map");
    let at = n as usize * 64;
    bytes[at..at + 64].fill(black_box(n) as u8);
    dc.unmap(ring.ring).expect("unmap");
}

/// The same append on the immediate context.
#[inline(always)]
fn append_immediate(ic: &mut Ic, ring: RingDraw, n: u64) {
    let bytes = ic.map_no_overwrite(ring.ring).expect("map");
    let at = n as usize * 64;
    bytes[at..at + 64].fill(black_box(n) as u8);
    ic.unmap(ring.ring).expect("unmap");
}

#[library_benchmark(teardown = check_one_each)]
#[bench::deferred_replayed(
    args = ((ListMode::Replayed, On::Deferred)),
    setup = warm,
    config = ic::gated(COMMAND_REPLAYED_IR, Some(0))
)]
#[bench::deferred_driver_built(
    args = ((ListMode::DriverBuilt, On::Deferred)),
    setup = warm,
    config = ic::gated(COMMAND_DRIVER_BUILT_IR, Some(0))
)]
#[bench::immediate(
    args = ((ListMode::Replayed, On::Immediate)),
    setup = warm,
    config = ic::gated(COMMAND_IMMEDIATE_IR, Some(0))
)]
fn command(mut w: Box<Warm>) -> Box<Warm> {
    let copy = w.draw.copy;
    match w.on {
        On::Deferred => commands_deferred(&mut w.dc, copy),
        On::Immediate => commands_immediate(&mut w.ic, copy),
    }
    w
}

/// [`command`]'s calls on a deferred context: a loop of its own, out of line, so that its
/// code (and count) does not move with the immediate context's. Each bench function's
/// loops below are out of line in the same way, one per context.
#[inline(never)]
fn commands_deferred(dc: &mut Dc, copy: CopyCommand) {
    for _ in 0..CALLS {
        dc.command(black_box(copy)).expect("command");
    }
}

/// [`command`]'s calls on the immediate context.
#[inline(never)]
fn commands_immediate(ic: &mut Ic, copy: CopyCommand) {
    for _ in 0..CALLS {
        ic.command(black_box(&copy)).expect("command");
    }
}

#[library_benchmark(teardown = check_one_each)]
#[bench::deferred_replayed(
    args = ((ListMode::Replayed, On::Deferred)),
    setup = warm,
    config = ic::gated(DISCARD_REPLAYED_IR, Some(0))
)]
#[bench::deferred_driver_built(
    args = ((ListMode::DriverBuilt, On::Deferred)),
    setup = warm,
    config = ic::gated(DISCARD_DRIVER_BUILT_IR, Some(0))
)]
#[bench::immediate(
    args = ((ListMode::Replayed, On::Immediate)),
    setup = warm,
    config = ic::gated(DISCARD_IMMEDIATE_IR, Some(0))
)]
fn discard(mut w: Box<Warm>) -> Box<Warm> {
    let constants = w.draw.constants;
    match w.on {
        On::Deferred => discards_deferred(&mut w.dc, constants),
        On::Immediate => discards_immediate(&mut w.ic, constants),
    }
    w
}

/// [`discard`]'s Maps and Unmaps on a deferred context.
#[inline(never)]
fn discards_deferred(dc: &mut Dc, constants: Handle<Resource>) {
    for n in 0..CALLS {
        let bytes = dc.map_discard(constants).expect("map");
        bytes.fill(black_box(n) as u8);
        dc.unmap(constants).expect("unmap");
    }
}

/// [`discard`]'s Maps and Unmaps on the immediate context.
#[inline(never)]
fn discards_immediate(ic: &mut Ic, constants: Handle<Resource>) {
    for n in 0..CALLS {
        let bytes = ic.map_discard(constants).expect("map");
        bytes.fill(black_box(n) as u8);
        ic.unmap(constants).expect("unmap");
    }
}

#[library_benchmark(teardown = check_none)]
#[bench::deferred_replayed(
    args = ((ListMode::Replayed, On::Deferred)),
    setup = warm,
    config = ic::gated(APPEND_REPLAYED_IR, Some(0))
)]
#[bench::deferred_driver_built(
    args = ((ListMode::DriverBuilt, On::Deferred)),
    setup = warm,
    config = ic::gated(APPEND_DRIVER_BUILT_IR, Some(0))
)]
#[bench::immediate(
    args = ((ListMode::Replayed, On::Immediate)),
    setup = warm,
    config = ic::gated(APPEND_IMMEDIATE_IR, Some(0))
)]
fn append(mut w: Box<Warm>) -> Box<Warm> {
    let ring = w.ring;
    match w.on {
        On::Deferred => appends_deferred(&mut w.dc, ring),
        On::Immediate => appends_immediate(&mut w.ic, ring),
    }
    w
}

/// [`append`]'s appends on a deferred context.
#[inline(never)]
fn appends_deferred(dc: &mut Dc, ring: RingDraw) {
    for n in 2..2 + CALLS {
        append_deferred(dc, ring, n);
    }
}

/// [`append`]'s appends on the immediate context.
#[inline(never)]
fn appends_immediate(ic: &mut Ic, ring: RingDraw) {
    for n in 2..2 + CALLS {
        append_immediate(ic, ring, n);
    }
}

/// [`warm`], the command's source bound once at [`BIND_AT`]: the table's places made, as
/// a frame's binds find them from its first draw on.
fn warm_bound((mode, on): (ListMode, On)) -> Box<Warm> {
    ic::prepared(move || {
        let mut w = make(mode, on);
        let src = w.draw.copy.src.any();
        match w.on {
            On::Deferred => w.dc.bind(BIND_AT, Some(src)).expect("bind"),
            On::Immediate => w.ic.bind(BIND_AT, Some(src)).expect("bind"),
        }
        w.operations = w.dc.stats().operations;
        w
    })
}

#[library_benchmark(teardown = check_one_each)]
#[bench::deferred_replayed(
    args = ((ListMode::Replayed, On::Deferred)),
    setup = warm_bound,
    config = ic::gated(BIND_REPLAYED_IR, Some(0))
)]
#[bench::deferred_driver_built(
    args = ((ListMode::DriverBuilt, On::Deferred)),
    setup = warm_bound,
    config = ic::gated(BIND_DRIVER_BUILT_IR, Some(0))
)]
#[bench::immediate(
    args = ((ListMode::Replayed, On::Immediate)),
    setup = warm_bound,
    config = ic::gated(BIND_IMMEDIATE_IR, Some(0))
)]
fn bind(mut w: Box<Warm>) -> Box<Warm> {
    let objects = [w.draw.copy.dst.any(), w.draw.copy.src.any()];
    match w.on {
        On::Deferred => binds_deferred(&mut w.dc, objects),
        On::Immediate => binds_immediate(&mut w.ic, objects),
    }
    w
}

/// [`bind`]'s binds on a deferred context.
#[inline(never)]
fn binds_deferred(dc: &mut Dc, objects: [AnyHandle; 2]) {
    for n in 0..CALLS as usize {
        dc.bind(BIND_AT, Some(black_box(objects[n % 2])))
            .expect("bind");
    }
}

/// [`bind`]'s binds on the immediate context.
#[inline(never)]
fn binds_immediate(ic: &mut Ic, objects: [AnyHandle; 2]) {
    for n in 0..CALLS as usize {
        ic.bind(BIND_AT, Some(black_box(objects[n % 2])))
            .expect("bind");
    }
}

/// The floor's bytes: the application's own 64.
fn constants() -> Box<[u8; 64]> {
    Box::new([0; 64])
}

// The application's share of a Map run, without the engine: the same loop writing the same
// 64 bytes per call into memory of its own.
#[library_benchmark]
#[bench::floor(setup = constants)]
fn floor(mut bytes: Box<[u8; 64]>) -> Box<[u8; 64]> {
    for n in 0..CALLS {
        let bytes = black_box(&mut *bytes);
        bytes.fill(black_box(n) as u8);
        black_box(black_box(bytes).as_ptr());
    }
    bytes
}

library_benchmark_group!(
    name = call_kind,
    benchmarks = [command, discard, append, bind, floor]
);

main!(config = ic::config(); library_benchmark_groups = call_kind);
