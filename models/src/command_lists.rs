//! `command_lists`: random recordings on deferred contexts, executed on the immediate
//! context, checked after every step against a plain model (R-C1..R-C4, R-E2, R-E3,
//! R-H1..R-H5, R-D1, R-X1, R-X5, R-X6).
//!
//! # What a run does
//! A run is a list of [`Step`]s over one soft device (built with a small
//! [`cmdlist::DeviceConfig::deferred_budget`], so that recordings run out of memory often),
//! up to three deferred contexts (each made at the first step that uses it) and the
//! immediate context: objects are created and destroyed
//! (sometimes from another thread), deferred contexts record updates, copies, fills, view
//! clears, binds, Map(DISCARD) + writes + Unmap, query begin/end and executions of kept
//! lists (nested lists, R-C3; sometimes from another thread), finish (keeping the list or
//! dropping it at once), abandon or are dropped and made again; kept lists are executed (once or several times in a row, after their objects were
//! destroyed, around immediate-context writes) and dropped (sometimes on another thread); the
//! immediate context updates, copies, maps and unmaps, binds, begins and ends queries (which
//! provokes the conflicts of R-C4), flushes; a swap chain (three back buffers and a canvas,
//! made at the first display step) is presented, rotated and Blt into (R-X1, R-X5, R-X6);
//! the simulated GPU completes fences. The soft driver records command lists itself, or, in
//! one run in two of those decoded from bytes, has none and the engine emulates them (it
//! then flags any deferred-context hook called). A run decoded from bytes ([`run_bytes`]) is
//! at most [`MAX_STEPS`] steps.
//!
//! # The model
//! Plain vectors: every resource's bytes, every view's range, what each context has mapped
//! or begun, each recording's operations (with their payloads, copied), its open
//! context-local handles, its bindings and its budget count, and each kept list's operations,
//! holds, maps and queries (a nested list's operations in place, its holds, maps and queries
//! joined to the outer list's). A list's effect is its recorded operations applied in order to
//! the model's bytes *at execute time* (the soft driver's byte semantics, [`SoftCommand`]);
//! Map(DISCARD) data replays the same every time. After every step:
//! - every engine call returned exactly what the model predicts (the R-C4 conflicts are
//!   `Application(MapConflict)` / `Application(QueryConflict)` and change nothing), and every
//!   failed call was reported once, on its own context's sink (R-E2);
//! - every resource's bytes in the soft kernel equal the model's; memory the kernel no longer
//!   has belongs to an object the application destroyed that nothing (a list, an open
//!   recording, a live view) still holds (R-D1, R-H2);
//! - each deferred context's removal flag, open handles, operations, budget count, removals
//!   and bindings equal the model's (R-C1, R-E3; checked after the steps that used the
//!   context, and for every context at the end of the steps: a context changes only through
//!   calls on it), the kernel's amortised-processing callback ran once per removal (R-A2)
//!   plus the immediate context's own calls (R-A1), and the immediate context's bindings
//!   equal the model's (R-C3);
//! - a present put the back buffer's bytes on the screen, a rotation moved allocations and
//!   bytes one place (the memory check then holds each allocation to its new resource), a
//!   Blt wrote the canvas's pixels converted;
//! - the soft world saw no rule broken.
//!
//! At the end, destroying the device is refused while contexts are alive (R-H2: their
//! handles must close first; a context is made for the check if no step made one); the
//! contexts are dropped, then half the lists; after R-D4's heavy pattern (`ClearState;
//! Flush; End(event); spin on GetData; Flush`) every destroyed object nothing holds is
//! deallocated (R-D2, R-D4); the device is destroyed with the other lists still alive, the
//! kernel must be clean (R-D3), and dropping the lists afterwards must keep it clean.
//!
//! The engine must never panic; any mismatch is an `assert!` of this module.
//!
//! The model found three engine bugs, now fixed and kept as model rules: a live view of a
//! resource the application destroyed works on a deferred context (the view holds it,
//! R-H3); an object the application destroyed cannot be named again even if the recording
//! already opened it (R-E1); a refused immediate-context call stamps nothing, so no
//! deallocation waits for a buffer that is never submitted (R-D1).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use arbitrary::Arbitrary;

use cmdlist::dxgi::{
    BltArgs, BltFlags, DisplayFormat, DxgiContext, PresentArgs, PresentFlags, Rect, Rotation,
};
use cmdlist::handle::{AnyHandle, Handle, HandleType, Query, Resource, View};
use cmdlist::soft::{self, SoftCommand, SoftConfig, SoftDriver, SoftKernel, SoftWorld};
use cmdlist::CommandList;
use cmdlist::DeferredContext;
use cmdlist::ImmediateContext;
use cmdlist::ListMode;
use cmdlist::{AllocationHandle, ContextId};
use cmdlist::{AppError, Error, Result};
use cmdlist::{BindClass, BindPoint, Stage};
use cmdlist::{BindFlags, QueryKind, ResourceDesc, Texture2d, ViewDesc};
use cmdlist::{Device, DeviceConfig};

use crate::elsewhere;

type Dev = Device<SoftDriver, SoftKernel>;
type Ic = ImmediateContext<SoftDriver, SoftKernel>;
type Dc = DeferredContext<SoftDriver, SoftKernel>;
type List = CommandList<SoftDriver, SoftKernel>;

/// The device's [`DeviceConfig::replay_limit`] in a run: small, so that lists nested many
/// times over reach it (a few dozen steps can record exponentially long replays) and an
/// execute never takes long.
pub const REPLAY_LIMIT: u64 = 4096;

/// The deferred-context budget [`run`] uses: room for a few dozen operations and maps of the
/// largest resources, so that random recordings run out of memory regularly (R-E3).
pub const DEFAULT_BUDGET: usize = 2048;

/// Resources hold `1..=MAX_RESOURCE_BYTES` bytes: small, so comparing every resource after
/// every step stays cheap, and large enough for views and regions to have room.
const MAX_RESOURCE_BYTES: usize = 96;
/// Caps on model objects per run, live ones and all ever made (creates beyond either do
/// nothing): they bound a run's memory and the per-step checks, and the live caps keep
/// long fuzz inputs from drowning the live objects among destroyed ones.
const MAX_RESOURCES: (usize, usize) = (12, 48);
const MAX_VIEWS: (usize, usize) = (12, 48);
const MAX_QUERIES: (usize, usize) = (6, 24);
const MAX_LISTS: usize = 8;
/// Deferred contexts per run.
const CONTEXTS: usize = 3;
/// Binding points steps choose from (see [`point`]).
const POINTS: u8 = 8;

/// One step of a run. Indices pick among the objects (or contexts, lists) made so far,
/// modulo their number, destroyed ones included (so stale handles are used too); a step whose
/// index has nothing to pick does nothing. Recording, the heart of the matter, comes in
/// bursts of one to four operations, so that lists hold several.
#[derive(Arbitrary, Debug, Clone)]
pub enum Step {
    /// Creates an object (free-threaded create, R-F1).
    Create(New),
    /// Destroys an object (free-threaded, R-D1), maybe from another thread; destroying it
    /// again is a double destroy.
    Destroy {
        /// The object.
        object: Obj,
        /// Destroy it from another thread (one decoded step in four).
        #[arbitrary(with = elsewhere::one_in_four)]
        elsewhere: bool,
    },
    /// Records a burst of operations on a deferred context, maybe from another thread (a
    /// deferred context is `Send`).
    Record {
        /// The context.
        dc: u8,
        /// Make the calls from another thread (one decoded step in four).
        #[arbitrary(with = elsewhere::one_in_four)]
        elsewhere: bool,
        /// What to record.
        ops: Burst,
    },
    /// Ends a deferred context's recording.
    Close {
        /// The context.
        dc: u8,
        /// How.
        how: Close,
    },
    /// CommandListExecute (R-C3, R-C4), `1 + times % 3` times in a row.
    Execute {
        /// The kept list.
        list: u8,
        /// Repetitions, before the modulo.
        times: u8,
    },
    /// Drops a kept list (DestroyCommandList, free-threaded), maybe on another thread.
    DropList {
        /// The kept list.
        list: u8,
        /// Drop it on another thread (one decoded step in four).
        #[arbitrary(with = elsewhere::one_in_four)]
        elsewhere: bool,
    },
    /// An operation on the immediate context.
    Immediate(IcOp),
    /// Flush, or the simulated GPU's progress.
    Timeline(Timeline),
    /// A DXGI function on the swap chain (made at the first such step: a canvas and two
    /// back buffers, ordinary resources of the run otherwise).
    Display(Display),
}

/// The DXGI steps (R-X1, R-X5, R-X6), on a swap chain of three `B8G8R8A8_UNORM` back buffers
/// and an `R8G8B8A8_UNORM_SRGB` canvas, each `SWAP_W`×`SWAP_H`.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Display {
    /// Presents back buffer `buffer % 3` (the screen then holds its bytes).
    Present {
        /// The back buffer.
        buffer: u8,
    },
    /// Rotates the three back buffers' identities: each takes the next one's allocation and
    /// bytes, the last the first's.
    Rotate,
    /// Blts the canvas into back buffer `buffer % 3`, converting its format (integer to
    /// integer: the bytes reordered, values unchanged).
    Blt {
        /// The back buffer.
        buffer: u8,
    },
}

/// The swap chain's size: small, as the other resources.
const SWAP_W: u32 = 4;
const SWAP_H: u32 = 2;

/// An object to create.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum New {
    /// A resource of `1 + size % 96` bytes.
    Resource {
        /// The size, before the modulo.
        size: u8,
    },
    /// A view of a resource (R-H3); its range may be empty or too long (refused).
    View {
        /// The resource viewed.
        resource: u8,
        /// Which view type.
        kind: ViewKind,
        /// First byte, modulo the resource's size plus 4.
        first: u8,
        /// Length, modulo 33.
        len: u8,
    },
    /// A query.
    Query {
        /// Its kind.
        kind: QueryChoice,
    },
}

/// One to four operations recorded in a row.
#[derive(Arbitrary, Debug, Clone)]
pub struct Burst {
    /// The first operation.
    pub first: DcOp,
    /// Up to three more.
    pub more: [Option<DcOp>; 3],
}

impl Burst {
    /// One operation.
    pub fn one(op: DcOp) -> Self {
        Burst {
            first: op,
            more: [None; 3],
        }
    }

    fn ops(&self) -> impl Iterator<Item = DcOp> + '_ {
        core::iter::once(self.first).chain(self.more.iter().flatten().copied())
    }
}

/// How a recording ends.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Close {
    /// FinishCommandList, keeping the list for later steps (R-C1, R-C4, R-E3).
    FinishKeep,
    /// FinishCommandList, dropping the list at once.
    FinishDrop,
    /// FinishCommandList with RestoreDeferredContextState, keeping the list: the context
    /// records on with its bindings, bound again in the next recording (R-C5).
    FinishRestoring,
    /// AbandonCommandList (R-C2).
    Abandon,
    /// Drops the context (with whatever it was recording) and creates a new one.
    Reset,
}

/// Flush and the simulated GPU.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Timeline {
    /// Flush (R-D2).
    Flush,
    /// The GPU completes every submitted buffer.
    CompleteAll,
    /// The GPU completes all but the newest submitted buffer.
    CompleteButNewest,
}

/// A view type.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum ViewKind {
    /// Shader-resource view.
    ShaderResource,
    /// Render-target view.
    RenderTarget,
    /// Depth-stencil view.
    DepthStencil,
    /// Unordered-access view.
    UnorderedAccess,
}

impl ViewKind {
    fn handle_type(self) -> HandleType {
        match self {
            ViewKind::ShaderResource => HandleType::ShaderResourceView,
            ViewKind::RenderTarget => HandleType::RenderTargetView,
            ViewKind::DepthStencil => HandleType::DepthStencilView,
            ViewKind::UnorderedAccess => HandleType::UnorderedAccessView,
        }
    }
}

