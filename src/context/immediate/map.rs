//! CPU access on the immediate context (R-M1, R-M3..R-M5): Map(DISCARD) of another
//! allocation that the Unmap makes the resource's (a rename), or, where the driver does not
//! rename, through the context's own bytes handed to the driver at the Unmap;
//! Map(NO_OVERWRITE) of a dynamic
//! buffer and the staging Maps (READ, WRITE, READ_WRITE) through the kernel's lock of the
//! resource's own memory, a staging Map waiting first for the newest buffer that uses the
//! resource (or answering that the GPU still draws); and whether a staging resource is busy.

use super::ImmediateContext;
use crate::caps::MapCaps;
#[cfg(feature = "capture")]
use crate::capture::Call;
use crate::context::mapped_and_begun::MappedAndBegun;
use crate::desc::{BindFlags, Usage};
use crate::driver::{Driver, Op};
use crate::error::{AppError, Error, Result};
use crate::handle::{Handle, Resource};
use crate::kernel::{AllocationDesc, AllocationHandle, Kernel};
use crate::map_type::{MapFlags, MapType};
use crate::mapping::{CpuMapping, LockFlags};
use crate::registry::ObjectView;
use core::ptr::NonNull;
use crossbeam_epoch::Guard;
use rename_pool::{ClassId, RecordId};
use scopeguard::ScopeGuard;

use super::rename_pool;

/// An open Map on the immediate context.
#[derive(Debug)]
pub(super) enum IcMap {
    /// Map(DISCARD): the new contents, in the context's own bytes until the Unmap hands them
    /// to the driver (`Op::WriteDiscard`).
    Discard(Vec<u8>),
    /// A Map of the resource's own memory, locked by the kernel until the Unmap (R-M4).
    Locked {
        allocation: AllocationHandle,
        mapping: CpuMapping,
    },
    /// A Map of the resource's own memory through its allocation's persistent lock
    /// ([`Kernel::persistent_locks`]), lent by the resource until the Unmap gives it back.
    Lent {
        allocation: AllocationHandle,
        mapping: CpuMapping,
    },
    /// Map(DISCARD) that renames (R-M5): an allocation no unfinished buffer reads, locked
    /// until the Unmap makes it the resource's (and, with persistent locks, locked after it);
    /// the pool keeps it and its lock in place meanwhile.
    Renamed {
        /// The allocation's record in the rename pool, lent to the Map with its lock.
        record: RecordId,
        /// Its size class in the rename pool (the resource's allocation's size).
        class: ClassId,
    },
}

/// Bind flags under which a resource may have views, whose IC data may embed its allocation.
const VIEWABLE: BindFlags = BindFlags::SHADER_RESOURCE
    .union(BindFlags::RENDER_TARGET)
    .union(BindFlags::DEPTH_STENCIL)
    .union(BindFlags::UNORDERED_ACCESS);

impl<D: Driver, K: Kernel> ImmediateContext<D, K> {
    /// Map of `ty` with `flags`, as a C shim's ResourceMap passes them (R-M1):
    /// [`ImmediateContext::map_discard`], [`ImmediateContext::map_no_overwrite`], or a
    /// staging Map ([`ImmediateContext::map_staging`]).
    pub fn map(
        &mut self,
        resource: Handle<Resource>,
        ty: MapType,
        flags: MapFlags,
    ) -> Result<&mut [u8]> {
        match ty {
            MapType::WriteDiscard => self.map_discard(resource),
            MapType::WriteNoOverwrite => self.map_no_overwrite(resource),
            MapType::Read | MapType::Write | MapType::ReadWrite => {
                self.map_staging(resource, ty, flags)
            }
        }
    }

