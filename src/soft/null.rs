//! The smallest complete [`Driver`] and [`Kernel`]: a template to start a driver from, and
//! the null driver the benches measure the engine with.
//!
//! Every driver hook is a no-op (no lock, no allocation, no trace): [`NullDriver`] answers
//! its context-local handle sizes from a table that lists them all (R-H4), creates objects
//! and command lists with nothing in them, and executes nothing; [`NullKernel`] hands out
//! allocation handles from a counter, completes every submission at once, and keeps a table
//! of each allocation's size, with memory for the ones a Map locks (a mutex that creates,
//! destroys and locks take), its locks kept across Maps ([`Kernel::persistent_locks`], so a
//! Map after an allocation's first calls no kernel). A real driver
//! keeps the shape and fills in the hooks: its objects in `Object` and `IcData`, its command
//! buffer in `Immediate`, its deferred-context state in `Deferred`, its commands in
//! `Command`; `docs/EMBEDDING.md` in the repository says how its DDI entry points map to
//! the engine. The soft driver beside this one ([`super::SoftDriver`]) is the checking
//! reference: it records every hook and flags broken rules.
//!
//! The hooks are `#[inline]`: the benches' figures are the engine's own cost.
//!
//! ```
//! use cmdlist::soft::null::{null_device, CopyCommand};
//! use cmdlist::{DeviceConfig, ResourceDesc};
//!
//! let (device, mut ic) = null_device(DeviceConfig::default())?;
//! let desc = ResourceDesc { byte_size: 256, ..Default::default() };
//! let copy = CopyCommand {
//!     dst: device.create_resource(desc)?,
//!     src: device.create_resource(desc)?,
//! };
//! let mut dc = device.create_deferred_context()?;
//! dc.command(copy)?;
//! let list = dc.finish()?;
//! ic.execute_command_list(&list)?;
//! drop(list);
//! ic.flush()?;
//! # Ok::<(), cmdlist::Error>(())
//! ```
//!
//! # The whole driver
//! Every hook in full, as this module's source has them: the template to copy.
#![doc = concat!("```rust,ignore\n", include_str!("null.rs"), "```")]

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::null_memory::NullMemory;
use crate::handle::Resource;
use crate::{
    AllocationDesc, AllocationHandle, AnyHandle, Command, ContextId, DeferredId, Device,
    DeviceConfig, Driver, Error, Handle, HandleSize, HandleSizeTable, HandleType, ImmediateContext,
    Kernel, ListMemory, ListMode, LocalHandles, ObjectDesc, Op, Resolver, ResourceDesc, Result,
    StateView, Submission, ThreadingCaps,
};
use crate::{CpuMapping, LockFlags};

/// The null driver's one command, CopyResource: two handles, the two-pointer payload of
/// R-R1's example.
#[derive(Clone, Copy, Debug)]
pub struct CopyCommand {
    /// The resource copied to.
    pub dst: Handle<Resource>,
    /// The resource copied from.
    pub src: Handle<Resource>,
}

impl Command for CopyCommand {
    #[inline]
    fn for_each_object(&self, visit: &mut dyn FnMut(AnyHandle)) {
        visit(self.src.any());
        visit(self.dst.any());
    }

    #[cfg(feature = "capture")]
    const CAPTURABLE: bool = true;

    #[cfg(feature = "capture")]
    fn encode_capture(&self, enc: &mut crate::capture::Encoder<'_>) {
        crate::capture::CaptureCommand::encode(self, enc);
    }
}

/// The copy in a capture: its destination, then its source.
#[cfg(feature = "capture")]
impl crate::capture::CaptureCommand for CopyCommand {
    fn encode(&self, enc: &mut crate::capture::Encoder<'_>) {
        enc.object(self.dst);
        enc.object(self.src);
    }

