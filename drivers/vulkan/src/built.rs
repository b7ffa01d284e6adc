//! Driver-built command lists ([`cmdlist::ListMode::DriverBuilt`]): secondary command
//! buffers recorded on the deferred context's thread.
//!
//! - Each deferred context owns a `VkCommandPool` ([`Pool`]), made in
//!   `create_deferred_context`. Host access to a pool and to the command buffers allocated
//!   from it must be externally synchronised (spec, "Command Pools"); the engine's rule that
//!   one thread at a time works on a deferred context is that synchronisation for every
//!   hook that runs on the context's thread. A guard checks it: two hooks inside one pool at
//!   once, or a hook on a thread other than the one before, is recorded (the second as the
//!   thread list of [`crate::VulkanWorld::pool_threads`]; a context may move between threads,
//!   one at a time, so only overlap is a violation).
//! - A recording appends each call to the context's current secondary (begun with
//!   `SIMULTANEOUS_USE` and an inheritance info without render pass) and keeps the bytes it
//!   uploads (UpdateSubresource, Map(DISCARD)) in the recording's own upload memory. A
//!   Map(NO_OVERWRITE) hands out the upload bytes of the resource's last Map(DISCARD) in the
//!   recording again (R-M2): the copy that discard's Unmap recorded carries them, and each
//!   execute runs it after the whole recording was written, so the NO_OVERWRITE's Unmap
//!   records nothing.
//! - A list is a sequence of segments: its own secondaries and, where it executes another
//!   list, that list's segments, chained in O(segments) (a secondary cannot execute another
//!   without `VK_EXT_nested_command_buffer`).
//! - Finish hands the secondaries and the upload memory to a [`BuiltList`] whose pointer the
//!   list's private memory holds. CommandListExecute is one `vkCmdExecuteCommands` of its
//!   segments.
//! - A list's secondaries and upload memory are reset or freed only in
//!   `recycle_command_list` (on the context's thread: back into its cache) and
//!   `destroy_command_list` (any thread), which the engine calls after the list clock, and
//!   only once the timeline passed the newest buffer that executed the list (each execute
//!   notes its buffer in the list and in the lists it chained): under `Clock::Submitted`
//!   that buffer may still run, and the list is parked in the world until it completed,
//!   then destroyed from [`VulkanWorld::retire`](crate::VulkanWorld). Never in
//!   `recycle_destroy_command_list`. `destroy_command_list` may run on any thread while the
//!   context records: it does not touch the pool then, but hands the secondaries to the
//!   pool's graveyard under the pool's lock, and the context frees them on its own thread at
//!   its next Finish, renewal or destruction. Once the context is destroyed, nobody records
//!   from the pool any more, and the lock alone synchronises the frees; the pool itself is
//!   destroyed by whoever drops its last reference (the context or its last list).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;

use ash::vk;
use cmdlist::handle::Resource;
use cmdlist::soft::SoftCommand;
use cmdlist::{
    AnyHandle, AppError, BindPoint, DeferredCall, DeferredId, Error, Handle, LocalHandles, Result,
};

use crate::buffer_cache::BufferCache;
use crate::driver::{encode_common, set_binding, span_in, Lookup, VulkanDriver};
use crate::encode::{hazard_barrier, Arena, Encoder, Span};
use crate::hazard::Tracker;
use crate::rename::Renames;
use crate::world::{lock, BuiltEvent, Chunk, Fault, VulkanWorld};

/// A deferred context's command pool.
pub(crate) struct Pool {
    world: Arc<VulkanWorld>,
    pool: vk::CommandPool,
    context: u32,
    state: Mutex<PoolState>,
    /// Set while a hook works in the pool (the external-synchronisation check).
    busy: AtomicBool,
    /// The thread that last worked in the pool.
    last_thread: Mutex<Option<ThreadId>>,
}

struct PoolState {
    /// The context still records from the pool.
    alive: bool,
    /// Secondaries of destroyed lists, for the context's thread to free.
    graveyard: Vec<vk::CommandBuffer>,
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: the last reference: the context is destroyed and every list recorded from
        // the pool is destroyed once the timeline passed the newest buffer that executed it
        // (a list parked until then holds this pool), so no command buffer of the pool is
        // pending (VUID-vkDestroyCommandPool-commandPool-00041), and nobody else can reach
        // the pool (external synchronisation).
        unsafe { self.world.device.destroy_command_pool(self.pool, None) };
    }
}

/// Marks a hook working in a pool; checks nobody else is.
struct PoolUse<'a>(&'a Pool);

impl<'a> PoolUse<'a> {
    fn enter(pool: &'a Pool) -> Self {
        if pool.busy.swap(true, Ordering::Acquire) {
            let what = format!(
                "deferred context {}'s command pool used by two threads at once",
                pool.context
            );
            pool.world.violate("thread", what);
        }
        let me = std::thread::current().id();
        let mut last = lock(&pool.last_thread);
        if *last != Some(me) {
            *last = Some(me);
            pool.world.note_pool_thread(pool.context, false);
        }
        PoolUse(pool)
    }
}

impl Drop for PoolUse<'_> {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

/// A FillIcByte of a driver-built list: the value is the resource's IC data when the list
/// runs, so the list copies it from `len4` bytes of its own upload memory, and each execute
/// first fills them with the value of the moment (in the primary, before the list).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Patch {
    pub(crate) resource: Handle<Resource>,
    pub(crate) buffer: vk::Buffer,
    pub(crate) offset: u64,
    pub(crate) len4: u64,
}

