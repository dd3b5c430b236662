#![allow(clippy::unwrap_used)]
//! The `keel` commands run end to end with tiny parameters, so they never rot.

use std::process::Command;

fn keel(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

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
    let (ok, out) = keel(&args);
    assert!(ok, "{out}");
    assert!(
        out.contains("point_get") && out.contains("invariants hold"),
        "{out}"
    );
    let mut args = vec!["check", db_s];
    args.extend(small);
    let (ok, out) = keel(&args);
    assert!(ok && out.contains("check passed"), "{out}");
    // Flip a byte in page 3 (file 0, offset 4 × 4096).
    let path = db.join("data-0.keel");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[4 * 4096 + 100] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let (ok, out) = keel(&args);
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
    ]);
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
    ]);
    assert!(ok, "{out}");
    assert!(
        out.contains("recovery") && out.contains("page records applied"),
        "{out}"
    );
}

#[test]
fn bad_options_are_rejected_by_name() {
    let (ok, out) = keel(&[
        "bench",
        "basic",
        "--rows",
        "10",
        "--set",
        "no_such_option=1",
    ]);
    assert!(!ok && out.contains("no_such_option"), "{out}");
    let (ok, out) = keel(&[
        "bench",
        "basic",
        "--rows",
        "10",
        "--set",
        "page_cleaners=lots",
    ]);
    assert!(!ok && out.contains("page_cleaners"), "{out}");
    let (ok, out) = keel(&["bench", "basic", "--rows", "10", "--device", "iops=fast"]);
    assert!(!ok && out.contains("device"), "{out}");
}
