//! A command naming more objects than the immediate context looks up in its first pass
//! (four): every object is checked before anything is stamped, and every one is stamped
//! with the open buffer (R-D1), the fifth and later as the first four.

use crate::bare_driver::{BareDriver, Wide};
use cmdlist::handle::Resource;
use cmdlist::soft::null::NullKernel;
use cmdlist::{
    AppError, Device, DeviceConfig, Error, Handle, ImmediateContext, MapCaps, ResourceDesc, Usage,
};

type Ic = ImmediateContext<BareDriver, NullKernel>;

/// Whether a buffer the GPU has not finished (the open one included) uses each resource.
fn busy(ic: &mut Ic, resources: &[Handle<Resource>]) -> Vec<bool> {
    resources
        .iter()
        .map(|&r| ic.resource_is_busy(r).expect("a live staging resource"))
        .collect()
}

/// Every object of a six-object command is stamped with the open buffer, the fifth and
/// sixth as the first four (R-D1: a staging Map would wait for that buffer); a command
/// whose sixth object is destroyed is refused before any is stamped (R-E1).
#[test]
fn r_d1_r_e1_every_object_of_a_wide_command_is_checked_then_stamped() {
    // Memory of its own for each resource (a staging resource needs some to be mapped).
    let driver = BareDriver {
        private: 16,
        map_caps: MapCaps::empty(),
    };
    let (device, mut ic) =
        Device::new(driver, NullKernel::default(), DeviceConfig::default()).expect("device");
    let staging = ResourceDesc {
        byte_size: 16,
        usage: Usage::Staging,
        ..Default::default()
    };
    let resources: Vec<_> = (0..6)
        .map(|_| device.create_resource(staging).expect("staging"))
        .collect();
    assert_eq!(busy(&mut ic, &resources), [false; 6], "nothing used them");

    // The sixth destroyed: refused, nothing stamped.
    let gone = device.create_resource(staging).expect("staging");
    device.destroy(gone).expect("destroy");
    let mut named = resources[..5].to_vec();
    named.push(gone);
    assert_eq!(
        ic.command(&Wide(named)),
        Err(Error::Application(AppError::StaleHandle))
    );
    assert_eq!(busy(&mut ic, &resources), [false; 6], "nothing stamped");

    ic.command(&Wide(resources.clone())).expect("six objects");
    assert_eq!(
        busy(&mut ic, &resources),
        [true; 6],
        "each in the open buffer"
    );
    ic.flush().expect("flush");
    // The null kernel's GPU finishes each buffer at its submit.
    assert_eq!(busy(&mut ic, &resources), [false; 6], "done");

    // Six handles, the fifth and sixth naming the first two again: the others stay idle.
    ic.command(&Wide(
        resources[..4]
            .iter()
            .chain(&resources[..2])
            .copied()
            .collect(),
    ))
    .expect("a handle named twice");
    assert_eq!(
        busy(&mut ic, &resources),
        [true, true, true, true, false, false]
    );
    ic.flush().expect("flush");
    for resource in resources {
        device.destroy(resource).expect("destroy");
    }
    ic.destroy_device().expect("destroy device");
}
