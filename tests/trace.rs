//! The engine's spans (feature `trace`): each on the thread that does the step, a list's
//! number the same from its recording to its execute and its destroy, every span closed.

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
    open: Arc<Mutex<HashMap<u64, Closed>>>,
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
        self.open.lock().unwrap().insert(id, span);
        Id::from_non_zero_u64(NonZeroU64::new(id).unwrap())
    }
    fn record(&self, id: &Id, values: &Record<'_>) {
        let mut list = List(None);
        values.record(&mut list);
        if let Some(span) = self.open.lock().unwrap().get_mut(&id.into_u64()) {
            span.list = list.0.or(span.list);
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
    fn try_close(&self, id: Id) -> bool {
        let span = self.open.lock().unwrap().remove(&id.into_u64());
        self.closed.lock().unwrap().extend(span);
        true
    }
}

impl Spans {
    fn closed(&self, kind: SpanKind) -> Vec<Closed> {
        let closed = self.closed.lock().unwrap();
        closed.iter().filter(|s| s.kind == kind).cloned().collect()
    }
}

#[test]
fn a_lists_spans_carry_its_number_from_the_recording_thread_to_the_executing_one() {
    let spans = Spans::default();
    let dispatch = tracing::Dispatch::new(spans.clone());
    let _traced = tracing::dispatcher::set_default(&dispatch);
    let (device, mut ic, _world) =
        soft::device(SoftConfig::default(), DeviceConfig::default()).unwrap();
    let desc = cmdlist::ResourceDesc {
        byte_size: 16,
        ..Default::default()
    };
    let (src, dst) = (
        device.create_resource(desc).unwrap(),
        device.create_resource(desc).unwrap(),
    );
    let mut dc = device.create_deferred_context().unwrap();
    let recorder = std::thread::Builder::new().name("recorder".into());
    let for_recorder = dispatch.clone();
    let (dc, list) = recorder
        .spawn(move || {
            let dispatch = for_recorder;
            let _traced = tracing::dispatcher::set_default(&dispatch);
            // An abandoned recording ends its span; the next recording opens its own.
            dc.command(SoftCommand::Copy { dst, src }).unwrap();
            dc.abandon().unwrap();
            dc.command(SoftCommand::Copy { dst, src }).unwrap();
            let list = dc.finish().unwrap();
            (dc, list)
        })
        .unwrap()
        .join()
        .unwrap();
    ic.execute_command_list(&list).unwrap();
    ic.flush().unwrap();
    std::thread::Builder::new()
        .name("dropper".into())
        .spawn(move || {
            let _traced = tracing::dispatcher::set_default(&dispatch);
            drop(list);
        })
        .unwrap()
        .join()
        .unwrap();
    drop(dc);
    ic.destroy_device().unwrap();

    let finish = spans.closed(SpanKind::Finish);
    assert_eq!(finish.len(), 1);
    let number = finish[0].list.expect("Finish names its list");
    assert_eq!(finish[0].thread, "recorder");
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
    assert_eq!(records[1].list, Some(number));
    assert!(records.iter().all(|r| r.thread == "recorder"));
    let destroyed = spans.closed(SpanKind::DestroyList);
    assert_eq!(destroyed.len(), 1);
    assert_eq!(
        (destroyed[0].list, destroyed[0].thread.as_str()),
        (Some(number), "dropper")
    );
    let execute = spans.closed(SpanKind::Execute);
    assert_eq!(execute.len(), 1);
    assert_eq!(execute[0].list, Some(number));
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
    assert!(spans.open.lock().unwrap().is_empty(), "every span closed");
}
