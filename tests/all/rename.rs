//! Map(DISCARD) on the immediate context renames (R-M5): the bytes are another allocation,
//! which the Unmap makes the resource's; the one it had waits in the context's pool until
//! the GPU finished every buffer that may read it, and only then is handed out again.

use std::sync::Arc;

use cmdlist::handle::Resource;
use cmdlist::soft::{
    self, Gpu, Hook, SoftCommand, SoftConfig, SoftDevice, SoftImmediate, SoftWorld,
};
use cmdlist::{
    BindFlags, DeviceConfig, Handle, HandleType, Kernel, ListMode, LockFlags, MapCaps,
    ResourceDesc, ResourceFlags, Usage, ViewDesc,
};

use crate::common::{allocation, buffer, count};

fn setup(
    mode: ListMode,
    gpu: Gpu,
    map_caps: MapCaps,
) -> (SoftDevice, SoftImmediate, Arc<SoftWorld>) {
    let config = SoftConfig {
        gpu,
        map_caps,
        ..SoftConfig::from_env().unwrap()
    }
    .with_list_mode(mode);
    soft::device(config, DeviceConfig::default()).unwrap()
}

fn dynamic(device: &SoftDevice, bytes: u64, bind: BindFlags) -> Handle<Resource> {
    let desc = ResourceDesc {
        byte_size: bytes,
        bind,
        usage: Usage::Dynamic,
        ..Default::default()
    };
    device.create_resource(desc).unwrap()
}

/// A 16-byte dynamic buffer that may have views, and a shader-resource view of it whole.
fn viewed_buffer(
    device: &SoftDevice,
) -> (
    Handle<Resource>,
    cmdlist::handle::Handle<cmdlist::handle::View>,
) {
    let viewed = dynamic(device, 16, BindFlags::SHADER_RESOURCE);
    let whole = ViewDesc {
        resource: viewed,
        first_byte: 0,
        byte_len: 16,
    };
    let view = device
        .create_view(HandleType::ShaderResourceView, whole)
        .unwrap();
    (viewed, view)
}

/// Map(DISCARD) of `r`, every byte written with `value`, Unmap. The bytes handed out are
/// undefined (R-M1): an earlier discard's where the rename reuses an allocation.
fn write_discard(ic: &mut SoftImmediate, r: Handle<Resource>, value: u8) {
    let bytes = ic.map_discard(r).unwrap();
    bytes.fill(value);
    ic.unmap(r).unwrap();
}

fn read(device: &SoftDevice, world: &SoftWorld, r: Handle<Resource>) -> Vec<u8> {
    world.read(allocation(device, r)).unwrap()
}

/// While the GPU has not finished a buffer that read the resource, each discard takes a new
/// allocation and leaves the old one as that buffer read it; once the GPU is done, the next
/// discard takes the oldest back. The driver hears each rename; the soft kernel would flag a
/// lock of memory a pending buffer reads (and does, below, when asked for one).
#[test]
fn r_m5_a_discard_renames_and_the_old_memory_waits_for_the_gpu() {
    let (device, mut ic, world) = setup(ListMode::Replayed, Gpu::Manual, MapCaps::all());
    let r = dynamic(&device, 32, BindFlags::CONSTANT_BUFFER);
    let dst = device.create_resource(buffer(32)).unwrap();
    let first = allocation(&device, r);
    write_discard(&mut ic, r, 1);
    let second = allocation(&device, r);
    assert_ne!(first, second, "renamed");
    ic.command(&SoftCommand::Copy { dst, src: r }).unwrap();
    ic.flush().unwrap();
    // The copy's buffer is submitted, not finished: the next discard cannot take `first`
    // (stamped with the buffer of the first Unmap) nor `second`.
    write_discard(&mut ic, r, 2);
    let third = allocation(&device, r);
    assert!(third != first && third != second);
    assert_eq!(
        world.read(second).unwrap(),
        [1; 32],
        "what the copy read, kept"
    );
    assert_eq!(read(&device, &world, r), [2; 32]);
    assert_eq!(read(&device, &world, dst), [1; 32]);
    let renamed: Vec<(u64, u64)> = world
        .trace()
        .iter()
        .filter(|e| e.hook == Hook::Renamed)
        .map(|e| (e.object, e.allocation))
        .collect();
    let id = device.object(r).unwrap().id;
    assert_eq!(
        renamed,
        [(id, first.0.get()), (id, second.0.get())],
        "the driver hears each rename with the allocation left"
    );
    // The GPU finishes the copy's buffer: the pool's oldest comes back. The next one was
    // stamped with the buffer of the second Unmap, which held nothing and was never
    // submitted: it comes back once a later buffer is done.
    ic.flush().unwrap();
    world.complete_all();
    write_discard(&mut ic, r, 3);
    assert_eq!(allocation(&device, r), first);
    write_discard(&mut ic, r, 4);
    assert!(![first, second, third].contains(&allocation(&device, r)));
    ic.command(&SoftCommand::Copy { dst, src: r }).unwrap();
    ic.flush().unwrap();
    world.complete_all();
    write_discard(&mut ic, r, 4);
    assert_eq!(allocation(&device, r), second);
    assert_eq!(read(&device, &world, r), [4; 32]);
    world.assert_no_violations();

    // The kernel's check: memory a pending buffer reads, locked as unreferenced.
    ic.command(&SoftCommand::Copy { dst, src: r }).unwrap();
    ic.flush().unwrap();
    let busy = allocation(&device, r);
    let flags = LockFlags::WRITE_ONLY | LockFlags::IGNORE_SYNC | LockFlags::NO_EXISTING_REFERENCE;
    let mapping = device.kernel().lock(busy, flags).unwrap();
    device.kernel().unlock(busy, mapping);
    let violations = world.violations();
    assert!(
        violations.iter().any(|v| v.rule == "R-M5"),
        "the soft kernel flags it: {violations:#?}"
    );
}

