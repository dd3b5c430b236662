//! Held page writes on a real pool over the faulty device: what a failed
//! in-place write keeps, who retries it, and what a crash or a failed sync
//! during the retry leaves.
use std::time::{Duration, Instant};

use crate::buffer::FrameWriter;
use crate::error::Error;
use crate::flush::batch::tests::TestPool;
use crate::flush::batch::FlushKind;
use crate::flush::doublewrite::Doublewrite;
use crate::io::faulty::CrashMode;
use crate::io::FaultyFs;
use crate::page::{page_lsn, PageId};
use crate::space::data_file_name;

const PS: usize = 4096;
/// Pages per doublewrite area in these tests (the pool has two areas).
const AREA: usize = 4;

fn dw(t: &TestPool) -> &Doublewrite {
    t.wb.dblwr.as_ref().unwrap()
}

/// Pages `pages` dirty, oldest first, then every data-file write failing:
/// a flush of them fails with `WriteBackFailing` naming the data file.
fn held(pages: &[u32]) -> (FaultyFs, TestPool) {
    let fs = FaultyFs::new();
    let t = TestPool::with_doublewrite(&fs, AREA);
    for (k, &p) in pages.iter().enumerate() {
        t.put(p, Some(100 + 10 * k as u64));
    }
    fs.arm("/data-.write:eio:sticky", 0).unwrap();
    let err =
        t.wb.flush_list_batch(&t.pool, 0, pages.len(), u64::MAX, FlushKind::Background)
            .unwrap_err();
    let names_file = matches!(&err, Error::WriteBackFailing { path, .. }
        if path.ends_with(data_file_name(0)));
    assert!(names_file, "{err}");
    (fs, t)
}

/// The doublewrite copy was made and the in-place write failed: nothing is
/// poisoned (it used to be, until a restart); the pages stay dirty,
/// claimed and readable in memory, the checkpoint cannot pass them, their
/// area stays set aside while the device fails, and once it takes writes
/// again a retry writes them and frees the area.
#[test]
fn a_failed_in_place_write_is_held_and_written_once_the_device_takes_writes() {
    let pages = [0, 1, 2, 3];
    let (fs, t) = held(&pages);
    assert!(t.wb.space.check_poisoned().is_ok());
    assert_eq!(t.dirty_pages(), pages);
    assert!(pages.iter().all(|&p| t.is_flushing(p)));
    assert_eq!(t.pool.oldest_modification(), Some(100));
    assert_eq!(t.metric("buffer_flush_held_pages"), 4);
    assert_eq!(dw(&t).areas_set_aside(), 1);
    let page = t.pool.read(PageId::new(0, 2)).unwrap();
    assert_eq!(page_lsn(&page), 130, "the image in memory");
    drop(page);
    // Still failing: the retry changes nothing.
    let err = t.wb.retry_held(&t.pool, true).unwrap_err();
    assert!(err.to_string().contains("retry"), "{err}");
    assert_eq!(t.dirty_pages(), pages);
    assert_eq!(dw(&t).areas_set_aside(), 1);
    fs.disarm();
    t.wb.retry_held(&t.pool, true).unwrap();
    assert!(t.dirty_pages().is_empty());
    assert!(pages.iter().all(|&p| t.on_disk(p) && !t.is_flushing(p)));
    assert_eq!(dw(&t).areas_set_aside(), 0);
    assert_eq!(t.metric("buffer_flush_held_pages"), 0);
    assert_eq!(t.metric("buffer_flush_held_retries"), 2);
    assert_eq!(t.metric("buffer_pages_written"), 4);
}

/// Nobody has to ask: the next flush call, once the backoff has run out,
/// retries the held writes before it claims its own pages.
#[test]
fn the_next_flush_retries_held_writes_by_itself() {
    let (fs, t) = held(&[0, 1]);
    t.put(9, Some(900));
    fs.disarm();
    std::thread::sleep(super::RETRY_FIRST * 2);
    let n =
        t.wb.flush_list_batch(&t.pool, 0, 8, u64::MAX, FlushKind::Background)
            .unwrap();
    assert_eq!(n, 1, "the batch's own page");
    assert!(t.dirty_pages().is_empty());
    assert!([0, 1, 9].iter().all(|&p| t.on_disk(p)));
    assert_eq!(dw(&t).areas_set_aside(), 0);
}

