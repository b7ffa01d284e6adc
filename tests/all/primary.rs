//! Primaries (R-P1): created and destroyed on the immediate context's thread, destroyed
//! synchronously with the deallocate-callback inside the destroy call, never through the
//! free-threaded path.

use std::thread;

use cmdlist::handle::Resource;

use crate::common::{app, position};
use cmdlist::soft::{self, Gpu, Hook, SoftCommand, SoftConfig, SoftDriver, SoftKernel, SoftWorld};
use cmdlist::{
    AllocationHandle, AppError, Clock, Device, DeviceConfig, Handle, HandleType, ImmediateContext,
    ObjectDesc, ResourceDesc, ResourceFlags, ViewDesc,
};

type Dev = Device<SoftDriver, SoftKernel>;
type Ic = ImmediateContext<SoftDriver, SoftKernel>;

fn setup(gpu: Gpu) -> (Dev, Ic, std::sync::Arc<SoftWorld>) {
    soft::device(
        SoftConfig {
            gpu,
            ..SoftConfig::from_env().unwrap()
        },
        DeviceConfig::default().with_retire_clock(Clock::Completed),
    )
    .unwrap()
}

fn scanout() -> ResourceDesc {
    ResourceDesc {
        byte_size: 256,
        ..Default::default()
    }
}

fn ids(device: &Dev, h: Handle<Resource>) -> (u64, AllocationHandle) {
    let o = device.object(h).unwrap();
    (o.id, o.allocation().unwrap())
}