/// Views of a renamed resource embed its old allocation: the driver refreshes each before
/// its next use (R-X5's refresh), and hears nothing for a resource that can have none.
#[test]
fn r_m5_views_of_a_renamed_resource_are_refreshed_before_their_next_use() {
    let (device, mut ic, world) = setup(ListMode::Replayed, Gpu::Immediate, MapCaps::all());
    let (viewed, view) = viewed_buffer(&device);
    let constants = dynamic(&device, 16, BindFlags::CONSTANT_BUFFER);
    let dst = device.create_resource(buffer(16)).unwrap();
    ic.command(&SoftCommand::ClearView { view, value: 5 })
        .unwrap();
    world.clear_trace();
    write_discard(&mut ic, constants, 1);
    ic.command(&SoftCommand::ClearView { view, value: 6 })
        .unwrap();
    assert_eq!(count(&world.trace(), Hook::RefreshView), 0, "no view of it");
    write_discard(&mut ic, viewed, 7);
    ic.command(&SoftCommand::ClearView { view, value: 8 })
        .unwrap();
    let trace = world.trace();
    assert_eq!(count(&trace, Hook::RefreshView), 1, "{trace:#?}");
    let refreshed = trace.iter().find(|e| e.hook == Hook::RefreshView).unwrap();
    assert_eq!(refreshed.allocation, allocation(&device, viewed).0.get());
    assert_eq!(read(&device, &world, viewed), [8; 16]);
    ic.command(&SoftCommand::Copy { dst, src: viewed }).unwrap();
    assert_eq!(read(&device, &world, dst), [8; 16]);
    ic.flush().unwrap();
    drop(ic);
    world.assert_clean();
}

/// A list recorded before the rename reads the resource's bytes as they are when it runs,
/// in every list mode.
#[test]
fn r_m5_a_list_executed_after_a_rename_reads_the_new_memory() {
    for mode in ListMode::ALL {
        let (device, mut ic, world) = setup(mode, Gpu::Manual, MapCaps::all());
        let r = dynamic(&device, 8, BindFlags::VERTEX_BUFFER);
        let dst = device.create_resource(buffer(8)).unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        dc.command(SoftCommand::Copy { dst, src: r }).unwrap();
        let list = dc.finish().unwrap();
        write_discard(&mut ic, r, 3);
        ic.execute_command_list(&list).unwrap();
        assert_eq!(read(&device, &world, dst), [3; 8], "{mode:?}");
        write_discard(&mut ic, r, 4);
        ic.execute_command_list(&list).unwrap();
        assert_eq!(read(&device, &world, dst), [4; 8], "{mode:?}");
        drop((list, dc));
        ic.flush().unwrap();
        world.complete_all();
        drop(ic);
        world.assert_clean();
    }
}

