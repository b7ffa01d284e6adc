//! The byte layout: a file header, then frames, every integer little-endian.
//!
//! ```text
//! header  magic "cmdlcapt" (8) | version u32 | crc32 of the 12 bytes before it (u32)
//! frame   payload length u32 | crc32 of the 8 bytes after it and the payload (u32)
//!         | stream u32 | kind u16 | reserved u16 (0) | payload
//! ```
//! The checksum covers what a frame says (its stream, kind and payload); the length is
//! checked by its bound and by the checksum failing when it is wrong.

use std::io::{self, Write};

/// The first bytes of every capture.
pub const MAGIC: [u8; 8] = *b"cmdlcapt";

/// The format's version: a reader refuses any other.
pub const VERSION: u32 = 1;

/// The header's length in bytes.
pub const HEADER_LEN: usize = 16;

/// A frame's fixed part, before its payload, in bytes.
pub const FRAME_HEADER_LEN: usize = 16;

/// The largest payload a frame may carry (64 MiB): a length above it is corruption, refused
/// before anything is read.
pub const MAX_PAYLOAD: u32 = 64 << 20;

/// The header, as a writer puts it.
pub(crate) fn header() -> [u8; HEADER_LEN] {
    let mut h = [0; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    let crc = crc32fast::hash(&h[..12]);
    h[12..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// Writes the capture's header to `out` (once, before any frame).
pub fn write_header(out: &mut impl Write) -> io::Result<()> {
    out.write_all(&header())
}

/// A frame's checksum: its stream, kind, reserved bits and payload.
pub(crate) fn checksum(stream: u32, kind: u16, reserved: u16, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&stream.to_le_bytes());
    h.update(&kind.to_le_bytes());
    h.update(&reserved.to_le_bytes());
    h.update(payload);
    h.finalize()
}

/// A frame's fixed part for a payload of `len` bytes, its checksum left at zero: the bytes
/// it covers are those after it, so [`super::stream::seal`] fills it once the payload is
/// there.
#[inline]
pub(crate) fn frame_header(stream: u32, kind: u16, len: u32) -> [u8; FRAME_HEADER_LEN] {
    let mut f = [0; FRAME_HEADER_LEN];
    f[..4].copy_from_slice(&len.to_le_bytes());
    f[8..12].copy_from_slice(&stream.to_le_bytes());
    f[12..14].copy_from_slice(&kind.to_le_bytes());
    f
}
