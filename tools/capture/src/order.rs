//! The order a replay makes a capture's calls in (`cmdlist::capture::replay`'s, worked out
//! from the records alone): the device's records in their order; before device record `i`,
//! every context record whose `seq` is at most `i`, each stream in its own order, the
//! deferred contexts' streams first (by number), then the immediate context's; an execute
//! first finishes the list it names, replaying that list's stream up to its Finish.
//!
//! A Map and its Unmap kept as one record (`MapUnmap`) replay in two halves: the record is
//! listed at its Map, and its stream waits for the Unmap's `seq` before going on.

use std::collections::{BTreeMap, HashSet};

use cmdlist::capture::{Frame, Kind, ListId, DEVICE_STREAM, IMMEDIATE_STREAM};

use crate::file::{seq_of, Frames};

/// How many streams deep the replay goes to finish the lists executes name.
const MAX_NESTING: usize = 64;

struct Stream {
    /// The stream's records, as indices into the capture's frames.
    records: Vec<usize>,
    next: usize,
    finished: u64,
    unmap_due: bool,
}

struct Walk<'f, 'a> {
    frames: &'f [Frame<'a>],
    streams: BTreeMap<u32, Stream>,
    lists: HashSet<ListId>,
    advancing: Vec<u32>,
    order: Vec<usize>,
}

/// A `MapUnmap` record's Unmap `seq`: its payload's last 9 bytes but one.
fn unmap_seq_of(frame: &Frame<'_>) -> u64 {
    let p = frame.payload;
    match p.len().checked_sub(9).and_then(|at| p.get(at..at + 8)) {
        Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
        None => 0,
    }
}

/// The list an execute names: after its `seq` (8 bytes) and outcome (1), the stream (4)
/// and the finish count (8).
fn executed_list(frame: &Frame<'_>) -> Option<ListId> {
    let p = frame.payload;
    Some(ListId {
        stream: u32::from_le_bytes(p.get(9..13)?.try_into().ok()?),
        finish: u64::from_le_bytes(p.get(13..21)?.try_into().ok()?),
    })
}

/// The records a replay makes (those before the last checkpoint), as indices into
/// `frames.all`, in the order it makes them.
pub fn replay_order(frames: &Frames<'_>) -> Vec<usize> {
    let mut device = Vec::new();
    let mut streams: BTreeMap<u32, Stream> = BTreeMap::new();
    for f in frames.replayed() {
        match f.stream {
            DEVICE_STREAM => device.push(f.record as usize),
            s => streams
                .entry(s)
                .or_insert_with(|| Stream {
                    records: Vec::new(),
                    next: 0,
                    finished: 0,
                    unmap_due: false,
                })
                .records
                .push(f.record as usize),
        }
    }
    let mut walk = Walk {
        frames: &frames.all,
        streams,
        lists: HashSet::new(),
        advancing: Vec::new(),
        order: Vec::new(),
    };
    for (i, &record) in device.iter().enumerate() {
        walk.advance_all(i as u64);
        walk.order.push(record);
        let f = &walk.frames[record];
        if f.kind == Kind::DropList as u16 {
            if let Some(list) = dropped_list(f) {
                walk.lists.remove(&list);
            }
        }
    }
    walk.advance_all(u64::MAX);
    walk.order
}

/// The list a device record drops: after its outcome (1 byte), the stream and the count.
fn dropped_list(frame: &Frame<'_>) -> Option<ListId> {
    let p = frame.payload;
    Some(ListId {
        stream: u32::from_le_bytes(p.get(1..5)?.try_into().ok()?),
        finish: u64::from_le_bytes(p.get(5..13)?.try_into().ok()?),
    })
}

impl Walk<'_, '_> {
    fn advance_all(&mut self, bound: u64) {
        let deferred: Vec<u32> = self
            .streams
            .keys()
            .copied()
            .filter(|&s| s != IMMEDIATE_STREAM)
            .collect();
        for stream in deferred {
            self.advance(stream, bound, None);
        }
        self.advance(IMMEDIATE_STREAM, bound, None);
    }

    fn advance(&mut self, stream: u32, bound: u64, until_finish: Option<u64>) {
        self.advancing.push(stream);
        while let Some(s) = self.streams.get(&stream) {
            if until_finish.is_some_and(|n| s.finished > n) {
                break;
            }
            let Some(&record) = s.records.get(s.next) else {
                break;
            };
            let frame = self.frames[record];
            let due = match s.unmap_due {
                true => unmap_seq_of(&frame),
                false => seq_of(&frame),
            };
            if until_finish.is_none() && due > bound {
                break;
            }
            let s = self.streams.get_mut(&stream).expect("the stream is there");
            if frame.kind == Kind::MapUnmap as u16 {
                // Listed at its Map; the stream goes on after its Unmap.
                if !s.unmap_due {
                    self.order.push(record);
                }
                s.unmap_due = !s.unmap_due;
                s.next += usize::from(!s.unmap_due);
                continue;
            }
            s.next += 1;
            if frame.kind == Kind::Execute as u16 {
                if let Some(list) = executed_list(&frame) {
                    self.ensure_list(list);
                }
            }
            self.order.push(record);
            let succeeded = frame.payload.get(8) == Some(&0);
            if frame.kind == Kind::Finish as u16 && succeeded {
                let s = self.streams.get_mut(&stream).expect("the stream is there");
                self.lists.insert(ListId {
                    stream,
                    finish: s.finished,
                });
                s.finished += 1;
            }
        }
        self.advancing.pop();
    }

    /// Replays `list`'s stream up to its Finish, unless it is finished already (or its
    /// stream is being replayed, or nested too deep: the replay stops there).
    fn ensure_list(&mut self, list: ListId) {
        if self.lists.contains(&list)
            || self.advancing.contains(&list.stream)
            || self.advancing.len() >= MAX_NESTING
        {
            return;
        }
        self.advance(list.stream, u64::MAX, Some(list.finish));
    }
}
