//! Persistent locks ([`Kernel::persistent_locks`], R-M3..R-M5): on the null kernel, which
//! keeps them by default and counts its locks, against the same kernel without them.

use crate::handle::Resource;
use crate::soft::null::{copy_of, CopyCommand, NullDriver, NullKernel};
use crate::{
    AppError, BindFlags, Device, DeviceConfig, Error, Handle, ImmediateContext, Kernel, LockFlags,
    MapFlags, MapType, ResourceDesc, Texture2d, Usage,
};

type Ic = ImmediateContext<NullDriver, NullKernel>;

fn device(kernel: NullKernel) -> (Device<NullDriver, NullKernel>, Ic) {
    Device::new(NullDriver::new(), kernel, DeviceConfig::default()).expect("null device")
}

fn ring(device: &Device<NullDriver, NullKernel>) -> Handle<Resource> {
    let desc = ResourceDesc {
        byte_size: 1024,
        bind: BindFlags::VERTEX_BUFFER,
        usage: Usage::Dynamic,
        ..Default::default()
    };
    device.create_resource(desc).expect("ring")
}

/// A frame of a ring: a discard (a rename), then `appends` Map(NO_OVERWRITE)s, each
/// writing its stretch and checking that the earlier ones are still there, and a command
/// that reads the ring (so that the frame's buffer is submitted).
fn frame(ic: &mut Ic, ring: Handle<Resource>, appends: usize) {
    let copy = CopyCommand {
        dst: copy_of(ic.device()).dst,
        src: ring,
    };
    ic.map_discard(ring).expect("discard")[..8].fill(1);
    ic.unmap(ring).expect("unmap");
    for n in 1..=appends {
        let bytes = ic.map_no_overwrite(ring).expect("append");
        assert!(
            bytes[..8 * n].iter().all(|&b| b != 0),
            "earlier appends kept"
        );
        bytes[8 * n..8 * (n + 1)].fill(n as u8 + 1);
        ic.unmap(ring).expect("unmap");
    }
    ic.command(&copy).expect("command");
    ic.device().destroy(copy.dst).expect("destroy");
    ic.flush().expect("flush");
}

/// With persistent locks each allocation is locked once, whatever the number of Maps, and
/// every lock ends before its allocation goes (R-M4); without them each Map locks and its
/// Unmap unlocks.
#[test]
fn r_m3_r_m4_r_m5_persistent_locks_lock_each_allocation_once() {
    for persistent in [true, false] {
        let kernel = match persistent {
            true => NullKernel::default(),
            false => NullKernel::without_persistent_locks(),
        };
        assert_eq!(kernel.persistent_locks(), persistent);
        let (device, mut ic) = device(kernel);
        let ring = ring(&device);
        for _ in 0..4 {
            frame(&mut ic, ring, 8);
        }
        let warm = device.kernel().locks();
        for _ in 0..4 {
            frame(&mut ic, ring, 8);
        }
        let (locks, unlocks) = device.kernel().locks();
        let flags = device.kernel().last_lock_flags();
        assert_eq!(
            flags.contains(LockFlags::PERSISTENT),
            persistent,
            "{flags:?}"
        );
        if persistent {
            // The pool's allocations, each locked at its first Map, cycle: no more locks.
            assert_eq!((locks, unlocks), warm, "kept across Maps");
            assert_eq!(unlocks, 0);
        } else {
            assert_eq!((locks, unlocks), (8 * 9, 8 * 9), "one per Map");
        }
        device.destroy(ring).expect("destroy");
        ic.flush().expect("flush");
        ic.trim();
        let (locks, unlocks) = device.kernel().locks();
        assert_eq!(locks, unlocks, "every lock ended with its allocation");
        assert_eq!(device.kernel().deallocated_while_locked(), 0);
        ic.destroy_device().expect("destroy device");
        assert_eq!(device.kernel().errors(), 0);
    }
}

