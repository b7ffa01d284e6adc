//! Deferred contexts: see [`DeferredContext`].

#[cfg(feature = "capture")]
use crate::capture::Call;
use core::cell::Cell;
use core::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use crossbeam_epoch::{self as epoch, Guard};
use crossbeam_utils::CachePadded;
use scopeguard::ScopeGuard;

use crate::bind::{BindPoint, Bindings, StateView};
use crate::cls::{ClsCtx, ClsTable};
use std::sync::Arc;

use crate::cls::local_handles::LocalHandles;
use crate::context::command_list::{
    end_unfinished, release, CommandList, ListBody, ListData, ListNode, ListRecording, ListState,
};
use crate::context::device::Device;
use crate::context::driver_side::DriverSide;
use crate::context::list_pool::ListPool;
use crate::context::mapped_and_begun::MappedAndBegun;
use crate::driver::{Command, DeferredCall, Driver, ListMemory};
use crate::error::{AppError, Error, Result};
use crate::handle::{AnyHandle, Handle, HandleType, ObjectKind, Query, Resource};
use crate::kernel::{ContextId, DeferredId, Kernel};
use crate::lists::list_clock::ListStamp;
use crate::lists::record::{note_in_set, Recorded, Recording, OPERATION_BYTES};
use crate::lists::recycle::Node;
use crate::registry::ObjectView;
use crate::trace::span;

mod map;
use map::OpenMap;

/// Counters and memory of a deferred context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeferredStats {
    /// Context-local handles open in the current recording.
    pub open_handles: usize,
    /// Operations in the current recording.
    pub operations: usize,
    /// Bytes the current recording counts against the budget.
    pub recorded_bytes: usize,
    /// Bytes the context keeps for recording (capacities, arena chunks, bucket pages).
    pub retained_bytes: usize,
    /// Command lists finished.
    pub finished: u64,
    /// Recordings abandoned.
    pub abandoned: u64,
    /// Context-local removals after running out of memory (R-E3).
    pub removals: u64,
    /// Lists made from recycled memory (RecycleCreateCommandList, R-R6).
    pub recycled: u64,
    /// Lists made from fresh memory (CreateCommandList).
    pub created: u64,
    /// Destroyed lists recycled and ready for reuse.
    pub cached_lists: usize,
    /// Destroyed lists waiting for the buffer that executed them (submission clock).
    pub waiting_lists: usize,
}

/// Where a deferred context is in its life (R-E3, R-R3); [`DeferredContext::mode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeferredMode {
    /// Calls are checked and recorded.
    Recording,
    /// Removed locally after running out of memory (R-E3), or after the driver handed out
    /// Map memory of the wrong length (its recording cannot be trusted): calls are accepted
    /// and do nothing, Map hands out scratch memory; the next [`DeferredContext::finish`]
    /// returns [`Error::OutOfMemory`] (or [`DeferredContext::abandon`] succeeds) and the
    /// context records again.
    Removed,
    /// The driver's state of the context could not be made again after a Finish or an
    /// Abandon (its recycle-create and create both failed, or panicked, R-R3): each call
    /// that records, a Map of DISCARD or NO_OVERWRITE, and Finish fail with
    /// [`Error::OutOfMemory`] before their other checks (but the device's removal,
    /// [`Error::DeviceRemoved`], R-D3), which removes the context; the removal makes the
    /// state again, and the context records after the next Finish or Abandon. An Abandon
    /// makes the state again itself.
    StateLost,
}

/// Whether calls are recorded: the one state every recorded call tests as it begins.
///
/// Invariant: while calls are [`Calls::Recorded`], the driver's state (`dc`) is not lost,
/// so the routes of recorded calls reach it without that case ([`DriverSide::recording`]).
/// The state is lost only in `renew`, which keeps the invariant around it (also when its
/// create hook panics), and as the context ends (its drop, after which no call comes);
/// calls resume after a removal through `resume_calls`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Calls {
    Recorded,
    /// Removed locally (R-E3): see [`DeferredMode::Removed`].
    Removed,
    /// Not removed, but the driver's state is lost (R-R3): see [`DeferredMode::StateLost`].
    StateLost,
}

/// A deferred context: records commands on its own thread for the immediate context to
/// execute later (R-C1..R-C4, R-E2, R-E3, R-H1..R-H5).
///
/// `Send` but not `Sync`: one thread at a time (R-T1). Each entry point opens the
/// context-local handles of the objects it names on their first use in the recording
/// (`cls`), then appends a plain value to the recording (`record`).
///
/// Each call checks once, as it begins, that the device is not removed or destroyed
/// (R-D3), not again for each object it names. [`ImmediateContext::destroy_device`]
/// refuses while deferred contexts live; dropping the immediate context destroys the device
/// regardless, so an embedder drops it only once no other thread records.
///
/// [`ImmediateContext::destroy_device`]: crate::ImmediateContext::destroy_device
///
/// # Errors (R-E2, R-E3)
/// Errors are returned and reported on this context's sink
/// ([`crate::ContextId::Deferred`]). When the context runs out of memory (its budget, or an
/// allocation), it is removed locally: the partial list is dropped, its handles closed, the
/// amortised-processing callback is pumped (R-A2), later calls are accepted and do nothing,
/// and [`DeferredContext::finish`] returns [`Error::OutOfMemory`]; after that the context
/// records normally again. Nothing else is affected.
///
/// # Finish (R-C1, R-C4, R-R7)
/// Still-begun queries are ended and still-mapped resources unmapped; the command list is
/// created while state-refresh queries still answer the context's bindings; then the
/// bindings are cleared, every context-local handle is closed (dependents first) and the
/// driver's context state is recycled (or destroyed and created again).
///
/// Recording on a thread of its own (`Send`), the list back to the immediate context's:
///
/// ```
/// # #[cfg(feature = "soft")] {
/// use cmdlist::soft::null::{copy_of, null_device};
/// use cmdlist::DeviceConfig;
///
/// let (device, mut ic) = null_device(DeviceConfig::default())?;
/// let copy = copy_of(&device);
/// let mut dc = device.create_deferred_context()?;
/// let (dc, list) = std::thread::spawn(move || -> cmdlist::Result<_> {
///     dc.command(copy)?;
///     let list = dc.finish()?; // handles closed, state cleared (R-C1)
///     Ok((dc, list))
/// })
/// .join()
/// .unwrap()?;
/// assert_eq!(dc.stats().open_handles, 0);
/// ic.execute_command_list(&list)?;
/// # }
/// # Ok::<(), cmdlist::Error>(())
/// ```
pub struct DeferredContext<D: Driver, K: Kernel> {
    device: Device<D, K>,
    id: DeferredId,
    /// The driver's state: none when emulated, lost after R-R3 ([`DeferredMode::StateLost`]).
    dc: DriverSide<D::Deferred>,
    cls: ClsTable<D>,
    /// Boxed, so that Finish hands it to the list by swapping pointers; padded, so that two
    /// contexts' recordings, allocated one after the other, never share a cache line while
    /// two threads record.
    rec: Box<CachePadded<ListRecording<D, K>>>,
    bindings: Bindings,
    /// Resources mapped and not yet unmapped, with their payload, and queries begun and not
    /// yet ended (R-C4).
    open: MappedAndBegun<OpenMap>,
    calls: Calls,
    /// Whether the engine keeps the recording's operations to replay them (the device's
    /// [`ListMode::replays`](crate::ListMode::replays), kept here: asked at every recorded
    /// call).
    replays: bool,
    /// The device's [`DeviceConfig::deferred_budget`](crate::DeviceConfig::deferred_budget)
    /// and [`DeviceConfig::replay_limit`](crate::DeviceConfig::replay_limit), kept here:
    /// checked at every recorded call (R-E3).
    budget: usize,
    replay_limit: u64,
    /// What more the recording may take without the budget's sums being made again (R-E3):
    /// at most the bytes left in the budget, and at most the operations left under the replay
    /// limit at [`OPERATION_BYTES`] each, counting the operations open Maps and begun queries
    /// owe as recorded. Each reservation takes at least what it adds to either sum, so the
    /// credit never exceeds the true room, and a credit above 0 answers as the sums would;
    /// it is made again when it runs out (0 at first).
    credit: usize,
    /// Where writes through a Map go while the context is removed.
    sink: Vec<u8>,
    /// The bindings a restoring execute binds again (capacity kept).
    restore: Vec<(BindPoint, AnyHandle)>,
    /// The memory of this context's destroyed lists, until their next use.
    lists: ListPool<D, K>,
    /// The device's trim epoch this context last trimmed at (R-A1).
    trim_seen: u64,
    stats: DeferredStats,
    /// The `record` span of the list being recorded, from its first call to its Finish.
    #[cfg(feature = "trace")]
    recording: Option<tracing::Span>,
    /// The number of the list the current (or last) Finish makes.
    #[cfg(feature = "trace")]
    finishing: u64,
    /// This context's stream in the device's capture (feature `capture`).
    #[cfg(feature = "capture")]
    capture: Option<crate::capture::context::ContextCapture>,
    _not_sync: PhantomData<Cell<()>>,
}

