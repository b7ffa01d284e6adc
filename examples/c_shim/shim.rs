//! The shim: the DDI entry points as `extern "system"` functions over `cmdlist`.
//!
//! Three things a C caller cannot get from the type system, the shim keeps itself:
//!
//! - **The handle table.** The runtime allocates every object's memory, of the size the
//!   shim's CalcPrivate*Size answered, and passes it back with each call. The shim writes
//!   the Rust object into it: an `Arc` of the shim's device state into the device's, a
//!   [`ContextSlot`] (the `DeferredContext` behind a lock) into a deferred context's, an
//!   `Arc<CommandList>` into a command list's. Command-list memory is read only while the
//!   device's table of live lists holds its address, so a list destroyed, forged or never
//!   made is the application's error, never undefined behaviour. Resources need no table:
//!   their memory holds `Handle::to_bits`, which the engine checks at every use.
//! - **One thread per context.** A context's calls take its lock with `try_lock`; a second
//!   thread inside the same context is the application's error.
//! - **The panic boundary.** Every entry point runs the engine (and so the driver's hooks)
//!   inside `catch_unwind`: a panic never unwinds across `extern "system"` (it would abort
//!   the process). The engine stays sound after a caught panic (`cmdlist::Driver`'s docs,
//!   "When a hook panics"), and nobody has reported it yet: where the entry point returns an
//!   `HRESULT` the shim returns `E_FAIL`, elsewhere it reports `D3DDDIERR_DEVICEREMOVED`
//!   through the context's pfnSetErrorCb (what the driver half did cannot be trusted).
//!
//! Errors the engine returns it has already sent to `Kernel::set_error` (R-E2), which here is
//! pfnSetErrorCb on the failing call's context: the shim does not report them again.

use std::collections::{HashMap, HashSet};
use std::ffi::c_void;
use std::mem::size_of;
use std::num::NonZeroU64;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use cmdlist::handle::Resource;
use cmdlist::{
    AllocationDesc, AllocationHandle, AppError, BindClass, BindFlags, BindPoint, CommandList,
    ContextId, DeferredContext, DeferredId, Device, DeviceConfig, Error, Handle, ImmediateContext,
    Kernel, ResourceDesc, Result, Submission, Usage,
};

use crate::ddi::*;
use crate::driver::{Draw, ShimDriver};

type ShimList = CommandList<ShimDriver, ShimKernel>;

/// What one entry point's engine call came to.
enum Outcome<T> {
    Done(T),
    /// Returned by the engine (or refused by the shim), and already reported (R-E2).
    Failed(Error),
    /// A hook or the engine panicked; nobody has reported it yet.
    Panicked,
}

fn guarded<T>(call: impl FnOnce() -> Result<T>) -> Outcome<T> {
    // The engine stays sound after a panic (the `Driver` docs, "When a hook panics").
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(Ok(value)) => Outcome::Done(value),
        Ok(Err(error)) => Outcome::Failed(error),
        Err(_) => Outcome::Panicked,
    }
}

/// The DDI's code for an engine error (docs/EMBEDDING.md, "Errors").
fn hresult(error: Error) -> HRESULT {
    match error {
        Error::OutOfMemory => E_OUTOFMEMORY,
        Error::InvalidArg => E_INVALIDARG,
        Error::Application(_) => D3DDDIERR_APPLICATIONERROR,
        Error::DeviceRemoved => D3DDDIERR_DEVICEREMOVED,
        Error::Unsupported => DXGI_DDI_ERR_UNSUPPORTED,
        Error::WasStillDrawing => DXGI_DDI_ERR_WASSTILLDRAWING,
        // `Error` is non-exhaustive.
        _ => E_FAIL,
    }
}

/// The kernel: the runtime's callbacks. Submits through pfnRenderCb, reports through
/// pfnSetErrorCb on the context's core layer; its GPU completes each buffer at once.
pub struct ShimKernel {
    rt_device: D3D10DDI_HRTDEVICE,
    render: PFND3DDDI_RENDERCB,
    set_error: PFND3D10DDI_SETERROR_CB,
    device_layer: D3D10DDI_HRTCORELAYER,
    context_layers: Mutex<HashMap<u32, D3D10DDI_HRTCORELAYER>>,
    /// The buffer the driver's flush closed.
    closed: Arc<Mutex<Vec<u32>>>,
    next_allocation: AtomicU64,
    completed: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every engine call runs inside `catch_unwind` below the locks, so no lock is poisoned
    // by a hook; a poisoned one still holds consistent data.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl ShimKernel {
    /// pfnSetErrorCb on `context`'s core layer.
    fn report(&self, context: ContextId, hr: HRESULT) {
        let layer = match context {
            ContextId::Deferred(id) => lock(&self.context_layers).get(&id.get()).copied(),
            ContextId::Immediate => None,
        };
        let layer = layer.unwrap_or(self.device_layer);
        // SAFETY: the runtime gave pfnSetErrorCb and the core layers at CreateDevice and
        // CreateDeferredContext, valid until the device (or the context) is destroyed, and
        // the shim reports nothing on a context after its destroy.
        unsafe { (self.set_error)(layer, hr) }
    }
}

