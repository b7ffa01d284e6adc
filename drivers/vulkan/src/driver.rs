//! The driver on Vulkan ([`VulkanDriver`]): objects, the immediate context's primaries
//! (replayed and emulated lists run there operation by operation), and the hooks that
//! dispatch to the driver-built lists of [`crate::built`].

use std::sync::atomic::Ordering;
use std::sync::Arc;

use ash::vk;
use cmdlist::dxgi::{BltPlan, DisplayFormat, Rect, Rotation};
use cmdlist::handle::Resource;
use cmdlist::soft::SoftCommand;
use cmdlist::{
    AllocationHandle, AnyHandle, AppError, BindPoint, DeferredCall, DeferredId, Driver, Error,
    Handle, HandleSize, HandleSizeTable, HandleType, ListMemory, LocalHandles, MapCaps, ObjectDesc,
    ObjectView, Op, Resolver, Result, StateView, ThreadingCaps,
};

use crate::blt::Side;
use crate::built::{self, BuiltList, Packet, Patch, VulkanDeferred};
use crate::encode::{hazard_barrier, host_barrier, Arena, Encoder, Span};
use crate::hazard::{Range, Tracker};
use crate::world::{lock, BuiltEvent, Closed, Fault, VulkanWorld};

/// Bytes of every context-local handle and of a command list's private memory: the driver
/// keeps nothing per context-local handle, and a list's private memory holds one pointer.
const HANDLE_BYTES: usize = 16;

/// A driver object (an object's shared, read-only data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VulkanObject {
    /// Its type.
    pub ty: HandleType,
    /// Resources: size in bytes (their allocation's `VkBuffer` holds them from byte 0).
    pub byte_size: u64,
    /// Views: the first byte and length of the range of the resource viewed (the bytes are
    /// the resource's current allocation's, found when the view is used).
    pub view: Option<(u64, u64)>,
}

/// The immediate context's state: the primary being recorded, with its upload memory, and
/// the bindings [`SoftCommand::FillBound`] reads.
pub struct VulkanImmediate {
    world: Arc<VulkanWorld>,
    open: Option<(vk::CommandBuffer, Arena)>,
    bound: Vec<(BindPoint, AnyHandle)>,
    /// The FillIcByte values of the list being executed (kept: no allocation per execute).
    fills: Vec<(Patch, u8)>,
    /// What the open primary read and wrote since its last barrier (kept across primaries).
    hazards: Tracker,
}

impl Drop for VulkanImmediate {
    fn drop(&mut self) {
        // A primary never closed was never submitted: its upload memory is nobody's. The
        // command buffer itself goes with the immediate context's pool.
        if let Some((_, mut arena)) = self.open.take() {
            let mut ic = lock(&self.world.ic);
            arena.clear_into(&mut ic.free_chunks);
        }
        // Lists parked for a pending buffer hold their pool, which holds the world: destroy
        // them now (the device goes, its GPU work done or given a minute).
        let newest = lock(&self.world.parked).iter().map(|(f, _)| *f).max();
        if let Some(fence) = newest {
            let _ = self.world.wait(fence, std::time::Duration::from_secs(60));
            let mut ic = lock(&self.world.ic);
            self.world.retire(&mut ic);
        }
    }
}

pub(crate) fn set_binding(
    bound: &mut Vec<(BindPoint, AnyHandle)>,
    point: BindPoint,
    object: Option<AnyHandle>,
) {
    let at = bound.iter().position(|(p, _)| *p == point);
    match (at, object) {
        (Some(i), Some(h)) => bound[i].1 = h,
        (Some(i), None) => {
            bound.swap_remove(i);
        }
        (None, Some(h)) => bound.push((point, h)),
        (None, None) => {}
    }
}

/// Where an object's bytes are: its allocation's buffer, whole for a resource, a range of the
/// resource's for a view. `memory` is the allocation holding the bytes (the resource's, for
/// a view) and that resource's byte size.
pub(crate) fn span_of(
    world: &VulkanWorld,
    object: &VulkanObject,
    memory: Option<(AllocationHandle, u64)>,
) -> Result<Span> {
    let (allocation, size) = memory.ok_or(AppError::InvalidState)?;
    let (buffer, _) = world.buffer_of(allocation).ok_or(AppError::StaleHandle)?;
    span_in(buffer, object, allocation, size)
}

