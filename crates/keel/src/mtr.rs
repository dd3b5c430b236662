//! Mini-transactions: the atomic unit of page changes. An mtr holds the
//! exclusive latches of every page it changed until it commits; at commit
//! it appends the redo of those changes (the bytes each page changed, as a
//! diff against the page when it was latched), stamps the pages with the
//! group's end LSN and puts them on the flush list, then releases them.
//!
//! # All or nothing
//!
//! Only [`Mtr::commit`] logs. An mtr dropped without a successful commit
//! (its caller returned early with `?`, or a panic unwound through it)
//! leaves memory exactly as it was before the mtr: every page it holds,
//! the space header included, is put back byte for byte, a page taken
//! from the free list goes back on it with the header that listed it, a
//! page created at the high-water mark leaves the buffer pool, and no page
//! becomes dirty that was not. The same holds for pages a caller latched,
//! changed and never handed to the mtr. The undo is the page guard's own
//! (`buffer::guard`): each guard keeps the page as it was when latched and
//! puts it back when dropped, unless the change was logged
//! (`BufferPool::mark_dirty`). No other thread can have seen the changes:
//! an exclusive latch is held on every changed page from its first change
//! until the page is logged or put back, and it is put back before the
//! latch is released. Nothing was appended, so the log and the pages agree;
//! the only trace is what the budget had reserved, given back when the
//! budget is dropped.
//!
//! An mtr that changes pages and then must allocate or free one latches
//! the space header first ([`Mtr::latch_header`]), so that the read of page
//! 0 cannot fail half-way; if anything fails anyway, dropping the mtr puts
//! it all back.
//!
//! # Log space
//!
//! The append never waits for log space: its thread reserved the bytes
//! beforehand in a [`Budget`], holding no latch: [`mtr_bound`] (in
//! `engine::admission`) for the number of pages it may change, or, for
//! the common one-page operations, an [`estimate`] with that bound behind
//! it. Before appending, the mtr checks its exact size against the
//! budget. Past an estimate it takes the rest without waiting if the log
//! has room ("Estimates" in `engine::admission`); if it has not, if the
//! bound was ever wrong, or if the log refuses the append, it puts every
//! page back as it was before the mtr and fails, so memory never holds a
//! change the log does not.
//!
//! Page allocation lives here because it changes the space header page,
//! which then belongs to the same mtr as the tree change that needed it.

use crate::buffer::PageWrite;
use crate::engine::admission::Budget;
pub(crate) use crate::engine::admission::{estimate, mtr_bound};
use crate::engine::{space_header as sh, Engine};
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::page::{get_u32, init_page, page_type, put_u32, Lsn, PageId, PageType};
use crate::redo::format::{self, GROUP_HDR};
use crate::redo::BUFFER_WRITE_THRESHOLD;

/// A mini-transaction.
pub struct Mtr<'a> {
    e: &'a Engine,
    budget: &'a Budget<'a>,
    pages: Vec<PageWrite<'a>>,
    header: Option<PageWrite<'a>>,
    /// Pages allocated and freed, counted in the metrics at commit.
    allocated: u64,
    freed: u64,
}

impl<'a> Mtr<'a> {
    /// A mini-transaction whose redo `budget` pays for.
    pub(crate) fn new(e: &'a Engine, budget: &'a Budget<'a>) -> Mtr<'a> {
        Mtr {
            e,
            budget,
            pages: Vec::new(),
            header: None,
            allocated: 0,
            freed: 0,
        }
    }

    /// The engine this mtr changes pages of.
    pub(crate) fn engine(&self) -> &'a Engine {
        self.e
    }

    /// Latch the space header now (reading page 0 if it is not cached), so
    /// that the [`Mtr::alloc_page`] or [`Mtr::free_page`] that follows a
    /// change cannot fail on that read. Callers latch tree pages first and
    /// the header last, as every tree operation does.
    pub fn latch_header(&mut self) -> Result<()> {
        self.header().map(|_| ())
    }

