//! Closures run on another thread, for the steps that call the engine off the calling
//! thread (free-threaded destroys, deferred contexts used from a second thread, lists
//! dropped elsewhere).
//!
//! The threads are spawned once per process and kept in an idle pool: spawning one per step
//! or per run costs more than the rest of a run (a fuzzer runs thousands of inputs a second).
//! A closure takes an idle thread (or spawns one when none is idle), so two closures started
//! before either is waited for run on two different threads at the same time; waiting puts
//! the thread back. Threads stay alive until the process exits, blocked on their inbox,
//! which is also what LeakSanitizer wants at a fuzzer's exit: no thread is half-way through
//! its thread-local destructors then.
//!
//! A closure's panic is caught on its thread and re-raised by [`Running::wait`], so a failed
//! check on another thread fails the run like one on the calling thread. How often a step
//! runs elsewhere is decoded by [`one_in_four`].

use std::any::Any;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Mutex;

use arbitrary::Arbitrary;

type Job = Box<dyn FnOnce() -> Box<dyn Any + Send> + Send>;
type Outcome = std::thread::Result<Box<dyn Any + Send>>;

/// One pooled thread: where to send it a job, where its outcome comes back.
struct Pooled {
    jobs: SyncSender<Job>,
    done: Receiver<Outcome>,
}

/// The threads waiting for a job.
static IDLE: Mutex<Vec<Pooled>> = Mutex::new(Vec::new());

fn idle() -> std::sync::MutexGuard<'static, Vec<Pooled>> {
    // The lock is never held across a job, so a poisoned pool is still consistent.
    IDLE.lock().unwrap_or_else(|e| e.into_inner())
}

fn spawn() -> Pooled {
    // Bounded channels: their buffers are allocated here, never per message.
    let (jobs, inbox) = mpsc::sync_channel::<Job>(1);
    let (outbox, done) = mpsc::sync_channel::<Outcome>(1);
    std::thread::Builder::new()
        .name(String::from("fuzz-elsewhere"))
        .spawn(move || {
            for job in inbox {
                // The job's captures are dropped inside the call, before the outcome is sent:
                // the caller sees their drops done when `wait` returns.
                let outcome = panic::catch_unwind(AssertUnwindSafe(job));
                if outbox.send(outcome).is_err() {
                    break;
                }
            }
        })
        .expect("spawning a thread for the fuzz interpreters");
    Pooled { jobs, done }
}

/// A closure running on a pooled thread; [`Running::wait`] returns its result. Dropped
/// without waiting, its thread finishes the closure and exits.
#[must_use = "wait for the closure"]
pub(crate) struct Running<R> {
    thread: Pooled,
    result: PhantomData<fn() -> R>,
}

/// Starts `f` on an idle pooled thread (a new one if none is idle).
pub(crate) fn start<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> Running<R> {
    let thread = idle().pop().unwrap_or_else(spawn);
    let job: Job = Box::new(move || Box::new(f()) as Box<dyn Any + Send>);
    if thread.jobs.send(job).is_err() {
        unreachable!("a pooled thread exits only when its inbox closes");
    }
    Running {
        thread,
        result: PhantomData,
    }
}

impl<R: 'static> Running<R> {
    /// Waits for the closure and returns its result, re-raising its panic.
    pub(crate) fn wait(self) -> R {
        let outcome = self
            .thread
            .done
            .recv()
            .expect("a pooled thread answers every job");
        idle().push(self.thread);
        match outcome {
            Ok(result) => *result
                .downcast::<R>()
                .expect("a job answers its closure's type"),
            Err(panic) => panic::resume_unwind(panic),
        }
    }
}

/// Runs `f` on a pooled thread and returns its result (re-raising its panic).
pub(crate) fn run<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    start(f).wait()
}

/// Decodes a flag true for one byte value in four. The steps that may run on another thread
/// do so this often: a hand-off to another thread and back costs two thread switches, as
/// much as the rest of the step, and one step in four keeps every cross-thread path
/// (a destroy, a burst of recording, a list's drop elsewhere) frequent in every run.
pub(crate) fn one_in_four(u: &mut arbitrary::Unstructured<'_>) -> arbitrary::Result<bool> {
    Ok(u8::arbitrary(u)? % 4 == 0)
}
