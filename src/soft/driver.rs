//! The soft driver: objects are small descriptions, commands really move bytes in the soft
//! kernel's memory.

use std::ops::Range;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::Arc;

use super::built::{Building, DeferredHook};
use super::inject::{SameTypes, Wrappable};
use super::lifetime::Lifetimes;
use super::world::{Hook, SoftWorld, State, TraceEvent};
use crate::bind::{BindPoint, StateView};
use crate::caps::{MapCaps, ThreadingCaps};
use crate::cls::local_handles::LocalHandles;
use crate::desc::ObjectDesc;
use crate::desc::Subresource;
use crate::driver::{Command, DeferredCall, Driver, ListMemory, Op};
use crate::dxgi::reference::{self, Pixels, PixelsMut};
use crate::dxgi::{BltCaps, BltPlan, DisplayFormat, Rect, Rotation};
use crate::error::{AppError, Result};
use crate::handle::{AnyHandle, Handle, HandleSize, HandleSizeTable, HandleType, Resource, View};
use crate::kernel::{AllocationHandle, DeferredId};
use crate::registry::retire::Clock;
use crate::registry::{ObjectView, Resolver};

/// The soft driver's commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SoftCommand {
    /// CopyResource: as many bytes as both hold, from `src` to `dst`.
    Copy {
        /// Destination.
        dst: Handle<Resource>,
        /// Source.
        src: Handle<Resource>,
    },
    /// CopySubresourceRegion: `len` bytes from `src[src_offset..]` to `dst[dst_offset..]`.
    CopyRegion {
        /// Destination.
        dst: Handle<Resource>,
        /// Destination offset.
        dst_offset: u64,
        /// Source.
        src: Handle<Resource>,
        /// Source offset.
        src_offset: u64,
        /// Bytes.
        len: u64,
    },
    /// Fills a whole resource with one byte value.
    Fill {
        /// The resource.
        dst: Handle<Resource>,
        /// The byte.
        value: u8,
    },
    /// Clears a view's range of its resource to one byte value (ClearRenderTargetView).
    ClearView {
        /// The view.
        view: Handle<View>,
        /// The byte.
        value: u8,
    },
    /// Fills what the driver's state has bound at `point` (a whole resource, or a view's
    /// range) with one byte value, as a draw writes to the bound render target; nothing
    /// bound, nothing written. Names no object: it sees the bindings the replay left
    /// (R-C3's clear-state included).
    FillBound {
        /// The binding point.
        point: BindPoint,
        /// The byte.
        value: u8,
    },
    /// Fills a whole resource with the low byte of its IC data, read when the command runs
    /// on the immediate context ([`crate::Resolver::ic_data`]): what
    /// [`crate::ImmediateContext::ic_data_mut`] stored by then, not at record time.
    FillIcByte {
        /// The resource.
        dst: Handle<Resource>,
    },
    /// A draw: runs a shader over the render target bound at `point` (a whole resource, or a
    /// view's range), as a D3D11 draw writes its bound target, reading a constant buffer
    /// and a vertex buffer it names (D3D11 binds those too; naming them keeps the command
    /// one step). Each little-endian 32-bit word `i` of the target becomes
    /// [`draw_word`]`(c, v, i)`, with `c` the constant buffer's first four words and `v` the
    /// vertex buffer's words: integer arithmetic only, so every driver writes the same bytes.
    /// Nothing bound, nothing written.
    ///
    /// Refused, with nothing written: a constant buffer under 16 bytes, a target whose first
    /// byte or length is not a multiple of 4 (`OutOfRange`), a target in the memory of the
    /// constant or the vertex buffer (`InvalidState`: D3D11 never binds one resource as both
    /// a draw's input and its output).
    Draw {
        /// The constant buffer: its first 16 bytes are the four constants.
        constants: Handle<Resource>,
        /// The vertex buffer: its whole 32-bit words (none if under 4 bytes).
        vertices: Handle<Resource>,
        /// Where the render target is bound.
        point: BindPoint,
    },
}

/// Word `i` of a [`SoftCommand::Draw`]'s render target, from the four constants `c` and the
/// vertex words `v`: `(v[i % v.len()] * c[0] + c[1] * i + c[2]) ^ c[3]`, wrapping 32-bit
/// arithmetic, the vertex 0 when there is none. The drivers' shaders compute the same.
pub fn draw_word(c: [u32; 4], v: &[u32], i: u32) -> u32 {
    let vertex = match v.len() {
        0 => 0,
        n => v[(i as usize) % n],
    };
    (vertex
        .wrapping_mul(c[0])
        .wrapping_add(c[1].wrapping_mul(i))
        .wrapping_add(c[2]))
        ^ c[3]
}

impl Command for SoftCommand {
    #[cfg(feature = "capture")]
    const CAPTURABLE: bool = true;

    #[cfg(feature = "capture")]
    fn encode_capture(&self, enc: &mut crate::capture::Encoder<'_>) {
        crate::capture::CaptureCommand::encode(self, enc);
    }

    fn for_each_object(&self, visit: &mut dyn FnMut(AnyHandle)) {
        match *self {
            SoftCommand::Copy { dst, src } | SoftCommand::CopyRegion { dst, src, .. } => {
                visit(src.any());
                visit(dst.any());
            }
            SoftCommand::Fill { dst, .. } | SoftCommand::FillIcByte { dst } => visit(dst.any()),
            SoftCommand::ClearView { view, .. } => visit(view.any()),
            SoftCommand::FillBound { .. } => {}
            SoftCommand::Draw {
                constants,
                vertices,
                ..
            } => {
                visit(constants.any());
                visit(vertices.any());
            }
        }
    }
}

/// The soft driver's immediate-context state. Dropped with the immediate context, after
/// device destruction's drain: from then on the immediate context's thread is gone, and
/// what the drain left to live deferred contexts (R-D3) is destroyed and deallocated on
/// whichever thread lets the device's last reference go, which the world then accepts.
#[derive(Debug)]
pub struct SoftIc {
    world: Arc<SoftWorld>,
}

impl Drop for SoftIc {
    fn drop(&mut self) {
        self.world.lock().ic_ended = true;
    }
}

