//! Threads: the immediate context's callbacks stay on its thread (R-T1, R-T2), create,
//! destroy and the size queries are free-threaded (R-F1, R-F2), and a stress run of all of
//! it at once leaves nothing broken or leaked.

use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Barrier, Mutex};
use std::thread::{self, ThreadId};

use cmdlist::handle::{Query, Resource, View};
use cmdlist::soft::{Gpu, Hook, SoftCommand, SoftWorld, TraceEvent};
use cmdlist::{
    AppError, BindClass, BindPoint, Clock, Error, Handle, HandleType, ObjectDesc, QueryKind,
    ResourceDesc, ResourceFlags, ViewDesc,
};

use crate::common::{buffer, setup};

type Dev = cmdlist::soft::SoftDevice;
type Ic = cmdlist::soft::SoftImmediate;

fn view_of(device: &Dev, r: Handle<Resource>) -> cmdlist::Result<Handle<View>> {
    device.create_view(
        HandleType::RenderTargetView,
        ViewDesc {
            resource: r,
            first_byte: 0,
            byte_len: 32,
        },
    )
}

fn count(trace: &[TraceEvent], hook: Hook) -> usize {
    trace.iter().filter(|e| e.hook == hook).count()
}

fn threads_of(trace: &[TraceEvent], hook: Hook) -> HashSet<ThreadId> {
    trace
        .iter()
        .filter(|e| e.hook == hook)
        .map(|e| e.thread)
        .collect()
}

/// Hooks that belong to the immediate context's thread (R-T1, R-T2, R-D1).
const IC_ONLY: [Hook; 6] = [
    Hook::Execute,
    Hook::Flush,
    Hook::Submit,
    Hook::WaitForFence,
    Hook::DestroyObject,
    Hook::Deallocate,
];

fn assert_ic_hooks_on(trace: &[TraceEvent], ic_thread: ThreadId) {
    for e in trace {
        if IC_ONLY.contains(&e.hook) {
            assert_eq!(
                e.thread, ic_thread,
                "{:?} off the immediate context's thread: {e:?}",
                e.hook
            );
        }
    }
    // One kernel context, one thread: fences strictly increase (R-T1).
    let fences: Vec<u64> = trace
        .iter()
        .filter(|e| e.hook == Hook::Submit)
        .map(|e| e.fence)
        .collect();
    assert!(
        fences.windows(2).all(|w| w[0] < w[1]),
        "submits out of order: {fences:?}"
    );
}

// ---------------------------------------------------------------------------------------
// R-T1: one thread drives the immediate context; its auto traits say so.
// ---------------------------------------------------------------------------------------

struct Probe<T>(PhantomData<T>);
trait NotSync {
    const SYNC: bool = false;
}
impl<T> NotSync for Probe<T> {}
impl<T: Sync> Probe<T> {
    const SYNC: bool = true;
}

fn assert_send<T: Send>() {}
fn assert_send_sync<T: Send + Sync>() {}

/// The user-facing types print what they are (a `Debug` each, whatever the driver's types).
#[test]
fn the_user_facing_types_are_debug() {
    let (device, mut ic, _world) = setup(Gpu::Immediate, true, cmdlist::Clock::Completed);
    let mut dc = device.create_deferred_context().unwrap();
    let list = dc.finish().unwrap();
    let printed = [
        format!("{device:?}"),
        format!("{ic:?}"),
        format!("{dc:?}"),
        format!("{list:?}"),
    ];
    for (text, name) in printed.iter().zip([
        "Device",
        "ImmediateContext",
        "DeferredContext",
        "CommandList",
    ]) {
        assert!(text.starts_with(name), "{text}");
    }
    assert!(printed[0].contains("list_mode"), "{}", printed[0]);
    drop((list, dc));
    ic.destroy_device().unwrap();
}

