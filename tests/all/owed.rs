//! What a Begin and a Map owe (R-C4, R-E3): Finish ends a still-begun query and unmaps a
//! still-mapped resource, so a Begin reserves its End and a Map its Unmap, against the
//! budget and the replay limit alike. A call that would leave no room for them runs out of
//! memory itself; Finish never does for them.

use std::sync::Arc;

use cmdlist::soft::{self, SoftCommand, SoftConfig, SoftDevice, SoftImmediate, SoftWorld};
use cmdlist::{DeviceConfig, Error, QueryKind};

use crate::common::{buffer, dynamic_buffer};

/// A device whose replay limit is two operations, where the driver records lists
/// (`driver_built`: builds them).
fn device(driver_built: bool) -> (SoftDevice, SoftImmediate, Arc<SoftWorld>) {
    let config = SoftConfig {
        command_lists: true,
        driver_built,
        ..SoftConfig::from_env().unwrap()
    };
    soft::device(config, DeviceConfig::default().with_replay_limit(2)).unwrap()
}

#[test]
fn r_e3_a_begin_reserves_its_end_against_the_replay_limit() {
    for driver_built in [false, true] {
        let (device, mut ic, world) = device(driver_built);
        let r = device.create_resource(buffer(16)).unwrap();
        let q = device.create_query(QueryKind::Event).unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        let fill = SoftCommand::Fill { dst: r, value: 1 };
        // A Fill, a Begin and the End Finish would add: three operations, past two.
        dc.command(fill).unwrap();
        assert_eq!(dc.begin_query(q), Err(Error::OutOfMemory), "{driver_built}");
        assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
        // A Begin and its End fit; so does ending it early, which its Begin reserved.
        dc.begin_query(q).unwrap();
        dc.end_query(q).unwrap();
        assert_eq!(dc.command(fill), Err(Error::OutOfMemory), "{driver_built}");
        assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
        dc.begin_query(q).unwrap();
        let list = dc.finish().expect("the End Finish adds was reserved");
        assert_eq!(list.stats().operations, 2);
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
        assert!(world.violations().is_empty(), "{:?}", world.violations());
        drop((list, dc));
        world.complete_all();
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

#[test]
fn r_e3_a_map_reserves_its_unmap_against_the_replay_limit() {
    for driver_built in [false, true] {
        let (device, mut ic, world) = device(driver_built);
        let r = device.create_resource(buffer(16)).unwrap();
        let d = device.create_resource(dynamic_buffer(16)).unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        let fill = SoftCommand::Fill { dst: r, value: 1 };
        dc.map_discard(d).unwrap().fill(2);
        dc.command(fill).unwrap();
        assert_eq!(dc.command(fill), Err(Error::OutOfMemory), "{driver_built}");
        assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
        dc.map_discard(d).unwrap().fill(3);
        dc.command(fill).unwrap();
        let list = dc.finish().expect("the Unmap Finish adds was reserved");
        assert_eq!(list.stats().operations, 2);
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
        assert!(world.violations().is_empty(), "{:?}", world.violations());
        drop((list, dc));
        world.complete_all();
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// A vertex buffer of 64 bytes that Map(NO_OVERWRITE) applies to.
fn ring() -> cmdlist::ResourceDesc {
    cmdlist::ResourceDesc {
        bind: cmdlist::BindFlags::VERTEX_BUFFER,
        ..dynamic_buffer(64)
    }
}

/// A device in list mode `mode` whose deferred budget is 1,024 bytes.
fn budget_device(mode: cmdlist::ListMode) -> (SoftDevice, SoftImmediate, Arc<SoftWorld>) {
    let config = SoftConfig::from_env().unwrap().with_list_mode(mode);
    soft::device(config, DeviceConfig::default().with_deferred_budget(1_024)).unwrap()
}

const MODES: [cmdlist::ListMode; 3] = [
    cmdlist::ListMode::Emulated,
    cmdlist::ListMode::Replayed,
    cmdlist::ListMode::DriverBuilt,
];

/// A Map(NO_OVERWRITE) reserves no bytes, yet its Unmap is owed as any Map's (64 bytes):
/// however many appends came before, an update that fits only without that owed Unmap runs
/// out of memory, as it does after a single append.
#[test]
fn r_e3_an_appends_owed_unmap_counts_however_many_appends_came_before() {
    for mode in MODES {
        for appends in [1, 15] {
            let (device, mut ic, world) = budget_device(mode);
            let r = device.create_resource(ring()).unwrap();
            let big = device.create_resource(buffer(4_096)).unwrap();
            let mut dc = device.create_deferred_context().unwrap();
            // 128 bytes recorded: the discard's payload and its Unmap.
            dc.map_discard(r).unwrap().fill(1);
            dc.unmap(r).unwrap();
            for _ in 1..appends {
                dc.map_no_overwrite(r).unwrap();
                dc.unmap(r).unwrap();
            }
            dc.map_no_overwrite(r).unwrap();
            // 128 recorded and 64 owed leave 832: an update of 832 bytes costs 896.
            let update = dc.update(big, 0, &[7; 832]);
            assert_eq!(update, Err(Error::OutOfMemory), "{mode:?} after {appends}");
            assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
            drop(dc);
            world.complete_all();
            ic.flush().unwrap();
            ic.destroy_device().unwrap();
        }
    }
}

/// A recording full to its budget takes one more Map(NO_OVERWRITE) (it reserves no bytes),
/// whose owed Unmap then takes the recording past its budget: from there no call fits, not
/// even another append, which removes the context (R-E3).
#[test]
fn r_e3_past_the_budget_no_append_fits() {
    for mode in MODES {
        let (device, mut ic, world) = budget_device(mode);
        let a = device.create_resource(ring()).unwrap();
        let b = device.create_resource(ring()).unwrap();
        let big = device.create_resource(buffer(4_096)).unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        for r in [a, b] {
            dc.map_discard(r).unwrap().fill(1);
            dc.unmap(r).unwrap();
        }
        // 256 recorded; an update of 704 bytes (768 with its operation) fills the budget.
        dc.update(big, 0, &[1; 704]).unwrap();
        assert_eq!(dc.stats().recorded_bytes, 1_024, "{mode:?}");
        dc.map_no_overwrite(a).unwrap();
        assert!(!dc.is_removed(), "{mode:?}");
        // Out of memory: the context is removed, and the Map hands out scratch bytes.
        dc.map_no_overwrite(b).unwrap();
        assert!(dc.is_removed(), "{mode:?}");
        assert_eq!(dc.finish().err(), Some(Error::OutOfMemory), "{mode:?}");
        drop(dc);
        world.complete_all();
        ic.flush().unwrap();
        ic.destroy_device().unwrap();
    }
}
