//! [`UndoSpace`]: appending, reading and purging undo records.
//!
//! # Threads and latches
//!
//! Each rollback segment has two mutexes:
//!
//! - the *append mutex* serialises the appends of the rseg and guards its
//!   tail's page number in memory. An appender reserves its log space
//!   first (holding nothing: it may wait there), then takes the mutex and
//!   latches the tail page exclusively; when its records do not fit it
//!   also latches the directory page, then (allocating) the space header,
//!   and links a new tail. Appenders hold **no tree latch** when they call
//!   [`UndoSpace::append_all`] (the caller's contract), so waiting for the
//!   mutex or a page latch here cannot close a cycle with the trees.
//! - the *purge mutex* admits one purge of the rseg at a time. Purge copies
//!   a page's records out under a shared latch, releases it, hands each
//!   record to its callback holding no latch and no mutex (the callback
//!   may change trees), then advances the page's `purged` offset in an
//!   mtr. A page whose records are all purged is unlinked from the head
//!   of the list and freed in one mtr (the page, then the directory, then
//!   the space header) when it has a successor; the tail is never freed
//!   but reset to empty, under the append mutex, if nothing was appended
//!   to it meanwhile.
//!
//! The lock order is: purge mutex → append mutex → undo pages → directory
//! page → space header. Purge frees only a page that has a successor, and
//! appenders latch only the tail, so they never latch the same page but
//! when the head is the tail (the reset, which holds the append mutex).
//! Nobody waits for log space holding any of them: each mtr's budget is
//! ensured before the mutex or the first latch is taken.
//!
//! # Which rseg
//!
//! An appender names an rseg (the commit's, from its transaction id) but
//! takes the first one after it whose append mutex is free, and waits
//! for the one it named only when all are held (trying the others never
//! waits and holds nothing, so the lock order above stands). An
//! appender holds the mutex for a whole mtr, latches and log append
//! included, so with more threads than cores one preempted appender used
//! to put every thread of its rseg to sleep behind it: at 256 threads on
//! 2 cores this mutex was where threads blocked most. Any rseg will do: an undo record stands
//! alone (it names its table, key and commit; the row's roll pointer
//! names its page), purge takes each record on its own, and a commit's
//! records already lay in rsegs of other commits' interleaved. A commit's
//! records may now lie in several rsegs; a record appended again after a
//! crash or a retry may lie in another rseg than the first copy, which
//! purge already allows for (two records holding one version).
//!
//! # What a failure leaves behind
//!
//! Every change is one mtr: an append that fails leaves the pages as they
//! were and nothing counted; a purge that fails after some callbacks ran
//! has advanced `purged` over the records whose callback returned (best
//! effort) and returns the error: the others are handed out again by the
//! next purge, so callbacks must be idempotent (as InnoDB's purge is).
//!
//! # Purge order
//!
//! Records are appended in roughly, not exactly, commit order (commits of
//! one rseg may reach [`UndoSpace::append_all`] out of order), so purge stops
//! at the first record whose commit is at or above its limit, even if a
//! later one is below it: conservative, and it keeps each list a queue.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::{
    check_dir, decode, dir_slot, init_undo_page, page_end, page_head, reset_undo_page,
    set_dir_slot, OwnedUndo, RollPtr, UndoCheck, UndoRecord, MAX_COMMIT, NEXT, N_RSEGS, PURGED,
    RECORDS_START, USED,
};
use crate::engine::admission::{Budget, Purpose};
use crate::engine::{space_header as sh, Engine};
use crate::error::{Error, Result};
use crate::metrics::{timed_wait, Metrics};
use crate::mtr::{estimate, mtr_bound, Mtr};
use crate::page::{get_u32, get_u64, put_u32, PageBytes, PageId, PageType};

/// One rollback segment's mutexes (module doc).
struct Rseg {
    /// The tail's page number (0 = no page yet).
    append: Mutex<u32>,
    purge: Mutex<()>,
}

/// What one [`UndoSpace::purge`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PurgeStep {
    /// Records handed to the callback and marked purged.
    pub records: u64,
    /// Pages freed or reset to empty.
    pub pages_freed: u64,
    /// The commit of the first record at or above the limit, if purge
    /// stopped there.
    pub blocked_at: Option<u64>,
}

