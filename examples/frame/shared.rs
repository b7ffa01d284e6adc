//! The main job's frame, generic over the driver: the scene, what each worker records, the
//! immediate context's executes, Blt, present and rotation, and the single-threaded
//! reference run. The soft main job (`examples/frame/main.rs`) and the Vulkan driver's
//! (`drivers/vulkan/examples/frame/main.rs`) both include this file (`#[path]`), so the two
//! drivers run the same frames.
// Each of the two examples uses a different part of the scene's fields and helpers.
#![allow(dead_code)]

use std::sync::Barrier;

use tracing::Dispatch;

use cmdlist::dxgi::{
    BltArgs, BltFlags, DisplayFormat, DxgiContext, PresentArgs, PresentFlags, Rect, Rotation,
};
use cmdlist::handle::{Resource, View};
use cmdlist::soft::SoftCommand;
use cmdlist::ViewDesc;
use cmdlist::{AllocationHandle, AnyHandle, BindClass, BindPoint, Driver, Handle, HandleType};
use cmdlist::{BindFlags, Kernel, MapCaps, QueryKind, ResourceDesc, Stage, Texture2d, Usage};
use cmdlist::{CommandList, DeferredContext, Device, ImmediateContext, ListMode};
use cmdlist::{MapFlags, MapType};

/// The examples' error type.
pub type Res<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Frames the job runs (`--frames N` to change).
pub const FRAMES: u32 = 8;
pub const WORKERS: usize = 3;
pub const TARGET: u64 = 256;
pub const DYNAMIC: u64 = 32;
/// A stretch of a worker's constants ring: what one reader takes (16 bytes, a draw's four
/// constants), so the ring holds `DYNAMIC / STRETCH` of them.
pub const STRETCH: u64 = 16;
pub const BACK: u64 = 96 * WORKERS as u64 + 64;
pub const UPLOAD: u64 = 16 * WORKERS as u64 + 32;
pub const CB0: BindPoint = BindPoint::new(BindClass::ConstantBuffer(Stage::Pixel), 0);
pub const RT0: BindPoint = BindPoint::new(BindClass::RenderTarget, 0);
pub const SRV0: BindPoint = BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0);
/// Small (single-copy) lists per worker per frame.
pub const SMALL: usize = 50;
/// Staging buffers per worker, the small copies' destinations. Odd: see [`small_copy`].
pub const STAGING: usize = 7;
pub const STAGING_SIZE: u64 = 32;
/// Frames that fill the caches: under the completed list clock, a list executed in frame
/// `f` is reusable in frame `f + 2`, so each context makes two frames' worth of lists.
pub const WARMUP: u32 = 2;
/// The share of lists that must come from recycled memory after the warm-up.
pub const MIN_HIT_RATE: f64 = 0.90;
/// The canvas the workers paint, in tiles of `TILE`×`TILE` pixels.
pub const CANVAS_W: u32 = 192;
pub const CANVAS_H: u32 = 112;
pub const TILE: u32 = 16;
/// The screen: the canvas stretched 2x.
pub const SCREEN_W: u32 = 2 * CANVAS_W;
pub const SCREEN_H: u32 = 2 * CANVAS_H;

/// The list modes as `--mode` names them, in the order the usage lists them.
pub const MODES: [(&str, ListMode); 3] = [
    ("replayed", ListMode::Replayed),
    ("driver-built", ListMode::DriverBuilt),
    ("emulated", ListMode::Emulated),
];

/// The list mode `--mode NAME` asks for; an error naming the value and the choices otherwise.
pub fn parse_mode(name: &str) -> Result<ListMode, String> {
    MODES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|&(_, mode)| mode)
        .ok_or_else(|| format!("--mode {name:?}: expected replayed, driver-built or emulated"))
}

/// The name `--mode` gives `mode`.
pub fn mode_name(mode: ListMode) -> &'static str {
    MODES
        .iter()
        .find(|&&(_, m)| m == mode)
        .map_or("unknown", |&(name, _)| name)
}

/// A one-level, single-sampled 2D texture in `format`.
pub fn texture(width: u32, height: u32, format: DisplayFormat, bind: BindFlags) -> ResourceDesc {
    let shape = Texture2d {
        width,
        height,
        format: format.to_dxgi(),
        ..Texture2d::default()
    };
    ResourceDesc::texture(shape, bind).expect("a display format is a DXGI format")
}

