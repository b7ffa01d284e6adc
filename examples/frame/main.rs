//! # frame: a multithreaded renderer over the soft driver
//!
//! How the pieces of the API fit together over a few frames, for a driver engineer.
//!
//! * **Setup.** A [`Device`] and its immediate context (IC) over the soft reference driver,
//!   with [`Clock::Completed`] (kernel memory is deallocated only once the GPU is done with
//!   it) and a GPU whose fence completes two polls after a submit (`Gpu::PollLag(2)`). The
//!   GPU reads command-list memory too, so the driver's list clock is also
//!   [`Clock::Completed`]: a destroyed list's memory is reused only once the buffer that
//!   executed it has completed. Per worker: a target resource with a render-target and a
//!   shader-resource view of it, a dynamic constant buffer (its constants ring) and a few
//!   small staging buffers; one shared back buffer.
//! * **Each frame.** `WORKERS` threads each drive their own long-lived [`DeferredContext`]
//!   (created once, lent to its thread every frame) and record the frame's commands: its
//!   constants through a ring (a Map(DISCARD), then Map(NO_OVERWRITE) appends, each copy
//!   naming its stretch), updates, fills, copies, clears through views, binds. The first
//!   use of a view opens its resource's context-local handle before its own (R-H1..R-H3);
//!   `finish` closes them all and hands back a command list (R-C1). Meanwhile one more
//!   thread creates and destroys short-lived objects (free-threaded Create/Destroy, R-F1),
//!   then destroys the frame's upload buffer while the finished lists still use it: its
//!   destruction is deferred (R-D1). The IC executes the lists in worker order (each leaves
//!   it in clear-state, R-C3), drops them and flushes: the buffer is submitted and the
//!   deferred destructions run (R-D2); deallocations wait for the fence.
//! * **The picture (R-X1, R-X5, R-X6).** Each worker also paints its share of the tiles of a
//!   `CANVAS_W`×`CANVAS_H` canvas (`R8G8B8A8_UNORM_SRGB`), one command list per tile, in
//!   the worker's colour (yellow, red, blue: which thread recorded what). After executing
//!   every list, the IC draws a strip on each tile, a cell per frame since the warm-up, white
//!   where `finish` made that frame's list of the tile from recycled memory, black where it
//!   made it from fresh memory. Then it Blts the canvas into the swap chain's current back buffer
//!   with a format conversion and a 2x stretch to the screen format (`B8G8R8A8_UNORM`),
//!   presents it (the Present point: amortised processing is never starved for a frame,
//!   R-A1), and rotates the two back buffers' identities, so the next frame renders into
//!   the other allocation through the same handle. A separate thread reads the frame
//!   statistics the present published ([`cmdlist::Device::frame_stats`]) and prints the
//!   frame's line. The last presented frame is written to `frame.png` (or the path after
//!   `--out`), scaled 2x, over a legend of the colours and the strips.
//! * **Small lists (R-R1..R-R8).** After its large list, each worker also records `SMALL`
//!   lists of a single CopyResource on the same context (record one copy, finish, next),
//!   the case where per-list create/destroy cost would dominate. The IC executes them in
//!   order after that worker's large list. Dropping a list is the free-threaded
//!   (recycle-)destroy: half of them are dropped on the IC thread right after executing
//!   them, the other half are handed to the *next* worker, whose thread drops them at the
//!   start of the next frame (a destroy from a thread that neither owns nor executed the
//!   list). Either way the list lands on its context's lock-free list, and a later `finish`
//!   of that context reuses its memory (RecycleCreateCommandList) once the list clock
//!   allows. Each frame prints one line of at most 100 characters: its time, the lists
//!   executed and the share made from recycled memory, the objects churned, the objects and
//!   allocations waiting to be freed, the contexts' retained memory, and whether the
//!   presented surface is resident.
//! * **Checks.** A second device runs the same commands single-threaded on its IC; every
//!   resource's bytes must match after each frame. The soft kernel checks the protocol
//!   (early or double frees, submits off the IC thread, list memory reused before its
//!   buffer completed, leaks after `destroy_device`, R-D3). After the first `WARMUP` frames
//!   (the lists that fill the contexts' caches) at least `MIN_HIT_RATE` of the lists must
//!   come from recycled memory. A mismatch, a violation, a failed call or a steady state
//!   that does not recycle exits with status 1.
//!
//! * **The timeline.** With `--trace PATH` or `--timeline PATH`, the engine's spans (feature
//!   `trace`, [`cmdlist::trace`]) go to a subscriber of this job's (`timeline/capture.rs`) on
//!   the immediate context's thread and the workers' (named `immediate` and `deferred N`),
//!   not the reference device's. `--trace` writes them as a trace for ui.perfetto.dev and
//!   chrome://tracing, with a flow from each list's Finish to each of its executes
//!   (`timeline/chrome.rs`); `--timeline` draws the last frame, one lane per thread, the
//!   spans in five categories, titled with how much the recording threads' spans overlapped
//!   (`timeline/picture.rs`); the `timeline:` line says the same.
//!
//! The scene and the frame (what the workers record, the IC's executes, Blt, present,
//! rotation, the reference run) are generic over the driver, in `shared.rs`: the Vulkan
//! driver's example (`drivers/vulkan/examples/frame/main.rs`) runs the same frames.
//!
//! Run: `cargo run --release --example frame` (`-- --out PATH` to write the picture
//! elsewhere, `--trace PATH`, `--timeline PATH`, `--frames N`, `--help`). `--mode` chooses
//! the soft driver's list mode, whatever the environment says: `driver-built` (the default)
//! has the driver build each list on its recording thread, `replayed` has the engine record
//! the lists and replay them at execute, `emulated` gives a driver without command lists.
//! The first line says which mode ran.

