//! The engine's spans (feature `trace`): each on the thread that does the step, a list's
//! number the same from its recording to its execute (plain or restoring, on either
//! context) and its destroy, a new number for a list made from recycled memory, every span
//! closed.
//!
//! A binary of its own with one test: `tracing` caches which callsites are wanted across
//! threads, and no other test may hit the engine's callsites meanwhile without a subscriber.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cmdlist::soft::{self, SoftCommand, SoftConfig};
use cmdlist::trace::SpanKind;
use cmdlist::DeviceConfig;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// A closed span: its kind, the thread that opened it, its `list` field.
#[derive(Clone, Debug, PartialEq)]
struct Closed {
    kind: SpanKind,
    thread: String,
    list: Option<u64>,
}

/// Keeps the engine's spans, in the order they close.
#[derive(Clone, Default)]
struct Spans {
    next: Arc<AtomicU64>,
    /// Open spans, with their references (a clone adds one, a close drops one).
    open: Arc<Mutex<HashMap<u64, (Closed, usize)>>>,
    closed: Arc<Mutex<Vec<Closed>>>,
}

struct List(Option<u64>);

impl Visit for List {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == cmdlist::trace::LIST {
            self.0 = Some(value);
        }
    }
    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

impl Subscriber for Spans {
    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        meta.target() == cmdlist::trace::TARGET
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut list = List(None);
        attrs.record(&mut list);
        let kind = SpanKind::from_name(attrs.metadata().name()).expect("a SpanKind's name");
        let thread = std::thread::current().name().unwrap_or("?").to_owned();
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let span = Closed {
            kind,
            thread,
            list: list.0,
        };
        self.open.lock().unwrap().insert(id, (span, 1));
        Id::from_non_zero_u64(NonZeroU64::new(id).unwrap())
    }
    fn record(&self, id: &Id, values: &Record<'_>) {
        let mut list = List(None);
        values.record(&mut list);
        if let Some((span, _)) = self.open.lock().unwrap().get_mut(&id.into_u64()) {
            span.list = list.0.or(span.list);
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
    fn clone_span(&self, id: &Id) -> Id {
        if let Some((_, refs)) = self.open.lock().unwrap().get_mut(&id.into_u64()) {
            *refs += 1;
        }
        id.clone()
    }
    fn try_close(&self, id: Id) -> bool {
        let mut open = self.open.lock().unwrap();
        let Some((_, refs)) = open.get_mut(&id.into_u64()) else {
            return false;
        };
        *refs -= 1;
        if *refs > 0 {
            return false;
        }
        let (span, _) = open.remove(&id.into_u64()).unwrap();
        self.closed.lock().unwrap().push(span);
        true
    }
}

impl Spans {
    fn closed(&self, kind: SpanKind) -> Vec<Closed> {
        let closed = self.closed.lock().unwrap();
        closed.iter().filter(|s| s.kind == kind).cloned().collect()
    }

    /// The `list` numbers of the closed spans of `kind`, in closing order.
    fn lists(&self, kind: SpanKind) -> Vec<Option<u64>> {
        self.closed(kind).into_iter().map(|s| s.list).collect()
    }
}

#[test]
fn a_lists_spans_carry_its_number_from_the_recording_thread_to_the_executing_one() {
    let spans = Spans::default();
    let dispatch = tracing::Dispatch::new(spans.clone());
    let _traced = tracing::dispatcher::set_default(&dispatch);
    // A GPU that completes each buffer at once: a destroyed list is reusable after a flush.
    let config = SoftConfig {
        gpu: soft::Gpu::Immediate,
        ..SoftConfig::from_env().unwrap()
    };
    let (device, mut ic, _world) = soft::device(config, DeviceConfig::default()).unwrap();
    let desc = cmdlist::ResourceDesc {
        byte_size: 16,
        ..Default::default()
    };
    let (src, dst) = (
        device.create_resource(desc).unwrap(),
        device.create_resource(desc).unwrap(),
    );
    let copy = SoftCommand::Copy { dst, src };
    // Runs `work` on a thread named `name` whose spans go to `spans`.
    let on_thread = |name: &str, work: Box<dyn FnOnce() + Send>| {
        let dispatch = dispatch.clone();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || tracing::dispatcher::with_default(&dispatch, work))
            .unwrap()
            .join()
            .unwrap();
    };
    let dc = Arc::new(Mutex::new(device.create_deferred_context().unwrap()));
    let finish_one = |dc: &Arc<Mutex<cmdlist::soft::SoftDeferredContext>>| {
        let (dc, made) = (Arc::clone(dc), Arc::new(Mutex::new(None)));
        let out = Arc::clone(&made);
        on_thread(
            "recorder",
            Box::new(move || {
                let mut dc = dc.lock().unwrap();
                dc.command(copy).unwrap();
                *out.lock().unwrap() = Some(dc.finish().unwrap());
            }),
        );
        let list = made.lock().unwrap().take().unwrap();
        list
    };

    // An abandoned recording ends its span; the next recording opens its own.
    on_thread(
        "recorder",
        Box::new({
            let dc = Arc::clone(&dc);
            move || {
                let mut dc = dc.lock().unwrap();
                dc.command(copy).unwrap();
                dc.abandon().unwrap();
            }
        }),
    );
    let list = finish_one(&dc);
    ic.execute_command_list(&list).unwrap();
    ic.flush().unwrap();
    on_thread("dropper", Box::new(move || drop(list)));
    ic.flush().unwrap();

    let finish = spans.closed(SpanKind::Finish);
    assert_eq!(finish.len(), 1);
    assert_eq!(finish[0].thread, "recorder");
    let first = finish[0].list.expect("Finish names its list");
    let records = spans.closed(SpanKind::Record);
    assert_eq!(
        records.len(),
        2,
        "the abandoned recording and the finished one"
    );
    assert_eq!(
        records[0].list, None,
        "the abandoned recording made no list"
    );
    assert_eq!(records[1].list, Some(first));
    assert!(records.iter().all(|r| r.thread == "recorder"));
    let destroyed = spans.closed(SpanKind::DestroyList);
    assert_eq!(destroyed.len(), 1);
    assert_eq!(
        (destroyed[0].list, destroyed[0].thread.as_str()),
        (Some(first), "dropper")
    );
    let execute = spans.closed(SpanKind::Execute);
    assert_eq!(execute.len(), 1);
    assert_eq!(execute[0].list, Some(first));
    assert_ne!(
        execute[0].thread, "recorder",
        "executed on the immediate context's thread"
    );
    for kind in [
        SpanKind::Flush,
        SpanKind::Submit,
        SpanKind::DeferredDestruction,
    ] {
        assert!(!spans.closed(kind).is_empty(), "{kind:?}");
    }

    // The next list is made from the first one's memory, under a number of its own.
    let inner = finish_one(&dc);
    assert_eq!(
        spans.closed(SpanKind::RecycleCreateList).len(),
        1,
        "made from recycled memory"
    );
    let second = spans.closed(SpanKind::Finish)[1].list.unwrap();
    assert_ne!(second, first);
    // Nested: a second context executes it in a list of its own; when that outer list goes,
    // both lists end, each with its span.
    let outer_dc = Arc::new(Mutex::new(device.create_deferred_context().unwrap()));
    let outer = {
        let (dc, made) = (Arc::clone(&outer_dc), Arc::new(Mutex::new(None)));
        let out = Arc::clone(&made);
        let inner = &inner;
        std::thread::scope(|s| {
            let dispatch = dispatch.clone();
            std::thread::Builder::new()
                .name("outer".into())
                .spawn_scoped(s, move || {
                    tracing::dispatcher::with_default(&dispatch, || {
                        let mut dc = dc.lock().unwrap();
                        dc.execute_command_list(inner).unwrap();
                        *out.lock().unwrap() = Some(dc.finish().unwrap());
                    })
                })
                .unwrap();
        });
        let outer = made.lock().unwrap().take().unwrap();
        outer
    };
    let third = spans.closed(SpanKind::Finish)[2].list.unwrap();
    let nested_execute = &spans.closed(SpanKind::Execute)[1];
    assert_eq!(
        (nested_execute.list, nested_execute.thread.as_str()),
        (Some(second), "outer")
    );
    ic.execute_command_list(&outer).unwrap();
    assert_eq!(spans.lists(SpanKind::Execute)[2], Some(third));
    // A restoring execute's span carries its list's number as the plain one's does: on the
    // immediate context, and on a deferred context (whose recording is then abandoned).
    ic.execute_command_list_restoring(&outer).unwrap();
    assert_eq!(spans.lists(SpanKind::Execute)[3], Some(third));
    {
        let dc = Arc::clone(&outer_dc);
        let inner = &inner;
        std::thread::scope(|s| {
            let dispatch = dispatch.clone();
            std::thread::Builder::new()
                .name("outer".into())
                .spawn_scoped(s, move || {
                    tracing::dispatcher::with_default(&dispatch, || {
                        let mut dc = dc.lock().unwrap();
                        dc.execute_command_list_restoring(inner).unwrap();
                        dc.abandon().unwrap();
                    })
                })
                .unwrap();
        });
    }
    let restoring = &spans.closed(SpanKind::Execute)[4];
    assert_eq!(
        (restoring.list, restoring.thread.as_str()),
        (Some(second), "outer")
    );
    drop(inner);
    drop(outer);
    assert_eq!(
        spans.lists(SpanKind::DestroyList)[1..],
        [Some(third), Some(second)],
        "the outer list ends, then the one it executed"
    );

    drop((dc, outer_dc));
    ic.destroy_device().unwrap();
    assert!(spans.open.lock().unwrap().is_empty(), "every span closed");
}
