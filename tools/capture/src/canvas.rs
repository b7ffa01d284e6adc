//! A tiny rasterizer: rectangles, lines and 8x8 bitmap text into an RGB buffer.

/// An RGB picture being drawn.
pub struct Canvas {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    rgb: Vec<[u8; 3]>,
}

/// A glyph's width in pixels at scale 1.
pub const GLYPH: usize = 8;

impl Canvas {
    /// A canvas of `background`.
    pub fn new(width: usize, height: usize, background: [u8; 3]) -> Canvas {
        Canvas {
            width,
            height,
            rgb: vec![background; width * height],
        }
    }

    /// A rectangle, clipped to the canvas.
    pub fn fill(&mut self, x: usize, y: usize, w: usize, h: usize, colour: [u8; 3]) {
        for row in y..(y + h).min(self.height) {
            for col in x..(x + w).min(self.width) {
                self.rgb[row * self.width + col] = colour;
            }
        }
    }

    /// A line a pixel wide.
    pub fn line(&mut self, (x0, y0): (usize, usize), (x1, y1): (usize, usize), colour: [u8; 3]) {
        let steps = x0.abs_diff(x1).max(y0.abs_diff(y1)).max(1);
        for i in 0..=steps {
            let t = i as f64 / steps as f64;
            let x = (x0 as f64 + (x1 as f64 - x0 as f64) * t).round() as usize;
            let y = (y0 as f64 + (y1 as f64 - y0 as f64) * t).round() as usize;
            if x < self.width && y < self.height {
                self.rgb[y * self.width + x] = colour;
            }
        }
    }

    /// ASCII text in the 8x8 font, `scale` times its size, its top-left corner at (x, y).
    pub fn text(&mut self, x: usize, y: usize, text: &str, scale: usize, colour: [u8; 3]) {
        for (i, c) in text.chars().enumerate() {
            let glyph = font8x8::legacy::BASIC_LEGACY
                .get(c as usize)
                .copied()
                .unwrap_or([0; 8]);
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..8 {
                    if bits >> col & 1 == 1 {
                        let gx = x + (i * GLYPH + col) * scale;
                        self.fill(gx, y + row * scale, scale, scale, colour);
                    }
                }
            }
        }
    }

    /// Text ending at `right`.
    pub fn text_right(
        &mut self,
        right: usize,
        y: usize,
        text: &str,
        scale: usize,
        colour: [u8; 3],
    ) {
        let w = text.chars().count() * GLYPH * scale;
        self.text(right.saturating_sub(w), y, text, scale, colour);
    }

    /// The picture as RGBA bytes.
    pub fn rgba(&self) -> Vec<u8> {
        self.rgb
            .iter()
            .flat_map(|&[r, g, b]| [r, g, b, 255])
            .collect()
    }
}

/// A step between axis ticks near `rough`: 1, 2 or 5 times a power of ten, at least 1.
pub fn tick_step(rough: f64) -> u64 {
    let mut step = 1u64;
    loop {
        for m in [1, 2, 5] {
            if (step * m) as f64 >= rough {
                return step * m;
            }
        }
        match step.checked_mul(10) {
            Some(s) => step = s,
            None => return step,
        }
    }
}

/// A count in few characters: 950, 12k, 3.4M.
pub fn short(n: u64) -> String {
    match n {
        0..=9_999 => n.to_string(),
        10_000..=999_999 => format!("{}k", n / 1000),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_one_two_or_five_times_a_power_of_ten() {
        assert_eq!(tick_step(0.3), 1);
        assert_eq!(tick_step(3.0), 5);
        assert_eq!(tick_step(17.0), 20);
        assert_eq!(tick_step(4100.0), 5000);
    }

    #[test]
    fn counts_are_short() {
        assert_eq!(short(950), "950");
        assert_eq!(short(12_345), "12k");
        assert_eq!(short(3_400_000), "3.4M");
    }
}
