//! The CLS-size bucket allocator: the memory behind a deferred context's context-local
//! handles.
//!
//! # Design
//!
//! ## Size classes (R-H4)
//!
//! At device creation the driver lists every context-local handle size it will ever ask for
//! (CheckDeferredContextHandleSizes, kept in a [`HandleSizeTable`]). A [`BucketAllocator`] is
//! built once from that table with one *size class* per distinct size, so a block is always
//! exactly the size the driver asked for and a class never mixes sizes. A size that is not in
//! the table is the driver's error ([`Error::InvalidArg`]), never a fallback allocation.
//!
//! ## Pages
//!
//! Blocks are carved from pages obtained from the global allocator, [`PAGE_SIZE`]-aligned so
//! that the page of any block is `addr & !(PAGE_SIZE - 1)`. Pages never move and are never
//! resized: a block's address is stable for its whole life. The first cache line of a page
//! is its header (the owner's id, the class index, the page's colour and a scratch counter
//! used by [`BucketAllocator::trim`]); blocks follow it. A page belongs to one class.
//!
//! A class's first page is [`FIRST_PAGE`] bytes (or the smallest power of two holding one of
//! its blocks after the header), and each further page doubles, up to [`PAGE_SIZE`]: a
//! context that uses a couple of handles of a class keeps a kilobyte for it, a busy class
//! soon gets whole pages. Every page is [`PAGE_SIZE`]-aligned whatever its size, and its
//! header records its geometry. A page is at most [`PAGE_SIZE`] bytes. A class whose blocks do not fit a [`PAGE_SIZE`] page
//! after the header (sizes above `PAGE_SIZE - LINE_SIZE`, up to
//! [`HandleSizeTable::MAX_HANDLE_SIZE`]) gets *oversized pages* instead: one block per page,
//! the page sized to fit it (still [`PAGE_SIZE`]-aligned, so the block, which starts in the
//! page's first [`PAGE_SIZE`] bytes, still finds its header the same way).
//!
//! ## Layout in a page (R-L1)
//!
//! A block never straddles a cache line it need not:
//!
//! - A class of fewer than [`LINE_SIZE`] bytes is rounded up to a multiple of 8 (at least 8:
//!   a free block holds the free-list link) and packed `floor(64 / unit)` per line; a line's
//!   tail that cannot hold a whole block stays unused, so no block crosses a line boundary.
//! - A class of [`LINE_SIZE`] bytes or more is rounded up to whole lines and every block
//!   starts on a line: a 96-byte block takes exactly two lines, never three.
//!
//! ```text
//!  page (PAGE_SIZE-aligned)
//!  +--------+--------------+------+------+------+--   --+------+-------+
//!  | header | colour lines | grp0 | grp1 | grp2 |  ...  | grpN | slack |
//!  +--------+--------------+------+------+------+--   --+------+-------+
//!   1 line    0..colours-1   a group is one line of packed small blocks,
//!                            or one large block of whole lines
//! ```
//!
//! R-L1 also asks to avoid cache thrashing, many hot objects landing on the same cache set.
//! Blocks inside a page are dense, so they walk through consecutive sets; but the same
//! block index of every page would land on the same set, because pages are
//! [`PAGE_SIZE`]-aligned. So each new page of a class starts its blocks a rotating number of
//! lines (its *colour*) after the header, using the slack the page has anyway (at most
//! [`MAX_COLOURS`] colours, one L1 set period). Oversized pages have no slack; they get
//! [`OVERSIZED_COLOURS`] colours at the cost of a few lines each.
//!
//! ## Free lists
//!
//! Each class keeps an intrusive LIFO free list: a free block stores the address of the next
//! free block in its first 8 bytes. A new page links all its blocks at once, lowest address
//! first. [`BucketAllocator::alloc`] pops the head and zeroes the block's bytes;
//! [`BucketAllocator::free`] pushes it back, so the most recently freed (cache-warm) block is
//! the next one handed out. Neither touches the page header or any atomic: the allocator
//! lives inside one context and is used through `&mut self`.
//!
//! ## Trimming (R-A1, R-A2)
//!
//! Each class counts its live blocks and the peak of that count since the last trim.
//! [`BucketAllocator::trim`], called from the amortised-processing point (after IC submits,
//! R-A1, or when a deferred context runs out of space, R-A2), keeps per class enough pages to
//! hold that peak (the high watermark), releases the other pages that hold no live block
//! (taking their blocks off the free list first), then resets the peak to the current live
//! count. A context whose load dropped thus gives its pages back after two trims, and a
//! context at steady load keeps its pages and allocates nothing.
//!
//! ## Ownership
//!
//! A [`Block`] is a move-only token: not `Clone`, consumed by [`BucketAllocator::free`]. It
//! carries the address, the class index and the id of the allocator that made it (ids come
//! from a process-wide counter and are never reused). Every method that takes a block checks
//! that id against its own before it touches memory, so a block from another allocator, live
//! or already dropped, is refused (`free` answers [`Error::InvalidArg`]) without reading the
//! other allocator's memory. The page header repeats the owner id and class, checked by debug
//! assertions.
//!
//! Dropping the allocator releases every page, including blocks still live: the owning
//! context closes its context-local handles first (R-C1, R-C2), and any [`Block`] that
//! outlives its allocator is refused by every other allocator.
//!
//! # Invariant
//!
//! Every block of every page of class `c` is, at every moment between two calls, exactly
//! one of: *live*, named by exactly one [`Block`] whose tag is `(self.id, c)`; or *free*, on
//! class `c`'s free list exactly once. A page is released only when none of its blocks is
//! live (by `trim`) or when the allocator drops. So a [`Block`] that passes the owner check
//! names live memory of the exact class size that nothing else reads or writes.
//!
//! # Threading
//!
//! [`BucketAllocator`] is `Send` (it moves with its context) and not `Sync` (one owner).
//! [`Block`] is `Send`: it is only a name, usable through its allocator.
//!
//! [`HandleSizeTable`]: crate::handle::HandleSizeTable
//! [`HandleSizeTable::MAX_HANDLE_SIZE`]: crate::handle::HandleSizeTable::MAX_HANDLE_SIZE

use core::alloc::Layout;
use core::fmt;
use core::mem::{align_of, size_of};
use core::ptr::{self, NonNull};
// A process-wide id counter, not part of a lock-free protocol a loom model would check; it
// comes from `core` rather than `crate::primitive` because loom atomics cannot be statics.
use core::sync::atomic::{AtomicU64, Ordering};
use std::alloc;

