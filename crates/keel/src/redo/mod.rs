//! The redo log: circular files holding record groups addressed by LSN,
//! group commit, checkpoint slots, and the commits in flight.
//!
//! LSN `l` lives at byte `l mod capacity` of the concatenated data areas of
//! the files (each file's first [`format::LOG_FILE_HDR`] bytes are its
//! header). Appends go to an in-memory buffer under the `state` mutex, which
//! is also where mini-transactions dirty their pages and commits enter and
//! leave the in-flight set, so that the flush lists, the pins and the LSN
//! are always consistent for a checkpoint.
//!
//! Three LSNs follow the end of the log, each at or behind the one before
//! and each only ever raised: the end (`lsn`), what was handed to the OS
//! (`written`) and what is durable (`flushed`). Writing and syncing are
//! separate steps under separate locks, as InnoDB 8.0's log writer and log
//! flusher are (details in `writer`), so that no thread waits for an
//! fdatasync it did not ask for. Group commit is leader-based, as MariaDB's
//! `group_commit_lock` is: no flusher thread; the thread that finds no sync
//! running leads one for everyone.
//!
//! # Writing and syncing: the protocol
//!
//! The mutexes of the log:
//! - `state`: the buffer, the end LSN, the commits in flight. Held for a
//!   memory copy or a look; nobody waits for anything while holding it.
//! - `write`: held while the buffer is taken from `state` (swapped with a
//!   spare, so `state` is held for the swap only) and written to the OS
//!   (`pwrite`), never during an fdatasync. Its holder raises `written`
//!   once the bytes are written. Only taken with `try_lock`: a thread that
//!   finds it held parks until the holder releases it, then looks at
//!   `written` again.
//! - `sync`, with the condvars `round_ended` and `gathered`: which sync
//!   *round* runs. A round's *leader* may first wait a short, bounded time
//!   for the threads it expects to join (*gathering*), then writes out
//!   everything appended so far, reads its *target* (`written`), and
//!   fdatasyncs only the files holding `[flushed, target)`: the files
//!   written since the last round. Rounds run one at a time and outside
//!   every mutex; `sync` is held only to start a round, to gather (the
//!   condvar releases it), to end one (raise `flushed` to its target and
//!   notify), or to look before waiting.
//! - `checkpoint_mutex`: one checkpoint at a time.
//!
//! Lock order: `checkpoint_mutex`, then `write`, then `state`;
//! `checkpoint_mutex`, then `sync`. `sync` is never held together with
//! `write` or `state`.
//!
//! Who waits for what:
//! - A commit at `flush_log_at_trx_commit` 2 (and an appender emptying a
//!   full buffer) needs its bytes written: it may wait for the `write`
//!   mutex, whose holder only writes; it never waits for a round. At 0 a
//!   commit waits for nothing; the first page cleaner writes and syncs the
//!   log about once a second.
//! - A commit at 1, a page write (the write-ahead rule asks for *durable*
//!   redo, see `crate::engine::LogWal`) and a checkpoint need LSN `l`
//!   durable: they write it first, then return at once if `flushed ≥ l`
//!   (group commit: a round covered it). If no round runs they lead one;
//!   if one runs they join it and wait on `round_ended`, and if that round
//!   did not cover `l` (written after its target was read) one of them
//!   leads the next. So a thread waits for at most the round in progress
//!   and the one covering it. A leader gathers only while fewer threads
//!   have joined than joined the last round, for at most a tenth of a
//!   round's measured fdatasync time (and 1 ms); its waker is the thread
//!   whose joining completes the count, or its deadline.
//! - While waiting, a thread holds only what its caller holds (row locks,
//!   the claims of a flush batch, the checkpoint mutex), never `write`,
//!   `state` or `sync` (the condvar releases it). The waker is the leader
//!   of the round: it holds no log mutex while it gathers or syncs, takes
//!   `write` and `state` (whose holders never wait for a round) to write
//!   out, and needs none of its waiters' locks to end the round; it
//!   notifies every waiter when the round ends, however it ends (success,
//!   failure, or a panic, through a guard).
//!
//! What a failure leaves: a failed write (or a write-out that finds a
//! reservation broken) poisons the log while the `write` mutex is held, and
//! `written` is not raised (if it was a leader's write-out, its round then
//! ends without syncing); a failed fdatasync poisons the log before its
//! round ends, and `flushed` is not raised. Waiters wake, find their LSN
//! not durable and the log poisoned, and fail: nobody gets `Ok` for bytes
//! that round was to cover, and the sync is never retried as if it had
//! succeeded (the kernel may have dropped the failed pages). Every later
//! append, write and sync is refused; a restart recovers what was durable.
//!
//! # Log space: nobody waits here
//!
//! The log never waits for space. Every append is covered by a reservation
//! its caller took beforehand, holding no latch (the engine's admission,
//! `crate::engine::admission`), and reservations keep the checkpoint age
//! below the log's capacity. An append is a memory copy under the `state`
//! mutex and cannot fail once it has started; the write-out under the
//! `write` mutex only writes, and a sync round only syncs. If a write-out
//! ever found that it would overwrite un-checkpointed log (a broken
//! reservation), or a write or sync fails, the log is poisoned: the bytes
//! it accepted can never be written (or trusted to be durable), so it
//! refuses everything from then on rather than leave a hole that later
//! writes would skip over. A restart recovers what was durable.
//!
//! # Checkpoints ride a round
//!
//! The checkpoint (`write_checkpoint`, under `checkpoint_mutex`) first
//! makes the log durable up to its LSN like any other syncing thread, then
//! writes its slot into file 0's header, into the place the newest slot is
//! not in. The slot is not log data, so no round's target accounts for it;
//! what makes it durable is any fdatasync of file 0 that *began* after the
//! slot's write returned. Each file's fdatasyncs are numbered as they
//! begin (`writer::FileSyncs`): the checkpoint reads the count after its
//! write, and a sync numbered past it that ended well covers the slot.
//! - If the end of the log lies in file 0, the checkpoint runs (or joins)
//!   a round to the end: that round writes out and fdatasyncs file 0 for
//!   the log's own pending bytes anyway, and covers the slot too.
//! - Otherwise, or if no such sync has ended when that round returns (it
//!   had begun before the slot was written; nothing was left to write),
//!   the checkpoint fdatasyncs file 0 itself.
//!
//! Only then does the checkpoint count: `checkpoint_no` and the
//! checkpoint LSN rise, and admission may hand out the log space below it.
//! Until then the previous slot, in the other place, is whole and durable,
//! and the space it protects is not reused, so a crash at any moment
//! recovers from one of the two. While waiting for the round the
//! checkpoint holds `checkpoint_mutex` (and its caller's checkpoint
//! mutex), which no round's leader takes. A failed write or sync of the
//! slot poisons the log, as any failed log write does.
//!
//! Why: the slot's own fdatasync writes out the log pending in file 0
//! without raising `flushed`, so the next page batch's write-ahead sync
//! writes and flushes again. With a checkpoint after every batch (the
//! `steady` policy, about five a second) on a disk throttled to 300 write
//! operations a second, a block trace counted about 20 of them a second
//! writing the log and its slots (4 under `classic`, whose checkpoints
//! are far fewer), besides the cache flushes of their syncs.

