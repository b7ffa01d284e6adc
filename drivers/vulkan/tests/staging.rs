//! CPU access to the Vulkan kernel's memory (R-M3, R-M4): staging Maps (READ, WRITE,
//! READ_WRITE) and the immediate context's Map(NO_OVERWRITE), served by `VulkanKernel::lock`
//! and `unlock` in the allocation's own host-coherent memory, beside GPU copies recorded on
//! the immediate context and in command lists of every list mode; the validation layer stays
//! silent. The GPU is held ([`VulkanWorld::hold_gpu`]) where a buffer must still be running.
//!
//! Without a Vulkan device each test prints why it was skipped, unless
//! `CMDLIST_VULKAN_REQUIRED=1`, where it fails.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cmdlist::handle::Resource;
use cmdlist::soft::SoftCommand;
use cmdlist::{
    AppError, BindFlags, CommandList, ContextId, DeviceConfig, Error, Handle, ListMode, MapFlags,
    MapType, ResourceDesc, Usage,
};
use cmdlist_vulkan::{
    VulkanConfig, VulkanDevice, VulkanDriver, VulkanImmediateContext, VulkanKernel, VulkanWorld,
};

mod turn;

// ---------------------------------------------------------------------------------------
// Set-up (as in tests/vulkan.rs)
// ---------------------------------------------------------------------------------------

/// A Vulkan device in `mode`, or `None` (printed) where none exists and none is required.
fn vulkan(mode: ListMode) -> Option<(VulkanDevice, VulkanImmediateContext, Arc<VulkanWorld>)> {
    match cmdlist_vulkan::device(VulkanConfig::for_mode(mode), DeviceConfig::default()) {
        Ok((device, ic, world)) => {
            if required() {
                assert!(
                    world.validation_enabled(),
                    "CMDLIST_VULKAN_REQUIRED=1 but VK_LAYER_KHRONOS_validation is not \
                     installed (apt-get install vulkan-validationlayers)"
                );
            }
            assert_eq!(ic.device().list_mode(), mode);
            Some((device, ic, world))
        }
        Err(e) if required() => panic!("CMDLIST_VULKAN_REQUIRED=1: {e}"),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

fn required() -> bool {
    std::env::var("CMDLIST_VULKAN_REQUIRED").is_ok_and(|v| v == "1")
}

/// After device destruction: no violation, no validation message, no allocation left; then
/// the world, the last reference to it, dropped without leaving an object behind.
fn assert_clean(world: Arc<VulkanWorld>, mode: ListMode) {
    assert_clean_but(world, mode, &[]);
}

/// [`assert_clean`], with `expected` the errors reported besides WasStillDrawing.
fn assert_clean_but(world: Arc<VulkanWorld>, mode: ListMode, expected: &[(ContextId, Error)]) {
    assert_eq!(world.violations(), vec![], "{mode:?}: violations");
    assert_eq!(
        world.validation_messages(),
        Vec::<String>::new(),
        "{mode:?}: validation layer"
    );
    // A Map refused with WasStillDrawing is reported too (R-E2), as D3D11's runtime hears it.
    let errors: Vec<_> = world
        .errors()
        .into_iter()
        .filter(|(_, e)| *e != Error::WasStillDrawing)
        .collect();
    assert_eq!(errors, expected, "{mode:?}: errors reported (R-E2)");
    assert_eq!(world.live_allocations(), 0, "{mode:?}: allocations left");
    assert_eq!(world.zombie_allocations(), 0, "{mode:?}: memory left");
    // What the layer reports as the device and the instance are destroyed: the objects the
    // driver never destroyed.
    let log = world.validation_log();
    let world = Arc::into_inner(world).expect("the world outlived its device's last user");
    drop(world);
    assert_eq!(
        log.messages(),
        Vec::<String>::new(),
        "{mode:?}: validation layer as the world dropped"
    );
}

fn buffer(bytes: u64) -> ResourceDesc {
    ResourceDesc {
        byte_size: bytes,
        ..Default::default()
    }
}

fn staging(bytes: u64) -> ResourceDesc {
    ResourceDesc {
        usage: Usage::Staging,
        ..buffer(bytes)
    }
}

fn dynamic_vertex_buffer(bytes: u64) -> ResourceDesc {
    ResourceDesc {
        usage: Usage::Dynamic,
        bind: BindFlags::VERTEX_BUFFER,
        ..buffer(bytes)
    }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

type List = CommandList<VulkanDriver, VulkanKernel>;

/// Records `commands` on a deferred context of its own thread.
fn list_of(device: &VulkanDevice, commands: Vec<SoftCommand>) -> List {
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut dc = device.create_deferred_context().unwrap();
            for c in commands {
                dc.command(c).unwrap();
            }
            dc.finish().unwrap()
        })
        .join()
        .unwrap()
    })
}

