//! One context's frames, appended where its thread alone writes.

use std::io::{self, Write};

use super::frame::{frame_header, FRAME_HEADER_LEN, MAX_PAYLOAD};

/// The frames one stream (a context) appended and no sink has taken yet, in memory the
/// appending thread owns, so that appending writes nothing another thread reads. Framed as
/// the file holds them but for their checksums, which are filled when they are drained
/// ([`StreamBuffer::drain_to`]), by whichever thread writes them: a record costs its thread
/// an append, never a checksum. Its capacity stays.
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
    /// [`MAX_PAYLOAD`](super::MAX_PAYLOAD) is refused (`false`) and nothing is appended.
    pub fn push(&mut self, kind: u16, payload: &[u8]) -> bool {
        let start = self.begin_frame(kind);
        self.bytes.extend_from_slice(payload);
        self.end_frame(start)
    }

    /// Starts a frame of `kind` whose payload the caller appends to
    /// [`StreamBuffer::payload`]; answers where it starts, for [`StreamBuffer::end_frame`].
    #[inline]
    pub(crate) fn begin_frame(&mut self, kind: u16) -> usize {
        self.begin_frame_with::<0>(kind)
    }

    /// [`StreamBuffer::begin_frame`] with the payload's first `N` bytes zero (to be
    /// patched), in one append.
    #[inline]
    pub(crate) fn begin_frame_with<const N: usize>(&mut self, kind: u16) -> usize {
        let start = self.bytes.len();
        let mut head = [[0; FRAME_HEADER_LEN], [0; FRAME_HEADER_LEN]];
        head[0] = frame_header(self.stream, kind, 0);
        self.bytes
            .extend_from_slice(&head.as_flattened()[..FRAME_HEADER_LEN + N]);
        start
    }

    /// Where the frame being made appends its payload.
    #[inline]
    pub(crate) fn payload(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Ends the frame that starts at `start`: its length noted. One longer than
    /// [`MAX_PAYLOAD`](super::MAX_PAYLOAD) is taken back (`false`).
    #[inline]
    pub(crate) fn end_frame(&mut self, start: usize) -> bool {
        let len = self.bytes.len() - start - FRAME_HEADER_LEN;
        match u32::try_from(len) {
            Ok(len) if len <= MAX_PAYLOAD => {
                self.bytes[start..start + 4].copy_from_slice(&len.to_le_bytes());
                self.frames += 1;
                true
            }
            _ => {
                self.bytes.truncate(start);
                false
            }
        }
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

    /// Writes every waiting frame to `sink`, whole, in order and with its checksum, then
    /// empties the buffer (keeping its capacity). On an error the frames stay, to be
    /// written again: a sink that wrote part of them before failing holds a torn frame,
    /// which a reader reports as the capture's end.
    pub fn drain_to(&mut self, sink: &mut impl Write) -> io::Result<()> {
        seal(&mut self.bytes);
        sink.write_all(&self.bytes)?;
        self.bytes.clear();
        self.frames = 0;
        Ok(())
    }

    /// Hands every waiting frame over, checksums not filled yet, for a thread that writes
    /// them later ([`seal`] first): the buffer's bytes are swapped with `spare` (emptied),
    /// so handing over copies nothing and the buffer keeps a capacity.
    pub(crate) fn swap_out(&mut self, spare: Vec<u8>) -> Vec<u8> {
        let mut spare = spare;
        spare.clear();
        self.frames = 0;
        core::mem::replace(&mut self.bytes, spare)
    }
}

/// Fills in the checksum of every frame of `frames` (whole frames, back to back, as
/// [`StreamBuffer`] makes them).
pub(crate) fn seal(frames: &mut [u8]) {
    let mut at = 0;
    while at + FRAME_HEADER_LEN <= frames.len() {
        let len = u32::from_le_bytes(frames[at..at + 4].try_into().expect("4 bytes")) as usize;
        let end = at + FRAME_HEADER_LEN + len;
        let crc = crc32fast::hash(&frames[at + 8..end]);
        frames[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
        at = end;
    }
}
