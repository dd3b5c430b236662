//! A faulty file system for crash and fault tests, entirely in memory.
//!
//! Every file has a *durable* image (what survives power loss) and a list of
//! *pending* writes that are not yet durable. Reads see the volatile image:
//! durable plus pending, in issue order. `sync` makes a file's pending writes
//! durable. [`FaultyFs::crash`] simulates power loss: each file keeps its
//! durable image and, depending on the [`CrashMode`], none, some or torn
//! parts of its pending writes; every handle opened before the crash fails
//! from then on with EIO ("device lost power"), and files reopened through the
//! same `FaultyFs` see only what became durable. A test therefore crashes the
//! file system, drops (or leaks) the engine, and reopens the database with the
//! same `FaultyFs`.
//!
//! Simplifications, each chosen because the engine does not depend on the
//! difference:
//! - `set_len` applies at once and is durable (a real file system needs a
//!   sync for a size change too); pending writes past a shrunk length are
//!   clipped.
//! - Creating a file is durable at once (a real one needs a directory sync):
//!   after a crash the file exists, holding what was synced into it.
//! - Kept pending writes are applied in issue order, so of two overlapping
//!   writes that both survive, the later one wins.
//! - A failed sync (injected EIO) loses the file's pending writes: they stay
//!   readable until a crash, then they are gone. This is what Linux does after
//!   an fsync error (the pages are marked clean), and why the engine must
//!   refuse writes after one (USENIX ATC '20, "Can applications recover from
//!   fsync failures?").
//!
//! # Failpoints
//! Named like raft-engine's (`log::write::enospc`): `"{name}.{op}:{errno}"`,
//! optionally followed by `:sticky`, where `name` is a substring of the path
//! (`data`, `dblwr`, `log`, or empty for every file), `op` is one of `read`,
//! `write`, `sync`, `set_len`, and `errno` is `eio` or `enospc`. So
//! `data.write:enospc` fails the next write to a data file with ENOSPC once,
//! and `dblwr.sync:eio:sticky` fails every sync of a doublewrite file.
//! [`FaultyFs::fail_after`] lets the first `n` matching calls succeed.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{Device, FileSystem, OpenMode};

mod failpoint;
#[cfg(test)]
mod tests;

use failpoint::{Armed, Failpoints, Op};
pub use failpoint::{Errno, FailKind, FailPoint};

/// The unit a torn write keeps or loses: the device's atomic write size.
pub const SECTOR: usize = 4096;

/// What power loss does to writes that were not synced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashMode {
    /// Every pending write is lost.
    DropUnsynced,
    /// Each pending write is independently kept or lost (a write-back cache
    /// that reordered its writes).
    Random {
        /// Seed of the choices; the same seed and writes give the same image.
        seed: u64,
    },
    /// Like `Random`, but a write larger than one [`SECTOR`] keeps a random
    /// subset of its sectors: a torn page.
    Torn {
        /// Seed of the choices.
        seed: u64,
    },
}

/// One file's images.
#[derive(Default)]
struct FileState {
    /// Bumped by every crash; handles opened under an older epoch are dead.
    epoch: u64,
    durable: Vec<u8>,
    /// What reads see: `durable` with `pending` applied.
    volatile: Vec<u8>,
    /// Writes since the last sync, in issue order: (offset, bytes).
    pending: Vec<(u64, Vec<u8>)>,
}

impl FileState {
    fn crash(&mut self, mode: CrashMode, rng: &mut SplitMix64) {
        for (offset, data) in std::mem::take(&mut self.pending) {
            match mode {
                CrashMode::DropUnsynced => {}
                CrashMode::Random { .. } => {
                    if rng.coin() {
                        apply(&mut self.durable, offset, &data);
                    }
                }
                CrashMode::Torn { .. } => self.keep_sectors(offset, &data, rng),
            }
        }
        self.volatile = self.durable.clone();
        self.epoch += 1;
    }

    /// Keep each device sector that `data` touches with probability 1/2.
    fn keep_sectors(&mut self, offset: u64, data: &[u8], rng: &mut SplitMix64) {
        if data.len() <= SECTOR {
            if rng.coin() {
                apply(&mut self.durable, offset, data);
            }
            return;
        }
        let sector = SECTOR as u64;
        let end = offset + data.len() as u64;
        let mut start = offset;
        while start < end {
            let stop = ((start / sector + 1) * sector).min(end);
            if rng.coin() {
                let (a, b) = ((start - offset) as usize, (stop - offset) as usize);
                apply(&mut self.durable, start, &data[a..b]);
            }
            start = stop;
        }
    }

    fn set_len(&mut self, len: usize) {
        self.durable.resize(len, 0);
        self.volatile.resize(len, 0);
        let len = len as u64;
        self.pending.retain_mut(|(offset, data)| {
            if *offset >= len {
                return false;
            }
            data.truncate((len - *offset) as usize);
            true
        });
    }
}

/// Copy `data` into `image` at `offset`, growing it with zeros if needed.
fn apply(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = offset as usize;
    let end = start + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(data);
}

/// A small deterministic generator, so a crash image is a function of its seed.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

/// An in-memory [`FileSystem`] that loses unsynced writes on demand and fails
/// calls at named failpoints (see the module documentation).
#[derive(Default)]
pub struct FaultyFs {
    files: Mutex<HashMap<PathBuf, Arc<Mutex<FileState>>>>,
    failpoints: Arc<Failpoints>,
}

impl FaultyFs {
    /// An empty file system.
    pub fn new() -> Self {
        Self::default()
    }

