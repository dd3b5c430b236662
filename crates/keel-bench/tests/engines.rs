#![allow(clippy::unwrap_used)]
//! Every engine in this build passes the same short OLTP run as Keel: a
//! small data set, read_write for two seconds on four threads, no fatal
//! error, transactions committed, and afterwards every `k` index agrees
//! with its rows. The same seed loads the same rows into every engine, and
//! `--reuse-data` finds them again.

use std::path::Path;

use keel::Options;
use keel_bench::oltp::{
    self, index_name, table_name, Database, Engine, Event, OltpParams, Plan, Span, Workload,
};

const TABLES: usize = 2;
const ROWS: u64 = 2_000;

/// Options every engine reads; Keel gets small pages and no syncs too.
fn options(e: Engine) -> Options {
    let mut o = Options::default();
    let mut sets = vec!["buffer_pool_size=4MiB", "flush_log_at_trx_commit=2"];
    if e == Engine::Keel {
        sets.extend([
            "page_size=4096",
            "flush_method=nosync",
            "log_file_size=2MiB",
        ]);
    }
    o.apply_sets(sets).unwrap();
    o
}

fn params(workload: Workload, time_s: f64) -> OltpParams {
    OltpParams {
        workload,
        tables: TABLES,
        table_size: ROWS,
        threads: 4,
        time_s,
        report_interval_s: 0.5,
        ..OltpParams::default()
    }
}

fn plan(e: Engine, dir: &Path, params: OltpParams) -> Plan {
    Plan {
        engine: e,
        params,
        options: options(e),
        vary: vec![],
        datadir: dir.join(e.name()),
        reuse_data: false,
        prepare_sets: vec![],
        preset: None,
        device_changes: vec![],
        option_changes: vec![],
        hold_view: None,
    }
}

/// A tree's entries, in key order.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Every entry of `tree` in key order.
fn entries(db: &dyn Database, tree: &str) -> Entries {
    let id = db.tree(tree, false).unwrap().unwrap();
    let mut session = db.session().unwrap();
    let mut tx = session.begin(false).unwrap();
    let mut out = Vec::new();
    tx.range(id, Span::ALL, &mut |k, v| {
        out.push((k.to_vec(), v.to_vec()))
    })
    .unwrap();
    tx.commit().unwrap();
    out
}

fn passes_the_oltp_run(e: Engine) {
    if !e.built() {
        eprintln!("SKIPPED: engine {e} is not in this build (cargo feature `{e}`)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = plan(e, dir.path(), params(Workload::ReadWrite, 2.0));
    let report = oltp::run_plan(&p, &mut |_| {}).unwrap_or_else(|err| panic!("{e}: {err}"));
    let run = &report.runs[0];
    assert_eq!(run.engine, e.name());
    let s = &run.summary;
    assert!(s.transactions > 0, "{e}: no transactions");
    assert!(s.peak_rss_bytes > 0, "{e}: no peak RSS");
    assert_eq!(s.not_measured.is_empty(), e == Engine::Keel, "{e}");
    assert!(
        run.intervals.len() >= 3,
        "{e}: {} intervals",
        run.intervals.len()
    );
    let line = oltp::interval_line(4, &run.intervals[0], false);
    assert!(line.contains(" tps: "), "{e}: {line}");

    let db = e.open(&p.datadir, &p.options, &p.params).unwrap();
    for n in 1..=TABLES {
        let problems = oltp::index_vs_rows_in(&*db, &table_name(n), &index_name(n)).unwrap();
        assert!(problems.is_empty(), "{e}: {problems:#?}");
        // read_write deletes and inserts the same ids: every row is there.
        assert_eq!(entries(&*db, &table_name(n)).len() as u64, ROWS, "{e}");
    }
    db.close().unwrap();

    // --reuse-data: the tables are found again, nothing is loaded.
    let mut again = plan(e, dir.path(), params(Workload::PointSelect, 0.3));
    again.reuse_data = true;
    let (mut reused, mut prepared) = (false, false);
    oltp::run_plan(&again, &mut |ev| match ev {
        Event::Reused { .. } => reused = true,
        Event::Prepare { .. } => prepared = true,
        _ => {}
    })
    .unwrap();
    assert!(
        reused && !prepared,
        "{e}: reused {reused}, prepared {prepared}"
    );
}

#[test]
fn keel_passes_the_oltp_run() {
    passes_the_oltp_run(Engine::Keel);
}

#[test]
fn sqlite_passes_the_oltp_run() {
    passes_the_oltp_run(Engine::Sqlite);
}

#[test]
fn redb_passes_the_oltp_run() {
    passes_the_oltp_run(Engine::Redb);
}

#[test]
fn lmdb_passes_the_oltp_run() {
    passes_the_oltp_run(Engine::Lmdb);
}

#[test]
fn rocksdb_passes_the_oltp_run() {
    passes_the_oltp_run(Engine::Rocksdb);
}

#[test]
fn the_same_seed_loads_the_same_rows_in_every_engine() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = params(Workload::ReadWrite, 1.0);
    p.table_size = 300;
    let mut first: Option<(Engine, Vec<Entries>)> = None;
    for e in Engine::ALL.into_iter().filter(|e| e.built()) {
        let db = e.open(&dir.path().join(e.name()), &options(e), &p).unwrap();
        assert_eq!(oltp::prepare(&*db, &p, &mut |_, _| {}).unwrap(), 600);
        let trees: Vec<_> = (1..=TABLES)
            .flat_map(|n| [table_name(n), index_name(n)])
            .map(|t| entries(&*db, &t))
            .collect();
        db.close().unwrap();
        assert_eq!(trees[0].len(), 300, "{e}");
        match &first {
            None => first = Some((e, trees)),
            Some((f, want)) => assert!(*want == trees, "{e} holds other rows than {f}"),
        }
    }
}

#[test]
fn options_and_inputs_another_engine_would_ignore_are_refused_before_any_work() {
    let Some(e) = Engine::ALL
        .into_iter()
        .find(|e| *e != Engine::Keel && e.built())
    else {
        eprintln!("SKIPPED: no engine but Keel in this build");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let base = || plan(e, dir.path(), params(Workload::ReadWrite, 1.0));
    let mut p = base();
    p.options.set("flush_policy", "classic").unwrap();
    let err = oltp::run_plan(&p, &mut |_| {}).unwrap_err().to_string();
    assert!(
        err.contains("flush_policy") && err.contains("Keel only"),
        "{err}"
    );
    let mut p = base();
    p.vary = vec!["io_capacity=100,200".parse().unwrap()];
    let err = oltp::run_plan(&p, &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("io_capacity"), "{err}");
    let mut p = base();
    p.prepare_sets = vec!["device=unlimited".into()];
    let err = oltp::run_plan(&p, &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("--prepare-set"), "{err}");
    assert!(!p.datadir.exists(), "work started");
    // A directory holding another engine's database is not shared.
    keel::Db::open(&p.datadir, options(Engine::Keel))
        .unwrap()
        .close()
        .unwrap();
    let err = oltp::run_plan(&base(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("holds a keel database"), "{err}");
    std::fs::remove_dir_all(&p.datadir).unwrap();
    // What every engine reads is taken: a workload axis and the cache size.
    let mut p = base();
    p.vary = vec![
        "threads=1,2".parse().unwrap(),
        "buffer_pool_size=2MiB,4MiB".parse().unwrap(),
    ];
    assert_eq!(p.runs().unwrap().len(), 4);
}
