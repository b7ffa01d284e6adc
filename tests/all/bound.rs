//! R-D1 for what a buffer reaches through bindings: a D3D11 draw reads the bound state
//! without naming it in `Command::for_each_object`, so an object stays in every buffer that
//! ran while it was bound (or that unbound it), and its memory waits for the last of them.
//! The soft driver's commands read every bound object (and a bound view's resource), so its
//! kernel flags a buffer whose allocation list leaves one out (R-D1) and memory freed while
//! such a buffer still runs (R-D4). Each test runs in the three list modes.

use cmdlist::handle::{Resource, View};
use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig, SoftDevice, SoftImmediate, SoftWorld};
use cmdlist::{
    AllocationHandle, BindClass, BindPoint, DeviceConfig, Handle, HandleType, ListMode, Stage,
    ViewDesc,
};
use std::sync::Arc;

use crate::common::{allocation, buffer};

const CB0: BindPoint = BindPoint::new(BindClass::ConstantBuffer(Stage::Pixel), 0);
const SRV0: BindPoint = BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0);

/// A device in each list mode; fences complete only when the test says so.
fn devices() -> impl Iterator<Item = (SoftDevice, SoftImmediate, Arc<SoftWorld>)> {
    [(false, false), (true, false), (true, true)]
        .into_iter()
        .map(|(command_lists, driver_built)| {
            let config = SoftConfig {
                gpu: Gpu::Manual,
                strict_gpu: true,
                command_lists,
                driver_built,
                ..SoftConfig::from_env().unwrap()
            };
            soft::device(config, DeviceConfig::default()).unwrap()
        })
}

/// Every buffer completed and flushed, three times: whatever nothing holds any more is gone
/// (a view at one flush, the resource it held at the next).
fn settle(ic: &mut SoftImmediate, world: &SoftWorld) {
    for _ in 0..3 {
        world.complete_all();
        ic.flush().unwrap();
    }
}

/// A buffer, and a shader-resource view of it.
fn resource_and_view(device: &SoftDevice) -> (Handle<Resource>, Handle<View>) {
    let r = device.create_resource(buffer(64)).unwrap();
    let desc = ViewDesc {
        resource: r,
        first_byte: 0,
        byte_len: 64,
    };
    let v = device
        .create_view(HandleType::ShaderResourceView, desc)
        .unwrap();
    (r, v)
}

/// Fence 1 completes, fence 2 does not: the allocations must still be there; then fence 2
/// completes and they go. No rule broken on the way.
fn freed_only_after_buffer_2(
    ic: &mut SoftImmediate,
    world: &SoftWorld,
    allocations: &[AllocationHandle],
    mode: ListMode,
) {
    assert!(world.last_submitted() >= 2, "{mode:?}");
    world.complete_through(1);
    ic.flush().unwrap();
    for a in allocations {
        assert!(
            world.is_allocated(*a),
            "{mode:?}: {a:?} deallocated while buffer 2, which ran with it bound, still runs"
        );
    }
    world.complete_all();
    // A view goes at one flush, the resource it held at the next.
    ic.flush().unwrap();
    ic.flush().unwrap();
    for a in allocations {
        assert!(!world.is_allocated(*a), "{mode:?}: {a:?} never deallocated");
    }
    assert!(
        world.violations().is_empty(),
        "{mode:?}: {:?}",
        world.violations()
    );
}

