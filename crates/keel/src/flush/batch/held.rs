//! Page writes held for retry: a chunk whose in-place writes failed after
//! its doublewrite copy was made and synced (EIO, or ENOSPC where a
//! copy-on-write file system refuses overwrites on a full disk).
//!
//! The data files may now hold a torn page whose only good copy is in the
//! chunk's area, but nothing is lost: the copy is durable, and every page is
//! still in memory. So the engine neither poisons nor waits for a restart:
//! the chunk is *held* and its in-place writes are retried, with a backoff,
//! until the device takes them. (Only a failed fsync poisons: after it the
//! kernel may have dropped the dirty pages, and nothing can be trusted;
//! and a device that is gone, which no retry outlives.)
//!
//! # What a held chunk keeps
//! - **Its area, set aside** (`doublewrite::areas`): never reused, so that
//!   a crash at any moment before the retry's writes *and* their sync have
//!   succeeded leaves recovery the copy of every page it may have torn.
//! - **Its claims.** Each page keeps its `flushing` flag, so it stays
//!   dirty at its oldest change on the flush list (the checkpoint cannot
//!   pass it, LRU eviction cannot take it) and no other flusher writes it.
//!   The last matters: a newer image written and synced meanwhile, then
//!   overwritten by the retry's older copy, would lose changes the
//!   checkpoint may already have passed. (A clean page written to fill a
//!   gap is not dirty and holds nothing back; a change made meanwhile
//!   dirties it at once, and its flag keeps other flushers off it all the
//!   same: `buffer::claim`.) The claims hold no latch: readers
//!   and writers use the page in memory as always, and a change made
//!   meanwhile is recorded (`redirty`) so that the page stays dirty from
//!   it once the retry has written the copy (see `buffer::claim`).
//! - **Its copies**, the images in the area, which the retry writes again.
//!
//! # Who retries, and what is held meanwhile
//! Whoever flushes next: the cleaners' coordinator at every round, and
//! every flush call before it claims a page (a cleaner's batch, a user
//! thread's single-page flush), each retrying only the chunks whose
//! backoff (10 ms, doubling to 1 s) has run out; and a sharp checkpoint
//! (`WriteBack::flush_below`: `Db::flush`, shutdown), which retries every
//! chunk at once and fails with the error if one still fails, rather than
//! wait for pages that cannot be written. One thread retries at a time,
//! holding only the `retrying` mutex (no latch, no claim of its own, no
//! other mutex through the I/O); the others pass by with `try_lock`,
//! except the sharp checkpoint, which holds nothing and waits for the
//! retry under way (its I/O) before retrying what is left.
//!
//! # What a retry leaves
//! - Success: the copies are written and the data files synced, the claims
//!   are released as written, then the area is given back.
//! - The writes fail again: the chunk waits for its next try, the backoff
//!   doubled, and the caller gets `Error::WriteBackFailing`; a flush call
//!   starts nothing new then (another batch would only set another area
//!   aside).
//! - The data files are poisoned (the retry's sync failed, or another
//!   did, or a write met a device that is gone: ENODEV, ENXIO, or the
//!   faulty file system's power loss, which no retry outlives): the chunk
//!   is given up. Its area is kept until the restart,
//!   whose recovery repairs from it, and its pages are released unwritten.
//!
//! A thread that needs a frame and whose victim is a held page gets
//! `Error::WriteBackFailing` at once, rather than waiting out the pool's
//! free-frame timeout with a message about a pool too small; a commit
//! already logged retries it (`txn::commit`), anything else reports it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::crew::runs_of;
use super::Item;
use crate::buffer::{BufferPool, Detached};
use crate::error::{Error, Result};
use crate::flush::doublewrite::AreaGuard;
use crate::flush::WriteBack;
use crate::io::AlignedBuf;
use crate::metrics::Metrics;
use crate::page::PageId;

/// The first pause before a held chunk is retried; it doubles with every
/// failed retry up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(10);
/// The longest pause between two retries of a held chunk.
const RETRY_MAX: Duration = Duration::from_secs(1);

/// One chunk whose in-place writes are held for retry.
struct Chunk {
    claims: Vec<Detached>,
    /// (file, offset) of each page, in the order of the copies.
    places: Vec<(usize, u64)>,
    copies: Arc<AlignedBuf>,
    area: usize,
    retries: u32,
    next_try: Instant,
}

