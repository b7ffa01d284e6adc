//! # cmdlist
//!
//! The runtime side of D3D11-style deferred contexts and command lists, for user-mode drivers
//! and translation layers to embed. See `ARCHITECTURE.md` for the layers and the threading
//! contract, and `../shared/spec/SEMANTICS.md` for the rules (`R-..`) cited throughout.
#![forbid(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub(crate) mod primitive;

pub mod bucket;
pub mod caps;
pub mod error;
pub mod handle;

pub use caps::ThreadingCaps;
pub use error::{AppError, Error, Result};
pub use handle::{AnyHandle, Handle, HandleSize, HandleSizeTable, HandleType, ObjectKind};
pub mod amortize;
pub(crate) mod index_stack;
pub(crate) mod recycle;
pub(crate) mod tag;

pub mod bind;
pub(crate) mod cls;
pub mod command_list;
pub mod deferred;
pub mod desc;
pub mod device;
pub mod driver;
pub mod immediate;
pub mod kernel;
pub(crate) mod record;
pub mod registry;
pub mod retire;

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
