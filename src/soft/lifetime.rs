//! Lifetimes the soft driver checks: every driver object, deferred-context state and
//! command list's memory it hands out must end exactly once (R-D1, R-D3, R-R4, R-R5, R-R6).
//!
//! - **Objects**: created by [`crate::Driver::create_object`], ended by one
//!   [`crate::Driver::destroy_object`]. A second destroy is a `double-destroy` violation; an
//!   object never destroyed is a leak once the device is destroyed (R-D3).
//! - **Deferred-context states**: created by [`crate::Driver::create_deferred_context`],
//!   ended by [`crate::Driver::destroy_deferred_context`]. A state never destroyed is a leak
//!   (its Rust value may have been dropped without the hook, e.g. during an unwind).
//! - **Command-list memory** (R-R4..R-R6), as a state machine per list:
//!   `create_command_list` makes it *live*; `recycle_destroy_command_list` makes it
//!   *recycle-destroyed* (the light destroy: the memory is not released yet, R-R4);
//!   `recycle_command_list` puts it in a context's cache (R-R5);
//!   `recycle_create_command_list` from that context's cache makes it live again (R-R6).
//!   It ends with `destroy_command_list` (from *live*, or from *recycle-destroyed* when its
//!   context went away before taking it into its cache; never from a cache), or with
//!   `destroy_deferred_context` of the context whose cache holds it. A list that is live or recycle-destroyed when the device is destroyed
//!   never got its memory back: a leak.
//!
//! The checks run while the world records its trace ([`crate::soft::SoftConfig::trace`]):
//! without it the destroy hook takes no lock at all (benches), so nothing could be
//! checked consistently.

use std::collections::{HashMap, HashSet};

use super::world::{SoftWorld, State, Violation};
use crate::kernel::DeferredId;

/// Where a command list's memory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListState {
    /// Created or recycle-created: a valid list (R-R8).
    Live,
    /// Light-destroyed: the memory is kept for its context's next Finish (R-R4).
    RecycleDestroyed,
    /// In this context's cache (R-R5).
    Cached(DeferredId),
}

/// The lifetimes of what the soft driver handed out.
#[derive(Debug, Default)]
pub(crate) struct Lifetimes {
    objects: HashSet<u64>,
    destroyed_objects: HashSet<u64>,
    /// Live driver states per deferred-context id (a context's state is destroyed and
    /// created again when it cannot be recycled).
    contexts: HashMap<DeferredId, usize>,
    lists: HashMap<u64, ListState>,
    ended_lists: HashSet<u64>,
}

impl Lifetimes {
    pub(crate) fn object_created(s: &mut State, id: u64) {
        s.lifetimes.objects.insert(id);
    }

    pub(crate) fn object_destroyed(s: &mut State, id: u64) {
        if s.lifetimes.objects.remove(&id) {
            s.lifetimes.destroyed_objects.insert(id);
        } else if s.lifetimes.destroyed_objects.contains(&id) {
            let what = format!("object {id} destroyed twice (destroy_object)");
            SoftWorld::violate(s, "double-destroy", what);
        } else {
            let what = format!("object {id} destroyed but never created");
            SoftWorld::violate(s, "unknown-destroy", what);
        }
    }

    pub(crate) fn context_created(s: &mut State, id: DeferredId) {
        *s.lifetimes.contexts.entry(id).or_default() += 1;
    }

    /// A context's state is destroyed, and with it the lists in its cache (R-R5).
    pub(crate) fn context_destroyed(s: &mut State, id: DeferredId) {
        match s.lifetimes.contexts.get_mut(&id) {
            Some(n) if *n > 0 => *n -= 1,
            _ => {
                let what = format!("state of context {id} destroyed but never created");
                SoftWorld::violate(s, "unknown-destroy", what);
            }
        }
        let lifetimes = &mut s.lifetimes;
        let cached: Vec<u64> = lifetimes
            .lists
            .iter()
            .filter(|(_, state)| **state == ListState::Cached(id))
            .map(|(list, _)| *list)
            .collect();
        for list in cached {
            lifetimes.lists.remove(&list);
            lifetimes.ended_lists.insert(list);
        }
    }

    pub(crate) fn list_created(s: &mut State, id: u64) {
        s.lifetimes.lists.insert(id, ListState::Live);
    }

