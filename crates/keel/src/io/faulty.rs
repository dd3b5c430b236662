//! A faulty file system for crash and fault tests, entirely in memory.
//!
//! Every file has a *durable* image (what survives power loss) and a list of
//! *pending* writes that are not yet durable. Reads see the volatile image:
//! durable plus pending, in issue order. `sync` makes a file's pending writes
//! durable. [`FaultyFs::kill_process`] simulates the process dying: its
//! handles fail, its unsynced writes stay pending. [`FaultyFs::crash`]
//! simulates power loss: each file keeps its durable image and, depending
//! on the [`CrashMode`], none, some or torn parts of its pending writes; every handle opened before the crash fails
//! from then on with EIO ("device lost power"), and files reopened through the
//! same `FaultyFs` see only what became durable. A crash takes every file at
//! one instant: no call on any file runs while it happens. It returns (and
//! [`FaultyFs::crash_reports`] keeps) a [`CrashReport`] of what became of the
//! unsynced writes, so a test can show that its crash mode did what it
//! claims. A test therefore crashes the file system, drops (or leaks) the
//! engine, and reopens the database with the same `FaultyFs`.
//!
//! Directories are locked in memory ([`MemLocks`]): one open per database
//! directory, as on real files; a crash forgets every lock, as the
//! processes that held them die with the power.
//!
//! Simplifications, each chosen because the engine does not depend on the
//! difference:
//! - `set_len` applies at once and is durable (a real file system needs a
//!   sync for a size change too); pending writes past a shrunk length are
//!   clipped.
//! - Creating or removing a file is durable at once (a real one needs a
//!   directory sync): after a crash the file exists, holding what was
//!   synced into it, or is gone. The file system keeps the names created
//!   or removed since their directory was last synced
//!   ([`FaultyFs::unsynced_dir_entries`]), so a test can check that the
//!   engine syncs the directory where a real one would lose them.
//! - `allocate` is a `set_len` that also records the bytes as allocated
//!   ([`FaultyFs::allocated_len`]), so a test can tell a preallocated file
//!   from a sparse one; writes past the allocation never fail for want of
//!   space unless a failpoint says so.
//! - Kept pending writes are applied in issue order, so of two overlapping
//!   writes that both survive, the later one wins.
//! - A failed sync (injected EIO) loses the file's pending writes: they stay
//!   readable until a crash, then they are gone. This is what Linux does after
//!   an fsync error (the pages are marked clean), and why the engine must
//!   refuse writes after one (USENIX ATC '20, "Can applications recover from
//!   fsync failures?").
//!
//! # Failpoints
//! Named like raft-engine's (`log::write::enospc`): `"{name}.{op}:{action}"`,
//! where `name` is a substring of the path (`/data-`, `/dblwr-`, `/redo-`;
//! the slash keeps a directory name from matching; empty for every file),
//! `op` is one of `read`, `write`, `sync`, `set_len` (which also fires on
//! `allocate`) or `sync_dir` (of a directory whose path contains `name`),
//! and `action` is one of
//! - `eio` or `enospc`, optionally followed by `:sticky`: the call fails
//!   with that errno (once, or every time until [`FaultyFs::disarm`]). So
//!   `data.write:enospc` fails the next write to a data file with ENOSPC, and
//!   `dblwr.sync:eio:sticky` fails every sync of a doublewrite file.
//! - `crash`, `crash-random[=SEED]`, `crash-torn[=SEED]` (seed 0 if omitted),
//!   `crash-lose-oldest`: the whole file system loses power at that call, as
//!   [`FaultyFs::crash`] with [`CrashMode::DropUnsynced`], `Random`, `Torn`
//!   or `LoseOldest` would, and the call
//!   fails with EIO. A *write* that hits it is added to the pending writes
//!   first, under the same locks as the crash, so the crash mode decides its
//!   fate like any other unsynced write's (`data.write:crash-torn` can tear
//!   the very page being written). A `read`, `sync`, `set_len` or
//!   `sync_dir` that hits it has no effect: the power fails before it
//!   (`data.sync:crash` leaves every in-place write since the last sync
//!   pending, then crashes).
//! - `hold`: the calling thread pauses *before* the operation takes effect,
//!   holding none of the file system's locks, until the test releases it
//!   through the [`Trigger`] that arming returned; then the call proceeds,
//!   or fails with EIO if the file system crashed meanwhile. A hold gives up
//!   after [`HOLD_TIMEOUT`] (armed from text; [`FailKind::Hold`] sets its
//!   own) and fails its call with `TimedOut`, so nothing hangs forever.
//! - `delay=Nus` or `delay=Nms`: every matching call pauses that long before
//!   it takes effect (holding no lock), until [`FaultyFs::disarm`]: a slow
//!   device that widens the windows between the engine's bookkeeping and
//!   its I/O, so random tests find the races in them.
//!
//! Crash and hold failpoints fire once. [`FaultyFs::fail_after`] (the typed
//! API) and [`FaultyFs::arm`] (the text) let the first `n` matching calls
//! succeed, and return a [`Trigger`]: how often the failpoint fired, and for
//! a hold [`Trigger::wait_held`] and [`Trigger::release`]. A call on a handle
//! that already lost power neither counts nor fires.
//!
//! ```
//! # use std::time::Duration;
//! # use keel::io::{FaultyFs, FileSystem, OpenMode};
//! let fs = FaultyFs::new();
//! let dev = fs.open("/db/data-0.keel".as_ref(), OpenMode::CreateNew).unwrap();
//! let hold = fs.arm("data-.write:hold", 0).unwrap();
//! let writer = std::thread::spawn(move || dev.write_at(b"page", 0));
//! let held = hold.wait_held(Duration::from_secs(5)).unwrap(); // paused, before the write
//! assert_eq!(held.op, "write");
//! // ... here the test runs whatever must race with the write ...
//! hold.release();
//! writer.join().unwrap().unwrap();
//! ```

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use super::{Device, DirLock, FileSystem, LockError, MemLocks, OpenMode};

