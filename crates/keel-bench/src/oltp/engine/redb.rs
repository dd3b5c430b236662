//! redb behind the [`Database`] traits: one file `sbtest.redb`, each tree a
//! redb table of `&[u8]` → `&[u8]`, the page cache `buffer_pool_size`.
//!
//! redb has one writer at a time: a writing transaction waits in
//! `begin_write` (no timeout) until the previous writer commits or aborts;
//! readers see the last committed state and never wait. With
//! `flush_log_at_trx_commit` = 1 every commit is `Durability::Immediate`;
//! with 0 or 2 commits are `Durability::None` and the first commit after a
//! second has passed is `Immediate`, which makes every commit before it
//! durable too.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use redb::{
    Durability, ReadOnlyTable, ReadTransaction, ReadableTable, TableDefinition, TableError,
    WriteTransaction,
};

use super::{
    handle, settings_map, sync_each_commit, Database, DbError, Engine, Home, Session, Span,
    Transaction, TreeId, Trees, Visit, SYNC_EVERY,
};

const NAME: &str = "redb";

type Bytes = &'static [u8];
type Def<'n> = TableDefinition<'n, Bytes, Bytes>;
type Names = [(Arc<str>, ())];

/// A redb database for the workloads.
pub(crate) struct RedbDatabase {
    home: Home,
    path: PathBuf,
    db: redb::Database,
    cache_bytes: u64,
    flush_log_at_trx_commit: u8,
    /// When the last durable commit was made (`None` with
    /// `flush_log_at_trx_commit` = 1: every commit is durable).
    last_durable: Option<Mutex<Instant>>,
    trees: Trees<()>,
}

fn fatal(what: impl Into<String>) -> impl FnOnce(redb::Error) -> DbError {
    let what = what.into();
    move |e| DbError::fatal(NAME, what, e)
}

impl RedbDatabase {
    /// Open or create `dir/sbtest.redb` with a cache of `buffer_pool_size`.
    pub(crate) fn open(dir: &Path, o: &keel::Options) -> Result<RedbDatabase, DbError> {
        let path = dir.join(Engine::Redb.marker());
        let db = redb::Database::builder()
            .set_cache_size(o.buffer_pool_size as usize)
            .create(&path)
            .map_err(|e| fatal(format!("open {}", path.display()))(e.into()))?;
        Ok(RedbDatabase {
            db,
            cache_bytes: o.buffer_pool_size,
            flush_log_at_trx_commit: o.flush_log_at_trx_commit,
            last_durable: (!sync_each_commit(o)).then(|| Mutex::new(Instant::now())),
            trees: Trees::new(),
            home: Home::new(Engine::Redb, dir),
            path,
        })
    }

    /// The durability of the commit about to be made.
    fn durability(&self) -> Durability {
        let Some(last) = &self.last_durable else {
            return Durability::Immediate;
        };
        let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
        if last.elapsed() >= SYNC_EVERY {
            *last = Instant::now();
            Durability::Immediate
        } else {
            Durability::None
        }
    }

    fn begin_write(&self) -> Result<WriteTransaction, DbError> {
        self.db
            .begin_write()
            .map_err(|e| fatal("begin a write transaction")(e.into()))
    }
}

impl Database for RedbDatabase {
    fn home(&self) -> &Home {
        &self.home
    }

    fn tree(&self, name: &str, create: bool) -> Result<Option<TreeId>, DbError> {
        self.trees.get_or_open(name, || {
            let what = || format!("table {name}");
            if create {
                let mut tx = self.begin_write()?;
                tx.open_table(Def::new(name))
                    .map_err(|e| fatal(what())(e.into()))?;
                tx.set_durability(Durability::Immediate);
                tx.commit().map_err(|e| fatal(what())(e.into()))?;
                return Ok(Some(()));
            }
            let tx = self.db.begin_read().map_err(|e| fatal(what())(e.into()))?;
            match tx.open_table(Def::new(name)) {
                Ok(_) => Ok(Some(())),
                Err(TableError::TableDoesNotExist(_)) => Ok(None),
                Err(e) => Err(fatal(what())(e.into())),
            }
        })
    }

