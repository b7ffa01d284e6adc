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
    /// slot. A binding table's spilled points are compared by these, one instruction each,
    /// where comparing two points compares classes, stages and slots in turn.
    #[inline(always)]
    pub(crate) const fn key(self) -> u32 {
        (class_index(self.class) << 16) | self.slot as u32
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

/// A class's place in [`CLASSES`]: a stage's classes one place per stage, in the stages'
/// order.
#[inline(always)]
const fn class_index(class: BindClass) -> u32 {
    let (first, stage) = match class {
        BindClass::VertexBuffer => (0, 0),
        BindClass::IndexBuffer => (1, 0),
        BindClass::InputLayout => (2, 0),
        BindClass::Shader(stage) => (3, stage as u32),
        BindClass::ConstantBuffer(stage) => (3 + STAGES, stage as u32),
        BindClass::ShaderResource(stage) => (3 + 2 * STAGES, stage as u32),
        BindClass::Sampler(stage) => (3 + 3 * STAGES, stage as u32),
        BindClass::RenderTarget => (3 + 4 * STAGES, 0),
        BindClass::DepthStencil => (4 + 4 * STAGES, 0),
        BindClass::UnorderedAccess => (5 + 4 * STAGES, 0),
        BindClass::BlendState => (6 + 4 * STAGES, 0),
        BindClass::DepthStencilState => (7 + 4 * STAGES, 0),
        BindClass::RasterizerState => (8 + 4 * STAGES, 0),
        BindClass::StreamOutput => (9 + 4 * STAGES, 0),
        BindClass::Predicate => (10 + 4 * STAGES, 0),
    };
    first + stage
}

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

/// How many slots of each class (at its place in [`CLASSES`]) a binding table keeps at their
/// own place, found by index: Direct3D 11's counts (32 vertex buffers; per stage one
/// shader, 14 constant buffers, 128 shader-resource views, 16 samplers; 8 render targets;
/// 64 unordered-access views; 4 stream-output targets; one of each other class). A slot past
/// its class's count is kept too, in a short sorted list searched instead.
const DIRECT_SLOTS: [u16; CLASSES.len()] = {
    let mut slots = [1; CLASSES.len()];
    let mut class = 0;
    while class < CLASSES.len() {
        slots[class] = match CLASSES[class] {
            BindClass::VertexBuffer => 32,
            BindClass::ConstantBuffer(_) => 14,
            BindClass::ShaderResource(_) => 128,
            BindClass::Sampler(_) => 16,
            BindClass::RenderTarget => 8,
            BindClass::UnorderedAccess => 64,
            BindClass::StreamOutput => 4,
            _ => 1,
        };
        class += 1;
    }
    slots
};

/// Where each class's direct slots begin in a table's slots, and (last) their total.
const DIRECT_AT: [usize; CLASSES.len() + 1] = {
    let mut at = [0; CLASSES.len() + 1];
    let mut class = 0;
    while class < CLASSES.len() {
        at[class + 1] = at[class] + DIRECT_SLOTS[class] as usize;
        class += 1;
    }
    at
};

/// Each class's first direct slot and its count of them, together: one load for a bind.
const DIRECT: [(u16, u16); CLASSES.len()] = {
    let mut direct = [(0, 0); CLASSES.len()];
    let mut class = 0;
    while class < CLASSES.len() {
        direct[class] = (DIRECT_AT[class] as u16, DIRECT_SLOTS[class]);
        class += 1;
    }
    direct
};

/// Direct slots of every class together.
const DIRECT_TOTAL: usize = DIRECT_AT[CLASSES.len()];

/// Words of the bit set that marks the direct slots bound.
const BOUND_WORDS: usize = DIRECT_TOTAL.div_ceil(64);

/// The class (its place in [`CLASSES`]) of each direct slot.
const CLASS_OF: [u8; DIRECT_TOTAL] = {
    let mut of = [0; DIRECT_TOTAL];
    let mut class = 0;
    while class < CLASSES.len() {
        let mut i = DIRECT_AT[class];
        while i < DIRECT_AT[class + 1] {
            of[i] = class as u8;
            i += 1;
        }
        class += 1;
    }
    of
};

impl BindPoint {
    /// The point's place among a binding table's direct slots, if it has one.
    #[inline(always)]
    fn direct(self) -> Option<usize> {
        let (at, slots) = DIRECT[class_index(self.class) as usize];
        (self.slot < slots).then_some(at as usize + self.slot as usize)
    }

    /// The key (`BindPoint::key`) of direct slot `at`.
    fn key_of_direct(at: usize) -> u32 {
        let class = CLASS_OF[at] as usize;
        ((class as u32) << 16) | (at - DIRECT_AT[class]) as u32
    }
}

/// A context's current bindings (R-C1, R-C3). A bind finds its point by index, whatever
/// is bound: every slot of Direct3D 11's counts ([`DIRECT_SLOTS`]) has its own place, made
/// at the table's first bind and kept across clears, so steady state allocates nothing. A
/// bit set marks the places bound, which walking and clearing follow, in points' order.
/// The rare slot past its class's count is kept in a sorted list, under its point's
/// [`BindPoint::key`].
#[derive(Clone, Default)]
pub(crate) struct Bindings {
    /// Each direct slot's binding; empty until the first bind.
    slots: Box<[Option<AnyHandle>]>,
    /// Bit `i` set: `slots[i]` holds a binding.
    bound: [u64; BOUND_WORDS],
    /// How many direct slots hold a binding.
    direct_len: usize,
    /// The bindings past their class's direct slots, sorted by key.
    spilled: Vec<(u32, AnyHandle)>,
    /// Whether a clear found bindings since the last [`Bindings::trim`]: a context that
    /// binds keeps its places, one that stopped binding gives them back.
    cleared_bindings: bool,
}

/// Each binding with its point, as [`Bindings::iter`] gives them (not the keys).
impl core::fmt::Debug for Bindings {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Bindings {
    /// Where a spilled `point` is, or would be, in the sorted list.
    fn search_spilled(&self, point: BindPoint) -> core::result::Result<usize, usize> {
        let key = point.key();
        self.spilled.binary_search_by(|(k, _)| k.cmp(&key))
    }

    /// What is bound at `point`.
    #[inline]
    pub(crate) fn get(&self, point: BindPoint) -> Option<AnyHandle> {
        match point.direct() {
            Some(at) => self.slots.get(at).copied().flatten(),
            None => self.get_spilled(point),
        }
    }

    #[cold]
    fn get_spilled(&self, point: BindPoint) -> Option<AnyHandle> {
        self.search_spilled(point).ok().map(|i| self.spilled[i].1)
    }

    /// Binds `object` at `point` (`None` unbinds).
    #[inline]
    pub(crate) fn set(&mut self, point: BindPoint, object: Option<AnyHandle>) {
        self.replace(point, object);
    }

    /// Binds `object` at `point` (`None` unbinds) and answers what was bound there.
    #[inline(always)]
    pub(crate) fn replace(
        &mut self,
        point: BindPoint,
        object: Option<AnyHandle>,
    ) -> Option<AnyHandle> {
        let Some(at) = point.direct() else {
            return self.replace_spilled(point, object);
        };
        let Some(slot) = self.slots.get_mut(at) else {
            return self.replace_first(at, object);
        };
        let old = core::mem::replace(slot, object);
        if old.is_some() != object.is_some() {
            self.toggle(at, old.is_none());
        }
        old
    }

    /// Marks direct slot `at` bound (`bound`) or unbound: it was the other.
    #[inline(always)]
    fn toggle(&mut self, at: usize, bound: bool) {
        self.bound[at / 64] ^= 1 << (at % 64);
        match bound {
            true => self.direct_len += 1,
            false => self.direct_len -= 1,
        }
    }

    /// [`Bindings::replace`] at direct slot `at` of a table that has no places yet: made
    /// for a bind, none for an unbind.
    #[cold]
    fn replace_first(&mut self, at: usize, object: Option<AnyHandle>) -> Option<AnyHandle> {
        if object.is_some() {
            self.slots = vec![None; DIRECT_TOTAL].into_boxed_slice();
            self.slots[at] = object;
            self.toggle(at, true);
        }
        None
    }

    #[cold]
    fn replace_spilled(
        &mut self,
        point: BindPoint,
        object: Option<AnyHandle>,
    ) -> Option<AnyHandle> {
        match (self.search_spilled(point), object) {
            (Ok(i), Some(h)) => Some(core::mem::replace(&mut self.spilled[i].1, h)),
            (Ok(i), None) => Some(self.spilled.remove(i).1),
            (Err(i), Some(h)) => {
                self.spilled.insert(i, (point.key(), h));
                None
            }
            (Err(_), None) => None,
        }
    }

    /// Every binding, sorted by point.
    #[inline]
    pub(crate) fn iter(&self) -> Iter<'_> {
        Iter {
            slots: &self.slots,
            direct: BoundSlots::new(&self.bound, self.direct_len),
            ahead: None,
            spilled: self.spilled.iter(),
        }
    }

    /// How many points have something bound.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.direct_len + self.spilled.len()
    }

    /// Whether nothing is bound.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Unbinds everything (clear-state), keeping the places. Visits the words of the bit
    /// set only until every binding is found: nothing at all for an empty table. Its own
    /// walk rather than [`BoundSlots`]: it zeroes each word as it takes it, where zeroing
    /// the walked words afterwards cost a `memset` call a clear.
    pub(crate) fn clear(&mut self) {
        self.cleared_bindings |= self.direct_len != 0 || !self.spilled.is_empty();
        let (mut left, mut word) = (self.direct_len, 0);
        while left != 0 {
            let mut bits = core::mem::take(&mut self.bound[word]);
            while bits != 0 {
                self.slots[word * 64 + bits.trailing_zeros() as usize] = None;
                bits &= bits - 1;
                left -= 1;
            }
            word += 1;
        }
        self.direct_len = 0;
        self.spilled.clear();
    }

    /// Memory the table keeps: its places, made at the first bind and kept across clears,
    /// and its spill list's capacity.
    pub(crate) fn retained_bytes(&self) -> usize {
        core::mem::size_of_val::<[Option<AnyHandle>]>(&self.slots)
            + self.spilled.capacity() * core::mem::size_of::<(u32, AnyHandle)>()
    }

    /// Gives back the places and the spill list (R-A2) where nothing is bound and no clear
    /// found a binding in what was `recorded` since the last trim: a context that stopped
    /// binding keeps nothing, one that binds keeps its table. As the list cache does, a
    /// trim after nothing recorded keeps what the last window needed. The next bind makes
    /// them again.
    pub(crate) fn trim(&mut self, recorded: bool) {
        if !recorded {
            return;
        }
        let idle = !core::mem::take(&mut self.cleared_bindings);
        if idle && self.direct_len == 0 && self.spilled.is_empty() {
            self.slots = Box::default();
            self.spilled = Vec::new();
        }
    }
}

