//! The few D3D10/D3D11 DDI types the shim uses, named as in the WDK's `d3d10umddi.h`,
//! `d3dumddi.h` and `d3dukmdt.h`.
//!
//! Only the fields the example reads or writes are declared: these are NOT the real layouts.
//! A driver takes the real structs from the WDK headers (through bindgen or the `windows`
//! crate), where every struct has more members, some before the ones kept here, and the
//! function tables have well over a hundred entries in a fixed order.

// The DDI's own spelling, so that a C++ driver team finds every name in the headers.
#![allow(non_snake_case, non_camel_case_types, clippy::upper_case_acronyms)]

use core::ffi::c_void;

pub type HRESULT = i32;
pub type HANDLE = *mut c_void;
pub type SIZE_T = usize;
pub type UINT = u32;

pub const S_OK: HRESULT = 0;
// HRESULTs are 32-bit patterns; `as` keeps the bits.
pub const E_FAIL: HRESULT = 0x8000_4005_u32 as i32;
pub const E_OUTOFMEMORY: HRESULT = 0x8007_000E_u32 as i32;
pub const E_INVALIDARG: HRESULT = 0x8007_0057_u32 as i32;
/// `MAKE_D3DHRESULT(2160)`.
pub const D3DDDIERR_DEVICEREMOVED: HRESULT = 0x8876_0870_u32 as i32;
/// `MAKE_D3DHRESULT(2181)`.
pub const D3DDDIERR_APPLICATIONERROR: HRESULT = 0x8876_0885_u32 as i32;
/// `MAKE_DXGI_DDI_HRESULT(1)`.
pub const DXGI_DDI_ERR_WASSTILLDRAWING: HRESULT = 0x887B_0001_u32 as i32;
/// `MAKE_DXGI_DDI_HRESULT(2)`.
pub const DXGI_DDI_ERR_UNSUPPORTED: HRESULT = 0x887B_0002_u32 as i32;

/// Driver-private handles: memory the runtime allocates (of the size the driver's
/// CalcPrivate*Size answered) and passes back with every call on the object.
macro_rules! driver_handle {
    ($($name:ident),*) => {$(
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            pub pDrvPrivate: *mut c_void,
        }
        // SAFETY: a handle is an address the runtime passes to whichever thread makes a call;
        // the shim, not the type, keeps the DDI's threading rules.
        unsafe impl Send for $name {}
        // SAFETY: as above; the handle itself is never written through a shared reference.
        unsafe impl Sync for $name {}
    )*};
}

/// Runtime handles: the runtime's own objects, opaque to the driver, which passes them back
/// in callbacks.
macro_rules! runtime_handle {
    ($($name:ident),*) => {$(
        #[repr(C)]
        #[derive(Clone, Copy, Debug)]
        pub struct $name {
            pub handle: *mut c_void,
        }
        // SAFETY: as for the driver handles: an opaque value the driver only passes back.
        unsafe impl Send for $name {}
        // SAFETY: as above.
        unsafe impl Sync for $name {}
    )*};
}

driver_handle!(
    D3D10DDI_HADAPTER,
    D3D10DDI_HDEVICE,
    D3D10DDI_HRESOURCE,
    D3D11DDI_HCOMMANDLIST
);
runtime_handle!(
    D3D10DDI_HRTDEVICE,
    D3D10DDI_HRTCORELAYER,
    D3D10DDI_HRTRESOURCE,
    D3D11DDI_HRTCOMMANDLIST
);

/// `D3D10_DDI_MAP`: only WRITE_DISCARD is used.
pub type D3D10_DDI_MAP = UINT;
pub const D3D10_DDI_MAP_WRITE_DISCARD: D3D10_DDI_MAP = 4;

/// `D3D10_DDI_BIND_FLAG`: the vertex-buffer bit.
pub const D3D10_DDI_BIND_VERTEX_BUFFER: UINT = 0x1;
/// `D3D10_DDI_RESOURCE_USAGE`: DYNAMIC.
pub const D3D10_DDI_USAGE_DYNAMIC: UINT = 2;

#[repr(C)]
pub struct D3D10DDI_MAPPED_SUBRESOURCE {
    pub pData: *mut c_void,
    pub RowPitch: UINT,
    pub DepthPitch: UINT,
}