    /// Map(DISCARD) of a dynamic resource (any other is
    /// [`AppError::NotMappable`](crate::AppError::NotMappable)): the
    /// resource's new contents, to write until [`ImmediateContext::unmap`], without waiting
    /// for the GPU. While mapped, executing a command list that recorded a Map of it is an
    /// application error (R-C4).
    ///
    /// Where the driver's [`crate::MapCaps`] include
    /// [`DISCARD_RENAMES`](crate::MapCaps::DISCARD_RENAMES) (R-M5), and the resource's
    /// allocation is neither shared nor a primary's, the bytes are another
    /// kernel allocation of the resource's size, locked ([`Kernel::lock`]), which the Unmap
    /// makes the resource's: one the GPU is done with from the context's pool, or a new one
    /// ([`Kernel::allocate`]), its bytes as they are (a Map(DISCARD)'s values are undefined,
    /// R-M1: the earlier contents of an allocation of that size). Where the kernel keeps
    /// locks across Maps
    /// ([`Kernel::persistent_locks`]), a pooled allocation comes with its lock, and the
    /// Unmap keeps the lock: no kernel call. The allocation the resource had waits in the pool
    /// until the GPU finished every buffer that may read it. A pool that keeps
    /// [`crate::DeviceConfig::rename_waiting`] allocations of that size waiting, none done,
    /// allocates no more: the Map goes through the copy below. Otherwise the bytes are the
    /// context's own, zeroed (reused from map to map, allocated fallibly: a resource too big
    /// for memory is [`Error::OutOfMemory`]), handed to the driver at the Unmap.
    pub fn map_discard(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        #[cfg(feature = "capture")]
        if self.capture.is_some() {
            return self.captured_map(resource, MapType::WriteDiscard, MapFlags::empty(), |ic| {
                ic.map_discard_uncaptured(resource)
            });
        }
        self.map_discard_uncaptured(resource)
    }

    #[inline(always)]
    fn map_discard_uncaptured(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        let bytes = self.entry(|ic| ic.map_new(resource))?;
        // SAFETY: the bytes of the Map the route noted open as its last step; `entry` touches
        // nothing of the context's on success, so that Map is still open.
        Ok(unsafe { self.handed_out(bytes) })
    }

    /// The bytes of an open Map, handed to the application until its Unmap.
    ///
    /// # Safety
    /// `bytes` are those [`ImmediateContext::note_map`] answered for a Map still open: its
    /// memory (the context's own bytes, or the kernel's mapping) stays where it is while the
    /// Map is open, wherever the open Maps move its record, and only a later call of the
    /// context ends it (an Unmap, device destruction, the context's drop), which the returned
    /// borrow of the context excludes.
    #[inline(always)]
    unsafe fn handed_out(&mut self, bytes: NonNull<[u8]>) -> &mut [u8] {
        // SAFETY: as the caller promised.
        unsafe { &mut *bytes.as_ptr() }
    }

    /// Notes the Map of `resource` open with its memory `map`, whose bytes are `bytes`
    /// (taken before the move: a Map's bytes are a box, the kernel's memory or the pool's
    /// lock, which stay where they are wherever its record moves), for the route to hand out
    /// without finding the Map again ([`ImmediateContext::handed_out`]). A pointer, not a
    /// borrow: the route's answer leaves the context through `entry`, whose report needs the
    /// context again.
    #[inline(always)]
    fn note_map(
        &mut self,
        resource: Handle<Resource>,
        map: IcMap,
        bytes: NonNull<[u8]>,
    ) -> NonNull<[u8]> {
        self.open.map(resource, map);
        bytes
    }

    fn map_new(&mut self, resource: Handle<Resource>) -> Result<NonNull<[u8]>> {
        let guard = self.device.shared.registry().ic_guard(&self.token);
        let view = self
            .device
            .shared
            .registry()
            .ic_live(&mut self.token, resource, guard)?;
        let size = view.discard_len()?;
        self.open.check_map(resource)?;
        let side = view.entry().ic_side(&mut self.token);
        let (class, allocation_size) = (side.rename_class, side.allocation_size);
        let class = match class {
            Some(class) => Some(class),
            None => self.rename_class_of(view),
        };
        if let Some(class) = class {
            if let Some(bytes) = self.map_renamed(resource, class, allocation_size, size)? {
                return Ok(bytes);
            }
        }
        self.map_copied(resource, size)
    }

    /// A Map(DISCARD) that does not rename: the context's own `size` bytes, zeroed (reused
    /// from Map to Map, allocated fallibly), the Map noted. Out of line, so that a renaming
    /// Map's route keeps its registers.
    #[inline(never)]
    fn map_copied(&mut self, resource: Handle<Resource>, size: usize) -> Result<NonNull<[u8]>> {
        let mut contents = self.spare_contents.pop().unwrap_or_default();
        contents.clear();
        if contents.try_reserve_exact(size).is_err() {
            self.spare_contents.push(contents);
            return Err(Error::OutOfMemory);
        }
        contents.resize(size, 0);
        let bytes = NonNull::from(contents.as_mut_slice());
        Ok(self.note_map(resource, IcMap::Discard(contents), bytes))
    }

