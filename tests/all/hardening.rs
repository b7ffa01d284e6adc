//! Cases an embedder's own checks found: bad input refused as error values before any hook,
//! a kernel whose fence misbehaves, amortised processing never twice back to back.

use cmdlist::soft::{self, Gpu, Hook, SoftConfig, SoftDriver, SoftKernel};
use cmdlist::{
    AppError, ContextId, Device, DeviceConfig, Error, Kernel, ResourceDesc, Submission, Usage,
};

use crate::common::{buffer, setup};

fn hooks_since(world: &soft::SoftWorld, from: usize) -> Vec<Hook> {
    world.trace()[from..].iter().map(|e| e.hook).collect()
}

/// R-A1: update, flush (performs it), update, end of frame: the frame had its performance,
/// so the end of the frame must not perform it again without a submit between.
#[test]
fn r_a1_end_frame_never_performs_twice_back_to_back() {
    let (device, mut ic, world) = setup(Gpu::Immediate, true, cmdlist::Clock::Completed);
    let r = device.create_resource(buffer(16)).unwrap();
    ic.update(r, 0, &[1; 4]).unwrap();
    ic.flush().unwrap();
    let after_flush = world.amortized_calls();
    assert_eq!(after_flush, 1, "the first submit performs it");
    ic.update(r, 4, &[2; 4]).unwrap();
    ic.end_frame().unwrap();
    assert_eq!(
        world.amortized_calls(),
        after_flush,
        "performed twice back to back without a submit between"
    );
    // A new frame's first submit performs it; a second submit too soon is left due, and
    // the frame, which had its performance, leaves it to the next.
    ic.update(r, 8, &[3; 4]).unwrap();
    ic.flush().unwrap();
    assert_eq!(world.amortized_calls(), after_flush + 1);
    ic.update(r, 8, &[4; 4]).unwrap();
    ic.flush().unwrap();
    ic.end_frame().unwrap();
    assert_eq!(world.amortized_calls(), after_flush + 1);
    // A frame without a submit of its own: its end pumps what was due (never starved).
    ic.end_frame().unwrap();
    assert_eq!(world.amortized_calls(), after_flush + 2);
    // Operations but nothing submitted since: not again.
    ic.update(r, 12, &[5; 4]).unwrap();
    ic.end_frame().unwrap();
    assert_eq!(world.amortized_calls(), after_flush + 2);
    assert_eq!(ic.amortized_count(), world.amortized_calls());
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// R-E1: the immediate context's UpdateSubresource past the end of a resource is the
/// application's error, refused before any hook, as on deferred contexts.
#[test]
fn r_e1_immediate_update_out_of_range_is_refused_before_any_hook() {
    let (device, mut ic, world) = setup(Gpu::Immediate, true, cmdlist::Clock::Completed);
    let r = device.create_resource(buffer(16)).unwrap();
    let from = world.trace().len();
    let out_of_range = Err(Error::Application(AppError::OutOfRange));
    assert_eq!(ic.update(r, 8, &[0; 9]), out_of_range);
    assert_eq!(ic.update(r, 17, &[0; 1]), out_of_range);
    assert_eq!(ic.update(r, u64::MAX, &[0; 2]), out_of_range);
    assert_eq!(ic.update(r, 0, &[]), out_of_range);
    assert!(
        hooks_since(&world, from)
            .iter()
            .all(|h| *h == Hook::SetError),
        "only the error reports: {:?}",
        hooks_since(&world, from)
    );
    ic.update(r, 8, &[7; 8]).unwrap();
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// R-E1, R-E3: Map(DISCARD) of a dynamic resource too large to address is an error value on
/// both contexts, never an overflow panic.
#[test]
fn r_e3_map_discard_of_an_unaddressable_size_is_an_error_value() {
    let (device, mut ic, world) = soft::device(
        SoftConfig {
            resources_without_memory: true,
            ..SoftConfig::from_env().unwrap()
        },
        DeviceConfig::default(),
    )
    .unwrap();
    let huge = ResourceDesc {
        byte_size: u64::MAX,
        usage: Usage::Dynamic,
        ..Default::default()
    };
    let r = device.create_resource(huge).unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    // Out of memory removes the context locally (R-E3): later calls are accepted and do
    // nothing, and Finish reports it once.
    assert_eq!(dc.map_discard(r).err(), Some(Error::OutOfMemory));
    assert!(dc.is_removed());
    assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
    assert!(!dc.is_removed());
    assert!(world
        .errors()
        .contains(&(dc.id().into(), Error::OutOfMemory)));
    // The context records again afterwards.
    drop(dc.finish().unwrap());
    drop(dc);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// A soft kernel whose completed fence can be made to lie.
struct LyingKernel {
    inner: SoftKernel,
    lie: std::sync::Mutex<Option<u64>>,
}

impl Kernel for LyingKernel {
    fn allocate(
        &self,
        desc: &cmdlist::AllocationDesc,
    ) -> cmdlist::Result<cmdlist::AllocationHandle> {
        self.inner.allocate(desc)
    }
    fn deallocate(&self, allocation: cmdlist::AllocationHandle) {
        self.inner.deallocate(allocation)
    }
    fn submit(&self, submission: &Submission<'_>) -> cmdlist::Result<()> {
        self.inner.submit(submission)
    }
    fn completed_fence(&self) -> u64 {
        let real = self.inner.completed_fence();
        self.lie.lock().unwrap().unwrap_or(real)
    }
    fn wait_for_fence(&self, fence: u64) -> cmdlist::Result<()> {
        self.inner.wait_for_fence(fence)
    }
    fn set_error(&self, context: ContextId, error: Error) {
        self.inner.set_error(context, error)
    }
    fn perform_amortized_processing(&self, context: ContextId) {
        self.inner.perform_amortized_processing(context)
    }
}

/// R-E1, R-D1, R-D4: a completed fence past the last submitted buffer, or going backwards,
/// is the kernel's error (`InvalidArg`); the engine keeps its last trusted value, so nothing
/// is deallocated before the GPU really finished with it.
#[test]
fn r_e1_kernel_fence_past_submitted_or_backwards_is_invalid_arg_and_frees_nothing_early() {
    let (driver, kernel, world) = soft::new(SoftConfig::from_env().unwrap()); // GPU completes by hand
    let kernel = LyingKernel {
        inner: kernel,
        lie: std::sync::Mutex::new(None),
    };
    let (device, mut ic): (Device<SoftDriver, LyingKernel>, _) =
        Device::new(driver, kernel, DeviceConfig::default()).unwrap();
    let a = device.create_resource(buffer(16)).unwrap();
    let b = device.create_resource(buffer(16)).unwrap();
    ic.update(a, 0, &[1; 16]).unwrap();
    ic.update(b, 0, &[1; 16]).unwrap();
    ic.flush().unwrap(); // buffer 1 submitted, not completed
    device.destroy(a).unwrap();
    // The kernel claims a fence that was never submitted.
    *device.kernel().lie.lock().unwrap() = Some(1_000);
    assert_eq!(ic.flush(), Err(Error::InvalidArg));
    assert!(
        world.live_allocations() == 2,
        "a's memory was freed on a fence the GPU never reached"
    );
    // The truth: buffer 1 completes; then the kernel goes backwards.
    *device.kernel().lie.lock().unwrap() = None;
    world.complete_all();
    ic.flush().unwrap();
    assert_eq!(
        world.live_allocations(),
        1,
        "a freed once buffer 1 completed"
    );
    ic.update(b, 0, &[2; 16]).unwrap();
    ic.flush().unwrap(); // buffer 3
    device.destroy(b).unwrap();
    *device.kernel().lie.lock().unwrap() = Some(0);
    assert_eq!(ic.flush(), Err(Error::InvalidArg));
    assert_eq!(world.live_allocations(), 1, "b is still in use by buffer 3");
    assert!(world
        .errors()
        .iter()
        .any(|(c, e)| *c == ContextId::Immediate && *e == Error::InvalidArg));
    *device.kernel().lie.lock().unwrap() = None;
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// An error says what happened and the rule it enforces: DestroyDevice while a deferred
/// context lives is its own kind, naming R-H2, and changes nothing.
#[test]
fn r_e1_errors_name_their_kind_and_rule() {
    let (device, mut ic, world) = setup(Gpu::Immediate, true, cmdlist::Clock::Completed);
    let dc = device.create_deferred_context().unwrap();
    let refused = ic.destroy_device().unwrap_err();
    assert_eq!(refused, Error::Application(AppError::DeferredContextsAlive));
    let text = refused.to_string();
    assert!(text.contains("deferred contexts are alive"), "{text}");
    assert!(text.contains("R-H2"), "{text}");
    assert!(Error::OutOfMemory.to_string().contains("R-E3"));
    assert!(Error::InvalidArg.to_string().contains("driver"));
    let stale = Error::from(AppError::StaleHandle).to_string();
    assert!(
        stale.contains("StaleHandle") && stale.contains("R-E1"),
        "{stale}"
    );
    drop(dc);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// A deferred context that outlives its device (the immediate context dropped while it
/// records, one handle open): device destruction leaves the object the handle holds, so the
/// driver hears of the context only the handle's close when the recording is dropped and
/// its DestroyDeferredContext when it is dropped (no abandon, unbind, recycle or create hook
/// on a destroyed device), and the object's destroy after, with the device's last reference.
/// Finish and Abandon answer `DeviceRemoved`; no rule is broken (R-C1, R-C2, R-D3, R-H2), in
/// every list mode.
#[test]
fn r_c1_r_d3_a_context_outliving_its_device_hears_only_its_closes_and_destroy() {
    for (command_lists, driver_built) in [(false, false), (true, false), (true, true)] {
        for finish in [true, false] {
            let config = SoftConfig {
                command_lists,
                driver_built,
                ..SoftConfig::from_env().unwrap()
            };
            let (device, ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
            let mode = (device.list_mode(), finish);
            let r = device.create_resource(buffer(16)).unwrap();
            let mut dc = device.create_deferred_context().unwrap();
            let id = dc.id();
            dc.command(cmdlist::soft::SoftCommand::Fill { dst: r, value: 1 })
                .unwrap();
            drop(ic);
            let from = world.trace().len();
            let ended = match finish {
                true => dc.finish().map(drop),
                false => dc.abandon(),
            };
            assert_eq!(ended, Err(Error::DeviceRemoved), "{mode:?}");
            assert_eq!(dc.stats().open_handles, 0, "{mode:?}: handles released");
            assert_eq!(
                dc.command(cmdlist::soft::SoftCommand::Fill { dst: r, value: 2 }),
                Err(Error::DeviceRemoved),
                "{mode:?}"
            );
            drop(dc);
            let heard: Vec<Hook> = world.trace()[from..]
                .iter()
                .filter(|e| e.context == Some(id))
                .map(|e| e.hook)
                .collect();
            let expected: &[Hook] = match command_lists {
                true => &[Hook::CloseLocal, Hook::DestroyDeferredContext],
                false => &[],
            };
            assert_eq!(heard, expected, "{mode:?}");
            drop(device);
            assert!(
                world.violations().is_empty(),
                "{mode:?}: {:?}",
                world.violations()
            );
            assert_eq!(world.soft_objects_alive(), 0, "{mode:?}");
        }
    }
}

/// The driver runs out of memory while a Map is made (R-E3): in either list mode, whichever
/// hook says so (`record_deferred` hearing the Map where the engine replays lists,
/// `map_discard_deferred` where the driver builds them), the context is removed, the error
/// goes to its sink, and the Map hands out scratch memory of the resource's size, as a Map
/// past the budget does; Finish then answers out of memory once.
#[test]
fn r_e3_a_map_the_driver_cannot_make_hands_out_scratch_in_every_mode() {
    use cmdlist::soft::inject::{self, Fault, FaultPlan};
    use std::sync::Arc;
    for (driver_built, hook) in [(false, "record_deferred"), (true, "map_discard_deferred")] {
        let scenario = |plan: &Arc<FaultPlan>| {
            let config = SoftConfig {
                command_lists: true,
                driver_built,
                ..SoftConfig::from_env().unwrap()
            };
            let (driver, kernel, world) = inject::new(plan, config);
            let (device, mut ic, _) = Device::new(driver, kernel, DeviceConfig::default())
                .map(|(d, i)| (d, i, ()))
                .unwrap();
            let r = device
                .create_resource(crate::common::dynamic_buffer(48))
                .unwrap();
            let mut dc = device.create_deferred_context().unwrap();
            let mark = plan.calls();
            let mapped = dc.map_discard(r).map(|bytes| {
                bytes.fill(9);
                bytes.len()
            });
            let removed = dc.is_removed();
            let finished = dc.finish().map(drop);
            drop(dc);
            ic.destroy_device().unwrap();
            (mark, mapped, removed, finished, world)
        };
        let counting = Arc::new(FaultPlan::counting().with_log());
        let (mark, ..) = scenario(&counting);
        let at = counting.log()[mark as usize..]
            .iter()
            .position(|h| *h == hook)
            .expect("the Map reaches the hook") as u64;
        let plan = Arc::new(FaultPlan::at(mark + at, Fault::Error(Error::OutOfMemory)));
        let (_, mapped, removed, finished, world) = scenario(&plan);
        assert_eq!(plan.hit().map(|h| h.hook), Some(hook));
        assert_eq!(mapped, Ok(48), "{hook}: scratch of the resource's size");
        assert!(removed, "{hook}");
        assert_eq!(finished, Err(Error::OutOfMemory), "{hook}");
        assert!(world
            .errors()
            .iter()
            .any(|(c, e)| matches!(c, ContextId::Deferred(_)) && *e == Error::OutOfMemory));
        world.assert_clean();
    }
}

/// A view the driver cannot refresh after an identity rotation (R-X5) refuses the
/// CommandListExecute before anything of it runs, as it refuses any operation: the error is
/// returned, the list's execute hook is never called, and the immediate context's bindings
/// stay (no clear-state ran).
#[test]
fn r_x5_a_refused_view_refresh_refuses_the_execute_before_it_runs() {
    use cmdlist::soft::inject::{self, Fault, FaultPlan};
    use cmdlist::{BindClass, BindFlags, BindPoint, HandleType, Texture2d, ViewDesc};
    use std::sync::Arc;
    let rt0 = BindPoint::new(BindClass::RenderTarget, 0);
    let scenario = |plan: &Arc<FaultPlan>| {
        let config = SoftConfig {
            command_lists: true,
            ..SoftConfig::from_env().unwrap()
        };
        let (driver, kernel, world) = inject::new(plan, config);
        let (device, mut ic) = Device::new(driver, kernel, DeviceConfig::default()).unwrap();
        let bind = BindFlags::PRESENT | BindFlags::RENDER_TARGET;
        let desc = ResourceDesc::texture(Texture2d::default(), bind).unwrap();
        let (x, y) = (
            device.create_resource(desc).unwrap(),
            device.create_resource(desc).unwrap(),
        );
        let view_desc = ViewDesc {
            resource: y,
            first_byte: 0,
            byte_len: 4,
        };
        let view = device
            .create_view(HandleType::RenderTargetView, view_desc)
            .unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        dc.command(soft::SoftCommand::ClearView { view, value: 9 })
            .unwrap();
        let list = dc.finish().unwrap();
        ic.bind(rt0, Some(x.any())).unwrap();
        ic.rotate_resource_identities(&[x, y]).unwrap();
        let mark = plan.calls();
        let before = world.trace().len();
        let executed = ic.execute_command_list(&list);
        let heard: Vec<Hook> = world.trace()[before..].iter().map(|e| e.hook).collect();
        let bound = ic.binding(rt0);
        drop((list, dc));
        ic.clear_state().unwrap();
        ic.destroy_device().unwrap();
        (mark, executed, heard, bound == Some(x.any()), world)
    };
    let counting = Arc::new(FaultPlan::counting().with_log());
    let (mark, executed, ..) = scenario(&counting);
    assert_eq!(executed, Ok(()));
    let at = counting.log()[mark as usize..]
        .iter()
        .position(|h| *h == "refresh_view")
        .expect("the execute refreshes the view") as u64;
    let plan = Arc::new(FaultPlan::at(mark + at, Fault::Error(Error::InvalidArg)));
    let (_, executed, heard, still_bound, world) = scenario(&plan);
    assert_eq!(executed, Err(Error::InvalidArg));
    assert!(!heard.contains(&Hook::ExecuteCommandList), "{heard:?}");
    assert!(!heard.contains(&Hook::Execute), "no clear-state: {heard:?}");
    assert!(still_bound, "the bindings stay");
    world.assert_clean();
}

/// Where the engine replays lists, a Map's bytes are allocated in the recording's arena
/// before the driver hears the Map: an allocation that fails refuses a call the driver never
/// heard (R-E3), as the budget and every other check do.
#[test]
fn r_e3_a_map_whose_bytes_cannot_be_allocated_is_never_heard() {
    let config = SoftConfig {
        command_lists: true,
        driver_built: false,
        resources_without_memory: true,
        ..SoftConfig::from_env().unwrap()
    };
    let unlimited = DeviceConfig::default().with_deferred_budget(usize::MAX);
    let (device, mut ic, world) = soft::device(config, unlimited).unwrap();
    // Two tebibytes: within the budget, past what the arena can allocate.
    let huge = ResourceDesc {
        byte_size: 1 << 41,
        usage: Usage::Dynamic,
        ..Default::default()
    };
    let r = device.create_resource(huge).unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    let from = world.trace().len();
    assert_eq!(dc.map_discard(r).err(), Some(Error::OutOfMemory));
    let heard = hooks_since(&world, from);
    assert!(!heard.contains(&Hook::RecordDeferred), "{heard:?}");
    assert_eq!(dc.finish().err(), Some(Error::OutOfMemory));
    drop(dc);
    ic.destroy_device().unwrap();
    world.assert_clean();
}
