//! Walks through a command list and the lists it executes, nested at any depth (R-C3,
//! R-C4): with an explicit stack instead of recursion, so depth costs heap, never the
//! thread's stack. The stack's memory is kept between walks (steady state allocates
//! nothing); it holds no reference between them.
//!
//! Lists nest without cycles: a list can only execute lists finished before its own Finish.
//! A list executed twice is replayed twice; a visit by [`ListWalk::each`] can skip what it
//! has seen. Every walk is bounded by the replay it serves
//! ([`crate::DeviceConfig::replay_limit`]).

use core::ptr::NonNull;

use crate::context::command_list::ListData;
use crate::driver::Driver;
use crate::kernel::Kernel;
use crate::lists::record::Recorded;

/// One step of a replay, in execution order.
pub(crate) enum ReplayStep<'a, D: Driver, K: Kernel> {
    /// A list's operations begin (the walked list first, then each nested one in place).
    Enter(&'a ListData<D, K>),
    /// An operation of the innermost list entered.
    Op(&'a ListData<D, K>, &'a Recorded<D::Command>),
    /// A nested list's operations are over: the clear-state of its execute (R-C3). Not
    /// sent for the walked list itself.
    LeaveNested,
}

/// The kept stack of a walk. See the module docs.
pub(crate) struct ListWalk<D: Driver, K: Kernel> {
    /// The lists entered and not left, each with its next operation (replay) or nothing
    /// (`each`). Pointers into lists borrowed for the current walk only: cleared before
    /// each walk, never read across two.
    frames: Vec<(NonNull<ListData<D, K>>, usize)>,
}

// SAFETY: between walks `frames` is dead data (cleared before any use); during a walk it
// points into lists that are `Sync` and borrowed by the walker's caller.
unsafe impl<D: Driver, K: Kernel> Send for ListWalk<D, K> {}

impl<D: Driver, K: Kernel> Default for ListWalk<D, K> {
    fn default() -> Self {
        ListWalk { frames: Vec::new() }
    }
}

impl<D: Driver, K: Kernel> ListWalk<D, K> {
    /// Calls `each` on `root` and on the lists it executes, at any depth, until one fails:
    /// `each` answers whether to go on into the lists the one it got executes (`false`: that
    /// whole subtree is skipped, e.g. because it was visited already).
    #[inline]
    pub(crate) fn each<'a, E>(
        &mut self,
        root: &'a ListData<D, K>,
        mut each: impl FnMut(&'a ListData<D, K>) -> Result<bool, E>,
    ) -> Result<(), E> {
        if !each(root)? || root.body.rec.lists.is_empty() {
            return Ok(());
        }
        self.frames.clear();
        self.frames.push((NonNull::from(root), 0));
        while let Some((list, _)) = self.frames.pop() {
            // SAFETY: every frame was pushed in this walk from a `&'a ListData` (the root, or
            // a list owned by one such list, which keeps it alive while `root` is borrowed).
            let list: &'a ListData<D, K> = unsafe { list.as_ref() };
            for inner in &list.body.rec.lists {
                let inner = inner.get();
                if each(inner)? && !inner.body.rec.lists.is_empty() {
                    self.frames.push((NonNull::from(inner), 0));
                }
            }
        }
        Ok(())
    }

    /// Replays `root`: calls `visit` with each of its operations in order, entering each
    /// nested list in place of the operation that executes it ([`ReplayStep`]), until one
    /// fails.
    pub(crate) fn replay<'a, E>(
        &mut self,
        root: &'a ListData<D, K>,
        mut visit: impl FnMut(ReplayStep<'a, D, K>) -> Result<(), E>,
    ) -> Result<(), E> {
        visit(ReplayStep::Enter(root))?;
        self.frames.clear();
        self.frames.push((NonNull::from(root), 0));
        while let Some((list, next)) = self.frames.last_mut() {
            // SAFETY: as in `each`: pushed in this walk from a list borrowed for `'a`.
            let data: &'a ListData<D, K> = unsafe { list.as_ref() };
            let Some(op) = data.body.rec.ops.get(*next) else {
                self.frames.pop();
                if !self.frames.is_empty() {
                    visit(ReplayStep::LeaveNested)?;
                }
                continue;
            };
            *next += 1;
            if let Recorded::ExecuteList(index) = op {
                // The recording pushed the owner before the operation that names it.
                let inner = data.body.rec.lists[*index as usize].get();
                visit(ReplayStep::Enter(inner))?;
                self.frames.push((NonNull::from(inner), 0));
                continue;
            }
            visit(ReplayStep::Op(data, op))?;
        }
        Ok(())
    }
}
