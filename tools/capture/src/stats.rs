//! `stats FILE --png OUT`: records per context per frame, bytes written through Maps per
//! frame, and each list's records, printed and drawn.
//!
//! Records are taken in the order a replay makes them (then those written after the last
//! checkpoint): a frame ends at each Present, or, in a capture without presents, at each
//! EndFrame; records after the last one make a last, partial frame. A deferred context's
//! records count in the frame that executes the list they made (a replay may record a
//! list ahead of the present before the frame that uses it); those of no list executed, in
//! the frame they are met in, or the last. A list's size is the records its deferred context
//! appended since its previous Finish or Abandon, the Finish aside.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use cmdlist::capture::{Call, Kind, ListId, Outcome, DEVICE_STREAM, IMMEDIATE_STREAM};

use crate::canvas::{short, tick_step, Canvas, GLYPH};
use crate::file::{stream_name, Capture, Frames};
use crate::order::replay_order;
use crate::replay::write_png;
use crate::{Failure, Out};

/// One frame's counts.
#[derive(Default)]
struct FrameStats {
    per_stream: BTreeMap<u32, u64>,
    map_bytes: u64,
}

impl FrameStats {
    fn records(&self) -> u64 {
        self.per_stream.values().sum()
    }
}

/// A capture's counts.
struct Stats {
    frames: Vec<FrameStats>,
    /// Whether frames end at presents (else at ends of frame, or the capture is one).
    boundary: &'static str,
    /// Each list finished: its stream and its records.
    lists: Vec<(u32, u64)>,
    streams: BTreeSet<u32>,
}

fn stats(frames: &Frames<'_>) -> Stats {
    let mut order = replay_order(frames);
    order.extend(frames.unfinished().map(|f| f.record as usize));
    let present = order
        .iter()
        .any(|&i| frames.all[i].kind == Kind::Present as u16);
    let end_frame = order
        .iter()
        .any(|&i| frames.all[i].kind == Kind::EndFrame as u16);
    let (boundary, name) = match (present, end_frame) {
        (true, _) => (Some(Kind::Present as u16), "presents"),
        (false, true) => (Some(Kind::EndFrame as u16), "ends of frame"),
        (false, false) => (None, "the end: no present nor end of frame"),
    };
    let mut s = Stats {
        frames: vec![FrameStats::default()],
        boundary: name,
        lists: Vec::new(),
        streams: BTreeSet::new(),
    };
    // A deferred context's records since its last Finish or Abandon (records, Map bytes),
    // and each list finished and not executed yet: counted in the frame that executes it.
    let mut recording: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let mut waiting: HashMap<ListId, (u64, u64)> = HashMap::new();
    let mut finished: HashMap<u32, u64> = HashMap::new();
    for index in order {
        let f = &frames.all[index];
        s.streams.insert(f.stream);
        let record = frames.decode(index).ok();
        let bytes = match record.map(|r| r.call) {
            Some(Call::Written { bytes, .. }) => bytes.len() as u64,
            Some(Call::MapUnmap { written, .. }) => written.len() as u64,
            _ => 0,
        };
        let frame = s.frames.last_mut().expect("one frame at least");
        if f.stream <= IMMEDIATE_STREAM {
            *frame.per_stream.entry(f.stream).or_default() += 1;
            frame.map_bytes += bytes;
        } else {
            let kept = recording.entry(f.stream).or_default();
            kept.0 += 1;
            kept.1 += bytes;
        }
        match record.map(|r| (r.outcome, r.call)) {
            Some((outcome, Call::Finish { .. })) if f.stream > IMMEDIATE_STREAM => {
                let (n, bytes) = recording.remove(&f.stream).unwrap_or_default();
                match outcome {
                    Outcome::Ok => {
                        s.lists.push((f.stream, n - 1));
                        let finish = finished.entry(f.stream).or_insert(0);
                        let id = ListId {
                            stream: f.stream,
                            finish: *finish,
                        };
                        *finish += 1;
                        waiting.insert(id, (n, bytes));
                    }
                    // A refused Finish makes no list: its records count where they are.
                    Outcome::Err(_) => {
                        *frame.per_stream.entry(f.stream).or_default() += n;
                        frame.map_bytes += bytes;
                    }
                }
            }
            Some((_, Call::Abandon)) if f.stream > IMMEDIATE_STREAM => {
                let (n, bytes) = recording.remove(&f.stream).unwrap_or_default();
                *frame.per_stream.entry(f.stream).or_default() += n;
                frame.map_bytes += bytes;
            }
            Some((_, Call::Execute { list, .. })) => {
                if let Some((n, bytes)) = waiting.remove(&list) {
                    *frame.per_stream.entry(list.stream).or_default() += n;
                    frame.map_bytes += bytes;
                }
            }
            _ => {}
        }
        if Some(f.kind) == boundary {
            s.frames.push(FrameStats::default());
        }
    }
    // What no execute took, in the last frame.
    let frame = s.frames.last_mut().expect("one frame at least");
    let left = recording.into_iter().chain(
        waiting
            .into_iter()
            .map(|(list, counts)| (list.stream, counts)),
    );
    for (stream, (n, bytes)) in left {
        *frame.per_stream.entry(stream).or_default() += n;
        frame.map_bytes += bytes;
    }
    if s.frames.len() > 1 && s.frames.last().is_some_and(|f| f.records() == 0) {
        s.frames.pop();
    }
    s
}

