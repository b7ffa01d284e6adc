//! Typed generational handles, the D3D11 DDI handle types and the handle-size table.
//!
//! A [`Handle<T>`] is 8 bytes: a 32-bit index and a non-zero 32-bit generation, so
//! `Option<Handle<T>>` is 8 bytes too. The index carries the owning device's tag in its top
//! [`DEVICE_TAG_BITS`] bits, so a handle of one live device is never mistaken for an object of
//! another (R-E1: the application's fault, reported as [`Error::Application`]). The generation
//! says which life of the slot the handle names: a slot whose generation would wrap is retired
//! for good, never reused, so a stale handle can never name a later object.
//!
//! [`HandleType`] keeps the documented `D3D11DDI_HANDLETYPE` values, and [`HandleSizeTable`] is
//! the answer of CheckDeferredContextHandleSizes (R-H4): every context-local handle size the
//! driver will ever ask for.
//!
//! [`Error::Application`]: crate::Error::Application

use core::fmt;
use core::hash::{Hash, Hasher};
use core::marker::PhantomData;
use core::num::{NonZeroU32, NonZeroU64};

use crate::error::{Error, Result};

/// Bits of a handle's index that name the device that made it.
pub const DEVICE_TAG_BITS: u32 = 8;
/// Bits of a handle's index that name the slot inside the device's registry.
pub const SLOT_BITS: u32 = 32 - DEVICE_TAG_BITS;
/// The most objects one device can hold at once (slots), 16 Mi.
pub const MAX_SLOTS: u32 = 1 << SLOT_BITS;

/// A D3D11 DDI handle type, with its documented numeric value (`D3D11DDI_HANDLETYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u32)]
pub enum HandleType {
    /// `D3D10DDI_HT_RESOURCE`.
    Resource = 0,
    /// `D3D10DDI_HT_SHADERRESOURCEVIEW`.
    ShaderResourceView = 1,
    /// `D3D10DDI_HT_RENDERTARGETVIEW`.
    RenderTargetView = 2,
    /// `D3D10DDI_HT_DEPTHSTENCILVIEW`.
    DepthStencilView = 3,
    /// `D3D10DDI_HT_SHADER`.
    Shader = 4,
    /// `D3D10DDI_HT_ELEMENTLAYOUT`.
    ElementLayout = 5,
    /// `D3D10DDI_HT_BLENDSTATE`.
    BlendState = 6,
    /// `D3D10DDI_HT_DEPTHSTENCILSTATE`.
    DepthStencilState = 7,
    /// `D3D10DDI_HT_RASTERIZERSTATE`.
    RasterizerState = 8,
    /// `D3D10DDI_HT_SAMPLERSTATE`.
    SamplerState = 9,
    /// `D3D10DDI_HT_QUERY`.
    Query = 10,
    /// `D3D11DDI_HT_COMMANDLIST`.
    CommandList = 11,
    /// `D3D11DDI_HT_UNORDEREDACCESSVIEW`.
    UnorderedAccessView = 12,
    /// `D3D11_1DDI_HT_DECODE`.
    VideoDecoder = 13,
    /// `D3D11_1DDI_HT_VIDEOPROCESSORENUM`.
    VideoProcessorEnum = 14,
    /// `D3D11_1DDI_HT_VIDEOPROCESSOR`.
    VideoProcessor = 15,
    /// `D3D11_1DDI_HT_VIDEODECODEROUTPUTVIEW`.
    VideoDecoderOutputView = 16,
    /// `D3D11_1DDI_HT_VIDEOPROCESSORINPUTVIEW`.
    VideoProcessorInputView = 17,
    /// `D3D11_1DDI_HT_VIDEOPROCESSOROUTPUTVIEW`.
    VideoProcessorOutputView = 18,
    /// `D3DWDDM2_2DDI_HT_CACHESESSION`.
    CacheSession = 19,
}

impl HandleType {
    /// Every handle type, in numeric order.
    pub const ALL: [HandleType; 20] = [
        HandleType::Resource,
        HandleType::ShaderResourceView,
        HandleType::RenderTargetView,
        HandleType::DepthStencilView,
        HandleType::Shader,
        HandleType::ElementLayout,
        HandleType::BlendState,
        HandleType::DepthStencilState,
        HandleType::RasterizerState,
        HandleType::SamplerState,
        HandleType::Query,
        HandleType::CommandList,
        HandleType::UnorderedAccessView,
        HandleType::VideoDecoder,
        HandleType::VideoProcessorEnum,
        HandleType::VideoProcessor,
        HandleType::VideoDecoderOutputView,
        HandleType::VideoProcessorInputView,
        HandleType::VideoProcessorOutputView,
        HandleType::CacheSession,
    ];

