//! # cmdlist
//!
//! The runtime side of D3D11-style deferred contexts and command lists, for user-mode drivers
//! and translation layers to embed. The crate records commands on deferred contexts, turns
//! them into command lists, replays them on the immediate context, and keeps the protocol's
//! bookkeeping: context-local handles, their CLS-size bucket allocator, small-command-list
//! recycling and deferred destruction on the submission clock. It calls a [`Driver`] at the
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
//!
//! # Modules
//! Vocabulary: [`handle`], [`error`], [`caps`], [`desc`], [`bind`]. The driver side:
//! [`driver`], [`kernel`]. The engine: [`device`], [`registry`], [`retire`],
//! [`immediate`], [`deferred`], [`command_list`], [`bucket`], [`amortize`]. The software
//! reference driver and kernel: `soft` (feature `soft`).
#![forbid(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub(crate) mod cls;
pub(crate) mod index_stack;
pub(crate) mod list_clock;
pub(crate) mod list_pool;
pub(crate) mod primitive;
pub(crate) mod reclaim;
pub(crate) mod record;
pub(crate) mod recycle;
pub(crate) mod tag;

pub mod amortize;
pub mod bind;
pub mod bucket;
pub mod caps;
pub mod command_list;
pub mod deferred;
pub mod desc;
pub mod device;
pub mod driver;
pub mod error;
pub mod handle;
pub mod immediate;
pub mod kernel;
pub mod registry;
pub mod retire;

pub use caps::ThreadingCaps;
pub use error::{AppError, Error, Result};
pub use handle::{AnyHandle, Handle, HandleSize, HandleSizeTable, HandleType, ObjectKind};

pub use bind::{BindClass, BindPoint, Stage, StateView};
pub use command_list::{CommandList, ListStats};
pub use deferred::{DeferredContext, DeferredStats};
pub use desc::{BindFlags, ObjectDesc, QueryKind, ResourceDesc, ResourceFlags, Usage, ViewDesc};
pub use device::{Device, DeviceConfig};
pub use driver::{Command, Driver, ListMemory, Op};
pub use immediate::ImmediateContext;
pub use kernel::{AllocationDesc, AllocationHandle, ContextId, Kernel, Submission};
pub use registry::{ObjectRef, ObjectView, Resolver};
pub use retire::{Clock, RetireStats};

#[cfg(feature = "soft")]
pub mod soft;

/// The README's example, compiled and run as a doctest.
#[cfg(all(doctest, feature = "soft"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
