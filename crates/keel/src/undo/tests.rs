//! Tests of the undo space: records of every size, lists spanning pages,
//! purge (limits, freeing, the tail's reset), the history length, garbage
//! pointers, recovery after a close and after a crash, and concurrent
//! appenders beside a purger. The model-based property test is in
//! `prop_tests`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::*;
use crate::btree::test_engine::{engine, TestEngine};
use crate::config::Options;
use crate::engine::admission::Purpose;
use crate::engine::Engine;
use crate::io::faulty::{CrashMode, FaultyFs};
use crate::mtr::mtr_bound;
use crate::Db;

/// A test engine with an undo directory, and its undo space.
pub(super) fn undo_engine(ps: usize) -> (TestEngine, UndoSpace) {
    let e = engine(ps);
    {
        let budget = e.adm.budget(Purpose::New);
        budget.ensure(mtr_bound(2, ps)).unwrap();
        let mut mtr = Mtr::new(&e, &budget);
        create_undo_dir(&mut mtr).unwrap();
        mtr.commit().unwrap();
    }
    let us = UndoSpace::open(&e).unwrap();
    (e, us)
}

pub(super) fn append(e: &Engine, us: &UndoSpace, rseg: usize, rec: &UndoRecord<'_>) -> RollPtr {
    let budget = e.adm.budget(Purpose::New);
    us.append(e, &budget, rseg, rec).unwrap()
}

fn rec(first: bool, commit: u64, key: &[u8], old: Option<&[u8]>) -> OwnedUndo {
    OwnedUndo {
        first,
        // Odd commits delete-marked the row: the flag round-trips too.
        del_mark: commit % 2 == 1,
        commit,
        root: 7,
        key: key.to_vec(),
        old: old.map(<[u8]>::to_vec),
        // Every fourth commit keeps its old value as a delta: to this
        // module a delta is bytes, which must round-trip with the flag.
        delta: old.is_some_and(|o| o.len() >= DELTA_HEADER) && commit.is_multiple_of(4),
    }
}

/// Purge everything below `limit` of `rseg`, collecting the records.
fn purge_all(
    e: &Engine,
    us: &UndoSpace,
    rseg: usize,
    limit: u64,
    max: usize,
) -> (PurgeStep, Vec<OwnedUndo>) {
    let mut got = Vec::new();
    let step = us
        .purge(e, rseg, limit, max, &mut |r| {
            got.push(r.clone());
            Ok(())
        })
        .unwrap();
    (step, got)
}

#[test]
fn roll_pointers_round_trip_through_six_bytes() {
    for (page, off) in [(0, 0), (1, 48), (u32::MAX, u16::MAX), (123_456, 4000)] {
        let p = RollPtr::new(page, off);
        assert_eq!((p.page_no(), p.offset()), (page, off));
        assert_eq!(RollPtr::from_bytes(&p.to_bytes()), p);
    }
    assert!(RollPtr::NONE.is_none());
    assert!(RollPtr::from_bytes(&[0; 6]).is_none());
    assert_eq!(RollPtr::from_bytes(&[1]).page_no(), 1);
}

#[test]
fn records_of_every_size_up_to_the_largest_read_back() {
    for ps in [4096, 65536] {
        let (e, us) = undo_engine(ps);
        let (mk, mv) = (max_key_len(ps), max_value_len(ps));
        let mut written = Vec::new();
        let key_lens = [0, 1, 2, mk / 2, mk - 1, mk];
        let val_lens = [0, 1, 7, mv / 3, mv - 1, mv];
        for (i, &k) in key_lens.iter().enumerate() {
            for (j, &v) in val_lens.iter().enumerate() {
                let key: Vec<u8> = (0..k).map(|x| (x * 31 + i) as u8).collect();
                let old: Vec<u8> = (0..v).map(|x| (x * 7 + j) as u8).collect();
                for absent in [false, true] {
                    let r = rec(
                        j % 2 == 0,
                        (i * 100 + j) as u64,
                        &key,
                        (!absent).then_some(&old[..]),
                    );
                    let ptr = append(&e, &us, (i + j) % N_RSEGS, &r.as_record());
                    assert!(!ptr.is_none());
                    written.push((ptr, r));
                }
            }
        }
        // The largest record alone in a page (appended to a full tail).
        for _ in 0..3 {
            let r = rec(true, 9, &vec![0xab; mk], Some(&vec![0xcd; mv]));
            written.push((append(&e, &us, 0, &r.as_record()), r));
        }
        for (ptr, r) in &written {
            assert_eq!(&us.read(&e, *ptr).unwrap(), r, "ps {ps} ptr {ptr:?}");
        }
        let c = us.check(&e).unwrap();
        assert_eq!(c.records, written.len() as u64);
        assert_eq!(c.pages, us.pages());
        let live: HashSet<u64> = written.iter().map(|(p, _)| p.raw()).collect();
        assert_eq!(c.live, live);
    }
}