/// Where a test's GPU copies are recorded: on the immediate context, or in a command list a
/// deferred context recorded, executed on it (the list's allocations are the buffer's).
#[derive(Clone, Copy, Debug)]
enum Via {
    Immediate,
    List,
}

const VIAS: [Via; 2] = [Via::Immediate, Via::List];

/// Copies `src` into `dst` (whole) in the immediate context's open buffer, `via`.
fn copy(
    device: &VulkanDevice,
    ic: &mut VulkanImmediateContext,
    via: Via,
    dst: Handle<Resource>,
    src: Handle<Resource>,
) {
    match via {
        Via::Immediate => ic.command(&SoftCommand::Copy { dst, src }).unwrap(),
        Via::List => {
            let list = list_of(device, vec![SoftCommand::Copy { dst, src }]);
            ic.execute_command_list(&list).unwrap();
        }
    }
}

/// A Map(READ) of `readback` (waiting as the Map waits): its bytes.
fn read_back(ic: &mut VulkanImmediateContext, readback: Handle<Resource>) -> Vec<u8> {
    let bytes = ic
        .map(readback, MapType::Read, MapFlags::empty())
        .unwrap()
        .to_vec();
    ic.unmap(readback).unwrap();
    bytes
}

// ---------------------------------------------------------------------------------------
// (1) A readback waits for the buffer that uses it, not for the GPU
// ---------------------------------------------------------------------------------------

/// The GPU copies into a staging resource; Map(READ) flushes the open buffer that does so,
/// waits for it and maps the copied bytes. A copy already submitted is waited for while a
/// later buffer that does not use the resource stays held on the GPU: the Map returns with
/// that buffer still pending (a wait for the whole GPU would time out into DeviceRemoved).
#[test]
fn a_staging_read_waits_only_for_the_buffer_that_uses_it() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode) else {
            return;
        };
        let src = device.create_resource(buffer(4096)).unwrap();
        let other = device.create_resource(buffer(64)).unwrap();
        let readback = device.create_resource(staging(4096)).unwrap();
        for (round, via) in VIAS.into_iter().enumerate() {
            let seed = 10 * round as u8;
            // The copy in the open buffer: the Map flushes it, then waits for it.
            ic.update(src, 0, &pattern(4096, seed + 1)).unwrap();
            copy(&device, &mut ic, via, readback, src);
            assert!(ic.resource_is_busy(readback).unwrap(), "{mode:?} {via:?}");
            let before = world.last_submitted();
            assert_eq!(
                read_back(&mut ic, readback),
                pattern(4096, seed + 1),
                "{mode:?} {via:?}: the copied bytes"
            );
            assert_eq!(world.last_submitted(), before + 1, "{mode:?}: flushed");
            assert!(world.completed() > before, "{mode:?}: waited for it");
            assert!(!ic.resource_is_busy(readback).unwrap());

            // The copy submitted, then a later buffer held on the GPU.
            ic.update(src, 0, &pattern(4096, seed + 2)).unwrap();
            copy(&device, &mut ic, via, readback, src);
            ic.flush().unwrap();
            world.hold_gpu();
            ic.update(other, 0, &[seed; 64]).unwrap();
            ic.flush().unwrap();
            let held = world.last_submitted();
            let started = Instant::now();
            assert_eq!(
                read_back(&mut ic, readback),
                pattern(4096, seed + 2),
                "{mode:?} {via:?}: the copied bytes, a later buffer held"
            );
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "{mode:?}: waited for the held buffer"
            );
            assert!(world.completed() < held, "{mode:?}: the held buffer ran");
            // A Map that reads the held buffer's resource would wait for it; READ_WRITE of
            // the staging resource does not.
            let bytes = ic
                .map(readback, MapType::ReadWrite, MapFlags::DO_NOT_WAIT)
                .unwrap();
            assert_eq!(bytes, pattern(4096, seed + 2));
            ic.unmap(readback).unwrap();
            world.release_gpu();
            world.wait_gpu().unwrap();
        }
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world, mode);
    }
}