    fn header(&mut self) -> Result<&mut PageWrite<'a>> {
        if self.header.is_none() {
            let id = PageId::new(self.e.space_id(), 0);
            self.header = Some(self.e.pool.write(id)?);
        }
        match self.header.as_mut() {
            Some(h) => Ok(h),
            None => unreachable!("space header latched just above"),
        }
    }

    /// Adopt `page`, the space header this thread has just created (a new
    /// space being laid out), as the mtr's header page, so that a later
    /// [`Mtr::alloc_page`] uses it instead of latching page 0 again.
    pub(crate) fn keep_header(&mut self, page: PageWrite<'a>) -> Result<()> {
        if self.header.is_some() || page.id().page_no != 0 {
            return Err(Error::Corruption(format!(
                "page {} cannot become the space header of this mini-transaction",
                page.id()
            )));
        }
        self.header = Some(page);
        Ok(())
    }

    /// The u32 field at `off` of the space header (latching it if needed).
    pub(crate) fn header_u32(&mut self, off: usize) -> Result<u32> {
        Ok(crate::page::get_u32(self.header()?, off))
    }

    /// Set the u32 field at `off` of the space header (latching it if
    /// needed).
    pub(crate) fn set_header_u32(&mut self, off: usize, v: u32) -> Result<()> {
        put_u32(self.header()?, off, v);
        Ok(())
    }

    /// The u64 field at `off` of the space header (latching it if needed).
    pub(crate) fn header_u64(&mut self, off: usize) -> Result<u64> {
        Ok(crate::page::get_u64(self.header()?, off))
    }

    /// Set the u64 field at `off` of the space header (latching it if
    /// needed).
    pub(crate) fn set_header_u64(&mut self, off: usize, v: u64) -> Result<()> {
        crate::page::put_u64(self.header()?, off, v);
        Ok(())
    }

    /// A new page, exclusively latched, zeroed, with its header initialised.
    pub fn alloc_page(&mut self, t: PageType) -> Result<PageWrite<'a>> {
        let space = self.e.space_id();
        let head = get_u32(self.header()?, sh::FREE_HEAD);
        let mut page = if head != 0 {
            let id = PageId::new(space, head);
            // A page freed earlier in this mtr is still latched by it.
            let mut p = match self.pages.iter().position(|p| p.id() == id) {
                Some(i) => self.pages.swap_remove(i),
                None => self.e.pool.write(id)?,
            };
            if page_type(&p) != Some(PageType::Free) {
                return Err(Error::Corruption(format!(
                    "page {id} is on the free list but has type {:?}",
                    page_type(&p)
                )));
            }
            let next = get_u32(&p, sh::FREE_NEXT);
            let h = self.header()?;
            put_u32(h, sh::FREE_HEAD, next);
            let count = get_u32(h, sh::FREE_COUNT);
            put_u32(h, sh::FREE_COUNT, count.saturating_sub(1));
            p.zero();
            init_page(&mut p, id, t);
            p
        } else {
            let hwm = get_u32(self.header()?, sh::HWM);
            if hwm == u32::MAX {
                return Err(Error::SpaceFull(format!(
                    "all {hwm} page numbers are in use"
                )));
            }
            let id = PageId::new(space, hwm);
            let mut p = self.e.pool.create(id)?;
            init_page(&mut p, id, t);
            put_u32(self.header()?, sh::HWM, hwm + 1);
            p
        };
        self.allocated += 1;
        // The caller owns the latch until it hands the page back with keep().
        crate::page::set_page_lsn(&mut page, 0);
        Ok(page)
    }

    /// Put a page that the tree no longer references on the free list.
    pub fn free_page(&mut self, page: PageWrite<'a>) -> Result<()> {
        self.free(page, true)
    }

    /// [`Mtr::free_page`] without zeroing the body: only the common header
    /// and the free-list link change, so the redo is a few bytes instead
    /// of a page. For overflow pages (`lob`), which are freed by the
    /// thousand; the stale bytes are zeroed when the page is allocated
    /// again, and no reader follows a link to a free page's body.
    pub(crate) fn free_page_unzeroed(&mut self, page: PageWrite<'a>) -> Result<()> {
        self.free(page, false)
    }

    fn free(&mut self, mut page: PageWrite<'a>, zero: bool) -> Result<()> {
        let id = page.id();
        if id.page_no == 0 {
            return Err(Error::Corruption(
                "attempt to free the space header page".into(),
            ));
        }
        let h = self.header()?;
        let head = get_u32(h, sh::FREE_HEAD);
        put_u32(h, sh::FREE_HEAD, id.page_no);
        let count = get_u32(h, sh::FREE_COUNT);
        put_u32(h, sh::FREE_COUNT, count + 1);
        if zero {
            page.zero();
            init_page(&mut page, id, PageType::Free);
        } else {
            crate::page::set_page_type(&mut page, PageType::Free);
        }
        put_u32(&mut page, sh::FREE_NEXT, head);
        self.pages.push(page);
        self.freed += 1;
        Ok(())
    }

    /// Hand over a modified page; its latch is held until commit.
    pub fn keep(&mut self, page: PageWrite<'a>) {
        self.pages.push(page);
    }

    /// Log the changes of every kept page, stamp them with the end LSN,
    /// dirty them and release the latches. On error nothing was logged and
    /// every page is as it was before the mtr (module doc).
    pub fn commit(mut self) -> Result<Lsn> {
        let end = self.finish()?;
        // The latches are released: a large log buffer may be written now.
        // The mtr is logged whatever happens here, so its caller must not
        // be told otherwise: a failed write-out poisons the log, and every
        // later append and sync reports that.
        if let Err(e) = self.e.log.write_if_buffered_over(BUFFER_WRITE_THRESHOLD) {
            log::error!("redo write-out after a mini-transaction failed: {e}");
        }
        Ok(end)
    }

    fn finish(&mut self) -> Result<Lsn> {
        let mut payload = Scratch::take();
        // Which pages changed: their indexes, kept inline for the usual
        // handful of pages.
        let mut changed = Changed::default();
        if let Some(h) = self.header.take() {
            self.pages.push(h);
        }
        for (i, p) in self.pages.iter_mut().enumerate() {
            if let Some((zeroed, changes)) = p.changes() {
                let id = p.id();
                format::encode_page_changes(
                    &mut payload.0,
                    id.space,
                    id.page_no,
                    zeroed,
                    p,
                    &changes,
                );
                changed.push(i);
            }
        }
        let mut all = std::mem::take(&mut self.pages);
        if changed.is_empty() {
            return Ok(0);
        }
        let payload = &payload.0;
        let len = (GROUP_HDR + payload.len()) as u64;
        let pool = &self.e.pool;
        let r = self.budget.check(len).and_then(|()| {
            self.e.log.append(format::kind::MTR, payload, |start, end| {
                for i in changed.iter() {
                    pool.mark_dirty(&mut all[i], start, end);
                }
            })
        });
        match r {
            Ok((end, ())) => {
                self.budget.spent(len);
                let m = &self.e.metrics;
                // Shared cache lines: a striped counter, and none touched
                // to add nothing (module doc of `metrics`).
                m.mtr_commits.add(1);
                if self.allocated != 0 {
                    Metrics::add(&m.space_pages_allocated, self.allocated);
                }
                if self.freed != 0 {
                    Metrics::add(&m.space_pages_freed, self.freed);
                }
                Ok(end)
            }
            // Dropping the pages unlogged puts them back (module doc).
            Err(e) => Err(e),
        }
    }
}

