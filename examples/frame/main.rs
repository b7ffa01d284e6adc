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
//!   shader-resource view of it, a dynamic constant buffer and a few small staging buffers;
//!   one shared back buffer.
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
//! * **The picture (R-X1, R-X5, R-X6).** Each worker also paints its share of the tiles of a
//!   `CANVAS_W`×`CANVAS_H` canvas (`R8G8B8A8_UNORM_SRGB`), one command list per tile, tinted
//!   by the worker (red, green, blue: which thread recorded what); the IC marks with a white
//!   corner each tile whose list `finish` made from recycled memory. After executing every
//!   list, the IC Blts the canvas into the swap chain's current back buffer
//!   with a format conversion and a 2x stretch to the screen format (`B8G8R8A8_UNORM`),
//!   presents it (the Present point: amortised processing is never starved for a frame,
//!   R-A1), and rotates the two back buffers' identities, so the next frame renders into
//!   the other allocation through the same handle. A separate thread reads the frame
//!   statistics the present published ([`cmdlist::Device::frame_stats`]) and prints the
//!   frame's line. The last presented frame is written to `frame.png` (or the path after
//!   `--out`).
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
//!   (`timeline/chrome.rs`); `--timeline` draws the last frame, one lane per thread
//!   (`timeline/picture.rs`).
//!
//! Run: `cargo run --release --example frame` (`-- --out PATH` to write the picture
//! elsewhere, `--trace PATH`, `--timeline PATH`, `--frames N`). The soft driver's list mode comes from the environment
//! ([`cmdlist::soft::SoftConfig`]): the engine replays its lists by default,
//! `CMDLIST_SOFT_DRIVER_BUILT=1` has the driver build them on the recording threads, and
//! `CMDLIST_SOFT_EMULATED=1` gives a driver without command lists.

mod timeline;

use std::path::PathBuf;
use std::process::exit;
use std::sync::{mpsc, Barrier};

use tracing::Dispatch;

use cmdlist::dxgi::{
    BltArgs, BltFlags, DisplayFormat, DxgiContext, PresentArgs, PresentFlags, Rect, Rotation,
};

use cmdlist::handle::{Resource, View};
use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig, SoftDriver, SoftKernel, SoftWorld};
use cmdlist::{AnyHandle, BindClass, BindPoint, Clock, DeviceConfig, Handle, HandleType};
use cmdlist::{BindFlags, QueryKind, ResourceDesc, Stage, Texture2d, Usage, ViewDesc};

type Device = cmdlist::Device<SoftDriver, SoftKernel>;
type ImmediateContext = cmdlist::ImmediateContext<SoftDriver, SoftKernel>;
type DeferredContext = cmdlist::DeferredContext<SoftDriver, SoftKernel>;
type CommandList = cmdlist::CommandList<SoftDriver, SoftKernel>;
type Res<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Frames the job runs (`--frames N` to change).
const FRAMES: u32 = 8;
const WORKERS: usize = 3;
const TARGET: u64 = 256;
const DYNAMIC: u64 = 32;
const BACK: u64 = 96 * WORKERS as u64 + 64;
const UPLOAD: u64 = 16 * WORKERS as u64 + 32;
const CB0: BindPoint = BindPoint::new(BindClass::ConstantBuffer(Stage::Pixel), 0);
const RT0: BindPoint = BindPoint::new(BindClass::RenderTarget, 0);
const SRV0: BindPoint = BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0);
/// Small (single-copy) lists per worker per frame.
const SMALL: usize = 50;
/// Staging buffers per worker, the small copies' destinations. Odd: see [`small_copy`].
const STAGING: usize = 7;
const STAGING_SIZE: u64 = 32;
/// Frames that fill the caches: under the completed list clock, a list executed in frame
/// `f` is reusable in frame `f + 2`, so each context makes two frames' worth of lists.
const WARMUP: u32 = 2;
/// The share of lists that must come from recycled memory after the warm-up.
const MIN_HIT_RATE: f64 = 0.90;
/// The canvas the workers paint, in tiles of `TILE`×`TILE` pixels.
const CANVAS_W: u32 = 192;
const CANVAS_H: u32 = 112;
const TILE: u32 = 16;
/// The screen: the canvas stretched 2x.
const SCREEN_W: u32 = 2 * CANVAS_W;
const SCREEN_H: u32 = 2 * CANVAS_H;

