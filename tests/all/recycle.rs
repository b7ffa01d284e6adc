//! Small-command-list recycling against the protocol (docs/PROTOCOL.md): the Finish call flow
//! and its threads (R-R7), light destroys and full destroys once the context is gone (R-R4),
//! out of memory from the recycle hooks as a return value (R-R3), handle memory kept across
//! recycling (R-R2), each context recycling only its own lists (R-R5), lists of another
//! device (R-R8), list memory under the submission clock (the list clock; R-D1, R-D4),
//! amortised processing (R-A1, R-A2) and a runtime without the recycle hooks (R-R1).

use std::collections::HashSet;
use std::sync::Arc;
use std::thread::{self, ThreadId};
use std::time::Duration;

use cmdlist::handle::Resource;
use cmdlist::soft::{
    self, Gpu, Hook, SoftCommand, SoftCommandList, SoftConfig, SoftDriver, SoftKernel, SoftWorld,
    TraceEvent,
};
use cmdlist::{
    AppError, Clock, ContextId, DeferredContext, Device, DeviceConfig, Error, Handle, HandleType,
    ImmediateContext, ResourceDesc,
};

use crate::common::{count, hooks, native};

type Dev = Device<SoftDriver, SoftKernel>;
type Ic = ImmediateContext<SoftDriver, SoftKernel>;
type Dc = DeferredContext<SoftDriver, SoftKernel>;

/// A device with two 64-byte resources to copy between.
fn setup(
    soft: SoftConfig,
    config: DeviceConfig,
) -> (Dev, Ic, Arc<SoftWorld>, Handle<Resource>, Handle<Resource>) {
    let (device, ic, world) = soft::device(soft, config).unwrap();
    let desc = ResourceDesc {
        byte_size: 64,
        ..Default::default()
    };
    let src = device.create_resource(desc).unwrap();
    let dst = device.create_resource(desc).unwrap();
    (device, ic, world, src, dst)
}

/// A device config whose lists recycle once the buffer that executed them was submitted:
/// the soft GPU of these tests completes nothing unless told, so a flush alone lets an
/// executed list recycle (R-D1), as the tests of the hooks' order want.
fn submitted() -> DeviceConfig {
    DeviceConfig::default().with_list_clock(Clock::Submitted)
}

/// Records one copy (two context-local handles opened) and finishes the list.
fn copy_list(dc: &mut Dc, src: Handle<Resource>, dst: Handle<Resource>) -> SoftCommandList {
    dc.command(SoftCommand::Copy { dst, src }).unwrap();
    dc.finish().unwrap()
}

/// The trace so far, forgotten by the world (call when no other thread runs hooks).
fn drain(world: &SoftWorld) -> Vec<TraceEvent> {
    let trace = world.trace();
    world.clear_trace();
    trace
}

fn objects(events: &[TraceEvent], hook: Hook) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e.hook == hook)
        .map(|e| e.object)
        .collect()
}

/// The soft id of the list the last Finish made (fresh or recycled), from the trace.
fn made(events: &[TraceEvent]) -> u64 {
    events
        .iter()
        .rev()
        .find(|e| {
            matches!(
                e.hook,
                Hook::CreateCommandList | Hook::RecycleCreateCommandList
            )
        })
        .expect("a Finish makes a list")
        .object
}

fn all_on(events: &[TraceEvent], thread: ThreadId) -> bool {
    events.iter().all(|e| e.thread == thread)
}

