//! Descriptions of the objects a device creates, as the runtime sees them: enough for the
//! engine to know an object's type, its dependency (R-H3), whether it is a primary (R-P1) or
//! shared (R-T2), and how much kernel memory the driver wants for it (R-F2).

use bitflags::bitflags;

use crate::handle::{Handle, HandleType, Resource};

bitflags! {
    /// How a resource may be bound (`D3D11_BIND_*`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct BindFlags: u32 {
        /// Vertex buffer.
        const VERTEX_BUFFER = 0x1;
        /// Index buffer.
        const INDEX_BUFFER = 0x2;
        /// Constant buffer.
        const CONSTANT_BUFFER = 0x4;
        /// Shader resource.
        const SHADER_RESOURCE = 0x8;
        /// Stream output.
        const STREAM_OUTPUT = 0x10;
        /// Render target.
        const RENDER_TARGET = 0x20;
        /// Depth-stencil.
        const DEPTH_STENCIL = 0x40;
        /// Unordered access.
        const UNORDERED_ACCESS = 0x80;
        /// A back buffer: presented, rotated (R-X5) and the source of a Blt (R-X7)
        /// (`D3D10_DDI_BIND_PRESENT`). An engine bit, not the DDI's value: convert with
        /// [`BindFlags::from_ddi`] and [`BindFlags::to_ddi`].
        const PRESENT = 0x1_0000;
    }
}

/// The DDI's bind bits (`D3D10_DDI_BIND_*`, `D3D11_DDI_BIND_*`) where they differ from the
/// API's: in the DDI, 0x80 is PRESENT and unordered access is 0x100.
const DDI_PRESENT: u32 = 0x80;
const DDI_UNORDERED_ACCESS: u32 = 0x100;
/// The bits whose DDI value is the API value.
const SAME_IN_DDI: u32 = 0x7f;

impl BindFlags {
    /// The flags a DDI's `BindFlags` field names (`D3D10_DDI_BIND_PRESENT` is 0x80 there,
    /// `D3D11_DDI_BIND_UNORDERED_ACCESS` 0x100): a shim converts with this, never with
    /// `from_bits_retain`, which would turn every back buffer into an unordered-access
    /// resource. Bits the engine does not know are dropped.
    pub fn from_ddi(bits: u32) -> Self {
        let mut flags = BindFlags::from_bits_truncate(bits & SAME_IN_DDI);
        flags.set(BindFlags::PRESENT, bits & DDI_PRESENT != 0);
        flags.set(
            BindFlags::UNORDERED_ACCESS,
            bits & DDI_UNORDERED_ACCESS != 0,
        );
        flags
    }

    /// The DDI's bits for these flags (the inverse of [`BindFlags::from_ddi`]).
    pub fn to_ddi(self) -> u32 {
        let mut bits = self.bits() & SAME_IN_DDI;
        if self.contains(BindFlags::PRESENT) {
            bits |= DDI_PRESENT;
        }
        if self.contains(BindFlags::UNORDERED_ACCESS) {
            bits |= DDI_UNORDERED_ACCESS;
        }
        bits
    }
}

bitflags! {
    /// Resource creation flags that change how the engine treats the object.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct ResourceFlags: u32 {
        /// Shared with other devices or processes: its kernel memory is allocated on the
        /// creating thread (R-T2) and deallocated during a flush (R-D2).
        const SHARED = 0x1;
        /// A primary (a scan-out surface): created and destroyed on the immediate context's
        /// thread, destroyed synchronously (R-P1).
        const PRIMARY = 0x2;
    }
}

/// How a resource is used (`D3D11_USAGE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Usage {
    /// GPU read/write.
    #[default]
    Default,
    /// GPU read only, contents fixed at creation.
    Immutable,
    /// CPU write (Map with DISCARD / NO_OVERWRITE), GPU read.
    Dynamic,
    /// CPU read/write copy target.
    Staging,
}

/// A resource: a linear range of bytes the GPU reads and writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ResourceDesc {
    /// Size of the contents in bytes.
    pub byte_size: u64,
    /// Bind flags.
    pub bind: BindFlags,
    /// Usage.
    pub usage: Usage,
    /// Shared / primary flags.
    pub flags: ResourceFlags,
    /// The 2D texture the bytes hold, if any (`None`: a buffer). Present, Blt and rotation
    /// take textures only (R-X1, R-X5, R-X7).
    pub texture: Option<Texture2d>,
}

