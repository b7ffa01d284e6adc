//! The hooks the engine calls on the driver, at the DDI points of the protocol.
//!
//! Static dispatch: the device is generic over its `Driver`, so hot paths are monomorphised.
//! Each hook's doc says which thread calls it and which rule says so. Hooks that later
//! protocol points need are added with default bodies, so a driver written against an older
//! version keeps compiling.
//!
//! What the trait is, who calls which hook from which thread, in what order, and what a
//! panicking hook leaves: [`Driver`]'s documentation.

use crate::bind::{BindPoint, StateView};
use crate::caps::ThreadingCaps;
use crate::cls::local_handles::LocalHandles;
use crate::desc::ObjectDesc;
use crate::dxgi::{BltCaps, BltPlan, GammaCaps, PresentFlags};
use crate::error::Result;
use crate::handle::{AnyHandle, Handle, HandleSize, HandleType, Query, Resource};
use crate::kernel::{AllocationHandle, DeferredId};
use crate::registry::{ObjectView, Resolver};

/// The memory behind a command list's handles (R-R2): the immediate-context handle
/// (CalcPrivateCommandListSize bytes) and the deferred context's context-local handle
/// (CalcDeferredContextHandleSize(COMMANDLIST) bytes). Both keep their size across
/// recycling.
pub struct ListMemory<'a> {
    /// The immediate-context command-list handle's memory.
    pub private: &'a mut [u8],
    /// The deferred context's context-local command-list handle's memory.
    pub local: &'a mut [u8],
}

/// The two blocks' lengths; not their bytes.
impl std::fmt::Debug for ListMemory<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListMemory")
            .field("private_len", &self.private.len())
            .field("local_len", &self.local.len())
            .finish()
    }
}

/// A driver-defined command: a plain value that names objects by handle.
///
/// With cmdlist's feature `capture` the trait has two more items, `CAPTURABLE` and
/// `encode_capture` (both with defaults), through which a capture writes the command. They
/// exist only under that feature: a driver crate that implements them enables `capture` on
/// its `cmdlist` dependency, unconditionally, or through a feature of its own that forwards
/// to it and gates the two items, as `cmdlist-vulkan` forwards its own (its
/// `drivers/vulkan/Cargo.toml`):
///
/// ```toml
/// [features]
/// capture = ["cmdlist/capture"]
/// ```
///
/// with `#[cfg(feature = "capture")]` on both items in the driver's `impl Command`. Without
/// the feature the items are not members of the trait, and an impl that names them does not
/// compile.
pub trait Command: Send + Sync + 'static {
    /// Calls `visit` with every object the command references, dependencies first (R-H3).
    /// The engine checks each before the command reaches [`Driver::execute`].
    ///
    /// It must visit the same objects in the same order every time it is called on the same
    /// command: the engine walks a command more than once (a deferred context uses the
    /// objects open in its recording in one pass and opens the rest in a second, skipping
    /// those the first used; the immediate context checks them all, then references them).
    ///
    /// Only the objects the command names: what it reads through the context's bindings (a
    /// draw's bound buffers, views and shaders) the engine accounts for itself (R-D1). An
    /// object is in the allocation list of every buffer the immediate context submits while
    /// it is bound, and of the buffer that unbinds it (a bind, ClearState, a list's execute),
    /// and its memory is deallocated only after the last of those buffers, so a bound object
    /// the application destroys outlives every buffer that may have read it.
    fn for_each_object(&self, visit: &mut dyn FnMut(AnyHandle));

    /// Whether [`Command::encode_capture`] writes the command (feature `capture`): a driver
    /// whose commands also implement [`crate::capture::CaptureCommand`] says `true` and
    /// delegates. Its commands are then in a capture, and can be replayed; otherwise a
    /// capture notes each command without its contents, and a replay stops there.
    ///
    /// Only under cmdlist's feature `capture`: a driver crate that sets it enables that
    /// feature on its `cmdlist` dependency, e.g. with a feature of its own,
    /// `capture = ["cmdlist/capture"]`, gating this item (the trait's documentation).
    #[cfg(feature = "capture")]
    const CAPTURABLE: bool = false;

    /// Writes the command into a capture ([`crate::capture::CaptureCommand::encode`]); called
    /// only where [`Command::CAPTURABLE`] is `true`. Only under cmdlist's feature `capture`,
    /// as [`Command::CAPTURABLE`].
    #[cfg(feature = "capture")]
    fn encode_capture(&self, enc: &mut crate::capture::Encoder<'_>) {
        let _ = enc;
    }
}

/// One operation for the driver to perform on the immediate context, with its objects
/// resolved: the replay side of a recorded command (recorded with handles, replayed with
/// references). More operations may come in later versions: a driver's `match` keeps a
/// wildcard arm (an operation it does not know is one it does not do).
#[non_exhaustive]
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
    /// The new contents of a resource written through Map(DISCARD) and Unmap, from byte 0.
    WriteDiscard {
        /// The resource written.
        resource: ObjectView<'a, D>,
        /// Its new contents.
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
    /// The driver's part of a present (R-X1), before the engine submits the buffer and
    /// calls the kernel's present callback: e.g. its copy into `dst` (an `_SRGB` source to a
    /// non-sRGB destination copied unchanged), or a resolve into a surface of its own (never
    /// into `dst`). Nothing to do for many drivers.
    Present {
        /// The presented surface.
        src: ObjectView<'a, D>,
        /// Its subresource.
        src_subresource: u32,
        /// The destination and its subresource, if any.
        dst: Option<(ObjectView<'a, D>, u32)>,
        /// The present's flags.
        flags: PresentFlags,
    },
}

/// Each operation with its objects (handle, allocation, size) and the length of its bytes,
/// not the bytes; for a driver whose [`Driver::Command`] is `Debug`.
impl<D: Driver> std::fmt::Debug for Op<'_, D>
where
    D::Command: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Command(command) => f.debug_tuple("Command").field(command).finish(),
            Op::Update {
                resource,
                offset,
                data,
            } => f
                .debug_struct("Update")
                .field("resource", resource)
                .field("offset", offset)
                .field("data_len", &data.len())
                .finish(),
            Op::WriteDiscard { resource, data } => f
                .debug_struct("WriteDiscard")
                .field("resource", resource)
                .field("data_len", &data.len())
                .finish(),
            Op::Bind { point, object } => f
                .debug_struct("Bind")
                .field("point", point)
                .field("object", object)
                .finish(),
            Op::BeginQuery(query) => f.debug_tuple("BeginQuery").field(query).finish(),
            Op::EndQuery(query) => f.debug_tuple("EndQuery").field(query).finish(),
            Op::ClearState => f.write_str("ClearState"),
            Op::Present {
                src,
                src_subresource,
                dst,
                flags,
            } => f
                .debug_struct("Present")
                .field("src", src)
                .field("src_subresource", src_subresource)
                .field("dst", dst)
                .field("flags", flags)
                .finish(),
        }
    }
}

