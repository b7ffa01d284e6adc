//! The command line parsed and its exit statuses; the job's outputs read back, from one run of three frames: the trace parses, every span
//! closed and spans nest on each thread, each list executed once under the number its Finish
//! gave it, with its flow from that Finish on another thread, and the timeline's lanes are
//! the threads that ran.

use std::collections::{BTreeSet, HashMap};

use tinyjson::JsonValue;

use cmdlist::ListMode;

use super::shared::{tiles, SCREEN_H, SCREEN_W, SMALL, STRIP_H, TILE, TINTS, WORKERS};
use super::timeline::capture::Captured;
use super::{command_line, job, timeline, Command, Options};

const FRAMES: u32 = 3;

fn field<'a>(event: &'a JsonValue, key: &str) -> Option<&'a JsonValue> {
    event.get::<HashMap<String, JsonValue>>()?.get(key)
}

fn text<'a>(event: &'a JsonValue, key: &str) -> &'a str {
    field(event, key)
        .and_then(|v| v.get::<String>())
        .map_or("", String::as_str)
}

fn number(event: &JsonValue, key: &str) -> Option<f64> {
    field(event, key)?.get::<f64>().copied()
}

fn arg(event: &JsonValue, key: &str) -> Option<u64> {
    Some(number(field(event, "args")?, key)? as u64)
}

/// A complete event as read back: thread, start and end in nanoseconds, name, list.
#[derive(Clone, Debug)]
struct Slice {
    tid: u64,
    start: u64,
    end: u64,
    name: String,
    list: Option<u64>,
}

fn ns(micros: f64) -> u64 {
    (micros * 1000.0).round() as u64
}

fn slice(event: &JsonValue) -> Slice {
    let start = ns(number(event, "ts").expect("a timestamp"));
    let dur = number(event, "dur").expect("a complete event has a duration");
    assert!(dur >= 0.0, "{event:?}");
    Slice {
        tid: number(event, "tid").expect("a tid") as u64,
        start,
        end: start + ns(dur),
        name: text(event, "name").to_owned(),
        list: arg(event, "list"),
    }
}

/// The slice named `name` on `tid` that encloses `ts`.
fn enclosing<'a>(slices: &'a [Slice], name: &str, tid: u64, ts: u64) -> Option<&'a Slice> {
    slices
        .iter()
        .find(|s| s.name == name && s.tid == tid && s.start <= ts && ts <= s.end)
}

/// One job at a time: `tracing` caches whether a span is enabled per call site, for every
/// thread, so a job without a subscriber running beside the traced one can leave its spans
/// unrecorded.
static ONE_JOB: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn the_jobs_trace_and_timeline_read_back() {
    let _alone = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("cmdlist-frame-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let options = Options {
        out: dir.join("frame.png"),
        trace: Some(dir.join("frame.json")),
        timeline: Some(dir.join("timeline.png")),
        frames: FRAMES,
        mode: ListMode::DriverBuilt,
        capture: None,
        replay: None,
        threads: cmdlist::capture::ReplayThreads::One,
    };
    let captured = job(&options).unwrap_or_else(|e| panic!("the job failed: {e}"));
    let captured = captured.expect("spans captured");
    assert_eq!(
        captured.still_open, 0,
        "every span the engine opened was closed"
    );
    let json = std::fs::read_to_string(dir.join("frame.json")).unwrap();
    let trace: JsonValue = json.parse().expect("the trace is JSON");
    let events: &Vec<JsonValue> = field(&trace, "traceEvents").unwrap().get().unwrap();
    check_spans_and_flows(events, &captured);
    check_lanes(events, &captured, &dir);
    check_picture(&dir.join("frame.png"));
    std::fs::remove_dir_all(dir).unwrap();
}

