//! The DXGI base functions on the immediate context (R-X1..R-X7), against the soft world.

use std::sync::Arc;

use cmdlist::dxgi::{
    BltArgs, BltFlags, DisplayFormat, DisplayModeOutcome, DxgiContext, PresentArgs, PresentFlags,
    PresentStatus, Rect, ResidencyFold, ResidencyStatus, Rotation, S_NOT_RESIDENT,
};
use cmdlist::handle::{Resource, View};
use cmdlist::soft::inject::{self, Fault, FaultPlan};
use cmdlist::soft::{
    self, Gpu, Hook, SoftCommand, SoftConfig, SoftDevice, SoftImmediate, SoftWorld,
};
use cmdlist::{
    AppError, BindClass, BindFlags, BindPoint, Device, DeviceConfig, Error, Handle, HandleType,
    ResourceDesc, ResourceFlags, Stage, Texture2d, Usage, ViewDesc,
};

use crate::common::{allocation, app, count, id_of, position};

const W: u32 = 4;
const H: u32 = 2;
const RTV0: BindPoint = BindPoint::new(BindClass::RenderTarget, 0);
const SRV0: BindPoint = BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0);

fn device() -> (SoftDevice, SoftImmediate, Arc<SoftWorld>) {
    let soft = SoftConfig {
        gpu: Gpu::Manual,
        ..SoftConfig::from_env().unwrap()
    };
    soft::device(soft, DeviceConfig::default()).unwrap()
}

/// A `width`×`height` one-level texture in `format`, with these bind flags and samples.
fn shaped(
    width: u32,
    height: u32,
    bind: BindFlags,
    format: DisplayFormat,
    samples: u8,
) -> ResourceDesc {
    let texture = Texture2d {
        width,
        height,
        samples,
        format: format.to_dxgi(),
        ..Texture2d::default()
    };
    ResourceDesc::texture(texture, bind).unwrap()
}

/// A `W`×`H` texture description.
fn texture_desc(bind: BindFlags, format: DisplayFormat, samples: u8) -> ResourceDesc {
    shaped(W, H, bind, format, samples)
}

/// A single-sampled `w`×`h` texture.
fn texture(
    device: &SoftDevice,
    bind: BindFlags,
    format: DisplayFormat,
    w: u32,
    h: u32,
) -> Handle<Resource> {
    device
        .create_resource(shaped(w, h, bind, format, 1))
        .unwrap()
}

/// A back buffer: presentable, a render target.
fn back_buffer(device: &SoftDevice) -> Handle<Resource> {
    let bind = BindFlags::PRESENT | BindFlags::RENDER_TARGET;
    let desc = texture_desc(bind, DisplayFormat::B8G8R8A8Unorm, 1);
    device.create_resource(desc).unwrap()
}

fn rtv(device: &SoftDevice, resource: Handle<Resource>) -> Handle<View> {
    let desc = ViewDesc {
        resource,
        first_byte: 0,
        byte_len: u64::from(W * H * 4),
    };
    device
        .create_view(HandleType::RenderTargetView, desc)
        .unwrap()
}

fn present_args(src: Handle<Resource>) -> PresentArgs {
    PresentArgs {
        src,
        src_subresource: 0,
        dst: None,
        dxgi_context: DxgiContext(0xD1_6C7A),
        flags: PresentFlags::FLIP,
        flip_interval: 1,
    }
}

