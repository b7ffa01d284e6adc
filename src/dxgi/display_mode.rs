//! SetDisplayMode (R-X2): what the kernel's set-display-mode callback gets and answers.

use crate::kernel::AllocationHandle;

/// What the kernel's set-display-mode callback gets (`D3DDDICB_SETDISPLAYMODE`): the
/// primary's current allocation.
///
/// Only [`crate::ImmediateContext::set_display_mode`] makes one (it cannot be built outside
/// the engine), so the callback is reached only from inside that call, on the immediate
/// context's thread (R-T2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct DisplayModeCallback {
    /// The primary's allocation.
    pub primary: AllocationHandle,
}

impl DisplayModeCallback {
    pub(crate) fn new(primary: AllocationHandle) -> Self {
        DisplayModeCallback { primary }
    }
}

/// How the set-display-mode callback ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DisplayModeOutcome {
    /// The mode is set.
    Set,
    /// `D3DDDIERR_INCOMPATIBLEPRIVATEFORMAT`: the primary's private format does not fit the
    /// mode; `attribute` is the format the kernel asks for (the driver would convert the
    /// primary and try again).
    IncompatiblePrivateFormat {
        /// `PrivateDriverFormatAttribute`.
        attribute: u32,
    },
}