fn check_spans_and_flows(events: &[JsonValue], captured: &Captured) {
    let slices: Vec<Slice> = events
        .iter()
        .filter(|e| text(e, "ph") == "X")
        .map(slice)
        .collect();
    assert_eq!(slices.len(), captured.spans.len());
    // On each thread, two spans are disjoint or one holds the other.
    let mut by_thread: HashMap<u64, Vec<&Slice>> = HashMap::new();
    for s in &slices {
        by_thread.entry(s.tid).or_default().push(s);
    }
    for spans in by_thread.values_mut() {
        spans.sort_by_key(|s| (s.start, std::cmp::Reverse(s.end)));
        let mut open: Vec<&Slice> = Vec::new();
        for s in spans.iter() {
            while open.last().is_some_and(|o| o.end <= s.start) {
                open.pop();
            }
            if let Some(outer) = open.last() {
                assert!(
                    s.end <= outer.end,
                    "{s:?} overlaps {outer:?} without nesting"
                );
            }
            open.push(s);
        }
    }

    // Every list the job made was executed once, under the number its Finish gave it: per
    // frame, each worker's large list, its small lists and one per tile.
    let per_frame = WORKERS + WORKERS * SMALL + tiles().count();
    let executes: Vec<&Slice> = slices.iter().filter(|s| s.name == "execute").collect();
    assert_eq!(executes.len(), FRAMES as usize * per_frame);
    let executed: BTreeSet<u64> = executes.iter().map(|s| s.list.expect("a list")).collect();
    assert_eq!(executed.len(), executes.len(), "no number executed twice");
    let finished: BTreeSet<u64> = slices
        .iter()
        .filter(|s| s.name == "finish")
        .map(|s| s.list.expect("Finish names its list"))
        .collect();
    assert_eq!(executed, finished);

    // Each execute ends a flow (bound to it) that starts inside its list's Finish, on the
    // thread that recorded the list.
    let flow = |ph: &str| -> HashMap<u64, (u64, u64)> {
        events
            .iter()
            .filter(|e| text(e, "ph") == ph)
            .map(|e| {
                let place = (
                    number(e, "tid").unwrap() as u64,
                    ns(number(e, "ts").unwrap()),
                );
                (number(e, "id").unwrap() as u64, place)
            })
            .collect()
    };
    let (starts, ends) = (flow("s"), flow("f"));
    assert!(events
        .iter()
        .filter(|e| text(e, "ph") == "f")
        .all(|e| text(e, "bp") == "e"));
    assert_eq!(ends.len(), executes.len(), "one flow per execute");
    let mut bound = BTreeSet::new();
    for (id, &(tid, ts)) in &ends {
        let execute = enclosing(&slices, "execute", tid, ts).expect("a flow ends in an execute");
        let (from_tid, from_ts) = starts[id];
        let finish = enclosing(&slices, "finish", from_tid, from_ts).expect("starts in a finish");
        assert_eq!(
            finish.list, execute.list,
            "the flow starts at that list's Finish"
        );
        assert_ne!(
            from_tid, tid,
            "recorded on a worker, executed on the immediate context"
        );
        bound.insert(execute.list.unwrap());
    }
    assert_eq!(bound, executed, "every execute has its flow");
}

fn check_lanes(events: &[JsonValue], captured: &Captured, dir: &std::path::Path) {
    let mut ran: Vec<String> = (0..WORKERS).map(timeline::deferred).collect();
    ran.insert(0, timeline::IMMEDIATE.to_owned());
    // The trace's tracks.
    let tracks: BTreeSet<&str> = events
        .iter()
        .filter(|e| text(e, "name") == "thread_name")
        .map(|e| text(field(e, "args").unwrap(), "name"))
        .collect();
    assert_eq!(tracks, ran.iter().map(String::as_str).collect());
    // The picture's lanes, in order, and the picture on disk.
    let timeline = timeline::picture::Timeline::of_last_frame(captured, "").unwrap();
    assert_eq!(timeline.lanes, ran);
    let picture = timeline.paint();
    let file = std::fs::File::open(dir.join("timeline.png")).unwrap();
    let reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .unwrap();
    let info = reader.info();
    assert_eq!(
        (info.width, info.height),
        (picture.width as u32, picture.height as u32)
    );
    let kinds = timeline.kinds();
    for kind in ["record", "finish", "execute", "flush", "present", "blt"] {
        assert!(kinds.iter().any(|k| k.name() == kind), "{kind} drawn");
    }
    // Five categories, each in its colour, and no other colour of a bar.
    use timeline::picture::Category;
    let categories = timeline.categories();
    assert_eq!(
        categories,
        [
            Category::Record,
            Category::Finish,
            Category::Execute,
            Category::Blt,
            Category::Present
        ]
    );
    for category in categories {
        let [r, g, b] = category.colour();
        let drawn = picture.rgba.chunks_exact(4).any(|p| p == [r, g, b, 255]);
        assert!(drawn, "{category:?} drawn in its colour");
    }
    // The recording threads' overlap, as the title says it, over the three of them.
    let overlap = timeline.overlap();
    assert_eq!(overlap.threads, WORKERS);
    assert!(
        overlap.all <= overlap.two && overlap.two <= overlap.busy,
        "{overlap:?}"
    );
    assert!(overlap.busy > 0 && overlap.busy <= timeline.to - timeline.from);
}