/// [`span_of`] where the caller found the allocation's buffer.
pub(crate) fn span_in(
    buffer: vk::Buffer,
    object: &VulkanObject,
    allocation: AllocationHandle,
    size: u64,
) -> Result<Span> {
    let whole = Span {
        allocation: allocation.0.get(),
        ..Span::of(buffer, size, 0, size)?
    };
    match object.view {
        None => Ok(whole),
        Some((first, len)) => whole.sub(first, len),
    }
}

/// Finds the bytes of the objects a command names: on the immediate context through the
/// resolver, on a deferred context through its context-local handles.
pub(crate) trait Lookup {
    /// The object's bytes (a resource whole, a view's range).
    fn span(&mut self, handle: AnyHandle) -> Result<Span>;
}

/// Records the commands both sides record alike (all but FillBound and FillIcByte).
pub(crate) fn encode_common(
    enc: &mut Encoder<'_>,
    look: &mut impl Lookup,
    command: &SoftCommand,
) -> Result<()> {
    match *command {
        SoftCommand::Copy { dst, src } => {
            let (d, s) = (look.span(dst.any())?, look.span(src.any())?);
            enc.copy(d, s)
        }
        SoftCommand::CopyRegion {
            dst,
            dst_offset,
            src,
            src_offset,
            len,
        } => {
            let (d, s) = (look.span(dst.any())?, look.span(src.any())?);
            let d = d.sub(dst_offset, len)?;
            let s = s.sub(src_offset, len)?;
            enc.copy(d, s)
        }
        SoftCommand::Fill { dst, value } => {
            let d = look.span(dst.any())?;
            enc.fill(d, value)
        }
        SoftCommand::ClearView { view, value } => {
            let d = look.span(view.any())?;
            enc.fill(d, value)
        }
        _ => Err(Error::Unsupported),
    }
}

struct IcLookup<'r, 'a> {
    world: &'r VulkanWorld,
    objects: &'r Resolver<'a, VulkanDriver>,
}

impl IcLookup<'_, '_> {
    fn view_span(&self, view: ObjectView<'_, VulkanDriver>) -> Result<Span> {
        let object = view.object();
        let memory = match object.view {
            None => view.allocation().map(|a| (a, object.byte_size)),
            Some(_) => {
                let resource = self.objects.resource_of(view)?;
                let size = resource.object().byte_size;
                resource.allocation().map(|a| (a, size))
            }
        };
        span_of(self.world, object, memory)
    }
}

impl Lookup for IcLookup<'_, '_> {
    fn span(&mut self, handle: AnyHandle) -> Result<Span> {
        let view = self.objects.get(handle)?;
        self.view_span(view)
    }
}

/// The Vulkan driver. See the crate docs for the mapping and the hazard rule.
#[derive(Clone)]
pub struct VulkanDriver {
    pub(crate) world: Arc<VulkanWorld>,
    sizes: HandleSizeTable,
}

impl VulkanDriver {
    pub(crate) fn new(world: Arc<VulkanWorld>) -> Self {
        let sizes = HandleSizeTable::new(HandleType::ALL.into_iter().map(|ty| HandleSize {
            ty,
            size: HANDLE_BYTES,
        }))
        .expect("one size per type is a valid table");
        VulkanDriver { world, sizes }
    }

    /// The shared world.
    pub fn world(&self) -> &Arc<VulkanWorld> {
        &self.world
    }

    pub(crate) fn builds_lists(&self) -> bool {
        self.world.config.command_lists && self.world.config.driver_built
    }

    fn check_ic_thread(&self, hook: &str) {
        let ic = *lock(&self.world.ic_thread);
        if ic.is_some_and(|t| t != std::thread::current().id()) {
            let what = format!("{hook} off the immediate context's thread");
            self.world.violate("R-T1", what);
        }
    }

