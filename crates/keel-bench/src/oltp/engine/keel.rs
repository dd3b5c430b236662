//! Keel behind the [`Database`] traits: a session is the thread's copy of
//! the table handles, a transaction is a [`keel::Txn`] begun at the
//! `transaction_isolation` option's level (`REPEATABLE-READ` by default,
//! as sysbench runs on InnoDB). Every read of a transaction goes through
//! it: point and range selects are the transaction's plain reads
//! (`Txn::get`, `Txn::scan`), so under REPEATABLE READ they all see one
//! snapshot, and under READ COMMITTED each sees one of its own; the reads
//! before an update are locking reads (`Txn::get_for_update`) of the
//! latest version. Its waits are Keel's row locks (see the `txn` module
//! of `keel`).

use std::sync::Arc;

use keel::{Db, Error, Table, Txn};

use super::{
    handle, Database, DbError, Engine, Home, Metrics, Session, Span, Transaction, TreeId, Trees,
    Visit,
};
use crate::oltp::options_json;

/// A Keel database for the workloads.
pub struct KeelDatabase {
    home: Home,
    db: Db,
    trees: Trees<Table>,
}

impl KeelDatabase {
    /// Wrap an open database (a `Db` is a cheap handle; closing any clone
    /// closes it).
    pub fn new(db: Db) -> Self {
        KeelDatabase {
            home: Home::new(Engine::Keel, db.dir()),
            db,
            trees: Trees::new(),
        }
    }
}

impl Database for KeelDatabase {
    fn home(&self) -> &Home {
        &self.home
    }

    fn tree(&self, name: &str, create: bool) -> Result<Option<TreeId>, DbError> {
        self.trees.get_or_open(name, || {
            let t = if create {
                self.db.table_or_create(name)
            } else {
                self.db.table(name)
            };
            match t {
                Ok(t) => Ok(Some(t)),
                Err(Error::TableNotFound(_)) => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
    }

    fn session(&self) -> Result<Box<dyn Session + '_>, DbError> {
        Ok(Box::new(KeelSession {
            db: self,
            cache: Vec::new(),
        }))
    }

    /// An empty table is built bottom-up by `Table::bulk_load` (one mtr per
    /// leaf, published at once, durable on return); a table that already
    /// holds rows (a prepare interrupted earlier) is loaded in batches.
    fn load_sorted(
        &self,
        session: &mut dyn Session,
        tree: TreeId,
        rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
        loaded: &mut dyn FnMut(u64),
    ) -> Result<u64, DbError> {
        let mut cache = Vec::new();
        self.trees.refresh(&mut cache);
        let table = handle(&cache, "keel", tree)?.1.clone();
        if table.range::<std::ops::RangeFull>(..)?.next().is_some() {
            return super::load_in_batches(session, tree, rows, loaded);
        }
        // Progress in steps, not per row.
        let mut pending = 0u64;
        let counted = rows.inspect(|_| {
            pending += 1;
            if pending == 1024 {
                loaded(pending);
                pending = 0;
            }
        });
        let n = table.bulk_load(counted)?;
        loaded(pending);
        Ok(n)
    }

    /// The registry's metrics, plus the undo pages cached in the buffer
    /// pool from [`Db::history`] (not a registry metric), for the report's
    /// share of the pool that undo takes.
    fn metrics(&self) -> Metrics {
        let mut m = self.db.metrics().snapshot();
        m.insert(
            crate::oltp::UNDO_PAGES_IN_POOL,
            self.db.history().undo_pages_in_pool,
        );
        m
    }

    fn isolation(&self) -> Option<String> {
        Some(self.db.options().transaction_isolation.to_string())
    }

    fn not_measured(&self) -> &'static [&'static str] {
        &[]
    }

    fn settings(&self) -> serde_json::Map<String, serde_json::Value> {
        options_json(&self.db.options())
    }

    fn flush(&self) -> Result<(), DbError> {
        Ok(self.db.flush()?)
    }

    fn keel(&self) -> Option<&Db> {
        Some(&self.db)
    }

    fn close(self: Box<Self>) -> Result<(), DbError> {
        Ok(self.db.close()?)
    }
}

struct KeelSession<'d> {
    db: &'d KeelDatabase,
    cache: Vec<(Arc<str>, Table)>,
}

impl Session for KeelSession<'_> {
    fn begin(&mut self, _write: bool) -> Result<Box<dyn Transaction + '_>, DbError> {
        self.db.trees.refresh(&mut self.cache);
        Ok(Box::new(KeelTxn {
            tx: self.db.db.begin(),
            tables: &self.cache,
        }))
    }
}

struct KeelTxn<'s> {
    tx: Txn,
    tables: &'s [(Arc<str>, Table)],
}

impl<'s> KeelTxn<'s> {
    fn table(&self, tree: TreeId) -> Result<&'s Table, DbError> {
        Ok(handle(self.tables, "keel", tree)?.1)
    }
}

impl Transaction for KeelTxn<'_> {
    fn get(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        Ok(self.tx.get(self.table(tree)?, key)?)
    }

    fn get_for_update(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        let t = self.table(tree)?;
        Ok(self.tx.get_for_update(t, key)?)
    }

    fn put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        let t = self.table(tree)?;
        Ok(self.tx.put(t, key, value)?)
    }

    fn delete(&mut self, tree: TreeId, key: &[u8]) -> Result<(), DbError> {
        let t = self.table(tree)?;
        self.tx.delete(t, key)?;
        Ok(())
    }

    fn range(
        &mut self,
        tree: TreeId,
        span: Span<'_>,
        visit: &mut Visit<'_>,
    ) -> Result<usize, DbError> {
        let Span { from, to, limit } = span;
        let t = self.table(tree)?;
        let mut scan = match to {
            Some(to) => self.tx.scan(t, from..=to)?,
            None => self.tx.scan(t, from..)?,
        };
        // Lent rows, as the other engines' drivers visit theirs: no copy.
        let mut n = 0;
        while n < limit {
            let Some(row) = scan.next_row() else { break };
            let (k, v) = row?;
            visit(k, v);
            n += 1;
        }
        Ok(n)
    }

    fn last_key(&mut self, tree: TreeId) -> Result<Option<Vec<u8>>, DbError> {
        let t = self.table(tree)?;
        match self.tx.scan_rev(t, ..)?.next() {
            Some(row) => Ok(Some(row?.0)),
            None => Ok(None),
        }
    }

    fn commit(self: Box<Self>) -> Result<(), DbError> {
        Ok(self.tx.commit()?)
    }
}
