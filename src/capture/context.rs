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
    payload: Vec<u8>,
    open_write: Option<OpenWrite>,
    /// The kind of the record [`ContextCapture::begin`] started.
    kind: Kind,
    /// Lists this (deferred) context finished: the next one's [`super::ListId::finish`].
    finished: u64,
}

impl ContextCapture {
    /// The capture of the context whose stream is `stream`.
    pub(crate) fn new(sink: Arc<CaptureSink>, stream: u32) -> Self {
        ContextCapture {
            sink,
            frames: StreamBuffer::new(stream),
            payload: Vec::new(),
            open_write: None,
            kind: Kind::Flush,
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
    /// the last Map, if any, then `call`'s fields, its sequence number and outcome left for
    /// [`ContextCapture::commit`].
    ///
    /// # Safety
    /// As [`ContextCapture::take_written`]'s: called first thing in the context's call.
    pub(crate) unsafe fn begin<C: Command>(&mut self, call: Call<'_, &C>) {
        // SAFETY: the caller's contract.
        unsafe { self.take_written() };
        self.kind = call.kind();
        self.payload.clear();
        self.payload.extend_from_slice(&[0; OUTCOME_AT + 1]);
        encode_call(&call, &mut Encoder::new(&mut self.payload), |c, enc| {
            encode_command(*c, enc)
        });
    }

    /// Ends the record [`ContextCapture::begin`] started: the call answered `outcome`, and
    /// ended now.
    pub(crate) fn commit(&mut self, outcome: Outcome) {
        let seq = self.sink.device_records();
        self.payload[..OUTCOME_AT].copy_from_slice(&seq.to_le_bytes());
        self.payload[OUTCOME_AT] = outcome.code();
        self.frames.push(self.kind as u16, &self.payload);
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
    pub(crate) unsafe fn take_written(&mut self) {
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
        self.payload.clear();
        encode_record(&record, &mut Encoder::new(&mut self.payload), |_, _| {});
        self.frames.push(Kind::Written as u16, &self.payload);
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
