//! CPU access on a deferred context (R-M1, R-M2, R-M3): Map(DISCARD), Map(NO_OVERWRITE) after
//! a discard of the same resource in the recording, and Unmap, in every list mode.

use super::{Calls, DeferredContext};
use crate::bind::StateView;
use crate::cls::local_handles::LocalHandles;
use crate::driver::{DeferredCall, Driver};
use crate::error::{AppError, Error, Result};
use crate::handle::{Handle, ObjectKind, Resource};
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

impl<D: Driver, K: Kernel> DeferredContext<D, K> {
    /// Map(DISCARD) of a dynamic resource (any other is
    /// [`AppError::NotMappable`](crate::AppError::NotMappable)): memory for
    /// the resource's new contents, to write until [`DeferredContext::unmap`]. Where the
    /// engine replays lists the bytes live in the recording's arena (their values undefined,
    /// as D3D's: zero, or bytes an earlier recording of the device wrote), replayed
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

    /// Map(DISCARD)'s one route, from the call to the memory handed out: the checks
    /// ([`DeferredContext::check_discard`]), then the bytes, the arena's or the driver's; the
    /// Map is noted open only once its memory is there, so that a refusal, or a hook that
    /// panics, leaves nothing to undo.
    #[inline(always)]
    fn map_discard_inner(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        if self.calls != Calls::Recorded {
            return self.map_unrecorded(resource);
        }
        let _recording = self.trace_recording();
        let size = match self.check_discard(resource) {
            Ok(size) => size,
            Err(e) => return self.map_refused(resource, e, false),
        };
        if !self.replays {
            return self.map_with_driver(resource, size);
        }
        match self.map_into_arena(resource, size) {
            // SAFETY: the payload was just allocated in this recording's arena, which is not
            // reset while `&mut self` is borrowed by the result, and nothing else refers to
            // these bytes until the unmap records them.
            Ok(payload) => Ok(unsafe { self.rec.payloads.bytes_mut(payload) }),
            Err(e) => self.map_refused(resource, e, false),
        }
    }

    /// A Map(DISCARD)'s checks, in their order (R-D3, R-C4, R-E1, R-M1, R-E3), and the
    /// resource's use in the recording (R-H1): its size. A resource open in this recording
    /// is checked through its handle, without a pin (the handle holds it, R-H2); a first use
    /// opens it ([`DeferredContext::check_discard_first`]).
    #[inline(always)]
    fn check_discard(&mut self, resource: Handle<Resource>) -> Result<usize> {
        self.check_alive()?;
        self.open.check_map(resource)?;
        let Some(at) = self.cls.find_open(resource.any()) else {
            return self.check_discard_first(resource);
        };
        let view = self.cls.view_at(at);
        // The registry's checks but for the tag and the generation, which the open handle
        // matched, and the device's removal, checked above.
        if !<Resource as ObjectKind>::accepts(view.ty()) {
            return Err(AppError::WrongType.into());
        }
        view.entry().check_live()?;
        let size = view.discard_len()?;
        self.reserve(OPERATION_BYTES.saturating_add(size))?;
        let driver = self.device.shared.driver();
        self.cls.use_at(driver, self.dc.recording(), at);
        Ok(size)
    }

    /// [`DeferredContext::check_discard`] for a resource not open in this recording yet: looked
    /// up in the registry under a pin, then opened (R-H1, R-H3).
    #[inline(never)]
    fn check_discard_first(&mut self, resource: Handle<Resource>) -> Result<usize> {
        let mut guard = None;
        let (size, open) = self.with_live(resource, &mut guard, |view| view.discard_len())?;
        self.reserve(OPERATION_BYTES.saturating_add(size))?;
        self.use_checked(resource.any(), open, &mut guard)?;
        Ok(size)
    }

    /// The arena's bytes for a Map(DISCARD) where the engine replays lists, once the driver
    /// heard the Map; the Map noted open.
    #[inline(always)]
    fn map_into_arena(&mut self, resource: Handle<Resource>, size: usize) -> Result<Payload> {
        // Allocated before the driver hears the Map, as an update's copy is.
        let payload = self.rec.payloads.for_discard(size)?;
        self.rec.payload_bytes += size;
        self.hear(DeferredCall::MapDiscard {
            resource,
            len: size,
        })?;
        self.open.map(resource, OpenMap::Discard(payload));
        Ok(payload)
    }

