//! The metrics in Prometheus's text exposition format (version 0.0.4), for
//! a `/metrics` endpoint that Prometheus, PMM or Grafana Agent scrape.
//!
//! Every registry metric becomes one series named by [`prometheus_name`]:
//! `keel_` and the registry name, with its time unit converted to seconds
//! (the value too: `os_data_write_us_total` is
//! `keel_os_data_write_seconds_total`, `wait_page_latch_ns` is
//! `keel_wait_page_latch_seconds_total`); a counter's name ends in `_total`
//! (`trx_commits` is `keel_trx_commits_total`,
//! `buffer_flush_adaptive_total_pages` is
//! `keel_buffer_flush_adaptive_pages_total`) and a gauge's does not
//! (`buffer_pool_pages_total` is `keel_buffer_pool_pages`). Its `# HELP`
//! is its doc comment and its `# TYPE` `gauge` or `counter`
//! ([`super::is_gauge`]).
//! Two histograms stand in for their registry buckets:
//! `keel_writer_pause_seconds` (the `writer_pause_le_*` buckets and
//! `writer_pauses`) and `keel_trx_commit_latency_seconds`
//! ([`super::Metrics::trx_commit_latency`]).
//!
//! The text is built from relaxed loads without a lock, like
//! [`super::Metrics::snapshot`]: one scrape is not a consistent cut, which
//! Prometheus's rates tolerate.

use std::fmt::Write as _;

use super::{is_gauge, Metrics, COMMIT_BUCKETS_US, PAUSE_BUCKETS_US};

/// The `Content-Type` of [`Metrics::render_prometheus`]'s text.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Registry metrics that are shown only inside a histogram.
fn in_histogram(name: &str) -> bool {
    name.starts_with("writer_pause_le_") || name == "writer_pauses"
}

/// The Prometheus name of registry metric `name` and the divisor that
/// turns its value into the name's unit (1, or 1e3 / 1e6 for ms / µs to
/// seconds).
fn scaled(name: &str) -> (String, f64) {
    let mut scale = 1.0;
    let mut parts: Vec<&str> = name
        .split('_')
        .map(|p| match p {
            "us" => {
                scale = 1e6;
                "seconds"
            }
            "ms" => {
                scale = 1e3;
                "seconds"
            }
            "ns" => {
                scale = 1e9;
                "seconds"
            }
            p => p,
        })
        .collect();
    if !is_gauge(name) {
        parts.retain(|p| *p != "total");
        parts.push("total");
    } else if parts.last() == Some(&"total") {
        // A gauge named for a total (`buffer_pool_pages_total`) loses the
        // suffix that Prometheus keeps for counters.
        parts.pop();
    }
    (format!("keel_{}", parts.join("_")), scale)
}

/// The name registry metric `name` has in the Prometheus exposition (see
/// the module doc): `keel_` + name, time units in seconds, counters ending
/// in `_total`. For the histograms' buckets (`writer_pause_le_*`,
/// `writer_pauses`) it is the histogram's name.
pub fn prometheus_name(name: &str) -> String {
    if in_histogram(name) {
        return "keel_writer_pause_seconds".to_string();
    }
    scaled(name).0
}

