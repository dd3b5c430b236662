//! What write-back (`crate::flush`) may do with frames, and nothing more:
//! claim a dirty page for writing, find a neighbor's frame, release a claim
//! written or unwritten, pick LRU and flush-list candidates, evict clean
//! pages. The pool knows nothing of batches, doublewrite or the redo log.
//!
//! A claim holds the frame's `flushing` flag, so that no second flusher
//! claims the page, and, until the flusher has copied the image
//! ([`Claim::unlatch`]), its shared latch: the copy is a consistent image.
//! A claim whose write failed after its doublewrite copy outlives the
//! flush call, unlatched ([`Claim::detach`]), until a retry writes the
//! copy (`flush::batch::held`); meanwhile the page is dirty and claimed,
//! exactly as while its write is in flight.
//! Claims are taken with `try_read`, so a flusher does not wait for a
//! latch a user thread holds (with one bounded exception, below); and the
//! latch is dropped before any I/O, so a user thread never waits for a
//! flusher's write (with the latch held
//! through the writes, every writer of a hot page — an index node — waited
//! for a whole batch's doublewrite copy, syncs and writes: on a disk of
//! 300 writes/s, stalls of a second).
//!
//! # The oldest page: a bounded wait
//! The first claim of a flush-list batch is the flush list's oldest page,
//! the one that holds the checkpoint back. On a hot spot (pareto ids) that
//! page is often latched exclusively by a user thread at the moment the
//! flusher looks; passed over, it stayed dirty while the flusher wrote
//! younger pages, the checkpoint stood still, the age climbed to where
//! the writers' pacer holds everyone, and when the page was finally caught
//! the checkpoint jumped: the age swung between the hard level and far
//! below the setpoint. So that one claim may wait for the latch, as long
//! as the caller says (the flushing policy's choice: 10 ms under `steady`,
//! never under `classic`), and only while the flusher holds nothing: no
//! latch, no claim, no mutex (it is the batch's first claim).
//! It cannot deadlock: the user thread holding the latch may itself wait
//! for the flusher (for a free frame, when every frame is fixed), but the
//! wait is bounded, after which the page is passed over as before. It
//! never waits for another flusher: a page being written is skipped.
//! Every page passed over because it was latched is counted
//! (`buffer_flush_latched_skips`).
//!
//! # A page changed while its copy is written
//! The page stays dirty, and so cannot be evicted, until the write ends.
//! A change made meanwhile is not in the copy: `BufferPool::mark_dirty`,
//! seeing `flushing`, records the redo start of the first such change in
//! the frame's `redirty` (under the flush-list mutex), and
//! [`BufferPool::release_written`], under the same mutex, moves the page
//! to that LSN on the flush list instead of making it clean. That change's
//! redo starts after the copy was taken (its mini-transaction took the
//! exclusive latch after the flusher released the shared one), so the
//! checkpoint passes nothing the data files lack. Both sides hold the
//! flush-list mutex, so either the change is recorded before the release
//! reads it, or it finds the page released (clean, or already moved) and
//! dirties it as any change does.
//!
//! # A clean page written to fill a gap
//! A batch may write a few clean pages between two runs of dirty ones so
//! that one write carries both runs (`flush::batch`, "Gaps"). Such a page
//! is claimed by [`BufferPool::claim_clean`]: the same flag and shared
//! latch, with `oldest` 0, and only while the page is clean (the latch
//! keeps it so until the copy is taken). Its write retires nothing, so
//! nothing must hold the checkpoint back for it, and a change made while
//! it is written must not wait for its release to count: `mark_dirty`
//! dirties a clean page the usual way (on the flush list at the change's
//! redo start) even while a flusher holds it, and records `redirty` only
//! for a page already dirty. A dirty claim's page is dirty from its claim
//! to its release (both under the flush-list mutex), so for it nothing
//! changes. The release of a clean claim then only drops the flag (and a
//! `redirty` a second change recorded): a page dirtied meanwhile stays on
//! the flush list at that change, which is later than the copy written.
//! While the flag is set no other flusher writes the page (an older copy
//! must not land after a newer one) and no evicter takes the frame
//! (`Instance::try_evict`).