/// The undo records of one space: the directory, its rollback segments,
/// the history length (see the module doc for the threads).
pub(crate) struct UndoSpace {
    dir: PageId,
    rsegs: Vec<Rseg>,
    /// FIRST records not yet purged.
    history: AtomicU64,
    /// Undo pages in the lists (the directory not counted).
    pages: AtomicU64,
}

impl UndoSpace {
    /// Read the directory named by the space header and walk every list:
    /// learn each tail and count the history length. A space laid out
    /// before undo existed gets its directory now (one mtr).
    pub fn open(e: &Engine) -> Result<UndoSpace> {
        let space = e.space_id();
        let mut dir_no = get_u32(&e.pool.read(PageId::new(space, 0))?, sh::UNDO_DIR);
        if dir_no == 0 {
            if e.opts.read_only {
                return Err(Error::ReadOnly(
                    "cannot open the database read-only: its space was laid out before undo \
                     existed and needs an undo directory, which an open without read_only adds"
                        .into(),
                ));
            }
            let budget = e.adm.budget(Purpose::New);
            budget.ensure(mtr_bound(2, e.page_size()))?;
            let mut mtr = Mtr::new(e, &budget);
            dir_no = super::create_undo_dir(&mut mtr)?;
            mtr.commit()?;
        }
        let dir = PageId::new(space, dir_no);
        let found = super::check_lists(e, dir)?;
        let rsegs = found
            .tails
            .iter()
            .map(|&t| Rseg {
                append: Mutex::new(t),
                purge: Mutex::new(()),
            })
            .collect();
        Metrics::set(&e.metrics.trx_rseg_history_len, found.first_unpurged);
        Ok(UndoSpace {
            dir,
            rsegs,
            history: AtomicU64::new(found.first_unpurged),
            pages: AtomicU64::new(found.pages),
        })
    }

    /// FIRST records not yet purged (InnoDB's history list length).
    pub fn history_len(&self) -> u64 {
        self.history.load(Ordering::Acquire)
    }

    /// Undo pages in use (the directory not counted).
    pub fn pages(&self) -> u64 {
        self.pages.load(Ordering::Acquire)
    }

    /// The directory page.
    #[cfg(test)]
    pub fn dir(&self) -> PageId {
        self.dir
    }

    fn rseg(&self, rseg: usize) -> Result<&Rseg> {
        self.rsegs.get(rseg).ok_or_else(|| {
            Error::Corruption(format!(
                "rollback segment {rseg} of {N_RSEGS} does not exist"
            ))
        })
    }

    /// The append mutex of rseg `hint` if it is free, else of the first
    /// free one after it, else (all held) of `hint`, waiting for it (a
    /// counted wait): which rseg it took, and its guard.
    fn lock_some_rseg(&self, e: &Engine, hint: usize) -> (usize, parking_lot::MutexGuard<'_, u32>) {
        let n = self.rsegs.len();
        for k in 0..n {
            let i = (hint + k) % n;
            if let Some(g) = self.rsegs[i].append.try_lock() {
                return (i, g);
            }
        }
        let m = &e.metrics;
        let g = timed_wait(&m.wait_rseg_mutex, &m.wait_rseg_mutex_ns, || {
            self.rsegs[hint].append.lock()
        });
        (hint, g)
    }

    /// Append `rec` in its own mtr ([`UndoSpace::append_all`] of one
    /// record); returns where it lies.
    #[cfg(test)]
    pub fn append(
        &self,
        e: &Engine,
        budget: &Budget<'_>,
        rseg: usize,
        rec: &UndoRecord<'_>,
    ) -> Result<RollPtr> {
        let mut at = Vec::with_capacity(1);
        self.append_all(e, budget, rseg, std::slice::from_ref(rec), &mut at)?;
        at.pop()
            .ok_or_else(|| Error::Corruption("an undo append returned no record".into()))
    }

