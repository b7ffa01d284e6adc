//! The job's outputs read back: the trace parses, every span closed, each executed list has
//! its flow from its finish, and the timeline's lanes are the threads that ran.

use std::collections::{BTreeSet, HashMap};

use tinyjson::JsonValue;

use super::timeline::capture::Captured;
use super::{job, tiles, timeline, Options, SMALL, WORKERS};

const FRAMES: u32 = 3;

/// The job, three frames, writing everything into a directory of its own.
fn run_job(name: &str) -> (Captured, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("cmdlist-frame-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let options = Options {
        out: dir.join("frame.png"),
        trace: Some(dir.join("frame.json")),
        timeline: Some(dir.join("timeline.png")),
        frames: FRAMES,
    };
    let captured = job(&options).unwrap_or_else(|e| panic!("the job failed: {e}"));
    (captured.expect("spans captured"), dir)
}

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

fn arg(event: &JsonValue, key: &str) -> Option<f64> {
    number(field(event, "args")?, key)
}

/// Where an event sits: its thread and its timestamp, as written.
fn place(event: &JsonValue) -> (u64, u64) {
    let tid = number(event, "tid").expect("a tid") as u64;
    let ts = (number(event, "ts").expect("a timestamp") * 1000.0).round() as u64;
    (tid, ts)
}

#[test]
fn the_trace_parses_its_spans_close_and_every_executed_list_has_its_flow() {
    let (captured, dir) = run_job("trace");
    let json = std::fs::read_to_string(dir.join("frame.json")).unwrap();
    let trace: JsonValue = json.parse().expect("the trace is JSON");
    let events: &Vec<JsonValue> = field(&trace, "traceEvents").unwrap().get().unwrap();
    assert_eq!(
        captured.still_open, 0,
        "every span the engine opened was closed"
    );

    let spans: Vec<&JsonValue> = events.iter().filter(|e| text(e, "ph") == "X").collect();
    assert_eq!(spans.len(), captured.spans.len());
    for span in &spans {
        assert!(
            number(span, "dur").is_some_and(|d| d >= 0.0),
            "a complete event: {span:?}"
        );
        assert!(!text(span, "name").is_empty());
    }
    // The lists the job executed: per frame, each worker's large list, its small lists and
    // one per tile.
    let per_frame = WORKERS + WORKERS * SMALL + tiles().count();
    let executes: Vec<&&JsonValue> = spans
        .iter()
        .filter(|e| text(e, "name") == "execute")
        .collect();
    assert_eq!(executes.len(), FRAMES as usize * per_frame);

    // Flow starts by id, each where a finish begins; a flow finish where an execute begins.
    let finishes: HashMap<(u64, u64), u64> = spans
        .iter()
        .filter(|e| text(e, "name") == "finish")
        .map(|e| {
            (
                place(e),
                arg(e, "list").expect("a finish names its list") as u64,
            )
        })
        .collect();
    let starts: HashMap<u64, (u64, u64)> = events
        .iter()
        .filter(|e| text(e, "ph") == "s")
        .map(|e| (number(e, "id").unwrap() as u64, place(e)))
        .collect();
    let ends: HashMap<(u64, u64), u64> = events
        .iter()
        .filter(|e| text(e, "ph") == "f")
        .map(|e| (place(e), number(e, "id").unwrap() as u64))
        .collect();
    assert_eq!(starts.len(), executes.len(), "one flow per execute");
    let mut threads_crossed = 0;
    for execute in &executes {
        let list = arg(execute, "list").expect("an execute names its list") as u64;
        let id = ends
            .get(&place(execute))
            .expect("a flow ends at each execute");
        let start = starts.get(id).expect("the flow starts");
        assert_eq!(
            finishes.get(start),
            Some(&list),
            "the flow starts at that list's finish"
        );
        threads_crossed += usize::from(start.0 != place(execute).0);
    }
    assert_eq!(
        threads_crossed,
        executes.len(),
        "recorded on a worker, executed on the IC"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn the_timeline_has_a_lane_for_each_thread_that_ran() {
    let (captured, dir) = run_job("timeline");
    let mut ran: Vec<String> = (0..WORKERS).map(timeline::deferred).collect();
    ran.insert(0, timeline::IMMEDIATE.to_owned());

    // The trace's tracks.
    let json = std::fs::read_to_string(dir.join("frame.json")).unwrap();
    let trace: JsonValue = json.parse().unwrap();
    let events: &Vec<JsonValue> = field(&trace, "traceEvents").unwrap().get().unwrap();
    let tracks: BTreeSet<&str> = events
        .iter()
        .filter(|e| text(e, "name") == "thread_name")
        .map(|e| text(field(e, "args").unwrap(), "name"))
        .collect();
    assert_eq!(tracks, ran.iter().map(String::as_str).collect());

    // The picture's lanes, in order, and the picture on disk.
    let timeline = timeline::picture::Timeline::of_last_frame(&captured, "").unwrap();
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
    // Work on every lane: each thread's spans are drawn in the last frame.
    let kinds = timeline.kinds();
    for kind in ["record", "finish", "execute", "flush", "present", "blt"] {
        assert!(kinds.iter().any(|k| k.name() == kind), "{kind} drawn");
    }
    std::fs::remove_dir_all(dir).unwrap();
}
