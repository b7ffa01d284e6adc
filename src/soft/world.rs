//! The soft world: kernel memory, the fence timeline, the protocol checks and the trace.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::driver::ObjectCount;
use std::thread::ThreadId;

use crate::dxgi::{PresentCallback, PresentStatus, ResidencyStatus};
use crate::error::Error;
use crate::handle::HandleType;
use crate::kernel::{AllocationHandle, ContextId, DeferredId};
use crate::registry::retire::Clock;

use super::built::Built;
use super::lifetime::Lifetimes;

/// How the simulated GPU completes submitted buffers.
///
/// The default is [`Gpu::Manual`]: nothing completes on its own, so a loop that polls the
/// GPU without waiting (a staging Map with [`crate::MapFlags::DO_NOT_WAIT`] until it stops
/// answering [`crate::Error::WasStillDrawing`], [`crate::ImmediateContext::query_signaled`]
/// until it answers `true`) spins forever unless something completes the buffer: the test
/// itself ([`SoftWorld::complete_through`], [`SoftWorld::complete_all`]), or a config with
/// [`Gpu::Immediate`] (done at submit) or [`Gpu::PollLag`] (done after that many polls).
///
/// ```
/// use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig};
/// use cmdlist::{DeviceConfig, Error, MapFlags, MapType, ResourceDesc, Usage};
///
/// let config = SoftConfig { gpu: Gpu::PollLag(8), ..SoftConfig::default() };
/// let (device, mut ic, world) = soft::device(config, DeviceConfig::default())?;
/// let src = device.create_resource(ResourceDesc { byte_size: 64, ..Default::default() })?;
/// let desc = ResourceDesc { byte_size: 64, usage: Usage::Staging, ..Default::default() };
/// let readback = device.create_resource(desc)?;
/// ic.update(src, 0, &[7; 64])?;
/// ic.command(&SoftCommand::Copy { dst: readback, src })?; // in the open buffer
/// let mut polls = 0;
/// let bytes = loop {
///     match ic.map(readback, MapType::Read, MapFlags::DO_NOT_WAIT) {
///         Ok(bytes) => break bytes.to_vec(),
///         // Under `Gpu::Manual`, forever: call `world.complete_all()` here instead.
///         Err(Error::WasStillDrawing) => polls += 1,
///         Err(e) => return Err(e),
///     }
/// };
/// ic.unmap(readback)?;
/// assert_eq!(bytes, [7; 64]);
/// assert!(polls > 0);
/// # ic.destroy_device()?;
/// # Ok::<(), Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Gpu {
    /// Only when told ([`SoftWorld::complete_through`], [`SoftWorld::complete_all`]) or when
    /// the engine waits on a fence ([`crate::Kernel::wait_for_fence`]). The default: a
    /// DO_NOT_WAIT poll never sees the buffer done until the test completes it.
    #[default]
    Manual,
    /// At submit: a poll finds every submitted buffer done.
    Immediate,
    /// A buffer completes after this many polls of the completed fence since its submit.
    PollLag(u32),
}

