//! # c_shim: the D3D11 DDI's deferred-context entry points over cmdlist
//!
//! A user-mode driver keeps its C function tables; the deferred-context and command-list
//! entry points become `extern "system"` functions over `cmdlist` (`shim.rs`), with the
//! handle table and the panic boundary of `docs/EMBEDDING.md` ("What a C shim must check
//! itself"). The DDI's types keep their names (`ddi.rs`, a few fields each: the real layouts
//! come from the WDK's `d3d10umddi.h`). The driver under it (`driver.rs`) encodes draws,
//! vertex-buffer bindings and Map(DISCARD) writes into a command buffer that its kernel hands
//! to the runtime's render callback.
//!
//! This file plays the D3D11 runtime: it reaches the shim only through the function tables
//! the shim fills (OpenAdapter10_2's adapter table, CreateDevice's immediate-context table,
//! CreateDeferredContext's context table), allocates every object's memory at the size
//! CalcPrivate*Size answered, and calls on the threads the runtime uses: the immediate
//! context's calls on the main thread, a deferred context's on a recording thread, and
//! RecycleDestroyCommandList on whichever thread releases the list. It checks the words the
//! render callback receives after each frame, and the errors pfnSetErrorCb receives:
//!
//! 1. record (bind, Map/Unmap, two draws), FinishCommandList through CalcPrivateCommandListSize
//!    and CreateCommandList, execute, flush;
//! 2. release the list on another thread (RecycleDestroyCommandList), and finish the next one
//!    into the same memory (RecycleCommandList, RecycleCreateCommandList);
//! 3. a draw whose hook panics: the shim reports `D3DDDIERR_DEVICEREMOVED` on the context's
//!    core layer instead of unwinding, and the context goes on recording (the panic is
//!    expected, so a panic hook keeps its message and backtrace off stderr meanwhile);
//! 4. a forged command-list handle: `D3DDDIERR_APPLICATIONERROR`, never read;
//! 5. teardown.
//!
//! Run it with `cargo run --example c_shim` (it exits non-zero when a check fails);
//! `cargo test --example c_shim` runs the same checks as a test.

mod ddi;
mod driver;
mod shim;

use std::ffi::c_void;
use std::sync::{Arc, Mutex};
use std::thread;

use ddi::*;
use driver::{BIND_VB, CLEAR, DRAW, WRITE};

/// A core layer of the runtime (the device's, or a deferred context's): what pfnSetErrorCb
/// reported on it.
#[derive(Default)]
struct CoreLayer {
    errors: Mutex<Vec<HRESULT>>,
}

impl CoreLayer {
    fn handle(&self) -> D3D10DDI_HRTCORELAYER {
        D3D10DDI_HRTCORELAYER {
            handle: (self as *const Self).cast_mut().cast(),
        }
    }

    fn take_errors(&self) -> Vec<HRESULT> {
        std::mem::take(&mut *self.errors.lock().expect("errors"))
    }
}

/// The runtime's device: the command buffers the render callback received.
#[derive(Default)]
struct RtDevice {
    submitted: Mutex<Vec<u32>>,
}

impl RtDevice {
    fn take_submitted(&self) -> Vec<u32> {
        std::mem::take(&mut *self.submitted.lock().expect("submitted"))
    }
}

/// pfnSetErrorCb.
unsafe extern "system" fn set_error_cb(layer: D3D10DDI_HRTCORELAYER, hr: HRESULT) {
    // SAFETY: every core-layer handle this runtime hands out is a live `CoreLayer`.
    let layer = unsafe { &*layer.handle.cast::<CoreLayer>() };
    layer.errors.lock().expect("errors").push(hr);
}

/// pfnRenderCb.
unsafe extern "system" fn render_cb(device: HANDLE, render: *mut D3DDDICB_RENDER) -> HRESULT {
    // SAFETY: the device handle is the runtime's `RtDevice`; `render` points to the driver's
    // D3DDDICB_RENDER, whose buffer holds CommandLength bytes of 4-byte words.
    let (device, words) = unsafe {
        let render = &*render;
        let words = render.CommandLength as usize / 4;
        let buffer = render.pCommandBuffer.cast::<u32>();
        let words = match words {
            0 => &[][..],
            _ => std::slice::from_raw_parts(buffer, words),
        };
        (&*device.cast::<RtDevice>(), words)
    };
    device
        .submitted
        .lock()
        .expect("submitted")
        .extend_from_slice(words);
    S_OK
}

