//! The heavy frame of the root `benches/frame.rs` on the Vulkan driver: where the Vulkan
//! recording of each draw runs decides whether deferred contexts buy speed.
//!
//! # The frame
//! [`DRAWS`] draws ([`SoftCommand::Draw`], each a compute dispatch), each after a
//! Map(WRITE_DISCARD) of a 64-byte constant buffer, over 16 vertex buffers, into a
//! 256-byte render target; then a flush, which submits the frame's primary command buffer.
//! Validation is off (the layer's checks would be most of the time).
//!
//! # `vulkan_frame` (time per frame, recording and submit)
//! - `immediate`: the immediate context maps, writes, unmaps and draws all [`DRAWS`]
//!   itself; the driver records each draw's copy, dispatch and barriers into the primary.
//! - `replay_2dc`: two deferred contexts on two worker threads record half the draws each
//!   and finish their lists; the immediate context executes both. The engine replays every
//!   operation through `Driver::execute` on the immediate context's thread
//!   (`ListMode::Replayed`), so the Vulkan recording stays there.
//! - `driver_built_2dc`: the same frame where the driver builds its lists in secondary
//!   command buffers (`ListMode::DriverBuilt`): each deferred context records its draws on
//!   its own thread, and executing a list is one `vkCmdExecuteCommands`.
//!
//! Each frame starts with the GPU idle: the wait for the previous frame is outside the
//! timed part (`iter_custom`). The GPU's execution of each frame, from the submit's return
//! to the timeline semaphore reaching it, is timed apart and printed after each function
//! (on lavapipe the "GPU" is the CPU's other threads), with where the recording threads'
//! time went (Linux's per-thread schedstat): on a core, and waiting for one (other
//! processes on the machine take the cores the frame's threads are ready to run on), and
//! the hazard rule's barriers per frame.
//!
//! Run: `cargo bench -p cmdlist-vulkan --bench vulkan_frame`. Without a Vulkan device it
//! prints why and measures nothing.

use std::hint::black_box;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use cmdlist::handle::Resource;
use cmdlist::soft::SoftCommand;
use cmdlist::{BindClass, BindPoint, DeviceConfig, Handle, ListMode, ResourceDesc, Usage};
use cmdlist_vulkan::{VulkanConfig, VulkanDevice, VulkanDriver, VulkanKernel, VulkanWorld};
use criterion::{criterion_group, criterion_main, Criterion};

/// Draws per frame.
const DRAWS: usize = 10_000;
/// Vertex buffers the draws cycle through.
const VERTEX_BUFFERS: usize = 16;
/// The constant buffer's bytes.
const CONSTANTS: usize = 64;
/// The render target's bytes (64 words: one workgroup per draw).
const TARGET: u64 = 256;
const RT0: BindPoint = BindPoint::new(BindClass::RenderTarget, 0);

type Ic = cmdlist::ImmediateContext<VulkanDriver, VulkanKernel>;
type Dc = cmdlist::DeferredContext<VulkanDriver, VulkanKernel>;
type List = cmdlist::CommandList<VulkanDriver, VulkanKernel>;

/// A device and the frame's objects.
struct Scene {
    device: VulkanDevice,
    ic: Ic,
    world: Arc<VulkanWorld>,
    cb: Handle<Resource>,
    vbs: Vec<Handle<Resource>>,
    target: Handle<Resource>,
}

/// The frame's scene in `mode`, or `None` (printed) without a Vulkan device.
fn scene(mode: ListMode) -> Option<Scene> {
    let config = VulkanConfig {
        validation: false,
        ..VulkanConfig::for_mode(mode)
    };
    let (device, mut ic, world) = match cmdlist_vulkan::device(config, DeviceConfig::default()) {
        Ok(made) => made,
        Err(e) => {
            eprintln!("vulkan_frame: skipped: {e}");
            return None;
        }
    };
    assert_eq!(device.list_mode(), mode);
    let buffer = |byte_size, usage| ResourceDesc {
        byte_size,
        usage,
        ..Default::default()
    };
    let cb = device
        .create_resource(buffer(CONSTANTS as u64, Usage::Dynamic))
        .expect("constant buffer");
    let vbs: Vec<_> = (0..VERTEX_BUFFERS)
        .map(|_| device.create_resource(buffer(4096, Usage::Default)))
        .collect::<Result<_, _>>()
        .expect("vertex buffers");
    let target = device
        .create_resource(buffer(TARGET, Usage::Default))
        .expect("target");
    for (i, &vb) in vbs.iter().enumerate() {
        ic.update(vb, 0, &[i as u8 ^ 0x5A; 4096]).expect("vertices");
    }
    ic.flush().expect("flush");
    world.wait_gpu().expect("idle");
    Some(Scene {
        device,
        ic,
        world,
        cb,
        vbs,
        target,
    })
}

