//! Capture and replay (feature `capture`, docs/CAPTURE.md): a scene recorded on two threads
//! and the immediate context, replayed through a new device in every list mode, leaves every
//! resource with the bytes the captured run left.

use std::io::{self, Write};
use std::sync::{Arc, Mutex};

use cmdlist::capture::{self, CaptureSink, HEADER_LEN};
use cmdlist::handle::Resource;
use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig, SoftDevice, SoftImmediate, SoftWorld};
use cmdlist::{
    AppError, BindFlags, DeviceConfig, Handle, ListMode, MapFlags, MapType, ResourceDesc, Usage,
};

use crate::common::{allocation, app};

/// An output every thread's records reach, that the test reads back.
#[derive(Clone, Default)]
struct Output(Arc<Mutex<Vec<u8>>>);

impl Write for Output {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn setup(
    mode: ListMode,
    sink: Option<Arc<CaptureSink>>,
) -> (SoftDevice, SoftImmediate, Arc<SoftWorld>) {
    setup_with(Gpu::Immediate, mode, sink)
}

fn setup_with(
    gpu: Gpu,
    mode: ListMode,
    sink: Option<Arc<CaptureSink>>,
) -> (SoftDevice, SoftImmediate, Arc<SoftWorld>) {
    let config = SoftConfig {
        gpu,
        ..SoftConfig::from_env().unwrap()
    }
    .with_list_mode(mode);
    let mut device_config = DeviceConfig::default();
    if let Some(sink) = sink {
        device_config = device_config.with_capture(sink);
    }
    soft::device(config, device_config).unwrap()
}

fn desc(bytes: u64, usage: Usage, bind: BindFlags) -> ResourceDesc {
    ResourceDesc {
        byte_size: bytes,
        usage,
        bind,
        ..Default::default()
    }
}

/// The scene: two frames, each with two deferred contexts recording on their own threads
/// (a ring discarded then appended to, copies, fills, an update, a refused append), the
/// immediate context executing their lists, reading a staging copy back, writing a ring of
/// its own, and objects made and destroyed meanwhile. Answers the resources that outlive it.
fn scene(device: &SoftDevice, ic: &mut SoftImmediate) -> Vec<Handle<Resource>> {
    let dynamic = BindFlags::VERTEX_BUFFER;
    let rings: Vec<_> = (0..2)
        .map(|_| {
            device
                .create_resource(desc(256, Usage::Dynamic, dynamic))
                .unwrap()
        })
        .collect();
    let targets: Vec<_> = (0..2)
        .map(|_| {
            device
                .create_resource(desc(256, Usage::Default, BindFlags::empty()))
                .unwrap()
        })
        .collect();
    let staging = device
        .create_resource(desc(256, Usage::Staging, BindFlags::empty()))
        .unwrap();
    let query = device.create_query(cmdlist::QueryKind::Event).unwrap();
    let mut dcs: Vec<_> = (0..2)
        .map(|_| device.create_deferred_context().unwrap())
        .collect();
    for frame in 0..2u8 {
        let lists: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = dcs
                .iter_mut()
                .enumerate()
                .map(|(w, dc)| {
                    let (ring, target) = (rings[w], targets[w]);
                    scope.spawn(move || {
                        let value = 10 * frame + w as u8 + 1;
                        // Refused (no discard yet in this recording), and recorded as such.
                        assert_eq!(
                            dc.map_no_overwrite(ring).map(drop),
                            Err(app(AppError::MapWithoutDiscard))
                        );
                        dc.map_discard(ring).unwrap()[..64].fill(value);
                        dc.unmap(ring).unwrap();
                        dc.map_no_overwrite(ring).unwrap()[64..128].fill(value + 100);
                        dc.unmap(ring).unwrap();
                        dc.command(SoftCommand::Copy {
                            dst: target,
                            src: ring,
                        })
                        .unwrap();
                        dc.update(target, 200, &[value; 8]).unwrap();
                        dc.finish().unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        // Made and destroyed while the lists wait.
        let churn = device
            .create_resource(desc(64, Usage::Default, BindFlags::empty()))
            .unwrap();
        for list in &lists {
            ic.execute_command_list(list).unwrap();
        }
        drop(lists);
        ic.command(&SoftCommand::Fill {
            dst: churn,
            value: frame,
        })
        .unwrap();
        device.destroy(churn).unwrap();
        ic.command(&SoftCommand::Copy {
            dst: staging,
            src: targets[0],
        })
        .unwrap();
        ic.flush().unwrap();
        let read = ic
            .map(staging, MapType::Read, MapFlags::DO_NOT_WAIT)
            .map(|bytes| bytes[0]);
        assert_eq!(read, Ok(10 * frame + 1));
        ic.unmap(staging).unwrap();
        ic.map_discard(rings[1]).unwrap()[128..].fill(frame + 50);
        ic.unmap(rings[1]).unwrap();
        ic.command(&SoftCommand::Copy {
            dst: targets[1],
            src: rings[1],
        })
        .unwrap();
        // The calls that poll the GPU, ask the kernel, or trim: recorded, and replayed
        // where a later call could see what they did.
        ic.end_query(query).unwrap();
        let _ = ic.query_signaled(query);
        let _ = ic.resource_is_busy(staging);
        let _ = ic.set_resource_priority(targets[0], 5);
        let mut residency = [cmdlist::dxgi::ResidencyStatus::default(); 1];
        let _ = ic.query_resource_residency(&targets[..1], &mut residency);
        let _ = ic.gamma_caps();
        ic.trim();
        dcs[1].trim();
        ic.flush().unwrap();
    }
    drop(dcs);
    let mut kept = rings;
    kept.extend(targets);
    kept.push(staging);
    kept
}

/// Resources and their bytes.
type Contents = Vec<(Handle<Resource>, Vec<u8>)>;

/// A capture of the scene in list mode `mode`, the resources it left and their bytes.
fn captured(mode: ListMode) -> (Vec<u8>, Contents) {
    let output = Output::default();
    let sink = CaptureSink::new(output.clone()).unwrap();
    let (device, mut ic, world) = setup(mode, Some(sink.clone()));
    let kept = scene(&device, &mut ic);
    let bytes: Vec<_> = kept
        .iter()
        .map(|&r| (r, world.read(allocation(&device, r)).unwrap()))
        .collect();
    assert!(world.violations().is_empty(), "{:#?}", world.violations());
    assert_eq!(sink.error(), None);
    sink.flush();
    let capture = output.0.lock().unwrap().clone();
    (capture, bytes)
}

/// A capture made in each list mode, replayed through a new device in each: every call
/// answers what it answered, and every resource ends with the bytes of the captured run.
#[test]
fn a_capture_replays_to_the_same_bytes_in_every_list_mode() {
    for made_in in ListMode::ALL {
        let (capture, expected) = captured(made_in);
        let threads = [
            capture::ReplayThreads::One,
            capture::ReplayThreads::PerContext,
        ];
        for (replayed_in, threads) in ListMode::ALL.into_iter().zip(threads.into_iter().cycle()) {
            let (device, mut ic, world) = setup(replayed_in, None);
            let options = capture::ReplayOptions::default().with_threads(threads);
            let report = capture::replay_with(&capture, &device, &mut ic, options)
                .unwrap_or_else(|e| panic!("{made_in:?} -> {replayed_in:?} {threads:?}: {e}"));
            assert_eq!(report.tail, None);
            assert!(report.records > 40, "{}", report.records);
            for (captured, bytes) in &expected {
                let replayed = report.object(*captured).expect("made by the replay");
                assert_eq!(
                    world.read(allocation(&device, replayed)).as_ref(),
                    Some(bytes),
                    "{made_in:?} -> {replayed_in:?}"
                );
            }
            assert!(world.violations().is_empty(), "{:#?}", world.violations());
            ic.destroy_device().unwrap();
            world.assert_clean();
        }
    }
}

/// A capture cut anywhere (a crash, `SIGKILL`) replays up to its last complete write (the
/// last flush before the cut) and says where it stopped; never a panic, never a call that
/// answers otherwise.
#[test]
fn a_cut_capture_replays_to_its_last_whole_write() {
    let (capture, _) = captured(ListMode::Replayed);
    // Where each write ends: a cut there loses nothing.
    let ends: Vec<usize> = capture::FrameReader::new(&capture)
        .unwrap()
        .map(Result::unwrap)
        .filter(|f| f.stream == capture::CHECKPOINT_STREAM)
        .map(|f| f.offset as usize + capture::FRAME_HEADER_LEN)
        .collect();
    assert!(ends.len() >= 4, "a write per flush: {ends:?}");
    let step = (capture.len() / 197).max(1);
    let cuts = (HEADER_LEN..capture.len())
        .step_by(step)
        .chain(ends.iter().copied());
    for cut in cuts {
        let (device, mut ic, world) = setup(ListMode::Replayed, None);
        let report = capture::replay(&capture[..cut], &device, &mut ic)
            .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        let whole = cut == HEADER_LEN || ends.contains(&cut);
        assert_eq!(
            report.tail.is_none(),
            whole,
            "cut at {cut}: {:?}",
            report.tail
        );
        assert!(world.violations().is_empty(), "{:#?}", world.violations());
    }
}

/// A byte damaged anywhere after the first write (a flipped bit on disk, not a cut) is named
/// as damage at its record, as the reader names it, not as a write a crash left unfinished;
/// the records before it still replay.
#[test]
fn damage_is_named_at_its_record_not_taken_for_a_cut() {
    let (capture, _) = captured(ListMode::Replayed);
    let first_end = capture::FrameReader::new(&capture)
        .unwrap()
        .map(Result::unwrap)
        .find(|f| f.stream == capture::CHECKPOINT_STREAM)
        .map(|f| f.offset as usize + capture::FRAME_HEADER_LEN)
        .unwrap();
    let step = ((capture.len() - first_end) / 97).max(1);
    let mut damaged = 0;
    for at in (first_end..capture.len()).step_by(step) {
        let mut bad = capture.clone();
        bad[at] ^= 0x20;
        let read_error = capture::FrameReader::new(&bad)
            .unwrap()
            .find_map(Result::err)
            .expect("a changed byte is seen");
        let (device, mut ic, world) = setup(ListMode::Replayed, None);
        let report =
            capture::replay(&bad, &device, &mut ic).unwrap_or_else(|e| panic!("byte {at}: {e}"));
        let tail = report.tail.expect("the damage is reported");
        match read_error.kind {
            // A length made longer runs past the end: what a cut looks like.
            capture::CaptureErrorKind::TornTail => {
                assert_eq!(
                    tail.kind,
                    capture::CaptureErrorKind::Unfinished,
                    "byte {at}"
                )
            }
            _ => {
                assert_eq!(tail, read_error, "byte {at}");
                damaged += 1;
            }
        }
        assert!(report.records > 0, "byte {at}: what came before replayed");
        assert!(world.violations().is_empty(), "{:#?}", world.violations());
    }
    assert!(damaged > 80, "{damaged} flips named as damage");
}

/// A capture file of one record on `stream` (`kind`, `payload`), ended by a checkpoint: a
/// hostile capture, made by hand.
fn one_record(stream: u32, kind: capture::Kind, payload: &[u8]) -> Vec<u8> {
    let mut file = Vec::new();
    capture::write_header(&mut file).unwrap();
    let mut frames = capture::StreamBuffer::new(stream);
    frames.push(kind as u16, payload);
    frames.drain_to(&mut file).unwrap();
    let mut end = capture::StreamBuffer::new(capture::CHECKPOINT_STREAM);
    end.push(0, &[]);
    end.drain_to(&mut file).unwrap();
    file
}

/// A hostile capture whose two deferred contexts each execute the other's first list before
/// finishing it: the replay stops with an unknown list, instead of recursing for ever.
#[test]
fn executes_that_go_round_in_a_circle_are_unknown_lists() {
    let mut file = Vec::new();
    capture::write_header(&mut file).unwrap();
    let mut device = capture::StreamBuffer::new(capture::DEVICE_STREAM);
    for stream in [2u32, 3] {
        let mut payload = vec![0];
        payload.extend_from_slice(&stream.to_le_bytes());
        device.push(capture::Kind::CreateDeferred as u16, &payload);
    }
    device.drain_to(&mut file).unwrap();
    for (stream, other) in [(2u32, 3u32), (3, 2)] {
        let mut payload = 2u64.to_le_bytes().to_vec();
        payload.push(0);
        payload.extend_from_slice(&other.to_le_bytes());
        payload.extend_from_slice(&0u64.to_le_bytes());
        payload.push(0);
        let mut frames = capture::StreamBuffer::new(stream);
        frames.push(capture::Kind::Execute as u16, &payload);
        frames.drain_to(&mut file).unwrap();
    }
    let mut end = capture::StreamBuffer::new(capture::CHECKPOINT_STREAM);
    end.push(0, &[]);
    end.drain_to(&mut file).unwrap();
    let (device, mut ic, _world) = setup(ListMode::Replayed, None);
    let e = capture::replay(&file, &device, &mut ic).unwrap_err();
    assert_eq!(e.kind, capture::ReplayErrorKind::UnknownList, "{e}");
}

/// The calls that poll the GPU's progress are replayed, so that a later call that depends
/// on it answers as it did: with a GPU whose fence completes four polls after a submit, a
/// staging Map with DO_NOT_WAIT answers WAS_STILL_DRAWING or maps according to how many
/// `query_signaled` and `resource_is_busy` polls came before it.
#[test]
fn the_gpus_progress_replays_with_the_polls_that_made_it() {
    let mut answers = Vec::new();
    for polls in 0..5 {
        let output = Output::default();
        let sink = CaptureSink::new(output.clone()).unwrap();
        let (device, mut ic, _world) = setup_with(Gpu::PollLag(4), ListMode::Replayed, Some(sink));
        let staging = device
            .create_resource(desc(64, Usage::Staging, BindFlags::empty()))
            .unwrap();
        let src = device
            .create_resource(desc(64, Usage::Default, BindFlags::empty()))
            .unwrap();
        let query = device.create_query(cmdlist::QueryKind::Event).unwrap();
        ic.command(&SoftCommand::Copy { dst: staging, src })
            .unwrap();
        ic.end_query(query).unwrap();
        ic.flush().unwrap();
        for i in 0..polls {
            match i % 2 {
                0 => drop(ic.query_signaled(query)),
                _ => drop(ic.resource_is_busy(staging)),
            }
        }
        let mapped = ic
            .map(staging, MapType::Read, MapFlags::DO_NOT_WAIT)
            .map(drop);
        answers.push(mapped);
        if mapped.is_ok() {
            ic.unmap(staging).unwrap();
        }
        ic.flush().unwrap();
        let capture = output.0.lock().unwrap().clone();
        let (device, mut ic, _world) = setup_with(Gpu::PollLag(4), ListMode::Replayed, None);
        let report = capture::replay(&capture, &device, &mut ic)
            .unwrap_or_else(|e| panic!("{polls} polls ({mapped:?}): {e}"));
        assert_eq!(report.tail, None);
        // On a GPU of another pace: exactly, the first poll answers otherwise (it finds the
        // GPU done), or without polls the Map does; with `Timing::Any`, the polls that found
        // it still drawing are left out and the Map that mapped waits.
        let (device, mut ic, world) = setup_with(Gpu::Immediate, ListMode::Replayed, None);
        let exact = capture::replay(&capture, &device, &mut ic).unwrap_err();
        let first_poll = capture::ReplayErrorKind::Answered {
            call: capture::Kind::QuerySignaled,
            captured: 0,
            replayed: 1,
        };
        match polls {
            0 => assert!(
                matches!(exact.kind, capture::ReplayErrorKind::Diverged { call, .. } if call == capture::Kind::Map),
                "{exact}"
            ),
            _ => assert_eq!(exact.kind, first_poll, "{polls} polls: {exact}"),
        }
        let (device, mut ic, world_any) = setup_with(Gpu::Immediate, ListMode::Replayed, None);
        let any = capture::ReplayOptions::default().with_timing(capture::Timing::Any);
        let any = capture::replay_with(&capture, &device, &mut ic, any)
            .unwrap_or_else(|e| panic!("{polls} polls, any timing: {e}"));
        let read = any.object(staging).unwrap();
        assert_eq!(world_any.read(allocation(&device, read)), Some(vec![0; 64]));
        drop(world);
    }
    // Both answers were captured, and replayed.
    assert!(answers.contains(&Ok(())), "{answers:?}");
    assert!(
        answers.contains(&Err(cmdlist::Error::WasStillDrawing)),
        "{answers:?}"
    );
}

/// What a recorded draw adds to a capture (BENCHMARKS.md quotes it): a Map(DISCARD) of 64
/// bytes, the bytes, the Unmap (one record) and a command naming two objects (another).
#[test]
fn a_draw_adds_162_bytes_to_a_capture() {
    let size = |draws: usize| {
        let output = Output::default();
        let sink = CaptureSink::new(output.clone()).unwrap();
        let (device, mut ic, _world) = setup(ListMode::Replayed, Some(sink));
        let constants = device
            .create_resource(desc(64, Usage::Dynamic, BindFlags::CONSTANT_BUFFER))
            .unwrap();
        let dst = device
            .create_resource(desc(64, Usage::Default, BindFlags::empty()))
            .unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        for n in 0..draws {
            dc.map_discard(constants).unwrap().fill(n as u8);
            dc.unmap(constants).unwrap();
            dc.command(SoftCommand::Copy {
                dst,
                src: constants,
            })
            .unwrap();
        }
        let list = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
        let len = output.0.lock().unwrap().len();
        len
    };
    assert_eq!((size(110) - size(10)) / 100, 162);
}

/// `ReplayThreads::PerContext`: each deferred context's calls, and the driver's hooks they
/// make, run on one thread of its own, as when captured; with `One`, all on the replaying
/// thread. The bytes are the same either way.
#[test]
fn a_replay_runs_each_deferred_context_on_a_thread_of_its_own() {
    let (capture, expected) = captured(ListMode::DriverBuilt);
    for threads in [
        capture::ReplayThreads::One,
        capture::ReplayThreads::PerContext,
    ] {
        let config = SoftConfig {
            gpu: Gpu::Immediate,
            command_lists: true,
            driver_built: true,
            trace: true,
            ..SoftConfig::from_env().unwrap()
        };
        let (device, mut ic, world) = soft::device(config, DeviceConfig::default()).unwrap();
        let options = capture::ReplayOptions::default().with_threads(threads);
        let report = capture::replay_with(&capture, &device, &mut ic, options).unwrap();
        for (captured, bytes) in &expected {
            let replayed = report.object(*captured).unwrap();
            assert_eq!(
                world.read(allocation(&device, replayed)).as_ref(),
                Some(bytes)
            );
        }
        let here = std::thread::current().id();
        let mut by_context: std::collections::HashMap<_, std::collections::HashSet<_>> =
            Default::default();
        for event in world.trace() {
            if let Some(context) = event.context {
                by_context.entry(context).or_default().insert(event.thread);
            }
        }
        assert_eq!(by_context.len(), 2, "two deferred contexts heard");
        // Besides the replaying thread (which makes each context, and drops the lists, as
        // free-threaded calls), each context's own thread, one each.
        let mut own = std::collections::HashSet::new();
        for (context, seen) in &by_context {
            let others: Vec<_> = seen.iter().filter(|&&t| t != here).collect();
            match threads {
                capture::ReplayThreads::One => assert!(others.is_empty(), "{context:?}"),
                _ => {
                    assert_eq!(others.len(), 1, "{context:?}: {seen:?}");
                    own.insert(*others[0]);
                }
            }
        }
        if threads == capture::ReplayThreads::PerContext {
            assert_eq!(own.len(), 2, "a thread each");
        }
        ic.destroy_device().unwrap();
    }
}

/// A Finish that fails after it made its list (the context's renewal refused: without
/// recycling, the new driver context's creation) drops that list unnamed: the capture
/// records no drop of it, and the next Finish's list takes the first name.
#[test]
fn a_list_a_failed_finish_made_and_dropped_is_not_recorded() {
    use cmdlist::soft::inject::{self, Fault, FaultPlan};
    use cmdlist::Device;
    let run = |plan: &Arc<FaultPlan>, output: Option<Output>| {
        let config = SoftConfig {
            command_lists: true,
            ..SoftConfig::from_env().unwrap()
        };
        let (driver, kernel, _world) = inject::new(plan, config);
        let mut device_config = DeviceConfig::default().with_recycle(false);
        if let Some(output) = output {
            device_config = device_config.with_capture(CaptureSink::new(output).unwrap());
        }
        let (device, mut ic) = Device::new(driver, kernel, device_config).unwrap();
        let target = device
            .create_resource(desc(64, Usage::Default, BindFlags::empty()))
            .unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        let fill = SoftCommand::Fill {
            dst: target,
            value: 1,
        };
        dc.command(fill).unwrap();
        let mark = plan.calls();
        let first = dc.finish().map(drop);
        dc.command(fill).unwrap();
        let list = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
        drop(list);
        ic.flush().unwrap();
        drop(dc);
        ic.destroy_device().unwrap();
        (mark, first)
    };
    let counting = Arc::new(FaultPlan::counting().with_log());
    let (mark, first) = run(&counting, None);
    assert_eq!(first, Ok(()));
    let renewal = counting.log()[mark as usize..]
        .iter()
        .position(|h| *h == "create_deferred_context")
        .expect("Finish renews the context") as u64
        + mark;
    let output = Output::default();
    let plan = Arc::new(FaultPlan::at(
        renewal,
        Fault::Error(cmdlist::Error::OutOfMemory),
    ));
    let (_, first) = run(&plan, Some(output.clone()));
    assert!(first.is_err(), "the renewal refused");
    let bytes = output.0.lock().unwrap().clone();
    let drops: Vec<_> = capture::FrameReader::new(&bytes)
        .unwrap()
        .map(Result::unwrap)
        .filter(|f| f.kind == capture::Kind::DropList as u16)
        .collect();
    assert_eq!(
        drops.len(),
        1,
        "only the list the application held is dropped"
    );
    // Its name: the stream's first list (finish 0).
    assert_eq!(&drops[0].payload[5..13], &0u64.to_le_bytes());
}

/// A device destruction refused while a deferred context lived replays as refused: the
/// replay's contexts live on until the one that succeeded.
#[test]
fn a_refused_device_destruction_replays_refused() {
    let output = Output::default();
    let sink = CaptureSink::new(output.clone()).unwrap();
    let (device, mut ic, _world) = setup(ListMode::Replayed, Some(sink));
    let dc = device.create_deferred_context().unwrap();
    assert_eq!(
        ic.destroy_device(),
        Err(app(AppError::DeferredContextsAlive))
    );
    drop(dc);
    ic.destroy_device().unwrap();
    let bytes = output.0.lock().unwrap().clone();
    let (device, mut ic, _world) = setup(ListMode::Replayed, None);
    let report = capture::replay(&bytes, &device, &mut ic).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.tail, None);
}

/// A refused call naming an object the capture never made (another device's) replays as
/// passed over; a rotation longer than DXGI's 16 buffers ends the capture (it cannot be
/// kept); dropping the immediate context writes what it recorded since its last flush.
#[test]
fn foreign_objects_long_rotations_and_a_dropped_immediate_context() {
    let output = Output::default();
    let sink = CaptureSink::new(output.clone()).unwrap();
    let (device, mut ic, _world) = setup(ListMode::Replayed, Some(sink.clone()));
    let (other, mut other_ic, _other_world) = setup(ListMode::Replayed, None);
    let foreign = other
        .create_resource(desc(64, Usage::Default, BindFlags::empty()))
        .unwrap();
    let target = device
        .create_resource(desc(64, Usage::Default, BindFlags::empty()))
        .unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    let copy = SoftCommand::Copy {
        dst: target,
        src: foreign,
    };
    assert!(dc.command(copy).is_err());
    assert!(ic.command(&copy).is_err());
    ic.update(target, 0, &[7; 64]).unwrap();
    drop(dc);
    drop(ic);
    let bytes = output.0.lock().unwrap().clone();
    let updates = capture::FrameReader::new(&bytes)
        .unwrap()
        .map(Result::unwrap)
        .filter(|f| f.kind == capture::Kind::Update as u16)
        .count();
    assert_eq!(updates, 1, "written when the immediate context was dropped");
    let (device, mut ic, world) = setup(ListMode::Replayed, None);
    let report = capture::replay(&bytes, &device, &mut ic).unwrap_or_else(|e| panic!("{e}"));
    let replayed = report.object(target).unwrap();
    assert_eq!(world.read(allocation(&device, replayed)), Some(vec![7; 64]));
    other_ic.destroy_device().unwrap();
    ic.destroy_device().unwrap();

    let sink = CaptureSink::new(Output::default()).unwrap();
    let (device, mut ic, _world) = setup(ListMode::Replayed, Some(sink.clone()));
    let r = device
        .create_resource(desc(64, Usage::Default, BindFlags::empty()))
        .unwrap();
    let _ = ic.rotate_resource_identities(&[r; capture::MAX_ROTATED]);
    assert_eq!(sink.error(), None, "16 are kept");
    let _ = ic.rotate_resource_identities(&[r; capture::MAX_ROTATED + 1]);
    assert_eq!(sink.error(), Some(io::ErrorKind::InvalidData));
    ic.destroy_device().unwrap();
}

/// A call whose hook panicked leaves its record unfinished; the context's next call that
/// records takes it back before it writes (a primary's create between them writes to the
/// device's stream only), so the immediate context's stream stays whole frames and the
/// capture reads to its end.
#[test]
fn a_panicking_hook_leaves_no_torn_record() {
    use cmdlist::soft::inject::{self, silence_injected_panics, Fault, FaultPlan};
    use cmdlist::Device;
    silence_injected_panics();
    let run = |plan: &Arc<FaultPlan>, output: Output| {
        let config = SoftConfig {
            gpu: Gpu::Immediate,
            ..SoftConfig::from_env().unwrap()
        };
        let (driver, kernel, _world) = inject::new(plan, config);
        let sink = CaptureSink::new(output).unwrap();
        let device_config = DeviceConfig::default().with_capture(sink);
        let (device, mut ic) = Device::new(driver, kernel, device_config).unwrap();
        let target = device
            .create_resource(desc(64, Usage::Default, BindFlags::empty()))
            .unwrap();
        let mark = plan.calls();
        let updated = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            ic.update(target, 0, &[1; 64])
        }));
        let primary = ic.create_primary(desc(256, Usage::Default, BindFlags::empty()));
        ic.flush().unwrap();
        (mark, updated.is_err(), primary.is_ok())
    };
    let counting = Arc::new(FaultPlan::counting().with_log());
    let (mark, _, _) = run(&counting, Output::default());
    let hook = counting.log()[mark as usize..]
        .iter()
        .position(|h| *h == "execute")
        .expect("the update reaches the driver") as u64
        + mark;
    let output = Output::default();
    let plan = Arc::new(FaultPlan::at(hook, Fault::Panic));
    let (_, panicked, made) = run(&plan, output.clone());
    assert!(
        panicked && made,
        "the update's hook panicked, the primary was made"
    );
    let bytes = output.0.lock().unwrap().clone();
    for frame in capture::FrameReader::new(&bytes).unwrap() {
        frame.unwrap_or_else(|e| panic!("a torn record: {e}"));
    }
}

/// A capture's file with each frame's payload as `edit` leaves it (its checksum made right
/// again): what a capture of another run would hold.
fn edited(capture: &[u8], mut edit: impl FnMut(&capture::Frame<'_>, &mut Vec<u8>)) -> Vec<u8> {
    let mut file = Vec::new();
    capture::write_header(&mut file).unwrap();
    for frame in capture::FrameReader::new(capture).unwrap() {
        let frame = frame.unwrap();
        let mut payload = frame.payload.to_vec();
        edit(&frame, &mut payload);
        let mut frames = capture::StreamBuffer::new(frame.stream);
        frames.push(frame.kind, &payload);
        frames.drain_to(&mut file).unwrap();
    }
    file
}

/// Every answer a call returns is compared, not only success: a refused call that the
/// replay refuses with another error, and a call that succeeds with another value
/// (`query_signaled`'s and `resource_is_busy`'s bool, `present`'s status, `gamma_caps`,
/// `set_display_mode`'s outcome), each stop the replay at its record. Unchanged, the
/// capture replays whole.
#[test]
fn every_answer_and_every_error_kind_is_compared() {
    let output = Output::default();
    let sink = CaptureSink::new(output.clone()).unwrap();
    let (device, mut ic, world) = setup(ListMode::Replayed, Some(sink));
    let texture = |flags| {
        let bind = BindFlags::PRESENT | BindFlags::RENDER_TARGET;
        let texture = cmdlist::Texture2d {
            width: 4,
            height: 4,
            format: cmdlist::dxgi::DisplayFormat::B8G8R8A8Unorm.to_dxgi(),
            ..Default::default()
        };
        let mut desc = ResourceDesc::texture(texture, bind).unwrap();
        desc.flags = flags;
        desc
    };
    let back_buffer = device
        .create_resource(texture(cmdlist::ResourceFlags::empty()))
        .unwrap();
    let primary = ic
        .create_primary(texture(cmdlist::ResourceFlags::PRIMARY))
        .unwrap();
    let staging = device
        .create_resource(desc(64, Usage::Staging, BindFlags::empty()))
        .unwrap();
    let query = device.create_query(cmdlist::QueryKind::Event).unwrap();
    // Refused: not a dynamic resource.
    assert_eq!(
        ic.map_discard(staging).map(drop),
        Err(app(AppError::NotMappable))
    );
    ic.end_query(query).unwrap();
    assert!(ic.query_signaled(query).unwrap());
    assert!(!ic.resource_is_busy(staging).unwrap());
    ic.gamma_caps().unwrap();
    ic.set_display_mode(primary, 0).unwrap();
    world.set_present_status(cmdlist::dxgi::PresentStatus(0x087A_0001));
    let args = cmdlist::dxgi::PresentArgs {
        src: back_buffer,
        src_subresource: 0,
        dst: None,
        dxgi_context: cmdlist::dxgi::DxgiContext(0),
        flags: cmdlist::dxgi::PresentFlags::FLIP,
        flip_interval: 1,
    };
    ic.present(&args).unwrap();
    ic.flush().unwrap();
    let capture = output.0.lock().unwrap().clone();
    let replay = |bytes: &[u8]| {
        let (device, mut ic, world) = setup(ListMode::Replayed, None);
        world.set_present_status(cmdlist::dxgi::PresentStatus(0x087A_0001));
        capture::replay(bytes, &device, &mut ic)
    };
    replay(&capture).expect("the capture as it was made");

    // The refused Map, refused with another error: the outcome's code, after `seq`.
    let wrong = cmdlist::Error::Application(AppError::InvalidState);
    let other_error = edited(&capture, |frame, payload| {
        if frame.kind == capture::Kind::Map as u16 {
            payload[8] = capture::Outcome::Err(wrong).code();
        }
    });
    let e = replay(&other_error).unwrap_err();
    assert_eq!(
        e.kind,
        capture::ReplayErrorKind::Diverged {
            call: capture::Kind::Map,
            captured: capture::Outcome::Err(wrong),
            replayed: capture::Outcome::Err(app(AppError::NotMappable)),
        },
        "{e}"
    );

    // Each answer in turn made another: the call before it is named.
    let answers: Vec<u64> = capture::FrameReader::new(&capture)
        .unwrap()
        .map(Result::unwrap)
        .filter(|f| f.kind == capture::Kind::Answer as u16)
        .map(|f| u64::from_le_bytes(f.payload[9..17].try_into().unwrap()))
        .collect();
    assert_eq!(answers.len(), 5, "{answers:x?}");
    assert_eq!((answers[0], answers[1]), (1, 0), "signaled, not busy");
    assert_eq!(
        (answers[3], answers[4]),
        (0, 0x087A_0001),
        "set, the status"
    );
    let calls = [
        capture::Kind::QuerySignaled,
        capture::Kind::ResourceIsBusy,
        capture::Kind::GammaCaps,
        capture::Kind::SetDisplayMode,
        capture::Kind::Present,
    ];
    for (n, call) in calls.into_iter().enumerate() {
        let mut seen = 0;
        let other_answer = edited(&capture, |frame, payload| {
            if frame.kind == capture::Kind::Answer as u16 {
                if seen == n {
                    payload[9] ^= 1 << 7;
                }
                seen += 1;
            }
        });
        let e = replay(&other_answer).unwrap_err();
        assert_eq!(
            e.kind,
            capture::ReplayErrorKind::Answered {
                call,
                captured: answers[n] ^ (1 << 7),
                replayed: answers[n],
            },
            "{e}"
        );
        // Said in words: the record, the call and both answers.
        let said = e.to_string();
        let expected = format!(
            "record {} (stream 1): {call:?} answered {:#x} where the capture says {:#x}",
            e.record,
            answers[n],
            answers[n] ^ (1 << 7)
        );
        assert_eq!(said, expected);
    }
    // A GPU of another pace (`Timing::Any`) compares the present's and the mode's, not the
    // polls' nor the driver's gamma caps.
    let any = capture::ReplayOptions::default().with_timing(capture::Timing::Any);
    for (n, compared) in [(0, false), (2, false), (3, true), (4, true)] {
        let mut seen = 0;
        let other_answer = edited(&capture, |frame, payload| {
            if frame.kind == capture::Kind::Answer as u16 {
                if seen == n {
                    payload[9] ^= 1 << 7;
                }
                seen += 1;
            }
        });
        let (device, mut ic, world) = setup(ListMode::Replayed, None);
        world.set_present_status(cmdlist::dxgi::PresentStatus(0x087A_0001));
        let replayed = capture::replay_with(&other_answer, &device, &mut ic, any);
        assert_eq!(replayed.is_err(), compared, "answer {n}: {replayed:?}");
    }
}

/// A deferred context that runs out of memory while a Map is open drops its recording, and
/// the Map's memory with it (R-E3): the capture forgets that Map's bytes (at the Unmap the
/// memory is gone: no `Written` record reads it), and the capture replays.
#[test]
fn a_map_open_when_its_context_runs_out_of_memory_records_no_bytes() {
    let config = || SoftConfig {
        gpu: Gpu::Immediate,
        resources_without_memory: true,
        ..SoftConfig::from_env().unwrap()
    };
    let output = Output::default();
    let sink = CaptureSink::new(output.clone()).unwrap();
    let device_config = DeviceConfig::default().with_capture(sink);
    let (device, mut ic, _world) = soft::device(config(), device_config).unwrap();
    let small = device
        .create_resource(desc(64, Usage::Dynamic, BindFlags::VERTEX_BUFFER))
        .unwrap();
    let huge = device
        .create_resource(desc(u64::MAX, Usage::Dynamic, BindFlags::VERTEX_BUFFER))
        .unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    dc.map_discard(small).unwrap().fill(5);
    assert_eq!(
        dc.map_discard(huge).err(),
        Some(cmdlist::Error::OutOfMemory)
    );
    assert!(dc.is_removed());
    dc.unmap(small).unwrap();
    assert_eq!(dc.finish().err(), Some(cmdlist::Error::OutOfMemory));
    drop(dc);
    ic.flush().unwrap();
    let capture = output.0.lock().unwrap().clone();
    let kinds: Vec<u16> = capture::FrameReader::new(&capture)
        .unwrap()
        .map(|f| f.unwrap().kind)
        .collect();
    assert!(kinds.contains(&(capture::Kind::Map as u16)), "{kinds:?}");
    assert!(
        !kinds.contains(&(capture::Kind::Written as u16)),
        "bytes read after the recording went: {kinds:?}"
    );
    let (device, mut ic, _world) = soft::device(config(), DeviceConfig::default()).unwrap();
    capture::replay(&capture, &device, &mut ic).unwrap();
}

/// The replay's order against the device's records, where a call and a destroy meet on one
/// thread: an update, then the destroy of what it wrote; a Map and its Unmap with the
/// destroy of the mapped resource between them (the Unmap refused: StaleHandle, the Map
/// left to device destruction); a Map refused (mapped already) between a Map and its Unmap,
/// which holds no bytes. Replayed, each call answers as it did and the bytes are the same.
#[test]
fn calls_meeting_a_destroy_replay_on_their_side_of_it() {
    let output = Output::default();
    let sink = CaptureSink::new(output.clone()).unwrap();
    let (device, mut ic, world) = setup(ListMode::Replayed, Some(sink));
    let dynamic = || {
        device
            .create_resource(desc(64, Usage::Dynamic, BindFlags::VERTEX_BUFFER))
            .unwrap()
    };
    let (updated, mapped, kept) = (dynamic(), dynamic(), dynamic());
    let dst = device
        .create_resource(desc(64, Usage::Default, BindFlags::empty()))
        .unwrap();
    ic.command(&SoftCommand::Fill { dst, value: 3 }).unwrap();
    ic.update(dst, 0, &[1; 8]).unwrap();
    device.destroy(updated).unwrap();
    ic.map_discard(mapped).unwrap().fill(2);
    device.destroy(mapped).unwrap();
    assert_eq!(ic.unmap(mapped), Err(app(AppError::StaleHandle)));
    ic.map_discard(kept).unwrap().fill(4);
    assert_eq!(
        ic.map_discard(kept).map(drop),
        Err(app(AppError::InvalidState)),
        "mapped already"
    );
    ic.unmap(kept).unwrap();
    ic.command(&SoftCommand::Copy { dst, src: kept }).unwrap();
    ic.flush().unwrap();
    let want = world.read(allocation(&device, dst)).unwrap();
    assert_eq!(want, [4; 64]);
    let capture = output.0.lock().unwrap().clone();
    let (device, mut ic, world) = setup(ListMode::Replayed, None);
    let report = capture::replay(&capture, &device, &mut ic).unwrap_or_else(|e| panic!("{e}"));
    let replayed = report.object(dst).unwrap();
    assert_eq!(world.read(allocation(&device, replayed)).unwrap(), want);
}

/// A record that does not decode (it names an object the capture never made) stops the
/// replay where the call succeeded; only a refused one is passed over.
#[test]
fn a_successful_call_naming_an_unknown_object_stops_the_replay() {
    for (outcome, stops) in [
        (0u8, true),
        (
            capture::Outcome::Err(app(AppError::StaleHandle)).code(),
            false,
        ),
    ] {
        let mut payload = 0u64.to_le_bytes().to_vec();
        payload.push(outcome);
        payload.extend(0x0001_0000_0000_0007u64.to_le_bytes()); // Unmap of resource #7
        let file = one_record(capture::IMMEDIATE_STREAM, capture::Kind::Unmap, &payload);
        let (device, mut ic, _world) = setup(ListMode::Replayed, None);
        let replayed = capture::replay(&file, &device, &mut ic);
        match stops {
            true => assert!(
                matches!(replayed, Err(ref e) if matches!(e.kind, capture::ReplayErrorKind::Decode(_))),
                "{replayed:?}"
            ),
            false => assert_eq!(replayed.map(|r| r.records).ok(), Some(1)),
        }
    }
}

/// R-M1 while capturing: a deferred context's READ, WRITE and READ_WRITE Maps are refused
/// with `NotMappable`, as without a capture, in every list mode; the capture replays them
/// refused (a replayed call must answer what it answered) and the discard after them lands.
#[test]
fn r_m1_a_capturing_deferred_context_refuses_read_and_write_maps() {
    for mode in ListMode::ALL {
        let output = Output::default();
        let sink = CaptureSink::new(output.clone()).unwrap();
        let (device, mut ic, world) = setup(mode, Some(sink.clone()));
        let ring = device
            .create_resource(desc(64, Usage::Dynamic, BindFlags::VERTEX_BUFFER))
            .unwrap();
        let mut dc = device.create_deferred_context().unwrap();
        for ty in [MapType::Read, MapType::Write, MapType::ReadWrite] {
            assert_eq!(
                dc.map(ring, ty).map(drop),
                Err(app(AppError::NotMappable)),
                "{mode:?} {ty:?}"
            );
        }
        dc.map(ring, MapType::WriteDiscard).unwrap().fill(3);
        dc.unmap(ring).unwrap();
        let list = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
        ic.flush().unwrap();
        assert_eq!(world.read(allocation(&device, ring)), Some(vec![3; 64]));
        drop((list, dc));
        assert_eq!(sink.error(), None, "{mode:?}");
        sink.flush();
        let capture = output.0.lock().unwrap().clone();
        let (replay_device, mut replay_ic, replay_world) = setup(mode, None);
        let report = capture::replay(&capture, &replay_device, &mut replay_ic)
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        let replayed = report.object(ring).expect("made by the replay");
        assert_eq!(
            replay_world.read(allocation(&replay_device, replayed)),
            Some(vec![3; 64]),
            "{mode:?}"
        );
        replay_ic.destroy_device().unwrap();
        replay_world.assert_clean();
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// The CRC-32 (IEEE) of `bytes`, computed apart from the engine's.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = match crc & 1 {
                1 => (crc >> 1) ^ 0xEDB8_8320,
                _ => crc >> 1,
            };
        }
    }
    !crc
}

