//! # cmdlist-models
//!
//! Fuzz interpreters: random operation sequences run against the engine, over the soft
//! reference driver and kernel, and checked after every step against a plain reference
//! model. The cargo-fuzz targets (`fuzz/`) and the stable seed tests (`tests/`) share them.
//!
//! - [`handle_lifecycle`]: objects, their context-local handles and deferred destruction
//!   (R-D1..R-D4, R-E1, R-H1..R-H5).
//! - [`command_lists`]: deferred contexts, command lists, nested lists and the DXGI
//!   functions in every list mode (R-C1..R-C4, R-E2, R-E3, R-R1..R-R8, R-X1..R-X7).
//! - [`capture_reader`]: the capture format's reader against arbitrary bytes.
//! - [`capture_replay`]: the capture replayer against hostile captures.
#![warn(missing_docs)]

pub mod capture_reader;
pub mod capture_replay;
pub mod command_lists;
mod elsewhere;
pub mod handle_lifecycle;
