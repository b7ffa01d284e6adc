//! A driver that does only what a test sets, for the tests that need a driver of their own
//! (`wide`, `rename_size`): how much memory it asks for each object, its Map caps, and one
//! command naming any number of resources, as a draw names its views and buffers.

use cmdlist::handle::Resource;
use cmdlist::{
    AllocationHandle, AnyHandle, Command, DeferredId, Driver, Handle, HandleSize, HandleType,
    ListMemory, MapCaps, ObjectDesc, Op, Resolver, Result, StateView, ThreadingCaps,
};

/// A command naming any number of resources: the driver resolves each.
#[derive(Debug)]
pub struct Wide(pub Vec<Handle<Resource>>);

impl Command for Wide {
    fn for_each_object(&self, visit: &mut dyn FnMut(AnyHandle)) {
        for resource in &self.0 {
            visit(resource.any());
        }
    }
}

/// The driver: `private` bytes of memory for every object, `map_caps` as its caps; its
/// immediate context counts the commands in its open buffer, each checked to resolve every
/// object it names.
pub struct BareDriver {
    pub private: usize,
    pub map_caps: MapCaps,
}

impl Driver for BareDriver {
    type Object = ();
    type IcData = ();
    type Immediate = u64;
    type Command = Wide;
    type Deferred = ();

    fn threading_caps(&self) -> ThreadingCaps {
        ThreadingCaps::empty()
    }
    fn map_caps(&self) -> MapCaps {
        self.map_caps
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
