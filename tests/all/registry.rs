//! The object table seen from outside: every bad handle is the application's error, never a
//! panic (R-E1), and every error of a create, destroy or IC call also reaches the set-error
//! callback of the immediate context (R-E2).

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use cmdlist::handle::{Any, Query, Resource, View};

use crate::common::{app, buffer, forge};
use cmdlist::soft::{self, Hook, SoftCommand, SoftConfig, SoftDriver, SoftKernel, SoftWorld};
use cmdlist::{
    AppError, BindClass, BindPoint, ContextId, Device, DeviceConfig, Error, Handle, HandleSize,
    HandleSizeTable, HandleType, ImmediateContext, ObjectDesc, ObjectKind, QueryKind, ResourceDesc,
    ResourceFlags, Stage, ThreadingCaps, ViewDesc,
};

type Dev = Device<SoftDriver, SoftKernel>;
type Ic = ImmediateContext<SoftDriver, SoftKernel>;

fn setup() -> (Dev, Ic, std::sync::Arc<SoftWorld>) {
    soft::device(SoftConfig::from_env().unwrap(), DeviceConfig::default()).unwrap()
}

fn view_of(device: &Dev, r: Handle<Resource>) -> cmdlist::Result<Handle<View>> {
    device.create_view(
        HandleType::ShaderResourceView,
        ViewDesc {
            resource: r,
            first_byte: 0,
            byte_len: 8,
        },
    )
}

/// Every way the application can name an object, each must give `expected`.
fn all_entry_points_refuse<T: ObjectKind>(
    device: &Dev,
    ic: &mut Ic,
    h: Handle<T>,
    expected: Error,
) {
    assert_eq!(device.object(h).err(), Some(expected), "object");
    assert_eq!(device.object(h.any()).err(), Some(expected), "object(any)");
    let r = forge::<Resource, _>(h);
    let q = forge::<Query, _>(h);
    let v = forge::<View, _>(h);
    // Through a forged kind, a wrong-type answer may legitimately come first, so these calls must
    // only be application errors (the callers check the exact kind on the real type).
    for result in [
        ic.update(r, 0, &[0; 4]),
        ic.command(&SoftCommand::Fill { dst: r, value: 1 }),
        ic.command(&SoftCommand::ClearView { view: v, value: 1 }),
        ic.bind(
            BindPoint::new(BindClass::ShaderResource(Stage::Vertex), 0),
            Some(h.any()),
        ),
        ic.begin_query(q),
        ic.end_query(q),
        ic.query_signaled(q).map(|_| ()),
        ic.ic_data_mut(h).map(|_| ()),
        ic.map_discard(r).map(|_| ()),
        ic.unmap(r),
        view_of(device, r).map(|_| ()),
    ] {
        assert!(
            matches!(result, Err(Error::Application(_))),
            "not an application error: {result:?}"
        );
    }
    // The same on a deferred context, which reports on its own sink but never removes
    // itself for an application error.
    let mut dc = device.create_deferred_context().unwrap();
    let point = BindPoint::new(BindClass::ShaderResource(Stage::Pixel), 1);
    for result in [
        dc.update(r, 0, &[0; 4]),
        dc.command(SoftCommand::Fill { dst: r, value: 1 }),
        dc.command(SoftCommand::ClearView { view: v, value: 1 }),
        dc.bind(point, Some(h.any())),
        dc.begin_query(q),
        dc.end_query(q),
        dc.map_discard(r).map(|_| ()),
    ] {
        assert!(
            matches!(result, Err(Error::Application(_))),
            "not an application error on a deferred context: {result:?}"
        );
    }
    assert!(!dc.is_removed());
    assert_eq!(dc.finish().unwrap().stats().operations, 0);
    assert_eq!(device.destroy(h).err(), Some(expected), "destroy");
}

// ---------------------------------------------------------------------------------------
// R-E1: stale, forged, wrong-type, other-device and double-destroyed handles.
// ---------------------------------------------------------------------------------------

