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
///
/// An application maps one resource at a time and unmaps it before the next: the open Map
/// is kept in a slot of its own (`first`), and only a second at once goes to a list. `first`
/// is empty only while `more` is, so the slot is the one place a lone open Map can be.
#[derive(Debug)]
pub(crate) struct MappedAndBegun<M> {
    first: Option<(Handle<Resource>, M)>,
    more: Vec<(Handle<Resource>, M)>,
    begun: Vec<Handle<Query>>,
}

impl<M> Default for MappedAndBegun<M> {
    fn default() -> Self {
        MappedAndBegun {
            first: None,
            more: Vec::new(),
            begun: Vec::new(),
        }
    }
}

impl<M> MappedAndBegun<M> {
    /// How many operations the open Maps and begun queries still owe: the Unmap of each
    /// Map and the End of each Begin, which Finish adds if the application does not (R-C4).
    pub(crate) fn owed(&self) -> usize {
        usize::from(self.first.is_some()) + self.more.len() + self.begun.len()
    }

    /// Whether `query` is begun.
    pub(crate) fn is_begun(&self, query: Handle<Query>) -> bool {
        self.begun.contains(&query)
    }

    /// Every open Map, the slot's first.
    fn mapped(&self) -> impl Iterator<Item = &(Handle<Resource>, M)> {
        self.first.iter().chain(&self.more)
    }

    /// The memory of every open Map.
    pub(crate) fn maps(&self) -> impl Iterator<Item = &M> {
        self.mapped().map(|(_, m)| m)
    }

    /// Refuses a second Map of `resource` (nothing changes).
    #[inline]
    pub(crate) fn check_map(&self, resource: Handle<Resource>) -> Result<()> {
        match &self.first {
            None => Ok(()),
            Some((r, _)) if *r == resource => Err(AppError::InvalidState.into()),
            Some(_) if self.more.iter().any(|(r, _)| *r == resource) => {
                Err(AppError::InvalidState.into())
            }
            Some(_) => Ok(()),
        }
    }

    /// Notes the Map of `resource`, after [`MappedAndBegun::check_map`] passed.
    #[inline]
    pub(crate) fn map(&mut self, resource: Handle<Resource>, memory: M) {
        debug_assert!(self.check_map(resource).is_ok());
        match self.first {
            None => self.first = Some((resource, memory)),
            Some(_) => self.more.push((resource, memory)),
        }
    }

    /// Where the open Map of `resource` is, for [`MappedAndBegun::mapped_at`] and
    /// [`MappedAndBegun::unmap_at`], or an application error if it is not mapped here: an
    /// Unmap finds its Map once. 0 is the slot, `i + 1` the list's `i`.
    #[inline]
    pub(crate) fn find_mapped(&self, resource: Handle<Resource>) -> Result<usize> {
        match &self.first {
            Some((r, _)) if *r == resource => Ok(0),
            Some(_) => self
                .more
                .iter()
                .position(|(r, _)| *r == resource)
                .map(|i| i + 1)
                .ok_or_else(|| AppError::InvalidState.into()),
            None => Err(AppError::InvalidState.into()),
        }
    }

    /// The memory of the open Map at `at` ([`MappedAndBegun::find_mapped`]).
    #[inline]
    pub(crate) fn mapped_at(&self, at: usize) -> &M {
        match (at, &self.first) {
            (0, Some((_, m))) => m,
            _ => &self.more[at - 1].1,
        }
    }

    /// Ends the open Map at `at` ([`MappedAndBegun::find_mapped`], nothing mapped or
    /// unmapped since), giving its memory back. The slot, emptied, takes the list's last.
    #[inline]
    pub(crate) fn unmap_at(&mut self, at: usize) -> M {
        if at == 0 {
            // Taken, not replaced by the list's last (which may be none): the lone Map's
            // end writes the slot's tag alone.
            let first = match self.more.pop() {
                None => self.first.take(),
                Some(last) => self.first.replace(last),
            };
            let (_, memory) = first.expect("find_mapped answered the slot, which holds a Map");
            return memory;
        }
        self.more.swap_remove(at - 1).1
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
        // Nothing in the slot, nothing open.
        if let Some((first, _)) = &self.first {
            if maps.binary_search(first).is_ok()
                || self.more.iter().any(|(m, _)| maps.binary_search(m).is_ok())
            {
                return Err(AppError::MapConflict.into());
            }
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
        match self.first {
            None => None,
            Some(_) => self.more.pop().or_else(|| self.first.take()),
        }
    }

    /// Forgets every Map and Begin (the recording they belonged to is gone).
    pub(crate) fn clear(&mut self) {
        self.first = None;
        self.more.clear();
        self.begun.clear();
    }
}

#[cfg(test)]
mod tests {
    use core::num::NonZeroU32;

