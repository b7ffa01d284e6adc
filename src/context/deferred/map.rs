//! CPU access on a deferred context (R-M1, R-M2, R-M3): Map(DISCARD), Map(NO_OVERWRITE) after
//! a discard of the same resource in the recording, and Unmap, in every list mode.

use scopeguard::ScopeGuard;

use super::{Calls, DeferredContext};
use crate::bind::StateView;
use crate::cls::local_handles::LocalHandles;
use crate::driver::{DeferredCall, Driver};
use crate::error::{AppError, Error, Result};
use crate::handle::{Handle, Resource};
use crate::kernel::Kernel;
use crate::lists::record::{
    note_in_set, sort_set, Payload, Recorded, Ring, RingMemory, OPERATION_BYTES,
};
use crate::map_type::MapType;

/// Where the contents written through a deferred context's open Map go.
#[derive(Clone, Copy, Debug)]
pub(super) enum MapMemory {
    /// The recording's arena, replayed with the list.
    Arena(Payload),
    /// The driver's memory, of this many bytes
    /// ([`ListMode::DriverBuilt`](crate::ListMode::DriverBuilt)).
    Driver(usize),
}

/// An open Map on a deferred context: which Map it is, and where its bytes are (R-M1). One
/// level of variants, so that it is as small as [`MapMemory`].
#[derive(Clone, Copy, Debug)]
pub(super) enum OpenMap {
    /// Map(DISCARD) into the recording's arena: new contents, recorded at the Unmap.
    Discard(Payload),
    /// Map(DISCARD) into the driver's memory.
    DriverDiscard,
    /// Map(NO_OVERWRITE): the bytes of the resource's last discard in the recording again,
    /// written in place; its Unmap records nothing more (R-M2).
    NoOverwrite(Payload),
    /// Map(NO_OVERWRITE) into the driver's memory of the last discard.
    DriverNoOverwrite,
}

impl From<RingMemory> for MapMemory {
    fn from(memory: RingMemory) -> Self {
        match memory {
            RingMemory::Arena(payload) => MapMemory::Arena(payload),
            RingMemory::Driver(len) => MapMemory::Driver(len),
        }
    }
}

impl OpenMap {
    /// A Map(NO_OVERWRITE) of the discard's `memory`.
    fn again(memory: MapMemory) -> Self {
        match memory {
            MapMemory::Arena(payload) => OpenMap::NoOverwrite(payload),
            MapMemory::Driver(_) => OpenMap::DriverNoOverwrite,
        }
    }
}

impl<D: Driver, K: Kernel> DeferredContext<D, K> {
    /// Map(DISCARD) of a dynamic resource (any other is
    /// [`AppError::NotMappable`](crate::AppError::NotMappable)): memory for
    /// the resource's new contents, to write until [`DeferredContext::unmap`]. Where the
    /// engine replays lists the bytes are zeroed and live in the recording's arena, replayed
    /// with the list every time it is executed; where the driver builds its lists they are
    /// the driver's ([`Driver::map_discard_deferred`]), as the DDI's ResourceMap on a
    /// deferred context returns the driver's pointer.
    pub fn map_discard(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        #[cfg(feature = "capture")]
        if self.capture.is_some() {
            let ty = MapType::WriteDiscard;
            return self.captured_map(resource, ty, |dc| dc.map_discard_inner(resource));
        }
        self.map_discard_inner(resource)
    }

