//! LMDB (through heed) behind the [`Database`] traits: one environment in
//! the data directory (`data.mdb`, `lock.mdb`), each tree a named LMDB
//! database of bytes → bytes.
//!
//! LMDB has one writer at a time: a writing transaction waits in
//! `write_txn` (LMDB's writer mutex, no timeout) until the previous writer
//! ends; readers see the last committed state and never wait. LMDB has no
//! cache of its own: it reads through a read-only memory map of the file,
//! so its cache is the OS page cache and `buffer_pool_size` is not used.
//! With `flush_log_at_trx_commit` = 1 every commit syncs (data, then the
//! meta page); with 0 or 2 the environment is `MDB_NOSYNC` and a
//! background thread syncs it once a second (see [`periodic`](super::periodic)).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use heed::types::Bytes;
use heed::{Env, EnvFlags, EnvOpenOptions, RoTxn, RwTxn, WithTls};

use super::periodic::Periodic;
use super::{
    handle, settings_map, sync_each_commit, trees_of, Database, DbError, Engine, Home, Session,
    Span, Transaction, TreeId, Trees, Visit,
};
use crate::oltp::OltpParams;

const NAME: &str = "lmdb";
/// The smallest map (address space reserved for the file; the file grows
/// only as pages are used).
const MIN_MAP_BYTES: u64 = 16 << 30;
/// Map bytes reserved per row the workload loads: rows, index entries,
/// B-tree overhead and room for the insert workload to grow, many times
/// over.
const MAP_BYTES_PER_ROW: u64 = 8 << 10;

type Db = heed::Database<Bytes, Bytes>;

/// An LMDB environment for the workloads.
pub(crate) struct LmdbDatabase {
    home: Home,
    path: PathBuf,
    env: Env,
    map_bytes: u64,
    flush_log_at_trx_commit: u8,
    /// The once-a-second sync with `flush_log_at_trx_commit` 0 or 2.
    periodic: Option<Periodic>,
    trees: Trees<Db>,
}

fn fatal(what: impl Into<String>) -> impl FnOnce(heed::Error) -> DbError {
    let what = what.into();
    move |e| DbError::fatal(NAME, what, e)
}

impl LmdbDatabase {
    /// Open or create the environment in `dir`, its map sized for
    /// `params`' tables.
    pub(crate) fn open(
        dir: &Path,
        o: &keel::Options,
        params: &OltpParams,
    ) -> Result<LmdbDatabase, DbError> {
        let rows = params.tables as u64 * params.table_size;
        let page = 4096;
        let map_bytes = rows.saturating_mul(MAP_BYTES_PER_ROW).max(MIN_MAP_BYTES) / page * page;
        let mut opts = EnvOpenOptions::new();
        opts.map_size(map_bytes as usize)
            .max_dbs(trees_of(params) as u32 + 8)
            .max_readers(params.threads as u32 * 2 + 16);
        let every_commit = sync_each_commit(o);
        if !every_commit {
            // SAFETY: MDB_NOSYNC trades durability for speed; the data stay
            // consistent if the file system keeps write order, and the
            // background thread below syncs once a second.
            unsafe {
                opts.flags(EnvFlags::NO_SYNC);
            }
        }
        let what = || format!("open {}", dir.display());
        // SAFETY: LMDB's map must not be opened twice in one process or
        // changed by another while open: the benchmark opens each data
        // directory once and nothing else writes to it.
        let env: Env<WithTls> = unsafe { opts.open(dir) }.map_err(fatal(what()))?;
        let periodic = if every_commit {
            None
        } else {
            let e = env.clone();
            Some(Periodic::start(NAME, move || {
                e.force_sync().map_err(|e| e.to_string())
            })?)
        };
        Ok(LmdbDatabase {
            home: Home::new(Engine::Lmdb, dir),
            path: dir.join(Engine::Lmdb.marker()),
            env,
            map_bytes,
            flush_log_at_trx_commit: o.flush_log_at_trx_commit,
            periodic,
            trees: Trees::new(),
        })
    }
}

impl Database for LmdbDatabase {
    fn home(&self) -> &Home {
        &self.home
    }

    fn tree(&self, name: &str, create: bool) -> Result<Option<TreeId>, DbError> {
        self.trees.get_or_open(name, || {
            let what = || format!("database {name}");
            if create {
                let mut tx = self.env.write_txn().map_err(fatal(what()))?;
                let db: Db = self
                    .env
                    .create_database(&mut tx, Some(name))
                    .map_err(fatal(what()))?;
                tx.commit().map_err(fatal(what()))?;
                return Ok(Some(db));
            }
            let tx = self.env.read_txn().map_err(fatal(what()))?;
            let db: Option<Db> = self
                .env
                .open_database(&tx, Some(name))
                .map_err(fatal(what()))?;
            // The handle is the environment's only once its transaction commits.
            tx.commit().map_err(fatal(what()))?;
            Ok(db)
        })
    }

