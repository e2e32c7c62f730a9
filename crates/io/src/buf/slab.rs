//! Where page-sized [`AlignedBuf`](super::AlignedBuf)s live: 2 MiB-aligned chunks the
//! kernel may back with transparent huge pages (`MADV_HUGEPAGE`), one list of chunks
//! per size.
//!
//! Why: the database cache's frames, the page writer's snapshots and the reads'
//! buffers are page-sized (4–32 KiB) and each is scanned whole (the checksum of a page
//! read, the seal of a page written) right after the device or another thread wrote
//! it, so every cache line is a miss. From malloc each 4 KiB of them is its own page
//! of the process, and in a virtual machine a TLB miss walks two sets of page tables;
//! in 2 MiB pages a 32 KiB page costs one walk at most, and pinning it for `O_DIRECT`
//! takes one folio instead of eight pages. docs/performance.md ("The transactional
//! engine: where the CPU goes") measures it.
//!
//! Buffers given back go on their size's free list and are reused (zeroed first); the
//! chunks stay with the process until it exits, as the memory of a cache does. Nothing
//! here is ever unmapped, so a pointer handed out stays valid until given back, and a
//! chunk can be registered with io_uring ([`chunk`]) for as long as a ring lives: the
//! backend then reads and writes its buffers as fixed buffers, and the kernel does not
//! pin their pages per request.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use super::BUF_ALIGN;

/// Buffer capacities served here: the page sizes of the engine. Others come from the
/// heap.
const CLASSES: [usize; 4] = [4096, 8192, 16384, 32768];

/// Bytes of one chunk: two huge pages, 128 buffers of the largest size. Small, because
/// registering a chunk with io_uring pins (and so backs) all of it.
pub(crate) const CHUNK_BYTES: usize = 4 << 20;

/// Chunks given an index, which io_uring's fixed buffers use (a u16): 16 GiB of page
/// buffers. Chunks beyond work the same, without fixed buffers.
pub(crate) const INDEXED_CHUNKS: usize = 4096;

/// The address of each indexed chunk, set once when it is mapped.
static CHUNK_BASES: [AtomicUsize; INDEXED_CHUNKS] = [const { AtomicUsize::new(0) }; INDEXED_CHUNKS];
static CHUNKS_MAPPED: AtomicUsize = AtomicUsize::new(0);

/// The chunk of a buffer that is not indexed (beyond [`INDEXED_CHUNKS`]).
pub(crate) const UNINDEXED: u32 = u32::MAX - 1;

/// The size of a transparent huge page on x86-64 and most aarch64 kernels; chunks are
/// aligned to it so that each of their 2 MiB ranges can be one.
const HUGE_PAGE: usize = 2 << 20;

struct Class {
    /// Buffers given back, with their chunk: reused before the chunk is cut further.
    free: Vec<(usize, u32)>,
    /// The part of the newest chunk not yet handed out, `[next, end)`: fresh from
    /// mmap, so already zero.
    next: usize,
    end: usize,
    chunk: u32,
}

static SLABS: [Mutex<Class>; CLASSES.len()] = [const {
    Mutex::new(Class {
        free: Vec::new(),
        next: 0,
        end: 0,
        chunk: UNINDEXED,
    })
}; CLASSES.len()];

fn class_of(capacity: usize) -> Option<usize> {
    CLASSES.iter().position(|&c| c == capacity)
}

/// A zeroed buffer of `capacity` bytes from its size's chunks, with its chunk's index
/// (or [`UNINDEXED`]); `None` when the size is not one served here or no chunk could be
/// mapped (the caller then uses the heap).
pub(super) fn alloc(capacity: usize) -> Option<(NonNull<u8>, u32)> {
    let class = class_of(capacity)?;
    let mut slab = SLABS[class].lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((addr, chunk)) = slab.free.pop() {
        drop(slab);
        let ptr = addr as *mut u8;
        // SAFETY: `addr` is a buffer of `capacity` bytes inside a chunk that is never
        // unmapped, given back by its only owner (`give_back`), so nobody else uses it.
        unsafe { std::ptr::write_bytes(ptr, 0, capacity) };
        return Some((NonNull::new(ptr)?, chunk));
    }
    if slab.next == slab.end {
        let (base, chunk) = map_chunk()?;
        slab.next = base;
        slab.end = base + CHUNK_BYTES;
        slab.chunk = chunk;
    }
    let addr = slab.next;
    slab.next += capacity;
    Some((NonNull::new(addr as *mut u8)?, slab.chunk))
}

/// Takes back a buffer of `capacity` bytes from chunk `chunk` that [`alloc`] handed out.
pub(super) fn give_back(ptr: NonNull<u8>, capacity: usize, chunk: u32) {
    let class = class_of(capacity).expect("only buffers of a served size come from the slab");
    SLABS[class]
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .free
        .push((ptr.as_ptr() as usize, chunk));
}

/// The address of indexed chunk `index` ([`CHUNK_BYTES`] long, mapped for the rest of
/// the process's life), if it is mapped.
pub(crate) fn chunk(index: u32) -> Option<usize> {
    let base = CHUNK_BASES.get(index as usize)?.load(Ordering::Acquire);
    (base != 0).then_some(base)
}

/// Maps one chunk aligned to [`HUGE_PAGE`] and asks for huge pages on it; its address
/// and index.
fn map_chunk() -> Option<(usize, u32)> {
    let len = CHUNK_BYTES + HUGE_PAGE;
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing;
    // no memory of ours is passed.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        return None;
    }
    let start = raw as usize;
    let base = start.next_multiple_of(HUGE_PAGE);
    let head = base - start;
    let tail = len - head - CHUNK_BYTES;
    // SAFETY: both ranges lie inside the mapping just made and outside the chunk kept,
    // and nothing refers to them. A failed unmap only leaves them mapped and unused.
    unsafe {
        if head > 0 {
            libc::munmap(raw, head);
        }
        if tail > 0 {
            libc::munmap((base + CHUNK_BYTES) as *mut libc::c_void, tail);
        }
        // Advice only: without it (THP disabled, an old kernel) the chunk works in
        // 4 KiB pages.
        libc::madvise(base as *mut libc::c_void, CHUNK_BYTES, libc::MADV_HUGEPAGE);
    }
    debug_assert_eq!(base % BUF_ALIGN, 0);
    let index = CHUNKS_MAPPED.fetch_add(1, Ordering::AcqRel);
    let chunk = match CHUNK_BASES.get(index) {
        Some(slot) => {
            slot.store(base, Ordering::Release);
            index as u32
        }
        None => UNINDEXED,
    };
    Some((base, chunk))
}
