//! A record's payload: integers little-endian, byte strings with their length, handles
//! mapped to the capture's own ids on the way in and to the replaying device's on the way
//! out, and the driver's commands through [`CaptureCommand`].
//!
//! Decoding is total: whatever the bytes, a [`Decoder`] answers a value or a
//! [`DecodeError`] saying where and what, never a panic, and a length never makes it read
//! past its bytes or allocate.

use core::fmt;

use crate::bind::{BindClass, BindPoint, Stage};
use crate::handle::{AnyHandle, Handle, ObjectKind};

/// Why a payload could not be decoded: at which byte, and what was expected there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// The byte offset in the payload.
    pub at: usize,
    /// What was expected.
    pub what: &'static str,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "byte {} of the record: {}", self.at, self.what)
    }
}

impl std::error::Error for DecodeError {}

/// A driver command a capture can keep (R-T1's calls carry the driver's `Command`): encoded
/// to bytes when recorded, decoded when replayed, naming objects through the encoder's and
/// the decoder's handles so that a replay names its own device's objects.
pub trait CaptureCommand: Sized {
    /// Appends the command to `enc`.
    fn encode(&self, enc: &mut Encoder<'_>);
    /// Reads one back; bytes that are not a command are a [`DecodeError`].
    fn decode(dec: &mut Decoder<'_, '_>) -> Result<Self, DecodeError>;
}

/// Appends a payload's values to a byte vector.
#[derive(Debug)]
pub struct Encoder<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> Encoder<'a> {
    /// An encoder appending to `out`.
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        Encoder { out }
    }

    /// A byte.
    #[inline]
    pub fn u8(&mut self, v: u8) {
        self.out.push(v);
    }

    /// A 16-bit integer.
    #[inline]
    pub fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    /// A 32-bit integer.
    #[inline]
    pub fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    /// A 64-bit integer.
    #[inline]
    pub fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }

    /// A byte string, its length first.
    #[inline]
    pub fn bytes(&mut self, v: &[u8]) {
        self.u64(v.len() as u64);
        self.out.extend_from_slice(v);
    }

    /// An object, by its handle's bits (unique within a device's life: the capture's id).
    #[inline]
    pub fn handle(&mut self, h: AnyHandle) {
        self.u64(h.to_bits());
    }

    /// An object of a known kind, as [`Encoder::handle`].
    pub fn object<T: ObjectKind>(&mut self, h: Handle<T>) {
        self.handle(h.any());
    }

    /// A binding point: its class (a byte, and the stage's for the per-stage classes) and
    /// its slot.
    #[inline]
    pub fn point(&mut self, p: BindPoint) {
        let (class, stage) = class_code(p.class);
        self.u8(class);
        self.u8(stage);
        self.u16(p.slot);
    }
}

/// Reads a payload's values back, in order.
pub struct Decoder<'a, 'm> {
    bytes: &'a [u8],
    at: usize,
    map: &'m mut dyn FnMut(u64) -> Option<AnyHandle>,
}

impl fmt::Debug for Decoder<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoder")
            .field("len", &self.bytes.len())
            .field("at", &self.at)
            .finish_non_exhaustive()
    }
}

impl<'a, 'm> Decoder<'a, 'm> {
    /// A decoder of `bytes` whose handles `map` turns into the replaying device's (`None`:
    /// an object the capture never made).
    pub fn new(bytes: &'a [u8], map: &'m mut dyn FnMut(u64) -> Option<AnyHandle>) -> Self {
        Decoder { bytes, at: 0, map }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    /// An error at the current byte.
    pub fn error(&self, what: &'static str) -> DecodeError {
        DecodeError { at: self.at, what }
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let bytes: &'a [u8] = self.bytes;
        match bytes.get(self.at..).and_then(|rest| rest.get(..n)) {
            Some(taken) => {
                self.at += n;
                Ok(taken)
            }
            None => Err(self.error(what)),
        }
    }

    /// A byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1, "a byte")?[0])
    }

