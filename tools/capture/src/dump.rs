//! `dump FILE`: one line per record, in the order a replay makes them.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use cmdlist::capture::{Call, Kind, DEVICE_STREAM};

use crate::file::{kind_name, seq_of, stream_name, Capture, Frames};
use crate::info::describe_end;
use crate::order::replay_order;
use crate::show::{self, Names};
use crate::{Failure, Out};

/// Which records to print.
pub struct Filter {
    context: Option<u32>,
    records: Option<(u64, u64)>,
    kinds: Option<Vec<u16>>,
}

impl Filter {
    /// A filter of the command line's options; a kind no record has is an error.
    pub fn new(
        context: Option<u32>,
        records: Option<(u64, u64)>,
        kinds: Option<&str>,
    ) -> Result<Filter, Failure> {
        let kinds = match kinds {
            None => None,
            Some(list) => Some(
                list.split(',')
                    .map(|name| kind_of_name(name.trim()))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        Ok(Filter {
            context,
            records,
            kinds,
        })
    }

    fn keeps(&self, stream: u32, record: u64, kind: u16) -> bool {
        self.context.is_none_or(|c| c == stream)
            && self.records.is_none_or(|(a, b)| (a..b).contains(&record))
            && self.kinds.as_ref().is_none_or(|k| k.contains(&kind))
    }
}

/// The kind code a name (any case) stands for.
fn kind_of_name(name: &str) -> Result<u16, Failure> {
    let known: Vec<String> = (0..=u16::from(u8::MAX))
        .filter_map(Kind::of_code)
        .map(|k| format!("{k:?}"))
        .collect();
    (0..=u16::from(u8::MAX))
        .find(|&code| {
            Kind::of_code(code).is_some_and(|k| format!("{k:?}").eq_ignore_ascii_case(name))
        })
        .ok_or_else(|| {
            Failure(format!(
                "--kind {name}: no record kind has that name ({})",
                known.join(", ")
            ))
        })
}

/// `A..B`, `A..`, `..B`, `A..=B` or `A`, as the half-open range of record indices it names.
pub fn parse_range(text: &str) -> Result<(u64, u64), String> {
    let number = |s: &str, default: u64| match s.trim() {
        "" => Ok(default),
        s => s.parse::<u64>().map_err(|e| format!("{s:?}: {e}")),
    };
    let (a, b) = match text.split_once("..") {
        None => {
            let a = number(text, 0)?;
            (a, a.saturating_add(1))
        }
        Some((a, b)) => match b.strip_prefix('=') {
            Some(b) => (number(a, 0)?, number(b, u64::MAX - 1)?.saturating_add(1)),
            None => (number(a, 0)?, number(b, u64::MAX)?),
        },
    };
    Ok((a, b))
}

/// Record `index`'s line: its index, stream, seq (a device record's index in its stream),
/// kind, arguments and outcome; a record that does not decode says why.
pub fn line(frames: &Frames<'_>, names: &Names, index: usize) -> String {
    let f = &frames.all[index];
    let seq = match f.stream {
        DEVICE_STREAM => frames.device_index[index],
        _ => seq_of(f),
    };
    let body = match frames.decode(index) {
        Ok(record) => show::record(names, &record),
        Err(why) => format!("{} (undecodable: {why})", kind_name(f.kind)),
    };
    format!(
        "{:>7}  {:<10} seq {seq:>6}  {body}",
        f.record,
        stream_name(f.stream)
    )
}

/// The bytes written through a Map, where record `index` holds them.
fn map_bytes<'a>(frames: &Frames<'a>, index: usize) -> Option<&'a [u8]> {
    match frames.decode(index).ok()?.call {
        Call::Written { bytes, .. } => Some(bytes),
        Call::MapUnmap { written, .. } => Some(written),
        _ => None,
    }
}

/// Prints the records of `path` that `filter` keeps.
pub fn run(
    path: &Path,
    filter: &Filter,
    bytes: bool,
    out: &mut Out<'_>,
) -> Result<ExitCode, Failure> {
    let capture = Capture::read(path)?;
    let frames = capture.frames()?;
    let names = Names::new(frames.objects());
    let print = |out: &mut Out<'_>, index: usize| -> Result<(), Failure> {
        let f = &frames.all[index];
        if !filter.keeps(f.stream, f.record, f.kind) {
            return Ok(());
        }
        writeln!(out, "{}", line(&frames, &names, index))?;
        if bytes {
            if let Some(b) = map_bytes(&frames, index) {
                write!(out, "{}", show::hex(b))?;
            }
        }
        Ok(())
    };
    writeln!(
        out,
        "# {}: records in the order a replay makes them (record, stream, seq, call -> outcome)",
        capture.path
    )?;
    for index in replay_order(&frames) {
        print(out, index)?;
    }
    let unfinished: Vec<usize> = frames.unfinished().map(|f| f.record as usize).collect();
    if let Some(&first) = unfinished.first() {
        writeln!(
            out,
            "# records from {first} on were written after the last checkpoint: a replay stops \
             before them (file order)"
        )?;
    }
    for index in unfinished {
        print(out, index)?;
    }
    let end = frames.end();
    writeln!(out, "# end: {}", describe_end(end))?;
    Ok(ExitCode::SUCCESS)
}
