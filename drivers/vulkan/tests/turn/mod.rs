//! The tests of a Vulkan test binary take turns.
//!
//! The validation layer Debian 12 ships (1.3.239) now and then crashes inside itself, on
//! legal use, when one thread makes or destroys a device while another thread records or
//! waits on a device of its own. With the tests of `tests/vulkan.rs` running in parallel,
//! 10 of 160 runs of the binary crashed, each inside the layer; none did in 70 runs with the
//! layer off, and none in 300 runs of the test that crashed, alone (on an idle or a loaded
//! machine). Cargo runs the binaries one after another; within one, a test holds its turn
//! from its first line to its end, so no other test makes or destroys a device meanwhile.
//! The threads of one test, which the engine's threading rules are about, stay concurrent.

use std::sync::{Mutex, MutexGuard, PoisonError};

static TURN: Mutex<()> = Mutex::new(());

/// This test's turn, held until dropped. A test that failed passes it on all the same.
pub fn take() -> MutexGuard<'static, ()> {
    TURN.lock().unwrap_or_else(PoisonError::into_inner)
}
