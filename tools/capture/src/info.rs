//! `info FILE`: what a capture holds and how it ends.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use cmdlist::capture::{Call, Kind, Outcome, CHECKPOINT_STREAM, VERSION};

use crate::file::{kind_name, stream_name, Capture, End, Frames};
use crate::{Failure, Out};

/// Counts over a capture's records.
#[derive(Default)]
pub struct Summary {
    /// Records (checkpoints not counted).
    pub records: u64,
    /// Checkpoints.
    pub checkpoints: u64,
    /// Records per stream.
    pub per_stream: BTreeMap<u32, u64>,
    /// Lists made per deferred stream (Finish records that succeeded).
    pub lists_made: BTreeMap<u32, u64>,
    /// Executes that succeeded.
    pub executed: u64,
    /// Presents.
    pub presents: u64,
    /// End-of-frame calls.
    pub end_frames: u64,
    /// Bytes written through Maps (Written and MapUnmap records).
    pub map_bytes: u64,
    /// Records holding Map bytes.
    pub map_records: u64,
    /// Records that do not decode: how many, and the first with why.
    pub undecodable: (u64, Option<(u64, String)>),
}

impl Summary {
    /// The counts of every readable record of `frames`.
    pub fn of(frames: &Frames<'_>) -> Summary {
        let mut s = Summary::default();
        for f in &frames.all {
            if f.stream == CHECKPOINT_STREAM {
                s.checkpoints += 1;
                continue;
            }
            s.records += 1;
            *s.per_stream.entry(f.stream).or_default() += 1;
            let record = match frames.decode(f.record as usize) {
                Ok(record) => record,
                Err(why) => {
                    s.undecodable.0 += 1;
                    s.undecodable.1.get_or_insert((f.record, why));
                    continue;
                }
            };
            let ok = record.outcome == Outcome::Ok;
            match record.call {
                Call::Finish { .. } if ok => *s.lists_made.entry(f.stream).or_default() += 1,
                Call::Execute { .. } if ok => s.executed += 1,
                Call::Present(_) => s.presents += 1,
                Call::EndFrame => s.end_frames += 1,
                Call::Written { bytes, .. } => {
                    s.map_bytes += bytes.len() as u64;
                    s.map_records += 1;
                }
                Call::MapUnmap { written, .. } => {
                    s.map_bytes += written.len() as u64;
                    s.map_records += 1;
                }
                _ => {}
            }
        }
        s
    }

    /// Frames: presents, else ends of frame, else one (the whole capture).
    pub fn frames(&self) -> u64 {
        match (self.presents, self.end_frames) {
            (0, 0) => u64::from(self.records > 0),
            (0, n) | (n, _) => n,
        }
    }
}

/// How the capture ends, in words.
pub fn describe_end(end: End) -> String {
    match end {
        End::Checkpoint => "ends at a checkpoint: every record replays".into(),
        End::Empty => "holds no record".into(),
        End::Cut(e) => format!("cut (a crash's): {e}"),
        End::Damaged(e) => format!(
            "damaged: {e}; a replay stops at the last checkpoint before record {}",
            e.record
        ),
    }
}

/// Prints the summary of `path`.
pub fn run(path: &Path, out: &mut Out<'_>) -> Result<ExitCode, Failure> {
    let capture = Capture::read(path)?;
    let frames = capture.frames()?;
    let s = Summary::of(&frames);
    writeln!(
        out,
        "capture: {} ({} bytes)",
        capture.path,
        capture.bytes.len()
    )?;
    writeln!(out, "format version: {VERSION}")?;
    writeln!(
        out,
        "records: {} ({} checkpoints besides), frames: {} ({})",
        s.records,
        s.checkpoints,
        s.frames(),
        match (s.presents, s.end_frames) {
            (0, 0) => "no present nor end of frame: one",
            (0, _) => "ends of frame",
            _ => "presents",
        }
    )?;
    writeln!(out, "contexts:")?;
    for (&stream, &n) in &s.per_stream {
        let lists = match s.lists_made.get(&stream) {
            Some(l) => format!(", {l} lists finished"),
            None => String::new(),
        };
        writeln!(
            out,
            "  {:<10} stream {stream:>3}: {n} records{lists}",
            stream_name(stream)
        )?;
    }
    let made: u64 = s.lists_made.values().sum();
    writeln!(out, "lists: {made} made, {} executed", s.executed)?;
    writeln!(out, "presents: {}", s.presents)?;
    writeln!(
        out,
        "written through Maps: {} bytes in {} records ({} and {})",
        s.map_bytes,
        s.map_records,
        kind_name(Kind::Written as u16),
        kind_name(Kind::MapUnmap as u16)
    )?;
    if let (n @ 1.., Some((record, why))) = &s.undecodable {
        writeln!(
            out,
            "undecodable: {n} records, the first record {record}: {why}"
        )?;
    }
    writeln!(out, "end: {}", describe_end(frames.end()))?;
    Ok(ExitCode::SUCCESS)
}
