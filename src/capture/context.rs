//! One context's capture: its stream, appended by its own thread.

use std::ptr::NonNull;
use std::sync::Arc;

use super::codec::Encoder;
use super::frame::FRAME_HEADER_LEN;
use super::record::{encode_call, encode_command, encode_record, Call, Kind, Outcome, Record};
use super::sink::CaptureSink;
use super::stream::StreamBuffer;
use crate::driver::Command;
use crate::handle::{Handle, Resource};
use crate::map_type::{MapFlags, MapType};

/// Where a context record's outcome byte is: after its 8-byte sequence number.
const OUTCOME_AT: usize = 8;

/// A Map that succeeded, not recorded yet: what it was, when it ended, and the bytes it
/// handed out, which the application writes until its Unmap. Recorded at the context's next
/// call: with it when it is the Unmap ([`Call::MapUnmap`], one record), or before it
/// otherwise ([`Call::Map`]); its bytes then wait for its Unmap ([`WrittenLater`]).
#[derive(Debug)]
struct PendingMap {
    resource: Handle<Resource>,
    ty: MapType,
    flags: MapFlags,
    /// The device records appended when the Map ended.
    seq: u64,
    /// Where its bytes are, and how many (none for a READ Map, which the application only
    /// reads).
    bytes: Option<(NonNull<u8>, usize)>,
}

// SAFETY: the pointer is only dereferenced by the context that made it, on whatever thread
// holds that context (`ContextCapture::begin`, `ContextCapture::settle_maps`), under the
// invariant stated there.
unsafe impl Send for PendingMap {}

/// A Map recorded already whose bytes are recorded at its Unmap ([`Call::Written`] just
/// before it): a D3D application may write through a Map's `pData` until its Unmap, across
/// other Maps and Unmaps of the context (Map A, Map B, write A, write B, Unmap A, Unmap B).
/// Recorded earlier only when a call that may end the Map or touch its memory comes first
/// ([`keeps_maps_open`]).
#[derive(Debug)]
struct WrittenLater {
    resource: Handle<Resource>,
    bytes: (NonNull<u8>, usize),
}

// SAFETY: as `PendingMap`'s.
unsafe impl Send for WrittenLater {}

/// Whether a Map's memory stays as the application leaves it across a call of `kind` on
/// its context: a Map or an Unmap (of another resource), a bind, a query's Begin or End.
/// None of them touches a resource's memory, ends another Map or resets the recording
/// (but by running out of memory, which forgets the Maps: [`ContextCapture::forget_maps`]).
/// Any other call may (a command or an update writes memory, a Finish or an abandon ends the
/// recording, a flush or a present submits): the bytes of every Map still open are recorded
/// before it.
#[inline]
fn keeps_maps_open(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Map | Kind::Unmap | Kind::Bind | Kind::BeginQuery | Kind::EndQuery
    )
}

/// A context's capture: the sink, the frames its thread appended and has not handed over,
/// the record being made and the Map not recorded yet.
#[derive(Debug)]
pub(crate) struct ContextCapture {
    sink: Arc<CaptureSink>,
    frames: StreamBuffer,
    /// The record [`ContextCapture::begin`] started, until its commit: where its frame
    /// starts, and where the call's sequence number and outcome go in it.
    open: Option<(usize, usize)>,
    pending: Option<PendingMap>,
    /// Maps recorded whose bytes wait for their Unmap.
    written_later: Vec<WrittenLater>,
    /// Lists this (deferred) context finished: the next one's [`super::ListId::finish`].
    finished: u64,
}

impl ContextCapture {
    /// The capture of the context whose stream is `stream`.
    pub(crate) fn new(sink: Arc<CaptureSink>, stream: u32) -> Self {
        ContextCapture {
            sink,
            frames: StreamBuffer::new(stream),
            open: None,
            pending: None,
            written_later: Vec::new(),
            finished: 0,
        }
    }

    pub(crate) fn sink(&self) -> &Arc<CaptureSink> {
        &self.sink
    }

    pub(crate) fn stream(&self) -> u32 {
        self.frames.stream()
    }

    /// Takes back a record a panicking call left unfinished.
    #[inline]
    fn drop_unfinished(&mut self) {
        if let Some((start, _)) = self.open.take() {
            self.frames.payload().truncate(start);
        }
    }

