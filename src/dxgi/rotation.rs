//! The rotation a Blt applies (R-X6), pinned in one function.

/// How a Blt rotates the source before copying (`DXGI_DDI_MODE_ROTATION`): counter-clockwise
/// as seen on screen (rows going down), by 90, 180 or 270 degrees (R-X6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Rotation {
    /// `DXGI_DDI_MODE_ROTATION_UNSPECIFIED`: treated as [`Rotation::Identity`].
    Unspecified = 0,
    /// No rotation.
    #[default]
    Identity = 1,
    /// 90 degrees counter-clockwise: a W×H source becomes H×W.
    Rotate90 = 2,
    /// 180 degrees.
    Rotate180 = 3,
    /// 270 degrees counter-clockwise (90 clockwise): a W×H source becomes H×W.
    Rotate270 = 4,
}

impl Rotation {
    /// The rotation a raw `DXGI_DDI_MODE_ROTATION` names; `None` beyond 4.
    pub fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw {
            0 => Rotation::Unspecified,
            1 => Rotation::Identity,
            2 => Rotation::Rotate90,
            3 => Rotation::Rotate180,
            4 => Rotation::Rotate270,
            _ => return None,
        })
    }

    /// Whether it turns the image (anything but identity or unspecified).
    pub const fn rotates(self) -> bool {
        matches!(
            self,
            Rotation::Rotate90 | Rotation::Rotate180 | Rotation::Rotate270
        )
    }

    /// Whether width and height trade places.
    pub const fn swaps_axes(self) -> bool {
        matches!(self, Rotation::Rotate90 | Rotation::Rotate270)
    }

    /// Where a point of the destination comes from in the source, both in normalised
    /// coordinates (0 to 1 across the rectangle, rows going down). The one place the
    /// direction is decided: source pixel (x, y) of a W×H image lands at
    ///
    /// | rotation | destination pixel |
    /// |---|---|
    /// | identity | (x, y) |
    /// | 90 | (y, W-1-x) |
    /// | 180 | (W-1-x, H-1-y) |
    /// | 270 | (H-1-y, x) |
    pub fn source_of(self, u: f32, v: f32) -> (f32, f32) {
        match self {
            Rotation::Unspecified | Rotation::Identity => (u, v),
            Rotation::Rotate90 => (1.0 - v, u),
            Rotation::Rotate180 => (1.0 - u, 1.0 - v),
            Rotation::Rotate270 => (v, 1.0 - u),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of `source_of`'s docs, pixel by pixel, on a 3×2 image (pixel centres).
    #[test]
    fn r_x6_rotation_maps_pixels_as_documented() {
        let (w, h) = (3u32, 2u32);
        for rotation in [
            Rotation::Identity,
            Rotation::Rotate90,
            Rotation::Rotate180,
            Rotation::Rotate270,
        ] {
            let (dw, dh) = if rotation.swaps_axes() {
                (h, w)
            } else {
                (w, h)
            };
            for y in 0..h {
                for x in 0..w {
                    let expected = match rotation {
                        Rotation::Rotate90 => (y, w - 1 - x),
                        Rotation::Rotate180 => (w - 1 - x, h - 1 - y),
                        Rotation::Rotate270 => (h - 1 - y, x),
                        _ => (x, y),
                    };
                    let (dx, dy) = expected;
                    let u = (dx as f32 + 0.5) / dw as f32;
                    let v = (dy as f32 + 0.5) / dh as f32;
                    let (su, sv) = rotation.source_of(u, v);
                    let back = (
                        (su * w as f32 - 0.5).round() as u32,
                        (sv * h as f32 - 0.5).round() as u32,
                    );
                    assert_eq!(back, (x, y), "{rotation:?}: dst {expected:?}");
                }
            }
        }
    }

    #[test]
    fn raw_rotations_beyond_four_are_refused() {
        assert_eq!(Rotation::from_raw(4), Some(Rotation::Rotate270));
        assert_eq!(Rotation::from_raw(5), None);
    }
}
