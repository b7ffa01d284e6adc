//! Soak: sustained object churn. Two threads create and destroy objects while the immediate
//! context flushes, for `CMDLIST_SOAK_SECS` seconds (default 10): each thread may run ahead
//! of the immediate context by a few batches per flush, as threads paced by frames do (the
//! immediate context is the one thread that really destroys objects, R-D1: no design keeps
//! up with producers that outrun it forever). Resident memory must stay bounded
//! (reclamation keeps up with whatever the immediate context destroys), and every object's
//! driver data must be dropped by the time the device is (nothing of a device outlives it).
//!
//! Ignored by default (it runs for seconds, best in release):
//! `CMDLIST_SOAK_SECS=10 cargo test --release --test soak -- --ignored`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cmdlist::soft::{self, Gpu, SoftConfig};
use cmdlist::{DeviceConfig, HandleType, ObjectDesc, ResourceDesc};

/// Resident bytes of this process (Linux), or `None` where it cannot be read.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// Growth of resident memory allowed after the warm-up. Without reclamation keeping up, the
/// churn below grows it by tens of megabytes a second.
const MAX_GROWTH: u64 = 64 << 20;

/// Objects the churning threads may have destroyed beyond what the immediate context has
/// really destroyed.
const AHEAD: u64 = 1 << 16;

#[test]
#[ignore = "a soak: CMDLIST_SOAK_SECS=10 cargo test --release --test soak -- --ignored"]
fn r_d2_sustained_churn_reclaims_memory_and_drops_every_entry_with_the_device() {
    let secs: u64 = std::env::var("CMDLIST_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let run = Duration::from_secs(secs);
    let config = SoftConfig {
        gpu: Gpu::Immediate,
        trace: false,
        ..SoftConfig::from_env().unwrap()
    };
    let (device, mut ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
    let stop = AtomicBool::new(false);
    let churned = AtomicU64::new(0);
    let really_destroyed = AtomicU64::new(0);
    let start = Instant::now();
    let mut baseline = None;
    let mut peak_after_warmup = 0;
    let mut peak_waiting = 0;
    let mut flushes = 0u64;
    std::thread::scope(|s| {
        for t in 0..2u8 {
            let (device, stop, churned, really_destroyed) =
                (&device, &stop, &churned, &really_destroyed);
            s.spawn(move || {
                let blend = [t; 16];
                let state = ObjectDesc::State {
                    ty: HandleType::BlendState,
                    desc: &blend,
                };
                let mut handles = Vec::with_capacity(64);
                while !stop.load(Ordering::Relaxed) {
                    let ahead = churned.load(Ordering::Relaxed)
                        - really_destroyed
                            .load(Ordering::Relaxed)
                            .min(churned.load(Ordering::Relaxed));
                    if ahead > AHEAD {
                        std::thread::yield_now();
                        continue;
                    }
                    for i in 0..64 {
                        let h = if i % 8 == 0 {
                            device
                                .create_resource(ResourceDesc {
                                    byte_size: 64,
                                    ..Default::default()
                                })
                                .unwrap()
                                .any()
                        } else {
                            device.create(&state).unwrap()
                        };
                        handles.push(h);
                    }
                    for h in handles.drain(..) {
                        device.destroy(h).unwrap();
                    }
                    churned.fetch_add(64, Ordering::Relaxed);
                }
            });
        }
        let mut next_sample = start;
        while start.elapsed() < run {
            ic.flush().unwrap();
            flushes += 1;
            really_destroyed.store(ic.retire_stats().destroyed, Ordering::Relaxed);
            if flushes % 16 == 0 {
                ic.end_frame().unwrap();
            }
            if Instant::now() >= next_sample {
                next_sample += Duration::from_millis(100);
                peak_waiting = peak_waiting.max(ic.retire_stats().waiting_reclamation);
                if let Some(rss) = resident_bytes() {
                    if start.elapsed() >= run / 4 {
                        let base = *baseline.get_or_insert(rss);
                        peak_after_warmup = peak_after_warmup.max(rss);
                        assert!(
                            rss <= base + MAX_GROWTH,
                            "resident memory grew from {base} to {rss} bytes after {:?} \
                             ({} objects churned, {} entries waiting for reclamation)",
                            start.elapsed(),
                            churned.load(Ordering::Relaxed),
                            ic.retire_stats().waiting_reclamation,
                        );
                    }
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
    });
    let churned = churned.load(Ordering::Relaxed);
    eprintln!(
        "soak: {churned} objects churned in {run:?} over {flushes} flushes; resident after \
         warm-up {baseline:?}, peak {peak_after_warmup}; at most {peak_waiting} entries \
         waiting for reclamation"
    );
    assert!(churned > 0);
    ic.destroy_device().unwrap();
    world.assert_clean();
    drop(ic);
    assert!(world.soft_objects_alive() <= 2 * churned as usize);
    drop(device);
    assert_eq!(
        world.soft_objects_alive(),
        0,
        "object data still alive after the device was dropped"
    );
}
