//! The device's object table: free-threaded create and destroy (R-F1), lock-free lookups
//! from any thread that turn stale, forged, double-destroyed and other-device handles into
//! application errors (R-E1), and the cache-line split of each object's data (R-L3).
//!
//! # Layout
//! Slots live in pages that never move: page `k` holds `PAGE_BASE << k` slots and is
//! allocated on first use with one CAS (a thread that loses the race frees its page). A slot
//! holds an epoch-managed pointer to the current `Entry`, the links of the free-slot and
//! retire stacks, the retire tag, and the generation its next life will get.
//!
//! An `Entry` puts the data every thread reads (type, generation, the driver's
//! [`Driver::Object`], the lifecycle atomics) first, then, on cache lines of its own, the
//! data only the immediate context's thread touches (the driver's [`Driver::IcData`] and the
//! engine's last-referenced-buffer stamp), so IC writes never invalidate lines that deferred
//! contexts read (R-L3).
//!
//! # An entry's life
//! Two atomics carry it: `state` (who may destroy the object) and `holders` (what keeps it
//! from its real destruction, plus the `FREED` bit once that happened). A slot is linked to
//! one entry per life; the generation tells lives apart.
//!
//! | state | holders | meaning | next, and who moves it |
//! |---|---|---|---|
//! | (slot reserved) | | a create in progress holds the slot | `link` (creating thread) → `LIVE`; a failed create gives the slot back |
//! | `LIVE` | n | live, held by n views, open context-local handles, lists (the immediate context's bindings count in its side, `IcSide::bound`) | `mark_destroyed` (any thread, once: a second is a double destroy, R-E1) → `DESTROYED`, queued for the immediate context |
//! | `DESTROYED` | n > 0 | destroyed by the application, still held: its holders (a list replaying it) use it, lookups for a live object refuse it | the last `release` (any thread) → n = 0 |
//! | `DESTROYED` | 0 | waiting for its buffer's submit (R-D1) and its bindings on the immediate context | `try_seal` (immediate context, once the clock allows and nothing is bound there) → `FREED` |
//! | `LIVE` or `DESTROYED` | any | device destruction | `claim_for_drain` (immediate context) → `CLAIMED`, then `seal` → `FREED` whatever holds it |
//! | any | `FREED` | really destroyed: `destroy_object` ran, nothing can take a hold | `free` (immediate context) unlinks it into the limbo; the slot comes back after the CPU epoch (`reclaim`) |
//!
//! Holds are taken only while `FREED` is clear (`hold` fails after), so a sealed entry gains
//! no holder; only the immediate context seals, unlinks and frees.
//!
//! # Invariant
//! A reader that finds an entry through a slot while pinned may use it until it unpins:
//! entries are unlinked only by the immediate context's thread (the single reclaimer, proven
//! by its `IcToken`) into the device's limbo (`reclaim`), and dropped once crossbeam-epoch
//! says every reader pinned before has unpinned (the CPU clock), or with the device. The
//! generation stored in an entry never
//! changes, so comparing it with the handle's identifies the life exactly; a slot whose
//! generation would wrap is retired, never reused.

mod current_allocation;
pub(crate) mod index_stack;
pub(crate) mod reclaim;
pub(crate) mod removal;
pub(crate) mod retire;
pub(crate) mod tag;

use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::num::NonZeroU32;
use core::ptr::NonNull;

use std::sync::Arc;

use crossbeam_epoch::{self as epoch, Atomic, Guard, Shared};
use crossbeam_utils::CachePadded;

use crate::bind::StateView;
use crate::desc::{BindFlags, Texture2d, Usage};
use crate::driver::Driver;
use crate::error::{AppError, Error, Result};
use crate::handle::{AnyHandle, Handle, HandleType, ObjectKind, MAX_SLOTS};
use crate::kernel::AllocationHandle;
use crate::mapping::CpuMapping;
use crate::primitive::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use crate::registry::current_allocation::CurrentAllocation;
use crate::registry::index_stack::{IndexStack, TakeAllStack, NIL};
use crate::registry::reclaim::Limbo;
use removal::{CreateGate, Removal};

/// Slots in the first page; page `k` holds `PAGE_BASE << k`. 32 keeps a device with a few
/// objects small while 20 pages reach past [`MAX_SLOTS`].
const PAGE_BASE: u32 = 32;
const PAGE_BASE_LOG2: u32 = PAGE_BASE.trailing_zeros();
const PAGES: usize = 20;
const _: () = assert!((PAGE_BASE as u64) * ((1u64 << PAGES) - 1) >= MAX_SLOTS as u64);

/// `Entry::state`: the object is live.
const LIVE: u32 = 0;
/// `Entry::state`: destroyed by the application, waiting for its real destruction.
const DESTROYED: u32 = 1;
/// `Entry::state`: claimed at device destruction by the draining immediate context.
const CLAIMED: u32 = 2;
/// `Entry::holders`: set once an object is really destroyed, so nothing can attach.
const FREED: u32 = 1 << 31;

/// One slot of the registry.
pub(crate) struct Slot<D: Driver> {
    entry: Atomic<Entry<D>>,
    /// Link in the free-slot stack.
    pub(crate) next_free: AtomicU32,
    /// Link in the device's retire stack.
    pub(crate) next_retired: AtomicU32,
    /// The submission-clock tag of the pending destruction (R-D1).
    pub(crate) retire_tag: AtomicU64,
    /// The generation the slot's next life gets; 0 before its first.
    next_generation: AtomicU32,
    /// The allocation of the slot's last entry, kept for its next life (creating and
    /// destroying objects allocates nothing in steady state), tagged with [`WHOLE`] while the
    /// entry in it has not been dropped yet. Written by the reclaimer when it unlinks the
    /// entry, taken by the create that pops the slot after its epoch passed (the free stack
    /// orders the two), which drops the old entry and writes the new one in its place.
    spare: AtomicPtr<Entry<D>>,
}

impl<D: Driver> Slot<D> {
    fn new() -> Self {
        Slot {
            entry: Atomic::null(),
            next_free: AtomicU32::new(NIL),
            next_retired: AtomicU32::new(NIL),
            retire_tag: AtomicU64::new(0),
            next_generation: AtomicU32::new(0),
            spare: AtomicPtr::new(core::ptr::null_mut()),
        }
    }
}

/// The engine's immediate-context-only data of an object.
pub(crate) struct IcSide<D: Driver> {
    /// The newest IC command buffer that referenced the object (0: none).
    pub(crate) last_buffer: u64,
    /// For queries: the buffer in which the newest End was recorded (0: never ended).
    pub(crate) query_end: u64,
    /// The newest IC command buffer in which a Map(DISCARD)'s bytes were handed to the
    /// driver for this resource (its Unmap on the immediate context, or a list that maps it
    /// executed there; 0: none): a Map(NO_OVERWRITE) on the immediate context waits for it
    /// (R-M3), as a driver may carry those bytes to the GPU's memory when the buffer runs.
    pub(crate) discarded_in: u64,
    /// A resource's identity: bumped each time rotation gives it another allocation (R-X5).
    /// A view's: its resource's identity when the driver last refreshed the view.
    pub(crate) identity: u64,
    /// The size of the object's kernel allocation where a rename may replace it (R-M5): 0
    /// for none, and for a shared or primary allocation, which other devices or the display
    /// know by its handle.
    pub(crate) allocation_size: u64,
    /// Where the rename pool keeps allocations of `allocation_size` bytes (R-M5), found at
    /// the first rename; `None` before it, after a rotation moved the size, and always where
    /// no rename applies (a driver that does not rename, an `allocation_size` of 0): `Some`
    /// says that a Map(DISCARD) of the object renames.
    pub(crate) rename_class: Option<u32>,
    /// The persistent lock of the object's current allocation (R-M3..R-M5, where the
    /// kernel keeps locks across Maps, `Kernel::persistent_locks`): taken at its first Map,
    /// lent to each Map and given back at its Unmap (`None` meanwhile), ended before the
    /// allocation is deallocated (R-M4).
    pub(crate) lock: Option<CpuMapping>,
    /// How many of the immediate context's bindings bind the object. Each keeps it from its
    /// real destruction as a hold does (R-D4: a bound object is destroyed once unbound),
    /// counted here, on the context's own thread, where a hold is a locked instruction: the
    /// reclaimer (the same thread) seals no entry a binding counts.
    pub(crate) bound: u32,
    /// The driver's IC data.
    pub(crate) data: D::IcData,
}

