//! Records `N` draws on a warm deferred context and exits: the program `.ci/shared-writes`
//! runs twice under DHAT (valgrind's heap profiler, which counts the bytes written into
//! every heap block), with two values of `N`, to count the bytes a recorded draw writes into
//! memory the deferred context does not own (the device's, the registry's, the epoch
//! collector's, another context's), per draw.
//!
//! ```sh
//! cargo run -p cmdlist-benches --release --example draw_writes -- replayed 16
//! ```
//!
//! `.ci/run` builds it with line tables (`CARGO_PROFILE_RELEASE_DEBUG=line-tables-only`):
//! the recording path is inlined here, and the script knows the deferred context's inlined
//! frames by their source file.
//!
//! The draw and the warm-up are the instruction-count bench's (`common/draw.rs`); `N` draws
//! fit in the warm recording (at most 64), so that the two runs differ by the draws alone.

#[path = "../common/draw.rs"]
mod draw;

use cmdlist::ListMode;

fn main() {
    let mut args = std::env::args().skip(1);
    let usage = "usage: draw_writes replayed|driver-built|emulated N (N <= 64)";
    let mode = match args.next().as_deref() {
        Some("replayed") => ListMode::Replayed,
        Some("driver-built") => ListMode::DriverBuilt,
        Some("emulated") => ListMode::Emulated,
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let draws: u64 = match args.next().and_then(|n| n.parse().ok()) {
        Some(n) if n <= draw::PER_LIST => n,
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    };
    let (mut dc, ic, d) = draw::warm_device(mode, false, 0);
    let before = dc.stats().operations;
    for n in 0..draws {
        draw::draw_deferred(&mut dc, d, n);
    }
    assert_eq!(dc.stats().operations, before + 2 * draws as usize);
    println!("recorded {draws} draws");
    // Nothing is torn down: the two runs differ by the draws alone.
    std::mem::forget((dc, ic));
}
