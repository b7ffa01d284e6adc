//! One texel of a display format to and from normalised RGBA, and the D3D number conversions
//! the reference Blt (R-X6, R-X7) is built from.
//!
//! Reading and writing apply no transfer function: an integer format reads as its normalised
//! (gamma-encoded) value, the float format as its linear value. The sRGB curve is separate
//! ([`srgb_to_linear`], [`linear_to_srgb`]) because whether it applies depends on the pair of
//! formats, not on one.
//!
//! The rules, as D3D defines them:
//!
//! - UNORM to float: `k / (2^n - 1)`, a real (correctly rounded) division, not a multiplication
//!   by a rounded reciprocal.
//! - Float to UNORM: NaN is 0; clamp to `[0, 1]`; `floor(c * (2^n - 1) + 0.5)` (round half up,
//!   exact: the product is formed in `f64`, where it cannot round). A one-bit alpha is the same
//!   rule with n = 1, so 0.5 writes 1.
//! - Float to binary16: round toward zero; a finite value beyond the largest finite binary16
//!   becomes the largest finite value of its sign; infinities stay infinite and NaN stays NaN.
//! - A channel a format lacks reads 1.0 (the alpha of B5G6R5 and B8G8R8X8); the X8 byte is
//!   written 0xFF.
//! - sRGB decode: `c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055)^2.4`; encode:
//!   `c <= 0.0031308 ? 12.92 c : 1.055 c^(1/2.4) - 0.055` (the piecewise IEC 61966-2-1 curve).

use super::DisplayFormat;

/// Where one channel sits in an integer format's little-endian word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Channel {
    /// Its lowest bit.
    pub(crate) shift: u32,
    /// Its width in bits; 0 when the format lacks it.
    pub(crate) bits: u32,
}

impl Channel {
    const fn new(shift: u32, bits: u32) -> Self {
        Channel { shift, bits }
    }

    /// The channel a format lacks.
    const ABSENT: Channel = Channel::new(0, 0);

    /// Its largest code, `2^bits - 1` (0 when absent).
    pub(crate) const fn max(self) -> u32 {
        if self.bits == 0 {
            0
        } else {
            u32::MAX >> (32 - self.bits)
        }
    }

    /// Its code in `word`.
    #[inline]
    pub(crate) const fn code(self, word: u32) -> u32 {
        (word >> self.shift) & self.max()
    }
}

/// An integer display format's layout: R, G, B, A channels of one little-endian word, and the
/// bits written as ones whatever the value (the X8 byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// R, G, B, A.
    pub(crate) channels: [Channel; 4],
    /// Bits set on every write.
    pub(crate) fill: u32,
}

/// A layout of R, G, B and A from `(shift, bits)` pairs.
const fn layout_of(r: (u32, u32), g: (u32, u32), b: (u32, u32), a: Channel, fill: u32) -> Layout {
    Layout {
        channels: [
            Channel::new(r.0, r.1),
            Channel::new(g.0, g.1),
            Channel::new(b.0, b.1),
            a,
        ],
        fill,
    }
}

/// `R10G10B10A2_UNORM`.
pub(crate) const R10G10B10A2: Layout =
    layout_of((0, 10), (10, 10), (20, 10), Channel::new(30, 2), 0);
/// `R8G8B8A8_UNORM` and `R8G8B8A8_UNORM_SRGB`.
pub(crate) const R8G8B8A8: Layout = layout_of((0, 8), (8, 8), (16, 8), Channel::new(24, 8), 0);
/// `B5G6R5_UNORM`.
pub(crate) const B5G6R5: Layout = layout_of((11, 5), (5, 6), (0, 5), Channel::ABSENT, 0);
/// `B5G5R5A1_UNORM`.
pub(crate) const B5G5R5A1: Layout = layout_of((10, 5), (5, 5), (0, 5), Channel::new(15, 1), 0);
/// `B8G8R8A8_UNORM`.
pub(crate) const B8G8R8A8: Layout = layout_of((16, 8), (8, 8), (0, 8), Channel::new(24, 8), 0);
/// `B8G8R8X8_UNORM`: the X8 byte written as ones.
pub(crate) const B8G8R8X8: Layout =
    layout_of((16, 8), (8, 8), (0, 8), Channel::ABSENT, 0xFF00_0000);

