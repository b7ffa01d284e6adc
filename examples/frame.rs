//! # frame: a multithreaded renderer over the soft driver
//!
//! How the pieces of the API fit together over a few frames, for a driver engineer.
//!
//! * **Setup.** A [`Device`] and its immediate context (IC) over the soft reference driver,
//!   with [`Clock::Completed`] (kernel memory is deallocated only once the GPU is done with
//!   it) and a GPU whose fence completes two polls after a submit (`Gpu::PollLag(2)`). Per
//!   worker: a target resource with a render-target and a shader-resource view of it, and a
//!   dynamic constant buffer; one shared back buffer.
//! * **Each frame.** `WORKERS` threads each drive their own long-lived [`DeferredContext`]
//!   (created once, lent to its thread every frame) and record the frame's commands:
//!   Map(DISCARD), updates, fills, copies, clears through views, binds. The first use of a
//!   view opens its resource's context-local handle before its own (R-H1..R-H3); `finish`
//!   closes them all and hands back a command list (R-C1). Meanwhile one more thread
//!   creates and destroys short-lived objects (free-threaded Create/Destroy, R-F1), then
//!   destroys the frame's upload buffer while the finished lists still use it: its
//!   destruction is deferred (R-D1). The IC executes the lists in worker order (each leaves
//!   it in clear-state, R-C3), drops them and flushes: the buffer is submitted and the
//!   deferred destructions run (R-D2); deallocations wait for the fence.
//! * **Checks.** A second device runs the same commands single-threaded on its IC; every
//!   resource's bytes must match after each frame. The soft kernel checks the protocol
//!   (early or double frees, submits off the IC thread, leaks after `destroy_device`, R-D3).
//!   A mismatch, a violation or a failed call exits with status 1.
//!
//! Run: `cargo run --release --example frame`.

use std::process::exit;
use std::sync::Barrier;

use cmdlist::handle::{Resource, View};
use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig, SoftDriver, SoftKernel, SoftWorld};
use cmdlist::{AnyHandle, BindClass, BindPoint, Clock, DeviceConfig, Handle, HandleType};
use cmdlist::{QueryKind, ResourceDesc, Stage, Usage, ViewDesc};

type Device = cmdlist::Device<SoftDriver, SoftKernel>;
type ImmediateContext = cmdlist::ImmediateContext<SoftDriver, SoftKernel>;
type DeferredContext = cmdlist::DeferredContext<SoftDriver, SoftKernel>;
type Res<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

const FRAMES: u32 = 8;
const WORKERS: usize = 3;
const TARGET: u64 = 256;
const DYNAMIC: u64 = 32;
const BACK: u64 = 96 * WORKERS as u64 + 64;
const UPLOAD: u64 = 16 * WORKERS as u64 + 32;
const CB0: BindPoint = BindPoint::new(BindClass::ConstantBuffer(Stage::Pixel), 0);
const RT0: BindPoint = BindPoint::new(BindClass::RenderTarget, 0);
const SRV0: BindPoint = BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0);

fn buffer(byte_size: u64, usage: Usage) -> ResourceDesc {
    ResourceDesc {
        byte_size,
        usage,
        ..Default::default()
    }
}

fn copy(dst: Handle<Resource>, at: u64, src: Handle<Resource>, from: u64, len: u64) -> SoftCommand {
    let (dst_offset, src_offset) = (at, from);
    SoftCommand::CopyRegion {
        dst,
        dst_offset,
        src,
        src_offset,
        len,
    }
}

/// The persistent objects (the same set is created on both devices, in the same order).
struct Scene {
    target: Vec<Handle<Resource>>,
    rtv: Vec<Handle<View>>,
    srv: Vec<Handle<View>>,
    dynamic: Vec<Handle<Resource>>,
    back: Handle<Resource>,
}

impl Scene {
    fn create(device: &Device) -> Res<Scene> {
        let (mut target, mut rtv, mut srv, mut dynamic) = (vec![], vec![], vec![], vec![]);
        for _ in 0..WORKERS {
            let resource = device.create_resource(buffer(TARGET, Usage::Default))?;
            let range = |first_byte, byte_len| ViewDesc {
                resource,
                first_byte,
                byte_len,
            };
            rtv.push(device.create_view(HandleType::RenderTargetView, range(16, 96))?);
            srv.push(device.create_view(HandleType::ShaderResourceView, range(0, TARGET))?);
            target.push(resource);
            dynamic.push(device.create_resource(buffer(DYNAMIC, Usage::Dynamic))?);
        }
        let back = device.create_resource(buffer(BACK, Usage::Default))?;
        Ok(Scene {
            target,
            rtv,
            srv,
            dynamic,
            back,
        })
    }

