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
        option_changes: vec![],
        hold_view: None,
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
        // Bytes per transaction: Keel's own counters by kind of file add up
        // to its total; the disk's counter is there or says why not.
        let parts = s.log_bytes_per_txn
            + s.dblwr_bytes_per_txn
            + s.data_bytes_per_txn
            + s.other_bytes_per_txn;
        assert!(
            (s.engine_bytes_per_txn - parts).abs() < 1e-6 * parts.max(1.0),
            "{w}: {s:?}"
        );
        if ![Workload::ReadOnly, Workload::PointSelect].contains(&w) {
            assert!(s.log_bytes_per_txn > 0.0, "{w}: no redo counted");
        }
        assert!(
            s.device_bytes_per_txn.is_some() != s.device.starts_with("not measured"),
            "{w}: {:?} {}",
            s.device_bytes_per_txn,
            s.device
        );
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
    "dblwr_bytes_per_txn",
    "data_bytes_per_txn",
    "other_bytes_per_txn",
    "engine_bytes_per_txn",
    "device_bytes_per_txn",
    "process_write_bytes_per_txn",
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
    "data_bytes",
    "dblwr_bytes",
    "other_bytes",
    "engine_bytes",
    "device_bytes",
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
    assert!(
        page.contains("<h2>Bytes written per transaction</h2>")
            && page.contains("</b> doublewrite</th>")
            && page.contains("<th>disk</th>"),
        "{page}"
    );
    assert!(page.contains("Disaster: MySQL 5.5 Flushing"));
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

/// Run `p`, collecting the lines the CLI prints: intervals and changes.
fn run_with_lines(p: &Plan) -> (OltpReport, Vec<String>) {
    let mut lines = Vec::new();
    let report = oltp::run_plan(p, &mut |e| match e {
        Event::Interval {
            threads,
            interval,
            warmup,
        } => lines.push(oltp::interval_line(threads, interval, warmup)),
        Event::DeviceChanged { change } => lines.push(oltp::device_change_line(change)),
        Event::OptionChanged { change } => lines.push(oltp::option_change_line(change)),
        _ => {}
    })
    .unwrap();
    (report, lines)
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
    let (report, lines) = run_with_lines(&p);
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
    assert!(page.contains("<b>Changes</b>"));

    // Without a change there is no marker and the JSON's list is empty.
    let mut p = plan(dir.path(), small_params(Workload::PointSelect), vec![]);
    p.reuse_data = true;
    p.options.set("device", "nvme").unwrap();
    let report = oltp::run_plan(&p, &mut quiet).unwrap();
    assert!(report.runs[0].device_changes.is_empty());
    assert!(!oltp::render_html(&report).contains("class=\"marker\""));
}