/// A staging Map of an idle resource through a persistent lock: one lock for any number
/// of Maps, the bytes written by one read by the next; device destruction ends the lock.
#[test]
fn r_m4_staging_maps_share_one_persistent_lock_until_device_destruction() {
    let (device, mut ic) = device(NullKernel::default());
    let desc = ResourceDesc {
        byte_size: 64,
        usage: Usage::Staging,
        ..Default::default()
    };
    let staging = device.create_resource(desc).expect("staging");
    ic.map_staging(staging, MapType::Write, MapFlags::empty())
        .expect("write")
        .fill(7);
    ic.unmap(staging).expect("unmap");
    for _ in 0..3 {
        let bytes = ic
            .map_staging(staging, MapType::Read, MapFlags::empty())
            .expect("read");
        assert_eq!(bytes, [7; 64]);
        ic.unmap(staging).expect("unmap");
    }
    assert_eq!(device.kernel().locks(), (1, 0));
    // Taken by the WRITE Map, it serves the READs: neither read- nor write-only.
    assert_eq!(device.kernel().last_lock_flags(), LockFlags::PERSISTENT);
    ic.destroy_device().expect("destroy device");
    assert_eq!(device.kernel().locks(), (1, 1));
    assert_eq!(device.kernel().deallocated_while_locked(), 0);
}

/// A resource destroyed while a Map holds its persistent lock stays allocated (R-M4): its
/// Unmap is refused and device destruction ends the lock, then deallocates.
#[test]
fn r_m4_a_resource_destroyed_while_mapped_keeps_its_persistent_lock_until_the_end() {
    let (device, mut ic) = device(NullKernel::default());
    let ring = ring(&device);
    frame(&mut ic, ring, 1);
    ic.map_no_overwrite(ring).expect("append")[..4].fill(9);
    device.destroy(ring).expect("destroy");
    ic.flush().expect("flush");
    assert_eq!(device.kernel().deallocated_while_locked(), 0);
    assert_eq!(
        ic.unmap(ring),
        Err(Error::Application(AppError::StaleHandle))
    );
    ic.destroy_device().expect("destroy device");
    let (locks, unlocks) = device.kernel().locks();
    assert_eq!(locks, unlocks);
    assert_eq!(device.kernel().deallocated_while_locked(), 0);
}

/// Rotation (R-X5) moves an allocation's persistent lock with the allocation: a Map after
/// it reaches the bytes of the allocation the resource has now, and nothing is locked
/// twice.
#[test]
fn r_x5_a_persistent_lock_rotates_with_its_allocation() {
    let (device, mut ic) = device(NullKernel::default());
    let texture = Texture2d {
        width: 2,
        height: 2,
        array_size: 1,
        mip_levels: 1,
        samples: 1,
        format: crate::dxgi::DisplayFormat::B8G8R8A8Unorm.to_dxgi(),
    };
    let desc = ResourceDesc {
        byte_size: 16,
        bind: BindFlags::PRESENT,
        usage: Usage::Staging,
        texture: Some(texture),
        ..Default::default()
    };
    let (a, b) = (
        device.create_resource(desc).expect("a"),
        device.create_resource(desc).expect("b"),
    );
    for (resource, value) in [(a, 1), (b, 2)] {
        ic.map_staging(resource, MapType::Write, MapFlags::empty())
            .expect("write")
            .fill(value);
        ic.unmap(resource).expect("unmap");
    }
    ic.rotate_resource_identities(&[a, b]).expect("rotate");
    for (resource, value) in [(a, 2), (b, 1)] {
        let bytes = ic
            .map_staging(resource, MapType::Read, MapFlags::empty())
            .expect("read");
        assert_eq!(bytes, [value; 16]);
        ic.unmap(resource).expect("unmap");
    }
    assert_eq!(device.kernel().locks(), (2, 0), "no lock taken again");
    ic.destroy_device().expect("destroy device");
    assert_eq!(device.kernel().locks(), (2, 2));
    assert_eq!(device.kernel().errors(), 0);
}