pub mod format;
pub(crate) mod inflight;
pub mod recovery;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Poison, Result};
use crate::io::{AlignedBuf, Device, FileSystem, OpenMode};
use crate::metrics::Metrics;
use crate::page::{get_u32, get_u64, Lsn};
use format::{
    kind, Checkpoint, LogFileHeader, CHECKPOINT_SLOTS, GROUP_HDR, LOG_FILE_HDR, LOG_VERSION,
    LOG_VERSION_V1,
};
use inflight::InFlight;
use writer::{FileSyncs, SyncState};

/// First LSN of a new database (non-zero: 0 means "never changed").
pub const START_LSN: Lsn = 8192;
/// Log buffer size above which an appender writes the buffer out itself
/// (after its append, holding no latch).
pub(crate) const BUFFER_WRITE_THRESHOLD: usize = 4 << 20;

/// The checkpoint of a new log: its first run has epoch 1 and appends
/// from the first LSN.
const FIRST_CHECKPOINT: Checkpoint = Checkpoint {
    no: 1,
    lsn: START_LSN,
    epoch: 1,
    epoch_lsn: START_LSN,
};

/// Name of redo log file `i`.
pub fn log_file_name(i: usize) -> String {
    format!("redo-{i}.keel")
}

struct LogState {
    /// Bytes appended but not yet written, starting at `buf_lsn`.
    buf: Vec<u8>,
    buf_lsn: Lsn,
    /// End of the last appended group.
    lsn: Lsn,
    /// Commits whose write sets are not yet applied.
    in_flight: InFlight,
    /// This run's epoch, stamped into every group it appends (see
    /// [`Log::begin_epoch`]).
    epoch: u32,
}

/// The log's end and its checkpoint, shared with the gauges that show
/// them (`Metrics::log_lsn_current`, `Metrics::log_lsn_checkpoint_age`).
#[derive(Debug)]
struct Positions {
    /// `state.lsn`, stored under the append mutex.
    end: AtomicU64,
    checkpoint: AtomicU64,
}

/// The redo log.
pub struct Log {
    files: Vec<(Arc<dyn Device>, PathBuf)>,
    area: u64,
    capacity: u64,
    state: Mutex<LogState>,
    /// `state.lsn` and the checkpoint LSN, readable without the mutex, and
    /// by the metrics registry (`log_lsn_current`,
    /// `log_lsn_checkpoint_age`), which reads them when it is read.
    pos: Arc<Positions>,
    /// Held while the buffer is written to the OS, never during a sync
    /// (see `writer`). Holds the spare buffer: empty, with the capacity of
    /// an earlier write, it replaces the buffer a write-out takes.
    write: Mutex<Vec<u8>>,
    /// Tests: threads parked for the write-out in progress.
    #[cfg(test)]
    write_waiting: std::sync::atomic::AtomicUsize,
    /// Every byte below this LSN has been written to the OS. Its address is
    /// also where threads park while another holds `write` (see `writer`).
    written: AtomicU64,
    /// Every byte below this LSN is durable: raised only when a sync round
    /// covering it succeeded, under `sync`.
    flushed: AtomicU64,
    /// Which sync round is running (see `writer`).
    sync: Mutex<SyncState>,
    /// Notified when a sync round ends.
    round_ended: Condvar,
    /// Notified when as many threads joined the round in progress as its
    /// gathering leader expects (see `writer`).
    gathered: Condvar,
    /// Each file's fdatasyncs, begun and ended: whether a sync that began
    /// after a checkpoint slot was written has ended (see
    /// [`Log::write_checkpoint`]).
    file_syncs: Vec<FileSyncs>,
    /// The newest checkpoint slot's number: durable, and the one whose LSN
    /// is `pos.checkpoint`.
    checkpoint_no: AtomicU64,
    /// This run's epoch and the LSN its appends started from, written
    /// into every checkpoint slot (under `checkpoint_mutex`).
    epoch: Mutex<(u32, Lsn)>,
    checkpoint_mutex: Mutex<()>,
    /// No checkpoint may pass this LSN: the redo a hot backup has still to
    /// copy starts there (`u64::MAX`: no backup runs). Changed under
    /// `checkpoint_mutex`, so a checkpoint and a pin never cross.
    backup_pin: AtomicU64,
    metrics: Arc<Metrics>,
    /// Set after a failed write or sync: nothing is durable any more.
    poisoned: Poison,
    /// The log's points where tests hold a thread (`crate::failpoint`,
    /// the `log.` ones).
    pub(crate) failpoints: crate::failpoint::Points,
}

