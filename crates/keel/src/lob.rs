//! Large values: overflow chains (InnoDB's off-page columns, its
//! `DYNAMIC` row format). A value too long to sit in its leaf is written
//! to a chain of overflow pages, and the leaf keeps only a 20-byte
//! [`Pointer`] to it (the version header's `EXTERNAL` flag says so; see
//! `txn::version`). This module writes, reads and frees chains; it knows
//! nothing of rows, versions or transactions.
//!
//! # Layout
//!
//! An overflow page (type [`PageType::Overflow`]), after the common header:
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 32 | 8 | chain id: the same on every page of one chain, never reused |
//! | 40 | 4 | next page of the chain (0 = the last) |
//! | 44 | 4 | bytes of the value in this page |
//! | 48 | 8 | on the first page (the *head*): the value's length |
//! | 56 | 4 | on the head: the head of the next chain of the same bundle (0 = none) |
//! | 60 | 4 | reserved, zero |
//! | 64 | 8 | on the head: that next chain's id |
//! | 72 | … | the bytes of the value |
//!
//! Chain ids come from the space header's `CHAIN_SEQ`, raised by the mtr
//! that writes a chain's head, so no two chains ever share one, across
//! restarts too. A [`Pointer`] names a chain by head page, length and id.
//!
//! The directory page (type [`PageType::LobDir`], named by the space
//! header's `LOB_DIR`) has slots of 12 bytes from offset 32: a bundle's
//! first head (u32) and its chain id (u64); head 0 = a free slot.
//!
//! # Lifetime of a chain
//!
//! - **Written before it is referenced.** A commit writes the chains of its
//!   large values before its commit record, in mtrs of a few pages each,
//!   so a value larger than the redo log still fits it (each mtr reserves
//!   its log space as any writer does). The commit record and the row
//!   carry only the pointer. Recovery restores the pages from their
//!   own redo, which precedes the record in the log.
//! - **A bundle** is the chains one commit (or one bulk load) writes: the
//!   first chain's head is entered in a directory slot by the mtr that
//!   writes it, each next chain is linked from the previous head. The slot
//!   is cleared once every chain is referenced: after the commit's ops are
//!   applied and before its "applied" marker (so recovery, which re-applies
//!   a commit whose marker is not durable, clears it too: a commit with a
//!   large value logs its record whole, `txn::record`), or by the mtr
//!   that publishes a bulk load. A crash before the commit record leaves a
//!   slot naming chains nobody references; [`Lobs::free_orphans`] frees
//!   them at the next open, after recovery finished the logged commits and
//!   before unfinished bulk loads are dropped. A commit that fails before
//!   its record is logged frees its bundle at once ([`Bundle`]'s drop).
//! - **Freed when its version is gone**: by purge when it drops the undo
//!   record holding the version that pointed to the chain (no view can
//!   read that version any more), and by a drop, truncate or failed bulk
//!   load when it frees the leaf holding the pointer.
//! - **Freeing is idempotent.** [`free_chain`] first frees the pages after
//!   the head, a batch per mtr, relinking the head past them (a crash
//!   leaves a shorter, valid chain), then frees the head in an mtr of its
//!   own. It checks the head's type and chain id first and does nothing if
//!   they differ: the chain was freed already and the page perhaps reused.
//!   This matters because two undo records may hold the same version (a
//!   commit's op retried after its undo record was written, or re-applied
//!   by recovery, appends the record again), and a drop may follow a
//!   bundle's cleanup over the same chains.
//!
//! # Latches and waits
//!
//! Latch order: tree pages (a bulk load's publish holds the table's root
//! and its hidden root), then the directory page, then chain pages (head
//! first, then down the chain), then the space header (allocation and
//! freeing) last. Nobody holding the directory or a chain page latches a
//! tree or undo page: chains are written before the commit's ops are
//! applied, and purge, drops and the open free them holding nothing else
//! (a bundle's cleanup latches a head after the directory only when its
//! trim has just found the chain there: a freed head may be any page by
//! now). A reader latches one chain page at a time, shared, holding
//! nothing else, and waits for nothing while it holds it. A reader
//! reaches a chain only through a version its read view needs
//! (registered, so purge keeps it), or through the latest version of a
//! row it locked; a read racing a drop or truncate of the table may find
//! the chain freed, which is reported as the table's change (the caller
//! checks the table again when the read fails).
//!
//! The directory has a fixed number of slots: a commit that would need one
//! while all are held waits (holding its row locks, no latch) until a
//! commit or load releases one; releasing never waits for a slot, so the
//! wait ends.

