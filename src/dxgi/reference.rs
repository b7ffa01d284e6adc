//! The CPU reference Blt (R-X6, R-X7): the pixel processing of a DXGI Blt, usable as a test
//! oracle for a driver's Blt and as a software fallback.
//!
//! [`blt`](crate::dxgi::reference::blt) copies a rectangle of a source subresource into a rectangle of a destination
//! subresource, converting between the eight display formats, resolving a multisampled
//! source, stretching with a bilinear filter and rotating by a multiple of 90 degrees, in one
//! pass that writes every destination pixel of the rectangle once and nothing else. Checking
//! what the Blt is allowed to do (flags, bind flags, subresources) is the caller's business;
//! this module only refuses pixel data it cannot address.
//!
//! # Where a destination pixel comes from (R-X6)
//!
//! Destination pixel `(x, y)` of the rectangle `[L, R) x [T, B)` has the normalised centre
//! `u' = (x - L + 0.5) / (R - L)`, `v' = (y - T + 0.5) / (B - T)`. [`Rotation::source_of`](crate::dxgi::Rotation::source_of)
//! turns it into the normalised source point `(u, v)`, which is sampled the way D3D's linear
//! filter does: with `W` the source rectangle's width, `s = u * W - 0.5`, the two columns
//! `floor(s)` and `floor(s) + 1` weighted `1 - frac(s)` and `frac(s)`, the same for rows, four
//! taps, each clamped to the source rectangle. When the two rectangles have the same size
//! (after rotation) every tap falls on a texel centre, so the Blt is an exact copy plus the
//! format conversion. Tap positions are computed in exact integer arithmetic, so this holds
//! at any size.
//!
//! # Gamma (R-X7)
//!
//! The float format (`R16G16B16A16_FLOAT`) holds linear light; the seven integer formats hold
//! gamma-encoded values, whether or not they are named `_SRGB`. Per RGB channel:
//!
//! | source to destination | conversion |
//! |---|---|
//! | integer to integer | the normalised value is requantised, no transfer function: an sRGB source reaches a non-sRGB destination unchanged |
//! | float to integer | encoded with the sRGB curve, then quantised |
//! | integer to float | decoded with the sRGB curve, then rounded to binary16 |
//! | float to float | none |
//!
//! Alpha is never gamma-coded. Filtering happens in the working domain: on linear values
//! whenever the float format is on either side, and from an `_SRGB` source (D3D11.3
//! §19.1.3.2: sRGB data is converted to linear before filtering), whose filtered values are
//! encoded with the sRGB curve again before an integer destination is written, so integer to
//! integer the codes stay sRGB-encoded; on the normalised encoded values from any other
//! integer source to an integer destination. A Blt without filtering (every tap on a texel
//! centre) converts each code as the table above says.
//!
//! # Multisampled sources (R-X6)
//!
//! Each texel the filter fetches is the plain average of its samples, in linear space:
//! samples are decoded first when the working domain is linear; from an `_SRGB` source to an
//! integer destination they are decoded, averaged and encoded again (a pixel whose samples
//! are all equal keeps its exact value); the samples of the other integer formats going to an
//! integer destination are averaged as normalised values. The average only feeds the filter:
//! nothing is written to the destination but the final pixel.
//!
//! # Number conversions (R-X7)
//!
//! As D3D defines them: UNORM to float is `k / (2^n - 1)`; float to UNORM maps NaN to 0,
//! clamps to `[0, 1]` and rounds half up (`floor(c * (2^n - 1) + 0.5)`, also for a one-bit
//! alpha, so 0.5 writes 1); float to binary16 rounds toward zero, with a finite overflow
//! becoming the largest finite value; a missing alpha (`B5G6R5`, `B8G8R8X8`) reads 1.0 and
//! the X8 byte is written 0xFF. The sRGB curve is the piecewise IEC 61966-2-1 one: decode
//! `c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055)^2.4`, encode
//! `c <= 0.0031308 ? 12.92 c : 1.055 c^(1/2.4) - 0.055`.
//!
//! A Blt never blends: the destination's previous contents do not matter.

use std::sync::OnceLock;

use super::codec::{self, Channel, Layout};
use super::{DisplayFormat, Rect, Rotation};
use crate::{Error, Result};

/// One subresource's pixels, rows tightly packed (`width * samples * bytes_per_pixel` bytes
/// each), the samples of a pixel adjacent: a Blt source (R-X6, R-X7).
#[derive(Clone, Copy, Debug)]
pub struct Pixels<'a> {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Samples per pixel (1 when not multisampled); never 0.
    pub samples: u32,
    /// The format of every sample.
    pub format: DisplayFormat,
    /// `width * height * samples * format.bytes_per_pixel()` bytes.
    pub bytes: &'a [u8],
}

/// A destination subresource (single-sampled), rows tightly packed
/// (`width * bytes_per_pixel` bytes each): a Blt destination (R-X6, R-X7).
#[derive(Debug)]
pub struct PixelsMut<'a> {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// The format of every pixel.
    pub format: DisplayFormat,
    /// `width * height * format.bytes_per_pixel()` bytes.
    pub bytes: &'a mut [u8],
}

/// Blts `src_rect` of `src` into `dst_rect` of `dst` (R-X6, R-X7): resolving a multisampled
/// source, rotating by `rotation`, stretching bilinearly and converting the format as the
/// [module docs](self) describe. Every pixel of `dst_rect` is overwritten once; the rest of
/// `dst` is untouched.
///
/// # Errors
///
/// [`Error::InvalidArg`], with nothing written, when a byte length does not match its width,
/// height, sample count and format, when `src.samples` is 0, or when a rectangle is empty or
/// reaches outside its surface.
pub fn blt(
    src: Pixels<'_>,
    src_rect: Rect,
    dst: PixelsMut<'_>,
    dst_rect: Rect,
    rotation: Rotation,
) -> Result<()> {
    blt_in(
        &mut BltScratch::default(),
        src,
        src_rect,
        dst,
        dst_rect,
        rotation,
    )
}

/// [`blt`] working in `scratch`'s memory (its taps and decoded lines), which it keeps for
/// the next Blt: a caller that keeps one scratch per thread (a software driver's Blt, a
/// present path) allocates nothing in steady state.
pub fn blt_in(
    scratch: &mut BltScratch,
    src: Pixels<'_>,
    src_rect: Rect,
    dst: PixelsMut<'_>,
    dst_rect: Rect,
    rotation: Rotation,
) -> Result<()> {
    blt_with(scratch, src, src_rect, dst, dst_rect, rotation, true)
}

/// The memory a Blt works in ([`blt_in`]): the taps of both axes and the filter's decoded
/// lines, grown to the largest Blt seen and kept.
#[derive(Debug, Default)]
pub struct BltScratch {
    col_taps: Vec<Tap>,
    row_taps: Vec<Tap>,
    lines: LineBufs,
}

/// The filter's working rows: the two decoded source lines, the blend of the two, and one
/// destination row of values.
#[derive(Debug, Default)]
struct LineBufs {
    lines: [Vec<[f32; 4]>; 2],
    blend: Vec<[f32; 4]>,
    values: Vec<[f32; 4]>,
}

/// `v` holding `len` zeroed entries (its capacity kept).
fn zeroed(v: &mut Vec<[f32; 4]>, len: usize) -> &mut Vec<[f32; 4]> {
    v.clear();
    v.resize(len, [0.0; 4]);
    v
}

/// Whether `bytes` is exactly the size of a `width * height * samples` image of `format`.
fn size_matches(
    width: u32,
    height: u32,
    samples: u32,
    format: DisplayFormat,
    bytes: usize,
) -> bool {
    u64::from(width)
        .checked_mul(u64::from(height))
        .and_then(|n| n.checked_mul(u64::from(samples)))
        .and_then(|n| n.checked_mul(format.bytes_per_pixel() as u64))
        == Some(bytes as u64)
}

/// [`blt_in`], with the fast paths (byte copies and per-code lookup tables) allowed or not;
/// both give the same bytes.
fn blt_with(
    scratch: &mut BltScratch,
    src: Pixels<'_>,
    src_rect: Rect,
    dst: PixelsMut<'_>,
    dst_rect: Rect,
    rotation: Rotation,
    fast: bool,
) -> Result<()> {
    if src.samples == 0
        || !size_matches(
            src.width,
            src.height,
            src.samples,
            src.format,
            src.bytes.len(),
        )
        || !size_matches(dst.width, dst.height, 1, dst.format, dst.bytes.len())
        || !src_rect.is_inside(src.width, src.height)
        || !dst_rect.is_inside(dst.width, dst.height)
    {
        return Err(Error::InvalidArg);
    }
    // Every size below is at most a byte length, so fits `usize`.
    let BltScratch {
        col_taps,
        row_taps,
        lines,
    } = scratch;
    let plan = Plan::new(&src, src_rect, &dst, dst_rect, rotation, col_taps, row_taps);
    let same = src.format == dst.format && src.samples == 1;
    if fast && plan.point_sampled() && src.samples == 1 {
        if same && plan.identity() {
            plan.copy_rows(&src, dst);
        } else if same {
            plan.gather(&src, dst);
        } else if let Some(table) = Table::cached(src.format, dst.format) {
            plan.convert(&src, dst, table);
        } else {
            plan.filter(&src, dst, lines);
        }
    } else {
        plan.filter(&src, dst, lines);
    }
    Ok(())
}

/// One destination index's two taps along one source axis, relative to the source
/// rectangle: `(1 - w1) * [i0] + w1 * [i1]`; `w1` is 0 when only `i0` counts.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Tap {
    i0: usize,
    i1: usize,
    w1: f32,
}

