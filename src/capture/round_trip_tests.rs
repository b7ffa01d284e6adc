//! A capture made and replayed through the soft driver, small enough for miri: the unsafe
//! code a capture adds (the Map's bytes read back at the next call, the Map's memory
//! handed out again after the capture noted it, a context's calls on a thread of its own).

use std::io::Write;
use std::sync::{Arc, Mutex};

use super::{replay_with, CaptureSink, ReplayOptions, ReplayThreads};
use crate::soft::{self, Gpu, SoftCommand, SoftConfig};
use crate::{BindFlags, DeviceConfig, ListMode, MapFlags, MapType, ResourceDesc, Usage};

#[derive(Clone, Default)]
struct Output(Arc<Mutex<Vec<u8>>>);

impl Write for Output {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn config(mode: ListMode) -> SoftConfig {
    SoftConfig {
        gpu: Gpu::Immediate,
        trace: false,
        ..SoftConfig::default()
    }
    .with_list_mode(mode)
}

#[test]
fn capture_round_trip_through_the_soft_driver() {
    for mode in [ListMode::Replayed, ListMode::DriverBuilt] {
        let output = Output::default();
        let sink = CaptureSink::new(output.clone()).unwrap();
        let device_config = DeviceConfig::default().with_capture(sink);
        let (device, mut ic, world) = soft::device(config(mode), device_config).unwrap();
        let desc = |usage, bind| ResourceDesc {
            byte_size: 32,
            usage,
            bind,
            ..Default::default()
        };
        let ring = device
            .create_resource(desc(Usage::Dynamic, BindFlags::VERTEX_BUFFER))
            .unwrap();
        let target = device
            .create_resource(desc(Usage::Default, BindFlags::empty()))
            .unwrap();
        let staging = device
            .create_resource(desc(Usage::Staging, BindFlags::empty()))
            .unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        dc.map_discard(ring).unwrap()[..8].fill(3);
        dc.unmap(ring).unwrap();
        // A Map whose bytes are recorded at a call that is not its Unmap.
        dc.map_no_overwrite(ring).unwrap()[8..16].fill(4);
        dc.command(SoftCommand::Copy {
            dst: target,
            src: ring,
        })
        .unwrap();
        let list = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
        drop(list);
        ic.map(staging, MapType::Write, MapFlags::empty()).unwrap()[..4].fill(5);
        ic.unmap(staging).unwrap();
        // A Map of the immediate context's whose bytes are recorded at another call.
        ic.map(staging, MapType::Write, MapFlags::empty()).unwrap()[4..8].fill(6);
        ic.end_frame().unwrap();
        ic.unmap(staging).unwrap();
        ic.flush().unwrap();
        let want = world.read(device.object(target).unwrap().allocation().unwrap());
        let bytes = output.0.lock().unwrap().clone();
        drop(dc);
        ic.destroy_device().unwrap();
        for threads in [ReplayThreads::One, ReplayThreads::PerContext] {
            let (device, mut ic, world) =
                soft::device(config(mode), DeviceConfig::default()).unwrap();
            let options = ReplayOptions::default().with_threads(threads);
            let report = replay_with(&bytes, &device, &mut ic, options).unwrap();
            let replayed = report.object(target).unwrap();
            let got = world.read(device.object(replayed).unwrap().allocation().unwrap());
            assert_eq!(got, want, "{mode:?} {threads:?}");
            assert_eq!(got.unwrap()[..16], [[3; 8], [4; 8]].concat()[..]);
            let replayed = report.object(staging).unwrap();
            let got = world.read(device.object(replayed).unwrap().allocation().unwrap());
            assert_eq!(got.unwrap()[..8], [5, 5, 5, 5, 6, 6, 6, 6]);
        }
    }
}
