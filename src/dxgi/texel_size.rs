//! How many bytes a texture of any `DXGI_FORMAT` needs at least: see [`min_byte_size`].
//!
//! A texture in a format the reference Blt does not read (compressed, depth, video, wide
//! float...) is laid out by its driver, with pitches and alignment of its own, so the engine
//! cannot know its exact size; but every layout holds at least the texels' bits. Whatever
//! reads a texture through its allocation (a driver's copy, the kernel's present) may read
//! that many bytes, so a texture whose allocation is smaller is refused at creation (R-E1).
//!
//! The count is a lower bound, not DirectXTex's layout: it must never refuse a layout a
//! driver may use, and padding only adds bytes. Formats whose texels share samples count
//! their average per texel: the packed 4:2:2 ones (R8G8_B8G8, G8R8_G8B8, YUY2, Y210, Y216)
//! half of DirectXTex's `BitsPerPixel`, which counts a pair of texels, and an odd width not
//! rounded up to a pair; the planar video ones (NV12, P010, P016, 420_OPAQUE, NV11, P208,
//! V208, V408) their planes' samples averaged, without the rows or pitch by which a layout
//! (DirectXTex's `ComputePitch`, D3D12's format table) rounds its chroma planes up.

use crate::desc::Texture2d;

/// How a format stores its texels: bits per texel, or bytes per 4×4 block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Texels {
    /// Bits per texel (packed: rounded up to whole bytes per row).
    Bits(u32),
    /// Bytes per 4×4 block (the BC formats).
    Block(u32),
}

/// The storage of `DXGI_FORMAT` number `format` (the values of `dxgiformat.h`): DirectXTex's
/// `BitsPerPixel`, or a 4×4 block's bytes, but per texel for the packed formats (see the
/// module's doc); `None` for `DXGI_FORMAT_UNKNOWN`, the sampler feedback formats and numbers
/// no DXGI format has.
fn texels(format: u32) -> Option<Texels> {
    use Texels::{Bits, Block};
    Some(match format {
        1..=4 => Bits(128),                  // R32G32B32A32
        5..=8 => Bits(96),                   // R32G32B32
        9..=22 => Bits(64),                  // R16G16B16A16, R32G32, R32G8X24 and kin
        23..=47 | 67 | 87..=93 => Bits(32), // 10:10:10:2, R8G8B8A8, R16G16, R32, D24S8, B8G8R8A8...
        48..=59 | 85 | 86 | 115 => Bits(16), // R8G8, R16, B5G6R5, B5G5R5A1, B4G4R4A4
        // R8G8_B8G8, G8R8_G8B8: four bytes a pair of texels (DirectXTex: 32, per pair).
        68 | 69 => Bits(16),
        60..=65 => Bits(8),                       // R8, A8
        66 => Bits(1),                            // R1
        70..=72 | 79..=81 => Block(8),            // BC1, BC4
        73..=78 | 82..=84 | 94..=99 => Block(16), // BC2, BC3, BC5, BC6H, BC7
        100 | 101 => Bits(32),                    // AYUV, Y410
        // Y210, Y216: eight bytes a pair of texels (DirectXTex: 64, per pair).
        108 | 109 => Bits(32),
        102 => Bits(64), // Y416
        // Planar 4:2:0 and 4:1:1: a byte (NV12, 420_OPAQUE, NV11) or two (P010, P016) of luma
        // a texel, and half that of chroma.
        103 | 106 | 110 => Bits(12),
        104 | 105 => Bits(24),
        // YUY2: four bytes a pair of texels (DirectXTex: 32, per pair).
        107 => Bits(16),
        114 => Bits(16),       // A8P8
        111..=113 => Bits(8),  // AI44, IA44, P8
        130 | 131 => Bits(16), // P208 (4:2:2), V208 (4:4:0): a luma byte, a chroma byte
        // V408 (4:4:4): three full planes, three rows a luma row at any height, as D3D12's
        // format table counts them; DirectXTex's `ComputePitch` counts `h + (h >> 1) * 4`
        // rows, one at height 1: fewer than the texels' samples, so not a layout.
        132 => Bits(24),
        // The sampler feedback maps: opaque D3D12 resources, paired with the texture they
        // describe, whose size only their driver knows; a D3D11 texture cannot have them.
        189 | 190 => return None,
        191 => Bits(16), // A4B4G4R4
        _ => return None,
    })
}

