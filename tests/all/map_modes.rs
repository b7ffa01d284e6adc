//! CPU access beyond Map(DISCARD) (R-M1..R-M3): Map(NO_OVERWRITE) on a deferred context,
//! after a discard of the same resource in the recording, in every list mode, as Wine's
//! `test_deferred_context_map` and `test_dynamic_map_synchronization` use it.

use std::sync::Arc;

use cmdlist::dxgi::DisplayFormat;
use cmdlist::handle::Resource;
use cmdlist::soft::{self, Gpu, Hook, SoftConfig, SoftDevice, SoftImmediate, SoftWorld};
use cmdlist::{
    AppError, BindFlags, DeviceConfig, Handle, ListMode, MapCaps, ResourceDesc, Texture2d, Usage,
};

use crate::common::{allocation, app, count, events_of};
use cmdlist::Error;

fn setup(mode: ListMode, map_caps: MapCaps) -> (SoftDevice, SoftImmediate, Arc<SoftWorld>) {
    let config = SoftConfig {
        gpu: Gpu::Immediate,
        map_caps,
        ..SoftConfig::from_env().unwrap()
    }
    .with_list_mode(mode);
    soft::device(config, DeviceConfig::default()).unwrap()
}

/// A dynamic buffer of `bytes` bytes bound as `bind`.
fn dynamic(bytes: u64, bind: BindFlags) -> ResourceDesc {
    ResourceDesc {
        byte_size: bytes,
        bind,
        usage: Usage::Dynamic,
        ..Default::default()
    }
}

fn ring(device: &SoftDevice) -> Handle<Resource> {
    device
        .create_resource(dynamic(64, BindFlags::VERTEX_BUFFER))
        .unwrap()
}