    fn session(&self) -> Result<Box<dyn Session + '_>, DbError> {
        Ok(Box::new(LmdbSession {
            db: self,
            cache: Vec::new(),
        }))
    }

    fn settings(&self) -> serde_json::Map<String, serde_json::Value> {
        settings_map(serde_json::json!({
            "buffer_pool_size": "not used: LMDB reads through the OS page cache (mmap)",
            "map_size": self.map_bytes,
            "flush_log_at_trx_commit": self.flush_log_at_trx_commit,
            "sync": if self.periodic.is_none() {
                "at every commit"
            } else {
                "MDB_NOSYNC, synced once a second"
            },
        }))
    }

    fn flush(&self) -> Result<(), DbError> {
        self.env
            .force_sync()
            .map_err(fatal(format!("sync {}", self.path.display())))
    }

    fn close(mut self: Box<Self>) -> Result<(), DbError> {
        drop(self.periodic.take());
        self.flush()?;
        let LmdbDatabase { env, .. } = *self;
        env.prepare_for_closing().wait();
        Ok(())
    }
}

struct LmdbSession<'d> {
    db: &'d LmdbDatabase,
    cache: Vec<(Arc<str>, Db)>,
}

impl Session for LmdbSession<'_> {
    fn begin(&mut self, write: bool) -> Result<Box<dyn Transaction + '_>, DbError> {
        self.db.trees.refresh(&mut self.cache);
        let env = &self.db.env;
        let tx = if write {
            Txn::Write(
                env.write_txn()
                    .map_err(fatal("begin a write transaction"))?,
            )
        } else {
            Txn::Read(env.read_txn().map_err(fatal("begin a read transaction"))?)
        };
        Ok(Box::new(LmdbTxn {
            db: self.db,
            tx,
            trees: &self.cache,
        }))
    }
}

enum Txn<'e> {
    Read(RoTxn<'e, WithTls>),
    Write(RwTxn<'e>),
}

struct LmdbTxn<'s> {
    db: &'s LmdbDatabase,
    tx: Txn<'s>,
    trees: &'s [(Arc<str>, Db)],
}

impl<'s> LmdbTxn<'s> {
    fn tree(&self, tree: TreeId) -> Result<(&'s str, Db), DbError> {
        let (name, db) = handle(self.trees, NAME, tree)?;
        Ok((name, *db))
    }

    fn ro(&self) -> &RoTxn<'s> {
        match &self.tx {
            Txn::Read(t) => t,
            Txn::Write(t) => t,
        }
    }

    /// The write transaction, or an error naming what `what` tried.
    fn rw(&mut self, what: &str) -> Result<&mut RwTxn<'s>, DbError> {
        match &mut self.tx {
            Txn::Write(t) => Ok(t),
            Txn::Read(_) => Err(DbError::fatal(
                NAME,
                what.to_string(),
                "the transaction was begun read-only",
            )),
        }
    }
}

impl Transaction for LmdbTxn<'_> {
    fn get(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        let (name, db) = self.tree(tree)?;
        let v = db
            .get(self.ro(), key)
            .map_err(fatal(format!("get from {name}")))?;
        Ok(v.map(<[u8]>::to_vec))
    }

    /// The writer holds the whole environment.
    fn get_for_update(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        self.get(tree, key)
    }

    fn put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        let (name, db) = self.tree(tree)?;
        let what = format!("put in {name}");
        db.put(self.rw(&what)?, key, value).map_err(fatal(what))
    }

    fn delete(&mut self, tree: TreeId, key: &[u8]) -> Result<(), DbError> {
        let (name, db) = self.tree(tree)?;
        let what = format!("delete in {name}");
        db.delete(self.rw(&what)?, key).map_err(fatal(what))?;
        Ok(())
    }

    fn range(
        &mut self,
        tree: TreeId,
        span: Span<'_>,
        visit: &mut Visit<'_>,
    ) -> Result<usize, DbError> {
        let Span { from, to, limit } = span;
        use std::ops::Bound::{Included, Unbounded};
        let (name, db) = self.tree(tree)?;
        let e = || fatal(format!("range of {name}"));
        // LMDB refuses an empty key, even as a bound: "" is the start.
        let start = if from.is_empty() {
            Unbounded
        } else {
            Included(from)
        };
        let bounds = (start, to.map_or(Unbounded, Included));
        let mut n = 0;
        for row in db.range(self.ro(), &bounds).map_err(e())?.take(limit) {
            let (k, v) = row.map_err(e())?;
            visit(k, v);
            n += 1;
        }
        Ok(n)
    }

    fn last_key(&mut self, tree: TreeId) -> Result<Option<Vec<u8>>, DbError> {
        let (name, db) = self.tree(tree)?;
        let last = db
            .last(self.ro())
            .map_err(fatal(format!("last key of {name}")))?;
        Ok(last.map(|(k, _)| k.to_vec()))
    }

    fn commit(self: Box<Self>) -> Result<(), DbError> {
        if let Some(p) = &self.db.periodic {
            p.check()?;
        }
        match self.tx {
            Txn::Read(t) => t.commit().map_err(fatal("end a read transaction")),
            Txn::Write(t) => t.commit().map_err(fatal("commit")),
        }
    }
}
