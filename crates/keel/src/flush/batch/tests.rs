//! The batch writer on a real pool: neighbors, counters, the WAL rule.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::FlushKind;
use crate::buffer::{BufferPool, PoolConfig};
use crate::error::{Error, Result};
use crate::flush::doublewrite::{Doublewrite, Geometry};
use crate::flush::{Wal, WriteBack, WriteConfig};
use crate::io::{AlignedBuf, FaultyFs, FileSystem, FlushMethod, OsFileSystem};
use crate::metrics::Metrics;
use crate::page::Lsn;
use crate::page::{init_page, page_lsn, verify_page, PageId, PageType};
use crate::space::{data_file_name, Tablespace};

const PS: usize = 4096;
/// 256 frames: areas of 16 pages.
const FRAMES: usize = 256;

/// A log that is durable as soon as it is asked to be.
#[derive(Default)]
pub(super) struct HonestWal(AtomicU64);

impl Wal for HonestWal {
    fn flush_up_to(&self, lsn: Lsn) -> Result<()> {
        self.0.fetch_max(lsn, Ordering::AcqRel);
        Ok(())
    }
    fn flushed_lsn(&self) -> Lsn {
        self.0.load(Ordering::Acquire)
    }
}

/// A log whose first flush panics (a bug), the later ones are honest.
#[derive(Default)]
struct PanickingWal(std::sync::atomic::AtomicBool, HonestWal);

impl Wal for PanickingWal {
    fn flush_up_to(&self, lsn: Lsn) -> Result<()> {
        if !self.0.swap(true, Ordering::AcqRel) {
            panic!("the log's flush panicked");
        }
        self.1.flush_up_to(lsn)
    }
    fn flushed_lsn(&self) -> Lsn {
        self.1.flushed_lsn()
    }
}

/// A log whose `n`-th flush panics (counting from 1).
struct PanicAtWal(AtomicU64, u64, HonestWal);

