#![allow(clippy::unwrap_used)]
//! SIGUSR1 during `keel bench oltp` prints the engine status report between
//! the interval lines, as well as at the end of the run; on another engine
//! it says there is none, and the run goes on.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{keel_cmd, tiny_oltp_flags};
use keel_bench::oltp::Engine;

/// Run `keel` with `args`, send SIGUSR1 after the first interval line, and
/// return what it printed on stdout once it ended (successfully).
fn sigusr1_after_the_first_interval(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut child = keel_cmd()
        .args(args)
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut out = String::new();
    // Wait for the first interval line: the run (and its handler) is on.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut line = String::new();
        let n = stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "stdout ended before an interval line:\n{out}");
        out.push_str(&line);
        if line.contains("] thds: ") {
            break;
        }
        assert!(Instant::now() < deadline, "no interval line:\n{out}");
    }
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: sending a signal to our own child process.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::kill(pid, libc::SIGUSR1) };
    assert_eq!(rc, 0);
    stdout.read_to_string(&mut out).unwrap();
    let status = child.wait().unwrap();
    let err = err_thread.join().unwrap();
    assert!(status.success(), "{out}\n{err}");
    out
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
