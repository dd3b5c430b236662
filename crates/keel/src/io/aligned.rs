//! Heap buffers aligned to [`IO_ALIGN`], as O_DIRECT requires.
//!
//! `Vec<u8>` only promises byte alignment, and the kernel refuses (EINVAL) an
//! O_DIRECT transfer whose memory is not aligned to the logical block size.
//! This is the one place that allocates such memory by hand.

#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use super::IO_ALIGN;

const _: () = assert!(IO_ALIGN.is_power_of_two());

/// A zero-initialised byte buffer whose start is aligned to [`IO_ALIGN`].
///
/// It dereferences to `[u8]`; its length is fixed at creation.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    /// False for a buffer lent out of a [`Slab`]: the slab frees the
    /// memory, not the buffer.
    owned: bool,
}

// SAFETY: `AlignedBuf` owns its allocation exclusively, like `Box<[u8]>`; the
// pointer is never shared outside borrows tied to `&self` / `&mut self`.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`, which is `Sync`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// A buffer of `len` zero bytes. A zero length allocates nothing.
    ///
    /// # Panics
    /// If `len` rounded up to [`IO_ALIGN`] exceeds `isize::MAX`; aborts (as
    /// `Vec` does) if the allocator fails.
    pub fn new(len: usize) -> Self {
        if len == 0 {
            return Self {
                ptr: Self::dangling(),
                len,
                owned: true,
            };
        }
        let layout = Self::layout(len);
        // SAFETY: `layout` has a non-zero size (len > 0 was checked above).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        Self {
            ptr,
            len,
            owned: true,
        }
    }

    /// An aligned copy of `data`.
    pub fn from_slice(data: &[u8]) -> Self {
        let mut buf = Self::new(data.len());
        buf.copy_from_slice(data);
        buf
    }

    fn layout(len: usize) -> Layout {
        Layout::from_size_align(len, IO_ALIGN)
            .unwrap_or_else(|_| panic!("AlignedBuf of {len} bytes exceeds isize::MAX"))
    }

    /// A well-aligned, non-null pointer for the empty buffer; never read or
    /// written through, since the slice it backs is empty.
    fn dangling() -> NonNull<u8> {
        let ptr = std::ptr::null_mut::<u8>().wrapping_add(IO_ALIGN);
        NonNull::new(ptr).unwrap_or(NonNull::dangling())
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len == 0 || !self.owned {
            return;
        }
        // SAFETY: a non-empty buffer was allocated in `new` with exactly this
        // layout and has not been freed; `drop` runs once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
    }
}

/// One anonymous mapping that lends out many page buffers ([`Slab::carve`]):
/// the buffer pool's frames. Allocating each frame on its own costs the
/// allocator's alignment padding per frame (`posix_memalign` of 16 KiB at
/// 4 KiB alignment wasted about 4 KiB a frame: a quarter of the pool), and
/// zeroing it makes the whole pool resident at open. A mapping is aligned
/// to the page size of the machine, zero-filled by the kernel and resident
/// only where touched.
pub(crate) struct Slab {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the slab only hands out its memory through `carve`, whose buffers
// are `Send`/`Sync` like any `AlignedBuf`; the slab itself is only mapped
// and unmapped.
unsafe impl Send for Slab {}
// SAFETY: as above; `&Slab` gives access to nothing.
unsafe impl Sync for Slab {}

impl Slab {
    /// A zero-filled mapping of `len` bytes (`len` > 0).
    pub(crate) fn new(len: usize) -> std::io::Result<Slab> {
        if len == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "an empty slab",
            ));
        }
        // SAFETY: an anonymous private mapping of `len` bytes at an address
        // the kernel chooses; no file, no existing memory is involved.
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
            return Err(std::io::Error::last_os_error());
        }
        let ptr = NonNull::new(raw.cast::<u8>()).ok_or_else(std::io::Error::last_os_error)?;
        debug_assert!((ptr.as_ptr() as usize).is_multiple_of(IO_ALIGN));
        Ok(Slab { ptr, len })
    }

    /// The slab cut into `len / size` buffers of `size` bytes each
    /// (`size` a multiple of [`IO_ALIGN`], so each is aligned).
    ///
    /// # Safety
    /// The buffers borrow the slab's memory: the caller keeps the slab
    /// alive (and does not carve it again) for as long as any of them
    /// lives, and never moves one out to where it could outlive the slab.
    pub(crate) unsafe fn carve(&self, size: usize) -> Vec<AlignedBuf> {
        assert!(
            size > 0 && size.is_multiple_of(IO_ALIGN),
            "slab buffers of {size} bytes"
        );
        (0..self.len / size)
            .map(|i| AlignedBuf {
                // SAFETY: `i * size + size <= self.len`, inside the mapping.
                ptr: unsafe { NonNull::new_unchecked(self.ptr.as_ptr().add(i * size)) },
                len: size,
                owned: false,
            })
            .collect()
    }
}

