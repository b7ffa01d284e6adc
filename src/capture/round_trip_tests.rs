//! A capture made and replayed through the soft driver, small enough for miri: the unsafe
//! code a capture adds (a Map's bytes read back at its Unmap or a later call, the Map's
//! memory handed out again after the capture noted it, a context's calls on a thread of its
//! own).

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

/// As a C shim's application may (D3D lets it write through `pData` until the Unmap): Map
/// A, Map B, write A, write B, Unmap A, Unmap B, on the immediate context and on a deferred
/// one (unmapped the other way round there), through the pointers the Maps handed out. The
/// capture records each Map's bytes at its Unmap, so the replay leaves both resources with
/// every byte written.
#[test]
fn capture_round_trip_of_two_maps_written_through_their_pointers_out_of_order() {
    for mode in ListMode::ALL {
        let output = Output::default();
        let sink = CaptureSink::new(output.clone()).unwrap();
        let device_config = DeviceConfig::default().with_capture(sink);
        let (device, mut ic, world) = soft::device(config(mode), device_config).unwrap();
        let desc = |usage, bind| ResourceDesc {
            byte_size: 16,
            usage,
            bind,
            ..Default::default()
        };
        let dynamic = || {
            device
                .create_resource(desc(Usage::Dynamic, BindFlags::VERTEX_BUFFER))
                .unwrap()
        };
        let (a, b, c, d) = (dynamic(), dynamic(), dynamic(), dynamic());
        let targets: Vec<_> = (0..2)
            .map(|_| {
                device
                    .create_resource(desc(Usage::Default, BindFlags::empty()))
                    .unwrap()
            })
            .collect();
        let pa = ic.map_discard(a).unwrap().as_mut_ptr();
        let pb = ic.map_discard(b).unwrap().as_mut_ptr();
        // SAFETY: each Map's 16 bytes stay mapped, and are the application's, until its Unmap.
        unsafe {
            pa.write_bytes(1, 16);
            pb.write_bytes(2, 16);
        }
        ic.unmap(a).unwrap();
        ic.unmap(b).unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        let pc = dc.map_discard(c).unwrap().as_mut_ptr();
        let pd = dc.map_discard(d).unwrap().as_mut_ptr();
        // SAFETY: as above, on the deferred context.
        unsafe {
            pc.write_bytes(3, 8);
            pd.write_bytes(4, 16);
            pc.add(8).write_bytes(5, 8);
        }
        dc.unmap(d).unwrap();
        dc.unmap(c).unwrap();
        for (dst, src) in targets.iter().zip([c, d]) {
            dc.command(SoftCommand::Copy { dst: *dst, src }).unwrap();
        }
        let list = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
        drop(list);
        ic.flush().unwrap();
        let read = |world: &soft::SoftWorld, device: &soft::SoftDevice, r| {
            world
                .read(device.object(r).unwrap().allocation().unwrap())
                .unwrap()
        };
        let kept = [a, b, targets[0], targets[1]];
        let want: Vec<Vec<u8>> = kept.iter().map(|&r| read(&world, &device, r)).collect();
        assert_eq!(want[0], [1; 16], "{mode:?}");
        assert_eq!(want[2], [[3; 8], [5; 8]].concat(), "{mode:?}");
        let bytes = output.0.lock().unwrap().clone();
        drop(dc);
        ic.destroy_device().unwrap();
        let (device, mut ic, world) = soft::device(config(mode), DeviceConfig::default()).unwrap();
        let report = replay_with(&bytes, &device, &mut ic, ReplayOptions::default()).unwrap();
        for (captured, want) in kept.iter().zip(&want) {
            let replayed = report.object(*captured).unwrap();
            assert_eq!(&read(&world, &device, replayed), want, "{mode:?}");
        }
    }
}