impl Kernel for ShimKernel {
    fn allocate(&self, _desc: &AllocationDesc) -> Result<AllocationHandle> {
        let id = self.next_allocation.fetch_add(1, Ordering::Relaxed) + 1;
        NonZeroU64::new(id)
            .map(AllocationHandle)
            .ok_or(Error::OutOfMemory)
    }

    fn deallocate(&self, _allocation: AllocationHandle) {}

    fn submit(&self, submission: &Submission<'_>) -> Result<()> {
        let mut closed = lock(&self.closed);
        let length = closed.len().checked_mul(4).ok_or(Error::OutOfMemory)?;
        let mut render = D3DDDICB_RENDER {
            CommandLength: UINT::try_from(length).map_err(|_| Error::OutOfMemory)?,
            pCommandBuffer: closed.as_ptr().cast(),
        };
        // SAFETY: pfnRenderCb came from CreateDevice and is valid for the device's life;
        // `render` and the words it points to outlive the call.
        let hr = unsafe { (self.render)(self.rt_device.handle, &mut render) };
        if hr < 0 {
            // The buffer stays open and is submitted again at the next flush.
            return Err(Error::DeviceRemoved);
        }
        closed.clear();
        self.completed.store(submission.fence, Ordering::Release);
        Ok(())
    }

    fn completed_fence(&self) -> u64 {
        self.completed.load(Ordering::Acquire)
    }

    fn wait_for_fence(&self, _fence: u64) -> Result<()> {
        Ok(())
    }

    fn set_error(&self, context: ContextId, error: Error) {
        self.report(context, hresult(error));
    }

    fn perform_amortized_processing(&self, _context: ContextId) {}
}

/// What the device's memory holds (behind an `Arc`, which each context shares).
struct ShimDevice {
    device: Device<ShimDriver, ShimKernel>,
    /// The immediate context, behind a lock: the DDI gives it one thread at a time (R-T1).
    ic: Mutex<Option<ImmediateContext<ShimDriver, ShimKernel>>>,
    /// The handle table: addresses of command-list memory that holds a live list.
    lists: Mutex<HashSet<usize>>,
}

impl ShimDevice {
    /// Reports an error the engine did not (a refusal of the shim's, or a panic).
    fn refuse(&self, context: ContextId, error: Error) -> Error {
        self.device.kernel().set_error(context, error);
        error
    }

    /// A call of a void entry point on the immediate context.
    fn on_ic(
        &self,
        call: impl FnOnce(&mut ImmediateContext<ShimDriver, ShimKernel>) -> Result<()>,
    ) {
        let mut ic = lock(&self.ic);
        let outcome = match ic.as_mut() {
            Some(ic) => guarded(|| call(ic)),
            None => Outcome::Failed(self.refuse(ContextId::Immediate, Error::DeviceRemoved)),
        };
        self.finish_void(ContextId::Immediate, outcome);
    }

    /// The end of a void entry point: a panic goes to pfnSetErrorCb.
    fn finish_void<T>(&self, context: ContextId, outcome: Outcome<T>) {
        if let Outcome::Panicked = outcome {
            self.device
                .kernel()
                .report(context, D3DDDIERR_DEVICEREMOVED);
        }
    }

    /// The live list in `memory`, if the table holds it.
    fn list(&self, memory: *mut c_void) -> Option<Arc<ShimList>> {
        let lists = lock(&self.lists);
        if !lists.contains(&(memory as usize)) {
            return None;
        }
        // SAFETY: the table holds the address only while the memory holds the list
        // `finish_into` wrote (it is removed, under this lock, before the list is taken out).
        Some(Arc::clone(unsafe { &*memory.cast::<Arc<ShimList>>() }))
    }