/// Every binding of a table, sorted by point ([`Bindings::iter`]): the direct slots' in
/// their order, merged with the spilled ones'.
pub(crate) struct Iter<'a> {
    slots: &'a [Option<AnyHandle>],
    direct: BoundSlots<'a>,
    /// The next direct binding, found while a spilled one went first.
    ahead: Option<(u32, AnyHandle)>,
    spilled: core::slice::Iter<'a, (u32, AnyHandle)>,
}

impl Iter<'_> {
    /// The next direct binding, with its key.
    #[inline]
    fn next_direct(&mut self) -> Option<(u32, AnyHandle)> {
        if let Some(ahead) = self.ahead.take() {
            return Some(ahead);
        }
        let at = self.direct.next()?;
        let handle = self.slots[at];
        debug_assert!(
            handle.is_some(),
            "a marked place holds a binding (`toggle`)"
        );
        Some((BindPoint::key_of_direct(at), handle?))
    }
}

impl Iterator for Iter<'_> {
    type Item = (BindPoint, AnyHandle);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (key, handle) = match (self.next_direct(), self.spilled.as_slice().first()) {
            (Some(direct), Some(&spilled)) if spilled.0 < direct.0 => {
                self.ahead = Some(direct);
                self.spilled.next();
                spilled
            }
            (Some(direct), _) => direct,
            (None, _) => *self.spilled.next()?,
        };
        Some((BindPoint::from_key(key), handle))
    }
}