/// The context's number, mode and counters, not the driver's state.
impl<D: Driver, K: Kernel> core::fmt::Debug for DeferredContext<D, K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DeferredContext")
            .field("id", &self.id)
            .field("mode", &self.mode())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<D: Driver, K: Kernel> Device<D, K> {
    /// Creates a deferred context (free-threaded, R-F1), to be driven by one thread at a
    /// time. Its memory budget is [`crate::DeviceConfig::deferred_budget`].
    pub fn create_deferred_context(&self) -> Result<DeferredContext<D, K>> {
        #[cfg_attr(not(feature = "capture"), allow(unused_mut))]
        let mut result = self.create_deferred_inner();
        #[cfg(feature = "capture")]
        if let Some(sink) = self.capture_sink() {
            let stream = match &mut result {
                Ok(dc) => {
                    let stream = sink.new_stream();
                    let capture =
                        crate::capture::context::ContextCapture::new(sink.clone(), stream);
                    dc.capture = Some(capture);
                    stream
                }
                Err(_) => 0,
            };
            let call = crate::capture::Call::CreateDeferred(stream);
            sink.device_call(call, (&result).into());
        }
        self.report(ContextId::Immediate, result)
    }

    fn create_deferred_inner(&self) -> Result<DeferredContext<D, K>> {
        if self.is_removed() {
            return Err(Error::DeviceRemoved);
        }
        let s = &*self.shared;
        let id = s.next_deferred_id();
        let cls = ClsTable::new(s.handle_sizes())?;
        let dc = match s.emulates_lists() {
            true => DriverSide::Emulated,
            false => DriverSide::Native(s.driver().create_deferred_context(id)?),
        };
        s.deferred_alive();
        Ok(DeferredContext {
            device: self.clone(),
            id,
            dc,
            cls,
            rec: Box::new(CachePadded::new(Recording::default())),
            bindings: Bindings::default(),
            open: MappedAndBegun::default(),
            calls: Calls::Recorded,
            replays: s.mode().replays(),
            budget: s.config().deferred_budget,
            replay_limit: s.config().replay_limit,
            credit: 0,
            sink: Vec::new(),
            restore: Vec::new(),
            lists: ListPool::new(),
            trim_seen: s.trim_epoch(),
            stats: DeferredStats::default(),
            #[cfg(feature = "trace")]
            recording: None,
            #[cfg(feature = "trace")]
            finishing: 0,
            #[cfg(feature = "capture")]
            capture: None,
            _not_sync: PhantomData,
        })
    }
}

/// A zeroed block of `len` bytes for handle memory the driver sized, allocated fallibly:
/// an absurd size is the driver's error (`InvalidArg`, R-H4), memory exhaustion is
/// `OutOfMemory`, never an abort.
fn zeroed(len: usize) -> Result<Box<[u8]>> {
    if len > crate::handle::HandleSizeTable::MAX_HANDLE_SIZE {
        return Err(Error::InvalidArg);
    }
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(len)
        .map_err(|_| Error::OutOfMemory)?;
    bytes.resize(len, 0);
    Ok(bytes.into_boxed_slice())
}

