#![allow(clippy::unwrap_used)]
//! The `keel` commands run end to end with tiny parameters, so they never rot.

mod common;

use common::keel;

#[test]
fn bench_basic_then_check_then_check_finds_a_corrupted_page() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_s = db.to_str().unwrap();
    let small = [
        "--set",
        "page_size=4096",
        "--set",
        "flush_method=nosync",
        "--set",
        "doublewrite=false",
    ];
    let mut args = vec![
        "bench",
        "basic",
        "--rows",
        "3000",
        "--gets",
        "3000",
        "--scans",
        "100",
        "--buffer-pool-size",
        "1MiB",
        "--datadir",
        db_s,
    ];
    args.extend(small);
    let (ok, out) = keel(&args).ok_and_text();
    assert!(ok, "{out}");
    assert!(
        out.contains("point_get") && out.contains("invariants hold"),
        "{out}"
    );
    let mut args = vec!["check", db_s];
    args.extend(small);
    let (ok, out) = keel(&args).ok_and_text();
    assert!(ok && out.contains("check passed"), "{out}");
    // Flip a byte in page 3 (file 0, offset 4 × 4096).
    let path = db.join("data-0.keel");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[4 * 4096 + 100] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let (ok, out) = keel(&args).ok_and_text();
    assert!(!ok, "{out}");
    assert!(
        out.contains("checksum") && out.contains("data-0.keel"),
        "{out}"
    );
}

#[test]
fn bench_commit_and_recovery_run() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (ok, out) = keel(&[
        "bench",
        "commit",
        "--time",
        "0.2",
        "--threads",
        "1,2",
        "--trx-commit",
        "1,0",
        "--dir",
        d,
        "--set",
        "page_size=4096",
        "--set",
        "log_file_size=1MiB",
    ])
    .ok_and_text();
    assert!(ok, "{out}");
    assert_eq!(
        out.lines()
            .filter(|l| l.trim_start().starts_with(['0', '1']))
            .count(),
        4,
        "{out}"
    );
    let (ok, out) = keel(&[
        "bench",
        "recovery",
        "--redo",
        "2MiB",
        "--dir",
        d,
        "--set",
        "buffer_pool_size=32MiB",
    ])
    .ok_and_text();
    assert!(ok, "{out}");
    assert!(
        out.contains("recovery") && out.contains("page records applied"),
        "{out}"
    );
}

#[test]
fn bad_options_are_rejected_by_name() {
    for (flags, needle) in [
        (["--set", "no_such_option=1"], "no_such_option"),
        (["--set", "page_cleaners=lots"], "page_cleaners"),
        (["--device", "iops=fast"], "device"),
    ] {
        let mut args = vec!["bench", "basic", "--rows", "10"];
        args.extend(flags);
        let (ok, out) = keel(&args).ok_and_text();
        assert!(!ok && out.contains(needle), "{flags:?}: {out}");
    }
}