/// A change made while the write is held is not in the copy the retry
/// writes: the page stays dirty from that change.
#[test]
fn a_page_changed_while_its_write_is_held_stays_dirty_from_that_change() {
    let (fs, t) = held(&[0, 1]);
    {
        let mut w = t.pool.write(PageId::new(0, 1)).unwrap();
        t.pool.mark_dirty(&mut w, 500, 510);
    }
    fs.disarm();
    t.wb.retry_held(&t.pool, true).unwrap();
    assert_eq!(t.dirty_pages(), [1]);
    assert_eq!(t.pool.oldest_modification(), Some(500));
}

/// A thread short of a frame whose victim is held hears why at once,
/// instead of waiting out the pool's free-frame timeout.
#[test]
fn a_single_page_flush_of_a_held_page_fails_at_once_with_the_write_error() {
    let (_fs, t) = held(&[0]);
    let fid = t.pool.frame_of(0, PageId::new(0, 0)).unwrap();
    let err = t.wb.write_victim(&t.pool, 0, fid).unwrap_err();
    assert!(matches!(err, Error::WriteBackFailing { .. }), "{err}");
    assert!(err.to_string().contains("data-0"), "{err}");
}

/// One batch of two chunks whose writes fail sets both areas aside; a
/// batch of other pages then fails at once (it used to wait for an area
/// for ever), leaving its pages dirty and unclaimed.
#[test]
fn with_every_area_set_aside_a_batch_fails_at_once_and_its_pages_stay_dirty() {
    let pages: Vec<u32> = (0..2 * AREA as u32).collect();
    let (_fs, t) = held(&pages);
    assert_eq!(dw(&t).areas_set_aside(), 2);
    t.put(20, Some(2000));
    let started = Instant::now();
    let err =
        t.wb.flush_frames(&t.pool, 0, &[fid(&t, 20)], FlushKind::Background);
    assert!(
        matches!(err, Err(Error::WriteBackFailing { .. })),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5), "it waited");
    assert!(t.dirty_pages().contains(&20) && !t.is_flushing(20));
    assert!(dw(&t).claim().is_err());
}

fn fid(t: &TestPool, page_no: u32) -> u32 {
    t.pool.frame_of(0, PageId::new(0, page_no)).unwrap()
}

/// A failed sync after the retry's writes cannot be retried (the kernel
/// may have dropped the pages): the data files are poisoned, the pages
/// stay dirty and unclaimed, and the area stays set aside for recovery.
#[test]
fn a_failed_sync_after_a_retry_poisons_and_keeps_the_area() {
    let (fs, t) = held(&[0, 1]);
    fs.disarm();
    fs.arm("/data-.sync:eio", 0).unwrap();
    t.wb.retry_held(&t.pool, true).unwrap_err();
    assert!(t.wb.space.check_poisoned().is_err());
    assert_eq!(t.dirty_pages(), [0, 1]);
    assert!(!t.is_flushing(0) && !t.is_flushing(1));
    assert_eq!(dw(&t).areas_set_aside(), 1);
    assert_eq!(t.metric("buffer_flush_held_pages"), 0);
}

/// Power fails while the retry's writes wait for their sync: the area was
/// not given back before the sync, so recovery finds the copies and
/// restores the pages the crash left unwritten.
#[test]
fn a_crash_before_the_retry_is_synced_leaves_the_copies_for_recovery() {
    let pages = [0, 1, 2];
    let (fs, t) = held(&pages);
    fs.disarm();
    let sync = fs.arm("/data-.sync:hold", 0).unwrap();
    std::thread::scope(|s| {
        let retry = s.spawn(|| t.wb.retry_held(&t.pool, true));
        sync.wait_held(Duration::from_secs(10)).unwrap();
        assert_eq!(dw(&t).areas_set_aside(), 1, "given back before the sync");
        fs.crash(CrashMode::DropUnsynced);
        sync.release();
        assert!(retry.join().unwrap().is_err());
    });
    assert_eq!(t.restored_after_crash(&fs, AREA), pages);
}

