//! The handle-lifecycle model test (`cmdlist_models::handle_lifecycle`) on stable: the
//! cargo-fuzz target's interpreter over random inputs from a fixed-seed PRNG, plus
//! hand-written regression sequences. A failure panics with the step and both outcomes,
//! after printing the failing input's steps, ready to paste into a regression test that
//! calls `run` (prefix each with `Step::`).

use std::time::Instant;

use cmdlist_models::handle_lifecycle::{run, run_bytes, steps_from_bytes, Step};

use crate::common::XorShift;

/// Random inputs: 2000 (about 140,000 steps) take about a second in a debug build; the
/// fuzzer digs deeper.
const INPUTS: usize = 2000;

#[test]
fn r_d1_r_e1_handle_lifecycle_random_inputs_match_model() {
    let start = Instant::now();
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut total = 0;
    for n in 0..INPUTS {
        // Mostly short inputs, some long ones (about 8 bytes per step).
        let len = match rng.next() % 4 {
            0 => 16 + rng.next() as usize % 48,
            1 | 2 => 64 + rng.next() as usize % 448,
            _ => 512 + rng.next() as usize % 1536,
        };
        let data = rng.bytes(len);
        let mut steps = steps_from_bytes(&data);
        // `DropDevice` ends a run, and about one step in thirty is one: keep it in a quarter
        // of the inputs only, so that the others run long (every run ends with the device
        // destroyed and checked anyway).
        if n % 4 != 0 {
            steps.retain(|s| *s != Step::DropDevice);
        }
        total += steps.len();
        let result = std::panic::catch_unwind(|| run(&steps));
        if let Err(panic) = result {
            eprintln!("input {n} failed; its steps: {steps:?}");
            std::panic::resume_unwind(panic);
        }
    }
    eprintln!("{INPUTS} inputs, {total} steps in {:?}", start.elapsed());
}

/// Destroy, flush (the slot is freed), create again (the slot is reused with a new
/// generation): the old handle must be stale everywhere, never the new object.
#[test]
fn r_e1_reused_slot_old_handle_is_stale() {
    run(&[
        Step::CreateResource {
            size: 16,
            view: false,
            shared: false,
        },
        Step::Update {
            pick: 0,
            offset: 0,
            len: 16,
            byte: 7,
        },
        Step::Destroy {
            pick: 0,
            elsewhere: true,
        },
        Step::Flush,
        Step::CreateResource {
            size: 16,
            view: false,
            shared: false,
        },
        Step::LookupStale { pick: 0 },
        Step::Update {
            pick: 0,
            offset: 0,
            len: 4,
            byte: 1,
        },
        Step::Destroy {
            pick: 0,
            elsewhere: true,
        },
        Step::DestroyTwice {
            pick: 0,
            elsewhere: true,
        },
        Step::Lookup { pick: 0 },
        Step::Copy { dst: 1, src: 0 },
        Step::Copy { dst: 0, src: 1 },
        Step::Update {
            pick: 1,
            offset: 4,
            len: 4,
            byte: 9,
        },
        Step::Flush,
        Step::CompleteAll,
        Step::Flush,
        Step::DropDevice,
    ]);
}

