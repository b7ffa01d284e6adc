//! Deferred destruction (R-D1..R-D4) and the order in which dependents go (R-H3), checked
//! against the soft kernel's protocol checks and call trace.

use std::collections::HashSet;
use std::thread;

use cmdlist::soft::{Gpu, Hook, SoftCommand, SoftWorld, TraceEvent};
use cmdlist::{
    AllocationHandle, AnyHandle, AppError, BindClass, BindPoint, Clock, Error, Handle, HandleType,
    ObjectDesc, ObjectKind, QueryKind, ResourceDesc, ResourceFlags, Stage, ViewDesc,
};

use crate::common::{buffer, position, setup};

type Dev = cmdlist::soft::SoftDevice;
type Ic = cmdlist::soft::SoftImmediate;

fn srv_point() -> BindPoint {
    BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0)
}

/// The soft object id and kernel allocation of a live object.
fn ids<T: ObjectKind>(device: &Dev, h: Handle<T>) -> (u64, AllocationHandle) {
    let o = device.object(h).unwrap();
    (
        o.id,
        o.allocation()
            .expect("soft objects of these kinds have memory"),
    )
}

fn destroyed_at(trace: &[TraceEvent], object: u64) -> Option<usize> {
    position(trace, |e| {
        e.hook == Hook::DestroyObject && e.object == object
    })
}

fn deallocated_at(trace: &[TraceEvent], a: AllocationHandle) -> Option<usize> {
    position(trace, |e| {
        e.hook == Hook::Deallocate && e.allocation == a.0.get()
    })
}

fn submitted_at(trace: &[TraceEvent], fence: u64) -> Option<usize> {
    position(trace, |e| e.hook == Hook::Submit && e.fence == fence)
}

fn count(trace: &[TraceEvent], hook: Hook) -> usize {
    trace.iter().filter(|e| e.hook == hook).count()
}

fn stale<T: ObjectKind>(device: &Dev, h: Handle<T>) -> bool {
    matches!(
        device.object(h),
        Err(Error::Application(AppError::StaleHandle))
    )
}

// ---------------------------------------------------------------------------------------
// R-D2: flush is the point where deferred destructions happen, even with an empty buffer.
// ---------------------------------------------------------------------------------------

