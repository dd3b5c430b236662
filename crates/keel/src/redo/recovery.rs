//! Crash recovery at open, the redo part: replay every complete record
//! group from the checkpoint (idempotently: a page change is applied only
//! when the page is older than the group) and collect the commits whose
//! record is in the log but whose "applied" marker is not. An incomplete
//! tail ends the log. (Torn pages were repaired from the doublewrite area
//! before this runs.)
//!
//! Recovery does not apply those commits itself: it hands them up, and the
//! database (`crate::db`) finishes them once the page cleaners run, through
//! the same path as any commit (the log knows nothing of transactions).
//!
//! # Unfinished commits pin the checkpoint
//!
//! Before it returns, recovery enters every commit it hands up in the log's
//! set of commits in flight (`Log::resume_commit`), pinned at the newest
//! group holding its record (`inflight`). The database finishes them one at
//! a time while the page cleaners run, and a cleaner may checkpoint at any
//! moment: a commit entered only when its turn came could have its record
//! passed by a checkpoint that made its replayed first operation durable
//! (the replay dirtied that page, the cleaner wrote it). A power loss then
//! left a commit nobody was told of half there, its record behind the next
//! recovery's start (found by the power-loss test that kills the process
//! and cuts the power during the next open: a transfer's credit without its
//! debit or its log row). Being in flight from the start also keeps a read
//! view opened meanwhile from seeing the half-applied commit.
//!
//! # Batches, applied page by page
//!
//! Applying the log group by group in LSN order reads each page the moment
//! its first record comes up, one synchronous read at a time, and latches
//! the page again for every later record. Measured before this design
//! (`benches/recovery.rs`, 2 cores shared with other builds, a virtio disk
//! doing 9 k random 16 KiB `O_DIRECT` reads a second at one in flight and
//! 22 k at eight):
//! - 227 MiB of redo touching 27 k pages of a million-row table that were
//!   not in the pool: a redo phase of 4.3 to 7.9 s, of which about 4.6 s
//!   waiting for those reads one at a time, 1.5 to 2.3 s reading the log
//!   into one buffer as large as the whole redo (grown by doubling, each
//!   1 MiB read through a zeroed temporary), the rest applying;
//! - 256 MiB touching 6.5 k pages (480 k page records): 4 s, nearly all
//!   CPU, most of it copying pages: every latched page's first mutable
//!   access copied the page for a before-image that redo never uses, once
//!   per record, and every record took the page's latch again.
//!
//! So, as InnoDB's `recv_sys` does (parse a batch of redo into a hash table
//! keyed by page, then apply page by page with the pages read ahead) and
//! PostgreSQL's recovery prefetching does (read the blocks the next
//! records need while the current ones are applied), recovery here:
//!
//! 1. reads the log on its own thread ([`LogReader`]), in chunks of whole,
//!    checksummed groups, a bounded number ahead of the apply;
//! 2. cuts the groups into *batches*, each at most [`Tuning::batch_bytes`]
//!    of log or [`Tuning::batch_pages`] pages that were not in the pool
//!    when the batch met them (a batch ends after the group that reaches
//!    either), keeps a batch's page records in a map from page to its
//!    records in LSN order (each record points into the log chunk, nothing
//!    is copied), and handles the commit groups on the way, in LSN order;
//! 3. applies a batch page by page in page order, while
//!    [`Tuning::read_threads`] threads read the batch's missing pages into
//!    the pool in the same order ahead of it: each page is latched once per
//!    batch and read once, with many reads in flight, and redo writes into
//!    the page without keeping a before-image (`PageWrite::unlogged_mut`).
//!
//! ## Why the result is the same
//!
//! A page record is a pure function of one page: whether it applies
//! depends only on that page's LSN, and applying it changes only that page
//! (its bytes, its LSN, its place in the flush list). So two records of
//! different pages commute, and any order that keeps each page's records in
//! LSN order leaves every page exactly as the LSN order does. Batching keeps
//! it: the batches follow each other in LSN order, and within a batch a
//! page's records stay in LSN order. Each rule still holds per record, for
//! the same record:
//! - *skip when the page LSN is at or past the record's end*: checked
//!   before each record against the page as the earlier records of the same
//!   page left it, exactly as before;
//! - *the flush list*: `mark_dirty` enters a page at the start LSN of the
//!   first change applied to it since it was last written, which is the
//!   same change in either order (the list is sorted by that LSN, not by
//!   when a page entered it), so the checkpoint bound is the same;
//! - *a page that was never written* (below) is judged on the page's first
//!   record in LSN order, the same one;
//! - *torn pages* were repaired from the doublewrite area before any page
//!   is read, so the read-ahead only ever reads repaired pages;
//! - *a corrupt page* (bad checksum, bad structure) is an error naming the
//!   page and its file, as before. The read-ahead threads ignore their
//!   errors and leave the page out of the pool (as any failed read does),
//!   so the apply reads it again itself and meets the error with the same
//!   page, file and reason. What differs is which error comes first when
//!   several pages are bad, and that a record that is not decodable fails
//!   recovery before the rest of its batch is applied rather than after:
//!   either way the database does not open and nothing is lost, since
//!   replay from the same checkpoint is idempotent.
//!
//! A page written back during recovery (a thread short of frames writes a
//! dirty page from the LRU tail) carries only changes of groups already
//! read, so the write-ahead rule holds once the log's end is moved to the
//! end of each batch before it is applied (`Log::reset_end`, which later
//! appends continue from once the whole log is read): every byte up to
//! there is in the log files.
//!
//! ## Memory
//!
//! Bounded, never proportional to the log: the reader is at most
//! `batch_bytes / chunk` chunks (at least two) ahead, and a batch holds at
//! most `batch_bytes` of log plus one group, and an entry per record. The
//! defaults ([`Tuning::for_pool`]) take an eighth of the buffer pool, at
//! least 4 MiB and at most 64 MiB, for a batch, and a quarter of the
//! pool's frames for the pages it reads, so the read-ahead does not push a
//! batch's own pages out. The commits waiting for their "applied" marker are
//! copied out of the log, as many as were in flight around the crash. One
//! group larger than a chunk is read whole, as the log holds it.
//!
//! ## Threads: the protocol
//!
//! - The *reader* (one thread for the whole redo phase) owns a
//!   [`LogReader`] and sends chunks into a bounded channel. It holds
//!   nothing while it waits for room in the channel; the apply thread wakes
//!   it by taking a chunk. It ends after sending the last chunk and an end
//!   marker, or an error; if the apply thread stops early (an error), it
//!   drops the channel's receiving end before the threads are joined, so
//!   a reader waiting for room wakes with a send error and ends. A channel
//!   that closes without the end marker (a reader that panicked) fails
//!   recovery rather than being taken for the end of the log.
//! - The *read-ahead* threads (per batch, joined before the next batch is
//!   cut) take the batch's pages in order from a shared counter and bring
//!   each into the pool (`BufferPool::prefetch`): they hold a frame's
//!   exclusive latch only while reading that page from disk, and wait only
//!   for a free frame (possibly writing a dirty page from the LRU tail,
//!   as any thread short of frames does). The apply thread waits for a
//!   page a read-ahead thread is reading by waiting for its latch, holding
//!   no other latch then (it releases each page before taking the next), so
//!   no cycle can form. When the apply thread stops early it raises a flag
//!   the read-ahead threads check before each page. A read-ahead error is
//!   dropped: the page is not in the pool, and the apply reads it itself.
//! - A thread that cannot be started is done without: no read-ahead, or
//!   the log read on the apply thread. Same result, only slower.
//!
//! # What recovery trusts
//!
//! Recovery reads the log through the OS, which after a process crash
//! (kill -9, an OOM kill, a panic) still holds what the crashed run wrote
//! and never synced: readable, but gone after a power loss. Replaying it
//! and declaring it flushed (`Log::reset_end`) would let this open write
//! data pages carrying those LSNs (read-ahead evictions, the cleaners, the
//! sharp checkpoint) before any log file is synced; a power loss then
//! leaves pages newer than the durable log, the next run reuses their
//! LSNs, and its recovery skips those LSNs' records on such a page: an
//! acknowledged commit lost. So the first step is to sync every log file
//! ([`Log::sync_files`]); a failure fails the open before anything is
//! applied. PostgreSQL syncs the whole data directory after a crash for
//! the same reason.
//!
//! The data files are synced too, every one of them
//! (`Tablespace::sync_every_file`), for the same reason in the other
//! direction: a page the crashed run wrote in place and never synced is
//! read by this open as written, so redo skips the records it covers, and
//! the sharp checkpoint that ends the open passes them. A power loss then
//! drops the write, and the next recovery starts past the redo that would
//! rebuild the page. The checkpoint's own sync (`Tablespace::sync`) syncs
//! only files this run wrote to; the doublewrite repair syncs every data
//! file, but there is no repair under `doublewrite = off` or `atomic`.
//!
//! The end of the log is the first group that is not valid at its LSN, or
//! that a run before the checkpoint's left past where the checkpoint's run
//! began appending (its epoch says so: `format::Checkpoint::admits`). A
//! power loss can keep a later write of the log and lose an earlier one;
//! recovery stops at the hole, and the next run appends from there. If its
//! groups came to end exactly where the surviving later ones begin
//! (finishing unfinished commits writes the same bytes at the same
//! LSNs), an LSN check alone would take those for history at the next
//! open, and a transaction absent in one run would appear in the next.
//!
//! What a restart after a *failed* fdatasync can promise: the failed round
//! acknowledged nothing, and every commit acknowledged before it was
//! durable then. But Linux may drop the failed pages from its cache or
//! keep them there marked clean, so the sync at the next open can succeed
//! on bytes the disk does not hold; replay then rests on them. Restart the
//! machine, not only the process, after an fdatasync error (or a kernel
//! that reports one) to take the cache out of the question.
//!
//! # A page that was never written
//!
//! A page read as all zeros, or past the end of its file, was never
//! written in place. That is fine only if the first change redo applies to
//! it creates it (a record that starts from a zeroed page): then redo
//! rebuilds it whole. Any other first change means a write the checkpoint
//! relied on was lost, and applying diffs to zeros would make a silently
//! wrong page; recovery stops with `CorruptPage` naming the page instead.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::time::Instant;