/// A query kind.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum QueryChoice {
    /// Event query.
    Event,
    /// Occlusion query.
    Occlusion,
    /// Timestamp query.
    Timestamp,
}

impl QueryChoice {
    fn kind(self) -> QueryKind {
        match self {
            QueryChoice::Event => QueryKind::Event,
            QueryChoice::Occlusion => QueryKind::Occlusion,
            QueryChoice::Timestamp => QueryKind::Timestamp,
        }
    }
}

/// An object made by an earlier step.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Obj {
    /// A resource.
    Resource(u8),
    /// A view.
    View(u8),
    /// A query.
    Query(u8),
}

/// Bytes to write: `len` (after a per-use modulo) bytes of a pattern seeded by `seed`.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct Bytes {
    /// Length, before the modulo.
    pub len: u8,
    /// Pattern seed.
    pub seed: u8,
}

impl Bytes {
    fn make(self, max: usize) -> Vec<u8> {
        let len = usize::from(self.len) % (max + 1);
        (0..len)
            .map(|i| self.seed.wrapping_add((i as u8).wrapping_mul(29)) | 1)
            .collect()
    }
}

/// A soft-driver command ([`SoftCommand`]) over earlier objects.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Cmd {
    /// CopyResource.
    Copy {
        /// Destination resource.
        dst: u8,
        /// Source resource.
        src: u8,
    },
    /// CopySubresourceRegion; offsets and length may run past either resource (the driver
    /// refuses it when it runs).
    CopyRegion {
        /// Destination resource.
        dst: u8,
        /// Destination offset, modulo its size plus 4.
        dst_offset: u8,
        /// Source resource.
        src: u8,
        /// Source offset, modulo its size plus 4.
        src_offset: u8,
        /// Length, modulo 49.
        len: u8,
    },
    /// Fills a whole resource.
    Fill {
        /// The resource.
        dst: u8,
        /// The byte.
        value: u8,
    },
    /// Clears a view's range (ClearRenderTargetView).
    ClearView {
        /// The view.
        view: u8,
        /// The byte.
        value: u8,
    },
}

/// What a deferred context records.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum DcOp {
    /// UpdateSubresource (offset modulo size plus 8, up to 48 bytes, possibly none or out of
    /// range: refused).
    Update {
        /// The resource.
        resource: u8,
        /// Offset, before the modulo.
        offset: u8,
        /// The bytes.
        data: Bytes,
    },
    /// An update larger than the whole budget: out of memory, context-local removal (R-E3).
    HugeUpdate {
        /// The resource.
        resource: u8,
    },
    /// An update at offset 0 as long as what is left of the budget after one operation (at
    /// most the resource's size): fills the recording up to its budget exactly, so that the
    /// next call, or the implicit End of a begun query at Finish, runs out of memory.
    TopUp {
        /// The resource.
        resource: u8,
    },
    /// A soft-driver command.
    Command(Cmd),
    /// Map(DISCARD), then writes the data at the start of the new contents and zeroes after
    /// it (a discard's bytes are undefined until written, R-M1).
    MapWrite {
        /// The resource.
        resource: u8,
        /// What to write (up to the resource's size).
        data: Bytes,
    },
    /// Map(NO_OVERWRITE): after a Map(DISCARD) of the resource in the recording, its bytes
    /// again with their contents, `data` written at `offset` (modulo the size); without one,
    /// refused unheard (R-M2).
    MapAppend {
        /// The resource; an even value picks the one the recording discarded last, as a
        /// ring's appends do (when there is one).
        resource: u8,
        /// Where to write, before the modulo.
        offset: u8,
        /// What to write (cut at the resource's end).
        data: Bytes,
    },
    /// Unmap (records the contents written since the map).
    Unmap {
        /// The resource.
        resource: u8,
    },
    /// Binds an object at one of eight points, or unbinds.
    Bind {
        /// The point (modulo 8).
        point: u8,
        /// What to bind.
        object: Option<Obj>,
    },
    /// Begins a query.
    BeginQuery {
        /// The query.
        query: u8,
    },
    /// Ends a query.
    EndQuery {
        /// The query.
        query: u8,
    },
    /// Executes a kept list on the context (nested execution, R-C3, R-C4): one operation
    /// holding the list, then nothing bound.
    ExecuteList {
        /// The kept list.
        list: u8,
    },
}

/// What the immediate context does.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum IcOp {
    /// UpdateSubresource.
    Update {
        /// The resource.
        resource: u8,
        /// Offset, modulo size plus 8.
        offset: u8,
        /// The bytes (up to 48).
        data: Bytes,
    },
    /// A soft-driver command.
    Command(Cmd),
    /// Map(DISCARD), then writes the data at the start of the new contents and zeroes after
    /// it (R-C4: lists that recorded a Map of it conflict until the Unmap).
    Map {
        /// The resource.
        resource: u8,
        /// What to write (up to the resource's size).
        data: Bytes,
    },
    /// Unmap: the contents written since the map become the resource's.
    Unmap {
        /// The resource.
        resource: u8,
    },
    /// Binds an object, or unbinds.
    Bind {
        /// The point (modulo 8).
        point: u8,
        /// What to bind.
        object: Option<Obj>,
    },
    /// Begins a query (R-C4: lists that begin or end it conflict until its End).
    BeginQuery {
        /// The query.
        query: u8,
    },
    /// Ends a query.
    EndQuery {
        /// The query.
        query: u8,
    },
    /// Map(NO_OVERWRITE): the resource's own memory with its contents, `data` written at
    /// `offset` (modulo the size), no wait (R-M3); refused for a texture.
    MapAppend {
        /// The resource.
        resource: u8,
        /// Where to write, before the modulo.
        offset: u8,
        /// What to write (cut at the resource's end).
        data: Bytes,
    },
}

/// What a run exercised, for tests that want to know their inputs reach the interesting
/// cases (and for reports). Counts add up over runs with `+=`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Steps run (including those that found nothing to pick and did nothing).
    pub steps: u64,
    /// Deferred-context calls that recorded something.
    pub recorded: u64,
    /// Deferred-context calls refused with an application error.
    pub refused: u64,
    /// Calls accepted (and ignored) by a context removed after running out of memory.
    pub while_removed: u64,
    /// Context-local removals after running out of memory (R-E3).
    pub removals: u64,
    /// Command lists finished.
    pub finished: u64,
    /// Finishes that answered out of memory after a removal (R-E3).
    pub finish_after_removal: u64,
    /// Bindings bound again by a Finish that keeps the state (R-C5).
    pub rebinds: u64,
    /// Map(NO_OVERWRITE)s that found their discard (R-M2).
    pub appends: u64,
    /// Finishes that ended still-begun queries (R-C4), within the budget their Begins
    /// reserved (R-E3).
    pub finish_ended_queries: u64,
    /// Successful list executions.
    pub executed: u64,
    /// Successful executions of a list holding an object the application had destroyed.
    pub executed_with_destroyed: u64,
    /// Executions refused with `MapConflict` (R-C4).
    pub map_conflicts: u64,
    /// Executions refused with `QueryConflict` (R-C4).
    pub query_conflicts: u64,
    /// Executions whose replay stopped at a failing operation.
    pub failed_replays: u64,
    /// Immediate-context calls that succeeded.
    pub immediate_ok: u64,
    /// Immediate-context calls refused.
    pub immediate_refused: u64,
    /// Steps run on another thread (destroys, recordings, list drops).
    pub elsewhere: u64,
    /// Presents, rotations and Blts that succeeded.
    pub displayed: u64,
    /// Lists executed on a deferred context (recorded, nested in the list it finishes).
    pub nested: u64,
    /// Runs whose driver had no command lists (the engine emulated them).
    pub emulated_runs: u64,
    /// Runs whose driver built its command lists itself.
    pub driver_built_runs: u64,
}

impl core::ops::AddAssign for Coverage {
    fn add_assign(&mut self, o: Coverage) {
        self.steps += o.steps;
        self.recorded += o.recorded;
        self.refused += o.refused;
        self.while_removed += o.while_removed;
        self.removals += o.removals;
        self.finished += o.finished;
        self.finish_after_removal += o.finish_after_removal;
        self.rebinds += o.rebinds;
        self.appends += o.appends;
        self.finish_ended_queries += o.finish_ended_queries;
        self.executed += o.executed;
        self.executed_with_destroyed += o.executed_with_destroyed;
        self.map_conflicts += o.map_conflicts;
        self.query_conflicts += o.query_conflicts;
        self.failed_replays += o.failed_replays;
        self.immediate_ok += o.immediate_ok;
        self.immediate_refused += o.immediate_refused;
        self.elsewhere += o.elsewhere;
        self.displayed += o.displayed;
        self.nested += o.nested;
        self.emulated_runs += o.emulated_runs;
        self.driver_built_runs += o.driver_built_runs;
    }
}

/// Steps [`steps`] decodes at most. A step takes about ten bytes and, with the checks after
/// it, about ten microseconds under AddressSanitizer: the cap keeps a fuzzer's input cheap
/// (the campaign's `-max_len` matches it) and leaves room for several recordings, executions
/// and destructions in one run.
pub const MAX_STEPS: usize = 48;

/// Decodes steps from raw bytes until they run out or [`MAX_STEPS`] are decoded (a dense
/// decoding for fuzzers and PRNG inputs: `Vec::<Step>::arbitrary_take_rest` spends a byte
/// per element on "go on").
pub fn steps(data: &[u8]) -> Vec<Step> {
    let mut u = arbitrary::Unstructured::new(data);
    let mut steps = Vec::with_capacity(MAX_STEPS.min(data.len()));
    while !u.is_empty() && steps.len() < MAX_STEPS {
        match Step::arbitrary(&mut u) {
            Ok(step) => steps.push(step),
            Err(_) => break,
        }
    }
    steps
}

/// The budgets [`run_bytes`] chooses from: the default, a tight one (removals all the time)
/// and one that a begun query and two [`DcOp::TopUp`]s fill, so that Finish runs out of
/// memory ending the query (R-C4, R-E3).
pub const BUDGETS: [usize; 3] = [DEFAULT_BUDGET, 640, 256];

/// Runs raw bytes (a fuzzer's input): the first byte chooses the budget among [`BUDGETS`]
/// and the list mode: the engine emulates command lists one run in two, and of the others
/// it replays half and the driver builds half ([`ListMode`]); the rest are decoded by
/// [`steps`]. Returns what the run exercised.
pub fn run_bytes(data: &[u8]) -> Coverage {
    let Some((first, rest)) = data.split_first() else {
        return Coverage::default();
    };
    let first = usize::from(*first);
    let mode = match (first / BUDGETS.len() % 2, first / (2 * BUDGETS.len()) % 2) {
        (1, _) => ListMode::Emulated,
        (_, 0) => ListMode::Replayed,
        _ => ListMode::DriverBuilt,
    };
    run_in(BUDGETS[first % BUDGETS.len()], mode, &steps(rest))
}

/// Runs `steps` with [`DEFAULT_BUDGET`], checking the engine against the model after every
/// step; panics (an `assert!`) on any difference, any broken rule or any leak.
pub fn run(steps: &[Step]) {
    run_with_budget(DEFAULT_BUDGET, steps);
}

/// [`run`] with another deferred-context budget (bytes of operations and payloads); returns
/// what the run exercised. The driver is the kind the environment asks for
/// ([`SoftConfig::from_env`]); panics on a value it refuses.
pub fn run_with_budget(budget: usize, steps: &[Step]) -> Coverage {
    let config = SoftConfig::from_env().unwrap();
    let mode = match (config.command_lists, config.driver_built) {
        (false, _) => ListMode::Emulated,
        (true, false) => ListMode::Replayed,
        (true, true) => ListMode::DriverBuilt,
    };
    run_in(budget, mode, steps)
}

