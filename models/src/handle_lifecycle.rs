//! Random handle lifecycles against a plain model (R-D1..R-D4, R-E1, R-E2, R-P1).
//!
//! The sharded-slab model test, for handles: a sequence of [`Step`]s drives a real
//! [`Device`] over the soft driver *and* a plain model, and the two are compared after every
//! step. A run never panics unless the engine and the model disagree.
//!
//! # What a run does
//! One soft device under [`Clock::Completed`] (the GPU completes buffers only when a step
//! says so), a second small device whose handles the first must refuse (and the reverse),
//! made at the first step that uses it, and two threads that call the free-threaded destroy
//! off the immediate context's thread (kept from run to run: see `crate::elsewhere`). Steps
//! create resources (empty, shared, with views), views of every type (and of objects that
//! are not live resources), queries and primaries; destroy from another thread, twice, from
//! two threads at once, through the primary path; use live, destroyed, forged
//! (a known handle with bits flipped), wrong-type and other-device handles on every entry
//! point; update, copy, fill, clear through views, bind and unbind, map and unmap, begin, end
//! and poll queries; flush, complete fences, clear state, run R-D4's heavy pattern, and
//! destroy the device. A run is at most [`MAX_STEPS`] steps and [`MAX_ALIVE`] objects alive.
//!
//! # The model
//! A `Vec` with every object the run created: its handle and kind, whether it is live,
//! destroyed-pending or gone (really destroyed), the views still holding a resource (R-H3),
//! the newest buffer that referenced it (only operations that ran stamp; a view stamps its
//! resource), whether its kernel memory is allocated, and a resource's bytes. Plus the open
//! buffer's number and whether it holds an operation, the bindings, begun queries and mapped
//! resources of the immediate context, and the error reports expected. A model flush
//! submits a non-empty buffer, really destroys every pending object nothing holds (views
//! before resources) and deallocates every gone object whose last buffer the GPU completed.
//!
//! # What is checked, after every step
//! - **R-E1**: every call gives exactly the model's outcome; a bad handle (stale, forged,
//!   double-destroyed, other-device, wrong type) is `Err(Error::Application(_))` with the
//!   kind the model expects, never a panic and never a success. Live handles look up `Ok`,
//!   with the type and allocation they were created with, and every new handle differs from
//!   every handle the run has seen (a reused slot gets a new generation).
//! - **R-E2**: every failed entry point that reports did so exactly once through set-error
//!   (on each device's own kernel).
//! - **R-D1, R-D2**: nothing is deallocated early: the soft kernel saw no violation, and each
//!   allocation is live exactly while the model says so (an object destroyed stays allocated
//!   until a flush after its destroy, a resource until its views are really destroyed, and
//!   until the GPU completed the last buffer that referenced it). The immediate context's
//!   buffer numbers and deferred-destruction counters match the model's, so a flush really
//!   destroys what it must, even when its buffer was empty; the kernel holds no allocation
//!   the model does not know.
//! - **R-D4**: after `ClearState; Flush; End(query); spin on GetData; Flush`, everything
//!   destroyed before is deallocated (unless a live view still holds it).
//! - **R-P1**: primaries are refused by the free-threaded paths, and `destroy_primary`
//!   deallocates inside the call, after the GPU finished the buffers that used the primary.
//! - Contents: every allocated resource holds the model's bytes (`SoftWorld::read`).
//! - **R-D3**: after [`Step::DropDevice`], and at the end of every run, the soft kernel
//!   reports no violation and no leak, and every call gives [`Error::DeviceRemoved`]; the
//!   second device is destroyed and checked the same way.
//!
//! A mismatch is a panic naming the step, the call and both outcomes, with the model's
//! objects: that is how the fuzzer and the stable test report a bug.
//!
//! # Running it
//! `cargo +nightly fuzz run handle_lifecycle` (from `fuzz/`) feeds it `Vec<Step>` inputs;
//! the stable test `tests/all/handle_lifecycle.rs` runs it over a few thousand inputs
//! from a fixed-seed PRNG ([`run_bytes`], [`steps_from_bytes`]) plus hand-written sequences.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Barrier};

use arbitrary::{Arbitrary, Unstructured};

use cmdlist::handle::{self, AnyHandle, HandleType, ObjectKind};
use cmdlist::soft::{self, SoftCommand, SoftConfig, SoftDriver, SoftKernel, SoftWorld};
use cmdlist::AllocationHandle;
use cmdlist::Clock;
use cmdlist::ImmediateContext;
use cmdlist::{AppError, Error, Result};
use cmdlist::{BindClass, BindPoint, Stage};
use cmdlist::{Device, DeviceConfig};
use cmdlist::{ObjectDesc, QueryKind, ResourceDesc, ResourceFlags, ViewDesc};

use crate::elsewhere;

/// A handle under another kind, unchecked, as a C shim's cast would be: the engine checks
/// the object's real type at every lookup, which the model holds it to.
trait Retype {
    fn retype<U: ObjectKind>(self) -> handle::Handle<U>;
}

impl<T: ObjectKind> Retype for handle::Handle<T> {
    fn retype<U: ObjectKind>(self) -> handle::Handle<U> {
        handle::Handle::from_bits(self.to_bits()).expect("a handle's bits are never zero")
    }
}

type SoftDevice = Device<SoftDriver, SoftKernel>;
type SoftImmediate = ImmediateContext<SoftDriver, SoftKernel>;

/// Steps after which a run stops (keeps one input's time bounded).
pub const MAX_STEPS: usize = 256;

/// Objects alive (live or destroyed-pending) past which create steps do nothing: keeps the
/// per-step checks cheap while leaving room for views, holds and slot reuse.
pub const MAX_ALIVE: usize = 48;

