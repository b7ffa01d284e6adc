//! The device: the free-threaded half of the engine (R-F1). A [`Device`] is a cheap clone
//! of a shared core; create and destroy are callable from any thread at once, lookups are
//! lock-free. Device destruction is [`crate::ImmediateContext::destroy_device`] (R-D3).

use std::sync::Arc;

use arc_swap::ArcSwap;
use crossbeam_epoch as epoch;
use crossbeam_utils::CachePadded;
use scopeguard::ScopeGuard;

use crate::caps::{MapCaps, ThreadingCaps};
use crate::context::command_list::ListData;
use crate::context::immediate::ImmediateContext;
use crate::desc::{ObjectDesc, QueryKind, ResourceDesc, ViewDesc};
use crate::driver::Driver;
use crate::dxgi::FrameStats;
use crate::error::{AppError, Error, Result};
use crate::handle::{
    AnyHandle, Handle, HandleSizeTable, HandleType, ObjectKind, Query, Resource, View,
};
use crate::kernel::{AllocationDesc, ContextId, DeferredId, Kernel};
use crate::list_mode::ListMode;
use crate::lists::list_clock::ListClock;
use crate::lists::recycle::DropStack;
use crate::primitive::{AtomicU32, AtomicU64, Ordering};
use crate::registry::retire::Clock;
use crate::registry::tag::DeviceTag;
use crate::registry::{NewEntry, ObjectRef, Registry};

/// Device-wide settings, fixed at creation. Made from [`DeviceConfig::default`] and the
/// `with_*` methods (new settings may come in later versions):
///
/// ```
/// use cmdlist::{Clock, DeviceConfig};
///
/// let config = DeviceConfig::default()
///     .with_retire_clock(Clock::Completed)
///     .with_deferred_budget(1 << 20);
/// assert!(config.recycle);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DeviceConfig {
    /// When destroyed objects' kernel memory is deallocated (R-D1, R-D4). Default
    /// [`Clock::Completed`].
    pub retire_clock: Clock,
    /// When a destroyed command list's memory may be recycled after the immediate context
    /// executed it (R-D1, R-R4): once the executing buffer was submitted, or once the GPU
    /// completed it (for a driver whose GPU reads the list's own memory). Default
    /// [`Clock::Completed`], which is right for every driver; [`Clock::Submitted`] recycles
    /// sooner where the driver copies a list into the buffer that executes it.
    pub list_clock: Clock,
    /// Use the driver's recycle hooks (R-R1..R-R7) when its caps include
    /// `COMMANDLISTS_BUILD_2`, and reuse list memory the same way without hooks when the
    /// engine emulates command lists. Off: a runtime without them, which destroys and
    /// creates command lists and deferred-context state every time.
    pub recycle: bool,
    /// Bytes a deferred context's recording may hold before it runs out of memory and is
    /// removed locally (R-E3): each operation counts [`crate::OPERATION_BYTES`], plus its
    /// payload (an update's data, a Map(DISCARD)'s whole resource). Default 64 MiB.
    pub deferred_budget: usize,
    /// The most operations executing one command list may replay, the lists it executes
    /// included (R-C3, R-E3). A list that executes another twice, which executes another
    /// twice, and so on, replays exponentially many operations from a few recorded ones: the
    /// recorded operation or deferred-context execute that would take a recording past this
    /// limit runs out of memory instead, so that no execute on the immediate context runs for
    /// ages. Default 2^22 (4,194,304): about a second of replay through a driver that spends
    /// 300 ns on an operation, a real driver's cost per draw (0.7 s for the mix of draws and
    /// Maps of `benches/frame.rs`; the engine alone replays that many in 21 ms,
    /// `benches/replay.rs`), and 200 times a frame of 10,000 draws with their Maps. A driver
    /// with cheaper or dearer operations sets its own.
    pub replay_limit: u64,
    /// The most allocations of one size the immediate context's rename pool keeps waiting
    /// for the GPU (R-M5): past it, a Map(DISCARD) whose pool has none the GPU is done with
    /// goes through the engine's bytes and the driver's copy ([`crate::Op::WriteDiscard`])
    /// instead of allocating another, so that a frame of thousands of small discards holds
    /// a bounded number of kernel allocations (each costs the kernel an allocation's
    /// overhead, and a Vulkan device allows a few thousand). Default 64; 0 never renames.
    pub rename_waiting: usize,
    /// Where every public call on the device and its contexts is recorded (feature
    /// `capture`, `docs/CAPTURE.md`); `None` (the default) records nothing.
    #[cfg(feature = "capture")]
    pub capture: Option<Arc<crate::capture::CaptureSink>>,
}

