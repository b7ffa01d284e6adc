//! Memory proportional to content and high-watermark trimming (R-R1, R-A1, R-A2).

use crate::common::native;
use cmdlist::handle::Resource;
use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig, SoftDeferredContext, SoftImmediate};
use cmdlist::{DeviceConfig, Handle, ResourceDesc};

fn setup() -> (
    soft::SoftDevice,
    SoftImmediate,
    std::sync::Arc<soft::SoftWorld>,
    Handle<Resource>,
    Handle<Resource>,
) {
    let config = SoftConfig {
        trace: false,
        gpu: Gpu::Immediate,
        ..native()
    };
    let (device, ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
    let desc = ResourceDesc {
        byte_size: 64,
        ..Default::default()
    };
    let src = device.create_resource(desc).unwrap();
    let dst = device.create_resource(desc).unwrap();
    (device, ic, world, src, dst)
}

fn one_frame(
    dc: &mut SoftDeferredContext,
    ic: &mut SoftImmediate,
    src: Handle<Resource>,
    dst: Handle<Resource>,
) {
    dc.command(SoftCommand::Copy { dst, src }).unwrap();
    let list = dc.finish().unwrap();
    ic.execute_command_list(&list).unwrap();
    drop(list);
    ic.flush().unwrap();
    ic.end_frame().unwrap();
}

#[test]
fn r_r1_one_command_list_keeps_at_most_512_bytes() {
    let (device, mut ic, world, src, dst) = setup();
    let mut dc = device.create_deferred_context().unwrap();
    for _ in 0..3 {
        dc.command(SoftCommand::Copy { dst, src }).unwrap();
        let list = dc.finish().unwrap();
        let stats = list.stats();
        println!("a one-copy list keeps {} bytes", stats.retained_bytes);
        assert_eq!(stats.operations, 1);
        assert!(
            stats.retained_bytes <= 512,
            "a one-copy list keeps {} bytes",
            stats.retained_bytes
        );
        ic.execute_command_list(&list).unwrap();
        drop(list);
        ic.flush().unwrap();
    }
    drop(dc);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

#[test]
fn r_a1_retained_memory_falls_back_after_a_burst() {
    let (device, mut ic, world, src, dst) = setup();
    let mut dc = device.create_deferred_context().unwrap();
    for _ in 0..20 {
        one_frame(&mut dc, &mut ic, src, dst);
    }
    let steady = dc.stats().retained_bytes;
    // A burst: 10,000 lists alive at once, all destroyed together.
    let burst: Vec<_> = (0..10_000)
        .map(|_| {
            dc.command(SoftCommand::Copy { dst, src }).unwrap();
            dc.finish().unwrap()
        })
        .collect();
    for list in &burst {
        ic.execute_command_list(list).unwrap();
    }
    drop(burst);
    ic.flush().unwrap();
    one_frame(&mut dc, &mut ic, src, dst);
    let peak = dc.stats().retained_bytes;
    assert!(
        peak > 20 * steady,
        "the burst's lists are cached: {peak} vs steady {steady}"
    );
    // Back to one list per frame: amortised processing trims the pools.
    for _ in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(2));
        one_frame(&mut dc, &mut ic, src, dst);
    }
    let after = dc.stats().retained_bytes;
    assert!(
        after <= 2 * steady,
        "retained {after} bytes after the burst, steady working set {steady}"
    );
    drop(dc);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// R-L2, R-R1: a deferred context that recorded one small list keeps at most 2 KiB for it
/// (handle pages start small, the slot table's pages are small, the recording's vectors
/// hold what it needed), measured with the recycled list in its cache.
#[test]
fn r_r1_context_of_one_small_list_keeps_at_most_2_kib() {
    let (device, mut ic, world, src, dst) = setup();
    let mut dc = device.create_deferred_context().unwrap();
    for _ in 0..3 {
        one_frame(&mut dc, &mut ic, src, dst);
    }
    let stats = dc.stats();
    eprintln!(
        "one small list: the context keeps {} bytes",
        stats.retained_bytes
    );
    assert!(
        stats.retained_bytes <= 2048,
        "the context keeps {} bytes: {stats:?}",
        stats.retained_bytes
    );
    drop(dc);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// R-A1: no shrinking at steady load. A context makes two lists a frame, each mapping
/// resources, running a query and executing another list, and trims between them, when the
/// second list's memory waits in the cache. The first trims give back what no list used (a
/// vector's first growth is to four); from then on the trims give back nothing, because
/// nothing regrows: the watermark keeps what the lists made since the last trim needed,
/// their Maps', queries' and executes' vectors included.
#[test]
fn r_a1_a_trim_at_steady_load_keeps_what_the_lists_need() {
    let (device, mut ic, world, src, dst) = setup();
    let dynamic = ResourceDesc {
        byte_size: 64,
        usage: cmdlist::Usage::Dynamic,
        bind: cmdlist::BindFlags::CONSTANT_BUFFER,
        ..Default::default()
    };
    let mapped: Vec<_> = (0..8)
        .map(|_| device.create_resource(dynamic).unwrap())
        .collect();
    let query = device.create_query(cmdlist::QueryKind::Event).unwrap();
    let mut inner_dc = device.create_deferred_context().unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    // One frame, the context trimming after its first Finish; answers the bytes the trim
    // gave back.
    let mut frame = |dc: &mut SoftDeferredContext, ic: &mut SoftImmediate| {
        inner_dc.command(SoftCommand::Copy { dst, src }).unwrap();
        let inner = inner_dc.finish().unwrap();
        let record = |dc: &mut SoftDeferredContext| {
            for &resource in &mapped {
                dc.map_discard(resource).unwrap().fill(7);
                dc.unmap(resource).unwrap();
            }
            dc.begin_query(query).unwrap();
            dc.command(SoftCommand::Copy { dst, src }).unwrap();
            dc.end_query(query).unwrap();
            dc.execute_command_list(&inner).unwrap();
            dc.finish().unwrap()
        };
        let first = record(dc);
        let given_back = dc.trim();
        let second = record(dc);
        drop(inner);
        for list in [first, second] {
            ic.execute_command_list(&list).unwrap();
        }
        ic.flush().unwrap();
        given_back
    };
    for _ in 0..20 {
        frame(&mut dc, &mut ic);
    }
    // A flush that performs amortised processing asks the context to trim at its next
    // Finish, just before this test's trim, which then follows a trim with no list made
    // between them: it keeps what the lists made before needed, too. Checked until such
    // frames were seen.
    let mut count = ic.amortized_count();
    let (mut trimmed_twice, mut frames) = (0, 0);
    while trimmed_twice < 3 || frames < 20 {
        assert!(frames < 1_000, "amortised processing at no flush");
        frames += 1;
        let given_back = frame(&mut dc, &mut ic);
        trimmed_twice += usize::from(ic.amortized_count() != count);
        count = ic.amortized_count();
        assert_eq!(
            given_back, 0,
            "a trim at steady load gave back {given_back} bytes the lists need again \
             (frame {frames})"
        );
    }
    drop((dc, inner_dc));
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// R-A2: a deferred context's binding table (a place per Direct3D 11 slot, made at the
/// first bind and kept across Finish's clear) is counted in its retained memory; a trim
/// keeps it while the context binds in each recording, and gives it back once a trim
/// period passed without a binding.
#[test]
fn r_a2_the_binding_table_is_counted_and_given_back_once_unused() {
    use cmdlist::{BindClass, BindPoint};
    let (device, mut ic, world, src, dst) = setup();
    let mut dc = device.create_deferred_context().unwrap();
    let vb0 = BindPoint::new(BindClass::VertexBuffer, 0);
    let frame = |dc: &mut SoftDeferredContext, ic: &mut SoftImmediate, bind: bool| {
        if bind {
            dc.bind(vb0, Some(src.any())).unwrap();
        }
        one_frame(dc, ic, src, dst);
        let given_back = dc.trim();
        (given_back, dc.stats().retained_bytes)
    };
    // Steady: a bound frame and a trim, until the trims give nothing back.
    let mut steady = 0;
    for _ in 0..8 {
        steady = frame(&mut dc, &mut ic, true).1;
    }
    for _ in 0..3 {
        assert_eq!(
            frame(&mut dc, &mut ic, true),
            (0, steady),
            "binding: the table kept"
        );
    }
    // Frames without a bind: within two trims (the first may still see the clear of the
    // last binding; the Finish after amortised processing trims too) the table goes, a
    // place per slot, and the retained bytes say so.
    frame(&mut dc, &mut ic, false);
    let idle = frame(&mut dc, &mut ic, false).1;
    assert!(
        steady - idle >= 1_000 * 8,
        "the table given back: {steady} -> {idle} bytes"
    );
    assert_eq!(frame(&mut dc, &mut ic, false), (0, idle));
    // The next bind makes it again.
    assert_eq!(frame(&mut dc, &mut ic, true), (0, steady));
    drop(dc);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// R-A2: a trim keeps as many recycled lists as the context made since the last trim (the
/// lists a frame needs), not one fewer, and ends the rest; whether or not the immediate
/// context performed amortised processing (which asks the context to trim at its next
/// Finish) at either flush of the frame, since the trim that follows answers that request.
#[test]
fn r_a2_a_trim_keeps_the_lists_made_since_the_last_trim() {
    /// Where the immediate context performs amortised processing in a frame, besides where
    /// a flush performs it by itself (the first ever, and after a millisecond).
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Pump {
        None,
        AfterTheLists,
        AfterTheLast,
    }
    for pump in [Pump::None, Pump::AfterTheLists, Pump::AfterTheLast] {
        let (device, mut ic, world, src, dst) = setup();
        let mut dc = device.create_deferred_context().unwrap();
        let flush = |ic: &mut SoftImmediate, here: Pump| {
            let count = ic.amortized_count();
            if pump == here {
                // The end of a frame performs it if the frame had none; else the flush does,
                // as the first submit of the new frame.
                ic.end_frame().unwrap();
            }
            ic.flush().unwrap();
            assert!(
                pump != here || ic.amortized_count() > count,
                "{pump:?}: performed"
            );
        };
        let frame = |dc: &mut SoftDeferredContext, ic: &mut SoftImmediate, lists: usize| {
            let made: Vec<_> = (0..lists)
                .map(|_| {
                    dc.command(SoftCommand::Copy { dst, src }).unwrap();
                    dc.finish().unwrap()
                })
                .collect();
            for list in &made {
                ic.execute_command_list(list).unwrap();
            }
            drop(made);
            flush(ic, Pump::AfterTheLists);
            // A Finish takes the lists the flush gave back into the cache.
            dc.command(SoftCommand::Copy { dst, src }).unwrap();
            let last = dc.finish().unwrap();
            ic.execute_command_list(&last).unwrap();
            drop(last);
            flush(ic, Pump::AfterTheLast);
            dc.trim();
            dc.stats().cached_lists
        };
        // Five lists made and back in the cache, then a trim: the count starts there.
        frame(&mut dc, &mut ic, 5);
        // Three made (and the Finish that takes them back) since: four kept.
        assert_eq!(frame(&mut dc, &mut ic, 3), 4, "{pump:?}");
        assert_eq!(frame(&mut dc, &mut ic, 1), 2, "{pump:?}");
        drop(dc);
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}
