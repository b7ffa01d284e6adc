//! The hooks the engine calls on the driver, at the DDI points of the protocol.
//!
//! Static dispatch: the device is generic over its `Driver`, so hot paths are monomorphised.
//! Each hook's doc says which thread calls it and which rule says so. Hooks that later
//! protocol points need are added with default bodies, so a driver written against an older
//! version keeps compiling.
//!
//! # Threads
//! - Free-threaded (any thread, several at once, R-F1/R-F2): [`Driver::threading_caps`],
//!   [`Driver::check_deferred_context_handle_sizes`], [`Driver::calc_private_size`],
//!   [`Driver::calc_deferred_context_handle_size`], [`Driver::create_object`] (except for
//!   primaries).
//! - The immediate context's thread (R-T1, R-T2, R-D1, R-P1): [`Driver::create_immediate`],
//!   [`Driver::execute`], [`Driver::flush`], [`Driver::destroy_object`], and
//!   [`Driver::create_object`] for primaries.

use crate::bind::BindPoint;
use crate::caps::ThreadingCaps;
use crate::desc::ObjectDesc;
use crate::error::Result;
use crate::handle::{AnyHandle, HandleSize, HandleType};
use crate::kernel::AllocationHandle;
use crate::registry::{ObjectView, Resolver};

/// A driver-defined command: a plain value that names objects by handle.
pub trait Command: Send + Sync + 'static {
    /// Calls `visit` with every object the command references, dependencies first (R-H3).
    /// The engine checks each before the command reaches [`Driver::execute`].
    fn for_each_object(&self, visit: &mut dyn FnMut(AnyHandle));
}

/// One operation for the driver to perform on the immediate context, with its objects
/// resolved: the replay side of a recorded command (recorded with handles, replayed with
/// references).
pub enum Op<'a, D: Driver> {
    /// A driver-defined command; its handles resolve through the [`Resolver`].
    Command(&'a D::Command),
    /// UpdateSubresource: write `data` at byte `offset` of `resource`.
    Update {
        /// The resource written.
        resource: ObjectView<'a, D>,
        /// Byte offset of the write.
        offset: u64,
        /// The bytes.
        data: &'a [u8],
    },
    /// Bind (or with `None` unbind) an object.
    Bind {
        /// Where.
        point: BindPoint,
        /// What.
        object: Option<ObjectView<'a, D>>,
    },
    /// Begin a query.
    BeginQuery(ObjectView<'a, D>),
    /// End a query.
    EndQuery(ObjectView<'a, D>),
    /// Clear-state: unbind everything (R-C3, R-D4).
    ClearState,
}

/// The driver side of the protocol.
pub trait Driver: Send + Sync + Sized + 'static {
    /// An object's read-only data, created once and shared with every context that uses the
    /// object (R-L2: the link from a context-local handle to its immediate-context handle).
    /// Dropped once no thread can be reading it (the CPU epoch), on whichever thread reclaims
    /// it; the driver's clean-up belongs in [`Driver::destroy_object`].
    type Object: Send + Sync + 'static;
    /// An object's data that only the immediate context's thread reads and writes, kept on
    /// other cache lines than [`Driver::Object`] (R-L3).
    type IcData: Send + 'static;
    /// The driver's immediate-context state (its open command buffer, bindings...).
    type Immediate: Send + 'static;
    /// The driver's own command type.
    type Command: Command;

    /// The threading caps (a Check* entry point: free-threaded, R-F1).
    fn threading_caps(&self) -> ThreadingCaps;

    /// CheckDeferredContextHandleSizes in its two-poll form (R-H4): with `None`, the number of
    /// (type, size) pairs; with an array of that length, fills it and returns how many it
    /// wrote. Called once, at device creation, on the creating thread.
    fn check_deferred_context_handle_sizes(&self, out: Option<&mut [HandleSize]>) -> usize;

    /// CalcPrivate*Size (R-F2, free-threaded): bytes of kernel memory the object needs (0 for
    /// none). The engine allocates it through [`crate::Kernel::allocate`] before
    /// [`Driver::create_object`] and deallocates it on the submission clock (R-D1).
    fn calc_private_size(&self, desc: &ObjectDesc<'_>) -> usize;

    /// CalcDeferredContextHandleSize (R-F2, R-H4, free-threaded): the size of the
    /// context-local handle of `object` in a deferred context. Must be a size the handle-size
    /// table listed for `ty`; any other answer is the driver's error (`InvalidArg`).
    fn calc_deferred_context_handle_size(&self, ty: HandleType, object: &Self::Object) -> usize;

    /// Create* (R-F1: free-threaded; for primaries, on the immediate context's thread, R-P1).
    /// `memory` is the kernel allocation of [`Driver::calc_private_size`] bytes, `dependency`
    /// the object a view depends on (R-H3).
    fn create_object(
        &self,
        desc: &ObjectDesc<'_>,
        memory: Option<AllocationHandle>,
        dependency: Option<&Self::Object>,
    ) -> Result<(Self::Object, Self::IcData)>;

    /// Destroy*, at the real destruction (R-D1, R-D2): on the immediate context's thread,
    /// during a flush after the submit of the last buffer that could reference the object;
    /// inside the destroy call for primaries (R-P1); during device destruction (R-D3).
    /// Dependents are destroyed before what they depend on (R-H3). Must not stall.
    fn destroy_object(&self, ty: HandleType, object: &Self::Object, ic: &mut Self::IcData);

    /// Creates the driver's immediate-context state, on the thread creating the device.
    fn create_immediate(&self) -> Result<Self::Immediate>;

    /// Performs one operation on the immediate context (its thread only, R-T1).
    fn execute(&self, imm: &mut Self::Immediate, objects: &Resolver<'_, Self>, op: Op<'_, Self>) -> Result<()>;

    /// Closes the open command buffer before the engine submits it (on the immediate
    /// context's thread, R-T2).
    fn flush(&self, imm: &mut Self::Immediate);
}
