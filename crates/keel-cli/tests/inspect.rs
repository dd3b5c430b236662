#![allow(clippy::unwrap_used)]
//! `keel inspect`: reads a closed or crashed database directory without
//! opening the engine, and one another process has open (and is writing
//! to) without disturbing it.

mod common;

use std::path::Path;

use common::{keel, small_options};
use keel::{Db, Options};

fn options() -> Options {
    small_options(&["data_files=2"])
}

/// A database with a table of `rows` rows, left open.
fn populate(dir: &Path, rows: u32) -> Db {
    let db = Db::open(dir, options()).unwrap();
    let t = db.table_or_create("t").unwrap();
    for i in 0..rows {
        t.put(format!("key{i:06}").as_bytes(), &[7u8; 100]).unwrap();
    }
    db
}

/// `keel inspect DIR`'s report; it must succeed.
fn inspect_text(dir: &Path) -> String {
    let r = keel(&["inspect", dir.to_str().unwrap()]);
    assert_eq!(r.code, Some(0), "{r}");
    r.stdout
}

fn inspect_json(dir: &Path) -> serde_json::Value {
    let r = keel(&["inspect", "--json", dir.to_str().unwrap()]);
    assert_eq!(r.code, Some(0), "{r}");
    serde_json::from_str(&r.stdout).unwrap()
}

#[test]
fn after_close_nothing_lies_beyond_the_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    populate(&dir, 2000).close().unwrap();
    let out = inspect_text(&dir);
    for s in [
        "data-0.keel: version 3, page size 4096",
        "data-1.keel",
        "redo-0.keel: version 2",
        "checkpoint slot 0 (byte 4096)",
        "checkpoint slot 1 (byte 8192)",
        "<- wins",
        "recovery would replay 0 bytes / 0 groups",
        "high-water mark",
    ] {
        assert!(out.contains(s), "missing {s:?} in:\n{out}");
    }
    let j = inspect_json(&dir);
    let scan = &j["redo"]["scan"];
    assert_eq!(scan["bytes_beyond_checkpoint"], 0, "{j:#}");
    assert_eq!(scan["end_lsn"], scan["checkpoint_lsn"], "{j:#}");
}

#[test]
fn a_log_of_format_version_1_is_named_with_what_the_engine_does_with_it() {
    use keel::format::redo::{LogFileHeader, LOG_VERSION_V1};
    use std::os::unix::fs::FileExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    populate(&dir, 100).close().unwrap();
    for i in 0..2 {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(dir.join(format!("redo-{i}.keel")))
            .unwrap();
        let mut b = vec![0u8; 4096];
        f.read_exact_at(&mut b, 0).unwrap();
        let mut h = LogFileHeader::decode(&b).unwrap();
        h.version = LOG_VERSION_V1;
        h.encode(&mut b);
        f.write_all_at(&b, 0).unwrap();
    }
    let out = inspect_text(&dir);
    for s in [
        "redo-0.keel: version 1",
        "of format version 1 (an earlier Keel)",
        "recovery would replay 0 bytes / 0 groups",
    ] {
        assert!(out.contains(s), "missing {s:?} in:\n{out}");
    }
}

#[test]
fn after_a_crash_recovery_has_redo_to_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    populate(&dir, 2000).simulate_crash();
    let out = inspect_text(&dir);
    assert!(out.contains("recovery would replay "), "{out}");
    assert!(!out.contains("recovery would replay 0 bytes"), "{out}");
    let j = inspect_json(&dir);
    let scan = &j["redo"]["scan"];
    let bytes = scan["bytes_beyond_checkpoint"].as_u64().unwrap();
    let groups = scan["groups"].as_u64().unwrap();
    assert!(bytes > 0 && groups > 0, "{j:#}");
    assert_eq!(
        scan["end_lsn"].as_u64().unwrap() - scan["checkpoint_lsn"].as_u64().unwrap(),
        bytes
    );
    assert_eq!(
        groups,
        scan["mtr_groups"].as_u64().unwrap()
            + scan["commit_groups"].as_u64().unwrap()
            + scan["applied_groups"].as_u64().unwrap()
    );
    // What inspect saw is what recovery replays: open, and inspect again.
    let db = Db::open(&dir, options()).unwrap();
    assert_eq!(db.metrics().get("recovery_groups_applied"), Some(groups));
    assert_eq!(
        db.metrics().get("recovery_txns_reapplied"),
        scan["commits_to_reapply"].as_u64()
    );
    db.close().unwrap();
    let j = inspect_json(&dir);
    assert_eq!(j["redo"]["scan"]["bytes_beyond_checkpoint"], 0, "{j:#}");
}