impl ResourceDesc {
    /// Whether a Map(NO_OVERWRITE) may take a resource of this description on a driver
    /// with `caps` (R-M3): a dynamic buffer, not a texture, bound as a vertex or index
    /// buffer, or as a constant buffer or shader resource where `caps` allow it, and never
    /// bound in a way they leave out.
    pub(crate) fn takes_no_overwrite(&self, caps: crate::caps::MapCaps) -> bool {
        use crate::caps::MapCaps;
        let mut allowed = BindFlags::VERTEX_BUFFER | BindFlags::INDEX_BUFFER;
        if caps.contains(MapCaps::NO_OVERWRITE_CONSTANT_BUFFER) {
            allowed |= BindFlags::CONSTANT_BUFFER;
        }
        if caps.contains(MapCaps::NO_OVERWRITE_BUFFER_SRV) {
            allowed |= BindFlags::SHADER_RESOURCE;
        }
        let limited = BindFlags::CONSTANT_BUFFER | BindFlags::SHADER_RESOURCE;
        self.usage == Usage::Dynamic
            && self.texture.is_none()
            && self.bind.intersects(allowed)
            && (self.bind & (limited - allowed)).is_empty()
    }

    /// A texture resource of `texture`'s shape with these bind flags, its `byte_size` the
    /// bytes the shape takes: exactly, in a display format (the layout of [`Texture2d`]); at
    /// least its texels' bits in any other DXGI format. `None` for a shape creation refuses
    /// (R-E1): without pixels (a zero width, height, array size, mip count or sample count),
    /// in a format a D3D11 texture cannot have (a number DXGI does not define, a sampler
    /// feedback map), or past 64 bits. Usage and flags are the defaults; set them after.
    ///
    /// ```
    /// use cmdlist::{BindFlags, ResourceDesc, Texture2d};
    ///
    /// let back_buffer = ResourceDesc::texture(
    ///     Texture2d { width: 1920, height: 1080, ..Texture2d::default() },
    ///     BindFlags::PRESENT | BindFlags::RENDER_TARGET,
    /// )
    /// .expect("a DXGI format");
    /// assert_eq!(back_buffer.byte_size, 1920 * 1080 * 4);
    /// ```
    pub fn texture(texture: Texture2d, bind: BindFlags) -> Option<ResourceDesc> {
        // Exactly `byte_size()` for a display format.
        let byte_size = crate::dxgi::min_byte_size(&texture)?;
        // A shape without pixels takes no bytes, yet creation refuses it.
        texture.is_well_formed(byte_size).then(|| ResourceDesc {
            byte_size,
            bind,
            texture: Some(texture),
            ..ResourceDesc::default()
        })
    }
}

/// A 2D texture's shape (`D3D11_TEXTURE2D_DESC`'s part the engine checks).
///
/// The bytes of a texture in a [`DisplayFormat`](crate::dxgi::DisplayFormat) are laid out
/// as the reference Blt and the soft driver read them: subresource `mip + layer *
/// mip_levels` after another, each `max(1, width >> mip)` by `max(1, height >> mip)` pixels of
/// `samples` adjacent samples, rows tightly packed.
///
/// The default is one 1x1 `B8G8R8A8_UNORM` pixel, one slice, one mip, one sample: start from
/// it and set what differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Texture2d {
    /// Width of the top mip level, in pixels.
    pub width: u32,
    /// Height of the top mip level, in pixels.
    pub height: u32,
    /// Array slices (2 for a stereo back buffer).
    pub array_size: u16,
    /// Mip levels.
    pub mip_levels: u8,
    /// Samples per pixel (1: not multisampled).
    pub samples: u8,
    /// The `DXGI_FORMAT` number.
    pub format: u32,
}

/// Where one subresource of a texture lies in its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Subresource {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// First byte.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
}

impl Default for Texture2d {
    fn default() -> Self {
        Texture2d {
            width: 1,
            height: 1,
            array_size: 1,
            mip_levels: 1,
            samples: 1,
            format: crate::dxgi::DisplayFormat::B8G8R8A8Unorm.to_dxgi(),
        }
    }
}

impl Texture2d {
    /// Subresources: mip levels times array slices.
    pub fn subresources(&self) -> u32 {
        u32::from(self.mip_levels) * u32::from(self.array_size)
    }