impl Default for DeviceConfig {
    fn default() -> Self {
        DeviceConfig {
            retire_clock: Clock::default(),
            list_clock: Clock::default(),
            recycle: true,
            deferred_budget: 64 << 20,
            replay_limit: 1 << 22,
            rename_waiting: 64,
            #[cfg(feature = "capture")]
            capture: None,
        }
    }
}

impl DeviceConfig {
    /// With [`DeviceConfig::retire_clock`] set (R-D1, R-D4).
    pub fn with_retire_clock(mut self, clock: Clock) -> Self {
        self.retire_clock = clock;
        self
    }

    /// With [`DeviceConfig::list_clock`] set (R-D1, R-R4).
    pub fn with_list_clock(mut self, clock: Clock) -> Self {
        self.list_clock = clock;
        self
    }

    /// With [`DeviceConfig::recycle`] set (R-R1..R-R7).
    pub fn with_recycle(mut self, recycle: bool) -> Self {
        self.recycle = recycle;
        self
    }

    /// With [`DeviceConfig::deferred_budget`] set, in bytes (R-E3).
    pub fn with_deferred_budget(mut self, bytes: usize) -> Self {
        self.deferred_budget = bytes;
        self
    }

    /// With [`DeviceConfig::replay_limit`] set (R-C3, R-E3).
    pub fn with_replay_limit(mut self, operations: u64) -> Self {
        self.replay_limit = operations;
        self
    }

    /// With [`DeviceConfig::rename_waiting`] set (R-M5).
    pub fn with_rename_waiting(mut self, allocations: usize) -> Self {
        self.rename_waiting = allocations;
        self
    }

    /// With [`DeviceConfig::capture`] set: every public call of the device made with this
    /// configuration, and of its contexts, is recorded to `sink` (feature `capture`).
    #[cfg(feature = "capture")]
    pub fn with_capture(mut self, sink: Arc<crate::capture::CaptureSink>) -> Self {
        self.capture = Some(sink);
        self
    }
}

/// The state every context and every thread shares. Its fields are private: what changes
/// after creation (the open buffer's number, the deferred contexts' count and numbers, the
/// trim epoch) changes only through the named operations below, each with its ordering.
pub(crate) struct DeviceShared<D: Driver, K: Kernel> {
    driver: D,
    kernel: K,
    registry: Registry<D>,
    /// The immediate context's open command-buffer number: the tag of a destroy (R-D1).
    /// Written by the IC at each flush, read by destroying threads.
    open_buffer: CachePadded<AtomicU64>,
    caps: ThreadingCaps,
    /// The Map types beyond D3D11.0's the driver serves (R-M3).
    map_caps: MapCaps,
    /// Who records and who executes command lists, decided at creation.
    mode: ListMode,
    handle_sizes: HandleSizeTable,
    config: DeviceConfig,
    /// Whether list memory is recycled, decided at creation from the config, the caps and
    /// the mode ([`DeviceShared::recycles`]): asked at every Finish and list drop.
    recycles: bool,
    /// The next deferred context's number.
    next_deferred_id: AtomicU32,
    /// Command lists ended for good while a buffer that executed them may still read their
    /// memory; the immediate context frees them once the list clock has passed.
    retired_lists: DropStack<ListData<D, K>>,
    /// Bumped by the IC each time it performs amortised processing; deferred contexts trim
    /// their pools when they see it change (R-A1). Read-mostly: a load at each Finish.
    trim_epoch: CachePadded<AtomicU64>,
    /// When executed command lists may be reused: published by the IC after each flush,
    /// asked by whoever recycles or frees a list; its policy is
    /// [`DeviceConfig::list_clock`].
    list_clock: ListClock,
    /// The newest frame's statistics: published by the IC at each present, read by any
    /// thread without locks.
    frame_stats: ArcSwap<FrameStats>,
    _tag: DeviceTag,
}

