//! Gap filling (parent module doc, "Gaps"): which clean pages a batch
//! writes between its dirty runs, what a change made while one is written
//! does, and what a power loss during that write leaves.
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{HonestWal, TestPool, PS};
use crate::flush::batch::FlushKind;
use crate::io::faulty::CrashMode;
use crate::io::{AlignedBuf, FaultyFs, FlushMethod, OsFileSystem};
use crate::page::{page_lsn, verify_page, PageId};
use crate::space::data_file_name;

impl TestPool {
    fn flush_all(&self) -> usize {
        self.wb
            .flush_list_batch(&self.pool, 0, 64, u64::MAX, FlushKind::Background)
            .unwrap()
    }

    fn no_claims_left(&self) -> bool {
        self.pool.instances[0]
            .frames
            .iter()
            .all(|f| !f.flushing.load(Ordering::Acquire) && f.redirty.load(Ordering::Acquire) == 0)
    }

    /// Change cached page `page_no`, logged as redo `[start, start + 10)`.
    fn change(&self, page_no: u32, start: u64) {
        let mut w = self.pool.write(PageId::new(0, page_no)).unwrap();
        w[3000] = w[3000].wrapping_add(1);
        self.pool.mark_dirty(&mut w, start, start + 10);
    }
}

/// Pages 16..=30 of one extent in data file 0: `D` dirty, `c` clean and
/// cached, `.` not cached.
///
/// ```text
/// 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30
///  D  D  c  c  D  D  c  .  D  c  c  c  c  c  D
/// ```
fn gap_pool() -> TestPool {
    let t = TestPool::new(0, Arc::new(HonestWal::default()));
    assert!((16..=30).all(|p| t.pool.space.locate(p).0 == 0));
    for (k, p) in [16, 17, 20, 21, 24, 30].into_iter().enumerate() {
        t.put(p, Some(100 + 10 * k as u64));
    }
    for p in [18, 19, 22, 25, 26, 27, 28, 29] {
        t.put(p, None);
    }
    t
}

/// Gaps of at most the bound, whose every page is cached, are written
/// with the runs around them as one write; a gap with a page not cached,
/// or longer than the bound, is not. The clean pages are counted apart
/// and stay clean; no claim is left.
#[test]
fn a_short_gap_of_cached_pages_joins_two_runs_in_one_write() {
    for (bound, writes, gap, on_disk) in [
        (0, 4, 0, vec![]),
        (4, 3, 2, vec![18, 19]),
        (5, 2, 7, vec![18, 19, 25, 26, 27, 28, 29]),
    ] {
        let t = gap_pool();
        t.wb.set_gap_pages(bound);
        assert_eq!(t.flush_all(), 6, "bound {bound}");
        assert_eq!(t.metric("buffer_pages_written"), 6);
        assert_eq!(t.metric("buffer_flush_gap_pages"), gap, "bound {bound}");
        assert_eq!(t.metric("os_data_writes"), writes, "bound {bound}");
        assert_eq!(t.metric("buffer_pool_pages_dirty"), 0);
        assert!(t.dirty_pages().is_empty());
        for p in [18, 19, 22, 25, 26, 27, 28, 29] {
            assert_eq!(
                t.on_disk(p),
                on_disk.contains(&p),
                "bound {bound}: page {p}"
            );
        }
        assert!(t.no_claims_left());
    }
}

