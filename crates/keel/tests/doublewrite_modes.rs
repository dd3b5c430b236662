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

/// `atomic` with `page_compression = zstd`: an untorn write must be a
/// power of two of bytes at an offset that is a multiple of it (the faulty
/// device refuses any other with EINVAL, as Linux does), so a compressed
/// image is written as 4 or 8 KiB of a 16 KiB page, or the page whole.
/// Every write is taken, and every row reads back after a reopen.
#[test]
fn atomic_writes_compressed_images_as_powers_of_two() {
    let dir = tempfile::tempdir().unwrap();
    let fs = Arc::new(FaultyFs::new());
    fs.set_atomic_write_unit(Some(16384));
    let mut o = opts(DoublewriteMode::Atomic);
    o.page_size = 16384;
    o.buffer_pool_size = 24 * 16384;
    o.page_compression = keel::PageCompression::Zstd;
    // 32 letters at random, 5 bits a byte: a leaf a bulk load filled
    // needs three blocks (written whole: three is no power of two), a
    // leaf after a split two, or one.
    let value = |i: u32| -> Vec<u8> {
        let mut x = u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..150)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b'a' + (x % 32) as u8
            })
            .collect()
    };
    let db = Db::open_with_fs(dir.path(), o.clone(), Some(fs.clone())).unwrap();
    let t = db.create_table("t").unwrap();
    for i in 0..4000u32 {
        t.put(&i.to_be_bytes(), &value(i)).unwrap();
    }
    drop(t);
    let loaded = db.create_table("loaded").unwrap();
    loaded
        .bulk_load((0..4000u32).map(|i| (i.to_be_bytes(), value(i))))
        .unwrap();
    drop(loaded);
    db.flush().unwrap();
    let m = db.metrics();
    assert!(m.get("num_pages_page_compressed").unwrap() > 0);
    assert!(m.get("page_compression_saved").unwrap() > 0);
    db.close().unwrap();
    let db = Db::open_with_fs(dir.path(), o, Some(fs)).unwrap();
    let t = db.table("t").unwrap();
    let loaded = db.table("loaded").unwrap();
    for i in 0..4000u32 {
        assert_eq!(t.get(&i.to_be_bytes()).unwrap(), Some(value(i)), "row {i}");
        assert_eq!(
            loaded.get(&i.to_be_bytes()).unwrap(),
            Some(value(i)),
            "loaded row {i}"
        );
    }
    drop(loaded);
    assert!(db.metrics().get("num_pages_page_decompressed").unwrap() > 0);
    drop(t);
    db.close().unwrap();
}