/// A capture that checks presents records, after each present, the CRC-32 of the presented
/// surface's bytes once the GPU finished the present's buffer (waiting for it where the GPU
/// runs behind, and for nothing where the context saw it done), and a replay finds the same
/// and counts each present checked, whatever the GPU's pace.
#[test]
fn a_capture_that_checks_presents_records_each_surfaces_crc() {
    use cmdlist::dxgi::{DisplayFormat, DxgiContext, PresentArgs, PresentFlags};
    use cmdlist::soft::Hook;
    for gpu in [Gpu::Manual, Gpu::Immediate] {
        let output = Output::default();
        let sink = CaptureSink::new(output.clone()).unwrap();
        sink.check_presents(true);
        let (device, mut ic, world) = setup_with(gpu, ListMode::Replayed, Some(sink.clone()));
        let surface = cmdlist::Texture2d {
            width: 4,
            height: 2,
            samples: 1,
            format: DisplayFormat::B8G8R8A8Unorm.to_dxgi(),
            ..Default::default()
        };
        let bind = BindFlags::PRESENT | BindFlags::RENDER_TARGET;
        let back_buffer = device
            .create_resource(ResourceDesc::texture(surface, bind).unwrap())
            .unwrap();
        let args = PresentArgs {
            src: back_buffer,
            src_subresource: 0,
            dst: None,
            dxgi_context: DxgiContext(1),
            flags: PresentFlags::FLIP,
            flip_interval: 1,
        };
        let mut crcs = Vec::new();
        for value in [9u8, 0x5A] {
            ic.command(&SoftCommand::Fill {
                dst: back_buffer,
                value,
            })
            .unwrap();
            world.clear_trace();
            ic.present(&args).unwrap();
            let waits = world
                .trace()
                .iter()
                .filter(|e| e.hook == Hook::WaitForFence)
                .count();
            let expected = usize::from(gpu == Gpu::Manual);
            assert_eq!(waits, expected, "{gpu:?}: waits for the present's buffer");
            let bytes = world.read(allocation(&device, back_buffer)).unwrap();
            assert!(bytes.iter().all(|&b| b == value), "{gpu:?}");
            crcs.push(crc32(&bytes));
        }
        assert_ne!(crcs[0], crcs[1]);
        ic.destroy_device().unwrap();
        world.assert_clean();
        assert_eq!(sink.error(), None);
        sink.flush();
        let capture = output.0.lock().unwrap().clone();
        let recorded: Vec<_> = capture::FrameReader::new(&capture)
            .unwrap()
            .map(Result::unwrap)
            .filter(|f| f.kind == capture::Kind::Checksum as u16)
            .map(|f| f.payload.to_vec())
            .collect();
        assert_eq!(recorded.len(), 2, "{gpu:?}: one per present");
        for (payload, crc) in recorded.iter().zip(&crcs) {
            assert!(
                payload.windows(4).any(|w| w == crc.to_le_bytes()),
                "{gpu:?}: {crc:#x} in {payload:?}"
            );
        }
        let (device, mut ic, world) = setup_with(gpu, ListMode::Replayed, None);
        let report =
            capture::replay(&capture, &device, &mut ic).unwrap_or_else(|e| panic!("{gpu:?}: {e}"));
        assert_eq!(report.presents_checked, 2, "{gpu:?}");
        ic.destroy_device().unwrap();
        world.assert_clean();
    }
}

