//! The last frame's timeline as a picture: one lane per thread that did the engine's work in
//! it, each span a bar coloured by what it is for (a handful of [`Category`]s; a step inside
//! another drawn thinner and darker, inside it), time along the x-axis with a scale in
//! milliseconds. A title states what the frame measured: how long it took, and whether the
//! recording threads overlapped and by how much. Behind the bars, one thin line per
//! recording thread, from its last Finish to the first execute of its lists. On the
//! immediate context's lane, each category of steps is labelled with what it did and how
//! long it took in all, short steps widened to stay visible; its wait for the recordings is
//! labelled too. Text is the 8x8 font at twice its size.

use super::capture::{Captured, Kind, Span};
use cmdlist::trace::SpanKind;

/// Picture width in pixels.
const WIDTH: usize = 1280;
/// Left margin, for the lanes' names.
const LABEL: usize = 184;
const RIGHT: usize = 24;
/// A glyph: the 8x8 font at twice its size.
const GLYPH: usize = 16;
/// A line of text.
const LINE: usize = 22;
/// The title's two lines and the time scale above the lanes.
const HEADER: usize = 8 + 2 * LINE + 8 + LINE + 6;
/// A lane: a row for labels above its bar, then the bar.
const LANE: usize = 64;
const LABEL_ROW: usize = 20;
/// The bar of an outermost span; each level of nesting is `INSET` pixels thinner a side.
const BAR: usize = 34;
const INSET: usize = 5;
/// The narrowest bar drawn, in pixels, so that the shortest steps show.
const MIN_BAR: usize = 3;
/// The narrowest run of steps drawn on the immediate context's lane.
const MIN_RUN: usize = 8;
/// A label's swatch on the immediate context's lane.
const SWATCH: usize = 14;
const BACKGROUND: [u8; 3] = [250, 250, 247];
const INK: [u8; 3] = [30, 30, 38];
const FAINT_INK: [u8; 3] = [110, 110, 120];
const GRID: [u8; 3] = [222, 222, 216];
const FLOW: [u8; 3] = [150, 150, 160];
/// How much darker a step inside another is drawn.
const DARKER: f32 = 0.78;

/// An RGBA image.
pub struct Picture {
    pub width: usize,
    pub height: usize,
    pub rgba: Vec<u8>,
}

/// What a span is for, as a reader of the timeline needs it: one colour each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    /// A deferred context records a list.
    Record,
    /// Finish and its steps (recycling, making the list, closing handles), and a list's
    /// destroy.
    Finish,
    /// CommandListExecute on the immediate context.
    Execute,
    /// The soft driver's Blt, on the CPU.
    Blt,
    /// Present, flush, submit, deferred destruction, amortised processing, rotation.
    Present,
    /// A kind of span this picture does not know.
    Other,
}

impl Category {
    /// Every category, in the legend's order.
    pub const ALL: [Category; 6] = [
        Category::Record,
        Category::Finish,
        Category::Execute,
        Category::Blt,
        Category::Present,
        Category::Other,
    ];

    /// The category of a kind of span.
    pub fn of(kind: SpanKind) -> Category {
        match kind {
            SpanKind::Record => Category::Record,
            SpanKind::Finish
            | SpanKind::RecycleLists
            | SpanKind::RecycleCreateList
            | SpanKind::CreateList
            | SpanKind::CloseHandles
            | SpanKind::RenewContext
            | SpanKind::DestroyList => Category::Finish,
            SpanKind::Execute => Category::Execute,
            SpanKind::Blt => Category::Blt,
            SpanKind::Flush
            | SpanKind::Submit
            | SpanKind::DeferredDestruction
            | SpanKind::Amortize
            | SpanKind::Present
            | SpanKind::Rotate => Category::Present,
            _ => Category::Other,
        }
    }

