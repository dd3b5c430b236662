#![allow(clippy::unwrap_used)]
//! `keel bench oltp` with tiny tables and sub-second runs, so the workload,
//! its JSON and its report never rot.

use std::path::Path;

use keel::{Db, Options};
use keel_bench::oltp::{
    self, csv_text, index_name, table_name, Engine, Event, KeelDatabase, OltpParams, OltpReport,
    Plan, VaryAxis, Workload,
};

fn small_options() -> Options {
    let mut o = Options::default();
    for (k, v) in [
        ("page_size", "4096"),
        ("buffer_pool_size", "2MiB"),
        ("flush_method", "nosync"),
        ("doublewrite", "false"),
        ("log_file_size", "1MiB"),
    ] {
        o.set(k, v).unwrap();
    }
    o
}

fn small_params(w: Workload) -> OltpParams {
    OltpParams {
        workload: w,
        tables: 2,
        table_size: 400,
        threads: 4,
        time_s: 0.6,
        report_interval_s: 0.2,
        warmup_s: 0.0,
        prewarm: false,
        range_size: 20,
        ..OltpParams::default()
    }
}

fn plan(dir: &Path, params: OltpParams, vary: Vec<VaryAxis>) -> Plan {
    Plan {
        engine: Engine::Keel,
        params,
        options: small_options(),
        vary,
        datadir: dir.join("db"),
        reuse_data: false,
        prepare_sets: vec![],
        preset: None,
        device_changes: vec![],
    }
}