    /// The rename pool's class of `view`'s allocation, where a Map(DISCARD) of it renames
    /// (R-M5): found at its first rename and kept in its immediate-context side, whose
    /// class is then the whole question for its later Maps. None where the driver does not
    /// rename, and for a resource without an allocation or whose allocation other devices or
    /// the display know (its `allocation_size` 0).
    #[cold]
    #[inline(never)]
    fn rename_class_of(&mut self, view: ObjectView<'_, D>) -> Option<ClassId> {
        if !self
            .device
            .shared
            .map_caps()
            .contains(MapCaps::DISCARD_RENAMES)
        {
            return None;
        }
        let side = view.entry().ic_side(&mut self.token);
        match side.allocation_size {
            0 => None,
            size => Some(*side.rename_class.insert(self.rename_pool.class(size))),
        }
    }

    /// Locks an allocation of `size` bytes (of `class` in the pool) that no unfinished
    /// buffer reads, for a Map(DISCARD) of `resource` that renames (R-M5): the pool's oldest
    /// if the GPU is done with it, a new one otherwise, unless the pool already keeps
    /// [`crate::DeviceConfig::rename_waiting`] of that size waiting for the GPU (`None`: the
    /// Map goes through the copy; `Some`: the Map noted, its bytes,
    /// [`ImmediateContext::note_map`]). A pooled allocation still locked (persistent locks) calls
    /// no kernel. Its first `len` bytes (the resource's) are handed out as they are; a
    /// kernel that maps fewer is refused ([`Error::InvalidArg`]).
    fn map_renamed(
        &mut self,
        resource: Handle<Resource>,
        class: ClassId,
        size: u64,
        len: usize,
    ) -> Result<Option<NonNull<[u8]>>> {
        let id = match self.rename_pool.take(class, self.completed) {
            Some(id) => id,
            None => match self.unpooled(class, size)? {
                Some(id) => id,
                None => return Ok(None),
            },
        };
        // The lock's bytes, reached once: they stay where they are while the record is lent,
        // wherever the pool moves the record (a mapping's bytes are a box or the kernel's).
        let locked = match self.rename_pool.record_mut(id).lock.as_mut() {
            Some(mapping) => NonNull::from(mapping.bytes_mut()),
            None => self.lock_for_rename(class, id)?,
        };
        // Handed out as they are: a Map(DISCARD)'s values are undefined (R-M1), and the
        // kernel's memory is initialised (`CpuMapping::from_raw`).
        if locked.len() < len {
            return Err(self.refuse_short_lock(class, id));
        }
        let map = IcMap::Renamed { record: id, class };
        let bytes = NonNull::slice_from_raw_parts(locked.cast::<u8>(), len);
        Ok(Some(self.note_map(resource, map, bytes)))
    }

    /// [`ImmediateContext::map_renamed`] where the pool has no allocation of `class` the GPU
    /// is done with: the kernel's completed fence asked again (one may have come free since),
    /// else a new allocation of `size` bytes, admitted lent, unless the pool already keeps
    /// [`crate::DeviceConfig::rename_waiting`] of that size waiting for the GPU (`None`: the
    /// Map goes through the copy).
    #[cold]
    #[inline(never)]
    fn unpooled(&mut self, class: ClassId, size: u64) -> Result<Option<RecordId>> {
        let completed = self.completed_fence()?;
        if let Some(id) = self.rename_pool.take(class, completed) {
            return Ok(Some(id));
        }
        if self.rename_pool.waiting(class) >= self.device.shared.config().rename_waiting {
            return Ok(None);
        }
        let desc = AllocationDesc {
            size,
            shared: false,
            primary: false,
        };
        let allocation = self.device.shared.kernel().allocate(&desc)?;
        Ok(Some(self.rename_pool.admit(allocation)))
    }

