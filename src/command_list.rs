//! A finished recording: `Send + Sync`, executable on the immediate context any number of
//! times (CommandListExecute, R-C3), destroyed by dropping it, on any thread (R-R4, R-R7).
//!
//! # Lifecycle
//! recording (on a [`crate::DeferredContext`]) -> closed (Finish returns the list, R-C1) ->
//! executed any number of times -> destroyed (dropped). A list holds every object it names
//! (the holds its context-local handles had), so an object the application destroys after
//! recording it stays usable by the list and is really destroyed after the list is (as
//! D3D's references keep it); the list's Map(DISCARD) data and update payloads live in its
//! own arena and replay the same every time.

use crossbeam_epoch as epoch;

use crate::device::Device;
use crate::driver::{Driver, ListMemory};
use crate::handle::AnyHandle;
use crate::kernel::Kernel;
use crate::record::Recording;

/// What a command list is made of.
pub(crate) struct ListBody<D: Driver> {
    pub(crate) rec: Recording<D::Command>,
    /// Objects the list holds (R-H2: their immediate-context handles outlive it).
    pub(crate) held: Vec<AnyHandle>,
    /// The immediate-context command-list handle's memory (R-R2).
    pub(crate) private: Box<[u8]>,
    /// The deferred context's context-local command-list handle's memory (R-R2).
    pub(crate) local: Box<[u8]>,
}

impl<D: Driver> ListBody<D> {
    fn memory(&mut self) -> ListMemory<'_> {
        ListMemory {
            private: &mut self.private,
            local: &mut self.local,
        }
    }
}

/// A command list. See the module docs. Dropping it is DestroyCommandList (free-threaded).
pub struct CommandList<D: Driver, K: Kernel> {
    pub(crate) device: Device<D, K>,
    pub(crate) body: ListBody<D>,
}

/// What a command list holds, for diagnostics and memory accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListStats {
    /// Recorded operations.
    pub operations: usize,
    /// Objects the list holds.
    pub objects: usize,
    /// Payload bytes recorded.
    pub payload_bytes: usize,
    /// Bytes of memory the list keeps (capacities, arena chunks, handle memory).
    pub retained_bytes: usize,
}

impl<D: Driver, K: Kernel> CommandList<D, K> {
    /// What the list holds.
    pub fn stats(&self) -> ListStats {
        let b = &self.body;
        ListStats {
            operations: b.rec.ops.len(),
            objects: b.held.len(),
            payload_bytes: b.rec.payload_bytes,
            retained_bytes: b.rec.retained_bytes()
                + b.held.capacity() * core::mem::size_of::<AnyHandle>()
                + b.private.len()
                + b.local.len(),
        }
    }

    /// The device the list belongs to.
    pub fn device(&self) -> &Device<D, K> {
        &self.device
    }
}

impl<D: Driver, K: Kernel> Drop for CommandList<D, K> {
    fn drop(&mut self) {
        let s = &*self.device.shared;
        s.driver.destroy_command_list(self.body.memory());
        let guard = epoch::pin();
        for handle in self.body.held.drain(..) {
            // After device destruction the objects are gone already: nothing to release.
            if let Ok(entry) = s.registry.find_linked(handle, &guard) {
                entry.release();
            }
        }
    }
}
