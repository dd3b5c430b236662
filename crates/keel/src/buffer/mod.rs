//! The buffer pool: page frames in one or more instances, each with a page
//! hash, a free list, an LRU list with midpoint insertion and a flush list of
//! dirty pages ordered by oldest modification.
//!
//! Threads reach pages through [`BufferPool::read`] (shared latch) and
//! [`BufferPool::write`] (exclusive latch); the returned guards unlatch and
//! unfix on drop. Writing pages back is `crate::flush`'s business: it works
//! through the narrow interface in [`claim`], and the pool reaches it only
//! through the [`FrameWriter`] hook it owns (a thread short of frames writes
//! one dirty page from the LRU tail).

mod claim;
mod frame;
mod guard;
mod instance;
mod lru;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

pub(crate) use claim::{Claim, Detached, FrameWriter};
pub use guard::{PageRead, PageWrite};
pub(crate) use instance::{Instance, ReadHit};

use crate::error::{Error, Result};
use crate::metrics::{timed_wait, Metrics};
use crate::page::Lsn;
use crate::page::PageId;
use crate::space::{Tablespace, EXTENT_PAGES};

/// Sizing and behaviour of a pool, taken from the options.
#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// Bytes per page.
    pub page_size: usize,
    /// Total frames over all instances.
    pub frames: usize,
    /// Number of instances.
    pub instances: usize,
    /// Percentage of each LRU list that is the old sublist.
    pub old_blocks_pct: u32,
    /// Milliseconds before an old page is made young by an access.
    pub old_blocks_time_ms: u64,
    /// How long a thread waits for a free frame before giving up.
    pub free_wait_timeout: Duration,
    /// Checks the structure of a page image read from disk (after its
    /// checksum): pages in memory are produced by trusted code, so a page
    /// that passes once may be read without bounds checks. The engine
    /// passes the B-tree node validation; the pool knows no page layout.
    pub validate: fn(&[u8]) -> std::result::Result<(), String>,
}

/// The buffer pool.
pub struct BufferPool {
    pub(crate) instances: Vec<Instance>,
    pub(crate) space: Arc<Tablespace>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) cfg: PoolConfig,
    epoch: Instant,
    /// Writes a dirty page for a thread short of frames (installed once).
    writer: OnceLock<Arc<dyn FrameWriter>>,
    /// [`BufferPool::read_hot`]'s guesses: instance number in the high 32
    /// bits, frame number in the low, [`NO_GUESS`] for none; a power of two
    /// of slots.
    guesses: Box<[AtomicU64]>,
}

/// An empty slot of [`BufferPool::read_hot`]'s guesses.
const NO_GUESS: u64 = u64::MAX;

/// Slots of guesses per frame of the pool (at least [`MIN_GUESSES`], at
/// most [`MAX_GUESSES`]): the roots and internal nodes of the trees are
/// about one page in a hundred.
const FRAMES_PER_GUESS: usize = 32;
const MIN_GUESSES: usize = 1 << 10;
const MAX_GUESSES: usize = 1 << 16;

impl BufferPool {
    /// A pool of `cfg.frames` frames over `space`.
    pub fn new(cfg: PoolConfig, space: Arc<Tablespace>, metrics: Arc<Metrics>) -> BufferPool {
        let per = cfg.frames / cfg.instances;
        let instances = (0..cfg.instances)
            .map(|_| Instance::new(per, cfg.page_size, cfg.old_blocks_pct, metrics.clone()))
            .collect::<Vec<_>>();
        let total = (per * cfg.instances) as u64;
        Metrics::set(&metrics.buffer_pool_pages_total, total);
        Metrics::set(&metrics.buffer_pool_pages_free, total);
        let guesses = (per * cfg.instances / FRAMES_PER_GUESS)
            .next_power_of_two()
            .clamp(MIN_GUESSES, MAX_GUESSES);
        BufferPool {
            instances,
            space,
            metrics,
            cfg,
            epoch: Instant::now(),
            writer: OnceLock::new(),
            guesses: (0..guesses).map(|_| AtomicU64::new(NO_GUESS)).collect(),
        }
    }

    /// Install the hook that writes a dirty page for a thread short of
    /// frames; the first call wins. Without one, such a thread only waits
    /// for other threads to free frames.
    pub(crate) fn set_writer(&self, w: Arc<dyn FrameWriter>) {
        let _ = self.writer.set(w);
    }

    fn frames_wanted(&self) {
        if let Some(w) = self.writer.get() {
            w.frames_wanted();
        }
    }

