//! Fuzz interpreters: random operation sequences run against the engine and checked after
//! every step against a plain reference model. cargo-fuzz targets and the stable tests share
//! them.
pub mod command_lists;
mod elsewhere;
pub mod handle_lifecycle;
