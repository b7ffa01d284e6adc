//! Device removal (R-D3): the flag every call checks, and what device destruction must see
//! of the calls in flight when it sets it.
//!
//! Two kinds of work may be in flight on other threads when the immediate context destroys
//! the device: a create (its entry must be linked before the drain looks, or see the
//! removal before any hook), and a call on a live deferred context (it may hand the driver
//! any object it holds, so the drain must leave those). Both are the same handshake. The
//! worker counts itself in, then reads the flag; device destruction sets the flag, then
//! reads the count with a read-modify-write. An RMW reads the newest value of the count, so
//! either it sees the worker, or the worker's increment comes after it in the count's
//! modification order, reads what the RMW wrote and synchronises with it (AcqRel on both):
//! the flag's store happens before the worker's read, which sees the removal. No SeqCst
//! argument is needed, and loom, which models acquire and release but not SeqCst loads and
//! stores, checks the real code (`loom_` tests below).

use crate::error::{Error, Result};
use crate::primitive::{AtomicBool, AtomicUsize, Ordering};

/// Whether the device is removed, the creates in progress and the deferred contexts alive.
#[derive(Debug, Default)]
pub(crate) struct Removal {
    removed: AtomicBool,
    /// Creates in progress: device destruction waits for them (R-D3, R-H3).
    creating: AtomicUsize,
    /// Deferred contexts alive: device destruction leaves what they hold (R-D3, R-H2).
    contexts: AtomicUsize,
}

/// A create in progress (see [`Removal::begin_create`]); ends when dropped, also on unwind.
pub(crate) struct CreateGate<'a> {
    creating: &'a AtomicUsize,
}

impl Drop for CreateGate<'_> {
    fn drop(&mut self) {
        self.creating.fetch_sub(1, Ordering::Release);
    }
}

impl Removal {
    /// Whether the device is removed. Every call checks it once, when it begins.
    #[inline]
    pub(crate) fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// Starts a create: [`Error::DeviceRemoved`] once removed; otherwise the removal waits
    /// until the returned gate is dropped.
    pub(crate) fn begin_create(&self) -> Result<CreateGate<'_>> {
        self.creating.fetch_add(1, Ordering::AcqRel);
        let gate = CreateGate {
            creating: &self.creating,
        };
        if self.is_removed() {
            return Err(Error::DeviceRemoved);
        }
        Ok(gate)
    }

    /// From now on every lookup and create is [`Error::DeviceRemoved`]; returns once every
    /// create that started before has finished.
    pub(crate) fn mark_removed(&self) {
        self.removed.store(true, Ordering::Release);
        // An RMW, not a load: see the module docs.
        while self.creating.fetch_add(0, Ordering::AcqRel) != 0 {
            crate::primitive::yield_now();
        }
    }

    /// A deferred context came to life: counted before its first call checks the removal.
    pub(crate) fn context_alive(&self) {
        self.contexts.fetch_add(1, Ordering::AcqRel);
    }

    /// A deferred context is gone.
    pub(crate) fn context_gone(&self) {
        self.contexts.fetch_sub(1, Ordering::AcqRel);
    }

    /// Whether a deferred context is alive (DestroyDevice refuses then, R-H2).
    pub(crate) fn contexts_alive(&self) -> bool {
        self.contexts.load(Ordering::Acquire) > 0
    }

    /// Whether a deferred context may still be in a call that began before the removal:
    /// asked by device destruction after [`Removal::mark_removed`]. `false` means that every
    /// context counted from now on finds the device removed at its first call (an RMW: see
    /// the module docs).
    pub(crate) fn contexts_alive_after_removal(&self) -> bool {
        debug_assert!(self.removed.load(Ordering::Relaxed));
        self.contexts.fetch_add(0, Ordering::AcqRel) > 0
    }
}

#[cfg(test)]
#[cfg(loom)]
mod tests {
    use loom::sync::Arc;
    use loom::thread;

    use super::Removal;

    /// A deferred context counted in while the device is destroyed: either the drain sees it
    /// alive (and leaves what it holds), or its call sees the removal (and hears nothing).
    #[test]
    fn loom_a_context_is_seen_by_the_drain_or_sees_the_removal() {
        loom::model(|| {
            let removal = Arc::new(Removal::default());
            let context = {
                let removal = Arc::clone(&removal);
                thread::spawn(move || {
                    removal.context_alive();
                    removal.is_removed()
                })
            };
            removal.mark_removed();
            let leaves_held = removal.contexts_alive_after_removal();
            let call_sees_removal = context.join().unwrap();
            assert!(leaves_held || call_sees_removal);
        });
    }

    /// A create racing the removal: either the removal waits for it (so its entry is linked
    /// before the drain looks), or it sees the removal and creates nothing.
    #[test]
    fn loom_a_create_is_waited_for_or_sees_the_removal() {
        loom::model(|| {
            let removal = Arc::new(Removal::default());
            let linked = Arc::new(loom::sync::atomic::AtomicBool::new(false));
            let create = {
                let (removal, linked) = (Arc::clone(&removal), Arc::clone(&linked));
                thread::spawn(move || {
                    if let Ok(_gate) = removal.begin_create() {
                        linked.store(true, loom::sync::atomic::Ordering::Relaxed);
                        true
                    } else {
                        false
                    }
                })
            };
            removal.mark_removed();
            // The drain looks now: a create that went ahead is linked.
            let seen = linked.load(loom::sync::atomic::Ordering::Relaxed);
            let created = create.join().unwrap();
            assert!(!created || seen, "a create the drain did not wait for");
        });
    }
}