/// A one-level, single-sampled 2D texture in `format`.
fn texture(width: u32, height: u32, format: DisplayFormat, bind: BindFlags) -> ResourceDesc {
    let shape = Texture2d {
        width,
        height,
        format: format.to_dxgi(),
        ..Texture2d::default()
    };
    ResourceDesc::texture(shape, bind).expect("a display format is a DXGI format")
}

/// The canvas's colour at pixel (x, y) of frame `f`, as sRGB-encoded RGBA bytes: rings
/// drifting across a sky, each tile's border a shade darker so the tiles show.
fn paint(f: u32, x: u32, y: u32) -> [u8; 4] {
    let (fx, fy) = (x as f32 / CANVAS_W as f32, y as f32 / CANVAS_H as f32);
    let (cx, cy) = (
        0.5 + 0.3 * (f as f32 * 0.7).cos(),
        0.5 + 0.25 * (f as f32 * 0.9).sin(),
    );
    let d = ((fx - cx).powi(2) * 3.0 + (fy - cy).powi(2)).sqrt();
    let ring = (0.5 + 0.5 * (d * 40.0 - f as f32 * 1.3).cos()).powi(3);
    let border = x % TILE == 0 || y % TILE == 0;
    let shade = if border { 0.8 } else { 1.0 };
    let channel = |v: f32| (v.clamp(0.0, 1.0) * shade * 255.0) as u8;
    [
        channel(0.15 + 0.85 * ring * (1.0 - fy)),
        channel(0.25 + 0.55 * ring + 0.2 * fx),
        channel(0.55 + 0.45 * (1.0 - ring) * fy),
        255,
    ]
}

/// The tiles of the canvas, as (left, top) corners; worker `w` paints every `WORKERS`-th.
fn tiles() -> impl Iterator<Item = (u32, u32)> {
    (0..CANVAS_H / TILE).flat_map(|ty| (0..CANVAS_W / TILE).map(move |tx| (tx * TILE, ty * TILE)))
}

/// The tint of the tiles worker `w` records: red, green, blue.
const TINTS: [[u8; 3]; WORKERS] = [[255, 70, 50], [60, 230, 90], [80, 110, 255]];

/// `pixel` a third of the way toward worker `w`'s tint.
fn tint([r, g, b, a]: [u8; 4], w: usize) -> [u8; 4] {
    let mix = |c: u8, t: u8| ((2 * u16::from(c) + u16::from(t)) / 3) as u8;
    let [tr, tg, tb] = TINTS[w];
    [mix(r, tr), mix(g, tg), mix(b, tb), a]
}

/// Paints one tile of frame `f`, tinted by worker `w`, which records it: one
/// UpdateSubresource per row of the tile.
fn paint_tile(
    r: &mut impl Recorder,
    canvas: Handle<Resource>,
    f: u32,
    (left, top): (u32, u32),
    w: usize,
) -> Res {
    let mut row = Vec::with_capacity(4 * TILE as usize);
    for y in top..top + TILE {
        row.clear();
        for x in left..left + TILE {
            row.extend_from_slice(&tint(paint(f, x, y), w));
        }
        let offset = 4 * (u64::from(y) * u64::from(CANVAS_W) + u64::from(left));
        r.update(canvas, offset, &row)?;
    }
    Ok(())
}

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
    /// `STAGING` per worker: worker `w`'s are `staging[w * STAGING..][..STAGING]`.
    staging: Vec<Handle<Resource>>,
    back: Handle<Resource>,
    /// The canvas the tiles are painted into.
    canvas: Handle<Resource>,
    /// The swap chain: the back buffer is always `swap_chain[0]`, whose allocation rotates.
    swap_chain: [Handle<Resource>; 2],
}