    /// The documented DDI value.
    pub const fn to_raw(self) -> u32 {
        self as u32
    }

    /// The handle type with this DDI value; a value outside the enumeration is
    /// [`Error::InvalidArg`] (it comes from the driver, R-E1).
    pub fn from_raw(raw: u32) -> Result<Self> {
        Self::ALL
            .get(raw as usize)
            .copied()
            .ok_or(Error::InvalidArg)
    }

    /// Whether objects of this type are views, which depend on a resource (R-H3).
    pub const fn is_view(self) -> bool {
        matches!(
            self,
            HandleType::ShaderResourceView
                | HandleType::RenderTargetView
                | HandleType::DepthStencilView
                | HandleType::UnorderedAccessView
                | HandleType::VideoDecoderOutputView
                | HandleType::VideoProcessorInputView
                | HandleType::VideoProcessorOutputView
        )
    }
}

/// What a [`Handle<T>`] may name: a marker type per object kind.
pub trait ObjectKind: 'static {
    /// Whether an object of type `ty` may be named by a `Handle<Self>`.
    fn accepts(ty: HandleType) -> bool;
}

macro_rules! kinds {
    ($($(#[$doc:meta])* $name:ident => $ty:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Debug)]
        pub enum $name {}
        impl ObjectKind for $name {
            fn accepts(ty: HandleType) -> bool {
                ty == HandleType::$ty
            }
        }
    )*};
}

kinds! {
    /// Marker: a resource (buffer or texture).
    Resource => Resource;
    /// Marker: a shader-resource view.
    ShaderResourceView => ShaderResourceView;
    /// Marker: a render-target view.
    RenderTargetView => RenderTargetView;
    /// Marker: a depth-stencil view.
    DepthStencilView => DepthStencilView;
    /// Marker: an unordered-access view.
    UnorderedAccessView => UnorderedAccessView;
    /// Marker: a shader.
    Shader => Shader;
    /// Marker: an input element layout.
    ElementLayout => ElementLayout;
    /// Marker: a blend state.
    BlendState => BlendState;
    /// Marker: a depth-stencil state.
    DepthStencilState => DepthStencilState;
    /// Marker: a rasterizer state.
    RasterizerState => RasterizerState;
    /// Marker: a sampler state.
    SamplerState => SamplerState;
    /// Marker: a query.
    Query => Query;
}

/// Marker: any object in the registry, whatever its type.
#[derive(Debug)]
pub enum Any {}
impl ObjectKind for Any {
    fn accepts(_: HandleType) -> bool {
        true
    }
}

/// Marker: any view (shader-resource, render-target, depth-stencil, unordered-access, video).
#[derive(Debug)]
pub enum View {}
impl ObjectKind for View {
    fn accepts(ty: HandleType) -> bool {
        ty.is_view()
    }
}

/// A handle of any object type.
pub type AnyHandle = Handle<Any>;

/// A typed generational handle: 32-bit index (device tag and slot) and non-zero 32-bit
/// generation. Copy, 8 bytes, and `Option<Handle<T>>` is 8 bytes too.
///
/// Handles are plain values: holding one keeps nothing alive. Every entry point that takes
/// one checks it, and a stale, forged, double-destroyed or other-device handle is
/// [`Error::Application`] (R-E1), never a panic.
///
/// One 64-bit word (its [`Handle::to_bits`]), so that comparing, hashing and moving a handle
/// is one register operation: two 32-bit halves would be spilled and reloaded as one word on
/// hot paths, a store-to-load forwarding stall.
#[repr(transparent)]
pub struct Handle<T: ObjectKind> {
    /// Generation in the high half (never zero), index (device tag and slot) in the low.
    bits: NonZeroU64,
    _kind: PhantomData<fn() -> T>,
}

const _: () = assert!(core::mem::size_of::<Handle<Any>>() == 8);
const _: () = assert!(core::mem::size_of::<Option<Handle<Any>>>() == 8);

impl<T: ObjectKind> Handle<T> {
    pub(crate) const fn new(device_tag: u8, slot: u32, generation: NonZeroU32) -> Self {
        let index = ((device_tag as u32) << SLOT_BITS) | (slot & (MAX_SLOTS - 1));
        let bits = ((generation.get() as u64) << 32) | index as u64;
        match NonZeroU64::new(bits) {
            Some(bits) => Handle {
                bits,
                _kind: PhantomData,
            },
            None => unreachable!(),
        }
    }

    /// The low half: device tag and slot.
    const fn index(self) -> u32 {
        self.bits.get() as u32
    }

    /// The handle as one 64-bit value (generation in the high half), e.g. to cross an FFI
    /// boundary. [`Handle::from_bits`] is its inverse.
    pub const fn to_bits(self) -> u64 {
        self.bits.get()
    }

    /// A handle from a 64-bit value, `None` when the generation half is zero. Any other value
    /// is accepted: an entry point given a forged handle reports it as an application error.
    pub const fn from_bits(bits: u64) -> Option<Self> {
        if bits >> 32 == 0 {
            return None;
        }
        match NonZeroU64::new(bits) {
            Some(bits) => Some(Handle {
                bits,
                _kind: PhantomData,
            }),
            None => None,
        }
    }

    /// The same handle, untyped.
    pub const fn any(self) -> AnyHandle {
        Handle {
            bits: self.bits,
            _kind: PhantomData,
        }
    }

    /// The same handle under another kind, unchecked: the registry checks the object's real
    /// type on every lookup, so a wrong cast is caught there. Outside the crate the checked
    /// [`crate::Device::typed`] does this.
    pub(crate) const fn cast<U: ObjectKind>(self) -> Handle<U> {
        Handle {
            bits: self.bits,
            _kind: PhantomData,
        }
    }

    pub(crate) const fn device_tag(self) -> u8 {
        (self.index() >> SLOT_BITS) as u8
    }

    pub(crate) const fn slot(self) -> u32 {
        self.index() & (MAX_SLOTS - 1)
    }

    pub(crate) const fn generation(self) -> NonZeroU32 {
        match NonZeroU32::new((self.bits.get() >> 32) as u32) {
            Some(generation) => generation,
            None => unreachable!(),
        }
    }
}

impl<T: ObjectKind> Clone for Handle<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: ObjectKind> Copy for Handle<T> {}
impl<T: ObjectKind> PartialEq for Handle<T> {
    fn eq(&self, other: &Self) -> bool {
        self.to_bits() == other.to_bits()
    }
}
impl<T: ObjectKind> Eq for Handle<T> {}
impl<T: ObjectKind> Hash for Handle<T> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.to_bits().hash(state)
    }
}
impl<T: ObjectKind> PartialOrd for Handle<T> {
    fn partial_cmp(&self, other: &Self) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T: ObjectKind> Ord for Handle<T> {
    fn cmp(&self, other: &Self) -> core::cmp::Ordering {
        self.to_bits().cmp(&other.to_bits())
    }
}
impl<T: ObjectKind> fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Handle(dev {}, slot {}, gen {})",
            self.device_tag(),
            self.slot(),
            self.generation()
        )
    }
}

