//! Instruction counts of the API-overhead bench's draw (`common/api_mix.rs`: two binds, a
//! NO_OVERWRITE ring append, a 64-byte constant-buffer discard every 16 draws, the draw
//! command), with gungraun on callgrind over the null driver: the engine's cost of the
//! draws `api_overhead.rs` times, as a count that repeats whatever the machine's load.
//!
//! Each function records a run of [`DRAWS`] draws in the middle of a warm frame, so a
//! figure divided by [`DRAWS`] is the instructions a draw in a warm steady state: four
//! constant-buffer discards a run on either context; the ring wraps once every 4,096 draws,
//! outside the run (a deferred recording discards it at its first draw, before the run).
//!
//! - `api_overhead::run immediate`: on the immediate context, the whole draw. Setup:
//!   [`WARM_FRAMES`] frames of [`WARM_DRAWS`] draws on each context (each deferred list
//!   executed, dropped and flushed), then [`STARTED`] draws into the open buffer, the ring
//!   wrapping at the first (and the open buffer flushed at the first append after it).
//! - `api_overhead::run deferred_driver_built`: on a deferred context whose lists the
//!   driver builds, the recording thread's share. The same setup, the [`STARTED`] draws
//!   into a new recording, which discards the ring at its first.
//!
//! Setup and teardown run outside the count (`common/ic.rs`); the teardown checks that the
//! deferred run recorded its draws' operations, that the ring's memory holds the
//! immediate run's last draw, and that nothing failed.
//!
//! # The gate
//! Each run carries a hard limit of its budget below plus [`ic::HEADROOM_PERCENT`], and no
//! locked instruction at all on either context: a binding on the immediate context counts
//! its object in the object's immediate-context side, on that context's thread, and the
//! Maps take none (the null kernel keeps its locks across Maps,
//! `Kernel::persistent_locks`). `cargo bench -p
//! cmdlist-benches --bench api_overhead_ic` exits with an error above a limit; when a draw
//! gets cheaper, record the new count here. With the feature `trace` the counts are
//! reported and not gated.

// gungraun's macros generate public modules, constants and functions without docs.
#![allow(missing_docs)]

#[path = "common/api_mix.rs"]
mod api_mix;
#[path = "common/ic.rs"]
mod ic;

use api_mix::{draw, recorded_operations, Mix, MixContext, RingCursor, RING_BYTES, VERTEX_BYTES};
use cmdlist::soft::null::{null_device_in, NullDriver, NullKernel};
use cmdlist::{DeferredContext, DeviceConfig, ImmediateContext, ListMode};
use gungraun::prelude::*;

/// Instructions of a run of [`DRAWS`] draws on the immediate context, as last measured
/// (BENCHMARKS.md, `## API overhead`).
const IMMEDIATE_BUDGET_IR: u64 = 29_565;
/// Instructions of a run of [`DRAWS`] draws on a deferred context whose lists the driver
/// builds, the recording thread's share, as last measured.
const DEFERRED_DRIVER_BUILT_BUDGET_IR: u64 = 25_773;

/// Draws per measured run: a multiple of [`api_mix::CONSTANTS_EVERY`], so that every run holds as
/// many constant-buffer discards.
pub const DRAWS: u64 = 64;
/// Draws made in the warm frame before the measured run: the ring discarded at the first,
/// and on the immediate context [`STARTED`] + [`DRAWS`] appends within its ring.
const STARTED: u64 = 128;
/// Frames of warm-up, and their draws on each context: a multiple of [`api_mix::CONSTANTS_EVERY`],
/// so that the measured run starts at a draw that discards the constants.
const WARM_FRAMES: u64 = 8;
const WARM_DRAWS: u64 = 1_024;

/// A warm device, its deferred context, and a stream of draws on the context measured.
struct Warm {
    dc: DeferredContext<NullDriver, NullKernel>,
    ic: ImmediateContext<NullDriver, NullKernel>,
    mix: Mix,
    cursor: RingCursor,
    /// The next draw's index.
    next: u64,
    /// The index of the first draw after the warm-up frames.
    first: u64,
    on_immediate: bool,
}