// ---------------------------------------------------------------------------------------
// (2) DO_NOT_WAIT
// ---------------------------------------------------------------------------------------

/// While the buffer that copies into a staging resource is held on the GPU, Map(READ,
/// DO_NOT_WAIT) answers `WasStillDrawing` (flushing the open buffer once, mapping nothing)
/// and `resource_is_busy` says so; once released, polling maps the copied bytes.
#[test]
fn do_not_wait_answers_was_still_drawing_while_the_copy_is_held() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode) else {
            return;
        };
        let src = device.create_resource(buffer(256)).unwrap();
        let readback = device.create_resource(staging(256)).unwrap();
        for (round, via) in VIAS.into_iter().enumerate() {
            let want = pattern(256, 40 + round as u8);
            world.hold_gpu();
            ic.update(src, 0, &want).unwrap();
            copy(&device, &mut ic, via, readback, src);
            let before = world.last_submitted();
            for ty in [
                MapType::Read,
                MapType::ReadWrite,
                MapType::Write,
                MapType::Read,
            ] {
                assert_eq!(
                    ic.map(readback, ty, MapFlags::DO_NOT_WAIT).map(drop),
                    Err(Error::WasStillDrawing),
                    "{mode:?} {via:?} {ty:?}"
                );
            }
            assert_eq!(world.last_submitted(), before + 1, "{mode:?}: flushed once");
            assert!(ic.resource_is_busy(readback).unwrap(), "{mode:?}");
            assert!(world.completed() <= before, "{mode:?}: the copy ran held");
            world.release_gpu();
            let bytes = poll_read(&mut ic, readback, mode);
            assert_eq!(bytes, want, "{mode:?} {via:?}: the copied bytes");
            assert!(!ic.resource_is_busy(readback).unwrap());
        }
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world, mode);
    }
}

/// Map(READ, DO_NOT_WAIT) until it maps (at most a minute): the bytes.
fn poll_read(
    ic: &mut VulkanImmediateContext,
    readback: Handle<Resource>,
    mode: ListMode,
) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match ic.map(readback, MapType::Read, MapFlags::DO_NOT_WAIT) {
            Ok(bytes) => {
                let bytes = bytes.to_vec();
                ic.unmap(readback).unwrap();
                return bytes;
            }
            Err(Error::WasStillDrawing) => {
                assert!(Instant::now() < deadline, "{mode:?}: never mapped");
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(e) => panic!("{mode:?}: {e}"),
        }
    }
}