    /// Takes the live list out of `memory` and out of the table.
    fn take_list(&self, memory: *mut c_void) -> Option<Arc<ShimList>> {
        let mut lists = lock(&self.lists);
        if !lists.remove(&(memory as usize)) {
            return None;
        }
        // SAFETY: as in `list`; the memory holds no list from here on.
        Some(unsafe { memory.cast::<Arc<ShimList>>().read() })
    }
}

/// What a deferred context's memory holds.
pub struct ContextSlot {
    device: Arc<ShimDevice>,
    id: DeferredId,
    recording: Mutex<Recording>,
}

struct Recording {
    dc: DeferredContext<ShimDriver, ShimKernel>,
    /// The C side's buffers of the open Maps (docs/EMBEDDING.md, "Mapped memory").
    maps: Vec<(Handle<Resource>, Vec<u8>)>,
}

impl Recording {
    /// Unmap: C's bytes become the resource's new contents.
    fn unmap(&mut self, resource: Handle<Resource>, bytes: &[u8]) -> Result<()> {
        let memory = self.dc.map_discard(resource)?;
        let len = memory.len().min(bytes.len());
        memory[..len].copy_from_slice(&bytes[..len]);
        self.dc.unmap(resource)
    }
}

impl ContextSlot {
    fn context(&self) -> ContextId {
        ContextId::Deferred(self.id)
    }

    fn refuse(&self, error: Error) -> Error {
        self.device.refuse(self.context(), error)
    }

    /// Runs `call` on the recording, one thread at a time, inside the panic boundary.
    fn record<T>(&self, call: impl FnOnce(&mut Recording) -> Result<T>) -> Outcome<T> {
        let mut recording = match self.recording.try_lock() {
            Ok(recording) => recording,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                let busy = Error::Application(AppError::InvalidState);
                return Outcome::Failed(self.refuse(busy));
            }
        };
        guarded(|| call(&mut recording))
    }

    fn record_void(&self, call: impl FnOnce(&mut Recording) -> Result<()>) {
        let outcome = self.record(call);
        self.device.finish_void(self.context(), outcome);
    }

    /// FinishCommandList into the runtime's command-list memory.
    fn finish_into(&self, list: D3D11DDI_HCOMMANDLIST) -> Outcome<()> {
        let memory = list.pDrvPrivate;
        if memory.is_null() || !memory.cast::<Arc<ShimList>>().is_aligned() {
            return Outcome::Failed(self.refuse(Error::InvalidArg));
        }
        let device = &self.device;
        self.record(|recording| {
            // What is still mapped is unmapped first (R-C4), with C's bytes.
            for (resource, bytes) in std::mem::take(&mut recording.maps) {
                recording.unmap(resource, &bytes)?;
            }
            let list = Arc::new(recording.dc.finish()?);
            let mut lists = lock(&device.lists);
            if !lists.insert(memory as usize) {
                // The memory holds a live list: the runtime's error. Dropping `list` here
                // is its destroy.
                return Err(device.refuse(self.context(), Error::InvalidArg));
            }
            // SAFETY: the runtime's memory of CalcPrivateCommandListSize bytes (the size of
            // this `Arc`), aligned (checked above), holding no live list (the table did not
            // have it).
            unsafe { memory.cast::<Arc<ShimList>>().write(list) };
            Ok(())
        })
    }
}

/// The resource handle a resource's memory holds (`Handle::to_bits`); `None` for a null
/// handle or one that holds none.
///
/// # Safety
/// A non-null `resource` is memory of CalcPrivateResourceSize bytes the runtime allocated.
unsafe fn resource_of(resource: D3D10DDI_HRESOURCE) -> Option<Handle<Resource>> {
    let memory = resource.pDrvPrivate.cast::<u64>();
    if memory.is_null() {
        return None;
    }
    // SAFETY: the caller's contract: 8 readable bytes, any alignment.
    Handle::from_bits(unsafe { memory.read_unaligned() })
}

/// The device state behind an immediate-context handle.
///
/// # Safety
/// `device` is the handle CreateDevice filled, not yet destroyed (the runtime's contract).
unsafe fn device_of<'a>(device: D3D10DDI_HDEVICE) -> Option<&'a Arc<ShimDevice>> {
    // SAFETY: the caller's contract; null is refused.
    unsafe { device.pDrvPrivate.cast::<Arc<ShimDevice>>().as_ref() }
}