    /// Where subresource `index` lies, for a texture in a display format; `None` for another
    /// format, an index out of range, or a shape whose size does not fit in 64 bits.
    pub fn subresource(&self, index: u32) -> Option<Subresource> {
        let format = crate::dxgi::DisplayFormat::from_dxgi(self.format)?;
        if index >= self.subresources() || self.samples == 0 {
            return None;
        }
        let mips = u32::from(self.mip_levels);
        let (mip, layer) = (index % mips, index / mips);
        let texel = (format.bytes_per_pixel() as u64).checked_mul(u64::from(self.samples))?;
        let level = |m: u32| -> Option<(u32, u32, u64)> {
            let shrink = |x: u32| x.checked_shr(m).unwrap_or(0).max(1);
            let (w, h) = (shrink(self.width), shrink(self.height));
            let len = u64::from(w).checked_mul(u64::from(h))?.checked_mul(texel)?;
            Some((w, h, len))
        };
        let mut slice = 0u64;
        for m in 0..mips {
            slice = slice.checked_add(level(m)?.2)?;
        }
        let mut offset = slice.checked_mul(u64::from(layer))?;
        for m in 0..mip {
            offset = offset.checked_add(level(m)?.2)?;
        }
        let (width, height, len) = level(mip)?;
        offset.checked_add(len)?;
        Some(Subresource {
            width,
            height,
            offset,
            len,
        })
    }

    /// Whether the shape has pixels, its format is one a D3D11 texture can have, and it fits
    /// in `byte_size` bytes: exactly, in a display format (the layout above); at least its
    /// texels' bits, in any other (whose layout is its driver's), so that nothing reading the
    /// texture through its allocation reads past it.
    fn is_well_formed(&self, byte_size: u64) -> bool {
        let has_pixels = self.width > 0
            && self.height > 0
            && self.array_size > 0
            && self.mip_levels > 0
            && self.samples > 0;
        // Exactly `byte_size()` for a display format.
        let needs = crate::dxgi::min_byte_size(self);
        has_pixels && needs.is_some_and(|n| n <= byte_size)
    }

    /// Bytes all subresources take, for a texture in a display format.
    pub fn byte_size(&self) -> Option<u64> {
        let last = self.subresource(self.subresources().checked_sub(1)?)?;
        last.offset.checked_add(last.len)
    }
}

/// A view of a range of a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ViewDesc {
    /// The resource viewed: the view's dependency (R-H3).
    pub resource: Handle<Resource>,
    /// First byte of the range.
    pub first_byte: u64,
    /// Length of the range in bytes.
    pub byte_len: u64,
}

/// The kind of a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueryKind {
    /// An event query: signalled once the GPU has finished everything before its End
    /// (the heavy pattern of R-D4 spins on it).
    Event,
    /// Occlusion (samples passed).
    Occlusion,
    /// A timestamp.
    Timestamp,
}

