//! The API-overhead bench's picture (`docs/api_overhead.png`): draws a second against the
//! threads that make them, the measured points, this machine's core count as a shaded
//! band and a ceiling, and a projection to 16 cores drawn dashed. Drawn into an RGB buffer
//! with the 8x8 font (`font8x8`) and written with the `png` crate, as the main job's
//! timeline and `cmdlist-capture`'s charts are.

use std::path::Path;

/// The picture's width and height in pixels.
const WIDTH: usize = 800;
const HEIGHT: usize = 450;
/// The plot's box: left of it the y-axis labels, below it the x-axis and the caption.
const PLOT_LEFT: usize = 72;
const PLOT_RIGHT: usize = WIDTH - 24;
const PLOT_TOP: usize = 68;
const PLOT_BOTTOM: usize = HEIGHT - 86;
/// The x-axis runs from one thread to this many.
const MAX_THREADS: usize = 16;
/// A glyph's side at scale 1.
const GLYPH: usize = 8;

/// Paper, text, secondary text and the grid's lines.
const BACKGROUND: [u8; 3] = [250, 250, 247];
const INK: [u8; 3] = [30, 30, 38];
const FAINT_INK: [u8; 3] = [110, 110, 120];
const GRID: [u8; 3] = [226, 226, 220];
/// Beyond this machine's cores: a light band; its edge, ceiling and labels darker.
const BAND: [u8; 3] = [236, 232, 244];
const BAND_EDGE: [u8; 3] = [150, 130, 190];
/// Okabe and Ito's blue (measured) and vermillion (projected), distinct with any colour
/// vision, as the timeline's palette.
const MEASURED: [u8; 3] = [0, 114, 178];
const PROJECTED: [u8; 3] = [213, 94, 0];

/// What the picture shows: the bench's figures and the machine they were measured on.
pub struct Chart {
    /// The CPU's model name.
    pub cpu: String,
    /// The machine's logical CPUs.
    pub cores: usize,
    /// Measured draws a second, by threads: 1 the immediate context alone, `k` the
    /// immediate context and `k - 1` deferred contexts.
    pub measured: [(usize, f64); 3],
    /// Nanoseconds a deferred draw costs its recording thread (the parallel share).
    pub record_ns: f64,
    /// Nanoseconds a deferred draw costs the immediate context (the serial share).
    pub execute_ns: f64,
}

impl Chart {
    /// Draws a second with `threads` threads on as many cores: the immediate context's
    /// measured rate for one thread; for more, Amdahl's law over the measured shares, the
    /// immediate context's execute serial and the recording split over `threads - 1`
    /// deferred contexts.
    pub fn projected(&self, threads: usize) -> f64 {
        match threads {
            0 | 1 => self.measured[0].1,
            k => 1e9 / (self.execute_ns + self.record_ns / (k - 1) as f64),
        }
    }

    /// The most draws a second this machine's cores can make through deferred contexts:
    /// every core busy, each draw costing both shares.
    pub fn ceiling(&self) -> f64 {
        self.cores as f64 * 1e9 / (self.execute_ns + self.record_ns)
    }

    /// Draws the picture and writes it to `path` as a PNG.
    pub fn write_png(&self, path: &Path) -> std::io::Result<()> {
        let canvas = self.draw();
        let file = std::io::BufWriter::new(std::fs::File::create(path)?);
        let mut encoder = png::Encoder::new(file, WIDTH as u32, HEIGHT as u32);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().map_err(std::io::Error::other)?;
        writer
            .write_image_data(&canvas.rgb)
            .map_err(std::io::Error::other)?;
        writer.finish().map_err(std::io::Error::other)
    }