#[test]
fn r_t1_immediate_context_is_send_but_not_sync() {
    assert_send::<Ic>();
    assert_send_sync::<Dev>();
    // Checked at compile time: the probe falls back to the trait's `false` when the bound
    // of the inherent `true` does not hold.
    const {
        assert!(
            !<Probe<Ic>>::SYNC,
            "two threads could drive the immediate context at once"
        );
        assert!(<Probe<Dev>>::SYNC);
    }
}

#[test]
fn r_t1_deferred_context_is_send_but_not_sync_and_command_list_is_both() {
    type Dc = cmdlist::DeferredContext<cmdlist::soft::SoftDriver, cmdlist::soft::SoftKernel>;
    type List = cmdlist::CommandList<cmdlist::soft::SoftDriver, cmdlist::soft::SoftKernel>;
    assert_send::<Dc>();
    assert_send_sync::<List>();
    const {
        assert!(
            !<Probe<Dc>>::SYNC,
            "two threads could record on one deferred context at once"
        );
        assert!(<Probe<List>>::SYNC);
    }
}

#[test]
fn r_t1_ic_callbacks_stay_on_the_ic_thread_while_others_create_and_destroy() {
    let (device, mut ic, world) = setup(Gpu::PollLag(2), true, Clock::Completed);
    let me = thread::current().id();
    let shared: Vec<Handle<Resource>> = (0..8)
        .map(|_| device.create_resource(buffer(64)).unwrap())
        .collect();
    thread::scope(|s| {
        for t in 0..2 {
            let device = &device;
            s.spawn(move || {
                for i in 0..60 {
                    let r = device.create_resource(buffer(16)).unwrap();
                    if i % 2 == t {
                        let res = device.create_resource(buffer(32)).unwrap();
                        let v = view_of(device, res).unwrap();
                        device.destroy(res).unwrap();
                        device.destroy(v).unwrap();
                    }
                    device.destroy(r).unwrap();
                }
            });
        }
        for i in 0..120u8 {
            let r = shared[i as usize % shared.len()];
            ic.update(r, 0, &[i; 64]).unwrap();
            if i % 5 == 0 {
                ic.flush().unwrap();
            }
        }
    });
    ic.flush().unwrap();
    ic.destroy_device().unwrap();
    let trace = world.trace();
    assert!(count(&trace, Hook::Submit) >= 20);
    assert_ic_hooks_on(&trace, me);
    world.assert_clean();
}

// ---------------------------------------------------------------------------------------
// R-T2: submit on the thread that called Flush (the IC's); shared allocations on the
// thread inside create.
// ---------------------------------------------------------------------------------------

#[test]
fn r_t2_submit_only_on_ic_thread() {
    // The immediate context lives on a thread of its own; the test's thread and a helper
    // create and destroy meanwhile. Every submit must come from the IC's thread.
    let (tx, rx) = mpsc::channel::<Handle<Resource>>();
    let (dev_tx, dev_rx) = mpsc::channel::<(Dev, std::sync::Arc<SoftWorld>)>();
    let ic_thread = thread::spawn(move || {
        let (device, mut ic, world) = setup(Gpu::Immediate, true, Clock::Completed);
        dev_tx.send((device.clone(), world)).unwrap();
        let mut flushes = 0;
        for r in rx {
            // May already be destroyed by the other side: an application error, no more.
            match ic.update(r, 0, &[1; 8]) {
                Ok(()) | Err(Error::Application(AppError::StaleHandle)) => {}
                Err(e) => panic!("{e:?}"),
            }
            ic.flush().unwrap();
            flushes += 1;
        }
        ic.destroy_device().unwrap();
        (thread::current().id(), flushes)
    });
    let (device, world) = dev_rx.recv().unwrap();
    thread::scope(|s| {
        let device2 = device.clone();
        s.spawn(move || {
            for _ in 0..40 {
                let r = device2.create_resource(buffer(8)).unwrap();
                device2.destroy(r).unwrap();
            }
        });
        for i in 0..40 {
            let r = device.create_resource(buffer(8)).unwrap();
            tx.send(r).unwrap();
            // Half race the IC's use of them; the other half live on for the IC to submit.
            if i % 2 == 1 {
                device.destroy(r).unwrap();
            }
        }
    });
    // Only now may the IC thread destroy the device: nobody else calls it any more.
    drop(tx);
    let (ic_id, flushes) = ic_thread.join().unwrap();
    assert_eq!(flushes, 40);
    let trace = world.trace();
    assert!(count(&trace, Hook::Submit) >= 20);
    assert_eq!(threads_of(&trace, Hook::Submit), HashSet::from([ic_id]));
    assert_ic_hooks_on(&trace, ic_id);
    // Creates ran on the other threads, never on the IC's.
    let creators = threads_of(&trace, Hook::CreateObject);
    assert!(!creators.contains(&ic_id));
    assert_eq!(creators.len(), 2);
    world.assert_clean();
}

