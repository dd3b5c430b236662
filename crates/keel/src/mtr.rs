//! Mini-transactions: the atomic unit of page changes. An mtr holds the
//! exclusive latches of every page it changed until it commits; at commit
//! the pages are stamped with the mtr's end LSN and enter the flush list.
//! (With the redo log, commit also appends the mtr's redo records.)
//!
//! Page allocation lives here because it changes the space header page,
//! which then belongs to the same mtr as the tree change that needed it.

use crate::buffer::PageWrite;
use crate::engine::{space_header as sh, Engine};
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::page::Lsn;
use crate::page::{get_u32, init_page, page_type, put_u32, PageId, PageType};
use crate::redo::format;

/// A mini-transaction.
pub struct Mtr<'a> {
    e: &'a Engine,
    pages: Vec<PageWrite<'a>>,
    header: Option<PageWrite<'a>>,
}

impl<'a> Mtr<'a> {
    pub(crate) fn new(e: &'a Engine) -> Mtr<'a> {
        Mtr {
            e,
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
    /// dirty them and release the latches.
    pub fn commit(mut self) -> Result<Lsn> {
        self.finish()
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
        if changed.is_empty() {
            self.pages.clear();
            self.header = None;
            return Ok(0);
        }
        let pool = &self.e.pool;
        let mut all: Vec<&mut PageWrite<'a>> = self
            .pages
            .iter_mut()
            .chain(self.header.iter_mut())
            .collect();
        let len = (format::GROUP_HDR + payload.len()) as u64;
        let r = self
            .e
            .log
            .append(format::kind::MTR, &payload, move |_, end| {
                for &i in &changed {
                    pool.mark_dirty(&mut *all[i], end - len, end);
                }
            });
        self.pages.clear();
        self.header = None;
        Metrics::add(&self.e.metrics.mtr_commits, 1);
        r.map(|(end, ())| end)
    }
}

impl Drop for Mtr<'_> {
    fn drop(&mut self) {
        // Kept pages were changed in memory; they must not be left clean and
        // unlogged even if the caller bailed out with an error.
        if let Err(e) = self.finish() {
            log::error!("mini-transaction could not be logged: {e}");
        }
    }
}