impl Log {
    /// Create the log files of a new database: each allocated whole (so
    /// that no log write can meet a full disk later), its header written
    /// and synced; then the directory is synced.
    pub fn create(
        fs: &dyn FileSystem,
        dir: &Path,
        file_size: u64,
        n: usize,
        creation_id: u64,
        metrics: Arc<Metrics>,
    ) -> Result<Log> {
        let mut files = Vec::with_capacity(n);
        for i in 0..n {
            let path = dir.join(log_file_name(i));
            let dev = fs
                .open(&path, OpenMode::CreateNew)
                .map_err(|e| Error::io(&path, "create", e))?;
            dev.allocate(file_size)
                .map_err(|e| Error::io(&path, "allocate", e))?;
            let mut hdr = AlignedBuf::new(LOG_FILE_HDR as usize);
            LogFileHeader {
                version: LOG_VERSION,
                file_index: i as u32,
                n_files: n as u32,
                file_size,
                creation_id,
            }
            .encode(&mut hdr);
            if i == 0 {
                FIRST_CHECKPOINT.encode(&mut hdr[CHECKPOINT_SLOTS[1] as usize..]);
            }
            dev.write_at(&hdr, 0)
                .map_err(|e| Error::io(&path, "write", e))?;
            Metrics::add(&metrics.os_other_written_bytes, hdr.len() as u64);
            dev.sync().map_err(|e| Error::io(&path, "sync", e))?;
            files.push((dev, path));
        }
        fs.sync_dir(dir)
            .map_err(|e| Error::io(dir, "sync directory", e))?;
        Ok(Self::new(files, file_size, FIRST_CHECKPOINT, metrics))
    }

    /// Open the log files of an existing database in `mode` (`Existing`,
    /// or `ReadOnly` for a read-only open, where every write fails);
    /// returns the log and the newest valid checkpoint.
    ///
    /// Nothing is written, but for one case: a log of version 1 (written
    /// before the compact framing, `format::LOG_VERSION_V1`) is opened only
    /// if it has nothing to recover, and then, unless read-only, its file
    /// headers are rewritten as the current version, file 0 last, each
    /// synced, before anything is appended (see [`Log::upgrade_v1`]).
    pub fn open(
        fs: &dyn FileSystem,
        dir: &Path,
        creation_id: u64,
        mode: OpenMode,
        metrics: Arc<Metrics>,
    ) -> Result<(Log, Checkpoint)> {
        let mut files = Vec::new();
        let mut file_size = 0;
        let mut n_files = 0;
        let mut cps = Vec::new();
        let mut v1 = false;
        for i in 0.. {
            let path = dir.join(log_file_name(i));
            if !fs.exists(&path) {
                break;
            }
            let dev = fs
                .open(&path, mode)
                .map_err(|e| Error::io(&path, "open", e))?;
            let mut hdr = AlignedBuf::new(LOG_FILE_HDR as usize);
            dev.read_at(&mut hdr, 0)
                .map_err(|e| Error::io(&path, "read header of", e))?;
            let bad = |reason: String| Error::BadFile {
                path: path.clone(),
                reason,
            };
            let h = LogFileHeader::decode(&hdr).map_err(bad)?;
            v1 |= h.version == LOG_VERSION_V1;
            if h.creation_id != creation_id {
                return Err(bad(
                    "redo log of another database (creation id differs from the data files')"
                        .into(),
                ));
            }
            if h.file_index != i as u32 {
                return Err(bad(format!(
                    "header says file index {}, expected {i}",
                    h.file_index
                )));
            }
            let len = dev.len().map_err(|e| Error::io(&path, "stat", e))?;
            if len < h.file_size {
                return Err(bad(format!(
                    "truncated: {len} bytes, header says {}",
                    h.file_size
                )));
            }
            if i == 0 {
                file_size = h.file_size;
                n_files = h.n_files;
                cps = CHECKPOINT_SLOTS
                    .iter()
                    .filter_map(|&o| Checkpoint::decode(&hdr[o as usize..]))
                    .collect();
            } else if h.file_size != file_size {
                return Err(bad("file size differs from redo-0".into()));
            } else if h.n_files != n_files {
                return Err(bad(format!(
                    "header says {} log files, redo-0 says {n_files}",
                    h.n_files
                )));
            }
            files.push((dev, path));
            if files.len() == h.n_files as usize {
                break;
            }
        }
        // A missing file would change the capacity, and with it where every
        // LSN lives.
        if !files.is_empty() && files.len() != n_files as usize {
            return Err(Error::BadFile {
                path: dir.join(log_file_name(files.len())),
                reason: format!(
                    "missing: the redo log has {n_files} files, found {}",
                    files.len()
                ),
            });
        }
        let Some(cp) = cps.into_iter().max_by_key(|c| c.no) else {
            return Err(Error::BadFile {
                path: dir.join(log_file_name(0)),
                reason: if files.is_empty() {
                    "missing: the data files exist but the redo log does not".into()
                } else {
                    "no valid checkpoint slot".into()
                },
            });
        };
        let log = Self::new(files, file_size, cp, metrics);
        if v1 {
            log.upgrade_v1(&cp, mode)?;
        }
        Ok((log, cp))
    }

