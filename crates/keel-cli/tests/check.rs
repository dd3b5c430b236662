#![allow(clippy::unwrap_used)]
//! `keel check` end to end: a clean bench database passes (page size read
//! from the file header), a row missing from under its index entry, a
//! flipped byte in a page, and a crashed directory (recovered, then clean).
//! With two processes: a database another process has open is refused
//! (recovery would write to it) and checked `--read-only` as it stands,
//! writing nothing; a process killed with SIGKILL leaves a lock file that
//! does not block the next open.

mod common;

use std::path::Path;

use common::{
    keel_cmd, keel_in, set_flags, signal_after, small_options, tiny_oltp_flags, SMALL_SETS,
};
use keel::{Db, Error};
use keel_bench::oltp::{index_key, index_name, table_name, Row};

/// `keel check DIR --json`, parsed; no engine option is given, so the page
/// size (4096, not the default) must come from the data file's header.
fn check_json(db: &Path, cwd: &Path) -> (bool, serde_json::Value) {
    check_json_with(db, cwd, &[])
}

/// [`check_json`] with more flags.
fn check_json_with(db: &Path, cwd: &Path, flags: &[&str]) -> (bool, serde_json::Value) {
    let mut args = vec!["check", db.to_str().unwrap(), "--json"];
    args.extend(flags);
    let r = keel_in(cwd, &args);
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
        // Rows, not records: an index entry deleted when its row moved to
        // another `k` stays delete-marked until purge removes it, and is
        // counted apart.
        assert_eq!(table_rows(&v, &format!("{n}.k")), rows, "{v:#}");
        for t in v["tables"].as_array().unwrap() {
            assert!(t["delete_marked"].is_u64(), "{v:#}");
        }
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

/// Remove the doublewrite files of `dir`: with them, a damaged page that
/// has a copy there is repaired at open, and the check must see the damage.
fn remove_doublewrite_files(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("dblwr-") && name.ends_with(".keel") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
}

#[test]
fn flipped_byte_in_a_page_fails_naming_page_and_file() {
    let tmp = tempfile::tempdir().unwrap();
    let db = bench_db(tmp.path());
    remove_doublewrite_files(&db);
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

/// A bench table `sbtest1` of 300 rows and its index, in a database left
/// open in this process.
fn open_with_rows(dir: &Path) -> Db {
    let d = Db::open(dir, small_options(&[])).unwrap();
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
    d
}

#[test]
fn crashed_directory_is_recovered_then_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    open_with_rows(&dir).simulate_crash();

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

/// Every file of `dir` and its bytes.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn a_database_open_in_another_process_is_refused_and_checked_read_only_as_it_stands() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let d = open_with_rows(&dir);
    d.flush().unwrap();
    let d_str = dir.to_str().unwrap();

    // This (test) process holds the database: recovery must not run.
    for json in [false, true] {
        let mut args = vec!["check", d_str];
        if json {
            args.push("--json");
        }
        let r = keel_in(tmp.path(), &args);
        // 2, not 1: nothing was checked, no problem was found.
        assert_eq!(r.code, Some(2), "{r}");
        assert!(r.stdout.is_empty(), "{r}");
        assert!(
            r.stderr.contains(&format!(
                "{d_str} is open in process {}",
                std::process::id()
            )) && r
                .stderr
                .contains(&format!("keel check --read-only {d_str}")),
            "{}",
            r.stderr
        );
    }

    let (ok, v) = check_json_with(&dir, tmp.path(), &["--read-only"]);
    assert!(ok, "{v:#}");
    assert_eq!(v["replayed_log"], false, "{v:#}");
    assert_eq!(v["recovered"], false, "{v:#}");
    assert!(v["redo_beyond_checkpoint"].is_u64(), "{v:#}");
    assert_eq!(table_rows(&v, "sbtest1"), 300);
    assert_eq!(table_rows(&v, "sbtest1.k"), 300);
    let r = keel_in(tmp.path(), &["check", "--read-only", d_str]);
    assert!(r.ok(), "{r}");
    assert!(
        r.stdout
            .starts_with("read-only: the redo log was not replayed")
            && r.stdout.contains("no proof of corruption")
            && r.stdout.contains("sbtest1.k")
            && r.stdout
                .contains("check passed (read-only, redo log not replayed)"),
        "{}",
        r.stdout
    );
    // Engine options make no sense without an engine.
    let r = keel_in(
        tmp.path(),
        &["check", "--read-only", d_str, "--set", "page_size=4096"],
    );
    assert!(
        !r.ok() && r.stderr.contains("--read-only opens no engine"),
        "{r}"
    );

    // The holder never noticed, and still writes.
    d.create_table("other")
        .unwrap()
        .put(b"after", b"x")
        .unwrap();
    d.close().unwrap();

    // A read-only check writes nothing, not even the lock file.
    let before = snapshot(&dir);
    let (ok, v) = check_json_with(&dir, tmp.path(), &["--read-only"]);
    assert!(ok, "{v:#}");
    assert_eq!(v["redo_beyond_checkpoint"], 0, "{v:#}");
    assert!(
        snapshot(&dir) == before,
        "keel check --read-only changed a file"
    );

    assert_eq!(table_rows(&v, "other"), 1);

    // Closed, the database is the plain check's again.
    let (ok, v) = check_json(&dir, tmp.path());
    assert!(ok, "{v:#}");
    assert_eq!(v["replayed_log"], true, "{v:#}");
}

#[test]
fn a_process_killed_with_sigkill_leaves_a_lock_file_that_does_not_block_the_next_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut args = vec!["bench", "oltp", "--datadir", "db", "--report", "rep"];
    args.extend(tiny_oltp_flags("2", "20"));
    let run = signal_after(
        keel_cmd().args(&args).current_dir(tmp.path()),
        "] thds: ",
        Some(libc::SIGKILL),
        |_| {
            // The bench holds the database; the lock file names it.
            let lock = std::fs::read_to_string(dir.join("keel.lock")).unwrap();
            let holder: u32 = lock.trim().parse().unwrap();
            assert_ne!(holder, std::process::id());
            let r = keel_in(tmp.path(), &["check", "db"]);
            assert!(
                r.code == Some(2)
                    && r.stderr
                        .contains(&format!("db is open in process {holder}")),
                "{r}"
            );
            // Beside it, the read-only check runs and says what it could
            // not see (its verdict on pages being written is not asserted).
            let r = keel_in(tmp.path(), &["check", "--read-only", "db"]);
            assert!(
                r.stdout
                    .starts_with("read-only: the redo log was not replayed"),
                "{r}"
            );
            match Db::open(&dir, small_options(&[])) {
                Err(Error::Locked { pid, .. }) => assert_eq!(pid, Some(holder)),
                Err(e) => panic!("expected Error::Locked, got {e}"),
                Ok(_) => panic!("opened a database another process holds"),
            }
        },
    );
    assert!(!run.status.success(), "{}\n{}", run.stdout, run.stderr);
    // The dead process's lock file is still there; it blocks nothing.
    assert!(dir.join("keel.lock").exists());
    let (ok, v) = check_json(&dir, tmp.path());
    assert!(ok, "{v:#}");
    assert_eq!(v["replayed_log"], true, "{v:#}");
    Db::open(&dir, small_options(&[])).unwrap().close().unwrap();
}

