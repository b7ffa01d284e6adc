//! The small-command-list cycle (R-R1) with and without recycling, beside its physical
//! floor, in one criterion run; and the deferred-context half of it on 1 and 2 threads.
//!
//! # Which driver
//! The headline figures use the *null* driver and kernel of `cmdlist::soft::null`
//! ([`NullDriver`], [`NullKernel`], shared with the instruction-count benches): every hook
//! is a no-op (no lock, no allocation, no trace), its CLS sizes are listed in its
//! handle-size table, and the kernel hands out allocation handles from a counter and
//! completes every submission at once. So the figures measure the engine
//! itself: handle lookups, context-local handle open/close, the recording, the lock-free
//! list of destroyed lists, the replay, the flush and the clocks. The soft reference driver
//! takes its world mutex in every hook (and keeps hash maps of lists and allocations), which
//! is no stand-in for a production driver's hook cost; it appears only as the extra
//! functions `recycled_soft` and `no_recycle_soft` (trace off, `Gpu::Immediate`), to show
//! what such hooks add.
//!
//! # `cycle_1cmd`
//! One cycle is the warm loop of `tests/alloc.rs`: record one copy (two resource handles,
//! two context-local handles opened) on a deferred context, Finish, CommandListExecute on
//! the immediate context, drop the list, Flush (one submit). Each function is one cycle
//! per criterion iteration, on one thread:
//!
//! - `recycled`: `DeviceConfig::default()` (recycling on; the null driver reports
//!   `COMMANDLISTS_BUILD_2`): Finish takes the destroyed list back from the context's
//!   lock-free list and recycle-creates it; the context state is recycle-created.
//! - `no_recycle`: the same with `DeviceConfig::default().with_recycle(false)`, a runtime without
//!   the recycle hooks: CreateCommandList with fresh memory at every Finish,
//!   DestroyCommandList and freeing at every drop, and the context state destroyed and
//!   created again after every Finish.
//! - `floor`: hand-written, the physical floor of the same payload: reuse a `Vec`, push one
//!   two-word command, iterate it.
//!
//! Setup asserts that the warm `recycled` cycle really recycles (no list created after the
//! first) and that `no_recycle` never does.
//!
//! # `cycle_1cmd_threads`
//! Record one copy + Finish + drop the list, on 1 or 2 deferred-context threads at once,
//! each with its own context and its own two resources of one shared null device
//! (recycling on). Lists are never executed, so each is recyclable at the next Finish and
//! the immediate context stays out of the loop. `iter_custom`: the threads are spawned per
//! sample, warm up, meet at a `Barrier`, then time `iters` cycles each; the figure is the
//! mean of the threads' times divided by `iters`: time per cycle per thread. The contexts
//! live in separate cache-padded boxes, so any line the threads share is one the engine
//! shares.
//!
//! - `1`, `2`: wall-clock time (what the target is stated in).
//! - `1_cpu`, `2_cpu`: the same contexts, timed with each thread's own CPU clock
//!   (`CLOCK_THREAD_CPUTIME_ID`, 64-bit Linux only): stalls on shared cache lines count,
//!   time spent descheduled does not, so on a loaded machine these separate the engine's
//!   contention from the scheduler's.
//! - `2_cpu_created_on_threads`: as `2_cpu`, but the two contexts were each created on a
//!   short-lived thread of its own (as a pool of worker threads would), so with glibc the
//!   engine's per-context heap blocks come from one malloc arena, back to back.

#[path = "common/cycle.rs"]
mod cycle;

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig};
use cmdlist::{DeferredContext, DeviceConfig, Driver, ImmediateContext, Kernel, ResourceDesc};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use crossbeam_utils::CachePadded;

use cmdlist::soft::null::{copy_of, null_device, CopyCommand, NullDriver, NullKernel};
use cycle::{cycle, floor, warm};

/// The deferred-context half: record one copy, Finish, drop the list.
#[inline(never)]
fn dc_cycle<D: Driver, K: Kernel>(dc: &mut DeferredContext<D, K>, command: D::Command)
where
    D::Command: Copy,
{
    dc.command(black_box(command)).expect("record");
    let list = dc.finish().expect("finish");
    drop(black_box(list));
}

fn cycle_1cmd(c: &mut Criterion) {
    let mut group = c.benchmark_group("cycle_1cmd");

    // Each setup is made on the first call of its function, so a filtered run (the profile)
    // builds and warms nothing else.
    for (name, recycle) in [("recycled", true), ("no_recycle", false)] {
        let mut setup = None;
        group.bench_function(name, |b| {
            let (dc, ic, copy) = setup.get_or_insert_with(|| {
                let (device, mut ic) =
                    null_device(DeviceConfig::default().with_recycle(recycle)).unwrap();
                let copy = copy_of(&device);
                let mut dc = device.create_deferred_context().expect("dc");
                warm(&mut dc, &mut ic, copy, recycle);
                (dc, ic, copy)
            });
            b.iter(|| cycle(dc, ic, *copy))
        });
        if let Some((dc, mut ic, _)) = setup {
            let stats = dc.stats();
            assert_eq!(stats.recycled > 0, recycle, "{name}: {stats:?}");
            drop(dc);
            ic.destroy_device().expect("destroy device");
        }
    }

    let mut commands: Vec<[u64; 2]> = Vec::with_capacity(1);
    let words = [1u64 << 32, 2u64 << 32];
    group.bench_function("floor", |b| b.iter(|| floor(&mut commands, words)));

    for (name, recycle) in [("recycled_soft", true), ("no_recycle_soft", false)] {
        let mut setup = None;
        group.bench_function(name, |b| {
            let (dc, ic, copy, _) = setup.get_or_insert_with(|| {
                let config = SoftConfig {
                    trace: false,
                    gpu: Gpu::Immediate,
                    ..SoftConfig::default()
                };
                let device_config = DeviceConfig::default().with_recycle(recycle);
                let (device, mut ic, world) =
                    soft::device(config, device_config).expect("soft device");
                let desc = ResourceDesc {
                    byte_size: 256,
                    ..Default::default()
                };
                let copy = SoftCommand::Copy {
                    dst: device.create_resource(desc).expect("dst"),
                    src: device.create_resource(desc).expect("src"),
                };
                let mut dc = device.create_deferred_context().expect("dc");
                warm(&mut dc, &mut ic, copy, recycle);
                (dc, ic, copy, world)
            });
            b.iter(|| cycle(dc, ic, *copy))
        });
        if let Some((dc, mut ic, _, world)) = setup {
            drop(dc);
            ic.destroy_device().expect("destroy device");
            world.assert_clean();
        }
    }

    group.finish();
}

