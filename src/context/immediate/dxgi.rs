//! The immediate context's DXGI entry points (R-X1..R-X7); their vocabulary is
//! [`crate::dxgi`]. None is free-threaded (R-F1): each runs on the immediate context's
//! thread, through its entry frame (refused once the device is gone, failures reported).

#[cfg(feature = "capture")]
use crate::capture::Call;
use std::sync::Arc;

use crossbeam_epoch::Guard;

use super::ImmediateContext;
use crate::bind::BindPoint;
use crate::context::device::DeviceShared;
use crate::desc::Usage;
use crate::driver::{Command, Driver, Op};
use crate::dxgi::{
    validate_blt, BltArgs, BltSide, DisplayModeCallback, DisplayModeOutcome, FrameStats, GammaCaps,
    PresentArgs, PresentCallback, PresentStatus, ResidencyFold, ResidencyStatus,
};
use crate::error::{AppError, Result};
use crate::handle::{AnyHandle, Handle, Resource};
use crate::kernel::{AllocationHandle, Kernel};
use crate::registry::{Entry, IcToken, ObjectView};
use crate::trace::span;

/// What the DXGI entry points keep between calls, so that a steady frame's residency query
/// allocates nothing.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// The frame statistics published before the newest, for the next present to reuse.
    spare_stats: Option<Arc<FrameStats>>,
    /// The bindings a rotation binds again.
    rebinds: Vec<(BindPoint, AnyHandle)>,
    allocations: Vec<AllocationHandle>,
    statuses: Vec<ResidencyStatus>,
    /// Per resource of a residency query: whether it has an allocation in `allocations`.
    has_allocation: Vec<bool>,
}

/// A presented or displayed surface: a texture, and the subresource in range.
fn check_surface<D: Driver>(view: ObjectView<'_, D>, subresource: u32) -> Result<()> {
    let texture = view.texture().ok_or(AppError::NotDisplayFormat)?;
    if subresource >= texture.subresources() {
        return Err(AppError::OutOfRange.into());
    }
    Ok(())
}

impl<D: Driver, K: Kernel> ImmediateContext<D, K> {
    /// PresentDXGI (R-X1): the driver's part of the present ([`Op::Present`]), then every
    /// partially built command buffer submitted through the render callback, then the
    /// kernel's present callback with the surfaces' *current* allocations (after any
    /// rotation, R-X5) and the runtime's context unchanged; its status is returned
    /// unchanged. An `_SRGB` source presented to a non-sRGB destination is copied unchanged
    /// (the driver's part). The present is the frame boundary: amortised processing runs if
    /// the frame went by without it (R-A1), and the frame's statistics are published
    /// ([`crate::Device::frame_stats`]).
    ///
    /// The surfaces are textures (`NotDisplayFormat` otherwise) with the subresource in range
    /// (`OutOfRange`).
    pub fn present(&mut self, args: &PresentArgs) -> Result<PresentStatus> {
        let result = captured!(
            answer self,
            Call::Present(*args),
            self.present_uncaptured(args)
        );
        #[cfg(feature = "capture")]
        if result.is_ok() {
            self.capture_present_checksum(args.src);
        }
        #[cfg(feature = "capture")]
        self.capture_write_out();
        result
    }

