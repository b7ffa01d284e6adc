//! Panic and error safety, with `soft::inject`: a scenario that reaches every driver and
//! kernel hook runs once per hook call with a panic (or an error) injected at that call.
//! Every engine call is made under `catch_unwind`, the scenario carries on where that still
//! makes sense and always tears down (contexts, lists, `destroy_device`, the immediate
//! context); then the soft world must show that nothing was destroyed or freed twice and
//! nothing reused before its clock (R-D1, R-D4, R-R4..R-R6), that what the application
//! released was really destroyed at the next ClearState and flushes (holds released, R-H2,
//! R-D4), that device destruction completed (R-D3) and left nothing: allocations, driver
//! objects, deferred-context states, list memory, the device itself.
//!
//! Each test collects every failing call as (call number, hook, the engine call it hit in,
//! what broke) and asserts the list empty at the end, so one run shows every failing point.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};
use std::thread;

use cmdlist::handle::{Resource, View};

use crate::common::buffer;
use cmdlist::soft::inject::{
    self, Fault, FaultPlan, FaultSoftCommandList, FaultSoftDeferredContext, FaultSoftDevice,
    FaultSoftImmediate, InjectedPanic,
};
use cmdlist::soft::{Gpu, SoftCommand, SoftConfig, SoftWorld};
use cmdlist::{
    BindClass, BindPoint, Clock, Device, DeviceConfig, Error, Handle, HandleType, QueryKind,
    ResourceDesc, Result, Stage, Usage, ViewDesc,
};

const SRV0: BindPoint = BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 0);
const VB0: BindPoint = BindPoint::new(BindClass::VertexBuffer, 0);

/// Every hook of `Driver` and `Kernel` but the two device-creation queries.
const HOOKS: [&str; 30] = [
    "calc_private_size",
    "calc_deferred_context_handle_size",
    "calc_private_command_list_size",
    "create_object",
    "destroy_object",
    "create_immediate",
    "execute",
    "flush",
    "execute_command_list",
    "execute_command_list_deferred",
    "create_deferred_context",
    "destroy_deferred_context",
    "abandon_unbind",
    "open_local",
    "use_local",
    "close_local",
    "create_command_list",
    "destroy_command_list",
    "abandon_command_list",
    "recycle_command_list",
    "recycle_create_command_list",
    "recycle_destroy_command_list",
    "recycle_create_deferred_context",
    "allocate",
    "deallocate",
    "submit",
    "completed_fence",
    "wait_for_fence",
    "set_error",
    "perform_amortized_processing",
];

/// The hooks of a driver that records command lists itself: an engine that emulates them
/// calls none ([`SoftConfig::command_lists`]).
const LIST_HOOKS: [&str; 17] = [
    "calc_deferred_context_handle_size",
    "calc_private_command_list_size",
    "execute_command_list",
    "execute_command_list_deferred",
    "create_deferred_context",
    "destroy_deferred_context",
    "abandon_unbind",
    "open_local",
    "use_local",
    "close_local",
    "create_command_list",
    "destroy_command_list",
    "abandon_command_list",
    "recycle_command_list",
    "recycle_create_command_list",
    "recycle_destroy_command_list",
    "recycle_create_deferred_context",
];

/// The hooks that return a `Result` (where an error can be injected, R-E1).
const FALLIBLE: [&str; 13] = [
    "create_object",
    "create_immediate",
    "execute",
    "execute_command_list",
    "execute_command_list_deferred",
    "create_deferred_context",
    "open_local",
    "create_command_list",
    "recycle_create_command_list",
    "recycle_create_deferred_context",
    "allocate",
    "submit",
    "wait_for_fence",
];

/// What broke in one run.
#[derive(Clone, Debug)]
struct Problem {
    kind: Kind,
    detail: String,
}

