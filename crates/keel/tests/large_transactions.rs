#![allow(clippy::unwrap_used)]
//! One large transaction beside a small committer, on a 2 × 1 MiB redo log
//! (the outside review's scenario): a transaction whose write set the log
//! cannot hold is refused at once, before anything is logged, and the rest
//! goes on; a large transaction the log can hold commits even though
//! applying it logs more than the whole log (its undo records carry the
//! old values its record leaves out), because it reserves log space
//! operation by operation and the checkpointer relocates its record. After
//! a power loss every acknowledged commit is back and every tree checks.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel::io::faulty::{CrashMode, FaultyFs};
use keel::{Db, Error, Options};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const OLD_ROWS: u32 = 20_000;

fn opts(page_size: usize) -> Options {
    Options {
        page_size,
        buffer_pool_size: 8 << 20,
        data_files: 2,
        log_file_size: 1 << 20,
        log_files_in_group: 2,
        flush_log_at_trx_commit: 1,
        ..Default::default()
    }
}

/// Row `i` of the 20,000 old rows: a random-looking 16-byte key.
fn old_key(i: u32) -> [u8; 16] {
    let mut rng = SmallRng::seed_from_u64(u64::from(i) ^ 0x5eed);
    rng.gen()
}

/// A database of `page_size` pages on an in-memory device with 20,000
/// committed rows.
fn loaded(page_size: usize) -> (tempfile::TempDir, Arc<FaultyFs>, Db) {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    let db = Db::open_with_fs(dir.path(), opts(page_size), Some(fs.clone())).unwrap();
    let t = db.create_table("old").unwrap();
    db.create_table("small").unwrap();
    db.create_table("big").unwrap();
    for chunk in (0..OLD_ROWS).collect::<Vec<_>>().chunks(500) {
        let mut tx = db.begin();
        for &i in chunk {
            tx.put(&t, &old_key(i), &[7u8; 16]).unwrap();
        }
        tx.commit().unwrap();
    }
    db.flush().unwrap();
    (dir, fs, db)
}

/// Rows of the `fat` table ([`load_fat`]).
const FAT_ROWS: u32 = 3_600;
/// The fat rows' value: 1,000 bytes.
const FAT: [u8; 1000] = [0xfa; 1000];
/// The value the large transaction gives every fat row.
const SLIM: &[u8] = b"s";

fn fat_key(i: u32) -> [u8; 16] {
    let mut k = *b"fat-row-........";
    k[8..12].copy_from_slice(&i.to_be_bytes());
    k
}

/// Table `fat`: [`FAT_ROWS`] rows of [`FAT`], committed 50 rows at a time
/// (each commit's record well inside what the log accepts).
fn load_fat(db: &Db) {
    let t = db.create_table("fat").unwrap();
    for chunk in (0..FAT_ROWS).collect::<Vec<_>>().chunks(50) {
        let mut tx = db.begin();
        for &i in chunk {
            tx.put(&t, &fat_key(i), &FAT).unwrap();
        }
        tx.commit().unwrap();
    }
    db.flush().unwrap();
}

/// A transaction giving every fat row the value [`SLIM`]: a record of
/// about 100 KB (keys and one-byte values), which the 2 MiB log accepts,
/// whose application logs about 3.7 MB, since every update's undo record
/// keeps the 1,000-byte value it replaces.
fn slimming_txn(db: &Db) -> keel::Txn {
    let t = db.table("fat").unwrap();
    let mut tx = db.begin();
    for i in 0..FAT_ROWS {
        tx.put(&t, &fat_key(i), SLIM).unwrap();
    }
    tx
}

/// What the large transaction did, to check after recovery that it is
/// all or nothing.
enum Big<'a> {
    /// Inserted these keys into this table (`old` holds [`OLD_ROWS`] more).
    Inserted(&'a str, &'a [[u8; 16]]),
    /// Gave every fat row the value [`SLIM`].
    Slimmed,
}