    /// A lent record whose lock maps fewer bytes than the resource has: back to the pool,
    /// unlocked unless its lock persists, and the kernel's error (R-E1).
    #[cold]
    #[inline(never)]
    fn refuse_short_lock(&mut self, class: ClassId, id: RecordId) -> Error {
        let record = self.rename_pool.record_mut(id);
        let (allocation, mapping) = (record.allocation, record.lock.take());
        // Back to the pool first: an unlock that panics counts as done.
        self.rename_pool.put_back(class, id);
        if let Some(mapping) = mapping {
            self.device.shared.kernel().unlock(allocation, mapping);
        }
        Error::InvalidArg
    }

    /// The kernel's lock of the allocation of the lent record `id` a rename takes (R-M5): a
    /// new one, or one the pool keeps unlocked; the lock goes into the record, and its
    /// bytes are the answer. Until the lock hands it out the record is the pool's (no buffer
    /// referenced it): back there if the lock fails or panics.
    #[cold]
    fn lock_for_rename(&mut self, class: ClassId, id: RecordId) -> Result<NonNull<[u8]>> {
        let kernel = self.device.shared.kernel();
        let mut flags =
            LockFlags::WRITE_ONLY | LockFlags::IGNORE_SYNC | LockFlags::NO_EXISTING_REFERENCE;
        if self.persistent_locks {
            flags |= LockFlags::PERSISTENT;
        }
        let allocation = self.rename_pool.record_mut(id).allocation;
        let back = scopeguard::guard(&mut self.rename_pool, |pool| pool.put_back(class, id));
        let mapping = kernel.lock(allocation, flags)?;
        let pool = ScopeGuard::into_inner(back);
        let lock = pool.record_mut(id).lock.insert(mapping);
        Ok(NonNull::from(lock.bytes_mut()))
    }

    /// The Unmap of a Map(DISCARD) that renamed (R-M5): the allocation written becomes the
    /// resource's. The one it had may be read by the open buffer (an operation, or a binding
    /// since its last stamp): it is stamped with the open buffer, which lists both, and
    /// waits in the pool until the GPU finished that buffer.
    ///
    /// With persistent locks, `lock` (the new allocation's) becomes the resource's, and the
    /// old allocation's goes to the pool with it.
    #[inline(always)]
    fn rename(
        &mut self,
        resource: Handle<Resource>,
        view: ObjectView<'_, D>,
        record: RecordId,
        class: ClassId,
    ) -> Result<()> {
        let entry = view.entry();
        Self::stamp(&mut self.buffer, &mut self.token, entry);
        let previous = entry
            .allocation()
            .expect("a renamed resource has an allocation");
        let side = entry.ic_side(&mut self.token);
        let allocation =
            self.rename_pool
                .exchange(class, record, previous, &mut side.lock, self.buffer.number);
        entry.set_allocation(&mut self.token, Some(allocation));
        // The buffer's operations from here on read the new one; the resource is stamped
        // with the buffer already, so its next use would not list it.
        self.buffer.allocations.push(allocation);
        let side = entry.ic_side(&mut self.token);
        let viewable = view.bind_flags().intersects(VIEWABLE);
        if viewable {
            // Its views embed the old allocation: refreshed before their next use (R-X5).
            side.identity += 1;
            self.rotations += 1;
        }
        // The rename is whole whether the hook returns or panics.
        self.device
            .shared
            .driver()
            .renamed(&mut self.imm, view, &mut side.data, previous);
        if !viewable {
            return Ok(());
        }
        // A bound view is read by draws that do not name it: bound again, refreshed first,
        // as after a rotation.
        let guard = self.device.shared.registry().ic_guard(&self.token);
        self.rebind_rotated(guard, &[resource])
    }

    /// Map(NO_OVERWRITE) of a dynamic buffer (R-M3: vertex and index buffers, constant
    /// buffers and buffer SRVs where the driver's [`crate::MapCaps`] allow): the resource's
    /// current memory, locked by the kernel ([`Kernel::lock`]) with its contents, without
    /// waiting for the GPU, for the application to write where the GPU does not read, until
    /// [`ImmediateContext::unmap`]. Refused with
    /// [`AppError::NotMappable`](crate::AppError::NotMappable) for any other resource.
    ///
    /// One wait it does make: for the buffer that carries the resource's last Map(DISCARD)
    /// (its Unmap here, or a list that maps it executed here), until the GPU has run it,
    /// flushing it first if it is the open one. The discard's bytes reach the resource's
    /// memory through the driver ([`Op::WriteDiscard`]), which may copy them on the GPU; a
    /// ring pays this once per wrap, at its first append.
    pub fn map_no_overwrite(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        #[cfg(feature = "capture")]
        if self.capture.is_some() {
            return self.captured_map(
                resource,
                MapType::WriteNoOverwrite,
                MapFlags::empty(),
                |ic| ic.map_no_overwrite_uncaptured(resource),
            );
        }
        self.map_no_overwrite_uncaptured(resource)
    }

