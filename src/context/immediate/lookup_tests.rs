//! The immediate context's lookup cache (`Registry::ic_live`): a handle found before is
//! answered without a search, and never after its object was really destroyed.

use crate::soft::null::{null_device, CopyCommand};
use crate::{AppError, DeviceConfig, Error, ResourceDesc};

/// A handle whose object was destroyed, freed, and whose slot a new object took is stale
/// on the immediate context, though it was found (and cached) there before; the new
/// object's handle is found (R-E1, R-D1).
#[test]
fn r_e1_a_handle_cached_then_freed_and_its_slot_reused_is_stale() {
    let (device, mut ic) = null_device(DeviceConfig::default()).expect("null device");
    let desc = ResourceDesc {
        byte_size: 64,
        ..Default::default()
    };
    let keep = device.create_resource(desc).expect("kept");
    let old = device.create_resource(desc).expect("old");
    ic.command(&CopyCommand {
        dst: keep,
        src: old,
    })
    .expect("found, cached");
    device.destroy(old).expect("destroy");
    // Destroyed, not freed yet: refused from the cache too.
    assert_eq!(
        ic.command(&CopyCommand {
            dst: keep,
            src: old
        }),
        Err(Error::Application(AppError::StaleHandle))
    );
    // Submitted, then freed: its slot goes back to the free stack after the CPU epoch. The
    // epoch is the process's, so another test's pinned thread can hold it back a while:
    // the test waits for the reclamation (bounded) instead of counting flushes.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        ic.flush().expect("flush");
        ic.trim();
        if ic.retire_stats().waiting_reclamation == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the CPU epoch moved on within 30 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let new = device.create_resource(desc).expect("new");
    assert_eq!(new.slot(), old.slot(), "the slot is reused");
    assert_eq!(
        ic.command(&CopyCommand {
            dst: keep,
            src: old
        }),
        Err(Error::Application(AppError::StaleHandle)),
        "the old handle names nothing"
    );
    ic.command(&CopyCommand {
        dst: keep,
        src: new,
    })
    .expect("the new object is found");
    ic.destroy_device().expect("destroy device");
    assert_eq!(device.kernel().errors(), 2, "the two refusals");
}

/// An object bound on the immediate context and destroyed is found for its unbind through
/// the lookup cache (`Registry::ic_held`), counted by its binding until then
/// (`IcSide::bound`, read by the reclaimer through `Entry::ic_side_ref`), and freed once
/// unbound (R-D4).
#[test]
fn r_d4_a_bound_object_destroyed_is_freed_once_unbound() {
    use crate::{BindClass, BindPoint, Stage};
    let (device, mut ic) = null_device(DeviceConfig::default()).expect("null device");
    let desc = ResourceDesc {
        byte_size: 64,
        ..Default::default()
    };
    let point = BindPoint::new(BindClass::ConstantBuffer(Stage::Pixel), 0);
    let bound = device.create_resource(desc).expect("bound");
    ic.bind(point, Some(bound.any())).expect("bind");
    device.destroy(bound).expect("destroy");
    for _ in 0..4 {
        ic.flush().expect("flush");
    }
    assert_eq!(ic.retire_stats().destroyed, 0, "kept by its binding");
    ic.bind(point, None).expect("unbind");
    for _ in 0..4 {
        ic.flush().expect("flush");
    }
    assert_eq!(ic.retire_stats().destroyed, 1, "freed once unbound");
    ic.destroy_device().expect("destroy device");
}