use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::btree::Pages;
use crate::buffer::PageWrite;
use crate::engine::admission::Purpose;
use crate::engine::{space_header as sh, Engine};
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::mtr::{mtr_bound, Mtr};
use crate::page::{
    get_u32, get_u64, page_type, put_u32, put_u64, PageId, PageType, PAGE_HEADER_SIZE,
};

/// Longest value a table accepts: 1 GiB (a commit holds its values in
/// memory until they are written).
pub const MAX_VALUE_LEN: usize = 1 << 30;

/// Bytes of a [`Pointer`] as stored in a row.
pub(crate) const POINTER_LEN: usize = 20;

const ID: usize = PAGE_HEADER_SIZE;
const NEXT: usize = PAGE_HEADER_SIZE + 8;
const USED: usize = PAGE_HEADER_SIZE + 12;
const TOTAL: usize = PAGE_HEADER_SIZE + 16;
const BUNDLE: usize = PAGE_HEADER_SIZE + 24;
const BUNDLE_ID: usize = PAGE_HEADER_SIZE + 32;
/// Where a page's part of the value starts.
pub(crate) const DATA: usize = PAGE_HEADER_SIZE + 40;

/// Directory: first slot, and bytes per slot.
const SLOTS: usize = PAGE_HEADER_SIZE;
const SLOT: usize = 12;

/// Most pages of a chain one mtr writes or frees.
const BATCH: usize = 16;

/// Bytes of a value one overflow page of `page_size` bytes holds.
pub(crate) const fn payload(page_size: usize) -> usize {
    page_size - DATA
}

/// Slots of the directory on pages of `page_size` bytes.
const fn slots(page_size: usize) -> usize {
    (page_size - SLOTS) / SLOT
}

/// The slot at offset `o` of directory page `p`: (head, chain id).
fn slot(p: &[u8], o: usize) -> (u32, u64) {
    (get_u32(p, o), get_u64(p, o + 4))
}

fn set_slot(p: &mut [u8], o: usize, (head, id): (u32, u64)) {
    put_u32(p, o, head);
    put_u64(p, o + 4, id);
}

/// Offset of the first slot of directory page `p` holding `first`
/// ((0, 0): a free slot).
fn slot_of(p: &[u8], first: (u32, u64)) -> Option<usize> {
    (0..slots(p.len()))
        .map(|i| SLOTS + SLOT * i)
        .find(|&o| slot(p, o) == first)
}

/// Where a large value is: its chain's head page, length and id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pointer {
    pub head: u32,
    pub len: u64,
    pub id: u64,
}

impl Pointer {
    /// The stored form: head u32, length u64, id u64, little-endian.
    pub(crate) fn to_bytes(self) -> [u8; POINTER_LEN] {
        let mut b = [0u8; POINTER_LEN];
        b[..4].copy_from_slice(&self.head.to_le_bytes());
        b[4..12].copy_from_slice(&self.len.to_le_bytes());
        b[12..].copy_from_slice(&self.id.to_le_bytes());
        b
    }

    /// Decode a stored pointer; `None` if `b` is not one (wrong length, page 0,
    /// id 0).
    pub(crate) fn from_bytes(b: &[u8]) -> Option<Pointer> {
        if b.len() != POINTER_LEN {
            return None;
        }
        let p = Pointer {
            head: get_u32(b, 0),
            len: get_u64(b, 4),
            id: get_u64(b, 12),
        };
        (p.head != 0 && p.id != 0 && p.len <= MAX_VALUE_LEN as u64).then_some(p)
    }
}

/// Is `page` a page of chain `id`?
fn of_chain(page: &[u8], id: u64) -> bool {
    page_type(page) == Some(PageType::Overflow) && get_u64(page, ID) == id
}

fn bad(id: PageId, what: String) -> Error {
    Error::Corruption(format!("overflow page {id}: {what}"))
}