/// One life of an object. `repr(C)` keeps the declared order: shared data first, the IC
/// side last on lines of its own (R-L3); Rust's default layout may put it first.
#[repr(C)]
pub(crate) struct Entry<D: Driver> {
    generation: NonZeroU32,
    /// The tag of the device whose registry holds the entry: the one whose [`IcToken`]
    /// reaches its IC side.
    device: u8,
    ty: HandleType,
    primary: bool,
    /// The object's kernel allocation: replaced only by the immediate context, when it
    /// rotates resource identities (R-X5); any thread reads it.
    allocation: CurrentAllocation,
    dependency: Option<AnyHandle>,
    byte_size: u64,
    /// A resource's bind flags (R-X7).
    bind: BindFlags,
    /// A resource's usage.
    usage: Usage,
    /// A texture resource's shape (R-X1, R-X5, R-X7).
    texture: Option<Texture2d>,
    /// Whether a Map(NO_OVERWRITE) may take the resource (R-M3): decided at creation from
    /// its description and the device's map caps, neither of which changes after.
    appendable: bool,
    /// The bucket size class of the object's context-local handles (R-H4), found once after
    /// creation; none when the driver answered a size its table does not list.
    local_class: Option<u16>,
    /// [`LIVE`] or [`DESTROYED`].
    state: AtomicU32,
    /// What keeps the object from its real destruction besides the submission clock: live
    /// views of a resource (R-H3), command lists that reference it; plus [`FREED`] once
    /// really destroyed.
    holders: AtomicU32,
    object: D::Object,
    /// R-L3: on cache lines of its own.
    ic: CachePadded<UnsafeCell<IcSide<D>>>,
}

// SAFETY: `ic` is only accessed through `Entry::ic_side`, which requires the `&mut IcToken` of
// the entry's device: the token is owned by that device's one immediate context and is not
// `Sync`, so only the thread driving the immediate context reaches an IC side, one at a
// time. Sharing an `Entry` across threads never shares `IcData` (which only needs `Send`,
// like the value in a Mutex). Every other field is `Sync`.
unsafe impl<D: Driver> Sync for Entry<D> {}

impl<D: Driver> Entry<D> {
    pub(crate) fn ty(&self) -> HandleType {
        self.ty
    }

    pub(crate) fn object(&self) -> &D::Object {
        &self.object
    }

    #[inline]
    pub(crate) fn allocation(&self) -> Option<AllocationHandle> {
        self.allocation.get()
    }

    /// Gives the object another of the device's allocations (R-X5's rotation), on the
    /// immediate context only (the token).
    #[inline]
    pub(crate) fn set_allocation(&self, token: &mut IcToken, allocation: Option<AllocationHandle>) {
        // The entry is of the token's device (the invariant of `IcToken`).
        debug_assert_eq!(token.tag, self.device, "an IC token of another device");
        self.allocation.set(allocation);
    }

    pub(crate) fn usage(&self) -> Usage {
        self.usage
    }

    pub(crate) fn dependency(&self) -> Option<AnyHandle> {
        self.dependency
    }

    /// The bucket size class of the object's context-local handles (none: the driver's
    /// answer was not listed in its table, R-H4).
    pub(crate) fn local_class(&self) -> Option<u16> {
        self.local_class
    }

    pub(crate) fn is_primary(&self) -> bool {
        self.primary
    }

    pub(crate) fn is_live(&self) -> bool {
        self.state.load(Ordering::SeqCst) == LIVE
    }

    /// `Ok` while the object is live; a stale handle (R-E1) once the application destroyed
    /// it. (A deferred context's call that finds an object device destruction claimed answers
    /// `DeviceRemoved`: it settles every application error so once the device is removed.)
    #[inline]
    pub(crate) fn check_live(&self) -> Result<()> {
        match self.is_live() {
            true => Ok(()),
            false => Err(AppError::StaleHandle.into()),
        }
    }

    /// Marks the entry destroyed; false if it already was (a double destroy).
    pub(crate) fn mark_destroyed(&self) -> bool {
        // SeqCst pairs with the immediate context's SeqCst bump of its open buffer number:
        // either a lookup there sees DESTROYED, or this destroy reads the newer number.
        self.state
            .compare_exchange(LIVE, DESTROYED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Device destruction: claims the entry for the draining immediate context, whether it is
    /// live or destroyed but not yet destroyed for real; fails if it was claimed already.
    pub(crate) fn claim_for_drain(&self) -> bool {
        self.state
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |s| {
                (s != CLAIMED).then_some(CLAIMED)
            })
            .is_ok()
    }

    /// Adds a holder; fails once the object is really destroyed.
    pub(crate) fn hold(&self) -> bool {
        self.holders
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n & FREED == 0).then_some(n + 1)
            })
            .is_ok()
    }

    /// Drops a holder added by [`Entry::hold`].
    pub(crate) fn release(&self) {
        self.holders.fetch_sub(1, Ordering::AcqRel);
    }

    /// Whether the object was really destroyed (its destroy hook ran or is running).
    pub(crate) fn is_freed(&self) -> bool {
        self.holders.load(Ordering::Acquire) & FREED != 0
    }

    /// For device destruction when no deferred context is alive: marks the object freed
    /// whatever holds it (only command lists can still hold it, and no context is left to
    /// execute them: they can only be dropped, which hears no object).
    pub(crate) fn seal(&self) {
        self.holders.fetch_or(FREED, Ordering::AcqRel);
    }

    /// For the reclaimer: marks an object nothing holds as freed; false while held.
    pub(crate) fn try_seal(&self) -> bool {
        self.holders
            .compare_exchange(0, FREED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// The immediate-context side (R-L3), reached with the immediate context's token: the
    /// token is the witness that this is the thread driving the entry's immediate context,
    /// and borrowing it mutably for as long as the result lives keeps that result the only
    /// reference to any IC side.
    ///
    /// The entry is of the token's device: every entry an immediate context reaches is
    /// (see [`IcToken`]); debug builds check it.
    #[inline]
    pub(crate) fn ic_side<'t>(&'t self, token: &'t mut IcToken) -> &'t mut IcSide<D> {
        debug_assert_eq!(token.tag, self.device, "an IC token of another device");
        // SAFETY: `token` is the one token of this entry's device (the invariant of
        // `IcToken`), owned by its immediate context and not `Sync`, so this is that
        // context's thread; the exclusive borrow of the token for `'t` means no other
        // IC-side reference exists while the result lives.
        unsafe { &mut *self.ic.get() }
    }

    /// [`Entry::ic_side`] to read: a shared borrow of the token excludes every mutable
    /// reference to an IC side (each borrows the token mutably) for as long as the result
    /// lives.
    #[inline]
    pub(crate) fn ic_side_ref<'t>(&'t self, token: &'t IcToken) -> &'t IcSide<D> {
        debug_assert_eq!(token.tag, self.device, "an IC token of another device");
        // SAFETY: as in `ic_side`, this is the immediate context's thread; the shared borrow
        // of the token for `'t` excludes any `&mut` to an IC side while the result lives.
        unsafe { &*self.ic.get() }
    }

    /// The driver's IC data of several entries at once, for a rotation (R-X5): `None` unless
    /// the entries are pairwise distinct. As [`Entry::ic_side`], the token is the witness,
    /// checked against each entry's device. The references are laid out in `refs`, whose
    /// memory is kept from one call to the next (a steady rotation allocates nothing).
    pub(crate) fn ic_data_of_many<'t>(
        token: &'t mut IcToken,
        entries: impl Iterator<Item = &'t Entry<D>>,
        refs: &'t mut IcDataRefs<D>,
    ) -> Option<&'t mut [&'t mut D::IcData]> {
        refs.0.clear();
        for entry in entries {
            assert_eq!(token.tag, entry.device, "an IC token of another device");
            // SAFETY: a place computation through the cell's pointer, no reference made; the
            // pointer is non-null as the cell's is.
            let data = unsafe { NonNull::new_unchecked(&raw mut (*entry.ic.get()).data) };
            if refs.0.contains(&data) {
                refs.0.clear();
                return None;
            }
            refs.0.push(data);
        }
        let pointers: *mut [NonNull<D::IcData>] = refs.0.as_mut_slice();
        // SAFETY: `NonNull<T>` and `&mut T` have the same size, alignment and validity for a
        // non-null, aligned, live `T`; each pointer is to the data of a distinct entry
        // (checked above) of the token's device (checked), alive for `'t` as the entries
        // are, and the token (not `Sync`, one per device) is borrowed mutably for `'t`, so
        // this is the immediate context's thread and no other IC-side reference exists
        // meanwhile.
        Some(unsafe { &mut *(pointers as *mut [&'t mut D::IcData]) })
    }
}

/// Memory for [`Entry::ic_data_of_many`]'s references, kept by the immediate context:
/// between calls it holds nothing that is ever read (cleared before each use).
pub(crate) struct IcDataRefs<D: Driver>(Vec<NonNull<D::IcData>>);

impl<D: Driver> Default for IcDataRefs<D> {
    fn default() -> Self {
        IcDataRefs(Vec::new())
    }
}

// SAFETY: the pointers are only dereferenced inside `ic_data_of_many`'s borrow, on the thread
// holding the device's token; between calls the vector is dead data.
unsafe impl<D: Driver> Send for IcDataRefs<D> {}

/// A looked-up object, valid while the epoch guard it was found under is pinned.
pub struct ObjectView<'a, D: Driver> {
    handle: AnyHandle,
    entry: &'a Entry<D>,
}

impl<D: Driver> Clone for ObjectView<'_, D> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<D: Driver> Copy for ObjectView<'_, D> {}

/// The object's handle and description; not the driver's data.
impl<D: Driver> core::fmt::Debug for ObjectView<'_, D> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ObjectView")
            .field("handle", &self.handle())
            .field("allocation", &self.allocation())
            .field("byte_size", &self.byte_size())
            .finish_non_exhaustive()
    }
}