    /// The instance that caches `id`. Whole extents map to one instance so
    /// that neighbor flushing stays inside one instance.
    pub(crate) fn instance_of(&self, id: PageId) -> usize {
        let extent = (id.page_no / EXTENT_PAGES) as u64 ^ ((id.space as u64) << 32);
        let h = extent.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        ((h >> 32) % self.instances.len() as u64) as usize
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Fix `id` and take its shared latch, reading it from disk if needed.
    pub fn read(&self, id: PageId) -> Result<PageRead<'_>> {
        self.metrics.buffer_pool_read_requests.add(1);
        Ok(self.read_in(self.instance_of(id), id)?.1)
    }

    /// [`BufferPool::read`] for a page that many threads read often: the
    /// root and the internal nodes of a tree. A guess of its frame, kept in
    /// a small table indexed by the page id, skips the page hash (InnoDB
    /// passes such a guessed block to `buf_page_get_gen` for a tree's root).
    ///
    /// The guess is only a hint: the frame it names is latched first and
    /// then asked which page it holds. A frame's page changes only under its
    /// exclusive latch (`frame.rs`), so under the shared latch the answer
    /// stays true for as long as the latch is held, and a frame that holds
    /// `id` latched shared cannot be evicted. A wrong or stale guess (the
    /// page was evicted, the frame reused, the slot taken by another page),
    /// or a frame latched exclusively at that moment, falls back to the
    /// page hash, which then refreshes the guess. A guess is written only
    /// on such a miss, so the slots of hot pages are read by every thread
    /// and written by none.
    pub fn read_hot(&self, id: PageId) -> Result<PageRead<'_>> {
        self.metrics.buffer_pool_read_requests.add(1);
        let slot = &self.guesses[self.guess_slot(id)];
        let guess = slot.load(Ordering::Relaxed);
        if let Some((inst, fid)) = self.guessed(guess) {
            let frame = &inst.frames[fid as usize];
            if let Some(g) = frame.latch.try_read() {
                if frame.page() == Some(id) {
                    self.touch(inst, fid);
                    return Ok(PageRead::unfixed(frame, g));
                }
            }
        }
        let inst_no = self.instance_of(id);
        let (fid, page) = self.read_in(inst_no, id)?;
        let now = ((inst_no as u64) << 32) | u64::from(fid);
        if guess != now {
            slot.store(now, Ordering::Relaxed);
        }
        Ok(page)
    }

    /// The instance and frame number a slot's value names, if it names one
    /// that exists.
    fn guessed(&self, guess: u64) -> Option<(&Instance, u32)> {
        if guess == NO_GUESS {
            return None;
        }
        let (inst_no, fid) = ((guess >> 32) as usize, guess as u32);
        let inst = self.instances.get(inst_no)?;
        ((fid as usize) < inst.frames.len()).then_some((inst, fid))
    }

    /// `id`'s slot in the table of guesses.
    fn guess_slot(&self, id: PageId) -> usize {
        let key = ((id.space as u64) << 32) | u64::from(id.page_no);
        let h = key.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> (64 - self.guesses.len().trailing_zeros())) as usize
    }

    /// [`BufferPool::read`] of `id`, cached by instance `inst_no`, without
    /// counting the request; also returns the frame's number there.
    fn read_in(&self, inst_no: usize, id: PageId) -> Result<(u32, PageRead<'_>)> {
        let inst = &self.instances[inst_no];
        loop {
            let fetched = match inst.lookup_for_read(id) {
                Some(ReadHit::Latched(fid, g)) => {
                    self.touch(inst, fid);
                    return Ok((fid, PageRead::unfixed(&inst.frames[fid as usize], g)));
                }
                Some(ReadHit::Fixed(fid)) => Fetched::Hit(fid),
                None => self.lookup_or_load(inst_no, id, false)?,
            };
            match fetched {
                Fetched::Loaded(fid, g) => {
                    return Ok((
                        fid,
                        PageRead::new(
                            &inst.frames[fid as usize],
                            parking_lot::RwLockWriteGuard::downgrade(g),
                        ),
                    ))
                }
                Fetched::Hit(fid) => {
                    let frame = &inst.frames[fid as usize];
                    let g = frame.latch.try_read().unwrap_or_else(|| {
                        let m = &self.metrics;
                        timed_wait(&m.wait_page_latch, &m.wait_page_latch_ns, || {
                            frame.latch.read()
                        })
                    });
                    if frame.page() != Some(id) {
                        frame.unfix();
                        continue;
                    }
                    self.touch(inst, fid);
                    return Ok((fid, PageRead::new(frame, g)));
                }
            }
        }
    }

    /// Fix `id` and take its exclusive latch, reading it from disk if needed.
    pub fn write(&self, id: PageId) -> Result<PageWrite<'_>> {
        self.write_impl(id, false)
    }

    /// A frame for a page that has never been written (a fresh allocation):
    /// exclusively latched and zero-filled, without reading the disk.
    pub fn create(&self, id: PageId) -> Result<PageWrite<'_>> {
        self.write_impl(id, true)
    }

    fn write_impl(&self, id: PageId, fresh: bool) -> Result<PageWrite<'_>> {
        let inst_no = self.instance_of(id);
        let inst = &self.instances[inst_no];
        self.metrics.buffer_pool_read_requests.add(1);
        loop {
            match self.lookup_or_load(inst_no, id, fresh)? {
                Fetched::Loaded(fid, g) => {
                    return Ok(PageWrite::new(
                        id,
                        self,
                        &inst.frames[fid as usize],
                        g,
                        fresh,
                    ))
                }
                Fetched::Hit(fid) => {
                    let frame = &inst.frames[fid as usize];
                    let mut g = frame.latch.try_write().unwrap_or_else(|| {
                        let m = &self.metrics;
                        timed_wait(&m.wait_page_latch, &m.wait_page_latch_ns, || {
                            frame.latch.write()
                        })
                    });
                    if frame.page() != Some(id) {
                        frame.unfix();
                        continue;
                    }
                    self.touch(inst, fid);
                    if fresh {
                        g.fill(0);
                    }
                    return Ok(PageWrite::new(id, self, frame, g, fresh));
                }
            }
        }
    }

    /// On a hit: make an old page young if it has been in the pool longer
    /// than `old_blocks_time` and is no longer near the young end.
    fn touch(&self, inst: &Instance, fid: u32) {
        let frame = &inst.frames[fid as usize];
        let clock = inst.lru_clock();
        let young_at = frame.young_clock.load(Ordering::Relaxed);
        if clock.saturating_sub(young_at) < (inst.frames.len() as u64 / 4).max(1) {
            return; // still near the young end: don't touch the mutex
        }
        let now = self.now_ms();
        let first = frame.first_access_ms.load(Ordering::Relaxed);
        if now.saturating_sub(first) < self.cfg.old_blocks_time_ms {
            return;
        }
        inst.make_young(fid);
    }

    /// Whether `id` is in the pool now (it may leave or arrive at once).
    pub(crate) fn contains(&self, id: PageId) -> bool {
        self.instances[self.instance_of(id)]
            .hash_read(id)
            .contains_key(&id)
    }

    /// Bring `id` into the pool if it is not there, latching nothing
    /// afterwards: recovery's read-ahead (`redo::recovery`). Returns
    /// whether this call read the page from disk. An error leaves the page
    /// out of the pool, as a failed [`BufferPool::read`] does, for the
    /// thread that needs the page to meet (and report) it again.
    pub(crate) fn prefetch(&self, id: PageId) -> Result<bool> {
        let inst_no = self.instance_of(id);
        let inst = &self.instances[inst_no];
        match self.lookup_or_load(inst_no, id, false)? {
            Fetched::Hit(fid) => {
                inst.frames[fid as usize].unfix();
                Ok(false)
            }
            Fetched::Loaded(fid, g) => {
                drop(g);
                inst.frames[fid as usize].unfix();
                Ok(true)
            }
        }
    }

    /// Dirty a page changed under its exclusive latch by a mini-transaction
    /// whose redo occupies `[start, end)`: the page LSN becomes `end`, and on
    /// its first change the page enters the flush list at `start` — the
    /// checkpoint may never pass the start of a change that is not on disk.
    pub(crate) fn mark_dirty(&self, page: &mut PageWrite<'_>, start: Lsn, end: Lsn) {
        // Logged: the guard must not put the page back when released.
        page.keep_changes();
        let id = page.id();
        let inst = &self.instances[self.instance_of(id)];
        let fid = inst.frame_index(page.frame());
        let frame = page.frame();
        // Not a change to log: the page's changes were diffed already.
        crate::page::set_page_lsn(page.unlogged_mut(), end);
        frame.newest_mod.store(end, Ordering::Release);
        // Already dirty and not being written: nothing to record, and no
        // mutex (no flusher can claim the page while this thread holds it
        // exclusively, so `flushing` cannot become set meanwhile).
        if !frame.flushing.load(Ordering::Acquire) && frame.oldest() != 0 {
            return;
        }
        // Under the flush-list mutex, which a flusher's release takes too
        // (see `claim`'s module doc): either the page is clean (never
        // dirtied, written and released meanwhile, or being written as a
        // gap filler, whose copy holds nothing the checkpoint needs: see
        // `claim`, "A clean page written to fill a gap") and is dirty from
        // here, or a flusher is still writing an earlier copy of it, dirty,
        // and the change is recorded for its release.
        let mut list = inst.lock_flush_list();
        if frame.oldest() == 0 {
            list.insert((start, fid));
            frame.oldest_mod.store(start, Ordering::Release);
            Metrics::add(&self.metrics.buffer_pool_pages_dirty, 1);
        } else if frame.flushing.load(Ordering::Acquire)
            && frame.redirty.load(Ordering::Acquire) == 0
        {
            frame.redirty.store(start, Ordering::Release);
        }
    }

    /// Take a fresh page (see [`BufferPool::create`]) whose creation was
    /// never logged out of the pool again: its guard is being dropped, the
    /// frame still exclusively latched (`g`) and fixed by it. Threads that
    /// looked the page up meanwhile wait for the latch and then find the
    /// frame no longer holds it, as after a failed read. A frame that is
    /// dirty or being written (a page created over one that was cached:
    /// never the case for the space's unallocated pages) keeps its zeros.
    pub(crate) fn discard_fresh(
        &self,
        id: PageId,
        frame: &frame::Frame,
        g: parking_lot::RwLockWriteGuard<'_, crate::io::AlignedBuf>,
    ) {
        let inst = &self.instances[self.instance_of(id)];
        let fid = inst.frame_index(frame);
        if frame.is_dirty() || frame.flushing.load(Ordering::Acquire) || frame.page() != Some(id) {
            drop(g);
            frame.unfix();
            return;
        }
        inst.uninstall(id, fid);
        drop(g);
        frame.unfix();
        Metrics::sub(&self.metrics.buffer_pool_pages_data, 1);
        Metrics::add(&self.metrics.buffer_pool_pages_free, 1);
        inst.return_free(fid);
    }

    /// The (instance, frame) that [`BufferPool::read_hot`] guesses for `id`.
    #[cfg(test)]
    pub(crate) fn guess_for_test(&self, id: PageId) -> Option<(usize, u32)> {
        let (inst, fid) =
            self.guessed(self.guesses[self.guess_slot(id)].load(Ordering::Relaxed))?;
        let inst_no = self.instances.iter().position(|i| std::ptr::eq(i, inst))?;
        Some((inst_no, fid))
    }

    /// Evict `id` if it is cached, clean and unlatched; true if it is not
    /// in the pool afterwards (so the next access reads the disk).
    #[cfg(test)]
    pub(crate) fn evict_for_test(&self, id: PageId) -> bool {
        let inst = self.instance_of(id);
        if let Some(fid) = self.frame_of(inst, id) {
            self.free_if_clean(inst, &[fid]);
        }
        !self.contains(id)
    }

    /// Frames holding a page of type `t`, for status reports: a scan of
    /// every frame's type field, O(frames). A frame latched exclusively at
    /// the moment is not waited for and not counted, so the count is a
    /// snapshot that may be short by the pages being changed.
    // For the engine's status report (the undo pages cached), still to come.
    pub(crate) fn pages_of_type(&self, t: crate::page::PageType) -> u64 {
        let mut n = 0;
        for inst in &self.instances {
            for f in inst.frames.iter() {
                if f.page().is_none() {
                    continue;
                }
                if let Some(g) = f.latch.try_read() {
                    n += u64::from(crate::page::page_type(&g) == Some(t));
                }
            }
        }
        n
    }

    /// Smallest oldest-modification over all flush lists (None when clean).
    pub fn oldest_modification(&self) -> Option<Lsn> {
        self.instances
            .iter()
            .filter_map(|i| i.lock_flush_list().first().map(|e| e.0))
            .min()
    }
}

