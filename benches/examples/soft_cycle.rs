//! The `recycle` bench's soft cycle (`cycle_1cmd/recycled_soft`) counted in instructions:
//! 1,000 warm cycles, then `N` more (the first argument, 1,000 by default) in `measured`.
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

use std::hint::black_box;

use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig};
use cmdlist::{DeferredContext, DeviceConfig, Driver, ImmediateContext, Kernel, ResourceDesc};

/// The bench's cycle: a command recorded, Finish, the execute, the flush.
#[inline(never)]
fn cycle<D: Driver, K: Kernel>(
    dc: &mut DeferredContext<D, K>,
    ic: &mut ImmediateContext<D, K>,
    command: D::Command,
) {
    dc.command(black_box(command)).expect("record");
    let list = dc.finish().expect("finish");
    ic.execute_command_list(black_box(&list)).expect("execute");
    drop(list);
    ic.flush().expect("flush");
}

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
    for _ in 0..1000 {
        cycle(&mut dc, &mut ic, copy);
    }
    assert_eq!(dc.stats().created, 1, "one list, recycled from then on");
    measured(&mut dc, &mut ic, copy, n);
    assert_eq!(dc.stats().recycled as usize, 999 + n);
    drop(dc);
    ic.destroy_device().expect("destroy device");
    world.assert_clean();
}