/// Every list CreateCommandList made ended exactly once (call after its context is gone).
fn assert_each_list_destroyed_once(events: &[TraceEvent]) {
    // Per list: CreateCommandList, then any number of (light destroy, into the cache,
    // recycle-create) rounds, ending either with DestroyCommandList (once, last, never
    // while the list is in its context's cache) or in its context's cache (released by
    // DestroyDeferredContext). A list left light-destroyed and never recycled nor destroyed
    // has leaked its driver memory (R-R4, R-R5, R-R7).
    for id in objects(events, Hook::CreateCommandList) {
        let life: Vec<Hook> = events
            .iter()
            .filter(|e| e.object == id)
            .map(|e| e.hook)
            .filter(|h| {
                matches!(
                    h,
                    Hook::CreateCommandList
                        | Hook::RecycleDestroyCommandList
                        | Hook::RecycleCommandList
                        | Hook::RecycleCreateCommandList
                        | Hook::DestroyCommandList
                )
            })
            .collect();
        assert_eq!(life[0], Hook::CreateCommandList, "list {id}: {life:?}");
        let destroys = life
            .iter()
            .filter(|h| **h == Hook::DestroyCommandList)
            .count();
        assert!(destroys <= 1, "list {id} destroyed twice: {life:?}");
        let last = *life.last().expect("created");
        assert_ne!(
            last,
            Hook::RecycleDestroyCommandList,
            "list {id}: light-destroyed and never ended: {life:?}"
        );
        if destroys == 1 {
            assert_eq!(last, Hook::DestroyCommandList, "list {id}: {life:?}");
            assert_ne!(
                life[life.len() - 2],
                Hook::RecycleCommandList,
                "list {id}: destroyed while in its context's cache: {life:?}"
            );
        }
    }
}

