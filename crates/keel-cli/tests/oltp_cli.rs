#![allow(clippy::unwrap_used)]
//! `keel bench oltp` end to end with tiny tables and a second of running.

mod common;

use common::{keel_in, tiny_oltp_flags};

#[test]
fn bench_oltp_prints_interval_lines_status_and_writes_json_csv_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "bench",
        "oltp",
        "--json",
        "out.json",
        "--csv",
        "out.csv",
        "--report",
        "rep",
        "--prewarm",
    ];
    args.extend(tiny_oltp_flags("4", "1"));
    let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
    assert!(ok, "{out}");
    assert!(out.contains("prewarm: read "), "{out}");
    assert!(
        out.contains("] thds: 4 tps: ") && out.contains("ckpt age"),
        "{out}"
    );
    assert!(
        out.contains("KEEL ENGINE STATUS") && out.contains("Last checkpoint at"),
        "{out}"
    );
    assert!(out.contains("latency (ms): avg"), "{out}");
    let json = std::fs::read_to_string(dir.path().join("out.json")).unwrap();
    assert!(json.contains("\"version\": 1"), "{json}");
    assert!(json.contains("\"buffer_pool_size\": 1048576"), "{json}");
    assert!(json.contains("\"flush_policy\": \"steady\""), "{json}");
    // InnoDB's default isolation level, recorded per run.
    assert!(
        json.contains("\"isolation\": \"REPEATABLE-READ\""),
        "{json}"
    );
    assert!(
        out.contains("History list length") && out.contains("isolation REPEATABLE-READ"),
        "{out}"
    );
    assert!(!json.contains("\"preset\""), "{json}");
    assert!(
        json.contains("\"intervals\": [") && json.contains("\"tps_p01\""),
        "{json}"
    );
    let csv = std::fs::read_to_string(dir.path().join("out.csv")).unwrap();
    assert!(csv.lines().count() >= 3, "{csv}");
    assert!(dir.path().join("rep/index.html").exists());
    // The temporary data directory is gone.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("keel-oltp-"))
        .collect();
    assert!(left.is_empty(), "temporary data directory left behind");

    // `keel report` merges it with a copy of itself, as two invocations.
    std::fs::copy(dir.path().join("out.json"), dir.path().join("again.json")).unwrap();
    let args = ["report", "out.json", "again.json", "--out", "merged"];
    let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
    assert!(ok, "{out}");
    assert!(
        out.contains("out: read_write") && out.contains("again: read_write"),
        "{out}"
    );
    assert!(out.contains("2 runs from 2 files"), "{out}");
    for f in ["index.html", "report.json", "summary.txt"] {
        assert!(dir.path().join("merged").join(f).exists(), "{f} missing");
    }
    std::fs::write(dir.path().join("bad.json"), "{}").unwrap();
    let run = keel_in(dir.path(), &["report", "bad.json", "--out", "m2"]);
    assert!(!run.ok());
    assert!(
        run.stderr
            .contains("bad.json is not a keel bench oltp JSON report"),
        "{}",
        run.stderr
    );
}

