//! cargo-fuzz target: random recordings on deferred contexts, executed on the immediate
//! context, checked after every step against the plain model of
//! `cmdlist_models::command_lists` (R-C1..R-C4, R-E2, R-E3, R-H1..R-H5, R-D1). The
//! first input byte chooses the deferred-context budget, the rest decode into steps; any
//! model mismatch, broken rule, leak or engine panic is a crash.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cmdlist_models::command_lists::run_bytes(data);
});
