//! API overhead, in the spirit of 3DMark's API Overhead feature test: how many draw calls a
//! second the engine sustains over the null driver (`cmdlist::soft::null`, hooks that do
//! nothing), so that the figure is the runtime's own cost.
//!
//! Each draw is `common/api_mix.rs`'s: two binds, its vertices appended to a
//! NO_OVERWRITE ring (a discard where it wraps, and at the start of each deferred
//! recording), a 64-byte constant buffer discarded every 16 draws, the draw command. A
//! frame is [`FRAME_DRAWS`] draws, then a flush and the frame's end on the immediate
//! context. Three configurations:
//!
//! - `immediate`: the immediate context makes every draw itself (one thread).
//! - `ic + 1 dc`: a deferred context on a thread of its own records the frame as lists of
//!   [`LIST_DRAWS`] draws, which the driver builds (`ListMode::DriverBuilt`); the immediate
//!   context, on the bench's thread, executes each list as it comes and drops it (two
//!   threads). Up to [`LISTS_IN_FLIGHT`] finished lists wait for it, so recording and
//!   executing overlap as in a game's pipelined frame.
//! - `ic + 2 dcs`: the same with two deferred contexts on two threads, half the frame each
//!   (three threads).
//!
//! Each configuration runs a warm-up round, then [`ROUNDS`] timed rounds of
//! [`FRAMES_PER_ROUND`] frames (`std::time::Instant`, from the first draw asked for to the
//! last flush); it prints the median round's draws a second. A last, serial run on one
//! thread splits a deferred draw's cost in two: the recording thread's share (the draws and
//! Finish) and the immediate context's (execute, drop, and the frame's flush), per draw.
//! Those two figures are the projection's inputs: with `k - 1` deferred contexts on cores of
//! their own, `k` threads in all, Amdahl's law gives `1 / (s + p / (k - 1))` draws a second,
//! the immediate context's execute `s` serial and the recording `p` parallel. The model
//! adds the serial share to the parallel one, where a pipelined frame like this bench's
//! overlaps them: a conservative projection, which ignores what the threads would share
//! (memory bandwidth, caches) as well.
//!
//! ```sh
//! cargo bench -p cmdlist-benches --bench api_overhead
//! cargo bench -p cmdlist-benches --bench api_overhead -- --quick        # CI's smoke run
//! cargo bench -p cmdlist-benches --bench api_overhead -- --png docs/api_overhead.png
//! ```
//!
//! `API_OVERHEAD_FRAMES=n` sets the frames per round; `--quick` runs one round of two
//! frames. `--png` draws the figures (`common/api_chart.rs`); a relative path is taken from
//! the workspace's root, since cargo runs a bench in its package's directory.
//!
//! Every run checks what it made: each list holds the operations its draws record, every
//! list recorded was executed, the null kernel saw no error, and on the immediate context
//! the ring's memory holds the last draw's vertices.

#[path = "common/api_chart.rs"]
mod api_chart;
#[path = "common/api_mix.rs"]
mod api_mix;

use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use api_mix::{
    draw, recorded_operations, Mix, RingCursor, CONSTANTS_EVERY, RING_BYTES, VERTEX_BYTES,
};
use cmdlist::soft::null::{null_device_in, NullDevice, NullDriver, NullKernel};
use cmdlist::{CommandList, DeferredContext, DeviceConfig, ImmediateContext, ListMode};

/// Draws a frame: about the 10,000 of a heavy D3D11 game's frame (`frame.rs`).
const FRAME_DRAWS: u64 = 10_240;
/// Draws a deferred context records into one list: a frame is eight lists. A multiple of
/// [`CONSTANTS_EVERY`], so that each recording starts where the constants and the ring are
/// discarded (`common/api_mix.rs`).
const LIST_DRAWS: u64 = 1_280;
const _: () = assert!(LIST_DRAWS % CONSTANTS_EVERY == 0 && FRAME_DRAWS % (2 * LIST_DRAWS) == 0);
/// Finished lists a recording thread may have waiting for the immediate context.
const LISTS_IN_FLIGHT: usize = 4;
/// Frames a timed round, unless `API_OVERHEAD_FRAMES` says otherwise.
const FRAMES_PER_ROUND: u64 = 200;
/// Timed rounds a configuration; the median is reported.
const ROUNDS: usize = 7;
/// Frames of the warm-up round before the timed ones.
const WARM_FRAMES: u64 = 8;