/// A soft object (the IC handle's data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SoftObject {
    /// A world-unique id, for the trace.
    pub id: u64,
    /// Its type.
    pub ty: HandleType,
    /// Resources: size in bytes.
    pub byte_size: u64,
    /// Views: the first byte and length of the range of the resource viewed. Not its memory:
    /// that is the resource's current allocation, which rotating identities changes (R-X5),
    /// found when the view is used.
    pub view: Option<(u64, u64)>,
    /// Views: the viewed resource's id.
    pub resource_id: u64,
    /// Counts this object among its world's live soft objects until it is dropped.
    pub(crate) tally: Tally,
    /// Set by its destroy hook: a hook that hears the object afterwards is a violation.
    pub(crate) destroyed: Destroyed,
}

/// Whether an object's destroy hook ran: every hook that hears the object checks it, so a
/// driver that would touch freed memory in C shows a violation here (R-D3: no hook hears an
/// object after its destroy hook, whatever the threads do).
#[derive(Debug, Default)]
pub(crate) struct Destroyed(std::sync::atomic::AtomicBool);

impl Destroyed {
    /// Marks the object destroyed; false when it was already (destroyed twice).
    fn mark(&self) -> bool {
        !self.0.swap(true, Ordering::SeqCst)
    }

    /// Flags a violation when `object` is heard by `hook` after its destroy hook ran.
    pub(crate) fn check(s: &mut State, object: &SoftObject, hook: &str) {
        if object.destroyed.0.load(Ordering::SeqCst) {
            let what = format!(
                "object {} heard by {hook} after its destroy hook ran",
                object.id
            );
            SoftWorld::violate(s, "R-D3", what);
        }
    }
}

/// A copy of an object describes it: not yet destroyed.
impl Clone for Destroyed {
    fn clone(&self) -> Self {
        Destroyed::default()
    }
}

/// Objects compare by what they describe.
impl PartialEq for Destroyed {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Destroyed {}

/// One soft object counted alive in its world ([`SoftWorld::soft_objects_alive`]): made with
/// the object, counted again by a clone, uncounted when dropped, so a test can check that
/// the engine drops every object's data, and when. It keeps its counter (objects may outlive
/// their world); counting touches the current thread's shard of it.
#[derive(Debug)]
pub(crate) struct Tally(Arc<ObjectCount>);

impl Tally {
    pub(crate) fn new(count: &Arc<ObjectCount>) -> Self {
        count.add(1);
        Tally(Arc::clone(count))
    }
}

impl Clone for Tally {
    fn clone(&self) -> Self {
        Tally::new(&self.0)
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        self.0.add(-1);
    }
}

/// Every tally is alike: objects compare by what they describe.
impl PartialEq for Tally {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Tally {}

/// A counter sharded by thread, one per world.
#[derive(Debug, Default)]
pub(crate) struct ObjectCount {
    shards: [crossbeam_utils::CachePadded<AtomicIsize>; 8],
}

impl ObjectCount {
    fn add(&self, n: isize) {
        thread_local!(static SHARD: usize = {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            NEXT.fetch_add(1, Ordering::Relaxed)
        });
        let shard = SHARD.with(|s| *s) % self.shards.len();
        self.shards[shard].fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn total(&self) -> usize {
        let sum: isize = self.shards.iter().map(|s| s.load(Ordering::Relaxed)).sum();
        usize::try_from(sum).unwrap_or(0)
    }
}

/// The soft driver's state of a deferred context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SoftDeferred {
    /// The context's id.
    pub id: DeferredId,
    /// Context-local handles open now.
    pub open_handles: u64,
    /// Times the state was made ready again (recycle-create).
    pub renewals: u64,
    /// The list being built, where the driver builds its lists.
    pub(crate) building: Building,
}

/// Soft context-local handle layout: the object's id, then its dependency's id (R-H2, R-H5).
pub(crate) fn cls_ids(local: &[u8]) -> (u64, u64) {
    let id = u64::from_le_bytes(
        local[0..8]
            .try_into()
            .expect("soft CLS blocks hold 16 bytes"),
    );
    let dep = u64::from_le_bytes(
        local[8..16]
            .try_into()
            .expect("soft CLS blocks hold 16 bytes"),
    );
    (id, dep)
}

/// The soft driver. See the module docs of [`crate::soft`].
#[derive(Debug, Clone)]
pub struct SoftDriver {
    pub(crate) world: Arc<SoftWorld>,
    sizes: HandleSizeTable,
}

/// The context-local handle size of a resource up to this many bytes is the small one.
const SMALL_RESOURCE: u64 = 4096;

fn cls_size(ty: HandleType, object: Option<&SoftObject>) -> usize {
    match ty {
        HandleType::Resource if object.is_none_or(|o| o.byte_size <= SMALL_RESOURCE) => 64,
        HandleType::Resource => 192,
        t if t.is_view() => 48,
        HandleType::Shader => 32,
        HandleType::Query => 24,
        HandleType::CommandList => 128,
        _ => 16,
    }
}

pub(crate) fn list_id(private: &[u8]) -> u64 {
    u64::from_le_bytes(private[0..8].try_into().expect("64-byte list handles"))
}

/// A subresource of kernel memory in a display format, for the reference Blt.
#[derive(Clone, Copy, Debug)]
struct Surface {
    allocation: AllocationHandle,
    place: Subresource,
    format: DisplayFormat,
    samples: u32,
}

impl Surface {
    /// Subresource `index` of a texture `view` in a display format, where its current
    /// allocation holds it.
    fn of<W: Driver>(view: ObjectView<'_, W>, index: u32) -> Result<Surface> {
        let texture = view.texture().ok_or(AppError::NotDisplayFormat)?;
        let format = DisplayFormat::from_dxgi(texture.format).ok_or(AppError::NotDisplayFormat)?;
        Ok(Surface {
            allocation: view.allocation().ok_or(AppError::InvalidState)?,
            place: texture.subresource(index).ok_or(AppError::OutOfRange)?,
            format,
            samples: u32::from(texture.samples),
        })
    }

    /// All of it.
    fn whole(&self) -> Rect {
        Rect::whole(self.place.width, self.place.height)
    }
}

impl SoftDriver {
    /// Flags a deferred-context or command-list hook called on a driver without command
    /// lists: the engine emulates those and must call none of them.
    pub(crate) fn deferred_hook(&self, s: &mut State, hook: &str) {
        if !self.world.config.command_lists {
            let what = format!("{hook} called on a driver without command lists");
            SoftWorld::violate(s, "emulation", what);
        }
    }

