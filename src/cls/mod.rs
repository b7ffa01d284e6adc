//! A deferred context's context-local handles (R-H1..R-H5).
//!
//! On the first use of an object in a recording its context-local handle is opened: the
//! dependency's handle first (a view's resource, R-H3), then the size the driver answers for
//! it is checked against the handle-size table (R-H4: any other size is `InvalidArg`), a
//! zeroed block of that size comes from the context's bucket allocator, and the driver's
//! open hook gets the immediate-context object and the dependency's context-local data only
//! (R-H5). The open handle *holds* its immediate-context object, so the IC handle is the
//! first created and the last destroyed (R-H2).
//!
//! The open handles are a vector in the order they were opened: handles are only ever closed
//! all together (Finish, Abandon), last opened first, so dependents close before their
//! dependencies (R-H3). Later uses find a handle in O(1) without hashing: a two-level table
//! indexed by the object's registry slot gives its position in that vector. Closing leaves
//! the table as it is: a lookup compares the handle at the position an entry names, which
//! tells a stale entry apart, and the next open of that slot overwrites it.

pub mod bucket;
pub(crate) mod local_handles;
mod recent;

use crossbeam_epoch::Guard;
use scopeguard::ScopeGuard;

use crate::bind::StateView;
use crate::cls::bucket::{Block, BucketAllocator};
use crate::cls::recent::RecentHandles;
use crate::driver::Driver;
use crate::error::{AppError, Error, Result};
use crate::handle::{AnyHandle, HandleSizeTable, HandleType};
use crate::registry::{HeldEntry, ObjectView, Registry};

/// Entries in one page of the slot-to-position table: 512 bytes of `u32`, so a context that
/// names a few objects keeps little, while the pages a large recording touches are still
/// whole cache-line runs.
const TABLE_PAGE: usize = 128;

struct LocalHandle<D: Driver> {
    /// The hold on the object (R-H2), with its handle: reached without a lookup.
    held: HeldEntry<D>,
    ty: HandleType,
    /// The length of `block`'s bytes, kept so that a use reaches them without the
    /// allocator's class lookup (it fits in the padding after `ty`).
    len: u32,
    /// The driver's handle memory; none on an emulated context, which only holds.
    block: Option<Block>,
}

/// The open context-local handles of one deferred context.
pub(crate) struct ClsTable<D: Driver> {
    /// Registry slot -> position in `open` + 1 (0: not open), in lazily allocated pages.
    table: Vec<Option<Box<[u32; TABLE_PAGE]>>>,
    /// The open handles, in the order they were opened.
    open: Vec<LocalHandle<D>>,
    bucket: BucketAllocator,
    /// The dependency's context-local bytes, copied for the open hook (capacity kept).
    scratch: Vec<u8>,
    /// Where the handles named last are: most uses skip `table`.
    recent: RecentHandles,
}

/// What opening and closing handles needs from the context.
pub(crate) struct ClsCtx<'a, D: Driver> {
    pub(crate) driver: &'a D,
    /// The driver's state of the context; `None` on an emulated context (a driver without
    /// command lists): handles then only hold their objects, and no hook runs.
    pub(crate) dc: Option<&'a mut D::Deferred>,
    pub(crate) registry: &'a Registry<D>,
    pub(crate) guard: &'a Guard,
}

impl<D: Driver> ClsTable<D> {
    pub(crate) fn new(sizes: &HandleSizeTable) -> Result<Self> {
        Ok(ClsTable {
            table: Vec::new(),
            open: Vec::new(),
            bucket: BucketAllocator::new(sizes)?,
            scratch: Vec::new(),
            recent: RecentHandles::default(),
        })
    }

    /// How many handles are open.
    pub(crate) fn len(&self) -> usize {
        self.open.len()
    }

    /// Memory the table keeps: its bucket pages, its slot-to-position pages and its vectors.
    pub(crate) fn retained_bytes(&self) -> usize {
        let pages = self.table.iter().flatten().count();
        self.bucket.stats().bytes_reserved
            + pages * core::mem::size_of::<[u32; TABLE_PAGE]>()
            + self.table.capacity() * core::mem::size_of::<Option<Box<[u32; TABLE_PAGE]>>>()
            + self.open.capacity() * core::mem::size_of::<LocalHandle<D>>()
            + self.scratch.capacity()
    }