/// One mip level's size; for a buffer, `TexelWidth` is its byte width.
#[repr(C)]
pub struct D3D10DDI_MIPINFO {
    pub TexelWidth: UINT,
}

#[repr(C)]
pub struct D3D11DDIARG_CREATERESOURCE {
    pub pMipInfoList: *const D3D10DDI_MIPINFO,
    pub Usage: UINT,
    pub BindFlags: UINT,
}

#[repr(C)]
pub struct D3D11DDIARG_CALCPRIVATEDEFERREDCONTEXTSIZE {
    pub Flags: UINT,
}

#[repr(C)]
pub struct D3D11DDIARG_CREATEDEFERREDCONTEXT {
    /// The deferred context's function table, for the driver to fill.
    pub p11ContextFuncs: *mut D3D11DDI_DEVICEFUNCS,
    /// The context's memory, CalcPrivateDeferredContextSize bytes.
    pub hDrvContext: D3D10DDI_HDEVICE,
    /// The context's core layer, for errors reported on it.
    pub hRTCoreLayer: D3D10DDI_HRTCORELAYER,
}

#[repr(C)]
pub struct D3D11DDIARG_CREATECOMMANDLIST {
    pub Flags: UINT,
}

/// `D3DDDICB_RENDER`: the closed command buffer handed to the render callback.
#[repr(C)]
pub struct D3DDDICB_RENDER {
    pub CommandLength: UINT,
    pub pCommandBuffer: *const c_void,
}

pub type PFND3DDDI_RENDERCB = unsafe extern "system" fn(HANDLE, *mut D3DDDICB_RENDER) -> HRESULT;
pub type PFND3D10DDI_SETERROR_CB = unsafe extern "system" fn(D3D10DDI_HRTCORELAYER, HRESULT);

/// The kernel-thunk callbacks (`D3DDDI_DEVICECALLBACKS`).
#[repr(C)]
pub struct D3DDDI_DEVICECALLBACKS {
    pub pfnRenderCb: Option<PFND3DDDI_RENDERCB>,
}

/// The core layer's callbacks (`D3D11DDI_CORELAYER_DEVICECALLBACKS`).
#[repr(C)]
pub struct D3D11DDI_CORELAYER_DEVICECALLBACKS {
    pub pfnSetErrorCb: Option<PFND3D10DDI_SETERROR_CB>,
}

#[repr(C)]
pub struct D3D10DDIARG_CALCPRIVATEDEVICESIZE {
    pub Flags: UINT,
}

#[repr(C)]
pub struct D3D10DDIARG_CREATEDEVICE {
    pub hRTDevice: D3D10DDI_HRTDEVICE,
    /// The device's memory, CalcPrivateDeviceSize bytes.
    pub hDrvDevice: D3D10DDI_HDEVICE,
    pub pKTCallbacks: *const D3DDDI_DEVICECALLBACKS,
    /// The immediate context's function table, for the driver to fill.
    pub p11DeviceFuncs: *mut D3D11DDI_DEVICEFUNCS,
    pub hRTCoreLayer: D3D10DDI_HRTCORELAYER,
    pub p11UMCallbacks: *const D3D11DDI_CORELAYER_DEVICECALLBACKS,
}

/// `D3D10DDI_ADAPTERFUNCS`, filled by OpenAdapter10_2.
#[repr(C)]
#[derive(Default)]
pub struct D3D10DDI_ADAPTERFUNCS {
    pub pfnCalcPrivateDeviceSize: Option<
        unsafe extern "system" fn(
            D3D10DDI_HADAPTER,
            *const D3D10DDIARG_CALCPRIVATEDEVICESIZE,
        ) -> SIZE_T,
    >,
    pub pfnCreateDevice: Option<
        unsafe extern "system" fn(D3D10DDI_HADAPTER, *mut D3D10DDIARG_CREATEDEVICE) -> HRESULT,
    >,
}

#[repr(C)]
pub struct D3D10DDIARG_OPENADAPTER {
    pub hAdapter: D3D10DDI_HADAPTER,
    pub pAdapterFuncs: *mut D3D10DDI_ADAPTERFUNCS,
}