/// The taps of the `dst_len` destination indices of one axis over `src_len` source
/// indices, walked backwards when `reversed`.
///
/// The destination centre `k + 0.5` of `n` maps to `s = (k + 0.5) / n * m - 0.5`, that is
/// `((2k + 1) m - n) / 2n`: floor and remainder come from integers, so centres that coincide
/// give weight exactly 0.
fn taps_into(out: &mut Vec<Tap>, dst_len: u32, src_len: u32, reversed: bool) {
    let n = i128::from(dst_len);
    let m = i128::from(src_len);
    let q = 2 * n;
    let last = m - 1;
    out.clear();
    out.extend((0..dst_len).map(|i| {
        let k = i128::from(if reversed { dst_len - 1 - i } else { i });
        let p = (2 * k + 1) * m - n;
        let t0 = p.div_euclid(q);
        let frac = p.rem_euclid(q);
        let i0 = t0.clamp(0, last) as usize;
        let i1 = (t0 + 1).clamp(0, last) as usize;
        let w1 = if frac == 0 || i0 == i1 {
            0.0
        } else {
            (frac as f64 / q as f64) as f32
        };
        Tap { i0, i1, w1 }
    }));
}

/// [`taps_into`] a new vector.
#[cfg(test)]
fn taps(dst_len: u32, src_len: u32, reversed: bool) -> Vec<Tap> {
    let mut out = Vec::new();
    taps_into(&mut out, dst_len, src_len, reversed);
    out
}

/// Which source axis a destination axis (columns, or rows when `dst_rows`) drives, and
/// whether it runs backwards: read off [`Rotation::source_of`], the one place the direction
/// is decided, by moving along that destination axis and seeing which source coordinate
/// moves, and which way. Returns `(drives_source_rows, reversed)`.
fn axis(rotation: Rotation, dst_rows: bool) -> (bool, bool) {
    let at = |t: f32| {
        if dst_rows {
            rotation.source_of(0.5, t)
        } else {
            rotation.source_of(t, 0.5)
        }
    };
    let (u0, v0) = at(0.25);
    let (u1, v1) = at(0.75);
    if (u1 - u0).abs() >= (v1 - v0).abs() {
        (false, u1 < u0)
    } else {
        (true, v1 < v0)
    }
}

/// The addressing of one Blt.
///
/// The destination's columns drive one source axis and its rows the other. A *line* is the
/// run of source texels (inside the source rectangle) that one destination row reads: a
/// source row, or a source column when the rotation swaps the axes. `col_taps` index along a
/// line, `row_taps` pick lines.
struct Plan<'s> {
    col_taps: &'s [Tap],
    row_taps: &'s [Tap],
    /// Byte offset of line 0's first texel.
    line_base: usize,
    /// Bytes from one line to the next.
    line_step: usize,
    /// Bytes from one texel of a line to the next.
    texel_step: usize,
    /// Texels in a line.
    line_len: usize,
    /// Bytes of one source texel (all its samples).
    texel_bytes: usize,
    /// Destination byte offset of the rectangle's first pixel.
    dst_base: usize,
    /// Bytes of a destination row.
    dst_stride: usize,
    /// Bytes of a destination pixel.
    dst_bpp: usize,
}

impl<'s> Plan<'s> {
    /// The plan, its taps written into `col_taps` and `row_taps`.
    fn new(
        src: &Pixels<'_>,
        src_rect: Rect,
        dst: &PixelsMut<'_>,
        dst_rect: Rect,
        rotation: Rotation,
        col_taps: &'s mut Vec<Tap>,
        row_taps: &'s mut Vec<Tap>,
    ) -> Self {
        let (cols_drive_rows, col_rev) = axis(rotation, false);
        let (_, row_rev) = axis(rotation, true);
        let (line_len, lines) = if cols_drive_rows {
            (src_rect.height(), src_rect.width())
        } else {
            (src_rect.width(), src_rect.height())
        };
        let texel_bytes = src.samples as usize * src.format.bytes_per_pixel();
        let src_stride = src.width as usize * texel_bytes;
        let (line_step, texel_step) = if cols_drive_rows {
            (texel_bytes, src_stride)
        } else {
            (src_stride, texel_bytes)
        };
        let dst_bpp = dst.format.bytes_per_pixel();
        let dst_stride = dst.width as usize * dst_bpp;
        taps_into(col_taps, dst_rect.width(), line_len, col_rev);
        taps_into(row_taps, dst_rect.height(), lines, row_rev);
        Plan {
            col_taps,
            row_taps,
            line_base: src_rect.top as usize * src_stride + src_rect.left as usize * texel_bytes,
            line_step,
            texel_step,
            line_len: line_len as usize,
            texel_bytes,
            dst_base: dst_rect.top as usize * dst_stride + dst_rect.left as usize * dst_bpp,
            dst_stride,
            dst_bpp,
        }
    }

    /// Whether every tap falls on a texel centre (same sizes after rotation, and a few
    /// integer ratios), so each destination pixel is exactly one source texel.
    fn point_sampled(&self) -> bool {
        self.col_taps.iter().all(|t| t.w1 == 0.0) && self.row_taps.iter().all(|t| t.w1 == 0.0)
    }

    /// Whether destination pixel `(x, y)` of the rectangle is texel `x` of line `y`, and
    /// lines are source rows: an unrotated, unstretched copy.
    fn identity(&self) -> bool {
        let straight = |taps: &[Tap]| {
            taps.iter()
                .enumerate()
                .all(|(i, t)| t.i0 == i && t.w1 == 0.0)
        };
        self.texel_step == self.texel_bytes && straight(self.col_taps) && straight(self.row_taps)
    }

    /// Byte offset of texel `j` of line `line`.
    fn texel(&self, line: usize, j: usize) -> usize {
        self.line_base + line * self.line_step + j * self.texel_step
    }

    /// The destination rectangle's rows, `(row index, bytes)`.
    fn dst_rows<'d>(&self, dst: &'d mut [u8]) -> impl Iterator<Item = (usize, &'d mut [u8])> {
        let row_bytes = self.col_taps.len() * self.dst_bpp;
        dst[self.dst_base..]
            .chunks_mut(self.dst_stride)
            .take(self.row_taps.len())
            .map(move |row| &mut row[..row_bytes])
            .enumerate()
    }

    /// Same format, one sample, an unrotated unstretched copy: row copies, or one copy when
    /// both rectangles span their surfaces' full width (whole-frame copies then get the
    /// library's large-copy strategy).
    fn copy_rows(&self, src: &Pixels<'_>, dst: PixelsMut<'_>) {
        let row_bytes = self.col_taps.len() * self.dst_bpp;
        let rows = self.row_taps.len();
        if self.dst_stride == row_bytes && self.line_step == row_bytes {
            let len = rows * row_bytes;
            let from = &src.bytes[self.line_base..self.line_base + len];
            dst.bytes[self.dst_base..self.dst_base + len].copy_from_slice(from);
        } else {
            for (dy, row) in self.dst_rows(dst.bytes) {
                let start = self.texel(self.row_taps[dy].i0, 0);
                row.copy_from_slice(&src.bytes[start..start + row.len()]);
            }
        }
        if dst.format == DisplayFormat::B8G8R8X8Unorm {
            for (_, row) in self.dst_rows(dst.bytes) {
                fill_x8(row);
            }
        }
    }

    /// Calls `f(pixel, source offset)` for every destination pixel of a point-sampled Blt,
    /// `BPP` bytes each. When lines are source columns (a rotation by 90 or 270 degrees), the
    /// destination is walked in blocks of 64 columns, so that the source rows a block reads
    /// stay in the caches and the TLB from one destination row to the next.
    #[inline(always)]
    fn each_point<const BPP: usize>(&self, dst: &mut [u8], mut f: impl FnMut(&mut [u8], usize)) {
        let width = self.col_taps.len();
        let block = if self.texel_step == self.texel_bytes {
            width
        } else {
            64
        };
        let mut start = 0;
        while start < width {
            let end = width.min(start + block);
            for (dy, row) in self.dst_rows(dst) {
                let line = self.row_taps[dy].i0;
                let pixels = row[start * BPP..end * BPP].chunks_exact_mut(BPP);
                for (out, tap) in pixels.zip(&self.col_taps[start..end]) {
                    f(out, self.texel(line, tap.i0));
                }
            }
            start = end;
        }
    }

    /// Same format, one sample, point sampled: texel copies.
    fn gather(&self, src: &Pixels<'_>, dst: PixelsMut<'_>) {
        match self.dst_bpp {
            2 => self.gather_sized::<2>(src.bytes, dst.bytes, false),
            4 => {
                let x8 = dst.format == DisplayFormat::B8G8R8X8Unorm;
                self.gather_sized::<4>(src.bytes, dst.bytes, x8)
            }
            _ => self.gather_sized::<8>(src.bytes, dst.bytes, false),
        }
    }

    /// [`Plan::gather`] of `BPP`-byte pixels; `x8`: the fourth byte is set to 0xFF.
    fn gather_sized<const BPP: usize>(&self, src: &[u8], dst: &mut [u8], x8: bool) {
        self.each_point::<BPP>(dst, |out, at| {
            out.copy_from_slice(&src[at..at + BPP]);
            if x8 {
                out[3] = 0xFF;
            }
        });
    }

    /// One integer sample, point sampled: each source code through a table.
    fn convert(&self, src: &Pixels<'_>, dst: PixelsMut<'_>, table: &Table) {
        // One loop per pair of pixel sizes, so each copies a constant number of bytes.
        match (src.format.bytes_per_pixel(), self.dst_bpp) {
            (2, 2) => self.convert_sized::<2, 2>(src.bytes, dst.bytes, table),
            (2, 4) => self.convert_sized::<2, 4>(src.bytes, dst.bytes, table),
            (2, _) => self.convert_sized::<2, 8>(src.bytes, dst.bytes, table),
            (_, 2) => self.convert_sized::<4, 2>(src.bytes, dst.bytes, table),
            (_, 4) => self.convert_sized::<4, 4>(src.bytes, dst.bytes, table),
            (_, _) => self.convert_sized::<4, 8>(src.bytes, dst.bytes, table),
        }
    }

    /// [`Plan::convert`] from `SBPP`-byte to `DBPP`-byte pixels.
    fn convert_sized<const SBPP: usize, const DBPP: usize>(
        &self,
        src: &[u8],
        dst: &mut [u8],
        table: &Table,
    ) {
        self.each_point::<DBPP>(dst, |out, at| {
            let word = codec::read_word(&src[at..at + SBPP], SBPP);
            out.copy_from_slice(&table.lookup(word).to_le_bytes()[..DBPP]);
        });
    }

    /// The general path: fetch (resolve, decode to the working domain), filter, encode.
    fn filter(&self, src: &Pixels<'_>, dst: PixelsMut<'_>, bufs: &mut LineBufs) {
        // An `_SRGB` source is filtered in linear light whenever the filter blends texels.
        let linear = linear_domain(src.format, dst.format)
            || (src.format.is_srgb() && !self.point_sampled());
        let decoder = Decoder::new(src.format, linear, src.samples as usize);
        let encoder = Encoder::new(dst.format, linear);
        let LineBufs {
            lines: [first, second],
            blend,
            values,
        } = bufs;
        let mut lines = Lines {
            ids: [None, None],
            bufs: [zeroed(first, self.line_len), zeroed(second, self.line_len)],
        };
        let values = zeroed(values, self.col_taps.len());
        let blend = zeroed(blend, self.line_len);
        let decode_line = |line: usize, out: &mut [[f32; 4]]| {
            let first = self.texel(line, 0);
            decoder.line(&src.bytes[first..], self.texel_step, out);
        };
        for (dy, row) in self.dst_rows(dst.bytes) {
            let rt = self.row_taps[dy];
            let second = (rt.w1 != 0.0).then_some(rt.i1);
            lines.load(rt.i0, second, decode_line);
            // Between the two lines first (once per source texel), then along the line.
            let line: &[[f32; 4]] = match second {
                None => lines.bufs[0],
                Some(_) => {
                    let [a, b] = &lines.bufs;
                    for ((o, a), b) in blend.iter_mut().zip(a.iter()).zip(b.iter()) {
                        *o = lerp(*a, *b, rt.w1);
                    }
                    blend
                }
            };
            for (v, ct) in values.iter_mut().zip(self.col_taps) {
                *v = sample_line(line, ct);
            }
            encoder.write_row(values, row);
        }
    }
}