    /// The legend's name.
    pub fn name(self) -> &'static str {
        match self {
            Category::Record => "record",
            Category::Finish => "Finish, recycle, destroy list",
            Category::Execute => "execute",
            Category::Blt => "Blt (soft driver, CPU)",
            Category::Present => "present, flush, rotate",
            Category::Other => "other",
        }
    }

    /// The colour: Okabe and Ito's palette, distinct with any colour vision.
    pub fn colour(self) -> [u8; 3] {
        match self {
            Category::Record => [0, 114, 178],
            Category::Finish => [230, 159, 0],
            Category::Execute => [0, 158, 115],
            Category::Blt => [213, 94, 0],
            Category::Present => [204, 121, 167],
            Category::Other => [150, 150, 150],
        }
    }

    /// A name for the immediate context's label of its total.
    fn label(self) -> &'static str {
        match self {
            Category::Record => "record",
            Category::Finish => "destroy lists",
            Category::Execute => "execute",
            Category::Blt => "soft driver's CPU Blt",
            Category::Present => "present",
            Category::Other => "other",
        }
    }
}

/// How much the recording threads' work overlapped in the frame.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Overlap {
    /// Recording threads (lanes other than the immediate context's with spans).
    pub threads: usize,
    /// Nanoseconds during which at least one of them was in a span.
    pub busy: u64,
    /// Nanoseconds during which at least two were.
    pub two: u64,
    /// Nanoseconds during which all of them were.
    pub all: u64,
}

impl Overlap {
    /// The overlap of `lanes`, each a list of (start, end) intervals of one thread's work.
    pub fn of(lanes: &[Vec<(u64, u64)>]) -> Overlap {
        // +1 at each start, -1 at each end, over every lane's intervals merged per lane.
        let mut edges: Vec<(u64, i32)> = Vec::new();
        for intervals in lanes {
            for (start, end) in merged(intervals) {
                edges.push((start, 1));
                edges.push((end, -1));
            }
        }
        edges.sort_unstable();
        let threads = lanes.iter().filter(|l| !l.is_empty()).count();
        let mut overlap = Overlap {
            threads,
            ..Overlap::default()
        };
        let (mut depth, mut at) = (0, 0);
        for (t, step) in edges {
            let len = t - at;
            if depth >= 1 {
                overlap.busy += len;
            }
            if depth >= 2 {
                overlap.two += len;
            }
            if depth >= 1 && depth as usize == threads {
                overlap.all += len;
            }
            depth += step;
            at = t;
        }
        overlap
    }

    /// What it means, in a line: whether the threads' recordings overlapped in time (a
    /// thread waiting for a core inside a span counts as recording), and by how much.
    pub fn describe(&self) -> String {
        let ms = |ns: u64| ns as f64 / 1e6;
        let n = self.threads;
        if n < 2 {
            return format!("{n} recording thread, {:.2} ms", ms(self.busy));
        }
        let share = self.two as f64 / self.busy.max(1) as f64;
        if share < 0.1 {
            format!(
                "{n} deferred contexts recorded one after another in {:.2} ms (overlap {:.2} ms)",
                ms(self.busy),
                ms(self.two)
            )
        } else {
            format!(
                "{n} deferred contexts' recordings overlapped {:.0}% of their {:.2} ms (all {n}: \
                 {:.0}%)",
                100.0 * share,
                ms(self.busy),
                100.0 * self.all as f64 / self.busy.max(1) as f64
            )
        }
    }
}

