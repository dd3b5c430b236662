#![allow(clippy::unwrap_used)]
//! `Db::set_device`: the data files' device model changes speed while the
//! database is open and busy, the new spec holds from the next request on,
//! nothing written is lost, and the calls that cannot change it say why.
//!
//! Timing on a shared 2-core machine is noisy, so the checks lean on what
//! the model guarantees whatever the CPU does: the spec it reports, and
//! that it never admits requests faster than its rate (a busy CPU makes
//! requests slower, never faster). Only the "faster again" check measures
//! a speed, with a wide margin.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel::io::throttle::{CATCH_UP, LATE_CREDIT_MAX};
use keel::io::ThrottleSpec;
use keel::{Db, Error, Options};

fn opts(device: &str) -> Options {
    let mut o = common::small_opts(256);
    o.doublewrite = keel::DoublewriteMode::Off;
    o.device = device.to_string();
    o
}

fn spec(text: &str) -> ThrottleSpec {
    text.parse().unwrap()
}

/// Reads and writes the model has admitted so far.
fn requests(db: &Db) -> u64 {
    db.device_stats().unwrap().requests
}

const ROWS: u32 = 600;

/// Read every row in key order through a pool far smaller than the table,
/// so that each leaf is a one-page read request; returns the seconds it
/// took and the requests the model admitted meanwhile.
fn timed_reads(db: &Db) -> (f64, u64) {
    let t = db.table("t").unwrap();
    let before = requests(db);
    let start = Instant::now();
    for i in 0..ROWS {
        assert!(t.get(&i.to_be_bytes()).unwrap().is_some());
    }
    (start.elapsed().as_secs_f64(), requests(db) - before)
}

#[test]
fn a_slower_device_set_while_open_slows_the_next_reads_and_a_faster_one_speeds_them_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts("nvme");
    o.buffer_pool_size = 32 * 4096;
    let db = Db::open(dir.path(), o).unwrap();
    assert_eq!(db.device(), Some(spec("nvme")));
    let t = db.table_or_create("t").unwrap();
    for i in 0..ROWS {
        t.put(&i.to_be_bytes(), &[1; 600]).unwrap();
    }
    // Every page clean: the reads below evict without writing.
    db.flush().unwrap();
    timed_reads(&db);

    db.set_device("iops=250").unwrap();
    assert_eq!(db.device(), Some(spec("iops=250")));
    let (slow_s, reads) = timed_reads(&db);
    assert!(reads >= 60, "only {reads} reads: the test proves nothing");
    // Each read costs 4 ms at 250 IOPS and the bucket starts empty at the
    // change; a thread woken late may be credited up to LATE_CREDIT_MAX
    // and a bucket keeps CATCH_UP of credit. A lower bound only: the real
    // disk and a busy CPU can make the reads slower, never faster.
    let floor_s = (reads - 1) as f64 / 250.0 - (LATE_CREDIT_MAX + CATCH_UP).as_secs_f64();
    assert!(
        slow_s >= floor_s,
        "{reads} reads at 250 IOPS took {slow_s:.3} s, the model allows no less than {floor_s:.3} s"
    );

    db.set_device("nvme").unwrap();
    assert_eq!(db.device(), Some(spec("nvme")));
    let (fast_s, reads) = timed_reads(&db);
    assert!(reads >= 60, "only {reads} reads");
    eprintln!("{reads} reads: {slow_s:.3} s at 250 IOPS, {fast_s:.3} s on nvme");
    // At least twice the old rate: the old spec does not linger.
    assert!(
        fast_s < (reads - 1) as f64 / 250.0 / 2.0,
        "{reads} reads back on nvme took {fast_s:.3} s (at 250 IOPS: {slow_s:.3} s)"
    );
    // The options report the device the database was opened with.
    assert_eq!(db.options().device, "nvme");
    db.close().unwrap();
}

