//! Present (R-X1): what the application asks, and what the kernel's present callback gets.

use bitflags::bitflags;

use crate::handle::{Handle, Resource};
use crate::kernel::AllocationHandle;

/// The DXGI runtime's opaque context (`pDXGIContext`): never dereferenced, passed to the
/// present callback unchanged (R-X1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DxgiContext(pub usize);

bitflags! {
    /// `DXGI_DDI_PRESENT_FLAGS`. Bits the engine does not name are kept
    /// (`from_bits_retain`) and passed on.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct PresentFlags: u32 {
        /// Present by copying.
        const BLT = 0x1;
        /// Present by flipping.
        const FLIP = 0x2;
        /// Stereo: present the right eye's image.
        const PREFER_RIGHT = 0x4;
        /// Stereo: present the left eye's image only.
        const TEMPORARY_MONO = 0x8;
        /// Tearing allowed.
        const ALLOW_TEARING = 0x10;
        /// Variable refresh allowed.
        const ALLOW_FLEXIBLE_REFRESH = 0x20;
        /// No scan-out transform.
        const NO_SCANOUT_TRANSFORM = 0x40;
    }
}

/// A present, as the application asks it (`DXGI_DDI_ARG_PRESENT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PresentArgs {
    /// The surface to present.
    pub src: Handle<Resource>,
    /// Its subresource.
    pub src_subresource: u32,
    /// The destination and its subresource, if any.
    pub dst: Option<(Handle<Resource>, u32)>,
    /// The runtime's context, passed through.
    pub dxgi_context: DxgiContext,
    /// The flags, passed through.
    pub flags: PresentFlags,
    /// `DXGI_DDI_FLIP_INTERVAL_TYPE`, passed through.
    pub flip_interval: u32,
}

/// What the kernel's present callback gets (`DXGIDDICB_PRESENT`): the surfaces' *current*
/// allocations (after any rotation, R-X5) and the runtime's context unchanged (R-X1).
///
/// Only [`crate::ImmediateContext::present`] makes one (it cannot be built outside the
/// engine), so the present callback is reached only from inside a present, on the immediate
/// context's thread, after the present flushed the open command buffer (R-T2, R-X1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct PresentCallback {
    /// The presented surface's allocation.
    pub src: AllocationHandle,
    /// The destination's allocation, if any.
    pub dst: Option<AllocationHandle>,
    /// The runtime's context.
    pub dxgi_context: DxgiContext,
    /// The flags.
    pub flags: PresentFlags,
    /// The flip interval.
    pub flip_interval: u32,
}

impl PresentCallback {
    pub(crate) fn new(
        args: &PresentArgs,
        src: AllocationHandle,
        dst: Option<AllocationHandle>,
    ) -> Self {
        PresentCallback {
            src,
            dst,
            dxgi_context: args.dxgi_context,
            flags: args.flags,
            flip_interval: args.flip_interval,
        }
    }
}

/// The present callback's answer: a success `HRESULT` (`S_OK` or a `DXGI_STATUS_*`), which
/// the present returns unchanged (R-X1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PresentStatus(pub i32);
