//! Recording transfer work into a command buffer, primary or secondary: byte-granular
//! copies, fills and writes, each preceded by the hazard rule's barrier where it reads or
//! writes what an earlier command of the buffer touched since the last one (the crate docs,
//! [`crate::hazard`]).

use ash::vk;
use cmdlist::{AppError, Error, Result};

use crate::hazard::{Range, Tracker};
use crate::world::{Chunk, VulkanWorld, CHUNK_BYTES};

/// A byte range of a buffer: a whole resource, or a view's range of its resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) buffer: vk::Buffer,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    /// The kernel allocation whose buffer it is (0: upload memory), for the allocation-list
    /// check (R-D1).
    pub(crate) allocation: u64,
}

impl Span {
    /// `len` bytes from `offset` of a buffer of `size` bytes, or out of range.
    pub(crate) fn of(buffer: vk::Buffer, size: u64, offset: u64, len: u64) -> Result<Span> {
        match offset.checked_add(len) {
            Some(end) if end <= size => Ok(Span {
                buffer,
                offset,
                len,
                allocation: 0,
            }),
            _ => Err(AppError::OutOfRange.into()),
        }
    }

    /// Upload memory: `len` bytes at `offset` of `buffer`.
    pub(crate) fn upload(buffer: vk::Buffer, offset: u64, len: u64) -> Span {
        Span {
            buffer,
            offset,
            len,
            allocation: 0,
        }
    }

    /// `len` bytes from `offset` of this span's bytes (a whole resource's), or out of range.
    pub(crate) fn sub(&self, offset: u64, len: u64) -> Result<Span> {
        let inner = Span::of(self.buffer, self.len, offset, len)?;
        Ok(Span {
            offset: self.offset + inner.offset,
            allocation: self.allocation,
            ..inner
        })
    }
}

/// Upload memory a command buffer reads: chunks bump-allocated, kept with the buffer (the
/// immediate context's until its submission completes; a list's while the list lives).
#[derive(Debug, Default)]
pub(crate) struct Arena {
    pub(crate) chunks: Vec<Chunk>,
}

impl Arena {
    /// `len` bytes (4-aligned start) of upload memory: their buffer, offset and address.
    pub(crate) fn reserve(
        &mut self,
        world: &VulkanWorld,
        free: &mut Vec<Chunk>,
        len: u64,
    ) -> Result<(vk::Buffer, u64, *mut u8)> {
        let fits = |c: &Chunk| c.used.next_multiple_of(4) + len <= c.host.size;
        if !self.chunks.last().is_some_and(fits) {
            let chunk = match free.pop() {
                Some(c) if len <= CHUNK_BYTES => c,
                other => {
                    free.extend(other);
                    world.new_chunk(len)?
                }
            };
            self.chunks.push(chunk);
        }
        let chunk = self.chunks.last_mut().expect("pushed above");
        let at = chunk.used.next_multiple_of(4);
        chunk.used = at + len;
        // SAFETY: `at + len <= size` (checked by `fits` or a new chunk of at least `len`
        // bytes), so the address is inside the mapping.
        let ptr = unsafe { chunk.host.ptr.as_ptr().add(at as usize) };
        Ok((chunk.host.buffer, at, ptr))
    }

    /// Everything back into `free` (the buffers that read it are done).
    pub(crate) fn clear_into(&mut self, free: &mut Vec<Chunk>) {
        for mut chunk in self.chunks.drain(..) {
            chunk.used = 0;
            free.push(chunk);
        }
    }
}

/// A command buffer being recorded, with the upload memory it may take.
pub(crate) struct Encoder<'a> {
    pub(crate) world: &'a VulkanWorld,
    pub(crate) cmd: vk::CommandBuffer,
    pub(crate) arena: &'a mut Arena,
    pub(crate) free: &'a mut Vec<Chunk>,
    /// The allocations the command buffer references (sorted and deduplicated later).
    pub(crate) refs: &'a mut Vec<u64>,
    /// What the command buffer read and wrote since its last barrier.
    pub(crate) hazards: &'a mut Tracker,
}

/// The stages the driver's commands run in: transfer commands and compute dispatches.
pub(crate) fn work_stages() -> vk::PipelineStageFlags {
    vk::PipelineStageFlags::TRANSFER | vk::PipelineStageFlags::COMPUTE_SHADER
}

/// The writes those commands make.
pub(crate) fn work_writes() -> vk::AccessFlags {
    vk::AccessFlags::TRANSFER_WRITE | vk::AccessFlags::SHADER_WRITE
}

