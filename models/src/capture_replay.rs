//! The capture replayer against hostile captures (`cmdlist::capture::replay`): whatever the
//! bytes, a replay through the soft driver ends with a report or an error naming a record,
//! never a panic, and the calls it makes keep the protocol (the soft kernel sees no rule
//! broken) whatever they are.
//!
//! [`run`] replays `bytes` twice: as a file, and as frames made whole (the fuzzer's bytes cut
//! into records, each framed with its right checksum, a checkpoint after each), so that the
//! records' decoding and the replay's order are explored rather than the checksum. The first
//! byte chooses the list mode. A capture whose creates ask for more than [`MAX_BYTES`] is not
//! replayed: the soft kernel would make that memory (a harness limit, not the replayer's).

use cmdlist::capture::{self, write_header, Decoder, FrameReader, StreamBuffer, CHECKPOINT_STREAM};
use cmdlist::handle::AnyHandle;
use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig};
use cmdlist::ObjectDesc;
use cmdlist::{DeviceConfig, ListMode};

/// The most bytes the resources a replayed capture creates may ask for, in all.
pub const MAX_BYTES: u64 = 1 << 20;

/// Replays `bytes` as described in the module docs; panics on a broken rule.
pub fn run(bytes: &[u8]) {
    let Some((&first, rest)) = bytes.split_first() else {
        return;
    };
    let mode = ListMode::ALL[usize::from(first) % ListMode::ALL.len()];
    replay(rest, mode);
    replay(&frames_of(rest), mode);
}

/// A capture file of the records `bytes` spell: each a stream byte (0 the device's, 1 the
/// immediate context's, 2 and 3 deferred contexts', 255 a checkpoint), a kind byte, a
/// length byte and that many bytes of payload, framed whole. A checkpoint ends the file.
pub fn frames_of(bytes: &[u8]) -> Vec<u8> {
    let mut file = Vec::new();
    write_header(&mut file).expect("a Vec takes the header");
    let mut rest = bytes;
    while let [stream, kind, len, tail @ ..] = rest {
        let len = usize::from(*len).min(tail.len());
        let (payload, after) = tail.split_at(len);
        let stream = match stream {
            255 => CHECKPOINT_STREAM,
            s => u32::from(*s % 4),
        };
        let mut frames = StreamBuffer::new(stream);
        frames.push(u16::from(*kind), payload);
        frames.drain_to(&mut file).expect("a Vec takes the frames");
        rest = after;
    }
    let mut end = StreamBuffer::new(CHECKPOINT_STREAM);
    end.push(0, &[]);
    end.drain_to(&mut file).expect("a Vec takes the frames");
    file
}

/// The bytes the creates of `file` ask for, as far as they read.
fn asked_bytes(file: &[u8]) -> u64 {
    let Ok(reader) = FrameReader::new(file) else {
        return 0;
    };
    let mut total = 0u64;
    for frame in reader.map_while(Result::ok) {
        let mut same = |bits: u64| AnyHandle::from_bits(bits);
        let mut dec = Decoder::new(frame.payload, &mut same);
        let Ok(record) = capture::decode_record::<SoftCommand>(frame.kind, 0, &mut dec) else {
            continue;
        };
        let desc = match record.call {
            capture::Call::Create {
                desc: ObjectDesc::Resource(desc),
                ..
            }
            | capture::Call::CreatePrimary { desc, .. } => desc,
            _ => continue,
        };
        total = total.saturating_add(desc.byte_size);
    }
    total
}

fn replay(file: &[u8], mode: ListMode) {
    if asked_bytes(file) > MAX_BYTES {
        return;
    }
    let config = SoftConfig {
        gpu: Gpu::Immediate,
        trace: false,
        ..SoftConfig::default()
    }
    .with_list_mode(mode);
    let device_config = DeviceConfig::default().with_deferred_budget(1 << 20);
    let (device, mut ic, world) = soft::device(config, device_config).expect("a soft device");
    match capture::replay(file, &device, &mut ic) {
        Ok(report) => assert!(report.records <= file.len() as u64),
        Err(e) => {
            // Named and printable.
            let _ = e.to_string();
        }
    }
    assert!(
        world.violations().is_empty(),
        "{mode:?}: {:#?}",
        world.violations()
    );
    // The replay dropped its contexts and lists: the device goes, unless the capture
    // destroyed it.
    match ic.destroy_device() {
        Ok(()) | Err(cmdlist::Error::DeviceRemoved) => {}
        Err(e) => panic!("{mode:?}: destroying the device after a replay: {e}"),
    }
    let after = world.check_after_device_destroyed();
    assert!(after.is_empty(), "{mode:?}: {after:#?}");
}

/// A capture of a small scene, for seeds and tests: a deferred context streaming a ring
/// (discard, appends, a refused append), copying and updating; the immediate context
/// executing its lists, reading a staging copy back, writing, flushing; objects made and
/// destroyed; two frames.
pub fn sample_capture(mode: ListMode) -> Vec<u8> {
    use cmdlist::capture::CaptureSink;
    use cmdlist::{BindFlags, MapFlags, MapType, ResourceDesc, Usage};
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Output(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Output {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("the output").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let output = Output::default();
    let sink = CaptureSink::new(output.clone()).expect("a Vec takes the header");
    let config = SoftConfig {
        gpu: Gpu::Immediate,
        trace: false,
        ..SoftConfig::default()
    }
    .with_list_mode(mode);
    let (device, mut ic, _world) =
        soft::device(config, DeviceConfig::default().with_capture(sink)).expect("a device");
    let desc = |bytes, usage, bind| ResourceDesc {
        byte_size: bytes,
        usage,
        bind,
        ..Default::default()
    };
    let ring = device
        .create_resource(desc(64, Usage::Dynamic, BindFlags::VERTEX_BUFFER))
        .expect("a ring");
    let target = device
        .create_resource(desc(64, Usage::Default, BindFlags::empty()))
        .expect("a target");
    let staging = device
        .create_resource(desc(64, Usage::Staging, BindFlags::empty()))
        .expect("a staging buffer");
    let mut dc = device.create_deferred_context().expect("a context");
    for frame in 0..2u8 {
        let _ = dc.map_no_overwrite(ring).map(drop);
        dc.map_discard(ring).expect("a discard")[..16].fill(frame + 1);
        dc.unmap(ring).expect("an unmap");
        dc.map_no_overwrite(ring).expect("an append")[16..32].fill(frame + 2);
        dc.unmap(ring).expect("an unmap");
        let copy = SoftCommand::Copy {
            dst: target,
            src: ring,
        };
        dc.command(copy).expect("a copy");
        dc.update(target, 40, &[frame; 8]).expect("an update");
        let list = dc.finish().expect("a list");
        let churn = device
            .create_resource(desc(16, Usage::Default, BindFlags::empty()))
            .expect("an object");
        ic.execute_command_list(&list).expect("an execute");
        drop(list);
        let copy = SoftCommand::Copy {
            dst: staging,
            src: target,
        };
        ic.command(&copy).expect("a copy");
        device.destroy(churn).expect("a destroy");
        ic.flush().expect("a flush");
        let _ = ic
            .map(staging, MapType::Read, MapFlags::DO_NOT_WAIT)
            .map(drop);
        let _ = ic.unmap(staging);
        ic.map_discard(ring).expect("a discard")[32..].fill(frame + 3);
        ic.unmap(ring).expect("an unmap");
        ic.flush().expect("a flush");
    }
    drop(dc);
    ic.destroy_device().expect("the device destroyed");
    let bytes = output.0.lock().expect("the output").clone();
    bytes
}
