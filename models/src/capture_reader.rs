//! The capture format's reader against arbitrary bytes (`cmdlist::capture`): whatever the
//! bytes, reading them never panics, and what it returns is exactly what the bytes hold.
//!
//! [`run`] reads `bytes` twice: as a whole file (its header included, so that damaged
//! headers are read too), and as the frames after a valid header. For the second, every
//! frame read is encoded again through a [`StreamBuffer`] and the result must be the input's
//! bytes up to where the reader stopped, byte for byte; an error must name the record after
//! the last one read and the offset where it starts. Every payload is also decoded as a soft
//! driver's command ([`CaptureCommand`]): an error or a command, which encoded again is the
//! payload's prefix that was read.

use cmdlist::capture::{
    write_header, CaptureCommand, CaptureErrorKind, Decoder, Encoder, FrameReader, StreamBuffer,
    HEADER_LEN,
};
use cmdlist::handle::AnyHandle;
use cmdlist::soft::SoftCommand;

/// Decodes `payload` as a soft command; one that decodes encodes back to the bytes read
/// (panics otherwise).
pub fn decode_command(payload: &[u8]) {
    let mut same = |bits: u64| AnyHandle::from_bits(bits);
    let mut dec = Decoder::new(payload, &mut same);
    if let Ok(command) = SoftCommand::decode(&mut dec) {
        let read = payload.len() - dec.remaining();
        let mut again = Vec::new();
        command.encode(&mut Encoder::new(&mut again));
        assert_eq!(
            again[..],
            payload[..read],
            "a command is the bytes it was read from"
        );
    }
}

/// Reads `bytes` as described in the module docs; panics on any mismatch.
pub fn run(bytes: &[u8]) {
    // As a whole file: anything goes, but no panic and no frame past the bytes.
    if let Ok(reader) = FrameReader::new(bytes) {
        for frame in reader {
            match frame {
                Ok(f) => assert!(f.offset as usize + f.payload.len() <= bytes.len()),
                Err(_) => break,
            }
        }
    }
    // As frames after a valid header.
    let mut file = Vec::with_capacity(HEADER_LEN + bytes.len());
    write_header(&mut file).expect("a Vec takes the header");
    file.extend_from_slice(bytes);
    let mut reader = FrameReader::new(&file).expect("a valid header");
    let mut again = Vec::with_capacity(file.len());
    write_header(&mut again).expect("a Vec takes the header");
    let mut records = 0u64;
    let mut end = HEADER_LEN;
    for frame in reader.by_ref() {
        match frame {
            Ok(f) => {
                decode_command(f.payload);
                assert_eq!(f.record, records, "records are numbered in order");
                assert_eq!(f.offset as usize, end, "frames follow one another");
                let mut stream = StreamBuffer::new(f.stream);
                stream.push(f.kind, f.payload);
                stream.drain_to(&mut again).expect("a Vec takes the frame");
                records += 1;
                end = again.len();
            }
            Err(e) => {
                assert_eq!(
                    e.record, records,
                    "the error names the record after the last"
                );
                assert_eq!(e.offset as usize, end, "at the offset it starts");
                assert!(!matches!(
                    e.kind,
                    CaptureErrorKind::NotACapture
                        | CaptureErrorKind::BadHeader
                        | CaptureErrorKind::Version { .. }
                ));
                assert!(e.to_string().contains(&format!("record {records}")));
                break;
            }
        }
    }
    assert_eq!(reader.next(), None, "nothing after the end or an error");
    assert_eq!(again[..], file[..end], "the frames read are the bytes read");
}
