//! Writing dirty pages back: the batch writer shared by every kind of flush
//! (LRU batch, flush-list batch, single page, shutdown).
//!
//! A batch latches each page shared with `try_read` (a page another thread
//! holds exclusively is skipped, never waited for, so a flusher cannot
//! deadlock with a user thread), copies it into one aligned batch buffer in
//! (file, offset) order with a fresh checksum, writes every contiguous run
//! with one call — runs of different files in parallel — and only then marks
//! the pages clean and drops the latches. A page is therefore neither
//! changed nor evicted while it is being written, and readers keep reading it.
//!
//! Except for single-page flushes, a batch also takes the dirty neighbors of
//! each page it writes (`flush_neighbors`, chosen in [`super::neighbors`]),
//! claimed exactly like requested pages. Before anything is written the
//! write-ahead rule is enforced and then checked in every build: a page
//! whose page LSN is past the durable end of the redo log fails the batch.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use parking_lot::RwLockReadGuard;

use super::neighbors::{self, NeighborMode};
use super::{BufferPool, Instance};
use crate::error::{Error, Result};
use crate::io::AlignedBuf;
use crate::metrics::Metrics;
use crate::page::{page_lsn, stamp_checksum, PageId};

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

/// Pages a batch with neighbors may grow to before it is written and a new
/// one started (the requested pages alone are never split), so that neighbor
/// flushing keeps the batch buffer and the set of latched pages bounded.
const NEIGHBOR_BATCH_PAGES: usize = 256;

struct Item<'a> {
    fid: u32,
    id: PageId,
    file: usize,
    offset: u64,
    oldest: u64,
    /// Added only because it neighbors a requested page.
    neighbor: bool,
    /// The shared latch, held until the page's chunk is written and synced
    /// (then released, so writers wait for one chunk, not the whole batch).
    guard: Option<RwLockReadGuard<'a, AlignedBuf>>,
}

/// Pages a batch has written so far.
#[derive(Default)]
struct Written {
    pages: usize,
    neighbors: usize,
}

