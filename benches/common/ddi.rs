//! The recorded draw and the ring draw as a driver's DDI entry points make them: each call
//! of the draw through a function of its own, kept out of line, as a translation layer's
//! `extern "C"` entry point calls the engine (a ResourceMap, a ResourceUnmap, a Draw).
//!
//! Inlined into the bench's loop (`common/draw.rs`), the engine's routes share one frame and
//! one register allocation with the loop and with each other, and their count moves when
//! the loop's shape does (a loop per context in a function of its own moved the deferred
//! draw by +13% and the staging read by -21%). Here each call pays its own frame, as it does
//! behind a DDI, and its count is the engine's alone to move.

use std::hint::black_box;

use cmdlist::handle::Resource;
use cmdlist::soft::null::{CopyCommand, NullDriver, NullKernel};
use cmdlist::{DeferredContext, Handle, ImmediateContext, Result};

use crate::draw::Draw;
use crate::ring_draw::RingDraw;

type Dc = DeferredContext<NullDriver, NullKernel>;
type Ic = ImmediateContext<NullDriver, NullKernel>;

/// ResourceMap(WRITE_DISCARD) on a deferred context.
#[inline(never)]
fn dc_map_discard(dc: &mut Dc, resource: Handle<Resource>) -> Result<&mut [u8]> {
    dc.map_discard(resource)
}

/// ResourceMap(WRITE_NO_OVERWRITE) on a deferred context.
#[inline(never)]
fn dc_map_no_overwrite(dc: &mut Dc, resource: Handle<Resource>) -> Result<&mut [u8]> {
    dc.map_no_overwrite(resource)
}

/// ResourceUnmap on a deferred context.
#[inline(never)]
fn dc_unmap(dc: &mut Dc, resource: Handle<Resource>) -> Result<()> {
    dc.unmap(resource)
}

/// The draw's command on a deferred context.
#[inline(never)]
fn dc_command(dc: &mut Dc, command: CopyCommand) -> Result<()> {
    dc.command(command)
}

/// ResourceMap(WRITE_DISCARD) on the immediate context.
#[inline(never)]
fn ic_map_discard(ic: &mut Ic, resource: Handle<Resource>) -> Result<&mut [u8]> {
    ic.map_discard(resource)
}

/// ResourceMap(WRITE_NO_OVERWRITE) on the immediate context.
#[inline(never)]
fn ic_map_no_overwrite(ic: &mut Ic, resource: Handle<Resource>) -> Result<&mut [u8]> {
    ic.map_no_overwrite(resource)
}

/// ResourceUnmap on the immediate context.
#[inline(never)]
fn ic_unmap(ic: &mut Ic, resource: Handle<Resource>) -> Result<()> {
    ic.unmap(resource)
}

/// The draw's command on the immediate context.
#[inline(never)]
fn ic_command(ic: &mut Ic, command: &CopyCommand) -> Result<()> {
    ic.command(command)
}

/// [`crate::draw::draw_deferred`] through the DDI's entry points.
#[inline(always)]
pub fn draw_deferred(dc: &mut Dc, draw: Draw, n: u64) {
    let bytes = dc_map_discard(dc, draw.constants).expect("map");
    bytes.fill(black_box(n) as u8);
    dc_unmap(dc, draw.constants).expect("unmap");
    dc_command(dc, black_box(draw.copy)).expect("command");
}

/// [`crate::draw::draw_immediate`] through the DDI's entry points.
#[inline(always)]
pub fn draw_immediate(ic: &mut Ic, draw: Draw, n: u64) {
    let bytes = ic_map_discard(ic, draw.constants).expect("map");
    bytes.fill(black_box(n) as u8);
    ic_unmap(ic, draw.constants).expect("unmap");
    ic_command(ic, black_box(&draw.copy)).expect("command");
}

/// [`crate::ring_draw::draw_ring`] through the DDI's entry points.
#[inline(always)]
pub fn draw_ring_deferred(dc: &mut Dc, draw: RingDraw, n: u64) {
    let bytes = dc_map_no_overwrite(dc, draw.ring).expect("map");
    let at = (n as usize * 64) % draw.bytes;
    bytes[at..at + 64].fill(black_box(n) as u8);
    dc_unmap(dc, draw.ring).expect("unmap");
    dc_command(dc, black_box(draw.copy)).expect("command");
}

/// [`crate::ring_draw::draw_ring_immediate`] through the DDI's entry points.
#[inline(always)]
pub fn draw_ring_immediate(ic: &mut Ic, draw: RingDraw, n: u64) {
    let bytes = ic_map_no_overwrite(ic, draw.ring).expect("map");
    let at = (n as usize * 64) % draw.bytes;
    bytes[at..at + 64].fill(black_box(n) as u8);
    ic_unmap(ic, draw.ring).expect("unmap");
    ic_command(ic, black_box(&draw.copy)).expect("command");
}
