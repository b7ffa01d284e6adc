//! The immediate context: see [`ImmediateContext`].

#[cfg(feature = "capture")]
use crate::capture::Call;
use core::cell::Cell;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_epoch::{self as epoch, Guard};
use scopeguard::ScopeGuard;

use crate::bind::{BindPoint, Bindings, StateView};
use crate::context::amortize::Amortizer;
use crate::context::command_list::{free_now, CommandList, ListData, ListNode};
use crate::context::device::{Device, DeviceShared};
use crate::context::list_walk::{ListWalk, ReplayStep};
use crate::context::mapped_and_begun::MappedAndBegun;
use crate::desc::{ObjectDesc, ResourceDesc};
use crate::driver::{Command, Driver, Op};
use crate::error::{AppError, Error, Result};
use crate::handle::{AnyHandle, Handle, ObjectKind, Query, Resource};
use crate::kernel::{AllocationHandle, ContextId, Kernel, Submission};
use crate::list_mode::ListMode;
use crate::lists::record::Recorded;
use crate::mapping::CpuMapping;
use crate::primitive::Ordering;
use crate::registry::retire::{Clock, Clocks, Drain, Pass, RetireQueue, RetireStats};
use crate::registry::{Entry, IcDataRefs, IcToken, ObjectView, Registry, Resolver};
use crate::trace::span;
use map::IcMap;
use rename_pool::RenamePool;

mod dxgi;
#[cfg(all(test, feature = "soft"))]
mod lock_tests;
#[cfg(all(test, feature = "soft"))]
mod lookup_tests;
mod map;
mod rename_pool;

/// The objects of a command a call resolves once and keeps for its stamp; a command that
/// names more is walked again for the rest (a copy names two, a draw's bound state is not
/// named).
const COMMAND_OBJECTS: usize = 4;

/// The open command buffer's bookkeeping.
#[derive(Debug)]
struct OpenBuffer {
    number: u64,
    operations: u32,
    allocations: Vec<AllocationHandle>,
    /// Identities were rotated while this buffer was open (R-X5): an object stamped with it
    /// may have a new allocation since, which the buffer's list must gain when the object is
    /// used again, so no list's tree is skipped as already referenced.
    rotated: bool,
}

/// Where the immediate context is in its device's life (R-D3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Life {
    /// Working.
    Open,
    /// DestroyDevice began: the device is removed, its drain not finished (a hook panicked;
    /// the next call, or the drop, finishes it).
    Draining,
    /// Everything of the device was destroyed and deallocated.
    Destroyed,
}

/// The immediate context: the one thread that builds and submits command buffers (R-T1),
/// performs deferred destructions (R-D1..R-D3) and owns primaries (R-P1).
///
/// `Send` but not `Sync`: one thread drives it at a time. Every operation resolves its
/// handles first (a stale or destroyed one is an application error and nothing runs), calls
/// [`Driver::execute`], and stamps each object with the open buffer's number (the last
/// buffer that references it, which decides when its memory may be deallocated), whether
/// the driver accepted the operation or refused it: a driver may have touched memory before
/// refusing, so the buffer counts the operation and is submitted.
///
/// A list executed twice, then one flush submits the buffer both executions went into:
///
/// ```
/// # #[cfg(feature = "soft")] {
/// use cmdlist::soft::null::{copy_of, null_device};
/// use cmdlist::DeviceConfig;
///
/// let (device, mut ic) = null_device(DeviceConfig::default())?;
/// let mut dc = device.create_deferred_context()?;
/// dc.command(copy_of(&device))?;
/// let list = dc.finish()?;
/// ic.execute_command_list(&list)?;
/// ic.execute_command_list(&list)?; // a list runs any number of times (R-C3)
/// ic.flush()?;
/// drop((list, dc));
/// ic.destroy_device()?; // every deferred context gone first (R-H2)
/// # }
/// # Ok::<(), cmdlist::Error>(())
/// ```
pub struct ImmediateContext<D: Driver, K: Kernel> {
    device: Device<D, K>,
    imm: D::Immediate,
    bindings: Bindings,
    buffer: OpenBuffer,
    /// The newest buffer that was really submitted (0: none).
    last_submitted: u64,
    /// The kernel's completed fence as last believed: never behind an earlier answer, never
    /// past `last_submitted`.
    completed: u64,
    retire: RetireQueue,
    /// Resources mapped on this context, with the bytes their new contents are written to,
    /// and queries begun and not yet ended (R-C4).
    open: MappedAndBegun<IcMap>,
    /// Contents buffers of earlier maps, kept for the next ones: a steady map/unmap pattern
    /// allocates nothing.
    spare_contents: Vec<Vec<u8>>,
    /// Scratch: the allocations the open Maps hold locked, noted for a pass of the retire
    /// queue, which deallocates none before its unlock (a resource destroyed while mapped,
    /// R-M4; `note_locked`).
    locked: Vec<AllocationHandle>,
    /// Allocations a Map(DISCARD) renamed resources away from, until the GPU is done with
    /// them and another rename takes them (R-M5).
    rename_pool: RenamePool,
    /// The kernel keeps locks across Maps ([`Kernel::persistent_locks`], asked once): each
    /// allocation is locked at its first Map and stays locked until it is deallocated or
    /// the device is destroyed (R-M3..R-M5).
    persistent_locks: bool,
    amortizer: Amortizer,
    /// Proves this is the device's one immediate context: the single reclaimer of entries.
    token: IcToken,
    /// Command lists ended while a buffer that executed them may still read their memory.
    #[allow(clippy::vec_box)]
    lists_in_flight: Vec<Box<ListNode<D, K>>>,
    /// Resource identity rotations performed (R-X5): while 0, no view can be stale, and the
    /// operations skip the check.
    rotations: u64,
    /// Scratch of the DXGI entry points (residency queries, rotations): kept, so that a
    /// steady frame allocates nothing.
    dxgi_scratch: dxgi::Scratch,
    /// The stack of walks through nested lists (kept: no allocation in steady state).
    walk: ListWalk<D, K>,
    /// The bindings a restoring execute binds again (capacity kept).
    restore: Vec<(BindPoint, AnyHandle)>,
    /// Where a rotation lays out the references to its resources' IC data (kept).
    ic_refs: IcDataRefs<D>,
    life: Life,
    /// This context's stream in the device's capture (feature `capture`).
    #[cfg(feature = "capture")]
    capture: Option<crate::capture::context::ContextCapture>,
    _not_sync: PhantomData<Cell<()>>,
}

/// The context's buffers and bindings, not the driver's state.
impl<D: Driver, K: Kernel> core::fmt::Debug for ImmediateContext<D, K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ImmediateContext")
            .field("open_buffer", &self.buffer.number)
            .field("last_submitted", &self.last_submitted)
            .field("bindings", &self.bindings.iter().count())
            .field("life", &self.life)
            .finish_non_exhaustive()
    }
}