impl BufferPool {
    /// Write the dirty pages among `fids` of instance `inst` and, unless
    /// `kind` is [`FlushKind::Single`], their dirty neighbors as
    /// `flush_neighbors` asks; returns how many pages were written. Pages
    /// that are clean, latched exclusively or being written by another
    /// flusher are skipped.
    pub(crate) fn flush_frames(
        &self,
        inst: &Instance,
        fids: &[u32],
        kind: FlushKind,
    ) -> Result<usize> {
        let mode = match kind {
            FlushKind::Single => NeighborMode::Off,
            _ => NeighborMode::from_option(self.cfg.flush_neighbors),
        };
        if mode == NeighborMode::Off {
            let items: Vec<Item<'_>> = fids
                .iter()
                .filter_map(|&fid| self.take(inst, fid, None, false))
                .collect();
            return self.write_batch(inst, items, kind);
        }
        let frames: usize = self.instances.iter().map(|i| i.frames.len()).sum();
        let area_size = neighbors::area_size(frames);
        let cap = fids.len().max(NEIGHBOR_BATCH_PAGES);
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
            let Some(item) = self.take(inst, fid, None, false) else {
                continue;
            };
            let id = item.id;
            taken.insert(fid, id);
            items.push(item);
            let area = neighbors::area_of(id.page_no, area_size);
            if mode == NeighborMode::Area && !swept.insert(area.start) {
                continue;
            }
            // The predicate adds the neighbor to the batch when it can. The
            // page hash is read while latches of the batch are held, as an
            // evicter does (latch, then hash): no one waits for a latch
            // while holding the hash lock, so this cannot deadlock.
            neighbors::pages_to_flush(id.page_no, area, mode, |page_no| {
                let nid = PageId::new(id.space, page_no);
                let Some(nfid) = inst.hash.read().get(&nid).copied() else {
                    return false;
                };
                if let Some(&held) = taken.get(&nfid) {
                    return held == nid;
                }
                match self.take(inst, nfid, Some(nid), !requested.contains(&nfid)) {
                    Some(it) => {
                        taken.insert(nfid, nid);
                        items.push(it);
                        true
                    }
                    None => false,
                }
            });
            if items.len() >= cap {
                written += self.write_batch(inst, std::mem::take(&mut items), kind)?;
            }
        }
        written += self.write_batch(inst, items, kind)?;
        Ok(written)
    }

    /// Latch frame `fid` shared and claim it for writing, if it holds a
    /// dirty page (`expect`, when given) that no other flusher is writing.
    fn take<'a>(
        &self,
        inst: &'a Instance,
        fid: u32,
        expect: Option<PageId>,
        neighbor: bool,
    ) -> Option<Item<'a>> {
        let f = &inst.frames[fid as usize];
        if !f.is_dirty() {
            return None;
        }
        let g = f.latch.try_read()?;
        let id = f.page()?;
        // The frame may have been given another page since the hash lookup.
        if expect.is_some_and(|e| e != id) {
            return None;
        }
        if f.flushing.swap(true, Ordering::AcqRel) {
            return None;
        }
        // Read only now: another flusher may have written the page and
        // released it between the dirty check and the claim. From here on
        // nobody else can change it (a shared latch and the flag are held).
        let oldest = f.oldest();
        if oldest == 0 {
            f.flushing.store(false, Ordering::Release);
            return None;
        }
        debug_assert_eq!(crate::page::page_id(&g), id, "frame holds another page");
        let (file, offset) = self.space.locate(id.page_no);
        Some(Item {
            fid,
            id,
            file,
            offset,
            oldest,
            neighbor,
            guard: Some(g),
        })
    }

    /// Write one batch of claimed pages, release them and count them.
    fn write_batch(
        &self,
        inst: &Instance,
        mut items: Vec<Item<'_>>,
        kind: FlushKind,
    ) -> Result<usize> {
        if items.is_empty() {
            return Ok(0);
        }
        let mut done = Written::default();
        let r = self.write_items(inst, &mut items, &mut done);
        // Pages of chunks not written (after an error) are released unwritten.
        for it in items.iter_mut().filter(|i| i.guard.is_some()) {
            inst.frames[it.fid as usize]
                .flushing
                .store(false, Ordering::Release);
            it.guard = None;
        }
        let m = &self.metrics;
        let n = done.pages as u64;
        Metrics::sub(&m.buffer_pool_pages_dirty, n);
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

    /// Write a latched batch: WAL rule, checksums, then chunk by chunk
    /// (one doublewrite area's worth, or the whole batch without
    /// doublewrite) the in-place writes and a sync, after which the chunk's
    /// pages are marked clean and released. `done` counts what was written,
    /// also when a later chunk fails.
    fn write_items(
        &self,
        inst: &Instance,
        items: &mut [Item<'_>],
        done: &mut Written,
    ) -> Result<()> {
        // The write-ahead rule: the redo of every change in the batch must be
        // durable before any of its pages reaches the data files.
        let newest = items
            .iter()
            .map(|i| {
                inst.frames[i.fid as usize]
                    .newest_mod
                    .load(Ordering::Acquire)
            })
            .max()
            .unwrap_or(0);
        let durable = match &self.wal {
            Some(wal) => {
                wal.flush_up_to(newest)?;
                Some(wal.flushed_lsn())
            }
            None => None,
        };
        items.sort_by_key(|i| (i.file, i.offset));
        let ps = self.cfg.page_size;
        let mut buf = AlignedBuf::new(ps * items.len());
        for (k, it) in items.iter().enumerate() {
            let dst = &mut buf[k * ps..(k + 1) * ps];
            let Some(g) = &it.guard else {
                return Err(Error::Corruption(format!(
                    "page {} was released before it was written",
                    it.id
                )));
            };
            dst.copy_from_slice(g);
            // Checked in every build, before anything is written: a page
            // whose redo is not durable must never reach the data files.
            let lsn = page_lsn(dst);
            if let Some(durable) = durable.filter(|&d| lsn > d) {
                return Err(Error::Corruption(format!(
                    "write-ahead rule violated: page {} has page LSN {lsn} but the redo log \
                     is durable only up to LSN {durable}; the batch was not written",
                    it.id
                )));
            }
            debug_assert!(lsn >= it.oldest, "page LSN older than its oldest change");
            debug_assert_eq!(
                crate::page::page_id(dst),
                it.id,
                "batch copy of another page"
            );
            stamp_checksum(dst);
        }
        let per = match &self.dblwr {
            Some(d) => d.pages_per_area(),
            None => items.len(),
        };
        for (c, chunk) in items.chunks_mut(per).enumerate() {
            let bytes = &buf[c * per * ps..(c * per + chunk.len()) * ps];
            match &self.dblwr {
                None => {
                    self.write_runs(chunk, bytes)?;
                }
                Some(d) => {
                    // The chunk is made durable in a doublewrite area first;
                    // the area is reused only after the in-place writes are
                    // synced.
                    let pages: Vec<(PageId, &[u8])> = chunk
                        .iter()
                        .enumerate()
                        .map(|(k, it)| (it.id, &bytes[k * ps..(k + 1) * ps]))
                        .collect();
                    let mut area = d.claim();
                    area.write_and_sync(&pages)?;
                    self.write_runs(chunk, bytes)?;
                    self.space.sync()?;
                    drop(area);
                }
            }
            for it in chunk.iter_mut() {
                let f = &inst.frames[it.fid as usize];
                inst.flush_list.lock().remove(&(it.oldest, it.fid));
                f.oldest_mod.store(0, Ordering::Release);
                f.flushing.store(false, Ordering::Release);
                it.guard = None;
                done.pages += 1;
                done.neighbors += usize::from(it.neighbor);
            }
        }
        Ok(())
    }

    /// Issue one write per contiguous run; different files in parallel.
    fn write_runs(&self, items: &[Item<'_>], buf: &[u8]) -> Result<()> {
        let ps = self.cfg.page_size;
        // (file, offset, first item, item count)
        let mut runs: Vec<(usize, u64, usize, usize)> = Vec::new();
        for (k, it) in items.iter().enumerate() {
            match runs.last_mut() {
                Some(r) if r.0 == it.file && r.1 + (r.3 * ps) as u64 == it.offset => r.3 += 1,
                _ => runs.push((it.file, it.offset, k, 1)),
            }
        }
        let write = |r: &(usize, u64, usize, usize)| {
            self.space
                .write_run(r.0, r.1, &buf[r.2 * ps..(r.2 + r.3) * ps])
        };
        let streams = self.cfg.write_io_threads.min(self.space.n_files());
        if streams <= 1 || runs.len() == 1 {
            return runs.iter().try_for_each(write);
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..streams)
                .map(|t| {
                    let runs = &runs;
                    let write = &write;
                    s.spawn(move || {
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

    /// A user thread writes one dirty page (already fixed by it) so that its
    /// frame can be reused; returns how many pages it wrote (0 when another
    /// flusher is writing the page or a writer holds it).
    pub(crate) fn flush_single(&self, inst: &Instance, fid: u32) -> Result<usize> {
        self.flush_frames(inst, &[fid], FlushKind::Single)
    }

    /// LRU batch flush of one instance: scan up to `depth` frames from the
    /// tail, move clean unfixed ones to the free list and write the dirty
    /// ones (then free them too), until `want_free` frames are free.
    /// Returns (pages written, pages evicted).
    pub fn lru_flush(
        &self,
        inst_no: usize,
        depth: usize,
        want_free: usize,
    ) -> Result<(usize, usize)> {
        let inst = &self.instances[inst_no];
        let mut evicted = 0;
        let mut dirty = Vec::new();
        {
            let mut lists = inst.lists.lock();
            if lists.free.len() >= want_free {
                return Ok((0, 0));
            }
            let cands: Vec<u32> = lists.lru.iter_from_tail(depth).collect();
            for fid in cands {
                if lists.free.len() >= want_free {
                    break;
                }
                if inst.frames[fid as usize].is_dirty() {
                    dirty.push(fid);
                } else if let Some(g) = inst.try_evict(&mut lists, fid) {
                    drop(g);
                    // Count the frame free before it is visible on the list,
                    // so a taker's decrement can never precede this increment.
                    Metrics::add(&self.metrics.buffer_pool_pages_free, 1);
                    Metrics::sub(&self.metrics.buffer_pool_pages_data, 1);
                    lists.free.push(fid);
                    evicted += 1;
                }
            }
        }
        let written = self.flush_frames(inst, &dirty, FlushKind::Lru)?;
        if written > 0 {
            let mut lists = inst.lists.lock();
            for &fid in &dirty {
                if lists.free.len() >= want_free {
                    break;
                }
                if let Some(g) = inst.try_evict(&mut lists, fid) {
                    drop(g);
                    // Count the frame free before it is visible on the list,
                    // so a taker's decrement can never precede this increment.
                    Metrics::add(&self.metrics.buffer_pool_pages_free, 1);
                    Metrics::sub(&self.metrics.buffer_pool_pages_data, 1);
                    lists.free.push(fid);
                    evicted += 1;
                }
            }
        }
        let m = &self.metrics;
        Metrics::add(&m.buffer_LRU_batch_evict_total_pages, evicted as u64);
        Ok((written, evicted))
    }

    /// Write up to `max` pages from the oldest end of instance `inst_no`'s
    /// flush list whose oldest modification is below `lsn_limit`.
    pub fn flush_list_batch(
        &self,
        inst_no: usize,
        max: usize,
        lsn_limit: u64,
        kind: FlushKind,
    ) -> Result<usize> {
        let inst = &self.instances[inst_no];
        let fids: Vec<u32> = inst
            .flush_list
            .lock()
            .iter()
            .take_while(|e| e.0 < lsn_limit)
            .take(max)
            .map(|e| e.1)
            .collect();
        self.flush_frames(inst, &fids, kind)
    }

    /// Write every dirty page and sync the data files (clean shutdown).
    /// Pages latched exclusively by other threads are retried for a while.
    pub fn flush_all(&self) -> Result<()> {
        for _ in 0..10_000 {
            let mut left = 0;
            for i in 0..self.instances.len() {
                self.flush_list_batch(i, 256, u64::MAX, FlushKind::All)?;
                left += self.instances[i].flush_list.lock().len();
            }
            if left == 0 {
                return self.space.sync();
            }
            std::thread::yield_now();
        }
        Err(Error::Corruption(
            "dirty pages stayed latched during shutdown flush".into(),
        ))
    }

    /// The page id a frame holds (for diagnostics).
    pub fn frame_page(&self, inst_no: usize, fid: u32) -> Option<PageId> {
        self.instances[inst_no].frames[fid as usize].page()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use super::FlushKind;
    use crate::buffer::{BufferPool, PoolConfig, Wal};
    use crate::error::{Error, Result};
    use crate::io::{AlignedBuf, FlushMethod, OsFileSystem};
    use crate::metrics::Metrics;
    use crate::page::Lsn;
    use crate::page::{init_page, page_lsn, PageId, PageType};
    use crate::space::Tablespace;

    const PS: usize = 4096;
    /// 256 frames: areas of 16 pages.
    const FRAMES: usize = 256;

    /// A log that is durable as soon as it is asked to be.
    #[derive(Default)]
    struct HonestWal(AtomicU64);

    impl Wal for HonestWal {
        fn flush_up_to(&self, lsn: Lsn) -> Result<()> {
            self.0.fetch_max(lsn, Ordering::AcqRel);
            Ok(())
        }
        fn flushed_lsn(&self) -> Lsn {
            self.0.load(Ordering::Acquire)
        }
    }

    /// A log that says it flushed and never did.
    struct LyingWal;

    impl Wal for LyingWal {
        fn flush_up_to(&self, _lsn: Lsn) -> Result<()> {
            Ok(())
        }
        fn flushed_lsn(&self) -> Lsn {
            0
        }
    }

    struct TestPool {
        pool: BufferPool,
        metrics: Arc<Metrics>,
        _dir: tempfile::TempDir,
    }

    impl TestPool {
        fn new(flush_neighbors: u8, wal: Arc<dyn Wal>) -> TestPool {
            let dir = tempfile::tempdir().unwrap();
            let metrics = Arc::new(Metrics::default());
            let fs = OsFileSystem::new(FlushMethod::NoSync);
            let space = Tablespace::create(&fs, dir.path(), PS, 2, metrics.clone()).unwrap();
            let cfg = PoolConfig {
                page_size: PS,
                frames: FRAMES,
                instances: 1,
                old_blocks_pct: 37,
                old_blocks_time_ms: 1000,
                write_io_threads: 2,
                free_wait_timeout: Duration::from_secs(5),
                flush_neighbors,
            };
            let pool = BufferPool::new(cfg, Arc::new(space), metrics.clone(), Some(wal), None);
            TestPool {
                pool,
                metrics,
                _dir: dir,
            }
        }

        /// Put page `page_no` in the pool, dirtied by redo `[start, start + 10)`
        /// when `start` is given, clean otherwise.
        fn put(&self, page_no: u32, start: Option<Lsn>) {
            let id = PageId::new(0, page_no);
            let mut w = self.pool.create(id).unwrap();
            init_page(&mut w, id, PageType::BtreeLeaf);
            if let Some(s) = start {
                self.pool.mark_dirty(&mut w, s, s + 10);
            }
        }

        fn metric(&self, name: &str) -> u64 {
            self.metrics.get(name).unwrap()
        }

        /// Page numbers still on the flush list, ascending.
        fn dirty_pages(&self) -> Vec<u32> {
            let inst = &self.pool.instances[0];
            let mut v: Vec<u32> = inst
                .flush_list
                .lock()
                .iter()
                .map(|&(_, fid)| inst.frames[fid as usize].page().unwrap().page_no)
                .collect();
            v.sort_unstable();
            v
        }

        /// Does the data file hold a valid image of `page_no`?
        fn on_disk(&self, page_no: u32) -> bool {
            let mut buf = AlignedBuf::new(PS);
            self.pool
                .space
                .read_page(PageId::new(0, page_no), &mut buf)
                .is_ok()
        }
    }

    /// The dirty pattern `..D..D..DDDPD..D` on pages 16..32 (one
    /// area of 16 pages), plus dirty pages 15 and 32 just outside the area.
    /// P (page 27) has the oldest modification, so a one-page flush-list
    /// batch requests P alone. Position 13 (page 29) is in the pool but
    /// clean; the other `.` pages are not in the pool.
    const BASE: u32 = 16;
    const P: u32 = BASE + 11;
    const DIRTY: [u32; 8] = [2, 5, 8, 9, 10, 11, 12, 15];

    fn pattern_pool(mode: u8) -> TestPool {
        let t = TestPool::new(mode, Arc::new(HonestWal::default()));
        assert_eq!(super::neighbors::area_size(FRAMES), 16);
        t.put(P, Some(1));
        for (k, &i) in DIRTY.iter().filter(|&&i| BASE + i != P).enumerate() {
            t.put(BASE + i, Some(100 + 10 * k as u64));
        }
        t.put(BASE, None);
        t.put(BASE + 13, None);
        t.put(BASE - 1, Some(500));
        t.put(BASE + 16, Some(510));
        assert_eq!(t.dirty_pages().len(), 10);
        t
    }

    /// Flush P through a one-page background batch; check what was written.
    fn flush_p(mode: u8, expect: &[u32], writes: u64) {
        let t = pattern_pool(mode);
        let n = t
            .pool
            .flush_list_batch(0, 1, u64::MAX, FlushKind::Background)
            .unwrap();
        let expect: Vec<u32> = expect.iter().map(|i| BASE + i).collect();
        assert_eq!(n, expect.len(), "mode {mode}");
        let neighbors = expect.len() as u64 - 1;
        assert_eq!(t.metric("buffer_pages_written"), expect.len() as u64);
        assert_eq!(t.metric("buffer_flush_neighbor_total_pages"), neighbors);
        assert_eq!(
            t.metric("buffer_flush_background_total_pages"),
            expect.len() as u64
        );
        assert_eq!(t.metric("buffer_flush_batches"), 1);
        assert_eq!(
            t.metric("os_data_writes"),
            writes,
            "mode {mode}: one write per run"
        );
        assert_eq!(
            t.metric("buffer_pool_pages_dirty"),
            10 - expect.len() as u64
        );
        for page in BASE - 1..=BASE + 16 {
            let written = expect.contains(&page);
            assert_eq!(t.on_disk(page), written, "mode {mode}: page {page}");
            let dirty = t.dirty_pages().contains(&page);
            let was_dirty =
                page == BASE - 1 || page == BASE + 16 || DIRTY.iter().any(|&i| BASE + i == page);
            assert_eq!(dirty, was_dirty && !written, "mode {mode}: page {page}");
        }
        let inst = &t.pool.instances[0];
        assert!(inst
            .frames
            .iter()
            .all(|f| !f.flushing.load(Ordering::Acquire)));
    }

    #[test]
    fn neighbors_off_writes_the_page_alone() {
        flush_p(0, &[11], 1);
    }

    #[test]
    fn neighbors_contiguous_writes_the_dirty_run() {
        // 8..=12 are contiguous in one file: a single write.
        flush_p(1, &[8, 9, 10, 11, 12], 1);
    }

    #[test]
    fn neighbors_area_writes_every_dirty_page_of_the_area() {
        // Runs 2, 5, 8..=12 and 15; pages 15 and 32 (other areas) stay dirty.
        flush_p(2, &DIRTY, 4);
    }

    #[test]
    fn single_page_flush_never_takes_neighbors() {
        let t = pattern_pool(2);
        let inst = &t.pool.instances[0];
        let fid = *inst.hash.read().get(&PageId::new(0, P)).unwrap();
        t.pool.flush_single(inst, fid).unwrap();
        assert_eq!(t.metric("buffer_pages_written"), 1);
        assert_eq!(t.metric("buffer_LRU_single_flush_total_pages"), 1);
        assert_eq!(t.metric("buffer_flush_neighbor_total_pages"), 0);
        assert!(t.on_disk(P));
        assert!(!t.on_disk(P - 1));
    }

    #[test]
    fn requested_pages_are_written_once_and_not_counted_as_neighbors() {
        for mode in [1, 2] {
            let t = pattern_pool(mode);
            let n = t
                .pool
                .flush_list_batch(0, 100, u64::MAX, FlushKind::Adaptive)
                .unwrap();
            assert_eq!(n, 10, "mode {mode}");
            assert_eq!(t.metric("buffer_pages_written"), 10);
            assert_eq!(t.metric("os_data_written_bytes"), 10 * PS as u64);
            assert_eq!(t.metric("buffer_flush_adaptive_total_pages"), 10);
            assert_eq!(t.metric("buffer_flush_neighbor_total_pages"), 0);
            assert!(t.dirty_pages().is_empty());
        }
    }

    #[test]
    fn lru_batch_takes_neighbors() {
        let t = pattern_pool(1);
        let inst = &t.pool.instances[0];
        let fid = *inst.hash.read().get(&PageId::new(0, P)).unwrap();
        let n = t.pool.flush_frames(inst, &[fid], FlushKind::Lru).unwrap();
        assert_eq!(n, 5);
        assert_eq!(t.metric("buffer_LRU_batch_flush_total_pages"), 5);
        assert_eq!(t.metric("buffer_flush_neighbor_total_pages"), 4);
    }

    #[test]
    fn a_page_latched_exclusively_ends_the_run() {
        let t = pattern_pool(1);
        // Page 25 (position 9) is being changed by a user thread.
        let held = t.pool.write(PageId::new(0, BASE + 9)).unwrap();
        let n = t
            .pool
            .flush_list_batch(0, 1, u64::MAX, FlushKind::Background)
            .unwrap();
        drop(held);
        assert_eq!(n, 3, "26, 27 and 28");
        assert!(t.on_disk(BASE + 10) && t.on_disk(P) && t.on_disk(BASE + 12));
        assert!(!t.on_disk(BASE + 8) && !t.on_disk(BASE + 9));
    }

    #[test]
    fn wal_rule_refuses_a_page_whose_redo_is_not_durable() {
        let t = TestPool::new(2, Arc::new(LyingWal));
        t.put(5, Some(1));
        t.put(6, Some(20));
        let err = t
            .pool
            .flush_list_batch(0, 1, u64::MAX, FlushKind::Background)
            .unwrap_err();
        match &err {
            Error::Corruption(m) => {
                assert!(m.contains("page 0:5") || m.contains("page 0:6"), "{m}");
                assert!(m.contains("durable only up to LSN 0"), "{m}");
                assert!(
                    m.contains("page LSN 11") || m.contains("page LSN 30"),
                    "{m}"
                );
            }
            e => panic!("unexpected error {e}"),
        }
        // Nothing reached the data files: they still end after the header.
        assert_eq!(t.metric("os_data_writes"), 0);
        assert_eq!(t.metric("os_data_written_bytes"), 0);
        let mut buf = AlignedBuf::new(PS);
        for page in [5, 6] {
            assert!(!t.pool.space.read_page_raw(page, &mut buf).unwrap());
        }
        // Both pages are still dirty, and free to be written later.
        assert_eq!(t.dirty_pages(), [5, 6]);
        assert_eq!(t.metric("buffer_pages_written"), 0);
        assert_eq!(t.metric("buffer_pool_pages_dirty"), 2);
        let inst = &t.pool.instances[0];
        assert!(inst
            .frames
            .iter()
            .all(|f| !f.flushing.load(Ordering::Acquire)));
    }

    #[test]
    fn wal_rule_honest_log_lets_the_page_through() {
        let wal = Arc::new(HonestWal::default());
        let t = TestPool::new(0, wal.clone());
        t.put(5, Some(1));
        let n = t
            .pool
            .flush_list_batch(0, 1, u64::MAX, FlushKind::Background)
            .unwrap();
        assert_eq!(n, 1);
        assert_eq!(wal.flushed_lsn(), 11);
        assert!(t.dirty_pages().is_empty());
        let mut buf = AlignedBuf::new(PS);
        t.pool.space.read_page(PageId::new(0, 5), &mut buf).unwrap();
        assert_eq!(page_lsn(&buf), 11);
    }
}