/// A recorded call as the list keeps it besides its secondaries, naming objects by handle:
/// what an execute replays into the primary, resolving every handle then, when resource
/// identities rotated since the list was recorded (R-X5): its secondaries name the buffers
/// the resources had then.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Packet {
    /// Copy, CopyRegion, Fill, ClearView.
    Command(SoftCommand),
    /// A FillBound, its binding resolved while recording (bindings are the list's own).
    FillAt(AnyHandle, u8),
    /// A FillIcByte.
    IcFill(Handle<Resource>),
    /// A Draw, its render target's binding resolved while recording.
    Draw {
        constants: Handle<Resource>,
        vertices: Handle<Resource>,
        target: AnyHandle,
    },
    /// UpdateSubresource or a Map's contents: bytes of the list's upload memory copied to
    /// `offset` of the resource.
    Upload {
        dst: Handle<Resource>,
        offset: u64,
        src: Span,
    },
    /// A chained list (the address of its `BuiltList`, which the engine keeps alive while
    /// this list can run).
    Chain(usize),
}

/// A finished list's buffers: what its private memory points to.
pub(crate) struct BuiltList {
    pool: Arc<Pool>,
    /// Secondaries recorded for this list (its own).
    own: Vec<vk::CommandBuffer>,
    /// What an execute runs, in order: its own secondaries and the chained lists'.
    pub(crate) segments: Vec<vk::CommandBuffer>,
    arena: Arena,
    /// Its patches and the chained lists'.
    pub(crate) patches: Vec<Patch>,
    /// What it recorded, for a replay after a rotation.
    pub(crate) packets: Vec<Packet>,
    /// The allocations its segments reference (the chained lists' too), sorted: an execute
    /// adds them to the primary's, for the allocation-list check (R-D1).
    pub(crate) allocations: Vec<u64>,
    /// The resources whose buffers its segments name (the chained lists' too), each with
    /// the allocation it had when it was looked up, sorted: an execute finds whether a
    /// rotation (R-X5) or a rename (R-M5) moved one since.
    pub(crate) baked: Vec<(AnyHandle, u64)>,
    /// A recording hook panicked while it looked resources up: what it baked is not known,
    /// so every execute replays the packets.
    pub(crate) unsure: bool,
    /// The lists it chained, and theirs (the addresses of their `BuiltList`s, which the
    /// engine keeps alive while this list lives): an execute of this list runs their
    /// secondaries and reads their upload memory too.
    chained: Vec<usize>,
    /// The newest buffer (its fence) that executed this list or a list that chained it: its
    /// secondaries and upload memory are reused or freed only once the timeline passed it.
    last_execute: AtomicU64,
}

impl BuiltList {
    /// Notes that buffer `fence` executes this list, and so the lists it chained.
    pub(crate) fn note_execute(&self, fence: u64) {
        self.last_execute.fetch_max(fence, Ordering::Relaxed);
        for &inner in &self.chained {
            // SAFETY: the address of a chained list's `BuiltList`, which the engine keeps
            // alive and unrecycled while this list lives (the outer list owns it,
            // `Driver::execute_command_list_deferred`).
            let inner = unsafe { &*(inner as *const BuiltList) };
            inner.last_execute.fetch_max(fence, Ordering::Relaxed);
        }
    }
}

/// A recording in progress.
#[derive(Default)]
struct Building {
    current: Option<vk::CommandBuffer>,
    own: Vec<vk::CommandBuffer>,
    segments: Vec<vk::CommandBuffer>,
    arena: Arena,
    patches: Vec<Patch>,
    packets: Vec<Packet>,
    allocations: Vec<u64>,
    baked: Vec<(AnyHandle, u64)>,
    unsure: bool,
    chained: Vec<usize>,
    bound: Vec<(BindPoint, AnyHandle)>,
}

/// Upload bytes a Map handed out: where they are in the recording's arena.
#[derive(Clone, Copy, Debug)]
struct Mapped {
    resource: Handle<Resource>,
    /// The arena chunk that holds them (its index in [`Arena::chunks`]: chunks are only
    /// pushed while the recording lasts).
    chunk: usize,
    bytes: Span,
    /// A Map(NO_OVERWRITE): the bytes of the resource's last discard again, whose Unmap
    /// records nothing.
    again: bool,
}

/// The driver's state of a deferred context: where the driver builds its lists, its
/// `VkCommandPool` and the recording in progress.
///
/// - The pool is made in `create_deferred_context`. Host access to a pool and to its
///   command buffers must be externally synchronised; the engine's rule that one thread at a
///   time works on a deferred context is that synchronisation for every hook on the
///   context's thread. A guard flags two hooks inside one pool at once; the threads that
///   used it are in [`crate::VulkanWorld::pool_threads`] (a context may move between
///   threads, one at a time).
/// - Each recorded call goes into the current secondary (`SIMULTANEOUS_USE`, inheritance
///   info without render pass); its uploads (UpdateSubresource, Map(DISCARD)) into the
///   recording's own upload memory, which the list keeps: each execute copies them again.
/// - A list is a sequence of segments: its own secondaries, and where it executes another
///   list, that list's segments, chained in O(segments).
/// - A list's secondaries and upload memory are reset (into this context's cache) at
///   `recycle_command_list`, or freed at `destroy_command_list`, both after the list clock;
///   never at `recycle_destroy_command_list`. `destroy_command_list` runs on any thread: while
///   the context lives it hands the secondaries to the pool's graveyard under the pool's
///   lock, and the context frees them on its thread at its next Finish, renewal or
///   destruction; once the context is gone the lock alone synchronises the frees, and the
///   last of the context and its lists destroys the pool.
pub struct VulkanDeferred {
    id: DeferredId,
    /// Only where the driver builds its lists.
    pool: Option<Arc<Pool>>,
    /// Secondaries reset and ready to record.
    free_secondaries: Vec<vk::CommandBuffer>,
    free_chunks: Vec<Chunk>,
    building: Building,
    /// Open Maps of the recording (kept out of [`Building`], which Finish hands to the list,
    /// so that their memory is reused from recording to recording).
    maps: Vec<Mapped>,
    /// The last Map(DISCARD) of each resource the recording unmapped, for a later
    /// Map(NO_OVERWRITE) (R-M2); emptied when the recording ends.
    discards: Vec<Mapped>,
    /// The discards whose copy into their resource is not recorded yet: draws read their
    /// upload bytes in place ([`crate::rename`]); emptied when a segment ends.
    renames: Renames,
    /// The buffers behind the allocations its calls looked up lately.
    buffers: BufferCache,
    /// What the current secondary read and wrote since its last barrier (kept across
    /// secondaries).
    hazards: Tracker,
}