fn quiet(_: Event<'_>) {}

/// Every row's `k` has its index entry and every index entry its row.
fn assert_index_matches_rows(db: &Db, tables: usize) {
    for n in 1..=tables {
        let problems = oltp::index_vs_rows(db, &table_name(n), &index_name(n)).unwrap();
        assert!(problems.is_empty(), "{problems:#?}");
    }
}

#[test]
fn every_workload_runs_and_keeps_index_and_rows_in_agreement() {
    for w in Workload::ALL {
        let dir = tempfile::tempdir().unwrap();
        let p = plan(dir.path(), small_params(w), vec![]);
        let mut lines = Vec::new();
        let report = oltp::run_plan(&p, &mut |e| {
            if let Event::Interval {
                threads,
                interval,
                warmup,
            } = e
            {
                lines.push(oltp::interval_line(threads, interval, warmup));
            }
        })
        .unwrap_or_else(|e| panic!("{w}: {e}"));
        assert_eq!(report.runs.len(), 1);
        let s = &report.runs[0].summary;
        assert!(s.transactions > 0, "{w}: no transactions");
        assert!(lines.len() >= 2, "{w}: {lines:?}");
        assert!(
            lines[0].contains("tps:") && lines[0].contains("ckpt age"),
            "{w}: {}",
            lines[0]
        );
        let db = Db::open(dir.path().join("db"), small_options()).unwrap();
        assert_index_matches_rows(&db, 2);
        let t = db.table("sbtest1").unwrap();
        let rows = t.range(..).unwrap().count() as u64;
        if w == Workload::Insert {
            assert!(rows > 400, "{w}: {rows} rows");
        } else {
            assert_eq!(rows, 400, "{w}");
        }
        db.close().unwrap();
    }
}

const SUMMARY_FIELDS: &[&str] = &[
    "tps_avg",
    "tps_median",
    "tps_min",
    "tps_p01",
    "cv",
    "stall_intervals",
    "longest_stall_s",
    "latency_ms",
    "transactions",
    "queries",
    "errors",
    "pages_written",
    "pages_written_per_txn",
    "log_bytes_per_txn",
    "sync_flush_waits",
    "sync_flush_wait_ms_total",
    "throttle_delay_ms_total",
];

const INTERVAL_FIELDS: &[&str] = &[
    "t_s",
    "tps",
    "qps",
    "lat_p95_ms",
    "lat_max_ms",
    "errors",
    "checkpoint_age",
    "log_capacity",
    "async_mark",
    "sync_mark",
    "dirty_pages",
    "free_pages",
    "total_pages",
    "pages_flushed",
    "os_data_reads",
    "os_data_writes",
    "log_bytes",
    "sync_flush_waits",
    "throttle_delay_ms",
    "flush_mode",
    "free_check_waits",
    "free_check_wait_ms",
];

fn check_json(report: &OltpReport) {
    let v: serde_json::Value = serde_json::to_value(report).unwrap();
    assert_eq!(v["version"], 1);
    for run in v["runs"].as_array().unwrap() {
        for k in [
            "label",
            "options",
            "io_capacity_max",
            "workload",
            "summary",
            "intervals",
        ] {
            assert!(run.get(k).is_some(), "run lacks `{k}`");
        }
        for k in [
            "page_size",
            "buffer_pool_size",
            "log_file_size",
            "flush_policy",
        ] {
            assert!(run["options"].get(k).is_some(), "options lack `{k}`");
        }
        for k in [
            "workload",
            "tables",
            "table_size",
            "threads",
            "time_s",
            "rand_type",
            "range_size",
            "rate",
        ] {
            assert!(run["workload"].get(k).is_some(), "workload lacks `{k}`");
        }
        let s = &run["summary"];
        for k in SUMMARY_FIELDS {
            assert!(s.get(k).is_some(), "summary lacks `{k}`");
        }
        for k in ["avg", "p50", "p95", "p99", "p999", "max"] {
            assert!(s["latency_ms"][k].is_number(), "latency_ms lacks `{k}`");
        }
        let ivs = run["intervals"].as_array().unwrap();
        assert!(!ivs.is_empty());
        for iv in ivs {
            for k in INTERVAL_FIELDS {
                assert!(iv.get(k).is_some(), "interval lacks `{k}`");
            }
            let f = &iv["pages_flushed"];
            for k in [
                "list",
                "adaptive",
                "background",
                "lru",
                "sync",
                "single",
                "neighbors",
            ] {
                assert!(f[k].is_u64(), "pages_flushed lacks `{k}`");
            }
            assert_eq!(
                f["list"].as_u64(),
                Some(f["adaptive"].as_u64().unwrap() + f["background"].as_u64().unwrap())
            );
            let mode = iv["flush_mode"].as_str().unwrap();
            assert!(
                ["idle", "adaptive", "async", "sync"].contains(&mode),
                "{mode}"
            );
            assert!(iv["log_capacity"].as_u64().unwrap() > 0);
            assert!(iv["total_pages"].as_u64().unwrap() > 0);
        }
        // tps × interval length adds up to the summary's transactions
        // (within one interval's worth).
        let sum: f64 = ivs
            .iter()
            .map(|i| i["tps"].as_f64().unwrap() * i["interval_s"].as_f64().unwrap())
            .sum();
        let total = s["transactions"].as_f64().unwrap();
        let max_iv = ivs
            .iter()
            .map(|i| i["tps"].as_f64().unwrap() * i["interval_s"].as_f64().unwrap())
            .fold(0.0, f64::max);
        assert!(
            (sum - total).abs() <= max_iv + 1.0,
            "intervals {sum} vs summary {total}"
        );
        // steady (the default) may pause writers; the total is reported.
        assert!(s["throttle_delay_ms_total"].as_f64().unwrap() >= 0.0);
        assert_eq!(run["options"]["flush_policy"], "steady");
    }
}

#[test]
fn json_has_every_field_and_counts_agree_and_vary_gives_one_run_per_value() {
    let dir = tempfile::tempdir().unwrap();
    let vary = vec!["buffer_pool_size=1MiB,3MiB".parse().unwrap()];
    let p = plan(dir.path(), small_params(Workload::ReadWrite), vary);
    let report = oltp::run_plan(&p, &mut quiet).unwrap();
    assert_eq!(report.runs.len(), 2);
    assert_eq!(report.runs[0].label, "buffer_pool_size=1MiB");
    assert_eq!(report.runs[0].options["buffer_pool_size"], 1 << 20);
    assert_eq!(report.runs[1].options["buffer_pool_size"], 3 << 20);
    assert!(report.runs[0].status.contains("Checkpoint age"));
    check_json(&report);
    // The copies are gone; the prepared directory stays.
    assert!(!dir.path().join("db-run1").exists());
    assert!(keel::Db::exists(dir.path().join("db")));
    let json = dir.path().join("out.json");
    oltp::write_json(&report, &json).unwrap();
    let text = std::fs::read_to_string(&json).unwrap();
    let back: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(back["runs"].as_array().unwrap().len(), 2);
    let csv = csv_text(&report);
    let rows: Vec<&str> = csv.lines().collect();
    let n_iv: usize = report.runs.iter().map(|r| r.intervals.len()).sum();
    assert_eq!(rows.len(), 1 + n_iv);
    assert!(rows[0].starts_with("label,t_s,"));
    assert!(rows[1].starts_with("buffer_pool_size=1MiB,"));
}

#[test]
fn a_preset_plan_prepares_with_its_own_options_and_the_report_names_the_preset() {
    let dir = tempfile::tempdir().unwrap();
    let mut params = small_params(Workload::ReadWrite);
    params.time_s = 0.4;
    // Few transactions: whatever the flushing policy does, the two runs'
    // redo stays far below the 2 MiB log's free-check limit.
    params.rate = 250.0;
    let mut p = plan(dir.path(), params, vec![]);
    p.preset = Some((&oltp::DISASTER_55, vec!["tables".into()]));
    // A creation option cannot differ between prepare and run: refused
    // before any work.
    p.prepare_sets = vec!["log_file_size=2MiB".into()];
    let e = oltp::run_plan(&p, &mut quiet).unwrap_err().to_string();
    assert!(e.contains("log_file_size"), "{e}");
    assert!(!dir.path().join("db").exists(), "work started");
    p.prepare_sets = vec!["buffer_pool_size=8MiB".into(), "device=unlimited".into()];
    let mut prepared = false;
    let report = oltp::run_plan(&p, &mut |e| {
        if let Event::Prepare { .. } = e {
            prepared = true;
        }
    })
    .unwrap();
    assert!(prepared);
    assert_eq!(report.preset.as_deref(), Some("disaster-55"));
    let settings = report.preset_settings.as_ref().unwrap();
    assert_eq!(settings.seed, 1);
    assert_eq!(settings.overridden, ["tables"]);
    // The run used its own options, not prepare's.
    assert_eq!(report.runs[0].options["buffer_pool_size"], 2 << 20);
    assert!(report.runs[0].summary.transactions > 0);
    let v = serde_json::to_value(&report).unwrap();
    assert_eq!(v["preset"], "disaster-55");
    assert_eq!(v["preset_settings"]["options"]["io_capacity"], 100);
    assert_eq!(v["prepare_sets"][0], "buffer_pool_size=8MiB");
    let page = oltp::render_html(&report);
    assert!(page.contains("preset disaster-55</h1>"), "{page}");
    assert!(page.contains("Disaster: MySQL 5.5 flushing"));
    // The plan's options are the run's (the CLI merges the preset's into
    // them): the default policy here.
    let policy = report.runs[0].options["flush_policy"].as_str().unwrap();
    assert_eq!(policy, "steady");
    assert!(page.contains(&format!("Flush policy: {policy}")), "{page}");
    // Without a preset the JSON has no preset keys.
    p.preset = None;
    p.prepare_sets = vec![];
    p.reuse_data = true;
    let report = oltp::run_plan(&p, &mut quiet).unwrap();
    let v = serde_json::to_value(&report).unwrap();
    assert!(v.get("preset").is_none() && v.get("prepare_sets").is_none());
}

#[test]
fn reuse_data_skips_prepare_and_an_occupied_datadir_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut params = small_params(Workload::PointSelect);
    params.time_s = 0.2;
    let mut p = plan(dir.path(), params, vec![]);
    oltp::run_plan(&p, &mut quiet).unwrap();
    let e = oltp::run_plan(&p, &mut quiet).unwrap_err().to_string();
    assert!(e.contains("--reuse-data"), "{e}");
    p.reuse_data = true;
    let (mut prepared, mut reused) = (false, false);
    oltp::run_plan(&p, &mut |e| match e {
        Event::Prepare { .. } => prepared = true,
        Event::Reused { .. } => reused = true,
        _ => {}
    })
    .unwrap();
    assert!(reused && !prepared);
}

