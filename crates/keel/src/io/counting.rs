//! A file system that counts the bytes written through it, per file, and
//! passes every call on to the file system it wraps: for tests that check
//! the engine's own byte counters (`log_bytes_written`,
//! `os_data_written_bytes`, `dblwr_written_bytes`, `os_other_written_bytes`)
//! against what actually reached the file system layer.
//!
//! A write is counted once it succeeded, with the length of the buffer the
//! engine handed to [`Device::write_at`]. `set_len` and `allocate` are not
//! writes (the OS layer may still write zeros for an `allocate` where the
//! file system has no `fallocate`; that is below this layer).

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{Device, DirLock, FileSystem, LockError, OpenMode};

/// Bytes written per file path, shared by a [`CountingFs`] and its devices.
type Tally = Arc<Mutex<BTreeMap<PathBuf, u64>>>;

/// Counts the bytes written to every file opened through it (see the
/// module doc).
pub struct CountingFs {
    inner: Arc<dyn FileSystem>,
    tally: Tally,
}

impl CountingFs {
    /// Count the writes that go to `inner`.
    pub fn new(inner: Arc<dyn FileSystem>) -> CountingFs {
        CountingFs {
            inner,
            tally: Tally::default(),
        }
    }

    /// Bytes written so far, per path.
    pub fn written(&self) -> BTreeMap<PathBuf, u64> {
        self.tally.lock().clone()
    }

    /// Bytes written so far to the files whose name starts with `prefix`
    /// (`redo-`, `data-`, `dblwr-`; empty for every file).
    pub fn written_to(&self, prefix: &str) -> u64 {
        self.tally
            .lock()
            .iter()
            .filter(|(p, _)| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(prefix))
            })
            .map(|(_, n)| n)
            .sum()
    }
}

impl std::fmt::Debug for CountingFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountingFs")
            .field("written", &*self.tally.lock())
            .finish_non_exhaustive()
    }
}

impl FileSystem for CountingFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn Device>> {
        let inner = self.inner.open(path, mode)?;
        Ok(Arc::new(CountingDevice {
            inner,
            path: path.to_path_buf(),
            tally: Arc::clone(&self.tally),
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn lock_dir(&self, dir: &Path) -> Result<DirLock, LockError> {
        self.inner.lock_dir(dir)
    }

    fn lock_dir_shared(&self, dir: &Path) -> Result<DirLock, LockError> {
        self.inner.lock_dir_shared(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)
    }

    fn create_dirs(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        self.inner.create_dirs(dir)
    }
}

/// One file of a [`CountingFs`].
struct CountingDevice {
    inner: Arc<dyn Device>,
    path: PathBuf,
    tally: Tally,
}

impl Device for CountingDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_at(buf, offset)?;
        *self.tally.lock().entry(self.path.clone()).or_default() += buf.len() as u64;
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        self.inner.allocate(len)
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }
}
