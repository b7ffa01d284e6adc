//! Binding points and a context's binding table: what state-refresh queries answer
//! (R-C1, R-C3) and what clear-state empties.

use crate::handle::AnyHandle;

/// A pipeline stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Vertex shader.
    Vertex,
    /// Hull shader.
    Hull,
    /// Domain shader.
    Domain,
    /// Geometry shader.
    Geometry,
    /// Pixel shader.
    Pixel,
    /// Compute shader.
    Compute,
}

/// A class of binding slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BindClass {
    /// Input-assembler vertex buffers.
    VertexBuffer,
    /// The input-assembler index buffer.
    IndexBuffer,
    /// The input element layout.
    InputLayout,
    /// A stage's shader.
    Shader(Stage),
    /// A stage's constant buffers.
    ConstantBuffer(Stage),
    /// A stage's shader-resource views.
    ShaderResource(Stage),
    /// A stage's samplers.
    Sampler(Stage),
    /// Output-merger render targets.
    RenderTarget,
    /// Output-merger depth-stencil view.
    DepthStencil,
    /// Unordered-access views.
    UnorderedAccess,
    /// Blend state.
    BlendState,
    /// Depth-stencil state.
    DepthStencilState,
    /// Rasterizer state.
    RasterizerState,
    /// Stream-output targets (SOSetTargets): the buffers the geometry stage writes, slots 0
    /// to 3. Bound like any object, so a destroyed target stays in the allocation list of
    /// every buffer submitted while it is set (R-D1).
    StreamOutput,
    /// The predicate (SetPredication): a predicate or occlusion-predicate query, slot 0.
    /// Bound like any object, so the query outlives every buffer that may test it (R-D1).
    Predicate,
}

/// One binding slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BindPoint {
    /// The slot class.
    pub class: BindClass,
    /// The slot index inside the class.
    pub slot: u16,
}

impl BindPoint {
    /// A binding point.
    pub const fn new(class: BindClass, slot: u16) -> Self {
        BindPoint { class, slot }
    }
}

/// A context's current bindings, sorted by point. Small (tens of entries): a sorted vector
/// beats a hash map here and keeps its capacity across clears, so steady state allocates
/// nothing.
#[derive(Clone, Debug, Default)]
pub(crate) struct Bindings {
    entries: Vec<(BindPoint, AnyHandle)>,
}

impl Bindings {
    /// What is bound at `point`.
    pub(crate) fn get(&self, point: BindPoint) -> Option<AnyHandle> {
        self.entries
            .binary_search_by(|(p, _)| p.cmp(&point))
            .ok()
            .map(|i| self.entries[i].1)
    }

    /// Binds `object` at `point` (`None` unbinds).
    pub(crate) fn set(&mut self, point: BindPoint, object: Option<AnyHandle>) {
        match (
            self.entries.binary_search_by(|(p, _)| p.cmp(&point)),
            object,
        ) {
            (Ok(i), Some(h)) => self.entries[i].1 = h,
            (Ok(i), None) => {
                self.entries.remove(i);
            }
            (Err(i), Some(h)) => self.entries.insert(i, (point, h)),
            (Err(_), None) => {}
        }
    }

    /// Every binding, sorted by point.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (BindPoint, AnyHandle)> + '_ {
        self.entries.iter().copied()
    }

    /// Whether nothing is bound.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Unbinds everything (clear-state), keeping the capacity.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }
}

/// A context's bindings as a state-refresh query answers them (R-C1, R-C3), handed to the
/// driver's hooks.
#[derive(Clone, Copy, Debug)]
pub struct StateView<'a> {
    bindings: Option<&'a Bindings>,
}

impl<'a> StateView<'a> {
    pub(crate) fn of(bindings: &'a Bindings) -> Self {
        StateView {
            bindings: Some(bindings),
        }
    }

    /// Nothing bound.
    pub const fn empty() -> Self {
        StateView { bindings: None }
    }

    /// What is bound at `point`.
    pub fn get(&self, point: BindPoint) -> Option<AnyHandle> {
        self.bindings.and_then(|b| b.get(point))
    }

    /// How many points have something bound.
    pub fn len(&self) -> usize {
        self.bindings.map_or(0, |b| b.entries.len())
    }

    /// Whether nothing is bound.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every binding, sorted by point.
    pub fn iter(&self) -> impl Iterator<Item = (BindPoint, AnyHandle)> + 'a {
        self.bindings
            .into_iter()
            .flat_map(|b| b.entries.iter().copied())
    }
}
