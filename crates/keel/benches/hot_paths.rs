//! Criterion micro-benchmarks of the paths a single-thread CPU profile of
//! `keel bench oltp --workload read_write` spends its time in, through the
//! public API only:
//!
//! - `point_get`: `Txn::get` of a random key in an open transaction (its
//!   snapshot already taken), as sysbench's point selects do;
//! - `table_get`: `Table::get` of a random key (a snapshot per call);
//! - `scan_100`: `Txn::scan` of 100 rows from a random id (sysbench's range
//!   queries: `BETWEEN id AND id + 99`), every row read;
//! - `scan_100_lent`: the same through `Scan::next_row`, which lends each
//!   row instead of copying it (what `keel bench oltp`'s driver uses);
//! - `table_range_100`: the same through `Table::range`;
//! - `commit_update_4`: a transaction that updates 4 random rows and
//!   commits (row locks, B+tree updates, undo records, the redo page
//!   diffs, the mini-transaction commit), with `flush_log_at_trx_commit
//!   = 2`: no log sync at commit, so it measures CPU, not the disk;
//! - `page_checksum_16k`: `keel::format::page::verify_page` of a 16 KiB
//!   leaf page read from the data file: the CRC-32C of the page, which
//!   every page read verifies and every page write computes, plus the
//!   header checks.
//!
//! The redo diff of a page (`diff_changes`) is not public, so it is
//! measured only inside `commit_update_4`.
//!
//! ```text
//! cargo bench -p keel --bench hot_paths               # about a minute
//! cargo bench -p keel --bench hot_paths -- scan_100   # one benchmark
//! ```
//!
//! One database is opened once, in a temporary directory under /dev/shm
//! when it exists (else the system's temp dir), with a 256 MiB pool that
//! holds the table: 50,000 sysbench-like rows (4-byte big-endian ids,
//! 120-byte values), bulk-loaded, then read once so that every page is in
//! the pool. The figures are time per operation (one get, one scan of 100
//! rows, one transaction, one page). Each benchmark warms up for 1 s and
//! measures 20 samples over 3 s; criterion's usual flags apply after `--`
//! (`--measurement-time 10`, `--sample-size 100`, `--save-baseline NAME`,
//! `--baseline NAME`).

use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use keel::format::page::{page_id, page_type, verify_page, PageType};
use keel::{Db, Options, Table, Txn};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Rows in the table.
const ROWS: u32 = 50_000;
/// Bytes per value (sysbench's `k`, `c` and `pad` are about 190 bytes; the
/// profile's rows are 120).
const VALUE: usize = 120;
/// Rows per range query.
const RANGE: u32 = 100;
/// Rows a `commit_update_4` transaction updates.
const UPDATES: usize = 4;

fn key(id: u32) -> [u8; 4] {
    id.to_be_bytes()
}

fn value(id: u32, version: u32) -> Vec<u8> {
    (0..VALUE)
        .map(|i| b'0' + ((id as usize * 31 + version as usize * 17 + i * 7) % 10) as u8)
        .collect()
}

struct Fixture {
    db: Db,
    table: Table,
    /// A leaf page as the data file holds it.
    page: Vec<u8>,
    _dir: tempfile::TempDir,
}

fn temp_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    let mut builder = tempfile::Builder::new();
    builder.prefix("keel-hot-paths-");
    if shm.is_dir() {
        if let Ok(dir) = builder.tempdir_in(shm) {
            return dir;
        }
    }
    builder.tempdir().expect("create a temporary directory")
}

fn fixture() -> Fixture {
    let dir = temp_dir();
    let options = Options {
        buffer_pool_size: 256 << 20,
        flush_log_at_trx_commit: 2,
        ..Options::default()
    };
    let page_size = options.page_size;
    let db = Db::open(dir.path(), options).expect("open the database");
    let table = db.create_table("sbtest1").expect("create the table");
    let loaded = table
        .bulk_load((1..=ROWS).map(|id| (key(id), value(id, 0))))
        .expect("bulk-load the rows");
    assert_eq!(loaded, u64::from(ROWS));
    // Every page into the pool, and onto disk for the checksum bench.
    let rows = table.range(..).expect("scan").count();
    assert_eq!(rows, ROWS as usize);
    db.flush().expect("flush the pages");
    let page = leaf_page(dir.path(), page_size);
    Fixture {
        db,
        table,
        page,
        _dir: dir,
    }
}

/// The first B+tree leaf of the first data file that passes its checks.
/// Visit the [`RANGE`] rows of `table` from key `first` on, lent by
/// `next_row`. Inlined, so that the benchmarks time the same code as
/// when the loop was written out in each.
#[inline(always)]
fn scan_lent(tx: &Txn, table: &Table, first: u32) {
    let (lo, hi) = (key(first), key(first + RANGE - 1));
    let mut scan = tx.scan(table, lo.as_slice()..=hi.as_slice()).expect("scan");
    let mut n = 0;
    while let Some(row) = scan.next_row() {
        black_box(row.expect("row"));
        n += 1;
    }
    assert_eq!(n, RANGE);
}