/// A page of a gap that is dirty (dirtied after the walk for neighbors
/// passed it; here no walk, `flush_neighbors` 0) is written as a
/// neighbor, the clean one beside it as a gap filler: one write.
#[test]
fn a_dirty_page_in_a_gap_is_written_as_a_neighbor() {
    let t = TestPool::new(0, Arc::new(HonestWal::default()));
    t.put(5, Some(100));
    t.put(6, Some(120));
    t.put(7, None);
    t.put(8, Some(110));
    t.wb.set_gap_pages(2);
    let fid = |p| t.pool.frame_of(0, PageId::new(0, p)).unwrap();
    let n =
        t.wb.flush_frames_counted(&t.pool, 0, &[fid(5), fid(8)], FlushKind::Background)
            .unwrap();
    assert_eq!(n, (3, 1));
    assert_eq!(t.metric("buffer_flush_gap_pages"), 1);
    assert_eq!(t.metric("buffer_pages_written"), 3);
    assert_eq!(t.metric("os_data_writes"), 1);
    assert!(t.dirty_pages().is_empty());
    assert!(t.no_claims_left());
}

/// A single-page flush (a user thread freeing a frame) fills no gap.
#[test]
fn a_single_page_flush_fills_no_gap() {
    let t = gap_pool();
    t.wb.set_gap_pages(8);
    let fid = |p| t.pool.frame_of(0, PageId::new(0, p)).unwrap();
    let n =
        t.wb.flush_frames(&t.pool, 0, &[fid(17), fid(20)], FlushKind::Single)
            .unwrap();
    assert_eq!(n, 2);
    assert_eq!(t.metric("buffer_flush_gap_pages"), 0);
    assert_eq!(t.metric("os_data_writes"), 2);
}

/// A gap page latched exclusively by a user thread is not waited for: the
/// gap stays open, and the pages of it already claimed are given back.
#[test]
fn a_latched_gap_page_leaves_the_gap_open() {
    let t = gap_pool();
    t.wb.set_gap_pages(2);
    let held = t.pool.write(PageId::new(0, 19)).unwrap();
    assert_eq!(t.flush_all(), 6);
    drop(held);
    assert_eq!(t.metric("buffer_flush_gap_pages"), 0);
    assert!(!t.on_disk(18) && !t.on_disk(19));
    assert!(t.no_claims_left());
}

/// A user thread changes a gap page while its clean copy is being written
/// (the write held by a failpoint). The page is dirty from that change at
/// once, on the flush list where the checkpoint sees it (its copy holds
/// nothing the checkpoint needs; were the change recorded only for the
/// release, as for a dirty page, a checkpoint taken meanwhile could pass
/// it). No other flusher writes the page and no evicter takes its frame
/// until the write is released; then the page stays dirty from the first
/// change, and the next flush writes both changes.
#[test]
fn a_gap_page_changed_while_its_copy_is_written_is_dirty_from_the_change_at_once() {
    let fs = FaultyFs::new();
    let t = TestPool::with_fs(0, Arc::new(HonestWal::default()), &fs);
    t.put(5, Some(100));
    t.put(6, None);
    t.put(7, Some(110));
    t.wb.set_gap_pages(1);
    let six = PageId::new(0, 6);
    let before = page_lsn(&t.pool.read(six).unwrap());
    let hold = fs.arm("data-.write:hold", 0).unwrap();
    std::thread::scope(|s| {
        let flusher = s.spawn(|| t.flush_all());
        hold.wait_held(Duration::from_secs(10)).unwrap();
        assert!(t.is_flushing(6), "the gap page was not claimed");
        t.change(6, 200);
        assert_eq!(t.dirty_pages(), [5, 6, 7]);
        assert_eq!(t.metric("buffer_pool_pages_dirty"), 3);
        // A second change while the write is still in flight.
        t.change(6, 300);
        // Another flusher leaves it alone; so does an evicter.
        assert_eq!(
            t.wb.flush_frames(
                &t.pool,
                0,
                &[t.pool.frame_of(0, six).unwrap()],
                FlushKind::Lru
            )
            .unwrap(),
            0
        );
        assert!(!t.pool.evict_for_test(six));
        hold.release();
        assert_eq!(flusher.join().unwrap(), 2);
    });
    assert_eq!(t.metric("buffer_flush_gap_pages"), 1);
    assert_eq!(t.metric("os_data_writes"), 1);
    // Written clean (without the changes), dirty from the first change.
    let mut buf = AlignedBuf::new(PS);
    t.pool.space.read_page(six, &mut buf).unwrap();
    assert_eq!(page_lsn(&buf), before);
    assert_eq!(t.dirty_pages(), [6]);
    assert_eq!(t.pool.oldest_modification(), Some(200));
    assert_eq!(t.metric("buffer_pool_pages_dirty"), 1);
    assert!(t.no_claims_left());
    assert_eq!(t.flush_all(), 1);
    t.pool.space.read_page(six, &mut buf).unwrap();
    assert_eq!(page_lsn(&buf), 310);
    assert!(t.dirty_pages().is_empty());
}