#[test]
fn rate_limits_throughput_and_warmup_is_not_measured() {
    let dir = tempfile::tempdir().unwrap();
    let mut params = small_params(Workload::PointSelect);
    params.rate = 200.0;
    params.time_s = 1.0;
    params.warmup_s = 0.4;
    let p = plan(dir.path(), params, vec![]);
    let mut warm = 0;
    let report = oltp::run_plan(&p, &mut |e| {
        if let Event::Interval { warmup: true, .. } = e {
            warm += 1;
        }
    })
    .unwrap();
    assert_eq!(warm, 2);
    let s = &report.runs[0].summary;
    assert!((100.0..300.0).contains(&s.tps_avg), "tps {}", s.tps_avg);
    assert!(report.runs[0].intervals.iter().all(|i| i.t_s <= 1.2));
}

#[test]
fn prewarm_reads_every_table_into_the_pool_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut params = small_params(Workload::ReadOnly);
    params.prewarm = true;
    // Two runs: each on a copy of the prepared directory, opened cold.
    let vary = vec!["threads=2,4".parse::<VaryAxis>().unwrap()];
    let p = plan(dir.path(), params, vary);
    let mut prewarmed = Vec::new();
    let report = oltp::run_plan(&p, &mut |e| {
        if let Event::Prewarmed {
            entries,
            free_pages,
            total_pages,
            ..
        } = e
        {
            prewarmed.push((entries, free_pages, total_pages));
        }
    })
    .unwrap();
    // Every row and index entry of both tables, once per run.
    assert_eq!(prewarmed.len(), 2);
    for &(entries, free, total) in &prewarmed {
        assert_eq!(entries, 2 * 2 * 400);
        assert!(free < total, "{free} of {total} free");
    }
    // A read-only run on a prewarmed pool reads nothing from disk.
    for run in &report.runs {
        let reads: u64 = run.intervals.iter().map(|i| i.os_data_reads).sum();
        assert_eq!(reads, 0, "{}", run.label);
    }
    // Nothing to prewarm: a clear error naming the missing table.
    let empty = Db::open(dir.path().join("empty"), small_options()).unwrap();
    let e = oltp::prewarm(
        &KeelDatabase::new(empty.clone()),
        &small_params(Workload::ReadOnly),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("sbtest1") && e.contains("prepare it first"),
        "{e}"
    );
    empty.close().unwrap();
    // The parameter takes the usual spellings of a boolean, and no other.
    let mut q = OltpParams::default();
    q.set("prewarm", "on").unwrap();
    assert!(q.prewarm);
    q.set("prewarm", "0").unwrap();
    assert!(!q.prewarm);
    let e = q.set("prewarm", "maybe").unwrap_err().to_string();
    assert!(e.contains("prewarm") && e.contains("maybe"), "{e}");
}

