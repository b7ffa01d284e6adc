//! The display-mode formats (R-X7): the only formats Blt and present take.

/// One of the eight display-mode formats of R-X7, with its `DXGI_FORMAT` number.
///
/// Bit layouts (little-endian words, bit 0 the least significant):
///
/// | format | bytes | layout |
/// |---|---|---|
/// | `R16G16B16A16Float` | 8 | four binary16: R bytes 0-1, G 2-3, B 4-5, A 6-7 |
/// | `R10G10B10A2Unorm` | 4 | u32: R bits 0-9, G 10-19, B 20-29, A 30-31 |
/// | `R8G8B8A8Unorm`, `R8G8B8A8UnormSrgb` | 4 | byte 0 R, 1 G, 2 B, 3 A |
/// | `B5G6R5Unorm` | 2 | u16: B bits 0-4, G 5-10, R 11-15; no alpha (reads 1.0) |
/// | `B5G5R5A1Unorm` | 2 | u16: B bits 0-4, G 5-9, R 10-14, A 15 |
/// | `B8G8R8A8Unorm` | 4 | byte 0 B, 1 G, 2 R, 3 A |
/// | `B8G8R8X8Unorm` | 4 | byte 0 B, 1 G, 2 R, 3 unused (reads alpha 1.0, written 0xFF) |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum DisplayFormat {
    /// `DXGI_FORMAT_R16G16B16A16_FLOAT`: linear light, half floats.
    R16G16B16A16Float = 10,
    /// `DXGI_FORMAT_R10G10B10A2_UNORM`.
    R10G10B10A2Unorm = 24,
    /// `DXGI_FORMAT_R8G8B8A8_UNORM`.
    R8G8B8A8Unorm = 28,
    /// `DXGI_FORMAT_R8G8B8A8_UNORM_SRGB`.
    R8G8B8A8UnormSrgb = 29,
    /// `DXGI_FORMAT_B5G6R5_UNORM`.
    B5G6R5Unorm = 85,
    /// `DXGI_FORMAT_B5G5R5A1_UNORM`.
    B5G5R5A1Unorm = 86,
    /// `DXGI_FORMAT_B8G8R8A8_UNORM`.
    B8G8R8A8Unorm = 87,
    /// `DXGI_FORMAT_B8G8R8X8_UNORM`.
    B8G8R8X8Unorm = 88,
}

impl DisplayFormat {
    /// The eight formats, in `DXGI_FORMAT` order.
    pub const ALL: [DisplayFormat; 8] = [
        DisplayFormat::R16G16B16A16Float,
        DisplayFormat::R10G10B10A2Unorm,
        DisplayFormat::R8G8B8A8Unorm,
        DisplayFormat::R8G8B8A8UnormSrgb,
        DisplayFormat::B5G6R5Unorm,
        DisplayFormat::B5G5R5A1Unorm,
        DisplayFormat::B8G8R8A8Unorm,
        DisplayFormat::B8G8R8X8Unorm,
    ];

    /// The display format a raw `DXGI_FORMAT` number names, if it names one (R-X7).
    pub fn from_dxgi(raw: u32) -> Option<Self> {
        DisplayFormat::ALL.into_iter().find(|f| *f as u32 == raw)
    }

    /// Its `DXGI_FORMAT` number.
    pub const fn to_dxgi(self) -> u32 {
        self as u32
    }

    /// Bytes per pixel (per sample).
    pub const fn bytes_per_pixel(self) -> usize {
        match self {
            DisplayFormat::R16G16B16A16Float => 8,
            DisplayFormat::B5G6R5Unorm | DisplayFormat::B5G5R5A1Unorm => 2,
            _ => 4,
        }
    }

    /// Whether it holds linear-light floats (R-X7: the float domain); the other seven hold
    /// gamma-encoded normalised integers.
    pub const fn is_float(self) -> bool {
        matches!(self, DisplayFormat::R16G16B16A16Float)
    }

    /// Whether it is an `_SRGB` format.
    pub const fn is_srgb(self) -> bool {
        matches!(self, DisplayFormat::R8G8B8A8UnormSrgb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r_x7_exactly_the_eight_display_formats_are_named() {
        let named: Vec<u32> = (0..200)
            .filter(|raw| DisplayFormat::from_dxgi(*raw).is_some())
            .collect();
        assert_eq!(named, [10, 24, 28, 29, 85, 86, 87, 88]);
        for f in DisplayFormat::ALL {
            assert_eq!(DisplayFormat::from_dxgi(f.to_dxgi()), Some(f));
        }
    }
}
