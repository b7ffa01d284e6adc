//! # ring_and_readback: the two Map patterns every renderer has
//!
//! - **A NO_OVERWRITE ring** (R-M2, R-M3): a dynamic vertex buffer written 64 bytes at a
//!   time at the next offset with Map(NO_OVERWRITE), which hands out the buffer's memory
//!   without waiting for the GPU (the application writes only where no pending draw reads),
//!   and a Map(DISCARD) where it wraps, which gives the buffer new contents (memory the GPU
//!   is done with) so that the first offset may be written again. On the immediate context
//!   the ring is the buffer itself; on a deferred context a recording's first append must
//!   follow a discard of the same buffer in that recording (else `MapWithoutDiscard`), and
//!   the list lands as that discard with every append.
//! - **A staging readback** (R-M4): a GPU copy into a staging buffer, then Map(READ) with
//!   DO_NOT_WAIT polled until the GPU has finished the copy (`WasStillDrawing` until then;
//!   the poll flushes, so it makes progress), the bytes read, the Unmap.
//!
//! The soft driver's GPU here completes a buffer after six polls of its fence
//! ([`Gpu::PollLag`]); its default clock is manual, and a poll loop would spin until the
//! program completed the buffer itself ([`cmdlist::soft::SoftWorld::complete_all`]). The
//! run goes through the three list modes and checks every byte read back.
//!
//! Run it with `cargo run --example ring_and_readback` (it exits non-zero when a check
//! fails); `cargo test --example ring_and_readback` runs the same checks as a test.

use cmdlist::handle::Resource;
use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig, SoftDeferredContext, SoftImmediate};
use cmdlist::{
    BindFlags, DeviceConfig, Error, Handle, ListMode, MapFlags, MapType, ResourceDesc, Result,
    Usage,
};

/// The ring's size, and what one draw appends.
const RING: usize = 256;
const VERTICES: usize = 64;

/// The application's ring on one context: where the next append goes.
struct Ring {
    buffer: Handle<Resource>,
    offset: usize,
}

impl Ring {
    /// Writes one draw's vertices (`value` in every byte) at the next offset: Map(DISCARD)
    /// when the ring wraps, else Map(NO_OVERWRITE). Answers where they went.
    fn append_ic(&mut self, ic: &mut SoftImmediate, value: u8) -> Result<usize> {
        let bytes = if self.offset + VERTICES > RING {
            self.offset = 0;
            ic.map_discard(self.buffer)?
        } else {
            ic.map_no_overwrite(self.buffer)?
        };
        bytes[self.offset..self.offset + VERTICES].fill(value);
        ic.unmap(self.buffer)?;
        let at = self.offset;
        self.offset += VERTICES;
        Ok(at)
    }

    /// As [`Ring::append_ic`], on a deferred context, where the first append of a recording
    /// is a Map(DISCARD) (`fresh`): the recording does not know what the buffer holds.
    fn append_dc(&mut self, dc: &mut SoftDeferredContext, value: u8, fresh: bool) -> Result<usize> {
        let bytes = if fresh || self.offset + VERTICES > RING {
            self.offset = 0;
            dc.map_discard(self.buffer)?
        } else {
            dc.map_no_overwrite(self.buffer)?
        };
        bytes[self.offset..self.offset + VERTICES].fill(value);
        dc.unmap(self.buffer)?;
        let at = self.offset;
        self.offset += VERTICES;
        Ok(at)
    }
}

/// Copies `src` into a new staging buffer on the GPU and reads it back with Map(READ) and
/// DO_NOT_WAIT, polling until the copy is done. Answers the bytes and how many polls found
/// the GPU still drawing.
fn read_back(
    device: &soft::SoftDevice,
    ic: &mut SoftImmediate,
    src: Handle<Resource>,
) -> Result<(Vec<u8>, u32)> {
    let staging = device.create_resource(ResourceDesc {
        byte_size: RING as u64,
        usage: Usage::Staging,
        ..Default::default()
    })?;
    ic.command(&SoftCommand::Copy { dst: staging, src })?;
    let mut still_drawing = 0;
    let bytes = loop {
        match ic.map(staging, MapType::Read, MapFlags::DO_NOT_WAIT) {
            Ok(bytes) => break bytes.to_vec(),
            // The poll flushed what used the buffer: the GPU gets there.
            Err(Error::WasStillDrawing) => still_drawing += 1,
            Err(e) => return Err(e),
        }
        assert!(still_drawing < 1_000, "the GPU never finished the copy");
    };
    ic.unmap(staging)?;
    device.destroy(staging)?;
    Ok((bytes, still_drawing))
}

fn run_in(mode: ListMode) -> Result<()> {
    let config = SoftConfig {
        gpu: Gpu::PollLag(6),
        ..SoftConfig::default()
    }
    .with_list_mode(mode);
    let (device, mut ic, world) = soft::device(config, DeviceConfig::default())?;
    let vertex_buffer = || {
        device.create_resource(ResourceDesc {
            byte_size: RING as u64,
            usage: Usage::Dynamic,
            bind: BindFlags::VERTEX_BUFFER,
            ..Default::default()
        })
    };

    // The immediate context's ring: six draws in a four-draw ring, so it wraps once.
    let mut ring = Ring {
        buffer: vertex_buffer()?,
        offset: 0,
    };
    let mut expected = vec![0; RING];
    for draw in 1..=6u8 {
        let at = ring.append_ic(&mut ic, draw)?;
        if at == 0 {
            expected.fill(0); // a discard: the old contents are gone
        }
        expected[at..at + VERTICES].fill(draw);
    }
    let (bytes, polls) = read_back(&device, &mut ic, ring.buffer)?;
    assert_eq!(bytes, expected, "{mode:?}: the immediate context's ring");
    assert!(polls > 0, "{mode:?}: no poll found the copy still running");

    // A deferred context's ring, recorded on a thread of its own: a discard, then appends.
    let mut dc_ring = Ring {
        buffer: vertex_buffer()?,
        offset: 0,
    };
    let mut dc = device.create_deferred_context()?;
    let list = std::thread::scope(|scope| {
        scope
            .spawn(|| -> Result<_> {
                for draw in 1..=3u8 {
                    dc_ring.append_dc(&mut dc, 10 + draw, draw == 1)?;
                }
                dc.finish()
            })
            .join()
            .expect("the recording thread")
    })?;
    ic.execute_command_list(&list)?;
    let (bytes, _) = read_back(&device, &mut ic, dc_ring.buffer)?;
    let mut expected = vec![0; RING];
    for (draw, chunk) in expected.chunks_mut(VERTICES).take(3).enumerate() {
        chunk.fill(11 + draw as u8);
    }
    assert_eq!(bytes, expected, "{mode:?}: the deferred context's ring");

    // Without a discard earlier in the recording, NO_OVERWRITE is refused (R-M2).
    assert_eq!(
        dc.map_no_overwrite(dc_ring.buffer).map(drop),
        Err(Error::Application(cmdlist::AppError::MapWithoutDiscard))
    );
    drop((list, dc));
    ic.destroy_device()?;
    world.assert_clean();
    println!(
        "ring_and_readback: {mode:?}: both rings read back as written \
         ({polls} polls found the GPU still copying)"
    );
    Ok(())
}

fn run() -> Result<()> {
    ListMode::ALL.into_iter().try_for_each(run_in)
}

fn main() -> Result<()> {
    run()
}

#[test]
fn rings_and_readbacks_read_back_what_was_written() {
    run().expect("the run");
}