/// Kinds of failure, in report order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// A rule the soft world saw broken while the scenario ran (double destroy or free,
    /// early deallocation, list memory reused early...).
    Violation,
    /// Something still held after device destruction.
    Leak,
    /// Released by the application, but really destroyed only at device destruction.
    HeldAfterRelease,
    /// The engine panicked by itself after the injected fault.
    EnginePanic,
    /// `destroy_device` failed although the fault was not inside it.
    DestroyDeviceFailed,
    /// The device is not marked removed after its immediate context is gone.
    NotRemoved,
    /// The device's memory was never freed (something still references it).
    DeviceNotFreed,
    /// The injected run did not reach the target call (the scenario is not deterministic).
    NotReached,
}

impl Kind {
    /// What R-D3 asks of the teardown itself: it completes, and the device goes.
    fn is_teardown(self) -> bool {
        matches!(
            self,
            Kind::DestroyDeviceFailed | Kind::NotRemoved | Kind::DeviceNotFreed
        )
    }
}

/// A failing call: the call number the fault was injected at, its hook, the engine call it
/// hit in, and what broke.
#[derive(Clone, Debug)]
struct Failure {
    fault: Fault,
    call: u64,
    hook: &'static str,
    during: &'static str,
    problem: Problem,
}

/// One run of the scenario.
struct Run<'p> {
    plan: &'p FaultPlan,
    problems: Vec<Problem>,
    /// The engine call during which the target call was reached.
    during: Option<&'static str>,
}

fn message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string payload".to_owned()
    }
}

impl Run<'_> {
    fn problem(&mut self, kind: Kind, detail: String) {
        self.problems.push(Problem { kind, detail });
    }

    /// One engine call under `catch_unwind`: its value, or `None` if it failed or panicked.
    /// A panic that was not injected is the engine's own, and a problem.
    fn step<T>(&mut self, what: &'static str, call: impl FnOnce() -> Result<T>) -> Option<T> {
        let result = catch_unwind(AssertUnwindSafe(call));
        if self.during.is_none() && self.plan.hit().is_some() {
            self.during = Some(what);
        }
        match result {
            Ok(Ok(value)) => Some(value),
            Ok(Err(_)) => None,
            Err(payload) => {
                if InjectedPanic::of(&*payload).is_none() {
                    let detail = format!("in {what}: {}", message(&*payload));
                    self.problem(Kind::EnginePanic, detail);
                }
                None
            }
        }
    }

    /// Whether the fault was reached at or after call `from`.
    fn hit_since(&self, from: u64) -> bool {
        self.plan.hit().is_some_and(|h| h.call >= from)
    }
}

fn soft_config() -> SoftConfig {
    SoftConfig {
        gpu: Gpu::Manual,
        strict_gpu: true,
        trace: true,
        // Lists may be recycled as soon as the buffer that executed them is submitted (the
        // device's list clock): the soft driver flags any reuse before that submit.
        list_clock: Clock::Submitted,
        ..SoftConfig::from_env().unwrap()
    }
}

fn device_config() -> DeviceConfig {
    DeviceConfig::default()
        .with_retire_clock(Clock::Completed)
        .with_list_clock(Clock::Submitted)
        .with_recycle(true)
        // Small, so that one large update runs the context out of memory (R-E3, R-A2).
        .with_deferred_budget(4096)
}

/// Drops `value` as an engine call (a list's or a context's destroy).
fn dropping<T>(value: T) -> impl FnOnce() -> Result<()> {
    move || {
        drop(value);
        Ok(())
    }
}

/// What one run of the scenario found.
struct Outcome {
    problems: Vec<Problem>,
    /// The engine call during which the target call was reached.
    during: Option<&'static str>,
}

/// The scenario, with `plan` counting (and maybe injecting) on a fresh soft world.
fn scenario(plan: &Arc<FaultPlan>) -> Outcome {
    let mut run = Run {
        plan,
        problems: Vec::new(),
        during: None,
    };
    let (driver, kernel, world) = inject::new(plan, soft_config());
    let created = run.step("Device::new", || {
        Device::new(driver, kernel, device_config())
    });
    let Some((device, ic)) = created else {
        check_world(&mut run, &world, None);
        return finish(run);
    };
    let (device, ic, kept) = body(&mut run, &world, device, ic);
    teardown(&mut run, &world, device, ic, kept);
    finish(run)
}