use crate::error::{Error, Result};
use crate::handle::HandleSizeTable;

/// Bytes in an ordinary page, and the alignment of every page. 16 KiB: big enough that the
/// one-line header costs 0.4 % and a page holds dozens of typical CLS blocks (48..256
/// bytes), small enough that a context using one handle of a class pins little memory
/// (R-L2), and a power of two so the page of a block is found by masking its address.
pub const PAGE_SIZE: usize = 16 * 1024;

/// Bytes of a class's first page; each further page of the class doubles, up to
/// [`PAGE_SIZE`]. A context that opens a few handles of a class keeps about a kilobyte for
/// it rather than a whole page (R-L2), and a busy class reaches full pages after a few
/// grows. Every page is still [`PAGE_SIZE`]-aligned, so a block finds its header by masking.
pub const FIRST_PAGE: usize = 1024;

/// Pages of a class before they reach [`PAGE_SIZE`].
const PAGES_TO_FULL_SIZE: usize = (PAGE_SIZE / FIRST_PAGE).trailing_zeros() as usize;

/// Bytes in a cache line: 64 on every x86-64 and most ARM64 cores the D3D11 DDI runs on.
/// Block placement (R-L1) is computed against it.
pub const LINE_SIZE: usize = 64;

/// The page header takes one whole line, so that no block shares a line with it.
const HEADER_SIZE: usize = LINE_SIZE;

/// Smallest block unit and block alignment: a free block holds the free-list link.
const MIN_UNIT: usize = 8;

/// The most colours (line offsets of a page's first block) an ordinary class rotates
/// through: 64 lines is 4 KiB, the set period of a 32 KiB 8-way or 48 KiB 12-way L1, so more
/// colours would map to the same sets again.
pub const MAX_COLOURS: usize = 64;

/// Colours of an oversized class (one block per page). Each colour costs a line per page;
/// 8 colours cost at most 448 bytes on a page of more than 16 KiB (< 3 %).
pub const OVERSIZED_COLOURS: usize = 8;

/// Bits of a [`Block`]'s tag that hold the class index; the owner id takes the others.
const CLASS_BITS: u32 = 16;
const CLASS_MASK: u64 = (1 << CLASS_BITS) - 1;
/// Owner ids are below this (2^48: at a million allocators a second, nine years).
const OWNER_LIMIT: u64 = 1 << (64 - CLASS_BITS);

/// `PageHeader::free_seen` of a page that `trim` is releasing.
const RELEASING: u32 = u32::MAX;

const _: () = assert!(PAGE_SIZE.is_power_of_two() && LINE_SIZE.is_power_of_two());
const _: () = assert!(size_of::<*mut u8>() <= MIN_UNIT);
const _: () = assert!(size_of::<PageHeader>() <= HEADER_SIZE);
const _: () = assert!(core::mem::align_of::<PageHeader>() <= PAGE_SIZE);
// Every colour keeps the first block inside the page's first PAGE_SIZE bytes.
const _: () = assert!(HEADER_SIZE + (MAX_COLOURS - 1) * LINE_SIZE < PAGE_SIZE);
const _: () = assert!(HEADER_SIZE + (OVERSIZED_COLOURS - 1) * LINE_SIZE < PAGE_SIZE);

/// Source of allocator ids; 0 is never handed out.
static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// The first line of every page.
#[repr(C)]
struct PageHeader {
    /// The id of the allocator that owns the page.
    owner: u64,
    /// The page's class index.
    class: u32,
    /// How many lines after the header the first block starts.
    colour: u32,
    /// Scratch for `trim`: free blocks found in the page, or [`RELEASING`].
    free_seen: u32,
    /// Groups of blocks in the page (pages of a class grow from [`FIRST_PAGE`]).
    groups: u32,
    /// Bytes the page was allocated with (aligned to [`PAGE_SIZE`]).
    bytes: u32,
}

/// The header of the page holding `block`.
#[inline]
fn page_of(block: NonNull<u8>) -> *mut PageHeader {
    // Every block starts in the first PAGE_SIZE bytes of its PAGE_SIZE-aligned page, so
    // masking the address yields the page base; `map_addr` keeps the page's provenance.
    block
        .as_ptr()
        .map_addr(|addr| addr & !(PAGE_SIZE - 1))
        .cast::<PageHeader>()
}

/// The header at the start of `page`.
#[inline]
fn header(page: NonNull<u8>) -> *mut PageHeader {
    page.cast::<PageHeader>().as_ptr()
}

/// Reads the free-list link stored in a free block.
///
/// # Safety
///
/// `block` is on a free list of a live allocator: 8-aligned, in a live page, its first
/// bytes hold the link written by `write_link`.
#[inline]
unsafe fn read_link(block: NonNull<u8>) -> Option<NonNull<u8>> {
    // SAFETY: by the caller's contract the block is 8-aligned, readable, and holds a link.
    NonNull::new(unsafe { block.as_ptr().cast::<*mut u8>().read() })
}

/// Stores a free-list link in a block.
///
/// # Safety
///
/// `block` is a block of a live page (8-aligned, at least 8 bytes) that no reference names.
#[inline]
unsafe fn write_link(block: NonNull<u8>, next: Option<NonNull<u8>>) {
    let next = next.map_or(ptr::null_mut(), NonNull::as_ptr);
    // SAFETY: by the caller's contract the block is 8-aligned, writable and unaliased.
    unsafe { block.as_ptr().cast::<*mut u8>().write(next) }
}

/// One size class: its geometry, its free list, its pages and its counters.
struct Class {
    /// Head of the intrusive free list.
    free: Option<NonNull<u8>>,
    /// Blocks handed out and not yet freed.
    live: usize,
    /// Highest `live` since the last trim.
    peak: usize,
    /// The exact block size the driver asked for.
    size: usize,
    /// Bytes between consecutive blocks of a group.
    unit: usize,
    /// Blocks per group: `LINE_SIZE / unit` for small classes, 1 for the others.
    per_group: usize,
    /// Bytes per group: one line for small classes, `unit` (whole lines) for the others.
    group: usize,
    /// The colour of the next page (taken modulo that page's colours).
    next_colour: usize,
    /// The class's pages, oldest first.
    pages: Vec<NonNull<u8>>,
}

/// The shape of one page: how many groups it holds, how many colours its slack allows, and
/// what it is allocated with.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    groups: usize,
    colours: usize,
    layout: Layout,
}

