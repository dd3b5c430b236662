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
//! [`CLAIM_GROUP`] at a time (or more on a deep device), so that a batch
//! holds few frames at once.
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
//!    synced. A failure leaves the in-place pages untouched; the area is
//!    freed and the pages stay dirty.
//! 5. **In place.** One write per contiguous run, different files in
//!    parallel. With doublewrite, a failure here may have left a torn page
//!    whose only good copy is in the area, so the area must not be reused:
//!    the data files are poisoned and the area is never given back
//!    (recovery repairs from it after the restart). The space was allocated
//!    in step 3, so this is a real write error, not a full disk. Without
//!    doublewrite there is nothing to protect: the pages stay dirty and are
//!    retried later.
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
//!    covers the writes.

use std::collections::{HashMap, HashSet};

use super::neighbors::{self, NeighborMode};
use super::writeback::WriteBack;
use crate::buffer::{BufferPool, Claim};
use crate::error::{Error, Result};
use crate::io::AlignedBuf;
use crate::metrics::Metrics;
use crate::page::{page_lsn, stamp_checksum, PageId};
use crate::space::Tablespace;

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

/// Fewest pages claimed at once: a batch is written this many pages at a
/// time (more on a deep device, see `WriteBack::claim_group`), each group
/// claimed only when its turn comes (plus, with neighbors, the neighbors
/// of its last page), so that a batch holds a bounded set of frames and
/// buffer. A doublewrite area's worth by default: one doublewrite copy and
/// one data-file sync per group. (While claims held the page latch through
/// the I/O this was 64, to bound how long a writer of a hot page waited;
/// the latch is now held only for the copy.)
pub(crate) const CLAIM_GROUP: usize = 128;

struct Item<'a> {
    claim: Claim<'a>,
    file: usize,
    offset: u64,
    /// Added only because it neighbors a requested page.
    neighbor: bool,
}