/// One operation of a random handle lifecycle. `pick` fields choose an object the run
/// created (modulo their number, whatever its state), unless a step says otherwise.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Creates a resource of `size` bytes (0: no kernel memory), and a shader-resource view
    /// of all of it when `view` is set (refused for an empty resource).
    CreateResource {
        /// Size in bytes.
        size: u8,
        /// Also create a view of the whole resource.
        view: bool,
        /// Create it with [`ResourceFlags::SHARED`].
        shared: bool,
    },
    /// Creates a view of `len` bytes from `first` of the picked object (refused unless it
    /// is a live resource and the range fits, or when `ty` is not a view type).
    CreateView {
        /// The resource (any object: others are refused).
        pick: u16,
        /// The view type: values below 200 choose one of the four D3D11 view types, others
        /// any handle type.
        ty: u8,
        /// First byte.
        first: u8,
        /// Length in bytes (0 is refused).
        len: u8,
    },
    /// Creates a query.
    CreateQuery {
        /// Event, occlusion or timestamp (modulo 3).
        kind: u8,
    },
    /// Creates a primary on the immediate context (R-P1), or tries the free-threaded path
    /// with `via_device`, which must refuse it.
    CreatePrimary {
        /// Size in bytes.
        size: u8,
        /// Try `Device::create` instead (refused, R-P1).
        via_device: bool,
    },
    /// Destroys the picked object (free-threaded destroy, R-F1, R-D1), maybe from another
    /// thread.
    Destroy {
        /// The object.
        pick: u16,
        /// Destroy it from another thread (one decoded step in four).
        #[arbitrary(with = elsewhere::one_in_four)]
        elsewhere: bool,
    },
    /// Destroys the picked object, maybe on another thread, then again on this one (the
    /// second is an application error).
    DestroyTwice {
        /// The object.
        pick: u16,
        /// Destroy it first from another thread (one decoded step in four).
        #[arbitrary(with = elsewhere::one_in_four)]
        elsewhere: bool,
    },
    /// Two threads destroy the picked object at once: at most one wins.
    DestroyRace {
        /// The object.
        pick: u16,
    },
    /// Destroys the picked object through the primary path (R-P1).
    DestroyPrimary {
        /// The object.
        pick: u16,
    },
    /// Looks up a live object (picked among the live ones).
    Lookup {
        /// Which live object.
        pick: u16,
    },
    /// Uses a destroyed object's handle everywhere (picked among the destroyed ones).
    LookupStale {
        /// Which destroyed object.
        pick: u16,
    },
    /// Uses a live object's handle as every other kind (picked among the live ones).
    LookupWrongType {
        /// Which live object.
        pick: u16,
    },
    /// Looks up a forged handle: the picked object's bits (0 if none) xor `xor`.
    LookupForged {
        /// The object whose handle is forged from.
        pick: u16,
        /// Bits flipped.
        xor: u64,
    },
    /// Destroys a forged handle (as [`Step::LookupForged`]).
    DestroyForged {
        /// The object whose handle is forged from.
        pick: u16,
        /// Bits flipped.
        xor: u64,
    },
    /// Uses a handle of a second, live device on this one, and one of this device on it.
    LookupOtherDevice {
        /// Which of the other device's objects (resource, view, query), and which of ours.
        pick: u16,
    },
    /// UpdateSubresource: `len` bytes of value `byte` at `offset` of the picked object.
    Update {
        /// The resource (any object: others are refused).
        pick: u16,
        /// Byte offset.
        offset: u8,
        /// Bytes written.
        len: u8,
        /// Their value.
        byte: u8,
    },
    /// CopyResource from `src` to `dst`.
    Copy {
        /// Destination.
        dst: u16,
        /// Source.
        src: u16,
    },
    /// Fills the picked resource with `byte`.
    Fill {
        /// The resource.
        pick: u16,
        /// The value.
        byte: u8,
    },
    /// Clears the picked view's range of its resource to `byte`.
    ClearView {
        /// The view.
        pick: u16,
        /// The value.
        byte: u8,
    },
    /// Binds the picked object at one of a few binding points.
    Bind {
        /// The object.
        pick: u16,
        /// Which point (modulo the table).
        point: u8,
    },
    /// Unbinds one of a few binding points.
    Unbind {
        /// Which point (modulo the table).
        point: u8,
    },
    /// Fills what is bound at one of a few binding points with `byte` (`FillBound`, which
    /// reads the binding as a draw does): a resource whole, a view its range; found even
    /// after the application destroyed it (R-D4).
    FillBound {
        /// Which point (modulo the table).
        point: u8,
        /// The value.
        byte: u8,
    },
    /// Begins the picked query.
    BeginQuery {
        /// The query.
        pick: u16,
    },
    /// Ends the picked query.
    EndQuery {
        /// The query.
        pick: u16,
    },
    /// Map(DISCARD) of the picked resource on the immediate context, writing `len` bytes
    /// (at most the resource's size) of `byte` from the start of its new contents.
    MapDiscard {
        /// The resource.
        pick: u16,
        /// Bytes written.
        len: u8,
        /// Their value.
        byte: u8,
    },
    /// Unmap of the picked resource: its new contents become its bytes.
    Unmap {
        /// The resource.
        pick: u16,
    },
    /// GetData of the picked query (flushes if its End is in the open buffer).
    PollQuery {
        /// The query.
        pick: u16,
    },
    /// Flush (R-D2).
    Flush,
    /// The GPU completes 1 to 3 more fences.
    CompleteFence {
        /// How many more (modulo 3, plus 1).
        ahead: u8,
    },
    /// The GPU completes everything submitted.
    CompleteAll,
    /// ClearState.
    ClearState,
    /// Destroys the picked object (if live), then R-D4's heavy pattern: `ClearState; Flush;
    /// End(query); spin on GetData; Flush`, after which it must be deallocated.
    SyncDestroy {
        /// The object.
        pick: u16,
    },
    /// DestroyDevice (R-D3); ends the run.
    DropDevice,
}

/// Runs `steps` (at most [`MAX_STEPS`]) against a fresh soft device and the model, checking
/// after every step, then destroys the device (unless a step did) and checks for leaks.
/// Panics on the first mismatch.
pub fn run(steps: &[Step]) {
    let mut harness = Harness::new();
    for (index, step) in steps.iter().take(MAX_STEPS).enumerate() {
        harness.at = Some((index, *step));
        if !harness.step(step) {
            break;
        }
        harness.check();
    }
    harness.finish();
}

/// Decodes steps from raw bytes with [`arbitrary::Unstructured`] (as many as the bytes
/// hold, at most [`MAX_STEPS`]) and [`run`]s them.
pub fn run_bytes(data: &[u8]) {
    run(&steps_from_bytes(data));
}

/// The steps `data` decodes to, as [`run_bytes`] sees them.
pub fn steps_from_bytes(data: &[u8]) -> Vec<Step> {
    let mut u = Unstructured::new(data);
    let mut steps = Vec::new();
    while !u.is_empty() && steps.len() < MAX_STEPS {
        match Step::arbitrary(&mut u) {
            Ok(step) => steps.push(step),
            Err(_) => break,
        }
    }
    steps
}

/// What the model expects of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    /// Success.
    Ok,
    /// An application error of one of these kinds (empty: any kind).
    App(&'static [AppError]),
    /// The device is gone.
    Removed,
}

const ANY_APP: &[AppError] = &[];
const STALE: &[AppError] = &[AppError::StaleHandle];
const WRONG_TYPE: &[AppError] = &[AppError::WrongType];
const STALE_OR_WRONG_TYPE: &[AppError] = &[AppError::StaleHandle, AppError::WrongType];
const WRONG_DEVICE: &[AppError] = &[AppError::WrongDevice];
const DOUBLE: &[AppError] = &[AppError::DoubleDestroy];
const PRIMARY: &[AppError] = &[AppError::PrimaryMismatch];
const OUT_OF_RANGE: &[AppError] = &[AppError::OutOfRange];
const MISSING: &[AppError] = &[AppError::MissingDependency];
const INVALID_STATE: &[AppError] = &[AppError::InvalidState];
const NOT_MAPPABLE: &[AppError] = &[AppError::NotMappable];

/// Where an object is in its lifecycle, as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Life {
    /// Created, not destroyed.
    Live,
    /// Destroyed by the application, not yet really destroyed (R-D1).
    Pending,
    /// Really destroyed: the handle is dead for good.
    Gone,
}

/// What an object is, as the model needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Resource {
        primary: bool,
    },
    View {
        resource: usize,
        first: usize,
        len: usize,
    },
    Query,
}

/// The model of one object the run created.
#[derive(Debug)]
struct Obj {
    handle: AnyHandle,
    ty: HandleType,
    kind: Kind,
    allocation: Option<AllocationHandle>,
    life: Life,
    /// Destroyed-pending and already seen by a flush (waiting for its views).
    waited: bool,
    /// The newest immediate-context buffer that referenced it (0: none).
    last_buffer: u64,
    /// The model's view of its kernel memory.
    allocated: bool,
    /// The soft kernel confirmed the deallocation (no need to ask again).
    confirmed_free: bool,
    /// What holds the object from its real destruction: for a resource, its views not yet
    /// really destroyed (R-H3); for any object, the immediate context's bindings of it.
    views: u32,
    /// Resources: the contents.
    bytes: Vec<u8>,
    /// Queries: the buffer of the newest End (0: never ended).
    query_end: u64,
    /// A resource a Map(DISCARD) renames (R-M5): with memory, neither shared nor primary.
    renamable: bool,
}

/// The allocation a Map(DISCARD) that renames took (R-M5).
#[derive(Clone, Copy, Debug)]
enum Taken {
    /// The pool's.
    Pooled(u64),
    /// A new one: its id is above every one the run had seen at the Map.
    New { above: u64 },
}

/// An allocation the immediate context's rename pool keeps (R-M5), in the order it came.
#[derive(Clone, Copy, Debug)]
struct Pooled {
    size: usize,
    id: u64,
    /// The newest buffer that may read it (stamps never fall along one size).
    stamp: u64,
}

impl Obj {
    fn is_resource(&self) -> bool {
        matches!(self.kind, Kind::Resource { .. })
    }

    fn is_primary(&self) -> bool {
        matches!(self.kind, Kind::Resource { primary: true })
    }
}

/// The second device, whose handles must be refused by the first (and the reverse).
struct Other {
    device: SoftDevice,
    ic: Option<SoftImmediate>,
    world: Arc<SoftWorld>,
    handles: [AnyHandle; 3],
    errors: usize,
}

/// A few binding points of different classes.
const POINTS: [BindPoint; 6] = [
    BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0),
    BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 3),
    BindPoint::new(BindClass::RenderTarget, 0),
    BindPoint::new(BindClass::VertexBuffer, 1),
    BindPoint::new(BindClass::ConstantBuffer(Stage::Compute), 0),
    BindPoint::new(BindClass::UnorderedAccess, 0),
];

/// The four D3D11 view types.
const VIEW_TYPES: [HandleType; 4] = [
    HandleType::ShaderResourceView,
    HandleType::RenderTargetView,
    HandleType::DepthStencilView,
    HandleType::UnorderedAccessView,
];

fn config() -> SoftConfig {
    SoftConfig {
        trace: false,
        ..SoftConfig::from_env().unwrap()
    }
}

