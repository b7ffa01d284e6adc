//! Atomics and cells, from loom under `cfg(loom)` and from `core` otherwise: every
//! lock-free module imports through here, so its loom model checks the real code.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};

/// Lets another thread run while this one waits (a spin that yields).
#[cfg(loom)]
pub(crate) use loom::thread::yield_now;

/// Lets another thread run while this one waits (a spin that yields).
#[cfg(not(loom))]
pub(crate) use std::thread::yield_now;
