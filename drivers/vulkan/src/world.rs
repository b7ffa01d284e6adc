//! The Vulkan device the driver and the kernel share ([`VulkanWorld`]), as the soft driver
//! and kernel share their `SoftWorld`: the instance and device, the one queue, the timeline
//! semaphore that is the submission clock, the allocation table, the immediate context's
//! submission queue, spare upload memory, and what the checks found.

use std::collections::{HashMap, VecDeque};
use std::ffi::{c_void, CStr};
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::ThreadId;

use ash::vk;
use cmdlist::{AllocationHandle, Clock, ContextId, Error, Result};

/// The validation layer enabled when it is installed.
const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// The draw shader (`shaders/draw.comp`), compiled to SPIR-V by `glslangValidator -V`.
const DRAW_SPV: &[u8] = include_bytes!("../shaders/draw.spv");

/// The Blt shader (`shaders/blt.comp`), compiled the same way.
const BLT_SPV: &[u8] = include_bytes!("../shaders/blt.spv");

/// Bytes of the compute pipelines' push constants (the least `maxPushConstantsSize` a device
/// has).
pub(crate) const PUSH_BYTES: u32 = 128;

/// Bytes of one upload chunk; larger uploads get a chunk of their own size.
pub(crate) const CHUNK_BYTES: u64 = 64 << 10;

/// How to make a [`VulkanWorld`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VulkanConfig {
    /// Enable `VK_LAYER_KHRONOS_validation` (with a `VK_EXT_debug_utils` messenger feeding
    /// [`VulkanWorld::validation_messages`]) when it is installed. Default: true.
    pub validation: bool,
    /// The command lists mode: `false` reports caps without `COMMANDLISTS`
    /// ([`cmdlist::ListMode::Emulated`]). Default: true.
    pub command_lists: bool,
    /// Build command lists in secondary command buffers ([`cmdlist::ListMode::DriverBuilt`]);
    /// `false` lets the engine record and replay them ([`cmdlist::ListMode::Replayed`]).
    /// Only with `command_lists`. Default: true.
    pub driver_built: bool,
    /// The device's retire clock ([`cmdlist::DeviceConfig::retire_clock`]): under
    /// [`Clock::Completed`] a deallocation whose memory a submitted buffer may still read is
    /// a violation (R-D4); under [`Clock::Submitted`] it is allowed (R-D1) and the memory is
    /// freed once the timeline passes that buffer, as a kernel's memory manager does.
    pub retire_clock: Clock,
    /// Record the hazard rule's transfer barriers (the crate docs). Always on but in the
    /// test that shows the validation layer's synchronisation checks find the hazards the
    /// rule prevents. Default: true.
    pub hazard_barriers: bool,
    /// A test hook: Vulkan calls made to fail ([`Faults`]). Default: none.
    pub faults: Faults,
}

/// A test hook: the Vulkan calls of each kind that fail, as if the implementation had
/// returned `VK_ERROR_OUT_OF_HOST_MEMORY` (the call is not made). Each field is the
/// ordinal (from 1, per world) of the one call of its kind that fails; 0: none.
/// [`VulkanWorld::faults_injected`] says how many did. An out-of-memory Vulkan error
/// reaches the engine as [`Error::OutOfMemory`]; a step of [`VulkanWorld::new`] that
/// fails makes it return [`Unavailable`], with everything made before it destroyed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// The step of [`VulkanWorld::new`] that fails, counted over the Vulkan objects it
    /// makes in order: the instance, the validation layer's messenger (when the layer is
    /// on: a failure turns the layer's messages off, as a real one does), the device, the
    /// compute pipelines' descriptor set layout, pipeline layout, shader modules and
    /// pipelines (with `VK_KHR_push_descriptor`), the two timeline semaphores and the
    /// immediate context's command pool.
    pub creation_step: u32,
    /// The `vkQueueSubmit` that fails (the kernel's submit).
    pub submit: u32,
    /// The `vkAllocateMemory` that fails (allocations, upload memory, the screen).
    pub memory: u32,
    /// The `vkCreateBuffer` that fails (the same).
    pub buffer: u32,
    /// The `vkCreateCommandPool` of a deferred context that fails.
    pub pool: u32,
    /// The command-buffer call that fails, counted over `vkAllocateCommandBuffers` and
    /// `vkBeginCommandBuffer` of primaries and secondaries.
    pub command_buffer: u32,
}

/// The kinds of Vulkan call [`Faults`] makes fail after creation.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fault {
    Submit = 0,
    Memory = 1,
    Buffer = 2,
    Pool = 3,
    CommandBuffer = 4,
}

/// Counts the steps of [`VulkanWorld::new`], failing the one [`Faults::creation_step`]
/// names.
struct Steps {
    fail: u32,
    at: std::cell::Cell<u32>,
}

impl Steps {
    /// The next step: an error if it is the one to fail.
    fn next(&self) -> std::result::Result<(), vk::Result> {
        let at = self.at.get() + 1;
        self.at.set(at);
        match at == self.fail {
            true => Err(vk::Result::ERROR_OUT_OF_HOST_MEMORY),
            false => Ok(()),
        }
    }
}

impl Default for VulkanConfig {
    fn default() -> Self {
        VulkanConfig {
            validation: true,
            command_lists: true,
            driver_built: true,
            retire_clock: Clock::Completed,
            hazard_barriers: true,
            faults: Faults::default(),
        }
    }
}

impl VulkanConfig {
    /// The configuration of one list mode, the others default.
    pub fn for_mode(mode: cmdlist::ListMode) -> Self {
        VulkanConfig {
            command_lists: mode != cmdlist::ListMode::Emulated,
            driver_built: mode == cmdlist::ListMode::DriverBuilt,
            ..Default::default()
        }
    }
}

/// Why no Vulkan device could be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable {
    /// What failed.
    pub reason: String,
    /// What the validation layer reported while the failed creation ran and undid itself
    /// (its reports of objects left undestroyed among them), when the layer was on.
    pub validation_messages: Vec<String>,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no usable Vulkan 1.2 device: {} (a CPU implementation comes with \
             `apt-get install mesa-vulkan-drivers libvulkan1`)",
            self.reason
        )
    }
}

impl std::error::Error for Unavailable {}

fn unavailable(reason: impl Into<String>) -> Unavailable {
    Unavailable {
        reason: reason.into(),
        validation_messages: Vec::new(),
    }
}

/// The validation layer's messages of a world, kept past it ([`VulkanWorld::validation_log`]).
#[derive(Clone, Debug)]
pub struct ValidationLog(Arc<Mutex<Vec<String>>>);

impl ValidationLog {
    /// Every error and warning the layer reported so far, those of the world's destruction
    /// included once it dropped.
    pub fn messages(&self) -> Vec<String> {
        lock(&self.0).clone()
    }
}

/// A protocol or usage check that failed, as the soft world's violations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The rule (`R-D1`, `R-D4`, `thread`, `rotation`...).
    pub rule: &'static str,
    /// What happened.
    pub what: String,
}

/// What became of driver-built lists' secondary command buffers, and how their executes ran
/// ([`VulkanWorld::built_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BuiltStats {
    /// Reset into their context's cache at `recycle_command_list`.
    pub recycled: u64,
    /// Handed back to their live context's pool by `destroy_command_list`, or by a recycle or
    /// destroy parked until the timeline passed the buffer that executed them (freed there
    /// on the context's thread).
    pub handed_back: u64,
    /// Freed under the pool's lock, their context gone (by `destroy_command_list`, or once
    /// the timeline passed the buffer that executed them).
    pub freed_orphaned: u64,
    /// Executes of a list recorded before a resource it names moved to another allocation
    /// (a rotation, R-X5, or a rename, R-M5), replayed into the primary from its packets
    /// instead of executing its secondaries.
    pub replayed_after_rotation: u64,
}