    /// A 16-bit integer.
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        let b = self.take(2, "a 16-bit integer")?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    /// A 32-bit integer.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4, "a 32-bit integer")?;
        Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }

    /// A 64-bit integer.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8, "a 64-bit integer")?;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    /// A byte string, borrowed: its length is checked against the bytes left before
    /// anything is taken.
    pub fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.u64()?;
        let len = usize::try_from(len)
            .ok()
            .filter(|&len| len <= self.remaining())
            .ok_or(self.error("a byte string within the record"))?;
        self.take(len, "a byte string within the record")
    }

    /// An object: the replaying device's handle for the capture's id.
    pub fn handle(&mut self) -> Result<AnyHandle, DecodeError> {
        let at = self.at;
        let bits = self.u64()?;
        (self.map)(bits).ok_or(DecodeError {
            at,
            what: "an object the capture made",
        })
    }

    /// An object of a known kind (the engine checks the kind where the handle is used, as
    /// for any handle an application passes).
    pub fn object<T: ObjectKind>(&mut self) -> Result<Handle<T>, DecodeError> {
        let h = self.handle()?;
        Ok(Handle::from_bits(h.to_bits()).expect("a handle's bits are a handle's"))
    }

    /// A binding point.
    pub fn point(&mut self) -> Result<BindPoint, DecodeError> {
        let at = self.at;
        let (class, stage) = (self.u8()?, self.u8()?);
        let class = class_of(class, stage).ok_or(DecodeError {
            at,
            what: "a binding class",
        })?;
        Ok(BindPoint::new(class, self.u16()?))
    }

    /// Checks that every byte was read: trailing bytes are not a record of this kind.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            _ => Err(self.error("the record's end")),
        }
    }
}

const STAGES: [Stage; 6] = [
    Stage::Vertex,
    Stage::Hull,
    Stage::Domain,
    Stage::Geometry,
    Stage::Pixel,
    Stage::Compute,
];

fn stage_code(s: Stage) -> u8 {
    STAGES
        .iter()
        .position(|&x| x == s)
        .expect("every stage listed") as u8
}

/// A class's code and its stage's (0 for classes without one).
fn class_code(c: BindClass) -> (u8, u8) {
    match c {
        BindClass::VertexBuffer => (0, 0),
        BindClass::IndexBuffer => (1, 0),
        BindClass::InputLayout => (2, 0),
        BindClass::Shader(s) => (3, stage_code(s)),
        BindClass::ConstantBuffer(s) => (4, stage_code(s)),
        BindClass::ShaderResource(s) => (5, stage_code(s)),
        BindClass::Sampler(s) => (6, stage_code(s)),
        BindClass::RenderTarget => (7, 0),
        BindClass::DepthStencil => (8, 0),
        BindClass::UnorderedAccess => (9, 0),
        BindClass::BlendState => (10, 0),
        BindClass::DepthStencilState => (11, 0),
        BindClass::RasterizerState => (12, 0),
        BindClass::StreamOutput => (13, 0),
        BindClass::Predicate => (14, 0),
    }
}

