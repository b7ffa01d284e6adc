//! # cmdlist-vulkan
//!
//! A [`cmdlist::Driver`] and [`cmdlist::Kernel`] over Vulkan 1.2 (through `ash`, the loader
//! opened at run time), in all three list modes, with the soft driver's command set
//! ([`cmdlist::soft::SoftCommand`]): resources are byte ranges of `VkBuffer`s, views byte
//! ranges of their resource's.
//!
//! # The mapping
//! | protocol | here |
//! |---|---|
//! | an allocation (R-F2) | a `VkBuffer` with its own host-visible, host-coherent memory, persistently mapped, under a non-zero id ([`VulkanKernel`]) |
//! | CPU access, `pfnLockCb` / `pfnUnlockCb` (R-M4: staging Maps, the immediate context's Map(NO_OVERWRITE); R-M5: the allocation its Map(DISCARD) renames to) | the allocation's own persistently mapped, host-coherent memory, handed out in place ([`cmdlist::CpuMapping::from_raw`]): no copy, nothing written back, no flush or invalidate needed ([`VulkanKernel`]), so the kernel keeps its locks across Maps (`Kernel::persistent_locks`: locked at an allocation's first Map, unlocked before its deallocation); a lock that reads, or one of memory a rename takes (`NoExistingReference`), while a buffer the timeline has not passed uses it is a violation |
//! | Map(DISCARD) on the immediate context (R-M5) | a rename: the driver declares `MapCaps::DISCARD_RENAMES` (a resource's bytes are its allocation's `VkBuffer` from byte 0), the engine hands out another allocation and makes it the resource's at the Unmap; the immediate context's commands resolve the resource's buffer when they are recorded, so nothing is copied; a driver-built list that names the resource replays (below) |
//! | Map(DISCARD) on a deferred context, driver-built (R-M1) | bytes of the list's upload memory; a draw reads them there, in place, so the discard costs no copy and no barrier of its own; the copy into the resource's buffer is recorded only before another command touches that buffer (or a draw writes it), and at the end of each segment (Finish, a nested execute), so after the list the resource holds its last discard's bytes |
//! | the submission clock, fences (R-D1, R-D4) | one timeline semaphore: each submit signals [`cmdlist::Submission::fence`]; completed = its counter value |
//! | the immediate context's command buffer | a primary, ended in [`cmdlist::Driver::flush`] and submitted by the kernel; its upload memory (UpdateSubresource, Map(DISCARD), fills' unaligned ends) comes from 64 KiB chunks that come back when the timeline passes the buffer |
//! | a deferred context ([`cmdlist::ListMode::DriverBuilt`]) | its own `VkCommandPool`; each call recorded into a secondary (`SIMULTANEOUS_USE`), uploads in the list's own memory ([`VulkanDeferred`]) |
//! | CommandListExecute | one `vkCmdExecuteCommands` of the list's segments ([`VulkanWorld::execute_commands`] counts them) |
//! | a draw ([`cmdlist::soft::SoftCommand::Draw`]) | a compute dispatch, its buffers as push descriptors |
//! | Blt, present (R-X6, R-X7, R-X1) | a compute dispatch; a copy into a host-visible screen the present callback names |
//! | a nested execute | the inner list's segments chained after the outer's current one |
//! | list memory reuse (R-R4, R-R5) | secondaries reset or freed only at `recycle_command_list` / `destroy_command_list`, after the list clock, once the timeline passed the newest buffer that executed the list (else parked until it did) |
//!
//! [`cmdlist::ListMode::Replayed`] and [`cmdlist::ListMode::Emulated`] record the operations
//! the engine replays into the immediate context's primary, as any immediate-context work.
//!
//! # Byte granularity
//! `vkCmdFillBuffer` and `vkCmdUpdateBuffer` need 4-byte alignment. Writes (Update, Map's
//! contents) are copied into upload memory and `vkCmdCopyBuffer`ed; fills use
//! `vkCmdFillBuffer` for their 4-aligned middle and uploaded bytes for the ends; copies are
//! `vkCmdCopyBuffer` (overlapping ranges of one buffer through upload memory).
//!
//! # Draws: compute dispatches
//! [`cmdlist::soft::SoftCommand::Draw`] is a compute dispatch of `shaders/draw.comp` (its
//! SPIR-V shipped beside it, `include_bytes!`d; a test checks that the source still
//! compiles to it) over the bound render target's words, 64 per workgroup, reading the
//! constant and vertex buffers as storage buffers: the integer word function of
//! [`cmdlist::soft::draw_word`], so the bytes equal the soft driver's. The three buffers are
//! bound from byte 0 to the end of the bytes the draw uses, as **push descriptors**
//! (`VK_KHR_push_descriptor`, required for draws: without it they are `Unsupported`), the
//! word offsets in push constants. A draw or a Blt whose bytes end past the device's
//! `maxStorageBufferRange` in their buffer (a resource or view larger than that, 128 MiB on
//! lavapipe) is `Unsupported` ([`VulkanWorld::max_storage_buffer_range`]). Push
//! descriptors need no descriptor pool: a pool per deferred context would need the same
//! external synchronisation as its command pool and sets that live as long as the lists
//! that use them; with push descriptors the descriptors are recorded into the command
//! buffer, and a secondary re-executed later, or after its context is gone, still has them.
//! Each draw binds its pipeline and descriptors itself: nothing is bound at the start of a
//! secondary, nor in a primary after `vkCmdExecuteCommands`. A target that is not
//! 4-aligned, constants under 16 bytes, or a target in the memory of an input are refused
//! as the soft driver refuses them (driver-built lists at record time, where the soft
//! driver refuses when the list runs).
//!
//! # The hazard rule
//! Every command buffer is a sequence of transfer commands and compute dispatches. Each
//! command buffer, primary or secondary, tracks the byte ranges `(buffer, offset, len)` its
//! commands wrote and read since its last barrier (a short list, reused: no allocation in
//! steady state; a dispatch counts the bytes its storage-buffer descriptors cover, from byte
//! 0 of each buffer, as the validation layer does), and:
//! 1. before a command that reads or writes bytes a tracked command wrote (read-after-write,
//!    write-after-write), or writes bytes one read (write-after-read), it records a global
//!    memory barrier TRANSFER|COMPUTE_SHADER → TRANSFER|COMPUTE_SHADER (transfer and shader
//!    writes made available and visible to transfer and shader reads and writes; the
//!    execution dependency orders write-after-read) and forgets the tracked ranges: the
//!    barrier orders everything before it before everything after it. A command that meets
//!    nothing tracked goes without one (also when more than 32 ranges are tracked: then it
//!    barriers, conservatively);
//! 2. each secondary starts with the same barrier, whose first scope is every command
//!    earlier in submission order: the primary's commands before the
//!    `vkCmdExecuteCommands` that runs it, and the segments before it in that call. It is
//!    what orders a nested list's segments (one call runs the outer list's segment, the
//!    inner list's, the outer's next, with no command of the primary between them) and a
//!    list chained twice into another; the primary records no barrier before
//!    `vkCmdExecuteCommands` (a list's first segment brings its own);
//! 3. after `vkCmdExecuteCommands` the primary does not know what the list touched: its next
//!    command barriers first, whatever its ranges;
//! 4. each primary ends with a barrier TRANSFER|COMPUTE_SHADER → TRANSFER|COMPUTE_SHADER|HOST
//!    (transfer and shader writes made visible to transfer and shader reads and writes, and
//!    to host reads): the host reads what the buffer wrote once its fence completed, and the
//!    next buffer on the queue, whose first command meets nothing tracked, runs after it
//!    (a barrier's second scope is every command later in submission order, the next
//!    submissions' included).
//!
//! So a list reads what the immediate context wrote just before executing it, two lists
//! writing the same bytes back to back land in order, a list executed twice in one primary
//! runs twice in order, and independent commands (other buffers, or disjoint ranges of one)
//! run without a barrier between them. [`VulkanWorld::hazard_barriers`] counts the barriers;
//! the validation layer's synchronisation checks, which the tests treat as failures, watch
//! that none is missing.
//!
//! # Costs
//! - Recording a call on a deferred context: its Vulkan commands, one uncontended per-pool
//!   lock (the thread check), allocation lookups answered from the context's cache of the
//!   last eight (the world's read-locked table on a miss, or after any deallocation).
//! - Finish: ends the current secondary; sorts the list's allocation set.
//! - CommandListExecute of a driver-built list: one `vkCmdExecuteCommands` whatever the
//!   length, plus one `vkCmdFillBuffer` per FillIcByte it holds (the value is the IC data
//!   of the moment) and O(distinct allocations) to add its allocation set to the primary's
//!   for the allocation-list check; after a rotation, a replay of its packets (O(length)).
//! - A nested execute: O(segments + patches + allocations) of the inner list.
//! - A draw: a pipeline bind, one push-descriptor set, one push-constant update and one
//!   dispatch per 4 Mi words of target, each preceded by a barrier where the hazard rule
//!   asks for one.
//! - A Map(DISCARD) on a deferred context (driver-built): upload bytes, no command; its copy
//!   into the resource once per segment, or before a command that touches the resource's
//!   buffer otherwise than a draw reading it.
//! - The hazard rule: a scan of at most 32 tracked ranges per command. Its barriers are
//!   global memory barriers: a command that conflicts waits for all the work before it, not
//!   only for the command it conflicts with.
//!
//! # Threads
//! The immediate context's pool and queue are touched only on its thread (checked: a hook
//! or a submit elsewhere is a [`Violation`]): its primaries are allocated, reset, recorded
//! and ended there. [`VulkanWorld::wait_gpu`] and the kernel's deallocate, which may run on
//! other threads, take back what completed buffers used (upload memory, deallocated
//! memory, parked lists) and hand the completed primaries to the immediate context's
//! thread, which resets one before recording into it. A deferred context's pool is touched only by
//! the hooks of that context (one thread at a time, the engine's rule, which Vulkan's
//! external synchronisation of pools needs) and checked for overlap; a list destroyed on
//! another thread hands its secondaries back through the pool's lock ([`VulkanDeferred`]).
//!
//! # Rotated identities (R-X5) and renamed resources (R-M5)
//! A driver-built list's secondaries name the buffers its resources had when it was recorded.
//! The list keeps each resource it looked up with the allocation it read then (once, so a
//! rename racing the recording is seen); an execute that finds one of them moved since (a
//! rotation, or the immediate context's Map(DISCARD)) replays the packets the list keeps
//! besides its secondaries into the primary, every handle resolved then (O(length) for
//! those executes only; [`BuiltStats::replayed_after_rotation`]). A list that names no moved
//! resource runs its secondaries, whatever else was renamed.
//!
//! # DXGI: Blt and present
//! - Blt (R-X6, R-X7): a compute dispatch of `shaders/blt.comp`, one invocation per
//!   destination pixel, with the CPU reference's tap positions and working domain
//!   ([`cmdlist::dxgi::reference`]), for the four 32-bit formats with 8-bit channels, any
//!   pair, any stretch, single-sampled, unrotated (the main job's sRGB canvas stretched 2x
//!   into its back buffer among them). Within one code per channel of the reference where
//!   texels are blended, exact where not. The float, 16-bit and 10-bit formats, resolves and
//!   rotations are `Unsupported` (`blt_caps` is empty: the engine refuses a rotation first).
//! - Present (R-X1), headless: the driver's part of the present copies the presented
//!   surface (its whole resource) into host-visible memory, the screen, in the buffer the
//!   present then submits (and makes the copy into a destination, when there is one, with
//!   the Blt); the kernel's present callback checks that no unsubmitted buffer references
//!   the surfaces and names the submitted buffer, which [`VulkanWorld::screen`] waits for
//!   before it reads the screen.
//!
//! # Vulkan failures
//! A Vulkan call that fails reaches the engine as a [`cmdlist::Error`] (`OutOfMemory` for
//! the out-of-memory results, `DeviceRemoved` otherwise): a refused submit keeps its buffers
//! for the next one, which carries the same fence (a list parked on it waits for that
//! buffer); a world whose creation fails destroys what it made and returns [`Unavailable`].
//! [`VulkanConfig::faults`] ([`Faults`]) makes chosen calls fail, for the tests that hold
//! this.
//!
//! # Not in this version
//! Queries do nothing on the GPU. The Blt's other formats, resolves and rotations (above).
#![forbid(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod blt;
mod buffer_cache;
mod built;
mod driver;
mod encode;
mod hazard;
mod kernel;
mod rename;
mod world;

