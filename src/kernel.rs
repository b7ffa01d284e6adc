//! The kernel services the engine calls (the WDDM callbacks of a real driver): memory,
//! submission, fence progress, error reporting and amortised processing.
//!
//! Static dispatch: the device is generic over its `Kernel`, so calls are monomorphised.
//! Each method's doc says from which thread the engine calls it and which rule says so.
//!
//! What the trait is, who calls it from which thread, in what order, and what a panicking
//! callback leaves: [`Kernel`]'s documentation.

use core::num::NonZeroU64;

use crate::dxgi::{
    DisplayModeCallback, DisplayModeOutcome, PresentCallback, PresentStatus, ResidencyStatus,
};
use crate::error::{Error, Result};
use crate::mapping::{CpuMapping, LockFlags};

/// A kernel allocation (the memory behind an object that the GPU may read).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AllocationHandle(pub NonZeroU64);

/// What to allocate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AllocationDesc {
    /// Size in bytes (the driver's CalcPrivate* answer, R-F2).
    pub size: u64,
    /// Shared with other devices: allocated only on the thread inside create (R-T2).
    pub shared: bool,
    /// Backs a primary (R-P1).
    pub primary: bool,
}

/// A closed command buffer handed to [`Kernel::submit`] (the render callback).
#[derive(Clone, Copy, Debug)]
pub struct Submission<'a> {
    /// The buffer's number on the immediate context's submission clock; also the fence value
    /// that [`Kernel::completed_fence`] reports once the GPU has finished it. Numbers grow by
    /// one per buffer, but buffers that held nothing are never submitted, so submitted
    /// numbers may skip.
    pub fence: u64,
    /// Every allocation the buffer references (the allocation list of the render callback):
    /// those of the objects its operations name, of the objects the command lists it
    /// executes hold, and of every object bound on the immediate context while the buffer
    /// ran, or unbound in it (R-D1), each view's resource included.
    pub allocations: &'a [AllocationHandle],
    /// How many operations the buffer holds.
    pub operations: u32,
}

/// Which context an error or a callback belongs to (R-E2, R-A2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ContextId {
    /// The immediate context (and the device's free-threaded entry points).
    Immediate,
    /// A deferred context.
    Deferred(DeferredId),
}

/// A deferred context's number, unique within its device for the device's life: what
/// [`crate::DeferredContext::id`] answers, what [`crate::Driver::create_deferred_context`]
/// is given and what [`ContextId::Deferred`] carries, so that a driver and a kernel can
/// match what they hear of one context (R-E2, R-A2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeferredId(u32);

impl DeferredId {
    pub(crate) fn new(number: u32) -> Self {
        DeferredId(number)
    }

    /// The number, e.g. for a C driver's own tables.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl core::fmt::Display for DeferredId {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<DeferredId> for ContextId {
    fn from(id: DeferredId) -> Self {
        ContextId::Deferred(id)
    }
}