fn parse(args: &[&str]) -> Result<Command, String> {
    Options::parse(args.iter().map(|a| a.to_string()))
}

fn options(args: &[&str]) -> Options {
    match parse(args) {
        Ok(Command::Run(options)) => options,
        other => panic!("{args:?}: {other:?}"),
    }
}

#[test]
fn the_command_line_chooses_the_mode_and_the_outputs() {
    let default = options(&[]);
    assert_eq!(
        default.mode,
        ListMode::DriverBuilt,
        "driver-built by default"
    );
    assert_eq!(default.out, std::path::Path::new("frame.png"));
    assert_eq!((default.trace, default.timeline), (None, None));
    assert_eq!(default.frames, super::FRAMES);
    for (name, mode) in [
        ("replayed", ListMode::Replayed),
        ("driver-built", ListMode::DriverBuilt),
        ("emulated", ListMode::Emulated),
    ] {
        assert_eq!(options(&["--mode", name]).mode, mode, "{name}");
        assert_eq!(super::shared::mode_name(mode), name);
    }
    let all = options(&[
        "--out",
        "a.png",
        "--mode",
        "replayed",
        "--trace",
        "t.json",
        "--timeline",
        "t.png",
        "--frames",
        "5",
    ]);
    assert_eq!(all.out, std::path::Path::new("a.png"));
    assert_eq!(all.trace.as_deref(), Some(std::path::Path::new("t.json")));
    assert_eq!(all.timeline.as_deref(), Some(std::path::Path::new("t.png")));
    assert_eq!((all.frames, all.mode), (5, ListMode::Replayed));
    let path = |p| Some(std::path::PathBuf::from(p));
    assert_eq!(options(&["--capture", "c"]).capture, path("c"));
    assert_eq!(options(&["--replay", "c"]).replay, path("c"));
    assert_eq!((default.capture, default.replay), (None, None));
    let per_context = cmdlist::capture::ReplayThreads::PerContext;
    assert_eq!(options(&["--threads", "per-context"]).threads, per_context);
    assert!(matches!(parse(&["--help"]), Ok(Command::Help)));
    // The usage's numbers are the job's.
    for said in [
        format!("{WORKERS} deferred contexts"),
        format!(
            "the {} warm-up frames (default {})",
            super::WARMUP,
            super::FRAMES
        ),
    ] {
        assert!(super::USAGE.contains(&said), "{said}");
    }
    assert!(matches!(parse(&["--out", "x", "-h"]), Ok(Command::Help)));
    // Each mistake is named.
    for (args, named) in [
        (&["--bogus"][..], "\"--bogus\""),
        (&["--out"], "--out needs a value"),
        (&["--mode", "fast"], "\"fast\""),
        (&["--mode", "Replayed"], "\"Replayed\""),
        (&["--frames", "two"], "\"two\""),
        (&["--frames", "2"], "warm-up"),
        (&["frame.png"], "\"frame.png\""),
        (&["--capture", "a", "--replay", "b"], "one or the other"),
        (&["--replay"], "--replay needs a value"),
        (&["--threads", "two"], "one or per-context"),
    ] {
        let why = parse(args).expect_err(&format!("{args:?} is refused"));
        assert!(why.contains(named), "{args:?}: {why}");
    }
}

/// Runs `args` as `main` does: the exit status and what went to stdout and stderr.
fn status(args: &[&str]) -> (i32, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = command_line(args.iter().map(|a| a.to_string()), &mut out, &mut err);
    let text = |bytes| String::from_utf8(bytes).unwrap();
    (code, text(out), text(err))
}

