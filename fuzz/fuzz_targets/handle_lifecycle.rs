//! Random handle lifecycles (create, destroy from other threads, stale, forged, wrong-type
//! and other-device handles, updates, copies, flushes, GPU progress, primaries, R-D4's heavy
//! pattern, device destruction) run against the engine over the soft driver and checked after
//! every step against a plain model: see `cmdlist_models::handle_lifecycle`. A panic is
//! a model mismatch (a bug); its message names the step and both outcomes.
//!
//! `cargo +nightly fuzz run handle_lifecycle -- -max_total_time=60`
#![no_main]

use cmdlist_models::handle_lifecycle::{run, Step};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|steps: Vec<Step>| run(&steps));