    /// Take a log of version 1 (`format::LOG_VERSION_V1`: 20-byte group
    /// headers, fixed-width page records) to the current version, as
    /// InnoDB 8.0.30 took its redo to a new format: only a log with nothing
    /// to recover. Recovery reads one framing, so a log that holds groups
    /// past its checkpoint is refused, with what to do; one that holds
    /// none has its headers rewritten as the current version (not in
    /// `ReadOnly` mode: the framing matters only to what is appended, and
    /// a read-only open appends nothing).
    ///
    /// A crash while the headers are rewritten leaves some files of each
    /// version and no group past the checkpoint in either framing (nothing
    /// is appended before every header is rewritten and synced, file 0
    /// last): the next open finds a version-1 header, sees nothing to
    /// recover, and rewrites them again.
    fn upgrade_v1(&self, cp: &Checkpoint, mode: OpenMode) -> Result<()> {
        let mut hdr = [0u8; format::GROUP_HDR_V1];
        self.read_into(cp.lsn, &mut hdr)?;
        // A version-1 header stores its LSN: read the payload only for
        // one that was written here.
        let len = format::GROUP_HDR_V1 + get_u32(&hdr, 0) as usize;
        let pending = if get_u64(&hdr, 8) == cp.lsn && len <= self.capacity as usize {
            let mut group = vec![0u8; len];
            self.read_into(cp.lsn, &mut group)?;
            format::decode_group_v1(&group, cp.lsn).is_some_and(|(h, _)| cp.admits(cp.lsn, h.epoch))
        } else {
            false
        };
        if pending {
            return Err(Error::BadFile {
                path: self.first_path().to_path_buf(),
                reason: format!(
                    "the redo log is of format version {LOG_VERSION_V1} (an earlier Keel) and \
                     holds changes to recover: open the database once with that Keel, which \
                     recovers them, close it, then open it with this one (which reads version \
                     {LOG_VERSION})"
                ),
            });
        }
        if mode == OpenMode::ReadOnly {
            return Ok(());
        }
        for (dev, path) in self.files.iter().rev() {
            let mut block = AlignedBuf::new(4096);
            dev.read_at(&mut block, 0)
                .map_err(|e| Error::io(path, "read header of", e))?;
            let mut h = LogFileHeader::decode(&block).map_err(|reason| Error::BadFile {
                path: path.clone(),
                reason,
            })?;
            h.version = LOG_VERSION;
            h.encode(&mut block);
            dev.write_at(&block, 0)
                .map_err(|e| Error::io(path, "write header of", e))?;
            Metrics::add(&self.metrics.os_other_written_bytes, block.len() as u64);
            dev.sync().map_err(|e| Error::io(path, "sync", e))?;
        }
        log::info!(
            "redo log taken from format version {LOG_VERSION_V1} to {LOG_VERSION} (nothing was \
             left to recover)"
        );
        Ok(())
    }

    fn new(
        files: Vec<(Arc<dyn Device>, PathBuf)>,
        file_size: u64,
        cp: Checkpoint,
        metrics: Arc<Metrics>,
    ) -> Log {
        let area = file_size - LOG_FILE_HDR;
        let capacity = area * files.len() as u64;
        Metrics::set(&metrics.log_capacity, capacity);
        Metrics::set(&metrics.log_lsn_last_checkpoint, cp.lsn);
        let pos = Arc::new(Positions {
            end: AtomicU64::new(cp.lsn),
            checkpoint: AtomicU64::new(cp.lsn),
        });
        let p = Arc::clone(&pos);
        metrics
            .log_lsn_current
            .bind(move || p.end.load(Ordering::Acquire));
        let p = Arc::clone(&pos);
        metrics.log_lsn_checkpoint_age.bind(move || {
            let checkpoint = p.checkpoint.load(Ordering::Acquire);
            p.end.load(Ordering::Acquire).saturating_sub(checkpoint)
        });
        let file_syncs = (0..files.len()).map(|_| FileSyncs::default()).collect();
        Log {
            files,
            area,
            capacity,
            state: Mutex::new(LogState {
                buf: Vec::new(),
                buf_lsn: cp.lsn,
                lsn: cp.lsn,
                in_flight: InFlight::default(),
                epoch: cp.epoch,
            }),
            pos,
            write: Mutex::new(Vec::new()),
            #[cfg(test)]
            write_waiting: Default::default(),
            written: AtomicU64::new(cp.lsn),
            flushed: AtomicU64::new(cp.lsn),
            sync: Mutex::new(SyncState::default()),
            round_ended: Condvar::new(),
            gathered: Condvar::new(),
            file_syncs,
            checkpoint_no: AtomicU64::new(cp.no),
            epoch: Mutex::new((cp.epoch, cp.epoch_lsn)),
            checkpoint_mutex: Mutex::new(()),
            backup_pin: AtomicU64::new(u64::MAX),
            metrics,
            poisoned: Poison::default(),
            failpoints: Default::default(),
        }
    }

