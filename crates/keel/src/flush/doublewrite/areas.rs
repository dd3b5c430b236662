//! Which doublewrite areas are free, and how a batch gets one.
//!
//! An area is in one of three states:
//! - **free**, on the list;
//! - **claimed** by an [`AreaGuard`]: one chunk of a batch, from its
//!   doublewrite copy to the sync of its in-place writes (about one
//!   chunk's I/O); dropping the guard puts the area back on the list;
//! - **set aside**: its copies may be the only good image of a page whose
//!   in-place write failed. [`AreaGuard::set_aside`] holds it for the
//!   retry of those writes (`flush::batch::held`), which gives it back
//!   with [`Doublewrite::give_back`] only after the writes and the data
//!   files' sync succeeded; [`AreaGuard::keep_forever`] (a failed
//!   data-file sync: the files are poisoned) holds it until the restart's
//!   recovery has used it. A set-aside area is never reused, so a crash
//!   at any moment of the retry leaves recovery the copy it needs.
//!
//! # Waiting for an area
//! [`Doublewrite::claim`] waits on `freed` while no area is free, holding
//! only the caller's page claims (no latch, no other area: see
//! `flush::batch`, "Pipelining"), which the holders of the other areas
//! never need. A claimed area comes back after one chunk's I/O; a set-aside
//! one only when a retry succeeds, which may take as long as the device
//! fails. So `claim` never waits for a set-aside area: when every area is
//! set aside it returns `Error::WriteBackFailing` at once, and otherwise
//! it waits at most [`CLAIM_TIMEOUT`] (a device so slow that no chunk's
//! I/O ends in that time) and then returns the same error. Dropping a
//! guard or giving an area back wakes one waiter (one area came free);
//! setting one aside wakes them all, so that each sees whether every area
//! is set aside now.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{AreaGuard, Doublewrite};
use crate::error::{Error, Result};

/// Longest [`Doublewrite::claim`] waits for an area that batches in
/// progress hold.
pub const CLAIM_TIMEOUT: Duration = Duration::from_secs(30);

/// The free areas, and how many are set aside.
pub(super) struct Areas {
    free: VecDeque<usize>,
    set_aside: usize,
}

impl Areas {
    pub(super) fn new(n: usize) -> Areas {
        Areas {
            free: (0..n).collect(),
            set_aside: 0,
        }
    }
}

impl Doublewrite {
    /// Claim a free area, waiting for one a batch in progress holds for at
    /// most [`CLAIM_TIMEOUT`], and not at all when every area is set aside
    /// (module doc).
    pub fn claim(&self) -> Result<AreaGuard<'_>> {
        self.claim_within(CLAIM_TIMEOUT)
    }

    /// [`Doublewrite::claim`], waiting at most `timeout`.
    pub fn claim_within(&self, timeout: Duration) -> Result<AreaGuard<'_>> {
        let deadline = Instant::now() + timeout;
        let mut areas = self.areas.lock();
        loop {
            if let Some(area) = areas.free.pop_front() {
                return Ok(AreaGuard { dw: self, area });
            }
            let total = self.geometry.areas;
            let aside = areas.set_aside;
            if aside >= total {
                return Err(self.no_area(format!(
                    "all {total} doublewrite areas are set aside: they hold the copies of \
                     pages whose in-place writes failed, kept until those writes are retried \
                     and synced"
                )));
            }
            if self.freed.wait_until(&mut areas, deadline).timed_out() && areas.free.is_empty() {
                let aside = areas.set_aside;
                return Err(self.no_area(format!(
                    "no doublewrite area came free in {timeout:?}: {} of {total} are in use \
                     by page writes still in progress and {aside} are set aside after failed \
                     writes; the data device may be hung",
                    total - aside
                )));
            }
        }
    }

    fn no_area(&self, reason: String) -> Error {
        Error::WriteBackFailing {
            path: self.dir.clone(),
            reason,
        }
    }

    /// Claim a free area if there is one.
    pub fn try_claim(&self) -> Option<AreaGuard<'_>> {
        let area = self.areas.lock().free.pop_front()?;
        Some(AreaGuard { dw: self, area })
    }

    /// Put area `area`, set aside by [`AreaGuard::set_aside`], back in use:
    /// the in-place writes its copies protected are written and synced.
    pub fn give_back(&self, area: usize) {
        let mut areas = self.areas.lock();
        debug_assert!(areas.set_aside > 0 && !areas.free.contains(&area));
        areas.set_aside = areas.set_aside.saturating_sub(1);
        areas.free.push_back(area);
        drop(areas);
        self.freed.notify_one();
    }

    /// Areas set aside now (held for a retry, or kept until a restart).
    #[cfg(test)]
    pub fn areas_set_aside(&self) -> usize {
        self.areas.lock().set_aside
    }
}

