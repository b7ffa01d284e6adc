//! The capture replayer against hostile captures: never a panic, and the calls it makes
//! keep the protocol: see `cmdlist_models::capture_replay`.
//!
//! `cargo +nightly fuzz run capture_replay -- -max_total_time=60`
#![no_main]

use cmdlist_models::capture_replay::run;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| run(bytes));