#[test]
fn r_p1_primary_created_on_the_ic_thread() {
    let (device, mut ic, world) = setup(Gpu::Manual);
    world.clear_trace();
    let p = ic.create_primary(scanout()).unwrap();
    let (id, alloc) = ids(&device, p);
    let trace = world.trace();
    let me = thread::current().id();
    let a = position(&trace, |e| {
        e.hook == Hook::Allocate && e.allocation == alloc.0.get()
    })
    .unwrap();
    let c = position(&trace, |e| e.hook == Hook::CreateObject && e.object == id).unwrap();
    assert!(
        a < c,
        "the driver's create ran before its memory was allocated"
    );
    assert!(trace.iter().all(|e| e.thread == me), "{trace:#?}");
    ic.destroy_primary(p).unwrap();
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_p1_primary_destroyed_synchronously_on_ic_thread() {
    let (device, mut ic, world) = setup(Gpu::Manual);
    let p = ic.create_primary(scanout()).unwrap();
    let (id, alloc) = ids(&device, p);
    let before = world.trace().len();
    ic.destroy_primary(p).unwrap();
    let trace = world.trace();
    let during = &trace[before..];
    let me = thread::current().id();
    let d = position(during, |e| e.hook == Hook::DestroyObject && e.object == id)
        .expect("destroyed inside the call");
    let f = position(during, |e| {
        e.hook == Hook::Deallocate && e.allocation == alloc.0.get()
    })
    .expect("deallocated inside the call");
    assert!(d < f);
    assert!(during.iter().all(|e| e.thread == me));
    // Nothing was deferred: no flush needed, nothing queued, the handle is dead at once.
    assert!(!world.is_allocated(alloc));
    assert_eq!(device.object(p).err(), Some(app(AppError::StaleHandle)));
    assert_eq!(ic.retire_stats().waiting_destruction, 0);
    assert_eq!(ic.destroy_primary(p), Err(app(AppError::StaleHandle)));
    let count = world.trace().len();
    ic.flush().unwrap();
    assert!(
        world.trace()[count..]
            .iter()
            .all(|e| e.hook != Hook::DestroyObject),
        "destroyed a second time by the flush"
    );
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_p1_primary_through_free_threaded_path_is_app_error() {
    let (device, mut ic, world) = setup(Gpu::Manual);
    let p = ic.create_primary(scanout()).unwrap();
    let ordinary = device.create_resource(scanout()).unwrap();
    let mismatch = app(AppError::PrimaryMismatch);
    thread::scope(|s| {
        s.spawn(|| {
            // Destroying a primary from any thread through the free-threaded path...
            assert_eq!(device.destroy(p), Err(mismatch));
            assert_eq!(device.destroy(p.any()), Err(mismatch));
            // ...and creating one there.
            let desc = ResourceDesc {
                flags: ResourceFlags::PRIMARY,
                ..scanout()
            };
            assert_eq!(device.create_resource(desc), Err(mismatch));
            assert_eq!(
                device.create(&ObjectDesc::Resource(desc)).err(),
                Some(mismatch)
            );
        });
    });
    assert_eq!(device.destroy(p), Err(mismatch));
    // The primary path refuses ordinary objects.
    assert_eq!(ic.destroy_primary(ordinary), Err(mismatch));
    // Each refusal changed nothing and reached the error sink.
    assert!(device.object(p).is_ok() && device.object(ordinary).is_ok());
    ic.flush().unwrap();
    assert_eq!(ic.retire_stats().destroyed, 0);
    assert_eq!(world.errors().len(), 6);
    assert!(world.errors().iter().all(|&(_, e)| e == mismatch));
    assert_eq!(
        world
            .trace()
            .iter()
            .filter(|e| e.hook == Hook::CreateObject)
            .count(),
        2,
        "a refused primary create reached the driver"
    );
    // The right paths still work.
    ic.destroy_primary(p).unwrap();
    device.destroy(ordinary).unwrap();
    ic.flush().unwrap();
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_p1_primary_referenced_by_open_buffer_is_submitted_first() {
    let (device, mut ic, world) = setup(Gpu::Immediate);
    let p = ic.create_primary(scanout()).unwrap();
    let src = device.create_resource(scanout()).unwrap();
    let (id, alloc) = ids(&device, p);
    ic.command(&SoftCommand::Fill {
        dst: src,
        value: 0x5A,
    })
    .unwrap();
    ic.command(&SoftCommand::Copy { dst: p, src }).unwrap();
    let fence = ic.open_buffer();
    let before = world.trace().len();
    ic.destroy_primary(p).unwrap();
    let trace = world.trace();
    let during = &trace[before..];
    let sub = position(during, |e| e.hook == Hook::Submit && e.fence == fence)
        .expect("the open buffer was submitted");
    let des = position(during, |e| e.hook == Hook::DestroyObject && e.object == id).unwrap();
    let dea = position(during, |e| {
        e.hook == Hook::Deallocate && e.allocation == alloc.0.get()
    })
    .unwrap();
    assert!(sub < des && des < dea, "{during:#?}");
    assert!(!world.is_allocated(alloc));
    assert_eq!(world.violations(), vec![]);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_p1_primary_in_use_by_the_gpu_waits_before_deallocation() {
    // R-P1 forbids deferring a primary's destruction, and the Completed clock forbids freeing
    // memory a running buffer reads (R-D4): the only way to honour both is to wait for the
    // fence inside the destroy call.
    let (device, mut ic, world) = setup(Gpu::Manual);
    let p = ic.create_primary(scanout()).unwrap();
    let (_, alloc) = ids(&device, p);
    ic.update(p, 0, &[1; 16]).unwrap();
    ic.destroy_primary(p).unwrap();
    assert!(
        !world.is_allocated(alloc),
        "R-P1: deallocated inside the destroy call"
    );
    // The soft kernel sees the deallocation while buffer 1, which writes it, still runs.
    assert_eq!(world.violations(), vec![]);
    let trace = world.trace();
    let wait = position(&trace, |e| e.hook == Hook::WaitForFence);
    let dea = position(&trace, |e| {
        e.hook == Hook::Deallocate && e.allocation == alloc.0.get()
    })
    .unwrap();
    assert!(
        wait.is_some_and(|w| w < dea),
        "deallocated without waiting for the GPU: {trace:#?}"
    );
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_p1_primary_with_a_live_view_goes_with_its_last_view() {
    let (device, mut ic, world) = setup(Gpu::Immediate);
    let p = ic.create_primary(scanout()).unwrap();
    let (p_id, p_alloc) = ids(&device, p);
    let rtv = device
        .create_view(
            HandleType::RenderTargetView,
            ViewDesc {
                resource: p,
                first_byte: 0,
                byte_len: 256,
            },
        )
        .unwrap();
    ic.destroy_primary(p).unwrap();
    // Dead for the application at once, and never destroyable twice.
    assert_eq!(device.object(p).err(), Some(app(AppError::StaleHandle)));
    assert!(ic.destroy_primary(p).is_err());
    // The view still renders into the primary's memory.
    ic.command(&SoftCommand::ClearView {
        view: rtv,
        value: 9,
    })
    .unwrap();
    ic.flush().unwrap();
    assert_eq!(world.read(p_alloc).unwrap(), vec![9; 256]);
    device.destroy(rtv).unwrap();
    ic.flush().unwrap();
    let trace = world.trace();
    let destroys = trace
        .iter()
        .filter(|e| e.hook == Hook::DestroyObject && e.object == p_id)
        .count();
    assert_eq!(destroys, 1);
    assert!(!world.is_allocated(p_alloc));
    assert!(trace
        .iter()
        .filter(|e| matches!(e.hook, Hook::DestroyObject | Hook::Deallocate))
        .all(|e| e.thread == thread::current().id()));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_p1_live_primary_is_destroyed_with_the_device() {
    let (device, mut ic, world) = setup(Gpu::Manual);
    let p = ic.create_primary(scanout()).unwrap();
    ic.update(p, 0, &[3; 256]).unwrap();
    let (p_id, _) = ids(&device, p);
    ic.destroy_device().unwrap();
    assert!(world.trace().iter().any(|e| e.hook == Hook::DestroyObject
        && e.object == p_id
        && e.ty == Some(HandleType::Resource)));
    world.assert_clean();
}
