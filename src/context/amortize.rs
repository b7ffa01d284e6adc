//! When to perform amortised processing (R-A1, R-A2).
//!
//! Amortised processing follows submits: it is *due* once a command buffer was submitted
//! after the last performance, and never performed while not due, so two performances
//! always have a submit between them (never twice back to back). The immediate context asks
//! after every flush; it performs it at the first submit ever, at the first submit of a new
//! frame, and whenever it has been due for [`PUMP_INTERVAL`] (at any flush, submitting or
//! not: never starved by a quiet stretch). At the end of a frame it performs it when it is
//! due and the frame went by without one (never starved for a frame); a frame that had its
//! performance leaves what is due to the next. A deferred context performs it when it runs
//! out of space (R-A2).
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
    /// A buffer was submitted since the last performance: it is due.
    due: bool,
    performed: u64,
    /// Flushes since the last performance, for the rate estimate.
    flushes: u64,
    /// Flushes to let go by before reading the clock again.
    skip: u64,
}

/// At most this many flushes go by between two clock reads.
const MAX_SKIP: u64 = 1024;

impl Amortizer {
    /// After a flush: whether to perform now. `submitted` says whether the flush submitted;
    /// `now` reads the clock, called only when the decision needs it.
    ///
    /// Inline: almost every flush lets the clock go by (`skip`), which is a few compares;
    /// the decision that reads the clock is [`Amortizer::decide`], out of line.
    #[inline]
    pub(crate) fn after_flush(&mut self, submitted: bool, now: impl FnOnce() -> Instant) -> bool {
        self.due |= submitted;
        if !self.due {
            return false; // never twice back to back
        }
        self.flushes += 1;
        let first_of_frame = self.last.is_none() || (submitted && self.frame != self.frame_at_last);
        if !first_of_frame && self.skip > 0 {
            self.skip -= 1;
            return false;
        }
        self.decide(first_of_frame, now)
    }

    /// [`Amortizer::after_flush`] where it reads the clock: at the first submit of a frame
    /// (or the first flush ever), or once the flushes to let go by are used up.
    #[inline(never)]
    fn decide(&mut self, first_of_frame: bool, now: impl FnOnce() -> Instant) -> bool {
        if first_of_frame {
            self.performed(now());
            return true;
        }
        let now = now();
        let since = now.duration_since(self.last.unwrap_or(now));
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

    /// At the end of a frame (Present): whether to perform now because it is due and the
    /// frame went by without a performance. A frame that had one leaves what is due to the
    /// next frame: performing again here could be twice in a row for one submit.
    pub(crate) fn end_frame(&mut self, now: Instant) -> bool {
        let starved = self.due && self.frame != self.frame_at_last;
        self.frame += 1;
        if starved {
            self.performed(now);
        }
        starved
    }

    fn performed(&mut self, now: Instant) {
        self.last = Some(now);
        self.frame_at_last = self.frame;
        self.due = false;
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
        let us = Duration::from_micros;
        assert!(a.after_flush(true, || t), "the first submit performs it");
        // A second submit too soon in the same frame: due, not performed; the frame had its
        // performance, so its end leaves it to the next frame.
        assert!(!a.after_flush(true, || t + us(5)));
        assert!(!a.end_frame(t + us(6)));
        // The next frame has no submit of its own: its end pumps what was due.
        assert!(a.end_frame(t + us(7)));
        // Nothing submitted since: neither an empty flush nor a frame's end performs it, however
        // long ago the last one was (never twice back to back).
        assert!(!a.after_flush(false, || t + Duration::from_millis(5)));
        assert!(!a.end_frame(t + Duration::from_millis(6)));
        // A new frame's first submit performs it at once.
        assert!(a.after_flush(true, || t + Duration::from_millis(7)));
        // Due, then a quiet stretch of empty flushes: pumped once the interval is over, after
        // at most the flushes the rate estimate lets go by unread.
        assert!(!a.after_flush(true, || t + Duration::from_millis(7) + us(10)));
        let pumped = (0..=MAX_SKIP)
            .position(|i| a.after_flush(false, || t + Duration::from_millis(9) + us(i)));
        assert!(pumped.is_some(), "{pumped:?}");
        // A millisecond of steady activity, no frame end: pumped within a few flushes of it.
        let (performed, _) = steady(
            &mut a,
            t + Duration::from_millis(10),
            Duration::from_micros(50),
            Duration::from_millis(3),
        );
        assert!(performed.len() >= 2, "{performed:?}");
        assert_eq!(a.count(), 4 + performed.len() as u64);
    }
}