impl<D: Driver, K: Kernel> ImmediateContext<D, K> {
    pub(crate) fn new(device: Device<D, K>, imm: D::Immediate) -> Self {
        let token = device
            .shared
            .registry()
            .take_ic_token()
            .expect("one immediate context per device");
        #[cfg(feature = "capture")]
        let device_capture = |device: &Device<D, K>| {
            let sink = device.capture_sink()?.clone();
            let stream = crate::capture::IMMEDIATE_STREAM;
            Some(crate::capture::context::ContextCapture::new(sink, stream))
        };
        #[cfg(feature = "capture")]
        let capture = device_capture(&device);
        let persistent_locks = device.shared.kernel().persistent_locks();
        ImmediateContext {
            token,
            device,
            imm,
            bindings: Bindings::default(),
            buffer: OpenBuffer {
                number: 1,
                operations: 0,
                allocations: Vec::new(),
                rotated: false,
            },
            last_submitted: 0,
            completed: 0,
            retire: RetireQueue::default(),
            open: MappedAndBegun::default(),
            spare_contents: Vec::new(),
            locked: Vec::new(),
            rename_pool: RenamePool::default(),
            persistent_locks,
            amortizer: Amortizer::default(),
            lists_in_flight: Vec::new(),
            rotations: 0,
            dxgi_scratch: dxgi::Scratch::default(),
            walk: ListWalk::default(),
            restore: Vec::new(),
            ic_refs: IcDataRefs::default(),
            life: Life::Open,
            #[cfg(feature = "capture")]
            capture,
            _not_sync: PhantomData,
        }
    }

    /// The device.
    pub fn device(&self) -> &Device<D, K> {
        &self.device
    }

    /// The driver's immediate-context state.
    pub fn driver_state(&self) -> &D::Immediate {
        &self.imm
    }

    /// The number of the open (not yet submitted) command buffer.
    pub fn open_buffer(&self) -> u64 {
        self.buffer.number
    }

    /// The fence value of the newest submitted buffer (0: none yet).
    pub fn last_submitted(&self) -> u64 {
        self.last_submitted
    }

    /// Counters of the deferred-destruction queue.
    pub fn retire_stats(&self) -> RetireStats {
        let registry = self.device.shared.registry();
        let mut stats = self.retire.stats();
        stats.waiting_reclamation = registry.unreclaimed(&self.token);
        stats.retained_bytes += registry.limbo_bytes(&self.token);
        stats
    }

    /// The state-refresh query: what is bound at `point` (R-C3).
    pub fn binding(&self, point: BindPoint) -> Option<AnyHandle> {
        self.bindings.get(point)
    }