/// Corruption unless page `id` (image `p`) is a page of chain `chain`;
/// `reached` says how the page was reached.
fn expect_chain(p: &[u8], id: PageId, chain: u64, reached: &str) -> Result<()> {
    if of_chain(p, chain) {
        return Ok(());
    }
    Err(bad(
        id,
        format!(
            "{reached} chain {chain}, but it has type {:?} and chain id {}",
            page_type(p),
            get_u64(p, ID)
        ),
    ))
}

/// Visit every page of the chain `ptr` names, in order, checking its
/// type, id, lengths and end; returns the pages. `seen` gets each page
/// number (for the leak and double-reference checks of `Db::check`).
pub(crate) fn walk<P: Pages>(
    pages: &P,
    space: u32,
    ptr: Pointer,
    mut visit: impl FnMut(u32, &[u8]),
) -> Result<u64> {
    let room = payload(pages.page_size()) as u64;
    let (mut no, mut got, mut n) = (ptr.head, 0u64, 0u64);
    loop {
        let id = PageId::new(space, no);
        let p = pages.page(id)?;
        let reached = format!("reached by a {}-byte value's", ptr.len);
        expect_chain(&p, id, ptr.id, &reached)?;
        if n == 0 && get_u64(&p, TOTAL) != ptr.len {
            return Err(bad(
                id,
                format!(
                    "the chain's head says {} bytes, the row {}",
                    get_u64(&p, TOTAL),
                    ptr.len
                ),
            ));
        }
        let used = u64::from(get_u32(&p, USED));
        if used == 0 || used > room || got + used > ptr.len {
            return Err(bad(
                id,
                format!(
                    "holds {used} bytes, at {got} of a {}-byte value ({room} fit a page)",
                    ptr.len
                ),
            ));
        }
        visit(no, &p[DATA..DATA + used as usize]);
        got += used;
        n += 1;
        let next = get_u32(&p, NEXT);
        match (next, got == ptr.len) {
            (0, true) => return Ok(n),
            (0, false) => {
                return Err(bad(
                    id,
                    format!("the chain ends after {got} of {} bytes", ptr.len),
                ))
            }
            (_, true) => return Err(bad(id, "the chain goes on past its value's end".into())),
            (next, false) => no = next,
        }
    }
}

/// Does the head page `ptr` names still hold that chain (type and id)?
/// False once the chain was freed, whatever became of the page since.
pub(crate) fn holds<P: Pages>(pages: &P, space: u32, ptr: Pointer) -> Result<bool> {
    Ok(of_chain(&pages.page(PageId::new(space, ptr.head))?, ptr.id))
}

/// The value the chain `ptr` holds.
pub(crate) fn read<P: Pages>(pages: &P, space: u32, ptr: Pointer) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(ptr.len as usize);
    walk(pages, space, ptr, |_, bytes| out.extend_from_slice(bytes))?;
    Ok(out)
}

/// Free the pages after the head of chain `ptr`, a batch per mtr (module
/// doc). False if the head is not the chain's any more (freed already).
fn trim(e: &Engine, purpose: Purpose, ptr: Pointer) -> Result<bool> {
    let ps = e.page_size();
    let batch = e.adm.max_mtr_pages(ps).saturating_sub(2).clamp(1, BATCH);
    let head_id = PageId::new(e.space_id(), ptr.head);
    loop {
        let budget = e.adm.budget(purpose);
        budget.ensure(mtr_bound(batch + 2, ps))?;
        let mut mtr = Mtr::new(e, &budget);
        let mut head = e.pool.write(head_id)?;
        if !of_chain(&head, ptr.id) {
            return Ok(false);
        }
        let mut next = get_u32(&head, NEXT);
        if next == 0 {
            return Ok(true);
        }
        let mut freed = Vec::with_capacity(batch);
        while next != 0 && freed.len() < batch {
            let id = PageId::new(e.space_id(), next);
            let p = e.pool.write(id)?;
            expect_chain(&p, id, ptr.id, "linked from")?;
            next = get_u32(&p, NEXT);
            freed.push(p);
        }
        mtr.latch_header()?;
        put_u32(&mut head, NEXT, next);
        mtr.keep(head);
        for p in freed {
            mtr.free_page_unzeroed(p)?;
        }
        mtr.commit()?;
        e.failpoints.hit("lob.trimmed");
    }
}

