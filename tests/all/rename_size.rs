//! A rename's allocation is the driver's size for the resource (R-M5), which may differ from
//! the resource's bytes: larger, the Map hands out the resource's bytes of it; smaller, the
//! kernel maps fewer bytes than the application writes, and the Map is refused (R-E1).

use cmdlist::soft::null::NullKernel;
use cmdlist::{
    AllocationHandle, AnyHandle, BindFlags, Command, DeferredId, Device, DeviceConfig, Driver,
    Error, HandleSize, HandleType, ListMemory, MapCaps, ObjectDesc, Op, Resolver, ResourceDesc,
    Result, StateView, ThreadingCaps, Usage,
};

/// No command names an object.
#[derive(Debug)]
struct Nothing;

impl Command for Nothing {
    fn for_each_object(&self, _: &mut dyn FnMut(AnyHandle)) {}
}

/// A driver that renames discards (its resources' bytes are their allocations) and asks
/// `private` bytes of memory for every object.
struct SizedDriver {
    private: usize,
}

impl Driver for SizedDriver {
    type Object = ();
    type IcData = ();
    type Immediate = ();
    type Command = Nothing;
    type Deferred = ();

    fn threading_caps(&self) -> ThreadingCaps {
        ThreadingCaps::empty()
    }
    fn map_caps(&self) -> MapCaps {
        MapCaps::DISCARD_RENAMES
    }
    fn check_deferred_context_handle_sizes(&self, _: Option<&mut [HandleSize]>) -> usize {
        0
    }
    fn calc_private_size(&self, _: &ObjectDesc<'_>) -> usize {
        self.private
    }
    fn calc_deferred_context_handle_size(&self, _: HandleType, _: Option<&()>) -> usize {
        0
    }
    fn calc_private_command_list_size(&self) -> usize {
        0
    }
    fn create_object(
        &self,
        _: &ObjectDesc<'_>,
        _: Option<AllocationHandle>,
        _: Option<&()>,
    ) -> Result<((), ())> {
        Ok(((), ()))
    }
    fn destroy_object(&self, _: HandleType, _: &(), _: &mut ()) {}
    fn create_immediate(&self) -> Result<()> {
        Ok(())
    }
    fn execute(&self, _: &mut (), _: &Resolver<'_, Self>, _: Op<'_, Self>) -> Result<()> {
        Ok(())
    }
    fn flush(&self, _: &mut ()) {}
    fn create_deferred_context(&self, _: DeferredId) -> Result<()> {
        Ok(())
    }
    fn destroy_deferred_context(&self, _: ()) {}
    fn open_local(
        &self,
        _: &mut (),
        _: HandleType,
        _: &(),
        _: Option<&[u8]>,
        _: &mut [u8],
    ) -> Result<()> {
        Ok(())
    }
    fn close_local(&self, _: &mut (), _: HandleType, _: &(), _: &mut [u8], _: StateView<'_>) {}
    fn create_command_list(&self, _: &mut (), _: &mut [u8], _: StateView<'_>) -> Result<()> {
        Ok(())
    }
    fn destroy_command_list(&self, _: ListMemory<'_>) {}
    fn abandon_command_list(&self, _: &mut ()) {}
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
    let driver = SizedDriver { private: 256 };
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
    let driver = SizedDriver { private: 16 };
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
