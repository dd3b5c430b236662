#![allow(clippy::unwrap_used)]
//! `contrib/grafana/keel.json` and `contrib/prometheus/keel-alerts.yml`
//! stay true to the engine: every metric they name is one a database
//! exports; the dashboard keeps each instance apart (legends, quantiles),
//! gives every series a unit and never puts two units on one axis, and
//! marks the levels a DBA watches; Debian's `promtool` accepts the rules
//! and passes their unit tests (`keel-alerts.test.yml`), skipped, and said
//! so, where promtool is not installed (`apt-get install prometheus`).

mod common;

use common::metric_names;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn contrib() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib")
}

fn dashboard() -> Value {
    let text = std::fs::read_to_string(contrib().join("grafana/keel.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn rules_text() -> String {
    std::fs::read_to_string(contrib().join("prometheus/keel-alerts.yml")).unwrap()
}

/// The dashboard's panels (there are no rows to descend into).
fn panels(dash: &Value) -> &Vec<Value> {
    dash["panels"].as_array().unwrap()
}

fn title(p: &Value) -> &str {
    p["title"].as_str().unwrap()
}

/// Each `histogram_quantile(...)` call in `expr`, with its arguments.
fn quantile_calls(expr: &str) -> Vec<&str> {
    let mut calls = Vec::new();
    for (start, _) in expr.match_indices("histogram_quantile(") {
        let mut depth = 0;
        for (i, c) in expr[start..].char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        calls.push(&expr[start..start + i + 1]);
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    calls
}

fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

#[test]
fn promtool_accepts_the_alert_rules_and_passes_their_unit_tests() {
    let Some(tool) = common::promtool() else {
        eprintln!(
            "SKIPPED: promtool check rules and promtool test rules \
             (promtool is not installed; apt-get install prometheus)"
        );
        return;
    };
    let dir = contrib().join("prometheus");
    let (ok, said) = run(Command::new(tool)
        .args(["check", "rules", "keel-alerts.yml"])
        .current_dir(&dir));
    assert!(ok, "promtool check rules:\n{said}");
    let (ok, said) = run(Command::new(tool)
        .args(["test", "rules", "keel-alerts.test.yml"])
        .current_dir(&dir));
    assert!(ok, "promtool test rules:\n{said}");
}

/// The series a live database exports, `_bucket`, `_sum` and `_count` of
/// its histograms included, and the names of the histograms themselves
/// (which the rules' annotations mention).
fn exported() -> HashSet<String> {
    let dir = tempfile::tempdir().unwrap();
    let db = keel::Db::open(dir.path(), common::small_options(&[])).unwrap();
    let text = db.metrics().render_prometheus();
    db.close().unwrap();
    let mut names: HashSet<String> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split([' ', '{']).next())
        .map(str::to_string)
        .collect();
    let families: Vec<String> = names
        .iter()
        .filter_map(|n| n.strip_suffix("_bucket").map(str::to_string))
        .collect();
    names.extend(families);
    names
}

#[test]
fn every_metric_the_rules_and_the_dashboard_name_is_exported() {
    let series = exported();
    let mut named: Vec<(String, String)> = metric_names(&rules_text())
        .into_iter()
        .map(|n| ("keel-alerts.yml".to_string(), n))
        .collect();
    let dash = dashboard();
    for p in panels(&dash) {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            let names = metric_names(expr);
            assert!(
                !names.is_empty(),
                "`{}`: `{expr}` names no metric",
                title(p)
            );
            named.extend(names.into_iter().map(|n| (title(p).to_string(), n)));
        }
    }
    let missing: Vec<String> = named
        .iter()
        .filter(|(_, n)| !series.contains(n))
        .map(|(w, n)| format!("{n} (in {w})"))
        .collect();
    assert!(missing.is_empty(), "not exported: {missing:#?}");
    // The rules cover what the issue asks of them.
    let rules = rules_text();
    for want in [
        "keel_log_lsn_checkpoint_age",
        "keel_buffer_flush_throttle_delay_seconds_total",
        "keel_trx_rseg_history_len",
        "keel_lock_deadlocks_total",
        "keel_lock_timeouts_total",
        "keel_buffer_flush_sync_pages_total",
    ] {
        assert!(rules.contains(want), "no rule on {want}");
    }
}

#[test]
fn every_quantile_keeps_instances_apart() {
    let dash = dashboard();
    let mut exprs: Vec<(String, String)> = Vec::new();
    for p in panels(&dash) {
        for t in p["targets"].as_array().unwrap() {
            let legend = t["legendFormat"].as_str().unwrap_or("");
            assert!(
                legend.contains("{{instance}}"),
                "`{}` target {}: legend `{legend}` does not name the instance",
                title(p),
                t["refId"]
            );
            exprs.push((title(p).to_string(), t["expr"].as_str().unwrap().into()));
        }
    }
    for line in rules_text().lines() {
        exprs.push(("keel-alerts.yml".into(), line.to_string()));
    }
    let mut quantiles = 0;
    for (w, e) in &exprs {
        for call in quantile_calls(e) {
            quantiles += 1;
            assert!(
                call.contains("by (le, instance)"),
                "{w}: `{call}` does not keep `by (le, instance)`"
            );
        }
    }
    assert!(quantiles >= 4, "{quantiles} quantiles");
}

/// The unit an expression of a plain shape must be shown in: seconds for
/// a quantile or the rate of a seconds counter, bytes/s for the rate of a
/// bytes counter, a per-second count for the rate of any other counter
/// (a histogram's `_count` among them).
/// `None` for anything else (ratios, gauges), which the test does not
/// second-guess.
fn unit_kind(expr: &str) -> Option<&'static str> {
    if expr.starts_with("histogram_quantile(") {
        return Some("seconds");
    }
    if !expr.starts_with("rate(") || expr.contains(['/', '*']) {
        return None;
    }
    let name = metric_names(expr).pop()?;
    // A histogram's `_count` counts observations, whatever their unit.
    Some(if name.ends_with("_count") {
        "count/s"
    } else if name.contains("_seconds") {
        "seconds"
    } else if name.contains("_bytes") {
        "bytes/s"
    } else {
        "count/s"
    })
}

