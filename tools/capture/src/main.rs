//! `cmdlist-capture`: reads the capture files `cmdlist::capture` writes (docs/CAPTURE.md).
//!
//! - `info FILE`: what the capture holds and how it ends.
//! - `dump FILE`: its records, one a line, in the order a replay makes them.
//! - `stats FILE --png OUT`: records per context per frame, Map bytes per frame, list sizes,
//!   as a chart and as text.
//! - `replay FILE`: the capture replayed through the soft driver, up to any record.
//! - `diff A B`: the first record where two captures differ.
//!
//! Exit status: 0 done (`diff`: the same), 1 `diff`: they differ, `replay`: a call answered
//! otherwise than when captured, 2 a file that cannot be read, or bad arguments. Whatever the
//! bytes, an error names the file, the record and the reason; never a panic.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

mod canvas;
mod diff;
mod dump;
mod file;
mod info;
mod order;
mod replay;
mod show;
mod stats;

/// Reads cmdlist capture files (docs/CAPTURE.md): a summary, the records, charts of their
/// frames, a replay through the soft driver, the first record two captures differ at.
///
/// Exit status: 0 done (diff: the same); 1 diff: the captures differ, replay: a call
/// answered otherwise than captured; 2 a file that cannot be read, or bad arguments.
#[derive(Parser)]
#[command(name = "cmdlist-capture", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// What a capture holds and how it ends.
    ///
    /// Format version, records and frames, each context's records, lists made and executed,
    /// presents, bytes written through Maps, and how the capture ends: at a checkpoint, cut
    /// (a crash's) or damaged, and where.
    Info {
        /// The capture.
        file: PathBuf,
    },
    /// The records, one a line, in the order a replay makes them.
    ///
    /// The order: the device's records in order, before device record i every context record whose seq is at most i (the
    /// deferred contexts' first, then the immediate context's), a list's Finish before an
    /// execute of it. Then the records written after the last checkpoint, in file order,
    /// and how the capture ends. A line: record index, stream, seq, kind, arguments
    /// (objects by their captured handles: resource#7 is slot 7), outcome.
    Dump {
        /// The capture.
        file: PathBuf,
        /// Only this stream's records: 0 the device's, 1 the immediate context's, 2 on the
        /// deferred contexts'.
        #[arg(long, value_name = "N")]
        context: Option<u32>,
        /// Only records whose index is in A..B (A.., ..B and A..=B too; or one index).
        #[arg(long, value_name = "A..B", value_parser = dump::parse_range)]
        records: Option<(u64, u64)>,
        /// Only records of these kinds (comma-separated, any case: map,mapunmap,present).
        #[arg(long, value_name = "KIND")]
        kind: Option<String>,
        /// The bytes written through each Map (Written and MapUnmap records), in hex.
        #[arg(long)]
        bytes: bool,
    },
    /// Records and Map bytes per frame, list sizes: printed, and drawn as a PNG.
    ///
    /// Records per context per frame (a frame ends at a Present, or at an EndFrame in a
    /// capture without presents), bytes written through Maps per frame, and each list's
    /// records (a deferred context's records up to its Finish): printed, and drawn.
    Stats {
        /// The capture.
        file: PathBuf,
        /// Where to write the chart (a PNG 800 pixels wide).
        #[arg(long, value_name = "OUT")]
        png: Option<PathBuf>,
    },
    /// Replays the capture through the soft driver, up to any record.
    ///
    /// Every call checked to answer what it answered when captured
    /// (cmdlist::capture::replay_with); exit 1 at the first that answers otherwise.
    Replay {
        /// The capture.
        file: PathBuf,
        /// The soft driver's list mode.
        #[arg(long, value_enum, default_value_t = Mode::DriverBuilt)]
        mode: Mode,
        /// Where the deferred contexts run: all on one thread, or each on its own.
        #[arg(long, value_enum, default_value_t = Threads::One)]
        threads: Threads,
        /// The soft GPU's pace: poll-lag (a buffer completes two polls after it is
        /// submitted, as the main job's) or immediate (as the tests').
        #[arg(long, value_enum, default_value_t = Pace::PollLag)]
        gpu: Pace,
        /// exact: every call answers as captured; any: polls that found the GPU busy are
        /// left out (for a capture made on a GPU of another pace).
        #[arg(long, value_enum, default_value_t = replay::TimingArg::Exact)]
        timing: replay::TimingArg,
        /// Stop after this record (its index, as dump shows it): the records a replay makes
        /// up to it, and no others, are replayed.
        #[arg(long, value_name = "RECORD")]
        until: Option<u64>,
        /// The last presented surface as a PNG.
        #[arg(long, value_name = "OUT")]
        png: Option<PathBuf>,
        /// Refuse a capture whose creates ask for more bytes than this, in all.
        #[arg(long, value_name = "BYTES", default_value_t = 1 << 30)]
        max_bytes: u64,
    },
    /// The first record where two captures differ.
    ///
    /// Compared in the order a replay makes them: each record's
    /// stream, kind and payload, but a context record's seq (where a call ended among the
    /// device's records, which threads' timing moves), with a few records around it. Then
    /// how each ends. Exit 0: the same; 1: they differ.
    Diff {
        /// One capture.
        a: PathBuf,
        /// The other.
        b: PathBuf,
    },
}

