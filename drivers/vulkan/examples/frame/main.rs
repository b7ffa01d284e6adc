//! # frame on Vulkan: the main job's frames on the Vulkan driver
//!
//! The root crate's main job (`examples/frame/main.rs`) over [`cmdlist_vulkan`] instead of
//! the soft driver: the same scene and frames (`examples/frame/shared.rs`, included here),
//! `WORKERS` deferred contexts recording on their own threads every frame, constants rings
//! (Map(DISCARD), then Map(NO_OVERWRITE) appends), small lists destroyed on other threads
//! and recycled, one list per canvas tile, then the immediate context's executes, the Blt
//! of the sRGB canvas stretched 2x into the `B8G8R8A8_UNORM` back buffer (a compute
//! dispatch), the headless present and the swap chain's rotation.
//!
//! * **Checks.** A soft reference device runs the same commands single-threaded on its
//!   immediate context every frame (the soft job's reference). After each frame every
//!   resource the lists wrote (the workers' targets, constant and staging buffers, the back
//!   buffer, the canvas) must hold the soft device's bytes exactly; the swap chain's
//!   surfaces and the presented screen, the Blt's output, within one code per channel (the
//!   GPU blends in floating point). With the default frame count the last presented picture
//!   is compared with `docs/frame.png`, the soft job's (the max difference and the count of
//!   differing bytes are printed; more than one code fails). After `destroy_device`: no
//!   violation of the protocol the Vulkan kernel checks, no validation-layer message, no
//!   error reported, no allocation left. Any failure exits with status 1, as does the lack
//!   of a Vulkan device.
//! * **List mode.** `--mode driver-built|replayed|emulated` (parsed as the soft job parses
//!   it; default `driver-built`, as the soft job's): the driver builds the lists in secondary
//!   command buffers on the recording threads, the engine replays them into the immediate
//!   context's primary, or the driver has no command lists. The first line says which.
//!
//! * **Replay.** `--replay PATH` (feature `capture`) replays a capture of the soft job
//!   (`cargo run --release --example frame -- --capture PATH`) on this driver instead, in
//!   `--mode`, every call checked to answer as captured but the readback's polls, which
//!   follow this GPU's pace ([`cmdlist::capture::Timing::Any`]), and its last picture against
//!   docs/frame.png within one code.
//!
//! Run: `cargo run -p cmdlist-vulkan --release --example frame -- --out PATH`
//! (`--mode M`, `--frames N`, `--help`: the usage, exit status 0; a command line it does not
//! understand: the usage, status 2). Its tests (`cargo test -p cmdlist-vulkan --example
//! frame`) run a short job in each mode.

#[path = "../../../../examples/frame/shared.rs"]
mod shared;

use std::path::PathBuf;
use std::process::exit;

use cmdlist::soft::{self, Gpu, SoftConfig};
use cmdlist::{Clock, DeviceConfig, ListMode};
use cmdlist_vulkan::{VulkanConfig, VulkanDriver, VulkanKernel};

use shared::{Recycling, Res, Scene, FRAMES, MIN_HIT_RATE, SCREEN_H, SCREEN_W, SURFACES};
use shared::{WARMUP, WORKERS};

type DeferredContext = cmdlist::DeferredContext<VulkanDriver, VulkanKernel>;
type CommandList = cmdlist::CommandList<VulkanDriver, VulkanKernel>;

/// The soft job's last presented picture (RGBA), which the default run must match within
/// one code per channel.
const REFERENCE_PNG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/frame.png");

/// What the command line asks for.
#[derive(Clone, Debug)]
struct Options {
    /// The last presented frame's picture: `--out PATH`, else `frame-vulkan.png`.
    out: PathBuf,
    /// `--mode replayed|driver-built|emulated`, else driver-built.
    mode: ListMode,
    /// `--frames N` (more than `WARMUP`), else `FRAMES`.
    frames: u32,
    /// Replay a capture of the soft job instead of running the scene: `--replay PATH`
    /// (feature `capture`).
    replay: Option<PathBuf>,
}