    #[inline(always)]
    fn map_no_overwrite_uncaptured(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        let bytes = self.entry(|ic| {
            let registry = ic.device.shared.registry();
            let guard = registry.ic_guard(&ic.token);
            let mut view = registry.ic_live(&mut ic.token, resource, guard)?;
            view.no_overwrite_len()?;
            let mut allocation = view.allocation().ok_or(AppError::NotMappable)?;
            ic.open.check_map(resource)?;
            let discarded = view.entry().ic_side(&mut ic.token).discarded_in;
            if discarded > ic.completed {
                ic.wait_for_discard(discarded)?;
                // Looked up again: the wait's flush may have really destroyed the resource.
                view = ic
                    .device
                    .shared
                    .registry()
                    .ic_live(&mut ic.token, resource, guard)?;
                allocation = view.allocation().ok_or(AppError::NotMappable)?;
            }
            // The GPU may still read the buffer: the kernel must not wait.
            let flags = LockFlags::WRITE_ONLY | LockFlags::IGNORE_SYNC;
            ic.lock(resource, view, allocation, flags)
        })?;
        // SAFETY: the bytes of the Map the route noted open as its last step; `entry` touches
        // nothing of the context's on success, so that Map is still open.
        Ok(unsafe { self.handed_out(bytes) })
    }

    /// A staging Map (R-M4): READ, WRITE or READ_WRITE of a `Usage::Staging` resource (any
    /// other is [`AppError::NotMappable`](crate::AppError::NotMappable)). If the open buffer
    /// uses the resource it is flushed; then the Map waits for the newest submitted buffer
    /// that uses it (not for the whole GPU) and hands out the resource's memory, locked by
    /// the kernel ([`Kernel::lock`]), until [`ImmediateContext::unmap`]. With
    /// [`MapFlags::DO_NOT_WAIT`] a resource that buffer still uses is
    /// [`Error::WasStillDrawing`] instead: nothing waited for, nothing mapped (the flush
    /// done, so that a caller polling makes progress).
    pub fn map_staging(
        &mut self,
        resource: Handle<Resource>,
        ty: MapType,
        flags: MapFlags,
    ) -> Result<&mut [u8]> {
        #[cfg(feature = "capture")]
        if self.capture.is_some() {
            return self.captured_map(resource, ty, flags, |ic| {
                ic.map_staging_uncaptured(resource, ty, flags)
            });
        }
        self.map_staging_uncaptured(resource, ty, flags)
    }

    #[inline(always)]
    fn map_staging_uncaptured(
        &mut self,
        resource: Handle<Resource>,
        ty: MapType,
        flags: MapFlags,
    ) -> Result<&mut [u8]> {
        let bytes = self.entry(|ic| {
            let lock = match ty {
                MapType::Read => LockFlags::READ_ONLY,
                MapType::Write => LockFlags::WRITE_ONLY,
                MapType::ReadWrite => LockFlags::empty(),
                MapType::WriteDiscard | MapType::WriteNoOverwrite => {
                    return Err(AppError::NotMappable.into())
                }
            };
            let registry = ic.device.shared.registry();
            let guard = registry.ic_guard(&ic.token);
            let mut view = registry.ic_live(&mut ic.token, resource, guard)?;
            let mut allocation = Self::staging_allocation_of(view)?;
            ic.open.check_map(resource)?;
            let last = view.entry().ic_side(&mut ic.token).last_buffer;
            if last > ic.completed {
                ic.wait_until_idle(last, flags.contains(MapFlags::DO_NOT_WAIT))?;
                // Looked up again: the wait's flush may have really destroyed the resource.
                view = ic
                    .device
                    .shared
                    .registry()
                    .ic_live(&mut ic.token, resource, guard)?;
                allocation = Self::staging_allocation_of(view)?;
            }
            ic.lock(resource, view, allocation, lock)
        })?;
        // SAFETY: the bytes of the Map the route noted open as its last step; `entry` touches
        // nothing of the context's on success, so that Map is still open.
        Ok(unsafe { self.handed_out(bytes) })
    }

