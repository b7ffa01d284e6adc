//! A rename's allocation is the driver's size for the resource (R-M5), which may differ from
//! the resource's bytes: larger, the Map hands out the resource's bytes of it; smaller, the
//! kernel maps fewer bytes than the application writes, and the Map is refused (R-E1).

use crate::bare_driver::BareDriver;
use cmdlist::soft::null::NullKernel;
use cmdlist::{BindFlags, Device, DeviceConfig, Error, MapCaps, ResourceDesc, Usage};

/// A driver that renames discards (its resources' bytes are their allocations) and asks
/// `private` bytes of memory for every object.
fn sized(private: usize) -> BareDriver {
    BareDriver {
        private,
        map_caps: MapCaps::DISCARD_RENAMES,
    }
}

/// A 64-byte dynamic constant buffer.
fn constants() -> ResourceDesc {
    ResourceDesc {
        byte_size: 64,
        bind: BindFlags::CONSTANT_BUFFER,
        usage: Usage::Dynamic,
        ..Default::default()
    }
}

/// An allocation larger than the resource: the Map hands out the resource's 64 bytes of a
/// new one, which the Unmap makes the resource's (R-M5).
#[test]
fn r_m5_a_rename_into_a_larger_allocation_hands_out_the_resources_bytes() {
    let driver = sized(256);
    let (device, mut ic) =
        Device::new(driver, NullKernel::default(), DeviceConfig::default()).expect("device");
    let constants = device.create_resource(constants()).expect("constants");
    let before = device.object(constants).expect("live").allocation();
    let bytes = ic.map_discard(constants).expect("a rename");
    assert_eq!(bytes.len(), 64, "the resource's bytes");
    bytes.fill(5);
    ic.unmap(constants).expect("unmap");
    let after = device.object(constants).expect("live").allocation();
    assert_ne!(before, after, "renamed");
    assert_eq!(device.kernel().errors(), 0);
    ic.destroy_device().expect("destroy device");
}

/// An allocation smaller than the resource: the kernel maps fewer bytes than the Map must
/// hand out, which is the driver's error (R-E1): refused, nothing mapped, the resource's
/// allocation unchanged and the Map free to be made again.
#[test]
fn r_m5_r_e1_a_rename_into_a_smaller_allocation_is_refused() {
    let driver = sized(16);
    let (device, mut ic) =
        Device::new(driver, NullKernel::default(), DeviceConfig::default()).expect("device");
    let constants = device.create_resource(constants()).expect("constants");
    let before = device.object(constants).expect("live").allocation();
    assert_eq!(
        ic.map_discard(constants).map(|b| b.len()),
        Err(Error::InvalidArg)
    );
    assert_eq!(
        ic.map_discard(constants).map(|b| b.len()),
        Err(Error::InvalidArg)
    );
    assert_eq!(device.object(constants).expect("live").allocation(), before);
    ic.destroy_device().expect("destroy device");
}