impl Drop for Slab {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; by `carve`'s
        // contract no buffer into it is alive.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` initialised bytes (zeroed at
        // allocation) for as long as `self` lives, or `len` is 0 and `ptr` is
        // non-null and aligned, which is all an empty slice needs.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> Self {
        Self::from_slice(self)
    }
}

impl PartialEq for AlignedBuf {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for AlignedBuf {}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_aligned(buf: &AlignedBuf) -> bool {
        (buf.as_ptr() as usize).is_multiple_of(IO_ALIGN)
    }

    #[test]
    fn new_buffer_is_zeroed_and_aligned() {
        for len in [1, 512, 4095, 4096, 4097, 16384, 65536 + 3] {
            let buf = AlignedBuf::new(len);
            assert_eq!(buf.len(), len);
            assert!(is_aligned(&buf), "len {len}");
            assert!(buf.iter().all(|&b| b == 0), "len {len}");
        }
    }

    #[test]
    fn zero_length_buffer_works() {
        let mut buf = AlignedBuf::new(0);
        assert!(buf.is_empty());
        assert!(is_aligned(&buf));
        buf.copy_from_slice(&[]);
        let copy = buf.clone();
        assert_eq!(copy, buf);
        assert_eq!(format!("{copy:?}"), "AlignedBuf { len: 0 }");
    }

    #[test]
    fn write_clone_and_compare() {
        let mut buf = AlignedBuf::new(8192);
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i % 251) as u8;
        }
        let copy = buf.clone();
        assert!(is_aligned(&copy));
        assert_eq!(copy, buf);
        assert_ne!(copy.as_ptr(), buf.as_ptr());
        buf[0] = 0xff;
        assert_ne!(copy, buf);
    }

    #[test]
    fn from_slice_copies() {
        let buf = AlignedBuf::from_slice(b"keel");
        assert_eq!(&*buf, b"keel");
        assert!(is_aligned(&buf));
    }

    #[test]
    fn debug_prints_length_only() {
        let buf = AlignedBuf::from_slice(&[7; 100]);
        assert_eq!(format!("{buf:?}"), "AlignedBuf { len: 100 }");
    }

    #[test]
    fn is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<AlignedBuf>();
        let buf = AlignedBuf::from_slice(&[1, 2, 3]);
        let handle = std::thread::spawn(move || buf.iter().map(|&b| u32::from(b)).sum::<u32>());
        assert_eq!(handle.join().ok(), Some(6));
    }

    #[test]
    fn a_slab_lends_aligned_zeroed_disjoint_buffers_and_clones_are_owned() {
        let slab = Slab::new(8 * 16384).unwrap_or_else(|e| panic!("{e}"));
        // SAFETY: the buffers are dropped before the slab (declared after).
        #[allow(unsafe_code)]
        let mut bufs = unsafe { slab.carve(16384) };
        assert_eq!(bufs.len(), 8);
        for (i, b) in bufs.iter_mut().enumerate() {
            assert_eq!(b.len(), 16384);
            assert!(is_aligned(b));
            assert!(b.iter().all(|&x| x == 0));
            b.fill(i as u8 + 1);
        }
        for (i, b) in bufs.iter().enumerate() {
            assert!(
                b.iter().all(|&x| x == i as u8 + 1),
                "buffer {i} overlaps another"
            );
        }
        // A copy is the copier's own: it outlives the slab.
        let copy = bufs[3].clone();
        drop(bufs);
        drop(slab);
        assert!(copy.iter().all(|&x| x == 4));
    }
}
