//! A deferred context's pool of command-list memory: the one owner of a list's memory
//! between its drop and its next use (R-R1, R-R4..R-R7, R-A1, R-A2).
//!
//! - The **inbox** ([`Home`]): the lock-free list any thread pushes a recycle-destroyed list
//!   onto (`CommandList`'s drop); closed when the context goes.
//! - **Waiting**: destroyed lists whose executing buffer has not passed the list clock
//!   ([`crate::lists::list_clock::ListClock`]) yet: a real driver's buffer may still read them.
//! - The **cache**: lists recycled into the context (RecycleCommandList, R-R5), ready for
//!   RecycleCreateCommandList (R-R6) at a later Finish.
//! - The **watermark**: the largest lists made since the last trim, down to which a trim
//!   shrinks the cache (R-A1: no memory kept beyond recent need, no shrinking at steady load).
//!   A trim that finds no list made since the one before (two in a row: the application's
//!   own trim just before the one amortised processing asked for) keeps the need of the last
//!   window that made lists: an empty window says nothing of what the next lists need.
//!
//! Everything here runs on the context's thread but the inbox's pushes.

use std::sync::Arc;

use crossbeam_utils::CachePadded;
use scopeguard::ScopeGuard;

use crate::context::command_list::{release, Home, ListNode, ListState, Watermark};
use crate::driver::Driver;
use crate::kernel::Kernel;
use crate::lists::recycle::DropStack;

/// Puts a destroyed list whose buffer passed the clock into the cache, its recording
/// cleared, then calls `recycle` (RecycleCommandList, R-R5) on it there.
#[inline(always)]
#[allow(clippy::vec_box)]
fn cache_and_recycle<D: Driver, K: Kernel>(
    cache: &mut Vec<Box<ListNode<D, K>>>,
    mut node: Box<ListNode<D, K>>,
    recycle: &mut impl FnMut(&mut ListNode<D, K>),
) {
    if node.value.state != ListState::Emulated {
        node.value.state = ListState::Cached;
    }
    node.value.body.rec.clear();
    cache.push(node);
    recycle(cache.last_mut().expect("pushed just above"));
}

/// A deferred context's pool of list memory. See the module docs.
pub(crate) struct ListPool<D: Driver, K: Kernel> {
    /// Shared with the context's lists: the inbox of destroyed ones. Padded: written by
    /// whichever thread drops a list, so two contexts' inboxes must not share a line.
    home: Arc<CachePadded<Home<D, K>>>,
    /// Destroyed lists whose executing buffer has not passed the list clock. Boxed: nodes
    /// move between the inbox and these vectors by pointer, never copied.
    #[allow(clippy::vec_box)]
    waiting: Vec<Box<ListNode<D, K>>>,
    /// Recycled lists, ready to be made valid again.
    #[allow(clippy::vec_box)]
    cache: Vec<Box<ListNode<D, K>>>,
    /// Lists made since the last trim, and the largest contents among them.
    made_since_trim: usize,
    watermark: Watermark,
    /// The need of the last window (between two trims) that made lists.
    last_need: (usize, Watermark),
}

impl<D: Driver, K: Kernel> ListPool<D, K> {
    pub(crate) fn new() -> Self {
        ListPool {
            home: Arc::new(CachePadded::new(Home {
                destroyed: DropStack::new(),
            })),
            waiting: Vec::new(),
            cache: Vec::new(),
            made_since_trim: 0,
            watermark: Watermark::default(),
            last_need: (0, Watermark::default()),
        }
    }

    /// The inbox a new list is attached to.
    pub(crate) fn home(&self) -> &Arc<CachePadded<Home<D, K>>> {
        &self.home
    }

    /// R-R5, at Finish: takes the whole inbox at once and recycles every list whose buffer
    /// passed the clock into the cache, calling `recycle` (RecycleCommandList) for each; the
    /// rest wait. A list is in the cache before its hook runs, so it ends there even if the
    /// hook panics; the lists of the inbox not reached by then wait, never dropped without
    /// their hooks.
    ///
    /// The lists that waited at earlier Finishes are looked at first; those of the inbox
    /// go from it to the cache directly (the steady state: the list dropped since the last
    /// Finish, whose buffer was flushed), not through the waiting vector.
    #[inline(always)]
    pub(crate) fn take_destroyed(&mut self, mut recycle: impl FnMut(&mut ListNode<D, K>)) {
        let mut i = 0;
        while i < self.waiting.len() {
            if self.waiting[i].value.in_flight() {
                i += 1;
                continue;
            }
            let node = self.waiting.swap_remove(i);
            cache_and_recycle(&mut self.cache, node, &mut recycle);
        }
        // Whatever the loop leaves (nothing, unless a hook panics) waits.
        let mut taken = scopeguard::guard(
            (self.home.destroyed.take_all(), &mut self.waiting),
            |(rest, waiting)| waiting.extend(rest),
        );
        let (inbox, waiting) = &mut *taken;
        for node in inbox {
            if node.value.in_flight() {
                waiting.push(node);
            } else {
                cache_and_recycle(&mut self.cache, node, &mut recycle);
            }
        }
        // The loop took the whole inbox: the guard has nothing to hand on (no call to it).
        drop(ScopeGuard::into_inner(taken));
    }

    /// A recycled list, if one is ready.
    pub(crate) fn pop_cached(&mut self) -> Option<Box<ListNode<D, K>>> {
        self.cache.pop()
    }

    /// A list was made (finished) from this pool's context: it counts toward the watermark.
    pub(crate) fn made(&mut self, node: &ListNode<D, K>) {
        self.made_since_trim += 1;
        self.watermark.note(&node.value.body);
    }

    /// Trims down to the high watermark (R-A1, R-A2): recycled lists beyond what was made
    /// since the last trim are ended, the others shrunk to the largest recent contents; or,
    /// where no list was made since, to the last window's that made some. Answers whether
    /// lists were made since the last trim.
    pub(crate) fn trim(&mut self) -> bool {
        let made = self.made_since_trim != 0;
        if made {
            self.last_need = (self.made_since_trim, self.watermark);
        }
        let (count, watermark) = self.last_need;
        let keep = count.max(1);
        while self.cache.len() > keep {
            if let Some(node) = self.cache.pop() {
                release(node);
            }
        }
        for node in &mut self.cache {
            node.value.body.shrink_to(&watermark);
        }
        self.made_since_trim = 0;
        self.watermark = Watermark::default();
        made
    }

    /// The context is going: closes the inbox (later drops end their lists themselves) and
    /// hands over every list the pool holds.
    #[allow(clippy::vec_box)]
    pub(crate) fn close(&mut self) -> Vec<Box<ListNode<D, K>>> {
        let mut lists: Vec<Box<ListNode<D, K>>> = self.home.destroyed.close().collect();
        lists.append(&mut self.cache);
        lists.append(&mut self.waiting);
        lists
    }

    /// Recycled lists ready for reuse.
    pub(crate) fn cached(&self) -> usize {
        self.cache.len()
    }

    /// Destroyed lists waiting for the list clock.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Memory the pool's lists keep.
    pub(crate) fn retained_bytes(&self) -> usize {
        self.cache
            .iter()
            .chain(self.waiting.iter())
            .map(|n| n.value.body.retained_bytes())
            .sum()
    }
}
