//! When to perform amortised processing (R-A1, R-A2).
//!
//! The immediate context asks after every flush. It performs it after a submit unless it did
//! so less than [`PUMP_INTERVAL`] ago in the same frame (never twice back to back), and
//! pumps it at a flush without a submit, or at the end of a frame, when [`PUMP_INTERVAL`] of
//! activity or a whole frame went by without one (never starved). A deferred context
//! performs it when it runs out of space (R-A2).
//!
//! Performing it trims the high watermarks of the engine's pools and calls the kernel's
//! callback. Pools owned by deferred contexts are trimmed by their own threads: the
//! immediate context bumps the device's trim epoch, which each context reads (one load, no
//! write) at its next Finish.

use std::time::{Duration, Instant};

/// R-A1's rule of thumb: if it has not run for about a millisecond of activity, pump it.
pub const PUMP_INTERVAL: Duration = Duration::from_millis(1);

/// The decision state of the immediate context.
#[derive(Debug, Default)]
pub(crate) struct Amortizer {
    last: Option<Instant>,
    /// Frames ended so far, and at the last performance.
    frame: u64,
    frame_at_last: u64,
    /// Operations since the last performance (activity).
    active: bool,
    performed: u64,
}

impl Amortizer {
    /// Notes activity on the context.
    pub(crate) fn touch(&mut self) {
        self.active = true;
    }

    /// After a flush: whether to perform now. `submitted` says whether the flush submitted.
    pub(crate) fn after_flush(&mut self, submitted: bool, now: Instant) -> bool {
        let elapsed = self
            .last
            .is_none_or(|t| now.duration_since(t) >= PUMP_INTERVAL);
        let new_frame = self.frame != self.frame_at_last;
        let due = if submitted {
            self.last.is_none() || new_frame || elapsed
        } else {
            self.active && (elapsed || new_frame)
        };
        if due {
            self.performed(now);
        }
        due
    }

    /// At the end of a frame (Present): whether to perform now because the frame went by
    /// without it.
    pub(crate) fn end_frame(&mut self, now: Instant) -> bool {
        let starved = self.active && self.frame == self.frame_at_last;
        self.frame += 1;
        if starved {
            self.performed(now);
        }
        starved
    }

    fn performed(&mut self, now: Instant) {
        self.last = Some(now);
        self.frame_at_last = self.frame;
        self.active = false;
        self.performed += 1;
    }

    /// How many times it was performed.
    pub(crate) fn count(&self) -> u64 {
        self.performed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r_a1_never_twice_back_to_back() {
        let mut a = Amortizer::default();
        let t = Instant::now();
        a.touch();
        assert!(a.after_flush(true, t), "the first submit performs it");
        a.touch();
        assert!(
            !a.after_flush(true, t + Duration::from_micros(10)),
            "back to back: no"
        );
        a.touch();
        assert!(!a.after_flush(true, t + Duration::from_micros(20)));
        a.touch();
        assert!(a.after_flush(true, t + PUMP_INTERVAL + Duration::from_micros(1)));
    }

    #[test]
    fn r_a1_never_starved_for_a_frame_or_a_millisecond() {
        let mut a = Amortizer::default();
        let t = Instant::now();
        a.touch();
        assert!(a.after_flush(true, t));
        // A frame with activity but whose submits all came too soon: the end of the frame
        // pumps it.
        a.touch();
        assert!(!a.after_flush(true, t + Duration::from_micros(5)));
        assert!(a.end_frame(t + Duration::from_micros(6)));
        // An idle frame does not.
        assert!(!a.end_frame(t + Duration::from_micros(7)));
        // Activity in a new frame: its first flush performs it, even without a submit.
        a.touch();
        assert!(a.after_flush(false, t + Duration::from_micros(8)));
        // Activity within the millisecond, same frame: no.
        a.touch();
        assert!(!a.after_flush(false, t + Duration::from_micros(9)));
        // A millisecond of activity without submits: pumped.
        a.touch();
        assert!(a.after_flush(false, t + Duration::from_millis(2)));
        assert_eq!(a.count(), 4);
    }
}