/// `--set` passes any engine option through: the isolation level of the
/// workload's transactions, shown in the header line and the status
/// report and recorded in the JSON; a level Keel does not offer is refused
/// before any work.
#[test]
fn set_transaction_isolation_runs_the_workload_at_that_level() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "bench",
        "oltp",
        "--json",
        "out.json",
        "--report",
        "rep",
        "--set",
        "transaction_isolation=READ-COMMITTED",
    ];
    args.extend(tiny_oltp_flags("2", "1"));
    let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
    assert!(ok, "{out}");
    assert!(out.contains("isolation READ-COMMITTED"), "{out}");
    assert!(out.contains("Isolation level     READ-COMMITTED"), "{out}");
    let json = std::fs::read_to_string(dir.path().join("out.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let run = &v["runs"][0];
    assert_eq!(run["isolation"], "READ-COMMITTED", "{json}");
    assert_eq!(run["options"]["transaction_isolation"], "READ-COMMITTED");
    assert!(run["summary"]["transactions"].as_u64().unwrap() > 0);

    let mut args = vec![
        "bench",
        "oltp",
        "--report",
        "rep2",
        "--set",
        "transaction_isolation=SERIALIZABLE",
    ];
    args.extend(tiny_oltp_flags("2", "1"));
    let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
    assert!(!ok, "SERIALIZABLE accepted: {out}");
    assert!(
        out.contains("transaction_isolation") && out.contains("SERIALIZABLE is not supported"),
        "{out}"
    );
    assert!(!out.contains("prepare"), "work started: {out}");
}

#[test]
fn bench_oltp_rejects_bad_options_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, needle) in [
        (vec!["--set", "no_such_knob=1"], "no_such_knob"),
        (vec!["--set", "buffer_pool_size=lots"], "buffer_pool_size"),
        (vec!["--vary", "page_cleaners=1,many"], "page_cleaners"),
        (vec!["--vary", "threads"], "threads"),
        (vec!["--device", "iops=fast"], "device"),
        (vec!["--workload", "oltp_bogus"], "bogus"),
        (vec!["--threads", "0"], "threads"),
        (vec!["--preset", "disaster-56"], "disaster-55"),
        (vec!["--prepare-set", "page_size=8192"], "page_size"),
        (vec!["--prewarm=maybe"], "maybe"),
    ] {
        let mut args = vec!["bench", "oltp", "--report", "rep"];
        args.extend(tiny_oltp_flags("4", "1"));
        args.extend(extra.iter());
        let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
        assert!(!ok, "{extra:?} accepted: {out}");
        assert!(out.contains(needle), "{extra:?}: {out}");
        assert!(!out.contains("prepare"), "{extra:?}: work started: {out}");
    }
}

#[test]
fn bad_device_changes_are_rejected_naming_the_flag_and_the_value_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, value, needle) in [
        (
            &["--device-change", "60s"][..],
            "`60s`",
            "the SPEC is missing",
        ),
        (
            &["--device-change", "abc:sata-ssd"],
            "`abc`",
            "is not a time",
        ),
        (&["--device-change", "1m:ssd"], "`ssd`", "is neither"),
        (
            &["--device-change", "0.5s:iops=fast"],
            "`iops=fast`",
            "iops",
        ),
        (
            &["--device-change", "5s:sata-ssd"],
            "`5s:sata-ssd`",
            "not before the end",
        ),
        (
            &[
                "--device-change",
                "0.6:nvme",
                "--device-change",
                "0.2:sata-ssd",
            ],
            "`0.2s:sata-ssd`",
            "time order",
        ),
    ] {
        let mut args = vec!["bench", "oltp", "--report", "rep", "--device", "nvme"];
        args.extend(tiny_oltp_flags("2", "1"));
        args.extend(extra.iter());
        let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
        assert!(!ok, "{extra:?} accepted: {out}");
        assert!(
            out.contains("--device-change") && out.contains(value) && out.contains(needle),
            "{extra:?}: {out}"
        );
        assert!(!out.contains("prepare"), "{extra:?}: work started: {out}");
    }
    // The default device has no model to change.
    let mut args = vec!["bench", "oltp", "--report", "rep"];
    args.extend(tiny_oltp_flags("2", "1"));
    args.extend(["--device-change", "0.5:nvme"]);
    let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
    assert!(
        !ok && out.contains("--device-change") && out.contains("device = unlimited"),
        "{out}"
    );
    let (ok, help) = keel_in(dir.path(), &["bench", "oltp", "--help"]).ok_and_text();
    assert!(ok, "{help}");
    assert!(
        help.contains("--device-change <AT:SPEC>")
            && help.contains("--device-change 60s:sata-ssd,iops=7500,bw=117MiB")
            && help.contains("at or after --time is an error"),
        "{help}"
    );
}