use std::sync::atomic::Ordering;
use std::time::Duration;

use parking_lot::RwLockReadGuard;

use super::BufferPool;
use crate::io::AlignedBuf;
use crate::metrics::Metrics;
use crate::page::{Lsn, PageId};

/// A dirty page claimed for writing.
pub(crate) struct Claim<'a> {
    /// Instance number.
    pub inst: usize,
    /// Frame index in the instance.
    pub fid: u32,
    /// The page.
    pub id: PageId,
    /// Its oldest unwritten change (its flush-list key); 0 for a clean
    /// page claimed to fill a gap.
    pub oldest: Lsn,
    /// Its newest change when claimed: the redo that must be durable
    /// before the claimed image is written.
    pub newest: Lsn,
    guard: Option<RwLockReadGuard<'a, AlignedBuf>>,
    /// The pool, so that a claim dropped unreleased gives itself up.
    pool: &'a BufferPool,
    /// Neither released as written nor as unwritten yet.
    held: bool,
}

/// A claim dropped while held (a panic unwinding through a batch: see
/// `flush::cleaner`, "A cleaner that panics") is released unwritten, so
/// that its page is not kept from every later flush, and with it the
/// checkpoint from moving.
impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if self.held {
            self.pool.give_up(self);
        }
    }
}

impl Claim<'_> {
    /// A clean page claimed to fill a gap ([`BufferPool::claim_clean`]):
    /// its write retires no change.
    pub fn is_clean(&self) -> bool {
        self.oldest == 0
    }

    /// The page image, while the claim holds the latch (`None` after
    /// [`Claim::unlatch`]).
    pub fn image(&self) -> Option<&[u8]> {
        self.guard.as_deref().map(|b| &b[..])
    }

    /// Drop the shared latch, once the image is copied: from now on user
    /// threads may change the page (see the module doc), and the claim
    /// only keeps other flushers off it.
    pub fn unlatch(&mut self) {
        self.guard = None;
    }

    /// The claim, unlatched, kept past the flush call that took it: a
    /// write held for retry (`flush::batch::held`). It keeps the page's
    /// `flushing` flag, and so its place on the flush list, until it is
    /// [reattached](Detached::reattach) and released like any claim.
    pub fn detach(mut self) -> Detached {
        // Held on by the `Detached` now: this claim's drop must not give
        // the page up.
        self.held = false;
        Detached {
            inst: self.inst,
            fid: self.fid,
            id: self.id,
            oldest: self.oldest,
            newest: self.newest,
        }
    }
}

/// A claim without its latch, which a thread can hand to another.
pub(crate) struct Detached {
    /// Instance number.
    pub inst: usize,
    /// Frame index in the instance.
    pub fid: u32,
    /// The page.
    pub id: PageId,
    oldest: Lsn,
    newest: Lsn,
}

impl Detached {
    /// The claim again, unlatched, on `pool` (the one it was taken on),
    /// to be released.
    pub fn reattach(self, pool: &BufferPool) -> Claim<'_> {
        Claim {
            inst: self.inst,
            fid: self.fid,
            id: self.id,
            oldest: self.oldest,
            newest: self.newest,
            guard: None,
            pool,
            held: true,
        }
    }
}

/// The hook the pool calls when a thread finds no free frame: write one
/// dirty page from the LRU tail, and wake the page cleaners. Implemented by
/// write-back (`crate::flush`), installed at wiring, so the pool calls down
/// an interface it owns rather than up into the flushing code.
pub(crate) trait FrameWriter: Send + Sync {
    /// Write the dirty page in frame `fid` of instance `inst` (fixed by the
    /// caller); true if it was written, false if another flusher or a
    /// writer holds it.
    fn write_victim(&self, pool: &BufferPool, inst: usize, fid: u32) -> crate::Result<bool>;
    /// A thread is short of free frames: the cleaners should run.
    fn frames_wanted(&self);
    /// A thread found the free list empty and had to evict a page itself:
    /// a policy that keeps free frames ahead of demand wants to know.
    fn free_list_empty(&self);
}