/// Every held chunk of one write-back.
#[derive(Default)]
pub(crate) struct HeldWrites {
    /// Held chunks, waiting list and frames, read without a lock when zero.
    chunks: AtomicUsize,
    state: Mutex<State>,
    /// Taken by the one thread retrying (module doc).
    retrying: Mutex<()>,
}

#[derive(Default)]
struct State {
    /// Chunks not being retried right now.
    waiting: Vec<Chunk>,
    /// (instance, frame) of every page of every held chunk, and the page.
    frames: HashMap<(usize, u32), PageId>,
    /// The last failure: the file, and the error.
    last: Option<(PathBuf, String)>,
}

impl HeldWrites {
    /// Whether chunks are held now.
    pub(crate) fn any(&self) -> bool {
        self.chunks.load(Ordering::Acquire) > 0
    }
}

/// The file an error names, or `fallback`.
fn path_of(e: &Error, fallback: PathBuf) -> PathBuf {
    match e {
        Error::Io { path, .. } | Error::WriteBackFailing { path, .. } => path.clone(),
        _ => fallback,
    }
}

impl WriteBack {
    /// The in-place writes of `items` (copied in `copies`, their doublewrite
    /// copy in `area`) failed with `err`: hold them for retry (module doc).
    /// Returns the error for the caller.
    pub(super) fn hold(
        &self,
        items: Vec<Item<'_>>,
        copies: Arc<AlignedBuf>,
        area: AreaGuard<'_>,
        err: Error,
    ) -> Error {
        let path = path_of(&err, self.space.file_path(items[0].file).to_path_buf());
        let reason = format!(
            "an in-place write of {} pages (the first {}) failed after their doublewrite copy \
             was made: {err}; their copies in doublewrite area {} are kept",
            items.len(),
            items[0].claim.id,
            area.area()
        );
        log::warn!("page writes held for retry: {reason}");
        self.poison_if_gone(&err);
        let area = area.set_aside();
        let mut places = Vec::with_capacity(items.len());
        let mut claims = Vec::with_capacity(items.len());
        for it in items {
            places.push((it.file, it.offset));
            claims.push(it.claim.detach());
        }
        Metrics::add(&self.metrics.buffer_flush_held_pages, claims.len() as u64);
        let mut st = self.held.state.lock();
        st.frames
            .extend(claims.iter().map(|c| ((c.inst, c.fid), c.id)));
        st.last = Some((path.clone(), reason.clone()));
        st.waiting.push(Chunk {
            claims,
            places,
            copies,
            area,
            retries: 0,
            next_try: Instant::now() + RETRY_FIRST,
        });
        self.held.chunks.fetch_add(1, Ordering::AcqRel);
        Error::WriteBackFailing { path, reason }
    }