/// One call recorded on a deferred context, as the driver hears it on the recording thread
/// ([`Driver::record_deferred`]), in the order the application made them. Objects are named
/// by handle; their context-local handles (open by then, dependencies first, R-H1..R-H5) and
/// immediate-context objects are in the [`LocalHandles`] the hook gets beside it. The first
/// call of a recording, and the first after an execute on the context, finds nothing bound,
/// and the list it makes starts from the clear state wherever it is executed (R-C1, R-C3).
/// More calls may come in later versions: a driver's `match` keeps a wildcard arm.
#[non_exhaustive]
pub enum DeferredCall<'a, D: Driver> {
    /// A driver-defined command.
    Command(&'a D::Command),
    /// UpdateSubresource: `data` written at byte `offset` of `resource`.
    Update {
        /// The resource written.
        resource: Handle<Resource>,
        /// Byte offset of the write.
        offset: u64,
        /// The bytes (the caller's, for this call only).
        data: &'a [u8],
    },
    /// Map(DISCARD) of `resource`, whose new contents are `len` bytes, in
    /// [`crate::ListMode::Replayed`], where the engine hands out the memory. (Where the
    /// driver builds its lists, [`Driver::map_discard_deferred`] is the Map instead.)
    MapDiscard {
        /// The resource mapped.
        resource: Handle<Resource>,
        /// Bytes of its new contents.
        len: usize,
    },
    /// Map(NO_OVERWRITE) of `resource` in [`crate::ListMode::Replayed`] (R-M2): the engine
    /// hands out again the `len` bytes of the resource's last Map(DISCARD) in this recording,
    /// with what was written into them, and replays them with that discard. (Where the
    /// driver builds its lists, [`Driver::map_no_overwrite_deferred`] is the Map instead.)
    MapNoOverwrite {
        /// The resource mapped.
        resource: Handle<Resource>,
        /// Bytes of its contents.
        len: usize,
    },
    /// Unmap of `resource` (also the one Finish makes of a resource still mapped, R-C4). It
    /// closes the resource's one open Map on this deferred context (a context maps a
    /// resource once at a time, R-C4): a Map(DISCARD) or a Map(NO_OVERWRITE). The call does
    /// not say which; the driver tells them apart by what it heard at the Map.
    ///
    /// - After a Map(DISCARD): the resource's new contents, for the driver to record as the
    ///   list's write of them ([`Op::WriteDiscard`] where the engine replays lists).
    /// - After a Map(NO_OVERWRITE) (R-M2): nothing new to upload. The bytes written are the
    ///   last discard's, handed out again, and that discard's write carries them when the
    ///   list runs, with every NO_OVERWRITE write made into them since; the driver records
    ///   nothing for this Unmap.
    ///
    /// Where the driver builds its lists (`data: None`), the bytes are the driver's own,
    /// handed out by [`Driver::map_discard_deferred`] or [`Driver::map_no_overwrite_deferred`].
    /// The soft driver (`soft::built`) encodes a discard's Unmap as a packet with a copy of
    /// the bytes in the list's arena, and its NO_OVERWRITE Maps hand out that packet's bytes
    /// in place, so their Unmap encodes nothing; the Vulkan driver (`cmdlist-vulkan`) records
    /// at a discard's Unmap the copy from its upload memory into the resource (or reads the
    /// upload bytes in place), and at a NO_OVERWRITE's Unmap records nothing, since each
    /// execute runs that copy after the whole recording was written.
    Unmap {
        /// The resource unmapped.
        resource: Handle<Resource>,
        /// [`crate::ListMode::Replayed`]: the bytes written through the engine's memory,
        /// after a Map(DISCARD) the resource's new contents, after a Map(NO_OVERWRITE) the
        /// discard's bytes with this Map's writes in them (the engine replays them with the
        /// discard). `None` in [`crate::ListMode::DriverBuilt`]: the bytes are where the
        /// driver handed them out, written as the application wrote them.
        data: Option<&'a [u8]>,
    },
    /// Bind (or with `None` unbind) an object at `point`; the state-refresh query already
    /// answers the new binding.
    Bind {
        /// Where.
        point: BindPoint,
        /// What.
        object: Option<AnyHandle>,
    },
    /// Begin a query.
    BeginQuery(Handle<Query>),
    /// End a query (also the one Finish makes of a query still begun, R-C4).
    EndQuery(Handle<Query>),
}

/// Each call with its handles and the length of its bytes, not the bytes; for a driver whose
/// [`Driver::Command`] is `Debug`.
impl<D: Driver> std::fmt::Debug for DeferredCall<'_, D>
where
    D::Command: std::fmt::Debug,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeferredCall::Command(command) => f.debug_tuple("Command").field(command).finish(),
            DeferredCall::Update {
                resource,
                offset,
                data,
            } => f
                .debug_struct("Update")
                .field("resource", resource)
                .field("offset", offset)
                .field("data_len", &data.len())
                .finish(),
            DeferredCall::MapDiscard { resource, len } => f
                .debug_struct("MapDiscard")
                .field("resource", resource)
                .field("len", len)
                .finish(),
            DeferredCall::MapNoOverwrite { resource, len } => f
                .debug_struct("MapNoOverwrite")
                .field("resource", resource)
                .field("len", len)
                .finish(),
            DeferredCall::Unmap { resource, data } => f
                .debug_struct("Unmap")
                .field("resource", resource)
                .field("data_len", &data.map(<[u8]>::len))
                .finish(),
            DeferredCall::Bind { point, object } => f
                .debug_struct("Bind")
                .field("point", point)
                .field("object", object)
                .finish(),
            DeferredCall::BeginQuery(query) => f.debug_tuple("BeginQuery").field(query).finish(),
            DeferredCall::EndQuery(query) => f.debug_tuple("EndQuery").field(query).finish(),
        }
    }
}

