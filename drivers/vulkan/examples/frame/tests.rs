//! A short run of the job in each list mode (three frames: the warm-up and one steady
//! frame), and the full run against `docs/frame.png` in the replayed mode. Without a Vulkan
//! device each test prints why it was skipped, unless `CMDLIST_VULKAN_REQUIRED=1`, where it
//! fails.

use cmdlist::ListMode;

use super::shared::{FRAMES, WARMUP};
use super::{run, Options, Summary};

fn required() -> bool {
    std::env::var("CMDLIST_VULKAN_REQUIRED").is_ok_and(|v| v == "1")
}

/// One job at a time: a job's recycling rate depends on the GPU (lavapipe, on the same two
/// cores) finishing each frame before the next one's Finish, which a second job running
/// beside it can delay.
static ONE_JOB: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn job(mode: ListMode, frames: u32) -> Option<Summary> {
    let _alone = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("cmdlist-vulkan-frame-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let options = Options {
        out: dir.join(format!("{mode:?}.png")),
        mode,
        frames,
        replay: None,
    };
    let summary = run(&options).unwrap_or_else(|e| panic!("{mode:?}: the job failed: {e}"));
    assert!(
        summary.is_some() || !required(),
        "CMDLIST_VULKAN_REQUIRED=1 but no Vulkan device"
    );
    summary
}

#[test]
fn a_short_run_in_every_mode() {
    for mode in ListMode::ALL {
        let Some(summary) = job(mode, WARMUP + 1) else {
            return;
        };
        assert_eq!(summary.mode, mode);
        assert!(summary.screen_diff <= 1, "{summary:?}");
        // Driver-built lists: one vkCmdExecuteCommands per list executed.
        if mode == ListMode::DriverBuilt {
            assert!(summary.execute_commands > 0, "{summary:?}");
        } else {
            assert_eq!(summary.execute_commands, 0, "{summary:?}");
        }
    }
}

#[test]
fn the_full_run_matches_docs_frame_png() {
    let Some(summary) = job(ListMode::Replayed, FRAMES) else {
        return;
    };
    let (max, _) = summary
        .against_docs
        .expect("compared at the default frame count");
    assert!(max <= 1, "{summary:?}");
}