    #[inline(always)]
    fn present_uncaptured(&mut self, args: &PresentArgs) -> Result<PresentStatus> {
        let _span = span!("present");
        self.entry(|ic| {
            let guard = ic.device.shared.registry().ic_guard(&ic.token);
            let shared = Arc::clone(&ic.device.shared);
            let registry = shared.registry();
            let src = registry.live(args.src, guard)?;
            check_surface(src, args.src_subresource)?;
            let dst = match args.dst {
                Some((handle, subresource)) => {
                    let dst = registry.live(handle, guard)?;
                    check_surface(dst, subresource)?;
                    Some((dst, subresource))
                }
                None => None,
            };
            let op = Op::Present {
                src,
                src_subresource: args.src_subresource,
                dst,
                flags: args.flags,
            };
            match dst {
                Some((d, _)) => ic.run(guard, &[src, d], op)?,
                None => ic.run(guard, &[src], op)?,
            }
            // R-X1: partially built buffers go through the render callback first.
            ic.flush_inner()?;
            // Looked up again: the flush may have really destroyed what the application
            // destroyed meanwhile.
            let src = registry.live(args.src, guard)?;
            let src = src.allocation().ok_or(AppError::InvalidState)?;
            let dst = match args.dst {
                Some((handle, _)) => Some(
                    registry
                        .live(handle, guard)?
                        .allocation()
                        .ok_or(AppError::InvalidState)?,
                ),
                None => None,
            };
            let status = shared
                .kernel()
                .present(&PresentCallback::new(args, src, dst))?;
            ic.frame_boundary();
            ic.publish_frame_stats(src);
            Ok(status)
        })
    }

    /// Publishes this frame's statistics for any thread to read (arc-swap: one store, lock
    /// free readers that never see half of an update).
    fn publish_frame_stats(&mut self, presented: AllocationHandle) {
        let mut residency = [ResidencyStatus::GpuMemory];
        let kernel = self.device.shared.kernel();
        let presented_residency = match kernel.query_residency(&[presented], &mut residency) {
            Ok(()) => Some(residency[0]),
            Err(_) => None,
        };
        let frame = self.device.shared.frame_stats().frame + 1;
        let retire = self.retire_stats();
        let stats = FrameStats {
            frame,
            last_submitted: self.last_submitted,
            amortized: self.amortizer.count(),
            waiting_destruction: retire.waiting_destruction,
            waiting_deallocation: retire.waiting_deallocation,
            retained_bytes: retire.retained_bytes,
            lists_in_flight: self.lists_in_flight.len(),
            presented_residency,
        };
        // The snapshot two frames old comes back for this one unless a reader still holds
        // it: a steady frame allocates nothing.
        let published = match self.dxgi_scratch.spare_stats.take() {
            Some(mut spare) => match Arc::get_mut(&mut spare) {
                Some(slot) => {
                    *slot = stats;
                    spare
                }
                None => Arc::new(stats),
            },
            None => Arc::new(stats),
        };
        let previous = self.device.shared.publish_frame_stats(published);
        self.dxgi_scratch.spare_stats = Some(previous);
    }

    /// GetGammaCapsDXGI (R-X2): the driver's gamma control capabilities, checked.
    pub fn gamma_caps(&mut self) -> Result<GammaCaps> {
        captured!(answer self, Call::GammaCaps, self.gamma_caps_uncaptured())
    }

    #[inline(always)]
    fn gamma_caps_uncaptured(&mut self) -> Result<GammaCaps> {
        self.entry(|ic| ic.device.shared.driver().gamma_caps())
    }

    /// SetDisplayMode (R-X2): the kernel's set-display-mode callback with the primary's
    /// current allocation (after any rotation), reached only from inside this call (R-T2).
    /// If the open buffer references the primary, it is submitted first. Refused for a
    /// resource that is not a primary (`PrimaryMismatch`), not a texture
    /// (`NotDisplayFormat`), or a subresource out of range (`OutOfRange`).
    pub fn set_display_mode(
        &mut self,
        primary: Handle<Resource>,
        subresource: u32,
    ) -> Result<DisplayModeOutcome> {
        captured!(
            answer self,
            Call::SetDisplayMode {
                primary,
                subresource,
            },
            self.set_display_mode_uncaptured(primary, subresource)
        )
    }