impl<D: Driver, K: Kernel> DeferredContext<D, K> {
    /// The handle table and what opening and closing handles needs from the context: split
    /// borrows of one `&mut self`, for a recorded call (which has its driver state, `Calls`'
    /// invariant). Emulated, handles only hold.
    #[inline]
    fn cls_parts<'a>(&'a mut self, guard: &'a Guard) -> (&'a mut ClsTable<D>, ClsCtx<'a, D>) {
        let s = &*self.device.shared;
        let ctx = ClsCtx {
            driver: s.driver(),
            dc: self.dc.recording(),
            registry: s.registry(),
            guard,
        };
        (&mut self.cls, ctx)
    }

    /// This context's number, as the driver's hooks and, in a [`ContextId::Deferred`],
    /// errors and kernel callbacks name it (R-E2, R-A2).
    pub fn id(&self) -> DeferredId {
        self.id
    }

    /// The device.
    pub fn device(&self) -> &Device<D, K> {
        &self.device
    }

    /// The driver's state of this context.
    pub fn driver_state(&self) -> Option<&D::Deferred> {
        self.dc.native()
    }

    /// Where the context is: recording, removed after running out of memory (R-E3), or
    /// without driver state (R-R3).
    pub fn mode(&self) -> DeferredMode {
        match self.calls {
            Calls::Recorded => DeferredMode::Recording,
            Calls::Removed => DeferredMode::Removed,
            Calls::StateLost => DeferredMode::StateLost,
        }
    }

    /// Whether the context was removed locally after running out of memory (R-E3):
    /// `mode() == DeferredMode::Removed`. It records again after the next
    /// [`DeferredContext::finish`].
    pub fn is_removed(&self) -> bool {
        self.calls == Calls::Removed
    }

    /// The state-refresh query: what is bound at `point` in the recording (R-C1).
    pub fn binding(&self, point: BindPoint) -> Option<AnyHandle> {
        self.bindings.get(point)
    }

    /// Every binding of the recording, sorted by point (as
    /// [`crate::ImmediateContext::bindings`]).
    pub fn bindings(&self) -> impl Iterator<Item = (BindPoint, AnyHandle)> + '_ {
        self.bindings.iter()
    }

    /// Counters and memory.
    pub fn stats(&self) -> DeferredStats {
        DeferredStats {
            open_handles: self.cls.len(),
            operations: self.rec.operations,
            recorded_bytes: self.rec.bytes(),
            retained_bytes: self.rec.retained_bytes()
                + self.cls.retained_bytes()
                + self.lists.retained_bytes()
                + self.bindings.retained_bytes(),
            cached_lists: self.lists.cached(),
            waiting_lists: self.lists.waiting(),
            ..self.stats
        }
    }

    fn check_alive(&self) -> Result<()> {
        if self.device.is_removed() {
            Err(Error::DeviceRemoved)
        } else {
            Ok(())
        }
    }

    /// Fails with out-of-memory if one more operation of `more` bytes (payload included)
    /// would take the recording over budget or past the replay limit (R-E3):
    /// [`DeferredContext::reserve_for`] of one operation, for the calls that record one.
    #[inline(always)]
    fn reserve(&mut self, more: usize) -> Result<()> {
        self.reserve_for(more, 1, 0)
    }

    /// Fails with out-of-memory unless `ops` more operations of `bytes` in all, one of which
    /// may replay `nested` more (a list executed), fit the budget and the replay limit
    /// (R-E3): a call that records several operations checks them all before recording any.
    /// The operations the open Maps and begun queries owe count as recorded, so the Unmaps
    /// and Ends that Finish adds never fail.
    ///
    /// Paid from [`DeferredContext::credit`] where it covers the reservation: a subtraction,
    /// the budget's sums made again only when the credit runs out.
    #[inline(always)]
    fn reserve_for(&mut self, bytes: usize, ops: usize, nested: u64) -> Result<()> {
        // In the credit's unit: what the reservation may take from either limit, at most
        // (its bytes, or its operations replayed at OPERATION_BYTES each, whichever is more),
        // and at least 1: a credit left is never 0 where one was paid, so a credit of 0
        // always goes to the sums.
        // (Inlined into each caller, whose `ops` and `nested` are constants: the sum folds.)
        let replays = (ops as u64).saturating_add(nested);
        let replays_cost =
            usize::try_from(replays).map_or(usize::MAX, |r| r.saturating_mul(OPERATION_BYTES));
        let cost = bytes.max(replays_cost).max(1);
        match self.credit.checked_sub(cost) {
            Some(left) => {
                self.credit = left;
                Ok(())
            }
            None => self.reserve_exactly(bytes, replays, cost),
        }
    }

    /// [`DeferredContext::reserve_for`] where the credit does not cover it: R-E3's sums,
    /// made again, and the credit they leave once this reservation took its `cost`.
    ///
    /// The cost, not the bytes: a call may owe more than it reserves (a Map(NO_OVERWRITE)
    /// reserves no bytes, and its open Map counts its Unmap's [`OPERATION_BYTES`] as owed),
    /// and the cost covers that, so the credit never exceeds what the sums would allow next.
    #[cold]
    #[inline(never)]
    fn reserve_exactly(&mut self, bytes: usize, replays: u64, cost: usize) -> Result<()> {
        let owed = self.open.owed();
        // The recording's bytes and those its open Maps and Begins owe were each checked
        // against the budget when recorded, so their sum cannot overflow; what comes from
        // the caller saturates.
        let used = self.rec.bytes() + owed * OPERATION_BYTES;
        let replayed = self.rec.replayed_ops().saturating_add(owed as u64);
        if used.saturating_add(bytes) > self.budget
            || replayed.saturating_add(replays) > self.replay_limit
        {
            return Err(Error::OutOfMemory);
        }
        // Both subtractions are within their limits: checked just above.
        let bytes_left = (self.budget - used).saturating_sub(cost);
        let replays_left =
            (self.replay_limit - replayed - replays).saturating_mul(OPERATION_BYTES as u64);
        self.credit = bytes_left.min(usize::try_from(replays_left).unwrap_or(usize::MAX));
        Ok(())
    }

    /// Appends an operation: counted always, kept where the engine replays lists (not where
    /// the driver builds them). A recording's first kept operation gets room for exactly one,
    /// so a one-command list is one operation big (memory proportional to content); later
    /// ones grow the usual way.
    #[inline]
    fn push_op(&mut self, op: Recorded<D::Command>) {
        self.rec.operations += 1;
        if !self.replays {
            return;
        }
        let ops = &mut self.rec.ops;
        if ops.len() == ops.capacity() {
            Self::grow_ops(ops);
        }
        ops.push(op);
    }

    /// Room for one more operation in a full vector, out of line: exactly one in an empty
    /// one (a one-command list is one operation big), doubling otherwise, as `push` would.
    #[cold]
    #[inline(never)]
    fn grow_ops(ops: &mut Vec<Recorded<D::Command>>) {
        match ops.capacity() {
            0 => ops.reserve_exact(1),
            _ => ops.reserve(1),
        }
    }

    fn reserve_op(&mut self) -> Result<()> {
        self.reserve(OPERATION_BYTES)
    }

    /// Every recording entry point's frame (R-E2, R-E3): a removed context accepts the call
    /// and records nothing; otherwise `work` runs once the device is known alive, and a
    /// failure is reported on this context's sink, out of memory removing the context
    /// locally.
    #[inline(always)]
    fn record(&mut self, work: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        if self.calls != Calls::Recorded {
            return self.unrecorded();
        }
        let _recording = self.trace_recording();
        let result = self.check_alive().and_then(|()| work(self));
        self.settle(result)
    }

    /// A call of a context whose calls are not recorded: accepted and done nothing where
    /// it is removed (R-E3); without driver state (R-R3), out of memory, which removes it,
    /// unless the device is removed (R-D3).
    #[cold]
    #[inline(never)]
    fn unrecorded(&mut self) -> Result<()> {
        match self.calls {
            Calls::Removed => Ok(()),
            Calls::Recorded | Calls::StateLost => self.settle(Err(self.state_lost())),
        }
    }

    /// What a call of a context without driver state answers (R-R3): out of memory, or
    /// the device's removal (R-D3), which comes first.
    fn state_lost(&self) -> Error {
        self.check_alive().err().unwrap_or(Error::OutOfMemory)
    }

    /// Calls are recorded again (a Finish or an Abandon ended a removal): unless the
    /// driver's state is lost, which keeps them out of the recording (`Calls`' invariant).
    fn resume_calls(&mut self) {
        self.calls = match self.dc.is_lost() {
            true => Calls::StateLost,
            false => Calls::Recorded,
        };
    }

    /// Opens the `record` span at the first call after a Finish, and enters it for this call
    /// (feature `trace`): profilers that time entered spans (Tracy) show each call, those that
    /// time a span's life show the whole recording.
    #[inline(always)]
    #[must_use]
    fn trace_recording(&mut self) -> impl Sized {
        #[cfg(feature = "trace")]
        if self.recording.is_none() {
            // No parent: the span outlives whatever span the application is in.
            self.recording = Some(tracing::info_span!(
                target: crate::trace::TARGET,
                parent: None,
                "record",
                context = self.id.get(),
                list = tracing::field::Empty
            ));
        }
        #[cfg(feature = "trace")]
        return self.recording.clone().map(tracing::Span::entered);
        #[cfg(not(feature = "trace"))]
        return crate::trace::NoSpan;
    }

    /// Reports a failed call on this context's sink (R-E2); out of memory removes the
    /// context locally (R-E3).
    #[inline]
    fn settle<T>(&mut self, result: Result<T>) -> Result<T> {
        result.map_err(|error| self.refused(error))
    }

    /// [`DeferredContext::settle`]'s failure, kept out of line: the recording path is the
    /// success path. An application error of a call that raced device destruction (an
    /// object the drain destroyed looks stale) is [`Error::DeviceRemoved`]: the removal is
    /// the call's answer, as it is for every call that begins after it (R-D3).
    #[cold]
    #[inline(never)]
    fn refused(&mut self, error: Error) -> Error {
        let error = match error {
            Error::Application(_) if self.device.is_removed() => Error::DeviceRemoved,
            error => error,
        };
        self.device
            .shared
            .kernel()
            .set_error(ContextId::Deferred(self.id), error);
        if error == Error::OutOfMemory {
            self.remove_locally();
        }
        error
    }

    /// Context-local removal (R-E3): the partial list is abandoned as after any error
    /// (R-C2: abandon hook, bindings undone, handles closed, context recycled), the pools are
    /// trimmed and amortised processing pumped (R-A2); later calls do nothing until Finish.
    fn remove_locally(&mut self) {
        // The abandon sequence cannot fail but for the context's recycle-create (R-R3), which
        // leaves the context without driver state; its next call runs out of memory again.
        let _ = self.abandon_sequence();
        self.calls = Calls::Removed;
        self.stats.removals += 1;
        self.trim_pools();
        let s = &*self.device.shared;
        s.kernel()
            .perform_amortized_processing(ContextId::Deferred(self.id));
    }

    /// Drops the recording and closes every handle, releasing what they held.
    ///
    /// The lists the recording executes are given up last, after the handles are closed: one
    /// whose last owner this was ends then (its list-end hooks run on this thread, after the
    /// context's own sequence).
    fn unload(&mut self) {
        // The recording's memory goes: so do the bytes of its Maps still open.
        #[cfg(feature = "capture")]
        if let Some(capture) = &mut self.capture {
            capture.forget_maps();
        }
        let mut executed = core::mem::take(&mut self.rec.lists);
        self.rec.clear();
        self.open.clear();
        self.bindings.clear();
        let s = &*self.device.shared;
        if let Ok(dc) = self.dc.for_hooks() {
            self.cls.close_all(s.driver(), dc, StateView::empty(), None);
        }
        executed.clear();
        self.rec.lists = executed; // its capacity kept
    }

    /// The driver hears `call` on this thread (R-T1), with the recording's context-local
    /// handles; emulated, nobody does. An error refuses the call.
    #[inline]
    fn hear(&mut self, call: DeferredCall<'_, D>) -> Result<()> {
        let s = &*self.device.shared;
        let Some(dc) = self.dc.recording() else {
            return Ok(());
        };
        let mut locals = LocalHandles::new(&mut self.cls, StateView::of(&self.bindings));
        s.driver().record_deferred(dc, call, &mut locals)
    }

    /// Uses `handle`, which the application named, in the recording (R-H1, R-H3). An object
    /// already open in this context is found with one indexed load and needs no pin (its
    /// handle holds it, R-H2); only a first use looks the object up in the registry, under
    /// `guard`, pinned at the call's first miss and kept for the call's other objects.
    #[inline]
    fn use_object(&mut self, handle: AnyHandle, guard: &mut Option<Guard>) -> Result<()> {
        let open = self.cls.find_open(handle);
        self.use_checked(handle, open, guard)
    }

    /// [`DeferredContext::use_object`] for an object not open in this recording yet: its
    /// handle is opened (R-H1, R-H3) under `guard`, pinned now if the call has not pinned.
    #[inline(never)]
    fn use_first(&mut self, handle: AnyHandle, guard: &mut Option<Guard>) -> Result<()> {
        let s = &*self.device.shared;
        let mut ctx = ClsCtx {
            driver: s.driver(),
            dc: self.dc.recording(),
            registry: s.registry(),
            guard: guard.get_or_insert_with(epoch::pin),
        };
        self.cls.use_first(&mut ctx, handle)
    }

    /// Uses every object `command` names, in its order (R-H1, R-H3). A first pass uses those
    /// open in this context already, without a pin, and stops at the first that is not; from
    /// there a second pass, under one pin, opens it and uses or opens the rest. With nothing
    /// open, the second pass is the only one.
    #[inline]
    fn use_objects_of(&mut self, command: &D::Command) -> Result<()> {
        if self.cls.len() == 0 {
            // Nothing open yet (the recording's first call): every object is a first use.
            return self.use_rest_of(command, 0);
        }
        let driver = self.device.shared.driver();
        let mut dc = self.dc.recording();
        let cls = &mut self.cls;
        let mut used = 0usize;
        // The first pass's end: an object not open here, or one no longer live.
        let mut stop: Option<Option<Error>> = None;
        command.for_each_object(&mut |h| {
            if stop.is_some() {
                return;
            }
            let Some(at) = cls.find_open(h) else {
                stop = Some(None);
                return;
            };
            match cls.use_live_at(driver, dc.as_deref_mut(), at) {
                Ok(()) => used += 1,
                Err(e) => stop = Some(Some(e)),
            }
        });
        match stop {
            None => Ok(()),
            Some(None) => self.use_rest_of(command, used),
            Some(Some(e)) => Err(e),
        }
    }

    /// The second pass of [`DeferredContext::use_objects_of`]: uses the objects of `command`
    /// after the first `skip`, opening those not open yet, under one pin.
    #[inline]
    fn use_rest_of(&mut self, command: &D::Command, skip: usize) -> Result<()> {
        let guard = epoch::pin();
        let (cls, mut ctx) = self.cls_parts(&guard);
        let mut seen = 0usize;
        let mut failed = None;
        command.for_each_object(&mut |h| {
            seen += 1;
            if seen > skip && failed.is_none() {
                // With nothing open (a recording's first objects), no lookup can find it.
                failed = match cls.len() {
                    0 => cls.use_first(&mut ctx, h),
                    _ => cls.use_object(&mut ctx, h),
                }
                .err();
            }
        });
        failed.map_or(Ok(()), Err)
    }

    /// Runs `check` on the live object `handle` names, as the registry's typed lookup would
    /// find it, and returns its answer with where the object's handle is open in this
    /// context, if it is: an object open here is found without a pin (its handle holds it,
    /// R-H2); any other is looked up in the registry under `guard` (pinned now, kept for the
    /// call's later lookups).
    #[inline]
    fn with_live<T: ObjectKind, R>(
        &self,
        handle: Handle<T>,
        guard: &mut Option<Guard>,
        check: impl FnOnce(ObjectView<'_, D>) -> Result<R>,
    ) -> Result<(R, Option<usize>)> {
        match self.cls.find_open(handle.any()) {
            Some(at) => {
                let view = self.cls.view_at(at);
                // The registry's checks, in its order, but for the tag and the generation,
                // which the open handle matched, and the device's removal, which the call
                // checked when it began.
                if !T::accepts(view.ty()) {
                    return Err(AppError::WrongType.into());
                }
                view.entry().check_live()?;
                Ok((check(view)?, Some(at)))
            }
            None => {
                let guard = guard.get_or_insert_with(epoch::pin);
                Ok((
                    check(self.device.shared.registry().live(handle, guard)?)?,
                    None,
                ))
            }
        }
    }

    /// Uses `handle`, found at `open` in this context's handle table (by
    /// [`DeferredContext::with_live`] or [`DeferredContext::use_object`]), or opens it
    /// (`None`: not open yet), without a second lookup.
    #[inline]
    fn use_checked(
        &mut self,
        handle: AnyHandle,
        open: Option<usize>,
        guard: &mut Option<Guard>,
    ) -> Result<()> {
        match open {
            Some(at) => {
                let driver = self.device.shared.driver();
                self.cls.use_live_at(driver, self.dc.recording(), at)
            }
            None => self.use_first(handle, guard),
        }
    }

    /// Records a driver-defined command; opens the context-local handles of the objects it
    /// names on their first use (R-H1, R-H3).
    pub fn command(&mut self, command: D::Command) -> Result<()> {
        captured!(
            self,
            Call::Command(&command),
            self.record(|dc| {
                dc.reserve_op()?;
                dc.use_objects_of(&command)?;
                dc.hear(DeferredCall::Command(&command))?;
                dc.push_op(Recorded::Command(command));
                Ok(())
            })
        )
    }

    /// Records UpdateSubresource: `data` (copied into the recording's arena) written at byte
    /// `offset` of `resource`.
    pub fn update(&mut self, resource: Handle<Resource>, offset: u64, data: &[u8]) -> Result<()> {
        captured!(
            self,
            Call::Update {
                resource,
                offset,
                data,
            },
            self.update_inner(resource, offset, data)
        )
    }

    fn update_inner(&mut self, resource: Handle<Resource>, offset: u64, data: &[u8]) -> Result<()> {
        self.record(|dc| {
            dc.reserve(OPERATION_BYTES.saturating_add(data.len()))?;
            let mut guard = None;
            let ((), open) = dc.with_live(resource, &mut guard, |view| {
                view.check_write(offset, data.len())
            })?;
            dc.use_checked(resource.any(), open, &mut guard)?;
            drop(guard);
            // Copied before the driver hears the update, so that a copy that runs out of
            // memory refuses a call nobody heard. Refused by the driver, the copy stays in
            // the arena until the recording ends, counted against the budget.
            let payload = match dc.replays {
                true => {
                    let payload = dc.rec.payloads.copy(data)?;
                    dc.rec.payload_bytes += data.len();
                    Some(payload)
                }
                false => None,
            };
            dc.hear(DeferredCall::Update {
                resource,
                offset,
                data,
            })?;
            match payload {
                Some(payload) => dc.push_op(Recorded::Update {
                    resource,
                    offset,
                    payload,
                }),
                None => {
                    dc.rec.payload_bytes += data.len();
                    dc.rec.operations += 1;
                }
            }
            Ok(())
        })
    }

    fn resource_size(&self, resource: Handle<Resource>) -> Result<u64> {
        let guard = epoch::pin();
        Ok(self
            .device
            .shared
            .registry()
            .live(resource, &guard)?
            .byte_size())
    }

    /// Binds `object` at `point` (or unbinds with `None`).
    pub fn bind(&mut self, point: BindPoint, object: Option<AnyHandle>) -> Result<()> {
        captured!(
            self,
            Call::Bind { point, object },
            self.record(|dc| {
                dc.reserve_op()?;
                if let Some(h) = object {
                    dc.use_object(h, &mut None)?;
                }
                dc.record_bind(point, object)
            })
        )
    }

    /// The bind itself, once its object's handle is open: the state-refresh query answers
    /// the new binding while the driver hears it (as during the DDI's SetX); a refused or
    /// panicking bind leaves the old one.
    #[inline(always)]
    fn record_bind(&mut self, point: BindPoint, object: Option<AnyHandle>) -> Result<()> {
        let old = self.bindings.replace(point, object);
        let mut dc = scopeguard::guard(&mut *self, |dc| dc.bindings.set(point, old));
        dc.hear(DeferredCall::Bind { point, object })?;
        ScopeGuard::into_inner(dc).push_op(Recorded::Bind { point, object });
        Ok(())
    }

    /// Records the Begin of a query.
    pub fn begin_query(&mut self, query: Handle<Query>) -> Result<()> {
        captured!(
            self,
            Call::BeginQuery(query),
            self.record(|dc| dc.query(query, true))
        )
    }

    /// Records the End of a query.
    pub fn end_query(&mut self, query: Handle<Query>) -> Result<()> {
        captured!(
            self,
            Call::EndQuery(query),
            self.record(|dc| dc.query(query, false))
        )
    }

    fn query(&mut self, query: Handle<Query>, begin: bool) -> Result<()> {
        // A Begin reserves its End too (Finish adds it if the application does not, R-C4),
        // as a Map reserves its Unmap; the End of a begun query was reserved by its Begin.
        let ops = match (begin, self.open.is_begun(query)) {
            (true, _) => 2,
            (false, true) => 0,
            (false, false) => 1,
        };
        self.reserve_for(OPERATION_BYTES * ops, ops, 0)?;
        self.open.check_query(query, begin)?;
        let mut guard = None;
        // Typed: a handle of another kind passed as a query is refused (R-E1).
        let ((), open) = self.with_live(query, &mut guard, |_| Ok(()))?;
        self.use_checked(query.any(), open, &mut guard)?;
        drop(guard);
        self.hear(if begin {
            DeferredCall::BeginQuery(query)
        } else {
            DeferredCall::EndQuery(query)
        })?;
        self.open.query(query, begin);
        note_in_set(&mut self.rec.queries, query);
        self.push_op(if begin {
            Recorded::BeginQuery(query)
        } else {
            Recorded::EndQuery(query)
        });
        Ok(())
    }

    /// CommandListExecute on this context (R-C3): records the execution of `list`, a finished
    /// list of this device (of any of its deferred contexts, this one's earlier lists
    /// included). The driver hears of it now, on this thread
    /// ([`Driver::execute_command_list_deferred`]), with the state-refresh queries still
    /// answering this context's bindings; from the next call on, nothing is bound, and the
    /// recording carries that clear-state. When the recording's list is executed on the
    /// immediate context, `list` runs there in place, from the clear state and followed by a
    /// clear-state: its operations replayed where the engine replays lists, the buffer the
    /// driver chained at this call where the driver builds them
    /// ([`ListMode::DriverBuilt`](crate::ListMode::DriverBuilt)).
    ///
    /// The recording holds `list` (one operation and one owner, whatever the list's size): it
    /// stays executable, its objects alive and its memory unrecycled while a list that
    /// executes it can still run, even after the application dropped it.
    ///
    /// Checked first (R-C4, R-R8): the list belongs to this device; neither it nor a list
    /// it executes recorded a Map of a resource mapped on this context, or begins or ends a
    /// query begun on this context. Out of memory (R-E3) when the operation does not fit the
    /// budget, or when executing the recording would replay more operations than
    /// [`crate::DeviceConfig::replay_limit`], nested lists included.
    pub fn execute_command_list(&mut self, list: &CommandList<D, K>) -> Result<()> {
        captured!(
            self,
            list.capture_execute_call(false),
            self.record(|dc| {
                let _span = span!("execute", list = list.data().trace_id);
                dc.execute_list(list)
            })
        )
    }

    /// ExecuteCommandList with RestoreContextState (R-C3): records the execution of `list`
    /// as [`DeferredContext::execute_command_list`] does, then binds again everything this
    /// context had bound before it, as the runtime re-applies the executing context's state:
    /// each re-bind is recorded and heard by the driver as a bind. Nested lists included: a
    /// list that executes another this way keeps its own bindings in force after it.
    ///
    /// The budget and the replay limit are checked for the execute and every re-bind before
    /// anything is recorded (R-E3). A re-bind the driver refuses fails the call after the
    /// execute was recorded, as the runtime's separate calls would: the execute and the
    /// re-binds before it stay.
    pub fn execute_command_list_restoring(&mut self, list: &CommandList<D, K>) -> Result<()> {
        captured!(
            self,
            list.capture_execute_call(true),
            self.execute_restoring_inner(list)
        )
    }

    fn execute_restoring_inner(&mut self, list: &CommandList<D, K>) -> Result<()> {
        self.record(|dc| {
            let _span = span!("execute", list = list.data().trace_id);
            let mut saved = core::mem::take(&mut dc.restore);
            saved.clear();
            saved.extend(dc.bindings.iter());
            let nested = list.data().body.rec.replayed_ops();
            let ops = 1 + saved.len();
            let mut result = dc.reserve_for(OPERATION_BYTES.saturating_mul(ops), ops, nested);
            if result.is_ok() {
                result = dc.execute_list(list);
            }
            if result.is_ok() {
                for &(point, object) in &saved {
                    result = dc.rebind(point, object);
                    if result.is_err() {
                        break;
                    }
                }
            }
            dc.restore = saved;
            result
        })
    }

    /// Binds `object` at `point` again after a restoring execute: its context-local handle
    /// is open (it was bound in this recording) and holds it, so it is used as it is, even if
    /// the application destroyed it meanwhile (the binding kept it, as D3D's references do).
    fn rebind(&mut self, point: BindPoint, object: AnyHandle) -> Result<()> {
        self.reserve_op()?;
        {
            let guard = epoch::pin();
            let (cls, mut ctx) = self.cls_parts(&guard);
            cls.use_open(&mut ctx, object)?;
        }
        self.record_bind(point, Some(object))
    }

    fn execute_list(&mut self, list: &CommandList<D, K>) -> Result<()> {
        let dc = self;
        if !Arc::ptr_eq(&list.device().shared, &dc.device.shared) {
            return Err(AppError::CommandListNotExecutable.into());
        }
        let body = &list.data().body;
        let inner = &body.rec;
        // This operation, plus everything the inner list replays.
        dc.reserve_for(OPERATION_BYTES, 1, inner.replayed_ops())?;
        let index = u32::try_from(dc.rec.lists.len()).map_err(|_| Error::OutOfMemory)?;
        dc.open.check_list(&inner.maps, &inner.queries)?;
        let s = &*dc.device.shared;
        if let Some(driver_dc) = dc.dc.recording() {
            s.driver().execute_command_list_deferred(
                driver_dc,
                &body.private,
                StateView::of(&dc.bindings),
            )?;
        }
        dc.rec.lists.push(list.share());
        dc.push_op(Recorded::ExecuteList(index));
        dc.rec.nested_ops = dc.rec.nested_ops.saturating_add(inner.replayed_ops());
        // Its maps and queries become this recording's too (R-C4 at every depth).
        for &map in &inner.maps {
            note_in_set(&mut dc.rec.maps, map);
        }
        for &query in &inner.queries {
            note_in_set(&mut dc.rec.queries, query);
        }
        // R-C3: from the next call on, the state-refresh queries answer nothing bound.
        dc.bindings.clear();
        Ok(())
    }

    /// FinishCommandList with RestoreDeferredContextState (R-C5): [`DeferredContext::finish`],
    /// then everything the context had bound is bound again in the next recording, each
    /// heard by the driver as a bind (its handle opened first, R-H1), in every list mode, so
    /// the context records on with the state it had. A bound object the application
    /// destroyed meanwhile is bound again all the same: the binding kept it, as D3D's
    /// references do.
    ///
    /// The re-binds belong to the next recording: a re-bind that fails is reported as a call
    /// of that recording would be (R-E2; out of memory removes the context, R-E3, so that
    /// its next Finish answers it) and the binding is left out, while the list is returned
    /// all the same. When Finish itself fails, nothing is bound again (the recording was
    /// abandoned, R-C2).
    pub fn finish_restoring_state(&mut self) -> Result<CommandList<D, K>> {
        #[cfg(feature = "capture")]
        self.capture_begin(Call::Finish { restoring: true });
        let mut saved = core::mem::take(&mut self.restore);
        saved.clear();
        saved.extend(self.bindings.iter());
        let list = self.finish_list();
        if list.is_ok() {
            for &(point, object) in &saved {
                // Each a call of the next recording, settled as such; a failure leaves that
                // binding out and the others go on.
                let _ = self.record(|dc| dc.bind_held(point, object));
            }
        }
        self.restore = saved;
        #[cfg(feature = "capture")]
        self.capture_finished(&list);
        list
    }

    /// Binds `object` at `point` again after a Finish that restores the state (R-C5): the
    /// finished list holds it, so it is bound even if the application destroyed it.
    fn bind_held(&mut self, point: BindPoint, object: AnyHandle) -> Result<()> {
        self.reserve_op()?;
        {
            let guard = epoch::pin();
            let (cls, mut ctx) = self.cls_parts(&guard);
            cls.use_held(&mut ctx, object)?;
        }
        self.record_bind(point, Some(object))
    }

    /// FinishCommandList (R-C1, R-C4, R-R7). On success the context is ready to record the
    /// next list. After a context-local removal it returns [`Error::OutOfMemory`] once and
    /// the context records normally again (R-E3).
    ///
    /// Finish first ends the queries still begun and unmaps the resources still mapped
    /// (R-C4), each heard by the driver as a recorded call. If any step fails, or a hook
    /// panics, the recording is abandoned (R-C2) with everything it left open: none of its
    /// operations, Maps or queries reaches a later list, and the context records again (a
    /// panic goes on to the caller once the recording is abandoned).
    pub fn finish(&mut self) -> Result<CommandList<D, K>> {
        #[cfg(feature = "capture")]
        self.capture_begin(Call::Finish { restoring: false });
        let list = self.finish_list();
        #[cfg(feature = "capture")]
        self.capture_finished(&list);
        list
    }

    /// [`DeferredContext::finish`]'s work.
    fn finish_list(&mut self) -> Result<CommandList<D, K>> {
        if self.calls == Calls::Removed {
            self.resume_calls();
            return Err(Error::OutOfMemory);
        }
        // The recording's span ends where its Finish begins, both carrying the list's number.
        #[cfg(feature = "trace")]
        {
            self.finishing = crate::trace::next_list_id();
            if let Some(recording) = self.recording.take() {
                recording.record(crate::trace::LIST, self.finishing);
            }
        }
        let _span = span!("finish", context = self.id.get(), list = self.finishing);
        let result = match self.calls {
            Calls::Recorded => match catch_unwind(AssertUnwindSafe(|| self.finish_inner())) {
                Ok(result) => result,
                Err(panic) => {
                    self.abandon_after_panic();
                    resume_unwind(panic)
                }
            },
            // Without driver state (R-R3; a removed context answered above): no state to
            // finish a list with, out of memory, which removes the context and makes the
            // state again.
            Calls::StateLost | Calls::Removed => Err(self.state_lost()),
        };
        if let Err(error) = result {
            if error != Error::OutOfMemory {
                // R-C2: abandon after an error (out of memory abandons in `settle`).
                let _ = self.abandon_sequence();
            }
        }
        let result = self.settle(result);
        self.resume_calls();
        result
    }

    /// A hook panicked during Finish: the recording is abandoned as after an error (R-C2),
    /// with what it left open, before the panic goes on. The recording and its open Maps and
    /// queries go first, without a hook: a Map's memory is the recording's arena, which the
    /// clear frees, so no later Finish may find the Map still open (and none of the
    /// recording's operations may reach a later list) even if a hook of the abandon sequence
    /// panics too. The lists the recording executes are given up last, as in `unload`.
    fn abandon_after_panic(&mut self) {
        // Dropped when this returns or unwinds, after the sequence.
        let _executed = core::mem::take(&mut self.rec.lists);
        self.rec.clear();
        self.open.clear();
        let _ = self.abandon_sequence();
    }

    fn finish_inner(&mut self) -> Result<CommandList<D, K>> {
        self.check_alive()?;
        // R-C4: end what is still begun, unmap what is still mapped.
        // Each reserved by its Begin or Map.
        while let Some(query) = self.open.pop_begun() {
            self.hear(DeferredCall::EndQuery(query))?;
            self.push_op(Recorded::EndQuery(query));
        }
        while let Some((resource, map)) = self.open.pop_mapped() {
            self.record_unmap(resource, map)?;
        }
        // Noted unsorted while recording; sorted once, for the executes' R-C4 checks.
        self.rec.sort_sets();
        // R-R7: recycle destroyed lists, then (recycle-)create this one while state-refresh
        // queries still answer the context's bindings (R-C1).
        {
            let _span = span!("recycle_lists");
            self.recycle_destroyed();
        }
        // Until it is a `CommandList`, the list ends for good (its holds released,
        // DestroyCommandList) if a hook below panics.
        let mut node = scopeguard::guard_on_unwind(self.make_list()?, end_unfinished);
        // From here on, nothing is bound.
        self.bindings.clear();
        let s = &*self.device.shared;
        {
            let _span = span!("close_handles");
            let dc = self.dc.recording();
            let body = &mut node.value.body;
            body.held.clear();
            self.cls
                .close_all(s.driver(), dc, StateView::empty(), Some(&mut body.held));
            // The recording becomes the list's; the list's empty recording (its capacity
            // kept: cleared when the list was recycled, `ListPool::take_destroyed`) becomes
            // the context's next. Both are boxed: the swap moves two pointers.
            debug_assert!(body.rec.ops.is_empty() && body.rec.payload_bytes == 0);
            core::mem::swap(&mut self.rec, &mut body.rec);
        }
        node.value.stamp.reset();
        #[cfg(feature = "trace")]
        {
            node.value.trace_id = self.finishing;
        }
        // Named in the capture once the Finish succeeded (`capture_finished`).
        #[cfg(feature = "capture")]
        {
            node.value.capture_id = std::sync::OnceLock::new();
        }
        self.lists.made(&node);
        let list = CommandList::new(ScopeGuard::into_inner(node));
        {
            let _span = span!("renew_context");
            self.renew()?;
        }
        self.stats.finished += 1;
        if self.device.shared.trim_epoch() != self.trim_seen {
            self.trim_pools();
        }
        Ok(list)
    }

    /// R-R5: takes the context's whole lock-free list of destroyed lists at once and
    /// recycles each whose executing buffer has passed the clock; the rest wait. Part of a
    /// Finish of recorded calls, whose context has its driver state (`Calls`' invariant).
    fn recycle_destroyed(&mut self) {
        let s = &*self.device.shared;
        if !s.recycles() {
            return;
        }
        let mut dc = self.dc.recording();
        self.lists.take_destroyed(|node| {
            // Emulated: the engine's memory alone, no hook.
            if let Some(dc) = dc.as_deref_mut() {
                s.driver()
                    .recycle_command_list(dc, node.value.body.memory());
            }
        });
    }

    /// A list for this recording: recycled memory through RecycleCreateCommandList when
    /// some is ready (R-R6; out of memory falls back, R-R3), else CalcPrivateCommandListSize,
    /// CalcDeferredContextHandleSize(COMMANDLIST) and CreateCommandList. Part of a Finish of
    /// recorded calls, as [`DeferredContext::recycle_destroyed`].
    fn make_list(&mut self) -> Result<Box<ListNode<D, K>>> {
        let s = &*self.device.shared;
        let Some(dc) = self.dc.recording() else {
            // Emulated: the engine's memory alone, no hook.
            if let Some(node) = self.lists.pop_cached() {
                let _span = span!("recycle_create_list");
                self.stats.recycled += 1;
                return Ok(node);
            }
            let _span = span!("create_list");
            self.stats.created += 1;
            return Ok(self.new_node(Box::default(), Box::default(), ListState::Emulated));
        };
        let state = StateView::of(&self.bindings);
        if let Some(mut node) = self.lists.pop_cached() {
            let _span = span!("recycle_create_list");
            match s
                .driver()
                .recycle_create_command_list(dc, node.value.body.memory(), state)
            {
                Ok(()) => {
                    node.value.state = ListState::Live;
                    self.stats.recycled += 1;
                    return Ok(node);
                }
                Err(_) => release(node), // R-R3: a return value, never the error sink
            }
        }
        // R-R7: CalcPrivateCommandListSize, CreateCommandList, then
        // CalcDeferredContextHandleSize(COMMANDLIST).
        let _span = span!("create_list");
        let mut private = zeroed(s.driver().calc_private_command_list_size())?;
        s.driver().create_command_list(dc, &mut private, state)?;
        // Created: destroyed again if anything below fails or panics.
        let private = scopeguard::guard(private, |mut private| {
            s.driver().destroy_command_list(ListMemory {
                private: &mut private,
                local: &mut [],
            })
        });
        let local_size = s
            .driver()
            .calc_deferred_context_handle_size(HandleType::CommandList, None);
        let local = match s
            .handle_sizes()
            .contains(HandleType::CommandList, local_size)
        {
            true => zeroed(local_size)?,
            false => return Err(Error::InvalidArg), // R-H4
        };
        let private = ScopeGuard::into_inner(private);
        self.stats.created += 1;
        Ok(self.new_node(private, local, ListState::Live))
    }

    /// A new list node of this context, with its handle memory.
    fn new_node(
        &self,
        private: Box<[u8]>,
        local: Box<[u8]>,
        state: ListState,
    ) -> Box<ListNode<D, K>> {
        Node::new(ListData {
            device: self.device.clone(),
            home: Arc::clone(self.lists.home()),
            body: ListBody {
                rec: Box::new(CachePadded::new(Recording::default())),
                held: Vec::new(),
                private,
                local,
            },
            stamp: ListStamp::default(),
            owners: Default::default(),
            state,
            #[cfg(feature = "trace")]
            trace_id: 0,
            #[cfg(feature = "capture")]
            capture_id: std::sync::OnceLock::new(),
        })
    }

    /// Trims the context's pools down to their high watermarks (R-A1, R-A2): recycled lists
    /// beyond what was made since the last trim, oversized list memory, bucket pages. A trim
    /// with no list made since the last one keeps what the last window that made lists
    /// needed: the list pool shrinks to it, and the bucket pages stay (their peak since the
    /// last trim is no window's need). Every trim answers the immediate context's requests
    /// so far (R-A1): the next Finish trims again only after another one, so what a trim
    /// counts toward the watermark never starts at a trim made twice.
    fn trim_pools(&mut self) -> usize {
        self.trim_seen = self.device.shared.trim_epoch();
        let before = self.stats().retained_bytes;
        let recorded = self.lists.trim();
        if recorded {
            self.cls.trim();
        }
        self.bindings.trim(recorded);
        before.saturating_sub(self.stats().retained_bytes)
    }

    /// Makes the driver's context state ready for the next recording: recycled when the
    /// device recycles (R-R7, out of memory as a return value, R-R3), else destroyed and
    /// created again. Emulated, there is none to make.
    #[inline]
    fn renew(&mut self) -> Result<()> {
        let s = &*self.device.shared;
        let recycled = match &mut self.dc {
            DriverSide::Emulated => return Ok(()),
            DriverSide::Native(dc) => {
                s.recycles() && s.driver().recycle_create_deferred_context(dc).is_ok()
            }
            DriverSide::Lost => false,
        };
        if recycled {
            return Ok(());
        }
        self.recreate()
    }

    /// [`DeferredContext::renew`] where the state is not recycled: destroyed and created
    /// again (R-R3), out of line (a recycling device renews without it).
    #[cold]
    #[inline(never)]
    fn recreate(&mut self) -> Result<()> {
        let s = &*self.device.shared;
        // Lost until the create returns: calls stay out of the recording meanwhile, also if
        // a hook below fails or panics (`Calls`' invariant).
        if self.calls == Calls::Recorded {
            self.calls = Calls::StateLost;
        }
        if let DriverSide::Native(dc) = core::mem::replace(&mut self.dc, DriverSide::Lost) {
            s.driver().destroy_deferred_context(dc);
        }
        self.dc = DriverSide::Native(s.driver().create_deferred_context(self.id)?);
        if self.calls == Calls::StateLost {
            self.calls = Calls::Recorded;
        }
        Ok(())
    }

    /// Abandons the recording (R-C2): the driver's abandon hook, then the bindings undone one
    /// by one, every handle closed, and the context recycled (or recreated). Ready to record
    /// again afterwards. After device destruction the recording is dropped without a hook
    /// and the answer is [`Error::DeviceRemoved`] (R-D3).
    pub fn abandon(&mut self) -> Result<()> {
        captured!(self, Call::Abandon, self.abandon_recording())
    }

    fn abandon_recording(&mut self) -> Result<()> {
        if self.calls == Calls::Removed {
            self.resume_calls();
            return Ok(());
        }
        let result = self.abandon_sequence();
        if result.is_ok() {
            self.stats.abandoned += 1;
        }
        self.settle(result)
    }

    /// R-C2's sequence: AbandonCommandList, the bindings undone one by one, every handle
    /// closed, the context recycled (or recreated).
    ///
    /// After device destruction (R-D3) the recording is dropped, its handles closed, and the
    /// answer is [`Error::DeviceRemoved`]: no abandon or unbind hook, nor a recycle, on a
    /// destroyed device. Of a context that outlives its device the driver hears only the
    /// closes of the handles it had open and the DestroyDeferredContext of its drop; the
    /// objects those handles held outlive them (the drain leaves them, R-H2).
    fn abandon_sequence(&mut self) -> Result<()> {
        // The abandoned recording's span ends here; the next call opens the next one's.
        #[cfg(feature = "trace")]
        {
            self.recording = None;
        }
        if self.device.is_removed() {
            self.unload();
            return Err(Error::DeviceRemoved);
        }
        let s = &*self.device.shared;
        let DriverSide::Native(dc) = &mut self.dc else {
            self.unload();
            return self.renew();
        };
        s.driver().abandon_command_list(dc);
        while let Some((point, _)) = self.bindings.iter().next() {
            self.bindings.set(point, None);
            s.driver()
                .abandon_unbind(dc, point, StateView::of(&self.bindings));
        }
        self.unload();
        self.renew()
    }

    /// Trims the context's pools down to their high watermarks now (R-A2); returns the bytes
    /// given back. The context also does this by itself at the Finish after the immediate
    /// context performed amortised processing, and when it runs out of memory. A trim here
    /// answers the immediate context's request too: the next Finish does not trim again, so
    /// what it counts toward the watermark starts at this trim.
    pub fn trim(&mut self) -> usize {
        #[cfg(feature = "capture")]
        self.capture_begin(Call::Trim);
        self.sink = Vec::new();
        let trimmed = self.trim_pools();
        #[cfg(feature = "capture")]
        self.capture_end(&Ok(()));
        trimmed
    }
}