/// The layout of an integer format; `None` for the float format.
pub(crate) const fn layout(format: DisplayFormat) -> Option<Layout> {
    Some(match format {
        DisplayFormat::R16G16B16A16Float => return None,
        DisplayFormat::R10G10B10A2Unorm => R10G10B10A2,
        DisplayFormat::R8G8B8A8Unorm | DisplayFormat::R8G8B8A8UnormSrgb => R8G8B8A8,
        DisplayFormat::B5G6R5Unorm => B5G6R5,
        DisplayFormat::B5G5R5A1Unorm => B5G5R5A1,
        DisplayFormat::B8G8R8A8Unorm => B8G8R8A8,
        DisplayFormat::B8G8R8X8Unorm => B8G8R8X8,
    })
}

/// The little-endian word of a 2- or 4-byte texel (`bytes` holds at least that many).
#[inline]
pub(crate) fn read_word(bytes: &[u8], bytes_per_pixel: usize) -> u32 {
    if bytes_per_pixel == 2 {
        u32::from(u16::from_le_bytes([bytes[0], bytes[1]]))
    } else {
        u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
    }
}

/// UNORM code to float: `code / max`, a real division.
pub(crate) fn unorm_to_f32(code: u32, max: u32) -> f32 {
    code as f32 / max as f32
}

/// Float to a UNORM code of largest code `max`: NaN is 0, clamp, round half up.
#[inline]
pub(crate) fn f32_to_unorm(c: f32, max: u32) -> u32 {
    // A 24-bit mantissa times a code of at most 10 bits, plus one half: exact in f64, so
    // truncating it is `floor(c * max + 0.5)` exactly. The float-to-integer cast saturates
    // (negative values and -INF to 0, NaN to 0, +INF to `u32::MAX`), which with the `min`
    // is the clamp to [0, 1]: for c in [0, 1] nothing changes, above 1 the code is at least
    // `max`, below 0 the sum is under 0.5. No branch and no `floor` call (a library call on
    // x86-64 without SSE4.1).
    ((f64::from(c) * f64::from(max) + 0.5) as u32).min(max)
}

/// Float to binary16 bits: round toward zero, finite overflow to the largest finite value,
/// infinities and NaN kept (a NaN keeps its sign and the top ten bits of its payload, and is
/// quiet).
///
/// Truncation needs no rounding step: a binary16 has the binary32's sign, a narrower exponent
/// and the top ten of its 23 fraction bits, so dropping the low bits is rounding toward zero
/// wherever both formats are normal; below binary16's normal range the significand (with its
/// implicit bit) is shifted into units of 2^-24, again dropping bits.
pub(crate) fn f32_to_f16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xFF) as i32;
    let fraction = bits & 0x007F_FFFF;
    if exp == 0xFF {
        // Infinity, or NaN: quiet, with the payload's top bits (so never infinity).
        let quiet = if fraction == 0 { 0 } else { 0x0200 };
        return sign | 0x7C00 | quiet | (fraction >> 13) as u16;
    }
    // The unbiased exponent; a binary32 subnormal (exp 0) is far below binary16's range.
    let e = exp - 127;
    if e > 15 {
        // Beyond 65504 + one step: the largest finite value of the sign.
        sign | 0x7BFF
    } else if e >= -14 {
        // Normal in both: rebias the exponent, keep the fraction's top ten bits.
        sign | (((e + 15) as u16) << 10) | (fraction >> 13) as u16
    } else if e >= -24 {
        // A binary16 subnormal: the value is (2^23 + fraction) * 2^(e - 23), that is
        // (2^23 + fraction) >> -(e + 1) units of 2^-24 (a shift of 14 to 23).
        sign | ((0x0080_0000 | fraction) >> -(e + 1)) as u16
    } else {
        // Under 2^-24: zero of the sign.
        sign
    }
}

