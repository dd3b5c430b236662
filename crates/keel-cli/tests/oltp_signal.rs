#![allow(clippy::unwrap_used)]
//! SIGUSR1 during `keel bench oltp` prints the engine status report between
//! the interval lines, as well as at the end of the run; on another engine
//! it says there is none, and the run goes on.

mod common;

use common::{keel_cmd, signal_after, tiny_oltp_flags};
use keel_bench::oltp::Engine;

/// Run `keel` with `args`, send SIGUSR1 after the first interval line, and
/// return what it printed on stdout once it ended (successfully).
fn sigusr1_after_the_first_interval(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    // The first interval line: the run (and its handler) is on.
    let run = signal_after(
        keel_cmd().args(args).current_dir(dir.path()),
        "] thds: ",
        Some(libc::SIGUSR1),
        |_| {},
    );
    assert!(run.status.success(), "{}\n{}", run.stdout, run.stderr);
    run.stdout
}

#[test]
fn sigusr1_prints_the_status_report_during_the_run() {
    let mut args = vec!["bench", "oltp", "--report", "rep"];
    args.extend(tiny_oltp_flags("2", "4"));
    let out = sigusr1_after_the_first_interval(&args);
    let header = "KEEL ENGINE STATUS";
    assert!(out.matches(header).count() >= 2, "{out}");
    // The report on request comes before the end-of-run summary, and
    // between interval lines.
    let first = out.find(header).unwrap();
    let summary = out.find("latency (ms): avg").unwrap();
    assert!(first < summary, "{out}");
    let after = &out[first..];
    assert!(
        after.contains("] thds: ") && after.find("] thds: ") < after.find("latency (ms): avg"),
        "an interval line should follow the requested report:\n{out}"
    );
}

#[test]
fn sigusr1_on_another_engine_says_it_has_no_status_report() {
    let Some(e) = Engine::ALL
        .into_iter()
        .find(|e| *e != Engine::Keel && e.built())
    else {
        eprintln!("SKIPPED: no engine but Keel in this build");
        return;
    };
    let args = [
        "bench",
        "oltp",
        "--engine",
        e.name(),
        "--report",
        "rep",
        "--tables",
        "1",
        "--table-size",
        "500",
        "--threads",
        "2",
        "--time",
        "2",
        "--report-interval",
        "0.5",
    ];
    let out = sigusr1_after_the_first_interval(&args);
    assert!(
        out.contains(&format!("engine {e} has no status report")),
        "{out}"
    );
    assert!(out.contains("latency (ms): avg"), "{out}");
}