impl<D: Driver, K: Kernel> Drop for DeferredContext<D, K> {
    fn drop(&mut self) {
        // Every step below runs even if a hook in an earlier one panics (guards run in reverse
        // order of their creation): the handles closed, the lists ended, the driver's state
        // destroyed, and last the live count dropped, so that DestroyDevice never waits for
        // a context that is gone.
        let shared = Arc::clone(&self.device.shared);
        let _counted = scopeguard::guard((), |()| {
            shared.deferred_gone();
        });
        let mut this = scopeguard::guard(&mut *self, |dc| dc.end_lists_and_state());
        this.unload();
    }
}

impl<D: Driver, K: Kernel> DeferredContext<D, K> {
    /// The end of a dropped context: lists destroyed from now on free themselves; these are
    /// freed here (the destroyed ones never reached the cache, so they end with
    /// DestroyCommandList, R-R4; the cached ones with DestroyDeferredContext, which runs
    /// last, also if ending a list panics).
    fn end_lists_and_state(&mut self) {
        let shared = &*self.device.shared;
        let state = core::mem::replace(&mut self.dc, DriverSide::Lost);
        let _state = scopeguard::guard(state, |dc| {
            if let DriverSide::Native(dc) = dc {
                shared.driver().destroy_deferred_context(dc);
            }
        });
        let lists = self.lists.close();
        // Each list ends even if ending an earlier one panics.
        let mut rest = scopeguard::guard(lists, |lists| lists.into_iter().for_each(release));
        while let Some(node) = rest.pop() {
            release(node);
        }
    }
}