    /// Gives back bucket pages down to the high watermark (R-A2); the context counts what
    /// went from its retained bytes.
    pub(crate) fn trim(&mut self) {
        self.bucket.trim();
    }

    /// The object and context-local memory of `handle`'s open handle, if it is open and has
    /// memory (not on an emulated context).
    #[inline]
    pub(crate) fn local(&mut self, handle: AnyHandle) -> Option<(ObjectView<'_, D>, &mut [u8])> {
        let at = self.position_of(handle)?;
        let open = &mut self.open[at];
        let bytes = self.bucket.bytes_mut(open.block.as_mut()?).ok()?;
        Some((open.held.view(), bytes))
    }

    /// Where `handle`'s open context-local handle is in `open`, if it is open.
    #[inline]
    fn position_of(&self, handle: AnyHandle) -> Option<usize> {
        match self.recent.find(handle) {
            Some(at) => Some(at),
            None => self.position_in_table(handle),
        }
    }

    /// [`ClsTable::position_of`] for a handle not among the recent ones: the slot table, and
    /// the handle remembered if it is open.
    #[inline]
    fn position_in_table(&self, handle: AnyHandle) -> Option<usize> {
        let slot = handle.slot() as usize;
        let page = self.table.get(slot / TABLE_PAGE)?.as_ref()?;
        // 0 (not open) wraps to a position past any table's end, which `get` refuses.
        let at = page[slot % TABLE_PAGE].wrapping_sub(1) as usize;
        // An entry outlives its handle's close (`forget_closed`): the handle at its position
        // tells a stale entry from the open handle's.
        (self.open.get(at)?.held.handle() == handle).then(|| {
            self.recent.note(handle, at);
            at
        })
    }

    #[inline(always)]
    fn set_position(&mut self, handle: AnyHandle, value: u32) {
        let slot = handle.slot() as usize;
        let page = slot / TABLE_PAGE;
        if self.table.len() <= page {
            self.table.resize_with(page + 1, || None);
        }
        let page = match &mut self.table[page] {
            Some(page) => page,
            empty => empty.insert(Box::new([0; TABLE_PAGE])),
        };
        page[slot % TABLE_PAGE] = value;
    }

    /// Forgets a closing handle among the recent ones, whose matches are not checked
    /// against `open`. Its entry in the slot-to-position table stays: a lookup checks the
    /// handle at the position an entry names ([`ClsTable::position_in_table`]), which is
    /// another handle, or none, once this one closed; the next open of the slot overwrites
    /// it.
    #[inline(always)]
    fn forget_closed(&mut self, handle: AnyHandle) {
        self.recent.forget(handle);
    }

    /// Uses `handle`, which the application named, in the recording: it must be live (an
    /// object the application destroyed cannot be named again, even if this recording
    /// still holds it). Opens its context-local handle on first use (dependency first), else
    /// tells the driver of the use.
    pub(crate) fn use_object(&mut self, ctx: &mut ClsCtx<'_, D>, handle: AnyHandle) -> Result<()> {
        let Some(at) = self.position_of(handle) else {
            return self.open_new(ctx, handle, false).map(|_| ());
        };
        if ctx.registry.is_removed() {
            return Err(Error::DeviceRemoved);
        }
        self.use_live_at(ctx.driver, ctx.dc.as_deref_mut(), at)
    }

    /// Opens the context-local handle of `handle`, which the application named and which
    /// [`ClsTable::find_open`] did not find open: its first use in the recording.
    #[inline]
    pub(crate) fn use_first(&mut self, ctx: &mut ClsCtx<'_, D>, handle: AnyHandle) -> Result<()> {
        debug_assert!(self.position_of(handle).is_none());
        self.open_new(ctx, handle, false).map(|_| ())
    }

    /// Where `handle`'s context-local handle is, if it is open in this recording: one indexed
    /// load and the comparison of the whole handle, generation included. Needs no pin: the
    /// open handle holds its object (R-H2).
    #[inline]
    pub(crate) fn find_open(&self, handle: AnyHandle) -> Option<usize> {
        self.position_of(handle)
    }

