//! A pixel rectangle.

/// A rectangle of pixels, `left..right` by `top..bottom` (right and bottom exclusive), as the
/// DDI's `DstLeft, DstTop, DstRight, DstBottom`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Rect {
    /// First column.
    pub left: u32,
    /// First row.
    pub top: u32,
    /// One past the last column.
    pub right: u32,
    /// One past the last row.
    pub bottom: u32,
}

impl Rect {
    /// The whole of a `width` by `height` surface.
    pub const fn whole(width: u32, height: u32) -> Self {
        Rect {
            left: 0,
            top: 0,
            right: width,
            bottom: height,
        }
    }

    /// Its width, 0 when empty or inverted.
    pub const fn width(&self) -> u32 {
        self.right.saturating_sub(self.left)
    }

    /// Its height, 0 when empty or inverted.
    pub const fn height(&self) -> u32 {
        self.bottom.saturating_sub(self.top)
    }

    /// Whether it holds at least one pixel and lies inside a `width` by `height` surface.
    pub const fn is_inside(&self, width: u32, height: u32) -> bool {
        self.left < self.right
            && self.top < self.bottom
            && self.right <= width
            && self.bottom <= height
    }
}
