//! CPU access on a deferred context (R-M1, R-M2, R-M3): Map(DISCARD), Map(NO_OVERWRITE) after
//! a discard of the same resource in the recording, and Unmap, in every list mode.

use scopeguard::ScopeGuard;

use super::{Calls, DeferredContext};
use crate::bind::StateView;
use crate::cls::local_handles::LocalHandles;
use crate::driver::{DeferredCall, Driver};
use crate::error::{Error, Result};
use crate::handle::{Handle, Resource};
use crate::kernel::Kernel;
use crate::lists::record::{note_in_set, Payload, Recorded, OPERATION_BYTES};

/// Where the contents written through a deferred context's open Map(DISCARD) go.
#[derive(Clone, Copy, Debug)]
pub(super) enum MapMemory {
    /// The recording's arena, replayed with the list.
    Arena(Payload),
    /// The driver's memory, of this many bytes
    /// ([`ListMode::DriverBuilt`](crate::ListMode::DriverBuilt)).
    Driver(usize),
}

impl<D: Driver, K: Kernel> DeferredContext<D, K> {
    /// Map(DISCARD) of a dynamic resource (any other is an application error): memory for
    /// the resource's new contents, to write until [`DeferredContext::unmap`]. Where the
    /// engine replays lists the bytes are zeroed and live in the recording's arena, replayed
    /// with the list every time it is executed; where the driver builds its lists they are
    /// the driver's ([`Driver::map_discard_deferred`]), as the DDI's ResourceMap on a
    /// deferred context returns the driver's pointer.
    pub fn map_discard(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        if self.calls == Calls::Removed {
            return self.scratch_map(resource);
        }
        let _recording = self.trace_recording();
        let result = self.map(resource);
        match self.settle(result) {
            // SAFETY: the payload was just allocated in this recording's arena, which is not
            // reset while `&mut self` is borrowed by the result, and nothing else refers to
            // these bytes until the unmap records them.
            Ok(MapMemory::Arena(payload)) => Ok(unsafe { self.rec.payloads.bytes_mut(payload) }),
            Ok(MapMemory::Driver(len)) => self.map_with_driver(resource, len),
            Err(_) if self.calls == Calls::Removed => self.scratch_map(resource),
            Err(e) => Err(e),
        }
    }

    /// The driver's memory for a Map(DISCARD) the engine noted already
    /// ([`ListMode::DriverBuilt`](crate::ListMode::DriverBuilt)); a refusal ends the Map and is
    /// settled as any failed call.
    fn map_with_driver(&mut self, resource: Handle<Resource>, len: usize) -> Result<&mut [u8]> {
        let s = &*self.device.shared;
        let mut answer: Result<*mut [u8]> = Err(Error::OutOfMemory);
        // The driver made its Map but handed out memory of another length.
        let mut wrong_length = false;
        if let Ok(Some(dc)) = self.dc.for_hooks() {
            let mut locals = LocalHandles::new(&mut self.cls, StateView::of(&self.bindings));
            // Guarded: a hook that panics ends the Map, as a refusal does.
            let open = &mut self.open;
            let unmapped = scopeguard::guard_on_unwind((), |()| {
                let _ = open.unmap(resource);
            });
            answer = s
                .driver()
                .map_discard_deferred(dc, resource, len, &mut locals)
                .map(|bytes| bytes as *mut [u8])
                // Memory of another length than the resource's new contents is the driver's
                // error (R-E1): the application writes exactly `len` bytes in every mode.
                .and_then(|bytes| match bytes.len() == len {
                    true => Ok(bytes),
                    false => {
                        wrong_length = true;
                        Err(Error::InvalidArg)
                    }
                });
            ScopeGuard::into_inner(unmapped);
        }
        match answer {
            Ok(bytes) => {
                // Counted once the driver handed the memory out (a refused Map counts
                // nothing).
                self.rec.payload_bytes += len;
                // SAFETY: the bytes are borrowed from the driver's state of this context
                // (`self.dc`), which the returned borrow of `&mut self` keeps alive and
                // untouched; the pointer was made from that borrow just above, and since
                // then only another field (the recording's byte count) was written.
                Ok(unsafe { &mut *bytes })
            }
            Err(e) => {
                let _ = self.open.unmap(resource);
                let result = self.settle(Err(e));
                if wrong_length {
                    // The driver holds a Map the engine refused, and no call tells it so:
                    // its recording is dropped (AbandonCommandList) by a local removal, and
                    // Finish reports the lost recording (R-E3).
                    self.remove_locally();
                    return result;
                }
                match result {
                    Err(_) if self.calls == Calls::Removed => self.scratch_map(resource),
                    other => other,
                }
            }
        }
    }