mod shared;
mod timeline;

use std::path::{Path, PathBuf};
use std::process::exit;
use std::sync::mpsc;

use tracing::Dispatch;

use cmdlist::capture::{CaptureSink, ReplayOptions, ReplayThreads};
use cmdlist::soft::{self, Gpu, SoftConfig, SoftDriver, SoftKernel};
use cmdlist::{Clock, DeviceConfig, ListMode};

use shared::{buffer, mode_name, Recycling, Res, Scene, FRAMES, MIN_HIT_RATE, WARMUP};
use shared::{History, SCREEN_H, SCREEN_W, WORKERS, ZOOM};

type Device = cmdlist::Device<SoftDriver, SoftKernel>;
type DeferredContext = cmdlist::DeferredContext<SoftDriver, SoftKernel>;
type CommandList = cmdlist::CommandList<SoftDriver, SoftKernel>;

/// What the command line asks for.
#[derive(Clone, Debug)]
struct Options {
    /// The last presented frame's picture: `--out PATH`, else `frame.png`.
    out: PathBuf,
    /// The engine's spans as a Perfetto/Chrome trace: `--trace PATH`.
    trace: Option<PathBuf>,
    /// The last frame's timeline as a picture: `--timeline PATH`.
    timeline: Option<PathBuf>,
    /// `--frames N` (at least `WARMUP + 1`), else `FRAMES`.
    frames: u32,
    /// `--mode replayed|driver-built|emulated`, else driver-built.
    mode: ListMode,
    /// Every call on the device and its contexts recorded to a file: `--capture PATH`.
    capture: Option<PathBuf>,
    /// Replay a capture instead of running the scene: `--replay PATH`.
    replay: Option<PathBuf>,
    /// The replay's deferred contexts each on a thread of its own: `--threads per-context`
    /// (else `one`, all on the replaying thread).
    threads: ReplayThreads,
}

/// What the command line asks the program to do.
#[derive(Debug)]
enum Command {
    /// Run the job.
    Run(Options),
    /// `--help` or `-h`: print the usage.
    Help,
}

