#![allow(clippy::unwrap_used)]
//! The open that finishes an unfinished bulk load (see `btree::bulk`):
//!
//! - on the largest pages and the smallest log (64 KiB pages, one 1 MiB
//!   log file: one mini-transaction may log at most 14 pages), a load
//!   crashed when its hidden tree was five levels deep (root at level 4)
//!   is dropped by the next open, in steps that fit the log;
//! - a load the database was closed under (not a crash) fails with
//!   `Error::Closed`, and the next open frees its pages, saying so without
//!   claiming a crash.
//!
//! On the faulty in-memory file system; after each scenario the pages in
//! use according to the space header of `data-0.keel` must equal the pages
//! of the trees (`Db::check`), as in `tests/bulk_load.rs`.

mod common;

use std::sync::{Mutex, Once};
use std::time::Duration;

use common::bulk::{Bed, HeldLoad};
use keel::format::page::{get_u32, PageId};
use keel::format::tree::OnDisk;
use keel::io::faulty::CrashMode;
use keel::{Error, Options, Table};

fn all_rows(t: &Table) -> Vec<(Vec<u8>, Vec<u8>)> {
    t.range(..).unwrap().map(|r| r.unwrap()).collect()
}

// ---------------------------------------------------------------------------
// 1. Five levels on 64 KiB pages and a 1 MiB log

/// 64 KiB pages, one log file of 1 MiB, a pool of 1024 pages, and the
/// fill factor that makes nodes smallest: 10 %, 6549 of the 65492 bytes a
/// node takes.
fn big_pages_small_log() -> Options {
    Options {
        page_size: 65536,
        buffer_pool_size: 64 << 20,
        flush_method: "nosync".parse().unwrap(),
        data_files: 2,
        log_file_size: 1 << 20,
        log_files_in_group: 1,
        fill_factor: 10,
        ..Default::default()
    }
}

/// Row `i`: a key of 1024 bytes of which all rows share the first 1016, so
/// every separator is about as long (1017 to 1024 bytes, 1025 to 1032 with
/// its cell header and slot: 6 to a node at 6549 bytes), and a value of
/// 7700 bytes, so a leaf holds one row (one is 8745 bytes stored, more
/// than the fill factor's 6549: a leaf takes it alone).
fn deep_row(i: u32) -> (Vec<u8>, Vec<u8>) {
    let mut k = vec![b'd'; 1016];
    k.extend_from_slice(format!("{i:08}").as_bytes());
    (k, vec![(i % 251) as u8; 7700])
}

/// Leaves written when the hidden root reaches level 4: a right-edge node
/// takes 6 separators, and when full it hands its last child and the new
/// one to a new neighbour, keeping 6 children, so levels 1 to 3 hold at
/// most 6³ + 6² + 6 + 1 = 259 leaves. (Level 5 takes 1556 leaves: the test
/// checks the height it built.)
const DEEP_LEAVES: u32 = 260;

/// Levels of the hidden tree a pending load is building into table `t`,
/// read from the data files (`docs/format.md`): the pending mark in bytes
/// 24..28 of the table's root page names the hidden root, which
/// `OnDisk::check` walks.
fn hidden_tree_height(bed: &Bed) -> usize {
    let od = OnDisk::open_with_fs(bed.dir.path(), &*bed.fs).unwrap();
    let (_, root) = od
        .tables()
        .unwrap()
        .into_iter()
        .find(|(name, _)| name == "t")
        .unwrap();
    // Striping: page p of extent e = p / 64 is in file e mod N, at
    // page_size × (1 + (e / N) × 64 + p mod 64).
    let (ps, files) = (od.page_size(), bed.opts.data_files);
    let (p, e) = (root.page_no as usize, root.page_no as usize / 64);
    let at = ps * (1 + (e / files) * 64 + p % 64);
    let file = bed.data_image(e % files);
    let hidden = get_u32(&file[at..at + ps], 24);
    assert_ne!(hidden, 0, "no bulk load is pending on `t`");
    od.check(PageId::new(root.space, hidden)).unwrap().height
}

