//! CPU access on the immediate context (R-M1, R-M3, R-M4): Map(DISCARD) through the
//! context's own bytes, handed to the driver at the Unmap; Map(NO_OVERWRITE) of a dynamic
//! buffer and the staging Maps (READ, WRITE, READ_WRITE) through the kernel's lock of the
//! resource's own memory, a staging Map waiting first for the newest buffer that uses the
//! resource (or answering that the GPU still draws); and whether a staging resource is busy.

use super::ImmediateContext;
use crate::desc::Usage;
use crate::driver::{Driver, Op};
use crate::error::{AppError, Error, Result};
use crate::handle::{Handle, Resource};
use crate::kernel::{AllocationHandle, Kernel};
use crate::map_type::{MapFlags, MapType};
use crate::mapping::{CpuMapping, LockFlags};

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
}

impl IcMap {
    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            IcMap::Discard(contents) => contents,
            IcMap::Locked { mapping, .. } => mapping.bytes_mut(),
        }
    }
}

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

    /// Map(DISCARD) of a dynamic resource (any other is an application error): the
    /// resource's new contents, zeroed, to write until [`ImmediateContext::unmap`], which
    /// hands them to the driver. While mapped, executing a command list that recorded a Map
    /// of it is an application error (R-C4).
    ///
    /// The bytes are the context's own (reused from map to map), allocated fallibly: a
    /// resource too big for memory is [`Error::OutOfMemory`].
    pub fn map_discard(&mut self, resource: Handle<Resource>) -> Result<&mut [u8]> {
        self.entry(|ic| ic.map_new(resource))?;
        Ok(self.open.mapped(resource)?.bytes_mut())
    }

    fn map_new(&mut self, resource: Handle<Resource>) -> Result<()> {
        let guard = self.device.shared.registry().ic_guard(&self.token);
        let size = self
            .device
            .shared
            .registry()
            .live(resource, guard)?
            .discard_len()?;
        self.open.check_map(resource)?;
        let mut contents = self.spare_contents.pop().unwrap_or_default();
        contents.clear();
        if contents.try_reserve_exact(size).is_err() {
            self.spare_contents.push(contents);
            return Err(Error::OutOfMemory);
        }
        contents.resize(size, 0);
        self.open.map(resource, IcMap::Discard(contents));
        Ok(())
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
        self.entry(|ic| {
            let caps = ic.device.shared.map_caps();
            let guard = ic.device.shared.registry().ic_guard(&ic.token);
            let view = ic.device.shared.registry().live(resource, guard)?;
            view.no_overwrite_len(caps)?;
            let allocation = view.allocation().ok_or(AppError::NotMappable)?;
            ic.open.check_map(resource)?;
            ic.wait_for_discard(resource)?;
            ic.lock(resource, allocation, LockFlags::WRITE_ONLY)
        })?;
        Ok(self.open.mapped(resource)?.bytes_mut())
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
        self.entry(|ic| {
            let lock = match ty {
                MapType::Read => LockFlags::READ_ONLY,
                MapType::Write => LockFlags::WRITE_ONLY,
                MapType::ReadWrite => LockFlags::empty(),
                MapType::WriteDiscard | MapType::WriteNoOverwrite => {
                    return Err(AppError::NotMappable.into())
                }
            };
            let allocation = ic.staging_allocation(resource)?;
            ic.open.check_map(resource)?;
            ic.wait_until_idle(resource, flags.contains(MapFlags::DO_NOT_WAIT))?;
            ic.lock(resource, allocation, lock)
        })?;
        Ok(self.open.mapped(resource)?.bytes_mut())
    }

    /// ResourceIsStagingBusy (R-M4): whether a buffer the GPU has not finished uses the
    /// staging resource, the open buffer included (nothing is flushed).
    pub fn resource_is_busy(&mut self, resource: Handle<Resource>) -> Result<bool> {
        self.entry(|ic| {
            ic.staging_allocation(resource)?;
            let last = ic.last_buffer_of(resource)?;
            Ok(last > ic.completed_fence()?)
        })
    }

    /// The allocation of a live staging resource; an application error for any other.
    fn staging_allocation(&mut self, resource: Handle<Resource>) -> Result<AllocationHandle> {
        let guard = self.device.shared.registry().ic_guard(&self.token);
        let view = self.device.shared.registry().live(resource, guard)?;
        if view.entry().usage() != Usage::Staging {
            return Err(AppError::NotMappable.into());
        }
        view.allocation()
            .ok_or_else(|| AppError::NotMappable.into())
    }

    /// The newest buffer that used `resource` (0: none), as its stamp says (R-D1).
    fn last_buffer_of(&mut self, resource: Handle<Resource>) -> Result<u64> {
        let guard = self.device.shared.registry().ic_guard(&self.token);
        let view = self.device.shared.registry().live(resource, guard)?;
        Ok(view.entry().ic_side(&mut self.token).last_buffer)
    }

    /// Waits until the GPU has finished the newest buffer that uses `resource`, flushing
    /// first if that is the open buffer; with `do_not_wait`, answers
    /// [`Error::WasStillDrawing`] instead of waiting (R-M4).
    fn wait_until_idle(&mut self, resource: Handle<Resource>, do_not_wait: bool) -> Result<()> {
        let last = self.last_buffer_of(resource)?;
        if last == 0 || last <= self.completed {
            return Ok(());
        }
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

    /// Waits until the GPU has run the buffer that carries `resource`'s last Map(DISCARD)
    /// (R-M3), flushing it first if it is the open one.
    fn wait_for_discard(&mut self, resource: Handle<Resource>) -> Result<()> {
        let guard = self.device.shared.registry().ic_guard(&self.token);
        let view = self.device.shared.registry().live(resource, guard)?;
        let discarded = view.entry().ic_side(&mut self.token).discarded_in;
        if discarded == 0 || discarded <= self.completed {
            return Ok(());
        }
        if discarded >= self.buffer.number {
            self.flush_inner()?;
        }
        if discarded > self.completed_fence()? {
            self.device.shared.kernel().wait_for_fence(discarded)?;
            self.completed_fence()?;
        }
        Ok(())
    }

    /// Locks `allocation` for a Map of `resource` and notes the Map.
    fn lock(
        &mut self,
        resource: Handle<Resource>,
        allocation: AllocationHandle,
        flags: LockFlags,
    ) -> Result<()> {
        let kernel = self.device.shared.kernel();
        let mapping = kernel.lock(allocation, flags | LockFlags::IGNORE_SYNC)?;
        self.open.map(
            resource,
            IcMap::Locked {
                allocation,
                mapping,
            },
        );
        Ok(())
    }

    /// Unmap: after [`ImmediateContext::map_discard`], the bytes written become the
    /// resource's contents (the driver hears them); after a Map of the resource's own memory,
    /// the kernel unlocks it ([`Kernel::unlock`]).
    pub fn unmap(&mut self, resource: Handle<Resource>) -> Result<()> {
        self.entry(|ic| {
            let guard = ic.device.shared.registry().ic_guard(&ic.token);
            let contents = match ic.open.unmap(resource)? {
                IcMap::Discard(contents) => contents,
                IcMap::Locked {
                    allocation,
                    mapping,
                } => {
                    ic.device.shared.kernel().unlock(allocation, mapping);
                    return Ok(());
                }
            };
            let written = ic
                .device
                .shared
                .registry()
                .live(resource, guard)
                .and_then(|view| {
                    let op = Op::WriteDiscard {
                        resource: view,
                        data: &contents,
                    };
                    ic.run(guard, &[view], None, op)?;
                    // What a Map(NO_OVERWRITE) after it waits for (R-M3).
                    view.entry().ic_side(&mut ic.token).discarded_in = ic.buffer.number;
                    Ok(())
                });
            match written {
                Ok(()) => {
                    ic.spare_contents.push(contents);
                    Ok(())
                }
                // A refused Unmap leaves the resource mapped, as before the call (a driver hook
                // that panics ends the Map instead).
                Err(e) => {
                    ic.open.map(resource, IcMap::Discard(contents));
                    Err(e)
                }
            }
        })
    }

    /// Unlocks every Map of a resource's own memory left open (device destruction).
    pub(super) fn unlock_all(&mut self) {
        let kernel = self.device.shared.kernel();
        while let Some((_, map)) = self.open.pop_mapped() {
            if let IcMap::Locked {
                allocation,
                mapping,
            } = map
            {
                kernel.unlock(allocation, mapping);
            }
        }
    }
}