#[test]
fn bad_vary_keys_and_values_are_rejected_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    for (axis, needle) in [
        ("no_such_knob=1,2", "no_such_knob"),
        ("buffer_pool_size=lots", "buffer_pool_size"),
        ("threads=0", "threads"),
        ("rand_type=gauss", "rand_type"),
    ] {
        let p = plan(
            dir.path(),
            small_params(Workload::ReadWrite),
            vec![axis.parse().unwrap()],
        );
        let e = oltp::run_plan(&p, &mut quiet).unwrap_err().to_string();
        assert!(e.contains(needle), "{axis}: {e}");
        assert!(!dir.path().join("db").exists(), "{axis}: work started");
    }
}

#[test]
fn a_device_change_is_applied_on_time_and_recorded_in_the_json_lines_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut params = small_params(Workload::ReadWrite);
    params.time_s = 2.0;
    params.report_interval_s = 0.5;
    let mut p = plan(dir.path(), params, vec![]);
    p.options.set("device", "nvme").unwrap();
    p.device_changes = vec!["1s:iops=300".parse().unwrap()];
    let mut lines = Vec::new();
    let report = oltp::run_plan(&p, &mut |e| match e {
        Event::Interval {
            threads,
            interval,
            warmup,
        } => lines.push(oltp::interval_line(threads, interval, warmup)),
        Event::DeviceChanged { change } => lines.push(oltp::device_change_line(change)),
        _ => {}
    })
    .unwrap();
    let run = &report.runs[0];
    assert_eq!(run.device_changes.len(), 1, "{:?}", run.device_changes);
    let c = &run.device_changes[0];
    assert_eq!((c.at_s, c.spec.as_str()), (1.0, "iops=300"));
    // Applied by the sampler when due: not early, and well within an
    // interval on a busy machine.
    let applied = c.applied_at_s.unwrap();
    assert!((1.0..1.5).contains(&applied), "applied at {applied} s");
    // The note sits between the interval lines of 1 s and 1.5 s.
    let note = lines
        .iter()
        .position(|l| l.contains("] device -> iops=300"))
        .unwrap_or_else(|| panic!("no device change line: {lines:#?}"));
    assert!(lines[note - 1].starts_with("[ 1s ]"), "{lines:#?}");
    assert!(lines[note + 1].starts_with("[ 1.5s ]"), "{lines:#?}");
    // The model follows the new spec to the end of the run.
    assert!(run.summary.transactions > 0);

    let v = serde_json::to_value(&report).unwrap();
    let changes = &v["runs"][0]["device_changes"];
    assert_eq!(changes[0]["at_s"], 1.0);
    assert_eq!(changes[0]["spec"], "iops=300");
    assert!(changes[0]["applied_at_s"].as_f64().unwrap() >= 1.0);

    let page = oltp::render_html(&report);
    assert_eq!(
        page.matches("<g class=\"marker\">").count(),
        oltp::CHART_TITLES.len(),
        "one marker per chart"
    );
    assert!(page.contains(">device -&gt; iops=300</text>"));
    assert!(page.contains("<b>Device changes</b>"));

    // Without a change there is no marker and the JSON's list is empty.
    let mut p = plan(dir.path(), small_params(Workload::PointSelect), vec![]);
    p.reuse_data = true;
    p.options.set("device", "nvme").unwrap();
    let report = oltp::run_plan(&p, &mut quiet).unwrap();
    assert!(report.runs[0].device_changes.is_empty());
    assert!(!oltp::render_html(&report).contains("class=\"marker\""));
}

