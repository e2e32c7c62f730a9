//! Page-aligned buffers for direct I/O: page-sized ones from huge-page chunks
//! (`slab`), others from the heap.

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use crate::IoError;

mod slab;

pub(crate) use slab::{CHUNK_BYTES, INDEXED_CHUNKS, chunk};

/// Alignment of every [`AlignedBuf`], enough for `O_DIRECT` on any logical block size up
/// to 4 KiB and for the page size of x86-64 and most aarch64 kernels.
pub const BUF_ALIGN: usize = 4096;

/// A zero-sized type whose alignment gives `AlignedBuf::empty` its aligned dangling pointer.
#[repr(align(4096))]
struct PageAligned;
const _: () = assert!(std::mem::align_of::<PageAligned>() == BUF_ALIGN);

/// A zero-initialised heap buffer whose start is aligned to [`BUF_ALIGN`] (4096) bytes.
///
/// `len()` is exactly what was asked for; the allocation behind it is rounded up to a
/// multiple of 4096, so `O_DIRECT` callers should ask for multiples of 4096. The bytes live
/// in their own allocation (a database page's size, 4–32 KiB, from chunks backed by
/// transparent huge pages where the kernel allows; any other size from the heap): moving
/// an `AlignedBuf` (into a request, a completion, another thread) never moves them, which is what lets a backend hand their address to
/// the kernel while the `AlignedBuf` value itself travels. An empty buffer allocates
/// nothing, so `AlignedBuf::new(0)` is free (useful for fsync requests).
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    /// Bytes allocated (a multiple of `BUF_ALIGN`); 0 means nothing is allocated.
    capacity: usize,
    /// The slab chunk the bytes belong to ([`slab::UNINDEXED`] for one without an
    /// index), or [`HEAP`] when they come from the heap.
    chunk: u32,
}

/// `AlignedBuf::chunk` of a buffer from the heap.
const HEAP: u32 = u32::MAX;

