//! Context-local handles against R-H1..R-H5 and R-L1: one handle per context per object,
//! the IC handle first created and last destroyed, dependencies opened first and closed
//! last, sizes only from the listed table, what the open hook is given, and where the
//! blocks are placed.
//!
//! Most tests run on the soft reference driver and read its trace; the placement and
//! dependency-content tests use `Probe`, a minimal driver of this file that logs the exact
//! bytes and addresses the engine hands to `open_local`. `Probe` asks for no kernel memory,
//! so it also hosts resources bigger than the address space (the Map(DISCARD) size test).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cmdlist::handle::{Query, Resource, View};
use cmdlist::soft::{
    self, Hook, SoftCommand, SoftConfig, SoftDriver, SoftKernel, SoftWorld, TraceEvent,
};
use cmdlist::Resolver;
use cmdlist::{
    AllocationHandle, BindClass, BindPoint, ContextId, DeferredContext, DeferredId, Device,
    DeviceConfig, Driver, Error, Handle, HandleSize, HandleSizeTable, HandleType, ListMemory,
    ObjectDesc, ObjectKind, Op, QueryKind, ResourceDesc, Stage, StateView, ThreadingCaps, Usage,
    ViewDesc,
};

use crate::common::{allocation, events_of, id_of, native};

type Dev = Device<SoftDriver, SoftKernel>;
type Dc = DeferredContext<SoftDriver, SoftKernel>;

fn resource(device: &Dev, size: u64) -> Handle<Resource> {
    device
        .create_resource(ResourceDesc {
            byte_size: size,
            ..Default::default()
        })
        .unwrap()
}

fn view(
    device: &Dev,
    ty: HandleType,
    resource: Handle<Resource>,
    first_byte: u64,
    byte_len: u64,
) -> Handle<View> {
    device
        .create_view(
            ty,
            ViewDesc {
                resource,
                first_byte,
                byte_len,
            },
        )
        .unwrap()
}

/// Index of the first event matching `hook` and `object`.
fn first(events: &[TraceEvent], hook: Hook, object: u64) -> Option<usize> {
    events
        .iter()
        .position(|e| e.hook == hook && e.object == object)
}

/// Index of the last event matching `hook` and `object`.
fn last(events: &[TraceEvent], hook: Hook, object: u64) -> Option<usize> {
    events
        .iter()
        .rposition(|e| e.hook == hook && e.object == object)
}

fn count_on(events: &[TraceEvent], hook: Hook, object: u64) -> usize {
    events
        .iter()
        .filter(|e| e.hook == hook && e.object == object)
        .count()
}

fn destroyed(world: &SoftWorld, object: u64) -> bool {
    world
        .trace()
        .iter()
        .any(|e| e.hook == Hook::DestroyObject && e.object == object)
}

const VB0: BindPoint = BindPoint::new(BindClass::VertexBuffer, 0);
const SRV0: BindPoint = BindPoint::new(BindClass::ShaderResource(Stage::Vertex), 0);