pub(crate) enum Fetched<'a> {
    /// Found in the pool and fixed; the caller latches and re-checks identity.
    Hit(u32),
    /// Loaded (or created) into a frame that the caller now holds exclusively.
    Loaded(
        u32,
        parking_lot::RwLockWriteGuard<'a, crate::io::AlignedBuf>,
    ),
}

impl BufferPool {
    fn lookup_or_load(&self, inst_no: usize, id: PageId, fresh: bool) -> Result<Fetched<'_>> {
        let inst = &self.instances[inst_no];
        loop {
            if let Some(fid) = inst.lookup_and_fix(id) {
                return Ok(Fetched::Hit(fid));
            }
            let (fid, mut g) = self.get_free_frame(inst_no)?;
            if !inst.install(id, fid) {
                drop(g);
                Metrics::add(&self.metrics.buffer_pool_pages_free, 1);
                inst.return_free(fid);
                continue; // another thread loaded it meanwhile
            }
            let frame = &inst.frames[fid as usize];
            frame
                .first_access_ms
                .store(self.now_ms(), Ordering::Relaxed);
            Metrics::add(&self.metrics.buffer_pool_pages_data, 1);
            if fresh {
                g.fill(0);
                return Ok(Fetched::Loaded(fid, g));
            }
            Metrics::add(&self.metrics.buffer_pool_reads, 1);
            let read = self.space.read_page(id, &mut g).and_then(|()| {
                (self.cfg.validate)(&g).map_err(|reason| Error::CorruptPage {
                    page: id,
                    path: self
                        .space
                        .file_path(self.space.locate(id.page_no).0)
                        .to_path_buf(),
                    reason: format!("{reason} (the checksum is valid)"),
                })
            });
            if let Err(e) = read {
                inst.uninstall(id, fid);
                frame.unfix();
                drop(g);
                Metrics::sub(&self.metrics.buffer_pool_pages_data, 1);
                Metrics::add(&self.metrics.buffer_pool_pages_free, 1);
                inst.return_free(fid);
                return Err(e);
            }
            return Ok(Fetched::Loaded(fid, g));
        }
    }

    /// A free frame of `inst`, exclusively latched and in no list: from the
    /// free list, else a clean page evicted from the LRU tail (bounded scan),
    /// else after writing a dirty tail page ourselves (single-page flush).
    fn get_free_frame(
        &self,
        inst_no: usize,
    ) -> Result<(
        u32,
        parking_lot::RwLockWriteGuard<'_, crate::io::AlignedBuf>,
    )> {
        let inst = &self.instances[inst_no];
        let started = Instant::now();
        let mut waited = false;
        loop {
            if started.elapsed() > self.cfg.free_wait_timeout {
                return Err(Error::BufferPoolExhausted(format!(
                    "no frame could be freed in {:?}: all {} frames of the instance are fixed, \
                     latched or being written; the buffer pool is too small for this many \
                     concurrent operations",
                    self.cfg.free_wait_timeout,
                    inst.frames.len()
                )));
            }
            match inst.take_free_or_evict() {
                instance::Victim::Free(fid, g) => {
                    Metrics::sub(&self.metrics.buffer_pool_pages_free, 1);
                    Metrics::add(&self.metrics.buffer_pool_frames_taken, 1);
                    return Ok((fid, g));
                }
                instance::Victim::Evicted(fid, g) => {
                    if let Some(w) = self.writer.get() {
                        w.free_list_empty();
                    }
                    Metrics::add(&self.metrics.buffer_LRU_search_evict_total_pages, 1);
                    Metrics::sub(&self.metrics.buffer_pool_pages_data, 1);
                    Metrics::add(&self.metrics.buffer_pool_frames_taken, 1);
                    return Ok((fid, g));
                }
                instance::Victim::Dirty(fid) => {
                    Metrics::add(&self.metrics.buffer_LRU_single_flush_num_scan, 1);
                    if let Some(w) = self.writer.get() {
                        w.free_list_empty();
                    }
                    let r = match self.writer.get() {
                        Some(w) => w.write_victim(self, inst_no, fid),
                        None => Ok(false),
                    };
                    inst.frames[fid as usize].unfix();
                    match r {
                        Ok(true) => {}
                        // A cleaner is writing it (or a writer holds it):
                        // it will be clean shortly; do not spin meanwhile.
                        Ok(false) => {
                            self.frames_wanted();
                            std::thread::sleep(Duration::from_micros(200));
                        }
                        // The page stays dirty; the caller learns why no
                        // frame could be had (a commit applying its rows
                        // retries, a plain read reports it).
                        Err(e) => {
                            self.frames_wanted();
                            return Err(e);
                        }
                    }
                }
                instance::Victim::None => {
                    if !waited {
                        Metrics::add(&self.metrics.buffer_LRU_get_free_waits, 1);
                        waited = true;
                    }
                    self.frames_wanted();
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
}