    /// Runs `work` with an encoder into the immediate context's open primary (begun if none
    /// is), its upload memory, the world's upload chunks and the primary's reference list.
    fn with_primary<T>(
        &self,
        imm: &mut VulkanImmediate,
        work: impl FnOnce(&mut Encoder<'_>) -> Result<T>,
    ) -> Result<T> {
        let world = &*self.world;
        self.primary(imm)?;
        let VulkanImmediate { open, hazards, .. } = imm;
        let (cmd, arena) = open.as_mut().expect("opened above");
        let mut guard = lock(&world.ic);
        let ic = &mut *guard;
        work(&mut Encoder {
            world,
            cmd: *cmd,
            arena,
            free: &mut ic.free_chunks,
            refs: &mut ic.open_refs,
            hazards,
        })
    }

    /// The primary being recorded, begun now if none is.
    fn primary<'i>(
        &self,
        imm: &'i mut VulkanImmediate,
    ) -> Result<&'i mut (vk::CommandBuffer, Arena)> {
        if imm.open.is_none() {
            let world = &*self.world;
            let mut ic = lock(&world.ic);
            world.retire(&mut ic);
            let cmd = match ic.free_primaries.pop() {
                Some(cmd) => {
                    // SAFETY: its submission completed (`retire` hands over only buffers the
                    // timeline passed), so it is not pending
                    // (VUID-vkResetCommandBuffer-commandBuffer-00045); its pool was made with
                    // RESET_COMMAND_BUFFER (-00046); the pool is touched on the immediate
                    // context's thread only, this one (its external synchronisation).
                    unsafe {
                        world
                            .device
                            .reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty())
                    }
                    .map_err(|_| Error::OutOfMemory)?;
                    cmd
                }
                None => {
                    let info = vk::CommandBufferAllocateInfo::default()
                        .command_pool(ic.pool)
                        .level(vk::CommandBufferLevel::PRIMARY)
                        .command_buffer_count(1);
                    // SAFETY: the immediate context's pool, which only the immediate
                    // context's thread touches (checked; `retire` elsewhere does not): host
                    // access to the pool is externally synchronised (vkAllocateCommandBuffers
                    // host synchronisation).
                    world
                        .inject(Fault::CommandBuffer)
                        .and_then(|()| unsafe { world.device.allocate_command_buffers(&info) })
                        .map_err(|_| Error::OutOfMemory)?[0]
                }
            };
            let begin = vk::CommandBufferBeginInfo::default()
                .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            // SAFETY: a new or reset primary, not pending nor recording
            // (VUID-vkBeginCommandBuffer-commandBuffer-00049); its pool is touched on the
            // immediate context's thread only, this one.
            let begun = world
                .inject(Fault::CommandBuffer)
                .and_then(|()| unsafe { world.device.begin_command_buffer(cmd, &begin) });
            if begun.is_err() {
                // Kept for the next primary, which resets and begins it again.
                ic.free_primaries.push(cmd);
                return Err(Error::OutOfMemory);
            }
            imm.open = Some((cmd, Arena::default()));
            imm.hazards.begin();
        }
        Ok(imm.open.as_mut().expect("opened above"))
    }

    fn run_command(
        &self,
        imm: &mut VulkanImmediate,
        objects: &Resolver<'_, Self>,
        command: &SoftCommand,
    ) -> Result<()> {
        let world = &*self.world;
        let mut look = IcLookup { world, objects };
        // Resolve first: a refused command records nothing.
        enum Work {
            Fill(Span, u8),
            Draw(Span, Span, Span),
            Common,
        }
        let work = match *command {
            SoftCommand::FillBound { point, value } => {
                match imm.bound.iter().find(|(p, _)| *p == point) {
                    Some(&(_, h)) => Work::Fill(look.span(h)?, value),
                    None => return Ok(()),
                }
            }
            SoftCommand::FillIcByte { dst } => {
                let view = objects.get(dst)?;
                let value = objects.ic_data(view)?.to_le_bytes()[0];
                Work::Fill(look.view_span(view)?, value)
            }
            SoftCommand::Draw {
                constants,
                vertices,
                point,
            } => {
                let c = look.span(constants.any())?;
                let v = look.span(vertices.any())?;
                match imm.bound.iter().find(|(p, _)| *p == point) {
                    Some(&(_, h)) => {
                        let t = look.span(h)?;
                        crate::encode::check_draw(c, v, t)?;
                        Work::Draw(c, v, t)
                    }
                    None => return Ok(()),
                }
            }
            _ => Work::Common,
        };
        self.with_primary(imm, |enc| match work {
            Work::Fill(span, value) => enc.fill(span, value),
            Work::Draw(c, v, t) => enc.draw(c, v, t),
            Work::Common => encode_common(enc, &mut look, command),
        })
    }

    fn write(
        &self,
        imm: &mut VulkanImmediate,
        objects: &Resolver<'_, Self>,
        resource: ObjectView<'_, Self>,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        let world = &*self.world;
        let whole = IcLookup { world, objects }.view_span(resource)?;
        let span = whole.sub(offset, data.len() as u64)?;
        self.with_primary(imm, |enc| enc.write(span, data))
    }
}

