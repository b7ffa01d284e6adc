//! Command-list memory below the user-facing types: what a recording is made of
//! ([`record`]), the lock-free inbox that destroyed lists go to ([`recycle`]) and the
//! device-wide list clock that says when a buffer that executed a list has passed
//! ([`list_clock`]).

pub(crate) mod list_clock;
pub(crate) mod record;
pub(crate) mod recycle;
pub(crate) mod shared;