#[test]
fn a_record_too_large_for_a_page_is_refused() {
    let (e, us) = undo_engine(4096);
    let r = rec(true, 1, b"k", Some(&[0u8; 4096]));
    let budget = e.adm.budget(Purpose::New);
    assert!(us.append(&e, &budget, 0, &r.as_record()).is_err());
    assert!(us
        .append(&e, &budget, N_RSEGS, &rec(true, 1, b"k", None).as_record())
        .is_err());
    assert_eq!((us.pages(), us.history_len()), (0, 0));
}

#[test]
fn appends_span_many_pages_and_read_back() {
    let (e, us) = undo_engine(4096);
    let mut ptrs = Vec::new();
    for i in 0..3000u64 {
        let r = rec(i % 3 == 0, i, &i.to_be_bytes(), Some(&[i as u8; 90]));
        ptrs.push((append(&e, &us, 3, &r.as_record()), r));
    }
    assert!(us.pages() > 60, "{} pages", us.pages());
    assert_eq!(us.history_len(), 1000);
    for (p, r) in &ptrs {
        assert_eq!(&us.read(&e, *p).unwrap(), r);
    }
    let c = us.check(&e).unwrap();
    assert_eq!(
        (c.pages, c.records, c.unpurged, c.first_unpurged),
        (us.pages(), 3000, 3000, 1000)
    );
    assert_eq!(e.pool.pages_of_type(PageType::Undo), us.pages());
    assert_eq!(e.pool.pages_of_type(PageType::UndoDir), 1);
    // The page cleaners' batches count the undo pages they write.
    e.flush_and_checkpoint().unwrap();
    let written = e.metrics.get("buffer_flush_undo_pages_written").unwrap();
    assert!(written > us.pages(), "{written} undo pages written");
}

/// A commit's records in one call: one mtr for those that fit the tail,
/// one more per page they go on to fill; in order, each where its roll
/// pointer says, the history counting the first. A call that failed part
/// way (here, one stopped after its first mtr) is finished by calling
/// again with what it appended so far.
#[test]
fn a_commits_records_take_one_mtr_per_page_they_fill() {
    let (e, us) = undo_engine(4096);
    let recs: Vec<OwnedUndo> = (0..80u64)
        .map(|i| rec(i == 0, 10, &i.to_be_bytes(), Some(&[i as u8; 90])))
        .collect();
    let borrowed: Vec<UndoRecord<'_>> = recs.iter().map(OwnedUndo::as_record).collect();
    let len = borrowed[0].encoded_len();
    let per_page = (page_end(4096) - RECORDS_START) / len;
    assert!(
        80 > 2 * per_page,
        "{per_page} records a page: 80 must fill three"
    );
    let budget = e.adm.budget(Purpose::New);
    let mtrs = || e.metrics.get("mtr_commits").unwrap();
    // 1. Records that fit the tail: one mtr, one page, side by side.
    let before = mtrs();
    let mut at = Vec::new();
    us.append_all(&e, &budget, 2, &borrowed[..5], &mut at)
        .unwrap();
    assert_eq!(mtrs() - before, 1);
    assert_eq!(at.len(), 5);
    for w in at.windows(2) {
        assert_eq!(w[1].page_no(), w[0].page_no());
        assert_eq!(usize::from(w[1].offset() - w[0].offset()), len);
    }
    // 2. The rest, one mtr stopped short: its caller goes on from there.
    let fill = per_page - 5;
    let mut partial = borrowed[..5 + fill].to_vec();
    us.append_all(&e, &budget, 2, &partial, &mut at).unwrap();
    assert_eq!(mtrs() - before, 2, "the tail's room took one mtr");
    partial = borrowed.clone();
    us.append_all(&e, &budget, 2, &partial, &mut at).unwrap();
    let pages: HashSet<u32> = at.iter().map(|p| p.page_no()).collect();
    assert_eq!(at.len(), 80);
    assert_eq!(pages.len(), 3, "80 records of {len} bytes on 4 KiB pages");
    assert_eq!(mtrs() - before, 4, "one mtr per new page");
    assert_eq!((us.pages(), us.history_len()), (3, 1));
    for (p, r) in at.iter().zip(&recs) {
        assert_eq!(&us.read(&e, *p).unwrap(), r);
    }
    let c = us.check(&e).unwrap();
    assert_eq!((c.pages, c.records, c.first_unpurged), (3, 80, 1));
}