impl Class {
    fn new(size: usize) -> Result<Class> {
        let small = size.max(MIN_UNIT).next_multiple_of(MIN_UNIT);
        let (unit, per_group, group) = if small < LINE_SIZE {
            (small, LINE_SIZE / small, LINE_SIZE)
        } else {
            let lines = size.next_multiple_of(LINE_SIZE);
            (lines, 1, lines)
        };
        let class = Class {
            free: None,
            live: 0,
            peak: 0,
            size,
            unit,
            per_group,
            group,
            next_colour: 0,
            pages: Vec::new(),
        };
        class.geometry(PAGES_TO_FULL_SIZE)?; // the largest page this class will ever ask for
        Ok(class)
    }

    /// The geometry of the class's page number `n` (0: its first): [`FIRST_PAGE`] bytes,
    /// doubling with each page up to [`PAGE_SIZE`], and at least one group; a class whose
    /// group does not fit a [`PAGE_SIZE`] page after the header gets oversized pages.
    fn geometry(&self, n: usize) -> Result<Geometry> {
        let mut bytes = FIRST_PAGE << n.min(PAGES_TO_FULL_SIZE);
        while bytes < PAGE_SIZE && self.group > bytes - HEADER_SIZE {
            bytes *= 2;
        }
        let budget = bytes - HEADER_SIZE;
        let (groups, colours) = if self.group <= budget {
            let groups = budget / self.group;
            let slack_lines = (budget - groups * self.group) / LINE_SIZE;
            (groups, (slack_lines + 1).min(MAX_COLOURS))
        } else {
            (1, OVERSIZED_COLOURS)
        };
        let size = HEADER_SIZE + (colours - 1) * LINE_SIZE + groups * self.group;
        let layout = Layout::from_size_align(size, PAGE_SIZE).map_err(|_| Error::InvalidArg)?;
        debug_assert!(self.group > PAGE_SIZE - HEADER_SIZE || layout.size() <= bytes);
        Ok(Geometry {
            groups,
            colours,
            layout,
        })
    }

    /// Blocks in a page of `groups` groups.
    fn blocks(&self, groups: usize) -> usize {
        groups * self.per_group
    }

    /// Byte offset of block `k` in a page of colour `colour`.
    fn offset(&self, colour: usize, k: usize) -> usize {
        HEADER_SIZE
            + colour * LINE_SIZE
            + (k / self.per_group) * self.group
            + (k % self.per_group) * self.unit
    }

    /// Adds a page and puts all its blocks on the (empty) free list.
    #[cold]
    fn grow(&mut self, owner: u64, index: usize) -> Result<()> {
        debug_assert!(self.free.is_none());
        let geometry = self.geometry(self.pages.len())?;
        self.pages.try_reserve(1).map_err(|_| Error::OutOfMemory)?;
        // SAFETY: the layout's size is at least a header line plus one group, never zero.
        let base = unsafe { alloc::alloc(geometry.layout) };
        let base = NonNull::new(base).ok_or(Error::OutOfMemory)?;
        let colour = self.next_colour % geometry.colours;
        self.next_colour = self.next_colour.wrapping_add(1);
        let header = PageHeader {
            owner,
            class: index as u32,
            colour: colour as u32,
            free_seen: 0,
            groups: geometry.groups as u32,
            bytes: geometry.layout.size() as u32,
        };
        // SAFETY: `base` is a fresh allocation of at least HEADER_SIZE bytes, aligned to
        // PAGE_SIZE, which is at least the header's alignment (checked at compile time).
        unsafe { base.cast::<PageHeader>().write(header) };
        // Link last to first so that the lowest address is handed out first.
        let mut next = None;
        for k in (0..self.blocks(geometry.groups)).rev() {
            let offset = self.offset(colour, k);
            debug_assert!(offset + self.unit <= geometry.layout.size() && offset < PAGE_SIZE);
            // SAFETY: `offset + unit` is within the page (its geometry holds its colours and
            // every group), so the pointer stays in the allocation.
            let block = unsafe { base.add(offset) };
            // SAFETY: the block lies in the fresh page, is 8-aligned (the offset is a line
            // plus a multiple of the 8-aligned unit) and nothing else names it yet.
            unsafe { write_link(block, next) };
            next = Some(block);
        }
        self.free = next;
        self.pages.push(base);
        Ok(())
    }

    /// The blocks a live page holds, and the layout it was allocated with.
    fn page_shape(&self, page: NonNull<u8>) -> (usize, Layout) {
        // SAFETY: `page` is one of this class's live pages, which start with the header
        // `grow` wrote; nothing holds a reference to it (`&self` methods read only).
        let (groups, bytes) = unsafe { ((*header(page)).groups, (*header(page)).bytes) };
        let layout = Layout::from_size_align(bytes as usize, PAGE_SIZE)
            .expect("the layout `grow` allocated the page with");
        (self.blocks(groups as usize), layout)
    }

    /// See [`BucketAllocator::trim`]. Returns the bytes released.
    fn trim(&mut self) -> usize {
        let mut released = 0;
        if !self.pages.is_empty() {
            for &page in &self.pages {
                // SAFETY: every page in `pages` is live and starts with its header; no
                // reference to it exists (`&mut self`).
                unsafe { (*header(page)).free_seen = 0 };
            }
            let mut cursor = self.free;
            while let Some(block) = cursor {
                // SAFETY: `block` is on this class's free list (invariant), so it is in one
                // of our live pages, whose header `page_of` finds, and it holds a link.
                unsafe {
                    (*page_of(block)).free_seen += 1;
                    cursor = read_link(block);
                }
            }
            // Pages with a live block stay; keep empty ones, oldest first, until the pages
            // kept hold the watermark.
            let mut capacity = 0;
            for &page in &self.pages {
                let (blocks, _) = self.page_shape(page);
                // SAFETY: as above, a live page's header, read through the page pointer.
                if (unsafe { (*header(page)).free_seen } as usize) < blocks {
                    capacity += blocks;
                }
            }
            let mut any = false;
            for &page in &self.pages {
                let (blocks, _) = self.page_shape(page);
                let hdr = header(page);
                // SAFETY: as above, a live page's header, read through the page pointer.
                unsafe {
                    if (*hdr).free_seen as usize == blocks {
                        if capacity < self.peak {
                            capacity += blocks;
                        } else {
                            (*hdr).free_seen = RELEASING;
                            any = true;
                        }
                    }
                }
            }
            if any {
                self.unlink_releasing();
                let mut pages = core::mem::take(&mut self.pages);
                pages.retain(|&page| {
                    // SAFETY: a live page's header, read through the page pointer.
                    if unsafe { (*header(page)).free_seen } != RELEASING {
                        return true;
                    }
                    let (_, layout) = self.page_shape(page);
                    // SAFETY: the page was allocated with `layout` by `grow`; it holds no
                    // live block (all its blocks were free) and `unlink_releasing` took its
                    // blocks off the free list, so nothing names it any more.
                    unsafe { alloc::dealloc(page.as_ptr(), layout) };
                    released += layout.size();
                    false
                });
                self.pages = pages;
            }
        }
        self.peak = self.live;
        released
    }