    /// ResourceIsStagingBusy (R-M4): whether a buffer the GPU has not finished uses the
    /// staging resource, the open buffer included (nothing is flushed).
    pub fn resource_is_busy(&mut self, resource: Handle<Resource>) -> Result<bool> {
        captured!(
            answer self,
            Call::ResourceIsBusy(resource),
            self.resource_is_busy_uncaptured(resource)
        )
    }

    #[inline(always)]
    fn resource_is_busy_uncaptured(&mut self, resource: Handle<Resource>) -> Result<bool> {
        self.entry(|ic| {
            ic.staging_allocation(resource)?;
            let last = ic.last_buffer_of(resource)?;
            Ok(last > ic.completed_fence()?)
        })
    }

    /// The allocation of a live staging resource; an application error for any other.
    fn staging_allocation(&mut self, resource: Handle<Resource>) -> Result<AllocationHandle> {
        let guard = self.device.shared.registry().ic_guard(&self.token);
        let view = self
            .device
            .shared
            .registry()
            .ic_live(&mut self.token, resource, guard)?;
        Self::staging_allocation_of(view)
    }

    /// [`Self::staging_allocation`] of a resource looked up already.
    fn staging_allocation_of(view: ObjectView<'_, D>) -> Result<AllocationHandle> {
        if view.entry().usage() != Usage::Staging {
            return Err(AppError::NotMappable.into());
        }
        view.allocation()
            .ok_or_else(|| AppError::NotMappable.into())
    }

    /// The newest buffer that used `resource` (0: none), as its stamp says (R-D1).
    fn last_buffer_of(&mut self, resource: Handle<Resource>) -> Result<u64> {
        let guard = self.device.shared.registry().ic_guard(&self.token);
        let view = self
            .device
            .shared
            .registry()
            .ic_live(&mut self.token, resource, guard)?;
        Ok(view.entry().ic_side(&mut self.token).last_buffer)
    }

    /// Waits until the GPU has finished buffer `last`, the newest that uses a resource,
    /// flushing first if that is the open buffer; with `do_not_wait`, answers
    /// [`Error::WasStillDrawing`] instead of waiting (R-M4). Called with `last` past the
    /// fence the context saw completed (the Map's route tests it, and calls no kernel
    /// otherwise).
    #[cold]
    fn wait_until_idle(&mut self, last: u64, do_not_wait: bool) -> Result<()> {
        debug_assert!(last > self.completed);
        if last >= self.buffer.number {
            self.flush_inner()?;
        }
        if last <= self.completed_fence()? {
            return Ok(());
        }
        if do_not_wait {
            return Err(Error::WasStillDrawing);
        }
        self.device.shared.kernel().wait_for_fence(last)?;
        self.completed_fence()?;
        Ok(())
    }

    /// The CRC-32 of `resource`'s bytes, once the GPU has finished every buffer submitted
    /// (the present's included): what a capture that checks presents records after each,
    /// and what its replay compares.
    #[cfg(feature = "capture")]
    pub(crate) fn surface_checksum(&mut self, resource: Handle<Resource>) -> Result<u32> {
        // A resource the application has mapped is locked already (R-C4).
        self.open.check_map(resource)?;
        if self.last_submitted > self.completed {
            self.device
                .shared
                .kernel()
                .wait_for_fence(self.last_submitted)?;
            self.completed_fence()?;
        }
        let guard = self.device.shared.registry().ic_guard(&self.token);
        let view = self
            .device
            .shared
            .registry()
            .ic_live(&mut self.token, resource, guard)?;
        let allocation = view.allocation().ok_or(AppError::InvalidState)?;
        // An allocation locked already (a persistent lock) is read through that lock.
        if let Some(lock) = &view.entry().ic_side(&mut self.token).lock {
            return Ok(crc32fast::hash(lock.bytes()));
        }
        let kernel = self.device.shared.kernel();
        // Synchronised: the GPU finished every buffer (waited for just above).
        let mapping = kernel.lock(allocation, LockFlags::READ_ONLY)?;
        let crc = crc32fast::hash(mapping.bytes());
        kernel.unlock(allocation, mapping);
        Ok(crc)
    }

