//! One buffer-pool instance: frames, page hash, free list, LRU list and
//! flush list.
//!
//! Lock order: `lists` mutex → one page-hash shard's lock → frame latch (the
//! latch only with `try_*` while a mutex is held). No thread holds two
//! shards' locks at once. The flush-list mutex is a leaf.
//!
//! # The page hash is sharded
//! Every page access takes the page hash's lock to look its page up, shared.
//! A shared lock is still a write to the lock's word: with one lock per
//! instance, every thread that reads a page of the instance writes the same
//! cache line, and on a machine with many cores that line moves from core to
//! core on nearly every access (InnoDB split its page hash into
//! `innodb_page_hash_locks` partitions for the same reason). So the hash is
//! [`HASH_SHARDS`] maps, each behind its own lock on its own cache line, a
//! page id's shard picked by bits of its hash that the map itself does not
//! use. What the single lock guarded, a shard's lock guards for the ids in
//! that shard: an id's entry, and the `page` and `fix` of the frame it
//! names (`frame.rs`).

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::frame::Frame;
use super::lru::Lru;
use crate::io::aligned::Slab;
use crate::io::AlignedBuf;
use crate::metrics::CacheAligned;
use crate::metrics::{lock_counted, read_counted, write_counted, Metrics};
use crate::page::Lsn;
use crate::page::PageId;

/// How far from the LRU tail a thread looks for a clean victim.
const SEARCH_DEPTH: usize = 100;

/// The page hash's hasher: a page id is two `u32`s the engine chooses,
/// not input an attacker controls, so SipHash's protection (std's default)
/// buys nothing, while every page access pays for it. One multiply spreads
/// the id over the high bits the table probes by (Fibonacci hashing).
#[derive(Default)]
pub(crate) struct PageIdHasher(u64);

