//! The soft driver's commands in a capture (feature `capture`): a tag byte per kind, then
//! its objects, offsets and values.

use super::driver::SoftCommand;
use crate::capture::{CaptureCommand, DecodeError, Decoder, Encoder};

const COPY: u8 = 0;
const COPY_REGION: u8 = 1;
const FILL: u8 = 2;
const CLEAR_VIEW: u8 = 3;
const FILL_BOUND: u8 = 4;
const FILL_IC_BYTE: u8 = 5;
const DRAW: u8 = 6;

impl CaptureCommand for SoftCommand {
    fn encode(&self, enc: &mut Encoder<'_>) {
        match *self {
            SoftCommand::Copy { dst, src } => {
                enc.u8(COPY);
                enc.object(dst);
                enc.object(src);
            }
            SoftCommand::CopyRegion {
                dst,
                dst_offset,
                src,
                src_offset,
                len,
            } => {
                enc.u8(COPY_REGION);
                enc.object(dst);
                enc.u64(dst_offset);
                enc.object(src);
                enc.u64(src_offset);
                enc.u64(len);
            }
            SoftCommand::Fill { dst, value } => {
                enc.u8(FILL);
                enc.object(dst);
                enc.u8(value);
            }
            SoftCommand::ClearView { view, value } => {
                enc.u8(CLEAR_VIEW);
                enc.object(view);
                enc.u8(value);
            }
            SoftCommand::FillBound { point, value } => {
                enc.u8(FILL_BOUND);
                enc.point(point);
                enc.u8(value);
            }
            SoftCommand::FillIcByte { dst } => {
                enc.u8(FILL_IC_BYTE);
                enc.object(dst);
            }
            SoftCommand::Draw {
                constants,
                vertices,
                point,
            } => {
                enc.u8(DRAW);
                enc.object(constants);
                enc.object(vertices);
                enc.point(point);
            }
        }
    }

    fn decode(dec: &mut Decoder<'_, '_>) -> Result<Self, DecodeError> {
        let at = dec.error("a soft command's kind");
        Ok(match dec.u8()? {
            COPY => SoftCommand::Copy {
                dst: dec.object()?,
                src: dec.object()?,
            },
            COPY_REGION => SoftCommand::CopyRegion {
                dst: dec.object()?,
                dst_offset: dec.u64()?,
                src: dec.object()?,
                src_offset: dec.u64()?,
                len: dec.u64()?,
            },
            FILL => SoftCommand::Fill {
                dst: dec.object()?,
                value: dec.u8()?,
            },
            CLEAR_VIEW => SoftCommand::ClearView {
                view: dec.object()?,
                value: dec.u8()?,
            },
            FILL_BOUND => SoftCommand::FillBound {
                point: dec.point()?,
                value: dec.u8()?,
            },
            FILL_IC_BYTE => SoftCommand::FillIcByte { dst: dec.object()? },
            DRAW => SoftCommand::Draw {
                constants: dec.object()?,
                vertices: dec.object()?,
                point: dec.point()?,
            },
            _ => return Err(at),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bind::{BindClass, BindPoint, Stage};
    use crate::handle::{AnyHandle, Handle};

    fn h<T: crate::handle::ObjectKind>(n: u64) -> Handle<T> {
        Handle::from_bits(n | 1 << 32).unwrap()
    }

    fn all() -> Vec<SoftCommand> {
        let point = BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 3);
        vec![
            SoftCommand::Copy {
                dst: h(1),
                src: h(2),
            },
            SoftCommand::CopyRegion {
                dst: h(3),
                dst_offset: 4,
                src: h(5),
                src_offset: 6,
                len: 7,
            },
            SoftCommand::Fill {
                dst: h(8),
                value: 9,
            },
            SoftCommand::ClearView {
                view: h(10),
                value: 11,
            },
            SoftCommand::FillBound { point, value: 12 },
            SoftCommand::FillIcByte { dst: h(13) },
            SoftCommand::Draw {
                constants: h(14),
                vertices: h(15),
                point,
            },
        ]
    }

    /// Each command round-trips, its objects through the replay's map; cut short, or with
    /// an unknown tag, it is an error.
    #[test]
    fn soft_commands_round_trip_and_damaged_ones_are_errors() {
        let mapped = |bits: u64| AnyHandle::from_bits(bits + 100);
        for command in all() {
            let mut out = Vec::new();
            command.encode(&mut Encoder::new(&mut out));
            let mut map = mapped;
            let mut dec = Decoder::new(&out, &mut map);
            let back = SoftCommand::decode(&mut dec).unwrap();
            dec.finish().unwrap();
            let mut again = Vec::new();
            back.encode(&mut Encoder::new(&mut again));
            // Every object moved by the map's 100, nothing else changed.
            let mut unmap = |bits: u64| AnyHandle::from_bits(bits - 100);
            let mut dec = Decoder::new(&again, &mut unmap);
            assert_eq!(SoftCommand::decode(&mut dec), Ok(command));
            for cut in 0..out.len() {
                let mut map = mapped;
                let mut dec = Decoder::new(&out[..cut], &mut map);
                assert!(
                    SoftCommand::decode(&mut dec).is_err(),
                    "{command:?} cut at {cut}"
                );
            }
        }
        let mut map = |bits: u64| AnyHandle::from_bits(bits);
        let mut dec = Decoder::new(&[7], &mut map);
        assert_eq!(
            SoftCommand::decode(&mut dec).unwrap_err().what,
            "a soft command's kind"
        );
    }
}