    /// Every binding, sorted by point.
    pub fn bindings(&self) -> impl Iterator<Item = (BindPoint, AnyHandle)> + '_ {
        self.bindings.iter()
    }

    /// `Err(DeviceRemoved)` once device destruction began. Only this context removes the
    /// device (`destroy_device_inner`, which leaves [`Life::Open`] first), so its own state
    /// says it: the registry's removal flag is not read again.
    fn check_alive(&self) -> Result<()> {
        debug_assert!(self.life != Life::Open || !self.device.is_removed());
        if self.life != Life::Open {
            Err(Error::DeviceRemoved)
        } else {
            Ok(())
        }
    }

    fn report<T>(&self, result: Result<T>) -> Result<T> {
        self.device.report(ContextId::Immediate, result)
    }

    /// Every entry point's frame: refuses the call once the device is removed or destroyed
    /// (R-D3), runs `work`, and reports a failure on the immediate context's sink (R-E2).
    /// Inlined into the entry point, which a driver's DDI function then calls once: out of
    /// line, each call of the hot path paid a second frame (about 15 instructions).
    #[inline(always)]
    fn entry<T>(&mut self, work: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        let result = self.check_alive().and_then(|()| work(self));
        self.report(result)
    }

    /// [`ImmediateContext::entry`] out of line, for an execute: its work stays in one
    /// function with the frame (inlined into the caller, the compiler split the execute's
    /// work out of it, and a warm one-copy cycle grew by 15 instructions).
    #[inline(never)]
    fn framed<T>(&mut self, work: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        self.entry(work)
    }

    /// The kernel's completed fence, checked: an answer behind an earlier one or past the
    /// last submitted buffer is the kernel's error (`InvalidArg`, R-E1) and is not believed,
    /// so nothing is deallocated on a fence the GPU never reached (R-D1, R-D4).
    fn completed_fence(&mut self) -> Result<u64> {
        let reported = self.device.shared.kernel().completed_fence();
        if reported < self.completed || reported > self.last_submitted {
            return Err(Error::InvalidArg);
        }
        self.completed = reported;
        Ok(reported)
    }

    /// Stamps `list` with the open buffer and references every object it holds there.
    #[inline]
    fn reference_list(
        buffer: &mut OpenBuffer,
        token: &mut IcToken,
        registry: &Registry<D>,
        guard: &Guard,
        list: &ListData<D, K>,
    ) {
        for held in &list.body.held {
            Self::reference(buffer, token, registry, guard, held.view());
        }
        list.stamp.executed_in(buffer.number);
    }

    /// Records that the open buffer references `view`'s object, and through a view its
    /// resource (the GPU reaches the resource's memory through the view). Inlined into
    /// every loop over a list's or a command's objects: a call per object cost as much
    /// as the stamp itself.
    #[inline(always)]
    fn reference(
        buffer: &mut OpenBuffer,
        token: &mut IcToken,
        registry: &Registry<D>,
        guard: &Guard,
        view: ObjectView<'_, D>,
    ) {
        Self::stamp(buffer, token, view.entry());
        if let Some(dep) = view.dependency() {
            Self::reference_dependency(buffer, token, registry, guard, dep);
        }
    }

    /// The resource a view reaches, for [`Self::reference`].
    #[inline(never)]
    fn reference_dependency(
        buffer: &mut OpenBuffer,
        token: &mut IcToken,
        registry: &Registry<D>,
        guard: &Guard,
        dependency: AnyHandle,
    ) {
        if let Ok(resource) = registry.find_linked(dependency, guard) {
            Self::stamp(buffer, token, resource);
        }
    }

    #[inline(always)]
    fn stamp(buffer: &mut OpenBuffer, token: &mut IcToken, entry: &Entry<D>) {
        let ic = entry.ic_side(token);
        if ic.last_buffer != buffer.number {
            ic.last_buffer = buffer.number;
            if let Some(allocation) = entry.allocation() {
                buffer.allocations.push(allocation);
            }
        }
    }

    /// Runs one operation whose handles are resolved: [`Self::run_hook`] with
    /// [`Driver::execute`].
    #[inline(always)]
    fn run<'g>(
        &mut self,
        guard: &'g Guard,
        objects: &[ObjectView<'g, D>],
        op: Op<'_, D>,
    ) -> Result<()> {
        self.run_hook(guard, objects, None, |driver, imm, resolver| {
            driver.execute(imm, resolver, op)
        })
    }

    /// The one route of every hook that puts work in the open buffer, once the call's
    /// handles are resolved and checked: views whose resource's identity changed are
    /// refreshed first (R-X5); then `objects` (and, for a command with more objects than a
    /// call resolves at once, every object of `more`) are stamped with the open buffer and
    /// the operation is counted in it (R-D1); then the hook runs.
    ///
    /// Stamped before the hook, so that the stamp holds whether the driver accepts the
    /// operation, refuses it, or panics: a driver may have referenced memory before it
    /// refused or unwound, so the buffer counts the operation and is submitted, and nothing
    /// it references is freed before that submit. Nothing the hook can reach reads the
    /// stamps, so stamping first is the whole of this call's panic safety: no state to
    /// repair afterwards.
    #[inline(always)]
    fn run_hook<'g>(
        &mut self,
        guard: &'g Guard,
        objects: &[ObjectView<'g, D>],
        more: Option<&D::Command>,
        hook: impl FnOnce(&D, &mut D::Immediate, &Resolver<'_, D>) -> Result<()>,
    ) -> Result<()> {
        if self.rotations != 0 {
            self.refresh_views(guard, objects, more)?;
        }
        let s = &*self.device.shared;
        let (buffer, token) = (&mut self.buffer, &mut self.token);
        for view in objects {
            Self::reference(buffer, token, s.registry(), guard, *view);
        }
        if let Some(command) = more {
            // `held`, not `live`: another thread may destroy an object meanwhile, but only
            // this thread frees entries, so everything validated before is there to stamp.
            command.for_each_object(&mut |h| {
                if let Ok(view) = s.registry().held(h, guard) {
                    Self::reference(buffer, token, s.registry(), guard, view);
                }
            });
        }
        buffer.operations += 1;
        let resolver = Resolver::new(
            s.registry(),
            guard,
            StateView::of(&self.bindings),
            false,
            self.buffer.number,
        );
        hook(s.driver(), &mut self.imm, &resolver)
    }

    /// Performs a driver-defined command. Every object it names must be live.
    pub fn command(&mut self, command: &D::Command) -> Result<()> {
        captured!(
            self,
            Call::Command(command),
            self.command_uncaptured(command)
        )
    }

    #[inline(always)]
    fn command_uncaptured(&mut self, command: &D::Command) -> Result<()> {
        self.entry(|ic| {
            let registry = ic.device.shared.registry();
            let guard = registry.ic_guard(&ic.token);
            // Each handle looked up once: the views found validate the command and are the
            // ones stamped. Nothing is stamped unless every handle is good.
            let mut objects =
                [const { MaybeUninit::<ObjectView<'_, D>>::uninit() }; COMMAND_OBJECTS];
            let (mut found, mut failed, mut more) = (0, None, false);
            command.for_each_object(&mut |h| match registry.ic_live(&mut ic.token, h, guard) {
                Ok(view) if found < COMMAND_OBJECTS => {
                    objects[found].write(view);
                    found += 1;
                }
                Ok(_) => more = true,
                Err(e) => failed = failed.or(Some(e)),
            });
            if let Some(e) = failed {
                return Err(e);
            }
            // The second pass is for what the first could not hold, only.
            debug_assert!(!more || found == COMMAND_OBJECTS);
            let more = more.then_some(command);
            let written = core::ptr::from_ref(&objects[..found]) as *const [ObjectView<'_, D>];
            // SAFETY: each of the first `found` views was written before `found` counted it,
            // and nothing else writes the array; `MaybeUninit<T>` has `T`'s layout, so its
            // initialised prefix is a slice of `T`.
            let objects = unsafe { &*written };
            ic.run_hook(guard, objects, more, |driver, imm, resolver| {
                driver.execute(imm, resolver, Op::Command(command))
            })
        })
    }

    /// UpdateSubresource: writes `data` at byte `offset` of `resource`.
    pub fn update(&mut self, resource: Handle<Resource>, offset: u64, data: &[u8]) -> Result<()> {
        captured!(
            self,
            Call::Update {
                resource,
                offset,
                data,
            },
            self.update_uncaptured(resource, offset, data)
        )
    }

    #[inline(always)]
    fn update_uncaptured(
        &mut self,
        resource: Handle<Resource>,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        self.entry(|ic| {
            let guard = ic.device.shared.registry().ic_guard(&ic.token);
            let view = ic
                .device
                .shared
                .registry()
                .ic_live(&mut ic.token, resource, guard)?;
            view.check_write(offset, data.len())?;
            ic.run(
                guard,
                &[view],
                Op::Update {
                    resource: view,
                    offset,
                    data,
                },
            )
        })
    }

    /// Binds `object` at `point`, or unbinds with `None`.
    pub fn bind(&mut self, point: BindPoint, object: Option<AnyHandle>) -> Result<()> {
        captured!(
            self,
            Call::Bind { point, object },
            self.bind_uncaptured(point, object)
        )
    }

    #[inline(always)]
    fn bind_uncaptured(&mut self, point: BindPoint, object: Option<AnyHandle>) -> Result<()> {
        self.entry(|ic| {
            let guard = ic.device.shared.registry().ic_guard(&ic.token);
            let view = match object {
                Some(h) => Some(
                    ic.device
                        .shared
                        .registry()
                        .ic_live(&mut ic.token, h, guard)?,
                ),
                None => None,
            };
            ic.run(
                guard,
                view.as_slice(),
                Op::Bind {
                    point,
                    object: view,
                },
            )?;
            // A binding holds its object (as D3D's references do): a bound object destroyed by
            // the application is really destroyed only once unbound (R-D4's ClearState; Flush).
            // Counted in the object's IC side: no locked instruction.
            if let Some(view) = view {
                view.entry().ic_side(&mut ic.token).bound += 1;
            }
            if let Some(old) = ic.bindings.replace(point, object) {
                let registry = ic.device.shared.registry();
                Self::unbind(&mut ic.buffer, &mut ic.token, registry, guard, old);
            }
            Ok(())
        })
    }

    /// Gives back a hold taken on `handle`'s object.
    fn release_hold(registry: &Registry<D>, guard: &Guard, handle: AnyHandle) {
        if let Ok(entry) = registry.find_linked(handle, guard) {
            entry.release();
        }
    }

    /// Ends a binding of `handle` (R-D1): the object is referenced in the open buffer, the
    /// last that ran while it was bound (a draw reads bound objects without naming them),
    /// then the binding's count of it ends (`IcSide::bound`). With the flush's
    /// [`Self::reference_bindings`],
    /// an object is in every buffer that ran while it was bound, and its memory waits for
    /// the last of them.
    #[inline]
    fn unbind(
        buffer: &mut OpenBuffer,
        token: &mut IcToken,
        registry: &Registry<D>,
        guard: &Guard,
        handle: AnyHandle,
    ) {
        // The binding keeps the entry linked: found once, for both.
        if let Ok(view) = registry.ic_held(token, handle, guard) {
            Self::reference(buffer, token, registry, guard, view);
            view.entry().ic_side(token).bound -= 1;
        }
    }

    /// Clear-state's unbinding: ends every binding. Inlined for its test: after an
    /// execute, whose clear-state finds nothing bound more often than not (R-C3), it is
    /// the whole of it.
    #[inline(always)]
    fn unbind_all(&mut self, guard: &Guard) {
        if !self.bindings.is_empty() {
            self.unbind_each(guard);
        }
    }

    /// [`Self::unbind_all`] where something is bound.
    #[inline(never)]
    fn unbind_each(&mut self, guard: &Guard) {
        let registry = self.device.shared.registry();
        for (_, handle) in self.bindings.iter() {
            Self::unbind(&mut self.buffer, &mut self.token, registry, guard, handle);
        }
        self.bindings.clear();
    }

    /// References every bound object in the open buffer (R-D1), before it is submitted: a
    /// command reads what is bound without naming it, so a buffer's allocation list holds
    /// every object bound while it ran, and each object's memory waits for that buffer.
    fn reference_bindings(&mut self) {
        let registry = self.device.shared.registry();
        Self::reference_bound(&self.bindings, &mut self.buffer, &mut self.token, registry);
    }

    /// [`Self::reference_bindings`] on the context's parts (for a caller that borrows the
    /// registry already).
    fn reference_bound(
        bindings: &Bindings,
        buffer: &mut OpenBuffer,
        token: &mut IcToken,
        registry: &Registry<D>,
    ) {
        if bindings.is_empty() {
            return;
        }
        let guard = registry.ic_guard(token);
        for (_, handle) in bindings.iter() {
            if let Ok(view) = registry.held(handle, guard) {
                Self::reference(buffer, token, registry, guard, view);
            }
        }
    }

    /// ClearState: unbinds everything (R-C3; the first step of R-D4's patterns).
    pub fn clear_state(&mut self) -> Result<()> {
        captured!(self, Call::ClearState, self.clear_state_uncaptured())
    }

    #[inline(always)]
    fn clear_state_uncaptured(&mut self) -> Result<()> {
        self.entry(|ic| {
            let guard = ic.device.shared.registry().ic_guard(&ic.token);
            ic.run(guard, &[], Op::ClearState)?;
            ic.unbind_all(guard);
            Ok(())
        })
    }

    /// Begins a query.
    pub fn begin_query(&mut self, query: Handle<Query>) -> Result<()> {
        captured!(
            self,
            Call::BeginQuery(query),
            self.begin_query_uncaptured(query)
        )
    }

    #[inline(always)]
    fn begin_query_uncaptured(&mut self, query: Handle<Query>) -> Result<()> {
        self.entry(|ic| ic.query_op(query, true))
    }

    /// Ends a query; an event query is signalled once the GPU has finished this buffer.
    pub fn end_query(&mut self, query: Handle<Query>) -> Result<()> {
        captured!(
            self,
            Call::EndQuery(query),
            self.end_query_uncaptured(query)
        )
    }

    #[inline(always)]
    fn end_query_uncaptured(&mut self, query: Handle<Query>) -> Result<()> {
        self.entry(|ic| ic.query_op(query, false))
    }

    fn query_op(&mut self, query: Handle<Query>, begin: bool) -> Result<()> {
        let guard = self.device.shared.registry().ic_guard(&self.token);
        let view = self
            .device
            .shared
            .registry()
            .ic_live(&mut self.token, query, guard)?;
        self.open.check_query(query, begin)?;
        let op = if begin {
            Op::BeginQuery(view)
        } else {
            Op::EndQuery(view)
        };
        self.run(guard, &[view], op)?;
        self.open.query(query, begin);
        if !begin {
            view.entry().ic_side(&mut self.token).query_end = self.buffer.number;
        }
        Ok(())
    }

    /// CommandListExecute (R-C3): runs the list from the clear state (it inherits none of
    /// this context's bindings), then leaves this context's state as at device creation.
    /// Where the engine replays lists ([`ListMode::Replayed`], and emulated lists) that is
    /// [`Driver::execute_command_list`] (for an emulated list an [`Op::ClearState`] instead),
    /// each recorded operation through [`Driver::execute`], then [`Op::ClearState`]; the lists
    /// it executes (recorded with [`crate::DeferredContext::execute_command_list`]) replay in
    /// place, each followed by the clear-state its execute recorded, at any depth. Where the
    /// driver builds its lists ([`ListMode::DriverBuilt`]) it is one
    /// [`Driver::execute_command_list`], which runs what the driver built, chained lists
    /// included, and leaves the clear state; nothing is replayed. Either way every object the
    /// list holds is referenced in the open buffer (R-D1), and views whose resource's identity
    /// rotated since their last use are refreshed first (R-X5): a refresh the driver refuses
    /// refuses the execute before any of it runs, as for any operation. During the call,
    /// state-refresh queries answer the bindings from before it; afterwards, nothing is bound
    /// (the objects that were bound stay referenced by this buffer, R-D1). A list may be
    /// executed any number of times.
    ///
    /// Checked first, changing nothing when they fail (R-C4, R-R8): the list belongs to this
    /// device; neither it nor a list it executes recorded a Map of a resource this context
    /// has mapped, or begins or ends a query this context began.
    pub fn execute_command_list(&mut self, list: &CommandList<D, K>) -> Result<()> {
        captured!(
            self,
            list.capture_execute_call(false),
            self.execute_command_list_uncaptured(list)
        )
    }

    #[inline(always)]
    fn execute_command_list_uncaptured(&mut self, list: &CommandList<D, K>) -> Result<()> {
        let _span = span!("execute", list = list.data().trace_id);
        self.framed(|ic| {
            ic.check_executable(list)?;
            ic.execute_list(list)
        })
    }

    /// ExecuteCommandList with RestoreContextState (R-C3): executes `list` as
    /// [`ImmediateContext::execute_command_list`] does, clear-state included, then binds
    /// again everything that was bound before it, as the runtime re-applies the executing
    /// context's state: the driver sees each re-bind as an [`Op::Bind`] through
    /// [`Driver::execute`], in the open buffer. During the execute the state-refresh queries
    /// answer the bindings from before it, as always; after the call they answer them again.
    /// A bound object the application destroyed meanwhile is bound again all the same (the
    /// binding keeps it, as D3D's references do).
    pub fn execute_command_list_restoring(&mut self, list: &CommandList<D, K>) -> Result<()> {
        captured!(
            self,
            list.capture_execute_call(true),
            self.execute_command_list_restoring_uncaptured(list)
        )
    }

    #[inline(always)]
    fn execute_command_list_restoring_uncaptured(
        &mut self,
        list: &CommandList<D, K>,
    ) -> Result<()> {
        let _span = span!("execute", list = list.data().trace_id);
        self.framed(|ic| {
            ic.check_executable(list)?;
            // Each binding to re-apply is held meanwhile (the execute's clear-state releases
            // the bindings' own holds); the holds not handed to a binding by the end, also
            // when a hook panics, are given back.
            let shared = Arc::clone(&ic.device.shared);
            let guard = shared.registry().ic_guard(&ic.token);
            let mut saved = core::mem::take(&mut ic.restore);
            saved.clear();
            for (point, handle) in ic.bindings.iter() {
                if shared
                    .registry()
                    .find_linked(handle, guard)
                    .is_ok_and(|e| e.hold())
                {
                    saved.push((point, handle));
                }
            }
            let mut pending = scopeguard::guard((saved, 0), |(saved, from)| {
                for &(_, handle) in &saved[from..] {
                    Self::release_hold(shared.registry(), guard, handle);
                }
            });
            let executed = ic.execute_list(list);
            let mut restored = Ok(());
            while let Some(&(point, handle)) = pending.0.get(pending.1) {
                let Ok(view) = shared.registry().held(handle, guard) else {
                    break; // held above: always there
                };
                if restored.is_ok() && ic.bindings.get(point) != Some(handle) {
                    let op = Op::Bind {
                        point,
                        object: Some(view),
                    };
                    restored = ic.run(guard, &[view], op);
                    if restored.is_ok() {
                        // Bound again, in place of what an execute cut short left there: the
                        // binding counts the object, and the hold taken above goes back.
                        view.entry().ic_side(&mut ic.token).bound += 1;
                        if let Some(old) = ic.bindings.replace(point, Some(handle)) {
                            let registry = shared.registry();
                            Self::unbind(&mut ic.buffer, &mut ic.token, registry, guard, old);
                        }
                        pending.1 += 1;
                        Self::release_hold(shared.registry(), guard, handle);
                        continue;
                    }
                }
                // Still bound (the execute stopped before its clear-state), or not re-bound.
                Self::release_hold(shared.registry(), guard, handle);
                pending.1 += 1;
            }
            let (saved, _) = ScopeGuard::into_inner(pending);
            ic.restore = saved;
            executed.and(restored)
        })
    }

    /// R-R8 and R-C4's checks of an execute, before anything runs.
    fn check_executable(&self, list: &CommandList<D, K>) -> Result<()> {
        if !Arc::ptr_eq(&list.device().shared, &self.device.shared) {
            return Err(AppError::CommandListNotExecutable.into());
        }
        let root = list.data();
        self.open
            .check_list(&root.body.rec.maps, &root.body.rec.queries)
    }

    /// CommandListExecute of a list [`ImmediateContext::check_executable`] accepted.
    fn execute_list(&mut self, list: &CommandList<D, K>) -> Result<()> {
        let ic = self;
        let root = list.data();
        let s = &*ic.device.shared;
        let guard = ic.device.shared.registry().ic_guard(&ic.token);
        // Views whose resource's identity moved since their last use are refreshed before
        // the replay uses them (R-X5), as before any other operation.
        if ic.rotations != 0 {
            let (token, imm) = (&mut ic.token, &mut ic.imm);
            ic.walk.each(root, |l| {
                for held in &l.body.held {
                    Self::refresh_view(s, token, imm, guard, held.view())?;
                }
                Ok::<bool, Error>(true)
            })?;
        }
        // Every list replayed references its objects in this buffer and waits for it.
        let (buffer, token) = (&mut ic.buffer, &mut ic.token);
        let nested = !root.body.rec.lists.is_empty();
        if nested {
            // A list stamped with this buffer already (executed earlier in it, or met
            // earlier in this walk) had its whole tree referenced then: skipped, unless a
            // rotation since may have moved its objects to allocations the buffer does
            // not list.
            ic.walk.each(root, |l| {
                if l.stamp.is(buffer.number) && !buffer.rotated {
                    return Ok::<bool, Error>(false);
                }
                Self::reference_list(buffer, token, s.registry(), guard, l);
                Ok(true)
            })?;
        } else if !root.stamp.is(buffer.number) || buffer.rotated {
            // Executed earlier in this buffer, the list's objects are referenced already
            // (the same rule as above): a list executed again costs nothing per object.
            Self::reference_list(buffer, token, s.registry(), guard, root);
        }
        let resolver = Resolver::new(
            s.registry(),
            guard,
            StateView::of(&ic.bindings),
            true,
            ic.buffer.number,
        );
        // The execute is in the buffer from here on (also if a hook below fails or panics):
        // the buffer is submitted, and the lists' memory waits for it.
        ic.buffer.operations += 1;
        // The resources the list's Map(DISCARD)s write (its maps, nested lists' included):
        // their bytes reach them in this buffer, which a Map(NO_OVERWRITE) here waits for
        // (R-M3). The list holds each.
        for &map in &root.body.rec.maps {
            if let Ok(view) = resolver.get(map) {
                view.entry().ic_side(&mut ic.token).discarded_in = ic.buffer.number;
            }
        }
        if s.mode() == ListMode::DriverBuilt {
            // The driver's whole job, whatever the list's length: it chains what it
            // built and leaves the clear state (R-C3). Every query the list ends (Finish
            // ended those it began, R-C4) ends in this buffer.
            for query in &root.body.rec.queries {
                // The list holds its queries: each is there.
                if let Ok(view) = resolver.get(*query) {
                    view.entry().ic_side(&mut ic.token).query_end = ic.buffer.number;
                }
            }
            let executed =
                s.driver()
                    .execute_command_list(&mut ic.imm, &root.body.private, &resolver);
            ic.unbind_all(guard);
            return executed;
        }
        let (imm, buffer, token) = (&mut ic.imm, &mut ic.buffer, &mut ic.token);
        let emulated = s.emulates_lists();
        let mut step = |step| match step {
            // An emulated list has no driver side: it starts with a clear-state, so that
            // it inherits nothing, as the driver's CommandListExecute would see to.
            ReplayStep::Enter(_) if emulated => {
                Self::clear_state_in_replay(s.driver(), imm, &resolver, buffer)
            }
            step => Self::replay(s.driver(), imm, &resolver, buffer, token, step),
        };
        let result = match nested {
            true => ic.walk.replay(root, step),
            // Nothing nested (the common case): the list's operations in order.
            false => step(ReplayStep::Enter(root)).and_then(|()| {
                root.body
                    .rec
                    .ops
                    .iter()
                    .try_for_each(|op| step(ReplayStep::Op(root, op)))
            }),
        };
        // Clear-state after the list, whatever happened in it (R-C3).
        let cleared = s.driver().execute(&mut ic.imm, &resolver, Op::ClearState);
        ic.unbind_all(guard);
        result.and(cleared)
    }

    /// A clear-state inside a replay: after a nested list (R-C3), or before an emulated
    /// list, which has no CommandListExecute of its own to start it from nothing.
    fn clear_state_in_replay(
        driver: &D,
        imm: &mut D::Immediate,
        resolver: &Resolver<'_, D>,
        buffer: &mut OpenBuffer,
    ) -> Result<()> {
        driver.execute(imm, resolver, Op::ClearState)?;
        buffer.operations += 1;
        Ok(())
    }

    /// One step of a list's replay (objects resolved through the lists' holds).
    #[inline]
    fn replay(
        driver: &D,
        imm: &mut D::Immediate,
        resolver: &Resolver<'_, D>,
        buffer: &mut OpenBuffer,
        token: &mut IcToken,
        step: ReplayStep<'_, D, K>,
    ) -> Result<()> {
        let (list, recorded) = match step {
            ReplayStep::Enter(list) => {
                return driver.execute_command_list(imm, &list.body.private, resolver);
            }
            ReplayStep::LeaveNested => {
                return Self::clear_state_in_replay(driver, imm, resolver, buffer);
            }
            ReplayStep::Op(list, recorded) => (list, recorded),
        };
        let payloads = &list.body.rec.payloads;
        let op = match recorded {
            Recorded::Command(command) => Op::Command(command),
            Recorded::Update {
                resource,
                offset,
                payload,
            } => Op::Update {
                resource: resolver.get(*resource)?,
                offset: *offset,
                // SAFETY: the payload was allocated in this list's arena, which is only
                // reset when the list is recycled or dropped, never while a list that
                // executes it is borrowed here.
                data: unsafe { payloads.bytes(*payload) },
            },
            Recorded::WriteDiscard { resource, payload } => Op::WriteDiscard {
                resource: resolver.get(*resource)?,
                // SAFETY: as above.
                data: unsafe { payloads.bytes(*payload) },
            },
            Recorded::Bind { point, object } => Op::Bind {
                point: *point,
                object: match object {
                    Some(h) => Some(resolver.get(*h)?),
                    None => None,
                },
            },
            Recorded::BeginQuery(q) => Op::BeginQuery(resolver.get(*q)?),
            Recorded::EndQuery(q) => {
                let view = resolver.get(*q)?;
                view.entry().ic_side(token).query_end = buffer.number;
                Op::EndQuery(view)
            }
            // The walk enters nested lists itself.
            Recorded::ExecuteList(_) => return Ok(()),
        };
        driver.execute(imm, resolver, op)?;
        buffer.operations += 1;
        Ok(())
    }

    /// GetData of an event query: `true` once the GPU has finished the buffer its End was
    /// recorded in. Like D3D's GetData without DONOTFLUSH, it flushes when that buffer is still
    /// open. A query never ended is an application error.
    pub fn query_signaled(&mut self, query: Handle<Query>) -> Result<bool> {
        captured!(
            answer self,
            Call::QuerySignaled(query),
            self.query_signaled_uncaptured(query)
        )
    }

    #[inline(always)]
    fn query_signaled_uncaptured(&mut self, query: Handle<Query>) -> Result<bool> {
        self.entry(|ic| {
            let end = {
                let guard = ic.device.shared.registry().ic_guard(&ic.token);
                let view = ic
                    .device
                    .shared
                    .registry()
                    .ic_live(&mut ic.token, query, guard)?;
                view.entry().ic_side(&mut ic.token).query_end
            };
            if end == 0 {
                return Err(AppError::InvalidState.into());
            }
            if end >= ic.buffer.number {
                ic.flush_inner()?;
            }
            Ok(ic.completed_fence()? >= end)
        })
    }

    /// Flush: submits the open command buffer if it holds anything, then runs every deferred
    /// destruction and deallocation the clocks allow, *even when the buffer was empty* (R-D2).
    pub fn flush(&mut self) -> Result<()> {
        let result = captured!(self, Call::Flush, self.flush_uncaptured());
        #[cfg(feature = "capture")]
        self.capture_write_out();
        result
    }

    #[inline(always)]
    fn flush_uncaptured(&mut self) -> Result<()> {
        self.entry(Self::flush_inner)
    }

    /// The flush, inside an entry point that checked the device is alive, or inside device
    /// destruction.
    fn flush_inner(&mut self) -> Result<()> {
        let _span = span!("flush");
        let number = self.buffer.number;
        let mut submitted = Ok(());
        let submits = self.buffer.operations > 0;
        if submits {
            self.reference_bindings();
        }
        let s = &*self.device.shared;
        if submits {
            let _span = span!("submit");
            s.driver().flush(&mut self.imm);
            submitted = s.kernel().submit(&Submission {
                fence: number,
                allocations: &self.buffer.allocations,
                operations: self.buffer.operations,
            });
            if submitted.is_ok() {
                self.last_submitted = number;
            }
        }
        let through = if submitted.is_ok() {
            self.buffer.number = number + 1;
            self.buffer.operations = 0;
            self.buffer.allocations.clear();
            self.buffer.rotated = false;
            s.publish_open_buffer(number + 1);
            number
        } else {
            // A buffer the kernel refused never reached it: it stays the open buffer, with its
            // operations and allocation list, and is flushed and submitted again at the next
            // flush; what it references waits for that (R-D1).
            number - 1
        };
        let (completed, fence_answer) = match self.completed_fence() {
            Ok(completed) => (completed, Ok(())),
            Err(e) => (self.completed, Err(e)),
        };
        let s = &*self.device.shared;
        // For deferred contexts recycling lists this context executed (their memory clock).
        s.list_clock().publish(through, completed);
        let clocks = Clocks {
            submitted_through: through,
            completed,
            drain: Drain::No,
        };
        {
            let _span = span!("deferred_destruction");
            Self::free_retired_lists(s, &mut self.lists_in_flight, false);
            // Entries unlinked at earlier flushes that no pinned reader can hold any more.
            s.registry().collect(&mut self.token);
            // Nothing retired, nothing waiting: no epoch pin (the common steady-state flush).
            if self.retire.has_work(s.registry()) {
                let guard = epoch::pin();
                Self::note_locked(&self.open, &mut self.locked);
                let (token, locked) = (&mut self.token, &self.locked);
                let pass = Self::pass(s, token, s.config().retire_clock, clocks, &guard, locked);
                self.retire.process(pass);
            }
        }
        if self.amortizer.after_flush(submits, Instant::now) {
            self.perform_amortized_processing();
        }
        submitted.and(fence_answer)
    }

    /// A pass over the retire queue on this context's device.
    fn pass<'a>(
        s: &'a DeviceShared<D, K>,
        token: &'a mut IcToken,
        clock: Clock,
        clocks: Clocks,
        guard: &'a Guard,
        locked: &'a [AllocationHandle],
    ) -> Pass<'a, D, K> {
        Pass {
            registry: s.registry(),
            token,
            driver: s.driver(),
            kernel: s.kernel(),
            clock,
            clocks,
            guard,
            locked,
        }
    }

    /// Frees command lists that ended while a buffer that executed them could still read
    /// their memory, once the list clock has passed them (or all of them, at device
    /// destruction).
    #[allow(clippy::vec_box)]
    fn free_retired_lists(
        s: &DeviceShared<D, K>,
        in_flight: &mut Vec<Box<ListNode<D, K>>>,
        all: bool,
    ) {
        if s.retired_lists().is_empty() && in_flight.is_empty() {
            return;
        }
        in_flight.extend(s.retired_lists().take_all());
        let mut i = 0;
        while i < in_flight.len() {
            if all || !in_flight[i].value.in_flight() {
                free_now(in_flight.swap_remove(i));
            } else {
                i += 1;
            }
        }
    }

    /// Amortised processing (R-A1): trims this context's pools down to their high
    /// watermarks, tells every deferred context to trim its own at its next Finish, and calls
    /// the kernel's callback.
    fn perform_amortized_processing(&mut self) {
        let _span = span!("amortize");
        self.retire.trim();
        let s = &*self.device.shared;
        self.rename_pool.trim(self.completed, |allocation, lock| {
            Self::give_back(s.kernel(), allocation, lock)
        });
        s.registry().amortize(&mut self.token);
        s.ask_deferred_to_trim();
        s.kernel()
            .perform_amortized_processing(ContextId::Immediate);
    }

    /// Deallocates an allocation the rename pool lets go of, its persistent lock ended first
    /// (R-M4).
    fn give_back(kernel: &K, allocation: AllocationHandle, lock: Option<CpuMapping>) {
        if let Some(lock) = lock {
            kernel.unlock(allocation, lock);
        }
        kernel.deallocate(allocation);
    }

    /// The end of a frame (the Present point): performs amortised processing if the frame
    /// went by without it while the context was active (R-A1: never starved for a frame).
    pub fn end_frame(&mut self) -> Result<()> {
        captured!(self, Call::EndFrame, self.end_frame_uncaptured())
    }

    #[inline(always)]
    fn end_frame_uncaptured(&mut self) -> Result<()> {
        self.entry(|ic| {
            ic.frame_boundary();
            Ok(())
        })
    }

    /// The Present point's part of amortised processing (R-A1): `end_frame`'s, and each
    /// present's.
    fn frame_boundary(&mut self) {
        if self.amortizer.end_frame(Instant::now()) {
            self.perform_amortized_processing();
        }
    }

    /// How many times this context performed amortised processing.
    pub fn amortized_count(&self) -> u64 {
        self.amortizer.count()
    }

    /// Gives back memory the context keeps beyond its high watermarks now (R-A1), and every
    /// allocation of its rename pool the GPU is done with (R-M5), as a runtime's Trim asks;
    /// flushes do the first by themselves when they perform amortised processing, and give
    /// back the pool's allocations that sat unused for a while.
    pub fn trim(&mut self) {
        #[cfg(feature = "capture")]
        self.capture_begin(Call::Trim);
        self.trim_uncaptured();
        #[cfg(feature = "capture")]
        self.capture_end(&Ok(()));
    }

    #[inline(always)]
    fn trim_uncaptured(&mut self) {
        self.retire.trim();
        let kernel = self.device.shared.kernel();
        self.rename_pool
            .release_done(self.completed, |allocation, lock| {
                Self::give_back(kernel, allocation, lock)
            });
        self.device.shared.registry().amortize(&mut self.token);
    }

    /// The driver's IC data of a live object (R-L3: only this thread touches it).
    pub fn ic_data_mut<T: ObjectKind>(&mut self, handle: Handle<T>) -> Result<&mut D::IcData> {
        self.check_alive()?;
        let guard = self.device.shared.registry().ic_guard(&self.token);
        // Only this context unlinks entries, and it cannot while `&mut self` is borrowed by
        // the result, so the entry outlives the result (see `ic_guard`).
        let view = self
            .device
            .shared
            .registry()
            .ic_live(&mut self.token, handle, guard)?;
        Ok(&mut view.entry().ic_side(&mut self.token).data)
    }

    /// Creates a primary on the immediate context's thread (R-P1).
    pub fn create_primary(&mut self, desc: ResourceDesc) -> Result<Handle<Resource>> {
        #[cfg(feature = "capture")]
        self.capture_written();
        let result = self.create_primary_uncaptured(desc);
        #[cfg(feature = "capture")]
        self.capture_device(|made| Call::CreatePrimary { desc, made }, &result);
        result
    }

    #[inline(always)]
    fn create_primary_uncaptured(&mut self, mut desc: ResourceDesc) -> Result<Handle<Resource>> {
        desc.flags |= crate::desc::ResourceFlags::PRIMARY;
        self.entry(|ic| {
            ic.device
                .create_object(&ObjectDesc::Resource(desc))
                .map(|h| h.cast())
        })
    }

    /// Destroys a primary synchronously (R-P1): if the open buffer references it, that buffer
    /// is submitted first (R-D1), then the driver's destroy hook runs and the kernel memory is
    /// deallocated inside this call.
    pub fn destroy_primary(&mut self, primary: Handle<Resource>) -> Result<()> {
        #[cfg(feature = "capture")]
        self.capture_written();
        let result = self.destroy_primary_uncaptured(primary);
        #[cfg(feature = "capture")]
        self.capture_device(|_| Call::DestroyPrimary(primary), &result);
        result
    }

    #[inline(always)]
    fn destroy_primary_uncaptured(&mut self, primary: Handle<Resource>) -> Result<()> {
        self.entry(|ic| {
            let last_buffer = {
                let guard = ic.device.shared.registry().ic_guard(&ic.token);
                let entry = ic.device.shared.registry().find(primary, guard)?;
                if !entry.is_primary() {
                    return Err(AppError::PrimaryMismatch.into());
                }
                if !entry.is_live() {
                    return Err(AppError::DoubleDestroy.into());
                }
                entry.ic_side(&mut ic.token).last_buffer
            };
            if last_buffer == ic.buffer.number {
                ic.flush_inner()?; // R-D1: the open buffer references it
            }
            // R-P1 deallocates inside this call; under the completed clock that means waiting
            // for the GPU to finish the last buffer that used the primary.
            if ic.device.shared.config().retire_clock == Clock::Completed
                && last_buffer != 0
                && ic.completed_fence()? < last_buffer
            {
                ic.device.shared.kernel().wait_for_fence(last_buffer)?;
            }
            let s = &*ic.device.shared;
            let guard = epoch::pin();
            let entry = s.registry().find(primary, &guard)?;
            if !entry.mark_destroyed() {
                return Err(AppError::DoubleDestroy.into());
            }
            if entry.ic_side(&mut ic.token).bound != 0 || !entry.try_seal() {
                // Bindings or views of a primary keep it: it goes through the queue like any
                // object.
                let slot = s
                    .registry()
                    .slot(primary.slot())
                    .expect("found entries have slots");
                slot.retire_tag.store(ic.buffer.number, Ordering::Relaxed);
                s.registry().retired.push(primary.slot(), |i| {
                    &s.registry().slot(i).expect("slot").next_retired
                });
                return Ok(());
            }
            // R-P1: destroyed and deallocated inside this call, whatever the clocks say (the GPU
            // is done with it, see above); the rest of the destruction runs even if a hook panics.
            let everything_due = Clocks {
                submitted_through: u64::MAX,
                completed: u64::MAX,
                drain: Drain::No,
            };
            // A primary mapped (as staging, say) stays allocated until its unlock (R-M4).
            Self::note_locked(&ic.open, &mut ic.locked);
            let (token, locked) = (&mut ic.token, &ic.locked);
            let mut pass = Self::pass(s, token, Clock::Submitted, everything_due, &guard, locked);
            let mut sealed = scopeguard::guard(&mut pass, |pass| {
                pass.registry.seal(pass.token, pass.guard);
            });
            ic.retire.destroy_now(&mut sealed, primary.slot(), entry);
            Ok(())
        })
    }

    /// DestroyDevice (R-D3): submits what is open, waits for the GPU to finish the last
    /// buffer, then destroys every object still pending or alive (dependents first) and
    /// deallocates all kernel memory before returning. Afterwards every call on the device,
    /// from any thread, fails with [`Error::DeviceRemoved`].
    ///
    /// While deferred contexts of the device are alive it is an application error and
    /// changes nothing: their context-local handles must close before the objects behind
    /// them are destroyed (R-H2). Dropping the immediate context destroys the device
    /// regardless, with one difference: what a live context holds (the objects its handles
    /// and lists name) is left to it, since a call on it that began before the removal may
    /// still hand those objects to a hook. The context closes its handles when its recording
    /// ends, every later call on it answers [`Error::DeviceRemoved`], and the objects it
    /// held are destroyed and deallocated when the device's last reference goes, on that
    /// thread. No hook hears an object after its destroy hook, whatever the threads do.
    pub fn destroy_device(&mut self) -> Result<()> {
        let result = captured!(self, Call::DestroyDevice, self.destroy_device_uncaptured());
        #[cfg(feature = "capture")]
        self.capture_write_out();
        result
    }

    #[inline(always)]
    fn destroy_device_uncaptured(&mut self) -> Result<()> {
        let result = if self.device.shared.has_live_deferred() {
            Err(AppError::DeferredContextsAlive.into())
        } else {
            self.destroy_device_inner()
        };
        self.report(result)
    }

    fn destroy_device_inner(&mut self) -> Result<()> {
        match self.life {
            Life::Destroyed => return Ok(()),
            // A hook panicked during the drain: finish it.
            Life::Draining => {
                self.drain();
                return Ok(());
            }
            Life::Open => {}
        }
        let flushed = self.flush_inner();
        // Maps of the resources' own memory end before that memory goes (R-M4).
        self.unlock_all();
        let s = &*self.device.shared;
        let waited = if self.last_submitted > 0 {
            s.kernel().wait_for_fence(self.last_submitted)
        } else {
            Ok(())
        };
        // Nothing reads what renames left (the GPU is idle, or the wait failed and the
        // device is lost either way).
        self.rename_pool
            .drain(|allocation, lock| Self::give_back(s.kernel(), allocation, lock));
        self.life = Life::Draining;
        s.registry().mark_removed();
        // The GPU is idle: every retired list's memory can go, and lists ended from now on
        // free themselves.
        self.lists_in_flight.extend(s.retired_lists().close());
        self.drain();
        flushed.and(waited)
    }

    /// Device destruction's drain (R-D3): every retired list freed, every object still
    /// linked destroyed (dependents first) and every allocation deallocated. Each step
    /// leaves its queue before its hook runs, so after a hook panics, calling this again
    /// (the immediate context's drop does) finishes the rest without repeating anything.
    ///
    /// What a live deferred context may still hear is left to it: a context in a call that
    /// passed its device check before the removal can hand the driver any object it holds, so
    /// while one is alive ([`Drain::LeaveHeld`]) held objects stay, and the device's last
    /// reference destroys them (`DeviceShared`'s drop). The count is read after the removal,
    /// so that a context it misses finds the device removed at its first call
    /// (`Removal::contexts_alive_after_removal`).
    fn drain(&mut self) {
        let _span = span!("deferred_destruction");
        let s = &*self.device.shared;
        Self::free_retired_lists(s, &mut self.lists_in_flight, true);
        let guard = epoch::pin();
        // The context's own bindings keep what they bind: their counts end first, so that only
        // the holds of others decide what a drain leaves.
        let registry = s.registry();
        for (_, handle) in self.bindings.iter() {
            if let Ok(view) = registry.ic_held(&mut self.token, handle, &guard) {
                view.entry().ic_side(&mut self.token).bound -= 1;
            }
        }
        self.bindings.clear();
        let drain = match registry.removal().contexts_alive_after_removal() {
            true => Drain::LeaveHeld,
            false => Drain::Everything,
        };
        // Every entry still linked is destroyed now: the live ones as if by the application,
        // and also those destroyed by a thread that has not pushed them onto the retire
        // stack yet (it may never be collected again). Each slot is queued once.
        self.retire.collect(s.registry());
        let mut queued = self.retire.queued_slots();
        let (retire, token) = (&mut self.retire, &mut self.token);
        s.registry().for_each_linked(&guard, |index, entry| {
            // Every persistent lock ends before anything is deallocated (R-M4), also those
            // of the objects left to live deferred contexts: no Map comes after this.
            if let (Some(allocation), Some(lock)) =
                (entry.allocation(), entry.ic_side(token).lock.take())
            {
                s.kernel().unlock(allocation, lock);
            }
            if entry.claim_for_drain() && queued.insert(index) {
                retire.push_now(index);
            }
        });
        let clocks = Clocks {
            submitted_through: u64::MAX,
            completed: u64::MAX,
            drain,
        };
        // What `unlock_all` left locked (an unlock that panicked) stays allocated.
        Self::note_locked(&self.open, &mut self.locked);
        let (token, locked) = (&mut self.token, &self.locked);
        let pass = Self::pass(s, token, s.config().retire_clock, clocks, &guard, locked);
        self.retire.process(pass);
        self.life = Life::Destroyed;
    }
}

impl<D: Driver, K: Kernel> Drop for ImmediateContext<D, K> {
    fn drop(&mut self) {
        let result = self.destroy_device_inner();
        if let Err(error) = result {
            self.device
                .shared
                .kernel()
                .set_error(ContextId::Immediate, error);
        }
        // What was recorded since the last flush, written (the drop itself is no call).
        #[cfg(feature = "capture")]
        self.capture_write_out();
    }
}

/// The context's stream in the device's capture (feature `capture`): each public call
/// starts its record first thing ([`ImmediateContext::capture_begin`]) and ends it with its
/// answer; a flush, a present and device destruction write everything recorded so far.
#[cfg(feature = "capture")]
impl<D: Driver, K: Kernel> ImmediateContext<D, K> {
    /// Starts the record of `call`. First thing in every public call that records one.
    #[inline(always)]
    pub(super) fn capture_begin(&mut self, call: crate::capture::Call<'_, &D::Command>) {
        if let Some(capture) = &mut self.capture {
            // SAFETY: first thing in a call of this context: the bytes of its open Maps are
            // locked until their Unmaps, and were touched by nothing but the application
            // since (`ContextCapture::settle_maps`).
            unsafe { capture.begin(&call) }
        }
    }

    /// Ends the record [`ImmediateContext::capture_begin`] started with the call's answer.
    pub(super) fn capture_end<T>(&mut self, result: &Result<T>) {
        if let Some(capture) = &mut self.capture {
            capture.commit(result.into());
        }
    }

    /// After a call that answers a value, where it succeeded: the value recorded.
    pub(super) fn capture_answer<T: crate::capture::answer::Answer>(&mut self, result: &Result<T>) {
        if let (Some(capture), Ok(value)) = (&mut self.capture, result) {
            capture.answer(value.answer());
        }
    }

    /// Records what the application wrote through the Maps still open, first thing in a
    /// call whose own record goes to the device's stream.
    pub(super) fn capture_written(&mut self) {
        if let Some(capture) = &mut self.capture {
            // SAFETY: as in `capture_begin`.
            unsafe { capture.settle_maps(false) }
        }
    }

    /// Records a call of this context that belongs to the device's stream (a primary's
    /// create or destroy), with its answer.
    pub(super) fn capture_device<T: CaptureId>(
        &mut self,
        call: impl FnOnce(u64) -> crate::capture::Call<'static, ()>,
        result: &Result<T>,
    ) {
        if let Some(capture) = &self.capture {
            let made = result.as_ref().map_or(0, CaptureId::capture_id);
            capture.sink().device_call(call(made), result.into());
        }
    }

    /// After a present, where the sink checks presents: the surface's checksum recorded.
    pub(super) fn capture_present_checksum(&mut self, surface: Handle<Resource>) {
        let checks = self
            .capture
            .as_ref()
            .is_some_and(|capture| capture.sink().checks_presents());
        if !checks {
            return;
        }
        let result = self.surface_checksum(surface);
        let crc = *result.as_ref().unwrap_or(&0);
        if let Some(capture) = &mut self.capture {
            let call: crate::capture::Call<'_, &D::Command> = crate::capture::Call::Checksum {
                resource: surface,
                crc,
            };
            // SAFETY: no Map is pending here: the present before it was this context's
            // call, and recorded any.
            unsafe { capture.begin(&call) };
            capture.commit((&result).into());
        }
    }

    /// Writes everything recorded so far to the capture's output.
    pub(super) fn capture_write_out(&mut self) {
        if let Some(capture) = &mut self.capture {
            capture.write_out();
        }
    }

    /// The record of a rotation: its resources, up to [`crate::capture::MAX_ROTATED`].
    fn rotate_call(
        resources: &[Handle<Resource>],
    ) -> crate::capture::Call<'static, &'static D::Command> {
        let mut rotated = [None; crate::capture::MAX_ROTATED];
        for (slot, &h) in rotated.iter_mut().zip(resources) {
            *slot = Some(h);
        }
        let count = resources.len().min(crate::capture::MAX_ROTATED) as u8;
        crate::capture::Call::Rotate {
            count,
            resources: rotated,
        }
    }

    /// A Map of `resource` of type `ty` that `map` makes, recorded, with the bytes it
    /// hands out noted, to be recorded at its Unmap or before a call that may end it (but a
    /// READ Map's, which the application only reads).
    pub(super) fn captured_map(
        &mut self,
        resource: Handle<Resource>,
        ty: crate::map_type::MapType,
        flags: crate::map_type::MapFlags,
        map: impl FnOnce(&mut Self) -> Result<&mut [u8]>,
    ) -> Result<&mut [u8]> {
        if let Some(capture) = &mut self.capture {
            // SAFETY: first thing in a call of this context, as in `capture_begin`.
            unsafe { capture.begin_map() }
        }
        let result = map(self).map(|bytes| bytes as *mut [u8]);
        if let Some(capture) = &mut self.capture {
            // Where the bytes are, but a READ Map's, which are not recorded.
            let bytes = match ty {
                crate::map_type::MapType::Read => None,
                _ => result.as_ref().ok().copied(),
            };
            capture.end_map(resource, ty, flags, (&result).into(), bytes);
        }
        let bytes = result?;
        // SAFETY: the memory `map` handed out under the `&mut self` borrow that just ended,
        // alive until the next call of this context, which the returned borrow of `&mut self`
        // prevents; nothing touched it since (the capture only noted the pointer, and reads
        // through it only at that next call).
        Ok(unsafe { &mut *bytes })
    }
}

/// What a call that makes an object answers, as its capture names it.
#[cfg(feature = "capture")]
pub(super) trait CaptureId {
    /// The capture's id of what was made (0 for nothing).
    fn capture_id(&self) -> u64;
}

#[cfg(feature = "capture")]
impl CaptureId for () {
    fn capture_id(&self) -> u64 {
        0
    }
}

#[cfg(feature = "capture")]
impl<T: crate::handle::ObjectKind> CaptureId for Handle<T> {
    fn capture_id(&self) -> u64 {
        self.to_bits()
    }
}