#[test]
fn set_at_switches_the_policy_mid_run_and_refuses_what_cannot_change() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "bench",
        "oltp",
        "--json",
        "out.json",
        "--set",
        "flush_policy=classic",
        "--set-at",
        "500ms:flush_policy=steady",
        "--set-at",
        "500ms:io_capacity=1000",
    ];
    args.extend(tiny_oltp_flags("2", "1"));
    let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
    assert!(ok, "{out}");
    assert!(out.contains("] set flush_policy = steady"), "{out}");
    assert!(out.contains("] set io_capacity = 1000"), "{out}");
    let text = std::fs::read_to_string(dir.path().join("out.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let c = &v["runs"][0]["option_changes"];
    assert_eq!(c[0]["value"], "steady");
    assert_eq!(c[1]["key"], "io_capacity");
    // The options recorded are the ones the run started with.
    assert_eq!(v["runs"][0]["options"]["flush_policy"], "classic");

    for (extra, needle) in [
        (
            &["--set-at", "1s:page_size=8192"][..],
            "`page_size` needs a restart",
        ),
        (
            &["--set-at", "1s:io_capactiy=300"],
            "`io_capactiy` is not an option",
        ),
        (&["--set-at", "1s:device=nvme"], "--device-change"),
        (
            &["--set-at", "1s:fill_factor=70"],
            "read only when a bulk load starts",
        ),
        (&["--set-at", "5s:io_capacity=300"], "not before the end"),
        (
            &["--set-at", "0.5s:io_capacity=50"],
            "below InnoDB's minimum",
        ),
        (
            &["--engine", "sqlite", "--set-at", "0.5s:io_capacity=300"],
            "--set-at applies to Keel only",
        ),
    ] {
        let mut args = vec!["bench", "oltp"];
        args.extend(tiny_oltp_flags("2", "1"));
        args.extend(extra.iter());
        let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
        assert!(!ok, "{extra:?} accepted: {out}");
        assert!(
            out.contains("--set-at") && out.contains(needle),
            "{extra:?}: {out}"
        );
        assert!(!out.contains("prepare"), "{extra:?}: work started: {out}");
    }
    let (ok, help) = keel_in(dir.path(), &["bench", "oltp", "--help"]).ok_and_text();
    assert!(ok, "{help}");
    assert!(
        help.contains("--set-at <AT:KEY=VALUE>")
            && help.contains("--set flush_policy=classic --set-at 60s:flush_policy=steady"),
        "{help}"
    );
}

#[test]
fn a_device_change_prints_a_line_and_lands_in_the_json_and_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "bench",
        "oltp",
        "--json",
        "out.json",
        "--report",
        "rep",
        "--device",
        "nvme",
        "--device-change",
        "500ms:iops=2000",
    ];
    args.extend(tiny_oltp_flags("2", "1"));
    let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
    assert!(ok, "{out}");
    assert!(out.contains("] device -> iops=2000"), "{out}");
    let text = std::fs::read_to_string(dir.path().join("out.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let c = &v["runs"][0]["device_changes"][0];
    assert_eq!(
        (c["at_s"].as_f64(), c["spec"].as_str()),
        (Some(0.5), Some("iops=2000"))
    );
    let page = std::fs::read_to_string(dir.path().join("rep/index.html")).unwrap();
    assert!(
        page.contains("<g class=\"marker\">"),
        "no marker in the report"
    );
}

#[test]
fn preset_list_and_help_describe_every_preset() {
    let dir = tempfile::tempdir().unwrap();
    let (ok, list) = keel_in(dir.path(), &["bench", "oltp", "--preset", "list"]).ok_and_text();
    assert!(ok, "{list}");
    let (ok, help) = keel_in(dir.path(), &["bench", "oltp", "--help"]).ok_and_text();
    assert!(ok, "{help}");
    for name in [
        "disaster-55",
        "neighbors",
        "waves-80",
        "waves-80-fix",
        "waves-80-sweep",
        "waves-80-x4",
        "lru-scan-depth",
    ] {
        let line = list
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("`{name}` not listed:\n{list}"));
        assert!(line.contains("seed "), "{line}");
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("- {name}:"))),
            "`{name}` not in --help:\n{help}"
        );
    }
    // The showdown: what it runs and how long, in both.
    let line = list
        .lines()
        .find(|l| l.trim_start().starts_with("showdown "))
        .unwrap_or_else(|| panic!("`showdown` not listed:\n{list}"));
    assert!(
        line.contains("disaster-55") && line.contains("waves-80-x4") && line.contains("2,000 s"),
        "{line}"
    );
    assert!(
        help.lines()
            .any(|l| l.trim_start().starts_with("- showdown:")),
        "`showdown` not in --help:\n{help}"
    );
    // The field reports are cited by title, author and date, not by a file.
    for cite in [
        "1. \"Disaster: MySQL 5.5 Flushing\", Vadim Tkachenko",
        "2. \"Benchmarks of new innodb_flush_neighbor_pages\", Vadim Tkachenko",
        "4. \"More on Checkpoints in InnoDB MySQL 8\", Vadim Tkachenko",
        "5. \"MySQL LRU Flushing and I/O Capacity\", Daniel Nichter",
    ] {
        assert!(list.contains(cite), "{cite:?} not in:\n{list}");
    }
    assert!(!list.contains("prepare"), "work started: {list}");
    let (ok, out) = keel_in(dir.path(), &["bench", "oltp", "--preset", "nope"]).ok_and_text();
    assert!(
        !ok && out.contains("nope") && out.contains("lru-scan-depth"),
        "{out}"
    );
}

