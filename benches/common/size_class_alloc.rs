//! A global allocator whose instruction count does not depend on the heap's layout: see
//! [`SizeClassAlloc`].

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU64, Ordering};

/// Size classes: 16 bytes to 64 KiB, by powers of two.
const CLASSES: usize = 13;
/// The smallest class's size (room for the free list's link).
const MIN_SIZE: usize = 16;
/// The alignment every class's blocks have.
const ALIGN: usize = 16;

thread_local! {
    /// Each class's free blocks, linked through their first word. No destructor, so that
    /// reaching it never allocates (a thread-local with one registers it, allocating).
    static FREE: [Cell<*mut u8>; CLASSES] = const { [const { Cell::new(null_mut()) }; CLASSES] };
}

/// Allocation calls made, process-wide.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

/// Allocation calls made so far in this process.
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Size-class free lists per thread in front of the system allocator: a freed block waits on
/// its thread's list for the next allocation of its class, which takes it back in a few
/// instructions, whatever else the heap holds. In a steady state (the same allocations every
/// cycle) every allocation is such a pop and every free such a push, so a count of
/// instructions repeats on any machine and C library, where the C library's allocator moves
/// by hundreds of instructions with the heap's layout. It is also about as cheap as a
/// general allocator gets, so what it shows recycling saving is a lower bound.
///
/// Blocks are never given back to the system (a bench's process is short); a request larger
/// than the largest class, or aligned more than 16 bytes, goes to the system unchanged.
pub struct SizeClassAlloc;

/// The class of `layout`, if it has one.
#[inline(always)]
fn class_of(layout: Layout) -> Option<usize> {
    if layout.align() > ALIGN {
        return None;
    }
    let size = layout.size().max(MIN_SIZE).next_power_of_two();
    let class = (size.trailing_zeros() - MIN_SIZE.trailing_zeros()) as usize;
    (class < CLASSES).then_some(class)
}

/// The layout every block of `class` is allocated with.
#[inline(always)]
fn class_layout(class: usize) -> Layout {
    // A power of two of at most 64 KiB, aligned to 16: always a valid layout.
    Layout::from_size_align(MIN_SIZE << class, ALIGN).expect("a class's layout")
}

// SAFETY: every block handed out is either the system's, allocated with the class's layout
// (which covers the request's size and alignment), or one of those freed earlier and not in
// use (a free list holds only freed blocks, each once); a block is given back to the system
// with the layout it was allocated with (the class's, or the request's when it has none).
unsafe impl GlobalAlloc for SizeClassAlloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        let Some(class) = class_of(layout) else {
            // SAFETY: the caller's contract, passed on unchanged.
            return unsafe { System.alloc(layout) };
        };
        let popped = FREE
            .try_with(|free| {
                let head = free[class].get();
                if !head.is_null() {
                    // SAFETY: a free block of this class, at least 16 bytes, 16-aligned, whose
                    // first word is the next free block (written by `dealloc`).
                    free[class].set(unsafe { head.cast::<*mut u8>().read() });
                }
                head
            })
            .unwrap_or(null_mut());
        if !popped.is_null() {
            return popped;
        }
        // SAFETY: a class's layout has a non-zero size.
        unsafe { System.alloc(class_layout(class)) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let Some(class) = class_of(layout) else {
            // SAFETY: a block without a class came from the system with this layout.
            return unsafe { System.dealloc(ptr, layout) };
        };
        let pushed = FREE.try_with(|free| {
            // SAFETY: the block is the caller's to give back, of this class (at least 16
            // bytes, 16-aligned): its first word may hold the link.
            unsafe { ptr.cast::<*mut u8>().write(free[class].get()) };
            free[class].set(ptr);
        });
        if pushed.is_err() {
            // The thread is ending: back to the system, with the class's layout.
            // SAFETY: the block came from the system (or a list) with the class's layout.
            unsafe { System.dealloc(ptr, class_layout(class)) };
        }
    }
}