/// [`run_with_budget`] in list mode `mode`: a driver whose lists the engine replays, one that
/// builds them itself, or one the engine emulates them for.
pub fn run_in(budget: usize, mode: ListMode, steps: &[Step]) -> Coverage {
    let mut h = Harness::new(budget, mode);
    for (i, step) in steps.iter().enumerate() {
        h.cov.steps += 1;
        h.step(step);
        h.check(i, step);
    }
    h.teardown()
}

/// The binding point a step's `point` names.
fn point(p: u8) -> BindPoint {
    let p = p % POINTS;
    let class = match p % 4 {
        0 => BindClass::ShaderResource(Stage::Pixel),
        1 => BindClass::RenderTarget,
        2 => BindClass::ConstantBuffer(Stage::Vertex),
        _ => BindClass::UnorderedAccess,
    };
    BindPoint::new(class, u16::from(p / 4))
}

fn pick(len: usize, i: u8) -> Option<usize> {
    (len > 0).then(|| usize::from(i) % len)
}

/// An object index: with the high bit of `i` clear, among all the objects made so far in
/// order (`i % len`, as hand-written sequences count them); with it set, among those not
/// destroyed (all of them if none is live), so random inputs use live objects half the time.
fn pick_object(destroyed: impl ExactSizeIterator<Item = bool> + Clone, i: u8) -> Option<usize> {
    let len = destroyed.len();
    if i & 0x80 == 0 {
        return pick(len, i);
    }
    let live = destroyed.clone().filter(|d| !d).count();
    if live == 0 {
        return pick(len, i & 0x7f);
    }
    let n = usize::from(i & 0x7f) % live;
    destroyed
        .enumerate()
        .filter(|(_, d)| !d)
        .nth(n)
        .map(|(k, _)| k)
}

/// Whether another object may be made, given the destroyed flags of those made so far.
fn room(destroyed: impl Iterator<Item = bool>, (live_cap, total_cap): (usize, usize)) -> bool {
    let (mut total, mut live) = (0, 0);
    for d in destroyed {
        total += 1;
        live += usize::from(!d);
    }
    total < total_cap && live < live_cap
}

/// A model object: which vector, which index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    R(usize),
    V(usize),
    Q(usize),
}

/// A recorded operation's byte effect (binds and queries have none).
#[derive(Clone, Debug)]
enum MOp {
    Update {
        res: usize,
        offset: usize,
        data: Vec<u8>,
    },
    Write {
        res: usize,
        data: Vec<u8>,
    },
    Copy {
        dst: usize,
        src: usize,
    },
    Region {
        dst: usize,
        dst_offset: usize,
        src: usize,
        src_offset: usize,
        len: usize,
    },
    Fill {
        dst: usize,
        value: u8,
    },
    Clear {
        view: usize,
        value: u8,
    },
    /// A nested list's operations (R-C3), shared with the list's own model.
    Nested(Arc<Vec<MOp>>),
    Nop,
}

/// A resource: its handle, kernel memory and the bytes it must hold.
struct MRes {
    handle: Handle<Resource>,
    alloc: AllocationHandle,
    bytes: Vec<u8>,
    destroyed: bool,
    /// The kernel was seen to have deallocated it (for good).
    freed: bool,
    /// A buffer bound as a vertex buffer: Map(NO_OVERWRITE) takes it (R-M3).
    appendable: bool,
}

/// A view: its resource and the range it covers.
struct MView {
    handle: Handle<View>,
    alloc: AllocationHandle,
    res: usize,
    first: usize,
    len: usize,
    destroyed: bool,
    /// The kernel was seen to have deallocated it (for good).
    freed: bool,
}

/// A query.
struct MQuery {
    handle: Handle<Query>,
    alloc: AllocationHandle,
    destroyed: bool,
    /// The kernel was seen to have deallocated it (for good).
    freed: bool,
}

/// The model's objects.
#[derive(Default)]
struct Model {
    res: Vec<MRes>,
    views: Vec<MView>,
    queries: Vec<MQuery>,
    /// Every object's allocation id, ascending (the kernel numbers allocations in order).
    allocs: Vec<(u64, Key)>,
}

/// Why a predicted call will not run as the specification says.
enum Fault {
    /// The call fails with this error.
    Err(Error),
}

impl From<Error> for Fault {
    fn from(e: Error) -> Self {
        Fault::Err(e)
    }
}

impl From<AppError> for Fault {
    fn from(e: AppError) -> Self {
        Fault::Err(e.into())
    }
}

impl Model {
    fn destroyed(&self, key: Key) -> bool {
        match key {
            Key::R(i) => self.res[i].destroyed,
            Key::V(i) => self.views[i].destroyed,
            Key::Q(i) => self.queries[i].destroyed,
        }
    }

    /// An empty model with room for as many objects as a run may make.
    fn with_capacity() -> Self {
        Model {
            res: Vec::with_capacity(MAX_RESOURCES.1),
            views: Vec::with_capacity(MAX_VIEWS.1),
            queries: Vec::with_capacity(MAX_QUERIES.1),
            allocs: Vec::with_capacity(MAX_RESOURCES.1 + MAX_VIEWS.1 + MAX_QUERIES.1),
        }
    }

    /// Files a new object's allocation in [`Model::allocs`].
    /// Resources `a` and `b` trade identities (R-X5): allocations and bytes.
    /// RotateResourceIdentities of `chain` (R-X5): each resource takes the allocation and
    /// bytes of the next one, the last those of the first.
    fn rotate(&mut self, chain: &[usize]) {
        let n = chain.len();
        // Each allocation's owner moves one place to the left.
        for entry in &mut self.allocs {
            if let Key::R(r) = entry.1 {
                if let Some(at) = chain.iter().position(|c| *c == r) {
                    entry.1 = Key::R(chain[(at + n - 1) % n]);
                }
            }
        }
        let allocs: Vec<_> = chain.iter().map(|r| self.res[*r].alloc).collect();
        let mut bytes: Vec<_> = chain
            .iter()
            .map(|r| core::mem::take(&mut self.res[*r].bytes))
            .collect();
        bytes.rotate_left(1);
        for ((r, alloc), bytes) in chain.iter().zip(allocs.iter().cycle().skip(1)).zip(bytes) {
            self.res[*r].alloc = *alloc;
            self.res[*r].bytes = bytes;
        }
    }

    /// A Map(DISCARD) on the immediate context renamed resource `r` to `new` (R-M5): the
    /// allocation it had leaves the model (the engine's rename pool keeps it, and the soft
    /// kernel flags it handed out again before the GPU is done with it); `new`, fresh or
    /// from that pool, is the resource's.
    fn renamed(&mut self, r: usize, new: AllocationHandle) {
        let old = self.res[r].alloc.0.get();
        if let Ok(at) = self.allocs.binary_search_by_key(&old, |(a, _)| *a) {
            self.allocs.remove(at);
        }
        let id = new.0.get();
        match self.allocs.binary_search_by_key(&id, |(a, _)| *a) {
            Ok(at) => panic!(
                "{:?} renamed to {id}, which is {:?}'s",
                Key::R(r),
                self.allocs[at].1
            ),
            Err(at) => self.allocs.insert(at, (id, Key::R(r))),
        }
        self.res[r].alloc = new;
    }

    fn index_alloc(&mut self, key: Key) {
        let id = self.alloc(key).0.get();
        let at = self.allocs.partition_point(|(a, _)| *a < id);
        self.allocs.insert(at, (id, key));
    }

    fn freed(&self, key: Key) -> bool {
        match key {
            Key::R(i) => self.res[i].freed,
            Key::V(i) => self.views[i].freed,
            Key::Q(i) => self.queries[i].freed,
        }
    }

    fn set_freed(&mut self, key: Key) {
        match key {
            Key::R(i) => self.res[i].freed = true,
            Key::V(i) => self.views[i].freed = true,
            Key::Q(i) => self.queries[i].freed = true,
        }
    }

    fn any(&self, key: Key) -> AnyHandle {
        match key {
            Key::R(i) => self.res[i].handle.any(),
            Key::V(i) => self.views[i].handle.any(),
            Key::Q(i) => self.queries[i].handle.any(),
        }
    }

    fn alloc(&self, key: Key) -> AllocationHandle {
        match key {
            Key::R(i) => self.res[i].alloc,
            Key::V(i) => self.views[i].alloc,
            Key::Q(i) => self.queries[i].alloc,
        }
    }

    fn key(&self, obj: Obj) -> Option<Key> {
        match obj {
            Obj::Resource(i) => self.resource(i).map(Key::R),
            Obj::View(i) => self.view(i).map(Key::V),
            Obj::Query(i) => self.query(i).map(Key::Q),
        }
    }

    fn resource(&self, i: u8) -> Option<usize> {
        pick_object(self.res.iter().map(|r| r.destroyed), i)
    }

    fn view(&self, i: u8) -> Option<usize> {
        pick_object(self.views.iter().map(|v| v.destroyed), i)
    }

    fn query(&self, i: u8) -> Option<usize> {
        pick_object(self.queries.iter().map(|q| q.destroyed), i)
    }

    fn size(&self, r: usize) -> usize {
        self.res[r].bytes.len()
    }

    /// A step's command as the engine gets it, its byte effect, and the objects it names in
    /// [`cmdlist::Command::for_each_object`] order.
    fn command(&self, cmd: Cmd) -> Option<(SoftCommand, MOp, [Option<Key>; 2])> {
        let res = |i| self.resource(i);
        Some(match cmd {
            Cmd::Copy { dst, src } => {
                let (dst, src) = (res(dst)?, res(src)?);
                let command = SoftCommand::Copy {
                    dst: self.res[dst].handle,
                    src: self.res[src].handle,
                };
                (
                    command,
                    MOp::Copy { dst, src },
                    [Some(Key::R(src)), Some(Key::R(dst))],
                )
            }
            Cmd::CopyRegion {
                dst,
                dst_offset,
                src,
                src_offset,
                len,
            } => {
                let (dst, src) = (res(dst)?, res(src)?);
                let dst_offset = usize::from(dst_offset) % (self.size(dst) + 4);
                let src_offset = usize::from(src_offset) % (self.size(src) + 4);
                let len = usize::from(len) % 49;
                let command = SoftCommand::CopyRegion {
                    dst: self.res[dst].handle,
                    dst_offset: dst_offset as u64,
                    src: self.res[src].handle,
                    src_offset: src_offset as u64,
                    len: len as u64,
                };
                let op = MOp::Region {
                    dst,
                    dst_offset,
                    src,
                    src_offset,
                    len,
                };
                (command, op, [Some(Key::R(src)), Some(Key::R(dst))])
            }
            Cmd::Fill { dst, value } => {
                let dst = res(dst)?;
                let command = SoftCommand::Fill {
                    dst: self.res[dst].handle,
                    value,
                };
                (command, MOp::Fill { dst, value }, [Some(Key::R(dst)), None])
            }
            Cmd::ClearView { view, value } => {
                let view = self.view(view)?;
                let command = SoftCommand::ClearView {
                    view: self.views[view].handle,
                    value,
                };
                (
                    command,
                    MOp::Clear { view, value },
                    [Some(Key::V(view)), None],
                )
            }
        })
    }

