//! Helpers shared by the integration tests.

use std::sync::Arc;

use cmdlist::handle::{ObjectKind, Resource};
use cmdlist::soft::{
    self, Gpu, Hook, SoftConfig, SoftDevice, SoftImmediate, SoftWorld, TraceEvent,
};
use cmdlist::{AllocationHandle, Clock, DeferredId, DeviceConfig, Handle, ResourceDesc};

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
            ..SoftConfig::from_env().unwrap()
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
        ..SoftConfig::from_env().unwrap()
    }
}