/// The colour of the tiles deferred context `w` records: yellow, red and blue of Paul Tol's
/// high-contrast scheme, told apart with any colour vision and in grey.
pub const TINTS: [[u8; 3]; WORKERS] = [[221, 170, 51], [187, 85, 102], [0, 68, 136]];

/// The canvas's colour at pixel (x, y) of frame `f`, in a tile deferred context `w` records,
/// as sRGB-encoded RGBA bytes: the context's colour, rings drifting across the canvas in a
/// lighter and a darker shade of it, each tile's border darker so the tiles show.
pub fn paint(f: u32, x: u32, y: u32, w: usize) -> [u8; 4] {
    let (fx, fy) = (x as f32 / CANVAS_W as f32, y as f32 / CANVAS_H as f32);
    let (cx, cy) = (
        0.5 + 0.3 * (f as f32 * 0.7).cos(),
        0.5 + 0.25 * (f as f32 * 0.9).sin(),
    );
    let d = ((fx - cx).powi(2) * 3.0 + (fy - cy).powi(2)).sqrt();
    let ring = (0.5 + 0.5 * (d * 40.0 - f as f32 * 1.3).cos()).powi(3);
    let border = x % TILE == 0 || y % TILE == 0;
    let shade = if border { 0.6 } else { 1.0 };
    let channel = |c: u8| {
        let c = f32::from(c) / 255.0;
        let (dark, light) = (0.7 * c, c + 0.25 * (1.0 - c));
        ((dark + (light - dark) * ring) * shade * 255.0) as u8
    };
    let [r, g, b] = TINTS[w];
    [channel(r), channel(g), channel(b), 255]
}

/// The tiles of the canvas, as (left, top) corners; worker `w` paints every `WORKERS`-th.
pub fn tiles() -> impl Iterator<Item = (u32, u32)> {
    (0..CANVAS_H / TILE).flat_map(|ty| (0..CANVAS_W / TILE).map(move |tx| (tx * TILE, ty * TILE)))
}

/// Paints one tile of frame `f` in worker `w`'s colour, which records it: one
/// UpdateSubresource per row of the tile.
pub fn paint_tile(
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
            row.extend_from_slice(&paint(f, x, y, w));
        }
        let offset = 4 * (u64::from(y) * u64::from(CANVAS_W) + u64::from(left));
        r.update(canvas, offset, &row)?;
    }
    Ok(())
}

pub fn buffer(byte_size: u64, usage: Usage) -> ResourceDesc {
    ResourceDesc {
        byte_size,
        usage,
        ..Default::default()
    }
}

pub fn copy(
    dst: Handle<Resource>,
    at: u64,
    src: Handle<Resource>,
    from: u64,
    len: u64,
) -> SoftCommand {
    let (dst_offset, src_offset) = (at, from);
    SoftCommand::CopyRegion {
        dst,
        dst_offset,
        src,
        src_offset,
        len,
    }
}

/// A worker's constants ring: a dynamic buffer of `DYNAMIC` bytes that takes
/// Map(NO_OVERWRITE) (R-M3): a constant buffer where the driver's `caps` allow it there, a
/// vertex buffer (D3D11.0's) otherwise.
pub fn ring_desc(caps: MapCaps) -> ResourceDesc {
    let bind = match caps.contains(MapCaps::NO_OVERWRITE_CONSTANT_BUFFER) {
        true => BindFlags::CONSTANT_BUFFER,
        false => BindFlags::VERTEX_BUFFER,
    };
    ResourceDesc {
        bind,
        ..buffer(DYNAMIC, Usage::Dynamic)
    }
}

/// A worker's constants ring within one recording: each [`Ring::push`] writes the next
/// `STRETCH`, through a Map(DISCARD) when the ring starts or wraps and a Map(NO_OVERWRITE)
/// otherwise, so the commands recorded before it keep reading the stretches they name. A
/// deferred context's Map(NO_OVERWRITE) needs a discard of the resource earlier in the same
/// recording (R-M2), so each recording starts its ring afresh.
pub struct Ring {
    resource: Handle<Resource>,
    /// The next stretch's offset; `None` before the first push.
    next: Option<u64>,
}

