//! The `recycle` bench's soft cycle (`cycle_1cmd/recycled_soft`, the bench's own `cycle` and
//! `warm` from `common/cycle.rs`) counted in instructions: 1,000 warm cycles, then `N` more (the first argument, 1,000 by default) in `measured`.
//! Run under callgrind twice, with 1,000 and 2,000: the difference of the totals over 1,000
//! is the instructions a cycle, free of the setup (BENCHMARKS.md, `### The soft driver's
//! cycle, bisected`):
//!
//! ```sh
//! cargo build --release -p cmdlist-benches --example soft_cycle
//! for n in 1000 2000; do
//!     valgrind --tool=callgrind --callgrind-out-file=target/soft_cycle.$n \
//!         target/release/examples/soft_cycle $n
//! done
//! grep '^summary:' target/soft_cycle.1000 target/soft_cycle.2000
//! ```

// The bench's `floor` (the cycle's baseline) is not run here.
#[allow(dead_code)]
#[path = "../common/cycle.rs"]
mod cycle;

use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig};
use cmdlist::{DeferredContext, DeviceConfig, Driver, ImmediateContext, Kernel, ResourceDesc};

use cycle::{cycle, warm};

/// The counted cycles (`callgrind --toggle-collect='*measured*'` counts them alone).
#[inline(never)]
fn measured<D: Driver, K: Kernel>(
    dc: &mut DeferredContext<D, K>,
    ic: &mut ImmediateContext<D, K>,
    command: D::Command,
    n: usize,
) where
    D::Command: Copy,
{
    for _ in 0..n {
        cycle(dc, ic, command);
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(1000, |s| s.parse().expect("a count of cycles"));
    let config = SoftConfig {
        trace: false,
        gpu: Gpu::Immediate,
        ..SoftConfig::default()
    };
    let device_config = DeviceConfig::default().with_recycle(true);
    let (device, mut ic, world) = soft::device(config, device_config).expect("soft device");
    let desc = ResourceDesc {
        byte_size: 256,
        ..Default::default()
    };
    let copy = SoftCommand::Copy {
        dst: device.create_resource(desc).expect("dst"),
        src: device.create_resource(desc).expect("src"),
    };
    let mut dc = device.create_deferred_context().expect("dc");
    // The bench's warm-up, which checks that every list after the first is recycled.
    warm(&mut dc, &mut ic, copy, true);
    measured(&mut dc, &mut ic, copy, n);
    assert_eq!(dc.stats().recycled as usize, cycle::WARM - 1 + n);
    drop(dc);
    ic.destroy_device().expect("destroy device");
    world.assert_clean();
}
