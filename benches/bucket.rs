//! The CLS bucket allocator beside its baselines, in one criterion group (`bucket`).
//!
//! Every function runs the same churn: allocate 64 zeroed blocks of a mix of typical
//! context-local handle sizes (48, 96 and 160 bytes, in turn), write one byte into each,
//! then give them all back in allocation order. Containers are built and warmed outside the
//! timed loop, so each measures its steady state:
//!
//! - `cmdlist`: `BucketAllocator::alloc`/`bytes_mut`/`free`: a size-class lookup, a free-list
//!   pop, zeroing exactly the requested bytes; blocks never straddle a cache line they need
//!   not (R-L1). No page is allocated after warm-up.
//! - `box`: `vec![0u8; n].into_boxed_slice()` and drop: the global allocator (zeroed
//!   allocation and free per block), what a driver would get without a CLS allocator.
//! - `slab`: one warmed `slab::Slab<[u8; N]>` per size, `insert([0; N])` then `remove`: an
//!   index-keyed pool with LIFO slot reuse, no cache-line placement, the value moved in and
//!   out on insert and remove.
//!
//! What the numbers leave out: `slab` knows each size at compile time (`[u8; N]`), so its
//! zeroing is inlined, while CLS sizes come from the driver at run time and `cmdlist` zeroes
//! with a `memset` call (about 3 ns a block here); and the loop is too small for the cache
//! placement of R-L1 to show (`slab` packs 48-byte values across line boundaries).

use std::hint::black_box;

use cmdlist::bucket::BucketAllocator;
use cmdlist::{HandleSize, HandleSizeTable, HandleType};
use criterion::{criterion_group, criterion_main, Criterion};
use slab::Slab;

/// Blocks per round.
const BLOCKS: usize = 64;
/// The CLS sizes of the mix, used in turn.
const SIZES: [usize; 3] = [48, 96, 160];

fn bucket(c: &mut Criterion) {
    let mut group = c.benchmark_group("bucket");

    let table = HandleSizeTable::new([
        HandleSize {
            ty: HandleType::ShaderResourceView,
            size: SIZES[0],
        },
        HandleSize {
            ty: HandleType::Resource,
            size: SIZES[1],
        },
        HandleSize {
            ty: HandleType::Shader,
            size: SIZES[2],
        },
    ])
    .expect("table");
    let mut cls = BucketAllocator::new(&table).expect("allocator");
    let mut blocks = Vec::with_capacity(BLOCKS);
    group.bench_function("cmdlist", |b| {
        b.iter(|| {
            for i in 0..BLOCKS {
                let mut block = cls.alloc(black_box(SIZES[i % 3])).expect("alloc");
                cls.bytes_mut(&mut block).unwrap()[0] = i as u8;
                blocks.push(block);
            }
            for block in blocks.drain(..) {
                black_box(cls.bytes(&block).unwrap()[0]);
                cls.free(block).expect("free");
            }
        })
    });

    let mut boxes: Vec<Box<[u8]>> = Vec::with_capacity(BLOCKS);
    group.bench_function("box", |b| {
        b.iter(|| {
            for i in 0..BLOCKS {
                let mut block = vec![0u8; black_box(SIZES[i % 3])].into_boxed_slice();
                block[0] = i as u8;
                boxes.push(block);
            }
            for block in boxes.drain(..) {
                black_box(block[0]);
            }
        })
    });

    let mut small: Slab<[u8; SIZES[0]]> = Slab::with_capacity(BLOCKS);
    let mut medium: Slab<[u8; SIZES[1]]> = Slab::with_capacity(BLOCKS);
    let mut large: Slab<[u8; SIZES[2]]> = Slab::with_capacity(BLOCKS);
    let mut keys: Vec<(usize, usize)> = Vec::with_capacity(BLOCKS);
    group.bench_function("slab", |b| {
        b.iter(|| {
            for i in 0..BLOCKS {
                let class = black_box(i % 3);
                let key = match class {
                    0 => insert(&mut small, i as u8),
                    1 => insert(&mut medium, i as u8),
                    _ => insert(&mut large, i as u8),
                };
                keys.push((class, key));
            }
            for (class, key) in keys.drain(..) {
                let first = match class {
                    0 => small.remove(key)[0],
                    1 => medium.remove(key)[0],
                    _ => large.remove(key)[0],
                };
                black_box(first);
            }
        })
    });

    group.finish();
}

/// A zeroed `[u8; N]` in `slab` with its first byte set to `first`; returns its key.
fn insert<const N: usize>(slab: &mut Slab<[u8; N]>, first: u8) -> usize {
    let entry = slab.vacant_entry();
    let key = entry.key();
    entry.insert([0; N])[0] = first;
    key
}

criterion_group!(benches, bucket);
criterion_main!(benches);