/// The doublewrite copy itself fails, its write or its sync: nothing was
/// written in place, so nothing is held and nothing poisoned; the error
/// names the doublewrite file, the pages stay dirty and unclaimed, the
/// area is free, and the next flush writes them.
#[test]
fn a_failed_doublewrite_copy_is_surfaced_and_changes_nothing() {
    for spec in ["/dblwr-.write:eio", "/dblwr-.sync:eio"] {
        let fs = FaultyFs::new();
        let t = TestPool::with_doublewrite(&fs, AREA);
        t.put(0, Some(100));
        t.put(1, Some(110));
        fs.arm(spec, 0).unwrap();
        let err =
            t.wb.flush_list_batch(&t.pool, 0, 2, u64::MAX, FlushKind::Background)
                .unwrap_err();
        let names_file = matches!(&err, Error::WriteBackFailing { path, .. }
            if path.to_string_lossy().contains("dblwr-"));
        assert!(names_file, "{spec}: {err}");
        assert!(t.wb.space.check_poisoned().is_ok(), "{spec}");
        assert_eq!(t.dirty_pages(), [0, 1], "{spec}");
        assert!(!t.is_flushing(0) && !t.is_flushing(1), "{spec}");
        assert_eq!(dw(&t).areas_set_aside(), 0, "{spec}");
        assert_eq!(t.metric("buffer_flush_held_pages"), 0, "{spec}");
        let n =
            t.wb.flush_list_batch(&t.pool, 0, 2, u64::MAX, FlushKind::Background)
                .unwrap();
        assert_eq!(n, 2, "{spec}");
        assert!(t.dirty_pages().is_empty(), "{spec}");
    }
}

/// The race the claims close: while a retry is about to write a held
/// page's old copy (held at the write), another flusher must not write
/// the page's newer image, or the retry would then overwrite it with the
/// older one and the change would be lost from the disk. The other
/// flusher writes nothing; after the retry the page is dirty from its
/// change, and the next flush puts the newest image on disk.
#[test]
fn a_held_page_is_written_by_nobody_else_while_its_retry_is_under_way() {
    let (fs, t) = held(&[0]);
    {
        let mut w = t.pool.write(PageId::new(0, 0)).unwrap();
        t.pool.mark_dirty(&mut w, 500, 510);
    }
    fs.disarm();
    let hold = fs.arm("/data-.write:hold", 0).unwrap();
    std::thread::scope(|s| {
        let retry = s.spawn(|| t.wb.retry_held(&t.pool, true));
        hold.wait_held(Duration::from_secs(10)).unwrap();
        let n =
            t.wb.flush_frames(&t.pool, 0, &[fid(&t, 0)], FlushKind::Single);
        hold.release();
        assert_eq!(n.unwrap(), 0, "written while its held write was retried");
        retry.join().unwrap().unwrap();
    });
    assert_eq!(t.dirty_pages(), [0]);
    let n =
        t.wb.flush_frames(&t.pool, 0, &[fid(&t, 0)], FlushKind::Single);
    assert_eq!(n.unwrap(), 1);
    let mut buf = crate::io::AlignedBuf::new(PS);
    t.pool.space.read_page(PageId::new(0, 0), &mut buf).unwrap();
    assert_eq!(page_lsn(&buf), 510, "the newest image");
}

/// A write that meets a device that is gone (here the power failed) is no
/// passing failure: the data files are poisoned at once, so that nothing
/// retries it for minutes, and the chunk is given up with its area kept.
#[test]
fn a_write_to_a_device_that_is_gone_poisons_instead_of_waiting_for_a_retry() {
    for point in ["/data-.write:crash", "/dblwr-.write:crash"] {
        let fs = FaultyFs::new();
        let t = TestPool::with_doublewrite(&fs, AREA);
        for p in 0..3 {
            t.put(p, Some(100 + p as u64));
        }
        fs.arm(point, 0).unwrap();
        let err =
            t.wb.flush_list_batch(&t.pool, 0, 3, u64::MAX, FlushKind::Background)
                .unwrap_err();
        assert!(t.wb.space.check_poisoned().is_err(), "{point}: {err}");
        // A retry gives the held chunk up rather than writing again.
        let _ = t.wb.retry_held(&t.pool, true);
        assert_eq!(t.metric("buffer_flush_held_pages"), 0, "{point}");
    }
}
