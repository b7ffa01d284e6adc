//! The driver's work on the recording thread (R-T1, R-H1..R-H5): every call recorded on a
//! deferred context reaches `Driver::record_deferred` there, with the context-local blocks of
//! the objects it names; and lists the driver builds itself (`ListMode::DriverBuilt`):
//! executed by one `Driver::execute_command_list`, none of their operations reaching
//! `Driver::execute`, nested ones chained by the driver.

use std::sync::Arc;

use cmdlist::handle::{Query, Resource};
use cmdlist::soft::inject::{self, Fault, FaultPlan};
use cmdlist::soft::{
    self, Gpu, Hook, SoftCommand, SoftConfig, SoftDevice, SoftImmediate, SoftWorld, TraceEvent,
};
use cmdlist::{
    BindClass, BindPoint, Clock, ContextId, DeferredMode, Device, DeviceConfig, Error, Handle,
    ListMode, QueryKind,
};

use crate::common::{allocation, buffer, count, dynamic_buffer, id_of};

const RT0: BindPoint = BindPoint::new(BindClass::RenderTarget, 0);

/// A device whose soft driver records command lists: replayed by the engine, or built by
/// the driver.
fn setup(mode: ListMode) -> (SoftDevice, SoftImmediate, Arc<SoftWorld>) {
    let (device, ic, world) = soft::device(config(mode), device_config()).unwrap();
    assert_eq!(device.list_mode(), mode);
    (device, ic, world)
}

fn config(mode: ListMode) -> SoftConfig {
    SoftConfig {
        gpu: Gpu::Immediate,
        ..SoftConfig::from_env().unwrap()
    }
    .with_list_mode(mode)
}

fn device_config() -> DeviceConfig {
    DeviceConfig::default().with_list_clock(Clock::Submitted)
}

fn bytes(world: &SoftWorld, device: &SoftDevice, r: Handle<Resource>) -> Vec<u8> {
    world.read(allocation(device, r)).unwrap()
}

fn of(trace: &[TraceEvent], hook: Hook) -> Vec<TraceEvent> {
    trace.iter().filter(|e| e.hook == hook).cloned().collect()
}