/// Settings of a soft world.
///
/// The default is the replayed list mode ([`crate::ListMode::Replayed`]: the driver has
/// command lists and the engine replays them), a manual GPU clock, tracing and every check
/// on; the main job's default mode, where the driver builds its lists, is
/// `SoftConfig::default().with_list_mode(ListMode::DriverBuilt)`
/// ([`SoftConfig::with_list_mode`]).
#[derive(Clone, Debug)]
pub struct SoftConfig {
    /// The fence timeline: [`Gpu::Manual`] by default, so a DO_NOT_WAIT poll loop
    /// ([`crate::MapFlags::DO_NOT_WAIT`]) spins until the test completes the buffer
    /// ([`SoftWorld::complete_through`], [`SoftWorld::complete_all`]); [`Gpu::Immediate`] or
    /// [`Gpu::PollLag`] make it complete on its own (the type's documentation).
    pub gpu: Gpu,
    /// Whether deallocating while a submitted, unfinished buffer references the allocation is
    /// a violation (true for [`crate::Clock::Completed`] devices).
    pub strict_gpu: bool,
    /// Record every hook in the trace, and check that every driver object, deferred-context
    /// state and command list's memory ends exactly once (`soft::lifetime`). Off, the
    /// destroy hook takes no lock (benches) and those lifetimes are not checked.
    pub trace: bool,
    /// The driver answers this size, not listed in its table, for this handle type (R-H4
    /// tests).
    pub unlisted_cls_size: Option<HandleType>,
    /// The device's [`crate::DeviceConfig::list_clock`], which the soft driver holds the
    /// engine to: it flags a recycle of a list before the buffer that executed it passed
    /// this clock. [`crate::soft::device`] sets it from the device's config; a device made
    /// with [`crate::Device::new`] over [`crate::soft::new`]'s driver needs the same clock
    /// here.
    pub list_clock: Clock,
    /// RecycleCreateCommandList and RecycleCreateDeferredContext answer out of memory
    /// (R-R3 tests).
    pub recycle_create_fails: bool,
    /// Resources get no kernel memory (CalcPrivate*Size answers 0 for them), so a resource
    /// of any byte size can be created: for tests of sizes no memory could hold.
    pub resources_without_memory: bool,
    /// The driver records command lists itself: its caps include `COMMANDLISTS` and
    /// `COMMANDLISTS_BUILD_2`. Off, it implements the immediate context only, the engine
    /// emulates deferred contexts ([`crate::Device::emulates_command_lists`]), and any
    /// deferred-context or command-list hook it is called on is a violation. On by default;
    /// [`SoftConfig::from_env`] turns it off for `CMDLIST_SOFT_EMULATED=1`.
    pub command_lists: bool,
    /// With [`SoftConfig::command_lists`], the driver builds its lists itself
    /// ([`crate::ListMode::DriverBuilt`]): its deferred context encodes every recorded call
    /// into a buffer of its own, using what it stored in each context-local block at open,
    /// and its immediate context runs that buffer at CommandListExecute. The world then flags
    /// an operation of such a list that reaches [`crate::Driver::execute`], a
    /// deferred-context hook that writes immediate-context data, a command executed twice
    /// or never, and a context-local block used after its close. Off (the default; on from
    /// [`SoftConfig::from_env`] for `CMDLIST_SOFT_DRIVER_BUILT=1`), the engine records and
    /// replays ([`crate::ListMode::Replayed`]).
    pub driver_built: bool,
    /// The Map types beyond D3D11.0's the driver reports ([`crate::Driver::map_caps`],
    /// R-M3): all by default, as a D3D11.1 driver's.
    pub map_caps: crate::MapCaps,
}

/// The plain settings: a GPU completed by hand ([`Gpu::Manual`]: a DO_NOT_WAIT poll loop
/// spins until the test completes the buffer), strict about R-D4, tracing, and a driver that
/// records command lists and lets the engine replay them ([`crate::ListMode::Replayed`]). The
/// environment plays no part; [`SoftConfig::from_env`] is the constructor that reads it.
impl Default for SoftConfig {
    fn default() -> Self {
        SoftConfig {
            gpu: Gpu::Manual,
            strict_gpu: true,
            trace: true,
            unlisted_cls_size: None,
            list_clock: Clock::Completed,
            recycle_create_fails: false,
            resources_without_memory: false,
            command_lists: true,
            driver_built: false,
            map_caps: crate::MapCaps::all(),
        }
    }
}

/// The environment variable that asks for a driver without command lists.
const EMULATED: &str = "CMDLIST_SOFT_EMULATED";
/// The environment variable that asks for a driver that builds its own command lists.
const DRIVER_BUILT: &str = "CMDLIST_SOFT_DRIVER_BUILT";

