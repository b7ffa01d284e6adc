//! Reading frames back.

use super::error::{CaptureError, CaptureErrorKind};
use super::frame::{checksum, FRAME_HEADER_LEN, HEADER_LEN, MAGIC, MAX_PAYLOAD, VERSION};

/// One record of a capture: its place and what it holds (borrowed from the file's bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Its index among the frames.
    pub record: u64,
    /// Its byte offset in the file.
    pub offset: u64,
    /// The stream it belongs to (a context's).
    pub stream: u32,
    /// What it is (the meaning is the capture's, not the format's).
    pub kind: u16,
    /// Its bytes.
    pub payload: &'a [u8],
}

/// The frames of a capture's bytes, in order: each whole, checked frame, then, if the
/// bytes end inside a frame or a frame is damaged, one [`CaptureError`] naming it, and
/// nothing after it.
#[derive(Clone, Debug)]
pub struct FrameReader<'a> {
    bytes: &'a [u8],
    at: usize,
    record: u64,
    done: bool,
}

impl<'a> FrameReader<'a> {
    /// A reader of `bytes`, after checking its header: not a capture, a damaged header or
    /// another version is an error (record 0, offset 0).
    pub fn new(bytes: &'a [u8]) -> Result<Self, CaptureError> {
        let error = |kind| CaptureError {
            record: 0,
            offset: 0,
            kind,
        };
        if bytes.len() < MAGIC.len() || bytes[..MAGIC.len()] != MAGIC {
            return Err(error(CaptureErrorKind::NotACapture));
        }
        let Some(h) = bytes.get(..HEADER_LEN) else {
            return Err(error(CaptureErrorKind::TornTail));
        };
        let crc = u32::from_le_bytes(h[12..].try_into().expect("4 bytes"));
        if crc32fast::hash(&h[..12]) != crc {
            return Err(error(CaptureErrorKind::BadHeader));
        }
        let found = u32::from_le_bytes(h[8..12].try_into().expect("4 bytes"));
        if found != VERSION {
            return Err(error(CaptureErrorKind::Version { found }));
        }
        Ok(FrameReader {
            bytes,
            at: HEADER_LEN,
            record: 0,
            done: false,
        })
    }

    /// The byte offset of the next frame: after the last whole frame read so far.
    pub fn offset(&self) -> usize {
        self.at
    }

    fn next_frame(&mut self) -> Result<Option<Frame<'a>>, CaptureErrorKind> {
        let rest = &self.bytes[self.at..];
        if rest.is_empty() {
            return Ok(None);
        }
        let Some(fixed) = rest.get(..FRAME_HEADER_LEN) else {
            return Err(CaptureErrorKind::TornTail);
        };
        let word = |at: usize| u32::from_le_bytes(fixed[at..at + 4].try_into().expect("4 bytes"));
        let half = |at: usize| u16::from_le_bytes(fixed[at..at + 2].try_into().expect("2 bytes"));
        let (len, crc, stream, kind, reserved) = (word(0), word(4), word(8), half(12), half(14));
        if len > MAX_PAYLOAD {
            return Err(CaptureErrorKind::TooLong { len });
        }
        let end = FRAME_HEADER_LEN + len as usize;
        let Some(payload) = rest.get(FRAME_HEADER_LEN..end) else {
            return Err(CaptureErrorKind::TornTail);
        };
        if checksum(stream, kind, reserved, payload) != crc {
            return Err(CaptureErrorKind::Checksum);
        }
        if reserved != 0 {
            return Err(CaptureErrorKind::Reserved);
        }
        let frame = Frame {
            record: self.record,
            offset: self.at as u64,
            stream,
            kind,
            payload,
        };
        self.at += end;
        self.record += 1;
        Ok(Some(frame))
    }
}

impl<'a> Iterator for FrameReader<'a> {
    type Item = Result<Frame<'a>, CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_frame() {
            Ok(Some(frame)) => Some(Ok(frame)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(kind) => {
                self.done = true;
                Some(Err(CaptureError {
                    record: self.record,
                    offset: self.at as u64,
                    kind,
                }))
            }
        }
    }
}