/// A mini-transaction's redo payload, built in a buffer its thread keeps
/// from one mini-transaction to the next (one or more reallocations per
/// mini-transaction before, a few per cent of a one-thread profile with
/// the allocator's own work); given back on drop, whatever way `finish`
/// returns.
struct Scratch(Vec<u8>);

thread_local! {
    static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// A payload buffer that grew past this is freed rather than kept.
const SCRATCH_MAX: usize = 1 << 16;

impl Scratch {
    fn take() -> Scratch {
        let mut v = SCRATCH.try_with(|s| s.take()).unwrap_or_default();
        v.clear();
        Scratch(v)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.0.capacity() <= SCRATCH_MAX {
            let v = std::mem::take(&mut self.0);
            // A thread being torn down has no slot left: the buffer is freed.
            let _ = SCRATCH.try_with(|s| s.set(v));
        }
    }
}

/// Indexes of the changed pages of a mini-transaction: inline up to
/// [`CHANGED_INLINE`], in a vector beyond.
#[derive(Default)]
struct Changed {
    inline: [u16; CHANGED_INLINE],
    n: usize,
    more: Vec<usize>,
}

const CHANGED_INLINE: usize = 16;

impl Changed {
    fn push(&mut self, i: usize) {
        match u16::try_from(i) {
            Ok(j) if self.n < CHANGED_INLINE && self.more.is_empty() => {
                self.inline[self.n] = j;
                self.n += 1;
            }
            _ => self.more.push(i),
        }
    }

    fn is_empty(&self) -> bool {
        self.n == 0 && self.more.is_empty()
    }

    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.inline[..self.n]
            .iter()
            .map(|&i| usize::from(i))
            .chain(self.more.iter().copied())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;
    use crate::btree::test_engine::engine;
    use crate::engine::admission::page_record_max;
    use crate::engine::admission::Purpose;
    use proptest::prelude::*;

    /// The changed pages' indexes come back in the order pushed, inline
    /// and past the inline ones alike.
    #[test]
    fn changed_indexes_come_back_in_order_past_the_inline_ones() {
        let pushed: Vec<usize> = (0..60).filter(|i| i % 3 != 1).collect();
        let mut c = Changed::default();
        assert!(c.is_empty());
        for &i in &pushed {
            c.push(i);
        }
        assert!(!c.is_empty());
        assert_eq!(c.iter().collect::<Vec<_>>(), pushed);
    }

    /// The worst patterns for the bound: every byte changed, and a change
    /// every `gap` bytes (as many ranges as merging allows).
    fn pattern(ps: usize, gap: usize) -> Vec<u8> {
        (0..ps)
            .map(|i| u8::from(gap == 0 || i % gap == 0))
            .collect()
    }

    fn record_len(before: &[u8], after: &[u8], zeroed: bool) -> u64 {
        let changes = format::diff_changes(before, after);
        let mut out = Vec::new();
        format::encode_page_changes(&mut out, 0, 1, zeroed, after, &changes);
        out.len() as u64
    }

    #[test]
    fn adversarial_pages_stay_within_the_page_record_bound() {
        for ps in [4096, 16384, 65536] {
            let before = vec![0u8; ps];
            for gap in [0, 1, 2, 8, 9, 10, 17, 4096] {
                let after = pattern(ps, gap);
                let n = record_len(&before, &after, false);
                assert!(n <= page_record_max(ps), "ps {ps} gap {gap}: {n}");
            }
        }
    }

    proptest! {
        #[test]
        fn every_page_record_stays_within_the_bound(
            ps in prop::sample::select(vec![4096usize, 16384, 65536]),
            edits in prop::collection::vec((any::<usize>(), 1usize..3000, any::<u8>()), 0..60),
            zeroed in any::<bool>(),
        ) {
            let before = vec![0x5au8; ps];
            let mut after = if zeroed { vec![0u8; ps] } else { before.clone() };
            for (off, len, v) in edits {
                let off = off % ps;
                let end = (off + len).min(ps);
                after[off..end].fill(v);
            }
            let base = if zeroed { vec![0u8; ps] } else { before };
            let n = record_len(&base, &after, zeroed);
            prop_assert!(n <= page_record_max(ps), "{} > {}", n, page_record_max(ps));
        }
    }

    /// Change page `id` through an mtr paid by `budget`; returns the result.
    fn change(e: &Engine, budget: &Budget<'_>, id: PageId, byte: u8) -> Result<Lsn> {
        let mut mtr = Mtr::new(e, budget);
        let mut p = e.pool.write(id).unwrap();
        p[100..200].fill(byte);
        mtr.keep(p);
        mtr.commit()
    }

    #[test]
    fn an_mtr_that_cannot_log_puts_its_pages_back_and_leaves_them_clean() {
        let e = engine(4096);
        let id = PageId::new(e.space_id(), 0);
        e.flush_and_checkpoint().unwrap();
        let before = e.pool.read(id).unwrap().to_vec();
        // A budget too small for the change: a broken bound.
        let small = e.adm.budget(Purpose::New);
        small.ensure(10).unwrap();
        let err = change(&e, &small, id, 7).unwrap_err();
        assert!(err.to_string().contains("redo bound"), "{err}");
        assert_eq!(&e.pool.read(id).unwrap()[..], &before[..]);
        assert_eq!(e.pool.oldest_modification(), None, "nothing may be dirty");
        // A log that refuses appends (poisoned).
        let budget = e.adm.budget(Purpose::New);
        budget.ensure(mtr_bound(1, 4096)).unwrap();
        e.log.poison_for_test("test");
        assert!(matches!(
            change(&e, &budget, id, 9),
            Err(Error::Poisoned(_))
        ));
        assert_eq!(&e.pool.read(id).unwrap()[..], &before[..]);
        assert_eq!(e.pool.oldest_modification(), None);
    }

    /// Allocate a page in its own committed mtr; returns its id.
    pub(crate) fn allocated(e: &Engine) -> PageId {
        let budget = e.adm.budget(Purpose::New);
        budget.ensure(mtr_bound(2, e.page_size())).unwrap();
        let mut mtr = Mtr::new(e, &budget);
        let p = mtr.alloc_page(PageType::BtreeLeaf).unwrap();
        let id = p.id();
        mtr.keep(p);
        mtr.commit().unwrap();
        id
    }

    /// What an uncommitted mtr must leave as it found: the header, pages
    /// `ids`, the log's end, the dirty pages, the allocation count.
    fn state(e: &Engine, ids: &[PageId]) -> (Vec<Vec<u8>>, Lsn, Option<Lsn>, u64) {
        let pages = ids.iter().map(|&id| e.pool.read(id).unwrap().to_vec());
        (
            pages.collect(),
            e.log.lsn(),
            e.pool.oldest_modification(),
            e.metrics
                .space_pages_allocated
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// An mtr that changes a page it keeps, takes the free page from the
    /// free list, creates a page at the high-water mark, and whose caller
    /// changes a page it never hands over; then fails, by an early return
    /// or a panic. Returns the page created.
    fn half_done(e: &Engine, kept: PageId, held: PageId, free: PageId, panic: bool) -> PageId {
        let budget = e.adm.budget(Purpose::New);
        budget.ensure(mtr_bound(5, e.page_size())).unwrap();
        let created = std::cell::Cell::new(None);
        let run = || -> Result<()> {
            let mut mtr = Mtr::new(e, &budget);
            let mut p = e.pool.write(kept)?;
            p[100..200].fill(7);
            mtr.keep(p);
            let from_list = mtr.alloc_page(PageType::BtreeLeaf)?;
            assert_eq!(from_list.id(), free, "the free page is reused first");
            mtr.keep(from_list);
            let mut fresh = mtr.alloc_page(PageType::BtreeInternal)?;
            fresh[300] = 1;
            created.set(Some(fresh.id()));
            let mut other = e.pool.write(held)?;
            other[500..600].fill(9);
            if panic {
                panic!("a bug half-way through a mini-transaction");
            }
            Err(Error::Corruption("half-way".into()))
        };
        if panic {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(run));
            assert!(r.is_err());
        } else {
            assert!(run().is_err());
        }
        created.get().unwrap()
    }

    /// Freeing a full page zeroes it: logged as a zeroed page and its
    /// header (it was logged as a diff over every byte the page held), and
    /// put back whole when the mtr is dropped unlogged.
    #[test]
    fn freeing_a_full_page_logs_its_header_not_its_bytes() {
        let e = engine(4096);
        let id = allocated(&e);
        let budget = e.adm.budget(Purpose::New);
        budget.ensure(mtr_bound(3, 4096)).unwrap();
        {
            let mut mtr = Mtr::new(&e, &budget);
            let mut p = e.pool.write(id).unwrap();
            for (i, b) in p[100..4000].iter_mut().enumerate() {
                *b = (i % 251) as u8 + 1;
            }
            mtr.keep(p);
            mtr.commit().unwrap();
        }
        let full = e.pool.read(id).unwrap().to_vec();
        {
            let mut mtr = Mtr::new(&e, &budget);
            mtr.free_page(e.pool.write(id).unwrap()).unwrap();
        }
        assert!(
            e.pool.read(id).unwrap()[..] == full[..],
            "dropped unlogged: as it was"
        );
        let start = e.log.lsn();
        let mut mtr = Mtr::new(&e, &budget);
        mtr.free_page(e.pool.write(id).unwrap()).unwrap();
        mtr.commit().unwrap();
        let logged = e.log.lsn() - start;
        assert!(logged < 100, "freeing a page logged {logged} bytes");
        let start = e.log.lsn();
        let mut mtr = Mtr::new(&e, &budget);
        let p = mtr.alloc_page(PageType::BtreeLeaf).unwrap();
        assert_eq!(p.id(), id, "the freed page is reused");
        mtr.keep(p);
        mtr.commit().unwrap();
        let logged = e.log.lsn() - start;
        assert!(logged < 100, "reusing a free page logged {logged} bytes");
    }

    #[test]
    fn an_mtr_dropped_uncommitted_by_an_error_or_a_panic_leaves_memory_as_it_was() {
        let e = engine(4096);
        let header = PageId::new(e.space_id(), 0);
        let (kept, held, free) = (allocated(&e), allocated(&e), allocated(&e));
        {
            let budget = e.adm.budget(Purpose::New);
            budget.ensure(mtr_bound(2, 4096)).unwrap();
            let mut mtr = Mtr::new(&e, &budget);
            mtr.free_page(e.pool.write(free).unwrap()).unwrap();
            mtr.commit().unwrap();
        }
        e.flush_and_checkpoint().unwrap();
        let ids = [header, kept, held, free];
        let before = state(&e, &ids);
        assert_eq!(before.2, None);
        for panic in [false, true] {
            let created = half_done(&e, kept, held, free, panic);
            let now = state(&e, &ids);
            for (i, id) in ids.iter().enumerate() {
                assert!(now.0[i] == before.0[i], "panic: {panic}: page {id} changed");
            }
            assert_eq!(now.1, before.1, "panic: {panic}: the log grew");
            assert_eq!(now.2, before.2, "panic: {panic}: a page is dirty");
            assert_eq!(now.3, before.3, "panic: {panic}: allocations counted");
            assert!(
                !e.pool.contains(created),
                "page {created}, created and never logged, is still in the pool"
            );
        }
        // The same changes commit as usual afterwards.
        assert_eq!(allocated(&e), free);
        assert!(e.log.lsn() > before.1);
    }
}
