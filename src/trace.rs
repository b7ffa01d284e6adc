//! What the engine tells a profiler: spans at command-list granularity (feature `trace`).
//!
//! With the feature on, the engine opens a [`tracing`](https://docs.rs/tracing) span, target
//! [`TARGET`], level `INFO`, for each step of the kinds in [`SpanKind`], on the thread that
//! does it. Any `tracing` subscriber receives them: a Chrome or Perfetto trace writer, Tracy,
//! or the timeline of the repository's main job (`examples/frame`). Without a subscriber a
//! span costs a check of `tracing`'s level filter and an empty span, about 30 instructions: a
//! warm one-copy Finish/execute/destroy/flush cycle opens eleven and takes 25% more
//! (BENCHMARKS.md). With the feature off nothing is compiled in: the cycle's instruction count
//! is the same as without instrumentation, and CI gates it.
//!
//! A span of a list step carries the list's identity in the field [`LIST`]: a number unique
//! in the process, given at Finish. The same number is on the list's `finish` span (on the
//! recording thread), on every `execute` of it (the immediate context's thread, or a deferred
//! context's for a nested list) and on its `destroy_list`: a subscriber draws the flow from
//! one thread to the other.
//!
//! A span's extent is from its creation to its close. A `record` span is created by the first
//! call recorded after a Finish (or after the context was made, or an abandon) and closed
//! when the next Finish begins, or at an abandon, a context-local removal (R-E3) or the
//! context's drop: it covers the application's recording, however many calls it took. It has
//! no parent, and it is entered during each recorded call, so a profiler that times entered
//! spans (Tracy) shows the calls and one that times a span's life shows the whole recording.
//! A Finish that fails still numbers its `record` and `finish` spans: that number belongs to
//! no list.

/// The target of every span the engine opens.
pub const TARGET: &str = "cmdlist";

/// The field carrying a command list's identity (a `u64`, unique in the process).
pub const LIST: &str = "list";

/// The field of a `record` or `finish` span naming the deferred context (its
/// [`crate::DeferredId`] number).
pub const CONTEXT: &str = "context";

/// The kinds of span the engine opens, by their span names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum SpanKind {
    /// A deferred context records a list: from the first call after a Finish to the next
    /// Finish, abandon, removal or drop (fields [`CONTEXT`], [`LIST`]; see the module docs).
    Record,
    /// FinishCommandList on the recording thread (R-C1, R-R7; fields [`CONTEXT`], [`LIST`]).
    /// Its steps are the spans below, up to [`SpanKind::RenewContext`].
    Finish,
    /// Finish takes the context's destroyed lists and recycles those the list clock allows
    /// (RecycleCommandList, R-R5).
    RecycleLists,
    /// Finish makes the list from recycled memory (RecycleCreateCommandList where the
    /// driver has command lists, R-R6; the engine's memory alone where it emulates them).
    RecycleCreateList,
    /// Finish makes the list from fresh memory (CreateCommandList where the driver has
    /// command lists, R-R7).
    CreateList,
    /// Finish closes the recording's context-local handles (R-C1).
    CloseHandles,
    /// Finish readies the context for its next list (RecycleCreateDeferredContext, R-R7).
    RenewContext,
    /// CommandListExecute (field [`LIST`]): on the immediate context (R-C3), or recorded on a
    /// deferred context (a nested list).
    Execute,
    /// The last owner of a list let it go, on any thread (RecycleDestroyCommandList, R-R4;
    /// field [`LIST`]).
    DestroyList,
    /// The immediate context's Flush (R-D2), also inside a Present: its steps are
    /// [`SpanKind::Submit`], [`SpanKind::DeferredDestruction`] and [`SpanKind::Amortize`].
    Flush,
    /// The open command buffer goes to the kernel.
    Submit,
    /// Deferred destruction: the retire queue's pass on the submission clock (R-D1, R-D2),
    /// inside a Flush; and the drain of DestroyDevice (R-D3).
    DeferredDestruction,
    /// Amortised processing (R-A1): after a Flush, at a Present or an `end_frame`.
    Amortize,
    /// Present (R-X1).
    Present,
    /// Blt (R-X6, R-X7).
    Blt,
    /// RotateResourceIdentities (R-X5).
    Rotate,
}