use super::format::{self, kind, PageRecordRef, GROUP_HDR};
use super::Log;
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::page::Lsn;
use crate::page::{get_u32, page_lsn, PageId};

/// What recovery did.
#[derive(Debug, Default, Clone)]
pub struct RecoveryReport {
    /// Checkpoint LSN recovery started from.
    pub checkpoint_lsn: Lsn,
    /// End of the valid log.
    pub end_lsn: Lsn,
    /// Record groups found after the checkpoint.
    pub groups: u64,
    /// Page records applied (page older than the record).
    pub page_records_applied: u64,
    /// Page records skipped (page already newer).
    pub page_records_skipped: u64,
    /// Distinct pages touched.
    pub pages_touched: u64,
    /// Pages the read-ahead threads read from disk.
    pub pages_read_ahead: u64,
    /// Batches the log was applied in.
    pub batches: u64,
    /// Transactions whose write sets were re-applied.
    pub txns_reapplied: u64,
    /// Torn pages restored from the doublewrite area.
    pub torn_pages_repaired: u64,
    /// Wall time in milliseconds.
    pub time_ms: u64,
}

impl fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "redo from LSN {} to {} ({} bytes): {} groups in {} batches, {} page records applied, {} skipped, \
             {} pages touched ({} read ahead), {} transactions re-applied, {} torn pages repaired, {} ms",
            self.checkpoint_lsn,
            self.end_lsn,
            self.end_lsn - self.checkpoint_lsn,
            self.groups,
            self.batches,
            self.page_records_applied,
            self.page_records_skipped,
            self.pages_touched,
            self.pages_read_ahead,
            self.txns_reapplied,
            self.torn_pages_repaired,
            self.time_ms
        )
    }
}

