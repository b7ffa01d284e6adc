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