/// The fewest bytes `texture` can take in its format, all subresources and samples counted;
/// `None` for a format a D3D11 texture cannot have (see [`texels`]), or a size past 64 bits.
pub(crate) fn min_byte_size(texture: &Texture2d) -> Option<u64> {
    let texels = texels(texture.format)?;
    let mut slice = 0u64;
    for mip in 0..u32::from(texture.mip_levels) {
        let shrink = |x: u32| x.checked_shr(mip).unwrap_or(0).max(1);
        let (w, h) = (
            u64::from(shrink(texture.width)),
            u64::from(shrink(texture.height)),
        );
        let level = match texels {
            Texels::Bits(bits) => w.checked_mul(u64::from(bits))?.div_ceil(8).checked_mul(h)?,
            Texels::Block(bytes) => w
                .div_ceil(4)
                .checked_mul(h.div_ceil(4))?
                .checked_mul(u64::from(bytes))?,
        };
        slice = slice.checked_add(level)?;
    }
    slice
        .checked_mul(u64::from(texture.samples))?
        .checked_mul(u64::from(texture.array_size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texture(width: u32, height: u32, format: u32) -> Texture2d {
        Texture2d {
            width,
            height,
            array_size: 1,
            mip_levels: 1,
            samples: 1,
            format,
        }
    }

    /// A format as DirectXTex (`DirectXTexUtil.cpp`) sizes it.
    #[derive(Clone, Copy, Debug)]
    enum Dxtex {
        /// `BitsPerPixel`, a texel's bits.
        Bits(u64),
        /// `IsCompressed`: bytes a 4×4 block (`ComputePitch`), `BitsPerPixel` × 2.
        Block(u64),
        /// `IsPacked`: `BitsPerPixel` counts a pair of texels sharing their chroma.
        Pair(u64),
        /// `IsPlanar`: `BitsPerPixel` averages the planes' samples over the luma texels.
        Planar(u64),
        /// No `Texture2D` of D3D11 has it.
        Refused,
    }

    use Dxtex::{Bits, Block, Pair, Planar, Refused};

    /// Every value of `dxgiformat.h`, with DirectXTex's `BitsPerPixel`, `IsCompressed`,
    /// `IsPacked` and `IsPlanar` for it. Numbers not listed are no DXGI format (DirectXTex's
    /// Xbox-only formats at 116..=120, 189 and 190 are not Windows ones).
    const DXGI_FORMATS: [(u32, &str, Dxtex); 122] = [
        (0, "UNKNOWN", Refused),
        (1, "R32G32B32A32_TYPELESS", Bits(128)),
        (2, "R32G32B32A32_FLOAT", Bits(128)),
        (3, "R32G32B32A32_UINT", Bits(128)),
        (4, "R32G32B32A32_SINT", Bits(128)),
        (5, "R32G32B32_TYPELESS", Bits(96)),
        (6, "R32G32B32_FLOAT", Bits(96)),
        (7, "R32G32B32_UINT", Bits(96)),
        (8, "R32G32B32_SINT", Bits(96)),
        (9, "R16G16B16A16_TYPELESS", Bits(64)),
        (10, "R16G16B16A16_FLOAT", Bits(64)),
        (11, "R16G16B16A16_UNORM", Bits(64)),
        (12, "R16G16B16A16_UINT", Bits(64)),
        (13, "R16G16B16A16_SNORM", Bits(64)),
        (14, "R16G16B16A16_SINT", Bits(64)),
        (15, "R32G32_TYPELESS", Bits(64)),
        (16, "R32G32_FLOAT", Bits(64)),
        (17, "R32G32_UINT", Bits(64)),
        (18, "R32G32_SINT", Bits(64)),
        (19, "R32G8X24_TYPELESS", Bits(64)),
        (20, "D32_FLOAT_S8X24_UINT", Bits(64)),
        (21, "R32_FLOAT_X8X24_TYPELESS", Bits(64)),
        (22, "X32_TYPELESS_G8X24_UINT", Bits(64)),
        (23, "R10G10B10A2_TYPELESS", Bits(32)),
        (24, "R10G10B10A2_UNORM", Bits(32)),
        (25, "R10G10B10A2_UINT", Bits(32)),
        (26, "R11G11B10_FLOAT", Bits(32)),
        (27, "R8G8B8A8_TYPELESS", Bits(32)),
        (28, "R8G8B8A8_UNORM", Bits(32)),
        (29, "R8G8B8A8_UNORM_SRGB", Bits(32)),
        (30, "R8G8B8A8_UINT", Bits(32)),
        (31, "R8G8B8A8_SNORM", Bits(32)),
        (32, "R8G8B8A8_SINT", Bits(32)),
        (33, "R16G16_TYPELESS", Bits(32)),
        (34, "R16G16_FLOAT", Bits(32)),
        (35, "R16G16_UNORM", Bits(32)),
        (36, "R16G16_UINT", Bits(32)),
        (37, "R16G16_SNORM", Bits(32)),
        (38, "R16G16_SINT", Bits(32)),
        (39, "R32_TYPELESS", Bits(32)),
        (40, "D32_FLOAT", Bits(32)),
        (41, "R32_FLOAT", Bits(32)),
        (42, "R32_UINT", Bits(32)),
        (43, "R32_SINT", Bits(32)),
        (44, "R24G8_TYPELESS", Bits(32)),
        (45, "D24_UNORM_S8_UINT", Bits(32)),
        (46, "R24_UNORM_X8_TYPELESS", Bits(32)),
        (47, "X24_TYPELESS_G8_UINT", Bits(32)),
        (48, "R8G8_TYPELESS", Bits(16)),
        (49, "R8G8_UNORM", Bits(16)),
        (50, "R8G8_UINT", Bits(16)),
        (51, "R8G8_SNORM", Bits(16)),
        (52, "R8G8_SINT", Bits(16)),
        (53, "R16_TYPELESS", Bits(16)),
        (54, "R16_FLOAT", Bits(16)),
        (55, "D16_UNORM", Bits(16)),
        (56, "R16_UNORM", Bits(16)),
        (57, "R16_UINT", Bits(16)),
        (58, "R16_SNORM", Bits(16)),
        (59, "R16_SINT", Bits(16)),
        (60, "R8_TYPELESS", Bits(8)),
        (61, "R8_UNORM", Bits(8)),
        (62, "R8_UINT", Bits(8)),
        (63, "R8_SNORM", Bits(8)),
        (64, "R8_SINT", Bits(8)),
        (65, "A8_UNORM", Bits(8)),
        (66, "R1_UNORM", Bits(1)),
        (67, "R9G9B9E5_SHAREDEXP", Bits(32)),
        (68, "R8G8_B8G8_UNORM", Pair(32)),
        (69, "G8R8_G8B8_UNORM", Pair(32)),
        (70, "BC1_TYPELESS", Block(8)),
        (71, "BC1_UNORM", Block(8)),
        (72, "BC1_UNORM_SRGB", Block(8)),
        (73, "BC2_TYPELESS", Block(16)),
        (74, "BC2_UNORM", Block(16)),
        (75, "BC2_UNORM_SRGB", Block(16)),
        (76, "BC3_TYPELESS", Block(16)),
        (77, "BC3_UNORM", Block(16)),
        (78, "BC3_UNORM_SRGB", Block(16)),
        (79, "BC4_TYPELESS", Block(8)),
        (80, "BC4_UNORM", Block(8)),
        (81, "BC4_SNORM", Block(8)),
        (82, "BC5_TYPELESS", Block(16)),
        (83, "BC5_UNORM", Block(16)),
        (84, "BC5_SNORM", Block(16)),
        (85, "B5G6R5_UNORM", Bits(16)),
        (86, "B5G5R5A1_UNORM", Bits(16)),
        (87, "B8G8R8A8_UNORM", Bits(32)),
        (88, "B8G8R8X8_UNORM", Bits(32)),
        (89, "R10G10B10_XR_BIAS_A2_UNORM", Bits(32)),
        (90, "B8G8R8A8_TYPELESS", Bits(32)),
        (91, "B8G8R8A8_UNORM_SRGB", Bits(32)),
        (92, "B8G8R8X8_TYPELESS", Bits(32)),
        (93, "B8G8R8X8_UNORM_SRGB", Bits(32)),
        (94, "BC6H_TYPELESS", Block(16)),
        (95, "BC6H_UF16", Block(16)),
        (96, "BC6H_SF16", Block(16)),
        (97, "BC7_TYPELESS", Block(16)),
        (98, "BC7_UNORM", Block(16)),
        (99, "BC7_UNORM_SRGB", Block(16)),
        (100, "AYUV", Bits(32)),
        (101, "Y410", Bits(32)),
        (102, "Y416", Bits(64)),
        (103, "NV12", Planar(12)),
        (104, "P010", Planar(24)),
        (105, "P016", Planar(24)),
        (106, "420_OPAQUE", Planar(12)),
        (107, "YUY2", Pair(32)),
        (108, "Y210", Pair(64)),
        (109, "Y216", Pair(64)),
        (110, "NV11", Planar(12)),
        (111, "AI44", Bits(8)),
        (112, "IA44", Bits(8)),
        (113, "P8", Bits(8)),
        (114, "A8P8", Bits(16)),
        (115, "B4G4R4A4_UNORM", Bits(16)),
        (130, "P208", Planar(16)),
        (131, "V208", Planar(16)),
        (132, "V408", Planar(24)),
        // Opaque D3D12 feedback maps: see `texels`.
        (189, "SAMPLER_FEEDBACK_MIN_MIP_OPAQUE", Refused),
        (190, "SAMPLER_FEEDBACK_MIP_REGION_USED_OPAQUE", Refused),
        (191, "A4B4G4R4_UNORM", Bits(16)),
    ];

    fn dxtex(format: u32) -> Dxtex {
        DXGI_FORMATS
            .iter()
            .find(|row| row.0 == format)
            .map_or(Refused, |row| row.2)
    }

    /// The least bytes a `w`×`h` image of `format` holds, from the table alone: the texels'
    /// bits, a pair's bits halved, whole 4×4 blocks.
    fn expected(format: u32, w: u64, h: u64) -> Option<u64> {
        Some(match dxtex(format) {
            Bits(bits) | Planar(bits) => (w * bits).div_ceil(8) * h,
            Pair(bits) => (w * bits).div_ceil(16) * h,
            Block(bytes) => w.div_ceil(4) * h.div_ceil(4) * bytes,
            Refused => return None,
        })
    }

    /// DirectXTex's `ComputePitch` slice (default flags) for the packed and planar formats,
    /// its odd-size refusals ignored.
    fn compute_pitch_slice(format: u32, w: u64, h: u64) -> u64 {
        let half_h = h.div_ceil(2);
        match format {
            68 | 69 | 107 => w.div_ceil(2) * 4 * h,
            108 | 109 => w.div_ceil(2) * 8 * h,
            103 | 106 => w.div_ceil(2) * 2 * (h + half_h),
            104 | 105 => w.div_ceil(2) * 4 * (h + half_h),
            110 => w.div_ceil(4) * 4 * h * 2,
            130 => w.div_ceil(2) * 2 * h * 2,
            131 => w * (h + half_h * 2),
            132 => w * (h + (h >> 1) * 4),
            _ => unreachable!("{format} is neither packed nor planar"),
        }
    }

    const SIZES: [(u32, u32); 12] = [
        (1, 1),
        (2, 1),
        (1, 2),
        (2, 2),
        (3, 1),
        (1, 3),
        (3, 3),
        (4, 4),
        (5, 7),
        (8, 8),
        (17, 6),
        (1000, 999),
    ];

    /// Every format number, each against a table of DirectXTex's sizes: a change to any one
    /// row of `texels` changes a size here.
    #[test]
    fn r_e1_every_dxgi_format_is_sized_as_directxtex_counts_it() {
        let beyond = [192, 193, 200, 255, 256, 1000, u32::MAX];
        for format in (0..=191).chain(beyond) {
            let row = dxtex(format);
            if let Block(bytes) = row {
                assert!(bytes == 8 || bytes == 16, "{format}");
            }
            for (w, h) in SIZES {
                let want = expected(format, w.into(), h.into());
                let got = min_byte_size(&texture(w, h, format));
                assert_eq!(got, want, "format {format} ({row:?}) at {w}x{h}");
            }
        }
        // Whole shapes: each mip's size, times samples and slices.
        for &(format, name, row) in &DXGI_FORMATS {
            let t = Texture2d {
                array_size: 3,
                mip_levels: 4,
                samples: 2,
                ..texture(13, 6, format)
            };
            let mips = [(13, 6), (6, 3), (3, 1), (1, 1)];
            let want = mips
                .iter()
                .map(|&(w, h)| expected(format, w, h))
                .sum::<Option<u64>>()
                .map(|slice| slice * 2 * 3);
            assert_eq!(min_byte_size(&t), want, "{name} ({row:?})");
        }
        // Spot checks a reader can do by hand: a 4x4 BC7 block is 16 bytes, BC1 8;
        // R32G32B32_FLOAT 12 bytes a texel.
        assert_eq!(min_byte_size(&texture(4, 4, 98)), Some(16));
        assert_eq!(min_byte_size(&texture(4, 4, 71)), Some(8));
        assert_eq!(min_byte_size(&texture(1, 1, 6)), Some(12));
    }

    /// The packed and planar formats count the texels' samples, a lower bound of the layouts
    /// DirectXTex computes (equal where a format's sizes need no rounding), never above one:
    /// creation never refuses an allocation a driver may have laid out.
    #[test]
    fn r_e1_packed_and_planar_formats_are_lower_bounds_of_directxtex_layouts() {
        for &(format, name, row) in &DXGI_FORMATS {
            if !matches!(row, Pair(_) | Planar(_)) {
                continue;
            }
            for w in 1..=9u32 {
                for h in 1..=9u32 {
                    let got = min_byte_size(&texture(w, h, format)).unwrap();
                    let layout = compute_pitch_slice(format, w.into(), h.into());
                    let at = format!("{name} at {w}x{h}");
                    if format == 132 && h % 2 == 1 {
                        // V408: see `texels_of_v408_are_three_full_planes`.
                        assert_eq!(layout, u64::from(w) * u64::from(3 * h - 2), "{at}");
                        assert_eq!(got, 3 * u64::from(w * h), "{at}");
                        continue;
                    }
                    assert!(got <= layout, "{at}: {got} > {layout}");
                    // NV11 pads its chroma plane to the luma's pitch, 2 bytes a texel.
                    let even = w % 4 == 0 && h % 2 == 0;
                    if even && format != 110 {
                        assert_eq!(got, layout, "{at}");
                    }
                }
            }
        }
    }

    /// V408 is 4:4:4: a luma, a U and a V plane, each a byte a texel, 3 bytes a texel at any
    /// size, as D3D12's format table counts it (`CalculateExtraPlanarRows`: `h + 4h / 2`
    /// rows). DirectXTex's `ComputePitch` counts `h + (h >> 1) * 4` rows: at height 1 a
    /// single row, `w` bytes, where the row's own U and V samples need `2w` more.
    #[test]
    fn texels_of_v408_are_three_full_planes() {
        for (w, h, bytes) in [
            (1, 1, 3),
            (2, 1, 6),
            (7, 1, 21),
            (1, 2, 6),
            (3, 3, 27),
            (4, 4, 48),
        ] {
            assert_eq!(min_byte_size(&texture(w, h, 132)), Some(bytes), "{w}x{h}");
        }
        assert_eq!(compute_pitch_slice(132, 7, 1), 7, "DirectXTex: one row");
        // Mips shrink to 1x1, still three bytes.
        let mips = Texture2d {
            mip_levels: 3,
            ..texture(4, 1, 132)
        };
        assert_eq!(min_byte_size(&mips), Some(12 + 6 + 3));
    }

    /// The other video and 4-bit formats at small and odd sizes: P208 and V208 two bytes a
    /// texel (a luma byte, a chroma byte on average), the 4:2:0 ones 1.5 or 3 rounded up a
    /// row, B4G4R4A4 and A4B4G4R4 two bytes.
    #[test]
    fn small_and_odd_sizes_of_the_video_and_4_bit_formats() {
        for format in [130, 131, 115, 191] {
            for (w, h, bytes) in [(1, 1, 2), (3, 1, 6), (1, 3, 6), (3, 5, 30), (2, 2, 8)] {
                let got = min_byte_size(&texture(w, h, format));
                assert_eq!(got, Some(bytes), "{format} at {w}x{h}");
            }
        }
        // NV12, 420_OPAQUE, NV11: 12 bits, rows rounded up to bytes.
        for format in [103, 106, 110] {
            for (w, h, bytes) in [(1, 1, 2), (3, 1, 5), (1, 3, 6), (3, 3, 15), (2, 2, 6)] {
                let got = min_byte_size(&texture(w, h, format));
                assert_eq!(got, Some(bytes), "{format} at {w}x{h}");
            }
        }
        // P010, P016: 24 bits.
        for format in [104, 105] {
            for (w, h, bytes) in [(1, 1, 3), (3, 1, 9), (3, 3, 27), (2, 2, 12)] {
                let got = min_byte_size(&texture(w, h, format));
                assert_eq!(got, Some(bytes), "{format} at {w}x{h}");
            }
        }
    }

    /// The sampler feedback formats are DXGI's but not a D3D11 texture's: opaque D3D12 maps
    /// of another resource's sampling, sized by their driver from that resource, so no count
    /// of texels bounds them. Refused like an undefined number.
    #[test]
    fn r_e1_sampler_feedback_formats_are_refused() {
        for format in [189, 190] {
            assert_eq!(texels(format), None);
            assert_eq!(min_byte_size(&texture(1, 1, format)), None);
        }
        assert_eq!(texels(188), None, "no format");
        assert_eq!(texels(191), Some(Texels::Bits(16)), "A4B4G4R4");
    }

    /// Sizes past 64 bits are `None` wherever they overflow (a row times the height, the
    /// mips summed, the samples, the slices), and the largest that fit are counted exactly.
    #[test]
    fn r_e1_sizes_past_64_bits_are_none_and_the_largest_fit() {
        let max = u32::MAX;
        let m = u64::from(max);
        let with = |t: Texture2d, mip_levels: u8, samples: u8, array_size: u16| Texture2d {
            mip_levels,
            samples,
            array_size,
            ..t
        };
        // Rows: R8 at the largest shape fits, R8G8 (twice that) does not; nor R1 at 1/8.
        assert_eq!(min_byte_size(&texture(max, max, 61)), Some(m * m));
        assert_eq!(min_byte_size(&texture(max, max, 49)), None);
        assert_eq!(
            min_byte_size(&texture(max, max, 66)),
            Some(m.div_ceil(8) * m)
        );
        // The widest texel, 16 bytes, in the widest row: 2^28 rows fit, one more does not.
        assert_eq!(
            min_byte_size(&texture(max, 1 << 28, 2)),
            Some((16 * m) << 28)
        );
        assert_eq!(min_byte_size(&texture(max, (1 << 28) + 1, 2)), None);
        // Blocks: 2^60 BC1 blocks of 8 bytes fit, of BC7's 16 do not.
        assert_eq!(min_byte_size(&texture(max, max, 71)), Some(1 << 63));
        assert_eq!(min_byte_size(&texture(max, max, 98)), None);
        // Mips: the top level fits, the sum with the next does not.
        let r8 = texture(max, max, 61);
        assert_eq!(min_byte_size(&with(r8, 2, 1, 1)), None);
        let half = texture(1 << 31, 1 << 31, 61); // 2^62 bytes
        let mips = (1u64 << 62) + (1 << 60) + (1 << 58);
        assert_eq!(min_byte_size(&with(half, 3, 1, 1)), Some(mips));
        // Samples: 3 × 2^62 fits, 4 does not.
        assert_eq!(min_byte_size(&with(half, 1, 3, 1)), Some(3 << 62));
        assert_eq!(min_byte_size(&with(half, 1, 4, 1)), None);
        // Slices: 2^31 x 2^28 R32G32B32A32 is 2^63 bytes; two slices are 2^64, which a
        // wrapping product would make 0 and so accept any allocation.
        let wide = texture(1 << 31, 1 << 28, 2);
        assert_eq!(min_byte_size(&wide), Some(1 << 63));
        assert_eq!(min_byte_size(&with(wide, 1, 1, 2)), None);
        assert_eq!(min_byte_size(&with(wide, 1, 2, 1)), None);
        let quarter = texture(1 << 31, 1 << 26, 2); // 2^61 bytes
        assert_eq!(min_byte_size(&with(quarter, 1, 1, 7)), Some(7 << 61));
        assert_eq!(min_byte_size(&with(quarter, 1, 1, 8)), None);
        assert_eq!(min_byte_size(&with(quarter, 1, 1, u16::MAX)), None);
        // Everything at once, and mips past a dimension's bits.
        let all = with(texture(max, max, 2), u8::MAX, u8::MAX, u16::MAX);
        assert_eq!(min_byte_size(&all), None);
        let tall = with(texture(1, 1, 2), u8::MAX, 1, 1);
        assert_eq!(min_byte_size(&tall), Some(16 * 255));
    }

    #[test]
    fn every_format_counts_at_least_its_texels() {
        // R32G32B32A32_FLOAT: 16 bytes a texel.
        assert_eq!(min_byte_size(&texture(1000, 1000, 2)), Some(16_000_000));
        // BC1: 8 bytes a 4x4 block, partial blocks whole.
        assert_eq!(min_byte_size(&texture(5, 4, 71)), Some(16));
        // R1_UNORM: a bit a texel, rows rounded up to bytes.
        assert_eq!(min_byte_size(&texture(9, 2, 66)), Some(4));
        // B8G8R8A8_UNORM, two mips, two slices, four samples.
        let t = Texture2d {
            array_size: 2,
            mip_levels: 2,
            samples: 4,
            ..texture(4, 2, 87)
        };
        // Mip 0 is 4x2, mip 1 2x1, 4 bytes a sample.
        assert_eq!(min_byte_size(&t), Some((32 + 8) * 4 * 2));
        // Exact for every display format, whose layout `Texture2d` fixes.
        for format in crate::dxgi::DisplayFormat::ALL {
            let t = Texture2d {
                format: format.to_dxgi(),
                ..t
            };
            assert_eq!(t.byte_size(), min_byte_size(&t), "{format:?}");
        }
        // Unknown, and no format at all.
        assert_eq!(min_byte_size(&texture(1, 1, 0)), None);
        assert_eq!(min_byte_size(&texture(1, 1, 1000)), None);
        assert_eq!(
            min_byte_size(&texture(u32::MAX, u32::MAX, 2)),
            None,
            "past 64 bits"
        );
    }
}