mod device;
mod failpoint;
#[cfg(test)]
mod names_tests;
#[cfg(test)]
mod tests;
mod trigger;

use device::FaultyDevice;
use failpoint::{Action, Armed, Failpoints, Op};
pub use failpoint::{Errno, FailKind, FailPoint, HOLD_TIMEOUT};
use trigger::TriggerState;
pub use trigger::{HeldCall, Trigger};

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
    /// Each file loses its oldest pending write and keeps every later one
    /// whole: a write-back cache that wrote the later writes first. The
    /// deterministic case of `Random` that leaves a hole with valid data
    /// after it (in a log: a lost group with later groups intact).
    LoseOldest,
}

/// What one power loss did to the writes that were not synced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Unsynced writes that survived whole.
    pub writes_kept: u64,
    /// Unsynced writes lost whole.
    pub writes_lost: u64,
    /// Unsynced writes of which some sectors survived and some did not.
    pub writes_torn: u64,
}

/// A write not yet synced.
struct Pending {
    offset: u64,
    data: Vec<u8>,
    /// Issued through `Device::write_atomic_at` within the device's atomic
    /// unit: a crash keeps or loses it whole, never tears it.
    atomic: bool,
}

/// One file's images.
#[derive(Default)]
struct FileState {
    /// Bumped by every crash; handles opened under an older epoch are dead.
    epoch: u64,
    durable: Vec<u8>,
    /// What reads see: `durable` with `pending` applied.
    volatile: Vec<u8>,
    /// Writes since the last sync, in issue order.
    pending: Vec<Pending>,
    /// Bytes from the start that `allocate` reserved (durable at once).
    allocated: usize,
}