/// Free the chain `ptr` (module doc: idempotent). True if it was there.
pub(crate) fn free_chain(e: &Engine, purpose: Purpose, ptr: Pointer) -> Result<bool> {
    if !trim(e, purpose, ptr)? {
        return Ok(false);
    }
    let budget = e.adm.budget(purpose);
    budget.ensure(mtr_bound(2, e.page_size()))?;
    let mut mtr = Mtr::new(e, &budget);
    let head = e.pool.write(PageId::new(e.space_id(), ptr.head))?;
    if !of_chain(&head, ptr.id) {
        return Ok(false);
    }
    mtr.latch_header()?;
    mtr.free_page_unzeroed(head)?;
    mtr.commit()?;
    Metrics::add(&e.metrics.lob_chains_freed, 1);
    Ok(true)
}

/// The directory of bundles in flight, and the count of its free slots.
pub(crate) struct Lobs {
    /// The directory page, once there is one: the first large value
    /// creates it ([`Lobs::ensure_dir`]), so a space that never held one
    /// has none.
    dir: std::sync::OnceLock<PageId>,
    /// Serialises the directory's creation.
    creating: Mutex<()>,
    capacity: usize,
    used: Mutex<usize>,
    freed: Condvar,
}

impl Lobs {
    /// The directory of the engine's space, if it has one, with its slots
    /// in use counted.
    pub(crate) fn open(e: &Engine) -> Result<Lobs> {
        let ps = e.page_size();
        let dir = std::sync::OnceLock::new();
        let mut used = 0;
        if let Some(id) = dir_in_header(e, e.space_id())? {
            let p = e.pool.read(id)?;
            check_dir(&p, id)?;
            used = (0..slots(ps))
                .filter(|&i| slot(&p, SLOTS + SLOT * i).0 != 0)
                .count();
            let _ = dir.set(id);
        }
        Ok(Lobs {
            dir,
            creating: Mutex::new(()),
            capacity: slots(ps),
            used: Mutex::new(used),
            freed: Condvar::new(),
        })
    }

    /// The directory page, created (in an mtr of its own: the space
    /// header and the new page) if the space has none yet.
    fn ensure_dir(&self, e: &Engine) -> Result<PageId> {
        if let Some(&id) = self.dir.get() {
            return Ok(id);
        }
        let _one = self.creating.lock();
        if let Some(&id) = self.dir.get() {
            return Ok(id);
        }
        let budget = e.adm.budget(Purpose::New);
        budget.ensure(mtr_bound(2, e.page_size()))?;
        let mut mtr = Mtr::new(e, &budget);
        let p = mtr.alloc_page(PageType::LobDir)?;
        let id = p.id();
        mtr.keep(p);
        mtr.set_header_u32(sh::LOB_DIR, id.page_no)?;
        mtr.commit()?;
        let _ = self.dir.set(id);
        Ok(id)
    }

    fn dir_or_err(&self) -> Result<PageId> {
        self.dir.get().copied().ok_or_else(|| {
            Error::Corruption("a bundle of overflow chains without a directory page".into())
        })
    }

    /// The bundles in flight: each slot's first chain (head, id).
    pub(crate) fn in_flight<P: Pages>(pages: &P, dir: PageId) -> Result<Vec<(u32, u64)>> {
        let p = pages.page(dir)?;
        check_dir(&p, dir)?;
        Ok((0..slots(pages.page_size()))
            .map(|i| slot(&p, SLOTS + SLOT * i))
            .filter(|&(h, _)| h != 0)
            .collect())
    }

    /// The chains of the bundle whose first chain is (head, id), in order,
    /// as pointers (checked as [`walk`] checks).
    pub(crate) fn bundle<P: Pages>(
        pages: &P,
        space: u32,
        first: (u32, u64),
    ) -> Result<Vec<Pointer>> {
        let mut out = Vec::new();
        let (mut head, mut id) = first;
        while head != 0 {
            let pid = PageId::new(space, head);
            let p = pages.page(pid)?;
            expect_chain(&p, pid, id, "a bundle names here")?;
            out.push(Pointer {
                head,
                len: get_u64(&p, TOTAL),
                id,
            });
            (head, id) = (get_u32(&p, BUNDLE), get_u64(&p, BUNDLE_ID));
        }
        Ok(out)
    }

