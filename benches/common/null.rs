//! The bench-local null driver and kernel, shared by the criterion and the instruction-count
//! benches: every `Driver`/`Kernel` hook is a no-op (no lock, no allocation, no trace), the
//! driver's CLS sizes are all listed in its handle-size table, and the kernel hands out
//! allocation handles from a counter and completes every submission at once. Figures taken
//! with them measure the engine itself.

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};

use cmdlist::handle::Resource;
use cmdlist::{
    AllocationDesc, AllocationHandle, AnyHandle, Clock, Command, ContextId, Device, DeviceConfig,
    Driver, Error, Handle, HandleSize, HandleSizeTable, HandleType, ImmediateContext, Kernel,
    ListMemory, ObjectDesc, Op, Resolver, ResourceDesc, Result, StateView, Submission,
    ThreadingCaps,
};

/// CopyResource: two handles, the two-pointer payload of R-R1's example.
#[derive(Clone, Copy, Debug)]
pub struct Copy2 {
    pub dst: Handle<Resource>,
    pub src: Handle<Resource>,
}

impl Command for Copy2 {
    fn for_each_object(&self, visit: &mut dyn FnMut(AnyHandle)) {
        visit(self.src.any());
        visit(self.dst.any());
    }
}

/// Context-local handle sizes of the null driver: all listed in its table (R-H4).
fn null_cls_size(ty: HandleType) -> usize {
    match ty {
        HandleType::Resource => 64,
        HandleType::CommandList => 64,
        t if t.is_view() => 48,
        _ => 32,
    }
}

/// A driver whose hooks do nothing: no locks, no allocation, no bookkeeping.
pub struct NullDriver {
    sizes: HandleSizeTable,
}

impl NullDriver {
    pub fn new() -> Self {
        let sizes = HandleSizeTable::new(HandleType::ALL.iter().map(|&ty| HandleSize {
            ty,
            size: null_cls_size(ty),
        }))
        .expect("null CLS sizes are valid");
        NullDriver { sizes }
    }
}

impl Driver for NullDriver {
    type Object = ();
    type IcData = ();
    type Immediate = ();
    type Command = Copy2;
    type Deferred = ();

    fn threading_caps(&self) -> ThreadingCaps {
        ThreadingCaps::FREETHREADED
            | ThreadingCaps::COMMANDLISTS
            | ThreadingCaps::COMMANDLISTS_BUILD_2
    }

    fn check_deferred_context_handle_sizes(&self, out: Option<&mut [HandleSize]>) -> usize {
        self.sizes.answer_poll(out)
    }

    fn calc_private_size(&self, desc: &ObjectDesc<'_>) -> usize {
        // Resources get kernel memory, so the engine stamps and lists their allocations. A
        // size past the address space asks for the most there is, never a truncated size.
        match desc {
            ObjectDesc::Resource(r) => usize::try_from(r.byte_size).unwrap_or(usize::MAX),
            _ => 0,
        }
    }

    fn calc_deferred_context_handle_size(&self, ty: HandleType, _object: Option<&()>) -> usize {
        null_cls_size(ty)
    }

    fn calc_private_command_list_size(&self) -> usize {
        64
    }

    fn create_object(
        &self,
        _desc: &ObjectDesc<'_>,
        _memory: Option<AllocationHandle>,
        _dependency: Option<&()>,
    ) -> Result<((), ())> {
        Ok(((), ()))
    }

    fn destroy_object(&self, _ty: HandleType, _object: &(), _ic: &mut ()) {}

    fn create_immediate(&self) -> Result<()> {
        Ok(())
    }

    fn execute(
        &self,
        _imm: &mut (),
        _objects: &Resolver<'_, Self>,
        _op: Op<'_, Self>,
    ) -> Result<()> {
        Ok(())
    }

    fn flush(&self, _imm: &mut ()) {}

    fn create_deferred_context(&self, _id: u32) -> Result<()> {
        Ok(())
    }

    fn destroy_deferred_context(&self, _dc: ()) {}

    fn open_local(
        &self,
        _dc: &mut (),
        _ty: HandleType,
        _object: &(),
        _dependency: Option<&[u8]>,
        _local: &mut [u8],
    ) -> Result<()> {
        Ok(())
    }

    fn close_local(
        &self,
        _dc: &mut (),
        _ty: HandleType,
        _object: &(),
        _local: &mut [u8],
        _state: StateView<'_>,
    ) {
    }

    fn create_command_list(
        &self,
        _dc: &mut (),
        _private: &mut [u8],
        _state: StateView<'_>,
    ) -> Result<()> {
        Ok(())
    }

    fn destroy_command_list(&self, _list: ListMemory<'_>) {}

    fn abandon_command_list(&self, _dc: &mut ()) {}

    fn command_list_clock(&self) -> Clock {
        Clock::Submitted
    }
}

/// A kernel whose GPU completes every submission at once; allocations are counter values.
#[derive(Default)]
pub struct NullKernel {
    next_allocation: AtomicU64,
    completed: AtomicU64,
}

impl Kernel for NullKernel {
    fn allocate(&self, _desc: &AllocationDesc) -> Result<AllocationHandle> {
        let id = self.next_allocation.fetch_add(1, Ordering::Relaxed) + 1;
        Ok(AllocationHandle(
            NonZeroU64::new(id).expect("ids start at 1"),
        ))
    }

    fn deallocate(&self, _allocation: AllocationHandle) {}

    fn submit(&self, submission: &Submission<'_>) -> Result<()> {
        self.completed.store(submission.fence, Ordering::Relaxed);
        Ok(())
    }

    fn completed_fence(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }

    fn wait_for_fence(&self, _fence: u64) -> Result<()> {
        Ok(())
    }

    fn set_error(&self, context: ContextId, error: Error) {
        panic!("unexpected error on {context:?}: {error:?}");
    }

    fn perform_amortized_processing(&self, _context: ContextId) {}
}

pub type NullDevice = Device<NullDriver, NullKernel>;

pub fn null_device(recycle: bool) -> (NullDevice, ImmediateContext<NullDriver, NullKernel>) {
    let config = DeviceConfig::default().with_recycle(recycle);
    Device::new(NullDriver::new(), NullKernel::default(), config).expect("null device")
}

pub fn copy_of(device: &NullDevice) -> Copy2 {
    let desc = ResourceDesc {
        byte_size: 256,
        ..Default::default()
    };
    Copy2 {
        dst: device.create_resource(desc).expect("dst"),
        src: device.create_resource(desc).expect("src"),
    }
}
