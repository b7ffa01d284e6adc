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
