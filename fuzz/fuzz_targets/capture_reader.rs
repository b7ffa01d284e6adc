//! The capture format's reader against arbitrary bytes: never a panic, and exactly the
//! frames the bytes hold, then an error naming the first damaged or cut one: see
//! `cmdlist_models::capture_reader`.
//!
//! `cargo +nightly fuzz run capture_reader -- -max_total_time=60`
#![no_main]

use cmdlist_models::capture_reader::run;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| run(bytes));
