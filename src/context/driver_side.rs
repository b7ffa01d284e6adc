//! The driver's side of a deferred context: see [`DriverSide`].

use crate::error::{Error, Result};

/// What the driver has of a deferred context (R-R3, and the emulation of drivers without
/// command lists).
///
/// A tag of its own (`repr(u8)`), not a niche in the driver's state: the tag is tested at
/// every recorded call and several times a Finish, and a niche (a `Vec`'s capacity, say)
/// takes five instructions to decode where a tag takes two.
#[derive(Debug)]
#[repr(u8)]
pub(crate) enum DriverSide<T> {
    /// The driver records command lists: its state of the context.
    Native(T),
    /// The driver has no command lists (its caps lack `COMMANDLISTS`): the engine records
    /// alone, and no deferred-context hook is called.
    Emulated,
    /// The driver's state could not be made again after a Finish or an Abandon (R-R3): the
    /// context's next call runs out of memory, until a Finish or an Abandon makes it again.
    Lost,
}

impl<T> DriverSide<T> {
    /// What a deferred-context hook is called with: the driver's state, or nothing to call
    /// (emulated); a lost state is out of memory.
    #[inline]
    pub(crate) fn for_hooks(&mut self) -> Result<Option<&mut T>> {
        match self {
            DriverSide::Native(state) => Ok(Some(state)),
            DriverSide::Emulated => Ok(None),
            DriverSide::Lost => Err(Error::OutOfMemory),
        }
    }

    /// [`DriverSide::for_hooks`] for a call of a context whose calls are recorded, which has
    /// its state (the invariant of the context's `Calls::Recorded`): one test of the tag
    /// where `for_hooks` makes two. A lost state, which that invariant rules out, answers
    /// `None` as an emulated context's would (debug builds stop there).
    #[inline]
    pub(crate) fn recording(&mut self) -> Option<&mut T> {
        match self {
            DriverSide::Native(state) => Some(state),
            DriverSide::Emulated => None,
            DriverSide::Lost => {
                debug_assert!(false, "a recorded call of a context without driver state");
                None
            }
        }
    }

    /// Whether the state is lost (R-R3).
    #[inline]
    pub(crate) fn is_lost(&self) -> bool {
        matches!(self, DriverSide::Lost)
    }

    /// The driver's state, if it has one.
    pub(crate) fn native(&self) -> Option<&T> {
        match self {
            DriverSide::Native(state) => Some(state),
            _ => None,
        }
    }
}
