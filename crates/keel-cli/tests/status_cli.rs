#![allow(clippy::unwrap_used)]
//! `keel status ADDR` prints the status report of a running `keel bench
//! oltp --metrics-listen` from its `/status`, transactions under way
//! included; an address where nothing listens is a clear error.

mod common;

use common::{keel_cmd, keel_in, signal_after, tiny_oltp_flags};

#[test]
fn keel_status_prints_the_report_of_a_running_bench() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["bench", "oltp", "--metrics-listen", "127.0.0.1:0"];
    args.extend(tiny_oltp_flags("2", "3"));
    let mut printed = None;
    let run = signal_after(
        keel_cmd().args(&args).current_dir(dir.path()),
        "] thds: ",
        None,
        |out| {
            let addr = out
                .lines()
                .find_map(|l| l.strip_prefix("metrics: http://"))
                .and_then(|l| l.strip_suffix("/metrics"))
                .unwrap_or_else(|| panic!("no metrics line before the run:\n{out}"));
            assert!(
                out.contains(&format!(
                    "status report: http://{addr}/status (keel status {addr})"
                )),
                "{out}"
            );
            printed = Some(keel_in(dir.path(), &["status", addr]));
        },
    );
    assert!(run.status.success(), "{}\n{}", run.stdout, run.stderr);
    let st = printed.unwrap();
    assert!(st.code == Some(0), "{}\n{}", st.stdout, st.stderr);
    let out = &st.stdout;
    for section in [
        "KEEL ENGINE STATUS (",
        "\nSEMAPHORES\n",
        "\nLOG\n",
        "\nBUFFER POOL AND MEMORY\n",
        "\nFLUSHING\n",
        "\nTRANSACTIONS\n",
        "\nTransactions under way: ",
        "END OF KEEL ENGINE STATUS\n",
    ] {
        assert!(out.contains(section), "no `{section}` in:\n{out}");
    }
    // Rates since the endpoint started (the report's previous request).
    assert!(out.contains("reads/s"), "{out}");
}

#[test]
fn keel_status_says_clearly_when_nothing_answers() {
    let dir = tempfile::tempdir().unwrap();
    // A port that was free a moment ago, and is closed now.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let run = keel_in(dir.path(), &["status", &addr, "--timeout", "5"]);
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr
            .starts_with(&format!("keel: error: nothing answers at {addr} (")),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--metrics-listen"), "{}", run.stderr);
    let run = keel_in(dir.path(), &["status", "not an address"]);
    assert_eq!(run.code, Some(1));
    assert!(
        run.stderr.contains("`not an address` is not an address"),
        "{}",
        run.stderr
    );
}
