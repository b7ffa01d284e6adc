//! The DXGI base functions (R-X1..R-X7): present, gamma caps, display mode, resource priority,
//! residency, rotate identities and Blt, as driver-independent logic over kernel callbacks
//! and driver hooks, and a CPU reference Blt.
//!
//! The entry points are [`crate::ImmediateContext`]'s (none is free-threaded, R-F1):
//! `present`, `gamma_caps`, `set_display_mode`, `set_resource_priority`,
//! `query_resource_residency`, `rotate_resource_identities` and `blt`. This module holds
//! their vocabulary.

mod blt;
/// Texel reading and writing, and the D3D number conversions (R-X7).
mod codec;
mod display_mode;
mod format;
mod frame_stats;
mod gamma;
mod present;
mod rect;
/// The CPU reference Blt (R-X6, R-X7).
pub mod reference;
mod residency;
mod rotation;
mod texel_size;

pub(crate) use blt::{validate as validate_blt, BltSide};
pub use blt::{BltArgs, BltCaps, BltFlags, BltPlan};
pub use display_mode::{DisplayModeCallback, DisplayModeOutcome};
pub use format::DisplayFormat;
pub use frame_stats::FrameStats;
pub use gamma::{DdiGammaControlCaps, GammaCaps, MAX_GAMMA_POINTS};
pub use present::{DxgiContext, PresentArgs, PresentCallback, PresentFlags, PresentStatus};
pub use rect::Rect;
pub use residency::{ResidencyFold, ResidencyStatus, S_NOT_RESIDENT, S_RESIDENT_IN_SHARED_MEMORY};
pub use rotation::Rotation;
pub(crate) use texel_size::min_byte_size;