/// A small rename limit, so that runs reach the copy a Map(DISCARD) falls back to (R-M5).
fn device_config() -> DeviceConfig {
    DeviceConfig::default()
        .with_retire_clock(Clock::Completed)
        .with_rename_waiting(3)
}

fn matches_want<T>(result: &Result<T>, want: Want) -> bool {
    match (result, want) {
        (Ok(_), Want::Ok) => true,
        (Err(Error::Application(kind)), Want::App(kinds)) => {
            kinds.is_empty() || kinds.contains(kind)
        }
        (Err(Error::DeviceRemoved), Want::Removed) => true,
        _ => false,
    }
}

/// The engine under test (a device over a soft world, and a second one made at the first
/// step that uses it) and the model it is checked against. Destroys "from another thread"
/// run on the threads of [`elsewhere`].
struct Harness {
    device: SoftDevice,
    ic: Option<SoftImmediate>,
    world: Arc<SoftWorld>,
    other: Option<Other>,
    objs: Vec<Obj>,
    /// Every handle the run has seen, by bits.
    by_bits: HashMap<u64, usize>,
    /// Every object's allocation id and index, ascending by id (the kernel numbers
    /// allocations in order).
    allocs: Vec<(u64, usize)>,
    /// Scratch for [`Harness::check`]: which of `allocs` the kernel has.
    seen: Vec<bool>,
    /// The open buffer's number, and whether it holds an operation.
    open: u64,
    open_ops: u32,
    last_submitted: u64,
    /// set-error reports expected so far on the main device.
    errors: usize,
    /// The retire queue's counters, as the model expects them.
    queue_destroyed: u64,
    queue_deallocated: u64,
    bindings: BTreeMap<BindPoint, AnyHandle>,
    /// Queries begun on the immediate context and not ended (R-C4's bookkeeping).
    begun: Vec<AnyHandle>,
    /// Resources mapped on the immediate context, with the bytes written to their new
    /// contents: a prefix of that length and value, zeros after it.
    mapped: Vec<(AnyHandle, usize, u8)>,
    /// The immediate context's rename pool as the model has it (R-M5): each size's
    /// allocations in the order they came, the oldest taken first once the GPU is done
    /// with it.
    pool: Vec<Pooled>,
    /// The open Map(DISCARD)s that rename, and the allocation each took.
    renaming: Vec<(AnyHandle, Taken)>,
    /// The step being run (`None`: setup or the final checks), for failure messages.
    at: Option<(usize, Step)>,
}

impl Other {
    /// The second device, with a resource, a view of it and a query.
    fn new() -> Self {
        let (device, ic, world) =
            soft::device(config(), device_config()).expect("second soft device");
        let r = device
            .create_resource(ResourceDesc {
                byte_size: 16,
                ..ResourceDesc::default()
            })
            .expect("other device: resource");
        let v = device
            .create_view(
                HandleType::ShaderResourceView,
                ViewDesc {
                    resource: r,
                    first_byte: 0,
                    byte_len: 16,
                },
            )
            .expect("other device: view");
        let q = device
            .create_query(QueryKind::Event)
            .expect("other device: query");
        Other {
            device,
            ic: Some(ic),
            world,
            handles: [r.any(), v.any(), q.any()],
            errors: 0,
        }
    }
}

impl Harness {
    fn new() -> Self {
        let (device, ic, world) = soft::device(config(), device_config()).expect("soft device");
        Harness {
            device,
            ic: Some(ic),
            world,
            other: None,
            objs: Vec::new(),
            by_bits: HashMap::new(),
            allocs: Vec::new(),
            seen: Vec::new(),
            open: 1,
            open_ops: 0,
            last_submitted: 0,
            errors: 0,
            queue_destroyed: 0,
            queue_deallocated: 0,
            bindings: BTreeMap::new(),
            begun: Vec::new(),
            mapped: Vec::new(),
            pool: Vec::new(),
            renaming: Vec::new(),
            at: None,
        }
    }

    #[track_caller]
    fn fail(&self, what: std::fmt::Arguments<'_>) -> ! {
        let at = match self.at {
            Some((index, step)) => format!("step {index} ({step:?})"),
            None => String::from("setup or the final checks"),
        };
        panic!(
            "handle_lifecycle: model mismatch at {at}: {what}\nmodel objects: {:#?}",
            self.objs
        );
    }

    /// Checks `result` against `want`; an error from a reporting entry point counts as one
    /// set-error report (R-E2).
    #[track_caller]
    fn expect<T>(&mut self, call: &str, result: Result<T>, want: Want, reports: bool) -> Option<T> {
        if !matches_want(&result, want) {
            let got = result.as_ref().map(|_| ()).map_err(|e| *e);
            self.fail(format_args!(
                "{call}: got {got:?}, the model wants {want:?}"
            ));
        }
        if result.is_err() && reports {
            self.errors += 1;
        }
        result.ok()
    }

    fn ic(&mut self) -> &mut SoftImmediate {
        self.ic
            .as_mut()
            .expect("the immediate context lives until DropDevice")
    }

    fn alive(&self) -> usize {
        self.objs.iter().filter(|o| o.life != Life::Gone).count()
    }

    fn pick(&self, pick: u16) -> Option<usize> {
        (!self.objs.is_empty()).then(|| pick as usize % self.objs.len())
    }

    fn pick_where(&self, pick: u16, pred: impl Fn(&Obj) -> bool) -> Option<usize> {
        let matching = || (0..self.objs.len()).filter(|&i| pred(&self.objs[i]));
        let count = matching().count();
        (count > 0).then(|| matching().nth(pick as usize % count))?
    }

    /// The outcome of a lookup of object `i` as a kind that accepts its type or not.
    fn want_live(&self, i: usize, accepts: bool) -> Want {
        match (self.objs[i].life, accepts) {
            (Life::Live, true) => Want::Ok,
            (Life::Live, false) => Want::App(WRONG_TYPE),
            (Life::Pending, true) | (Life::Gone, _) => Want::App(STALE),
            (Life::Pending, false) => Want::App(STALE_OR_WRONG_TYPE),
        }
    }

    fn want_destroy(&self, i: usize) -> Want {
        let o = &self.objs[i];
        match o.life {
            Life::Live if o.is_primary() => Want::App(PRIMARY),
            Life::Live => Want::Ok,
            Life::Pending => Want::App(DOUBLE),
            Life::Gone => Want::App(STALE),
        }
    }

    /// Records a new object after its create succeeded, checking what the device says of it.
    fn add(&mut self, handle: AnyHandle, kind: Kind, size: usize, shared: bool) -> usize {
        let bits = handle.to_bits();
        if let Some(&old) = self.by_bits.get(&bits) {
            self.fail(format_args!(
                "create returned {handle:?}, the handle of object {old} \
                 (a stale handle would name it)"
            ));
        }
        let (ty, allocation) = match self.device.object(handle) {
            Ok(r) => (r.ty(), r.allocation()),
            Err(e) => self.fail(format_args!(
                "new handle {handle:?} does not look up: {e:?}"
            )),
        };
        let want_ty = match kind {
            Kind::Resource { .. } => Some(HandleType::Resource),
            Kind::Query => Some(HandleType::Query),
            Kind::View { .. } => None,
        };
        if want_ty.is_some_and(|t| t != ty) || (want_ty.is_none() && !ty.is_view()) {
            self.fail(format_args!(
                "new object {handle:?} has type {ty:?}, created as {kind:?}"
            ));
        }
        let has_memory = !matches!(kind, Kind::Resource { .. }) || size > 0;
        if allocation.is_some() != has_memory {
            self.fail(format_args!(
                "new object {handle:?} ({kind:?}, {size} bytes) has allocation {allocation:?}"
            ));
        }
        if let Kind::View { resource, .. } = kind {
            self.objs[resource].views += 1;
        }
        let index = self.objs.len();
        self.by_bits.insert(bits, index);
        self.objs.push(Obj {
            handle,
            ty,
            kind,
            allocation,
            life: Life::Live,
            waited: false,
            last_buffer: 0,
            allocated: allocation.is_some(),
            confirmed_free: false,
            views: 0,
            bytes: if matches!(kind, Kind::Resource { .. }) {
                vec![0; size]
            } else {
                Vec::new()
            },
            query_end: 0,
            renamable: kind == (Kind::Resource { primary: false }) && !shared && size > 0,
        });
        if let Some(allocation) = allocation {
            let id = allocation.0.get();
            let at = self.allocs.partition_point(|(a, _)| *a < id);
            self.allocs.insert(at, (id, index));
        }
        index
    }