/// How recovery reads, batches and reads ahead (module doc). Any values
/// give the same result; they change only speed and memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tuning {
    /// Bytes of log the reader reads at a time (more for a larger group).
    pub chunk: usize,
    /// Log bytes one batch holds at most (plus one group).
    pub batch_bytes: usize,
    /// Distinct pages one batch touches at most (plus one group's).
    pub batch_pages: usize,
    /// Threads reading a batch's pages ahead of the apply (0: none).
    pub read_threads: usize,
    /// Read the log on a thread of its own (else on the applying thread).
    pub reader_thread: bool,
}

/// Read-ahead threads: enough reads in flight for an SSD's random reads
/// to approach their throughput (measured: 9 k reads/s at one in flight,
/// 22 k at eight, 24 k at 32 on the project's machine); they mostly wait.
const READ_THREADS: usize = 8;

impl Tuning {
    /// The defaults for a pool of `frames` frames of `page_size` bytes.
    pub(crate) fn for_pool(frames: usize, page_size: usize) -> Tuning {
        let pool_bytes = frames.saturating_mul(page_size);
        Tuning {
            chunk: 4 << 20,
            batch_bytes: (pool_bytes / 8).clamp(4 << 20, 64 << 20),
            batch_pages: (frames / 4).max(1),
            read_threads: READ_THREADS,
            reader_thread: true,
        }
    }
}

#[cfg(test)]
thread_local! {
    /// Tests choose the tuning of the next recoveries on their thread.
    static TEST_TUNING: std::cell::Cell<Option<Tuning>> = const { std::cell::Cell::new(None) };
}

/// Make recoveries run on this thread use `t` (None: the defaults).
#[cfg(test)]
pub(crate) fn set_test_tuning(t: Option<Tuning>) {
    TEST_TUNING.with(|c| c.set(t));
}

fn tuning(pool: &BufferPool) -> Tuning {
    #[cfg(test)]
    if let Some(t) = TEST_TUNING.with(|c| c.get()) {
        return t;
    }
    let frames = pool.instances.iter().map(|i| i.frames.len()).sum();
    Tuning::for_pool(frames, pool.cfg.page_size)
}

/// One valid group of a chunk.
struct Group {
    kind: u8,
    start: Lsn,
    end: Lsn,
    /// Where its payload lies in the chunk's bytes.
    payload: std::ops::Range<usize>,
}

/// Whole, valid groups read from the log, in LSN order.
struct Chunk {
    data: Vec<u8>,
    groups: Vec<Group>,
}

/// Reads the log from the checkpoint on and cuts it into chunks of whole,
/// checksummed groups; the first group that is not valid at its LSN (or
/// not complete within the log's capacity) ends the log.
struct LogReader<'a> {
    log: &'a Log,
    chunk: usize,
    /// Bytes read but not handed out (part of a group), from `buf_lsn`.
    buf: Vec<u8>,
    buf_lsn: Lsn,
    /// Nothing at or past this LSN is read: one lap of the log.
    limit: Lsn,
    /// Which groups belong to the history (the checkpoint's epoch).
    cp: format::Checkpoint,
    done: bool,
}

impl<'a> LogReader<'a> {
    fn new(log: &'a Log, start: Lsn, chunk: usize) -> Self {
        LogReader {
            log,
            chunk: chunk.max(GROUP_HDR),
            buf: Vec::new(),
            buf_lsn: start,
            limit: start.saturating_add(log.capacity()),
            cp: {
                let (epoch, epoch_lsn) = log.epoch();
                format::Checkpoint {
                    no: 0,
                    lsn: start,
                    epoch,
                    epoch_lsn,
                }
            },
            done: false,
        }
    }