#[test]
fn r_d2_flush_processes_queue_even_when_empty() {
    let (device, mut ic, world) = setup(Gpu::Manual, true, Clock::Completed);
    let r = device.create_resource(buffer(32)).unwrap();
    let (id, alloc) = ids(&device, r);
    device.destroy(r).unwrap();
    // Destroy itself never destroys: that is the flush's job.
    assert_eq!(destroyed_at(&world.trace(), id), None);
    assert!(world.is_allocated(alloc));

    world.clear_trace();
    ic.flush().unwrap();
    let trace = world.trace();
    // Nothing was recorded: no submit, and still the queue ran.
    assert_eq!(count(&trace, Hook::Submit), 0, "{trace:#?}");
    assert!(
        destroyed_at(&trace, id).is_some(),
        "no DestroyObject during the empty flush: {trace:#?}"
    );
    // Never referenced by any buffer: its memory goes at once.
    assert!(deallocated_at(&trace, alloc).is_some());
    assert!(!world.is_allocated(alloc));
    assert!(stale(&device, r));
    assert_eq!(ic.retire_stats().destroyed, 1);
    assert_eq!(ic.retire_stats().waiting_destruction, 0);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_d2_flush_with_nothing_destroyed_still_works() {
    let (device, mut ic, world) = setup(Gpu::Manual, true, Clock::Completed);
    let r = device.create_resource(buffer(16)).unwrap();
    for _ in 0..3 {
        ic.flush().unwrap();
    }
    ic.update(r, 0, &[1; 16]).unwrap();
    ic.flush().unwrap();
    ic.flush().unwrap();
    let trace = world.trace();
    assert_eq!(
        count(&trace, Hook::Submit),
        1,
        "only the non-empty buffer is submitted"
    );
    assert_eq!(count(&trace, Hook::DestroyObject), 0);
    assert_eq!(ic.retire_stats().destroyed, 0);
    assert!(device.object(r).is_ok());
    assert_eq!(world.errors(), vec![]);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_d2_shared_resource_deallocated_during_flush() {
    let (device, mut ic, world) = setup(Gpu::Immediate, true, Clock::Completed);
    let shared = device
        .create_resource(ResourceDesc {
            byte_size: 64,
            flags: ResourceFlags::SHARED,
            ..Default::default()
        })
        .unwrap();
    let (id, alloc) = ids(&device, shared);
    ic.update(shared, 0, &[3; 64]).unwrap();
    ic.flush().unwrap();
    thread::scope(|s| {
        s.spawn(|| device.destroy(shared).unwrap());
    });
    assert!(
        world.is_allocated(alloc),
        "deallocated by the destroying thread"
    );
    world.clear_trace();
    ic.flush().unwrap(); // empty buffer
    let trace = world.trace();
    let ic_thread = thread::current().id();
    let d = destroyed_at(&trace, id).expect("destroyed during flush");
    let f = deallocated_at(&trace, alloc).expect("deallocated during flush");
    assert!(d < f);
    assert_eq!(trace[d].thread, ic_thread);
    assert_eq!(trace[f].thread, ic_thread);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

// ---------------------------------------------------------------------------------------
// R-D1: destroy is free-threaded and never destroys before the referencing buffer's submit.
// ---------------------------------------------------------------------------------------

#[test]
fn r_d1_deallocate_never_before_submit_of_last_referencing_buffer() {
    let (device, mut ic, world) = setup(Gpu::Manual, true, Clock::Completed);
    let x = device.create_resource(buffer(16)).unwrap();
    let y = device.create_resource(buffer(16)).unwrap();
    let (x_id, x_alloc) = ids(&device, x);
    ic.update(x, 0, &[9; 16]).unwrap();
    ic.command(&SoftCommand::Copy { dst: y, src: x }).unwrap();
    let fence = ic.open_buffer();

    // Destroyed from another thread while the open buffer references it.
    thread::scope(|s| {
        s.spawn(|| device.destroy(x).unwrap());
    });
    let trace = world.trace();
    assert_eq!(
        destroyed_at(&trace, x_id),
        None,
        "destroyed before the flush"
    );
    assert_eq!(deallocated_at(&trace, x_alloc), None);
    assert!(world.is_allocated(x_alloc));
    assert!(
        stale(&device, x),
        "a destroyed handle is dead to lookups at once"
    );
    // Recording more work still runs on what the buffer holds.
    ic.command(&SoftCommand::Fill { dst: y, value: 1 }).unwrap();

    ic.flush().unwrap();
    let trace = world.trace();
    let sub = submitted_at(&trace, fence).expect("the referencing buffer was submitted");
    let des = destroyed_at(&trace, x_id).expect("destroyed at the flush that submitted it");
    assert!(sub < des, "DestroyObject before Submit: {trace:#?}");
    // Completed clock, GPU not done: the memory stays.
    assert!(world.is_allocated(x_alloc));
    assert_eq!(ic.retire_stats().waiting_deallocation, 1);

    world.complete_all();
    ic.flush().unwrap();
    let trace = world.trace();
    let dea = deallocated_at(&trace, x_alloc).expect("deallocated once the GPU finished");
    assert!(sub < dea && des < dea);
    assert_eq!(world.violations(), vec![]);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_d1_submitted_clock_deallocates_at_the_flush_that_submits() {
    let (device, mut ic, world) = setup(Gpu::Manual, false, Clock::Submitted);
    let x = device.create_resource(buffer(16)).unwrap();
    let (x_id, x_alloc) = ids(&device, x);
    ic.update(x, 0, &[5; 16]).unwrap();
    let fence = ic.open_buffer();
    thread::scope(|s| {
        s.spawn(|| device.destroy(x).unwrap());
    });
    assert!(world.is_allocated(x_alloc));
    ic.flush().unwrap();
    let trace = world.trace();
    let sub = submitted_at(&trace, fence).unwrap();
    let des = destroyed_at(&trace, x_id).unwrap();
    let dea = deallocated_at(&trace, x_alloc).expect("the submitted clock frees at the submit");
    assert!(sub < des && des < dea, "{trace:#?}");
    assert_eq!(
        world.completed(),
        0,
        "the GPU never ran: the kernel tracks it"
    );
    assert_eq!(world.violations(), vec![]);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_d1_object_destroyed_after_its_last_submit_waits_only_for_that_fence() {
    let (device, mut ic, world) = setup(Gpu::Manual, true, Clock::Completed);
    let x = device.create_resource(buffer(16)).unwrap();
    let other = device.create_resource(buffer(16)).unwrap();
    let (x_id, x_alloc) = ids(&device, x);
    ic.update(x, 0, &[5; 16]).unwrap();
    let fence = ic.open_buffer();
    ic.flush().unwrap();
    // Destroyed while buffer `fence + 1` is open: tagged with it.
    device.destroy(x).unwrap();
    ic.update(other, 0, &[1; 16]).unwrap();
    ic.flush().unwrap();
    assert!(destroyed_at(&world.trace(), x_id).is_some());
    assert!(
        world.is_allocated(x_alloc),
        "buffer {fence} still runs on the GPU"
    );
    // Only the buffer that referenced it needs to finish, not the newer one.
    world.complete_through(fence);
    ic.flush().unwrap();
    assert!(!world.is_allocated(x_alloc));
    assert!(world.completed() < ic.last_submitted());
    assert_eq!(world.violations(), vec![]);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_d1_view_keeps_its_resource_until_the_view_is_destroyed() {
    let (device, mut ic, world) = setup(Gpu::Immediate, true, Clock::Completed);
    let r = device.create_resource(buffer(64)).unwrap();
    let (r_id, r_alloc) = ids(&device, r);
    let v = device
        .create_view(
            HandleType::RenderTargetView,
            ViewDesc {
                resource: r,
                first_byte: 16,
                byte_len: 16,
            },
        )
        .unwrap();
    let (v_id, v_alloc) = ids(&device, v);
    device.destroy(r).unwrap();
    ic.flush().unwrap();
    ic.flush().unwrap();
    assert_eq!(
        destroyed_at(&world.trace(), r_id),
        None,
        "destroyed while a view needs it"
    );
    assert!(world.is_allocated(r_alloc));
    assert!(stale(&device, r));
    // The view still works, and writes into the resource's memory.
    ic.command(&SoftCommand::ClearView {
        view: v,
        value: 0xAB,
    })
    .unwrap();
    ic.flush().unwrap();
    let bytes = world.read(r_alloc).unwrap();
    assert_eq!(&bytes[16..32], &[0xAB; 16]);
    assert_eq!(&bytes[..16], &[0; 16]);

    device.destroy(v).unwrap();
    ic.flush().unwrap();
    let trace = world.trace();
    let dv = destroyed_at(&trace, v_id).expect("view destroyed");
    let dr = destroyed_at(&trace, r_id).expect("resource destroyed with its last view");
    assert!(dv < dr, "a resource destroyed before its view: {trace:#?}");
    assert!(!world.is_allocated(r_alloc) && !world.is_allocated(v_alloc));
    assert_eq!(world.violations(), vec![]);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_d1_resource_reached_only_through_a_view_is_not_freed_before_submit() {
    // The GPU reaches a resource's memory through a view bound in the open buffer: the
    // resource must wait for that buffer even though no operation named it directly.
    let (device, mut ic, world) = setup(Gpu::Manual, false, Clock::Submitted);
    let r = device.create_resource(buffer(64)).unwrap();
    let (r_id, r_alloc) = ids(&device, r);
    let v = device
        .create_view(
            HandleType::ShaderResourceView,
            ViewDesc {
                resource: r,
                first_byte: 0,
                byte_len: 64,
            },
        )
        .unwrap();
    ic.flush().unwrap();
    ic.bind(srv_point(), Some(v.any())).unwrap();
    let fence = ic.open_buffer();
    device.destroy(v).unwrap();
    device.destroy(r).unwrap();
    // The binding holds the view (and through it the resource) until it is undone.
    ic.clear_state().unwrap();
    assert!(world.is_allocated(r_alloc));
    ic.flush().unwrap();
    let trace = world.trace();
    let sub = submitted_at(&trace, fence).unwrap();
    let dea = deallocated_at(&trace, r_alloc).unwrap();
    assert!(sub < dea);
    assert!(sub < destroyed_at(&trace, r_id).unwrap());
    assert_eq!(world.violations(), vec![]);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

// ---------------------------------------------------------------------------------------
// R-D3: everything is destroyed before DestroyDevice returns.
// ---------------------------------------------------------------------------------------

struct Zoo {
    /// (view id, resource id) pairs.
    views: Vec<(u64, u64)>,
    live: Handle<cmdlist::handle::Resource>,
    created: usize,
}

/// A device in every state at once: live objects, views on live and destroyed resources,
/// destroys pending in the open buffer, deallocations waiting for the GPU.
fn populate(device: &Dev, ic: &mut Ic) -> Zoo {
    let mut views = Vec::new();
    let mut view_on = |r: Handle<cmdlist::handle::Resource>, ty: HandleType| {
        let v = device
            .create_view(
                ty,
                ViewDesc {
                    resource: r,
                    first_byte: 0,
                    byte_len: 8,
                },
            )
            .unwrap();
        views.push((device.object(v).unwrap().id, device.object(r).unwrap().id));
        v
    };
    let r1 = device.create_resource(buffer(32)).unwrap();
    let r2 = device.create_resource(buffer(32)).unwrap();
    let r3 = device.create_resource(buffer(32)).unwrap();
    let r4 = device.create_resource(buffer(32)).unwrap();
    let v1 = view_on(r1, HandleType::ShaderResourceView);
    let _v1b = view_on(r1, HandleType::UnorderedAccessView);
    let v2 = view_on(r2, HandleType::RenderTargetView);
    let v3 = view_on(r3, HandleType::DepthStencilView);
    let _shader = device.create(&ObjectDesc::Shader(&[1, 2, 3, 4])).unwrap();
    let _state = device
        .create(&ObjectDesc::State {
            ty: HandleType::BlendState,
            desc: &[],
        })
        .unwrap();
    let q = device.create_query(QueryKind::Event).unwrap();

    // r3 and its view: referenced, submitted, destroyed; memory waits for the GPU.
    ic.command(&SoftCommand::ClearView { view: v3, value: 3 })
        .unwrap();
    ic.flush().unwrap();
    device.destroy(v3).unwrap();
    device.destroy(r3).unwrap();
    ic.flush().unwrap();
    // r1 destroyed while its views live.
    device.destroy(r1).unwrap();
    ic.bind(srv_point(), Some(v1.any())).unwrap();
    // v2 referenced by the open buffer, then destroyed.
    ic.command(&SoftCommand::ClearView { view: v2, value: 2 })
        .unwrap();
    device.destroy(v2).unwrap();
    ic.end_query(q).unwrap();
    ic.update(r4, 0, &[4; 32]).unwrap();
    Zoo {
        views,
        live: r4,
        created: 11,
    }
}

fn check_drained(world: &SoftWorld, zoo: &Zoo) {
    assert_eq!(world.check_after_device_destroyed(), vec![]);
    assert_eq!(world.live_allocations(), 0);
    let trace = world.trace();
    assert_eq!(count(&trace, Hook::CreateObject), zoo.created);
    assert_eq!(
        count(&trace, Hook::DestroyObject),
        zoo.created,
        "{trace:#?}"
    );
    assert_eq!(
        count(&trace, Hook::Allocate),
        count(&trace, Hook::Deallocate)
    );
    for &(view, resource) in &zoo.views {
        let dv = destroyed_at(&trace, view).unwrap();
        let dr = destroyed_at(&trace, resource).unwrap();
        assert!(
            dv < dr,
            "resource {resource} destroyed before its view {view}"
        );
    }
}

fn check_removed(device: &Dev, world: &SoftWorld, zoo: &Zoo) {
    let before = world.trace().len();
    thread::scope(|s| {
        s.spawn(|| {
            assert!(device.is_removed());
            assert_eq!(device.create_resource(buffer(8)), Err(Error::DeviceRemoved));
            assert_eq!(
                device.create_query(QueryKind::Event).err(),
                Some(Error::DeviceRemoved)
            );
            assert_eq!(device.destroy(zoo.live), Err(Error::DeviceRemoved));
            assert_eq!(device.object(zoo.live).err(), Some(Error::DeviceRemoved));
        });
    });
    let trace = world.trace();
    assert!(
        trace[before..].iter().all(|e| e.hook == Hook::SetError),
        "hooks ran on a destroyed device: {:#?}",
        &trace[before..]
    );
    assert_eq!(world.live_allocations(), 0);
}

#[test]
fn r_d3_device_destruction_drains_everything() {
    let (device, mut ic, world) = setup(Gpu::Manual, true, Clock::Completed);
    let zoo = populate(&device, &mut ic);
    assert!(world.live_allocations() > 0);
    assert!(
        ic.retire_stats().waiting_deallocation > 0,
        "the GPU never completed r3's buffer"
    );
    let last_fence = ic.open_buffer();
    world.clear_trace();
    ic.destroy_device().unwrap();
    let trace = world.trace();
    // The open buffer was submitted and waited for before anything it uses was freed.
    let sub = submitted_at(&trace, last_fence).expect("the open buffer is submitted");
    let wait = position(&trace, |e| {
        e.hook == Hook::WaitForFence && e.fence >= last_fence
    })
    .expect("waited");
    assert!(sub < wait);
    let first_free = position(&trace, |e| e.hook == Hook::Deallocate).unwrap();
    assert!(wait < first_free, "deallocated before waiting for the GPU");
    assert_eq!(world.check_after_device_destroyed(), vec![]);
    assert_eq!(world.live_allocations(), 0);
    check_removed(&device, &world, &zoo);
}

#[test]
fn r_d3_device_destruction_destroys_views_before_resources() {
    let (device, mut ic, world) = setup(Gpu::Manual, true, Clock::Completed);
    let zoo = populate(&device, &mut ic);
    ic.destroy_device().unwrap();
    check_drained(&world, &zoo);
    check_removed(&device, &world, &zoo);
}

#[test]
fn r_d3_dropping_the_immediate_context_drains_everything() {
    let (device, mut ic, world) = setup(Gpu::PollLag(4), true, Clock::Completed);
    let zoo = populate(&device, &mut ic);
    drop(ic);
    check_drained(&world, &zoo);
    check_removed(&device, &world, &zoo);
}

#[test]
fn r_d3_device_destruction_drains_free_threaded_destroys() {
    // Destroys from other threads right before DestroyDevice are part of what it drains.
    let (device, mut ic, world) = setup(Gpu::Manual, false, Clock::Submitted);
    let mut all = Vec::new();
    for i in 0..64u8 {
        let r = device.create_resource(buffer(8)).unwrap();
        ic.update(r, 0, &[i; 8]).unwrap();
        all.push(r);
    }
    thread::scope(|s| {
        for chunk in all.chunks(16).take(3) {
            let device = &device;
            s.spawn(move || {
                for &r in chunk {
                    device.destroy(r).unwrap();
                }
            });
        }
    });
    ic.destroy_device().unwrap();
    let trace = world.trace();
    assert_eq!(count(&trace, Hook::DestroyObject), 64);
    assert_eq!(count(&trace, Hook::Deallocate), 64);
    world.assert_clean();
}

/// R-D3, R-H3: threads create views of a resource while the immediate context destroys the
/// device. A create either finishes before the drain (its view is drained, before the
/// resource) or is refused with `DeviceRemoved` before any hook: the resource is never
/// destroyed before or while the driver creates a view of it, nor before a view of it.
#[test]
fn r_d3_device_destruction_racing_view_creation_keeps_views_before_their_resource() {
    for round in 0..if cfg!(miri) { 2 } else { 300 } {
        let (device, mut ic, world) = setup(Gpu::Immediate, true, Clock::Completed);
        let r = device.create_resource(buffer(64)).unwrap();
        let resource_id = {
            let trace = world.trace();
            trace
                .iter()
                .rev()
                .find(|e| e.hook == Hook::CreateObject)
                .expect("created")
                .object
        };
        let start = std::sync::Barrier::new(3);
        thread::scope(|s| {
            for _ in 0..2 {
                let (device, start) = (&device, &start);
                s.spawn(move || {
                    start.wait();
                    loop {
                        let view = device.create_view(
                            HandleType::ShaderResourceView,
                            ViewDesc {
                                resource: r,
                                first_byte: 0,
                                byte_len: 16,
                            },
                        );
                        match view {
                            Ok(_) => {}
                            Err(Error::DeviceRemoved) => break,
                            Err(e) => panic!("round {round}: {e:?}"),
                        }
                    }
                });
            }
            start.wait();
            for _ in 0..round % 7 * 10 {
                std::hint::spin_loop();
            }
            ic.destroy_device().unwrap();
        });
        let trace = world.trace();
        let resource_gone = position(&trace, |e| {
            e.hook == Hook::DestroyObject && e.object == resource_id
        })
        .expect("the resource is destroyed by the drain");
        let views: HashSet<u64> = trace
            .iter()
            .filter(|e| {
                e.hook == Hook::CreateObject && e.ty == Some(HandleType::ShaderResourceView)
            })
            .map(|e| e.object)
            .collect();
        for (i, e) in trace.iter().enumerate() {
            let is_view_event = matches!(e.hook, Hook::CreateObject | Hook::DestroyObject)
                && views.contains(&e.object);
            assert!(
                !is_view_event || i < resource_gone,
                "round {round}: {e:?} after its resource was destroyed"
            );
        }
        let destroyed: HashSet<u64> = trace
            .iter()
            .filter(|e| e.hook == Hook::DestroyObject)
            .map(|e| e.object)
            .collect();
        assert!(
            views.is_subset(&destroyed),
            "round {round}: a view was not drained"
        );
        world.assert_clean();
    }
}

// ---------------------------------------------------------------------------------------
// R-D4: the two patterns applications use to make destruction look synchronous.
// ---------------------------------------------------------------------------------------

/// A resource bound and written in the open buffer, then released by the application.
fn bound_and_released(device: &Dev, ic: &mut Ic) -> (u64, AllocationHandle, AnyHandle) {
    let r = device.create_resource(buffer(64)).unwrap();
    let v = device
        .create_view(
            HandleType::ShaderResourceView,
            ViewDesc {
                resource: r,
                first_byte: 0,
                byte_len: 64,
            },
        )
        .unwrap();
    let (r_id, r_alloc) = ids(device, r);
    ic.update(r, 0, &[7; 64]).unwrap();
    ic.bind(srv_point(), Some(v.any())).unwrap();
    device.destroy(v).unwrap();
    device.destroy(r).unwrap();
    (r_id, r_alloc, v.any())
}

#[test]
fn r_d4_clearstate_flush_destroys_as_soon_as_possible() {
    let (device, mut ic, world) = setup(Gpu::Manual, true, Clock::Completed);
    let (r_id, r_alloc, v) = bound_and_released(&device, &mut ic);
    assert_eq!(ic.binding(srv_point()), Some(v));
    ic.clear_state().unwrap();
    assert_eq!(ic.binding(srv_point()), None);
    ic.flush().unwrap();
    // Destroyed (driver hook ran, handle dead) at this very flush...
    assert!(destroyed_at(&world.trace(), r_id).is_some());
    assert_eq!(ic.retire_stats().waiting_destruction, 0);
    assert!(stale(&device, v));
    // ...but the GPU may still read it: memory stays until the fence passes.
    assert!(world.is_allocated(r_alloc));
    assert_eq!(world.violations(), vec![]);
    world.complete_all();
    ic.flush().unwrap();
    assert!(!world.is_allocated(r_alloc));
    assert_eq!(ic.retire_stats().waiting_deallocation, 0);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_d4_heavy_pattern_destroys_completely() {
    let (device, mut ic, world) = setup(Gpu::Manual, true, Clock::Completed);
    let event = device.create_query(QueryKind::Event).unwrap();
    let (r_id, r_alloc, _) = bound_and_released(&device, &mut ic);
    ic.clear_state().unwrap();
    ic.flush().unwrap();
    ic.end_query(event).unwrap();
    let mut spins = 0;
    while !ic.query_signaled(event).unwrap() {
        spins += 1;
        assert!(spins < 1000, "the event query never signalled");
        if spins == 3 {
            world.complete_all();
        }
    }
    assert!(spins >= 3, "signalled before the GPU completed");
    ic.flush().unwrap();
    assert!(destroyed_at(&world.trace(), r_id).is_some());
    assert!(
        !world.is_allocated(r_alloc),
        "the heavy pattern left memory behind"
    );
    let stats = ic.retire_stats();
    assert_eq!(
        (stats.waiting_destruction, stats.waiting_deallocation),
        (0, 0)
    );
    assert_eq!(world.violations(), vec![]);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_d4_heavy_pattern_with_a_lagging_gpu() {
    let (device, mut ic, world) = setup(Gpu::PollLag(3), true, Clock::Completed);
    let event = device.create_query(QueryKind::Event).unwrap();
    let (_, r_alloc, _) = bound_and_released(&device, &mut ic);
    ic.clear_state().unwrap();
    ic.flush().unwrap();
    ic.end_query(event).unwrap();
    let mut spins = 0;
    while !ic.query_signaled(event).unwrap() {
        spins += 1;
        assert!(spins < 1000, "the event query never signalled");
    }
    ic.flush().unwrap();
    assert!(
        !world.is_allocated(r_alloc),
        "the heavy pattern left memory behind"
    );
    assert_eq!(ic.retire_stats().waiting_deallocation, 0);
    assert_eq!(world.violations(), vec![]);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_d4_a_bound_object_waits_for_clear_state() {
    // A binding holds its object as D3D's references do: destroyed while bound, it stays
    // (memory included) until ClearState undoes the binding; then `Flush` destroys it,
    // R-D4's "ClearState(); Flush();".
    let (device, mut ic, world) = setup(Gpu::Immediate, true, Clock::Completed);
    let r = device.create_resource(buffer(16)).unwrap();
    let (r_id, r_alloc) = ids(&device, r);
    ic.bind(srv_point(), Some(r.any())).unwrap();
    device.destroy(r).unwrap();
    for _ in 0..3 {
        ic.flush().unwrap();
    }
    assert!(world.is_allocated(r_alloc), "destroyed while still bound");
    assert_eq!(destroyed_at(&world.trace(), r_id), None);
    ic.clear_state().unwrap();
    ic.flush().unwrap();
    assert!(destroyed_at(&world.trace(), r_id).is_some());
    assert!(!world.is_allocated(r_alloc));
    assert_eq!(world.violations(), vec![]);
    ic.destroy_device().unwrap();
    world.assert_clean();
}