/// The context's stream in the device's capture (feature `capture`): each public call
/// starts its record first thing ([`DeferredContext::capture_begin`]) and ends it with its
/// answer ([`DeferredContext::capture_end`]).
#[cfg(feature = "capture")]
impl<D: Driver, K: Kernel> DeferredContext<D, K> {
    /// Starts the record of `call`. First thing in every public call that records one.
    #[inline(always)]
    pub(super) fn capture_begin(&mut self, call: Call<'_, &D::Command>) {
        if let Some(capture) = &mut self.capture {
            // SAFETY: first thing in a call of this context: the bytes of its open Maps are
            // the recording's until their Unmaps (or forgotten with a recording reset inside
            // a call), and were touched by nothing but the application since
            // (`ContextCapture::settle_maps`).
            unsafe { capture.begin(&call) }
        }
    }

    /// Ends the record [`DeferredContext::capture_begin`] started with the call's answer.
    pub(super) fn capture_end<T>(&mut self, result: &Result<T>) {
        if let Some(capture) = &mut self.capture {
            capture.commit(result.into());
        }
    }

    /// Ends a Finish's record; a list made takes its name in the capture, and the
    /// recording's records go to the sink, to be written at the next flush.
    fn capture_finished(&mut self, list: &Result<CommandList<D, K>>) {
        self.capture_end(list);
        if let Some(capture) = &mut self.capture {
            if let Ok(list) = list {
                let _ = list.data().capture_id.set(capture.next_list_id());
                capture.count_list();
            }
            capture.hand_over();
        }
    }

