//! A `tracing` subscriber that keeps the engine's spans (and the job's `frame` spans) in
//! memory, each with the thread that opened it, for the trace file and the picture.
//!
//! A span lasts from its creation to its close: the engine's `record` span, entered during
//! each recorded call, covers the whole recording here (see `cmdlist::trace`). Spans of other
//! targets are not
//! captured. The mutexes are taken once per span: this subscriber is for looking at a frame,
//! not for shipping.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cmdlist::trace::SpanKind;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

/// The target of the job's own spans (one per frame, on the immediate context's thread).
pub const FRAME_TARGET: &str = "frame";

/// What a captured span was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// One of the engine's.
    Engine(SpanKind),
    /// The job's frame `index`.
    Frame(u64),
    /// A span of the engine's this capture does not know (a newer engine's): kept by name.
    Other(&'static str),
}

impl Kind {
    /// The span's name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Engine(kind) => kind.name(),
            Kind::Frame(_) => "frame",
            Kind::Other(name) => name,
        }
    }
}

/// A closed span.
#[derive(Clone, Debug)]
pub struct Span {
    pub kind: Kind,
    /// Index into [`Captured::lanes`]: the thread that opened the span.
    pub lane: usize,
    /// Nanoseconds since the capture began.
    pub start: u64,
    pub end: u64,
    /// The command list the span is about (`cmdlist::trace::LIST`).
    pub list: Option<u64>,
    /// The deferred context (`cmdlist::trace::CONTEXT`).
    pub context: Option<u64>,
}

/// Everything captured, once the job is done.
#[derive(Debug, Default)]
pub struct Captured {
    /// Closed spans, in the order they closed.
    pub spans: Vec<Span>,
    /// The threads, by name, in the order they first opened a span.
    pub lanes: Vec<String>,
    /// Spans opened and not closed (zero when the engine closes every span it opens).
    pub still_open: usize,
}

impl Captured {
    /// Each execute of a list whose Finish was captured, with that Finish: `(finish,
    /// execute)`, in the executes' closing order.
    pub fn flows(&self) -> Vec<(&Span, &Span)> {
        let finishes: HashMap<u64, &Span> = self
            .spans
            .iter()
            .filter(|s| s.kind == Kind::Engine(SpanKind::Finish))
            .filter_map(|s| Some((s.list?, s)))
            .collect();
        self.spans
            .iter()
            .filter(|s| s.kind == Kind::Engine(SpanKind::Execute))
            .filter_map(|execute| Some((*finishes.get(&execute.list?)?, execute)))
            .collect()
    }
}

/// The subscriber; clones share what they capture.
#[derive(Clone)]
pub struct Capture {
    inner: Arc<Inner>,
}

struct Inner {
    start: Instant,
    next_id: AtomicU64,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    open: HashMap<u64, Open>,
    closed: Vec<Span>,
    lanes: Vec<String>,
}

/// A span not closed yet, with its references (`clone_span` adds one, `try_close` drops one).
struct Open {
    span: Span,
    refs: usize,
}

/// The fields the capture reads.
#[derive(Default)]
struct Fields {
    list: Option<u64>,
    context: Option<u64>,
    index: Option<u64>,
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            cmdlist::trace::LIST => self.list = Some(value),
            cmdlist::trace::CONTEXT => self.context = Some(value),
            "index" => self.index = Some(value),
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(value) = u64::try_from(value) {
            self.record_u64(field, value);
        }
    }

    fn record_debug(&mut self, _: &Field, _: &dyn std::fmt::Debug) {}
}

impl Capture {
    pub fn new() -> Capture {
        Capture {
            inner: Arc::new(Inner {
                start: Instant::now(),
                next_id: AtomicU64::new(1),
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// What was captured so far (spans still open are counted, not listed).
    pub fn take(&self) -> Captured {
        let mut state = self.state();
        Captured {
            spans: std::mem::take(&mut state.closed),
            lanes: state.lanes.clone(),
            still_open: state.open.len(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere while this lock was held left whole spans behind: keep going.
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn now(&self) -> u64 {
        self.inner.start.elapsed().as_nanos() as u64
    }

    fn wanted(meta: &Metadata<'_>) -> bool {
        meta.is_span() && (meta.target() == cmdlist::trace::TARGET || meta.target() == FRAME_TARGET)
    }
}

impl State {
    /// The lane of the calling thread, by its name.
    fn lane(&mut self) -> usize {
        let thread = std::thread::current();
        let name = match thread.name() {
            Some(name) => name.to_owned(),
            None => format!("{:?}", thread.id()),
        };
        match self.lanes.iter().position(|lane| *lane == name) {
            Some(lane) => lane,
            None => {
                self.lanes.push(name);
                self.lanes.len() - 1
            }
        }
    }
}

impl Subscriber for Capture {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if Self::wanted(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        Self::wanted(meta)
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let meta = attrs.metadata();
        let kind = match (meta.target(), SpanKind::from_name(meta.name())) {
            (FRAME_TARGET, _) => Kind::Frame(fields.index.unwrap_or(0)),
            (_, Some(kind)) => Kind::Engine(kind),
            (_, None) => Kind::Other(meta.name()),
        };
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let start = self.now();
        let mut state = self.state();
        let lane = state.lane();
        let span = Span {
            kind,
            lane,
            start,
            end: start,
            list: fields.list,
            context: fields.context,
        };
        state.open.insert(id, Open { span, refs: 1 });
        Id::from_non_zero_u64(NonZeroU64::new(id).expect("ids start at 1"))
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut fields = Fields::default();
        values.record(&mut fields);
        if let Some(open) = self.state().open.get_mut(&span.into_u64()) {
            open.span.list = fields.list.or(open.span.list);
            open.span.context = fields.context.or(open.span.context);
        }
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, _: &Event<'_>) {}

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}

    fn clone_span(&self, id: &Id) -> Id {
        if let Some(open) = self.state().open.get_mut(&id.into_u64()) {
            open.refs += 1;
        }
        id.clone()
    }

    fn try_close(&self, id: Id) -> bool {
        let end = self.now();
        let mut state = self.state();
        let key = id.into_u64();
        let Some(open) = state.open.get_mut(&key) else {
            return false;
        };
        open.refs -= 1;
        if open.refs > 0 {
            return false;
        }
        let mut span = state.open.remove(&key).expect("present above").span;
        span.end = end;
        state.closed.push(span);
        true
    }
}