impl<D: Driver, K: Kernel> Drop for DeviceShared<D, K> {
    /// The device's last reference (its last context, command list or handle) is gone, on
    /// whichever thread let it go: the objects device destruction left to their holders
    /// (live deferred contexts, R-D3) are destroyed now, views first, each with its
    /// allocation, when nothing is left that could hand them to a hook.
    fn drop(&mut self) {
        let (driver, kernel) = (&self.driver, &self.kernel);
        self.registry.destroy_left(|entry, ic| {
            let allocation = entry.allocation();
            // The allocation goes even if the hook panics.
            let _deallocate = scopeguard::guard(allocation, |allocation| {
                if let Some(allocation) = allocation {
                    kernel.deallocate(allocation);
                }
            });
            driver.destroy_object(entry.ty(), entry.object(), &mut ic.data);
        });
    }
}

impl<D: Driver, K: Kernel> DeviceShared<D, K> {
    pub(crate) fn driver(&self) -> &D {
        &self.driver
    }

    pub(crate) fn kernel(&self) -> &K {
        &self.kernel
    }

    pub(crate) fn registry(&self) -> &Registry<D> {
        &self.registry
    }

    /// The Map types beyond D3D11.0's the driver serves (R-M3).
    pub(crate) fn map_caps(&self) -> MapCaps {
        self.map_caps
    }

    pub(crate) fn config(&self) -> &DeviceConfig {
        &self.config
    }

    pub(crate) fn handle_sizes(&self) -> &HandleSizeTable {
        &self.handle_sizes
    }

    pub(crate) fn list_clock(&self) -> &ListClock {
        &self.list_clock
    }

    pub(crate) fn retired_lists(&self) -> &DropStack<ListData<D, K>> {
        &self.retired_lists
    }

    /// The newest frame's statistics.
    pub(crate) fn frame_stats(&self) -> Arc<FrameStats> {
        self.frame_stats.load_full()
    }

    /// Publishes a frame's statistics (the immediate context, at a present); returns the
    /// ones it replaces.
    pub(crate) fn publish_frame_stats(&self, stats: Arc<FrameStats>) -> Arc<FrameStats> {
        self.frame_stats.swap(stats)
    }

    /// The open buffer's number, as a destroy tags itself with it (R-D1). SeqCst, after the
    /// destroy's SeqCst mark: pairs with [`DeviceShared::publish_open_buffer`].
    pub(crate) fn open_buffer(&self) -> u64 {
        self.open_buffer.load(Ordering::SeqCst)
    }

    /// The immediate context opened buffer `number` (after submitting the one before).
    /// SeqCst: a destroy that marked its object before this store reads the old number, one
    /// that reads the new number marked after it, so no destroy is tagged with a buffer
    /// that was already submitted while still referencing the object.
    pub(crate) fn publish_open_buffer(&self, number: u64) {
        self.open_buffer.store(number, Ordering::SeqCst);
    }

    /// The number of a deferred context being created.
    pub(crate) fn next_deferred_id(&self) -> DeferredId {
        DeferredId::new(self.next_deferred_id.fetch_add(1, Ordering::Relaxed))
    }

    /// A deferred context came to life (its driver state exists): counted in the registry's
    /// [`Removal`](crate::registry::removal::Removal), which device destruction asks whether
    /// a context may still close handles (R-H2) or hear the objects it holds (R-D3).
    pub(crate) fn deferred_alive(&self) {
        self.registry.removal().context_alive();
    }

    /// A deferred context is gone (its handles closed, its state destroyed).
    pub(crate) fn deferred_gone(&self) {
        self.registry.removal().context_gone();
    }

    /// Whether a deferred context is alive.
    pub(crate) fn has_live_deferred(&self) -> bool {
        self.registry.removal().contexts_alive()
    }

    /// How many times the immediate context asked the deferred contexts to trim (R-A1).
    pub(crate) fn trim_epoch(&self) -> u64 {
        self.trim_epoch.load(Ordering::Relaxed)
    }