fn finish(mut run: Run<'_>) -> Outcome {
    if let (Some(target), None) = (run.plan.target(), run.plan.hit()) {
        run.problem(
            Kind::NotReached,
            format!("call {target} never made ({} calls)", run.plan.calls()),
        );
    }
    Outcome {
        problems: run.problems,
        during: run.during,
    }
}

/// What the application keeps until device destruction, for the drain to destroy (R-D3).
struct Kept {
    resource: Option<Handle<Resource>>,
    view: Option<Handle<View>>,
}

/// Everything before device destruction: returns the device, the immediate context and
/// what the application keeps, with every other object, context and list of the scenario
/// released (as far as the injected fault allowed).
fn body(
    run: &mut Run<'_>,
    world: &SoftWorld,
    device: FaultSoftDevice,
    mut ic: FaultSoftImmediate,
) -> (FaultSoftDevice, FaultSoftImmediate, Kept) {
    // Free-threaded creates (R-F1), one of them on another thread.
    let a = run.step("create a", || device.create_resource(buffer(64)));
    let b = run.step("create b", || device.create_resource(buffer(64)));
    let d = run.step("create d", || {
        device.create_resource(ResourceDesc {
            byte_size: 64,
            usage: Usage::Dynamic,
            ..Default::default()
        })
    });
    let v = a.and_then(|resource| {
        run.step("create a view", || {
            device.create_view(
                HandleType::ShaderResourceView,
                ViewDesc {
                    resource,
                    first_byte: 0,
                    byte_len: 32,
                },
            )
        })
    });
    let q = run.step("create q", || device.create_query(QueryKind::Event));
    let e = run.step("create e (kept)", || device.create_resource(buffer(128)));
    let ve = e.and_then(|resource| {
        run.step("create a view of e (kept)", || {
            device.create_view(
                HandleType::RenderTargetView,
                ViewDesc {
                    resource,
                    first_byte: 64,
                    byte_len: 64,
                },
            )
        })
    });
    let c = thread::scope(|s| {
        s.spawn(|| {
            run.step("create c on another thread", || {
                device.create_resource(buffer(64))
            })
        })
        .join()
        .expect("the step catches panics")
    });

    // A primary: created, used, destroyed synchronously (R-P1: the destroy flushes the
    // buffer that uses it and waits for the GPU under the completed clock).
    let p = run.step("create_primary", || ic.create_primary(buffer(256)));
    let mut primary_destroyed = p.is_none();
    if let Some(p) = p {
        run.step("ic.update p", || ic.update(p, 0, &[1; 16]));
        primary_destroyed = run
            .step("destroy_primary", || ic.destroy_primary(p))
            .is_some();
    }
    run.step("end_frame", || ic.end_frame());

    // Two deferred contexts recording updates, binds, copies, Map(DISCARD), queries.
    let mut dc1 = run.step("create dc1", || device.create_deferred_context());
    let mut dc2 = run.step("create dc2", || device.create_deferred_context());
    let mut l1 = None;
    if let Some(dc) = dc1.as_mut() {
        if let (Some(a), Some(b)) = (a, b) {
            run.step("dc1.update a", || dc.update(a, 0, &[2; 16]));
            run.step("dc1.copy a to b", || {
                dc.command(SoftCommand::Copy { dst: b, src: a })
            });
        }
        if let Some(v) = v {
            run.step("dc1.bind v", || dc.bind(SRV0, Some(v.any())));
        }
        if let Some(d) = d {
            run.step("dc1.map_discard d", || {
                dc.map_discard(d).map(|bytes| bytes.fill(3))
            });
            run.step("dc1.unmap d", || dc.unmap(d));
        }
        if let Some(q) = q {
            run.step("dc1.begin_query", || dc.begin_query(q));
            run.step("dc1.end_query", || dc.end_query(q));
        }
        l1 = run.step("dc1.finish (fresh list)", || dc.finish());
    }
    let mut l2 = None;
    if let Some(dc) = dc2.as_mut() {
        if let (Some(b), Some(c)) = (b, c) {
            run.step("dc2.fill c", || {
                dc.command(SoftCommand::Fill { dst: c, value: 5 })
            });
            run.step("dc2.bind b", || dc.bind(VB0, Some(b.any())));
            run.step("dc2.abandon", || dc.abandon());
            run.step("dc2.copy b to c", || {
                dc.command(SoftCommand::Copy { dst: c, src: b })
            });
        }
        l2 = run.step("dc2.finish (fresh list)", || dc.finish());
    }
    // Each list alone in its buffer, so that a replay the fault stops early may leave the
    // buffer with nothing to submit.
    for list in [&l1, &l2].into_iter().flatten() {
        run.step("execute_command_list", || ic.execute_command_list(list));
        run.step("flush", || ic.flush());
        run.step("end_frame", || ic.end_frame());
    }
    world.complete_all();

    // Lists dropped (one on another thread: R-R4's light destroy), then recycled at the
    // next Finish of their context (R-R5, R-R6).
    if let Some(list) = l1.take() {
        thread::scope(|s| {
            s.spawn(|| run.step("drop l1 on another thread", dropping(list)))
                .join()
                .expect("the step catches panics")
        });
    }
    if let Some(list) = l2.take() {
        run.step("drop l2", dropping(list));
    }
    run.step("flush", || ic.flush());
    run.step("end_frame", || ic.end_frame());
    let mut l3 = None;
    if let Some(dc) = dc1.as_mut() {
        if let (Some(a), Some(b)) = (a, b) {
            run.step("dc1.copy b to a", || {
                dc.command(SoftCommand::Copy { dst: a, src: b })
            });
        }
        l3 = run.step("dc1.finish (recycled list)", || dc.finish());
    }
    if let Some(list) = &l3 {
        run.step("execute_command_list", || ic.execute_command_list(list));
        run.step("flush", || ic.flush());
        run.step("end_frame", || ic.end_frame());
    }
    // l4 executes l3 (nested, R-C3), and l3 is dropped at once: l4 keeps it alive and
    // executable, and its memory waits for l4 and the buffers that executed either.
    let mut l4: Option<FaultSoftCommandList> = None;
    if let Some(dc) = dc2.as_mut() {
        if let Some(b) = b {
            run.step("dc2.fill b", || {
                dc.command(SoftCommand::Fill { dst: b, value: 6 })
            });
        }
        if let Some(list) = &l3 {
            run.step("dc2.execute l3", || dc.execute_command_list(list));
        }
        l4 = run.step("dc2.finish (recycled list)", || dc.finish());
    }
    if let Some(list) = l3.take() {
        run.step("drop l3 (executed by l4)", dropping(list));
    }
    world.complete_all();

    // A context out of memory (R-E3): removed locally, amortised processing pumped (R-A2),
    // Finish fails once, then it records again.
    let mut l5 = None;
    if let (Some(dc), Some(b)) = (dc1.as_mut(), b) {
        run.step("dc1.update past the budget", || dc.update(b, 0, &[0; 8192]));
        // Fails, unless the fault kept the context from its removal.
        l5 = run.step("dc1.finish after removal", || dc.finish());
    }

    // The immediate context's own work: a query waited on, bindings, a map, a command.
    if let Some(q) = q {
        run.step("ic.end_query", || ic.end_query(q));
        run.step("query_signaled", || ic.query_signaled(q));
        run.step("end_frame", || ic.end_frame());
    }
    if let Some(v) = v {
        run.step("ic.bind v", || ic.bind(SRV0, Some(v.any())));
    }
    if let Some(d) = d {
        run.step("ic.map_discard d", || ic.map_discard(d).map(|b| b.fill(4)));
        run.step("ic.unmap d", || ic.unmap(d));
    }
    if let (Some(a), Some(c)) = (a, c) {
        run.step("ic.copy a to c", || {
            ic.command(&SoftCommand::Copy { dst: c, src: a })
        });
    }
    // Free-threaded destroys while lists still hold their objects, and an application
    // error (a double destroy) reported through set-error (R-E2).
    for (name, handle) in [
        ("destroy v", v.map(|v| v.any())),
        ("destroy a", a.map(|a| a.any())),
    ] {
        if let Some(handle) = handle {
            run.step(name, || device.destroy(handle));
        }
    }
    if let Some(v) = v {
        run.step("destroy v again (application error)", || device.destroy(v));
    }
    run.step("flush", || ic.flush());
    run.step("end_frame", || ic.end_frame());

    // Contexts dropped before their last lists: a list dropped after its context ends with
    // DestroyCommandList. l4 goes while the buffer that executed it is still open, so its
    // memory waits in the device's retired lists for the flush that submits that buffer.
    if let Some(list) = &l4 {
        run.step("execute_command_list", || ic.execute_command_list(list));
    }
    if let Some(dc) = dc2.take() {
        run.step("drop dc2", dropping(dc));
    }
    if let Some(list) = l4.take() {
        run.step("drop l4 after dc2", dropping(list));
    }
    run.step("flush", || ic.flush());
    world.complete_all();
    run.step("end_frame", || ic.end_frame());
    // dc1 goes with a recording open: its drop closes the handle (R-H2).
    if let (Some(dc), Some(c)) = (dc1.as_mut(), c) {
        run.step("dc1.update c (left open)", || dc.update(c, 0, &[9; 8]));
    }
    if let Some(dc) = dc1.take() {
        run.step("drop dc1", dropping::<FaultSoftDeferredContext>(dc));
    }
    for list in [l3.take(), l5.take()].into_iter().flatten() {
        run.step("drop the lists of dc1 after it", dropping(list));
    }

    // Everything released: ClearState, the rest destroyed, flush, GPU done, flush (R-D4's
    // heavy pattern) must leave every object really destroyed and every allocation freed;
    // what is not was kept by a hold or a queue the fault left behind. A release the fault
    // hit is tried once more, as an application would.
    let from = run.plan.calls();
    for round in 0..2 {
        if round == 1 && !run.hit_since(from) {
            break;
        }
        run.step("clear_state", || ic.clear_state());
        for handle in [b, c, d].into_iter().flatten() {
            run.step("destroy the rest", || device.destroy(handle));
        }
        if let Some(q) = q {
            run.step("destroy q", || device.destroy(q));
        }
        if let (Some(p), false) = (p, primary_destroyed) {
            primary_destroyed = run
                .step("destroy_primary again", || ic.destroy_primary(p))
                .is_some();
        }
        run.step("flush", || ic.flush());
        world.complete_all();
        run.step("flush", || ic.flush());
        run.step("end_frame", || ic.end_frame());
    }
    let kept = Kept {
        resource: e,
        view: ve,
    };
    (device, ic, kept)
}

