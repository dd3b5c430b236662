//! The page counts the tree's mini-transactions reserve redo for fit the
//! log: what every database needs is within `MIN_MTR_PAGES`, which
//! `Engine::open` checks every valid log against; every hidden tree a bulk
//! load can build can be dropped in steps the same log takes; and a
//! reservation no log could grant fails at once instead of waiting.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::bulk::{drop_step_pages, leaf_write_pages};
use super::pessimistic_pages;
use super::test_engine::engine;
use crate::engine::admission::{max_mtr_pages, Purpose, MIN_MTR_PAGES};
use crate::engine::check_log_fits;
use crate::error::Error;
use crate::page::{MAX_PAGE_SIZE, MIN_PAGE_SIZE};
use crate::redo::format::{LOG_FILE_HDR, MAX_LOG_FILES, MIN_LOG_FILE_SIZE};

fn page_sizes() -> impl Iterator<Item = usize> {
    (MIN_PAGE_SIZE.trailing_zeros()..=MAX_PAGE_SIZE.trailing_zeros()).map(|b| 1 << b)
}

#[test]
fn the_mtrs_every_database_needs_are_within_the_minimum() {
    // A root split of a two-level tree; a bulk load's first leaf write
    // that grows its hidden tree; its begin, publish and last drop step.
    const {
        assert!(pessimistic_pages(1) <= MIN_MTR_PAGES);
        assert!(leaf_write_pages(0) <= MIN_MTR_PAGES);
        assert!(3 <= MIN_MTR_PAGES);
    }
}

#[test]
fn every_valid_log_takes_the_largest_mtr_a_database_needs() {
    for ps in page_sizes() {
        for size in [MIN_LOG_FILE_SIZE, 2 * MIN_LOG_FILE_SIZE, 48 << 20] {
            for files in [1, 2, MAX_LOG_FILES as u64] {
                let cap = (size - LOG_FILE_HDR) * files;
                assert!(check_log_fits(cap, ps).is_ok(), "{ps} {size} {files}");
            }
        }
    }
    // The smallest: 64 KiB pages and one 1 MiB file, 14 pages an mtr.
    let err = check_log_fits(300 << 10, MAX_PAGE_SIZE).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(&err, Error::Config { key, .. } if key == "log_file_size")
            && msg.contains("page_size"),
        "{msg}"
    );
}

proptest! {
    /// A load grows its hidden tree to level `top` only by a leaf write at
    /// `top − 1`, which must fit one mtr, and only if a split at `top`
    /// would fit one too; the drop's steps then fit as well.
    #[test]
    fn every_hidden_tree_a_load_can_build_can_be_dropped_in_steps_the_log_takes(
        shift in MIN_PAGE_SIZE.trailing_zeros()..=MAX_PAGE_SIZE.trailing_zeros(),
        max_pages in MIN_MTR_PAGES..400,
        frames in 16usize..5000,
        top in 1u8..=255,
    ) {
        let ps = 1usize << shift;
        prop_assume!(leaf_write_pages(top - 1) <= max_pages);
        prop_assume!(pessimistic_pages(top) <= max_pages);
        let (pages, batch) = drop_step_pages(top, ps, max_pages, frames)
            .expect("a step that fits the log");
        prop_assert!(batch >= 1);
        prop_assert_eq!(pages, usize::from(top) + 1 + batch);
        prop_assert!(pages <= max_pages);
    }
}

/// 64 KiB pages and one 1 MiB log file, the smallest log for the largest
/// pages: a hidden tree five levels deep is dropped in steps of 9 pages.
/// The bound used to be 15 pages (the right edge counted twice), more than
/// the 14 one writer may reserve.
#[test]
fn a_drop_step_five_levels_deep_fits_the_smallest_log_for_64k_pages() {
    let cap = MIN_LOG_FILE_SIZE - LOG_FILE_HDR;
    let limit = crate::engine::free_check_limit(cap);
    let max = max_mtr_pages(limit, MAX_PAGE_SIZE);
    assert_eq!(max, 14);
    assert_eq!(drop_step_pages(4, MAX_PAGE_SIZE, max, 1024), Some((9, 4)));
    // A load grows its hidden tree to level 5, where a split still fits
    // (14 pages), and no further; the drop takes it in steps of 10.
    assert!(leaf_write_pages(4) <= max && pessimistic_pages(5) <= max);
    assert!(pessimistic_pages(6) > max);
    assert_eq!(drop_step_pages(5, MAX_PAGE_SIZE, max, 1024), Some((10, 4)));
}

/// A reservation larger than the free-check limit can never be granted:
/// it fails at once, naming the option that sizes the log. It used to
/// wait a minute and fail with `LogOverloaded`.
#[test]
fn a_reservation_no_log_space_can_grant_fails_at_once() {
    let e = engine(4096);
    let budget = e.adm.budget(Purpose::New);
    let started = Instant::now();
    let err = budget.ensure(e.adm.free_limit + 1).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        matches!(&err, Error::Config { key, .. } if key == "log_file_size"),
        "{err}"
    );
}