/// The class of a code pair; `None` for a code no class has (a stage byte on a class
/// without a stage included).
fn class_of(class: u8, stage: u8) -> Option<BindClass> {
    let per_stage = |f: fn(Stage) -> BindClass| STAGES.get(usize::from(stage)).map(|&s| f(s));
    let plain = |c: BindClass| (stage == 0).then_some(c);
    match class {
        0 => plain(BindClass::VertexBuffer),
        1 => plain(BindClass::IndexBuffer),
        2 => plain(BindClass::InputLayout),
        3 => per_stage(BindClass::Shader),
        4 => per_stage(BindClass::ConstantBuffer),
        5 => per_stage(BindClass::ShaderResource),
        6 => per_stage(BindClass::Sampler),
        7 => plain(BindClass::RenderTarget),
        8 => plain(BindClass::DepthStencil),
        9 => plain(BindClass::UnorderedAccess),
        10 => plain(BindClass::BlendState),
        11 => plain(BindClass::DepthStencilState),
        12 => plain(BindClass::RasterizerState),
        13 => plain(BindClass::StreamOutput),
        14 => plain(BindClass::Predicate),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decoder shows how far it read of how much, not the bytes (a capture's payloads may
    /// be large) nor its map; it finishes where the bytes end.
    #[test]
    fn a_decoder_debugs_as_its_place_and_finishes_at_the_end() {
        let bytes = [1, 0, 0, 0, 9];
        let mut none = |_: u64| None;
        let mut dec = Decoder::new(&bytes, &mut none);
        dec.u32().unwrap();
        assert_eq!(format!("{dec:?}"), "Decoder { len: 5, at: 4, .. }");
        // A byte left over is not the record's end.
        let e = dec.finish().unwrap_err();
        assert_eq!((e.at, e.what), (4, "the record's end"));
        dec.u8().unwrap();
        assert_eq!(dec.finish(), Ok(()));
    }

    #[test]
    fn every_binding_point_round_trips_and_other_codes_are_refused() {
        let all = crate::bind::CLASSES;
        let mut codes = std::collections::BTreeSet::new();
        for class in &all {
            let p = BindPoint::new(*class, 7);
            let mut out = Vec::new();
            Encoder::new(&mut out).point(p);
            codes.insert((out[0], out[1]));
            let mut none = |_| None;
            let mut dec = Decoder::new(&out, &mut none);
            assert_eq!(dec.point(), Ok(p));
            dec.finish().unwrap();
        }
        assert_eq!(codes.len(), all.len(), "one code per class");
        for class in 0..=u8::MAX {
            for stage in 0..=u8::MAX {
                let decoded = class_of(class, stage);
                assert_eq!(decoded.is_some(), codes.contains(&(class, stage)));
            }
        }
    }

    #[test]
    fn values_round_trip_and_short_or_hostile_bytes_are_errors() {
        let mut out = Vec::new();
        let mut enc = Encoder::new(&mut out);
        enc.u8(1);
        enc.u16(2);
        enc.u32(3);
        enc.u64(4);
        enc.bytes(b"five");
        enc.handle(AnyHandle::from_bits(6 | 1 << 32).unwrap());
        let mut map = |bits: u64| AnyHandle::from_bits(bits + 1);
        let mut dec = Decoder::new(&out, &mut map);
        assert_eq!(dec.u8(), Ok(1));
        assert_eq!(dec.u16(), Ok(2));
        assert_eq!(dec.u32(), Ok(3));
        assert_eq!(dec.u64(), Ok(4));
        assert_eq!(dec.bytes(), Ok(&b"five"[..]));
        assert_eq!(dec.handle(), Ok(AnyHandle::from_bits(7 | 1 << 32).unwrap()));
        dec.finish().unwrap();
        // Cut anywhere: an error, never a panic.
        for cut in 0..out.len() {
            let mut map = |bits: u64| AnyHandle::from_bits(bits);
            let mut dec = Decoder::new(&out[..cut], &mut map);
            let all = (|| {
                dec.u8()?;
                dec.u16()?;
                dec.u32()?;
                dec.u64()?;
                dec.bytes()?;
                dec.handle()
            })();
            assert!(all.is_err(), "cut at {cut}");
        }
        // A hostile length is refused before anything is taken.
        let mut hostile = Vec::new();
        Encoder::new(&mut hostile).u64(u64::MAX);
        let mut none = |_| None;
        let mut dec = Decoder::new(&hostile, &mut none);
        assert_eq!(
            dec.bytes().unwrap_err().what,
            "a byte string within the record"
        );
        // An unknown object.
        let mut none = |_| None;
        let mut dec = Decoder::new(&out[15..], &mut none);
        dec.bytes().unwrap();
        assert_eq!(
            dec.handle().unwrap_err(),
            DecodeError {
                at: 12,
                what: "an object the capture made"
            }
        );
    }
}
