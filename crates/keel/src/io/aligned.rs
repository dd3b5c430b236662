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
            };
        }
        let layout = Self::layout(len);
        // SAFETY: `layout` has a non-zero size (len > 0 was checked above).
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        Self { ptr, len }
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
        if self.len == 0 {
            return;
        }
        // SAFETY: a non-empty buffer was allocated in `new` with exactly this
        // layout and has not been freed; `drop` runs once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.len)) }
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
}