#[test]
fn json_has_the_data_files_checkpoints_and_doublewrite() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    populate(&dir, 500).close().unwrap();
    let j = inspect_json(&dir);
    let files = j["data_files"].as_array().unwrap();
    assert_eq!(files.len(), 2, "{j:#}");
    let creation = files[0]["creation_id"].as_u64().unwrap();
    for (i, f) in files.iter().enumerate() {
        assert_eq!(f["name"], format!("data-{i}.keel"));
        assert_eq!(f["file_index"], i);
        assert_eq!(f["n_files"], 2);
        assert_eq!(f["page_size"], 4096);
        assert_eq!(f["extent_pages"], 64);
        assert_eq!(f["version"], 3);
        assert_eq!(f["creation_id"].as_u64().unwrap(), creation);
        assert_eq!(
            f["bytes"].as_u64().unwrap(),
            4096 * (f["pages"].as_u64().unwrap() + 1)
        );
    }
    let cps = j["redo"]["checkpoints"].as_array().unwrap();
    assert_eq!(cps.len(), 2, "{j:#}");
    assert_eq!(cps[0]["offset"], 4096);
    assert_eq!(cps[1]["offset"], 8192);
    let w = j["redo"]["winner"].as_u64().unwrap() as usize;
    assert_eq!(cps[w]["valid"], true);
    let other = &cps[1 - w];
    assert!(
        other["valid"] == false || other["no"].as_u64() < cps[w]["no"].as_u64(),
        "{j:#}"
    );
    assert_eq!(j["redo"]["scan"]["checkpoint_lsn"], cps[w]["lsn"], "{j:#}");
    assert!(!j["redo"]["files"].as_array().unwrap().is_empty());
    assert_eq!(
        j["redo"]["files"][0]["creation_id"].as_u64().unwrap(),
        creation
    );
    let space = &j["space"];
    let hwm = space["hwm"].as_u64().unwrap();
    assert!(hwm > 2, "{j:#}");
    assert_eq!(
        space["allocated_pages"].as_u64().unwrap() + space["free_pages"].as_u64().unwrap(),
        hwm
    );
    assert_eq!(space["catalog_root"], 1);
    let dblwr = j["doublewrite"].as_array().unwrap();
    assert!(!dblwr.is_empty(), "{j:#}");
    assert_eq!(
        dblwr[0]["header"]["creation_id"].as_u64().unwrap(),
        creation
    );
    assert!(j["warnings"].as_array().unwrap().is_empty(), "{j:#}");
}

#[test]
fn missing_directory_and_foreign_files_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope");
    let r = keel(&["inspect", missing.to_str().unwrap()]);
    assert_eq!(r.code, Some(1), "{r}");
    assert!(
        r.stderr.contains("cannot inspect") && r.stderr.contains("nope"),
        "{}",
        r.stderr
    );

    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let r = keel(&["inspect", empty.to_str().unwrap()]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("holds no Keel database"), "{}", r.stderr);

    let foreign = tmp.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("data-0.keel"), vec![b'x'; 8192]).unwrap();
    let r = keel(&["inspect", "--json", foreign.to_str().unwrap()]);
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr.contains("data-0.keel") && r.stderr.contains("not a Keel data file"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_database_another_process_has_open_and_writes_is_inspected_beside_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = populate(&dir, 2000);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let t = db.table("t").unwrap();
            let mut i = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                t.put(format!("live{i:06}").as_bytes(), &[9u8; 100])
                    .unwrap();
                i += 1;
            }
            i
        })
    };
    // This process holds the lock and writes; inspect takes neither.
    for _ in 0..3 {
        let j = inspect_json(&dir);
        assert_eq!(j["data_files"].as_array().unwrap().len(), 2, "{j:#}");
        assert!(j["redo"]["scan"]["end_lsn"].is_u64(), "{j:#}");
    }
    assert!(inspect_text(&dir).contains("data-0.keel: version 3"));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert!(written > 0);
    db.close().unwrap();
}