/// Sets the X8 byte of every pixel of a `B8G8R8X8` row.
fn fill_x8(row: &mut [u8]) {
    for px in row.chunks_exact_mut(4) {
        px[3] = 0xFF;
    }
}

/// One tap pair along a decoded line.
fn sample_line(line: &[[f32; 4]], tap: &Tap) -> [f32; 4] {
    if tap.w1 == 0.0 {
        line[tap.i0]
    } else {
        lerp(line[tap.i0], line[tap.i1], tap.w1)
    }
}

/// `(1 - w) a + w b` per channel, written `a + w (b - a)` so equal neighbours give exactly
/// their value (a uniform area stays uniform under any stretch).
fn lerp(a: [f32; 4], b: [f32; 4], w: f32) -> [f32; 4] {
    core::array::from_fn(|i| {
        if a[i] == b[i] {
            a[i]
        } else {
            a[i] + w * (b[i] - a[i])
        }
    })
}

/// The (at most two) decoded source lines the current destination row reads.
struct Lines<'b> {
    ids: [Option<usize>; 2],
    bufs: [&'b mut Vec<[f32; 4]>; 2],
}

impl Lines<'_> {
    /// Makes `bufs[0]` hold line `first` and, if given, `bufs[1]` line `second`, decoding
    /// only what the previous row did not already hold.
    fn load(
        &mut self,
        first: usize,
        second: Option<usize>,
        decode: impl Fn(usize, &mut [[f32; 4]]),
    ) {
        if self.ids[0] != Some(first) && self.ids[1] == Some(first) {
            self.ids.swap(0, 1);
            self.bufs.swap(0, 1);
        }
        if self.ids[0] != Some(first) {
            decode(first, self.bufs[0]);
            self.ids[0] = Some(first);
        }
        if let Some(second) = second {
            if self.ids[1] != Some(second) {
                decode(second, self.bufs[1]);
                self.ids[1] = Some(second);
            }
        }
    }
}

/// Whether a Blt from `src` to `dst` works on linear values (the float format on either
/// side) rather than on normalised encoded ones.
fn linear_domain(src: DisplayFormat, dst: DisplayFormat) -> bool {
    src.is_float() || dst.is_float()
}

/// Per-code values of one integer channel: normalised, or decoded to linear with the sRGB
/// curve. A missing channel has the single code 0, reading 1.0.
///
/// Built once per bit count and domain and kept for the process (at most 4 KiB each, for
/// the widths the display formats have): a Blt of a few pixels would otherwise spend more
/// on its tables than on its pixels.
fn channel_lut(ch: Channel, linear: bool) -> &'static [f32] {
    static LUTS: [[OnceLock<Box<[f32]>>; 2]; 33] = [const { [const { OnceLock::new() }; 2] }; 33];
    LUTS[ch.bits as usize][usize::from(linear)].get_or_init(|| {
        if ch.bits == 0 {
            return Box::new([1.0]);
        }
        let max = ch.max();
        (0..=max)
            .map(|k| {
                let c = codec::unorm_to_f32(k, max);
                if linear {
                    codec::srgb_to_linear(c)
                } else {
                    c
                }
            })
            .collect()
    })
}

/// How source texels (all their samples) become working-domain values.
struct Decoder {
    samples: usize,
    /// The tables of an integer source; `None` for binary16, read as is.
    integer: Option<IntegerDecoder>,
}