/// The constants of draw `i`.
fn constants(i: usize, out: &mut [u8]) {
    out.fill(i as u8);
}

fn draw(cb: Handle<Resource>, vb: Handle<Resource>) -> SoftCommand {
    SoftCommand::Draw {
        constants: cb,
        vertices: vb,
        point: RT0,
    }
}

/// Draws `range` of the frame on a deferred context and finishes the list.
fn record(
    dc: &mut Dc,
    (cb, target): (Handle<Resource>, Handle<Resource>),
    vbs: &[Handle<Resource>],
    range: std::ops::Range<usize>,
) -> List {
    dc.bind(RT0, Some(target.any())).expect("bind");
    for i in range {
        constants(i, dc.map_discard(cb).expect("map"));
        dc.unmap(cb).expect("unmap");
        dc.command(draw(cb, vbs[i % vbs.len()])).expect("draw");
    }
    dc.finish().expect("finish")
}

/// The calling thread's time on a core and waiting for one, so far (Linux's
/// `/proc/thread-self/schedstat`; zero where it cannot be read).
fn thread_times() -> ThreadTimes {
    let read = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let mut fields = read
        .split_whitespace()
        .map(|f| f.parse::<u64>().unwrap_or(0));
    let (on_cpu, waiting) = (fields.next().unwrap_or(0), fields.next().unwrap_or(0));
    ThreadTimes {
        on_cpu: Duration::from_nanos(on_cpu),
        waiting: Duration::from_nanos(waiting),
        wall: Duration::ZERO,
    }
}

/// A thread's time on a core and ready but waiting for one (and, for a worker's recording,
/// from its start to its end).
#[derive(Clone, Copy, Debug, Default)]
struct ThreadTimes {
    on_cpu: Duration,
    waiting: Duration,
    wall: Duration,
}

impl std::ops::Sub for ThreadTimes {
    type Output = ThreadTimes;
    fn sub(self, earlier: ThreadTimes) -> ThreadTimes {
        ThreadTimes {
            on_cpu: self.on_cpu.saturating_sub(earlier.on_cpu),
            waiting: self.waiting.saturating_sub(earlier.waiting),
            wall: self.wall.saturating_sub(earlier.wall),
        }
    }
}

impl std::ops::AddAssign for ThreadTimes {
    fn add_assign(&mut self, more: ThreadTimes) {
        self.on_cpu += more.on_cpu;
        self.waiting += more.waiting;
        self.wall += more.wall;
    }
}