    /// The object of the open handle at `at` ([`ClsTable::find_open`]).
    #[inline]
    pub(crate) fn view_at(&self, at: usize) -> ObjectView<'_, D> {
        self.open[at].held.view()
    }

    /// Uses the open handle at `at` ([`ClsTable::find_open`]) again, for an object the
    /// application named: it must still be live; the driver hears the use with the handle's
    /// context-local memory (none on an emulated context, `dc` `None`). The handle is
    /// reached once for both.
    #[inline]
    pub(crate) fn use_live_at(
        &mut self,
        driver: &D,
        dc: Option<&mut D::Deferred>,
        at: usize,
    ) -> Result<()> {
        let local = &mut self.open[at];
        local.held.entry().check_live()?;
        Self::hear_use(&mut self.bucket, driver, dc, local);
        Ok(())
    }

    /// Uses the open handle at `at` ([`ClsTable::find_open`]) again, for an object the caller
    /// found live already: the driver hears the use with the handle's context-local memory
    /// (none on an emulated context, `dc` `None`).
    #[inline]
    pub(crate) fn use_at(&mut self, driver: &D, dc: Option<&mut D::Deferred>, at: usize) {
        Self::hear_use(&mut self.bucket, driver, dc, &mut self.open[at]);
    }

    /// The driver hears the use of the open handle `local`, with its context-local memory.
    #[inline(always)]
    fn hear_use(
        bucket: &mut BucketAllocator,
        driver: &D,
        dc: Option<&mut D::Deferred>,
        local: &mut LocalHandle<D>,
    ) {
        let (Some(dc), Some(block)) = (dc, local.block.as_mut()) else {
            return;
        };
        // SAFETY: an open handle's block is this table's allocator's, freed only when the
        // handle closes, and `len` is the length its allocation answered (`open_new`).
        let bytes = unsafe { bucket.bytes_mut_of_len(block, local.len as usize) };
        driver.use_local(dc, local.ty, local.held.entry().object(), bytes);
    }

    /// Uses `handle`, whose context-local handle is open in this recording (a binding being
    /// restored): its hold keeps the object, so it need not be live. An application error if
    /// it is not open.
    pub(crate) fn use_open(&mut self, ctx: &mut ClsCtx<'_, D>, handle: AnyHandle) -> Result<()> {
        let at = self.position_of(handle).ok_or(AppError::InvalidState)?;
        if ctx.registry.is_removed() {
            return Err(Error::DeviceRemoved);
        }
        let local = &mut self.open[at];
        let (Some(dc), Some(block)) = (ctx.dc.as_deref_mut(), local.block.as_mut()) else {
            return Ok(());
        };
        let bytes = self.bucket.bytes_mut(block)?;
        ctx.driver
            .use_local(dc, local.ty, local.held.entry().object(), bytes);
        Ok(())
    }

    /// Uses `handle`, whose object this context still holds though its handle may be closed
    /// (a binding carried over a Finish, R-C5): opened if it is not open, used otherwise,
    /// even if the application destroyed it meanwhile (the binding kept it, as D3D's
    /// references do).
    pub(crate) fn use_held(&mut self, ctx: &mut ClsCtx<'_, D>, handle: AnyHandle) -> Result<()> {
        match self.position_of(handle) {
            Some(_) => self.use_open(ctx, handle),
            None => {
                if ctx.registry.is_removed() {
                    return Err(Error::DeviceRemoved);
                }
                self.open_new(ctx, handle, true).map(drop)
            }
        }
    }

    /// The position of `handle`'s context-local handle, opened now if it is not open yet
    /// (for a view's resource: see [`ClsTable::open_new`]).
    fn dependency_handle(&mut self, ctx: &mut ClsCtx<'_, D>, handle: AnyHandle) -> Result<usize> {
        match self.position_of(handle) {
            Some(at) => Ok(at),
            None => self.open_new(ctx, handle, true),
        }
    }

    /// Opens `handle`'s context-local handle, which is not open; returns its position.
    /// `dependency` says it is opened for a dependent (a view's resource): then it only has
    /// to be held (by the live view), not live itself, since a view keeps a resource the
    /// application already destroyed (R-H3).
    fn open_new(
        &mut self,
        ctx: &mut ClsCtx<'_, D>,
        handle: AnyHandle,
        dependency: bool,
    ) -> Result<usize> {
        let view = if dependency {
            ctx.registry.held(handle, ctx.guard)?
        } else {
            ctx.registry.live(handle, ctx.guard)?
        };
        let dependency = match view.dependency() {
            Some(dep) => Some(self.dependency_handle(ctx, dep)?),
            None => None,
        };
        let ty = view.ty();
        let Some(dc) = ctx.dc.as_deref_mut() else {
            // Emulated: the handle is its hold alone.
            let held = HeldEntry::take(view).ok_or(AppError::StaleHandle)?;
            return Ok(self.push_open(handle, held, ty, 0, None));
        };
        // Found once, when the object was created (R-H4); none when the table did not list
        // the driver's answer.
        let class = view.entry().local_class().ok_or(Error::InvalidArg)?;
        // The dependency's context-local bytes, copied for the open hook (R-H5).
        if let Some(dep) = dependency {
            self.scratch.clear();
            if let Some(block) = &self.open[dep].block {
                self.scratch.extend_from_slice(self.bucket.bytes(block)?);
            }
        }
        // From here until the handle is in the table, a failure or a panic gives back the
        // hold and the block.
        let held = HeldEntry::take(view).ok_or(AppError::StaleHandle)?;
        let held = scopeguard::guard(held, HeldEntry::release);
        let (block, len) = self.bucket.alloc_class_len(class)?;
        let mut block = scopeguard::guard((&mut self.bucket, block), |(bucket, block)| {
            let _ = bucket.free(block);
        });
        let (bucket, block_ref) = &mut *block;
        // SAFETY: the block was just allocated from this allocator, which answered `len` as
        // its length.
        let local = unsafe { bucket.bytes_mut_of_len(block_ref, len) };
        // At most `HandleSizeTable::MAX_HANDLE_SIZE` (1 MiB), as the table that made the
        // block's class requires (R-H4): it fits.
        let len = len as u32;
        let dep_bytes = dependency.map(|_| &self.scratch[..]);
        ctx.driver
            .open_local(dc, ty, view.object(), dep_bytes, local)?;
        let (_, block) = ScopeGuard::into_inner(block);
        let held = ScopeGuard::into_inner(held);
        Ok(self.push_open(handle, held, ty, len, Some(block)))
    }

    /// Puts an opened handle in the table; returns its position.
    #[inline]
    fn push_open(
        &mut self,
        handle: AnyHandle,
        held: HeldEntry<D>,
        ty: HandleType,
        len: u32,
        block: Option<Block>,
    ) -> usize {
        let at = self.open.len();
        self.open.push(LocalHandle {
            held,
            ty,
            len,
            block,
        });
        self.set_position(handle, at as u32 + 1);
        at
    }

    /// Closes every open handle, dependents first (R-H3, R-C1, R-C2); `state` is what
    /// state-refresh queries answer meanwhile. Each closed handle's hold on its object is
    /// passed to `keep` (a command list takes it) or released when `keep` is `None`.
    /// Needs no pin: every handle reaches its object through its hold.
    ///
    /// After device destruction too: an open handle holds its object, which the drain left
    /// to its holders (R-D3), so every object outlives its handles (R-H2).
    pub(crate) fn close_all(
        &mut self,
        driver: &D,
        mut dc: Option<&mut D::Deferred>,
        state: StateView<'_>,
        mut keep: Option<&mut Vec<HeldEntry<D>>>,
    ) {
        while let Some(LocalHandle {
            held,
            ty,
            len,
            block,
            ..
        }) = self.open.pop()
        {
            // Forgotten before the hook runs; its hold and block are handed on even
            // if the hook panics (the handles not reached yet stay open, and a later close
            // takes them).
            self.forget_closed(held.handle());
            let keep_it = keep.as_deref_mut();
            let mut closing =
                scopeguard::guard((&mut self.bucket, block, held), |(bucket, block, held)| {
                    match keep_it {
                        Some(list) => list.push(held),
                        None => held.release(),
                    }
                    if let Some(block) = block {
                        let freed = bucket.free(block);
                        debug_assert!(freed.is_ok(), "blocks come from this context's allocator");
                    }
                });
            let Some(dc) = dc.as_deref_mut() else {
                continue;
            };
            let (bucket, block, held) = &mut *closing;
            if let Some(block) = block {
                // SAFETY: an open handle's block is this table's allocator's, freed only when
                // the handle closes (by the guard above, after this), and `len` is the length
                // its allocation answered (`open_new`).
                let bytes = unsafe { bucket.bytes_mut_of_len(block, len as usize) };
                driver.close_local(dc, ty, held.entry().object(), bytes, state);
            }
        }
    }
}