impl SpanKind {
    /// Every kind, in the order above.
    pub const ALL: &'static [SpanKind] = &[
        SpanKind::Record,
        SpanKind::Finish,
        SpanKind::RecycleLists,
        SpanKind::RecycleCreateList,
        SpanKind::CreateList,
        SpanKind::CloseHandles,
        SpanKind::RenewContext,
        SpanKind::Execute,
        SpanKind::DestroyList,
        SpanKind::Flush,
        SpanKind::Submit,
        SpanKind::DeferredDestruction,
        SpanKind::Amortize,
        SpanKind::Present,
        SpanKind::Blt,
        SpanKind::Rotate,
    ];

    /// The span's name.
    pub const fn name(self) -> &'static str {
        match self {
            SpanKind::Record => "record",
            SpanKind::Finish => "finish",
            SpanKind::RecycleLists => "recycle_lists",
            SpanKind::RecycleCreateList => "recycle_create_list",
            SpanKind::CreateList => "create_list",
            SpanKind::CloseHandles => "close_handles",
            SpanKind::RenewContext => "renew_context",
            SpanKind::Execute => "execute",
            SpanKind::DestroyList => "destroy_list",
            SpanKind::Flush => "flush",
            SpanKind::Submit => "submit",
            SpanKind::DeferredDestruction => "deferred_destruction",
            SpanKind::Amortize => "amortize",
            SpanKind::Present => "present",
            SpanKind::Blt => "blt",
            SpanKind::Rotate => "rotate",
        }
    }

    /// The kind a span name stands for.
    pub fn from_name(name: &str) -> Option<SpanKind> {
        SpanKind::ALL
            .iter()
            .copied()
            .find(|kind| kind.name() == name)
    }
}

/// A span of the engine's, entered until the end of the enclosing block: `span!("flush")`,
/// `span!("execute", list = id)`. The name must be one of [`SpanKind`]'s (a test holds every
/// name to it). Without the feature it is `()` and its fields are not evaluated.
macro_rules! span {
    ($name:literal $(, $($fields:tt)*)?) => {{
        #[cfg(feature = "trace")]
        let span =
            tracing::info_span!(target: $crate::trace::TARGET, $name $(, $($fields)*)?).entered();
        #[cfg(not(feature = "trace"))]
        let span = $crate::trace::NoSpan;
        span
    }};
}
pub(crate) use span;

/// What [`span!`] gives without the feature `trace`: nothing, held where a span's guard
/// would be (a type of its own, so that holding it reads as what it stands for).
#[cfg(not(feature = "trace"))]
pub(crate) struct NoSpan;

/// A new command list's identity, for the [`LIST`] field.
#[cfg(feature = "trace")]
pub(crate) fn next_list_id() -> u64 {
    use core::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        for &kind in SpanKind::ALL {
            assert_eq!(SpanKind::from_name(kind.name()), Some(kind));
        }
        let mut names: Vec<_> = SpanKind::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), SpanKind::ALL.len());
    }

    /// Every `span!` in the source names a kind (a misspelt name would be a span no consumer
    /// recognises).
    #[test]
    fn every_span_in_the_source_names_a_kind() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
        let mut seen = std::collections::BTreeSet::new();
        let mut stack = vec![std::path::PathBuf::from(root)];
        while let Some(path) = stack.pop() {
            if path.is_dir() {
                stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for (_, rest) in text
                .match_indices("span!(\"")
                .map(|(i, _)| ((), &text[i + 7..]))
            {
                let name = &rest[..rest.find('"').unwrap()];
                assert!(
                    SpanKind::from_name(name).is_some(),
                    "{}: span {name:?} is not a SpanKind",
                    path.display()
                );
                seen.insert(name.to_owned());
            }
        }
        // `record` is opened by hand (it outlives a call), the others through `span!`.
        for kind in SpanKind::ALL.iter().filter(|k| **k != SpanKind::Record) {
            assert!(
                seen.contains(kind.name()),
                "no span!(\"{}\") in the source",
                kind.name()
            );
        }
    }
}
