//! # profiler: the engine's spans in a ready-made profiler
//!
//! With the feature `trace` on the `cmdlist` dependency, the engine opens a `tracing` span
//! for each list-level step on the thread that does it (`cmdlist::trace`): `record` and
//! `finish` on a deferred context's thread, `execute` and `flush` on the immediate
//! context's, `destroy_list` wherever a list is let go, each list step with the list's
//! number in the field `list`. Nothing more is needed to see them in a profiler than a
//! `tracing` subscriber: here `tracing-chrome`'s layer, which writes a trace for
//! chrome://tracing and ui.perfetto.dev, one track per thread, a slice each time a span is
//! entered (a `record` span is entered during each recorded call, so the slices are the
//! application's calls; `TraceStyle::Async` would draw each span from its creation to its
//! close instead).
//!
//! The run drives the null driver (`cmdlist::soft::null`) for a few frames: `THREADS`
//! threads, named `deferred N` in the trace, each record and finish a list of copies, and
//! the immediate context executes the lists, lets them go and flushes. Then it reads the
//! trace back and checks that it holds real spans: every span kind of a frame, each on its
//! thread, and each list's number on the `finish` that made it, on the `execute` that ran it
//! and on its `destroy_list`.
//!
//! Run it with `cargo run -p cmdlist-profiler-example -- [TRACE.json]` (default
//! `target/profile.json`), then open the file in ui.perfetto.dev. It exits non-zero when a
//! check fails.

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error;
use std::thread;

use cmdlist::soft::null::{copy_of, null_device};
use cmdlist::DeviceConfig;
use serde_json::Value;
use tracing_chrome::ChromeLayerBuilder;
use tracing_subscriber::prelude::*;

/// Frames the run records and executes.
const FRAMES: usize = 3;
/// Deferred contexts, each on its own thread.
const THREADS: usize = 2;
/// Copies recorded in each list.
const COPIES: usize = 8;

fn main() -> Result<(), Box<dyn Error>> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "target/profile.json".into());

    // The profiler: one layer on the registry, for every thread. Its guard writes the end
    // of the file when dropped.
    if let Some(dir) = std::path::Path::new(&path).parent() {
        std::fs::create_dir_all(dir)?;
    }
    let (chrome, guard) = ChromeLayerBuilder::new()
        .writer(std::fs::File::create(&path)?)
        .include_args(true)
        .build();
    tracing_subscriber::registry().with(chrome).init();

    run()?;
    drop(guard);

    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    check(&trace)?;
    println!("profiler: {path} holds the spans of {FRAMES} frames; open it in ui.perfetto.dev");
    Ok(())
}

/// The frames of the module docs, on the null driver.
fn run() -> cmdlist::Result<()> {
    let (device, mut ic) = null_device(DeviceConfig::default())?;
    let mut contexts = (0..THREADS)
        .map(|_| device.create_deferred_context())
        .collect::<cmdlist::Result<Vec<_>>>()?;
    let copies: Vec<_> = (0..THREADS).map(|_| copy_of(&device)).collect();

    for _ in 0..FRAMES {
        let lists = thread::scope(|s| {
            let recorders: Vec<_> = contexts
                .iter_mut()
                .zip(&copies)
                .enumerate()
                .map(|(n, (dc, &copy))| {
                    thread::Builder::new()
                        .name(format!("deferred {n}"))
                        .spawn_scoped(s, move || -> cmdlist::Result<_> {
                            for _ in 0..COPIES {
                                dc.command(copy)?;
                            }
                            dc.finish()
                        })
                        .expect("a recording thread")
                })
                .collect();
            recorders
                .into_iter()
                .map(|r| r.join().expect("a recording thread"))
                .collect::<cmdlist::Result<Vec<_>>>()
        })?;
        for list in &lists {
            ic.execute_command_list(list)?;
        }
        drop(lists);
        ic.flush()?;
    }
    drop(contexts);
    ic.destroy_device()
}

/// Checks that the trace holds the run's spans, each on its thread, the lists' numbers
/// tying each `finish` to its `execute` and `destroy_list`.
fn check(trace: &Value) -> Result<(), Box<dyn Error>> {
    let events = trace.as_array().ok_or("the trace is not a JSON array")?;
    let mut thread_names = BTreeMap::new();
    // Span name -> (thread id, list number) of each span's begin.
    let mut begins: BTreeMap<&str, Vec<(u64, Option<u64>)>> = BTreeMap::new();
    let mut ends = 0;
    for event in events {
        let tid = event["tid"].as_u64().ok_or("an event without a thread")?;
        match event["ph"].as_str() {
            Some("M") => {
                thread_names.insert(tid, event["args"]["name"].as_str().unwrap_or_default());
            }
            Some("B") if event["cat"] == "cmdlist" => {
                let name = event["name"].as_str().ok_or("a span without a name")?;
                // tracing-chrome writes a field's value as text.
                let list = &event["args"]["list"];
                let list = list.as_u64().or_else(|| list.as_str()?.parse().ok());
                begins.entry(name).or_default().push((tid, list));
            }
            Some("E") if event["cat"] == "cmdlist" => ends += 1,
            _ => {}
        }
    }
    let spans: usize = begins.values().map(Vec::len).sum();
    if spans == 0 || spans != ends {
        return Err(format!("{spans} spans begun, {ends} ended").into());
    }

    let thread_of = |tid: u64| thread_names.get(&tid).copied().unwrap_or("unnamed");
    let lists_of = |name: &str, on: &dyn Fn(&str) -> bool| -> Result<BTreeSet<u64>, String> {
        let spans = begins.get(name).ok_or(format!("no `{name}` span"))?;
        spans
            .iter()
            .map(|&(tid, list)| match (on(thread_of(tid)), list) {
                (true, Some(list)) => Ok(list),
                (false, _) => Err(format!("`{name}` on thread `{}`", thread_of(tid))),
                (true, None) => Err(format!("`{name}` without a list number")),
            })
            .collect()
    };
    let deferred = |name: &str| name.starts_with("deferred ");
    let immediate = |name: &str| !name.starts_with("deferred ");

    // Every list: made on a recording thread, executed and let go on the immediate
    // context's thread, under one number.
    let finished = lists_of("finish", &deferred)?;
    let executed = lists_of("execute", &immediate)?;
    let destroyed = lists_of("destroy_list", &immediate)?;
    let made = FRAMES * THREADS;
    if finished.len() != made {
        return Err(format!("{made} lists made, {} finished", finished.len()).into());
    }
    if executed != finished || destroyed != finished {
        return Err(format!("finished {finished:?}, executed {executed:?}").into());
    }
    for (name, on) in [
        ("record", &deferred as &dyn Fn(&str) -> bool),
        ("recycle_create_list", &deferred),
        ("close_handles", &deferred),
        ("flush", &immediate),
        ("submit", &immediate),
        ("deferred_destruction", &immediate),
    ] {
        let spans = begins.get(name).ok_or(format!("no `{name}` span"))?;
        if let Some(&(tid, _)) = spans.iter().find(|&&(tid, _)| !on(thread_of(tid))) {
            return Err(format!("`{name}` on thread `{}`", thread_of(tid)).into());
        }
    }
    Ok(())
}