#[cfg(test)]
#[cfg(feature = "soft")]
mod tests {
    use super::*;
    use crate::handle::HandleSize;
    use crate::soft::null::NullDriver;
    use core::mem::size_of;

    fn handle(slot: u32) -> AnyHandle {
        AnyHandle::from_bits((1 << 32) | u64::from(slot)).unwrap()
    }

    /// A table whose resources' context-local handles are `size` bytes (none: no size).
    fn table(size: Option<usize>) -> ClsTable<NullDriver> {
        let sizes = size.map(|size| HandleSize {
            ty: HandleType::Resource,
            size,
        });
        ClsTable::new(&HandleSizeTable::new(sizes).unwrap()).unwrap()
    }

    /// What the table keeps: the bucket's pages, the slot-to-position pages made, and each
    /// vector's capacity at its element's size (capacities apart, so that no other sum or
    /// product of the terms gives the same total).
    #[test]
    fn retained_bytes_count_the_pages_and_every_vector() {
        let mut cls = table(Some(16));
        assert_eq!(cls.retained_bytes(), 0);
        // Two pages of the slot table made, in a table of three.
        cls.set_position(handle(3), 1);
        cls.set_position(handle(2 * TABLE_PAGE as u32 + 1), 2);
        cls.open.reserve_exact(3);
        cls.scratch.reserve_exact(7);
        let block = cls.bucket.alloc_class_len(0).unwrap().0;
        let reserved = cls.bucket.stats().bytes_reserved;
        assert!(reserved > 0);
        let expected = reserved
            + 2 * size_of::<[u32; TABLE_PAGE]>()
            + cls.table.capacity() * size_of::<Option<Box<[u32; TABLE_PAGE]>>>()
            + cls.open.capacity() * size_of::<LocalHandle<NullDriver>>()
            + cls.scratch.capacity();
        assert_eq!(cls.table.len(), 3);
        assert_eq!(cls.retained_bytes(), expected);
        cls.bucket.free(block).unwrap();
    }