/// The soft driver's list mode (`cmdlist::ListMode`).
#[derive(Clone, Copy, ValueEnum)]
pub enum Mode {
    /// The engine records each list and replays it at execute.
    Replayed,
    /// The driver builds each list on its recording thread.
    DriverBuilt,
    /// The engine emulates deferred contexts for a driver without command lists.
    Emulated,
}

/// Where a replay's deferred contexts run.
#[derive(Clone, Copy, ValueEnum)]
pub enum Threads {
    /// All on the replaying thread.
    One,
    /// Each on a thread of its own.
    PerContext,
}

/// The soft GPU's pace.
#[derive(Clone, Copy, ValueEnum)]
pub enum Pace {
    /// A submitted buffer completes two polls later.
    PollLag,
    /// A submitted buffer completes at once.
    Immediate,
}

/// Why a command failed: the message names the file, the record and the reason. Empty:
/// the output's reader stopped reading (`| head`), which is no failure.
#[derive(Debug)]
pub struct Failure(pub String);

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::BrokenPipe => Failure(String::new()),
            _ => Failure(format!("cannot write the output: {e}")),
        }
    }
}

/// Standard output, buffered.
pub type Out<'a> = io::BufWriter<io::StdoutLock<'a>>;

fn run(cli: Cli, out: &mut Out<'_>) -> Result<ExitCode, Failure> {
    match cli.command {
        Command::Info { file } => info::run(&file, out),
        Command::Dump {
            file,
            context,
            records,
            kind,
            bytes,
        } => {
            let filter = dump::Filter::new(context, records, kind.as_deref())?;
            dump::run(&file, &filter, bytes, out)
        }
        Command::Stats { file, png } => stats::run(&file, png.as_deref(), out),
        Command::Replay {
            file,
            mode,
            threads,
            gpu,
            timing,
            until,
            png,
            max_bytes,
        } => {
            let options = replay::Options {
                mode,
                threads,
                gpu,
                timing,
                until,
                png,
                max_bytes,
            };
            replay::run(&file, &options, out)
        }
        Command::Diff { a, b } => diff::run(&a, &b, out),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let result = run(cli, &mut out);
    let flushed = out.flush();
    match (result, flushed) {
        (Ok(code), Ok(())) => code,
        // A reader that stopped reading (`| head`) is not a failure.
        (_, Err(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        (Err(Failure(message)), _) if message.is_empty() => ExitCode::SUCCESS,
        (Err(Failure(message)), _) => {
            eprintln!("cmdlist-capture: {message}");
            ExitCode::from(2)
        }
        (Ok(_), Err(e)) => {
            eprintln!("cmdlist-capture: cannot write the output: {e}");
            ExitCode::from(2)
        }
    }
}