/// `D3D11DDI_DEVICEFUNCS`: one type for the immediate context's table (filled at
/// CreateDevice) and each deferred context's (filled at CreateDeferredContext, with the
/// entries a deferred context has; the others stay null).
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub struct D3D11DDI_DEVICEFUNCS {
    pub pfnDraw: Option<unsafe extern "system" fn(D3D10DDI_HDEVICE, UINT, UINT)>,
    pub pfnResourceMap: Option<
        unsafe extern "system" fn(
            D3D10DDI_HDEVICE,
            D3D10DDI_HRESOURCE,
            UINT,
            D3D10_DDI_MAP,
            UINT,
            *mut D3D10DDI_MAPPED_SUBRESOURCE,
        ),
    >,
    pub pfnResourceUnmap:
        Option<unsafe extern "system" fn(D3D10DDI_HDEVICE, D3D10DDI_HRESOURCE, UINT)>,
    pub pfnIaSetVertexBuffers: Option<
        unsafe extern "system" fn(
            D3D10DDI_HDEVICE,
            UINT,
            UINT,
            *const D3D10DDI_HRESOURCE,
            *const UINT,
            *const UINT,
        ),
    >,
    pub pfnFlush: Option<unsafe extern "system" fn(D3D10DDI_HDEVICE)>,
    pub pfnCalcPrivateResourceSize: Option<
        unsafe extern "system" fn(D3D10DDI_HDEVICE, *const D3D11DDIARG_CREATERESOURCE) -> SIZE_T,
    >,
    pub pfnCreateResource: Option<
        unsafe extern "system" fn(
            D3D10DDI_HDEVICE,
            *const D3D11DDIARG_CREATERESOURCE,
            D3D10DDI_HRESOURCE,
            D3D10DDI_HRTRESOURCE,
        ),
    >,
    pub pfnDestroyResource: Option<unsafe extern "system" fn(D3D10DDI_HDEVICE, D3D10DDI_HRESOURCE)>,
    pub pfnDestroyDevice: Option<unsafe extern "system" fn(D3D10DDI_HDEVICE)>,
    pub pfnCalcPrivateDeferredContextSize: Option<
        unsafe extern "system" fn(
            D3D10DDI_HDEVICE,
            *const D3D11DDIARG_CALCPRIVATEDEFERREDCONTEXTSIZE,
        ) -> SIZE_T,
    >,
    pub pfnCreateDeferredContext: Option<
        unsafe extern "system" fn(D3D10DDI_HDEVICE, *const D3D11DDIARG_CREATEDEFERREDCONTEXT),
    >,
    pub pfnRecycleCreateDeferredContext: Option<
        unsafe extern "system" fn(
            D3D10DDI_HDEVICE,
            *const D3D11DDIARG_CREATEDEFERREDCONTEXT,
        ) -> HRESULT,
    >,
    pub pfnCalcPrivateCommandListSize: Option<
        unsafe extern "system" fn(D3D10DDI_HDEVICE, *const D3D11DDIARG_CREATECOMMANDLIST) -> SIZE_T,
    >,
    pub pfnCreateCommandList: Option<
        unsafe extern "system" fn(
            D3D10DDI_HDEVICE,
            *const D3D11DDIARG_CREATECOMMANDLIST,
            D3D11DDI_HCOMMANDLIST,
            D3D11DDI_HRTCOMMANDLIST,
        ),
    >,
    pub pfnRecycleCreateCommandList: Option<
        unsafe extern "system" fn(
            D3D10DDI_HDEVICE,
            *const D3D11DDIARG_CREATECOMMANDLIST,
            D3D11DDI_HCOMMANDLIST,
            D3D11DDI_HRTCOMMANDLIST,
        ) -> HRESULT,
    >,
    pub pfnRecycleCommandList:
        Option<unsafe extern "system" fn(D3D10DDI_HDEVICE, D3D11DDI_HCOMMANDLIST)>,
    pub pfnRecycleDestroyCommandList:
        Option<unsafe extern "system" fn(D3D10DDI_HDEVICE, D3D11DDI_HCOMMANDLIST)>,
    pub pfnDestroyCommandList:
        Option<unsafe extern "system" fn(D3D10DDI_HDEVICE, D3D11DDI_HCOMMANDLIST)>,
    pub pfnCommandListExecute:
        Option<unsafe extern "system" fn(D3D10DDI_HDEVICE, D3D11DDI_HCOMMANDLIST)>,
}
