//! The frame's timeline: the engine's spans captured ([`capture`]), written as a trace that
//! Perfetto and Chrome open ([`chrome`]), and drawn as a picture ([`picture`]).

pub mod capture;
pub mod chrome;
pub mod picture;

/// The name of the thread that drives the immediate context (its lane comes first).
pub const IMMEDIATE: &str = "immediate";

/// The name of the thread that drives deferred context `w`.
pub fn deferred(w: usize) -> String {
    format!("deferred {w}")
}