/// Device destruction (R-D3), then every check.
fn teardown(
    run: &mut Run<'_>,
    world: &Arc<SoftWorld>,
    device: FaultSoftDevice,
    mut ic: FaultSoftImmediate,
    kept: Kept,
) {
    // Everything but what the application keeps was released: what else is still there is
    // kept by a hold or a queue.
    let mut kept_objects = BTreeSet::new();
    let mut kept_allocations = BTreeSet::new();
    let handles = [kept.resource.map(|r| r.any()), kept.view.map(|v| v.any())];
    for handle in handles.into_iter().flatten() {
        if let Ok(object) = device.object(handle) {
            kept_objects.insert(object.id);
            kept_allocations.extend(object.allocation().map(|a| a.0.get()));
        }
    }
    let mut held_objects = world.live_objects();
    held_objects.retain(|id| !kept_objects.contains(id));
    // The immediate context's rename pool keeps what its Map(DISCARD)s renamed away (R-M5)
    // until it is trimmed: an explicit trim gives back all the GPU is done with.
    run.step("trim", || {
        ic.trim();
        Ok(())
    });
    let mut held_allocations = world.live_allocation_ids();
    held_allocations.retain(|id| !kept_allocations.contains(id));

    // Work for the drain: the kept view used in a buffer the GPU has not finished, then
    // destroyed (its memory waits for that buffer under the completed clock); the kept
    // resource still live.
    if let Some(view) = kept.view {
        run.step("ic.clear the kept view", || {
            ic.command(&SoftCommand::ClearView { view, value: 7 })
        });
        run.step("flush", || ic.flush());
        run.step("destroy the kept view", || device.destroy(view));
        run.step("flush", || ic.flush());
        run.step("end_frame", || ic.end_frame());
    }
    let from = run.plan.calls();
    let destroyed = catch_unwind(AssertUnwindSafe(|| ic.destroy_device()));
    let hit_inside = run.hit_since(from);
    if run.during.is_none() && hit_inside {
        run.during = Some("destroy_device");
    }
    match destroyed {
        Ok(Ok(())) => {}
        Ok(Err(error)) if !hit_inside => {
            run.problem(Kind::DestroyDeviceFailed, format!("returned {error:?}"));
        }
        Err(payload) if InjectedPanic::of(&*payload).is_none() => {
            let detail = format!("in destroy_device: {}", message(&*payload));
            run.problem(Kind::EnginePanic, detail);
        }
        _ => {}
    }
    run.step("drop the immediate context", dropping(ic));
    if !device.is_removed() {
        run.problem(
            Kind::NotRemoved,
            "after its immediate context was dropped".into(),
        );
    }
    run.step("drop the device", dropping(device));
    check_world(run, world, Some((held_objects, held_allocations)));
}

