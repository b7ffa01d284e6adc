//! The ring draw that `draw_ic` counts (R-M2, R-M3): a draw's constants appended with
//! Map(NO_OVERWRITE) into a dynamic vertex buffer the recording (or, on the immediate
//! context, the frame) discarded once, and the warm device it runs on.

use std::hint::black_box;

use cmdlist::handle::Resource;
use cmdlist::soft::null::{null_device_in, CopyCommand, NullDriver, NullKernel};
use cmdlist::{
    DeferredContext, DeviceConfig, Handle, ImmediateContext, ListMode, ResourceDesc, Usage,
};

use crate::draw::PER_LIST;

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

/// One ring draw on the immediate context: Map(WRITE_NO_OVERWRITE) of the ring (its own
/// memory, R-M3), the draw's 64 bytes written at its stretch, Unmap, the command.
#[inline(always)]
pub fn draw_ring_immediate(
    ic: &mut ImmediateContext<NullDriver, NullKernel>,
    draw: RingDraw,
    n: u64,
) {
    let bytes = ic.map_no_overwrite(draw.ring).expect("map");
    let at = (n as usize * 64) % draw.bytes;
    bytes[at..at + 64].fill(black_box(n) as u8);
    ic.unmap(draw.ring).expect("unmap");
    ic.command(black_box(&draw.copy)).expect("command");
}

/// Starts a ring's recording: Map(WRITE_DISCARD) of the whole ring, its first stretch
/// written, Unmap.
pub fn start_ring(dc: &mut DeferredContext<NullDriver, NullKernel>, draw: RingDraw) {
    dc.map_discard(draw.ring).expect("discard")[..64].fill(1);
    dc.unmap(draw.ring).expect("unmap");
}

/// Starts a ring on the immediate context: Map(WRITE_DISCARD) of the whole ring (a rename,
/// R-M5), its first stretch written, Unmap.
pub fn start_ring_immediate(ic: &mut ImmediateContext<NullDriver, NullKernel>, draw: RingDraw) {
    ic.map_discard(draw.ring).expect("discard")[..64].fill(1);
    ic.unmap(draw.ring).expect("unmap");
}

/// A null device in list mode `mode` with a ring of `ring_bytes`, warmed by `frames` frames
/// of [`PER_LIST`] ring draws on its deferred context (each list starting the ring, finished,
/// executed, dropped and flushed), then the ring started in the next list and `started` ring
/// draws recorded into it. `on_immediate`: the same on the immediate context, each frame
/// starting the ring and flushed.
pub fn warm_ring(
    mode: ListMode,
    ring_bytes: usize,
    on_immediate: bool,
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
    if on_immediate {
        for _ in 0..frames {
            start_ring_immediate(&mut ic, draw);
            for n in 1..PER_LIST {
                draw_ring_immediate(&mut ic, draw, n);
            }
            ic.flush().expect("flush");
            ic.end_frame().expect("end frame");
        }
        start_ring_immediate(&mut ic, draw);
        for n in 1..=started {
            draw_ring_immediate(&mut ic, draw, n);
        }
        return (dc, ic, draw);
    }
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