    /// Take a directory slot for a new bundle, waiting while all are held
    /// (module doc); gives up if writes are refused meanwhile.
    fn take_slot(&self, e: &Engine) -> Result<()> {
        let mut used = self.used.lock();
        while *used >= self.capacity {
            e.adm.check_writable(Purpose::New)?;
            self.freed.wait_for(&mut used, Duration::from_millis(100));
        }
        *used += 1;
        Ok(())
    }

    fn give_slot(&self) {
        let mut used = self.used.lock();
        *used = used.saturating_sub(1);
        self.freed.notify_one();
    }

    /// Clear the slot of the bundle whose first chain is `first`, if it is
    /// still there, in `mtr` (which must latch nothing but pages after the
    /// directory in the latch order). Returns whether it was.
    fn clear_slot(&self, mtr: &mut Mtr<'_>, first: (u32, u64)) -> Result<bool> {
        let e = mtr.engine();
        let dir = self.dir_or_err()?;
        let mut p = e.pool.write(dir)?;
        check_dir(&p, dir)?;
        let Some(o) = slot_of(&p, first) else {
            return Ok(false);
        };
        set_slot(&mut p, o, (0, 0));
        mtr.keep(p);
        Ok(true)
    }

    /// The bundle whose first chain is `first` is referenced now: clear its
    /// slot (nothing if recovery or an earlier try did).
    pub(crate) fn retire(&self, e: &Engine, purpose: Purpose, first: (u32, u64)) -> Result<()> {
        let budget = e.adm.budget(purpose);
        budget.ensure(mtr_bound(1, e.page_size()))?;
        let mut mtr = Mtr::new(e, &budget);
        if self.clear_slot(&mut mtr, first)? {
            mtr.commit()?;
            self.give_slot();
        }
        Ok(())
    }

    /// [`Lobs::retire`] inside the caller's mtr (a bulk load's publish);
    /// the slot counts as free once that mtr commits (`after_commit`).
    pub(crate) fn retire_in(&self, mtr: &mut Mtr<'_>, first: (u32, u64)) -> Result<bool> {
        self.clear_slot(mtr, first)
    }

    /// A slot cleared by [`Lobs::retire_in`] is free now.
    pub(crate) fn after_commit(&self) {
        self.give_slot();
    }

    /// Free every chain of the bundle whose first chain is `first`, and
    /// its slot: each chain is trimmed, then its head is freed in the mtr
    /// that moves the slot to the next chain (module doc).
    fn discard(&self, e: &Engine, purpose: Purpose, first: (u32, u64)) -> Result<()> {
        let ps = e.page_size();
        let dir = self.dir_or_err()?;
        let (mut head, mut id) = first;
        while head != 0 {
            let ptr = Pointer { head, len: 0, id };
            let present = trim(e, purpose, ptr)?;
            let budget = e.adm.budget(purpose);
            budget.ensure(mtr_bound(3, ps))?;
            let mut mtr = Mtr::new(e, &budget);
            let mut d = e.pool.write(dir)?;
            check_dir(&d, dir)?;
            let Some(o) = slot_of(&d, (head, id)) else {
                break;
            };
            // Latched only if the trim found the chain there (it is this
            // bundle's then, which no other thread frees): a freed head may
            // be any page by now, which must not be latched after the
            // directory.
            let h = if present {
                Some(e.pool.write(PageId::new(e.space_id(), head))?)
            } else {
                None
            };
            let (next, next_id) = if let Some(h) = h.filter(|h| of_chain(h, id)) {
                let next = (get_u32(&h, BUNDLE), get_u64(&h, BUNDLE_ID));
                mtr.latch_header()?;
                mtr.free_page_unzeroed(h)?;
                next
            } else {
                // Freed already, with the tree whose leaf held it: a bulk
                // load refused at its publish drops its tree before its
                // bundle, when every chain is in a leaf. Elsewhere the
                // module doc's order frees the bundle first.
                log::info!(
                    "overflow chain {id} at page {head} was freed with the tree that held \
                     it; its bundle ends here"
                );
                (0, 0)
            };
            set_slot(&mut d, o, (next, next_id));
            mtr.keep(d);
            mtr.commit()?;
            Metrics::add(&e.metrics.lob_chains_freed, u64::from(present));
            (head, id) = (next, next_id);
        }
        self.give_slot();
        Ok(())
    }

