//! The last frame's timeline as a picture: one lane per thread that did the engine's work in
//! it, each span a bar coloured by its kind (a step inside another drawn thinner, inside
//! it), time along the x-axis with a scale in milliseconds, a faint line from each list's
//! `finish` to its `execute`, and a legend of the kinds drawn.

use super::capture::{Captured, Kind, Span};
use cmdlist::trace::SpanKind;

/// Picture width in pixels.
const WIDTH: usize = 1280;
/// Left margin, for the lanes' names.
const LABEL: usize = 88;
const RIGHT: usize = 16;
/// The title and the time scale above the lanes.
const HEADER: usize = 44;
const LANE: usize = 30;
/// The bar of an outermost span; each level of nesting is `INSET` pixels thinner a side.
const BAR: usize = 22;
const INSET: usize = 4;
const GLYPH: usize = 8;
/// The width of one entry of the legend.
const LEGEND: usize = 200;
const BACKGROUND: [u8; 3] = [250, 250, 247];
const INK: [u8; 3] = [40, 40, 48];
const GRID: [u8; 3] = [222, 222, 216];

/// An RGBA image.
pub struct Picture {
    pub width: usize,
    pub height: usize,
    pub rgba: Vec<u8>,
}

/// The timeline of one frame.
pub struct Timeline<'a> {
    /// The threads that opened spans in the frame, by name, the immediate context's first.
    pub lanes: Vec<&'a str>,
    /// The frame's extent, nanoseconds since the capture began.
    pub from: u64,
    pub to: u64,
    /// The engine's spans of the frame, with their lane in `lanes` and their depth.
    spans: Vec<(&'a Span, usize, usize)>,
    /// Flows, as (finish, its row, execute, its row), both in the frame.
    flows: Vec<(&'a Span, usize, &'a Span, usize)>,
    title: String,
}

/// The colour of a kind of span: recording and Finish warm, executing blue, flushing and
/// destruction violet and red, the DXGI work green.
fn colour(kind: SpanKind) -> [u8; 3] {
    match kind {
        SpanKind::Record => [244, 177, 84],
        SpanKind::Finish => [214, 110, 36],
        SpanKind::RecycleLists => [250, 215, 90],
        SpanKind::RecycleCreateList => [120, 190, 70],
        SpanKind::CreateList => [200, 60, 60],
        SpanKind::CloseHandles => [170, 120, 80],
        SpanKind::RenewContext => [150, 150, 60],
        SpanKind::Execute => [66, 120, 210],
        SpanKind::DestroyList => [150, 150, 150],
        SpanKind::Flush => [140, 100, 190],
        SpanKind::Submit => [95, 60, 150],
        SpanKind::DeferredDestruction => [205, 70, 110],
        SpanKind::Amortize => [120, 90, 70],
        SpanKind::Present => [40, 160, 110],
        SpanKind::Blt => [80, 190, 180],
        SpanKind::Rotate => [30, 110, 80],
        _ => [100, 100, 100],
    }
}