/// Unheld, a copy of 4 MiB on the device as it runs: each poll either answers
/// `WasStillDrawing` or maps the bytes of the newest copy, never the previous round's (the
/// copy may finish before the first poll: then no `WasStillDrawing` is seen, and that is
/// no failure).
#[test]
fn do_not_wait_never_maps_stale_bytes() {
    let _turn = turn::take();
    const LEN: usize = 4 << 20;
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode) else {
            return;
        };
        let src = device.create_resource(buffer(LEN as u64)).unwrap();
        let readback = device.create_resource(staging(LEN as u64)).unwrap();
        let mut still_drawing = 0;
        for round in 0..6u8 {
            let via = VIAS[usize::from(round) % 2];
            let want = pattern(LEN, round);
            ic.update(src, 0, &want).unwrap();
            copy(&device, &mut ic, via, readback, src);
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                match ic.map(readback, MapType::Read, MapFlags::DO_NOT_WAIT) {
                    Ok(bytes) => {
                        assert!(bytes == want, "{mode:?} {via:?} round {round}: stale bytes");
                        ic.unmap(readback).unwrap();
                        break;
                    }
                    Err(Error::WasStillDrawing) => {
                        still_drawing += 1;
                        assert!(Instant::now() < deadline, "{mode:?}: never mapped");
                        std::thread::sleep(Duration::from_micros(50));
                    }
                    Err(e) => panic!("{mode:?}: {e}"),
                }
            }
        }
        eprintln!("{mode:?}: WasStillDrawing {still_drawing} times over 6 copies");
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world, mode);
    }
}

// ---------------------------------------------------------------------------------------
// (3) An upload through a staging resource
// ---------------------------------------------------------------------------------------

/// Map(WRITE) of a staging resource, then a GPU copy out of it: the copy carries the bytes
/// written; READ_WRITE finds them and its changes are copied too. A Map(WRITE) while a held
/// buffer still copies out of the resource answers `WasStillDrawing` under DO_NOT_WAIT, and
/// without it waits: the held copy carries the bytes before the new ones.
#[test]
fn staging_writes_are_what_the_gpu_copies_out() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode) else {
            return;
        };
        let upload = device.create_resource(staging(1000)).unwrap();
        let dst = device.create_resource(buffer(1000)).unwrap();
        let dst2 = device.create_resource(buffer(1000)).unwrap();
        let readback = device.create_resource(staging(1000)).unwrap();
        for (round, via) in VIAS.into_iter().enumerate() {
            let first = pattern(1000, 70 + round as u8);
            ic.map(upload, MapType::Write, MapFlags::empty())
                .unwrap()
                .copy_from_slice(&first);
            ic.unmap(upload).unwrap();
            copy(&device, &mut ic, via, dst, upload);
            copy(&device, &mut ic, via, readback, dst);
            assert_eq!(
                read_back(&mut ic, readback),
                first,
                "{mode:?} {via:?}: WRITE"
            );

            let bytes = ic
                .map(upload, MapType::ReadWrite, MapFlags::empty())
                .unwrap();
            assert_eq!(bytes, first, "{mode:?} {via:?}: READ_WRITE reads");
            bytes[..10].fill(0xEE);
            ic.unmap(upload).unwrap();
            let mut changed = first.clone();
            changed[..10].fill(0xEE);
            copy(&device, &mut ic, via, dst, upload);
            copy(&device, &mut ic, via, readback, dst);
            assert_eq!(read_back(&mut ic, readback), changed, "{mode:?} {via:?}");

            // The GPU still reads it: a write waits for that copy.
            world.hold_gpu();
            copy(&device, &mut ic, via, dst2, upload);
            ic.flush().unwrap();
            assert_eq!(
                ic.map(upload, MapType::Write, MapFlags::DO_NOT_WAIT)
                    .map(drop),
                Err(Error::WasStillDrawing),
                "{mode:?} {via:?}: a write under a pending copy"
            );
            world.release_gpu();
            let second = pattern(1000, 90 + round as u8);
            ic.map(upload, MapType::Write, MapFlags::empty())
                .unwrap()
                .copy_from_slice(&second);
            ic.unmap(upload).unwrap();
            copy(&device, &mut ic, via, readback, dst2);
            assert_eq!(
                read_back(&mut ic, readback),
                changed,
                "{mode:?} {via:?}: the held copy read the bytes before the write"
            );
            copy(&device, &mut ic, via, dst2, upload);
            copy(&device, &mut ic, via, readback, dst2);
            assert_eq!(read_back(&mut ic, readback), second, "{mode:?} {via:?}");
        }
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world, mode);
    }
}