    #[inline(always)]
    fn set_display_mode_uncaptured(
        &mut self,
        primary: Handle<Resource>,
        subresource: u32,
    ) -> Result<DisplayModeOutcome> {
        self.entry(|ic| {
            let guard = ic.device.shared.registry().ic_guard(&ic.token);
            let shared = Arc::clone(&ic.device.shared);
            let registry = shared.registry();
            let view = registry.live(primary, guard)?;
            if !view.entry().is_primary() {
                return Err(AppError::PrimaryMismatch.into());
            }
            check_surface(view, subresource)?;
            if view.entry().ic_side(&mut ic.token).last_buffer == ic.buffer.number {
                ic.flush_inner()?;
            }
            let allocation = registry
                .live(primary, guard)?
                .allocation()
                .ok_or(AppError::InvalidState)?;
            let call = DisplayModeCallback::new(allocation);
            shared.kernel().set_display_mode(&call)
        })
    }

    /// SetResourcePriority (R-X3): the kernel's set-priority callback with the resource's
    /// current allocations (none for a resource without kernel memory: no callback).
    pub fn set_resource_priority(
        &mut self,
        resource: Handle<Resource>,
        priority: u32,
    ) -> Result<()> {
        captured!(
            self,
            Call::SetPriority { resource, priority },
            self.set_resource_priority_uncaptured(resource, priority)
        )
    }

    #[inline(always)]
    fn set_resource_priority_uncaptured(
        &mut self,
        resource: Handle<Resource>,
        priority: u32,
    ) -> Result<()> {
        self.entry(|ic| {
            let guard = ic.device.shared.registry().ic_guard(&ic.token);
            let view = ic.device.shared.registry().live(resource, guard)?;
            match view.allocation() {
                Some(allocation) => ic
                    .device
                    .shared
                    .kernel()
                    .set_priority(&[allocation], priority),
                None => Ok(()),
            }
        })
    }

    /// QueryResourceResidency (R-X4): one kernel query for the allocations of all
    /// `resources`; `out[i]` gets resource `i`'s status folded over its allocations, and the
    /// fold over all of them is returned ([`ResidencyFold::hresult`] is the call's
    /// `HRESULT`). A resource without kernel memory counts as resident. Refused before any
    /// callback: a system-memory (staging) resource, never queried (`InvalidState`), and
    /// `out` not as long as `resources` (`OutOfRange`).
    pub fn query_resource_residency(
        &mut self,
        resources: &[Handle<Resource>],
        out: &mut [ResidencyStatus],
    ) -> Result<ResidencyFold> {
        captured!(
            self,
            Call::QueryResidency(u32::try_from(resources.len()).unwrap_or(u32::MAX),),
            self.query_resource_residency_uncaptured(resources, out)
        )
    }

    #[inline(always)]
    fn query_resource_residency_uncaptured(
        &mut self,
        resources: &[Handle<Resource>],
        out: &mut [ResidencyStatus],
    ) -> Result<ResidencyFold> {
        self.entry(|ic| {
            if out.len() != resources.len() {
                return Err(AppError::OutOfRange.into());
            }
            let guard = ic.device.shared.registry().ic_guard(&ic.token);
            let registry = ic.device.shared.registry();
            let scratch = &mut ic.dxgi_scratch;
            scratch.allocations.clear();
            scratch.has_allocation.clear();
            for resource in resources {
                let view = registry.live(*resource, guard)?;
                if view.entry().usage() == Usage::Staging {
                    return Err(AppError::InvalidState.into());
                }
                scratch.has_allocation.push(view.allocation().is_some());
                scratch.allocations.extend(view.allocation());
            }
            scratch.statuses.clear();
            let n = scratch.allocations.len();
            scratch.statuses.resize(n, ResidencyStatus::GpuMemory);
            if n > 0 {
                ic.device
                    .shared
                    .kernel()
                    .query_residency(&scratch.allocations, &mut scratch.statuses)?;
            }
            let mut statuses = scratch.statuses.iter();
            for (slot, has) in out.iter_mut().zip(&scratch.has_allocation) {
                let fold = match (has, statuses.next()) {
                    (true, Some(status)) => ResidencyFold::of(*status),
                    _ => ResidencyFold::Resident,
                };
                *slot = fold.status();
            }
            Ok(ResidencyFold::fold(out.iter().copied()))
        })
    }

