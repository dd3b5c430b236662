#![allow(clippy::unwrap_used)]
//! `keel bench oltp` end to end with tiny tables and a second of running.

use std::process::Command;

fn keel(args: &[&str], cwd: &std::path::Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

const SMALL: &[&str] = &[
    "--tables",
    "2",
    "--table-size",
    "500",
    "--threads",
    "4",
    "--time",
    "1",
    "--report-interval",
    "0.5",
    "--range-size",
    "20",
    "--set",
    "page_size=4096",
    "--set",
    "buffer_pool_size=1MiB",
    "--set",
    "flush_method=nosync",
    "--set",
    "doublewrite=false",
    "--set",
    "log_file_size=1MiB",
];

#[test]
fn bench_oltp_prints_interval_lines_status_and_writes_json_csv_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "bench", "oltp", "--json", "out.json", "--csv", "out.csv", "--report", "rep",
    ];
    args.extend(SMALL);
    let (ok, out) = keel(&args, dir.path());
    assert!(ok, "{out}");
    assert!(
        out.contains("] thds: 4 tps: ") && out.contains("ckpt age"),
        "{out}"
    );
    assert!(
        out.contains("KEEL ENGINE STATUS") && out.contains("Last checkpoint at"),
        "{out}"
    );
    assert!(out.contains("latency (ms): avg"), "{out}");
    let json = std::fs::read_to_string(dir.path().join("out.json")).unwrap();
    assert!(json.contains("\"version\": 1"), "{json}");
    assert!(json.contains("\"buffer_pool_size\": 1048576"), "{json}");
    assert!(json.contains("\"flush_policy\": \"interim\""), "{json}");
    assert!(
        json.contains("\"intervals\": [") && json.contains("\"tps_p01\""),
        "{json}"
    );
    let csv = std::fs::read_to_string(dir.path().join("out.csv")).unwrap();
    assert!(csv.lines().count() >= 3, "{csv}");
    assert!(dir.path().join("rep/index.html").exists());
    // The temporary data directory is gone.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("keel-oltp-"))
        .collect();
    assert!(left.is_empty(), "temporary data directory left behind");
}

#[test]
fn bench_oltp_rejects_bad_options_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, needle) in [
        (vec!["--set", "no_such_knob=1"], "no_such_knob"),
        (vec!["--set", "buffer_pool_size=lots"], "buffer_pool_size"),
        (vec!["--vary", "page_cleaners=1,many"], "page_cleaners"),
        (vec!["--vary", "threads"], "threads"),
        (vec!["--device", "iops=fast"], "device"),
        (vec!["--workload", "oltp_bogus"], "bogus"),
        (vec!["--threads", "0"], "threads"),
    ] {
        let mut args = vec!["bench", "oltp", "--report", "rep"];
        args.extend(SMALL);
        args.extend(extra.iter());
        let (ok, out) = keel(&args, dir.path());
        assert!(!ok, "{extra:?} accepted: {out}");
        assert!(out.contains(needle), "{extra:?}: {out}");
        assert!(!out.contains("prepare"), "{extra:?}: work started: {out}");
    }
}
