//! Finish's implicit operations under a failing hook (R-C2, R-C4): the Unmap of a resource
//! still mapped and the End of a query still begun that Finish adds, heard by the driver
//! (`record_deferred`) on the recording thread. Whether the hook panics or returns an error,
//! the recording is abandoned with everything it had open: the next list holds exactly what
//! was recorded after it, and nothing of the abandoned recording (its Map's bytes, its
//! query) reaches the device.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use cmdlist::soft::inject::{self, Fault, FaultPlan, InjectedPanic};
use cmdlist::soft::{SoftCommand, SoftConfig};
use cmdlist::{Device, DeviceConfig, Error, QueryKind};

use crate::common::{buffer, dynamic_buffer};

/// What the abandoned recording left open for Finish to close.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Implicit {
    Unmap,
    EndQuery,
}

/// Enough bytes that a stale payload would sit in arena chunks the reset frees (so that
/// AddressSanitizer sees a read of them), not only in the first one it keeps.
const BIG: u64 = 512 * 1024;

/// The scenario under `plan`; returns the plan's call number at which the first Finish
/// began, and whether that Finish returned (`Ok(result)`) or panicked (`Err`).
fn scenario(
    plan: &Arc<FaultPlan>,
    driver_built: bool,
    implicit: Implicit,
) -> (u64, std::thread::Result<Result<(), Error>>) {
    let config = SoftConfig {
        command_lists: true,
        driver_built,
        ..SoftConfig::from_env().unwrap()
    };
    let (driver, kernel, world) = inject::new(plan, config);
    let (device, mut ic) = Device::new(driver, kernel, DeviceConfig::default()).unwrap();
    let mapped = device.create_resource(dynamic_buffer(BIG)).unwrap();
    let target = device.create_resource(buffer(64)).unwrap();
    let query = device.create_query(QueryKind::Event).unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    // Updates after the Map grow the arena past its first chunk.
    let filler = device.create_resource(buffer(BIG)).unwrap();
    match implicit {
        Implicit::Unmap => dc.map_discard(mapped).unwrap().fill(0xAA),
        Implicit::EndQuery => dc.begin_query(query).unwrap(),
    }
    for _ in 0..4 {
        dc.update(filler, 0, &vec![0x55; BIG as usize]).unwrap();
    }
    let mark = plan.calls();
    let first = catch_unwind(AssertUnwindSafe(|| dc.finish().map(drop)));
    // The next recording: one command.
    dc.command(SoftCommand::Fill {
        dst: target,
        value: 7,
    })
    .unwrap();
    let list = dc.finish().unwrap();
    // Executed before anything is asserted, so that a stale operation runs (under
    // AddressSanitizer, a read of the abandoned arena is reported).
    ic.execute_command_list(&list).unwrap();
    ic.flush().unwrap();
    assert_eq!(
        list.stats().operations,
        1,
        "the next list holds its one command and nothing of the abandoned recording"
    );
    let read = |r| {
        let a = device.object(r).unwrap().allocation().unwrap();
        world.read(a).unwrap()
    };
    assert!(read(target).iter().all(|&b| b == 7));
    assert!(
        read(mapped).iter().all(|&b| b == 0),
        "the abandoned Map's bytes never reach the resource"
    );
    assert!(world.violations().is_empty(), "{:?}", world.violations());
    drop((list, dc));
    world.complete_all();
    ic.destroy_device().unwrap();
    world.assert_clean();
    (mark, first)
}

/// The call number of the first `record_deferred` from `mark` on: the implicit operation
/// Finish has the driver hear.
fn implicit_call(driver_built: bool, implicit: Implicit) -> u64 {
    let plan = Arc::new(FaultPlan::counting().with_log());
    let (mark, first) = scenario(&plan, driver_built, implicit);
    assert!(matches!(first, Ok(Ok(()))), "the reference Finish succeeds");
    let log = plan.log();
    let at = log[mark as usize..]
        .iter()
        .position(|h| *h == "record_deferred")
        .expect("Finish has the driver hear its implicit operation");
    mark + at as u64
}

#[test]
fn r_c2_r_c4_finish_abandons_what_its_failing_implicit_operation_left_open() {
    inject::silence_injected_panics();
    for driver_built in [false, true] {
        for implicit in [Implicit::Unmap, Implicit::EndQuery] {
            let call = implicit_call(driver_built, implicit);
            for fault in [
                Fault::Panic,
                Fault::Error(Error::InvalidArg),
                Fault::Error(Error::OutOfMemory),
            ] {
                let case = format!("{implicit:?}, {fault:?}, driver-built {driver_built}");
                let plan = Arc::new(FaultPlan::at(call, fault));
                let (_, first) = scenario(&plan, driver_built, implicit);
                let hit = plan.hit().expect(&case);
                assert_eq!(
                    (hit.hook, hit.injected),
                    ("record_deferred", true),
                    "{case}"
                );
                match (fault, first) {
                    (Fault::Panic, Err(payload)) => {
                        assert!(InjectedPanic::of(&*payload).is_some(), "{case}")
                    }
                    (Fault::Error(e), Ok(Err(got))) => assert_eq!(got, e, "{case}"),
                    (_, other) => panic!("{case}: the first Finish gave {other:?}"),
                }
            }
        }
    }
}

/// An Unmap the driver refuses, or whose hook panics, on a deferred context leaves the
/// resource mapped, as before the call: the next Unmap of it is accepted, and the list
/// replays the contents written before both.
#[test]
fn r_e1_a_refused_or_panicking_unmap_leaves_the_resource_mapped() {
    for driver_built in [false, true] {
        for fault in [Fault::Error(Error::InvalidArg), Fault::Panic] {
            let config = SoftConfig {
                command_lists: true,
                driver_built,
                ..Default::default()
            };
            // The reference run: the Unmap's hook call is the last call the Unmap makes.
            let counting = Arc::new(FaultPlan::counting());
            let run = |plan: &Arc<FaultPlan>| {
                let (driver, kernel, world) = inject::new(plan, config.clone());
                let (device, ic) = Device::new(driver, kernel, DeviceConfig::default()).unwrap();
                let mapped = device.create_resource(dynamic_buffer(16)).unwrap();
                let mut dc = device.create_deferred_context().unwrap();
                dc.map_discard(mapped).unwrap().fill(0xAB);
                (device, ic, world, mapped, dc)
            };
            let (_device, _ic, _world, mapped, mut dc) = run(&counting);
            dc.unmap(mapped).unwrap();
            let unmap_hook = counting.calls() - 1;

            let plan = Arc::new(FaultPlan::at(unmap_hook, fault));
            let (device, mut ic, world, mapped, mut dc) = run(&plan);
            let refused = catch_unwind(AssertUnwindSafe(|| dc.unmap(mapped)));
            assert!(plan.injected(), "{fault:?}, driver-built {driver_built}");
            match fault {
                Fault::Panic => {
                    let payload = refused.unwrap_err();
                    assert!(payload.downcast_ref::<InjectedPanic>().is_some());
                }
                _ => assert_eq!(refused.unwrap(), Err(Error::InvalidArg)),
            }
            // Still mapped: a second Map is refused, the Unmap accepted.
            assert!(dc.map_discard(mapped).is_err(), "{fault:?}");
            dc.unmap(mapped).unwrap();
            let list = dc.finish().unwrap();
            ic.execute_command_list(&list).unwrap();
            drop(list);
            ic.flush().unwrap();
            let allocation = device.object(mapped).unwrap().allocation().unwrap();
            assert_eq!(world.read(allocation).unwrap(), vec![0xAB; 16]);
        }
    }
}