/// What the command line asks the program to do.
#[derive(Debug)]
enum Command {
    /// Run the job.
    Run(Options),
    /// `--help` or `-h`: print the usage.
    Help,
}

const USAGE: &str = "\
usage: frame [--mode replayed|driver-built|emulated] [--out PATH] [--frames N]
             [--replay PATH]

Runs the soft job's frames on the Vulkan driver (a Vulkan 1.2 device: lavapipe will do),
checks the lists' bytes against the soft driver's every frame and the last picture against
docs/frame.png.

  --mode M     how the driver holds command lists (default driver-built):
                 driver-built  secondary command buffers recorded on the recording threads
                 replayed      the engine records each list and replays it at execute
                 emulated      a driver without command lists; the engine emulates them
  --out PATH   the last presented frame as a PNG (default frame-vulkan.png)
  --frames N   frames to run, more than the 2 warm-up frames (default 8)
  --replay P   replay a capture of the soft job (its --capture) on this driver instead,
               and check its last picture against docs/frame.png (feature capture)
  -h, --help   print this and exit";

impl Options {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Command, String> {
        let mut options = Options {
            out: "frame-vulkan.png".into(),
            mode: ListMode::DriverBuilt,
            frames: FRAMES,
            replay: None,
        };
        while let Some(flag) = args.next() {
            if flag == "--help" || flag == "-h" {
                return Ok(Command::Help);
            }
            if !["--out", "--mode", "--frames", "--replay"].contains(&flag.as_str()) {
                return Err(format!("unknown argument {flag:?}"));
            }
            let value = args.next().ok_or(format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--out" => options.out = value.into(),
                "--mode" => options.mode = shared::parse_mode(&value)?,
                "--replay" => options.replay = Some(value.into()),
                _ => {
                    options.frames = value
                        .parse()
                        .map_err(|_| format!("--frames {value:?}: not a number of frames"))?
                }
            }
        }
        if options.frames <= WARMUP {
            return Err(format!(
                "--frames must be more than the {WARMUP} warm-up frames"
            ));
        }
        Ok(Command::Run(options))
    }
}

/// The largest difference between two byte strings of one length, and how many bytes differ.
fn difference(a: &[u8], b: &[u8]) -> Res<(u8, usize)> {
    if a.len() != b.len() {
        return Err(format!("{} bytes against {}", a.len(), b.len()).into());
    }
    let diffs = a.iter().zip(b).map(|(&x, &y)| x.abs_diff(y));
    Ok(diffs.fold((0, 0), |(max, n), d| (max.max(d), n + usize::from(d != 0))))
}

/// Writes RGBA bytes as a PNG.
fn write_png(path: &std::path::Path, width: u32, height: u32, rgba: &[u8]) -> Res {
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut encoder = png::Encoder::new(file, width, height);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.write_header()?.write_image_data(rgba)?;
    Ok(())
}

/// Reads an 8-bit RGBA PNG.
fn read_png(path: &str) -> Res<Vec<u8>> {
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path)?));
    let mut reader = decoder.read_info()?;
    let mut rgba = vec![0; reader.output_buffer_size().ok_or("PNG too large")?];
    let info = reader.next_frame(&mut rgba)?;
    if (info.color_type, info.bit_depth) != (png::ColorType::Rgba, png::BitDepth::Eight) {
        return Err(format!("{path}: not 8-bit RGBA").into());
    }
    rgba.truncate(info.buffer_size());
    Ok(rgba)
}

/// What a run found.
#[derive(Debug)]
struct Summary {
    /// The list mode the device ran in.
    mode: ListMode,
    /// The largest difference of the presented screens from the soft reference's, over
    /// every frame.
    screen_diff: u8,
    /// The last picture's difference from `docs/frame.png` (max, differing bytes), when the
    /// run had the default frame count.
    against_docs: Option<(u8, usize)>,
    /// `vkCmdExecuteCommands` recorded (driver-built lists executed).
    execute_commands: u64,
}

