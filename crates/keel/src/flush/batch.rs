//! The batch writer shared by every kind of flush (LRU batch, flush-list
//! batch, single page, shutdown).
//!
//! A batch claims each page through the pool (shared latch, `try_read`
//! only: a page a user thread holds exclusively is skipped, never waited
//! for, so a flusher cannot deadlock with a user thread), copies it into one
//! aligned buffer in (file, offset) order with a fresh checksum and drops
//! the latch, and writes the copies back chunk by chunk; once a chunk's
//! in-place writes have returned, its pages are released: clean, or, if a
//! user thread changed one after it was copied, dirty again from that
//! change (see `buffer::claim`). A page is not evicted while it is written
//! (it is dirty), no second flusher writes it, and nobody waits for the
//! I/O: the latch is held only to copy the page. Pages are claimed
//! [`CLAIM_GROUP`] at a time, so that a batch holds few frames at once.
//!
//! # Pipelining
//! A flush call keeps its page writes in flight across its groups: the
//! in-place writes go to a crew of writer threads that stands for the
//! whole call ([`crew`], one thread per write in flight: the policy's
//! queue depth, or `write_io_threads` one stream per file), and while the
//! crew writes chunk *k* the calling thread claims, copies, checks and
//! (with doublewrite) copies to its area chunk *k + 1*; then it waits for
//! chunk *k*, releases its pages and syncs (steps 6–7; one sync for two
//! chunks). At most two chunks are in flight per call, so a call holds at
//! most two chunks' claims and copies, and at most three doublewrite
//! areas (see [`MAX_UNSYNCED_AREAS`]); with doublewrite the next chunk's
//! area is taken only if one is free (`try_claim`), otherwise chunk *k* is
//! finished and the areas waiting for their sync are synced and freed
//! first, so a flusher never waits for an area while holding one. A call
//! that ends by a panic syncs the areas waiting for their sync before it
//! gives them back, or keeps them for recovery if that fails. (Before, each group
//! was written by threads spawned for it and joined: the depth fell to
//! zero between groups, and a flush at 16 and 32 writes in flight reached
//! 43 % and 53 % of the device's random-write IOPS on `sata-ssd`.)
//!
//! A failure stops the call from starting more chunks: the claims not yet
//! started are released dirty, the chunk in flight is finished as its own
//! writes went (below), and the first error is returned.
//!
//! Except for single-page flushes, a batch also takes the dirty neighbors of
//! each page it writes (`flush_neighbors`, chosen in [`super::neighbors`]),
//! claimed exactly like requested pages.
//!
//! # One batch, step by step (what each failure leaves behind)
//!
//! 1. **Copy.** Every page is copied, sorted by (file, offset), with a
//!    fresh checksum, and unlatched.
//! 2. **Write-ahead rule.** The redo of every change in the copies (up to
//!    each page's newest change when it was claimed) is made durable,
//!    holding no latch, then checked in every build: a copy whose page LSN
//!    is past the durable end of the log fails the batch before anything
//!    is written.
//! 3. **Allocation.** The data files are extended (allocated, not sparse)
//!    to cover the batch. A full disk fails here, before anything is
//!    written: the pages that do not fit stay dirty for a later flush to
//!    retry, the others are written, and the batch reports the error.
//!
//! Then, chunk by chunk (a doublewrite area's worth of pages):
//!
//! 4. **Doublewrite** (when on): the chunk is written to a claimed area and
//!    synced. A failure, of the write or of the sync, leaves the in-place
//!    pages untouched and nothing depending on the area: the area is
//!    freed, the pages stay dirty, and the caller gets
//!    `Error::WriteBackFailing`; nothing is poisoned (a failed fsync of the
//!    area lost nothing that was relied on). No area to be had (every one
//!    set aside after failed writes, or none freed in time: see
//!    `doublewrite::areas`) ends the call the same way.
//! 5. **In place.** One write per contiguous run, handed to the crew
//!    (several in flight; see "Pipelining"). With doublewrite, a failure
//!    (EIO; ENOSPC on a copy-on-write file system, which the allocation of
//!    step 3 cannot rule out) may have left a torn page whose only good
//!    copy is in the area: the chunk is *held*, its area set aside and its
//!    pages claimed and dirty, and its writes are retried until the device
//!    takes them ([`held`]); nothing is poisoned. Without doublewrite there
//!    is nothing to protect: the pages stay dirty and are retried later.
//!    Either way the caller gets `Error::WriteBackFailing`.
//! 6. The chunk's pages are released (clean, or dirty from a change made
//!    after the copy): their writes have
//!    returned, so a later read (after an eviction) sees them, and no
//!    checkpoint can pass them unsynced, since a checkpoint syncs the data
//!    files after it reads the oldest modification and before it writes
//!    its record ([`Tablespace::sync`] never skips a write that completed).
//! 7. **Sync.** With doublewrite the data files are synced before the area
//!    is reused; a failed sync poisons the data files (no checkpoint
//!    passes them, so recovery replays these pages from the log) and the
//!    area is not given back. Without doublewrite the checkpoint's sync
//!    covers the writes. One sync covers the chunks of a call two at a
//!    time: a chunk whose writes have returned keeps its area, unsynced,
//!    until the next chunk's writes have returned too (at most
//!    [`MAX_UNSYNCED_AREAS`] such areas), or until the call needs an area
//!    and none is free, or ends. Each sync reaches the device as a cache
//!    flush per data file written, and on a disk limited in operations a
//!    second it costs as much as a page write: per chunk of 128 pages in
//!    four files, 8 of the 140 operations went to these syncs (with the
//!    journal-less file system of the development VM, an inode write per
//!    file as well). Holding an area longer changes nothing for recovery:
//!    a page released after its write may be written again from another
//!    area before this one's sync, and recovery takes the newest copy of
//!    a page (areas carry a sequence number). A call never waits for an
//!    area while it holds unsynced ones: it syncs and frees them first.
//!
//! # One batch across instances
//! Steps 4 and 7 cost the same for a chunk of 10 pages as for one of 128:
//! a doublewrite write and sync, a data-file sync. A policy that writes
//! the oldest pages of every instance a few at a time (`steady`, which
//! checkpoints after every batch) paid them per instance: on a disk
//! throttled to 1,000 write IOPS with 8 instances its batches held 16
//! pages, and a third of the device's operations went to syncs and
//! checkpoints. [`WriteBack::flush_lists_counted`] writes the lists of
//! several instances as one call: a group is written only once it holds
//! [`CLAIM_GROUP`] pages or the call ends, whatever instances its pages
//! come from (a claim names its instance, so releasing and holding work
//! as before). While a group forms, its claims hold shared latches on the
//! pages of the instances gathered so far; no claim after the call's
//! first waits for a latch, so a group is never held up behind a user
//! thread while it holds those latches.
//!
//! # Gaps
//! On a device that charges a write much more than the pages it carries
//! (a volume limited in operations a second), two runs of dirty pages a
//! few pages apart in one file cost two writes where one would do. When
//! the policy asks (`FlushTargets::gap_pages`: `steady` while it writes
//! runs, never `classic`), a group, once sorted, takes the pages of each
//! gap of at most that many pages between two of its pages of one extent
//! ([`super::neighbors::gaps_to_fill`]), if every page of the gap is
//! cached and can be claimed at once (`BufferPool::claim_clean`, or for a
//! page dirtied since the walk for neighbors passed it, the usual claim,
//! as a neighbor; neither waits), and writes them with the rest: one run
//! instead of two. A clean page of a gap goes through every step like the
//! others, its doublewrite copy too (its image is the one already on
//! disk, since a clean page has no change the disk lacks, so a torn write
//! of it leaves the same bytes; the copy costs a page of the area and
//! keeps one path for every page), but its write retires no change: it is
//! counted in `buffer_flush_gap_pages`, not in `buffer_pages_written`
//! (which the policies read as what the flusher retires), and its release
//! leaves the flush list alone. A writer may change it as soon as it is
//! copied, as any page; what that does is in `buffer::claim`, "A clean
//! page written to fill a gap". Held for retry after a failed write
//! ([`held`]), it keeps its flag like the others.

