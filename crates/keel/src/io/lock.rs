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
//! A read-only open (`Options::read_only`) takes the lock shared instead
//! (`flock(LOCK_SH | LOCK_NB)`): any number of read-only opens at once, in
//! one process or many, and none beside a writer. A shared holder writes
//! [`SHARED_MARK`] over the pid when it can (every shared holder writes
//! the same bytes, so their writes cannot conflict), so that a refused
//! writer is not shown the pid of the last writer, which may be long gone.
//! On a read-only file system the lock file cannot be created, and nobody
//! can write the database: the read-only open then goes on without a lock
//! if the file is missing.
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

/// What shared holders write into the lock file in place of a pid.
pub const SHARED_MARK: &str = "read-only\n";

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
    let file = open_lock_file(&path)?;
    flock_now(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
    // The pid only serves the messages of refused openers: a file that
    // cannot take it (a full disk) does not keep the database closed.
    if let Err(e) = mark(&file, &format!("{}\n", std::process::id())) {
        log::warn!(
            "{}: locked, but cannot write this process's id into it: {e}",
            path.display()
        );
    }
    Ok(DirLock::new(dir, file))
}

/// Take the shared lock on `dir` on the real file system (module doc).
pub(crate) fn lock_os_shared(dir: &Path) -> Result<DirLock, LockError> {
    let path = dir.join(LOCK_FILE);
    let (file, writable) = match open_lock_file(&path) {
        Ok(f) => (f, true),
        // No write permission, or a read-only file system: a lock file
        // that exists can still be locked through a read-only descriptor.
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            match File::open(&path) {
                Ok(f) => (f, false),
                Err(e2)
                    if e2.kind() == io::ErrorKind::NotFound
                        && e.kind() == io::ErrorKind::ReadOnlyFilesystem =>
                {
                    log::info!(
                        "{}: the file system is read-only and has no lock file: nobody can \
                         write this database, so the read-only open goes on without a lock",
                        dir.display()
                    );
                    return Ok(DirLock::new(dir, ()));
                }
                Err(_) => return Err(LockError::Io(e)),
            }
        }
        Err(e) => return Err(LockError::Io(e)),
    };
    flock_now(&file, rustix::fs::FlockOperation::NonBlockingLockShared)?;
    if writable {
        // Best effort, as the writer's pid (module doc).
        let _ = mark(&file, SHARED_MARK);
    }
    Ok(DirLock::new(dir, file))
}

/// Open (or create) the lock file for reading and writing, never
/// truncated on open: what it says belongs to the holder until this open
/// holds the lock.
fn open_lock_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

/// Take `op` (a non-blocking `flock`) on `file`: `Held`, naming the
/// holder the file names, if someone holds a conflicting lock.
fn flock_now(file: &File, op: rustix::fs::FlockOperation) -> Result<(), LockError> {
    match rustix::fs::flock(file, op) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Err(LockError::Held {
            pid: read_pid(file),
        }),
        Err(e) => Err(LockError::Io(e.into())),
    }
}

/// Replace what the lock file says with `text` (the holder's pid, or the
/// shared holders' mark).
fn mark(file: &File, text: &str) -> io::Result<()> {
    file.set_len(0)
        .and_then(|()| file.write_all_at(text.as_bytes(), 0))
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
    /// Locked directories: the token of their holding, and how many shared
    /// holders it has (0: one exclusive holder).
    held: HashMap<PathBuf, (u64, usize)>,
    next_token: u64,
}

/// Unlocks its directory when dropped (the last shared holder does),
/// unless the table forgot it since ([`MemLocks::release_all`]) and
/// someone else took it.
struct MemGuard {
    table: Arc<Mutex<MemTable>>,
    dir: PathBuf,
    token: u64,
}

impl Drop for MemGuard {
    fn drop(&mut self) {
        let mut t = self.table.lock();
        match t.held.get_mut(&self.dir) {
            Some((token, shared)) if *token == self.token && *shared > 1 => *shared -= 1,
            Some((token, _)) if *token == self.token => {
                t.held.remove(&self.dir);
            }
            _ => {}
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
        t.held.insert(dir.to_path_buf(), (token, 0));
        Ok(self.guard(dir, token))
    }

    /// Lock `dir` shared: beside other shared holders, never beside an
    /// exclusive one.
    pub fn lock_shared(&self, dir: &Path) -> Result<DirLock, LockError> {
        let mut t = self.table.lock();
        let token = match t.held.get_mut(dir) {
            Some((_, 0)) => {
                return Err(LockError::Held {
                    pid: Some(std::process::id()),
                })
            }
            Some((token, shared)) => {
                *shared += 1;
                *token
            }
            None => {
                t.next_token += 1;
                let token = t.next_token;
                t.held.insert(dir.to_path_buf(), (token, 1));
                token
            }
        };
        Ok(self.guard(dir, token))
    }

    fn guard(&self, dir: &Path, token: u64) -> DirLock {
        let guard = MemGuard {
            table: Arc::clone(&self.table),
            dir: dir.to_path_buf(),
            token,
        };
        DirLock::new(dir, guard)
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
    fn shared_flocks_coexist_and_exclude_the_exclusive_one() {
        let dir = tempfile::tempdir().unwrap();
        let a = lock_os_shared(dir.path()).unwrap();
        let b = lock_os_shared(dir.path()).unwrap();
        match lock_os(dir.path()) {
            // The mark, not a stale pid: the holders are unnamed.
            Err(LockError::Held { pid }) => assert_eq!(pid, None),
            other => panic!("expected Held, got {other:?}"),
        }
        drop(a);
        assert!(matches!(lock_os(dir.path()), Err(LockError::Held { .. })));
        drop(b);
        let writer = lock_os(dir.path()).unwrap();
        match lock_os_shared(dir.path()) {
            Err(LockError::Held { pid }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("expected Held, got {other:?}"),
        }
        drop(writer);
    }

    #[test]
    fn memory_shared_locks_count_their_holders() {
        let locks = MemLocks::default();
        let dir = Path::new("/db");
        let a = locks.lock_shared(dir).unwrap();
        let b = locks.lock_shared(dir).unwrap();
        assert!(matches!(locks.lock(dir), Err(LockError::Held { .. })));
        drop(a);
        assert!(matches!(locks.lock(dir), Err(LockError::Held { .. })));
        drop(b);
        let w = locks.lock(dir).unwrap();
        assert!(matches!(
            locks.lock_shared(dir),
            Err(LockError::Held { .. })
        ));
        drop(w);
        let c = locks.lock_shared(dir).unwrap();
        locks.release_all();
        let w = locks.lock(dir).unwrap();
        // The forgotten shared holder must not unlock the new writer.
        drop(c);
        assert!(matches!(
            locks.lock_shared(dir),
            Err(LockError::Held { .. })
        ));
        drop(w);
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