#[test]
fn r_e1_stale_handle_is_application_error() {
    let (device, mut ic, world) = setup();
    let r = device.create_resource(buffer(16)).unwrap();
    let keep = device.create_resource(buffer(16)).unwrap();
    device.destroy(r).unwrap();
    // Destroyed, not yet flushed: dead for the application already.
    let stale = app(AppError::StaleHandle);
    assert_eq!(device.object(r).err(), Some(stale));
    assert_eq!(ic.update(r, 0, &[1; 4]), Err(stale));
    assert_eq!(
        ic.command(&SoftCommand::Copy { dst: keep, src: r }),
        Err(stale)
    );
    assert_eq!(
        view_of(&device, r).err(),
        Some(app(AppError::MissingDependency))
    );
    ic.flush().unwrap();
    // Really destroyed: the slot is empty now.
    all_entry_points_refuse(&device, &mut ic, r, stale);
    assert_eq!(ic.update(r, 0, &[1; 4]), Err(stale));
    assert_eq!(device.destroy(r), Err(stale));
    // Nothing ran for the refused calls: `keep` was never written, no submit happened.
    assert_eq!(world.submits(), 0);
    assert!(world
        .read(device.object(keep).unwrap().allocation().unwrap())
        .unwrap()
        .iter()
        .all(|&b| b == 0));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_e1_stale_handle_after_slot_reuse_never_names_the_new_object() {
    let (device, mut ic, world) = setup();
    let old = device.create_resource(buffer(16)).unwrap();
    let old_id = device.object(old).unwrap().id;
    device.destroy(old).unwrap();
    ic.flush().unwrap();
    let new = cmdlist::soft::create_in_slot_of(&device, &mut ic, old.any(), || {
        device.create_resource(buffer(16)).unwrap()
    });
    // Same slot (the low 32 bits are device tag and slot), another life.
    assert_eq!(
        old.to_bits() as u32,
        new.to_bits() as u32,
        "the freed slot was not reused"
    );
    assert_ne!(old, new);
    let new_id = device.object(new).unwrap().id;
    assert_ne!(old_id, new_id);
    let stale = app(AppError::StaleHandle);
    assert_eq!(device.object(old).err(), Some(stale));
    assert_eq!(ic.update(old, 0, &[1; 16]), Err(stale));
    assert_eq!(device.destroy(old), Err(stale));
    assert_eq!(
        view_of(&device, old).err(),
        Some(app(AppError::MissingDependency))
    );
    // The new object is untouched by all of that.
    assert_eq!(device.object(new).unwrap().id, new_id);
    ic.update(new, 0, &[2; 16]).unwrap();
    // Many more lives of the same slot: every older handle stays dead.
    let mut handles = vec![old, new];
    for _ in 0..50 {
        device.destroy(*handles.last().unwrap()).unwrap();
        ic.flush().unwrap();
        handles.push(device.create_resource(buffer(16)).unwrap());
    }
    let current = *handles.last().unwrap();
    for &h in &handles[..handles.len() - 1] {
        assert_eq!(device.object(h).err(), Some(stale));
    }
    assert!(device.object(current).is_ok());
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_e1_forged_handle_is_application_error() {
    let (device, mut ic, world) = setup();
    let real = device.create_resource(buffer(16)).unwrap();
    let bits = real.to_bits();
    let index = bits as u32;
    let generation = (bits >> 32) as u32;
    let forged = |index: u32, generation: u32| -> Handle<Resource> {
        Handle::from_bits(((generation as u64) << 32) | index as u64).unwrap()
    };
    // A zero generation is not a handle at all.
    assert_eq!(Handle::<Resource>::from_bits(index as u64), None);
    // Right slot, wrong life (before and after).
    for g in [
        generation.wrapping_add(1),
        generation.wrapping_sub(1),
        u32::MAX,
        1,
    ] {
        if g == 0 || g == generation {
            continue;
        }
        all_entry_points_refuse(
            &device,
            &mut ic,
            forged(index, g),
            app(AppError::StaleHandle),
        );
        assert_eq!(
            device.object(forged(index, g)).err(),
            Some(app(AppError::StaleHandle))
        );
    }
    // Same device, slots never handed out: in an allocated page, and far past any page.
    let tag = index & 0xFF00_0000;
    for slot in [1, 31, 32, 1000, 5_000_000, 0x00FF_FFFF] {
        let h = forged(tag | slot, generation);
        assert_eq!(
            device.object(h).err(),
            Some(app(AppError::StaleHandle)),
            "slot {slot}"
        );
        all_entry_points_refuse(&device, &mut ic, h, app(AppError::StaleHandle));
    }
    // Random bits: an application error every time, never a panic, never an object.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let Some(h) = Handle::<Any>::from_bits(x) else {
            continue;
        };
        if h == real.any() {
            continue;
        }
        assert!(
            matches!(device.object(h), Err(Error::Application(_))),
            "{h:?}"
        );
        assert!(
            matches!(device.destroy(h), Err(Error::Application(_))),
            "{h:?}"
        );
    }
    // The real object survived all of it.
    assert!(device.object(real).is_ok());
    ic.update(real, 0, &[1; 16]).unwrap();
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// `Device::typed`, the checked way from an untyped handle to a typed one: the kind must
/// match and the object must be live.
#[test]
fn r_e1_typed_handle_needs_the_right_kind_and_a_live_object() {
    let (device, mut ic, world) = setup();
    let r = device.create_resource(buffer(16)).unwrap();
    let q = device.create_query(QueryKind::Event).unwrap();
    assert_eq!(device.typed::<Resource>(r.any()), Ok(r));
    assert_eq!(device.typed::<Query>(q.any()), Ok(q));
    assert_eq!(device.typed::<Any>(q.any()), Ok(q.any()));
    assert_eq!(
        device.typed::<Query>(r.any()),
        Err(app(AppError::WrongType))
    );
    assert_eq!(device.typed::<View>(r.any()), Err(app(AppError::WrongType)));
    device.destroy(r).unwrap();
    assert_eq!(
        device.typed::<Resource>(r.any()),
        Err(app(AppError::StaleHandle))
    );
    device.destroy(q).unwrap();
    ic.flush().unwrap();
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_e1_wrong_type_handle_is_application_error() {
    let (device, mut ic, world) = setup();
    let r = device.create_resource(buffer(16)).unwrap();
    let q = device.create_query(QueryKind::Event).unwrap();
    let v = view_of(&device, r).unwrap();
    let wrong = app(AppError::WrongType);
    assert_eq!(device.object(forge::<Query, _>(r)).err(), Some(wrong));
    assert_eq!(device.object(forge::<Resource, _>(q)).err(), Some(wrong));
    assert_eq!(device.object(forge::<View, _>(r)).err(), Some(wrong));
    assert_eq!(ic.end_query(forge::<Query, _>(r)), Err(wrong));
    assert_eq!(ic.begin_query(forge::<Query, _>(v)), Err(wrong));
    assert_eq!(ic.update(forge::<Resource, _>(q), 0, &[1]), Err(wrong));
    assert_eq!(ic.update(forge::<Resource, _>(v), 0, &[1]), Err(wrong));
    assert_eq!(
        ic.command(&SoftCommand::ClearView {
            view: forge(r),
            value: 1
        }),
        Err(wrong)
    );
    assert_eq!(
        view_of(&device, forge(q)).err(),
        Some(app(AppError::MissingDependency))
    );
    // A wrong-type destroy destroys nothing.
    assert_eq!(device.destroy(forge::<Query, _>(r)), Err(wrong));
    assert_eq!(device.destroy(forge::<View, _>(q)), Err(wrong));
    assert!(device.object(r).is_ok() && device.object(q).is_ok());
    ic.flush().unwrap();
    assert_eq!(ic.retire_stats().destroyed, 0);
    // The untyped handle names anything.
    assert_eq!(
        device.object(v.any()).unwrap().ty(),
        HandleType::ShaderResourceView
    );
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_e1_double_destroy_is_application_error() {
    let (device, mut ic, world) = setup();
    let r = device.create_resource(buffer(16)).unwrap();
    let q = device.create_query(QueryKind::Occlusion).unwrap();
    device.destroy(r).unwrap();
    // Before the flush the object is still pending.
    assert_eq!(device.destroy(r), Err(app(AppError::DoubleDestroy)));
    ic.flush().unwrap();
    // After it the handle names nothing at all.
    assert_eq!(device.destroy(r), Err(app(AppError::StaleHandle)));
    // Two threads destroying the same object at once: exactly one wins.
    let results: Vec<_> = thread::scope(|s| {
        let a = s.spawn(|| device.destroy(q));
        let b = s.spawn(|| device.destroy(q));
        vec![a.join().unwrap(), b.join().unwrap()]
    });
    assert_eq!(
        results.iter().filter(|r| r.is_ok()).count(),
        1,
        "{results:?}"
    );
    assert!(results.contains(&Err(app(AppError::DoubleDestroy))));
    ic.flush().unwrap();
    let trace = world.trace();
    assert_eq!(
        trace
            .iter()
            .filter(|e| e.hook == Hook::DestroyObject)
            .count(),
        2
    );
    ic.destroy_device().unwrap();
    // Destroyed once each: no double free.
    world.assert_clean();
}

#[test]
fn r_e1_other_device_handle_is_application_error() {
    let (d1, mut ic1, w1) = setup();
    let (d2, mut ic2, w2) = setup();
    let r1 = d1.create_resource(buffer(16)).unwrap();
    let r2 = d2.create_resource(buffer(16)).unwrap();
    let wrong = app(AppError::WrongDevice);
    assert_eq!(d2.object(r1).err(), Some(wrong));
    assert_eq!(d1.object(r2).err(), Some(wrong));
    assert_eq!(ic2.update(r1, 0, &[1; 16]), Err(wrong));
    assert_eq!(
        ic2.command(&SoftCommand::Copy { dst: r2, src: r1 }),
        Err(wrong)
    );
    assert_eq!(d2.destroy(r1), Err(wrong));
    assert_eq!(
        view_of(&d2, r1).err(),
        Some(app(AppError::MissingDependency))
    );
    all_entry_points_refuse(&d2, &mut ic2, r1, wrong);
    // r1 is still alive and well on its own device, and d2 touched nothing of it.
    assert!(d1.object(r1).is_ok());
    ic1.update(r1, 0, &[1; 16]).unwrap();
    ic2.flush().unwrap();
    assert_eq!(w2.submits(), 0);
    assert_eq!(ic2.retire_stats().destroyed, 0);
    ic1.destroy_device().unwrap();
    ic2.destroy_device().unwrap();
    w1.assert_clean();
    w2.assert_clean();
}

#[test]
fn r_e1_driver_errors_are_invalid_arg_not_application_errors() {
    // What the driver gets wrong (its caps, its CheckDeferredContextHandleSizes answer, a
    // handle type value) is E_INVALIDARG, never blamed on the application.
    assert_eq!(
        ThreadingCaps::COMMANDLISTS_BUILD_2.validate(),
        Err(Error::InvalidArg)
    );
    assert_eq!(HandleType::from_raw(20), Err(Error::InvalidArg));
    assert_eq!(
        HandleSizeTable::new([HandleSize {
            ty: HandleType::Resource,
            size: 0
        }]),
        Err(Error::InvalidArg)
    );
    assert_eq!(
        HandleSizeTable::new([HandleSize {
            ty: HandleType::Resource,
            size: HandleSizeTable::MAX_HANDLE_SIZE + 1
        }]),
        Err(Error::InvalidArg)
    );
    let grew = HandleSizeTable::from_two_polls(|out| match out {
        None => 1,
        Some(_) => 3,
    });
    assert_eq!(grew, Err(Error::InvalidArg));
    // The application's mistakes on the same device are Application errors.
    let (device, mut ic, world) = setup();
    let r = device.create_resource(buffer(16)).unwrap();
    let q = device.create_query(QueryKind::Event).unwrap();
    assert_eq!(ic.update(r, 10, &[1; 16]), Err(app(AppError::OutOfRange)));
    assert_eq!(
        device.create_view(
            HandleType::ShaderResourceView,
            ViewDesc {
                resource: r,
                first_byte: 0,
                byte_len: 0
            }
        ),
        Err(app(AppError::OutOfRange))
    );
    assert_eq!(
        device.create_view(
            HandleType::Resource,
            ViewDesc {
                resource: r,
                first_byte: 0,
                byte_len: 8
            }
        ),
        Err(app(AppError::OutOfRange))
    );
    assert_eq!(
        device.create_view(
            HandleType::ShaderResourceView,
            ViewDesc {
                resource: r,
                first_byte: 8,
                byte_len: 16
            }
        ),
        Err(app(AppError::OutOfRange))
    );
    assert_eq!(ic.query_signaled(q), Err(app(AppError::InvalidState)));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_e1_unlisted_cls_size_is_invalid_arg_not_application_error() {
    // The driver answers a context-local handle size it never listed (R-H4): its fault.
    let (device, mut ic, world) = soft::device(
        SoftConfig {
            unlisted_cls_size: Some(HandleType::Query),
            ..crate::common::native()
        },
        DeviceConfig::default(),
    )
    .unwrap();
    let q = device.create_query(QueryKind::Event).unwrap();
    let r = device.create_resource(buffer(16)).unwrap();
    let alloc = device.object(r).unwrap().allocation().unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    assert_eq!(dc.end_query(q), Err(Error::InvalidArg));
    assert_eq!(dc.begin_query(q), Err(Error::InvalidArg));
    // Reported on the context the call was made on (R-E2).
    assert_eq!(world.errors(), vec![(dc.id().into(), Error::InvalidArg); 2]);
    // Not an out-of-memory: the context is not removed, and records on.
    assert!(!dc.is_removed());
    dc.update(r, 0, &[5; 16]).unwrap();
    let list = dc.finish().unwrap();
    ic.execute_command_list(&list).unwrap();
    // The immediate context never asks for a context-local size.
    ic.end_query(q).unwrap();
    ic.flush().unwrap();
    assert_eq!(world.read(alloc).unwrap(), vec![5; 16]);
    assert_eq!(world.errors().len(), 2);
    drop((list, dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

// ---------------------------------------------------------------------------------------
// R-E2: errors go through set-error, on the context the call was made on.
// ---------------------------------------------------------------------------------------

#[test]
fn r_e2_errors_reach_set_error_on_the_immediate_context() {
    let (device, mut ic, world) = setup();
    let r = device.create_resource(buffer(16)).unwrap();
    assert_eq!(
        world.errors(),
        vec![],
        "a successful create reported an error"
    );
    device.destroy(r).unwrap();
    ic.flush().unwrap();
    assert_eq!(world.errors(), vec![]);

    let stale = app(AppError::StaleHandle);
    let mut expected = Vec::new();
    let mut check = |result: Error| {
        expected.push((ContextId::Immediate, result));
        assert_eq!(world.errors(), expected);
    };
    check(device.destroy(r).unwrap_err());
    check(ic.update(r, 0, &[1]).unwrap_err());
    check(view_of(&device, r).unwrap_err());
    check(
        device
            .create(&ObjectDesc::Resource(ResourceDesc {
                byte_size: 8,
                flags: ResourceFlags::PRIMARY,
                ..Default::default()
            }))
            .unwrap_err(),
    );
    check(ic.end_query(forge(r)).unwrap_err());
    check(device.destroy(forge::<Query, _>(r)).unwrap_err());
    assert_eq!(expected[0].1, stale);
    assert_eq!(expected[3].1, app(AppError::PrimaryMismatch));

    // A free-threaded create or destroy reports on the calling thread, for the IC's sink.
    world.clear_trace();
    let caller = thread::scope(|s| {
        s.spawn(|| {
            assert!(view_of(&device, r).is_err());
            assert!(device.destroy(r).is_err());
            thread::current().id()
        })
        .join()
        .unwrap()
    });
    let trace = world.trace();
    let reports: Vec<_> = trace.iter().filter(|e| e.hook == Hook::SetError).collect();
    assert_eq!(reports.len(), 2);
    assert!(reports.iter().all(|e| e.thread == caller));
    let errors = world.errors();
    assert_eq!(
        &errors[errors.len() - 2..],
        &[
            (ContextId::Immediate, app(AppError::MissingDependency)),
            (ContextId::Immediate, stale)
        ]
    );
    ic.destroy_device().unwrap();
    world.assert_clean();
}

// ---------------------------------------------------------------------------------------
// R-E1 under races: lookups from another thread while the IC destroys and reuses slots.
// ---------------------------------------------------------------------------------------

#[test]
fn r_e1_lookup_racing_destruction_is_ok_or_stale_never_a_panic() {
    let (device, mut ic, world) = setup();
    let done = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel::<(Handle<Resource>, u64)>();
    thread::scope(|s| {
        let device = &device;
        let done = &done;
        let reader = s.spawn(move || {
            let mut known: Vec<(Handle<Resource>, u64)> = Vec::new();
            let (mut ok, mut dead) = (0u64, 0u64);
            while !done.load(Ordering::Acquire) || ok + dead == 0 {
                known.extend(rx.try_iter());
                for &(h, id) in known.iter().rev().take(8) {
                    match device.object(h) {
                        // A handle never names another life of its slot.
                        Ok(o) => {
                            assert_eq!(o.id, id, "stale handle resolved to another object");
                            ok += 1;
                        }
                        Err(Error::Application(AppError::StaleHandle)) => dead += 1,
                        Err(e) => panic!("unexpected lookup error {e:?}"),
                    }
                }
            }
            (ok, dead)
        });
        for i in 0..400u32 {
            let h = device.create_resource(buffer(8)).unwrap();
            tx.send((h, device.object(h).unwrap().id)).unwrap();
            if i % 3 == 0 {
                ic.update(h, 0, &[i as u8; 8]).unwrap();
            }
            device.destroy(h).unwrap();
            ic.flush().unwrap();
            if i % 16 == 0 {
                world.complete_all();
            }
        }
        done.store(true, Ordering::Release);
        let (ok, dead) = reader.join().unwrap();
        assert!(ok + dead > 0);
    });
    assert_eq!(world.errors(), vec![]);
    world.complete_all();
    ic.destroy_device().unwrap();
    world.assert_clean();
}
