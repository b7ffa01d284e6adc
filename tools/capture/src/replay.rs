//! `replay FILE`: the capture replayed through the soft driver, set up as the main job's
//! (`examples/frame`), up to any record; the last presented surface as a PNG.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::ValueEnum;
use cmdlist::capture::{
    self, write_header, Call, ReplayErrorKind, ReplayOptions, ReplayThreads, StreamBuffer, Timing,
    CHECKPOINT_STREAM,
};
use cmdlist::soft::{self, Gpu, SoftConfig};
use cmdlist::{Clock, DeviceConfig, ListMode, ObjectDesc, ResourceDesc};

use crate::file::{stream_name, Capture, Frames};
use crate::order::replay_order;
use crate::{Failure, Mode, Out, Pace, Threads};

/// How the calls that poll the GPU replay (`cmdlist::capture::Timing`).
#[derive(Clone, Copy, ValueEnum)]
pub enum TimingArg {
    /// Every call answers as captured.
    Exact,
    /// Polls that found the GPU busy are left out; a Map that succeeded waits.
    Any,
}

/// The command line's options.
pub struct Options {
    /// The list mode.
    pub mode: Mode,
    /// The deferred contexts' threads.
    pub threads: Threads,
    /// The soft GPU's pace.
    pub gpu: Pace,
    /// The polls' timing.
    pub timing: TimingArg,
    /// The record to stop after.
    pub until: Option<u64>,
    /// Where to write the last presented surface.
    pub png: Option<PathBuf>,
    /// The most bytes the capture's creates may ask for.
    pub max_bytes: u64,
}

/// The records to replay, in file order (indices into `frames.all`): every one a replay
/// makes, or with `until`, those it makes up to that record.
fn chosen(frames: &Frames<'_>, path: &str, until: Option<u64>) -> Result<Vec<usize>, Failure> {
    let order = replay_order(frames);
    let Some(until) = until else {
        return Ok(frames.replayed().map(|f| f.record as usize).collect());
    };
    let Some(at) = order.iter().position(|&r| r as u64 == until) else {
        let why = match frames.all.get(until as usize) {
            None => format!("the capture has {} records", frames.all.len()),
            Some(f) if f.stream == CHECKPOINT_STREAM => "it is a checkpoint".into(),
            Some(_) => "it comes after the last checkpoint: a replay never reaches it".into(),
        };
        return Err(Failure(format!("{path}: --until {until}: {why}")));
    };
    let mut kept = order[..=at].to_vec();
    kept.sort_unstable();
    Ok(kept)
}

/// A capture of `frames`' records `kept` (in file order), then a checkpoint.
fn reframed(frames: &Frames<'_>, kept: &[usize]) -> Vec<u8> {
    let mut file = Vec::new();
    write_header(&mut file).expect("a Vec takes the header");
    for &index in kept {
        let f = &frames.all[index];
        let mut stream = StreamBuffer::new(f.stream);
        stream.push(f.kind, f.payload);
        stream.drain_to(&mut file).expect("a Vec takes the frames");
    }
    let mut end = StreamBuffer::new(CHECKPOINT_STREAM);
    end.push(0, &[]);
    end.drain_to(&mut file).expect("a Vec takes the frames");
    file
}

/// The resource descriptions the records make, by the capture's handle bits.
fn descriptions(frames: &Frames<'_>, kept: &[usize]) -> HashMap<u64, ResourceDesc> {
    let mut made = HashMap::new();
    for &index in kept {
        match frames.decode(index).map(|r| r.call) {
            Ok(Call::Create {
                desc: ObjectDesc::Resource(desc),
                made: bits,
            })
            | Ok(Call::CreatePrimary { desc, made: bits }) => {
                made.insert(bits, desc);
            }
            _ => {}
        }
    }
    made
}

/// The captured handle of the last surface presented among `kept`.
fn last_present(frames: &Frames<'_>, kept: &[usize]) -> Option<u64> {
    kept.iter()
        .rev()
        .find_map(|&index| match frames.decode(index) {
            Ok(record) => match record.call {
                Call::Present(args) => Some(args.src.to_bits()),
                _ => None,
            },
            Err(_) => None,
        })
}

/// Writes RGBA bytes as a PNG.
pub fn write_png(path: &Path, width: u32, height: u32, rgba: &[u8]) -> Result<(), Failure> {
    let cannot =
        |e: &dyn std::fmt::Display| Failure(format!("{}: cannot write: {e}", path.display()));
    let file = std::fs::File::create(path).map_err(|e| cannot(&e))?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), width, height);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| cannot(&e))?;
    writer.write_image_data(rgba).map_err(|e| cannot(&e))?;
    writer.finish().map_err(|e| cannot(&e))
}