    /// Flags a recycle of list `id` before the buffer that executed it passed the driver's
    /// list clock (the memory may still be read).
    pub(crate) fn check_list_reuse(&self, s: &mut State, id: u64) {
        let Some(&fence) = s.list_refs.get(&id) else {
            return;
        };
        let early = match self.world.config.list_clock {
            Clock::Submitted => fence == 0,
            Clock::Completed => fence == 0 || fence > s.completed,
        };
        if early {
            let what =
                format!("list {id} recycled before the buffer that executed it passed the clock");
            SoftWorld::violate(s, "list-clock", what);
        }
    }

    pub(crate) fn new(world: Arc<SoftWorld>) -> Self {
        let mut entries = Vec::new();
        for ty in HandleType::ALL {
            entries.push(HandleSize {
                ty,
                size: cls_size(ty, None),
            });
        }
        entries.push(HandleSize {
            ty: HandleType::Resource,
            size: 192,
        });
        let sizes = HandleSizeTable::new(entries).expect("soft sizes are valid");
        SoftDriver { world, sizes }
    }

    /// Whether the driver builds its command lists ([`super::SoftConfig::driver_built`], with
    /// command lists at all).
    pub(crate) fn builds_lists(&self) -> bool {
        self.world.config.command_lists && self.world.config.driver_built
    }

    /// The shared world.
    pub fn world(&self) -> &Arc<SoftWorld> {
        &self.world
    }

    pub(crate) fn touch(state: &mut State, allocation: AllocationHandle) {
        let id = allocation.0.get();
        flag_ic_write(state, "the open buffer's allocation list");
        if let Some(a) = state.allocations.get_mut(&id) {
            a.ever_referenced = true;
            if !a.in_open_buffer {
                a.in_open_buffer = true;
                state.open_refs.push(id);
            }
        }
    }

    pub(crate) fn bytes_of(
        state: &mut State,
        allocation: Option<AllocationHandle>,
    ) -> Result<&mut Vec<u8>> {
        flag_ic_write(state, "kernel memory");
        let id = allocation.ok_or(AppError::InvalidState)?.0.get();
        Ok(&mut state
            .allocations
            .get_mut(&id)
            .ok_or(AppError::StaleHandle)?
            .bytes)
    }

    /// `len` bytes from `start` as an index range of an allocation. A range past `u64` or
    /// past the address space is out of range: on a 32-bit target an offset of 4 GiB must
    /// not wrap to 0 and write the allocation's first bytes.
    pub(crate) fn byte_range(start: u64, len: u64) -> Result<Range<usize>> {
        let end = start.checked_add(len).ok_or(AppError::OutOfRange)?;
        let start = usize::try_from(start).map_err(|_| AppError::OutOfRange)?;
        let end = usize::try_from(end).map_err(|_| AppError::OutOfRange)?;
        Ok(start..end)
    }

    /// The reference Blt from one subresource of kernel memory to another (the same
    /// allocation too: the source is copied out first).
    fn blt_pixels(
        state: &mut State,
        src: Surface,
        src_rect: Rect,
        dst: Surface,
        dst_rect: Rect,
        rotation: Rotation,
    ) -> Result<()> {
        let mut chunk = std::mem::take(&mut state.scratch);
        let mut blt_scratch = std::mem::take(&mut state.blt_scratch);
        let result = (|| {
            let src_bytes = Self::bytes_of(state, Some(src.allocation))?;
            let range = Self::byte_range(src.place.offset, src.place.len)?;
            chunk.clear();
            chunk.extend_from_slice(src_bytes.get(range).ok_or(AppError::OutOfRange)?);
            let dst_bytes = Self::bytes_of(state, Some(dst.allocation))?;
            let range = Self::byte_range(dst.place.offset, dst.place.len)?;
            let out = dst_bytes.get_mut(range).ok_or(AppError::OutOfRange)?;
            let pixels = Pixels {
                width: src.place.width,
                height: src.place.height,
                samples: src.samples,
                format: src.format,
                bytes: &chunk,
            };
            let target = PixelsMut {
                width: dst.place.width,
                height: dst.place.height,
                format: dst.format,
                bytes: out,
            };
            reference::blt_in(
                &mut blt_scratch,
                pixels,
                src_rect,
                target,
                dst_rect,
                rotation,
            )
        })();
        state.scratch = chunk;
        state.blt_scratch = blt_scratch;
        result?;
        Self::touch(state, src.allocation);
        Self::touch(state, dst.allocation);
        Ok(())
    }

    pub(crate) fn copy(
        state: &mut State,
        dst: Option<AllocationHandle>,
        dst_off: u64,
        src: Option<AllocationHandle>,
        src_off: u64,
        len: u64,
    ) -> Result<()> {
        // Through a scratch buffer that keeps its capacity: steady state allocates nothing.
        let mut chunk = std::mem::take(&mut state.scratch);
        let result = (|| {
            let src_bytes = Self::bytes_of(state, src)?;
            chunk.clear();
            chunk.extend_from_slice(
                src_bytes
                    .get(Self::byte_range(src_off, len)?)
                    .ok_or(AppError::OutOfRange)?,
            );
            let dst_bytes = Self::bytes_of(state, dst)?;
            dst_bytes
                .get_mut(Self::byte_range(dst_off, len)?)
                .ok_or(AppError::OutOfRange)?
                .copy_from_slice(&chunk);
            Ok::<(), crate::Error>(())
        })();
        state.scratch = chunk;
        result?;
        Self::touch(state, src.expect("checked above"));
        Self::touch(state, dst.expect("checked above"));
        Ok(())
    }

    pub(crate) fn run_command<W: SameTypes<Self>>(
        &self,
        state: &mut State,
        objects: &Resolver<'_, W>,
        command: &SoftCommand,
    ) -> Result<()> {
        Self::touch_bound(state, objects);
        match *command {
            SoftCommand::Copy { dst, src } => {
                let (d, s) = (objects.get(dst)?, objects.get(src)?);
                let len = d.object().byte_size.min(s.object().byte_size);
                Self::copy(state, d.allocation(), 0, s.allocation(), 0, len)
            }
            SoftCommand::CopyRegion {
                dst,
                dst_offset,
                src,
                src_offset,
                len,
            } => {
                let (d, s) = (objects.get(dst)?, objects.get(src)?);
                Self::copy(
                    state,
                    d.allocation(),
                    dst_offset,
                    s.allocation(),
                    src_offset,
                    len,
                )
            }
            SoftCommand::Fill { dst, value } => {
                Self::fill(state, objects, objects.get(dst)?, value)
            }
            SoftCommand::ClearView { view, value } => {
                Self::fill(state, objects, objects.get(view)?, value)
            }
            SoftCommand::FillBound { point, value } => match state.ic_bound.get(&point) {
                Some(&bound) => Self::fill(state, objects, objects.get(bound)?, value),
                None => Ok(()),
            },
            SoftCommand::FillIcByte { dst } => {
                let target = objects.get(dst)?;
                let value = objects.ic_data(target)?.to_le_bytes()[0];
                Self::fill(state, objects, target, value)
            }
            SoftCommand::Draw {
                constants,
                vertices,
                point,
            } => {
                let (c, v) = (objects.get(constants)?, objects.get(vertices)?);
                match state.ic_bound.get(&point) {
                    Some(&bound) => Self::draw(state, objects, c, v, objects.get(bound)?),
                    None => Ok(()),
                }
            }
        }
    }