impl AreaGuard<'_> {
    /// The claimed area's index.
    pub fn area(&self) -> usize {
        self.area
    }

    /// Keep the area out of use, its copies intact, until
    /// [`Doublewrite::give_back`]: the in-place writes of the chunk it
    /// holds failed and will be retried. Returns the area's index.
    pub fn set_aside(self) -> usize {
        let (dw, area) = (self.dw, self.area);
        std::mem::forget(self);
        dw.areas.lock().set_aside += 1;
        dw.freed.notify_all();
        area
    }

    /// Never give the area back: its copies may be the only good image of
    /// a page whose in-place write failed, so it must survive until the
    /// restart's recovery has used it.
    pub fn keep_forever(self) {
        log::error!(
            "doublewrite area {} is kept out of use until a restart: it may hold the only good copy of a page",
            self.area
        );
        self.set_aside();
    }
}

impl Drop for AreaGuard<'_> {
    fn drop(&mut self) {
        self.dw.areas.lock().free.push_back(self.area);
        self.dw.freed.notify_one();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::flush::doublewrite::Geometry;
    use crate::io::FaultyFs;

    fn three_areas(fs: &FaultyFs, dir: &std::path::Path) -> Doublewrite {
        let g = Geometry {
            files: 1,
            areas: 3,
            pages_per_area: 2,
            page_size: 4096,
        };
        Doublewrite::open_or_create(fs, dir, g, 7, Arc::default()).unwrap()
    }

    /// Every area set aside after failed writes: a claim used to wait for
    /// ever (warning every 10 s); it now fails at once, naming why, and
    /// succeeds again once the retry gives an area back.
    #[test]
    fn a_claim_fails_at_once_when_every_area_is_set_aside() {
        let (fs, dir) = (FaultyFs::new(), tempfile::tempdir().unwrap());
        let dw = three_areas(&fs, dir.path());
        let held: Vec<usize> = (0..3).map(|_| dw.claim().unwrap().set_aside()).collect();
        assert_eq!(dw.areas_set_aside(), 3);
        let started = Instant::now();
        let err = dw.claim().err().unwrap();
        assert!(started.elapsed() < Duration::from_secs(1), "it waited");
        assert!(matches!(err, Error::WriteBackFailing { .. }), "{err}");
        assert!(err.to_string().contains("set aside"), "{err}");
        dw.give_back(held[1]);
        assert_eq!(dw.claim().unwrap().area(), held[1]);
        assert_eq!(dw.areas_set_aside(), 2);
    }

    /// Areas claimed by batches that never finish: a claim gives up after
    /// its timeout with a clear error instead of waiting for ever.
    #[test]
    fn a_claim_gives_up_when_no_area_comes_free_in_time() {
        let (fs, dir) = (FaultyFs::new(), tempfile::tempdir().unwrap());
        let dw = three_areas(&fs, dir.path());
        let _busy = dw.claim().unwrap();
        let _aside = dw.claim().unwrap().set_aside();
        let _busy_too = dw.claim().unwrap();
        let started = Instant::now();
        let err = dw.claim_within(Duration::from_millis(50)).err().unwrap();
        assert!(started.elapsed() >= Duration::from_millis(50));
        let msg = err.to_string();
        assert!(
            msg.contains("2 of 3 are in use") && msg.contains("1 are set aside"),
            "{msg}"
        );
    }

    /// A claim waiting for an area a batch holds is woken when the last
    /// one is set aside instead (its write failed), and fails at once
    /// rather than at its timeout. (Being woken by a freed area:
    /// `repair_tests::claim_waits_for_a_free_area`.)
    #[test]
    fn a_waiting_claim_fails_when_the_last_busy_area_is_set_aside() {
        let (fs, dir) = (FaultyFs::new(), tempfile::tempdir().unwrap());
        let dw = three_areas(&fs, dir.path());
        let guards: Vec<AreaGuard<'_>> = (0..3).map(|_| dw.claim().unwrap()).collect();
        let mut guards = guards.into_iter();
        std::thread::scope(|s| {
            let started = Instant::now();
            let waiter = s.spawn(|| dw.claim_within(Duration::from_secs(20)).map(|g| g.area()));
            for g in guards.by_ref().take(2) {
                g.set_aside();
            }
            std::thread::sleep(Duration::from_millis(20));
            assert!(!waiter.is_finished(), "one area is still in use");
            guards.for_each(|g| {
                g.set_aside();
            });
            assert!(waiter.join().unwrap().is_err());
            assert!(started.elapsed() < Duration::from_secs(10), "it timed out");
        });
    }
}