/// The colour of a stream's bars: grey for the device, indigo for the immediate context,
/// Paul Tol's bright scheme for the deferred contexts, in turn.
fn colour(stream: u32) -> [u8; 3] {
    const DEFERRED: [[u8; 3]; 7] = [
        [238, 102, 119],
        [34, 136, 51],
        [204, 187, 68],
        [102, 204, 238],
        [170, 51, 119],
        [68, 119, 170],
        [187, 187, 187],
    ];
    match stream {
        DEVICE_STREAM => [90, 90, 90],
        IMMEDIATE_STREAM => [51, 34, 136],
        s => DEFERRED[(s as usize - 2) % DEFERRED.len()],
    }
}

const PAPER: [u8; 3] = [255, 255, 255];
const INK: [u8; 3] = [30, 30, 30];
const GRID: [u8; 3] = [225, 225, 225];
const WIDTH: usize = 800;
const LEFT: usize = 64;
const RIGHT: usize = 16;

/// One chart's bars: for each x, its stacked parts (colour, value).
struct Chart<'a> {
    title: &'a str,
    x_label: &'a str,
    /// The labels under the first and the last bar.
    ends: (String, String),
    bars: Vec<Vec<([u8; 3], u64)>>,
}

impl Chart<'_> {
    /// Draws the chart with its top at `top`, `height` pixels of plot.
    fn draw(&self, canvas: &mut Canvas, top: usize, height: usize) {
        canvas.text(LEFT, top, self.title, 2, INK);
        let plot_top = top + 28;
        let plot_w = WIDTH - LEFT - RIGHT;
        let bottom = plot_top + height;
        let max = self
            .bars
            .iter()
            .map(|parts| parts.iter().map(|p| p.1).sum::<u64>())
            .max()
            .unwrap_or(0)
            .max(1);
        let step = tick_step(max as f64 / 4.0);
        let top_value = max.div_ceil(step) * step;
        let y_of = |v: u64| bottom - (v as f64 / top_value as f64 * height as f64).round() as usize;
        let mut tick = 0;
        while tick <= top_value {
            let y = y_of(tick);
            canvas.line((LEFT, y), (LEFT + plot_w, y), GRID);
            canvas.text_right(LEFT - 6, y.saturating_sub(4), &short(tick), 1, INK);
            tick += step;
        }
        let n = self.bars.len().max(1);
        let slot = plot_w as f64 / n as f64;
        let gap = if slot >= 6.0 {
            (slot / 5.0).round() as usize
        } else {
            0
        };
        for (i, parts) in self.bars.iter().enumerate() {
            let x = LEFT + (i as f64 * slot).round() as usize;
            let w = ((slot.round() as usize).saturating_sub(gap)).max(1);
            let mut base = 0;
            for &(c, v) in parts {
                let (y0, y1) = (y_of(base + v), y_of(base));
                canvas.fill(x + gap / 2, y0, w, y1 - y0, c);
                base += v;
            }
        }
        canvas.line((LEFT, bottom), (LEFT + plot_w, bottom), INK);
        canvas.line((LEFT, plot_top), (LEFT, bottom), INK);
        // The first and last x, under their bars, and what x is, below them.
        let centre = |i: usize| LEFT + ((i as f64 + 0.5) * slot) as usize;
        if let Some(last) = self.bars.len().checked_sub(1) {
            let (first_label, last_label) = &self.ends;
            let half = |label: &str| label.len() * GLYPH / 2;
            canvas.text(
                centre(0).saturating_sub(half(first_label)),
                bottom + 4,
                first_label,
                1,
                INK,
            );
            if last > 0 {
                let x = centre(last) + half(last_label);
                canvas.text_right(x.min(WIDTH - RIGHT), bottom + 4, last_label, 1, INK);
            }
        }
        let label_w = self.x_label.len() * GLYPH;
        canvas.text(
            LEFT + (plot_w - label_w) / 2,
            bottom + 16,
            self.x_label,
            1,
            INK,
        );
    }
}

