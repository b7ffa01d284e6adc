//! Capture and replay (feature `capture`, `docs/CAPTURE.md` in the repository): every public
//! call on a device and its contexts, recorded as append-only framed records that a file cut
//! anywhere, by a crash or a `SIGKILL`, still reads back to its last whole write, and
//! replayed through any driver.
//!
//! - [`CaptureSink`]: where a device's capture goes
//!   ([`DeviceConfig::with_capture`](crate::DeviceConfig::with_capture)). Each context
//!   appends its own records ([`Call`], with its [`Outcome`]) into memory its thread owns;
//!   the immediate context writes them at each flush.
//! - [`replay`]: every call made again through a new device, in an order that keeps every
//!   order the protocol defines, each checked to answer what it answered ([`ReplayError`]).
//! - The format's two ends: [`StreamBuffer`], the frames one context appended, and
//!   [`FrameReader`], the frames of a file, in order, each checked (length bound, checksum,
//!   reserved bits); a cut or damaged tail is a [`CaptureError`] naming the record and its
//!   offset, after every whole record before it. Never a panic, and no allocation at all:
//!   a hostile length is refused before anything is read.
//! - [`Encoder`] / [`Decoder`]: a payload's integers, byte strings, objects and binding
//!   points; decoding is total (a [`DecodeError`] says where and what). A driver's
//!   commands go through [`CaptureCommand`], which the soft driver's implement.
//!
//! ```
//! use cmdlist::capture::{FrameReader, StreamBuffer, write_header};
//!
//! let mut file = Vec::new();
//! write_header(&mut file).unwrap();
//! let mut stream = StreamBuffer::new(1);
//! stream.push(7, b"a record");
//! stream.drain_to(&mut file).unwrap();
//! let frames: Vec<_> = FrameReader::new(&file).unwrap().collect();
//! assert_eq!(frames.len(), 1);
//! let frame = frames[0].as_ref().unwrap();
//! assert_eq!((frame.stream, frame.kind, frame.payload), (1, 7, &b"a record"[..]));
//! ```

pub(crate) mod answer;
mod codec;
pub(crate) mod context;
mod error;
mod frame;
mod reader;
mod record;
mod replay;
mod replay_host;
mod sink;
mod stream;

pub use codec::{CaptureCommand, DecodeError, Decoder, Encoder};
pub use error::{CaptureError, CaptureErrorKind};
pub use frame::{write_header, FRAME_HEADER_LEN, HEADER_LEN, MAGIC, MAX_PAYLOAD, VERSION};
pub use reader::{Frame, FrameReader};
pub use record::{
    decode_record, Call, Kind, ListId, Outcome, Record, CHECKPOINT_STREAM, DEVICE_STREAM,
    FIRST_DEFERRED_STREAM, IMMEDIATE_STREAM, MAX_ROTATED,
};
pub use replay::{
    replay, replay_with, ReplayError, ReplayErrorKind, ReplayOptions, ReplayReport, ReplayThreads,
    Timing,
};
pub use sink::CaptureSink;
pub use stream::StreamBuffer;

