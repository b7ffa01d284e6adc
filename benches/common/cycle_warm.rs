//! The warm cycle the cycle benches count (`cycle_ic`, `recycle_edge_ic`): a null device
//! warmed as the criterion bench `recycle` warms it, and the checks of what the measured cycle
//! did.

use cmdlist::soft::null::{copy_of, null_device_in, CopyCommand, NullDriver, NullKernel};
use cmdlist::{DeferredContext, DeviceConfig, ImmediateContext, ListMode};

use crate::{cycle, ic};

/// A warm context, its immediate context and the copy it records.
pub struct Warm {
    pub dc: DeferredContext<NullDriver, NullKernel>,
    pub ic: ImmediateContext<NullDriver, NullKernel>,
    pub copy: CopyCommand,
    recycle: bool,
    /// Amortised processing performed before the measured cycle.
    amortized: u64,
}

/// A null device with recycling on or off, in list mode `mode`, warmed as the criterion
/// bench warms it (boxed: the measured function moves a pointer, not the contexts).
pub fn warm((mode, recycle): (ListMode, bool)) -> Box<Warm> {
    ic::prepared(move || {
        let (device, mut ic) =
            null_device_in(mode, DeviceConfig::default().with_recycle(recycle)).unwrap();
        assert_eq!(device.list_mode(), mode);
        let copy = copy_of(&device);
        let mut dc = device.create_deferred_context().expect("dc");
        cycle::warm(&mut dc, &mut ic, copy, recycle);
        ic.end_frame().expect("end frame");
        for _ in 0..2 {
            cycle::cycle(&mut dc, &mut ic, copy);
        }
        let amortized = ic.amortized_count();
        Box::new(Warm {
            dc,
            ic,
            copy,
            recycle,
            amortized,
        })
    })
}

impl Warm {
    /// Whether the device recycles lists.
    #[allow(dead_code)] // recycle_edge_ic's, not cycle_ic's
    pub fn recycles(&self) -> bool {
        self.recycle
    }
}

/// Checks what the measured cycle did, then destroys the device.
pub fn check(w: Box<Warm>) {
    let Warm {
        dc,
        mut ic,
        recycle,
        amortized,
        ..
    } = *w;
    assert_eq!(
        ic.amortized_count(),
        amortized,
        "the measured flush performed amortised processing: the setup stalled (rerun)"
    );
    let stats = dc.stats();
    let cycles = cycle::WARM as u64 + 3;
    if recycle {
        assert_eq!(
            (stats.created, stats.recycled),
            (1, cycles - 1),
            "{stats:?}"
        );
    } else {
        assert_eq!((stats.created, stats.recycled), (cycles, 0), "{stats:?}");
    }
    drop(dc);
    ic.destroy_device().expect("destroy device");
}