/// The open must drop the crashed load's hidden tree, root at level 4.
/// Each drop step changes the right edge (4 nodes), the children it frees
/// and the space header; the step's bound used to count the edge twice,
/// 15 pages of redo where a writer may reserve 14, so the reservation
/// could never be granted and every open failed (after a minute, with
/// `LogOverloaded`): the database could not be opened again.
#[test]
fn a_load_crashed_five_levels_deep_on_64k_pages_and_a_1mib_log_is_dropped_at_open() {
    let bed = Bed::new(big_pages_small_log());
    let db = bed.open();
    let t = db.create_table("t").unwrap();
    let wait = Duration::from_secs(600);
    let load = HeldLoad::start(&db, &t, DEEP_LEAVES + 10, DEEP_LEAVES + 1, deep_row, wait);
    // The whole hidden tree in the data files, then the power fails.
    db.flush().unwrap();
    assert_eq!(
        hidden_tree_height(&bed),
        5,
        "the hidden root is not at level 4"
    );
    drop(t);
    bed.fs.crash(CrashMode::DropUnsynced);
    db.simulate_crash();
    assert!(load.finish().is_err());

    let db = bed.open();
    let t = db.table("t").unwrap();
    assert_eq!(all_rows(&t), vec![]);
    drop(t);
    let free = bed.close_without_leak(db);
    assert!(
        free > DEEP_LEAVES,
        "only {free} pages free: the hidden tree of {DEEP_LEAVES} leaves was not there to drop"
    );

    // The table takes a load again, into the pages freed: its leaf writes
    // need 6, 8 and 10 pages of redo, more than the band under the flusher's
    // free-running level, and the flusher brings the age down for them
    // (it used to stay idle, and the load got `LogOverloaded`).
    let db = bed.open();
    let t = db.table("t").unwrap();
    assert_eq!(t.bulk_load((0..100).map(deep_row)).unwrap(), 100);
    assert_eq!(all_rows(&t).len(), 100);
    drop(t);
    bed.close_without_leak(db);
}

// ---------------------------------------------------------------------------
// 2. A close while a load runs

/// The warnings logged in this test binary (every test's: filter by a
/// name of your own).
static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::Level::Warn
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            WARNINGS.lock().unwrap().push(r.args().to_string());
        }
    }
    fn flush(&self) {}
}

fn capture_warnings() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        log::set_logger(&Capture).unwrap();
        log::set_max_level(log::LevelFilter::Warn);
    });
}

/// Row `i` of the close test: 4 KiB pages, three rows to a leaf.
fn row(i: u32) -> (Vec<u8>, Vec<u8>) {
    (format!("{i:08}").into_bytes(), vec![(i % 251) as u8; 1000])
}

/// A clean close while a load is held: the load fails with `Closed` (it
/// may not write once the database closes, not even to free its pages),
/// and the next open frees what it had built. The open used to say the
/// load "was interrupted by a crash"; there was none. Short keys give the
/// nodes above the leaves hundreds of children: a drop step used to latch
/// 64 of them at once, all the frames of this pool, and the open failed
/// with `BufferPoolExhausted`.
#[test]
fn a_close_during_a_load_fails_it_and_the_next_open_frees_its_pages() {
    capture_warnings();
    let bed = Bed::new(common::small_opts(64));
    let db = bed.open();
    let t = db.create_table("closed_mid_load").unwrap();
    let load = HeldLoad::start(&db, &t, 1200, 900, row, Duration::from_secs(60));
    drop(t);
    db.close().unwrap();
    let r = load.finish();
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");

    let db = bed.open();
    let said: Vec<String> = WARNINGS
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m.contains("`closed_mid_load`") && m.contains("bulk load"))
        .cloned()
        .collect();
    assert!(
        said.iter()
            .any(|m| m.contains("never finished") && m.contains("closed")),
        "{said:?}"
    );
    assert!(
        !said.iter().any(|m| m.contains("interrupted by a crash")),
        "{said:?}"
    );
    let t = db.table("closed_mid_load").unwrap();
    assert_eq!(all_rows(&t), vec![]);
    drop(t);
    let free = bed.close_without_leak(db);
    assert!(
        free >= 299,
        "only {free} pages free: the hidden tree was not freed"
    );
}
