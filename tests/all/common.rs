//! Helpers shared by the integration tests.

use std::sync::Arc;

use cmdlist::handle::{ObjectKind, Resource};
use cmdlist::soft::{
    self, Gpu, Hook, SoftConfig, SoftDevice, SoftImmediate, SoftWorld, TraceEvent,
};
use cmdlist::{AllocationHandle, AnyHandle, Clock, DeferredId, DeviceConfig, Handle, ResourceDesc};

/// A soft device with this fence timeline, GPU strictness and retire clock.
pub fn setup(
    gpu: Gpu,
    strict_gpu: bool,
    retire_clock: Clock,
) -> (SoftDevice, SoftImmediate, Arc<SoftWorld>) {
    soft::device(
        SoftConfig {
            gpu,
            strict_gpu,
            ..Default::default()
        },
        DeviceConfig::default().with_retire_clock(retire_clock),
    )
    .unwrap()
}

/// `h` with another kind, as a C caller holding raw 64-bit handles could pass it: the engine
/// must refuse it wherever the kind matters (R-E1).
pub fn forge<U: ObjectKind, T: ObjectKind>(h: Handle<T>) -> Handle<U> {
    Handle::from_bits(h.to_bits()).expect("a handle's bits have a generation")
}

/// An application error of `kind` (R-E1).
pub fn app(kind: cmdlist::AppError) -> cmdlist::Error {
    cmdlist::Error::Application(kind)
}

/// A plain buffer of `bytes` bytes.
pub fn buffer(bytes: u64) -> ResourceDesc {
    ResourceDesc {
        byte_size: bytes,
        ..Default::default()
    }
}

/// A dynamic buffer of `bytes` bytes (Map(DISCARD) applies to it).
pub fn dynamic_buffer(bytes: u64) -> ResourceDesc {
    ResourceDesc {
        usage: cmdlist::Usage::Dynamic,
        ..buffer(bytes)
    }
}

/// xorshift64*: a tiny deterministic PRNG, so failures reproduce by seed.
pub struct XorShift(pub u64);

impl XorShift {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// `len` random bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// Creates objects with `create` until one lands in the slot of `old` (destroyed and flushed
/// already), then destroys the others. A freed slot comes back once the CPU epoch has passed
/// its old entry (trimming hands the epoch its work, the next flush collects the slot); the
/// others are kept meanwhile, so that the free stack, last in first out, reaches it.
pub fn create_in_slot_of<T: ObjectKind>(
    device: &SoftDevice,
    ic: &mut SoftImmediate,
    old: AnyHandle,
    mut create: impl FnMut() -> Handle<T>,
) -> Handle<T> {
    let mut others = Vec::new();
    while others.len() < 10_000 {
        ic.trim();
        ic.flush().unwrap();
        let new = create();
        if new.to_bits() as u32 == old.to_bits() as u32 {
            for other in others {
                device.destroy(other).unwrap();
            }
            return new;
        }
        others.push(new);
    }
    panic!("the slot of {old:?} never came back");
}

/// The soft driver's id of `handle`'s object.
pub fn id_of<T: ObjectKind>(device: &SoftDevice, handle: Handle<T>) -> u64 {
    device.object(handle).unwrap().id
}

/// The kernel allocation of `resource`.
pub fn allocation(device: &SoftDevice, resource: Handle<Resource>) -> AllocationHandle {
    device.object(resource).unwrap().allocation().unwrap()
}

/// The trace events of deferred context `ctx`.
pub fn events_of(world: &SoftWorld, ctx: DeferredId) -> Vec<TraceEvent> {
    world
        .trace()
        .into_iter()
        .filter(|e| e.context == Some(ctx))
        .collect()
}

/// The hooks of `events`, in order.
pub fn hooks(events: &[TraceEvent]) -> Vec<Hook> {
    events.iter().map(|e| e.hook).collect()
}

/// How many of `events` are calls of `hook`.
pub fn count(events: &[TraceEvent], hook: Hook) -> usize {
    events.iter().filter(|e| e.hook == hook).count()
}

/// Where the first of `trace`'s events that `f` accepts is.
pub fn position(trace: &[TraceEvent], f: impl Fn(&TraceEvent) -> bool) -> Option<usize> {
    trace.iter().position(f)
}

/// The soft driver's settings for a test whose subject is a deferred-context or command-list
/// hook (R-H1..R-H5, R-R1..R-R8, R-C1 and R-C2's hook orders): a driver that records command
/// lists itself, whatever `CMDLIST_SOFT_EMULATED` says. The test suite runs once with
/// drivers that do and once with drivers that do not ([`SoftConfig::command_lists`]); an
/// emulating engine calls none of those hooks, which the soft driver checks in every test.
pub fn native() -> SoftConfig {
    SoftConfig {
        command_lists: true,
        ..Default::default()
    }
}

/// Runs every committed input of a fuzz target through `run`: its seeds
/// (`fuzz/seeds/<target>/`) and the inputs a campaign once crashed on
/// (`fuzz/regressions/<target>/`, if any), in name order. A failing input is named on
/// stderr. Returns how many ran.
pub fn run_committed_fuzz_inputs(target: &str, run: impl Fn(&[u8])) -> usize {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut inputs = 0;
    for dir in ["seeds", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            assert_eq!(dir, "regressions", "{target} has no committed seeds");
            continue;
        };
        let mut files: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
        files.sort();
        for file in files {
            let bytes = std::fs::read(&file).unwrap();
            let _report = NamedInput(&file);
            run(&bytes);
            inputs += 1;
        }
    }
    inputs
}

/// Names the failing input file when a run panics.
struct NamedInput<'a>(&'a std::path::Path);

impl Drop for NamedInput<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("failing input: {}", self.0.display());
        }
    }
}
