//! Metrics export: serve a database's metrics to Prometheus with one call,
//! `Db::serve_metrics`, while the application works.
//!
//! `cargo run --release -p keel --example metrics_export [SECONDS]`
//! writes for SECONDS (default 3) while serving
//! `http://127.0.0.1:9187/metrics` (a scrape config for Prometheus:
//! `static_configs: [{targets: ["127.0.0.1:9187"]}]`), then scrapes it once
//! itself and prints a few of the series. Needs the `prometheus` feature.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use keel::{Db, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: u64 = std::env::args().nth(1).map_or(Ok(3), |s| s.parse())?;
    let dir = std::env::temp_dir().join(format!("keel-example-metrics-{}", std::process::id()));
    let mut opts = Options::default();
    opts.set("buffer_pool_size", "64MiB")?;
    opts.set("flush_log_at_trx_commit", "2")?;
    let db = Db::open(&dir, opts)?;
    // The one call. Keep the server while it should serve; dropping it stops it.
    let server = db.serve_metrics("127.0.0.1:9187").or_else(|e| {
        eprintln!("{e}; using a free port instead");
        db.serve_metrics("127.0.0.1:0")
    })?;
    println!("serving http://{}/metrics", server.local_addr());
    let t = db.table_or_create("events")?;
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < Duration::from_secs(seconds) {
        t.put(&n.to_be_bytes(), b"something happened")?;
        n += 1;
    }
    println!("{n} commits in {seconds} s");
    let mut s = std::net::TcpStream::connect(server.local_addr())?;
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    for line in text.lines().filter(|l| {
        l.starts_with("keel_trx_commits_total")
            || l.starts_with("keel_log_lsn_checkpoint_age ")
            || l.starts_with("keel_trx_commit_latency_seconds_count")
    }) {
        println!("{line}");
    }
    drop(server);
    db.close()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