impl Hasher for PageIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u32(u32::from(b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0.rotate_left(32) ^ u64::from(n)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

/// A map keyed by page id, hashed with [`PageIdHasher`].
pub(crate) type PageMap<V> = HashMap<PageId, V, BuildHasherDefault<PageIdHasher>>;

pub(crate) struct Lists {
    pub lru: Lru,
    pub free: Vec<u32>,
}

/// Page-hash shards per instance (a power of two).
pub(crate) const HASH_SHARDS: usize = 16;

/// One shard of an instance's page hash.
pub(crate) type HashShard = CacheAligned<RwLock<PageMap<u32>>>;

/// What [`Instance::lookup_for_read`] found.
pub(crate) enum ReadHit<'a> {
    /// The frame, latched shared, not fixed.
    Latched(u32, RwLockReadGuard<'a, AlignedBuf>),
    /// The frame, fixed: its latch was held.
    Fixed(u32),
}

pub(crate) struct Instance {
    /// The frames; their page buffers lie in `_slab` when it is there.
    pub frames: Box<[Frame]>,
    /// The page hash, in [`HASH_SHARDS`] shards (see the module doc);
    /// [`Instance::hash`] picks an id's.
    hash: Box<[HashShard]>,
    /// The LRU and free lists ([`Instance::lock_lists`]).
    lists: Mutex<Lists>,
    /// Dirty frames by (oldest modification, frame id)
    /// ([`Instance::lock_flush_list`]).
    flush_list: Mutex<BTreeSet<(Lsn, u32)>>,
    /// Where the waits for the mutexes and hash shards above are counted.
    metrics: Arc<Metrics>,
    /// Counts pages entering the LRU list; a page made young less than a
    /// quarter of the pool's worth of insertions ago counts as young.
    lru_clock: AtomicU64,
    /// The memory of every frame's page buffer, in one mapping (`None`:
    /// the mapping failed and each buffer was allocated on its own).
    /// Declared after `frames`, so dropped after them; no frame buffer is
    /// ever moved out of its frame (the latch guards lend it).
    _slab: Option<Slab>,
}

pub(crate) enum Victim<'a> {
    Free(u32, RwLockWriteGuard<'a, AlignedBuf>),
    Evicted(u32, RwLockWriteGuard<'a, AlignedBuf>),
    /// A dirty, unfixed page near the tail, now fixed by the caller, who
    /// must write it and unfix it.
    Dirty(u32),
    None,
}

impl Instance {
    pub fn new(n: usize, page_size: usize, old_pct: u32, metrics: Arc<Metrics>) -> Instance {
        let slab = match Slab::new(n * page_size) {
            Ok(s) => Some(s),
            Err(e) => {
                log::warn!(
                    "buffer pool: cannot map {} bytes for {n} frames at once ({e}); \
                     allocating each frame on its own",
                    n * page_size
                );
                None
            }
        };
        #[allow(unsafe_code)]
        let bufs = match &slab {
            // SAFETY: the slab is kept in the instance with the frames and
            // dropped after them (field order), carved once, and a frame's
            // buffer never leaves its frame.
            Some(s) => unsafe { s.carve(page_size) },
            None => (0..n).map(|_| AlignedBuf::new(page_size)).collect(),
        };
        let frames = bufs.into_iter().map(Frame::new).collect::<Vec<_>>();
        debug_assert_eq!(frames.len(), n);
        Instance {
            _slab: slab,
            frames: frames.into_boxed_slice(),
            // Each shard sized for its share and a quarter more: the ids
            // spread evenly (test `page_ids_spread_over_the_hash_shards`),
            // and a map growing is only slower, never wrong.
            hash: (0..HASH_SHARDS)
                .map(|_| {
                    let cap = n / HASH_SHARDS + n / HASH_SHARDS / 4 + 8;
                    CacheAligned(RwLock::new(PageMap::with_capacity_and_hasher(
                        cap,
                        Default::default(),
                    )))
                })
                .collect(),
            lists: Mutex::new(Lists {
                lru: Lru::new(n, old_pct),
                free: (0..n as u32).rev().collect(),
            }),
            flush_list: Mutex::new(BTreeSet::new()),
            metrics,
            lru_clock: AtomicU64::new(0),
        }
    }

    /// The LRU and free lists, locked (a wait is `wait_buf_pool_mutex`).
    pub fn lock_lists(&self) -> MutexGuard<'_, Lists> {
        let m = &self.metrics;
        lock_counted(
            &self.lists,
            &m.wait_buf_pool_mutex,
            &m.wait_buf_pool_mutex_ns,
        )
    }

    /// The flush list, locked (a wait is `wait_flush_list_mutex`).
    pub fn lock_flush_list(&self) -> MutexGuard<'_, BTreeSet<(Lsn, u32)>> {
        let m = &self.metrics;
        lock_counted(
            &self.flush_list,
            &m.wait_flush_list_mutex,
            &m.wait_flush_list_mutex_ns,
        )
    }

    /// `id`'s page-hash shard, shared (a wait is `wait_page_hash_latch`).
    pub fn hash_read(&self, id: PageId) -> RwLockReadGuard<'_, PageMap<u32>> {
        let m = &self.metrics;
        read_counted(
            self.hash(id),
            &m.wait_page_hash_latch,
            &m.wait_page_hash_latch_ns,
        )
    }

    /// `id`'s page-hash shard, exclusive (a wait is `wait_page_hash_latch`).
    pub fn hash_write(&self, id: PageId) -> RwLockWriteGuard<'_, PageMap<u32>> {
        let m = &self.metrics;
        write_counted(
            self.hash(id),
            &m.wait_page_hash_latch,
            &m.wait_page_hash_latch_ns,
        )
    }

    pub fn lru_clock(&self) -> u64 {
        self.lru_clock.load(Ordering::Relaxed)
    }

    pub fn frame_index(&self, f: &Frame) -> u32 {
        let base = self.frames.as_ptr() as usize;
        let idx = (f as *const Frame as usize - base) / std::mem::size_of::<Frame>();
        debug_assert!(idx < self.frames.len());
        idx as u32
    }

    /// The page-hash shard holding `id`'s entry, if it has one.
    pub fn hash(&self, id: PageId) -> &RwLock<PageMap<u32>> {
        &self.hash[hash_shard(id)]
    }

    /// A reader's lookup: the frame holding `id`, latched shared if the
    /// latch is free, else fixed (the caller then waits for the latch
    /// holding no lock of the pool, and checks the frame's page again).
    ///
    /// The latch is taken under the read lock of `id`'s page-hash shard,
    /// with `try_read`, never waiting: a frame's page changes only under
    /// the frame's exclusive latch and the shard's write lock (`frame.rs`),
    /// so the frame latched here holds `id` for as long as the latch is
    /// held, and no fix is needed to keep it from being evicted (an
    /// evicter's `try_write` fails). That saves two of the six atomic
    /// writes of a page access (fix and unfix, on the frame's own cache
    /// line, which every thread descending through a root or upper page
    /// writes). The evicter takes the frame's latch first and the shard's
    /// lock second, a reader the other way round, but neither waits for
    /// the second: the evicter's shard lock waits at most for this
    /// function to return, and this function does not wait for the latch.
    pub fn lookup_for_read(&self, id: PageId) -> Option<ReadHit<'_>> {
        let h = self.hash_read(id);
        let fid = *h.get(&id)?;
        let f = &self.frames[fid as usize];
        if let Some(g) = f.latch.try_read() {
            return Some(ReadHit::Latched(fid, g));
        }
        f.fix();
        Some(ReadHit::Fixed(fid))
    }

    pub fn lookup_and_fix(&self, id: PageId) -> Option<u32> {
        let h = self.hash_read(id);
        let fid = *h.get(&id)?;
        self.frames[fid as usize].fix();
        Some(fid)
    }

    /// Enter `id` → `fid` in the page hash and the LRU list; false if
    /// another thread installed the page first. The frame comes out fixed.
    pub fn install(&self, id: PageId, fid: u32) -> bool {
        {
            let mut h = self.hash_write(id);
            if h.contains_key(&id) {
                return false;
            }
            h.insert(id, fid);
            let f = &self.frames[fid as usize];
            f.set_page(Some(id));
            f.fix();
        }
        let clock = self.lru_clock.fetch_add(1, Ordering::Relaxed) + 1;
        self.frames[fid as usize]
            .young_clock
            .store(clock, Ordering::Relaxed);
        self.lock_lists().lru.insert_midpoint(fid);
        true
    }

    /// Undo `install` after a failed read.
    pub fn uninstall(&self, id: PageId, fid: u32) {
        let mut lists = self.lock_lists();
        {
            let mut h = self.hash_write(id);
            h.remove(&id);
            self.frames[fid as usize].set_page(None);
        }
        lists.lru.remove(fid);
    }

    pub fn return_free(&self, fid: u32) {
        self.lock_lists().free.push(fid);
    }

    pub fn make_young(&self, fid: u32) {
        let mut lists = self.lock_lists();
        if lists.lru.contains(fid) && lists.lru.is_old(fid) {
            lists.lru.make_young(fid);
            let clock = self.lru_clock();
            self.frames[fid as usize]
                .young_clock
                .store(clock, Ordering::Relaxed);
        }
    }

    /// Evict `fid` if it is clean, unfixed and unlatched; the caller holds
    /// the lists mutex. Returns the frame exclusively latched, out of every list.
    pub fn try_evict<'a>(
        &'a self,
        lists: &mut Lists,
        fid: u32,
    ) -> Option<RwLockWriteGuard<'a, AlignedBuf>> {
        let f = &self.frames[fid as usize];
        // A frame already evicted (on the free list) is not in the LRU list.
        if !lists.lru.contains(fid) || f.is_fixed() || f.is_dirty() {
            return None;
        }
        let g = f.latch.try_write()?;
        // A clean page being written (a gap filler) keeps its frame until
        // its write is released (`claim`, "A clean page written to fill a
        // gap"); a dirty one is dirty until then anyway.
        if f.is_dirty() || f.flushing.load(Ordering::Acquire) {
            return None;
        }
        // The exclusive latch keeps the frame's page as it is (`frame.rs`),
        // so the shard to lock is known before locking it.
        if let Some(id) = f.page() {
            let mut h = self.hash_write(id);
            if f.is_fixed() {
                return None;
            }
            h.remove(&id);
            f.set_page(None);
        } else if f.is_fixed() {
            return None;
        }
        lists.lru.remove(fid);
        Some(g)
    }

    /// One attempt to obtain a frame (see `BufferPool::get_free_frame`).
    pub fn take_free_or_evict(&self) -> Victim<'_> {
        let mut lists = self.lock_lists();
        if let Some(fid) = lists.free.pop() {
            drop(lists);
            // A stale waiter may still hold the latch for an instant.
            return Victim::Free(fid, self.frames[fid as usize].latch.write());
        }
        let mut dirty = None;
        let cands: Vec<u32> = lists.lru.iter_from_tail(SEARCH_DEPTH).collect();
        for fid in cands {
            let f = &self.frames[fid as usize];
            if f.is_dirty() && !f.is_fixed() {
                dirty.get_or_insert(fid);
                continue;
            }
            if let Some(g) = self.try_evict(&mut lists, fid) {
                return Victim::Evicted(fid, g);
            }
        }
        if let Some(fid) = dirty {
            // Fix under the page's hash-shard lock so no evicter can take
            // it meanwhile. The page read before the lock may have changed
            // by then: the entry, read under the lock, must still name
            // this frame.
            let f = &self.frames[fid as usize];
            if let Some(p) = f.page() {
                let h = self.hash_read(p);
                if h.get(&p) == Some(&fid) {
                    f.fix();
                    return Victim::Dirty(fid);
                }
            }
        }
        Victim::None
    }

    /// Counts for the cleaner's snapshot: free frames, LRU length, dirty
    /// pages, the oldest modification, and the oldest modifications of the
    /// first `sample` pages of the flush list (one lock of each list).
    pub fn state(&self, sample: usize) -> (usize, usize, usize, Option<Lsn>, Vec<Lsn>) {
        let (free, lru) = {
            let l = self.lock_lists();
            (l.free.len(), l.lru.len())
        };
        let fl = self.lock_flush_list();
        let lsns = fl.iter().take(sample).map(|e| e.0).collect();
        (free, lru, fl.len(), fl.first().map(|e| e.0), lsns)
    }
}

