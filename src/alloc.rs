//! The process's allocator: mimalloc, called the way Rust's own system allocator calls
//! malloc.
//!
//! The `mimalloc` crate passes every allocation to `mi_malloc_aligned`, and mimalloc 3 takes
//! a slow path there for any block over 1 KiB whose size class is not a power of two: it
//! over-allocates and marks the page as holding interior pointers, even at alignment 8.
//! Most of the gateway's larger blocks (buffers, futures, header maps) are such blocks.
//! Here an alignment that mimalloc guarantees anyway (16 bytes, and not above the size)
//! goes to plain `mi_malloc`; only larger alignments take the aligned path (BENCHMARKS.md).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys as mi;

/// The alignment every `mi_malloc` block of at least that size has (`MI_MAX_ALIGN_SIZE`).
const MIN_ALIGN: usize = 16;

/// mimalloc as the global allocator.
pub struct Allocator;

fn plain(layout: &Layout, size: usize) -> bool {
    layout.align() <= MIN_ALIGN && layout.align() <= size
}

// SAFETY: each method forwards to the mimalloc function that meets `GlobalAlloc`'s
// contract for the layout: plain calls only where mimalloc's guaranteed alignment covers
// `layout.align()`, the aligned calls otherwise; blocks from either are freed by `mi_free`.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if plain(&layout, layout.size()) {
                mi::mi_malloc(layout.size()).cast()
            } else {
                mi::mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: see the impl.
        unsafe {
            if plain(&layout, layout.size()) {
                mi::mi_zalloc(layout.size()).cast()
            } else {
                mi::mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { mi::mi_free(ptr.cast::<c_void>()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator; see the impl.
        unsafe {
            if plain(&layout, new_size) {
                mi::mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi::mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_have_the_alignment_asked_for_and_keep_their_bytes() {
        let a = Allocator;
        for align in [1, 8, 16, 32, 64, 128, 4096] {
            for size in [
                1,
                7,
                8,
                16,
                24,
                100,
                1000,
                1500,
                3000,
                6000,
                70_000,
                1 << 20,
            ] {
                let Ok(layout) = Layout::from_size_align(size, align) else {
                    continue;
                };
                // SAFETY: a non-zero size; the block is written within its size, grown with
                // the same alignment and freed once.
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    p.write_bytes(0xA5, size);
                    let q = a.realloc(p, layout, size * 3);
                    assert_eq!(q as usize % align, 0, "grown: size {size} align {align}");
                    assert!((0..size).all(|i| *q.add(i) == 0xA5));
                    a.dealloc(q, Layout::from_size_align(size * 3, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!((0..size).all(|i| *z.add(i) == 0));
                    a.dealloc(z, layout);
                }
            }
        }
    }
}
