//! The recorded draw that `draw_ic` counts and `examples/draw_writes.rs` traces: a game's
//! draw call as the runtime sees it, on either context, and the warm device it runs on.

use std::hint::black_box;

use cmdlist::handle::Resource;
use cmdlist::soft::null::{null_device_in, CopyCommand, NullDriver, NullKernel};
use cmdlist::{
    DeferredContext, DeviceConfig, Handle, ImmediateContext, ListMode, ResourceDesc, Usage,
};

/// Draws per list in the warm-up frames.
pub const PER_LIST: u64 = 64;
/// Frames of warm-up.
pub const FRAMES: u64 = 16;

/// The objects a draw names.
#[derive(Clone, Copy)]
pub struct Draw {
    /// The 64-byte dynamic constant buffer mapped per draw.
    pub constants: Handle<Resource>,
    /// The command, naming two objects.
    pub copy: CopyCommand,
}

/// One draw on a deferred context: Map(WRITE_DISCARD) of the constant buffer, its 64 bytes
/// written, Unmap, the command.
#[inline(always)]
pub fn draw_deferred(dc: &mut DeferredContext<NullDriver, NullKernel>, draw: Draw, n: u64) {
    let bytes = dc.map_discard(draw.constants).expect("map");
    bytes.fill(black_box(n) as u8);
    dc.unmap(draw.constants).expect("unmap");
    dc.command(black_box(draw.copy)).expect("command");
}

/// The same draw on the immediate context.
#[inline(always)]
pub fn draw_immediate(ic: &mut ImmediateContext<NullDriver, NullKernel>, draw: Draw, n: u64) {
    let bytes = ic.map_discard(draw.constants).expect("map");
    bytes.fill(black_box(n) as u8);
    ic.unmap(draw.constants).expect("unmap");
    ic.command(black_box(&draw.copy)).expect("command");
}

/// A null device in list mode `mode` and its deferred context, warmed by [`FRAMES`] frames of
/// [`PER_LIST`] draws on each context (every list finished, executed, dropped and flushed),
/// then `started` draws recorded into the next list on the deferred context (or into the
/// open buffer on the immediate one): every handle the draw names is open in the context,
/// and the recording's vectors, arena and recycled list are at their working size.
pub fn warm_device(
    mode: ListMode,
    on_immediate: bool,
    started: u64,
) -> (
    DeferredContext<NullDriver, NullKernel>,
    ImmediateContext<NullDriver, NullKernel>,
    Draw,
) {
    let (device, mut ic) = null_device_in(mode, DeviceConfig::default()).expect("null device");
    assert_eq!(device.list_mode(), mode);
    let buffer = ResourceDesc {
        byte_size: 256,
        ..Default::default()
    };
    let constants = ResourceDesc {
        byte_size: 64,
        usage: Usage::Dynamic,
        ..Default::default()
    };
    let draw = Draw {
        constants: device.create_resource(constants).expect("constants"),
        copy: CopyCommand {
            dst: device.create_resource(buffer).expect("dst"),
            src: device.create_resource(buffer).expect("src"),
        },
    };
    let mut dc = device.create_deferred_context().expect("dc");
    for _ in 0..FRAMES {
        for n in 0..PER_LIST {
            draw_deferred(&mut dc, draw, n);
        }
        let list = dc.finish().expect("finish");
        for n in 0..PER_LIST {
            draw_immediate(&mut ic, draw, n);
        }
        ic.execute_command_list(&list).expect("execute");
        drop(list);
        ic.flush().expect("flush");
        ic.end_frame().expect("end frame");
    }
    for n in 0..started {
        if on_immediate {
            draw_immediate(&mut ic, draw, n);
        } else {
            draw_deferred(&mut dc, draw, n);
        }
    }
    (dc, ic, draw)
}

/// The objects a ring draw names: a dynamic vertex buffer streamed through, and the command.
#[derive(Clone, Copy)]
pub struct RingDraw {
    /// The ring: one Map(DISCARD) per recording, then a Map(NO_OVERWRITE) per draw.
    pub ring: Handle<Resource>,
    /// Its size in bytes.
    pub bytes: usize,
    /// The command, naming two objects.
    pub copy: CopyCommand,
}

/// One ring draw on a deferred context: Map(WRITE_NO_OVERWRITE) of the ring, the draw's 64
/// bytes written at its stretch, Unmap, the command (R-M2).
#[inline(always)]
pub fn draw_ring(dc: &mut DeferredContext<NullDriver, NullKernel>, draw: RingDraw, n: u64) {
    let bytes = dc.map_no_overwrite(draw.ring).expect("map");
    let at = (n as usize * 64) % draw.bytes;
    bytes[at..at + 64].fill(black_box(n) as u8);
    dc.unmap(draw.ring).expect("unmap");
    dc.command(black_box(draw.copy)).expect("command");
}

/// Starts a ring's recording: Map(WRITE_DISCARD) of the whole ring, its first stretch
/// written, Unmap.
pub fn start_ring(dc: &mut DeferredContext<NullDriver, NullKernel>, draw: RingDraw) {
    dc.map_discard(draw.ring).expect("discard")[..64].fill(1);
    dc.unmap(draw.ring).expect("unmap");
}

/// A null device in list mode `mode` with a ring of `ring_bytes`, warmed by `frames` frames
/// of [`PER_LIST`] ring draws on its deferred context (each list starting the ring, finished,
/// executed, dropped and flushed), then the ring started in the next list and `started` ring
/// draws recorded into it.
pub fn warm_ring(
    mode: ListMode,
    ring_bytes: usize,
    frames: u64,
    started: u64,
) -> (
    DeferredContext<NullDriver, NullKernel>,
    ImmediateContext<NullDriver, NullKernel>,
    RingDraw,
) {
    let (device, mut ic) = null_device_in(mode, DeviceConfig::default()).expect("null device");
    let buffer = ResourceDesc {
        byte_size: 256,
        ..Default::default()
    };
    let ring = ResourceDesc {
        byte_size: ring_bytes as u64,
        bind: cmdlist::BindFlags::VERTEX_BUFFER,
        usage: Usage::Dynamic,
        ..Default::default()
    };
    let draw = RingDraw {
        ring: device.create_resource(ring).expect("ring"),
        bytes: ring_bytes,
        copy: CopyCommand {
            dst: device.create_resource(buffer).expect("dst"),
            src: device.create_resource(buffer).expect("src"),
        },
    };
    let mut dc = device.create_deferred_context().expect("dc");
    for _ in 0..frames {
        start_ring(&mut dc, draw);
        for n in 1..PER_LIST {
            draw_ring(&mut dc, draw, n);
        }
        let list = dc.finish().expect("finish");
        ic.execute_command_list(&list).expect("execute");
        drop(list);
        ic.flush().expect("flush");
        ic.end_frame().expect("end frame");
    }
    start_ring(&mut dc, draw);
    for n in 1..=started {
        draw_ring(&mut dc, draw, n);
    }
    (dc, ic, draw)
}