fn escape_help(help: &str) -> String {
    help.trim().replace('\\', "\\\\").replace('\n', "\\n")
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A histogram's series from cumulative `(bound µs, count)` buckets.
fn histogram(out: &mut String, name: &str, help: &str, b: &[(u64, u64)], sum_us: u64, n: u64) {
    header(out, name, "histogram", help);
    for &(le, c) in b {
        let _ = writeln!(
            out,
            "{name}_bucket{{le=\"{}\"}} {}",
            le as f64 / 1e6,
            c.min(n)
        );
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {n}");
    let _ = writeln!(out, "{name}_sum {}", sum_us as f64 / 1e6);
    let _ = writeln!(out, "{name}_count {n}");
}

impl Metrics {
    /// Every metric in Prometheus's text exposition format (see the
    /// module doc), served with [`PROMETHEUS_CONTENT_TYPE`].
    pub fn render_prometheus(&self) -> String {
        let mut out = String::with_capacity(32 * 1024);
        let snap = self.snapshot();
        for (name, help) in Metrics::NAMES.iter().zip(Metrics::HELP) {
            if in_histogram(name) {
                continue;
            }
            let (pname, scale) = scaled(name);
            let kind = if is_gauge(name) { "gauge" } else { "counter" };
            header(&mut out, &pname, kind, help);
            let v = snap.get(name).copied().unwrap_or(0);
            if scale == 1.0 {
                let _ = writeln!(out, "{pname} {v}");
            } else {
                let _ = writeln!(out, "{pname} {}", v as f64 / scale);
            }
        }
        let pauses = snap.get("writer_pauses").copied().unwrap_or(0);
        let buckets: Vec<(u64, u64)> = PAUSE_BUCKETS_US
            .iter()
            .map(|&le| {
                let c = snap
                    .get(format!("writer_pause_le_{}ms", le / 1000).as_str())
                    .copied()
                    .unwrap_or(0);
                (le, c)
            })
            .collect();
        histogram(
            &mut out,
            "keel_writer_pause_seconds",
            "Writer pauses imposed by the flushing policy (steady), each at most 100 ms.",
            &buckets,
            snap.get("buffer_flush_throttle_delay_us_total")
                .copied()
                .unwrap_or(0),
            pauses,
        );
        let (buckets, sum, count) = self.trx_commit_latency.cumulative();
        debug_assert_eq!(buckets.len(), COMMIT_BUCKETS_US.len());
        histogram(
            &mut out,
            "keel_trx_commit_latency_seconds",
            "Commit latency of each transaction that committed writes: every wait its caller \
             saw on the way to the commit. The call that commits, from entry to return \
             (Txn::commit; a whole Table::put or Table::delete, its row-lock wait included), \
             with the free-check wait for log space (classic), applying and the wait for \
             durability as flush_log_at_trx_commit asks, plus the writer pause (steady) the \
             transaction took at its first write statement. Not included: a Txn's row-lock \
             waits and reads, the caller's time between statements, failed commits.",
            &buckets,
            sum,
            count,
        );
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_follow_prometheus_conventions() {
        assert_eq!(prometheus_name("trx_commits"), "keel_trx_commits_total");
        assert_eq!(
            prometheus_name("buffer_flush_adaptive_total_pages"),
            "keel_buffer_flush_adaptive_pages_total"
        );
        assert_eq!(
            prometheus_name("os_data_write_us_total"),
            "keel_os_data_write_seconds_total"
        );
        assert_eq!(
            prometheus_name("log_lsn_checkpoint_age"),
            "keel_log_lsn_checkpoint_age"
        );
        assert_eq!(
            prometheus_name("buffer_pool_pages_total"),
            "keel_buffer_pool_pages"
        );
        assert_eq!(
            prometheus_name("buffer_flush_round_us"),
            "keel_buffer_flush_round_seconds"
        );
        assert_eq!(
            prometheus_name("lock_row_lock_time_ms"),
            "keel_lock_row_lock_time_seconds_total"
        );
        assert_eq!(
            prometheus_name("wait_page_latch_ns"),
            "keel_wait_page_latch_seconds_total"
        );
        assert_eq!(
            prometheus_name("writer_pause_le_5ms"),
            "keel_writer_pause_seconds"
        );
        // Distinct names, none reserved for a histogram's series.
        let names: Vec<String> = Metrics::NAMES
            .iter()
            .filter(|n| !in_histogram(n))
            .map(|n| prometheus_name(n))
            .collect();
        let unique: HashSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len());
        for n in &names {
            assert!(
                !n.ends_with("_bucket") && !n.ends_with("_count") && !n.ends_with("_sum"),
                "{n}"
            );
            assert!(
                n != "keel_writer_pause_seconds" && n != "keel_trx_commit_latency_seconds",
                "{n}"
            );
        }
    }

    #[test]
    fn the_text_has_help_type_and_value_for_every_series_and_scales_units() {
        let m = Metrics::default();
        Metrics::add(&m.trx_commits, 7);
        Metrics::add(&m.os_data_write_us_total, 1_500_000);
        m.log_lsn_checkpoint_age.bind(|| 4096);
        m.record_pause(3_000);
        m.record_pause(150_000);
        m.trx_commit_latency.record(700);
        let text = m.render_prometheus();
        assert!(text.contains("# TYPE keel_trx_commits_total counter\nkeel_trx_commits_total 7\n"));
        assert!(text.contains("keel_os_data_write_seconds_total 1.5\n"));
        assert!(text.contains(
            "# TYPE keel_log_lsn_checkpoint_age gauge\nkeel_log_lsn_checkpoint_age 4096\n"
        ));
        assert!(text.contains("# TYPE keel_writer_pause_seconds histogram\n"));
        assert!(text.contains("keel_writer_pause_seconds_bucket{le=\"0.002\"} 0\n"));
        assert!(text.contains("keel_writer_pause_seconds_bucket{le=\"0.005\"} 1\n"));
        assert!(text.contains("keel_writer_pause_seconds_bucket{le=\"+Inf\"} 2\n"));
        assert!(text.contains("keel_writer_pause_seconds_sum 0.153\n"));
        assert!(text.contains("keel_writer_pause_seconds_count 2\n"));
        assert!(text.contains("keel_trx_commit_latency_seconds_bucket{le=\"0.0005\"} 0\n"));
        assert!(text.contains("keel_trx_commit_latency_seconds_bucket{le=\"0.001\"} 1\n"));
        assert!(!text.contains("writer_pause_le_"));
        // Every series line follows its HELP and TYPE.
        let mut typed = HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                typed.insert(rest.split(' ').next().unwrap().to_string());
            } else if !line.starts_with('#') {
                let name = line.split([' ', '{']).next().unwrap();
                let base = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s).filter(|b| typed.contains(*b)))
                    .unwrap_or(name);
                assert!(typed.contains(base), "{line} has no TYPE before it");
            }
        }
        assert_eq!(
            text.matches("# HELP ").count(),
            text.matches("# TYPE ").count()
        );
    }
}
