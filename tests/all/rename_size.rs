//! A rename's allocation is the driver's size for the resource (R-M5), which may differ from
//! the resource's bytes: larger, the Map hands out the resource's bytes of it; smaller, the
//! kernel maps fewer bytes than the application writes, and the Map is refused (R-E1).

use crate::bare_driver::BareDriver;
use cmdlist::handle::Resource;
use cmdlist::soft::null::NullKernel;
use cmdlist::{
    BindFlags, Device, DeviceConfig, Error, Handle, ImmediateContext, MapCaps, ResourceDesc, Usage,
};

/// A device whose driver renames discards and asks `private` bytes of memory for every
/// object, and a 64-byte dynamic constant buffer on it.
fn device_with_constants(
    private: usize,
) -> (
    Device<BareDriver, NullKernel>,
    ImmediateContext<BareDriver, NullKernel>,
    Handle<Resource>,
) {
    let driver = BareDriver {
        private,
        map_caps: MapCaps::DISCARD_RENAMES,
    };
    let (device, ic) =
        Device::new(driver, NullKernel::default(), DeviceConfig::default()).expect("device");
    let desc = ResourceDesc {
        byte_size: 64,
        bind: BindFlags::CONSTANT_BUFFER,
        usage: Usage::Dynamic,
        ..Default::default()
    };
    let constants = device.create_resource(desc).expect("constants");
    (device, ic, constants)
}

/// An allocation larger than the resource: the Map hands out the resource's 64 bytes of a
/// new one, which the Unmap makes the resource's (R-M5).
#[test]
fn r_m5_a_rename_into_a_larger_allocation_hands_out_the_resources_bytes() {
    let (device, mut ic, constants) = device_with_constants(256);
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
    let (device, mut ic, constants) = device_with_constants(16);
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