/// Memory the runtime allocates for an object: `size` bytes, 16-aligned, zeroed.
fn allocate(size: usize) -> Box<[u128]> {
    vec![0u128; size.div_ceil(16).max(1)].into_boxed_slice()
}

fn pointer(memory: &mut [u128]) -> *mut c_void {
    memory.as_mut_ptr().cast()
}

/// A function-table entry the shim must have filled.
macro_rules! pfn {
    ($table:expr, $name:ident) => {
        $table
            .$name
            .expect(concat!(stringify!($name), " is filled"))
    };
}

/// The whole run of the module docs; panics when a check fails.
fn run() {
    let rt_device = RtDevice::default();
    let (device_layer, context_layer) = (CoreLayer::default(), CoreLayer::default());

    // OpenAdapter10_2 and CreateDevice, on the thread of the immediate context.
    let mut adapter_funcs = D3D10DDI_ADAPTERFUNCS::default();
    let mut open = D3D10DDIARG_OPENADAPTER {
        hAdapter: D3D10DDI_HADAPTER {
            pDrvPrivate: std::ptr::null_mut(),
        },
        pAdapterFuncs: &mut adapter_funcs,
    };
    // SAFETY: the driver's export, with arguments valid for the call.
    assert_eq!(unsafe { shim::OpenAdapter10_2(&mut open) }, S_OK);
    let adapter = open.hAdapter;
    // SAFETY: entry points of the shim's tables, with handles this runtime made and keeps.
    let size = unsafe {
        pfn!(adapter_funcs, pfnCalcPrivateDeviceSize)(
            adapter,
            &D3D10DDIARG_CALCPRIVATEDEVICESIZE { Flags: 0 },
        )
    };
    let mut device_memory = allocate(size);
    let device = D3D10DDI_HDEVICE {
        pDrvPrivate: pointer(&mut device_memory),
    };
    let mut ic = D3D11DDI_DEVICEFUNCS::default();
    let kt_callbacks = D3DDDI_DEVICECALLBACKS {
        pfnRenderCb: Some(render_cb),
    };
    let um_callbacks = D3D11DDI_CORELAYER_DEVICECALLBACKS {
        pfnSetErrorCb: Some(set_error_cb),
    };
    let mut create = D3D10DDIARG_CREATEDEVICE {
        hRTDevice: D3D10DDI_HRTDEVICE {
            handle: (&rt_device as *const RtDevice).cast_mut().cast(),
        },
        hDrvDevice: device,
        pKTCallbacks: &kt_callbacks,
        p11DeviceFuncs: &mut ic,
        hRTCoreLayer: device_layer.handle(),
        p11UMCallbacks: &um_callbacks,
    };
    assert_eq!(
        // SAFETY: entry points of the shim's tables, with handles this runtime made and keeps.
        unsafe { pfn!(adapter_funcs, pfnCreateDevice)(adapter, &mut create) },
        S_OK
    );

    // A dynamic 16-byte vertex buffer.
    let mip = D3D10DDI_MIPINFO { TexelWidth: 16 };
    let desc = D3D11DDIARG_CREATERESOURCE {
        pMipInfoList: &mip,
        Usage: D3D10_DDI_USAGE_DYNAMIC,
        BindFlags: D3D10_DDI_BIND_VERTEX_BUFFER,
    };
    // SAFETY: entry points of the shim's tables, with handles this runtime made and keeps.
    let mut vb_memory = allocate(unsafe { pfn!(ic, pfnCalcPrivateResourceSize)(device, &desc) });
    let vb = D3D10DDI_HRESOURCE {
        pDrvPrivate: pointer(&mut vb_memory),
    };
    let rt_resource = D3D10DDI_HRTRESOURCE {
        handle: std::ptr::null_mut(),
    };
    // SAFETY: entry points of the shim's tables, with handles this runtime made and keeps.
    unsafe { pfn!(ic, pfnCreateResource)(device, &desc, vb, rt_resource) };

    // CreateDeferredContext: the runtime allocates the context, the shim fills its table.
    let calc = D3D11DDIARG_CALCPRIVATEDEFERREDCONTEXTSIZE { Flags: 0 };
    // SAFETY: entry points of the shim's tables, with handles this runtime made and keeps.
    let size = unsafe { pfn!(ic, pfnCalcPrivateDeferredContextSize)(device, &calc) };
    let mut context_memory = allocate(size);
    let context = D3D10DDI_HDEVICE {
        pDrvPrivate: pointer(&mut context_memory),
    };
    let mut dc = D3D11DDI_DEVICEFUNCS::default();
    let create_context = D3D11DDIARG_CREATEDEFERREDCONTEXT {
        p11ContextFuncs: &mut dc,
        hDrvContext: context,
        hRTCoreLayer: context_layer.handle(),
    };
    // SAFETY: entry points of the shim's tables, with handles this runtime made and keeps.
    unsafe { pfn!(ic, pfnCreateDeferredContext)(device, &create_context) };
    // RecycleCreateDeferredContext's arguments, made on the recording thread (the context's
    // function table is filled already).
    let recycle_context = || D3D11DDIARG_CREATEDEFERREDCONTEXT {
        p11ContextFuncs: std::ptr::null_mut(),
        hDrvContext: context,
        hRTCoreLayer: context_layer.handle(),
    };
    let list_args = D3D11DDIARG_CREATECOMMANDLIST { Flags: 0 };
    let rt_list = D3D11DDI_HRTCOMMANDLIST {
        handle: std::ptr::null_mut(),
    };

    // 1. A recording thread: bind, Map/Unmap, two draws, FinishCommandList.
    let mut list_memory = thread::scope(|s| {
        // SAFETY: entry points of the shim's tables, with handles this runtime made and keeps;
        // the application writes the RowPitch bytes the Map handed out.
        s.spawn(|| unsafe {
            pfn!(dc, pfnIaSetVertexBuffers)(context, 0, 1, &vb, &16, &0);
            let mut mapped = D3D10DDI_MAPPED_SUBRESOURCE {
                pData: std::ptr::null_mut(),
                RowPitch: 0,
                DepthPitch: 0,
            };
            pfn!(dc, pfnResourceMap)(context, vb, 0, D3D10_DDI_MAP_WRITE_DISCARD, 0, &mut mapped);
            assert!(
                !mapped.pData.is_null() && mapped.RowPitch == 16,
                "Map hands out 16 bytes"
            );
            // The application writes the vertices: 16 bytes of 2.
            mapped.pData.cast::<u8>().write_bytes(2, 16);
            pfn!(dc, pfnResourceUnmap)(context, vb, 0);
            pfn!(dc, pfnDraw)(context, 3, 0);
            pfn!(dc, pfnDraw)(context, 6, 3);
            // FinishCommandList with fresh memory.
            let size = pfn!(dc, pfnCalcPrivateCommandListSize)(context, &list_args);
            let mut memory = allocate(size);
            let list = D3D11DDI_HCOMMANDLIST {
                pDrvPrivate: pointer(&mut memory),
            };
            pfn!(dc, pfnCreateCommandList)(context, &list_args, list, rt_list);
            let recycled = pfn!(dc, pfnRecycleCreateDeferredContext)(context, &recycle_context());
            assert_eq!(recycled, S_OK);
            memory
        })
        .join()
        .expect("the recording thread")
    });
    let list = D3D11DDI_HCOMMANDLIST {
        pDrvPrivate: pointer(&mut list_memory),
    };
    // The immediate context executes the list and flushes: the driver's words reach the
    // render callback, the list's replay ended by clear-state (R-C3).
    // SAFETY: entry points of the shim's tables, with handles this runtime made and keeps.
    unsafe {
        pfn!(ic, pfnCommandListExecute)(device, list);
        pfn!(ic, pfnFlush)(device);
    }
    assert_eq!(
        rt_device.take_submitted(),
        [BIND_VB, 0, 1, WRITE, 1, 32, DRAW, 3, 0, DRAW, 6, 3, CLEAR],
        "frame 1's command buffer"
    );

    // 2. The application releases the list on another thread; the next Finish recycles its
    // memory (RecycleCommandList, then RecycleCreateCommandList into the same memory).
    thread::scope(|s| {
        // SAFETY: entry points of the shim's tables, with handles this runtime made and keeps.
        s.spawn(|| unsafe { pfn!(ic, pfnRecycleDestroyCommandList)(device, list) });
    });
    thread::scope(|s| {
        // SAFETY: entry points of the shim's tables, with handles this runtime made and keeps.
        s.spawn(|| unsafe {
            pfn!(dc, pfnDraw)(context, 9, 0);
            pfn!(dc, pfnRecycleCommandList)(context, list);
            let hr = pfn!(dc, pfnRecycleCreateCommandList)(context, &list_args, list, rt_list);
            assert_eq!(hr, S_OK, "RecycleCreateCommandList");
            assert_eq!(
                pfn!(dc, pfnRecycleCreateDeferredContext)(context, &recycle_context()),
                S_OK
            );
        });
    });
    // SAFETY: entry points of the shim's tables, with handles this runtime made and keeps.
    unsafe {
        pfn!(ic, pfnCommandListExecute)(device, list);
        pfn!(ic, pfnFlush)(device);
    }
    assert_eq!(rt_device.take_submitted(), [DRAW, 9, 0, CLEAR], "frame 2");

    // 3. A draw whose vertex range overflows panics in the driver's hook. The shim catches
    // it at the entry point and reports it on the context's core layer; the context records
    // on, without the refused draw. The panic is expected: its message is kept off stderr.
    let quiet = ExpectedPanic::silence(driver::OVERFLOW_PANIC);
    thread::scope(|s| {
        // SAFETY: entry points of the shim's tables, with handles this runtime made and keeps.
        s.spawn(|| unsafe {
            pfn!(dc, pfnDraw)(context, u32::MAX, 1);
            pfn!(dc, pfnDraw)(context, 1, 0);
            // This time the recording thread itself releases the previous list.
            pfn!(ic, pfnRecycleDestroyCommandList)(device, list);
            pfn!(dc, pfnRecycleCommandList)(context, list);
            let hr = pfn!(dc, pfnRecycleCreateCommandList)(context, &list_args, list, rt_list);
            assert_eq!(hr, S_OK, "RecycleCreateCommandList after the panic");
        });
    });
    drop(quiet);
    assert_eq!(
        context_layer.take_errors(),
        [D3DDDIERR_DEVICEREMOVED],
        "the panic, reported on the context's core layer"
    );
    // SAFETY: entry points of the shim's tables, with handles this runtime made and keeps.
    unsafe {
        pfn!(ic, pfnCommandListExecute)(device, list);
        pfn!(ic, pfnFlush)(device);
    }
    assert_eq!(rt_device.take_submitted(), [DRAW, 1, 0, CLEAR], "frame 3");

    // 4. A forged command-list handle: refused from the table, its memory never read.
    let mut forged_memory = allocate(64);
    let forged = D3D11DDI_HCOMMANDLIST {
        pDrvPrivate: pointer(&mut forged_memory),
    };
    // SAFETY: entry points of the shim's tables, with handles this runtime made and keeps.
    unsafe { pfn!(ic, pfnCommandListExecute)(device, forged) };
    assert_eq!(
        device_layer.take_errors(),
        [D3DDDIERR_APPLICATIONERROR],
        "the forged list"
    );

    // 5. Teardown: the list, the context, the resource, the device.
    // SAFETY: entry points of the shim's tables, with handles this runtime made and keeps.
    unsafe {
        pfn!(ic, pfnDestroyCommandList)(device, list);
        pfn!(dc, pfnDestroyDevice)(context);
        pfn!(ic, pfnDestroyResource)(device, vb);
        pfn!(ic, pfnFlush)(device);
        pfn!(ic, pfnDestroyDevice)(device);
    }
    assert_eq!(device_layer.take_errors(), [], "errors on the device");
    assert_eq!(context_layer.take_errors(), [], "errors on the context");
}

/// While alive, a panic whose message is `expected` prints nothing (no message, no
/// backtrace); any other panic goes to the hook installed before, which the drop puts back.
struct ExpectedPanic {
    previous: Option<Arc<PanicHook>>,
}

type PanicHook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send + 'static>;

impl ExpectedPanic {
    fn silence(expected: &'static str) -> Self {
        let previous: Arc<PanicHook> = Arc::new(std::panic::take_hook());
        let others = Arc::clone(&previous);
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
            if message != Some(expected) {
                others(info);
            }
        }));
        ExpectedPanic {
            previous: Some(previous),
        }
    }
}

impl Drop for ExpectedPanic {
    fn drop(&mut self) {
        // Dropping the silencing hook drops its reference to the previous one.
        drop(std::panic::take_hook());
        if let Some(previous) = self.previous.take() {
            match Arc::try_unwrap(previous) {
                Ok(hook) => std::panic::set_hook(hook),
                Err(shared) => std::panic::set_hook(Box::new(move |info| shared(info))),
            }
        }
    }
}

fn main() {
    run();
    println!("c_shim: the runtime's calls went through the tables, the panic was reported");
}

#[test]
fn the_runtime_drives_the_shim_through_its_tables() {
    run();
}