impl Ring {
    pub fn new(resource: Handle<Resource>) -> Ring {
        Ring {
            resource,
            next: None,
        }
    }

    /// Writes `stretch` (`STRETCH` bytes) at the ring's next stretch; returns its offset,
    /// for the command that reads it to name.
    pub fn push(&mut self, r: &mut impl Recorder, stretch: &[u8]) -> Res<u64> {
        match self.next.filter(|&at| at + STRETCH <= DYNAMIC) {
            Some(at) => r.write_no_overwrite(self.resource, at, stretch)?,
            None => {
                let mut whole = [0; DYNAMIC as usize];
                whole[..stretch.len()].copy_from_slice(stretch);
                r.write_discard(self.resource, &whole)?;
                self.next = Some(0);
            }
        }
        let at = self.next.unwrap_or(0);
        self.next = Some(at + STRETCH);
        Ok(at)
    }
}

/// The persistent objects (the same set is created on both devices, in the same order).
pub struct Scene {
    pub target: Vec<Handle<Resource>>,
    pub rtv: Vec<Handle<View>>,
    pub srv: Vec<Handle<View>>,
    pub dynamic: Vec<Handle<Resource>>,
    /// `STAGING` per worker: worker `w`'s are `staging[w * STAGING..][..STAGING]`.
    pub staging: Vec<Handle<Resource>>,
    pub back: Handle<Resource>,
    /// The canvas the tiles are painted into.
    pub canvas: Handle<Resource>,
    /// A staging buffer the immediate context reads a row of the canvas back through, each
    /// frame (R-M4).
    pub readback: Handle<Resource>,
    /// The swap chain: the back buffer is always `swap_chain[0]`, whose allocation rotates.
    pub swap_chain: [Handle<Resource>; 2],
}

impl Scene {
    /// Creates the scene's objects on `device`.
    pub fn create<D: Driver, K: Kernel>(device: &Device<D, K>) -> Res<Scene> {
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
            dynamic.push(device.create_resource(ring_desc(device.driver().map_caps()))?);
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
        let readback = device.create_resource(buffer(READBACK, Usage::Staging))?;
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
            readback,
            swap_chain,
        })
    }

    /// Every persistent resource's bytes, `read` from its allocation: the workers' targets,
    /// constant buffers and staging buffers, the shared back buffer, the canvas, the
    /// readback buffer, then the
    /// swap chain's two surfaces (the last [`SURFACES`]).
    pub fn contents<D: Driver, K: Kernel>(
        &self,
        device: &Device<D, K>,
        read: impl Fn(AllocationHandle, &D::Object) -> Option<Vec<u8>>,
    ) -> Res<Vec<Vec<u8>>> {
        let all = self.target.iter().chain(&self.dynamic).chain(&self.staging);
        let all = all
            .chain([&self.back, &self.canvas, &self.readback])
            .chain(&self.swap_chain);
        all.map(|&r| {
            let object = device.object(r)?;
            let memory = object.allocation().ok_or("no memory")?;
            Ok(read(memory, &object).ok_or("allocation not live")?)
        })
        .collect()
    }
}

/// Where a worker's commands go: a deferred context (recording) or, for the
/// single-threaded reference run, an immediate context.
pub trait Recorder {
    fn update(&mut self, r: Handle<Resource>, offset: u64, data: &[u8]) -> Res;
    fn command(&mut self, c: SoftCommand) -> Res;
    fn bind(&mut self, point: BindPoint, object: AnyHandle) -> Res;
    /// Map(DISCARD), write `data` (the resource's whole new contents), Unmap.
    fn write_discard(&mut self, r: Handle<Resource>, data: &[u8]) -> Res;
    /// Map(NO_OVERWRITE) (on a deferred context, after a Map(DISCARD) of `r` in the
    /// recording), write `data` at `offset`, Unmap.
    fn write_no_overwrite(&mut self, r: Handle<Resource>, offset: u64, data: &[u8]) -> Res;
}