    /// Moves list `id` from `from` to `to` (`None`: its memory is released); anything else is
    /// a violation of `rule`.
    fn list_step(
        s: &mut State,
        id: u64,
        hook: &str,
        from: ListState,
        to: Option<ListState>,
        rule: &'static str,
    ) {
        let lifetimes = &mut s.lifetimes;
        match lifetimes.lists.get(&id).copied() {
            Some(state) if state == from => match to {
                Some(to) => {
                    lifetimes.lists.insert(id, to);
                }
                None => {
                    lifetimes.lists.remove(&id);
                    lifetimes.ended_lists.insert(id);
                }
            },
            Some(state) => {
                let what = format!("{hook} of list {id} while {state:?}, not {from:?}");
                SoftWorld::violate(s, rule, what);
            }
            None if lifetimes.ended_lists.contains(&id) => {
                let what = format!("{hook} of list {id} after its memory was released");
                SoftWorld::violate(s, rule, what);
            }
            None => {
                let what = format!("{hook} of list {id}, never created");
                SoftWorld::violate(s, rule, what);
            }
        }
    }

    /// DestroyCommandList: a live list, or a light-destroyed one whose context went away
    /// before its next Finish could take it into its cache (R-R4). A list in a cache ends
    /// with its context, so a destroy then is a second destroy.
    pub(crate) fn list_destroyed(s: &mut State, id: u64) {
        let lifetimes = &s.lifetimes;
        let (rule, from) = match lifetimes.lists.get(&id) {
            None if !lifetimes.ended_lists.contains(&id) => ("unknown-destroy", ListState::Live),
            Some(ListState::RecycleDestroyed) => ("double-destroy", ListState::RecycleDestroyed),
            _ => ("double-destroy", ListState::Live),
        };
        Self::list_step(s, id, "destroy_command_list", from, None, rule);
    }

    /// CommandListExecute, on the immediate context or a deferred one: only a live list, from
    /// its (recycle-)create to its (recycle-)destroy, may be executed (R-R8).
    pub(crate) fn list_executed(s: &mut State, id: u64, hook: &str) {
        let live = Some(ListState::Live);
        Self::list_step(s, id, hook, ListState::Live, live, "R-R8");
    }

    pub(crate) fn list_recycle_destroyed(s: &mut State, id: u64) {
        let (from, to) = (ListState::Live, Some(ListState::RecycleDestroyed));
        Self::list_step(s, id, "recycle_destroy_command_list", from, to, "R-R4");
    }

    pub(crate) fn list_recycled(s: &mut State, id: u64, context: DeferredId) {
        let (from, to) = (
            ListState::RecycleDestroyed,
            Some(ListState::Cached(context)),
        );
        Self::list_step(s, id, "recycle_command_list", from, to, "R-R5");
    }

    pub(crate) fn list_recycle_created(s: &mut State, id: u64, context: DeferredId) {
        let (from, to) = (ListState::Cached(context), Some(ListState::Live));
        Self::list_step(s, id, "recycle_create_command_list", from, to, "R-R6");
    }

    /// One leak per object, context state and list memory still held (after device
    /// destruction, R-D3).
    pub(crate) fn leaks(&self, out: &mut Vec<Violation>) {
        let mut objects: Vec<u64> = self.objects.iter().copied().collect();
        objects.sort_unstable();
        for id in objects {
            out.push(Violation {
                rule: "R-D3",
                what: format!("object {id} never destroyed (leak)"),
            });
        }
        let mut contexts: Vec<(DeferredId, usize)> = self
            .contexts
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(id, n)| (*id, *n))
            .collect();
        contexts.sort_unstable();
        for (id, n) in contexts {
            out.push(Violation {
                rule: "R-D3",
                what: format!("{n} state(s) of context {id} never destroyed (leak)"),
            });
        }
        // A list in a context's cache ends with that context's state, whose leak is above.
        let mut lists: Vec<(u64, ListState)> = self
            .lists
            .iter()
            .filter(|(_, state)| !matches!(state, ListState::Cached(_)))
            .map(|(id, state)| (*id, *state))
            .collect();
        lists.sort_unstable_by_key(|(id, _)| *id);
        for (id, state) in lists {
            out.push(Violation {
                rule: "R-R4",
                what: format!("memory of list {id} never released, left {state:?} (leak)"),
            });
        }
    }

    /// Ids of the objects created and not destroyed yet, ascending.
    pub(crate) fn live_objects(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.objects.iter().copied().collect();
        ids.sort_unstable();
        ids
    }
}

impl SoftWorld {
    /// Ids of the driver objects created and not destroyed yet, ascending (while the trace is
    /// recorded; see [`crate::soft::SoftConfig::trace`]).
    pub fn live_objects(&self) -> Vec<u64> {
        self.lock().lifetimes.live_objects()
    }

    /// Ids of the kernel allocations allocated and not deallocated yet, ascending.
    pub fn live_allocation_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.lock().allocations.keys().copied().collect();
        ids.sort_unstable();
        ids
    }
}