const USAGE: &str = "\
usage: frame [--mode replayed|driver-built|emulated] [--out PATH] [--trace PATH]
             [--timeline PATH] [--frames N] [--capture PATH | --replay PATH]
             [--threads one|per-context]

Runs frames of a multithreaded renderer over the soft driver: 3 deferred contexts record
on their own threads, the immediate context executes their lists, Blts and presents.

  --mode M         how the soft driver holds command lists (default driver-built):
                     driver-built  the driver builds each list on its recording thread
                     replayed      the engine records each list and replays it at execute
                     emulated      a driver without command lists; the engine emulates them
  --out PATH       the last presented frame as a PNG (default frame.png)
  --trace PATH     the engine's spans as a trace for ui.perfetto.dev or chrome://tracing
  --timeline PATH  the last frame's spans drawn as a PNG, one lane per thread
  --frames N       frames to run, more than the 2 warm-up frames (default 8)
  --capture PATH   record every call on the device and its contexts to PATH
  --replay PATH    replay a capture through the soft driver (in --mode) instead of
                   running the scene, and write its last presented frame to --out
  --threads T      the replay's deferred contexts: one (all on one thread, the
                   default) or per-context (each on a thread of its own, as captured)
  -h, --help       print this and exit";

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Command, String> {
        let mut options = Options {
            out: "frame.png".into(),
            trace: None,
            timeline: None,
            frames: FRAMES,
            mode: ListMode::DriverBuilt,
            capture: None,
            replay: None,
            threads: ReplayThreads::One,
        };
        while let Some(flag) = args.next() {
            if flag == "--help" || flag == "-h" {
                return Ok(Command::Help);
            }
            let flags = [
                "--out",
                "--trace",
                "--timeline",
                "--frames",
                "--mode",
                "--capture",
                "--replay",
                "--threads",
            ];
            if !flags.contains(&flag.as_str()) {
                return Err(format!("unknown argument {flag:?}"));
            }
            let value = args.next().ok_or(format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--out" => options.out = value.into(),
                "--trace" => options.trace = Some(value.into()),
                "--timeline" => options.timeline = Some(value.into()),
                "--mode" => options.mode = shared::parse_mode(&value)?,
                "--capture" => options.capture = Some(value.into()),
                "--replay" => options.replay = Some(value.into()),
                "--threads" => {
                    options.threads = match value.as_str() {
                        "one" => ReplayThreads::One,
                        "per-context" => ReplayThreads::PerContext,
                        _ => return Err(format!("--threads {value:?}: one or per-context")),
                    }
                }
                _ => {
                    options.frames = value
                        .parse()
                        .map_err(|_| format!("--frames {value:?}: not a number of frames"))?
                }
            }
        }
        if options.capture.is_some() && options.replay.is_some() {
            return Err("--capture and --replay: one or the other".into());
        }
        if options.frames <= WARMUP {
            return Err(format!(
                "--frames must be more than the {WARMUP} warm-up frames"
            ));
        }
        Ok(Command::Run(options))
    }

    /// Whether the engine's spans are captured.
    fn traced(&self) -> bool {
        self.trace.is_some() || self.timeline.is_some()
    }

    /// The files the job writes.
    fn outputs(&self) -> impl Iterator<Item = &Path> {
        std::iter::once(self.out.as_path())
            .chain(self.trace.as_deref())
            .chain(self.timeline.as_deref())
            .chain(self.capture.as_deref())
    }
}

/// The error for a file that could not be written: its path and the OS's reason.
fn cannot_write(path: &Path, e: std::io::Error) -> String {
    format!("cannot write {}: {e}", path.display())
}

/// Fails, naming the path and the OS's reason, when one of the job's outputs cannot be
/// created: checked before the frames run. A file that was not there is removed again; one
/// that was is left as it was (opened without truncating).
fn check_writable(options: &Options) -> Res {
    for path in options.outputs() {
        let existed = path.exists();
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| cannot_write(path, e))?;
        if !existed {
            std::fs::remove_file(path).map_err(|e| cannot_write(path, e))?;
        }
    }
    Ok(())
}