pub use built::VulkanDeferred;
pub use driver::{VulkanDriver, VulkanImmediate, VulkanObject};
pub use kernel::VulkanKernel;
pub use world::{
    BuiltStats, Faults, Unavailable, ValidationLog, Violation, VulkanConfig, VulkanWorld,
};

use std::sync::Arc;

/// A device over the Vulkan driver and kernel.
pub type VulkanDevice = cmdlist::Device<VulkanDriver, VulkanKernel>;
/// Its immediate context.
pub type VulkanImmediateContext = cmdlist::ImmediateContext<VulkanDriver, VulkanKernel>;

/// A Vulkan driver and kernel sharing one world.
pub fn new(
    config: VulkanConfig,
) -> std::result::Result<(VulkanDriver, VulkanKernel, Arc<VulkanWorld>), Unavailable> {
    let world = VulkanWorld::new(config)?;
    Ok((
        VulkanDriver::new(Arc::clone(&world)),
        VulkanKernel::new(Arc::clone(&world)),
        world,
    ))
}

/// A device over a fresh Vulkan world, its retire clock the one `device_config` says.
///
/// Either list clock ([`cmdlist::DeviceConfig::list_clock`]) works. The GPU runs a
/// driver-built list's secondaries and reads its upload memory in place, so under
/// [`cmdlist::Clock::Submitted`] the engine may recycle or destroy a list while a buffer
/// that executed it still runs: the driver then parks the list's secondaries and upload
/// memory until the timeline passes that buffer, and reuses or frees them after.
pub fn device(
    config: VulkanConfig,
    device_config: cmdlist::DeviceConfig,
) -> std::result::Result<
    (VulkanDevice, VulkanImmediateContext, Arc<VulkanWorld>),
    Box<dyn std::error::Error + Send + Sync>,
> {
    let config = VulkanConfig {
        retire_clock: device_config.retire_clock,
        ..config
    };
    let (driver, kernel, world) = new(config)?;
    let (device, ic) = cmdlist::Device::new(driver, kernel, device_config)?;
    Ok((device, ic, world))
}