/// Binary16 bits to float (exact: every binary16 is a binary32). A NaN keeps its sign and
/// payload and is quiet.
pub(crate) fn f16_bits_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits & 0x8000) << 16;
    let exp = u32::from((bits >> 10) & 0x1F);
    let fraction = u32::from(bits & 0x03FF);
    let magnitude = match (exp, fraction) {
        (0x1F, 0) => 0x7F80_0000,
        (0x1F, _) => 0x7FC0_0000 | (fraction << 13),
        // Zero and subnormals: fraction units of 2^-24; the product is exact (ten bits times
        // a power of two).
        (0, _) => (fraction as f32 * f32::from_bits(0x3380_0000)).to_bits(),
        // Normal: rebias the exponent (127 - 15 = 112), widen the fraction.
        _ => ((exp + 112) << 23) | (fraction << 13),
    };
    f32::from_bits(sign | magnitude)
}

/// sRGB-encoded to linear, the piecewise curve; NaN stays NaN.
pub(crate) fn srgb_to_linear(c: f32) -> f32 {
    let c = f64::from(c);
    let l = if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    };
    l as f32
}

/// Linear to sRGB-encoded, the piecewise curve, clamped to `[0, 1]` first (NaN is 0), as the
/// quantisation that follows would.
pub(crate) fn linear_to_srgb(c: f32) -> f32 {
    if c.is_nan() {
        return 0.0;
    }
    let c = f64::from(c.clamp(0.0, 1.0));
    let e = if c <= 0.0031308 {
        12.92 * c
    } else {
        1.055 * c.powf(1.0 / 2.4) - 0.055
    };
    e as f32
}

/// Linear light to an sRGB-encoded UNORM code, `f32_to_unorm(linear_to_srgb(c), max)`,
/// without a `powf` per value: the code is a step function of `c`, so it is the number of
/// steps at or below `c`. The steps (the smallest `f32` reaching each code, found by
/// bisection on the direct formula) are built once per code width; a table indexed by the top
/// 16 bits of `c` gives the code at the start of its bucket, from which at most a few steps
/// are passed.
pub(crate) struct SrgbQuantiser {
    /// `steps[k]`: the smallest `c` whose code is at least `k + 1`; followed by `scan`
    /// infinities, so a scan never runs off the end.
    steps: Vec<f32>,
    /// The most steps between a bucket's start and a value in it.
    scan: usize,
    /// The largest code.
    max: u32,
    /// For each value of `c.to_bits() >> 16` in `[0, 1]`: the code of the bucket's smallest
    /// value.
    start: Vec<u16>,
}

impl SrgbQuantiser {
    /// The shared table for codes up to `max` (built on first use), for the widths the
    /// display formats have (5, 6, 8 and 10 bits); `None` for any other.
    pub(crate) fn get(max: u32) -> Option<&'static SrgbQuantiser> {
        use std::sync::OnceLock;
        static TABLES: [OnceLock<SrgbQuantiser>; 4] = [
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
            OnceLock::new(),
        ];
        let slot = match max {
            31 => 0,
            63 => 1,
            255 => 2,
            1023 => 3,
            _ => return None,
        };
        Some(TABLES[slot].get_or_init(|| SrgbQuantiser::new(max)))
    }

    fn new(max: u32) -> Self {
        let direct = |bits: u32| f32_to_unorm(linear_to_srgb(f32::from_bits(bits)), max);
        let one = 1.0f32.to_bits();
        let steps: Vec<f32> = (1..=max)
            .map(|k| {
                // Positive floats order as their bits; code(0) = 0 < k <= max = code(1).
                let (mut lo, mut hi) = (0u32, one);
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    if direct(mid) >= k {
                        hi = mid;
                    } else {
                        lo = mid;
                    }
                }
                f32::from_bits(hi)
            })
            .collect();
        let count = |c: f32| steps.partition_point(|t| *t <= c);
        let start: Vec<u16> = (0..=one >> 16)
            .map(|bucket| count(f32::from_bits(bucket << 16)) as u16)
            .collect();
        // The steps inside each bucket: those below its last value.
        let scan = (0..one >> 16)
            .map(|bucket| {
                count(f32::from_bits((bucket << 16) | 0xFFFF)) - usize::from(start[bucket as usize])
            })
            .max()
            .unwrap_or(0);
        let mut steps = steps;
        steps.extend(core::iter::repeat_n(f32::INFINITY, scan));
        SrgbQuantiser {
            steps,
            scan,
            max,
            start,
        }
    }

    /// The code of linear `c`: NaN and anything not above 0 give 0, anything from 1 up the
    /// largest code.
    #[inline]
    pub(crate) fn code(&self, c: f32) -> u32 {
        if c.is_nan() || c <= 0.0 {
            return 0;
        }
        if c >= 1.0 {
            return self.max;
        }
        let mut k = usize::from(self.start[(c.to_bits() >> 16) as usize]);
        // A fixed number of steps, without branching on the value.
        for _ in 0..self.scan {
            k += usize::from(c >= self.steps[k]);
        }
        k as u32
    }
}

