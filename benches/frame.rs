//! A frame of a heavy D3D11 game, three ways, in one criterion run: where the driver's
//! per-draw work runs decides whether deferred contexts buy speed.
//!
//! # The frame
//! [`DRAWS`] draws (doitsujin/dxvk PR #4293 reports about 10,000 per frame in the heavy
//! games), each after a Map(WRITE_DISCARD) of a 64-byte constant buffer, over 16 vertex
//! buffers; then a flush. The driver is `common/frame_driver.rs`'s: about 300 ns of
//! translation per draw (validation through the objects or their context-local blocks,
//! a 32-word packet), the kernel `soft::null`'s.
//!
//! # `frame` (time per frame)
//! - `immediate`: the immediate context maps, writes, unmaps and draws all [`DRAWS`]
//!   itself; the driver translates each draw in `Driver::execute`.
//! - `replay_2dc`: two deferred contexts on two worker threads record half the draws each
//!   and finish their lists; the immediate context executes both. The engine replays every
//!   operation through `Driver::execute` on the immediate context's thread
//!   (`ListMode::Replayed`), so the translation stays there.
//! - `driver_built_2dc`: the same frame where the driver builds its lists
//!   (`ListMode::DriverBuilt`): each deferred context translates its draws on its own
//!   thread, and executing a list chains it (three words).
//!
//! The worker threads live for the whole group; each frame sends them a message and waits
//! for both lists, so a frame costs what its slowest recording and the executes cost.
//!
//! # `record_half` (time per half frame)
//! One deferred context records half the frame and finishes the list, on the bench's
//! thread, the list dropped unexecuted: the recording thread's share of a frame, with the
//! engine recording (`replayed`) or the driver translating each draw there
//! (`driver_built`).
//!
//! # `execute_driver_built` (time per execute)
//! The immediate context's CommandListExecute of one driver-built list of `1` or `10000`
//! draws, with a flush every 64 executes: what the immediate context's thread pays per
//! list, whatever its length.
//!
//! # `draw_translation`
//! [`frame_driver::encode_draw`] alone: the per-draw work the figures above move around.

#[path = "common/frame_driver.rs"]
mod frame_driver;

use std::hint::black_box;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