/// One entry of the handle-size table: a handle type and one size (bytes) the driver may
/// answer for its context-local handles (R-H4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HandleSize {
    /// The handle type.
    pub ty: HandleType,
    /// A context-local handle size of that type, in bytes.
    pub size: usize,
}

/// The answer of CheckDeferredContextHandleSizes (R-H4): every (type, size) pair the driver's
/// CalcDeferredContextHandleSize will ever return. A type may have several sizes. Built once at
/// device creation; read-only after that.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HandleSizeTable {
    entries: Vec<HandleSize>,
    /// The distinct sizes, ascending: the bucket size classes.
    classes: Vec<usize>,
}

impl HandleSizeTable {
    /// The largest size a context-local handle may have (1 MiB): a bigger answer is the
    /// driver's error, not a reason to reserve address space.
    pub const MAX_HANDLE_SIZE: usize = 1 << 20;

    /// A table from its entries, sorted and deduplicated. A zero size or one above
    /// [`Self::MAX_HANDLE_SIZE`] is [`Error::InvalidArg`].
    pub fn new(entries: impl IntoIterator<Item = HandleSize>) -> Result<Self> {
        let mut entries: Vec<HandleSize> = entries.into_iter().collect();
        if entries
            .iter()
            .any(|e| e.size == 0 || e.size > Self::MAX_HANDLE_SIZE)
        {
            return Err(Error::InvalidArg);
        }
        entries.sort_unstable();
        entries.dedup();
        let mut classes: Vec<usize> = entries.iter().map(|e| e.size).collect();
        classes.sort_unstable();
        classes.dedup();
        Ok(HandleSizeTable { entries, classes })
    }