    /// The open buffer references object `i` (and through a view, its resource).
    fn stamp(&mut self, i: usize) {
        self.objs[i].last_buffer = self.open;
        if let Kind::View { resource, .. } = self.objs[i].kind {
            self.objs[resource].last_buffer = self.open;
        }
    }

    /// After an operation: one that reached the driver (`resolves`: every check before the
    /// hook passed) is in the open buffer, its objects stamped, whether the driver accepted
    /// it or refused it (it may have referenced memory before refusing, R-D1); one the
    /// engine refused first references nothing.
    fn after_driver(&mut self, objects: &[usize], resolves: Want) {
        if resolves == Want::Ok {
            for &i in objects {
                self.stamp(i);
            }
            self.open_ops += 1;
        }
    }

    fn destroyed(&mut self, i: usize) {
        self.objs[i].life = Life::Pending;
    }

    /// A really destroyed object (queue or primary path).
    fn gone(&mut self, i: usize) {
        self.objs[i].life = Life::Gone;
        self.objs[i].waited = false;
        if let Kind::View { resource, .. } = self.objs[i].kind {
            self.objs[resource].views -= 1;
        }
    }

    /// The model of `ImmediateContext::flush` (R-D2): submit if the buffer holds anything
    /// (every bound object referenced in it), then destroy every pending object nothing
    /// holds, views before resources, and deallocate every gone object whose last buffer the
    /// GPU completed.
    /// `completed` is the GPU's completed fence during the flush.
    fn model_flush(&mut self, completed: u64) {
        if self.open_ops > 0 {
            // A submitted buffer references whatever is bound (R-D1).
            let bound: Vec<AnyHandle> = self.bindings.values().copied().collect();
            for handle in bound {
                if let Some(i) = self.objs.iter().position(|o| o.handle == handle) {
                    self.stamp(i);
                }
            }
            self.last_submitted = self.open;
        }
        self.open += 1;
        self.open_ops = 0;
        for resources in [false, true] {
            for i in 0..self.objs.len() {
                let o = &self.objs[i];
                if o.life == Life::Pending && o.is_resource() == resources {
                    if o.views == 0 {
                        self.gone(i);
                        self.queue_destroyed += 1;
                    } else {
                        self.objs[i].waited = true;
                    }
                }
            }
        }
        for o in &mut self.objs {
            if o.life == Life::Gone && o.allocated && o.last_buffer <= completed {
                o.allocated = false;
                self.queue_deallocated += 1;
            }
        }
    }

    fn write(&mut self, resource: usize, first: usize, len: usize, byte: u8) {
        self.objs[resource].bytes[first..first + len].fill(byte);
    }

    /// Runs one step; false ends the run (the device is gone).
    fn step(&mut self, step: &Step) -> bool {
        match *step {
            Step::CreateResource { size, view, shared } => self.create_resource(size, view, shared),
            Step::CreateView {
                pick,
                ty,
                first,
                len,
            } => {
                let ty = if ty < 200 {
                    VIEW_TYPES[ty as usize % VIEW_TYPES.len()]
                } else {
                    HandleType::ALL[ty as usize % HandleType::ALL.len()]
                };
                if let Some(i) = self.pick(pick) {
                    self.create_view(i, ty, first as usize, len as usize);
                }
            }
            Step::CreateQuery { kind } => {
                if self.alive() < MAX_ALIVE {
                    let kind = [QueryKind::Event, QueryKind::Occlusion, QueryKind::Timestamp]
                        [kind as usize % 3];
                    self.create_query(kind);
                }
            }
            Step::CreatePrimary { size, via_device } => self.create_primary(size, via_device),
            Step::Destroy { pick, elsewhere } => {
                if let Some(i) = self.pick(pick) {
                    self.destroy(i, elsewhere);
                }
            }
            Step::DestroyTwice { pick, elsewhere } => {
                if let Some(i) = self.pick(pick) {
                    self.destroy(i, elsewhere);
                    self.destroy(i, false);
                }
            }
            Step::DestroyRace { pick } => {
                if let Some(i) = self.pick(pick) {
                    self.destroy_race(i);
                }
            }
            Step::DestroyPrimary { pick } => {
                if let Some(i) = self.pick(pick) {
                    self.destroy_primary(i);
                }
            }
            Step::Lookup { pick } => {
                if let Some(i) = self.pick_where(pick, |o| o.life == Life::Live) {
                    self.lookup(i);
                }
            }
            Step::LookupStale { pick } => {
                if let Some(i) = self.pick_where(pick, |o| o.life != Life::Live) {
                    self.lookup_stale(i);
                }
            }
            Step::LookupWrongType { pick } => {
                if let Some(i) = self.pick_where(pick, |o| o.life == Life::Live) {
                    self.lookup_wrong_type(i);
                }
            }
            Step::LookupForged { pick, xor } => self.forged(pick, xor, false),
            Step::DestroyForged { pick, xor } => self.forged(pick, xor, true),
            Step::LookupOtherDevice { pick } => self.other_device(pick),
            Step::Update {
                pick,
                offset,
                len,
                byte,
            } => {
                if let Some(i) = self.pick(pick) {
                    self.update(i, offset as usize, len as usize, byte);
                }
            }
            Step::Copy { dst, src } => {
                if let (Some(d), Some(s)) = (self.pick(dst), self.pick(src)) {
                    self.copy(d, s);
                }
            }
            Step::Fill { pick, byte } => {
                if let Some(i) = self.pick(pick) {
                    self.fill(i, byte);
                }
            }
            Step::ClearView { pick, byte } => {
                if let Some(i) = self.pick(pick) {
                    self.clear_view(i, byte);
                }
            }
            Step::Bind { pick, point } => {
                if let Some(i) = self.pick(pick) {
                    self.bind(i, POINTS[point as usize % POINTS.len()]);
                }
            }
            Step::Unbind { point } => {
                let point = POINTS[point as usize % POINTS.len()];
                let r = self.ic().bind(point, None);
                self.expect("unbind", r, Want::Ok, true);
                if let Some(old) = self.bindings.remove(&point) {
                    self.unhold(old);
                }
                self.open_ops += 1;
            }
            Step::FillBound { point, byte } => {
                self.fill_bound(POINTS[point as usize % POINTS.len()], byte)
            }
            Step::BeginQuery { pick } => {
                if let Some(i) = self.pick(pick) {
                    self.query_op(i, true);
                }
            }
            Step::EndQuery { pick } => {
                if let Some(i) = self.pick(pick) {
                    self.query_op(i, false);
                }
            }
            Step::MapDiscard { pick, len, byte } => {
                if let Some(i) = self.pick(pick) {
                    self.map(i, len as usize, byte);
                }
            }
            Step::Unmap { pick } => {
                if let Some(i) = self.pick(pick) {
                    self.unmap(i);
                }
            }
            Step::PollQuery { pick } => {
                if let Some(i) = self.pick(pick) {
                    self.poll_query(i);
                }
            }
            Step::Flush => self.flush(),
            Step::CompleteFence { ahead } => {
                let fence = self.world.completed() + 1 + u64::from(ahead % 3);
                self.world.complete_through(fence);
            }
            Step::CompleteAll => self.world.complete_all(),
            Step::ClearState => self.clear_state(),
            Step::SyncDestroy { pick } => self.sync_destroy(pick),
            Step::DropDevice => {
                self.drop_device();
                return false;
            }
        }
        true
    }

    fn create_resource(&mut self, size: u8, view: bool, shared: bool) {
        if self.alive() >= MAX_ALIVE {
            return;
        }
        let desc = ResourceDesc {
            byte_size: u64::from(size),
            // Dynamic, so Map(DISCARD) applies to every resource but primaries.
            usage: cmdlist::Usage::Dynamic,
            flags: if shared {
                ResourceFlags::SHARED
            } else {
                ResourceFlags::empty()
            },
            ..ResourceDesc::default()
        };
        let r = self.device.create_resource(desc);
        let Some(h) = self.expect("create_resource", r, Want::Ok, true) else {
            return;
        };
        let i = self.add(
            h.any(),
            Kind::Resource { primary: false },
            size as usize,
            shared,
        );
        if view {
            self.create_view(i, HandleType::ShaderResourceView, 0, size as usize);
        }
    }

