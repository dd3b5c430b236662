//! The catalog: the tree that maps table names to their root pages, and a
//! cache of the entries read so far; and the DDL that changes it: create,
//! drop, truncate.
//!
//! The catalog's root is page 1, fixed at creation. Its entries are written
//! by DDL only, one statement at a time under the `ddl` mutex, directly to
//! the tree: a table exists for every reader as soon as its creation
//! returns, and it is not versioned (as InnoDB's data dictionary is not,
//! for plain reads). An entry's value is the root's page number (u32) and
//! the LSN of the table's creation (u64; absent, meaning 0, in entries
//! written before drops existed).
//!
//! # Truncate and drop
//!
//! Both empty the table's tree with `btree::bulk::empty_tree`: one mtr
//! moves the tree under a hidden root marked pending on the table's root
//! (which becomes an empty leaf), then bounded drop steps, one mtr each,
//! free the hidden tree. A crash before the last step leaves the mark, and
//! the next open finishes the drop as it finishes an unfinished bulk load's.
//!
//! A drop first records the root in the space header's list of dropped
//! roots (one mtr), then deletes the name from the catalog and syncs the
//! log: from there on the drop has happened, whatever comes after. Then
//! the tree is emptied. The root page itself stays allocated, an empty
//! leaf on the list, until the next open frees it (`reclaim_dropped`,
//! after recovery, when no handle can exist): a handle to the dropped
//! table may still descend from its root until it sees the table gone,
//! and a freed root could meanwhile have become another table's page. The
//! open that reclaims a root first deletes a catalog entry still naming it
//! (a crash between the two steps above), then empties it if need be,
//! then frees it and takes it off the list in one mtr.
//!
//! # What transactions see: [`TableMeta`]
//!
//! DDL is not versioned. Every handle of a table shares one [`TableMeta`];
//! the engine's DDL epoch (`Engine::ddl_epoch`) counts truncates.
//! - A drop marks the table gone first: every later call through a handle
//!   fails with `Error::TableDropped`.
//! - A truncate marks the table *emptying* while it runs, then stamps it
//!   with a new epoch. A transaction notes the epoch when it begins, a
//!   plain scan when it starts: a call (or the next row of a scan) that
//!   finds the table emptying, or stamped after it began, fails with
//!   `Error::TableChanged` rather than show an older snapshot an emptied
//!   table (InnoDB: "Table definition has changed, please retry
//!   transaction"). A scan checks after each row the tree hands it, and at
//!   its end, so a scan that met the emptied root fails instead of ending
//!   early.
//! - Commits: before its record is logged, a commit enters every table of
//!   its write set (`TableMeta::enter`: counted, then checked) and leaves
//!   once its ops are applied. DDL sets its flag, then waits (at most
//!   `lock_wait_timeout`) until no commit is inside: with sequentially
//!   consistent counts and flags, either the commit sees the flag and
//!   fails before logging, or the DDL sees the commit and waits for it,
//!   so a commit's ops are never split by the emptying mtr. The DDL holds
//!   only the `ddl` mutex while it waits, which no commit takes.
//! - Purge skips undo records of a table dropped (its root not in the
//!   catalog) or created after the record's commit (the root page was
//!   reused): `Catalog::created`. Records of a truncated table look for
//!   delete marks stamped with their commit, which the emptied tree does
//!   not hold.

use std::collections::HashMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use crate::btree::node::NodeRef;
use crate::btree::BTree;
use crate::engine::admission::Purpose;
use crate::engine::{space_header as sh, Engine};
use crate::error::{Error, Result};
use crate::mtr::{mtr_bound, Mtr};
use crate::page::{get_u32, Lsn, PageId};

/// Page number of the catalog's root (fixed at creation).
pub(crate) const CATALOG_ROOT: u32 = 1;
/// Longest table name in bytes.
const MAX_TABLE_NAME: usize = 255;

/// [`TableMeta`] state: the table was dropped.
const GONE: u64 = 1 << 63;
/// [`TableMeta`] state: a truncate is emptying the table.
const EMPTYING: u64 = 1 << 62;
/// [`TableMeta`] state: the DDL epoch of the table's last truncate.
const EPOCH: u64 = EMPTYING - 1;

