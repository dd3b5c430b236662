#![allow(clippy::unwrap_used)]
//! `doublewrite = atomic` opens only where the data device promises untorn
//! page writes, and says so; every mode reports itself (`Db::doublewrite`)
//! and the bytes it writes to the doublewrite (`dblwr_written_bytes`).

mod common;

use std::sync::Arc;

use keel::io::FaultyFs;
use keel::{Db, DoublewriteMode, Error};

fn opts(mode: DoublewriteMode) -> keel::Options {
    let mut o = common::small_opts(64);
    o.page_size = 8192;
    o.buffer_pool_size = 64 * 8192;
    o.doublewrite = mode;
    o
}

/// A device whose unit is below the page, or that promises nothing, is
/// refused with an error on `doublewrite` saying why; a unit of a page
/// opens, and the status names the unit. No doublewrite file is made.
#[test]
fn atomic_needs_a_device_that_promises_untorn_pages() {
    for (unit, why) in [
        (None, "no atomic write unit"),
        (Some(4096), "at most 4096 bytes, less than a page of 8192"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFs::new());
        fs.set_atomic_write_unit(unit);
        let err = Db::open_with_fs(dir.path(), opts(DoublewriteMode::Atomic), Some(fs))
            .err()
            .unwrap();
        let msg = err.to_string();
        assert!(
            matches!(&err, Error::Config { key, .. } if key == "doublewrite"),
            "{msg}"
        );
        assert!(msg.contains(why) && msg.contains("data-0.keel"), "{msg}");
    }
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    fs.set_atomic_write_unit(Some(16384));
    let db = Db::open_with_fs(dir.path(), opts(DoublewriteMode::Atomic), Some(fs.clone())).unwrap();
    assert_eq!(
        db.doublewrite().to_string(),
        "atomic (device promises untorn writes up to 16 KiB)"
    );
    let t = db.create_table("t").unwrap();
    for i in 0..3000u32 {
        t.put(&i.to_be_bytes(), &[7u8; 100]).unwrap();
    }
    drop(t);
    db.flush().unwrap();
    assert!(db.metrics().get("buffer_pages_written").unwrap() > 0);
    assert_eq!(db.metrics().get("dblwr_written_bytes"), Some(0));
    assert!(!fs.exists(&dir.path().join("dblwr-0.keel")));
    db.close().unwrap();
}

/// Real files: atomic opens only if statx promises untorn writes of a
/// page (Linux 6.11+, O_DIRECT, a device with atomic writes), and is
/// otherwise refused with the reason; never a silent fallback.
#[test]
fn atomic_on_real_files_opens_or_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(DoublewriteMode::Atomic);
    o.flush_method = "O_DIRECT".parse().unwrap();
    match Db::open(dir.path(), o) {
        Ok(db) => {
            assert_eq!(db.doublewrite().mode, DoublewriteMode::Atomic);
            db.close().unwrap();
        }
        Err(e) => {
            assert!(
                matches!(&e, Error::Config { key, .. } if key == "doublewrite"),
                "{e}"
            );
            eprintln!("atomic refused here, as it should be: {e}");
        }
    }
}

/// Switching from `on` to `off` after a clean run removes the copies
/// (they would go stale), and back to `on` formats them afresh.
#[test]
fn each_mode_reports_itself_and_switching_is_clean() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    for mode in [
        DoublewriteMode::On,
        DoublewriteMode::DetectOnly,
        DoublewriteMode::Off,
        DoublewriteMode::On,
    ] {
        let db = Db::open_with_fs(dir.path(), opts(mode), Some(fs.clone())).unwrap();
        assert_eq!(db.doublewrite().mode, mode);
        assert!(db.doublewrite().to_string().starts_with(mode.as_str()));
        let t = db.table("t").or_else(|_| db.create_table("t")).unwrap();
        for i in 0..500u32 {
            t.put(&i.to_be_bytes(), &[mode as u8; 100]).unwrap();
        }
        drop(t);
        db.flush().unwrap();
        db.close().unwrap();
        let exists = fs.exists(&dir.path().join("dblwr-0.keel"));
        assert_eq!(exists, mode.uses_areas(), "{mode}");
    }
}