    fn create_view(&mut self, resource: usize, ty: HandleType, first: usize, len: usize) {
        if self.alive() >= MAX_ALIVE {
            return;
        }
        let o = &self.objs[resource];
        let want = if !ty.is_view() || len == 0 {
            Want::App(OUT_OF_RANGE)
        } else if o.life != Life::Live || !o.is_resource() {
            Want::App(MISSING)
        } else if first + len > o.bytes.len() {
            Want::App(OUT_OF_RANGE)
        } else {
            Want::Ok
        };
        let desc = ViewDesc {
            resource: o.handle.retype(),
            first_byte: first as u64,
            byte_len: len as u64,
        };
        let r = self.device.create_view(ty, desc);
        if let Some(h) = self.expect("create_view", r, want, true) {
            self.add(
                h.any(),
                Kind::View {
                    resource,
                    first,
                    len,
                },
                0,
                false,
            );
        }
    }

    fn create_query(&mut self, kind: QueryKind) -> Option<usize> {
        let r = self.device.create_query(kind);
        let h = self.expect("create_query", r, Want::Ok, true)?;
        Some(self.add(h.any(), Kind::Query, 0, false))
    }

    fn create_primary(&mut self, size: u8, via_device: bool) {
        if self.alive() >= MAX_ALIVE {
            return;
        }
        let desc = ResourceDesc {
            byte_size: u64::from(size),
            flags: ResourceFlags::PRIMARY,
            ..ResourceDesc::default()
        };
        if via_device {
            let r = self.device.create(&ObjectDesc::Resource(desc));
            self.expect("Device::create(primary)", r, Want::App(PRIMARY), true);
            return;
        }
        let r = self.ic().create_primary(desc);
        if let Some(h) = self.expect("create_primary", r, Want::Ok, true) {
            self.add(
                h.any(),
                Kind::Resource { primary: true },
                size as usize,
                false,
            );
        }
    }

    fn destroy(&mut self, i: usize, other_thread: bool) {
        let want = self.want_destroy(i);
        let h = self.objs[i].handle;
        let r = if other_thread {
            let device = self.device.clone();
            elsewhere::run(move || device.destroy(h))
        } else {
            self.device.destroy(h)
        };
        if self.expect("destroy", r, want, true).is_some() {
            self.destroyed(i);
        }
    }

    fn destroy_race(&mut self, i: usize) {
        let want = self.want_destroy(i);
        let h = self.objs[i].handle;
        // This thread and a pooled one, released together by a barrier: two thread switches
        // per race, where two pooled threads took six or more.
        let start = Arc::new(Barrier::new(2));
        let other = {
            let (device, start) = (self.device.clone(), Arc::clone(&start));
            elsewhere::start(move || {
                start.wait();
                device.destroy(h)
            })
        };
        start.wait();
        let a = self.device.destroy(h);
        let b = other.wait();
        if want == Want::Ok {
            // Exactly one thread wins; the loser sees a double destroy.
            let (win, lose) = if a.is_ok() { (a, b) } else { (b, a) };
            self.expect("destroy race (winner)", win, Want::Ok, true);
            self.expect("destroy race (loser)", lose, Want::App(DOUBLE), true);
            self.destroyed(i);
        } else {
            self.expect("destroy race (first)", a, want, true);
            self.expect("destroy race (second)", b, want, true);
        }
    }

    fn destroy_primary(&mut self, i: usize) {
        let o = &self.objs[i];
        let want = match o.life {
            Life::Gone => Want::App(STALE),
            _ if !o.is_resource() => Want::App(WRONG_TYPE),
            Life::Live if o.is_primary() => Want::Ok,
            Life::Pending if o.is_primary() => Want::App(DOUBLE),
            _ => Want::App(PRIMARY),
        };
        let referenced = o.last_buffer == self.open;
        let h = o.handle.retype::<handle::Resource>();
        // The call may wait for the GPU (below): the flush before sees the fence as it is.
        let completed = self.world.completed();
        let r = self.ic().destroy_primary(h);
        if self.expect("destroy_primary", r, want, true).is_none() {
            return;
        }
        if referenced {
            // R-D1: the buffer that references it is submitted first.
            self.model_flush(completed);
        }
        if self.objs[i].views == 0 {
            // R-P1: destroyed and deallocated inside the call, once the GPU is done with it
            // (the soft kernel flags the deallocation otherwise; this names the cause).
            let last_buffer = self.objs[i].last_buffer;
            if self.world.completed() < last_buffer {
                self.fail(format_args!(
                    "R-P1/R-D4: destroy_primary deallocated before the GPU completed buffer \
                     {last_buffer}, which uses the primary"
                ));
            }
            self.gone(i);
            // Counted with the queue's destructions (RetireStats counts primaries too).
            self.queue_destroyed += 1;
            if self.objs[i].allocated {
                self.queue_deallocated += 1;
            }
            self.objs[i].allocated = false;
        } else {
            // Its views hold it: it waits in the queue like any object.
            self.destroyed(i);
        }
    }

    fn lookup(&mut self, i: usize) {
        let (h, ty, allocation) = (
            self.objs[i].handle,
            self.objs[i].ty,
            self.objs[i].allocation,
        );
        let found = self
            .device
            .object(h)
            .map(|r| (r.ty(), r.allocation(), r.handle()));
        match found {
            Ok(got) if got == (ty, allocation, h) => {}
            other => self.fail(format_args!(
                "lookup of live {h:?}: got {other:?}, the model wants {:?}",
                (ty, allocation, h)
            )),
        }
    }

    /// A destroyed handle, on every path that takes one.
    fn lookup_stale(&mut self, i: usize) {
        let o = &self.objs[i];
        let (h, ty) = (o.handle, o.ty);
        let any = self.want_live(i, true);
        let as_resource = self.want_live(i, ty == HandleType::Resource);
        let as_query = self.want_live(i, ty == HandleType::Query);
        let r = self.device.object(h).map(|_| ());
        self.expect("object(stale)", r, any, false);
        let r = self.ic().update(h.retype(), 0, &[1]);
        self.expect("update(stale)", r, as_resource, true);
        let r = self.ic().bind(POINTS[0], Some(h));
        self.expect("bind(stale)", r, any, true);
        let r = self.ic().command(&SoftCommand::Fill {
            dst: h.retype(),
            value: 3,
        });
        self.expect("command(stale)", r, any, true);
        let r = self.ic().end_query(h.retype());
        self.expect("end_query(stale)", r, as_query, true);
        let r = self.ic().query_signaled(h.retype());
        self.expect("query_signaled(stale)", r, as_query, true);
    }

    fn typed<K: ObjectKind>(&mut self, i: usize, name: &str) {
        let (h, ty) = (self.objs[i].handle, self.objs[i].ty);
        let want = self.want_live(i, K::accepts(ty));
        let r = self.device.object(h.retype::<K>()).map(|r| r.ty());
        if let Some(got) = self.expect(name, r, want, false) {
            if got != ty {
                self.fail(format_args!(
                    "{name}: {h:?} looks up with type {got:?}, created {ty:?}"
                ));
            }
        }
    }

    fn lookup_wrong_type(&mut self, i: usize) {
        self.typed::<handle::Resource>(i, "object::<Resource>");
        self.typed::<handle::View>(i, "object::<View>");
        self.typed::<handle::Query>(i, "object::<Query>");
        self.typed::<handle::ShaderResourceView>(i, "object::<ShaderResourceView>");
        self.typed::<handle::RenderTargetView>(i, "object::<RenderTargetView>");
        self.typed::<handle::DepthStencilView>(i, "object::<DepthStencilView>");
        self.typed::<handle::UnorderedAccessView>(i, "object::<UnorderedAccessView>");
        self.typed::<handle::Shader>(i, "object::<Shader>");
        self.typed::<handle::SamplerState>(i, "object::<SamplerState>");
        self.typed::<handle::Any>(i, "object::<Any>");
        // The typed entry points of the immediate context, where the type is wrong (the
        // right type would be a real operation, run by other steps).
        let (h, ty) = (self.objs[i].handle, self.objs[i].ty);
        if ty != HandleType::Resource {
            let r = self.ic().update(h.retype(), 0, &[]);
            self.expect("update(wrong type)", r, Want::App(WRONG_TYPE), true);
            let r = self.ic().destroy_primary(h.retype());
            self.expect(
                "destroy_primary(wrong type)",
                r,
                Want::App(WRONG_TYPE),
                true,
            );
        }
        if ty != HandleType::Query {
            let r = self.ic().begin_query(h.retype());
            self.expect("begin_query(wrong type)", r, Want::App(WRONG_TYPE), true);
            let r = self.ic().query_signaled(h.retype());
            self.expect("query_signaled(wrong type)", r, Want::App(WRONG_TYPE), true);
        }
    }