impl<'a, D: Driver> ObjectView<'a, D> {
    /// The object's handle.
    pub fn handle(&self) -> AnyHandle {
        self.handle
    }
    /// The object's type.
    pub fn ty(&self) -> HandleType {
        self.entry.ty
    }
    /// The driver's shared, read-only data of the object.
    pub fn object(&self) -> &'a D::Object {
        &self.entry.object
    }
    /// The object's kernel allocation, if it has one: its current one, which rotating
    /// resource identities changes (R-X5). Read it when it is used; never keep it in the
    /// driver's object or context-local data, which would go stale.
    pub fn allocation(&self) -> Option<AllocationHandle> {
        self.entry.allocation()
    }
    /// The object this one depends on (R-H3).
    pub fn dependency(&self) -> Option<AnyHandle> {
        self.entry.dependency
    }
    /// A resource's size in bytes (0 for other objects).
    pub fn byte_size(&self) -> u64 {
        self.entry.byte_size
    }
    /// Whether this is a resource of dynamic usage (mappable with DISCARD).
    pub fn is_dynamic(&self) -> bool {
        self.entry.usage == Usage::Dynamic
    }
    /// A resource's bind flags (empty for other objects).
    pub fn bind_flags(&self) -> BindFlags {
        self.entry.bind
    }
    /// A texture resource's shape (`None` for buffers and other objects).
    pub fn texture(&self) -> Option<Texture2d> {
        self.entry.texture
    }
    pub(crate) fn entry(&self) -> &'a Entry<D> {
        self.entry
    }

    /// Checks that `len` bytes written at `offset` fit the resource, and are not nothing: an
    /// out-of-range write is the application's error (R-E1), refused before any hook.
    pub(crate) fn check_write(&self, offset: u64, len: usize) -> Result<()> {
        let len = u64::try_from(len).map_err(|_| AppError::OutOfRange)?;
        match offset.checked_add(len) {
            Some(end) if end <= self.entry.byte_size && len > 0 => Ok(()),
            _ => Err(AppError::OutOfRange.into()),
        }
    }

    /// The bytes a Map(DISCARD) hands out: dynamic resources only (an application error
    /// otherwise); a size this process cannot address is out of memory, never an overflow.
    pub(crate) fn discard_len(&self) -> Result<usize> {
        if self.entry.usage != Usage::Dynamic {
            return Err(AppError::NotMappable.into());
        }
        usize::try_from(self.entry.byte_size).map_err(|_| Error::OutOfMemory)
    }

    /// The bytes a Map(NO_OVERWRITE) hands out (R-M3): a resource that takes one
    /// (`ResourceDesc::takes_no_overwrite`, decided at its creation);
    /// an application error otherwise.
    #[inline]
    pub(crate) fn no_overwrite_len(&self) -> Result<usize> {
        if !self.entry.appendable {
            return Err(AppError::NotMappable.into());
        }
        usize::try_from(self.entry.byte_size).map_err(|_| Error::OutOfMemory)
    }
}

/// An entry that its holder holds (a hold taken with [`Entry::hold`], R-H2): a context-local
/// handle's or a command list's reference to its object, reached without a lookup or a pin.
///
/// Valid for as long as the hold is, whatever the epoch: a held entry is unlinked only by
/// device destruction (the retire queue waits for holds), after which no create can reuse
/// its slot, and the entry itself lives until the registry drops, which the holder's device
/// handle prevents. Releasing the hold ([`HeldEntry::release`]) ends it.
pub(crate) struct HeldEntry<D: Driver> {
    handle: AnyHandle,
    entry: NonNull<Entry<D>>,
}

// SAFETY: a `HeldEntry` is a shared reference to an `Entry`, which is `Sync`; its validity
// does not depend on the thread (see the type's docs), so it may move and be shared like
// `&Entry`.
unsafe impl<D: Driver> Send for HeldEntry<D> {}
// SAFETY: as above.
unsafe impl<D: Driver> Sync for HeldEntry<D> {}

impl<D: Driver> HeldEntry<D> {
    /// Takes a hold on `view`'s entry; `None` once the object is really destroyed.
    pub(crate) fn take(view: ObjectView<'_, D>) -> Option<Self> {
        view.entry.hold().then(|| HeldEntry {
            handle: view.handle,
            entry: NonNull::from(view.entry),
        })
    }

    /// The handle the hold was taken through.
    pub(crate) fn handle(&self) -> AnyHandle {
        self.handle
    }

    /// The held entry.
    pub(crate) fn entry(&self) -> &Entry<D> {
        // SAFETY: valid while held (see the type's docs); the hold is released only by
        // `release`, which consumes `self`.
        unsafe { self.entry.as_ref() }
    }

    /// The held object, as lookups give it.
    pub(crate) fn view(&self) -> ObjectView<'_, D> {
        ObjectView {
            handle: self.handle,
            entry: self.entry(),
        }
    }

    /// Releases the hold.
    pub(crate) fn release(self) {
        self.entry().release();
    }
}

/// Resolves handles to objects during one driver call (the objects stay valid for the whole
/// call), answers state-refresh queries (R-C3), and reads the objects' IC data
/// ([`Resolver::ic_data`]).
///
/// Only the immediate context makes one, on its thread, for the hooks that put work in its
/// open buffer ([`Driver::execute`], [`Driver::execute_command_list`], [`Driver::blt`]); it
/// is neither `Send` nor `Sync`, so it never leaves that thread:
///
/// ```compile_fail
/// fn to_another_thread<T: Send>(_: T) {}
/// fn hook<D: cmdlist::Driver>(objects: &cmdlist::Resolver<'_, D>) {
///     to_another_thread(objects);
/// }
/// ```
pub struct Resolver<'a, D: Driver> {
    registry: &'a Registry<D>,
    guard: &'a Guard,
    state: StateView<'a>,
    /// Replaying a command list: objects the list holds may be destroyed by the application
    /// already and still be used (the list keeps them, as D3D's references do).
    held: bool,
    /// The immediate context's open command buffer.
    buffer: u64,
}

/// Whether it resolves a list's held objects, and the open buffer; not the registry.
impl<D: Driver> core::fmt::Debug for Resolver<'_, D> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Resolver")
            .field("held", &self.held)
            .field("buffer", &self.buffer)
            .finish_non_exhaustive()
    }
}

impl<'a, D: Driver> Resolver<'a, D> {
    /// For the immediate context only, on its thread, whose token proves it owns
    /// `registry`: [`Resolver::ic_data`] relies on that, and on the immediate context
    /// holding no reference to an IC side (`Entry::ic_side`, `Entry::ic_data_of_many`)
    /// while a hook has the resolver.
    pub(crate) fn new(
        registry: &'a Registry<D>,
        guard: &'a Guard,
        state: StateView<'a>,
        held: bool,
        buffer: u64,
    ) -> Self {
        Resolver {
            registry,
            guard,
            state,
            held,
            buffer,
        }
    }