    /// Applies one operation's bytes as the soft driver does; an error changes nothing.
    fn apply(&mut self, op: &MOp) -> Result<()> {
        match *op {
            MOp::Update {
                res,
                offset,
                ref data,
            } => {
                let bytes = &mut self.res[res].bytes;
                let end = offset + data.len();
                bytes
                    .get_mut(offset..end)
                    .ok_or(AppError::OutOfRange)?
                    .copy_from_slice(data);
            }
            MOp::Write { res, ref data } => {
                let bytes = &mut self.res[res].bytes;
                bytes
                    .get_mut(..data.len())
                    .ok_or(AppError::OutOfRange)?
                    .copy_from_slice(data);
            }
            MOp::Copy { dst, src } => {
                let n = self.size(dst).min(self.size(src));
                let chunk = self.res[src].bytes[..n].to_vec();
                self.res[dst].bytes[..n].copy_from_slice(&chunk);
            }
            MOp::Region {
                dst,
                dst_offset,
                src,
                src_offset,
                len,
            } => {
                let chunk = self.res[src]
                    .bytes
                    .get(src_offset..src_offset + len)
                    .ok_or(AppError::OutOfRange)?
                    .to_vec();
                self.res[dst]
                    .bytes
                    .get_mut(dst_offset..dst_offset + len)
                    .ok_or(AppError::OutOfRange)?
                    .copy_from_slice(&chunk);
            }
            MOp::Fill { dst, value } => self.res[dst].bytes.fill(value),
            MOp::Clear { view, value } => {
                let v = &self.views[view];
                let (res, first, len) = (v.res, v.first, v.len);
                self.res[res].bytes[first..first + len].fill(value);
            }
            MOp::Nested(ref ops) => {
                // The first failing operation ends the whole replay.
                let ops = Arc::clone(ops);
                ops.iter().try_for_each(|op| self.apply(op))?;
            }
            MOp::Nop => {}
        }
        Ok(())
    }

    /// A deferred context's use of `key` (R-H1, R-H3): opens its context-local handle, and a
    /// view's resource's first, on the first use in the recording.
    /// Opens `key`'s handle in `rec` if it is not open, destroyed or not: something holds it
    /// (the list a Finish that keeps the state just made, R-C5).
    fn dc_use_held(&self, rec: &mut MRec, key: Key) {
        if rec.open.contains(&key) {
            return;
        }
        if let Key::V(v) = key {
            let r = Key::R(self.views[v].res);
            if !rec.open.contains(&r) {
                rec.open.push(r);
            }
        }
        rec.open.push(key);
    }

    /// The model's key of `handle`.
    fn key_of(&self, handle: AnyHandle) -> Option<Key> {
        let resources = (0..self.res.len()).map(Key::R);
        let views = (0..self.views.len()).map(Key::V);
        let queries = (0..self.queries.len()).map(Key::Q);
        resources
            .chain(views)
            .chain(queries)
            .find(|&k| self.any(k) == handle)
    }

    fn dc_use(&self, rec: &mut MRec, key: Key) -> Result<(), Fault> {
        if rec.open.contains(&key) {
            if self.destroyed(key) {
                // The application cannot name a destroyed object, even one this recording
                // holds (R-E1).
                return Err(AppError::StaleHandle.into());
            }
            return Ok(());
        }
        if self.destroyed(key) {
            return Err(AppError::StaleHandle.into());
        }
        if let Key::V(v) = key {
            let r = Key::R(self.views[v].res);
            if !rec.open.contains(&r) {
                // Opened for the view even if the application destroyed it: the view holds
                // it (R-H3).
                rec.open.push(r);
            }
        }
        rec.open.push(key);
        Ok(())
    }
}

/// A recording as the model sees it.
#[derive(Clone, Default)]
struct MRec {
    ops: Vec<MOp>,
    /// Payload bytes counted against the budget (updates, maps at map time).
    payload: usize,
    /// Context-local handles open, in order.
    open: Vec<Key>,
    bindings: BTreeMap<BindPoint, AnyHandle>,
    /// Mapped resources and what was written into their new contents.
    mapped: Vec<(usize, Vec<u8>)>,
    /// Resources mapped with NO_OVERWRITE: written in place, in their discard's operation.
    appending: Vec<usize>,
    begun: Vec<usize>,
    /// Resources whose Map the recording holds (R-C4).
    maps: Vec<usize>,
    /// Queries the recording begins or ends (R-C4).
    queries: Vec<usize>,
    /// Objects the lists the recording executes hold, at any depth (R-H2).
    nested_held: Vec<Key>,
    /// Operations replaying the lists the recording executes performs, at any depth.
    nested_ops: u64,
}

impl MRec {
    fn bytes(&self) -> usize {
        self.ops.len() * cmdlist::OPERATION_BYTES + self.payload
    }

    /// The operations the open Maps and begun queries owe: an Unmap each, an End each
    /// (Finish adds them, R-C4); the budget and the replay limit count them from the Map or
    /// the Begin on (R-E3).
    fn owed(&self) -> usize {
        self.mapped.len() + self.appending.len() + self.begun.len()
    }

    /// Operations executing the recording replays, with those it owes.
    fn replay_count(&self) -> u64 {
        self.ops.len() as u64 + self.nested_ops + self.owed() as u64
    }

    fn push_map(&mut self, res: usize, data: Vec<u8>) {
        self.ops.push(MOp::Write { res, data });
        if !self.maps.contains(&res) {
            self.maps.push(res);
        }
    }

    fn touch_query(&mut self, q: usize) {
        if !self.queries.contains(&q) {
            self.queries.push(q);
        }
    }
}

/// A deferred context beside the model of its recording.
struct MDc {
    dc: Dc,
    rec: MRec,
    removed: bool,
    removals: u64,
}

impl MDc {
    /// A new deferred context of `device`, recording nothing.
    fn new(device: &Dev) -> Self {
        MDc {
            dc: device.create_deferred_context().expect("deferred context"),
            rec: MRec::default(),
            removed: false,
            removals: 0,
        }
    }
}

/// A kept command list beside what the model knows of it.
struct MList {
    /// Shared with the calls that execute it on a deferred context.
    list: Arc<List>,
    ops: Arc<Vec<MOp>>,
    held: Vec<Key>,
    /// What the lists it executes hold, at any depth.
    nested_held: Vec<Key>,
    /// Operations an execute replays, nested lists included.
    replayed: u64,
    maps: Vec<usize>,
    queries: Vec<usize>,
    payload: usize,
}

/// A call on a deferred context, with its handles resolved.
enum Call {
    Update(Handle<Resource>, u64, Vec<u8>),
    Command(SoftCommand),
    Map(Handle<Resource>, Vec<u8>),
    /// Map(NO_OVERWRITE): the contents it must hand out, then what to write where.
    MapAppend(Handle<Resource>, Vec<u8>, usize, Vec<u8>),
    Unmap(Handle<Resource>),
    Bind(BindPoint, Option<AnyHandle>),
    Begin(Handle<Query>),
    End(Handle<Query>),
    Execute(Arc<List>),
}

/// A map's answer: the length of the returned bytes, whether they were all zero, and whether
/// they were what the model expected (a NO_OVERWRITE's kept contents).
type Mapped = Option<(usize, bool, bool)>;

/// A deferred-context call and the answer the model predicts for it.
struct Planned {
    call: Call,
    expected: Result<()>,
    /// The context was removed (R-E3) when the call was made: it accepts anything.
    removed: bool,
    id: ContextId,
}

fn call(dc: &mut Dc, call: &Call) -> Result<Mapped> {
    match call {
        Call::Update(r, offset, data) => dc.update(*r, *offset, data).map(|()| None),
        Call::Command(c) => dc.command(*c).map(|()| None),
        Call::Map(r, data) => {
            let bytes = dc.map_discard(*r)?;
            let seen = (bytes.len(), bytes.iter().all(|b| *b == 0), true);
            // A discard's bytes are undefined until written (R-M1): the whole new contents
            // written, the data and zeroes after it.
            let n = data.len().min(bytes.len());
            bytes[..n].copy_from_slice(&data[..n]);
            bytes[n..].fill(0);
            Ok(Some(seen))
        }
        Call::MapAppend(r, kept, at, data) => {
            let bytes = dc.map_no_overwrite(*r)?;
            let seen = (
                bytes.len(),
                bytes.iter().all(|b| *b == 0),
                bytes == &kept[..],
            );
            let n = data.len().min(bytes.len().saturating_sub(*at));
            if let Some(to) = bytes.get_mut(*at..*at + n) {
                to.copy_from_slice(&data[..n]);
            }
            Ok(Some(seen))
        }
        Call::Unmap(r) => dc.unmap(*r).map(|()| None),
        Call::Bind(p, o) => dc.bind(*p, *o).map(|()| None),
        Call::Begin(q) => dc.begin_query(*q).map(|()| None),
        Call::End(q) => dc.end_query(*q).map(|()| None),
        Call::Execute(list) => dc.execute_command_list(list).map(|()| None),
    }
}

/// Names the step a check follows in its failure message: "after step {i} ({step:?})",
/// formatted only when a check fails.
struct After<'a>(usize, &'a Step);

impl fmt::Display for After<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "after step {} ({:?})", self.0, self.1)
    }
}

/// The engine under test, the model beside it, and the run's bookkeeping.
struct Harness {
    device: Dev,
    /// `None` once destroyed (teardown).
    ic: Option<Ic>,
    world: Arc<SoftWorld>,
    budget: usize,
    m: Model,
    /// The deferred contexts, each made at the first step that uses it.
    dcs: [Option<MDc>; CONTEXTS],
    /// The contexts a step used since the last check.
    used: [bool; CONTEXTS],
    /// Scratch for [`Harness::check_memory`]: which of [`Model::allocs`] the kernel has.
    seen: Vec<bool>,
    lists: Vec<MList>,
    /// Resources mapped on the immediate context: the contents the Unmap makes theirs, and
    /// whether the Map was a Map(DISCARD) (which renames, R-M5), or else what a
    /// Map(NO_OVERWRITE) handed out (its Unmap changes only the bytes written since: the
    /// kernel's lock may be a copy, whose unlock keeps what the GPU wrote meanwhile).
    ic_mapped: Vec<(usize, Vec<u8>, Option<Vec<u8>>)>,
    ic_begun: Vec<usize>,
    ic_bindings: BTreeMap<BindPoint, AnyHandle>,
    /// Errors the soft kernel had received when the step began.
    errors_seen: usize,
    /// The errors the step must report, in order, with their context (R-E2).
    expected_errors: Vec<(ContextId, Error)>,
    /// Context-local removals so far: amortised processing calls expected (R-A2).
    removals: u64,
    /// The swap chain's resources, once a display step made them: the canvas, then the three
    /// back buffers.
    swap: Option<[usize; 4]>,
    cov: Coverage,
}

impl Harness {
    fn new(budget: usize, mode: ListMode) -> Self {
        // A small rename limit: runs reach both a rename and the copy past it (R-M5).
        let config = DeviceConfig::default()
            .with_deferred_budget(budget)
            .with_replay_limit(REPLAY_LIMIT)
            .with_rename_waiting(2);
        let soft_config = SoftConfig {
            trace: false,
            ..SoftConfig::default()
        }
        .with_list_mode(mode);
        let (device, ic, world) = soft::device(soft_config, config).expect("soft device");
        Harness {
            device,
            ic: Some(ic),
            world,
            budget,
            m: Model::with_capacity(),
            dcs: [const { None }; CONTEXTS],
            used: [false; CONTEXTS],
            seen: Vec::new(),
            lists: Vec::with_capacity(MAX_LISTS),
            ic_mapped: Vec::new(),
            ic_begun: Vec::new(),
            ic_bindings: BTreeMap::new(),
            errors_seen: 0,
            // A step reports a handful of errors at most (a burst of four calls).
            expected_errors: Vec::with_capacity(8),
            removals: 0,
            swap: None,
            cov: Coverage {
                emulated_runs: u64::from(mode == ListMode::Emulated),
                driver_built_runs: u64::from(mode == ListMode::DriverBuilt),
                ..Coverage::default()
            },
        }
    }

    /// Deferred context `d`, made if no step has used it yet; marked used, for the next
    /// check.
    fn slot(&mut self, d: usize) -> &mut MDc {
        self.used[d] = true;
        let device = &self.device;
        self.dcs[d].get_or_insert_with(|| MDc::new(device))
    }