impl SoftConfig {
    /// [`SoftConfig::default`] in the driver kind the environment asks for, so that one test
    /// suite runs against each kind of driver the engine serves (R-C3 for drivers without
    /// command lists, [`crate::ListMode`] for the others):
    ///
    /// - `CMDLIST_SOFT_EMULATED=1`: a driver without command lists
    ///   ([`SoftConfig::command_lists`] off; the engine emulates deferred contexts).
    /// - `CMDLIST_SOFT_DRIVER_BUILT=1`: a driver that builds its own lists
    ///   ([`SoftConfig::driver_built`] on, [`crate::ListMode::DriverBuilt`]).
    /// - Neither set, or either set to `0` or to nothing: the default, a driver whose lists
    ///   the engine records and replays ([`crate::ListMode::Replayed`]).
    ///
    /// Any other value (`yes`, `true`, ` 1`, a value that is not Unicode) is refused rather
    /// than read as off, and so are both at `1`: a driver without command lists builds none.
    ///
    /// ```
    /// use cmdlist::soft::{self, SoftConfig};
    /// use cmdlist::DeviceConfig;
    ///
    /// // `CMDLIST_SOFT_EMULATED=1 cargo test` runs this against the engine's emulation.
    /// let (device, _ic, _world) = soft::device(SoftConfig::from_env()?, DeviceConfig::default())?;
    /// println!("emulated command lists: {}", device.emulates_command_lists());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_env() -> Result<SoftConfig, SoftEnvError> {
        let emulated = std::env::var_os(EMULATED);
        let driver_built = std::env::var_os(DRIVER_BUILT);
        SoftConfig::from_vars(emulated.as_deref(), driver_built.as_deref())
    }

    /// [`SoftConfig::from_env`] over the two variables' values (`None` when unset).
    fn from_vars(
        emulated: Option<&std::ffi::OsStr>,
        driver_built: Option<&std::ffi::OsStr>,
    ) -> Result<SoftConfig, SoftEnvError> {
        let emulated = switch(EMULATED, emulated)?;
        let driver_built = switch(DRIVER_BUILT, driver_built)?;
        if emulated && driver_built {
            return Err(SoftEnvError::Contradictory);
        }
        let mode = match (emulated, driver_built) {
            (true, _) => crate::ListMode::Emulated,
            (false, true) => crate::ListMode::DriverBuilt,
            (false, false) => crate::ListMode::Replayed,
        };
        Ok(SoftConfig::default().with_list_mode(mode))
    }

    /// This config with the driver in list mode `mode`: without command lists
    /// ([`crate::ListMode::Emulated`]), with lists the engine replays, or with lists it
    /// builds itself ([`SoftConfig::command_lists`], [`SoftConfig::driver_built`]).
    pub fn with_list_mode(self, mode: crate::ListMode) -> Self {
        SoftConfig {
            command_lists: mode.has_driver_lists(),
            driver_built: mode == crate::ListMode::DriverBuilt,
            ..self
        }
    }
}

/// Whether the switch `variable` of value `value` is on: unset, empty and `0` are off, `1` is
/// on, anything else is refused.
fn switch(variable: &'static str, value: Option<&std::ffi::OsStr>) -> Result<bool, SoftEnvError> {
    let Some(value) = value else {
        return Ok(false);
    };
    match value.to_str() {
        Some("" | "0") => Ok(false),
        Some("1") => Ok(true),
        _ => Err(SoftEnvError::Unrecognised {
            variable,
            value: value.to_string_lossy().into_owned(),
        }),
    }
}

/// Why [`SoftConfig::from_env`] refused the environment.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SoftEnvError {
    /// A variable holds a value other than `0`, `1` or nothing.
    Unrecognised {
        /// The variable: `CMDLIST_SOFT_EMULATED` or `CMDLIST_SOFT_DRIVER_BUILT`.
        variable: &'static str,
        /// Its value (a value that is not Unicode with its invalid bytes replaced by U+FFFD).
        value: String,
    },
    /// Both variables are `1`: a driver without command lists cannot build them.
    Contradictory,
}

impl std::fmt::Display for SoftEnvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SoftEnvError::Unrecognised { variable, value } => write!(
                f,
                "{variable}={value:?} is not understood: set it to 1 (on) or 0 (off), or unset it"
            ),
            SoftEnvError::Contradictory => write!(
                f,
                "{EMULATED}=1 (a driver without command lists) and {DRIVER_BUILT}=1 (a driver \
                 that builds its command lists) contradict each other: set at most one"
            ),
        }
    }
}

impl std::error::Error for SoftEnvError {}