/// Every kind of recorded call reaches the driver on the recording thread, in order, each
/// with the context-local block of the object it names (the soft driver reads the object's
/// id there, and checks the block is open and its own), in both modes where the driver has
/// command lists.
#[test]
fn r_t1_every_recorded_call_reaches_the_driver_on_the_recording_thread_with_its_block() {
    for mode in [ListMode::Replayed, ListMode::DriverBuilt] {
        let (device, mut ic, world) = setup(mode);
        let (a, b) = (
            device.create_resource(buffer(16)).unwrap(),
            device.create_resource(buffer(16)).unwrap(),
        );
        let d = device.create_resource(dynamic_buffer(8)).unwrap();
        let q: Handle<Query> = device.create_query(QueryKind::Event).unwrap();
        let mut inner_dc = device.create_deferred_context().unwrap();
        inner_dc
            .command(SoftCommand::Fill { dst: b, value: 2 })
            .unwrap();
        let inner = inner_dc.finish().unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        let id = dc.id();
        world.clear_trace();
        let (dc, list, thread) = std::thread::scope(|s| {
            s.spawn(|| {
                dc.command(SoftCommand::Copy { dst: b, src: a }).unwrap();
                dc.update(a, 0, &[1; 4]).unwrap();
                dc.map_discard(d).unwrap().fill(5);
                dc.unmap(d).unwrap();
                dc.bind(RT0, Some(a.any())).unwrap();
                dc.begin_query(q).unwrap();
                dc.end_query(q).unwrap();
                dc.execute_command_list(&inner).unwrap();
                let list = dc.finish().unwrap();
                (dc, list, std::thread::current().id())
            })
            .join()
            .unwrap()
        });
        assert_ne!(thread, std::thread::current().id());
        let trace = world.trace();
        let heard = of(&trace, Hook::RecordDeferred);
        let ids: Vec<u64> = heard.iter().map(|e| e.object).collect();
        let (ia, id_d, iq) = (id_of(&device, a), id_of(&device, d), id_of(&device, q));
        // Copy names src then dst; Map and Unmap of d (the Map is the driver's own hook where
        // it builds the list); the bind; Begin; End.
        let expected = match mode {
            ListMode::Replayed => vec![ia, ia, id_d, id_d, ia, iq, iq],
            _ => vec![ia, ia, id_d, ia, iq, iq],
        };
        assert_eq!(ids, expected, "{mode:?}: {heard:#?}");
        assert!(
            heard
                .iter()
                .all(|e| e.thread == thread && e.context == Some(id)),
            "{mode:?}: on the recording thread, for its context: {heard:#?}"
        );
        let bind = &heard[expected.len() - 3];
        assert_eq!(
            bind.state, 1,
            "{mode:?}: the bind's new binding is answered"
        );
        let maps = of(&trace, Hook::MapDiscardDeferred);
        match mode {
            ListMode::DriverBuilt => {
                assert_eq!(maps.len(), 1);
                assert_eq!((maps[0].object, maps[0].thread), (id_d, thread));
            }
            _ => assert!(
                maps.is_empty(),
                "the engine hands out a replayed list's Map"
            ),
        }
        let chained = of(&trace, Hook::ExecuteCommandListDeferred);
        assert_eq!(chained.len(), 1);
        assert_eq!(chained[0].thread, thread);
        // The list does what was recorded.
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
        assert_eq!(bytes(&world, &device, a)[..4], [1; 4], "{mode:?}");
        assert_eq!(bytes(&world, &device, d), vec![5; 8], "{mode:?}");
        assert_eq!(
            bytes(&world, &device, b),
            vec![2; 16],
            "{mode:?}: the inner list ran"
        );
        assert!(
            ic.query_signaled(q).unwrap(),
            "{mode:?}: the list ended the query"
        );
        drop((list, inner, dc, inner_dc));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// A driver-built list of many commands executes on the immediate context as one
/// CommandListExecute: no operation of it reaches `Driver::execute`, not even a
/// clear-state, and every command ran once.
#[test]
fn r_c3_a_driver_built_list_executes_without_one_driver_execute_of_its_commands() {
    let (device, mut ic, world) = setup(ListMode::DriverBuilt);
    let (a, b) = (
        device.create_resource(buffer(64)).unwrap(),
        device.create_resource(buffer(64)).unwrap(),
    );
    let mut dc = device.create_deferred_context().unwrap();
    for i in 0..100u8 {
        dc.update(a, u64::from(i % 64), &[i]).unwrap();
        dc.command(SoftCommand::Copy { dst: b, src: a }).unwrap();
    }
    let list = dc.finish().unwrap();
    assert_eq!(list.stats().operations, 200);
    world.clear_trace();
    ic.execute_command_list(&list).unwrap();
    let trace = world.trace();
    assert_eq!(count(&trace, Hook::ExecuteCommandList), 1);
    assert_eq!(count(&trace, Hook::Execute), 0, "{trace:#?}");
    ic.flush().unwrap();
    let expected: Vec<u8> = (0..64u8).map(|i| if i < 36 { i + 64 } else { i }).collect();
    assert_eq!(bytes(&world, &device, b), expected);
    assert_eq!(
        ic.bindings().count(),
        0,
        "the clear state after the execute (R-C3)"
    );
    drop((list, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// A driver-built list executed by another one is chained by the driver at the deferred
/// context's execute: the outer list's one CommandListExecute runs the inner list in
/// place, followed by its clear-state, at any depth; and the inner list stays executable
/// after the application dropped it.
#[test]
fn r_c3_nested_driver_built_lists_are_chained() {
    let (device, mut ic, world) = setup(ListMode::DriverBuilt);
    let (a, b) = (
        device.create_resource(buffer(8)).unwrap(),
        device.create_resource(buffer(8)).unwrap(),
    );
    let mut dc = device.create_deferred_context().unwrap();
    dc.bind(RT0, Some(a.any())).unwrap();
    dc.command(SoftCommand::FillBound {
        point: RT0,
        value: 4,
    })
    .unwrap();
    let inner = dc.finish().unwrap();
    dc.execute_command_list(&inner).unwrap();
    let middle = dc.finish().unwrap();
    dc.bind(RT0, Some(b.any())).unwrap();
    dc.execute_command_list(&middle).unwrap();
    // Nothing is bound after the chained lists: this fill writes nothing.
    dc.command(SoftCommand::FillBound {
        point: RT0,
        value: 9,
    })
    .unwrap();
    dc.execute_command_list(&inner).unwrap();
    let outer = dc.finish().unwrap();
    drop((inner, middle));
    world.clear_trace();
    ic.execute_command_list(&outer).unwrap();
    let trace = world.trace();
    assert_eq!(count(&trace, Hook::ExecuteCommandList), 1, "{trace:#?}");
    assert_eq!(count(&trace, Hook::Execute), 0, "{trace:#?}");
    ic.flush().unwrap();
    assert_eq!(
        bytes(&world, &device, a),
        vec![4; 8],
        "the inner list ran, twice"
    );
    assert_eq!(
        bytes(&world, &device, b),
        vec![0; 8],
        "nothing bound after a chain"
    );
    assert!(world.violations().is_empty(), "{:#?}", world.violations());
    drop((outer, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// An error from the recording hook refuses the call, reports it on the context's sink
/// (R-E2) and, out of memory, removes the context locally (R-E3); the next Finish answers
/// out of memory and the context records again.
#[test]
fn r_e2_r_e3_a_recording_hook_error_is_reported_and_out_of_memory_removes_the_context() {
    for mode in [ListMode::Replayed, ListMode::DriverBuilt] {
        for error in [Error::InvalidArg, Error::OutOfMemory] {
            // Find the recording hook's call number, then fail it.
            let scenario = |plan: &Arc<FaultPlan>| {
                let (driver, kernel, world) = inject::new(plan, config(mode));
                let (device, mut ic) = Device::new(driver, kernel, device_config()).unwrap();
                let a = device.create_resource(buffer(8)).unwrap();
                let mut dc = device.create_deferred_context().unwrap();
                let result = dc.command(SoftCommand::Fill { dst: a, value: 1 });
                let mode_after = dc.mode();
                let finished = dc.finish().map(|_| ());
                dc.command(SoftCommand::Fill { dst: a, value: 2 }).unwrap();
                let list = dc.finish().unwrap();
                ic.execute_command_list(&list).unwrap();
                drop((list, dc));
                ic.destroy_device().unwrap();
                (result, mode_after, finished, world)
            };
            let counting = Arc::new(FaultPlan::counting().with_log());
            let _ = scenario(&counting);
            let call = counting
                .log()
                .iter()
                .position(|h| *h == "record_deferred")
                .unwrap() as u64;
            let plan = Arc::new(FaultPlan::at(call, Fault::Error(error)));
            let (result, mode_after, finished, world) = scenario(&plan);
            assert_eq!(result, Err(error), "{mode:?}");
            assert!(world
                .errors()
                .iter()
                .any(|(ctx, e)| matches!(ctx, ContextId::Deferred(_)) && *e == error));
            if error == Error::OutOfMemory {
                assert_eq!(mode_after, DeferredMode::Removed, "{mode:?}");
                assert_eq!(finished, Err(Error::OutOfMemory), "{mode:?}");
            } else {
                assert_eq!(mode_after, DeferredMode::Recording, "{mode:?}");
                assert_eq!(finished, Ok(()), "{mode:?}: an empty list");
            }
            world.assert_clean();
        }
    }
}

/// A Map(DISCARD) the driver refuses, where it builds its lists, counts nothing against the
/// budget (R-E3) and leaves the resource unmapped.
#[test]
fn r_e3_a_refused_driver_map_counts_nothing() {
    let run = |plan: &Arc<FaultPlan>| {
        let (driver, kernel, world) = inject::new(plan, config(ListMode::DriverBuilt));
        let (device, mut ic) = Device::new(driver, kernel, device_config()).unwrap();
        let d = device.create_resource(dynamic_buffer(64)).unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        let before = dc.stats().recorded_bytes;
        let mapped = dc.map_discard(d).map(|b| b.len());
        let counted = dc.stats().recorded_bytes - before;
        // Mapped again: refused only if the first Map is still open.
        let again = dc.map_discard(d).map(|b| b.len());
        let _ = dc.abandon();
        drop(dc);
        ic.destroy_device().unwrap();
        world.assert_clean();
        (mapped, counted, again)
    };
    let counting = Arc::new(FaultPlan::counting().with_log());
    assert_eq!(run(&counting).0, Ok(64));
    let call = counting
        .log()
        .iter()
        .position(|h| *h == "map_discard_deferred")
        .unwrap() as u64;
    let plan = Arc::new(FaultPlan::at(call, Fault::Error(Error::InvalidArg)));
    let (mapped, counted, again) = run(&plan);
    assert_eq!(mapped, Err(Error::InvalidArg));
    assert_eq!(counted, 0, "a refused Map counts nothing");
    assert_eq!(again, Ok(64), "and leaves the resource unmapped");
}

/// Driver memory of another length than the resource's new contents (here one byte short,
/// [`Fault::WrongLength`]) is the driver's error (R-E1): the Map fails with `InvalidArg`.
/// The driver made its Map, which no call can undo, so the context is removed locally (its
/// recording abandoned, the driver's Map with it, R-E3): Finish answers out of memory, and
/// the next recording maps and finishes cleanly, with no rule broken.
#[test]
fn r_e1_driver_map_memory_of_the_wrong_length_is_refused() {
    let run = |plan: &Arc<FaultPlan>| {
        let (driver, kernel, world) = inject::new(plan, config(ListMode::DriverBuilt));
        let (device, mut ic) = Device::new(driver, kernel, device_config()).unwrap();
        let d = device.create_resource(dynamic_buffer(64)).unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        let mapped = dc.map_discard(d).map(|b| b.len());
        let mode = dc.mode();
        let finished = dc.finish().map(drop);
        // The next recording maps, writes and finishes cleanly.
        dc.map_discard(d).unwrap().fill(5);
        let list = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
        let bytes = world.read(device.object(d).unwrap().allocation().unwrap());
        assert!(world.violations().is_empty(), "{:?}", world.violations());
        drop((list, dc));
        world.complete_all();
        ic.destroy_device().unwrap();
        world.assert_clean();
        (mapped, mode, finished, bytes)
    };
    let counting = Arc::new(FaultPlan::counting().with_log());
    assert_eq!(run(&counting).0, Ok(64));
    let call = counting
        .log()
        .iter()
        .position(|h| *h == "map_discard_deferred")
        .unwrap() as u64;
    let plan = Arc::new(FaultPlan::at(call, Fault::WrongLength));
    let (mapped, mode, finished, bytes) = run(&plan);
    assert!(plan.injected());
    assert_eq!(mapped, Err(Error::InvalidArg));
    // The driver made a Map the engine refused: its recording is dropped (R-E3).
    assert_eq!(mode, DeferredMode::Removed);
    assert_eq!(finished, Err(Error::OutOfMemory));
    assert_eq!(bytes, Some(vec![5; 64]));
}

/// The same for a Map(NO_OVERWRITE) whose memory the driver hands out one byte short
/// (R-E1, R-M2): refused with `InvalidArg`, the driver's Map dropped with its recording
/// (a local removal, R-E3), and the next recording clean.
#[test]
fn r_e1_r_m2_driver_no_overwrite_memory_of_the_wrong_length_is_refused() {
    let run = |plan: &Arc<FaultPlan>| {
        let (driver, kernel, world) = inject::new(plan, config(ListMode::DriverBuilt));
        let (device, mut ic) = Device::new(driver, kernel, device_config()).unwrap();
        let ring = device
            .create_resource(cmdlist::ResourceDesc {
                bind: cmdlist::BindFlags::VERTEX_BUFFER,
                ..dynamic_buffer(64)
            })
            .unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        dc.map_discard(ring).unwrap().fill(1);
        dc.unmap(ring).unwrap();
        let mapped = dc.map_no_overwrite(ring).map(|b| b.len());
        let mode = dc.mode();
        let finished = dc.finish().map(drop);
        dc.map_discard(ring).unwrap().fill(5);
        dc.unmap(ring).unwrap();
        let list = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
        let bytes = world.read(device.object(ring).unwrap().allocation().unwrap());
        assert!(world.violations().is_empty(), "{:?}", world.violations());
        drop((list, dc));
        world.complete_all();
        ic.destroy_device().unwrap();
        world.assert_clean();
        (mapped, mode, finished, bytes)
    };
    let counting = Arc::new(FaultPlan::counting().with_log());
    assert_eq!(run(&counting).0, Ok(64));
    let call = counting
        .log()
        .iter()
        .position(|h| *h == "map_no_overwrite_deferred")
        .unwrap() as u64;
    let plan = Arc::new(FaultPlan::at(call, Fault::WrongLength));
    let (mapped, mode, finished, bytes) = run(&plan);
    assert!(plan.injected());
    assert_eq!(mapped, Err(Error::InvalidArg));
    assert_eq!(mode, DeferredMode::Removed);
    assert_eq!(finished, Err(Error::OutOfMemory));
    assert_eq!(bytes, Some(vec![5; 64]));
}

/// A bind the driver refuses at record time fails with the driver's error (R-E1) and
/// leaves the old binding in force: the state-refresh query answers it (R-C1), the list
/// draws into it, and that list's Finish and the next list are clean, in both modes where
/// the driver has lists.
#[test]
fn r_c1_r_e1_a_bind_the_driver_refuses_leaves_the_old_binding() {
    for mode in [ListMode::Replayed, ListMode::DriverBuilt] {
        let scenario = |plan: &Arc<FaultPlan>| {
            let (driver, kernel, world) = inject::new(plan, config(mode));
            let (device, mut ic) = Device::new(driver, kernel, device_config()).unwrap();
            let (a, b) = (
                device.create_resource(buffer(8)).unwrap(),
                device.create_resource(buffer(8)).unwrap(),
            );
            let mut dc = device.create_deferred_context().unwrap();
            dc.bind(RT0, Some(a.any())).unwrap();
            let mark = plan.calls() as usize;
            let result = dc.bind(RT0, Some(b.any()));
            let bound = dc.binding(RT0);
            dc.command(SoftCommand::FillBound {
                point: RT0,
                value: 7,
            })
            .unwrap();
            let list = dc.finish().unwrap();
            ic.execute_command_list(&list).unwrap();
            // The next list.
            dc.command(SoftCommand::Fill { dst: b, value: 1 }).unwrap();
            let next = dc.finish().unwrap();
            ic.execute_command_list(&next).unwrap();
            ic.flush().unwrap();
            let read = |r| world.read(device.object(r).unwrap().allocation().unwrap());
            let written = (read(a).unwrap(), read(b).unwrap());
            let violations = world.violations();
            drop((list, next, dc, device));
            ic.destroy_device().unwrap();
            world.assert_clean();
            (
                mark,
                result,
                bound.map(|h| h == a.any()),
                written,
                violations,
            )
        };
        let counting = Arc::new(FaultPlan::counting().with_log());
        let (mark, result, ..) = scenario(&counting);
        assert_eq!(result, Ok(()), "{mode:?}");
        // The refused bind's recording hook: the first one after the mark.
        let call = mark
            + counting.log()[mark..]
                .iter()
                .position(|h| *h == "record_deferred")
                .unwrap();
        let plan = Arc::new(FaultPlan::at(call as u64, Fault::Error(Error::InvalidArg)));
        let (_, result, bound_a, (a, b), violations) = scenario(&plan);
        assert!(plan.injected(), "{mode:?}");
        assert_eq!(result, Err(Error::InvalidArg), "{mode:?}");
        assert_eq!(bound_a, Some(true), "{mode:?}: the old binding answered");
        assert_eq!(
            a,
            vec![7; 8],
            "{mode:?}: the list drew into the old binding"
        );
        assert_eq!(b, vec![1; 8], "{mode:?}: the next list ran");
        assert!(violations.is_empty(), "{mode:?}: {violations:#?}");
    }
}

/// Identities rotated between a list's Finish and its execute (R-X5): the list names its
/// objects by handle and resolves them when it runs, so its writes land in the allocations
/// the resources have at execute, and its reads come from there; the views it holds are
/// refreshed before its CommandListExecute. In both modes where the driver has lists: the
/// soft driver's built lists resolve through the `Resolver` at execute, as a driver's must.
#[test]
fn r_x5_identities_rotated_between_finish_and_execute_are_resolved_at_execute() {
    use cmdlist::dxgi::DisplayFormat;
    use cmdlist::{BindFlags, HandleType, ResourceDesc, Texture2d, ViewDesc};

    for mode in [ListMode::Replayed, ListMode::DriverBuilt] {
        let (device, mut ic, world) = setup(mode);
        let texture = Texture2d {
            width: 4,
            height: 2,
            format: DisplayFormat::B8G8R8A8Unorm.to_dxgi(),
            ..Texture2d::default()
        };
        let bind = BindFlags::PRESENT | BindFlags::RENDER_TARGET;
        let desc = ResourceDesc::texture(texture, bind).unwrap();
        let (x, y) = (
            device.create_resource(desc).unwrap(),
            device.create_resource(desc).unwrap(),
        );
        let copy = device.create_resource(buffer(32)).unwrap();
        // y's second 4 bytes.
        let view_desc = ViewDesc {
            resource: y,
            first_byte: 4,
            byte_len: 4,
        };
        let view = device
            .create_view(HandleType::RenderTargetView, view_desc)
            .unwrap();
        let (ax, ay) = (allocation(&device, x), allocation(&device, y));
        ic.command(&SoftCommand::Fill { dst: x, value: 3 }).unwrap();
        ic.command(&SoftCommand::Fill { dst: y, value: 5 }).unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        dc.command(SoftCommand::Copy { dst: copy, src: x }).unwrap();
        dc.command(SoftCommand::ClearView { view, value: 9 })
            .unwrap();
        dc.update(y, 0, &[1, 2, 3, 4]).unwrap();
        let list = dc.finish().unwrap();
        // x now has y's allocation (5s), y x's (3s).
        ic.rotate_resource_identities(&[x, y]).unwrap();
        assert_eq!((allocation(&device, x), allocation(&device, y)), (ay, ax));
        world.clear_trace();
        ic.execute_command_list(&list).unwrap();
        let trace = world.trace();
        let refreshed = crate::common::position(&trace, |e| e.hook == Hook::RefreshView);
        let executed = crate::common::position(&trace, |e| e.hook == Hook::ExecuteCommandList);
        assert!(
            refreshed.is_some() && refreshed < executed,
            "{mode:?}: the view refreshed before the execute: {trace:#?}"
        );
        ic.flush().unwrap();
        assert_eq!(
            bytes(&world, &device, copy),
            vec![5; 32],
            "{mode:?}: read from x's allocation at execute"
        );
        let mut expected = vec![3; 32];
        expected[..8].copy_from_slice(&[1, 2, 3, 4, 9, 9, 9, 9]);
        assert_eq!(
            world.read(ax).unwrap(),
            expected,
            "{mode:?}: written into y's allocation at execute"
        );
        assert_eq!(world.read(ay).unwrap(), vec![5; 32], "{mode:?}: untouched");
        assert!(world.violations().is_empty(), "{:#?}", world.violations());
        drop((list, dc));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}