impl Scene {
    fn create(device: &Device) -> Res<Scene> {
        let (mut target, mut rtv, mut srv, mut dynamic) = (vec![], vec![], vec![], vec![]);
        let mut staging = vec![];
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
            for _ in 0..STAGING {
                staging.push(device.create_resource(buffer(STAGING_SIZE, Usage::Default))?);
            }
        }
        let back = device.create_resource(buffer(BACK, Usage::Default))?;
        let present_rt = BindFlags::PRESENT | BindFlags::RENDER_TARGET;
        let canvas_desc = texture(
            CANVAS_W,
            CANVAS_H,
            DisplayFormat::R8G8B8A8UnormSrgb,
            present_rt,
        );
        let canvas = device.create_resource(canvas_desc)?;
        let screen = texture(SCREEN_W, SCREEN_H, DisplayFormat::B8G8R8A8Unorm, present_rt);
        let swap_chain = [
            device.create_resource(screen)?,
            device.create_resource(screen)?,
        ];
        Ok(Scene {
            target,
            rtv,
            srv,
            dynamic,
            staging,
            back,
            canvas,
            swap_chain,
        })
    }

    /// Every persistent resource's bytes, as the soft kernel holds them.
    fn contents(&self, device: &Device, world: &SoftWorld) -> Res<Vec<Vec<u8>>> {
        let all = self.target.iter().chain(&self.dynamic).chain(&self.staging);
        let all = all
            .chain([&self.back, &self.canvas])
            .chain(&self.swap_chain);
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
        self.map_discard(r)?.copy_from_slice(data);
        Ok(self.unmap(r)?)
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

/// Worker `w`'s `i`-th small list of a frame: one CopyResource (R-R1's example of a small
/// list) into one of its staging buffers, alternately from its target and from its constant
/// buffer, as the worker's large list of the frame left them. `STAGING` is odd, so each
/// staging buffer is written from both sources in turn: its final bytes show whether the
/// small lists ran in order, and after the large one.
fn small_copy(s: &Scene, w: usize, i: usize) -> SoftCommand {
    let src = if i % 2 == 0 {
        s.target[w]
    } else {
        s.dynamic[w]
    };
    let dst = s.staging[w * STAGING + i % STAGING];
    SoftCommand::Copy { dst, src }
}

/// A worker's lists of one frame, in the order the IC executes them.
struct WorkerLists {
    large: CommandList,
    small: Vec<CommandList>,
    /// One per tile the worker paints.
    tiles: Vec<TileList>,
}

/// A tile's list, where the tile is, and whether `finish` made the list from recycled memory.
struct TileList {
    list: CommandList,
    at: (u32, u32),
    recycled: bool,
}

/// Marks the tile at `(left, top)` as painted by a list made from recycled memory: a white
/// block in its corner.
fn mark_recycled(r: &mut impl Recorder, canvas: Handle<Resource>, (left, top): (u32, u32)) -> Res {
    let white = [255u8; 4 * MARK as usize];
    for y in top + 1..top + 1 + MARK {
        let offset = 4 * (u64::from(y) * u64::from(CANVAS_W) + u64::from(left + 1));
        r.update(canvas, offset, &white)?;
    }
    Ok(())
}

/// The side of the recycled mark, in pixels.
const MARK: u32 = 3;

/// Worker `w`'s lists of frame `f`: the large one, then `SMALL` single-copy lists, each
/// recorded and finished on the same context. Once the lists of two frames back are destroyed
/// and their buffer has completed, `finish` makes these from their memory (R-R5..R-R7), not
/// from fresh memory.
fn record_lists(
    dc: &mut DeferredContext,
    s: &Scene,
    upload: Handle<Resource>,
    f: u32,
    w: usize,
) -> Res<WorkerLists> {
    record(dc, s, upload, f, w)?;
    let large = dc.finish()?;
    let small = (0..SMALL)
        .map(|i| {
            dc.command(small_copy(s, w, i))?;
            Ok(dc.finish()?)
        })
        .collect::<Res<_>>()?;
    let tiles = tiles()
        .skip(w)
        .step_by(WORKERS)
        .map(|at| {
            paint_tile(dc, s.canvas, f, at, w)?;
            let before = dc.stats().recycled;
            let list = dc.finish()?;
            let recycled = dc.stats().recycled > before;
            Ok(TileList { list, at, recycled })
        })
        .collect::<Res<_>>()?;
    Ok(WorkerLists {
        large,
        small,
        tiles,
    })
}

/// The deferred contexts' recycling counters and memory, summed over the contexts.
#[derive(Clone, Copy, Debug, Default)]
struct Recycling {
    /// Lists made from recycled memory (RecycleCreateCommandList).
    recycled: u64,
    /// Lists made from fresh memory (CreateCommandList).
    created: u64,
    /// Destroyed lists recycled and ready for reuse.
    cached: usize,
    /// Destroyed lists whose executing buffer has not completed yet.
    waiting: usize,
    /// Bytes the contexts keep for recording and for reuse.
    retained: usize,
}

impl Recycling {
    /// Read between frames, when no worker drives the contexts. `cached` and `waiting` are
    /// as of each context's last `finish`: lists destroyed since then sit on its lock-free
    /// list until the next one.
    fn of(contexts: &[DeferredContext]) -> Recycling {
        let mut sum = Recycling::default();
        for stats in contexts.iter().map(DeferredContext::stats) {
            sum.recycled += stats.recycled;
            sum.created += stats.created;
            sum.cached += stats.cached_lists;
            sum.waiting += stats.waiting_lists;
            sum.retained += stats.retained_bytes;
        }
        sum
    }

    /// The share of the lists made since `earlier` that reused recycled memory.
    fn hit_rate_since(&self, earlier: &Recycling) -> f64 {
        let recycled = self.recycled - earlier.recycled;
        let made = recycled + self.created - earlier.created;
        if made == 0 {
            return 1.0;
        }
        recycled as f64 / made as f64
    }
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
}

const USAGE: &str = "usage: frame [--out PATH] [--trace PATH] [--timeline PATH] [--frames N]";

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Res<Options> {
        let mut options = Options {
            out: "frame.png".into(),
            trace: None,
            timeline: None,
            frames: FRAMES,
        };
        while let Some(flag) = args.next() {
            let value = args.next().ok_or(USAGE)?;
            match flag.as_str() {
                "--out" => options.out = value.into(),
                "--trace" => options.trace = Some(value.into()),
                "--timeline" => options.timeline = Some(value.into()),
                "--frames" => options.frames = value.parse().map_err(|_| USAGE)?,
                _ => return Err(USAGE.into()),
            }
        }
        if options.frames <= WARMUP {
            return Err(format!("--frames must be more than the {WARMUP} warm-up frames").into());
        }
        Ok(options)
    }

    /// Whether the engine's spans are captured.
    fn traced(&self) -> bool {
        self.trace.is_some() || self.timeline.is_some()
    }
}

