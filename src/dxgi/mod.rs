//! The DXGI base functions (R-X1..R-X7): present, gamma caps, display mode, resource priority,
//! residency, rotate identities and Blt, as driver-independent logic over kernel callbacks
//! and driver hooks, and a CPU reference Blt.

mod format;
mod rect;
mod rotation;

pub use format::DisplayFormat;
pub use rect::Rect;
pub use rotation::Rotation;
