//! ExecuteCommandList with RestoreContextState (R-C3), as Wine's deferred-context tests
//! check it: after the list, the executing context's bindings are in force again, on the
//! immediate context (re-bound through the driver) and on a deferred context (re-bound in
//! its recording), nested lists included, in every list mode. And FinishCommandList with
//! RestoreDeferredContextState (R-C5): the deferred context records on with its bindings.

use std::sync::Arc;

use cmdlist::handle::Resource;
use cmdlist::soft::{
    self, Gpu, Hook, SoftCommand, SoftConfig, SoftDevice, SoftImmediate, SoftWorld,
};
use cmdlist::{
    BindClass, BindPoint, Clock, DeviceConfig, Handle, HandleType, ListMode, ObjectDesc,
};

use crate::common::{allocation, buffer, id_of};

const RT0: BindPoint = BindPoint::new(BindClass::RenderTarget, 0);
const BLEND: BindPoint = BindPoint::new(BindClass::BlendState, 0);

fn setup(mode: ListMode) -> (SoftDevice, SoftImmediate, Arc<SoftWorld>) {
    let config = SoftConfig {
        gpu: Gpu::Immediate,
        ..SoftConfig::from_env().unwrap()
    }
    .with_list_mode(mode);
    let device_config = DeviceConfig::default().with_list_clock(Clock::Submitted);
    soft::device(config, device_config).unwrap()
}

fn bytes(world: &SoftWorld, device: &SoftDevice, r: Handle<Resource>) -> Vec<u8> {
    world.read(allocation(device, r)).unwrap()
}

fn fill_bound(value: u8) -> SoftCommand {
    SoftCommand::FillBound { point: RT0, value }
}