mod crew;
mod gather;
mod held;

pub(crate) use held::HeldWrites;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::doublewrite::AreaGuard;
use super::writeback::WriteBack;
use crate::buffer::{BufferPool, Claim};
use crate::error::{Error, Result};
use crate::io::AlignedBuf;
use crate::metrics::Metrics;
use crate::page::{page_lsn, page_type, stamp_checksum, Lsn, PageId, PageType};
use crew::{CloseOnDrop, Crew, Unit};

/// Why a batch is written (selects the counter it is charged to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushKind {
    /// LRU batch flushing by a page cleaner.
    Lru,
    /// Flush-list flushing by a page cleaner for the checkpoint age
    /// (adaptive flushing).
    Adaptive,
    /// Flush-list flushing by a page cleaner for any other reason (idle
    /// flushing, dirty-page percentage).
    Background,
    /// A user thread writing one page to free a frame.
    Single,
    /// Shutdown or an explicit checkpoint.
    All,
    /// Sync flushing: the checkpoint age passed the sync mark.
    Sync,
}

/// Pages claimed at once: a batch is written this many pages at a time,
/// each group claimed only when its turn comes (plus, with neighbors, the
/// neighbors of its last page), so that a batch holds a bounded set of
/// frames and buffer. Four doublewrite areas' worth by default, the
/// largest merged flush-list batch (`policy::MERGED_BATCH`, checked where
/// the cleaner uses both): one log sync for the write-ahead rule per
/// batch, and one data-file sync for every two chunks (step 7). (While
/// claims held the page latch through the I/O this was 64, to bound how
/// long a writer of a hot page waited; the latch is now held only for
/// the copy. While each group's writes were joined before the next group
/// was claimed, a deep device took 8 pages per write in flight; with the
/// pipeline, a group of 128 kept 32 writes busy while the next was
/// prepared. At 128, `steady`'s
/// batches of 256 pages made two groups, with a log sync each, and often
/// three chunks, the group that passed 128 pages split in two: on a disk
/// throttled to 300 write IOPS, 14 cache flushes a batch where 8 do.
/// Groups of 256 were as long as the longest batch until `steady` wrote
/// batches of up to 512 pages on such a disk.)
pub(crate) const CLAIM_GROUP: usize = 512;