    fn ic(&mut self) -> &mut Ic {
        self.ic.as_mut().expect("the device is alive during steps")
    }

    /// Compares an engine result with the model's, and expects the failure reported on
    /// `context` (R-E2).
    fn expect<T: core::fmt::Debug>(
        &mut self,
        what: &str,
        context: ContextId,
        actual: Result<T>,
        expected: Result<()>,
    ) {
        match (&actual, expected) {
            (Ok(_), Ok(())) => {}
            (Err(a), Err(e)) if *a == e => self.expected_errors.push((context, e)),
            _ => panic!("{what}: the engine answered {actual:?}, the model {expected:?}"),
        }
    }

    fn allocation_of<T: cmdlist::ObjectKind>(&self, handle: Handle<T>) -> AllocationHandle {
        let object = self.device.object(handle).expect("a new object is live");
        object
            .allocation()
            .expect("soft objects have kernel memory")
    }

    /// Creates a resource and adds it to the model, zeroed; its index.
    fn create_resource(&mut self, desc: ResourceDesc) -> usize {
        let handle = self.device.create_resource(desc).expect("resource create");
        let alloc = self.allocation_of(handle);
        self.m.res.push(MRes {
            handle,
            alloc,
            bytes: vec![0; desc.byte_size as usize],
            destroyed: false,
            freed: false,
            appendable: desc.texture.is_none() && desc.bind.contains(BindFlags::VERTEX_BUFFER),
        });
        let r = self.m.res.len() - 1;
        self.m.index_alloc(Key::R(r));
        r
    }

    fn step(&mut self, step: &Step) {
        match *step {
            Step::Create(New::Resource { size }) => {
                if !room(self.m.res.iter().map(|r| r.destroyed), MAX_RESOURCES) {
                    return;
                }
                let size = 1 + usize::from(size) % MAX_RESOURCE_BYTES;
                self.create_resource(ResourceDesc {
                    byte_size: size as u64,
                    // Map(DISCARD) applies to every resource here, and Map(NO_OVERWRITE) to
                    // every one a discard of the same recording mapped (R-M3).
                    usage: cmdlist::Usage::Dynamic,
                    bind: cmdlist::BindFlags::VERTEX_BUFFER,
                    ..ResourceDesc::default()
                });
            }
            Step::Create(New::View {
                resource,
                kind,
                first,
                len,
            }) => {
                let Some(res) = self.m.resource(resource) else {
                    return;
                };
                if !room(self.m.views.iter().map(|v| v.destroyed), MAX_VIEWS) {
                    return;
                }
                let size = self.m.size(res);
                let first = usize::from(first) % (size + 4);
                let len = usize::from(len) % 33;
                let desc = ViewDesc {
                    resource: self.m.res[res].handle,
                    first_byte: first as u64,
                    byte_len: len as u64,
                };
                let expected = if len == 0 {
                    Err(AppError::OutOfRange.into())
                } else if self.m.res[res].destroyed {
                    Err(AppError::MissingDependency.into())
                } else if first + len > size {
                    Err(AppError::OutOfRange.into())
                } else {
                    Ok(())
                };
                let actual = self.device.create_view(kind.handle_type(), desc);
                if let Ok(handle) = actual {
                    let alloc = self.allocation_of(handle);
                    self.m.views.push(MView {
                        handle,
                        alloc,
                        res,
                        first,
                        len,
                        destroyed: false,
                        freed: false,
                    });
                    self.m.index_alloc(Key::V(self.m.views.len() - 1));
                }
                self.expect("create_view", ContextId::Immediate, actual, expected);
            }
            Step::Create(New::Query { kind }) => {
                if !room(self.m.queries.iter().map(|q| q.destroyed), MAX_QUERIES) {
                    return;
                }
                let handle = self.device.create_query(kind.kind()).expect("query create");
                let alloc = self.allocation_of(handle);
                self.m.queries.push(MQuery {
                    handle,
                    alloc,
                    destroyed: false,
                    freed: false,
                });
                self.m.index_alloc(Key::Q(self.m.queries.len() - 1));
            }
            Step::Destroy { object, elsewhere } => {
                let Some(key) = self.m.key(object) else {
                    return;
                };
                let handle = self.m.any(key);
                self.cov.elsewhere += u64::from(elsewhere);
                let actual = if elsewhere {
                    let device = self.device.clone();
                    elsewhere::run(move || device.destroy(handle))
                } else {
                    self.device.destroy(handle)
                };
                if self.m.destroyed(key) {
                    // Pending: a double destroy; really destroyed already: a stale handle.
                    let e = actual.expect_err("destroying a destroyed object must fail");
                    let ok = [AppError::DoubleDestroy, AppError::StaleHandle].map(Error::from);
                    assert!(ok.contains(&e), "second destroy answered {e:?}");
                    self.expected_errors.push((ContextId::Immediate, e));
                } else {
                    assert_eq!(actual, Ok(()), "destroy of a live object");
                    match key {
                        Key::R(i) => self.m.res[i].destroyed = true,
                        Key::V(i) => self.m.views[i].destroyed = true,
                        Key::Q(i) => self.m.queries[i].destroyed = true,
                    }
                }
            }
            Step::Record {
                dc,
                elsewhere,
                ref ops,
            } => {
                self.cov.elsewhere += u64::from(elsewhere);
                let d = usize::from(dc) % CONTEXTS;
                self.record(d, ops.ops(), elsewhere);
            }
            Step::Close { dc, how } => {
                let d = usize::from(dc) % CONTEXTS;
                match how {
                    Close::FinishKeep => self.finish(d, true, false),
                    Close::FinishDrop => self.finish(d, false, false),
                    Close::FinishRestoring => self.finish(d, true, true),
                    Close::Abandon => {
                        let slot = self.slot(d);
                        assert_eq!(slot.dc.abandon(), Ok(()), "abandon");
                        slot.rec = MRec::default();
                        slot.removed = false;
                    }
                    Close::Reset => {
                        let fresh = MDc::new(&self.device);
                        drop(self.dcs[d].replace(fresh));
                        self.used[d] = true;
                    }
                }
            }
            Step::Execute { list, times } => {
                let Some(l) = pick(self.lists.len(), list) else {
                    return;
                };
                for _ in 0..1 + times % 3 {
                    self.execute(l);
                }
            }
            Step::DropList { list, elsewhere } => {
                let Some(l) = pick(self.lists.len(), list) else {
                    return;
                };
                let list = self.lists.remove(l).list;
                self.cov.elsewhere += u64::from(elsewhere);
                if elsewhere {
                    elsewhere::run(move || drop(list));
                } else {
                    drop(list);
                }
            }
            Step::Immediate(op) => self.immediate(op),
            Step::Display(op) => self.display(op),
            Step::Timeline(Timeline::Flush) => {
                let flushed = self.ic().flush();
                assert_eq!(flushed, Ok(()), "flush");
            }
            Step::Timeline(Timeline::CompleteAll) => self.world.complete_all(),
            Step::Timeline(Timeline::CompleteButNewest) => {
                let newest = self.world.last_submitted();
                self.world.complete_through(newest.saturating_sub(1));
            }
        }
    }