    /// The picture.
    fn draw(&self) -> Canvas {
        let mut c = Canvas::new();
        let projection: Vec<(usize, f64)> =
            (1..=MAX_THREADS).map(|k| (k, self.projected(k))).collect();
        let rates = || {
            projection
                .iter()
                .chain(&self.measured)
                .map(|&(_, rate)| rate)
        };
        // A logarithmic axis, whole decades, room for the legend below the lowest point: the
        // measured points stay readable beside a projection tens of times higher.
        let lowest = rates().fold(self.ceiling(), f64::min);
        let highest = rates().fold(self.ceiling(), f64::max);
        let (lo, hi) = ((lowest / 3.0).log10().floor(), highest.log10().ceil());
        let x = |threads: f64| {
            PLOT_LEFT as f64
                + (threads - 1.0) / (MAX_THREADS - 1) as f64 * (PLOT_RIGHT - PLOT_LEFT) as f64
        };
        let y = |rate: f64| {
            PLOT_BOTTOM as f64 - (rate.log10() - lo) / (hi - lo) * (PLOT_BOTTOM - PLOT_TOP) as f64
        };
        let (l, r, t, b) = (
            PLOT_LEFT as f64,
            PLOT_RIGHT as f64,
            PLOT_TOP as f64,
            PLOT_BOTTOM as f64,
        );

        // Beyond this machine's cores: the threads share them.
        let edge = x(self.cores.min(MAX_THREADS) as f64);
        let band = edge.round() as usize;
        c.fill(
            band,
            PLOT_TOP,
            PLOT_RIGHT - band,
            PLOT_BOTTOM - PLOT_TOP,
            BAND,
        );
        // The grid at 1, 2 and 5 of each decade, and the axes' labels.
        for decade in lo as i32..hi as i32 {
            for (m, labelled) in [(1.0, true), (2.0, false), (5.0, false)] {
                let rate = m * 10f64.powi(decade);
                let row = y(rate);
                c.line((l, row), (r, row), GRID, 1);
                let ink = if labelled { INK } else { FAINT_INK };
                c.text_right(
                    PLOT_LEFT - 6,
                    row as usize - GLYPH / 2,
                    &short(rate),
                    1,
                    ink,
                );
            }
        }
        c.text_right(
            PLOT_LEFT - 6,
            PLOT_TOP - GLYPH / 2,
            &short(10f64.powf(hi)),
            1,
            INK,
        );
        for k in 1..=MAX_THREADS {
            let col = x(k as f64);
            c.line((col, b), (col, b + 4.0), INK, 1);
            let label = k.to_string();
            let left = col as usize - label.len() * GLYPH / 2;
            c.text(left, PLOT_BOTTOM + 8, &label, 1, INK);
        }
        c.line((l, t), (r, t), GRID, 1);
        c.line((l, b), (r, b), INK, 1);
        c.line((l, t), (l, b), INK, 1);
        c.line((edge, t), (edge, b), BAND_EDGE, 2);
        c.text(
            band + 8,
            PLOT_BOTTOM - 14,
            &format!(
                "right of this line: more threads than this machine's {} cores",
                self.cores
            ),
            1,
            BAND_EDGE,
        );
        // The cores' ceiling: every core busy, from where every core has a thread on.
        let ceiling = y(self.ceiling());
        c.dashed((edge, ceiling), (r, ceiling), BAND_EDGE, 1, 3, 3);
        c.text_right(
            PLOT_RIGHT - 4,
            ceiling as usize + 5,
            &format!(
                "{}-core ceiling {}/(s+p) = {} draws/s",
                self.cores,
                self.cores,
                short(self.ceiling())
            ),
            1,
            BAND_EDGE,
        );

        // The projection, dashed, and the measured points over it.
        for pair in projection.windows(2) {
            let (from, to) = (pair[0], pair[1]);
            let ends = ((x(from.0 as f64), y(from.1)), (x(to.0 as f64), y(to.1)));
            c.dashed(ends.0, ends.1, PROJECTED, 2, 8, 5);
        }
        let (last_k, last_rate) = projection[MAX_THREADS - 1];
        c.text_right(
            x(last_k as f64) as usize,
            y(last_rate) as usize + 14,
            &format!("{} draws/s at 16", short(last_rate)),
            1,
            PROJECTED,
        );
        for pair in self.measured.windows(2) {
            let (from, to) = (pair[0], pair[1]);
            c.line(
                (x(from.0 as f64), y(from.1)),
                (x(to.0 as f64), y(to.1)),
                MEASURED,
                2,
            );
        }
        for &(k, rate) in &self.measured {
            let (px, py) = (x(k as f64), y(rate));
            c.dot(px, py, 5, MEASURED);
            // Below and right of its point, clear of the line that climbs to the next.
            c.text(px as usize + 8, py as usize + 6, &short(rate), 1, MEASURED);
        }

        // The title, the axis's name, the legend and the caption.
        c.text(16, 10, "API overhead: draw calls a second", 2, INK);
        c.text(
            16,
            32,
            &format!(
                "cmdlist over the null driver, on {} ({} logical CPUs)",
                self.cpu, self.cores
            ),
            1,
            FAINT_INK,
        );
        c.text(16, 48, "draws/s (log scale)", 1, INK);
        let legend = PLOT_RIGHT - 280;
        let legend_top = PLOT_BOTTOM - 70;
        c.dot(legend as f64 + 6.0, legend_top as f64 + 4.0, 4, MEASURED);
        c.text(legend + 18, legend_top, "measured on this machine", 1, INK);
        let dash = legend_top as f64 + 18.0;
        c.dashed(
            (legend as f64, dash),
            (legend as f64 + 12.0, dash),
            PROJECTED,
            2,
            5,
            2,
        );
        c.text(
            legend + 18,
            legend_top + 14,
            "projection to 16 cores (Amdahl)",
            1,
            INK,
        );
        let below = PLOT_BOTTOM + 22;
        let caption = [
            "threads: 1 = the immediate context (IC) alone; k = the IC executing the lists that k-1",
            "deferred contexts record (driver-built), each on a thread of its own. A draw: 2 binds, a",
            "ring append, a 64-byte constant-buffer discard every 16 draws, the command.",
        ];
        for (i, line) in caption.iter().enumerate() {
            c.text(16, below + 12 * i, line, 1, INK);
        }
        let model = [
            "Projection (Amdahl): draws/s = 1 / (s + p/(k-1)) for k > 1, where s = the IC's execute"
                .to_string(),
            format!(
                "of a draw = {:.2} ns (serial), p = its recording = {:.1} ns (parallel), both on one thread.",
                self.execute_ns, self.record_ns
            ),
        ];
        for (i, line) in model.iter().enumerate() {
            c.text(16, below + 40 + 12 * i, line, 1, PROJECTED);
        }
        c
    }
}