    /// The next chunk; None at the end of the log.
    fn next_chunk(&mut self) -> Result<Option<Chunk>> {
        if self.done {
            return Ok(None);
        }
        let mut groups = Vec::new();
        let (mut off, mut lsn) = (0usize, self.buf_lsn);
        loop {
            let avail = self.buf.len() - off;
            let need = match self.buf.get(off..off + GROUP_HDR) {
                // Not a group written at this LSN (an earlier lap, zeros):
                // the end, whatever length it claims.
                Some(h) if !format::group_at(h, lsn) => {
                    self.done = true;
                    break;
                }
                Some(h) => GROUP_HDR + get_u32(h, 0) as usize,
                None => GROUP_HDR,
            };
            if avail < need {
                if !groups.is_empty() {
                    break; // hand these out first
                }
                let read_to = self.buf_lsn + self.buf.len() as u64;
                let room = self.limit.saturating_sub(read_to);
                if room == 0 {
                    self.done = true; // incomplete at the end of the lap
                    break;
                }
                let want = (need - avail)
                    .max(self.chunk.saturating_sub(self.buf.len()))
                    .min(usize::try_from(room).unwrap_or(usize::MAX));
                let old = self.buf.len();
                self.buf.resize(old + want, 0);
                self.log.read_into(read_to, &mut self.buf[old..])?;
                continue;
            }
            // A valid group of an earlier run past where this history
            // continued is stale: the end (`Checkpoint::admits`).
            let Some((h, _)) = format::decode_group(&self.buf[off..], lsn)
                .filter(|(h, _)| self.cp.admits(lsn, h.epoch))
            else {
                self.done = true;
                break;
            };
            let len = GROUP_HDR + h.len as usize;
            groups.push(Group {
                kind: h.kind,
                start: lsn,
                end: lsn + len as u64,
                payload: off + GROUP_HDR..off + len,
            });
            off += len;
            lsn += len as u64;
        }
        let tail = self.buf.split_off(off);
        let data = std::mem::replace(&mut self.buf, tail);
        self.buf_lsn = lsn;
        if self.done {
            self.buf = Vec::new();
        }
        Ok((!groups.is_empty()).then_some(Chunk { data, groups }))
    }
}

/// Where the apply gets its chunks.
enum Source<'a> {
    /// From the reader thread: chunks, then `Ok(None)` at the end; the
    /// log's first file, to name in an error.
    Thread(Receiver<Result<Option<Chunk>>>, &'a std::path::Path),
    /// Read on the applying thread.
    Inline(LogReader<'a>),
}

impl Source<'_> {
    fn next(&mut self) -> Result<Option<Chunk>> {
        match self {
            Source::Inline(r) => r.next_chunk(),
            Source::Thread(rx, path) => rx.recv().unwrap_or_else(|_| {
                Err(Error::io(
                    *path,
                    "read (recovery)",
                    std::io::Error::other(
                        "the log reader thread stopped before the end of the log",
                    ),
                ))
            }),
        }
    }
}

/// A commit whose record recovery found without its "applied" marker.
pub(crate) struct Unfinished {
    /// The commit's id: the LSN of its original record group.
    pub lsn: Lsn,
    /// Its logical record.
    pub record: Arc<[u8]>,
}

/// One page record of a batch, with its group's extent.
struct Rec<'a> {
    rec: PageRecordRef<'a>,
    start: Lsn,
    end: Lsn,
}

/// What the batches add up to.
struct State {
    rep: RecoveryReport,
    touched: HashSet<PageId>,
    /// Commits whose record was read and no marker yet, by id (their
    /// original record's LSN): the start of the newest group holding the
    /// record, and the record.
    commits: BTreeMap<Lsn, (Lsn, Arc<[u8]>)>,
}

/// For a read-only open: where the redo after the checkpoint of `log`
/// (just opened) starts and ends, if there is any: a database whose last
/// run did not close cleanly, which only a recovery (which writes) can
/// bring to its last commit. Reads the log; writes nothing.
pub(crate) fn pending_redo(log: &Log) -> Result<Option<(Lsn, Lsn)>> {
    let start = log.checkpoint_lsn();
    let mut reader = LogReader::new(log, start, 1 << 20);
    let mut end = start;
    while let Some(chunk) = reader.next_chunk()? {
        if let Some(g) = chunk.groups.last() {
            end = g.end;
        }
    }
    Ok((end > start).then_some((start, end)))
}

/// Replay `log` (just opened) into the pages of `pool` and return what it
/// did and the commits left to finish. `torn_pages_repaired` is what the
/// doublewrite repair did before, for the report.
pub(crate) fn recover(
    log: &Log,
    pool: &BufferPool,
    metrics: &Metrics,
    torn_pages_repaired: u64,
) -> Result<(RecoveryReport, Vec<Unfinished>)> {
    let t0 = Instant::now();
    // What a crashed run wrote and never synced is readable but not
    // durable: make it durable before anything rests on it.
    log.sync_files()?;
    pool.space.sync_every_file()?;
    let tuning = tuning(pool);
    let start = log.checkpoint_lsn();
    let mut st = State {
        rep: RecoveryReport {
            checkpoint_lsn: start,
            end_lsn: start,
            torn_pages_repaired,
            ..Default::default()
        },
        touched: HashSet::new(),
        commits: BTreeMap::new(),
    };
    // The reader may run this many chunks ahead: about one batch.
    let ahead = (tuning.batch_bytes / tuning.chunk.max(1)).max(2);
    std::thread::scope(|s| -> Result<()> {
        let mut source = Source::Inline(LogReader::new(log, start, tuning.chunk));
        if tuning.reader_thread {
            let (tx, rx) = sync_channel(ahead);
            let mut reader = LogReader::new(log, start, tuning.chunk);
            let spawned = std::thread::Builder::new()
                .name("keel-redo-reader".into())
                .spawn_scoped(s, move || loop {
                    let r = reader.next_chunk();
                    let last = !matches!(r, Ok(Some(_)));
                    // A send fails once the apply has stopped: end too.
                    if tx.send(r).is_err() || last {
                        break;
                    }
                });
            if spawned.is_ok() {
                source = Source::Thread(rx, log.first_path());
            }
        }
        // Dropped (with the receiver) before the scope joins the reader.
        replay(log, pool, &tuning, &mut source, &mut st)
    })?;
    let mut rep = st.rep;
    // Appends continue at the end of the valid log.
    log.reset_end(rep.end_lsn);
    rep.pages_touched = st.touched.len() as u64;
    // In flight from here on, before anything can checkpoint
    // ("Unfinished commits pin the checkpoint").
    let unfinished = st
        .commits
        .into_iter()
        .map(|(lsn, (pin, record))| {
            log.resume_commit(lsn, pin, record.clone());
            Unfinished { lsn, record }
        })
        .collect();
    rep.time_ms = t0.elapsed().as_millis() as u64;
    let m = metrics;
    Metrics::set(&m.recovery_redo_bytes, rep.end_lsn - rep.checkpoint_lsn);
    Metrics::set(&m.recovery_groups_applied, rep.groups);
    Metrics::set(&m.recovery_page_records_applied, rep.page_records_applied);
    Metrics::set(&m.recovery_pages_touched, rep.pages_touched);
    Metrics::set(&m.recovery_pages_read_ahead, rep.pages_read_ahead);
    Metrics::set(&m.recovery_torn_pages_repaired, rep.torn_pages_repaired);
    Metrics::set(&m.recovery_time_ms, rep.time_ms);
    Ok((rep, unfinished))
}