/// Map(NO_OVERWRITE) after a rename appends to the renamed memory at once: its bytes are
/// there already, so nothing is flushed or waited for (R-M3).
#[test]
fn r_m5_no_overwrite_after_a_rename_appends_without_a_wait() {
    let (device, mut ic, world) = setup(ListMode::Replayed, Gpu::Manual, MapCaps::all());
    let ring = dynamic(&device, 64, BindFlags::VERTEX_BUFFER);
    ic.map_discard(ring).unwrap()[..16].fill(1);
    ic.unmap(ring).unwrap();
    world.clear_trace();
    let bytes = ic.map_no_overwrite(ring).unwrap();
    assert_eq!(&bytes[..16], &[1; 16], "contents kept");
    bytes[16..32].fill(2);
    ic.unmap(ring).unwrap();
    let trace = world.trace();
    assert_eq!(count(&trace, Hook::Flush), 0, "{trace:#?}");
    let mut expect = vec![1; 16];
    expect.extend([2; 16]);
    expect.resize(64, 0);
    assert_eq!(read(&device, &world, ring), expect);
    ic.flush().unwrap();
    world.complete_all();
    drop(ic);
    world.assert_clean();
}

/// Without the cap, and for a shared resource, the allocation stays: the driver hears the
/// bytes at the Unmap.
#[test]
fn r_m5_only_a_renaming_driver_and_an_unshared_allocation_rename() {
    for (caps, flags, renames) in [
        (MapCaps::empty(), ResourceFlags::empty(), false),
        (MapCaps::all(), ResourceFlags::SHARED, false),
        (MapCaps::all(), ResourceFlags::empty(), true),
    ] {
        let (device, mut ic, world) = setup(ListMode::Replayed, Gpu::Immediate, caps);
        let desc = ResourceDesc {
            byte_size: 8,
            usage: Usage::Dynamic,
            flags,
            ..Default::default()
        };
        let r = device.create_resource(desc).unwrap();
        let before = allocation(&device, r);
        world.clear_trace();
        write_discard(&mut ic, r, 9);
        let trace = world.trace();
        assert_eq!(
            allocation(&device, r) != before,
            renames,
            "{caps:?} {flags:?}"
        );
        assert_eq!(count(&trace, Hook::Renamed), usize::from(renames));
        assert_eq!(
            count(&trace, Hook::Execute),
            usize::from(!renames),
            "the copy"
        );
        assert_eq!(read(&device, &world, r), [9; 8]);
        drop(ic);
        world.assert_clean();
    }
}

/// An explicit trim gives back every pooled allocation the GPU is done with, and device
/// destruction the rest (the soft kernel reports any left as a leak).
#[test]
fn r_m5_trim_gives_back_what_the_gpu_is_done_with() {
    let (device, mut ic, world) = setup(ListMode::Replayed, Gpu::Manual, MapCaps::all());
    let r = dynamic(&device, 16, BindFlags::VERTEX_BUFFER);
    let dst = device.create_resource(buffer(16)).unwrap();
    let base = world.live_allocations();
    for value in 0..5 {
        write_discard(&mut ic, r, value);
        ic.command(&SoftCommand::Copy { dst, src: r }).unwrap();
        ic.flush().unwrap();
    }
    // Five renames in five buffers the GPU has not finished: five allocations pooled.
    assert_eq!(world.live_allocations(), base + 5);
    ic.trim();
    assert_eq!(world.live_allocations(), base + 5, "none done");
    world.complete_all();
    ic.flush().unwrap();
    ic.trim();
    assert_eq!(world.live_allocations(), base, "all given back");
    write_discard(&mut ic, r, 6);
    ic.command(&SoftCommand::Copy { dst, src: r }).unwrap();
    ic.flush().unwrap();
    drop(ic);
    world.assert_clean();
}

/// A view bound at a point is read by draws that do not name it: after its resource is
/// renamed, the binding is made again (the view refreshed first), as after a rotation, so
/// no driver keeps reading the old allocation through it.
#[test]
fn r_m5_a_bound_view_of_a_renamed_resource_is_bound_again() {
    let (device, mut ic, world) = setup(ListMode::Replayed, Gpu::Immediate, MapCaps::all());
    let (viewed, view) = viewed_buffer(&device);
    let point =
        cmdlist::BindPoint::new(cmdlist::BindClass::ShaderResource(cmdlist::Stage::Pixel), 0);
    ic.bind(point, Some(view.any())).unwrap();
    world.clear_trace();
    write_discard(&mut ic, viewed, 4);
    let trace = world.trace();
    let at = |hook| trace.iter().position(|e| e.hook == hook);
    let renamed = at(Hook::Renamed).expect("renamed");
    let refreshed = at(Hook::RefreshView).expect("the bound view refreshed");
    let bound = trace
        .iter()
        .rposition(|e| e.hook == Hook::Execute)
        .expect("bound again");
    assert!(renamed < refreshed && refreshed < bound, "{trace:#?}");
    assert_eq!(ic.bindings().collect::<Vec<_>>(), [(point, view.any())]);
    ic.clear_state().unwrap();
    ic.flush().unwrap();
    drop(ic);
    world.assert_clean();
}