    /// Starts the record of a context's call: the Map before it first, if it is not recorded
    /// yet (with this call, when this is its Unmap), and the bytes of the Maps this call may
    /// end (of the one it unmaps, or of all: [`keeps_maps_open`]), then `call`'s fields,
    /// straight into the stream, its sequence number and outcome left for
    /// [`ContextCapture::commit`].
    ///
    /// # Safety
    /// As [`ContextCapture::settle_maps`]'s: called first thing in the context's call.
    pub(crate) unsafe fn begin<C: Command>(&mut self, call: &Call<'_, &C>) {
        self.drop_unfinished();
        if let (&Call::Unmap(resource), Some(map)) = (call, &self.pending) {
            if map.resource == resource {
                let map = self.pending.take().expect("just matched");
                // SAFETY: the caller's contract: the memory is as the Map handed it out,
                // alive and not borrowed by anyone now.
                let written = map.bytes.map_or(&[][..], |(ptr, len)| unsafe {
                    core::slice::from_raw_parts(ptr.as_ptr(), len)
                });
                let call: Call<'_, ()> = Call::MapUnmap {
                    resource,
                    ty: map.ty,
                    flags: map.flags,
                    written,
                    unmap_seq: 0,
                    unmap_outcome: Outcome::Ok,
                };
                let start = self.frames.begin_frame(Kind::MapUnmap as u16);
                let record = Record {
                    seq: map.seq,
                    outcome: Outcome::Ok,
                    call,
                };
                encode_record(&record, &mut Encoder::new(self.frames.payload()), |_, _| {});
                // The Unmap's sequence number and outcome close the payload.
                let patch = self.frames.payload().len() - (OUTCOME_AT + 1);
                self.open = Some((start, patch));
                return;
            }
        }
        let kind = call.kind();
        // SAFETY: the caller's contract.
        unsafe { self.settle_maps(keeps_maps_open(kind)) };
        if let &Call::Unmap(resource) = call {
            // SAFETY: the caller's contract.
            unsafe { self.record_written_later(resource) };
        }
        let start = self
            .frames
            .begin_frame_with::<{ OUTCOME_AT + 1 }>(kind as u16);
        let payload = self.frames.payload();
        encode_call(call, &mut Encoder::new(payload), |c, enc| {
            encode_command(*c, enc)
        });
        self.open = Some((start, start + FRAME_HEADER_LEN));
    }

    /// Ends the record [`ContextCapture::begin`] started: the call answered `outcome`, and
    /// ended now.
    #[inline]
    pub(crate) fn commit(&mut self, outcome: Outcome) {
        let Some((start, patch)) = self.open.take() else {
            return;
        };
        let mut ended = [0; OUTCOME_AT + 1];
        ended[..OUTCOME_AT].copy_from_slice(&self.sink.device_records().to_le_bytes());
        ended[OUTCOME_AT] = outcome.code();
        self.frames.payload()[patch..patch + OUTCOME_AT + 1].copy_from_slice(&ended);
        if !self.frames.end_frame(start) {
            self.sink.lost();
        }
    }

    /// Starts a Map's record: what came before it recorded first. The Map itself is
    /// recorded by [`ContextCapture::end_map`].
    ///
    /// # Safety
    /// As [`ContextCapture::settle_maps`]'s: called first thing in the Map's call.
    pub(crate) unsafe fn begin_map(&mut self) {
        self.drop_unfinished();
        // SAFETY: the caller's contract.
        unsafe { self.settle_maps(keeps_maps_open(Kind::Map)) };
    }

    /// A Map of `resource` answered `outcome`, with `bytes` for the application (`None`
    /// for a READ Map's, which it only reads): recorded now if it failed, else with the
    /// context's next call ([`PendingMap`]). `bytes` is the pointer the Map's memory is
    /// handed out through (no reference is made of it here, so that the application's
    /// borrow, made from the same pointer, is the only one while it writes).
    pub(crate) fn end_map(
        &mut self,
        resource: Handle<Resource>,
        ty: MapType,
        flags: MapFlags,
        outcome: Outcome,
        bytes: Option<*mut [u8]>,
    ) {
        let seq = self.sink.device_records();
        match outcome {
            Outcome::Ok => {
                let bytes = bytes.and_then(|b| Some((NonNull::new(b as *mut u8)?, b.len())));
                self.pending = Some(PendingMap {
                    resource,
                    ty,
                    flags,
                    seq,
                    bytes,
                });
            }
            Outcome::Err(_) => {
                let call = Call::Map {
                    resource,
                    ty,
                    flags,
                };
                self.push_record(seq, outcome, call);
            }
        }
    }

    /// Appends a whole record.
    fn push_record(&mut self, seq: u64, outcome: Outcome, call: Call<'_, ()>) {
        let start = self.frames.begin_frame(call.kind() as u16);
        let record = Record { seq, outcome, call };
        encode_record(&record, &mut Encoder::new(self.frames.payload()), |_, _| {});
        if !self.frames.end_frame(start) {
            self.sink.lost();
        }
    }

    /// Records the last Map, if it is not recorded yet, and, unless `keep_open`, what the
    /// application wrote through every Map still open. Called first thing in every call of
    /// the context, `keep_open` as [`keeps_maps_open`] says of it.
    ///
    /// # Safety
    /// The bytes [`ContextCapture::end_map`] noted must be alive and not have been touched by
    /// anything but the application since: no hook, no unlock, no reset of the recording ran
    /// in between. That holds when this runs before anything else in the context's next call
    /// and then before anything else in each later call until the Map's Unmap, as long as
    /// each call in between is one [`keeps_maps_open`] names: those touch no resource's
    /// memory; the memory is locked (the immediate context's) or the recording's (a deferred
    /// context's) until the Unmap; and a recording reset by running out of memory forgets the
    /// Maps first ([`ContextCapture::forget_maps`]). A Rust application gave up the `&mut`
    /// borrow its bytes came with to make the next call; a C one writes through its pointer,
    /// as D3D lets it, until the Unmap.
    #[inline]
    pub(crate) unsafe fn settle_maps(&mut self, keep_open: bool) {
        if self.pending.is_some() || (!keep_open && !self.written_later.is_empty()) {
            // SAFETY: the caller's contract.
            unsafe { self.record_maps(keep_open) }
        }
    }

    /// [`ContextCapture::settle_maps`] with something to record.
    ///
    /// # Safety
    /// As [`ContextCapture::settle_maps`]'s.
    #[cold]
    unsafe fn record_maps(&mut self, keep_open: bool) {
        if let Some(map) = self.pending.take() {
            let call = Call::Map {
                resource: map.resource,
                ty: map.ty,
                flags: map.flags,
            };
            self.push_record(map.seq, Outcome::Ok, call);
            if let Some(bytes) = map.bytes {
                self.written_later.push(WrittenLater {
                    resource: map.resource,
                    bytes,
                });
            }
        }
        if keep_open {
            return;
        }
        let maps = core::mem::take(&mut self.written_later);
        for map in &maps {
            // SAFETY: the caller's contract.
            unsafe { self.push_written(map) };
        }
        // The vector's memory kept for the next Maps.
        self.written_later = maps;
        self.written_later.clear();
    }

    /// The bytes of `resource`'s Map, if they wait for this, its Unmap.
    ///
    /// # Safety
    /// As [`ContextCapture::settle_maps`]'s.
    #[inline]
    unsafe fn record_written_later(&mut self, resource: Handle<Resource>) {
        let Some(at) = self
            .written_later
            .iter()
            .position(|m| m.resource == resource)
        else {
            return;
        };
        let map = self.written_later.swap_remove(at);
        // SAFETY: the caller's contract.
        unsafe { self.push_written(&map) };
    }

    /// Appends a [`Call::Written`] of what the application wrote through `map`.
    ///
    /// # Safety
    /// As [`ContextCapture::settle_maps`]'s.
    unsafe fn push_written(&mut self, map: &WrittenLater) {
        let (ptr, len) = map.bytes;
        // SAFETY: the caller's contract: the memory is as the Map handed it out, alive and
        // not borrowed by anyone now.
        let bytes = unsafe { core::slice::from_raw_parts(ptr.as_ptr(), len) };
        let written = Call::Written {
            resource: map.resource,
            bytes,
        };
        let seq = self.sink.device_records();
        self.push_record(seq, Outcome::Ok, written);
    }

    /// The context's recording was reset inside a call (it ran out of memory, R-E3): the
    /// memory of its open Maps is gone, and their bytes with it. (No Map is pending then:
    /// the call's start recorded it.)
    pub(crate) fn forget_maps(&mut self) {
        self.written_later.clear();
    }

    /// The call just recorded answered `value` besides success ([`Call::Answer`]).
    pub(crate) fn answer(&mut self, value: u64) {
        let seq = self.sink.device_records();
        self.push_record(seq, Outcome::Ok, Call::Answer(value));
    }

    /// The name of the list this (deferred) context's Finish is making, if it succeeds.
    pub(crate) fn next_list_id(&self) -> super::record::ListId {
        super::record::ListId {
            stream: self.stream(),
            finish: self.finished,
        }
    }

    /// A Finish succeeded: the next list takes the next name.
    pub(crate) fn count_list(&mut self) {
        self.finished += 1;
    }

    /// A deferred context's Finish: its frames go to the sink, to be written at the next
    /// flush.
    pub(crate) fn hand_over(&mut self) {
        self.sink.hand_over(&mut self.frames);
    }

    /// The immediate context's Flush: everything recorded so far goes to the output.
    pub(crate) fn write_out(&mut self) {
        self.sink.write_out(&mut self.frames);
    }
}