type Ic = ImmediateContext<NullDriver, NullKernel>;
type Dc = DeferredContext<NullDriver, NullKernel>;
type List = CommandList<NullDriver, NullKernel>;

/// How long and how many rounds to run.
#[derive(Clone, Copy)]
struct Plan {
    /// Frames a timed round.
    frames: u64,
    /// Timed rounds a configuration.
    rounds: usize,
    /// Frames of the warm-up round.
    warm_frames: u64,
}

/// A stream of draws on the immediate context: its objects, its ring's cursor, and the
/// index of its next draw.
struct ImmediateStream {
    /// The objects the draws name.
    mix: Mix,
    /// Where the next draw's vertices go.
    cursor: RingCursor,
    /// The next draw's index.
    next: u64,
}

impl ImmediateStream {
    /// One frame: [`FRAME_DRAWS`] draws, the flush and the frame's end.
    fn frame(&mut self, ic: &mut Ic) {
        for _ in 0..FRAME_DRAWS {
            draw(ic, &self.mix, &mut self.cursor, self.next);
            self.next += 1;
        }
        ic.flush().expect("flush");
        ic.end_frame().expect("end frame");
    }

    /// Checks that the ring's memory holds the last draw's vertices: the appends reached it.
    fn check(&self, ic: &mut Ic) {
        let last = self.next - 1;
        let at = self.cursor.next().expect("the ring was written") - VERTEX_BYTES;
        let ring = ic.map_no_overwrite(self.mix.ring).expect("map ring");
        assert!(
            ring[at..at + VERTEX_BYTES].iter().all(|&b| b == last as u8),
            "the ring holds the last draw's vertices"
        );
        ic.unmap(self.mix.ring).expect("unmap ring");
    }
}

/// A deferred context's stream of draws, recorded into lists of [`LIST_DRAWS`].
struct DeferredStream {
    /// The context the draws are recorded on.
    dc: Dc,
    /// The objects the draws name.
    mix: Mix,
    /// Where the next draw's vertices go.
    cursor: RingCursor,
    /// The next draw's index.
    next: u64,
}

impl DeferredStream {
    /// One list: the ring restarted (a new recording discards it first), [`LIST_DRAWS`]
    /// draws, Finish; checks that the recording holds the operations of its draws.
    fn list(&mut self) -> List {
        self.cursor.restart();
        for _ in 0..LIST_DRAWS {
            draw(&mut self.dc, &self.mix, &mut self.cursor, self.next);
            self.next += 1;
        }
        assert_eq!(
            self.dc.stats().operations,
            recorded_operations(LIST_DRAWS),
            "the recording holds its draws' operations"
        );
        self.dc.finish().expect("finish")
    }
}

/// A deferred context on a thread of its own, recording its share of each frame when
/// asked.
struct Recorder {
    /// Asks for this many frames' lists.
    go: Option<Sender<u64>>,
    /// The finished lists, in order.
    lists: Receiver<List>,
    /// The recording thread, joined on drop.
    thread: Option<JoinHandle<()>>,
}

impl Recorder {
    /// Moves `stream` to a thread of its own, where each frame asked for is recorded as
    /// `lists_per_frame` lists, sent as each is finished.
    fn spawn(mut stream: DeferredStream, lists_per_frame: u64) -> Recorder {
        let (go, asked) = channel::<u64>();
        let (done, lists) = sync_channel(LISTS_IN_FLIGHT);
        let thread = std::thread::spawn(move || {
            while let Ok(frames) = asked.recv() {
                for _ in 0..frames * lists_per_frame {
                    if done.send(stream.list()).is_err() {
                        return;
                    }
                }
            }
        });
        Recorder {
            go: Some(go),
            lists,
            thread: Some(thread),
        }
    }

    /// Asks for `frames` frames' lists.
    fn ask(&self, frames: u64) {
        self.go
            .as_ref()
            .expect("running")
            .send(frames)
            .expect("ask");
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        drop(self.go.take());
        if let Some(thread) = self.thread.take() {
            // A recorder that panicked (a failed check) fails the bench here, unless the
            // bench's thread is failing already (its message said so; a second panic would
            // abort the process instead).
            if thread.join().is_err() && !std::thread::panicking() {
                panic!("a recording thread failed");
            }
        }
    }
}

