//! One context's frames, appended where its thread alone writes.

use std::io::{self, Write};

use super::frame::{frame_header, MAX_PAYLOAD};

/// The frames one stream (a context) appended and no sink has taken yet: framed as the file
/// holds them, in memory the appending thread owns, so that appending writes nothing another
/// thread reads. [`StreamBuffer::drain_to`] hands them to a sink whole; its capacity stays.
#[derive(Debug)]
pub struct StreamBuffer {
    stream: u32,
    bytes: Vec<u8>,
    frames: u64,
}

impl StreamBuffer {
    /// An empty buffer of stream `stream`.
    pub fn new(stream: u32) -> Self {
        StreamBuffer {
            stream,
            bytes: Vec::new(),
            frames: 0,
        }
    }

    /// The stream's number.
    pub fn stream(&self) -> u32 {
        self.stream
    }

    /// Appends a frame of `kind` holding `payload`. A payload above
    /// [`MAX_PAYLOAD`](super::MAX_PAYLOAD) is split by the caller, never here: it panics.
    pub fn push(&mut self, kind: u16, payload: &[u8]) {
        assert!(
            payload.len() <= MAX_PAYLOAD as usize,
            "a capture record holds at most MAX_PAYLOAD bytes"
        );
        self.bytes
            .extend_from_slice(&frame_header(self.stream, kind, payload));
        self.bytes.extend_from_slice(payload);
        self.frames += 1;
    }

    /// Frames appended and not yet drained.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Bytes appended and not yet drained.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Writes every waiting frame to `sink`, whole and in order, then empties the buffer
    /// (keeping its capacity). On an error the frames stay, to be written again: a sink
    /// that wrote part of them before failing holds a torn frame, which a reader reports
    /// as the capture's end.
    pub fn drain_to(&mut self, sink: &mut impl Write) -> io::Result<()> {
        sink.write_all(&self.bytes)?;
        self.bytes.clear();
        self.frames = 0;
        Ok(())
    }
}