// ---------------------------------------------------------------------------------------
// (4) Map(NO_OVERWRITE) on the immediate context
// ---------------------------------------------------------------------------------------

/// Map(NO_OVERWRITE) of a dynamic vertex buffer on the immediate context: the buffer's own
/// memory with its contents (a Map(DISCARD)'s bytes, once the buffer that copies them in
/// completed), appended to in place; the next GPU copy out of it, on the immediate context
/// or in a list, carries the appended bytes. A later append does not wait for a held buffer
/// that reads the bytes before it, and that buffer's copy does not see the append.
#[test]
fn no_overwrite_on_the_immediate_context_appends_in_place() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode) else {
            return;
        };
        let vb = device.create_resource(dynamic_vertex_buffer(64)).unwrap();
        let readback = device.create_resource(staging(64)).unwrap();
        let early = device.create_resource(buffer(64)).unwrap();
        for (round, via) in VIAS.into_iter().enumerate() {
            let a = 1 + 3 * round as u8;
            let (b, c) = (a + 1, a + 2);
            ic.map(vb, MapType::WriteDiscard, MapFlags::empty())
                .unwrap()[..16]
                .fill(a);
            ic.unmap(vb).unwrap();
            ic.flush().unwrap();
            world.wait_gpu().unwrap(); // the discard's bytes have landed
            let bytes = ic
                .map(vb, MapType::WriteNoOverwrite, MapFlags::empty())
                .unwrap();
            let mut want = vec![0u8; 64];
            want[..16].fill(a);
            assert_eq!(bytes, want, "{mode:?} {via:?}: contents kept");
            bytes[16..32].fill(b);
            want[16..32].fill(b);
            ic.unmap(vb).unwrap();
            copy(&device, &mut ic, via, readback, vb);
            assert_eq!(read_back(&mut ic, readback), want, "{mode:?} {via:?}");

            // A held buffer copies the first 32 bytes out; the next append does not wait.
            world.hold_gpu();
            copy(&device, &mut ic, via, early, vb);
            ic.flush().unwrap();
            let held = world.last_submitted();
            let bytes = ic
                .map(vb, MapType::WriteNoOverwrite, MapFlags::DO_NOT_WAIT)
                .unwrap();
            bytes[32..48].fill(c);
            ic.unmap(vb).unwrap();
            assert!(world.completed() < held, "{mode:?}: waited for the GPU");
            let mut appended = want.clone();
            appended[32..48].fill(c);
            copy(&device, &mut ic, via, readback, vb);
            ic.flush().unwrap();
            world.release_gpu();
            assert_eq!(read_back(&mut ic, readback), appended, "{mode:?} {via:?}");
            copy(&device, &mut ic, via, readback, early);
            assert_eq!(
                read_back(&mut ic, readback)[..32],
                want[..32],
                "{mode:?} {via:?}: the held copy"
            );
        }
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world, mode);
    }
}

/// A Map left open at device destruction, and a mapped resource destroyed before its
/// Unmap: the kernel keeps the memory until the unlock, and nothing is left after.
#[test]
fn a_destroyed_or_open_map_is_unlocked_and_freed() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode) else {
            return;
        };
        let upload = device.create_resource(staging(64)).unwrap();
        let open = device.create_resource(staging(64)).unwrap();
        let dst = device.create_resource(buffer(64)).unwrap();
        ic.map(upload, MapType::Write, MapFlags::empty())
            .unwrap()
            .fill(9);
        device.destroy(upload).unwrap();
        ic.command(&SoftCommand::Fill { dst, value: 1 }).unwrap();
        ic.flush().unwrap(); // the destroyed resource's memory is deallocated
        world.wait_gpu().unwrap();
        // Gone since its Map: refused, the Map left to device destruction.
        let stale = Error::Application(AppError::StaleHandle);
        assert_eq!(ic.unmap(upload), Err(stale), "{mode:?}");
        ic.map(open, MapType::ReadWrite, MapFlags::empty())
            .unwrap()
            .fill(3);
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean_but(world, mode, &[(ContextId::Immediate, stale)]);
    }
}