impl FileState {
    fn crash(&mut self, mode: CrashMode, rng: &mut SplitMix64, report: &mut CrashReport) {
        let mut lost_oldest = false;
        for Pending {
            offset,
            data,
            atomic,
        } in std::mem::take(&mut self.pending)
        {
            let (kept, of) = match mode {
                CrashMode::DropUnsynced => (0, 1),
                CrashMode::Random { .. } => {
                    let keep = rng.coin();
                    if keep {
                        apply(&mut self.durable, offset, &data);
                    }
                    (usize::from(keep), 1)
                }
                CrashMode::Torn { .. } if atomic => {
                    let keep = rng.coin();
                    if keep {
                        apply(&mut self.durable, offset, &data);
                    }
                    (usize::from(keep), 1)
                }
                CrashMode::Torn { .. } => self.keep_sectors(offset, &data, rng),
                CrashMode::LoseOldest => {
                    let keep = std::mem::replace(&mut lost_oldest, true);
                    if keep {
                        apply(&mut self.durable, offset, &data);
                    }
                    (usize::from(keep), 1)
                }
            };
            match kept {
                0 => report.writes_lost += 1,
                k if k == of => report.writes_kept += 1,
                _ => report.writes_torn += 1,
            }
        }
        self.volatile = self.durable.clone();
        self.epoch += 1;
    }

    /// Keep each device sector that `data` touches with probability 1/2.
    /// Returns (sectors kept, sectors touched).
    fn keep_sectors(&mut self, offset: u64, data: &[u8], rng: &mut SplitMix64) -> (usize, usize) {
        if data.len() <= SECTOR {
            let keep = rng.coin();
            if keep {
                apply(&mut self.durable, offset, data);
            }
            return (usize::from(keep), 1);
        }
        let sector = SECTOR as u64;
        let end = offset + data.len() as u64;
        let mut start = offset;
        let (mut kept, mut of) = (0, 0);
        while start < end {
            let stop = ((start / sector + 1) * sector).min(end);
            of += 1;
            if rng.coin() {
                let (a, b) = ((start - offset) as usize, (stop - offset) as usize);
                apply(&mut self.durable, start, &data[a..b]);
                kept += 1;
            }
            start = stop;
        }
        (kept, of)
    }