    /// Predicts a deferred-context operation on the model's copy `rec` of the recording:
    /// the call to make and what it must answer.
    fn predict(
        &self,
        rec: &mut MRec,
        op: DcOp,
        top_up: Option<usize>,
    ) -> Option<(Call, Result<(), Fault>)> {
        let m = &self.m;
        let op_size = cmdlist::OPERATION_BYTES;
        let budget = self.budget;
        // The budget, and the replay limit: every recorded operation counts, and every owed
        // one (R-E3); `ops` more of `more` bytes.
        let reserve = |rec: &MRec, more: usize, ops: u64| -> Result<(), Fault> {
            if rec.bytes() + rec.owed() * op_size + more > budget
                || rec.replay_count() + ops > REPLAY_LIMIT
            {
                Err(Error::OutOfMemory.into())
            } else {
                Ok(())
            }
        };
        let res = |i| m.resource(i);
        let query = |i| m.query(i);
        Some(match op {
            DcOp::Update {
                resource,
                offset,
                data,
            } => {
                let r = res(resource)?;
                let size = m.size(r);
                let offset = usize::from(offset) % (size + 8);
                let data = match top_up {
                    Some(len) => vec![data.seed; len.min(size)],
                    None => data.make(48),
                };
                let call = Call::Update(m.res[r].handle, offset as u64, data.clone());
                let mut predicted = || -> Result<(), Fault> {
                    reserve(rec, op_size + data.len(), 1)?;
                    if m.res[r].destroyed {
                        return Err(AppError::StaleHandle.into());
                    }
                    if data.is_empty() || offset + data.len() > size {
                        return Err(AppError::OutOfRange.into());
                    }
                    m.dc_use(rec, Key::R(r))?;
                    rec.payload += data.len();
                    rec.ops.push(MOp::Update {
                        res: r,
                        offset,
                        data: data.clone(),
                    });
                    Ok(())
                };
                let result = predicted();
                (call, result)
            }
            DcOp::HugeUpdate { resource } => {
                let r = res(resource)?;
                let call = Call::Update(m.res[r].handle, 0, vec![0x5a; budget + 1]);
                (call, Err(Error::OutOfMemory.into()))
            }
            DcOp::TopUp { resource } => {
                return self.predict(
                    rec,
                    DcOp::Update {
                        resource,
                        offset: 0,
                        data: Bytes { len: 0, seed: 0x3c },
                    },
                    Some(budget.saturating_sub(rec.bytes() + (rec.owed() + 1) * op_size)),
                );
            }
            DcOp::Command(cmd) => {
                let (command, mop, keys) = m.command(cmd)?;
                let predicted = || -> Result<(), Fault> {
                    reserve(rec, op_size, 1)?;
                    for key in keys.iter().flatten() {
                        m.dc_use(rec, *key)?;
                    }
                    rec.ops.push(mop);
                    Ok(())
                };
                let result = predicted();
                (Call::Command(command), result)
            }
            DcOp::MapWrite { resource, data } => {
                let r = res(resource)?;
                let size = m.size(r);
                let data = data.make(size);
                let call = Call::Map(m.res[r].handle, data.clone());
                let mut predicted = || -> Result<(), Fault> {
                    // Mapped already, by a discard or a NO_OVERWRITE (R-C4).
                    if rec.mapped.iter().any(|(x, _)| *x == r) || rec.appending.contains(&r) {
                        return Err(AppError::InvalidState.into());
                    }
                    if m.res[r].destroyed {
                        return Err(AppError::StaleHandle.into());
                    }
                    reserve(rec, op_size + size, 1)?;
                    m.dc_use(rec, Key::R(r))?;
                    rec.payload += size;
                    let mut contents = vec![0; size];
                    contents[..data.len()].copy_from_slice(&data);
                    rec.mapped.push((r, contents));
                    Ok(())
                };
                let result = predicted();
                (call, result)
            }
            DcOp::MapAppend {
                resource,
                offset,
                data,
            } => {
                let last_discarded = rec.ops.iter().rev().find_map(|op| match op {
                    MOp::Write { res, .. } => Some(*res),
                    _ => None,
                });
                let r = match last_discarded {
                    Some(r) if resource % 2 == 0 => r,
                    _ => res(resource)?,
                };
                let size = m.size(r);
                let at = usize::from(offset) % size.max(1);
                let data = data.make(size - at);
                // The discard this Map finds: the last one the recording's own operations hold.
                let discard = rec
                    .ops
                    .iter()
                    .rposition(|op| matches!(op, MOp::Write { res, .. } if *res == r));
                let kept = match discard {
                    Some(i) => match &rec.ops[i] {
                        MOp::Write { data, .. } => data.clone(),
                        _ => unreachable!("found as a write"),
                    },
                    None => Vec::new(),
                };
                let call = Call::MapAppend(m.res[r].handle, kept, at, data.clone());
                let mut predicted = || -> Result<(), Fault> {
                    if rec.mapped.iter().any(|(x, _)| *x == r) || rec.appending.contains(&r) {
                        return Err(AppError::InvalidState.into());
                    }
                    if m.res[r].destroyed {
                        return Err(AppError::StaleHandle.into());
                    }
                    if !m.res[r].appendable {
                        return Err(AppError::NotMappable.into());
                    }
                    let i = discard.ok_or(AppError::MapWithoutDiscard)?;
                    reserve(rec, 0, 1)?;
                    m.dc_use(rec, Key::R(r))?;
                    if let MOp::Write { data: bytes, .. } = &mut rec.ops[i] {
                        bytes[at..at + data.len()].copy_from_slice(&data);
                    }
                    rec.appending.push(r);
                    Ok(())
                };
                let result = predicted();
                (call, result)
            }
            DcOp::Unmap { resource } => {
                let r = res(resource)?;
                let result = match rec.mapped.iter().position(|(x, _)| *x == r) {
                    Some(i) => {
                        let (r, contents) = rec.mapped.swap_remove(i);
                        rec.push_map(r, contents);
                        Ok(())
                    }
                    None => match rec.appending.iter().position(|x| *x == r) {
                        Some(i) => {
                            rec.appending.swap_remove(i);
                            Ok(())
                        }
                        None => Err(AppError::InvalidState.into()),
                    },
                };
                (Call::Unmap(m.res[r].handle), result)
            }
            DcOp::Bind { point: p, object } => {
                let key = match object {
                    Some(o) => Some(m.key(o)?),
                    None => None,
                };
                let p = point(p);
                let mut predicted = || -> Result<(), Fault> {
                    reserve(rec, op_size, 1)?;
                    if let Some(k) = key {
                        m.dc_use(rec, k)?;
                    }
                    match key {
                        Some(k) => rec.bindings.insert(p, m.any(k)),
                        None => rec.bindings.remove(&p),
                    };
                    rec.ops.push(MOp::Nop);
                    Ok(())
                };
                let result = predicted();
                (Call::Bind(p, key.map(|k| m.any(k))), result)
            }
            DcOp::BeginQuery { query: q } => {
                let q = query(q)?;
                let mut predicted = || -> Result<(), Fault> {
                    // The Begin and the End it owes.
                    reserve(rec, 2 * op_size, 2)?;
                    if rec.begun.contains(&q) {
                        return Err(AppError::InvalidState.into());
                    }
                    m.dc_use(rec, Key::Q(q))?;
                    rec.begun.push(q);
                    rec.touch_query(q);
                    rec.ops.push(MOp::Nop);
                    Ok(())
                };
                let result = predicted();
                (Call::Begin(m.queries[q].handle), result)
            }
            DcOp::EndQuery { query: q } => {
                let q = query(q)?;
                let mut predicted = || -> Result<(), Fault> {
                    // The End of a begun query was reserved by its Begin.
                    let owed = rec.begun.contains(&q);
                    let ops = if owed { 0 } else { 1 };
                    reserve(rec, ops * op_size, ops as u64)?;
                    m.dc_use(rec, Key::Q(q))?;
                    if let Some(i) = rec.begun.iter().position(|x| *x == q) {
                        rec.begun.swap_remove(i);
                    }
                    rec.touch_query(q);
                    rec.ops.push(MOp::Nop);
                    Ok(())
                };
                let result = predicted();
                (Call::End(m.queries[q].handle), result)
            }
            DcOp::ExecuteList { list } => {
                let inner = &self.lists[pick(self.lists.len(), list)?];
                let mut predicted = || -> Result<(), Fault> {
                    reserve(rec, op_size, 1)?;
                    let replayed = rec.replay_count() + 1 + inner.replayed;
                    if replayed > REPLAY_LIMIT {
                        return Err(Error::OutOfMemory.into());
                    }
                    // R-C4 at every depth: the inner list's maps and queries are its own
                    // and those of the lists it executes.
                    if inner.maps.iter().any(|r| {
                        rec.mapped.iter().any(|(x, _)| x == r) || rec.appending.contains(r)
                    }) {
                        return Err(AppError::MapConflict.into());
                    }
                    if inner.queries.iter().any(|q| rec.begun.contains(q)) {
                        return Err(AppError::QueryConflict.into());
                    }
                    for &r in &inner.maps {
                        if !rec.maps.contains(&r) {
                            rec.maps.push(r);
                        }
                    }
                    for &q in &inner.queries {
                        rec.touch_query(q);
                    }
                    for &k in inner.held.iter().chain(&inner.nested_held) {
                        if !rec.nested_held.contains(&k) {
                            rec.nested_held.push(k);
                        }
                    }
                    rec.nested_ops += inner.replayed;
                    // R-C3: nothing bound from the next call on.
                    rec.bindings.clear();
                    rec.ops.push(MOp::Nested(Arc::clone(&inner.ops)));
                    Ok(())
                };
                let result = predicted();
                (Call::Execute(Arc::clone(&inner.list)), result)
            }
        })
    }

    /// Records `ops` on context `d`: each call is predicted on the model first (the next
    /// prediction depends on the previous ones, never on what the engine answered), then the
    /// calls are made in order, here or, with `elsewhere`, all on another thread (a deferred
    /// context is `Send`: it moves there for the burst and back), then each answer is checked
    /// against its prediction, in order.
    fn record(&mut self, d: usize, ops: impl Iterator<Item = DcOp>, elsewhere: bool) {
        let planned: Vec<Planned> = ops.filter_map(|op| self.plan(d, op)).collect();
        if planned.is_empty() {
            return;
        }
        let make = |dc: &mut Dc, planned: &[Planned]| -> Vec<Result<Mapped>> {
            planned.iter().map(|p| call(dc, &p.call)).collect()
        };
        let (planned, answers) = if elsewhere {
            let mut slot = self.dcs[d].take().expect("planning made the context");
            let (slot, planned, answers) = elsewhere::run(move || {
                let answers = make(&mut slot.dc, &planned);
                (slot, planned, answers)
            });
            self.dcs[d] = Some(slot);
            (planned, answers)
        } else {
            let answers = make(&mut self.slot(d).dc, &planned);
            (planned, answers)
        };
        for (planned, actual) in planned.into_iter().zip(answers) {
            self.verify(planned, actual);
        }
    }

    /// Predicts one deferred-context call on context `d` and updates the model as its
    /// predicted answer says (a refused call changes nothing, an out-of-memory one removes
    /// the context, R-E3).
    fn plan(&mut self, d: usize, op: DcOp) -> Option<Planned> {
        // A removed context's recording is empty and stays so whatever the call: predict on
        // a copy. Otherwise the prediction's changes stand, even when the call is refused
        // (a refused command keeps the handles it opened before the failing one), so
        // predict on the recording itself, moved out of the slot meanwhile.
        let slot = self.slot(d);
        let removed = slot.removed;
        let mut rec = if removed {
            slot.rec.clone()
        } else {
            core::mem::take(&mut slot.rec)
        };
        let Some((call, predicted)) = self.predict(&mut rec, op, None) else {
            // Nothing to pick: no change.
            if !removed {
                self.slot(d).rec = rec;
            }
            return None;
        };
        let slot = self.dcs[d].as_mut().expect("made above");
        let id = ContextId::from(slot.dc.id());
        let expected = match predicted {
            Err(Fault::Err(e)) => Err(e),
            Ok(()) => Ok(()),
        };
        let planned = Planned {
            call,
            expected,
            removed: slot.removed,
            id,
        };
        if slot.removed {
            self.cov.while_removed += 1;
            return Some(planned);
        }
        match expected {
            Err(Error::OutOfMemory) => {
                slot.rec = MRec::default();
                slot.removed = true;
                slot.removals += 1;
                self.removals += 1;
                self.cov.removals += 1;
            }
            Err(_) => {
                slot.rec = rec;
                self.cov.refused += 1;
            }
            Ok(()) => {
                slot.rec = rec;
                self.cov.recorded += 1;
                self.cov.nested += u64::from(matches!(op, DcOp::ExecuteList { .. }));
                self.cov.appends += u64::from(matches!(op, DcOp::MapAppend { .. }));
            }
        }
        Some(planned)
    }

    /// Checks the engine's answer to a planned call.
    fn verify(&mut self, planned: Planned, actual: Result<Mapped>) {
        let Planned {
            call: call_,
            expected,
            removed,
            id,
        } = planned;
        if removed {
            // R-E3: a removed context accepts every call and records nothing; a map hands
            // out scratch bytes.
            match (&call_, &actual) {
                (Call::Map(r, _) | Call::MapAppend(r, ..), Ok(Some((len, zero, _)))) => {
                    let live = self
                        .m
                        .res
                        .iter()
                        .find(|x| x.handle == *r)
                        .filter(|x| !x.destroyed);
                    assert_eq!(*len, live.map_or(0, |x| x.bytes.len()), "scratch map size");
                    assert!(*zero, "scratch map bytes are zeroed");
                }
                (_, Ok(_)) => {}
                _ => panic!("a removed context answered {actual:?}"),
            }
            return;
        }
        if let Call::Map(r, _) | Call::MapAppend(r, ..) = &call_ {
            let append = matches!(call_, Call::MapAppend(..));
            let size = self
                .m
                .res
                .iter()
                .find(|x| x.handle == *r)
                .map_or(0, |x| x.bytes.len());
            match (&actual, expected) {
                // Out of memory while mapping: removed, and scratch bytes to write (R-E3).
                (Ok(Some((len, zero, _))), Err(Error::OutOfMemory)) => {
                    assert_eq!(*len, size, "scratch of the whole resource");
                    assert!(*zero, "scratch bytes are zeroed");
                    self.expected_errors.push((id, Error::OutOfMemory));
                }
                (Ok(Some((len, _, kept))), Ok(())) => {
                    assert_eq!(*len, size, "a Map hands out the whole resource");
                    // A Map(DISCARD)'s bytes are undefined until written (R-M1).
                    if append {
                        assert!(*kept, "Map(NO_OVERWRITE) hands out the discard's bytes");
                    }
                }
                (Err(a), Err(e)) if *a == e && e != Error::OutOfMemory => {
                    self.expected_errors.push((id, e));
                }
                _ => panic!("map_discard: the engine answered {actual:?}, the model {expected:?}"),
            }
        } else {
            self.expect("deferred-context call", id, actual, expected);
        }
    }

    /// Finish (`restore`: keeping the state, R-C5), checked against the model; the list is
    /// kept for later steps with `keep`.
    fn finish(&mut self, d: usize, keep: bool, restore: bool) {
        self.slot(d);
        let slot = self.dcs[d].as_mut().expect("made above");
        let rec = core::mem::take(&mut slot.rec);
        let saved: Vec<(BindPoint, AnyHandle)> = match restore {
            true => rec.bindings.iter().map(|(p, h)| (*p, *h)).collect(),
            false => Vec::new(),
        };
        let actual = match restore {
            true => slot.dc.finish_restoring_state(),
            false => slot.dc.finish(),
        };
        if slot.removed {
            // R-E3: the finish after a removal returns out of memory (a return value, not
            // reported), and the context records normally again.
            slot.removed = false;
            assert!(
                matches!(actual, Err(Error::OutOfMemory)),
                "finish after a removal"
            );
            self.cov.finish_after_removal += 1;
            return;
        }
        // The implicit Ends and Unmaps (R-C4) were reserved by their Begins and Maps.
        let pending = rec.begun.len();
        let list = match actual {
            Ok(list) => list,
            Err(e) => panic!("finish answered {e:?}, the model Ok"),
        };
        self.cov.finished += 1;
        if pending > 0 {
            self.cov.finish_ended_queries += 1;
        }
        let mut rec = rec;
        rec.ops.extend((0..pending).map(|_| MOp::Nop));
        while let Some((r, contents)) = rec.mapped.pop() {
            rec.push_map(r, contents);
        }
        let stats = list.stats();
        assert_eq!(stats.operations, rec.ops.len(), "list operations");
        assert_eq!(stats.objects, rec.open.len(), "objects a list holds");
        assert_eq!(stats.payload_bytes, rec.payload, "list payload bytes");
        let replayed = rec.ops.len() as u64 + rec.nested_ops;
        assert_eq!(
            stats.replayed_operations, replayed,
            "list replayed operations"
        );
        let kept = MList {
            replayed,
            list: Arc::new(list),
            ops: Arc::new(rec.ops),
            held: rec.open,
            nested_held: rec.nested_held,
            maps: rec.maps,
            queries: rec.queries,
            payload: rec.payload,
        };
        if keep && self.lists.len() < MAX_LISTS {
            self.lists.push(kept);
        }
        if restore {
            self.rebind(d, &saved);
        }
    }