/// The global barrier of the hazard rule: every transfer and shader write before it is
/// available to, and visible to, every transfer and shader read and write after it (and the
/// execution dependency, TRANSFER|COMPUTE_SHADER to TRANSFER|COMPUTE_SHADER, orders
/// write-after-read). Recorded where [`Tracker::access`] asks for it, and at the start of
/// each secondary.
pub(crate) fn hazard_barrier(world: &VulkanWorld, cmd: vk::CommandBuffer) {
    if !world.config.hazard_barriers {
        return;
    }
    let barrier = vk::MemoryBarrier::default()
        .src_access_mask(work_writes())
        .dst_access_mask(
            vk::AccessFlags::TRANSFER_READ
                | vk::AccessFlags::TRANSFER_WRITE
                | vk::AccessFlags::SHADER_READ
                | vk::AccessFlags::SHADER_WRITE,
        );
    // SAFETY: `cmd` is in the recording state, outside any render pass; the queue family
    // supports compute (chosen for it) and so transfer, so both stages are supported
    // (VUID-vkCmdPipelineBarrier-srcStageMask-06461, -dstStageMask-06462), and each access
    // is one those stages perform (-srcAccessMask-02815, -dstAccessMask-02816).
    unsafe {
        world.device.cmd_pipeline_barrier(
            cmd,
            work_stages(),
            work_stages(),
            vk::DependencyFlags::empty(),
            &[barrier],
            &[],
            &[],
        );
    }
}

/// The barrier that ends a primary: transfer and shader writes made visible to host reads,
/// so a test reads the bytes once the buffer's fence completed, and to the transfer and
/// shader reads and writes of the buffers submitted after it (whose first commands go
/// without a barrier: they meet nothing their own buffer tracked).
pub(crate) fn host_barrier(world: &VulkanWorld, cmd: vk::CommandBuffer) {
    let barrier = vk::MemoryBarrier::default()
        .src_access_mask(work_writes())
        .dst_access_mask(
            vk::AccessFlags::TRANSFER_READ
                | vk::AccessFlags::TRANSFER_WRITE
                | vk::AccessFlags::SHADER_READ
                | vk::AccessFlags::SHADER_WRITE
                | vk::AccessFlags::HOST_READ,
        );
    // SAFETY: as in `hazard_barrier`; HOST is a valid destination stage outside a render
    // pass (VUID-vkCmdPipelineBarrier-dstStageMask-06462), and HOST_READ an access it
    // performs (-dstAccessMask-02816).
    unsafe {
        world.device.cmd_pipeline_barrier(
            cmd,
            work_stages(),
            work_stages() | vk::PipelineStageFlags::HOST,
            vk::DependencyFlags::empty(),
            &[barrier],
            &[],
            &[],
        );
    }
}

/// Target words one draw dispatch writes at most: 64-invocation groups, and at most 65535
/// groups along x (the least `maxComputeWorkGroupCount[0]` a device has).
const DRAW_WORDS_PER_DISPATCH: u64 = 64 * 65535;
/// The most buffers a shader of this crate binds (the draw's three).
const MAX_BOUND: usize = 3;

/// The checks of a draw (`SoftCommand::Draw`, as the soft driver makes them, in its
/// order): constants of at least 16 bytes and a 4-aligned target (`OutOfRange`), a target in
/// memory of neither input (`InvalidState`).
pub(crate) fn check_draw(constants: Span, vertices: Span, target: Span) -> Result<()> {
    if constants.len < 16 || target.offset % 4 != 0 || target.len % 4 != 0 {
        return Err(AppError::OutOfRange.into());
    }
    if target.allocation == constants.allocation || target.allocation == vertices.allocation {
        return Err(AppError::InvalidState.into());
    }
    Ok(())
}

/// The bytes a storage-buffer descriptor of [`Encoder::bind_compute`] covers (from byte 0
/// to the span's end): what the validation layer's synchronisation checks take a dispatch
/// to access, whichever words its invocations reach.
pub(crate) fn bound(span: Span) -> Range {
    Range::new(span.buffer, 0, (span.offset + span.len).max(4))
}