    /// Simulate power loss (see [`CrashMode`]). Files are visited in path
    /// order so a seed always gives the same images.
    pub fn crash(&self, mode: CrashMode) {
        let seed = match mode {
            CrashMode::DropUnsynced => 0,
            CrashMode::Random { seed } | CrashMode::Torn { seed } => seed,
        };
        let mut rng = SplitMix64(seed);
        let files = self.files.lock();
        let mut paths: Vec<&PathBuf> = files.keys().collect();
        paths.sort();
        for path in paths {
            files[path].lock().crash(mode, &mut rng);
        }
    }

    /// Arm `point`: the first `after_n_ops` matching calls succeed, then it
    /// fires as `kind` says. Several failpoints may be armed at once; a call
    /// fails if any fires.
    pub fn fail_after(&self, point: FailPoint, after_n_ops: u64, kind: FailKind) {
        self.failpoints.0.lock().push(Armed {
            point,
            skip: after_n_ops,
            kind,
        });
    }

    /// Arm a failpoint given as text, e.g. `"data.write:enospc"`.
    pub fn arm(&self, spec: &str, after_n_ops: u64) -> Result<(), String> {
        let (point, kind) = FailPoint::parse(spec)?;
        self.fail_after(point, after_n_ops, kind);
        Ok(())
    }

    /// Remove every armed failpoint.
    pub fn disarm(&self) {
        self.failpoints.0.lock().clear();
    }

    /// Is there a file at `path`, or a file below it (an implied directory)?
    pub fn exists(&self, path: &Path) -> bool {
        let files = self.files.lock();
        files.contains_key(path) || files.keys().any(|p| p.starts_with(path))
    }

    /// The durable image of the file at `path`: what a crash now would leave
    /// (with [`CrashMode::DropUnsynced`]).
    pub fn durable_image(&self, path: &Path) -> Option<Vec<u8>> {
        let file = self.files.lock().get(path).cloned()?;
        let image = file.lock().durable.clone();
        Some(image)
    }

    /// Overwrite bytes of a file durably, bypassing failpoints and pending
    /// writes: a test's way to corrupt a file by hand. Fails with `NotFound`
    /// for a missing file.
    pub fn write_durable(&self, path: &Path, offset: u64, data: &[u8]) -> io::Result<()> {
        let file = self
            .files
            .lock()
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let mut f = file.lock();
        apply(&mut f.durable, offset, data);
        apply(&mut f.volatile, offset, data);
        Ok(())
    }

    /// Paths of every file, sorted.
    pub fn paths(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = self.files.lock().keys().cloned().collect();
        paths.sort();
        paths
    }
}

impl std::fmt::Debug for FaultyFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyFs")
            .field("files", &self.files.lock().len())
            .finish_non_exhaustive()
    }
}

impl FileSystem for FaultyFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn Device>> {
        let mut files = self.files.lock();
        let file = match (files.get(path), mode) {
            (Some(_), OpenMode::CreateNew) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists already", path.display()),
                ))
            }
            (None, OpenMode::Existing) => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{} does not exist", path.display()),
                ))
            }
            (Some(file), OpenMode::Existing) => Arc::clone(file),
            (None, OpenMode::CreateNew) => {
                let file = Arc::new(Mutex::new(FileState::default()));
                files.insert(path.to_owned(), Arc::clone(&file));
                file
            }
        };
        let epoch = file.lock().epoch;
        Ok(Arc::new(FaultyDevice {
            path: path.to_owned(),
            file,
            epoch,
            failpoints: Arc::clone(&self.failpoints),
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        FaultyFs::exists(self, path)
    }
}

/// One open file of a [`FaultyFs`].
struct FaultyDevice {
    path: PathBuf,
    file: Arc<Mutex<FileState>>,
    /// The file's epoch when opened: a crash since then kills this handle.
    epoch: u64,
    failpoints: Arc<Failpoints>,
}

impl FaultyDevice {
    /// Lock the file, failing if power was lost since this handle was opened.
    /// The epoch is checked under the lock, so a call either completes before
    /// a crash or fails.
    fn live(&self) -> io::Result<parking_lot::MutexGuard<'_, FileState>> {
        let state = self.file.lock();
        if state.epoch != self.epoch {
            return Err(io::Error::other(format!(
                "{}: device lost power (EIO): handle opened before a simulated crash",
                self.path.display()
            )));
        }
        Ok(state)
    }

    /// [`Self::live`], then fail if an armed failpoint fires for `op`.
    fn enter(&self, op: Op) -> io::Result<parking_lot::MutexGuard<'_, FileState>> {
        let state = self.live()?;
        self.failpoints.check(op, &self.path)?;
        Ok(state)
    }
}

impl Device for FaultyDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let state = self.enter(Op::Read)?;
        let end = offset.checked_add(buf.len() as u64);
        match end {
            Some(end) if end <= state.volatile.len() as u64 => {
                buf.copy_from_slice(&state.volatile[offset as usize..end as usize]);
                Ok(())
            }
            _ => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "read of {} bytes at offset {offset} ends past the end of {} ({} bytes)",
                    buf.len(),
                    self.path.display(),
                    state.volatile.len()
                ),
            )),
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut state = self.enter(Op::Write)?;
        if buf.is_empty() {
            return Ok(());
        }
        apply(&mut state.volatile, offset, buf);
        state.pending.push((offset, buf.to_vec()));
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        let mut state = self.live()?;
        if let Err(e) = self.failpoints.check(Op::Sync, &self.path) {
            // Linux after a failed fsync: the dirty pages are marked clean,
            // so these writes never become durable (but stay readable).
            state.pending.clear();
            return Err(e);
        }
        let state = &mut *state;
        for (offset, data) in std::mem::take(&mut state.pending) {
            apply(&mut state.durable, offset, &data);
        }
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.live()?.volatile.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        self.enter(Op::SetLen)?.set_len(len);
        Ok(())
    }

    fn path(&self) -> &Path {
        &self.path
    }
}