#[test]
fn purge_stops_at_its_limit_then_frees_pages_and_resets_the_tail() {
    let (e, us) = undo_engine(4096);
    for c in 1..=1000u64 {
        let r = rec(c % 2 == 1, c, &c.to_be_bytes(), Some(&[1; 100]));
        append(&e, &us, 1, &r.as_record());
    }
    let pages = us.pages();
    assert_eq!(us.history_len(), 500);
    let (step, got) = purge_all(&e, &us, 1, 501, usize::MAX);
    assert_eq!((step.records, step.blocked_at), (500, Some(501)));
    assert_eq!(
        got.iter().map(|r| r.commit).collect::<Vec<_>>(),
        (1..=500).collect::<Vec<_>>()
    );
    assert_eq!(us.history_len(), 250);
    assert_eq!(e.metrics.get("trx_rseg_history_len"), Some(250));
    assert!(step.pages_freed > 0 && us.pages() == pages - step.pages_freed);
    // A step of at most 10 records.
    let (step, got) = purge_all(&e, &us, 1, u64::MAX, 10);
    assert_eq!(
        (step.records, got[0].commit, step.blocked_at),
        (10, 501, None)
    );
    // The rest: every page but the tail freed, the tail reset.
    let (step, _) = purge_all(&e, &us, 1, u64::MAX, usize::MAX);
    assert_eq!((step.records, step.blocked_at), (490, None));
    assert_eq!((us.pages(), us.history_len()), (1, 0));
    assert_eq!(e.metrics.get("trx_rseg_history_len"), Some(0));
    assert_eq!(e.metrics.get("purge_undo_log_pages"), Some(pages));
    let c = us.check(&e).unwrap();
    assert_eq!((c.pages, c.records, c.unpurged), (1, 0, 0));
    // Nothing more to do; the reset tail takes records again from the start.
    assert_eq!(
        purge_all(&e, &us, 1, u64::MAX, usize::MAX).0,
        PurgeStep::default()
    );
    let p = append(&e, &us, 1, &rec(true, 2000, b"k", None).as_record());
    assert_eq!(
        (p.page_no(), usize::from(p.offset())),
        (c.tails[1], RECORDS_START)
    );
    assert_eq!(us.history_len(), 1);
    // Other rsegs were untouched.
    assert_eq!(
        purge_all(&e, &us, 0, u64::MAX, usize::MAX).0,
        PurgeStep::default()
    );
}

#[test]
fn a_failing_callback_leaves_its_record_unpurged() {
    let (e, us) = undo_engine(4096);
    for c in 1..=5u64 {
        append(&e, &us, 0, &rec(true, c, b"k", None).as_record());
    }
    let mut n = 0;
    let r = us.purge(&e, 0, u64::MAX, usize::MAX, &mut |_| {
        n += 1;
        if n == 3 {
            return Err(Error::Corruption("callback".into()));
        }
        Ok(())
    });
    assert!(r.is_err());
    assert_eq!(us.history_len(), 3);
    let (step, got) = purge_all(&e, &us, 0, u64::MAX, usize::MAX);
    assert_eq!(step.records, 3);
    assert_eq!(got[0].commit, 3);
    assert_eq!(us.history_len(), 0);
}

#[test]
fn garbage_pointers_are_errors_not_panics() {
    let (e, us) = undo_engine(4096);
    let p = append(
        &e,
        &us,
        0,
        &rec(true, 1, b"key", Some(b"value")).as_record(),
    );
    let mut bad = vec![
        RollPtr::NONE,
        RollPtr::new(0, 48),
        RollPtr::new(1, 48),
        RollPtr::new(us.dir().page_no, 48),
        RollPtr::new(p.page_no(), 0),
        RollPtr::new(p.page_no(), 47),
        RollPtr::new(p.page_no(), p.offset() + 1),
        RollPtr::new(p.page_no(), p.offset() + 30),
        RollPtr::new(p.page_no(), u16::MAX),
        RollPtr::new(p.page_no() + 1000, 48),
        RollPtr::new(u32::MAX, 48),
    ];
    for off in 0..200u16 {
        bad.push(RollPtr::new(p.page_no(), off));
    }
    for b in bad {
        if b == p {
            continue;
        }
        assert!(us.read(&e, b).is_err(), "{b:?}");
    }
    // A page of garbage typed as an undo page.
    {
        let budget = e.adm.budget(Purpose::New);
        budget.ensure(mtr_bound(1, 4096)).unwrap();
        let mut mtr = Mtr::new(&e, &budget);
        let mut pg = e
            .pool
            .write(PageId::new(e.space_id(), p.page_no()))
            .unwrap();
        for (i, b) in pg[RECORDS_START..].iter_mut().enumerate() {
            *b = (i * 37 % 251) as u8;
        }
        mtr.keep(pg);
        mtr.commit().unwrap();
    }
    for off in 0..4096u32 {
        let _ = us.read(&e, RollPtr::new(p.page_no(), off as u16));
    }
    assert!(us.check(&e).is_err());
}