/// A hook or callback, as recorded in the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Hook {
    /// Driver: CalcPrivate*Size.
    CalcPrivateSize,
    /// Driver: CalcDeferredContextHandleSize.
    CalcDeferredContextHandleSize,
    /// Driver: Create* of an object (IC handle).
    CreateObject,
    /// Driver: Destroy* of an object (its real destruction).
    DestroyObject,
    /// Driver: one operation executed on the immediate context.
    Execute,
    /// Driver: the IC's buffer closed before submit.
    Flush,
    /// Kernel: allocate.
    Allocate,
    /// Kernel: deallocate.
    Deallocate,
    /// Kernel: submit (render callback).
    Submit,
    /// Kernel: wait for a fence.
    WaitForFence,
    /// Kernel: set-error.
    SetError,
    /// Kernel: perform-amortized-processing.
    AmortizedProcessing,
    /// Driver: CreateDeferredContext.
    CreateDeferredContext,
    /// Driver: DestroyDeferredContext.
    DestroyDeferredContext,
    /// Driver: a context-local handle opened (the DC's Create*).
    OpenLocal,
    /// Driver: an open context-local handle used again.
    UseLocal,
    /// Driver: a context-local handle closed (the DC's Destroy*).
    CloseLocal,
    /// Driver: CalcPrivateCommandListSize.
    CalcPrivateCommandListSize,
    /// Driver: CreateCommandList.
    CreateCommandList,
    /// Driver: DestroyCommandList.
    DestroyCommandList,
    /// Driver: AbandonCommandList.
    AbandonCommandList,
    /// Driver: a binding undone during Abandon.
    AbandonUnbind,
    /// Driver: RecycleCommandList.
    RecycleCommandList,
    /// Driver: RecycleCreateCommandList.
    RecycleCreateCommandList,
    /// Driver: RecycleDestroyCommandList.
    RecycleDestroyCommandList,
    /// Driver: RecycleCreateDeferredContext.
    RecycleCreateDeferredContext,
    /// Driver: CommandListExecute's start.
    ExecuteCommandList,
    /// Driver: CommandListExecute on a deferred context (recorded there).
    ExecuteCommandListDeferred,
    /// Driver: a call recorded on a deferred context, heard on the recording thread
    /// (`object`: the object id the context-local block of the first object it names
    /// holds, as the driver read it there).
    RecordDeferred,
    /// Driver: Map(DISCARD) on a deferred context whose driver builds its lists.
    MapDiscardDeferred,
    /// Driver: Map(NO_OVERWRITE) on a deferred context whose driver builds its lists.
    MapNoOverwriteDeferred,
    /// Kernel: an allocation locked for the CPU (a Map of the resource's own memory, R-M4).
    Lock,
    /// Kernel: its unlock.
    Unlock,
    /// Kernel: the present callback (R-X1).
    Present,
    /// Kernel: the set-display-mode callback (R-X2).
    SetDisplayMode,
    /// Kernel: the set-priority callback (R-X3).
    SetPriority,
    /// Kernel: the query-residency callback (R-X4).
    QueryResidency,
    /// Driver: RotateResourceIdentities' rotation of IC data (R-X5); `state` is how many
    /// resources.
    RotateIdentities,
    /// Driver: a view refreshed after its resource's identity changed (R-X5).
    RefreshView,
    /// Driver: a Map(DISCARD) on the immediate context renamed a resource (R-M5);
    /// `allocation` is the one it left (the engine's rename pool keeps it).
    Renamed,
}

impl Hook {
    /// Whether only a driver that records command lists has this hook (caps with
    /// `COMMANDLISTS`): an engine that emulates them calls none of these
    /// ([`SoftConfig::command_lists`]).
    pub fn needs_command_lists(self) -> bool {
        matches!(
            self,
            Hook::CalcDeferredContextHandleSize
                | Hook::CalcPrivateCommandListSize
                | Hook::ExecuteCommandList
                | Hook::ExecuteCommandListDeferred
                | Hook::RecordDeferred
                | Hook::MapDiscardDeferred
                | Hook::MapNoOverwriteDeferred
                | Hook::CreateDeferredContext
                | Hook::DestroyDeferredContext
                | Hook::AbandonUnbind
                | Hook::OpenLocal
                | Hook::UseLocal
                | Hook::CloseLocal
                | Hook::CreateCommandList
                | Hook::DestroyCommandList
                | Hook::AbandonCommandList
                | Hook::RecycleCommandList
                | Hook::RecycleCreateCommandList
                | Hook::RecycleDestroyCommandList
                | Hook::RecycleCreateDeferredContext
        )
    }
}

/// One recorded hook call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// Which hook.
    pub hook: Hook,
    /// The calling thread.
    pub thread: ThreadId,
    /// The soft object id involved (0: none).
    pub object: u64,
    /// The handle type involved, if any.
    pub ty: Option<HandleType>,
    /// The allocation involved (0: none).
    pub allocation: u64,
    /// The fence involved (0: none).
    pub fence: u64,
    /// How many bindings the state-refresh query answered during the hook (R-C1, R-C3).
    pub state: usize,
    /// The deferred context involved, for deferred-context hooks.
    pub context: Option<DeferredId>,
}

impl TraceEvent {
    /// A call of `hook` on the calling thread that names nothing yet; the methods below add
    /// what it names.
    pub(crate) fn of(hook: Hook) -> Self {
        TraceEvent {
            hook,
            thread: std::thread::current().id(),
            object: 0,
            ty: None,
            allocation: 0,
            fence: 0,
            state: 0,
            context: None,
        }
    }