    /// The table in CheckDeferredContextHandleSizes' two-poll form (R-H4): `poll(None)` answers
    /// the count, then `poll(Some(array))` with an array of that length fills it. A second
    /// answer longer than the first is [`Error::InvalidArg`].
    pub fn from_two_polls(
        mut poll: impl FnMut(Option<&mut [HandleSize]>) -> usize,
    ) -> Result<Self> {
        let count = poll(None);
        if count > HandleType::ALL.len() * 64 {
            return Err(Error::InvalidArg);
        }
        let mut array = vec![
            HandleSize {
                ty: HandleType::Resource,
                size: 0
            };
            count
        ];
        let written = poll(Some(&mut array));
        if written > count {
            return Err(Error::InvalidArg);
        }
        array.truncate(written);
        Self::new(array)
    }

    /// Whether the driver listed `size` for `ty`.
    pub fn contains(&self, ty: HandleType, size: usize) -> bool {
        self.entries.binary_search(&HandleSize { ty, size }).is_ok()
    }

    /// The entries, sorted by type then size.
    pub fn entries(&self) -> &[HandleSize] {
        &self.entries
    }

    /// The distinct sizes, ascending: one bucket size class each (R-H4, R-L1).
    pub fn distinct_sizes(&self) -> Vec<usize> {
        self.classes.clone()
    }

    /// The size class of `size` for `ty`: its index among [`HandleSizeTable::distinct_sizes`]
    /// (the index of the bucket allocators' class, [`crate::cls::bucket::BucketAllocator::alloc_class`]),
    /// or `None` if the driver did not list `size` for `ty` (R-H4).
    pub fn size_class(&self, ty: HandleType, size: usize) -> Option<u16> {
        if !self.contains(ty, size) {
            return None;
        }
        let index = self.classes.binary_search(&size).ok()?;
        u16::try_from(index).ok()
    }

    /// Fills `out` with as many entries as fit, returning the total count: the driver side of
    /// the two-poll protocol, for drivers that keep their table in this type.
    pub fn answer_poll(&self, out: Option<&mut [HandleSize]>) -> usize {
        if let Some(out) = out {
            let n = out.len().min(self.entries.len());
            out[..n].copy_from_slice(&self.entries[..n]);
            n
        } else {
            self.entries.len()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r_h4_handle_type_values_match_the_ddi() {
        for (i, ty) in HandleType::ALL.iter().enumerate() {
            assert_eq!(ty.to_raw(), i as u32);
            assert_eq!(HandleType::from_raw(i as u32), Ok(*ty));
        }
        assert_eq!(HandleType::CommandList.to_raw(), 11);
        assert_eq!(HandleType::UnorderedAccessView.to_raw(), 12);
        assert_eq!(HandleType::CacheSession.to_raw(), 19);
        assert_eq!(HandleType::from_raw(20), Err(Error::InvalidArg));
    }

    #[test]
    fn handles_are_eight_bytes_and_round_trip() {
        let h: Handle<Resource> = Handle::new(3, 77, NonZeroU32::new(9).unwrap());
        assert_eq!(core::mem::size_of_val(&Some(h)), 8);
        assert_eq!(Handle::<Resource>::from_bits(h.to_bits()), Some(h));
        assert_eq!(h.device_tag(), 3);
        assert_eq!(h.slot(), 77);
        assert_eq!(Handle::<Resource>::from_bits(77), None);
    }

    #[test]
    fn r_h4_two_poll_table_is_sorted_and_checked() {
        let driver = [
            HandleSize {
                ty: HandleType::ShaderResourceView,
                size: 48,
            },
            HandleSize {
                ty: HandleType::Resource,
                size: 96,
            },
            HandleSize {
                ty: HandleType::Resource,
                size: 32,
            },
        ];
        let table = HandleSizeTable::from_two_polls(|out| match out {
            None => driver.len(),
            Some(out) => {
                out.copy_from_slice(&driver);
                driver.len()
            }
        })
        .unwrap();
        assert!(table.contains(HandleType::Resource, 32));
        assert!(table.contains(HandleType::Resource, 96));
        assert!(!table.contains(HandleType::Resource, 48));
        assert_eq!(table.distinct_sizes(), vec![32, 48, 96]);
        let again = HandleSizeTable::from_two_polls(|out| table.answer_poll(out)).unwrap();
        assert_eq!(again, table);
        // A second poll that claims more than the first is the driver's error.
        let bad = HandleSizeTable::from_two_polls(|out| match out {
            None => 1,
            Some(_) => 2,
        });
        assert_eq!(bad, Err(Error::InvalidArg));
        assert_eq!(
            HandleSizeTable::new([HandleSize {
                ty: HandleType::Query,
                size: 0
            }]),
            Err(Error::InvalidArg)
        );
    }
}