/// The soft world's verdict after the device is gone: violations, leaks, what was held
/// after the application released it (`held`: the objects and allocations still there
/// before device destruction), and whether the device itself was freed.
fn check_world(run: &mut Run<'_>, world: &Arc<SoftWorld>, held: Option<(Vec<u64>, Vec<u64>)>) {
    let seen = world.violations().len();
    for (i, v) in world.check_after_device_destroyed().into_iter().enumerate() {
        let kind = if i < seen {
            Kind::Violation
        } else {
            Kind::Leak
        };
        run.problem(kind, format!("{}: {}", v.rule, v.what));
    }
    if let Some((objects, allocations)) = held {
        let leaked: BTreeSet<u64> = world.live_objects().into_iter().collect();
        for id in objects.into_iter().filter(|id| !leaked.contains(id)) {
            let detail = format!("object {id} destroyed only at device destruction");
            run.problem(Kind::HeldAfterRelease, detail);
        }
        let leaked: BTreeSet<u64> = world.live_allocation_ids().into_iter().collect();
        for id in allocations.into_iter().filter(|id| !leaked.contains(id)) {
            let detail = format!("allocation {id} deallocated only at device destruction");
            run.problem(Kind::HeldAfterRelease, detail);
        }
    }
    // The soft driver and kernel keep the world while the device lives.
    let references = Arc::strong_count(world) - 1;
    if references != 0 {
        let detail = format!("{references} references to the soft world remain");
        run.problem(Kind::DeviceNotFreed, detail);
    }
}