/// Map(NO_OVERWRITE) on the immediate context right after a Map(DISCARD) whose buffer has
/// not run: the driver carries a discard's bytes into the resource with a GPU copy
/// (`Op::WriteDiscard`), so the engine waits for that buffer before the lock (R-M3): the Map
/// sees the discard's bytes and the appended ones survive, in every list mode (without the
/// wait it saw zeros, and the copy, running later, overwrote the appends).
#[test]
fn no_overwrite_right_after_a_discard_keeps_the_discards_bytes() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode) else {
            return;
        };
        let vb = device.create_resource(dynamic_vertex_buffer(64)).unwrap();
        let readback = device.create_resource(staging(64)).unwrap();
        ic.map(vb, MapType::WriteDiscard, MapFlags::empty())
            .unwrap()[..16]
            .fill(1);
        ic.unmap(vb).unwrap();
        ic.flush().unwrap(); // the discard's buffer runs on
        let bytes = ic
            .map(vb, MapType::WriteNoOverwrite, MapFlags::empty())
            .unwrap();
        let seen = bytes[..16].to_vec();
        bytes[16..32].fill(2);
        ic.unmap(vb).unwrap();
        ic.command(&SoftCommand::Copy {
            dst: readback,
            src: vb,
        })
        .unwrap();
        let mut want = vec![0u8; 64];
        want[..16].fill(1);
        want[16..32].fill(2);
        let after = read_back(&mut ic, readback);
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_eq!(seen, [1; 16], "{mode:?}: contents kept");
        assert_eq!(after, want, "{mode:?}: the appended bytes");
        assert_clean(world, mode);
    }
}

// ---------------------------------------------------------------------------------------
// (6) Map(DISCARD) on the immediate context renames (R-M5)
// ---------------------------------------------------------------------------------------

/// While the GPU is held on a copy that reads a dynamic buffer, Map(DISCARD) of it hands out
/// other memory: the held copy reads the old bytes, one recorded after the Unmap the new
/// ones, on the immediate context and from a list. Once the GPU is done, later discards take
/// the pool's memory again (the kernel flags any lock of memory a pending buffer reads), so
/// rounds of discards keep the number of allocations bounded.
#[test]
fn a_discard_on_the_immediate_context_renames_while_the_gpu_reads_the_old_memory() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode) else {
            return;
        };
        let vb = device.create_resource(dynamic_vertex_buffer(64)).unwrap();
        let [old, new] = [(); 2].map(|()| device.create_resource(staging(64)).unwrap());
        let mut live_after_first = None;
        for round in 0..6u8 {
            let via = VIAS[usize::from(round) % 2];
            let (a, b) = (pattern(64, 2 * round), pattern(64, 2 * round + 1));
            world.hold_gpu();
            ic.map_discard(vb).unwrap().copy_from_slice(&a);
            ic.unmap(vb).unwrap();
            copy(&device, &mut ic, via, old, vb);
            ic.flush().unwrap();
            let held = device.object(vb).unwrap().allocation();
            let bytes = ic.map_discard(vb).unwrap();
            // Undefined until written (R-M1): another allocation as it is (an earlier round's
            // bytes, or a new one's), never the memory the held copy reads.
            assert_ne!(&bytes[..], &a[..], "{mode:?}: not the held memory");
            bytes.copy_from_slice(&b);
            ic.unmap(vb).unwrap();
            let renamed = device.object(vb).unwrap().allocation();
            assert_ne!(held, renamed, "{mode:?}: renamed");
            copy(&device, &mut ic, via, new, vb);
            ic.flush().unwrap();
            world.release_gpu();
            assert_eq!(
                read_back(&mut ic, old),
                a,
                "{mode:?} {via:?}: the held copy"
            );
            assert_eq!(
                read_back(&mut ic, new),
                b,
                "{mode:?} {via:?}: after the rename"
            );
            let live = world.live_allocations();
            let first = *live_after_first.get_or_insert(live);
            assert!(
                live <= first + 2,
                "{mode:?}: {live} allocations, {first} after round 0"
            );
        }
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world, mode);
    }
}