/// The job; `Ok(None)` (the reason printed) where no Vulkan device could be made.
fn run(options: &Options) -> Res<Option<Summary>> {
    let frames = options.frames;
    println!(
        "lists: {}, {frames} frames, on the Vulkan driver",
        shared::mode_name(options.mode)
    );
    // As the soft job: kernel memory and command-list memory reused only once the GPU is
    // done with the buffer that used them.
    let config = DeviceConfig::default()
        .with_retire_clock(Clock::Completed)
        .with_list_clock(Clock::Completed);
    let (device, mut ic, world) =
        match cmdlist_vulkan::device(VulkanConfig::for_mode(options.mode), config.clone()) {
            Ok(made) => made,
            Err(e) => {
                eprintln!("frame: no Vulkan device: {e}");
                return Ok(None);
            }
        };
    if device.list_mode() != options.mode {
        return Err(format!("asked for {:?}, got {:?}", options.mode, device.list_mode()).into());
    }
    println!(
        "device: {} (lists {:?}, validation {})",
        world.device_name(),
        device.list_mode(),
        if world.validation_enabled() {
            "on"
        } else {
            "not installed"
        }
    );
    let soft = SoftConfig {
        gpu: Gpu::Immediate,
        trace: false,
        ..SoftConfig::default()
    };
    let (ref_device, mut ref_ic, ref_world) = soft::device(soft, config)?;
    let (scene, ref_scene) = (Scene::create(&device)?, Scene::create(&ref_device)?);
    let mut contexts: Vec<DeferredContext> = (0..WORKERS)
        .map(|_| device.create_deferred_context())
        .collect::<Result<_, _>>()?;
    let mut handed: Vec<Vec<CommandList>> = (0..WORKERS).map(|_| Vec::new()).collect();
    let mut history = shared::History::default();
    let (mut recycling_before, mut warm) = (Recycling::default(), Recycling::default());
    let (start, mut screen_diff, mut screen) = (std::time::Instant::now(), 0, Vec::new());

    for f in 0..frames {
        let frame_start = std::time::Instant::now();
        let thread_name = |w| format!("deferred {w}");
        let done = shared::frame(
            &device,
            &mut ic,
            &scene,
            &mut contexts,
            &mut handed,
            &mut history,
            f,
            None,
            thread_name,
        )?;
        let frame_time = frame_start.elapsed();
        shared::reference(&ref_device, &mut ref_ic, &ref_scene, f, &history)?;

        // The presented screens: the Blt's output, within one code.
        screen = world.screen().ok_or("nothing was presented")?;
        let ref_screen = ref_world
            .screen()
            .ok_or("the reference presented nothing")?;
        let (max, _) = difference(&screen, &ref_screen)?;
        if max > 1 {
            return Err(format!("frame {f}: the screen differs by {max} codes").into());
        }
        screen_diff = screen_diff.max(max);
        // Every resource: the lists' bytes exactly, the swap chain's within one code.
        world.wait_gpu()?;
        let read = |memory, object: &cmdlist_vulkan::VulkanObject| {
            world.read(memory, usize::try_from(object.byte_size).ok()?)
        };
        let got = scene.contents(&device, read)?;
        let want = ref_scene.contents(&ref_device, |memory, _| ref_world.read(memory))?;
        let exact = got.len() - SURFACES;
        if got[..exact] != want[..exact] {
            let which = (0..exact).find(|&i| got[i] != want[i]).unwrap_or(0);
            return Err(format!("frame {f}: resource {which} differs from the soft run").into());
        }
        for (g, w) in got[exact..].iter().zip(&want[exact..]) {
            let (max, _) = difference(g, w)?;
            if max > 1 {
                return Err(format!("frame {f}: a back buffer differs by {max} codes").into());
            }
        }
        let lists_now = Recycling::of(&contexts);
        println!(
            "frame {f} {:6.1} ms | {} lists, {:3.0}% recycled | canvas and buffers identical to \
             soft, screen within {max}",
            frame_time.as_secs_f64() * 1e3,
            done.lists,
            100.0 * lists_now.hit_rate_since(&recycling_before),
        );
        recycling_before = lists_now;
        if f + 1 == WARMUP {
            warm = lists_now;
        }
    }

    drop(handed);
    let steady = Recycling::of(&contexts).hit_rate_since(&warm);
    let elapsed = start.elapsed();
    let execute_commands = world.execute_commands();
    drop(contexts);
    ic.destroy_device()?;
    ref_ic.destroy_device()?;
    // The readback's polls that found the GPU still drawing are reported too (R-E2).
    let unexpected = |errors: Vec<(cmdlist::ContextId, cmdlist::Error)>| -> Vec<_> {
        errors
            .into_iter()
            .filter(|(_, e)| !shared::is_poll(e))
            .collect()
    };
    let problems = (
        world.violations(),
        world.validation_messages(),
        unexpected(world.errors()),
        world.live_allocations() + world.zombie_allocations(),
    );
    println!(
        "summary: {frames} frames x {WORKERS} workers in {elapsed:.2?} (lists {:?}); {} \
         violation(s), {} validation message(s), {} error(s), {} allocation(s) left; \
         recycling {:.1}% after the first {WARMUP} frames; {execute_commands} \
         vkCmdExecuteCommands",
        options.mode,
        problems.0.len(),
        problems.1.len(),
        problems.2.len(),
        problems.3,
        100.0 * steady,
    );
    for v in &problems.0 {
        println!("  violation {}: {}", v.rule, v.what);
    }
    for m in &problems.1 {
        println!("  validation: {m}");
    }
    if !problems.0.is_empty() || !problems.1.is_empty() || !problems.2.is_empty() {
        return Err("the Vulkan kernel or the validation layer saw problems".into());
    }
    if problems.3 != 0 {
        return Err("allocations left after destroy_device (R-D3)".into());
    }
    if unexpected(ref_world.errors()).len() + ref_world.check_after_device_destroyed().len() != 0 {
        return Err("the soft reference saw rules broken".into());
    }
    if steady < MIN_HIT_RATE {
        let need = 100.0 * MIN_HIT_RATE;
        let got = 100.0 * steady;
        return Err(format!("steady state recycles {got:.1}% of the lists, below {need}%").into());
    }

    // The picture the soft job writes: the screen scaled up, over the legend.
    let (width, height, rgba) = shared::picture(&screen, &history);
    write_png(&options.out, width, height, &rgba)?;
    let against_docs = if frames == FRAMES {
        let (max, count) = difference(&rgba, &read_png(REFERENCE_PNG)?)?;
        println!(
            "against docs/frame.png: max difference {max} code(s), {count} of {} bytes differ",
            rgba.len()
        );
        if max > 1 {
            return Err("the picture differs from docs/frame.png by more than one code".into());
        }
        Some((max, count))
    } else {
        None
    };
    println!(
        "frame: the last presented frame ({SCREEN_W}x{SCREEN_H}, shown 2x over its legend) is in {}",
        options.out.display()
    );
    Ok(Some(Summary {
        mode: options.mode,
        screen_diff,
        against_docs,
        execute_commands,
    }))
}

