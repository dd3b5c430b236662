#![allow(clippy::unwrap_used)]
//! Power fails inside the engine's own write-back path, at a named
//! failpoint of the faulty device, after a random number of matching calls
//! (in Random or Torn mode, by seed): a doublewrite batch's write or sync,
//! an in-place page write, a data-file sync, a data file growing, a redo
//! write (log records, or a checkpoint slot in `redo-0`) or a redo sync.
//! Meanwhile 4 writers commit bank transfers and 4 page cleaners flush 4
//! buffer pool instances under pressure. After each recovery the total
//! balance is unchanged, every acknowledged transaction is present and
//! every tree checks out; each test also asserts that its failpoint fired
//! in at least 3 of 4 cycles (a cycle too short for it is unplugged and
//! counted).
//!
//! `KEEL_POWER_LOSS_CYCLES=n` runs every scenario for `n` cycles instead of
//! its CI count; `KEEL_TEST_SEED` replays a printed seed (see
//! `common::crash_cycles`).

mod common;

use std::ops::Range;
use std::sync::Arc;

use common::crash_cycles::workload::Opening;
use common::crash_cycles::{cycles, run, run_in_mode, run_workload, Crash, Lifetime, Mode, Totals};
use keel::DoublewriteMode;
use rand::Rng;

/// Cycles per failpoint in CI.
const CYCLES: u64 = 16;

/// Crash at `point` after a random number of matching calls in `after`,
/// in Random or Torn mode.
fn crash_at(scenario: &str, point: &'static str, after: Range<u64>) -> Totals {
    let t = run(scenario, cycles(CYCLES), |rng| Crash::At {
        point,
        after: after.clone(),
        mode: if rng.gen_bool(0.5) {
            Mode::Random
        } else {
            Mode::Torn
        },
    });
    t.assert_ran();
    t.assert_cleaners_flushed();
    t
}

#[test]
fn power_fails_writing_a_doublewrite_batch() {
    crash_at("dblwr_write", "/dblwr-.write", 0..1500);
}

#[test]
fn power_fails_syncing_a_doublewrite_batch() {
    crash_at("dblwr_sync", "/dblwr-.sync", 0..1500);
}

#[test]
fn power_fails_writing_a_page_in_place() {
    crash_at("data_write", "/data-.write", 0..1500);
}

#[test]
fn power_fails_syncing_the_data_files() {
    // Data-file syncs are one per chunk of pages; a cycle makes ~2,000.
    crash_at("data_sync", "/data-.sync", 0..1500);
}

#[test]
fn power_fails_writing_the_redo_log() {
    // Every commit writes and syncs the log: give the cleaners time too.
    crash_at("redo_write", "/redo-.write", 0..4000);
}

#[test]
fn power_fails_syncing_the_redo_log() {
    crash_at("redo_sync", "/redo-.sync", 0..4000);
}

/// A data file grows by whole extents when a page past its end is first
/// written, which a long-lived database does rarely: each cycle starts a
/// new database whose writers open accounts until the pool overflows and
/// the first in-place writes extend the files.
#[test]
fn power_fails_growing_a_data_file() {
    let opening = Arc::new(Opening { rows: 8, pad: 800 });
    let t = run_workload(
        "data_set_len",
        cycles(CYCLES),
        Lifetime::FreshEachCycle,
        opening,
        None,
        |rng| Crash::At {
            point: "/data-.set_len",
            after: 0..2,
            mode: if rng.gen_bool(0.5) {
                Mode::Random
            } else {
                Mode::Torn
            },
        },
    );
    t.assert_ran();
}

/// The torn crash mode at in-place page writes, under `detect_only`: a
/// crash that tore a page must fail the open with `Error::TornPage`
/// naming a page the image shows torn (never open on it); a crash that
/// tore none recovers every acknowledged commit. The doublewrite writes
/// area headers only: one 4 KiB block per batch (and the files' headers
/// when they are formatted).
#[test]
fn detect_only_reports_a_torn_page_and_recovers_an_untorn_crash() {
    let t = run_in_mode(
        "data_write_detect_only",
        cycles(CYCLES),
        DoublewriteMode::DetectOnly,
        |_| Crash::At {
            point: "/data-.write",
            after: 0..1500,
            mode: Mode::Torn,
        },
    );
    t.assert_ran();
    assert!(t.torn_detected > 0, "no crash tore a page: {t:?}");
    assert_eq!(t.torn_repaired, 0, "detect_only has no copies: {t:?}");
    let batches = t.write_back["dblwr_writes"];
    assert!(batches > 0, "{t:?}");
    // Besides, the files' own headers (one block each) whenever a cycle
    // formatted them afresh: at most once per file and cycle.
    let headers = t
        .dblwr_written_bytes
        .checked_sub(4096 * batches)
        .unwrap_or_else(|| panic!("fewer bytes than one block per batch: {t:?}"));
    assert_eq!(headers % 4096, 0, "{t:?}");
    assert!(headers <= 4096 * 64 * t.cycles, "{t:?}");
}

/// The torn crash mode at in-place page writes, under `atomic` on a
/// device that promises untorn writes of a page: no page is torn, no
/// doublewrite byte is written (no file exists), and recovery, with
/// nothing to repair, finds every acknowledged commit.
#[test]
fn atomic_writes_leave_no_torn_page_and_need_no_doublewrite() {
    let t = run_in_mode(
        "data_write_atomic",
        cycles(CYCLES),
        DoublewriteMode::Atomic,
        |_| Crash::At {
            point: "/data-.write",
            after: 0..1500,
            mode: Mode::Torn,
        },
    );
    t.assert_ran();
    t.assert_cleaners_flushed();
    assert_eq!(t.torn_in_image, 0, "{t:?}");
    assert_eq!(t.dblwr_written_bytes, 0, "{t:?}");
    assert_eq!(t.write_back["dblwr_writes"], 0, "{t:?}");
}
