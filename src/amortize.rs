//! When to perform amortised processing (R-A1, R-A2).
//!
//! The immediate context asks after every flush. It performs it after a submit unless it did
//! so less than [`PUMP_INTERVAL`] ago in the same frame (never twice back to back), and
//! pumps it at a flush without a submit, or at the end of a frame, when [`PUMP_INTERVAL`] of
//! activity or a whole frame went by without one (never starved). A deferred context
//! performs it when it runs out of space (R-A2).
//!
//! Reading the clock costs about as much as the rest of a small flush, so the context does
//! not read it at every flush: after a read that finds the interval not over, it skips half
//! the flushes that the recent flush rate says still fit in it. Reads stay a handful per
//! interval, and the pump comes within a few flushes of the millisecond while the rate is
//! steady (a frame's end still pumps a starved frame whatever the rate).
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
    /// Flushes since the last performance, for the rate estimate.
    flushes: u64,
    /// Flushes to let go by before reading the clock again.
    skip: u64,
}

/// At most this many flushes go by between two clock reads.
const MAX_SKIP: u64 = 1024;

impl Amortizer {
    /// Notes activity on the context.
    pub(crate) fn touch(&mut self) {
        self.active = true;
    }

    /// After a flush: whether to perform now. `submitted` says whether the flush submitted;
    /// `now` reads the clock, called only when the decision needs it.
    pub(crate) fn after_flush(&mut self, submitted: bool, now: impl FnOnce() -> Instant) -> bool {
        if !submitted && !self.active {
            return false;
        }
        self.flushes += 1;
        let Some(last) = self.last else {
            if submitted {
                self.performed(now());
                return true;
            }
            return false;
        };
        if self.frame != self.frame_at_last {
            self.performed(now());
            return true;
        }
        if self.skip > 0 {
            self.skip -= 1;
            return false;
        }
        let now = now();
        let since = now.duration_since(last);
        if since >= PUMP_INTERVAL {
            self.performed(now);
            return true;
        }
        // Half of the flushes that still fit in the interval at the recent rate.
        let left = (PUMP_INTERVAL - since).as_nanos();
        let fit = left * u128::from(self.flushes) / since.as_nanos().max(1);
        self.skip = (fit / 2).min(u128::from(MAX_SKIP)) as u64;
        false
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
        self.flushes = 0;
        self.skip = 0;
    }

    /// How many times it was performed.
    pub(crate) fn count(&self) -> u64 {
        self.performed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::Cell;

    /// Submitting flushes every `step` from `start` until `until`: the instants at which it
    /// was performed, and how many times the clock was read.
    fn steady(
        a: &mut Amortizer,
        start: Instant,
        step: Duration,
        until: Duration,
    ) -> (Vec<Duration>, u32) {
        let reads = Cell::new(0);
        let mut performed = Vec::new();
        let mut at = Duration::ZERO;
        while at <= until {
            a.touch();
            let now = start + at;
            if a.after_flush(true, || {
                reads.set(reads.get() + 1);
                now
            }) {
                performed.push(at);
            }
            at += step;
        }
        (performed, reads.get())
    }

    #[test]
    fn r_a1_never_twice_back_to_back() {
        let mut a = Amortizer::default();
        let t = Instant::now();
        // Submits every 10 µs for 2.5 ms: the first performs it, then about one a
        // millisecond, never two flushes in a row, and the clock is read a handful of times.
        let (performed, reads) = steady(
            &mut a,
            t,
            Duration::from_micros(10),
            Duration::from_micros(2500),
        );
        assert_eq!(performed[0], Duration::ZERO, "the first submit performs it");
        assert_eq!(performed.len(), 3, "{performed:?}");
        for pair in performed.windows(2) {
            let gap = pair[1] - pair[0];
            assert!(gap >= PUMP_INTERVAL, "too soon: {performed:?}");
            assert!(
                gap <= PUMP_INTERVAL + Duration::from_micros(100),
                "starved: {performed:?}"
            );
        }
        assert!(reads < 40, "{reads} clock reads for 250 flushes");
    }

    #[test]
    fn r_a1_never_starved_for_a_frame_or_a_millisecond() {
        let mut a = Amortizer::default();
        let t = Instant::now();
        a.touch();
        assert!(a.after_flush(true, || t));
        // A frame with activity but whose submits all came too soon: the end of the frame
        // pumps it.
        a.touch();
        assert!(!a.after_flush(true, || t + Duration::from_micros(5)));
        assert!(a.end_frame(t + Duration::from_micros(6)));
        // An idle frame does not.
        assert!(!a.end_frame(t + Duration::from_micros(7)));
        // Activity in a new frame: its first flush performs it, even without a submit.
        a.touch();
        assert!(a.after_flush(false, || t + Duration::from_micros(8)));
        // No activity: a flush never performs it.
        assert!(!a.after_flush(false, || t + Duration::from_millis(5)));
        // A millisecond of steady activity, no frame end: pumped within a few flushes of it.
        let (performed, _) = steady(
            &mut a,
            t + Duration::from_millis(6),
            Duration::from_micros(50),
            Duration::from_millis(3),
        );
        assert!(performed.len() >= 2, "{performed:?}");
        assert_eq!(a.count(), 3 + performed.len() as u64);
    }
}