/// The device's stream as the contexts': a destroy that does not decode (an object the
/// capture never made) stops the replay where it succeeded and is passed over, counted,
/// where it was refused; a primary made and destroyed on the immediate context replays.
#[test]
fn device_records_naming_unknown_objects_and_primaries_replay_as_captured() {
    let refused = capture::Outcome::Err(app(AppError::StaleHandle)).code();
    for (outcome, stops) in [(0u8, true), (refused, false)] {
        let mut payload = vec![outcome];
        payload.extend(0x0001_0000_0000_0007u64.to_le_bytes()); // Destroy of object #7
        let file = one_record(capture::DEVICE_STREAM, capture::Kind::Destroy, &payload);
        let (device, mut ic, _world) = setup(ListMode::Replayed, None);
        let replayed = capture::replay(&file, &device, &mut ic);
        match stops {
            true => assert!(
                matches!(replayed, Err(ref e) if matches!(e.kind, capture::ReplayErrorKind::Decode(_))),
                "{replayed:?}"
            ),
            false => assert_eq!(replayed.map(|r| r.records).ok(), Some(1)),
        }
    }
    let output = Output::default();
    let sink = CaptureSink::new(output.clone()).unwrap();
    let (_device, mut ic, _world) = setup(ListMode::Replayed, Some(sink));
    let texture = cmdlist::Texture2d {
        width: 4,
        height: 4,
        format: cmdlist::dxgi::DisplayFormat::B8G8R8A8Unorm.to_dxgi(),
        ..Default::default()
    };
    let mut primary = ResourceDesc::texture(texture, BindFlags::PRESENT).unwrap();
    primary.flags = cmdlist::ResourceFlags::PRIMARY;
    let made = ic.create_primary(primary).unwrap();
    ic.destroy_primary(made).unwrap();
    assert_eq!(ic.destroy_primary(made), Err(app(AppError::StaleHandle)));
    ic.flush().unwrap();
    let capture = output.0.lock().unwrap().clone();
    let (device, mut ic, world) = setup(ListMode::Replayed, None);
    let report = capture::replay(&capture, &device, &mut ic).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        report.records, 4,
        "a create, two destroys (one refused), a flush"
    );
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// An execute of a list no capture made (named on the device's stream, as a capture names
/// another device's list) is passed over where it was refused; where it succeeded, or where
/// it names a deferred context's list that was never finished, the replay stops at it.
#[test]
fn executes_of_lists_no_capture_made_are_passed_over_only_when_refused() {
    let refused = capture::Outcome::Err(app(AppError::WrongDevice)).code();
    for (outcome, stream, passed) in [
        (refused, capture::DEVICE_STREAM, true),
        (0, capture::DEVICE_STREAM, false),
        (refused, capture::FIRST_DEFERRED_STREAM, false),
    ] {
        let mut payload = 0u64.to_le_bytes().to_vec();
        payload.push(outcome);
        payload.extend(stream.to_le_bytes());
        payload.extend(0u64.to_le_bytes());
        payload.push(0);
        let file = one_record(capture::IMMEDIATE_STREAM, capture::Kind::Execute, &payload);
        let (device, mut ic, _world) = setup(ListMode::Replayed, None);
        let replayed = capture::replay(&file, &device, &mut ic);
        match passed {
            true => assert_eq!(replayed.map(|r| r.records).ok(), Some(1)),
            false => assert_eq!(
                replayed.map_err(|e| e.kind).err(),
                Some(capture::ReplayErrorKind::UnknownList),
                "outcome {outcome}, stream {stream}"
            ),
        }
    }
}