    /// A [`SoftCommand::Draw`] into `target` (a whole resource, or a view's range).
    fn draw<W: SameTypes<Self>>(
        state: &mut State,
        objects: &Resolver<'_, W>,
        constants: ObjectView<'_, W>,
        vertices: ObjectView<'_, W>,
        target: ObjectView<'_, W>,
    ) -> Result<()> {
        let (out, first, len) = match target.object().view {
            None => (target.allocation(), 0, target.object().byte_size),
            Some((first, len)) => (objects.resource_of(target)?.allocation(), first, len),
        };
        let out = out.ok_or(AppError::InvalidState)?;
        let (c, v) = (constants.allocation(), vertices.allocation());
        let (c, v) = (
            c.ok_or(AppError::InvalidState)?,
            v.ok_or(AppError::InvalidState)?,
        );
        if constants.object().byte_size < 16 || first % 4 != 0 || len % 4 != 0 {
            return Err(AppError::OutOfRange.into());
        }
        if out == c || out == v {
            return Err(AppError::InvalidState.into());
        }
        let words = |bytes: &[u8]| -> Vec<u32> {
            bytes
                .chunks_exact(4)
                .map(|w| u32::from_le_bytes(w.try_into().expect("4 bytes")))
                .collect()
        };
        let c_bytes = Self::bytes_of(state, Some(c))?;
        let c_words: [u32; 4] = words(c_bytes.get(..16).ok_or(AppError::OutOfRange)?)
            .try_into()
            .expect("16 bytes are 4 words");
        let v_len = vertices.object().byte_size;
        let v_bytes = Self::bytes_of(state, Some(v))?;
        let v_words = words(
            v_bytes
                .get(Self::byte_range(0, v_len)?)
                .ok_or(AppError::OutOfRange)?,
        );
        let bytes = Self::bytes_of(state, Some(out))?;
        let target_bytes = bytes
            .get_mut(Self::byte_range(first, len)?)
            .ok_or(AppError::OutOfRange)?;
        for (i, word) in target_bytes.chunks_exact_mut(4).enumerate() {
            word.copy_from_slice(&draw_word(c_words, &v_words, i as u32).to_le_bytes());
        }
        Self::touch(state, c);
        Self::touch(state, v);
        Self::touch(state, out);
        if let (Some(own), Some(_)) = (target.allocation(), target.object().view) {
            Self::touch(state, own);
        }
        Ok(())
    }

    /// A command reads whatever is bound, as a D3D11 draw reads its bound state without
    /// naming it: each bound object, and a bound view's resource, is in the open buffer, so
    /// the kernel flags a buffer whose allocation list leaves one out, and memory freed while
    /// a buffer that ran with it bound may still run (R-D1, R-D4).
    fn touch_bound<W: SameTypes<Self>>(state: &mut State, objects: &Resolver<'_, W>) {
        for at in 0..state.ic_bound.len() {
            let Some(Ok(bound)) = state.ic_bound.object_at(at).map(|h| objects.get(h)) else {
                continue;
            };
            if let Some(a) = bound.allocation() {
                Self::touch(state, a);
            }
            if bound.object().view.is_some() {
                if let Some(a) = objects.resource_of(bound).ok().and_then(|r| r.allocation()) {
                    Self::touch(state, a);
                }
            }
        }
    }

    /// Fills a whole resource, or a view's range of its resource, with `value`.
    fn fill<W: SameTypes<Self>>(
        state: &mut State,
        objects: &Resolver<'_, W>,
        target: ObjectView<'_, W>,
        value: u8,
    ) -> Result<()> {
        let Some((first, len)) = target.object().view else {
            let d = target.allocation();
            Self::bytes_of(state, d)?.fill(value);
            Self::touch(state, d.expect("checked above"));
            return Ok(());
        };
        let allocation = objects
            .resource_of(target)?
            .allocation()
            .ok_or(AppError::InvalidState)?;
        let bytes = Self::bytes_of(state, Some(allocation))?;
        bytes
            .get_mut(Self::byte_range(first, len)?)
            .ok_or(AppError::OutOfRange)?
            .fill(value);
        Self::touch(state, allocation);
        if let Some(own) = target.allocation() {
            Self::touch(state, own);
        }
        Ok(())
    }
    /// Performs one operation on the immediate context's side of the world: the bindings
    /// it changes, the memory it writes and references. What [`Driver::execute`] does, and
    /// what a driver-built list's packets do when the immediate context runs them.
    pub(crate) fn apply<W: SameTypes<Self>>(
        &self,
        s: &mut State,
        objects: &Resolver<'_, W>,
        op: Op<'_, W>,
    ) -> Result<()> {
        if matches!(op, Op::Bind { .. } | Op::ClearState) {
            flag_ic_write(s, "the immediate context's bindings");
        }
        match &op {
            Op::Bind { point, object } => match object {
                Some(o) => s.ic_bound.insert(*point, o.handle()),
                None => s.ic_bound.remove(point),
            },
            Op::ClearState => {
                s.ic_bound.clear();
                None
            }
            _ => None,
        };
        match op {
            Op::Command(command) => self.run_command(s, objects, command),
            Op::Update {
                resource,
                offset,
                data,
            } => {
                let r = resource.allocation();
                let bytes = Self::bytes_of(s, r)?;
                bytes
                    .get_mut(Self::byte_range(offset, data.len() as u64)?)
                    .ok_or(AppError::OutOfRange)?
                    .copy_from_slice(data);
                Self::touch(s, r.expect("checked above"));
                Ok(())
            }
            Op::WriteDiscard { resource, data } => {
                let r = resource.allocation();
                let bytes = Self::bytes_of(s, r)?;
                bytes
                    .get_mut(..data.len())
                    .ok_or(AppError::OutOfRange)?
                    .copy_from_slice(data);
                Self::touch(s, r.expect("checked above"));
                Ok(())
            }
            Op::Bind {
                object: Some(o), ..
            } => {
                if let Some(a) = o.allocation() {
                    Self::touch(s, a);
                }
                if o.object().view.is_some() {
                    if let Some(a) = objects.resource_of(o)?.allocation() {
                        Self::touch(s, a);
                    }
                }
                Ok(())
            }
            Op::EndQuery(q) | Op::BeginQuery(q) => {
                if let Some(a) = q.allocation() {
                    Self::touch(s, a);
                }
                Ok(())
            }
            Op::Bind { object: None, .. } | Op::ClearState => Ok(()),
            Op::Present {
                src,
                src_subresource,
                dst,
                ..
            } => {
                if let Some(a) = src.allocation() {
                    Self::touch(s, a);
                }
                // The present copy into the destination: the reference Blt, unstretched
                // unless the sizes differ (an `_SRGB` source to a non-sRGB destination is
                // integer to integer: copied unchanged, R-X1).
                let Some((dst, dst_subresource)) = dst else {
                    return Ok(());
                };
                let src_side = Surface::of(src, src_subresource)?;
                let dst_side = Surface::of(dst, dst_subresource)?;
                let (src_rect, dst_rect) = (src_side.whole(), dst_side.whole());
                Self::blt_pixels(
                    s,
                    src_side,
                    src_rect,
                    dst_side,
                    dst_rect,
                    Rotation::Identity,
                )
            }
        }
    }
}

impl Driver for SoftDriver {
    type Object = SoftObject;
    type IcData = u64;
    type Immediate = SoftIc;
    type Command = SoftCommand;
    type Deferred = SoftDeferred;

