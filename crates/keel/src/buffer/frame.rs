//! A buffer-pool frame: one page-sized aligned buffer behind a
//! shared/exclusive latch, plus the bookkeeping the pool and the flushers need.
//!
//! Field protocol:
//! - `page` changes only while the write lock of the page-hash shard of the
//!   id it leaves or takes *and* the frame's exclusive latch are held
//!   (eviction, loading).
//! - `fix` is incremented only under the read (or write) lock of the
//!   page-hash shard of the frame's page, so an evicter holding that shard's
//!   write lock sees a stable count; it is decremented freely. A fixed frame
//!   is never evicted, and neither is a latched one (eviction takes the
//!   exclusive latch). So a reader that takes the shared latch with
//!   `try_read` under the shard's read lock holds the page without a fix
//!   (`Instance::lookup_for_read`); only a reader that must wait for the
//!   latch fixes the frame first, and waits holding no lock of the pool.
//!   A hot read (`BufferPool::read_hot`) takes a guessed frame's shared
//!   latch with `try_read` under no lock at all and then compares `page`
//!   with the id it wants: `page` cannot change while the latch is held, so
//!   a match holds the page as surely as a latch taken through the hash.
//! - `oldest_mod`/`newest_mod` change only under the exclusive latch (marking
//!   dirty) or under the shared latch by the single flusher that wrote the
//!   page (marking clean); a page being written is held under a shared latch
//!   for the whole write, so it is neither changed nor evicted mid-write.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::io::AlignedBuf;
use crate::page::Lsn;
use crate::page::PageId;

const NO_PAGE: u64 = u64::MAX;

pub(crate) struct Frame {
    pub latch: RwLock<AlignedBuf>,
    page: AtomicU64,
    pub fix: AtomicU32,
    /// LSN of the first change not yet written to disk; 0 = clean.
    pub oldest_mod: AtomicU64,
    /// LSN of the newest change.
    pub newest_mod: AtomicU64,
    /// Instance LRU clock when the page entered the pool or was last made young.
    pub young_clock: AtomicU64,
    /// Milliseconds since pool start of the first access after loading.
    pub first_access_ms: AtomicU64,
    /// Set while one flusher writes the page, so that concurrent flushers
    /// (cleaners, sync-flushing writers) never write it twice; and while
    /// its failed write is held for retry (`flush::batch::held`).
    pub flushing: std::sync::atomic::AtomicBool,
    /// While `flushing`: the redo start of the first change made after the
    /// flusher copied the page (0: none), where the page re-enters the
    /// flush list when the write of the copy completes. Read and written
    /// under the instance's flush-list mutex.
    pub redirty: AtomicU64,
}

impl Frame {
    /// A free frame over `buf` (zero-filled).
    pub fn new(buf: AlignedBuf) -> Frame {
        Frame {
            latch: RwLock::new(buf),
            page: AtomicU64::new(NO_PAGE),
            fix: AtomicU32::new(0),
            oldest_mod: AtomicU64::new(0),
            newest_mod: AtomicU64::new(0),
            young_clock: AtomicU64::new(0),
            first_access_ms: AtomicU64::new(0),
            flushing: std::sync::atomic::AtomicBool::new(false),
            redirty: AtomicU64::new(0),
        }
    }

    pub fn page(&self) -> Option<PageId> {
        match self.page.load(Ordering::Acquire) {
            NO_PAGE => None,
            v => Some(PageId::new((v >> 32) as u32, v as u32)),
        }
    }

    pub fn set_page(&self, id: Option<PageId>) {
        let v = id.map_or(NO_PAGE, |p| ((p.space as u64) << 32) | p.page_no as u64);
        self.page.store(v, Ordering::Release);
    }

    pub fn fix(&self) {
        self.fix.fetch_add(1, Ordering::AcqRel);
    }

    pub fn unfix(&self) {
        let prev = self.fix.fetch_sub(1, Ordering::AcqRel);
        assert!(prev > 0, "buffer frame unfixed more often than fixed");
    }

    pub fn is_fixed(&self) -> bool {
        self.fix.load(Ordering::Acquire) > 0
    }

    pub fn oldest(&self) -> Lsn {
        self.oldest_mod.load(Ordering::Acquire)
    }

    pub fn is_dirty(&self) -> bool {
        self.oldest() != 0
    }
}