/// `data` written at `offset` of the mapped `bytes`.
fn write_at(bytes: &mut [u8], offset: u64, data: &[u8]) -> Res {
    let stretch = usize::try_from(offset)
        .ok()
        .and_then(|at| bytes.get_mut(at..)?.get_mut(..data.len()))
        .ok_or("a write past the mapped bytes")?;
    stretch.copy_from_slice(data);
    Ok(())
}

impl<D: Driver<Command = SoftCommand>, K: Kernel> Recorder for DeferredContext<D, K> {
    fn update(&mut self, r: Handle<Resource>, offset: u64, data: &[u8]) -> Res {
        Ok(DeferredContext::<D, K>::update(self, r, offset, data)?)
    }
    fn command(&mut self, c: SoftCommand) -> Res {
        Ok(DeferredContext::<D, K>::command(self, c)?)
    }
    fn bind(&mut self, point: BindPoint, object: AnyHandle) -> Res {
        Ok(DeferredContext::<D, K>::bind(self, point, Some(object))?)
    }
    fn write_discard(&mut self, r: Handle<Resource>, data: &[u8]) -> Res {
        self.map_discard(r)?.copy_from_slice(data);
        Ok(self.unmap(r)?)
    }
    fn write_no_overwrite(&mut self, r: Handle<Resource>, offset: u64, data: &[u8]) -> Res {
        write_at(self.map_no_overwrite(r)?, offset, data)?;
        Ok(self.unmap(r)?)
    }
}

impl<D: Driver<Command = SoftCommand>, K: Kernel> Recorder for ImmediateContext<D, K> {
    fn update(&mut self, r: Handle<Resource>, offset: u64, data: &[u8]) -> Res {
        Ok(ImmediateContext::<D, K>::update(self, r, offset, data)?)
    }
    fn command(&mut self, c: SoftCommand) -> Res {
        Ok(ImmediateContext::<D, K>::command(self, &c)?)
    }
    fn bind(&mut self, point: BindPoint, object: AnyHandle) -> Res {
        Ok(ImmediateContext::<D, K>::bind(self, point, Some(object))?)
    }
    fn write_discard(&mut self, r: Handle<Resource>, data: &[u8]) -> Res {
        self.map_discard(r)?.copy_from_slice(data);
        Ok(self.unmap(r)?)
    }
    fn write_no_overwrite(&mut self, r: Handle<Resource>, offset: u64, data: &[u8]) -> Res {
        write_at(self.map_no_overwrite(r)?, offset, data)?;
        Ok(self.unmap(r)?)
    }
}

/// Worker `w`'s commands of frame `f`. Its constants go through its ring ([`Ring`]), a
/// stretch per reader: the first by Map(DISCARD), the next by Map(NO_OVERWRITE) after the
/// copy that reads the first was recorded; each copy names its stretch. Its last copy
/// overlaps its neighbours' part of the back buffer, so the result depends on executing the
/// lists in worker order.
pub fn record(r: &mut impl Recorder, s: &Scene, upload: Handle<Resource>, f: u32, w: usize) -> Res {
    let (f8, w8, at) = (f as u8, w as u8, 16 * w as u64);
    let constants: Vec<u8> = (0..DYNAMIC as u8)
        .map(|i| i ^ f8.wrapping_mul(37) ^ w8)
        .collect();
    let (mut ring, mut stretches) = (Ring::new(s.dynamic[w]), constants.chunks(STRETCH as usize));
    let first = ring.push(r, stretches.next().ok_or("no constants")?)?;
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
    // Each copy reads the stretch it names, as a draw would read its constants.
    let read = |offset| copy(s.target[w], 128 + offset, s.dynamic[w], offset, STRETCH);
    r.command(read(first))?;
    for stretch in stretches {
        let offset = ring.push(r, stretch)?;
        r.command(read(offset))?;
    }
    r.bind(SRV0, s.srv[w].any())?;
    // From a place that moves with the frame, and wraps before it would read past the
    // target's end (frame 13 of a longer run).
    let from = (8 * u64::from(f)) % (TARGET - 160 + 8);
    r.command(copy(s.back, 96 * w as u64, s.target[w], from, 160))
}

