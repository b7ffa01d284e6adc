//! A driver-built list's renames: a deferred context's Map(DISCARD) of a resource makes the
//! resource's bytes, for the rest of the recording, the upload bytes the Map handed out,
//! instead of recording a copy of them into the resource's buffer at the Unmap.
//!
//! Why: a copy into the resource's buffer at each discard's Unmap is a write of bytes the
//! previous draw read (write after read) that the next draw reads (read after write): two
//! barriers and a copy per discard, which on lavapipe each cost an entry allocated at record
//! time and freed at reset (a barrier about as much as the dispatch it orders). A draw that
//! reads the Map's upload bytes in place needs neither the copy nor those barriers.
//!
//! The rule, per recording (no rename crosses a segment or outlives the recording):
//! - a discard's Unmap renames: the copy of its upload bytes (`src`) into the resource's
//!   first bytes (`dst`) is kept pending, not recorded. A pending copy of the same resource
//!   that this one overwrites whole is dropped (nothing read the resource's buffer since:
//!   a command that would have recorded it first); one that wrote more bytes is recorded
//!   first, so the bytes past this discard's end are the ones the copies left before;
//! - a draw reads a renamed resource's bytes from the upload bytes ([`Renames::read`]);
//! - before any other command that may touch a renamed resource (or a draw's target in
//!   one, or a read reaching past the renamed bytes), the pending copy is recorded: the
//!   resource's buffer then holds what the copy at the Unmap would have put there;
//! - at the end of each segment (Finish, and a chained list's execute) every pending copy is
//!   recorded: after the list the resource's buffer holds its last discard's bytes, and a
//!   chained list reads them there.
//!
//! So every copy recorded is one the Unmap used to record (fewer, never more), recorded no
//! earlier than before and before anything that reads the buffer; each execute of the list
//! runs it after the whole recording was written, so a Map(NO_OVERWRITE) that writes the
//! discard's upload bytes again (R-M2) lands in the draws that read them in place and in the
//! copy alike. The packets the list keeps for a replay after a rotation are unchanged: they
//! copy at each Unmap, which reads the same bytes.

use crate::encode::Span;

/// A discard's copy not recorded yet: `src` (upload bytes) into `dst` (the resource's first
/// bytes, in the buffer its allocation had when the Unmap was recorded).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pending {
    pub(crate) dst: Span,
    pub(crate) src: Span,
}

impl Pending {
    /// Whether `span` lies in bytes of the resource's buffer the copy writes or could be
    /// thought to (the whole buffer: anything else there must see the copy first).
    fn meets(&self, span: Span) -> bool {
        span.buffer == self.dst.buffer
    }
}

/// The pending copies of a recording, at most one per resource (so per buffer). A short
/// list, reused from recording to recording.
#[derive(Debug, Default)]
pub(crate) struct Renames {
    pending: Vec<Pending>,
}

impl Renames {
    /// The pending copy into `dst`'s buffer that a discard's Unmap writing `dst` leaves
    /// bytes of (it wrote past `dst`'s end): to be recorded before that Unmap renames.
    pub(crate) fn uncovered_by(&self, dst: Span) -> Option<Pending> {
        let old = *self.pending.iter().find(|p| p.meets(dst))?;
        let end = |s: Span| s.offset + s.len;
        let covered = dst.offset <= old.dst.offset && end(old.dst) <= end(dst);
        (!covered).then_some(old)
    }

    /// A discard's Unmap: `dst`'s bytes are `src`'s from now on, in place of any pending copy
    /// into the same buffer (record [`Renames::uncovered_by`]'s first).
    pub(crate) fn rename(&mut self, dst: Span, src: Span) {
        let new = Pending { dst, src };
        match self.pending.iter_mut().find(|p| p.meets(dst)) {
            Some(old) => *old = new,
            None => self.pending.push(new),
        }
    }