fn unit_fits(kind: &str, unit: &str) -> bool {
    match kind {
        "seconds" => unit == "s",
        "bytes/s" => unit == "Bps" || unit == "binBps",
        _ => unit.ends_with("/s") || ["ops", "iops", "reqps", "rps", "wps"].contains(&unit),
    }
}

#[test]
fn every_series_has_a_unit_and_each_unit_its_own_axis() {
    let dash = dashboard();
    for p in panels(&dash) {
        let t = title(p);
        let fc = &p["fieldConfig"];
        let unit = fc["defaults"]["unit"].as_str().unwrap_or("");
        assert!(
            !["", "none", "short"].contains(&unit),
            "`{t}` has no unit (`{unit}`)"
        );
        let default_axis = fc["defaults"]["custom"]["axisPlacement"]
            .as_str()
            .unwrap_or("auto");
        assert_ne!(default_axis, "right", "`{t}`");
        // refId → its unit, where an override gives it one.
        let mut units = std::collections::HashMap::new();
        for o in fc["overrides"].as_array().unwrap() {
            let props = o["properties"].as_array().unwrap();
            let prop = |id: &str| {
                props
                    .iter()
                    .find(|p| p["id"] == id)
                    .and_then(|p| p["value"].as_str())
            };
            let Some(u) = prop("unit") else { continue };
            assert_eq!(
                o["matcher"]["id"], "byFrameRefID",
                "`{t}`: a unit override must match a query (legends carry the instance)"
            );
            if u != unit {
                assert_eq!(
                    prop("custom.axisPlacement"),
                    Some("right"),
                    "`{t}`: the series in `{u}` shares the `{unit}` axis"
                );
            }
            units.insert(o["matcher"]["options"].as_str().unwrap().to_string(), u);
        }
        let distinct: HashSet<&str> = units.values().copied().chain([unit]).collect();
        assert!(
            distinct.len() <= 2,
            "`{t}`: {distinct:?}: more units than axes"
        );
        for q in p["targets"].as_array().unwrap() {
            let expr = q["expr"].as_str().unwrap();
            let shown = units
                .get(q["refId"].as_str().unwrap())
                .copied()
                .unwrap_or(unit);
            if let Some(kind) = unit_kind(expr) {
                assert!(
                    unit_fits(kind, shown),
                    "`{t}`: `{expr}` is {kind} but shown in `{shown}`"
                );
            }
        }
    }
}

/// The panels that show what a DBA acts on mark its levels, and locks
/// and deadlocks have panels of their own.
#[test]
fn the_dashboard_marks_the_levels_a_dba_watches() {
    let dash = dashboard();
    let panel_with = |metric: &str| -> Vec<&Value> {
        panels(&dash)
            .iter()
            .filter(|p| {
                p["targets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|t| t["expr"].as_str().unwrap().contains(metric))
            })
            .collect()
    };
    for metric in [
        "keel_log_free_check_limit",
        "keel_writer_pause_seconds_bucket",
        "keel_trx_rseg_history_len",
        "keel_trx_commit_latency_seconds_bucket",
        "keel_trx_oldest_view_age_seconds",
    ] {
        let marked = panel_with(metric).into_iter().any(|p| {
            let d = &p["fieldConfig"]["defaults"];
            let steps = d["thresholds"]["steps"].as_array().map_or(0, Vec::len);
            let style = d["custom"]["thresholdsStyle"]["mode"].as_str();
            steps >= 2 && style.is_some_and(|s| s != "off")
        });
        assert!(marked, "no panel on {metric} shows thresholds");
    }
    for metric in [
        "keel_lock_row_lock_waits_total",
        "keel_lock_row_lock_time_seconds_total",
        "keel_lock_deadlocks_total",
        "keel_lock_timeouts_total",
    ] {
        assert!(!panel_with(metric).is_empty(), "no panel on {metric}");
    }
}