impl Encoder<'_> {
    /// Before a command that reads `reads` and writes `writes`: the hazard rule's barrier if
    /// it conflicts with what the command buffer did since its last one.
    pub(crate) fn order(&mut self, reads: &[Range], writes: &[Range]) {
        if self.hazards.access(reads, writes) {
            hazard_barrier(self.world, self.cmd);
        }
    }

    /// Binds a compute pipeline and pushes its storage-buffer descriptors: each `(binding,
    /// span)` binds its buffer from byte 0 to the span's end (the shaders take word offsets
    /// in push constants). [`Error::Unsupported`], nothing recorded, where a span ends past
    /// the device's `maxStorageBufferRange`.
    pub(crate) fn bind_compute(
        &mut self,
        pipeline: vk::Pipeline,
        buffers: &[(u32, Span)],
    ) -> Result<()> {
        let compute = self.world.compute.as_ref().ok_or(Error::Unsupported)?;
        let mut infos = [[vk::DescriptorBufferInfo::default()]; MAX_BOUND];
        for ((_, s), info) in buffers.iter().zip(&mut infos) {
            let end = s.offset + s.len;
            if end > compute.max_storage_range {
                return Err(Error::Unsupported);
            }
            // At least 4 bytes (a range is never 0), which every buffer has (`host_buffer`).
            info[0] = vk::DescriptorBufferInfo {
                buffer: s.buffer,
                offset: 0,
                range: end.max(4),
            };
        }
        let mut writes = [vk::WriteDescriptorSet::default(); MAX_BOUND];
        for ((write, (binding, _)), info) in writes.iter_mut().zip(buffers).zip(&infos) {
            *write = vk::WriteDescriptorSet::default()
                .dst_binding(*binding)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .buffer_info(info);
        }
        let writes = &writes[..buffers.len().min(MAX_BOUND)];
        // SAFETY: recording state, outside a render pass; a compute pipeline of this device
        // (VUID-vkCmdBindPipeline-pipelineBindPoint-00777: the queue family supports
        // compute); the set layout was made with PUSH_DESCRIPTOR_KHR and the extension is
        // enabled (VUID-vkCmdPushDescriptorSetKHR-set-00365); each write names a binding of
        // that layout with its type, a buffer made with STORAGE_BUFFER usage
        // (VUID-VkWriteDescriptorSet-descriptorType-00331), offset 0 (a multiple of
        // minStorageBufferOffsetAlignment, -00328), a range above 0 (VUID-VkDescriptorBufferInfo
        // -range-00341) within the buffer (the span lies in it, every buffer has 4 bytes,
        // -range-00342) and within maxStorageBufferRange (checked above,
        // VUID-VkWriteDescriptorSet-descriptorType-00333).
        unsafe {
            let device = &self.world.device;
            device.cmd_bind_pipeline(self.cmd, vk::PipelineBindPoint::COMPUTE, pipeline);
            compute.push.cmd_push_descriptor_set(
                self.cmd,
                vk::PipelineBindPoint::COMPUTE,
                compute.layout,
                0,
                writes,
            );
        }
        Ok(())
    }

    /// A draw (`SoftCommand::Draw`): the draw pipeline dispatched over the target's words,
    /// the three buffers pushed as storage-buffer descriptors (whole buffers; the word
    /// offsets go in push constants), each dispatch ordered by the hazard rule (the bytes the
    /// descriptors cover: reads of the constants and vertices, a write of the target).
    /// Binds its pipeline and descriptors itself: nothing is bound at the start of a
    /// secondary, nor in a primary after `vkCmdExecuteCommands`.
    pub(crate) fn draw(&mut self, constants: Span, vertices: Span, target: Span) -> Result<()> {
        check_draw(constants, vertices, target)?;
        let compute = self.world.compute.as_ref().ok_or(Error::Unsupported)?;
        let words = target.len / 4;
        if words == 0 {
            return Ok(());
        }
        let word = |at: u64| u32::try_from(at / 4).map_err(|_| Error::from(AppError::OutOfRange));
        let (c_at, v_at, o_at) = (
            word(constants.offset)?,
            word(vertices.offset)?,
            word(target.offset)?,
        );
        let v_count = word(vertices.len)?;
        u32::try_from(words).map_err(|_| AppError::OutOfRange)?;
        self.bind_compute(compute.draw, &[(0, constants), (1, vertices), (2, target)])?;
        self.note(constants);
        self.note(vertices);
        self.note(target);
        let (reads, writes) = ([bound(constants), bound(vertices)], [bound(target)]);
        let mut first = 0u64;
        while first < words {
            self.order(&reads, &writes);
            let count = (words - first).min(DRAW_WORDS_PER_DISPATCH);
            let push = [c_at, v_at, v_count, o_at, first as u32, count as u32];
            let mut bytes = [0u8; 24];
            for (b, w) in bytes.chunks_exact_mut(4).zip(push) {
                b.copy_from_slice(&w.to_ne_bytes());
            }
            // SAFETY: the pipeline and the descriptors bound above; the push range (offset
            // 0, 24 bytes) lies inside the layout's COMPUTE range of PUSH_BYTES
            // (VUID-vkCmdPushConstants-offset-01795, -size-00369, a multiple of 4); the group
            // count is at most 65535, the least maxComputeWorkGroupCount[0]
            // (VUID-vkCmdDispatch-groupCountX-00386); every word the shader reaches lies in
            // its span, inside its buffer.
            unsafe {
                let device = &self.world.device;
                device.cmd_push_constants(
                    self.cmd,
                    compute.layout,
                    vk::ShaderStageFlags::COMPUTE,
                    0,
                    &bytes,
                );
                device.cmd_dispatch(self.cmd, count.div_ceil(64) as u32, 1, 1);
            }
            first += count;
        }
        Ok(())
    }

    /// `vkCmdCopyBuffer` of one region, ordered by the hazard rule. Overlapping ranges of one buffer
    /// (which vkCmdCopyBuffer forbids, VUID-vkCmdCopyBuffer-pRegions-00117) go through
    /// upload memory, as the soft driver copies through scratch.
    pub(crate) fn copy(&mut self, dst: Span, src: Span) -> Result<()> {
        let len = dst.len.min(src.len);
        if len == 0 {
            return Ok(());
        }
        let overlap = dst.buffer == src.buffer
            && dst.offset < src.offset + len
            && src.offset < dst.offset + len;
        if overlap {
            let (buffer, offset, _) = self.arena.reserve(self.world, self.free, len)?;
            let temp = Span::upload(buffer, offset, len);
            self.raw_copy(temp, src, len);
            self.raw_copy(dst, temp, len);
        } else {
            self.raw_copy(dst, src, len);
        }
        Ok(())
    }

    fn raw_copy(&mut self, dst: Span, src: Span, len: u64) {
        self.note(dst);
        self.note(src);
        self.order(
            &[Range::new(src.buffer, src.offset, len)],
            &[Range::new(dst.buffer, dst.offset, len)],
        );
        let region = vk::BufferCopy {
            src_offset: src.offset,
            dst_offset: dst.offset,
            size: len,
        };
        // SAFETY: recording state, outside a render pass; both buffers have TRANSFER_SRC and
        // TRANSFER_DST usage; `len > 0` (VUID-VkBufferCopy-size-01988) and both ranges lie in
        // their buffers (`Span::of`, VUID-vkCmdCopyBuffer-size-00115, -00116); the ranges do
        // not overlap (the caller, -pRegions-00117).
        unsafe {
            self.world
                .device
                .cmd_copy_buffer(self.cmd, src.buffer, dst.buffer, &[region]);
        }
    }

    pub(crate) fn note(&mut self, span: Span) {
        if span.allocation != 0 && self.refs.last() != Some(&span.allocation) {
            self.refs.push(span.allocation);
        }
    }

    /// Writes `bytes` at `dst`: copied into upload memory now, copied by the GPU when the
    /// buffer runs (byte-granular, unlike vkCmdUpdateBuffer's 4-byte alignment).
    pub(crate) fn write(&mut self, dst: Span, bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let len = bytes.len() as u64;
        let (buffer, offset, ptr) = self.arena.reserve(self.world, self.free, len)?;
        // SAFETY: `reserve` handed out `len` bytes at `ptr`, this encoder's alone.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len()) };
        self.raw_copy(dst, Span::upload(buffer, offset, len), len);
        Ok(())
    }

    /// Fills `dst` with `value`: `vkCmdFillBuffer` for its 4-aligned middle, upload copies
    /// for the up to three bytes at either end. The ends' upload bytes are reserved first:
    /// a fill that cannot have them records nothing (a refused call must leave no command
    /// behind: the immediate context's primary runs whatever it holds).
    pub(crate) fn fill(&mut self, dst: Span, value: u8) -> Result<()> {
        let end = dst.offset + dst.len;
        let start4 = dst.offset.next_multiple_of(4).min(end);
        let end4 = (end / 4 * 4).max(start4);
        let (head, tail) = (start4 - dst.offset, end - end4);
        let ends = match head + tail {
            0 => None,
            len => {
                let (buffer, at, ptr) = self.arena.reserve(self.world, self.free, len)?;
                // SAFETY: `reserve` handed out `len` (at most 6) bytes at `ptr`, this
                // encoder's alone.
                unsafe { std::ptr::write_bytes(ptr, value, len as usize) };
                Some((buffer, at))
            }
        };
        if let Some((buffer, at)) = ends.filter(|_| head > 0) {
            let to = Span { len: head, ..dst };
            self.raw_copy(to, Span::upload(buffer, at, head), head);
        }
        if end4 > start4 {
            self.note(dst);
            self.order(&[], &[Range::new(dst.buffer, start4, end4 - start4)]);
            // SAFETY: recording state, outside a render pass; the buffer has TRANSFER_DST
            // usage; offset and size are multiples of 4 (VUID-vkCmdFillBuffer-dstOffset-00025,
            // -size-00028) and the range lies in the buffer (-dstOffset-00024, -size-00027).
            unsafe {
                self.world.device.cmd_fill_buffer(
                    self.cmd,
                    dst.buffer,
                    start4,
                    end4 - start4,
                    u32::from_ne_bytes([value; 4]),
                );
            }
        }
        if let Some((buffer, at)) = ends.filter(|_| tail > 0) {
            let to = Span {
                offset: end4,
                len: tail,
                ..dst
            };
            self.raw_copy(to, Span::upload(buffer, at + head, tail), tail);
        }
        Ok(())
    }
}