/// `--replay PATH`: a capture of the soft job replayed on this driver in `--mode`, every
/// call checked to answer as captured but the readback's polls, which follow this GPU's pace
/// ([`cmdlist::capture::Timing::Any`]); the last presented picture within one code of
/// docs/frame.png, and the same checks after `destroy_device` as the job's.
#[cfg(feature = "capture")]
fn replay(options: &Options, path: &std::path::Path) -> Res<Option<Summary>> {
    use cmdlist::capture::{self, Timing};
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let config = DeviceConfig::default()
        .with_retire_clock(Clock::Completed)
        .with_list_clock(Clock::Completed);
    let (device, mut ic, world) =
        match cmdlist_vulkan::device(VulkanConfig::for_mode(options.mode), config) {
            Ok(made) => made,
            Err(e) => {
                eprintln!("frame: no Vulkan device: {e}");
                return Ok(None);
            }
        };
    let replay = capture::ReplayOptions::default().with_timing(Timing::Any);
    let report = capture::replay_with(&bytes, &device, &mut ic, replay)?;
    if let Some(tail) = report.tail {
        println!("replay: the capture ends early: {tail}");
    }
    let presents = capture::FrameReader::new(&bytes)?
        .filter_map(Result::ok)
        .filter(|f| f.kind == capture::Kind::Present as u16)
        .count();
    let mut history = shared::History::default();
    for _ in 0..presents {
        history.push(Vec::new());
    }
    let screen = world.screen().ok_or("the capture presents nothing")?;
    let execute_commands = world.execute_commands();
    // The records replayed, counted as the soft job counts them.
    let records = report.records;
    drop(report);
    if !ic.device().is_removed() {
        ic.destroy_device()?;
    }
    let (violations, messages) = (world.violations(), world.validation_messages());
    let left = world.live_allocations() + world.zombie_allocations();
    if !violations.is_empty() || !messages.is_empty() || left != 0 {
        return Err(format!(
            "after the replay: {violations:?}, validation {messages:?}, {left} allocation(s) left"
        )
        .into());
    }
    let (width, height, rgba) = shared::picture(&screen, &history);
    write_png(&options.out, width, height, &rgba)?;
    let (max, count) = difference(&rgba, &read_png(REFERENCE_PNG)?)?;
    println!(
        "replay: {} records of {} on the Vulkan driver ({} lists), {presents} presents; against \
         docs/frame.png: max difference {max} code(s), {count} bytes differ; the last in {}",
        records,
        path.display(),
        shared::mode_name(options.mode),
        options.out.display()
    );
    if max > 1 {
        return Err("the picture differs from docs/frame.png by more than one code".into());
    }
    Ok(Some(Summary {
        mode: options.mode,
        screen_diff: max,
        against_docs: Some((max, count)),
        execute_commands,
    }))
}