    /// Every persistent resource's bytes, as the soft kernel holds them.
    fn contents(&self, device: &Device, world: &SoftWorld) -> Res<Vec<Vec<u8>>> {
        let all = self.target.iter().chain(&self.dynamic).chain([&self.back]);
        all.map(|&r| {
            let memory = device.object(r)?.allocation().ok_or("no memory")?;
            Ok(world.read(memory).ok_or("allocation not live")?)
        })
        .collect()
    }
}

/// Where a worker's commands go: a deferred context (recording) or, for the
/// single-threaded reference run, an immediate context.
trait Recorder {
    fn update(&mut self, r: Handle<Resource>, offset: u64, data: &[u8]) -> Res;
    fn command(&mut self, c: SoftCommand) -> Res;
    fn bind(&mut self, point: BindPoint, object: AnyHandle) -> Res;
    /// Map(DISCARD), write `data` (the resource's whole new contents), Unmap.
    fn write_discard(&mut self, r: Handle<Resource>, data: &[u8]) -> Res;
}

impl Recorder for DeferredContext {
    fn update(&mut self, r: Handle<Resource>, offset: u64, data: &[u8]) -> Res {
        Ok(DeferredContext::update(self, r, offset, data)?)
    }
    fn command(&mut self, c: SoftCommand) -> Res {
        Ok(DeferredContext::command(self, c)?)
    }
    fn bind(&mut self, point: BindPoint, object: AnyHandle) -> Res {
        Ok(DeferredContext::bind(self, point, Some(object))?)
    }
    fn write_discard(&mut self, r: Handle<Resource>, data: &[u8]) -> Res {
        self.map_discard(r)?.copy_from_slice(data);
        Ok(self.unmap(r)?)
    }
}

impl Recorder for ImmediateContext {
    fn update(&mut self, r: Handle<Resource>, offset: u64, data: &[u8]) -> Res {
        Ok(ImmediateContext::update(self, r, offset, data)?)
    }
    fn command(&mut self, c: SoftCommand) -> Res {
        Ok(ImmediateContext::command(self, &c)?)
    }
    fn bind(&mut self, point: BindPoint, object: AnyHandle) -> Res {
        Ok(ImmediateContext::bind(self, point, Some(object))?)
    }
    fn write_discard(&mut self, r: Handle<Resource>, data: &[u8]) -> Res {
        self.map_discard(r)?;
        Ok(self.unmap(r, data)?)
    }
}

/// Worker `w`'s commands of frame `f`. Its last copy overlaps its neighbours' part of the
/// back buffer, so the result depends on executing the lists in worker order.
fn record(r: &mut impl Recorder, s: &Scene, upload: Handle<Resource>, f: u32, w: usize) -> Res {
    let (f8, w8, at) = (f as u8, w as u8, 16 * w as u64);
    let constants: Vec<u8> = (0..DYNAMIC as u8)
        .map(|i| i ^ f8.wrapping_mul(37) ^ w8)
        .collect();
    r.write_discard(s.dynamic[w], &constants)?;
    r.bind(CB0, s.dynamic[w].any())?;
    r.command(SoftCommand::Fill {
        dst: s.target[w],
        value: 0x10 + f8,
    })?;
    r.bind(RT0, s.rtv[w].any())?;
    r.command(SoftCommand::ClearView {
        view: s.rtv[w],
        value: 0x80 | f8 << 2 | w8,
    })?;
    r.update(upload, at, &[f8.wrapping_mul(11) ^ w8 << 4; 32])?;
    r.command(copy(s.target[w], 64, upload, at, 32))?;
    r.command(copy(s.target[w], 128, s.dynamic[w], 0, DYNAMIC))?;
    r.bind(SRV0, s.srv[w].any())?;
    r.command(copy(s.back, 96 * w as u64, s.target[w], 8 * f as u64, 160))
}

/// Short-lived objects created and destroyed on a thread of their own (R-F1); returns how
/// many. Each resource is destroyed before its view: the view holds it, so the IC destroys
/// the view first (R-H3).
fn churn(device: &Device) -> Res<usize> {
    for i in 0..4 {
        let resource = device.create_resource(buffer(64 + 16 * i, Usage::Default))?;
        let desc = ViewDesc {
            resource,
            first_byte: 0,
            byte_len: 8,
        };
        let view = device.create_view(HandleType::ShaderResourceView, desc)?;
        let query = device.create_query(QueryKind::Event)?;
        device.destroy(resource)?;
        device.destroy(view)?;
        device.destroy(query)?;
    }
    Ok(4 * 3)
}

fn main() {
    match run() {
        Ok(()) => println!("frame: OK"),
        Err(e) => {
            eprintln!("frame: FAILED: {e}");
            exit(1);
        }
    }
}