fn finish_and_clean(world: &SoftWorld, mut ic: Ic) {
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_r7_finish_flow_order_on_the_dc_thread() {
    let (device, ic, world, src, dst) = setup(native(), DeviceConfig::default());
    let ic_thread = thread::current().id();
    let mut dc = device.create_deferred_context().unwrap();
    let c = dc.id();
    let (sid, did) = (
        device.object(src).unwrap().id,
        device.object(dst).unwrap().id,
    );

    // The context lives on its own thread; its lists are dropped on a third one.
    let (t1, fresh, mut ids, lists) = thread::scope(|s| {
        s.spawn(|| {
            dc.command(SoftCommand::Copy { dst, src }).unwrap();
            drain(&world);
            let first = dc.finish().unwrap();
            let fresh = drain(&world);
            let second = copy_list(&mut dc, src, dst);
            let ids = vec![made(&fresh), made(&drain(&world))];
            (thread::current().id(), fresh, ids, vec![first, second])
        })
        .join()
        .unwrap()
    });
    assert_ne!(t1, ic_thread);
    // Nothing cached: CalcPrivateCommandListSize, CreateCommandList and the size of the
    // context-local CL handle, then the closes, then RecycleCreateDeferredContext.
    assert!(
        all_on(&fresh, t1),
        "Finish runs on the DC's thread: {fresh:#?}"
    );
    assert_eq!(
        hooks(&fresh),
        [
            Hook::CalcPrivateCommandListSize,
            Hook::CreateCommandList,
            Hook::CalcDeferredContextHandleSize,
            Hook::CloseLocal,
            Hook::CloseLocal,
            Hook::RecycleCreateDeferredContext,
        ],
        "{fresh:#?}"
    );
    assert_eq!(fresh[2].ty, Some(HandleType::CommandList));
    ids.sort_unstable();
    assert_ne!(ids[0], ids[1], "two fresh lists");

    // Destroys from another thread are light destroys, on that thread.
    let t2 = thread::scope(|s| {
        s.spawn(move || {
            drop(lists);
            thread::current().id()
        })
        .join()
        .unwrap()
    });
    let destroys = drain(&world);
    assert!(all_on(&destroys, t2), "{destroys:#?}");
    assert_eq!(
        hooks(&destroys),
        [
            Hook::RecycleDestroyCommandList,
            Hook::RecycleDestroyCommandList
        ]
    );
    let mut light = objects(&destroys, Hook::RecycleDestroyCommandList);
    light.sort_unstable();
    assert_eq!(light, ids);

    // The next Finish: every destroyed list recycled at once, one of them recycle-created,
    // then the closes, then the context recycled; all on the DC's (new) thread.
    let (t3, recycled, list) = thread::scope(|s| {
        s.spawn(|| {
            dc.command(SoftCommand::Copy { dst, src }).unwrap();
            drain(&world);
            let list = dc.finish().unwrap();
            (thread::current().id(), drain(&world), list)
        })
        .join()
        .unwrap()
    });
    assert!(all_on(&recycled, t3), "{recycled:#?}");
    assert_eq!(
        hooks(&recycled),
        [
            Hook::RecycleCommandList,
            Hook::RecycleCommandList,
            Hook::RecycleCreateCommandList,
            Hook::CloseLocal,
            Hook::CloseLocal,
            Hook::RecycleCreateDeferredContext,
        ],
        "{recycled:#?}"
    );
    assert!(
        recycled.iter().all(|e| e.context == Some(c)),
        "every hook names the context: {recycled:#?}"
    );
    let mut taken = objects(&recycled, Hook::RecycleCommandList);
    taken.sort_unstable();
    assert_eq!(taken, ids, "both destroyed lists were taken at once");
    assert!(ids.contains(&made(&recycled)));
    let mut closed = objects(&recycled, Hook::CloseLocal);
    closed.sort_unstable();
    let mut opened = vec![sid, did];
    opened.sort_unstable();
    assert_eq!(closed, opened);

    drop(list);
    drop(dc);
    finish_and_clean(&world, ic);
}

#[test]
fn r_r4_destroyed_lists_end_with_destroy_command_list_once_their_context_is_gone() {
    let (device, mut ic, world, src, dst) = setup(native(), DeviceConfig::default());
    let mut dc = device.create_deferred_context().unwrap();
    let early = copy_list(&mut dc, src, dst);
    let early_id = made(&world.trace());
    let late = copy_list(&mut dc, src, dst);
    let late_id = made(&world.trace());
    let mut log = drain(&world);

    // Destroyed while its context lives: a light destroy (R-R4), the driver keeps its memory.
    // The context goes before its next Finish could recycle the list into its cache: the
    // list is destroyed for good (DestroyCommandList), before the context's own destroy.
    drop(early);
    drop(dc);
    let dropped = drain(&world);
    assert_eq!(
        hooks(&dropped),
        [
            Hook::RecycleDestroyCommandList,
            Hook::DestroyCommandList,
            Hook::DestroyDeferredContext
        ],
        "{dropped:#?}"
    );
    assert_eq!(
        objects(&dropped, Hook::RecycleDestroyCommandList),
        [early_id]
    );
    assert_eq!(objects(&dropped, Hook::DestroyCommandList), [early_id]);
    log.extend(dropped);

    // Destroyed on another thread after its context is gone: DestroyCommandList there.
    let t = thread::scope(|s| {
        s.spawn(move || {
            drop(late);
            thread::current().id()
        })
        .join()
        .unwrap()
    });
    let destroyed = drain(&world);
    assert_eq!(
        hooks(&destroyed),
        [Hook::DestroyCommandList],
        "{destroyed:#?}"
    );
    assert_eq!(destroyed[0].object, late_id);
    assert_eq!(destroyed[0].thread, t);
    log.extend(destroyed);

    // The list released what it held: the copy's source is really destroyed at the flush.
    let sid = device.object(src).unwrap().id;
    device.destroy(src).unwrap();
    ic.flush().unwrap();
    let flushed = drain(&world);
    assert!(
        flushed
            .iter()
            .any(|e| e.hook == Hook::DestroyObject && e.object == sid),
        "the list's hold on its source was released: {flushed:#?}"
    );
    log.extend(flushed);
    for hook in [Hook::RecycleCommandList, Hook::RecycleCreateCommandList] {
        assert_eq!(count(&log, hook), 0, "nothing recycled: {log:#?}");
    }
    // Each list ended exactly once, with DestroyCommandList.
    assert_eq!(objects(&log, Hook::DestroyCommandList), [early_id, late_id]);
    assert_eq!(objects(&log, Hook::RecycleDestroyCommandList), [early_id]);
    assert_each_list_destroyed_once(&log);
    finish_and_clean(&world, ic);
}

#[test]
fn r_r3_recycle_create_out_of_memory_is_a_return_value() {
    let soft = SoftConfig {
        recycle_create_fails: true,
        ..native()
    };
    let (device, mut ic, world, _src, dst) = setup(soft, submitted());
    let dst_memory = device.object(dst).unwrap().allocation().unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    let c = dc.id();
    let mut log = Vec::new();
    let mut previous = None;
    for value in 1..=3u8 {
        dc.update(dst, 0, &[value; 64]).unwrap();
        drain(&world);
        let list = dc
            .finish()
            .expect("Finish succeeds without the recycle hooks");
        let events = drain(&world);
        let h = hooks(&events);
        let id = made(&events);
        if let Some(previous) = previous {
            // RecycleCreateCommandList failed: the list is destroyed and a fresh one made.
            let at = h
                .iter()
                .position(|h| *h == Hook::RecycleCreateCommandList)
                .expect("the destroyed list is offered for recycling");
            assert_eq!(events[at].object, previous);
            // It was recycle-destroyed already: it ends with the context's cache, not with
            // a second destroy.
            assert!(!h.contains(&Hook::DestroyCommandList), "{events:#?}");
            assert!(
                h[at + 1..].contains(&Hook::CreateCommandList),
                "{events:#?}"
            );
            assert_ne!(id, previous);
        }
        // RecycleCreateDeferredContext failed: the context state is created again.
        let at = h
            .iter()
            .position(|h| *h == Hook::RecycleCreateDeferredContext)
            .expect("the context is offered for recycling");
        assert_eq!(
            h[at + 1..],
            [Hook::DestroyDeferredContext, Hook::CreateDeferredContext],
            "{events:#?}"
        );
        assert!(events[at..].iter().all(|e| e.context == Some(c)));
        assert_eq!(count(&events, Hook::SetError), 0, "{events:#?}");
        // The list works.
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
        assert_eq!(world.read(dst_memory).unwrap(), vec![value; 64]);
        drop(list);
        previous = Some(id);
        log.extend(events);
    }
    assert!(
        world.errors().is_empty(),
        "R-R3: no set-error: {:?}",
        world.errors()
    );
    let stats = dc.stats();
    assert_eq!((stats.created, stats.recycled, stats.finished), (3, 0, 3));
    drop(dc);
    log.extend(drain(&world));
    assert_each_list_destroyed_once(&log);
    finish_and_clean(&world, ic);
}

#[test]
fn r_r2_handle_sizes_never_change_across_recycling() {
    let (device, mut ic, world, src, dst) = setup(native(), submitted());
    let mut dc = device.create_deferred_context().unwrap();
    let mut list = copy_list(&mut dc, src, dst);
    let first = drain(&world);
    let id = made(&first);
    assert_eq!(count(&first, Hook::CalcPrivateCommandListSize), 1);
    for round in 0..6 {
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
        drop(list);
        if round % 2 == 1 {
            // Trimming gives back recording capacity, never handle memory.
            dc.trim();
        }
        list = copy_list(&mut dc, src, dst);
        let events = drain(&world);
        assert_eq!(
            objects(&events, Hook::RecycleDestroyCommandList),
            [id],
            "{events:#?}"
        );
        assert_eq!(
            objects(&events, Hook::RecycleCreateCommandList),
            [id],
            "the destroyed list's memory is the new list's: {events:#?}"
        );
        for hook in [
            Hook::CalcPrivateCommandListSize,
            Hook::CreateCommandList,
            Hook::DestroyCommandList,
        ] {
            assert_eq!(count(&events, hook), 0, "{hook:?} on the recycled path");
        }
        assert!(
            !events
                .iter()
                .any(|e| e.hook == Hook::CalcDeferredContextHandleSize
                    && e.ty == Some(HandleType::CommandList)),
            "the context-local CL handle is not sized again: {events:#?}"
        );
    }
    assert_eq!(dc.stats().recycled, 6);
    world.assert_no_violations();
    drop((list, dc));
    finish_and_clean(&world, ic);
}

#[test]
fn r_r5_recycled_by_its_own_dc_only() {
    let (device, ic, world, src, dst) = setup(native(), DeviceConfig::default());
    let mut a = device.create_deferred_context().unwrap();
    let mut b = device.create_deferred_context().unwrap();
    let (ca, cb) = (a.id(), b.id());
    let la = copy_list(&mut a, src, dst);
    let ia = made(&drain(&world));
    let lb = copy_list(&mut b, src, dst);
    let ib = made(&drain(&world));
    thread::scope(|s| s.spawn(move || drop((la, lb))).join().unwrap());
    drain(&world);

    let next_a = copy_list(&mut a, src, dst);
    let events = drain(&world);
    assert_eq!(
        objects(&events, Hook::RecycleCommandList),
        [ia],
        "{events:#?}"
    );
    assert_eq!(objects(&events, Hook::RecycleCreateCommandList), [ia]);
    assert!(events
        .iter()
        .filter(|e| e.ty == Some(HandleType::CommandList))
        .all(|e| e.context == Some(ca)));
    assert_eq!((a.stats().recycled, a.stats().cached_lists), (1, 0));
    assert_eq!((b.stats().recycled, b.stats().cached_lists), (0, 0));

    // B, on its own thread, gets its own list back.
    let (tb, events, next_b) = thread::scope(|s| {
        s.spawn(|| {
            let list = copy_list(&mut b, src, dst);
            (thread::current().id(), drain(&world), list)
        })
        .join()
        .unwrap()
    });
    assert_eq!(
        objects(&events, Hook::RecycleCommandList),
        [ib],
        "{events:#?}"
    );
    assert_eq!(objects(&events, Hook::RecycleCreateCommandList), [ib]);
    assert!(events
        .iter()
        .filter(|e| e.ty == Some(HandleType::CommandList))
        .all(|e| e.context == Some(cb) && e.thread == tb));
    assert_eq!(b.stats().recycled, 1);
    // The soft driver flags a list recycled by a context that did not make it.
    world.assert_no_violations();
    drop((next_a, next_b, a, b));
    finish_and_clean(&world, ic);
}

#[test]
fn r_r8_list_of_another_device_is_not_executable() {
    let (device, mut ic, world, src, dst) = setup(native(), DeviceConfig::default());
    let (_other, mut other_ic, other_world, _, _) = setup(native(), DeviceConfig::default());
    let mut dc = device.create_deferred_context().unwrap();
    let refused = Err(Error::Application(AppError::CommandListNotExecutable));
    // A fresh list, then one made from its recycled memory: both belong to this device.
    let fresh = copy_list(&mut dc, src, dst);
    other_world.clear_trace();
    assert_eq!(other_ic.execute_command_list(&fresh), refused);
    drop(fresh);
    let recycled = copy_list(&mut dc, src, dst);
    assert_eq!(
        dc.stats().waiting_lists,
        0,
        "a refused execute stamps nothing: the list is recycled at once"
    );
    assert_eq!(dc.stats().recycled, 1);
    assert_eq!(other_ic.execute_command_list(&recycled), refused);
    let ev = other_world.trace();
    assert!(
        ev.iter().all(|e| e.hook == Hook::SetError),
        "nothing ran on the other device: {ev:#?}"
    );
    assert_eq!(other_world.errors().len(), 2);
    ic.execute_command_list(&recycled).unwrap();
    ic.flush().unwrap();
    assert!(world.errors().is_empty());
    drop((recycled, dc));
    finish_and_clean(&world, ic);
    finish_and_clean(&other_world, other_ic);
}

#[test]
fn r_d1_executed_list_is_recycled_after_its_buffer_is_submitted() {
    let soft = SoftConfig {
        gpu: Gpu::Manual,
        ..native()
    };
    let config = DeviceConfig::default().with_list_clock(Clock::Submitted);
    let (device, mut ic, world, src, dst) = setup(soft, config);
    let mut dc = device.create_deferred_context().unwrap();
    let list = copy_list(&mut dc, src, dst);
    let id = made(&drain(&world));
    ic.execute_command_list(&list).unwrap();
    drop(list);
    // The open buffer still points into the list: it waits.
    let other = copy_list(&mut dc, src, dst);
    let events = drain(&world);
    assert_eq!(dc.stats().waiting_lists, 1);
    assert_eq!(count(&events, Hook::RecycleCommandList), 0, "{events:#?}");
    assert_eq!(count(&events, Hook::CreateCommandList), 1);
    world.assert_no_violations();
    ic.flush().unwrap();
    let again = copy_list(&mut dc, src, dst);
    let events = drain(&world);
    assert_eq!(dc.stats().waiting_lists, 0);
    assert_eq!(objects(&events, Hook::RecycleCommandList), [id]);
    assert_eq!(made(&events), id);
    world.assert_no_violations();

    // Executed again in a later buffer after an earlier one was submitted: the stamp is the
    // latest buffer's, so it waits again.
    ic.execute_command_list(&again).unwrap();
    ic.flush().unwrap();
    ic.execute_command_list(&again).unwrap();
    drop(again);
    let third = copy_list(&mut dc, src, dst);
    assert_eq!(dc.stats().waiting_lists, 1, "stamped with the open buffer");
    ic.flush().unwrap();
    let fourth = copy_list(&mut dc, src, dst);
    assert_eq!(dc.stats().waiting_lists, 0);
    assert_eq!(made(&drain(&world)), id);
    world.assert_no_violations();
    drop((other, third, fourth, dc));
    finish_and_clean(&world, ic);
}

#[test]
fn r_d4_completed_list_clock_waits_for_the_gpu() {
    let soft = SoftConfig {
        gpu: Gpu::Manual,
        ..native()
    };
    let config = DeviceConfig::default().with_list_clock(Clock::Completed);
    let (device, mut ic, world, src, dst) = setup(soft, config);
    let mut dc = device.create_deferred_context().unwrap();
    let list = copy_list(&mut dc, src, dst);
    let id = made(&drain(&world));
    ic.execute_command_list(&list).unwrap();
    drop(list);
    let mut kept = vec![copy_list(&mut dc, src, dst)];
    assert_eq!(dc.stats().waiting_lists, 1, "not even submitted");
    ic.flush().unwrap();
    kept.push(copy_list(&mut dc, src, dst));
    assert_eq!(dc.stats().waiting_lists, 1, "submitted, not completed");
    assert_eq!(count(&drain(&world), Hook::RecycleCommandList), 0);
    world.assert_no_violations();
    world.complete_all();
    ic.flush().unwrap();
    kept.push(copy_list(&mut dc, src, dst));
    let events = drain(&world);
    assert_eq!(dc.stats().waiting_lists, 0);
    assert_eq!(objects(&events, Hook::RecycleCommandList), [id]);
    assert_eq!(made(&events), id);
    world.assert_no_violations();
    drop((kept, dc));
    finish_and_clean(&world, ic);
}

#[test]
fn r_a1_amortized_processing_after_submits_never_starved() {
    let (device, mut ic, world, src, dst) = setup(native(), DeviceConfig::default());
    let ic_thread = thread::current().id();
    let mut dc = device.create_deferred_context().unwrap();
    let mut flushes = 0;
    for frame in 0..12 {
        let before = world.amortized_calls();
        // Every third frame is idle: one empty flush, nothing else.
        let active = frame % 3 != 2;
        let per_frame = if active { 1 + frame % 4 } else { 1 };
        for i in 0..per_frame {
            if active {
                let list = copy_list(&mut dc, src, dst);
                ic.execute_command_list(&list).unwrap();
                drop(list);
                if frame == 4 && i == 1 {
                    // Past R-A1's rule of thumb within one frame.
                    thread::sleep(Duration::from_millis(2));
                }
            }
            ic.flush().unwrap();
            flushes += 1;
        }
        ic.end_frame().unwrap();
        let calls = world.amortized_calls();
        if active {
            assert!(
                calls > before,
                "frame {frame} had activity but no amortized processing"
            );
        } else {
            // At most what the frame before left due; a second idle frame has nothing.
            assert!(
                calls - before <= 1,
                "idle frame {frame}: {before} -> {calls}"
            );
            ic.flush().unwrap();
            flushes += 1;
            ic.end_frame().unwrap();
            assert_eq!(
                world.amortized_calls(),
                calls,
                "second idle frame after {frame}"
            );
        }
        assert!(calls <= flushes, "{calls} calls for {flushes} flushes");
    }
    let trace = drain(&world);
    // Never twice back to back: a submit between any two calls, all on the IC's thread.
    let mut since_submit = true;
    for e in &trace {
        match e.hook {
            Hook::Submit => since_submit = true,
            Hook::AmortizedProcessing => {
                assert_eq!(e.thread, ic_thread);
                assert!(
                    since_submit,
                    "two calls without a submit between: {trace:#?}"
                );
                since_submit = false;
            }
            _ => {}
        }
    }
    assert_eq!(ic.amortized_count(), world.amortized_calls());
    drop(dc);
    finish_and_clean(&world, ic);
}

#[test]
fn r_a2_dc_out_of_memory_pumps_amortized_processing() {
    let config = DeviceConfig::default().with_deferred_budget(1024);
    let (device, ic, world, _, _) = setup(native(), config);
    let big = device
        .create_resource(ResourceDesc {
            byte_size: 4096,
            ..Default::default()
        })
        .unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    let c = dc.id();
    let ic_count = ic.amortized_count();
    let (t, events, first, retained) = thread::scope(|s| {
        s.spawn(|| {
            dc.update(big, 0, &[1; 16]).unwrap();
            let retained = dc.stats().retained_bytes;
            drain(&world);
            assert_eq!(dc.update(big, 0, &[2; 2048]), Err(Error::OutOfMemory));
            let events = drain(&world);
            let first = dc.finish().err();
            (thread::current().id(), events, first, retained)
        })
        .join()
        .unwrap()
    });
    assert!(dc.stats().retained_bytes <= retained, "trimmed, not grown");
    assert_eq!(first, Some(Error::OutOfMemory));
    assert_eq!(
        world.errors(),
        [(ContextId::Deferred(c), Error::OutOfMemory)]
    );
    let pumps: Vec<_> = events
        .iter()
        .filter(|e| e.hook == Hook::AmortizedProcessing)
        .collect();
    assert_eq!(pumps.len(), 1, "{events:#?}");
    assert_eq!(pumps[0].thread, t, "from the DC's thread");
    assert_eq!(world.amortized_calls(), 1);
    assert_eq!(
        ic.amortized_count(),
        ic_count,
        "the DC pumped it, not the IC"
    );
    // It records again afterwards.
    dc.update(big, 0, &[3; 16]).unwrap();
    drop(dc.finish().unwrap());
    drop(dc);
    finish_and_clean(&world, ic);
}

#[test]
fn r_r1_no_recycle_config_creates_and_destroys_every_time() {
    let config = submitted().with_recycle(false);
    let (device, mut ic, world, src, dst) = setup(native(), config);
    let mut dc = device.create_deferred_context().unwrap();
    let mut ids = HashSet::new();
    let mut log = drain(&world);
    for _ in 0..4 {
        let list = copy_list(&mut dc, src, dst);
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
        drop(list);
        let events = drain(&world);
        for hook in [
            Hook::CalcPrivateCommandListSize,
            Hook::CreateCommandList,
            Hook::DestroyCommandList,
            Hook::DestroyDeferredContext,
            Hook::CreateDeferredContext,
        ] {
            assert_eq!(
                count(&events, hook),
                1,
                "{hook:?} once per cycle: {events:#?}"
            );
        }
        for hook in [
            Hook::RecycleCommandList,
            Hook::RecycleCreateCommandList,
            Hook::RecycleDestroyCommandList,
            Hook::RecycleCreateDeferredContext,
        ] {
            assert_eq!(count(&events, hook), 0, "{hook:?} without recycling");
        }
        assert!(ids.insert(made(&events)), "fresh memory every time");
        log.extend(events);
    }
    let stats = dc.stats();
    assert_eq!(
        (stats.created, stats.recycled, stats.cached_lists),
        (4, 0, 0)
    );
    drop(dc);
    log.extend(drain(&world));
    assert_each_list_destroyed_once(&log);
    finish_and_clean(&world, ic);
}

/// A list ended for good while the buffer that executed it is still open keeps its memory
/// until that buffer was submitted (the submission clock covers destruction too, not only
/// recycling), with recycling off and when its context is dropped first.
#[test]
fn r_d1_list_memory_outlives_the_buffer_that_executed_it() {
    for recycle in [false, true] {
        let config = DeviceConfig::default().with_recycle(recycle);
        let (device, mut ic, world, src, dst) = setup(native(), config);
        let mut dc = device.create_deferred_context().unwrap();
        let list = copy_list(&mut dc, src, dst);
        let id = made(&world.trace());
        ic.execute_command_list(&list).unwrap();
        drop(list);
        drop(dc);
        ic.flush().unwrap();
        let trace = world.trace();
        let submit = trace.iter().position(|e| e.hook == Hook::Submit).unwrap();
        if let Some(destroy) = trace
            .iter()
            .position(|e| e.hook == Hook::DestroyCommandList && e.object == id)
        {
            assert!(submit < destroy, "recycle {recycle}: {trace:#?}");
        }
        assert_eq!(world.violations(), vec![], "recycle {recycle}");
        finish_and_clean(&world, ic);
    }
}

#[test]
fn r_r6_recycle_create_makes_a_destroyed_list_valid_again() {
    let (device, mut ic, world, src, dst) = setup(native(), submitted());
    let dst_memory = device.object(dst).unwrap().allocation().unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    let first = copy_list(&mut dc, src, dst);
    let first_id = made(&world.trace());
    drop(first); // destroyed: no longer executable (the value is gone), memory kept
    for value in [5u8, 6] {
        ic.update(src, 0, &[value; 64]).unwrap();
        let again = copy_list(&mut dc, src, dst);
        // The same handle memory, made valid again by RecycleCreateCommandList (R-R6) ...
        assert_eq!(made(&world.trace()), first_id);
        assert_eq!(
            world
                .trace()
                .iter()
                .rev()
                .find(|e| e.object == first_id)
                .map(|e| e.hook),
            Some(Hook::RecycleCreateCommandList)
        );
        // ... and executable like a fresh list.
        ic.execute_command_list(&again).unwrap();
        ic.flush().unwrap();
        assert_eq!(world.read(dst_memory).unwrap(), vec![value; 64]);
        drop(again);
    }
    assert_eq!(world.violations(), vec![]);
    drop(dc);
    finish_and_clean(&world, ic);
}

#[test]
fn r_r4_recycle_destroyed_list_memory_returned_when_context_dropped() {
    // A list destroyed while its context lives gets the light destroy (R-R4): its memory
    // waits for the context's next Finish to go into the context's cache (R-R5). When the
    // context is dropped before that Finish, the memory must still come back to the driver
    // (recycled into the cache that DestroyDeferredContext releases, or destroyed), never
    // stay with nobody.
    let (device, mut ic, world, src, dst) = setup(native(), DeviceConfig::default());
    let mut dc = device.create_deferred_context().unwrap();
    let list = copy_list(&mut dc, src, dst);
    ic.execute_command_list(&list).unwrap();
    drop(list);
    ic.flush().unwrap();
    drop(dc);
    finish_and_clean(&world, ic);
}

/// R-R5, R-R6: lists dropped before the next Finish are recycled into the context's cache
/// there, one taken back for the list it makes; `stats()` counts the ones that wait in the
/// cache, as many as were dropped but one.
#[test]
fn r_r5_r_r6_stats_count_the_lists_waiting_in_the_cache() {
    let (device, ic, world, src, dst) = setup(native(), submitted());
    let mut dc = device.create_deferred_context().unwrap();
    let lists: Vec<_> = (0..3).map(|_| copy_list(&mut dc, src, dst)).collect();
    assert_eq!(dc.stats().cached_lists, 0);
    drop(lists);
    let kept = copy_list(&mut dc, src, dst);
    let stats = dc.stats();
    assert_eq!((stats.cached_lists, stats.waiting_lists), (2, 0));
    drop((kept, dc, device));
    finish_and_clean(&world, ic);
}