    pub(crate) fn object(self, object: u64) -> Self {
        TraceEvent { object, ..self }
    }

    pub(crate) fn ty(self, ty: HandleType) -> Self {
        TraceEvent {
            ty: Some(ty),
            ..self
        }
    }

    pub(crate) fn allocation(self, allocation: u64) -> Self {
        TraceEvent { allocation, ..self }
    }

    pub(crate) fn fence(self, fence: u64) -> Self {
        TraceEvent { fence, ..self }
    }

    /// How many bindings the state-refresh query answered during the hook.
    pub(crate) fn state(self, bindings: usize) -> Self {
        TraceEvent {
            state: bindings,
            ..self
        }
    }

    pub(crate) fn context(self, context: DeferredId) -> Self {
        TraceEvent {
            context: Some(context),
            ..self
        }
    }
}

/// A broken rule, as the soft kernel saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The rule id (`R-D1`, ...) or a short name (`double-free`, `leak`).
    pub rule: &'static str,
    /// What happened.
    pub what: String,
}

#[derive(Debug)]
pub(crate) struct Allocation {
    pub(crate) bytes: Vec<u8>,
    /// Referenced by the open (unsubmitted) IC buffer.
    pub(crate) in_open_buffer: bool,
    /// The newest submitted fence that referenced it.
    pub(crate) last_submitted: u64,
    pub(crate) ever_referenced: bool,
}

/// What the soft kernel's DXGI callbacks saw, and what tests set for them.
#[derive(Debug, Default)]
pub(crate) struct DxgiRecords {
    /// Every present callback, in order, while tracing.
    pub(crate) presents: Vec<PresentCallback>,
    /// The bytes of the newest presented allocation, as the present callback read them:
    /// the screen.
    pub(crate) screen: Option<Vec<u8>>,
    /// The status the present callback answers.
    pub(crate) present_status: PresentStatus,
    /// Every set-display-mode callback's primary allocation.
    pub(crate) display_modes: Vec<AllocationHandle>,
    /// Every set-priority callback: the allocations and the priority.
    pub(crate) priorities: Vec<(Vec<AllocationHandle>, u32)>,
    /// Residency per allocation id (absent: in GPU memory).
    pub(crate) residency: HashMap<u64, ResidencyStatus>,
}

/// A kernel lock (R-M4): its flags and, for a Map(NO_OVERWRITE)'s, the bytes copied in.
pub(crate) type Lock = (crate::mapping::LockFlags, Option<Box<[u8]>>);

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) next_allocation: u64,
    pub(crate) next_object: u64,
    pub(crate) allocations: HashMap<u64, Allocation>,
    /// The DXGI callbacks' records and settings (R-X1..R-X4).
    pub(crate) dxgi: DxgiRecords,
    pub(crate) open_refs: Vec<u64>,
    pub(crate) submitted: VecDeque<(u64, u32)>,
    pub(crate) last_submitted: u64,
    pub(crate) completed: u64,
    pub(crate) ic_thread: Option<ThreadId>,
    /// The immediate context is gone (its driver state dropped): deallocations may then
    /// come from the thread that lets the device's last reference go.
    pub(crate) ic_ended: bool,
    pub(crate) violations: Vec<Violation>,
    pub(crate) errors: Vec<(ContextId, Error)>,
    pub(crate) trace: Vec<TraceEvent>,
    pub(crate) submits: u64,
    pub(crate) amortized: u64,
    /// Command lists executed: list id -> the fence of the buffer that executed it last
    /// (0 while that buffer is open).
    pub(crate) list_refs: HashMap<u64, u64>,
    /// Lists executed in the open buffer.
    pub(crate) open_lists: Vec<u64>,
    /// What the immediate context's driver state has bound: set by binds, emptied by
    /// clear-state and at the start of each list's execute (a list inherits nothing).
    pub(crate) ic_bound: BoundPoints,
    /// The last buffer number the hooks were told since the last submit (`Resolver::buffer`):
    /// the submit must carry it as its fence.
    pub(crate) open_buffer: Option<u64>,
    /// Scratch bytes for copies (capacity kept).
    pub(crate) scratch: Vec<u8>,
    /// The reference Blt's working memory (kept).
    pub(crate) blt_scratch: crate::dxgi::reference::BltScratch,
    /// What the driver handed out and how it ended (checked while tracing).
    pub(crate) lifetimes: Lifetimes,
    /// Driver-built lists' buffers, by list id.
    pub(crate) built: HashMap<u64, Built>,
    /// The stack of a driver-built list's run (capacity kept).
    pub(crate) run_stack: Vec<(Built, usize)>,
    /// The serial of the newest packet encoded.
    pub(crate) next_serial: u64,
    /// Context-local handles open: (context, object id) to the id of the object it depends
    /// on (a view's resource; 0: none).
    pub(crate) open_locals: HashMap<(u32, u64), u64>,
    /// Allocations the kernel has locked for the CPU (R-M4), with the lock's flags and, for
    /// a Map(NO_OVERWRITE)'s, the bytes copied in (the unlock copies back what differs).
    pub(crate) locked: HashMap<u64, Lock>,
}

