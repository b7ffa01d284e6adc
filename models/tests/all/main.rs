//! The fuzz interpreters on stable: random inputs from a fixed-seed PRNG, every committed
//! seed and regression input (`fuzz/seeds`, `fuzz/regressions`), and hand-written sequences,
//! each checked step by step against the interpreter's model.

mod capture_reader;
mod capture_replay;
mod command_lists;
mod common;
mod handle_lifecycle;