/// A deferred context on a thread of its own: records its half of each frame when asked,
/// and says how long it was on a core doing it.
struct Worker {
    go: Option<Sender<()>>,
    lists: Receiver<(List, ThreadTimes)>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    fn spawn(s: &Scene, range: std::ops::Range<usize>) -> Self {
        let mut dc = s.device.create_deferred_context().expect("context");
        let (objects, vbs) = ((s.cb, s.target), s.vbs.clone());
        let (go, asked) = channel::<()>();
        let (done, lists) = channel();
        let thread = std::thread::spawn(move || {
            while asked.recv().is_ok() {
                let (before, start) = (thread_times(), Instant::now());
                let list = record(&mut dc, objects, &vbs, range.clone());
                let mut times = thread_times() - before;
                times.wall = start.elapsed();
                if done.send((list, times)).is_err() {
                    break;
                }
            }
        });
        Worker {
            go: Some(go),
            lists,
            thread: Some(thread),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        drop(self.go.take());
        if let Some(thread) = self.thread.take() {
            thread.join().expect("worker");
        }
    }
}

/// One frame on the immediate context alone.
fn immediate_frame(s: &mut Scene) {
    s.ic.bind(RT0, Some(s.target.any())).expect("bind");
    for i in 0..DRAWS {
        constants(i, s.ic.map_discard(s.cb).expect("map"));
        s.ic.unmap(s.cb).expect("unmap");
        s.ic.command(&draw(s.cb, s.vbs[i % VERTEX_BUFFERS]))
            .expect("draw");
    }
    s.ic.flush().expect("flush");
}

/// One frame recorded by two workers and executed on the immediate context; adds the
/// workers' times to `workers_times` (their on-core and waiting times summed, the slower
/// one's recording for the wall time).
fn two_context_frame(ic: &mut Ic, workers: &[Worker; 2], workers_times: &mut ThreadTimes) {
    for w in workers {
        w.go.as_ref().expect("running").send(()).expect("ask");
    }
    let lists = workers.each_ref().map(|w| w.lists.recv().expect("list"));
    let slowest = lists.iter().map(|(_, times)| times.wall).max();
    for (list, times) in &lists {
        ic.execute_command_list(black_box(list)).expect("execute");
        *workers_times += ThreadTimes {
            wall: Duration::ZERO,
            ..*times
        };
    }
    workers_times.wall += slowest.unwrap_or_default();
    ic.flush().expect("flush");
    drop(lists);
}

/// Where the frames' time went, summed over the frames timed.
#[derive(Default)]
struct Breakdown {
    frames: u32,
    /// From the submit's return to the GPU idle.
    gpu: Duration,
    /// The immediate context's thread during the timed part.
    ic: ThreadTimes,
    /// The deferred contexts' threads while recording (both summed).
    workers: ThreadTimes,
    /// The hazard rule's barriers recorded ([`VulkanWorld::hazard_barriers`]).
    barriers: u64,
}

impl Breakdown {
    fn report(&self, name: &str) {
        if self.frames == 0 {
            return;
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3 / f64::from(self.frames);
        println!(
            "vulkan_frame/{name}: per frame, GPU execution {:.1} ms (submit to timeline, mean of \
             {} frames); immediate context's thread {:.2} ms on a core, {:.2} ms waiting for \
             one; deferred contexts' threads (both) {:.2} ms on a core, {:.2} ms waiting, the \
             slower one's recording {:.2} ms from start to end; {} hazard barriers recorded",
            ms(self.gpu),
            self.frames,
            ms(self.ic.on_cpu),
            ms(self.ic.waiting),
            ms(self.workers.on_cpu),
            ms(self.workers.waiting),
            ms(self.workers.wall),
            self.barriers / u64::from(self.frames),
        );
    }
}

/// `iters` frames, each started with the GPU idle; returns the time to record and submit
/// them, the GPU's time after each submit and the threads' times added to `breakdown`.
fn frames(
    world: &VulkanWorld,
    iters: u64,
    breakdown: &mut Breakdown,
    mut frame: impl FnMut(&mut ThreadTimes),
) -> Duration {
    let mut timed = Duration::ZERO;
    for _ in 0..iters {
        world.wait_gpu().expect("idle");
        let barriers = world.hazard_barriers();
        let ic_before = thread_times();
        let start = Instant::now();
        frame(&mut breakdown.workers);
        let submitted = Instant::now();
        breakdown.ic += thread_times() - ic_before;
        breakdown.barriers += world.hazard_barriers() - barriers;
        timed += submitted - start;
        world.wait_gpu().expect("idle");
        breakdown.gpu += submitted.elapsed();
        breakdown.frames += 1;
    }
    timed
}

fn vulkan_frame(c: &mut Criterion) {
    let mut group = c.benchmark_group("vulkan_frame");
    group.sample_size(20);
    if let Some(mut s) = scene(ListMode::Replayed) {
        let mut breakdown = Breakdown::default();
        let world = Arc::clone(&s.world);
        group.bench_function("immediate", |b| {
            b.iter_custom(|iters| {
                frames(&world, iters, &mut breakdown, |_| immediate_frame(&mut s))
            })
        });
        breakdown.report("immediate");
        s.ic.destroy_device().expect("destroy");
    }
    for (name, mode) in [
        ("replay_2dc", ListMode::Replayed),
        ("driver_built_2dc", ListMode::DriverBuilt),
    ] {
        let Some(mut s) = scene(mode) else { continue };
        let half = DRAWS / 2;
        let workers = [0..half, half..DRAWS].map(|range| Worker::spawn(&s, range));
        let mut breakdown = Breakdown::default();
        let world = Arc::clone(&s.world);
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                frames(&world, iters, &mut breakdown, |times| {
                    two_context_frame(&mut s.ic, &workers, times)
                })
            })
        });
        breakdown.report(name);
        drop(workers);
        s.ic.destroy_device().expect("destroy");
    }
    group.finish();
}

criterion_group!(benches, vulkan_frame);
criterion_main!(benches);