#[cfg(test)]
#[cfg(feature = "soft")]
mod round_trip_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// A capture of `frames` (stream, kind, payload), written through two streams' buffers
    /// drained in turn.
    fn capture(frames: &[(u32, u16, &[u8])]) -> Vec<u8> {
        let mut file = Vec::new();
        write_header(&mut file).unwrap();
        let mut streams = [StreamBuffer::new(0), StreamBuffer::new(1)];
        for &(stream, kind, payload) in frames {
            let buffer = &mut streams[stream as usize];
            buffer.push(kind, payload);
            buffer.drain_to(&mut file).unwrap();
        }
        file
    }

    const FRAMES: [(u32, u16, &[u8]); 4] = [
        (0, 1, b"device"),
        (1, 2, b""),
        (1, 3, b"a longer payload, with bytes"),
        (0, 4, &[0xff; 40]),
    ];

    /// A frame as the tests compare it: stream, kind, payload.
    type Owned = (u32, u16, Vec<u8>);

    fn read(bytes: &[u8]) -> (Vec<Owned>, Option<CaptureError>) {
        let mut frames = Vec::new();
        for frame in FrameReader::new(bytes).unwrap() {
            match frame {
                Ok(f) => frames.push((f.stream, f.kind, f.payload.to_vec())),
                Err(e) => return (frames, Some(e)),
            }
        }
        (frames, None)
    }

    /// The reader's offset is after the last whole frame read, and a frame may be as long
    /// as `MAX_PAYLOAD` (one that long, cut, is a cut, not too long).
    #[test]
    fn the_reader_says_where_it_is_and_takes_the_longest_frame() {
        let file = capture(&FRAMES);
        let mut reader = FrameReader::new(&file).unwrap();
        assert_eq!(reader.offset(), HEADER_LEN);
        reader.next().unwrap().unwrap();
        assert_eq!(
            reader.offset(),
            HEADER_LEN + FRAME_HEADER_LEN + FRAMES[0].2.len()
        );
        let mut longest = Vec::new();
        write_header(&mut longest).unwrap();
        longest.extend(MAX_PAYLOAD.to_le_bytes());
        longest.extend([0; FRAME_HEADER_LEN - 4]);
        let error = FrameReader::new(&longest)
            .unwrap()
            .next()
            .unwrap()
            .unwrap_err();
        assert_eq!(error.kind, CaptureErrorKind::TornTail);
    }

    /// A stream buffer counts the frames and bytes waiting, until they are drained; a frame
    /// longer than `MAX_PAYLOAD` is taken back whole.
    #[test]
    fn a_stream_buffer_counts_what_waits_and_refuses_a_frame_too_long() {
        let mut buffer = StreamBuffer::new(1);
        assert!(buffer.is_empty());
        assert_eq!((buffer.frames(), buffer.len()), (0, 0));
        buffer.push(2, b"abc");
        buffer.push(3, b"");
        assert!(!buffer.is_empty());
        assert_eq!(
            (buffer.frames(), buffer.len()),
            (2, 2 * FRAME_HEADER_LEN + 3)
        );
        let start = buffer.begin_frame(4);
        buffer
            .payload()
            .resize(start + FRAME_HEADER_LEN + MAX_PAYLOAD as usize + 1, 0);
        assert!(!buffer.end_frame(start), "one byte too long");
        assert_eq!(
            (buffer.frames(), buffer.len()),
            (2, 2 * FRAME_HEADER_LEN + 3)
        );
        let start = buffer.begin_frame(4);
        buffer
            .payload()
            .resize(start + FRAME_HEADER_LEN + MAX_PAYLOAD as usize, 0);
        assert!(buffer.end_frame(start), "as long as a frame may be");
        buffer.drain_to(&mut std::io::sink()).unwrap();
        assert!(buffer.is_empty());
        assert_eq!((buffer.frames(), buffer.len()), (0, 0));
    }

    #[test]
    fn frames_read_back_as_written_in_order() {
        let (frames, error) = read(&capture(&FRAMES));
        assert_eq!(error, None);
        let want: Vec<_> = FRAMES.iter().map(|&(s, k, p)| (s, k, p.to_vec())).collect();
        assert_eq!(frames, want);
    }

    /// Cut at every byte (a crash mid-write): every whole frame before the cut reads back,
    /// then one TornTail naming the cut frame; a cut between frames reads cleanly.
    #[test]
    fn a_capture_cut_anywhere_reads_to_its_last_whole_record() {
        let file = capture(&FRAMES);
        let mut ends = vec![HEADER_LEN];
        for &(_, _, payload) in &FRAMES {
            ends.push(ends.last().unwrap() + FRAME_HEADER_LEN + payload.len());
        }
        for cut in HEADER_LEN..=file.len() {
            let (frames, error) = read(&file[..cut]);
            let whole = ends.iter().filter(|&&end| end <= cut).count() - 1;
            assert_eq!(frames.len(), whole, "cut at {cut}");
            match error {
                None => assert!(ends.contains(&cut), "cut at {cut}: no error mid-frame"),
                Some(e) => {
                    assert_eq!(e.kind, CaptureErrorKind::TornTail, "cut at {cut}");
                    assert_eq!(e.record, whole as u64);
                    assert_eq!(e.offset, ends[whole] as u64);
                }
            }
        }
    }

    /// A flipped bit anywhere after the header: the frames before it read back, and the
    /// damaged one is an error naming it (never a frame with wrong contents).
    #[test]
    fn a_flipped_bit_is_reported_at_its_record() {
        let file = capture(&FRAMES);
        let (clean, _) = read(&file);
        for at in HEADER_LEN..file.len() {
            for bit in [0, 3, 7] {
                let mut bad = file.clone();
                bad[at] ^= 1 << bit;
                let (frames, error) = read(&bad);
                let e = error.unwrap_or_else(|| panic!("byte {at} bit {bit}: no error"));
                assert_eq!(frames[..], clean[..frames.len()], "byte {at} bit {bit}");
                assert_eq!(e.record, frames.len() as u64);
            }
        }
    }

    #[test]
    fn a_header_of_another_kind_is_refused() {
        let file = capture(&FRAMES);
        let kind = |bytes: &[u8]| FrameReader::new(bytes).unwrap_err().kind;
        assert_eq!(kind(b"not a capture at all"), CaptureErrorKind::NotACapture);
        assert_eq!(kind(&file[..10]), CaptureErrorKind::TornTail);
        let mut bad = file.clone();
        bad[12] ^= 1;
        assert_eq!(kind(&bad), CaptureErrorKind::BadHeader);
        let mut other = file.clone();
        other[8..12].copy_from_slice(&2u32.to_le_bytes());
        let crc = crc32fast::hash(&other[..12]);
        other[12..16].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(kind(&other), CaptureErrorKind::Version { found: 2 });
    }

    /// A length above the bound is refused before anything is read: no allocation, no
    /// read past the bytes.
    #[test]
    fn a_hostile_length_is_refused() {
        let mut file = capture(&[]);
        let mut frame = [0u8; FRAME_HEADER_LEN];
        frame[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        file.extend_from_slice(&frame);
        let (frames, error) = read(&file);
        assert!(frames.is_empty());
        let e = error.unwrap();
        assert_eq!(e.kind, CaptureErrorKind::TooLong { len: u32::MAX });
        assert_eq!((e.record, e.offset), (0, HEADER_LEN as u64));
        assert!(e.to_string().contains("record 0"));
    }

    #[test]
    fn a_buffer_keeps_its_frames_until_a_sink_takes_them() {
        struct Refusing;
        impl std::io::Write for Refusing {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::ErrorKind::Other.into())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut buffer = StreamBuffer::new(3);
        buffer.push(1, b"kept");
        assert!(buffer.drain_to(&mut Refusing).is_err());
        assert_eq!(buffer.frames(), 1);
        let mut file = Vec::new();
        write_header(&mut file).unwrap();
        buffer.drain_to(&mut file).unwrap();
        assert!(buffer.is_empty());
        let (frames, error) = read(&file);
        assert_eq!((frames, error), (vec![(3, 1, b"kept".to_vec())], None));
    }
}