/// The scenario without injection: the number of hook calls and their hooks, with the
/// scenario checked clean.
fn reference() -> &'static (Vec<&'static str>, Vec<Problem>) {
    static REFERENCE: OnceLock<(Vec<&'static str>, Vec<Problem>)> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        let plan = Arc::new(FaultPlan::counting().with_log());
        let outcome = scenario(&plan);
        (plan.log(), outcome.problems)
    })
}

/// Runs the scenario with `fault` at every call whose hook `at` accepts; every failure.
fn sweep(fault: Fault, at: impl Fn(&str) -> bool) -> Vec<Failure> {
    inject::silence_injected_panics();
    let (log, _) = reference();
    let mut failures = Vec::new();
    for (call, hook) in log.iter().enumerate() {
        if !at(hook) {
            continue;
        }
        let plan = Arc::new(FaultPlan::at(call as u64, fault));
        let outcome = scenario(&plan);
        let during = outcome.during.unwrap_or("?");
        for problem in outcome.problems {
            failures.push(Failure {
                fault,
                call: call as u64,
                hook,
                during,
                problem,
            });
        }
    }
    failures
}

/// Every failure of the panic sweep, computed once for the tests that read it.
fn panic_sweep() -> &'static [Failure] {
    static SWEEP: OnceLock<Vec<Failure>> = OnceLock::new();
    SWEEP.get_or_init(|| sweep(Fault::Panic, |_| true))
}