    use super::*;
    use crate::error::Error;

    fn resource(slot: u32) -> Handle<Resource> {
        Handle::new(1, slot, NonZeroU32::MIN)
    }

    /// An Unmap's two steps, as both contexts take them.
    fn unmap(open: &mut MappedAndBegun<u32>, r: Handle<Resource>) -> Result<u32> {
        let at = open.find_mapped(r)?;
        Ok(open.unmap_at(at))
    }

    fn refused<T: core::fmt::Debug>(result: Result<T>) {
        assert_eq!(
            result.unwrap_err(),
            Error::Application(AppError::InvalidState),
            "R-C4: an application error"
        );
    }

    #[test]
    fn r_c4_a_lone_map_is_found_ended_and_refused_twice() {
        let mut open = MappedAndBegun::<u32>::default();
        let (a, b) = (resource(1), resource(2));
        refused(open.find_mapped(a));
        open.check_map(a).unwrap();
        open.map(a, 10);
        assert_eq!(open.owed(), 1);
        refused(open.check_map(a));
        open.check_map(b).unwrap();
        refused(open.find_mapped(b));
        let at = open.find_mapped(a).unwrap();
        assert_eq!(*open.mapped_at(at), 10);
        assert_eq!(open.unmap_at(at), 10);
        assert_eq!(open.owed(), 0);
        refused(unmap(&mut open, a));
        open.check_map(a).unwrap();
    }

    #[test]
    fn r_c4_maps_at_once_each_found_where_kept() {
        let mut open = MappedAndBegun::<u32>::default();
        let [a, b, c, d] = [1, 2, 3, 4].map(resource);
        open.map(a, 10);
        open.map(b, 20);
        open.map(c, 30);
        assert_eq!(open.owed(), 3);
        for (r, m) in [(a, 10), (b, 20), (c, 30)] {
            refused(open.check_map(r));
            assert_eq!(*open.mapped_at(open.find_mapped(r).unwrap()), m);
        }
        open.check_map(d).unwrap();
        refused(open.find_mapped(d));
        // The slot's Map ends first: the list's last takes the slot, the others stay found.
        assert_eq!(unmap(&mut open, a).unwrap(), 10);
        assert_eq!(open.owed(), 2);
        open.check_map(a).unwrap();
        assert_eq!(*open.mapped_at(open.find_mapped(b).unwrap()), 20);
        assert_eq!(*open.mapped_at(open.find_mapped(c).unwrap()), 30);
        open.map(d, 40);
        assert_eq!(unmap(&mut open, b).unwrap(), 20);
        assert_eq!(unmap(&mut open, d).unwrap(), 40);
        assert_eq!(unmap(&mut open, c).unwrap(), 30);
        assert_eq!(open.owed(), 0);
        refused(unmap(&mut open, c));
    }

    #[test]
    fn r_c4_every_open_map_is_seen_by_a_list_check_and_popped() {
        let mut open = MappedAndBegun::<u32>::default();
        let [a, b, c] = [1, 2, 3].map(resource);
        open.check_list(&[a, b, c], &[]).unwrap();
        open.map(a, 10);
        open.map(b, 20);
        assert_eq!(
            open.check_list(&[a], &[]).unwrap_err(),
            Error::Application(AppError::MapConflict)
        );
        assert_eq!(
            open.check_list(&[b, c], &[]).unwrap_err(),
            Error::Application(AppError::MapConflict)
        );
        open.check_list(&[c], &[]).unwrap();
        let mut maps: Vec<u32> = open.maps().copied().collect();
        maps.sort_unstable();
        assert_eq!(maps, [10, 20]);
        let mut popped = Vec::new();
        while let Some((r, m)) = open.pop_mapped() {
            popped.push((r, m));
        }
        popped.sort_unstable_by_key(|&(_, m)| m);
        assert_eq!(popped, [(a, 10), (b, 20)]);
        assert_eq!(open.owed(), 0);
        open.map(c, 30);
        open.map(a, 10);
        open.clear();
        assert_eq!(open.owed(), 0);
        open.check_map(c).unwrap();
        refused(open.find_mapped(a));
    }
}