    fn decode(
        dec: &mut crate::capture::Decoder<'_, '_>,
    ) -> Result<Self, crate::capture::DecodeError> {
        Ok(CopyCommand {
            dst: dec.object()?,
            src: dec.object()?,
        })
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

/// A driver whose hooks do nothing: no locks, no allocation, no bookkeeping. In any list
/// mode ([`NullDriver::in_mode`]): by default the engine replays its lists.
#[derive(Debug)]
pub struct NullDriver {
    sizes: HandleSizeTable,
    mode: ListMode,
}

/// The null driver's state of a deferred context: the memory its Maps hand out where it
/// builds its lists, one buffer per resource the context mapped (kept for the context's
/// life: a ring and its constant buffers are a handful), the last used first.
#[derive(Debug, Default)]
pub struct NullDeferred {
    staging: Vec<(Handle<Resource>, Vec<u8>)>,
}

impl NullDeferred {
    /// The memory of `resource`'s Maps, if it was mapped here.
    #[inline]
    fn staging_of(&mut self, resource: Handle<Resource>) -> Option<&mut Vec<u8>> {
        match self.staging.first() {
            Some((r, _)) if *r == resource => Some(&mut self.staging[0].1),
            _ => self.staging_further(resource),
        }
    }

    /// [`NullDeferred::staging_of`] past the first: found, it becomes the first.
    #[inline(never)]
    fn staging_further(&mut self, resource: Handle<Resource>) -> Option<&mut Vec<u8>> {
        let at = self.staging.iter().position(|(r, _)| *r == resource)?;
        self.staging.swap(0, at);
        Some(&mut self.staging[0].1)
    }
}

impl Default for NullDriver {
    #[inline]
    fn default() -> Self {
        Self::new()
    }
}

impl NullDriver {
    /// A null driver listing every handle type's context-local size, whose lists the engine
    /// replays ([`ListMode::Replayed`]).
    pub fn new() -> Self {
        Self::in_mode(ListMode::Replayed)
    }

    /// A null driver in list mode `mode`: without command lists ([`ListMode::Emulated`]),
    /// with lists the engine replays, or with lists it builds itself (where its hooks still
    /// do nothing: executing one is one empty [`Driver::execute_command_list`]).
    pub fn in_mode(mode: ListMode) -> Self {
        let sizes = HandleSizeTable::new(HandleType::ALL.iter().map(|&ty| HandleSize {
            ty,
            size: null_cls_size(ty),
        }))
        .expect("null CLS sizes are valid");
        NullDriver { sizes, mode }
    }
}

impl Driver for NullDriver {
    type Object = ();
    type IcData = ();
    type Immediate = ();
    type Command = CopyCommand;
    type Deferred = NullDeferred;

    #[inline]
    fn threading_caps(&self) -> ThreadingCaps {
        match self.mode {
            ListMode::Emulated => ThreadingCaps::FREETHREADED,
            _ => {
                ThreadingCaps::FREETHREADED
                    | ThreadingCaps::COMMANDLISTS
                    | ThreadingCaps::COMMANDLISTS_BUILD_2
            }
        }
    }

    #[inline]
    fn builds_command_lists(&self) -> bool {
        self.mode == ListMode::DriverBuilt
    }

    #[inline]
    fn map_discard_deferred<'a>(
        &self,
        dc: &'a mut NullDeferred,
        resource: Handle<Resource>,
        len: usize,
        _locals: &mut LocalHandles<'_, Self>,
    ) -> Result<&'a mut [u8]> {
        if dc.staging_of(resource).is_none() {
            dc.staging.try_reserve(1).map_err(|_| Error::OutOfMemory)?;
            dc.staging.insert(0, (resource, Vec::new()));
        }
        let staging = &mut dc.staging[0].1;
        // A discard's contents are undefined until written: the resource's memory is handed
        // out again as it is, grown (zeroed) only for a larger resource.
        if let Some(more) = len.checked_sub(staging.len()).filter(|&more| more > 0) {
            staging.try_reserve(more).map_err(|_| Error::OutOfMemory)?;
            staging.resize(len, 0);
        }
        Ok(&mut staging[..len])
    }