    /// RotateResourceIdentities (R-X5): resources X, Y, Z become Y, Z, X by ascending
    /// index. Their kernel allocations rotate (the handles do not), each with its
    /// last-buffer stamp (so the open buffer still lists every allocation it references, and
    /// nothing is deallocated on another resource's clock, R-D1); the driver rotates its IC
    /// data's identity ([`Driver::rotate_identities`]); every current binding of one of them
    /// or of a view of one is bound again; views refresh lazily before their next use here
    /// ([`Driver::refresh_view`]). A command list recorded before renders into the new
    /// identities when executed after.
    ///
    /// Refused, changing nothing (`NotRotatable`): the same resource twice, descriptions that
    /// differ (size, bind flags, usage, texture shape, primary, kernel memory), a resource
    /// mapped on this context. Fewer than two resources rotate nothing.
    pub fn rotate_resource_identities(&mut self, resources: &[Handle<Resource>]) -> Result<()> {
        // DXGI's swap chains hold at most 16 buffers; a longer rotation cannot be kept.
        #[cfg(feature = "capture")]
        if resources.len() > crate::capture::MAX_ROTATED {
            if let Some(capture) = &self.capture {
                capture.sink().lost();
            }
        }
        captured!(
            self,
            Self::rotate_call(resources),
            self.rotate_resource_identities_uncaptured(resources)
        )
    }