    /// Takes every block of a page marked [`RELEASING`] off the free list, keeping the order
    /// of the others.
    fn unlink_releasing(&mut self) {
        let mut head = None;
        let mut tail: Option<NonNull<u8>> = None;
        let mut cursor = self.free;
        while let Some(block) = cursor {
            // SAFETY: `block` is on the free list (invariant): in a live page (none is
            // released yet) and holding a link, read before any link is rewritten.
            let releasing = unsafe {
                cursor = read_link(block);
                (*page_of(block)).free_seen == RELEASING
            };
            if releasing {
                continue;
            }
            match tail {
                // SAFETY: `prev` is a free block of a live page, already read past.
                Some(prev) => unsafe { write_link(prev, Some(block)) },
                None => head = Some(block),
            }
            tail = Some(block);
        }
        if let Some(last) = tail {
            // SAFETY: `last` is a free block of a live page, already read past.
            unsafe { write_link(last, None) };
        }
        self.free = head;
    }
}

/// A block handed out by a [`BucketAllocator`]: a move-only name for its memory.
///
/// Not `Clone` or `Copy`: [`BucketAllocator::free`] consumes it, so a block cannot be freed
/// twice or used after its free. Its bytes are reached through the allocator that made it
/// ([`BucketAllocator::bytes`], [`BucketAllocator::bytes_mut`]). Dropping a `Block` without
/// freeing it keeps its memory allocated until the allocator itself drops.
///
/// Only the address and a 64-bit tag holding the owner's id and the class index: 16 bytes on
/// 64-bit targets and on 32-bit Windows, 12 on 32-bit x86 Linux (where `u64` is 4-aligned).
#[must_use = "a block that is not given back with `free` stays allocated until its allocator drops"]
pub struct Block {
    ptr: NonNull<u8>,
    /// `owner << CLASS_BITS | class`.
    tag: u64,
}

// A block is its address and its tag and nothing else: no field is added and no padding
// beyond what the pair's alignment forces, so each context-local handle's bookkeeping is one
// address and one tag on every target. That is 8 + 8 on 64-bit targets; 4 + 8 = 12 where
// `u64` is 4-aligned (i686 Linux), 4 + 8 padded to 16 where it is 8-aligned (i686 Windows).
// Read only by the assertions below, which Rust before 1.88 does not count as a use.
#[allow(dead_code)]
const BLOCK_ALIGN: usize = if align_of::<u64>() > align_of::<NonNull<u8>>() {
    align_of::<u64>()
} else {
    align_of::<NonNull<u8>>()
};
const _: () = assert!(align_of::<Block>() == BLOCK_ALIGN);
const _: () = assert!(
    size_of::<Block>()
        == (size_of::<NonNull<u8>>() + size_of::<u64>()).next_multiple_of(BLOCK_ALIGN)
);
#[cfg(target_pointer_width = "64")]
const _: () = assert!(size_of::<Block>() == 16);

// SAFETY: a `Block` is only a name: its memory is read or written solely through the
// allocator that made it (`bytes`/`bytes_mut`, which check the owner id), under that
// allocator's borrow. Moving the name to another thread therefore shares nothing; the
// pointer is never dereferenced through the `Block` alone.
unsafe impl Send for Block {}

impl Block {
    fn owner(&self) -> u64 {
        self.tag >> CLASS_BITS
    }

    fn class(&self) -> usize {
        (self.tag & CLASS_MASK) as usize
    }

    /// The block's address, e.g. to hand to a driver over FFI. It stays valid until the block
    /// is freed or its allocator drops; access it only while no `&`/`&mut` slice from
    /// [`BucketAllocator::bytes`]/[`BucketAllocator::bytes_mut`] conflicts with the access.
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl fmt::Debug for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Block")
            .field("ptr", &self.ptr)
            .field("owner", &self.owner())
            .field("class", &self.class())
            .finish()
    }
}

/// What a [`BucketAllocator`] holds, from [`BucketAllocator::stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BucketStats {
    /// Size classes (distinct sizes of the handle-size table).
    pub classes: usize,
    /// Pages held, over all classes.
    pub pages: usize,
    /// Bytes of those pages (headers, colour lines and padding included).
    pub bytes_reserved: usize,
    /// Blocks handed out and not freed.
    pub live_blocks: usize,
    /// Sum over classes of the most blocks live at once since the last trim: the high
    /// watermark the next [`BucketAllocator::trim`] keeps pages for.
    pub peak_blocks: usize,
    /// Blocks on the free lists, ready to be handed out without a page allocation.
    pub free_blocks: usize,
    /// Bytes the live blocks were asked for (their exact sizes, without rounding).
    pub live_bytes: usize,
}

/// The CLS-size bucket allocator of one context: see the [module docs](self) for the design.
///
/// `Send` (it moves with its context) and not `Sync`: one owner, every method that changes
/// it takes `&mut self`, and no atomic is touched after [`BucketAllocator::new`].
///
/// # Example
///
/// ```
/// use cmdlist::bucket::BucketAllocator;
/// use cmdlist::{HandleSize, HandleSizeTable, HandleType};
///
/// let table = HandleSizeTable::new([
///     HandleSize { ty: HandleType::Resource, size: 96 },
///     HandleSize { ty: HandleType::ShaderResourceView, size: 48 },
/// ])?;
/// let mut cls = BucketAllocator::new(&table)?;
/// let mut block = cls.alloc(96)?;
/// assert_eq!(cls.bytes(&block).unwrap(), &[0u8; 96][..]); // zeroed
/// cls.bytes_mut(&mut block).unwrap()[0] = 7;
/// assert_eq!(cls.stats().live_blocks, 1);
/// cls.free(block)?;
/// let page = cls.stats().bytes_reserved; // one small first page (pages double from there)
/// assert!(page <= cmdlist::bucket::FIRST_PAGE);
/// assert_eq!(cls.trim(), 0); // the peak since the last trim (1 block) keeps its page
/// assert_eq!(cls.trim(), page); // the new peak is 0: the page goes
/// assert_eq!(cls.stats().pages, 0);
/// # Ok::<(), cmdlist::Error>(())
/// ```
pub struct BucketAllocator {
    /// This allocator's id, in every block's tag and every page's header.
    id: u64,
    /// The class sizes, ascending: class `i` serves `sizes[i]` bytes.
    sizes: Box<[usize]>,
    classes: Box<[Class]>,
}

