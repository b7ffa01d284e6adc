//! The kernel's lock as the engine asks for it (R-M4, R-M2): flags that tell a staging Map,
//! which comes after the engine's wait, from a Map(NO_OVERWRITE), which does not wait, and an
//! unlock that keeps what the GPU wrote meanwhile where the application wrote nothing.

use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig};
use cmdlist::{BindFlags, DeviceConfig, Kernel, LockFlags, ResourceDesc, Usage};

use crate::common::allocation;

/// A Map(NO_OVERWRITE)'s lock (`WRITE_ONLY | IGNORE_SYNC`) of a buffer that a copy submitted
/// meanwhile writes: at the unlock, the soft kernel, which copies in and out, writes back
/// only the bytes the application changed, so the copy's bytes elsewhere stay.
#[test]
fn r_m2_a_no_overwrite_unlock_keeps_what_the_gpu_wrote_meanwhile() {
    let config = SoftConfig {
        gpu: Gpu::Immediate,
        ..SoftConfig::from_env().unwrap()
    };
    let (device, mut ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
    let buffer = |usage, bind| ResourceDesc {
        byte_size: 64,
        usage,
        bind,
        ..Default::default()
    };
    let ring = device
        .create_resource(buffer(Usage::Dynamic, BindFlags::VERTEX_BUFFER))
        .unwrap();
    let src = device
        .create_resource(buffer(Usage::Default, BindFlags::empty()))
        .unwrap();
    ic.update(src, 0, &[7; 64]).unwrap();
    ic.flush().unwrap();
    let memory = allocation(&device, ring);
    let flags = LockFlags::WRITE_ONLY | LockFlags::IGNORE_SYNC;
    let mut mapping = device.kernel().lock(memory, flags).unwrap();
    mapping.bytes_mut()[48..].fill(2);
    ic.command(&SoftCommand::Copy { dst: ring, src }).unwrap();
    ic.flush().unwrap();
    device.kernel().unlock(memory, mapping);
    let mut expected = vec![7; 48];
    expected.extend([2; 16]);
    assert_eq!(world.read(memory), Some(expected));
    world.assert_no_violations();
    drop(device);
    ic.destroy_device().unwrap();
}

/// A staging lock (no `IGNORE_SYNC`) of memory a buffer the GPU has not finished uses is a
/// lock the kernel would wait for: the soft kernel names it (R-M4), so that an engine that
/// maps a staging resource without waiting first is caught, whatever the Map's type.
#[test]
fn r_m4_a_staging_lock_of_busy_memory_is_a_violation() {
    for flags in [
        LockFlags::WRITE_ONLY,
        LockFlags::READ_ONLY,
        LockFlags::empty(),
    ] {
        let config = SoftConfig {
            gpu: Gpu::Manual,
            ..SoftConfig::from_env().unwrap()
        };
        let (device, mut ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
        let staging = device
            .create_resource(ResourceDesc {
                byte_size: 16,
                usage: Usage::Staging,
                ..Default::default()
            })
            .unwrap();
        ic.update(staging, 0, &[1; 16]).unwrap();
        ic.flush().unwrap();
        let memory = allocation(&device, staging);
        let mapping = device.kernel().lock(memory, flags).unwrap();
        device.kernel().unlock(memory, mapping);
        let violations = world.violations();
        assert!(
            violations.iter().any(|v| v.rule == "R-M4"),
            "{flags:?}: {violations:#?}"
        );
        // With IGNORE_SYNC, a write-only lock is a Map(NO_OVERWRITE): no violation.
        let named = violations.len();
        let flags = LockFlags::WRITE_ONLY | LockFlags::IGNORE_SYNC;
        let mapping = device.kernel().lock(memory, flags).unwrap();
        device.kernel().unlock(memory, mapping);
        assert_eq!(world.violations().len(), named, "{:#?}", world.violations());
        world.complete_all();
        drop(device);
        ic.destroy_device().unwrap();
    }
}