#[test]
fn bad_specs_and_unmodelled_devices_are_refused_with_typed_errors_naming_the_device_option() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("throttled"), opts("iops=5000")).unwrap();
    for (bad, needle) in [
        ("iops=fast", "`iops=fast`"),
        ("qd=0", "`qd=0`"),
        ("ssd", "`ssd` is neither"),
        ("", "empty"),
    ] {
        let e = db.set_device(bad).unwrap_err();
        assert!(
            matches!(&e, Error::Config { key, .. } if key == "device"),
            "{bad}: {e:?}"
        );
        let e = e.to_string();
        assert!(e.starts_with("option `device`: "), "{bad}: {e}");
        assert!(e.contains(needle), "{bad}: {e}");
    }
    // Nothing changed.
    assert_eq!(db.device(), Some(spec("iops=5000")));
    // Unlimited is a spec like any other on a modelled device, and back.
    db.set_device("unlimited").unwrap();
    assert_eq!(db.device(), Some(ThrottleSpec::unlimited()));
    db.set_device("hdd-raid10").unwrap();
    assert_eq!(db.device().unwrap().to_string(), "hdd-raid10");
    db.close().unwrap();

    // Opened unlimited: no model, a typed error, not a panic.
    let db = Db::open(dir.path().join("unlimited"), opts("unlimited")).unwrap();
    assert_eq!(db.device(), None);
    assert_eq!(db.device_stats(), None);
    let e = db.set_device("iops=100").unwrap_err();
    match &e {
        Error::DeviceNotModelled { spec, reason } => {
            assert_eq!(spec, "iops=100");
            assert!(reason.contains("device = unlimited"), "{reason}");
        }
        other => panic!("expected DeviceNotModelled, got {other:?}"),
    }
    let e = e.to_string();
    assert!(
        e.starts_with("option `device` cannot change to `iops=100`"),
        "{e}"
    );
    assert!(e.contains("e.g. device = nvme"), "{e}");
    // A bad spec is still a bad spec.
    let e = db.set_device("iops=fast").unwrap_err();
    assert!(matches!(e, Error::Config { .. }), "{e:?}");
    db.close().unwrap();

    let fs = Arc::new(keel::io::FaultyFs::new());
    let db = Db::open_with_fs(dir.path().join("faulty"), opts("nvme"), Some(fs)).unwrap();
    assert_eq!(db.device(), None);
    let e = db.set_device("iops=100").unwrap_err();
    assert!(matches!(e, Error::DeviceNotModelled { .. }), "{e:?}");
    assert!(e.to_string().contains("caller-supplied file system"), "{e}");
    db.close().unwrap();
}

/// Keys each writer cycles over: few, so that a checkpoint writes few
/// pages even at 200 IOPS.
const KEYS_PER_WRITER: u32 = 100;

fn key(writer: u32, i: u32) -> [u8; 4] {
    ((writer << 24) | (i % KEYS_PER_WRITER)).to_be_bytes()
}

/// The value of a writer's `i`th put: `i` repeated, so that the last one
/// of every key can be checked.
fn value(i: u32) -> Vec<u8> {
    i.to_be_bytes().repeat(75)
}

#[test]
fn changing_the_device_under_running_writers_holds_each_rate_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts("nvme")).unwrap();
    let t = db.table_or_create("t").unwrap();
    let stop = AtomicBool::new(false);
    let puts: Vec<u32> = std::thread::scope(|s| {
        let writers: Vec<_> = (0..2u32)
            .map(|w| {
                let (t, stop) = (&t, &stop);
                s.spawn(move || {
                    let mut i = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        t.put(&key(w, i), &value(i)).unwrap();
                        i += 1;
                    }
                    i
                })
            })
            .collect();
        // Each phase: change the device, then make data-file writes while
        // the writers run (checkpoints, and whatever the cleaners do) until
        // the model has admitted PHASE requests. Under a rate limit it
        // admits no more than the rate allows since the change, plus one
        // request per thread that may be waiting for its turn when the
        // phase ends (the cleaners, the writers, this thread: far fewer
        // than SLACK) and the credit a late thread or a bucket may keep;
        // unthrottled, PHASE requests take a few milliseconds.
        const PHASE: u64 = 100;
        const SLACK: f64 = 16.0;
        let credit_s = (LATE_CREDIT_MAX + CATCH_UP).as_secs_f64();
        for (text, iops) in [
            ("iops=200", Some(200.0)),
            ("nvme", None),
            ("iops=400,qd=2", Some(400.0)),
            ("lat=1ms,qd=1", None),
            ("unlimited", None),
            ("sata-ssd", None),
            ("iops=200", Some(200.0)),
        ] {
            let changed = Instant::now();
            db.set_device(text).unwrap();
            assert_eq!(db.device(), Some(spec(text)), "{text}");
            let before = requests(&db);
            let mut admitted = 0;
            while admitted < PHASE && changed.elapsed() < Duration::from_secs(20) {
                db.flush().unwrap();
                std::thread::sleep(Duration::from_millis(2));
                admitted = requests(&db) - before;
            }
            let elapsed = changed.elapsed().as_secs_f64();
            eprintln!("{text}: {admitted} requests in {elapsed:.3} s");
            assert!(
                admitted >= PHASE,
                "{text}: only {admitted} data-file requests"
            );
            if let Some(iops) = iops {
                let most = iops * (elapsed + credit_s) + 1.0 + SLACK;
                assert!(
                    admitted as f64 <= most,
                    "{text}: {admitted} requests in {elapsed:.3} s since the change, \
                     the model allows at most {most:.0}"
                );
            }
        }
        stop.store(true, Ordering::Relaxed);
        writers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    db.close().unwrap();

    let db = Db::open(dir.path(), opts("unlimited")).unwrap();
    db.check().unwrap();
    let t = db.table("t").unwrap();
    for (w, &n) in (0u32..).zip(&puts) {
        assert!(n > KEYS_PER_WRITER, "writer {w} made only {n} puts");
        for slot in 0..KEYS_PER_WRITER {
            // The last put to this key.
            let last = slot + KEYS_PER_WRITER * ((n - 1 - slot) / KEYS_PER_WRITER);
            assert_eq!(
                t.get(&key(w, slot)).unwrap(),
                Some(value(last)),
                "writer {w}, key {slot}"
            );
        }
    }
    db.close().unwrap();
}
