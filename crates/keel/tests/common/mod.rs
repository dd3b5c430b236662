#![allow(dead_code, clippy::unwrap_used)]
//! Helpers shared by the integration tests.

pub mod bank;
pub mod bulk;
pub mod crash_cycles;

use std::time::{Duration, Instant};

use keel::{Db, Options};

/// Options for tests: small pages, a pool of `frames` pages, no syncs.
pub fn small_opts(frames: u64) -> Options {
    Options {
        page_size: 4096,
        buffer_pool_size: frames * 4096,
        flush_method: "nosync".parse().unwrap(),
        data_files: 2,
        lru_scan_depth: 8,
        log_file_size: 1 << 20,
        log_files_in_group: 2,
        ..Default::default()
    }
}

/// The longest key a table on pages of `page_size` bytes takes, as the
/// README and `docs/format.md` state it (InnoDB's rule): 3/16 of the page,
/// at most 3072 bytes. One byte more is refused with `Error::KeyTooLarge`.
pub fn max_key_len(page_size: usize) -> usize {
    (page_size * 3 / 16).min(3072)
}

/// A seed from KEEL_TEST_SEED or fresh; always printed so a failure can be replayed.
pub fn seed(test: &str) -> u64 {
    let s = std::env::var("KEEL_TEST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    eprintln!("{test}: seed {s} (replay with KEEL_TEST_SEED={s})");
    s
}

/// Wait until purge has emptied the history list, failing after `within`;
/// how long it took.
pub fn drained(db: &Db, within: Duration) -> Duration {
    let t0 = Instant::now();
    while db.history().history_len > 0 {
        assert!(
            t0.elapsed() < within,
            "history still {:?} after {within:?}",
            db.history()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    t0.elapsed()
}