/// What every handle of one table shares: whether DDL dropped it or is
/// emptying it, and the commits inside it (module doc).
#[derive(Default)]
pub(crate) struct TableMeta {
    /// [`GONE`], [`EMPTYING`] and the epoch of the last truncate.
    state: AtomicU64,
    /// Commits between [`TableMeta::enter`] and [`TableMeta::leave`].
    applying: AtomicUsize,
}

impl TableMeta {
    /// Fail if the table was dropped, is being emptied, or was truncated
    /// after DDL epoch `since` (when the caller's transaction or scan began).
    pub(crate) fn check(&self, name: &str, since: u64) -> Result<()> {
        Self::judge(self.state.load(Ordering::Acquire), name, since)
    }

    fn judge(s: u64, name: &str, since: u64) -> Result<()> {
        if s & GONE != 0 {
            return Err(Error::TableDropped(name.to_string()));
        }
        if s & EMPTYING != 0 || s & EPOCH > since {
            return Err(Error::TableChanged(name.to_string()));
        }
        Ok(())
    }

    /// A commit is about to log ops on this table: counted until the
    /// returned guard is dropped (once its ops are applied, or however the
    /// commit ends, a panic included), unless DDL is under way or happened
    /// since `since` (then nothing is counted and the error says which).
    pub(crate) fn enter(&self, name: &str, since: u64) -> Result<Inside<'_>> {
        self.applying.fetch_add(1, Ordering::SeqCst);
        let inside = Inside(self);
        Self::judge(self.state.load(Ordering::SeqCst), name, since).map(|()| inside)
    }

    /// DDL: set `flag`, then wait until no commit is inside (module doc).
    /// On a timeout the flag is cleared again and the error names the
    /// table.
    fn begin_ddl(&self, flag: u64, name: &str, timeout: Duration) -> Result<()> {
        self.state.fetch_or(flag, Ordering::SeqCst);
        let start = Instant::now();
        let mut pause = Duration::from_micros(50);
        while self.applying.load(Ordering::SeqCst) > 0 {
            if start.elapsed() > timeout {
                self.state.fetch_and(!flag, Ordering::SeqCst);
                return Err(Error::LockWaitTimeout {
                    table: name.to_string(),
                    waited: start.elapsed(),
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(10));
        }
        Ok(())
    }
}

/// A commit inside a table ([`TableMeta::enter`]); leaves when dropped.
pub(crate) struct Inside<'a>(&'a TableMeta);

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        self.0.applying.fetch_sub(1, Ordering::Release);
    }
}

/// A table as the catalog caches it.
#[derive(Clone)]
pub(crate) struct Entry {
    pub root: PageId,
    pub meta: Arc<TableMeta>,
}

/// The catalog tree and the roots looked up so far.
pub(crate) struct Catalog {
    pub(crate) tree: BTree,
    tables: RwLock<HashMap<String, Entry>>,
    /// Every table's root page number and the LSN of its creation, read
    /// whole at open ([`Catalog::load`]): for purge ([`Catalog::created`]).
    roots: RwLock<HashMap<u32, Lsn>>,
    /// Held by DDL for the whole statement, and by a lookup that reads the
    /// tree (so that it cannot cache a table a drop is removing).
    ddl: Mutex<()>,
}

impl Catalog {
    /// The catalog of the space `e` opened.
    pub(crate) fn open(e: &Engine) -> Catalog {
        Catalog {
            tree: BTree::open(PageId::new(e.space_id(), CATALOG_ROOT)),
            tables: RwLock::new(HashMap::new()),
            roots: RwLock::new(HashMap::new()),
            ddl: Mutex::new(()),
        }
    }

