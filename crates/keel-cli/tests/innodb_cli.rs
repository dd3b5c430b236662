#![allow(clippy::unwrap_used)]
//! `keel bench innodb` end to end: a private MariaDB server, sysbench for
//! five seconds, the JSON read back as `keel report` reads it. Skipped, and
//! said so, where MariaDB or sysbench is not installed (`.ci/run` installs
//! them).

mod common;

use common::keel_in;
use keel_bench::cgroup::{Throttle, WriteLimit};
use keel_bench::innodb::server::Tools;
use keel_bench::oltp;

/// One MariaDB server at a time: on a 2-core machine, servers
/// bootstrapping side by side were seen to fail `mariadb-install-db`
/// (once, not reproduced), and each test measures nothing but its own.
static ONE_SERVER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The server slot for `test`, or `None` (and a line saying it was
/// skipped) where MariaDB or sysbench is not installed.
fn server_or_skip(test: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    if let Err(e) = Tools::find() {
        eprintln!("SKIPPED: {test}: {e}");
        return None;
    }
    Some(ONE_SERVER.lock().unwrap_or_else(|p| p.into_inner()))
}

#[test]
fn a_short_innodb_run_writes_a_report_in_keels_format() {
    let Some(_one) = server_or_skip("the InnoDB smoke test") else {
        return;
    };
    let dir = tempfile::Builder::new()
        .prefix("keel-innodb-test-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let mut args = vec![
        "bench",
        "innodb",
        "--tables",
        "2",
        "--table-size",
        "2000",
        "--threads",
        "4",
        "--time",
        "5",
        "--set",
        "buffer_pool_size=64MiB",
        "--set",
        "log_file_size=16MiB",
        "--json",
        "innodb.json",
        "--report",
        "rep",
    ];
    // Under the write limit too where this machine can set one (root, a
    // cgroup I/O controller, a real disk under the target directory).
    let limit = WriteLimit {
        iops: Some(2000),
        bytes_per_s: None,
    };
    let throttled = Throttle::create(dir.path(), limit).is_ok();
    if throttled {
        args.extend(["--throttle-write-iops", "2000"]);
    } else {
        eprintln!("note: the InnoDB smoke test runs without --throttle-write-iops (no cgroup I/O controller or not root)");
    }
    let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
    assert!(ok, "{out}");
    assert!(out.contains("innodb: sysbench run"), "{out}");
    assert!(
        out.contains("] thds: 4 tps: ") && out.contains("ckpt age"),
        "{out}"
    );
    assert!(out.contains("INNODB MONITOR OUTPUT"), "{out}");
    if throttled {
        assert!(out.contains("limited to 2000 write IOPS"), "{out}");
    }
    let report = oltp::read_report(&dir.path().join("innodb.json")).unwrap();
    let run = &report.runs[0];
    assert_eq!(run.engine, "innodb");
    assert!(
        run.intervals.len() >= 4,
        "{} intervals",
        run.intervals.len()
    );
    assert!(run.summary.transactions > 0 && run.summary.tps_avg > 0.0);
    assert!(run.summary.latency_ms.p99 > 0.0);
    assert!(run.summary.log_bytes_per_txn > 0.0, "no redo counted");
    assert!(!run.summary.not_measured.is_empty());
    let iv = run.intervals.last().unwrap();
    // Two files of 16 MiB: one InnoDB log of 32 MiB; a 64 MiB pool holds
    // 4,096 pages of 16 KiB, of which InnoDB counts a little less.
    assert!(iv.log_capacity == 32 << 20, "{iv:?}");
    assert!((3800..=4096).contains(&iv.total_pages), "{iv:?}");
    assert!(iv.sync_mark > iv.async_mark && iv.async_mark > 0, "{iv:?}");
    assert_eq!(
        run.options
            .get("innodb_buffer_pool_size")
            .and_then(|v| v.as_str()),
        Some("67108864")
    );
    // Keel's default fill factor reached the server, which has the variable.
    assert_eq!(
        run.options
            .get("innodb_fill_factor")
            .and_then(|v| v.as_str()),
        Some("100")
    );
    // Keel's default isolation level and purge threads reached the server,
    // and its history list is read under InnoDB's name.
    assert_eq!(run.isolation, "REPEATABLE-READ");
    assert_eq!(
        run.options
            .get("innodb_purge_threads")
            .and_then(|v| v.as_str()),
        Some("4")
    );
    assert!(
        run.intervals.iter().any(|i| i.history_len > 0),
        "trx_rseg_history_len never above 0: {:?}",
        run.intervals
            .iter()
            .map(|i| i.history_len)
            .collect::<Vec<_>>()
    );
    assert!(dir.path().join("rep/index.html").exists());
    // The server's files are gone and no server is left running.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("keel-innodb-"))
        .collect();
    assert!(left.is_empty(), "the server's directory was left behind");
}

#[test]
fn innodb_refuses_options_it_has_no_equivalent_for_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let run = keel_in(
        dir.path(),
        &[
            "bench",
            "innodb",
            "--set",
            "flush_policy=steady",
            "--time",
            "1",
        ],
    );
    assert!(!run.ok());
    assert!(
        run.stderr.contains("flush_policy") && run.stderr.contains("no InnoDB equivalent"),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "work started"
    );
}

/// The processes whose command line mentions `dir`.
fn processes_under(dir: &std::path::Path) -> Vec<String> {
    let needle = dir.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&needle))
        .collect()
}

/// Start `keel bench innodb`, send SIGINT to `keel` alone (not its process
/// group: the server and sysbench must be stopped by `keel` itself) once a
/// line containing `at` is printed, and check that it ends with 130 and
/// leaves no process and no file behind.
fn sigint_at(at: &str, table_size: &str) {
    use std::time::{Duration, Instant};

    let dir = tempfile::Builder::new()
        .prefix("keel-innodb-int-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let mut t0 = Instant::now();
    let run = common::signal_after(
        common::keel_cmd()
            .args([
                "bench",
                "innodb",
                "--tables",
                "1",
                "--table-size",
                table_size,
                "--threads",
                "2",
                "--time",
                "120",
                "--set",
                "buffer_pool_size=64MiB",
            ])
            .current_dir(dir.path()),
        at,
        Some(libc::SIGINT),
        |_| {
            assert!(
                processes_under(dir.path())
                    .iter()
                    .any(|c| c.contains("mariadbd")),
                "no server is running under the test's directory"
            );
            t0 = Instant::now();
        },
    );
    let (out, err) = (&run.stdout, &run.stderr);
    assert_eq!(run.status.code(), Some(130), "{out}\n{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(120),
        "took {:?} to stop",
        t0.elapsed()
    );
    assert!(
        processes_under(dir.path()).is_empty(),
        "left running: {:?}",
        processes_under(dir.path())
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn ctrl_c_during_the_run_stops_the_server_and_removes_its_files() {
    let Some(_one) = server_or_skip("the InnoDB interruption test") else {
        return;
    };
    sigint_at("] thds: 2 tps: ", "2000");
}

#[test]
fn ctrl_c_during_prepare_stops_the_server_and_removes_its_files() {
    let Some(_one) = server_or_skip("the InnoDB interruption test") else {
        return;
    };
    // Enough rows that prepare is still loading when the signal comes.
    sigint_at("innodb: sysbench prepare", "2000000");
}