/// Subresource `index` of a texture in a display format, as a Blt side covering it whole
/// (the bytes: `span`, the resource's).
fn surface(span: Span, view: ObjectView<'_, VulkanDriver>, index: u32) -> Result<Side> {
    let texture = view.texture().ok_or(AppError::NotDisplayFormat)?;
    let format = DisplayFormat::from_dxgi(texture.format).ok_or(AppError::NotDisplayFormat)?;
    if texture.samples != 1 {
        return Err(Error::Unsupported); // a resolve: not on the GPU yet
    }
    let place = texture.subresource(index).ok_or(AppError::OutOfRange)?;
    Ok(Side {
        span,
        place,
        format,
        rect: Rect::whole(place.width, place.height),
    })
}

impl VulkanDriver {
    /// The driver's part of a present (R-X1): the copy into `dst`, if any, as the soft
    /// driver makes it (the Blt, unstretched unless the sizes differ, no rotation), and the
    /// copy of the presented surface (its whole resource) into the headless screen the
    /// kernel's present callback then names ([`VulkanWorld::screen`]).
    fn present(
        &self,
        imm: &mut VulkanImmediate,
        objects: &Resolver<'_, Self>,
        src: ObjectView<'_, Self>,
        src_subresource: u32,
        dst: Option<(ObjectView<'_, Self>, u32)>,
    ) -> Result<()> {
        let world = &*self.world;
        let look = IcLookup { world, objects };
        let src_span = look.view_span(src)?;
        let blt = match dst {
            Some((d, index)) => Some((
                surface(src_span, src, src_subresource)?,
                surface(look.view_span(d)?, d, index)?,
            )),
            None => None,
        };
        let screen = world.screen_span(src_span.len)?;
        self.with_primary(imm, |enc| {
            if let Some((s, d)) = blt {
                enc.blt(&s, &d)?;
            }
            enc.copy(screen, src_span)
        })
    }

    /// A driver-built list replayed into the primary from its packets (after a rotation).
    fn replay_built(
        &self,
        imm: &mut VulkanImmediate,
        objects: &Resolver<'_, Self>,
        list: &BuiltList,
    ) -> Result<()> {
        let world = &*self.world;
        let mut look = IcLookup { world, objects };
        self.with_primary(imm, |enc| replay_packets(enc, &mut look, &list.packets))
    }
}

fn replay_packets(
    enc: &mut Encoder<'_>,
    look: &mut IcLookup<'_, '_>,
    packets: &[Packet],
) -> Result<()> {
    for packet in packets {
        match *packet {
            Packet::Command(command) => encode_common(enc, look, &command)?,
            Packet::FillAt(handle, value) => {
                let span = look.span(handle)?;
                enc.fill(span, value)?;
            }
            Packet::Draw {
                constants,
                vertices,
                target,
            } => {
                let c = look.span(constants.any())?;
                let v = look.span(vertices.any())?;
                let t = look.span(target)?;
                enc.draw(c, v, t)?;
            }
            Packet::IcFill(resource) => {
                let view = look.objects.get(resource)?;
                let value = look.objects.ic_data(view)?.to_le_bytes()[0];
                let span = look.view_span(view)?;
                enc.fill(span, value)?;
            }
            Packet::Upload { dst, offset, src } => {
                let span = look.span(dst.any())?.sub(offset, src.len)?;
                enc.copy(span, src)?;
            }
            Packet::Chain(inner) => {
                // SAFETY: the address of a chained list's `BuiltList`, which the engine keeps
                // alive and unrecycled while a list that executes it can run (the outer list
                // owns it, `Driver::execute_command_list_deferred`).
                let inner = unsafe { &*(inner as *const BuiltList) };
                replay_packets(enc, look, &inner.packets)?;
            }
        }
    }
    Ok(())
}

impl Driver for VulkanDriver {
    type Object = VulkanObject;
    type IcData = u64;
    type Immediate = VulkanImmediate;
    type Command = SoftCommand;
    type Deferred = VulkanDeferred;

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
        self.sizes.answer_poll(out)
    }

