//! The statistics the immediate context publishes at each present.

use crate::dxgi::ResidencyStatus;

/// A frame's statistics, published by the immediate context at each
/// [`crate::ImmediateContext::present`] and read from any thread with
/// [`crate::Device::frame_stats`] (a HUD, telemetry): one consistent snapshot, never half of
/// one frame and half of the next, and readers never block the immediate context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FrameStats {
    /// Presents so far (0: none yet).
    pub frame: u64,
    /// The newest command buffer submitted.
    pub last_submitted: u64,
    /// Times the immediate context performed amortised processing (R-A1).
    pub amortized: u64,
    /// Destroyed objects waiting for their buffer or their holders (R-D1).
    pub waiting_destruction: usize,
    /// Allocations waiting for the GPU (R-D4).
    pub waiting_deallocation: usize,
    /// Bytes the deferred-destruction queues keep.
    pub retained_bytes: usize,
    /// Command lists ended while a buffer that executed them may still read them.
    pub lists_in_flight: usize,
    /// Where the presented surface's allocation is (`None`: the kernel did not say).
    pub presented_residency: Option<ResidencyStatus>,
}