    /// A Map of `resource` of type `ty` that `map` makes, recorded, with the bytes it
    /// hands out noted, to be recorded at its Unmap (or before a call that may end it).
    pub(super) fn captured_map(
        &mut self,
        resource: Handle<Resource>,
        ty: crate::map_type::MapType,
        map: impl FnOnce(&mut Self) -> Result<&mut [u8]>,
    ) -> Result<&mut [u8]> {
        let flags = crate::map_type::MapFlags::empty();
        if let Some(capture) = &mut self.capture {
            // SAFETY: first thing in a call of this context, as in `capture_begin`.
            unsafe { capture.begin_map() }
        }
        let result = map(self).map(|bytes| bytes as *mut [u8]);
        // A removed context's Map hands out scratch bytes that its next Map reuses (and may
        // move): nothing of them reaches a list, and the capture does not read them.
        let recorded = self.calls == Calls::Recorded;
        if let Some(capture) = &mut self.capture {
            // Where the bytes are: the capture reads them at the Unmap, or before a call
            // that may end the Map.
            let bytes = result.as_ref().ok().copied().filter(|_| recorded);
            capture.end_map(resource, ty, flags, (&result).into(), bytes);
        }
        let bytes = result?;
        // SAFETY: the memory `map` handed out under the `&mut self` borrow that just ended,
        // alive until the next call of this context, which the returned borrow of `&mut self`
        // prevents; nothing touched it since (the capture only noted the pointer, and reads
        // through it only in a later call).
        Ok(unsafe { &mut *bytes })
    }
}

