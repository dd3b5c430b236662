#![allow(clippy::unwrap_used)]
//! `keel bench oltp --metrics-listen`: a scrape of `/metrics` during a run
//! is Prometheus's text format with Keel's counters moving, and Debian's
//! `promtool check metrics` accepts it (skipped, and said so, where
//! promtool is not installed: `apt-get install prometheus`).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use common::{keel_cmd, metric_names, promtool, signal_after, tiny_oltp_flags};

/// `GET /metrics` from `url` (`http://HOST:PORT/metrics`): the body.
fn scrape(url: &str) -> String {
    let hostport = url
        .strip_prefix("http://")
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap();
    let mut s = TcpStream::connect(hostport).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {hostport}\r\n\r\n").unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap();
    assert!(head.contains(" 200 "), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    body.to_string()
}

/// The value of the sample line `name value`.
fn value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// What `promtool check metrics` says of `text`: `None` if it is not
/// installed.
pub fn promtool_check(text: &str) -> Option<(bool, String)> {
    let tool = promtool()?;
    let mut child = Command::new(tool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    Some((
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    ))
}

/// A scrape taken after `keel bench oltp` printed its second interval
/// line, and the whole run's stdout.
pub fn scrape_during_a_run() -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["bench", "oltp", "--metrics-listen", "127.0.0.1:0"];
    args.extend(tiny_oltp_flags("2", "3"));
    let mut scraped = String::new();
    let mut intervals = 0;
    let run = signal_after(
        keel_cmd().args(&args).current_dir(dir.path()),
        "] thds: ",
        None,
        |out| {
            intervals = out.matches("] thds: ").count();
            let url = out
                .lines()
                .find_map(|l| l.strip_prefix("metrics: "))
                .unwrap_or_else(|| panic!("no metrics line before the run:\n{out}"));
            scraped = scrape(url.trim());
        },
    );
    assert!(run.status.success(), "{}\n{}", run.stdout, run.stderr);
    assert!(intervals >= 1);
    (scraped, run.stdout)
}

#[test]
fn a_scrape_during_a_run_is_prometheus_text_that_promtool_accepts() {
    let (text, _) = scrape_during_a_run();
    assert!(
        text.contains("# TYPE keel_trx_commits_total counter"),
        "{text}"
    );
    assert!(
        value(&text, "keel_trx_commits_total").unwrap() > 0.0,
        "{text}"
    );
    assert!(value(&text, "keel_buffer_pool_pages").unwrap() > 0.0);
    assert!(text.contains("# TYPE keel_log_lsn_checkpoint_age gauge"));
    assert!(text.contains("# TYPE keel_writer_pause_seconds histogram"));
    assert!(text.contains("# TYPE keel_trx_commit_latency_seconds histogram"));
    assert!(value(&text, "keel_trx_commit_latency_seconds_count").unwrap() > 0.0);
    match promtool_check(&text) {
        Some((ok, said)) => assert!(ok, "promtool check metrics:\n{said}"),
        None => eprintln!(
            "SKIPPED: promtool check metrics (promtool is not installed; apt-get install prometheus)"
        ),
    }
}

#[test]
fn metrics_listen_refuses_a_bad_address_and_another_engine_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec!["bench", "oltp", "--metrics-listen", "nowhere:port"];
    args.extend(tiny_oltp_flags("1", "1"));
    let run = common::keel_in(dir.path(), &args);
    assert!(!run.ok());
    assert!(
        run.stderr.contains("--metrics-listen") && run.stderr.contains("nowhere:port"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let run = common::keel_in(
        dir.path(),
        &[
            "bench",
            "oltp",
            "--engine",
            "sqlite",
            "--metrics-listen",
            "9999",
        ],
    );
    if !run.stderr.contains("not built") {
        assert!(
            run.stderr.contains("--metrics-listen") && run.stderr.contains("Keel only"),
            "{}",
            run.stderr
        );
    }
}

#[test]
fn every_metric_the_grafana_dashboard_queries_is_in_a_scrape() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../contrib/grafana/keel.json"
    );
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let panels = dash["panels"].as_array().unwrap();
    assert!(panels.len() >= 8, "{} panels", panels.len());
    let mut queried = Vec::new();
    for p in panels {
        let title = p["title"].as_str().unwrap();
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "panel `{title}` has no query");
        for t in targets {
            let expr = t["expr"].as_str().unwrap();
            let names = metric_names(expr);
            assert!(
                !names.is_empty(),
                "`{title}`: `{expr}` queries no keel_ metric"
            );
            queried.extend(names.into_iter().map(|n| (title.to_string(), n)));
        }
    }
    let (text, _) = scrape_during_a_run();
    let series: std::collections::HashSet<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split([' ', '{']).next())
        .collect();
    let missing: Vec<String> = queried
        .iter()
        .filter(|(_, n)| !series.contains(n.as_str()))
        .map(|(t, n)| format!("{n} (panel `{t}`)"))
        .collect();
    assert!(missing.is_empty(), "not in a scrape: {missing:#?}");
    // The PMM panels the issue names are there.
    for want in [
        "keel_log_lsn_checkpoint_age",
        "keel_log_max_modified_age_sync",
        "keel_steady_setpoint",
        "keel_log_capacity",
        "keel_buffer_flush_sync_pages_total",
        "keel_buffer_pool_pages_dirty",
        "keel_log_bytes_written_total",
        "keel_buffer_flush_sync_waits_total",
        "keel_writer_pause_seconds_bucket",
        "keel_device_write_bw_estimate",
        "keel_trx_rseg_history_len",
        "keel_purge_undo_records_total",
        "keel_purge_undo_log_pages_total",
        "keel_trx_oldest_view_age_seconds",
        "keel_buffer_flush_undo_pages_written_total",
    ] {
        assert!(
            queried.iter().any(|(_, n)| n == want),
            "no panel queries {want}"
        );
    }
}