#[test]
fn bad_device_change_schedules_are_rejected_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    for (device, changes, needle) in [
        (
            "nvme",
            &["0.6s:iops=100"][..],
            "`0.6s:iops=100` is not before the end",
        ),
        (
            "nvme",
            &["0.5:nvme", "0.2:iops=5"],
            "give the changes in time order",
        ),
        ("unlimited", &["0.2:iops=100"], "device = unlimited"),
    ] {
        let mut p = plan(dir.path(), small_params(Workload::ReadWrite), vec![]);
        p.options.set("device", device).unwrap();
        p.device_changes = changes.iter().map(|c| c.parse().unwrap()).collect();
        let e = oltp::run_plan(&p, &mut quiet).unwrap_err().to_string();
        assert!(
            e.contains("--device-change") && e.contains(needle),
            "{changes:?}: {e}"
        );
        assert!(!dir.path().join("db").exists(), "{changes:?}: work started");
    }
}

/// Injected into a copy of the page for the Chromium check: records, for
/// every chart, its rendered size, how many of its lines have extent and
/// how many of its marker lines stand upright inside it.
const CHECK_SCRIPT: &str = "<script>window.addEventListener('load',()=>{const r=[];\
for(const s of document.querySelectorAll('svg.chart')){const b=s.getBoundingClientRect();\
let n=0;for(const p of s.querySelectorAll('polyline')){if(p.getBBox().width>0)n++;}\
let m=0;for(const l of s.querySelectorAll('g.marker line')){const k=l.getBoundingClientRect();\
if(k.height>50&&k.left>b.left&&k.right<b.right)m++;}\
r.push(s.querySelector('title').textContent+'='+Math.round(b.width)+'x'+Math.round(b.height)+'x'+n+'x'+m);}\
document.body.setAttribute('data-check',r.join('|'));});</script>";

const CHROMIUM: &str = "/usr/bin/chromium";

#[test]
fn html_report_is_self_contained_and_every_chart_renders_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let vary = vec!["threads=2,4".parse().unwrap()];
    let mut params = small_params(Workload::ReadWrite);
    params.time_s = 0.8;
    let mut p = plan(dir.path(), params, vary);
    p.options.set("device", "nvme").unwrap();
    p.device_changes = vec!["0.4:sata-ssd".parse().unwrap()];
    let report = oltp::run_plan(&p, &mut quiet).unwrap();
    let page_path = oltp::write_html_report(&report, &dir.path().join("report")).unwrap();
    let page = std::fs::read_to_string(&page_path).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(!page.contains("<script") && !page.contains("<link") && !page.contains("@font-face"));
    assert!(
        !page.contains("http://")
            || page.matches("http://").count()
                == page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
    );
    assert!(!page.contains("https://"));
    assert_eq!(page.matches("<svg xmlns").count(), oltp::CHART_TITLES.len());
    for t in oltp::CHART_TITLES {
        assert!(
            page.contains(&format!("<title>{t}</title>")),
            "chart `{t}` missing"
        );
    }
    assert!(page.contains("threads=2") && page.contains("threads=4"));
    // Both runs had the same change: one marker per chart.
    assert_eq!(
        page.matches("<g class=\"marker\">").count(),
        oltp::CHART_TITLES.len()
    );
    assert!(
        page.contains("time since the measurement started (s)") && page.contains("transactions/s")
    );

    for (title, v) in chromium_check(dir.path(), &page).unwrap_or_default() {
        assert!(v[2] >= 2, "chart `{title}` drew {} lines with extent", v[2]);
        assert_eq!(v[3], 1, "chart `{title}`: device change marker not drawn");
    }
}