    fn calc_private_size(&self, desc: &ObjectDesc<'_>) -> usize {
        match desc {
            // A size the address space cannot hold asks for the most there is, which
            // allocation refuses as out of memory.
            ObjectDesc::Resource(r) => usize::try_from(r.byte_size).unwrap_or(usize::MAX),
            _ => 0,
        }
    }

    fn calc_deferred_context_handle_size(
        &self,
        _ty: HandleType,
        _object: Option<&VulkanObject>,
    ) -> usize {
        HANDLE_BYTES
    }

    fn calc_private_command_list_size(&self) -> usize {
        HANDLE_BYTES
    }

    fn create_object(
        &self,
        desc: &ObjectDesc<'_>,
        _memory: Option<AllocationHandle>,
        dependency: Option<&VulkanObject>,
    ) -> Result<(VulkanObject, u64)> {
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
        let ty = desc.handle_type();
        Ok((
            VulkanObject {
                ty,
                byte_size,
                view,
            },
            0,
        ))
    }

    fn destroy_object(&self, _ty: HandleType, _object: &VulkanObject, _ic: &mut u64) {
        // Nothing of the driver's: the memory is the kernel's allocation, deallocated on
        // the retire clock.
    }

    fn create_immediate(&self) -> Result<VulkanImmediate> {
        *lock(&self.world.ic_thread) = Some(std::thread::current().id());
        Ok(VulkanImmediate {
            world: Arc::clone(&self.world),
            open: None,
            bound: Vec::new(),
            fills: Vec::new(),
            hazards: Tracker::default(),
        })
    }

    fn execute(
        &self,
        imm: &mut VulkanImmediate,
        objects: &Resolver<'_, Self>,
        op: Op<'_, Self>,
    ) -> Result<()> {
        self.check_ic_thread("execute");
        match op {
            Op::Command(command) => self.run_command(imm, objects, command),
            Op::Update {
                resource,
                offset,
                data,
            } => self.write(imm, objects, resource, offset, data),
            Op::WriteDiscard { resource, data } => self.write(imm, objects, resource, 0, data),
            Op::Bind { point, object } => {
                set_binding(&mut imm.bound, point, object.map(|o| o.handle()));
                Ok(())
            }
            Op::ClearState => {
                imm.bound.clear();
                Ok(())
            }
            Op::BeginQuery(_) | Op::EndQuery(_) => Ok(()),
            Op::Present {
                src,
                src_subresource,
                dst,
                ..
            } => self.present(imm, objects, src, src_subresource, dst),
            _ => Ok(()),
        }
    }

    fn flush(&self, imm: &mut VulkanImmediate) {
        self.check_ic_thread("flush");
        let Some((cmd, arena)) = imm.open.take() else {
            return;
        };
        let world = &*self.world;
        host_barrier(world, cmd);
        world.count_barriers(imm.hazards.take_barriers());
        let mut ic = lock(&world.ic);
        let mut refs = std::mem::take(&mut ic.open_refs);
        refs.sort_unstable();
        refs.dedup();
        // SAFETY: the primary is in the recording state, outside a render pass
        // (VUID-vkEndCommandBuffer-commandBuffer-00059, -00060); its pool is touched on the
        // immediate context's thread only, this one.
        match unsafe { world.device.end_command_buffer(cmd) } {
            Ok(()) => ic.closed.push(Closed {
                cmd,
                chunks: arena.chunks,
                refs,
            }),
            Err(e) => {
                world.violate("vulkan", format!("vkEndCommandBuffer: {e}"));
                let mut arena = arena;
                arena.clear_into(&mut ic.free_chunks);
            }
        }
    }