#[test]
fn help_exits_0_and_a_mistake_2_with_the_usage() {
    for help in ["--help", "-h"] {
        let (code, out, err) = status(&[help]);
        assert_eq!(code, 0, "{help}: {err}");
        assert!(out.starts_with("usage: frame"), "{out}");
        assert!(out.contains("--mode"), "{out}");
        assert!(err.is_empty(), "{err}");
    }
    let (code, out, err) = status(&["--bogus"]);
    assert_eq!(code, 2);
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("unknown argument \"--bogus\""), "{err}");
    assert!(err.contains("usage: frame"), "{err}");
}

#[test]
fn an_output_that_cannot_be_written_fails_before_the_frames_naming_it() {
    let id = std::process::id();
    let missing = std::env::temp_dir().join(format!("cmdlist-frame-none-{id}"));
    let bad = missing.join("x.png");
    let reason = std::fs::File::create(&bad)
        .expect_err("no such directory")
        .to_string();
    let bad = bad.to_str().unwrap();
    // A picture the job would write at the end of its frames, before the trace and timeline.
    let picture = std::env::temp_dir().join(format!("cmdlist-frame-picture-{id}.png"));
    let picture = picture.to_str().unwrap();
    for flag in ["--out", "--trace", "--timeline"] {
        let mut args = vec!["--frames", "3", "--out", picture];
        args.extend([flag, bad]);
        let (code, _, err) = status(&args);
        assert_eq!(code, 1, "{flag}: {err}");
        assert!(
            err.contains(&format!("cannot write {bad}: {reason}")),
            "{flag}: {err}"
        );
        assert!(
            !std::path::Path::new(picture).exists(),
            "{flag}: no frame ran"
        );
    }
    assert!(!missing.exists());
}

/// The picture as written: each tile reads as the colour of the context that recorded it,
/// its hue twice as near it as any other context's, and its strip shows its list of frame 2
/// (the first after the warm-up) from recycled memory.
fn check_picture(path: &std::path::Path) {
    let file = std::fs::File::open(path).unwrap();
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .unwrap();
    let mut rgba = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut rgba).unwrap();
    let (width, height) = (info.width as usize, info.height as usize);
    // The canvas is stretched 2x onto the screen, the screen 2x onto the picture.
    const Z: usize = 4;
    assert_eq!(width, Z / 2 * SCREEN_W as usize);
    assert!(
        height > Z / 2 * SCREEN_H as usize,
        "a legend below the screen"
    );
    let pixel = |x: usize, y: usize| -> [f64; 3] {
        let i = 4 * (y * width + x);
        [0, 1, 2].map(|c| f64::from(rgba[i + c]))
    };
    // Colours compared by hue and saturation, whatever their brightness (the rings): each
    // channel's share of the sum.
    let chroma = |c: [f64; 3]| c.map(|v| v / (c[0] + c[1] + c[2]).max(1.0));
    let distance = |a: [f64; 3], b: [u8; 3]| {
        let (a, b) = (chroma(a), chroma(b.map(f64::from)));
        (0..3).map(|c| (a[c] - b[c]).powi(2)).sum::<f64>().sqrt()
    };
    let tile = TILE as usize;
    for (i, (left, top)) in tiles().enumerate() {
        let (left, top) = (left as usize, top as usize);
        let w = i % WORKERS;
        // The tile's mean colour below its strip, inside its border.
        let (mut sum, mut n) = ([0.0; 3], 0.0);
        for y in Z * (top + 6)..Z * (top + tile - 1) {
            for x in Z * (left + 1)..Z * (left + tile - 1) {
                let p = pixel(x, y);
                (0..3).for_each(|c| sum[c] += p[c]);
                n += 1.0;
            }
        }
        let mean = sum.map(|v| v / n);
        let own = distance(mean, TINTS[w]);
        for (other, &tint) in TINTS.iter().enumerate().filter(|&(o, _)| o != w) {
            assert!(
                2.0 * own < distance(mean, tint),
                "tile at ({left}, {top}) averages {mean:?}: as near deferred {other}'s colour \
                 as deferred {w}'s"
            );
        }
        // The strip, in its frame: frame 0 (black: the first lists are made from fresh
        // memory), the grey gap for frame 1, frame 2 (white: the run's only frame after the
        // warm-up, its lists recycled).
        let x0 = left + (tile - 3) / 2;
        let y = Z * (top + 2) + Z * STRIP_H as usize / 2;
        // Each pixel of the canvas is two of the screen's, each blended a quarter with its
        // neighbour on that side by the Blt's bilinear stretch.
        let at = |x: usize| pixel(x, y);
        let fresh = at(Z * x0 + 1);
        assert!(
            fresh.iter().all(|&v| v < 95.0),
            "({left}, {top}) frame 0: {fresh:?}"
        );
        let gap = at(Z * (x0 + 1) + 1);
        assert!(
            gap.iter().all(|&v| (100.0..180.0).contains(&v)),
            "({left}, {top}) the gap: {gap:?}"
        );
        let recycled = at(Z * (x0 + 2) + 1);
        assert!(
            recycled.iter().all(|&v| v > 180.0),
            "({left}, {top}) frame 2: {recycled:?}"
        );
        for c in [at(Z * (x0 - 1) + 1), at(Z * (x0 + 3) + 2)] {
            assert!(
                c.iter().all(|&v| (100.0..180.0).contains(&v)),
                "({left}, {top}): {c:?}"
            );
        }
    }
}