/// `intervals` sorted and merged where they touch or overlap.
fn merged(intervals: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut sorted = intervals.to_vec();
    sorted.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(sorted.len());
    for (start, end) in sorted {
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
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

impl<'a> Timeline<'a> {
    /// The timeline of the last `frame` span captured; `None` when there is none. `title`
    /// begins the picture's first line.
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

    /// The categories drawn, in [`Category::ALL`]'s order.
    pub fn categories(&self) -> Vec<Category> {
        let kinds = self.kinds();
        Category::ALL
            .into_iter()
            .filter(|c| kinds.iter().any(|&k| Category::of(k) == *c))
            .collect()
    }

    /// Whether `row` is the immediate context's lane.
    fn is_immediate(&self, row: usize) -> bool {
        self.lanes.get(row) == Some(&super::IMMEDIATE)
    }

    /// The outermost spans of lane `row`, in order.
    fn top_level(&self, row: usize) -> impl Iterator<Item = &'a Span> + '_ {
        self.spans
            .iter()
            .filter(move |&&(_, r, depth)| r == row && depth == 0)
            .map(|&(span, _, _)| span)
    }

    /// How much the recording threads (every lane but the immediate context's) overlapped.
    pub fn overlap(&self) -> Overlap {
        let lanes: Vec<Vec<(u64, u64)>> = (0..self.lanes.len())
            .filter(|&row| !self.is_immediate(row))
            .map(|row| self.top_level(row).map(|s| (s.start, s.end)).collect())
            .collect();
        Overlap::of(&lanes)
    }

    /// The runs of outermost spans of one category on lane `row`, in order: (category,
    /// first start, last end, spans).
    fn runs(&self, row: usize) -> Vec<(Category, u64, u64, usize)> {
        let mut runs: Vec<(Category, u64, u64, usize)> = Vec::new();
        for span in self.top_level(row) {
            let Kind::Engine(kind) = span.kind else {
                continue;
            };
            let category = Category::of(kind);
            match runs.last_mut() {
                Some(run) if run.0 == category => {
                    run.2 = span.end;
                    run.3 += 1;
                }
                _ => runs.push((category, span.start, span.end, 1)),
            }
        }
        runs
    }

    /// Draws the timeline.
    pub fn paint(&self) -> Picture {
        let categories = self.categories();
        // The immediate context's lane (the first) has a second row of labels.
        let lane_top = |row: usize| HEADER + row * LANE + usize::from(row > 0) * LABEL_ROW;
        let label_rows = |row: usize| if row == 0 { 2 } else { 1 };
        let bar_top = |row: usize| lane_top(row) + label_rows(row) * LABEL_ROW;
        let lanes_bottom = lane_top(self.lanes.len());
        // The legend: entries laid out left to right, wrapped, then the flows' line.
        let entry_width = |c: Category| 24 + 8 + c.name().len() * GLYPH + 32;
        let (mut legend_rows, mut x) = (1, LABEL);
        for &c in &categories {
            if x + entry_width(c) > WIDTH - RIGHT + 32 {
                legend_rows += 1;
                x = LABEL;
            }
            x += entry_width(c);
        }
        let legend_top = lanes_bottom + 14;
        let height = legend_top + (legend_rows + 2) * (LINE + 8) + 8;
        let mut canvas = Canvas::new(WIDTH, height);
        let span_ns = (self.to - self.from) as f64;
        let plot = (WIDTH - LABEL - RIGHT) as f64;
        let x_of =
            |ns: u64| LABEL + ((ns.saturating_sub(self.from)) as f64 / span_ns * plot) as usize;
        let ms = |ns: u64| ns as f64 / 1e6;
        let bar_mid = |row: usize| bar_top(row) + BAR / 2;

        // The title: what was measured.
        let first = format!("{}: {:.2} ms", self.title, ms(self.to - self.from));
        canvas.text(12, 8, &first, INK);
        canvas.text(12, 8 + LINE, &self.overlap().describe(), INK);

        // The scale: a tick every 1, 2 or 5 x 10^k microseconds, about eight across.
        let step = tick_step(span_ns / 1e3 / 8.0);
        let scale_y = HEADER - LINE - 2;
        let mut tick = 0.0;
        while tick * 1e3 <= span_ns {
            let x = LABEL + (tick * 1e3 / span_ns * plot) as usize;
            canvas.fill(
                x,
                scale_y + GLYPH + 2,
                1,
                lanes_bottom - scale_y - GLYPH - 2,
                GRID,
            );
            // As many decimals as the step needs (a step of 50 us needs two).
            let decimals = (3.0 - step.log10().floor()).clamp(0.0, 3.0) as usize;
            let label = format!("{:.*} ms", decimals, tick / 1000.0);
            if x + 3 + label.len() * GLYPH <= WIDTH {
                canvas.text(x + 3, scale_y, &label, FAINT_INK);
            }
            tick += step;
        }
        for (row, name) in self.lanes.iter().enumerate() {
            canvas.fill(LABEL, lane_top(row + 1) - 1, WIDTH - LABEL - RIGHT, 1, GRID);
            canvas.text(12, bar_mid(row) - GLYPH / 2, name, INK);
        }

        // Behind the bars: per recording thread, its last Finish to the first execute of
        // its lists.
        let mut handoffs: Vec<(usize, u64, usize, u64)> = Vec::new();
        for &(finish, from, execute, to) in &self.flows {
            match handoffs.iter_mut().find(|h| h.0 == from && h.2 == to) {
                Some(h) => {
                    h.1 = h.1.max(finish.end);
                    h.3 = h.3.min(execute.start);
                }
                None => handoffs.push((from, finish.end, to, execute.start)),
            }
        }
        for &(from, finished, to, executed) in &handoffs {
            let into = if to < from {
                bar_top(to) + BAR
            } else {
                bar_top(to)
            };
            canvas.line(
                (x_of(finished), bar_mid(from)),
                (x_of(executed), into),
                FLOW,
            );
        }

        // The bars, each at least `MIN_BAR` wide; a nested step inset and darker.
        for &(span, row, depth) in &self.spans {
            let Kind::Engine(kind) = span.kind else {
                continue;
            };
            let inset = (INSET * depth).min(BAR / 2 - 2);
            let y = bar_top(row) + inset;
            let (x0, x1) = (x_of(span.start), x_of(span.end));
            let colour = shade(Category::of(kind).colour(), DARKER.powi(depth as i32));
            canvas.fill(x0, y, (x1 - x0).max(MIN_BAR), BAR - 2 * inset, colour);
        }

        // The immediate context's lane: its wait, its runs of steps of one category (each at
        // least `MIN_RUN` wide), and above them each category's total time.
        for row in (0..self.lanes.len()).filter(|&r| self.is_immediate(r)) {
            let runs = self.runs(row);
            if let Some(&(_, first, _, _)) = runs.first() {
                // The longest of these that fits before its first step.
                let wait = ms(first - self.from);
                let room = x_of(first).saturating_sub(LABEL + 16);
                let said = [
                    format!("waits for the recordings: {wait:.2} ms"),
                    format!("waits {wait:.2} ms"),
                ];
                if let Some(said) = said.iter().find(|t| t.len() * GLYPH <= room) {
                    canvas.text(LABEL + 8, bar_mid(row) - GLYPH / 2, said, FAINT_INK);
                }
            }
            for &(category, start, end, _) in &runs {
                // Widened to `MIN_RUN` where it is shorter.
                let (x0, x1) = (x_of(start), x_of(end).max(x_of(start) + MIN_RUN));
                canvas.fill(x0, bar_top(row), x1 - x0, BAR, category.colour());
            }
            // Per category: its total time, labelled at its longest run.
            let mut totals: Vec<(Category, u64, usize, (u64, u64))> = Vec::new();
            for &(category, start, end, count) in &runs {
                match totals.iter_mut().find(|t| t.0 == category) {
                    Some(t) => {
                        t.1 += end - start;
                        t.2 += count;
                        if end - start > t.3 .1 - t.3 .0 {
                            t.3 = (start, end);
                        }
                    }
                    None => totals.push((category, end - start, count, (start, end))),
                }
            }
            totals.sort_by_key(|t| t.3 .0);
            // The labels, in the order the categories started, each after a swatch of its
            // colour: the first half in the upper row, the rest in the lower, both ending at
            // the right margin, where the immediate context's work is.
            let labels: Vec<(Category, String)> = totals
                .iter()
                .map(|&(category, total, count, _)| {
                    let lists = if category == Category::Execute {
                        format!(" {count} lists")
                    } else {
                        String::new()
                    };
                    (
                        category,
                        format!("{}{lists} {:.2} ms", category.label(), ms(total)),
                    )
                })
                .collect();
            let entry = |text: &str| SWATCH + 6 + text.len() * GLYPH + GLYPH;
            let half = labels.len().div_ceil(2);
            for (level, row_labels) in [&labels[..half], &labels[half..]].into_iter().enumerate() {
                let width: usize = row_labels.iter().map(|(_, t)| entry(t)).sum();
                let mut x = (WIDTH - RIGHT + GLYPH).saturating_sub(width).max(LABEL);
                let y = lane_top(row) + level * LABEL_ROW + 2;
                for (category, text) in row_labels {
                    canvas.fill(x, y, SWATCH, GLYPH, category.colour());
                    canvas.text(x + SWATCH + 6, y, text, INK);
                    x += entry(text);
                }
            }
        }
        // Each recording lane: its lists and its time in spans, above its first bar.
        for row in (0..self.lanes.len()).filter(|&r| !self.is_immediate(r)) {
            let spans: Vec<&Span> = self.top_level(row).collect();
            let Some(first) = spans.first() else {
                continue;
            };
            let lists = self
                .spans
                .iter()
                .filter(|&&(s, r, _)| r == row && s.kind == Kind::Engine(SpanKind::Finish))
                .count();
            let intervals: Vec<_> = spans.iter().map(|s| (s.start, s.end)).collect();
            let busy: u64 = merged(&intervals).iter().map(|(s, e)| e - s).sum();
            let text = format!("{lists} lists, {:.2} ms busy", ms(busy));
            let x = x_of(first.start).min(WIDTH - RIGHT - text.len() * GLYPH);
            canvas.text(x, lane_top(row) + 2, &text, INK);
        }

        // The legend.
        let (mut x, mut y) = (LABEL, legend_top);
        for &c in &categories {
            if x + entry_width(c) > WIDTH - RIGHT + 32 {
                x = LABEL;
                y += LINE + 8;
            }
            canvas.fill(x, y - 4, 24, 24, c.colour());
            canvas.text(x + 32, y, c.name(), INK);
            x += entry_width(c);
        }
        let y = y + LINE + 8;
        canvas.fill(LABEL, y + GLYPH / 2, 24, 2, FLOW);
        let line = "a context's last Finish to its lists' first execute";
        canvas.text(LABEL + 32, y, line, INK);
        let y = y + LINE + 8;
        canvas.fill(LABEL, y - 4, 24, 24, Category::Finish.colour());
        canvas.fill(
            LABEL,
            y + 2,
            24,
            12,
            shade(Category::Finish.colour(), DARKER),
        );
        canvas.text(LABEL + 32, y, "a step inside another: inset, darker", INK);
        canvas.into_picture()
    }
}

/// `colour` scaled by `factor` (darker below 1).
fn shade(colour: [u8; 3], factor: f32) -> [u8; 3] {
    colour.map(|c| (f32::from(c) * factor) as u8)
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

    /// A line a pixel wide in `colour`.
    fn line(&mut self, (x0, y0): (usize, usize), (x1, y1): (usize, usize), colour: [u8; 3]) {
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

    /// ASCII text in the 8x8 font at twice its size, its top-left corner at (x, y).
    fn text(&mut self, x: usize, y: usize, text: &str, colour: [u8; 3]) {
        for (i, c) in text.chars().enumerate() {
            let glyph = font8x8::legacy::BASIC_LEGACY
                .get(c as usize)
                .copied()
                .unwrap_or([0; 8]);
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..8 {
                    if bits >> col & 1 == 1 {
                        self.fill(x + i * GLYPH + 2 * col, y + 2 * row, 2, 2, colour);
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

    #[test]
    fn overlap_counts_the_time_two_or_more_threads_worked_at_once() {
        // One after another: no overlap.
        let apart = Overlap::of(&[vec![(0, 10)], vec![(10, 20)], vec![(25, 30)]]);
        assert_eq!(
            (apart.threads, apart.busy, apart.two, apart.all),
            (3, 25, 0, 0)
        );
        assert!(apart.describe().contains("one after another"), "{apart:?}");
        // Two intervals of one thread that overlap count once; 5..10 two at once, 6..8 all.
        let lanes = [vec![(0, 10), (2, 4)], vec![(5, 20)], vec![(6, 8)]];
        let at_once = Overlap::of(&lanes);
        assert_eq!((at_once.busy, at_once.two, at_once.all), (20, 5, 2));
        let said = at_once.describe();
        assert!(
            said.contains("overlapped 25% of their 0.00 ms (all 3: 10%)"),
            "{said}"
        );
        // The longest lines fit the picture's width.
        let long = Overlap {
            threads: 3,
            busy: 99_990_000,
            two: 99_990_000,
            all: 99_990_000,
        };
        let apart = Overlap { two: 0, ..long };
        for said in [long.describe(), apart.describe()] {
            assert!(12 + said.len() * GLYPH <= WIDTH, "{said}");
        }
    }

    #[test]
    fn every_kind_of_span_has_a_category_of_its_own_colour() {
        let mut colours: Vec<[u8; 3]> = Category::ALL.iter().map(|c| c.colour()).collect();
        colours.sort_unstable();
        colours.dedup();
        assert_eq!(colours.len(), Category::ALL.len());
        for &kind in SpanKind::ALL {
            assert_ne!(Category::of(kind), Category::Other, "{kind:?}");
        }
    }
}
