//! The two sides of the `retire` comparison, shared by the criterion bench `retire` and the
//! instruction-count bench `retire_ic`: one batch of `N` objects created (outside the
//! measured part), then destroyed and reclaimed (the measured part).

use std::hint::black_box;
use std::sync::atomic::Ordering;

use std::sync::Arc;

use cmdlist::soft::{self, SoftConfig, SoftDevice, SoftImmediate, SoftWorld};
use cmdlist::{AnyHandle, DeviceConfig, HandleType, ObjectDesc};
use crossbeam_epoch::{self as epoch, Atomic, Owned, Shared};

/// Objects destroyed per batch (one flush / one collection each).
pub const N: usize = 256;

/// The baseline's payload: the size and alignment of the registry entry cmdlist reclaims
/// (`Entry<SoftDriver>`: 256 bytes, aligned to 128 by its `CachePadded` IC half).
#[repr(align(128))]
#[allow(dead_code)] // written, never read: only its size and alignment matter
pub struct Payload {
    words: [u64; 32],
}
const _: () = assert!(core::mem::size_of::<Payload>() == 256);

/// cmdlist's side runs on a soft device with the trace off.
pub fn device() -> (SoftDevice, SoftImmediate, Arc<SoftWorld>) {
    let config = SoftConfig {
        trace: false,
        ..SoftConfig::default()
    };
    soft::device(config, DeviceConfig::default()).expect("device")
}

/// The objects destroyed: blend states (no kernel allocation, so the soft kernel's
/// allocation table stays out of the figure) described by `bytes`.
pub fn blend(bytes: &[u8; 32]) -> ObjectDesc<'_> {
    ObjectDesc::State {
        ty: HandleType::BlendState,
        desc: bytes,
    }
}

/// Creates `N` objects of `desc` into `handles`, under one outer pin (see "Where the frees
/// land" in `benches/retire.rs`).
pub fn create_batch(device: &SoftDevice, desc: &ObjectDesc<'_>, handles: &mut Vec<AnyHandle>) {
    let _outer = epoch::pin();
    handles.extend((0..N).map(|_| device.create(desc).expect("create")));
}

/// cmdlist's side: destroys every object of `handles`, then one flush reclaims them.
#[inline(never)]
pub fn destroy_batch(device: &SoftDevice, ic: &mut SoftImmediate, handles: &[AnyHandle]) {
    for &h in handles {
        device.destroy(black_box(h)).expect("destroy");
    }
    ic.flush().expect("flush");
}

/// Publishes a fresh payload in every slot, under one outer pin (as `create_batch`).
pub fn publish_batch(slots: &[Atomic<Payload>], fill: u64) {
    let _outer = epoch::pin();
    for slot in slots {
        let _guard = epoch::pin();
        slot.store(Owned::new(Payload { words: [fill; 32] }), Ordering::Release);
    }
}

/// The baseline: per slot `pin()`, swap to null, `defer_destroy`; then one `pin().flush()`
/// hands the garbage to the collector.
#[inline(never)]
pub fn defer_batch(slots: &[Atomic<Payload>]) {
    for slot in black_box(slots) {
        let guard = epoch::pin();
        let old = slot.swap(Shared::null(), Ordering::AcqRel, &guard);
        // SAFETY: `old` was just unlinked from the only place it is published, and only
        // this thread reclaims, so it is destroyed exactly once, after every pinned reader
        // is gone.
        unsafe { guard.defer_destroy(old) };
    }
    epoch::pin().flush();
}
