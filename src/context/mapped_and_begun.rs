//! What a context has mapped and not unmapped, and begun and not ended: the same rules on
//! the immediate and the deferred contexts.

use crate::error::{AppError, Result};
use crate::handle::{Handle, Query, Resource};

/// A context's open Map(DISCARD)s, each with the memory `M` its contents are written to
/// until the Unmap, and its begun queries.
///
/// The rules, one place for both contexts: a resource is mapped at most once at a time and
/// only a mapped resource is unmapped; a query is begun at most once at a time, and ending one
/// that was not begun is allowed (an event query is only ended). Executing a command list
/// that maps a resource mapped here, or begins or ends a query begun here, is refused by the
/// executing context (R-C4), which asks [`MappedAndBegun::check_list`].
#[derive(Debug)]
pub(crate) struct MappedAndBegun<M> {
    mapped: Vec<(Handle<Resource>, M)>,
    begun: Vec<Handle<Query>>,
}

impl<M> Default for MappedAndBegun<M> {
    fn default() -> Self {
        MappedAndBegun {
            mapped: Vec::new(),
            begun: Vec::new(),
        }
    }
}

impl<M> MappedAndBegun<M> {
    /// How many operations the open Maps and begun queries still owe: the Unmap of each
    /// Map and the End of each Begin, which Finish adds if the application does not (R-C4).
    pub(crate) fn owed(&self) -> usize {
        self.mapped.len() + self.begun.len()
    }

    /// Whether `query` is begun.
    pub(crate) fn is_begun(&self, query: Handle<Query>) -> bool {
        self.begun.contains(&query)
    }

    /// Refuses a second Map of `resource` (nothing changes).
    pub(crate) fn check_map(&self, resource: Handle<Resource>) -> Result<()> {
        if self.mapped.iter().any(|(r, _)| *r == resource) {
            return Err(AppError::InvalidState.into());
        }
        Ok(())
    }

    /// Notes the Map of `resource`, after [`MappedAndBegun::check_map`] passed.
    pub(crate) fn map(&mut self, resource: Handle<Resource>, memory: M) {
        debug_assert!(self.check_map(resource).is_ok());
        self.mapped.push((resource, memory));
    }

    /// The memory of every open Map.
    pub(crate) fn maps(&self) -> impl Iterator<Item = &M> {
        self.mapped.iter().map(|(_, m)| m)
    }

    /// The memory of the Map noted last ([`MappedAndBegun::map`]), an application error if
    /// none is open: a Map's route hands out the memory it just noted without looking for it.
    #[inline]
    pub(crate) fn last_mapped_mut(&mut self) -> Result<&mut M> {
        self.mapped
            .last_mut()
            .map(|(_, m)| m)
            .ok_or_else(|| AppError::InvalidState.into())
    }

    /// Where the open Map of `resource` is, for [`MappedAndBegun::mapped_at`] and
    /// [`MappedAndBegun::unmap_at`], or an application error if it is not mapped here: an
    /// Unmap finds its Map once.
    #[inline]
    pub(crate) fn find_mapped(&self, resource: Handle<Resource>) -> Result<usize> {
        self.mapped
            .iter()
            .position(|(r, _)| *r == resource)
            .ok_or_else(|| AppError::InvalidState.into())
    }

    /// The memory of the open Map at `at` ([`MappedAndBegun::find_mapped`]).
    #[inline]
    pub(crate) fn mapped_at(&self, at: usize) -> &M {
        &self.mapped[at].1
    }

    /// Ends the open Map at `at` ([`MappedAndBegun::find_mapped`], nothing mapped or
    /// unmapped since), giving its memory back.
    #[inline]
    pub(crate) fn unmap_at(&mut self, at: usize) -> M {
        self.mapped.swap_remove(at).1
    }

    /// Ends the Map of `resource`, giving its memory back, or an application error if it is
    /// not mapped here.
    pub(crate) fn unmap(&mut self, resource: Handle<Resource>) -> Result<M> {
        let i = self
            .mapped
            .iter()
            .position(|(r, _)| *r == resource)
            .ok_or(AppError::InvalidState)?;
        Ok(self.mapped.swap_remove(i).1)
    }

    /// Refuses a Begin of a query already begun (an End is always accepted).
    pub(crate) fn check_query(&self, query: Handle<Query>, begin: bool) -> Result<()> {
        if begin && self.begun.contains(&query) {
            return Err(AppError::InvalidState.into());
        }
        Ok(())
    }

    /// Notes a Begin or End of `query`, after [`MappedAndBegun::check_query`] passed.
    pub(crate) fn query(&mut self, query: Handle<Query>, begin: bool) {
        let begun = self.begun.iter().position(|q| *q == query);
        match (begin, begun) {
            (true, _) => self.begun.push(query),
            (false, Some(i)) => {
                self.begun.swap_remove(i);
            }
            (false, None) => {}
        }
    }

    /// Refuses to execute here a command list that maps `maps` or begins or ends `queries`
    /// while one of them is mapped or begun here (R-C4).
    ///
    /// `maps` and `queries` are a list's sorted sets (`Recording::maps`, `queries`): each of
    /// this context's open maps and begun queries is looked up by binary search, so the
    /// check costs what the context has open, not what the list holds.
    #[inline]
    pub(crate) fn check_list(
        &self,
        maps: &[Handle<Resource>],
        queries: &[Handle<Query>],
    ) -> Result<()> {
        if self
            .mapped
            .iter()
            .any(|(m, _)| maps.binary_search(m).is_ok())
        {
            return Err(AppError::MapConflict.into());
        }
        if self.begun.iter().any(|q| queries.binary_search(q).is_ok()) {
            return Err(AppError::QueryConflict.into());
        }
        Ok(())
    }

    /// Takes one still-begun query, to end it (Finish ends them all, R-C4).
    pub(crate) fn pop_begun(&mut self) -> Option<Handle<Query>> {
        self.begun.pop()
    }

    /// Takes one still-open Map, to unmap it.
    pub(crate) fn pop_mapped(&mut self) -> Option<(Handle<Resource>, M)> {
        self.mapped.pop()
    }

    /// Forgets every Map and Begin (the recording they belonged to is gone).
    pub(crate) fn clear(&mut self) {
        self.mapped.clear();
        self.begun.clear();
    }
}