// SAFETY: the allocator exclusively owns its pages (raw pointers from the global allocator,
// which may be freed on any thread) and shares no state with other allocators except the
// atomic id counter used in `new`. Moving it to another thread moves that ownership whole;
// blocks it handed out are only names (see `Block`), usable solely through `&`/`&mut` of it.
unsafe impl Send for BucketAllocator {}

impl BucketAllocator {
    /// An allocator with one size class per distinct size of `table` (R-H4). No page is
    /// allocated yet.
    ///
    /// More than 65 536 distinct sizes is [`Error::InvalidArg`] (the driver's table is
    /// absurd); running out of allocator ids (2^48 of them) is [`Error::OutOfMemory`].
    pub fn new(table: &HandleSizeTable) -> Result<Self> {
        let sizes = table.distinct_sizes();
        if sizes.len() > 1 << CLASS_BITS {
            return Err(Error::InvalidArg);
        }
        let classes = sizes
            .iter()
            .map(|&size| Class::new(size))
            .collect::<Result<Box<[Class]>>>()?;
        let id = NEXT_OWNER.fetch_add(1, Ordering::Relaxed);
        if id >= OWNER_LIMIT {
            return Err(Error::OutOfMemory);
        }
        Ok(BucketAllocator {
            id,
            sizes: sizes.into_boxed_slice(),
            classes,
        })
    }

    /// The class sizes, ascending: the sizes [`BucketAllocator::alloc`] accepts.
    pub fn sizes(&self) -> &[usize] {
        &self.sizes
    }

    /// A zeroed block of exactly `size` bytes, aligned to 8 bytes (to [`LINE_SIZE`] when
    /// `size >= LINE_SIZE`), that never straddles a cache line it need not (R-L1).
    ///
    /// A size that is not in the table is [`Error::InvalidArg`] (R-H4: the driver's fault); a
    /// page allocation that fails is [`Error::OutOfMemory`] and changes nothing.
    #[inline]
    pub fn alloc(&mut self, size: usize) -> Result<Block> {
        let index = self
            .sizes
            .binary_search(&size)
            .map_err(|_| Error::InvalidArg)?;
        self.alloc_at(index)
    }

    /// [`BucketAllocator::alloc`] of the size of class `index` (its position in
    /// [`BucketAllocator::sizes`], which [`HandleSizeTable::size_class`] answers for the table
    /// the allocator was made from): no search. An index past the classes is
    /// [`Error::InvalidArg`].
    ///
    /// [`HandleSizeTable::size_class`]: crate::handle::HandleSizeTable::size_class
    #[inline]
    pub fn alloc_class(&mut self, index: u16) -> Result<Block> {
        self.alloc_at(usize::from(index))
    }

    /// [`BucketAllocator::alloc_class`] with the block's length, as
    /// [`BucketAllocator::bytes_mut`] would answer it: a holder that keeps it reaches the
    /// bytes without a class lookup ([`BucketAllocator::bytes_mut_of_len`]).
    #[inline]
    pub(crate) fn alloc_class_len(&mut self, index: u16) -> Result<(Block, usize)> {
        let block = self.alloc_at(usize::from(index))?;
        Ok((block, self.classes[usize::from(index)].size))
    }

    #[inline]
    fn alloc_at(&mut self, index: usize) -> Result<Block> {
        let class = self.classes.get_mut(index).ok_or(Error::InvalidArg)?;
        let size = class.size;
        let block = match class.free {
            Some(block) => block,
            None => {
                class.grow(self.id, index)?;
                class.free.ok_or(Error::OutOfMemory)?
            }
        };
        // SAFETY: `block` heads this class's free list (invariant), so it is a free block of
        // at least `size` bytes, 8-aligned, in a live page, holding a link; popping it makes
        // it live, named only by the `Block` returned below.
        unsafe {
            class.free = read_link(block);
            ptr::write_bytes(block.as_ptr(), 0, size);
        }
        class.live += 1;
        class.peak = class.peak.max(class.live);
        Ok(Block {
            ptr: block,
            tag: (self.id << CLASS_BITS) | index as u64,
        })
    }

    /// Gives a block back; it goes to the head of its class's free list and is the next one
    /// handed out for that size.
    ///
    /// A block made by another allocator (live or dropped) is [`Error::InvalidArg`], found
    /// without touching the other allocator's memory; that block stays allocated in its own
    /// allocator.
    #[inline]
    pub fn free(&mut self, block: Block) -> Result<()> {
        let index = self.class_of(&block).ok_or(Error::InvalidArg)?;
        let class = &mut self.classes[index];
        // SAFETY: the block is ours (owner check), hence live (invariant): in a live page,
        // 8-aligned, at least 8 bytes; consuming its only name leaves it unaliased.
        unsafe { write_link(block.ptr, class.free) };
        class.free = Some(block.ptr);
        class.live -= 1;
        Ok(())
    }

    /// Whether `block` was made by this allocator (and so may be passed to its methods).
    #[inline]
    pub fn owns(&self, block: &Block) -> bool {
        self.class_of(block).is_some()
    }

    /// The size `block` was allocated with.
    ///
    /// # Panics
    ///
    /// If `block` was made by another allocator (see [`BucketAllocator::owns`]).
    #[inline]
    pub fn size_of(&self, block: &Block) -> Result<usize> {
        Ok(self.classes[self.class_of(block).ok_or(Error::InvalidArg)?].size)
    }

    /// The block's bytes, exactly the size it was allocated with; a block made by another
    /// allocator is [`Error::InvalidArg`] (see [`BucketAllocator::owns`]).
    #[inline]
    pub fn bytes(&self, block: &Block) -> Result<&[u8]> {
        let size = self.classes[self.class_of(block).ok_or(Error::InvalidArg)?].size;
        // SAFETY: the block is ours, hence live (invariant): `size` initialised bytes in a
        // live page that stays allocated while `self` is borrowed (trim and drop need
        // `&mut self`); the only way to write them is `bytes_mut`, which needs `&mut self`.
        Ok(unsafe { core::slice::from_raw_parts(block.ptr.as_ptr(), size) })
    }