impl BufferPool {
    /// Number of instances.
    pub(crate) fn n_instances(&self) -> usize {
        self.instances.len()
    }

    /// Frames over all instances.
    pub(crate) fn total_frames(&self) -> usize {
        self.instances.iter().map(|i| i.frames.len()).sum()
    }

    /// Claim frame `fid` of instance `inst` for writing, if it holds a dirty
    /// page (`expect`, when given) that nobody latches exclusively (waiting
    /// at most `wait` for a user thread's exclusive latch: see the module
    /// doc for the one caller that waits) and no other flusher is writing.
    pub(crate) fn claim(
        &self,
        inst: usize,
        fid: u32,
        expect: Option<PageId>,
        wait: Duration,
    ) -> Option<Claim<'_>> {
        let f = &self.instances[inst].frames[fid as usize];
        if !f.is_dirty() {
            return None;
        }
        let latched = if wait.is_zero() {
            f.latch.try_read()
        } else {
            f.latch.try_read_for(wait)
        };
        let Some(guard) = latched else {
            Metrics::add(&self.metrics.buffer_flush_latched_skips, 1);
            return None;
        };
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
        debug_assert_eq!(crate::page::page_id(&guard), id, "frame holds another page");
        debug_assert_eq!(f.redirty.load(Ordering::Acquire), 0);
        Some(Claim {
            inst,
            fid,
            id,
            oldest,
            newest: f.newest_mod.load(Ordering::Acquire),
            guard: Some(guard),
            pool: self,
            held: true,
        })
    }

    /// Claim frame `fid` of instance `inst` for writing while it holds
    /// page `expect` *clean*: a gap filler (see the module doc, "A clean
    /// page written to fill a gap"). Never waits: a latched page, a page
    /// another flusher writes, or a dirty one (which [`BufferPool::claim`]
    /// takes) is refused.
    pub(crate) fn claim_clean(&self, inst: usize, fid: u32, expect: PageId) -> Option<Claim<'_>> {
        let f = &self.instances[inst].frames[fid as usize];
        if f.is_dirty() {
            return None;
        }
        let guard = f.latch.try_read()?;
        if f.page() != Some(expect) {
            return None;
        }
        if f.flushing.swap(true, Ordering::AcqRel) {
            return None;
        }
        // Dirtied between the first check and the latch: not clean. From
        // here on nobody changes it until the claim is unlatched.
        if f.oldest() != 0 {
            f.flushing.store(false, Ordering::Release);
            return None;
        }
        debug_assert_eq!(
            crate::page::page_id(&guard),
            expect,
            "frame holds another page"
        );
        Some(Claim {
            inst,
            fid,
            id: expect,
            oldest: 0,
            newest: f.newest_mod.load(Ordering::Acquire),
            guard: Some(guard),
            pool: self,
            held: true,
        })
    }

    /// The claimed image is on disk: take the page off the flush list and
    /// make it clean, or, if it was changed after it was copied, move it
    /// to that change on the flush list (module doc); then release it.
    /// A clean claim (a gap filler) is only let go: a change made since
    /// its copy has put the page on the flush list already.
    pub(crate) fn release_written(&self, mut c: Claim<'_>) {
        if c.is_clean() {
            self.give_up(&mut c);
            return;
        }
        c.held = false;
        let inst = &self.instances[c.inst];
        let f = &inst.frames[c.fid as usize];
        let mut list = inst.lock_flush_list();
        list.remove(&(c.oldest, c.fid));
        match f.redirty.swap(0, Ordering::AcqRel) {
            0 => {
                f.oldest_mod.store(0, Ordering::Release);
                Metrics::sub(&self.metrics.buffer_pool_pages_dirty, 1);
            }
            again => {
                list.insert((again, c.fid));
                f.oldest_mod.store(again, Ordering::Release);
            }
        }
        f.flushing.store(false, Ordering::Release);
        drop(list);
        drop(c.guard.take());
    }

    /// The page was not written: it stays dirty where it was on the flush
    /// list (a change made since it was copied is later than that), free
    /// for a later flush.
    pub(crate) fn release_unwritten(&self, mut c: Claim<'_>) {
        self.give_up(&mut c);
    }

    fn give_up(&self, c: &mut Claim<'_>) {
        c.held = false;
        let inst = &self.instances[c.inst];
        let f = &inst.frames[c.fid as usize];
        let list = inst.lock_flush_list();
        f.redirty.store(0, Ordering::Release);
        f.flushing.store(false, Ordering::Release);
        drop(list);
        drop(c.guard.take());
    }

    /// The frame holding `id` in instance `inst`, if cached. The page hash
    /// is read while the caller may hold claims (shared latches), as an
    /// evicter does (latch, then hash): nobody waits for a latch while
    /// holding the hash lock, so this cannot deadlock.
    pub(crate) fn frame_of(&self, inst: usize, id: PageId) -> Option<u32> {
        self.instances[inst].hash_read(id).get(&id).copied()
    }

    /// Up to `max` entries (oldest modification, frame) from the oldest
    /// end of instance `inst`'s flush list whose oldest modification is
    /// below `lsn_limit`.
    pub(crate) fn flush_list_oldest_keyed(
        &self,
        inst: usize,
        max: usize,
        lsn_limit: Lsn,
    ) -> Vec<(Lsn, u32)> {
        self.instances[inst]
            .lock_flush_list()
            .iter()
            .take_while(|e| e.0 < lsn_limit)
            .take(max)
            .copied()
            .collect()
    }

    /// The frames of up to `max` pages from the oldest end of instance
    /// `inst`'s flush list whose oldest modification is below `lsn_limit`.
    pub(crate) fn flush_list_oldest(&self, inst: usize, max: usize, lsn_limit: Lsn) -> Vec<u32> {
        self.flush_list_oldest_keyed(inst, max, lsn_limit)
            .into_iter()
            .map(|(_, fid)| fid)
            .collect()
    }

    /// LRU flushing, first step: scan up to `depth` frames from instance
    /// `inst`'s LRU tail, move clean unfixed pages to the free list until
    /// `want_free` frames are free, and return how many were freed and the
    /// dirty frames met on the way (at most `write_max`, for the caller to
    /// write).
    pub(crate) fn lru_free_clean(
        &self,
        inst: usize,
        depth: usize,
        want_free: usize,
        write_max: usize,
    ) -> (usize, Vec<u32>) {
        let i = &self.instances[inst];
        let mut evicted = 0;
        let mut dirty = Vec::new();
        let mut lists = i.lock_lists();
        if lists.free.len() >= want_free {
            return (0, dirty);
        }
        let cands: Vec<u32> = lists.lru.iter_from_tail(depth).collect();
        for fid in cands {
            if lists.free.len() >= want_free {
                break;
            }
            if i.frames[fid as usize].is_dirty() {
                if dirty.len() < write_max {
                    dirty.push(fid);
                }
            } else if self.evict_to_free_list(inst, &mut lists, fid) {
                evicted += 1;
            }
        }
        (evicted, dirty)
    }

    /// LRU flushing, second step: free those of `fids` that are now clean
    /// and unfixed (all of them, however many frames are free: see
    /// `WriteBack::lru_flush`); returns how many.
    pub(crate) fn free_if_clean(&self, inst: usize, fids: &[u32]) -> usize {
        let mut lists = self.instances[inst].lock_lists();
        let mut evicted = 0;
        for &fid in fids {
            if self.evict_to_free_list(inst, &mut lists, fid) {
                evicted += 1;
            }
        }
        evicted
    }

    fn evict_to_free_list(
        &self,
        inst: usize,
        lists: &mut super::instance::Lists,
        fid: u32,
    ) -> bool {
        let Some(g) = self.instances[inst].try_evict(lists, fid) else {
            return false;
        };
        drop(g);
        // Count the frame free before it is visible on the list, so a
        // taker's decrement can never precede this increment.
        Metrics::add(&self.metrics.buffer_pool_pages_free, 1);
        Metrics::sub(&self.metrics.buffer_pool_pages_data, 1);
        lists.free.push(fid);
        true
    }
}