impl VulkanDeferred {
    pub(crate) fn new(world: &Arc<VulkanWorld>, id: DeferredId, builds: bool) -> Result<Self> {
        let pool = if builds {
            let info = vk::CommandPoolCreateInfo::default()
                .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER)
                .queue_family_index(world.queue_family);
            // SAFETY: the device's queue family (VUID-vkCreateCommandPool-queueFamilyIndex
            // -01937); creating a pool needs no synchronisation with other pools.
            let pool = world
                .inject(Fault::Pool)
                .and_then(|()| unsafe { world.device.create_command_pool(&info, None) })
                .map_err(|_| Error::OutOfMemory)?;
            world.note_pool_thread(id.get(), true);
            Some(Arc::new(Pool {
                world: Arc::clone(world),
                pool,
                context: id.get(),
                state: Mutex::new(PoolState {
                    alive: true,
                    graveyard: Vec::new(),
                }),
                busy: AtomicBool::new(false),
                last_thread: Mutex::new(Some(std::thread::current().id())),
            }))
        } else {
            None
        };
        Ok(VulkanDeferred {
            id,
            pool,
            free_secondaries: Vec::new(),
            free_chunks: Vec::new(),
            building: Building::default(),
            maps: Vec::new(),
            discards: Vec::new(),
            renames: Renames::default(),
            buffers: BufferCache::default(),
            hazards: Tracker::default(),
        })
    }

    /// The context's id.
    pub fn id(&self) -> DeferredId {
        self.id
    }

    /// Frees the graveyard's secondaries (on the context's thread, inside a `PoolUse`).
    fn bury(world: &VulkanWorld, pool: &Pool) {
        let dead = std::mem::take(&mut lock(&pool.state).graveyard);
        if !dead.is_empty() {
            // SAFETY: the secondaries come from this pool; their lists were destroyed once
            // the timeline passed the newest buffer that executed them, so none is pending (VUID-vkFreeCommandBuffers-pCommandBuffers
            // -00047); the pool is this context's, on its thread (external synchronisation by
            // the one-thread-per-context rule, checked by `PoolUse`).
            unsafe { world.device.free_command_buffers(pool.pool, &dead) };
        }
    }

    /// Records the copies of every discard still renamed ([`crate::rename`]) into the
    /// current secondary (begun if none is): before a segment ends, the resources' buffers
    /// get their bytes.
    fn settle_renames(&mut self, world: &VulkanWorld) -> Result<()> {
        if self.renames.is_empty() {
            return Ok(());
        }
        let cmd = self.secondary(world)?;
        let mut enc = Encoder {
            world,
            cmd,
            arena: &mut self.building.arena,
            free: &mut self.free_chunks,
            refs: &mut self.building.allocations,
            hazards: &mut self.hazards,
        };
        settle_all(&mut enc, &mut self.renames)
    }

    /// Ends the current secondary, making it a segment.
    fn end_segment(&mut self, world: &VulkanWorld) -> Result<()> {
        if let Some(cmd) = self.building.current.take() {
            world.count_barriers(self.hazards.take_barriers());
            // SAFETY: recording state, no render pass (VUID-vkEndCommandBuffer-commandBuffer
            // -00059, -00060); the pool is this context's, on its thread.
            unsafe { world.device.end_command_buffer(cmd) }.map_err(|_| Error::OutOfMemory)?;
            self.building.own.push(cmd);
            self.building.segments.push(cmd);
        }
        Ok(())
    }

    /// The current secondary, begun now if none is.
    fn secondary(&mut self, world: &VulkanWorld) -> Result<vk::CommandBuffer> {
        if let Some(cmd) = self.building.current {
            return Ok(cmd);
        }
        let pool = self.pool.as_ref().expect("built lists have a pool");
        let cmd = match self.free_secondaries.pop() {
            Some(cmd) => cmd,
            None => {
                let info = vk::CommandBufferAllocateInfo::default()
                    .command_pool(pool.pool)
                    .level(vk::CommandBufferLevel::SECONDARY)
                    .command_buffer_count(1);
                // SAFETY: this context's pool, on its thread (external synchronisation).
                world
                    .inject(Fault::CommandBuffer)
                    .and_then(|()| unsafe { world.device.allocate_command_buffers(&info) })
                    .map_err(|_| Error::OutOfMemory)?[0]
            }
        };
        let inheritance = vk::CommandBufferInheritanceInfo::default();
        let begin = vk::CommandBufferBeginInfo::default()
            .flags(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE)
            .inheritance_info(&inheritance);
        // SAFETY: a new or reset secondary, not pending nor recording
        // (VUID-vkBeginCommandBuffer-commandBuffer-00049); a secondary's inheritance info is
        // given (-00051) without render pass, so RENDER_PASS_CONTINUE is not set (-00053);
        // this context's pool, on its thread.
        let begun = world
            .inject(Fault::CommandBuffer)
            .and_then(|()| unsafe { world.device.begin_command_buffer(cmd, &begin) });
        if begun.is_err() {
            // Kept for the next recording, which begins it again.
            self.free_secondaries.push(cmd);
            return Err(Error::OutOfMemory);
        }
        // Its first command orders it after everything earlier in submission order: the
        // primary's commands before the vkCmdExecuteCommands that runs it, and the segments
        // before it in that call (a nested list's, or this list's own, executed twice).
        hazard_barrier(world, cmd);
        self.hazards.begin();
        self.hazards.barrier();
        self.building.current = Some(cmd);
        Ok(cmd)
    }

    /// Resets this context's own secondaries and keeps them, with the upload memory.
    fn take_back(&mut self, world: &VulkanWorld, own: Vec<vk::CommandBuffer>, mut arena: Arena) {
        for cmd in own {
            // SAFETY: a secondary of this context's pool that is not pending: never executed
            // (an abandoned recording, maybe still recording) or the timeline passed the
            // newest buffer that executed its list (recycle, `park_if_pending`); the pool
            // has RESET_COMMAND_BUFFER (VUID-vkResetCommandBuffer-commandBuffer-00045, -00046);
            // on the context's thread.
            match unsafe {
                world
                    .device
                    .reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty())
            } {
                Ok(()) => self.free_secondaries.push(cmd),
                Err(e) => world.violate("vulkan", format!("vkResetCommandBuffer: {e}")),
            }
        }
        arena.clear_into(&mut self.free_chunks);
    }

    pub(crate) fn renew(&mut self, world: &VulkanWorld) {
        if let Some(pool) = self.pool.clone() {
            let _use = PoolUse::enter(&pool);
            Self::bury(world, &pool);
        }
    }

    pub(crate) fn destroy(mut self, world: &VulkanWorld) {
        let Some(pool) = self.pool.take() else {
            return;
        };
        {
            let _use = PoolUse::enter(&pool);
            // A secondary still recording is freed as it is: ending it could find buffers
            // it names destroyed already (a context that outlives its device, R-D3).
            let mut own = std::mem::take(&mut self.building.own);
            own.extend(self.building.current.take());
            own.append(&mut self.free_secondaries);
            let mut state = lock(&pool.state);
            own.append(&mut state.graveyard);
            state.alive = false;
            if !own.is_empty() {
                // SAFETY: this context's own secondaries (never executed, or reset after the
                // list clock) and the graveyard's (destroyed lists): none pending
                // (VUID-vkFreeCommandBuffers-pCommandBuffers-00047); on the context's thread,
                // and under the pool's lock, which every later user takes.
                unsafe { world.device.free_command_buffers(pool.pool, &own) };
            }
        }
        world.give_back_chunks(self.building.arena.chunks.drain(..));
        world.give_back_chunks(self.free_chunks.drain(..));
    }
}