/// Areas a flush call may hold after their chunk's writes returned, not
/// yet synced (module doc, step 7): with one, a sync covers two chunks.
/// A call then holds at most three areas (this one, the chunk in flight,
/// the chunk being started); the pool has two per page cleaner and two
/// more, so the other cleaners' two each and a spare stay free.
pub(crate) const MAX_UNSYNCED_AREAS: usize = 1;

struct Item<'a> {
    claim: Claim<'a>,
    file: usize,
    offset: u64,
    /// Added only because it neighbors a requested page.
    neighbor: bool,
}

impl Item<'_> {
    /// (space, page number), the order [`neighbors::gaps_to_fill`] reads.
    fn page(&self) -> (u32, u32) {
        (self.claim.id.space, self.claim.id.page_no)
    }
}

/// Pages a batch has written so far.
#[derive(Default)]
struct Written {
    pages: usize,
    neighbors: usize,
    /// Of `pages`, undo pages and the undo directory.
    undo: usize,
    /// Clean pages written to fill gaps (not in `pages`).
    gap: usize,
}

impl WriteBack {
    /// Write the dirty pages among `fids` of instance `inst` and, unless
    /// `kind` is [`FlushKind::Single`], their dirty neighbors as
    /// `flush_neighbors` asks; returns how many pages were written. Pages
    /// that are clean, latched exclusively or being written by another
    /// flusher are skipped.
    pub(crate) fn flush_frames(
        &self,
        pool: &BufferPool,
        inst: usize,
        fids: &[u32],
        kind: FlushKind,
    ) -> Result<usize> {
        self.flush_frames_counted(pool, inst, fids, kind)
            .map(|(pages, _)| pages)
    }

    /// As [`flush_frames`](WriteBack::flush_frames), and also how many of
    /// the pages written were neighbors: `(pages, neighbors)`.
    pub(crate) fn flush_frames_counted(
        &self,
        pool: &BufferPool,
        inst: usize,
        fids: &[u32],
        kind: FlushKind,
    ) -> Result<(usize, usize)> {
        self.flush_lists_counted(pool, &[(inst, fids)], kind)
    }

