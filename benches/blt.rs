//! The CPU reference Blt on a 1920x1080 destination, in one criterion group (`blt`).
//!
//! Each case writes the whole destination from a source filled with pseudo-random bytes
//! (pseudo-random binary16 values in `[0, 1]` for the float source), so per-code tables are
//! read in no particular order, as with real content:
//!
//! - `copy_b8g8r8a8`: same format, same size, no rotation: the row-copy path.
//! - `f16_to_b8g8r8a8`: `R16G16B16A16_FLOAT` to `B8G8R8A8_UNORM`, same size: a linear frame
//!   presented to an 8-bit display, through the general path (decode, encode with the sRGB
//!   curve, quantise).
//! - `srgb8_to_f16`: `R8G8B8A8_UNORM_SRGB` to `R16G16B16A16_FLOAT`, same size: the sRGB
//!   curve decode and the round toward zero to binary16, per code through a table.
//! - `stretch_2x_b8g8r8a8`: 960x540 to 1920x1080 in `B8G8R8A8_UNORM`: the bilinear filter.
//! - `stretch_2x_srgb8_to_b8g8r8a8`: 960x540 `R8G8B8A8_UNORM_SRGB` to 1920x1080
//!   `B8G8R8A8_UNORM` (the main job's canvas): the filter in linear light, each value decoded
//!   with the sRGB curve by table, and encoded with it again before quantising.
//! - `rotate90_b8g8r8a8`: 1080x1920 to 1920x1080, same format, rotated 90 degrees: a gather
//!   walking source columns.
//!
//! The floors are a plain `copy_from_slice` of as many bytes as the destination holds:
//! `floor_copy_from_slice` for the 4-byte destinations, `floor_copy_from_slice_f16` for the
//! 8-byte one. No Blt can write its destination faster than that, so `time / floor` is what
//! the reading, the addressing and the conversion cost on top of the memory traffic.

use std::hint::black_box;

use cmdlist::dxgi::reference::{blt, Pixels, PixelsMut};
use cmdlist::dxgi::{DisplayFormat, Rect, Rotation};
use criterion::{criterion_group, criterion_main, Criterion};

/// Destination width.
const W: u32 = 1920;
/// Destination height.
const H: u32 = 1080;

/// `len` pseudo-random bytes (xorshift32).
fn noise(len: usize) -> Vec<u8> {
    let mut s = 0x9E37_79B9u32;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 24) as u8
        })
        .collect()
}

/// One case: a `sw` by `sh` source of `src` format Blted whole onto a `W` by `H`
/// destination of `dst` format.
fn case(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    (src, sw, sh): (DisplayFormat, u32, u32),
    dst: DisplayFormat,
    rotation: Rotation,
) {
    let mut src_bytes = noise((sw * sh) as usize * src.bytes_per_pixel());
    if src.is_float() {
        // Binary16 values in [0, 1], as a linear frame holds.
        for h in src_bytes.chunks_exact_mut(2) {
            let v = f32::from(u16::from_le_bytes([h[0], h[1]])) / 65535.0;
            h.copy_from_slice(&half::f16::from_f32(v).to_le_bytes());
        }
    }
    let mut dst_bytes = vec![0u8; (W * H) as usize * dst.bytes_per_pixel()];
    c.bench_function(name, |b| {
        b.iter(|| {
            let source = Pixels {
                width: sw,
                height: sh,
                samples: 1,
                format: src,
                bytes: black_box(&src_bytes),
            };
            let target = PixelsMut {
                width: W,
                height: H,
                format: dst,
                bytes: &mut dst_bytes,
            };
            blt(
                source,
                Rect::whole(sw, sh),
                target,
                Rect::whole(W, H),
                rotation,
            )
            .expect("blt");
            black_box(&dst_bytes);
        })
    });
}

/// A plain copy of `bytes_per_pixel * W * H` bytes.
fn floor(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    bytes_per_pixel: usize,
) {
    let src = noise((W * H) as usize * bytes_per_pixel);
    let mut dst = vec![0u8; src.len()];
    c.bench_function(name, |b| {
        b.iter(|| {
            dst.copy_from_slice(black_box(&src));
            black_box(&dst);
        })
    });
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("blt");
    let bgra = DisplayFormat::B8G8R8A8Unorm;
    floor(&mut group, "floor_copy_from_slice", 4);
    case(
        &mut group,
        "copy_b8g8r8a8",
        (bgra, W, H),
        bgra,
        Rotation::Identity,
    );
    floor(&mut group, "floor_copy_from_slice_f16", 8);
    case(
        &mut group,
        "srgb8_to_f16",
        (DisplayFormat::R8G8B8A8UnormSrgb, W, H),
        DisplayFormat::R16G16B16A16Float,
        Rotation::Identity,
    );
    case(
        &mut group,
        "f16_to_b8g8r8a8",
        (DisplayFormat::R16G16B16A16Float, W, H),
        bgra,
        Rotation::Identity,
    );
    case(
        &mut group,
        "stretch_2x_b8g8r8a8",
        (bgra, W / 2, H / 2),
        bgra,
        Rotation::Identity,
    );
    case(
        &mut group,
        "stretch_2x_srgb8_to_b8g8r8a8",
        (DisplayFormat::R8G8B8A8UnormSrgb, W / 2, H / 2),
        bgra,
        Rotation::Identity,
    );
    case(
        &mut group,
        "rotate90_b8g8r8a8",
        (bgra, H, W),
        bgra,
        Rotation::Rotate90,
    );
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
