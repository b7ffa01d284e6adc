//! Instruction counts of a recorded draw with the capture on and off (feature `capture`,
//! docs/CAPTURE.md): the draw of `draw_ic` (Map(WRITE_DISCARD) of a 64-byte constant
//! buffer, 64 bytes written, Unmap, a command naming two objects; null driver, runs of
//! [`DRAWS`] draws mid-frame), on a device made without a capture and on one that records
//! to a sink that keeps nothing (`std::io::sink`): the capture's own cost, its records
//! encoded and framed, without the output's.
//!
//! Built only with the feature (`cargo bench -p cmdlist-benches --features capture --bench
//! capture_ic`): the engine compiled with it checks for a capture at each call, which the
//! `_off` runs count and `draw_ic` (built without it) does not.
//!
//! # The gate
//! Each `_on` run under its budget ([`ON_BUDGET_IR`], [`IMMEDIATE_ON_BUDGET_IR`]) plus 10%.
//! The target, a draw with the capture on at most twice the same draw with it off, is
//! compared in BENCHMARKS.md (`### Capture`), where the figures are.

// gungraun's macros generate public modules, constants and functions without docs.
#![allow(missing_docs)]

#[path = "common/draw.rs"]
mod draw;
#[path = "common/ic.rs"]
mod ic;

use cmdlist::capture::CaptureSink;
use cmdlist::soft::null::{NullDriver, NullKernel};
use cmdlist::{DeferredContext, DeviceConfig, ImmediateContext, ListMode};
use draw::{draw_deferred, draw_immediate, warm_device, warm_device_with, Draw, PER_LIST};
use gungraun::prelude::*;

/// Draws per measured run.
pub const DRAWS: u64 = 32;

/// Instructions of a run of [`DRAWS`] draws on a deferred context recording to a capture,
/// as last recorded (BENCHMARKS.md says when).
const ON_BUDGET_IR: u64 = 23_657;
/// The same on the immediate context.
const IMMEDIATE_ON_BUDGET_IR: u64 = 25_640;

struct Warm {
    dc: DeferredContext<NullDriver, NullKernel>,
    ic: ImmediateContext<NullDriver, NullKernel>,
    draw: Draw,
    on_immediate: bool,
}

/// A warm device (`draw::warm_device`) recording to a capture or not.
fn warm((on_immediate, captured): (bool, bool)) -> Box<Warm> {
    ic::prepared(move || {
        let (mode, started) = (ListMode::Replayed, PER_LIST - DRAWS);
        let (dc, ic, draw) = match captured {
            true => {
                let sink = CaptureSink::new(std::io::sink()).expect("a sink");
                let config = DeviceConfig::default().with_capture(sink);
                warm_device_with(mode, on_immediate, started, config)
            }
            false => warm_device(mode, on_immediate, started),
        };
        Box::new(Warm {
            dc,
            ic,
            draw,
            on_immediate,
        })
    })
}

fn check(w: Box<Warm>) {
    let Warm { dc, mut ic, .. } = *w;
    assert_eq!(ic.device().kernel().errors(), 0, "a call failed");
    drop(dc);
    ic.destroy_device().expect("destroy device");
}

#[library_benchmark(teardown = check)]
#[bench::deferred_off(args = ((false, false)), setup = warm, config = ic::config())]
#[bench::deferred_on(
    args = ((false, true)),
    setup = warm,
    config = ic::gated(ON_BUDGET_IR, None)
)]
#[bench::immediate_off(args = ((true, false)), setup = warm, config = ic::config())]
#[bench::immediate_on(
    args = ((true, true)),
    setup = warm,
    config = ic::gated(IMMEDIATE_ON_BUDGET_IR, None)
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
/// (and count) does not move with the immediate context's. In this file, as `draw_ic`'s is
/// in its own, for the reason given there.
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

library_benchmark_group!(name = captured_draw, benchmarks = [run]);

main!(config = ic::config(); library_benchmark_groups = captured_draw);