/// Power fails while a batch that filled a gap waits for its data-file
/// sync, and the one write of the batch's four pages is torn (a device
/// sector is a page here: a random subset of the pages lands). Every page the
/// batch wrote is whole after the open's doublewrite repair, and the gap
/// page is byte for byte what it was: its copy is the image already on
/// disk (a clean page has no change the disk lacks), so a torn write of
/// it leaves the same bytes, and its copy in the area is the same again.
#[test]
fn a_power_loss_tearing_a_gap_page_leaves_it_as_it_was() {
    let mut torn = 0;
    for seed in 0..12 {
        let fs = FaultyFs::new();
        let t = TestPool::with_doublewrite(&fs, 4);
        for p in 0..4 {
            t.put(p, Some(100 + 10 * u64::from(p)));
        }
        assert_eq!(t.flush_all(), 4);
        let file = t.dir.path().join(data_file_name(0));
        let (_, off2) = t.pool.space.locate(2);
        let page2 = |image: &[u8]| image[off2 as usize..off2 as usize + PS].to_vec();
        let before = page2(&fs.durable_image(&file).unwrap());
        // 0, 1 and 3 are changed again; 2 stays clean and cached.
        for (k, p) in [0, 1, 3].into_iter().enumerate() {
            t.change(p, 1000 + 100 * k as u64);
        }
        t.wb.set_gap_pages(1);
        let sync = fs.arm("/data-.sync:hold", 0).unwrap();
        std::thread::scope(|s| {
            let flusher = s.spawn(|| {
                t.wb.flush_list_batch(&t.pool, 0, 64, u64::MAX, FlushKind::Background)
            });
            sync.wait_held(Duration::from_secs(10)).unwrap();
            torn += fs.crash(CrashMode::Torn { seed }).writes_torn;
            sync.release();
            assert!(flusher.join().unwrap().is_err());
        });
        assert_eq!(t.metric("buffer_flush_gap_pages"), 1);
        assert_eq!(t.metric("os_data_writes"), 2, "one write for the batch");
        t.restored_after_crash(&fs, 4);
        let image = fs.durable_image(&file).unwrap();
        for p in 0..4 {
            let (_, off) = t.pool.space.locate(p);
            let page = &image[off as usize..off as usize + PS];
            assert!(
                verify_page(page, PageId::new(0, p)).is_ok(),
                "seed {seed}: page {p} is torn after the repair"
            );
        }
        assert!(page2(&image) == before, "seed {seed}: the gap page changed");
    }
    assert!(
        torn > 0,
        "no seed tore the batch's write: the test shows nothing"
    );
}

/// Without the policy asking (`classic`), nothing changes: no clean page
/// is written.
#[test]
fn no_gap_is_filled_unless_the_policy_asks() {
    let t = TestPool::with_fs(
        0,
        Arc::new(HonestWal::default()),
        &OsFileSystem::new(FlushMethod::NoSync),
    );
    t.put(5, Some(100));
    t.put(6, None);
    t.put(7, Some(110));
    assert_eq!(t.flush_all(), 2);
    assert_eq!(t.metric("buffer_flush_gap_pages"), 0);
    assert_eq!(t.metric("os_data_writes"), 2);
}