    /// Read every entry (after recovery): the roots purge asks about.
    pub(crate) fn load(&self, e: &Engine) -> Result<()> {
        let mut roots = HashMap::new();
        for row in self
            .tree
            .range(e, Bound::Unbounded, Bound::Unbounded, false)
        {
            let (k, v) = row?;
            let (root, created) = decode_entry(e.space_id(), &String::from_utf8_lossy(&k), &v)?;
            roots.insert(root.page_no, created);
        }
        *self.roots.write() = roots;
        Ok(())
    }

    /// The LSN at which the table whose root is `root` was created, if a
    /// table has that root now.
    pub(crate) fn created(&self, root: u32) -> Option<Lsn> {
        self.roots.read().get(&root).copied()
    }

    /// Create table `name`: its root page, then its entry, then a log sync
    /// (the table is durable when this returns). Errors if it exists.
    pub(crate) fn create(&self, e: &Engine, name: &str) -> Result<Entry> {
        check_name(name)?;
        e.adm.check_writable(Purpose::New)?;
        let _ddl = self.ddl.lock();
        if self.tree.get(e, name.as_bytes())?.is_some() {
            return Err(Error::TableExists(name.to_string()));
        }
        let created = e.log.lsn();
        // The root page and the space header page.
        let budget = e.adm.budget(Purpose::New);
        budget.ensure(mtr_bound(2, e.page_size()))?;
        let mut mtr = Mtr::new(e, &budget);
        let tree = BTree::create(&mut mtr)?;
        mtr.commit()?;
        let root = tree.root();
        self.tree
            .put(e, name.as_bytes(), &encode_entry(root.page_no, created))?;
        e.log.write_up_to(e.log.lsn(), true)?;
        self.roots.write().insert(root.page_no, created);
        let entry = Entry {
            root,
            meta: Arc::default(),
        };
        self.tables.write().insert(name.to_string(), entry.clone());
        Ok(entry)
    }

    /// Table `name`, or [`Error::TableNotFound`].
    pub(crate) fn lookup(&self, e: &Engine, name: &str) -> Result<Entry> {
        if let Some(t) = self.tables.read().get(name) {
            return Ok(t.clone());
        }
        let _ddl = self.ddl.lock();
        self.lookup_locked(e, name)
    }

    /// [`Catalog::lookup`] holding the `ddl` mutex.
    fn lookup_locked(&self, e: &Engine, name: &str) -> Result<Entry> {
        if let Some(t) = self.tables.read().get(name) {
            return Ok(t.clone());
        }
        let v = self
            .tree
            .get(e, name.as_bytes())?
            .ok_or_else(|| Error::TableNotFound(name.to_string()))?;
        let entry = Entry {
            root: decode_root(e.space_id(), name, &v)?,
            meta: Arc::default(),
        };
        self.tables.write().insert(name.to_string(), entry.clone());
        Ok(entry)
    }

    /// Truncate table `name`: every row goes, in bounded steps (module
    /// doc). Returns once the table is empty and that is durable.
    pub(crate) fn truncate(&self, e: &Engine, name: &str, timeout: Duration) -> Result<()> {
        e.adm.check_writable(Purpose::New)?;
        let _ddl = self.ddl.lock();
        let t = self.lookup_locked(e, name)?;
        t.meta.check(name, u64::MAX)?;
        refuse_pending_load(e, t.root, name)?;
        t.meta.begin_ddl(EMPTYING, name, timeout)?;
        let emptied =
            crate::btree::bulk::empty_tree(e, t.root, name, crate::txn::version::free_external)
                .and_then(|_| e.log.write_up_to(e.log.lsn(), true));
        // Stamped whatever happened: part of the rows may be gone.
        let epoch = e.ddl_epoch.fetch_add(1, Ordering::SeqCst) + 1;
        t.meta.state.store(epoch.min(EPOCH), Ordering::Release);
        emptied
    }