    /// The bytes a draw reads for `span`: the upload bytes where `span` lies within a renamed
    /// range, else `span` itself (`None`: it reaches bytes of a renamed buffer outside the
    /// renamed range, and the pending copy must be recorded first).
    pub(crate) fn read(&self, span: Span) -> Option<Span> {
        let Some(p) = self.pending.iter().find(|p| p.meets(span)) else {
            return Some(span);
        };
        let end = |s: Span| s.offset + s.len;
        let inside = p.dst.offset <= span.offset && end(span) <= end(p.dst);
        inside.then(|| Span {
            offset: p.src.offset + (span.offset - p.dst.offset),
            len: span.len,
            ..p.src
        })
    }

    /// Takes the pending copy into `span`'s buffer, if any (to be recorded now).
    pub(crate) fn take_meeting(&mut self, span: Span) -> Option<Pending> {
        let at = self.pending.iter().position(|p| p.meets(span))?;
        Some(self.pending.swap_remove(at))
    }

    /// Takes the last pending copy (to be recorded now); `None` once there is none.
    pub(crate) fn pop(&mut self) -> Option<Pending> {
        self.pending.pop()
    }

    /// Forgets every pending copy (the recording is abandoned).
    pub(crate) fn clear(&mut self) {
        self.pending.clear();
    }

    /// Whether any copy is pending.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ash::vk;
    use ash::vk::Handle as _;

    fn span(buffer: u64, offset: u64, len: u64) -> Span {
        Span::upload(vk::Buffer::from_raw(buffer), offset, len)
    }

    #[test]
    fn a_draw_reads_the_upload_bytes_of_a_renamed_range() {
        let mut r = Renames::default();
        r.rename(span(1, 0, 64), span(9, 128, 64));
        assert_eq!(r.read(span(1, 0, 64)), Some(span(9, 128, 64)));
        assert_eq!(
            r.read(span(1, 16, 16)),
            Some(span(9, 144, 16)),
            "a view inside it"
        );
        assert_eq!(
            r.read(span(2, 0, 64)),
            Some(span(2, 0, 64)),
            "another buffer"
        );
        assert_eq!(r.read(span(1, 32, 64)), None, "past the renamed bytes");
    }

    /// A renamed range that starts past its buffer's first byte (the driver's resources start
    /// at byte 0, but the rule is the range's): a view inside it reads the upload bytes at its
    /// offset into the range.
    #[test]
    fn a_view_reads_at_its_offset_into_a_range_that_starts_later() {
        let mut r = Renames::default();
        r.rename(span(1, 32, 32), span(9, 128, 32));
        assert_eq!(r.read(span(1, 40, 8)), Some(span(9, 136, 8)));
        assert_eq!(r.read(span(1, 32, 32)), Some(span(9, 128, 32)));
        assert_eq!(r.read(span(1, 16, 32)), None, "before the renamed bytes");
    }

    #[test]
    fn a_discard_that_covers_the_pending_one_drops_it() {
        let mut r = Renames::default();
        assert_eq!(r.uncovered_by(span(1, 0, 64)), None, "nothing pending");
        r.rename(span(1, 0, 64), span(9, 0, 64));
        assert_eq!(r.uncovered_by(span(1, 0, 64)), None);
        r.rename(span(1, 0, 64), span(9, 64, 64));
        assert_eq!(r.read(span(1, 0, 64)), Some(span(9, 64, 64)));
        // A shorter one leaves the longer copy to record first.
        let first = Pending {
            dst: span(1, 0, 64),
            src: span(9, 64, 64),
        };
        assert_eq!(r.uncovered_by(span(1, 0, 16)), Some(first));
        r.rename(span(1, 0, 16), span(9, 128, 16));
        let last = Pending {
            dst: span(1, 0, 16),
            src: span(9, 128, 16),
        };
        assert_eq!(r.pop(), Some(last));
        assert!(r.is_empty());
    }

    #[test]
    fn a_command_on_the_buffer_takes_its_copy() {
        let mut r = Renames::default();
        r.rename(span(1, 0, 64), span(9, 0, 64));
        r.rename(span(2, 0, 64), span(9, 64, 64));
        assert_eq!(r.take_meeting(span(3, 0, 4)), None);
        assert_eq!(
            r.take_meeting(span(1, 60, 4)).map(|p| p.src),
            Some(span(9, 0, 64))
        );
        assert_eq!(r.take_meeting(span(1, 60, 4)), None, "taken once");
        r.clear();
        assert!(r.is_empty());
    }
}