/// The deferred context behind a context handle.
///
/// # Safety
/// `context` is the handle CreateDeferredContext filled, not yet destroyed.
unsafe fn context_of<'a>(context: D3D10DDI_HDEVICE) -> Option<&'a ContextSlot> {
    // SAFETY: the caller's contract; null is refused.
    unsafe { context.pDrvPrivate.cast::<ContextSlot>().as_ref() }
}

// ---- The adapter --------------------------------------------------------------------------

/// The UMD's export: fills the adapter's function table. (A driver DLL exports it with
/// `#[no_mangle]`.)
///
/// # Safety
/// `args` is null or points to the runtime's `D3D10DDIARG_OPENADAPTER`, whose
/// `pAdapterFuncs` is null or writable.
#[allow(non_snake_case)]
pub unsafe extern "system" fn OpenAdapter10_2(args: *mut D3D10DDIARG_OPENADAPTER) -> HRESULT {
    // SAFETY: the function's contract.
    let Some(args) = (unsafe { args.as_mut() }) else {
        return E_INVALIDARG;
    };
    // SAFETY: as above.
    let Some(funcs) = (unsafe { args.pAdapterFuncs.as_mut() }) else {
        return E_INVALIDARG;
    };
    *funcs = D3D10DDI_ADAPTERFUNCS {
        pfnCalcPrivateDeviceSize: Some(calc_private_device_size),
        pfnCreateDevice: Some(create_device),
    };
    S_OK
}

unsafe extern "system" fn calc_private_device_size(
    _adapter: D3D10DDI_HADAPTER,
    _args: *const D3D10DDIARG_CALCPRIVATEDEVICESIZE,
) -> SIZE_T {
    size_of::<Arc<ShimDevice>>()
}

/// CreateDevice → `Device::new`, on the thread that will drive the immediate context.
unsafe extern "system" fn create_device(
    _adapter: D3D10DDI_HADAPTER,
    args: *mut D3D10DDIARG_CREATEDEVICE,
) -> HRESULT {
    // SAFETY: the runtime passes its D3D10DDIARG_CREATEDEVICE, whose callback tables live as
    // long as the device.
    let Some(args) = (unsafe { args.as_mut() }) else {
        return E_INVALIDARG;
    };
    // SAFETY: as above.
    let render = unsafe { args.pKTCallbacks.as_ref() }.and_then(|c| c.pfnRenderCb);
    // SAFETY: as above.
    let set_error = unsafe { args.p11UMCallbacks.as_ref() }.and_then(|c| c.pfnSetErrorCb);
    let memory = args.hDrvDevice.pDrvPrivate.cast::<Arc<ShimDevice>>();
    let (Some(render), Some(set_error)) = (render, set_error) else {
        return E_INVALIDARG;
    };
    if memory.is_null() || !memory.is_aligned() || args.p11DeviceFuncs.is_null() {
        return E_INVALIDARG;
    }
    let closed = Arc::new(Mutex::new(Vec::new()));
    let kernel = ShimKernel {
        rt_device: args.hRTDevice,
        render,
        set_error,
        device_layer: args.hRTCoreLayer,
        context_layers: Mutex::default(),
        closed: Arc::clone(&closed),
        next_allocation: AtomicU64::new(0),
        completed: AtomicU64::new(0),
    };
    let driver = ShimDriver::new(closed);
    // `Device::new`'s error is returned, never reported.
    match guarded(|| Device::new(driver, kernel, DeviceConfig::default())) {
        Outcome::Done((device, ic)) => {
            let state = Arc::new(ShimDevice {
                device,
                ic: Mutex::new(Some(ic)),
                lists: Mutex::default(),
            });
            // SAFETY: the runtime's memory of CalcPrivateDeviceSize bytes, aligned (checked);
            // the function table is the runtime's to fill (checked non-null).
            unsafe {
                memory.write(state);
                *args.p11DeviceFuncs = device_funcs();
            }
            S_OK
        }
        Outcome::Failed(error) => hresult(error),
        Outcome::Panicked => E_FAIL,
    }
}

/// The immediate context's table, as CreateDevice fills it.
fn device_funcs() -> D3D11DDI_DEVICEFUNCS {
    D3D11DDI_DEVICEFUNCS {
        pfnFlush: Some(ic_flush),
        pfnCalcPrivateResourceSize: Some(calc_private_resource_size),
        pfnCreateResource: Some(create_resource),
        pfnDestroyResource: Some(destroy_resource),
        pfnDestroyDevice: Some(destroy_device),
        pfnCalcPrivateDeferredContextSize: Some(calc_private_deferred_context_size),
        pfnCreateDeferredContext: Some(create_deferred_context),
        pfnCommandListExecute: Some(ic_command_list_execute),
        pfnDestroyCommandList: Some(destroy_command_list),
        pfnRecycleDestroyCommandList: Some(destroy_command_list),
        ..Default::default()
    }
}