/// The failures as a report grouped by kind: a summary line per kind, then each failure.
fn report(failures: &[&Failure]) -> String {
    let mut by_kind: BTreeMap<Kind, Vec<&Failure>> = BTreeMap::new();
    for f in failures {
        by_kind.entry(f.problem.kind).or_default().push(f);
    }
    let mut out = format!(
        "{} failures over {} hook calls\n",
        failures.len(),
        reference().0.len()
    );
    for (kind, list) in &by_kind {
        let calls: BTreeSet<u64> = list.iter().map(|f| f.call).collect();
        out += &format!("{kind:?}: {} at {} calls\n", list.len(), calls.len());
    }
    for (kind, list) in &by_kind {
        out += &format!("\n== {kind:?}\n");
        for f in list {
            let fault = match f.fault {
                Fault::Panic => String::new(),
                Fault::Error(error) => format!("{error:?} "),
                Fault::WrongLength => "wrong length ".to_string(),
                Fault::Pause => "pause ".to_string(),
            };
            out += &format!(
                "{fault}call {:>3} {:<32} in {:<32} {}\n",
                f.call, f.hook, f.during, f.problem.detail
            );
        }
    }
    out
}

#[test]
fn panic_safety_scenario_reaches_every_hook_and_is_clean_without_injection() {
    let (log, problems) = reference();
    assert!(problems.is_empty(), "{problems:#?}");
    let reached: BTreeSet<&str> = log.iter().copied().collect();
    let emulated = !soft_config().command_lists;
    let missing: Vec<&str> = HOOKS
        .iter()
        .copied()
        .filter(|h| !(reached.contains(h) || emulated && LIST_HOOKS.contains(h)))
        .collect();
    assert!(missing.is_empty(), "hooks never called: {missing:?}");
    if emulated {
        let called: Vec<&str> = LIST_HOOKS
            .iter()
            .copied()
            .filter(|h| reached.contains(h))
            .collect();
        assert!(called.is_empty(), "emulated, yet called: {called:?}");
    }
    assert!(
        (100..400).contains(&log.len()),
        "{} hook calls: keep the scenario compact",
        log.len()
    );
}

#[test]
fn r_d3_device_destruction_completes_after_any_hook_panic() {
    let failures: Vec<&Failure> = panic_sweep()
        .iter()
        .filter(|f| f.problem.kind.is_teardown())
        .collect();
    assert!(failures.is_empty(), "{}", report(&failures));
}

#[test]
fn panic_at_every_hook_call_leaves_nothing_destroyed_twice_or_leaked() {
    let failures: Vec<&Failure> = panic_sweep()
        .iter()
        .filter(|f| !f.problem.kind.is_teardown())
        .collect();
    assert!(failures.is_empty(), "{}", report(&failures));
}

