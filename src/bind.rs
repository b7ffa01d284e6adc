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

    /// The point as one number, ordered as points are (`Ord`): the class's place among
    /// the classes (a stage's classes one per stage, in the stages' order) above the
    /// slot. A binding table compares these, one instruction each, where comparing two
    /// points compares classes, stages and slots in turn.
    #[inline]
    pub(crate) const fn key(self) -> u32 {
        let class = match self.class {
            BindClass::VertexBuffer => 0,
            BindClass::IndexBuffer => 1,
            BindClass::InputLayout => 2,
            BindClass::Shader(stage) => 3 + stage as u32,
            BindClass::ConstantBuffer(stage) => 3 + STAGES + stage as u32,
            BindClass::ShaderResource(stage) => 3 + 2 * STAGES + stage as u32,
            BindClass::Sampler(stage) => 3 + 3 * STAGES + stage as u32,
            BindClass::RenderTarget => 3 + 4 * STAGES,
            BindClass::DepthStencil => 4 + 4 * STAGES,
            BindClass::UnorderedAccess => 5 + 4 * STAGES,
            BindClass::BlendState => 6 + 4 * STAGES,
            BindClass::DepthStencilState => 7 + 4 * STAGES,
            BindClass::RasterizerState => 8 + 4 * STAGES,
            BindClass::StreamOutput => 9 + 4 * STAGES,
            BindClass::Predicate => 10 + 4 * STAGES,
        };
        (class << 16) | self.slot as u32
    }

    /// The point whose [`BindPoint::key`] `key` is.
    pub(crate) const fn from_key(key: u32) -> Self {
        BindPoint {
            class: CLASSES[(key >> 16) as usize],
            slot: key as u16,
        }
    }
}

/// The stages, for [`BindPoint::key`]: a stage's classes take one place each per stage.
const STAGES: u32 = 6;

/// Every class at its place in [`BindPoint::key`]: [`BindPoint::from_key`]'s answer, and
/// the list of every class the tests walk.
pub(crate) const CLASSES: [BindClass; 3 + 4 * STAGES as usize + 8] = {
    use BindClass::*;
    use Stage::*;
    [
        VertexBuffer,
        IndexBuffer,
        InputLayout,
        Shader(Vertex),
        Shader(Hull),
        Shader(Domain),
        Shader(Geometry),
        Shader(Pixel),
        Shader(Compute),
        ConstantBuffer(Vertex),
        ConstantBuffer(Hull),
        ConstantBuffer(Domain),
        ConstantBuffer(Geometry),
        ConstantBuffer(Pixel),
        ConstantBuffer(Compute),
        ShaderResource(Vertex),
        ShaderResource(Hull),
        ShaderResource(Domain),
        ShaderResource(Geometry),
        ShaderResource(Pixel),
        ShaderResource(Compute),
        Sampler(Vertex),
        Sampler(Hull),
        Sampler(Domain),
        Sampler(Geometry),
        Sampler(Pixel),
        Sampler(Compute),
        RenderTarget,
        DepthStencil,
        UnorderedAccess,
        BlendState,
        DepthStencilState,
        RasterizerState,
        StreamOutput,
        Predicate,
    ]
};

/// A context's current bindings, sorted by point. Small (tens of entries): a sorted vector
/// beats a hash map here and keeps its capacity across clears, so steady state allocates
/// nothing. Each entry is kept under its point's [`BindPoint::key`], which the search
/// compares.
#[derive(Clone, Default)]
pub(crate) struct Bindings {
    entries: Vec<(u32, AnyHandle)>,
}

/// Each binding with its point, as [`Bindings::iter`] gives them (not the keys).
impl core::fmt::Debug for Bindings {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Bindings {
    /// Where `point` is, or would be, in the sorted entries.
    #[inline]
    fn search(&self, point: BindPoint) -> core::result::Result<usize, usize> {
        let key = point.key();
        self.entries.binary_search_by(|(k, _)| k.cmp(&key))
    }