/// Runs the command line `args` (without the program's name): the usage on `out` for
/// `--help`, else the job. Returns the exit status: 0 when it succeeded, 1 when the job
/// failed, 2 for a command line it does not understand (the usage on `err`, after what was
/// wrong).
fn command_line(
    args: impl Iterator<Item = String>,
    out: &mut impl std::io::Write,
    err: &mut impl std::io::Write,
) -> i32 {
    // A closed stdout or stderr changes nothing about the status.
    match Options::parse(args) {
        Ok(Command::Help) => {
            let _ = writeln!(out, "{USAGE}");
            0
        }
        Err(why) => {
            let _ = writeln!(err, "frame: {why}\n{USAGE}");
            2
        }
        Ok(Command::Run(options)) => match check_writable(&options).and_then(|()| job(&options)) {
            Ok(_) => {
                let _ = writeln!(out, "frame: OK");
                0
            }
            Err(e) => {
                let _ = writeln!(err, "frame: FAILED: {e}");
                1
            }
        },
    }
}

/// A thread that prints each frame's line from the statistics the present published: what a
/// HUD or telemetry would read, without ever blocking the immediate context.
struct Hud {
    tick: mpsc::Sender<Frame>,
    done: mpsc::Receiver<()>,
    thread: std::thread::JoinHandle<()>,
}

/// What the main loop knows of a frame, for its HUD line.
struct Frame {
    index: u32,
    /// From the start of recording to the end of the present.
    time: std::time::Duration,
    /// Lists executed, and the share made from recycled memory.
    lists: usize,
    recycled: f64,
    /// Short-lived objects made (and destroyed) by the churn thread.
    churned: usize,
    /// Bytes the deferred contexts keep for recording and reuse.
    kept: usize,
}

impl Hud {
    /// One line a frame, at most 100 characters: the frame's time and lists from the main
    /// loop, the rest from the statistics the present published, read on this thread.
    fn start(device: Device) -> Hud {
        let (tick, ticks) = mpsc::channel::<Frame>();
        let (ack, done) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            for frame in ticks {
                let s = device.frame_stats();
                let resident = match s.presented_residency {
                    Some(cmdlist::dxgi::ResidencyStatus::GpuMemory) => "resident",
                    Some(_) => "evicted",
                    None => "unknown",
                };
                println!(
                    "frame {} {:5.1} ms | {} lists, {:3.0}% recycled | {} made+freed | {} to free | \
                     {:.0} KiB kept | {resident}",
                    frame.index,
                    frame.time.as_secs_f64() * 1e3,
                    frame.lists,
                    100.0 * frame.recycled,
                    frame.churned,
                    s.waiting_destruction + s.waiting_deallocation,
                    frame.kept as f64 / 1024.0,
                );
                if ack.send(()).is_err() {
                    break;
                }
            }
        });
        Hud { tick, done, thread }
    }
}

/// Writes RGBA bytes as a PNG.
fn write_png(path: &Path, width: u32, height: u32, rgba: &[u8]) -> Res {
    let file = std::fs::File::create(path).map_err(|e| cannot_write(path, e))?;
    let file = std::io::BufWriter::new(file);
    let mut encoder = png::Encoder::new(file, width, height);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.write_header()?.write_image_data(rgba)?;
    Ok(())
}

#[cfg(test)]
mod tests;

fn main() {
    let args = std::env::args().skip(1);
    exit(command_line(
        args,
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    ));
}

