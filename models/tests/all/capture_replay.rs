//! The capture replayer's interpreter (`cmdlist_models::capture_replay`) on stable: a real
//! capture in each list mode, replayed whole in each, cut at many points and with bytes
//! flipped; the committed seeds; random records made whole.

use cmdlist::ListMode;
use cmdlist_models::capture_replay::{frames_of, run, sample_capture};

use crate::common::XorShift;

/// `mode`'s byte, then `bytes`: an input of the target.
fn input(mode: usize, bytes: &[u8]) -> Vec<u8> {
    let mut input = vec![mode as u8];
    input.extend_from_slice(bytes);
    input
}

#[test]
fn a_real_capture_replays_in_every_mode_cut_or_flipped() {
    for made_in in ListMode::ALL {
        let capture = sample_capture(made_in);
        // Whole, it replays every record in every mode.
        for replayed_in in ListMode::ALL {
            let config = cmdlist::soft::SoftConfig {
                gpu: cmdlist::soft::Gpu::Immediate,
                command_lists: replayed_in.has_driver_lists(),
                driver_built: replayed_in == ListMode::DriverBuilt,
                ..cmdlist::soft::SoftConfig::default()
            };
            let (device, mut ic, _world) =
                cmdlist::soft::device(config, cmdlist::DeviceConfig::default()).unwrap();
            let report = cmdlist::capture::replay(&capture, &device, &mut ic)
                .unwrap_or_else(|e| panic!("{made_in:?} -> {replayed_in:?}: {e}"));
            assert_eq!(report.tail, None);
            assert!(report.records >= 30, "{}", report.records);
        }
        for mode in 0..ListMode::ALL.len() {
            run(&input(mode, &capture));
        }
        let step = (capture.len() / 61).max(1);
        for cut in (0..capture.len()).step_by(step) {
            run(&input(cut, &capture[..cut]));
        }
        let mut rng = XorShift(0x0DD_C0FFEE ^ capture.len() as u64);
        for _ in 0..64 {
            let mut bad = capture.clone();
            let at = rng.next() as usize % bad.len();
            bad[at] ^= (rng.next() as u8) | 1;
            run(&input(at, &bad));
        }
    }
}

#[test]
fn random_records_made_whole_replay_or_stop_at_a_named_record() {
    let mut rng = XorShift(0xCA9_7E11_5EED);
    for _ in 0..400 {
        let len = rng.next() as usize % 200;
        run(&rng.bytes(len));
    }
    // Records cut from a real capture's payloads, framed whole again: deeper than random.
    let capture = sample_capture(ListMode::Replayed);
    for _ in 0..200 {
        let at = rng.next() as usize % capture.len();
        let len = rng.next() as usize % 300;
        let bytes = &capture[at..(at + len).min(capture.len())];
        let _ = frames_of(bytes);
        run(&input(at, bytes));
    }
}

#[test]
fn committed_seeds_replay_or_stop_at_a_named_record() {
    let inputs = crate::common::run_committed_fuzz_inputs("capture_replay", run);
    assert!(inputs >= 3, "{inputs} committed inputs");
}

/// Writes the seeds (`cargo test -p cmdlist-models -- --ignored write_capture_replay_seeds`).
#[test]
#[ignore]
fn write_capture_replay_seeds() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/seeds/capture_replay");
    std::fs::create_dir_all(dir).unwrap();
    for (i, mode) in ListMode::ALL.into_iter().enumerate() {
        std::fs::write(
            format!("{dir}/capture-{i}"),
            input(i, &sample_capture(mode)),
        )
        .unwrap();
    }
}
