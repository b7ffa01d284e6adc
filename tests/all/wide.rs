//! A command naming more objects than the immediate context looks up in its first pass
//! (four): every object is checked before anything is stamped, and every one is stamped
//! with the open buffer (R-D1), the fifth and later as the first four.

use cmdlist::handle::Resource;
use cmdlist::soft::null::NullKernel;
use cmdlist::{
    AllocationHandle, AnyHandle, AppError, Command, DeferredId, Device, DeviceConfig, Driver,
    Error, Handle, HandleSize, HandleType, ImmediateContext, ListMemory, ObjectDesc, Op, Resolver,
    ResourceDesc, Result, StateView, ThreadingCaps, Usage,
};

/// A command naming any number of resources, as a draw names its views and buffers.
#[derive(Debug)]
struct Wide(Vec<Handle<Resource>>);

impl Command for Wide {
    fn for_each_object(&self, visit: &mut dyn FnMut(AnyHandle)) {
        for resource in &self.0 {
            visit(resource.any());
        }
    }
}

/// A driver whose one command is [`Wide`]: it checks that the engine resolves every
/// object the command names, and counts the commands in its open buffer.
struct WideDriver;

impl Driver for WideDriver {
    type Object = ();
    type IcData = ();
    type Immediate = u64;
    type Command = Wide;
    type Deferred = ();

    fn threading_caps(&self) -> ThreadingCaps {
        ThreadingCaps::empty()
    }
    fn check_deferred_context_handle_sizes(&self, _: Option<&mut [HandleSize]>) -> usize {
        0
    }
    fn calc_private_size(&self, _: &ObjectDesc<'_>) -> usize {
        // Memory of its own (a staging resource needs some to be mapped).
        16
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
    fn create_immediate(&self) -> Result<u64> {
        Ok(0)
    }
    fn execute(
        &self,
        open: &mut u64,
        objects: &Resolver<'_, Self>,
        op: Op<'_, Self>,
    ) -> Result<()> {
        match op {
            Op::Command(Wide(resources)) => {
                for &resource in resources {
                    objects.get(resource)?;
                }
                *open += 1;
                Ok(())
            }
            _ => Ok(()),
        }
    }
    fn flush(&self, open: &mut u64) {
        *open = 0;
    }
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

type Ic = ImmediateContext<WideDriver, NullKernel>;

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
    let (device, mut ic) =
        Device::new(WideDriver, NullKernel::default(), DeviceConfig::default()).expect("device");
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