    /// The object `handle` names, or the application error that explains why not. An object
    /// the application destroyed is still found while the state-refresh query answers it
    /// bound (R-D4: a binding keeps its object, as D3D's references do, so a draw reads
    /// it) and, replaying a list, while the list holds it.
    pub fn get<T: ObjectKind>(&self, handle: Handle<T>) -> Result<ObjectView<'a, D>> {
        if self.held {
            return self.registry.held(handle, self.guard);
        }
        match self.registry.live(handle, self.guard) {
            Err(Error::Application(AppError::StaleHandle)) => self.get_bound(handle),
            found => found,
        }
    }

    /// [`Resolver::get`] of a handle that names no live object: its object if it is bound
    /// (destroyed by the application, kept by the binding), stale otherwise. A binding on
    /// the immediate context keeps its entry linked (`IcSide::bound`: the reclaimer seals
    /// none that a binding counts), so the lookup that accepts a destroyed object is sound;
    /// it checks the type as `get`'s does.
    #[cold]
    fn get_bound<T: ObjectKind>(&self, handle: Handle<T>) -> Result<ObjectView<'a, D>> {
        if self.state.iter().any(|(_, bound)| bound == handle.any()) {
            self.registry.held(handle, self.guard)
        } else {
            Err(AppError::StaleHandle.into())
        }
    }

    /// The resource `view` views (R-H3): the view holds it, so it is there even after the
    /// application destroyed it. Its [`ObjectView::allocation`] is the one to read or write
    /// through the view now (rotation changes it, R-X5). An application error for an object
    /// that is not a view.
    pub fn resource_of(&self, view: ObjectView<'a, D>) -> Result<ObjectView<'a, D>> {
        let resource = view.dependency().ok_or(AppError::WrongType)?;
        self.registry.held(resource, self.guard)
    }

    /// The driver's IC data of `view`'s object ([`Driver::IcData`], R-L3), as the
    /// immediate context's thread has it now: what the driver stored at create, changed
    /// through [`crate::ImmediateContext::ic_data_mut`], [`Driver::rotate_identities`] and
    /// [`Driver::refresh_view`]. For a driver-built list this is where an object's
    /// immediate-context data is read at execute (a list resolves its handles then, R-X5).
    /// [`AppError::WrongDevice`] for an object of another device.
    ///
    /// Read-only: a hook gets the resolver shared, and two lookups of one object would give
    /// two references to the same data, so a `&mut` could alias. Data the driver changes
    /// while executing goes in a `Cell` or `RefCell` inside its `IcData` (which only needs
    /// `Send`: it never leaves this thread).
    pub fn ic_data<'s>(&'s self, view: ObjectView<'s, D>) -> Result<&'s D::IcData> {
        let entry = view.entry;
        // Tags are unique among live devices, and both devices are alive (the resolver
        // borrows this one, the view its entry): an equal tag is this device.
        if entry.device != self.registry.tag {
            return Err(AppError::WrongDevice.into());
        }
        // SAFETY: the IC side is only reached on the thread driving this device's immediate
        // context, one reference at a time (`Entry`'s `Sync` invariant): a resolver is made
        // only by that context, on that thread (`Resolver::new`), and cannot leave it (not
        // `Send`, not `Sync`); the entry is this registry's (checked above) and stays linked
        // while the resolver lives (only that context unlinks, and it is inside the hook
        // that borrows the resolver). While a hook holds the resolver the immediate context
        // holds no `&mut` to any IC side (`Resolver::new`'s contract), and the hooks handed
        // `&mut IcData` (destroy, rotate, refresh) get no resolver; the result borrows
        // `self`, so it ends with the hook. Only the `data` field is referenced.
        Ok(unsafe { &(*entry.ic.get()).data })
    }

    /// Whether the call replays a command list (the immediate context's
    /// CommandListExecute and the operations it replays, R-C3): objects resolve through the
    /// list's holds then, destroyed ones included.
    pub fn in_command_list(&self) -> bool {
        self.held
    }

    /// The state-refresh query: the executing context's bindings as the protocol says they
    /// look during this call (R-C1, R-C3).
    pub fn state(&self) -> StateView<'a> {
        self.state
    }

    /// The number of the command buffer this call's work goes into: the fence value its
    /// submit will carry ([`crate::Submission::fence`]), and the buffer the engine stamps the
    /// call's objects with (R-D1), whether the driver accepts the call's work or refuses it.
    /// Buffers are numbered from 1; a buffer that ends up holding nothing is not submitted.
    pub fn buffer(&self) -> u64 {
        self.buffer
    }
}

/// A looked-up object that keeps the CPU epoch pinned while held (so keep it briefly), and
/// its device alive. Dereferences to the driver's [`Driver::Object`]. Not `Send`: the pin
/// belongs to the thread.
///
/// It answers the handle, the type and the current allocation, not the object's
/// description: no resource size, usage, bind flags or texture shape. A hook reads those
/// from the [`ObjectView`] it is given ([`ObjectView::byte_size`], [`ObjectView::bind_flags`],
/// [`ObjectView::texture`]); outside hooks, a driver that needs a resource's size keeps it in
/// its [`Driver::Object`] at [`Driver::create_object`] (which gets the description) and reads
/// it through this reference's `Deref`, as the soft driver's `SoftObject::byte_size` is read
/// (`device.object(resource)?.byte_size`).
pub struct ObjectRef<D: Driver> {
    _guard: Guard,
    entry: NonNull<Entry<D>>,
    handle: AnyHandle,
    /// The device: the registry drops what is left of its entries when the device goes,
    /// without waiting for the epoch, so a reference must keep it.
    _device: Arc<dyn Send + Sync>,
    _entry: PhantomData<Entry<D>>,
}

/// The object's handle and allocation; not the driver's data.
impl<D: Driver> core::fmt::Debug for ObjectRef<D> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ObjectRef")
            .field("handle", &self.handle())
            .field("allocation", &self.allocation())
            .finish_non_exhaustive()
    }
}

impl<D: Driver> ObjectRef<D> {
    fn entry(&self) -> &Entry<D> {
        // SAFETY: the entry was reachable from its slot while `_guard` was pinned; the guard
        // stays pinned and `_device` keeps the registry as long as `self` lives, so the entry
        // is neither reclaimed through the limbo nor dropped with the registry.
        unsafe { self.entry.as_ref() }
    }
    /// The object's handle.
    pub fn handle(&self) -> AnyHandle {
        self.handle
    }
    /// The object's type.
    pub fn ty(&self) -> HandleType {
        self.entry().ty
    }
    /// The object's kernel allocation, if any.
    pub fn allocation(&self) -> Option<AllocationHandle> {
        self.entry().allocation()
    }
}

impl<D: Driver> core::ops::Deref for ObjectRef<D> {
    type Target = D::Object;
    fn deref(&self) -> &D::Object {
        &self.entry().object
    }
}

/// What a new entry is made of.
pub(crate) struct NewEntry<D: Driver> {
    pub(crate) ty: HandleType,
    pub(crate) primary: bool,
    pub(crate) allocation: Option<AllocationHandle>,
    /// The allocation's size where a rename may replace it (see [`IcSide`]).
    pub(crate) allocation_size: u64,
    pub(crate) dependency: Option<AnyHandle>,
    pub(crate) byte_size: u64,
    pub(crate) local_class: Option<u16>,
    pub(crate) bind: BindFlags,
    pub(crate) usage: Usage,
    pub(crate) texture: Option<Texture2d>,
    /// See [`Entry`]'s field.
    pub(crate) appendable: bool,
    pub(crate) object: D::Object,
    pub(crate) ic_data: D::IcData,
}

/// The object table. See the module docs.
pub(crate) struct Registry<D: Driver> {
    tag: u8,
    first_generation: u32,
    pages: [AtomicPtr<Slot<D>>; PAGES],
    /// Slots handed out at least once (the bump pointer of never-used slots).
    reserved: AtomicU32,
    free: IndexStack,
    /// Destroyed objects waiting for the immediate context (R-D1).
    pub(crate) retired: TakeAllStack,
    /// Whether the device is removed; the creates in progress, which device destruction
    /// waits for (every create either sees the removal before any hook, or is linked before
    /// the drain looks, R-D3, R-H3); the deferred contexts alive, whose holds it leaves.
    removal: Removal,
    /// Entries the immediate context unlinked, waiting for the CPU epoch: reached only with
    /// the [`IcToken`] (on lines of their own, away from the heads other threads CAS).
    reclaim: CachePadded<UnsafeCell<Limbo>>,
    token_taken: AtomicBool,
}

/// The tag of a slot's spare whose entry has not been dropped yet (entries are aligned far
/// beyond 2, so the low bit is free).
const WHOLE: usize = 1;
// An `Entry` holds a `CachePadded` field, so it is at least that aligned.
const _: () = assert!(core::mem::align_of::<CachePadded<u8>>() > WHOLE);

// SAFETY: every field but `reclaim` is `Sync` (atomics, pages of slots reached through
// atomics); `reclaim` is only reached through `Registry::reclaim`, which requires the one
// `&mut IcToken` of this registry, or through `&mut self` in `Drop`, so it is never shared
// (its contents are `Send`, like the value in a `Mutex`).
unsafe impl<D: Driver> Sync for Registry<D> {}

/// The witness that its holder is the immediate context of one registry's device (the
/// single reclaimer): made once per registry ([`Registry::take_ic_token`]), owned by the
/// immediate context, neither `Clone` nor `Sync`.
///
/// Its holder uses it with the registry that made it alone: the immediate context takes it
/// when it is made and keeps it beside the device whose registry made it, neither replaced
/// for its life. Every entry it reaches is of its device: found in the token's registry, or
/// held by a command list of the same device (an execute refuses another device's list
/// before it reaches an entry), or the dependency of one of those (the same registry). So
/// the lookups ([`Registry::ic_live`], [`Registry::ic_guard`]) and the accessors of an
/// entry's IC side ([`Entry::ic_side`], [`Entry::set_allocation`]), several a draw, check
/// the token's device only in debug builds; the rarer calls (a rotation's, a free's) check
/// it always.
///
/// It also keeps the immediate context's lookup cache ([`Registry::ic_live`]): as the
/// single reclaimer, only its holder unlinks entries ([`Registry::free`], which takes the
/// token and forgets the slot), so an entry found once stays linked, and its handle's
/// life the same, until then. A lookup of a handle found before checks only what can
/// change meanwhile: that the object is still live.
pub(crate) struct IcToken {
    tag: u8,
    /// Per slot index modulo [`IC_CACHE`]: the handle last found there and its entry
    /// (`Entry<D>` of this token's registry, type-erased: the token is not generic).
    cache: [IcCached; IC_CACHE],
    _not_sync: PhantomData<core::cell::Cell<()>>,
}

// SAFETY: the cache's pointers are to entries of the token's registry, which is `Sync`;
// they are only dereferenced by `Registry::ic_live` with `&mut` to the token, on whichever
// thread holds it, as the entries themselves may be (an `Entry` is `Sync`).
unsafe impl Send for IcToken {}

/// Lines of the immediate context's lookup cache: objects a frame names over and over hit
/// it (a draw's constant buffer, shaders, targets).
const IC_CACHE: usize = 64;

/// A line of the immediate context's lookup cache.
#[derive(Clone, Copy)]
struct IcCached {
    /// The handle's bits (0: none: a handle's bits are never 0).
    bits: u64,
    entry: *const (),
}