/// Rows of the scattered table: some 60 MB of keys, values and cell
/// headers, more than a server CPU's last-level cache, well inside the
/// 256 MiB pool.
const SCATTERED_ROWS: u32 = 400_000;

/// A table of [`SCATTERED_ROWS`] rows written in a random order, a
/// thousand to a transaction.
fn scattered_table(db: &Db) -> Table {
    let table = db.create_table("scattered").expect("create the table");
    let mut ids: Vec<u32> = (1..=SCATTERED_ROWS).collect();
    let mut rng = SmallRng::seed_from_u64(7);
    for i in (1..ids.len()).rev() {
        ids.swap(i, rng.gen_range(0..=i));
    }
    for chunk in ids.chunks(1000) {
        let mut tx = db.begin();
        for &id in chunk {
            tx.put(&table, &key(id), &value(id, 0)).expect("put");
        }
        tx.commit().expect("commit");
    }
    table
}

fn leaf_page(dir: &Path, page_size: usize) -> Vec<u8> {
    let file = dir.join(keel::format::data::file_name(0));
    let bytes = std::fs::read(&file).expect("read the data file");
    bytes
        .chunks_exact(page_size)
        .skip(1) // the file header
        .find(|p| page_type(p) == Some(PageType::BtreeLeaf) && verify_page(p, page_id(p)).is_ok())
        .expect("a leaf page in the data file")
        .to_vec()
}

fn hot_paths(c: &mut Criterion) {
    let f = fixture();
    let (db, table) = (&f.db, &f.table);
    let mut rng = SmallRng::seed_from_u64(1);

    c.bench_function("point_get", |b| {
        let tx = db.begin();
        b.iter(|| {
            let k = key(rng.gen_range(1..=ROWS));
            black_box(tx.get(table, &k).expect("get"))
        });
        tx.rollback();
    });

    c.bench_function("table_get", |b| {
        b.iter(|| {
            let k = key(rng.gen_range(1..=ROWS));
            black_box(table.get(&k).expect("get"))
        })
    });

    let mut group = c.benchmark_group("range");
    group.throughput(Throughput::Elements(u64::from(RANGE)));
    group.bench_function("scan_100", |b| {
        let tx = db.begin();
        b.iter(|| {
            let lo = rng.gen_range(1..=ROWS - RANGE + 1);
            let (lo, hi) = (key(lo), key(lo + RANGE - 1));
            let mut n = 0;
            for row in tx.scan(table, lo.as_slice()..=hi.as_slice()).expect("scan") {
                black_box(row.expect("row"));
                n += 1;
            }
            assert_eq!(n, RANGE);
        });
        tx.rollback();
    });
    group.bench_function("scan_100_lent", |b| {
        let tx = db.begin();
        b.iter(|| scan_lent(&tx, table, rng.gen_range(1..=ROWS - RANGE + 1)));
        tx.rollback();
    });
    group.bench_function("table_range_100", |b| {
        b.iter(|| {
            let lo = rng.gen_range(1..=ROWS - RANGE + 1);
            let (lo, hi) = (key(lo), key(lo + RANGE - 1));
            let mut n = 0;
            for row in table.range(lo.as_slice()..=hi.as_slice()).expect("range") {
                black_box(row.expect("row"));
                n += 1;
            }
            assert_eq!(n, RANGE);
        })
    });
    group.finish();

    // Ranges over a table written in random key order and larger than the
    // CPU's last-level cache: a leaf's cells lie in the order they were
    // written, so a scan in key order jumps about each page, as in an
    // OLTP table (the bulk-loaded table above has its cells in order).
    let scattered = scattered_table(db);
    let mut group = c.benchmark_group("range");
    group.throughput(Throughput::Elements(u64::from(RANGE)));
    group.bench_function("scan_100_scattered", |b| {
        let tx = db.begin();
        b.iter(|| {
            scan_lent(
                &tx,
                &scattered,
                rng.gen_range(1..=SCATTERED_ROWS - RANGE + 1),
            )
        });
        tx.rollback();
    });
    group.finish();

    let mut version = 0u32;
    c.bench_function("commit_update_4", |b| {
        b.iter(|| {
            version = version.wrapping_add(1);
            let mut tx = db.begin();
            for _ in 0..UPDATES {
                let id = rng.gen_range(1..=ROWS);
                tx.put(table, &key(id), &value(id, version)).expect("put");
            }
            tx.commit().expect("commit")
        })
    });

    let mut group = c.benchmark_group("page");
    group.throughput(Throughput::Bytes(f.page.len() as u64));
    let id = page_id(&f.page);
    group.bench_function("page_checksum_16k", |b| {
        b.iter(|| verify_page(black_box(&f.page), id).expect("a valid page"))
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = hot_paths
}
criterion_main!(benches);