#[test]
fn r_t2_shared_allocation_on_the_creating_thread() {
    let (device, mut ic, world) = setup(Gpu::Immediate, true, Clock::Completed);
    let shared = ResourceDesc {
        byte_size: 128,
        flags: ResourceFlags::SHARED,
        ..Default::default()
    };
    let made: Vec<(ThreadId, u64)> = thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    let r = device.create_resource(shared).unwrap();
                    (
                        thread::current().id(),
                        device.object(r).unwrap().allocation().unwrap().0.get(),
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let trace = world.trace();
    for (creator, allocation) in made {
        let a = trace
            .iter()
            .position(|e| e.hook == Hook::Allocate && e.allocation == allocation)
            .unwrap();
        assert_eq!(
            trace[a].thread, creator,
            "a shared allocation off the creating thread"
        );
        // Inside that thread's create: after its size query, before the driver's create.
        let calc = trace[..a]
            .iter()
            .rposition(|e| e.thread == creator && e.hook == Hook::CalcPrivateSize);
        let create = trace[a..].iter().position(|e| {
            e.thread == creator && e.hook == Hook::CreateObject && e.allocation == allocation
        });
        assert!(calc.is_some() && create.is_some(), "{trace:#?}");
    }
    ic.destroy_device().unwrap();
    world.assert_clean();
}

// ---------------------------------------------------------------------------------------
// R-F1 / R-F2: create, destroy and the CalcPrivate* queries from many threads at once.
// ---------------------------------------------------------------------------------------

#[test]
fn r_f1_create_and_destroy_from_many_threads_at_once() {
    const THREADS: usize = 4;
    const EACH: usize = 40;
    let (device, mut ic, world) = setup(Gpu::Manual, true, Clock::Completed);
    let barrier = Barrier::new(THREADS);
    let all: Mutex<Vec<cmdlist::AnyHandle>> = Mutex::new(Vec::new());
    let kept: Mutex<Vec<cmdlist::AnyHandle>> = Mutex::new(Vec::new());
    thread::scope(|s| {
        for t in 0..THREADS {
            let (device, barrier, all, kept) = (&device, &barrier, &all, &kept);
            s.spawn(move || {
                barrier.wait();
                let mut mine = Vec::new();
                for i in 0..EACH {
                    let r = device.create_resource(buffer(16 + t as u64)).unwrap();
                    let v = view_of(device, device.create_resource(buffer(32)).unwrap()).unwrap();
                    let q = device.create_query(QueryKind::Occlusion).unwrap();
                    let sh = device.create(&ObjectDesc::Shader(&[t as u8; 12])).unwrap();
                    // Every handle names what this thread made, whatever the others do.
                    assert_eq!(device.object(r).unwrap().byte_size, 16 + t as u64);
                    assert_eq!(device.object(v).unwrap().ty(), HandleType::RenderTargetView);
                    mine.extend([r.any(), v.any(), q.any(), sh]);
                    if i % 2 == 0 {
                        device.destroy(q).unwrap();
                        device.destroy(r).unwrap();
                    }
                }
                all.lock().unwrap().extend(mine.iter().copied());
                kept.lock()
                    .unwrap()
                    .extend(mine.into_iter().filter(|&h| device.object(h).is_ok()));
            });
        }
    });
    let all = all.into_inner().unwrap();
    let kept = kept.into_inner().unwrap();
    // Each handle was handed out once.
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), all.len());
    // Views' resources are live (never destroyed) objects too.
    let created = THREADS * EACH * 5;
    let trace = world.trace();
    assert_eq!(count(&trace, Hook::CreateObject), created);
    assert_eq!(
        count(&trace, Hook::DestroyObject),
        0,
        "destroyed before a flush"
    );
    let creators = threads_of(&trace, Hook::CreateObject);
    assert_eq!(creators.len(), THREADS);
    assert!(!creators.contains(&thread::current().id()));
    ic.flush().unwrap();
    let destroyed = THREADS * EACH; // half the resources and half the queries
    assert_eq!(ic.retire_stats().destroyed as usize, destroyed);
    assert_eq!(count(&world.trace(), Hook::DestroyObject), destroyed);
    for h in kept {
        assert!(device.object(h).is_ok(), "a kept object was destroyed");
    }
    ic.destroy_device().unwrap();
    let trace = world.trace();
    assert_eq!(count(&trace, Hook::DestroyObject), created);
    assert_eq!(
        threads_of(&trace, Hook::DestroyObject),
        HashSet::from([thread::current().id()])
    );
    world.assert_clean();
}