const IC_CACHE_EMPTY: IcCached = IcCached {
    bits: 0,
    entry: core::ptr::null(),
};

/// A slot reserved for an object being created; given back to the free stack if dropped
/// before [`Registry::link`].
pub(crate) struct ReservedSlot<'a, D: Driver> {
    registry: &'a Registry<D>,
    index: u32,
}

impl<D: Driver> Drop for ReservedSlot<'_, D> {
    fn drop(&mut self) {
        let registry = self.registry;
        registry.free.push(self.index, |i| {
            &registry.slot(i).expect("slot exists").next_free
        });
    }
}

fn page_of(index: u32) -> (usize, usize) {
    let v = index + PAGE_BASE;
    let page = (31 - v.leading_zeros()) - PAGE_BASE_LOG2;
    (page as usize, (v - (PAGE_BASE << page)) as usize)
}

impl<D: Driver> Registry<D> {
    /// A registry whose handles carry `tag` and whose slots start at `first_generation`
    /// (salted per device, so a stale handle of a dropped device that had the same tag only
    /// aliases when its 32-bit generation matches by chance).
    pub(crate) fn new(tag: u8, first_generation: NonZeroU32) -> Self {
        Registry {
            tag,
            first_generation: first_generation.get(),
            pages: core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut())),
            reserved: AtomicU32::new(0),
            free: IndexStack::new(),
            retired: TakeAllStack::new(),
            removal: Removal::default(),
            reclaim: CachePadded::new(UnsafeCell::new(Limbo::default())),
            token_taken: AtomicBool::new(false),
        }
    }

    /// The slot at `index`, if its page exists.
    pub(crate) fn slot(&self, index: u32) -> Option<&Slot<D>> {
        if index >= MAX_SLOTS {
            return None;
        }
        let (page, offset) = page_of(index);
        let base = self.pages[page].load(Ordering::SeqCst);
        if base.is_null() {
            return None;
        }
        // SAFETY: a non-null page pointer was published (Release) after the page of
        // `PAGE_BASE << page` initialised slots was written, pages are freed only in `Drop`
        // (which has `&mut self`), and `offset < PAGE_BASE << page` by `page_of`.
        Some(unsafe { &*base.add(offset) })
    }

    fn slot_or_alloc(&self, index: u32) -> Result<&Slot<D>> {
        if let Some(slot) = self.slot(index) {
            return Ok(slot);
        }
        let (page, _) = page_of(index);
        let len = (PAGE_BASE as usize) << page;
        let mut slots: Vec<Slot<D>> = Vec::new();
        slots
            .try_reserve_exact(len)
            .map_err(|_| Error::OutOfMemory)?;
        slots.extend((0..len).map(|_| Slot::new()));
        let fresh = Box::into_raw(slots.into_boxed_slice()) as *mut Slot<D>;
        // Device destruction scans the slots only after every create in progress ended (its
        // gate's release, `Removal::mark_removed`), so it sees a page a create published.
        if let Err(_winner) = self.pages[page].compare_exchange(
            core::ptr::null_mut(),
            fresh,
            Ordering::SeqCst,
            Ordering::SeqCst,
        ) {
            // SAFETY: `fresh` came from `Box::into_raw` of a boxed slice of `len` slots just
            // above and was never published, so this thread still owns it.
            drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(fresh, len)) });
        }
        Ok(self.slot(index).expect("page published above"))
    }

    /// Reserves a slot for a new object (any thread): from the free stack, else from
    /// never-used slots. Dropping the reservation unused gives the slot back, so a create
    /// that fails (or unwinds) after this loses nothing.
    pub(crate) fn reserve(&self) -> Result<ReservedSlot<'_, D>> {
        let popped = self
            .free
            .pop(|i| &self.slot(i).expect("freed slots exist").next_free);
        let index = match popped {
            Some(index) => index,
            None => self
                .reserved
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                    (n < MAX_SLOTS).then_some(n + 1)
                })
                .map_err(|_| Error::OutOfMemory)?,
        };
        // Running out of memory for a page loses a never-used index: terminal anyway.
        self.slot_or_alloc(index)?;
        Ok(ReservedSlot {
            registry: self,
            index,
        })
    }

    /// Links a new object into its reserved slot: from now on lookups find it. Allocates the
    /// entry; cannot fail.
    pub(crate) fn link(&self, slot: ReservedSlot<'_, D>, new: NewEntry<D>) -> AnyHandle {
        let index = slot.index;
        core::mem::forget(slot);
        let slot = self.slot(index).expect("reserved slots exist");
        let generation = match slot.next_generation.load(Ordering::Relaxed) {
            0 => self.first_generation,
            g => g,
        };
        let generation = NonZeroU32::new(generation).expect("generations start at 1");
        let entry = Entry {
            generation,
            device: self.tag,
            ty: new.ty,
            primary: new.primary,
            allocation: CurrentAllocation::new(new.allocation),
            dependency: new.dependency,
            byte_size: new.byte_size,
            local_class: new.local_class,
            bind: new.bind,
            usage: new.usage,
            texture: new.texture,
            appendable: new.appendable,
            state: AtomicU32::new(LIVE),
            holders: AtomicU32::new(0),
            object: new.object,
            ic: CachePadded::new(UnsafeCell::new(IcSide {
                last_buffer: 0,
                query_end: 0,
                discarded_in: 0,
                identity: 0,
                allocation_size: new.allocation_size,
                rename_class: None,
                lock: None,
                bound: 0,
                data: new.ic_data,
            })),
        };
        let spare = slot.spare.swap(core::ptr::null_mut(), Ordering::Relaxed);
        let memory = if spare.is_null() {
            Box::into_raw(Box::<Entry<D>>::new_uninit()).cast::<Entry<D>>()
        } else {
            let memory = spare.map_addr(|a| a & !WHOLE);
            if spare.addr() & WHOLE != 0 {
                // SAFETY: this thread popped the slot, so it owns the slot's spare; the slot
                // reached the free stack only after the epoch passed its unlink, so no reader
                // can hold the old entry, which is whole (tagged) and dropped only here.
                unsafe { core::ptr::drop_in_place(memory) };
            }
            memory
        };
        // SAFETY: `memory` is an `Entry`-sized allocation owned by this thread, fresh or the
        // slot's spare whose old value is gone (dropped just above or before).
        unsafe { memory.write(entry) };
        // Device destruction scans the slots only after every create in progress ended (its
        // gate's release, `Removal::mark_removed`), so it sees every entry a create linked.
        slot.entry
            .store(Shared::from(memory.cast_const()), Ordering::SeqCst);
        Handle::new(self.tag, index, generation)
    }

    /// The entry `handle` names (live or destroyed-but-pending), checking device and
    /// generation.
    pub(crate) fn find<'g, T: ObjectKind>(
        &self,
        handle: Handle<T>,
        guard: &'g Guard,
    ) -> Result<&'g Entry<D>> {
        if self.removal.is_removed() {
            return Err(Error::DeviceRemoved);
        }
        self.find_linked(handle, guard)
    }

    /// [`Registry::find`] without the device-removed check (for the reclaimer).
    pub(crate) fn find_linked<'g, T: ObjectKind>(
        &self,
        handle: Handle<T>,
        guard: &'g Guard,
    ) -> Result<&'g Entry<D>> {
        if handle.device_tag() != self.tag {
            return Err(AppError::WrongDevice.into());
        }
        let slot = self.slot(handle.slot()).ok_or(AppError::StaleHandle)?;
        let entry = slot.entry.load(Ordering::Acquire, guard);
        // SAFETY: the pointer was loaded under `guard` from a slot; entries are unlinked
        // before they are deferred for destruction, so it is valid while `guard` is pinned.
        let entry = unsafe { entry.as_ref() }.ok_or(AppError::StaleHandle)?;
        if entry.generation != handle.generation() {
            return Err(AppError::StaleHandle.into());
        }
        if !T::accepts(entry.ty) {
            return Err(AppError::WrongType.into());
        }
        Ok(entry)
    }

    /// The live object `handle` names.
    pub(crate) fn live<'g, T: ObjectKind>(
        &self,
        handle: Handle<T>,
        guard: &'g Guard,
    ) -> Result<ObjectView<'g, D>> {
        let entry = self.find(handle, guard)?;
        entry.check_live()?;
        Ok(ObjectView {
            handle: handle.any(),
            entry,
        })
    }

    /// [`Registry::live`] for the immediate context (its `token`), inside a call that
    /// found the device not removed: only the immediate context removes it (device
    /// destruction), so that is not checked again. A handle found before is answered from
    /// the token's cache: the same life of the same entry (only [`Registry::free`], which
    /// forgets it, can end that), so only its type and that it is still live are checked.
    #[inline]
    pub(crate) fn ic_live<'g, T: ObjectKind>(
        &self,
        token: &mut IcToken,
        handle: Handle<T>,
        guard: &'g Guard,
    ) -> Result<ObjectView<'g, D>> {
        let entry = self.ic_find(token, handle, guard)?;
        entry.check_live()?;
        Ok(ObjectView {
            handle: handle.any(),
            entry,
        })
    }

    /// [`Registry::held`] for the immediate context, as [`Registry::ic_live`] finds it:
    /// the object `handle` names, live or destroyed by the application but not yet really
    /// destroyed (a binding holds it).
    #[inline]
    pub(crate) fn ic_held<'g>(
        &self,
        token: &mut IcToken,
        handle: AnyHandle,
        guard: &'g Guard,
    ) -> Result<ObjectView<'g, D>> {
        let entry = self.ic_find(token, handle, guard)?;
        Ok(ObjectView { handle, entry })
    }

    /// The linked entry `handle` names, of its type, from the token's cache or else the
    /// slot (which fills the cache): [`Registry::ic_live`] and [`Registry::ic_held`].
    #[inline(always)]
    fn ic_find<'g, T: ObjectKind>(
        &self,
        token: &mut IcToken,
        handle: Handle<T>,
        guard: &'g Guard,
    ) -> Result<&'g Entry<D>> {
        // The token is this registry's (the invariant of `IcToken`).
        debug_assert_eq!(token.tag, self.tag, "an IC token of another device");
        let bits = handle.to_bits();
        let line = &mut token.cache[handle.slot() as usize & (IC_CACHE - 1)];
        if line.bits == bits {
            // SAFETY: the line was filled below, by this registry (the token is its one
            // token: the invariant of `IcToken`), with an entry found linked under a handle
            // of these bits; entries are unlinked only by `free`, which takes this token and
            // clears the line of the slot it unlinks, so the entry is still linked, and a
            // linked entry is valid for the immediate context without a pin (`ic_guard`).
            // The entry's generation never changes, so it is the handle's life.
            let entry = unsafe { &*line.entry.cast::<Entry<D>>() };
            if !T::accepts(entry.ty) {
                return Err(AppError::WrongType.into());
            }
            return Ok(entry);
        }
        let entry = self.find_linked(handle, guard)?;
        *line = IcCached {
            bits,
            entry: core::ptr::from_ref(entry).cast(),
        };
        Ok(entry)
    }

    /// The object `handle` names while something holds it (a command list being replayed):
    /// live, or destroyed by the application but not yet really destroyed.
    pub(crate) fn held<'g, T: ObjectKind>(
        &self,
        handle: Handle<T>,
        guard: &'g Guard,
    ) -> Result<ObjectView<'g, D>> {
        let entry = self.find(handle, guard)?;
        Ok(ObjectView {
            handle: handle.any(),
            entry,
        })
    }

    /// A pinned reference to the live object `handle` names; `device` is what owns this
    /// registry.
    pub(crate) fn get<T: ObjectKind>(
        &self,
        handle: Handle<T>,
        device: Arc<dyn Send + Sync>,
    ) -> Result<ObjectRef<D>> {
        let guard = epoch::pin();
        let entry = NonNull::from(self.live(handle, &guard)?.entry);
        Ok(ObjectRef {
            _guard: guard,
            entry,
            handle: handle.any(),
            _device: device,
            _entry: PhantomData,
        })
    }

    /// Unlinks the entry in slot `index` into the limbo (the immediate context, the single
    /// reclaimer, proves itself with its token), and frees the slot unless its generation is
    /// exhausted. The entry is dropped at a later [`Registry::collect`], once no reader that
    /// could have found it is still pinned.
    pub(crate) fn free(&self, token: &mut IcToken, index: u32, guard: &Guard) {
        let Some(slot) = self.slot(index) else { return };
        // A load and a store, not a locked swap: only this thread unlinks entries, and the
        // slot is not in the free stack while its entry is linked, so nothing races here.
        let old = slot.entry.load(Ordering::Acquire, guard);
        slot.entry.store(Shared::null(), Ordering::Release);
        // The lookup cache forgets the entry: the slot's next life is another's.
        let line = &mut token.cache[index as usize & (IC_CACHE - 1)];
        if line.entry == old.as_raw().cast() {
            *line = IC_CACHE_EMPTY;
        }
        // SAFETY: `old` was loaded under `guard` from its slot, so it is valid or null.
        let generation = match unsafe { old.as_ref() } {
            Some(entry) => entry.generation.get(),
            None => return,
        };
        // The entry stays whole in the slot's spare (readers pinned before the unlink may
        // still read it) until the create that reuses the slot drops it, or the registry.
        slot.spare.store(
            old.as_raw().cast_mut().map_addr(|a| a | WHOLE),
            Ordering::Relaxed,
        );
        if generation == u32::MAX {
            return; // retired for good: the generation would wrap
        }
        slot.next_generation
            .store(generation + 1, Ordering::Relaxed);
        let link = self.reclaim(token).push(index);
        slot.next_free.store(link, Ordering::Relaxed);
    }

    /// The reclaimer's state, for the immediate context.
    fn reclaim<'t>(&'t self, token: &'t mut IcToken) -> &'t mut Limbo {
        assert_eq!(token.tag, self.tag, "an IC token of another device");
        // SAFETY: `take_ic_token` hands out one token per registry, held by its immediate
        // context; `&mut IcToken` for as long as the result lives makes this the only
        // reference to it (everything else reaches it through `&mut self` in `Drop`).
        unsafe { &mut *self.reclaim.get() }
    }

    /// Ends a reclaiming pass: the slots it unlinked are sealed for reclamation (see
    /// [`Limbo::seal`]).
    pub(crate) fn seal(&self, token: &mut IcToken, guard: &Guard) {
        self.reclaim(token).seal(guard);
    }

    /// Frees the unlinked slots no reader can hold any more: each passed chain goes onto the
    /// free stack with one CAS. Returns how many slots.
    pub(crate) fn collect(&self, token: &mut IcToken) -> usize {
        self.reclaim(token).collect(|chain| {
            self.free.push_chain(chain.top, chain.bottom, |i| {
                &self.slot(i).expect("unlinked slots exist").next_free
            })
        })
    }

    /// Unlinked entries not yet dropped.
    pub(crate) fn unreclaimed(&self, token: &IcToken) -> usize {
        assert_eq!(token.tag, self.tag, "an IC token of another device");
        // SAFETY: as in `reclaim`: the one token of this registry is borrowed for the read, so
        // no `&mut` to the limbo (which needs `&mut IcToken`) exists meanwhile.
        unsafe { &*self.reclaim.get() }.waiting()
    }

    /// Amortised processing (R-A1): hands this thread's deferred epoch work to the global
    /// queue so that waiting entries are reclaimed without waiting for more destroys, and
    /// gives back the limbo's spare memory.
    pub(crate) fn amortize(&self, token: &mut IcToken) {
        let limbo = self.reclaim(token);
        limbo.trim();
        if limbo.waiting() > 0 {
            // Twice: the first hands the bag over and moves the epoch on, the second moves it
            // past that bag, which then runs, unless another thread is pinned meanwhile.
            for _ in 0..2 {
                epoch::pin().flush();
            }
        }
    }

    /// Memory the limbo keeps besides its entries.
    pub(crate) fn limbo_bytes(&self, token: &IcToken) -> usize {
        assert_eq!(token.tag, self.tag, "an IC token of another device");
        // SAFETY: as in `unreclaimed`.
        unsafe { &*self.reclaim.get() }.retained_bytes()
    }

    /// The guard the immediate context looks entries up under: none at all. Only the
    /// token's holder unlinks entries, so every entry it finds linked stays valid while it
    /// uses it, pinned or not (the CPU epoch protects other threads from its unlinks, not
    /// itself). Never used to defer work: deferring on it would run at once.
    pub(crate) fn ic_guard(&self, token: &IcToken) -> &'static Guard {
        // The token is this registry's (the invariant of `IcToken`).
        debug_assert_eq!(token.tag, self.tag, "an IC token of another device");
        // SAFETY: see above: entries reached through this guard are linked ones, found by
        // the single reclaimer, which cannot unlink them while it reads them; the limbo (and
        // so slot reuse) never defers through it (`seal` takes a pinned guard).
        unsafe { epoch::unprotected() }
    }

    /// The immediate context's token: `Some` once per registry.
    pub(crate) fn take_ic_token(&self) -> Option<IcToken> {
        (!self.token_taken.swap(true, Ordering::SeqCst)).then_some(IcToken {
            tag: self.tag,
            cache: [IC_CACHE_EMPTY; IC_CACHE],
            _not_sync: PhantomData,
        })
    }

    /// The entry linked in slot `index`, if any (for the reclaimer).
    pub(crate) fn linked<'g>(&self, index: u32, guard: &'g Guard) -> Option<&'g Entry<D>> {
        let entry = self.slot(index)?.entry.load(Ordering::Acquire, guard);
        // SAFETY: loaded under `guard` from its slot (see `find`).
        unsafe { entry.as_ref() }
    }

    /// Calls `each` with every entry still linked (device destruction), with its slot index.
    pub(crate) fn for_each_linked(&self, guard: &Guard, mut each: impl FnMut(u32, &Entry<D>)) {
        let reserved = self.reserved.load(Ordering::SeqCst);
        for index in 0..reserved {
            let Some(slot) = self.slot(index) else {
                continue;
            };
            let entry = slot.entry.load(Ordering::SeqCst, guard);
            // SAFETY: loaded under `guard` from its slot (see `find`).
            if let Some(entry) = unsafe { entry.as_ref() } {
                each(index, entry);
            }
        }
    }

    /// Device removal, the creates in progress and the deferred contexts alive.
    pub(crate) fn removal(&self) -> &Removal {
        &self.removal
    }

    /// Starts a create ([`Removal::begin_create`]).
    pub(crate) fn begin_create(&self) -> Result<CreateGate<'_>> {
        self.removal.begin_create()
    }

    /// From now on every lookup and create is [`Error::DeviceRemoved`]; returns once every
    /// create that started before has finished, so all their entries are linked.
    pub(crate) fn mark_removed(&self) {
        self.removal.mark_removed();
    }

    #[inline]
    pub(crate) fn is_removed(&self) -> bool {
        self.removal.is_removed()
    }

    /// The objects device destruction left to their holders (R-D3): every entry still
    /// linked and not freed, views before resources (R-H3). Each is marked freed, then handed
    /// to `destroy` with its IC side, exclusively: `&mut self` is the proof that no context,
    /// list or handle of the device is left to reach it (each of them holds the device that
    /// owns this registry), so its destroy hook is the last thing that hears it.
    pub(crate) fn destroy_left(&mut self, mut destroy: impl FnMut(&Entry<D>, &mut IcSide<D>)) {
        for views in [true, false] {
            for (page, ptr) in self.pages.iter().enumerate() {
                let base = ptr.load(Ordering::Acquire);
                if base.is_null() {
                    continue;
                }
                for i in 0..(PAGE_BASE as usize) << page {
                    // SAFETY: `&mut self`: no other thread can reach the slots (see above);
                    // the page came from `Box::into_raw` of `PAGE_BASE << page` slots, so
                    // `i` is in bounds, and a slot's linked entry is a whole `Entry` that
                    // only the registry's drop frees.
                    let entry = unsafe {
                        let slot = &*base.add(i);
                        match slot
                            .entry
                            .load(Ordering::Relaxed, epoch::unprotected())
                            .as_ref()
                        {
                            Some(entry) => entry,
                            None => continue,
                        }
                    };
                    if entry.ty.is_view() != views || entry.is_freed() {
                        continue;
                    }
                    // Freed before the hook runs: a hook that panics never has it destroyed
                    // twice (the registry's drop then drops the entries left, unheard).
                    entry.seal();
                    // SAFETY: the IC side is reached through `Entry::ic_side` with the
                    // immediate context's token, or here; `&mut self` excludes the first
                    // (the token's context holds the device), and this is the only
                    // reference made here to this entry's IC side.
                    let ic = unsafe { &mut *entry.ic.get() };
                    destroy(entry, ic);
                }
            }
        }
    }
}