    fn forged(&mut self, pick: u16, xor: u64, destroy: bool) {
        let base = self.pick(pick).map_or(0, |i| self.objs[i].handle.to_bits());
        let bits = base ^ xor;
        let Some(h) = AnyHandle::from_bits(bits) else {
            if bits >> 32 != 0 {
                self.fail(format_args!(
                    "from_bits({bits:#x}) refused a non-zero generation"
                ));
            }
            return;
        };
        if h.to_bits() != bits {
            self.fail(format_args!(
                "from_bits({bits:#x}).to_bits() = {:#x}",
                h.to_bits()
            ));
        }
        // A forged value equal to a handle the run has seen is that handle.
        match self.by_bits.get(&bits).copied() {
            Some(i) if destroy => self.destroy(i, false),
            Some(i) => {
                let want = self.want_live(i, true);
                let r = self.device.object(h).map(|_| ());
                self.expect("object(forged = known)", r, want, false);
            }
            None if destroy => {
                let r = self.device.destroy(h);
                self.expect("destroy(forged)", r, Want::App(ANY_APP), true);
            }
            None => {
                let r = self.device.object(h).map(|_| ());
                self.expect("object(forged)", r, Want::App(ANY_APP), false);
                let r = self.ic().update(h.retype(), 0, &[9]);
                self.expect("update(forged)", r, Want::App(ANY_APP), true);
            }
        }
    }

    /// The second device, made on first use.
    fn other(&mut self) -> &mut Other {
        self.other.get_or_insert_with(Other::new)
    }

    fn other_device(&mut self, pick: u16) {
        let handles = self.other().handles;
        let theirs = handles[pick as usize % handles.len()];
        let want = Want::App(WRONG_DEVICE);
        let r = self.device.object(theirs).map(|_| ());
        self.expect("object(other device)", r, want, false);
        let r = self.device.destroy(theirs);
        self.expect("destroy(other device)", r, want, true);
        let r = self.ic().update(theirs.retype(), 0, &[1]);
        self.expect("update(other device)", r, want, true);
        let r = self.ic().bind(POINTS[1], Some(theirs));
        self.expect("bind(other device)", r, want, true);
        let r = self.ic().command(&SoftCommand::Fill {
            dst: theirs.retype(),
            value: 2,
        });
        self.expect("command(other device)", r, want, true);
        let r = self.ic().end_query(theirs.retype());
        self.expect("end_query(other device)", r, want, true);
        // Still live on their own device.
        let r = self.other().device.object(theirs).map(|_| ());
        self.expect("object on its own device", r, Want::Ok, false);
        // And ours on theirs.
        if let Some(i) = self.pick(pick) {
            let ours = self.objs[i].handle;
            let r = self.other().device.object(ours).map(|_| ());
            self.expect("other device: object(ours)", r, want, false);
            let r = self.other().device.destroy(ours);
            self.expect("other device: destroy(ours)", r, want, false);
            self.other().errors += 1;
        }
    }

    fn update(&mut self, i: usize, offset: usize, len: usize, byte: u8) {
        let o = &self.objs[i];
        let resolves = self.want_live(i, o.is_resource());
        let size = o.bytes.len();
        let h = o.handle.retype::<handle::Resource>();
        let want = if resolves != Want::Ok {
            resolves
        } else if len == 0 || offset + len > size {
            // Refused before any hook, as on deferred contexts (R-E1).
            Want::App(OUT_OF_RANGE)
        } else {
            Want::Ok
        };
        let data = vec![byte; len];
        let r = self.ic().update(h, offset as u64, &data);
        self.expect("update", r, want, true);
        self.after_driver(&[i], want);
        if want == Want::Ok {
            self.write(i, offset, len, byte);
        }
    }

    /// Commands validate every handle as any live object, then the driver checks types and
    /// ranges; the objects are stamped as [`Harness::after_driver`] says.
    fn command(
        &mut self,
        call: &str,
        objects: &[usize],
        command: SoftCommand,
        driver_ok: bool,
    ) -> bool {
        let resolves = objects
            .iter()
            .map(|&i| self.want_live(i, true))
            .find(|w| *w != Want::Ok)
            .unwrap_or(Want::Ok);
        let want = match resolves {
            Want::Ok if driver_ok => Want::Ok,
            Want::Ok => Want::App(ANY_APP),
            w => w,
        };
        let r = self.ic().command(&command);
        self.expect(call, r, want, true);
        self.after_driver(objects, resolves);
        want == Want::Ok
    }

    fn copy(&mut self, d: usize, s: usize) {
        let (dst, src) = (&self.objs[d], &self.objs[s]);
        let ok = dst.is_resource()
            && src.is_resource()
            && !dst.bytes.is_empty()
            && !src.bytes.is_empty();
        let command = SoftCommand::Copy {
            dst: dst.handle.retype(),
            src: src.handle.retype(),
        };
        if self.command("copy", &[s, d], command, ok) {
            let n = self.objs[d].bytes.len().min(self.objs[s].bytes.len());
            let chunk = self.objs[s].bytes[..n].to_vec();
            self.objs[d].bytes[..n].copy_from_slice(&chunk);
        }
    }

    fn fill(&mut self, i: usize, byte: u8) {
        let o = &self.objs[i];
        let ok = o.is_resource() && !o.bytes.is_empty();
        let command = SoftCommand::Fill {
            dst: o.handle.retype(),
            value: byte,
        };
        if self.command("fill", &[i], command, ok) {
            self.objs[i].bytes.fill(byte);
        }
    }

    fn clear_view(&mut self, i: usize, byte: u8) {
        let o = &self.objs[i];
        let view = match o.kind {
            Kind::View {
                resource,
                first,
                len,
            } => Some((resource, first, len)),
            _ => None,
        };
        let command = SoftCommand::ClearView {
            view: o.handle.retype(),
            value: byte,
        };
        if self.command("clear_view", &[i], command, view.is_some()) {
            let (resource, first, len) = view.expect("only views clear");
            self.write(resource, first, len, byte);
        }
    }

    /// `FillBound` at `point`: nothing bound fills nothing; a bound view fills its range of
    /// its resource, anything else bound its own memory. The binding keeps what it binds
    /// (R-D4), destroyed or not; what has no memory to fill is refused.
    fn fill_bound(&mut self, point: BindPoint, byte: u8) {
        let bound = self
            .bindings
            .get(&point)
            .map(|h| self.objs.iter().position(|o| o.handle == *h));
        let target = match bound {
            None => None,
            Some(None) => self.fail(format_args!(
                "a binding at {point:?} of an object the model lost"
            )),
            Some(Some(i)) => Some(match self.objs[i].kind {
                Kind::View {
                    resource,
                    first,
                    len,
                } => self.objs[resource]
                    .allocation
                    .map(|_| (resource, first, len)),
                Kind::Resource { .. } | Kind::Query => self.objs[i]
                    .allocation
                    .map(|_| (i, 0, self.objs[i].bytes.len())),
            }),
        };
        let command = SoftCommand::FillBound { point, value: byte };
        if self.command("fill_bound", &[], command, target != Some(None)) {
            if let Some(Some((i, first, len))) = target {
                self.write(i, first, len, byte);
            }
        }
    }

    fn bind(&mut self, i: usize, point: BindPoint) {
        let want = self.want_live(i, true);
        let h = self.objs[i].handle;
        let r = self.ic().bind(point, Some(h));
        if self.expect("bind", r, want, true).is_some() {
            self.stamp(i);
            self.open_ops += 1;
            // A binding holds its object until it is undone.
            self.objs[i].views += 1;
            if let Some(old) = self.bindings.insert(point, h) {
                self.unhold(old);
            }
        }
    }

    /// A binding of `handle` was undone: it no longer holds the object, and the open buffer,
    /// the last that ran while it was bound, references it (R-D1).
    fn unhold(&mut self, handle: AnyHandle) {
        if let Some(i) = self.objs.iter().position(|o| o.handle == handle) {
            self.stamp(i);
            self.objs[i].views -= 1;
        }
    }

    fn query_op(&mut self, i: usize, begin: bool) {
        let mut want = self.want_live(i, self.objs[i].ty == HandleType::Query);
        let any = self.objs[i].handle;
        let begun = self.begun.iter().position(|q| *q == any);
        if want == Want::Ok && begin && begun.is_some() {
            want = Want::App(INVALID_STATE); // begun twice
        }
        let h = any.retype::<handle::Query>();
        let r = if begin {
            self.ic().begin_query(h)
        } else {
            self.ic().end_query(h)
        };
        if self
            .expect(
                if begin { "begin_query" } else { "end_query" },
                r,
                want,
                true,
            )
            .is_some()
        {
            self.stamp(i);
            self.open_ops += 1;
            match (begin, begun) {
                (true, _) => self.begun.push(any),
                (false, Some(b)) => {
                    self.begun.swap_remove(b);
                }
                (false, None) => {}
            }
            if !begin {
                self.objs[i].query_end = self.open;
            }
        }
    }