// SAFETY: an AlignedBuf uniquely owns its allocation (like Box<[u8]>) and has no interior
// mutability, so sending it to or sharing it between threads is as safe as for Vec<u8>.
unsafe impl Send for AlignedBuf {}
// SAFETY: see above; `&AlignedBuf` only gives shared `&[u8]` access.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of exactly `len` bytes, aligned to 4096.
    ///
    /// # Panics
    /// Like `vec![0; len]`, panics if the allocation size overflows and aborts if memory is
    /// exhausted; use [`AlignedBuf::try_new`] when `len` comes from untrusted input.
    pub fn new(len: usize) -> AlignedBuf {
        match Self::try_new(len) {
            Ok(buf) => buf,
            Err(_) => match Self::layout(len) {
                Some(layout) => alloc::handle_alloc_error(layout),
                None => panic!("AlignedBuf of {len} bytes exceeds the address space"),
            },
        }
    }

    /// A zeroed buffer of exactly `len` bytes, or an error when it cannot be allocated.
    pub fn try_new(len: usize) -> Result<AlignedBuf, IoError> {
        if len == 0 {
            return Ok(Self::empty());
        }
        let layout = Self::layout(len).ok_or(IoError::BufferAllocation { len })?;
        if let Some((ptr, chunk)) = slab::alloc(layout.size()) {
            return Ok(AlignedBuf {
                ptr,
                len,
                capacity: layout.size(),
                chunk,
            });
        }
        // SAFETY: the layout has a non-zero size (len > 0 rounded up to at least 4096) and a
        // valid power-of-two alignment.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or(IoError::BufferAllocation { len })?;
        Ok(AlignedBuf {
            ptr,
            len,
            capacity: layout.size(),
            chunk: HEAP,
        })
    }

    /// An empty buffer; allocates nothing.
    pub const fn empty() -> AlignedBuf {
        AlignedBuf {
            // dangling() of a 4096-aligned type is a non-null, 4096-aligned address: valid
            // for zero-length slices and never dereferenced or freed.
            ptr: NonNull::<PageAligned>::dangling().cast::<u8>(),
            len: 0,
            capacity: 0,
            chunk: HEAP,
        }
    }

    /// A buffer holding a copy of `data`, aligned to 4096.
    pub fn from_slice(data: &[u8]) -> AlignedBuf {
        let mut buf = Self::new(data.len());
        buf.copy_from_slice(data);
        buf
    }

    /// The allocation for `len` bytes: rounded up to a multiple of 4096, aligned to 4096.
    fn layout(len: usize) -> Option<Layout> {
        let size = len.checked_next_multiple_of(BUF_ALIGN)?;
        Layout::from_size_align(size, BUF_ALIGN).ok()
    }

    /// Length in bytes (as requested, not rounded).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes actually allocated: `len()` rounded up to a multiple of 4096.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Address of the first byte, for handing to the kernel. Stable for the buffer's whole
    /// life, however the `AlignedBuf` value is moved.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Mutable address of the first byte, for handing to the kernel (see [`Self::as_ptr`]).
    /// Taken without creating a reference to the contents, so the pointer stays valid
    /// while the `AlignedBuf` value is moved elsewhere.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The index of the slab chunk holding the bytes, which io_uring can use as a
    /// registered (fixed) buffer ([`chunk`] gives its address): `None` for a buffer
    /// from the heap or from a chunk without an index.
    pub(crate) fn fixed_chunk(&self) -> Option<u16> {
        u16::try_from(self.chunk)
            .ok()
            .filter(|&c| usize::from(c) < slab::INDEXED_CHUNKS)
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for reads of len bytes (a live, initialised allocation of
        // capacity >= len, or a dangling aligned pointer with len == 0), and the shared
        // borrow of self prevents mutation for the slice's lifetime.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in deref, and the exclusive borrow of self makes the slice unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.capacity == 0 {
            return;
        }
        if self.chunk != HEAP {
            slab::give_back(self.ptr, self.capacity, self.chunk);
            return;
        }
        // SAFETY: the allocation was made by alloc_zeroed with exactly this layout (size
        // `capacity`, alignment BUF_ALIGN), and is freed only here, once.
        unsafe {
            alloc::dealloc(
                self.ptr.as_ptr(),
                Layout::from_size_align_unchecked(self.capacity, BUF_ALIGN),
            )
        };
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> AlignedBuf {
        AlignedBuf::from_slice(self)
    }
}

impl Default for AlignedBuf {
    fn default() -> AlignedBuf {
        AlignedBuf::empty()
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl AsRef<[u8]> for AlignedBuf {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl AsMut<[u8]> for AlignedBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_exact_length() {
        for len in [1, 512, 4095, 4096, 4097, 65536, 100_000] {
            let buf = AlignedBuf::new(len);
            assert_eq!(buf.len(), len);
            assert_eq!(buf.as_ptr() as usize % BUF_ALIGN, 0);
            assert_eq!(buf.capacity() % BUF_ALIGN, 0);
            assert!(buf.capacity() >= len);
            assert!(buf.iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn empty_allocates_nothing() {
        let mut buf = AlignedBuf::new(0);
        assert!(buf.is_empty());
        assert_eq!(buf.capacity(), 0);
        assert_eq!(&buf[..], &[] as &[u8]);
        assert_eq!(buf.as_mut_ptr() as usize % BUF_ALIGN, 0);
    }

    #[test]
    fn address_is_stable_across_moves_and_threads() {
        let mut buf = AlignedBuf::new(8192);
        buf[100] = 7;
        let addr = buf.as_ptr() as usize;
        let moved = vec![buf];
        let back = std::thread::spawn(move || moved.into_iter().next())
            .join()
            .expect("thread")
            .expect("buffer");
        assert_eq!(back.as_ptr() as usize, addr);
        assert_eq!(back[100], 7);
        let copy = back.clone();
        assert_ne!(copy.as_ptr(), back.as_ptr());
        assert_eq!(&copy[..], &back[..]);
    }

    #[test]
    fn absurd_size_is_an_error() {
        assert!(matches!(
            AlignedBuf::try_new(usize::MAX - 10),
            Err(IoError::BufferAllocation { .. })
        ));
    }
}