/// The list a list's private memory points to.
pub(crate) fn list_of(private: &[u8]) -> Option<&BuiltList> {
    let raw = address_in(private);
    // SAFETY: a non-zero value is the `Box<BuiltList>` Finish leaked into this memory; the
    // engine keeps the list (its private memory unchanged) until `recycle_command_list` or
    // `destroy_command_list`, which take the box back, and calls neither while an execute
    // that reads it runs.
    (raw != 0).then(|| unsafe { &*(raw as *const BuiltList) })
}

/// The address a list's private memory holds (its first 8 bytes; 0: none).
fn address_in(private: &[u8]) -> usize {
    let bytes = private[..8].try_into().expect("16-byte list handles");
    usize::try_from(u64::from_ne_bytes(bytes)).expect("an address of this machine")
}

fn take_list(private: &mut [u8]) -> Option<Box<BuiltList>> {
    let raw = address_in(private);
    private[..8].fill(0);
    // SAFETY: as in `list_of`; zeroing the pointer first makes this the only owner.
    (raw != 0).then(|| unsafe { Box::from_raw(raw as *mut BuiltList) })
}

struct DcLookup<'r, 'a> {
    world: &'r VulkanWorld,
    locals: &'r mut LocalHandles<'a, VulkanDriver>,
    /// Where each resource looked up is noted with the allocation read (the recording's).
    baked: &'r mut Vec<(AnyHandle, u64)>,
    buffers: &'r mut BufferCache,
}

impl Lookup for DcLookup<'_, '_> {
    fn span(&mut self, handle: AnyHandle) -> Result<Span> {
        let local = self.locals.get(handle).ok_or(AppError::InvalidState)?;
        let view = local.view;
        let object = view.object().clone();
        let (resource, memory) = match object.view {
            None => (handle, view.allocation().map(|a| (a, object.byte_size))),
            Some(_) => {
                // A view's resource is open before it (R-H3).
                let resource = view.dependency().ok_or(AppError::MissingDependency)?;
                let local = self
                    .locals
                    .get(resource)
                    .ok_or(AppError::MissingDependency)?;
                let size = local.view.object().byte_size;
                (resource, local.view.allocation().map(|a| (a, size)))
            }
        };
        // The allocation this secondary will name, as read here (once: a second read could
        // see a rename the first did not).
        if let Some((allocation, _)) = memory {
            let noted = (resource, allocation.0.get());
            // A draw looks up its constants, vertices and target each time: the last few
            // notes catch the repeats (Finish sorts out the rest).
            if !self.baked.iter().rev().take(4).any(|&n| n == noted) {
                self.baked.push(noted);
            }
        }
        let (allocation, size) = memory.ok_or(AppError::InvalidState)?;
        let buffer = self
            .buffers
            .buffer_of(self.world, allocation)
            .ok_or(AppError::StaleHandle)?;
        span_in(buffer, &object, allocation, size)
    }
}