/// `--set-at`: classic for the first second, steady from then on, under
/// load; the switch shows in the intervals (steady publishes its levels),
/// the lines, the JSON and the report, and the run loses nothing.
#[test]
fn a_policy_switch_at_run_time_shows_in_the_intervals_json_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut params = small_params(Workload::ReadWrite);
    params.time_s = 2.5;
    params.report_interval_s = 0.5;
    let mut p = plan(dir.path(), params, vec![]);
    p.options.set("flush_policy", "classic").unwrap();
    p.option_changes = vec![
        "1s:flush_policy=steady".parse().unwrap(),
        "1s:io_capacity=300".parse().unwrap(),
    ];
    let (report, lines) = run_with_lines(&p);
    let run = &report.runs[0];
    // A failed transaction other than a deadlock or lock wait timeout
    // (which are retried, as sysbench does) would have failed the run.
    assert!(run.summary.transactions > 0);
    assert_eq!(run.option_changes.len(), 2, "{:?}", run.option_changes);
    for c in &run.option_changes {
        let applied = c.applied_at_s.unwrap();
        assert!((1.0..1.5).contains(&applied), "{c}: applied at {applied} s");
    }
    let note = lines
        .iter()
        .position(|l| l.contains("] set flush_policy = steady"))
        .unwrap_or_else(|| panic!("no option change line: {lines:#?}"));
    assert!(lines[note - 1].starts_with("[ 1s ]"), "{lines:#?}");
    assert!(
        lines[note + 1].contains("] set io_capacity = 300"),
        "{lines:#?}"
    );
    // Classic publishes no steady levels; steady does, within an interval
    // of the switch (the cleaners are woken for it).
    let (before, after): (Vec<_>, Vec<_>) = run.intervals.iter().partition(|i| i.t_s < 1.01);
    assert!(before.iter().all(|i| i.setpoint == 0), "{before:?}");
    assert!(after.iter().skip(1).all(|i| i.setpoint > 0), "{after:?}");

    let v = serde_json::to_value(&report).unwrap();
    let changes = &v["runs"][0]["option_changes"];
    assert_eq!(changes[0]["key"], "flush_policy");
    assert_eq!(changes[0]["value"], "steady");
    assert_eq!(changes[1]["at_s"], 1.0);

    let page = oltp::render_html(&report);
    assert!(page.contains(">flush_policy=steady; io_capacity=300</text>"));
    assert!(page.contains("<code>flush_policy=steady; io_capacity=300</code>"));

    // Every row the run wrote agrees with its index.
    let db = Db::open(dir.path().join("db"), small_options()).unwrap();
    assert_index_matches_rows(&db, 2);
    db.close().unwrap();
}

#[test]
fn bad_option_change_schedules_are_rejected_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    for (changes, needle) in [
        (
            &["0.6s:io_capacity=300"][..],
            "`0.6s:io_capacity=300` is not before the end",
        ),
        (
            &["0.5:io_capacity=300", "0.2:io_capacity=400"],
            "give the changes in time order",
        ),
        (&["0.2:io_capacity=20"], "below InnoDB's minimum"),
        (
            &["0.2:flush_policy=fast"],
            "`0.2s:flush_policy=fast` in run",
        ),
    ] {
        let mut p = plan(dir.path(), small_params(Workload::ReadWrite), vec![]);
        p.option_changes = changes.iter().map(|c| c.parse().unwrap()).collect();
        let e = oltp::run_plan(&p, &mut quiet).unwrap_err().to_string();
        assert!(
            e.contains("--set-at") && e.contains(needle),
            "{changes:?}: {e}"
        );
        assert!(!dir.path().join("db").exists(), "{changes:?}: work started");
    }
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

/// The texts of the x axis's tick labels of every chart of `page`.
fn x_ticks(page: &str) -> Vec<f64> {
    page.split("class=\"xtick\">")
        .skip(1)
        .filter_map(|t| t.split('<').next())
        .map(|t| t.parse().unwrap())
        .collect()
}