#[derive(Clone, Copy)]
pub(crate) enum BuiltEvent {
    Recycled = 0,
    HandedBack = 1,
    FreedOrphaned = 2,
    ReplayedAfterRotation = 3,
}

/// Host-visible, host-coherent memory behind one `VkBuffer`, persistently mapped.
#[derive(Debug)]
pub(crate) struct HostBuffer {
    pub(crate) buffer: vk::Buffer,
    pub(crate) memory: vk::DeviceMemory,
    pub(crate) ptr: NonNull<u8>,
    pub(crate) size: u64,
}

// SAFETY: the mapping stays valid until the memory is freed, which only the buffer's owner
// does; whoever owns the `HostBuffer` is the one thread writing through `ptr` (the
// allocation table hands out reads and writes of disjoint, owned ranges only).
unsafe impl Send for HostBuffer {}
// SAFETY: shared references only read the handles and the size; the bytes are read through
// `ptr` by tests after the GPU finished (`VulkanWorld::read`), and written from the host
// only through the kernel's lock (`VulkanKernel::lock`), on the immediate context's thread,
// whose mapping is the lock's alone until its unlock.
unsafe impl Sync for HostBuffer {}

/// A kernel allocation: its memory, and the newest buffer that referenced it.
#[derive(Debug)]
pub(crate) struct Allocation {
    pub(crate) memory: HostBuffer,
    /// The bytes asked for ([`cmdlist::AllocationDesc::size`]; the buffer may be larger):
    /// what a lock hands out.
    pub(crate) len: u64,
    /// Fence of the newest submitted buffer whose allocation list named it (0: none).
    pub(crate) last_fence: AtomicU64,
}

/// Upload memory: a host buffer bump-allocated from the start.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub(crate) host: HostBuffer,
    pub(crate) used: u64,
}

/// A primary command buffer closed by [`cmdlist::Driver::flush`], with the upload memory
/// it reads, waiting for [`cmdlist::Kernel::submit`].
#[derive(Debug)]
pub(crate) struct Closed {
    pub(crate) cmd: vk::CommandBuffer,
    pub(crate) chunks: Vec<Chunk>,
    /// The allocations it references, sorted, for the allocation-list check (R-D1).
    pub(crate) refs: Vec<u64>,
}

/// The immediate context's side of the device: its command pool and the buffers on their
/// way to the GPU and back. The immediate context's thread locks it (the driver's
/// immediate-context hooks and the kernel's submit), and so does [`VulkanWorld::retire`],
/// which may run on any thread ([`VulkanWorld::wait_gpu`], the kernel's deallocate).
#[derive(Debug)]
pub(crate) struct IcQueue {
    /// The pool of the immediate context's primaries. Touched (command buffers allocated,
    /// reset, recorded, ended) on the immediate context's thread only: that is its external
    /// synchronisation, as the primary being recorded is written without this lock.
    pub(crate) pool: vk::CommandPool,
    /// Primaries whose submission completed (not reset yet: the immediate context's thread
    /// resets one before it records into it).
    pub(crate) free_primaries: Vec<vk::CommandBuffer>,
    /// Upload chunks whose buffers completed.
    pub(crate) free_chunks: Vec<Chunk>,
    /// The allocations the primary being recorded references (unsorted, repeats kept).
    pub(crate) open_refs: Vec<u64>,
    /// Closed, not yet submitted.
    pub(crate) closed: Vec<Closed>,
    /// Submitted, with their fence, oldest first.
    pub(crate) in_flight: VecDeque<(u64, Closed)>,
    /// Allocations deallocated while a submitted buffer could still read them, freed once
    /// the timeline passes that buffer's fence.
    pub(crate) zombies: Vec<(u64, HostBuffer)>,
    /// While set, every submit also waits for the gate semaphore to reach this value.
    pub(crate) hold: Option<u64>,
    pub(crate) gate_value: u64,
    pub(crate) last_submitted: u64,
}

/// The compute pipelines (draws, and the Blt) and what binds them: one descriptor set layout
/// of three storage buffers with `PUSH_DESCRIPTOR_KHR`, so a command buffer pushes its
/// descriptors as it records (`vkCmdPushDescriptorSetKHR`) and no context needs a
/// descriptor pool (which would need external synchronisation per recording thread and
/// a lifetime tied to the lists that use its sets); the pipeline layout adds
/// [`PUSH_BYTES`] of push constants. Immutable once made: every thread records with it.
pub(crate) struct Compute {
    pub(crate) push: ash::khr::push_descriptor::Device,
    pub(crate) set_layout: vk::DescriptorSetLayout,
    pub(crate) layout: vk::PipelineLayout,
    pub(crate) draw: vk::Pipeline,
    pub(crate) blt: vk::Pipeline,
    /// The device's `maxStorageBufferRange`: the most bytes one storage-buffer descriptor
    /// covers.
    pub(crate) max_storage_range: u64,
}

impl fmt::Debug for Compute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compute").finish_non_exhaustive()
    }
}