fn db_opts() -> Options {
    Options {
        page_size: 4096,
        buffer_pool_size: 256 * 4096,
        data_files: 1,
        ..Options::default()
    }
}

/// Append to a database's undo space: `n` records to each rseg, every
/// other one FIRST; purge rseg 0 below commit `n / 2`. The check after.
fn fill(db: &Db, n: u64) -> UndoCheck {
    let e = &*db.inner.engine;
    let us = UndoSpace::open(e).unwrap();
    // Commit numbers far past the log's end: the database's own purge
    // threads (whose limit is at most the log's end) never reach them.
    const BASE: u64 = 1 << 60;
    for c in 0..n {
        for rseg in 0..N_RSEGS {
            let r = rec(
                c % 2 == 0,
                BASE + c,
                &c.to_le_bytes(),
                Some(&[rseg as u8; 200]),
            );
            append(e, &us, rseg, &r.as_record());
        }
    }
    purge_all(e, &us, 0, BASE + n / 2, usize::MAX);
    us.check(e).unwrap()
}

/// Reopen's undo space agrees with `before`, and no page is unaccounted.
fn agrees(db: &Db, before: &UndoCheck) {
    let e = &*db.inner.engine;
    let us = UndoSpace::open(e).unwrap();
    assert_eq!(&us.check(e).unwrap(), before);
    assert_eq!(us.history_len(), before.first_unpurged);
    assert_eq!(us.pages(), before.pages);
    let trees: usize = db
        .check()
        .unwrap()
        .iter()
        .map(|(_, s)| s.leaf_pages + s.internal_pages)
        .sum();
    let hdr = e.pool.read(PageId::new(e.space_id(), 0)).unwrap();
    let in_use = get_u32(&hdr, sh::HWM) - 1 - get_u32(&hdr, sh::FREE_COUNT);
    assert_eq!(u64::from(in_use), trees as u64 + db.undo_pages().unwrap());
}

#[test]
fn lists_tails_and_history_survive_a_close_and_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), db_opts()).unwrap();
    let before = fill(&db, 300);
    assert!(before.pages > 8 && before.first_unpurged > 0);
    db.close().unwrap();
    let db = Db::open(dir.path(), db_opts()).unwrap();
    agrees(&db, &before);
    db.close().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let db = Db::open_with_fs(dir.path(), db_opts(), Some(fs.clone())).unwrap();
    let before = fill(&db, 300);
    let e = &db.inner.engine;
    e.log.write_up_to(e.log.lsn(), true).unwrap();
    fs.crash(CrashMode::DropUnsynced);
    db.simulate_crash();
    let db = Db::open_with_fs(dir.path(), db_opts(), Some(fs.clone())).unwrap();
    agrees(&db, &before);
    db.close().unwrap();
}