/// A Map(DISCARD)'s bytes are undefined (R-M1): one that renames hands out the pooled
/// allocation as it is, an earlier discard's contents (or a new allocation's), and one that
/// copies (a shared resource's) the context's own bytes, zeroed; either way what the
/// application writes is the resource's after the Unmap, Map after Map (R-M5).
#[test]
fn r_m5_a_rename_hands_out_an_earlier_discards_bytes_a_copy_zeroed_ones() {
    for kernel in [
        NullKernel::default(),
        NullKernel::without_persistent_locks(),
    ] {
        let (device, mut ic) = device(kernel);
        let desc = |flags| ResourceDesc {
            byte_size: 48,
            bind: BindFlags::CONSTANT_BUFFER,
            usage: Usage::Dynamic,
            flags,
            ..Default::default()
        };
        let renamed = device
            .create_resource(desc(crate::ResourceFlags::empty()))
            .expect("renamed");
        let copied = device
            .create_resource(desc(crate::ResourceFlags::SHARED))
            .expect("copied");
        let mut earlier = Vec::new();
        for n in 1..=4u8 {
            let bytes = ic.map_discard(renamed).expect("discard");
            // All of one earlier discard's bytes, or a new allocation's zeroes.
            let seen = bytes[0];
            assert!(bytes.iter().all(|&b| b == seen), "one allocation's bytes");
            assert!(
                seen == 0 || earlier.contains(&seen),
                "{seen}: not written before"
            );
            bytes.fill(n);
            ic.unmap(renamed).expect("unmap");
            let bytes = ic.map_discard(copied).expect("discard");
            assert_eq!(bytes, [0; 48], "the copy's bytes are zeroed");
            bytes.fill(n);
            ic.unmap(copied).expect("unmap");
            earlier.push(n);
            ic.flush().expect("flush");
        }
        // The pool handed an earlier discard's allocation back (its GPU work done).
        let bytes = ic.map_discard(renamed).expect("discard");
        assert!(earlier.contains(&bytes[0]), "a pooled allocation, as it is");
        ic.unmap(renamed).expect("unmap");
        ic.destroy_device().expect("destroy device");
        assert_eq!(device.kernel().errors(), 0);
        let (locks, unlocks) = device.kernel().locks();
        assert_eq!(locks, unlocks);
    }
}

/// A rename's memory is locked to be written whatever the GPU does with the buffer, and as
/// referenced by no buffer (R-M5: `WRITE_ONLY | IGNORE_SYNC | NO_EXISTING_REFERENCE`), kept
/// across Maps where the kernel keeps locks; a Map(NO_OVERWRITE)'s lock is the same but
/// for the last flag (R-M3).
#[test]
fn r_m3_r_m5_a_rename_and_an_append_lock_with_their_own_flags() {
    for persistent in [true, false] {
        let kernel = match persistent {
            true => NullKernel::default(),
            false => NullKernel::without_persistent_locks(),
        };
        let (device, mut ic) = device(kernel);
        let ring = ring(&device);
        let kept = match persistent {
            true => LockFlags::PERSISTENT,
            false => LockFlags::empty(),
        };
        ic.map_discard(ring).expect("discard")[..4].fill(1);
        assert_eq!(
            device.kernel().last_lock_flags(),
            LockFlags::WRITE_ONLY
                | LockFlags::IGNORE_SYNC
                | LockFlags::NO_EXISTING_REFERENCE
                | kept,
            "a rename's lock"
        );
        ic.unmap(ring).expect("unmap");
        if !persistent {
            ic.map_no_overwrite(ring).expect("append")[4..8].fill(2);
            assert_eq!(
                device.kernel().last_lock_flags(),
                LockFlags::WRITE_ONLY | LockFlags::IGNORE_SYNC,
                "an append's lock"
            );
            ic.unmap(ring).expect("unmap");
        }
        ic.destroy_device().expect("destroy device");
        assert_eq!(device.kernel().errors(), 0);
    }
}