    fn execute_command_list(
        &self,
        imm: &mut VulkanImmediate,
        list: &[u8],
        objects: &Resolver<'_, Self>,
    ) -> Result<()> {
        self.check_ic_thread("execute_command_list");
        // A list starts from the clear state and leaves it (R-C3).
        imm.bound.clear();
        if !self.builds_lists() {
            return Ok(());
        }
        let Some(list) = built::list_of(list) else {
            self.world
                .violate("R-R8", "a list executed with no buffer built".to_string());
            return Ok(());
        };
        if list.segments.is_empty() {
            return Ok(());
        }
        // The GPU runs its secondaries and reads its upload memory in place, whether it
        // executes them or they are replayed: they stay until this buffer completed, whatever
        // the list clock (`built::recycle`, `built::destroy`).
        list.note_execute(objects.buffer());
        // A resource its secondaries name has another allocation since (a rotation, a
        // rename): they would read or write the old one.
        let moved = |&(handle, allocation): &(AnyHandle, u64)| {
            let now = objects.get(handle).ok().and_then(|v| v.allocation());
            now.map(|a| a.0.get()) != Some(allocation)
        };
        if list.unsure || list.baked.iter().any(moved) {
            // Its secondaries name the buffers the resources had when it was recorded: the
            // list runs from its packets instead, every handle resolved now (R-X5).
            self.world.count(BuiltEvent::ReplayedAfterRotation, 1);
            return self.replay_built(imm, objects, list);
        }
        // Resolve the patches first: a refused execute records nothing.
        imm.fills.clear();
        for patch in &list.patches {
            let view = objects.get(patch.resource)?;
            let value = objects.ic_data(view)?.to_le_bytes()[0];
            imm.fills.push((*patch, value));
        }
        let world = &*self.world;
        let (cmd, _) = self.primary(imm)?;
        let cmd = *cmd;
        for &(patch, value) in &imm.fills {
            // Ordered after an earlier execute of the list that read these bytes.
            let bytes = Range::new(patch.buffer, patch.offset, patch.len4);
            if imm.hazards.access(&[], &[bytes]) {
                hazard_barrier(world, cmd);
            }
            // SAFETY: recording primary outside a render pass; the patch range is 4-aligned,
            // a multiple of 4 long and inside the list's upload buffer
            // (VUID-vkCmdFillBuffer-dstOffset-00024, -00025, -size-00027, -00028), which has
            // TRANSFER_DST usage and lives as long as the list.
            unsafe {
                world.device.cmd_fill_buffer(
                    cmd,
                    patch.buffer,
                    patch.offset,
                    patch.len4,
                    u32::from_ne_bytes([value; 4]),
                );
            }
        }
        // No barrier here: the list's first segment starts with one, whose first scope is
        // every command earlier in submission order, this primary's included.
        lock(&world.ic)
            .open_refs
            .extend_from_slice(&list.allocations);
        // SAFETY: `cmd` is a recording primary outside a render pass, recorded on the
        // immediate context's thread only (its pool's external synchronisation); every element is a
        // secondary in the executable state (ended at Finish or at a nested execute), begun
        // with SIMULTANEOUS_USE, so it may be pending elsewhere or appear twice
        // (VUID-vkCmdExecuteCommands-pCommandBuffers-00088, -00089, -00091, -00092); none was
        // begun with a render pass (-pCommandBuffers-00096 does not apply outside one); the
        // engine keeps the list, and every list it chained, alive until this buffer passed
        // the list clock, and the driver keeps their secondaries as they are until the
        // timeline passed it (`note_execute` above, `built::park_if_pending`).
        unsafe { world.device.cmd_execute_commands(cmd, &list.segments) };
        world.execute_commands.fetch_add(1, Ordering::Relaxed);
        // The primary does not know the list's ranges: its next command waits for a barrier.
        imm.hazards.unknown();
        Ok(())
    }

    fn builds_command_lists(&self) -> bool {
        self.builds_lists()
    }

    fn record_deferred(
        &self,
        dc: &mut VulkanDeferred,
        call: DeferredCall<'_, Self>,
        locals: &mut LocalHandles<'_, Self>,
    ) -> Result<()> {
        if !self.builds_lists() {
            return Ok(()); // the engine records and replays
        }
        built::record(&self.world, dc, call, locals)
    }

