//! The immediate context dropped while deferred contexts record on other threads (R-D3): no
//! hook ever hears an object after its destroy hook ran, whatever the threads do. A context
//! in a call that passed its device check before the removal still hands the driver the
//! objects it holds, so device destruction leaves what a live context holds to the device's
//! last reference; the soft driver flags any hook that hears an object after its destroy.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use cmdlist::soft::inject::{self, Fault, FaultPlan};
use cmdlist::soft::{Hook, SoftCommand, SoftConfig};
use cmdlist::{BindClass, BindPoint, Device, DeviceConfig, Error, Stage};

use crate::common::{buffer, dynamic_buffer};

/// The list modes with deferred-context hooks: replayed, and built by the driver.
fn native_modes() -> [SoftConfig; 2] {
    let base = SoftConfig {
        command_lists: true,
        ..SoftConfig::from_env().unwrap()
    };
    [
        SoftConfig {
            driver_built: false,
            ..base.clone()
        },
        SoftConfig {
            driver_built: true,
            ..base
        },
    ]
}

/// A call paused inside its first `use_local` while the immediate context is dropped on
/// another thread: when it goes on, the driver hears the object it was handed (and the
/// command's other one, or the call answers `DeviceRemoved`), and neither was destroyed
/// under it. The objects are destroyed once the device's last reference goes,
/// after the context (R-H2: the IC handle last), and nothing leaks.
#[test]
fn r_d3_a_call_inside_a_hook_when_the_device_is_destroyed_hears_no_destroyed_object() {
    for config in native_modes() {
        let driver_built = config.driver_built;
        // The scenario, up to the paused call; returns the plan's call number at its start.
        let scenario = |plan: &Arc<FaultPlan>| {
            let (driver, kernel, world) = inject::new(plan, config.clone());
            let (device, mut ic) = Device::new(driver, kernel, DeviceConfig::default()).unwrap();
            let (a, b) = (
                device.create_resource(buffer(16)).unwrap(),
                device.create_resource(buffer(16)).unwrap(),
            );
            // Both in a buffer the immediate context submitted: their memory is the kernel's
            // to free on the immediate context's thread while it lives.
            ic.command(&SoftCommand::Copy { dst: b, src: a }).unwrap();
            ic.flush().unwrap();
            let mut dc = device.create_deferred_context().unwrap();
            // Opens both handles; the next command uses them (R-H1).
            dc.command(SoftCommand::Copy { dst: b, src: a }).unwrap();
            let start = plan.calls();
            (device, ic, dc, world, (a, b), start)
        };
        // The reference run: which call is the second command's first `use_local`.
        let counting = Arc::new(FaultPlan::counting().with_log());
        let (_device, _ic, mut dc, _world, (a, b), start) = scenario(&counting);
        dc.command(SoftCommand::Copy { dst: b, src: a }).unwrap();
        let log = counting.log();
        let at = (start as usize..log.len())
            .find(|&i| log[i] == "use_local")
            .unwrap_or_else(|| panic!("driver_built {driver_built}: no use_local in {log:?}"));
        drop(dc);

        let plan = Arc::new(FaultPlan::at(at as u64, Fault::Pause));
        let (device, ic, mut dc, world, (a, b), _) = scenario(&plan);
        let recording = thread::spawn(move || {
            let used = dc.command(SoftCommand::Copy { dst: b, src: a });
            let finished = dc.finish().map(drop);
            (used, finished)
        });
        plan.wait_paused();
        drop(ic); // device destruction, while the call is inside `use_local`
        plan.resume();
        let (used, finished) = recording.join().unwrap();
        // The call had begun: it goes on, or finds the removal at its next object.
        assert!(
            matches!(used, Ok(()) | Err(Error::DeviceRemoved)),
            "driver_built {driver_built}: {used:?}"
        );
        assert_eq!(finished, Err(Error::DeviceRemoved));
        assert_eq!(plan.hit().map(|h| h.hook), Some("use_local"));
        let violations = world.violations();
        assert!(
            violations.is_empty(),
            "driver_built {driver_built}: {violations:#?}"
        );
        // The last reference, let go on another thread: what the context held is destroyed
        // there, the immediate context's thread being gone.
        thread::spawn(move || drop(device)).join().unwrap();
        let violations = world.check_after_device_destroyed();
        assert!(
            violations.is_empty(),
            "driver_built {driver_built}: {violations:#?}"
        );
        assert_eq!(world.soft_objects_alive(), 0);
    }
}