    #[inline(always)]
    fn rotate_resource_identities_uncaptured(
        &mut self,
        resources: &[Handle<Resource>],
    ) -> Result<()> {
        let _span = span!("rotate");
        self.entry(|ic| {
            let guard = ic.device.shared.registry().ic_guard(&ic.token);
            let registry = ic.device.shared.registry();
            // Every handle first (a stale one is its own error), then what rotates together.
            for resource in resources {
                registry.live(*resource, guard)?;
            }
            // Looked up again where needed rather than kept: nothing allocated per call. Only
            // this thread unlinks entries, so each lookup finds what the first did, even if
            // another thread destroys the object meanwhile (which only marks it).
            let view = |i: usize| registry.held(resources[i], guard).expect("checked above");
            if resources.is_empty() {
                return Ok(());
            }
            let first = view(0);
            let not_rotatable = AppError::NotRotatable;
            for (i, resource) in resources.iter().enumerate() {
                let view = view(i);
                let alike = view.byte_size() == first.byte_size()
                    && view.bind_flags() == first.bind_flags()
                    && view.entry().usage() == first.entry().usage()
                    && view.texture() == first.texture()
                    && view.entry().is_primary() == first.entry().is_primary()
                    && view.allocation().is_some() == first.allocation().is_some();
                let repeated = resources[..i].contains(resource);
                let mapped = ic.open.check_map(*resource).is_err();
                if !alike || repeated || mapped {
                    return Err(not_rotatable.into());
                }
            }
            let n = resources.len();
            if n < 2 {
                return Ok(());
            }
            // What was bound so far in the open buffer was read there with the allocations
            // it has now: referenced before they move, as the flush references the bindings
            // with the allocations they have then (R-D1).
            Self::reference_bound(&ic.bindings, &mut ic.buffer, &mut ic.token, registry);
            // (allocation, last buffer, renamable size, persistent lock) move together, one
            // place to the left: each takes its right neighbour's (read before it changes),
            // the last the first's. The size goes with its allocation: a shared allocation
            // (size 0) is never renamed, whichever resource holds it (R-M5); and so does the
            // allocation's lock, which is the allocation's, not the resource's.
            let token = &mut ic.token;
            let moved = |view: ObjectView<'_, D>, token: &mut IcToken| {
                let side = view.entry().ic_side(token);
                let lock = side.lock.take();
                (
                    view.allocation(),
                    side.last_buffer,
                    side.allocation_size,
                    lock,
                )
            };
            let mut wrapped = Some(moved(first, token));
            for i in 0..n {
                let (allocation, last_buffer, allocation_size, lock) = match i + 1 < n {
                    true => moved(view(i + 1), token),
                    false => wrapped.take().expect("the first's, once"),
                };
                let entry = view(i).entry();
                entry.set_allocation(token, allocation);
                let side = entry.ic_side(token);
                side.last_buffer = last_buffer;
                side.allocation_size = allocation_size;
                side.rename_class = None;
                side.lock = lock;
                side.identity += 1;
            }
            ic.rotations += 1;
            ic.buffer.rotated = true;
            let s = &*ic.device.shared;
            let entries = (0..n).map(|i| view(i).entry());
            if let Some(data) = Entry::ic_data_of_many(&mut ic.token, entries, &mut ic.ic_refs) {
                s.driver().rotate_identities(&mut ic.imm, data);
            }
            ic.rebind_rotated(guard, resources)
        })
    }

    /// Binds again every current binding of a rotated resource or of a view of one (R-X5),
    /// or of a renamed one (R-M5).
    pub(super) fn rebind_rotated(
        &mut self,
        guard: &'static Guard,
        rotated: &[Handle<Resource>],
    ) -> Result<()> {
        let registry = self.device.shared.registry();
        let is_rotated = |view: ObjectView<'_, D>| {
            rotated
                .iter()
                .any(|r| r.any() == view.handle() || view.dependency() == Some(r.any()))
        };
        // The points to bind again, gathered first (binding runs on `self`), in kept memory.
        let mut rebinds = core::mem::take(&mut self.dxgi_scratch.rebinds);
        rebinds.clear();
        rebinds.extend(
            self.bindings
                .iter()
                .filter(|&(_, handle)| registry.held(handle, guard).is_ok_and(is_rotated)),
        );
        let mut result = Ok(());
        for &(point, handle) in &rebinds {
            let Ok(view) = self.device.shared.registry().held(handle, guard) else {
                continue;
            };
            let op = Op::Bind {
                point,
                object: Some(view),
            };
            result = self.run(guard, &[view], op);
            if result.is_err() {
                break;
            }
        }
        self.dxgi_scratch.rebinds = rebinds;
        result
    }

    /// Refreshes, before the driver uses them here, the views among `objects` and the
    /// command's objects whose resource changed identity since their last refresh (R-X5).
    pub(super) fn refresh_views(
        &mut self,
        guard: &Guard,
        objects: &[ObjectView<'_, D>],
        command: Option<&D::Command>,
    ) -> Result<()> {
        let s = &*self.device.shared;
        let (token, imm) = (&mut self.token, &mut self.imm);
        for view in objects {
            Self::refresh_view(s, token, imm, guard, *view)?;
        }
        if let Some(command) = command {
            let mut result = Ok(());
            command.for_each_object(&mut |handle| {
                if result.is_ok() {
                    if let Ok(view) = s.registry().held(handle, guard) {
                        result = Self::refresh_view(s, token, imm, guard, view);
                    }
                }
            });
            result?;
        }
        Ok(())
    }

    /// Refreshes one view if its resource's identity moved on (R-X5). Over the context's
    /// parts rather than `&mut self`, so that a walk of a command's objects borrows them
    /// without taking a reference on the device.
    pub(super) fn refresh_view(
        s: &DeviceShared<D, K>,
        token: &mut IcToken,
        imm: &mut D::Immediate,
        guard: &Guard,
        view: ObjectView<'_, D>,
    ) -> Result<()> {
        let Some(dependency) = view.dependency() else {
            return Ok(());
        };
        let resource = s.registry().held(dependency, guard)?;
        let identity = resource.entry().ic_side(token).identity;
        let side = view.entry().ic_side(token);
        if side.identity != identity {
            s.driver()
                .refresh_view(imm, view, &mut side.data, resource)?;
            side.identity = identity;
        }
        Ok(())
    }

    /// BltDXGI (R-X6, R-X7): every restriction of R-X7 checked before any hook (the errors
    /// are the application's, R-E1; see [`BltArgs`]'s fields and [`crate::dxgi::BltPlan`]),
    /// then [`Driver::blt`], then both resources stamped with the open buffer. A rotation is
    /// refused unless the driver's [`Driver::blt_caps`] include
    /// [`crate::dxgi::BltCaps::ROTATION`].
    pub fn blt(&mut self, args: &BltArgs) -> Result<()> {
        captured!(self, Call::Blt(*args), self.blt_uncaptured(args))
    }

    #[inline(always)]
    fn blt_uncaptured(&mut self, args: &BltArgs) -> Result<()> {
        let _span = span!("blt");
        self.entry(|ic| {
            let guard = ic.device.shared.registry().ic_guard(&ic.token);
            let registry = ic.device.shared.registry();
            let src = registry.live(args.src, guard)?;
            let dst = registry.live(args.dst, guard)?;
            let side = |view: ObjectView<'_, D>| BltSide {
                texture: view.texture(),
                bind: view.bind_flags(),
            };
            let caps = ic.device.shared.driver().blt_caps();
            let plan = validate_blt(args.src == args.dst, side(src), side(dst), args, caps)?;
            ic.run_hook(guard, &[src, dst], None, |driver, imm, objects| {
                driver.blt(imm, objects, src, dst, &plan)
            })
        })
    }
}