/// Pages a batch has written so far.
#[derive(Default)]
struct Written {
    pages: usize,
    neighbors: usize,
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
        let mode = match kind {
            FlushKind::Single => NeighborMode::Off,
            _ => NeighborMode::from_option(self.cfg.flush_neighbors),
        };
        if mode == NeighborMode::Off {
            let mut written = 0;
            for group in fids.chunks(self.claim_group()) {
                let items: Vec<Item<'_>> = group
                    .iter()
                    .filter_map(|&fid| self.item(pool, inst, fid, None, false))
                    .collect();
                written += self.write_batch(pool, items, kind)?;
            }
            return Ok(written);
        }
        let area_size = neighbors::area_size(pool.total_frames());
        let cap = self.claim_group();
        let requested: HashSet<u32> = fids.iter().copied().collect();
        // Every frame this call has put in a batch, with the page it held.
        let mut taken: HashMap<u32, PageId> = HashMap::new();
        // Areas already swept whole (NeighborMode::Area).
        let mut swept: HashSet<u32> = HashSet::new();
        let mut items: Vec<Item<'_>> = Vec::new();
        let mut written = 0;
        for &fid in fids {
            // Already written or batched as a neighbor of an earlier page:
            // its own run or area was covered then.
            if taken.contains_key(&fid) {
                continue;
            }
            let Some(item) = self.item(pool, inst, fid, None, false) else {
                continue;
            };
            let id = item.claim.id;
            taken.insert(fid, id);
            items.push(item);
            let area = neighbors::area_of(id.page_no, area_size);
            if mode == NeighborMode::Area && !swept.insert(area.start) {
                continue;
            }
            // The predicate adds the neighbor to the batch when it can.
            neighbors::pages_to_flush(id.page_no, area, mode, |page_no| {
                let nid = PageId::new(id.space, page_no);
                let Some(nfid) = pool.frame_of(inst, nid) else {
                    return false;
                };
                if let Some(&held) = taken.get(&nfid) {
                    return held == nid;
                }
                match self.item(pool, inst, nfid, Some(nid), !requested.contains(&nfid)) {
                    Some(it) => {
                        taken.insert(nfid, nid);
                        items.push(it);
                        true
                    }
                    None => false,
                }
            });
            if items.len() >= cap {
                written += self.write_batch(pool, std::mem::take(&mut items), kind)?;
            }
        }
        written += self.write_batch(pool, items, kind)?;
        Ok(written)
    }

    /// Pages claimed at once: [`CLAIM_GROUP`], or 8 per write in flight
    /// when that is more (a deep, fast device writes a group in the same
    /// few milliseconds, and smaller groups would pay a batch's fixed
    /// costs — its syncs, its threads — for a handful of writes each).
    fn claim_group(&self) -> usize {
        CLAIM_GROUP.max(8 * self.streams().0)
    }

    fn item<'a>(
        &self,
        pool: &'a BufferPool,
        inst: usize,
        fid: u32,
        expect: Option<PageId>,
        neighbor: bool,
    ) -> Option<Item<'a>> {
        let claim = pool.claim(inst, fid, expect)?;
        let (file, offset) = self.space.locate(claim.id.page_no);
        Some(Item {
            claim,
            file,
            offset,
            neighbor,
        })
    }

    /// Write one batch of claimed pages, release them and count them.
    fn write_batch(
        &self,
        pool: &BufferPool,
        items: Vec<Item<'_>>,
        kind: FlushKind,
    ) -> Result<usize> {
        if items.is_empty() {
            return Ok(0);
        }
        let mut done = Written::default();
        let r = self.write_items(pool, items, &mut done);
        let m = &self.metrics;
        let n = done.pages as u64;
        Metrics::add(&m.buffer_pages_written, n);
        Metrics::add(&m.buffer_flush_batches, 1);
        Metrics::add(&m.buffer_flush_neighbor_total_pages, done.neighbors as u64);
        let counter = match kind {
            FlushKind::Lru => &m.buffer_LRU_batch_flush_total_pages,
            FlushKind::Adaptive => &m.buffer_flush_adaptive_total_pages,
            FlushKind::Background | FlushKind::All => &m.buffer_flush_background_total_pages,
            FlushKind::Single => &m.buffer_LRU_single_flush_total_pages,
            FlushKind::Sync => &m.buffer_flush_sync_total_pages,
        };
        Metrics::add(counter, n);
        r.map(|()| done.pages)
    }

    /// Steps 1–7 of the module doc for a claimed batch. Every claim is
    /// released before this returns: written ones clean (or dirty again
    /// from a later change), the rest dirty. `done` counts what was
    /// written, also when a later chunk fails.
    fn write_items(
        &self,
        pool: &BufferPool,
        mut items: Vec<Item<'_>>,
        done: &mut Written,
    ) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        items.sort_by_key(|i| (i.file, i.offset));
        let mut buf = self.copy_and_unlatch(&mut items);
        if let Err(e) = self.check_wal(&items, &buf) {
            items
                .into_iter()
                .for_each(|it| pool.release_unwritten(it.claim));
            return Err(e);
        }
        let (items, no_room) = self.allocate(pool, items, &mut buf);
        let r = self.write_copies(pool, items, &buf, done);
        match no_room {
            Some(e) => Err(e),
            None => r,
        }
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

    /// Steps 4–7 for allocated items (sorted by file and offset), whose
    /// copies are the first pages of `buf`.
    fn write_copies(
        &self,
        pool: &BufferPool,
        items: Vec<Item<'_>>,
        buf: &[u8],
        done: &mut Written,
    ) -> Result<()> {
        let ps = self.space.page_size();
        let buf = &buf[..items.len() * ps];
        let per = self
            .dblwr
            .as_ref()
            .map_or(items.len(), |d| d.pages_per_area());
        let mut first = 0;
        let mut items = items.into_iter();
        while first < buf.len() / ps {
            let chunk: Vec<Item<'_>> = items.by_ref().take(per).collect();
            let bytes = &buf[first * ps..(first + chunk.len()) * ps];
            first += chunk.len();
            let area = match self.write_chunk(&chunk, bytes) {
                Ok(area) => area,
                Err(e) => {
                    chunk
                        .into_iter()
                        .chain(items)
                        .for_each(|it| pool.release_unwritten(it.claim));
                    return Err(e);
                }
            };
            // Written (not yet synced): released before the sync, so that
            // nobody waits for it (step 6 of the module doc).
            for it in chunk {
                done.pages += 1;
                done.neighbors += usize::from(it.neighbor);
                pool.release_written(it.claim);
            }
            if let Some(area) = area {
                self.sync_chunk(area)?;
            }
        }
        Ok(())
    }

    /// Step 2: the redo of every change in the batch must be durable before
    /// any of its pages reaches the data files. Checked in every build.
    fn check_wal(&self, items: &[Item<'_>], copies: &[u8]) -> Result<()> {
        let newest = items.iter().map(|i| i.claim.newest).max().unwrap_or(0);
        self.wal.flush_up_to(newest)?;
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

    /// Steps 4–5 for one chunk (its items sorted and allocated, `bytes`
    /// their images); returns the doublewrite area to sync and free
    /// ([`WriteBack::sync_chunk`], step 7) once the pages are released.
    fn write_chunk<'d>(
        &'d self,
        chunk: &[Item<'_>],
        bytes: &[u8],
    ) -> Result<Option<super::doublewrite::AreaGuard<'d>>> {
        let ps = self.space.page_size();
        self.space.check_poisoned()?;
        let Some(d) = &self.dblwr else {
            return self.write_runs(chunk, bytes).map(|()| None);
        };
        let pages: Vec<(PageId, &[u8])> = chunk
            .iter()
            .enumerate()
            .map(|(k, it)| (it.claim.id, &bytes[k * ps..(k + 1) * ps]))
            .collect();
        let mut area = d.claim();
        area.write_and_sync(&pages)?;
        if let Err(e) = self.write_runs(chunk, bytes) {
            self.space.poison(format!(
                "an in-place page write failed ({e}) after its doublewrite copy was made; the data \
                 files may hold a torn page whose only good copy is in doublewrite area {}: \
                 restart the engine so that recovery repairs it",
                area.area()
            ));
            area.keep_forever();
            return Err(e);
        }
        Ok(Some(area))
    }

    /// Step 7: sync the data files, then free the chunk's doublewrite area.
    fn sync_chunk(&self, area: super::doublewrite::AreaGuard<'_>) -> Result<()> {
        if let Err(e) = self.space.sync() {
            // The sync poisoned the data files; the copies stay for recovery.
            area.keep_forever();
            return Err(e);
        }
        drop(area);
        Ok(())
    }

    /// Issue one write per contiguous run, several in flight (see
    /// [`WriteBack::streams`]).
    fn write_runs(&self, items: &[Item<'_>], buf: &[u8]) -> Result<()> {
        let (streams, shared) = self.streams();
        write_runs(
            &self.space,
            streams,
            shared,
            items.iter().map(|i| (i.file, i.offset)),
            buf,
        )
    }
}

/// Write `buf` (whole pages, sorted by file and offset; page `k` goes to
/// `places[k]`) with one write per contiguous run, on up to `streams`
/// threads: each takes the runs of its files, or (`shared`) the next run
/// not yet taken by any thread, so that one file can have several writes
/// in flight and the depth holds until the last runs. (With every
/// `streams`-th run fixed to each thread, a thread whose runs were slow
/// left the others idle: at a pinned depth of 32 on `sata-ssd`, 12.8
/// writes were in flight on average.)
fn write_runs(
    space: &Tablespace,
    streams: usize,
    shared: bool,
    places: impl Iterator<Item = (usize, u64)>,
    buf: &[u8],
) -> Result<()> {
    let ps = space.page_size();
    // (file, offset, first page, page count)
    let mut runs: Vec<(usize, u64, usize, usize)> = Vec::new();
    for (k, (file, offset)) in places.enumerate() {
        match runs.last_mut() {
            Some(r) if r.0 == file && r.1 + (r.3 * ps) as u64 == offset => r.3 += 1,
            _ => runs.push((file, offset, k, 1)),
        }
    }
    let write = |r: &(usize, u64, usize, usize)| {
        space.write_run(r.0, r.1, &buf[r.2 * ps..(r.2 + r.3) * ps])
    };
    let streams = streams.min(runs.len());
    if streams <= 1 {
        return runs.iter().try_for_each(write);
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..streams)
            .map(|t| {
                let (runs, write, next) = (&runs, &write, &next);
                s.spawn(move || {
                    if shared {
                        loop {
                            let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(r) = runs.get(k) else {
                                return Ok(());
                            };
                            write(r)?;
                        }
                    }
                    runs.iter()
                        .filter(|r| r.0 % streams == t)
                        .try_for_each(write)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect::<Result<Vec<()>>>()
            .map(|_| ())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