#[test]
fn html_report_is_self_contained_and_every_chart_renders_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let vary = vec!["threads=2,4".parse().unwrap()];
    let mut params = small_params(Workload::ReadWrite);
    params.time_s = 0.8;
    let mut p = plan(dir.path(), params, vary);
    p.options.set("device", "nvme").unwrap();
    // Two changes close together: their labels must not overprint.
    p.device_changes = vec![
        "0.4:sata-ssd".parse().unwrap(),
        "0.45:nvme".parse().unwrap(),
    ];
    let report = oltp::run_plan(&p, &mut quiet).unwrap();
    // Two runs: the checkpoint chart once per run.
    let n_charts = oltp::CHART_TITLES.len() + 1;
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
    assert_eq!(page.matches("<svg xmlns").count(), n_charts);
    for t in oltp::CHART_TITLES {
        assert!(page.contains(&format!("<title>{t}")), "chart `{t}` missing");
    }
    for r in &report.runs {
        let t = format!("<title>Checkpoint age and its marks: {}</title>", r.label);
        assert!(page.contains(&t), "{t} missing");
    }
    assert!(page.contains("threads=2") && page.contains("threads=4"));
    // Both runs had the same changes: two markers per chart.
    assert_eq!(page.matches("<g class=\"marker\">").count(), 2 * n_charts);
    assert!(
        page.contains("time since the measurement started (s)") && page.contains("transactions/s")
    );
    // The verdict comes first, a row per run; a sentence under each chart.
    assert!(page.contains("</h1><table class=\"verdict\">"), "{page}");
    let verdict = page.split("<table class=\"verdict\">").nth(1).unwrap();
    let verdict = verdict.split("</table>").next().unwrap();
    assert_eq!(verdict.matches("<tr>").count(), 1 + report.runs.len());
    assert!(verdict.contains("class=\"best\""), "{verdict}");
    assert_eq!(
        page.matches("<figcaption class=\"look\">Look ").count(),
        n_charts
    );
    // The time axis ends at the runs' length, not at a round number past it.
    let length = report
        .runs
        .iter()
        .flat_map(|r| r.intervals.iter().map(|i| i.t_s))
        .chain(report.runs.iter().map(|r| r.summary.time_s))
        .fold(0.0, f64::max);
    let ticks = x_ticks(&page);
    assert!(!ticks.is_empty());
    assert!(
        ticks.iter().all(|&t| t <= length),
        "{ticks:?} past {length}"
    );

    for (title, v) in chromium_check(dir.path(), &page, n_charts).unwrap_or_default() {
        assert!(v[2] >= 2, "chart `{title}` drew {} lines with extent", v[2]);
        assert_eq!(v[3], 2, "chart `{title}`: device change markers not drawn");
    }
    if let Some(l) = layout_check(dir.path(), &page, "two-runs") {
        assert_eq!(l.groups, n_charts + 1);
        assert!(l.labels > 20 * n_charts, "only {} labels", l.labels);
    }

    // The default report, one run: one checkpoint chart, nothing marked
    // best.
    let mut one = report.clone();
    one.runs.truncate(1);
    let page = oltp::render_html(&one);
    assert_eq!(page.matches("<svg xmlns").count(), oltp::CHART_TITLES.len());
    assert!(page.contains("<title>Checkpoint age and its marks</title>"));
    assert!(page.contains("</h1><table class=\"verdict\">"));
    assert!(!page.contains("class=\"best\""));
    chromium_check(dir.path(), &page, oltp::CHART_TITLES.len());
    if let Some(l) = layout_check(dir.path(), &page, "one-run") {
        assert_eq!(l.groups, oltp::CHART_TITLES.len() + 1);
    }
}

/// Whether Chromium is there to render the pages; says so on stderr when
/// it is not.
fn have_chromium(what: &str) -> bool {
    if Path::new(CHROMIUM).exists() {
        return true;
    }
    eprintln!("SKIPPED: {what} ({CHROMIUM} is not installed; apt-get install chromium)");
    false
}

/// Run headless Chromium on `page` with `args`, its profile in `dir`.
fn run_chromium(dir: &Path, page: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("timeout")
        .arg("120")
        .arg(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
        ])
        .args(args)
        .arg(format!("file://{}", page.display()))
        .env("HOME", dir)
        .output()
        .unwrap()
}