    /// The resource's memory, as its last discard handed it out and the application wrote
    /// it since.
    #[inline]
    fn map_no_overwrite_deferred<'a>(
        &self,
        dc: &'a mut NullDeferred,
        resource: Handle<Resource>,
        len: usize,
        _locals: &mut LocalHandles<'_, Self>,
    ) -> Result<&'a mut [u8]> {
        let staging = dc.staging_of(resource).ok_or(Error::InvalidArg)?;
        staging.get_mut(..len).ok_or(Error::InvalidArg)
    }

    #[inline]
    fn map_caps(&self) -> crate::MapCaps {
        crate::MapCaps::all()
    }

    #[inline]
    fn check_deferred_context_handle_sizes(&self, out: Option<&mut [HandleSize]>) -> usize {
        self.sizes.answer_poll(out)
    }

    #[inline]
    fn calc_private_size(&self, desc: &ObjectDesc<'_>) -> usize {
        // Resources get kernel memory, so the engine stamps and lists their allocations. A
        // size past the address space asks for the most there is, never a truncated size.
        match desc {
            ObjectDesc::Resource(r) => usize::try_from(r.byte_size).unwrap_or(usize::MAX),
            _ => 0,
        }
    }

    #[inline]
    fn calc_deferred_context_handle_size(&self, ty: HandleType, _object: Option<&()>) -> usize {
        null_cls_size(ty)
    }

    #[inline]
    fn calc_private_command_list_size(&self) -> usize {
        64
    }

    #[inline]
    fn create_object(
        &self,
        _desc: &ObjectDesc<'_>,
        _memory: Option<AllocationHandle>,
        _dependency: Option<&()>,
    ) -> Result<((), ())> {
        Ok(((), ()))
    }

    #[inline]
    fn destroy_object(&self, _ty: HandleType, _object: &(), _ic: &mut ()) {}

    #[inline]
    fn create_immediate(&self) -> Result<()> {
        Ok(())
    }

    #[inline]
    fn execute(
        &self,
        _imm: &mut (),
        _objects: &Resolver<'_, Self>,
        _op: Op<'_, Self>,
    ) -> Result<()> {
        Ok(())
    }

    #[inline]
    fn flush(&self, _imm: &mut ()) {}

    #[inline]
    fn create_deferred_context(&self, _id: DeferredId) -> Result<NullDeferred> {
        Ok(NullDeferred::default())
    }

    #[inline]
    fn destroy_deferred_context(&self, _dc: NullDeferred) {}

    #[inline]
    fn open_local(
        &self,
        _dc: &mut NullDeferred,
        _ty: HandleType,
        _object: &(),
        _dependency: Option<&[u8]>,
        _local: &mut [u8],
    ) -> Result<()> {
        Ok(())
    }

    #[inline]
    fn close_local(
        &self,
        _dc: &mut NullDeferred,
        _ty: HandleType,
        _object: &(),
        _local: &mut [u8],
        _state: StateView<'_>,
    ) {
    }

    #[inline]
    fn create_command_list(
        &self,
        _dc: &mut NullDeferred,
        _private: &mut [u8],
        _state: StateView<'_>,
    ) -> Result<()> {
        Ok(())
    }

    #[inline]
    fn destroy_command_list(&self, _list: ListMemory<'_>) {}

    #[inline]
    fn abandon_command_list(&self, _dc: &mut NullDeferred) {}
}

/// A kernel whose GPU completes every submission at once; allocations are counter values,
/// with memory only for the ones a Map locks (R-M4, R-M5).
#[derive(Debug, Default)]
pub struct NullKernel {
    next_allocation: AtomicU64,
    memory: NullMemory,
    completed: AtomicU64,
    errors: AtomicU64,
    /// Answers [`Kernel::persistent_locks`] with `false`, as a kernel that copies would.
    copies_locks: bool,
    /// The flags of the last lock (for tests).
    last_lock_flags: AtomicU32,
}

impl NullKernel {
    /// A null kernel that does not keep locks across Maps ([`Kernel::persistent_locks`]
    /// answers `false`): every Map locks and its Unmap unlocks. The default keeps them.
    pub fn without_persistent_locks() -> Self {
        NullKernel {
            copies_locks: true,
            ..NullKernel::default()
        }
    }

