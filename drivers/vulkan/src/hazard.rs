//! The hazard rule's tracker (the crate docs): per command buffer, the byte ranges written
//! and read since its last barrier, so that a barrier goes only before a command that reads
//! or writes what an earlier one wrote since (read-after-write, write-after-write), or writes
//! what an earlier one read (write-after-read).

use ash::vk;

/// Bytes `start..end` of a buffer, as a command reads or writes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Range {
    pub(crate) buffer: vk::Buffer,
    pub(crate) start: u64,
    pub(crate) end: u64,
}

impl Range {
    /// `len` bytes from `offset` of `buffer`.
    pub(crate) fn new(buffer: vk::Buffer, offset: u64, len: u64) -> Range {
        Range {
            buffer,
            start: offset,
            end: offset + len,
        }
    }

    fn meets(&self, other: &Range) -> bool {
        self.buffer == other.buffer && self.start < other.end && other.start < self.end
    }
}

/// One access since the last barrier.
#[derive(Clone, Copy, Debug)]
struct Access {
    range: Range,
    write: bool,
}

/// The most accesses tracked at once: past them the next command barriers (conservative),
/// so a check is a scan of a short list.
const MAX_TRACKED: usize = 32;

/// The accesses of one command buffer since its last barrier.
///
/// Allocation-free once made: the list is reserved at its bound and cleared, never shrunk.
#[derive(Debug)]
pub(crate) struct Tracker {
    accesses: Vec<Access>,
    /// Work whose ranges nobody knows ran since the last barrier (an executed list): the next
    /// command barriers.
    unknown: bool,
    /// Barriers recorded into the command buffer (counted into the world when it ends).
    pub(crate) barriers: u64,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            accesses: Vec::with_capacity(MAX_TRACKED),
            unknown: false,
            barriers: 0,
        }
    }
}

impl Tracker {
    /// A new command buffer whose first command needs no barrier before it (a primary: the
    /// buffers before it in the queue are ordered by the submission; a secondary starts
    /// with a barrier of its own).
    pub(crate) fn begin(&mut self) {
        self.accesses.clear();
        self.unknown = false;
    }

    /// Whether a command reading `reads` and writing `writes` must wait for a barrier: it
    /// reads or writes what a tracked access wrote, or writes what one read; or work of
    /// unknown ranges ran since the last barrier; or the list is full.
    pub(crate) fn conflicts(&self, reads: &[Range], writes: &[Range]) -> bool {
        if self.unknown || self.accesses.len() + reads.len() + writes.len() > MAX_TRACKED {
            return true;
        }
        self.accesses.iter().any(|a| {
            writes.iter().any(|w| a.range.meets(w))
                || (a.write && reads.iter().any(|r| a.range.meets(r)))
        })
    }

    /// Notes a command's accesses; `true` when a barrier must be recorded before it, after
    /// which the tracked set holds this command's accesses alone.
    pub(crate) fn access(&mut self, reads: &[Range], writes: &[Range]) -> bool {
        let barrier = self.conflicts(reads, writes);
        if barrier {
            self.barrier();
        }
        let reads = reads.iter().map(|&range| Access {
            range,
            write: false,
        });
        let writes = writes.iter().map(|&range| Access { range, write: true });
        self.accesses.extend(reads.chain(writes));
        barrier
    }

    /// A barrier was recorded: everything before it is ordered before everything after.
    pub(crate) fn barrier(&mut self) {
        self.accesses.clear();
        self.unknown = false;
        self.barriers += 1;
    }

    /// Work whose ranges are not known ran (`vkCmdExecuteCommands`): the next command waits
    /// for a barrier.
    pub(crate) fn unknown(&mut self) {
        self.accesses.clear();
        self.unknown = true;
    }

    /// The barriers counted so far, and the count back to zero.
    pub(crate) fn take_barriers(&mut self) -> u64 {
        std::mem::take(&mut self.barriers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ash::vk::Handle as _;

    fn r(buffer: u64, start: u64, end: u64) -> Range {
        Range {
            buffer: vk::Buffer::from_raw(buffer),
            start,
            end,
        }
    }

    #[test]
    fn read_after_write_on_overlapping_bytes_demands_a_barrier() {
        let mut t = Tracker::default();
        assert!(!t.access(&[], &[r(1, 0, 16)]), "the first command");
        assert!(
            t.access(&[r(1, 15, 20)], &[r(2, 0, 4)]),
            "reads byte 15 written"
        );
        // The barrier reset the set: it now holds the reader's accesses only.
        assert!(
            !t.access(&[r(1, 0, 16)], &[r(3, 0, 4)]),
            "reads after reads"
        );
        assert_eq!(t.barriers, 1);
    }

    #[test]
    fn write_after_write_and_write_after_read_demand_a_barrier() {
        let mut t = Tracker::default();
        t.access(&[r(1, 0, 8)], &[r(2, 8, 16)]);
        assert!(t.conflicts(&[], &[r(2, 12, 13)]), "WAW");
        assert!(t.conflicts(&[], &[r(1, 7, 9)]), "WAR");
        assert!(!t.conflicts(&[r(1, 0, 8)], &[]), "RAR");
    }

    #[test]
    fn disjoint_ranges_and_other_buffers_need_none() {
        let mut t = Tracker::default();
        assert!(!t.access(&[r(1, 0, 8)], &[r(2, 0, 8)]));
        assert!(
            !t.access(&[r(1, 0, 8)], &[r(2, 8, 16)]),
            "adjacent, not overlapping"
        );
        assert!(!t.access(&[r(2, 16, 32)], &[r(3, 0, 8)]));
        assert!(!t.access(&[], &[r(4, 0, 8), r(1, 8, 9)]));
        assert!(!t.conflicts(&[r(5, 0, 8)], &[r(2, 100, 101)]));
        assert!(
            !t.conflicts(&[r(2, 0, 0)], &[]),
            "an empty range meets nothing"
        );
        assert_eq!(t.barriers, 0);
    }

    #[test]
    fn unknown_work_and_a_full_list_demand_a_barrier() {
        let mut t = Tracker::default();
        t.unknown();
        assert!(t.access(&[], &[r(1, 0, 4)]), "after an executed list");
        assert!(!t.access(&[], &[r(2, 0, 4)]));
        for i in 0..MAX_TRACKED as u64 - 2 {
            assert!(!t.access(&[], &[r(10 + i, 0, 4)]));
        }
        assert!(t.access(&[], &[r(99, 0, 4)]), "the list is full");
        assert_eq!(t.take_barriers(), 2);
        assert_eq!(t.barriers, 0);
    }

    #[test]
    fn the_list_keeps_its_memory() {
        let mut t = Tracker::default();
        let at = t.accesses.as_ptr();
        for i in 0..10 * MAX_TRACKED as u64 {
            t.access(&[r(i % 7, 0, 4)], &[r(100 + i % 5, 0, 4)]);
        }
        t.begin();
        assert_eq!(t.accesses.as_ptr(), at, "no reallocation");
        assert_eq!(t.accesses.capacity(), MAX_TRACKED);
    }
}