/// An integer source's per-code tables.
struct IntegerDecoder {
    layout: Layout,
    bpp: usize,
    /// R, G, B, A in the working domain (alpha always normalised).
    luts: [&'static [f32]; 4],
    /// R, G, B decoded to linear, for `srgb_resolve`.
    linear: [&'static [f32]; 3],
    /// An `_SRGB` source with several samples going to an integer destination: samples are
    /// averaged in linear and the average encoded again.
    srgb_resolve: bool,
}

impl Decoder {
    /// Decodes `src` texels to linear values when `linear`, else to normalised ones.
    fn new(src: DisplayFormat, linear: bool, samples: usize) -> Self {
        let integer = codec::layout(src).map(|layout| {
            let [r, g, b, a] = layout.channels;
            let srgb_resolve = !linear && src.is_srgb() && samples > 1;
            IntegerDecoder {
                layout,
                bpp: src.bytes_per_pixel(),
                luts: [
                    channel_lut(r, linear),
                    channel_lut(g, linear),
                    channel_lut(b, linear),
                    channel_lut(a, false),
                ],
                linear: if srgb_resolve {
                    [r, g, b].map(|ch| channel_lut(ch, true))
                } else {
                    [&[], &[], &[]]
                },
                srgb_resolve,
            }
        });
        Decoder { samples, integer }
    }

    /// A line of source texels, the first at the start of `bytes`, `step` bytes apart.
    fn line(&self, bytes: &[u8], step: usize, out: &mut [[f32; 4]]) {
        let texels = bytes.chunks(step).zip(out);
        match &self.integer {
            Some(int) if self.samples == 1 => {
                let [r, g, b, a] = &int.luts;
                let [cr, cg, cb, ca] = int.layout.channels;
                for (texel, o) in texels {
                    let word = codec::read_word(texel, int.bpp);
                    *o = [
                        r[cr.code(word) as usize],
                        g[cg.code(word) as usize],
                        b[cb.code(word) as usize],
                        a[ca.code(word) as usize],
                    ];
                }
            }
            _ => {
                for (texel, o) in texels {
                    *o = self.texel(texel);
                }
            }
        }
    }

    /// One source texel (all its samples, at the start of `bytes`) in the working domain.
    fn texel(&self, bytes: &[u8]) -> [f32; 4] {
        let samples = self.samples;
        let Some(int) = &self.integer else {
            const F16: DisplayFormat = DisplayFormat::R16G16B16A16Float;
            if samples == 1 {
                // As is, signed zeros included.
                return codec::read_texel(F16, bytes);
            }
            let mut sum = [0.0f32; 4];
            for s in bytes.chunks_exact(8).take(samples) {
                let value = codec::read_texel(F16, s);
                for (c, v) in sum.iter_mut().zip(value) {
                    *c += v;
                }
            }
            return average(sum, samples);
        };
        let read = |word: u32, luts: &[&[f32]]| {
            let mut out = [0.0f32; 4];
            for ((o, ch), lut) in out.iter_mut().zip(&int.layout.channels).zip(luts) {
                *o = lut[ch.code(word) as usize];
            }
            out
        };
        let mut words = bytes
            .chunks_exact(int.bpp)
            .take(samples)
            .map(|s| codec::read_word(s, int.bpp));
        let first = words.next().unwrap_or(0);
        if samples == 1 || (int.srgb_resolve && words.all(|w| w == first)) {
            // One sample, or all equal: their average is their own value.
            return read(first, &int.luts);
        }
        let rgb_luts: &[&[f32]] = if int.srgb_resolve {
            &int.linear
        } else {
            &int.luts[..3]
        };
        let alpha = int.layout.channels[3];
        let mut sum = [0.0f32; 4];
        for s in bytes.chunks_exact(int.bpp).take(samples) {
            let word = codec::read_word(s, int.bpp);
            for (c, v) in sum.iter_mut().zip(read(word, rgb_luts)).take(3) {
                *c += v;
            }
            sum[3] += int.luts[3][alpha.code(word) as usize];
        }
        let avg = average(sum, samples);
        if int.srgb_resolve {
            [
                codec::linear_to_srgb(avg[0]),
                codec::linear_to_srgb(avg[1]),
                codec::linear_to_srgb(avg[2]),
                avg[3],
            ]
        } else {
            avg
        }
    }
}

/// `sum / samples`.
fn average(sum: [f32; 4], samples: usize) -> [f32; 4] {
    if samples == 1 {
        sum
    } else {
        sum.map(|c| c / samples as f32)
    }
}

/// How working-domain values become destination pixels: binary16 rounded toward zero, or
/// quantised, with RGB first encoded with the sRGB curve when `encode` (linear values to an
/// integer format).
struct Encoder {
    format: DisplayFormat,
    encode: bool,
}

impl Encoder {
    /// Writes `dst` pixels from linear values when `linear`, else from normalised ones.
    fn new(dst: DisplayFormat, linear: bool) -> Self {
        Encoder {
            format: dst,
            encode: !dst.is_float() && linear,
        }
    }

    fn write_row(&self, values: &[[f32; 4]], row: &mut [u8]) {
        if self.format.is_float() {
            for (v, out) in values.iter().zip(row.chunks_exact_mut(8)) {
                codec::write_texel(self.format, *v, out);
            }
            return;
        }
        // One loop per format, so each sees its layout as constants.
        match self.format {
            DisplayFormat::R16G16B16A16Float => {}
            DisplayFormat::R10G10B10A2Unorm => self.quantise::<4>(&codec::R10G10B10A2, values, row),
            DisplayFormat::R8G8B8A8Unorm | DisplayFormat::R8G8B8A8UnormSrgb => {
                self.quantise::<4>(&codec::R8G8B8A8, values, row)
            }
            DisplayFormat::B5G6R5Unorm => self.quantise::<2>(&codec::B5G6R5, values, row),
            DisplayFormat::B5G5R5A1Unorm => self.quantise::<2>(&codec::B5G5R5A1, values, row),
            DisplayFormat::B8G8R8A8Unorm => self.quantise::<4>(&codec::B8G8R8A8, values, row),
            DisplayFormat::B8G8R8X8Unorm => self.quantise::<4>(&codec::B8G8R8X8, values, row),
        }
    }

    /// Quantises a row into `BPP`-byte pixels of `layout`, encoding RGB with the sRGB curve
    /// first when the source is float.
    #[inline(always)]
    fn quantise<const BPP: usize>(&self, layout: &Layout, values: &[[f32; 4]], row: &mut [u8]) {
        let [r, g, b, _] = layout.channels;
        let tables = [r, g, b].map(|ch| codec::SrgbQuantiser::get(ch.max()));
        match (self.encode, tables) {
            (false, _) => quantise_row::<BPP>(layout, values, row, Rgb::Plain),
            (true, [Some(r), Some(g), Some(b)]) => {
                quantise_row::<BPP>(layout, values, row, Rgb::Srgb([r, g, b]))
            }
            (true, _) => quantise_row::<BPP>(layout, values, row, Rgb::SrgbDirect),
        }
    }
}

/// How [`quantise_row`] treats R, G and B.
#[derive(Clone, Copy)]
enum Rgb<'a> {
    /// Quantised as they are (integer to integer).
    Plain,
    /// Linear, encoded with the sRGB curve by tables (float to integer).
    Srgb([&'a codec::SrgbQuantiser; 3]),
    /// Linear, encoded with the sRGB curve directly (a channel width without a table; the
    /// display formats have none).
    SrgbDirect,
}

/// Quantises a row of values into `BPP`-byte pixels of `layout`, RGB as `rgb` says.
#[inline(always)]
fn quantise_row<const BPP: usize>(
    layout: &Layout,
    values: &[[f32; 4]],
    row: &mut [u8],
    rgb: Rgb<'_>,
) {
    let [cr, cg, cb, ca] = layout.channels;
    for (v, out) in values.iter().zip(row.chunks_exact_mut(BPP)) {
        let word = match rgb {
            Rgb::Plain => codec::pack_word(layout, *v),
            Rgb::Srgb([r, g, b]) => {
                layout.fill
                    | r.code(v[0]) << cr.shift
                    | g.code(v[1]) << cg.shift
                    | b.code(v[2]) << cb.shift
                    | codec::f32_to_unorm(v[3], ca.max()) << ca.shift
            }
            Rgb::SrgbDirect => {
                let encoded = [
                    codec::linear_to_srgb(v[0]),
                    codec::linear_to_srgb(v[1]),
                    codec::linear_to_srgb(v[2]),
                    v[3],
                ];
                codec::pack_word(layout, encoded)
            }
        };
        out.copy_from_slice(&word.to_le_bytes()[..BPP]);
    }
}

/// An unfiltered single-sample conversion from an integer format: for each source channel
/// and code, its bits in the destination pixel, exactly what decoding and encoding the code
/// would give.
struct Table {
    src: Layout,
    /// R, G, B, A of the source; a missing channel has one entry.
    bits: [Vec<u64>; 4],
    /// Bits set in every destination pixel.
    fill: u64,
}

impl Table {
    /// The table from `src` to `dst`, built on its first use and kept for the process, like
    /// the channel tables it is made of (at most 24 KiB each; the 56 pairs from an integer
    /// format have one). `None` from the float format.
    fn cached(src: DisplayFormat, dst: DisplayFormat) -> Option<&'static Self> {
        const N: usize = DisplayFormat::ALL.len();
        static TABLES: [OnceLock<Option<Table>>; N * N] = [const { OnceLock::new() }; N * N];
        let index = |f| DisplayFormat::ALL.iter().position(|&a| a == f).unwrap_or(0);
        TABLES[index(src) * N + index(dst)]
            .get_or_init(|| Table::new(src, dst))
            .as_ref()
    }

    /// `None` from the float format (its codes are too many for a table).
    fn new(src: DisplayFormat, dst: DisplayFormat) -> Option<Self> {
        let src_layout = codec::layout(src)?;
        let linear = linear_domain(src, dst);
        let dst_layout = codec::layout(dst);
        let mut bits: [Vec<u64>; 4] = Default::default();
        for (c, (ch, out)) in src_layout.channels.iter().zip(&mut bits).enumerate() {
            let lut = channel_lut(*ch, linear && c < 3);
            *out = lut
                .iter()
                .map(|v| match &dst_layout {
                    None => u64::from(codec::f32_to_f16_bits(*v)) << (16 * c),
                    Some(d) => {
                        let dch = d.channels[c];
                        if dch.bits == 0 {
                            0
                        } else {
                            u64::from(codec::f32_to_unorm(*v, dch.max()) << dch.shift)
                        }
                    }
                })
                .collect();
        }
        Some(Table {
            src: src_layout,
            bits,
            fill: dst_layout.map_or(0, |d| u64::from(d.fill)),
        })
    }

    #[inline]
    fn lookup(&self, word: u32) -> u64 {
        let mut out = self.fill;
        for (ch, bits) in self.src.channels.iter().zip(&self.bits) {
            out |= bits[ch.code(word) as usize];
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    const F16: DisplayFormat = DisplayFormat::R16G16B16A16Float;
    const RGBA8: DisplayFormat = DisplayFormat::R8G8B8A8Unorm;
    const SRGB8: DisplayFormat = DisplayFormat::R8G8B8A8UnormSrgb;
    const BGRA8: DisplayFormat = DisplayFormat::B8G8R8A8Unorm;
    const BGRX8: DisplayFormat = DisplayFormat::B8G8R8X8Unorm;
    const A1: DisplayFormat = DisplayFormat::B5G5R5A1Unorm;
    const RGB565: DisplayFormat = DisplayFormat::B5G6R5Unorm;
    const ROTATIONS: [Rotation; 5] = [
        Rotation::Unspecified,
        Rotation::Identity,
        Rotation::Rotate90,
        Rotation::Rotate180,
        Rotation::Rotate270,
    ];

    // ---- An independent model of the formats and of the gamma rule, in f64. ----

    /// Binary16 bits of `x`, rounded toward zero, finite overflow to the largest finite.
    fn f16_rtz(x: f64) -> u16 {
        let h = f16::from_f64(x);
        if h.is_infinite() && x.is_finite() {
            return if x < 0.0 { 0xFBFF } else { 0x7BFF };
        }
        if h.to_f64().abs() > x.abs() {
            h.to_bits() - 1
        } else {
            h.to_bits()
        }
    }

    fn q(c: f64, bits: u32) -> u32 {
        let max = f64::from((1u32 << bits) - 1);
        (c.clamp(0.0, 1.0) * max + 0.5).floor() as u32
    }

    fn decode_srgb(c: f64) -> f64 {
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    }

    fn encode_srgb(c: f64) -> f64 {
        let c = c.clamp(0.0, 1.0);
        if c <= 0.0031308 {
            c * 12.92
        } else {
            1.055 * c.powf(1.0 / 2.4) - 0.055
        }
    }

    /// One pixel of `format` holding `[r, g, b, a]` (normalised, or linear for the float).
    fn pack(format: DisplayFormat, [r, g, b, a]: [f64; 4]) -> Vec<u8> {
        match format {
            DisplayFormat::R16G16B16A16Float => [r, g, b, a]
                .iter()
                .flat_map(|c| f16_rtz(*c).to_le_bytes())
                .collect(),
            DisplayFormat::R10G10B10A2Unorm => {
                (q(r, 10) | q(g, 10) << 10 | q(b, 10) << 20 | q(a, 2) << 30)
                    .to_le_bytes()
                    .to_vec()
            }
            DisplayFormat::R8G8B8A8Unorm | DisplayFormat::R8G8B8A8UnormSrgb => {
                [q(r, 8), q(g, 8), q(b, 8), q(a, 8)]
                    .map(|c| c as u8)
                    .to_vec()
            }
            DisplayFormat::B5G6R5Unorm => ((q(b, 5) | q(g, 6) << 5 | q(r, 5) << 11) as u16)
                .to_le_bytes()
                .to_vec(),
            DisplayFormat::B5G5R5A1Unorm => {
                ((q(b, 5) | q(g, 5) << 5 | q(r, 5) << 10 | q(a, 1) << 15) as u16)
                    .to_le_bytes()
                    .to_vec()
            }
            DisplayFormat::B8G8R8A8Unorm => [q(b, 8), q(g, 8), q(r, 8), q(a, 8)]
                .map(|c| c as u8)
                .to_vec(),
            DisplayFormat::B8G8R8X8Unorm => {
                [q(b, 8), q(g, 8), q(r, 8), 255].map(|c| c as u8).to_vec()
            }
        }
    }

    /// The value one pixel of `format` holds.
    fn unpack(format: DisplayFormat, p: &[u8]) -> [f64; 4] {
        let n = |c: u32, bits: u32| f64::from(c) / f64::from((1u32 << bits) - 1);
        let w16 = || u32::from(u16::from_le_bytes([p[0], p[1]]));
        match format {
            DisplayFormat::R16G16B16A16Float => {
                [0, 2, 4, 6].map(|i| f16::from_le_bytes([p[i], p[i + 1]]).to_f64())
            }
            DisplayFormat::R10G10B10A2Unorm => {
                let w = u32::from_le_bytes([p[0], p[1], p[2], p[3]]);
                [
                    n(w & 1023, 10),
                    n(w >> 10 & 1023, 10),
                    n(w >> 20 & 1023, 10),
                    n(w >> 30, 2),
                ]
            }
            DisplayFormat::R8G8B8A8Unorm | DisplayFormat::R8G8B8A8UnormSrgb => {
                [p[0], p[1], p[2], p[3]].map(|c| n(c.into(), 8))
            }
            DisplayFormat::B5G6R5Unorm => {
                let w = w16();
                [n(w >> 11, 5), n(w >> 5 & 63, 6), n(w & 31, 5), 1.0]
            }
            DisplayFormat::B5G5R5A1Unorm => {
                let w = w16();
                [
                    n(w >> 10 & 31, 5),
                    n(w >> 5 & 31, 5),
                    n(w & 31, 5),
                    n(w >> 15, 1),
                ]
            }
            DisplayFormat::B8G8R8A8Unorm => [p[2], p[1], p[0], p[3]].map(|c| n(c.into(), 8)),
            DisplayFormat::B8G8R8X8Unorm => {
                let [r, g, b] = [p[2], p[1], p[0]].map(|c| n(c.into(), 8));
                [r, g, b, 1.0]
            }
        }
    }

    /// R-X7's gamma rule on one value, RGB only.
    fn transfer(src: DisplayFormat, dst: DisplayFormat, c: f64) -> f64 {
        match (src.is_float(), dst.is_float()) {
            (false, true) => decode_srgb(c),
            (true, false) => encode_srgb(c),
            _ => c,
        }
    }

    /// The expected destination pixel for a source pixel, unfiltered.
    fn expect(src: DisplayFormat, dst: DisplayFormat, p: &[u8]) -> Vec<u8> {
        let [r, g, b, a] = unpack(src, p);
        pack(
            dst,
            [r, g, b]
                .map(|c| transfer(src, dst, c))
                .into_iter()
                .chain([a])
                .collect::<Vec<_>>()
                .try_into()
                .unwrap(),
        )
    }

    // ---- Running a Blt. ----

    /// An image of `format`, `samples` samples per pixel, made of `pixels` (normalised or
    /// linear values), each sample the same.
    fn image(format: DisplayFormat, samples: u32, pixels: &[[f64; 4]]) -> Vec<u8> {
        pixels
            .iter()
            .flat_map(|p| pack(format, *p).repeat(samples as usize))
            .collect()
    }

    /// Source pixels.
    struct Src<'a> {
        w: u32,
        h: u32,
        samples: u32,
        format: DisplayFormat,
        bytes: &'a [u8],
    }

    impl Src<'_> {
        fn pixels(&self) -> Pixels<'_> {
            Pixels {
                width: self.w,
                height: self.h,
                samples: self.samples,
                format: self.format,
                bytes: self.bytes,
            }
        }
    }

    /// Blts the whole of `src` into the whole of a fresh `w` by `h` destination filled with
    /// 0xAB, on the fast paths or only on the general one; returns the destination.
    fn run(
        src: &Src<'_>,
        format: DisplayFormat,
        (w, h): (u32, u32),
        rotation: Rotation,
        fast: bool,
    ) -> Vec<u8> {
        run_rects(
            src,
            Rect::whole(src.w, src.h),
            format,
            (w, h),
            Rect::whole(w, h),
            rotation,
            fast,
        )
    }

    fn run_rects(
        src: &Src<'_>,
        src_rect: Rect,
        format: DisplayFormat,
        (w, h): (u32, u32),
        dst_rect: Rect,
        rotation: Rotation,
        fast: bool,
    ) -> Vec<u8> {
        let mut out = vec![0xAB; (w * h) as usize * format.bytes_per_pixel()];
        let dst = PixelsMut {
            width: w,
            height: h,
            format,
            bytes: &mut out,
        };
        let scratch = &mut BltScratch::default();
        blt_with(
            scratch,
            src.pixels(),
            src_rect,
            dst,
            dst_rect,
            rotation,
            fast,
        )
        .expect("valid blt");
        out
    }

    /// Both paths, which must agree.
    fn run_both(
        src: &Src<'_>,
        format: DisplayFormat,
        size: (u32, u32),
        rotation: Rotation,
    ) -> Vec<u8> {
        let fast = run(src, format, size, rotation, true);
        let general = run(src, format, size, rotation, false);
        assert_eq!(fast, general, "{:?} -> {format:?} {rotation:?}", src.format);
        fast
    }

    /// A channel of an f16 image.
    fn f16_at(bytes: &[u8], pixel: usize, channel: usize) -> f32 {
        let i = pixel * 8 + channel * 2;
        f16::from_le_bytes([bytes[i], bytes[i + 1]]).to_f32()
    }

    /// Six distinct colours, corners of the cube and values between.
    const COLOURS: [[f64; 4]; 6] = [
        [1.0, 0.0, 0.0, 1.0],
        [0.0, 1.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.34],
        [0.2, 0.45, 0.7, 0.66],
        [0.91, 0.62, 0.13, 0.52],
        [0.05, 0.8, 0.37, 0.9],
    ];

    // ---- The tests. ----

    #[test]
    fn r_x7_every_format_pair_converts_by_the_gamma_rule() {
        for s in DisplayFormat::ALL {
            let bytes = image(s, 1, &COLOURS);
            let src = Src {
                w: 3,
                h: 2,
                samples: 1,
                format: s,
                bytes: &bytes,
            };
            for d in DisplayFormat::ALL {
                let out = run_both(&src, d, (3, 2), Rotation::Identity);
                let (sb, db) = (s.bytes_per_pixel(), d.bytes_per_pixel());
                for i in 0..6 {
                    let want = expect(s, d, &bytes[i * sb..][..sb]);
                    assert_eq!(&out[i * db..][..db], &want[..], "{s:?} -> {d:?} pixel {i}");
                }
                // The same through the filter: a 2x stretch of a two-pixel run of each colour
                // keeps the colour exactly.
                for (i, colour) in COLOURS.iter().enumerate() {
                    let pair = image(s, 1, &[*colour, *colour]);
                    let src = Src {
                        w: 2,
                        h: 1,
                        samples: 1,
                        format: s,
                        bytes: &pair,
                    };
                    let out = run(&src, d, (4, 2), Rotation::Identity, true);
                    let want = expect(s, d, &pair[..sb]).repeat(8);
                    assert_eq!(out, want, "{s:?} -> {d:?} stretched colour {i}");
                }
            }
        }
    }

    #[test]
    fn r_x7_srgb_source_reaches_unorm_destination_unchanged() {
        let bytes: Vec<u8> = (0..=255u8).flat_map(|k| [k, 255 - k, k / 2, k]).collect();
        let src = Src {
            w: 256,
            h: 1,
            samples: 1,
            format: SRGB8,
            bytes: &bytes,
        };
        assert_eq!(run_both(&src, RGBA8, (256, 1), Rotation::Identity), bytes);
        let back = run_both(&src, SRGB8, (256, 1), Rotation::Identity);
        assert_eq!(back, bytes);
    }

    #[test]
    fn r_x7_integer_to_float_decodes_and_float_to_integer_encodes() {
        // sRGB vectors: code 128 is 0.215860531 linear, 188 is 0.502886593.
        let bytes = [128, 188, 0, 255];
        for s in [SRGB8, RGBA8] {
            let src = Src {
                w: 1,
                h: 1,
                samples: 1,
                format: s,
                bytes: &bytes,
            };
            let out = run_both(&src, F16, (1, 1), Rotation::Identity);
            let r = f16_at(&out, 0, 0);
            let g = f16_at(&out, 0, 1);
            // Within one binary16 step below (rounding toward zero).
            assert!(
                r <= 0.215_860_53 && r > 0.215_860_53 - 2f32.powi(-13),
                "{r}"
            );
            assert!(g <= 0.502_886_6 && g > 0.502_886_6 - 2f32.powi(-11), "{g}");
            assert_eq!(f16_at(&out, 0, 3), 1.0, "alpha is not decoded");
        }
        let bytes = image(F16, 1, &[[0.5, 0.18, 0.003_130_8, 0.5]]);
        let src = Src {
            w: 1,
            h: 1,
            samples: 1,
            format: F16,
            bytes: &bytes,
        };
        assert_eq!(
            run_both(&src, SRGB8, (1, 1), Rotation::Identity),
            [188, 118, 10, 128]
        );
        assert_eq!(
            run_both(&src, BGRA8, (1, 1), Rotation::Identity),
            [10, 118, 188, 128]
        );
        // Float to float: the bits, including values beyond 1 and below 0.
        let bytes: Vec<u8> = [0x3C01u16, 0xC500, 0x7BFF, 0x0001]
            .iter()
            .flat_map(|h| h.to_le_bytes())
            .collect();
        let src = Src {
            w: 1,
            h: 1,
            samples: 1,
            format: F16,
            bytes: &bytes,
        };
        assert_eq!(run_both(&src, F16, (1, 1), Rotation::Rotate90), bytes);
        // Out of range float values clamp; NaN is 0.
        let bytes: Vec<u8> = [0x4000u16, 0xBC00, 0x7E00, 0x7C00]
            .iter()
            .flat_map(|h| h.to_le_bytes())
            .collect();
        let src = Src {
            w: 1,
            h: 1,
            samples: 1,
            format: F16,
            bytes: &bytes,
        };
        assert_eq!(
            run_both(&src, RGBA8, (1, 1), Rotation::Identity),
            [255, 0, 0, 255]
        );
    }

    #[test]
    fn r_x7_every_integer_code_round_trips_through_f16() {
        for format in DisplayFormat::ALL.into_iter().filter(|f| !f.is_float()) {
            // Every code of every channel (10 bits at most), alpha cycling through its codes.
            let pixels: Vec<[f64; 4]> = (0..1024)
                .map(|k| {
                    let c = f64::from(k) / 1023.0;
                    [c, 1.0 - c, c, f64::from(k % 4) / 3.0]
                })
                .collect();
            let bytes = image(format, 1, &pixels);
            let src = Src {
                w: 32,
                h: 32,
                samples: 1,
                format,
                bytes: &bytes,
            };
            let half = run_both(&src, F16, (32, 32), Rotation::Identity);
            let src = Src {
                w: 32,
                h: 32,
                samples: 1,
                format: F16,
                bytes: &half,
            };
            assert_eq!(
                run_both(&src, format, (32, 32), Rotation::Identity),
                bytes,
                "{format:?}"
            );
        }
    }

    #[test]
    fn r_x7_x8_reads_alpha_one_and_is_written_ff() {
        let bytes = [10, 20, 30, 0x00, 40, 50, 60, 0x12];
        let src = Src {
            w: 2,
            h: 1,
            samples: 1,
            format: BGRX8,
            bytes: &bytes,
        };
        assert_eq!(
            run_both(&src, RGBA8, (2, 1), Rotation::Identity),
            [30, 20, 10, 255, 60, 50, 40, 255]
        );
        let f = run_both(&src, F16, (2, 1), Rotation::Identity);
        assert_eq!((f16_at(&f, 0, 3), f16_at(&f, 1, 3)), (1.0, 1.0));
        assert_eq!(
            run_both(&src, A1, (2, 1), Rotation::Identity)[1] & 0x80,
            0x80
        );
        for rotation in ROTATIONS {
            let out = run_both(&src, BGRX8, (2, 1).rot(rotation), rotation);
            assert!(out.chunks(4).all(|p| p[3] == 0xFF), "{rotation:?}: {out:?}");
        }
        let out = run(&src, BGRX8, (4, 3), Rotation::Identity, true);
        assert!(out.chunks(4).all(|p| p[3] == 0xFF), "stretched: {out:?}");
        let clear = [1, 2, 3, 0];
        let src = Src {
            w: 1,
            h: 1,
            samples: 1,
            format: RGBA8,
            bytes: &clear,
        };
        assert_eq!(
            run_both(&src, BGRX8, (1, 1), Rotation::Identity),
            [3, 2, 1, 0xFF]
        );
    }

    /// A size, rotated.
    trait Rot {
        fn rot(self, rotation: Rotation) -> Self;
    }

    impl Rot for (u32, u32) {
        fn rot(self, rotation: Rotation) -> Self {
            if rotation.swaps_axes() {
                (self.1, self.0)
            } else {
                self
            }
        }
    }

    #[test]
    fn r_x7_one_bit_alpha_rounds_half_up() {
        let halves: Vec<u8> = [0x3800u16, 0x37FF]
            .iter()
            .flat_map(|a| [0, 0, 0, *a])
            .flat_map(|h| h.to_le_bytes())
            .collect();
        let src = Src {
            w: 2,
            h: 1,
            samples: 1,
            format: F16,
            bytes: &halves,
        };
        let out = run_both(&src, A1, (2, 1), Rotation::Identity);
        assert_eq!(out, [0x00, 0x80, 0x00, 0x00], "0.5 -> 1, 0.49988 -> 0");
        let bytes = [0, 0, 0, 128, 0, 0, 0, 127];
        let src = Src {
            w: 2,
            h: 1,
            samples: 1,
            format: RGBA8,
            bytes: &bytes,
        };
        assert_eq!(
            run_both(&src, A1, (2, 1), Rotation::Identity),
            [0x00, 0x80, 0x00, 0x00]
        );
    }

    #[test]
    fn r_x7_bit_layouts_of_red() {
        let red = [255, 0, 0, 255];
        let src = Src {
            w: 1,
            h: 1,
            samples: 1,
            format: RGBA8,
            bytes: &red,
        };
        let to = |d| run_both(&src, d, (1, 1), Rotation::Identity);
        assert_eq!(
            to(DisplayFormat::R10G10B10A2Unorm),
            [0xFF, 0x03, 0x00, 0xC0]
        );
        assert_eq!(to(RGB565), [0x00, 0xF8]);
        assert_eq!(to(A1), [0x00, 0xFC]);
        assert_eq!(to(BGRA8), [0x00, 0x00, 0xFF, 0xFF]);
        assert_eq!(to(F16), [0x00, 0x3C, 0, 0, 0, 0, 0x00, 0x3C]);
    }

    #[test]
    fn r_x6_stretch_2x_up_weights_quarters() {
        // Codes 0 and 200 along each axis: 0, 50, 150, 200 (weights 1/4, 3/4, clamped ends).
        let bytes = [0u8, 0, 0, 255, 200, 200, 200, 255];
        for (w, h, size) in [(2, 1, (4, 1)), (1, 2, (1, 4))] {
            let src = Src {
                w,
                h,
                samples: 1,
                format: RGBA8,
                bytes: &bytes,
            };
            let out = run_both(&src, RGBA8, size, Rotation::Identity);
            let reds: Vec<u8> = out.chunks(4).map(|p| p[0]).collect();
            assert_eq!(reds, [0, 50, 150, 200], "{w}x{h}");
        }
        // Both axes at once, 2x2 of 0, 80 / 160, 240 to 4x4: bilinear products.
        let bytes: Vec<u8> = [0u8, 80, 160, 240]
            .iter()
            .flat_map(|c| [*c, 0, 0, 255])
            .collect();
        let src = Src {
            w: 2,
            h: 2,
            samples: 1,
            format: RGBA8,
            bytes: &bytes,
        };
        let out = run_both(&src, RGBA8, (4, 4), Rotation::Identity);
        let reds: Vec<u8> = out.chunks(4).map(|p| p[0]).collect();
        let axis = [0.0, 0.25, 0.75, 1.0];
        for (y, wy) in axis.iter().enumerate() {
            for (x, wx) in axis.iter().enumerate() {
                let v = (1.0 - wy) * ((1.0 - wx) * 0.0 + wx * 80.0)
                    + wy * ((1.0 - wx) * 160.0 + wx * 240.0);
                assert_eq!(reds[y * 4 + x], (v + 0.5f64).floor() as u8, "({x}, {y})");
            }
        }
    }

    #[test]
    fn r_x6_stretch_half_down_averages_pairs() {
        let bytes = image(F16, 1, &[[0.0; 4], [1.0; 4], [0.25; 4], [0.5; 4]]);
        for (w, h, size) in [(4, 1, (2, 1)), (1, 4, (1, 2))] {
            let src = Src {
                w,
                h,
                samples: 1,
                format: F16,
                bytes: &bytes,
            };
            let out = run_both(&src, F16, size, Rotation::Identity);
            assert_eq!((f16_at(&out, 0, 0), f16_at(&out, 1, 0)), (0.5, 0.375));
        }
        // Three to one lands on the middle texel exactly.
        let src = Src {
            w: 3,
            h: 1,
            samples: 1,
            format: F16,
            bytes: &bytes[..24],
        };
        assert_eq!(
            f16_at(&run_both(&src, F16, (1, 1), Rotation::Identity), 0, 0),
            1.0
        );
    }

    #[test]
    fn r_x7_filter_works_in_the_working_domain() {
        // sRGB codes 0 and 255, stretched 2x: an `_SRGB` source is filtered in linear light
        // and encoded again (D3D11.3 §19.1.3.2), to an sRGB or a plain integer destination
        // alike: 0.25 and 0.75 linear are codes 137 and 225; alpha is filtered plain.
        let bytes = [0u8, 0, 0, 0, 255, 255, 255, 255];
        let src = Src {
            w: 2,
            h: 1,
            samples: 1,
            format: SRGB8,
            bytes: &bytes,
        };
        let stretched = [
            0, 0, 0, 0, 137, 137, 137, 64, 225, 225, 225, 191, 255, 255, 255, 255,
        ];
        assert_eq!(run_both(&src, SRGB8, (4, 1), Rotation::Identity), stretched);
        let to_plain = run_both(
            &src,
            DisplayFormat::R8G8B8A8Unorm,
            (4, 1),
            Rotation::Identity,
        );
        assert_eq!(to_plain, stretched);
        // Shrunk to one pixel: linear 0.5, code 188 (not the encoded average, 128).
        let shrunk = run_both(&src, SRGB8, (1, 1), Rotation::Identity);
        assert_eq!(shrunk, [188, 188, 188, 128]);
        // Unfiltered, each code converts as is: the same size is a copy.
        assert_eq!(run_both(&src, SRGB8, (2, 1), Rotation::Identity), bytes);
        // A plain integer source still filters its encoded values, bit for bit as before.
        let plain = Src {
            format: DisplayFormat::R8G8B8A8Unorm,
            ..src
        };
        assert_eq!(
            run_both(&plain, SRGB8, (4, 1), Rotation::Identity),
            [0, 0, 0, 0, 64, 64, 64, 64, 191, 191, 191, 191, 255, 255, 255, 255]
        );
        // Integer to float decodes first and filters linear values.
        let out = run_both(&src, F16, (4, 1), Rotation::Identity);
        let reds: Vec<f32> = (0..4).map(|i| f16_at(&out, i, 0)).collect();
        assert_eq!(reds, [0.0, 0.25, 0.75, 1.0]);
        // ...float to integer filters linear values then encodes: 0.25 linear is 137.
        let bytes = image(F16, 1, &[[0.0; 4], [1.0; 4]]);
        let src = Src {
            w: 2,
            h: 1,
            samples: 1,
            format: F16,
            bytes: &bytes,
        };
        let out = run_both(&src, SRGB8, (4, 1), Rotation::Identity);
        let reds: Vec<u8> = out.chunks(4).map(|p| p[0]).collect();
        assert_eq!(
            reds,
            [
                0,
                q(encode_srgb(0.25), 8) as u8,
                q(encode_srgb(0.75), 8) as u8,
                255
            ]
        );
        assert_eq!(reds[1], 137);
        let alphas: Vec<u8> = out.chunks(4).map(|p| p[3]).collect();
        assert_eq!(alphas, [0, 64, 191, 255], "alpha is filtered plain");
    }

    #[test]
    fn r_x7_a_vertical_stretch_filters_srgb_in_linear_light() {
        // 2x2 sRGB codes stretched to 2x4: the columns are copied, the rows blended between
        // the two source rows with weights 0, 1/4, 3/4, 1 of the lower one. The expected codes
        // come from the f64 model: decode, blend, encode; alpha blended plain.
        let (top, bottom) = (
            [[40u8, 90, 255, 10], [255, 0, 128, 201]],
            [[200u8, 20, 0, 250], [0, 255, 60, 30]],
        );
        let bytes: Vec<u8> = top.iter().chain(&bottom).flatten().copied().collect();
        let src = Src {
            w: 2,
            h: 2,
            samples: 1,
            format: SRGB8,
            bytes: &bytes,
        };
        let n = |c: u8| f64::from(c) / 255.0;
        let mut expected = Vec::new();
        for w in [0.0, 0.25, 0.75, 1.0] {
            for (a, b) in top.iter().zip(&bottom) {
                for ch in 0..4 {
                    let (a, b) = (n(a[ch]), n(b[ch]));
                    let code = if ch == 3 {
                        q((1.0 - w) * a + w * b, 8)
                    } else {
                        q(
                            encode_srgb((1.0 - w) * decode_srgb(a) + w * decode_srgb(b)),
                            8,
                        )
                    };
                    expected.push(code as u8);
                }
            }
        }
        // The blend of encoded codes differs on the middle rows: 40 and 200 a quarter of the
        // way are 80 encoded, 111 in linear light.
        assert_eq!(expected[8], 111);
        for dst in [SRGB8, RGBA8] {
            let out = run_both(&src, dst, (2, 4), Rotation::Identity);
            assert_eq!(out, expected, "{dst:?}");
        }
        // To the float format: the linear blend itself.
        let out = run_both(&src, F16, (2, 4), Rotation::Identity);
        let reds: Vec<f32> = (0..4).map(|row| f16_at(&out, row * 2, 0)).collect();
        let linear = |w: f64| (1.0 - w) * decode_srgb(n(40)) + w * decode_srgb(n(200));
        for (red, w) in reds.iter().zip([0.0, 0.25, 0.75, 1.0]) {
            assert!((f64::from(*red) - linear(w)).abs() < 1e-3, "{reds:?}");
        }
    }

    #[test]
    fn r_x6_rotations_move_each_pixel_as_documented() {
        // 3x2, six distinct colours; source (x, y) lands at the table of `Rotation::source_of`.
        let (w, h) = (3usize, 2usize);
        for (s, d) in [
            (RGBA8, RGBA8),
            (RGBA8, BGRA8),
            (F16, F16),
            (SRGB8, F16),
            (F16, RGB565),
        ] {
            let bytes = image(s, 1, &COLOURS);
            let src = Src {
                w: w as u32,
                h: h as u32,
                samples: 1,
                format: s,
                bytes: &bytes,
            };
            for rotation in ROTATIONS {
                let (dw, dh) = (w as u32, h as u32).rot(rotation);
                let out = run_both(&src, d, (dw, dh), rotation);
                let (sb, db) = (s.bytes_per_pixel(), d.bytes_per_pixel());
                for y in 0..h {
                    for x in 0..w {
                        let (dx, dy) = match rotation {
                            Rotation::Rotate90 => (y, w - 1 - x),
                            Rotation::Rotate180 => (w - 1 - x, h - 1 - y),
                            Rotation::Rotate270 => (h - 1 - y, x),
                            _ => (x, y),
                        };
                        let at = (dy * dw as usize + dx) * db;
                        let want = expect(s, d, &bytes[(y * w + x) * sb..][..sb]);
                        assert_eq!(
                            &out[at..at + db],
                            &want[..],
                            "{s:?} -> {d:?} {rotation:?}: source ({x}, {y})"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn r_x6_resolve_averages_samples_in_linear_space() {
        // One pixel of four samples; R and A go 0, 0, 255, 255; G is 255 in every sample.
        let samples: Vec<u8> = [0u8, 0, 255, 255]
            .iter()
            .flat_map(|c| [*c, 255, 0, *c])
            .collect();
        let src = |format| Src {
            w: 1,
            h: 1,
            samples: 4,
            format,
            bytes: &samples,
        };
        // UNORM: normalised average, 127.5 rounds up.
        assert_eq!(
            run(&src(RGBA8), RGBA8, (1, 1), Rotation::Identity, true),
            [128, 255, 0, 128]
        );
        // sRGB: linear 0.5 encodes to 188, to sRGB and (integer to integer) to UNORM alike;
        // alpha averages plain.
        assert_eq!(
            run(&src(SRGB8), SRGB8, (1, 1), Rotation::Identity, true),
            [188, 255, 0, 128]
        );
        assert_eq!(
            run(&src(SRGB8), RGBA8, (1, 1), Rotation::Identity, true),
            [188, 255, 0, 128]
        );
        let f = run(&src(SRGB8), F16, (1, 1), Rotation::Identity, true);
        assert_eq!([0, 1, 2, 3].map(|c| f16_at(&f, 0, c)), [0.5, 1.0, 0.0, 0.5]);
        let f = run(&src(RGBA8), F16, (1, 1), Rotation::Identity, true);
        assert_eq!(f16_at(&f, 0, 0), 0.5, "decoded, then averaged");
        // Float samples.
        let bytes = image(F16, 1, &[[0.0; 4], [1.0; 4], [0.0; 4], [0.5; 4]]);
        let src = Src {
            w: 1,
            h: 1,
            samples: 4,
            format: F16,
            bytes: &bytes,
        };
        let f = run(&src, F16, (1, 1), Rotation::Identity, true);
        assert_eq!(f16_at(&f, 0, 0), 0.375);
        assert_eq!(
            run(&src, RGBA8, (1, 1), Rotation::Identity, true)[0],
            q(encode_srgb(0.375), 8) as u8
        );
    }

    #[test]
    fn r_x6_resolve_keeps_uniform_srgb_pixels_exact() {
        let pixels: Vec<[f64; 4]> = (0..256)
            .map(|k| {
                let c = f64::from(k) / 255.0;
                [c, 1.0 - c, c * c, c]
            })
            .collect();
        let multi = image(SRGB8, 4, &pixels);
        let single = image(SRGB8, 1, &pixels);
        let src = Src {
            w: 16,
            h: 16,
            samples: 4,
            format: SRGB8,
            bytes: &multi,
        };
        for d in [SRGB8, RGBA8] {
            assert_eq!(
                run(&src, d, (16, 16), Rotation::Identity, true),
                single,
                "{d:?}"
            );
        }
        // And averages across pixels are still taken in the working domain: a resolved 2x
        // stretch equals the stretch of the single-sampled image.
        let src1 = Src {
            w: 16,
            h: 16,
            samples: 1,
            format: SRGB8,
            bytes: &single,
        };
        assert_eq!(
            run(&src, SRGB8, (32, 32), Rotation::Rotate90, true),
            run(&src1, SRGB8, (32, 32), Rotation::Rotate90, true)
        );
    }

    #[test]
    fn r_x6_source_rect_bounds_the_taps() {
        // 4x4 with a 2x2 source rectangle in the middle; the surrounding pixels are white
        // and must not bleed in even at the clamped edges of a stretch.
        let mut pixels = [[1.0; 4]; 16];
        for (i, c) in [(5, 0.0), (6, 0.2), (9, 0.4), (10, 0.6)] {
            pixels[i] = [c, c, c, 1.0];
        }
        let bytes = image(F16, 1, &pixels);
        let src = Src {
            w: 4,
            h: 4,
            samples: 1,
            format: F16,
            bytes: &bytes,
        };
        let inner = Rect {
            left: 1,
            top: 1,
            right: 3,
            bottom: 3,
        };
        let out = run_rects(
            &src,
            inner,
            F16,
            (2, 2),
            Rect::whole(2, 2),
            Rotation::Identity,
            true,
        );
        let reds: Vec<f32> = (0..4).map(|i| f16_at(&out, i, 0)).collect();
        assert_eq!(reds, [5, 6, 9, 10].map(|i| f16_at(&bytes, i, 0)));
        let big = run_rects(
            &src,
            inner,
            F16,
            (4, 4),
            Rect::whole(4, 4),
            Rotation::Identity,
            false,
        );
        let corners = [0, 3, 12, 15].map(|i| f16_at(&big, i, 0));
        assert_eq!(corners, [5, 6, 9, 10].map(|i| f16_at(&bytes, i, 0)));
    }

    #[test]
    fn r_x6_pixels_outside_the_destination_rect_are_untouched() {
        let bytes = image(RGBA8, 1, &COLOURS);
        let src = Src {
            w: 3,
            h: 2,
            samples: 1,
            format: RGBA8,
            bytes: &bytes,
        };
        let rect = Rect {
            left: 1,
            top: 1,
            right: 4,
            bottom: 3,
        };
        for d in DisplayFormat::ALL {
            for rotation in ROTATIONS {
                for fast in [true, false] {
                    let (w, h) = (5u32, 4u32);
                    let out = run_rects(&src, Rect::whole(3, 2), d, (w, h), rect, rotation, fast);
                    let bpp = d.bytes_per_pixel();
                    for y in 0..h {
                        for x in 0..w {
                            let px = &out[((y * w + x) as usize) * bpp..][..bpp];
                            let inside = (1..4).contains(&x) && (1..3).contains(&y);
                            assert_eq!(
                                px.iter().all(|b| *b == 0xAB),
                                !inside,
                                "{d:?} {rotation:?} fast {fast}: ({x}, {y})"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn r_x6_blt_overwrites_and_never_blends() {
        let bytes = [200u8, 100, 50, 0];
        let src = Src {
            w: 1,
            h: 1,
            samples: 1,
            format: RGBA8,
            bytes: &bytes,
        };
        for fast in [true, false] {
            let mut out = vec![7u8; 4];
            let dst = PixelsMut {
                width: 1,
                height: 1,
                format: RGBA8,
                bytes: &mut out,
            };
            blt_with(
                &mut BltScratch::default(),
                src.pixels(),
                Rect::whole(1, 1),
                dst,
                Rect::whole(1, 1),
                Rotation::Identity,
                fast,
            )
            .unwrap();
            assert_eq!(out, bytes);
        }
    }

    /// The tables are built once per format (pair) and shared by every later Blt.
    #[test]
    fn r_x6_tables_are_built_once_and_kept() {
        use DisplayFormat::*;
        let (src, dst) = (R10G10B10A2Unorm, R8G8B8A8UnormSrgb);
        let first = Table::cached(src, dst).expect("an integer source has a table");
        assert!(std::ptr::eq(first, Table::cached(src, dst).unwrap()));
        assert!(!std::ptr::eq(first, Table::cached(dst, src).unwrap()));
        assert!(Table::cached(R16G16B16A16Float, dst).is_none());
        let ch = codec::layout(src).unwrap().channels[0];
        assert!(std::ptr::eq(channel_lut(ch, true), channel_lut(ch, true)));
        assert_ne!(channel_lut(ch, true), channel_lut(ch, false));
        assert_eq!(channel_lut(ch, false).len(), 1024);
    }

    #[test]
    fn r_x6_fast_paths_match_the_general_path() {
        // Pseudo-random images through every pair, rotation and a few sizes.
        let mut seed = 0x2545_f491_u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for s in DisplayFormat::ALL {
            let (w, h) = (5u32, 3u32);
            let bytes: Vec<u8> = if s.is_float() {
                (0..w * h * 4)
                    .flat_map(|_| {
                        f16::from_f32((next() % 3000) as f32 / 1000.0 - 0.5).to_le_bytes()
                    })
                    .collect()
            } else {
                (0..w * h * s.bytes_per_pixel() as u32)
                    .map(|_| next() as u8)
                    .collect()
            };
            let src = Src {
                w,
                h,
                samples: 1,
                format: s,
                bytes: &bytes,
            };
            for d in DisplayFormat::ALL {
                for rotation in ROTATIONS {
                    for size in [(w, h).rot(rotation), (1, 1), (15, 3).rot(rotation)] {
                        run_both(&src, d, size, rotation);
                    }
                }
            }
        }
    }

    #[test]
    fn r_x7_invalid_inputs_are_errors_and_write_nothing() {
        let src_bytes = vec![0x11u8; 64 * 8];
        let mut cases = 0;
        for (sw, sh, samples) in [(0, 2, 1), (2, 0, 1), (2, 2, 0), (2, 2, 1), (2, 2, 4)] {
            for extra in [-1i64, 0, 1] {
                for format in [RGBA8, F16, RGB565] {
                    let need = sw * sh * samples * format.bytes_per_pixel() as i64;
                    let Some(len) = usize::try_from(need + extra).ok() else {
                        continue;
                    };
                    let valid_src = sw > 0 && sh > 0 && samples > 0 && extra == 0;
                    let src = Pixels {
                        width: sw as u32,
                        height: sh as u32,
                        samples: samples as u32,
                        format,
                        bytes: &src_bytes[..len],
                    };
                    for (dw, dh, dextra) in [(2u32, 2u32, 0i64), (0, 2, 0), (2, 2, 1), (2, 2, -1)] {
                        let need = i64::from(dw * dh) * 4 + dextra;
                        let mut out = vec![0xABu8; need.max(0) as usize];
                        for (src_rect, dst_rect) in [
                            (Rect::whole(2, 2), Rect::whole(2, 2)),
                            (Rect::whole(3, 2), Rect::whole(2, 2)),
                            (Rect::whole(2, 2), Rect::whole(2, 3)),
                            (
                                Rect {
                                    left: 1,
                                    top: 0,
                                    right: 1,
                                    bottom: 2,
                                },
                                Rect::whole(2, 2),
                            ),
                            (
                                Rect::whole(2, 2),
                                Rect {
                                    left: 2,
                                    top: 0,
                                    right: 1,
                                    bottom: 2,
                                },
                            ),
                            (
                                Rect::whole(2, 2),
                                Rect {
                                    left: 0,
                                    top: 1,
                                    right: 2,
                                    bottom: 0,
                                },
                            ),
                            (
                                Rect {
                                    left: u32::MAX,
                                    top: 0,
                                    right: u32::MAX,
                                    bottom: 1,
                                },
                                Rect::whole(2, 2),
                            ),
                        ] {
                            let valid = valid_src
                                && dw > 0
                                && dextra == 0
                                && src_rect == Rect::whole(2, 2)
                                && dst_rect == Rect::whole(2, 2);
                            for rotation in ROTATIONS {
                                let dst = PixelsMut {
                                    width: dw,
                                    height: dh,
                                    format: RGBA8,
                                    bytes: &mut out,
                                };
                                let before = dst.bytes.to_vec();
                                let result = blt(src, src_rect, dst, dst_rect, rotation);
                                cases += 1;
                                if valid {
                                    assert_eq!(result, Ok(()));
                                    out.fill(0xAB);
                                } else {
                                    assert_eq!(
                                        result,
                                        Err(Error::InvalidArg),
                                        "{src:?} {src_rect:?} {dw}x{dh}+{dextra} {dst_rect:?}"
                                    );
                                    assert_eq!(out, before, "nothing written");
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(cases > 1000);
        // Sizes whose byte count overflows 64 bits, and ones that overflow 32.
        let mut out = [0u8; 4];
        let huge = Pixels {
            width: u32::MAX,
            height: u32::MAX,
            samples: u32::MAX,
            format: F16,
            bytes: &src_bytes,
        };
        let dst = PixelsMut {
            width: 1,
            height: 1,
            format: RGBA8,
            bytes: &mut out,
        };
        assert_eq!(
            blt(
                huge,
                Rect::whole(1, 1),
                dst,
                Rect::whole(1, 1),
                Rotation::Identity
            ),
            Err(Error::InvalidArg)
        );
        let wide = Pixels {
            width: 1 << 30,
            height: 4,
            samples: 1,
            format: RGBA8,
            bytes: &src_bytes[..0],
        };
        let dst = PixelsMut {
            width: 1,
            height: 1,
            format: RGBA8,
            bytes: &mut out,
        };
        assert_eq!(
            blt(
                wide,
                Rect::whole(1, 1),
                dst,
                Rect::whole(1, 1),
                Rotation::Identity
            ),
            Err(Error::InvalidArg)
        );
    }

    #[test]
    fn r_x6_taps_split_by_axis_agree_with_source_of() {
        // The per-axis taps sample where `Rotation::source_of` says, pixel by pixel.
        let (sw, sh) = (7u32, 4u32);
        for rotation in ROTATIONS {
            for (dw, dh) in [(sw, sh).rot(rotation), (11, 5), (3, 9)] {
                let (cols_v, col_rev) = axis(rotation, false);
                let (rows_v, row_rev) = axis(rotation, true);
                assert_ne!(cols_v, rows_v);
                let (col_len, row_len) = if cols_v { (sh, sw) } else { (sw, sh) };
                let cols = taps(dw, col_len, col_rev);
                let rows = taps(dh, row_len, row_rev);
                for y in 0..dh {
                    for x in 0..dw {
                        let u = (x as f32 + 0.5) / dw as f32;
                        let v = (y as f32 + 0.5) / dh as f32;
                        let (su, sv) = rotation.source_of(u, v);
                        let (tx, ty) = if cols_v {
                            (rows[y as usize], cols[x as usize])
                        } else {
                            (cols[x as usize], rows[y as usize])
                        };
                        for (tap, s, len) in [
                            (tx, su * sw as f32 - 0.5, sw),
                            (ty, sv * sh as f32 - 0.5, sh),
                        ] {
                            let t0 = s.floor();
                            let frac = s - t0;
                            let clamp = |t: f32| t.clamp(0.0, (len - 1) as f32) as usize;
                            let (i0, i1) = (clamp(t0), clamp(t0 + 1.0));
                            // Near-integer positions may floor either way in f32.
                            if frac > 1e-4 && frac < 1.0 - 1e-4 {
                                assert_eq!(
                                    (tap.i0, tap.i1),
                                    (i0, i1),
                                    "{rotation:?} {dw}x{dh} ({x}, {y})"
                                );
                                if i0 != i1 {
                                    assert!((tap.w1 - frac).abs() < 1e-4);
                                }
                            } else {
                                let nearest = clamp(s.round());
                                let got = if tap.w1 > 0.5 { tap.i1 } else { tap.i0 };
                                assert_eq!(got, nearest, "{rotation:?} {dw}x{dh} ({x}, {y})");
                            }
                        }
                    }
                }
            }
        }
    }
}