/// Cut the log from `source` into batches and apply each (module doc).
fn replay(
    log: &Log,
    pool: &BufferPool,
    tuning: &Tuning,
    source: &mut Source<'_>,
    st: &mut State,
) -> Result<()> {
    // Chunks not yet applied, each with the index of its next group.
    let mut pending: VecDeque<(Chunk, usize)> = VecDeque::new();
    let mut pending_bytes = 0usize;
    let mut exhausted = false;
    loop {
        while !exhausted && pending_bytes < tuning.batch_bytes {
            match source.next()? {
                Some(c) => {
                    pending_bytes += c.data.len();
                    pending.push_back((c, 0));
                }
                None => exhausted = true,
            }
        }
        if pending.is_empty() {
            return Ok(());
        }
        // Cut and decode one batch; `stop` is where the next one begins.
        let mut batch = Batch::default();
        let mut bytes = 0usize;
        let mut stop = (pending.len(), 0);
        'cut: for (k, (chunk, first)) in pending.iter().enumerate() {
            for (gi, g) in chunk.groups.iter().enumerate().skip(*first) {
                take_group(pool, chunk, g, &mut batch, st)?;
                bytes += (g.end - g.start) as usize;
                st.rep.end_lsn = g.end;
                if bytes >= tuning.batch_bytes || batch.missing.len() >= tuning.batch_pages {
                    stop = (k, gi + 1);
                    break 'cut;
                }
            }
        }
        // Every byte up to here is in the log files: pages written back
        // meanwhile satisfy the write-ahead rule (module doc).
        log.reset_end(st.rep.end_lsn);
        st.rep.batches += 1;
        apply_batch(pool, tuning, &mut batch, st)?;
        drop(batch);
        // Drop the chunks the batch used up.
        let (k, g) = stop;
        for _ in 0..k.min(pending.len()) {
            if let Some((c, _)) = pending.pop_front() {
                pending_bytes -= c.data.len();
            }
        }
        if let Some((c, first)) = pending.front_mut() {
            *first = g;
            if g >= c.groups.len() {
                pending_bytes -= c.data.len();
                pending.pop_front();
            }
        }
    }
}

/// The page records of a batch, by page, each page's in LSN order.
#[derive(Default)]
struct Batch<'c> {
    pages: BTreeMap<PageId, Vec<Rec<'c>>>,
    /// The pages that were not in the pool when the batch first met them:
    /// what the read-ahead reads (and what [`Tuning::batch_pages`] counts).
    missing: Vec<PageId>,
}

/// Take one group into the batch: its page records into `batch`, or its
/// effect on the commits waiting for their "applied" marker.
fn take_group<'c>(
    pool: &BufferPool,
    chunk: &'c Chunk,
    g: &Group,
    batch: &mut Batch<'c>,
    st: &mut State,
) -> Result<()> {
    st.rep.groups += 1;
    let payload = &chunk.data[g.payload.clone()];
    match g.kind {
        kind::MTR => {
            format::split_page_records(payload, pool.cfg.page_size, |rec| {
                let id = PageId::new(rec.space, rec.page_no);
                let recs = batch.pages.entry(id).or_insert_with(|| {
                    if !pool.contains(id) {
                        batch.missing.push(id);
                    }
                    Vec::new()
                });
                recs.push(Rec {
                    rec,
                    start: g.start,
                    end: g.end,
                });
            })
            .map_err(|m| Error::Corruption(format!("redo group ending at LSN {}: {m}", g.end)))?;
        }
        kind::TXN_COMMIT => {
            st.commits.insert(g.start, (g.start, Arc::from(payload)));
        }
        kind::TXN_RELOCATED => {
            let moved = super::inflight::decode_relocation(payload)
                .map_err(|m| Error::Corruption(format!("redo group at LSN {}: {m}", g.start)))?;
            for (lsn, record) in moved {
                st.commits.insert(lsn, (g.start, Arc::from(record)));
            }
        }
        kind::TXN_APPLIED => {
            let lsn = payload.try_into().map(u64::from_le_bytes).map_err(|_| {
                Error::Corruption(format!(
                    "applied marker at LSN {} has {} bytes",
                    g.start,
                    payload.len()
                ))
            })?;
            st.commits.remove(&lsn);
        }
        k => {
            return Err(Error::Corruption(format!(
                "unknown redo group kind {k} at LSN {}",
                g.start
            )))
        }
    }
    Ok(())
}