    /// The driver's memory for a Map(DISCARD) that passed the checks
    /// ([`ListMode::DriverBuilt`](crate::ListMode::DriverBuilt)), the Map noted open once
    /// the driver handed it out; a refusal is settled as any failed call.
    #[inline(always)]
    fn map_with_driver(&mut self, resource: Handle<Resource>, len: usize) -> Result<&mut [u8]> {
        let s = &*self.device.shared;
        // Where the engine does not replay, the driver builds the lists: a recorded call's
        // context has its state (`Calls`' invariant); none would be out of memory (R-R3).
        let Some(dc) = self.dc.recording() else {
            return self.map_refused(resource, Error::OutOfMemory, false);
        };
        let mut locals = LocalHandles::new(&mut self.cls, StateView::of(&self.bindings));
        let bytes = match s
            .driver()
            .map_discard_deferred(dc, resource, len, &mut locals)
        {
            Ok(bytes) => bytes as *mut [u8],
            Err(e) => return self.map_refused(resource, e, false),
        };
        // Memory of another length than the resource's new contents is the driver's error
        // (R-E1): the application writes exactly `len` bytes in every mode.
        if bytes.len() != len {
            return self.map_refused(resource, Error::InvalidArg, true);
        }
        self.open.map(resource, OpenMap::DriverDiscard);
        // Counted once the driver handed the memory out (a refused Map counts nothing).
        self.rec.payload_bytes += len;
        // SAFETY: the bytes are borrowed from the driver's state of this context
        // (`self.dc`), which the returned borrow of `&mut self` keeps alive and untouched;
        // the pointer was made from that borrow just above, and since then only other fields
        // (the open Maps, the recording's byte count) were written.
        Ok(unsafe { &mut *bytes })
    }