    /// Waits until the GPU has run buffer `discarded`, the one that carries a resource's
    /// last Map(DISCARD) (R-M3), flushing it first if it is the open one. Called with
    /// `discarded` past the fence the context saw completed (the Map's route tests it).
    #[cold]
    fn wait_for_discard(&mut self, discarded: u64) -> Result<()> {
        debug_assert!(discarded > self.completed);
        if discarded >= self.buffer.number {
            self.flush_inner()?;
        }
        if discarded > self.completed_fence()? {
            self.device.shared.kernel().wait_for_fence(discarded)?;
            self.completed_fence()?;
        }
        Ok(())
    }

    /// Locks `allocation`, the current one of `view` (the resource `resource`, found by the
    /// caller's checks), for a Map and notes the Map, answering its bytes
    /// ([`ImmediateContext::note_map`]): `flags` as [`Kernel::lock`] says (IGNORE_SYNC for a
    /// Map(NO_OVERWRITE) alone).
    /// With persistent locks ([`Kernel::persistent_locks`]) the Map borrows the
    /// allocation's lock, taken at its first Map (a staging resource's for reading and
    /// writing, whatever that Map's type), and calls no kernel after that.
    #[inline(always)]
    fn lock(
        &mut self,
        resource: Handle<Resource>,
        view: ObjectView<'_, D>,
        allocation: AllocationHandle,
        flags: LockFlags,
    ) -> Result<NonNull<[u8]>> {
        let kernel = self.device.shared.kernel();
        let (map, bytes) = if self.persistent_locks {
            let mut mapping = match view.entry().ic_side(&mut self.token).lock.take() {
                Some(mapping) => mapping,
                None => {
                    // A staging resource's lock serves its later Maps of any type: it reads
                    // and writes. A dynamic buffer's (IGNORE_SYNC) only ever writes.
                    let flags = match flags.contains(LockFlags::IGNORE_SYNC) {
                        true => flags,
                        false => flags - LockFlags::READ_ONLY - LockFlags::WRITE_ONLY,
                    };
                    kernel.lock(allocation, flags | LockFlags::PERSISTENT)?
                }
            };
            let bytes = NonNull::from(mapping.bytes_mut());
            let map = IcMap::Lent {
                allocation,
                mapping,
            };
            (map, bytes)
        } else {
            let mut mapping = kernel.lock(allocation, flags)?;
            let bytes = NonNull::from(mapping.bytes_mut());
            let map = IcMap::Locked {
                allocation,
                mapping,
            };
            (map, bytes)
        };
        Ok(self.note_map(resource, map, bytes))
    }

    /// The allocations the open Maps of resources' own memory hold locked (R-M4), into the
    /// context's scratch: a pass of the retire queue deallocates none of them. Found when a
    /// pass needs them, from the open Maps, not kept beside them.
    /// (Over the two fields, so that the device stays borrowed meanwhile.)
    pub(super) fn note_locked(open: &MappedAndBegun<IcMap>, locked: &mut Vec<AllocationHandle>) {
        locked.clear();
        locked.extend(open.maps().filter_map(|map| match map {
            IcMap::Locked { allocation, .. } | IcMap::Lent { allocation, .. } => Some(*allocation),
            // A rename's allocation is no object's until its Unmap: the queue never has it.
            IcMap::Discard(_) | IcMap::Renamed { .. } => None,
        }));
    }

    /// Unmap: after [`ImmediateContext::map_discard`], the bytes written become the
    /// resource's contents: the allocation written becomes the resource's (a rename, R-M5:
    /// the kernel unlocks it, then the driver hears [`Driver::renamed`]), or the driver hears
    /// the bytes ([`Op::WriteDiscard`]). After a Map of the resource's own memory, the kernel
    /// unlocks it ([`Kernel::unlock`]). The Unmap of a resource destroyed since its Map is
    /// [`AppError::StaleHandle`](crate::AppError::StaleHandle), whatever the Map's kind: the
    /// Map stays open, and device destruction ends it.
    pub fn unmap(&mut self, resource: Handle<Resource>) -> Result<()> {
        captured!(self, Call::Unmap(resource), self.unmap_uncaptured(resource))
    }