#[test]
fn r_h1_one_local_handle_per_context_per_object() {
    let (device, mut ic, world) = soft::device(native(), DeviceConfig::default()).unwrap();
    let r = resource(&device, 64);
    let r2 = resource(&device, 64);
    let v = view(&device, HandleType::ShaderResourceView, r, 0, 16);
    let (rid, r2id, vid) = (id_of(&device, r), id_of(&device, r2), id_of(&device, v));
    let mut a = device.create_deferred_context().unwrap();
    let mut b = device.create_deferred_context().unwrap();
    let (ca, cb) = (a.id(), b.id());

    let record = |dc: &mut Dc| {
        dc.update(r, 0, &[1; 4]).unwrap(); // opens r
        dc.command(SoftCommand::Copy { dst: r, src: r2 }).unwrap(); // opens r2, uses r
        dc.bind(VB0, Some(r.any())).unwrap(); // uses r
        dc.command(SoftCommand::Fill { dst: r, value: 3 }).unwrap(); // uses r
        dc.bind(SRV0, Some(v.any())).unwrap(); // opens v (r is open already)
        dc.command(SoftCommand::ClearView { view: v, value: 4 })
            .unwrap(); // uses v
        assert_eq!(dc.stats().open_handles, 3);
    };
    world.clear_trace();
    record(&mut a);
    record(&mut b);
    for c in [ca, cb] {
        let ev = events_of(&world, c);
        for (object, uses) in [(rid, 3), (r2id, 0), (vid, 1)] {
            assert_eq!(
                count_on(&ev, Hook::OpenLocal, object),
                1,
                "context {c}, object {object}: {ev:#?}"
            );
            assert_eq!(
                count_on(&ev, Hook::UseLocal, object),
                uses,
                "context {c}, object {object}: {ev:#?}"
            );
            let open = first(&ev, Hook::OpenLocal, object).unwrap();
            assert!(
                ev.iter()
                    .enumerate()
                    .all(|(i, e)| e.object != object || i >= open),
                "open before use"
            );
        }
    }
    // One handle per context: b's are its own, opened while a's were open.
    let trace = world.trace();
    let opens: Vec<(Option<DeferredId>, u64)> = trace
        .iter()
        .filter(|e| e.hook == Hook::OpenLocal)
        .map(|e| (e.context, e.object))
        .collect();
    assert_eq!(opens.len(), 6);
    assert_eq!(opens.iter().collect::<BTreeSet<_>>().len(), 6);

    world.clear_trace();
    let la = a.finish().unwrap();
    let lb = b.finish().unwrap();
    for c in [ca, cb] {
        let ev = events_of(&world, c);
        for object in [rid, r2id, vid] {
            assert_eq!(count_on(&ev, Hook::CloseLocal, object), 1, "{ev:#?}");
        }
    }
    // A new recording opens its own handle again, once.
    world.clear_trace();
    a.command(SoftCommand::Fill { dst: r, value: 5 }).unwrap();
    a.command(SoftCommand::Fill { dst: r, value: 6 }).unwrap();
    let ev = events_of(&world, ca);
    assert_eq!(
        (
            count_on(&ev, Hook::OpenLocal, rid),
            count_on(&ev, Hook::UseLocal, rid)
        ),
        (1, 1)
    );
    let la2 = a.finish().unwrap();
    for list in [&la, &lb, &la2] {
        ic.execute_command_list(list).unwrap();
    }
    assert_eq!(world.read(allocation(&device, r)).unwrap(), vec![6; 64]);
    ic.flush().unwrap();
    world.assert_no_violations();
    drop((la, lb, la2, a, b));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_h2_ic_handle_outlives_local_handles() {
    let (device, mut ic, world) = soft::device(native(), DeviceConfig::default()).unwrap();
    let r = resource(&device, 32);
    let ar = allocation(&device, r);
    let rid = id_of(&device, r);
    let mut dc = device.create_deferred_context().unwrap();
    let c = dc.id();

    // Destroyed while the context has it open.
    dc.update(r, 0, &[7; 32]).unwrap();
    device.destroy(r).unwrap();
    for _ in 0..3 {
        ic.flush().unwrap();
    }
    assert!(
        !destroyed(&world, rid),
        "destroyed while a deferred context has it open"
    );
    // The application cannot name it again (R-E1), though this recording still holds it.
    assert_eq!(
        dc.command(SoftCommand::CopyRegion {
            dst: r,
            dst_offset: 0,
            src: r,
            src_offset: 0,
            len: 4,
        }),
        Err(Error::Application(cmdlist::AppError::StaleHandle))
    );

    // Closed at Finish, but the list holds it.
    let list = dc.finish().unwrap();
    for _ in 0..3 {
        ic.flush().unwrap();
    }
    assert!(
        !destroyed(&world, rid),
        "destroyed while a command list holds it"
    );
    ic.execute_command_list(&list).unwrap();
    assert_eq!(
        world.read(ar).unwrap(),
        vec![7; 32],
        "the list still reaches the destroyed object"
    );
    drop(list);
    assert!(!destroyed(&world, rid), "destroyed outside a flush");
    ic.flush().unwrap();
    assert!(
        destroyed(&world, rid),
        "not destroyed after the last holder went and a flush"
    );

    let trace = world.trace();
    let created = first(&trace, Hook::CreateObject, rid).unwrap();
    let opened = first(&trace, Hook::OpenLocal, rid).unwrap();
    let closed = last(&trace, Hook::CloseLocal, rid).unwrap();
    let list_destroyed = trace
        .iter()
        .rposition(|e| {
            matches!(
                e.hook,
                Hook::DestroyCommandList | Hook::RecycleDestroyCommandList
            )
        })
        .expect("the list's destroy hook ran");
    let gone = first(&trace, Hook::DestroyObject, rid).unwrap();
    assert!(created < opened, "the IC handle is created first");
    assert!(
        closed < gone && list_destroyed < gone,
        "the IC handle is destroyed last: {trace:#?}"
    );
    assert_eq!(trace[opened].context, Some(c));
    world.complete_all();
    ic.flush().unwrap();
    assert!(!world.is_allocated(ar));

    // Destroyed while open, then the recording is abandoned: gone after close and flush.
    let r2 = resource(&device, 16);
    let r2id = id_of(&device, r2);
    dc.command(SoftCommand::Fill { dst: r2, value: 1 }).unwrap();
    device.destroy(r2).unwrap();
    ic.flush().unwrap();
    assert!(!destroyed(&world, r2id));
    dc.abandon().unwrap();
    ic.flush().unwrap();
    let trace = world.trace();
    assert!(
        last(&trace, Hook::CloseLocal, r2id).unwrap()
            < first(&trace, Hook::DestroyObject, r2id).unwrap()
    );

    // A view and its resource, both destroyed while open: both wait for the context, then
    // go view first.
    let r3 = resource(&device, 16);
    let v3 = view(&device, HandleType::RenderTargetView, r3, 4, 4);
    let (r3id, v3id) = (id_of(&device, r3), id_of(&device, v3));
    dc.command(SoftCommand::ClearView { view: v3, value: 2 })
        .unwrap();
    device.destroy(r3).unwrap();
    device.destroy(v3).unwrap();
    ic.flush().unwrap();
    assert!(!destroyed(&world, r3id) && !destroyed(&world, v3id));
    drop(dc);
    ic.flush().unwrap();
    let trace = world.trace();
    let (gv, gr) = (
        first(&trace, Hook::DestroyObject, v3id).unwrap(),
        first(&trace, Hook::DestroyObject, r3id).unwrap(),
    );
    assert!(
        last(&trace, Hook::CloseLocal, r3id).unwrap() < gv && gv < gr,
        "{trace:#?}"
    );
    world.assert_no_violations();
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_h2_device_destruction_never_destroys_an_object_before_its_open_local_handles() {
    let (device, mut ic, world) = soft::device(native(), DeviceConfig::default()).unwrap();
    let r = resource(&device, 64);
    let rid = id_of(&device, r);
    let mut dc = device.create_deferred_context().unwrap();
    let c = dc.id();
    dc.update(r, 0, &[1; 4]).unwrap();
    // The application tears the device down while the context still records (the context
    // keeps a clone of the device, so nothing stops it).
    let _ = ic.destroy_device();
    let _ = dc.finish();
    drop(dc);
    let trace = world.trace();
    let closed = trace
        .iter()
        .position(|e| e.hook == Hook::CloseLocal && e.object == rid && e.context == Some(c));
    if let Some(gone) = first(&trace, Hook::DestroyObject, rid) {
        assert!(
            closed.is_some_and(|closed| closed < gone),
            "the IC object was destroyed while context {c} still had its handle open: {trace:#?}"
        );
    }
    assert!(
        closed.is_some(),
        "the context's handle was never closed: {trace:#?}"
    );
    world.assert_no_violations();
}

#[test]
fn r_h3_dependency_opened_first_closed_last() {
    let (device, mut ic, world) = soft::device(native(), DeviceConfig::default()).unwrap();
    let r = resource(&device, 64);
    let r3 = resource(&device, 64);
    let v1 = view(&device, HandleType::RenderTargetView, r, 0, 8);
    let v2 = view(&device, HandleType::ShaderResourceView, r, 8, 8);
    let v3 = view(&device, HandleType::UnorderedAccessView, r3, 16, 8);
    let ids: Vec<u64> = [r, r3].iter().map(|h| id_of(&device, *h)).collect();
    let (rid, r3id) = (ids[0], ids[1]);
    let (v1id, v2id, v3id) = (id_of(&device, v1), id_of(&device, v2), id_of(&device, v3));
    let mut dc = device.create_deferred_context().unwrap();
    let c = dc.id();
    world.clear_trace();
    // A view first (its resource never named directly), a second view of the same
    // resource, then the resource itself; and a resource named before its view.
    dc.command(SoftCommand::ClearView { view: v1, value: 1 })
        .unwrap();
    dc.bind(SRV0, Some(v2.any())).unwrap();
    dc.update(r, 32, &[9; 8]).unwrap();
    dc.command(SoftCommand::Fill { dst: r3, value: 2 }).unwrap();
    dc.command(SoftCommand::ClearView { view: v3, value: 3 })
        .unwrap();
    let list = dc.finish().unwrap();
    let ev = events_of(&world, c);
    for (res, views) in [(rid, vec![v1id, v2id]), (r3id, vec![v3id])] {
        assert_eq!(count_on(&ev, Hook::OpenLocal, res), 1);
        assert_eq!(count_on(&ev, Hook::CloseLocal, res), 1);
        let opened = first(&ev, Hook::OpenLocal, res).unwrap();
        let closed = first(&ev, Hook::CloseLocal, res).unwrap();
        for v in views {
            assert!(
                opened < first(&ev, Hook::OpenLocal, v).unwrap(),
                "resource {res} opened before view {v}: {ev:#?}"
            );
            assert!(
                first(&ev, Hook::CloseLocal, v).unwrap() < closed,
                "view {v} closed before resource {res}: {ev:#?}"
            );
        }
    }
    assert!(first(&ev, Hook::OpenLocal, rid).unwrap() < first(&ev, Hook::OpenLocal, v1id).unwrap());
    // The soft driver checks that each view was opened with its resource's CLS (R-H3/R-H5).
    world.assert_no_violations();
    ic.execute_command_list(&list).unwrap();
    let mut expect = vec![0; 64];
    expect[..8].fill(1);
    expect[32..40].fill(9);
    assert_eq!(world.read(allocation(&device, r)).unwrap(), expect);
    let mut expect = vec![2; 64];
    expect[16..24].fill(3);
    assert_eq!(world.read(allocation(&device, r3)).unwrap(), expect);
    drop((list, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_h4_unlisted_size_is_invalid_arg() {
    let config = SoftConfig {
        unlisted_cls_size: Some(HandleType::Query),
        ..native()
    };
    let (device, mut ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
    let r = resource(&device, 16);
    world.clear_trace();
    let q: Handle<Query> = device.create_query(QueryKind::Occlusion).unwrap();
    let qid = id_of(&device, q);
    // R-H4: the size is asked once, right after the IC object exists; the unlisted answer
    // does not fail the create (the IC can use the query), only the context-local opens.
    let trace = world.trace();
    let create = trace
        .iter()
        .position(|e| e.hook == Hook::CreateObject && e.object == qid);
    let asked = trace
        .iter()
        .position(|e| e.hook == Hook::CalcDeferredContextHandleSize && e.object == qid);
    assert!(
        create.is_some() && asked > create,
        "size asked after create: {trace:#?}"
    );
    let mut dc = device.create_deferred_context().unwrap();
    let c = dc.id();
    dc.update(r, 0, &[1; 16]).unwrap();
    world.clear_trace();
    assert_eq!(dc.begin_query(q), Err(Error::InvalidArg));
    assert_eq!(dc.end_query(q), Err(Error::InvalidArg));
    assert_eq!(
        world.errors(),
        vec![
            (ContextId::Deferred(c), Error::InvalidArg),
            (ContextId::Deferred(c), Error::InvalidArg)
        ]
    );
    let trace = world.trace();
    assert_eq!(
        count_on(&trace, Hook::CalcDeferredContextHandleSize, qid),
        0,
        "the size is not asked again at each open: {trace:#?}"
    );
    assert_eq!(
        count_on(&trace, Hook::OpenLocal, qid),
        0,
        "nothing opened with an unlisted size"
    );
    assert!(!dc.is_removed(), "an invalid argument is not out of memory");
    assert_eq!(dc.stats().open_handles, 1);
    // The failed calls recorded nothing: the list neither names the query nor holds it.
    let list = dc.finish().unwrap();
    assert_eq!(list.stats().operations, 1);
    assert_eq!(list.stats().objects, 1);
    ic.begin_query(q).unwrap();
    ic.execute_command_list(&list).unwrap();
    ic.end_query(q).unwrap();
    device.destroy(q).unwrap();
    ic.flush().unwrap();
    assert!(destroyed(&world, qid), "no hold leaked on the query");
    // Listed types still open.
    let v = view(&device, HandleType::ShaderResourceView, r, 0, 4);
    dc.bind(SRV0, Some(v.any())).unwrap();
    assert_eq!(dc.stats().open_handles, 2);
    dc.abandon().unwrap();
    world.assert_no_violations();
    drop((list, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

// ---------------------------------------------------------------------------------------
// Probe: a minimal driver that logs what `open_local` and `close_local` are given.

#[derive(Clone, Debug)]
struct Opened {
    context: DeferredId,
    ty: HandleType,
    object: u64,
    dependency: Option<Vec<u8>>,
    addr: usize,
    len: usize,
    zeroed: bool,
}

/// Every `open_local` call, in order.
type OpenLog = Arc<Mutex<Vec<Opened>>>;
/// Every `close_local` call: (context, object, the id found in the block).
type CloseLog = Arc<Mutex<Vec<(DeferredId, u64, u64)>>>;

#[derive(Debug)]
struct ProbeObject {
    id: u64,
}

struct Probe {
    sizes: HandleSizeTable,
    next: AtomicU64,
    opened: OpenLog,
    /// (context, object, the id found in the block at close).
    closed: CloseLog,
}

fn probe_size(ty: HandleType) -> usize {
    match ty {
        HandleType::Resource => 200,
        HandleType::ShaderResourceView => 40,
        HandleType::RenderTargetView => 48,
        HandleType::UnorderedAccessView => 64,
        HandleType::DepthStencilView => 96,
        HandleType::Query => 24,
        _ => 16,
    }
}

/// What the probe writes into an object's context-local block: its id, then a pattern.
fn probe_pattern(id: u64, len: usize) -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..len).map(|i| (id as usize * 31 + i * 7) as u8).collect();
    bytes[..8].copy_from_slice(&id.to_le_bytes());
    bytes
}

impl Probe {
    fn new() -> Self {
        let sizes = HandleSizeTable::new(HandleType::ALL.iter().map(|&ty| HandleSize {
            ty,
            size: probe_size(ty),
        }))
        .unwrap();
        Probe {
            sizes,
            next: AtomicU64::new(0),
            opened: Arc::default(),
            closed: Arc::default(),
        }
    }
}

impl Driver for Probe {
    type Object = ProbeObject;
    type IcData = ();
    type Immediate = ();
    type Command = SoftCommand;
    type Deferred = DeferredId;

    fn threading_caps(&self) -> ThreadingCaps {
        ThreadingCaps::FREETHREADED
            | ThreadingCaps::COMMANDLISTS
            | ThreadingCaps::COMMANDLISTS_BUILD_2
    }
    fn check_deferred_context_handle_sizes(&self, out: Option<&mut [HandleSize]>) -> usize {
        self.sizes.answer_poll(out)
    }
    fn calc_private_size(&self, _desc: &ObjectDesc<'_>) -> usize {
        0
    }
    fn calc_deferred_context_handle_size(
        &self,
        ty: HandleType,
        _object: Option<&ProbeObject>,
    ) -> usize {
        probe_size(ty)
    }
    fn calc_private_command_list_size(&self) -> usize {
        16
    }
    fn create_object(
        &self,
        _desc: &ObjectDesc<'_>,
        _memory: Option<AllocationHandle>,
        _dependency: Option<&ProbeObject>,
    ) -> cmdlist::Result<(ProbeObject, ())> {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        Ok((ProbeObject { id }, ()))
    }
    fn destroy_object(&self, _ty: HandleType, _object: &ProbeObject, _ic: &mut ()) {}
    fn create_immediate(&self) -> cmdlist::Result<()> {
        Ok(())
    }
    fn execute(
        &self,
        _imm: &mut (),
        _objects: &Resolver<'_, Self>,
        _op: Op<'_, Self>,
    ) -> cmdlist::Result<()> {
        Ok(())
    }
    fn flush(&self, _imm: &mut ()) {}
    fn create_deferred_context(&self, id: DeferredId) -> cmdlist::Result<DeferredId> {
        Ok(id)
    }
    fn destroy_deferred_context(&self, _dc: DeferredId) {}
    fn open_local(
        &self,
        dc: &mut DeferredId,
        ty: HandleType,
        object: &ProbeObject,
        dependency: Option<&[u8]>,
        local: &mut [u8],
    ) -> cmdlist::Result<()> {
        self.opened.lock().unwrap().push(Opened {
            context: *dc,
            ty,
            object: object.id,
            dependency: dependency.map(<[u8]>::to_vec),
            addr: local.as_ptr() as usize,
            len: local.len(),
            zeroed: local.iter().all(|b| *b == 0),
        });
        // Left in place at close, so a block handed out again unzeroed would show.
        local.copy_from_slice(&probe_pattern(object.id, local.len()));
        Ok(())
    }
    fn close_local(
        &self,
        dc: &mut DeferredId,
        _ty: HandleType,
        object: &ProbeObject,
        local: &mut [u8],
        _state: StateView<'_>,
    ) {
        let found = u64::from_le_bytes(local[..8].try_into().unwrap());
        self.closed.lock().unwrap().push((*dc, object.id, found));
    }
    fn create_command_list(
        &self,
        _dc: &mut DeferredId,
        _private: &mut [u8],
        _state: StateView<'_>,
    ) -> cmdlist::Result<()> {
        Ok(())
    }
    fn destroy_command_list(&self, _list: ListMemory<'_>) {}
    fn abandon_command_list(&self, _dc: &mut DeferredId) {}
}

type ProbeDevice = Device<Probe, SoftKernel>;

fn probe_device() -> (
    ProbeDevice,
    cmdlist::ImmediateContext<Probe, SoftKernel>,
    OpenLog,
    CloseLog,
) {
    let (_, kernel, _world) = soft::new(native());
    let probe = Probe::new();
    let (opened, closed) = (Arc::clone(&probe.opened), Arc::clone(&probe.closed));
    let (device, ic) = Device::new(probe, kernel, DeviceConfig::default()).unwrap();
    (device, ic, opened, closed)
}

fn probe_id<T: ObjectKind>(device: &ProbeDevice, handle: Handle<T>) -> u64 {
    device.object(handle).unwrap().id
}

/// Objects of every probe size, and the commands that open them in a recording.
struct ProbeSet {
    resources: Vec<Handle<Resource>>,
    views: Vec<Handle<View>>,
    queries: Vec<Handle<Query>>,
}

fn probe_set(
    device: &ProbeDevice,
    resources: usize,
    views_per_type: usize,
    queries: usize,
) -> ProbeSet {
    let desc = ResourceDesc {
        byte_size: 64,
        ..Default::default()
    };
    let resources: Vec<_> = (0..resources)
        .map(|_| device.create_resource(desc).unwrap())
        .collect();
    let mut views = Vec::new();
    for ty in [
        HandleType::ShaderResourceView,
        HandleType::RenderTargetView,
        HandleType::UnorderedAccessView,
        HandleType::DepthStencilView,
    ] {
        for i in 0..views_per_type {
            let resource = resources[i % resources.len()];
            views.push(
                device
                    .create_view(
                        ty,
                        ViewDesc {
                            resource,
                            first_byte: 0,
                            byte_len: 8,
                        },
                    )
                    .unwrap(),
            );
        }
    }
    let queries = (0..queries)
        .map(|_| device.create_query(QueryKind::Occlusion).unwrap())
        .collect();
    ProbeSet {
        resources,
        views,
        queries,
    }
}

fn open_all(dc: &mut DeferredContext<Probe, SoftKernel>, set: &ProbeSet) {
    for r in &set.resources {
        dc.command(SoftCommand::Fill { dst: *r, value: 0 }).unwrap();
    }
    for v in &set.views {
        dc.command(SoftCommand::ClearView { view: *v, value: 0 })
            .unwrap();
    }
    for q in &set.queries {
        dc.begin_query(*q).unwrap();
    }
}

/// A deferred context's Map(DISCARD) holds the resource's new contents in this process, so a
/// resource bigger than the address space is out of memory there (R-E3), never a map of its
/// size truncated to `usize` nor an arithmetic overflow.
#[test]
fn r_e3_map_of_a_resource_beyond_the_address_space_is_out_of_memory() {
    let (device, mut ic, _, _) = probe_device();
    // On 32-bit targets the second is 4 GiB + 16 bytes, whose truncated size would be 16.
    let sizes = [u64::MAX, (usize::MAX as u64).saturating_add(17)];
    let small = device
        .create_resource(ResourceDesc {
            byte_size: 64,
            usage: Usage::Dynamic,
            ..Default::default()
        })
        .unwrap();
    for size in sizes {
        let huge = device
            .create_resource(ResourceDesc {
                byte_size: size,
                usage: Usage::Dynamic,
                ..Default::default()
            })
            .unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        let map =
            |dc: &mut DeferredContext<Probe, SoftKernel>, r| dc.map_discard(r).map(|m| m.len());
        assert_eq!(map(&mut dc, huge), Err(Error::OutOfMemory), "{size:#x}");
        assert!(dc.is_removed(), "{size:#x}");
        // Removed, the context hands out scratch bytes instead; it cannot for this resource.
        assert_eq!(map(&mut dc, huge), Err(Error::OutOfMemory), "{size:#x}");
        assert_eq!(map(&mut dc, small), Ok(64), "{size:#x}");
        assert_eq!(dc.finish().err(), Some(Error::OutOfMemory), "{size:#x}");
        // The context records again; the resource is still fine on the immediate context.
        assert_eq!(map(&mut dc, small), Ok(64), "{size:#x}");
        dc.unmap(small).unwrap();
        let list = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
        // The immediate context's Map holds the new contents in this process too.
        let ic_map = ic.map_discard(huge).map(|b| b.len());
        assert_eq!(ic_map, Err(Error::OutOfMemory), "{size:#x}");
        assert_eq!(ic.map_discard(small).map(|b| b.len()), Ok(64), "{size:#x}");
        ic.unmap(small).unwrap();
        drop((list, dc));
        device.destroy(huge).unwrap();
    }
    device.destroy(small).unwrap();
    ic.destroy_device().unwrap();
}

#[test]
fn r_h5_open_gets_ic_object_and_dependency_local_only() {
    let (device, mut ic, opened, closed) = probe_device();
    let set = probe_set(&device, 3, 2, 1);
    let mut dc = device.create_deferred_context().unwrap();
    let c = dc.id();
    open_all(&mut dc, &set);
    let log = opened.lock().unwrap().clone();
    assert_eq!(log.len(), 3 + 4 * 2 + 1);
    assert!(
        log.iter().all(|o| o.context == c),
        "opened on this context's state"
    );
    for r in &set.resources {
        let o = log
            .iter()
            .find(|o| o.object == probe_id(&device, *r))
            .expect("resource opened");
        assert_eq!(o.ty, HandleType::Resource);
        assert_eq!(
            o.dependency, None,
            "no description for an object without dependencies"
        );
        assert_eq!(o.len, probe_size(HandleType::Resource));
    }
    let q = log.iter().find(|o| o.ty == HandleType::Query).unwrap();
    assert_eq!(q.object, probe_id(&device, set.queries[0]));
    assert_eq!(q.dependency, None);
    for (i, v) in set.views.iter().enumerate() {
        let vid = probe_id(&device, *v);
        let resource = set.resources[i % 2];
        let rid = probe_id(&device, resource);
        let pos = log
            .iter()
            .position(|o| o.object == vid)
            .expect("view opened");
        let rpos = log.iter().position(|o| o.object == rid).unwrap();
        assert!(rpos < pos, "the resource's handle is opened first");
        assert_eq!(
            log[pos].dependency.as_deref(),
            Some(&probe_pattern(rid, probe_size(HandleType::Resource))[..]),
            "view {vid} is given exactly its resource's context-local data"
        );
    }
    drop(log);
    let list = dc.finish().unwrap();
    let closes = closed.lock().unwrap().clone();
    assert_eq!(closes.len(), 3 + 8 + 1);
    assert!(
        closes
            .iter()
            .all(|&(cc, object, found)| cc == c && found == object),
        "each handle closed through its own block: {closes:?}"
    );
    drop((list, dc));
    ic.destroy_device().unwrap();
}

#[test]
fn r_h4_context_local_blocks_are_zeroed_when_reused() {
    let (device, mut ic, opened, _closed) = probe_device();
    let set = probe_set(&device, 20, 10, 10);
    let mut dc = device.create_deferred_context().unwrap();
    let mut other = device.create_deferred_context().unwrap();
    for round in 0..4 {
        open_all(&mut dc, &set);
        open_all(&mut other, &set);
        match round {
            0 => drop(dc.finish().unwrap()),
            1 => dc.abandon().unwrap(),
            _ => drop(dc.finish().unwrap()),
        }
        other.abandon().unwrap();
    }
    let log = opened.lock().unwrap().clone();
    assert_eq!(log.len(), 8 * (20 + 40 + 10));
    let reused = log.iter().map(|o| o.addr).collect::<BTreeSet<_>>().len();
    assert!(reused < log.len(), "blocks are reused across recordings");
    let dirty: Vec<&Opened> = log.iter().filter(|o| !o.zeroed).collect();
    assert!(dirty.is_empty(), "blocks handed out not zeroed: {dirty:?}");
    drop((dc, other));
    ic.destroy_device().unwrap();
}

#[test]
fn r_l1_blocks_never_straddle_cache_lines_and_pages_are_coloured() {
    const LINE: usize = 64;
    let (device, mut ic, opened, _closed) = probe_device();
    let set = probe_set(&device, 300, 120, 100);
    let mut dc = device.create_deferred_context().unwrap();
    open_all(&mut dc, &set);
    let log = opened.lock().unwrap().clone();
    assert_eq!(log.len(), 300 + 4 * 120 + 100);
    for o in &log {
        assert_eq!(o.len, probe_size(o.ty));
        if o.len < LINE {
            assert_eq!(o.addr % 8, 0, "{o:?}");
            assert!(
                o.addr % LINE + o.len <= LINE,
                "a {}-byte block straddles a line: {o:?}",
                o.len
            );
        } else {
            assert_eq!(
                o.addr % LINE,
                0,
                "a {}-byte block must start on a line: {o:?}",
                o.len
            );
        }
    }
    // Live blocks never overlap.
    let mut spans: Vec<(usize, usize)> = log.iter().map(|o| (o.addr, o.addr + o.len)).collect();
    spans.sort_unstable();
    assert!(
        spans.windows(2).all(|w| w[0].1 <= w[1].0),
        "overlapping blocks"
    );
    // Cache thrashing: the first block of every page of a class must not sit at the same
    // offset in its page (pages are PAGE_SIZE-aligned, so the same offset is the same set).
    let page = cmdlist::bucket::PAGE_SIZE;
    for ty in [HandleType::Resource] {
        let mut first_in_page: BTreeMap<usize, usize> = BTreeMap::new();
        for o in log.iter().filter(|o| o.ty == ty) {
            let base = o.addr & !(page - 1);
            let offset = o.addr - base;
            let e = first_in_page.entry(base).or_insert(offset);
            *e = (*e).min(offset);
        }
        let pages = first_in_page.len();
        let offsets: BTreeSet<usize> = first_in_page.values().copied().collect();
        assert!(
            pages >= 3,
            "{ty:?}: the test needs several pages, got {pages}"
        );
        assert!(
            offsets.len() >= 2,
            "{ty:?}: every page starts its blocks at the same offset {offsets:?}"
        );
    }
    dc.abandon().unwrap();
    drop(dc);
    ic.destroy_device().unwrap();
}

#[test]
fn r_l2_context_local_handles_stay_small_and_link_to_the_shared_object() {
    // CLS data is copied per deferred context, so it stays the driver's small listed size
    // whatever the object holds; the large data stays behind the link, in the one IC object
    // every context reads (R-L2).
    let (device, mut ic, world) = soft::device(native(), DeviceConfig::default()).unwrap();
    let big: Vec<_> = (0..64).map(|_| resource(&device, 1 << 20)).collect();
    let mut dcs: Vec<_> = (0..2)
        .map(|_| device.create_deferred_context().unwrap())
        .collect();
    for dc in &mut dcs {
        for r in &big {
            dc.update(*r, 0, &[1]).unwrap();
        }
    }
    for dc in &dcs {
        let stats = dc.stats();
        assert_eq!(stats.open_handles, big.len());
        // 64 handles of 192 bytes, each context its own copy: a few pages, not 64 MiB.
        assert!(stats.retained_bytes < 64 * 1024, "{stats:?}");
    }
    // Both contexts' handles link to the same IC objects (the soft CLS holds the IC id).
    let trace = world.trace();
    for r in &big {
        let id = id_of(&device, *r);
        let opens: Vec<_> = trace
            .iter()
            .filter(|e| e.hook == Hook::OpenLocal && e.object == id)
            .map(|e| e.context)
            .collect();
        assert_eq!(opens.len(), 2, "one handle per context (R-H1)");
        assert_ne!(opens[0], opens[1]);
    }
    for dc in &mut dcs {
        dc.abandon().unwrap();
    }
    drop(dcs);
    world.assert_no_violations();
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// Each object a command names is heard once, in the command's order: an object whose
/// handle is open already is used (`use_local`), a new one opened (`open_local`), whichever
/// comes first in the command and however many are open; an object named twice is opened
/// once and then used.
#[test]
fn r_h1_a_commands_objects_are_each_heard_once_in_order() {
    let (device, _ic, world) = soft::device(native(), DeviceConfig::default()).unwrap();
    let [a, b, c, d] = [(); 4].map(|()| resource(&device, 16));
    let ids = [a, b, c, d].map(|r| id_of(&device, r));
    let mut dc = device.create_deferred_context().unwrap();
    dc.command(SoftCommand::Fill { dst: a, value: 1 }).unwrap();
    // (src, dst) in the order the command visits them; what the driver must hear for each.
    let cases = [
        (
            (a, b),
            [(Hook::UseLocal, ids[0]), (Hook::OpenLocal, ids[1])],
        ),
        (
            (c, b),
            [(Hook::OpenLocal, ids[2]), (Hook::UseLocal, ids[1])],
        ),
        ((b, c), [(Hook::UseLocal, ids[1]), (Hook::UseLocal, ids[2])]),
        (
            (d, d),
            [(Hook::OpenLocal, ids[3]), (Hook::UseLocal, ids[3])],
        ),
    ];
    for ((src, dst), heard) in cases {
        let mark = events_of(&world, dc.id()).len();
        dc.command(SoftCommand::Copy { dst, src }).unwrap();
        let got: Vec<(Hook, u64)> = events_of(&world, dc.id())[mark..]
            .iter()
            .filter(|e| matches!(e.hook, Hook::UseLocal | Hook::OpenLocal))
            .map(|e| (e.hook, e.object))
            .collect();
        assert_eq!(got, heard, "a copy from {src:?} to {dst:?}");
    }
    drop(dc.finish().unwrap());
}

/// A Map names its resource as a command does (R-H1): a Map(DISCARD) and a Map(NO_OVERWRITE)
/// of a resource open in the recording are each heard as one use of its handle, in every
/// list mode with deferred-context hooks.
#[test]
fn r_h1_a_map_of_an_open_resource_is_heard_as_a_use() {
    for driver_built in [false, true] {
        let config = SoftConfig {
            driver_built,
            ..native()
        };
        let (device, _ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
        let ring = device
            .create_resource(ResourceDesc {
                bind: cmdlist::BindFlags::VERTEX_BUFFER,
                ..crate::common::dynamic_buffer(64)
            })
            .unwrap();
        let id = id_of(&device, ring);
        let mut dc = device.create_deferred_context().unwrap();
        dc.command(SoftCommand::Fill {
            dst: ring,
            value: 1,
        })
        .unwrap();
        let uses = |dc: &Dc| count_on(&events_of(&world, dc.id()), Hook::UseLocal, id);
        let before = uses(&dc);
        dc.map_discard(ring).unwrap().fill(2);
        dc.unmap(ring).unwrap();
        assert_eq!(
            uses(&dc),
            before + 1,
            "driver_built {driver_built}: a discard"
        );
        dc.map_no_overwrite(ring).unwrap()[..4].fill(3);
        dc.unmap(ring).unwrap();
        assert_eq!(
            uses(&dc),
            before + 2,
            "driver_built {driver_built}: an append"
        );
        dc.map_no_overwrite(ring).unwrap()[4..8].fill(4);
        dc.unmap(ring).unwrap();
        assert_eq!(
            uses(&dc),
            before + 3,
            "driver_built {driver_built}: a ring's next append"
        );
        drop(dc.finish().unwrap());
    }
}