    fn session(&self) -> Result<Box<dyn Session + '_>, DbError> {
        Ok(Box::new(RedbSession {
            db: self,
            cache: Vec::new(),
        }))
    }

    fn settings(&self) -> serde_json::Map<String, serde_json::Value> {
        settings_map(serde_json::json!({
            "redb_version": "2.6",
            "buffer_pool_size": self.cache_bytes,
            "cache_size": self.cache_bytes,
            "flush_log_at_trx_commit": self.flush_log_at_trx_commit,
            "durability": if self.last_durable.is_none() {
                "Immediate"
            } else {
                "None, and Immediate once a second"
            },
        }))
    }

    fn flush(&self) -> Result<(), DbError> {
        let mut tx = self.begin_write()?;
        tx.set_durability(Durability::Immediate);
        tx.commit()
            .map_err(|e| fatal(format!("sync {}", self.path.display()))(e.into()))
    }

    fn close(self: Box<Self>) -> Result<(), DbError> {
        // The last commits of a run with trx_commit 0 or 2 become durable.
        self.flush()
    }
}

struct RedbSession<'d> {
    db: &'d RedbDatabase,
    cache: Vec<(Arc<str>, ())>,
}

impl Session for RedbSession<'_> {
    fn begin(&mut self, write: bool) -> Result<Box<dyn Transaction + '_>, DbError> {
        self.db.trees.refresh(&mut self.cache);
        if write {
            let tx = self.db.begin_write()?;
            return Ok(Box::new(RedbWrite {
                db: self.db,
                names: &self.cache,
                cell: WriteCell::new(tx, |_| Vec::new()),
            }));
        }
        let tx = self
            .db
            .db
            .begin_read()
            .map_err(|e| fatal("begin a read transaction")(e.into()))?;
        Ok(Box::new(RedbRead {
            tx,
            names: &self.cache,
            tables: Vec::new(),
        }))
    }
}

/// The reads every table type has, on a table named `name`.
mod read {
    use super::*;

    pub(super) fn get(
        t: &impl ReadableTable<Bytes, Bytes>,
        name: &str,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, DbError> {
        let v = t
            .get(key)
            .map_err(|e| fatal(format!("get from {name}"))(e.into()))?;
        Ok(v.map(|g| g.value().to_vec()))
    }

    pub(super) fn range(
        t: &impl ReadableTable<Bytes, Bytes>,
        name: &str,
        Span { from, to, limit }: Span<'_>,
        visit: &mut Visit<'_>,
    ) -> Result<usize, DbError> {
        let e = || fatal(format!("range of {name}"));
        let rows = match to {
            Some(to) => t.range::<&[u8]>(from..=to),
            None => t.range::<&[u8]>(from..),
        }
        .map_err(|x| e()(x.into()))?;
        let mut n = 0;
        for row in rows.take(limit) {
            let (k, v) = row.map_err(|x| e()(x.into()))?;
            visit(k.value(), v.value());
            n += 1;
        }
        Ok(n)
    }

    pub(super) fn last_key(
        t: &impl ReadableTable<Bytes, Bytes>,
        name: &str,
    ) -> Result<Option<Vec<u8>>, DbError> {
        let last = t
            .last()
            .map_err(|e| fatal(format!("last key of {name}"))(e.into()))?;
        Ok(last.map(|(k, _)| k.value().to_vec()))
    }
}

struct RedbRead<'s> {
    tx: ReadTransaction,
    names: &'s Names,
    tables: Vec<Option<ReadOnlyTable<Bytes, Bytes>>>,
}

impl RedbRead<'_> {
    fn table(&mut self, tree: TreeId) -> Result<(&str, &ReadOnlyTable<Bytes, Bytes>), DbError> {
        let name = handle(self.names, NAME, tree)?.0;
        if self.tables.len() <= tree {
            self.tables.resize_with(tree + 1, || None);
        }
        let slot = &mut self.tables[tree];
        if slot.is_none() {
            let t = self
                .tx
                .open_table(Def::new(name))
                .map_err(|e| fatal(format!("open {name}"))(e.into()))?;
            *slot = Some(t);
        }
        match slot {
            Some(t) => Ok((name, t)),
            None => unreachable!("table {name} was opened just above"),
        }
    }

    fn read_only(&self, tree: TreeId) -> DbError {
        let name = handle(self.names, NAME, tree).map_or("?", |(n, _)| n);
        DbError::fatal(
            NAME,
            format!("write to {name}"),
            "the transaction was begun read-only",
        )
    }
}