/// The kernel services the engine calls: memory, submission, fence progress, error
/// reporting and amortised processing (a real driver's WDDM callbacks), which the embedder
/// implements over its kernel-mode interface.
///
/// The engine is the only caller: a [`crate::Device`] owns the kernel beside its
/// [`crate::Driver`] and calls it, statically dispatched, from the entry points' threads.
/// [`Kernel::allocate`] runs on any thread that creates an object, several at once (R-F1),
/// and [`Kernel::set_error`] on the thread of the failing call, so the trait is
/// `Send + Sync`; the rest run on the immediate context's thread (R-T1, R-T2). Each
/// method's documentation says its thread and the rule that says so.
///
#[cfg_attr(
    feature = "soft",
    doc = "The smallest complete implementation, a template to start from, is the null kernel \
           of [`soft::null`](crate::soft::null) ([`NullKernel`](crate::soft::null::NullKernel)); \
           the checking reference is [`SoftKernel`](crate::soft::SoftKernel), which flags \
           every deallocation, submission or wait out of turn."
)]
#[cfg_attr(
    not(feature = "soft"),
    doc = "The smallest complete implementation, a template to start from, is the null kernel \
           of `soft::null` (`NullKernel`, feature `soft`); the checking reference is \
           `soft::SoftKernel` (feature `soft`), which flags every deallocation, submission \
           or wait out of turn."
)]
///
/// # The order of the callbacks
/// 1. **An object's create** (any thread): [`Kernel::allocate`] for the bytes the driver's
///    [`crate::Driver::calc_private_size`] answered, before the driver creates it (a create
///    that fails afterwards gives the memory back with [`Kernel::deallocate`]).
/// 2. **A flush** (the immediate context's thread): [`Kernel::submit`] of the closed buffer
///    with its fence number and allocation list (R-D1), [`Kernel::completed_fence`], then
///    [`Kernel::deallocate`] for every destroyed object whose last buffer passed the retire
///    clock (R-D2, R-D4); from time to time [`Kernel::perform_amortized_processing`]
///    (R-A1).
/// 3. **A Map on the immediate context** (its thread): [`Kernel::lock`], then at the Unmap
///    [`Kernel::unlock`] (R-M3, R-M4); for a Map(DISCARD) that renames (R-M5), first
///    [`Kernel::allocate`] when the context's pool has no allocation the GPU is done with;
///    the allocations a rename left are deallocated at amortised processing once unused for
///    a while, at [`crate::ImmediateContext::trim`], or at device destruction. Where the
///    kernel keeps locks across Maps ([`Kernel::persistent_locks`]), the lock comes at an
///    allocation's first Map only, and its unlock right before the allocation's
///    [`Kernel::deallocate`] (or at device destruction), not at each Unmap.
/// 4. **Device destruction** (R-D3): a last submit, [`Kernel::wait_for_fence`] for the last
///    fence, then [`Kernel::deallocate`] for everything left.
///
/// [`Kernel::wait_for_fence`] also comes before the lock of a staging Map or of the
/// immediate context's Map(NO_OVERWRITE) whose buffer the GPU has not finished, and inside
/// the destroy of a primary still in use (its documentation lists every call site).
///
/// [`Kernel::set_error`] comes whenever a call fails (R-E2), on its thread.
///
/// # Required callbacks and defaults
/// Thirteen callbacks in all, and one capability. Seven callbacks are required:
/// [`Kernel::allocate`], [`Kernel::deallocate`], [`Kernel::submit`],
/// [`Kernel::completed_fence`], [`Kernel::wait_for_fence`], [`Kernel::set_error`],
/// [`Kernel::perform_amortized_processing`]. Six have default bodies: the CPU-access pair
/// ([`Kernel::lock`] answers [`Error::Unsupported`], so the Maps that need it fail, and
/// [`Kernel::unlock`] does nothing; [`Kernel::persistent_locks`], the capability, answers
/// `false`), and the DXGI ones ([`Kernel::present`] and
/// [`Kernel::set_display_mode`] answer [`Error::Unsupported`], [`Kernel::set_priority`]
/// ignores the priority and [`Kernel::query_residency`] answers resident).
///
/// # Errors
/// A callback that can fail returns a [`crate::Result`] and the engine carries on from it: a
/// failed allocation fails the create (the application hears it, R-E2), a refused submit
/// leaves the buffer open to be submitted again with the same fence number, and nothing it
/// references is deallocated meanwhile (R-D1).
///
/// # When a callback panics
/// As for the driver's hooks (see [`crate::Driver`]): the engine stays sound and usable.
/// [`Kernel::allocate`] that panics counts as failed (the create gives back what it took);
/// [`Kernel::deallocate`] as done (the allocation left the engine's books before the call,
/// and the rest of the object's destruction completes on the unwind: never freed twice);
/// [`Kernel::submit`] as not done (the buffer stays open and is submitted again);
/// [`Kernel::completed_fence`] and [`Kernel::wait_for_fence`] as not answered (nothing is
/// freed on their account); [`Kernel::set_error`] and
/// [`Kernel::perform_amortized_processing`] as done.
///
/// # Example
/// A kernel whose GPU finishes every buffer at its submit, counting the operations it was
/// given (for a whole driver and kernel, see [`crate::Driver`]'s example):
///
/// ```
/// use std::num::NonZeroU64;
/// use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
///
/// use cmdlist::{AllocationDesc, AllocationHandle, ContextId, Error, Kernel, Result, Submission};
///
/// #[derive(Default)]
/// struct Instant {
///     allocations: AtomicU64,
///     completed: AtomicU64,
///     operations: AtomicU64,
///     errors: AtomicU64,
/// }
///
/// impl Kernel for Instant {
///     fn allocate(&self, _: &AllocationDesc) -> Result<AllocationHandle> {
///         let id = self.allocations.fetch_add(1, Relaxed) + 1;
///         NonZeroU64::new(id).map(AllocationHandle).ok_or(Error::OutOfMemory)
///     }
///     fn deallocate(&self, _: AllocationHandle) {}
///     fn submit(&self, submission: &Submission<'_>) -> Result<()> {
///         self.operations.fetch_add(u64::from(submission.operations), Relaxed);
///         self.completed.store(submission.fence, Relaxed);
///         Ok(())
///     }
///     fn completed_fence(&self) -> u64 {
///         self.completed.load(Relaxed)
///     }
///     fn wait_for_fence(&self, _: u64) -> Result<()> {
///         Ok(())
///     }
///     fn set_error(&self, _: ContextId, _: Error) {
///         self.errors.fetch_add(1, Relaxed);
///     }
///     fn perform_amortized_processing(&self, _: ContextId) {}
/// }
///
/// # #[cfg(feature = "soft")] {
/// // Under the null driver of `soft::null`: one copy, one buffer submitted.
/// use cmdlist::soft::null::{CopyCommand, NullDriver};
/// use cmdlist::{Device, DeviceConfig, ResourceDesc};
///
/// let config = DeviceConfig::default();
/// let (device, mut ic) = Device::new(NullDriver::new(), Instant::default(), config)?;
/// let desc = ResourceDesc { byte_size: 64, ..Default::default() };
/// let (dst, src) = (device.create_resource(desc)?, device.create_resource(desc)?);
/// ic.command(&CopyCommand { dst, src })?;
/// ic.flush()?;
/// assert_eq!(device.kernel().operations.load(Relaxed), 1);
/// assert_eq!(device.kernel().completed_fence(), 1);
/// ic.destroy_device()?;
/// # }
/// # Ok::<(), cmdlist::Error>(())
/// ```
pub trait Kernel: Send + Sync + 'static {
    /// Allocates kernel memory. Called from the thread inside the create entry point, which
    /// for ordinary objects is any thread (free-threaded create, R-F1) and for shared or
    /// primary resources is the creating thread itself (R-T2, R-P1); and on the immediate
    /// context's thread for the allocation a Map(DISCARD) renames a resource to (R-M5), of
    /// the size the resource's has.
    fn allocate(&self, desc: &AllocationDesc) -> Result<AllocationHandle>;

    /// Frees kernel memory. Called on the immediate context's thread: during a flush, never
    /// before the submit of the last buffer that could reference the allocation (R-D1, R-D2);
    /// inside the destroy of a primary (R-P1); or during device destruction (R-D3). A create
    /// that fails after allocating gives its memory back on the creating thread (no buffer
    /// ever referenced it). The memory of objects that device destruction left to deferred
    /// contexts still alive (the immediate context dropped under them) is freed on the thread
    /// that lets the device's last reference go, once the immediate context is gone and no
    /// other call on the device can run.
    fn deallocate(&self, allocation: AllocationHandle);

    /// Submits a closed command buffer (the render callback). Called on the immediate
    /// context's thread during a flush (R-T1, R-T2). A buffer refused with an error stays the
    /// open one: the next flush closes ([`crate::Driver::flush`]) and submits it again, with
    /// the same fence number, and nothing it references is deallocated meanwhile (R-D1).
    fn submit(&self, submission: &Submission<'_>) -> Result<()>;

    /// The fence value of the newest buffer the GPU has finished (0 before any). Called on
    /// the immediate context's thread.
    fn completed_fence(&self) -> u64;

    /// Blocks until the GPU has finished the buffer with fence value `fence`. Called on the
    /// immediate context's thread, and only once [`Kernel::completed_fence`] has said that
    /// buffer is not finished (the engine first flushes the open buffer when that is the one
    /// it waits for). Every call site:
    ///
    /// - **A staging Map** (READ, WRITE or READ_WRITE, R-M4) without
    ///   [`crate::MapFlags::DO_NOT_WAIT`]: the newest buffer that uses the resource (with
    ///   the flag the Map answers [`Error::WasStillDrawing`] instead, and nothing waits).
    /// - **A Map(NO_OVERWRITE) on the immediate context** (R-M3): the buffer that carries the
    ///   resource's last Map(DISCARD), its Unmap on the immediate context or the execute of a
    ///   list that discarded it, once per discard.
    /// - **The destroy of a primary** whose last buffer is still running, under the retire
    ///   clock `Clock::Completed` (the default), which deallocates inside the call (R-P1).
    /// - **Device destruction** (R-D3): the last submitted fence.
    /// - **A capture that checks presents** (feature `capture`, `CaptureSink::check_presents`),
    ///   after each present, and its replay under `Timing::Exact`: the last submitted fence,
    ///   before the surface is read.
    ///
    /// A failure is the calling Map's or destroy's error. A failure during device destruction
    /// is returned by it, and everything is still destroyed and deallocated before it returns
    /// (R-D3): a kernel that cannot wait for its own fence is taken to have lost the device,
    /// whose buffers will not run any more.
    fn wait_for_fence(&self, fence: u64) -> Result<()>;

    /// CPU access to `allocation`'s memory (`pfnLockCb`, R-M4): the bytes a Map of a staging
    /// resource (READ, WRITE, READ_WRITE) or a Map(NO_OVERWRITE) on the immediate context
    /// hands the application, until [`Kernel::unlock`]; and the allocation a Map(DISCARD)
    /// renames to (R-M5). Called on the immediate context's thread, at most once at a time
    /// per allocation. `flags` tell the three apart:
    ///
    /// | lock | `flags` | the GPU meanwhile |
    /// |---|---|---|
    /// | a staging Map, a present's checksum | [`LockFlags::READ_ONLY`] (READ), [`LockFlags::WRITE_ONLY`] (WRITE), neither (READ_WRITE) | finished every buffer that uses the allocation: the engine waited for the newest (R-M4), so a kernel's own wait returns at once |
    /// | a Map(NO_OVERWRITE) of a dynamic buffer | `WRITE_ONLY \| IGNORE_SYNC` | buffers it has not finished may read the allocation (the application writes only where they do not, R-M2); a kernel must not wait |
    /// | a rename's memory (R-M5) | `WRITE_ONLY \| IGNORE_SYNC \|` [`LockFlags::NO_EXISTING_REFERENCE`] | no buffer it has not finished references the allocation; the engine hands out its first bytes, as many as the resource has, and refuses a mapping shorter than that |
    ///
    /// Where the kernel keeps locks across Maps ([`Kernel::persistent_locks`]), each lock
    /// comes with [`LockFlags::PERSISTENT`] as well, and is not ended by the Map's Unmap.
    ///
    /// Default: [`Error::Unsupported`] (the Map fails with it).
    fn lock(&self, allocation: AllocationHandle, flags: LockFlags) -> Result<CpuMapping> {
        let _ = (allocation, flags);
        Err(Error::Unsupported)
    }

    /// Whether a lock may persist across Maps (R-M3..R-M5): `true` promises that
    /// [`Kernel::lock`] hands out the allocation's own memory ([`CpuMapping::from_raw`], no
    /// copy), coherent with what the GPU reads and writes of it (CPU writes reach the GPU
    /// without an unlock; GPU writes a finished buffer made are visible to CPU reads), and
    /// that the mapping stays valid while buffers that use the allocation are built,
    /// submitted and run, until [`Kernel::unlock`].
    ///
    /// The engine then locks an allocation once, with [`LockFlags::PERSISTENT`], and keeps
    /// the lock from Map to Map: a Map(NO_OVERWRITE) or a staging Map of an allocation
    /// locked already is a pointer into that memory, and a Map(DISCARD) that renames takes
    /// its allocation from the rename pool with its lock: none calls the kernel. Each lock
    /// still ends with an unlock before its allocation's [`Kernel::deallocate`] (R-M4): at
    /// the resource's real destruction, when the rename pool gives an allocation back, and
    /// at device destruction, which ends every lock first. The engine makes references to
    /// the bytes only between a Map and its Unmap (synchronised as always: a staging Map
    /// after its wait, R-M4; a Map(NO_OVERWRITE) where the application writes only what the
    /// GPU does not read, R-M2), so a kernel or driver may touch the memory on the CPU
    /// between Maps, never during one.
    ///
    /// Called once, when the immediate context is made. Default: `false`, every Map locks
    /// and its Unmap unlocks (a kernel that copies in and out, as the soft kernel does).
    fn persistent_locks(&self) -> bool {
        false
    }

    /// Ends CPU access to `allocation` (`pfnUnlockCb`): `mapping` is what [`Kernel::lock`]
    /// handed out, written as the application wrote it. Called on the immediate context's
    /// thread at the Unmap (also the one device destruction makes of a Map left open).
    ///
    /// The engine does not know which bytes the application wrote: a lock that is not
    /// READ_ONLY may have written anywhere in the mapping. A kernel whose mapping is its own
    /// memory has nothing to do. One that copied the memory in at the lock
    /// ([`CpuMapping::owned`]) copies the mapping back, and for a Map(NO_OVERWRITE)
    /// (`IGNORE_SYNC` without `NO_EXISTING_REFERENCE`) it copies back only the bytes that
    /// differ from what it copied in: its GPU may have written the rest since the lock (a
    /// copy into the buffer submitted before it), and the application wrote only where the
    /// GPU does not read. Default: nothing.
    fn unlock(&self, allocation: AllocationHandle, mapping: CpuMapping) {
        let _ = (allocation, mapping);
    }

    /// Reports an error on the context it happened on (the set-error callback, R-E2). Called
    /// on that context's thread (for free-threaded create and destroy: the calling thread,
    /// reported on [`ContextId::Immediate`]). Never called for the return values of the
    /// recycle-create hooks (R-R3).
    fn set_error(&self, context: ContextId, error: Error);

    /// The perform-amortized-processing callback (R-A1, R-A2): on the immediate context's
    /// thread after some submits, on a deferred context's thread when it ran out of space.
    fn perform_amortized_processing(&self, context: ContextId);

    /// The present callback (`pfnPresentCbDXGI`, R-X1): on the immediate context's thread,
    /// only from inside [`crate::ImmediateContext::present`] (only the engine can make its
    /// argument, R-T2), after the present submitted every partially built buffer. Its status
    /// is the present's. Default: [`Error::Unsupported`].
    fn present(&self, call: &PresentCallback) -> Result<PresentStatus> {
        let _ = call;
        Err(Error::Unsupported)
    }

    /// The set-display-mode callback (`pfnSetDisplayModeCb`, R-X2): on the immediate
    /// context's thread, only from inside [`crate::ImmediateContext::set_display_mode`] (only
    /// the engine can make its argument, R-T2). Default: [`Error::Unsupported`].
    fn set_display_mode(&self, call: &DisplayModeCallback) -> Result<DisplayModeOutcome> {
        let _ = call;
        Err(Error::Unsupported)
    }

    /// The set-priority callback (`pfnSetPriorityCb`, R-X3): one resource's allocations
    /// (its current ones, after any rotation) get `priority`. On the immediate context's
    /// thread. Default: ignored.
    fn set_priority(&self, allocations: &[AllocationHandle], priority: u32) -> Result<()> {
        let _ = (allocations, priority);
        Ok(())
    }

    /// The query-residency callback (`pfnQueryResidencyCb`, R-X4): `out[i]` gets where
    /// `allocations[i]` is; one call for every allocation of one query. On the immediate
    /// context's thread. Default: everything resident in GPU memory (answering "not
    /// implemented" instead crashed games under other layers).
    fn query_residency(
        &self,
        allocations: &[AllocationHandle],
        out: &mut [ResidencyStatus],
    ) -> Result<()> {
        let _ = allocations;
        out.fill(ResidencyStatus::GpuMemory);
        Ok(())
    }
}