/// A deferred context's table, as CreateDeferredContext fills it.
fn context_funcs() -> D3D11DDI_DEVICEFUNCS {
    D3D11DDI_DEVICEFUNCS {
        pfnDraw: Some(dc_draw),
        pfnResourceMap: Some(dc_resource_map),
        pfnResourceUnmap: Some(dc_resource_unmap),
        pfnIaSetVertexBuffers: Some(dc_ia_set_vertex_buffers),
        pfnCalcPrivateCommandListSize: Some(calc_private_command_list_size),
        pfnCreateCommandList: Some(dc_create_command_list),
        pfnRecycleCommandList: Some(dc_recycle_command_list),
        pfnRecycleCreateCommandList: Some(dc_recycle_create_command_list),
        pfnRecycleCreateDeferredContext: Some(dc_recycle_create_deferred_context),
        pfnDestroyDevice: Some(dc_destroy),
        ..Default::default()
    }
}

// ---- The immediate context and the free-threaded entry points -----------------------------

/// Flush → `ImmediateContext::flush` (R-D2).
unsafe extern "system" fn ic_flush(device: D3D10DDI_HDEVICE) {
    // SAFETY: the runtime passes the device handle CreateDevice filled.
    if let Some(device) = unsafe { device_of(device) } {
        device.on_ic(|ic| ic.flush());
    }
}

unsafe extern "system" fn calc_private_resource_size(
    _device: D3D10DDI_HDEVICE,
    _args: *const D3D11DDIARG_CREATERESOURCE,
) -> SIZE_T {
    size_of::<u64>()
}

/// CreateResource → `Device::create_resource`, any thread (R-F1); the resource's memory
/// holds its handle.
unsafe extern "system" fn create_resource(
    device: D3D10DDI_HDEVICE,
    args: *const D3D11DDIARG_CREATERESOURCE,
    resource: D3D10DDI_HRESOURCE,
    _rt_resource: D3D10DDI_HRTRESOURCE,
) {
    // SAFETY: the runtime passes the device handle CreateDevice filled.
    let Some(device) = (unsafe { device_of(device) }) else {
        return;
    };
    // SAFETY: the runtime's arguments, with at least one mip level.
    let args = unsafe { args.as_ref() };
    // SAFETY: as above.
    let mip = args.and_then(|a| unsafe { a.pMipInfoList.as_ref() });
    let (Some(args), Some(mip)) = (args, mip) else {
        device.refuse(ContextId::Immediate, Error::InvalidArg);
        return;
    };
    if resource.pDrvPrivate.is_null() {
        device.refuse(ContextId::Immediate, Error::InvalidArg);
        return;
    }
    let desc = ResourceDesc {
        byte_size: u64::from(mip.TexelWidth),
        bind: BindFlags::from_ddi(args.BindFlags),
        usage: match args.Usage {
            D3D10_DDI_USAGE_DYNAMIC => Usage::Dynamic,
            _ => Usage::Default,
        },
        ..Default::default()
    };
    match guarded(|| device.device.create_resource(desc)) {
        // SAFETY: the runtime's memory of CalcPrivateResourceSize (8) bytes (checked non-null).
        Outcome::Done(handle) => unsafe {
            resource
                .pDrvPrivate
                .cast::<u64>()
                .write_unaligned(handle.to_bits());
        },
        outcome => device.finish_void(ContextId::Immediate, outcome),
    }
}

/// DestroyResource → `Device::destroy`, any thread; the real destruction waits for the
/// submission clock (R-D1).
unsafe extern "system" fn destroy_resource(device: D3D10DDI_HDEVICE, resource: D3D10DDI_HRESOURCE) {
    // SAFETY: the runtime passes the device handle CreateDevice filled and the resource's
    // memory.
    let (Some(device), handle) = (unsafe { device_of(device) }, unsafe {
        resource_of(resource)
    }) else {
        return;
    };
    let outcome = match handle {
        Some(handle) => guarded(|| device.device.destroy(handle)),
        None => Outcome::Failed(device.refuse(
            ContextId::Immediate,
            Error::Application(AppError::StaleHandle),
        )),
    };
    device.finish_void(ContextId::Immediate, outcome);
}