/// The job: [`run`] on a thread of its own, named for the immediate context it drives,
/// capturing the engine's spans when a trace or a timeline is asked for, then writing them;
/// returns what was captured.
fn job(options: &Options) -> Res<Option<timeline::capture::Captured>> {
    if let Some(path) = &options.replay {
        replay(options, path)?;
        return Ok(None);
    }
    let capture = options.traced().then(timeline::capture::Capture::new);
    let dispatch = capture.clone().map(Dispatch::new);
    let mode = std::thread::scope(|s| -> Res<_> {
        let ic_thread = std::thread::Builder::new()
            .name(timeline::IMMEDIATE.into())
            .spawn_scoped(s, || run(options, dispatch.as_ref()))?;
        ic_thread
            .join()
            .map_err(|_| "the immediate context's thread panicked")?
    })?;
    let captured = capture.map(|capture| capture.take());
    if let Some(captured) = &captured {
        if captured.still_open != 0 {
            return Err(format!("{} spans were never closed", captured.still_open).into());
        }
        if let Some(path) = &options.trace {
            let file = std::fs::File::create(path).map_err(|e| cannot_write(path, e))?;
            let file = std::io::BufWriter::new(file);
            let flows = timeline::chrome::write(captured, file)?;
            println!(
                "trace: {} spans on {} threads, {flows} flows from a list's finish to its \
                 execute, in {}",
                captured.spans.len(),
                captured.lanes.len(),
                path.display()
            );
        }
        if let Some(path) = &options.timeline {
            let title = format!("the last frame, {} lists", mode_name(mode));
            let timeline = timeline::picture::Timeline::of_last_frame(captured, &title)
                .ok_or("no frame was captured")?;
            let picture = timeline.paint();
            let (width, height) = (picture.width as u32, picture.height as u32);
            write_png(path, width, height, &picture.rgba)?;
            println!(
                "timeline: the last frame ({:.2} ms) on {} threads, in {}: {}",
                (timeline.to - timeline.from) as f64 / 1e6,
                timeline.lanes.len(),
                path.display(),
                timeline.overlap().describe(),
            );
        }
    }
    Ok(captured)
}