#[test]
fn appenders_and_a_purger_run_together() {
    let (e, us) = undo_engine(4096);
    let (threads, per) = (4u64, 600u64);
    let next = AtomicU64::new(1);
    let appended = AtomicU64::new(0);
    let mut seen = Vec::new();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (e, us, next, appended) = (&e, &us, &next, &appended);
            s.spawn(move || {
                for i in 0..per {
                    let c = next.fetch_add(1, Ordering::SeqCst);
                    let r = rec(i % 2 == 0, c, &c.to_be_bytes(), Some(&[t as u8; 150]));
                    append(e, us, (c % 2) as usize, &r.as_record());
                    appended.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        let total = threads * per;
        while (seen.len() as u64) < total {
            let done = appended.load(Ordering::SeqCst) == total;
            let before = seen.len();
            // Appends name rsegs 0 and 1, and go to another when theirs
            // is busy: purge them all.
            for rseg in 0..N_RSEGS {
                us.purge(&e, rseg, u64::MAX, 50, &mut |r| {
                    seen.push(r.commit);
                    Ok(())
                })
                .unwrap();
            }
            // Once every append is done, each round makes progress.
            assert!(!done || seen.len() > before || seen.len() as u64 == total);
        }
    });
    let distinct: HashSet<u64> = seen.iter().copied().collect();
    assert_eq!(distinct.len() as u64, threads * per);
    assert_eq!(us.history_len(), 0);
    let c = us.check(&e).unwrap();
    assert_eq!((c.unpurged, c.pages), (0, us.pages()));
    // At most each list's tail, which is reset, not freed.
    assert!(us.pages() <= N_RSEGS as u64, "{} pages left", us.pages());
}

/// An appender that finds its rseg's append mutex held takes a free rseg
/// instead of waiting (module doc of `undo::space`, "Which rseg"): the
/// first appender is held inside rseg 0's append, holding its mutex, and
/// a second naming rseg 0 finishes meanwhile, its record in rseg 1.
#[test]
fn an_appender_takes_a_free_rseg_when_its_own_is_held() {
    let (e, us) = undo_engine(4096);
    let hold = e.failpoints.arm("undo.appending");
    let (r1, r2) = (
        rec(true, 10, b"a", Some(b"old a")),
        rec(true, 12, b"b", Some(b"old b")),
    );
    std::thread::scope(|s| {
        let first = s.spawn(|| append(&e, &us, 0, &r1.as_record()));
        assert!(hold.wait_held(std::time::Duration::from_secs(10)));
        let p2 = append(&e, &us, 0, &r2.as_record());
        assert!(
            !first.is_finished(),
            "the first appender must still be held while the second finishes"
        );
        hold.release();
        let p1 = first.join().unwrap();
        assert_ne!(p1.page_no(), p2.page_no());
        assert_eq!(us.read(&e, p1).unwrap(), r1);
        assert_eq!(us.read(&e, p2).unwrap(), r2);
    });
    // Each list holds the record that went to it, and purge finds both.
    assert_eq!(purge_all(&e, &us, 0, 100, 10).1, vec![r1]);
    assert_eq!(purge_all(&e, &us, 1, 100, 10).1, vec![r2]);
}

#[test]
fn a_delta_rebuilds_its_value_from_the_base_and_refuses_a_base_too_short() {
    let base = b"0123456789abcdef";
    let d = delta_encode(b"HEAD", 3, 4, b"xyz");
    assert_eq!(d.len(), DELTA_HEADER + 4 + 3);
    assert_eq!(delta_apply(&d, base).unwrap(), b"HEAD012xyzcdef");
    // Prefix and suffix may cover the whole base, and nothing of it.
    assert_eq!(
        delta_apply(&delta_encode(b"", 10, 6, b"-"), base).unwrap(),
        b"0123456789-abcdef"
    );
    assert_eq!(
        delta_apply(&delta_encode(b"h", 0, 0, b""), base).unwrap(),
        b"h"
    );
    for (bad, base) in [
        (&delta_encode(b"", 10, 7, b""), &base[..]),
        (&d, &base[..6]),
        (&d[..4].to_vec(), &base[..]),
        (&vec![9, 0, 0, 0, 0, 1], &base[..]),
    ] {
        let e = delta_apply(bad, base).unwrap_err();
        assert!(matches!(e, Error::Corruption(_)), "{e}");
    }
}

#[test]
fn a_delta_shorter_than_its_header_is_refused_when_read() {
    let (e, us) = undo_engine(4096);
    let mut r = rec(false, 8, b"k", Some(&[1, 2, 3, 4, 5]));
    r.delta = true;
    let p = append(&e, &us, 0, &r.as_record());
    assert_eq!(us.read(&e, p).unwrap(), r);
    // Shrink the record's old value to 4 bytes in place: the flag says
    // delta, the bytes cannot be one.
    let id = PageId::new(e.space_id(), p.page_no());
    {
        let budget = e.adm.budget(Purpose::New);
        budget.ensure(mtr_bound(1, 4096)).unwrap();
        let mut mtr = Mtr::new(&e, &budget);
        let mut page = e.pool.write(id).unwrap();
        let off = usize::from(p.offset());
        let len = usize::from(get_u16(&page, off));
        put_u16(&mut page, off, (len - 1) as u16);
        let k = off + REC_KEY + 1;
        put_u32(&mut page, k, 4);
        mtr.keep(page);
        mtr.commit().unwrap();
    }
    let err = us.read(&e, p).unwrap_err();
    assert!(err.to_string().contains("delta"), "{err}");
}
