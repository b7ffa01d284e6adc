//! What a deferred-context hook reaches of the recording's context-local handles: see
//! [`LocalHandles`].

use crate::bind::StateView;
use crate::cls::ClsTable;
use crate::driver::Driver;
use crate::handle::AnyHandle;
use crate::registry::ObjectView;

/// The context-local handles open in a deferred context's recording, as a hook on that
/// context's thread reaches them ([`Driver::record_deferred`],
/// [`Driver::map_discard_deferred`]): every object the call names is open by then (its
/// dependencies too, R-H3), each with its context-local memory, writable and this
/// context's alone, and its immediate-context object, read-only: the shared part of R-L3.
///
/// Found by handle in O(1), without hashing. Nothing here touches another context's data or
/// the immediate context's, so the hook runs without contention.
pub struct LocalHandles<'a, D: Driver> {
    table: &'a mut ClsTable<D>,
    state: StateView<'a>,
}

/// One open context-local handle: see [`LocalHandles::get`].
pub struct LocalHandle<'a, D: Driver> {
    /// The object (its shared, read-only part: [`Driver::Object`], allocation, description).
    pub view: ObjectView<'a, D>,
    /// Its context-local memory in this context: the block [`Driver::open_local`] filled,
    /// of the size the driver answered (R-H4).
    pub local: &'a mut [u8],
}

/// How many handles are open; not their memory.
impl<D: Driver> std::fmt::Debug for LocalHandles<'_, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalHandles")
            .field("open", &self.open())
            .finish_non_exhaustive()
    }
}

/// The object and the length of its context-local memory; not its bytes.
impl<D: Driver> std::fmt::Debug for LocalHandle<'_, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalHandle")
            .field("view", &self.view)
            .field("local_len", &self.local.len())
            .finish()
    }
}

impl<'a, D: Driver> LocalHandles<'a, D> {
    pub(crate) fn new(table: &'a mut ClsTable<D>, state: StateView<'a>) -> Self {
        LocalHandles { table, state }
    }

    /// The open context-local handle of `handle` in this recording, or `None` if the
    /// recording has not named it (or the context emulates command lists, where handles
    /// have no memory).
    #[inline]
    pub fn get(&mut self, handle: AnyHandle) -> Option<LocalHandle<'_, D>> {
        let (view, local) = self.table.local(handle)?;
        Some(LocalHandle { view, local })
    }

    /// How many context-local handles the recording has open.
    pub fn open(&self) -> usize {
        self.table.len()
    }

    /// The state-refresh query (R-C1): the recording's bindings as this call leaves them (a
    /// bind's new binding included, as the protocol's state-refresh answers during SetX).
    pub fn state(&self) -> StateView<'a> {
        self.state
    }
}