#[cfg(test)]
#[cfg(feature = "soft")]
mod tests {
    use crate::soft::{self, Gpu, SoftCommand, SoftConfig};
    use crate::{DeviceConfig, ResourceDesc, Usage};

    /// A soft driver with command lists, untraced, whose GPU completes at once.
    fn native() -> SoftConfig {
        SoftConfig {
            trace: false,
            gpu: Gpu::Immediate,
            command_lists: true,
            ..SoftConfig::from_env().unwrap()
        }
    }

    /// A dynamic resource of 16 bytes (Map(DISCARD) applies to it).
    fn dynamic_16() -> ResourceDesc {
        ResourceDesc {
            byte_size: 16,
            usage: Usage::Dynamic,
            ..ResourceDesc::default()
        }
    }

    /// What a driver's hook sees of the recording's context-local handles
    /// (`LocalHandles`): how many are open, each one's object and memory, and its Debug
    /// naming the count and lengths, never the bytes.
    #[test]
    fn local_handles_count_and_describe_the_open_handles() {
        use crate::bind::StateView;
        use crate::cls::local_handles::LocalHandles;
        let (device, mut ic, world) = soft::device(native(), DeviceConfig::default()).unwrap();
        let (a, b) = (
            device.create_resource(dynamic_16()).unwrap(),
            device.create_resource(dynamic_16()).unwrap(),
        );
        let mut dc = device.create_deferred_context().unwrap();
        dc.command(SoftCommand::Copy { dst: a, src: b }).unwrap();
        let mut locals = LocalHandles::new(&mut dc.cls, StateView::of(&dc.bindings));
        assert_eq!(locals.open(), 2);
        assert_eq!(format!("{locals:?}"), "LocalHandles { open: 2, .. }");
        let local = locals.get(a.any()).expect("open");
        assert_eq!(local.view.handle(), a.any());
        let described = format!("{local:?}");
        assert!(described.starts_with("LocalHandle { view: "), "{described}");
        assert!(described.ends_with(&format!("local_len: {} }}", local.local.len())));
        drop(dc);
        ic.destroy_device().unwrap();
        world.assert_clean();
    }

