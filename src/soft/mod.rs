//! `soft`: a software reference driver and kernel (behind the `soft` cargo feature).
//!
//! Resources are CPU memory owned by the kernel side; commands really copy, fill and update
//! bytes, so a test can compare memory after replaying command lists with memory after
//! running the same commands directly. The kernel keeps a fence timeline that completes
//! submissions when told, at once, or after a set lag, and it *checks the protocol*: a
//! deallocation while the open command buffer references the allocation (R-D1), while a
//! submitted buffer that references it is still running (full destruction, R-D4), a double
//! free, a submit off the immediate context's thread (R-T2), a driver object destroyed twice,
//! a command list's memory recycled or destroyed out of turn (R-R4..R-R6), or a leak at the
//! end (allocations, driver objects, deferred-context states, list memory: R-D3) are
//! recorded as [`Violation`]s, which tests assert empty. Every hook is recorded in a call trace
//! ([`TraceEvent`]) with its thread, for tests that assert the documented order.
//!
//! [`inject`] wraps a driver and a kernel (these or an embedder's) to make one chosen hook
//! call panic or fail, for tests of what the engine promises after a hook panics.

mod built;
#[cfg(feature = "capture")]
mod capture;
mod driver;
pub mod inject;
mod kernel;
mod lifetime;
pub mod null;
mod null_memory;
mod world;

pub use driver::{draw_word, SoftCommand, SoftDeferred, SoftDriver, SoftIc, SoftObject};
pub use inject::{Fault, FaultDriver, FaultKernel, FaultPlan, InjectedPanic, Wrappable};
pub use kernel::SoftKernel;
pub use world::{Gpu, Hook, SoftConfig, SoftEnvError, SoftWorld, TraceEvent, Violation};

use std::sync::Arc;

/// A soft driver and kernel sharing one world.
pub fn new(config: SoftConfig) -> (SoftDriver, SoftKernel, Arc<SoftWorld>) {
    let world = Arc::new(SoftWorld::new(config));
    (
        SoftDriver::new(Arc::clone(&world)),
        SoftKernel::new(Arc::clone(&world)),
        world,
    )
}

/// A device over the soft driver and kernel.
pub type SoftDevice = crate::Device<SoftDriver, SoftKernel>;
/// Its immediate context.
pub type SoftImmediate = crate::ImmediateContext<SoftDriver, SoftKernel>;
/// A deferred context of a soft device.
pub type SoftDeferredContext = crate::DeferredContext<SoftDriver, SoftKernel>;
/// A command list of a soft device.
pub type SoftCommandList = crate::CommandList<SoftDriver, SoftKernel>;

/// A device over a fresh soft world: the usual start of a test. The world checks list
/// reuse against the device's [`crate::DeviceConfig::list_clock`] (whatever `config` says).
pub fn device(
    config: SoftConfig,
    device_config: crate::DeviceConfig,
) -> crate::Result<(SoftDevice, SoftImmediate, Arc<SoftWorld>)> {
    let config = SoftConfig {
        list_clock: device_config.list_clock,
        ..config
    };
    let (driver, kernel, world) = new(config);
    let (device, ic) = crate::Device::new(driver, kernel, device_config)?;
    Ok((device, ic, world))
}

/// Creates objects with `create` until one lands in the slot of `old` (destroyed and flushed
/// already), then destroys the others; for tests of what a stale handle meets. A freed slot
/// comes back once the CPU epoch has passed its old entry (trimming hands the epoch its work,
/// the next flush collects the slot); the others are kept meanwhile, so that the free stack,
/// last in first out, reaches it. Panics if the slot does not come back in 10,000 tries.
pub fn create_in_slot_of<T: crate::ObjectKind>(
    device: &SoftDevice,
    ic: &mut SoftImmediate,
    old: crate::AnyHandle,
    mut create: impl FnMut() -> crate::Handle<T>,
) -> crate::Handle<T> {
    let mut others = Vec::new();
    while others.len() < 10_000 {
        ic.trim();
        ic.flush().expect("a flush of the soft device");
        let new = create();
        if new.to_bits() as u32 == old.to_bits() as u32 {
            for other in others {
                device.destroy(other).expect("a live object");
            }
            return new;
        }
        others.push(new);
    }
    panic!("the slot of {old:?} never came back");
}