/// A list recorded before the immediate context renames a resource it reads runs on the
/// resource's new memory: a driver-built list's secondaries name the old buffer, so its
/// execute replays its packets instead, as after a rotation (R-M5, R-X5). A list that names
/// only other resources runs its secondaries.
#[test]
fn a_list_recorded_before_a_rename_reads_the_new_memory() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode) else {
            return;
        };
        let vb = device.create_resource(dynamic_vertex_buffer(64)).unwrap();
        let other = device.create_resource(buffer(64)).unwrap();
        let [readback, untouched] = [(); 2].map(|()| device.create_resource(staging(64)).unwrap());
        ic.map_discard(vb).unwrap().copy_from_slice(&pattern(64, 1));
        ic.unmap(vb).unwrap();
        ic.update(other, 0, &pattern(64, 9)).unwrap();
        let copy = |dst, src| vec![SoftCommand::Copy { dst, src }];
        let list = list_of(&device, copy(readback, vb));
        let unrelated = list_of(&device, copy(untouched, other));
        let before = world.built_stats().replayed_after_rotation;
        let want = pattern(64, 2);
        ic.map_discard(vb).unwrap().copy_from_slice(&want);
        ic.unmap(vb).unwrap();
        ic.execute_command_list(&list).unwrap();
        ic.execute_command_list(&unrelated).unwrap();
        assert_eq!(read_back(&mut ic, readback), want, "{mode:?}");
        assert_eq!(read_back(&mut ic, untouched), pattern(64, 9), "{mode:?}");
        let replays = world.built_stats().replayed_after_rotation - before;
        let want_replays = u64::from(mode == ListMode::DriverBuilt);
        assert_eq!(
            replays, want_replays,
            "{mode:?}: the list that names it, alone"
        );
        drop((list, unrelated));
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world, mode);
    }
}

// ---------------------------------------------------------------------------------------
// Persistent locks
// ---------------------------------------------------------------------------------------

/// The kernel keeps its locks across Maps (`Kernel::persistent_locks`): a staging resource
/// read, then written by GPU copies, is read again through the lock its first Map took, and
/// each read sees the newest copy (host-coherent memory, the engine's wait for the buffer
/// that wrote it); the lock ends before the memory goes, and nothing is left.
#[test]
fn a_persistent_lock_sees_each_gpu_write_to_its_memory() {
    let _turn = turn::take();
    for mode in ListMode::ALL {
        let Some((device, mut ic, world)) = vulkan(mode) else {
            return;
        };
        assert!(cmdlist::Kernel::persistent_locks(ic.device().kernel()));
        let readback = device.create_resource(staging(64)).unwrap();
        assert_eq!(read_back(&mut ic, readback), vec![0; 64], "{mode:?}");
        for (seed, via) in VIAS.into_iter().enumerate() {
            let source = device.create_resource(staging(64)).unwrap();
            let want = pattern(64, seed as u8 + 1);
            ic.map(source, MapType::Write, MapFlags::empty())
                .unwrap()
                .copy_from_slice(&want);
            ic.unmap(source).unwrap();
            copy(&device, &mut ic, via, readback, source);
            assert_eq!(read_back(&mut ic, readback), want, "{mode:?} {via:?}");
            device.destroy(source).unwrap();
        }
        ic.destroy_device().unwrap();
        drop((device, ic));
        assert_clean(world, mode);
    }
}