use cmdlist::handle::Resource;
use cmdlist::soft::null::NullKernel;
use cmdlist::{
    CommandList, DeferredContext, Device, DeviceConfig, Handle, ImmediateContext, ListMode,
    ResourceDesc, Usage,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

use frame_driver::{encode_draw, Draw, FrameDriver, CONSTANTS};

/// Draws per frame.
const DRAWS: usize = 10_000;
/// Vertex buffers the draws cycle through.
const VERTEX_BUFFERS: usize = 16;

type Dev = Device<FrameDriver, NullKernel>;
type Ic = ImmediateContext<FrameDriver, NullKernel>;
type Dc = DeferredContext<FrameDriver, NullKernel>;
type List = CommandList<FrameDriver, NullKernel>;

/// A device and the frame's objects.
struct Scene {
    device: Dev,
    ic: Ic,
    cb: Handle<Resource>,
    vbs: Vec<Handle<Resource>>,
}

fn scene(driver: FrameDriver) -> Scene {
    let (device, ic) =
        Device::new(driver, NullKernel::default(), DeviceConfig::default()).expect("device");
    let cb = device
        .create_resource(ResourceDesc {
            byte_size: CONSTANTS as u64,
            usage: Usage::Dynamic,
            ..Default::default()
        })
        .expect("constant buffer");
    let vbs = (0..VERTEX_BUFFERS)
        .map(|_| {
            device
                .create_resource(ResourceDesc {
                    byte_size: 4096,
                    ..Default::default()
                })
                .expect("vertex buffer")
        })
        .collect();
    Scene {
        device,
        ic,
        cb,
        vbs,
    }
}

/// The constants of draw `i`.
fn constants(i: usize, out: &mut [u8]) {
    out.fill(i as u8);
}

/// Draws `range` of the frame on a deferred context and finishes the list.
fn record(
    dc: &mut Dc,
    cb: Handle<Resource>,
    vbs: &[Handle<Resource>],
    range: std::ops::Range<usize>,
) -> List {
    for i in range {
        constants(i, dc.map_discard(cb).expect("map"));
        dc.unmap(cb).expect("unmap");
        dc.command(Draw {
            cb,
            vb: vbs[i % vbs.len()],
        })
        .expect("draw");
    }
    dc.finish().expect("finish")
}

/// A deferred context on a thread of its own: records its half of each frame when asked.
struct Worker {
    go: Option<Sender<()>>,
    lists: Receiver<List>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    fn spawn(
        mut dc: Dc,
        cb: Handle<Resource>,
        vbs: Vec<Handle<Resource>>,
        range: std::ops::Range<usize>,
    ) -> Self {
        let (go, asked) = channel::<()>();
        let (done, lists) = channel();
        let thread = std::thread::spawn(move || {
            while asked.recv().is_ok() {
                let list = record(&mut dc, cb, &vbs, range.clone());
                if done.send(list).is_err() {
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
    for i in 0..DRAWS {
        constants(i, s.ic.map_discard(s.cb).expect("map"));
        s.ic.unmap(s.cb).expect("unmap");
        s.ic.command(&Draw {
            cb: s.cb,
            vb: s.vbs[i % VERTEX_BUFFERS],
        })
        .expect("draw");
    }
    s.ic.flush().expect("flush");
}

/// One frame recorded by two workers and executed on the immediate context.
fn two_context_frame(ic: &mut Ic, workers: &[Worker; 2]) {
    for w in workers {
        w.go.as_ref().expect("running").send(()).expect("ask");
    }
    let lists = workers.each_ref().map(|w| w.lists.recv().expect("list"));
    for list in &lists {
        ic.execute_command_list(black_box(list)).expect("execute");
    }
    ic.flush().expect("flush");
    drop(lists);
}

fn two_workers(s: &Scene) -> [Worker; 2] {
    let half = DRAWS / 2;
    [0..half, half..DRAWS].map(|range| {
        let dc = s.device.create_deferred_context().expect("context");
        Worker::spawn(dc, s.cb, s.vbs.clone(), range)
    })
}

fn frame(c: &mut Criterion) {
    let mut group = c.benchmark_group("frame");
    group.sample_size(30);
    {
        let mut s = scene(FrameDriver::replayed());
        group.bench_function("immediate", |b| b.iter(|| immediate_frame(&mut s)));
    }
    for (name, driver, mode) in [
        ("replay_2dc", FrameDriver::replayed(), ListMode::Replayed),
        (
            "driver_built_2dc",
            FrameDriver::driver_built(),
            ListMode::DriverBuilt,
        ),
    ] {
        let mut s = scene(driver);
        assert_eq!(s.device.list_mode(), mode);
        let workers = two_workers(&s);
        group.bench_function(name, |b| b.iter(|| two_context_frame(&mut s.ic, &workers)));
        drop(workers);
    }
    group.finish();
}

fn record_half(c: &mut Criterion) {
    let mut group = c.benchmark_group("record_half");
    group.sample_size(30);
    for (name, driver) in [
        ("replayed", FrameDriver::replayed()),
        ("driver_built", FrameDriver::driver_built()),
    ] {
        let s = scene(driver);
        let mut dc = s.device.create_deferred_context().expect("context");
        group.bench_function(name, |b| {
            b.iter(|| drop(record(&mut dc, s.cb, &s.vbs, 0..DRAWS / 2)))
        });
    }
    group.finish();
}

fn execute_driver_built(c: &mut Criterion) {
    let mut group = c.benchmark_group("execute_driver_built");
    let mut s = scene(FrameDriver::driver_built());
    let mut dc = s.device.create_deferred_context().expect("context");
    for length in [1, DRAWS] {
        let list = record(&mut dc, s.cb, &s.vbs, 0..length);
        let mut executed = 0u32;
        group.bench_with_input(BenchmarkId::from_parameter(length), &list, |b, list| {
            b.iter(|| {
                s.ic.execute_command_list(black_box(list)).expect("execute");
                // A flush per 64 executes, as a frame executes lists between flushes.
                executed = executed.wrapping_add(1);
                if executed % 64 == 0 {
                    s.ic.flush().expect("flush");
                }
            })
        });
    }
    group.finish();
}

fn draw_translation(c: &mut Criterion) {
    let mut out = Vec::with_capacity(64);
    c.bench_function("draw_translation", |b| {
        b.iter(|| {
            out.clear();
            encode_draw(black_box((3, 64)), black_box((4, 4096)), &mut out).expect("valid");
        })
    });
}

criterion_group!(
    benches,
    frame,
    record_half,
    execute_driver_built,
    draw_translation
);
criterion_main!(benches);