/// The slot really is reused by the second create (otherwise the test above proves less).
#[test]
fn reused_slot_gets_a_new_generation() {
    use cmdlist::soft::{self, SoftConfig};
    use cmdlist::{DeviceConfig, ResourceDesc};
    let (device, mut ic, world) =
        soft::device(SoftConfig::from_env().unwrap(), DeviceConfig::default()).unwrap();
    let desc = ResourceDesc {
        byte_size: 8,
        ..Default::default()
    };
    let a = device.create_resource(desc).unwrap();
    device.destroy(a).unwrap();
    ic.flush().unwrap();
    let b = cmdlist::soft::create_in_slot_of(&device, &mut ic, a.any(), || {
        device.create_resource(desc).unwrap()
    });
    assert_eq!(
        a.to_bits() as u32,
        b.to_bits() as u32,
        "same device tag and slot"
    );
    assert_ne!(a.to_bits() >> 32, b.to_bits() >> 32, "new generation");
    assert!(device.object(a).is_err());
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// A destroyed resource with a live view stays allocated (and writable through the view)
/// until the view is really destroyed (R-H3, R-D1); then it goes with it.
#[test]
fn r_d1_destroyed_resource_with_live_view_waits_for_the_view() {
    run(&[
        Step::CreateResource {
            size: 32,
            view: true,
            shared: false,
        },
        Step::Bind { pick: 1, point: 0 },
        Step::Destroy {
            pick: 0,
            elsewhere: true,
        },
        Step::Flush,
        Step::CompleteAll,
        Step::Flush,
        Step::ClearView { pick: 1, byte: 5 },
        Step::Update {
            pick: 0,
            offset: 0,
            len: 1,
            byte: 1,
        },
        Step::SyncDestroy { pick: 0 },
        Step::Destroy {
            pick: 1,
            elsewhere: true,
        },
        Step::Flush,
        Step::LookupStale { pick: 0 },
        Step::CompleteAll,
        Step::Flush,
        Step::ClearState,
        Step::Flush,
    ]);
}

/// Destroy while the open buffer and then the GPU still use the memory (R-D1, R-D4), with
/// views of several types and an empty-buffer flush (R-D2).
#[test]
fn r_d4_destroy_while_gpu_runs_then_heavy_pattern() {
    run(&[
        Step::CreateResource {
            size: 64,
            view: false,
            shared: true,
        },
        Step::CreateResource {
            size: 8,
            view: false,
            shared: false,
        },
        Step::CreateView {
            pick: 0,
            ty: 1,
            first: 8,
            len: 16,
        },
        Step::CreateView {
            pick: 0,
            ty: 3,
            first: 60,
            len: 8,
        },
        Step::CreateView {
            pick: 0,
            ty: 250,
            first: 0,
            len: 8,
        },
        Step::Fill { pick: 0, byte: 3 },
        Step::Copy { dst: 1, src: 0 },
        Step::ClearView { pick: 2, byte: 4 },
        Step::Destroy {
            pick: 2,
            elsewhere: true,
        },
        Step::Destroy {
            pick: 1,
            elsewhere: true,
        },
        Step::Flush,
        Step::Flush,
        Step::CompleteFence { ahead: 0 },
        Step::DestroyRace { pick: 0 },
        Step::Flush,
        Step::SyncDestroy { pick: 1 },
        Step::LookupStale { pick: 1 },
    ]);
}

/// Forged, wrong-type and other-device handles on every path (R-E1).
#[test]
fn r_e1_forged_wrong_type_and_other_device_handles() {
    run(&[
        Step::LookupForged {
            pick: 0,
            xor: 0x1234_5678_0000_0001,
        },
        Step::LookupOtherDevice { pick: 0 },
        Step::CreateResource {
            size: 4,
            view: true,
            shared: false,
        },
        Step::CreateQuery { kind: 0 },
        Step::LookupWrongType { pick: 0 },
        Step::LookupWrongType { pick: 1 },
        Step::LookupWrongType { pick: 2 },
        Step::LookupForged { pick: 0, xor: 1 },
        Step::LookupForged {
            pick: 0,
            xor: 1 << 32,
        },
        Step::LookupForged {
            pick: 0,
            xor: 1 << 24,
        },
        Step::LookupForged { pick: 0, xor: 0 },
        Step::DestroyForged {
            pick: 1,
            xor: 1 << 33,
        },
        Step::DestroyForged { pick: 1, xor: 0 },
        Step::LookupOtherDevice { pick: 1 },
        Step::LookupOtherDevice { pick: 2 },
        Step::PollQuery { pick: 2 },
        Step::EndQuery { pick: 2 },
        Step::PollQuery { pick: 2 },
        Step::CompleteAll,
        Step::PollQuery { pick: 2 },
        Step::CreateResource {
            size: 0,
            view: true,
            shared: false,
        },
        Step::Update {
            pick: 3,
            offset: 0,
            len: 0,
            byte: 0,
        },
        Step::Copy { dst: 3, src: 0 },
        Step::DropDevice,
    ]);
}

/// Primaries (R-P1): refused by the free-threaded paths, destroyed synchronously.
#[test]
fn r_p1_primaries_are_destroyed_synchronously() {
    run(&[
        Step::CreatePrimary {
            size: 16,
            via_device: true,
        },
        Step::CreatePrimary {
            size: 16,
            via_device: false,
        },
        Step::Destroy {
            pick: 0,
            elsewhere: true,
        },
        Step::Update {
            pick: 0,
            offset: 0,
            len: 16,
            byte: 2,
        },
        Step::DestroyPrimary { pick: 0 },
        Step::DestroyPrimary { pick: 0 },
        Step::CreatePrimary {
            size: 16,
            via_device: false,
        },
        Step::CreateView {
            pick: 1,
            ty: 0,
            first: 0,
            len: 16,
        },
        Step::DestroyPrimary { pick: 1 },
        Step::ClearView { pick: 2, byte: 1 },
        Step::Destroy {
            pick: 2,
            elsewhere: true,
        },
        Step::Flush,
        Step::DestroyPrimary { pick: 2 },
    ]);
}

/// Under `Clock::Completed` the kernel does not keep memory alive while the GPU uses it,
/// so `destroy_primary`, which must deallocate inside the call (R-P1), first waits for the
/// GPU to finish the buffers that use the primary (R-D4). Found by the fuzzer on an earlier
/// engine, which deallocated at once.
#[test]
fn r_p1_r_d4_destroy_primary_waits_for_the_gpu_under_the_completed_clock() {
    use cmdlist::soft::{self, SoftConfig};
    use cmdlist::{Clock, DeviceConfig, ResourceDesc};
    let config = DeviceConfig::default().with_retire_clock(Clock::Completed);
    let (_device, mut ic, world) = soft::device(SoftConfig::from_env().unwrap(), config).unwrap();
    let primary = ic
        .create_primary(ResourceDesc {
            byte_size: 16,
            ..Default::default()
        })
        .unwrap();
    ic.update(primary, 0, &[1; 16]).unwrap();
    // Submits the buffer that writes the primary (R-D1), waits for the GPU to finish it
    // (R-D4), then deallocates it inside the call (R-P1).
    ic.destroy_primary(primary).unwrap();
    assert!(
        world.completed() >= 1,
        "the GPU finished the buffer that wrote the primary"
    );
    world.assert_no_violations();
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// Every committed seed of the target (`fuzz/seeds/handle_lifecycle/`) runs clean through
/// the interpreter.
#[test]
fn r_d1_r_e1_committed_seeds_run_clean() {
    let inputs = crate::common::run_committed_fuzz_inputs("handle_lifecycle", run_bytes);
    assert!(inputs > 300, "{inputs} inputs");
}

/// Renames (R-M5) while the GPU is behind: the model's pool takes the first discards' new
/// allocations, reaches the device's limit (3 waiting of one size), then predicts the
/// copy; once the GPU is done, a rename takes the pool's oldest again.
#[test]
fn r_m5_renames_up_to_the_limit_then_copies() {
    let mut steps = vec![
        Step::CreateResource {
            size: 16,
            view: false,
            shared: false,
        },
        Step::CreateResource {
            size: 16,
            view: false,
            shared: false,
        },
    ];
    for byte in 1..=6 {
        steps.extend([
            Step::MapDiscard {
                pick: 0,
                len: 16,
                byte,
            },
            Step::Unmap { pick: 0 },
            Step::Copy { dst: 1, src: 0 },
            Step::Flush,
        ]);
    }
    steps.extend([
        Step::CompleteAll,
        Step::Flush,
        Step::MapDiscard {
            pick: 0,
            len: 16,
            byte: 7,
        },
        Step::Unmap { pick: 0 },
        Step::Flush,
    ]);
    run(&steps);
}

/// A resource and a view, each bound and then destroyed by the application: a fill through
/// each binding still writes it (R-D4), across a flush; once unbound and flushed, both go.
#[test]
fn r_d4_fill_bound_reaches_destroyed_objects_through_their_bindings() {
    run(&[
        Step::CreateResource {
            size: 32,
            view: true,
            shared: false,
        },
        // The resource at point 2 (a render target), its view at point 0.
        Step::Bind { pick: 0, point: 2 },
        Step::Bind { pick: 1, point: 0 },
        Step::Destroy {
            pick: 1,
            elsewhere: false,
        },
        Step::Destroy {
            pick: 0,
            elsewhere: true,
        },
        Step::FillBound { point: 2, byte: 5 },
        Step::Flush,
        Step::CompleteAll,
        Step::FillBound { point: 0, byte: 6 },
        Step::Flush,
        Step::Unbind { point: 0 },
        Step::Unbind { point: 2 },
        Step::Flush,
        Step::CompleteAll,
        Step::Flush,
        Step::Flush,
    ]);
}