/// A null device whose driver builds its lists, and its immediate context.
fn device() -> (NullDevice, Ic) {
    let (device, ic) =
        null_device_in(ListMode::DriverBuilt, DeviceConfig::default()).expect("null device");
    assert_eq!(device.list_mode(), ListMode::DriverBuilt);
    (device, ic)
}

/// Draws a second of `draws` in `time`.
fn rate(draws: u64, time: Duration) -> f64 {
    draws as f64 / time.as_secs_f64()
}

/// The median of `rates`.
fn median(mut rates: Vec<f64>) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

/// The immediate context alone: the median round's draws a second.
fn immediate(plan: Plan) -> f64 {
    let (device, mut ic) = device();
    let mut stream = ImmediateStream {
        mix: Mix::new(&device, RING_BYTES).expect("objects"),
        cursor: RingCursor::default(),
        next: 0,
    };
    for _ in 0..plan.warm_frames {
        stream.frame(&mut ic);
    }
    let rates = (0..plan.rounds)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..plan.frames {
                stream.frame(&mut ic);
            }
            rate(plan.frames * FRAME_DRAWS, start.elapsed())
        })
        .collect();
    stream.check(&mut ic);
    assert_eq!(
        stream.next,
        (plan.warm_frames + plan.rounds as u64 * plan.frames) * FRAME_DRAWS
    );
    assert_eq!(ic.device().kernel().errors(), 0, "a call failed");
    ic.destroy_device().expect("destroy device");
    median(rates)
}

/// `contexts` deferred contexts recording on their own threads, the immediate context
/// executing their lists: the median round's draws a second.
fn deferred(plan: Plan, contexts: u64) -> f64 {
    let (device, mut ic) = device();
    let lists_per_frame = FRAME_DRAWS / LIST_DRAWS / contexts;
    assert_eq!(lists_per_frame * LIST_DRAWS * contexts, FRAME_DRAWS);
    let recorders: Vec<Recorder> = (0..contexts)
        .map(|_| {
            let stream = DeferredStream {
                dc: device.create_deferred_context().expect("deferred context"),
                mix: Mix::new(&device, RING_BYTES).expect("objects"),
                cursor: RingCursor::default(),
                next: 0,
            };
            Recorder::spawn(stream, lists_per_frame)
        })
        .collect();
    let mut executed = 0u64;
    // Asks every recorder for `frames` frames and executes their lists as they come, in
    // frame order, the recorders' lists interleaved.
    let mut run = |frames: u64| {
        for r in &recorders {
            r.ask(frames);
        }
        for _ in 0..frames {
            for _ in 0..lists_per_frame {
                for r in &recorders {
                    let list = r.lists.recv().expect("a list");
                    ic.execute_command_list(&list).expect("execute");
                    executed += 1;
                }
            }
            ic.flush().expect("flush");
            ic.end_frame().expect("end frame");
        }
    };
    run(plan.warm_frames);
    let rates = (0..plan.rounds)
        .map(|_| {
            let start = Instant::now();
            run(plan.frames);
            rate(plan.frames * FRAME_DRAWS, start.elapsed())
        })
        .collect();
    drop(recorders);
    let frames = plan.warm_frames + plan.rounds as u64 * plan.frames;
    assert_eq!(
        executed * LIST_DRAWS,
        frames * FRAME_DRAWS,
        "every draw executed"
    );
    assert_eq!(ic.device().kernel().errors(), 0, "a call failed");
    ic.destroy_device().expect("destroy device");
    median(rates)
}