    /// What is bound at `point`.
    #[inline]
    pub(crate) fn get(&self, point: BindPoint) -> Option<AnyHandle> {
        self.search(point).ok().map(|i| self.entries[i].1)
    }

    /// Binds `object` at `point` (`None` unbinds).
    #[inline]
    pub(crate) fn set(&mut self, point: BindPoint, object: Option<AnyHandle>) {
        self.replace(point, object);
    }

    /// Binds `object` at `point` (`None` unbinds) and answers what was bound there: one
    /// search for both.
    #[inline]
    pub(crate) fn replace(
        &mut self,
        point: BindPoint,
        object: Option<AnyHandle>,
    ) -> Option<AnyHandle> {
        match (self.search(point), object) {
            (Ok(i), Some(h)) => Some(core::mem::replace(&mut self.entries[i].1, h)),
            (Ok(i), None) => Some(self.entries.remove(i).1),
            (Err(i), Some(h)) => {
                self.entries.insert(i, (point.key(), h));
                None
            }
            (Err(_), None) => None,
        }
    }

    /// Every binding, sorted by point.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (BindPoint, AnyHandle)> + '_ {
        self.entries
            .iter()
            .map(|&(key, handle)| (BindPoint::from_key(key), handle))
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
        self.bindings.into_iter().flat_map(|b| b.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points() -> Vec<BindPoint> {
        CLASSES
            .into_iter()
            .flat_map(|class| [0, 1, 7, 255, 256, u16::MAX].map(|slot| BindPoint { class, slot }))
            .collect()
    }

    fn handle(n: u32) -> AnyHandle {
        AnyHandle::from_bits((1 << 32) | u64::from(n)).expect("a generation of 1")
    }

    #[test]
    fn r_c1_a_points_key_gives_the_point_back_and_keys_order_as_points_do() {
        let points = points();
        for &p in &points {
            assert_eq!(BindPoint::from_key(p.key()), p, "{p:?}");
            for &q in &points {
                assert_eq!(p.key().cmp(&q.key()), p.cmp(&q), "{p:?} against {q:?}");
            }
        }
    }

    #[test]
    fn r_c1_a_binding_replaced_answers_what_was_bound_and_the_table_stays_sorted() {
        let mut bindings = Bindings::default();
        let points = points();
        // Bound in reverse order: each insert lands before the others.
        for (n, &p) in points.iter().enumerate().rev() {
            assert_eq!(bindings.replace(p, Some(handle(n as u32))), None);
        }
        let listed: Vec<_> = bindings.iter().map(|(p, _)| p).collect();
        assert_eq!(listed, points, "sorted by point");
        let sv = points[5];
        assert_eq!(bindings.get(sv), Some(handle(5)));
        assert_eq!(bindings.replace(sv, Some(handle(99))), Some(handle(5)));
        assert_eq!(bindings.get(sv), Some(handle(99)));
        assert_eq!(StateView::of(&bindings).get(sv), Some(handle(99)));
        assert_eq!(bindings.replace(sv, None), Some(handle(99)));
        assert_eq!(bindings.get(sv), None);
        assert_eq!(bindings.replace(sv, None), None);
        assert_eq!(StateView::of(&bindings).len(), points.len() - 1);
        bindings.set(sv, Some(handle(7)));
        assert_eq!(bindings.iter().nth(5), Some((sv, handle(7))));
        assert_eq!(
            StateView::of(&bindings).iter().collect::<Vec<_>>(),
            bindings.iter().collect::<Vec<_>>()
        );
        let shown = format!("{:?}", StateView::of(&bindings));
        assert!(
            shown.contains("BindPoint { class: VertexBuffer, slot: 0 }"),
            "{shown}"
        );
        bindings.clear();
        assert!(bindings.is_empty() && StateView::of(&bindings).is_empty());
    }
}