impl Wal for PanicAtWal {
    fn flush_up_to(&self, lsn: Lsn) -> Result<()> {
        if self.0.fetch_add(1, Ordering::AcqRel) + 1 == self.1 {
            panic!("the log's flush panicked");
        }
        self.2.flush_up_to(lsn)
    }
    fn flushed_lsn(&self) -> Lsn {
        self.2.flushed_lsn()
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

pub(super) struct TestPool {
    pub(super) pool: BufferPool,
    pub(super) wb: WriteBack,
    metrics: Arc<Metrics>,
    pub(super) dir: tempfile::TempDir,
}

impl TestPool {
    fn new(flush_neighbors: u8, wal: Arc<dyn Wal>) -> TestPool {
        Self::with_fs(
            flush_neighbors,
            wal,
            &OsFileSystem::new(FlushMethod::NoSync),
        )
    }

    fn with_fs(flush_neighbors: u8, wal: Arc<dyn Wal>, fs: &dyn FileSystem) -> TestPool {
        Self::build(flush_neighbors, wal, fs, None)
    }

    /// Over `fs`, with room for more than two claim groups of dirty pages.
    fn large(fs: &dyn FileSystem) -> TestPool {
        Self::build_sized(0, Arc::new(HonestWal::default()), fs, None, 1, 4 * FRAMES)
    }

    /// With doublewrite areas of `pages_per_area` pages.
    pub(super) fn with_doublewrite(fs: &dyn FileSystem, pages_per_area: usize) -> TestPool {
        Self::build(0, Arc::new(HonestWal::default()), fs, Some(pages_per_area))
    }

    fn build(
        flush_neighbors: u8,
        wal: Arc<dyn Wal>,
        fs: &dyn FileSystem,
        dblwr_pages: Option<usize>,
    ) -> TestPool {
        Self::build_with_instances(flush_neighbors, wal, fs, dblwr_pages, 1)
    }

    fn build_with_instances(
        flush_neighbors: u8,
        wal: Arc<dyn Wal>,
        fs: &dyn FileSystem,
        dblwr_pages: Option<usize>,
        instances: usize,
    ) -> TestPool {
        Self::build_sized(flush_neighbors, wal, fs, dblwr_pages, instances, FRAMES)
    }

    fn build_sized(
        flush_neighbors: u8,
        wal: Arc<dyn Wal>,
        fs: &dyn FileSystem,
        dblwr_pages: Option<usize>,
        instances: usize,
        frames: usize,
    ) -> TestPool {
        let dir = tempfile::tempdir().unwrap();
        let metrics = Arc::new(Metrics::default());
        let space = Arc::new(Tablespace::create(fs, dir.path(), PS, 2, metrics.clone()).unwrap());
        space.finish_creation().unwrap();
        let dblwr = dblwr_pages.map(|pages_per_area| {
            let g = Geometry {
                files: 1,
                areas: 2,
                pages_per_area,
                page_size: PS,
            };
            Doublewrite::open_or_create(fs, dir.path(), g, space.creation_id(), metrics.clone())
                .unwrap()
        });
        let cfg = PoolConfig {
            page_size: PS,
            frames,
            instances,
            old_blocks_pct: 37,
            old_blocks_time_ms: 1000,
            free_wait_timeout: Duration::from_secs(5),
            validate: |_| Ok(()),
        };
        let wcfg = WriteConfig {
            write_io_threads: 2,
            flush_neighbors: crate::config::FlushNeighbors::from_code(flush_neighbors),
        };
        let wb = WriteBack::new(space.clone(), metrics.clone(), wal, dblwr, wcfg);
        let pool = BufferPool::new(cfg, space, metrics.clone());
        TestPool {
            pool,
            wb,
            metrics,
            dir,
        }
    }

    /// Two instances, no doublewrite, no neighbors.
    fn two_instances() -> TestPool {
        Self::build_with_instances(
            0,
            Arc::new(HonestWal::default()),
            &OsFileSystem::new(FlushMethod::NoSync),
            None,
            2,
        )
    }

    /// The first pages of two extents cached by different instances.
    fn extents_in_two_instances(&self) -> (u32, u32) {
        let extent = crate::space::EXTENT_PAGES;
        let of = |p: u32| self.pool.instance_of(PageId::new(0, p));
        let b = (1..64u32)
            .map(|e| e * extent)
            .find(|&p| of(p) != of(0))
            .expect("an extent in the other instance");
        (0, b)
    }

    /// Put page `page_no` in the pool, dirtied by redo `[start, start + 10)`
    /// when `start` is given, clean otherwise.
    pub(super) fn put(&self, page_no: u32, start: Option<Lsn>) {
        let id = PageId::new(0, page_no);
        let mut w = self.pool.create(id).unwrap();
        init_page(&mut w, id, PageType::BtreeLeaf);
        match start {
            Some(s) => self.pool.mark_dirty(&mut w, s, s + 10),
            // A clean page, as if read from disk: the guard keeps it.
            None => w.keep_changes(),
        }
    }

    pub(super) fn metric(&self, name: &str) -> u64 {
        self.metrics.get(name).unwrap()
    }

    /// Page numbers still on the flush list, ascending.
    pub(super) fn dirty_pages(&self) -> Vec<u32> {
        let inst = &self.pool.instances[0];
        let mut v: Vec<u32> = inst
            .lock_flush_list()
            .iter()
            .map(|&(_, fid)| inst.frames[fid as usize].page().unwrap().page_no)
            .collect();
        v.sort_unstable();
        v
    }

    /// Does the data file hold a valid image of `page_no`?
    pub(super) fn on_disk(&self, page_no: u32) -> bool {
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
    assert_eq!(crate::flush::neighbors::area_size(FRAMES), 16);
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

/// A panic in a batch, with its pages claimed (here in the write-ahead
/// step), leaves none of them claimed: a page cleaner that survives the
/// panic flushes them in its next batch. Before, the claims' flags stayed
/// set and no flusher could write those pages again, nor the checkpoint
/// pass them.
#[test]
fn a_panic_in_a_batch_leaves_no_page_claimed() {
    let t = TestPool::new(0, Arc::new(PanickingWal::default()));
    for p in 0..8 {
        t.put(p, Some(100 + 10 * u64::from(p)));
    }
    let batch = || {
        t.wb.flush_list_batch(&t.pool, 0, 8, u64::MAX, FlushKind::Adaptive)
    };
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(batch));
    assert!(panicked.is_err());
    assert_eq!(t.dirty_pages().len(), 8);
    assert_eq!(batch().unwrap(), 8);
    assert_eq!(t.dirty_pages(), Vec::<u32>::new());
}

/// Flush P through a one-page background batch; check what was written.
fn flush_p(mode: u8, expect: &[u32], writes: u64) {
    let t = pattern_pool(mode);
    let n =
        t.wb.flush_list_batch(&t.pool, 0, 1, u64::MAX, FlushKind::Background)
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

/// Under `flush_neighbors = auto` a batch follows the mode the policy
/// chose (`FlushTargets::neighbors`, handed over by the cleaners every
/// round); a fixed option overrides the policy's choice.
#[test]
fn auto_follows_the_policys_choice_and_a_fixed_mode_overrides_it() {
    use crate::flush::neighbors::NeighborMode;
    let run = |option: u8, chosen: NeighborMode| {
        let t = pattern_pool(option);
        t.wb.set_chosen_neighbors(chosen);
        assert_eq!(t.wb.flush_neighbors(), {
            match crate::config::FlushNeighbors::from_code(option).fixed() {
                Some(fixed) => fixed,
                None => chosen,
            }
        });
        t.wb.flush_list_batch(&t.pool, 0, 1, u64::MAX, FlushKind::Background)
            .unwrap()
    };
    let auto = crate::config::FlushNeighbors::AUTO_CODE;
    assert_eq!(run(auto, NeighborMode::Off), 1);
    // 8..=12: the contiguous dirty run around P.
    assert_eq!(run(auto, NeighborMode::Contiguous), 5);
    assert_eq!(run(0, NeighborMode::Contiguous), 1);
    assert_eq!(run(1, NeighborMode::Off), 5);
}

#[test]
fn single_page_flush_never_takes_neighbors() {
    let t = pattern_pool(2);
    let inst = &t.pool.instances[0];
    let fid = *inst
        .hash(PageId::new(0, P))
        .read()
        .get(&PageId::new(0, P))
        .unwrap();
    t.wb.flush_frames(&t.pool, 0, &[fid], FlushKind::Single)
        .unwrap();
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
        let n =
            t.wb.flush_list_batch(&t.pool, 0, 100, u64::MAX, FlushKind::Adaptive)
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
    let fid = *inst
        .hash(PageId::new(0, P))
        .read()
        .get(&PageId::new(0, P))
        .unwrap();
    let n =
        t.wb.flush_frames(&t.pool, 0, &[fid], FlushKind::Lru)
            .unwrap();
    assert_eq!(n, 5);
    assert_eq!(t.metric("buffer_LRU_batch_flush_total_pages"), 5);
    assert_eq!(t.metric("buffer_flush_neighbor_total_pages"), 4);
}

#[test]
fn a_page_latched_exclusively_ends_the_run() {
    let t = pattern_pool(1);
    // Page 25 (position 9) is being changed by a user thread.
    let held = t.pool.write(PageId::new(0, BASE + 9)).unwrap();
    let n =
        t.wb.flush_list_batch(&t.pool, 0, 1, u64::MAX, FlushKind::Background)
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
    let err =
        t.wb.flush_list_batch(&t.pool, 0, 1, u64::MAX, FlushKind::Background)
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
    let n =
        t.wb.flush_list_batch(&t.pool, 0, 1, u64::MAX, FlushKind::Background)
            .unwrap();
    assert_eq!(n, 1);
    assert_eq!(wal.flushed_lsn(), 11);
    assert!(t.dirty_pages().is_empty());
    let mut buf = AlignedBuf::new(PS);
    t.pool.space.read_page(PageId::new(0, 5), &mut buf).unwrap();
    assert_eq!(page_lsn(&buf), 11);
}

/// The write-ahead check on the real log, while a log sync is held inside
/// its fdatasync: a page whose redo is durable already is written at once;
/// a page whose redo is only written (not synced) waits for the sync round
/// that covers it, not for the log's locks, and is written when it ends.
#[test]
fn wal_rule_waits_only_for_the_sync_round_a_page_needs() {
    use std::path::Path;
    use std::time::Instant;

    use crate::engine::LogWal;
    use crate::io::faulty::FaultyFs;
    use crate::redo::format::{kind, LOG_FILE_HDR};
    use crate::redo::Log;

    const WAIT: Duration = Duration::from_secs(10);
    let fs = FaultyFs::new();
    let log = Arc::new(
        Log::create(
            &fs,
            Path::new("/db"),
            LOG_FILE_HDR + (64 << 10),
            2,
            7,
            Arc::default(),
        )
        .unwrap(),
    );
    let append = |fill: u8| {
        log.append(kind::MTR, &[fill; 100], |s, e| (s, e))
            .unwrap()
            .1
    };
    let t = TestPool::new(0, Arc::new(LogWal(log.clone())));
    let dirty = |page_no: u32, (start, end): (Lsn, Lsn)| {
        let id = PageId::new(0, page_no);
        let mut w = t.pool.create(id).unwrap();
        init_page(&mut w, id, PageType::BtreeLeaf);
        t.pool.mark_dirty(&mut w, start, end);
    };

    // Page 5's change is durable; page 7's is written while a round that
    // began before it is held, so only the next round covers it.
    let durable = append(1);
    log.write_up_to(durable.1, true).unwrap();
    let in_round = append(2);
    let hold = fs.arm("/redo-.sync:hold", 0).unwrap();
    std::thread::scope(|s| {
        let round = s.spawn(|| log.write_up_to(in_round.1, true));
        hold.wait_held(WAIT).unwrap();
        let written = append(3);
        log.write_up_to(written.1, false).unwrap();
        dirty(5, durable);
        dirty(7, written);
        assert_eq!(log.flushed_lsn(), durable.1);

        let page5 = s.spawn(|| {
            t.wb.flush_list_batch(&t.pool, 0, 1, u64::MAX, FlushKind::Background)
        });
        let deadline = Instant::now() + WAIT;
        while !page5.is_finished() {
            assert!(
                Instant::now() < deadline,
                "a page whose redo is durable waited for the held sync"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(page5.join().unwrap().unwrap(), 1);
        assert!(t.on_disk(5));
        assert_eq!(t.dirty_pages(), [7]);

        let page7 = s.spawn(|| {
            t.wb.flush_list_batch(&t.pool, 0, 1, u64::MAX, FlushKind::Background)
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !page7.is_finished(),
            "a page whose redo is only written went out before a sync covered it"
        );
        assert!(!t.on_disk(7));
        assert!(hold.release());
        round.join().unwrap().unwrap();
        assert_eq!(page7.join().unwrap().unwrap(), 1);
        assert!(t.on_disk(7));
        assert!(log.flushed_lsn() >= written.1);
    });
    assert!(t.dirty_pages().is_empty());
}

/// A user thread changes a page while the batch writes its copy (the
/// write held by a failpoint): it does not wait for the write, since the
/// latch is held only for the copy; the copy reaches the disk; and the
/// page stays dirty from the change, so no checkpoint passes the change and
/// the next flush writes it.
#[test]
fn a_page_changed_while_its_copy_is_written_stays_dirty_from_that_change() {
    let fs = FaultyFs::new();
    let t = TestPool::with_fs(0, Arc::new(HonestWal::default()), &fs);
    t.put(5, Some(100));
    let id = PageId::new(0, 5);
    let hold = fs.arm("data-.write:hold", 0).unwrap();
    std::thread::scope(|s| {
        let flusher = s.spawn(|| {
            t.wb.flush_list_batch(&t.pool, 0, 8, u64::MAX, FlushKind::Background)
        });
        hold.wait_held(Duration::from_secs(10)).unwrap();
        // The copy's write is in flight: the page can be changed at once.
        let started = Instant::now();
        {
            let mut w = t.pool.write(id).unwrap();
            w[200] = 0xAB;
            t.pool.mark_dirty(&mut w, 200, 210);
        }
        assert!(started.elapsed() < Duration::from_secs(1));
        // Still being written: dirty from its first change.
        assert_eq!(t.pool.oldest_modification(), Some(100));
        hold.release();
        assert_eq!(flusher.join().unwrap().unwrap(), 1);
    });
    // The copy is on disk, without the change; the page is dirty from it.
    assert_eq!(t.dirty_pages(), [5]);
    assert_eq!(t.pool.oldest_modification(), Some(200));
    assert_eq!(t.metric("buffer_pool_pages_dirty"), 1);
    let mut buf = AlignedBuf::new(PS);
    t.pool.space.read_page(id, &mut buf).unwrap();
    assert_eq!(page_lsn(&buf), 110);
    assert_ne!(buf[200], 0xAB);
    // The next flush writes the change and makes the page clean.
    let n =
        t.wb.flush_list_batch(&t.pool, 0, 8, u64::MAX, FlushKind::Background)
            .unwrap();
    assert_eq!(n, 1);
    assert!(t.dirty_pages().is_empty());
    assert_eq!(t.pool.oldest_modification(), None);
    assert_eq!(t.metric("buffer_pool_pages_dirty"), 0);
    t.pool.space.read_page(id, &mut buf).unwrap();
    assert_eq!(page_lsn(&buf), 210);
    assert_eq!(buf[200], 0xAB);
    let inst = &t.pool.instances[0];
    assert!(inst
        .frames
        .iter()
        .all(|f| !f.flushing.load(Ordering::Acquire) && f.redirty.load(Ordering::Acquire) == 0));
}

/// The first [`CLAIM_GROUP`] + 20 pages of data file 0 (its extents are
/// every other one of two files), so one writer writes them in order; the
/// first [`CLAIM_GROUP`] are one group, the last 20 the next.
fn two_groups_in_file_0(t: &TestPool) -> Vec<u32> {
    let pages: Vec<u32> = (0..)
        .filter(|&p| t.pool.space.locate(p).0 == 0)
        .take(super::CLAIM_GROUP + 20)
        .collect();
    // Oldest first in page order: the flush list yields them so.
    for (k, &p) in pages.iter().enumerate() {
        t.put(p, Some(100 + 10 * k as u64));
    }
    pages
}

impl TestPool {
    /// After a crash of `fs`: the pages the open's doublewrite repair
    /// restores (the pool's geometry, areas of `pages_per_area` pages).
    pub(super) fn restored_after_crash(&self, fs: &FaultyFs, pages_per_area: usize) -> Vec<u32> {
        let dir = self.dir.path();
        let m = Arc::new(Metrics::default());
        let space = Tablespace::open(fs, dir, PS, 2, m.clone()).unwrap();
        let g = Geometry {
            files: 1,
            areas: 2,
            pages_per_area,
            page_size: PS,
        };
        let mut dw = Doublewrite::open_or_create(fs, dir, g, space.creation_id(), m).unwrap();
        let report = dw.repair_torn_pages(fs, &space).unwrap();
        report.pages_restored.iter().map(|p| p.page_no).collect()
    }

    pub(super) fn is_flushing(&self, page_no: u32) -> bool {
        let fid = self.pool.frame_of(0, PageId::new(0, page_no)).unwrap();
        self.pool.instances[0].frames[fid as usize]
            .flushing
            .load(Ordering::Acquire)
    }
}

/// The pipeline: while the first group's write is held by a failpoint,
/// the flusher claims and copies the next group (the crew writes one
/// group while the flusher prepares the next), and no page of the first
/// group is released before its write returns.
#[test]
fn the_next_group_is_prepared_while_the_first_is_written() {
    let fs = FaultyFs::new();
    let t = TestPool::large(&fs);
    let pages = two_groups_in_file_0(&t);
    let second = &pages[super::CLAIM_GROUP..];
    let hold = fs.arm("data-.write:hold", 0).unwrap();
    std::thread::scope(|s| {
        let flusher = s.spawn(|| {
            t.wb.flush_list_batch(&t.pool, 0, 1024, u64::MAX, FlushKind::Background)
        });
        hold.wait_held(Duration::from_secs(10)).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !second.iter().all(|&p| t.is_flushing(p)) {
            assert!(
                Instant::now() < deadline,
                "the second group was not claimed while the first was written"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // Its latches were dropped after the copy: a user thread gets one
        // at once.
        let started = Instant::now();
        drop(t.pool.write(PageId::new(0, second[0])).unwrap());
        assert!(started.elapsed() < Duration::from_secs(1));
        // Nothing of the first group was released: every page is dirty.
        assert_eq!(t.dirty_pages(), pages);
        hold.release();
        assert_eq!(flusher.join().unwrap().unwrap(), pages.len());
    });
    assert!(t.dirty_pages().is_empty());
    assert!(pages.iter().all(|&p| t.on_disk(p) && !t.is_flushing(p)));
}

/// A write of the first group fails: the call fails, that group's pages
/// stay dirty, and the group already handed to the crew behind it is
/// finished as its own write went (written, clean). Nothing stays
/// claimed, and the next flush writes the rest.
#[test]
fn a_failed_group_stays_dirty_and_the_group_in_flight_behind_it_is_written() {
    let fs = FaultyFs::new();
    let t = TestPool::large(&fs);
    let pages = two_groups_in_file_0(&t);
    let (first, second) = pages.split_at(super::CLAIM_GROUP);
    fs.arm("data-.write:eio", 0).unwrap();
    let err =
        t.wb.flush_list_batch(&t.pool, 0, 1024, u64::MAX, FlushKind::Background)
            .unwrap_err();
    assert!(err.to_string().contains("write"), "{err}");
    assert_eq!(t.dirty_pages(), first);
    assert!(second.iter().all(|&p| t.on_disk(p)));
    assert!(pages.iter().all(|&p| !t.is_flushing(p)));
    assert_eq!(t.metric("buffer_pages_written"), second.len() as u64);
    let n =
        t.wb.flush_list_batch(&t.pool, 0, 1024, u64::MAX, FlushKind::Background)
            .unwrap();
    assert_eq!(n, first.len());
    assert!(t.dirty_pages().is_empty());
}

/// With doublewrite areas smaller than a claim group, a group is written
/// an area's worth at a time, each chunk after the doublewrite copy and
/// the sync of the one before. Every page of the group is copied and
/// unlatched before the first chunk's I/O: while the first chunk's
/// doublewrite copy is held by a failpoint, a user thread latches the
/// group's last page at once (it used to wait for every chunk before).
#[test]
fn a_group_is_unlatched_before_its_first_doublewrite_copy() {
    let fs = FaultyFs::new();
    let t = TestPool::with_doublewrite(&fs, 4);
    let pages: Vec<u32> = (0..16).collect();
    for (k, &p) in pages.iter().enumerate() {
        t.put(p, Some(100 + 10 * k as u64));
    }
    let hold = fs.arm("/dblwr-.write:hold", 0).unwrap();
    std::thread::scope(|s| {
        let flusher = s.spawn(|| {
            t.wb.flush_list_batch(&t.pool, 0, 16, u64::MAX, FlushKind::Background)
        });
        hold.wait_held(Duration::from_secs(10)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let last = PageId::new(0, *pages.last().unwrap());
        let pool = &t.pool;
        let user = s.spawn(move || {
            drop(pool.write(last).unwrap());
            tx.send(()).unwrap();
        });
        let latched = rx.recv_timeout(Duration::from_secs(2));
        // Let the flush go on in either case, so that a failure cannot hang.
        hold.release();
        user.join().unwrap();
        assert!(
            latched.is_ok(),
            "the last page of the group stayed latched through the first chunk's I/O"
        );
        assert_eq!(flusher.join().unwrap().unwrap(), pages.len());
    });
    assert!(t.dirty_pages().is_empty());
    assert!(pages.iter().all(|&p| t.on_disk(p)));
    assert_eq!(t.metric("buffer_flush_batches"), 1);
}

/// Only an area write begun with no in-place write in flight is timed for
/// the policy (`dblwr_alone_*`; `policy::steady::merge`, "The measure"):
/// with the first chunk's in-place write held by a failpoint, the second
/// chunk's copy is written behind it and is not counted among them.
#[test]
fn an_area_write_behind_an_in_place_write_is_not_timed_for_the_policy() {
    let fs = FaultyFs::new();
    let t = TestPool::with_doublewrite(&fs, 4);
    let pages: Vec<u32> = (0..8).collect();
    for (k, &p) in pages.iter().enumerate() {
        t.put(p, Some(100 + 10 * k as u64));
    }
    let hold = fs.arm("data-.write:hold", 0).unwrap();
    std::thread::scope(|s| {
        let flusher = s.spawn(|| {
            t.wb.flush_list_batch(&t.pool, 0, 8, u64::MAX, FlushKind::Background)
        });
        hold.wait_held(Duration::from_secs(10)).unwrap();
        // The second chunk's copy goes out while the first chunk's write
        // is held.
        let deadline = Instant::now() + Duration::from_secs(10);
        while t.metric("dblwr_writes") < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let copies = t.metric("dblwr_writes");
        // Let the flush go on in either case, so that a failure cannot hang.
        hold.release();
        assert_eq!(flusher.join().unwrap().unwrap(), pages.len());
        assert_eq!(
            copies, 2,
            "the second copy was not written behind the held write"
        );
    });
    assert_eq!(t.metric("dblwr_alone_writes"), 1);
    assert_eq!(t.metric("dblwr_alone_pages"), 4);
    assert!(t.metric("dblwr_alone_write_us_total") <= t.metric("dblwr_write_us_total"));
}

/// One data-file sync covers two chunks (module doc, step 7), and each
/// chunk's doublewrite area stays claimed until the sync that covers its
/// in-place writes: 16 pages in areas of 4 are four chunks and two syncs
/// (four before). Power fails while the first sync is held: both areas it
/// covers still hold their copies (no flusher could have reused them),
/// and recovery restores every page of both chunks the crash dropped.
#[test]
fn a_sync_covers_two_chunks_and_their_areas_wait_for_it() {
    use crate::io::faulty::CrashMode;
    let put_16 = |t: &TestPool| {
        let pages: Vec<u32> = (0..16).collect();
        assert!(pages.iter().all(|&p| t.pool.space.locate(p).0 == 0));
        for (k, &p) in pages.iter().enumerate() {
            t.put(p, Some(100 + 10 * k as u64));
        }
        pages
    };
    let fs = FaultyFs::new();
    let t = TestPool::with_doublewrite(&fs, 4);
    let pages = put_16(&t);
    let n =
        t.wb.flush_list_batch(&t.pool, 0, 16, u64::MAX, FlushKind::Background)
            .unwrap();
    assert_eq!(n, 16);
    assert_eq!(t.metric("os_data_fsyncs"), 2);
    assert!(pages.iter().all(|&p| t.on_disk(p)));

    let fs = FaultyFs::new();
    let t = TestPool::with_doublewrite(&fs, 4);
    let pages = put_16(&t);
    let sync = fs.arm("/data-.sync:hold", 0).unwrap();
    std::thread::scope(|s| {
        let flusher = s.spawn(|| {
            t.wb.flush_list_batch(&t.pool, 0, 16, u64::MAX, FlushKind::Background)
        });
        sync.wait_held(Duration::from_secs(10)).unwrap();
        let dw = t.wb.dblwr.as_ref().unwrap();
        assert!(
            dw.try_claim().is_none(),
            "an area was free before the sync of its chunk's writes"
        );
        // The first two chunks' pages were written and released.
        assert!(pages[..8].iter().all(|&p| !t.is_flushing(p)));
        fs.crash(CrashMode::DropUnsynced);
        sync.release();
        assert!(flusher.join().unwrap().is_err());
    });
    assert_eq!(t.restored_after_crash(&fs, 4), pages[..8]);
}

/// A call that panics while a chunk's area waits for its sync syncs it
/// before giving it back (`Drop for Pipeline`): given back unsynced, a
/// later chunk could overwrite the copies of pages whose in-place writes
/// a power loss may still tear. The third chunk's write-ahead check
/// panics, with the first chunk written and waiting for its sync and the
/// second in flight: the first chunk's pages are durable, and both areas
/// are free again.
#[test]
fn a_panic_syncs_the_areas_waiting_for_their_sync_before_giving_them_back() {
    use crate::io::faulty::CrashMode;
    let fs = FaultyFs::new();
    let wal = Arc::new(PanicAtWal(AtomicU64::new(0), 3, HonestWal::default()));
    let t = TestPool::build(0, wal, &fs, Some(4));
    for p in 0..16 {
        assert_eq!(t.pool.space.locate(p).0, 0);
        t.put(p, Some(100 + 10 * u64::from(p)));
    }
    let batch = || {
        t.wb.flush_list_batch(&t.pool, 0, 16, u64::MAX, FlushKind::Background)
    };
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(batch));
    assert!(panicked.is_err());
    assert_eq!(t.metric("os_data_fsyncs"), 1, "given back unsynced");
    let dw = t.wb.dblwr.as_ref().unwrap();
    assert!(dw.try_claim().is_some() && dw.try_claim().is_some());
    fs.crash(CrashMode::DropUnsynced);
    let image = fs
        .durable_image(&t.dir.path().join(data_file_name(0)))
        .unwrap();
    for p in 0..4 {
        let (_, off) = t.pool.space.locate(p);
        let page = &image[off as usize..off as usize + PS];
        assert!(verify_page(page, PageId::new(0, p)).is_ok(), "page {p}");
    }
}

/// With `neighbors_in_batch_size` (steady), neighbors count against the
/// batch: asked for 4 pages with area neighbors on, a batch writes 4, not
/// the whole area of 16 dirty pages (classic's batch does). A contiguous
/// run is one write whatever its length, so it is finished, not cut at the
/// batch's size: the rest of it would cost another write later.
#[test]
fn neighbors_can_count_against_the_batch_size() {
    for (mode, capped, expect) in [(2, false, 16), (2, true, 4), (1, true, 16)] {
        let t = TestPool::new(mode, Arc::new(HonestWal::default()));
        for p in 0..16 {
            t.put(p, Some(100 + 10 * u64::from(p)));
        }
        t.wb.set_neighbors_in_batch_size(capped);
        let n =
            t.wb.flush_list_batch(&t.pool, 0, 4, u64::MAX, FlushKind::Adaptive)
                .unwrap();
        assert_eq!(n, expect, "mode {mode}, capped: {capped}");
        assert_eq!(t.dirty_pages().len(), 16 - expect);
        if mode == 1 {
            assert_eq!(t.metric("os_data_writes"), 1, "one run, one write");
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// The bound `neighbors_in_batch_size` promises, over any pattern of
    /// dirty pages in three areas of 16 (a 256-frame pool): a batch asked
    /// for `asked` pages writes at least that many (or every dirty page),
    /// at most that many with area neighbors, and with contiguous ones at
    /// most the rest of one run more, so less than an area over.
    #[test]
    fn a_batch_passes_its_size_by_less_than_an_area(
        dirty in proptest::collection::vec(proptest::bool::ANY, 48),
        asked in 1usize..24,
        mode in 1u8..=2,
    ) {
        let t = TestPool::new(mode, Arc::new(HonestWal::default()));
        let mut n_dirty = 0;
        for (p, &d) in dirty.iter().enumerate() {
            // Oldest modifications in a scattered order, so that the
            // batch's pages are not the lowest page numbers.
            let lsn = 100 + 10 * ((p as u64 * 29) % 48);
            t.put(p as u32, d.then_some(lsn));
            n_dirty += usize::from(d);
        }
        t.wb.set_neighbors_in_batch_size(true);
        let n = t
            .wb
            .flush_list_batch(&t.pool, 0, asked, u64::MAX, FlushKind::Adaptive)
            .unwrap();
        let area = crate::flush::neighbors::area_size(FRAMES) as usize;
        let over = if mode == 1 { area - 1 } else { 0 };
        proptest::prop_assert!(n >= asked.min(n_dirty), "{n} written, {asked} asked");
        proptest::prop_assert!(n <= asked + over, "{n} written, {asked} asked, mode {mode}");
    }
}

/// LRU flushing writes at most `write_max` of the dirty pages it meets
/// (steady bounds a round's LRU writes); `usize::MAX` writes them all, as
/// InnoDB's LRU flushing (and `classic`) does.
#[test]
fn lru_flushing_writes_at_most_write_max_pages() {
    for (write_max, expect) in [(usize::MAX, 16), (4, 4)] {
        let t = TestPool::new(0, Arc::new(HonestWal::default()));
        for p in 0..16 {
            t.put(p, Some(100 + 10 * u64::from(p)));
        }
        // Want every frame free, so that the whole tail is scanned.
        let (written, _) =
            t.wb.lru_flush(&t.pool, 0, FRAMES, FRAMES, write_max)
                .unwrap();
        assert_eq!(written, expect, "write_max {write_max}");
        assert_eq!(t.dirty_pages().len(), 16 - expect);
    }
}

/// Every page an LRU flush writes leaves the pool, even when fewer free
/// frames were wanted: kept at the tail, clean, it is changed again before
/// it leaves and written twice.
#[test]
fn lru_flushing_frees_every_page_it_writes() {
    let t = TestPool::new(0, Arc::new(HonestWal::default()));
    for p in 0..16 {
        t.put(p, Some(100 + 10 * u64::from(p)));
    }
    // One frame more than is free now: the scan meets only dirty pages.
    let free = FRAMES - 16;
    let (written, evicted) =
        t.wb.lru_flush(&t.pool, 0, FRAMES, free + 1, usize::MAX)
            .unwrap();
    assert_eq!((written, evicted), (16, 16));
    assert!(t.dirty_pages().is_empty());
    for p in 0..16 {
        assert!(
            !t.pool.contains(PageId::new(0, p)),
            "page {p} is still cached"
        );
    }
}

/// A flush-list batch's first claim, the oldest page, waits for a user
/// thread's exclusive latch (at most `oldest_latch_wait`) instead of
/// passing the page over: the checkpoint must not wait for a hot page to
/// be caught unlatched by chance.
#[test]
fn the_oldest_page_is_waited_for_a_bounded_time() {
    // The latch is let go while the flusher waits: P is written.
    let t = pattern_pool(0);
    t.wb.set_oldest_latch_wait(Duration::from_secs(10));
    let held = t.pool.write(PageId::new(0, P)).unwrap();
    let started = Instant::now();
    let n = std::thread::scope(|s| {
        let flusher = s.spawn(|| {
            t.wb.flush_list_batch(&t.pool, 0, 1, u64::MAX, FlushKind::Adaptive)
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(30));
        drop(held);
        flusher.join().unwrap()
    });
    assert_eq!(n, 1);
    assert!(t.on_disk(P));
    assert!(started.elapsed() >= Duration::from_millis(30));
    assert_eq!(t.metric("buffer_flush_latched_skips"), 0);

    // Held past the wait: passed over, and counted.
    let t = pattern_pool(0);
    t.wb.set_oldest_latch_wait(Duration::from_millis(20));
    let held = t.pool.write(PageId::new(0, P)).unwrap();
    let started = Instant::now();
    let n =
        t.wb.flush_list_batch(&t.pool, 0, 1, u64::MAX, FlushKind::Adaptive)
            .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(20));
    drop(held);
    assert_eq!(n, 0);
    assert!(!t.on_disk(P));
    assert_eq!(t.metric("buffer_flush_latched_skips"), 1);

    // No wait set (classic), or an LRU batch: passed over at once.
    let t = pattern_pool(0);
    let held = t.pool.write(PageId::new(0, P)).unwrap();
    let n =
        t.wb.flush_list_batch(&t.pool, 0, 1, u64::MAX, FlushKind::Adaptive)
            .unwrap();
    drop(held);
    assert_eq!(n, 0);
    assert_eq!(t.metric("buffer_flush_latched_skips"), 1);
}

/// A cleaner host over a test pool whose checkpoint records how many LRU
/// and flush-list pages had been written when it was called.
struct RecordingHost {
    t: TestPool,
    seen: parking_lot::Mutex<Vec<(u64, u64)>>,
    /// Point `checkpoint`: at the start of every checkpoint.
    points: crate::failpoint::Points,
}

impl RecordingHost {
    /// Pages `0..n` dirty, in LSN order.
    fn with_dirty_pages(n: u32) -> RecordingHost {
        let host = RecordingHost::over(TestPool::new(0, Arc::new(HonestWal::default())));
        for p in 0..n {
            host.t.put(p, Some(100 + 10 * u64::from(p)));
        }
        host
    }

    /// A pool of 4 instances holding 32 dirty pages of every instance,
    /// interleaved in LSN order (4 pages per extent, extents map to
    /// instances; the `k`-th page's oldest change at LSN 100 + 10 k),
    /// and those pages, oldest first.
    fn four_instances_interleaved() -> (RecordingHost, Vec<u32>) {
        let t = TestPool::build_with_instances(
            0,
            Arc::new(HonestWal::default()),
            &OsFileSystem::new(FlushMethod::NoSync),
            Some(64),
            4,
        );
        let host = RecordingHost::over(t);
        let extent = crate::space::EXTENT_PAGES;
        let pages: Vec<u32> = (0..8u32)
            .flat_map(|e| (0..4).map(move |k| e * extent + k))
            .collect();
        for (k, &p) in pages.iter().enumerate() {
            host.t.put(p, Some(100 + 10 * k as u64));
        }
        (host, pages)
    }

    fn over(t: TestPool) -> RecordingHost {
        RecordingHost {
            t,
            seen: parking_lot::Mutex::new(Vec::new()),
            points: crate::failpoint::Points::default(),
        }
    }
}

impl crate::flush::cleaner::CleanerHost for RecordingHost {
    fn pool(&self) -> &BufferPool {
        &self.t.pool
    }
    fn write_back(&self) -> &WriteBack {
        &self.t.wb
    }
    fn log_view(&self) -> crate::flush::cleaner::LogView {
        crate::flush::cleaner::LogView::default()
    }
    fn flush_list_sample(&self) -> usize {
        1024
    }
    fn tick(&self, _urgent: bool) -> Result<()> {
        Ok(())
    }
    fn set_writer_limit(&self, _limit: Option<crate::flush::policy::WriterLimit>) {}
    fn fresh_policy(&self) -> Box<dyn crate::flush::policy::FlushPolicy> {
        crate::flush::policy::from_options(&crate::config::Options::default())
    }
    fn cleaners_failed(&self, _why: &str) {}
    fn checkpoint(&self) -> Result<()> {
        self.points.hit("checkpoint");
        self.seen.lock().push((
            self.t.metric("buffer_LRU_batch_flush_total_pages"),
            self.t.metric("buffer_flush_adaptive_total_pages"),
        ));
        Ok(())
    }
}

/// A round for instance 0: every frame wanted free, at most 64 LRU writes,
/// `list_pages` flush-list pages, batches of 16.
fn lru_and_list_round(list_pages: usize, each_batch: bool) -> crate::flush::policy::FlushTargets {
    crate::flush::policy::FlushTargets {
        instances: vec![crate::flush::policy::InstanceTarget {
            lru_want_free: FRAMES,
            lru_scan: FRAMES,
            lru_write_max: 64,
            list_pages,
            list_lsn_limit: Lsn::MAX,
            list_kind: FlushKind::Adaptive,
            list_batch: 16,
        }],
        checkpoint_each_batch: each_batch,
        ..Default::default()
    }
}

/// With a checkpoint after every flush-list batch, a round's LRU writes go
/// in batches of the flush-list batch's size between them, so the
/// checkpoint keeps moving while LRU flushing runs; without, LRU flushing
/// writes its whole share first (as InnoDB's cleaners do).
#[test]
fn lru_writes_go_between_flush_list_batches_when_each_batch_checkpoints() {
    for each_batch in [true, false] {
        let host = RecordingHost::with_dirty_pages(200);
        let targets = lru_and_list_round(64, each_batch);
        assert!(!crate::flush::cleaner::do_share(&host, 0, 1, &targets));
        assert_eq!(host.t.metric("buffer_LRU_batch_flush_total_pages"), 64);
        assert_eq!(host.t.metric("buffer_flush_adaptive_total_pages"), 64);
        let seen = host.seen.lock().clone();
        if each_batch {
            // One checkpoint per flush-list batch of 16, each after one
            // LRU batch of 16.
            let expect: Vec<(u64, u64)> = (1..=4).map(|k| (16 * k, 16 * k)).collect();
            assert_eq!(seen, expect);
        } else {
            assert!(seen.is_empty(), "{seen:?}");
        }
    }
}

/// With no flush-list work in the round, LRU flushing writes its share in
/// one batch, not in flush-list-sized pieces.
#[test]
fn lru_writes_go_in_one_batch_when_no_flush_list_work_is_left() {
    let host = RecordingHost::with_dirty_pages(200);
    let targets = lru_and_list_round(0, true);
    assert!(!crate::flush::cleaner::do_share(&host, 0, 1, &targets));
    assert_eq!(host.t.metric("buffer_LRU_batch_flush_total_pages"), 64);
    assert_eq!(host.t.metric("buffer_flush_batches"), 1);
}

/// A round asked for `list_pages` pages of the flush list writes them all
/// when neighbors count in a batch's size (`steady`): counted against the
/// round too, they cut it short (with "area" neighbors, half the pages
/// below the target were left). `classic` counts them, as InnoDB does.
#[test]
fn a_round_writes_the_list_pages_it_asked_for_whatever_their_neighbors() {
    for steady in [true, false] {
        // Contiguous neighbors; the even pages are the oldest, each odd
        // page a young neighbor of two of them.
        let host = RecordingHost::over(TestPool::new(1, Arc::new(HonestWal::default())));
        for k in 0..100u32 {
            host.t.put(2 * k, Some(100 + 10 * u64::from(k)));
            host.t.put(2 * k + 1, Some(10_000 + 10 * u64::from(k)));
        }
        host.t.wb.set_neighbors_in_batch_size(steady);
        let mut targets = lru_and_list_round(32, true);
        targets.instances[0].lru_want_free = 0;
        targets.instances[0].lru_write_max = 0;
        targets.instances[0].list_batch = 8;
        targets.neighbors_in_batch_size = steady;
        assert!(!crate::flush::cleaner::do_share(&host, 0, 1, &targets));
        let all = host.t.metric("buffer_flush_adaptive_total_pages");
        let neighbors = host.t.metric("buffer_flush_neighbor_total_pages");
        assert!(neighbors > 0, "steady: {steady}");
        let batches = host.seen.lock().len();
        if steady {
            // Batches of 8: each reaches its size inside the contiguous
            // run of its first page's area (16 pages, 8 of them the
            // list's) and finishes the run rather than cut it, one write:
            // 4 batches.
            assert!(all - neighbors >= 32, "{all} pages, {neighbors} neighbors");
            assert_eq!(batches, 4, "{all} pages, {neighbors} neighbors");
            assert_eq!(host.t.metric("os_data_writes"), 4, "one run per batch");
        } else {
            // The first batches' runs of neighbors (classic does not bound
            // them) count against the 32: it stops with fewer than 32 of
            // the list's own pages written.
            assert!(all >= 32, "{all} pages");
            assert!(all - neighbors < 32, "{all} pages, {neighbors} neighbors");
            assert!(batches < 8, "{batches} batches");
        }
    }
}

/// With merged flush lists (`steady`), each batch takes the oldest pages
/// of the whole pool, whichever instance holds them, writes them as one
/// group (one doublewrite copy, one sync) and checkpoints once; split per
/// instance, the same pages took a batch, a doublewrite copy and a
/// checkpoint per instance.
#[test]
fn merged_flush_lists_write_the_pools_oldest_pages_as_one_batch() {
    for merged in [true, false] {
        let (host, pages) = RecordingHost::four_instances_interleaved();
        let of = |p: u32| host.t.pool.instance_of(PageId::new(0, p));
        let used: std::collections::HashSet<usize> = pages.iter().map(|&p| of(p)).collect();
        assert!(used.len() >= 2, "the pages fall in one instance: {used:?}");
        let targets = crate::flush::policy::FlushTargets {
            instances: (0..4).map(|_| list_target(32, 2)).collect(),
            checkpoint_each_batch: true,
            merge_instances: merged,
            ..Default::default()
        };
        assert!(!crate::flush::cleaner::do_share(&host, 0, 1, &targets));
        let seen = host.seen.lock().clone();
        let written = host.t.metric("buffer_flush_adaptive_total_pages");
        if merged {
            // Batches of 4 × 2 pages: the 8 oldest, then the next 8, ...
            // each one group, each followed by one checkpoint (written
            // while the next batch is: it sees at least its own batch).
            assert_eq!(seen.len(), 4, "{seen:?}");
            for (k, &(lru, list)) in seen.iter().enumerate() {
                assert_eq!(lru, 0);
                assert!((8 * (k as u64 + 1)..=32).contains(&list), "{seen:?}");
            }
            assert_eq!(host.t.metric("buffer_flush_batches"), 4);
            assert_eq!(host.t.metric("dblwr_writes"), 4);
            assert_eq!(written, 32);
        } else {
            // A batch of 2 per instance holding pages: a checkpoint, a
            // group and a doublewrite copy each.
            assert_eq!(written, 32);
            assert_eq!(host.t.metric("buffer_flush_batches"), 16);
            assert_eq!(host.t.metric("dblwr_writes"), 16);
            assert_eq!(seen.len(), 16);
        }
    }
}

/// A merged batch's checkpoint runs on its own thread while the next batch
/// is written, and the coordinator ends it before starting another: with
/// the first checkpoint held at a failpoint, the second batch is written
/// (the checkpoint does not hold the batch writer up), the third is not
/// (one checkpoint at a time: the coordinator waits in the join, holding
/// no claim, latch or mutex, so the held checkpoint needs nothing from
/// it), and once released every checkpoint runs, each after its batch.
#[test]
fn a_held_checkpoint_lets_one_more_batch_through_and_no_second_checkpoint() {
    let (host, _) = RecordingHost::four_instances_interleaved();
    let targets = crate::flush::policy::FlushTargets {
        instances: (0..4).map(|_| list_target(32, 2)).collect(),
        checkpoint_each_batch: true,
        merge_instances: true,
        ..Default::default()
    };
    let hold = host.points.arm("checkpoint");
    let written = || host.t.metric("buffer_flush_adaptive_total_pages");
    std::thread::scope(|s| {
        let coordinator = s.spawn(|| crate::flush::cleaner::do_share(&host, 0, 1, &targets));
        assert!(
            hold.wait_held(Duration::from_secs(10)),
            "no checkpoint began"
        );
        // The second batch goes out while the first checkpoint is held.
        let deadline = Instant::now() + Duration::from_secs(10);
        while written() < 16 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(written(), 16, "the next batch waited for the checkpoint");
        // ... and no further: the coordinator waits for the first
        // checkpoint before it starts the second.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(written(), 16);
        assert!(host.seen.lock().is_empty());
        hold.release();
        assert!(!coordinator.join().expect("the coordinator panicked"));
    });
    let seen = host.seen.lock().clone();
    assert_eq!(seen.len(), 4, "{seen:?}");
    // The held checkpoint saw the second batch too; each later one at
    // least its own.
    assert_eq!(seen[0].1, 16, "{seen:?}");
    for (k, &(_, list)) in seen.iter().enumerate().skip(1) {
        assert!(list >= 8 * (k as u64 + 1), "{seen:?}");
    }
    assert_eq!(written(), 32);
}

/// A merged batch takes the globally oldest pages: with one instance's
/// pages all older than another's, the first batch writes only the first
/// instance's, and the checkpoint after it can move past all of them.
#[test]
fn a_merged_batch_takes_the_oldest_pages_whatever_their_instance() {
    let host = RecordingHost::over(TestPool::two_instances());
    let of = |p: u32| host.t.pool.instance_of(PageId::new(0, p));
    let (a, b) = host.t.extents_in_two_instances();
    // Instance of `a`: LSNs 100..180; of `b`: 1,000..1,080.
    for k in 0..8u32 {
        host.t.put(a + k, Some(100 + 10 * u64::from(k)));
        host.t.put(b + k, Some(1_000 + 10 * u64::from(k)));
    }
    let targets = crate::flush::policy::FlushTargets {
        instances: (0..2).map(|_| list_target(8, 4)).collect(),
        checkpoint_each_batch: true,
        merge_instances: true,
        ..Default::default()
    };
    // The first batch (8 pages): all of `a`'s instance, none of `b`'s.
    let lists = crate::flush::cleaner::merged_batch(&host.t.pool, &targets, &[8, 8], 8);
    let frames_of = |base: u32| -> Vec<u32> {
        (0..8)
            .map(|k| {
                host.t
                    .pool
                    .frame_of(of(base), PageId::new(0, base + k))
                    .unwrap()
            })
            .collect()
    };
    assert_eq!(lists, vec![(of(a), frames_of(a))]);
    // Capped: at most 3 from `a`'s instance, then the oldest of `b`'s.
    let mut caps = [8, 8];
    caps[of(a)] = 3;
    let lists = crate::flush::cleaner::merged_batch(&host.t.pool, &targets, &caps, 8);
    assert_eq!(
        lists,
        vec![
            (of(a), frames_of(a)[..3].to_vec()),
            (of(b), frames_of(b)[..5].to_vec())
        ]
    );
    // The round writes both instances' pages, 8 at a time.
    assert!(!crate::flush::cleaner::do_share(&host, 0, 1, &targets));
    let seen = host.seen.lock().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[0].1 >= 8 && seen[1].1 == 16, "{seen:?}");
    for k in 0..8 {
        assert!(host.t.on_disk(a + k), "page {}", a + k);
        assert!(host.t.on_disk(b + k), "page {}", b + k);
    }
}

/// An instance's flush-list target: `list_pages` pages below any LSN, in
/// batches of `list_batch`, no LRU work.
fn list_target(list_pages: usize, list_batch: usize) -> crate::flush::policy::InstanceTarget {
    crate::flush::policy::InstanceTarget {
        lru_want_free: 0,
        lru_scan: 0,
        lru_write_max: 0,
        list_pages,
        list_lsn_limit: Lsn::MAX,
        list_kind: FlushKind::Adaptive,
        list_batch,
    }
}

/// A merged round starts no batch once its time budget is spent: with a
/// budget of zero it writes one batch and leaves the rest to the next
/// round; with none it writes all it was asked.
#[test]
fn a_merged_round_starts_no_batch_past_its_budget() {
    for budget in [Some(Duration::ZERO), None] {
        let host = RecordingHost::with_dirty_pages(64);
        let targets = crate::flush::policy::FlushTargets {
            instances: vec![list_target(64, 8)],
            checkpoint_each_batch: true,
            merge_instances: true,
            round_budget: budget,
            ..Default::default()
        };
        assert!(!crate::flush::cleaner::do_share(&host, 0, 1, &targets));
        let written = host.t.metric("buffer_flush_adaptive_total_pages");
        let checkpoints = host.seen.lock().len();
        match budget {
            Some(_) => assert_eq!((written, checkpoints), (8, 1)),
            None => assert_eq!((written, checkpoints), (64, 8)),
        }
    }
}

/// In one batch across instances only the call's first claim may wait for
/// a latch: a later claim would wait holding the claims (shared latches)
/// of the group being formed. The second list's first page, latched by a
/// user thread, is passed over at once, even with a wait of 10 s set,
/// and the rest of both lists is written.
#[test]
fn a_batch_across_instances_waits_only_for_its_first_claim() {
    let t = TestPool::two_instances();
    let of = |p: u32| t.pool.instance_of(PageId::new(0, p));
    let (a, b) = t.extents_in_two_instances();
    for k in 0..4u32 {
        t.put(a + k, Some(100 + 10 * u64::from(k)));
        t.put(b + k, Some(1_000 + 10 * u64::from(k)));
    }
    t.wb.set_oldest_latch_wait(Duration::from_secs(10));
    let frames = |base: u32| -> Vec<u32> {
        (0..4)
            .map(|k| t.pool.frame_of(of(base), PageId::new(0, base + k)).unwrap())
            .collect()
    };
    let (fa, fb) = (frames(a), frames(b));
    let held = t.pool.write(PageId::new(0, b)).unwrap();
    let started = Instant::now();
    let (n, _) =
        t.wb.flush_lists_counted(
            &t.pool,
            &[(of(a), &fa[..]), (of(b), &fb[..])],
            FlushKind::Adaptive,
        )
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(held);
    assert_eq!(n, 7);
    assert_eq!(t.metric("buffer_flush_latched_skips"), 1);
    assert_eq!(t.metric("buffer_flush_batches"), 1);
    assert!(!t.on_disk(b));
    for k in 0..4 {
        assert!(t.on_disk(a + k));
    }
    for k in 1..4 {
        assert!(t.on_disk(b + k));
    }
}

mod gaps;