    /// Append `recs[at.len()..]` in order, pushing where each lies onto
    /// `at`, paid by `budget`: in as few mtrs as the pages allow, each
    /// filling the rseg's tail page or, when the next record does not fit
    /// there, one new page. Each mtr appends to rseg `rseg` or, if another
    /// thread is appending there, to the first rseg after it that nobody
    /// is appending to (see "Which rseg" in the module doc). The caller
    /// holds no latch (module doc). On error `at` holds the records
    /// appended so far, each logged: calling again with it appends the
    /// rest (a commit's retry).
    ///
    /// A commit's undo records go in one call, most often one mtr: one
    /// group header, one page record and one byte range for all of them
    /// instead of one each (on the OLTP `read_write` workload about 5
    /// records a transaction, 150-200 bytes of redo less).
    pub fn append_all(
        &self,
        e: &Engine,
        budget: &Budget<'_>,
        rseg: usize,
        recs: &[UndoRecord<'_>],
        at: &mut Vec<RollPtr>,
    ) -> Result<()> {
        self.rseg(rseg)?;
        let ps = e.page_size();
        for rec in recs {
            let len = rec.encoded_len();
            if RECORDS_START + len > page_end(ps) || rec.key.len() > usize::from(u16::MAX) {
                return Err(Error::Corruption(format!(
                    "an undo record of {len} bytes (key {} bytes) does not fit an undo page of \
                     {ps} bytes: the key or value exceeds the page size's limits",
                    rec.key.len()
                )));
            }
        }
        while let Some(rest) = recs.get(at.len()..).filter(|r| !r.is_empty()) {
            // The records (a page's worth at most) and two header fields
            // each; a new page (old tail, new page, directory, space
            // header) is topped up at commit.
            let bytes: usize = rest.iter().map(|r| r.encoded_len() + 16).sum();
            let done =
                budget.with_estimate(estimate(ps, bytes.min(ps)), mtr_bound(4, ps), || {
                    self.append_once(e, budget, rseg, rest)
                })?;
            at.extend(done);
        }
        Ok(())
    }

    /// [`UndoSpace::append_all`]'s one mtr: appends the longest prefix of
    /// `recs` (one record at least) that fits the tail page, or a new page
    /// if not even the first does; returns where each lies. On error
    /// nothing is changed (the mtr puts its pages back; the tail moves
    /// only once it is logged).
    fn append_once(
        &self,
        e: &Engine,
        budget: &Budget<'_>,
        rseg: usize,
        recs: &[UndoRecord<'_>],
    ) -> Result<Vec<RollPtr>> {
        let ps = e.page_size();
        let space = e.space_id();
        // How many of `recs`, from the first, fit in `room` bytes.
        let fitting = |room: usize| {
            let mut used = 0;
            recs.iter()
                .take_while(|r| {
                    used += r.encoded_len();
                    used <= room
                })
                .count()
        };
        let (rseg, mut tail) = self.lock_some_rseg(e, rseg);
        e.failpoints.hit("undo.appending");
        let mut mtr = Mtr::new(e, budget);
        let mut old = None;
        let mut n = 0;
        if *tail != 0 {
            let id = PageId::new(space, *tail);
            let p = e.pool.write(id)?;
            let h = page_head(&p, id)?;
            if h.next != 0 {
                return Err(Error::Corruption(format!(
                    "undo page {id}, the tail of rseg {rseg}, links to page {}",
                    h.next
                )));
            }
            n = fitting(page_end(ps).saturating_sub(h.used));
            old = Some(p);
        }
        let (mut page, fresh) = match old {
            Some(p) if n > 0 => (p, false),
            old => {
                let mut d = e.pool.write(self.dir)?;
                check_dir(&d, self.dir)?;
                let (first, last) = dir_slot(&d, rseg);
                if last != *tail {
                    return Err(Error::Corruption(format!(
                        "undo directory {}: rseg {rseg} ends at page {last}, its tail is {}",
                        self.dir, *tail
                    )));
                }
                let mut p = mtr.alloc_page(PageType::Undo)?;
                init_undo_page(&mut p);
                let no = p.id().page_no;
                match old {
                    Some(mut o) => {
                        put_u32(&mut o, NEXT, no);
                        mtr.keep(o);
                        set_dir_slot(&mut d, rseg, first, no);
                    }
                    None => set_dir_slot(&mut d, rseg, no, no),
                }
                mtr.keep(d);
                // At least the first: `append_all` checked that every
                // record fits an empty page.
                n = fitting(page_end(ps) - RECORDS_START).max(1);
                (p, true)
            }
        };
        let id = page.id();
        let start = usize::from(crate::page::get_u16(&page, USED));
        let end = start + recs[..n].iter().map(|r| r.encoded_len()).sum::<usize>();
        let mut at = Vec::with_capacity(n);
        let mut max = get_u64(&page, MAX_COMMIT);
        {
            // Through one range: the guard keeps and diffs only these
            // bytes, and logs them as one.
            let b = page.range_mut(start..end);
            let mut off = 0;
            for rec in &recs[..n] {
                let len = rec.encoded_len();
                rec.encode(&mut b[off..off + len]);
                at.push(RollPtr::new(id.page_no, (start + off) as u16));
                max = max.max(rec.commit);
                off += len;
            }
        }
        page.set_u16(USED, end as u16);
        page.set_u64(MAX_COMMIT, max);
        mtr.keep(page);
        mtr.commit()?;
        if fresh {
            *tail = id.page_no;
            self.pages.fetch_add(1, Ordering::AcqRel);
        }
        drop(tail);
        let firsts = recs[..n].iter().filter(|r| r.first).count() as u64;
        if firsts > 0 {
            self.history.fetch_add(firsts, Ordering::AcqRel);
            Metrics::add(&e.metrics.trx_rseg_history_len, firsts);
        }
        Ok(at)
    }

    /// The record `ptr` names. Checks the page's type and the record's
    /// framing: anything else is `Error::Corruption` naming page and
    /// offset, never a panic.
    pub fn read(&self, e: &Engine, ptr: RollPtr) -> Result<OwnedUndo> {
        let id = PageId::new(e.space_id(), ptr.page_no());
        if ptr.page_no() == 0 {
            return Err(Error::Corruption(format!(
                "undo pointer {:#x} names no undo page (page 0, offset {})",
                ptr.raw(),
                ptr.offset()
            )));
        }
        let page = e.pool.read(id)?;
        let h = page_head(&page, id)?;
        let (rec, _) = decode(&page, id, usize::from(ptr.offset()), h.used)?;
        Ok(rec.to_owned())
    }

    /// Purge rseg `rseg`: hand its unpurged records with a commit below
    /// `limit` to `on_record`, oldest first, at most `max_records`, and
    /// free the pages emptied (module doc: order, latches, failures).
    pub fn purge(
        &self,
        e: &Engine,
        rseg: usize,
        limit: u64,
        max_records: usize,
        on_record: &mut dyn FnMut(&OwnedUndo) -> Result<()>,
    ) -> Result<PurgeStep> {
        let r = self.rseg(rseg)?;
        let _one = r.purge.lock();
        let mut step = PurgeStep::default();
        let budget = e.adm.budget(Purpose::New);
        loop {
            let head = dir_slot(&e.pool.read(self.dir)?, rseg).0;
            if head == 0 {
                return Ok(step);
            }
            let id = PageId::new(e.space_id(), head);
            let (h, recs, blocked) =
                self.copy_out(e, id, limit, max_records - step.records as usize)?;
            if !recs.is_empty() {
                self.consume(e, &budget, id, h.purged, recs, on_record, &mut step)?;
            }
            if blocked.is_some() {
                step.blocked_at = blocked;
                return Ok(step);
            }
            if !self.release_head(e, &budget, r, rseg, id)? {
                return Ok(step);
            }
            step.pages_freed += 1;
            Metrics::add(&e.metrics.purge_undo_log_pages, 1);
            if step.records as usize >= max_records {
                return Ok(step);
            }
        }
    }

    /// Copy out the unpurged records of page `id` below `limit`, at most
    /// `max`, under a shared latch: the header, each record with its end
    /// offset, and the commit that blocked the copy, if one did.
    #[allow(clippy::type_complexity)]
    fn copy_out(
        &self,
        e: &Engine,
        id: PageId,
        limit: u64,
        max: usize,
    ) -> Result<(super::PageHead, Vec<(OwnedUndo, usize)>, Option<u64>)> {
        let page = e.pool.read(id)?;
        let h = page_head(&page, id)?;
        let mut out = Vec::new();
        let mut off = h.purged;
        while off < h.used && out.len() < max {
            let (rec, end) = decode(&page, id, off, h.used)?;
            if rec.commit >= limit {
                return Ok((h, out, Some(rec.commit)));
            }
            out.push((rec.to_owned(), end));
            off = end;
        }
        Ok((h, out, None))
    }

    /// Run the callback on each record copied from page `id` (purged from
    /// `from`), holding nothing, then advance the page's `purged` offset
    /// over those whose callback returned.
    #[allow(clippy::too_many_arguments)]
    fn consume(
        &self,
        e: &Engine,
        budget: &Budget<'_>,
        id: PageId,
        from: usize,
        recs: Vec<(OwnedUndo, usize)>,
        on_record: &mut dyn FnMut(&OwnedUndo) -> Result<()>,
        step: &mut PurgeStep,
    ) -> Result<()> {
        let mut done = from;
        let mut firsts = 0u64;
        let mut n = 0u64;
        let mut err = None;
        for (rec, end) in &recs {
            if let Err(x) = on_record(rec) {
                err = Some(x);
                break;
            }
            done = *end;
            firsts += u64::from(rec.first);
            n += 1;
        }
        if n > 0 {
            let ps = e.page_size();
            budget.with_estimate(estimate(ps, 2), mtr_bound(1, ps), || {
                let mut mtr = Mtr::new(e, budget);
                let mut p = e.pool.write(id)?;
                let h = page_head(&p, id)?;
                if h.purged != from || done > h.used {
                    return Err(Error::Corruption(format!(
                        "undo page {id}: purged offset moved from {from} to {} during a purge",
                        h.purged
                    )));
                }
                p.set_u16(PURGED, done as u16);
                mtr.keep(p);
                mtr.commit()
            })?;
            step.records += n;
            self.history.fetch_sub(firsts, Ordering::AcqRel);
            Metrics::sub(&e.metrics.trx_rseg_history_len, firsts);
        }
        err.map_or(Ok(()), Err)
    }

    /// If every record of head page `id` is purged: free it when it has a
    /// successor, else (the tail) reset it to empty if nothing was
    /// appended meanwhile and it is not empty already. True if it did.
    fn release_head(
        &self,
        e: &Engine,
        budget: &Budget<'_>,
        r: &Rseg,
        rseg: usize,
        id: PageId,
    ) -> Result<bool> {
        // The page, the directory, the space header.
        budget.ensure(mtr_bound(3, e.page_size()))?;
        let mut mtr = Mtr::new(e, budget);
        let p = e.pool.write(id)?;
        let h = page_head(&p, id)?;
        if h.purged != h.used {
            return Ok(false);
        }
        if h.next != 0 {
            let mut d = e.pool.write(self.dir)?;
            check_dir(&d, self.dir)?;
            let (first, last) = dir_slot(&d, rseg);
            if first != id.page_no || last == id.page_no {
                return Err(Error::Corruption(format!(
                    "undo directory {}: rseg {rseg} runs from page {first} to {last}, but \
                     its head page {id} links to page {}",
                    self.dir, h.next
                )));
            }
            set_dir_slot(&mut d, rseg, h.next, last);
            mtr.keep(d);
            mtr.free_page(p)?;
            mtr.commit()?;
            self.pages.fetch_sub(1, Ordering::AcqRel);
            return Ok(true);
        }
        drop(p);
        drop(mtr);
        if h.used == RECORDS_START {
            return Ok(false);
        }
        // The tail: under the append mutex (taken before the latch).
        let _tail = r.append.lock();
        let mut mtr = Mtr::new(e, budget);
        let mut p = e.pool.write(id)?;
        let now = page_head(&p, id)?;
        if now.next != 0 || now.used != now.purged {
            // Appended to meanwhile: what was appended is purged later.
            return Ok(false);
        }
        reset_undo_page(&mut p);
        mtr.keep(p);
        mtr.commit()?;
        Ok(true)
    }

    /// Check every list (see [`super::check_lists`]) while no append or
    /// purge runs: takes every rseg's purge then append mutex.
    pub fn check(&self, e: &Engine) -> Result<UndoCheck> {
        let purges: Vec<_> = self.rsegs.iter().map(|r| r.purge.lock()).collect();
        let tails: Vec<_> = self.rsegs.iter().map(|r| r.append.lock()).collect();
        let c = super::check_lists(e, self.dir)?;
        for (i, t) in tails.iter().enumerate() {
            if c.tails[i] != **t {
                return Err(Error::Corruption(format!(
                    "undo rseg {i}: its list ends at page {}, its tail in memory is {}",
                    c.tails[i], **t
                )));
            }
        }
        drop(tails);
        drop(purges);
        Ok(c)
    }
}

const _: () = assert!(super::RECORDS_START > PURGED && super::RECORDS_START <= u16::MAX as usize);
