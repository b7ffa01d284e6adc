//! The kernel services the engine calls (the WDDM callbacks of a real driver): memory,
//! submission, fence progress, error reporting and amortised processing.
//!
//! Static dispatch: the device is generic over its `Kernel`, so calls are monomorphised.
//! Each method's doc says from which thread the engine calls it and which rule says so.
//!
//! # When a callback panics
//! As for the driver's hooks (see [`crate::driver`]): the engine stays sound and usable.
//! [`Kernel::allocate`] that panics counts as failed (the create gives back what it took);
//! [`Kernel::deallocate`] as done (the allocation left the engine's books before the call,
//! and the rest of the object's destruction completes on the unwind: never freed twice);
//! [`Kernel::submit`] as not done (the buffer stays open and is submitted again);
//! [`Kernel::completed_fence`] and [`Kernel::wait_for_fence`] as not answered (nothing is
//! freed on their account); [`Kernel::set_error`] and
//! [`Kernel::perform_amortized_processing`] as done.

use core::num::NonZeroU64;

use crate::dxgi::{
    DisplayModeCallback, DisplayModeOutcome, PresentCallback, PresentStatus, ResidencyStatus,
};
use crate::error::{Error, Result};

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

/// Kernel services. Implementations must be `Send + Sync`: several are free-threaded.
///
/// The smallest complete implementation, a template to start from, is the null kernel of
/// `soft::null` (feature `soft`); the checking reference is `soft::SoftKernel`.
pub trait Kernel: Send + Sync + 'static {
    /// Allocates kernel memory. Called from the thread inside the create entry point, which
    /// for ordinary objects is any thread (free-threaded create, R-F1) and for shared or
    /// primary resources is the creating thread itself (R-T2, R-P1).
    fn allocate(&self, desc: &AllocationDesc) -> Result<AllocationHandle>;

    /// Frees kernel memory. Called on the immediate context's thread: during a flush, never
    /// before the submit of the last buffer that could reference the allocation (R-D1, R-D2);
    /// inside the destroy of a primary (R-P1); or during device destruction (R-D3). A create
    /// that fails after allocating gives its memory back on the creating thread (no buffer
    /// ever referenced it).
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
    /// immediate context's thread: during device destruction (R-D3), and when a primary whose
    /// last buffer is still running is destroyed (R-P1). A failure during device destruction
    /// is returned by it, and everything is still destroyed and deallocated before it returns
    /// (R-D3): a kernel that cannot wait for its own fence is taken to have lost the device,
    /// whose buffers will not run any more.
    fn wait_for_fence(&self, fence: u64) -> Result<()>;

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
