#![allow(clippy::unwrap_used)]
//! Keel's byte counters add up to what its files were handed: the bytes
//! written through the file system layer (a counting wrapper around the
//! faulty in-memory one) equal the sum of `log_bytes_written`,
//! `os_data_written_bytes`, `dblwr_written_bytes` and
//! `os_other_written_bytes`, per kind of file,
//! over the whole life of a database: creation, a bulk load, a workload
//! that overflows a small pool (LRU and single-page writes, flush batches,
//! undo pages, checkpoints), close, reopen and more writes.

mod common;

use std::sync::Arc;

use keel::io::{CountingFs, FaultyFs, FileSystem};
use keel::{Db, Metrics};

fn get(m: &Metrics, name: &str) -> u64 {
    m.get(name).unwrap()
}

/// The counters of one open of the database, once it is closed.
#[derive(Default, Debug, Clone, Copy, PartialEq)]
struct Counted {
    log: u64,
    data: u64,
    dblwr: u64,
    other: u64,
}

impl Counted {
    fn of(m: &Metrics) -> Counted {
        Counted {
            log: get(m, "log_bytes_written"),
            data: get(m, "os_data_written_bytes"),
            dblwr: get(m, "dblwr_written_bytes"),
            other: get(m, "os_other_written_bytes"),
        }
    }
    fn plus(self, o: Counted) -> Counted {
        Counted {
            log: self.log + o.log,
            data: self.data + o.data,
            dblwr: self.dblwr + o.dblwr,
            other: self.other + o.other,
        }
    }
}

fn work(db: &Db, round: u32) {
    let t = match db.table("t") {
        Ok(t) => t,
        Err(_) => db.create_table("t").unwrap(),
    };
    // More rows than the pool holds: LRU flushes and single-page writes.
    for i in 0..3000u32 {
        t.put(&(i * 7 + round).to_be_bytes(), &[round as u8; 120])
            .unwrap();
    }
    for i in (0..3000u32).step_by(3) {
        t.delete(&(i * 7 + round).to_be_bytes()).unwrap();
    }
    db.checkpoint().unwrap();
    let loaded = db.create_table(&format!("bulk{round}")).unwrap();
    loaded
        .bulk_load((0..4000u32).map(|i| (i.to_be_bytes(), [3u8; 60])))
        .unwrap();
    db.flush().unwrap();
}

#[test]
fn the_byte_counters_add_up_to_the_bytes_the_files_were_handed() {
    add_up(keel::PageCompression::None);
}

/// The same with `page_compression = zstd`, where a page written in place
/// is its stored image, shorter than the page: the data files were handed
/// exactly what `os_data_written_bytes` says, less than a page per page
/// written, and every row reads back after the reopen.
#[test]
fn the_byte_counters_add_up_with_page_compression() {
    add_up(keel::PageCompression::Zstd);
}

fn add_up(compression: keel::PageCompression) {
    let dir = tempfile::tempdir().unwrap();
    let faulty: Arc<dyn FileSystem> = Arc::new(FaultyFs::new());
    let fs = Arc::new(CountingFs::new(faulty));
    let mut o = common::small_opts(64);
    o.doublewrite = keel::DoublewriteMode::On;
    o.page_compression = compression;
    if compression == keel::PageCompression::Zstd {
        // 4 KiB pages never save a block: 8 KiB ones of these rows are
        // stored in one.
        o.page_size = 8192;
        o.buffer_pool_size = 32 * 8192;
    }
    let mut pages = 0;
    let mut saved = 0;
    let db = Db::open_with_fs(dir.path(), o.clone(), Some(fs.clone())).unwrap();
    work(&db, 0);
    let m = db.metrics_shared();
    db.close().unwrap();
    pages += get(&m, "buffer_pages_written");
    saved += get(&m, "page_compression_saved");
    let mut total = Counted::of(&m);
    // Reopened: its counters start at 0; recovery and the new epoch's
    // checkpoint write too.
    let db = Db::open_with_fs(dir.path(), o.clone(), Some(fs.clone())).unwrap();
    work(&db, 1);
    let m = db.metrics_shared();
    db.close().unwrap();
    pages += get(&m, "buffer_pages_written");
    saved += get(&m, "page_compression_saved");
    total = total.plus(Counted::of(&m));
    if compression == keel::PageCompression::Zstd {
        assert!(saved > 0, "nothing compressed");
        assert!(
            total.data < pages * o.page_size as u64,
            "{} bytes for {pages} pages",
            total.data
        );
    } else {
        assert_eq!(saved, 0);
    }
    assert!(
        total.log > 0 && total.data > 0 && total.dblwr > 0 && total.other > 0,
        "{total:?}"
    );
    let redo = fs.written_to("redo-");
    let data = fs.written_to("data-");
    let dblwr = fs.written_to("dblwr-");
    assert_eq!(
        redo + data,
        total.log + total.data + total.other,
        "redo and data files: {fs:?} {total:?}"
    );
    assert!(data >= total.data && redo >= total.log, "{fs:?} {total:?}");
    assert_eq!(dblwr, total.dblwr, "{fs:?} {total:?}");
    assert_eq!(
        fs.written_to(""),
        redo + data + dblwr,
        "a file of another kind was written: {fs:?}"
    );
    // Every row of both rounds reads back, through the decoder where the
    // pages were compressed.
    let db = Db::open_with_fs(dir.path(), o, Some(fs.clone())).unwrap();
    let t = db.table("t").unwrap();
    for round in 0..2u32 {
        for i in 0..3000u32 {
            let got = t.get(&(i * 7 + round).to_be_bytes()).unwrap();
            let want = (i % 3 != 0).then(|| vec![round as u8; 120]);
            assert_eq!(got, want, "round {round} row {i}");
        }
    }
    drop(t);
    let decoded = get(db.metrics(), "num_pages_page_decompressed");
    assert_eq!(decoded > 0, compression == keel::PageCompression::Zstd);
    db.close().unwrap();
}