/// Load `page` (with `script` injected) in headless Chromium with
/// `--dump-dom` and return the value the script left in `attr` on the
/// body.
fn dom_check(dir: &Path, page: &str, script: &str, attr: &str, args: &[&str]) -> String {
    let probe = dir.join(format!("probe-{attr}.html"));
    std::fs::write(&probe, page.replace("</body>", &format!("{script}</body>"))).unwrap();
    let mut all = vec!["--dump-dom"];
    all.extend_from_slice(args);
    let out = run_chromium(dir, &probe, &all);
    let dom = String::from_utf8_lossy(&out.stdout);
    dom.split(&format!("{attr}=\""))
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or_else(|| {
            panic!(
                "Chromium did not run the check: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .to_string()
}

/// Render `page` in headless Chromium with [`CHECK_SCRIPT`], check that
/// each of its `n_charts` charts is there and rendered larger than
/// 100 × 100 px, and return, for every chart, its title and [width,
/// height, lines with extent, upright markers]; `None` (said on stderr)
/// when Chromium is missing.
fn chromium_check(dir: &Path, page: &str, n_charts: usize) -> Option<Vec<(String, Vec<u32>)>> {
    if !have_chromium("the Chromium rendering check of the oltp report") {
        return None;
    }
    let check = dom_check(dir, page, CHECK_SCRIPT, "data-check", &[]);
    let charts: Vec<(String, Vec<u32>)> = check
        .split('|')
        .map(|c| {
            let (title, dims) = c.rsplit_once('=').unwrap();
            let v = dims.split('x').map(|n| n.parse().unwrap()).collect();
            (title.to_string(), v)
        })
        .collect();
    assert_eq!(charts.len(), n_charts, "{check}");
    for (title, v) in &charts {
        assert!(
            v[0] > 100 && v[1] > 100,
            "chart `{title}` rendered at {v:?}"
        );
    }
    Some(charts)
}

/// Injected into a copy of the page for the layout check at 1280 px:
/// gathers the boxes of every text label (each chart's SVG `<text>`s, its
/// legend entries and caption; the verdict table's cells and caption) and
/// records the window's width, the page's height, how many groups and
/// labels it looked at, and every problem: two labels of one figure (or of
/// the verdict) that overlap, an SVG label outside its SVG, a legend entry
/// or caption over the chart, text spilling out of its legend entry,
/// caption or cell, a verdict wider than the window, figures that
/// overlap. HTML text is measured as its Range's box (its glyphs), not its
/// element's.
const LAYOUT_SCRIPT: &str = "<script>window.addEventListener('load',()=>{\
const P=[];let groups=0,labels=0;\
const box=r=>({l:r.left,t:r.top,r:r.right,b:r.bottom});\
const R=e=>box(e.getBoundingClientRect());\
const T=e=>{const g=document.createRange();g.selectNodeContents(e);return box(g.getBoundingClientRect());};\
const N=e=>(e.textContent||'').trim().slice(0,48);\
const ov=(a,b)=>Math.min(a.r,b.r)-Math.max(a.l,b.l)>1&&Math.min(a.b,b.b)-Math.max(a.t,b.t)>1;\
const inside=(a,o)=>a.l>=o.l-1&&a.r<=o.r+1&&a.t>=o.t-1&&a.b<=o.b+1;\
const S=b=>'['+[b.l,b.t,b.r,b.b].map(Math.round).join(',')+']';\
const pairs=(g,items)=>{groups++;labels+=items.length;for(let i=0;i<items.length;i++)for(let j=0;j<i;j++)\
if(ov(items[i].b,items[j].b))P.push(g+': '+items[i].n+S(items[i].b)+' overlaps '+items[j].n+S(items[j].b));};\
const html=(g,items,e,what)=>{const b=T(e);items.push({n:what+' '+N(e),b});\
if(!inside(b,R(e)))P.push(g+': '+what+' '+N(e)+S(b)+' spills out of its box'+S(R(e)));return b;};\
for(const f of document.querySelectorAll('figure')){const svg=f.querySelector('svg.chart');\
const g=svg.querySelector('title').textContent;const sb=R(svg);const items=[];\
for(const t of svg.querySelectorAll('text')){const b=R(t);if(b.r-b.l<=0)continue;items.push({n:'text '+N(t),b});\
if(!inside(b,sb))P.push(g+': text '+N(t)+S(b)+' outside its SVG'+S(sb));}\
for(const e of f.querySelectorAll('.legend li, figcaption')){const b=html(g,items,e,e.tagName=='LI'?'legend':'caption');\
if(ov(b,sb))P.push(g+': '+N(e)+S(b)+' over the chart'+S(sb));}\
pairs(g,items);}\
const figs=[...document.querySelectorAll('figure')];\
for(let i=0;i<figs.length;i++)for(let j=0;j<i;j++)if(ov(R(figs[i]),R(figs[j])))P.push('figures '+i+' and '+j+' overlap');\
const v=document.querySelector('table.verdict');if(!v){P.push('no verdict table');}else{const items=[];\
for(const c of v.querySelectorAll('caption, th, td'))html('verdict',items,c,c.tagName.toLowerCase());\
pairs('verdict',items);if(R(v).r>document.documentElement.clientWidth)P.push('the verdict is wider than the window');}\
const clean=s=>s.replace(/[^A-Za-z0-9 .,:;=()\\[\\]\\/+%_-]/g,'?');\
document.body.setAttribute('data-layout','width='+window.innerWidth+';height='+document.documentElement.scrollHeight+\
';groups='+groups+';labels='+labels+';problems='+P.map(clean).join(' | '));});</script>";

/// What [`layout_check`] found.
struct Layout {
    /// Figures (charts) and the verdict table checked.
    groups: usize,
    /// Labels checked.
    labels: usize,
}

/// Load `page` in headless Chromium in a 1280 px wide window and check
/// with [`LAYOUT_SCRIPT`] that no two labels of a chart or of the verdict
/// overlap and none spills out of its SVG or box; then save a screenshot
/// of the whole page as `NAME-1280.png` in `dir`. `None` (said on stderr)
/// without Chromium.
fn layout_check(dir: &Path, page: &str, name: &str) -> Option<Layout> {
    if !have_chromium("the layout check of the oltp report at 1280 px") {
        return None;
    }
    let found = dom_check(
        dir,
        page,
        LAYOUT_SCRIPT,
        "data-layout",
        &["--window-size=1280,1000"],
    );
    let field = |k: &str| {
        found
            .split(';')
            .find_map(|f| f.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k} in {found}"))
            .to_string()
    };
    assert_eq!(field("width"), "1280", "{found}");
    let problems = field("problems");
    assert!(
        problems.is_empty(),
        "{name}: labels overlap or spill at 1280 px:\n{}",
        problems.replace(" | ", "\n")
    );
    let height: u32 = field("height").parse().unwrap();
    let shot = dir.join(format!("{name}-1280.png"));
    let page_path = dir.join(format!("{name}.html"));
    std::fs::write(&page_path, page).unwrap();
    let out = run_chromium(
        dir,
        &page_path,
        &[
            &format!("--screenshot={}", shot.display()),
            &format!("--window-size=1280,{}", height.clamp(600, 16_000)),
        ],
    );
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(
        size > 10_000,
        "{name}: no screenshot at {} ({size} bytes): {}",
        shot.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{name}: screenshot at 1280 px in {}", shot.display());
    Some(Layout {
        groups: field("groups").parse().unwrap(),
        labels: field("labels").parse().unwrap(),
    })
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
            one.runs[0].summary.not_measured =
                vec!["peak_rss_bytes".into(), "sync_flush_wait_ms".into()];
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
    // The verdict: InnoDB's writer pause is not measured, so n/a and
    // never the best.
    let verdict = page.split("<table class=\"verdict\">").nth(1).unwrap();
    let verdict = verdict.split("</table>").next().unwrap();
    let innodb_row = verdict.split("<tr>").nth(4).unwrap();
    assert!(
        innodb_row.starts_with("<td>innodb: read_write</td>"),
        "{verdict}"
    );
    assert!(
        innodb_row.ends_with("<td class=\"na\">n/a</td></tr>"),
        "{verdict}"
    );
    // Three runs: three checkpoint charts instead of one.
    let n_charts = oltp::CHART_TITLES.len() + 2;
    for (title, v) in chromium_check(dir.path(), &page, n_charts).unwrap_or_default() {
        assert!(v[2] >= 3, "chart `{title}` drew {} lines with extent", v[2]);
    }
    if let Some(l) = layout_check(dir.path(), &page, "merged") {
        assert_eq!(l.groups, n_charts + 1);
    }
}