    /// The re-binds of a Finish that keeps the state (R-C5): each a bind of the next
    /// recording, of an object the finished list holds (bound even if destroyed); one that
    /// runs out of memory removes the context (R-E3), and the rest change nothing.
    fn rebind(&mut self, d: usize, saved: &[(BindPoint, AnyHandle)]) {
        let op_size = cmdlist::OPERATION_BYTES;
        let budget = self.budget;
        for &(point, handle) in saved {
            let key = self
                .m
                .key_of(handle)
                .expect("the model's bindings are its objects");
            let slot = self.dcs[d].as_mut().expect("finished above");
            if slot.removed {
                return;
            }
            let rec = &mut slot.rec;
            let fits = rec.bytes() + rec.owed() * op_size + op_size <= budget
                && rec.replay_count() < REPLAY_LIMIT;
            if !fits {
                let id = ContextId::from(slot.dc.id());
                slot.rec = MRec::default();
                slot.removed = true;
                slot.removals += 1;
                self.removals += 1;
                self.cov.removals += 1;
                self.expected_errors.push((id, Error::OutOfMemory));
                return;
            }
            self.m.dc_use_held(rec, key);
            rec.bindings.insert(point, handle);
            rec.ops.push(MOp::Nop);
            self.cov.rebinds += 1;
        }
    }

    fn execute(&mut self, l: usize) {
        let list = &self.lists[l];
        let expected = if list
            .maps
            .iter()
            .any(|r| self.ic_mapped.iter().any(|(x, ..)| x == r))
        {
            Err(AppError::MapConflict.into())
        } else if list.queries.iter().any(|q| self.ic_begun.contains(q)) {
            Err(AppError::QueryConflict.into())
        } else {
            // R-C3: the list's operations in order (the first failing one ends the
            // replay), then clear-state.
            self.ic_bindings.clear();
            list.ops.iter().try_for_each(|op| self.m.apply(op))
        };
        let ic = self.ic.as_mut().expect("device alive");
        let actual = ic.execute_command_list(&list.list);
        let stats = list.list.stats();
        assert_eq!(
            stats.payload_bytes, list.payload,
            "a list's payload is unchanged by execution"
        );
        let destroyed = list.held.iter().any(|k| self.m.destroyed(*k));
        match expected {
            Ok(()) => {
                self.cov.executed += 1;
                self.cov.executed_with_destroyed += u64::from(destroyed);
            }
            Err(Error::Application(AppError::MapConflict)) => self.cov.map_conflicts += 1,
            Err(Error::Application(AppError::QueryConflict)) => self.cov.query_conflicts += 1,
            Err(_) => self.cov.failed_replays += 1,
        }
        self.expect(
            "execute_command_list",
            ContextId::Immediate,
            actual,
            expected,
        );
    }

    fn immediate(&mut self, op: IcOp) {
        let m = &mut self.m;
        let res = |m: &Model, i| m.resource(i);
        let query = |m: &Model, i| m.query(i);
        let ic = self.ic.as_mut().expect("device alive");
        let (actual, expected): (Result<()>, Result<()>) = match op {
            IcOp::Update {
                resource,
                offset,
                data,
            } => {
                let Some(r) = res(m, resource) else { return };
                let offset = usize::from(offset) % (m.size(r) + 8);
                let data = data.make(48);
                let actual = ic.update(m.res[r].handle, offset as u64, &data);
                let expected = if m.res[r].destroyed {
                    Err(AppError::StaleHandle.into())
                } else if data.is_empty() {
                    Err(AppError::OutOfRange.into()) // nothing to write (R-E1)
                } else {
                    m.apply(&MOp::Update {
                        res: r,
                        offset,
                        data,
                    })
                };
                (actual, expected)
            }
            IcOp::Command(cmd) => {
                let Some((command, mop, keys)) = m.command(cmd) else {
                    return;
                };
                let actual = ic.command(&command);
                let expected = if keys.iter().flatten().any(|k| m.destroyed(*k)) {
                    Err(AppError::StaleHandle.into())
                } else {
                    m.apply(&mop)
                };
                (actual, expected)
            }
            IcOp::Map { resource, data } => {
                let Some(r) = res(m, resource) else { return };
                let size = m.size(r);
                let data = data.make(size);
                let actual = ic.map_discard(m.res[r].handle).map(|contents| {
                    assert_eq!(contents.len(), size, "Map(DISCARD) hands out the resource");
                    // Undefined until written (R-M1): the data, and zeroes after it.
                    contents[..data.len()].copy_from_slice(&data);
                    contents[data.len()..].fill(0);
                });
                let expected = if m.res[r].destroyed {
                    Err(AppError::StaleHandle.into())
                } else if self.ic_mapped.iter().any(|(x, ..)| *x == r) {
                    Err(AppError::InvalidState.into())
                } else {
                    let mut contents = vec![0; size];
                    contents[..data.len()].copy_from_slice(&data);
                    self.ic_mapped.push((r, contents, None));
                    Ok(())
                };
                (actual, expected)
            }
            IcOp::MapAppend {
                resource,
                offset,
                data,
            } => {
                let Some(r) = res(m, resource) else { return };
                let size = m.size(r);
                let at = usize::from(offset) % size.max(1);
                let data = data.make(size - at);
                let mut seen = Vec::new();
                let actual = ic.map_no_overwrite(m.res[r].handle).map(|bytes| {
                    seen = bytes.to_vec();
                    bytes[at..at + data.len()].copy_from_slice(&data);
                });
                let expected = if m.res[r].destroyed {
                    Err(AppError::StaleHandle.into())
                } else if !m.res[r].appendable {
                    Err(AppError::NotMappable.into())
                } else if self.ic_mapped.iter().any(|(x, ..)| *x == r) {
                    Err(AppError::InvalidState.into())
                } else {
                    // The resource's own memory, contents kept (R-M3).
                    assert!(
                        actual.is_err() || seen == m.res[r].bytes,
                        "Map(NO_OVERWRITE) on the immediate context handed out {seen:?}, \
                         the resource holds {:?}",
                        m.res[r].bytes
                    );
                    let mut contents = m.res[r].bytes.clone();
                    contents[at..at + data.len()].copy_from_slice(&data);
                    let handed_out = m.res[r].bytes.clone();
                    self.ic_mapped.push((r, contents, Some(handed_out)));
                    Ok(())
                };
                (actual, expected)
            }
            IcOp::Unmap { resource } => {
                let Some(r) = res(m, resource) else { return };
                let actual = ic.unmap(m.res[r].handle);
                let expected = match self.ic_mapped.iter().position(|(x, ..)| *x == r) {
                    None => Err(AppError::InvalidState.into()),
                    Some(_) if m.res[r].destroyed => Err(AppError::StaleHandle.into()),
                    Some(i) => {
                        let (_, mut data, handed_out) = self.ic_mapped.swap_remove(i);
                        let discard = handed_out.is_none();
                        if let Some(before) = &handed_out {
                            // What the GPU wrote since the Map stays where the application
                            // wrote nothing new.
                            for ((new, was), now) in
                                data.iter_mut().zip(before).zip(&m.res[r].bytes)
                            {
                                if new == was {
                                    *new = *now;
                                }
                            }
                        }
                        let write = MOp::Write { res: r, data };
                        let written = m.apply(&write);
                        if let (Err(_), MOp::Write { data, .. }) = (&written, write) {
                            self.ic_mapped.push((r, data, handed_out)); // still mapped
                        } else if actual.is_ok() && discard {
                            // The soft driver renames (R-M5): the resource's bytes are in
                            // another allocation, or, with the pool at its limit, copied
                            // into the one it had (`handle_lifecycle` models which).
                            let object = self.device.object(m.res[r].handle).expect("live");
                            let new = object.allocation().expect("a resource's memory");
                            if new != m.res[r].alloc {
                                m.renamed(r, new);
                            }
                        }
                        written
                    }
                };
                (actual, expected)
            }
            IcOp::Bind { point: p, object } => {
                let key = match object {
                    Some(o) => match m.key(o) {
                        Some(k) => Some(k),
                        None => return,
                    },
                    None => None,
                };
                let p = point(p);
                let actual = ic.bind(p, key.map(|k| m.any(k)));
                let expected = match key {
                    Some(k) if m.destroyed(k) => Err(AppError::StaleHandle.into()),
                    Some(k) => {
                        self.ic_bindings.insert(p, m.any(k));
                        Ok(())
                    }
                    None => {
                        self.ic_bindings.remove(&p);
                        Ok(())
                    }
                };
                (actual, expected)
            }
            IcOp::BeginQuery { query: q } => {
                let Some(q) = query(m, q) else { return };
                let actual = ic.begin_query(m.queries[q].handle);
                let expected = if m.queries[q].destroyed {
                    Err(AppError::StaleHandle.into())
                } else if self.ic_begun.contains(&q) {
                    Err(AppError::InvalidState.into())
                } else {
                    self.ic_begun.push(q);
                    Ok(())
                };
                (actual, expected)
            }
            IcOp::EndQuery { query: q } => {
                let Some(q) = query(m, q) else { return };
                let actual = ic.end_query(m.queries[q].handle);
                let expected = if m.queries[q].destroyed {
                    Err(AppError::StaleHandle.into())
                } else {
                    if let Some(i) = self.ic_begun.iter().position(|x| *x == q) {
                        self.ic_begun.swap_remove(i);
                    }
                    Ok(())
                };
                (actual, expected)
            }
        };
        match expected {
            Ok(()) => self.cov.immediate_ok += 1,
            Err(_) => self.cov.immediate_refused += 1,
        }
        self.expect(
            "immediate-context call",
            ContextId::Immediate,
            actual,
            expected,
        );
    }

    /// The swap chain, made at the first display step (while there is room for four more
    /// resources): the canvas and three back buffers, so that a rotation the wrong way round
    /// shows (with two, both directions look the same).
    fn swap_chain(&mut self) -> Option<[usize; 4]> {
        if self.swap.is_some() {
            return self.swap;
        }
        let live = self.m.res.iter().filter(|r| !r.destroyed).count();
        if live + 4 > MAX_RESOURCES.0 || self.m.res.len() + 4 > MAX_RESOURCES.1 {
            return None;
        }
        let formats = [
            DisplayFormat::R8G8B8A8UnormSrgb,
            DisplayFormat::B8G8R8A8Unorm,
            DisplayFormat::B8G8R8A8Unorm,
            DisplayFormat::B8G8R8A8Unorm,
        ];
        let made = formats.map(|format| {
            let texture = Texture2d {
                width: SWAP_W,
                height: SWAP_H,
                array_size: 1,
                mip_levels: 1,
                samples: 1,
                format: format.to_dxgi(),
            };
            self.create_resource(ResourceDesc {
                byte_size: texture.byte_size().expect("a small texture"),
                bind: BindFlags::PRESENT | BindFlags::RENDER_TARGET,
                usage: cmdlist::Usage::Dynamic,
                texture: Some(texture),
                ..ResourceDesc::default()
            })
        });
        self.swap = Some(made);
        self.swap
    }