    /// The block's bytes, mutable, exactly the size it was allocated with; a block made by
    /// another allocator is [`Error::InvalidArg`].
    #[inline]
    pub fn bytes_mut(&mut self, block: &mut Block) -> Result<&mut [u8]> {
        let size = self.classes[self.class_of(block).ok_or(Error::InvalidArg)?].size;
        // SAFETY: as in `bytes`, and the `&mut self` borrow excludes every other slice of
        // this allocator's blocks while the returned one lives; blocks never overlap.
        Ok(unsafe { core::slice::from_raw_parts_mut(block.ptr.as_ptr(), size) })
    }

    /// [`BucketAllocator::bytes_mut`] for a holder that kept the block's size from its
    /// allocation: no class lookup, for hot paths (a context-local handle used again).
    ///
    /// # Safety
    /// `block` came from this allocator and is not freed, and `len` is the length
    /// [`BucketAllocator::bytes_mut`] answers for it.
    #[inline]
    pub(crate) unsafe fn bytes_mut_of_len(&mut self, block: &mut Block, len: usize) -> &mut [u8] {
        debug_assert_eq!(
            self.class_of(block).map(|class| self.classes[class].size),
            Some(len)
        );
        // SAFETY: as in `bytes_mut`, the contract standing in for its checks.
        unsafe { core::slice::from_raw_parts_mut(block.ptr.as_ptr(), len) }
    }

    /// Gives wholly-free pages back down to the high watermark (R-A1, R-A2): per class, keeps
    /// enough pages to hold the most blocks live at once since the previous trim, releases
    /// the other pages that hold no live block, then resets that peak to the blocks live now.
    /// Returns the bytes released.
    ///
    /// Costs a walk of the free lists; call it at the amortised-processing points, not on a
    /// hot path.
    pub fn trim(&mut self) -> usize {
        self.classes.iter_mut().map(Class::trim).sum()
    }

    /// What the allocator holds now.
    pub fn stats(&self) -> BucketStats {
        let mut stats = BucketStats {
            classes: self.classes.len(),
            ..BucketStats::default()
        };
        for class in self.classes.iter() {
            stats.pages += class.pages.len();
            for &page in &class.pages {
                let (blocks, layout) = class.page_shape(page);
                stats.bytes_reserved += layout.size();
                stats.free_blocks += blocks;
            }
            stats.free_blocks -= class.live;
            stats.live_blocks += class.live;
            stats.peak_blocks += class.peak;
            stats.live_bytes += class.live * class.size;
        }
        stats
    }

    #[inline]
    fn class_of(&self, block: &Block) -> Option<usize> {
        if block.owner() != self.id {
            return None;
        }
        let index = block.class();
        debug_assert!(index < self.classes.len());
        // SAFETY: the block is ours, hence live in a live page whose header `page_of` finds.
        debug_assert!(unsafe {
            let header = page_of(block.ptr);
            (*header).owner == self.id && (*header).class as usize == index
        });
        Some(index)
    }
}

impl Drop for BucketAllocator {
    fn drop(&mut self) {
        for class in self.classes.iter_mut() {
            for page in core::mem::take(&mut class.pages) {
                let (_, layout) = class.page_shape(page);
                // SAFETY: every page in `pages` was allocated with this layout by `grow` and
                // is released once, here; blocks still live are released with it
                // (documented), and no `Block` can reach it again: every other allocator
                // refuses this allocator's id.
                unsafe { alloc::dealloc(page.as_ptr(), layout) };
            }
        }
    }
}