    /// The size of each log file and their number, as the files were
    /// created (what `log_file_size` and `log_files_in_group` mean).
    pub fn geometry(&self) -> (u64, usize) {
        (self.area + LOG_FILE_HDR, self.files.len())
    }

    /// Total bytes of the circular data areas.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Current end LSN.
    pub fn lsn(&self) -> Lsn {
        self.pos.end.load(Ordering::Acquire)
    }

    /// Checkpoint age: bytes of log the next checkpoint has not freed yet.
    pub fn age(&self) -> u64 {
        self.lsn().saturating_sub(self.checkpoint_lsn())
    }

    /// LSN up to which the log is durable.
    pub fn flushed_lsn(&self) -> Lsn {
        self.flushed.load(Ordering::Acquire)
    }

    /// The last checkpoint LSN.
    pub fn checkpoint_lsn(&self) -> Lsn {
        self.pos.checkpoint.load(Ordering::Acquire)
    }

    /// Position recovery ended at: later appends continue from here.
    pub(crate) fn reset_end(&self, lsn: Lsn) {
        let mut st = self.lock_state();
        st.buf.clear();
        st.buf_lsn = lsn;
        st.lsn = lsn;
        self.pos.end.store(lsn, Ordering::Release);
        self.written.store(lsn, Ordering::Release);
        self.flushed.store(lsn, Ordering::Release);
    }

    /// Append one group under the state lock; `then(start, end)` runs while
    /// the lock is still held (to dirty pages in LSN order). Only a memory
    /// copy: it fails (changing nothing) only when the log is poisoned. The
    /// caller holds a reservation for the group (module doc).
    pub(crate) fn append<R>(
        &self,
        kind: u8,
        payload: &[u8],
        then: impl FnOnce(Lsn, Lsn) -> R,
    ) -> Result<(Lsn, R)> {
        let mut st = self.lock_state();
        self.poisoned.check()?;
        let (_, end, r) = Self::append_locked(&mut st, kind, payload, then);
        self.pos.end.store(end, Ordering::Release);
        drop(st);
        Ok((end, r))
    }

    fn append_locked<R>(
        st: &mut LogState,
        kind: u8,
        payload: &[u8],
        then: impl FnOnce(Lsn, Lsn) -> R,
    ) -> (Lsn, Lsn, R) {
        let start = st.lsn;
        format::encode_group(kind, start, st.epoch, payload, &mut st.buf);
        let end = start + (GROUP_HDR + payload.len()) as u64;
        st.lsn = end;
        let r = then(start, end);
        (start, end, r)
    }