/// `--replay` without the feature that replays.
#[cfg(not(feature = "capture"))]
fn replay(_: &Options, _: &std::path::Path) -> Res<Option<Summary>> {
    Err(
        "--replay needs the feature `capture`: cargo run -p cmdlist-vulkan --features capture ..."
            .into(),
    )
}

/// The last picture against `docs/frame.png`, in words.
fn against_docs(difference: Option<(u8, usize)>) -> String {
    match difference {
        Some((0, _)) => "the last picture is docs/frame.png exactly".to_string(),
        Some((max, count)) => format!(
            "the last picture within {max} code(s) of docs/frame.png ({count} byte(s) differ)"
        ),
        None => "the last picture not compared with docs/frame.png (not the default frame count)"
            .to_string(),
    }
}

#[cfg(test)]
mod tests;

fn main() {
    let options = match Options::parse(std::env::args().skip(1)) {
        Ok(Command::Run(options)) => options,
        Ok(Command::Help) => {
            println!("{USAGE}");
            return;
        }
        Err(why) => {
            eprintln!("frame: {why}\n{USAGE}");
            exit(2);
        }
    };
    let job = match &options.replay {
        Some(path) => replay(&options, path),
        None => run(&options),
    };
    match job {
        Ok(Some(s)) => println!(
            "frame: OK (lists {}; screens within {} code(s) of the soft driver's; {}; {} \
             vkCmdExecuteCommands)",
            shared::mode_name(s.mode),
            s.screen_diff,
            against_docs(s.against_docs),
            s.execute_commands
        ),
        Ok(None) => {
            eprintln!("frame: FAILED: no Vulkan device");
            exit(1);
        }
        Err(e) => {
            eprintln!("frame: FAILED: {e}");
            exit(1);
        }
    }
}