    fn map_discard_deferred<'a>(
        &self,
        dc: &'a mut VulkanDeferred,
        resource: Handle<Resource>,
        len: usize,
        locals: &mut LocalHandles<'_, Self>,
    ) -> Result<&'a mut [u8]> {
        if !self.builds_lists() {
            return Err(Error::Unsupported);
        }
        built::map_discard(&self.world, dc, resource, len, locals)
    }

    fn map_no_overwrite_deferred<'a>(
        &self,
        dc: &'a mut VulkanDeferred,
        resource: Handle<Resource>,
        len: usize,
        locals: &mut LocalHandles<'_, Self>,
    ) -> Result<&'a mut [u8]> {
        if !self.builds_lists() {
            return Err(Error::Unsupported);
        }
        built::map_no_overwrite(&self.world, dc, resource, len, locals)
    }

    /// Both of D3D11.1's: constant buffers and buffers bound as shader resources are plain
    /// buffers here, mapped (and, in built lists, renamed) as vertex buffers are. And a
    /// resource's bytes are its allocation's `VkBuffer` from byte 0: the immediate context's
    /// Map(DISCARD) renames (R-M5).
    fn map_caps(&self) -> MapCaps {
        MapCaps::all()
    }

    fn execute_command_list_deferred(
        &self,
        dc: &mut VulkanDeferred,
        list: &[u8],
        _state: StateView<'_>,
    ) -> Result<()> {
        if !self.builds_lists() {
            return Ok(());
        }
        built::chain(&self.world, dc, list)
    }

    fn create_deferred_context(&self, id: DeferredId) -> Result<VulkanDeferred> {
        VulkanDeferred::new(&self.world, id, self.builds_lists())
    }

    fn destroy_deferred_context(&self, dc: VulkanDeferred) {
        dc.destroy(&self.world);
    }

    fn open_local(
        &self,
        _dc: &mut VulkanDeferred,
        _ty: HandleType,
        _object: &VulkanObject,
        _dependency: Option<&[u8]>,
        _local: &mut [u8],
    ) -> Result<()> {
        Ok(())
    }

    fn close_local(
        &self,
        _dc: &mut VulkanDeferred,
        _ty: HandleType,
        _object: &VulkanObject,
        _local: &mut [u8],
        _state: StateView<'_>,
    ) {
    }

    fn create_command_list(
        &self,
        dc: &mut VulkanDeferred,
        private: &mut [u8],
        _state: StateView<'_>,
    ) -> Result<()> {
        if !self.builds_lists() {
            return Ok(());
        }
        built::finish(&self.world, dc, private)
    }

    fn destroy_command_list(&self, list: ListMemory<'_>) {
        if self.builds_lists() {
            built::destroy(&self.world, list.private);
        }
    }

    fn abandon_command_list(&self, dc: &mut VulkanDeferred) {
        if self.builds_lists() {
            built::abandon(&self.world, dc);
        }
    }

    fn recycle_command_list(&self, dc: &mut VulkanDeferred, list: ListMemory<'_>) {
        if self.builds_lists() {
            built::recycle(&self.world, dc, list.private);
        }
    }

    fn recycle_create_command_list(
        &self,
        dc: &mut VulkanDeferred,
        list: ListMemory<'_>,
        state: StateView<'_>,
    ) -> Result<()> {
        self.create_command_list(dc, list.private, state)
    }

    fn recycle_destroy_command_list(&self, _list: ListMemory<'_>) {
        // A light destroy: the list's secondaries and upload memory stay as they are until
        // `recycle_command_list` or `destroy_command_list`, which come after the list clock.
    }

    fn recycle_create_deferred_context(&self, dc: &mut VulkanDeferred) -> Result<()> {
        dc.renew(&self.world);
        Ok(())
    }

    fn blt(
        &self,
        imm: &mut VulkanImmediate,
        objects: &Resolver<'_, Self>,
        src: ObjectView<'_, Self>,
        dst: ObjectView<'_, Self>,
        plan: &BltPlan,
    ) -> Result<()> {
        self.check_ic_thread("blt");
        if plan.src_texture.samples != 1 || plan.rotation != Rotation::Identity {
            return Err(Error::Unsupported);
        }
        let world = &*self.world;
        let look = IcLookup { world, objects };
        let s = Side {
            span: look.view_span(src)?,
            place: plan.src,
            format: plan.src_format,
            rect: plan.src_rect,
        };
        let d = Side {
            span: look.view_span(dst)?,
            place: plan.dst,
            format: plan.dst_format,
            rect: plan.dst_rect,
        };
        self.with_primary(imm, |enc| enc.blt(&s, &d))
    }
}