impl Compute {
    /// Makes the layouts and pipelines on a device that enabled `VK_KHR_push_descriptor`;
    /// on a failure, destroys what it made before it.
    fn new(
        steps: &Steps,
        instance: &ash::Instance,
        device: &ash::Device,
        physical: vk::PhysicalDevice,
    ) -> std::result::Result<Self, Unavailable> {
        // SAFETY: `physical` came from this instance.
        let limits = unsafe { instance.get_physical_device_properties(physical) }.limits;
        let push = ash::khr::push_descriptor::Device::new(instance, device);
        let bindings: Vec<_> = (0..3)
            .map(|b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let info = vk::DescriptorSetLayoutCreateInfo::default()
            .flags(vk::DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR_KHR)
            .bindings(&bindings);
        // SAFETY: VK_KHR_push_descriptor is enabled (VUID-VkDescriptorSetLayoutCreateInfo
        // -flags-00280 needs no dynamic buffers, none here); three distinct bindings
        // (-binding-00279), within maxPushDescriptors (at least 32).
        let set_layout = steps
            .next()
            .and_then(|()| unsafe { device.create_descriptor_set_layout(&info, None) })
            .map_err(|e| unavailable(format!("vkCreateDescriptorSetLayout: {e}")))?;
        let ranges = [vk::PushConstantRange {
            stage_flags: vk::ShaderStageFlags::COMPUTE,
            offset: 0,
            size: PUSH_BYTES,
        }];
        let layouts = [set_layout];
        let info = vk::PipelineLayoutCreateInfo::default()
            .set_layouts(&layouts)
            .push_constant_ranges(&ranges);
        // SAFETY: one push range of 128 bytes, the least maxPushConstantsSize
        // (VUID-VkPushConstantRange-size-00298, -offset-00294); one set layout of this
        // device.
        let layout = steps
            .next()
            .and_then(|()| unsafe { device.create_pipeline_layout(&info, None) });
        let layout = match layout {
            Ok(layout) => layout,
            Err(e) => {
                // SAFETY: made above, used by nothing.
                unsafe { device.destroy_descriptor_set_layout(set_layout, None) };
                return Err(unavailable(format!("vkCreatePipelineLayout: {e}")));
            }
        };
        let undo = |pipelines: &[vk::Pipeline]| {
            // SAFETY: made above from this device, used by no command buffer yet.
            unsafe {
                for &p in pipelines {
                    device.destroy_pipeline(p, None);
                }
                device.destroy_pipeline_layout(layout, None);
                device.destroy_descriptor_set_layout(set_layout, None);
            }
        };
        let draw = Self::pipeline(steps, device, layout, DRAW_SPV).inspect_err(|_| undo(&[]))?;
        let blt = Self::pipeline(steps, device, layout, BLT_SPV).inspect_err(|_| undo(&[draw]))?;
        Ok(Compute {
            push,
            set_layout,
            layout,
            draw,
            blt,
            max_storage_range: u64::from(limits.max_storage_buffer_range),
        })
    }

    /// A compute pipeline of `layout` running the SPIR-V `spv`'s `main` (its shader module
    /// destroyed, made or not).
    fn pipeline(
        steps: &Steps,
        device: &ash::Device,
        layout: vk::PipelineLayout,
        spv: &[u8],
    ) -> std::result::Result<vk::Pipeline, Unavailable> {
        let code = ash::util::read_spv(&mut std::io::Cursor::new(spv))
            .map_err(|e| unavailable(format!("SPIR-V: {e}")))?;
        let info = vk::ShaderModuleCreateInfo::default().code(&code);
        // SAFETY: valid SPIR-V (compiled by glslangValidator; `read_spv` checked the size
        // is a multiple of 4 and the words are aligned, VUID-VkShaderModuleCreateInfo
        // -codeSize-01085, -pCode-01376).
        let module = steps
            .next()
            .and_then(|()| unsafe { device.create_shader_module(&info, None) })
            .map_err(|e| unavailable(format!("vkCreateShaderModule: {e}")))?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        let info = [vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(layout)];
        // SAFETY: a compute stage whose module has a `main` compute entry point
        // (VUID-VkComputePipelineCreateInfo-stage-00701); the shader's set 0 bindings and
        // push block are in the layout (VUID-VkComputePipelineCreateInfo-layout-07987,
        // -07988); then the module is destroyed, which a made pipeline allows.
        let made = unsafe {
            let made = match steps.next() {
                Ok(()) => device
                    .create_compute_pipelines(vk::PipelineCache::null(), &info, None)
                    .map_err(|(_, e)| e),
                Err(e) => Err(e),
            };
            device.destroy_shader_module(module, None);
            made
        };
        made.map(|p| p[0])
            .map_err(|e| unavailable(format!("vkCreateComputePipelines: {e}")))
    }

    /// Destroys the pipelines and layouts (the device idle).
    fn destroy(&self, device: &ash::Device) {
        // SAFETY: the device is idle, so no command buffer using them is pending
        // (VUID-vkDestroyPipeline-pipeline-00765); nothing else uses them after.
        unsafe {
            device.destroy_pipeline(self.draw, None);
            device.destroy_pipeline(self.blt, None);
            device.destroy_pipeline_layout(self.layout, None);
            device.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}

/// The headless screen: host-visible memory each present's driver part copies the
/// presented surface into, and the fence of the buffer that copied the last one (set by the
/// kernel's present callback).
#[derive(Debug, Default)]
pub(crate) struct Screen {
    pub(crate) host: Option<HostBuffer>,
    /// Bytes of the last presented surface.
    pub(crate) len: u64,
    /// The buffer that copied it (`None`: nothing presented yet).
    pub(crate) fence: Option<u64>,
}

/// Per deferred context: which threads touched its command pool.
#[derive(Debug, Default, Clone)]
pub(crate) struct PoolRecord {
    pub(crate) created_on: Option<ThreadId>,
    pub(crate) threads: Vec<ThreadId>,
}

/// The Vulkan device shared by [`crate::VulkanDriver`] and [`crate::VulkanKernel`]. See the
/// crate docs.
pub struct VulkanWorld {
    pub(crate) config: VulkanConfig,
    _entry: ash::Entry,
    instance: ash::Instance,
    debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    /// Shared so that the messenger's user-data pointer stays put, and so that the reports
    /// of the world's own destruction reach a [`ValidationLog`] that outlives it.
    messages: Arc<Mutex<Vec<String>>>,
    pub(crate) device: ash::Device,
    /// The compute pipelines; `None` without `VK_KHR_push_descriptor` (draws and the Blt are
    /// then unsupported).
    pub(crate) compute: Option<Compute>,
    pub(crate) queue_family: u32,
    queue: Mutex<vk::Queue>,
    pub(crate) timeline: vk::Semaphore,
    gate: vk::Semaphore,
    memory_type: u32,
    allocations: RwLock<HashMap<u64, Allocation>>,
    /// How many allocations were taken from the table (deallocated), for the deferred
    /// contexts' caches of it (`crate::buffer_cache`).
    allocations_taken: AtomicU64,
    next_allocation: AtomicU64,
    pub(crate) ic: Mutex<IcQueue>,
    pub(crate) screen: Mutex<Screen>,
    /// Standard-size chunks nobody uses, for any context.
    pub(crate) spare_chunks: Mutex<Vec<Chunk>>,
    /// Driver-built lists recycled or destroyed while a buffer that executed them may still
    /// run (the list clock `Submitted`), with that buffer's fence: destroyed by `retire` once
    /// the timeline passes it.
    pub(crate) parked: Mutex<Vec<(u64, Box<crate::built::BuiltList>)>>,
    violations: Mutex<Vec<Violation>>,
    errors: Mutex<Vec<(ContextId, Error)>>,
    /// `vkCmdExecuteCommands` recorded.
    pub(crate) execute_commands: AtomicU64,
    /// The hazard rule's barriers in ended command buffers.
    hazard_barriers: AtomicU64,
    /// Calls of each [`Fault`] kind so far, and the faults injected ([`Faults`]).
    fault_counts: [std::sync::atomic::AtomicU32; 5],
    faults_injected: std::sync::atomic::AtomicU32,
    pub(crate) built_stats: [AtomicU64; 4],
    pub(crate) ic_thread: Mutex<Option<ThreadId>>,
    pub(crate) pools: Mutex<HashMap<u32, PoolRecord>>,
    device_name: String,
}

/// Locks, ignoring poisoning: every lock here guards data that stays consistent when a
/// holder panics (plain pushes and pops).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The validation layer's messenger callback: keeps each warning and error.
///
/// # Safety
/// Called by the loader only, with `user` the world's message list the messenger was made
/// with (alive while the messenger is) and `data` valid for the call, as
/// PFN_vkDebugUtilsMessengerCallbackEXT says.
unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    let wanted = vk::DebugUtilsMessageSeverityFlagsEXT::ERROR
        | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING;
    if !severity.intersects(wanted) || user.is_null() {
        return vk::FALSE;
    }
    // SAFETY: `user` is the `Arc<Mutex<Vec<String>>>` of the world that made the messenger,
    // which destroys the messenger before dropping its reference; `data` and the strings it
    // points to are valid for the duration of the callback (the spec's
    // PFN_vkDebugUtilsMessengerCallbackEXT), and `p_message` is null or NUL-terminated.
    unsafe {
        let messages = &*(user as *const Mutex<Vec<String>>);
        let message = data
            .as_ref()
            .filter(|d| !d.p_message.is_null())
            .map(|d| CStr::from_ptr(d.p_message).to_string_lossy().into_owned())
            .unwrap_or_default();
        lock(messages).push(format!("{severity:?}: {message}"));
    }
    vk::FALSE
}

impl VulkanWorld {
    /// Opens the Vulkan loader, makes a headless instance (no surface extension) and a device
    /// on the first physical device with Vulkan 1.2, timeline semaphores and a queue family
    /// with compute (and so transfer) work, graphics or not.
    pub fn new(config: VulkanConfig) -> std::result::Result<Arc<Self>, Unavailable> {
        // SAFETY: loading the loader runs its initialisation; nothing else of Vulkan is in
        // use in this process through this `Entry` yet (ash's `Entry::load` contract).
        let entry = unsafe { ash::Entry::load() }
            .map_err(|e| unavailable(format!("the Vulkan loader (libvulkan.so.1): {e}")))?;
        // SAFETY: a valid entry; no pointers are passed (vkEnumerateInstanceLayerProperties).
        let layers = unsafe { entry.enumerate_instance_layer_properties() }.unwrap_or_default();
        let has_validation = layers
            .iter()
            .any(|l| l.layer_name_as_c_str().ok() == Some(VALIDATION_LAYER));
        let names = |layer: Option<&CStr>| {
            // SAFETY: a valid entry; the layer name, if any, is NUL-terminated
            // (vkEnumerateInstanceExtensionProperties).
            unsafe { entry.enumerate_instance_extension_properties(layer) }
                .unwrap_or_default()
                .iter()
                .filter_map(|e| e.extension_name_as_c_str().ok().map(CStr::to_owned))
                .collect::<Vec<_>>()
        };
        let extensions: Vec<_> = match has_validation {
            true => [names(None), names(Some(VALIDATION_LAYER))].concat(),
            false => Vec::new(),
        };
        let has = |name: &CStr| extensions.iter().any(|e| e.as_c_str() == name);
        let validation = config.validation
            && has_validation
            && has(ash::ext::debug_utils::NAME)
            && has(ash::ext::validation_features::NAME);
        let app = vk::ApplicationInfo::default()
            .application_name(c"cmdlist-vulkan")
            .api_version(vk::API_VERSION_1_2);
        let layer_names = [VALIDATION_LAYER.as_ptr()];
        let ext_names = [
            ash::ext::debug_utils::NAME.as_ptr(),
            ash::ext::validation_features::NAME.as_ptr(),
        ];
        // The layer's synchronisation validation checks every hazard between transfer
        // commands, across command buffers and submissions: the hazard rule's witness.
        let features = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut validation_features =
            vk::ValidationFeaturesEXT::default().enabled_validation_features(&features);
        let messages: Arc<Mutex<Vec<String>>> = Arc::default();
        let messenger_info = || {
            vk::DebugUtilsMessengerCreateInfoEXT::default()
                .message_severity(
                    vk::DebugUtilsMessageSeverityFlagsEXT::ERROR
                        | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING,
                )
                .message_type(
                    vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                        | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                        | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
                )
                .pfn_user_callback(Some(on_message))
                .user_data(&*messages as *const Mutex<Vec<String>> as *mut c_void)
        };
        // The messenger of vkCreateInstance and vkDestroyInstance themselves: the layer's
        // reports of objects an instance is destroyed with reach `messages` through it.
        let mut instance_messenger = messenger_info();
        let mut info = vk::InstanceCreateInfo::default().application_info(&app);
        if validation {
            info = info
                .enabled_layer_names(&layer_names)
                .enabled_extension_names(&ext_names)
                .push_next(&mut validation_features)
                .push_next(&mut instance_messenger);
        }
        let steps = Steps {
            fail: config.faults.creation_step,
            at: std::cell::Cell::new(0),
        };
        // SAFETY: every pointer in `info` points to locals alive for the call
        // (VUID-vkCreateInstance-pCreateInfo-parameter); the layer and both extensions were
        // enumerated above; ValidationFeaturesEXT and DebugUtilsMessengerCreateInfoEXT are
        // valid pNexts of VkInstanceCreateInfo (VUID-VkInstanceCreateInfo-pNext-pNext),
        // chained only with VK_EXT_validation_features and VK_EXT_debug_utils enabled; the
        // messenger's user data, the shared message list, outlives the instance (destroyed
        // below on a failure, or by the world that owns both, before its reference).
        let instance = steps
            .next()
            .and_then(|()| unsafe { entry.create_instance(&info, None) })
            .map_err(|e| unavailable(format!("vkCreateInstance: {e}")))?;
        let debug = if validation {
            let loader = ash::ext::debug_utils::Instance::new(&entry, &instance);
            let info = messenger_info();
            // SAFETY: the instance enabled VK_EXT_debug_utils; the user data outlives the
            // messenger (destroyed in `Drop` before the world's reference to it).
            let made = steps
                .next()
                .and_then(|()| unsafe { loader.create_debug_utils_messenger(&info, None) });
            match made {
                Ok(m) => Some((loader, m)),
                Err(_) => None,
            }
        } else {
            None
        };
        let destroy_instance = |debug: Option<(ash::ext::debug_utils::Instance, _)>| {
            // SAFETY: nothing made from the instance is alive but the messenger, destroyed
            // first (VUID-vkDestroyInstance-instance-00629).
            unsafe {
                if let Some((loader, m)) = debug {
                    loader.destroy_debug_utils_messenger(m, None);
                }
                instance.destroy_instance(None);
            }
        };
        // The loader (`entry`) stays loaded until the instance is destroyed: dropping it
        // first would unload the code the destruction calls.
        let made = Self::open_device(&instance).and_then(|(physical, family, name)| {
            Self::with_device(&steps, &instance, physical, family)
                .map(|parts| (parts, name, family))
        });
        match made {
            Ok((parts, name, family)) => Ok(Arc::new(Self::assemble(
                config,
                entry,
                parts,
                instance,
                debug,
                messages,
                (name, family),
            ))),
            Err(e) => {
                destroy_instance(debug);
                let validation_messages = lock(&messages).clone();
                Err(Unavailable {
                    validation_messages,
                    ..e
                })
            }
        }
    }

    fn open_device(
        instance: &ash::Instance,
    ) -> std::result::Result<(vk::PhysicalDevice, u32, String), Unavailable> {
        // SAFETY: a valid instance (vkEnumeratePhysicalDevices).
        let devices = unsafe { instance.enumerate_physical_devices() }
            .map_err(|e| unavailable(format!("vkEnumeratePhysicalDevices: {e}")))?;
        if devices.is_empty() {
            return Err(unavailable("the loader found no Vulkan driver (no ICD)"));
        }
        let mut seen = Vec::new();
        for physical in devices {
            // SAFETY: `physical` came from this instance.
            let props = unsafe { instance.get_physical_device_properties(physical) };
            let name = props
                .device_name_as_c_str()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if props.api_version < vk::API_VERSION_1_2 {
                seen.push(format!("{name}: Vulkan below 1.2"));
                continue;
            }
            let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
            let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut v12);
            // SAFETY: the device supports 1.2, so its Vulkan12Features may be chained
            // (VUID-VkPhysicalDeviceFeatures2-pNext-pNext).
            unsafe { instance.get_physical_device_features2(physical, &mut features) };
            if v12.timeline_semaphore == vk::FALSE {
                seen.push(format!("{name}: no timeline semaphores"));
                continue;
            }
            // SAFETY: `physical` came from this instance.
            let families =
                unsafe { instance.get_physical_device_queue_family_properties(physical) };
            // Compute (with or without graphics): such a family supports transfer too.
            let family = families
                .iter()
                .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE));
            match family {
                Some(f) => return Ok((physical, f as u32, name)),
                None => seen.push(format!("{name}: no compute queue")),
            }
        }
        Err(unavailable(format!("no device fits: {}", seen.join("; "))))
    }

    /// The device and what the world makes from it; on a failure, the device destroyed
    /// with everything made from it.
    #[allow(clippy::type_complexity)]
    fn with_device(
        steps: &Steps,
        instance: &ash::Instance,
        physical: vk::PhysicalDevice,
        family: u32,
    ) -> std::result::Result<
        (
            ash::Device,
            vk::Queue,
            vk::Semaphore,
            vk::Semaphore,
            u32,
            vk::CommandPool,
            Option<Compute>,
        ),
        Unavailable,
    > {
        let priorities = [1.0f32];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(family)
            .queue_priorities(&priorities)];
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(true);
        // SAFETY: `physical` came from this instance (vkEnumerateDeviceExtensionProperties).
        let has_push = unsafe { instance.enumerate_device_extension_properties(physical) }
            .unwrap_or_default()
            .iter()
            .any(|e| e.extension_name_as_c_str().ok() == Some(ash::khr::push_descriptor::NAME));
        let extensions = [ash::khr::push_descriptor::NAME.as_ptr()];
        let mut info = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .push_next(&mut v12);
        if has_push {
            info = info.enabled_extension_names(&extensions);
        }
        // SAFETY: the family exists and timelineSemaphore is supported (checked in
        // `open_device`; VUID-VkDeviceCreateInfo-pNext-pNext allows Vulkan12Features on 1.2);
        // the one extension, if named, was enumerated above
        // (VUID-vkCreateDevice-ppEnabledExtensionNames-01387).
        let device = steps
            .next()
            .and_then(|()| unsafe { instance.create_device(physical, &info, None) })
            .map_err(|e| unavailable(format!("vkCreateDevice: {e}")))?;
        match Self::device_parts(steps, instance, &device, physical, family, has_push) {
            Ok((queue, timeline, gate, memory_type, pool, compute)) => {
                Ok((device, queue, timeline, gate, memory_type, pool, compute))
            }
            Err(e) => {
                // SAFETY: `device_parts` destroyed everything it made from the device, and
                // nothing else was (VUID-vkDestroyDevice-device-05137); no queue work was
                // ever submitted.
                unsafe { device.destroy_device(None) };
                Err(e)
            }
        }
    }

    /// The queue, semaphores, memory type, command pool and pipelines of a new device; on a
    /// failure, what it made before destroyed.
    #[allow(clippy::type_complexity)]
    fn device_parts(
        steps: &Steps,
        instance: &ash::Instance,
        device: &ash::Device,
        physical: vk::PhysicalDevice,
        family: u32,
        has_push: bool,
    ) -> std::result::Result<
        (
            vk::Queue,
            vk::Semaphore,
            vk::Semaphore,
            u32,
            vk::CommandPool,
            Option<Compute>,
        ),
        Unavailable,
    > {
        let compute = match has_push {
            true => Some(Compute::new(steps, instance, device, physical)?),
            false => None,
        };
        let undo = |semaphores: &[vk::Semaphore]| {
            // SAFETY: made above from this device, used by nothing yet.
            unsafe {
                for &semaphore in semaphores {
                    device.destroy_semaphore(semaphore, None);
                }
            }
            if let Some(compute) = &compute {
                compute.destroy(device);
            }
        };
        // SAFETY: queue 0 of the family was created with the device
        // (VUID-vkGetDeviceQueue-queueIndex-00385).
        let queue = unsafe { device.get_device_queue(family, 0) };
        let timeline = Self::timeline_semaphore(steps, device).inspect_err(|_| undo(&[]))?;
        let gate = Self::timeline_semaphore(steps, device).inspect_err(|_| undo(&[timeline]))?;
        // SAFETY: `physical` came from this instance.
        let memory = unsafe { instance.get_physical_device_memory_properties(physical) };
        let wanted = vk::MemoryPropertyFlags::HOST_VISIBLE | vk::MemoryPropertyFlags::HOST_COHERENT;
        let memory_type = (0..memory.memory_type_count)
            .find(|&i| {
                memory.memory_types[i as usize]
                    .property_flags
                    .contains(wanted)
            })
            .ok_or_else(|| unavailable("no host-visible, host-coherent memory type"))
            .inspect_err(|_| undo(&[timeline, gate]))?;
        let pool_info = vk::CommandPoolCreateInfo::default()
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER)
            .queue_family_index(family);
        // SAFETY: the family is the device's (VUID-vkCreateCommandPool-queueFamilyIndex-01937).
        let pool = steps
            .next()
            .and_then(|()| unsafe { device.create_command_pool(&pool_info, None) })
            .map_err(|e| unavailable(format!("vkCreateCommandPool: {e}")))
            .inspect_err(|_| undo(&[timeline, gate]))?;
        Ok((queue, timeline, gate, memory_type, pool, compute))
    }

    fn timeline_semaphore(
        steps: &Steps,
        device: &ash::Device,
    ) -> std::result::Result<vk::Semaphore, Unavailable> {
        let mut ty = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(0);
        let info = vk::SemaphoreCreateInfo::default().push_next(&mut ty);
        // SAFETY: the device enabled timelineSemaphore
        // (VUID-VkSemaphoreTypeCreateInfo-timelineSemaphore-03252).
        steps
            .next()
            .and_then(|()| unsafe { device.create_semaphore(&info, None) })
            .map_err(|e| unavailable(format!("vkCreateSemaphore: {e}")))
    }

    #[allow(clippy::type_complexity)]
    fn assemble(
        config: VulkanConfig,
        entry: ash::Entry,
        (device, queue, timeline, gate, memory_type, pool, compute): (
            ash::Device,
            vk::Queue,
            vk::Semaphore,
            vk::Semaphore,
            u32,
            vk::CommandPool,
            Option<Compute>,
        ),
        instance: ash::Instance,
        debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
        messages: Arc<Mutex<Vec<String>>>,
        (device_name, queue_family): (String, u32),
    ) -> Self {
        VulkanWorld {
            config,
            _entry: entry,
            instance,
            debug,
            messages,
            queue_family,
            device,
            compute,
            queue: Mutex::new(queue),
            timeline,
            gate,
            memory_type,
            allocations: RwLock::default(),
            allocations_taken: AtomicU64::new(0),
            next_allocation: AtomicU64::new(1),
            ic: Mutex::new(IcQueue {
                pool,
                free_primaries: Vec::new(),
                free_chunks: Vec::new(),
                open_refs: Vec::new(),
                closed: Vec::new(),
                in_flight: VecDeque::new(),
                zombies: Vec::new(),
                hold: None,
                gate_value: 0,
                last_submitted: 0,
            }),
            screen: Mutex::default(),
            spare_chunks: Mutex::default(),
            parked: Mutex::default(),
            violations: Mutex::default(),
            errors: Mutex::default(),
            execute_commands: AtomicU64::new(0),
            hazard_barriers: AtomicU64::new(0),
            fault_counts: Default::default(),
            faults_injected: Default::default(),
            built_stats: Default::default(),
            ic_thread: Mutex::new(None),
            pools: Mutex::default(),
            device_name,
        }
    }

    /// The physical device's name (lavapipe reports `llvmpipe (LLVM ...)`).
    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    /// Every error and warning the validation layer reported so far.
    pub fn validation_messages(&self) -> Vec<String> {
        lock(&self.messages).clone()
    }

    /// The validation layer's messages, readable after the world is gone: the layer reports
    /// the objects a device or instance is destroyed with (a command pool, buffer or memory
    /// the driver never destroyed) only as the world drops.
    pub fn validation_log(&self) -> ValidationLog {
        ValidationLog(Arc::clone(&self.messages))
    }

    /// The device's `maxStorageBufferRange` (`None` without the compute pipelines): a draw
    /// or a Blt whose bytes reach past it in their buffer is [`Error::Unsupported`].
    pub fn max_storage_buffer_range(&self) -> Option<u64> {
        self.compute.as_ref().map(|c| c.max_storage_range)
    }

    /// Whether the validation layer is on (installed and asked for).
    pub fn validation_enabled(&self) -> bool {
        self.debug.is_some()
    }

    /// Every violation found so far.
    pub fn violations(&self) -> Vec<Violation> {
        lock(&self.violations).clone()
    }

    /// Every error the engine reported through the kernel (R-E2).
    pub fn errors(&self) -> Vec<(ContextId, Error)> {
        lock(&self.errors).clone()
    }

    pub(crate) fn set_error(&self, context: ContextId, error: Error) {
        lock(&self.errors).push((context, error));
    }

    pub(crate) fn violate(&self, rule: &'static str, what: String) {
        lock(&self.violations).push(Violation { rule, what });
    }

    /// How many `vkCmdExecuteCommands` the driver recorded: one per driver-built list
    /// executed on the immediate context, whatever its length.
    pub fn execute_commands(&self) -> u64 {
        self.execute_commands.load(Ordering::Relaxed)
    }

    /// How many barriers the hazard rule recorded (the crate docs) in the command buffers
    /// ended so far, primaries and secondaries: one at the start of each secondary, and one
    /// before each command that reads or writes bytes an earlier command of its buffer wrote
    /// since the last barrier, or writes bytes one read. Counted whether or not
    /// [`VulkanConfig::hazard_barriers`] lets them be recorded.
    pub fn hazard_barriers(&self) -> u64 {
        self.hazard_barriers.load(Ordering::Relaxed)
    }

    /// How many Vulkan calls [`VulkanConfig::faults`] made fail since the world was made.
    pub fn faults_injected(&self) -> u32 {
        self.faults_injected.load(Ordering::Relaxed)
    }

    /// Before a Vulkan call of kind `fault`: the error it fails with if [`Faults`] names it.
    pub(crate) fn inject(&self, fault: Fault) -> std::result::Result<(), vk::Result> {
        let f = &self.config.faults;
        let nth = match fault {
            Fault::Submit => f.submit,
            Fault::Memory => f.memory,
            Fault::Buffer => f.buffer,
            Fault::Pool => f.pool,
            Fault::CommandBuffer => f.command_buffer,
        };
        if nth == 0 {
            return Ok(());
        }
        let at = self.fault_counts[fault as usize].fetch_add(1, Ordering::Relaxed) + 1;
        if at != nth {
            return Ok(());
        }
        self.faults_injected.fetch_add(1, Ordering::Relaxed);
        Err(vk::Result::ERROR_OUT_OF_HOST_MEMORY)
    }

    pub(crate) fn count_barriers(&self, n: u64) {
        if n > 0 {
            self.hazard_barriers.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// What became of driver-built lists' secondaries so far, and how their executes ran.
    pub fn built_stats(&self) -> BuiltStats {
        let [recycled, handed_back, freed_orphaned, replayed_after_rotation] = self
            .built_stats
            .each_ref()
            .map(|c| c.load(Ordering::Relaxed));
        BuiltStats {
            recycled,
            handed_back,
            freed_orphaned,
            replayed_after_rotation,
        }
    }

    pub(crate) fn count(&self, what: BuiltEvent, n: usize) {
        self.built_stats[what as usize].fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The threads that touched deferred context `id`'s command pool, in order of first
    /// touch, and the thread that created it.
    pub fn pool_threads(&self, id: cmdlist::DeferredId) -> (Option<ThreadId>, Vec<ThreadId>) {
        let pools = lock(&self.pools);
        pools
            .get(&id.get())
            .map(|p| (p.created_on, p.threads.clone()))
            .unwrap_or_default()
    }

    pub(crate) fn note_pool_thread(&self, id: u32, created: bool) {
        let me = std::thread::current().id();
        let mut pools = lock(&self.pools);
        let record = pools.entry(id).or_default();
        if created {
            record.created_on = Some(me);
        }
        if !record.threads.contains(&me) {
            record.threads.push(me);
        }
    }

    /// The timeline semaphore's value: the newest completed fence.
    pub fn completed(&self) -> u64 {
        // SAFETY: the semaphore is a timeline semaphore of this device
        // (VUID-vkGetSemaphoreCounterValue-semaphore-03255).
        unsafe { self.device.get_semaphore_counter_value(self.timeline) }.unwrap_or(0)
    }

    /// The newest submitted fence.
    pub fn last_submitted(&self) -> u64 {
        lock(&self.ic).last_submitted
    }

    /// Holds the GPU: every buffer submitted from now on also waits for a semaphore the host
    /// signals at [`VulkanWorld::release_gpu`], so it stays pending (the soft kernel's
    /// `Gpu::Manual`). Release before destroying the device, which waits for the GPU; the
    /// world releases it itself when it is dropped.
    pub fn hold_gpu(&self) {
        let mut ic = lock(&self.ic);
        if ic.hold.is_none() {
            ic.gate_value += 1;
            ic.hold = Some(ic.gate_value);
        }
    }

    /// Lets every held buffer run (signals the gate from the host).
    pub fn release_gpu(&self) {
        let mut ic = lock(&self.ic);
        if let Some(value) = ic.hold.take() {
            let info = vk::SemaphoreSignalInfo::default()
                .semaphore(self.gate)
                .value(value);
            // SAFETY: the gate is a timeline semaphore of this device and `value` is greater
            // than its current value: only this function signals it, with values growing by
            // one (VUID-VkSemaphoreSignalInfo-value-03258).
            if let Err(e) = unsafe { self.device.signal_semaphore(&info) } {
                self.violate("vulkan", format!("vkSignalSemaphore of the gate: {e}"));
            }
        }
    }

    /// Waits (at most a minute) until the GPU finished every submitted buffer, then takes
    /// back what they used.
    pub fn wait_gpu(&self) -> Result<()> {
        self.wait(self.last_submitted(), std::time::Duration::from_secs(60))?;
        let mut ic = lock(&self.ic);
        self.retire(&mut ic);
        Ok(())
    }

    /// Waits until the timeline reaches `fence` (at most `timeout`).
    pub(crate) fn wait(&self, fence: u64, timeout: std::time::Duration) -> Result<()> {
        let semaphores = [self.timeline];
        let values = [fence];
        let info = vk::SemaphoreWaitInfo::default()
            .semaphores(&semaphores)
            .values(&values);
        let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: a timeline semaphore of this device (VUID-VkSemaphoreWaitInfo-pSemaphores
        // -03256); the arrays have one element each.
        match unsafe { self.device.wait_semaphores(&info, nanos) } {
            Ok(()) => Ok(()),
            Err(vk::Result::TIMEOUT) => Err(Error::DeviceRemoved),
            Err(vk::Result::ERROR_OUT_OF_HOST_MEMORY | vk::Result::ERROR_OUT_OF_DEVICE_MEMORY) => {
                Err(Error::OutOfMemory)
            }
            Err(_) => Err(Error::DeviceRemoved),
        }
    }

    /// Makes host-visible, host-coherent memory of `size` bytes behind a new buffer usable
    /// as a transfer source and destination, mapped.
    pub(crate) fn host_buffer(&self, size: u64) -> Result<HostBuffer> {
        let size = size.max(4);
        let info = vk::BufferCreateInfo::default()
            .size(size)
            .usage(
                vk::BufferUsageFlags::TRANSFER_SRC
                    | vk::BufferUsageFlags::TRANSFER_DST
                    | vk::BufferUsageFlags::STORAGE_BUFFER,
            )
            .sharing_mode(vk::SharingMode::EXCLUSIVE);
        let oom = |e: vk::Result| match e {
            vk::Result::ERROR_OUT_OF_HOST_MEMORY | vk::Result::ERROR_OUT_OF_DEVICE_MEMORY => {
                Error::OutOfMemory
            }
            _ => Error::DeviceRemoved,
        };
        // SAFETY: size > 0 (VUID-VkBufferCreateInfo-size-00912), exclusive sharing, usage
        // flags valid.
        let buffer = self
            .inject(Fault::Buffer)
            .and_then(|()| unsafe { self.device.create_buffer(&info, None) })
            .map_err(oom)?;
        // SAFETY: a buffer of this device.
        let needs = unsafe { self.device.get_buffer_memory_requirements(buffer) };
        let destroy_buffer = || {
            // SAFETY: the buffer was never used by any command buffer.
            unsafe { self.device.destroy_buffer(buffer, None) }
        };
        if needs.memory_type_bits & (1 << self.memory_type) == 0 {
            destroy_buffer();
            return Err(Error::Unsupported);
        }
        let alloc = vk::MemoryAllocateInfo::default()
            .allocation_size(needs.size)
            .memory_type_index(self.memory_type);
        // SAFETY: a memory type of this device that the buffer accepts (checked above,
        // VUID-vkBindBufferMemory-memory-01035 for the bind below).
        let memory = self
            .inject(Fault::Memory)
            .and_then(|()| unsafe { self.device.allocate_memory(&alloc, None) });
        let memory = match memory {
            Ok(m) => m,
            Err(e) => {
                destroy_buffer();
                return Err(oom(e));
            }
        };
        // SAFETY: unbound buffer, fresh memory at offset 0 of the required size
        // (VUID-vkBindBufferMemory-buffer-07459, -size-01037); then the host-visible memory is
        // mapped whole, once (VUID-vkMapMemory-memory-00678, -00682).
        let ptr = unsafe {
            self.device
                .bind_buffer_memory(buffer, memory, 0)
                .and_then(|()| {
                    self.device
                        .map_memory(memory, 0, vk::WHOLE_SIZE, vk::MemoryMapFlags::empty())
                })
        };
        match ptr.ok().and_then(|p| NonNull::new(p.cast::<u8>())) {
            Some(ptr) => Ok(HostBuffer {
                buffer,
                memory,
                ptr,
                size,
            }),
            None => {
                destroy_buffer();
                // SAFETY: memory bound to nothing alive any more.
                unsafe { self.device.free_memory(memory, None) };
                Err(Error::OutOfMemory)
            }
        }
    }

    /// Destroys a host buffer no pending command buffer references.
    pub(crate) fn free_host_buffer(&self, host: HostBuffer) {
        // SAFETY: the caller knows no command buffer in the pending state uses the buffer
        // (VUID-vkDestroyBuffer-buffer-00922, VUID-vkFreeMemory-memory-00677); freeing the
        // memory unmaps it.
        unsafe {
            self.device.destroy_buffer(host.buffer, None);
            self.device.free_memory(host.memory, None);
        }
    }

    /// A new allocation's id and memory.
    pub(crate) fn allocate(&self, size: u64) -> Result<AllocationHandle> {
        let memory = self.host_buffer(size)?;
        // New memory reads as zeros, as the soft kernel's does (Vulkan leaves it undefined).
        // SAFETY: the mapping covers `memory.size` bytes, which nothing else references yet.
        unsafe { std::ptr::write_bytes(memory.ptr.as_ptr(), 0, memory.size as usize) };
        let id = self.next_allocation.fetch_add(1, Ordering::Relaxed);
        let handle = AllocationHandle(std::num::NonZeroU64::new(id).expect("ids start at 1"));
        let mut table = self
            .allocations
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        table.insert(
            id,
            Allocation {
                memory,
                len: size,
                last_fence: AtomicU64::new(0),
            },
        );
        Ok(handle)
    }

    pub(crate) fn take_allocation(&self, handle: AllocationHandle) -> Option<Allocation> {
        let mut table = self
            .allocations
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let taken = table.remove(&handle.0.get());
        if taken.is_some() {
            // Under the table's lock: a cache that reads the new count after this finds the
            // allocation gone from the table.
            self.allocations_taken.fetch_add(1, Ordering::Release);
        }
        taken
    }

    /// How many allocations were taken from the table so far (`crate::buffer_cache`).
    pub(crate) fn allocations_taken(&self) -> u64 {
        self.allocations_taken.load(Ordering::Acquire)
    }

    /// The buffer and size behind an allocation. A read lock: allocate and deallocate are
    /// not per-draw paths, so the table's writers are rare and readers do not contend.
    pub(crate) fn buffer_of(&self, handle: AllocationHandle) -> Option<(vk::Buffer, u64)> {
        let table = self
            .allocations
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        table
            .get(&handle.0.get())
            .map(|a| (a.memory.buffer, a.memory.size))
    }

    /// For the kernel's lock (R-M4): an allocation's mapped bytes (`len` of them, the size
    /// it was asked for) and the fence of the newest submitted buffer that named it. The
    /// pointer stays valid while the allocation is in the table or its memory is kept.
    pub(crate) fn host_bytes(&self, handle: AllocationHandle) -> Option<(NonNull<u8>, u64, u64)> {
        let table = self
            .allocations
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        table.get(&handle.0.get()).map(|a| {
            let len = a.len.min(a.memory.size);
            (a.memory.ptr, len, a.last_fence.load(Ordering::Relaxed))
        })
    }

    pub(crate) fn note_submitted(&self, allocations: &[AllocationHandle], fence: u64) {
        let table = self
            .allocations
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        for a in allocations {
            if let Some(a) = table.get(&a.0.get()) {
                a.last_fence.fetch_max(fence, Ordering::Relaxed);
            }
        }
    }

    /// The bytes of an allocation (`size` of them), once the GPU finished writing them: waits
    /// (at most a minute) for the newest submitted buffer that referenced it (`None` if it
    /// did not complete by then). Work not yet submitted is not waited for.
    pub fn read(&self, handle: AllocationHandle, size: usize) -> Option<Vec<u8>> {
        let fence = {
            let table = self
                .allocations
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            let a = table.get(&handle.0.get())?;
            a.last_fence.load(Ordering::Relaxed)
        };
        self.wait(fence, std::time::Duration::from_secs(60)).ok()?;
        let table = self
            .allocations
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let a = table.get(&handle.0.get())?;
        let len = size.min(usize::try_from(a.memory.size).ok()?);
        // SAFETY: the mapping covers `a.memory.size` bytes and lives while the allocation is
        // in the table (its removal takes the write lock); memory is host-coherent, so the
        // GPU's writes are visible once the buffer that wrote them completed (waited for
        // above) and its last barrier made them available to the host (every primary ends
        // with one).
        Some(unsafe { std::slice::from_raw_parts(a.memory.ptr.as_ptr(), len) }.to_vec())
    }

    /// The last presented surface's bytes (the whole resource), once the GPU copied them:
    /// waits (at most a minute) for the buffer that did. `None` before the first present.
    pub fn screen(&self) -> Option<Vec<u8>> {
        let screen = lock(&self.screen);
        let fence = screen.fence?;
        self.wait(fence, std::time::Duration::from_secs(60)).ok()?;
        let host = screen.host.as_ref()?;
        let len = usize::try_from(screen.len.min(host.size)).ok()?;
        // SAFETY: the mapping covers `host.size` bytes and lives while the screen lock is
        // held (only the driver's present part, under it, replaces the buffer); the buffer
        // that wrote them completed, and its last barrier made the writes available to the
        // host (host-coherent memory).
        Some(unsafe { std::slice::from_raw_parts(host.ptr.as_ptr(), len) }.to_vec())
    }

    /// The screen's memory, at least `len` bytes (a larger one made, the old one freed once
    /// the next buffer completed), as a span to copy a presented surface into.
    pub(crate) fn screen_span(&self, len: u64) -> Result<crate::encode::Span> {
        let mut screen = lock(&self.screen);
        if screen.host.as_ref().is_none_or(|h| h.size < len) {
            let new = self.host_buffer(len)?;
            // Nothing copied into the new memory yet: `screen` reads it once the present
            // callback names the buffer that does.
            screen.fence = None;
            if let Some(old) = screen.host.replace(new) {
                // Copied into by submitted buffers only: a present flushes after its copy.
                let mut ic = lock(&self.ic);
                let next = ic.last_submitted + 1;
                ic.zombies.push((next, old));
            }
        }
        screen.len = len;
        let host = screen.host.as_ref().expect("made above");
        Ok(crate::encode::Span::upload(host.buffer, 0, len))
    }

    /// Whether an allocation is still live.
    pub fn is_allocated(&self, handle: AllocationHandle) -> bool {
        let table = self
            .allocations
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        table.contains_key(&handle.0.get())
    }

    /// Live allocations (0 after device destruction).
    pub fn live_allocations(&self) -> usize {
        let table = self
            .allocations
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        table.len()
    }

    /// Deallocated allocations whose memory waits for the timeline.
    pub fn zombie_allocations(&self) -> usize {
        lock(&self.ic).zombies.len()
    }

    /// Submits `cmds` signalling `fence` on the timeline (and waiting for the gate while the
    /// GPU is held).
    pub(crate) fn queue_submit(
        &self,
        cmds: &[vk::CommandBuffer],
        fence: u64,
        hold: Option<u64>,
    ) -> Result<()> {
        let signal = [self.timeline];
        let signal_values = [fence];
        let wait = [self.gate];
        let wait_values = [hold.unwrap_or(0)];
        let stages = [vk::PipelineStageFlags::ALL_COMMANDS];
        let mut timeline =
            vk::TimelineSemaphoreSubmitInfo::default().signal_semaphore_values(&signal_values);
        if hold.is_some() {
            timeline = timeline.wait_semaphore_values(&wait_values);
        }
        let mut submit = vk::SubmitInfo::default()
            .command_buffers(cmds)
            .signal_semaphores(&signal);
        if hold.is_some() {
            submit = submit.wait_semaphores(&wait).wait_dst_stage_mask(&stages);
        }
        let submit = submit.push_next(&mut timeline);
        let queue = lock(&self.queue);
        // SAFETY: the queue is externally synchronised by its lock
        // (VUID-vkQueueSubmit-queue-parameter host sync); every command buffer is executable,
        // was recorded from a pool of this queue's family and is a primary; the signal value
        // is greater than every value signalled before (fences grow,
        // VUID-VkSubmitInfo-pSignalSemaphores-03242); the value arrays match the semaphore
        // counts (VUID-VkSubmitInfo-pNext-03240, -03241).
        self.inject(Fault::Submit)
            .and_then(|()| unsafe {
                self.device
                    .queue_submit(*queue, &[submit], vk::Fence::null())
            })
            .map_err(|e| match e {
                vk::Result::ERROR_OUT_OF_HOST_MEMORY | vk::Result::ERROR_OUT_OF_DEVICE_MEMORY => {
                    Error::OutOfMemory
                }
                _ => Error::DeviceRemoved,
            })
    }

    /// Moves buffers the GPU completed back to the free lists, and frees memory whose
    /// deallocation waited for the timeline. Any thread: it frees memory and hands completed
    /// primaries to the immediate context's thread (which resets one before recording into
    /// it), but never touches the immediate context's command pool.
    pub(crate) fn retire(&self, ic: &mut IcQueue) {
        let done = self.completed();
        while ic.in_flight.front().is_some_and(|(f, _)| *f <= done) {
            let (_, closed) = ic.in_flight.pop_front().expect("checked");
            ic.free_primaries.push(closed.cmd);
            for mut chunk in closed.chunks {
                chunk.used = 0;
                if chunk.host.size == CHUNK_BYTES {
                    ic.free_chunks.push(chunk);
                } else {
                    self.free_host_buffer(chunk.host);
                }
            }
        }
        let mut at = 0;
        while at < ic.zombies.len() {
            if ic.zombies[at].0 <= done {
                let (_, host) = ic.zombies.swap_remove(at);
                self.free_host_buffer(host);
            } else {
                at += 1;
            }
        }
        let mut parked = lock(&self.parked);
        let mut at = 0;
        while at < parked.len() {
            if parked[at].0 <= done {
                let (_, list) = parked.swap_remove(at);
                crate::built::release_parked(self, *list);
            } else {
                at += 1;
            }
        }
    }

    /// Gives back upload chunks nobody reads any more (the GPU is done with them).
    pub(crate) fn give_back_chunks(&self, chunks: impl IntoIterator<Item = Chunk>) {
        let mut spare = lock(&self.spare_chunks);
        for mut chunk in chunks {
            chunk.used = 0;
            if chunk.host.size == CHUNK_BYTES && spare.len() < 64 {
                spare.push(chunk);
            } else {
                self.free_host_buffer(chunk.host);
            }
        }
    }

    /// A chunk of at least `len` bytes: a spare one, or new.
    pub(crate) fn new_chunk(&self, len: u64) -> Result<Chunk> {
        if len <= CHUNK_BYTES {
            if let Some(chunk) = lock(&self.spare_chunks).pop() {
                return Ok(chunk);
            }
        }
        Ok(Chunk {
            host: self.host_buffer(len.max(CHUNK_BYTES))?,
            used: 0,
        })
    }
}

impl Drop for VulkanWorld {
    fn drop(&mut self) {
        // A held GPU (a test that panicked before releasing it) would never go idle.
        self.release_gpu();
        // SAFETY: waiting for the device to go idle has no precondition but external
        // synchronisation of its queues: the queue lock is free (we own `self`).
        let _ = unsafe { self.device.device_wait_idle() };
        let ic = self.ic.get_mut().unwrap_or_else(PoisonError::into_inner);
        let mut hosts = Vec::new();
        hosts.extend(ic.free_chunks.drain(..).map(|c| c.host));
        for closed in ic.closed.drain(..) {
            hosts.extend(closed.chunks.into_iter().map(|c| c.host));
        }
        for (_, closed) in ic.in_flight.drain(..) {
            hosts.extend(closed.chunks.into_iter().map(|c| c.host));
        }
        hosts.extend(ic.zombies.drain(..).map(|(_, h)| h));
        let screen = self
            .screen
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        hosts.extend(screen.host.take());
        let pool = ic.pool;
        let spare = self
            .spare_chunks
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        hosts.extend(spare.drain(..).map(|c| c.host));
        let table = self
            .allocations
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        hosts.extend(table.drain().map(|(_, a)| a.memory));
        for host in hosts {
            self.free_host_buffer(host);
        }
        if let Some(compute) = self.compute.take() {
            compute.destroy(&self.device);
        }
        // SAFETY: the device is idle, so nothing is pending (VUID-vkDestroyCommandPool
        // -commandPool-00041, VUID-vkDestroySemaphore-semaphore-05149); every object made
        // from the device is destroyed before it (VUID-vkDestroyDevice-device-05137: the
        // deferred contexts' pools went with their last owner, which held this world), and
        // the messenger before the instance.
        unsafe {
            self.device.destroy_command_pool(pool, None);
            self.device.destroy_semaphore(self.timeline, None);
            self.device.destroy_semaphore(self.gate, None);
            self.device.destroy_device(None);
            if let Some((loader, m)) = self.debug.take() {
                loader.destroy_debug_utils_messenger(m, None);
            }
            self.instance.destroy_instance(None);
        }
    }
}