/// Reads one texel (the first `bytes_per_pixel` bytes of `bytes`) as RGBA: normalised for
/// the integer formats, linear for the float one, no transfer function; a missing alpha reads
/// 1.0.
pub(crate) fn read_texel(format: DisplayFormat, bytes: &[u8]) -> [f32; 4] {
    match layout(format) {
        None => {
            let c =
                |i: usize| f16_bits_to_f32(u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]));
            [c(0), c(1), c(2), c(3)]
        }
        Some(layout) => {
            let word = read_word(bytes, format.bytes_per_pixel());
            layout.channels.map(|ch| {
                if ch.bits == 0 {
                    1.0
                } else {
                    unorm_to_f32(ch.code(word), ch.max())
                }
            })
        }
    }
}

/// The word of an integer texel holding `rgba` (normalised, no transfer function).
#[inline]
pub(crate) fn pack_word(layout: &Layout, rgba: [f32; 4]) -> u32 {
    let mut word = layout.fill;
    for (ch, c) in layout.channels.iter().zip(rgba) {
        // A missing channel has `max` 0, so code 0.
        word |= f32_to_unorm(c, ch.max()) << ch.shift;
    }
    word
}

/// Writes one texel (the first `bytes_per_pixel` bytes of `out`) from RGBA: normalised for
/// the integer formats, linear for the float one, no transfer function.
pub(crate) fn write_texel(format: DisplayFormat, rgba: [f32; 4], out: &mut [u8]) {
    match layout(format) {
        None => {
            for (i, c) in rgba.into_iter().enumerate() {
                out[2 * i..2 * i + 2].copy_from_slice(&f32_to_f16_bits(c).to_le_bytes());
            }
        }
        Some(layout) => {
            let n = format.bytes_per_pixel();
            let word = pack_word(&layout, rgba);
            out[..n].copy_from_slice(&word.to_le_bytes()[..n]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNORM_WIDTHS: [u32; 4] = [5, 6, 8, 10];

    fn max(bits: u32) -> u32 {
        (1 << bits) - 1
    }

    #[test]
    fn r_x7_unorm_decode_is_a_real_division() {
        for bits in UNORM_WIDTHS {
            for k in 0..=max(bits) {
                // f64 division then rounding to f32 is the correctly rounded quotient (the
                // double rounding is innocuous for 53 >= 2 * 24 + 2 bits).
                let exact = (f64::from(k) / f64::from(max(bits))) as f32;
                assert_eq!(unorm_to_f32(k, max(bits)), exact, "{k} of {bits} bits");
            }
        }
        assert_eq!(unorm_to_f32(0, 255), 0.0);
        assert_eq!(unorm_to_f32(255, 255), 1.0);
    }

    #[test]
    fn r_x7_unorm_encode_clamps_and_rounds_half_up() {
        let below_half = f32::from_bits(0.5f32.to_bits() - 1);
        // The one-bit alpha: 0.5 is a tie and goes up; anything below goes down.
        assert_eq!(f32_to_unorm(0.5, 1), 1);
        assert_eq!(f32_to_unorm(below_half, 1), 0);
        // An exact tie at 8 bits: 127.5 + 0.5.
        assert_eq!(f32_to_unorm(0.5, 255), 128);
        assert_eq!(f32_to_unorm(0.5, 3), 2);
        assert_eq!(f32_to_unorm(f32::NAN, 255), 0);
        assert_eq!(f32_to_unorm(-f32::NAN, 1023), 0);
        assert_eq!(f32_to_unorm(f32::INFINITY, 1023), 1023);
        assert_eq!(f32_to_unorm(f32::NEG_INFINITY, 1023), 0);
        assert_eq!(f32_to_unorm(-0.25, 31), 0);
        assert_eq!(f32_to_unorm(1.75, 63), 63);
        // Just under and just over a half step at 8 bits.
        assert_eq!(f32_to_unorm(2.49 / 255.0, 255), 2);
        assert_eq!(f32_to_unorm(2.51 / 255.0, 255), 3);
    }

    /// The `half` crate's conversion (round to nearest, ties to even), moved toward zero by
    /// one code where it rounded away from zero: the rule by another route.
    fn truncated_by_half(x: f32) -> u16 {
        let h = half::f16::from_f32(x);
        if !x.is_finite() || h.to_f32().abs() <= x.abs() {
            h.to_bits()
        } else {
            // One code lower in magnitude (sign-magnitude), also from infinity to 65504.
            h.to_bits() - 1
        }
    }

    #[test]
    fn r_x7_every_f16_widens_as_half_widens_it() {
        for bits in 0..=u16::MAX {
            let ours = f16_bits_to_f32(bits);
            let theirs = half::f16::from_bits(bits).to_f32();
            assert_eq!(ours.to_bits(), theirs.to_bits(), "{bits:#06x}");
        }
    }

    #[test]
    fn r_x7_f32_to_f16_at_every_boundary_and_midpoint_and_a_sample() {
        let check = |x: f32| {
            assert_eq!(
                f32_to_f16_bits(x),
                truncated_by_half(x),
                "{x:e} ({:#010x})",
                x.to_bits()
            );
        };
        // Each binary16 value, the binary32s beside it, and the midpoint to the next code
        // with its neighbours: where truncation and nearest-even part.
        for bits in 0..=u16::MAX {
            let v = f16_bits_to_f32(bits);
            if v.is_nan() {
                check(v);
                continue;
            }
            let next = f16_bits_to_f32(bits.wrapping_add(1));
            for x in [v, v.next_up(), v.next_down()] {
                check(x);
            }
            if next.is_finite() && (next.to_bits() >> 31) == (v.to_bits() >> 31) {
                let mid = (v + next) / 2.0; // exact: one more bit than binary16 has
                for x in [mid, mid.next_up(), mid.next_down()] {
                    check(x);
                }
            }
        }
        // Binary32 NaNs with every sign, quiet bit and payload top bits.
        for high in 0..=0x1FFu32 {
            for low in [0, 1, 0x1FFF] {
                check(f32::from_bits(0x7F80_0000 | (high << 14) | low | 1));
                check(f32::from_bits(0xFF80_0000 | (high << 14) | low | 1));
            }
        }
        // Two million bit patterns from a fixed xorshift sequence, every exponent.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..2_000_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            check(f32::from_bits((state >> 32) as u32));
        }
    }

    #[test]
    fn r_x7_f16_rounds_toward_zero_and_saturates() {
        use half::f16;
        let above_mid = 1.0 + 3.0 / 4096.0; // three quarters of an f16 step above 1.0
        assert_eq!(
            f16::from_f32(above_mid).to_bits(),
            0x3C01,
            "nearest would round up"
        );
        assert_eq!(f32_to_f16_bits(above_mid), 0x3C00);
        assert_eq!(f32_to_f16_bits(-above_mid), 0xBC00);
        assert_eq!(f32_to_f16_bits(0.5), 0x3800);
        assert_eq!(
            f32_to_f16_bits(f32::from_bits(0.5f32.to_bits() - 1)),
            0x37FF
        );
        assert_eq!(
            f32_to_f16_bits(65519.0),
            0x7BFF,
            "nearest would give 65504 too"
        );
        assert_eq!(
            f32_to_f16_bits(65520.0),
            0x7BFF,
            "nearest would give infinity"
        );
        assert_eq!(f32_to_f16_bits(1.0e9), 0x7BFF);
        assert_eq!(f32_to_f16_bits(-1.0e9), 0xFBFF);
        assert_eq!(f32_to_f16_bits(f32::INFINITY), 0x7C00);
        assert_eq!(f32_to_f16_bits(f32::NEG_INFINITY), 0xFC00);
        assert!(f16::from_bits(f32_to_f16_bits(f32::NAN)).is_nan());
        // Subnormals truncate too: 1.5 steps of 2^-24 is 1 step.
        assert_eq!(f32_to_f16_bits(1.5 * 2f32.powi(-24)), 0x0001);
        assert_eq!(f32_to_f16_bits(0.9 * 2f32.powi(-24)), 0x0000);
        assert_eq!(f32_to_f16_bits(-0.0), 0x8000);
        // Never above the input in magnitude, never more than one step below.
        for i in 0..10_000u32 {
            let x = i as f32 * 0.000_123_4 + 0.000_01;
            let h = f16_bits_to_f32(f32_to_f16_bits(x));
            assert!(h <= x, "{x}");
            assert!(f16_bits_to_f32(f32_to_f16_bits(x) + 1) > x, "{x}");
        }
    }

    #[test]
    fn r_x7_unorm_codes_round_trip_through_f16() {
        for bits in UNORM_WIDTHS.into_iter().chain([1, 2]) {
            for k in 0..=max(bits) {
                let h = f32_to_f16_bits(unorm_to_f32(k, max(bits)));
                assert_eq!(f32_to_unorm(f16_bits_to_f32(h), max(bits)), k, "{k}/{bits}");
            }
        }
    }

    #[test]
    fn r_x7_srgb_codes_round_trip_through_linear_f16() {
        for bits in UNORM_WIDTHS {
            for k in 0..=max(bits) {
                let linear = srgb_to_linear(unorm_to_f32(k, max(bits)));
                let h = f16_bits_to_f32(f32_to_f16_bits(linear));
                let back = f32_to_unorm(linear_to_srgb(h), max(bits));
                assert_eq!(back, k, "{k} of {bits} bits");
            }
        }
    }

    #[test]
    fn r_x7_srgb_curve_matches_the_8bit_vectors() {
        let decode = |k: u32| srgb_to_linear(unorm_to_f32(k, 255));
        for (k, linear) in [
            (1u32, 0.000_303_527f64),
            (10, 0.003_035_270),
            (64, 0.051_269_468),
            (128, 0.215_860_531),
            (188, 0.502_886_593),
            (254, 0.991_102_219),
        ] {
            let got = f64::from(decode(k));
            assert!(
                (got - linear).abs() <= linear * 1.0e-6,
                "{k}: {got} vs {linear}"
            );
        }
        assert_eq!(decode(0), 0.0);
        assert_eq!(decode(255), 1.0);
        let encode = |c: f32| f32_to_unorm(linear_to_srgb(c), 255);
        assert_eq!(encode(0.5), 188);
        assert_eq!(encode(0.18), 118);
        assert_eq!(encode(0.003_130_8), 10);
        assert_eq!(encode(0.0), 0);
        assert_eq!(encode(1.0), 255);
        assert_eq!(encode(f32::NAN), 0);
        assert_eq!(encode(7.0), 255);
        // The linear segments, at both ends of their thresholds.
        assert_eq!(srgb_to_linear(0.04), (0.04f64 / 12.92) as f32);
        assert_eq!(linear_to_srgb(0.003), (0.003f32 as f64 * 12.92) as f32);
        for k in 0..=255 {
            assert_eq!(encode(decode(k)), k, "8-bit sRGB code {k}");
        }
    }

    #[test]
    fn r_x7_srgb_quantiser_agrees_with_the_curve() {
        for bits in UNORM_WIDTHS {
            let table = SrgbQuantiser::get(max(bits)).unwrap();
            let direct = |c: f32| f32_to_unorm(linear_to_srgb(c), max(bits));
            // Every binary16 value (what an unfiltered float source holds).
            for h in 0..=u16::MAX {
                let c = f16_bits_to_f32(h);
                assert_eq!(table.code(c), direct(c), "{bits} bits: f16 {h:#06x} ({c})");
            }
            // Both sides of every step.
            assert!(
                table.scan <= 8,
                "{bits} bits: {} steps in a bucket",
                table.scan
            );
            for (k, t) in table.steps[..max(bits) as usize].iter().enumerate() {
                let below = f32::from_bits(t.to_bits() - 1);
                assert_eq!(direct(*t), k as u32 + 1, "{bits} bits: step {k}");
                assert_eq!(direct(below), k as u32, "{bits} bits: below step {k}");
                assert_eq!(table.code(*t), k as u32 + 1);
                assert_eq!(table.code(below), k as u32);
            }
            // A spread of other floats in and around [0, 1].
            let mut s = 0x1234_5678u32;
            for _ in 0..20_000 {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                let c = f32::from_bits(s % 0x3F90_0000);
                assert_eq!(table.code(c), direct(c), "{bits} bits: {c}");
            }
        }
        assert!(SrgbQuantiser::get(3).is_none());
    }

    #[test]
    fn r_x7_texel_layouts_match_the_format_table() {
        let write = |format: DisplayFormat, rgba: [f32; 4]| {
            let mut out = vec![0u8; format.bytes_per_pixel()];
            write_texel(format, rgba, &mut out);
            out
        };
        let red = [1.0, 0.0, 0.0, 1.0];
        assert_eq!(
            write(DisplayFormat::R10G10B10A2Unorm, red),
            [0xFF, 0x03, 0x00, 0xC0]
        );
        assert_eq!(write(DisplayFormat::B5G6R5Unorm, red), [0x00, 0xF8]);
        assert_eq!(write(DisplayFormat::B5G5R5A1Unorm, red), [0x00, 0xFC]);
        assert_eq!(
            write(DisplayFormat::B8G8R8A8Unorm, red),
            [0x00, 0x00, 0xFF, 0xFF]
        );
        assert_eq!(
            write(DisplayFormat::R8G8B8A8Unorm, red),
            [0xFF, 0x00, 0x00, 0xFF]
        );
        assert_eq!(
            write(DisplayFormat::R16G16B16A16Float, red),
            [0x00, 0x3C, 0, 0, 0, 0, 0x00, 0x3C]
        );
        let c = [1.0 / 255.0, 2.0 / 255.0, 3.0 / 255.0, 4.0 / 255.0];
        assert_eq!(write(DisplayFormat::R8G8B8A8UnormSrgb, c), [1, 2, 3, 4]);
        assert_eq!(write(DisplayFormat::B8G8R8A8Unorm, c), [3, 2, 1, 4]);
        // X8 is written 0xFF whatever the alpha, and a missing alpha reads 1.
        assert_eq!(
            write(DisplayFormat::B8G8R8X8Unorm, [0.0; 4]),
            [0, 0, 0, 0xFF]
        );
        let x8 = read_texel(DisplayFormat::B8G8R8X8Unorm, &[3, 2, 1, 0]);
        assert_eq!(x8, [1.0 / 255.0, 2.0 / 255.0, 3.0 / 255.0, 1.0]);
        assert_eq!(read_texel(DisplayFormat::B5G6R5Unorm, &[0x00, 0xF8]), red);
        assert_eq!(
            read_texel(DisplayFormat::B5G5R5A1Unorm, &[0x00, 0x7C])[3],
            0.0
        );
        // Every field of R10G10B10A2 in its place.
        let word = u32::from_le_bytes(
            write(
                DisplayFormat::R10G10B10A2Unorm,
                [1.0 / 1023.0, 2.0 / 1023.0, 3.0 / 1023.0, 2.0 / 3.0],
            )
            .try_into()
            .unwrap(),
        );
        assert_eq!(word, 1 | 2 << 10 | 3 << 20 | 2 << 30);
    }
}
