//! How many bytes a texture of any `DXGI_FORMAT` needs at least: see [`min_byte_size`].
//!
//! A texture in a format the reference Blt does not read (compressed, depth, video, wide
//! float...) is laid out by its driver, with pitches and alignment of its own, so the engine
//! cannot know its exact size; but every layout holds at least the texels' bits. Whatever
//! reads a texture through its allocation (a driver's copy, the kernel's present) may read
//! that many bytes, so a texture whose allocation is smaller is refused at creation.

use crate::desc::Texture2d;

/// How a format stores its texels: bits per texel, or bytes per 4×4 block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Texels {
    /// Bits per texel (packed: rounded up to whole bytes per row).
    Bits(u32),
    /// Bytes per 4×4 block (the BC formats).
    Block(u32),
}

/// The storage of `DXGI_FORMAT` number `format` (the values of `dxgiformat.h`, as
/// DirectXTex's `BitsPerPixel` counts them); `None` for `DXGI_FORMAT_UNKNOWN` and numbers
/// no DXGI format has.
fn texels(format: u32) -> Option<Texels> {
    use Texels::{Bits, Block};
    Some(match format {
        1..=4 => Bits(128),                       // R32G32B32A32
        5..=8 => Bits(96),                        // R32G32B32
        9..=22 => Bits(64),                       // R16G16B16A16, R32G32, R32G8X24 and kin
        23..=47 | 67 | 87..=93 => Bits(32), // 10:10:10:2, R8G8B8A8, R16G16, R32, D24S8, B8G8R8A8...
        48..=59 | 85 | 86 | 115 => Bits(16), // R8G8, R16, B5G6R5, B5G5R5A1, B4G4R4A4
        68 | 69 => Bits(16),                // R8G8_B8G8, G8R8_G8B8 (four bytes per two texels)
        60..=65 => Bits(8),                 // R8, A8
        66 => Bits(1),                      // R1
        70..=72 | 79..=81 => Block(8),      // BC1, BC4
        73..=78 | 82..=84 | 94..=99 => Block(16), // BC2, BC3, BC5, BC6H, BC7
        100 | 101 | 108 | 109 => Bits(32),  // AYUV, Y410, Y210, Y216
        102 => Bits(64),                    // Y416
        103 | 106 | 110 => Bits(12),        // NV12, 420_OPAQUE, NV11
        104 | 105 => Bits(24),              // P010, P016
        107 | 114 => Bits(16),              // YUY2, A8P8
        111..=113 => Bits(8),               // AI44, IA44, P8
        130 | 131 => Bits(16),              // P208, V208
        132 => Bits(24),                    // V408
        191 => Bits(16),                    // A4B4G4R4
        _ => return None,
    })
}

/// The fewest bytes `texture` can take in its format, all subresources and samples counted;
/// `None` for a format number DXGI does not define, or a size past 64 bits.
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