/// A ring on a deferred context: one Map(DISCARD), then Map(NO_OVERWRITE)s that find what
/// was written before and append after it. Executed (twice), the list leaves the resource
/// with the discard and every later write, in every list mode; the driver heard each Map.
#[test]
fn r_m2_a_deferred_ring_lands_as_its_discard_with_every_append() {
    for mode in ListMode::ALL {
        let (device, mut ic, world) = setup(mode, MapCaps::empty());
        let r = ring(&device);
        let mut dc = device.create_deferred_context().unwrap();
        dc.map_discard(r).unwrap()[..16].fill(1);
        dc.unmap(r).unwrap();
        for (i, value) in [2u8, 3].into_iter().enumerate() {
            let bytes = dc.map_no_overwrite(r).unwrap();
            assert_eq!(bytes.len(), 64, "{mode:?}");
            assert!(
                bytes[..16].iter().all(|&b| b == 1),
                "{mode:?}: contents kept"
            );
            let at = 16 * (i + 1);
            bytes[at..at + 16].fill(value);
            dc.unmap(r).unwrap();
        }
        // Left mapped: Finish's Unmap (R-C4) records nothing more, the bytes are there.
        dc.map_no_overwrite(r).unwrap()[48..].fill(4);
        let operations = dc.stats().operations;
        let list = dc.finish().unwrap();
        assert_eq!(operations, 1, "{mode:?}: the discard's operation only");
        let expected: Vec<u8> = [1u8, 2, 3, 4].iter().flat_map(|&v| [v; 16]).collect();
        for _ in 0..2 {
            ic.update(r, 0, &[9; 64]).unwrap();
            ic.execute_command_list(&list).unwrap();
            ic.flush().unwrap();
            assert_eq!(
                world.read(allocation(&device, r)),
                Some(expected.clone()),
                "{mode:?}"
            );
        }
        if mode.has_driver_lists() {
            let events = events_of(&world, dc.id());
            let heard = match mode {
                ListMode::DriverBuilt => count(&events, Hook::MapNoOverwriteDeferred),
                _ => events
                    .iter()
                    .filter(|e| e.hook == Hook::RecordDeferred)
                    .count()
                    .saturating_sub(5), // the discard's Map and four Unmaps
            };
            assert_eq!(heard, 3, "{mode:?}: each Map(NO_OVERWRITE) heard");
        }
        assert!(
            world.violations().is_empty(),
            "{mode:?}: {:#?}",
            world.violations()
        );
        drop((list, dc));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// A ring discarded again after its appends (R-M2): the appends that follow find the new
/// discard's bytes, not the first's, and the list lands as the second discard with its
/// appends, in every list mode, however many rings the recording streams through.
#[test]
fn r_m2_a_ring_discarded_again_appends_to_its_new_discard() {
    for mode in ListMode::ALL {
        let (device, mut ic, world) = setup(mode, MapCaps::empty());
        let (r, other) = (ring(&device), ring(&device));
        let mut dc = device.create_deferred_context().unwrap();
        for (resource, value) in [(r, 1u8), (other, 7)] {
            dc.map_discard(resource).unwrap()[..16].fill(value);
            dc.unmap(resource).unwrap();
            dc.map_no_overwrite(resource).unwrap()[16..32].fill(value + 1);
            dc.unmap(resource).unwrap();
        }
        dc.map_discard(r).unwrap()[..16].fill(3);
        dc.unmap(r).unwrap();
        let bytes = dc.map_no_overwrite(r).unwrap();
        assert!(
            bytes[..16].iter().all(|&b| b == 3),
            "{mode:?}: the new discard"
        );
        bytes[32..48].fill(4);
        dc.unmap(r).unwrap();
        dc.map_no_overwrite(other).unwrap()[32..48].fill(9);
        dc.unmap(other).unwrap();
        let list = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
        let read = |h| world.read(allocation(&device, h)).unwrap();
        let first = read(r);
        assert_eq!(&first[..16], &[3; 16], "{mode:?}");
        assert_eq!(&first[32..48], &[4; 16], "{mode:?}");
        if mode.replays() {
            // A discard's bytes are new arena bytes (a new device's: zero), never the first
            // discard's: nothing of it is left.
            assert_eq!(&first[16..32], &[0; 16], "{mode:?}");
        }
        let second = read(other);
        assert_eq!(&second[..48], &[[7; 16], [8; 16], [9; 16]].concat()[..]);
        drop((list, dc));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// Every ring of a recording discarded again appends to its own new discard (R-M2), not
/// only the first ring: three rings are discarded one after the other before any append (so
/// each first append finds its own discard, not the recording's last), then the second and
/// the third are discarded again, in reverse order. The appends that follow find each ring's
/// new discard, the first ring keeps its own, and the list lands as each ring's last discard
/// with the appends made after it, in every list mode.
#[test]
fn r_m2_every_ring_of_a_recording_discarded_again_appends_to_its_new_discard() {
    for mode in ListMode::ALL {
        let (device, mut ic, world) = setup(mode, MapCaps::empty());
        let rings = [ring(&device), ring(&device), ring(&device)];
        let mut dc = device.create_deferred_context().unwrap();
        // Ring i's first discard writes 10(i+1), its first append 10(i+1)+1.
        let first = |i: usize| 10 * (i as u8 + 1);
        for (i, &r) in rings.iter().enumerate() {
            dc.map_discard(r).unwrap()[..16].fill(first(i));
            dc.unmap(r).unwrap();
        }
        for (i, &r) in rings.iter().enumerate() {
            let bytes = dc.map_no_overwrite(r).unwrap();
            assert_eq!(
                &bytes[..16],
                &[first(i); 16],
                "{mode:?}: ring {i}'s discard"
            );
            bytes[16..32].fill(first(i) + 1);
            dc.unmap(r).unwrap();
        }
        // The second and the third discarded again: 10(i+1)+5.
        let renewed = |i: usize| first(i) + 5;
        for (i, &r) in rings.iter().enumerate().skip(1).rev() {
            dc.map_discard(r).unwrap()[..16].fill(renewed(i));
            dc.unmap(r).unwrap();
        }
        // Each ring's next append: 10(i+1)+2 at 32..48.
        for (i, &r) in rings.iter().enumerate() {
            let bytes = dc.map_no_overwrite(r).unwrap();
            let head = if i == 0 { first(i) } else { renewed(i) };
            assert_eq!(
                &bytes[..16],
                &[head; 16],
                "{mode:?}: ring {i}'s last discard"
            );
            if i > 0 && mode.replays() {
                // New arena bytes (a new device's: zero), not the first discard's.
                assert_eq!(&bytes[16..32], &[0; 16], "{mode:?}: ring {i}, new bytes");
            }
            bytes[32..48].fill(first(i) + 2);
            dc.unmap(r).unwrap();
        }
        let list = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
        for (i, &r) in rings.iter().enumerate() {
            let landed = world.read(allocation(&device, r)).unwrap();
            let head = if i == 0 { first(i) } else { renewed(i) };
            assert_eq!(&landed[..16], &[head; 16], "{mode:?}: ring {i}");
            assert_eq!(&landed[32..48], &[first(i) + 2; 16], "{mode:?}: ring {i}");
            let appended = match i {
                0 => Some(first(i) + 1),
                // The second discard's new arena bytes: nothing of the first is left.
                _ if mode.replays() => Some(0),
                _ => None,
            };
            if let Some(value) = appended {
                assert_eq!(&landed[16..32], &[value; 16], "{mode:?}: ring {i}");
            }
        }
        assert!(
            world.violations().is_empty(),
            "{mode:?}: {:#?}",
            world.violations()
        );
        drop((list, dc));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// Map(NO_OVERWRITE) needs a discard of the resource earlier in the same recording (R-M2):
/// without one, or after one in an earlier recording, it is refused with
/// `MapWithoutDiscard`, nothing is recorded and the driver hears nothing; the next discard
/// makes it valid again. A second discard in the recording is the one handed out.
#[test]
fn r_m2_no_overwrite_without_a_discard_in_the_recording_is_refused_unheard() {
    for mode in ListMode::ALL {
        let (device, mut ic, world) = setup(mode, MapCaps::empty());
        let r = ring(&device);
        let mut dc = device.create_deferred_context().unwrap();
        let heard = |world: &SoftWorld, dc: &cmdlist::soft::SoftDeferredContext| {
            events_of(world, dc.id()).len()
        };
        let before = heard(&world, &dc);
        assert_eq!(
            dc.map_no_overwrite(r).map(drop),
            Err(app(AppError::MapWithoutDiscard)),
            "{mode:?}"
        );
        assert_eq!(heard(&world, &dc), before, "{mode:?}: nothing heard");
        assert_eq!(dc.stats().operations, 0);
        dc.map_discard(r).unwrap().fill(1);
        dc.unmap(r).unwrap();
        dc.map_discard(r).unwrap().fill(2);
        dc.unmap(r).unwrap();
        assert!(dc.map_no_overwrite(r).unwrap().iter().all(|&b| b == 2));
        dc.unmap(r).unwrap();
        let list = dc.finish().unwrap();
        // The next recording has not discarded it.
        assert_eq!(
            dc.map_no_overwrite(r).map(drop),
            Err(app(AppError::MapWithoutDiscard)),
            "{mode:?}"
        );
        // A discard on the immediate context does not count either.
        ic.map_discard(r).unwrap().fill(5);
        ic.unmap(r).unwrap();
        assert_eq!(
            dc.map_no_overwrite(r).map(drop),
            Err(app(AppError::MapWithoutDiscard)),
            "{mode:?}"
        );
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
        assert_eq!(world.read(allocation(&device, r)), Some(vec![2; 64]));
        drop((list, dc));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// A recording's rings, and what it discarded, go with it (R-M2): after a ring (a discard
/// and an append) and a discard with no append, an abandon leaves neither resource valid
/// for Map(NO_OVERWRITE), nor does a Finish for the next recording, even one that records
/// into the recycled memory of the finished list: each is refused with `MapWithoutDiscard`,
/// unheard, in every list mode.
#[test]
fn r_m2_rings_and_discards_are_forgotten_at_abandon_and_in_a_recycled_recording() {
    for mode in ListMode::ALL {
        let (device, mut ic, world) = setup(mode, MapCaps::empty());
        let (r, s) = (ring(&device), ring(&device));
        let mut dc = device.create_deferred_context().unwrap();
        let record = |dc: &mut cmdlist::soft::SoftDeferredContext| {
            dc.map_discard(r).unwrap().fill(1);
            dc.unmap(r).unwrap();
            dc.map_no_overwrite(r).unwrap()[..8].fill(2);
            dc.unmap(r).unwrap();
            dc.map_discard(s).unwrap().fill(3);
            dc.unmap(s).unwrap();
        };
        let refused = |dc: &mut cmdlist::soft::SoftDeferredContext, when: &str| {
            let before = events_of(&world, dc.id()).len();
            for resource in [r, s] {
                assert_eq!(
                    dc.map_no_overwrite(resource).map(drop),
                    Err(app(AppError::MapWithoutDiscard)),
                    "{mode:?}: {when}"
                );
            }
            assert_eq!(
                events_of(&world, dc.id()).len(),
                before,
                "{mode:?}: unheard"
            );
        };
        record(&mut dc);
        dc.abandon().unwrap();
        refused(&mut dc, "after an abandon");
        // A list made, then destroyed: the next Finish recycles it, and its cleared
        // recording becomes the context's.
        record(&mut dc);
        drop(dc.finish().unwrap());
        refused(&mut dc, "in the next recording");
        let list = dc.finish().unwrap();
        assert!(dc.stats().recycled >= 1, "{mode:?}: {:?}", dc.stats());
        refused(&mut dc, "in the recycled recording");
        // A discard of its own makes it valid again.
        dc.map_discard(s).unwrap().fill(4);
        dc.unmap(s).unwrap();
        assert!(dc.map_no_overwrite(s).unwrap().iter().all(|&b| b == 4));
        dc.unmap(s).unwrap();
        let last = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
        ic.execute_command_list(&last).unwrap();
        ic.flush().unwrap();
        assert_eq!(world.read(allocation(&device, r)), Some(vec![0; 64]));
        assert_eq!(world.read(allocation(&device, s)), Some(vec![4; 64]));
        assert!(
            world.violations().is_empty(),
            "{mode:?}: {:#?}",
            world.violations()
        );
        drop((list, last, dc));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// A discard in a list that the recording executes is not the recording's own (R-M2: a
/// discard in an earlier list does not count): after a deferred context executes a finished
/// list that discarded a resource (a nested list, R-C3), Map(NO_OVERWRITE) of that resource
/// is refused with `MapWithoutDiscard`, unheard, in every list mode alike (where the driver
/// builds its lists, it chains the inner list, whose discard is no more the outer
/// recording's). A discard of the outer recording's own makes it valid, and the outer list
/// lands as the inner discard, then the outer discard with its append.
#[test]
fn r_m2_a_discard_in_an_executed_list_does_not_count_for_no_overwrite() {
    for mode in ListMode::ALL {
        let (device, mut ic, world) = setup(mode, MapCaps::empty());
        let r = ring(&device);
        let mut inner_dc = device.create_deferred_context().unwrap();
        inner_dc.map_discard(r).unwrap().fill(1);
        inner_dc.unmap(r).unwrap();
        inner_dc.map_no_overwrite(r).unwrap()[..8].fill(2);
        inner_dc.unmap(r).unwrap();
        let inner = inner_dc.finish().unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        dc.execute_command_list(&inner).unwrap();
        let before = events_of(&world, dc.id()).len();
        assert_eq!(
            dc.map_no_overwrite(r).map(drop),
            Err(app(AppError::MapWithoutDiscard)),
            "{mode:?}"
        );
        assert_eq!(
            events_of(&world, dc.id()).len(),
            before,
            "{mode:?}: unheard"
        );
        dc.map_discard(r).unwrap()[..16].fill(5);
        dc.unmap(r).unwrap();
        let bytes = dc.map_no_overwrite(r).unwrap();
        assert_eq!(&bytes[..16], &[5; 16], "{mode:?}: the outer discard");
        bytes[16..32].fill(6);
        dc.unmap(r).unwrap();
        let outer = dc.finish().unwrap();
        ic.execute_command_list(&outer).unwrap();
        ic.flush().unwrap();
        let landed = world.read(allocation(&device, r)).unwrap();
        assert_eq!(&landed[..32], &[[5; 16], [6; 16]].concat()[..], "{mode:?}");
        if mode.replays() {
            assert_eq!(
                &landed[32..],
                &[0; 32],
                "{mode:?}: the outer discard's zeroes"
            );
        }
        assert!(
            world.violations().is_empty(),
            "{mode:?}: {:#?}",
            world.violations()
        );
        drop((inner, outer, inner_dc, dc));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// A Map(NO_OVERWRITE) that runs out of memory (R-E3; here the replay limit, which the
/// Unmap it owes would pass) removes the context as any call does and, as a Map must hand
/// out memory, hands out scratch bytes of the resource's size, in every list mode: the error
/// goes to the context's sink, Finish answers out of memory once, and neither the scratch
/// nor the discard before it reaches the resource.
#[test]
fn r_m2_r_e3_a_no_overwrite_that_runs_out_of_memory_hands_out_scratch() {
    use cmdlist::ContextId;
    for mode in ListMode::ALL {
        let config = SoftConfig {
            gpu: Gpu::Immediate,
            map_caps: MapCaps::empty(),
            ..SoftConfig::from_env().unwrap()
        }
        .with_list_mode(mode);
        let device_config = DeviceConfig::default().with_replay_limit(1);
        let (device, mut ic, world) = soft::device(config, device_config).unwrap();
        let r = ring(&device);
        let mut dc = device.create_deferred_context().unwrap();
        dc.map_discard(r).unwrap().fill(1);
        dc.unmap(r).unwrap();
        let mapped = dc.map_no_overwrite(r).map(|bytes| {
            bytes.fill(2);
            bytes.len()
        });
        assert_eq!(mapped, Ok(64), "{mode:?}: scratch of the resource's size");
        assert!(dc.is_removed(), "{mode:?}");
        assert_eq!(
            world.errors(),
            [(ContextId::Deferred(dc.id()), Error::OutOfMemory)],
            "{mode:?}"
        );
        assert_eq!(dc.finish().map(drop), Err(Error::OutOfMemory), "{mode:?}");
        ic.flush().unwrap();
        assert_eq!(world.read(allocation(&device, r)), Some(vec![0; 64]));
        assert!(
            world.violations().is_empty(),
            "{mode:?}: {:#?}",
            world.violations()
        );
        drop(dc);
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// R-M3: Map(NO_OVERWRITE) takes dynamic buffers only: vertex and index buffers always,
/// constant buffers and buffers bound as shader resources only where the driver's caps say
/// so (D3D11.1); a texture, a resource that is not dynamic, or a buffer bound in a way the
/// caps leave out is refused with `NotMappable` (after its discard, so that only the
/// resource is at fault). A resource still mapped is refused as any second Map (R-C4).
#[test]
fn r_m3_no_overwrite_takes_the_buffers_the_caps_allow() {
    let texture = ResourceDesc {
        usage: Usage::Dynamic,
        ..ResourceDesc::texture(
            Texture2d {
                width: 4,
                height: 4,
                array_size: 1,
                mip_levels: 1,
                samples: 1,
                format: DisplayFormat::B8G8R8A8Unorm.to_dxgi(),
            },
            BindFlags::SHADER_RESOURCE,
        )
        .unwrap()
    };
    let cases = [
        (
            dynamic(64, BindFlags::VERTEX_BUFFER),
            MapCaps::empty(),
            true,
        ),
        (dynamic(64, BindFlags::INDEX_BUFFER), MapCaps::empty(), true),
        (
            dynamic(64, BindFlags::CONSTANT_BUFFER),
            MapCaps::empty(),
            false,
        ),
        (
            dynamic(64, BindFlags::CONSTANT_BUFFER),
            MapCaps::NO_OVERWRITE_CONSTANT_BUFFER,
            true,
        ),
        (
            dynamic(64, BindFlags::SHADER_RESOURCE),
            MapCaps::empty(),
            false,
        ),
        (
            dynamic(64, BindFlags::SHADER_RESOURCE),
            MapCaps::NO_OVERWRITE_BUFFER_SRV,
            true,
        ),
        (
            dynamic(64, BindFlags::VERTEX_BUFFER | BindFlags::SHADER_RESOURCE),
            MapCaps::NO_OVERWRITE_CONSTANT_BUFFER,
            false,
        ),
        (dynamic(64, BindFlags::empty()), MapCaps::all(), false),
        (texture, MapCaps::all(), false),
    ];
    for mode in ListMode::ALL {
        for (desc, caps, allowed) in cases {
            let (device, mut ic, world) = setup(mode, caps);
            let r = device.create_resource(desc).unwrap();
            let mut dc = device.create_deferred_context().unwrap();
            dc.map_discard(r).unwrap();
            let mapped = dc.map_no_overwrite(r).map(drop);
            assert_eq!(mapped, Err(app(AppError::InvalidState)), "still mapped");
            dc.unmap(r).unwrap();
            let expected = match allowed {
                true => Ok(()),
                false => Err(app(AppError::NotMappable)),
            };
            let case = (mode, desc.bind, caps);
            assert_eq!(dc.map_no_overwrite(r).map(drop), expected, "{case:?}");
            drop(dc);
            ic.destroy_device().unwrap();
            world.assert_clean();
        }
    }
    // Not dynamic: no discard either, and no NO_OVERWRITE.
    let (device, mut ic, world) = setup(ListMode::Replayed, MapCaps::all());
    let plain = device
        .create_resource(ResourceDesc {
            byte_size: 64,
            bind: BindFlags::VERTEX_BUFFER,
            ..Default::default()
        })
        .unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    assert_eq!(
        dc.map_no_overwrite(plain).map(drop),
        Err(app(AppError::NotMappable))
    );
    drop(dc);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// R-M1: a deferred context takes WRITE_DISCARD and WRITE_NO_OVERWRITE only; READ, WRITE and
/// READ_WRITE (a C shim's ResourceMap passes them on) are refused with `NotMappable`,
/// reported, recorded nowhere and heard by no driver hook, in every list mode.
#[test]
fn r_m1_a_deferred_context_refuses_read_and_write_maps_unheard() {
    use cmdlist::MapType;
    for mode in ListMode::ALL {
        let (device, mut ic, world) = setup(mode, MapCaps::empty());
        let r = ring(&device);
        let mut dc = device.create_deferred_context().unwrap();
        let before = events_of(&world, dc.id()).len();
        for ty in [MapType::Read, MapType::Write, MapType::ReadWrite] {
            assert_eq!(
                dc.map(r, ty).map(drop),
                Err(app(AppError::NotMappable)),
                "{mode:?} {ty:?}"
            );
        }
        assert_eq!(
            events_of(&world, dc.id()).len(),
            before,
            "{mode:?}: unheard"
        );
        assert_eq!(dc.stats().operations, 0);
        let reported = world
            .errors()
            .iter()
            .filter(|(_, e)| *e == app(AppError::NotMappable))
            .count();
        assert_eq!(reported, 3, "{mode:?}: each reported (R-E2)");
        dc.map(r, MapType::WriteDiscard).unwrap().fill(7);
        dc.unmap(r).unwrap();
        assert!(dc
            .map(r, MapType::WriteNoOverwrite)
            .unwrap()
            .iter()
            .all(|&b| b == 7));
        dc.unmap(r).unwrap();
        drop(dc);
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// A staging resource of `bytes` bytes.
fn staging(bytes: u64) -> ResourceDesc {
    ResourceDesc {
        byte_size: bytes,
        usage: Usage::Staging,
        ..Default::default()
    }
}

/// A soft device whose GPU completes buffers only when told (or waited for), with D3D11.0's
/// Map types only.
fn manual() -> (SoftDevice, SoftImmediate, Arc<SoftWorld>) {
    let config = SoftConfig {
        gpu: Gpu::Manual,
        map_caps: MapCaps::empty(),
        ..SoftConfig::from_env().unwrap()
    };
    soft::device(config, DeviceConfig::default()).unwrap()
}

/// A readback (R-M4): the GPU copies into a staging resource in the open buffer; Map(READ)
/// flushes that buffer, waits for its fence (not for a later buffer that does not use the
/// resource) and hands out the copied bytes; the kernel never locked memory a running buffer
/// uses (the soft kernel checks).
#[test]
fn r_m4_a_staging_read_flushes_and_waits_for_the_newest_buffer_that_uses_it() {
    use cmdlist::soft::SoftCommand;
    use cmdlist::{MapFlags, MapType};
    let (device, mut ic, world) = manual();
    let src = device.create_resource(crate::common::buffer(16)).unwrap();
    let other = device.create_resource(crate::common::buffer(16)).unwrap();
    let readback = device.create_resource(staging(16)).unwrap();
    assert!(
        !ic.resource_is_busy(readback).unwrap(),
        "no buffer used it yet (nothing completed either)"
    );
    ic.update(src, 0, &[7; 16]).unwrap();
    ic.command(&SoftCommand::Copy { dst: readback, src })
        .unwrap();
    assert!(
        ic.resource_is_busy(readback).unwrap(),
        "the open buffer uses it"
    );
    let bytes = ic.map(readback, MapType::Read, MapFlags::empty()).unwrap();
    assert_eq!(bytes, &[7; 16]);
    ic.unmap(readback).unwrap();
    assert_eq!(world.completed(), 1, "waited for buffer 1");
    // A later buffer that does not use it is not waited for.
    ic.update(other, 0, &[1; 16]).unwrap();
    ic.flush().unwrap();
    ic.map(readback, MapType::Read, MapFlags::empty()).unwrap();
    ic.unmap(readback).unwrap();
    assert_eq!(world.completed(), 1, "buffer 2 still running");
    assert!(!ic.resource_is_busy(readback).unwrap());
    let events = world.trace();
    assert_eq!(count(&events, Hook::Lock), 2);
    assert_eq!(count(&events, Hook::Unlock), 2);
    assert!(world.violations().is_empty(), "{:#?}", world.violations());
    world.complete_all();
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// Of two buffers the GPU has not finished, only the newer uses the staging resource (R-M4):
/// a staging Map waits for that newer buffer, not only for the oldest one running, whether
/// the newer is submitted already or still open (flushed first); it hands out the bytes the
/// newer buffer copied, and the kernel never locked memory a running buffer uses.
#[test]
fn r_m4_a_staging_map_waits_for_the_newer_of_two_running_buffers() {
    use cmdlist::soft::SoftCommand;
    use cmdlist::{MapFlags, MapType};
    for submitted in [true, false] {
        let (device, mut ic, world) = manual();
        let src = device.create_resource(crate::common::buffer(16)).unwrap();
        let other = device.create_resource(crate::common::buffer(16)).unwrap();
        let readback = device.create_resource(staging(16)).unwrap();
        // Buffer 1: the source's contents and a copy elsewhere; the readback unused.
        ic.update(src, 0, &[7; 16]).unwrap();
        ic.command(&SoftCommand::Copy { dst: other, src }).unwrap();
        ic.flush().unwrap();
        // Buffer 2: the copy into the readback.
        ic.command(&SoftCommand::Copy { dst: readback, src })
            .unwrap();
        if submitted {
            ic.flush().unwrap();
        }
        assert_eq!(world.completed(), 0, "both running");
        let bytes = ic.map(readback, MapType::Read, MapFlags::empty()).unwrap();
        assert_eq!(bytes, &[7; 16], "submitted {submitted}: buffer 2's copy");
        ic.unmap(readback).unwrap();
        assert_eq!(world.submits(), 2, "submitted {submitted}");
        assert_eq!(
            world.completed(),
            2,
            "submitted {submitted}: buffer 2 waited for"
        );
        assert!(
            world.violations().is_empty(),
            "submitted {submitted}: {:#?}",
            world.violations()
        );
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// A Map asks the kernel about the GPU only while it must (R-M3, R-M4): once the GPU has
/// finished the buffer a staging Map (the newest that uses the resource) or a
/// Map(NO_OVERWRITE) (the one that carries the resource's last discard) depends on, the
/// first such Map polls the completed fence once and waits for nothing, and the Maps after
/// it, the context knowing that buffer complete, neither poll nor wait: a ring's appends
/// and a polled readback cost no kernel call but the lock. Whichever Map comes first.
#[test]
fn r_m3_r_m4_a_map_whose_buffer_is_done_polls_once_and_waits_for_nothing() {
    use cmdlist::soft::inject::{self, FaultPlan};
    use cmdlist::soft::SoftCommand;
    use cmdlist::{Device, MapFlags, MapType};
    for staging_first in [false, true] {
        let plan = Arc::new(FaultPlan::counting().with_log());
        let config = SoftConfig {
            gpu: Gpu::Manual,
            map_caps: MapCaps::empty(),
            ..SoftConfig::from_env().unwrap()
        };
        let (driver, kernel, world) = inject::new(&plan, config);
        let (device, mut ic) = Device::new(driver, kernel, DeviceConfig::default()).unwrap();
        let src = device.create_resource(crate::common::buffer(16)).unwrap();
        let readback = device.create_resource(staging(16)).unwrap();
        let ring = device
            .create_resource(dynamic(16, BindFlags::VERTEX_BUFFER))
            .unwrap();
        // Buffer 1: a copy into the readback and a discard of the ring; the GPU finishes it
        // without the context looking.
        ic.update(src, 0, &[7; 16]).unwrap();
        ic.command(&SoftCommand::Copy { dst: readback, src })
            .unwrap();
        ic.map_discard(ring).unwrap().fill(1);
        ic.unmap(ring).unwrap();
        ic.flush().unwrap();
        world.complete_all();
        let from = plan.log().len();
        for round in 0..2 {
            for staging_map in [staging_first, !staging_first] {
                let case = (staging_first, round, staging_map);
                if staging_map {
                    let bytes = ic.map(readback, MapType::Read, MapFlags::empty()).unwrap();
                    assert_eq!(bytes, &[7; 16], "{case:?}");
                    ic.unmap(readback).unwrap();
                } else {
                    let bytes = ic.map_no_overwrite(ring).unwrap();
                    assert_eq!(bytes, &[1; 16], "{case:?}");
                    ic.unmap(ring).unwrap();
                }
            }
        }
        let log = plan.log();
        let asked = |hook: &str| log[from..].iter().filter(|&&h| h == hook).count();
        let case = (staging_first, &log[from..]);
        assert_eq!(asked("completed_fence"), 1, "{case:?}: one poll");
        assert_eq!(asked("wait_for_fence"), 0, "{case:?}: no wait");
        assert_eq!(asked("lock"), 4, "{case:?}");
        assert!(world.violations().is_empty(), "{:#?}", world.violations());
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// DO_NOT_WAIT (R-M4): while the GPU has not finished the buffer that uses the staging
/// resource, the Map answers `WasStillDrawing`, maps nothing and waits for nothing (the open
/// buffer is flushed once, so polling makes progress); once the buffer completed, it maps.
#[test]
fn r_m4_do_not_wait_answers_was_still_drawing_until_the_gpu_is_done() {
    use cmdlist::soft::SoftCommand;
    use cmdlist::{MapFlags, MapType};
    let (device, mut ic, world) = manual();
    let src = device.create_resource(crate::common::buffer(8)).unwrap();
    let readback = device.create_resource(staging(8)).unwrap();
    ic.update(src, 0, &[3; 8]).unwrap();
    ic.command(&SoftCommand::Copy { dst: readback, src })
        .unwrap();
    for _ in 0..3 {
        assert_eq!(
            ic.map(readback, MapType::Read, MapFlags::DO_NOT_WAIT)
                .map(drop),
            Err(Error::WasStillDrawing)
        );
    }
    assert_eq!(world.submits(), 1, "flushed once");
    assert_eq!(world.completed(), 0, "nothing waited for");
    assert!(ic.resource_is_busy(readback).unwrap());
    assert_eq!(count(&world.trace(), Hook::Lock), 0, "nothing mapped");
    // Still mappable: the refused Maps left it unmapped.
    world.complete_all();
    assert!(!ic.resource_is_busy(readback).unwrap());
    let bytes = ic
        .map(readback, MapType::Read, MapFlags::DO_NOT_WAIT)
        .unwrap();
    assert_eq!(bytes, &[3; 8]);
    ic.unmap(readback).unwrap();
    assert!(world.violations().is_empty(), "{:#?}", world.violations());
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// WRITE and READ_WRITE of a staging resource (R-M4): what the CPU writes is the resource's
/// memory at the Unmap, which the GPU then copies; READ changes nothing. A resource that is
/// not staging is refused (`NotMappable`), as is a second Map of a mapped one (R-C4); a Map
/// left open is unlocked by device destruction.
#[test]
fn r_m4_staging_writes_reach_the_gpu_and_other_resources_are_refused() {
    use cmdlist::soft::SoftCommand;
    use cmdlist::{MapFlags, MapType};
    let (device, mut ic, world) = manual();
    let upload = device.create_resource(staging(8)).unwrap();
    let dst = device.create_resource(crate::common::buffer(8)).unwrap();
    ic.map(upload, MapType::Write, MapFlags::empty())
        .unwrap()
        .fill(5);
    ic.unmap(upload).unwrap();
    let bytes = ic
        .map(upload, MapType::ReadWrite, MapFlags::empty())
        .unwrap();
    assert_eq!(bytes, &[5; 8]);
    bytes[0] = 6;
    assert_eq!(
        ic.map(upload, MapType::Read, MapFlags::empty()).map(drop),
        Err(app(AppError::InvalidState)),
        "mapped already"
    );
    ic.unmap(upload).unwrap();
    ic.map(upload, MapType::Read, MapFlags::empty()).unwrap()[1] = 9; // read-only
    ic.unmap(upload).unwrap();
    ic.command(&SoftCommand::Copy { dst, src: upload }).unwrap();
    ic.flush().unwrap();
    let mut expected = vec![5; 8];
    expected[0] = 6;
    assert_eq!(world.read(allocation(&device, dst)), Some(expected));
    for ty in [MapType::Read, MapType::Write, MapType::ReadWrite] {
        assert_eq!(
            ic.map(dst, ty, MapFlags::empty()).map(drop),
            Err(app(AppError::NotMappable)),
            "{ty:?} of a default resource"
        );
    }
    assert_eq!(
        ic.map(upload, MapType::WriteDiscard, MapFlags::empty())
            .map(drop),
        Err(app(AppError::NotMappable)),
        "a discard of a staging resource"
    );
    ic.map(upload, MapType::Write, MapFlags::empty()).unwrap();
    world.complete_all();
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// Map(NO_OVERWRITE) on the immediate context (R-M3): the resource's current memory with
/// its contents, locked without waiting for the buffers that read it; what is written lands
/// in place and the next draws read it. The one wait: for the buffer carrying the
/// resource's last discard (a driver may copy its bytes on the GPU), once per discard.
/// Refused for what R-M3 leaves out.
#[test]
fn r_m3_no_overwrite_on_the_immediate_context_writes_in_place() {
    use cmdlist::soft::SoftCommand;
    use cmdlist::{MapFlags, MapType};
    let (device, mut ic, world) = manual();
    let r = ring(&device);
    let out = device.create_resource(crate::common::buffer(64)).unwrap();
    ic.map_discard(r).unwrap()[..16].fill(1);
    ic.unmap(r).unwrap();
    // The discard's buffer is open: flushed, then waited for.
    let bytes = ic
        .map(r, MapType::WriteNoOverwrite, MapFlags::empty())
        .unwrap();
    assert!(bytes[..16].iter().all(|&b| b == 1), "contents kept");
    bytes[16..32].fill(2);
    ic.unmap(r).unwrap();
    assert_eq!(world.completed(), 1, "the discard's buffer waited for");
    // A buffer that only reads the ring is not waited for.
    ic.command(&SoftCommand::Copy { dst: out, src: r }).unwrap();
    ic.flush().unwrap();
    ic.map_no_overwrite(r).unwrap()[32..48].fill(3);
    ic.unmap(r).unwrap();
    assert_eq!(world.completed(), 1, "buffer 2 runs on");
    let mut expected = vec![0; 64];
    expected[..16].fill(1);
    expected[16..32].fill(2);
    expected[32..48].fill(3);
    assert_eq!(world.read(allocation(&device, r)), Some(expected));
    let cb = device
        .create_resource(dynamic(64, BindFlags::CONSTANT_BUFFER))
        .unwrap();
    assert_eq!(
        ic.map_no_overwrite(cb).map(drop),
        Err(app(AppError::NotMappable)),
        "no caps"
    );
    assert!(world.violations().is_empty(), "{:#?}", world.violations());
    world.complete_all();
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// A list whose recording discarded a resource, executed on the immediate context: a
/// Map(NO_OVERWRITE) there after it waits for the buffer that carries the list (its
/// discard's bytes reach the resource when it runs, R-M3) and sees those bytes, in every
/// list mode.
#[test]
fn r_m3_no_overwrite_after_a_lists_discard_waits_for_its_buffer() {
    for mode in ListMode::ALL {
        let config = SoftConfig {
            gpu: Gpu::Manual,
            ..SoftConfig::from_env().unwrap()
        }
        .with_list_mode(mode);
        let (device, mut ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
        let r = ring(&device);
        let mut dc = device.create_deferred_context().unwrap();
        dc.map_discard(r).unwrap().fill(4);
        dc.unmap(r).unwrap();
        let list = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
        let bytes = ic.map_no_overwrite(r).unwrap();
        assert!(
            bytes.iter().all(|&b| b == 4),
            "{mode:?}: the list's discard"
        );
        ic.unmap(r).unwrap();
        assert_eq!(world.completed(), 1, "{mode:?}: its buffer waited for");
        assert!(
            world.violations().is_empty(),
            "{mode:?}: {:#?}",
            world.violations()
        );
        drop((list, dc));
        world.complete_all();
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// A resource destroyed while a Map of its own memory is open keeps that memory until the
/// Map ends (R-M4): the retire queue deallocates it only after the unlock, which here is
/// device destruction's, since the Unmap of a destroyed resource is refused (StaleHandle) and
/// leaves the Map open. The soft kernel flags a deallocation while locked.
#[test]
fn r_m4_a_resource_destroyed_while_mapped_keeps_its_memory_until_the_unlock() {
    let (device, mut ic, world) = manual();
    let ring = ring(&device);
    let upload = device.create_resource(staging(32)).unwrap();
    let dst = device
        .create_resource(dynamic(64, BindFlags::empty()))
        .unwrap();
    let (ring_memory, upload_memory) = (allocation(&device, ring), allocation(&device, upload));
    ic.map_no_overwrite(ring).unwrap().fill(5);
    ic.map(upload, cmdlist::MapType::Write, cmdlist::MapFlags::empty())
        .unwrap()
        .fill(6);
    device.destroy(ring).unwrap();
    device.destroy(upload).unwrap();
    for _ in 0..3 {
        ic.command(&soft::SoftCommand::Fill { dst, value: 1 })
            .unwrap();
        ic.flush().unwrap();
        world.complete_all();
    }
    // (The soft kernel's mappings are copies, written back at the unlock.)
    assert!(world.read(ring_memory).is_some(), "kept while locked");
    assert!(world.read(upload_memory).is_some(), "kept while locked");
    for r in [ring, upload] {
        assert_eq!(ic.unmap(r), Err(app(AppError::StaleHandle)));
    }
    ic.destroy_device().unwrap();
    assert_eq!(
        world.read(ring_memory),
        None,
        "deallocated after the unlock"
    );
    assert_eq!(
        world.read(upload_memory),
        None,
        "deallocated after the unlock"
    );
    let violations = world.violations();
    assert!(violations.is_empty(), "{violations:#?}");
}

/// A primary destroyed while a staging Map of it is open (R-P1 destroys it in the call)
/// keeps its memory until the unlock (R-M4), here device destruction's.
#[test]
fn r_m4_a_primary_destroyed_while_mapped_keeps_its_memory_until_the_unlock() {
    let (_device, mut ic, world) = manual();
    let primary = ic.create_primary(staging(32)).unwrap();
    let memory = allocation(&_device, primary);
    ic.map(primary, cmdlist::MapType::Write, cmdlist::MapFlags::empty())
        .unwrap()
        .fill(6);
    ic.destroy_primary(primary).unwrap();
    assert!(world.read(memory).is_some(), "kept while locked");
    ic.destroy_device().unwrap();
    assert_eq!(world.read(memory), None, "deallocated after the unlock");
    let violations = world.violations();
    assert!(violations.is_empty(), "{violations:#?}");
}
