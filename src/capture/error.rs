//! What a capture file can be wrong with.

use core::fmt;

/// A capture that cannot be read past some point: which record, where, and what was wrong.
/// Every whole record before it was read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaptureError {
    /// The record's index (0: the first frame; the header is not counted).
    pub record: u64,
    /// Its byte offset in the file.
    pub offset: u64,
    /// What was wrong.
    pub kind: CaptureErrorKind,
}

/// What was wrong with a capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureErrorKind {
    /// The file does not begin with the magic bytes.
    NotACapture,
    /// The header's checksum does not match.
    BadHeader,
    /// Another version of the format.
    Version {
        /// The version the file says.
        found: u32,
    },
    /// The file ends inside this record: a capture cut short (a crash, a kill), readable up
    /// to the record before.
    TornTail,
    /// A payload length above [`crate::capture::MAX_PAYLOAD`].
    TooLong {
        /// The length the frame says.
        len: u32,
    },
    /// The frame's checksum does not match what it holds.
    Checksum,
    /// Reserved bits that are not zero.
    Reserved,
    /// The records from this one on were written after the last complete write (a
    /// [`crate::capture::CHECKPOINT_STREAM`] frame ends each): part of a write a crash cut
    /// short, read but not replayed.
    Unfinished,
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (record, offset) = (self.record, self.offset);
        match self.kind {
            CaptureErrorKind::NotACapture => write!(f, "not a capture (no magic bytes)"),
            CaptureErrorKind::BadHeader => write!(f, "the header's checksum does not match"),
            CaptureErrorKind::Version { found } => write!(
                f,
                "format version {found}, this reader reads {}",
                crate::capture::VERSION
            ),
            CaptureErrorKind::TornTail => write!(
                f,
                "record {record} at byte {offset} is cut short: the capture ends there"
            ),
            CaptureErrorKind::TooLong { len } => write!(
                f,
                "record {record} at byte {offset} says {len} bytes, more than a record holds"
            ),
            CaptureErrorKind::Checksum => {
                write!(f, "record {record} at byte {offset} is corrupt (checksum)")
            }
            CaptureErrorKind::Reserved => {
                write!(f, "record {record} at byte {offset} sets reserved bits")
            }
            CaptureErrorKind::Unfinished => write!(
                f,
                "record {record} at byte {offset} and those after it belong to a write that \
                 did not finish: the capture ends before them"
            ),
        }
    }
}

impl std::error::Error for CaptureError {}