    /// R-A2: a trim gives back the bucket pages past the peak since the last trim.
    #[test]
    fn r_a2_a_trim_gives_back_the_pages_past_the_peak() {
        let mut cls = table(Some(64));
        let blocks: Vec<_> = (0..256)
            .map(|_| cls.bucket.alloc_class_len(0).unwrap().0)
            .collect();
        for block in blocks {
            cls.bucket.free(block).unwrap();
        }
        let peak = cls.retained_bytes();
        cls.trim();
        assert_eq!(
            cls.retained_bytes(),
            peak,
            "the peak since the last trim is kept"
        );
        cls.trim();
        assert!(
            cls.retained_bytes() < peak,
            "nothing used since: {} of {peak} bytes kept",
            cls.retained_bytes()
        );
    }

    /// A closed handle's entry stays in the slot table, and is told apart from an open one
    /// by the handle at the position it names: an entry naming a position that holds no
    /// such handle finds nothing, before and after the handle is forgotten.
    #[test]
    fn a_stale_entry_finds_nothing() {
        let mut cls = table(None);
        let h = handle(5);
        cls.set_position(h, 1);
        assert_eq!(cls.position_in_table(h), None, "nothing open at position 0");
        cls.forget_closed(h);
        assert_eq!(cls.position_of(h), None);
    }
}