/// The immediate context's binds, queries and ClearState, a deferred context's queries and
/// abandon, replay; and a deferred context that
/// executes a list a context of a later stream finished (its stream replayed after the
/// first's at the same device record) has that list finished first.
#[test]
fn immediate_state_calls_and_a_later_streams_list_replay() {
    use cmdlist::{BindClass, BindPoint};
    let output = Output::default();
    let sink = CaptureSink::new(output.clone()).unwrap();
    let (device, mut ic, world) = setup(ListMode::Replayed, Some(sink));
    let vertices = device
        .create_resource(desc(64, Usage::Default, BindFlags::VERTEX_BUFFER))
        .unwrap();
    let dst = device
        .create_resource(desc(64, Usage::Default, BindFlags::empty()))
        .unwrap();
    let query = device.create_query(cmdlist::QueryKind::Occlusion).unwrap();
    let (mut outer, mut inner) = (
        device.create_deferred_context().unwrap(),
        device.create_deferred_context().unwrap(),
    );
    let point = BindPoint::new(BindClass::VertexBuffer, 0);
    ic.bind(point, Some(vertices.any())).unwrap();
    ic.begin_query(query).unwrap();
    ic.command(&SoftCommand::Fill { dst, value: 6 }).unwrap();
    ic.end_query(query).unwrap();
    ic.clear_state().unwrap();
    // A deferred context's queries and abandon replay too.
    let event = device.create_query(cmdlist::QueryKind::Event).unwrap();
    inner.command(SoftCommand::Fill { dst, value: 9 }).unwrap();
    inner.abandon().unwrap();
    inner.begin_query(query).unwrap();
    inner.command(SoftCommand::Fill { dst, value: 7 }).unwrap();
    inner.end_query(query).unwrap();
    inner.end_query(event).unwrap();
    let inner_list = inner.finish().unwrap();
    outer.execute_command_list(&inner_list).unwrap();
    let outer_list = outer.finish().unwrap();
    // The later stream goes on after that Finish with an object made since: finishing its
    // list for the earlier stream replays up to the Finish, not past it.
    let made_after = device
        .create_resource(desc(64, Usage::Default, BindFlags::empty()))
        .unwrap();
    inner
        .command(SoftCommand::Fill {
            dst: made_after,
            value: 8,
        })
        .unwrap();
    drop(inner.finish().unwrap());
    ic.execute_command_list(&outer_list).unwrap();
    ic.flush().unwrap();
    drop((outer_list, inner_list, outer, inner));
    let want = world.read(allocation(&device, dst)).unwrap();
    assert_eq!(want, [7; 64]);
    let capture = output.0.lock().unwrap().clone();
    let (device, mut ic, world) = setup(ListMode::Replayed, None);
    let report = capture::replay(&capture, &device, &mut ic).unwrap_or_else(|e| panic!("{e}"));
    let replayed = report.object(dst).unwrap();
    assert_eq!(world.read(allocation(&device, replayed)).unwrap(), want);
}

