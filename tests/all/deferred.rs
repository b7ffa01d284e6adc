//! Deferred contexts and command lists against the rules of docs/PROTOCOL.md: state-refresh
//! answers around Finish and Execute (R-C1, R-C3), Abandon's order (R-C2), the API
//! guarantees at Execute and Finish (R-C4), error sinks (R-E2), context-local removal after
//! running out of memory (R-E3) and lists executed on the wrong device (R-R8).

use cmdlist::handle::{Query, Resource, View};
use cmdlist::soft::{
    self, Hook, SoftCommand, SoftConfig, SoftDriver, SoftKernel, SoftWorld, TraceEvent,
};
use cmdlist::{
    AnyHandle, AppError, BindClass, BindPoint, ContextId, DeferredContext, Device, DeviceConfig,
    Error, Handle, HandleType, ImmediateContext, ObjectDesc, QueryKind, ResourceDesc, Stage, Usage,
    ViewDesc,
};

use crate::common::{allocation, count, dynamic_buffer, events_of, hooks, id_of, native};

type Dev = Device<SoftDriver, SoftKernel>;
type Ic = ImmediateContext<SoftDriver, SoftKernel>;
type Dc = DeferredContext<SoftDriver, SoftKernel>;

fn setup(config: DeviceConfig) -> (Dev, Ic, std::sync::Arc<SoftWorld>) {
    soft::device(SoftConfig::from_env().unwrap(), config).unwrap()
}

/// [`setup`] with a driver that records command lists itself, for the tests of the hooks
/// only such a driver has.
fn setup_native(config: DeviceConfig) -> (Dev, Ic, std::sync::Arc<SoftWorld>) {
    soft::device(native(), config).unwrap()
}

fn resource(device: &Dev, size: u64) -> Handle<Resource> {
    device
        .create_resource(ResourceDesc {
            byte_size: size,
            usage: Usage::Dynamic,
            ..Default::default()
        })
        .unwrap()
}

fn view(device: &Dev, resource: Handle<Resource>, first_byte: u64, byte_len: u64) -> Handle<View> {
    device
        .create_view(
            HandleType::ShaderResourceView,
            ViewDesc {
                resource,
                first_byte,
                byte_len,
            },
        )
        .unwrap()
}

fn blend_state(device: &Dev) -> AnyHandle {
    device
        .create(&ObjectDesc::State {
            ty: HandleType::BlendState,
            desc: &[1, 2, 3],
        })
        .unwrap()
}

fn query(device: &Dev, kind: QueryKind) -> Handle<Query> {
    device.create_query(kind).unwrap()
}

/// A resource's bytes: those of its current allocation, which a Map(DISCARD) on the
/// immediate context renames (R-M5).
fn bytes(world: &SoftWorld, device: &soft::SoftDevice, resource: Handle<Resource>) -> Vec<u8> {
    world.read(allocation(device, resource)).unwrap()
}

/// CreateCommandList or RecycleCreateCommandList: the list's creation at Finish (R-R7).
fn is_create(hook: Hook) -> bool {
    matches!(
        hook,
        Hook::CreateCommandList | Hook::RecycleCreateCommandList
    )
}

const SRV0: BindPoint = BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0);
const VB0: BindPoint = BindPoint::new(BindClass::VertexBuffer, 0);
const VB1: BindPoint = BindPoint::new(BindClass::VertexBuffer, 1);
const BLEND: BindPoint = BindPoint::new(BindClass::BlendState, 0);

