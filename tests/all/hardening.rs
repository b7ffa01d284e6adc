//! Cases an embedder's own checks found: bad input refused as error values before any hook,
//! a kernel whose fence misbehaves, amortised processing never twice back to back.

use cmdlist::soft::Gpu;

use crate::common::{buffer, setup};

/// R-A1: update, flush (performs it), update, end of frame: the frame had its performance,
/// so the end of the frame must not perform it again without a submit between.
#[test]
fn r_a1_end_frame_never_performs_twice_back_to_back() {
    let (device, mut ic, world) = setup(Gpu::Immediate, true, cmdlist::Clock::Completed);
    let r = device.create_resource(buffer(16)).unwrap();
    ic.update(r, 0, &[1; 4]).unwrap();
    ic.flush().unwrap();
    let after_flush = world.amortized_calls();
    assert_eq!(after_flush, 1, "the first submit performs it");
    ic.update(r, 4, &[2; 4]).unwrap();
    ic.end_frame().unwrap();
    assert_eq!(
        world.amortized_calls(),
        after_flush,
        "performed twice back to back without a submit between"
    );
    // A new frame's first submit performs it; a second submit too soon is left due, and
    // the frame, which had its performance, leaves it to the next.
    ic.update(r, 8, &[3; 4]).unwrap();
    ic.flush().unwrap();
    assert_eq!(world.amortized_calls(), after_flush + 1);
    ic.update(r, 8, &[4; 4]).unwrap();
    ic.flush().unwrap();
    ic.end_frame().unwrap();
    assert_eq!(world.amortized_calls(), after_flush + 1);
    // A frame without a submit of its own: its end pumps what was due (never starved).
    ic.end_frame().unwrap();
    assert_eq!(world.amortized_calls(), after_flush + 2);
    // Operations but nothing submitted since: not again.
    ic.update(r, 12, &[5; 4]).unwrap();
    ic.end_frame().unwrap();
    assert_eq!(world.amortized_calls(), after_flush + 2);
    assert_eq!(ic.amortized_count(), world.amortized_calls());
    ic.destroy_device().unwrap();
    world.assert_clean(true);
}