/// Worker `w`'s `i`-th small list of a frame: one CopyResource (R-R1's example of a small
/// list) into one of its staging buffers, alternately from its target and from its constant
/// buffer, as the worker's large list of the frame left them. `STAGING` is odd, so each
/// staging buffer is written from both sources in turn: its final bytes show whether the
/// small lists ran in order, and after the large one.
pub fn small_copy(s: &Scene, w: usize, i: usize) -> SoftCommand {
    let src = if i % 2 == 0 {
        s.target[w]
    } else {
        s.dynamic[w]
    };
    let dst = s.staging[w * STAGING + i % STAGING];
    SoftCommand::Copy { dst, src }
}

/// A worker's lists of one frame, in the order the IC executes them.
pub struct WorkerLists<D: Driver, K: Kernel> {
    pub large: CommandList<D, K>,
    pub small: Vec<CommandList<D, K>>,
    /// One per tile the worker paints.
    pub tiles: Vec<TileList<D, K>>,
}

/// A tile's list, where the tile is, and whether `finish` made the list from recycled memory.
pub struct TileList<D: Driver, K: Kernel> {
    pub list: CommandList<D, K>,
    pub at: (u32, u32),
    pub recycled: bool,
}

/// Frames the strip on each tile shows at most (the last ones), a pixel of the canvas each.
pub const STRIP: usize = 8;
/// The strip's height in canvas pixels.
pub const STRIP_H: u32 = 2;
/// A strip cell's colour: the tile's list made from fresh memory (CreateCommandList), or
/// from recycled memory (RecycleCreateCommandList).
pub const FRESH: [u8; 4] = [20, 20, 20, 255];
pub const RECYCLED: [u8; 4] = [255, 255, 255, 255];
/// The strip's frame.
const FRAME: [u8; 4] = [150, 150, 150, 255];

/// Whose lists `finish` made from recycled memory, frame by frame: drawn on each tile as a
/// strip near its top, white where that frame's list of the tile came from recycled memory,
/// black where it came from fresh memory. Its cells: the first frame (no list was destroyed
/// yet, so every list is made from fresh memory, in every list mode), a gap for the rest of
/// the warm-up, then the frames after the `WARMUP` frames (the last `STRIP - 2` of them). The
/// warm-up's other frames are left out: whether their lists come from recycled memory
/// depends on the list mode (an emulating engine reuses its own memory a frame earlier), and
/// the picture is the same in every mode.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Per frame, the tiles whose lists came from recycled memory.
    frames: Vec<Vec<(u32, u32)>>,
}

impl History {
    /// Adds the next frame's tiles whose lists came from recycled memory.
    pub fn push(&mut self, recycled: Vec<(u32, u32)>) {
        self.frames.push(recycled);
    }

    /// The frames after the warm-up that the strip shows: the last `STRIP - 2`.
    pub fn shown(&self) -> std::ops::Range<usize> {
        let end = self.frames.len();
        end.saturating_sub(STRIP - 2).max(WARMUP as usize).min(end)..end
    }

    /// The strip's cells, left to right: `Some(frame)` for a frame's cell, `None` for the gap
    /// that stands for the warm-up's frames after the first. Empty while the warm-up lasts.
    pub fn cells(&self) -> Vec<Option<usize>> {
        let shown = self.shown();
        if shown.is_empty() {
            return Vec::new();
        }
        let mut cells = vec![Some(0), None];
        cells.extend(shown.map(Some));
        cells
    }

    /// The strip's first cell, from the tile's left edge: the strip is centred.
    pub fn strip_x(&self) -> u32 {
        (TILE - self.cells().len() as u32) / 2
    }

    /// Draws every tile's strip over the canvas, in a grey frame a pixel wide: one
    /// UpdateSubresource per row. Nothing while the warm-up lasts.
    pub fn draw(&self, r: &mut impl Recorder, canvas: Handle<Resource>) -> Res {
        let cells = self.cells();
        if cells.is_empty() {
            return Ok(());
        }
        let edge = vec![FRAME; cells.len() + 2].concat();
        let mut row = Vec::with_capacity(edge.len());
        for (left, top) in tiles() {
            row.clear();
            row.extend_from_slice(&FRAME);
            for cell in &cells {
                row.extend_from_slice(match cell {
                    Some(f) if self.frames[*f].contains(&(left, top)) => &RECYCLED,
                    Some(_) => &FRESH,
                    None => &FRAME,
                });
            }
            row.extend_from_slice(&FRAME);
            let x = left + self.strip_x() - 1;
            let (y0, y1) = (top + 1, top + 2 + STRIP_H);
            for y in y0..=y1 {
                let offset = 4 * (u64::from(y) * u64::from(CANVAS_W) + u64::from(x));
                let bytes = if y == y0 || y == y1 { &edge } else { &row };
                r.update(canvas, offset, bytes)?;
            }
        }
        Ok(())
    }
}

