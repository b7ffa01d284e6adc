//! Steady state allocates nothing (R-R1, R-M2): a warm deferred context recording one copy, Finish,
//! CommandListExecute, dropping the list and Flush, 10,000 times; and object churn (create,
//! destroy, flush) allocates nothing per object; with a counting global allocator.
//!
//! Its own test binary, because the allocator counts the whole process, and without the test
//! harness (`harness = false` in Cargo.toml): the harness's main thread waits for the test on
//! a channel, and the first time it blocks there it allocates its waiting context, which the
//! counter would blame on the engine whenever that falls inside the counted loop.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use cmdlist::dxgi::{
    BltArgs, BltFlags, DisplayFormat, DxgiContext, PresentArgs, PresentFlags, Rect, Rotation,
};
use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig};
use cmdlist::{
    BindClass, BindFlags, BindPoint, DeviceConfig, HandleType, ObjectDesc, ResourceDesc, Texture2d,
    Usage, ViewDesc,
};

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
static FREES: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to `System` unchanged; only counts calls while enabled
// (allocations and reallocations in `ALLOCATIONS`, frees in `FREES`).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.load(Ordering::Relaxed) {
            FREES.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract for `dealloc` is passed on unchanged.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: the caller's contract for `realloc` is passed on unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn main() {
    r_m4_an_owned_mapping_frees_its_bytes_once();
    println!("r_m4_an_owned_mapping_frees_its_bytes_once: ok");
    r_r1_warm_one_copy_cycle_and_object_churn_allocate_nothing_per_use();
    println!("r_r1_warm_one_copy_cycle_and_object_churn_allocate_nothing_per_use: ok");
    r_x5_a_warm_frame_of_the_main_jobs_shape_allocates_nothing();
    println!("r_x5_a_warm_frame_of_the_main_jobs_shape_allocates_nothing: ok");
    r_m5_warm_renaming_discards_and_ring_appends_on_the_immediate_context_allocate_nothing();
    println!(
        "r_m5_warm_renaming_discards_and_ring_appends_on_the_immediate_context_allocate_nothing: ok"
    );
}

/// A warm frame on the immediate context of the null device (whose kernel keeps each
/// allocation's memory from its first lock): constant-buffer draws through Map(DISCARD),
/// each a rename (R-M5), and a ring started by a renaming discard and appended to with
/// Map(NO_OVERWRITE) (R-M3), then a flush, after which the GPU is done and the pool's
/// allocations come back. Nothing is allocated: not the pool's queue, not the kernel's
/// memory, not the open buffer's allocation list.
fn r_m5_warm_renaming_discards_and_ring_appends_on_the_immediate_context_allocate_nothing() {
    use cmdlist::soft::null::{null_device, CopyCommand};
    let (device, mut ic) = null_device(DeviceConfig::default()).unwrap();
    let dynamic = |bytes: u64, bind: BindFlags| ResourceDesc {
        byte_size: bytes,
        bind,
        usage: Usage::Dynamic,
        ..Default::default()
    };
    let constants = device
        .create_resource(dynamic(64, BindFlags::CONSTANT_BUFFER))
        .unwrap();
    let ring = device
        .create_resource(dynamic(4096, BindFlags::VERTEX_BUFFER))
        .unwrap();
    let copy = CopyCommand {
        dst: device.create_resource(ResourceDesc::default()).unwrap(),
        src: constants,
    };
    let mut value = 0u8;
    let frame = || {
        value = value.wrapping_add(1);
        for _ in 0..16 {
            ic.map_discard(constants).unwrap().fill(value);
            ic.unmap(constants).unwrap();
            ic.command(&copy).unwrap();
        }
        ic.map_discard(ring).unwrap()[..64].fill(value);
        ic.unmap(ring).unwrap();
        for stretch in 1..64 {
            let at = 64 * stretch;
            ic.map_no_overwrite(ring).unwrap()[at..at + 64].fill(value);
            ic.unmap(ring).unwrap();
            ic.command(&copy).unwrap();
        }
        ic.flush().unwrap();
    };
    let allocations = allocations_of(1_000, frame);
    assert_eq!(
        allocations, 0,
        "1,000 warm frames allocated {allocations} times"
    );
    ic.destroy_device().unwrap();
    assert_eq!(device.kernel().errors(), 0);
}

