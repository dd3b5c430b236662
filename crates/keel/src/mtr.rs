//! Mini-transactions: the atomic unit of page changes. An mtr holds the
//! exclusive latches of every page it changed until it commits; at commit
//! it appends the redo of those changes (the bytes each page changed, as a
//! diff against the page when it was latched), stamps the pages with the
//! group's end LSN and puts them on the flush list, then releases them.
//!
//! The append never waits for log space: its thread reserved the bytes
//! beforehand in a [`Budget`], holding no latch. The bound it reserved is
//! [`mtr_bound`] (in `engine::admission`) for the number of pages it may
//! change; before appending,
//! the mtr checks its exact size against the budget, and if the bound was
//! ever wrong (or the log refuses the append) it puts every page back as it
//! was before the mtr and fails, so memory never holds a change the log
//! does not.
//!
//! Page allocation lives here because it changes the space header page,
//! which then belongs to the same mtr as the tree change that needed it.

use crate::buffer::PageWrite;
pub(crate) use crate::engine::admission::mtr_bound;
use crate::engine::admission::Budget;
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
}

impl<'a> Mtr<'a> {
    /// A mini-transaction whose redo `budget` pays for.
    pub(crate) fn new(e: &'a Engine, budget: &'a Budget<'a>) -> Mtr<'a> {
        Mtr {
            e,
            budget,
            pages: Vec::new(),
            header: None,
        }
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
        Metrics::add(&self.e.metrics.space_pages_allocated, 1);
        // The caller owns the latch until it hands the page back with keep().
        crate::page::set_page_lsn(&mut page, 0);
        Ok(page)
    }

    /// Put a page that the tree no longer references on the free list.
    pub fn free_page(&mut self, mut page: PageWrite<'a>) -> Result<()> {
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
        init_page(&mut page, id, PageType::Free);
        put_u32(&mut page, sh::FREE_NEXT, head);
        self.pages.push(page);
        Metrics::add(&self.e.metrics.space_pages_freed, 1);
        Ok(())
    }

    /// Hand over a modified page; its latch is held until commit.
    pub fn keep(&mut self, page: PageWrite<'a>) {
        self.pages.push(page);
    }

    /// Log the changes of every kept page, stamp them with the end LSN,
    /// dirty them and release the latches. On error nothing was logged and
    /// every page is as it was before the mtr.
    pub fn commit(mut self) -> Result<Lsn> {
        let r = self.finish();
        // The latches are released: a large log buffer may be written now.
        if r.is_ok() {
            self.e.log.write_if_buffered_over(BUFFER_WRITE_THRESHOLD)?;
        }
        r
    }

    fn finish(&mut self) -> Result<Lsn> {
        let mut payload = Vec::new();
        let mut changed = Vec::new();
        for (i, p) in self.pages.iter().chain(self.header.iter()).enumerate() {
            if let Some((zeroed, ranges)) = p.changes() {
                let id = p.id();
                format::encode_page_record(&mut payload, id.space, id.page_no, zeroed, p, &ranges);
                changed.push(i);
            }
        }
        let mut all: Vec<PageWrite<'a>> = self.pages.drain(..).chain(self.header.take()).collect();
        if changed.is_empty() {
            return Ok(0);
        }
        let len = (GROUP_HDR + payload.len()) as u64;
        let pool = &self.e.pool;
        let r = self.budget.check(len).and_then(|()| {
            self.e
                .log
                .append(format::kind::MTR, &payload, |start, end| {
                    for &i in &changed {
                        pool.mark_dirty(&mut all[i], start, end);
                    }
                })
        });
        match r {
            Ok((end, ())) => {
                self.budget.spent(len);
                Metrics::add(&self.e.metrics.mtr_commits, 1);
                Ok(end)
            }
            Err(e) => {
                // Memory must never hold a change the log does not.
                for &i in &changed {
                    all[i].undo_changes();
                }
                Err(e)
            }
        }
    }
}

impl Drop for Mtr<'_> {
    fn drop(&mut self) {
        // Kept pages were changed in memory: log them even if the caller
        // bailed out with an error (or undo them if that fails).
        if let Err(e) = self.finish() {
            log::error!("mini-transaction could not be logged and was undone: {e}");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::btree::test_engine::engine;
    use crate::engine::admission::page_record_max;
    use crate::engine::admission::Purpose;
    use proptest::prelude::*;

    /// The worst patterns for the bound: every byte changed, and a change
    /// every `gap` bytes (as many ranges as merging allows).
    fn pattern(ps: usize, gap: usize) -> Vec<u8> {
        (0..ps)
            .map(|i| u8::from(gap == 0 || i % gap == 0))
            .collect()
    }

    fn record_len(before: &[u8], after: &[u8], zeroed: bool) -> u64 {
        let ranges = format::diff_ranges(before, after);
        let mut out = Vec::new();
        format::encode_page_record(&mut out, 0, 1, zeroed, after, &ranges);
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
}
