//! The binary run over a small capture made here (one test per subcommand, each checking
//! its output), over the fuzz targets' committed seeds and over cut and damaged copies of
//! the capture: never a panic, and an exit status each case allows.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use cmdlist::capture::{CaptureSink, FrameReader, Kind, HEADER_LEN};
use cmdlist::dxgi::{DisplayFormat, DxgiContext, PresentArgs, PresentFlags};
use cmdlist::soft::{self, Gpu, SoftCommand, SoftConfig};
use cmdlist::{BindFlags, Clock, DeviceConfig, ListMode, ResourceDesc, Texture2d, Usage};

/// Where a capture sink writes: a vector the test reads after.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The surface's size.
const W: u32 = 8;
const H: u32 = 4;

/// A capture of two frames: a deferred context writing a ring through a Map, copying it
/// and finishing a list; the immediate context executing it, filling the surface with a
/// frame's byte and presenting it; a resource made and destroyed on the way.
fn capture() -> Vec<u8> {
    let out = Sink::default();
    let sink = CaptureSink::new(out.clone()).unwrap();
    sink.check_presents(true);
    let config = SoftConfig {
        gpu: Gpu::Immediate,
        trace: false,
        ..SoftConfig::default()
    }
    .with_list_mode(ListMode::DriverBuilt);
    let device_config = DeviceConfig::default()
        .with_retire_clock(Clock::Completed)
        .with_list_clock(Clock::Completed)
        .with_capture(sink);
    let (device, mut ic, _world) = soft::device(config, device_config).unwrap();
    let buffer = |bytes, usage, bind| ResourceDesc {
        byte_size: bytes,
        usage,
        bind,
        ..Default::default()
    };
    let ring = device
        .create_resource(buffer(64, Usage::Dynamic, BindFlags::VERTEX_BUFFER))
        .unwrap();
    let target = device
        .create_resource(buffer(64, Usage::Default, BindFlags::empty()))
        .unwrap();
    let shape = Texture2d {
        width: W,
        height: H,
        format: DisplayFormat::B8G8R8A8Unorm.to_dxgi(),
        ..Texture2d::default()
    };
    let surface = device
        .create_resource(
            ResourceDesc::texture(shape, BindFlags::PRESENT | BindFlags::RENDER_TARGET).unwrap(),
        )
        .unwrap();
    let mut dc = device.create_deferred_context().unwrap();
    for frame in 0..2u8 {
        dc.map_discard(ring).unwrap().fill(0xA0 + frame);
        dc.unmap(ring).unwrap();
        dc.command(SoftCommand::Copy {
            dst: target,
            src: ring,
        })
        .unwrap();
        let list = dc.finish().unwrap();
        let scratch = device
            .create_resource(buffer(16, Usage::Default, BindFlags::empty()))
            .unwrap();
        ic.execute_command_list(&list).unwrap();
        drop(list);
        device.destroy(scratch).unwrap();
        ic.command(&SoftCommand::Fill {
            dst: surface,
            value: 0x40 + frame,
        })
        .unwrap();
        ic.present(&PresentArgs {
            src: surface,
            src_subresource: 0,
            dst: None,
            dxgi_context: DxgiContext(0),
            flags: PresentFlags::FLIP,
            flip_interval: 1,
        })
        .unwrap();
        ic.flush().unwrap();
    }
    drop(dc);
    ic.destroy_device().unwrap();
    let bytes = out.0.lock().unwrap().clone();
    bytes
}

/// A file of `bytes` under the tests' scratch directory.
fn file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// A command-line argument of any kind (a `&str`, a path).
type Arg<'a> = &'a dyn AsRef<std::ffi::OsStr>;