#[cfg(test)]
#[cfg(feature = "soft")]
mod tests {
    use crate::dxgi::DisplayFormat;
    use crate::soft::{self, Gpu, SoftCommand, SoftConfig};
    use crate::{BindClass, BindFlags, BindPoint, DeviceConfig, ResourceDesc, Texture2d};

    /// For miri: a rotation lays out its resources' IC data references in kept memory
    /// (`Entry::ic_data_of_many`'s pointers), moves the allocations one place, and binds
    /// again what was bound; three rounds, so the kept memory is reused.
    #[test]
    fn rotation_hands_the_driver_every_resources_ic_data() {
        let config = SoftConfig {
            trace: false,
            gpu: Gpu::Immediate,
            ..SoftConfig::from_env().unwrap()
        };
        let (device, mut ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
        let texture = Texture2d {
            width: 2,
            height: 1,
            array_size: 1,
            mip_levels: 1,
            samples: 1,
            format: DisplayFormat::B8G8R8A8Unorm.to_dxgi(),
        };
        let desc = ResourceDesc {
            byte_size: 8,
            bind: BindFlags::PRESENT | BindFlags::RENDER_TARGET,
            texture: Some(texture),
            ..Default::default()
        };
        let chain = [(); 3].map(|()| device.create_resource(desc).unwrap());
        let allocations = chain.map(|r| device.object(r).unwrap().allocation());
        for (i, r) in chain.iter().enumerate() {
            ic.command(&SoftCommand::Fill {
                dst: *r,
                value: i as u8,
            })
            .unwrap();
        }
        let rt0 = BindPoint::new(BindClass::RenderTarget, 0);
        ic.bind(rt0, Some(chain[1].any())).unwrap();
        for round in 1..=3 {
            ic.rotate_resource_identities(&chain).unwrap();
            for (i, r) in chain.iter().enumerate() {
                let now = device.object(*r).unwrap().allocation();
                assert_eq!(now, allocations[(i + round) % 3], "one place to the left");
            }
            assert_eq!(ic.binding(rt0), Some(chain[1].any()), "bound again");
        }
        ic.flush().unwrap();
        let first = world
            .read(device.object(chain[0]).unwrap().allocation().unwrap())
            .unwrap();
        assert_eq!(
            first,
            vec![0; 8],
            "three rotations bring each allocation back"
        );
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}