impl fmt::Debug for BucketAllocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BucketAllocator")
            .field("id", &self.id)
            .field("sizes", &self.sizes)
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handle::{HandleSize, HandleType};

    fn allocator(sizes: &[usize]) -> BucketAllocator {
        let table = HandleSizeTable::new(sizes.iter().map(|&size| HandleSize {
            ty: HandleType::Resource,
            size,
        }))
        .unwrap();
        BucketAllocator::new(&table).unwrap()
    }

    fn addr(block: &Block) -> usize {
        block.as_ptr().addr()
    }

    fn assert_send<T: Send>() {}

    #[test]
    fn block_and_allocator_are_send() {
        assert_send::<Block>();
        assert_send::<BucketAllocator>();
    }

    #[test]
    fn r_h4_size_not_in_table_is_invalid_arg() {
        let mut a = allocator(&[48, 96]);
        assert_eq!(a.sizes(), &[48, 96]);
        assert_eq!(a.alloc(64).unwrap_err(), Error::InvalidArg);
        assert_eq!(a.alloc(0).unwrap_err(), Error::InvalidArg);
        assert_eq!(a.alloc(97).unwrap_err(), Error::InvalidArg);
        assert_eq!(a.stats().pages, 0);
        let b = a.alloc(48).unwrap();
        assert_eq!(a.size_of(&b).unwrap(), 48);
        assert_eq!(a.bytes(&b).unwrap().len(), 48);
        a.free(b).unwrap();

        let mut empty = allocator(&[]);
        assert_eq!(empty.alloc(8).unwrap_err(), Error::InvalidArg);
    }

    /// The table's size class of a (type, size) pair is the allocator's class of that size,
    /// so an entry's class, found once at creation, allocates with no search (R-H4).
    #[test]
    fn r_h4_size_class_of_the_table_is_the_allocators_class() {
        let table = HandleSizeTable::new([
            HandleSize {
                ty: HandleType::ShaderResourceView,
                size: 200,
            },
            HandleSize {
                ty: HandleType::Resource,
                size: 96,
            },
            HandleSize {
                ty: HandleType::Resource,
                size: 48,
            },
            HandleSize {
                ty: HandleType::Query,
                size: 96,
            },
        ])
        .unwrap();
        let mut a = BucketAllocator::new(&table).unwrap();
        for &(ty, size) in &[
            (HandleType::Resource, 48),
            (HandleType::Resource, 96),
            (HandleType::Query, 96),
            (HandleType::ShaderResourceView, 200),
        ] {
            let class = table.size_class(ty, size).expect("listed");
            let block = a.alloc_class(class).unwrap();
            assert_eq!(a.size_of(&block).unwrap(), size, "{ty:?} {size}");
            a.free(block).unwrap();
        }
        assert_eq!(
            table.size_class(HandleType::ShaderResourceView, 96),
            None,
            "not listed for views"
        );
        assert_eq!(table.size_class(HandleType::Resource, 64), None);
        assert_eq!(a.alloc_class(3).unwrap_err(), Error::InvalidArg);
    }

    #[test]
    fn r_l1_small_blocks_never_straddle_a_cache_line() {
        for size in [1usize, 8, 12, 24, 40, 48, 56, 63] {
            let unit = size.max(8).next_multiple_of(8);
            let per_line = LINE_SIZE / unit;
            let mut a = allocator(&[size]);
            let blocks: Vec<Block> = (0..per_line * 8).map(|_| a.alloc(size).unwrap()).collect();
            for b in &blocks {
                let start = addr(b);
                assert_eq!(start % 8, 0, "size {size}");
                assert_eq!(
                    start / LINE_SIZE,
                    (start + size - 1) / LINE_SIZE,
                    "size {size}"
                );
            }
            // A fresh page is packed floor(64 / unit) blocks per line.
            let mut lines: Vec<usize> = blocks.iter().map(|b| addr(b) / LINE_SIZE).collect();
            lines.dedup();
            assert_eq!(lines.len(), 8, "size {size}");
            for b in blocks {
                a.free(b).unwrap();
            }
        }
    }

    #[test]
    fn r_l1_large_blocks_start_on_a_cache_line() {
        for size in [64usize, 65, 96, 160, 1000, 20_000] {
            let lines = size.div_ceil(LINE_SIZE);
            let mut a = allocator(&[size]);
            let blocks: Vec<Block> = (0..3).map(|_| a.alloc(size).unwrap()).collect();
            for b in &blocks {
                assert_eq!(addr(b) % LINE_SIZE, 0, "size {size}");
                assert_eq!(a.bytes(b).unwrap().len(), size);
            }
            for pair in blocks.windows(2) {
                if addr(&pair[0]) / PAGE_SIZE == addr(&pair[1]) / PAGE_SIZE {
                    // Same page: consecutive blocks are exactly `lines` lines apart.
                    assert_eq!(addr(&pair[1]) - addr(&pair[0]), lines * LINE_SIZE);
                }
            }
            for b in blocks {
                a.free(b).unwrap();
            }
        }
    }

    #[test]
    fn r_l1_oversized_pages_are_sized_to_fit_and_coloured() {
        let size = 20_000;
        let mut a = allocator(&[size]);
        let mut blocks: Vec<Block> = (0..3).map(|_| a.alloc(size).unwrap()).collect();
        for (i, b) in blocks.iter_mut().enumerate() {
            a.bytes_mut(b).unwrap().fill(i as u8 + 1);
        }
        for (i, b) in blocks.iter().enumerate() {
            assert!(a.bytes(b).unwrap() == vec![i as u8 + 1; size].as_slice());
            // One block per page, starting after the header and the page's colour lines.
            assert_eq!(addr(b) % PAGE_SIZE, HEADER_SIZE + i * LINE_SIZE);
        }
        let stats = a.stats();
        assert_eq!(stats.pages, 3);
        assert!(stats.bytes_reserved >= 3 * size);
        assert!(stats.bytes_reserved < 3 * (size + PAGE_SIZE / 16));
        for b in blocks {
            a.free(b).unwrap();
        }
    }

    #[test]
    fn r_l1_pages_of_a_class_rotate_colours() {
        // 1024-byte blocks: pages of 1, 1, 3, 7 and then 15 blocks, each with 15 lines of
        // slack, so 16 colours: page n starts its blocks n lines after the header.
        let mut a = allocator(&[1024]);
        let blocks: Vec<Block> = (0..41).map(|_| a.alloc(1024).unwrap()).collect();
        assert_eq!(capacities(&a, 0), [1, 1, 3, 7, 15, 15]);
        let mut pages: Vec<usize> = blocks.iter().map(|b| addr(b) / PAGE_SIZE).collect();
        pages.dedup();
        assert_eq!(pages.len(), 6);
        for (n, page) in pages.iter().enumerate() {
            let first = blocks
                .iter()
                .find(|b| addr(b) / PAGE_SIZE == *page)
                .unwrap();
            assert_eq!(
                addr(first) % PAGE_SIZE,
                HEADER_SIZE + n * LINE_SIZE,
                "page {n}"
            );
        }
        for b in blocks {
            a.free(b).unwrap();
        }
    }

    #[test]
    fn r_l2_pages_start_small_and_double() {
        // A context using two 64-byte handles keeps one small page, not a whole one.
        let mut a = allocator(&[64]);
        let two: Vec<Block> = (0..2).map(|_| a.alloc(64).unwrap()).collect();
        let stats = a.stats();
        assert_eq!(stats.pages, 1);
        assert!(stats.bytes_reserved <= FIRST_PAGE, "{stats:?}");
        // Pages double up to PAGE_SIZE as the class grows.
        let many: Vec<Block> = (0..2000).map(|_| a.alloc(64).unwrap()).collect();
        let sizes: Vec<usize> = a.classes[0]
            .pages
            .iter()
            .map(|&p| a.classes[0].page_shape(p).1.size())
            .collect();
        assert!(sizes.windows(2).all(|w| w[0] <= w[1]), "{sizes:?}");
        assert!(sizes[0] <= FIRST_PAGE && *sizes.last().unwrap() <= PAGE_SIZE);
        assert!(*sizes.last().unwrap() > PAGE_SIZE / 2, "{sizes:?}");
        for b in two.into_iter().chain(many) {
            a.free(b).unwrap();
        }
    }

    /// The blocks each page of class 0 holds, oldest page first.
    fn capacities(a: &BucketAllocator, class: usize) -> Vec<usize> {
        let c = &a.classes[class];
        c.pages.iter().map(|&p| c.page_shape(p).0).collect()
    }

    #[test]
    fn r_a1_trim_releases_pages_down_to_the_high_watermark() {
        let mut a = allocator(&[48, 1024]);
        let mut blocks: Vec<Block> = (0..45).map(|_| a.alloc(1024).unwrap()).collect();
        let small = a.alloc(48).unwrap();
        let caps = capacities(&a, 1);
        assert!(caps.iter().sum::<usize>() >= 45);
        let stats = a.stats();
        assert_eq!((stats.live_blocks, stats.peak_blocks), (46, 46));

        // Keep the first ten blocks and the last one live: pages at both ends stay busy.
        let mut kept: Vec<Block> = Vec::new();
        for (i, b) in blocks.drain(..).enumerate() {
            if i < 10 || i == 44 {
                kept.push(b);
            } else {
                a.free(b).unwrap();
            }
        }
        assert_eq!(a.stats().live_blocks, 12);
        // The peak since the last trim (45) needs every page: nothing goes.
        assert_eq!(a.trim(), 0);
        assert_eq!(capacities(&a, 1), caps);
        assert_eq!(a.stats().peak_blocks, 12);
        // Now the peak is 11 blocks of 1024: the pages holding live blocks stay, the empty
        // ones beyond that go, and what went is exactly what the stats lost.
        let before = a.stats().bytes_reserved;
        let released = a.trim();
        assert!(released > 0);
        assert_eq!(a.stats().bytes_reserved, before - released);
        let kept_caps = capacities(&a, 1);
        assert!(kept_caps.iter().sum::<usize>() >= 11);
        assert!(kept_caps.len() < caps.len());

        // The free list no longer names a released page: allocating reuses kept pages
        // (miri would flag a released one), then grows.
        let more: Vec<Block> = (0..40).map(|_| a.alloc(1024).unwrap()).collect();
        for b in more.into_iter().chain(kept) {
            a.free(b).unwrap();
        }
        a.free(small).unwrap();
        // The peaks keep every page once, then all go.
        assert_eq!(a.trim(), 0);
        let all = a.stats().bytes_reserved;
        assert_eq!(a.trim(), all);
        let stats = a.stats();
        assert_eq!(
            (stats.pages, stats.bytes_reserved, stats.free_blocks),
            (0, 0, 0)
        );
        // And the allocator still works.
        let b = a.alloc(1024).unwrap();
        a.free(b).unwrap();
    }

    #[test]
    fn r_a2_trim_keeps_pages_at_steady_load() {
        let mut a = allocator(&[96]);
        let mut pages = None;
        for _ in 0..3 {
            let blocks: Vec<Block> = (0..200).map(|_| a.alloc(96).unwrap()).collect();
            for b in blocks {
                a.free(b).unwrap();
            }
            // 200 blocks of 96 keep their pages from trim to trim.
            assert_eq!(a.trim(), 0);
            let now = a.stats().pages;
            assert_eq!(*pages.get_or_insert(now), now);
        }
    }

    #[test]
    fn foreign_block_is_invalid_arg() {
        let mut a = allocator(&[48, 96]);
        let mut b = allocator(&[48, 96]);
        let x = a.alloc(48).unwrap();
        assert!(a.owns(&x));
        assert!(!b.owns(&x));
        assert_eq!(b.free(x), Err(Error::InvalidArg));
        assert_eq!(a.stats().live_blocks, 1);
        assert_eq!(b.stats().live_blocks, 0);

        // A block that outlived its allocator is refused too, without touching its memory.
        let mut c = allocator(&[48, 96]);
        let orphan = c.alloc(96).unwrap();
        drop(c);
        assert!(!a.owns(&orphan));
        assert_eq!(a.free(orphan), Err(Error::InvalidArg));
        let y = a.alloc(96).unwrap();
        a.free(y).unwrap();
    }

    #[test]
    fn foreign_block_bytes_are_invalid_arg() {
        let mut a = allocator(&[48]);
        let mut b = allocator(&[48]);
        let mut x = a.alloc(48).unwrap();
        assert_eq!(b.bytes(&x).err(), Some(Error::InvalidArg));
        assert_eq!(b.bytes_mut(&mut x).err(), Some(Error::InvalidArg));
        assert_eq!(b.size_of(&x).err(), Some(Error::InvalidArg));
        a.free(x).unwrap();
    }

    #[test]
    fn alloc_free_reuses_the_last_freed_block() {
        let mut a = allocator(&[160]);
        let x = a.alloc(160).unwrap();
        let at = addr(&x);
        a.free(x).unwrap();
        let x = a.alloc(160).unwrap();
        assert_eq!(addr(&x), at);

        let y = a.alloc(160).unwrap();
        let (ax, ay) = (addr(&x), addr(&y));
        a.free(x).unwrap();
        a.free(y).unwrap();
        let first = a.alloc(160).unwrap();
        let second = a.alloc(160).unwrap();
        assert_eq!((addr(&first), addr(&second)), (ay, ax));
        a.free(first).unwrap();
        a.free(second).unwrap();
    }

    #[test]
    fn blocks_are_zeroed_when_handed_out() {
        let mut a = allocator(&[4, 48, 200]);
        for size in [4, 48, 200] {
            let mut x = a.alloc(size).unwrap();
            assert!(a.bytes(&x).unwrap().iter().all(|&b| b == 0));
            a.bytes_mut(&mut x).unwrap().fill(0xAB);
            let at = addr(&x);
            a.free(x).unwrap();
            let x = a.alloc(size).unwrap();
            assert_eq!(addr(&x), at);
            assert_eq!(a.bytes(&x).unwrap().len(), size);
            assert!(a.bytes(&x).unwrap().iter().all(|&b| b == 0), "size {size}");
            a.free(x).unwrap();
        }
    }

    #[test]
    fn many_allocations_across_pages_do_not_overlap() {
        let per_class = if cfg!(miri) { 200 } else { 2000 };
        let sizes = [48, 96, 160];
        let mut a = allocator(&sizes);
        let mut blocks: Vec<Block> = Vec::new();
        for _ in 0..per_class {
            for size in sizes {
                let mut b = a.alloc(size).unwrap();
                let pattern = (blocks.len() % 251) as u8 + 1;
                a.bytes_mut(&mut b).unwrap().fill(pattern);
                blocks.push(b);
            }
        }
        // 48: 255 per page, 96: 127, 160: 85: several pages.
        assert!(a.stats().pages >= 6);
        for (n, b) in blocks.iter().enumerate() {
            let pattern = (n % 251) as u8 + 1;
            let bytes = a.bytes(b).unwrap();
            assert_eq!(bytes.len(), a.size_of(b).unwrap());
            assert!(bytes == &[pattern; 160][..bytes.len()], "block {n}");
        }
        let mut ranges: Vec<(usize, usize)> = blocks
            .iter()
            .map(|b| (addr(b), addr(b) + a.size_of(b).unwrap()))
            .collect();
        ranges.sort_unstable();
        for pair in ranges.windows(2) {
            assert!(pair[0].1 <= pair[1].0, "overlap: {pair:?}");
        }
        let stats = a.stats();
        assert_eq!(stats.live_blocks, 3 * per_class);
        assert_eq!(stats.live_bytes, per_class * (48 + 96 + 160));
        for b in blocks {
            a.free(b).unwrap();
        }
        assert_eq!(a.stats().live_blocks, 0);
    }

    #[test]
    fn drop_releases_pages_with_live_blocks() {
        let mut a = allocator(&[48, 20_000]);
        let x = a.alloc(48).unwrap();
        let y = a.alloc(20_000).unwrap();
        assert_eq!(a.stats().pages, 2);
        drop(a);
        // The blocks are dangling names now; dropping them is harmless (miri checks leaks).
        drop((x, y));
    }
}