#[test]
fn r_c1_state_refresh_reports_bindings_during_create_and_nothing_after() {
    let (device, mut ic, world) = setup_native(DeviceConfig::default());
    let r = resource(&device, 64);
    let r2 = resource(&device, 64);
    let v = view(&device, r, 0, 16);
    let blend = blend_state(&device);
    let mut dc = device.create_deferred_context().unwrap();
    let c = dc.id();

    dc.bind(SRV0, Some(v.any())).unwrap();
    dc.bind(VB0, Some(r2.any())).unwrap();
    dc.bind(VB1, Some(r2.any())).unwrap();
    dc.bind(BLEND, Some(blend)).unwrap();
    dc.bind(VB1, None).unwrap();
    dc.update(r2, 0, &[5; 8]).unwrap();
    assert_eq!(dc.binding(SRV0), Some(v.any()));
    let mut all: Vec<_> = dc.bindings().collect();
    all.sort_by_key(|&(point, _)| point);
    assert_eq!(dc.bindings().collect::<Vec<_>>(), all, "sorted by point");
    assert_eq!(all.len(), 3, "VB1 was unbound: {all:?}");
    assert!(all.contains(&(SRV0, v.any())) && all.contains(&(VB0, r2.any())));
    assert_eq!(dc.binding(VB0), Some(r2.any()));
    assert_eq!(dc.binding(VB1), None);
    assert_eq!(dc.stats().open_handles, 4, "r, v, r2 and the blend state");

    world.clear_trace();
    let list = dc.finish().unwrap();
    let ev = events_of(&world, c);
    let create = ev
        .iter()
        .position(|e| is_create(e.hook))
        .expect("(Recycle)CreateCommandList");
    assert_eq!(
        ev[create].state, 3,
        "during the create, the three bindings are reported: {ev:#?}"
    );
    let closes: Vec<usize> = (0..ev.len())
        .filter(|&i| ev[i].hook == Hook::CloseLocal)
        .collect();
    assert_eq!(closes.len(), 4, "every open handle is closed: {ev:#?}");
    assert!(
        closes.iter().all(|&i| i > create),
        "closing comes after the create: {ev:#?}"
    );
    assert!(
        closes.iter().all(|&i| ev[i].state == 0),
        "nothing is reported bound while closing: {ev:#?}"
    );
    let recycle = ev
        .iter()
        .position(|e| e.hook == Hook::RecycleCreateDeferredContext)
        .expect("the context is recycled");
    assert!(
        closes.iter().all(|&i| i < recycle),
        "handles are closed before the recycle: {ev:#?}"
    );
    assert_eq!(count(&ev, Hook::DestroyDeferredContext), 0);
    assert_eq!(dc.binding(SRV0), None);
    assert_eq!(dc.binding(VB0), None);
    assert_eq!(dc.binding(BLEND), None);
    assert_eq!(dc.bindings().count(), 0, "nothing bound after Finish");
    assert_eq!(dc.stats().open_handles, 0);
    assert_eq!(dc.driver_state().unwrap().open_handles, 0);

    // The next recording starts from empty state: one bind is one reported binding.
    dc.bind(BLEND, Some(blend)).unwrap();
    world.clear_trace();
    let second = dc.finish().unwrap();
    let ev = events_of(&world, c);
    let create = ev.iter().find(|e| is_create(e.hook)).unwrap();
    assert_eq!(create.state, 1, "{ev:#?}");

    ic.execute_command_list(&list).unwrap();
    ic.execute_command_list(&second).unwrap();
    ic.flush().unwrap();
    assert_eq!(&bytes(&world, &device, r2)[..8], &[5; 8]);
    world.assert_no_violations();
    drop((list, second, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_c1_recycled_list_create_also_reports_bindings_then_nothing() {
    let soft_config = SoftConfig {
        gpu: soft::Gpu::Immediate,
        ..native()
    };
    let (device, mut ic, world) = soft::device(soft_config, DeviceConfig::default()).unwrap();
    let r = resource(&device, 64);
    let v = view(&device, r, 0, 8);
    let blend = blend_state(&device);
    let mut dc = device.create_deferred_context().unwrap();
    let c = dc.id();
    dc.update(r, 0, &[1; 8]).unwrap();
    let first = dc.finish().unwrap();
    ic.execute_command_list(&first).unwrap();
    drop(first);
    ic.flush().unwrap();

    dc.bind(SRV0, Some(v.any())).unwrap();
    dc.bind(BLEND, Some(blend)).unwrap();
    world.clear_trace();
    let second = dc.finish().unwrap();
    let ev = events_of(&world, c);
    let create = ev
        .iter()
        .position(|e| e.hook == Hook::RecycleCreateCommandList)
        .expect("the first list's memory is recycled for the second");
    assert_eq!(ev[create].state, 2, "{ev:#?}");
    let closes: Vec<&TraceEvent> = ev[create..]
        .iter()
        .filter(|e| e.hook == Hook::CloseLocal)
        .collect();
    assert_eq!(closes.len(), 3);
    assert!(closes.iter().all(|e| e.state == 0));
    assert!(ev[..create].iter().all(|e| e.hook != Hook::CloseLocal));
    world.assert_no_violations();
    drop((second, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_c1_without_recycling_closes_then_destroys_and_recreates_the_context() {
    let (device, mut ic, world) = setup_native(DeviceConfig::default().with_recycle(false));
    let r = resource(&device, 64);
    let v = view(&device, r, 8, 8);
    let mut dc = device.create_deferred_context().unwrap();
    let c = dc.id();
    dc.bind(SRV0, Some(v.any())).unwrap();
    dc.command(SoftCommand::Fill { dst: r, value: 1 }).unwrap();
    world.clear_trace();
    let list = dc.finish().unwrap();
    let ev = events_of(&world, c);
    let seq: Vec<Hook> = hooks(&ev)
        .into_iter()
        .filter(|h| *h != Hook::CalcDeferredContextHandleSize)
        .collect();
    assert_eq!(
        seq,
        vec![
            Hook::CreateCommandList,
            Hook::CloseLocal,
            Hook::CloseLocal,
            Hook::DestroyDeferredContext,
            Hook::CreateDeferredContext,
        ],
        "{ev:#?}"
    );
    assert_eq!(
        ev.iter()
            .find(|e| e.hook == Hook::CreateCommandList)
            .unwrap()
            .state,
        1
    );
    assert_eq!(count(&ev, Hook::RecycleCreateDeferredContext), 0);
    world.assert_no_violations();
    drop((list, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_c1_dropping_a_recording_context_closes_its_handles_before_destroying_it() {
    let (device, mut ic, world) = setup_native(DeviceConfig::default());
    let r = resource(&device, 64);
    let v = view(&device, r, 0, 8);
    let mut dc = device.create_deferred_context().unwrap();
    let c = dc.id();
    dc.bind(SRV0, Some(v.any())).unwrap();
    dc.update(r, 0, &[1; 4]).unwrap();
    world.clear_trace();
    drop(dc);
    let ev = events_of(&world, c);
    assert_eq!(
        hooks(&ev),
        vec![
            Hook::CloseLocal,
            Hook::CloseLocal,
            Hook::DestroyDeferredContext
        ],
        "{ev:#?}"
    );
    assert!(ev.iter().all(|e| e.state == 0));
    assert_eq!(
        count(&world.trace(), Hook::Execute),
        0,
        "a dropped recording runs nothing"
    );
    // The handles' holds were released: destroying the objects really destroys them.
    let (rid, vid) = (id_of(&device, r), id_of(&device, v));
    device.destroy(v).unwrap();
    device.destroy(r).unwrap();
    ic.flush().unwrap();
    let destroyed: Vec<u64> = world
        .trace()
        .iter()
        .filter(|e| e.hook == Hook::DestroyObject)
        .map(|e| e.object)
        .collect();
    assert_eq!(destroyed, vec![vid, rid]);
    world.assert_no_violations();
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_c3_execute_clears_state() {
    let (device, mut ic, world) = setup(DeviceConfig::default());
    let r = resource(&device, 32);
    let r2 = resource(&device, 32);
    let v = view(&device, r, 0, 8);
    let blend = blend_state(&device);
    ic.bind(SRV0, Some(v.any())).unwrap();
    ic.bind(BLEND, Some(blend)).unwrap();
    assert_eq!(ic.bindings().count(), 2);

    let mut dc = device.create_deferred_context().unwrap();
    dc.bind(VB0, Some(r2.any())).unwrap();
    dc.update(r2, 4, &[6; 4]).unwrap();
    let list = dc.finish().unwrap();

    world.clear_trace();
    ic.execute_command_list(&list).unwrap();
    let ev = world.trace();
    let exec: Vec<&TraceEvent> = ev
        .iter()
        .filter(|e| e.hook == Hook::ExecuteCommandList)
        .collect();
    if device.emulates_command_lists() {
        assert!(exec.is_empty(), "an emulated list has no driver side");
    } else {
        assert_eq!(exec.len(), 1);
        assert_eq!(
            exec[0].state, 2,
            "during the execute, the bindings from before it are reported"
        );
    }
    if device.list_mode().replays() {
        let replayed = ev.iter().find(|e| e.hook == Hook::Execute).unwrap();
        assert_eq!(
            replayed.state, 2,
            "during the replay too, the bindings from before the execute are reported"
        );
    }
    assert_eq!(
        ic.bindings().count(),
        0,
        "after the execute, nothing is bound (not even the list's binds)"
    );
    assert_eq!(ic.binding(SRV0), None);
    assert_eq!(ic.binding(VB0), None);
    assert_eq!(&bytes(&world, &device, r2)[4..8], &[6; 4]);

    // From the next call on the state is empty; one new bind is one reported binding.
    world.clear_trace();
    ic.execute_command_list(&list).unwrap();
    let first = world.trace()[0].clone();
    assert_eq!(first.state, 0);
    let expected = match device.emulates_command_lists() {
        true => Hook::Execute, // the clear-state that starts an emulated list
        false => Hook::ExecuteCommandList,
    };
    assert_eq!(first.hook, expected);
    ic.bind(BLEND, Some(blend)).unwrap();
    world.clear_trace();
    ic.execute_command_list(&list).unwrap();
    let first = world.trace()[0].clone();
    assert_eq!((first.hook, first.state), (expected, 1));
    assert_eq!(ic.bindings().count(), 0);
    world.assert_no_violations();
    drop((list, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_c4_map_conflict_is_application_error_and_changes_nothing() {
    let (device, mut ic, world) = setup(DeviceConfig::default());
    let r = resource(&device, 32);
    let r2 = resource(&device, 32);
    ic.update(r, 0, &[1; 32]).unwrap();
    ic.update(r2, 0, &[2; 32]).unwrap();

    let mut dc = device.create_deferred_context().unwrap();
    dc.update(r2, 0, &[7; 32]).unwrap();
    dc.map_discard(r).unwrap().fill(9);
    dc.unmap(r).unwrap();
    let list = dc.finish().unwrap();

    ic.map_discard(r).unwrap().fill(3);
    world.clear_trace();
    let errors_before = world.errors().len();
    assert_eq!(
        ic.execute_command_list(&list),
        Err(Error::Application(AppError::MapConflict))
    );
    assert_eq!(
        &world.errors()[errors_before..],
        &[(
            ContextId::Immediate,
            Error::Application(AppError::MapConflict)
        )]
    );
    let ev = world.trace();
    assert_eq!(
        count(&ev, Hook::ExecuteCommandList),
        0,
        "nothing of the list runs: {ev:#?}"
    );
    assert_eq!(
        count(&ev, Hook::Execute),
        0,
        "not even the clear-state: {ev:#?}"
    );
    assert_eq!(bytes(&world, &device, r), vec![1; 32]);
    assert_eq!(
        bytes(&world, &device, r2),
        vec![2; 32],
        "the list's other commands did not run either"
    );

    // A mapping of another resource is no conflict; once unmapped the list executes.
    ic.unmap(r).unwrap();
    ic.map_discard(r2).unwrap().fill(4);
    ic.execute_command_list(&list).unwrap();
    assert_eq!(bytes(&world, &device, r), vec![9; 32]);
    assert_eq!(bytes(&world, &device, r2), vec![7; 32]);
    ic.unmap(r2).unwrap();
    ic.flush().unwrap();
    world.assert_no_violations();
    drop((list, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_c4_query_conflict_is_application_error_and_changes_nothing() {
    let (device, mut ic, world) = setup(DeviceConfig::default());
    let r = resource(&device, 16);
    let q = query(&device, QueryKind::Occlusion);
    let mut dc = device.create_deferred_context().unwrap();
    dc.begin_query(q).unwrap();
    dc.update(r, 0, &[5; 16]).unwrap();
    dc.end_query(q).unwrap();
    let begins_and_ends = dc.finish().unwrap();
    // A list that only ends the query names it too.
    dc.update(r, 0, &[6; 16]).unwrap();
    dc.end_query(q).unwrap();
    let only_ends = dc.finish().unwrap();

    ic.begin_query(q).unwrap();
    world.clear_trace();
    for list in [&begins_and_ends, &only_ends] {
        let errors_before = world.errors().len();
        assert_eq!(
            ic.execute_command_list(list),
            Err(Error::Application(AppError::QueryConflict))
        );
        assert_eq!(
            &world.errors()[errors_before..],
            &[(
                ContextId::Immediate,
                Error::Application(AppError::QueryConflict)
            )]
        );
    }
    let ev = world.trace();
    assert_eq!(count(&ev, Hook::ExecuteCommandList), 0, "{ev:#?}");
    assert_eq!(count(&ev, Hook::Execute), 0, "{ev:#?}");
    assert_eq!(bytes(&world, &device, r), vec![0; 16]);

    ic.end_query(q).unwrap();
    ic.execute_command_list(&begins_and_ends).unwrap();
    assert_eq!(bytes(&world, &device, r), vec![5; 16]);
    ic.execute_command_list(&only_ends).unwrap();
    assert_eq!(bytes(&world, &device, r), vec![6; 16]);
    ic.flush().unwrap();
    world.assert_no_violations();
    drop((begins_and_ends, only_ends, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_c4_finish_ends_begun_queries_and_unmaps() {
    let (device, mut ic, world) = setup(DeviceConfig::default());
    let r = resource(&device, 32);
    let q = query(&device, QueryKind::Event);
    let qid = id_of(&device, q);
    ic.update(r, 0, &[0xEE; 32]).unwrap();

    let mut dc = device.create_deferred_context().unwrap();
    dc.begin_query(q).unwrap();
    dc.map_discard(r).unwrap()[..4].copy_from_slice(&[1, 2, 3, 4]);
    // Neither ended nor unmapped.
    let list = dc.finish().unwrap();
    assert_eq!(
        list.stats().operations,
        3,
        "Begin, the End Finish added, the Unmap's contents"
    );
    assert_eq!(list.stats().payload_bytes, 32);
    // The context forgot both: a new Begin and a new Map are not "already begun / mapped".
    dc.begin_query(q).unwrap();
    dc.map_discard(r).unwrap();
    dc.abandon().unwrap();

    world.clear_trace();
    ic.execute_command_list(&list).unwrap();
    let mut expect = vec![0; 32];
    expect[..4].copy_from_slice(&[1, 2, 3, 4]);
    assert_eq!(
        bytes(&world, &device, r),
        expect,
        "the still-mapped contents landed (zeroed Discard + writes)"
    );
    let query_ops = world
        .trace()
        .iter()
        .filter(|e| e.hook == Hook::Execute && e.object == qid)
        .count();
    // A driver-built list's Begin and End run inside its execute, not as operations.
    let expected = if device.list_mode().replays() { 2 } else { 0 };
    assert_eq!(query_ops, expected, "the list begins and ends the query");
    // The query was ended by the list: GetData is no longer an invalid call.
    assert!(ic.query_signaled(q).is_ok());
    // And the list counts as having mapped r (R-C4 at execute).
    ic.map_discard(r).unwrap();
    assert_eq!(
        ic.execute_command_list(&list),
        Err(Error::Application(AppError::MapConflict))
    );
    ic.unmap(r).unwrap();
    ic.flush().unwrap();
    world.assert_no_violations();
    drop((list, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_c2_abandon_order_hook_unbind_close_recycle() {
    for recycle in [true, false] {
        let (device, mut ic, world) = setup_native(DeviceConfig::default().with_recycle(recycle));
        let r = resource(&device, 64);
        let r2 = resource(&device, 64);
        let r3 = resource(&device, 64);
        let v = view(&device, r, 0, 32);
        let blend = blend_state(&device);
        let mut dc = device.create_deferred_context().unwrap();
        let c = dc.id();
        dc.bind(SRV0, Some(v.any())).unwrap();
        dc.bind(VB0, Some(r2.any())).unwrap();
        dc.bind(BLEND, Some(blend)).unwrap();
        dc.update(r3, 0, &[1; 8]).unwrap();
        assert_eq!(dc.stats().open_handles, 5);

        world.clear_trace();
        dc.abandon().unwrap();
        let ev = events_of(&world, c);
        let mut expect = vec![
            Hook::AbandonCommandList,
            Hook::AbandonUnbind,
            Hook::AbandonUnbind,
            Hook::AbandonUnbind,
            Hook::CloseLocal,
            Hook::CloseLocal,
            Hook::CloseLocal,
            Hook::CloseLocal,
            Hook::CloseLocal,
        ];
        if recycle {
            expect.push(Hook::RecycleCreateDeferredContext);
        } else {
            expect.extend([Hook::DestroyDeferredContext, Hook::CreateDeferredContext]);
        }
        assert_eq!(hooks(&ev), expect, "recycle {recycle}: {ev:#?}");
        let unbind_states: Vec<usize> = ev
            .iter()
            .filter(|e| e.hook == Hook::AbandonUnbind)
            .map(|e| e.state)
            .collect();
        assert_eq!(
            unbind_states,
            vec![2, 1, 0],
            "bindings are undone one by one"
        );
        assert!(ev
            .iter()
            .filter(|e| e.hook == Hook::CloseLocal)
            .all(|e| e.state == 0));
        assert!(!world.trace().iter().any(|e| is_create(e.hook)));
        assert_eq!(count(&world.trace(), Hook::Execute), 0);
        assert_eq!(dc.stats().abandoned, 1);
        assert_eq!(dc.stats().open_handles, 0);
        assert_eq!(dc.stats().operations, 0);
        assert_eq!(dc.binding(SRV0), None);

        // Ready to record again; the abandoned operations are gone.
        dc.update(r2, 0, &[4; 4]).unwrap();
        let list = dc.finish().unwrap();
        assert_eq!(list.stats().operations, 1);
        ic.execute_command_list(&list).unwrap();
        assert_eq!(&bytes(&world, &device, r2)[..4], &[4; 4]);
        assert_eq!(
            bytes(&world, &device, r3),
            vec![0; 64],
            "abandoned update never runs"
        );

        // The abandoned recording released its objects.
        let vid = id_of(&device, v);
        device.destroy(v).unwrap();
        ic.flush().unwrap();
        assert!(world
            .trace()
            .iter()
            .any(|e| e.hook == Hook::DestroyObject && e.object == vid));
        world.assert_no_violations();
        drop((list, dc));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

#[test]
fn r_e2_dc_error_goes_to_its_own_sink() {
    let (device, mut ic, world) = setup(DeviceConfig::default());
    let r = resource(&device, 16);
    let dead = resource(&device, 16);
    device.destroy(dead).unwrap();
    ic.flush().unwrap();
    let mut a = device.create_deferred_context().unwrap();
    let mut b = device.create_deferred_context().unwrap();
    let (ca, cb) = (a.id(), b.id());
    assert_ne!(ca, cb);
    assert!(world.errors().is_empty());

    a.update(r, 0, &[1; 4]).unwrap();
    assert_eq!(
        a.update(r, 12, &[1; 8]),
        Err(Error::Application(AppError::OutOfRange))
    );
    assert_eq!(
        b.command(SoftCommand::Fill {
            dst: dead,
            value: 1
        }),
        Err(Error::Application(AppError::StaleHandle))
    );
    assert_eq!(b.unmap(r), Err(Error::Application(AppError::InvalidState)));
    assert_eq!(ic.unmap(r), Err(Error::Application(AppError::InvalidState)));
    assert_eq!(
        world.errors(),
        vec![
            (
                ContextId::Deferred(ca),
                Error::Application(AppError::OutOfRange)
            ),
            (
                ContextId::Deferred(cb),
                Error::Application(AppError::StaleHandle)
            ),
            (
                ContextId::Deferred(cb),
                Error::Application(AppError::InvalidState)
            ),
            (
                ContextId::Immediate,
                Error::Application(AppError::InvalidState)
            ),
        ]
    );
    // Application errors do not remove the context: what was recorded before stays.
    assert!(!a.is_removed() && !b.is_removed());
    let list = a.finish().unwrap();
    assert_eq!(list.stats().operations, 1);
    ic.execute_command_list(&list).unwrap();
    assert_eq!(&bytes(&world, &device, r)[..4], &[1; 4]);
    assert_eq!(world.errors().len(), 4);
    world.assert_no_violations();
    drop((list, a, b));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_e3_out_of_memory_removes_context_locally() {
    const BUDGET: usize = 4096;
    let (device, mut ic, world) =
        setup_native(DeviceConfig::default().with_deferred_budget(BUDGET));
    let r = resource(&device, 2048);
    let other = resource(&device, 64);
    let v = view(&device, r, 0, 16);
    let q = query(&device, QueryKind::Occlusion);
    let (rid, vid) = (id_of(&device, r), id_of(&device, v));

    // Another context, mid-recording, must not notice.
    let mut bystander = device.create_deferred_context().unwrap();
    bystander.update(other, 0, &[8; 64]).unwrap();
    let bystander_stats = bystander.stats();

    let mut dc = device.create_deferred_context().unwrap();
    let c = dc.id();
    let amortized_before = world.amortized_calls();
    let (dc_thread, removed_at) = std::thread::scope(|s| {
        s.spawn(|| {
            dc.bind(SRV0, Some(v.any())).unwrap();
            let op = dc.stats().recorded_bytes; // one bind: one operation's bytes
            dc.command(SoftCommand::ClearView { view: v, value: 3 })
                .unwrap();
            // Fill up to the budget, then one call past it.
            let mut removed_at = None;
            for i in 0..10 {
                let before = dc.stats().recorded_bytes;
                let fits = before + op + 1000 <= BUDGET;
                let result = dc.update(r, 0, &[2; 1000]);
                assert_eq!(result.is_ok(), fits, "call {i} at {before} bytes (op {op})");
                if let Err(e) = result {
                    assert_eq!(e, Error::OutOfMemory);
                    removed_at = Some(i);
                    break;
                }
            }
            (std::thread::current().id(), removed_at)
        })
        .join()
        .unwrap()
    });
    assert!(
        removed_at.is_some(),
        "a 4 KiB budget cannot hold 11 KiB of updates"
    );
    assert!(dc.is_removed());
    assert_eq!(dc.stats().removals, 1);
    assert_eq!(
        world.errors(),
        vec![(ContextId::Deferred(c), Error::OutOfMemory)],
        "reported once, on the context's own sink"
    );
    let set_error = world
        .trace()
        .into_iter()
        .find(|e| e.hook == Hook::SetError)
        .unwrap();
    assert_eq!(
        set_error.thread, dc_thread,
        "reported on the context's thread"
    );
    assert!(
        world.amortized_calls() > amortized_before,
        "amortised processing pumped (R-A2)"
    );
    let pumped = world
        .trace()
        .into_iter()
        .find(|e| e.hook == Hook::AmortizedProcessing)
        .unwrap();
    assert_eq!(
        pumped.thread, dc_thread,
        "pumped from the context's thread (R-A2)"
    );

    // The partial list was unloaded: its handles closed (view before resource), nothing bound.
    let ev = events_of(&world, c);
    let closes: Vec<u64> = ev
        .iter()
        .filter(|e| e.hook == Hook::CloseLocal)
        .map(|e| e.object)
        .collect();
    assert_eq!(closes, vec![vid, rid], "{ev:#?}");
    assert!(ev
        .iter()
        .filter(|e| e.hook == Hook::CloseLocal)
        .all(|e| e.state == 0 && e.thread == dc_thread));
    assert!(!ev.iter().any(|e| is_create(e.hook)));
    let s = dc.stats();
    assert_eq!((s.open_handles, s.operations, s.recorded_bytes), (0, 0, 0));
    assert_eq!(dc.driver_state().unwrap().open_handles, 0);
    assert_eq!(dc.binding(SRV0), None);

    // Later calls are accepted and do nothing.
    let trace_len = world.trace().len();
    dc.update(r, 0, &[3; 16]).unwrap();
    dc.command(SoftCommand::Fill { dst: r, value: 4 }).unwrap();
    dc.bind(SRV0, Some(v.any())).unwrap();
    dc.begin_query(q).unwrap();
    dc.end_query(q).unwrap();
    dc.map_discard(r).unwrap().fill(5);
    dc.unmap(r).unwrap();
    assert_eq!(
        world.trace().len(),
        trace_len,
        "no hook runs for a removed context"
    );
    assert_eq!(dc.stats().operations, 0);
    assert_eq!(dc.binding(SRV0), None);
    assert_eq!(world.errors().len(), 1, "nothing more is reported");

    // Finish answers out of memory.
    assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
    assert!(!dc.is_removed());

    // Nothing else was affected: the bystander and the IC work as before.
    assert_eq!(bystander.stats(), bystander_stats);
    bystander
        .command(SoftCommand::Fill {
            dst: r,
            value: 0x11,
        })
        .unwrap();
    let bystander_list = bystander.finish().unwrap();
    ic.update(r, 1000, &[0x22; 8]).unwrap();
    ic.execute_command_list(&bystander_list).unwrap();
    assert_eq!(bytes(&world, &device, other), vec![8; 64]);
    assert_eq!(
        bytes(&world, &device, r),
        vec![0x11; 2048],
        "only the bystander's Fill reached r"
    );

    // The removed context's objects were released: the view really dies at the next flush.
    let viewed = resource(&device, 64);
    let v2 = view(&device, viewed, 0, 8);
    device.destroy(v).unwrap();
    ic.flush().unwrap();
    assert!(world
        .trace()
        .iter()
        .any(|e| e.hook == Hook::DestroyObject && e.object == vid));

    // The same context records and finishes normally again.
    dc.command(SoftCommand::ClearView {
        view: v2,
        value: 0x33,
    })
    .unwrap();
    dc.update(r, 0, &[0x44; 8]).unwrap();
    let list = dc.finish().unwrap();
    assert_eq!(list.stats().operations, 2);
    ic.execute_command_list(&list).unwrap();
    assert_eq!(
        &bytes(&world, &device, r)[..9],
        &[0x44, 0x44, 0x44, 0x44, 0x44, 0x44, 0x44, 0x44, 0x11]
    );
    assert_eq!(
        &bytes(&world, &device, viewed)[..9],
        &[0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0x33, 0]
    );
    assert_eq!(world.errors().len(), 1);
    ic.flush().unwrap();
    world.assert_no_violations();
    drop((list, bystander_list, dc, bystander));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_e3_map_past_the_budget_hands_out_scratch_and_finish_fails() {
    let (device, mut ic, world) = setup(DeviceConfig::default().with_deferred_budget(1024));
    let big = resource(&device, 4000);
    let small = resource(&device, 16);
    let mut dc = device.create_deferred_context().unwrap();
    let c = dc.id();
    dc.update(small, 0, &[1; 16]).unwrap();
    let mapped = dc
        .map_discard(big)
        .expect("the application keeps recording as if nothing happened");
    assert_eq!(mapped.len(), 4000);
    mapped.fill(7);
    dc.unmap(big).unwrap();
    assert!(dc.is_removed());
    assert_eq!(
        world.errors(),
        vec![(ContextId::Deferred(c), Error::OutOfMemory)]
    );
    assert_eq!(dc.stats().open_handles, 0);
    assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
    assert_eq!(
        bytes(&world, &device, big),
        vec![0; 4000],
        "the scratch never reaches the resource"
    );
    // Recording works again, within the budget.
    dc.update(small, 0, &[2; 16]).unwrap();
    let list = dc.finish().unwrap();
    ic.execute_command_list(&list).unwrap();
    assert_eq!(bytes(&world, &device, small), vec![2; 16]);
    world.assert_no_violations();
    drop((list, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// A deferred-context entry point, for tests that call each in turn.
type EntryPoint = fn(&mut Dc, Handle<Resource>, Handle<View>, Handle<Query>) -> cmdlist::Result<()>;

#[test]
fn r_e3_any_entry_point_may_run_out_of_memory() {
    const BUDGET: usize = 4096;
    let (device, mut ic, world) = setup(DeviceConfig::default().with_deferred_budget(BUDGET));
    let r = resource(&device, BUDGET as u64);
    let v = view(&device, r, 0, 8);
    let q = query(&device, QueryKind::Occlusion);
    let calls: [(&str, EntryPoint); 6] = [
        ("command", |dc, r, _, _| {
            dc.command(SoftCommand::Fill { dst: r, value: 1 })
        }),
        ("bind", |dc, _, v, _| dc.bind(VB1, Some(v.any()))),
        ("begin_query", |dc, _, _, q| dc.begin_query(q)),
        ("end_query", |dc, _, _, q| dc.end_query(q)),
        ("update", |dc, r, _, _| dc.update(r, 0, &[1])),
        ("map_discard", |dc, r, _, _| dc.map_discard(r).map(|_| ())),
    ];
    for (name, call) in calls {
        let mut dc = device.create_deferred_context().unwrap();
        let c = dc.id();
        dc.bind(SRV0, Some(v.any())).unwrap();
        let op = dc.stats().recorded_bytes;
        // Leave less than one operation's bytes.
        dc.update(r, 0, &vec![2; BUDGET - 3 * op + 1]).unwrap();
        assert_eq!(dc.stats().recorded_bytes, BUDGET - op + 1);
        let errors_before = world.errors().len();
        let result = call(&mut dc, r, v, q);
        if name == "map_discard" {
            assert!(
                result.is_ok(),
                "a Map hands out scratch memory and records nothing"
            );
        } else {
            assert_eq!(result, Err(Error::OutOfMemory), "{name}");
        }
        assert_eq!(
            &world.errors()[errors_before..],
            &[(ContextId::Deferred(c), Error::OutOfMemory)],
            "{name}"
        );
        assert!(dc.is_removed(), "{name}");
        assert_eq!(dc.stats().open_handles, 0, "{name}");
        assert_eq!(dc.finish().err(), Some(Error::OutOfMemory), "{name}");
    }
    assert_eq!(
        bytes(&world, &device, r),
        vec![0; BUDGET],
        "nothing of it ever ran"
    );
    ic.flush().unwrap();
    world.assert_no_violations();
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_r8_list_from_another_device_is_not_executable() {
    let (device, mut ic, world) = setup(DeviceConfig::default());
    let (other_device, mut other_ic, other_world) = setup(DeviceConfig::default());
    let r = resource(&device, 16);
    let theirs = resource(&other_device, 16);
    let mut dc = device.create_deferred_context().unwrap();
    dc.update(r, 0, &[9; 16]).unwrap();
    let list = dc.finish().unwrap();

    other_world.clear_trace();
    assert_eq!(
        other_ic.execute_command_list(&list),
        Err(Error::Application(AppError::CommandListNotExecutable))
    );
    assert_eq!(
        other_world.errors(),
        vec![(
            ContextId::Immediate,
            Error::Application(AppError::CommandListNotExecutable)
        )]
    );
    let ev = other_world.trace();
    assert!(
        ev.iter().all(|e| e.hook == Hook::SetError),
        "nothing ran on the other device: {ev:#?}"
    );
    assert_eq!(bytes(&other_world, &other_device, theirs), vec![0; 16]);
    assert!(world.errors().is_empty(), "the owning device saw nothing");

    // The list still works where it belongs.
    ic.execute_command_list(&list).unwrap();
    assert_eq!(bytes(&world, &device, r), vec![9; 16]);
    drop((list, dc));
    ic.destroy_device().unwrap();
    other_ic.destroy_device().unwrap();
    world.assert_clean();
    other_world.assert_clean();
}

#[test]
fn r_c2_abandon_after_an_error_runs_the_abandon_sequence() {
    // R-C2: "Abandon (explicit, or after an error)". Running out of memory is such an error:
    // by the time Finish answers out of memory, the driver must have seen AbandonCommandList,
    // the bindings undone one by one, every handle closed and the context recycled.
    let (device, mut ic, world) = setup_native(DeviceConfig::default().with_deferred_budget(1024));
    let r = resource(&device, 2048);
    let r2 = resource(&device, 64);
    let v = view(&device, r, 0, 16);
    let mut dc = device.create_deferred_context().unwrap();
    let c = dc.id();
    dc.bind(SRV0, Some(v.any())).unwrap();
    dc.bind(VB0, Some(r2.any())).unwrap();
    world.clear_trace();
    assert_eq!(dc.update(r, 0, &[1; 2048]), Err(Error::OutOfMemory));
    assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
    let ev = events_of(&world, c);
    let seq: Vec<Hook> = hooks(&ev)
        .into_iter()
        .filter(|h| {
            matches!(
                h,
                Hook::AbandonCommandList
                    | Hook::AbandonUnbind
                    | Hook::CloseLocal
                    | Hook::RecycleCreateDeferredContext
                    | Hook::DestroyDeferredContext
            )
        })
        .collect();
    assert_eq!(
        seq,
        vec![
            Hook::AbandonCommandList,
            Hook::AbandonUnbind,
            Hook::AbandonUnbind,
            Hook::CloseLocal,
            Hook::CloseLocal,
            Hook::CloseLocal,
            Hook::RecycleCreateDeferredContext,
        ],
        "{ev:#?}"
    );
    let states: Vec<usize> = ev
        .iter()
        .filter(|e| e.hook == Hook::AbandonUnbind)
        .map(|e| e.state)
        .collect();
    assert_eq!(states, vec![1, 0]);
    drop(dc);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// A deferred context's mode (R-E3, R-R3): recording; without driver state when making
/// that state again fails (here at an Abandon), until a call runs out of memory and removes
/// the context, which makes the state again; removed until its Finish.
/// Which hook call (its index as `counting`, a plan that logs, counts them) is the first
/// CreateDeferredContext that `during` makes: where a fault plan aims to fail the making of a
/// context's driver state again (R-R3).
fn create_hook_during(counting: &cmdlist::soft::inject::FaultPlan, during: impl FnOnce()) -> u64 {
    let before = counting.calls() as usize;
    during();
    let log = counting.log();
    let create = (before..log.len())
        .find(|&i| log[i] == "create_deferred_context")
        .expect("the call makes the context's state again");
    create as u64
}

#[test]
fn r_e3_r_r3_deferred_context_modes() {
    use cmdlist::soft::inject::{self, Fault, FaultPlan};
    use cmdlist::{DeferredMode, Device};
    use std::sync::Arc;

    // Recycling off: every Abandon destroys the context's driver state and creates it again.
    let config = DeviceConfig::default().with_recycle(false);
    let run = |plan: &Arc<FaultPlan>| {
        let (driver, kernel, world) = inject::new(plan, native());
        let (device, ic) = Device::new(driver, kernel, config.clone()).unwrap();
        let r = device.create_resource(crate::common::buffer(4096)).unwrap();
        let dc = device.create_deferred_context().unwrap();
        (device, ic, world, r, dc)
    };

    // The reference run: which hook call is the Abandon's CreateDeferredContext.
    let counting = Arc::new(FaultPlan::counting().with_log());
    let (_device, _ic, _world, r, mut dc) = run(&counting);
    assert_eq!(dc.mode(), DeferredMode::Recording);
    dc.update(r, 0, &[1; 8]).unwrap();
    let create = create_hook_during(&counting, || {
        dc.abandon().unwrap();
    });
    drop(dc);

    let plan = Arc::new(FaultPlan::at(create, Fault::Error(Error::InvalidArg)));
    let (_device, _ic, world, r, mut dc) = run(&plan);
    dc.update(r, 0, &[1; 8]).unwrap();
    assert_eq!(dc.abandon(), Err(Error::InvalidArg));
    assert!(plan.injected());
    assert_eq!(dc.mode(), DeferredMode::StateLost);
    assert!(dc.driver_state().is_none());
    // A call runs out of memory and removes the context (R-E3); the removal makes the state
    // again ...
    assert_eq!(dc.update(r, 0, &[2; 8]), Err(Error::OutOfMemory));
    assert_eq!(dc.mode(), DeferredMode::Removed);
    assert!(dc.driver_state().is_some());
    // ... and calls do nothing until Finish answers out of memory; then it records again.
    assert_eq!(dc.update(r, 0, &[3; 8]), Ok(()));
    assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
    assert_eq!(dc.mode(), DeferredMode::Recording);
    dc.update(r, 0, &[4; 8]).unwrap();
    drop(dc.finish().unwrap());
    drop(dc);
    assert!(world.violations().is_empty(), "{:#?}", world.violations());
}

/// A create hook that panics while an Abandon makes the context's driver state again
/// (R-R3) leaves the context without state, as one that fails does: calls run out of
/// memory until a removal makes the state again, a Map then hands out scratch memory, and
/// nothing reaches the driver without a state to record on. Where the create that panics
/// is a Finish's, the Finish abandons the recording, whose own create makes the state
/// again: the context records. In either list mode the engine records in.
#[test]
fn r_r3_a_create_that_panics_leaves_the_context_without_state_until_a_removal() {
    use cmdlist::soft::inject::{self, Fault, FaultPlan, InjectedPanic};
    use cmdlist::DeferredMode;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::Arc;

    inject::silence_injected_panics();
    let config = DeviceConfig::default().with_recycle(false);
    for driver_built in [false, true] {
        for finishing in [false, true] {
            let case = format!("driver-built {driver_built}, in a Finish {finishing}");
            let soft = SoftConfig {
                driver_built,
                ..native()
            };
            let run = |plan: &Arc<FaultPlan>| {
                let (driver, kernel, world) = inject::new(plan, soft.clone());
                let (device, ic) = Device::new(driver, kernel, config.clone()).unwrap();
                let r = device.create_resource(crate::common::buffer(64)).unwrap();
                let d = device.create_resource(dynamic_buffer(64)).unwrap();
                let dc = device.create_deferred_context().unwrap();
                (device, ic, world, r, d, dc)
            };
            let end = |dc: &mut DeferredContext<_, _>| match finishing {
                true => dc.finish().map(drop),
                false => dc.abandon(),
            };
            // The reference run: which hook call is the end's CreateDeferredContext.
            let counting = Arc::new(FaultPlan::counting().with_log());
            let (_device, _ic, _world, r, _d, mut dc) = run(&counting);
            dc.update(r, 0, &[1; 8]).unwrap();
            let create = create_hook_during(&counting, || {
                end(&mut dc).unwrap();
            });
            drop(dc);

            let plan = Arc::new(FaultPlan::at(create, Fault::Panic));
            let (_device, _ic, world, r, d, mut dc) = run(&plan);
            dc.update(r, 0, &[1; 8]).unwrap();
            let payload = catch_unwind(AssertUnwindSafe(|| end(&mut dc))).unwrap_err();
            assert!(InjectedPanic::of(&*payload).is_some(), "{case}");
            assert!(plan.injected(), "{case}");
            if finishing {
                assert_eq!(dc.mode(), DeferredMode::Recording, "{case}");
                assert!(dc.driver_state().is_some(), "{case}");
            } else {
                assert_eq!(dc.mode(), DeferredMode::StateLost, "{case}");
                assert!(dc.driver_state().is_none(), "{case}");
                // A Map runs out of memory, removes the context, and hands out scratch bytes;
                // the removal made the state again.
                assert_eq!(dc.map_discard(d).map(|b| b.len()), Ok(64), "{case}");
                assert_eq!(dc.mode(), DeferredMode::Removed, "{case}");
                assert!(dc.driver_state().is_some(), "{case}");
                assert_eq!(dc.finish().err(), Some(Error::OutOfMemory), "{case}");
            }
            assert_eq!(dc.mode(), DeferredMode::Recording, "{case}");
            dc.update(r, 0, &[4; 8]).unwrap();
            drop(dc.finish().unwrap());
            drop(dc);
            assert!(
                world.violations().is_empty(),
                "{case}: {:#?}",
                world.violations()
            );
        }
    }
}

/// A removal (R-E3) whose abandon cannot make the driver's state again leaves the context
/// without state (R-R3): the Finish that ends the removal answers out of memory, and the
/// context is then one without state, whose next call runs out of memory and removes it
/// again, that removal making the state; after its Finish the context records.
#[test]
fn r_e3_r_r3_a_removal_that_cannot_make_the_state_again_leaves_the_context_without_state() {
    use cmdlist::soft::inject::{self, Fault, FaultPlan};
    use cmdlist::DeferredMode;
    use std::sync::Arc;

    let config = DeviceConfig::default()
        .with_recycle(false)
        .with_deferred_budget(4096);
    let run = |plan: &Arc<FaultPlan>| {
        let (driver, kernel, world) = inject::new(plan, native());
        let (device, ic) = Device::new(driver, kernel, config.clone()).unwrap();
        let r = device
            .create_resource(crate::common::buffer(1 << 16))
            .unwrap();
        let dc = device.create_deferred_context().unwrap();
        (device, ic, world, r, dc)
    };
    let over_budget = vec![7u8; 1 << 15];
    // The reference run: which hook call is the removal's CreateDeferredContext.
    let counting = Arc::new(FaultPlan::counting().with_log());
    let (_device, _ic, _world, r, mut dc) = run(&counting);
    dc.update(r, 0, &[1; 8]).unwrap();
    let create = create_hook_during(&counting, || {
        assert_eq!(dc.update(r, 0, &over_budget), Err(Error::OutOfMemory));
    });
    drop(dc);

    let plan = Arc::new(FaultPlan::at(create, Fault::Error(Error::InvalidArg)));
    let (_device, _ic, world, r, mut dc) = run(&plan);
    dc.update(r, 0, &[1; 8]).unwrap();
    assert_eq!(dc.update(r, 0, &over_budget), Err(Error::OutOfMemory));
    assert!(plan.injected());
    assert_eq!(dc.mode(), DeferredMode::Removed);
    assert!(dc.driver_state().is_none(), "the removal's create failed");
    assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
    assert_eq!(
        dc.mode(),
        DeferredMode::StateLost,
        "calls resume without state"
    );
    assert_eq!(dc.update(r, 0, &[2; 8]), Err(Error::OutOfMemory));
    assert_eq!(dc.mode(), DeferredMode::Removed);
    assert!(dc.driver_state().is_some(), "this removal made the state");
    assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
    assert_eq!(dc.mode(), DeferredMode::Recording);
    dc.update(r, 0, &[3; 8]).unwrap();
    drop(dc.finish().unwrap());
    drop(dc);
    assert!(world.violations().is_empty(), "{:#?}", world.violations());
}

/// Each way into a context without driver state answers as a call of it does (R-R3):
/// out of memory, which removes the context, for a command, a Map and a Finish alike; the
/// device's removal first (R-D3).
#[test]
fn r_r3_every_call_of_a_context_without_state_runs_out_of_memory() {
    use cmdlist::soft::inject::{self, Fault, FaultPlan};
    use cmdlist::DeferredMode;
    use std::sync::Arc;

    let config = DeviceConfig::default().with_recycle(false);
    let counting = Arc::new(FaultPlan::counting().with_log());
    let (driver, kernel, _world) = inject::new(&counting, native());
    let (_device, _ic, _r, _d, mut dc) = {
        let (device, ic) = Device::new(driver, kernel, config.clone()).unwrap();
        let r = device.create_resource(crate::common::buffer(64)).unwrap();
        let d = device.create_resource(dynamic_buffer(64)).unwrap();
        let dc = device.create_deferred_context().unwrap();
        (device, ic, r, d, dc)
    };
    let create = create_hook_during(&counting, || {
        dc.abandon().unwrap();
    });
    drop(dc);

    type Call = fn(
        &mut inject::FaultSoftDeferredContext,
        Handle<Resource>,
        Handle<Resource>,
    ) -> Result<(), Error>;
    let calls: [(&str, Call); 4] = [
        ("command", |dc, r, _| {
            dc.command(SoftCommand::Fill { dst: r, value: 1 })
        }),
        ("update", |dc, r, _| dc.update(r, 0, &[2; 8])),
        ("map", |dc, _, d| dc.map_discard(d).map(drop)),
        ("finish", |dc, _, _| dc.finish().map(drop)),
    ];
    for (name, call) in calls {
        let plan = Arc::new(FaultPlan::at(create, Fault::Error(Error::InvalidArg)).with_log());
        let (driver, kernel, world) = inject::new(&plan, native());
        let (device, ic) = Device::new(driver, kernel, config.clone()).unwrap();
        let r = device.create_resource(crate::common::buffer(64)).unwrap();
        let d = device.create_resource(dynamic_buffer(64)).unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        assert_eq!(dc.abandon(), Err(Error::InvalidArg), "{name}");
        assert_eq!(dc.mode(), DeferredMode::StateLost, "{name}");
        let heard = plan.calls();
        let answer = call(&mut dc, r, d);
        if name == "map" {
            // A Map's answer is scratch memory; its failure is on the context's sink.
            assert_eq!(answer, Ok(()), "{name}");
            assert_eq!(
                world.errors().last().map(|e| e.1),
                Some(Error::OutOfMemory),
                "{name}"
            );
        } else {
            assert_eq!(answer, Err(Error::OutOfMemory), "{name}");
        }
        // The removal abandoned and made the state again; no call reached a recording.
        let log = plan.log();
        assert!(
            !log[heard as usize..].contains(&"record_deferred"),
            "{name}: {:?}",
            &log[heard as usize..]
        );
        match name {
            "finish" => assert_eq!(dc.mode(), DeferredMode::Recording, "{name}"),
            _ => assert_eq!(dc.mode(), DeferredMode::Removed, "{name}"),
        }
        // With the device removed, a context without state answers the removal.
        assert_eq!(dc.abandon(), Ok(()), "{name}");
        drop(ic);
        assert_eq!(dc.mode(), DeferredMode::Recording, "{name}");
        assert_eq!(
            dc.command(SoftCommand::Fill { dst: r, value: 1 }),
            Err(Error::DeviceRemoved),
            "{name}"
        );
        drop(dc);
        drop(device);
    }
}

/// Dropping the immediate context destroys the device even while a deferred context still
/// has context-local handles open (R-D3): the objects those handles hold outlive them, so
/// the context closes each handle when it is dropped (R-C1), before its own destruction, and
/// the objects are destroyed after, with the device's last reference (R-H2: the IC handle
/// goes last), as `ImmediateContext::destroy_device` documents.
#[test]
fn r_d3_dropping_the_immediate_context_leaves_open_handles_to_close_before_their_objects() {
    let (device, ic, world) = setup_native(DeviceConfig::default());
    let (a, b) = (resource(&device, 16), resource(&device, 16));
    let v = view(&device, a, 0, 8);
    let mut dc = device.create_deferred_context().unwrap();
    dc.command(SoftCommand::Copy { dst: b, src: a }).unwrap();
    dc.bind(
        BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0),
        Some(v.any()),
    )
    .unwrap();
    assert_eq!(dc.stats().open_handles, 3);
    drop(ic);
    assert_eq!(
        dc.command(SoftCommand::Fill { dst: a, value: 1 }),
        Err(Error::DeviceRemoved)
    );
    let destroyed_before = count(&world.trace(), Hook::DestroyObject);
    drop(dc);
    let events = world.trace();
    assert_eq!(count(&events, Hook::CloseLocal), 3, "each handle closed");
    assert_eq!(count(&events, Hook::DestroyDeferredContext), 1);
    assert_eq!(
        count(&events, Hook::DestroyObject),
        destroyed_before,
        "the device's last reference is still here"
    );
    drop(device);
    let events = world.trace();
    assert_eq!(
        count(&events, Hook::DestroyObject),
        destroyed_before + 3,
        "what the context held, destroyed with the device's last reference"
    );
    let violations = world.check_after_device_destroyed();
    assert!(violations.is_empty(), "{violations:#?}");
}