    /// Free the bundles a crash left in flight (their commits never logged,
    /// their loads never published): run at open, after recovery finished
    /// the logged commits. Returns the chains freed.
    pub(crate) fn free_orphans(&self, e: &Engine) -> Result<usize> {
        let Some(&dir) = self.dir.get() else {
            return Ok(0);
        };
        let mut n = 0;
        for first in Self::in_flight(e, dir)? {
            n += Self::bundle(e, e.space_id(), first).map_or(1, |b| b.len());
            self.discard(e, Purpose::New, first)?;
        }
        if n > 0 {
            log::warn!(
                "freed {n} overflow chains of commits or bulk loads a crash cut short \
                 (written, never referenced)"
            );
        }
        Ok(n)
    }
}

/// The directory page the space header of `space` names, if any.
pub(crate) fn dir_in_header<P: Pages>(pages: &P, space: u32) -> Result<Option<PageId>> {
    let h = pages.page(PageId::new(space, 0))?;
    let dir = get_u32(&h, sh::LOB_DIR);
    Ok((dir != 0).then(|| PageId::new(space, dir)))
}

fn check_dir(p: &[u8], id: PageId) -> Result<()> {
    if page_type(p) != Some(PageType::LobDir) {
        return Err(Error::Corruption(format!(
            "page {id} should be the overflow directory but has type {:?}",
            page_type(p)
        )));
    }
    Ok(())
}

/// The chains one commit or one bulk load writes (module doc). Dropped
/// before [`Bundle::keep`], it frees them.
pub(crate) struct Bundle<'e> {
    lobs: &'e Lobs,
    e: &'e Engine,
    /// The first chain (head, id), once written.
    first: Option<(u32, u64)>,
    /// The last chain's head and id.
    last: Option<(u32, u64)>,
    /// A directory slot is counted for this bundle.
    slot: bool,
}