    /// A Map refused (`e`), before it was noted open, settled as any failed call's. Where
    /// the driver made its Map but answered memory of the wrong length, the driver holds a
    /// Map no call will end: its recording is dropped (AbandonCommandList) by a local
    /// removal, and Finish reports the lost recording (R-E3). A removed context's Map hands
    /// out scratch bytes.
    #[cold]
    #[inline(never)]
    fn map_refused(
        &mut self,
        resource: Handle<Resource>,
        e: Error,
        wrong_length: bool,
    ) -> Result<&mut [u8]> {
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

    /// A Map of a context whose calls are not recorded: scratch bytes where it is removed
    /// (R-E3); without driver state (R-R3), out of memory, which removes it and hands out
    /// scratch bytes all the same.
    #[cold]
    #[inline(never)]
    fn map_unrecorded(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        match self.calls {
            Calls::Removed => self.scratch_map(resource),
            Calls::Recorded | Calls::StateLost => {
                let error = self.state_lost();
                self.map_refused(resource, error, false)
            }
        }
    }

    /// What a removed context's Map hands out (R-E3: the call is accepted and records
    /// nothing): scratch bytes, allocated fallibly (a resource too big for memory is out of
    /// memory, not an abort).
    #[cold]
    #[inline(never)]
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

    /// Map(NO_OVERWRITE)'s one route: the checks ([`DeferredContext::check_append`]), then
    /// the discard's bytes, the arena's once the driver heard the Map, or the driver's; the
    /// Map noted open once its memory is there.
    #[inline(always)]
    fn map_no_overwrite_inner(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        if self.calls != Calls::Recorded {
            return self.map_unrecorded(resource);
        }
        let _recording = self.trace_recording();
        let payload = match self.check_append(resource) {
            Ok(MapMemory::Arena(payload)) => payload,
            Ok(MapMemory::Driver(len)) => return self.map_again_with_driver(resource, len),
            Err(e) => return self.map_refused(resource, e, false),
        };
        let len = payload.len();
        if let Err(e) = self.hear(DeferredCall::MapNoOverwrite { resource, len }) {
            return self.map_refused(resource, e, false);
        }
        self.open.map(resource, OpenMap::NoOverwrite(payload));
        // SAFETY: the payload is the discard's, in this recording's arena, which is not
        // reset while `&mut self` is borrowed by the result. The operation that replays it
        // reads its bytes only once the recording is finished, after this borrow ended, and
        // the driver heard the discard's bytes for the length of a call.
        Ok(unsafe { self.rec.payloads.bytes_mut(payload) })
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

    /// A Map(NO_OVERWRITE)'s checks (R-D3, R-C4, R-E1, R-M2, R-M3, R-E3) and the
    /// resource's use in the recording: the discard's memory. A ring's next append (the
    /// resource appended to earlier in this recording, so open here, and its description
    /// checked then and unchanged since) checks only the resource's life again; a first
    /// append checks it all ([`DeferredContext::check_append_first`]).
    #[inline(always)]
    fn check_append(&mut self, resource: Handle<Resource>) -> Result<MapMemory> {
        self.check_alive()?;
        self.open.check_map(resource)?;
        let ring = self.rec.rings.iter().find(|r| r.resource == resource);
        let (Some(ring), Some(at)) = (ring, self.cls.find_open(resource.any())) else {
            return self.check_append_first(resource);
        };
        let memory = MapMemory::from(ring.memory);
        self.cls.view_at(at).entry().check_live()?;
        // Its Unmap is owed as any Map's (R-E3), though it records nothing.
        self.reserve(0)?;
        let driver = self.device.shared.driver();
        self.cls.use_at(driver, self.dc.recording(), at);
        Ok(memory)
    }

    /// [`DeferredContext::check_append`] for a resource's first append in this recording:
    /// every check, then its memory kept as a ring ([`DeferredContext::first_append`]).
    #[inline(never)]
    fn check_append_first(&mut self, resource: Handle<Resource>) -> Result<MapMemory> {
        let mut guard = None;
        let (len, open) = self.with_live(resource, &mut guard, |view| view.no_overwrite_len())?;
        let memory = self.first_append(resource, len)?;
        self.reserve(0)?;
        self.use_checked(resource.any(), open, &mut guard)?;
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

    /// The driver's memory of the resource's last discard, for a Map(NO_OVERWRITE) that
    /// passed the checks ([`ListMode::DriverBuilt`](crate::ListMode::DriverBuilt)), the Map
    /// noted open once the driver handed it out; a refusal is settled as any failed call.
    #[inline]
    fn map_again_with_driver(
        &mut self,
        resource: Handle<Resource>,
        len: usize,
    ) -> Result<&mut [u8]> {
        let s = &*self.device.shared;
        let Some(dc) = self.dc.recording() else {
            return self.map_refused(resource, Error::OutOfMemory, false);
        };
        let mut locals = LocalHandles::new(&mut self.cls, StateView::of(&self.bindings));
        let bytes = match s
            .driver()
            .map_no_overwrite_deferred(dc, resource, len, &mut locals)
        {
            Ok(bytes) => bytes as *mut [u8],
            Err(e) => return self.map_refused(resource, e, false),
        };
        // The discard's length, or the driver's error (R-E1).
        if bytes.len() != len {
            return self.map_refused(resource, Error::InvalidArg, true);
        }
        self.open.map(resource, OpenMap::DriverNoOverwrite);
        // SAFETY: as in `map_with_driver`: the bytes are borrowed from the driver's state of
        // this context, kept alive and untouched by the returned borrow of `&mut self`.
        Ok(unsafe { &mut *bytes })
    }

    /// Unmap: records the contents written since [`DeferredContext::map_discard`] (those
    /// written since [`DeferredContext::map_no_overwrite`] are in the discard's bytes).
    pub fn unmap(&mut self, resource: Handle<Resource>) -> Result<()> {
        captured!(
            self,
            crate::capture::Call::Unmap(resource),
            self.record(|dc| {
                let at = dc.open.find_mapped(resource)?;
                dc.record_unmap(resource, *dc.open.mapped_at(at))?;
                // Ended once heard: a refused (or panicking) Unmap leaves the resource mapped.
                dc.open.unmap_at(at);
                Ok(())
            })
        )
    }

    /// Records an Unmap: the driver hears it, with the contents where the engine kept them.
    /// The Map stays open here: the caller ends it once this succeeds, so that a refusal (or
    /// a panicking hook) leaves the resource mapped. The Map reserved the operation's bytes
    /// already.
    #[inline(always)]
    pub(super) fn record_unmap(&mut self, resource: Handle<Resource>, map: OpenMap) -> Result<()> {
        match map {
            OpenMap::Discard(payload) => {
                self.hear_unmap(resource, Some(payload))?;
                note_in_set(&mut self.rec.maps, resource);
                // A ring discarded again: its appends from now on write the new bytes.
                if !self.rec.rings.is_empty() {
                    self.rec.renew_ring(resource, payload);
                }
                self.push_op(Recorded::WriteDiscard { resource, payload });
            }
            OpenMap::DriverDiscard => {
                self.hear_unmap(resource, None)?;
                note_in_set(&mut self.rec.maps, resource);
                note_in_set(&mut self.rec.discarded, resource);
                self.rec.operations += 1;
            }
            // The discard's operation replays these bytes; the list maps the resource
            // already (R-C4).
            OpenMap::NoOverwrite(payload) => self.hear_unmap(resource, Some(payload))?,
            OpenMap::DriverNoOverwrite => self.hear_unmap(resource, None)?,
        }
        Ok(())
    }

    /// The driver hears an Unmap on this thread, with the contents where the engine keeps
    /// them (`payload`: none where the driver's memory has them); emulated, nobody does.
    #[inline(always)]
    fn hear_unmap(&mut self, resource: Handle<Resource>, payload: Option<Payload>) -> Result<()> {
        let s = &*self.device.shared;
        let Some(dc) = self.dc.recording() else {
            return Ok(());
        };
        // SAFETY: the payload comes from this recording's arena, not reset since the Map;
        // the application's borrow of its bytes ended with the Map's.
        let data = payload.map(|payload| unsafe { self.rec.payloads.bytes(payload) });
        let mut locals = LocalHandles::new(&mut self.cls, StateView::of(&self.bindings));
        let call = DeferredCall::Unmap { resource, data };
        s.driver().record_deferred(dc, call, &mut locals)
    }
}