/// On the immediate context: the list runs from the clear state and ends with it, then the
/// bindings from before are bound again, each as an `Op::Bind` the driver performs, so the
/// next draw writes the restored render target; a plain execute leaves nothing bound. A
/// bound object the application destroyed meanwhile is bound again too.
#[test]
fn r_c3_a_restoring_execute_binds_the_immediate_contexts_state_again() {
    for mode in ListMode::ALL {
        let (device, mut ic, world) = setup(mode);
        let (a, b) = (
            device.create_resource(buffer(8)).unwrap(),
            device.create_resource(buffer(8)).unwrap(),
        );
        let blend = device
            .create(&ObjectDesc::State {
                ty: HandleType::BlendState,
                desc: &[1; 8],
            })
            .unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        dc.bind(RT0, Some(b.any())).unwrap();
        dc.command(fill_bound(3)).unwrap();
        let list = dc.finish().unwrap();

        ic.bind(RT0, Some(a.any())).unwrap();
        ic.bind(BLEND, Some(blend)).unwrap();
        let before: Vec<_> = ic.bindings().collect();
        let blend_id = id_of(&device, blend);
        device.destroy(blend).unwrap(); // still bound: kept alive
        world.clear_trace();
        ic.execute_command_list_restoring(&list).unwrap();
        assert_eq!(ic.bindings().collect::<Vec<_>>(), before, "{mode:?}");
        let trace = world.trace();
        let executes: Vec<_> = trace.iter().filter(|e| e.hook == Hook::Execute).collect();
        let rebinds: Vec<u64> = executes[executes.len() - 2..]
            .iter()
            .map(|e| e.object)
            .collect();
        assert_eq!(
            rebinds,
            [id_of(&device, a), blend_id],
            "{mode:?}: the last two operations bind again: {trace:#?}"
        );
        ic.command(&fill_bound(9)).unwrap();
        ic.flush().unwrap();
        assert_eq!(
            bytes(&world, &device, b),
            vec![3; 8],
            "{mode:?}: the list's own target"
        );
        assert_eq!(
            bytes(&world, &device, a),
            vec![9; 8],
            "{mode:?}: restored, then drawn"
        );

        // A plain execute leaves nothing bound: the same draw writes nothing.
        ic.execute_command_list(&list).unwrap();
        assert_eq!(ic.bindings().count(), 0);
        ic.command(&fill_bound(1)).unwrap();
        ic.flush().unwrap();
        assert_eq!(bytes(&world, &device, a), vec![9; 8], "{mode:?}");
        drop((list, dc));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// On a deferred context (Wine's `test_deferred_context_state`): after a restoring execute
/// the context still has its own bindings, recorded again after the list, so the outer list
/// replays them after the inner one (Wine's `test_deferred_context_rendering`: the outer
/// context's state stays in force for its next draw); a plain execute leaves nothing
/// bound.
#[test]
fn r_c3_a_restoring_execute_keeps_a_deferred_contexts_bindings_in_force() {
    for mode in ListMode::ALL {
        let (device, mut ic, world) = setup(mode);
        let (a, b) = (
            device.create_resource(buffer(8)).unwrap(),
            device.create_resource(buffer(8)).unwrap(),
        );
        let mut inner_dc = device.create_deferred_context().unwrap();
        inner_dc.bind(RT0, Some(b.any())).unwrap();
        inner_dc.command(fill_bound(5)).unwrap();
        let inner = inner_dc.finish().unwrap();

        let mut dc = device.create_deferred_context().unwrap();
        dc.bind(RT0, Some(a.any())).unwrap();
        let from = world.trace().len();
        dc.execute_command_list_restoring(&inner).unwrap();
        assert_eq!(dc.binding(RT0), Some(a.any()), "{mode:?}: still bound");
        if mode.has_driver_lists() {
            // The binding recorded again: its handle, open in this recording, used (the
            // driver hears the use), then its bind.
            let tail: Vec<_> = world.trace()[from..]
                .iter()
                .filter(|e| e.context == Some(dc.id()))
                .map(|e| e.hook)
                .collect();
            assert_eq!(
                tail[tail.len().saturating_sub(2)..],
                [Hook::UseLocal, Hook::RecordDeferred],
                "{mode:?}: {tail:?}"
            );
        }
        dc.command(fill_bound(7)).unwrap();
        let outer = dc.finish().unwrap();
        ic.execute_command_list(&outer).unwrap();
        ic.flush().unwrap();
        assert_eq!(
            bytes(&world, &device, b),
            vec![5; 8],
            "{mode:?}: the inner list ran"
        );
        assert_eq!(
            bytes(&world, &device, a),
            vec![7; 8],
            "{mode:?}: the outer state held"
        );

        // Without restoring: nothing bound after the inner list, the draw writes nothing.
        dc.bind(RT0, Some(a.any())).unwrap();
        dc.execute_command_list(&inner).unwrap();
        assert_eq!(dc.binding(RT0), None);
        dc.command(fill_bound(2)).unwrap();
        let plain = dc.finish().unwrap();
        ic.execute_command_list(&plain).unwrap();
        ic.flush().unwrap();
        assert_eq!(bytes(&world, &device, a), vec![7; 8], "{mode:?}");
        assert!(
            world.violations().is_empty(),
            "{mode:?}: {:#?}",
            world.violations()
        );
        drop((outer, plain, inner, dc, inner_dc));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// A restoring execute that stops before its clear-state (here the driver refuses to refresh
/// a view the list holds, after a rotation, R-X5) leaves the bindings as they were, and the
/// holds it took to restore them are given back: a bound object destroyed, unbound and
/// flushed is really destroyed, as always (R-D4).
#[test]
fn r_c3_a_restoring_execute_cut_short_keeps_the_bindings_and_leaks_no_hold() {
    use cmdlist::dxgi::DisplayFormat;
    use cmdlist::soft::inject::{self, Fault, FaultPlan};
    use cmdlist::{BindFlags, Device, Error, ResourceDesc, Texture2d, ViewDesc};
    let run = |plan: &Arc<FaultPlan>| {
        let (driver, kernel, world) = inject::new(plan, SoftConfig::from_env().unwrap());
        let (device, mut ic) = Device::new(driver, kernel, DeviceConfig::default()).unwrap();
        let texture = Texture2d {
            width: 2,
            height: 2,
            array_size: 1,
            mip_levels: 1,
            samples: 1,
            format: DisplayFormat::B8G8R8A8Unorm.to_dxgi(),
        };
        let desc = ResourceDesc {
            byte_size: 16,
            bind: BindFlags::PRESENT | BindFlags::RENDER_TARGET,
            texture: Some(texture),
            ..Default::default()
        };
        let (x, y) = (
            device.create_resource(desc).unwrap(),
            device.create_resource(desc).unwrap(),
        );
        let view = device
            .create_view(
                HandleType::RenderTargetView,
                ViewDesc {
                    resource: x,
                    first_byte: 0,
                    byte_len: 16,
                },
            )
            .unwrap();
        let a = device.create_resource(buffer(8)).unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        dc.command(SoftCommand::ClearView { view, value: 1 })
            .unwrap();
        let list = dc.finish().unwrap();
        ic.bind(RT0, Some(a.any())).unwrap();
        ic.rotate_resource_identities(&[x, y]).unwrap();
        let result = ic.execute_command_list_restoring(&list);
        // The hooks heard up to the restoring execute's end.
        let heard = plan.log().len();
        let bound = ic.bindings().collect::<Vec<_>>();
        let destroyed_before = ic.retire_stats().destroyed;
        device.destroy(a).unwrap();
        ic.clear_state().unwrap();
        ic.flush().unwrap();
        let destroyed = ic.retire_stats().destroyed - destroyed_before;
        drop((list, dc));
        drop(device);
        ic.destroy_device().unwrap();
        world.assert_clean();
        (result, bound, destroyed, a, heard)
    };
    let counting = Arc::new(FaultPlan::counting().with_log());
    let (ok, ..) = run(&counting);
    assert_eq!(ok, Ok(()));
    let call = counting
        .log()
        .iter()
        .position(|h| *h == "refresh_view")
        .unwrap() as u64;
    let plan = Arc::new(FaultPlan::at(call, Fault::Error(Error::InvalidArg)).with_log());
    let (result, bound, destroyed, a, heard) = run(&plan);
    assert_eq!(result, Err(Error::InvalidArg));
    assert_eq!(bound, [(RT0, a.any())], "the bindings as they were");
    // Still bound: nothing bound again after the refused refresh (then its error reported).
    assert_eq!(
        plan.log()[call as usize..heard],
        ["refresh_view", "set_error"],
        "the hooks heard from the refused refresh to the execute's end"
    );
    assert_eq!(destroyed, 1, "destroyed once unbound: no hold left behind");
}

/// A hook that panics during a restoring execute on the immediate context (the list's
/// CommandListExecute, one of its replayed operations, or a re-bind) leaves no hold the
/// restore took: after ClearState, the bound objects destroyed and a flush, they are really
/// destroyed (R-H2, R-D4), and device destruction leaves nothing (R-D3). Every such call is
/// made to panic in turn, in every list mode.
#[test]
fn r_c3_r_h2_a_panic_during_a_restoring_execute_leaks_no_hold() {
    use cmdlist::soft::inject::{self, Fault, FaultPlan, InjectedPanic};
    use cmdlist::Device;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    inject::silence_injected_panics();
    for mode in ListMode::ALL {
        let config = SoftConfig {
            gpu: Gpu::Immediate,
            ..SoftConfig::from_env().unwrap()
        }
        .with_list_mode(mode);
        // The calls the restoring execute made, whether it panicked, and the bound objects
        // still alive at the end.
        let scenario = |plan: &Arc<FaultPlan>| {
            let (driver, kernel, world) = inject::new(plan, config.clone());
            let device_config = DeviceConfig::default().with_list_clock(Clock::Submitted);
            let (device, mut ic) = Device::new(driver, kernel, device_config).unwrap();
            let (a, b) = (
                device.create_resource(buffer(8)).unwrap(),
                device.create_resource(buffer(8)).unwrap(),
            );
            let blend = device
                .create(&ObjectDesc::State {
                    ty: HandleType::BlendState,
                    desc: &[1; 8],
                })
                .unwrap();
            let mut dc = device.create_deferred_context().unwrap();
            dc.bind(RT0, Some(b.any())).unwrap();
            dc.command(fill_bound(3)).unwrap();
            let list = dc.finish().unwrap();
            ic.bind(RT0, Some(a.any())).unwrap();
            ic.bind(BLEND, Some(blend)).unwrap();
            let ids = [a.any(), blend].map(|h| device.object(h).unwrap().id);
            let mark = plan.calls() as usize;
            let caught = catch_unwind(AssertUnwindSafe(|| {
                ic.execute_command_list_restoring(&list)
            }));
            let end = plan.calls() as usize;
            let panicked = match caught {
                Ok(result) => {
                    result.unwrap();
                    false
                }
                Err(payload) => {
                    assert!(InjectedPanic::of(&*payload).is_some(), "{mode:?}");
                    true
                }
            };
            ic.clear_state().unwrap();
            device.destroy(a).unwrap();
            device.destroy(blend).unwrap();
            ic.flush().unwrap();
            let live = world.live_objects();
            let alive: Vec<u64> = ids.into_iter().filter(|id| live.contains(id)).collect();
            drop((list, dc, device));
            ic.destroy_device().unwrap();
            world.assert_clean();
            (mark..end, panicked, alive)
        };
        let counting = Arc::new(FaultPlan::counting().with_log());
        let (during, panicked, alive) = scenario(&counting);
        assert!(!panicked && alive.is_empty(), "{mode:?}: {alive:?}");
        let log = counting.log();
        let calls: Vec<usize> = during
            .filter(|&i| matches!(log[i], "execute" | "execute_command_list"))
            .collect();
        assert!(calls.len() >= 2, "{mode:?}: the list and its re-binds");
        for call in calls {
            let plan = Arc::new(FaultPlan::at(call as u64, Fault::Panic));
            let (_, panicked, alive) = scenario(&plan);
            let hook = log[call];
            assert!(panicked, "{mode:?}: call {call} ({hook})");
            assert_eq!(
                alive,
                [],
                "{mode:?}: a panic at call {call} ({hook}) left the bound objects held"
            );
        }
    }
}

/// Finish restoring the state (R-C5, Wine's `test_deferred_context_state`): the list is made
/// as by a plain Finish (it ends with nothing bound), and the context records on with the
/// bindings it had, each bound again in the next recording and heard as a bind, its handle
/// opened first (R-H1); the next list's draw writes the restored target. A plain Finish
/// leaves nothing bound. In every list mode.
#[test]
fn r_c5_a_finish_restoring_the_state_records_on_with_the_bindings() {
    for mode in ListMode::ALL {
        let (device, mut ic, world) = setup(mode);
        let (a, b) = (
            device.create_resource(buffer(8)).unwrap(),
            device.create_resource(buffer(8)).unwrap(),
        );
        let blend = device
            .create(&ObjectDesc::State {
                ty: HandleType::BlendState,
                desc: &[1; 8],
            })
            .unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        dc.bind(RT0, Some(a.any())).unwrap();
        dc.bind(BLEND, Some(blend)).unwrap();
        dc.command(fill_bound(3)).unwrap();
        let before: Vec<_> = dc.bindings().collect();
        let from = world.trace().len();
        let first = dc.finish_restoring_state().unwrap();
        assert_eq!(dc.bindings().collect::<Vec<_>>(), before, "{mode:?}");
        if mode.has_driver_lists() {
            // After the Finish's own hooks: each object's handle opened, then its bind.
            let after: Vec<_> = world.trace()[from..]
                .iter()
                .filter(|e| e.context == Some(dc.id()))
                .map(|e| (e.hook, e.object))
                .collect();
            let tail: Vec<_> = after
                .iter()
                .rev()
                .take(4)
                .rev()
                .map(|&(hook, _)| hook)
                .collect();
            let bind = Hook::RecordDeferred;
            assert_eq!(
                tail,
                [Hook::OpenLocal, bind, Hook::OpenLocal, bind],
                "{mode:?}: {after:?}"
            );
        }
        // The next list draws with the restored target, and without rebinding it.
        dc.command(fill_bound(9)).unwrap();
        let second = dc.finish().unwrap();
        assert_eq!(dc.bindings().count(), 0, "{mode:?}: a plain Finish clears");
        ic.execute_command_list(&first).unwrap();
        ic.execute_command_list(&second).unwrap();
        ic.flush().unwrap();
        assert_eq!(bytes(&world, &device, a), vec![9; 8], "{mode:?}");
        assert_eq!(bytes(&world, &device, b), vec![0; 8], "{mode:?}");
        assert!(
            world.violations().is_empty(),
            "{mode:?}: {:#?}",
            world.violations()
        );
        drop((first, second, dc));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// A bound object the application destroys before a Finish restoring the state is bound
/// again (the binding kept it, as D3D's references do, R-C5), stays until unbound, and is
/// then really destroyed (R-D4): no hold leaks.
#[test]
fn r_c5_r_h2_a_destroyed_bound_object_is_bound_again_and_then_released() {
    for mode in ListMode::ALL {
        let (device, mut ic, world) = setup(mode);
        let a = device.create_resource(buffer(8)).unwrap();
        let memory = allocation(&device, a);
        let mut dc = device.create_deferred_context().unwrap();
        dc.bind(RT0, Some(a.any())).unwrap();
        device.destroy(a).unwrap();
        let first = dc.finish_restoring_state().unwrap();
        assert_eq!(dc.binding(RT0), Some(a.any()), "{mode:?}");
        dc.command(fill_bound(4)).unwrap();
        let second = dc.finish().unwrap();
        ic.execute_command_list(&first).unwrap();
        ic.execute_command_list(&second).unwrap();
        ic.flush().unwrap();
        assert_eq!(
            world.read(memory),
            Some(vec![4; 8]),
            "{mode:?}: still there"
        );
        drop((first, second));
        ic.flush().unwrap();
        let destroyed = world
            .trace()
            .iter()
            .filter(|e| e.hook == Hook::DestroyObject)
            .count();
        assert_eq!(destroyed, 1, "{mode:?}: destroyed once nothing holds it");
        drop(dc);
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// The re-binds belong to the next recording (R-C5, R-E2, R-E3): when the driver refuses
/// one, the list is the application's all the same and that binding is left out while the
/// other is bound; when it runs out of memory, the context is removed and its next Finish
/// answers out of memory once. In both list modes with deferred-context hooks.
#[test]
fn r_c5_r_e3_a_failing_re_bind_is_the_next_recordings_failure() {
    use cmdlist::soft::inject::{self, Fault, FaultPlan};
    use cmdlist::{Device, Error};
    for driver_built in [false, true] {
        for error in [Error::InvalidArg, Error::OutOfMemory] {
            let config = SoftConfig {
                command_lists: true,
                driver_built,
                ..SoftConfig::from_env().unwrap()
            };
            let scenario = |plan: &Arc<FaultPlan>| {
                let (driver, kernel, world) = inject::new(plan, config.clone());
                let (device, ic) = Device::new(driver, kernel, DeviceConfig::default()).unwrap();
                let a = device.create_resource(buffer(8)).unwrap();
                let blend = device
                    .create(&ObjectDesc::State {
                        ty: HandleType::BlendState,
                        desc: &[1; 8],
                    })
                    .unwrap();
                let mut dc = device.create_deferred_context().unwrap();
                dc.bind(RT0, Some(a.any())).unwrap();
                dc.bind(BLEND, Some(blend)).unwrap();
                let list = dc.finish_restoring_state();
                (device, ic, dc, world, list, a.any())
            };
            // The reference run: the last hook is the second re-bind's.
            let counting = Arc::new(FaultPlan::counting().with_log());
            let (_device, _ic, _dc, _world, list, _) = scenario(&counting);
            assert!(list.is_ok());
            let log = counting.log();
            let last = log.iter().rposition(|&h| h == "record_deferred").unwrap() as u64;
            let plan = Arc::new(FaultPlan::at(last, Fault::Error(error)));
            let (_device, mut ic, mut dc, world, list, a) = scenario(&plan);
            let case = (driver_built, error, plan.hit());
            assert!(plan.injected(), "{case:?}");
            let list = list.unwrap_or_else(|e| panic!("{case:?}: {e:?}"));
            assert!(world.errors().iter().any(|&(_, e)| e == error), "{case:?}");
            match error {
                Error::OutOfMemory => {
                    assert_eq!(dc.finish().map(drop), Err(Error::OutOfMemory), "{case:?}");
                    assert_eq!(dc.bindings().count(), 0, "{case:?}");
                }
                _ => {
                    // The first re-bind stands, the refused one is left out.
                    assert_eq!(dc.bindings().collect::<Vec<_>>(), [(RT0, a)], "{case:?}");
                }
            }
            ic.execute_command_list(&list).unwrap();
            drop((list, dc));
            ic.destroy_device().unwrap();
            world.assert_clean();
        }
    }
}

/// A Finish restoring the state that fails with an error other than out of memory (here the
/// driver refuses the Unmap that Finish adds for a resource left mapped, R-C4) abandons the
/// recording (R-C2) and binds nothing again (R-C5): the context records on with nothing
/// bound, and its next list's draw writes no target. The same Finish unrefused restores the
/// binding. In both list modes with deferred-context hooks.
#[test]
fn r_c5_r_c2_a_finish_restoring_the_state_that_fails_binds_nothing_again() {
    use crate::common::dynamic_buffer;
    use cmdlist::soft::inject::{self, Fault, FaultPlan};
    use cmdlist::{Device, Error};
    for driver_built in [false, true] {
        let config = SoftConfig {
            gpu: Gpu::Immediate,
            command_lists: true,
            driver_built,
            ..SoftConfig::from_env().unwrap()
        };
        let scenario = |plan: &Arc<FaultPlan>| {
            let (driver, kernel, world) = inject::new(plan, config.clone());
            let (device, ic) = Device::new(driver, kernel, DeviceConfig::default()).unwrap();
            let a = device.create_resource(buffer(8)).unwrap();
            let mapped = device.create_resource(dynamic_buffer(8)).unwrap();
            let mut dc = device.create_deferred_context().unwrap();
            dc.bind(RT0, Some(a.any())).unwrap();
            dc.map_discard(mapped).unwrap().fill(1);
            let mark = plan.calls();
            let list = dc.finish_restoring_state();
            (device, ic, dc, world, list, a, mark)
        };
        // The reference run: Finish's first recorded call is the Unmap it adds.
        let counting = Arc::new(FaultPlan::counting().with_log());
        let (_device, _ic, dc, _world, list, a, mark) = scenario(&counting);
        assert!(list.is_ok(), "driver-built {driver_built}");
        assert_eq!(dc.bindings().collect::<Vec<_>>(), [(RT0, a.any())]);
        let log = counting.log();
        let unmap = log[mark as usize..]
            .iter()
            .position(|&h| h == "record_deferred")
            .expect("Finish has the driver hear its Unmap");
        let plan = Arc::new(FaultPlan::at(
            mark + unmap as u64,
            Fault::Error(Error::InvalidArg),
        ));
        let (device, mut ic, mut dc, world, list, a, _) = scenario(&plan);
        let case = (driver_built, plan.hit());
        assert!(plan.injected(), "{case:?}");
        assert_eq!(list.map(drop), Err(Error::InvalidArg), "{case:?}");
        assert_eq!(dc.bindings().count(), 0, "{case:?}: nothing bound again");
        assert_eq!(dc.binding(RT0), None, "{case:?}");
        dc.command(fill_bound(5)).unwrap();
        let next = dc.finish().unwrap();
        ic.execute_command_list(&next).unwrap();
        ic.flush().unwrap();
        let memory = device.object(a).unwrap().allocation().unwrap();
        let target = world.read(memory).unwrap();
        assert_eq!(target, vec![0; 8], "{case:?}: no target bound");
        assert!(world.violations().is_empty(), "{:#?}", world.violations());
        drop((next, dc));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}