/// What the soft driver's immediate context has bound, point by point: a vector kept
/// sorted, whose memory a clear-state keeps (binding and clearing every frame allocates
/// nothing).
#[derive(Debug, Default)]
pub(crate) struct BoundPoints(Vec<(crate::bind::BindPoint, crate::handle::AnyHandle)>);

impl BoundPoints {
    pub(crate) fn get(&self, point: &crate::bind::BindPoint) -> Option<&crate::handle::AnyHandle> {
        let at = self.0.binary_search_by(|(p, _)| p.cmp(point)).ok()?;
        Some(&self.0[at].1)
    }

    pub(crate) fn insert(
        &mut self,
        point: crate::bind::BindPoint,
        object: crate::handle::AnyHandle,
    ) -> Option<crate::handle::AnyHandle> {
        match self.0.binary_search_by(|(p, _)| p.cmp(&point)) {
            Ok(at) => Some(core::mem::replace(&mut self.0[at].1, object)),
            Err(at) => {
                self.0.insert(at, (point, object));
                None
            }
        }
    }

    pub(crate) fn remove(
        &mut self,
        point: &crate::bind::BindPoint,
    ) -> Option<crate::handle::AnyHandle> {
        let at = self.0.binary_search_by(|(p, _)| p.cmp(point)).ok()?;
        Some(self.0.remove(at).1)
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    /// How many points are bound.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The object bound at the `at`-th bound point, in point order.
    pub(crate) fn object_at(&self, at: usize) -> Option<crate::handle::AnyHandle> {
        self.0.get(at).map(|&(_, object)| object)
    }
}

/// The state a soft driver and kernel share.
#[derive(Debug)]
pub struct SoftWorld {
    pub(crate) config: SoftConfig,
    state: Mutex<State>,
    /// Soft objects (the driver's object data) not yet dropped.
    pub(crate) objects_alive: Arc<ObjectCount>,
    /// How many context-local handles are open (`State::open_locals`' length, written under
    /// the lock): read without it, so that destroying an object takes no lock while none is
    /// open, as in every flush of a steady run.
    pub(crate) open_locals: AtomicUsize,
}

impl SoftWorld {
    pub(crate) fn new(config: SoftConfig) -> Self {
        SoftWorld {
            config,
            state: Mutex::new(State::default()),
            objects_alive: Arc::default(),
            open_locals: AtomicUsize::new(0),
        }
    }

    /// Notes the number of open context-local handles after a change under the lock.
    pub(crate) fn note_open_locals(&self, state: &State) {
        self.open_locals
            .store(state.open_locals.len(), Ordering::Release);
    }