fn run() -> Res {
    // Deallocate kernel memory only once the GPU is done with it (R-D4's full destruction).
    let config = DeviceConfig {
        retire_clock: Clock::Completed,
        ..DeviceConfig::default()
    };
    let soft = |gpu| SoftConfig {
        gpu,
        trace: false,
        ..SoftConfig::default()
    };
    let (device, mut ic, world) = soft::device(soft(Gpu::PollLag(2)), config.clone())?;
    let (ref_device, mut ref_ic, ref_world) = soft::device(soft(Gpu::Immediate), config)?;
    let (scene, ref_scene) = (Scene::create(&device)?, Scene::create(&ref_device)?);
    let mut contexts: Vec<DeferredContext> = (0..WORKERS)
        .map(|_| device.create_deferred_context())
        .collect::<Result<_, _>>()?;
    let (start, mut before, mut created) = (std::time::Instant::now(), ic.retire_stats(), 0);

    for f in 0..FRAMES {
        // The frame's upload buffer: every list uses it, and the churn thread destroys it
        // once they are finished, before the IC executes them (R-D1: the lists hold it).
        let upload = device.create_resource(buffer(UPLOAD, Usage::Default))?;
        let recorded = Barrier::new(WORKERS + 1);
        let (lists, churned) = std::thread::scope(|s| -> Res<_> {
            let workers: Vec<_> = contexts
                .iter_mut()
                .enumerate()
                .map(|(w, dc)| {
                    let (scene, recorded) = (&scene, &recorded);
                    s.spawn(move || -> Res<_> {
                        let list = record(dc, scene, upload, f, w).and_then(|()| Ok(dc.finish()?));
                        recorded.wait();
                        list
                    })
                })
                .collect();
            let churner = s.spawn(|| -> Res<usize> {
                let made = churn(&device);
                recorded.wait();
                device.destroy(upload)?;
                Ok(made? + 1)
            });
            let lists = workers
                .into_iter()
                .map(|h| h.join().map_err(|_| "worker panicked")?);
            let lists = lists.collect::<Res<Vec<_>>>()?;
            Ok((lists, churner.join().map_err(|_| "churn thread panicked")??))
        })?;
        created += churned;

        // The IC: execute in worker order (R-C3), destroy the lists, flush (R-D2).
        let ops: usize = lists.iter().map(|l| l.stats().operations).sum();
        for list in &lists {
            ic.execute_command_list(list)?;
            if ic.bindings().next().is_some() {
                return Err("bindings survived CommandListExecute (R-C3)".into());
            }
        }
        drop(lists);
        ic.flush()?;

        // The reference: the same commands, single-threaded, straight on its IC.
        let ref_upload = ref_device.create_resource(buffer(UPLOAD, Usage::Default))?;
        for w in 0..WORKERS {
            record(&mut ref_ic, &ref_scene, ref_upload, f, w)?;
            ref_ic.clear_state()?;
        }
        ref_device.destroy(ref_upload)?;
        ref_ic.flush()?;

        let now = ic.retire_stats();
        println!(
            "frame {f}: {WORKERS} lists ({ops} ops) | created {churned}, destroyed {churned} (deferred) | \
             really destroyed {}, deallocated {} | waiting: destruction {}, deallocation {} | submits {}",
            now.destroyed - before.destroyed,
            now.deallocated - before.deallocated,
            now.waiting_destruction,
            now.waiting_deallocation,
            world.submits(),
        );
        before = now;
        if scene.contents(&device, &world)? != ref_scene.contents(&ref_device, &ref_world)? {
            return Err(format!("frame {f}: replay differs from the single-threaded run").into());
        }
    }

    // Idle: a destroy, then flushes of empty buffers. They submit nothing but still run the
    // queue (R-D2) and poll the fence, so everything is destroyed and deallocated.
    let idle = device.create_resource(buffer(16, Usage::Default))?;
    device.destroy(idle)?;
    created += 1;
    ic.flush()?;
    ic.flush()?;
    let stats = ic.retire_stats();
    let pending = stats.waiting_destruction + stats.waiting_deallocation;
    if pending != 0 || stats.destroyed != created as u64 || world.submits() != u64::from(FRAMES) {
        return Err(format!("after idle flushes: {stats:?}, {} submits", world.submits()).into());
    }

    let elapsed = start.elapsed();
    let errors = world.errors().len() + ref_world.errors().len();
    drop(contexts);
    ic.destroy_device()?;
    ref_ic.destroy_device()?;
    let violations = world.check_after_device_destroyed();
    let ref_violations = ref_world.check_after_device_destroyed();
    println!(
        "summary: {FRAMES} frames x {WORKERS} workers in {elapsed:.2?}; {created} objects created and \
         destroyed, {} really destroyed and {} deallocated before DestroyDevice; {} submits; \
         bytes identical to the single-threaded run every frame; errors reported: {errors}",
        stats.destroyed,
        stats.deallocated,
        world.submits(),
    );
    let count = (violations.len(), ref_violations.len());
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
    Ok(())
}