/// DestroyDevice → `ImmediateContext::destroy_device`, then the state is dropped (R-D3).
unsafe extern "system" fn destroy_device(device: D3D10DDI_HDEVICE) {
    let memory = device.pDrvPrivate.cast::<Arc<ShimDevice>>();
    if memory.is_null() {
        return;
    }
    // SAFETY: the memory holds the `Arc` CreateDevice wrote; the runtime destroys a device
    // once, after its contexts, and never uses the handle again.
    let device = unsafe { memory.read() };
    let ic = lock(&device.ic).take();
    if let Some(mut ic) = ic {
        let outcome = guarded(|| ic.destroy_device());
        device.finish_void(ContextId::Immediate, outcome);
        let outcome = guarded(|| {
            drop(ic);
            Ok(())
        });
        device.finish_void(ContextId::Immediate, outcome);
    }
}

unsafe extern "system" fn calc_private_deferred_context_size(
    _device: D3D10DDI_HDEVICE,
    _args: *const D3D11DDIARG_CALCPRIVATEDEFERREDCONTEXTSIZE,
) -> SIZE_T {
    size_of::<ContextSlot>()
}

/// CreateDeferredContext → `Device::create_deferred_context`, any thread; fills the context's
/// function table.
unsafe extern "system" fn create_deferred_context(
    device: D3D10DDI_HDEVICE,
    args: *const D3D11DDIARG_CREATEDEFERREDCONTEXT,
) {
    // SAFETY: the runtime passes the device handle CreateDevice filled and its arguments.
    let (Some(device), Some(args)) = (unsafe { device_of(device) }, unsafe { args.as_ref() })
    else {
        return;
    };
    let memory = args.hDrvContext.pDrvPrivate.cast::<ContextSlot>();
    if memory.is_null() || !memory.is_aligned() || args.p11ContextFuncs.is_null() {
        device.refuse(ContextId::Immediate, Error::InvalidArg);
        return;
    }
    match guarded(|| device.device.create_deferred_context()) {
        Outcome::Done(dc) => {
            let id = dc.id();
            let layers = &device.device.kernel().context_layers;
            lock(layers).insert(id.get(), args.hRTCoreLayer);
            let slot = ContextSlot {
                device: Arc::clone(device),
                id,
                recording: Mutex::new(Recording {
                    dc,
                    maps: Vec::new(),
                }),
            };
            // SAFETY: the runtime's memory of CalcPrivateDeferredContextSize bytes, aligned
            // (checked); the table is the runtime's to fill (checked non-null).
            unsafe {
                memory.write(slot);
                *args.p11ContextFuncs = context_funcs();
            }
        }
        outcome => device.finish_void(ContextId::Immediate, outcome),
    }
}

/// CommandListExecute on the immediate context → `ImmediateContext::execute_command_list`
/// (R-R8, R-C3); the list is looked up in the table first.
unsafe extern "system" fn ic_command_list_execute(
    device: D3D10DDI_HDEVICE,
    list: D3D11DDI_HCOMMANDLIST,
) {
    // SAFETY: the runtime passes the device handle CreateDevice filled.
    let Some(device) = (unsafe { device_of(device) }) else {
        return;
    };
    device.on_ic(|ic| match device.list(list.pDrvPrivate) {
        Some(list) => ic.execute_command_list(&list),
        None => Err(device.refuse(
            ContextId::Immediate,
            Error::Application(AppError::CommandListNotExecutable),
        )),
    });
}

/// DestroyCommandList and RecycleDestroyCommandList → dropping the list, any thread (R-R4);
/// the engine chooses the recycle hook while its context lives and recycling is on.
unsafe extern "system" fn destroy_command_list(
    device: D3D10DDI_HDEVICE,
    list: D3D11DDI_HCOMMANDLIST,
) {
    // SAFETY: the runtime passes the device handle CreateDevice filled.
    let Some(device) = (unsafe { device_of(device) }) else {
        return;
    };
    let outcome = match device.take_list(list.pDrvPrivate) {
        Some(list) => guarded(|| {
            drop(list);
            Ok(())
        }),
        None => Outcome::Failed(device.refuse(
            ContextId::Immediate,
            Error::Application(AppError::CommandListNotExecutable),
        )),
    };
    device.finish_void(ContextId::Immediate, outcome);
}

// ---- A deferred context, on the thread recording on it ----------------------------------