    /// Asks every deferred context to trim its pools at its next Finish (R-A1). Relaxed: a
    /// trim is a hint, and a context that sees the bump a Finish late loses nothing.
    pub(crate) fn ask_deferred_to_trim(&self) {
        self.trim_epoch.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether list memory is recycled: through the recycle hooks (R-R7), where the config
    /// asks for it and the driver's caps have `COMMANDLISTS_BUILD_2`, or, emulating, without
    /// them.
    #[inline]
    pub(crate) fn recycles(&self) -> bool {
        self.recycles
    }

    /// Whether the engine emulates deferred contexts (the driver's caps lack
    /// `COMMANDLISTS`): no deferred-context or command-list hook is ever called.
    #[inline]
    pub(crate) fn emulates_lists(&self) -> bool {
        self.mode == ListMode::Emulated
    }

    /// Who records and who executes command lists.
    #[inline]
    pub(crate) fn mode(&self) -> ListMode {
        self.mode
    }
}

/// A device: `Send + Sync` and cheap to clone; every clone is the same device.
///
/// Free-threaded entry points (any thread, several at once, R-F1): [`Device::create`] and its
/// typed forms, [`Device::destroy`], [`Device::object`]. Primaries are created and destroyed
/// on the immediate context instead (R-P1).
///
/// Two threads create at once; the destroys are queued and done by the immediate context
/// at its flush (R-D1, R-D2), with the null driver of `soft::null`:
///
/// ```
/// # #[cfg(feature = "soft")] {
/// use cmdlist::soft::null::null_device;
/// use cmdlist::{DeviceConfig, ResourceDesc};
///
/// let (device, mut ic) = null_device(DeviceConfig::default())?;
/// let desc = ResourceDesc { byte_size: 64, ..Default::default() };
/// let created = std::thread::scope(|s| {
///     let workers: Vec<_> = (0..2)
///         .map(|_| s.spawn(|| device.create_resource(desc)))
///         .collect();
///     workers.into_iter().map(|w| w.join().unwrap()).collect::<Result<Vec<_>, _>>()
/// })?;
/// for resource in created {
///     device.destroy(resource)?;
/// }
/// assert_eq!(ic.retire_stats().destroyed, 0, "queued, not yet destroyed");
/// ic.flush()?;
/// assert_eq!(ic.retire_stats().destroyed, 2);
/// # }
/// # Ok::<(), cmdlist::Error>(())
/// ```
pub struct Device<D: Driver, K: Kernel> {
    pub(crate) shared: Arc<DeviceShared<D, K>>,
}

/// The device's mode, caps and deferred contexts, not the driver's or kernel's state.
impl<D: Driver, K: Kernel> core::fmt::Debug for Device<D, K> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Device")
            .field("list_mode", &self.shared.mode())
            .field("caps", &self.shared.caps)
            .field("removed", &self.is_removed())
            .field("open_buffer", &self.shared.open_buffer())
            .finish_non_exhaustive()
    }
}