#[test]
fn r_f2_calc_private_size_called_free_threaded() {
    const THREADS: usize = 3;
    let (device, ic, world) = setup(Gpu::Manual, true, Clock::Completed);
    let barrier = Barrier::new(THREADS);
    let ids: Vec<ThreadId> = thread::scope(|s| {
        let joins: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    for _ in 0..10 {
                        device.create_resource(buffer(24)).unwrap();
                        device.create_query(QueryKind::Timestamp).unwrap();
                        device
                            .create(&ObjectDesc::State {
                                ty: HandleType::SamplerState,
                                desc: &[1],
                            })
                            .unwrap();
                    }
                    thread::current().id()
                })
            })
            .collect();
        joins.into_iter().map(|j| j.join().unwrap()).collect()
    });
    let trace = world.trace();
    let sizers = threads_of(&trace, Hook::CalcPrivateSize);
    assert_eq!(sizers, ids.iter().copied().collect::<HashSet<_>>());
    assert!(!sizers.contains(&thread::current().id()));
    // Each create asks the size on its own thread first, before the driver's create.
    let mut pending: HashMap<ThreadId, usize> = HashMap::new();
    for e in &trace {
        match e.hook {
            Hook::CalcPrivateSize => *pending.entry(e.thread).or_default() += 1,
            Hook::CreateObject => {
                let n = pending.entry(e.thread).or_default();
                assert!(
                    *n > 0,
                    "CreateObject without a CalcPrivateSize on its thread"
                );
                *n -= 1;
            }
            _ => {}
        }
    }
    assert_eq!(count(&trace, Hook::CalcPrivateSize), THREADS * 30);
    drop(ic);
    world.assert_clean();
}