    /// Map(DISCARD) on the immediate context, then `len` bytes of `byte` written to the
    /// new contents: no operation, nothing stamped.
    fn map(&mut self, i: usize, len: usize, byte: u8) {
        let mut want = self.want_live(i, self.objs[i].is_resource());
        let h = self.objs[i].handle;
        if want == Want::Ok && self.mapped.iter().any(|(m, ..)| *m == h) {
            want = Want::App(INVALID_STATE); // mapped twice
        }
        if want == Want::Ok && self.objs[i].is_primary() {
            want = Want::App(NOT_MAPPABLE); // DISCARD maps dynamic resources only
        }
        let size = self.objs[i].bytes.len();
        let len = len.min(size);
        let r = self.ic().map_discard(h.retype()).map(|contents| {
            let whole = contents.len() == size;
            // Undefined until written (R-M1): the whole new contents written, `len` bytes
            // of `byte` and zeroes after them.
            let written = len.min(contents.len());
            contents[..written].fill(byte);
            contents[written..].fill(0);
            whole
        });
        if let Some(whole) = self.expect("map_discard", r, want, true) {
            if !whole {
                self.fail(format_args!(
                    "map_discard: the new contents are not the resource's {size} bytes"
                ));
            }
            self.mapped.push((h, len, byte));
            if self.objs[i].renamable {
                // The pool's oldest allocation of the size, if the GPU is done with it; a new
                // one while fewer than the config's limit wait; past it, the copy.
                let completed = self.world.completed();
                let taken = self.pool.iter().position(|p| p.size == size);
                let taken = taken.filter(|&at| self.pool[at].stamp <= completed);
                let waiting = self.pool.iter().filter(|p| p.size == size).count();
                let taken = match taken {
                    Some(at) => Some(Taken::Pooled(self.pool.remove(at).id)),
                    None if waiting < device_config().rename_waiting => Some(Taken::New {
                        above: self.newest_allocation(),
                    }),
                    None => None,
                };
                if let Some(taken) = taken {
                    self.renaming.push((h, taken));
                }
            }
        }
    }

    /// The Unmap of a Map(DISCARD) that renamed (R-M5): the resource, stamped with the open
    /// buffer, has the allocation the Map took (the pool's, or a new one: an id above every
    /// one the run has seen); the one it had joins the pool, stamped with that buffer.
    /// The newest allocation id the run has seen (the kernel numbers them in order).
    fn newest_allocation(&self) -> u64 {
        let newest = self.allocs.last().map_or(0, |(a, _)| *a);
        let newest = self.pool.iter().map(|p| p.id).fold(newest, u64::max);
        let open = self.renaming.iter().filter_map(|(_, t)| match t {
            Taken::Pooled(id) => Some(*id),
            Taken::New { .. } => None,
        });
        open.fold(newest, u64::max)
    }

    fn renamed(&mut self, i: usize, taken: Taken) {
        self.stamp(i);
        let h = self.objs[i].handle;
        let old = self.objs[i]
            .allocation
            .expect("a renamable resource has memory");
        let new = match self.device.object(h).map(|o| o.allocation()) {
            Ok(Some(new)) => new,
            other => self.fail(format_args!("renamed resource {i}: allocation {other:?}")),
        };
        let right = match taken {
            Taken::Pooled(id) => new.0.get() == id,
            Taken::New { above } => new.0.get() > above,
        };
        if !right {
            self.fail(format_args!(
                "R-M5: resource {i} renamed to allocation {}, the model's pick {taken:?} \
                 (pool {:?})",
                new.0.get(),
                self.pool
            ));
        }
        let size = self.objs[i].bytes.len();
        let stamp = self
            .pool
            .iter()
            .filter(|p| p.size == size)
            .fold(self.open, |s, p| s.max(p.stamp));
        self.pool.push(Pooled {
            size,
            id: old.0.get(),
            stamp,
        });
        if let Ok(at) = self.allocs.binary_search_by_key(&old.0.get(), |(a, _)| *a) {
            self.allocs.remove(at);
        }
        let id = new.0.get();
        let at = self.allocs.partition_point(|(a, _)| *a < id);
        self.allocs.insert(at, (id, i));
        self.objs[i].allocation = Some(new);
    }

    /// Unmap: the contents written since the map become the resource's bytes.
    fn unmap(&mut self, i: usize) {
        let o = &self.objs[i];
        let h = o.handle;
        let mapped = self.mapped.iter().position(|(m, ..)| *m == h);
        let resolves = match mapped {
            None => Want::App(INVALID_STATE), // not mapped: checked first
            Some(_) => self.want_live(i, o.is_resource()),
        };
        let want = if resolves != Want::Ok {
            resolves
        } else if o.bytes.is_empty() {
            Want::App(INVALID_STATE) // no memory to write
        } else {
            Want::Ok
        };
        let r = self.ic().unmap(h.retype());
        self.expect("unmap", r, want, true);
        // A rename's Unmap hands the driver no operation (R-M5): it stamps the resource only
        // (below).
        if !self.renaming.iter().any(|(r, _)| *r == h) {
            self.after_driver(&[i], resolves);
        }
        if let (Want::Ok, Some(m)) = (want, mapped) {
            let (_, len, byte) = self.mapped.swap_remove(m);
            self.objs[i].bytes.fill(0);
            self.write(i, 0, len, byte);
            if let Some(at) = self.renaming.iter().position(|(r, _)| *r == h) {
                let (_, taken) = self.renaming.swap_remove(at);
                self.renamed(i, taken);
            }
        }
    }

    /// GetData: flushes when the End is still in the open buffer.
    fn poll_query(&mut self, i: usize) -> Option<bool> {
        let mut want = self.want_live(i, self.objs[i].ty == HandleType::Query);
        let end = self.objs[i].query_end;
        if want == Want::Ok && end == 0 {
            want = Want::App(INVALID_STATE);
        }
        let h = self.objs[i].handle.retype::<handle::Query>();
        let r = self.ic().query_signaled(h);
        let signaled = self.expect("query_signaled", r, want, true)?;
        if end >= self.open {
            self.model_flush(self.world.completed());
        }
        let completed = self.world.completed();
        if signaled != (completed >= end) {
            self.fail(format_args!(
                "query_signaled = {signaled}, but its End is in buffer {end} \
                 and the GPU completed {completed}"
            ));
        }
        Some(signaled)
    }

    fn flush(&mut self) {
        let r = self.ic().flush();
        self.expect("flush", r, Want::Ok, true);
        self.model_flush(self.world.completed());
    }

    fn clear_state(&mut self) {
        let r = self.ic().clear_state();
        self.expect("clear_state", r, Want::Ok, true);
        let bound: Vec<AnyHandle> = self.bindings.values().copied().collect();
        for handle in bound {
            self.unhold(handle);
        }
        self.bindings.clear();
        self.open_ops += 1;
    }

    /// R-D4's heavy pattern after destroying `pick` (on this thread: the pattern is about
    /// the immediate context's calls after the destroy).
    fn sync_destroy(&mut self, pick: u16) {
        if let Some(i) = self.pick(pick) {
            if self.want_destroy(i) == Want::Ok {
                self.destroy(i, false);
            }
        }
        let query =
            match self.pick_where(pick, |o| o.life == Life::Live && o.ty == HandleType::Query) {
                Some(q) => q,
                None => match self.create_query(QueryKind::Event) {
                    Some(q) => q,
                    None => return,
                },
            };
        let destroyed: Vec<usize> = (0..self.objs.len())
            .filter(|&i| self.objs[i].life == Life::Pending)
            .collect();
        self.clear_state();
        self.flush();
        self.query_op(query, false);
        let mut signaled = false;
        for _ in 0..3 {
            if self.poll_query(query) == Some(true) {
                signaled = true;
                break;
            }
            self.world.complete_all();
        }
        if !signaled {
            self.fail(format_args!("R-D4: the event query never signalled"));
        }
        self.flush();
        for i in destroyed {
            let o = &self.objs[i];
            let held = o.views > 0;
            if !held && (o.life != Life::Gone || o.allocated) {
                self.fail(format_args!(
                    "R-D4: object {i} ({:?}) not fully destroyed by the heavy pattern",
                    o.handle
                ));
            }
        }
    }