/// The places a binding table's bit set marks, in order; stops at the last of `left`.
struct BoundSlots<'a> {
    bound: &'a [u64; BOUND_WORDS],
    /// The word `bits` came from.
    word: usize,
    /// What is left of that word's bits.
    bits: u64,
    /// Places still to find.
    left: usize,
}

impl<'a> BoundSlots<'a> {
    /// The `len` places `bound` marks.
    #[inline]
    fn new(bound: &'a [u64; BOUND_WORDS], len: usize) -> Self {
        BoundSlots {
            bound,
            word: 0,
            bits: bound[0],
            left: len,
        }
    }
}

impl Iterator for BoundSlots<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.left == 0 {
            return None;
        }
        while self.bits == 0 {
            self.word += 1;
            self.bits = *self.bound.get(self.word)?;
        }
        let at = self.word * 64 + self.bits.trailing_zeros() as usize;
        self.bits &= self.bits - 1;
        self.left -= 1;
        Some(at)
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
        self.bindings.map_or(0, Bindings::len)
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

    /// Every direct slot of every class and the spilled points past them, bound in a
    /// scrambled order: listed in points' order, each found, counted, and all gone after a
    /// clear, which keeps the places for the next binds (R-C1, R-C3).
    #[test]
    fn r_c3_every_slot_bound_is_listed_in_order_and_cleared() {
        let mut points: Vec<BindPoint> = CLASSES
            .into_iter()
            .enumerate()
            .flat_map(|(c, class)| {
                (0..DIRECT_SLOTS[c] + 2).map(move |slot| BindPoint { class, slot })
            })
            .collect();
        points.push(BindPoint::new(BindClass::Predicate, u16::MAX));
        assert_eq!(points.len(), DIRECT_TOTAL + 2 * CLASSES.len() + 1);
        let mut bindings = Bindings::default();
        for round in 0..2 {
            // A stride prime to the count visits every point once, out of order.
            let n = points.len();
            for i in 0..n {
                let at = (i * 97 + round) % n;
                assert_eq!(bindings.replace(points[at], Some(handle(at as u32))), None);
            }
            assert_eq!(bindings.len(), n);
            let listed: Vec<_> = bindings.iter().collect();
            let expected: Vec<_> = (0..n).map(|i| (points[i], handle(i as u32))).collect();
            assert_eq!(listed, expected);
            for (i, &p) in points.iter().enumerate() {
                assert_eq!(bindings.get(p), Some(handle(i as u32)), "{p:?}");
            }
            bindings.clear();
            assert!(bindings.is_empty());
            assert_eq!(bindings.iter().count(), 0);
            assert!(points.iter().all(|&p| bindings.get(p).is_none()));
            assert_eq!(bindings.slots.len(), DIRECT_TOTAL, "the places are kept");
        }
    }

    /// Direct3D 11's slots have places of their own and the slot past each class's count
    /// spills: a bind of any slot a game uses indexes, never searches.
    #[test]
    fn r_c1_direct3d_11s_slots_have_places_and_the_rest_spills() {
        use BindClass::*;
        let counts = [
            (VertexBuffer, 32),
            (IndexBuffer, 1),
            (InputLayout, 1),
            (Shader(Stage::Hull), 1),
            (ConstantBuffer(Stage::Vertex), 14),
            (ShaderResource(Stage::Pixel), 128),
            (Sampler(Stage::Compute), 16),
            (RenderTarget, 8),
            (DepthStencil, 1),
            (UnorderedAccess, 64),
            (BlendState, 1),
            (DepthStencilState, 1),
            (RasterizerState, 1),
            (StreamOutput, 4),
            (Predicate, 1),
        ];
        for (class, count) in counts {
            let last = BindPoint::new(class, count - 1);
            let past = BindPoint::new(class, count);
            assert!(last.direct().is_some(), "{last:?}");
            assert_eq!(past.direct(), None, "{past:?}");
            let mut bindings = Bindings::default();
            bindings.set(last, Some(handle(1)));
            bindings.set(past, Some(handle(2)));
            assert_eq!((bindings.direct_len, bindings.spilled.len()), (1, 1));
        }
        // 32 + 1 + 1, and per stage 1 + 14 + 128 + 16, then 8 + 1 + 64 + 1 + 1 + 1 + 4 + 1.
        assert_eq!(DIRECT_TOTAL, 34 + 6 * 159 + 81);
    }

    /// A walk of the bound places reads no word of the bit set past the last binding's: an
    /// almost empty table is walked in a word or two, not all of them.
    #[test]
    fn a_walk_stops_at_the_last_binding() {
        let mut bindings = Bindings::default();
        bindings.set(BindPoint::new(BindClass::VertexBuffer, 3), Some(handle(1)));
        let mut walk = BoundSlots::new(&bindings.bound, bindings.direct_len);
        assert_eq!(walk.by_ref().collect::<Vec<_>>(), [3]);
        assert_eq!(walk.word, 0, "no word past the binding's was read");
    }

    /// Unbinding a point nothing was bound at, before the table's first bind, makes no
    /// places; a direct slot unbound leaves the others as they are.
    #[test]
    fn r_c1_an_unbind_of_an_empty_table_allocates_nothing() {
        let mut bindings = Bindings::default();
        let p = BindPoint::new(BindClass::Sampler(Stage::Compute), 3);
        assert_eq!(bindings.replace(p, None), None);
        assert!(bindings.slots.is_empty());
        let q = BindPoint::new(BindClass::Sampler(Stage::Compute), 4);
        bindings.set(p, Some(handle(1)));
        bindings.set(q, Some(handle(2)));
        assert_eq!(bindings.replace(p, None), Some(handle(1)));
        assert_eq!(bindings.replace(p, None), None);
        assert_eq!(bindings.len(), 1);
        assert_eq!(bindings.iter().collect::<Vec<_>>(), [(q, handle(2))]);
    }

    /// R-A2: the table's places and spill list are counted, kept while clears find
    /// bindings or something is bound or nothing was recorded, and given back after a
    /// recorded window without a binding.
    #[test]
    fn r_a2_a_table_unused_through_a_trim_window_is_given_back() {
        let mut bindings = Bindings::default();
        assert_eq!(bindings.retained_bytes(), 0);
        let direct = BindPoint::new(BindClass::VertexBuffer, 0);
        let spilled = BindPoint::new(BindClass::VertexBuffer, 40);
        bindings.set(direct, Some(handle(1)));
        bindings.set(spilled, Some(handle(2)));
        let places = DIRECT_TOTAL * core::mem::size_of::<Option<AnyHandle>>();
        let spill = bindings.spilled.capacity() * core::mem::size_of::<(u32, AnyHandle)>();
        assert!(spill > 0);
        assert_eq!(bindings.retained_bytes(), places + spill);
        // Bound: kept.
        bindings.trim(true);
        bindings.trim(true);
        assert_eq!(bindings.retained_bytes(), places + spill);
        // A clear that found bindings keeps the table through the next trim.
        bindings.clear();
        bindings.trim(true);
        assert_eq!(bindings.retained_bytes(), places + spill);
        // Nothing recorded: kept as the last window needed.
        bindings.trim(false);
        assert_eq!(bindings.retained_bytes(), places + spill);
        // A recorded window without a binding: given back.
        bindings.trim(true);
        assert_eq!(bindings.retained_bytes(), 0);
        // Bound again, it is made again.
        bindings.set(direct, Some(handle(3)));
        assert_eq!(bindings.retained_bytes(), places);
        assert_eq!(bindings.iter().collect::<Vec<_>>(), [(direct, handle(3))]);
    }
}