/// A deferred context on its own cache lines, with its own objects.
struct Worker {
    dc: Box<CachePadded<DeferredContext<NullDriver, NullKernel>>>,
    copy: CopyCommand,
}

/// One null device (recycling on) and four warm workers on it: the first two contexts
/// created on this thread, the last two each on a short-lived thread of its own (as a pool
/// of worker threads would create them), all warmed here.
fn workers() -> (ImmediateContext<NullDriver, NullKernel>, Vec<Worker>) {
    let (device, mut ic) = null_device(DeviceConfig::default()).unwrap();
    let workers = (0..4)
        .map(|i| {
            let copy = copy_of(&device);
            let mut dc = if i < 2 {
                device.create_deferred_context().expect("dc")
            } else {
                let device = device.clone();
                std::thread::spawn(move || device.create_deferred_context().expect("dc"))
                    .join()
                    .expect("creating thread")
            };
            warm(&mut dc, &mut ic, copy, true);
            Worker {
                dc: Box::new(CachePadded::new(dc)),
                copy,
            }
        })
        .collect();
    (ic, workers)
}

/// What a thread's time is measured with.
#[derive(Clone, Copy)]
enum Timer {
    /// Elapsed (wall-clock) time.
    Wall,
    /// The thread's own CPU time: what it spent running, stalls on shared cache lines
    /// included, time spent descheduled (other processes on a loaded machine) excluded.
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    Cpu,
}

impl Timer {
    fn now(self) -> Duration {
        match self {
            // Elapsed since a fixed origin; only differences are used.
            Timer::Wall => {
                static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
                ORIGIN.get_or_init(Instant::now).elapsed()
            }
            #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
            Timer::Cpu => thread_cpu_time(),
        }
    }
}

/// `CLOCK_THREAD_CPUTIME_ID` (std has no thread CPU clock).
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn thread_cpu_time() -> Duration {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut ts = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` (libc, which std links) writes one `struct timespec` (two
    // 64-bit fields on 64-bit Linux) through the valid, exclusive pointer it is given.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Runs `iters` cycles on each of `workers` at once, one thread each, and returns the mean
/// of the threads' times.
fn run_threads(workers: &mut [Worker], iters: u64, timer: Timer) -> Duration {
    let barrier = Barrier::new(workers.len());
    let total: Duration = std::thread::scope(|s| {
        let running: Vec<_> = workers
            .iter_mut()
            .map(|w| {
                let barrier = &barrier;
                s.spawn(move || {
                    // Warms this thread's epoch handle and the context's caches.
                    for _ in 0..64 {
                        dc_cycle(&mut w.dc, w.copy);
                    }
                    barrier.wait();
                    let start = timer.now();
                    for _ in 0..iters {
                        dc_cycle(&mut w.dc, w.copy);
                    }
                    timer.now() - start
                })
            })
            .collect();
        running.into_iter().map(|t| t.join().expect("worker")).sum()
    });
    total / workers.len() as u32
}

fn cycle_1cmd_threads(c: &mut Criterion) {
    let mut group = c.benchmark_group("cycle_1cmd_threads");
    let mut setup = None;
    // (name, which workers, timer)
    #[allow(unused_mut)] // extended on 64-bit Linux only
    let mut runs = vec![("1", 0..1, Timer::Wall), ("2", 0..2, Timer::Wall)];
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    runs.extend([
        ("1_cpu", 0..1, Timer::Cpu),
        ("2_cpu", 0..2, Timer::Cpu),
        ("2_cpu_created_on_threads", 2..4, Timer::Cpu),
    ]);
    for (name, range, timer) in runs {
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            let (_, workers) = setup.get_or_insert_with(workers);
            b.iter_custom(|iters| run_threads(&mut workers[range.clone()], iters, timer))
        });
    }
    if let Some((mut ic, workers)) = setup {
        for w in &workers {
            let stats = w.dc.stats();
            assert_eq!(
                stats.created, 1,
                "the threads' lists were all recycled: {stats:?}"
            );
        }
        drop(workers);
        ic.destroy_device().expect("destroy device");
    }
    group.finish();
}

criterion_group!(benches, cycle_1cmd, cycle_1cmd_threads);
criterion_main!(benches);