    #[inline(always)]
    fn unmap_uncaptured(&mut self, resource: Handle<Resource>) -> Result<()> {
        self.entry(|ic| {
            let guard = ic.device.shared.registry().ic_guard(&ic.token);
            let at = ic.open.find_mapped(resource)?;
            // A resource gone since its Map: refused, the Map left open, whatever its kind
            // (device destruction ends it). Checked before the Map is taken out, so that a
            // refusal has nothing to put back.
            let view = ic
                .device
                .shared
                .registry()
                .ic_live(&mut ic.token, resource, guard)?;
            match ic.open.unmap_at(at) {
                IcMap::Discard(contents) => ic.unmap_copied(guard, resource, view, contents),
                IcMap::Locked {
                    allocation,
                    mapping,
                } => {
                    ic.device.shared.kernel().unlock(allocation, mapping);
                    Ok(())
                }
                IcMap::Lent { mapping, .. } => {
                    // The lock stays: the resource has it back for its next Map.
                    view.entry().ic_side(&mut ic.token).lock = Some(mapping);
                    Ok(())
                }
                IcMap::Renamed { record, class, .. } => {
                    if !ic.persistent_locks {
                        ic.unlock_lent(record, class);
                    }
                    // Renamed whatever comes next: a bound view the driver refuses to bind
                    // again is this Unmap's error, the Map ended.
                    ic.rename(resource, view, record, class)
                }
            }
        })
    }

    /// The Unmap of a Map(DISCARD) that did not rename: the driver hears the new contents
    /// (`Op::WriteDiscard`), and the bytes go back to the context's spares. A refused Unmap
    /// leaves the resource mapped, as before the call (a driver hook that panics ends the Map
    /// instead). Out of line, as [`ImmediateContext::map_copied`] is.
    #[inline(never)]
    fn unmap_copied(
        &mut self,
        guard: &Guard,
        resource: Handle<Resource>,
        view: ObjectView<'_, D>,
        contents: Vec<u8>,
    ) -> Result<()> {
        let op = Op::WriteDiscard {
            resource: view,
            data: &contents,
        };
        match self.run(guard, &[view], op) {
            Ok(()) => {
                // What a Map(NO_OVERWRITE) after it waits for (R-M3).
                view.entry().ic_side(&mut self.token).discarded_in = self.buffer.number;
                self.spare_contents.push(contents);
                Ok(())
            }
            Err(e) => {
                self.open.map(resource, IcMap::Discard(contents));
                Err(e)
            }
        }
    }

    /// The lock of a rename's lent record ended at its Unmap, where locks do not persist. An
    /// unlock that panics counts as done: the allocation, never the resource's, goes back
    /// to the pool.
    #[inline(never)]
    fn unlock_lent(&mut self, record: RecordId, class: ClassId) {
        let held = self.rename_pool.record_mut(record);
        let (allocation, mapping) = (held.allocation, held.lock.take());
        let back =
            scopeguard::guard_on_unwind(&mut self.rename_pool, |pool| pool.put_back(class, record));
        if let Some(mapping) = mapping {
            self.device.shared.kernel().unlock(allocation, mapping);
        }
        ScopeGuard::into_inner(back);
    }

    /// Unlocks every Map of a resource's own memory left open, persistent locks lent to a
    /// Map included (device destruction).
    pub(super) fn unlock_all(&mut self) {
        let kernel = self.device.shared.kernel();
        while let Some((_, map)) = self.open.pop_mapped() {
            match map {
                IcMap::Discard(_) => {}
                IcMap::Locked {
                    allocation,
                    mapping,
                }
                | IcMap::Lent {
                    allocation,
                    mapping,
                } => kernel.unlock(allocation, mapping),
                IcMap::Renamed { record, class, .. } => {
                    let held = self.rename_pool.record_mut(record);
                    let (allocation, mapping) = (held.allocation, held.lock.take());
                    // Into the pool whether the unlock returns or panics.
                    self.rename_pool.put_back(class, record);
                    if let Some(mapping) = mapping {
                        kernel.unlock(allocation, mapping);
                    }
                }
            }
        }
    }
}