/// The page-hash shard of `id`: bits 40 and up of its hash. The map uses
/// the low bits for the bucket and the top seven for its control bytes, so
/// the ids of one shard still spread over both.
fn hash_shard(id: PageId) -> usize {
    use std::hash::BuildHasher;
    let h = BuildHasherDefault::<PageIdHasher>::default().hash_one(id);
    (h >> 40) as usize & (HASH_SHARDS - 1)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The page hash's hasher spreads what a pool holds (runs of page
    /// numbers in a few spaces) over both the low bits (the bucket) and
    /// the top 7 bits (hashbrown's control byte): no bucket of a table
    /// sized for the run gets more than a few ids, and every control byte
    /// value is used.
    #[test]
    fn page_ids_spread_over_buckets_and_control_bytes() {
        use std::hash::BuildHasher;
        let b = BuildHasherDefault::<PageIdHasher>::default();
        for space in [0u32, 1, 7] {
            let buckets = 1usize << 14;
            let mut load = vec![0u32; buckets];
            let mut top = std::collections::BTreeSet::new();
            for page_no in 0..buckets as u32 {
                let h = b.hash_one(PageId { space, page_no });
                load[h as usize & (buckets - 1)] += 1;
                top.insert(h >> 57);
            }
            let worst = load.iter().max().copied().unwrap_or(0);
            assert!(
                worst <= 8,
                "space {space}: a bucket holds {worst} of {buckets} ids"
            );
            assert_eq!(top.len(), 128, "space {space}: control bytes used");
        }
    }

    /// The shards share the ids of what a pool holds (runs of page numbers
    /// in a few spaces) evenly: each of [`HASH_SHARDS`] gets its share
    /// within a fifth, so that the quarter of slack each is sized with
    /// covers it, and the ids of one shard still spread over the map's
    /// buckets.
    #[test]
    fn page_ids_spread_over_the_hash_shards() {
        use std::hash::BuildHasher;
        let b = BuildHasherDefault::<PageIdHasher>::default();
        for (space, start) in [(0u32, 0u32), (1, 0), (7, 123_456)] {
            let n = 1u32 << 14;
            let mut load = [0u32; HASH_SHARDS];
            let mut buckets = vec![0u32; 1 << 11];
            for page_no in start..start + n {
                let id = PageId { space, page_no };
                let s = hash_shard(id);
                load[s] += 1;
                if s == 0 {
                    buckets[b.hash_one(id) as usize & ((1 << 11) - 1)] += 1;
                }
            }
            let share = n / HASH_SHARDS as u32;
            for (s, &l) in load.iter().enumerate() {
                assert!(
                    l.abs_diff(share) <= share / 5,
                    "space {space}: shard {s} holds {l} ids, a share is {share}"
                );
            }
            let worst = buckets.iter().max().copied().unwrap_or(0);
            assert!(
                worst <= 8,
                "space {space}: a bucket of shard 0 holds {worst}"
            );
        }
    }

    /// A lookup waits for its own page's shard and no other: while the
    /// write lock of page `p`'s shard is held (as an evicter or a loader
    /// holds it), a lookup of `p` neither finds nor fixes its frame, and a
    /// lookup of a page in another shard goes through.
    #[test]
    fn a_lookup_waits_for_its_own_shard_only() {
        let inst = Instance::new(64, 4096, 37, Arc::default());
        let p = PageId::new(0, 1);
        let q = (2..)
            .map(|n| PageId::new(0, n))
            .find(|&q| hash_shard(q) != hash_shard(p))
            .unwrap();
        let mut fids = Vec::new();
        for id in [p, q] {
            let Victim::Free(fid, g) = inst.take_free_or_evict() else {
                panic!("a fresh instance has free frames");
            };
            assert!(inst.install(id, fid));
            drop(g);
            inst.frames[fid as usize].unfix();
            fids.push(fid);
        }
        let held = inst.hash(p).write();
        std::thread::scope(|s| {
            let lookup = s.spawn(|| inst.lookup_and_fix(p));
            let fq = inst.lookup_and_fix(q).expect("q is cached");
            assert_eq!(fq, fids[1]);
            inst.frames[fq as usize].unfix();
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(
                !lookup.is_finished(),
                "the lookup of p passed its shard's lock"
            );
            assert!(!inst.frames[fids[0] as usize].is_fixed());
            drop(held);
            assert_eq!(lookup.join().unwrap(), Some(fids[0]));
        });
        assert!(inst.frames[fids[0] as usize].is_fixed());
    }

    /// A reader's lookup latches a free frame without fixing it, and the
    /// latch alone keeps an evicter off; a frame latched exclusively is
    /// fixed instead (the reader then waits for the latch outside every
    /// lock of the pool), and a fix keeps an evicter off as before.
    #[test]
    fn a_readers_latch_without_a_fix_keeps_the_page_from_eviction() {
        let inst = Instance::new(64, 4096, 37, Arc::default());
        let p = PageId::new(0, 1);
        let Victim::Free(fid, g) = inst.take_free_or_evict() else {
            panic!("a fresh instance has free frames");
        };
        assert!(inst.install(p, fid));
        drop(g);
        let f = &inst.frames[fid as usize];
        f.unfix();
        let evict = || {
            let mut lists = inst.lock_lists();
            inst.try_evict(&mut lists, fid).is_some()
        };

        let Some(ReadHit::Latched(got, g)) = inst.lookup_for_read(p) else {
            panic!("the latch is free: the lookup must take it");
        };
        assert_eq!(got, fid);
        assert!(!f.is_fixed(), "a latched reader holds no fix");
        assert!(!evict(), "evicted under a reader's latch");
        assert_eq!(f.page(), Some(p));
        drop(g);

        let x = f.latch.write();
        assert!(matches!(inst.lookup_for_read(p), Some(ReadHit::Fixed(got)) if got == fid));
        assert!(f.is_fixed());
        drop(x);
        assert!(!evict(), "evicted while fixed");
        f.unfix();

        assert!(evict(), "nothing holds the frame");
        assert!(inst.lookup_for_read(p).is_none());
    }

    /// Two shards' locks never share a cache line.
    #[test]
    fn hash_shards_lie_on_lines_of_their_own() {
        let inst = Instance::new(64, 4096, 37, Arc::default());
        let addr = |i: usize| &inst.hash[i] as *const HashShard as usize;
        for i in 1..HASH_SHARDS {
            assert!(addr(i) - addr(i - 1) >= 128);
            assert!(addr(i).is_multiple_of(128));
        }
    }

    /// What a frame costs beside its page, in bytes: the frame itself
    /// (latch, atomics, the buffer's pointer), its LRU links, its free-list
    /// slot, its page-hash entry (key, value and control byte, over
    /// hashbrown's 7/8 load factor) and, when dirty, its flush-list entry
    /// (a `BTreeSet` element, counted twice for node slack).
    fn bookkeeping_per_frame() -> usize {
        let hash = (std::mem::size_of::<(PageId, u32)>() + 1) * 8 / 7 + 1;
        let flush = 2 * std::mem::size_of::<(Lsn, u32)>();
        std::mem::size_of::<Frame>()
            + super::super::lru::LINK_BYTES
            + std::mem::size_of::<u32>()
            + hash
            + flush
    }

    /// Issue: per-frame metadata, the page hash and the lists cost at most
    /// 10 % of the pool at 16 KiB pages (and, as it happens, at 4 KiB).
    #[test]
    fn bookkeeping_is_under_a_tenth_of_a_page() {
        let per_frame = bookkeeping_per_frame();
        eprintln!("bookkeeping per frame: {per_frame} bytes");
        assert!(per_frame * 10 <= 16384, "{per_frame} bytes a frame");
        assert!(per_frame * 10 <= 4096, "{per_frame} bytes a frame");
    }

    /// The frames' pages come from one mapping, so a pool's page memory is
    /// exactly frames × page size, aligned, and untouched pages cost
    /// nothing.
    #[test]
    fn every_frame_page_lies_in_one_slab_aligned_and_zeroed() {
        let inst = Instance::new(64, 16384, 37, Arc::default());
        assert!(inst._slab.is_some(), "the mapping failed");
        let base = inst.frames[0].latch.read().as_ptr() as usize;
        for (i, f) in inst.frames.iter().enumerate() {
            let g = f.latch.read();
            assert_eq!(g.as_ptr() as usize, base + i * 16384, "frame {i}");
            assert!((g.as_ptr() as usize).is_multiple_of(crate::io::IO_ALIGN));
            assert!(g.iter().all(|&b| b == 0));
        }
    }
}