    fn threading_caps(&self) -> ThreadingCaps {
        match self.world.config.command_lists {
            true => {
                ThreadingCaps::FREETHREADED
                    | ThreadingCaps::COMMANDLISTS
                    | ThreadingCaps::COMMANDLISTS_BUILD_2
            }
            false => ThreadingCaps::FREETHREADED,
        }
    }

    fn check_deferred_context_handle_sizes(&self, out: Option<&mut [HandleSize]>) -> usize {
        self.deferred_hook(
            &mut self.world.lock(),
            "check_deferred_context_handle_sizes",
        );
        self.sizes.answer_poll(out)
    }

    fn calc_private_size(&self, desc: &ObjectDesc<'_>) -> usize {
        let mut s = self.world.lock();
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::CalcPrivateSize).ty(desc.handle_type()),
        );
        match desc {
            ObjectDesc::Resource(_) if self.world.config.resources_without_memory => 0,
            // A size the address space cannot hold asks for the most there is, which the
            // kernel refuses as out of memory, rather than for the size truncated to `usize`.
            ObjectDesc::Resource(r) => usize::try_from(r.byte_size).unwrap_or(usize::MAX),
            ObjectDesc::View { .. } => 32,
            ObjectDesc::Shader(code) => code.len(),
            ObjectDesc::Query(_) => 8,
            ObjectDesc::ElementLayout(_) | ObjectDesc::State { .. } => 0,
        }
    }