/// What to create.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectDesc<'a> {
    /// A resource.
    Resource(ResourceDesc),
    /// A view; `ty` must be a view type ([`HandleType::is_view`]).
    View {
        /// Which view type.
        ty: HandleType,
        /// The range viewed.
        desc: ViewDesc,
    },
    /// A shader, from its bytecode.
    Shader(&'a [u8]),
    /// An input element layout, from its driver-defined description.
    ElementLayout(&'a [u8]),
    /// A pipeline state object; `ty` is one of the four state types.
    State {
        /// Blend, depth-stencil, rasterizer or sampler state.
        ty: HandleType,
        /// The driver-defined description.
        desc: &'a [u8],
    },
    /// A query.
    Query(QueryKind),
}

impl ObjectDesc<'_> {
    /// The handle type of the object this describes.
    pub fn handle_type(&self) -> HandleType {
        match self {
            ObjectDesc::Resource(_) => HandleType::Resource,
            ObjectDesc::View { ty, .. } | ObjectDesc::State { ty, .. } => *ty,
            ObjectDesc::Shader(_) => HandleType::Shader,
            ObjectDesc::ElementLayout(_) => HandleType::ElementLayout,
            ObjectDesc::Query(_) => HandleType::Query,
        }
    }

    /// Whether the description is well formed (a view type for a view, a state type for a
    /// state).
    pub fn is_well_formed(&self) -> bool {
        match self {
            ObjectDesc::View { ty, desc } => ty.is_view() && desc.byte_len > 0,
            ObjectDesc::Resource(r) => r.texture.is_none_or(|t| t.is_well_formed(r.byte_size)),
            ObjectDesc::State { ty, .. } => matches!(
                ty,
                HandleType::BlendState
                    | HandleType::DepthStencilState
                    | HandleType::RasterizerState
                    | HandleType::SamplerState
            ),
            _ => true,
        }
    }

    /// The object this one depends on (R-H3): a view's resource.
    pub fn dependency(&self) -> Option<Handle<Resource>> {
        match self {
            ObjectDesc::View { desc, .. } => Some(desc.resource),
            _ => None,
        }
    }

    /// Whether this is a primary resource (R-P1).
    pub fn is_primary(&self) -> bool {
        matches!(self, ObjectDesc::Resource(r) if r.flags.contains(ResourceFlags::PRIMARY))
    }

    /// Whether this is a shared resource (R-T2).
    pub fn is_shared(&self) -> bool {
        matches!(self, ObjectDesc::Resource(r) if r.flags.contains(ResourceFlags::SHARED))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shape without pixels is refused whatever its allocation (R-E1), though it takes no
    /// bytes: a zero array size, mip count, sample count, width or height.
    #[test]
    fn r_e1_a_texture_without_pixels_is_refused() {
        let one = Texture2d {
            width: 4,
            height: 4,
            ..Texture2d::default()
        };
        assert!(one.is_well_formed(64));
        assert!(ResourceDesc::texture(one, BindFlags::empty()).is_some());
        for (what, zero) in [
            (
                "array_size",
                Texture2d {
                    array_size: 0,
                    ..one
                },
            ),
            (
                "mip_levels",
                Texture2d {
                    mip_levels: 0,
                    ..one
                },
            ),
            ("samples", Texture2d { samples: 0, ..one }),
            ("width", Texture2d { width: 0, ..one }),
            ("height", Texture2d { height: 0, ..one }),
        ] {
            for byte_size in [0, 64, u64::MAX] {
                assert!(
                    !zero.is_well_formed(byte_size),
                    "{what} 0, {byte_size} bytes"
                );
            }
            assert_eq!(
                ResourceDesc::texture(zero, BindFlags::empty()),
                None,
                "{what} 0"
            );
            let desc = ObjectDesc::Resource(ResourceDesc {
                byte_size: u64::MAX,
                texture: Some(zero),
                ..ResourceDesc::default()
            });
            assert!(!desc.is_well_formed(), "{what} 0");
        }
        // In a format that is not a display format too.
        let bc7 = Texture2d {
            array_size: 0,
            format: 98,
            ..one
        };
        assert!(!bc7.is_well_formed(u64::MAX));
    }

    /// A texture whose size passes 64 bits is refused whatever its allocation, even where the
    /// bits past 64 are all it has: 2^31 × 2^28 texels of 16 bytes in two slices are 2^64
    /// bytes, 0 once wrapped.
    #[test]
    fn r_e1_a_texture_past_64_bits_is_refused() {
        let wide = Texture2d {
            width: 1 << 31,
            height: 1 << 28,
            format: 2,
            ..Texture2d::default()
        };
        assert!(wide.is_well_formed(1 << 63));
        assert!(!wide.is_well_formed((1 << 63) - 1));
        let two = Texture2d {
            array_size: 2,
            ..wide
        };
        for byte_size in [0, 1, 1 << 63, u64::MAX] {
            assert!(!two.is_well_formed(byte_size), "{byte_size} bytes");
        }
        assert_eq!(ResourceDesc::texture(two, BindFlags::empty()), None);
    }

    /// A texture's shape is the application's input: any one of them answers, never panics
    /// (mip levels past 32 shift a width to nothing, sizes past 64 bits are `None`).
    #[test]
    fn r_e1_any_texture_shape_answers_without_panicking() {
        for (width, height, mips, layers, samples) in [
            (1, 1, 255, 1, 1),
            (u32::MAX, u32::MAX, 1, u16::MAX, u8::MAX),
            (7, 3, 40, 2, 1),
            (0, 0, 0, 0, 0),
        ] {
            let texture = Texture2d {
                width,
                height,
                array_size: layers,
                mip_levels: mips,
                samples,
                format: 87,
            };
            for index in [0, 1, 39, 200, u32::MAX] {
                let _ = texture.subresource(index);
            }
            let _ = texture.byte_size();
            let _ = texture.is_well_formed(u64::MAX);
        }
        let small = Texture2d {
            width: 7,
            height: 3,
            array_size: 2,
            mip_levels: 3,
            samples: 1,
            format: 87,
        };
        // 7x3, 3x1, 1x1 per layer, 4 bytes a pixel.
        assert_eq!(small.byte_size(), Some(2 * 4 * (21 + 3 + 1)));
        assert_eq!(
            small.subresource(4),
            Some(Subresource {
                width: 3,
                height: 1,
                offset: 4 * (25 + 21),
                len: 12
            })
        );
    }
}