/// A canvas in memory: what the strips' updates write.
struct Canvas(Vec<u8>);

impl super::shared::Recorder for Canvas {
    fn update(
        &mut self,
        _: cmdlist::Handle<cmdlist::handle::Resource>,
        at: u64,
        data: &[u8],
    ) -> super::Res {
        self.0[at as usize..][..data.len()].copy_from_slice(data);
        Ok(())
    }
    fn command(&mut self, _: cmdlist::soft::SoftCommand) -> super::Res {
        Err("a strip is updates only".into())
    }
    fn bind(&mut self, _: cmdlist::BindPoint, _: cmdlist::AnyHandle) -> super::Res {
        Err("a strip is updates only".into())
    }
    fn write_discard(
        &mut self,
        _: cmdlist::Handle<cmdlist::handle::Resource>,
        _: &[u8],
    ) -> super::Res {
        Err("a strip is updates only".into())
    }
    fn write_no_overwrite(
        &mut self,
        _: cmdlist::Handle<cmdlist::handle::Resource>,
        _: u64,
        _: &[u8],
    ) -> super::Res {
        Err("a strip is updates only".into())
    }
}

#[test]
fn a_tiles_strip_shows_frame_0_and_its_last_frames_after_the_warm_up() {
    use super::shared::{History, CANVAS_H, CANVAS_W, FRESH, RECYCLED, WARMUP};
    let (a, b) = ((0, 0), (TILE, TILE));
    let mut history = History::default();
    let mut canvas = Canvas(vec![0; 4 * (CANVAS_W * CANVAS_H) as usize]);
    let handle = cmdlist::Handle::from_bits(1 << 32 | 1).expect("a handle's bits");
    // The warm-up draws nothing.
    for _ in 0..WARMUP {
        history.push(vec![a, b]);
        history.draw(&mut canvas, handle).unwrap();
    }
    assert!(canvas.0.iter().all(|&v| v == 0));
    // Tile `a`'s list comes from recycled memory from frame 5 on, `b`'s every frame.
    for f in WARMUP..12 {
        history.push(if f >= 5 { vec![a, b] } else { vec![b] });
    }
    history.draw(&mut canvas, handle).unwrap();
    assert_eq!(history.shown(), 6..12, "the last 6 frames");
    let cell = |(left, top): (u32, u32), i: u32| {
        let (x, y) = (left + history.strip_x() + i, top + 2);
        let at = 4 * (y * CANVAS_W + x) as usize;
        <[u8; 4]>::try_from(&canvas.0[at..at + 4]).unwrap()
    };
    // Frame 0 (recycled for `a` and `b` here), the gap, then frames 6 to 11.
    assert_eq!(cell(a, 0), RECYCLED, "frame 0");
    assert!(cell(a, 1) != RECYCLED && cell(a, 1) != FRESH, "the gap");
    for i in 2..8 {
        assert_eq!(cell(a, i), RECYCLED, "frame {}", 4 + i);
    }
    for i in (0..8).filter(|&i| i != 1) {
        assert_eq!(cell(b, i), RECYCLED, "cell {i}");
    }
    // A frame whose list came from fresh memory is black: tile `a` in frame 2.
    let mut early = History::default();
    for f in 0..4 {
        early.push(if f == 2 { vec![b] } else { vec![a, b] });
    }
    let mut canvas = Canvas(vec![0; 4 * (CANVAS_W * CANVAS_H) as usize]);
    early.draw(&mut canvas, handle).unwrap();
    assert_eq!(early.cells(), [Some(0), None, Some(2), Some(3)]);
    let at = |(left, top): (u32, u32), i: u32| {
        let (x, y) = (left + early.strip_x() + i, top + 2);
        let at = 4 * (y * CANVAS_W + x) as usize;
        <[u8; 4]>::try_from(&canvas.0[at..at + 4]).unwrap()
    };
    assert_eq!(at(a, 2), FRESH, "tile a, frame 2");
    assert_eq!(at(a, 3), RECYCLED, "tile a, frame 3");
}