    /// A DXGI step, checked against the model: a destroyed resource is a stale handle; a
    /// rotation of a mapped back buffer is refused (R-X5); otherwise a present shows the back
    /// buffer's bytes on the screen (R-X1), a rotation swaps the back buffers' allocations and
    /// bytes, and a Blt writes the canvas's pixels reordered into the back buffer (R-X6).
    fn display(&mut self, op: Display) {
        let Some([canvas, b0, b1, b2]) = self.swap_chain() else {
            return;
        };
        let back = |buffer: u8| [b0, b1, b2][usize::from(buffer % 3)];
        let stale = |m: &Model, rs: &[usize]| rs.iter().any(|r| m.res[*r].destroyed);
        let ic = self.ic.as_mut().expect("device alive");
        let m = &mut self.m;
        let (actual, expected): (Result<()>, Result<()>) = match op {
            Display::Present { buffer } => {
                let src = back(buffer);
                let args = PresentArgs {
                    src: m.res[src].handle,
                    src_subresource: 0,
                    dst: None,
                    dxgi_context: DxgiContext(src),
                    flags: PresentFlags::FLIP,
                    flip_interval: 1,
                };
                let actual = ic.present(&args).map(|_| ());
                let expected = if stale(m, &[src]) {
                    Err(AppError::StaleHandle.into())
                } else {
                    let screen = self.world.screen();
                    assert_eq!(
                        screen.as_ref(),
                        Some(&m.res[src].bytes),
                        "the screen (R-X1)"
                    );
                    Ok(())
                };
                (actual, expected)
            }
            Display::Rotate => {
                let chain = [b0, b1, b2];
                let actual = ic.rotate_resource_identities(&chain.map(|b| m.res[b].handle));
                let expected = if stale(m, &chain) {
                    Err(AppError::StaleHandle.into())
                } else if self.ic_mapped.iter().any(|(r, ..)| chain.contains(r)) {
                    Err(AppError::NotRotatable.into())
                } else {
                    m.rotate(&chain);
                    Ok(())
                };
                (actual, expected)
            }
            Display::Blt { buffer } => {
                let dst = back(buffer);
                let args = BltArgs {
                    dst: m.res[dst].handle,
                    dst_subresource: 0,
                    dst_rect: Rect::whole(SWAP_W, SWAP_H),
                    src: m.res[canvas].handle,
                    src_subresource: 0,
                    src_rect: None,
                    flags: BltFlags::CONVERT,
                    rotation: Rotation::Identity,
                };
                let actual = ic.blt(&args);
                let expected = if stale(m, &[canvas, dst]) {
                    Err(AppError::StaleHandle.into())
                } else {
                    let pixels: Vec<u8> = m.res[canvas]
                        .bytes
                        .chunks_exact(4)
                        .flat_map(|p| [p[2], p[1], p[0], p[3]])
                        .collect();
                    m.res[dst].bytes = pixels;
                    Ok(())
                };
                (actual, expected)
            }
        };
        match expected {
            Ok(()) => self.cov.displayed += 1,
            Err(_) => self.cov.immediate_refused += 1,
        }
        self.expect("DXGI call", ContextId::Immediate, actual, expected);
    }

    /// Whether something still holds `key` from its real destruction: a kept list or an open
    /// recording (directly, or through a view of it), or, for a resource, a view the
    /// application has not destroyed (R-H3), or a Map(NO_OVERWRITE) on the immediate context
    /// that locks its memory (R-M4: deallocated only once unlocked).
    fn pinned(&self, key: Key) -> bool {
        if let Key::R(r) = key {
            if self
                .ic_mapped
                .iter()
                .any(|(x, _, handed_out)| *x == r && handed_out.is_some())
            {
                return true;
            }
        }
        let holds = |k: &Key| {
            *k == key
                || match (key, *k) {
                    (Key::R(r), Key::V(v)) => self.m.views[v].res == r,
                    _ => false,
                }
        };
        let live_view = match key {
            Key::R(r) => self.m.views.iter().any(|v| v.res == r && !v.destroyed),
            _ => false,
        };
        live_view
            || self
                .lists
                .iter()
                .any(|l| l.held.iter().chain(&l.nested_held).any(holds))
            || self
                .dcs
                .iter()
                .flatten()
                .any(|d| d.rec.open.iter().chain(&d.rec.nested_held).any(holds))
    }

    fn keys(&self) -> impl Iterator<Item = Key> {
        let r = (0..self.m.res.len()).map(Key::R);
        let v = (0..self.m.views.len()).map(Key::V);
        let q = (0..self.m.queries.len()).map(Key::Q);
        r.chain(v).chain(q)
    }

    /// Memory: resources' bytes equal the model's; whatever the kernel no longer has was
    /// destroyed and is held by nothing (R-D1, R-H2). One pass over the kernel's live
    /// allocations, each found in [`Model::allocs`] by id; the kernel never reuses an id, so
    /// an object found deallocated once is not looked at again.
    fn check_memory(&mut self, when: &dyn fmt::Display) {
        let mut seen = core::mem::take(&mut self.seen);
        seen.clear();
        seen.resize(self.m.allocs.len(), false);
        self.world.for_each_allocation(|allocation, bytes| {
            let id = allocation.0.get();
            let Ok(i) = self.m.allocs.binary_search_by_key(&id, |(a, _)| *a) else {
                return;
            };
            seen[i] = true;
            if let (_, Key::R(r)) = self.m.allocs[i] {
                assert!(
                    *bytes == self.m.res[r].bytes,
                    "{when}: resource {r} holds {bytes:?}, the model {:?}",
                    self.m.res[r].bytes
                );
            }
        });
        for (i, &found) in seen.iter().enumerate() {
            let key = self.m.allocs[i].1;
            if found || self.m.freed(key) {
                continue;
            }
            assert!(
                self.m.destroyed(key) && !self.pinned(key),
                "{when}: {key:?} deallocated while live or held"
            );
            self.m.set_freed(key);
        }
        self.seen = seen;
    }

    fn check(&mut self, i: usize, step: &Step) {
        let when = After(i, step);
        if self.world.violation_count() != 0 {
            panic!("{when}: rules broken: {:#?}", self.world.violations());
        }
        let amortized = self.world.amortized_calls();
        self.check_memory(&when);
        let reported = self.world.errors_since(self.errors_seen);
        assert_eq!(
            reported, self.expected_errors,
            "{when}: errors reported (R-E2)"
        );
        self.errors_seen += reported.len();
        self.expected_errors.clear();
        let ic = self.ic.as_ref().expect("device alive");
        let pumped = self.removals + ic.amortized_count();
        assert_eq!(
            amortized, pumped,
            "{when}: amortised processing (R-A1, R-A2)"
        );
        self.check_contexts(&when, false);
        let ic = self.ic.as_ref().expect("device alive");
        let model = || self.ic_bindings.iter().map(|(p, h)| (*p, *h));
        if !ic.bindings().eq(model()) {
            let (bound, model): (Vec<_>, Vec<_>) = (ic.bindings().collect(), model().collect());
            assert_eq!(bound, model, "{when}: immediate-context bindings (R-C3)");
        }
    }

    /// Each deferred context's removal flag, open handles, operations, budget count, removals
    /// and bindings against the model's (R-C1, R-E3): with `all`, every context; otherwise
    /// the contexts a step used since the last check. The others cannot have changed: a
    /// context's recording changes only through calls on it, and every context is checked
    /// at the end of the run (before teardown), so a change to a context that no step used
    /// still fails the run.
    fn check_contexts(&mut self, when: &dyn fmt::Display, all: bool) {
        let used = core::mem::take(&mut self.used);
        for (d, slot) in self.dcs.iter().enumerate() {
            let Some(slot) = slot else { continue };
            if !all && !used[d] {
                continue;
            }
            let stats = slot.dc.stats();
            assert_eq!(
                slot.dc.is_removed(),
                slot.removed,
                "{when}: context {d} removal (R-E3)"
            );
            assert_eq!(
                stats.open_handles,
                slot.rec.open.len(),
                "{when}: context {d} open handles"
            );
            assert_eq!(
                stats.operations,
                slot.rec.ops.len(),
                "{when}: context {d} operations"
            );
            assert_eq!(
                stats.recorded_bytes,
                slot.rec.bytes(),
                "{when}: context {d} budget count"
            );
            assert_eq!(
                stats.removals, slot.removals,
                "{when}: context {d} removals"
            );
            for p in 0..POINTS {
                let p = point(p);
                let bound = slot.rec.bindings.get(&p).copied();
                assert_eq!(
                    slot.dc.binding(p),
                    bound,
                    "{when}: context {d} binding at {p:?} (R-C1)"
                );
            }
        }
    }

    /// Drops the contexts and half the lists, checks that everything destroyed and unheld is
    /// deallocated after R-D4's heavy pattern, destroys the device with the
    /// other lists alive (R-D3), then drops them.
    fn teardown(mut self) -> Coverage {
        self.check_contexts(&"at the end of the steps", true);
        // R-H2: the device is not destroyed while contexts may have handles open (one is
        // made for the check if no step made one).
        if self.dcs.iter().all(Option::is_none) {
            self.slot(0);
        }
        let ic = self.ic.as_mut().expect("device alive");
        let refused = ic.destroy_device();
        assert_eq!(
            refused,
            Err(AppError::DeferredContextsAlive.into()),
            "destroy_device with live contexts"
        );
        let violations = self.world.violations();
        assert!(
            violations.is_empty(),
            "teardown: rules broken: {violations:#?}"
        );
        self.check_memory(&"refused device destruction");
        for slot in &mut self.dcs {
            drop(slot.take());
        }
        let keep = self.lists.len() / 2;
        for list in self.lists.drain(keep..) {
            drop(list.list);
        }
        // R-D4's heavy pattern: ClearState; Flush; End(EventQuery); spin on GetData; Flush.
        let event = self
            .device
            .create_query(QueryKind::Event)
            .expect("event query");
        let world = Arc::clone(&self.world);
        let ic = self.ic.as_mut().expect("device alive");
        assert_eq!(ic.clear_state(), Ok(()), "teardown clear-state");
        assert_eq!(ic.flush(), Ok(()), "teardown flush");
        assert_eq!(ic.end_query(event), Ok(()), "teardown event query");
        while !ic
            .query_signaled(event)
            .expect("GetData of the event query")
        {
            world.complete_all();
        }
        assert_eq!(ic.flush(), Ok(()), "teardown flush");
        assert_eq!(
            self.device.destroy(event),
            Ok(()),
            "teardown event query destroy"
        );
        let violations = self.world.violations();
        assert!(
            violations.is_empty(),
            "teardown: rules broken: {violations:#?}"
        );
        self.check_memory(&"teardown");
        for key in self.keys() {
            if self.m.destroyed(key) && !self.pinned(key) {
                let gone = !self.world.is_allocated(self.m.alloc(key));
                assert!(
                    gone,
                    "teardown: {key:?} destroyed, held by nothing, still allocated (R-D2, R-D4)"
                );
            }
        }
        let mut ic = self.ic.take().expect("device alive");
        assert_eq!(ic.destroy_device(), Ok(()), "destroy_device");
        drop(ic);
        let after = self.world.check_after_device_destroyed();
        assert!(
            after.is_empty(),
            "after device destruction (R-D3): {after:#?}"
        );
        for list in self.lists.drain(..) {
            drop(list.list);
        }
        let after = self.world.check_after_device_destroyed();
        assert!(
            after.is_empty(),
            "lists dropped after device destruction: {after:#?}"
        );
        self.cov
    }
}