#[test]
fn r_e1_error_at_every_fallible_hook_is_clean() {
    // Out of memory takes the context-local removal paths (R-E3), other errors the abandon
    // after an error (R-C2).
    let mut failures = Vec::new();
    for error in [Error::OutOfMemory, Error::InvalidArg] {
        failures.extend(sweep(Fault::Error(error), |hook| FALLIBLE.contains(&hook)));
    }
    // A kernel that cannot wait for its last fence during DestroyDevice has lost its device:
    // R-D3 still has everything destroyed and deallocated before DestroyDevice returns (the
    // `Kernel::wait_for_fence` contract). The soft GPU, whose wait the fault wrapper refused
    // without telling it, still counts that buffer as running: its R-D4 complaint is that
    // contract, not a bug. Everything else must be clean.
    let (expected, failures): (Vec<&Failure>, Vec<&Failure>) = failures.iter().partition(|f| {
        f.hook == "wait_for_fence"
            && f.during == "destroy_device"
            && f.problem.kind == Kind::Violation
            && f.problem.detail.starts_with("R-D4:")
    });
    assert!(
        expected.len() <= 4,
        "only the final wait's allocations: {}",
        report(&expected)
    );
    assert!(failures.is_empty(), "{}", report(&failures));
}

/// R-R5 under a panicking RecycleCommandList: three lists dropped since the context's last
/// Finish wait in its inbox, and the hook panics at the first. The Finish unwinds; the
/// inbox's other lists wait for a later Finish, which recycles them. Nothing is leaked or
/// ended twice: every list's memory ends exactly once by the device's destruction.
#[test]
fn r_r5_a_panicking_recycle_leaves_the_inboxs_other_lists_to_a_later_finish() {
    inject::silence_injected_panics();
    let config = SoftConfig {
        gpu: Gpu::Immediate,
        trace: true,
        ..crate::common::native()
    };
    // Three lists executed, flushed and dropped; then a Finish that recycles them. Answers
    // the hook calls made before that Finish, and its result.
    let run = |plan: &Arc<FaultPlan>| {
        let (driver, kernel, world) = inject::new(plan, config.clone());
        let (device, mut ic) = Device::new(driver, kernel, DeviceConfig::default()).unwrap();
        let (a, b) = (
            device.create_resource(buffer(64)).unwrap(),
            device.create_resource(buffer(64)).unwrap(),
        );
        let mut dc = device.create_deferred_context().unwrap();
        let copy = |dc: &mut FaultSoftDeferredContext| {
            dc.command(SoftCommand::Copy { dst: b, src: a }).unwrap();
        };
        let lists: Vec<_> = (0..3)
            .map(|_| {
                copy(&mut dc);
                dc.finish().unwrap()
            })
            .collect();
        for list in &lists {
            ic.execute_command_list(list).unwrap();
        }
        ic.flush().unwrap();
        drop(lists);
        copy(&mut dc);
        let before = plan.calls();
        let finished = catch_unwind(AssertUnwindSafe(|| dc.finish()));
        (device, ic, world, dc, before, finished)
    };
    let counting = Arc::new(FaultPlan::counting().with_log());
    let (_device, mut ic, _world, dc, before, finished) = run(&counting);
    assert!(matches!(finished, Ok(Ok(_))));
    let log = counting.log();
    let recycles: Vec<usize> = (before as usize..log.len())
        .filter(|&i| log[i] == "recycle_command_list")
        .collect();
    assert_eq!(recycles.len(), 3, "the Finish recycles the three lists");
    drop((dc, finished));
    ic.destroy_device().unwrap();

    let plan = Arc::new(FaultPlan::at(recycles[0] as u64, Fault::Panic));
    let (device, mut ic, world, mut dc, _, finished) = run(&plan);
    assert!(finished.is_err(), "the Finish unwound");
    assert!(plan.injected());
    let recycled_before = dc.stats().recycled;
    for _ in 0..2 {
        dc.command(SoftCommand::Copy {
            dst: device.create_resource(buffer(64)).unwrap(),
            src: device.create_resource(buffer(64)).unwrap(),
        })
        .unwrap();
        drop(dc.finish().unwrap());
    }
    assert!(
        dc.stats().recycled > recycled_before,
        "the lists left in the inbox are recycled later: {:?}",
        dc.stats()
    );
    drop(dc);
    ic.destroy_device().unwrap();
    world.assert_clean();
}