/// A run longer than the default: the scene's copies stay inside their resources whatever
/// the frame (the 14th frame's read past a target's end before they wrapped).
#[test]
fn a_long_run_stays_inside_its_resources() {
    let _alone = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("cmdlist-frame-long-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let options = Options {
        out: dir.join("frame.png"),
        trace: None,
        timeline: None,
        frames: 16,
        mode: ListMode::Replayed,
        capture: None,
        replay: None,
        threads: cmdlist::capture::ReplayThreads::One,
    };
    job(&options).unwrap_or_else(|e| panic!("16 frames: {e}"));
    std::fs::remove_dir_all(dir).unwrap();
}

/// The job captured (its presents checked), replayed through the soft driver in another
/// list mode: every present's picture found the same. With one present's recorded checksum
/// changed, the replay stops there and names that record.
#[test]
fn a_captured_job_replays_and_a_changed_picture_is_named() {
    use cmdlist::capture::{self, FrameReader, Kind, ReplayErrorKind, StreamBuffer};
    let _alone = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("cmdlist-frame-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let options = Options {
        out: dir.join("frame.png"),
        trace: None,
        timeline: None,
        frames: 3,
        mode: ListMode::DriverBuilt,
        capture: Some(dir.join("frame.capture")),
        replay: None,
        threads: cmdlist::capture::ReplayThreads::One,
    };
    job(&options).unwrap_or_else(|e| panic!("the captured job: {e}"));
    let bytes = std::fs::read(dir.join("frame.capture")).unwrap();
    let replay = |bytes: &[u8]| {
        let soft = super::soft_config(ListMode::Replayed, cmdlist::soft::Gpu::PollLag(2));
        let (device, mut ic, _world) = cmdlist::soft::device(soft, super::device_config()).unwrap();
        capture::replay(bytes, &device, &mut ic)
    };
    let report = replay(&bytes).unwrap_or_else(|e| panic!("the replay: {e}"));
    assert_eq!(report.presents_checked, 3);
    // The second present's checksum changed: the frame made whole again.
    let mut changed = Vec::new();
    capture::write_header(&mut changed).unwrap();
    let mut seen = 0;
    let mut named = None;
    for frame in FrameReader::new(&bytes).unwrap() {
        let frame = frame.unwrap();
        let mut payload = frame.payload.to_vec();
        if frame.kind == Kind::Checksum as u16 {
            seen += 1;
            if seen == 2 {
                let last = payload.len() - 1;
                payload[last] ^= 1;
                named = Some(frame.record);
            }
        }
        let mut out = StreamBuffer::new(frame.stream);
        assert!(out.push(frame.kind, &payload));
        out.drain_to(&mut changed).unwrap();
    }
    let e = replay(&changed).expect_err("a changed picture");
    assert!(matches!(e.kind, ReplayErrorKind::Checksum { .. }), "{e}");
    assert_eq!(Some(e.record), named, "{e}");
    std::fs::remove_dir_all(dir).unwrap();
}
