#![allow(clippy::unwrap_used)]
//! Redo recovery: committed changes that never reached the data files are
//! replayed at the next open; an incomplete log tail is ignored.

mod common;

use keel::Db;

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("value-{i}-{round}-").repeat(4).into_bytes()
}

#[test]
fn committed_rows_survive_a_crash_without_any_page_flush() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = common::small_opts(512);
    opts.max_dirty_pages_pct = 99.0;
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let t = db.create_table("t").unwrap();
    db.flush().unwrap();
    // The cleaners' coordinator held at its tick for the workload, so that
    // the checkpoint stays where `flush` left it: left running on a loaded
    // machine, its rounds once wrote every page and checkpointed to the end
    // before the crash, leaving recovery nothing to replay.
    let hold = db.failpoint("cleaner.tick");
    assert!(
        hold.wait_held(std::time::Duration::from_secs(10)),
        "the coordinator never reached its tick"
    );
    for i in 0..3000u32 {
        t.put(&i.to_be_bytes(), &value(i, 0)).unwrap();
    }
    for i in (0..3000u32).step_by(3) {
        t.delete(&i.to_be_bytes()).unwrap();
    }
    for i in (1..3000u32).step_by(3) {
        t.put(&i.to_be_bytes(), &value(i, 1)).unwrap();
    }
    drop(t);
    // Released just before the crash: stopping the cleaners waits for the
    // coordinator.
    hold.release();
    db.simulate_crash();

    let db = Db::open(dir.path(), opts.clone()).unwrap();
    assert!(db.metrics().get("recovery_page_records_applied").unwrap() > 0);
    let t = db.table("t").unwrap();
    for i in 0..3000u32 {
        let want = match i % 3 {
            0 => None,
            1 => Some(value(i, 1)),
            _ => Some(value(i, 0)),
        };
        assert_eq!(t.get(&i.to_be_bytes()).unwrap(), want, "row {i}");
    }
    t.check().unwrap();
    drop(t);
    db.close().unwrap();
    // A clean shutdown leaves nothing to recover.
    let db = Db::open(dir.path(), opts).unwrap();
    assert_eq!(db.metrics().get("recovery_groups_applied").unwrap(), 0);
    db.close().unwrap();
}

#[test]
fn tiny_log_wraps_many_times_then_crash_and_recover() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = common::small_opts(128);
    opts.log_file_size = 1 << 20;
    opts.log_files_in_group = 1;
    let db = Db::open(dir.path(), opts.clone()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut model = std::collections::BTreeMap::new();
    for round in 0..100u32 {
        for i in 0..500u32 {
            let k = (i * 7919 + round * 13) % 2000;
            let v = value(k, round);
            t.put(&k.to_be_bytes(), &v).unwrap();
            model.insert(k, v);
        }
    }
    let written = db.metrics().get("log_bytes_written").unwrap();
    assert!(db.metrics().get("log_checkpoints").unwrap() > 10);
    assert!(
        written > 8 << 20,
        "the 1 MiB log must wrap many times, wrote {written}"
    );

    for (k, v) in &model {
        assert_eq!(
            t.get(&k.to_be_bytes()).unwrap().as_ref(),
            Some(v),
            "before the crash, key {k}"
        );
    }
    drop(t);
    db.simulate_crash();
    let db = Db::open(dir.path(), opts).unwrap();
    let t = db.table("t").unwrap();
    let all: Vec<_> = t.range(..).unwrap().map(|r| r.unwrap()).collect();
    assert_eq!(all.len(), model.len());
    for ((k, v), (mk, mv)) in all.iter().zip(model.iter()) {
        assert_eq!(k, &mk.to_be_bytes());
        assert_eq!(v, mv);
    }
    t.check().unwrap();
    drop(t);
    db.close().unwrap();
}