impl<D: Driver, K: Kernel> Clone for Device<D, K> {
    fn clone(&self) -> Self {
        Device {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<D: Driver, K: Kernel> Device<D, K> {
    /// Creates a device and its immediate context, on the thread that will drive the
    /// immediate context. Asks the driver's threading caps (checked: `COMMANDLISTS_BUILD_2`
    /// needs `COMMANDLISTS`) and its handle-size table in two polls (R-H4).
    pub fn new(
        driver: D,
        kernel: K,
        config: DeviceConfig,
    ) -> Result<(Self, ImmediateContext<D, K>)> {
        let caps = driver.threading_caps().validate()?;
        let map_caps = driver.map_caps();
        // Without command-list support the driver has no context-local handles to size.
        let handle_sizes = if caps.contains(ThreadingCaps::COMMANDLISTS) {
            HandleSizeTable::from_two_polls(|out| driver.check_deferred_context_handle_sizes(out))?
        } else {
            HandleSizeTable::default()
        };
        let mode = match (
            caps.contains(ThreadingCaps::COMMANDLISTS),
            driver.builds_command_lists(),
        ) {
            (false, _) => ListMode::Emulated,
            (true, false) => ListMode::Replayed,
            (true, true) => ListMode::DriverBuilt,
        };
        let list_clock = config.list_clock;
        let tag = DeviceTag::acquire()?;
        let imm = driver.create_immediate()?;
        let registry = Registry::new(tag.tag(), tag.first_generation());
        let device = Device {
            shared: Arc::new(DeviceShared {
                driver,
                kernel,
                registry,
                open_buffer: CachePadded::new(AtomicU64::new(1)),
                caps,
                map_caps,
                mode,
                handle_sizes,
                recycles: config.recycle
                    && (caps.contains(ThreadingCaps::COMMANDLISTS_BUILD_2)
                        || mode == ListMode::Emulated),
                config,
                next_deferred_id: AtomicU32::new(0),
                retired_lists: DropStack::new(),
                trim_epoch: CachePadded::new(AtomicU64::new(0)),
                list_clock: ListClock::new(list_clock),
                frame_stats: ArcSwap::from_pointee(FrameStats::default()),
                _tag: tag,
            }),
        };
        let ic = ImmediateContext::new(device.clone(), imm);
        Ok((device, ic))
    }

    /// The newest frame's statistics, published by the immediate context at each present
    /// (all zero before the first): any thread, without locks and without ever blocking the
    /// immediate context (arc-swap).
    pub fn frame_stats(&self) -> Arc<FrameStats> {
        self.shared.frame_stats()
    }

    /// The driver.
    pub fn driver(&self) -> &D {
        self.shared.driver()
    }

    /// The kernel.
    pub fn kernel(&self) -> &K {
        self.shared.kernel()
    }

    /// The driver's threading caps, as validated at creation.
    pub fn caps(&self) -> ThreadingCaps {
        self.shared.caps
    }

    /// Whether the engine emulates deferred contexts and command lists for this driver: its
    /// caps lack `COMMANDLISTS`, so it implements the immediate context only. Deferred
    /// contexts then record without any deferred-context or command-list hook, and lists
    /// replay through the immediate context's [`crate::Driver::execute`] alone, as the D3D11
    /// runtime does for such drivers.
    pub fn emulates_command_lists(&self) -> bool {
        self.shared.emulates_lists()
    }

    /// Who records command lists and who executes them, as decided at creation from the
    /// driver's caps and [`crate::Driver::builds_command_lists`] (see [`ListMode`]).
    pub fn list_mode(&self) -> ListMode {
        self.shared.mode()
    }

    /// The handle-size table the driver answered at creation (R-H4).
    pub fn handle_sizes(&self) -> &HandleSizeTable {
        self.shared.handle_sizes()
    }

    /// The device's settings.
    pub fn config(&self) -> &DeviceConfig {
        self.shared.config()
    }

    /// Whether the device was destroyed (every call then fails with
    /// [`Error::DeviceRemoved`]).
    pub fn is_removed(&self) -> bool {
        self.shared.registry().is_removed()
    }

    /// Reports `error` on `context` through the kernel's set-error callback (R-E2) and
    /// returns it.
    pub(crate) fn report<T>(&self, context: ContextId, result: Result<T>) -> Result<T> {
        if let Err(error) = result {
            self.shared.kernel().set_error(context, error);
        }
        result
    }

    /// Creates an object (free-threaded, R-F1). Primaries go through
    /// [`ImmediateContext::create_primary`] instead (R-P1). Errors are returned and reported
    /// on the immediate context's sink (R-E2).
    pub fn create(&self, desc: &ObjectDesc<'_>) -> Result<AnyHandle> {
        let result = if desc.is_primary() {
            Err(AppError::PrimaryMismatch.into())
        } else {
            self.create_object(desc)
        };
        #[cfg(feature = "capture")]
        if let Some(sink) = self.capture_sink() {
            let made = result.as_ref().map_or(0, |h| h.to_bits());
            let call = crate::capture::Call::Create { desc: *desc, made };
            sink.device_call(call, (&result).into());
        }
        self.report(ContextId::Immediate, result)
    }

    /// The device's capture, if it records one.
    #[cfg(feature = "capture")]
    pub(crate) fn capture_sink(&self) -> Option<&Arc<crate::capture::CaptureSink>> {
        self.shared.config.capture.as_ref()
    }

    /// Creates a resource (free-threaded, R-F1).
    pub fn create_resource(&self, desc: ResourceDesc) -> Result<Handle<Resource>> {
        self.create(&ObjectDesc::Resource(desc)).map(|h| h.cast())
    }

    /// Creates a view of type `ty` (free-threaded, R-F1); it holds its resource until it is
    /// destroyed itself (R-H3).
    pub fn create_view(&self, ty: HandleType, desc: ViewDesc) -> Result<Handle<View>> {
        self.create(&ObjectDesc::View { ty, desc })
            .map(|h| h.cast())
    }

    /// Creates a query (free-threaded, R-F1).
    pub fn create_query(&self, kind: QueryKind) -> Result<Handle<Query>> {
        self.create(&ObjectDesc::Query(kind)).map(|h| h.cast())
    }

    /// The creation steps shared by free-threaded objects and primaries. Each step that
    /// takes something (the dependency's hold, a slot, kernel memory, the driver's object)
    /// is guarded, so a later failure or a hook that panics gives it back, in reverse order,
    /// on this thread: the object was never visible to anyone.
    pub(crate) fn create_object(&self, desc: &ObjectDesc<'_>) -> Result<AnyHandle> {
        let s = &*self.shared;
        let _creating = s.registry().begin_create()?;
        if !desc.is_well_formed() {
            return Err(AppError::OutOfRange.into());
        }
        let guard = epoch::pin();
        // A view holds its resource from before the driver sees it until the view is really
        // destroyed (R-H3), so the resource cannot be destroyed under the driver's create.
        let dependency = match desc.dependency() {
            Some(dep) => {
                let missing = Error::from(AppError::MissingDependency);
                let held = match s.registry().live(dep, &guard) {
                    Ok(r) if r.entry().hold() => r,
                    Err(Error::DeviceRemoved) => return Err(Error::DeviceRemoved),
                    _ => return Err(missing),
                };
                Some(scopeguard::guard(held, |r| r.entry().release()))
            }
            None => None,
        };
        let slot = s.registry().reserve()?;
        let size = s.driver().calc_private_size(desc);
        let allocation = match size {
            0 => None,
            size => {
                let allocation = s.kernel().allocate(&AllocationDesc {
                    size: size as u64,
                    shared: desc.is_shared(),
                    primary: desc.is_primary(),
                })?;
                // No command buffer ever referenced it: given back on this thread.
                Some(scopeguard::guard(allocation, |a| s.kernel().deallocate(a)))
            }
        };
        let ty = desc.handle_type();
        let created = s.driver().create_object(
            desc,
            allocation.as_deref().copied(),
            dependency.as_deref().map(|d| d.object()),
        )?;
        let created = scopeguard::guard(created, |(object, mut ic_data)| {
            s.driver().destroy_object(ty, &object, &mut ic_data)
        });
        // R-H4: once the object exists, ask the size of its context-local handles; a size the
        // table does not list fails where it would be used (opening a handle, InvalidArg).
        // Emulated deferred contexts open none.
        let local_class = match s.emulates_lists() {
            true => None,
            false => {
                let local_size = s
                    .driver()
                    .calc_deferred_context_handle_size(ty, Some(&created.0));
                s.handle_sizes().size_class(ty, local_size)
            }
        };
        // Nothing fails from here on: the guards are defused and the object is linked.
        let (object, ic_data) = ScopeGuard::into_inner(created);
        let handle = s.registry().link(
            slot,
            NewEntry {
                ty,
                primary: desc.is_primary(),
                // A shared or primary allocation is the one other devices or the display
                // know: never renamed.
                allocation_size: match allocation {
                    Some(_) if !desc.is_shared() && !desc.is_primary() => size as u64,
                    _ => 0,
                },
                allocation: allocation.map(ScopeGuard::into_inner),
                dependency: desc.dependency().map(Handle::any),
                byte_size: match desc {
                    ObjectDesc::Resource(r) => r.byte_size,
                    _ => 0,
                },
                local_class,
                bind: match desc {
                    ObjectDesc::Resource(r) => r.bind,
                    _ => crate::desc::BindFlags::empty(),
                },
                usage: match desc {
                    ObjectDesc::Resource(r) => r.usage,
                    _ => crate::desc::Usage::Default,
                },
                texture: match desc {
                    ObjectDesc::Resource(r) => r.texture,
                    _ => None,
                },
                appendable: match desc {
                    ObjectDesc::Resource(r) => r.takes_no_overwrite(s.map_caps()),
                    _ => false,
                },
                object,
                ic_data,
            },
        );
        if let Some(held) = dependency {
            ScopeGuard::into_inner(held); // the view keeps the hold until really destroyed
        }
        // Device destruction waits for this create to end, then drains what it linked.
        if s.registry().is_removed() {
            return Err(Error::DeviceRemoved);
        }
        Ok(handle)
    }

    /// Destroys an object (free-threaded, R-F1, R-D1): marks it destroyed, tags it with the
    /// immediate context's open buffer and queues it; the real destruction happens in a
    /// later [`ImmediateContext::flush`] (R-D2). No lock, no allocation. With a valid handle
    /// it cannot fail but for [`Error::DeviceRemoved`]; a stale, forged, other-device or
    /// already-destroyed handle is an application error (R-E1), as is a primary (R-P1).
    pub fn destroy<T: ObjectKind>(&self, handle: Handle<T>) -> Result<()> {
        let result = self.destroy_object(handle);
        #[cfg(feature = "capture")]
        if let Some(sink) = self.capture_sink() {
            let call = crate::capture::Call::Destroy(handle.any());
            sink.device_call(call, (&result).into());
        }
        self.report(ContextId::Immediate, result)
    }

    fn destroy_object<T: ObjectKind>(&self, handle: Handle<T>) -> Result<()> {
        let s = &*self.shared;
        let guard = epoch::pin();
        let entry = s.registry().find(handle, &guard)?;
        if !entry.is_live() {
            return Err(AppError::DoubleDestroy.into());
        }
        if entry.is_primary() {
            return Err(AppError::PrimaryMismatch.into());
        }
        if !entry.mark_destroyed() {
            return Err(AppError::DoubleDestroy.into());
        }
        let tag = s.open_buffer();
        let index = handle.slot();
        let slot = s.registry().slot(index).expect("a found entry has a slot");
        slot.retire_tag.store(tag, Ordering::Relaxed);
        s.registry().retired.push(index, |i| {
            &s.registry().slot(i).expect("slot exists").next_retired
        });
        Ok(())
    }

    /// The live object `handle` names, from any thread, lock-free. The returned reference
    /// keeps the CPU epoch pinned: hold it briefly.
    pub fn object<T: ObjectKind>(&self, handle: Handle<T>) -> Result<ObjectRef<D>> {
        let device: Arc<dyn Send + Sync> = self.shared.clone();
        self.shared.registry().get(handle, device)
    }

    /// `handle` as a handle of kind `U`, if it names a live object of that kind: what a shim
    /// that keeps untyped handles (one DDI handle type for several kinds) needs before a typed
    /// entry point. A handle of another kind is [`AppError::WrongType`]; a stale, forged,
    /// destroyed or other-device one is the application error a lookup gives (R-E1).
    ///
    /// ```
    /// # #[cfg(feature = "soft")] {
    /// # use cmdlist::soft::{self, SoftConfig};
    /// # use cmdlist::{AppError, DeviceConfig, Error, ResourceDesc, handle::{Query, Resource}};
    /// # let (device, _ic, _world) = soft::device(SoftConfig::default(), DeviceConfig::default())?;
    /// let any = device.create_resource(ResourceDesc::default())?.any();
    /// let resource = device.typed::<Resource>(any)?;
    /// assert_eq!(resource.any(), any);
    /// assert_eq!(device.typed::<Query>(any), Err(Error::Application(AppError::WrongType)));
    /// # }
    /// # Ok::<(), cmdlist::Error>(())
    /// ```
    pub fn typed<U: ObjectKind>(&self, handle: AnyHandle) -> Result<Handle<U>> {
        let guard = epoch::pin();
        self.shared.registry().live(handle.cast::<U>(), &guard)?;
        Ok(handle.cast())
    }
}