    /// Whether a context-local handle may be open: an object destroyed after the call that
    /// opened one (ordered by the application, as every destroy after a use is) sees it.
    pub(crate) fn any_open_locals(&self) -> bool {
        self.open_locals.load(Ordering::Acquire) != 0
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock already failed; keep its state readable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `event` to the trace (when tracing is on).
    pub(crate) fn note(&self, state: &mut State, event: TraceEvent) {
        if self.config.trace {
            state.trace.push(event);
        }
    }

    /// The settings.
    pub fn config(&self) -> &SoftConfig {
        &self.config
    }

    /// Every violation seen so far.
    pub fn violations(&self) -> Vec<Violation> {
        self.lock().violations.clone()
    }

    /// Every error reported through set-error, with its context.
    pub fn errors(&self) -> Vec<(ContextId, Error)> {
        self.lock().errors.clone()
    }

    /// How many violations were seen so far (no copy: for a check after every step).
    pub fn violation_count(&self) -> usize {
        self.lock().violations.len()
    }

    /// How many errors were reported so far (no copy: for a check after every step).
    pub fn error_count(&self) -> usize {
        self.lock().errors.len()
    }

    /// The errors reported from the `from`-th on (none past the end).
    pub fn errors_since(&self, from: usize) -> Vec<(ContextId, Error)> {
        let state = self.lock();
        state.errors.get(from..).unwrap_or_default().to_vec()
    }

    /// Calls `visit` with each live allocation and its bytes, in no particular order, under
    /// the world's lock (`visit` must not call into the engine or the world).
    pub fn for_each_allocation(&self, mut visit: impl FnMut(AllocationHandle, &[u8])) {
        let state = self.lock();
        for (&id, allocation) in &state.allocations {
            if let Some(id) = core::num::NonZeroU64::new(id) {
                visit(AllocationHandle(id), &allocation.bytes);
            }
        }
    }

    /// The call trace so far.
    pub fn trace(&self) -> Vec<TraceEvent> {
        self.lock().trace.clone()
    }

    /// Forgets the trace recorded so far.
    pub fn clear_trace(&self) {
        self.lock().trace.clear();
    }

    /// Soft objects whose data the engine has not dropped yet (created by the driver's
    /// create hook, dropped when the engine reclaims the object's entry): zero once every
    /// device of the world is gone.
    pub fn soft_objects_alive(&self) -> usize {
        self.objects_alive.total()
    }

    /// Live allocations (allocated, not yet deallocated).
    pub fn live_allocations(&self) -> usize {
        self.lock().allocations.len()
    }

    /// Whether an allocation is live.
    pub fn is_allocated(&self, allocation: AllocationHandle) -> bool {
        self.lock().allocations.contains_key(&allocation.0.get())
    }

    /// A copy of an allocation's bytes.
    pub fn read(&self, allocation: AllocationHandle) -> Option<Vec<u8>> {
        self.lock()
            .allocations
            .get(&allocation.0.get())
            .map(|a| a.bytes.clone())
    }

    /// Buffers submitted so far.
    pub fn submits(&self) -> u64 {
        self.lock().submits
    }

    /// Calls of the amortized-processing callback so far.
    pub fn amortized_calls(&self) -> u64 {
        self.lock().amortized
    }

    /// The completed fence.
    pub fn completed(&self) -> u64 {
        self.lock().completed
    }

    /// The newest submitted fence.
    pub fn last_submitted(&self) -> u64 {
        self.lock().last_submitted
    }

    /// Completes every submitted buffer with a fence at or below `fence`.
    pub fn complete_through(&self, fence: u64) {
        let mut s = self.lock();
        Self::complete(&mut s, fence);
    }

    /// Every present callback so far, in order (R-X1), while tracing ([`SoftConfig::trace`]):
    /// without it, none is kept, so a steady frame allocates nothing.
    pub fn presents(&self) -> Vec<PresentCallback> {
        self.lock().dxgi.presents.clone()
    }

    /// The screen: the bytes of the newest presented allocation when it was presented.
    pub fn screen(&self) -> Option<Vec<u8>> {
        self.lock().dxgi.screen.clone()
    }

    /// Makes the present callback answer `status` (a success `HRESULT`, R-X1).
    pub fn set_present_status(&self, status: PresentStatus) {
        self.lock().dxgi.present_status = status;
    }

    /// Every set-display-mode callback's primary allocation so far (R-X2).
    pub fn display_modes(&self) -> Vec<AllocationHandle> {
        self.lock().dxgi.display_modes.clone()
    }

    /// Every set-priority callback so far: the allocations and the priority (R-X3).
    pub fn priorities(&self) -> Vec<(Vec<AllocationHandle>, u32)> {
        self.lock().dxgi.priorities.clone()
    }

    /// Where the query-residency callback says `allocation` is (R-X4; until set, in GPU
    /// memory).
    pub fn set_residency(&self, allocation: AllocationHandle, status: ResidencyStatus) {
        self.lock()
            .dxgi
            .residency
            .insert(allocation.0.get(), status);
    }

    /// Completes every submitted buffer.
    pub fn complete_all(&self) {
        let mut s = self.lock();
        let last = s.last_submitted;
        Self::complete(&mut s, last);
    }

    pub(crate) fn complete(s: &mut State, fence: u64) {
        while let Some(&(f, _)) = s.submitted.front() {
            if f > fence {
                break;
            }
            s.submitted.pop_front();
            s.completed = f;
        }
    }

    /// Records a violation.
    pub(crate) fn violate(s: &mut State, rule: &'static str, what: String) {
        s.violations.push(Violation { rule, what });
    }

    /// The violations plus one `leak` per allocation still live and, while tracing, per
    /// driver object, deferred-context state and command list's memory not ended: call after
    /// the device is destroyed (R-D3, R-R4).
    pub fn check_after_device_destroyed(&self) -> Vec<Violation> {
        let s = self.lock();
        let mut v = s.violations.clone();
        let mut locked: Vec<u64> = s.locked.keys().copied().collect();
        locked.sort_unstable();
        for id in locked {
            v.push(Violation {
                rule: "R-M4",
                what: format!("allocation {id} still locked after device destruction"),
            });
        }
        let mut leaked: Vec<u64> = s.allocations.keys().copied().collect();
        leaked.sort_unstable();
        for id in leaked {
            v.push(Violation {
                rule: "R-D3",
                what: format!("allocation {id} still live after device destruction (leak)"),
            });
        }
        s.lifetimes.leaks(&mut v);
        v
    }

    /// Panics with every violation and every leak (R-D3): the assertion at the end of a test,
    /// once the device is destroyed, that makes it fail on an early deallocation, a double
    /// free or anything left behind.
    pub fn assert_clean(&self) {
        let v = self.check_after_device_destroyed();
        assert!(v.is_empty(), "the soft kernel saw rules broken: {v:#?}");
    }

    /// Panics with every violation so far (an early deallocation, a double free, a hook out of
    /// order), not counting what is still live: the assertion while the device is.
    pub fn assert_no_violations(&self) {
        let v = self.violations();
        assert!(v.is_empty(), "the soft kernel saw rules broken: {v:#?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    fn parse(
        emulated: Option<&str>,
        driver_built: Option<&str>,
    ) -> Result<SoftConfig, SoftEnvError> {
        SoftConfig::from_vars(emulated.map(OsStr::new), driver_built.map(OsStr::new))
    }

    /// (command_lists, driver_built) of a parsed config.
    fn mode(emulated: Option<&str>, driver_built: Option<&str>) -> (bool, bool) {
        let config = parse(emulated, driver_built).unwrap();
        (config.command_lists, config.driver_built)
    }

    #[test]
    fn the_default_reads_no_environment() {
        let config = SoftConfig::default();
        assert!(config.command_lists);
        assert!(!config.driver_built);
    }

    #[test]
    fn accepted_values_select_the_driver_kind() {
        assert_eq!(mode(None, None), (true, false));
        for off in [None, Some(""), Some("0")] {
            assert_eq!(mode(off, None), (true, false));
            assert_eq!(mode(None, off), (true, false));
            assert_eq!(mode(Some("1"), off), (false, false));
            assert_eq!(mode(off, Some("1")), (true, true));
        }
        // Only the mode comes from the environment.
        let config = parse(Some("1"), None).unwrap();
        let plain = SoftConfig::default();
        assert_eq!(
            (config.gpu, config.strict_gpu, config.trace),
            (plain.gpu, true, true)
        );
    }

    #[test]
    fn other_values_are_refused_with_the_variable_and_the_value() {
        for value in ["yes", "true", "on", "2", " 1", "1 ", "01", "-1"] {
            let err = parse(Some(value), None).unwrap_err();
            assert_eq!(
                err,
                SoftEnvError::Unrecognised {
                    variable: "CMDLIST_SOFT_EMULATED",
                    value: value.to_owned()
                }
            );
            let shown = err.to_string();
            assert!(shown.contains("CMDLIST_SOFT_EMULATED"), "{shown}");
            assert!(shown.contains(&format!("{value:?}")), "{shown}");
            let err = parse(Some("0"), Some(value)).unwrap_err();
            assert!(
                err.to_string().contains("CMDLIST_SOFT_DRIVER_BUILT"),
                "{err}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_value_that_is_not_unicode_is_refused() {
        use std::os::unix::ffi::OsStrExt;
        let err = SoftConfig::from_vars(Some(OsStr::from_bytes(b"1\xff")), None).unwrap_err();
        assert_eq!(
            err,
            SoftEnvError::Unrecognised {
                variable: "CMDLIST_SOFT_EMULATED",
                value: "1\u{fffd}".to_owned()
            }
        );
    }

    #[test]
    fn both_on_is_refused_as_a_contradiction() {
        let err = parse(Some("1"), Some("1")).unwrap_err();
        assert_eq!(err, SoftEnvError::Contradictory);
        let shown = err.to_string();
        assert!(shown.contains("CMDLIST_SOFT_EMULATED=1"), "{shown}");
        assert!(shown.contains("CMDLIST_SOFT_DRIVER_BUILT=1"), "{shown}");
    }
}