/// Render `page` in headless Chromium with [`CHECK_SCRIPT`], check that
/// every chart is there and rendered larger than 100 × 100 px, and return,
/// for every chart, its title and [width, height, lines with extent,
/// upright markers]; `None` (said on stderr) when Chromium is missing.
fn chromium_check(dir: &Path, page: &str) -> Option<Vec<(String, Vec<u32>)>> {
    if !Path::new(CHROMIUM).exists() {
        eprintln!("SKIPPED: the Chromium rendering check of the oltp report ({CHROMIUM} is not installed; apt-get install chromium)");
        return None;
    }
    let probe = dir.join("probe.html");
    std::fs::write(
        &probe,
        page.replace("</body>", &format!("{CHECK_SCRIPT}</body>")),
    )
    .unwrap();
    let out = std::process::Command::new("timeout")
        .arg("120")
        .arg(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("file://{}", probe.display()))
        .env("HOME", dir)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let check = dom
        .split("data-check=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| {
            panic!(
                "Chromium did not run the check: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let charts: Vec<(String, Vec<u32>)> = check
        .split('|')
        .map(|c| {
            let (title, dims) = c.rsplit_once('=').unwrap();
            let v = dims.split('x').map(|n| n.parse().unwrap()).collect();
            (title.to_string(), v)
        })
        .collect();
    assert_eq!(charts.len(), oltp::CHART_TITLES.len(), "{check}");
    for (title, v) in &charts {
        assert!(
            v[0] > 100 && v[1] > 100,
            "chart `{title}` rendered at {v:?}"
        );
    }
    Some(charts)
}

#[test]
fn runs_of_separate_invocations_and_engines_merge_into_one_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut params = small_params(Workload::ReadWrite);
    params.time_s = 0.6;
    let vary = vec!["flush_policy=classic,steady".parse().unwrap()];
    let report = oltp::run_plan(&plan(dir.path(), params, vary), &mut quiet).unwrap();
    // Three files as three invocations would write them: one run each,
    // the last as another engine that measures less.
    let mut files = Vec::new();
    for (i, name) in ["classic", "steady", "innodb"].into_iter().enumerate() {
        let mut one = report.clone();
        one.runs = vec![report.runs[i.min(1)].clone()];
        one.runs[0].label = "read_write".into();
        if name == "innodb" {
            one.runs[0].engine = "innodb".into();
            one.runs[0].summary.not_measured = vec!["peak_rss_bytes".into()];
        }
        let path = dir.path().join(format!("{name}.json"));
        oltp::write_json(&one, &path).unwrap();
        files.push((path.clone(), oltp::read_report(&path).unwrap()));
    }
    let merged = oltp::merge(files);
    let labels: Vec<&str> = merged.runs.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "classic: read_write",
            "steady: read_write",
            "innodb: read_write"
        ]
    );
    let table = oltp::summary_text(&merged);
    assert_eq!(table.lines().count(), 5, "{table}");
    let innodb_line = table.lines().nth(3).unwrap();
    assert_eq!(
        innodb_line.split_whitespace().nth(2),
        Some("innodb"),
        "{table}"
    );
    assert!(
        table.contains("does not measure: peak_rss_bytes"),
        "{table}"
    );
    let page_path = oltp::write_html_report(&merged, &dir.path().join("merged")).unwrap();
    let page = std::fs::read_to_string(page_path).unwrap();
    for l in &labels {
        assert!(page.contains(l), "{l} missing from the page");
    }
    assert!(page.contains("<td>innodb</td>") && page.contains("n/a"));
    for (title, v) in chromium_check(dir.path(), &page).unwrap_or_default() {
        assert!(v[2] >= 3, "chart `{title}` drew {} lines with extent", v[2]);
    }
}