/// Replays `path` as `options` say.
pub fn run(path: &Path, options: &Options, out: &mut Out<'_>) -> Result<ExitCode, Failure> {
    let capture = Capture::read(path)?;
    let frames = capture.frames()?;
    let name = &capture.path;
    let kept = chosen(&frames, name, options.until)?;
    let made = descriptions(&frames, &kept);
    let asked = made
        .values()
        .fold(0u64, |sum, d| sum.saturating_add(d.byte_size));
    if asked > options.max_bytes {
        return Err(Failure(format!(
            "{name}: its creates ask for {asked} bytes, more than --max-bytes {}",
            options.max_bytes
        )));
    }
    let file = match options.until {
        Some(_) => reframed(&frames, &kept),
        None => capture.bytes.clone(),
    };
    // With --until, the replay's records are `kept`'s; else the file's (checkpoints
    // included), whose indices are the file's already.
    let original = |record: u64| match options.until {
        Some(_) => kept.get(record as usize).map_or(record, |&r| r as u64),
        None => record,
    };
    let mode = match options.mode {
        Mode::Replayed => ListMode::Replayed,
        Mode::DriverBuilt => ListMode::DriverBuilt,
        Mode::Emulated => ListMode::Emulated,
    };
    let gpu = match options.gpu {
        Pace::PollLag => Gpu::PollLag(2),
        Pace::Immediate => Gpu::Immediate,
    };
    let config = SoftConfig {
        gpu,
        trace: false,
        ..SoftConfig::default()
    }
    .with_list_mode(mode);
    let device_config = DeviceConfig::default()
        .with_retire_clock(Clock::Completed)
        .with_list_clock(Clock::Completed);
    let (device, mut ic, world) = soft::device(config, device_config)
        .map_err(|e| Failure(format!("cannot make a soft device: {e:?}")))?;
    let mut replay = ReplayOptions::default();
    replay = replay.with_threads(match options.threads {
        Threads::One => ReplayThreads::One,
        Threads::PerContext => ReplayThreads::PerContext,
    });
    replay = replay.with_timing(match options.timing {
        TimingArg::Exact => Timing::Exact,
        TimingArg::Any => Timing::Any,
    });
    let result = capture::replay_with(&file, &device, &mut ic, replay);
    let mut status = ExitCode::SUCCESS;
    match &result {
        Ok(report) => {
            let upto = match options.until {
                Some(r) => format!(" (up to record {r})"),
                None => String::new(),
            };
            let presents = match report.presents_checked {
                0 => String::new(),
                1 => "; the presented picture found the same as captured".into(),
                n => format!("; {n} presented pictures found the same as captured"),
            };
            writeln!(
                out,
                "replay: {} records of {name}{upto} through {mode:?} lists, every call \
                 answering as captured{presents}",
                report.records
            )?;
            if let Some(tail) = report.tail {
                writeln!(
                    out,
                    "replay: the capture ends early: {}",
                    crate::info::describe_end(match tail.kind {
                        capture::CaptureErrorKind::Unfinished
                        | capture::CaptureErrorKind::TornTail => {
                            crate::file::End::Cut(tail)
                        }
                        _ => crate::file::End::Damaged(tail),
                    })
                )?;
            }
        }
        Err(e) if matches!(e.kind, ReplayErrorKind::NotACapture(_)) => {
            return Err(Failure(format!("{name}: {e}")));
        }
        Err(e) => {
            let record = original(e.record);
            let mut message = e.to_string();
            if let Some(rest) = message.split_once(": ").map(|(_, rest)| rest.to_string()) {
                message = rest;
            }
            writeln!(
                out,
                "replay: {name}: stopped at record {record} ({}): {message}",
                stream_name(e.stream)
            )?;
            status = ExitCode::from(1);
        }
    }
    drop(result);
    if let Some(png) = &options.png {
        let screen = world.screen().ok_or_else(|| {
            Failure(format!(
                "{name}: nothing was presented: no picture for {}",
                png.display()
            ))
        })?;
        let texture = last_present(&frames, &kept)
            .and_then(|bits| made.get(&bits))
            .and_then(|d| d.texture);
        let Some(t) =
            texture.filter(|t| screen.len() as u64 == 4 * u64::from(t.width) * u64::from(t.height))
        else {
            return Err(Failure(format!(
                "{name}: the last presented surface is not a texture of 4 bytes a pixel: no \
                 picture for {}",
                png.display()
            )));
        };
        // DXGI's B8G8R8A8 formats (UNORM and its sRGB twin) keep blue first.
        let bgra = matches!(t.format, 87 | 91);
        let rgba: Vec<u8> = screen
            .chunks_exact(4)
            .flat_map(|p| match bgra {
                true => [p[2], p[1], p[0], 255],
                false => [p[0], p[1], p[2], 255],
            })
            .collect();
        write_png(png, t.width, t.height, &rgba)?;
        writeln!(
            out,
            "replay: the last presented surface ({}x{}) in {}",
            t.width,
            t.height,
            png.display()
        )?;
    }
    if !ic.device().is_removed() {
        let _ = ic.destroy_device();
    }
    let violations = world.check_after_device_destroyed();
    if !violations.is_empty() {
        writeln!(
            out,
            "replay: the soft kernel saw rules broken: {violations:?}"
        )?;
        status = ExitCode::from(1);
    }
    Ok(status)
}
