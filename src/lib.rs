//! # cmdlist
//!
//! The runtime side of D3D11-style deferred contexts and command lists, for user-mode drivers
//! and translation layers to embed. The crate records commands on deferred contexts, turns
//! them into command lists, executes them on the immediate context (replaying them through
//! the driver, or, where the driver builds its own lists, handing it the list it built:
//! [`ListMode`]), and keeps the protocol's
//! bookkeeping: context-local handles, their CLS-size bucket allocator, small-command-list
//! recycling and deferred destruction on the submission clock; and the DXGI base functions
//! (present, gamma caps, display mode, priority, residency, identity rotation, Blt) with a CPU
//! reference Blt. It calls a [`Driver`] at the
//! DDI points and a [`Kernel`] for memory, submission and fences, statically dispatched.
//!
//! Rule ids (`R-D2`, `R-R7`, ...) refer to the numbered protocol the crate implements, in the
//! repository's `docs/PROTOCOL.md`; `ARCHITECTURE.md` maps each rule to its module.
//!
//! # Threading contract
//! - [`Device`]: `Send + Sync`; create, destroy and lookups are free-threaded (R-F1).
//! - [`ImmediateContext`]: `Send`, not `Sync`; the one thread that submits, executes command
//!   lists and really destroys objects (R-T1, R-D1).
//! - [`DeferredContext`]: `Send`, not `Sync`; one thread at a time records on it.
//! - [`CommandList`]: `Send + Sync`; executed on the immediate context, dropped anywhere.
//! - The DXGI functions are the immediate context's (R-F1); [`Device::frame_stats`] reads
//!   what the last present published, from any thread, without locks.
//!
//! # What is here
//! - The engine: [`Device`] (with [`DeviceConfig`]), [`ImmediateContext`],
//!   [`DeferredContext`], [`CommandList`]; their statistics [`RetireStats`],
//!   [`DeferredStats`], [`ListStats`]; the clocks of deferred destruction ([`Clock`]) and of
//!   amortised processing ([`PUMP_INTERVAL`]).
//! - What the engine calls: the [`Driver`] trait (with [`Command`], [`Op`], [`ListMemory`],
//!   [`Resolver`], [`ObjectView`], [`StateView`]) and the [`Kernel`] trait (with
//!   [`AllocationDesc`], [`AllocationHandle`], [`Submission`], [`ContextId`]).
//! - Vocabulary: handles ([`Handle`], [`AnyHandle`], the kinds in [`handle`], [`HandleType`],
//!   the [`HandleSizeTable`] of R-H4), object descriptions ([`ObjectDesc`], [`ResourceDesc`],
//!   [`ViewDesc`], [`QueryKind`], [`Usage`], [`BindFlags`], [`ResourceFlags`]), bind points
//!   ([`BindPoint`], [`BindClass`], [`Stage`]), [`ThreadingCaps`], and errors ([`Error`],
//!   [`AppError`], [`Result`]).
//! - The CLS-size bucket allocator, usable on its own: [`bucket`].
//! - The DXGI base functions' vocabulary, Blt's checks and the CPU reference Blt: [`dxgi`].
//! - The software reference driver and kernel: `soft` (feature `soft`).
//! - What the engine tells a profiler: [`trace`] (the spans, with the feature `trace`).
//!
//! How the source is laid out and who may call what from which thread: `ARCHITECTURE.md`.
//!
//! # Example
//! A deferred context records on its own thread; the immediate context executes the list
//! (here over the null driver of `soft::null`, whose hooks do nothing):
//!
//! ```
//! # #[cfg(feature = "soft")] {
//! use cmdlist::soft::null::{copy_of, null_device};
//! use cmdlist::DeviceConfig;
//!
//! let (device, mut ic) = null_device(DeviceConfig::default())?;
//! let copy = copy_of(&device);
//! let mut dc = device.create_deferred_context()?;
//! let (dc, list) = std::thread::spawn(move || -> cmdlist::Result<_> {
//!     dc.command(copy)?;
//!     let list = dc.finish()?;
//!     Ok((dc, list))
//! })
//! .join()
//! .unwrap()?;
//! ic.execute_command_list(&list)?;
//! ic.flush()?;
//! drop((list, dc));
//! ic.destroy_device()?;
//! # }
//! # Ok::<(), cmdlist::Error>(())
//! ```
//!
//! # Features
//! - `soft`: the software reference driver and kernel (`soft::SoftDriver`,
//!   `soft::SoftKernel`), which check the protocol and record every hook; the null driver
//!   (`soft::null`), the smallest complete driver and a template; fault injection
//!   (`soft::inject`). Tests, examples and benches use them; an embedder can test its own
//!   driver against them.
//! - `trace`: the engine opens a `tracing` span for each list-level step, on the thread that
//!   does it, with the list's number ([`trace`]); any `tracing` subscriber receives them.
//!   Without it nothing of the instrumentation is compiled in.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![warn(missing_debug_implementations)]

mod bind;
mod caps;
mod cls;
mod context;
mod desc;
mod driver;
mod error;
mod kernel;
mod list_mode;
mod lists;
mod map_type;
mod mapping;
mod primitive;
mod registry;

pub mod dxgi;
pub mod handle;
pub mod trace;

pub use cls::bucket;

pub use caps::{MapCaps, ThreadingCaps};
pub use error::{AppError, Error, Result};
pub use handle::{AnyHandle, Handle, HandleSize, HandleSizeTable, HandleType, ObjectKind};

pub use bind::{BindClass, BindPoint, Stage, StateView};
pub use cls::local_handles::{LocalHandle, LocalHandles};
pub use context::amortize::PUMP_INTERVAL;
pub use context::command_list::{CommandList, ListStats};
pub use context::deferred::{DeferredContext, DeferredMode, DeferredStats};
pub use context::device::{Device, DeviceConfig};
pub use context::immediate::ImmediateContext;
pub use desc::{
    BindFlags, ObjectDesc, QueryKind, ResourceDesc, ResourceFlags, Subresource, Texture2d, Usage,
    ViewDesc,
};
pub use driver::{Command, DeferredCall, Driver, ListMemory, Op};
pub use kernel::{AllocationDesc, AllocationHandle, ContextId, DeferredId, Kernel, Submission};
pub use list_mode::ListMode;
pub use lists::record::OPERATION_BYTES;
pub use map_type::{MapFlags, MapType};
pub use mapping::{CpuMapping, LockFlags};
pub use registry::retire::{Clock, RetireStats};
pub use registry::{ObjectRef, ObjectView, Resolver};

#[cfg(feature = "soft")]
#[cfg_attr(docsrs, doc(cfg(feature = "soft")))]
pub mod soft;

#[cfg(feature = "capture")]
#[cfg_attr(docsrs, doc(cfg(feature = "capture")))]
pub mod capture;

/// The README's example, compiled and run as a doctest.
#[cfg(all(doctest, feature = "soft"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The embedding guide's example, compiled and run as a doctest.
#[cfg(all(doctest, feature = "soft"))]
#[doc = include_str!("../docs/EMBEDDING.md")]
pub struct EmbeddingDoctests;

/// The capture guide's examples, compiled (and run, but for the one that writes a file) as
/// doctests.
#[cfg(all(doctest, feature = "soft", feature = "capture"))]
#[doc = include_str!("../docs/CAPTURE.md")]
pub struct CaptureDoctests;