    /// What a removed context's Map hands out (R-E3: the call is accepted and records
    /// nothing): scratch bytes, allocated fallibly (a resource too big for memory is out of
    /// memory, not an abort).
    fn scratch_map(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        // A resource bigger than the address space (a 32-bit process and a 4 GiB buffer) is
        // out of memory, never a scratch of its size truncated to `usize`.
        let size = usize::try_from(self.resource_size(resource).unwrap_or(0))
            .map_err(|_| Error::OutOfMemory)?;
        self.sink.clear();
        self.sink
            .try_reserve_exact(size)
            .map_err(|_| Error::OutOfMemory)?;
        self.sink.resize(size, 0);
        Ok(&mut self.sink)
    }

    /// Checks and notes a Map(DISCARD): the arena's zeroed bytes where the engine replays
    /// lists (the driver hears the Map), nothing where the driver hands out the memory.
    fn map(&mut self, resource: Handle<Resource>) -> Result<MapMemory> {
        self.check_alive()?;
        self.open.check_map(resource)?;
        let mut guard = None;
        let (size, open) = self.with_live(resource, &mut guard, |view| view.discard_len())?;
        self.reserve(OPERATION_BYTES.saturating_add(size))?;
        self.use_checked(resource.any(), open, &mut guard)?;
        drop(guard);
        if !self.replays {
            // The driver's Map comes next (`map_with_driver`), which counts the bytes.
            self.open.map(resource, MapMemory::Driver(size));
            return Ok(MapMemory::Driver(size));
        }
        // Allocated before the driver hears the Map, as an update's copy is.
        let payload = self.rec.payloads.zeroed(size)?;
        self.rec.payload_bytes += size;
        self.hear(DeferredCall::MapDiscard {
            resource,
            len: size,
        })?;
        self.open.map(resource, MapMemory::Arena(payload));
        Ok(MapMemory::Arena(payload))
    }

    /// Unmap: records the contents written since [`DeferredContext::map_discard`].
    pub fn unmap(&mut self, resource: Handle<Resource>) -> Result<()> {
        self.record(|dc| {
            let memory = *dc.open.mapped(resource)?;
            dc.record_unmap(resource, memory)?;
            // Ended once heard: a refused (or panicking) Unmap leaves the resource mapped.
            dc.open.unmap(resource).map(|_| ())
        })
    }

    /// Records an Unmap: the driver hears it, with the contents where the engine kept them.
    /// The Map stays open here: the caller ends it once this succeeds, so that a refusal (or
    /// a panicking hook) leaves the resource mapped. The Map reserved the operation's bytes
    /// already.
    #[inline]
    pub(super) fn record_unmap(
        &mut self,
        resource: Handle<Resource>,
        memory: MapMemory,
    ) -> Result<()> {
        let s = &*self.device.shared;
        if let Some(dc) = self.dc.for_hooks()? {
            let data = match memory {
                // SAFETY: the payload comes from this recording's arena, not reset since
                // the Map; the application's borrow of its bytes ended with the Map's.
                MapMemory::Arena(payload) => Some(unsafe { self.rec.payloads.bytes(payload) }),
                MapMemory::Driver(_) => None,
            };
            let mut locals = LocalHandles::new(&mut self.cls, StateView::of(&self.bindings));
            let call = DeferredCall::Unmap { resource, data };
            s.driver().record_deferred(dc, call, &mut locals)?;
        }
        note_in_set(&mut self.rec.maps, resource);
        match memory {
            MapMemory::Arena(payload) => {
                self.push_op(Recorded::WriteDiscard { resource, payload });
            }
            MapMemory::Driver(_) => self.rec.operations += 1,
        }
        Ok(())
    }
}