/// A rate in few characters: 850k, 9.69M, 25.1M, 394M, 1G.
fn short(rate: f64) -> String {
    let (value, unit) = match rate {
        r if r >= 1e9 => (r / 1e9, "G"),
        r if r >= 1e6 => (r / 1e6, "M"),
        r => (r / 1e3, "k"),
    };
    match value {
        v if v.fract().abs() < 1e-9 => format!("{v:.0}{unit}"),
        v if v < 10.0 => format!("{v:.2}{unit}"),
        v if v < 100.0 => format!("{v:.1}{unit}"),
        v => format!("{v:.0}{unit}"),
    }
}

/// An RGB picture being drawn.
struct Canvas {
    /// Three bytes a pixel, row by row.
    rgb: Vec<u8>,
}

impl Canvas {
    /// A picture of the background colour.
    fn new() -> Canvas {
        Canvas {
            rgb: BACKGROUND.repeat(WIDTH * HEIGHT),
        }
    }

    /// One pixel, if it is in the picture.
    fn set(&mut self, x: usize, y: usize, colour: [u8; 3]) {
        if x < WIDTH && y < HEIGHT {
            let at = 3 * (y * WIDTH + x);
            self.rgb[at..at + 3].copy_from_slice(&colour);
        }
    }

    /// A rectangle, clipped to the picture.
    fn fill(&mut self, x: usize, y: usize, w: usize, h: usize, colour: [u8; 3]) {
        for row in y..y + h {
            for col in x..x + w {
                self.set(col, row, colour);
            }
        }
    }

    /// A line `width` pixels wide.
    fn line(&mut self, from: (f64, f64), to: (f64, f64), colour: [u8; 3], width: usize) {
        self.dashed(from, to, colour, width, usize::MAX, 0);
    }

    /// A line `width` pixels wide, `on` pixels drawn then `off` left out, in turn.
    fn dashed(
        &mut self,
        (x0, y0): (f64, f64),
        (x1, y1): (f64, f64),
        colour: [u8; 3],
        width: usize,
        on: usize,
        off: usize,
    ) {
        let steps = (x1 - x0).abs().max((y1 - y0).abs()).ceil().max(1.0) as usize;
        for i in 0..=steps {
            if off > 0 && i % (on + off) >= on {
                continue;
            }
            let t = i as f64 / steps as f64;
            let x = (x0 + (x1 - x0) * t).round() as usize;
            let y = (y0 + (y1 - y0) * t).round() as usize;
            self.fill(x - width / 2, y - width / 2, width, width, colour);
        }
    }

    /// A filled disc of radius `r`.
    fn dot(&mut self, x: f64, y: f64, r: usize, colour: [u8; 3]) {
        let r = r as f64;
        for dy in -r as i64..=r as i64 {
            for dx in -r as i64..=r as i64 {
                if ((dx * dx + dy * dy) as f64) <= r * r {
                    self.set((x as i64 + dx) as usize, (y as i64 + dy) as usize, colour);
                }
            }
        }
    }

    /// ASCII text in the 8x8 font, `scale` times its size, its top-left corner at (x, y).
    fn text(&mut self, x: usize, y: usize, text: &str, scale: usize, colour: [u8; 3]) {
        for (i, c) in text.chars().enumerate() {
            let glyph = font8x8::legacy::BASIC_LEGACY
                .get(c as usize)
                .copied()
                .unwrap_or([0; 8]);
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..GLYPH {
                    if bits >> col & 1 == 1 {
                        let gx = x + (i * GLYPH + col) * scale;
                        self.fill(gx, y + row * scale, scale, scale, colour);
                    }
                }
            }
        }
    }

    /// Text ending at `right`.
    fn text_right(&mut self, right: usize, y: usize, text: &str, scale: usize, colour: [u8; 3]) {
        let w = text.chars().count() * GLYPH * scale;
        self.text(right.saturating_sub(w), y, text, scale, colour);
    }
}