/// Draw → `DeferredContext::command`.
unsafe extern "system" fn dc_draw(context: D3D10DDI_HDEVICE, vertex_count: UINT, start: UINT) {
    // SAFETY: the runtime passes the context handle CreateDeferredContext filled.
    if let Some(context) = unsafe { context_of(context) } {
        context.record_void(|r| {
            r.dc.command(Draw {
                vertex_count,
                start,
            })
        });
    }
}

/// IaSetVertexBuffers → one `DeferredContext::bind` per slot (a null handle unbinds).
unsafe extern "system" fn dc_ia_set_vertex_buffers(
    context: D3D10DDI_HDEVICE,
    start_slot: UINT,
    count: UINT,
    buffers: *const D3D10DDI_HRESOURCE,
    _strides: *const UINT,
    _offsets: *const UINT,
) {
    // SAFETY: the runtime passes the context handle CreateDeferredContext filled.
    let Some(context) = (unsafe { context_of(context) }) else {
        return;
    };
    let count = usize::try_from(count).unwrap_or(0);
    if buffers.is_null() && count > 0 {
        context.refuse(Error::InvalidArg);
        return;
    }
    context.record_void(|recording| {
        for i in 0..count {
            // SAFETY: the runtime passes `count` handles, each null or a resource's memory.
            let handle = unsafe { resource_of(*buffers.add(i)) };
            let slot = start_slot.saturating_add(i as u32);
            let slot = u16::try_from(slot).map_err(|_| Error::Application(AppError::OutOfRange));
            let point = BindPoint::new(
                BindClass::VertexBuffer,
                slot.map_err(|e| context.refuse(e))?,
            );
            recording.dc.bind(point, handle.map(|h| h.any()))?;
        }
        Ok(())
    });
}

/// ResourceMap(WRITE_DISCARD): hands C a zeroed buffer of its own, the resource's size, which
/// the Unmap copies into the engine's Map (docs/EMBEDDING.md, "Mapped memory").
unsafe extern "system" fn dc_resource_map(
    context: D3D10DDI_HDEVICE,
    resource: D3D10DDI_HRESOURCE,
    subresource: UINT,
    map_type: D3D10_DDI_MAP,
    _flags: UINT,
    mapped: *mut D3D10DDI_MAPPED_SUBRESOURCE,
) {
    // SAFETY: the runtime passes the context handle CreateDeferredContext filled, the
    // resource's memory and its D3D10DDI_MAPPED_SUBRESOURCE to fill.
    let (Some(context), Some(mapped)) =
        (unsafe { context_of(context) }, unsafe { mapped.as_mut() })
    else {
        return;
    };
    mapped.pData = std::ptr::null_mut();
    if map_type != D3D10_DDI_MAP_WRITE_DISCARD || subresource != 0 {
        context.refuse(Error::Unsupported);
        return;
    }
    // SAFETY: as above.
    let handle = unsafe { resource_of(resource) };
    let size = handle.map(|h| context.device.device.object(h).map(|o| o.size));
    let (Some(handle), Some(Ok(size))) = (handle, size) else {
        context.refuse(Error::Application(AppError::StaleHandle));
        return;
    };
    let outcome = context.record(|recording| {
        if recording.maps.iter().any(|(r, _)| *r == handle) {
            return Err(context.refuse(Error::Application(AppError::MapConflict)));
        }
        let len = usize::try_from(size).map_err(|_| context.refuse(Error::OutOfMemory))?;
        let mut bytes = Vec::new();
        bytes
            .try_reserve_exact(len)
            .map_err(|_| context.refuse(Error::OutOfMemory))?;
        bytes.resize(len, 0);
        let pitch = UINT::try_from(len).unwrap_or(UINT::MAX);
        // The heap buffer stays where it is until the Unmap.
        let data = bytes.as_mut_ptr();
        recording.maps.push((handle, bytes));
        Ok((data, pitch))
    });
    if let Outcome::Done((data, pitch)) = outcome {
        mapped.pData = data.cast();
        mapped.RowPitch = pitch;
        mapped.DepthPitch = pitch;
    } else {
        context.device.finish_void(context.context(), outcome);
    }
}