    /// The in-place writes of `items` failed with `err`, without
    /// doublewrite: nothing to hold (no copy to protect), the pages stay
    /// dirty for a later flush; the error for the caller.
    pub(super) fn unheld_failure(&self, items: &[Item<'_>], err: Error) -> Error {
        self.poison_if_gone(&err);
        let fallback = self.space.file_path(items[0].file).to_path_buf();
        Error::WriteBackFailing {
            path: path_of(&err, fallback),
            reason: format!(
                "an in-place write of {} pages failed ({err}); they stay dirty",
                items.len()
            ),
        }
    }

    /// The doublewrite copy of a chunk of `pages` pages failed with `err`
    /// (its write or its sync): nothing was written in place and nothing
    /// relies on the area, so nothing is held; the error for the caller.
    pub(super) fn copy_failed(&self, pages: usize, err: Error) -> Error {
        self.poison_if_gone(&err);
        Error::WriteBackFailing {
            path: path_of(&err, PathBuf::new()),
            reason: format!(
                "the doublewrite copy of {pages} pages failed ({err}); nothing was written \
                 in place and the pages stay dirty"
            ),
        }
    }

    /// A device that is gone (`Error::is_device_gone`) takes no retry: the
    /// data files are poisoned, as after a failed fsync, so that writers
    /// and commits retrying a held write stop at once, and a held chunk is
    /// given up at its next retry (its area kept for recovery).
    fn poison_if_gone(&self, err: &Error) {
        if err.is_device_gone() {
            self.space.poison(format!(
                "a page write failed on a device that is gone: {err}"
            ));
        }
    }

    /// If frame `fid` of instance `inst` holds a page whose write is held
    /// for retry, the error a thread that wanted to write it gets.
    pub(crate) fn held_error(&self, inst: usize, fid: u32) -> Option<Error> {
        if !self.held.any() {
            return None;
        }
        let st = self.held.state.lock();
        let id = st.frames.get(&(inst, fid))?;
        let (path, why) = st.last.clone()?;
        Some(Error::WriteBackFailing {
            path,
            reason: format!("page {id} cannot be written for now: {why}"),
        })
    }

    /// Retry the held chunks whose backoff has run out (`force`: every
    /// chunk, now, waiting for a retry under way first). `Ok` if none was
    /// due or every retry succeeded; else the first failure.
    pub(crate) fn retry_held(&self, pool: &BufferPool, force: bool) -> Result<()> {
        if !self.held.any() {
            return Ok(());
        }
        let _one = if force {
            self.held.retrying.lock()
        } else {
            match self.held.retrying.try_lock() {
                Some(g) => g,
                None => return Ok(()),
            }
        };
        let now = Instant::now();
        let due: Vec<Chunk> = {
            let mut st = self.held.state.lock();
            let (due, wait) = std::mem::take(&mut st.waiting)
                .into_iter()
                .partition(|c| force || c.next_try <= now);
            st.waiting = wait;
            due
        };
        let mut first = None;
        for chunk in due {
            if let Err(e) = self.retry_chunk(pool, chunk) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Write one chunk's copies in place again and sync (module doc, "What
    /// a retry leaves").
    fn retry_chunk(&self, pool: &BufferPool, mut c: Chunk) -> Result<()> {
        Metrics::add(&self.metrics.buffer_flush_held_retries, 1);
        let ps = self.space.page_size();
        let written = runs_of(c.places.iter().copied(), ps)
            .into_iter()
            .try_for_each(|(file, offset, first, n)| {
                self.space
                    .write_run(file, offset, &c.copies[first * ps..(first + n) * ps])
            })
            .and_then(|()| self.space.sync());
        let Err(e) = written else {
            log::info!(
                "{} held page writes succeeded after {} retries; doublewrite area {} is free again",
                c.claims.len(),
                c.retries + 1,
                c.area
            );
            Metrics::add(&self.metrics.buffer_pages_written, c.claims.len() as u64);
            self.let_go(c, true, |claim| pool.release_written(claim.reattach(pool)));
            return Ok(());
        };
        if self.space.check_poisoned().is_err() {
            log::error!(
                "held page writes given up: the data files are poisoned ({e}); doublewrite \
                 area {} is kept for the restart's recovery",
                c.area
            );
            self.let_go(c, false, |claim| {
                pool.release_unwritten(claim.reattach(pool))
            });
            return Err(e);
        }
        c.retries += 1;
        let pause = RETRY_FIRST
            .saturating_mul(1 << c.retries.min(16))
            .min(RETRY_MAX);
        c.next_try = Instant::now() + pause;
        let path = path_of(&e, self.space.file_path(c.places[0].0).to_path_buf());
        let reason = format!(
            "a retry of {} held page writes failed ({e}); {} retries so far, the next in \
             {pause:?}; their copies in doublewrite area {} are kept",
            c.claims.len(),
            c.retries,
            c.area
        );
        let mut st = self.held.state.lock();
        st.last = Some((path.clone(), reason.clone()));
        st.waiting.push(c);
        Err(Error::WriteBackFailing { path, reason })
    }

    /// The chunk is done with: release its claims with `release`, forget
    /// its frames, and give its area back if `give_back` (otherwise it
    /// stays set aside for the restart's recovery).
    fn let_go(&self, c: Chunk, give_back: bool, release: impl Fn(Detached)) {
        let n = c.claims.len();
        let frames: Vec<(usize, u32)> = c.claims.iter().map(|k| (k.inst, k.fid)).collect();
        c.claims.into_iter().for_each(release);
        {
            let mut st = self.held.state.lock();
            for f in &frames {
                st.frames.remove(f);
            }
        }
        Metrics::sub(&self.metrics.buffer_flush_held_pages, n as u64);
        if let Some(d) = self.dblwr.as_ref().filter(|_| give_back) {
            d.give_back(c.area);
        }
        self.held.chunks.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