/// `record_deferred` where the driver builds its lists.
pub(crate) fn record(
    world: &VulkanWorld,
    dc: &mut VulkanDeferred,
    call: DeferredCall<'_, VulkanDriver>,
    locals: &mut LocalHandles<'_, VulkanDriver>,
) -> Result<()> {
    // The resources looked up are noted aside while the call records (the recording's
    // buffers are borrowed meanwhile), and put back after it; a hook that panics in between
    // leaves the list unsure of them for good.
    let mut baked = core::mem::take(&mut dc.building.baked);
    let mut buffers = core::mem::take(&mut dc.buffers);
    let unsure = core::mem::replace(&mut dc.building.unsure, true);
    let recorded = record_noting(world, dc, call, locals, &mut baked, &mut buffers);
    dc.buffers = buffers;
    dc.building.baked = baked;
    dc.building.unsure = unsure;
    recorded
}

fn record_noting(
    world: &VulkanWorld,
    dc: &mut VulkanDeferred,
    call: DeferredCall<'_, VulkanDriver>,
    locals: &mut LocalHandles<'_, VulkanDriver>,
    baked: &mut Vec<(AnyHandle, u64)>,
    buffers: &mut BufferCache,
) -> Result<()> {
    let pool = dc.pool.clone().expect("built lists have a pool");
    let _use = PoolUse::enter(&pool);
    let mut look = DcLookup {
        world,
        locals,
        baked,
        buffers,
    };
    // Resolve first: a refused call records nothing.
    enum Work<'d> {
        Common(&'d SoftCommand),
        Fill(AnyHandle, Span, u8),
        Patch(Handle<Resource>, Span),
        /// A draw: the packet to keep, the constants', vertices' and target's bytes.
        Draw(Packet, [Span; 3]),
        /// Bytes to upload now and copy to `offset` of the resource.
        Write(Handle<Resource>, u64, Span, &'d [u8]),
        /// Bytes uploaded already (a Map(DISCARD)'s, the `maps` entry at this index), copied
        /// to the resource's start.
        Copy(usize, Span),
    }
    let work = match call {
        DeferredCall::Command(command) => match *command {
            SoftCommand::FillBound { point, value } => {
                match dc.building.bound.iter().find(|(p, _)| *p == point) {
                    Some(&(_, h)) => Work::Fill(h, look.span(h)?, value),
                    None => return Ok(()),
                }
            }
            SoftCommand::FillIcByte { dst } => Work::Patch(dst, look.span(dst.any())?),
            SoftCommand::Draw {
                constants,
                vertices,
                point,
            } => {
                let c = look.span(constants.any())?;
                let v = look.span(vertices.any())?;
                match dc.building.bound.iter().find(|(p, _)| *p == point) {
                    Some(&(_, target)) => {
                        let t = look.span(target)?;
                        crate::encode::check_draw(c, v, t)?;
                        let packet = Packet::Draw {
                            constants,
                            vertices,
                            target,
                        };
                        Work::Draw(packet, [c, v, t])
                    }
                    None => return Ok(()),
                }
            }
            _ => Work::Common(command),
        },
        DeferredCall::Update {
            resource,
            offset,
            data,
        } => {
            let whole = look.span(resource.any())?;
            Work::Write(
                resource,
                offset,
                whole.sub(offset, data.len() as u64)?,
                data,
            )
        }
        DeferredCall::Unmap { resource, .. } => {
            let at = dc.maps.iter().position(|m| m.resource == resource);
            let Some(at) = at else {
                let what = format!("Unmap of {resource:?}, which the driver never mapped");
                world.violate("driver-built", what);
                return Ok(());
            };
            if dc.maps[at].again {
                // The bytes are the last discard's, which the copy its Unmap recorded
                // carries: each execute runs that copy once the whole recording was
                // written (R-M2).
                dc.maps.swap_remove(at);
                return Ok(());
            }
            // The Map ends once its copy is recorded: a refused Unmap leaves it open, as
            // the engine does.
            let whole = look.span(resource.any())?;
            Work::Copy(at, whole.sub(0, dc.maps[at].bytes.len)?)
        }
        DeferredCall::Bind { point, object } => {
            set_binding(&mut dc.building.bound, point, object);
            return Ok(());
        }
        _ => return Ok(()), // queries: no GPU work in this driver
    };
    let cmd = dc.secondary(world)?;
    let renames = &mut dc.renames;
    let mut enc = Encoder {
        world,
        cmd,
        arena: &mut dc.building.arena,
        free: &mut dc.free_chunks,
        refs: &mut dc.building.allocations,
        hazards: &mut dc.hazards,
    };
    let packet = match work {
        Work::Common(command) => {
            // Its objects are looked up as it records: every copy first.
            settle_all(&mut enc, renames)?;
            encode_common(&mut enc, &mut look, command)?;
            Packet::Command(*command)
        }
        Work::Fill(handle, span, value) => {
            settle(&mut enc, renames, span)?;
            enc.fill(span, value)?;
            Packet::FillAt(handle, value)
        }
        Work::Draw(packet, [c, v, t]) => {
            // The target is written: its buffer gets its bytes first. The inputs are read
            // where they are.
            settle(&mut enc, renames, t)?;
            let c = read(&mut enc, renames, c)?;
            let v = read(&mut enc, renames, v)?;
            enc.draw(c, v, t)?;
            packet
        }
        Work::Write(resource, offset, dst, data) => {
            settle(&mut enc, renames, dst)?;
            let len = data.len() as u64;
            let (buffer, at, ptr) = enc.arena.reserve(world, enc.free, len)?;
            // SAFETY: `reserve` handed out `len` bytes at `ptr`, this recording's alone.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, data.len()) };
            let src = Span::upload(buffer, at, len);
            enc.copy(dst, src)?;
            Packet::Upload {
                dst: resource,
                offset,
                src,
            }
        }
        Work::Copy(at, dst) => {
            // Renamed: the copy waits until something else than a draw's read needs the
            // resource's buffer, or the segment ends (`crate::rename`).
            let map = dc.maps[at];
            if let Some(earlier) = renames.uncovered_by(dst) {
                enc.copy(earlier.dst, earlier.src)?;
            }
            renames.rename(dst, map.bytes);
            dc.maps.swap_remove(at);
            match dc.discards.iter_mut().find(|d| d.resource == map.resource) {
                Some(last) => *last = map,
                None => dc.discards.push(map),
            }
            Packet::Upload {
                dst: map.resource,
                offset: 0,
                src: map.bytes,
            }
        }
        Work::Patch(resource, dst) => {
            let len4 = dst.len.next_multiple_of(4);
            if len4 == 0 {
                return Ok(());
            }
            settle(&mut enc, renames, dst)?;
            let (buffer, offset, _) = enc.arena.reserve(world, enc.free, len4)?;
            enc.copy(dst, Span::upload(buffer, offset, dst.len))?;
            dc.building.patches.push(Patch {
                resource,
                buffer,
                offset,
                len4,
            });
            Packet::IcFill(resource)
        }
    };
    dc.building.packets.push(packet);
    Ok(())
}

/// Records the pending copy of a discard into `span`'s buffer, if any: a command other than
/// a draw's read is about to touch it (`crate::rename`).
fn settle(enc: &mut Encoder<'_>, renames: &mut Renames, span: Span) -> Result<()> {
    match renames.take_meeting(span) {
        Some(copy) => enc.copy(copy.dst, copy.src),
        None => Ok(()),
    }
}

/// Records every pending copy of a discard.
fn settle_all(enc: &mut Encoder<'_>, renames: &mut Renames) -> Result<()> {
    while let Some(copy) = renames.pop() {
        enc.copy(copy.dst, copy.src)?;
    }
    Ok(())
}

/// The bytes a draw reads for `span`: a renamed resource's upload bytes in place, else the
/// span itself, after the pending copy into its buffer where it reaches past them.
fn read(enc: &mut Encoder<'_>, renames: &mut Renames, span: Span) -> Result<Span> {
    match renames.read(span) {
        Some(bytes) => Ok(bytes),
        None => settle(enc, renames, span).map(|()| span),
    }
}

/// `map_discard_deferred`: `len` zeroed bytes of the recording's upload memory, copied into
/// the resource by the command the Unmap records (each execute copies them again).
pub(crate) fn map_discard<'a>(
    world: &VulkanWorld,
    dc: &'a mut VulkanDeferred,
    resource: Handle<Resource>,
    len: usize,
    locals: &mut LocalHandles<'_, VulkanDriver>,
) -> Result<&'a mut [u8]> {
    if locals.get(resource.any()).is_none() {
        return Err(AppError::InvalidState.into());
    }
    let (buffer, offset, ptr) =
        dc.building
            .arena
            .reserve(world, &mut dc.free_chunks, len as u64)?;
    dc.maps.push(Mapped {
        resource,
        // `reserve` hands out bytes of the arena's last chunk.
        chunk: dc.building.arena.chunks.len() - 1,
        bytes: Span::upload(buffer, offset, len as u64),
        again: false,
    });
    // SAFETY: `reserve` handed out `len` bytes of mapped memory at `ptr`, which the
    // recording's arena owns until Finish or Abandon (both need `&mut dc`, which the result
    // borrows); no other reference to those bytes exists.
    let bytes = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
    bytes.fill(0);
    Ok(bytes)
}