/// The driver side of the protocol: the hooks the engine calls at the DDI points, which a
/// user-mode driver or a translation layer implements over its GPU.
///
/// The engine is the only caller. A [`crate::Device`] owns the driver and calls it from the
/// application's threads as the entry points run: free-threaded hooks on several threads at
/// once (R-F1, R-F2), the immediate context's on its one thread (R-T1), a deferred context's
/// on the thread recording on it; hence `Send + Sync`. The device is generic over its
/// driver, so every call is statically dispatched. Each hook's documentation says its
/// thread and the rule that says so; `docs/EMBEDDING.md` in the repository maps the D3D11
/// DDI entry points onto the engine and its hooks.
///
#[cfg_attr(
    feature = "soft",
    doc = "The smallest complete implementation, a template to start from, is the null driver \
           of [`soft::null`](crate::soft::null) ([`NullDriver`](crate::soft::null::NullDriver)); \
           the checking reference is [`SoftDriver`](crate::soft::SoftDriver), which records \
           every hook and flags every rule broken, for testing an engine or a driver against."
)]
#[cfg_attr(
    not(feature = "soft"),
    doc = "The smallest complete implementation, a template to start from, is the null driver \
           of `soft::null` (`NullDriver`, feature `soft`); the checking reference is \
           `soft::SoftDriver` (feature `soft`), which records every hook and flags every \
           rule broken, for testing an engine or a driver against."
)]
///
/// # The order of the hooks
/// 1. **Device creation** ([`crate::Device::new`], on the thread that will drive the
///    immediate context): [`Driver::threading_caps`], [`Driver::map_caps`],
///    [`Driver::check_deferred_context_handle_sizes`] (two polls, R-H4, only with
///    `COMMANDLISTS`), [`Driver::builds_command_lists`] (its answer counts only with
///    `COMMANDLISTS`), [`Driver::create_immediate`].
/// 2. **An object's create** (any thread, R-F1): [`Driver::calc_private_size`], the kernel's
///    [`crate::Kernel::allocate`] of that many bytes, [`Driver::create_object`],
///    [`Driver::calc_deferred_context_handle_size`] (R-F2, R-H4). Its destroy only queues it:
///    [`Driver::destroy_object`] runs later on the immediate context's thread, in the flush
///    after the last buffer that may reference it (R-D1, R-D2).
/// 3. **The immediate context's work**: [`Driver::execute`] for each operation ([`Op`]),
///    [`Driver::execute_command_list`] for each list executed (after
///    [`Driver::refresh_view`] for each view the list holds whose resource changed identity
///    or was renamed); [`Driver::renamed`] at the Unmap of a Map(DISCARD) that renamed
///    (R-M5, with [`crate::MapCaps::DISCARD_RENAMES`]); the DXGI calls:
///    [`Driver::gamma_caps`], [`Driver::blt_caps`] then [`Driver::blt`],
///    [`Driver::rotate_identities`] (each rotated view then refreshed with
///    [`Driver::refresh_view`] before its next use, R-X5); [`Driver::flush`] closes the
///    buffer before the kernel's [`crate::Kernel::submit`].
/// 4. **A deferred context** (caps with `COMMANDLISTS`; without, the engine emulates
///    deferred contexts and calls none of these hooks, R-C3):
///    [`Driver::create_deferred_context`]; for each recorded call, [`Driver::open_local`] for
///    each object it uses first (dependencies first, R-H1..R-H5) or [`Driver::use_local`],
///    then [`Driver::record_deferred`], or for a Map where the driver builds its lists
///    [`Driver::map_discard_deferred`] or [`Driver::map_no_overwrite_deferred`] (its Unmap is
///    a [`Driver::record_deferred`]), and for an execute of a list on the context
///    [`Driver::execute_command_list_deferred`]; at Finish (R-R7),
///    [`Driver::recycle_command_list`] for each ended list whose buffers passed the list
///    clock, [`Driver::recycle_create_command_list`] or
///    [`Driver::calc_private_command_list_size`], [`Driver::create_command_list`] and
///    [`Driver::calc_deferred_context_handle_size`] (of the list), [`Driver::close_local`]
///    for every open handle, then [`Driver::recycle_create_deferred_context`] (or, recycling
///    off or failed, [`Driver::destroy_deferred_context`] and
///    [`Driver::create_deferred_context`]); at Abandon (R-C2)
///    [`Driver::abandon_command_list`], [`Driver::abandon_unbind`] for each binding,
///    [`Driver::close_local`] for every open handle, then the context renewed as at Finish;
///    at a list's end (any thread, R-R4) [`Driver::recycle_destroy_command_list`] or
///    [`Driver::destroy_command_list`]; when the context is dropped,
///    [`Driver::destroy_deferred_context`].
/// 5. **Device destruction** ([`crate::ImmediateContext::destroy_device`], R-D3): a last
///    flush, the wait for the last fence, then [`Driver::destroy_object`] for every object.
///
/// # Required hooks and defaults
/// Seventeen hooks are required. The nineteen others have default bodies, so a driver
/// starts with what it needs and a hook that a later protocol point adds does not break it:
/// the recycle hooks (recycling falls back to create and destroy), [`Driver::use_local`],
/// [`Driver::abandon_unbind`], [`Driver::execute_command_list`], the hooks of a driver that
/// builds its own lists ([`Driver::builds_command_lists`], [`Driver::record_deferred`],
/// [`Driver::map_discard_deferred`], [`Driver::map_no_overwrite_deferred`],
/// [`Driver::execute_command_list_deferred`]), the Map ones ([`Driver::map_caps`]: no Map
/// type beyond D3D11.0's and no rename; [`Driver::renamed`]: nothing to remake), and the
/// DXGI ones ([`Driver::gamma_caps`], [`Driver::blt_caps`], [`Driver::blt`],
/// [`Driver::rotate_identities`], [`Driver::refresh_view`]).
///
/// # Errors and panics
/// A hook that can fail returns a [`crate::Result`]: the engine undoes what it took for the
/// call and reports the error to the application through the kernel's set-error callback on
/// the context it happened on (R-E2); out of memory on a deferred context removes that
/// context (R-E3). A hook should not panic; one that does leaves the engine sound (below).
///
/// # Threads
/// - Free-threaded (any thread, several at once, R-F1/R-F2): [`Driver::calc_private_size`],
///   [`Driver::calc_deferred_context_handle_size`], [`Driver::create_object`] (except for
///   primaries).
/// - The thread creating the device, once each, before anything else: [`Driver::threading_caps`],
///   [`Driver::map_caps`], [`Driver::check_deferred_context_handle_sizes`],
///   [`Driver::builds_command_lists`], [`Driver::create_immediate`] (the first three are
///   Check* entry points, free-threaded in the DDI).
/// - The immediate context's thread (R-T1, R-T2, R-D1, R-P1, R-M5, R-X1..R-X7):
///   [`Driver::execute`], [`Driver::execute_command_list`], [`Driver::flush`],
///   [`Driver::destroy_object`], [`Driver::create_object`] for primaries,
///   [`Driver::renamed`], [`Driver::gamma_caps`], [`Driver::blt_caps`], [`Driver::blt`],
///   [`Driver::rotate_identities`], [`Driver::refresh_view`].
/// - A deferred context's thread (R-T1, R-R5, R-R7, R-C2, R-C3): [`Driver::record_deferred`],
///   [`Driver::map_discard_deferred`], [`Driver::map_no_overwrite_deferred`],
///   [`Driver::execute_command_list_deferred`], [`Driver::open_local`],
///   [`Driver::use_local`], [`Driver::close_local`],
///   [`Driver::calc_private_command_list_size`], [`Driver::create_command_list`],
///   [`Driver::calc_deferred_context_handle_size`] of a list, [`Driver::abandon_command_list`],
///   [`Driver::abandon_unbind`], [`Driver::recycle_command_list`],
///   [`Driver::recycle_create_command_list`], [`Driver::recycle_create_deferred_context`],
///   [`Driver::destroy_deferred_context`], and [`Driver::create_deferred_context`] when
///   Finish or Abandon renews the context without recycling.
/// - Any thread (free-threaded destroys, R-R4): [`Driver::destroy_command_list`],
///   [`Driver::recycle_destroy_command_list`]; [`Driver::create_deferred_context`] runs on
///   the thread creating the context.
///
/// # When a hook panics
/// The engine is panic-safe the way std's collections are: a hook may panic, the caller may
/// catch the unwind, and the device stays sound and usable. No object is destroyed twice,
/// no memory is reused or deallocated before its clock allows, what the engine took is given
/// back (holds, handle blocks, slots, kernel memory) by guards, and device destruction still
/// completes. What the panicking hook itself did, or left half done, is the driver's own
/// state; the engine treats the call as:
///
/// - **Create-type hooks** ([`Driver::create_object`], [`Driver::open_local`],
///   [`Driver::create_command_list`], [`Driver::create_deferred_context`], the size
///   queries): as failed. What the engine took for it is given back, in reverse order (a
///   created object through [`Driver::destroy_object`], a created list through
///   [`Driver::destroy_command_list`], on the same thread).
/// - **Destroy-type hooks** ([`Driver::destroy_object`], [`Driver::close_local`],
///   [`Driver::destroy_command_list`], [`Driver::recycle_destroy_command_list`],
///   [`Driver::recycle_command_list`], [`Driver::destroy_deferred_context`]): as done. The
///   object leaves its queue, the handle its table, the list its state before the hook runs,
///   and the rest of the step (its dependency's hold, its slot, its kernel memory, the
///   handles still to close, the context's other lists and its live count) completes on the
///   unwind. A Finish or context drop cut short leaves the other handles open for the next
///   close; the recording is abandoned.
/// - **A deferred context's recorded calls** ([`Driver::record_deferred`],
///   [`Driver::map_discard_deferred`], [`Driver::map_no_overwrite_deferred`],
///   [`Driver::execute_command_list_deferred`]): as failed. Nothing is recorded, a list is
///   not held, and the context's bindings stay as they were (context-local handles the call
///   opened stay open until Finish or Abandon). (An error it returns is a failed call like
///   any other: reported, and out of memory removes the context, R-E3.)
/// - **Work on the immediate context** ([`Driver::execute`],
///   [`Driver::execute_command_list`], [`Driver::flush`]): as possibly half recorded. The
///   operation counts as in the open buffer and its objects are stamped with it, so nothing
///   it references is freed before that buffer is submitted (R-D1), and a list executed in
///   it waits for it too. [`Driver::renamed`]: as done (the rename is made before the hook
///   runs, and stands).
/// - **Device destruction** (R-D3): a hook that panics during the drain leaves the rest
///   queued; calling [`crate::ImmediateContext::destroy_device`] again, or dropping the
///   immediate context, finishes it.
///
/// A hook that panics again while the engine unwinds from an earlier panic aborts the
/// process, as a `Drop` that panics during an unwind does.
///
/// # Memory the driver lays out itself
/// Context-local handles (R-H4) and command-list handles (R-R2) are raw, zeroed byte blocks
/// of the sizes the driver answered, as in the C DDI: the driver decides their layout (plain
/// `#[repr(C)]` data through `bytemuck` or by hand). The engine owns, places and recycles the
/// blocks; their sizes never change for the life of a handle (R-R2).
///
/// So a list the driver builds itself ([`crate::ListMode::DriverBuilt`]) keeps its buffer in
/// memory of its own, and the list's private memory holds only a handle to it (an index, a
/// pointer). When that buffer may be reused or freed is the list clock's
/// ([`crate::DeviceConfig::list_clock`]; R-R4, R-R5): a buffer that executed the list may
/// still read it until it was submitted (`Clock::Submitted`) or completed by the GPU
/// (`Clock::Completed`, the default, and the one for a driver whose GPU reads the built
/// buffer in place). The engine calls [`Driver::recycle_command_list`] and
/// [`Driver::destroy_command_list`] only for a list whose last executing buffer passed that
/// clock (or that never executed, or at device destruction once the GPU is idle), so the
/// buffer may be reused or freed there; [`Driver::recycle_destroy_command_list`] runs as
/// soon as the list's last owner lets go, before that, so the buffer must stay as it is.
///
/// # Example
/// A driver without command lists (the engine emulates deferred contexts, R-C3), whose GPU
/// work is a count of the operations it executed, over a kernel that completes every
/// submission at once:
///
/// ```
/// use std::num::NonZeroU64;
/// use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
///
/// use cmdlist::handle::Resource;
/// use cmdlist::{
///     AllocationDesc, AllocationHandle, AnyHandle, Command, ContextId, DeferredId, Device,
///     DeviceConfig, Driver, Error, Handle, HandleSize, HandleType, Kernel, ListMemory,
///     ObjectDesc, Op, Resolver, ResourceDesc, Result, StateView, Submission, ThreadingCaps,
/// };
///
/// /// The driver's one command: fill a resource.
/// #[derive(Debug)]
/// struct Fill(Handle<Resource>);
///
/// impl Command for Fill {
///     fn for_each_object(&self, visit: &mut dyn FnMut(AnyHandle)) {
///         visit(self.0.any());
///     }
/// }
///
/// #[derive(Default)]
/// struct Counting {
///     executed: AtomicU64,
/// }
///
/// impl Driver for Counting {
///     type Object = ();
///     type IcData = ();
///     type Immediate = u64; // operations in the open buffer
///     type Command = Fill;
///     type Deferred = ();
///
///     fn threading_caps(&self) -> ThreadingCaps {
///         ThreadingCaps::empty()
///     }
///     fn check_deferred_context_handle_sizes(&self, _: Option<&mut [HandleSize]>) -> usize {
///         0
///     }
///     fn calc_private_size(&self, _: &ObjectDesc<'_>) -> usize {
///         0
///     }
///     fn calc_deferred_context_handle_size(&self, _: HandleType, _: Option<&()>) -> usize {
///         0
///     }
///     fn calc_private_command_list_size(&self) -> usize {
///         0
///     }
///     fn create_object(
///         &self,
///         _: &ObjectDesc<'_>,
///         _: Option<AllocationHandle>,
///         _: Option<&()>,
///     ) -> Result<((), ())> {
///         Ok(((), ()))
///     }
///     fn destroy_object(&self, _: HandleType, _: &(), _: &mut ()) {}
///     fn create_immediate(&self) -> Result<u64> {
///         Ok(0)
///     }
///     fn execute(&self, open: &mut u64, _: &Resolver<'_, Self>, op: Op<'_, Self>) -> Result<()> {
///         match op {
///             Op::Command(Fill(_)) | Op::ClearState => {
///                 *open += 1;
///                 Ok(())
///             }
///             // An operation it cannot do is an error value, reported to the application.
///             _ => Err(Error::Unsupported),
///         }
///     }
///     fn flush(&self, open: &mut u64) {
///         self.executed.fetch_add(std::mem::take(open), Relaxed);
///     }
///     // Deferred-context hooks: not called for a driver without `COMMANDLISTS`.
///     fn create_deferred_context(&self, _: DeferredId) -> Result<()> {
///         Ok(())
///     }
///     fn destroy_deferred_context(&self, _: ()) {}
///     fn open_local(
///         &self,
///         _: &mut (),
///         _: HandleType,
///         _: &(),
///         _: Option<&[u8]>,
///         _: &mut [u8],
///     ) -> Result<()> {
///         Ok(())
///     }
///     fn close_local(&self, _: &mut (), _: HandleType, _: &(), _: &mut [u8], _: StateView<'_>) {}
///     fn create_command_list(&self, _: &mut (), _: &mut [u8], _: StateView<'_>) -> Result<()> {
///         Ok(())
///     }
///     fn destroy_command_list(&self, _: ListMemory<'_>) {}
///     fn abandon_command_list(&self, _: &mut ()) {}
/// }
///
/// /// Allocation handles from a counter; the GPU finishes each buffer at its submit.
/// #[derive(Default)]
/// struct Instant {
///     allocations: AtomicU64,
///     completed: AtomicU64,
/// }
///
/// impl Kernel for Instant {
///     fn allocate(&self, _: &AllocationDesc) -> Result<AllocationHandle> {
///         let id = self.allocations.fetch_add(1, Relaxed) + 1;
///         NonZeroU64::new(id).map(AllocationHandle).ok_or(Error::OutOfMemory)
///     }
///     fn deallocate(&self, _: AllocationHandle) {}
///     fn submit(&self, submission: &Submission<'_>) -> Result<()> {
///         self.completed.store(submission.fence, Relaxed);
///         Ok(())
///     }
///     fn completed_fence(&self) -> u64 {
///         self.completed.load(Relaxed)
///     }
///     fn wait_for_fence(&self, _: u64) -> Result<()> {
///         Ok(())
///     }
///     fn set_error(&self, _: ContextId, _: Error) {}
///     fn perform_amortized_processing(&self, _: ContextId) {}
/// }
///
/// let config = DeviceConfig::default();
/// let (device, mut ic) = Device::new(Counting::default(), Instant::default(), config)?;
/// assert!(device.emulates_command_lists());
/// let resource = device.create_resource(ResourceDesc { byte_size: 64, ..Default::default() })?;
/// let mut dc = device.create_deferred_context()?;
/// dc.command(Fill(resource))?;
/// let list = dc.finish()?;
/// ic.execute_command_list(&list)?; // the fill between two clear-states (R-C3)
/// ic.flush()?;
/// assert_eq!(device.driver().executed.load(Relaxed), 3);
/// drop((list, dc));
/// device.destroy(resource)?;
/// ic.destroy_device()?;
/// # Ok::<(), cmdlist::Error>(())
/// ```
pub trait Driver: Send + Sync + Sized + 'static {
    /// An object's read-only data, created once and shared with every context that uses the
    /// object (R-L2: the link from a context-local handle to its immediate-context handle).
    /// Dropped after the object's real destruction once no thread can be reading it (the
    /// CPU epoch): by the create that reuses its registry slot, on that create's thread, or
    /// when the device is dropped, at the latest. The driver's clean-up belongs in
    /// [`Driver::destroy_object`]; a `Drop` here must not block.
    type Object: Send + Sync + 'static;
    /// An object's data that only the immediate context's thread reads and writes, kept on
    /// other cache lines than [`Driver::Object`] (R-L3): read in the hooks that get a
    /// [`Resolver`] with [`Resolver::ic_data`], handed mutably to
    /// [`Driver::destroy_object`], [`Driver::rotate_identities`] and
    /// [`Driver::refresh_view`], and reached by the embedder through
    /// [`crate::ImmediateContext::ic_data_mut`]. Dropped with the object's
    /// [`Driver::Object`], on the same thread.
    type IcData: Send + 'static;
    /// The driver's immediate-context state (its open command buffer, bindings...).
    type Immediate: Send + 'static;
    /// The driver's own command type.
    type Command: Command;
    /// The driver's state of one deferred context.
    type Deferred: Send + 'static;

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
    /// context-local handle of `object` in a deferred context, asked once right after the
    /// object is created (on the creating thread), or, with `None`, of a command list's
    /// (at Finish, after CreateCommandList, R-R7). Must be a size the handle-size table
    /// listed for `ty`; any other answer is the driver's error (`InvalidArg` where the
    /// handle is opened).
    fn calc_deferred_context_handle_size(
        &self,
        ty: HandleType,
        object: Option<&Self::Object>,
    ) -> usize;

    /// CalcPrivateCommandListSize (R-F2, R-R2): bytes of a command list's immediate-context
    /// handle. Asked once per created list; a recycled list keeps its memory. The size is
    /// fixed and asked before the list's contents are known, so a driver-built list keeps
    /// its buffer in memory of its own and this memory holds a handle to it (the module
    /// docs, "Memory the driver lays out itself", say when that buffer may be freed).
    fn calc_private_command_list_size(&self) -> usize;

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
    /// Dependents are destroyed before what they depend on (R-H3). Must not stall. Two
    /// exceptions to the thread: a create that fails after this hook's `create_object`
    /// succeeded (the engine ran out of slots, or the device was destroyed meanwhile) undoes
    /// it on the creating thread, and that object was never visible to anyone; and an object
    /// that device destruction left to a deferred context still alive (the immediate context
    /// dropped under it, R-D3) is destroyed on the thread that lets the device's last
    /// reference go, when nothing is left that could hand it to another hook.
    ///
    /// No hook hears an object after this one ran for it, whatever the threads do.
    fn destroy_object(&self, ty: HandleType, object: &Self::Object, ic: &mut Self::IcData);

    /// Creates the driver's immediate-context state, on the thread creating the device.
    fn create_immediate(&self) -> Result<Self::Immediate>;

    /// Performs one operation on the immediate context (its thread only, R-T1).
    ///
    /// An `Err` refuses the operation (the caller gets the error), yet the operation counts
    /// as in the open buffer all the same, as one whose hook panicked does: its objects are
    /// stamped with the buffer and the buffer is submitted (R-D1). So a driver may reference
    /// memory (write a packet, list an allocation) before it finds a reason to refuse, and
    /// nothing it referenced is deallocated while that buffer can still read it.
    fn execute(
        &self,
        imm: &mut Self::Immediate,
        objects: &Resolver<'_, Self>,
        op: Op<'_, Self>,
    ) -> Result<()>;

    /// Closes the open command buffer before the engine submits it (on the immediate
    /// context's thread, R-T2).
    fn flush(&self, imm: &mut Self::Immediate);

    /// CommandListExecute (R-C3), on the immediate context's thread, after the engine
    /// checked R-R8 and R-C4 and stamped every object the list holds with the open buffer
    /// ([`Resolver::buffer`], R-D1). `list` is the list's private memory, as
    /// [`Driver::create_command_list`] (or the recycle-create) left it; `objects.state()`
    /// answers the context's bindings from before the call, and from the next call on
    /// nothing is bound.
    ///
    /// The list's first command starts from the clear state: a command list inherits none of
    /// the executing context's bindings (R-C3), and the engine sends no [`Op::ClearState`]
    /// before it, so this hook puts the driver's state there (what `objects.state()` still
    /// answers is for the driver to look at, not to apply to the list).
    ///
    /// - [`crate::ListMode::Replayed`]: the start of the execute; the engine then replays the
    ///   list's operations through [`Driver::execute`] and sends [`Op::ClearState`] after
    ///   them. A list the list executes enters the same way, in place.
    /// - [`crate::ListMode::DriverBuilt`]: the whole execute; nothing is replayed. The driver
    ///   runs or chains the buffer it built (and those of the lists it executes, chained at
    ///   their [`Driver::execute_command_list_deferred`]) into the open buffer, and leaves
    ///   the context in the clear state afterwards, as the protocol's CommandListExecute
    ///   does: the engine sends no operation of the list and no [`Op::ClearState`].
    ///
    /// Objects resolve now, not at record time: identities may have rotated between Finish
    /// and this call (R-X5), which moves allocations between resources, and with
    /// [`crate::MapCaps::DISCARD_RENAMES`] a Map(DISCARD) on the immediate context may have
    /// renamed a resource the list uses (R-M5), before this execute or between two executes
    /// of the same list: the resource has another allocation, and the old one is freed once
    /// the GPU is done with it. The engine has
    /// refreshed every view the list (and each list it executes) holds
    /// ([`Driver::refresh_view`]) before this hook; `objects.get(handle)` answers each
    /// object the list holds, destroyed ones included, with its current
    /// [`ObjectView::allocation`], and [`Resolver::ic_data`] its IC data. So a driver-built
    /// list keeps handles (or patch locations for them) in its buffer and writes the current
    /// allocations or addresses here, never ones cached while recording: the deferred
    /// context's thread cannot read IC data, and what it saw of an allocation may be stale.
    /// The soft driver's packets name resources by handle and resolve them at each execute;
    /// the Vulkan driver (`cmdlist-vulkan`), whose secondaries name buffers, keeps the
    /// allocation each resource had when the list looked it up, and an execute that finds
    /// one moved (a rotation or a rename) replays the list's handle-based packets into the
    /// open buffer instead.
    ///
    /// An error still leaves the execute in the open buffer (it is submitted, and the list
    /// waits for it).
    fn execute_command_list(
        &self,
        imm: &mut Self::Immediate,
        list: &[u8],
        objects: &Resolver<'_, Self>,
    ) -> Result<()> {
        let _ = (imm, list, objects);
        Ok(())
    }

    /// CommandListExecute on a deferred context (R-C3), on that context's thread: the
    /// context records the execution of a finished list. `list` is that list's private
    /// memory (its immediate-context handle, as [`Driver::create_command_list`] filled it and
    /// [`Driver::execute_command_list`] receives it); the list may be executed by several
    /// contexts at once, so the driver only reads it. `state` still answers the context's
    /// bindings, and from the context's next call on nothing is bound.
    ///
    /// - [`crate::ListMode::Replayed`]: a notification. The engine records the execution
    ///   and replays it, so the driver must not chain the inner list itself: on the
    ///   immediate context the inner list replays in place within the outer list's execute
    ///   ([`Driver::execute_command_list`] with its private memory, its operations through
    ///   [`Driver::execute`], then [`Op::ClearState`]), the state-refresh queries answering
    ///   the bindings from before the outer execute throughout.
    /// - [`crate::ListMode::DriverBuilt`]: the driver chains the inner list into this
    ///   context's work, started from the clear state and followed by the clear-state its
    ///   execute implies; the outer list's [`Driver::execute_command_list`] runs both,
    ///   resolving the inner list's objects then, as its own.
    ///
    /// Either way the engine keeps the inner list alive and executable (its private memory
    /// unchanged, its buffer not recycled: the outer list owns it) while a recording or list
    /// that executes it can still run.
    fn execute_command_list_deferred(
        &self,
        dc: &mut Self::Deferred,
        list: &[u8],
        state: StateView<'_>,
    ) -> Result<()> {
        let _ = (dc, list, state);
        Ok(())
    }

    /// Whether the driver builds its command lists itself ([`crate::ListMode::DriverBuilt`]),
    /// asked once at device creation, on the creating thread; the answer counts only for a
    /// driver whose caps include `COMMANDLISTS`.
    /// Then every deferred-context call reaches the driver on the recording thread
    /// ([`Driver::record_deferred`], [`Driver::map_discard_deferred`],
    /// [`Driver::execute_command_list_deferred`]), where it validates and encodes into memory
    /// it keeps with the recording; executing a list is one
    /// [`Driver::execute_command_list`] with the list's private memory, and none of its
    /// operations reaches [`Driver::execute`]. Default: `false`, the engine records and
    /// replays ([`crate::ListMode::Replayed`]).
    fn builds_command_lists(&self) -> bool {
        false
    }

    /// A call recorded on a deferred context (R-T1), on that context's thread, as the
    /// application makes it: a driver-defined command, UpdateSubresource, Map(DISCARD) and
    /// Unmap, a bind, a query's Begin or End ([`DeferredCall`]). Every object the call names
    /// has its context-local handle open in `locals` by then ([`Driver::open_local`] on its
    /// first use, [`Driver::use_local`] on later ones), with its context-local memory to
    /// write and its immediate-context object to read; nothing here is shared with another
    /// context or the immediate context, so this is where a driver validates, tracks state
    /// and encodes, in parallel with the immediate context.
    ///
    /// A recording starts from the clear state: nothing is bound on a new context, nor after
    /// Finish or Abandon (R-C1, R-C2), nor after an execute of a list on the context (R-C3),
    /// and `locals.state()` answers so. The list is executed in that state too, whatever the
    /// executing context has bound ([`Driver::execute_command_list`]), so a driver encodes
    /// the recording as starting from nothing bound.
    ///
    /// Called only once the engine has accepted the call: every check it makes (R-C4's
    /// conflicts, the budget and the replay limit of R-E3, a query begun twice, a second
    /// Map, a stale or foreign handle) comes first, and a refused call is never heard. A
    /// Begin's owed End and a Map's owed Unmap are reserved with them, so the ones Finish adds
    /// are heard whatever the budget.
    ///
    /// An error refuses the call: nothing is recorded, the error is reported on the context's
    /// sink (R-E2), and out of memory removes the context locally (R-E3); the call returns
    /// the error, except a Map, which hands the application scratch memory instead, as a Map
    /// past the budget does (the application writes it and the removed context drops it).
    /// A hook that panics refuses the call the same way; during Finish (its implicit Ends and
    /// Unmaps) it abandons the recording with everything it left open (R-C2). Called in
    /// [`crate::ListMode::Replayed`] and [`crate::ListMode::DriverBuilt`], never when the
    /// engine emulates command lists. Default: nothing to do.
    fn record_deferred(
        &self,
        dc: &mut Self::Deferred,
        call: DeferredCall<'_, Self>,
        locals: &mut LocalHandles<'_, Self>,
    ) -> Result<()> {
        let _ = (dc, call, locals);
        Ok(())
    }

    /// Map(DISCARD) on a deferred context whose driver builds its lists
    /// ([`crate::ListMode::DriverBuilt`]), on that context's thread: exactly `len` bytes of
    /// the driver's memory for the resource's new contents (another length is the driver's
    /// error, `InvalidArg`), as the DDI's ResourceMap on a deferred context returns the
    /// driver's pointer. The memory stays the driver's; it need not be zeroed.
    /// `resource`'s context-local handle is open in `locals`. An error is a failed Map, as
    /// for [`Driver::record_deferred`]: out of memory removes the context and the application
    /// gets scratch memory; any other error is returned, and the resource is not mapped.
    /// Memory of another length is refused (`InvalidArg`, R-E1) after the driver made its
    /// Map, so the engine removes the context locally: the driver hears
    /// [`Driver::abandon_command_list`] and drops the recording, Map included, and Finish
    /// answers out of memory once (R-E3).
    /// Default: [`crate::Error::Unsupported`].
    ///
    /// [`crate::DeferredContext::map_discard`] returns these bytes borrowed from the
    /// context, so the application writes them before its next call on the context, and
    /// not after (a C shim copies its caller's bytes in just before the Unmap). The driver
    /// keeps them as they are until it hears the Unmap ([`DeferredCall::Unmap`] with
    /// `data: None`, also the one Finish makes, R-C4), where it takes what was written;
    /// calls in between may reach it. An Abandon drops the Map with the recording.
    fn map_discard_deferred<'a>(
        &self,
        dc: &'a mut Self::Deferred,
        resource: Handle<Resource>,
        len: usize,
        locals: &mut LocalHandles<'_, Self>,
    ) -> Result<&'a mut [u8]> {
        let _ = (dc, resource, len, locals);
        Err(crate::Error::Unsupported)
    }

    /// Map(NO_OVERWRITE) on a deferred context whose driver builds its lists (R-M2), on that
    /// context's thread: the same `len` bytes the driver handed out at the resource's last
    /// [`Driver::map_discard_deferred`] in this recording, with what was written into them,
    /// so that the list leaves the resource with that discard and every later NO_OVERWRITE
    /// write applied. The engine calls it only after such a discard (an application that
    /// maps without one gets `MapWithoutDiscard`, and the driver hears nothing) and after
    /// R-M3's checks; the resource is unmapped. Errors and lengths are as for
    /// [`Driver::map_discard_deferred`], and the Unmap is heard the same way
    /// ([`DeferredCall::Unmap`] with `data: None`). Default: [`crate::Error::Unsupported`].
    fn map_no_overwrite_deferred<'a>(
        &self,
        dc: &'a mut Self::Deferred,
        resource: Handle<Resource>,
        len: usize,
        locals: &mut LocalHandles<'_, Self>,
    ) -> Result<&'a mut [u8]> {
        let _ = (dc, resource, len, locals);
        Err(crate::Error::Unsupported)
    }

    /// The Map types beyond D3D11.0's that the driver serves (R-M3), and whether a
    /// Map(DISCARD) on the immediate context renames (R-M5): asked once, at device creation,
    /// on the creating thread. Default: none (vertex and index buffers only take
    /// Map(NO_OVERWRITE); a discard's bytes reach the driver at the Unmap).
    fn map_caps(&self) -> crate::caps::MapCaps {
        crate::caps::MapCaps::empty()
    }

    /// Creates the driver's state of a deferred context (CreateDeferredContext): on the
    /// thread creating the context, and again on the context's own thread when Finish or
    /// Abandon renews its state without recycling it (recycling off, or
    /// [`Driver::recycle_create_deferred_context`] failed, R-R3), after
    /// [`Driver::destroy_deferred_context`] of the old state.
    fn create_deferred_context(&self, id: DeferredId) -> Result<Self::Deferred>;

    /// Destroys a deferred context's state: on the context's thread when it is dropped, and
    /// after every Finish or Abandon when recycling is off (R-C1, R-C2). Releases the
    /// memory of the lists in the context's cache ([`Driver::recycle_command_list`]).
    ///
    /// A context that outlives its device (its immediate context dropped while it records)
    /// hears after device destruction only [`Driver::close_local`] for each handle it had
    /// open, when Finish, Abandon or its drop ends the recording, and this, at its drop
    /// (R-D3): device destruction leaves the objects its handles hold (a call that began
    /// before the removal may still hand them to a hook), and destroys them once the
    /// device's last reference goes. Finish and Abandon answer
    /// [`crate::Error::DeviceRemoved`], with no abandon, unbind, recycle or create hook.
    fn destroy_deferred_context(&self, dc: Self::Deferred);

    /// Abandon's second step (R-C2), on the deferred context's thread: the binding at
    /// `point` was undone (as the runtime calling the context's Set* with nothing); `state`
    /// answers the bindings left.
    fn abandon_unbind(&self, dc: &mut Self::Deferred, point: BindPoint, state: StateView<'_>) {
        let _ = (dc, point, state);
    }

    /// Opens a context-local handle (R-H1, R-H2, R-H5), on the deferred context's thread, on
    /// the first use of `object` in a recording: the deferred context's Create* entry point
    /// with the immediate-context object in place of the runtime handle, and, for a view,
    /// only the context-local data of what it depends on (R-H3, opened before it). `local`
    /// is a zeroed block of the size the driver answered (R-H4).
    fn open_local(
        &self,
        dc: &mut Self::Deferred,
        ty: HandleType,
        object: &Self::Object,
        dependency: Option<&[u8]>,
        local: &mut [u8],
    ) -> Result<()>;

    /// Every later use of an open context-local handle in the same recording (a bind, a
    /// command naming it), on the deferred context's thread. Found in O(1), no hashing.
    fn use_local(
        &self,
        dc: &mut Self::Deferred,
        ty: HandleType,
        object: &Self::Object,
        local: &mut [u8],
    ) {
        let _ = (dc, ty, object, local);
    }

    /// Closes a context-local handle (R-C1, R-C2): on the deferred context's thread, at
    /// Finish or Abandon, dependents before dependencies (R-H3). `state` reports nothing
    /// bound (R-C1).
    fn close_local(
        &self,
        dc: &mut Self::Deferred,
        ty: HandleType,
        object: &Self::Object,
        local: &mut [u8],
        state: StateView<'_>,
    );

    /// CreateCommandList, at Finish on the deferred context's thread (R-R7), when no recycled
    /// list is available: `private` is the zeroed immediate-context handle memory
    /// (CalcPrivateCommandListSize bytes). The context-local handle is sized after this call,
    /// as R-R7 orders, and reaches the driver in the recycle hooks. `state` still reports the
    /// context's bindings (R-C1). A driver-built list moves what the recording built into a
    /// buffer of the driver's here and writes a handle to it into `private`, which has a
    /// fixed size (R-R2).
    fn create_command_list(
        &self,
        dc: &mut Self::Deferred,
        private: &mut [u8],
        state: StateView<'_>,
    ) -> Result<()>;

    /// DestroyCommandList (free-threaded, any thread): the list's memory is released after.
    /// Ends a live list (recycling off, or its deferred context gone), and also a list that
    /// was recycle-destroyed ([`Driver::recycle_destroy_command_list`]) but whose context
    /// went away before its next Finish could take it into its cache (R-R4). Never called for
    /// a list in a context's cache: [`Driver::destroy_deferred_context`] releases those.
    ///
    /// Called only once the last buffer that executed the list passed the list clock
    /// ([`crate::DeviceConfig::list_clock`]; the engine keeps an ended list until a flush of
    /// its immediate context sees that), for a list never executed, or at device destruction
    /// once the GPU is idle (R-D3). So a driver-built list's buffer may be freed here (under
    /// `Clock::Submitted` only if the GPU does not read it in place: the module docs).
    fn destroy_command_list(&self, list: ListMemory<'_>);

    /// AbandonCommandList (R-C2), on the deferred context's thread, before the context's
    /// bindings are undone one by one and its handles closed.
    fn abandon_command_list(&self, dc: &mut Self::Deferred);

    /// RecycleCommandList (R-R5), on the deferred context's thread at Finish: a destroyed
    /// list's handles go into the context's cache; the driver puts its memory there too.
    /// Called only for a list whose last executing buffer passed the list clock
    /// ([`crate::DeviceConfig::list_clock`]; the others wait for a later Finish), so a
    /// driver-built list's buffer may be reused or freed from here on; what stays in the
    /// cache is released by [`Driver::destroy_deferred_context`].
    fn recycle_command_list(&self, dc: &mut Self::Deferred, list: ListMemory<'_>) {
        let _ = (dc, list);
    }

    /// RecycleCreateCommandList (R-R6), on the deferred context's thread at Finish: makes a
    /// recycled list valid again. Out of memory is the return value, never the error sink
    /// (R-R3); on failure the engine falls back to [`Driver::create_command_list`].
    fn recycle_create_command_list(
        &self,
        dc: &mut Self::Deferred,
        list: ListMemory<'_>,
        state: StateView<'_>,
    ) -> Result<()> {
        self.create_command_list(dc, list.private, state)
    }

    /// RecycleDestroyCommandList (R-R4): a light, free-threaded destroy that keeps the
    /// list's memory (any thread). The list then goes into its context's cache at the
    /// context's next Finish ([`Driver::recycle_command_list`]), or, if the context goes
    /// first, ends with [`Driver::destroy_command_list`].
    ///
    /// It runs as soon as the list's last owner lets go, whatever the list clock says: a
    /// buffer that executed the list may not even be submitted yet. A driver-built list's
    /// buffer must stay as it is until one of those two hooks.
    fn recycle_destroy_command_list(&self, list: ListMemory<'_>) {
        let _ = list;
    }

    /// RecycleCreateDeferredContext (R-R7), on the deferred context's thread at the end of
    /// Finish and Abandon when recycling is on: makes the context ready to record again.
    /// Out of memory is the return value, never the error sink (R-R3).
    fn recycle_create_deferred_context(&self, dc: &mut Self::Deferred) -> Result<()> {
        let _ = dc;
        Ok(())
    }

    /// GetGammaCapsDXGI (R-X2): the gamma control capabilities, on the immediate context's
    /// thread. Default: 256 evenly spread points from 0 to 1, without scale and offset.
    fn gamma_caps(&self) -> Result<GammaCaps> {
        GammaCaps::uniform(256)
    }

    /// What the driver's Blt can do beyond R-X6's minimum; asked at each Blt. Default: none
    /// (a rotating Blt is refused before [`Driver::blt`]).
    fn blt_caps(&self) -> BltCaps {
        BltCaps::empty()
    }

    /// BltDXGI (R-X6, R-X7), on the immediate context's thread, after the engine checked
    /// every restriction of R-X7 into `plan`; `src` and `dst` are stamped with the open
    /// buffer ([`Resolver::buffer`], the buffer this Blt goes into) once this returns, `Ok`
    /// or not (a refused Blt counts as in the buffer, as for [`Driver::execute`]). It
    /// copies the whole source rectangle into the
    /// destination rectangle, resolving, converting, stretching and rotating as `plan` says,
    /// writing each destination pixel once and never resolving into the destination first
    /// (`dxgi::reference::blt` is the CPU reference). Default: [`crate::Error::Unsupported`].
    fn blt(
        &self,
        imm: &mut Self::Immediate,
        objects: &Resolver<'_, Self>,
        src: ObjectView<'_, Self>,
        dst: ObjectView<'_, Self>,
        plan: &BltPlan,
    ) -> Result<()> {
        let _ = (imm, objects, src, dst, plan);
        Err(crate::Error::Unsupported)
    }

    /// RotateResourceIdentities (R-X5), on the immediate context's thread, after the engine
    /// rotated the resources' allocations: `ic[i]` is resource `i`'s IC data, and whatever
    /// in it names the resource's identity (an address, a descriptor) rotates the same way,
    /// `ic[i]` taking what `ic[i + 1]` had and the last what the first had. Default: nothing
    /// (IC data without identity).
    fn rotate_identities(&self, imm: &mut Self::Immediate, ic: &mut [&mut Self::IcData]) {
        let _ = (imm, ic);
    }

    /// A view whose resource changed identity since the view was last used (R-X5): remake
    /// what in its IC data embeds the resource's allocation. On the immediate context's
    /// thread, before the view's next use there; never at create time (a view created on
    /// another thread would race the rotation). Default: nothing.
    fn refresh_view(
        &self,
        imm: &mut Self::Immediate,
        view: ObjectView<'_, Self>,
        ic: &mut Self::IcData,
        resource: ObjectView<'_, Self>,
    ) -> Result<()> {
        let _ = (imm, view, ic, resource);
        Ok(())
    }

    /// A Map(DISCARD) on the immediate context renamed `resource` (R-M5, with
    /// [`crate::MapCaps::DISCARD_RENAMES`]): at its Unmap, on the immediate context's thread,
    /// [`ObjectView::allocation`] became the allocation the application just wrote, and
    /// `previous` is what the operations before it in the open buffer read, kept by the
    /// engine until the GPU finished them. Remake what `ic` (the resource's IC data) or the
    /// driver's own state embeds of the old allocation; views of the resource are refreshed
    /// before their next use ([`Driver::refresh_view`]). Nothing can fail: the rename is
    /// done. Default: nothing (a driver that reads the allocation at each use).
    fn renamed(
        &self,
        imm: &mut Self::Immediate,
        resource: ObjectView<'_, Self>,
        ic: &mut Self::IcData,
        previous: AllocationHandle,
    ) {
        let _ = (imm, resource, ic, previous);
    }
}