    /// Payload pointers (Map(DISCARD) bytes handed out, then replayed) and recycled list
    /// nodes, small enough for miri: record, finish, execute twice, drop on another thread,
    /// recycle.
    #[test]
    fn map_discard_payloads_replay_and_lists_recycle() {
        let (device, mut ic, world) = soft::device(native(), DeviceConfig::default()).unwrap();
        let (a, b) = (
            device.create_resource(dynamic_16()).unwrap(),
            device.create_resource(dynamic_16()).unwrap(),
        );
        let mut dc = device.create_deferred_context().unwrap();
        for round in 0..3u8 {
            let bytes = dc.map_discard(a).unwrap();
            bytes.copy_from_slice(&[round + 1; 16]);
            dc.unmap(a).unwrap();
            dc.update(b, 4, &[9, 9]).unwrap();
            dc.command(SoftCommand::Copy { dst: b, src: a }).unwrap();
            let list = dc.finish().unwrap();
            ic.update(a, 0, &[0; 16]).unwrap();
            ic.execute_command_list(&list).unwrap();
            ic.execute_command_list(&list).unwrap();
            std::thread::spawn(move || drop(list)).join().unwrap();
            ic.flush().unwrap();
            let b_bytes = world
                .read(device.object(b).unwrap().allocation().unwrap())
                .unwrap();
            assert_eq!(b_bytes, vec![round + 1; 16]);
        }
        assert!(dc.stats().recycled >= 1, "{:?}", dc.stats());
        drop(dc);
        ic.destroy_device().unwrap();
        world.assert_clean();
    }

    /// Map(DISCARD) where the driver builds its lists, for miri: the bytes handed out are
    /// the driver's (a pointer into its state of the context, returned through the
    /// context's borrow), written by the application, encoded at the Unmap and run by the
    /// immediate context; a Map the engine refuses hands out nothing.
    #[test]
    fn map_discard_hands_out_the_drivers_memory_where_it_builds_lists() {
        let config = SoftConfig {
            driver_built: true,
            ..native()
        };
        let (device, mut ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
        let a = device.create_resource(dynamic_16()).unwrap();
        let plain = device
            .create_resource(ResourceDesc {
                byte_size: 16,
                ..Default::default()
            })
            .unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        for round in 0..3u8 {
            dc.map_discard(a).unwrap().fill(round + 1);
            assert!(dc.map_discard(plain).is_err(), "not dynamic: refused");
            dc.unmap(a).unwrap();
            let list = dc.finish().unwrap();
            ic.execute_command_list(&list).unwrap();
            drop(list);
            ic.flush().unwrap();
            let bytes = world
                .read(device.object(a).unwrap().allocation().unwrap())
                .unwrap();
            assert_eq!(bytes, vec![round + 1; 16]);
        }
        drop(dc);
        ic.destroy_device().unwrap();
        world.assert_clean();
    }

    /// Map(NO_OVERWRITE) for miri, in both list modes with deferred-context hooks: the
    /// discard's bytes handed out again after its Unmap recorded them (the arena's payload,
    /// or the driver's memory of the discard), written in place, and replayed with the
    /// discard.
    #[test]
    fn map_no_overwrite_hands_out_the_discards_bytes_again() {
        use crate::BindFlags;
        for driver_built in [false, true] {
            let config = SoftConfig {
                driver_built,
                ..native()
            };
            let (device, mut ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
            let ring = device
                .create_resource(ResourceDesc {
                    bind: BindFlags::VERTEX_BUFFER,
                    ..dynamic_16()
                })
                .unwrap();
            let mut dc = device.create_deferred_context().unwrap();
            dc.map_discard(ring).unwrap()[..8].fill(1);
            dc.unmap(ring).unwrap();
            let bytes = dc.map_no_overwrite(ring).unwrap();
            assert_eq!(&bytes[..8], &[1; 8]);
            bytes[8..].fill(2);
            dc.unmap(ring).unwrap();
            let list = dc.finish().unwrap();
            ic.execute_command_list(&list).unwrap();
            drop(list);
            ic.flush().unwrap();
            let bytes = world
                .read(device.object(ring).unwrap().allocation().unwrap())
                .unwrap();
            assert_eq!(
                bytes,
                [[1; 8], [2; 8]].concat(),
                "driver_built {driver_built}"
            );
            drop(dc);
            ic.destroy_device().unwrap();
            world.assert_clean();
        }
    }

    /// Nested lists for miri: the walk's pointers into lists (replay and stamping), and the
    /// counted owners of an inner list given up on two threads, the inner list first.
    #[test]
    fn nested_lists_replay_and_end_through_their_owners() {
        let config = SoftConfig {
            trace: false,
            gpu: Gpu::Immediate,
            ..SoftConfig::from_env().unwrap()
        };
        let (device, mut ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
        let desc = ResourceDesc {
            byte_size: 8,
            ..Default::default()
        };
        let (a, b) = (
            device.create_resource(desc).unwrap(),
            device.create_resource(desc).unwrap(),
        );
        let mut dc = device.create_deferred_context().unwrap();
        dc.update(a, 0, &[5; 8]).unwrap();
        let inner = dc.finish().unwrap();
        dc.execute_command_list(&inner).unwrap();
        let middle = dc.finish().unwrap();
        dc.execute_command_list(&middle).unwrap();
        dc.execute_command_list(&inner).unwrap();
        dc.command(SoftCommand::Copy { dst: b, src: a }).unwrap();
        let outer = dc.finish().unwrap();
        std::thread::spawn(move || drop((inner, middle)))
            .join()
            .unwrap();
        ic.execute_command_list(&outer).unwrap();
        let other = std::thread::spawn(move || drop(outer));
        ic.flush().unwrap();
        other.join().unwrap();
        let b_bytes = world
            .read(device.object(b).unwrap().allocation().unwrap())
            .unwrap();
        assert_eq!(b_bytes, vec![5; 8]);
        drop(dc);
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}
