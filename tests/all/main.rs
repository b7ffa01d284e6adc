//! All integration tests in one binary (fast to link).

mod recycle_memory;
mod smoke;
mod fuzz_command_lists;
mod deferred;
mod registry;
mod retire;
mod primary;
mod threads;
mod cls;
mod replay;
mod recycle;