/// `map_no_overwrite_deferred`: the upload bytes of the resource's last Map(DISCARD) in this
/// recording, as that discard's Unmap left them, handed out again to be written in place
/// (R-M2). The copy the discard's Unmap recorded carries them into the resource: each
/// execute runs it once the recording is finished, so with every later NO_OVERWRITE write
/// applied, and this Map's Unmap records nothing. Allocates nothing once the context's
/// `maps` grew to the recording's open Maps.
pub(crate) fn map_no_overwrite<'a>(
    world: &VulkanWorld,
    dc: &'a mut VulkanDeferred,
    resource: Handle<Resource>,
    len: usize,
    locals: &mut LocalHandles<'_, VulkanDriver>,
) -> Result<&'a mut [u8]> {
    if locals.get(resource.any()).is_none() {
        return Err(AppError::InvalidState.into());
    }
    let Some(&discard) = dc.discards.iter().find(|d| d.resource == resource) else {
        let what = format!("Map(NO_OVERWRITE) of {resource:?} with no discard in the list");
        world.violate("R-M2", what);
        return Err(Error::InvalidArg);
    };
    if discard.bytes.len != len as u64 {
        let what = format!(
            "Map(NO_OVERWRITE) of {len} bytes after a discard of {}",
            discard.bytes.len
        );
        world.violate("R-M2", what);
        return Err(Error::InvalidArg);
    }
    let chunk = &dc.building.arena.chunks[discard.chunk];
    debug_assert_eq!(chunk.host.buffer, discard.bytes.buffer);
    let start = usize::try_from(discard.bytes.offset).map_err(|_| Error::OutOfMemory)?;
    // SAFETY: `map_discard` reserved `len` bytes at `start` of this chunk's mapping, which
    // the recording's arena owns until Finish or Abandon (both need `&mut dc`, which the
    // result borrows, and both empty `discards`); the chunk is the same one (the arena only
    // pushes chunks while the recording lasts). The application's borrow of the discard's
    // bytes ended at its Unmap, the engine maps a resource once at a time (R-C4), and no
    // GPU work reads them before the recording is finished and executed, so no other
    // reference to them exists.
    let bytes = unsafe { std::slice::from_raw_parts_mut(chunk.host.ptr.as_ptr().add(start), len) };
    dc.maps.push(Mapped {
        again: true,
        ..discard
    });
    Ok(bytes)
}