    /// The append mutex (`state`), locked; a wait is
    /// `wait_log_append_mutex`.
    fn lock_state(&self) -> parking_lot::MutexGuard<'_, LogState> {
        let m = &self.metrics;
        crate::metrics::lock_counted(
            &self.state,
            &m.wait_log_append_mutex,
            &m.wait_log_append_mutex_ns,
        )
    }

    /// Bytes appended and not yet written.
    pub(crate) fn buffered(&self) -> usize {
        self.lock_state().buf.len()
    }

    /// Write the buffer out if it holds more than the threshold (called by
    /// appenders after their append, holding no latch, after every
    /// mini-transaction). The buffer holds `[buf_lsn, end)` and
    /// `written ≤ buf_lsn`, so `end - written` bounds its length from
    /// above: below the threshold, the mutex is not taken at all.
    pub(crate) fn write_if_buffered_over(&self, threshold: usize) -> Result<()> {
        let unwritten = self
            .pos
            .end
            .load(Ordering::Acquire)
            .saturating_sub(self.written.load(Ordering::Acquire));
        if unwritten > threshold as u64 && self.buffered() > threshold {
            self.write_up_to(self.lsn(), false)?;
        }
        Ok(())
    }

    /// Append a transaction's logical commit record and enter it in flight,
    /// atomically: the checkpoint will not pass it until the marker
    /// [`Log::append_applied`] appends is durable. Returns the commit's LSN
    /// (its id).
    pub(crate) fn append_commit(&self, record: Arc<[u8]>) -> Result<Lsn> {
        let mut st = self.lock_state();
        self.poisoned.check()?;
        let (start, end, ()) = Self::append_locked(&mut st, kind::TXN_COMMIT, &record, |_, _| ());
        st.in_flight.insert(start, record);
        self.pos.end.store(end, Ordering::Release);
        drop(st);
        Ok(start)
    }

    /// Append the marker that the commit at `commit` reached every page, and
    /// take it out of flight; its pin holds until the marker is durable
    /// (`inflight`). Returns the marker's end LSN.
    pub(crate) fn append_applied(&self, commit: Lsn) -> Result<Lsn> {
        let mut st = self.lock_state();
        self.poisoned.check()?;
        let (_, end, ()) =
            Self::append_locked(&mut st, kind::TXN_APPLIED, &commit.to_le_bytes(), |_, _| ());
        let was = st
            .in_flight
            .finish(commit, end, self.flushed.load(Ordering::Acquire));
        self.pos.end.store(end, Ordering::Release);
        drop(st);
        debug_assert!(was, "commit {commit} finished twice");
        Ok(end)
    }

    /// The log's end and the commits in flight (ascending), read together
    /// under the log's mutex: every commit whose record starts below the
    /// end and is not in the list has been applied (its marker appended),
    /// and every commit logged later starts at or past the end. A read
    /// view is built from this (`txn::view`).
    pub(crate) fn commit_snapshot(&self) -> (Lsn, Vec<Lsn>) {
        let st = self.lock_state();
        (self.pos.end.load(Ordering::Acquire), st.in_flight.commits())
    }

    /// Enter a commit that recovery found unfinished in flight again: its
    /// id is `commit` (its original record's LSN) and its newest record
    /// copy starts at `pin`, after the checkpoint. A commit already in
    /// flight keeps its entry. Recovery enters every such commit before it
    /// returns (`recovery`, "Unfinished commits pin the checkpoint").
    pub(crate) fn resume_commit(&self, commit: Lsn, pin: Lsn, record: Arc<[u8]>) {
        self.lock_state().in_flight.resume(commit, pin, record);
    }

    /// Bytes of the group [`Log::relocate_in_flight`] would append now.
    pub(crate) fn relocation_len(&self) -> usize {
        GROUP_HDR + self.lock_state().in_flight.relocation_len()
    }

    /// Copy every in-flight record into one group at the end of the log and
    /// move their pins there, so the checkpoint may pass the originals (see
    /// `inflight`). Does nothing (returns `None`) when nothing is in flight
    /// or the group would exceed `max_bytes`, the caller's reservation.
    /// Returns the group's start LSN and size.
    pub(crate) fn relocate_in_flight(&self, max_bytes: usize) -> Result<Option<(Lsn, usize)>> {
        let mut st = self.lock_state();
        self.poisoned.check()?;
        let len = GROUP_HDR + st.in_flight.relocation_len();
        if st.in_flight.is_empty() || len > max_bytes {
            return Ok(None);
        }
        let payload = st.in_flight.encode_relocation();
        let (start, end, ()) =
            Self::append_locked(&mut st, kind::TXN_RELOCATED, &payload, |_, _| ());
        st.in_flight.move_pins(start);
        self.pos.end.store(end, Ordering::Release);
        drop(st);
        // The group's own extent, so that `start + bytes` is its end.
        Ok(Some((start, (end - start) as usize)))
    }

    /// Where a checkpoint could go now, as two bounds: the oldest unwritten
    /// page change (`oldest_dirty()`, read under the same lock that dirties
    /// pages, so no change can slip in between) or else the end of the log;
    /// and the oldest pin of a commit in flight or of one whose marker is
    /// not durable yet.
    pub(crate) fn checkpoint_bound(
        &self,
        oldest_dirty: impl FnOnce() -> Option<Lsn>,
    ) -> (Lsn, Option<Lsn>) {
        let mut st = self.lock_state();
        let pages = oldest_dirty().map_or(st.lsn, |d| d.min(st.lsn));
        let durable = self.flushed.load(Ordering::Acquire);
        (pages, st.in_flight.min_pin(durable))
    }

    /// Whether what holds a checkpoint below `below` is the pin of a
    /// finished commit whose marker is not durable yet: a sync of the log
    /// releases it (`inflight`).
    pub(crate) fn unsynced_marker_holds_below(&self, below: Lsn) -> bool {
        let mut st = self.lock_state();
        let durable = self.flushed.load(Ordering::Acquire);
        st.in_flight.finished_pin_below(below, durable)
    }

    /// Fill `out` with the log bytes starting at `lsn` (recovery).
    pub(crate) fn read_into(&self, mut lsn: Lsn, out: &mut [u8]) -> Result<()> {
        let mut done = 0;
        while done < out.len() {
            let (f, off, room) = self.locate(lsn);
            let n = (room as usize).min(out.len() - done);
            let (dev, path) = &self.files[f];
            dev.read_at(&mut out[done..done + n], off)
                .map_err(|e| Error::io(path, "read", e))?;
            done += n;
            lsn += n as u64;
        }
        Ok(())
    }

    /// Path of the first log file (for errors about the log as a whole).
    pub(crate) fn first_path(&self) -> &Path {
        self.files
            .first()
            .map_or(Path::new(""), |(_, p)| p.as_path())
    }

    /// Record a checkpoint at `lsn`: the caller guarantees every change
    /// below `lsn` is in the data files and they are synced.
    ///
    /// The slot is written into file 0's header, then made durable before
    /// the checkpoint counts (`checkpoint_lsn` rises only then, so no log
    /// space it frees is reused before a crash would find it). When the
    /// end of the log lies in file 0, a sync round to the end is run (or
    /// joined) after the slot's write: its fdatasync of file 0 covers the
    /// slot, and the log's pending bytes are synced with it, where the
    /// slot's own sync used to write them out without raising `flushed`,
    /// so that the next page batch synced them again. If no fdatasync of
    /// file 0 that *began* after the slot's write has ended by then (the
    /// end lies in another file, or nothing was left to sync, or the round
    /// had begun before), file 0 is synced here. See "Checkpoints ride a
    /// round" in the module doc.
    pub(crate) fn write_checkpoint(&self, lsn: Lsn) -> Result<bool> {
        let _c = self.checkpoint_mutex.lock();
        // A backup copying the redo holds the checkpoint at what it has
        // not copied yet: the log's space there is not reused meanwhile.
        let lsn = lsn.min(self.backup_pin.load(Ordering::Acquire));
        if lsn <= self.checkpoint_lsn() {
            return Ok(false);
        }
        self.write_up_to(lsn, true)?;
        let (epoch, epoch_lsn) = *self.epoch.lock();
        let no = self.checkpoint_no.load(Ordering::Acquire) + 1;
        let mark = self.put_slot(no, lsn, epoch, epoch_lsn)?;
        self.failpoints.hit("checkpoint.slot_written");
        if self.locate(self.lsn()).0 == 0 {
            self.write_up_to(self.lsn(), true)?;
        }
        if self.file_syncs[0].covers(mark) {
            Metrics::add(&self.metrics.log_checkpoints_in_round, 1);
        } else {
            self.sync_slot_file()?;
        }
        self.publish_checkpoint(no, lsn);
        Ok(true)
    }

    /// The newest slot, `no` at `lsn`, is durable: it counts from now on.
    fn publish_checkpoint(&self, no: u64, lsn: Lsn) {
        self.checkpoint_no.store(no, Ordering::Release);
        self.pos.checkpoint.store(lsn, Ordering::Release);
        Metrics::set(&self.metrics.log_lsn_last_checkpoint, lsn);
        Metrics::add(&self.metrics.log_checkpoints, 1);
    }

    /// Start a hot backup's copy of the redo: from now on no checkpoint
    /// passes the current one, until [`Log::move_backup_pin`] lets it.
    /// Returns the checkpoint the copy starts from (what a recovery of the
    /// log now would start from), or `None` if a backup runs already.
    pub(crate) fn pin_for_backup(&self) -> Option<Checkpoint> {
        let _c = self.checkpoint_mutex.lock();
        if self.backup_pin.load(Ordering::Acquire) != u64::MAX {
            return None;
        }
        let lsn = self.checkpoint_lsn();
        self.backup_pin.store(lsn, Ordering::Release);
        let (epoch, epoch_lsn) = *self.epoch.lock();
        Some(Checkpoint {
            no: self.checkpoint_no.load(Ordering::Acquire),
            lsn,
            epoch,
            epoch_lsn,
        })
    }

    /// The backup has copied the redo below `lsn`: checkpoints may go that
    /// far. `u64::MAX` ends the backup's hold.
    pub(crate) fn move_backup_pin(&self, lsn: Lsn) {
        let _c = self.checkpoint_mutex.lock();
        self.backup_pin.store(lsn, Ordering::Release);
    }

    /// Write checkpoint slot number `checkpoint_no + 1` (into the slot the
    /// newest one is not in) and sync it; on success it is the newest.
    /// The caller holds `checkpoint_mutex`. A failure poisons the log: the
    /// slot may be torn, and the other one is the newest again.
    fn write_slot(&self, lsn: Lsn, epoch: u32, epoch_lsn: Lsn) -> Result<()> {
        let no = self.checkpoint_no.load(Ordering::Acquire) + 1;
        self.put_slot(no, lsn, epoch, epoch_lsn)?;
        self.sync_slot_file()?;
        self.checkpoint_no.store(no, Ordering::Release);
        Ok(())
    }

    /// Write checkpoint slot number `no` into its place in file 0's header
    /// (the one the newest slot, `no − 1`, is not in: that one stays whole
    /// until this one is durable), without syncing it. Returns file 0's
    /// fdatasyncs begun by the time the write returned: one numbered past
    /// that makes the slot durable once it ends ([`FileSyncs::covers`]).
    /// The caller holds `checkpoint_mutex`. A failure poisons the log.
    fn put_slot(&self, no: u64, lsn: Lsn, epoch: u32, epoch_lsn: Lsn) -> Result<u64> {
        let mut b = AlignedBuf::new(4096);
        Checkpoint {
            no,
            lsn,
            epoch,
            epoch_lsn,
        }
        .encode(&mut b);
        let (dev, path) = &self.files[0];
        let slot = CHECKPOINT_SLOTS[(no % 2) as usize];
        if let Err(e) = dev.write_at(&b, slot) {
            let e = Error::io(path, "write checkpoint to", e);
            self.poisoned
                .set(format!("writing a checkpoint failed: {e}"));
            return Err(e);
        }
        Metrics::add(&self.metrics.os_other_written_bytes, b.len() as u64);
        Ok(self.file_syncs[0].begun())
    }

    /// Sync file 0, whose header holds the slots. A failure poisons the
    /// log: the slot just written may be torn or lost.
    fn sync_slot_file(&self) -> Result<()> {
        let (dev, path) = &self.files[0];
        if let Err(e) = self.file_syncs[0].sync(&**dev) {
            let e = Error::io(path, "sync checkpoint in", e);
            self.poisoned
                .set(format!("writing a checkpoint failed: {e}"));
            return Err(e);
        }
        Ok(())
    }

    /// Make every byte the log files hold durable: what a crashed run
    /// wrote and never synced is readable (from the OS's cache) but would
    /// not survive a power loss. Recovery calls this before it reads, so
    /// nothing it applies, and no LSN it declares flushed, rests on log
    /// that is not on disk (see `recovery`, "What recovery trusts").
    pub(crate) fn sync_files(&self) -> Result<()> {
        for (dev, path) in &self.files {
            dev.sync()
                .map_err(|e| Error::io(path, "sync (before recovery)", e))?;
        }
        Ok(())
    }

    /// Start this run's epoch before its first append: one more than the
    /// newest checkpoint's, recorded with the LSN appends continue from
    /// (the end recovery found) in a new checkpoint slot at the same
    /// checkpoint LSN, synced. From then on every group carries the new
    /// epoch, and recovery takes a group at or past that LSN for history
    /// only if it does (`Checkpoint::admits`): a valid group that an
    /// earlier run left past the recovered end, which the new groups may
    /// come to end exactly at, is the end of the log.
    ///
    /// Nothing may be appended before this returns `Ok`: a group of the new
    /// epoch with no durable slot naming it could be taken for stale by
    /// the next recovery, and the next run could reuse the epoch. If the
    /// slot write fails the log is poisoned and the open fails, leaving
    /// the older slot the newest, as if this run had never started.
    pub(crate) fn begin_epoch(&self) -> Result<u32> {
        let _c = self.checkpoint_mutex.lock();
        let (old, _) = *self.epoch.lock();
        // Groups store 24 bits, and 0 there marks logs written before
        // epochs: skip the epochs that would store 0.
        let mut epoch = old.wrapping_add(1);
        if epoch & format::GROUP_EPOCH_MASK == 0 {
            epoch = epoch.wrapping_add(1);
        }
        let start = self.lsn();
        self.write_slot(self.checkpoint_lsn(), epoch, start)?;
        *self.epoch.lock() = (epoch, start);
        self.lock_state().epoch = epoch;
        Ok(epoch)
    }

    /// This run's epoch and the LSN its appends started from.
    pub fn epoch(&self) -> (u32, Lsn) {
        *self.epoch.lock()
    }

    /// An error if the log refuses writes.
    pub(crate) fn check_poisoned(&self) -> Result<()> {
        self.poisoned.check()
    }

    /// Refuse every later append (tests of what a refused append leaves).
    #[cfg(test)]
    pub(crate) fn poison_for_test(&self, reason: &str) {
        self.poisoned.set(reason);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod upgrade_tests;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::io::{FlushMethod, OsFileSystem};

    fn log() -> (tempfile::TempDir, Log) {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem::new(FlushMethod::NoSync);
        let log = Log::create(&fs, dir.path(), 1 << 20, 2, 7, Arc::default()).unwrap();
        (dir, log)
    }

    /// The gauges read the log's own positions: exact after every kind of
    /// append, after recovery's reset of the end, and after a checkpoint,
    /// with nothing set on the append path.
    #[test]
    fn the_lsn_gauges_read_the_logs_positions() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem::new(FlushMethod::NoSync);
        let m = Arc::new(Metrics::default());
        assert_eq!(m.get("log_lsn_current"), Some(0), "unbound");
        let log = Log::create(&fs, dir.path(), 1 << 20, 2, 7, Arc::clone(&m)).unwrap();
        let gauges = || {
            (
                m.get("log_lsn_current").unwrap(),
                m.get("log_lsn_checkpoint_age").unwrap(),
            )
        };
        assert_eq!(gauges(), (log.lsn(), 0));
        let (end, ()) = log.append(kind::MTR, &[1; 40], |_, _| ()).unwrap();
        assert_eq!(gauges(), (end, log.age()));
        let c = log.append_commit(Arc::from(&b"record"[..])).unwrap();
        assert_eq!(gauges(), (log.lsn(), log.age()));
        let marker = log.append_applied(c).unwrap();
        assert_eq!(gauges(), (marker, log.age()));
        assert!(log.age() > 0);
        log.reset_end(marker + 100);
        assert_eq!(gauges().0, marker + 100);
        // The commit is applied (its marker appended and, with the write
        // below, durable): nothing pins the checkpoint below the end.
        log.write_up_to(log.lsn(), true).unwrap();
        assert!(log.write_checkpoint(marker).unwrap());
        assert_eq!(gauges(), (marker + 100, 100));
    }

    #[test]
    fn a_commit_pins_the_checkpoint_until_its_marker_is_durable_and_a_refused_one_pins_nothing() {
        let (_dir, log) = log();
        let c = log.append_commit(Arc::from(&b"record"[..])).unwrap();
        assert_eq!(log.checkpoint_bound(|| None).1, Some(c));
        let marker = log.append_applied(c).unwrap();
        assert_eq!(
            log.checkpoint_bound(|| None).1,
            Some(c),
            "marker not durable"
        );
        log.write_up_to(marker, false).unwrap();
        assert_eq!(
            log.checkpoint_bound(|| None).1,
            Some(c),
            "written, not synced"
        );
        log.write_up_to(marker, true).unwrap();
        assert_eq!(log.checkpoint_bound(|| None).1, None);
        // A refused append registers nothing that could pin the checkpoint.
        log.poison_for_test("test");
        assert!(log.append_commit(Arc::from(&b"record"[..])).is_err());
        assert_eq!(log.checkpoint_bound(|| None).1, None);
    }

    #[test]
    fn relocation_moves_every_pin_to_the_end_of_the_log() {
        let (_dir, log) = log();
        let a = log.append_commit(Arc::from(&b"first"[..])).unwrap();
        let b = log.append_commit(Arc::from(&b"second"[..])).unwrap();
        assert_eq!(log.checkpoint_bound(|| None).1, Some(a));
        let need = log.relocation_len();
        assert_eq!(
            log.relocate_in_flight(need - 1).unwrap(),
            None,
            "over budget"
        );
        let (at, len) = log.relocate_in_flight(need).unwrap().unwrap();
        assert_eq!(len, need);
        assert!(at > b);
        assert_eq!(log.checkpoint_bound(|| None).1, Some(at));
        log.append_applied(a).unwrap();
        let end = log.append_applied(b).unwrap();
        assert_eq!(
            log.checkpoint_bound(|| None).1,
            Some(at),
            "markers not durable"
        );
        log.write_up_to(end, true).unwrap();
        assert_eq!(log.checkpoint_bound(|| None).1, None);
    }
}