/// The binary run with `args`.
fn run(args: &[Arg<'_>]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cmdlist-capture"));
    for arg in args {
        command.arg(arg);
    }
    command.output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// Ran to its end: exit 0, nothing on stderr.
fn ok(output: Output) -> String {
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(output.stderr.is_empty(), "{}", stderr(&output));
    stdout(&output)
}

/// The index of the first record of `kind` in `bytes`.
fn first(bytes: &[u8], kind: Kind) -> u64 {
    FrameReader::new(bytes)
        .unwrap()
        .map(Result::unwrap)
        .find(|f| f.kind == kind as u16)
        .unwrap()
        .record
}

#[test]
fn info_counts_contexts_lists_presents_and_map_bytes() {
    let path = file("info.capture", &capture());
    let out = ok(run(&[&"info", &path]));
    for line in [
        "format version: 1",
        "frames: 2 (presents)",
        "  device     stream   0: 10 records",
        "  dc 2       stream   2: 6 records, 2 lists finished",
        "lists: 2 made, 2 executed",
        "presents: 2",
        "written through Maps: 128 bytes in 2 records",
        "end: ends at a checkpoint: every record replays",
    ] {
        assert!(out.contains(line), "{line:?} not in:\n{out}");
    }
}

#[test]
fn info_says_where_a_capture_is_cut_or_damaged() {
    let bytes = capture();
    let cut = file("info-cut.capture", &bytes[..bytes.len() - 20]);
    let out = ok(run(&[&"info", &cut]));
    assert!(out.contains("end: cut (a crash's): record "), "{out}");
    let mut flipped = bytes.clone();
    flipped[HEADER_LEN + 20] ^= 4;
    let damaged = file("info-damaged.capture", &flipped);
    let out = ok(run(&[&"info", &damaged]));
    assert!(
        out.contains("end: damaged: record 0 at byte 16 is corrupt (checksum)"),
        "{out}"
    );
}

#[test]
fn dump_lists_records_in_replay_order_with_objects_and_outcomes() {
    let bytes = capture();
    let path = file("dump.capture", &bytes);
    let out = ok(run(&[&"dump", &path]));
    let lines: Vec<&str> = out.lines().filter(|l| !l.starts_with('#')).collect();
    let records = FrameReader::new(&bytes)
        .unwrap()
        .filter(|f| f.as_ref().unwrap().stream != u32::MAX)
        .count();
    assert_eq!(lines.len(), records, "{out}");
    // The creates first, the surface a texture; the deferred context's records before the
    // execute of its list; the objects by their slots.
    assert!(
        lines[0].contains("device     seq      0  Create resource#"),
        "{out}"
    );
    assert!(out.contains("texture 8x4 format 87"), "{out}");
    let finish = lines
        .iter()
        .position(|l| l.contains("Finish -> ok"))
        .unwrap();
    let execute = lines
        .iter()
        .position(|l| l.contains("Execute list dc 2/0"))
        .unwrap();
    assert!(finish < execute, "{out}");
    assert!(
        out.contains("Command Copy resource#1 <- resource#0 -> ok"),
        "{out}"
    );
    assert!(out.contains("# end: ends at a checkpoint"), "{out}");
    // Filters, and a Map's bytes.
    let maps = ok(run(&[&"dump", &path, &"--kind", &"mapunmap", &"--bytes"]));
    let maps: Vec<&str> = maps.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(
        maps.len(),
        6,
        "two MapUnmap records of 64 bytes, 2 hex lines each"
    );
    assert!(
        maps[0].contains("MapUnmap resource#0 WriteDiscard"),
        "{maps:?}"
    );
    assert!(maps[1].trim_start().starts_with("0  a0 a0 a0"), "{maps:?}");
    let present = first(&bytes, Kind::Present);
    let range = format!("{present}..={present}");
    let one = ok(run(&[
        &"dump",
        &path,
        &"--records",
        &range,
        &"--context",
        &"1",
    ]));
    let one: Vec<&str> = one.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(one.len(), 1, "{one:?}");
    assert!(one[0].contains("immediate") && one[0].contains("Present resource#2"));
    let unknown = run(&[&"dump", &path, &"--kind", &"nothing"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(stderr(&unknown).contains("--kind nothing: no record kind has that name"));
}

#[test]
fn stats_prints_each_frame_and_draws_a_chart() {
    let path = file("stats.capture", &capture());
    let png = Path::new(env!("CARGO_TARGET_TMPDIR")).join("stats.png");
    let out = ok(run(&[&"stats", &path, &"--png", &png]));
    // Two presents, and the records after the last (a flush, the device's destruction); the
    // deferred context's records in the frame that executes their list.
    assert!(out.contains("3 frames (ending at presents)"), "{out}");
    assert!(
        out.contains(" frame   records    device immediate      dc 2  map bytes"),
        "{out}"
    );
    assert!(
        out.contains("     0        13         7         3         3         64"),
        "{out}"
    );
    assert!(
        out.contains("     1        12         3         6         3         64"),
        "{out}"
    );
    assert!(
        out.contains("lists: 2 finished, records per list: min 2, median 2, max 2"),
        "{out}"
    );
    let decoder = png::Decoder::new(io::BufReader::new(std::fs::File::open(&png).unwrap()));
    let reader = decoder.read_info().unwrap();
    assert_eq!(reader.info().width, 800);
}

#[test]
fn replay_replays_up_to_a_record_and_writes_the_last_picture() {
    let bytes = capture();
    let path = file("replay.capture", &bytes);
    let png = Path::new(env!("CARGO_TARGET_TMPDIR")).join("replay.png");
    for mode in ["replayed", "driver-built", "emulated"] {
        let out = ok(run(&[
            &"replay",
            &path,
            &"--mode",
            &mode,
            &"--gpu",
            &"immediate",
            &"--png",
            &png,
        ]));
        assert!(
            out.contains("every call answering as captured; 2 presented pictures found the same"),
            "{out}"
        );
        let decoder = png::Decoder::new(io::BufReader::new(std::fs::File::open(&png).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut rgba = vec![0; reader.output_buffer_size().unwrap()];
        reader.next_frame(&mut rgba).unwrap();
        assert_eq!((reader.info().width, reader.info().height), (W, H));
        assert_eq!(
            &rgba[..4],
            &[0x41, 0x41, 0x41, 255],
            "the second frame's fill"
        );
    }
    // Up to the first present: the first frame's picture.
    let present = first(&bytes, Kind::Present).to_string();
    let out = ok(run(&[
        &"replay",
        &path,
        &"--gpu",
        &"immediate",
        &"--until",
        &present,
        &"--png",
        &png,
        &"--threads",
        &"per-context",
    ]));
    assert!(out.contains(&format!("(up to record {present})")), "{out}");
    let decoder = png::Decoder::new(io::BufReader::new(std::fs::File::open(&png).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut rgba = vec![0; reader.output_buffer_size().unwrap()];
    reader.next_frame(&mut rgba).unwrap();
    assert_eq!(
        &rgba[..4],
        &[0x40, 0x40, 0x40, 255],
        "the first frame's fill"
    );
    // A record no replay reaches.
    let beyond = run(&[&"replay", &path, &"--until", &"100000"]);
    assert_eq!(beyond.status.code(), Some(2));
    assert!(
        stderr(&beyond).contains("--until 100000: the capture has"),
        "{}",
        stderr(&beyond)
    );
}

#[test]
fn diff_finds_the_first_record_that_differs() {
    let bytes = capture();
    let a = file("diff-a.capture", &bytes);
    // Another run of the same calls, on a device whose handles have other bits.
    let again = capture();
    assert_ne!(again, bytes, "the handles' generations start elsewhere");
    let b = file("diff-b.capture", &again);
    let same = ok(run(&[&"diff", &a, &b]));
    assert!(same.starts_with("same: 29 records"), "{same}");
    // The second frame's fill byte changed, its checksum made right: a record that differs
    // in its arguments, at its own record in both.
    let fills: Vec<_> = FrameReader::new(&bytes)
        .unwrap()
        .map(Result::unwrap)
        .filter(|f| f.kind == Kind::Command as u16 && f.stream == 1)
        .map(|f| {
            (
                f.record,
                f.offset as usize,
                f.stream,
                f.kind,
                f.payload.len(),
            )
        })
        .collect();
    let (record, offset, stream, kind, len) = *fills.last().unwrap();
    let mut other = bytes.clone();
    let payload = offset + 16;
    other[payload + len - 1] ^= 0x01;
    let mut crc = crc32(&stream.to_le_bytes());
    crc = crc32_more(crc, &kind.to_le_bytes());
    crc = crc32_more(crc, &[0, 0]);
    crc = crc32_more(crc, &other[payload..payload + len]);
    other[offset + 4..offset + 8].copy_from_slice(&crc.to_le_bytes());
    let b = file("diff-b.capture", &other);
    let out = run(&[&"diff", &a, &b]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let out = stdout(&out);
    assert!(
        out.contains(&format!(" record {record}, "))
            && out.contains("(the arguments or the outcome differs)"),
        "{out}"
    );
    assert!(
        out.contains("> ") && out.contains("Fill resource#2 with 0x41"),
        "{out}"
    );
    assert!(out.contains("Fill resource#2 with 0x40 -> ok"), "{out}");
    // One cut short: the shorter is named.
    let cut = file("diff-cut.capture", &bytes[..bytes.len() / 2]);
    let out = run(&[&"diff", &a, &cut]);
    assert_eq!(out.status.code(), Some(1));
    // Unreadable: 2.
    let missing = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no such file");
    let out = run(&[&"diff", &a, &missing]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no such file: cannot read"),
        "{}",
        stderr(&out)
    );
}

/// CRC-32 (IEEE), bit by bit: the frames' checksum, without a dependency.
fn crc32(bytes: &[u8]) -> u32 {
    crc32_more(0, bytes)
}

fn crc32_more(crc: u32, bytes: &[u8]) -> u32 {
    let mut crc = !crc;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// Every subcommand over `path`: no panic, and an exit status each allows.
fn every_subcommand(path: &Path, other: &Path) {
    let png = Path::new(env!("CARGO_TARGET_TMPDIR")).join("any.png");
    let runs: Vec<(Vec<Arg<'_>>, &[i32])> = vec![
        (vec![&"info", &path], &[0, 2]),
        (vec![&"dump", &path, &"--bytes"], &[0, 2]),
        (
            vec![&"dump", &path, &"--context", &"2", &"--records", &"3..40"],
            &[0, 2],
        ),
        (vec![&"stats", &path, &"--png", &png], &[0, 2]),
        (vec![&"replay", &path, &"--gpu", &"immediate"], &[0, 1, 2]),
        (
            vec![
                &"replay",
                &path,
                &"--until",
                &"5",
                &"--mode",
                &"emulated",
                &"--png",
                &png,
            ],
            &[0, 1, 2],
        ),
        (vec![&"diff", &path, &other], &[0, 1, 2]),
        (vec![&"diff", &other, &path], &[0, 1, 2]),
    ];
    for (args, allowed) in runs {
        let out = run(&args);
        let err = stderr(&out);
        let code = out.status.code();
        assert!(
            code.is_some_and(|c| allowed.contains(&c)),
            "{:?} {}: exit {code:?}\n{err}",
            args.first().map(|a| a.as_ref().to_owned()),
            path.display()
        );
        assert!(!err.contains("panicked"), "{}: {err}", path.display());
        if code == Some(2) {
            assert!(err.starts_with("cmdlist-capture: "), "{err}");
        }
    }
}

#[test]
fn the_fuzz_seeds_never_panic_it() {
    let reference = file("seeds-reference.capture", &capture());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    let header = &capture()[..HEADER_LEN];
    let mut seen = 0;
    for (target, as_read) in [
        // The replay target's first byte picks a list mode; the rest is the file.
        (
            "capture_replay",
            (|b: &[u8], _: &[u8]| b.get(1..).unwrap_or(&[]).to_vec())
                as fn(&[u8], &[u8]) -> Vec<u8>,
        ),
        // The reader's target reads its bytes after a valid header, too.
        ("capture_reader", |b: &[u8], h: &[u8]| [h, b].concat()),
    ] {
        for entry in std::fs::read_dir(root.join(target)).unwrap() {
            let seed = entry.unwrap().path();
            let bytes = std::fs::read(&seed).unwrap();
            every_subcommand(&seed, &reference);
            let name = format!(
                "seed-{target}-{}",
                seed.file_name().unwrap().to_string_lossy()
            );
            let read = file(&name, &as_read(&bytes, header));
            every_subcommand(&read, &reference);
            seen += 1;
        }
    }
    assert!(seen >= 2, "the seeds are there");
}

#[test]
fn cut_and_damaged_captures_never_panic_it() {
    let bytes = capture();
    let reference = file("damage-reference.capture", &bytes);
    let step = (bytes.len() / 23).max(1);
    let mut cuts = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        cuts.push(bytes[..at].to_vec());
        let mut flipped = bytes.clone();
        flipped[at] ^= 1 << (at % 8);
        cuts.push(flipped);
        at += step;
    }
    for (i, damaged) in cuts.iter().enumerate() {
        let path = file(&format!("damaged-{i}.capture"), damaged);
        every_subcommand(&path, &reference);
    }
}