#[test]
fn a_preset_runs_end_to_end_and_flags_and_sets_win_over_it() {
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let (ok, out) = keel_in(
        dir.path(),
        &[
            "bench",
            "oltp",
            "--preset",
            "disaster-55",
            "--time",
            "2",
            "--table-size",
            "2000",
            "--tables",
            "1",
            "--threads",
            "4",
            "--device",
            "unlimited",
            // At most 2,000 transactions (about 8 MiB of redo) in a log
            // large enough that they never reach the free-check limit,
            // whatever the flushing policy does: the test stays fast and
            // shows that --set wins over the preset's log_file_size.
            "--rate",
            "1000",
            "--set",
            "log_file_size=8MiB",
            "--set",
            "flush_method=nosync",
            "--json",
            "out.json",
            "--csv",
            "out.csv",
            "--report",
            "rep",
        ],
    )
    .ok_and_text();
    assert!(ok, "{out}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(
        out.contains(
            "preset disaster-55: seed 1 \"Disaster: MySQL 5.5 Flushing\", Vadim Tkachenko, \
             MySQL Performance Blog (Percona), 18 September 2011: "
        ),
        "{out}"
    );
    assert!(
        out.contains("flush policy classic (io_capacity 100, io_capacity_max 200"),
        "{out}"
    );
    assert!(
        out.contains("] thds: 4 tps: ") && out.contains(" mode "),
        "{out}"
    );
    assert!(
        out.contains("Mode ") && out.contains("free-check limit"),
        "{out}"
    );
    let text = std::fs::read_to_string(dir.path().join("out.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["preset"], "disaster-55");
    assert_eq!(v["preset_settings"]["seed"], 1);
    assert_eq!(v["preset_settings"]["options"]["log_file_size"], "2MiB");
    let run = &v["runs"][0];
    // Given on the command line: the user's values.
    assert_eq!(run["workload"]["threads"], 4);
    assert_eq!(run["workload"]["tables"], 1);
    assert_eq!(run["options"]["device"], "unlimited");
    assert_eq!(run["options"]["log_file_size"], 8 << 20);
    // Not given: the preset's.
    assert_eq!(run["options"]["io_capacity"], 100);
    assert_eq!(run["options"]["flush_neighbors"], 2);
    assert_eq!(run["options"]["flush_log_at_trx_commit"], 2);
    assert_eq!(run["options"]["buffer_pool_size"], 32 << 20);
    assert_eq!(run["workload"]["workload"], "write_only");
    assert_eq!(run["io_capacity_max"], 200);
    assert!(run["summary"]["transactions"].as_u64().unwrap() > 0);
    let overridden = v["preset_settings"]["overridden"].as_array().unwrap();
    for k in ["time", "threads", "device", "log_file_size"] {
        assert!(overridden.iter().any(|o| o == k), "{overridden:?}");
    }
    let csv = std::fs::read_to_string(dir.path().join("out.csv")).unwrap();
    assert!(csv
        .lines()
        .next()
        .unwrap()
        .contains("flush_mode,free_check_waits,free_check_wait_ms,history_len,"));
    let page = std::fs::read_to_string(dir.path().join("rep/index.html")).unwrap();
    assert!(page.contains("preset disaster-55</h1>"), "{page}");
    assert!(page.contains("Disaster: MySQL 5.5 Flushing"));
    assert!(page.contains("(Vadim Tkachenko, MySQL Performance Blog (Percona), 18 September 2011)"));
}

#[test]
fn the_showdown_runs_every_preset_under_both_policies_and_judges_steady() {
    let dir = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let (ok, out) = keel_in(
        dir.path(),
        &[
            "bench",
            "oltp",
            "--preset",
            "showdown",
            // Every flag wins over every preset: 20 runs of half a second
            // on tiny tables, an unthrottled device and a log the runs
            // never fill (about 15 s in all).
            "--time",
            "0.5",
            "--report-interval",
            "0.25",
            "--tables",
            "1",
            "--table-size",
            "1000",
            "--threads",
            "2",
            "--rate",
            "500",
            "--device",
            "unlimited",
            "--set",
            "log_file_size=8MiB",
            "--set",
            "flush_method=nosync",
            "--datadir",
            "data",
            "--json",
            "runs.json",
            "--csv",
            "runs.csv",
            "--report",
            "rep",
        ],
    )
    .ok_and_text();
    assert!(ok, "{out}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    let presets = [
        "disaster-55",
        "neighbors",
        "waves-80",
        "waves-80-sweep",
        "waves-80-x4",
        "lru-scan-depth",
    ];
    let index = std::fs::read_to_string(dir.path().join("rep/index.html")).unwrap();
    let text = std::fs::read_to_string(dir.path().join("rep/showdown.json")).unwrap();
    let sd: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(sd["presets"].as_array().unwrap().len(), presets.len());
    assert!(sd["pending"].as_array().unwrap().is_empty());
    assert!(
        out.contains("showdown PASS") || out.contains("showdown FAIL"),
        "{out}"
    );
    for (i, name) in presets.iter().enumerate() {
        assert!(out.contains(&format!("=== showdown {}/6: {name} ===", i + 1)));
        // Its own report, linked from the summary page, and its own data.
        let page = std::fs::read_to_string(dir.path().join(format!("rep/{name}/index.html")))
            .unwrap_or_else(|e| panic!("{name}'s report: {e}"));
        assert!(page.contains(&format!("preset {name}</h1>")), "{name}");
        assert!(
            index.contains(&format!("<a href=\"{name}/index.html\">")),
            "{name} not linked"
        );
        assert!(dir.path().join("data").join(name).is_dir(), "{name}'s data");
        let p = &sd["presets"][i];
        assert_eq!(p["preset"], *name);
        assert_eq!(p["report"], format!("{name}/index.html"));
        assert!(p["pass"].is_boolean());
        // Both policies ran, on the command line's settings.
        let text = std::fs::read_to_string(dir.path().join(format!("runs-{name}.json")))
            .unwrap_or_else(|e| panic!("runs-{name}.json: {e}"));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["preset"], *name);
        let runs = v["runs"].as_array().unwrap();
        for policy in ["classic", "steady"] {
            assert!(
                runs.iter().any(|r| r["options"]["flush_policy"] == policy),
                "{name}: no {policy} run"
            );
        }
        for r in runs {
            assert_eq!(r["options"]["device"], "unlimited", "{name}");
            assert_eq!(r["workload"]["time_s"], 0.5, "{name}");
        }
        let steady = runs
            .iter()
            .filter(|r| r["options"]["flush_policy"] == "steady")
            .count();
        assert_eq!(p["steady"].as_array().unwrap().len(), steady, "{name}");
        assert!(dir.path().join(format!("runs-{name}.csv")).exists());
    }
    // The preset's own axes combine with the policies'.
    assert_eq!(sd["presets"][3]["runs"].as_array().unwrap().len(), 8);
    assert_eq!(sd["presets"][1]["runs"].as_array().unwrap().len(), 6);
    // The comparisons: disaster-55 against 1.5 × classic, the sweep
    // against its best classic run.
    let last_check = |i: usize| sd["presets"][i]["steady"][0]["checks"][4]["criterion"].clone();
    assert_eq!(last_check(0), "tps avg at least 1.5 × classic's");
    assert_eq!(last_check(3), "tps avg at least the best classic run's");
    // The user's own --vary flush_policy replaces the showdown's.
    let (ok, out) = keel_in(
        dir.path(),
        &[
            "bench",
            "oltp",
            "--preset",
            "showdown",
            "--vary",
            "flush_policy=steady,bogus",
            "--report",
            "rep2",
        ],
    )
    .ok_and_text();
    assert!(!ok && out.contains("bogus"), "{out}");
    assert!(!out.contains("prepare"), "work started: {out}");
}

#[test]
fn hold_view_holds_a_read_view_the_history_list_grows_behind_and_refuses_bad_schedules() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "bench",
        "oltp",
        "--json",
        "out.json",
        "--report",
        "rep",
        "--hold-view",
        "0.5:1.5",
    ];
    args.extend(tiny_oltp_flags("2", "3"));
    let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
    assert!(ok, "{out}");
    assert!(out.contains("] view opened (REPEATABLE-READ"), "{out}");
    assert!(out.contains("] view released (held "), "{out}");
    let text = std::fs::read_to_string(dir.path().join("out.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let run = &v["runs"][0];
    let view = &run["hold_view"];
    assert_eq!(
        (view["at_s"].as_f64(), view["for_s"].as_f64()),
        (Some(0.5), Some(1.5))
    );
    let opened = view["opened_at_s"].as_f64().unwrap();
    let released = view["released_at_s"].as_f64().unwrap();
    assert!((0.5..1.0).contains(&opened), "{view}");
    assert!((2.0..2.9).contains(&released), "{view}");
    assert!(view.get("until_end").is_none(), "{view}");
    // Sampled while the view was held: history not purged, and the view
    // as the oldest one.
    let held: Vec<&serde_json::Value> = run["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| {
            let t = i["t_s"].as_f64().unwrap();
            t > opened + 0.25 && t < released
        })
        .collect();
    assert!(!held.is_empty(), "{text}");
    for i in &held {
        assert!(i["history_len"].as_u64().unwrap() > 0, "{i}");
        assert!(i["read_views_open"].as_u64().unwrap() >= 1, "{i}");
    }
    assert!(
        held.iter()
            .any(|i| i["oldest_view_age_ms"].as_u64().unwrap() >= 500),
        "{held:?}"
    );
    let html = std::fs::read_to_string(dir.path().join("rep/index.html")).unwrap();
    assert!(
        html.contains("view opened") && html.contains("view released"),
        "no markers"
    );
    assert!(html.contains("History list length"));

    // Past the end: held until the run ends, and said so before it starts.
    let mut args = vec!["bench", "oltp", "--json", "end.json", "--report", "rep2"];
    args.extend(tiny_oltp_flags("2", "1"));
    args.extend(["--hold-view", "0.5:10s"]);
    let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
    assert!(ok, "{out}");
    assert!(
        out.contains("--hold-view 0.5s:10s") && out.contains("held until the run ends"),
        "{out}"
    );
    assert!(
        out.contains("] view released at the end of the run"),
        "{out}"
    );
    let text = std::fs::read_to_string(dir.path().join("end.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["runs"][0]["hold_view"]["until_end"], true, "{text}");

    for (extra, needle) in [
        (&["--hold-view", "1s:1s"][..], "never be opened"),
        (&["--hold-view", "300"], "is not AT:FOR"),
        (&["--hold-view", "0.5:0"], "FOR must be more than 0"),
        (
            &["--engine", "sqlite", "--hold-view", "0.5:1"],
            "--hold-view (a read view on Keel's Db) applies to Keel only",
        ),
    ] {
        let mut args = vec!["bench", "oltp"];
        args.extend(tiny_oltp_flags("2", "1"));
        args.extend(extra.iter());
        let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
        assert!(!ok, "{extra:?} accepted: {out}");
        assert!(
            out.contains("--hold-view") && out.contains(needle),
            "{extra:?}: {out}"
        );
        assert!(!out.contains("prepare"), "{extra:?}: work started: {out}");
    }
    let (ok, help) = keel_in(dir.path(), &["bench", "oltp", "--help"]).ok_and_text();
    assert!(ok, "{help}");
    assert!(
        help.contains("--hold-view <AT:FOR>")
            && help.contains("forgot to close")
            && help.contains("purge catches up"),
        "{help}"
    );
}