    /// As [`flush_frames_counted`](WriteBack::flush_frames_counted) for
    /// the frames of several instances, `(instance, frames)`, written as
    /// one batch: their pages share doublewrite areas, data-file syncs and
    /// the caller's checkpoint (module doc, "One batch across instances").
    /// Only the first list's first page may wait for a latch.
    pub(crate) fn flush_lists_counted(
        &self,
        pool: &BufferPool,
        lists: &[(usize, &[u32])],
        kind: FlushKind,
    ) -> Result<(usize, usize)> {
        // Held writes first: while they still fail, nothing new is
        // started (it would only set another doublewrite area aside).
        self.retry_held(pool, false)?;
        let total: usize = lists.iter().map(|(_, fids)| fids.len()).sum();
        if total == 0 {
            return Ok((0, 0));
        }
        let (streams, shared) = self.streams();
        let crew = Crew::new(&self.space, streams.min(total), shared);
        let m = &self.metrics;
        let pending = match kind {
            FlushKind::Lru => &m.buffer_pending_writes_lru,
            FlushKind::Single => &m.buffer_pending_writes_single_page,
            _ => &m.buffer_pending_writes_flush_list,
        };
        let (done, groups, r) = std::thread::scope(|s| {
            let writers = crew.writers();
            if writers > 1 {
                for t in 0..writers {
                    let crew = &crew;
                    s.spawn(move || crew.work(t));
                }
            }
            let _close = CloseOnDrop(&crew);
            let mut p = Pipeline {
                wb: self,
                pool,
                crew: &crew,
                inline: writers <= 1,
                in_flight: None,
                done: Written::default(),
                groups: 0,
                err: None,
                pending,
                outstanding: 0,
                staged: Vec::new(),
                unsynced: Vec::new(),
                kind,
                group_newest: 0,
            };
            for (k, &(inst, fids)) in lists.iter().enumerate() {
                if !self.gather(&mut p, inst, fids, kind, k == 0) {
                    break;
                }
            }
            p.finish()
        });
        let m = &self.metrics;
        let n = done.pages as u64;
        Metrics::add(&m.buffer_pages_written, n);
        Metrics::add(&m.buffer_flush_batches, groups);
        Metrics::add(&m.buffer_flush_neighbor_total_pages, done.neighbors as u64);
        Metrics::add(&m.buffer_flush_undo_pages_written, done.undo as u64);
        Metrics::add(&m.buffer_flush_gap_pages, done.gap as u64);
        let counter = match kind {
            FlushKind::Lru => &m.buffer_LRU_batch_flush_total_pages,
            FlushKind::Adaptive => &m.buffer_flush_adaptive_total_pages,
            FlushKind::Background | FlushKind::All => &m.buffer_flush_background_total_pages,
            FlushKind::Single => &m.buffer_LRU_single_flush_total_pages,
            FlushKind::Sync => &m.buffer_flush_sync_total_pages,
        };
        Metrics::add(counter, n);
        r.map(|()| (done.pages, done.neighbors))
    }

