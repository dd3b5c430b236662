#![allow(clippy::unwrap_used)]
//! `keel bench oltp --engine`: an engine this build lacks, and Keel-only
//! flags and options given to another engine, are refused with an error
//! that names them, before any work; a short run on another engine writes
//! the same JSON as Keel's, naming the engine and what it does not measure.

mod common;

use common::keel_in;
use keel_bench::oltp::Engine;

/// Workload flags every engine takes (no engine option but Keel's defaults).
const TINY: &[&str] = &[
    "--tables",
    "2",
    "--table-size",
    "500",
    "--threads",
    "2",
    "--time",
    "1",
    "--report-interval",
    "0.5",
];

fn other_engine() -> Option<Engine> {
    Engine::ALL
        .into_iter()
        .find(|e| *e != Engine::Keel && e.built())
}

#[test]
fn an_engine_not_built_is_refused_naming_its_cargo_feature() {
    let dir = tempfile::tempdir().unwrap();
    let missing: Vec<Engine> = Engine::ALL.into_iter().filter(|e| !e.built()).collect();
    if missing.is_empty() {
        eprintln!("SKIPPED: every engine is in this build");
    }
    for e in missing {
        let mut args = vec!["bench", "oltp", "--engine", e.name(), "--report", "rep"];
        args.extend(TINY);
        let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
        assert!(!ok, "{e} accepted: {out}");
        assert!(
            out.contains(&format!("`{e}` is not in this build"))
                && out.contains(&format!("--features {e}")),
            "{e}: {out}"
        );
        assert!(!out.contains("prepare"), "{e}: work started: {out}");
    }
    let (ok, out) = keel_in(dir.path(), &["bench", "oltp", "--engine", "mysql"]).ok_and_text();
    assert!(
        !ok && out.contains("mysql") && out.contains("rocksdb"),
        "{out}"
    );
}

#[test]
fn keel_only_flags_and_options_are_refused_for_another_engine_before_any_work() {
    let Some(e) = other_engine() else {
        eprintln!("SKIPPED: no engine but Keel in this build");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("k.toml");
    std::fs::write(&toml, "io_capacity = 400\n").unwrap();
    for (extra, needle) in [
        (vec!["--set", "flush_policy=classic"], "flush_policy"),
        (vec!["--set", "io-capacity=300"], "io_capacity"),
        (vec!["--config", toml.to_str().unwrap()], "io_capacity"),
        (vec!["--vary", "page_cleaners=1,2"], "page_cleaners"),
        (vec!["--device", "nvme"], "--device"),
        (vec!["--device-change", "0.5:nvme"], "--device-change"),
        (vec!["--prepare-set", "device=unlimited"], "--prepare-set"),
        (vec!["--preset", "disaster-55"], "--preset"),
        (vec!["--preset", "showdown"], "--preset"),
    ] {
        let mut args = vec!["bench", "oltp", "--engine", e.name(), "--report", "rep"];
        args.extend(TINY);
        args.extend(extra.iter());
        let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
        assert!(!ok, "{extra:?} accepted: {out}");
        assert!(
            out.contains(needle) && out.contains("Keel only") && out.contains(e.name()),
            "{extra:?}: {out}"
        );
        assert!(!out.contains("prepare "), "{extra:?}: work started: {out}");
    }
    // LMDB has no cache: its size is refused.
    if Engine::Lmdb.built() {
        let mut args = vec!["bench", "oltp", "--engine", "lmdb", "--report", "rep"];
        args.extend(TINY);
        args.extend(["--set", "buffer_pool_size=8MiB"]);
        let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
        assert!(!ok && out.contains("buffer_pool_size"), "{out}");
    }
}

#[test]
fn another_engine_runs_the_workload_and_writes_the_same_json() {
    let Some(e) = other_engine() else {
        eprintln!("SKIPPED: no engine but Keel in this build");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "bench",
        "oltp",
        "--engine",
        e.name(),
        "--json",
        "out.json",
        "--report",
        "rep",
        "--datadir",
        "data",
        "--set",
        "buffer_pool_size=2MiB",
        "--vary",
        "threads=1,2",
    ];
    args.extend(TINY);
    let (ok, out) = keel_in(dir.path(), &args).ok_and_text();
    assert!(ok, "{out}");
    assert!(
        out.contains(&format!("keel bench oltp read_write on {e}:")),
        "{out}"
    );
    assert!(
        out.contains("] thds: 2 tps: ") && out.contains("| disk "),
        "{out}"
    );
    assert!(!out.contains("KEEL ENGINE STATUS"), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("out.json")).unwrap())
            .unwrap();
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for run in runs {
        assert_eq!(run["engine"], e.name());
        assert!(run["summary"]["transactions"].as_u64().unwrap() > 0);
        let nm = run["summary"]["not_measured"].as_array().unwrap();
        assert!(nm.iter().any(|f| f == "checkpoint_age"), "{nm:?}");
    }
    assert!(dir.path().join("rep/index.html").exists());
    // The help names the engines and what applies to them.
    let (ok, help) = keel_in(dir.path(), &["bench", "oltp", "--help"]).ok_and_text();
    assert!(ok, "{help}");
    assert!(
        help.contains("--engine <ENGINE>")
            && help.contains("Engines (--engine)")
            && help.contains("flush_log_at_trx_commit")
            && help.contains("apply to Keel only"),
        "{help}"
    );
}