/// `execute_command_list_deferred`: ends the current segment and chains the inner list's.
pub(crate) fn chain(world: &VulkanWorld, dc: &mut VulkanDeferred, list: &[u8]) -> Result<()> {
    let pool = dc.pool.clone().expect("built lists have a pool");
    let _use = PoolUse::enter(&pool);
    let Some(inner) = list_of(list) else {
        world.violate("R-R8", "a list chained with no buffer built".to_string());
        return Ok(());
    };
    // The inner list reads the renamed resources from their buffers.
    dc.settle_renames(world)?;
    dc.end_segment(world)?;
    let b = &mut dc.building;
    b.segments.extend_from_slice(&inner.segments);
    b.patches.extend_from_slice(&inner.patches);
    b.allocations.extend_from_slice(&inner.allocations);
    b.packets
        .push(Packet::Chain(inner as *const BuiltList as usize));
    b.chained.push(inner as *const BuiltList as usize);
    b.chained.extend_from_slice(&inner.chained);
    b.baked.extend_from_slice(&inner.baked);
    b.unsure |= inner.unsure;
    // After an execute nothing is bound (R-C3).
    b.bound.clear();
    Ok(())
}

/// Finish (`create_command_list`, `recycle_create_command_list`): the recording becomes the
/// list's, its pointer in the list's private memory.
pub(crate) fn finish(
    world: &VulkanWorld,
    dc: &mut VulkanDeferred,
    private: &mut [u8],
) -> Result<()> {
    let pool = dc.pool.clone().expect("built lists have a pool");
    let _use = PoolUse::enter(&pool);
    VulkanDeferred::bury(world, &pool);
    // After the list, the renamed resources hold their last discard's bytes.
    dc.settle_renames(world)?;
    dc.end_segment(world)?;
    if !dc.maps.is_empty() {
        world.violate(
            "R-C4",
            "a list finished with a resource still mapped".to_string(),
        );
        dc.maps.clear();
    }
    dc.discards.clear();
    let mut b = std::mem::take(&mut dc.building);
    b.allocations.sort_unstable();
    b.allocations.dedup();
    b.baked.sort_unstable_by_key(|&(h, a)| (h.to_bits(), a));
    b.baked.dedup();
    let list = Box::new(BuiltList {
        pool: Arc::clone(&pool),
        own: b.own,
        segments: b.segments,
        arena: b.arena,
        patches: b.patches,
        packets: b.packets,
        allocations: b.allocations,
        baked: b.baked,
        unsure: b.unsure,
        chained: b.chained,
        last_execute: AtomicU64::new(0),
    });
    let raw = Box::into_raw(list) as usize as u64;
    private[..8].copy_from_slice(&raw.to_ne_bytes());
    Ok(())
}

/// Abandon: the recording's secondaries are reset and kept, its upload memory too.
pub(crate) fn abandon(world: &VulkanWorld, dc: &mut VulkanDeferred) {
    let pool = dc.pool.clone().expect("built lists have a pool");
    let _use = PoolUse::enter(&pool);
    dc.maps.clear();
    dc.discards.clear();
    dc.renames.clear();
    let mut b = std::mem::take(&mut dc.building);
    // Reset as it is, recording or not (VUID-vkResetCommandBuffer allows both).
    b.own.extend(b.current.take());
    dc.take_back(world, b.own, b.arena);
}

/// `recycle_command_list`, on the context's thread, after the list clock: the list's
/// secondaries are reset into the context's cache, its upload memory too; or, if a buffer
/// that executed it may still run (the list clock `Submitted`), parked until it completed.
pub(crate) fn recycle(world: &VulkanWorld, dc: &mut VulkanDeferred, private: &mut [u8]) {
    let Some(list) = take_list(private) else {
        return;
    };
    let Some(list) = park_if_pending(world, list) else {
        return;
    };
    let pool = dc.pool.clone().expect("built lists have a pool");
    let _use = PoolUse::enter(&pool);
    if !Arc::ptr_eq(&list.pool, &pool) {
        world.violate("R-R5", "a list recycled by another context".to_string());
        destroy_list(world, *list);
        return;
    }
    let BuiltList {
        own,
        arena,
        segments,
        patches,
        packets,
        allocations,
        ..
    } = *list;
    drop((segments, patches, packets, allocations));
    world.count(BuiltEvent::Recycled, own.len());
    dc.take_back(world, own, arena);
}

/// `destroy_command_list`, on any thread, after the list clock (parked if a buffer that
/// executed it may still run).
pub(crate) fn destroy(world: &VulkanWorld, private: &mut [u8]) {
    if let Some(list) = take_list(private).and_then(|list| park_if_pending(world, list)) {
        destroy_list(world, *list);
    }
}