    /// Step 1: copy every page (sorted) into one buffer with a fresh
    /// checksum, and drop its latch: from here on user threads may change
    /// it (see `buffer::claim`).
    fn copy_and_unlatch(&self, items: &mut [Item<'_>]) -> AlignedBuf {
        let ps = self.space.page_size();
        let mut buf = AlignedBuf::new(ps * items.len());
        for (k, it) in items.iter_mut().enumerate() {
            let dst = &mut buf[k * ps..(k + 1) * ps];
            let Some(image) = it.claim.image() else {
                unreachable!("a claim is latched until its page is copied, once");
            };
            dst.copy_from_slice(image);
            it.claim.unlatch();
            debug_assert!(
                page_lsn(dst) >= it.claim.oldest,
                "page LSN older than its oldest change"
            );
            stamp_checksum(dst);
        }
        buf
    }

    /// Step 2: the redo of every change in the batch must be durable before
    /// any of its pages reaches the data files. Checked in every build.
    /// `group_newest` is the newest change of the group `items` belong
    /// to: the whole group's redo is made durable at once (its pages were
    /// all copied before the first chunk's I/O), so one log sync covers
    /// every chunk (a sync per chunk cost a flush and a log write each).
    fn check_wal(&self, items: &[Item<'_>], copies: &[u8], group_newest: Lsn) -> Result<()> {
        self.wal.flush_up_to(group_newest)?;
        let durable = self.wal.flushed_lsn();
        let ps = self.space.page_size();
        for (it, copy) in items.iter().zip(copies.chunks_exact(ps)) {
            let lsn = page_lsn(copy);
            if lsn > durable {
                return Err(Error::Corruption(format!(
                    "write-ahead rule violated: page {} has page LSN {lsn} but the redo log \
                     is durable only up to LSN {durable}; the batch was not written",
                    it.claim.id
                )));
            }
        }
        Ok(())
    }

    /// Step 3: extend the files to cover `items` (sorted, copied to `buf`
    /// in that order); the pages that do not fit are released dirty, their
    /// copies dropped from `buf` (the rest moved up to stay in order), and
    /// the first such error returned.
    fn allocate<'a>(
        &self,
        pool: &BufferPool,
        items: Vec<Item<'a>>,
        buf: &mut AlignedBuf,
    ) -> (Vec<Item<'a>>, Option<Error>) {
        let ps = self.space.page_size();
        let mut err = None;
        let mut failed_file = None;
        let mut kept = Vec::with_capacity(items.len());
        for (k, it) in items.into_iter().enumerate() {
            // One failure makes every later page of that file fail too.
            if failed_file == Some(it.file) {
                pool.release_unwritten(it.claim);
                continue;
            }
            match self.space.allocate(it.file, it.offset + ps as u64) {
                Ok(()) => {
                    let j = kept.len();
                    if j != k {
                        buf.copy_within(k * ps..(k + 1) * ps, j * ps);
                    }
                    kept.push(it);
                }
                Err(e) => {
                    failed_file = Some(it.file);
                    err.get_or_insert(e);
                    pool.release_unwritten(it.claim);
                }
            }
        }
        (kept, err)
    }

    /// Step 7: sync the data files, then free the doublewrite areas of the
    /// chunks the sync covers.
    fn sync_chunks(&self, areas: Vec<AreaGuard<'_>>) -> Result<()> {
        if areas.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.space.sync() {
            // The sync poisoned the data files; the copies stay for recovery.
            areas.into_iter().for_each(AreaGuard::keep_forever);
            return Err(e);
        }
        drop(areas);
        Ok(())
    }
}

/// A chunk whose in-place writes were handed to the crew.
struct InFlight<'w, 'a> {
    items: Vec<Item<'a>>,
    unit: Arc<Unit>,
    /// The copies the crew writes (a held chunk keeps them for its retry).
    copies: Arc<AlignedBuf>,
    area: Option<AreaGuard<'w>>,
}

/// The chunks of one flush call, each prepared while the one before is
/// written (module doc, "Pipelining").
struct Pipeline<'w, 'a, 'c> {
    wb: &'w WriteBack,
    pool: &'a BufferPool,
    crew: &'c Crew<'w>,
    /// No writer threads: the producer writes each chunk itself.
    inline: bool,
    in_flight: Option<InFlight<'w, 'a>>,
    done: Written,
    groups: u64,
    /// The first failure: nothing more is started after it.
    err: Option<Error>,
    /// The pending-writes gauge of this call's kind: raised by the pages
    /// of each group handed over, lowered as they are written or given
    /// back, and by whatever is left when the call ends (pages a chunk
    /// gave back on its own, e.g. for want of room), so it never drifts.
    pending: &'w AtomicU64,
    /// What this call has added to `pending` and not yet taken off.
    outstanding: u64,
    /// Areas of chunks whose writes returned, not yet synced (module doc,
    /// step 7).
    unsynced: Vec<AreaGuard<'w>>,
    /// Why the call writes (a single-page flush fills no gap).
    kind: FlushKind,
    /// The newest change of the group being written: one log sync covers
    /// all its chunks.
    group_newest: Lsn,
    /// Claimed pages not yet written, fewer than [`CLAIM_GROUP`]: a group
    /// is written once it is full or the call ends, so that the short
    /// lists of several instances make one group (module doc, "One batch
    /// across instances").
    staged: Vec<Item<'a>>,
}

