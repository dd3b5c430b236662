#![allow(clippy::unwrap_used)]
//! `keel check` end to end: a clean bench database passes (page size read
//! from the file header), a row missing from under its index entry, a
//! flipped byte in a page, and a crashed directory (recovered, then clean).

mod common;

use std::path::Path;

use common::{keel_in, set_flags, small_options, SMALL_SETS};
use keel::Db;
use keel_bench::oltp::{index_key, index_name, table_name, Row};

/// `keel check DIR --json`, parsed; no engine option is given, so the page
/// size (4096, not the default) must come from the data file's header.
fn check_json(db: &Path, cwd: &Path) -> (bool, serde_json::Value) {
    let r = keel_in(cwd, &["check", db.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", r.stdout, r.stderr));
    assert_eq!(v["ok"].as_bool().unwrap(), r.ok(), "{v:#}\n{}", r.stderr);
    (r.ok(), v)
}

fn table_rows(v: &serde_json::Value, name: &str) -> u64 {
    v["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no table {name} in {v:#}"))["rows"]
        .as_u64()
        .unwrap()
}

fn problems(v: &serde_json::Value) -> Vec<String> {
    v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_string())
        .collect()
}

/// A small sysbench database in `cwd/db`, with 4 KiB pages.
fn bench_db(cwd: &Path) -> std::path::PathBuf {
    let mut args = vec![
        "bench",
        "oltp",
        "--tables",
        "2",
        "--table-size",
        "300",
        "--threads",
        "2",
        "--time",
        "0.3",
        "--report-interval",
        "0.3",
        "--range-size",
        "10",
        "--datadir",
        "db",
        "--report",
        "rep",
    ];
    args.extend(set_flags(SMALL_SETS));
    let r = keel_in(cwd, &args);
    assert!(r.ok(), "{r}");
    cwd.join("db")
}

#[test]
fn clean_bench_database_passes_and_a_row_missing_under_its_index_entry_fails() {
    let tmp = tempfile::tempdir().unwrap();
    let db = bench_db(tmp.path());

    let (ok, v) = check_json(&db, tmp.path());
    assert!(ok, "{v:#}");
    assert_eq!(v["recovered"], false, "{v:#}");
    assert!(problems(&v).is_empty(), "{v:#}");
    for n in ["sbtest1", "sbtest2"] {
        let rows = table_rows(&v, n);
        assert!(rows >= 300, "{n}: {rows} rows");
        assert_eq!(table_rows(&v, &format!("{n}.k")), rows, "{v:#}");
    }
    assert!(
        v["tables"].as_array().unwrap()[0]["pages"]
            .as_u64()
            .unwrap()
            > 1,
        "{v:#}"
    );
    // The human form says the same.
    let r = keel_in(tmp.path(), &["check", db.to_str().unwrap()]);
    assert!(r.ok() && r.stdout.contains("check passed"), "{r}");
    assert!(
        r.stdout.contains("sbtest1.k") && r.stdout.contains("ok"),
        "{}",
        r.stdout
    );

    // Delete one row behind the index's back: its index entry is now stray.
    let d = Db::open(&db, small_options(&[])).unwrap();
    let t = d.table(&table_name(1)).unwrap();
    let (key, value) = t.range(..).unwrap().nth(7).unwrap().unwrap();
    let id = u64::from_be_bytes(key.as_slice().try_into().unwrap());
    let k = Row::decode(&value).unwrap().k;
    assert!(d
        .table(&index_name(1))
        .unwrap()
        .get(&index_key(k, id))
        .unwrap()
        .is_some());
    assert!(t.delete(&key).unwrap());
    d.close().unwrap();

    let (ok, v) = check_json(&db, tmp.path());
    assert!(!ok, "{v:#}");
    let p = problems(&v);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].starts_with("sbtest1:")
            && p[0].contains("sbtest1_k")
            && p[0].contains(&format!("(k {k}, id {id}): no row with id {id}")),
        "{p:?}"
    );
    // Trees themselves are fine and still listed.
    assert_eq!(table_rows(&v, "sbtest1.k"), table_rows(&v, "sbtest1") + 1);
    let r = keel_in(tmp.path(), &["check", db.to_str().unwrap()]);
    assert!(!r.ok(), "{r}");
    assert!(
        r.stdout.contains("check FAILED") && r.stdout.contains(&format!("id {id}")),
        "{}",
        r.stdout
    );
}

#[test]
fn flipped_byte_in_a_page_fails_naming_page_and_file() {
    let tmp = tempfile::tempdir().unwrap();
    let db = bench_db(tmp.path());
    for e in std::fs::read_dir(&db).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("dblwr-") && name.ends_with(".keel") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    // Page 3: file 0's data area starts one page in (after the header).
    let path = db.join("data-0.keel");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[4 * 4096 + 100] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();

    let (ok, v) = check_json(&db, tmp.path());
    assert!(!ok, "{v:#}");
    let p = problems(&v);
    assert!(
        p.iter()
            .any(|p| p.contains("page") && p.contains(":3") && p.contains("data-0.keel")),
        "{p:?}"
    );
    let r = keel_in(tmp.path(), &["check", db.to_str().unwrap()]);
    assert!(!r.ok() && r.stdout.contains("check FAILED"), "{r}");
    assert!(
        r.stdout.contains("checksum") && r.stdout.contains("data-0.keel"),
        "{}",
        r.stdout
    );
}

#[test]
fn crashed_directory_is_recovered_then_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let d = Db::open(&dir, small_options(&[])).unwrap();
    let t = d.create_table("sbtest1").unwrap();
    let ix = d.create_table("sbtest1_k").unwrap();
    let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(5);
    for id in 1..=300u64 {
        let row = Row::random((id * 7919 % 1000) as u32, &mut rng);
        let mut tx = d.begin();
        tx.put(&t, &id.to_be_bytes(), &row.encode()).unwrap();
        tx.put(&ix, &index_key(row.k, id), &[]).unwrap();
        tx.commit().unwrap();
    }
    d.simulate_crash();

    let r = keel_in(tmp.path(), &["check", dir.to_str().unwrap()]);
    assert!(r.ok(), "{r}");
    assert!(
        r.stdout.contains("recovered: ") && r.stdout.contains("redo group(s) applied"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("sbtest1.k") && r.stdout.contains("check passed"),
        "{}",
        r.stdout
    );
    // Recovered once; the second check finds a clean directory.
    let (ok, v) = check_json(&dir, tmp.path());
    assert!(ok, "{v:#}");
    assert_eq!(v["recovered"], false, "{v:#}");
    assert_eq!(table_rows(&v, "sbtest1"), 300);
    assert_eq!(table_rows(&v, "sbtest1.k"), 300);
}