    /// How many locks ([`Kernel::lock`]) were taken, and how many ended
    /// ([`Kernel::unlock`]).
    pub fn locks(&self) -> (u64, u64) {
        self.memory.lock_counts()
    }

    /// The flags the last [`Kernel::lock`] was asked with (empty before any).
    pub fn last_lock_flags(&self) -> LockFlags {
        LockFlags::from_bits_retain(self.last_lock_flags.load(Ordering::Relaxed))
    }

    /// How many allocations were deallocated while locked (R-M4 forbids it; the bytes stay
    /// until the unlock).
    pub fn deallocated_while_locked(&self) -> u64 {
        self.memory.deallocated_while_locked()
    }

    /// How many errors the engine reported through [`Kernel::set_error`] (R-E2).
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
}

impl Kernel for NullKernel {
    #[inline]
    fn allocate(&self, desc: &AllocationDesc) -> Result<AllocationHandle> {
        let id = self.next_allocation.fetch_add(1, Ordering::Relaxed) + 1;
        let allocation = AllocationHandle(NonZeroU64::new(id).expect("ids start at 1"));
        // Its size, for a Map's lock.
        self.memory.allocated(allocation, desc.size);
        Ok(allocation)
    }

    #[inline]
    fn deallocate(&self, allocation: AllocationHandle) {
        self.memory.deallocated(allocation);
    }

    #[inline]
    fn submit(&self, submission: &Submission<'_>) -> Result<()> {
        self.completed.store(submission.fence, Ordering::Relaxed);
        Ok(())
    }

    #[inline]
    fn completed_fence(&self) -> u64 {
        self.completed.load(Ordering::Relaxed)
    }

    #[inline]
    fn wait_for_fence(&self, _fence: u64) -> Result<()> {
        Ok(())
    }

    #[inline]
    fn set_error(&self, _context: ContextId, _error: Error) {
        // A real kernel passes the error to the runtime (SetErrorCb); the null one counts it.
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    fn perform_amortized_processing(&self, _context: ContextId) {}

    #[inline]
    fn persistent_locks(&self) -> bool {
        // The mapping is the allocation's own bytes, and its GPU never touches them.
        !self.copies_locks
    }

    fn lock(&self, allocation: AllocationHandle, flags: LockFlags) -> Result<CpuMapping> {
        // The GPU is always done (every submission completes at once): nothing to wait for.
        self.last_lock_flags.store(flags.bits(), Ordering::Relaxed);
        self.memory.lock(allocation)
    }

    fn unlock(&self, allocation: AllocationHandle, mapping: CpuMapping) {
        self.memory.unlock(allocation, mapping);
    }
}

/// A device of the null driver and kernel.
pub type NullDevice = Device<NullDriver, NullKernel>;

/// A null device and its immediate context, made with `config` (for example
/// [`DeviceConfig::default`], or one [`DeviceConfig::with_recycle`] turns the recycle hooks
/// off for), whose lists the engine replays. Errors are [`Device::new`]'s.
pub fn null_device(
    config: DeviceConfig,
) -> Result<(NullDevice, ImmediateContext<NullDriver, NullKernel>)> {
    null_device_in(ListMode::Replayed, config)
}

/// [`null_device`] in list mode `mode` ([`NullDriver::in_mode`]).
pub fn null_device_in(
    mode: ListMode,
    config: DeviceConfig,
) -> Result<(NullDevice, ImmediateContext<NullDriver, NullKernel>)> {
    Device::new(NullDriver::in_mode(mode), NullKernel::default(), config)
}

/// Two fresh 256-byte resources of `device` and the copy between them.
pub fn copy_of(device: &NullDevice) -> CopyCommand {
    let desc = ResourceDesc {
        byte_size: 256,
        ..Default::default()
    };
    CopyCommand {
        dst: device.create_resource(desc).expect("dst"),
        src: device.create_resource(desc).expect("src"),
    }
}