impl<'w, 'a> Pipeline<'w, 'a, '_> {
    /// Add claimed pages to the group being formed, and write the group
    /// once it holds [`CLAIM_GROUP`] pages. False (every claim released)
    /// once the call has failed.
    fn push(&mut self, items: Vec<Item<'a>>) -> bool {
        self.staged.extend(items);
        if self.staged.len() < CLAIM_GROUP {
            return self.err.is_none();
        }
        let group = std::mem::take(&mut self.staged);
        self.write_group(group)
    }

    /// Write a group of claimed pages: sorted, then a doublewrite area's
    /// worth at a time. False (every claim released) once the call has
    /// failed.
    fn write_group(&mut self, mut items: Vec<Item<'a>>) -> bool {
        if items.is_empty() {
            return self.err.is_none();
        }
        items.sort_by_key(|i| (i.file, i.offset));
        self.wb.fill_gaps(self.pool, &mut items, self.kind);
        self.pending
            .fetch_add(items.len() as u64, Ordering::Relaxed);
        self.outstanding += items.len() as u64;
        self.groups += 1;
        self.group_newest = items.iter().map(|i| i.claim.newest).max().unwrap_or(0);
        let per = self
            .wb
            .dblwr
            .as_ref()
            .map_or(usize::MAX, |d| d.pages_per_area());
        // Step 1 for the whole group before any chunk's I/O: every page is
        // copied and unlatched now. A chunk waits for the writes, the
        // doublewrite copy and the sync of the chunks before it; had its
        // pages stayed latched until its turn, a writer wanting one would
        // have waited for all that I/O (with areas of 8 pages, the last
        // chunk of a group of 128 waited for 15 doublewrite syncs: p99.9
        // latency 32 ms against 12 ms with areas of 128 on `waves-80`).
        let mut chunks = Vec::with_capacity(items.len().div_ceil(per.min(items.len())));
        while !items.is_empty() {
            let rest = items.split_off(per.min(items.len()));
            let mut chunk = std::mem::replace(&mut items, rest);
            let buf = self.wb.copy_and_unlatch(&mut chunk);
            chunks.push((chunk, buf));
        }
        let mut chunks = chunks.into_iter();
        for (chunk, buf) in chunks.by_ref() {
            if self.err.is_some() {
                self.release_unwritten(chunk);
                break;
            }
            if let Err(e) = self.start(chunk, buf) {
                self.err.get_or_insert(e);
            }
        }
        chunks.for_each(|(chunk, _)| self.release_unwritten(chunk));
        self.err.is_none()
    }

    /// Steps 2–4 for one chunk, copied to `buf` (step 1), then hand its
    /// in-place writes to the crew and retire the chunk before it. An
    /// error means the chunk's claims were released unwritten.
    fn start(&mut self, chunk: Vec<Item<'a>>, mut buf: AlignedBuf) -> Result<()> {
        let wb = self.wb;
        if let Err(e) = wb.check_wal(&chunk, &buf, self.group_newest) {
            self.release_unwritten(chunk);
            return Err(e);
        }
        let (chunk, no_room) = wb.allocate(self.pool, chunk, &mut buf);
        if let Some(e) = no_room {
            self.err.get_or_insert(e);
        }
        if chunk.is_empty() {
            return Ok(());
        }
        if let Err(e) = wb.space.check_poisoned() {
            self.release_unwritten(chunk);
            return Err(e);
        }
        let area = match &wb.dblwr {
            None => None,
            Some(d) => {
                // Another area only if one is free: otherwise the chunk
                // before and those waiting for their sync give theirs back
                // first (never wait for an area while holding one), unless
                // a write or sync failed: then this chunk is not tried (it
                // would only set an area aside).
                let claimed = match d.try_claim() {
                    Some(a) => Ok(a),
                    None => {
                        self.retire();
                        self.sync_unsynced();
                        self.err.take().map_or_else(|| d.claim(), Err)
                    }
                };
                let mut area = match claimed {
                    Ok(a) => a,
                    Err(e) => {
                        self.release_unwritten(chunk);
                        return Err(e);
                    }
                };
                let ps = wb.space.page_size();
                let pages: Vec<(PageId, &[u8])> = chunk
                    .iter()
                    .enumerate()
                    .map(|(k, it)| (it.claim.id, &buf[k * ps..(k + 1) * ps]))
                    .collect();
                // Timed for the policy only when no in-place write is in
                // flight: none of this call's (the chunk before, handed to
                // the crew, may not have reached the device yet) and none
                // of another thread's, as far as the gauge shows (see
                // `policy::steady::merge`, "The measure").
                let alone = self.in_flight.is_none() && wb.space.writes_in_flight() == 0;
                if let Err(e) = area.write_and_sync(&pages, alone) {
                    let e = wb.copy_failed(chunk.len(), e);
                    self.release_unwritten(chunk);
                    return Err(e);
                }
                Some(area)
            }
        };
        let places = chunk.iter().map(|i| (i.file, i.offset));
        let copies = Arc::new(buf);
        let unit = self.crew.submit(places, Arc::clone(&copies), self.inline);
        self.retire();
        self.in_flight = Some(InFlight {
            items: chunk,
            unit,
            copies,
            area,
        });
        Ok(())
    }

    /// Steps 5–7 for the chunk in flight, if any: wait for its writes,
    /// release its pages, sync. A failure is recorded.
    fn retire(&mut self) {
        let Some(f) = self.in_flight.take() else {
            return;
        };
        let pool = self.pool;
        let r = match f.unit.wait() {
            Err(e) => match f.area {
                Some(area) => {
                    self.left(f.items.len());
                    Err(self.wb.hold(f.items, f.copies, area, e))
                }
                None => {
                    let e = self.wb.unheld_failure(&f.items, e);
                    self.release_unwritten(f.items);
                    Err(e)
                }
            },
            Ok(()) => {
                // Written (not yet synced): released before the sync, so
                // that nobody waits for it (step 6 of the module doc).
                self.left(f.items.len());
                let ps = self.wb.space.page_size();
                for (it, copy) in f.items.into_iter().zip(f.copies.chunks_exact(ps)) {
                    if it.claim.is_clean() {
                        self.done.gap += 1;
                        pool.release_written(it.claim);
                        continue;
                    }
                    self.done.pages += 1;
                    self.done.neighbors += usize::from(it.neighbor);
                    self.done.undo += usize::from(matches!(
                        page_type(copy),
                        Some(PageType::Undo | PageType::UndoDir)
                    ));
                    pool.release_written(it.claim);
                }
                if let Some(area) = f.area {
                    self.unsynced.push(area);
                }
                if self.unsynced.len() > MAX_UNSYNCED_AREAS {
                    self.sync_unsynced();
                }
                Ok(())
            }
        };
        if let Err(e) = r {
            self.err.get_or_insert(e);
        }
    }

    /// Step 7 for the chunks whose writes returned: one sync, then their
    /// areas are free. A failure is recorded.
    fn sync_unsynced(&mut self) {
        let areas = std::mem::take(&mut self.unsynced);
        if let Err(e) = self.wb.sync_chunks(areas) {
            self.err.get_or_insert(e);
        }
    }

    fn release_unwritten(&mut self, items: Vec<Item<'a>>) {
        self.left(items.len());
        items
            .into_iter()
            .for_each(|it| self.pool.release_unwritten(it.claim));
    }

    /// `n` pages of this call are no longer pending.
    fn left(&mut self, n: usize) {
        let n = (n as u64).min(self.outstanding);
        self.pending.fetch_sub(n, Ordering::Relaxed);
        self.outstanding -= n;
    }

    /// Retire the last chunk: what was written, the groups, the first
    /// failure.
    fn finish(mut self) -> (Written, u64, Result<()>) {
        let group = std::mem::take(&mut self.staged);
        self.write_group(group);
        self.retire();
        self.sync_unsynced();
        self.left(usize::MAX);
        let r = match self.err.take() {
            Some(e) => Err(e),
            None => Ok(()),
        };
        (std::mem::take(&mut self.done), self.groups, r)
    }
}

impl Drop for Pipeline<'_, '_, '_> {
    /// A call that ends by a panic may leave areas waiting for their sync
    /// (a finished call leaves none): given back as they are, a later
    /// chunk could overwrite their copies while the pages' in-place writes
    /// are not yet durable, and a power loss then leave a torn page with
    /// no copy. So they are synced first, or, if that fails, kept for
    /// recovery (`sync_chunks`).
    fn drop(&mut self) {
        self.sync_unsynced();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