/// A mapping that owns its bytes (a kernel that copies at the lock) frees them when it is
/// dropped; handed back with `into_owned`, they are freed once, by their new owner (R-M4).
fn r_m4_an_owned_mapping_frees_its_bytes_once() {
    use cmdlist::CpuMapping;
    let frees = |work: &mut dyn FnMut()| {
        FREES.store(0, Ordering::Relaxed);
        COUNTING.store(true, Ordering::Relaxed);
        work();
        COUNTING.store(false, Ordering::Relaxed);
        FREES.load(Ordering::Relaxed)
    };
    let mut mapping = Some(CpuMapping::owned(vec![1; 64].into_boxed_slice()));
    assert_eq!(frees(&mut || drop(mapping.take())), 1, "dropped");
    let mut mapping = Some(CpuMapping::owned(vec![2; 64].into_boxed_slice()));
    let mut bytes = None;
    assert_eq!(
        frees(&mut || bytes = mapping.take().and_then(CpuMapping::into_owned)),
        0,
        "handed back"
    );
    assert_eq!(bytes.as_deref(), Some(&[2; 64][..]));
    assert_eq!(frees(&mut || drop(bytes.take())), 1, "freed by their owner");
}

/// Counts the allocations of `frames` runs of `frame`, after as many warm-up runs.
fn allocations_of(frames: usize, mut frame: impl FnMut()) -> usize {
    for _ in 0..frames {
        frame();
    }
    ALLOCATIONS.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    for _ in 0..frames {
        frame();
    }
    COUNTING.store(false, Ordering::Relaxed);
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// A steady frame of the main job's shape allocates nothing: two deferred contexts record
/// (a Map(DISCARD), an update, a fill, a copy, binds) and finish, the second executing the
/// first one's list with its bindings restored; the immediate context, a back buffer's
/// render-target view bound, executes the first list with its bindings restored and the
/// second (nesting the first) and drops them, Blts a canvas into the current back buffer with
/// a conversion and a stretch, presents it, rotates the two back buffers' identities with
/// the view still bound (R-X5) and flushes.
fn r_x5_a_warm_frame_of_the_main_jobs_shape_allocates_nothing() {
    let config = SoftConfig {
        trace: false,
        gpu: Gpu::Immediate,
        ..SoftConfig::from_env().unwrap()
    };
    let (device, mut ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
    let texture = |w: u32, h: u32, format: DisplayFormat, bind: BindFlags| {
        let texture = Texture2d {
            width: w,
            height: h,
            array_size: 1,
            mip_levels: 1,
            samples: 1,
            format: format.to_dxgi(),
        };
        device
            .create_resource(ResourceDesc {
                byte_size: texture.byte_size().unwrap(),
                bind,
                texture: Some(texture),
                ..Default::default()
            })
            .unwrap()
    };
    let present_rt = BindFlags::PRESENT | BindFlags::RENDER_TARGET;
    let canvas = texture(8, 4, DisplayFormat::R8G8B8A8UnormSrgb, present_rt);
    let back = [(); 2].map(|()| texture(16, 8, DisplayFormat::B8G8R8A8Unorm, present_rt));
    let staging = device
        .create_resource(ResourceDesc {
            byte_size: 128,
            ..Default::default()
        })
        .unwrap();
    let constants = device
        .create_resource(ResourceDesc {
            byte_size: 64,
            usage: Usage::Dynamic,
            ..Default::default()
        })
        .unwrap();
    // Streamed through as a ring: one Map(DISCARD) per list, then Map(NO_OVERWRITE) appends
    // (R-M2).
    let ring = device
        .create_resource(ResourceDesc {
            byte_size: 256,
            bind: BindFlags::VERTEX_BUFFER,
            usage: Usage::Dynamic,
            ..Default::default()
        })
        .unwrap();
    let mut dcs = [(); 2].map(|()| device.create_deferred_context().unwrap());
    let rt0 = BindPoint::new(BindClass::RenderTarget, 0);
    let back_rtv = device
        .create_view(
            HandleType::RenderTargetView,
            ViewDesc {
                resource: back[0],
                first_byte: 0,
                byte_len: 16 * 8 * 4,
            },
        )
        .unwrap();
    let mut value = 0u8;
    let frame = || {
        value = value.wrapping_add(1);
        let record = |dc: &mut soft::SoftDeferredContext,
                      nested: Option<&soft::SoftCommandList>| {
            dc.map_discard(constants).unwrap().fill(value);
            dc.unmap(constants).unwrap();
            dc.map_discard(ring).unwrap()[..64].fill(value);
            dc.unmap(ring).unwrap();
            for stretch in 1..4 {
                let at = 64 * stretch;
                dc.map_no_overwrite(ring).unwrap()[at..at + 64].fill(value);
                dc.unmap(ring).unwrap();
            }
            dc.update(staging, 0, &[value; 16]).unwrap();
            dc.bind(rt0, Some(canvas.any())).unwrap();
            // The second context executes the first one's list, its bindings restored
            // after it: a nested list, and a restoring execute on a deferred context.
            if let Some(inner) = nested {
                dc.execute_command_list_restoring(inner).unwrap();
            }
            dc.command(SoftCommand::Fill { dst: canvas, value })
                .unwrap();
            dc.command(SoftCommand::CopyRegion {
                dst: staging,
                dst_offset: 64,
                src: constants,
                src_offset: 0,
                len: 64,
            })
            .unwrap();
            dc.finish().unwrap()
        };
        let [first_dc, second_dc] = &mut dcs;
        let first = record(first_dc, None);
        let second = record(second_dc, Some(&first));
        // The back buffer's render-target view stays bound across the restoring execute,
        // the Blt, the present and the rotation (whose rebinding it exercises).
        ic.bind(rt0, Some(back_rtv.any())).unwrap();
        ic.execute_command_list_restoring(&first).unwrap();
        ic.execute_command_list(&second).unwrap();
        ic.bind(rt0, Some(back_rtv.any())).unwrap();
        // The outer list goes last: its end ends the nested one.
        drop((first, second));
        ic.blt(&BltArgs {
            dst: back[0],
            dst_subresource: 0,
            dst_rect: Rect::whole(16, 8),
            src: canvas,
            src_subresource: 0,
            src_rect: None,
            flags: BltFlags::CONVERT | BltFlags::STRETCH,
            rotation: Rotation::Identity,
        })
        .unwrap();
        ic.present(&PresentArgs {
            src: back[0],
            src_subresource: 0,
            dst: None,
            dxgi_context: DxgiContext(1),
            flags: PresentFlags::FLIP,
            flip_interval: 1,
        })
        .unwrap();
        ic.rotate_resource_identities(&back).unwrap();
        ic.flush().unwrap();
    };
    let allocations = allocations_of(1_000, frame);
    assert_eq!(
        allocations, 0,
        "1,000 warm frames allocated {allocations} times"
    );
    drop(dcs);
    ic.clear_state().unwrap();
    device.destroy(back_rtv).unwrap();
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// Runs on the process's only thread, so nothing else allocates while counting.
fn r_r1_warm_one_copy_cycle_and_object_churn_allocate_nothing_per_use() {
    let config = SoftConfig {
        trace: false,
        gpu: Gpu::Immediate,
        ..SoftConfig::from_env().unwrap()
    };
    let (device, mut ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
    let desc = ResourceDesc {
        byte_size: 256,
        ..Default::default()
    };
    let src = device.create_resource(desc).unwrap();
    let dst = device.create_resource(desc).unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    let mut cycle = |ic: &mut soft::SoftImmediate| {
        dc.command(SoftCommand::Copy { dst, src }).unwrap();
        let list = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
        drop(list);
        ic.flush().unwrap();
    };
    for _ in 0..1_000 {
        cycle(&mut ic);
    }
    ALLOCATIONS.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    for _ in 0..10_000 {
        cycle(&mut ic);
    }
    COUNTING.store(false, Ordering::Relaxed);
    let allocations = ALLOCATIONS.load(Ordering::Relaxed);
    assert_eq!(
        allocations, 0,
        "10,000 warm cycles allocated {allocations} times"
    );
    let stats = dc.stats();
    assert!(
        stats.recycled >= 10_000,
        "every list came from recycled memory: {stats:?}"
    );

    // Object churn: create, destroy, flush. A slot keeps its entry's memory for its next
    // life, so no object allocates; what is left is crossbeam-epoch's: one bag of deferred
    // closures sealed per 64 flushes that destroyed something (each such flush defers one
    // closure for all its objects).
    let blend = [7u8; 16];
    let state = ObjectDesc::State {
        ty: HandleType::BlendState,
        desc: &blend,
    };
    let mut handles = Vec::with_capacity(8);
    let mut churn = |ic: &mut soft::SoftImmediate| {
        handles.extend((0..8).map(|_| device.create(&state).unwrap()));
        for h in handles.drain(..) {
            device.destroy(h).unwrap();
        }
        ic.flush().unwrap();
    };
    for _ in 0..1_000 {
        churn(&mut ic);
    }
    const FLUSHES: usize = 10_000;
    ALLOCATIONS.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
    for _ in 0..FLUSHES {
        churn(&mut ic);
    }
    COUNTING.store(false, Ordering::Relaxed);
    let allocations = ALLOCATIONS.load(Ordering::Relaxed);
    // About one in 64 flushes (a bag), and now and then the queue of sealed passes grows.
    assert!(
        allocations * 48 <= FLUSHES,
        "{} objects churned over {FLUSHES} flushes allocated {allocations} times",
        8 * FLUSHES
    );
    assert!(ic.retire_stats().destroyed >= 8 * FLUSHES as u64);
    drop(dc);
    ic.destroy_device().unwrap();
    world.assert_clean();
}