impl<'e> Bundle<'e> {
    pub(crate) fn new(lobs: &'e Lobs, e: &'e Engine) -> Bundle<'e> {
        Bundle {
            lobs,
            e,
            first: None,
            last: None,
            slot: false,
        }
    }

    /// The first chain, if one was written: what the directory slot names.
    pub(crate) fn first(&self) -> Option<(u32, u64)> {
        self.first
    }

    /// Write `value` to a new chain of this bundle; returns its pointer.
    pub(crate) fn write(&mut self, value: &[u8]) -> Result<Pointer> {
        let e = self.e;
        let ps = e.page_size();
        let room = payload(ps);
        if value.len() > MAX_VALUE_LEN {
            return Err(Error::ValueTooLarge {
                len: value.len(),
                max: MAX_VALUE_LEN,
            });
        }
        if value.is_empty() {
            return Err(Error::Corruption(
                "an empty value was sent to an overflow chain".into(),
            ));
        }
        // The pages of one mtr, beside the directory or the previous
        // chain's head, and the space header.
        let batch = e.adm.max_mtr_pages(ps).saturating_sub(3).clamp(1, BATCH);
        let dir = self.lobs.ensure_dir(e)?;
        if !self.slot {
            self.lobs.take_slot(e)?;
            self.slot = true;
        }
        let mut chunks = value.chunks(room).peekable();
        let mut ptr = Pointer {
            head: 0,
            len: value.len() as u64,
            id: 0,
        };
        let mut tail: Option<u32> = None;
        while chunks.peek().is_some() {
            let budget = e.adm.budget(Purpose::New);
            budget.ensure(mtr_bound(batch + 3, ps))?;
            let mut mtr = Mtr::new(e, &budget);
            // Latched before the header (module doc's order): the page this
            // mtr links from.
            let mut from = match (tail, self.last) {
                (Some(t), _) => Some(self.e.pool.write(PageId::new(e.space_id(), t))?),
                (None, Some((h, _))) => Some(self.e.pool.write(PageId::new(e.space_id(), h))?),
                (None, None) => None,
            };
            let mut d = match (tail, self.first) {
                (None, None) => {
                    let d = e.pool.write(dir)?;
                    check_dir(&d, dir)?;
                    Some(d)
                }
                _ => None,
            };
            if ptr.id == 0 {
                ptr.id = mtr.header_u64(sh::CHAIN_SEQ)? + 1;
                mtr.set_header_u64(sh::CHAIN_SEQ, ptr.id)?;
            }
            let mut new: Vec<PageWrite<'_>> = Vec::with_capacity(batch);
            for chunk in chunks.by_ref().take(batch) {
                let mut p = mtr.alloc_page(PageType::Overflow)?;
                put_u64(&mut p, ID, ptr.id);
                put_u32(&mut p, USED, chunk.len() as u32);
                p[DATA..DATA + chunk.len()].copy_from_slice(chunk);
                if let Some(prev) = new.last_mut() {
                    put_u32(prev, NEXT, p.id().page_no);
                }
                new.push(p);
            }
            let Some(first_new) = new.first_mut() else {
                unreachable!("a chunk was left")
            };
            let first_no = first_new.id().page_no;
            if tail.is_none() {
                ptr.head = first_no;
                put_u64(first_new, TOTAL, ptr.len);
            }
            match (&mut from, &mut d) {
                (Some(f), _) if tail.is_some() => put_u32(f, NEXT, first_no),
                (Some(f), _) => {
                    put_u32(f, BUNDLE, first_no);
                    put_u64(f, BUNDLE_ID, ptr.id);
                }
                (None, Some(d)) => {
                    let Some(o) = slot_of(d, (0, 0)) else {
                        return Err(Error::Corruption(format!(
                            "overflow directory {dir}: no free slot, though fewer than {} \
                             bundles are in flight",
                            self.lobs.capacity
                        )));
                    };
                    set_slot(d, o, (first_no, ptr.id));
                }
                (None, None) => unreachable!("a first chain links from the directory"),
            }
            tail = new.last().map(|p| p.id().page_no);
            let pages = new.len() as u64;
            for p in from.into_iter().chain(d).chain(new) {
                mtr.keep(p);
            }
            mtr.commit()?;
            Metrics::add(&e.metrics.lob_pages_written, pages);
            if self.first.is_none() {
                self.first = Some((ptr.head, ptr.id));
            }
            e.failpoints.hit("lob.written");
        }
        self.last = Some((ptr.head, ptr.id));
        Metrics::add(&e.metrics.lob_chains_written, 1);
        Ok(ptr)
    }

    /// Every chain is referenced by a logged commit record or is about to
    /// be published with a load: the drop frees nothing any more. Returns
    /// the first chain, whose slot the caller clears ([`Lobs::retire`]).
    pub(crate) fn keep(mut self) -> Option<(u32, u64)> {
        self.slot = false;
        self.first.take()
    }
}

impl Drop for Bundle<'_> {
    fn drop(&mut self) {
        let Some(first) = self.first.take() else {
            if self.slot {
                self.lobs.give_slot();
            }
            return;
        };
        if let Err(err) = self.lobs.discard(self.e, Purpose::InFlight, first) {
            log::warn!(
                "a failed commit's large values could not be freed now (the next open \
                 frees them): {err}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_round_trip_and_reject_nonsense() {
        let p = Pointer {
            head: 7,
            len: 1 << 20,
            id: 42,
        };
        assert_eq!(Pointer::from_bytes(&p.to_bytes()), Some(p));
        assert_eq!(Pointer::from_bytes(&[0; POINTER_LEN]), None);
        assert_eq!(Pointer::from_bytes(&p.to_bytes()[..19]), None);
    }

    #[test]
    fn the_directory_has_room_on_every_page_size() {
        assert!(slots(crate::page::MIN_PAGE_SIZE) >= 300);
        const { assert!(DATA + 1 < crate::page::MIN_PAGE_SIZE) };
    }
}