/// The frame's Blt, present and swap-chain rotation on one IC (both devices do the same).
fn present(ic: &mut ImmediateContext, s: &Scene) -> Res {
    ic.blt(&BltArgs {
        dst: s.swap_chain[0],
        dst_subresource: 0,
        dst_rect: Rect::whole(SCREEN_W, SCREEN_H),
        src: s.canvas,
        src_subresource: 0,
        src_rect: None,
        flags: BltFlags::CONVERT | BltFlags::STRETCH,
        rotation: Rotation::Identity,
    })?;
    ic.present(&PresentArgs {
        src: s.swap_chain[0],
        src_subresource: 0,
        dst: None,
        dxgi_context: DxgiContext(0),
        flags: PresentFlags::FLIP,
        flip_interval: 1,
    })?;
    Ok(ic.rotate_resource_identities(&s.swap_chain)?)
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

/// Writes the screen's `B8G8R8A8_UNORM` bytes as an RGBA PNG.
fn write_screen(path: &std::path::Path, bgra: &[u8]) -> Res {
    let rgba: Vec<u8> = bgra
        .chunks_exact(4)
        .flat_map(|p| [p[2], p[1], p[0], 255])
        .collect();
    write_png(path, SCREEN_W, SCREEN_H, &rgba)
}

/// Writes RGBA bytes as a PNG.
fn write_png(path: &std::path::Path, width: u32, height: u32, rgba: &[u8]) -> Res {
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut encoder = png::Encoder::new(file, width, height);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.write_header()?.write_image_data(rgba)?;
    Ok(())
}

#[cfg(test)]
mod tests;

fn main() {
    match Options::parse(std::env::args().skip(1)).and_then(|options| job(&options)) {
        Ok(_) => println!("frame: OK"),
        Err(e) => {
            eprintln!("frame: FAILED: {e}");
            exit(1);
        }
    }
}

/// The job: [`run`] on a thread of its own, named for the immediate context it drives,
/// capturing the engine's spans when a trace or a timeline is asked for, then writing them;
/// returns what was captured.
fn job(options: &Options) -> Res<Option<timeline::capture::Captured>> {
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
            let file = std::io::BufWriter::new(std::fs::File::create(path)?);
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
            let title = format!(
                "the last frame: {WORKERS} deferred contexts record in parallel, the immediate \
                 context executes (lists {mode:?})"
            );
            let timeline = timeline::picture::Timeline::of_last_frame(captured, &title)
                .ok_or("no frame was captured")?;
            let picture = timeline.paint();
            let (width, height) = (picture.width as u32, picture.height as u32);
            write_png(path, width, height, &picture.rgba)?;
            println!(
                "timeline: the last frame ({:.2} ms) on {} threads, in {}",
                (timeline.to - timeline.from) as f64 / 1e6,
                timeline.lanes.len(),
                path.display()
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
    // Deallocate kernel memory only once the GPU is done with it (R-D4's full destruction),
    // and reuse command-list memory only once the executing buffer has completed: the GPU
    // also reads it (the soft driver flags an earlier reuse).
    let config = DeviceConfig::default()
        .with_retire_clock(Clock::Completed)
        .with_list_clock(Clock::Completed);
    let soft = |gpu| SoftConfig {
        gpu,
        trace: false,
        ..SoftConfig::default()
    };
    let (device, mut ic, world) = soft::device(soft(Gpu::PollLag(2)), config.clone())?;
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

    for f in 0..frames {
        let frame_start = std::time::Instant::now();
        let frame_span = tracing::info_span!(target: timeline::capture::FRAME_TARGET, "frame", index = u64::from(f));
        // The frame's upload buffer: every list uses it, and the churn thread destroys it
        // once they are finished, before the IC executes them (R-D1: the lists hold it).
        let upload = device.create_resource(buffer(UPLOAD, Usage::Default))?;
        let recorded = Barrier::new(WORKERS + 1);
        // Every worker destroys the lists handed to it before any worker records, so each
        // context's first `finish` of the frame takes them all and the printed counts are
        // the same every run. Not needed for correctness: a list destroyed later is taken by
        // a later `finish`, and under the completed list clock it is reusable only in the
        // next frame anyway.
        let destroyed = Barrier::new(WORKERS);
        let to_destroy = std::mem::replace(&mut handed, (0..WORKERS).map(|_| Vec::new()).collect());
        let (lists, churned) = std::thread::scope(|s| -> Res<_> {
            let workers: Vec<_> = contexts
                .iter_mut()
                .zip(to_destroy)
                .enumerate()
                .map(|(w, (dc, old))| {
                    let (scene, recorded, destroyed) = (&scene, &recorded, &destroyed);
                    let worker = std::thread::Builder::new().name(timeline::deferred(w));
                    worker.spawn_scoped(s, move || -> Res<WorkerLists> {
                        let _traced = dispatch.map(tracing::dispatcher::set_default);
                        // The free-threaded destroy (R-R4): RecycleDestroyCommandList, then
                        // a push onto the owning context's lock-free list (R-R7).
                        drop(old);
                        destroyed.wait();
                        let lists = record_lists(dc, scene, upload, f, w);
                        recorded.wait();
                        lists
                    })
                })
                .collect::<std::io::Result<Vec<_>>>()?;
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

        // The IC: execute in worker order, each worker's large list then its small ones
        // (R-C3), destroy the lists, flush (R-D2). A list may be destroyed as soon as it has
        // been executed: its memory waits for the buffer (the list clock) before reuse.
        let small_lists = WORKERS * SMALL;
        let mut marked = Vec::new();
        for (
            w,
            WorkerLists {
                large,
                small,
                tiles,
            },
        ) in lists.into_iter().enumerate()
        {
            let tile_lists = tiles.iter().map(|t| &t.list);
            for list in std::iter::once(&large).chain(&small).chain(tile_lists) {
                ic.execute_command_list(list)?;
                if ic.bindings().next().is_some() {
                    return Err("bindings survived CommandListExecute (R-C3)".into());
                }
            }
            // The tiles whose lists came from recycled memory get their mark.
            for tile in tiles.iter().filter(|t| t.recycled) {
                mark_recycled(&mut ic, scene.canvas, tile.at)?;
                marked.push(tile.at);
            }
            drop((large, tiles));
            // Half the small lists are destroyed here, on the IC thread; the other half go
            // to the next worker, which destroys them next frame (another thread).
            for (i, list) in small.into_iter().enumerate() {
                if i % 2 == 0 {
                    drop(list);
                } else {
                    handed[(w + 1) % WORKERS].push(list);
                }
            }
        }
        // Blt, present (which flushes the buffer first: R-X1) and rotate the swap chain. The
        // present is the Present point: amortised processing runs at least once per frame
        // (R-A1), which also tells each context to trim its pools at its next `finish`.
        present(&mut ic, &scene)?;
        let frame_time = frame_start.elapsed();
        drop(frame_span);
        // The frame's line, from the statistics the present published, read on the HUD's
        // thread.
        let lists_now = Recycling::of(&contexts);
        hud.tick.send(Frame {
            index: f,
            time: frame_time,
            lists: WORKERS + small_lists + tiles().count(),
            recycled: lists_now.hit_rate_since(&recycling_before),
            churned,
            kept: lists_now.retained,
        })?;
        hud.done.recv()?;

        // The reference: the same commands, single-threaded, straight on its IC (its spans
        // are not captured).
        let _untraced = tracing::dispatcher::set_default(&Dispatch::none());
        let ref_upload = ref_device.create_resource(buffer(UPLOAD, Usage::Default))?;
        for w in 0..WORKERS {
            record(&mut ref_ic, &ref_scene, ref_upload, f, w)?;
            ref_ic.clear_state()?;
            for i in 0..SMALL {
                ref_ic.command(&small_copy(&ref_scene, w, i))?;
            }
            for tile in tiles().skip(w).step_by(WORKERS) {
                paint_tile(&mut ref_ic, ref_scene.canvas, f, tile, w)?;
            }
        }
        for &at in &marked {
            mark_recycled(&mut ref_ic, ref_scene.canvas, at)?;
        }
        ref_device.destroy(ref_upload)?;
        present(&mut ref_ic, &ref_scene)?;
        if world.screen() != ref_world.screen() {
            return Err(format!("frame {f}: the screens differ").into());
        }

        recycling_before = lists_now;
        if f + 1 == WARMUP {
            warm = lists_now;
        }
        if scene.contents(&device, &world)? != ref_scene.contents(&ref_device, &ref_world)? {
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
    // queue (R-D2) and poll the fence, so everything is destroyed and deallocated.
    let idle = device.create_resource(buffer(16, Usage::Default))?;
    device.destroy(idle)?;
    created += 1;
    ic.flush()?;
    ic.flush()?;
    let stats = ic.retire_stats();
    let pending = stats.waiting_destruction + stats.waiting_deallocation;
    if pending != 0 || stats.destroyed != created as u64 || world.submits() != u64::from(frames) {
        return Err(format!("after idle flushes: {stats:?}, {} submits", world.submits()).into());
    }

    let elapsed = start.elapsed();
    let screen = world.screen().ok_or("nothing was presented")?;
    write_screen(&options.out, &screen)?;
    drop(hud.tick);
    hud.thread.join().map_err(|_| "the HUD thread panicked")?;
    let errors = world.errors().len() + ref_world.errors().len();
    let mode = device.list_mode();
    drop(contexts);
    ic.destroy_device()?;
    tracing::dispatcher::with_default(&Dispatch::none(), || ref_ic.destroy_device())?;
    let violations = world.check_after_device_destroyed();
    let ref_violations = ref_world.check_after_device_destroyed();
    println!(
        "summary: {frames} frames x {WORKERS} workers in {elapsed:.2?} (lists {mode:?}); {created} objects created and \
         destroyed, {} really destroyed and {} deallocated before DestroyDevice; {} submits; \
         bytes identical to the single-threaded run every frame; errors reported: {errors}",
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
        "frame: the last presented frame ({SCREEN_W}x{SCREEN_H}) is in {}: each tile tinted by \
         the worker that recorded it (red, green, blue), a white corner where its list came \
         from recycled memory",
        options.out.display()
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