    fn map_discard_inner(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        if self.calls == Calls::Removed {
            return self.scratch_map(resource);
        }
        let _recording = self.trace_recording();
        let result = self.map_new(resource);
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
            Err(e) => self.driver_map_refused(resource, e, wrong_length),
        }
    }

    /// A Map the driver refused (`e`), or answered with memory of the wrong length: the Map
    /// ends and the failure is settled as any failed call's. Where the driver made its Map
    /// but the engine refused the memory, the driver holds a Map no call will end: its
    /// recording is dropped (AbandonCommandList) by a local removal, and Finish reports the
    /// lost recording (R-E3).
    #[cold]
    fn driver_map_refused(
        &mut self,
        resource: Handle<Resource>,
        e: Error,
        wrong_length: bool,
    ) -> Result<&mut [u8]> {
        let _ = self.open.unmap(resource);
        let result = self.settle(Err(e));
        if wrong_length {
            self.remove_locally();
            return result;
        }
        match result {
            Err(_) if self.calls == Calls::Removed => self.scratch_map(resource),
            other => other,
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
    fn map_new(&mut self, resource: Handle<Resource>) -> Result<MapMemory> {
        self.check_alive()?;
        self.open.check_map(resource)?;
        let mut guard = None;
        let (size, open) = self.with_live(resource, &mut guard, |view| view.discard_len())?;
        self.reserve(OPERATION_BYTES.saturating_add(size))?;
        self.use_checked(resource.any(), open, &mut guard)?;
        drop(guard);
        if !self.replays {
            // The driver's Map comes next (`map_with_driver`), which counts the bytes.
            self.open.map(resource, OpenMap::DriverDiscard);
            return Ok(MapMemory::Driver(size));
        }
        // Allocated before the driver hears the Map, as an update's copy is.
        let payload = self.rec.payloads.zeroed(size)?;
        self.rec.payload_bytes += size;
        self.hear(DeferredCall::MapDiscard {
            resource,
            len: size,
        })?;
        self.open.map(resource, OpenMap::Discard(payload));
        Ok(MapMemory::Arena(payload))
    }

    /// Map(NO_OVERWRITE) of a dynamic buffer (R-M1..R-M3), only after a
    /// [`DeferredContext::map_discard`] of it earlier in this recording (else
    /// [`AppError::MapWithoutDiscard`](crate::AppError::MapWithoutDiscard), nothing recorded
    /// and nothing heard): the bytes of that last discard, with what was written into them
    /// since, for the application to write more where the GPU does not read (a ring's next
    /// stretch), until [`DeferredContext::unmap`]. Executed, the list leaves the resource
    /// with that discard and every later NO_OVERWRITE write applied, in every list mode: the
    /// bytes are the discard's, replayed with it (or, where the driver builds its lists, the
    /// driver's memory of that discard, [`Driver::map_no_overwrite_deferred`]). It records
    /// no operation and counts nothing more against the budget.
    ///
    /// Refused ([`AppError::NotMappable`](crate::AppError::NotMappable)) on a texture, on a
    /// resource that is not dynamic, and on a buffer bound in a way the driver's
    /// [`crate::MapCaps`] leave out (R-M3); a second Map of a mapped resource is
    /// [`AppError::InvalidState`](crate::AppError::InvalidState), as for any Map (R-C4).
    pub fn map_no_overwrite(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        #[cfg(feature = "capture")]
        if self.capture.is_some() {
            let ty = MapType::WriteNoOverwrite;
            return self.captured_map(resource, ty, |dc| dc.map_no_overwrite_inner(resource));
        }
        self.map_no_overwrite_inner(resource)
    }

    fn map_no_overwrite_inner(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        if self.calls == Calls::Removed {
            return self.scratch_map(resource);
        }
        let _recording = self.trace_recording();
        let result = self.map_again(resource);
        match self.settle(result) {
            // SAFETY: the payload is the discard's, in this recording's arena, which is not
            // reset while `&mut self` is borrowed by the result. The operation that replays
            // it reads its bytes only once the recording is finished, after this borrow
            // ended, and the driver heard the discard's bytes for the length of a call.
            Ok(MapMemory::Arena(payload)) => Ok(unsafe { self.rec.payloads.bytes_mut(payload) }),
            Ok(MapMemory::Driver(len)) => self.map_again_with_driver(resource, len),
            Err(_) if self.calls == Calls::Removed => self.scratch_map(resource),
            Err(e) => Err(e),
        }
    }

    /// Map of `ty`, as a C shim's ResourceMap passes it: [`DeferredContext::map_discard`] or
    /// [`DeferredContext::map_no_overwrite`]; READ, WRITE and READ_WRITE are refused
    /// ([`AppError::NotMappable`](crate::AppError::NotMappable), R-M1), nothing recorded and
    /// nothing heard, and so is a Map of a removed context's.
    pub fn map(&mut self, resource: Handle<Resource>, ty: MapType) -> Result<&mut [u8]> {
        match ty {
            MapType::WriteDiscard => self.map_discard(resource),
            MapType::WriteNoOverwrite => self.map_no_overwrite(resource),
            MapType::Read | MapType::Write | MapType::ReadWrite => {
                #[cfg(feature = "capture")]
                if self.capture.is_some() {
                    return self.captured_map(resource, ty, Self::refuse_read_map);
                }
                let refused = Err(AppError::NotMappable.into());
                self.settle(refused)
            }
        }
    }

    /// A READ, WRITE or READ_WRITE Map on a deferred context: refused (R-M1).
    #[cfg(feature = "capture")]
    fn refuse_read_map(&mut self) -> Result<&mut [u8]> {
        self.settle(Err(AppError::NotMappable.into()))
    }

    /// Checks and notes a Map(NO_OVERWRITE): the discard's memory (R-M2).
    fn map_again(&mut self, resource: Handle<Resource>) -> Result<MapMemory> {
        self.check_alive()?;
        self.open.check_map(resource)?;
        let mut guard = None;
        // A ring's next append: its resource passed the checks at the first append, and its
        // description has not changed since; only its life is checked again.
        let ring = self.rec.rings.iter().find(|r| r.resource == resource);
        let (memory, open) = match ring.map(|r| r.memory) {
            Some(memory) => {
                let (_, open) = self.with_live(resource, &mut guard, |_| Ok(()))?;
                (MapMemory::from(memory), open)
            }
            None => {
                let caps = self.device.shared.map_caps();
                let (len, open) =
                    self.with_live(resource, &mut guard, |view| view.no_overwrite_len(caps))?;
                (self.first_append(resource, len)?, open)
            }
        };
        // Its Unmap is owed as any Map's (R-E3), though it records nothing.
        self.reserve(0)?;
        self.use_checked(resource.any(), open, &mut guard)?;
        drop(guard);
        if let MapMemory::Arena(payload) = memory {
            let len = payload.len();
            self.hear(DeferredCall::MapNoOverwrite { resource, len })?;
        }
        self.open.map(resource, OpenMap::again(memory));
        Ok(memory)
    }

    /// The memory of a resource's first Map(NO_OVERWRITE) in this recording, once it passed
    /// the checks, from then on kept as a [`Ring`]: where the engine replays lists, the
    /// payload of its last Map(DISCARD) (the operation that discard's Unmap recorded); where
    /// the driver builds them, the driver's, of `len` bytes. No discard of it in this
    /// recording is the application's error (R-M2).
    #[inline(never)]
    fn first_append(&mut self, resource: Handle<Resource>, len: usize) -> Result<MapMemory> {
        let rec = &mut *self.rec;
        let memory = match self.replays {
            true => rec.ops.iter().rev().find_map(|op| match op {
                Recorded::WriteDiscard {
                    resource: r,
                    payload,
                } if *r == resource => Some(RingMemory::Arena(*payload)),
                _ => None,
            }),
            false => {
                sort_set(&mut rec.discarded);
                let discarded = rec.discarded.binary_search(&resource).is_ok();
                discarded.then_some(RingMemory::Driver(len))
            }
        };
        let memory = memory.ok_or(AppError::MapWithoutDiscard)?;
        rec.rings.push(Ring { resource, memory });
        Ok(memory.into())
    }

    /// The driver's memory of the resource's last discard, for a Map(NO_OVERWRITE) the engine
    /// noted already ([`ListMode::DriverBuilt`](crate::ListMode::DriverBuilt)); a refusal
    /// ends the Map and is settled as any failed call.
    fn map_again_with_driver(
        &mut self,
        resource: Handle<Resource>,
        len: usize,
    ) -> Result<&mut [u8]> {
        let s = &*self.device.shared;
        let mut answer: Result<*mut [u8]> = Err(Error::OutOfMemory);
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
                .map_no_overwrite_deferred(dc, resource, len, &mut locals)
                .map(|bytes| bytes as *mut [u8])
                // The discard's length, or the driver's error (R-E1).
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
            // SAFETY: as in `map_with_driver`: the bytes are borrowed from the driver's state
            // of this context, kept alive and untouched by the returned borrow of `&mut self`.
            Ok(bytes) => Ok(unsafe { &mut *bytes }),
            Err(e) => self.driver_map_refused(resource, e, wrong_length),
        }
    }

    /// Unmap: records the contents written since [`DeferredContext::map_discard`] (those
    /// written since [`DeferredContext::map_no_overwrite`] are in the discard's bytes).
    pub fn unmap(&mut self, resource: Handle<Resource>) -> Result<()> {
        captured!(
            self,
            crate::capture::Call::Unmap(resource),
            self.record(|dc| {
                let map = *dc.open.mapped(resource)?;
                dc.record_unmap(resource, map)?;
                // Ended once heard: a refused (or panicking) Unmap leaves the resource mapped.
                dc.open.unmap(resource).map(|_| ())
            })
        )
    }

    /// Records an Unmap: the driver hears it, with the contents where the engine kept them.
    /// The Map stays open here: the caller ends it once this succeeds, so that a refusal (or
    /// a panicking hook) leaves the resource mapped. The Map reserved the operation's bytes
    /// already.
    #[inline(always)]
    pub(super) fn record_unmap(&mut self, resource: Handle<Resource>, map: OpenMap) -> Result<()> {
        let s = &*self.device.shared;
        if let Some(dc) = self.dc.for_hooks()? {
            let data = match map {
                OpenMap::Discard(payload) | OpenMap::NoOverwrite(payload) => {
                    // SAFETY: the payload comes from this recording's arena, not reset since
                    // the Map; the application's borrow of its bytes ended with the Map's.
                    Some(unsafe { self.rec.payloads.bytes(payload) })
                }
                OpenMap::DriverDiscard | OpenMap::DriverNoOverwrite => None,
            };
            let mut locals = LocalHandles::new(&mut self.cls, StateView::of(&self.bindings));
            let call = DeferredCall::Unmap { resource, data };
            s.driver().record_deferred(dc, call, &mut locals)?;
        }
        match map {
            OpenMap::Discard(payload) => {
                note_in_set(&mut self.rec.maps, resource);
                // A ring discarded again: its appends from now on write the new bytes.
                if !self.rec.rings.is_empty() {
                    self.rec.renew_ring(resource, payload);
                }
                self.push_op(Recorded::WriteDiscard { resource, payload });
            }
            OpenMap::DriverDiscard => {
                note_in_set(&mut self.rec.maps, resource);
                note_in_set(&mut self.rec.discarded, resource);
                self.rec.operations += 1;
            }
            // The discard's operation replays these bytes; the list maps the resource
            // already (R-C4).
            OpenMap::NoOverwrite(_) | OpenMap::DriverNoOverwrite => {}
        }
        Ok(())
    }
}