/// Rotation (R-X5) moves a shared allocation to another resource with its never-renamed
/// mark: a Map(DISCARD) of that resource then leaves the shared allocation in place (other
/// devices know it), and the one it gave away renames as before.
#[test]
fn r_m5_a_shared_allocation_rotated_to_another_resource_is_not_renamed() {
    let (device, mut ic, world) = setup(ListMode::Replayed, Gpu::Immediate, MapCaps::all());
    let texture = cmdlist::Texture2d {
        width: 2,
        height: 2,
        array_size: 1,
        mip_levels: 1,
        samples: 1,
        format: cmdlist::dxgi::DisplayFormat::B8G8R8A8Unorm.to_dxgi(),
    };
    let desc = |flags| ResourceDesc {
        byte_size: 16,
        bind: BindFlags::PRESENT | BindFlags::RENDER_TARGET,
        usage: Usage::Dynamic,
        texture: Some(texture),
        flags,
    };
    let shared = device.create_resource(desc(ResourceFlags::SHARED)).unwrap();
    let plain = device
        .create_resource(desc(ResourceFlags::empty()))
        .unwrap();
    let (shared_memory, plain_memory) = (allocation(&device, shared), allocation(&device, plain));
    ic.rotate_resource_identities(&[plain, shared]).unwrap();
    assert_eq!(allocation(&device, plain), shared_memory, "rotated");
    write_discard(&mut ic, plain, 1);
    assert_eq!(
        allocation(&device, plain),
        shared_memory,
        "the shared one stays"
    );
    assert_eq!(read(&device, &world, plain), [1; 16]);
    write_discard(&mut ic, shared, 2);
    assert_ne!(
        allocation(&device, shared),
        plain_memory,
        "the plain one renames"
    );
    ic.flush().unwrap();
    drop(ic);
    world.assert_clean();
}

/// The pool keeps at most `DeviceConfig::rename_waiting` allocations of one size waiting for
/// the GPU: past that, a Map(DISCARD) goes through the copy (the allocation stays, the driver
/// hears the bytes), until the GPU is done with one and renames take it again.
#[test]
fn r_m5_past_the_rename_limit_a_discard_is_copied() {
    let config = SoftConfig {
        gpu: Gpu::Manual,
        map_caps: MapCaps::all(),
        ..SoftConfig::from_env().unwrap()
    };
    let device_config = DeviceConfig::default().with_rename_waiting(2);
    let (device, mut ic, world) = soft::device(config, device_config).unwrap();
    let r = dynamic(&device, 8, BindFlags::VERTEX_BUFFER);
    let dst = device.create_resource(buffer(8)).unwrap();
    let mut seen = vec![allocation(&device, r)];
    for value in 1..=4 {
        world.clear_trace();
        write_discard(&mut ic, r, value);
        let trace = world.trace();
        let renamed = count(&trace, Hook::Renamed) == 1;
        assert_eq!(renamed, value <= 2, "discard {value}: {trace:#?}");
        assert_eq!(
            count(&trace, Hook::Execute),
            usize::from(!renamed),
            "the copy"
        );
        seen.push(allocation(&device, r));
        assert_eq!(read(&device, &world, r), [value; 8]);
        ic.command(&SoftCommand::Copy { dst, src: r }).unwrap();
        ic.flush().unwrap();
    }
    assert_eq!(seen[2], seen[3], "the third discard copied");
    assert_eq!(seen[3], seen[4], "and the fourth");
    world.complete_all();
    write_discard(&mut ic, r, 5);
    assert_eq!(
        allocation(&device, r),
        seen[0],
        "the pool's oldest, done, renamed to"
    );
    ic.flush().unwrap();
    drop(ic);
    world.assert_clean();
}
