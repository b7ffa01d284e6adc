//! Where a replay's deferred context runs: on the replaying thread, or on a thread of its
//! own, as each ran on its own thread when captured ([`ReplayThreads`]).

use std::sync::mpsc;
use std::thread::{Scope, ScopedJoinHandle};

use super::record::Outcome;
use super::replay::{ReplayErrorKind, ReplayThreads};
use crate::context::command_list::CommandList;
use crate::context::deferred::DeferredContext;
use crate::driver::Driver;
use crate::error::Result;
use crate::kernel::Kernel;

/// What a deferred context's call answered, the list a Finish made, and what was wrong with
/// the record it came from, if anything.
pub(super) struct Done<D: Driver, K: Kernel> {
    pub(super) outcome: Outcome,
    pub(super) list: Option<CommandList<D, K>>,
    pub(super) error: Option<ReplayErrorKind>,
}

impl<D: Driver, K: Kernel> Done<D, K> {
    /// A call that answered `result`.
    pub(super) fn of<T>(result: &Result<T>) -> Self {
        Done {
            outcome: result.into(),
            list: None,
            error: None,
        }
    }
}

/// A call to make on a deferred context, wherever it runs.
pub(super) type Job<'s, D, K> =
    Box<dyn FnOnce(&mut DeferredContext<D, K>) -> Done<D, K> + Send + 's>;

/// A deferred context a replay drives.
pub(super) enum ContextHost<'s, D: Driver, K: Kernel> {
    /// On the replaying thread (boxed: a context is large, a thread's handles small).
    Here(Box<DeferredContext<D, K>>),
    /// On a thread of its own: each call sent to it, and its answer waited for. The thread
    /// drops the context when the host is dropped (and the host waits for that).
    Thread {
        jobs: Option<mpsc::Sender<Job<'s, D, K>>>,
        done: mpsc::Receiver<Done<D, K>>,
        thread: Option<ScopedJoinHandle<'s, ()>>,
    },
}

impl<'s, D: Driver, K: Kernel> ContextHost<'s, D, K> {
    /// `dc`, run as `threads` says; `scope` is where its thread lives.
    pub(super) fn new<'env>(
        dc: DeferredContext<D, K>,
        threads: ReplayThreads,
        scope: &'s Scope<'s, 'env>,
    ) -> Self {
        if threads == ReplayThreads::One {
            return ContextHost::Here(Box::new(dc));
        }
        let (jobs, inbox) = mpsc::channel::<Job<'s, D, K>>();
        let (answers, done) = mpsc::channel();
        let thread = scope.spawn(move || {
            let mut dc = dc;
            while let Ok(job) = inbox.recv() {
                if answers.send(job(&mut dc)).is_err() {
                    break;
                }
            }
        });
        ContextHost::Thread {
            jobs: Some(jobs),
            done,
            thread: Some(thread),
        }
    }

    /// Makes `job`'s call on the context and answers what it did. A context whose thread
    /// is gone (a hook panicked on it) answers [`ReplayErrorKind::ContextPanicked`].
    pub(super) fn run(
        &mut self,
        job: impl FnOnce(&mut DeferredContext<D, K>) -> Done<D, K> + Send + 's,
    ) -> Done<D, K> {
        let lost = || Done {
            outcome: Outcome::Ok,
            list: None,
            error: Some(ReplayErrorKind::ContextPanicked),
        };
        match self {
            ContextHost::Here(dc) => job(dc),
            ContextHost::Thread { jobs, done, .. } => {
                let sent = jobs.as_ref().map(|jobs| jobs.send(Box::new(job)));
                match sent {
                    Some(Ok(())) => done.recv().unwrap_or_else(|_| lost()),
                    _ => lost(),
                }
            }
        }
    }
}

impl<D: Driver, K: Kernel> Drop for ContextHost<'_, D, K> {
    /// The context's thread ends (dropping the context there) before this returns: device
    /// destruction, which follows, finds no deferred context alive.
    fn drop(&mut self) {
        if let ContextHost::Thread { jobs, thread, .. } = self {
            drop(jobs.take());
            if let Some(thread) = thread.take() {
                // A thread that panicked has said so through `run` already.
                let _ = thread.join();
            }
        }
    }
}