/// Apply a batch page by page, in page order, with its pages read ahead.
fn apply_batch(
    pool: &BufferPool,
    tuning: &Tuning,
    batch: &mut Batch<'_>,
    st: &mut State,
) -> Result<()> {
    // Read ahead the pages that were not in the pool, in the order the
    // apply takes them. (One that left meanwhile is read by the apply;
    // one that arrived costs the read-ahead a look.)
    let missing = &mut batch.missing;
    missing.sort_unstable();
    let batch = &batch.pages;
    let threads = tuning.read_threads.min(missing.len().saturating_sub(1));
    if threads == 0 {
        for (id, recs) in batch {
            apply_page(pool, *id, recs, st)?;
        }
        return Ok(());
    }
    let missing = &*missing;
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let read = AtomicU64::new(0);
    let r = std::thread::scope(|s| {
        for _ in 0..threads {
            // Without it, the pages are read by the apply alone.
            let _ = std::thread::Builder::new()
                .name("keel-redo-readahead".into())
                .spawn_scoped(s, || {
                    while !stop.load(Ordering::Relaxed) {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&id) = missing.get(i) else { break };
                        // An error leaves the page out: the apply meets it.
                        if let Ok(true) = pool.prefetch(id) {
                            read.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
        }
        let r = batch
            .iter()
            .try_for_each(|(id, recs)| apply_page(pool, *id, recs, st));
        stop.store(true, Ordering::Relaxed);
        r
    });
    st.rep.pages_read_ahead += read.load(Ordering::Relaxed);
    r
}

/// Apply one page's records of a batch, in LSN order, under one latch.
fn apply_page(pool: &BufferPool, id: PageId, recs: &[Rec<'_>], st: &mut State) -> Result<()> {
    let Some(first) = recs.first() else {
        return Ok(());
    };
    let mut page = match pool.write(id) {
        Ok(p) => p,
        // Never written before the crash: fine if this change creates it
        // (module doc), a lost write otherwise.
        Err(Error::UnwrittenPage { page, path, reason }) => {
            if !first.rec.zeroed {
                return Err(Error::CorruptPage {
                    page,
                    path,
                    reason: format!(
                        "the page was never written ({reason}), but the redo group ending at \
                         LSN {} changes it without creating it: a page write the last \
                         checkpoint relied on was lost. Only a copy in the doublewrite area \
                         (there is none) or the redo log from the page's creation could \
                         rebuild it; restore the database from a backup",
                        first.end
                    ),
                });
            }
            pool.create(id)?
        }
        Err(Error::CorruptPage { page, path, reason }) => {
            return Err(Error::CorruptPage {
                page,
                path,
                reason: format!(
                "{reason}; redo needs this page and the doublewrite area has no valid copy of it \
                     (a torn write with doublewrite off cannot be repaired)"
            ),
            })
        }
        Err(other) => return Err(other),
    };
    st.touched.insert(id);
    for r in recs {
        if page_lsn(&page) >= r.end {
            st.rep.page_records_skipped += 1;
            continue;
        }
        // Redo logs nothing: no before-image of the page is kept.
        format::apply_page_record_ref(page.unlogged_mut(), &r.rec);
        pool.mark_dirty(&mut page, r.start, r.end);
        st.rep.page_records_applied += 1;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(super) mod trust_tests;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use crate::config::Options;
    use crate::io::faulty::{CrashMode, FaultyFs};
    use crate::page::PageId;
    use crate::{Db, Error};

    fn opts() -> Options {
        Options {
            page_size: 4096,
            buffer_pool_size: 256 * 4096,
            data_files: 1,
            doublewrite: crate::DoublewriteMode::Off,
            ..Options::default()
        }
    }

    #[test]
    fn a_lost_page_is_reported_not_rebuilt_from_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFs::new());
        let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
        let t = db.create_table("t").unwrap();
        t.put(b"k", b"before").unwrap();
        let root = t.tree.root();
        // The root is written and checkpointed, then changed again.
        db.flush().unwrap();
        t.put(b"k", b"after").unwrap();
        drop(t);
        fs.crash(CrashMode::DropUnsynced);
        db.simulate_crash();
        // The page's image is lost: all zeros where it was.
        let (file, off) = crate::space::locate(root.page_no, 1, 4096);
        let path = dir.path().join(crate::space::data_file_name(file));
        fs.write_durable(&path, off, &[0u8; 4096]).unwrap();
        let err = Db::open_with_fs(dir.path(), opts(), Some(fs.clone()))
            .err()
            .unwrap();
        match &err {
            Error::CorruptPage { page, reason, .. } => {
                assert_eq!(*page, PageId::new(0, root.page_no));
                assert!(
                    reason.contains("never written") && reason.contains("lost"),
                    "{reason}"
                );
            }
            e => panic!("expected CorruptPage, got {e}"),
        }
    }

    #[test]
    fn a_corrupt_page_is_named_with_the_read_ahead_on() {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFs::new());
        let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
        let t = db.create_table("t").unwrap();
        let u = db.create_table("u").unwrap();
        t.put(b"k", b"before").unwrap();
        u.put(b"k", b"before").unwrap();
        let root = u.tree.root();
        db.flush().unwrap();
        t.put(b"k", b"after").unwrap();
        u.put(b"k", b"after").unwrap();
        drop((t, u));
        fs.crash(CrashMode::DropUnsynced);
        db.simulate_crash();
        // u's root is garbage (a checksum that does not match). It is the
        // last page of the batch, so the read-ahead most likely reads it
        // before the apply does; its error is dropped and the apply meets
        // it again, with the page and the file.
        let (file, off) = crate::space::locate(root.page_no, 1, 4096);
        let path = dir.path().join(crate::space::data_file_name(file));
        fs.write_durable(&path, off, &[0x5au8; 4096]).unwrap();
        super::set_test_tuning(Some(super::Tuning {
            read_threads: 4,
            ..super::Tuning::for_pool(256, 4096)
        }));
        let err = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).err();
        super::set_test_tuning(None);
        match err {
            Some(Error::CorruptPage {
                page,
                path: p,
                reason,
            }) => {
                assert_eq!(page, PageId::new(0, root.page_no));
                assert_eq!(p, path);
                assert!(reason.contains("redo needs this page"), "{reason}");
            }
            e => panic!("expected CorruptPage, got {e:?}"),
        }
    }

    /// A crashed database in `dir` (real files, nothing synced but all
    /// written): many records on a few hot pages, pages created and split
    /// after the checkpoint, pages written back at various LSNs (a small
    /// pool), and one commit whose group is larger than a test chunk.
    fn crashed_image(dir: &std::path::Path, o: &Options) {
        let db = Db::open(dir, o.clone()).unwrap();
        let t = db.create_table("t").unwrap();
        for i in 0..1500u32 {
            t.put(&i.to_be_bytes(), &[i as u8; 90]).unwrap();
        }
        db.flush().unwrap();
        // The cleaners' coordinator held at its tick for the workload: only
        // user threads write pages (from the LRU tail, when the pool has no
        // free frame), and the checkpoint stays where `flush` left it. Left
        // running, its once-a-second rounds moved the checkpoint as far as
        // the machine was slow (2,079 groups left to redo on a loaded CI
        // machine, against over 10,000 here).
        let hold = db.failpoint("cleaner.tick");
        assert!(
            hold.wait_held(std::time::Duration::from_secs(10)),
            "the coordinator never reached its tick"
        );
        let mut x = 0x9e37_79b9u32;
        for n in 0..6000u32 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            let k = if n % 3 == 0 { x % 1500 } else { x % 16 };
            if n % 97 == 0 {
                t.delete(&k.to_be_bytes()).unwrap();
            } else {
                t.put(&k.to_be_bytes(), &[n as u8; 90]).unwrap();
            }
        }
        let mut txn = db.begin();
        for i in 2000..2300u32 {
            txn.put(&t, &i.to_be_bytes(), &[3u8; 120]).unwrap();
        }
        txn.commit().unwrap();
        for i in 5000..5600u32 {
            t.put(&i.to_be_bytes(), &[9u8; 60]).unwrap();
        }
        drop(t);
        db.flush_log().unwrap();
        // Released just before the crash (stopping the cleaners waits for
        // the coordinator); a round it might start now writes at most
        // `io_capacity` pages.
        hold.release();
        db.simulate_crash();
    }

    fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }

    /// Redo the crashed image in `dir` with `tuning`; every page as the
    /// pool then has it (None: never written), the report and the
    /// unfinished commits.
    #[allow(clippy::type_complexity)]
    fn redo_with(
        dir: &std::path::Path,
        o: &Options,
        tuning: super::Tuning,
        pages: u32,
    ) -> (
        Vec<Option<Vec<u8>>>,
        super::RecoveryReport,
        Vec<(u64, Vec<u8>)>,
    ) {
        let (e, created) =
            crate::engine::Engine::open(dir, o.clone(), None, crate::btree::node::validate)
                .unwrap();
        assert!(!created);
        super::set_test_tuning(Some(tuning));
        let r = super::recover(&e.log, &e.pool, &e.metrics, 0);
        super::set_test_tuning(None);
        let (rep, unfinished) = r.unwrap();
        let images = (0..pages)
            .map(|n| match e.pool.read(PageId::new(e.space_id(), n)) {
                Ok(p) => Some(p.to_vec()),
                Err(Error::UnwrittenPage { .. }) => None,
                Err(err) => panic!("page {n}: {err}"),
            })
            .collect();
        let unfinished = unfinished
            .into_iter()
            .map(|u| (u.lsn, u.record.to_vec()))
            .collect();
        (images, rep, unfinished)
    }

    #[test]
    fn batched_replay_with_read_ahead_leaves_every_page_as_replay_in_log_order() {
        // Written with a policy that flushes nothing but the LRU tail of a
        // small pool: cold pages reach the disk with changes after the
        // checkpoint (their records are skipped at redo), while the hot
        // ones stay dirty and hold the checkpoint back. Redone with a pool
        // smaller than the pages the redo touches.
        let mut w = Options {
            page_size: 4096,
            buffer_pool_size: 64 * 4096,
            buffer_pool_instances: 1,
            data_files: 2,
            flush_method: "nosync".parse().unwrap(),
            log_file_size: 8 << 20,
            log_files_in_group: 2,
            max_dirty_pages_pct: 99.0,
            max_dirty_pages_pct_lwm: 0.0,
            adaptive_flushing: false,
            io_capacity: 100,
            ..Options::default()
        };
        w.set("flush_policy", "classic").unwrap();
        let o = Options {
            buffer_pool_size: 96 * 4096,
            ..w.clone()
        };
        let src = tempfile::tempdir().unwrap();
        crashed_image(src.path(), &w);
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        copy_dir(src.path(), a.path());
        copy_dir(src.path(), b.path());
        // The reference: one group per batch, in LSN order, the log read
        // on the applying thread, no read-ahead: the replay before batching.
        let one_by_one = super::Tuning {
            chunk: 1 << 20,
            batch_bytes: 1,
            batch_pages: 1,
            read_threads: 0,
            reader_thread: false,
        };
        // Chunks smaller than many groups (groups straddle chunks, the big
        // commit is read whole), batches cut after a handful of pages not
        // in the pool (so a page's records fall in several batches, and
        // batches end between the groups of one page), read-ahead threads
        // racing the apply, and a pool of 96 frames that must write pages
        // back while the redo goes on.
        let batched = super::Tuning {
            chunk: 4096,
            batch_bytes: 64 << 10,
            batch_pages: 5,
            read_threads: 3,
            reader_thread: true,
        };
        let pages = 400;
        let (want, want_rep, want_unf) = redo_with(a.path(), &o, one_by_one, pages);
        let (got, rep, unf) = redo_with(b.path(), &o, batched, pages);
        assert!(want_rep.groups > 10_000, "{want_rep}");
        assert!(want_rep.page_records_skipped > 0, "{want_rep}");
        assert!(
            want.iter().filter(|p| p.is_some()).count() > 96,
            "more pages than frames"
        );
        assert!(
            want.iter().any(|p| p.is_none()),
            "the scan reaches unwritten pages"
        );
        assert_eq!(want_rep.batches, want_rep.groups, "{want_rep}");
        assert!(rep.batches > 10 && rep.batches < rep.groups / 10, "{rep}");
        // (Whether the read-ahead or the apply reads a page first is a race
        // by design; the pages must come out the same either way.)
        for (n, (w, g)) in want.iter().zip(&got).enumerate() {
            assert!(w == g, "page {n} differs after batched replay");
        }
        assert_eq!(
            (
                rep.end_lsn,
                rep.groups,
                rep.page_records_applied,
                rep.page_records_skipped
            ),
            (
                want_rep.end_lsn,
                want_rep.groups,
                want_rep.page_records_applied,
                want_rep.page_records_skipped
            )
        );
        assert_eq!(rep.pages_touched, want_rep.pages_touched);
        assert_eq!(unf, want_unf);
    }

    #[test]
    fn a_crash_right_after_recovery_replays_the_same_log_again() {
        // The open after a crash leaves the replayed pages dirty for the
        // cleaners (no sharp checkpoint): a second crash before they are
        // written must find the same log and the same rows.
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFs::new());
        let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
        let t = db.create_table("t").unwrap();
        db.flush().unwrap();
        for i in 0..2000u32 {
            t.put(&i.to_be_bytes(), &[i as u8; 50]).unwrap();
        }
        drop(t);
        db.flush_log().unwrap();
        fs.crash(CrashMode::DropUnsynced);
        db.simulate_crash();
        let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
        let first = db.metrics().get("recovery_redo_bytes").unwrap();
        assert!(first > 100_000, "{first}");
        fs.crash(CrashMode::DropUnsynced);
        db.simulate_crash();
        let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
        let t = db.table("t").unwrap();
        for i in 0..2000u32 {
            assert_eq!(
                t.get(&i.to_be_bytes()).unwrap(),
                Some(vec![i as u8; 50]),
                "row {i}"
            );
        }
        t.check().unwrap();
        drop(t);
        db.close().unwrap();
    }

    #[test]
    fn prefetch_reads_a_page_once_and_leaves_a_bad_one_out() {
        let dir = tempfile::tempdir().unwrap();
        let o = Options {
            flush_method: "nosync".parse().unwrap(),
            ..opts()
        };
        let db = Db::open(dir.path(), o.clone()).unwrap();
        let t = db.create_table("t").unwrap();
        t.put(b"k", b"v").unwrap();
        let root = PageId::new(0, t.tree.root().page_no);
        drop(t);
        db.close().unwrap();
        let (e, _) =
            crate::engine::Engine::open(dir.path(), o, None, crate::btree::node::validate).unwrap();
        let pool = &e.pool;
        assert!(!pool.contains(root));
        assert!(pool.prefetch(root).unwrap(), "read from disk");
        assert!(pool.contains(root));
        assert!(!pool.prefetch(root).unwrap(), "already in the pool");
        // Past the end of the file: an error, and nothing left in the pool.
        let far = PageId::new(0, 1 << 20);
        assert!(matches!(
            pool.prefetch(far),
            Err(Error::UnwrittenPage { .. })
        ));
        assert!(!pool.contains(far));
        assert_eq!(crate::page::page_id(&pool.read(root).unwrap()), root);
    }

    #[test]
    fn a_page_created_after_the_checkpoint_is_rebuilt_from_its_redo() {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFs::new());
        let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
        db.flush().unwrap();
        let t = db.create_table("t").unwrap();
        t.put(b"k", b"v").unwrap();
        drop(t);
        db.flush_log().unwrap();
        fs.crash(CrashMode::DropUnsynced);
        db.simulate_crash();
        let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
        let t = db.table("t").unwrap();
        assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        t.check().unwrap();
    }
}
