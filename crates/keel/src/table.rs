//! `Table`: a handle to one table, and `Range`, its iterator.
//!
//! Plain reads (`get`, `range`, `range_rev`) run outside any transaction
//! and see one snapshot for the whole call, however long the iteration
//! runs (see the `txn` module); `put` and `delete` are one-row
//! transactions.

use std::any::Any;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::btree::bulk::BulkLoad;
use crate::btree::{BTree, TreeStats};
use crate::catalog::TableMeta;
use crate::engine::admission::Purpose;
use crate::error::Result;
use crate::txn::{Snapshot, TrxSys};

/// A handle to one table (a B+tree of byte-string keys and values).
#[derive(Clone)]
pub struct Table {
    /// The transaction system of the table's database.
    pub(crate) sys: Arc<TrxSys>,
    /// Keeps the database open while the handle lives (opaque here).
    pub(crate) _db: Arc<dyn Any + Send + Sync>,
    pub(crate) name: Arc<str>,
    pub(crate) tree: BTree,
    /// Shared by every handle of the table: dropped, being truncated
    /// (`catalog`'s module doc).
    pub(crate) meta: Arc<TableMeta>,
}

impl Table {
    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The value stored under `key`, in a snapshot taken now: the latest
    /// committed value (never part of a commit still being applied).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_exists()?;
        let since = self.sys.engine.ddl_epoch.load(Ordering::SeqCst);
        // A truncate or drop meanwhile may have freed a large value's
        // chain under the read: report the table's change.
        self.sys
            .get_now(self.tree, key)
            .map_err(|err| self.meta.check(&self.name, since).err().unwrap_or(err))
    }

    /// [`crate::Error::TableDropped`] once the table was dropped.
    fn check_exists(&self) -> Result<()> {
        self.meta.check(&self.name, u64::MAX).or_else(|e| match e {
            crate::Error::TableChanged(_) => Ok(()),
            e => Err(e),
        })
    }

    /// Truncate the table (InnoDB's `TRUNCATE TABLE`): every row goes, and
    /// its pages return to the free list in bounded steps, each one
    /// mini-transaction that fits the log. Crash-safe at every step: a
    /// crash leaves the table as it was or empty, never half of it... once
    /// the first step is durable, the open after a crash finishes it.
    ///
    /// DDL, not a transaction: a transaction begun before the truncate,
    /// or a scan started before it, that reads or writes the table
    /// afterwards fails with [`crate::Error::TableChanged`] (retry it), as
    /// InnoDB's "Table definition has changed". Commits on the table under
    /// way finish first (the truncate waits for them up to
    /// `lock_wait_timeout`). Errors: [`crate::Error::TableDropped`],
    /// [`crate::Error::BulkLoad`] while a bulk load fills the table, and
    /// the errors of any write.
    pub fn truncate(&self) -> Result<()> {
        let e = &self.sys.engine;
        self.check_exists()?;
        self.sys
            .catalog
            .truncate(e, &self.name, crate::db::lock_wait(e))
    }

    /// Insert or replace; returns true if a value was replaced. Runs as a
    /// one-row transaction: waits for the row lock if a transaction holds it.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        crate::txn::autocommit(&self.sys, self, key, Some(value))
    }

    /// Remove `key`; returns true if it existed. Runs as a one-row
    /// transaction: waits for the row lock if a transaction holds it.
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        crate::txn::autocommit(&self.sys, self, key, None)
    }

    /// Rows with keys in `range`, in ascending key order, as one snapshot
    /// taken now shows them, however long the iteration runs.
    pub fn range<'k, R: RangeBounds<&'k [u8]>>(&self, range: R) -> Result<Range<'_>> {
        self.range_dir(range, false)
    }

    /// Rows with keys in `range`, in descending key order, as one snapshot
    /// taken now shows them.
    pub fn range_rev<'k, R: RangeBounds<&'k [u8]>>(&self, range: R) -> Result<Range<'_>> {
        self.range_dir(range, true)
    }

    fn range_dir<'k, R: RangeBounds<&'k [u8]>>(
        &self,
        range: R,
        reverse: bool,
    ) -> Result<Range<'_>> {
        let own = |b: Bound<&&[u8]>| match b {
            Bound::Included(k) => Bound::Included(k.to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let lo = own(range.start_bound());
        let hi = own(range.end_bound());
        self.check_exists()?;
        let since = self
            .sys
            .engine
            .ddl_epoch
            .load(std::sync::atomic::Ordering::SeqCst);
        Ok(Range {
            rows: self
                .sys
                .range_now(self.tree, lo, hi, reverse)
                .checking_ddl(self, since),
        })
    }

    /// Load `rows` into this table, which must be empty, building its
    /// B+tree bottom-up: each leaf is filled in memory and written once, to
    /// `fill_factor` percent of the page ([`Options::fill_factor`](crate::Options::fill_factor), as
    /// InnoDB's `innodb_fill_factor`), with no descent, no split, no row
    /// lock and no transaction. Returns the rows loaded.
    ///
    /// Keys must be strictly ascending: sort the rows first (a secondary
    /// index is loaded the same way, from its entries sorted). Keys and
    /// values have the limits of [`Table::put`].
    ///
    /// All or nothing: the rows become visible together when the load ends,
    /// and the load is durable when this returns `Ok`, whatever
    /// `flush_log_at_trx_commit` says. A crash before that leaves the table
    /// empty (the next open frees the pages the load had written); so does
    /// an error, which this returns after freeing them, and a close of the
    /// database while the load runs (the load fails with [`Error::Closed`](crate::Error::Closed)
    /// and the next open frees its pages). (One exception: if
    /// the final log sync fails, the rows are already visible but may not
    /// survive a crash; the log then refuses every write, as after any
    /// failed sync, until a restart.) Every page is redo-logged; see
    /// `btree::bulk` for the protocol.
    ///
    /// Errors: [`Error::BulkLoad`](crate::Error::BulkLoad) if the table is not empty, another bulk
    /// load into it is under way, a key is not greater than the one before,
    /// or rows were written into the table while it loaded (those rows
    /// stay, the loaded ones are discarded); [`Error::KeyTooLarge`](crate::Error::KeyTooLarge),
    /// [`Error::ValueTooLarge`](crate::Error::ValueTooLarge); and the errors of any write ([`Error::Closed`](crate::Error::Closed),
    /// I/O errors). Other tables can be read and written meanwhile; loading
    /// several tables from several threads at once is how to use more than
    /// one core.
    pub fn bulk_load<I, K, V>(&self, rows: I) -> Result<u64>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<[u8]>,
        V: AsRef<[u8]>,
    {
        let e = &*self.sys.engine;
        e.adm.check_writable(Purpose::New)?;
        self.check_exists()?;
        let fill = e.live.current().fill_factor;
        // A table emptied by deletes still holds their delete marks until
        // purge removes them: those no read view can see go now.
        self.sys.remove_dead_marks(self.tree)?;
        let free = crate::txn::version::free_external;
        let mut load = BulkLoad::begin(e, self.tree, &self.name, fill, free)?;
        // Large values go to overflow chains, one bundle for the load: its
        // slot is cleared by the mtr that publishes the tree, and a failed
        // load frees the chains (declared after `load`, the bundle is
        // dropped first: `lob`'s module doc on the order).
        let lobs = &self.sys.lobs;
        let mut bundle = crate::lob::Bundle::new(lobs, e);
        let ps = e.page_size();
        let inline = crate::txn::version::max_inline_len(ps);
        for (k, v) in rows {
            let (k, v) = (k.as_ref(), v.as_ref());
            crate::txn::check_user_entry(ps, k, v)?;
            // Versions of commit 0, which every read view sees (see
            // "Bulk loads and snapshots" in the `txn` module).
            let none = crate::undo::RollPtr::NONE;
            let stored = if v.len() > inline {
                let p = bundle.write(v)?.to_bytes();
                crate::txn::version::encode(0, none, Some(&p), true)
            } else {
                crate::txn::version::encode(0, none, Some(v), false)
            };
            load.push(k, &stored)?;
        }
        let first = bundle.first();
        let (n, lsn) = load.finish_with(|mtr| match first {
            Some(f) => lobs.retire_in(mtr, f).map(drop),
            None => Ok(()),
        })?;
        if first.is_some() && lsn > 0 {
            bundle.keep();
            lobs.after_commit();
        }
        if lsn > 0 {
            e.log.write_up_to(lsn, true)?;
        }
        Ok(n)
    }

    /// Check this tree's invariants; `delete_marked` counts the deleted
    /// rows purge has not removed yet.
    pub fn check(&self) -> Result<TreeStats> {
        crate::txn::version::check_table(&*self.sys.engine, self.tree.root())
    }
}

/// An iterator over rows; each item is a (key, value) pair or an I/O or
/// corruption error.
pub struct Range<'t> {
    rows: Snapshot<'t>,
}

impl Iterator for Range<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;
    fn next(&mut self) -> Option<Self::Item> {
        self.rows.next()
    }
}
