//! `diff A B`: the first record where two captures differ.
//!
//! Records are compared in the order a replay makes them (then those written after the
//! last checkpoint, in file order), as `dump` shows them and with the bytes it shows only
//! the length of (an Update's, a Map's, a shader's...): stream, call, arguments and
//! outcome. Not compared:
//! - a context record's `seq` (and a `MapUnmap`'s Unmap `seq`), which says where among the
//!   device's records the call ended: two runs of the same calls on threads of other timing
//!   differ there, and the order a replay derives from them is what is compared;
//! - an object's raw handle bits: a device's generations start from a base of its own, so
//!   two runs name the same object otherwise; objects are compared by their slot and their
//!   slot's life in the capture (`resource#7.2`);
//! - a present's DXGI context, the capturing process's pointer.
//!
//! A record that does not decode is compared by its bytes, `seq` aside. Then how each
//! capture ends (at a checkpoint, cut, damaged).

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use cmdlist::capture::{Frame, DEVICE_STREAM};

use crate::dump::line;
use crate::file::{Capture, End, Frames};
use crate::info::describe_end;
use crate::order::replay_order;
use crate::show::{self, Names};
use crate::{Failure, Out};

/// Records shown on each side of the first difference.
const AROUND: usize = 3;

/// What of a record is compared: its stream and kind, then its line (objects by slot and
/// life) and its byte strings, or, undecodable, its payload but a context record's `seq`.
type Compared = (u32, u16, Result<(String, Vec<u8>), Vec<u8>>);

/// What of record `index` of `side` is compared.
fn compared(side: &Side<'_, '_>, index: usize) -> Compared {
    let f = &side.frames.all[index];
    let what = match side.frames.decode(index) {
        Ok(record) => Ok((
            show::record(&side.names, &record),
            show::byte_strings(&record.call).concat(),
        )),
        Err(_) => Err(match f.stream {
            DEVICE_STREAM => f.payload.to_vec(),
            _ => f.payload.get(8..).unwrap_or(&[]).to_vec(),
        }),
    };
    (f.stream, f.kind, what)
}

/// What of two records differs, in words.
fn what_differs(a: &Frame<'_>, b: &Frame<'_>) -> &'static str {
    if a.stream != b.stream {
        "the stream"
    } else if a.kind != b.kind {
        "the call"
    } else {
        "the arguments or the outcome"
    }
}

/// A capture's records in the order compared.
fn sequence(frames: &Frames<'_>) -> Vec<usize> {
    let mut order = replay_order(frames);
    order.extend(frames.unfinished().map(|f| f.record as usize));
    order
}

/// Whether two ends are the same kind of end.
fn same_end(a: End, b: End) -> bool {
    match (a, b) {
        (End::Cut(x), End::Cut(y)) | (End::Damaged(x), End::Damaged(y)) => x.kind == y.kind,
        (x, y) => x == y,
    }
}

struct Side<'c, 'a> {
    path: &'c str,
    frames: &'c Frames<'a>,
    names: Names,
    order: Vec<usize>,
}

impl Side<'_, '_> {
    fn show(&self, at: usize, out: &mut Out<'_>) -> Result<(), Failure> {
        writeln!(out, "{}:", self.path)?;
        let from = at.saturating_sub(AROUND);
        let to = (at + AROUND + 1).min(self.order.len());
        for i in from..to {
            let mark = if i == at { ">" } else { " " };
            writeln!(
                out,
                "{mark} {}",
                line(self.frames, &self.names, self.order[i])
            )?;
        }
        if at >= self.order.len() {
            writeln!(
                out,
                "> (no more records: {})",
                describe_end(self.frames.end())
            )?;
        }
        Ok(())
    }
}

/// Compares the captures `a` and `b`.
pub fn run(a: &Path, b: &Path, out: &mut Out<'_>) -> Result<ExitCode, Failure> {
    let (ca, cb) = (Capture::read(a)?, Capture::read(b)?);
    let (fa, fb) = (ca.frames()?, cb.frames()?);
    let side = |path, frames| Side {
        path,
        frames,
        names: Names::new(frames.objects()),
        order: sequence(frames),
    };
    let (sa, sb) = (side(&ca.path, &fa), side(&cb.path, &fb));
    let common = sa.order.len().min(sb.order.len());
    let first = (0..common).find(|&i| compared(&sa, sa.order[i]) != compared(&sb, sb.order[i]));
    let at = match first {
        Some(at) => at,
        None if sa.order.len() == sb.order.len() => {
            let (ea, eb) = (fa.end(), fb.end());
            if same_end(ea, eb) {
                writeln!(
                    out,
                    "same: {common} records (seq and handle bits aside), both {}",
                    describe_end(ea)
                )?;
                return Ok(ExitCode::SUCCESS);
            }
            writeln!(
                out,
                "the same {common} records (seq and handle bits aside), but they end otherwise:"
            )?;
            writeln!(out, "{}: {}", sa.path, describe_end(ea))?;
            writeln!(out, "{}: {}", sb.path, describe_end(eb))?;
            return Ok(ExitCode::from(1));
        }
        None => common,
    };
    match (sa.order.get(at), sb.order.get(at)) {
        (Some(&ra), Some(&rb)) => writeln!(
            out,
            "differ at the replay's record {at}: {} record {ra}, {} record {rb} ({} differs)",
            sa.path,
            sb.path,
            what_differs(&fa.all[ra], &fb.all[rb])
        )?,
        _ => writeln!(
            out,
            "differ at the replay's record {at}: {} has {} records, {} has {}",
            sa.path,
            sa.order.len(),
            sb.path,
            sb.order.len()
        )?,
    }
    sa.show(at, out)?;
    sb.show(at, out)?;
    Ok(ExitCode::from(1))
}