/// A null device whose driver builds its lists, warmed by [`WARM_FRAMES`] frames on each
/// context, then [`STARTED`] draws into the open buffer (`on_immediate`) or into a new
/// recording: every handle the draw names is open in the context and every vector has room.
fn warm(on_immediate: bool) -> Box<Warm> {
    ic::prepared(move || {
        let (device, mut ic) =
            null_device_in(ListMode::DriverBuilt, DeviceConfig::default()).expect("null device");
        let mut dc = device.create_deferred_context().expect("deferred context");
        let dc_mix = Mix::new(&device, RING_BYTES).expect("objects");
        let ic_mix = Mix::new(&device, RING_BYTES).expect("objects");
        let (mut dc_cursor, mut ic_cursor) = (RingCursor::default(), RingCursor::default());
        let mut n = 0;
        for _ in 0..WARM_FRAMES {
            dc_cursor.restart();
            for i in 0..WARM_DRAWS {
                draw(&mut dc, &dc_mix, &mut dc_cursor, n + i);
            }
            let list = dc.finish().expect("finish");
            for i in 0..WARM_DRAWS {
                draw(&mut ic, &ic_mix, &mut ic_cursor, n + i);
            }
            ic.execute_command_list(&list).expect("execute");
            drop(list);
            ic.flush().expect("flush");
            ic.end_frame().expect("end frame");
            n += WARM_DRAWS;
        }
        let (mix, mut cursor) = if on_immediate {
            (ic_mix, ic_cursor)
        } else {
            (dc_mix, dc_cursor)
        };
        // A new recording discards the ring at its first draw; the immediate context's ring
        // is full after the warm frames' 8,192 draws, two wraps, and wraps there.
        cursor.restart();
        for i in n..n + STARTED {
            if on_immediate {
                draw(&mut ic, &mix, &mut cursor, i);
            } else {
                draw(&mut dc, &mix, &mut cursor, i);
            }
        }
        Box::new(Warm {
            dc,
            ic,
            mix,
            cursor,
            next: n + STARTED,
            first: n,
            on_immediate,
        })
    })
}

/// Checks that the run made its draws and nothing failed, then destroys the device.
fn check(w: Box<Warm>) {
    let Warm {
        dc,
        mut ic,
        mix,
        cursor,
        next,
        first,
        on_immediate,
    } = *w;
    assert_eq!(next, first + STARTED + DRAWS);
    if on_immediate {
        // The appends reached the ring's memory: it holds the last draw's vertices.
        let at = cursor.next().expect("the ring was written") - VERTEX_BYTES;
        let ring = ic.map_no_overwrite(mix.ring).expect("map ring");
        assert!(ring[at..at + VERTEX_BYTES]
            .iter()
            .all(|&b| b == (next - 1) as u8));
        ic.unmap(mix.ring).expect("unmap ring");
        assert_eq!(
            dc.stats().operations,
            0,
            "nothing recorded on the deferred context"
        );
    } else {
        assert_eq!(
            dc.stats().operations,
            recorded_operations(STARTED + DRAWS),
            "the recording holds its draws' operations"
        );
    }
    assert_eq!(ic.device().kernel().errors(), 0, "a call failed");
    drop(dc);
    ic.destroy_device().expect("destroy device");
}

#[library_benchmark(teardown = check)]
#[bench::immediate(
    args = (true),
    setup = warm,
    config = ic::gated(IMMEDIATE_BUDGET_IR, Some(0))
)]
#[bench::deferred_driver_built(
    args = (false),
    setup = warm,
    config = ic::gated(DEFERRED_DRIVER_BUILT_BUDGET_IR, Some(0))
)]
fn run(mut w: Box<Warm>) -> Box<Warm> {
    let Warm {
        dc,
        ic,
        mix,
        cursor,
        next,
        on_immediate,
        ..
    } = &mut *w;
    match *on_immediate {
        true => draws(ic, mix, cursor, *next),
        false => draws(dc, mix, cursor, *next),
    }
    *next += DRAWS;
    w
}

/// [`DRAWS`] draws of the mix from draw `first` on one context: a loop of its own per
/// context, out of line, so that one context's code (and count) does not move with the
/// other's.
#[inline(never)]
fn draws<C: MixContext>(ctx: &mut C, mix: &Mix, cursor: &mut RingCursor, first: u64) {
    for n in first..first + DRAWS {
        draw(ctx, mix, cursor, n);
    }
}

library_benchmark_group!(name = api_overhead, benchmarks = [run]);

main!(config = ic::config(); library_benchmark_groups = api_overhead);