/// A deferred draw's cost split between the threads, measured on one thread so that the
/// two shares do not contend: nanoseconds a draw of recording (the draws and Finish) and
/// of the immediate context's work (execute, drop, and the frame's flush and end).
fn shares(plan: Plan) -> (f64, f64) {
    let (device, mut ic) = device();
    let mut stream = DeferredStream {
        dc: device.create_deferred_context().expect("deferred context"),
        mix: Mix::new(&device, RING_BYTES).expect("objects"),
        cursor: RingCursor::default(),
        next: 0,
    };
    let lists_per_frame = FRAME_DRAWS / LIST_DRAWS;
    let mut frame = |recording: &mut Duration, executing: &mut Duration| {
        for _ in 0..lists_per_frame {
            let start = Instant::now();
            let list = stream.list();
            let recorded = Instant::now();
            ic.execute_command_list(&list).expect("execute");
            drop(list);
            *executing += recorded.elapsed();
            *recording += recorded - start;
        }
        let start = Instant::now();
        ic.flush().expect("flush");
        ic.end_frame().expect("end frame");
        *executing += start.elapsed();
    };
    let mut ignored = (Duration::ZERO, Duration::ZERO);
    for _ in 0..plan.warm_frames {
        frame(&mut ignored.0, &mut ignored.1);
    }
    let per_draw = |time: Duration| time.as_nanos() as f64 / (plan.frames * FRAME_DRAWS) as f64;
    let (mut records, mut executes) = (Vec::new(), Vec::new());
    for _ in 0..plan.rounds {
        let (mut recording, mut executing) = (Duration::ZERO, Duration::ZERO);
        for _ in 0..plan.frames {
            frame(&mut recording, &mut executing);
        }
        records.push(per_draw(recording));
        executes.push(per_draw(executing));
    }
    assert_eq!(ic.device().kernel().errors(), 0, "a call failed");
    drop(stream);
    ic.destroy_device().expect("destroy device");
    (median(records), median(executes))
}

/// The CPU's model name, as /proc/cpuinfo gives it.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, name)| name.trim().to_string())
        })
        .unwrap_or_else(|| "an unknown CPU".to_string())
}

/// The bench's command line.
struct Options {
    /// How long to run.
    plan: Plan,
    /// Where to draw the picture, if anywhere.
    png: Option<PathBuf>,
}

/// The command line and the environment's `API_OVERHEAD_FRAMES`.
fn options() -> Options {
    let mut plan = Plan {
        frames: FRAMES_PER_ROUND,
        rounds: ROUNDS,
        warm_frames: WARM_FRAMES,
    };
    if let Ok(frames) = std::env::var("API_OVERHEAD_FRAMES") {
        plan.frames = frames
            .parse()
            .ok()
            .filter(|&n| n > 0)
            .expect("API_OVERHEAD_FRAMES: a number of frames, at least 1");
    }
    let mut png = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => {
                plan = Plan {
                    frames: 2,
                    rounds: 1,
                    warm_frames: 1,
                }
            }
            "--png" => {
                let path = PathBuf::from(args.next().expect("--png: a path"));
                // cargo runs a bench in its package's directory: a relative path is the
                // workspace root's, where the command was most likely typed.
                let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent();
                png = Some(root.expect("the workspace's root").join(path));
            }
            // cargo bench passes `--bench`; other benches' options are not this one's.
            _ => {}
        }
    }
    Options { plan, png }
}

fn main() {
    let Options { plan, png } = options();
    let cpu = cpu_model();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "api_overhead: {cpu}, {cores} logical CPUs; null driver, driver-built lists; \
         {FRAME_DRAWS} draws a frame, {} frames a round, the median of {} rounds",
        plan.frames, plan.rounds
    );
    let configurations = [
        (1, "immediate", immediate(plan)),
        (2, "ic + 1 dc", deferred(plan, 1)),
        (3, "ic + 2 dcs", deferred(plan, 2)),
    ];
    for (threads, name, rate) in configurations {
        println!(
            "api_overhead/{name:<11} {threads} thread{} {:>12.0} draws/s {:>8.1} ns a draw",
            if threads == 1 { " " } else { "s" },
            rate,
            1e9 / rate
        );
    }
    let (record_ns, execute_ns) = shares(plan);
    println!(
        "api_overhead/shares      on one thread, a deferred draw: {record_ns:.1} ns recording \
         (parallel), {execute_ns:.1} ns on the immediate context (serial)"
    );
    let chart = api_chart::Chart {
        cpu,
        cores,
        measured: configurations.map(|(threads, _, rate)| (threads, rate)),
        record_ns,
        execute_ns,
    };
    println!(
        "api_overhead/projection  Amdahl, 1 / (s + p / (k - 1)) with k threads: {:.0} draws/s \
         at 4, {:.0} at 8, {:.0} at 16",
        chart.projected(4),
        chart.projected(8),
        chart.projected(16)
    );
    if let Some(path) = png {
        chart.write_png(&path).expect("write the picture");
        println!("api_overhead: drew {}", path.display());
    }
}