#[test]
fn r_d1_bound_objects_stay_until_every_buffer_that_ran_with_them_completed() {
    for (device, mut ic, world) in devices() {
        let mode = device.list_mode();
        let cb = device.create_resource(buffer(64)).unwrap();
        let (texture, srv) = resource_and_view(&device);
        let target = device.create_resource(buffer(64)).unwrap();
        let kept = [allocation(&device, cb), allocation(&device, texture)];
        // Buffer 1: bound.
        ic.bind(CB0, Some(cb.any())).unwrap();
        ic.bind(SRV0, Some(srv.any())).unwrap();
        ic.flush().unwrap();
        // Buffer 2: a draw reads them through the bindings; the application releases them,
        // then ClearState and Flush (R-D4's first pattern).
        ic.command(&SoftCommand::Fill {
            dst: target,
            value: 1,
        })
        .unwrap();
        device.destroy(srv).unwrap();
        device.destroy(texture).unwrap();
        device.destroy(cb).unwrap();
        ic.clear_state().unwrap();
        ic.flush().unwrap();
        freed_only_after_buffer_2(&mut ic, &world, &kept, mode);
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

#[test]
fn r_d1_a_binding_replaced_or_cleared_by_an_execute_stays_with_that_buffer() {
    for (device, mut ic, world) in devices() {
        let mode = device.list_mode();
        let cb = device.create_resource(buffer(64)).unwrap();
        let other = device.create_resource(buffer(64)).unwrap();
        let target = device.create_resource(buffer(64)).unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        dc.command(SoftCommand::Fill {
            dst: target,
            value: 2,
        })
        .unwrap();
        let list = dc.finish().unwrap();
        let kept = [allocation(&device, cb)];
        // Buffer 1: bound. Buffer 2: the binding is replaced after a draw; then a list's
        // execute clears the replacement.
        ic.bind(CB0, Some(cb.any())).unwrap();
        ic.flush().unwrap();
        ic.command(&SoftCommand::Fill {
            dst: target,
            value: 1,
        })
        .unwrap();
        ic.bind(CB0, Some(other.any())).unwrap();
        ic.execute_command_list(&list).unwrap();
        device.destroy(cb).unwrap();
        device.destroy(other).unwrap();
        ic.flush().unwrap();
        freed_only_after_buffer_2(&mut ic, &world, &kept, mode);
        drop((list, dc));
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

#[test]
fn r_d1_an_object_bound_across_buffers_is_in_each_buffers_allocation_list() {
    for (device, mut ic, world) in devices() {
        let mode = device.list_mode();
        let cb = device.create_resource(buffer(64)).unwrap();
        let target = device.create_resource(buffer(64)).unwrap();
        ic.bind(CB0, Some(cb.any())).unwrap();
        for value in 0..3 {
            // Each buffer's draw reads the binding made in the first.
            ic.command(&SoftCommand::Fill { dst: target, value })
                .unwrap();
            ic.flush().unwrap();
        }
        assert_eq!(world.last_submitted(), 3, "{mode:?}");
        assert!(
            world.violations().is_empty(),
            "{mode:?}: {:?}",
            world.violations()
        );
        device.destroy(cb).unwrap();
        ic.clear_state().unwrap();
        ic.flush().unwrap();
        world.complete_all();
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// A bound resource whose identity rotates mid-buffer (R-X5): the draws before the rotation
/// read the allocation it had then, which moves to another resource, so the buffer lists the
/// allocations the bindings had before the rotation as well as after it.
#[test]
fn r_d1_r_x5_a_buffer_lists_what_was_bound_before_a_rotation() {
    use cmdlist::{BindFlags, ResourceDesc, Texture2d};
    for (device, mut ic, world) in devices() {
        let mode = device.list_mode();
        let bind = BindFlags::PRESENT | BindFlags::RENDER_TARGET;
        let desc = ResourceDesc::texture(Texture2d::default(), bind).unwrap();
        let (x, y) = (
            device.create_resource(desc).unwrap(),
            device.create_resource(desc).unwrap(),
        );
        let target = device.create_resource(buffer(64)).unwrap();
        let before = allocation(&device, x);
        ic.bind(SRV0, Some(x.any())).unwrap();
        ic.flush().unwrap();
        // Buffer 2: a draw reads x's allocation through the binding, then it moves to y.
        ic.command(&SoftCommand::Fill {
            dst: target,
            value: 1,
        })
        .unwrap();
        ic.rotate_resource_identities(&[x, y]).unwrap();
        assert_ne!(allocation(&device, x), before, "{mode:?}");
        ic.flush().unwrap();
        assert!(
            world.violations().is_empty(),
            "{mode:?}: {:?}",
            world.violations()
        );
        ic.clear_state().unwrap();
        ic.flush().unwrap();
        world.complete_all();
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// SOSetTargets and SetPredication are bindings like any other (`BindClass::StreamOutput`,
/// `BindClass::Predicate`), though no command names what they set: a stream-output target
/// the application releases while it is set keeps its memory until every buffer that ran
/// with it set has completed, and a released predicate is destroyed only once unset, after
/// the buffer that last ran with it was submitted (R-D1).
#[test]
fn r_d1_stream_output_targets_and_the_predicate_stay_while_set() {
    use cmdlist::soft::Hook;
    use cmdlist::QueryKind;
    const SO0: BindPoint = BindPoint::new(BindClass::StreamOutput, 0);
    const PREDICATE: BindPoint = BindPoint::new(BindClass::Predicate, 0);
    for (device, mut ic, world) in devices() {
        let mode = device.list_mode();
        let so = device.create_resource(buffer(64)).unwrap();
        let predicate = device.create_query(QueryKind::Occlusion).unwrap();
        let predicate_id = crate::common::id_of(&device, predicate);
        let target = device.create_resource(buffer(64)).unwrap();
        let so_memory = allocation(&device, so);
        let destroyed_at = |world: &SoftWorld| {
            world
                .trace()
                .iter()
                .position(|e| e.hook == Hook::DestroyObject && e.object == predicate_id)
        };
        // Buffer 1: set, then released by the application; the binding keeps both.
        ic.bind(SO0, Some(so.any())).unwrap();
        ic.bind(PREDICATE, Some(predicate.any())).unwrap();
        device.destroy(so).unwrap();
        device.destroy(predicate).unwrap();
        ic.flush().unwrap();
        assert_eq!(
            destroyed_at(&world),
            None,
            "{mode:?}: a set predicate destroyed"
        );
        // Buffer 2: a draw streams out under the predicate; then ClearState and Flush.
        ic.command(&SoftCommand::Fill {
            dst: target,
            value: 1,
        })
        .unwrap();
        ic.clear_state().unwrap();
        ic.flush().unwrap();
        let submitted_2 = world
            .trace()
            .iter()
            .position(|e| e.hook == Hook::Submit && e.fence == 2)
            .expect("buffer 2 submitted");
        let destroyed = destroyed_at(&world).expect("the unset predicate destroyed");
        assert!(
            destroyed > submitted_2,
            "{mode:?}: destroyed before buffer 2's submit"
        );
        freed_only_after_buffer_2(&mut ic, &world, &[so_memory], mode);
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// A binding keeps its object from its real destruction for as long as it lasts (R-D4), each
/// binding on its own: an object bound at two points and destroyed by the application stays
/// through flushes and completed buffers while either binding lasts, and goes once both
/// ended; a restoring execute that binds it again (R-C3) keeps it as the binding did.
#[test]
fn r_d4_an_object_stays_while_any_binding_of_it_on_the_immediate_context_lasts() {
    const CB1: BindPoint = BindPoint::new(BindClass::ConstantBuffer(Stage::Vertex), 1);
    for (device, mut ic, world) in devices() {
        let mode = device.list_mode();
        let cb = device.create_resource(buffer(64)).unwrap();
        let memory = allocation(&device, cb);
        ic.bind(CB0, Some(cb.any())).unwrap();
        ic.bind(CB1, Some(cb.any())).unwrap();
        device.destroy(cb).unwrap();
        settle(&mut ic, &world);
        assert!(world.is_allocated(memory), "{mode:?}: bound twice");
        ic.bind(CB0, None).unwrap();
        settle(&mut ic, &world);
        assert!(world.is_allocated(memory), "{mode:?}: still bound once");

        // A restoring execute: the list's clear-state unbinds it, the restore binds it again.
        let mut dc = device.create_deferred_context().unwrap();
        let list = dc.finish().unwrap();
        ic.execute_command_list_restoring(&list).unwrap();
        drop(list);
        drop(dc);
        assert_eq!(ic.binding(CB1), Some(cb.any()), "{mode:?}");
        settle(&mut ic, &world);
        assert!(
            world.is_allocated(memory),
            "{mode:?}: bound again by the restore"
        );
        // A plain execute's clear-state ends the binding.
        let mut dc = device.create_deferred_context().unwrap();
        let list = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
        drop(list);
        drop(dc);
        assert_eq!(ic.binding(CB1), None, "{mode:?}");
        settle(&mut ic, &world);
        assert!(
            !world.is_allocated(memory),
            "{mode:?}: unbound everywhere, yet kept"
        );
        assert!(
            world.violations().is_empty(),
            "{mode:?}: {:?}",
            world.violations()
        );
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// A command that reads its bound target (`FillBound`, as a draw reads bindings it does not
/// name) reaches it even after the application destroyed it (R-D4: the binding keeps its
/// object, as D3D's references do): the immediate context's hook resolves it through its
/// binding (`Resolver::get`); once unbound, the handle is stale again (R-E1) and the object
/// goes.
#[test]
fn r_d4_a_bound_object_the_application_destroyed_is_read_through_its_binding() {
    const RT0: BindPoint = BindPoint::new(BindClass::RenderTarget, 0);
    for (device, mut ic, world) in devices() {
        let mode = device.list_mode();
        let target = device.create_resource(buffer(64)).unwrap();
        let memory = allocation(&device, target);
        ic.bind(RT0, Some(target.any())).unwrap();
        device.destroy(target).unwrap();
        ic.command(&SoftCommand::FillBound {
            point: RT0,
            value: 7,
        })
        .unwrap_or_else(|e| panic!("{mode:?}: the bound target is read: {e:?}"));
        world.complete_all();
        ic.flush().unwrap();
        world.complete_all();
        assert_eq!(world.read(memory).unwrap(), vec![7; 64], "{mode:?}");
        // Unbound: the handle names a destroyed object again (a command naming it is refused
        // before any hook; `Resolver::get`'s own check is the registry's unit test).
        ic.bind(RT0, None).unwrap();
        assert_eq!(
            ic.command(&SoftCommand::Fill {
                dst: target,
                value: 8
            }),
            Err(cmdlist::Error::Application(cmdlist::AppError::StaleHandle)),
            "{mode:?}"
        );
        settle(&mut ic, &world);
        assert!(!world.is_allocated(memory), "{mode:?}: freed once unbound");
        assert!(
            world.violations().is_empty(),
            "{mode:?}: {:?}",
            world.violations()
        );
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}