/// Commit one small row every 5 ms until `stop`; returns the acknowledged keys.
fn small_committer(db: Db, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<u32>> {
    std::thread::spawn(move || {
        let t = db.table("small").unwrap();
        let mut acked = Vec::new();
        let mut i = 0u32;
        while !stop.load(Ordering::Acquire) {
            if t.put(&i.to_be_bytes(), b"small").is_ok() {
                acked.push(i);
            }
            i += 1;
            std::thread::sleep(Duration::from_millis(5));
        }
        acked
    })
}

/// A transaction inserting `n` random 16-byte keys with `value` into
/// `table`.
fn big_txn(db: &Db, table: &str, n: usize, value: &[u8], seed: u64) -> (keel::Txn, Vec<[u8; 16]>) {
    let t = db.table(table).unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut tx = db.begin();
    let mut keys = Vec::with_capacity(n);
    for _ in 0..n {
        let k: [u8; 16] = rng.gen();
        tx.put(&t, &k, value).unwrap();
        keys.push(k);
    }
    (tx, keys)
}

/// Power loss, reopen, and check every tree and every acknowledged row:
/// the old rows, the small commits, and the big transaction's keys (all or
/// none) in table `big_table`.
fn crash_and_verify(
    dir: &tempfile::TempDir,
    fs: &Arc<FaultyFs>,
    db: Db,
    small: &[u32],
    big: Big<'_>,
) {
    let o = db.options().clone();
    fs.crash(CrashMode::DropUnsynced);
    db.simulate_crash();
    verify_recovered(dir, fs, o, small, big, true);
}

/// Reopen after a crash and check every tree and every acknowledged row:
/// the old rows, the small commits, and the big transaction's changes:
/// all of them, or (unless `acked`) all or none.
fn verify_recovered(
    dir: &tempfile::TempDir,
    fs: &Arc<FaultyFs>,
    o: Options,
    small: &[u32],
    big: Big<'_>,
    acked: bool,
) {
    let db = Db::open_with_fs(dir.path(), o, Some(fs.clone())).unwrap();
    for (name, stats) in db.check().unwrap() {
        assert!(stats.height > 0, "{name}");
    }
    let old = db.table("old").unwrap();
    for i in 0..OLD_ROWS {
        assert!(old.get(&old_key(i)).unwrap().is_some(), "old row {i}");
    }
    let s = db.table("small").unwrap();
    for i in small {
        assert_eq!(
            s.get(&i.to_be_bytes()).unwrap().as_deref(),
            Some(&b"small"[..]),
            "small row {i}"
        );
    }
    match big {
        Big::Inserted(table, keys) => {
            let b = db.table(table).unwrap();
            let extra = if table == "old" { OLD_ROWS as usize } else { 0 };
            let found = b.range(..).unwrap().count() - extra;
            if acked || found > 0 {
                assert_eq!(found, keys.len(), "the big transaction is all or nothing");
                for k in keys {
                    assert!(b.get(k).unwrap().is_some());
                }
            }
        }
        Big::Slimmed => {
            let f = db.table("fat").unwrap();
            let rows: Vec<_> = f.range(..).unwrap().map(|r| r.unwrap()).collect();
            assert_eq!(rows.len(), FAT_ROWS as usize, "fat rows");
            let slim = rows.iter().filter(|(_, v)| &v[..] == SLIM).count();
            let fat = rows.iter().filter(|(_, v)| v[..] == FAT[..]).count();
            assert_eq!(slim + fat, rows.len(), "every fat row is old or new");
            if acked || slim > 0 {
                assert_eq!(slim, rows.len(), "the big transaction is all or nothing");
            }
        }
    }
    drop((old, s));
    db.close().unwrap();
}

#[test]
fn a_transaction_too_large_for_the_log_is_refused_at_once_and_nothing_is_lost() {
    let (dir, fs, db) = loaded(16384);
    let stop = Arc::new(AtomicBool::new(false));
    let committer = small_committer(db.clone(), stop.clone());
    std::thread::sleep(Duration::from_millis(50));
    // Its record holds the 7,000 keys (16 bytes and 3 of framing each),
    // not the values: about 133 KB, over the 1/20 of the log it may take.
    let (tx, _) = big_txn(&db, "big", 7_000, &[1u8; 16], 1);
    let lsn_before = db.metrics().get("log_lsn_current").unwrap();
    let t0 = Instant::now();
    let err = tx.commit().unwrap_err();
    let took = t0.elapsed();
    eprintln!("7,000 random inserts on a 2 x 1 MiB log: refused in {took:?}: {err}");
    match &err {
        Error::TransactionTooLarge { bytes, limit, .. } => assert!(bytes > limit),
        e => panic!("expected TransactionTooLarge, got {e}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("log_file_size") && msg.contains("smaller transactions"),
        "{msg}"
    );
    assert!(took < Duration::from_millis(100), "refusing took {took:?}");
    // The small committer was never held up.
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Release);
    let small = committer.join().unwrap();
    assert!(small.len() >= 10, "only {} small commits", small.len());
    assert!(db.metrics().get("log_lsn_current").unwrap() > lsn_before);
    crash_and_verify(&dir, &fs, db, &small, Big::Inserted("big", &[]));
}

#[test]
fn a_large_transaction_that_logs_more_than_the_log_holds_commits_and_survives_power_loss() {
    let (dir, fs, db) = loaded(65536);
    load_fat(&db);
    let stop = Arc::new(AtomicBool::new(false));
    let committer = small_committer(db.clone(), stop.clone());
    let tx = slimming_txn(&db);
    let lsn_before = db.metrics().get("log_lsn_current").unwrap();
    let t0 = Instant::now();
    tx.commit().unwrap();
    let took = t0.elapsed();
    let m = db.metrics();
    let logged = m.get("log_lsn_current").unwrap() - lsn_before;
    eprintln!(
        "3,600 updates dropping 1,000-byte values on a 2 x 1 MiB log: committed in {took:?}, \
         {logged} bytes of redo meanwhile, {} relocations, {} free-check waits",
        m.get("log_relocations").unwrap(),
        m.get("log_free_check_waits").unwrap()
    );
    assert!(
        logged > m.get("log_capacity").unwrap(),
        "the test must outgrow the log"
    );
    stop.store(true, Ordering::Release);
    let small = committer.join().unwrap();
    crash_and_verify(&dir, &fs, db, &small, Big::Slimmed);
}

/// The race behind "one checkpointer at a time" (`Engine::checkpoint`): a
/// checkpointer has relocated the records of the commits in flight, so
/// their pins point at a group that is not durable yet, and it is held
/// (failpoint `checkpoint.relocated`) before it syncs that group. Another
/// checkpoint (`Db::checkpoint`, as a page cleaner's after a batch) must
/// not read the bound meanwhile, since it could pass the original records:
/// it is still waiting while the first is held. Then the power fails, and
/// the large commit, half applied, comes back whole or not at all, beside
/// every acknowledged small commit. (With the mutex taken out, the second
/// checkpoint returns while the first is held, and this test fails.)
#[test]
fn a_checkpoint_cannot_pass_relocated_records_before_they_are_durable() {
    let (dir, fs, db) = loaded(65536);
    load_fat(&db);
    let hold = db.failpoint("checkpoint.relocated");
    let stop = Arc::new(AtomicBool::new(false));
    let committer = small_committer(db.clone(), stop.clone());
    let tx = slimming_txn(&db);
    let big = std::thread::spawn(move || tx.commit());
    assert!(
        hold.wait_held(Duration::from_secs(60)),
        "no checkpoint relocated the large commit's record"
    );
    let second = {
        let db = db.clone();
        std::thread::spawn(move || db.checkpoint())
    };
    // A checkpoint takes a sync and a write: far less than this, were it
    // let through.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !second.is_finished(),
        "a second checkpoint ran while the first had relocated records not yet durable"
    );
    fs.crash(CrashMode::DropUnsynced);
    hold.release();
    let o = db.options().clone();
    db.clone().simulate_crash();
    stop.store(true, Ordering::Release);
    let small = committer.join().unwrap();
    let acked = big.join().unwrap().is_ok();
    let _ = second.join().unwrap();
    drop(db);
    eprintln!("large commit acknowledged before the power failed: {acked}");
    verify_recovered(&dir, &fs, o, &small, Big::Slimmed, acked);
}