/// Worker `w`'s lists of frame `f`: the large one, then `SMALL` single-copy lists, each
/// recorded and finished on the same context. Once the lists of two frames back are destroyed
/// and their buffer has completed, `finish` makes these from their memory (R-R5..R-R7), not
/// from fresh memory.
pub fn record_lists<D: Driver<Command = SoftCommand>, K: Kernel>(
    dc: &mut DeferredContext<D, K>,
    s: &Scene,
    upload: Handle<Resource>,
    f: u32,
    w: usize,
) -> Res<WorkerLists<D, K>> {
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
pub struct Recycling {
    /// Lists made from recycled memory (RecycleCreateCommandList).
    pub recycled: u64,
    /// Lists made from fresh memory (CreateCommandList).
    pub created: u64,
    /// Destroyed lists recycled and ready for reuse.
    pub cached: usize,
    /// Destroyed lists whose executing buffer has not completed yet.
    pub waiting: usize,
    /// Bytes the contexts keep for recording and for reuse.
    pub retained: usize,
}

impl Recycling {
    /// Read between frames, when no worker drives the contexts. `cached` and `waiting` are
    /// as of each context's last `finish`: lists destroyed since then sit on its lock-free
    /// list until the next one.
    pub fn of<D: Driver, K: Kernel>(contexts: &[DeferredContext<D, K>]) -> Recycling {
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
    pub fn hit_rate_since(&self, earlier: &Recycling) -> f64 {
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
pub fn churn<D: Driver, K: Kernel>(device: &Device<D, K>) -> Res<usize> {
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

/// The bytes of the canvas row read back each frame: the top row of the first tile, which
/// worker 0 paints and no strip covers.
const READBACK: u64 = 4 * TILE as u64;

/// Reads the top row of the canvas's first tile back through the staging buffer: a copy on
/// the immediate context, then Map(READ) with DO_NOT_WAIT, polled until the GPU has run the
/// copy (R-M4: the first poll flushes the buffer; `WasStillDrawing` until then), and checks
/// the bytes are what worker 0 painted there in frame `f`. Returns the polls that found the
/// GPU still drawing.
pub fn read_back<D: Driver<Command = SoftCommand>, K: Kernel>(
    ic: &mut ImmediateContext<D, K>,
    s: &Scene,
    f: u32,
) -> Res<u32> {
    ic.command(&copy(s.readback, 0, s.canvas, 0, READBACK))?;
    let mut polls = 0;
    let bytes = loop {
        match ic.map(s.readback, MapType::Read, MapFlags::DO_NOT_WAIT) {
            Ok(bytes) => break bytes.to_vec(),
            Err(cmdlist::Error::WasStillDrawing) => {
                polls += 1;
                std::thread::yield_now();
            }
            Err(e) => return Err(e.into()),
        }
    };
    ic.unmap(s.readback)?;
    let painted: Vec<u8> = (0..TILE).flat_map(|x| paint(f, x, 0, 0)).collect();
    if bytes != painted {
        return Err(format!("frame {f}: the canvas row read back is not what was painted").into());
    }
    Ok(polls)
}

/// Whether an error the kernel heard is a readback's poll finding the GPU still drawing:
/// reported as every refused call is (R-E2), and expected.
pub fn is_poll(error: &cmdlist::Error) -> bool {
    *error == cmdlist::Error::WasStillDrawing
}

/// The frame's Blt, present and swap-chain rotation on one IC (both devices do the same).
pub fn present<D: Driver, K: Kernel>(ic: &mut ImmediateContext<D, K>, s: &Scene) -> Res {
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

/// The swap chain's surfaces, the last entries of [`Scene::contents`].
pub const SURFACES: usize = 2;

/// What [`frame`] did, for the frame's line and the reference run.
pub struct FrameDone {
    /// The tiles whose lists came from recycled memory.
    pub marked: Vec<(u32, u32)>,
    /// Short-lived objects the churn thread made and destroyed.
    pub churned: usize,
    /// Lists the immediate context executed.
    pub lists: usize,
    /// Polls of the readback that found the GPU still drawing.
    pub polls: u32,
}

/// One frame of the job on `device`: each worker records its lists on its own thread
/// (named `thread_name(w)`, the engine's spans going to `dispatch`, if any) while the churn
/// thread makes and destroys objects and then the frame's upload buffer; the immediate
/// context executes the lists in worker order, destroys them (half the small ones are
/// `handed` to the next worker, which destroys them next frame), adds the frame to the
/// tiles' `history` and draws their strips, Blts, presents and rotates the swap chain.
#[allow(clippy::too_many_arguments)]
pub fn frame<D, K>(
    device: &Device<D, K>,
    ic: &mut ImmediateContext<D, K>,
    scene: &Scene,
    contexts: &mut [DeferredContext<D, K>],
    handed: &mut Vec<Vec<CommandList<D, K>>>,
    history: &mut History,
    f: u32,
    dispatch: Option<&Dispatch>,
    thread_name: fn(usize) -> String,
) -> Res<FrameDone>
where
    D: Driver<Command = SoftCommand>,
    K: Kernel,
{
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
    let to_destroy = std::mem::replace(handed, (0..WORKERS).map(|_| Vec::new()).collect());
    let (lists, churned) = std::thread::scope(|s| -> Res<_> {
        let workers: Vec<_> = contexts
            .iter_mut()
            .zip(to_destroy)
            .enumerate()
            .map(|(w, (dc, old))| {
                let (scene, recorded, destroyed) = (&scene, &recorded, &destroyed);
                let worker = std::thread::Builder::new().name(thread_name(w));
                worker.spawn_scoped(s, move || -> Res<WorkerLists<D, K>> {
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
            let made = churn(device);
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

    // The IC: execute in worker order, each worker's large list then its small ones
    // (R-C3), destroy the lists, flush (R-D2). A list may be destroyed as soon as it has
    // been executed: its memory waits for the buffer (the list clock) before reuse.
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
        marked.extend(tiles.iter().filter(|t| t.recycled).map(|t| t.at));
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
    // Each tile's strip: whether its lists came from recycled memory, this frame and before.
    history.push(marked.clone());
    history.draw(ic, scene.canvas)?;
    // A row of the canvas read back through a staging buffer, polled (R-M4).
    let polls = read_back(ic, scene, f)?;
    // Blt, present (which flushes the buffer first: R-X1) and rotate the swap chain. The
    // present is the Present point: amortised processing runs at least once per frame
    // (R-A1), which also tells each context to trim its pools at its next `finish`.
    present(ic, scene)?;
    Ok(FrameDone {
        marked,
        churned,
        lists: WORKERS + WORKERS * SMALL + tiles().count(),
        polls,
    })
}

/// Frame `f` of the reference: the same commands as [`frame`]'s, single-threaded, straight
/// on an immediate context, the strips drawn from the `history` the frame drew.
pub fn reference<D, K>(
    device: &Device<D, K>,
    ic: &mut ImmediateContext<D, K>,
    scene: &Scene,
    f: u32,
    history: &History,
) -> Res
where
    D: Driver<Command = SoftCommand>,
    K: Kernel,
{
    let upload = device.create_resource(buffer(UPLOAD, Usage::Default))?;
    for w in 0..WORKERS {
        record(ic, scene, upload, f, w)?;
        ic.clear_state()?;
        for i in 0..SMALL {
            ic.command(&small_copy(scene, w, i))?;
        }
        for tile in tiles().skip(w).step_by(WORKERS) {
            paint_tile(ic, scene.canvas, f, tile, w)?;
        }
    }
    history.draw(ic, scene.canvas)?;
    device.destroy(upload)?;
    read_back(ic, scene, f)?;
    present(ic, scene)
}

/// The picture the examples write, RGBA: the presented screen (`B8G8R8A8_UNORM` bytes)
/// scaled up `ZOOM` times without filtering, over a legend of its colours and strips (for
/// the frames `history` shows). Its width and height, then its bytes.
pub fn picture(screen_bgra: &[u8], history: &History) -> (u32, u32, Vec<u8>) {
    let (w, screen_h) = ((ZOOM * SCREEN_W) as usize, (ZOOM * SCREEN_H) as usize);
    let h = screen_h + LEGEND_H;
    let mut rgba = Vec::with_capacity(4 * w * h);
    for y in 0..screen_h {
        for x in 0..w {
            let i = 4 * ((y / ZOOM as usize) * SCREEN_W as usize + x / ZOOM as usize);
            let p = &screen_bgra[i..i + 4];
            rgba.extend_from_slice(&[p[2], p[1], p[0], 255]);
        }
    }
    rgba.resize(4 * w * h, 0);
    let mut page = Page { w, rgba: &mut rgba };
    page.fill(0, screen_h, w, LEGEND_H, PAPER);
    // Two lines a part: what it means, then its swatches.
    let line = |i: usize| screen_h + 14 + i * 2 * GLYPH;
    let swatches = |page: &mut Page, y: usize, entries: &[([u8; 4], String)]| {
        let mut x = 12;
        for (colour, name) in entries {
            page.fill(x, y - 4, SWATCH, SWATCH, INK);
            page.fill(x + 2, y - 2, SWATCH - 4, SWATCH - 4, *colour);
            page.text(x + SWATCH + 8, y, name);
            x += SWATCH + 8 + name.len() * GLYPH + 2 * GLYPH;
        }
    };
    page.text(12, line(0), "tile colour: the thread that recorded it");
    let threads: Vec<_> = (0..WORKERS)
        .map(|w| {
            let [r, g, b] = TINTS[w];
            ([r, g, b, 255], format!("deferred {w}"))
        })
        .collect();
    swatches(&mut page, line(1), &threads);
    let shown = history.shown();
    let frames = match shown.len() {
        0 => "strip: none in the warm-up frames".to_owned(),
        1 => format!("strip: its list in frame 0, then frame {}", shown.start),
        _ => format!(
            "strip: its list in frame 0, then frames {}-{}",
            shown.start,
            shown.end - 1
        ),
    };
    page.text(12, line(2) + 16, &frames);
    let warmup = match WARMUP {
        2 => "(the gap: frame 1, fresh or recycled by mode)".to_owned(),
        n => format!("(the gap: frames 1-{}, by mode)", n - 1),
    };
    page.text(12, line(3) + 16, &warmup);
    let kinds = [
        (FRESH, "fresh memory".to_owned()),
        (RECYCLED, "recycled memory".to_owned()),
    ];
    swatches(&mut page, line(4) + 16, &kinds);
    (w as u32, h as u32, rgba)
}

/// How many times [`picture`] scales the screen up, and the height of its legend.
pub const ZOOM: u32 = 2;
const LEGEND_H: usize = 200;
/// The legend's glyphs: the 8x8 font doubled.
const GLYPH: usize = 16;
/// A colour's swatch in the legend, a side.
const SWATCH: usize = 24;
const PAPER: [u8; 4] = [250, 250, 247, 255];
const INK: [u8; 4] = [40, 40, 48, 255];

/// RGBA bytes `w` pixels wide, to draw on.
struct Page<'a> {
    w: usize,
    rgba: &'a mut [u8],
}

impl Page<'_> {
    fn fill(&mut self, x: usize, y: usize, w: usize, h: usize, colour: [u8; 4]) {
        for row in y..y + h {
            for col in x..(x + w).min(self.w) {
                let i = 4 * (row * self.w + col);
                if let Some(p) = self.rgba.get_mut(i..i + 4) {
                    p.copy_from_slice(&colour);
                }
            }
        }
    }

    /// ASCII text in the 8x8 font at twice its size, its top-left corner at (x, y).
    fn text(&mut self, x: usize, y: usize, text: &str) {
        for (i, c) in text.chars().enumerate() {
            let glyph = font8x8::legacy::BASIC_LEGACY
                .get(c as usize)
                .copied()
                .unwrap_or([0; 8]);
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..8 {
                    if bits >> col & 1 == 1 {
                        self.fill(x + i * GLYPH + 2 * col, y + 2 * row, 2, 2, INK);
                    }
                }
            }
        }
    }
}
