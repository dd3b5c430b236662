//! All I/O goes through this module: nothing else in the engine calls the OS.
//!
//! A [`Device`] is one open file: positional read, positional write, sync,
//! length, allocation. A [`FileSystem`] opens devices, removes files,
//! makes a directory's entries durable and locks database directories
//! ([`lock`]: one process per database). Real files ([`file::OsFileSystem`]),
//! the throttled model of a slower disk ([`throttle::ThrottledFileSystem`]) and,
//! for tests, the faulty device and the byte-counting one (`counting`) are
//! implementations of these traits, so they can be stacked. The faulty and
//! counting ones are compiled for the crate's own tests and with the
//! `test-util` feature (which keel's integration tests enable through a
//! dev-dependency on keel itself); a normal build leaves them out.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub mod aligned;
#[cfg(any(test, feature = "test-util"))]
pub mod counting;
#[cfg(any(test, feature = "test-util"))]
pub mod faulty;
pub mod file;
pub mod lock;
pub mod throttle;

pub use aligned::AlignedBuf;
#[cfg(any(test, feature = "test-util"))]
pub use counting::CountingFs;
#[cfg(any(test, feature = "test-util"))]
pub use faulty::FaultyFs;
pub use file::{FlushMethod, OsFileSystem};
pub use lock::{DirLock, LockError, MemLocks, LOCK_FILE};
pub use throttle::{SetSpecError, ThrottleSpec, ThrottledFileSystem};

/// The device behind a file is gone: unplugged, or (in the faulty file
/// system of the tests) its power failed. An I/O error carrying this, or
/// the OS's ENODEV or ENXIO, is one no retry can outlive
/// ([`is_device_gone`]).
#[derive(Debug)]
pub struct DeviceGone(pub String);

impl std::fmt::Display for DeviceGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DeviceGone {}

/// Does `e` say the device is gone ([`DeviceGone`], ENODEV, ENXIO)?
pub fn is_device_gone(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENODEV) | Some(libc::ENXIO))
        || e.get_ref().is_some_and(|inner| inner.is::<DeviceGone>())
}

/// Alignment of every buffer handed to a device (O_DIRECT needs the logical
/// block size; 4 KiB covers every common device).
pub const IO_ALIGN: usize = 4096;

/// One open file.
// `len` is an I/O call that can fail; an `is_empty` twin would add nothing.
#[allow(clippy::len_without_is_empty)]
pub trait Device: Send + Sync {
    /// Fill `buf` from `offset`; reading past the end is an `UnexpectedEof` error.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Write all of `buf` at `offset`, growing the file if needed.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    /// Make every completed write durable.
    fn sync(&self) -> io::Result<()>;
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// Set the length (grow with zeros or truncate).
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Grow the file to at least `len` bytes with its blocks allocated (and
    /// reading as zeros), so that later writes below `len` cannot fail for
    /// want of space: a full disk shows up here, before any page or log
    /// block is written in place. The default only extends the length
    /// (enough for devices without sparse files).
    fn allocate(&self, len: u64) -> io::Result<()> {
        if self.len()? < len {
            self.set_len(len)?;
        }
        Ok(())
    }
    /// The path the device was opened from, for error messages.
    fn path(&self) -> &Path;
    /// What the device promises about torn writes: the sizes of write that
    /// [`Device::write_atomic_at`] never tears on power loss. The default
    /// promises nothing.
    fn atomic_write_unit(&self) -> AtomicWriteUnit {
        AtomicWriteUnit::None("this kind of device reports no atomic write unit".into())
    }
    /// Write `buf` at `offset` as one untorn write: after a power loss the
    /// bytes are all old or all new. `buf.len()` must be a power of two in
    /// the unit [`Device::atomic_write_unit`] reports, and `offset` a
    /// multiple of it (Linux's rules for `RWF_ATOMIC`); otherwise, or on a
    /// device that promises nothing, the call fails (EINVAL, EOPNOTSUPP)
    /// and writes nothing. The default always fails.
    fn write_atomic_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let _ = (buf, offset);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{}: the device offers no atomic writes",
                self.path().display()
            ),
        ))
    }
}

/// What a device promises about torn writes ([`Device::atomic_write_unit`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AtomicWriteUnit {
    /// A write through [`Device::write_atomic_at`] of a power of two of
    /// bytes in `min..=max`, at an offset that is a multiple of its length,
    /// is never torn.
    Untorn {
        /// Smallest such write, in bytes.
        min: usize,
        /// Largest such write, in bytes.
        max: usize,
    },
    /// No promise; why (statx unsupported, no atomic unit reported, ...).
    None(String),
}

impl AtomicWriteUnit {
    /// Whether a page of `page_size` bytes can be written untorn: `Ok`
    /// with the unit's largest write, or why not.
    pub fn check_page(&self, page_size: usize) -> Result<usize, String> {
        match self {
            AtomicWriteUnit::None(why) => Err(why.clone()),
            AtomicWriteUnit::Untorn { min, max } => {
                if page_size > *max {
                    Err(format!(
                        "the device promises untorn writes of at most {} bytes, less than a \
                         page of {page_size}",
                        max
                    ))
                } else if page_size < *min {
                    Err(format!(
                        "the device's untorn writes are at least {min} bytes, more than a \
                         page of {page_size}"
                    ))
                } else {
                    Ok(*max)
                }
            }
        }
    }
}

/// How a file is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// The file must exist.
    Existing,
    /// The file must not exist; it is created.
    CreateNew,
    /// The file must exist; it is opened for reading only, and every
    /// write, size change or allocation through the device fails. For the
    /// tools that read a database another process may have open.
    ReadOnly,
}

/// Opens devices.
pub trait FileSystem: Send + Sync {
    /// Open `path`.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn Device>>;
    /// Does a file exist at `path`? (In-memory file systems answer for
    /// their own files.)
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    /// Take the exclusive lock on the database directory `dir` (which
    /// exists), without waiting: [`LockError::Held`] if another process,
    /// or another open in this one, holds it. Held until the returned
    /// [`DirLock`] is dropped, or the process ends. See [`lock`] for the
    /// protocol.
    fn lock_dir(&self, dir: &Path) -> Result<DirLock, LockError>;
    /// Take a shared lock on `dir`, for a read-only open: any number of
    /// shared holders at once, none while someone holds the exclusive lock
    /// (and the exclusive lock is refused while shared holders remain).
    /// Without waiting, like [`FileSystem::lock_dir`]. The default takes
    /// the exclusive lock: correct, but one reader at a time.
    fn lock_dir_shared(&self, dir: &Path) -> Result<DirLock, LockError> {
        self.lock_dir(dir)
    }
    /// Make the entries of directory `dir` durable: a file created in it
    /// (or removed from it) since the last call is there (or gone) after
    /// a power loss. Syncing a file makes its contents durable, not its
    /// name.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Remove the file at `path`. Handles already open on it keep working
    /// on the unnamed file; the removal is durable once its directory is
    /// synced ([`FileSystem::sync_dir`]).
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Create directory `dir` and every missing directory above it;
    /// returns the ones this call created, outermost first. A new
    /// directory's name is durable only once its parent is synced
    /// ([`FileSystem::sync_dir`]), as a new file's is.
    fn create_dirs(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
}