/// The job on the immediate context's thread; the engine's spans go to `dispatch`, if any
/// (on this thread and on the workers'; the reference device's are not captured).
fn run(options: &Options, dispatch: Option<&Dispatch>) -> Res<cmdlist::ListMode> {
    let _traced = dispatch.map(tracing::dispatcher::set_default);
    let frames = options.frames;
    let config = device_config();
    let soft = |gpu| soft_config(options.mode, gpu);
    // The device the scene runs on is the one captured, not the reference.
    let mut captured = config.clone();
    if let Some(path) = &options.capture {
        let sink = CaptureSink::create(path).map_err(|e| cannot_write(path, e))?;
        // Each present's picture kept as a checksum, which the replay compares.
        sink.check_presents(true);
        captured = captured.with_capture(sink);
    }
    let (device, mut ic, world) = soft::device(soft(Gpu::PollLag(2)), captured)?;
    if device.list_mode() != options.mode {
        let got = device.list_mode();
        return Err(format!("asked for {:?} lists, got {got:?}", options.mode).into());
    }
    println!(
        "lists: {} ({}), {frames} frames, {WORKERS} deferred contexts",
        mode_name(options.mode),
        match options.mode {
            ListMode::DriverBuilt => "the soft driver builds each list on its recording thread",
            ListMode::Replayed => "the engine records each list and replays it at execute",
            ListMode::Emulated => "a driver without command lists: the engine emulates them",
        }
    );
    let hud = Hud::start(device.clone());
    let (ref_device, mut ref_ic, ref_world) = soft::device(soft(Gpu::Immediate), config)?;
    let (scene, ref_scene) = (Scene::create(&device)?, Scene::create(&ref_device)?);
    let mut contexts: Vec<DeferredContext> = (0..WORKERS)
        .map(|_| device.create_deferred_context())
        .collect::<Result<_, _>>()?;
    let (start, mut created) = (std::time::Instant::now(), 0);
    // Recycling counters at the end of the previous frame, and after the warm-up.
    let (mut recycling_before, mut warm) = (Recycling::default(), Recycling::default());
    // Small lists the IC executed last frame, indexed by the worker that destroys them this
    // frame.
    let mut handed: Vec<Vec<CommandList>> = (0..WORKERS).map(|_| Vec::new()).collect();
    // Whose lists came from recycled memory, frame by frame: the tiles' strips.
    let mut history = History::default();

    for f in 0..frames {
        let frame_start = std::time::Instant::now();
        let frame_span = tracing::info_span!(target: timeline::capture::FRAME_TARGET, "frame", index = u64::from(f));
        let done = shared::frame(
            &device,
            &mut ic,
            &scene,
            &mut contexts,
            &mut handed,
            &mut history,
            f,
            dispatch,
            timeline::deferred,
        )?;
        created += done.churned;
        let frame_time = frame_start.elapsed();
        drop(frame_span);
        // The frame's line, from the statistics the present published, read on the HUD's
        // thread.
        let lists_now = Recycling::of(&contexts);
        hud.tick.send(Frame {
            index: f,
            time: frame_time,
            lists: done.lists,
            recycled: lists_now.hit_rate_since(&recycling_before),
            churned: done.churned,
            kept: lists_now.retained,
        })?;
        hud.done.recv()?;

        // The reference: the same commands, single-threaded, straight on its IC (its spans
        // are not captured).
        let _untraced = tracing::dispatcher::set_default(&Dispatch::none());
        shared::reference(&ref_device, &mut ref_ic, &ref_scene, f, &history)?;
        if world.screen() != ref_world.screen() {
            return Err(format!("frame {f}: the screens differ").into());
        }

        recycling_before = lists_now;
        if f + 1 == WARMUP {
            warm = lists_now;
        }
        let contents = scene.contents(&device, |memory, _| world.read(memory))?;
        if contents != ref_scene.contents(&ref_device, |memory, _| ref_world.read(memory))? {
            return Err(format!("frame {f}: replay differs from the single-threaded run").into());
        }
    }

    // The small lists handed out in the last frame: destroyed while their contexts live, so
    // they are recycled (cached) and freed with their contexts.
    drop(handed);
    let recycling = Recycling::of(&contexts);
    let overall = recycling.hit_rate_since(&Recycling::default());
    let steady = recycling.hit_rate_since(&warm);

    // Idle: a destroy, then flushes of empty buffers. They submit nothing but still run the
    // queue (R-D2) and poll the fence, so everything is destroyed and deallocated. Each frame
    // submitted two buffers: the readback's first poll flushed the one that copies the row
    // (R-M4), the present the rest.
    let idle = device.create_resource(buffer(16, cmdlist::Usage::Default))?;
    device.destroy(idle)?;
    created += 1;
    ic.flush()?;
    ic.flush()?;
    let stats = ic.retire_stats();
    let pending = stats.waiting_destruction + stats.waiting_deallocation;
    if pending != 0 || stats.destroyed != created as u64 || world.submits() != 2 * u64::from(frames)
    {
        return Err(format!("after idle flushes: {stats:?}, {} submits", world.submits()).into());
    }

    let elapsed = start.elapsed();
    let screen = world.screen().ok_or("nothing was presented")?;
    let (width, height, picture) = shared::picture(&screen, &history);
    write_png(&options.out, width, height, &picture)?;
    drop(hud.tick);
    hud.thread.join().map_err(|_| "the HUD thread panicked")?;
    // The readback's polls that found the GPU still drawing are reported too (R-E2).
    let unexpected = |errors: Vec<(cmdlist::ContextId, cmdlist::Error)>| {
        errors.iter().filter(|(_, e)| !shared::is_poll(e)).count()
    };
    let errors = unexpected(world.errors()) + unexpected(ref_world.errors());
    let mode = device.list_mode();
    drop(contexts);
    ic.destroy_device()?;
    tracing::dispatcher::with_default(&Dispatch::none(), || ref_ic.destroy_device())?;
    let violations = world.check_after_device_destroyed();
    let ref_violations = ref_world.check_after_device_destroyed();
    println!(
        "summary: {frames} frames x {WORKERS} workers in {elapsed:.2?} (lists {}); {created} objects \
         created and destroyed, {} really destroyed and {} deallocated before DestroyDevice; {} submits; \
         bytes identical to the single-threaded run every frame; errors reported: {errors}",
        mode_name(mode),
        stats.destroyed,
        stats.deallocated,
        world.submits(),
    );
    let count = (violations.len(), ref_violations.len());
    println!(
        "recycling: {} lists made, hit rate {:.1}% overall, {:.1}% after the first {WARMUP} frames; \
         amortised processing {} times (the IC's {})",
        recycling.recycled + recycling.created,
        100.0 * overall,
        100.0 * steady,
        world.amortized_calls(),
        ic.amortized_count(),
    );
    println!(
        "after destroy_device: {} violation(s), reference device {}",
        count.0, count.1
    );
    for v in violations.iter().chain(&ref_violations) {
        println!("  {}: {}", v.rule, v.what);
    }
    if count != (0, 0) || errors != 0 {
        return Err("the soft kernel saw rules broken, or errors were reported".into());
    }
    println!(
        "frame: the last presented frame ({SCREEN_W}x{SCREEN_H}, shown {ZOOM}x) is in {}: each \
         tile in the colour of the deferred context that recorded it (yellow, red, blue), its \
         strip a cell for frame 0 and for frames {}-{}, white where its list came from \
         recycled memory, black from fresh memory",
        options.out.display(),
        history.shown().start,
        history.shown().end.saturating_sub(1),
    );
    if steady < MIN_HIT_RATE {
        let need = 100.0 * MIN_HIT_RATE;
        return Err(format!(
            "steady state recycles {:.1}% of the lists, below {need}%",
            100.0 * steady
        )
        .into());
    }
    Ok(mode)
}

