//! One process per database: the exclusive lock on a database directory.
//!
//! Protocol (as InnoDB locks `ibdata1`): `Db::open` takes the lock through
//! [`FileSystem::lock_dir`](super::FileSystem::lock_dir) before it opens,
//! creates or reads any other file, and never waits for it: a directory
//! whose lock is held fails the open at once. The holder keeps the
//! [`DirLock`] until its last write: the final checkpoint of a close, the
//! stop of a simulated crash, or the drop of the engine; a process that
//! dies loses it with its file descriptors, so a crash leaves nothing that
//! blocks the next open.
//!
//! On real files the lock is `flock(LOCK_EX | LOCK_NB)` on [`LOCK_FILE`]
//! in the directory, which stays there (deleting it would let two openers
//! lock two different files). `flock` locks belong to the open file, not
//! to the process, so a second open in the same process is refused too;
//! the descriptor is close-on-exec, so a child process does not inherit
//! the lock. After locking, the holder writes its pid into the file, for
//! the error message of whoever is refused: the pid is read only while
//! the lock is held, so a pid left by a process that died is never shown
//! (except in the instant between a new holder's lock and its write, when
//! the message may name the previous holder). `flock` is advisory and
//! local: network file systems may not honour it.
//!
//! In-memory file systems (the faulty one of the tests) keep a table of
//! locked directories with [`MemLocks`]; a simulated power loss empties it,
//! as a machine that loses power loses its processes.

use std::collections::HashMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

/// The lock file in every database directory.
pub const LOCK_FILE: &str = "keel.lock";

/// The exclusive lock on one database directory, held until dropped.
#[must_use = "the directory is unlocked as soon as the lock is dropped"]
pub struct DirLock {
    dir: PathBuf,
    _held: Box<dyn Send + Sync>,
}

impl DirLock {
    /// A lock on `dir` that lasts as long as `held` (whose drop releases
    /// it): for [`FileSystem`](super::FileSystem) implementations.
    pub fn new(dir: &Path, held: impl Send + Sync + 'static) -> DirLock {
        DirLock {
            dir: dir.to_path_buf(),
            _held: Box::new(held),
        }
    }

    /// The directory locked.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl fmt::Debug for DirLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirLock").field("dir", &self.dir).finish()
    }
}

/// Why a directory lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Someone holds the lock: another process, or another open in this one.
    #[error("the directory is locked by {}", holder(*.pid))]
    Held {
        /// The holder's process id, where the lock file names one.
        pid: Option<u32>,
    },
    /// The lock file could not be opened or locked.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Who holds a lock, in words: "process 1234", "this process (pid 1234)".
pub fn holder(pid: Option<u32>) -> String {
    match pid {
        Some(p) if p == std::process::id() => format!("this process (pid {p})"),
        Some(p) => format!("process {p}"),
        None => "another process (its pid is unknown)".to_string(),
    }
}

/// Lock `dir` on the real file system (see the module doc).
pub(crate) fn lock_os(dir: &Path) -> Result<DirLock, LockError> {
    let path = dir.join(LOCK_FILE);
    // Read and write, never truncated on open: the pid in it belongs to the
    // holder until this open holds the lock.
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
            return Err(LockError::Held {
                pid: read_pid(&file),
            })
        }
        Err(e) => return Err(LockError::Io(e.into())),
    }
    // The pid only serves the messages of refused openers: a file that
    // cannot take it (a full disk) does not keep the database closed.
    let pid = format!("{}\n", std::process::id());
    if let Err(e) = file
        .set_len(0)
        .and_then(|()| file.write_all_at(pid.as_bytes(), 0))
    {
        log::warn!(
            "{}: locked, but cannot write this process's id into it: {e}",
            path.display()
        );
    }
    Ok(DirLock::new(dir, file))
}

/// The pid a lock file names, if it names one.
fn read_pid(file: &File) -> Option<u32> {
    let mut b = [0u8; 32];
    let n = file.read_at(&mut b, 0).ok()?;
    std::str::from_utf8(&b[..n]).ok()?.trim().parse().ok()
}

/// A table of locked directories for an in-memory file system; cheap to
/// clone (the clones share the table).
#[derive(Clone, Default)]
pub struct MemLocks {
    table: Arc<Mutex<MemTable>>,
}

#[derive(Default)]
struct MemTable {
    /// Locked directories and the token of their holder.
    held: HashMap<PathBuf, u64>,
    next_token: u64,
}

/// Unlocks its directory when dropped, unless the table forgot it since
/// ([`MemLocks::release_all`]) and someone else took it.
struct MemGuard {
    table: Arc<Mutex<MemTable>>,
    dir: PathBuf,
    token: u64,
}

impl Drop for MemGuard {
    fn drop(&mut self) {
        let mut t = self.table.lock();
        if t.held.get(&self.dir) == Some(&self.token) {
            t.held.remove(&self.dir);
        }
    }
}

impl MemLocks {
    /// Lock `dir`; held by this process until the lock is dropped.
    pub fn lock(&self, dir: &Path) -> Result<DirLock, LockError> {
        let mut t = self.table.lock();
        if t.held.contains_key(dir) {
            return Err(LockError::Held {
                pid: Some(std::process::id()),
            });
        }
        t.next_token += 1;
        let token = t.next_token;
        t.held.insert(dir.to_path_buf(), token);
        let guard = MemGuard {
            table: Arc::clone(&self.table),
            dir: dir.to_path_buf(),
            token,
        };
        Ok(DirLock::new(dir, guard))
    }

    /// Forget every lock, as a power loss ends every process that held one.
    /// The guards still held release nothing when dropped.
    pub fn release_all(&self) {
        self.table.lock().held.clear();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_second_flock_in_the_same_process_is_refused_naming_this_process() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock_os(dir.path()).unwrap();
        match lock_os(dir.path()) {
            Err(LockError::Held { pid }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Held, got {other:?}"),
        }
        drop(first);
        // Released with the descriptor; the file (and the old pid) stay.
        assert!(dir.path().join(LOCK_FILE).exists());
        let again = lock_os(dir.path()).unwrap();
        assert_eq!(again.dir(), dir.path());
    }

    #[test]
    fn a_stale_lock_file_naming_a_dead_process_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LOCK_FILE), "999999999\n").unwrap();
        let _held = lock_os(dir.path()).unwrap();
        let pid = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert_eq!(pid.trim(), std::process::id().to_string());
    }

    #[test]
    fn memory_locks_are_exclusive_and_a_power_loss_forgets_them() {
        let locks = MemLocks::default();
        let dir = Path::new("/db");
        let old = locks.lock(dir).unwrap();
        assert!(matches!(locks.lock(dir), Err(LockError::Held { .. })));
        assert!(locks.lock(Path::new("/other")).is_ok());
        locks.release_all();
        let new = locks.lock(dir).unwrap();
        // The old holder's guard must not unlock the new holder's directory.
        drop(old);
        assert!(matches!(locks.lock(dir), Err(LockError::Held { .. })));
        drop(new);
        assert!(locks.lock(dir).is_ok());
    }
}
