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
    warm_device_with(mode, on_immediate, started, DeviceConfig::default())
}

/// [`warm_device`] with the device made from `config`.
pub fn warm_device_with(
    mode: ListMode,
    on_immediate: bool,
    started: u64,
    config: DeviceConfig,
) -> (
    DeferredContext<NullDriver, NullKernel>,
    ImmediateContext<NullDriver, NullKernel>,
    Draw,
) {
    let (device, mut ic) = null_device_in(mode, config).expect("null device");
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