/// The device's settings: kernel memory deallocated only once the GPU is done with it
/// (R-D4's full destruction), command-list memory reused only once the executing buffer has
/// completed (the GPU also reads it; the soft driver flags an earlier reuse).
fn device_config() -> DeviceConfig {
    DeviceConfig::default()
        .with_retire_clock(Clock::Completed)
        .with_list_clock(Clock::Completed)
}

/// The soft driver in list mode `mode` (from the command line, whatever the environment
/// says) with `gpu`.
fn soft_config(mode: ListMode, gpu: Gpu) -> SoftConfig {
    SoftConfig {
        gpu,
        trace: false,
        ..SoftConfig::default()
    }
    .with_list_mode(mode)
}

/// `--replay PATH`: the capture replayed through the soft driver in `--mode`, on a device
/// set up as the job's, every call checked to answer what it answered when captured; the
/// last presented frame written to `--out` as the job writes it.
fn replay(options: &Options, path: &Path) -> Res {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let (device, mut ic, world) =
        soft::device(soft_config(options.mode, Gpu::PollLag(2)), device_config())?;
    let replay = ReplayOptions::default().with_threads(options.threads);
    let report = cmdlist::capture::replay_with(&bytes, &device, &mut ic, replay)?;
    if let Some(tail) = report.tail {
        println!("replay: the capture ends early: {tail}");
    }
    // The strip's frames are the presents' (the job presents once a frame).
    let presents = cmdlist::capture::FrameReader::new(&bytes)?
        .filter_map(Result::ok)
        .filter(|f| f.kind == cmdlist::capture::Kind::Present as u16)
        .count();
    let mut history = History::default();
    for _ in 0..presents {
        history.push(Vec::new());
    }
    let screen = world.screen().ok_or("the capture presents nothing")?;
    let (width, height, picture) = shared::picture(&screen, &history);
    write_png(&options.out, width, height, &picture)?;
    println!(
        "replay: {} records of {} through {} lists, {presents} presents ({} found the same \
         as captured); the last in {}",
        report.records,
        path.display(),
        mode_name(options.mode),
        report.presents_checked,
        options.out.display()
    );
    drop(report);
    if !ic.device().is_removed() {
        ic.destroy_device()?;
    }
    let violations = world.check_after_device_destroyed();
    if !violations.is_empty() {
        return Err(format!("the soft kernel saw rules broken: {violations:?}").into());
    }
    Ok(())
}
