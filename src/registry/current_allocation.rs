//! An object's current kernel allocation: one writer (the immediate context, rotating
//! resource identities, R-X5), any number of readers.

use core::num::NonZeroU64;

use crate::kernel::AllocationHandle;
use crate::primitive::{AtomicU64, Ordering};

/// An allocation that only the immediate context replaces, while any thread reads it.
///
/// Relaxed on both sides: the value is a name, not a pointer to data the writer published;
/// the kernel keeps every allocation of a rotation alive across it, so a reader that sees the
/// old name still names live memory, and the one write (a whole 64-bit word, atomic on
/// 32-bit targets too) can never be seen half done.
#[derive(Debug)]
pub(crate) struct CurrentAllocation(AtomicU64);

impl CurrentAllocation {
    pub(crate) fn new(allocation: Option<AllocationHandle>) -> Self {
        CurrentAllocation(AtomicU64::new(allocation.map_or(0, |a| a.0.get())))
    }

    /// The allocation now.
    #[inline]
    pub(crate) fn get(&self) -> Option<AllocationHandle> {
        NonZeroU64::new(self.0.load(Ordering::Relaxed)).map(AllocationHandle)
    }

    /// Replaces it (the immediate context, which the caller proves with its token).
    #[inline]
    pub(crate) fn set(&self, allocation: Option<AllocationHandle>) {
        self.0
            .store(allocation.map_or(0, |a| a.0.get()), Ordering::Relaxed);
    }
}

#[cfg(test)]
#[cfg(loom)]
mod tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    fn handle(n: u64) -> Option<AllocationHandle> {
        NonZeroU64::new(n).map(AllocationHandle)
    }

    /// The immediate context rotates two resources' allocations twice (X, Y to Y, X and
    /// back) while another thread reads both: every read is one of the two allocations,
    /// never none and never a third value, and once the rotations are seen done, the reader
    /// sees the final state. (The rotating thread starts with a store: loom explores nothing
    /// after a spawned thread's first operation if that is a load, tokio-rs/loom#392.)
    #[test]
    fn loom_rotation_readers_see_only_the_rotated_allocations() {
        loom::model(|| {
            let pair = Arc::new([
                CurrentAllocation::new(handle(1)),
                CurrentAllocation::new(handle(2)),
            ]);
            let done = Arc::new(crate::primitive::AtomicBool::new(false));
            let ic = {
                let (pair, done) = (Arc::clone(&pair), Arc::clone(&done));
                thread::spawn(move || {
                    for (x, y) in [(2, 1), (1, 2)] {
                        pair[0].set(handle(x));
                        pair[1].set(handle(y));
                    }
                    done.store(true, Ordering::Release);
                })
            };
            for cell in pair.iter() {
                let seen = cell.get();
                assert!(seen == handle(1) || seen == handle(2), "{seen:?}");
            }
            if done.load(Ordering::Acquire) {
                assert_eq!((pair[0].get(), pair[1].get()), (handle(1), handle(2)));
            }
            ic.join().unwrap();
        });
    }
}
