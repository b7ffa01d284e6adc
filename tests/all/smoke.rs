use cmdlist::soft::{self, SoftCommand, SoftConfig};
use cmdlist::{DeviceConfig, ResourceDesc};

#[test]
fn create_copy_destroy_flush_drain() {
    let (device, mut ic, world) = soft::device(SoftConfig::default(), DeviceConfig::default()).unwrap();
    let desc = ResourceDesc { byte_size: 16, ..Default::default() };
    let a = device.create_resource(desc).unwrap();
    let b = device.create_resource(desc).unwrap();
    ic.update(a, 0, &[7; 16]).unwrap();
    ic.command(&SoftCommand::Copy { dst: b, src: a }).unwrap();
    device.destroy(a).unwrap();
    ic.flush().unwrap();
    assert_eq!(world.read(device.object(b).unwrap().allocation.unwrap()).unwrap(), vec![7; 16]);
    ic.destroy_device().unwrap();
    world.assert_clean(true);
}