impl Transaction for RedbRead<'_> {
    fn get(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        let (name, t) = self.table(tree)?;
        read::get(t, name, key)
    }

    fn get_for_update(&mut self, tree: TreeId, _key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        Err(self.read_only(tree))
    }

    fn put(&mut self, tree: TreeId, _key: &[u8], _value: &[u8]) -> Result<(), DbError> {
        Err(self.read_only(tree))
    }

    fn delete(&mut self, tree: TreeId, _key: &[u8]) -> Result<(), DbError> {
        Err(self.read_only(tree))
    }

    fn range(
        &mut self,
        tree: TreeId,
        span: Span<'_>,
        visit: &mut Visit<'_>,
    ) -> Result<usize, DbError> {
        let (name, t) = self.table(tree)?;
        read::range(t, name, span, visit)
    }

    fn last_key(&mut self, tree: TreeId) -> Result<Option<Vec<u8>>, DbError> {
        let (name, t) = self.table(tree)?;
        read::last_key(t, name)
    }

    fn commit(self: Box<Self>) -> Result<(), DbError> {
        // The tables hold the transaction open.
        let RedbRead { tx, tables, .. } = *self;
        drop(tables);
        tx.close()
            .map_err(|e| fatal("end a read transaction")(e.into()))
    }
}

/// The tables a write transaction has opened, by tree id.
type OpenTables<'t> = Vec<Option<redb::Table<'t, Bytes, Bytes>>>;

self_cell::self_cell!(
    /// A write transaction and the tables it opened (a redb table borrows
    /// its transaction; opening it once per transaction, not per
    /// operation, is how redb is meant to be used).
    struct WriteCell {
        owner: WriteTransaction,
        #[not_covariant]
        dependent: OpenTables,
    }
);

struct RedbWrite<'s> {
    db: &'s RedbDatabase,
    names: &'s Names,
    cell: WriteCell,
}

impl RedbWrite<'_> {
    /// Run `f` on the table of `tree` (opened on first use), `what` naming
    /// the operation in errors.
    fn with<R>(
        &mut self,
        tree: TreeId,
        what: &str,
        f: impl FnOnce(&mut redb::Table<'_, Bytes, Bytes>, &str) -> Result<R, DbError>,
    ) -> Result<R, DbError> {
        let name = handle(self.names, NAME, tree)?.0;
        self.cell.with_dependent_mut(|tx, tables| {
            if tables.len() <= tree {
                tables.resize_with(tree + 1, || None);
            }
            let slot = &mut tables[tree];
            if slot.is_none() {
                let t = tx
                    .open_table(Def::new(name))
                    .map_err(|e| fatal(format!("{what} in {name}"))(e.into()))?;
                *slot = Some(t);
            }
            match slot {
                Some(t) => f(t, name),
                None => unreachable!("table {name} was opened just above"),
            }
        })
    }
}

impl Transaction for RedbWrite<'_> {
    fn get(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        self.with(tree, "get", |t, name| read::get(t, name, key))
    }

    /// The writer holds the whole database.
    fn get_for_update(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        self.get(tree, key)
    }

    fn put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        self.with(tree, "put", |t, name| {
            t.insert(key, value)
                .map_err(|e| fatal(format!("put in {name}"))(e.into()))?;
            Ok(())
        })
    }

    fn delete(&mut self, tree: TreeId, key: &[u8]) -> Result<(), DbError> {
        self.with(tree, "delete", |t, name| {
            t.remove(key)
                .map_err(|e| fatal(format!("delete in {name}"))(e.into()))?;
            Ok(())
        })
    }

    fn range(
        &mut self,
        tree: TreeId,
        span: Span<'_>,
        visit: &mut Visit<'_>,
    ) -> Result<usize, DbError> {
        self.with(tree, "range", |t, name| read::range(t, name, span, visit))
    }

    fn last_key(&mut self, tree: TreeId) -> Result<Option<Vec<u8>>, DbError> {
        self.with(tree, "last key", |t, name| read::last_key(t, name))
    }

    fn commit(self: Box<Self>) -> Result<(), DbError> {
        let db = self.db;
        let mut tx = self.cell.into_owner();
        tx.set_durability(db.durability());
        tx.commit().map_err(|e| fatal("commit")(e.into()))
    }
}