/// A table with a 1 MiB value: `keel check` walks its overflow chain
/// (counted in the table's pages), through the engine and `--read-only`;
/// a flipped byte in the middle of the chain fails the check, naming the
/// page.
#[test]
fn a_large_value_is_checked_through_its_overflow_chain() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let d = Db::open(&dir, small_options(&[])).unwrap();
    let t = d.create_table("docs").unwrap();
    let big: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    t.put(b"big", &big).unwrap();
    t.put(b"small", b"x").unwrap();
    drop(t);
    d.close().unwrap();

    for flags in [&[][..], &["--read-only"][..]] {
        let (ok, v) = check_json_with(&dir, tmp.path(), flags);
        assert!(ok, "{flags:?}: {v:#}");
        assert_eq!(table_rows(&v, "docs"), 2);
        let docs = v["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "docs")
            .unwrap();
        assert!(docs["pages"].as_u64().unwrap() >= 256, "{docs:#}");
    }

    // The overflow pages of data-0.keel (type 7 at offset 20): flip a byte
    // of the value in one of them.
    remove_doublewrite_files(&dir);
    let path = dir.join("data-0.keel");
    let mut bytes = std::fs::read(&path).unwrap();
    let overflow: Vec<usize> = (1..bytes.len() / 4096)
        .filter(|&i| bytes[i * 4096 + 20] == 7 && bytes[i * 4096 + 21] == 0)
        .collect();
    assert!(overflow.len() > 50, "{} overflow pages", overflow.len());
    let at = overflow[overflow.len() / 2] * 4096;
    bytes[at + 1000] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let (ok, v) = check_json(&dir, tmp.path());
    assert!(!ok, "{v:#}");
    assert!(
        problems(&v)
            .iter()
            .any(|p| p.contains("checksum") && p.contains("data-0.keel")),
        "{v:#}"
    );
}