impl<D: Driver> Drop for Registry<D> {
    fn drop(&mut self) {
        // No reader can exist any more: every path to an entry (a context, a command list,
        // an `ObjectRef`) holds the device that owns this registry. So every entry still
        // linked or whole in a spare is dropped here, now, whether or not the epoch has passed
        // it: nothing of the device outlives it.
        for (page, ptr) in self.pages.iter().enumerate() {
            let base = ptr.load(Ordering::Acquire);
            if base.is_null() {
                continue;
            }
            let len = (PAGE_BASE as usize) << page;
            // SAFETY: `&mut self`: no other thread can reach the slots (see above). A linked
            // entry is a whole `Entry` in an allocation of `link`; a spare is such an
            // allocation, whose entry is whole while tagged and already dropped otherwise.
            // The page came from `Box::into_raw` of `len` slots in `slot_or_alloc`.
            unsafe {
                let guard = epoch::unprotected();
                for i in 0..len {
                    let slot = &*base.add(i);
                    let entry = slot.entry.load(Ordering::Relaxed, guard);
                    if !entry.is_null() {
                        drop(Box::from_raw(entry.as_raw().cast_mut()));
                    }
                    let spare = slot.spare.load(Ordering::Relaxed);
                    if !spare.is_null() {
                        let memory = spare.map_addr(|a| a & !WHOLE);
                        if spare.addr() & WHOLE != 0 {
                            core::ptr::drop_in_place(memory);
                        }
                        drop(Box::from_raw(
                            memory.cast::<core::mem::MaybeUninit<Entry<D>>>(),
                        ));
                    }
                }
                drop(Box::from_raw(core::ptr::slice_from_raw_parts_mut(
                    base, len,
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "soft")]
    mod with_soft {
        use crate::soft::{self, SoftCommand::FillIcByte, SoftConfig, SoftDriver};
        use crate::{AppError, DeviceConfig, Error, HandleType, ObjectDesc, ResourceDesc};

        fn config() -> SoftConfig {
            SoftConfig {
                trace: false,
                ..SoftConfig::from_env().unwrap()
            }
        }

        /// R-L3: the IC-only side of an entry starts on a cache line of its own, after the
        /// data every thread reads.
        #[test]
        fn r_l3_ic_data_is_cache_line_separated_from_shared_data() {
            type E = super::Entry<SoftDriver>;
            let ic = core::mem::offset_of!(E, ic);
            let object = core::mem::offset_of!(E, object);
            let state = core::mem::offset_of!(E, state);
            assert!(core::mem::align_of::<E>() >= 64);
            assert_eq!(ic % 64, 0, "IC side starts a cache line");
            for shared in [object, state] {
                assert!(shared < ic, "shared data comes first");
                assert_ne!(
                    shared / 64,
                    ic / 64,
                    "shared data never shares the IC side's line"
                );
            }
            let object_end = object + core::mem::size_of::<crate::soft::SoftObject>();
            assert!(object_end <= ic);
        }

        /// R-D3: what a live deferred context holds when the immediate context is dropped
        /// outlives the drain, and the device's last reference destroys it (views first) and
        /// deallocates its memory: `destroy_left` walks the slots with `&mut` access.
        #[test]
        fn r_d3_what_a_live_context_holds_is_destroyed_with_the_last_reference() {
            use crate::soft::Hook;
            use crate::{BindClass, BindPoint, Stage, ViewDesc};
            let native = SoftConfig {
                command_lists: true,
                trace: true,
                ..config()
            };
            let (device, ic, world) = soft::device(native, DeviceConfig::default()).unwrap();
            let buffer = ResourceDesc {
                byte_size: 16,
                ..Default::default()
            };
            let r = device.create_resource(buffer).unwrap();
            let v = device
                .create_view(
                    HandleType::ShaderResourceView,
                    ViewDesc {
                        resource: r,
                        first_byte: 0,
                        byte_len: 8,
                    },
                )
                .unwrap();
            let unheld = device.create_resource(buffer).unwrap();
            let id = |h: crate::AnyHandle| device.object(h).unwrap().id;
            let (v_id, r_id, unheld_id) = (id(v.any()), id(r.any()), id(unheld.any()));
            let mut dc = device.create_deferred_context().unwrap();
            let point = BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0);
            dc.bind(point, Some(v.any())).unwrap();
            let destroyed = |world: &soft::SoftWorld| {
                world
                    .trace()
                    .iter()
                    .filter(|e| e.hook == Hook::DestroyObject)
                    .map(|e| e.object)
                    .collect::<Vec<_>>()
            };
            drop(ic); // destroys the unheld resource, leaves the view and its resource
            assert_eq!(destroyed(&world), [unheld_id]);
            drop(dc);
            assert_eq!(
                destroyed(&world),
                [unheld_id],
                "the device is still referenced"
            );
            drop(device);
            // The view before the resource it depends on (R-H3).
            assert_eq!(destroyed(&world), [unheld_id, v_id, r_id]);
            assert_eq!(world.soft_objects_alive(), 0);
            let violations = world.check_after_device_destroyed();
            assert!(violations.is_empty(), "{violations:#?}");
        }

        /// Rotation hands the driver every rotated resource's IC data at once (the one place
        /// that holds several IC sides together), and moves allocations one place left.
        #[test]
        fn r_x5_rotation_reaches_each_ic_side_once() {
            let traced = SoftConfig::from_env().unwrap();
            let (device, mut ic, world) = soft::device(traced, DeviceConfig::default()).unwrap();
            let texture = crate::Texture2d {
                width: 2,
                height: 2,
                array_size: 1,
                mip_levels: 1,
                samples: 1,
                format: crate::dxgi::DisplayFormat::B8G8R8A8Unorm.to_dxgi(),
            };
            let desc = ResourceDesc {
                byte_size: 16,
                texture: Some(texture),
                ..Default::default()
            };
            let rs: Vec<_> = (0..3)
                .map(|_| device.create_resource(desc).unwrap())
                .collect();
            let before: Vec<_> = rs
                .iter()
                .map(|r| device.object(*r).unwrap().allocation())
                .collect();
            world.clear_trace();
            ic.rotate_resource_identities(&rs).unwrap();
            let rotated = world
                .trace()
                .iter()
                .filter(|e| e.hook == crate::soft::Hook::RotateIdentities)
                .map(|e| e.state)
                .collect::<Vec<_>>();
            assert_eq!(rotated, [3]);
            for (i, r) in rs.iter().enumerate() {
                *ic.ic_data_mut(*r).unwrap() += 1; // each IC side still reachable alone
                let now = device.object(*r).unwrap().allocation();
                assert_eq!(now, before[(i + 1) % 3]);
            }
            ic.destroy_device().unwrap();
        }

        /// R-L3: a hook reads an object's IC data through its resolver, as the immediate
        /// context has it when the hook runs: on the immediate context, and in a
        /// driver-built list, which reads it at execute, not at record (the soft driver's
        /// `FillIcByte` writes the low byte it reads). Miri checks the reference it makes
        /// against the IC context's own mutable ones before and after.
        #[test]
        fn r_l3_hooks_read_ic_data_through_the_resolver_when_they_run() {
            let built = SoftConfig {
                command_lists: true,
                driver_built: true,
                ..config()
            };
            for soft_config in [config(), built] {
                let (device, mut ic, world) =
                    soft::device(soft_config, DeviceConfig::default()).unwrap();
                let r = device
                    .create_resource(ResourceDesc {
                        byte_size: 4,
                        ..Default::default()
                    })
                    .unwrap();
                let allocation = device.object(r).unwrap().allocation().unwrap();
                *ic.ic_data_mut(r).unwrap() = 0x12A;
                ic.command(&FillIcByte { dst: r }).unwrap();
                ic.flush().unwrap();
                assert_eq!(world.read(allocation), Some(vec![0x2A; 4]));
                let mut dc = device.create_deferred_context().unwrap();
                dc.command(FillIcByte { dst: r }).unwrap();
                let list = dc.finish().unwrap();
                *ic.ic_data_mut(r).unwrap() = 7;
                ic.execute_command_list(&list).unwrap();
                *ic.ic_data_mut(r).unwrap() += 1;
                ic.flush().unwrap();
                assert_eq!(world.read(allocation), Some(vec![7; 4]), "read at execute");
                drop((list, dc));
                ic.destroy_device().unwrap();
                world.assert_clean();
            }
        }

        /// An object of another device has no IC data in this one: refused, never read
        /// (the other device's immediate context may be writing it on its own thread).
        #[test]
        fn r_e1_a_resolver_refuses_ic_data_of_another_device() {
            let (a, mut ic_a, world_a) = soft::device(config(), DeviceConfig::default()).unwrap();
            let (b, mut ic_b, world_b) = soft::device(config(), DeviceConfig::default()).unwrap();
            let desc = ResourceDesc {
                byte_size: 4,
                ..Default::default()
            };
            let (ra, rb) = (
                a.create_resource(desc).unwrap(),
                b.create_resource(desc).unwrap(),
            );
            *ic_a.ic_data_mut(ra).unwrap() = 3;
            {
                // This thread drives both immediate contexts, and neither holds an IC side.
                let (registry_a, registry_b) = (a.shared.registry(), b.shared.registry());
                let guard = crossbeam_epoch::pin();
                let resolver = super::Resolver::new(
                    registry_a,
                    &guard,
                    crate::bind::StateView::empty(),
                    false,
                    1,
                );
                let own = resolver.get(ra).unwrap();
                assert_eq!(resolver.ic_data(own), Ok(&3));
                let foreign = registry_b.live(rb, &guard).unwrap();
                assert_eq!(
                    resolver.ic_data(foreign).err(),
                    Some(Error::Application(AppError::WrongDevice))
                );
            }
            ic_a.destroy_device().unwrap();
            ic_b.destroy_device().unwrap();
            world_a.assert_clean();
            world_b.assert_clean();
        }

        /// A hook's lookup of an object the application destroyed: found while the state
        /// the resolver answers has it bound (R-D4), typed as any lookup; stale when only
        /// other objects are bound (R-E1).
        #[test]
        fn r_d4_a_resolver_finds_a_destroyed_object_only_while_it_is_bound() {
            use crate::bind::{BindClass, BindPoint, Bindings, StateView};
            let (device, mut ic, world) = soft::device(config(), DeviceConfig::default()).unwrap();
            let desc = ResourceDesc {
                byte_size: 4,
                ..Default::default()
            };
            let (gone, other) = (
                device.create_resource(desc).unwrap(),
                device.create_resource(desc).unwrap(),
            );
            device.destroy(gone).unwrap();
            let point = BindPoint::new(BindClass::RenderTarget, 0);
            let mut bound = Bindings::default();
            bound.set(point, Some(other.any()));
            {
                // No flush since the destroy: the entry is still linked, as a binding keeps
                // it; this thread drives the immediate context, which holds no IC side.
                let registry = device.shared.registry();
                let guard = crossbeam_epoch::pin();
                let stale = Err(Error::Application(AppError::StaleHandle));
                let resolver =
                    super::Resolver::new(registry, &guard, StateView::of(&bound), false, 1);
                assert_eq!(
                    resolver.get(gone).map(|v| v.handle()),
                    stale,
                    "another is bound"
                );
                assert_eq!(resolver.get(other).map(|v| v.handle()), Ok(other.any()));
                bound.set(point, Some(gone.any()));
                let resolver =
                    super::Resolver::new(registry, &guard, StateView::of(&bound), false, 1);
                assert_eq!(
                    resolver.get(gone).map(|v| v.handle()),
                    Ok(gone.any()),
                    "bound"
                );
                assert_eq!(
                    resolver.get(gone.cast::<crate::handle::Query>()).err(),
                    Some(Error::Application(AppError::WrongType)),
                    "typed as any lookup"
                );
            }
            ic.destroy_device().unwrap();
            world.assert_clean();
        }

        #[test]
        fn r_e1_lookups_reject_stale_forged_and_wrong_type_handles() {
            let (device, mut ic, world) = soft::device(config(), DeviceConfig::default()).unwrap();
            let r = device
                .create_resource(ResourceDesc {
                    byte_size: 8,
                    ..Default::default()
                })
                .unwrap();
            assert!(device.object(r).is_ok());
            assert_eq!(
                device.object(r.cast::<crate::handle::Query>()).err(),
                Some(Error::Application(AppError::WrongType))
            );
            let forged =
                crate::Handle::<crate::handle::Resource>::from_bits(r.to_bits() ^ (1 << 40))
                    .unwrap();
            assert_eq!(
                device.object(forged).err(),
                Some(Error::Application(AppError::StaleHandle))
            );
            device.destroy(r).unwrap();
            assert_eq!(
                device.destroy(r),
                Err(Error::Application(AppError::DoubleDestroy))
            );
            ic.flush().unwrap();
            // The slot is reused once no reader can hold the old entry (the CPU epoch passed
            // it: a few flushes after amortised processing handed the epoch its work); the
            // old handle stays dead.
            let blend = ObjectDesc::State {
                ty: HandleType::BlendState,
                desc: &[1],
            };
            // Objects in other slots are kept until the freed one comes up (the free stack is
            // last in, first out), then destroyed.
            let mut others = Vec::new();
            ic.trim();
            ic.flush().unwrap();
            let mut again = device.create(&blend).unwrap();
            while again.to_bits() as u32 != r.to_bits() as u32 && others.len() < 10_000 {
                others.push(again);
                ic.trim();
                ic.flush().unwrap();
                again = device.create(&blend).unwrap();
            }
            for other in others {
                device.destroy(other).unwrap();
            }
            assert_eq!(again.to_bits() as u32, r.to_bits() as u32, "same slot");
            assert_eq!(
                device.object(r).err(),
                Some(Error::Application(AppError::StaleHandle))
            );
            assert!(device.object(again).is_ok());
            ic.destroy_device().unwrap();
            world.assert_clean();
        }

        /// Lookups on other threads race the immediate context's real destruction: each is
        /// either the object or a clean application error, never freed memory (miri checks).
        #[test]
        fn r_e1_lookup_racing_destruction_is_clean() {
            let rounds = if cfg!(miri) { 3 } else { 200 };
            let (device, mut ic, world) = soft::device(config(), DeviceConfig::default()).unwrap();
            for _ in 0..rounds {
                let h = device
                    .create(&ObjectDesc::State {
                        ty: HandleType::SamplerState,
                        desc: &[],
                    })
                    .unwrap();
                std::thread::scope(|scope| {
                    let d = device.clone();
                    scope.spawn(move || {
                        for _ in 0..if cfg!(miri) { 4 } else { 50 } {
                            match d.object(h) {
                                Ok(o) => assert_eq!(o.ty, HandleType::SamplerState),
                                Err(e) => assert_eq!(e, Error::Application(AppError::StaleHandle)),
                            }
                        }
                    });
                    device.destroy(h).unwrap();
                    ic.flush().unwrap();
                });
            }
            ic.destroy_device().unwrap();
            world.assert_clean();
        }
    }

    #[test]
    fn pages_cover_every_slot_without_overlap() {
        assert_eq!(page_of(0), (0, 0));
        assert_eq!(page_of(PAGE_BASE - 1), (0, PAGE_BASE as usize - 1));
        assert_eq!(page_of(PAGE_BASE), (1, 0));
        assert_eq!(page_of(3 * PAGE_BASE - 1), (1, 2 * PAGE_BASE as usize - 1));
        assert_eq!(page_of(3 * PAGE_BASE), (2, 0));
        let (last, _) = page_of(MAX_SLOTS - 1);
        assert!(last < PAGES);
    }
}