    fn calc_deferred_context_handle_size(
        &self,
        ty: HandleType,
        object: Option<&SoftObject>,
    ) -> usize {
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "calc_deferred_context_handle_size");
        let id = object.map_or(0, |o| o.id);
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::CalcDeferredContextHandleSize)
                .object(id)
                .ty(ty),
        );
        if self.world.config.unlisted_cls_size == Some(ty) {
            return 100; // listed nowhere: the engine must refuse it (R-H4)
        }
        cls_size(ty, object)
    }

    fn create_object(
        &self,
        desc: &ObjectDesc<'_>,
        memory: Option<AllocationHandle>,
        dependency: Option<&SoftObject>,
    ) -> Result<(SoftObject, u64)> {
        let mut s = self.world.lock();
        s.next_object += 1;
        let id = s.next_object;
        let ty = desc.handle_type();
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::CreateObject)
                .object(id)
                .ty(ty)
                .allocation(memory.map_or(0, |m| m.0.get())),
        );
        let resource_id = dependency.map_or(0, |d| d.id);
        let view = match (desc, dependency) {
            (ObjectDesc::View { desc: v, .. }, Some(resource)) => {
                let end = v
                    .first_byte
                    .checked_add(v.byte_len)
                    .ok_or(AppError::OutOfRange)?;
                if end > resource.byte_size {
                    return Err(AppError::OutOfRange.into());
                }
                Some((v.first_byte, v.byte_len))
            }
            _ => None,
        };
        let byte_size = match desc {
            ObjectDesc::Resource(r) => r.byte_size,
            _ => 0,
        };
        if self.world.config.trace {
            Lifetimes::object_created(&mut s, id);
        }
        Ok((
            SoftObject {
                id,
                ty,
                byte_size,
                view,
                resource_id,
                tally: Tally::new(&self.world.objects_alive),
                destroyed: Destroyed::default(),
            },
            0,
        ))
    }

    fn destroy_object(&self, ty: HandleType, object: &SoftObject, ic: &mut u64) {
        *ic += 1;
        if !object.destroyed.mark() {
            let mut s = self.world.lock();
            let what = format!("object {} destroyed twice", object.id);
            SoftWorld::violate(&mut s, "R-D1", what);
        }
        if !self.world.config.trace && !self.world.any_open_locals() {
            return; // nothing to record, nothing to check: no lock
        }
        let mut s = self.world.lock();
        // An open context-local handle holds its object (R-H2): the IC handle goes last, also
        // at device destruction with deferred contexts still alive (the drain leaves what
        // they hold).
        let open: Vec<u32> = s
            .open_locals
            .keys()
            .filter(|&&(_, id)| id == object.id)
            .map(|&(dc, _)| dc)
            .collect();
        if !open.is_empty() {
            let what = format!(
                "object {} destroyed while context-local handles of contexts {open:?} are open",
                object.id
            );
            SoftWorld::violate(&mut s, "R-H2", what);
        }
        if !self.world.config.trace {
            return; // nothing to record, nothing else to check
        }
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::DestroyObject).object(object.id).ty(ty),
        );
        Lifetimes::object_destroyed(&mut s, object.id);
    }

    fn create_immediate(&self) -> Result<SoftIc> {
        self.world.lock().ic_thread = Some(std::thread::current().id());
        Ok(SoftIc {
            world: Arc::clone(&self.world),
        })
    }

    fn execute(
        &self,
        imm: &mut SoftIc,
        objects: &Resolver<'_, Self>,
        op: Op<'_, Self>,
    ) -> Result<()> {
        self.execute_for(imm, objects, op)
    }

    fn flush(&self, _imm: &mut SoftIc) {
        let mut s = self.world.lock();
        self.world.note(&mut s, TraceEvent::of(Hook::Flush));
    }

    fn calc_private_command_list_size(&self) -> usize {
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "calc_private_command_list_size");
        self.world
            .note(&mut s, TraceEvent::of(Hook::CalcPrivateCommandListSize));
        64
    }

    fn execute_command_list(
        &self,
        imm: &mut SoftIc,
        list: &[u8],
        objects: &Resolver<'_, Self>,
    ) -> Result<()> {
        self.execute_command_list_for(imm, list, objects)
    }

    fn builds_command_lists(&self) -> bool {
        self.builds_lists()
    }

    fn record_deferred(
        &self,
        dc: &mut SoftDeferred,
        call: DeferredCall<'_, Self>,
        locals: &mut LocalHandles<'_, Self>,
    ) -> Result<()> {
        self.record_for(dc, call, locals)
    }

    fn map_discard_deferred<'a>(
        &self,
        dc: &'a mut SoftDeferred,
        resource: Handle<Resource>,
        len: usize,
        locals: &mut LocalHandles<'_, Self>,
    ) -> Result<&'a mut [u8]> {
        self.map_discard_for(dc, resource, len, locals)
    }

    fn map_no_overwrite_deferred<'a>(
        &self,
        dc: &'a mut SoftDeferred,
        resource: Handle<Resource>,
        len: usize,
        locals: &mut LocalHandles<'_, Self>,
    ) -> Result<&'a mut [u8]> {
        self.map_no_overwrite_for(dc, resource, len, locals)
    }

    fn map_caps(&self) -> MapCaps {
        self.world.config.map_caps
    }

    fn execute_command_list_deferred(
        &self,
        dc: &mut SoftDeferred,
        list: &[u8],
        state: StateView<'_>,
    ) -> Result<()> {
        let _hook = DeferredHook::enter();
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "execute_command_list_deferred");
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::ExecuteCommandListDeferred)
                .object(list_id(list))
                .ty(HandleType::CommandList)
                .state(state.len())
                .context(dc.id),
        );
        if self.world.config.trace {
            Lifetimes::list_executed(&mut s, list_id(list), "execute_command_list_deferred");
        }
        if self.builds_lists() {
            self.chain(&mut s, dc, list_id(list));
        }
        Ok(())
    }

    fn recycle_command_list(&self, dc: &mut SoftDeferred, list: ListMemory<'_>) {
        let mut s = self.world.lock();
        if let Some(old) = s.built.remove(&list_id(list.private)) {
            dc.building.spare = Some(old);
        }
        self.deferred_hook(&mut s, "recycle_command_list");
        let id = list_id(list.private);
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::RecycleCommandList)
                .object(id)
                .ty(HandleType::CommandList)
                .context(dc.id),
        );
        self.check_list_reuse(&mut s, id);
        if self.world.config.trace {
            Lifetimes::list_recycled(&mut s, id, dc.id);
        }
        // The context-local handle records whose cache holds the list (R-R5).
        list.local[0..8].copy_from_slice(&u64::from(dc.id.get()).to_le_bytes());
    }

    fn recycle_create_command_list(
        &self,
        dc: &mut SoftDeferred,
        list: ListMemory<'_>,
        state: StateView<'_>,
    ) -> Result<()> {
        let _hook = DeferredHook::enter();
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "recycle_create_command_list");
        let id = list_id(list.private);
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::RecycleCreateCommandList)
                .object(id)
                .ty(HandleType::CommandList)
                .state(state.len())
                .context(dc.id),
        );
        self.check_list_reuse(&mut s, id);
        if u64::from_le_bytes(
            list.local[0..8]
                .try_into()
                .expect("CL handles hold 8 bytes"),
        ) != u64::from(dc.id.get())
        {
            SoftWorld::violate(
                &mut s,
                "R-R5",
                format!("list {id} recycled by another context"),
            );
        }
        if self.world.config.recycle_create_fails {
            return Err(crate::Error::OutOfMemory);
        }
        if self.world.config.trace {
            Lifetimes::list_recycle_created(&mut s, id, dc.id);
        }
        if self.builds_lists() {
            self.finish_built(&mut s, dc, id);
        }
        Ok(())
    }

    fn recycle_destroy_command_list(&self, list: ListMemory<'_>) {
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "recycle_destroy_command_list");
        let id = list_id(list.private);
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::RecycleDestroyCommandList)
                .object(id)
                .ty(HandleType::CommandList),
        );
        if self.world.config.trace {
            Lifetimes::list_recycle_destroyed(&mut s, id);
        }
    }

    fn create_deferred_context(&self, id: DeferredId) -> Result<SoftDeferred> {
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "create_deferred_context");
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::CreateDeferredContext).context(id),
        );
        if self.world.config.trace {
            Lifetimes::context_created(&mut s, id);
        }
        Ok(SoftDeferred {
            id,
            open_handles: 0,
            renewals: 0,
            building: Building::default(),
        })
    }

    fn destroy_deferred_context(&self, dc: SoftDeferred) {
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "destroy_deferred_context");
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::DestroyDeferredContext).context(dc.id),
        );
        if self.world.config.trace {
            Lifetimes::context_destroyed(&mut s, dc.id);
        }
        if dc.open_handles != 0 {
            let what = format!(
                "context {} destroyed with {} handles open",
                dc.id, dc.open_handles
            );
            SoftWorld::violate(&mut s, "R-C1", what);
        }
    }

    fn open_local(
        &self,
        dc: &mut SoftDeferred,
        ty: HandleType,
        object: &SoftObject,
        dependency: Option<&[u8]>,
        local: &mut [u8],
    ) -> Result<()> {
        let _hook = DeferredHook::enter();
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "open_local");
        Destroyed::check(&mut s, object, "open_local");
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::OpenLocal)
                .object(object.id)
                .ty(ty)
                .context(dc.id),
        );
        if local.iter().any(|b| *b != 0) {
            SoftWorld::violate(
                &mut s,
                "R-H4",
                format!("context-local block of object {} not zeroed", object.id),
            );
        }
        let dep_id = match (ty.is_view(), dependency) {
            (true, Some(dep)) => {
                let (dep_id, _) = cls_ids(dep);
                if dep_id != object.resource_id {
                    let what = format!(
                        "view {} opened with the CLS of object {dep_id}, not of its resource",
                        object.id
                    );
                    SoftWorld::violate(&mut s, "R-H5", what);
                }
                dep_id
            }
            (false, None) => 0,
            _ => {
                let what = format!("object {} opened with a wrong dependency", object.id);
                SoftWorld::violate(&mut s, "R-H3", what);
                0
            }
        };
        local[0..8].copy_from_slice(&object.id.to_le_bytes());
        local[8..16].copy_from_slice(&dep_id.to_le_bytes());
        if ty == HandleType::Resource {
            // What the deferred context validates and sizes copies with, where it builds its
            // lists (resource blocks hold 64 or 192 bytes).
            local[16..24].copy_from_slice(&object.byte_size.to_le_bytes());
        }
        s.open_locals.insert((dc.id.get(), object.id), dep_id);
        self.world.note_open_locals(&s);
        dc.open_handles += 1;
        Ok(())
    }

    fn use_local(
        &self,
        dc: &mut SoftDeferred,
        ty: HandleType,
        object: &SoftObject,
        local: &mut [u8],
    ) {
        let _hook = DeferredHook::enter();
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "use_local");
        Destroyed::check(&mut s, object, "use_local");
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::UseLocal)
                .object(object.id)
                .ty(ty)
                .context(dc.id),
        );
        if cls_ids(local).0 != object.id {
            let what = format!(
                "object {} used through the CLS of object {}",
                object.id,
                cls_ids(local).0
            );
            SoftWorld::violate(&mut s, "R-H2", what);
        }
    }

    fn close_local(
        &self,
        dc: &mut SoftDeferred,
        ty: HandleType,
        object: &SoftObject,
        local: &mut [u8],
        state: StateView<'_>,
    ) {
        let _hook = DeferredHook::enter();
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "close_local");
        Destroyed::check(&mut s, object, "close_local");
        s.open_locals.remove(&(dc.id.get(), object.id));
        self.world.note_open_locals(&s);
        // R-H3: dependents close before what they depend on.
        let context = dc.id.get();
        let dependents = s
            .open_locals
            .iter()
            .filter(|&(&(c, _), &dep)| c == context && dep == object.id)
            .count();
        if dependents > 0 {
            let what = format!(
                "object {} closed while {dependents} handle(s) depending on it stay open",
                object.id
            );
            SoftWorld::violate(&mut s, "R-H3", what);
        }
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::CloseLocal)
                .object(object.id)
                .ty(ty)
                .state(state.len())
                .context(dc.id),
        );
        if cls_ids(local).0 != object.id {
            let what = format!(
                "object {} closed through the CLS of object {}",
                object.id,
                cls_ids(local).0
            );
            SoftWorld::violate(&mut s, "R-H2", what);
        }
        if !state.is_empty() {
            SoftWorld::violate(
                &mut s,
                "R-C1",
                format!(
                    "state-refresh reports {} bindings while closing",
                    state.len()
                ),
            );
        }
        local.fill(0);
        dc.open_handles -= 1;
    }

    fn create_command_list(
        &self,
        dc: &mut SoftDeferred,
        private: &mut [u8],
        state: StateView<'_>,
    ) -> Result<()> {
        let _hook = DeferredHook::enter();
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "create_command_list");
        s.next_object += 1;
        let id = s.next_object;
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::CreateCommandList)
                .object(id)
                .ty(HandleType::CommandList)
                .state(state.len())
                .context(dc.id),
        );
        private[0..8].copy_from_slice(&id.to_le_bytes());
        if self.world.config.trace {
            Lifetimes::list_created(&mut s, id);
        }
        if self.builds_lists() {
            self.finish_built(&mut s, dc, id);
        }
        Ok(())
    }

    fn destroy_command_list(&self, list: ListMemory<'_>) {
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "destroy_command_list");
        let id = u64::from_le_bytes(list.private[0..8].try_into().expect("64-byte list handles"));
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::DestroyCommandList)
                .object(id)
                .ty(HandleType::CommandList),
        );
        // Its memory goes now: the buffer that executed it must have passed the clock.
        self.check_list_reuse(&mut s, id);
        s.list_refs.remove(&id);
        s.built.remove(&id);
        if self.world.config.trace {
            Lifetimes::list_destroyed(&mut s, id);
        }
    }

    fn abandon_command_list(&self, dc: &mut SoftDeferred) {
        dc.building.clear();
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "abandon_command_list");
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::AbandonCommandList).context(dc.id),
        );
    }

    fn abandon_unbind(&self, dc: &mut SoftDeferred, _point: BindPoint, state: StateView<'_>) {
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "abandon_unbind");
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::AbandonUnbind)
                .state(state.len())
                .context(dc.id),
        );
    }

    fn recycle_create_deferred_context(&self, dc: &mut SoftDeferred) -> Result<()> {
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "recycle_create_deferred_context");
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::RecycleCreateDeferredContext).context(dc.id),
        );
        if dc.open_handles != 0 {
            let what = format!(
                "context {} recycled with {} handles open",
                dc.id, dc.open_handles
            );
            SoftWorld::violate(&mut s, "R-C1", what);
        }
        if !dc.building.is_empty() {
            let what = format!(
                "context {} recycled with calls recorded in no list and not abandoned",
                dc.id
            );
            SoftWorld::violate(&mut s, "R-C2", what);
            dc.building.clear();
        }
        if self.world.config.recycle_create_fails {
            return Err(crate::Error::OutOfMemory);
        }
        dc.renewals += 1;
        Ok(())
    }

    fn blt_caps(&self) -> BltCaps {
        BltCaps::ROTATION
    }

    fn rotate_identities(&self, _imm: &mut SoftIc, ic: &mut [&mut u64]) {
        let mut s = self.world.lock();
        let event = TraceEvent::of(Hook::RotateIdentities).state(ic.len());
        self.world.note(&mut s, event);
    }

    fn refresh_view(
        &self,
        imm: &mut SoftIc,
        view: ObjectView<'_, Self>,
        ic: &mut u64,
        resource: ObjectView<'_, Self>,
    ) -> Result<()> {
        self.refresh_view_for(imm, view, ic, resource)
    }

    fn renamed(
        &self,
        imm: &mut SoftIc,
        resource: ObjectView<'_, Self>,
        ic: &mut u64,
        previous: AllocationHandle,
    ) {
        self.renamed_for(imm, resource, ic, previous);
    }

    fn blt(
        &self,
        imm: &mut SoftIc,
        objects: &Resolver<'_, Self>,
        src: ObjectView<'_, Self>,
        dst: ObjectView<'_, Self>,
        plan: &BltPlan,
    ) -> Result<()> {
        self.blt_for(imm, objects, src, dst, plan)
    }
}