fn finish(world: &SoftWorld, mut ic: SoftImmediate) {
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_x1_present_submits_first_passes_the_context_and_returns_the_status() {
    let (device, mut ic, world) = device();
    let bb = back_buffer(&device);
    ic.command(&SoftCommand::Fill { dst: bb, value: 9 })
        .unwrap();
    world.set_present_status(PresentStatus(0x087A_0001));
    world.clear_trace();
    let status = ic.present(&present_args(bb)).unwrap();
    assert_eq!(status, PresentStatus(0x087A_0001), "returned unchanged");
    let trace = world.trace();
    let submit = position(&trace, |e| e.hook == Hook::Submit).expect("the fill is submitted");
    let present = position(&trace, |e| e.hook == Hook::Present).expect("the callback ran");
    assert!(submit < present, "{trace:#?}");
    let presents = world.presents();
    assert_eq!(presents.len(), 1);
    assert_eq!(presents[0].dxgi_context, DxgiContext(0xD1_6C7A));
    assert_eq!(presents[0].src, allocation(&device, bb));
    assert_eq!(presents[0].dst, None);
    assert_eq!(world.screen(), Some(vec![9; (W * H * 4) as usize]));
    assert!(world.violations().is_empty(), "{:?}", world.violations());
    drop(device);
    finish(&world, ic);
}

#[test]
fn r_x1_present_publishes_the_frame_statistics_for_any_thread() {
    let (device, mut ic, world) = device();
    let bb = back_buffer(&device);
    assert_eq!(device.frame_stats().frame, 0);
    world.set_residency(allocation(&device, bb), ResidencyStatus::SharedMemory);
    ic.present(&present_args(bb)).unwrap();
    ic.present(&present_args(bb)).unwrap();
    let reader = device.clone();
    let stats = std::thread::spawn(move || *reader.frame_stats())
        .join()
        .unwrap();
    assert_eq!(stats.frame, 2);
    assert_eq!(
        stats.presented_residency,
        Some(ResidencyStatus::SharedMemory)
    );
    assert_eq!(stats.last_submitted, ic.last_submitted());
    drop(device);
    finish(&world, ic);
}

#[test]
fn r_x1_present_refuses_a_buffer_or_a_subresource_out_of_range() {
    let (device, mut ic, world) = device();
    let buffer = device.create_resource(crate::common::buffer(64)).unwrap();
    let bb = back_buffer(&device);
    assert_eq!(
        ic.present(&present_args(buffer)),
        Err(app(AppError::NotDisplayFormat))
    );
    let mut args = present_args(bb);
    args.src_subresource = 1;
    assert_eq!(ic.present(&args), Err(app(AppError::OutOfRange)));
    assert!(world.presents().is_empty());
    drop(device);
    finish(&world, ic);
}

#[test]
fn r_x2_gamma_caps_come_from_the_driver() {
    let (device, mut ic, world) = device();
    let caps = ic.gamma_caps().unwrap();
    assert_eq!(caps.positions().len(), 256);
    assert_eq!(caps.to_ddi().num_gamma_control_points, 256);
    drop(device);
    finish(&world, ic);
}

#[test]
fn r_x2_display_mode_takes_primaries_only_and_their_current_allocation() {
    let (device, mut ic, world) = device();
    let mut desc = texture_desc(
        BindFlags::PRESENT | BindFlags::RENDER_TARGET,
        DisplayFormat::B8G8R8A8Unorm,
        1,
    );
    desc.flags = ResourceFlags::PRIMARY;
    let (p0, p1) = (
        ic.create_primary(desc).unwrap(),
        ic.create_primary(desc).unwrap(),
    );
    let (a0, a1) = (allocation(&device, p0), allocation(&device, p1));
    let plain = back_buffer(&device);
    assert_eq!(
        ic.set_display_mode(plain, 0),
        Err(app(AppError::PrimaryMismatch))
    );
    assert!(
        world.display_modes().is_empty(),
        "no callback for a refused call"
    );
    assert_eq!(ic.set_display_mode(p0, 0), Ok(DisplayModeOutcome::Set));
    ic.rotate_resource_identities(&[p0, p1]).unwrap();
    assert_eq!(ic.set_display_mode(p0, 0), Ok(DisplayModeOutcome::Set));
    assert_eq!(
        world.display_modes(),
        [a0, a1],
        "after the rotation, p0 is a1"
    );
    assert!(world.violations().is_empty(), "{:?}", world.violations());
    ic.destroy_primary(p0).unwrap();
    ic.destroy_primary(p1).unwrap();
    drop(device);
    finish(&world, ic);
}

#[test]
fn r_x3_priority_lands_on_the_current_allocation() {
    let (device, mut ic, world) = device();
    let (x, y) = (back_buffer(&device), back_buffer(&device));
    let (ax, ay) = (allocation(&device, x), allocation(&device, y));
    ic.set_resource_priority(x, 0x7800_0000).unwrap();
    ic.rotate_resource_identities(&[x, y]).unwrap();
    ic.set_resource_priority(x, 0xA000_0000).unwrap();
    assert_eq!(
        world.priorities(),
        [(vec![ax], 0x7800_0000), (vec![ay], 0xA000_0000)]
    );
    drop(device);
    finish(&world, ic);
}

#[test]
fn r_x4_residency_is_queried_once_and_folded_worst_first() {
    let (device, mut ic, world) = device();
    let rs: Vec<_> = (0..3).map(|_| back_buffer(&device)).collect();
    world.set_residency(allocation(&device, rs[1]), ResidencyStatus::SharedMemory);
    world.set_residency(allocation(&device, rs[2]), ResidencyStatus::NotResident);
    world.clear_trace();
    let mut out = [ResidencyStatus::GpuMemory; 3];
    let fold = ic.query_resource_residency(&rs, &mut out).unwrap();
    assert_eq!(
        out,
        [
            ResidencyStatus::GpuMemory,
            ResidencyStatus::SharedMemory,
            ResidencyStatus::NotResident
        ]
    );
    assert_eq!(fold, ResidencyFold::NotResident);
    assert_eq!(fold.hresult(), S_NOT_RESIDENT);
    assert_eq!(count(&world.trace(), Hook::QueryResidency), 1, "one query");
    let fold = ic
        .query_resource_residency(&rs[..2], &mut out[..2])
        .unwrap();
    assert_eq!(fold.hresult(), 0x0876_0876);
    let fold = ic
        .query_resource_residency(&rs[..1], &mut out[..1])
        .unwrap();
    assert_eq!(fold.hresult(), 0);
    drop(device);
    finish(&world, ic);
}

#[test]
fn r_x4_staging_resources_are_refused_before_any_query() {
    let (device, mut ic, world) = device();
    let bb = back_buffer(&device);
    let staging = device
        .create_resource(ResourceDesc {
            byte_size: 64,
            usage: Usage::Staging,
            ..Default::default()
        })
        .unwrap();
    world.clear_trace();
    let mut out = [ResidencyStatus::GpuMemory; 2];
    assert_eq!(
        ic.query_resource_residency(&[bb, staging], &mut out),
        Err(app(AppError::InvalidState))
    );
    assert_eq!(
        ic.query_resource_residency(&[bb], &mut out),
        Err(app(AppError::OutOfRange)),
        "one status per resource"
    );
    assert_eq!(count(&world.trace(), Hook::QueryResidency), 0);
    drop(device);
    finish(&world, ic);
}

#[test]
fn r_x5_rotation_moves_allocations_and_contents_one_place_left() {
    let (device, mut ic, world) = device();
    let rs = [
        back_buffer(&device),
        back_buffer(&device),
        back_buffer(&device),
    ];
    for (value, r) in rs.iter().enumerate() {
        ic.command(&SoftCommand::Fill {
            dst: *r,
            value: value as u8 + 1,
        })
        .unwrap();
    }
    let before: Vec<_> = rs.iter().map(|r| allocation(&device, *r)).collect();
    let ids: Vec<_> = rs.iter().map(|r| id_of(&device, *r)).collect();
    ic.rotate_resource_identities(&rs).unwrap();
    let after: Vec<_> = rs.iter().map(|r| allocation(&device, *r)).collect();
    assert_eq!(
        after,
        [before[1], before[2], before[0]],
        "X, Y, Z become Y, Z, X"
    );
    let ids_after: Vec<_> = rs.iter().map(|r| id_of(&device, *r)).collect();
    assert_eq!(ids, ids_after, "the runtime's objects stay");
    ic.flush().unwrap();
    let contents: Vec<u8> = after.iter().map(|a| world.read(*a).unwrap()[0]).collect();
    assert_eq!(
        contents,
        [2, 3, 1],
        "each handle now shows the next one's contents"
    );
    assert!(world.violations().is_empty(), "{:?}", world.violations());
    drop(device);
    finish(&world, ic);
}

/// A stamp in the open buffer moves with its allocation: the buffer's allocation list still
/// names the allocation the buffer wrote (the soft kernel checks it, R-D1), and destroying
/// both resources afterwards frees each allocation once, on the right clock.
#[test]
fn r_x5_stamps_move_with_allocations_and_each_is_freed_once() {
    let (device, mut ic, world) = device();
    let (x, y) = (back_buffer(&device), back_buffer(&device));
    ic.command(&SoftCommand::Fill { dst: x, value: 5 }).unwrap();
    ic.rotate_resource_identities(&[x, y]).unwrap();
    device.destroy(x).unwrap();
    device.destroy(y).unwrap();
    ic.flush().unwrap();
    world.complete_all();
    ic.flush().unwrap();
    assert!(world.violations().is_empty(), "{:?}", world.violations());
    assert_eq!(world.live_allocations(), 0);
    drop(device);
    finish(&world, ic);
}

#[test]
fn r_x5_bound_views_are_bound_again_and_refreshed_once_per_rotation() {
    let (device, mut ic, world) = device();
    let (x, y) = (back_buffer(&device), back_buffer(&device));
    let view = rtv(&device, x);
    ic.bind(RTV0, Some(view.any())).unwrap();
    ic.bind(SRV0, Some(y.any())).unwrap();
    world.clear_trace();
    ic.rotate_resource_identities(&[x, y]).unwrap();
    let trace = world.trace();
    let view_id = id_of(&device, view);
    let rebinds = trace
        .iter()
        .filter(|e| {
            e.hook == Hook::Execute && (e.object == view_id || e.object == id_of(&device, y))
        })
        .count();
    assert_eq!(rebinds, 2, "both bindings re-applied: {trace:#?}");
    assert_eq!(count(&trace, Hook::RotateIdentities), 1);
    let refreshed = count(&trace, Hook::RefreshView);
    assert_eq!(
        refreshed, 1,
        "the view refreshed before its re-bind: {trace:#?}"
    );
    // Used again: not refreshed again until the next rotation.
    world.clear_trace();
    ic.command(&SoftCommand::ClearView { view, value: 1 })
        .unwrap();
    ic.command(&SoftCommand::ClearView { view, value: 2 })
        .unwrap();
    assert_eq!(count(&world.trace(), Hook::RefreshView), 0);
    ic.rotate_resource_identities(&[x, y]).unwrap();
    assert_eq!(count(&world.trace(), Hook::RefreshView), 1);
    ic.clear_state().unwrap();
    drop(device);
    finish(&world, ic);
}

/// A list executed, then its resource rotated, then the list executed again in the same
/// buffer: the second replay writes the resource's new allocation, which the buffer's
/// allocation list must gain (R-D1, R-X5), although the list was stamped with the buffer
/// already. Found by the command_lists fuzz target.
#[test]
fn r_d1_r_x5_a_list_replayed_after_a_rotation_in_the_same_buffer_lists_the_new_allocations() {
    let (device, mut ic, world) = device();
    let (x, y) = (back_buffer(&device), back_buffer(&device));
    let mut dc = device.create_deferred_context().unwrap();
    dc.command(SoftCommand::Fill { dst: x, value: 3 }).unwrap();
    let list = dc.finish().unwrap();
    ic.execute_command_list(&list).unwrap();
    ic.rotate_resource_identities(&[x, y]).unwrap();
    ic.execute_command_list(&list).unwrap();
    ic.flush().unwrap();
    assert!(world.violations().is_empty(), "{:#?}", world.violations());
    drop((list, dc));
    drop(device);
    finish(&world, ic);
}

/// A view that a list holds (nested in another list here) is refreshed before the replay
/// uses it, once per rotation of its resource, as any view the immediate context uses.
#[test]
fn r_x5_views_a_nested_list_holds_are_refreshed_before_its_replay() {
    let (device, mut ic, world) = device();
    let (x, y) = (back_buffer(&device), back_buffer(&device));
    let view = rtv(&device, x);
    let mut dc = device.create_deferred_context().unwrap();
    dc.command(SoftCommand::ClearView { view, value: 3 })
        .unwrap();
    let inner = dc.finish().unwrap();
    dc.execute_command_list(&inner).unwrap();
    let outer = dc.finish().unwrap();
    ic.rotate_resource_identities(&[x, y]).unwrap();
    world.clear_trace();
    ic.execute_command_list(&outer).unwrap();
    let trace = world.trace();
    let refreshed = position(&trace, |e| e.hook == Hook::RefreshView);
    // The list's first step: its CommandListExecute, or, emulated, the clear-state before it.
    let cleared = position(&trace, |e| {
        e.hook == Hook::ExecuteCommandList || (e.hook == Hook::Execute && e.object == 0)
    });
    assert_eq!(count(&trace, Hook::RefreshView), 1, "{trace:#?}");
    assert!(
        refreshed < cleared,
        "refreshed before the replay: {trace:#?}"
    );
    world.clear_trace();
    ic.execute_command_list(&outer).unwrap();
    assert_eq!(
        count(&world.trace(), Hook::RefreshView),
        0,
        "once per rotation"
    );
    drop((inner, outer, dc));
    drop(device);
    finish(&world, ic);
}

#[test]
fn r_x5_a_list_recorded_before_a_rotation_renders_into_the_new_identity() {
    let (device, mut ic, world) = device();
    let (x, y) = (back_buffer(&device), back_buffer(&device));
    let mut dc = device.create_deferred_context().unwrap();
    dc.command(SoftCommand::Fill { dst: x, value: 7 }).unwrap();
    let list = dc.finish().unwrap();
    let ay = allocation(&device, y);
    ic.rotate_resource_identities(&[x, y]).unwrap();
    ic.execute_command_list(&list).unwrap();
    ic.flush().unwrap();
    assert_eq!(
        world.read(ay).unwrap(),
        vec![7; (W * H * 4) as usize],
        "x is now ay"
    );
    assert!(world.violations().is_empty(), "{:?}", world.violations());
    drop((list, dc, device));
    finish(&world, ic);
}

#[test]
fn r_x5_rotation_refuses_repeats_different_resources_and_mapped_ones() {
    let (device, mut ic, world) = device();
    let (x, y) = (back_buffer(&device), back_buffer(&device));
    let small = device
        .create_resource(texture_desc(
            BindFlags::PRESENT | BindFlags::RENDER_TARGET,
            DisplayFormat::R8G8B8A8Unorm,
            1,
        ))
        .unwrap();
    let (ax, ay) = (allocation(&device, x), allocation(&device, y));
    let refused = Err(app(AppError::NotRotatable));
    assert_eq!(ic.rotate_resource_identities(&[x, x]), refused);
    assert_eq!(ic.rotate_resource_identities(&[x, small]), refused);
    let mut dynamic = texture_desc(BindFlags::PRESENT, DisplayFormat::B8G8R8A8Unorm, 1);
    dynamic.usage = Usage::Dynamic;
    let (d0, d1) = (
        device.create_resource(dynamic).unwrap(),
        device.create_resource(dynamic).unwrap(),
    );
    ic.map_discard(d0).unwrap();
    assert_eq!(ic.rotate_resource_identities(&[d0, d1]), refused);
    ic.unmap(d0).unwrap();
    assert_eq!(ic.rotate_resource_identities(&[d0, d1]), Ok(()));
    assert_eq!((allocation(&device, x), allocation(&device, y)), (ax, ay));
    assert_eq!(
        ic.rotate_resource_identities(&[x]),
        Ok(()),
        "one rotates nothing"
    );
    assert_eq!(allocation(&device, x), ax);
    drop(device);
    finish(&world, ic);
}

fn blt_args(src: Handle<Resource>, dst: Handle<Resource>) -> BltArgs {
    BltArgs {
        dst,
        dst_subresource: 0,
        dst_rect: Rect::whole(W, H),
        src,
        src_subresource: 0,
        src_rect: None,
        flags: BltFlags::CONVERT,
        rotation: Rotation::Identity,
    }
}

/// One test per restriction of R-X7, each refused before the driver hears of it.
#[test]
fn r_x7_every_blt_restriction_is_an_application_error() {
    let (device, mut ic, world) = device();
    let present_rt = BindFlags::PRESENT | BindFlags::RENDER_TARGET;
    let src = back_buffer(&device);
    let dst = device
        .create_resource(texture_desc(
            BindFlags::RENDER_TARGET,
            DisplayFormat::R16G16B16A16Float,
            1,
        ))
        .unwrap();
    let buffer = device.create_resource(crate::common::buffer(64)).unwrap();
    let not_present = device
        .create_resource(texture_desc(
            BindFlags::RENDER_TARGET,
            DisplayFormat::B8G8R8A8Unorm,
            1,
        ))
        .unwrap();
    let not_rt = device
        .create_resource(texture_desc(
            BindFlags::PRESENT,
            DisplayFormat::B8G8R8A8Unorm,
            1,
        ))
        .unwrap();
    let other_format = {
        let mut desc = texture_desc(present_rt, DisplayFormat::B8G8R8A8Unorm, 1);
        if let Some(t) = desc.texture.as_mut() {
            t.format = 2; // R32G32B32A32_FLOAT: not a display format
        }
        desc.byte_size *= 4; // 16 bytes a texel
        device.create_resource(desc).unwrap()
    };
    let msaa = device
        .create_resource(texture_desc(present_rt, DisplayFormat::B8G8R8A8Unorm, 4))
        .unwrap();
    let cases: Vec<(BltArgs, AppError)> = vec![
        (blt_args(buffer, dst), AppError::NotDisplayFormat),
        (blt_args(other_format, dst), AppError::NotDisplayFormat),
        (blt_args(not_present, dst), AppError::BadBindFlags),
        (blt_args(src, not_rt), AppError::BadBindFlags),
        (
            BltArgs {
                src_subresource: 1,
                ..blt_args(src, dst)
            },
            AppError::OutOfRange,
        ),
        (
            BltArgs {
                dst_rect: Rect::whole(W + 1, H),
                ..blt_args(src, dst)
            },
            AppError::OutOfRange,
        ),
        (
            BltArgs {
                dst_rect: Rect {
                    left: 2,
                    top: 0,
                    right: 2,
                    bottom: 1,
                },
                ..blt_args(src, dst)
            },
            AppError::OutOfRange,
        ),
        (
            BltArgs {
                src_rect: Some(Rect::whole(W, H + 1)),
                ..blt_args(src, dst)
            },
            AppError::OutOfRange,
        ),
        (blt_args(msaa, dst), AppError::InvalidState),
        (
            BltArgs {
                flags: BltFlags::RESOLVE,
                ..blt_args(src, dst)
            },
            AppError::InvalidState,
        ),
        (
            BltArgs {
                flags: BltFlags::empty(),
                ..blt_args(src, dst)
            },
            AppError::InvalidState,
        ),
        (blt_args(src, src), AppError::InvalidState),
    ];
    world.clear_trace();
    for (args, error) in cases {
        assert_eq!(ic.blt(&args), Err(app(error)), "{args:?}");
    }
    assert_eq!(
        count(&world.trace(), Hook::Execute),
        0,
        "no Blt reached the driver"
    );
    let same = {
        let mut desc = texture_desc(present_rt, DisplayFormat::B8G8R8A8Unorm, 1);
        if let Some(t) = desc.texture.as_mut() {
            t.array_size = 2; // stereo
        }
        desc.byte_size *= 2;
        device.create_resource(desc).unwrap()
    };
    assert_eq!(
        ic.blt(&blt_args(same, same)),
        Err(app(AppError::InvalidState)),
        "never a subresource onto itself"
    );
    let other_eye = ic.blt(&BltArgs {
        dst_subresource: 1,
        ..blt_args(same, same)
    });
    assert_ne!(
        other_eye,
        Err(app(AppError::InvalidState)),
        "stereo: the other eye"
    );
    drop(device);
    finish(&world, ic);
}

/// A texture whose shape needs more bytes than its allocation has is refused at creation,
/// whatever its format (R-E1): exactly for a display format, at least its texels' bits for
/// any other DXGI format; a format number DXGI does not define is refused too. So nothing
/// that reads a texture through its allocation (a driver's copy, the kernel's present)
/// reads past it.
#[test]
fn r_x1_a_texture_bigger_than_its_memory_is_refused_at_creation() {
    let (device, ic, world) = device();
    let bind = BindFlags::PRESENT | BindFlags::RENDER_TARGET;
    let shape = |format: u32, byte_size: u64| {
        let mut desc = shaped(1000, 1000, bind, DisplayFormat::B8G8R8A8Unorm, 1);
        if let Some(t) = desc.texture.as_mut() {
            t.format = format;
        }
        ResourceDesc { byte_size, ..desc }
    };
    let refused = Err(app(AppError::OutOfRange));
    // The audit's case: a megapixel R32G32B32A32_FLOAT texture in one byte.
    assert_eq!(device.create_resource(shape(2, 1)).map(|_| ()), refused);
    assert_eq!(
        device.create_resource(shape(2, 16_000_000 - 1)).map(|_| ()),
        refused
    );
    assert!(device.create_resource(shape(2, 16_000_000)).is_ok());
    // BC1: half a byte a texel, in 4x4 blocks.
    assert_eq!(
        device.create_resource(shape(71, 499_999)).map(|_| ()),
        refused
    );
    assert!(device.create_resource(shape(71, 500_000)).is_ok());
    // A display format: exactly its layout.
    assert_eq!(
        device.create_resource(shape(87, 3_999_999)).map(|_| ()),
        refused
    );
    // `ResourceDesc::texture` computes the least a shape takes, which creation accepts.
    let bc1 = Texture2d {
        width: 1000,
        height: 1000,
        format: 71,
        ..Texture2d::default()
    };
    let desc = ResourceDesc::texture(bc1, bind).unwrap();
    assert_eq!(desc.byte_size, 500_000);
    assert!(device.create_resource(desc).is_ok());
    let unknown = Texture2d {
        format: 1000,
        ..bc1
    };
    assert_eq!(ResourceDesc::texture(unknown, bind), None);
    // No such DXGI format.
    assert_eq!(
        device.create_resource(shape(1000, u64::MAX)).map(|_| ()),
        refused
    );
    assert_eq!(
        device.create_resource(shape(0, u64::MAX)).map(|_| ()),
        refused
    );
    drop(device);
    finish(&world, ic);
}

/// Creation refuses a texture without pixels, past 64 bits, or in a format no D3D11 texture
/// has, whatever its allocation (R-E1): `OutOfRange`, the driver never asked. A zero array
/// size takes no bytes and 2^31 × 2^28 texels of 16 bytes in two slices 2^64, 0 once
/// wrapped: either would pass a size check alone.
#[test]
fn r_e1_a_texture_without_pixels_or_past_64_bits_is_refused_at_creation() {
    let (device, ic, world) = device();
    let refused = Err(app(AppError::OutOfRange));
    let create = |texture: Texture2d, byte_size: u64| {
        let desc = ResourceDesc {
            byte_size,
            texture: Some(texture),
            ..ResourceDesc::default()
        };
        device.create_resource(desc).map(|_| ())
    };
    let one = Texture2d::default();
    assert_eq!(create(one, 4), Ok(()));
    for zero in [
        Texture2d {
            array_size: 0,
            ..one
        },
        Texture2d {
            mip_levels: 0,
            ..one
        },
        Texture2d { samples: 0, ..one },
    ] {
        assert_eq!(create(zero, 4), refused, "{zero:?}");
        assert_eq!(create(zero, 0), refused, "{zero:?}");
        assert_eq!(ResourceDesc::texture(zero, BindFlags::empty()), None);
    }
    let wide = Texture2d {
        width: 1 << 31,
        height: 1 << 28,
        format: 2,
        ..one
    };
    let two = Texture2d {
        array_size: 2,
        ..wide
    };
    for byte_size in [0, 1, 4096] {
        assert_eq!(create(two, byte_size), refused, "{byte_size} bytes");
    }
    assert_eq!(create(wide, 4096), refused);
    // The sampler feedback formats, 189 and 190: D3D12 maps no D3D11 texture has.
    for format in [189, 190] {
        let feedback = Texture2d { format, ..one };
        assert_eq!(create(feedback, 1 << 20), refused, "{format}");
        assert_eq!(ResourceDesc::texture(feedback, BindFlags::empty()), None);
    }
    // V408 at height 1: three bytes a texel, not DirectXTex's one.
    let v408 = Texture2d {
        width: 8,
        format: 132,
        ..one
    };
    assert_eq!(create(v408, 23), refused);
    assert_eq!(create(v408, 24), Ok(()));
    let desc = ResourceDesc::texture(v408, BindFlags::empty()).unwrap();
    assert_eq!(desc.byte_size, 24);
    drop(device);
    finish(&world, ic);
}

/// R-D1: a driver may reference memory before it refuses an operation (the soft driver's
/// present marks its source in the open buffer, then finds the destination's format
/// unknown). The engine counts every operation it hands the driver in the open buffer,
/// refused or not: the buffer is submitted, and nothing the operation names is deallocated
/// before that buffer completed. Through each refusing path: a present, a command, a Blt.
#[test]
fn r_d1_an_operation_the_driver_refuses_counts_in_the_open_buffer() {
    // The present: without the count, device destruction deallocates the source while the
    // buffer that never got submitted still references it.
    let (device, mut ic, world) = device();
    let bb = back_buffer(&device);
    let unknown = {
        let mut desc = texture_desc(BindFlags::RENDER_TARGET, DisplayFormat::B8G8R8A8Unorm, 1);
        if let Some(t) = desc.texture.as_mut() {
            t.format = 2; // R32G32B32A32_FLOAT: no display format
        }
        desc.byte_size *= 4; // 16 bytes a texel
        device.create_resource(desc).unwrap()
    };
    let onto_unknown = PresentArgs {
        dst: Some((unknown, 0)),
        ..present_args(bb)
    };
    assert_eq!(
        ic.present(&onto_unknown),
        Err(app(AppError::NotDisplayFormat))
    );
    drop(device);
    finish(&world, ic);

    // A command and a Blt the driver refuses (an injected error): the buffer is submitted
    // and the objects wait for its fence.
    for refused in ["execute", "blt"] {
        let run = |plan: &Arc<FaultPlan>| {
            let soft = SoftConfig {
                gpu: Gpu::Manual,
                ..SoftConfig::from_env().unwrap()
            };
            let (driver, kernel, world) = inject::new(plan, soft);
            let (device, mut ic) = Device::new(driver, kernel, DeviceConfig::default()).unwrap();
            let bind = BindFlags::PRESENT | BindFlags::RENDER_TARGET;
            let desc = texture_desc(bind, DisplayFormat::B8G8R8A8Unorm, 1);
            let (src, dst) = (
                device.create_resource(desc).unwrap(),
                device.create_resource(desc).unwrap(),
            );
            let result = match refused {
                "execute" => ic.command(&SoftCommand::Fill { dst, value: 1 }),
                _ => ic.blt(&blt_args(src, dst)),
            };
            device.destroy(dst).unwrap();
            ic.flush().unwrap();
            let waiting = (world.submits(), ic.retire_stats().deallocated);
            world.complete_all();
            ic.flush().unwrap();
            let after = ic.retire_stats().deallocated;
            drop(device);
            ic.destroy_device().unwrap();
            world.assert_clean();
            (result, waiting, after)
        };
        let counting = Arc::new(FaultPlan::counting().with_log());
        let (ok, ..) = run(&counting);
        assert_eq!(ok, Ok(()));
        let call = counting.log().iter().rposition(|h| *h == refused).unwrap() as u64;
        let plan = Arc::new(FaultPlan::at(call, Fault::Error(Error::InvalidArg)));
        let (result, (submits, deallocated), after) = run(&plan);
        assert_eq!(result, Err(Error::InvalidArg), "{refused}");
        assert_eq!(
            submits, 1,
            "{refused}: the refused operation's buffer is submitted"
        );
        assert_eq!(
            deallocated, 0,
            "{refused}: the object waits for that buffer"
        );
        assert_eq!(after, 1, "{refused}: and goes once it completed");
    }
}

/// Flag bits that `DXGI_DDI_ARG_BLT_FLAGS` does not define never reach the driver: the
/// engine refuses them as `InvalidArg` (R-E1), as `BltFlags::from_raw` does, whoever built
/// the value, and nothing is written.
#[test]
fn r_x7_unknown_blt_flag_bits_are_refused_before_the_driver() {
    let (device, mut ic, world) = device();
    let (src, dst) = (back_buffer(&device), back_buffer(&device));
    ic.command(&SoftCommand::Fill { dst: src, value: 7 })
        .unwrap();
    let before = world.read(allocation(&device, dst)).unwrap();
    let args = BltArgs {
        flags: BltFlags::from_bits_retain(BltFlags::STRETCH.bits() | 0x100),
        ..blt_args(src, dst)
    };
    assert_eq!(ic.blt(&args), Err(Error::InvalidArg));
    assert_eq!(BltFlags::from_raw(args.flags.bits()), None);
    ic.flush().unwrap();
    assert_eq!(
        world.read(allocation(&device, dst)).unwrap(),
        before,
        "nothing reached the driver's Blt"
    );
    assert_eq!(
        ic.blt(&blt_args(src, dst)),
        Ok(()),
        "the same Blt without the bit"
    );
    ic.flush().unwrap();
    assert_ne!(world.read(allocation(&device, dst)).unwrap(), before);
    drop(device);
    finish(&world, ic);
}

/// Rotation is asked only of a driver that can refuse primaries it cannot scan out (R-X6):
/// the null driver's Blt caps are empty.
#[test]
fn r_x6_rotation_needs_the_drivers_rotation_cap() {
    let (device, mut ic) = cmdlist::soft::null::null_device(DeviceConfig::default()).unwrap();
    let bind = BindFlags::PRESENT | BindFlags::RENDER_TARGET;
    let desc = texture_desc(bind, DisplayFormat::B8G8R8A8Unorm, 1);
    let (src, dst) = (
        device.create_resource(desc).unwrap(),
        device.create_resource(desc).unwrap(),
    );
    let args = BltArgs {
        dst_rect: Rect::whole(H, W),
        flags: BltFlags::empty(),
        rotation: Rotation::Rotate90,
        ..blt_args(src, dst)
    };
    let mut square = args;
    square.dst_rect = Rect::whole(W, H);
    assert_eq!(ic.blt(&square), Err(app(AppError::InvalidState)));
    assert_eq!(
        ic.blt(&BltArgs {
            rotation: Rotation::Identity,
            flags: BltFlags::CONVERT,
            ..square
        }),
        Err(Error::Unsupported),
        "the null driver has no Blt: an error value, never a silent success"
    );
    ic.destroy_device().unwrap();
}

/// The soft driver's Blt is the reference Blt on kernel memory: a conversion and a 2x
/// stretch write exactly what the reference computes from the same source bytes, and both
/// resources go into the open buffer's allocation list (the soft kernel checks it).
#[test]
fn r_x6_blt_writes_what_the_reference_computes() {
    let (device, mut ic, world) = device();
    let present_rt = BindFlags::PRESENT | BindFlags::RENDER_TARGET;
    let src = texture(&device, present_rt, DisplayFormat::R8G8B8A8UnormSrgb, W, H);
    let dst = texture(
        &device,
        BindFlags::RENDER_TARGET,
        DisplayFormat::R16G16B16A16Float,
        2 * W,
        2 * H,
    );
    let pattern: Vec<u8> = (0..W * H * 4).map(|i| (i * 37 % 251) as u8).collect();
    // A refused operation first: the Blt's hook is told the buffer it runs in, which is
    // the one its submit carries (the soft kernel checks it).
    let refused = SoftCommand::CopyRegion {
        dst: src,
        dst_offset: 1 << 40,
        src,
        src_offset: 0,
        len: 1,
    };
    ic.update(src, 0, &pattern).unwrap();
    ic.flush().unwrap();
    assert!(ic.command(&refused).is_err());
    ic.flush().unwrap(); // nothing to submit: the next buffer gets the next number
    let args = BltArgs {
        dst_rect: Rect::whole(2 * W, 2 * H),
        flags: BltFlags::CONVERT | BltFlags::STRETCH,
        ..blt_args(src, dst)
    };
    ic.blt(&args).unwrap();
    ic.flush().unwrap();
    let mut expected = vec![0; (4 * W * H * 8) as usize];
    let pixels = cmdlist::dxgi::reference::Pixels {
        width: W,
        height: H,
        samples: 1,
        format: DisplayFormat::R8G8B8A8UnormSrgb,
        bytes: &pattern,
    };
    let target = cmdlist::dxgi::reference::PixelsMut {
        width: 2 * W,
        height: 2 * H,
        format: DisplayFormat::R16G16B16A16Float,
        bytes: &mut expected,
    };
    cmdlist::dxgi::reference::blt(
        pixels,
        Rect::whole(W, H),
        target,
        Rect::whole(2 * W, 2 * H),
        Rotation::Identity,
    )
    .unwrap();
    assert_eq!(world.read(allocation(&device, dst)).unwrap(), expected);
    assert!(world.violations().is_empty(), "{:?}", world.violations());
    drop(device);
    finish(&world, ic);
}

/// R-X1: an `_SRGB` source presented to a non-sRGB destination arrives with its bytes
/// unchanged (no conversion to linear), and the destination's allocation reaches the
/// callback.
#[test]
fn r_x1_srgb_source_presented_to_a_non_srgb_destination_is_copied_unchanged() {
    let (device, mut ic, world) = device();
    let present_rt = BindFlags::PRESENT | BindFlags::RENDER_TARGET;
    let src = texture(&device, present_rt, DisplayFormat::R8G8B8A8UnormSrgb, W, H);
    let dst = texture(&device, present_rt, DisplayFormat::R8G8B8A8Unorm, W, H);
    let pattern: Vec<u8> = (0..W * H * 4).map(|i| (i * 53 % 256) as u8).collect();
    ic.update(src, 0, &pattern).unwrap();
    let args = PresentArgs {
        dst: Some((dst, 0)),
        ..present_args(src)
    };
    ic.present(&args).unwrap();
    assert_eq!(world.read(allocation(&device, dst)).unwrap(), pattern);
    assert_eq!(world.presents()[0].dst, Some(allocation(&device, dst)));
    assert!(world.violations().is_empty(), "{:?}", world.violations());
    drop(device);
    finish(&world, ic);
}
