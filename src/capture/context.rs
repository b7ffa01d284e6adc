//! One context's capture: its stream, appended by its own thread.

use std::ptr::NonNull;
use std::sync::Arc;

use super::codec::Encoder;
use super::record::{encode_call, encode_command, encode_record, Call, Kind, Outcome, Record};
use super::sink::CaptureSink;
use super::stream::StreamBuffer;
use crate::driver::Command;
use crate::handle::{Handle, Resource};

/// Where a context record's outcome byte is: after its 8-byte sequence number.
const OUTCOME_AT: usize = 8;

/// The bytes of a Map the application may still be writing: the resource, and where they
/// are, until the context's next call.
#[derive(Debug)]
struct OpenWrite {
    resource: Handle<Resource>,
    bytes: NonNull<u8>,
    len: usize,
}

// SAFETY: the pointer is only dereferenced by the context that made it, on whatever thread
// holds that context (`ContextCapture::take_written`), under the invariant stated there.
unsafe impl Send for OpenWrite {}

/// A context's capture: the sink, the frames its thread appended and has not handed over,
/// and the Map whose bytes are recorded at its next call.
#[derive(Debug)]
pub(crate) struct ContextCapture {
    sink: Arc<CaptureSink>,
    frames: StreamBuffer,
    /// Where the record [`ContextCapture::begin`] started is, until its commit.
    open: Option<usize>,
    open_write: Option<OpenWrite>,
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
            open_write: None,
            finished: 0,
        }
    }

    pub(crate) fn sink(&self) -> &Arc<CaptureSink> {
        &self.sink
    }

    pub(crate) fn stream(&self) -> u32 {
        self.frames.stream()
    }

    /// Starts the record of a context's call: first the bytes the application wrote through
    /// the last Map, if any, then `call`'s fields, straight into the stream, its sequence
    /// number and outcome left for [`ContextCapture::commit`]. A record a panicking call
    /// left unfinished is taken back first.
    ///
    /// # Safety
    /// As [`ContextCapture::take_written`]'s: called first thing in the context's call.
    pub(crate) unsafe fn begin<C: Command>(&mut self, call: &Call<'_, &C>) {
        if let Some(start) = self.open.take() {
            self.frames.payload().truncate(start);
        }
        // An Unmap right after its Map carries the Map's bytes itself.
        let merged;
        let call = match (call, &self.open_write) {
            (&Call::Unmap { resource, .. }, Some(open)) if open.resource == resource => {
                let open = self.open_write.take().expect("just matched");
                // SAFETY: the caller's contract, as for `take_written`: the memory is as the
                // Map handed it out, alive and not borrowed by anyone now.
                let bytes = unsafe { core::slice::from_raw_parts(open.bytes.as_ptr(), open.len) };
                merged = Call::Unmap {
                    resource,
                    written: Some(bytes),
                };
                &merged
            }
            (call, _) => {
                // SAFETY: the caller's contract.
                unsafe { self.take_written() };
                call
            }
        };
        let start = self
            .frames
            .begin_frame_with::<{ OUTCOME_AT + 1 }>(call.kind() as u16);
        let payload = self.frames.payload();
        encode_call(call, &mut Encoder::new(payload), |c, enc| {
            encode_command(*c, enc)
        });
        self.open = Some(start);
    }

    /// Ends the record [`ContextCapture::begin`] started: the call answered `outcome`, and
    /// ended now.
    #[inline]
    pub(crate) fn commit(&mut self, outcome: Outcome) {
        let Some(start) = self.open.take() else {
            return;
        };
        let seq = self.sink.device_records();
        let payload = self.frames.payload_of(start);
        payload[..OUTCOME_AT].copy_from_slice(&seq.to_le_bytes());
        payload[OUTCOME_AT] = outcome.code();
        if !self.frames.end_frame(start) {
            self.sink.lost();
        }
    }

    /// A Map of `resource` handed out `bytes`, which the application writes until its next
    /// call on the context: they are recorded then ([`ContextCapture::take_written`]).
    pub(crate) fn mapped(&mut self, resource: Handle<Resource>, bytes: &mut [u8]) {
        self.open_write = NonNull::new(bytes.as_mut_ptr()).map(|ptr| OpenWrite {
            resource,
            bytes: ptr,
            len: bytes.len(),
        });
    }

    /// Records what the application wrote through the last Map's bytes, if a Map handed
    /// some out since the last call. Called first thing in every call of the context.
    ///
    /// # Safety
    /// The bytes [`ContextCapture::mapped`] noted must not have been touched by anything but
    /// the application since: no hook, no unlock, no reset of the recording ran in between.
    /// That holds when this runs before anything else in the context's next call, because the
    /// bytes were handed out under the context's `&mut` borrow, which the application gave up
    /// to make that call.
    #[inline]
    pub(crate) unsafe fn take_written(&mut self) {
        if self.open_write.is_some() {
            // SAFETY: the caller's contract.
            unsafe { self.record_written() }
        }
    }

    /// [`ContextCapture::take_written`] with a Map's bytes to record.
    ///
    /// # Safety
    /// As [`ContextCapture::take_written`]'s.
    unsafe fn record_written(&mut self) {
        let Some(open) = self.open_write.take() else {
            return;
        };
        // SAFETY: the caller's contract: the memory is as the Map handed it out, alive and
        // not borrowed by anyone now.
        let bytes = unsafe { core::slice::from_raw_parts(open.bytes.as_ptr(), open.len) };
        let record: Record<'_, ()> = Record {
            seq: self.sink.device_records(),
            outcome: Outcome::Ok,
            call: Call::Written {
                resource: open.resource,
                bytes,
            },
        };
        let start = self.frames.begin_frame(Kind::Written as u16);
        encode_record(&record, &mut Encoder::new(self.frames.payload()), |_, _| {});
        if !self.frames.end_frame(start) {
            self.sink.lost();
        }
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