    /// DestroyDevice (R-D3), then every call fails with `DeviceRemoved` and nothing leaked.
    fn drop_device(&mut self) {
        let mut ic = self.ic.take().expect("one DropDevice per run");
        let r = ic.destroy_device();
        self.expect("destroy_device", r, Want::Ok, true);
        drop(ic);
        for o in &mut self.objs {
            o.life = Life::Gone;
            o.allocated = false;
        }
        let leaks = self.world.check_after_device_destroyed();
        if !leaks.is_empty() {
            self.fail(format_args!(
                "R-D3: violations or leaks after destroy_device: {leaks:#?}"
            ));
        }
        if !self.device.is_removed() {
            self.fail(format_args!(
                "the device is not removed after destroy_device"
            ));
        }
        for i in 0..self.objs.len() {
            let h = self.objs[i].handle;
            let r = self.device.object(h).map(|_| ());
            self.expect("object after destroy_device", r, Want::Removed, false);
        }
        if let Some(h) = self.objs.first().map(|o| o.handle) {
            let r = self.device.destroy(h);
            self.expect("destroy after destroy_device", r, Want::Removed, true);
        }
        let r = self.device.create_resource(ResourceDesc {
            byte_size: 4,
            ..ResourceDesc::default()
        });
        self.expect("create after destroy_device", r, Want::Removed, true);
        let leaks = self.world.check_after_device_destroyed();
        if !leaks.is_empty() {
            self.fail(format_args!(
                "R-D3: calls after destroy_device broke rules: {leaks:#?}"
            ));
        }
    }

    /// The checks run after every step. The soft kernel's side is read through its world's
    /// accessors (each takes the world's lock once), never while the engine is called.
    fn check(&mut self) {
        let (violations, errors) = (self.world.violation_count() == 0, self.world.error_count());
        if !violations {
            let violations = self.world.violations();
            self.fail(format_args!(
                "the soft kernel saw rules broken: {violations:#?}"
            ));
        }
        if errors != self.errors {
            self.fail(format_args!(
                "R-E2: {errors} errors reported through set-error, the model counted {}",
                self.errors
            ));
        }
        self.check_other();
        let Some(ic) = self.ic.as_ref() else { return };
        let (open, submitted, stats) = (ic.open_buffer(), ic.last_submitted(), ic.retire_stats());
        if open != self.open || submitted != self.last_submitted {
            self.fail(format_args!(
                "buffers: open {open}, last submitted {submitted}; the model: {}, {}",
                self.open, self.last_submitted
            ));
        }
        let waiting_destruction = self.objs.iter().filter(|o| o.waited).count();
        let waiting_deallocation = self
            .objs
            .iter()
            .filter(|o| o.life == Life::Gone && o.allocated)
            .count();
        if (
            stats.destroyed,
            stats.deallocated,
            stats.waiting_destruction,
            stats.waiting_deallocation,
        ) != (
            self.queue_destroyed,
            self.queue_deallocated,
            waiting_destruction,
            waiting_deallocation,
        ) {
            self.fail(format_args!(
                "R-D2: retire stats {stats:?}; the model: destroyed {}, deallocated {}, \
                 waiting destruction {waiting_destruction}, \
                 waiting deallocation {waiting_deallocation}",
                self.queue_destroyed, self.queue_deallocated
            ));
        }
        let model_bindings = || self.bindings.iter().map(|(p, h)| (*p, *h));
        if !ic.bindings().eq(model_bindings()) {
            let bindings: Vec<(BindPoint, AnyHandle)> = ic.bindings().collect();
            let model_bindings: Vec<(BindPoint, AnyHandle)> = model_bindings().collect();
            self.fail(format_args!(
                "bindings {bindings:?}; the model: {model_bindings:?}"
            ));
        }
        for (i, o) in self.objs.iter().enumerate() {
            if o.life == Life::Live {
                if let Err(e) = self.device.object(o.handle) {
                    self.fail(format_args!(
                        "live object {i} ({:?}) does not look up: {e:?}",
                        o.handle
                    ));
                }
            }
        }
        // The kernel's side: one pass over its live allocations, each found by id in
        // `allocs` (no hashing per object), then every object's expected state. The kernel
        // never reuses an allocation id: freed once is freed for good, not looked at again.
        let mut seen = core::mem::take(&mut self.seen);
        seen.clear();
        seen.resize(self.allocs.len(), false);
        let completed = self.world.completed();
        self.world.for_each_allocation(|allocation, bytes| {
            let id = allocation.0.get();
            let Ok(k) = self.allocs.binary_search_by_key(&id, |(a, _)| *a) else {
                return;
            };
            seen[k] = true;
            let i = self.allocs[k].1;
            let o = &self.objs[i];
            if o.allocated && o.is_resource() && bytes != o.bytes {
                self.fail(format_args!(
                    "contents of object {i} ({:?}): {bytes:?}, the model: {:?}",
                    o.handle, o.bytes
                ));
            }
        });
        // The pool's: live until a trim gives them back, which only the GPU's being done
        // with them allows (R-M5, R-D1); a trim takes each size's oldest first.
        let mut pooled_live = 0;
        let mut kept = Vec::with_capacity(self.pool.len());
        for p in core::mem::take(&mut self.pool) {
            let handle = AllocationHandle(std::num::NonZeroU64::new(p.id).expect("ids start at 1"));
            if self.world.read(handle).is_some() {
                pooled_live += 1;
                kept.push(p);
            } else if p.stamp > completed {
                self.fail(format_args!(
                    "R-M5: pooled allocation {} freed before the GPU finished buffer {} \
                     (completed {completed})",
                    p.id, p.stamp
                ));
            } else if kept.iter().any(|k| k.size == p.size) {
                self.fail(format_args!(
                    "R-M5: pooled allocation {} freed before an older one of its size",
                    p.id
                ));
            }
        }
        self.pool = kept;
        // The open renames' allocations (taken from the pool or new) are live too.
        let renaming_live = self.renaming.len();
        let mut allocated = pooled_live + renaming_live;
        let mut freed = Vec::new();
        for (k, &(id, i)) in self.allocs.iter().enumerate() {
            let o = &self.objs[i];
            if o.confirmed_free {
                continue;
            }
            let is = seen[k];
            if is != o.allocated {
                let rule = if o.allocated {
                    "R-D1/R-D4: deallocated early"
                } else {
                    "R-D2: not deallocated when due"
                };
                self.fail(format_args!(
                    "{rule}: object {i} ({:?}, {:?}, last buffer {}, completed {}) \
                     allocation {id} is {}",
                    o.handle,
                    o.life,
                    o.last_buffer,
                    completed,
                    if is { "live" } else { "freed" }
                ));
            }
            if o.allocated {
                allocated += 1;
            } else {
                freed.push(i);
            }
        }
        let live = self.world.live_allocations();
        if live != allocated {
            self.fail(format_args!(
                "{live} allocations live in the soft kernel, the model knows {allocated}"
            ));
        }
        for i in freed {
            self.objs[i].confirmed_free = true;
        }
        self.seen = seen;
    }

    fn check_other(&self) {
        let Some(other) = &self.other else { return };
        let (clean, errors) = (
            other.world.violation_count() == 0,
            other.world.error_count(),
        );
        if !clean || errors != other.errors {
            let violations = other.world.violations();
            self.fail(format_args!(
                "second device: violations {violations:#?}, {errors} errors reported \
                 (the model: {})",
                other.errors
            ));
        }
    }

    /// The end of every run: a sweep of every handle the run has seen, then device
    /// destruction and the leak checks, for both devices (the second if a step made it).
    fn finish(&mut self) {
        self.at = None;
        if self.ic.is_some() {
            for i in 0..self.objs.len() {
                let want = self.want_live(i, true);
                let r = self.device.object(self.objs[i].handle).map(|_| ());
                self.expect("object (final sweep)", r, want, false);
            }
            self.drop_device();
        }
        self.check_other();
        let Some(other) = self.other.as_mut() else {
            return;
        };
        let mut ic = other
            .ic
            .take()
            .expect("the second device lives until the end");
        let world = Arc::clone(&other.world);
        let r = ic.destroy_device();
        self.expect("second device: destroy_device", r, Want::Ok, false);
        let leaks = world.check_after_device_destroyed();
        if !leaks.is_empty() {
            self.fail(format_args!(
                "R-D3: second device: violations or leaks: {leaks:#?}"
            ));
        }
    }
}