/// The two hooks typed by the engine's driver, generic over it so that a fault-injecting
/// wrapper ([`super::inject::FaultDriver`]) runs exactly the soft driver's code.
impl Wrappable for SoftDriver {
    fn execute_for<W: SameTypes<Self>>(
        &self,
        _imm: &mut SoftIc,
        objects: &Resolver<'_, W>,
        op: Op<'_, W>,
    ) -> Result<()> {
        let mut s = self.world.lock();
        note_buffer(&mut s, objects.buffer());
        let object = match &op {
            Op::Update { resource, .. } => resource.object().id,
            Op::Bind {
                object: Some(o), ..
            } => o.object().id,
            Op::BeginQuery(q) | Op::EndQuery(q) => q.object().id,
            _ => 0,
        };
        let state = objects.state().len();
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::Execute).object(object).state(state),
        );
        if self.builds_lists() && objects.in_command_list() {
            let what = "an operation of a driver-built list reached Driver::execute".to_string();
            SoftWorld::violate(&mut s, "driver-built", what);
        }
        self.apply(&mut s, objects, op)
    }

    fn execute_command_list_for<W: SameTypes<Self>>(
        &self,
        _imm: &mut SoftIc,
        list: &[u8],
        objects: &Resolver<'_, W>,
    ) -> Result<()> {
        let mut s = self.world.lock();
        self.deferred_hook(&mut s, "execute_command_list");
        note_buffer(&mut s, objects.buffer());
        let id = u64::from_le_bytes(list[0..8].try_into().expect("64-byte list handles"));
        let state = objects.state().len();
        self.world.note(
            &mut s,
            TraceEvent::of(Hook::ExecuteCommandList)
                .object(id)
                .state(state),
        );
        self.note_list_executed(&mut s, id);
        if self.builds_lists() {
            return self.run_built(&mut s, id, objects);
        }
        // A list starts from the clear state: it inherits no binding.
        s.ic_bound.clear();
        Ok(())
    }

    fn record_deferred_for<W: SameTypes<Self>>(
        &self,
        dc: &mut SoftDeferred,
        call: DeferredCall<'_, W>,
        locals: &mut LocalHandles<'_, W>,
    ) -> Result<()> {
        self.record_for(dc, call, locals)
    }

    fn map_discard_deferred_for<'a, W: SameTypes<Self>>(
        &self,
        dc: &'a mut SoftDeferred,
        resource: Handle<Resource>,
        len: usize,
        locals: &mut LocalHandles<'_, W>,
    ) -> Result<&'a mut [u8]> {
        self.map_discard_for(dc, resource, len, locals)
    }

    fn map_no_overwrite_deferred_for<'a, W: SameTypes<Self>>(
        &self,
        dc: &'a mut SoftDeferred,
        resource: Handle<Resource>,
        len: usize,
        locals: &mut LocalHandles<'_, W>,
    ) -> Result<&'a mut [u8]> {
        self.map_no_overwrite_for(dc, resource, len, locals)
    }

    fn refresh_view_for<W: SameTypes<Self>>(
        &self,
        _imm: &mut SoftIc,
        view: ObjectView<'_, W>,
        _ic: &mut u64,
        resource: ObjectView<'_, W>,
    ) -> Result<()> {
        let mut s = self.world.lock();
        let event = TraceEvent::of(Hook::RefreshView)
            .object(view.object().id)
            .allocation(resource.allocation().map_or(0, |a| a.0.get()));
        self.world.note(&mut s, event);
        Ok(())
    }

    fn renamed_for<W: SameTypes<Self>>(
        &self,
        _imm: &mut SoftIc,
        resource: ObjectView<'_, W>,
        _ic: &mut u64,
        previous: AllocationHandle,
    ) {
        let mut s = self.world.lock();
        Destroyed::check(&mut s, resource.object(), "renamed");
        let event = TraceEvent::of(Hook::Renamed)
            .object(resource.object().id)
            .allocation(previous.0.get());
        self.world.note(&mut s, event);
    }

    fn blt_for<W: SameTypes<Self>>(
        &self,
        _imm: &mut SoftIc,
        objects: &Resolver<'_, W>,
        src: ObjectView<'_, W>,
        dst: ObjectView<'_, W>,
        plan: &BltPlan,
    ) -> Result<()> {
        let mut s = self.world.lock();
        note_buffer(&mut s, objects.buffer());
        let surface = |view: ObjectView<'_, W>, place, format, samples| -> Result<Surface> {
            Ok(Surface {
                allocation: view.allocation().ok_or(AppError::InvalidState)?,
                place,
                format,
                samples,
            })
        };
        let samples = u32::from(plan.src_texture.samples);
        let src = surface(src, plan.src, plan.src_format, samples)?;
        let dst = surface(dst, plan.dst, plan.dst_format, 1)?;
        Self::blt_pixels(
            &mut s,
            src,
            plan.src_rect,
            dst,
            plan.dst_rect,
            plan.rotation,
        )
    }
}

/// The buffer a hook was told it runs in never goes back, and the next submit's fence is the
/// last one told (checked there). It may move on without a submit: a buffer whose every
/// operation the driver refused stays empty and is never submitted.
/// Flags a write to immediate-context data (kernel memory, the open buffer, the immediate
/// context's bindings) from inside a deferred-context hook (R-L3: a deferred context works on
/// its own data only).
pub(crate) fn flag_ic_write(s: &mut State, what: &str) {
    if DeferredHook::running() {
        let what = format!("a deferred-context hook wrote immediate-context data: {what}");
        SoftWorld::violate(s, "R-L3", what);
    }
}

pub(crate) fn note_buffer(s: &mut State, buffer: u64) {
    match s.open_buffer {
        Some(open) if buffer < open => {
            let what = format!("a hook told buffer {buffer} after buffer {open}");
            SoftWorld::violate(s, "R-D1", what);
        }
        _ => s.open_buffer = Some(buffer),
    }
}
