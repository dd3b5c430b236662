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

use std::sync::atomic::Ordering;

use parking_lot::RwLockReadGuard;

use super::{BufferPool, Instance};
use crate::error::Result;
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

struct Item<'a> {
    fid: u32,
    id: PageId,
    file: usize,
    offset: u64,
    oldest: u64,
    _guard: RwLockReadGuard<'a, AlignedBuf>,
}

impl BufferPool {
    /// Write the dirty pages among `fids` of instance `inst`; returns how many
    /// were written. Pages that are clean, or latched exclusively, are skipped.
    pub(crate) fn flush_frames(
        &self,
        inst: &Instance,
        fids: &[u32],
        kind: FlushKind,
    ) -> Result<usize> {
        let mut items = Vec::with_capacity(fids.len());
        for &fid in fids {
            let f = &inst.frames[fid as usize];
            if !f.is_dirty() {
                continue;
            }
            let Some(g) = f.latch.try_read() else {
                continue;
            };
            let (Some(id), oldest) = (f.page(), f.oldest()) else {
                continue;
            };
            if oldest == 0 || f.flushing.swap(true, Ordering::AcqRel) {
                continue;
            }
            debug_assert_eq!(crate::page::page_id(&g), id, "frame holds another page");
            let (file, offset) = self.space.locate(id.page_no);
            items.push(Item {
                fid,
                id,
                file,
                offset,
                oldest,
                _guard: g,
            });
        }
        if items.is_empty() {
            return Ok(0);
        }
        let r = self.write_items(inst, &mut items);
        for it in &items {
            inst.frames[it.fid as usize]
                .flushing
                .store(false, Ordering::Release);
        }
        let n = r?;
        let m = &self.metrics;
        Metrics::sub(&m.buffer_pool_pages_dirty, n as u64);
        Metrics::add(&m.buffer_pages_written, n as u64);
        Metrics::add(&m.buffer_flush_batches, 1);
        let counter = match kind {
            FlushKind::Lru => &m.buffer_LRU_batch_flush_total_pages,
            FlushKind::Adaptive => &m.buffer_flush_adaptive_total_pages,
            FlushKind::Background | FlushKind::All => &m.buffer_flush_background_total_pages,
            FlushKind::Single => &m.buffer_LRU_single_flush_total_pages,
            FlushKind::Sync => &m.buffer_flush_sync_total_pages,
        };
        Metrics::add(counter, n as u64);
        Ok(n)
    }

    /// Write a latched batch: WAL rule, checksums, in-place writes; then
    /// mark the pages clean. Returns the number of pages written.
    fn write_items(&self, inst: &Instance, items: &mut [Item<'_>]) -> Result<usize> {
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
        if let Some(wal) = &self.wal {
            wal.flush_up_to(newest)?;
        }
        items.sort_by_key(|i| (i.file, i.offset));
        let ps = self.cfg.page_size;
        let mut buf = AlignedBuf::new(ps * items.len());
        for (k, it) in items.iter().enumerate() {
            let dst = &mut buf[k * ps..(k + 1) * ps];
            dst.copy_from_slice(&it._guard);
            debug_assert!(
                page_lsn(dst) >= it.oldest,
                "page LSN older than its oldest change"
            );
            debug_assert_eq!(
                crate::page::page_id(dst),
                it.id,
                "batch copy of another page"
            );
            stamp_checksum(dst);
        }
        match &self.dblwr {
            None => self.write_runs(items, &buf)?,
            Some(d) => {
                // Each chunk is made durable in a doublewrite area first; the
                // area is reused only after the in-place writes are synced.
                let per = d.pages_per_area();
                for (c, chunk) in items.chunks(per).enumerate() {
                    let bytes = &buf[c * per * ps..(c * per + chunk.len()) * ps];
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
        }
        for it in items.iter() {
            let f = &inst.frames[it.fid as usize];
            inst.flush_list.lock().remove(&(it.oldest, it.fid));
            f.oldest_mod.store(0, Ordering::Release);
        }
        Ok(items.len())
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
    /// frame can be reused.
    pub(crate) fn flush_single(&self, inst: &Instance, fid: u32) -> Result<()> {
        self.flush_frames(inst, &[fid], FlushKind::Single)
            .map(|_| ())
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
        Err(crate::error::Error::Corruption(
            "dirty pages stayed latched during shutdown flush".into(),
        ))
    }

    /// The page id a frame holds (for diagnostics).
    pub fn frame_page(&self, inst_no: usize, fid: u32) -> Option<PageId> {
        self.instances[inst_no].frames[fid as usize].page()
    }
}
