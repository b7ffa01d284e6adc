//! All integration tests in one binary (fast to link).

mod bare_driver;
mod bound;
#[cfg(feature = "capture")]
mod capture;
mod cls;
mod common;
mod deferred;
mod device_drop;
mod docs;
mod draw;
mod driver_built;
mod dxgi;
mod emulated;
mod finish_faults;
mod hardening;
mod heard;
mod locks;
mod map_modes;
mod nested;
mod null;
mod owed;
mod panic_safety;
mod primary;
mod recycle;
mod recycle_memory;
mod registry;
mod rename;
mod rename_size;
mod replay;
mod restore;
mod retire;
mod smoke;
mod threads;
mod wide;