    /// Drop table `name` (module doc).
    pub(crate) fn drop_table(&self, e: &Engine, name: &str, timeout: Duration) -> Result<()> {
        e.adm.check_writable(Purpose::New)?;
        let _ddl = self.ddl.lock();
        let t = self.lookup_locked(e, name)?;
        refuse_pending_load(e, t.root, name)?;
        t.meta.begin_ddl(GONE, name, timeout)?;
        if let Err(err) = list_dropped(e, t.root) {
            t.meta.state.fetch_and(!GONE, Ordering::SeqCst);
            return Err(err);
        }
        e.failpoints.hit("ddl.drop_listed");
        // From here on the table is gone for this run, whatever fails: the
        // next open finishes what this could not.
        self.tables.write().remove(name);
        self.roots.write().remove(&t.root.page_no);
        let budget = e.adm.budget(Purpose::New);
        self.tree
            .delete_if_in(e, &budget, name.as_bytes(), &|_| true)?;
        drop(budget);
        e.log.write_up_to(e.log.lsn(), true)?;
        e.failpoints.hit("ddl.drop_unnamed");
        crate::btree::bulk::empty_tree(e, t.root, name, crate::txn::version::free_external)?;
        e.log.write_up_to(e.log.lsn(), true)
    }

    /// At open, after recovery and before any handle exists: free the
    /// roots of dropped tables (module doc). Crash-safe: each root leaves
    /// the list in the mtr that frees it.
    pub(crate) fn reclaim_dropped(&self, e: &Engine) -> Result<u64> {
        let mut n = 0;
        while let Some(root) = first_dropped(e)? {
            // A drop cut short between its two first steps left the name.
            let names: Vec<Vec<u8>> = self
                .tree
                .range(e, Bound::Unbounded, Bound::Unbounded, false)
                .filter_map(|r| match r {
                    Ok((k, v)) => match decode_root(e.space_id(), "?", &v) {
                        Ok(r) if r == root => Some(Ok(k)),
                        _ => None,
                    },
                    Err(err) => Some(Err(err)),
                })
                .collect::<Result<_>>()?;
            for k in names {
                let budget = e.adm.budget(Purpose::New);
                self.tree.delete_if_in(e, &budget, &k, &|_| true)?;
                self.roots.write().remove(&root.page_no);
            }
            // A drop cut short while emptying left a pending mark; a
            // commit recovery finished may have written rows after the
            // drop's emptying (the drop does not wait for those).
            let pending = NodeRef::new(&e.pool.read(root)?).pending_bulk();
            if let Some(hidden) = pending {
                crate::btree::bulk::drop_hidden(
                    e,
                    root,
                    PageId::new(root.space, hidden),
                    crate::txn::version::free_external,
                )?;
            }
            crate::btree::bulk::empty_tree(
                e,
                root,
                "<dropped>",
                crate::txn::version::free_external,
            )?;
            free_dropped(e, root)?;
            n += 1;
        }
        if n > 0 {
            log::info!("freed the root pages of {n} tables dropped before this open");
        }
        Ok(n)
    }

    /// Every table's name, sorted.
    pub(crate) fn names(&self, e: &Engine) -> Result<Vec<String>> {
        self.tree
            .range(e, Bound::Unbounded, Bound::Unbounded, false)
            .map(|r| r.map(|(k, _)| String::from_utf8_lossy(&k).into_owned()))
            .collect()
    }
}

fn check_name(name: &str) -> Result<()> {
    let bad = |reason: &str| Error::InvalidTableName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() {
        return Err(bad("empty"));
    }
    if name.len() > MAX_TABLE_NAME {
        return Err(bad("longer than 255 bytes"));
    }
    Ok(())
}

/// Refuse DDL on a table a bulk load is filling.
fn refuse_pending_load(e: &Engine, root: PageId, name: &str) -> Result<()> {
    if NodeRef::new(&e.pool.read(root)?).pending_bulk().is_some() {
        return Err(Error::BulkLoad {
            table: name.to_string(),
            reason: "a bulk load into it is under way; retry once it ends".into(),
        });
    }
    Ok(())
}

/// An entry's value: the root's page number and the creation's LSN.
fn encode_entry(root: u32, created: Lsn) -> [u8; 12] {
    let mut v = [0u8; 12];
    v[..4].copy_from_slice(&root.to_le_bytes());
    v[4..].copy_from_slice(&created.to_le_bytes());
    v
}

