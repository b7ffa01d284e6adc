//! The null driver (`cmdlist::soft::null`) where it builds lists: the memory its deferred
//! Maps hand out (R-M1, R-M2), one buffer per resource a context mapped; and the null
//! kernel's counts of its locks (R-M4).

use cmdlist::soft::null::null_device_in;
use cmdlist::{BindFlags, DeviceConfig, ListMode, ResourceDesc, Usage};

/// A dynamic vertex buffer of `bytes` bytes: both Maps apply to it.
fn ring(bytes: u64) -> ResourceDesc {
    ResourceDesc {
        byte_size: bytes,
        bind: BindFlags::VERTEX_BUFFER,
        usage: Usage::Dynamic,
        ..Default::default()
    }
}

/// Each resource keeps its own memory: a ring's appends read back what its discard and
/// earlier appends wrote, however many other resources were discarded in between, and a
/// discard hands out the resource's length, larger or smaller than the last one's.
#[test]
fn r_m2_the_null_driver_keeps_each_resources_map_memory() {
    let (device, mut ic) = null_device_in(ListMode::DriverBuilt, DeviceConfig::default()).unwrap();
    let a = device.create_resource(ring(64)).unwrap();
    let b = device.create_resource(ring(256)).unwrap();
    let c = device.create_resource(ring(16)).unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    for (resource, len, byte) in [(a, 64, 1u8), (b, 256, 2), (c, 16, 3)] {
        let bytes = dc.map_discard(resource).unwrap();
        assert_eq!(bytes.len(), len);
        bytes.fill(byte);
        dc.unmap(resource).unwrap();
    }
    // The first one mapped again after the others: its bytes, its length.
    let bytes = dc.map_no_overwrite(a).unwrap();
    assert_eq!(bytes, &[1; 64][..]);
    bytes[32..].fill(4);
    dc.unmap(a).unwrap();
    let bytes = dc.map_no_overwrite(b).unwrap();
    assert_eq!(bytes, &[2; 256][..]);
    dc.unmap(b).unwrap();
    let bytes = dc.map_no_overwrite(a).unwrap();
    assert_eq!(&bytes[..32], &[1; 32][..]);
    assert_eq!(&bytes[32..], &[4; 32][..]);
    dc.unmap(a).unwrap();
    // A discard of the last one mapped hands out its memory again, at its length.
    assert_eq!(dc.map_discard(a).unwrap().len(), 64);
    dc.unmap(a).unwrap();
    let list = dc.finish().unwrap();
    ic.execute_command_list(&list).unwrap();
    drop((list, dc));
    ic.flush().unwrap();
    ic.destroy_device().unwrap();
}

/// The null kernel counts its locks and unlocks, and an allocation deallocated while
/// locked, which the engine never does (R-M4): the count the engine's tests rely on to
/// say so.
#[test]
fn r_m4_the_null_kernel_counts_an_allocation_deallocated_while_locked() {
    use cmdlist::soft::null::NullKernel;
    use cmdlist::{AllocationDesc, Kernel, LockFlags};
    let kernel = NullKernel::default();
    let desc = AllocationDesc {
        size: 8,
        shared: false,
        primary: false,
    };
    let allocation = kernel.allocate(&desc).unwrap();
    let mut mapping = kernel.lock(allocation, LockFlags::WRITE_ONLY).unwrap();
    assert_eq!(kernel.locks(), (1, 0));
    assert_eq!(kernel.deallocated_while_locked(), 0);
    kernel.deallocate(allocation);
    assert_eq!(kernel.deallocated_while_locked(), 1);
    mapping.bytes_mut().fill(1);
    kernel.unlock(allocation, mapping);
    assert_eq!(kernel.locks(), (1, 1));
}