/// Several threads record in a loop (commands, binds, Maps, Finish) while the immediate
/// context is dropped under them, many times over, in each list mode: no hook hears an object
/// after its destroy hook, every call after the removal answers `DeviceRemoved`, and once the
/// last reference goes nothing leaks.
#[test]
fn r_d3_the_immediate_context_dropped_under_recording_threads_destroys_nothing_they_hear() {
    const THREADS: usize = 3;
    const ROUNDS: usize = 40;
    let mut modes = native_modes().to_vec();
    modes.push(SoftConfig {
        command_lists: false,
        ..SoftConfig::from_env().unwrap()
    });
    for config in modes {
        for round in 0..ROUNDS {
            let (device, mut ic, world) =
                cmdlist::soft::device(config.clone(), DeviceConfig::default()).unwrap();
            let calls = Arc::new(AtomicUsize::new(0));
            let start = Arc::new(Barrier::new(THREADS + 1));
            let removed = Arc::new(AtomicBool::new(false));
            let threads: Vec<_> = (0..THREADS)
                .map(|_| {
                    // Each thread's objects, and one every thread uses.
                    let (src, dst) = (
                        device.create_resource(buffer(64)).unwrap(),
                        device.create_resource(buffer(64)).unwrap(),
                    );
                    let constants = device.create_resource(dynamic_buffer(64)).unwrap();
                    // In a buffer the immediate context submits, as a frame's objects are.
                    ic.command(&SoftCommand::Copy { dst, src }).unwrap();
                    let mut dc = device.create_deferred_context().unwrap();
                    let (calls, start, removed) = (calls.clone(), start.clone(), removed.clone());
                    thread::spawn(move || {
                        start.wait();
                        let point = BindPoint::new(BindClass::ConstantBuffer(Stage::Vertex), 0);
                        let mut errors = 0;
                        for i in 0u32.. {
                            let removed_before = removed.load(Ordering::SeqCst);
                            let step = match i % 4 {
                                0 => dc.command(SoftCommand::Copy { dst, src }),
                                1 => dc.bind(point, Some(constants.any())),
                                2 => dc
                                    .map_discard(constants)
                                    .map(|bytes| bytes.fill(i as u8))
                                    .and_then(|()| dc.unmap(constants)),
                                _ => dc.finish().map(drop),
                            };
                            calls.fetch_add(1, Ordering::Relaxed);
                            if let Err(error) = step {
                                // Only the removal fails a call here.
                                assert_eq!(error, Error::DeviceRemoved, "call {i}");
                                errors += 1;
                            }
                            if removed_before {
                                assert!(errors > 0, "a call after the removal succeeded");
                                break;
                            }
                        }
                    })
                })
                .collect();
            ic.flush().unwrap();
            start.wait();
            // A different moment each round: after some calls, more as the rounds go.
            while calls.load(Ordering::Relaxed) < round * 7 {
                std::hint::spin_loop();
            }
            drop(ic);
            removed.store(true, Ordering::SeqCst);
            for t in threads {
                t.join().unwrap();
            }
            let violations = world.violations();
            assert!(violations.is_empty(), "round {round}: {violations:#?}");
            // The last reference, on another thread than the immediate context's.
            thread::spawn(move || drop(device)).join().unwrap();
            let violations = world.check_after_device_destroyed();
            assert!(violations.is_empty(), "round {round}: {violations:#?}");
            assert_eq!(world.soft_objects_alive(), 0, "round {round}");
        }
    }
}

/// What the immediate context itself binds is no live context's: dropping it under a live
/// deferred context gives its bindings' holds back before the drain, so a bound object is
/// destroyed then, with the rest nothing holds, and not left to the device's last reference
/// as what the context holds is (R-D3).
#[test]
fn r_d3_the_immediate_contexts_own_bindings_do_not_keep_objects_past_the_drain() {
    use cmdlist::soft::Hook;
    let config = SoftConfig {
        command_lists: true,
        ..SoftConfig::from_env().unwrap()
    };
    let (device, mut ic, world) = cmdlist::soft::device(config, DeviceConfig::default()).unwrap();
    let (bound, held) = (
        device.create_resource(buffer(16)).unwrap(),
        device.create_resource(buffer(16)).unwrap(),
    );
    let id = |h: cmdlist::Handle<cmdlist::handle::Resource>| device.object(h).unwrap().id;
    let (bound_id, held_id) = (id(bound), id(held));
    let point = BindPoint::new(BindClass::ConstantBuffer(Stage::Pixel), 0);
    ic.bind(point, Some(bound.any())).unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    dc.command(SoftCommand::Fill {
        dst: held,
        value: 1,
    })
    .unwrap();
    drop(ic);
    let destroyed = |world: &cmdlist::soft::SoftWorld| -> Vec<u64> {
        world
            .trace()
            .iter()
            .filter(|e| e.hook == Hook::DestroyObject)
            .map(|e| e.object)
            .collect()
    };
    assert_eq!(
        destroyed(&world),
        [bound_id],
        "bound by the IC: destroyed by the drain"
    );
    drop(dc);
    drop(device);
    assert_eq!(destroyed(&world), [bound_id, held_id]);
    let violations = world.check_after_device_destroyed();
    assert!(violations.is_empty(), "{violations:#?}");
}

/// After its device's destruction the immediate context answers every call
/// `DeviceRemoved`, whatever the handles it is given, and calls no hook but the kernel's
/// error report (R-E2); destroying the device again is a no-op (R-D3).
#[test]
fn r_d3_the_immediate_context_after_device_destruction_answers_device_removed() {
    let (device, mut ic, world) =
        cmdlist::soft::device(SoftConfig::from_env().unwrap(), DeviceConfig::default()).unwrap();
    let (src, dst) = (
        device.create_resource(buffer(64)).unwrap(),
        device.create_resource(buffer(64)).unwrap(),
    );
    let constants = device.create_resource(dynamic_buffer(64)).unwrap();
    ic.command(&SoftCommand::Copy { dst, src }).unwrap();
    ic.destroy_device().unwrap();
    world.clear_trace();
    let removed = Err(Error::DeviceRemoved);
    assert_eq!(ic.command(&SoftCommand::Copy { dst, src }), removed);
    assert_eq!(ic.update(dst, 0, &[1; 8]), removed);
    assert_eq!(ic.map_discard(constants).map(drop), removed);
    assert_eq!(ic.map_no_overwrite(constants).map(drop), removed);
    assert_eq!(ic.unmap(constants), removed);
    assert_eq!(ic.resource_is_busy(src).map(drop), removed);
    assert_eq!(ic.flush(), removed);
    // Each refusal reported to the kernel (R-E2), and nothing else heard.
    let heard: Vec<_> = world.trace().iter().map(|event| event.hook).collect();
    assert_eq!(heard, [Hook::SetError; 7]);
    assert_eq!(ic.destroy_device(), Ok(()));
}