/// ResourceUnmap → `DeferredContext::map_discard` with C's bytes, then `unmap`.
unsafe extern "system" fn dc_resource_unmap(
    context: D3D10DDI_HDEVICE,
    resource: D3D10DDI_HRESOURCE,
    _subresource: UINT,
) {
    // SAFETY: the runtime passes the context handle CreateDeferredContext filled and the
    // resource's memory.
    let (Some(context), handle) = (unsafe { context_of(context) }, unsafe {
        resource_of(resource)
    }) else {
        return;
    };
    context.record_void(|recording| {
        let at = recording.maps.iter().position(|(r, _)| Some(*r) == handle);
        let at = at.ok_or_else(|| context.refuse(Error::Application(AppError::InvalidState)))?;
        let (handle, bytes) = recording.maps.swap_remove(at);
        recording.unmap(handle, &bytes)
    });
}

unsafe extern "system" fn calc_private_command_list_size(
    _context: D3D10DDI_HDEVICE,
    _args: *const D3D11DDIARG_CREATECOMMANDLIST,
) -> SIZE_T {
    size_of::<Arc<ShimList>>()
}

/// CreateCommandList (FinishCommandList without recycled memory) → `DeferredContext::finish`
/// (R-R7), the list written into the runtime's memory.
unsafe extern "system" fn dc_create_command_list(
    context: D3D10DDI_HDEVICE,
    _args: *const D3D11DDIARG_CREATECOMMANDLIST,
    list: D3D11DDI_HCOMMANDLIST,
    _rt_list: D3D11DDI_HRTCOMMANDLIST,
) {
    // SAFETY: the runtime passes the context handle CreateDeferredContext filled.
    if let Some(context) = unsafe { context_of(context) } {
        let outcome = context.finish_into(list);
        context.device.finish_void(context.context(), outcome);
    }
}

/// RecycleCreateCommandList (FinishCommandList into a recycled list's memory) → the same
/// `DeferredContext::finish`; the engine reuses its own list memory (R-R6). A panic is the
/// return value.
unsafe extern "system" fn dc_recycle_create_command_list(
    context: D3D10DDI_HDEVICE,
    _args: *const D3D11DDIARG_CREATECOMMANDLIST,
    list: D3D11DDI_HCOMMANDLIST,
    _rt_list: D3D11DDI_HRTCOMMANDLIST,
) -> HRESULT {
    // SAFETY: the runtime passes the context handle CreateDeferredContext filled.
    let Some(context) = (unsafe { context_of(context) }) else {
        return E_INVALIDARG;
    };
    match context.finish_into(list) {
        Outcome::Done(()) => S_OK,
        // Reported already: the runtime must not retry with CreateCommandList.
        Outcome::Failed(_) => S_OK,
        Outcome::Panicked => E_FAIL,
    }
}

/// RecycleCommandList: the runtime moves a destroyed list's memory into the context's cache.
/// The engine recycles its own memory at Finish (R-R5), so the shim only checks that the
/// memory holds no live list.
unsafe extern "system" fn dc_recycle_command_list(
    context: D3D10DDI_HDEVICE,
    list: D3D11DDI_HCOMMANDLIST,
) {
    // SAFETY: the runtime passes the context handle CreateDeferredContext filled.
    if let Some(context) = unsafe { context_of(context) } {
        if context.device.list(list.pDrvPrivate).is_some() {
            context.refuse(Error::Application(AppError::InvalidState));
        }
    }
}

/// RecycleCreateDeferredContext, the last step of FinishCommandList: Finish renewed the
/// context already (R-R7).
unsafe extern "system" fn dc_recycle_create_deferred_context(
    context: D3D10DDI_HDEVICE,
    _args: *const D3D11DDIARG_CREATEDEFERREDCONTEXT,
) -> HRESULT {
    // SAFETY: the runtime passes the context handle CreateDeferredContext filled.
    match unsafe { context_of(context) } {
        Some(_) => S_OK,
        None => E_INVALIDARG,
    }
}

/// The context's DestroyDevice → dropping the `DeferredContext` (its handles close, its
/// lists end).
unsafe extern "system" fn dc_destroy(context: D3D10DDI_HDEVICE) {
    let memory = context.pDrvPrivate.cast::<ContextSlot>();
    if memory.is_null() {
        return;
    }
    // SAFETY: the memory holds the slot CreateDeferredContext wrote; the runtime destroys a
    // context once and never uses its handle again.
    let slot = unsafe { memory.read() };
    let (device, id) = (Arc::clone(&slot.device), slot.id);
    let outcome = guarded(|| {
        drop(slot);
        Ok(())
    });
    device.finish_void(ContextId::Deferred(id), outcome);
    lock(&device.device.kernel().context_layers).remove(&id.get());
}