/// The list back if the timeline passed the newest buffer that executed it; else `None`, the
/// list parked in the world until the timeline passes that buffer
/// ([`VulkanWorld::retire`] then destroys it). The list clock may be `Submitted`: the GPU
/// runs the secondaries and reads the upload memory in place, so they stay as they are.
fn park_if_pending(world: &VulkanWorld, list: Box<BuiltList>) -> Option<Box<BuiltList>> {
    let fence = list.last_execute.load(Ordering::Relaxed);
    if fence <= world.completed() {
        return Some(list);
    }
    lock(&world.parked).push((fence, list));
    None
}

/// Destroys a parked list whose buffer completed (from [`VulkanWorld::retire`], any
/// thread): its secondaries go to its context's graveyard, or are freed under the pool's
/// lock once the context is gone.
pub(crate) fn release_parked(world: &VulkanWorld, list: BuiltList) {
    destroy_list(world, list);
}

fn destroy_list(world: &VulkanWorld, list: BuiltList) {
    let BuiltList {
        pool, own, arena, ..
    } = list;
    {
        let mut state = lock(&pool.state);
        if state.alive {
            // The context may be recording from the pool on its thread right now.
            world.count(BuiltEvent::HandedBack, own.len());
            state.graveyard.extend(own);
        } else if !own.is_empty() {
            // SAFETY: the context is destroyed, so nobody records from the pool; every
            // other user of the pool takes this lock (external synchronisation); the timeline
            // passed the newest buffer that executed the list (`park_if_pending`), so its
            // secondaries are not pending
            // (VUID-vkFreeCommandBuffers-pCommandBuffers-00047).
            unsafe { world.device.free_command_buffers(pool.pool, &own) };
            world.count(BuiltEvent::FreedOrphaned, own.len());
        }
    }
    world.give_back_chunks(arena.chunks);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A world whose driver builds its lists, and the driver's state of a deferred context of
    /// it, driven hook by hook (the id is that of a context the engine made); `None` where
    /// no Vulkan device exists and none is required (`CMDLIST_VULKAN_REQUIRED=1`).
    fn context() -> Option<(Arc<VulkanWorld>, VulkanDeferred)> {
        let config = crate::VulkanConfig::for_mode(cmdlist::ListMode::DriverBuilt);
        let (device, _ic, world) = match crate::device(config, cmdlist::DeviceConfig::default()) {
            Ok(parts) => parts,
            Err(e) if std::env::var("CMDLIST_VULKAN_REQUIRED").is_ok_and(|v| v == "1") => {
                panic!("CMDLIST_VULKAN_REQUIRED=1: {e}")
            }
            Err(e) => {
                eprintln!("skipped: {e}");
                return None;
            }
        };
        let id = device.create_deferred_context().unwrap().id();
        let dc = VulkanDeferred::new(&world, id, true).unwrap();
        Some((world, dc))
    }

    /// Finish of a recording of one secondary: the list's private memory.
    fn list(world: &VulkanWorld, dc: &mut VulkanDeferred) -> [u8; 16] {
        let mut private = [0; 16];
        dc.secondary(world).unwrap();
        finish(world, dc, &mut private).unwrap();
        private
    }

    fn assert_clean(world: &VulkanWorld) {
        assert_eq!(world.violations(), vec![]);
        assert_eq!(world.validation_messages(), Vec::<String>::new());
    }

    /// A list destroyed while its context lives hands its secondaries to the pool's
    /// graveyard; the context frees them at its next renewal, or at its next Finish.
    #[test]
    fn the_graveyard_is_freed_at_the_next_renewal_and_finish() {
        let Some((world, mut dc)) = context() else {
            return;
        };
        let pool = Arc::clone(dc.pool.as_ref().unwrap());
        let graves = || lock(&pool.state).graveyard.len();
        let mut private = list(&world, &mut dc);
        destroy(&world, &mut private);
        assert_eq!(graves(), 1, "handed back");
        dc.renew(&world);
        assert_eq!(graves(), 0, "freed at the renewal");
        let mut private = list(&world, &mut dc);
        destroy(&world, &mut private);
        assert_eq!(graves(), 1, "handed back");
        let mut next = list(&world, &mut dc);
        assert_eq!(graves(), 0, "freed at the Finish");
        destroy(&world, &mut next);
        dc.destroy(&world);
        assert_clean(&world);
    }

    /// A list that chains a list whose recording does not know what it baked (a hook
    /// panicked while it looked resources up, which leaves the recording unsure) is unsure
    /// too, and so is an unsure recording that chains a sure list: every execute of them
    /// replays their packets.
    #[test]
    fn chaining_keeps_a_list_unsure() {
        let Some((world, mut dc)) = context() else {
            return;
        };
        let mut sure = list(&world, &mut dc);
        dc.secondary(&world).unwrap();
        // What `record` leaves after a hook that panicked.
        dc.building.unsure = true;
        let mut unsure = [0; 16];
        finish(&world, &mut dc, &mut unsure).unwrap();
        assert!(!list_of(&sure).unwrap().unsure);
        assert!(list_of(&unsure).unwrap().unsure);

        chain(&world, &mut dc, &unsure).unwrap();
        let mut outer = list(&world, &mut dc);
        assert!(list_of(&outer).unwrap().unsure, "chains an unsure list");

        dc.building.unsure = true;
        chain(&world, &mut dc, &sure).unwrap();
        let mut unsure_outer = list(&world, &mut dc);
        assert!(list_of(&unsure_outer).unwrap().unsure, "unsure itself");

        for private in [&mut unsure_outer, &mut outer, &mut unsure, &mut sure] {
            destroy(&world, private);
        }
        dc.destroy(&world);
        assert_clean(&world);
    }
}