#[test]
fn r_f2_deferred_size_queries_run_on_the_recording_threads() {
    // CalcDeferredContextHandleSize and CalcPrivateCommandListSize are free-threaded too:
    // each deferred context asks them on its own thread at Finish (the command list's sizes,
    // R-R7), several at once; an object's is asked on the thread creating it (R-H4).
    const THREADS: usize = 3;
    let (device, mut ic, world) = cmdlist::soft::device(
        cmdlist::soft::SoftConfig {
            gpu: Gpu::Immediate,
            ..crate::common::native()
        },
        cmdlist::DeviceConfig::default(),
    )
    .unwrap();
    let r = device.create_resource(buffer(64)).unwrap();
    let q = device.create_query(QueryKind::Event).unwrap();
    let creator: HashSet<ThreadId> = [thread::current().id()].into_iter().collect();
    let object_sizes: Vec<_> = world
        .trace()
        .into_iter()
        .filter(|e| e.hook == Hook::CalcDeferredContextHandleSize)
        .collect();
    assert_eq!(object_sizes.len(), 2, "asked once per object, at creation");
    assert!(object_sizes.iter().all(|e| creator.contains(&e.thread)));
    world.clear_trace();
    let barrier = Barrier::new(THREADS);
    let made: Vec<_> = thread::scope(|s| {
        let joins: Vec<_> = (0..THREADS)
            .map(|t| {
                let (device, barrier) = (&device, &barrier);
                s.spawn(move || {
                    let mut dc = device.create_deferred_context().unwrap();
                    barrier.wait();
                    dc.update(r, t as u64 * 8, &[t as u8 + 1; 8]).unwrap();
                    dc.end_query(q).unwrap();
                    let list = dc.finish().unwrap();
                    (thread::current().id(), list)
                })
            })
            .collect();
        joins.into_iter().map(|j| j.join().unwrap()).collect()
    });
    let recorders: HashSet<ThreadId> = made.iter().map(|(id, _)| *id).collect();
    for (_, list) in &made {
        ic.execute_command_list(list).unwrap();
    }
    ic.flush().unwrap();
    let trace = world.trace();
    for hook in [
        Hook::CalcDeferredContextHandleSize,
        Hook::CalcPrivateCommandListSize,
    ] {
        assert_eq!(threads_of(&trace, hook), recorders, "{hook:?}");
    }
    let alloc = device.object(r).unwrap().allocation().unwrap();
    let bytes = world.read(alloc).unwrap();
    for t in 0..THREADS {
        assert_eq!(&bytes[t * 8..t * 8 + 8], &[t as u8 + 1; 8]);
    }
    drop(made);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

// ---------------------------------------------------------------------------------------
// Stress: everything at once, on both retire clocks.
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct Set {
    r: Handle<Resource>,
    v: Handle<View>,
    q: Handle<Query>,
    /// Soft ids of the view and its resource.
    ids: (u64, u64),
}

fn acceptable(result: cmdlist::Result<()>) {
    match result {
        Ok(())
        | Err(Error::Application(AppError::StaleHandle))
        | Err(Error::Application(AppError::MissingDependency)) => {}
        Err(e) => panic!("unexpected error {e:?}"),
    }
}

fn stress(gpu: Gpu, strict_gpu: bool, clock: Clock) {
    const WORKERS: usize = 3;
    const ROUNDS: usize = 400;
    let (device, mut ic, world) = setup(gpu, strict_gpu, clock);
    let me = thread::current().id();
    let (tx, rx) = mpsc::channel::<Set>();
    let running = AtomicUsize::new(WORKERS);
    let (mut ops, mut ok) = (0usize, 0usize);
    let mut pairs: Vec<(u64, u64)> = Vec::new();
    thread::scope(|s| {
        for w in 0..WORKERS {
            let (device, tx, running) = (&device, tx.clone(), &running);
            s.spawn(move || {
                let mut ring: Vec<Set> = Vec::new();
                for i in 0..ROUNDS {
                    let r = device.create_resource(buffer(64)).unwrap();
                    let v = view_of(device, r).unwrap();
                    let q = device.create_query(QueryKind::Event).unwrap();
                    let ids = (device.object(v).unwrap().id, device.object(r).unwrap().id);
                    let set = Set { r, v, q, ids };
                    tx.send(set).unwrap();
                    ring.push(set);
                    if ring.len() > 4 {
                        let old = ring.remove(0);
                        // Both orders: a resource may go before or after its view.
                        if (i + w) % 2 == 0 {
                            device.destroy(old.v).unwrap();
                            device.destroy(old.r).unwrap();
                        } else {
                            device.destroy(old.r).unwrap();
                            device.destroy(old.q).unwrap();
                            device.destroy(old.v).unwrap();
                            continue;
                        }
                        device.destroy(old.q).unwrap();
                    }
                    if i % 16 == 0 {
                        thread::yield_now();
                    }
                }
                // The last few stay alive for device destruction to drain.
                running.fetch_sub(1, Ordering::Release);
            });
        }
        drop(tx);
        let point = BindPoint::new(BindClass::RenderTarget, 0);
        let mut known: Vec<Set> = Vec::new();
        let mut step = 0usize;
        loop {
            let idle = running.load(Ordering::Acquire) == 0;
            for set in rx.try_iter() {
                pairs.push(set.ids);
                known.push(set);
            }
            if known.len() > 24 {
                known.drain(..known.len() - 24);
            }
            if idle && step > 200 {
                break;
            }
            step += 1;
            if known.len() < 2 {
                thread::yield_now();
                continue;
            }
            let a = known[step % known.len()];
            let b = known[(step * 7 + 3) % known.len()];
            let results = [
                ic.update(a.r, (step % 32) as u64, &[step as u8; 32]),
                ic.command(&SoftCommand::Copy { dst: b.r, src: a.r }),
                ic.command(&SoftCommand::ClearView {
                    view: b.v,
                    value: 0x11,
                }),
                ic.bind(point, Some(a.v.any())),
                ic.end_query(b.q),
            ];
            let ended = results[4].is_ok();
            for result in results {
                ops += 1;
                ok += result.is_ok() as usize;
                acceptable(result);
            }
            if ended && step % 4 == 0 {
                match ic.query_signaled(b.q) {
                    Ok(_) | Err(Error::Application(AppError::StaleHandle)) => {}
                    Err(e) => panic!("{e:?}"),
                }
            }
            if step % 3 == 0 {
                ic.flush().unwrap();
            }
            if step % 7 == 0 {
                ic.clear_state().unwrap();
            }
            if gpu == Gpu::Manual && step % 5 == 0 {
                world.complete_all();
            }
        }
    });
    assert!(
        ok > 0 && ok < ops,
        "the race never happened ({ok} of {ops} calls succeeded)"
    );
    ic.flush().unwrap();
    assert_eq!(world.violations(), vec![]);
    ic.destroy_device().unwrap();
    world.assert_clean();
    let trace = world.trace();
    let created = WORKERS * ROUNDS * 3;
    assert_eq!(count(&trace, Hook::CreateObject), created);
    assert_eq!(count(&trace, Hook::DestroyObject), created);
    assert_eq!(
        count(&trace, Hook::Allocate),
        count(&trace, Hook::Deallocate)
    );
    assert_ic_hooks_on(&trace, me);
    assert_eq!(threads_of(&trace, Hook::CreateObject).len(), WORKERS);
    let destroyed_at: HashMap<u64, usize> = trace
        .iter()
        .enumerate()
        .filter(|(_, e)| e.hook == Hook::DestroyObject)
        .map(|(i, e)| (e.object, i))
        .collect();
    assert_eq!(destroyed_at.len(), created, "an object was destroyed twice");
    // A resource is never destroyed before a view of it (R-H3), whichever order the
    // application released them in.
    assert_eq!(pairs.len(), WORKERS * ROUNDS);
    for (view, resource) in pairs {
        assert!(
            destroyed_at[&view] < destroyed_at[&resource],
            "resource {resource} before view {view}"
        );
    }
}

#[test]
fn r_f1_stress_create_destroy_while_ic_flushes_completed_clock() {
    stress(Gpu::PollLag(2), true, Clock::Completed);
}

#[test]
fn r_f1_stress_create_destroy_while_ic_flushes_submitted_clock() {
    stress(Gpu::Manual, false, Clock::Submitted);
}