/// The sink: `flush` writes the device's records without the immediate context's flush; a
/// sink that does not check presents records no checksum after a present; it debugs as its
/// count of device records.
#[test]
fn the_sink_flushes_on_demand_and_checks_presents_only_when_asked() {
    let output = Output::default();
    let sink = CaptureSink::new(output.clone()).unwrap();
    let (device, mut ic, world) = setup(ListMode::Replayed, Some(sink.clone()));
    let bind = BindFlags::PRESENT | BindFlags::RENDER_TARGET;
    let texture = cmdlist::Texture2d {
        width: 4,
        height: 4,
        format: cmdlist::dxgi::DisplayFormat::B8G8R8A8Unorm.to_dxgi(),
        ..Default::default()
    };
    let back_buffer = device
        .create_resource(ResourceDesc::texture(texture, bind).unwrap())
        .unwrap();
    assert_eq!(format!("{sink:?}"), "CaptureSink { device_records: 1, .. }");
    let header_only = output.0.lock().unwrap().len();
    assert_eq!(header_only, HEADER_LEN, "nothing written before a flush");
    sink.flush();
    let kinds = |bytes: &[u8]| -> Vec<u16> {
        capture::FrameReader::new(bytes)
            .unwrap()
            .map(|f| f.unwrap().kind)
            .collect()
    };
    let written = output.0.lock().unwrap().clone();
    assert!(kinds(&written).contains(&(capture::Kind::Create as u16)));
    let args = cmdlist::dxgi::PresentArgs {
        src: back_buffer,
        src_subresource: 0,
        dst: None,
        dxgi_context: cmdlist::dxgi::DxgiContext(0),
        flags: cmdlist::dxgi::PresentFlags::FLIP,
        flip_interval: 1,
    };
    ic.present(&args).unwrap();
    let written = output.0.lock().unwrap().clone();
    assert!(kinds(&written).contains(&(capture::Kind::Present as u16)));
    assert!(!kinds(&written).contains(&(capture::Kind::Checksum as u16)));
    drop(device);
    ic.destroy_device().unwrap();
    world.assert_clean();
}

/// Replayed with each deferred context on a thread of its own, a capture that ends with the
/// device's destruction (its deferred contexts dropped first) replays: each context's thread
/// has dropped its context before the destruction runs.
#[test]
fn a_replay_on_threads_drops_each_context_before_the_device_goes() {
    let output = Output::default();
    let sink = CaptureSink::new(output.clone()).unwrap();
    let (device, mut ic, _world) = setup(ListMode::Replayed, Some(sink));
    let dst = device
        .create_resource(desc(64, Usage::Default, BindFlags::empty()))
        .unwrap();
    for value in 0..4u8 {
        let mut dc = device.create_deferred_context().unwrap();
        dc.command(SoftCommand::Fill { dst, value }).unwrap();
        let list = dc.finish().unwrap();
        ic.execute_command_list(&list).unwrap();
    }
    ic.destroy_device().unwrap();
    let capture = output.0.lock().unwrap().clone();
    let threads =
        capture::ReplayOptions::default().with_threads(capture::ReplayThreads::PerContext);
    for _ in 0..20 {
        let (device, mut ic, _world) = setup(ListMode::Replayed, None);
        capture::replay_with(&capture, &device, &mut ic, threads).unwrap_or_else(|e| panic!("{e}"));
    }
}