    fn set_len(&mut self, len: usize) {
        self.allocated = self.allocated.min(len);
        self.durable.resize(len, 0);
        self.volatile.resize(len, 0);
        let len = len as u64;
        self.pending.retain_mut(|w| {
            if w.offset >= len {
                return false;
            }
            w.data.truncate((len - w.offset) as usize);
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

/// What the file system and its open devices share.
#[derive(Default)]
struct Shared {
    files: Mutex<HashMap<PathBuf, Arc<Mutex<FileState>>>>,
    failpoints: Failpoints,
    /// Every crash so far, in order.
    crashes: Mutex<Vec<CrashReport>>,
    /// Locked database directories.
    locks: MemLocks,
    /// Paths created or removed since their directory was last synced.
    unsynced_names: Mutex<std::collections::BTreeSet<PathBuf>>,
    /// Directories made by `create_dirs` (others exist only as the
    /// prefixes of files' paths).
    dirs: Mutex<std::collections::BTreeSet<PathBuf>>,
    /// The largest untorn write the device promises
    /// ([`FaultyFs::set_atomic_write_unit`]); none by default.
    atomic_unit: Mutex<Option<usize>>,
}

/// The last write before power fails: applied as pending to its file under
/// the crash's locks, so nothing can sync it in between.
struct LastWrite<'a> {
    file: &'a Arc<Mutex<FileState>>,
    epoch: u64,
    offset: u64,
    data: &'a [u8],
    atomic: bool,
}

impl Shared {
    /// Power loss at one instant: the file table and then every file (in
    /// path order, so a seed always gives the same images) are locked
    /// before any file is touched, so no call on any file runs during the
    /// crash. Lock order, everywhere: the file table, then files; a device
    /// call locks only its own file and waits for nothing while it does.
    fn crash(&self, mode: CrashMode, last: Option<LastWrite<'_>>) -> CrashReport {
        let seed = match mode {
            CrashMode::DropUnsynced | CrashMode::LoseOldest => 0,
            CrashMode::Random { seed } | CrashMode::Torn { seed } => seed,
        };
        let mut rng = SplitMix64(seed);
        let files = self.files.lock();
        let mut paths: Vec<&PathBuf> = files.keys().collect();
        paths.sort();
        let mut locked: Vec<(&Arc<Mutex<FileState>>, MutexGuard<'_, FileState>)> = paths
            .iter()
            .map(|p| (&files[*p], files[*p].lock()))
            .collect();
        if let Some(w) = last {
            let found = locked.iter_mut().find(|(f, _)| Arc::ptr_eq(f, w.file));
            if let Some((_, state)) = found.filter(|(_, s)| s.epoch == w.epoch) {
                if !w.data.is_empty() {
                    apply(&mut state.volatile, w.offset, w.data);
                    state.pending.push(Pending {
                        offset: w.offset,
                        data: w.data.to_vec(),
                        atomic: w.atomic,
                    });
                }
            }
        }
        let mut report = CrashReport::default();
        for (_, state) in &mut locked {
            state.crash(mode, &mut rng, &mut report);
        }
        self.crashes.lock().push(report);
        self.locks.release_all();
        report
    }
}

/// An in-memory [`FileSystem`] that loses unsynced writes on demand and fails
/// calls at named failpoints (see the module documentation).
#[derive(Default)]
pub struct FaultyFs {
    shared: Arc<Shared>,
}

impl FaultyFs {
    /// An empty file system.
    pub fn new() -> Self {
        Self::default()
    }

    /// Simulate power loss (see [`CrashMode`]): every file at one instant.
    /// Returns what became of the unsynced writes.
    pub fn crash(&self, mode: CrashMode) -> CrashReport {
        self.shared.crash(mode, None)
    }

    /// Simulate the process dying (kill -9, an OOM kill, a panic) while the
    /// machine stays up: every handle opened before fails from then on, as
    /// after [`FaultyFs::crash`], but nothing is lost. Unsynced writes stay
    /// pending: a reopen reads them (from the OS's cache, as it were), and
    /// only a sync makes them durable; a later [`FaultyFs::crash`] still
    /// decides their fate. Not a crash: no [`CrashReport`] is recorded.
    pub fn kill_process(&self) {
        let files = self.shared.files.lock();
        for file in files.values() {
            file.lock().epoch += 1;
        }
    }

    /// What every crash so far did, in order, including those fired by
    /// failpoints: a test's proof that a crash mode did what it claims.
    pub fn crash_reports(&self) -> Vec<CrashReport> {
        self.shared.crashes.lock().clone()
    }

    /// Arm `point`: the first `after_n_ops` matching calls succeed, then it
    /// fires as `kind` says. Several failpoints may be armed at once; the
    /// first armed that fires decides a call's fate. The returned trigger
    /// counts the firings and controls a hold (see [`Trigger`]).
    pub fn fail_after(&self, point: FailPoint, after_n_ops: u64, kind: FailKind) -> Trigger {
        let spec = describe(&point, kind);
        self.arm_with(point, after_n_ops, kind, spec)
    }

    /// Arm a failpoint given as text, e.g. `"data.write:enospc"` or
    /// `"data-.sync:crash-torn=7"` (see the module documentation).
    pub fn arm(&self, spec: &str, after_n_ops: u64) -> Result<Trigger, String> {
        let (point, kind) = FailPoint::parse(spec)?;
        Ok(self.arm_with(point, after_n_ops, kind, spec.to_owned()))
    }

    fn arm_with(&self, point: FailPoint, skip: u64, kind: FailKind, spec: String) -> Trigger {
        let trigger = TriggerState::new(spec);
        self.shared.failpoints.0.lock().push(Armed {
            point,
            skip,
            kind,
            trigger: Arc::clone(&trigger),
        });
        Trigger::new(trigger)
    }

    /// Remove every armed failpoint. A thread already held at a hold stays
    /// held until its trigger releases it (or is dropped).
    pub fn disarm(&self) {
        self.shared.failpoints.0.lock().clear();
    }

    /// Is there a file at `path`, or a file below it (an implied directory)?
    pub fn exists(&self, path: &Path) -> bool {
        if self.shared.dirs.lock().contains(path) {
            return true;
        }
        let files = self.shared.files.lock();
        files.contains_key(path) || files.keys().any(|p| p.starts_with(path))
    }

    fn file(&self, path: &Path) -> Option<Arc<Mutex<FileState>>> {
        self.shared.files.lock().get(path).cloned()
    }

    /// The durable image of the file at `path`: what a crash now would leave
    /// (with [`CrashMode::DropUnsynced`]).
    pub fn durable_image(&self, path: &Path) -> Option<Vec<u8>> {
        let image = self.file(path)?.lock().durable.clone();
        Some(image)
    }

    /// Overwrite bytes of a file durably, bypassing failpoints and pending
    /// writes: a test's way to corrupt a file by hand. Fails with `NotFound`
    /// for a missing file.
    pub fn write_durable(&self, path: &Path, offset: u64, data: &[u8]) -> io::Result<()> {
        let file = self
            .file(path)
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        let mut f = file.lock();
        apply(&mut f.durable, offset, data);
        apply(&mut f.volatile, offset, data);
        Ok(())
    }

    /// How many bytes from the start of the file at `path` are allocated
    /// (`Device::allocate`), as opposed to a sparse length (`set_len`).
    pub fn allocated_len(&self, path: &Path) -> Option<u64> {
        let allocated = self.file(path)?.lock().allocated;
        Some(allocated as u64)
    }

    /// Files created or removed whose directory has not been synced since
    /// (`FileSystem::sync_dir`): the names a real file system could lose
    /// in a power loss. Sorted.
    pub fn unsynced_dir_entries(&self) -> Vec<PathBuf> {
        self.shared.unsynced_names.lock().iter().cloned().collect()
    }

    /// Run the failpoints for a call on the file system itself (`sync_dir`):
    /// as a device call does, with no file to lock.
    fn enter(&self, op: Op, path: &Path) -> io::Result<()> {
        match self.shared.failpoints.check(op, path) {
            Action::Proceed => Ok(()),
            Action::Fail(e) => Err(e),
            Action::Crash(mode, trigger) => {
                self.shared.crash(mode, None);
                Err(io::Error::other(super::DeviceGone(format!(
                    "{}: device lost power (EIO): power failed at failpoint `{}`",
                    path.display(),
                    trigger.spec()
                ))))
            }
            Action::Hold(timeout, trigger) => trigger.hold(path, op.name(), timeout),
            Action::Delay(pause) => {
                std::thread::sleep(pause);
                Ok(())
            }
        }
    }

    /// Model a device that promises untorn writes of up to `max` bytes
    /// (a power of two, at least [`SECTOR`]), as Linux reports through
    /// `statx` (`STATX_WRITE_ATOMIC`): its devices then report the unit
    /// [`SECTOR`]`..=max`, accept `Device::write_atomic_at` within it, and
    /// a crash keeps or loses such a write whole, even in
    /// [`CrashMode::Torn`]. Plain writes tear as before. `None` (the
    /// default): no promise, and atomic writes fail with EOPNOTSUPP.
    ///
    /// # Panics
    /// On a `max` that is not a power of two of at least [`SECTOR`].
    pub fn set_atomic_write_unit(&self, max: Option<usize>) {
        if let Some(max) = max {
            assert!(
                max.is_power_of_two() && max >= SECTOR,
                "atomic write unit {max}: a power of two of at least {SECTOR} bytes"
            );
        }
        *self.shared.atomic_unit.lock() = max;
    }

    /// Paths of every file, sorted.
    pub fn paths(&self) -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = self.shared.files.lock().keys().cloned().collect();
        paths.sort();
        paths
    }
}

/// The text form of a failpoint armed through the typed API, for messages.
fn describe(point: &FailPoint, kind: FailKind) -> String {
    let (op, name) = match point {
        FailPoint::Read { path_contains } => ("read", path_contains),
        FailPoint::Write { path_contains } => ("write", path_contains),
        FailPoint::Sync { path_contains } => ("sync", path_contains),
        FailPoint::SetLen { path_contains } => ("set_len", path_contains),
        FailPoint::SyncDir { path_contains } => ("sync_dir", path_contains),
    };
    let errno = |e: Errno| match e {
        Errno::Eio => "eio",
        Errno::Enospc => "enospc",
    };
    let action = match kind {
        FailKind::Once(e) => errno(e).to_owned(),
        FailKind::Sticky(e) => format!("{}:sticky", errno(e)),
        FailKind::Crash(CrashMode::DropUnsynced) => "crash".to_owned(),
        FailKind::Crash(CrashMode::Random { seed }) => format!("crash-random={seed}"),
        FailKind::Crash(CrashMode::Torn { seed }) => format!("crash-torn={seed}"),
        FailKind::Crash(CrashMode::LoseOldest) => "crash-lose-oldest".to_owned(),
        FailKind::Hold { timeout } => format!("hold ({timeout:?})"),
        FailKind::Delay(pause) => format!("delay={}us", pause.as_micros()),
    };
    format!("{name}.{op}:{action}")
}

impl std::fmt::Debug for FaultyFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultyFs")
            .field("files", &self.shared.files.lock().len())
            .finish_non_exhaustive()
    }
}

impl FileSystem for FaultyFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn Device>> {
        let mut files = self.shared.files.lock();
        let file = match (files.get(path), mode) {
            (Some(_), OpenMode::CreateNew) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists already", path.display()),
                ))
            }
            (None, OpenMode::Existing | OpenMode::ReadOnly) => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{} does not exist", path.display()),
                ))
            }
            (Some(file), OpenMode::Existing | OpenMode::ReadOnly) => Arc::clone(file),
            (None, OpenMode::CreateNew) => {
                let file = Arc::new(Mutex::new(FileState::default()));
                files.insert(path.to_owned(), Arc::clone(&file));
                self.shared.unsynced_names.lock().insert(path.to_owned());
                file
            }
        };
        let epoch = file.lock().epoch;
        Ok(Arc::new(FaultyDevice {
            path: path.to_owned(),
            file,
            epoch,
            read_only: mode == OpenMode::ReadOnly,
            shared: Arc::clone(&self.shared),
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        FaultyFs::exists(self, path)
    }

    fn lock_dir(&self, dir: &Path) -> Result<DirLock, LockError> {
        self.shared.locks.lock(dir)
    }

    fn lock_dir_shared(&self, dir: &Path) -> Result<DirLock, LockError> {
        self.shared.locks.lock_shared(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.enter(Op::SyncDir, dir)?;
        self.shared
            .unsynced_names
            .lock()
            .retain(|p| p.parent() != Some(dir));
        Ok(())
    }

    /// Models the directory `dir` itself, not the ones above it: they are
    /// taken to exist.
    fn create_dirs(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        if FaultyFs::exists(self, dir) {
            return Ok(Vec::new());
        }
        self.shared.dirs.lock().insert(dir.to_owned());
        self.shared.unsynced_names.lock().insert(dir.to_owned());
        Ok(vec![dir.to_owned()])
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        if self.shared.files.lock().remove(path).is_none() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} does not exist", path.display()),
            ));
        }
        self.shared.unsynced_names.lock().insert(path.to_owned());
        Ok(())
    }
}