impl<'a> Timeline<'a> {
    /// The timeline of the last `frame` span captured; `None` when there is none.
    pub fn of_last_frame(captured: &'a Captured, title: &str) -> Option<Timeline<'a>> {
        let frame = captured
            .spans
            .iter()
            .filter(|s| matches!(s.kind, Kind::Frame(_)))
            .max_by_key(|s| s.start)?;
        let (from, to) = (frame.start, frame.end.max(frame.start + 1));
        let inside = |s: &&Span| s.start >= from && s.end <= to;
        let mut spans: Vec<&Span> = captured
            .spans
            .iter()
            .filter(|s| matches!(s.kind, Kind::Engine(_)))
            .filter(inside)
            .collect();
        spans.sort_by_key(|s| (s.lane, s.start, std::cmp::Reverse(s.end)));
        // Lanes: the threads with engine spans in the frame, the immediate context's first.
        let mut used: Vec<usize> = spans.iter().map(|s| s.lane).collect();
        used.dedup();
        used.sort_by_key(|&lane| {
            let name = &captured.lanes[lane];
            (*name != super::IMMEDIATE, name.clone())
        });
        let lanes = used.iter().map(|&l| captured.lanes[l].as_str()).collect();
        let row_of = |lane: usize| used.iter().position(|&l| l == lane);
        // Depth: how many spans of the same thread enclose this one.
        let mut placed = Vec::with_capacity(spans.len());
        let mut open: Vec<u64> = Vec::new();
        let mut lane_of_open = usize::MAX;
        for span in spans {
            if span.lane != lane_of_open {
                open.clear();
                lane_of_open = span.lane;
            }
            while open.last().is_some_and(|&end| end <= span.start) {
                open.pop();
            }
            let row = row_of(span.lane).expect("a used lane");
            placed.push((span, row, open.len()));
            open.push(span.end);
        }
        let flows = captured
            .flows()
            .into_iter()
            .filter(|(finish, execute)| inside(finish) && inside(execute))
            .filter_map(|(finish, execute)| {
                Some((finish, row_of(finish.lane)?, execute, row_of(execute.lane)?))
            })
            .collect();
        Some(Timeline {
            lanes,
            from,
            to,
            spans: placed,
            flows,
            title: title.to_owned(),
        })
    }

    /// The kinds of span drawn, in [`SpanKind::ALL`]'s order.
    pub fn kinds(&self) -> Vec<SpanKind> {
        SpanKind::ALL
            .iter()
            .copied()
            .filter(|k| {
                self.spans
                    .iter()
                    .any(|(s, _, _)| s.kind == Kind::Engine(*k))
            })
            .collect()
    }

    /// Draws the timeline.
    pub fn paint(&self) -> Picture {
        let kinds = self.kinds();
        let per_row = (WIDTH - LABEL) / LEGEND;
        let legend_rows = kinds.len().div_ceil(per_row);
        let lanes_bottom = HEADER + LANE * self.lanes.len();
        let height = lanes_bottom + 12 + legend_rows * 16 + 8;
        let mut canvas = Canvas::new(WIDTH, height);
        let span_ns = (self.to - self.from) as f64;
        let plot = (WIDTH - LABEL - RIGHT) as f64;
        let x_of =
            |ns: u64| LABEL + ((ns.saturating_sub(self.from)) as f64 / span_ns * plot) as usize;

        canvas.text(LABEL, 6, &self.title, INK);
        // The scale: a tick every 1, 2 or 5 x 10^k microseconds, about ten across.
        let step = tick_step(span_ns / 1e3 / 10.0);
        let mut tick = 0.0;
        while tick * 1e3 <= span_ns {
            let x = LABEL + (tick * 1e3 / span_ns * plot) as usize;
            canvas.fill(x, HEADER - 8, 1, lanes_bottom - HEADER + 8, GRID);
            // As many decimals as the step needs (a step of 50 us needs two).
            let decimals = (3.0 - step.log10().floor()).clamp(0.0, 3.0) as usize;
            let label = format!("{:.*} ms", decimals, tick / 1000.0);
            canvas.text(x + 2, HEADER - 18, &label, INK);
            tick += step;
        }
        for (row, name) in self.lanes.iter().enumerate() {
            let y = HEADER + row * LANE;
            canvas.fill(LABEL, y + LANE - 1, WIDTH - LABEL - RIGHT, 1, GRID);
            canvas.text(6, y + (LANE - GLYPH) / 2, name, INK);
        }
        for &(span, row, depth) in &self.spans {
            let Kind::Engine(kind) = span.kind else {
                continue;
            };
            let inset = (INSET * depth).min(BAR / 2 - 2);
            let y = HEADER + row * LANE + (LANE - BAR) / 2 + inset;
            let (x0, x1) = (x_of(span.start), x_of(span.end));
            canvas.fill(x0, y, (x1 - x0).max(1), BAR - 2 * inset, colour(kind));
        }
        for &(finish, from, execute, to) in &self.flows {
            let mid = |row: usize| HEADER + row * LANE + LANE / 2;
            canvas.line(
                (x_of(finish.end), mid(from)),
                (x_of(execute.start), mid(to)),
                [120, 130, 150],
            );
        }
        for (i, kind) in kinds.iter().enumerate() {
            let (x, y) = (
                LABEL + (i % per_row) * LEGEND,
                lanes_bottom + 12 + (i / per_row) * 16,
            );
            canvas.fill(x, y, 12, 10, colour(*kind));
            canvas.text(x + 16, y + 1, kind.name(), INK);
        }
        canvas.into_picture()
    }
}

/// The tick step in microseconds: the smallest of 1, 2 or 5 x 10^k at least `rough`.
fn tick_step(rough: f64) -> f64 {
    let mut magnitude = 1.0;
    loop {
        for m in [1.0, 2.0, 5.0] {
            if m * magnitude >= rough {
                return m * magnitude;
            }
        }
        magnitude *= 10.0;
    }
}

/// An RGB drawing surface.
struct Canvas {
    width: usize,
    height: usize,
    rgb: Vec<[u8; 3]>,
}

impl Canvas {
    fn new(width: usize, height: usize) -> Canvas {
        Canvas {
            width,
            height,
            rgb: vec![BACKGROUND; width * height],
        }
    }

    fn fill(&mut self, x: usize, y: usize, w: usize, h: usize, colour: [u8; 3]) {
        for row in y..(y + h).min(self.height) {
            for col in x..(x + w).min(self.width) {
                self.rgb[row * self.width + col] = colour;
            }
        }
    }

    /// A faint line: each pixel a fifth of the way toward `colour`.
    fn line(&mut self, (x0, y0): (usize, usize), (x1, y1): (usize, usize), colour: [u8; 3]) {
        let steps = x0.abs_diff(x1).max(y0.abs_diff(y1)).max(1);
        for i in 0..=steps {
            let t = i as f64 / steps as f64;
            let x = (x0 as f64 + (x1 as f64 - x0 as f64) * t).round() as usize;
            let y = (y0 as f64 + (y1 as f64 - y0 as f64) * t).round() as usize;
            if x < self.width && y < self.height {
                let p = &mut self.rgb[y * self.width + x];
                for c in 0..3 {
                    p[c] = ((4 * u16::from(p[c]) + u16::from(colour[c])) / 5) as u8;
                }
            }
        }
    }

    /// ASCII text in the 8x8 font, its top-left corner at (x, y).
    fn text(&mut self, x: usize, y: usize, text: &str, colour: [u8; 3]) {
        for (i, c) in text.chars().enumerate() {
            let glyph = font8x8::legacy::BASIC_LEGACY
                .get(c as usize)
                .copied()
                .unwrap_or([0; 8]);
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..GLYPH {
                    if bits >> col & 1 == 1 {
                        let (px, py) = (x + i * GLYPH + col, y + row);
                        if px < self.width && py < self.height {
                            self.rgb[py * self.width + px] = colour;
                        }
                    }
                }
            }
        }
    }

    fn into_picture(self) -> Picture {
        Picture {
            width: self.width,
            height: self.height,
            rgba: self
                .rgb
                .iter()
                .flat_map(|&[r, g, b]| [r, g, b, 255])
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_one_two_or_five_times_a_power_of_ten() {
        assert_eq!(tick_step(0.7), 1.0);
        assert_eq!(tick_step(130.0), 200.0);
        assert_eq!(tick_step(400.0), 500.0);
        assert_eq!(tick_step(501.0), 1000.0);
    }
}