/// The chart of `s` as a picture.
fn picture(s: &Stats, title: &str) -> Canvas {
    let heights = [230, 110, 130];
    let height = 40 + 26 + heights.iter().map(|h| h + 28 + 36).sum::<usize>();
    let mut canvas = Canvas::new(WIDTH, height, PAPER);
    let title: String = title
        .chars()
        .take((WIDTH - 2 * RIGHT) / (2 * GLYPH))
        .collect();
    canvas.text(RIGHT, 12, &title, 2, INK);
    // The legend: each stream's colour.
    let mut x = LEFT;
    for &stream in &s.streams {
        let name = stream_name(stream);
        canvas.fill(x, 42, 12, 12, colour(stream));
        canvas.text(x + 16, 44, &name, 1, INK);
        x += 16 + name.len() * GLYPH + 16;
        if x > WIDTH - 120 {
            break;
        }
    }
    let last_frame = s.frames.len().saturating_sub(1).to_string();
    let by_context = Chart {
        title: "records per frame, by context",
        x_label: "frame",
        ends: ("0".into(), last_frame.clone()),
        bars: s
            .frames
            .iter()
            .map(|f| {
                f.per_stream
                    .iter()
                    .map(|(&st, &n)| (colour(st), n))
                    .collect()
            })
            .collect(),
    };
    let maps = Chart {
        title: "bytes written through Maps per frame",
        x_label: "frame",
        ends: ("0".into(), last_frame),
        bars: s
            .frames
            .iter()
            .map(|f| vec![([68, 119, 170], f.map_bytes)])
            .collect(),
    };
    // A histogram: how many lists have each size (in at most 64 bins), by context.
    let largest = s.lists.iter().map(|l| l.1).max().unwrap_or(0);
    let bin = (largest + 1).div_ceil(64).max(1);
    let mut bins: Vec<BTreeMap<u32, u64>> = vec![BTreeMap::new(); (largest / bin + 1) as usize];
    for &(stream, n) in &s.lists {
        *bins[(n / bin) as usize].entry(stream).or_default() += 1;
    }
    let lists = Chart {
        title: "command lists by their records",
        x_label: "records in the list",
        ends: ("0".into(), (largest / bin * bin).to_string()),
        bars: bins
            .iter()
            .map(|b| b.iter().map(|(&st, &n)| (colour(st), n)).collect())
            .collect(),
    };
    let mut top = 66;
    for (chart, h) in [by_context, maps, lists].iter().zip(heights) {
        chart.draw(&mut canvas, top, h);
        top += h + 28 + 36;
    }
    canvas
}

/// Prints the counts of `path`, and draws them to `png`.
pub fn run(path: &Path, png: Option<&Path>, out: &mut Out<'_>) -> Result<ExitCode, Failure> {
    let capture = Capture::read(path)?;
    let frames = capture.frames()?;
    let s = stats(&frames);
    writeln!(
        out,
        "{}: {} frames (ending at {})",
        capture.path,
        s.frames.len(),
        s.boundary
    )?;
    write!(out, "{:>6} {:>9}", "frame", "records")?;
    for &stream in &s.streams {
        write!(out, " {:>9}", stream_name(stream))?;
    }
    writeln!(out, " {:>10}", "map bytes")?;
    for (i, f) in s.frames.iter().enumerate() {
        write!(out, "{i:>6} {:>9}", f.records())?;
        for stream in &s.streams {
            write!(
                out,
                " {:>9}",
                f.per_stream.get(stream).copied().unwrap_or(0)
            )?;
        }
        writeln!(out, " {:>10}", f.map_bytes)?;
    }
    let mut sizes: Vec<u64> = s.lists.iter().map(|l| l.1).collect();
    sizes.sort_unstable();
    match (sizes.first(), sizes.last()) {
        (Some(min), Some(max)) => writeln!(
            out,
            "lists: {} finished, records per list: min {min}, median {}, max {max}, mean {:.1}",
            sizes.len(),
            sizes[sizes.len() / 2],
            sizes.iter().sum::<u64>() as f64 / sizes.len() as f64
        )?,
        _ => writeln!(out, "lists: none finished")?,
    }
    if let Some(png) = png {
        let name = Path::new(&capture.path)
            .file_name()
            .map_or(capture.path.clone(), |n| n.to_string_lossy().into_owned());
        let count = match s.frames.len() {
            1 => "1 frame".to_string(),
            n => format!("{n} frames"),
        };
        let canvas = picture(&s, &format!("{name}: {count}, {} lists", s.lists.len()));
        write_png(
            png,
            canvas.width as u32,
            canvas.height as u32,
            &canvas.rgba(),
        )?;
        writeln!(out, "chart: {}", png.display())?;
    }
    Ok(ExitCode::SUCCESS)
}