/// Put `root` on the space header's list of dropped roots (one mtr).
fn list_dropped(e: &Engine, root: PageId) -> Result<()> {
    let budget = e.adm.budget(Purpose::New);
    budget.ensure(mtr_bound(1, e.page_size()))?;
    let mut mtr = Mtr::new(e, &budget);
    let n = mtr.header_u32(sh::DROPPED_COUNT)? as usize;
    if n >= sh::DROPPED_MAX {
        return Err(Error::SpaceFull(format!(
            "{n} tables were dropped since this database was opened, the most whose root \
             pages wait for the next open to be freed; close and reopen it, then drop again"
        )));
    }
    mtr.set_header_u32(sh::DROPPED_LIST + 4 * n, root.page_no)?;
    mtr.set_header_u32(sh::DROPPED_COUNT, n as u32 + 1)?;
    mtr.commit()?;
    Ok(())
}

/// The first root on the list of dropped roots.
fn first_dropped(e: &Engine) -> Result<Option<PageId>> {
    let h = e.pool.read(PageId::new(e.space_id(), 0))?;
    let n = get_u32(&h, sh::DROPPED_COUNT) as usize;
    if n > sh::DROPPED_MAX {
        return Err(Error::Corruption(format!(
            "the space header lists {n} dropped roots, more than the {} it holds",
            sh::DROPPED_MAX
        )));
    }
    Ok((n > 0).then(|| PageId::new(e.space_id(), get_u32(&h, sh::DROPPED_LIST))))
}

/// Free the dropped root `root` (an empty leaf now) and take it off the
/// list, in one mtr.
fn free_dropped(e: &Engine, root: PageId) -> Result<()> {
    let budget = e.adm.budget(Purpose::New);
    budget.ensure(mtr_bound(2, e.page_size()))?;
    let mut mtr = Mtr::new(e, &budget);
    let page = e.pool.write(root)?;
    let n = mtr.header_u32(sh::DROPPED_COUNT)? as usize;
    let mut at = None;
    for i in 0..n {
        if mtr.header_u32(sh::DROPPED_LIST + 4 * i)? == root.page_no {
            at = Some(i);
        }
    }
    let Some(i) = at else {
        return Err(Error::Corruption(format!(
            "dropped root {root} is not on the space header's list"
        )));
    };
    let last = mtr.header_u32(sh::DROPPED_LIST + 4 * (n - 1))?;
    mtr.set_header_u32(sh::DROPPED_LIST + 4 * i, last)?;
    mtr.set_header_u32(sh::DROPPED_LIST + 4 * (n - 1), 0)?;
    mtr.set_header_u32(sh::DROPPED_COUNT, n as u32 - 1)?;
    mtr.free_page(page)?;
    mtr.commit()?;
    Ok(())
}

/// A catalog entry's value: the table's root page number. Page 0 (the space
/// header) and the catalog's own root are never a table's root.
pub(crate) fn decode_root(space: u32, name: &str, v: &[u8]) -> Result<PageId> {
    decode_entry(space, name, v).map(|(root, _)| root)
}

/// A catalog entry's value: the root and the LSN of the table's creation
/// (0 in an entry of 4 bytes, written before drops existed).
pub(crate) fn decode_entry(space: u32, name: &str, v: &[u8]) -> Result<(PageId, Lsn)> {
    let (r, created) = match v.len() {
        4 | 12 => {
            let mut r = [0u8; 4];
            r.copy_from_slice(&v[..4]);
            let mut c = [0u8; 8];
            if v.len() == 12 {
                c.copy_from_slice(&v[4..]);
            }
            (u32::from_le_bytes(r), u64::from_le_bytes(c))
        }
        n => {
            return Err(Error::Corruption(format!(
                "catalog entry of table `{name}` is {n} bytes, expected 4 or 12"
            )))
        }
    };
    match r {
        0 | CATALOG_ROOT => Err(Error::Corruption(format!(
            "catalog entry of table `{name}` names page {r}, which is no table's root"
        ))),
        r => Ok((PageId::new(space, r), created)),
    }
}
