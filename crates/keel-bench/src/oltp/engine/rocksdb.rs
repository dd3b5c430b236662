//! RocksDB behind the [`Database`] traits: a pessimistic `TransactionDB`
//! in the data directory, each tree a column family, one LRU block cache
//! of `buffer_pool_size` shared by every column family (index and filter
//! blocks and the memtables charged to it).
//!
//! Locking: `get_for_update`, `put` and `delete` take RocksDB's row locks
//! (exclusive) until commit; a second writer of a row waits up to
//! `lock_wait_timeout` and gets `TimedOut`, a wait that would close a cycle
//! gets `Busy` (deadlock detection is on): both are retried. Plain reads
//! take no lock. With `flush_log_at_trx_commit` = 1 every commit syncs the
//! WAL; with 0 or 2 commits write the WAL without syncing and a background
//! thread makes a synced write once a second, which syncs the WAL up to it.

use std::path::Path;
use std::sync::Arc;

use rocksdb::{
    BlockBasedOptions, BoundColumnFamily, Cache, ColumnFamilyDescriptor, ErrorKind, MultiThreaded,
    Options, ReadOptions, TransactionDB, TransactionDBOptions, TransactionOptions,
    WriteBufferManager, WriteOptions,
};

use super::periodic::Periodic;
use super::{
    handle, settings_map, sync_each_commit, Database, DbError, Engine, Home, Session, Span,
    Transaction, TreeId, Trees, Visit,
};

const NAME: &str = "rocksdb";
/// The key the once-a-second synced write deletes (in the default column
/// family, which holds no tree).
const SYNC_KEY: &[u8] = b"keel-bench-sync";
/// Share of the block cache the memtables may take.
const MEMTABLE_SHARE: u64 = 4;

type Tdb = TransactionDB<MultiThreaded>;

/// A RocksDB database for the workloads.
pub(crate) struct RocksDatabase {
    home: Home,
    db: Arc<Tdb>,
    cf_opts: Options,
    cache_bytes: u64,
    lock_timeout_ms: i64,
    flush_log_at_trx_commit: u8,
    /// The once-a-second sync with `flush_log_at_trx_commit` 0 or 2.
    periodic: Option<Periodic>,
    trees: Trees<()>,
}

fn err(what: impl Into<String>) -> impl FnOnce(rocksdb::Error) -> DbError {
    let what = what.into();
    move |e| DbError::Other {
        engine: NAME,
        what,
        retry: matches!(
            e.kind(),
            ErrorKind::Busy | ErrorKind::TimedOut | ErrorKind::TryAgain
        ),
        source: Box::new(e),
    }
}

impl RocksDatabase {
    /// Open or create the database in `dir`.
    pub(crate) fn open(dir: &Path, o: &keel::Options) -> Result<RocksDatabase, DbError> {
        let cache = Cache::new_lru_cache(o.buffer_pool_size as usize);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_cache_index_and_filter_blocks(true);
        table.set_bloom_filter(10.0, false);
        let mut cf_opts = Options::default();
        cf_opts.set_block_based_table_factory(&table);
        let memtables = WriteBufferManager::new_write_buffer_manager_with_cache(
            (o.buffer_pool_size / MEMTABLE_SHARE) as usize,
            false,
            cache,
        );
        let mut db_opts = cf_opts.clone();
        db_opts.create_if_missing(true);
        db_opts.set_write_buffer_manager(&memtables);
        let lock_timeout_ms = (o.lock_wait_timeout * 1000.0) as i64;
        let mut txn_opts = TransactionDBOptions::default();
        txn_opts.set_txn_lock_timeout(lock_timeout_ms);
        let names = if Engine::Rocksdb.exists(dir) {
            Tdb::list_cf(&db_opts, dir).map_err(err(format!("list {}", dir.display())))?
        } else {
            vec!["default".to_string()]
        };
        let cfs = names
            .iter()
            .map(|n| ColumnFamilyDescriptor::new(n, cf_opts.clone()));
        let db = Tdb::open_cf_descriptors(&db_opts, &txn_opts, dir, cfs)
            .map_err(err(format!("open {}", dir.display())))?;
        let db = Arc::new(db);
        let periodic = if sync_each_commit(o) {
            None
        } else {
            let db = Arc::clone(&db);
            Some(Periodic::start(NAME, move || {
                let mut sync = WriteOptions::default();
                sync.set_sync(true);
                db.delete_opt(SYNC_KEY, &sync).map_err(|e| e.to_string())
            })?)
        };
        Ok(RocksDatabase {
            home: Home::new(Engine::Rocksdb, dir),
            db,
            cf_opts,
            cache_bytes: o.buffer_pool_size,
            lock_timeout_ms,
            flush_log_at_trx_commit: o.flush_log_at_trx_commit,
            periodic,
            trees: Trees::new(),
        })
    }
}

impl Database for RocksDatabase {
    fn home(&self) -> &Home {
        &self.home
    }

    fn tree(&self, name: &str, create: bool) -> Result<Option<TreeId>, DbError> {
        self.trees.get_or_open(name, || {
            if self.db.cf_handle(name).is_some() {
                return Ok(Some(()));
            }
            if !create {
                return Ok(None);
            }
            self.db
                .create_cf(name, &self.cf_opts)
                .map_err(err(format!("create column family {name}")))?;
            Ok(Some(()))
        })
    }

    fn session(&self) -> Result<Box<dyn Session + '_>, DbError> {
        let mut write = WriteOptions::default();
        write.set_sync(self.periodic.is_none());
        let mut txn = TransactionOptions::default();
        txn.set_deadlock_detect(true);
        Ok(Box::new(RocksSession {
            db: self,
            names: Vec::new(),
            cfs: Vec::new(),
            write,
            txn,
        }))
    }

    fn settings(&self) -> serde_json::Map<String, serde_json::Value> {
        settings_map(serde_json::json!({
            "buffer_pool_size": self.cache_bytes,
            "block_cache": self.cache_bytes,
            "memtables": format!("charged to the block cache, at most 1/{MEMTABLE_SHARE} of it"),
            "flush_log_at_trx_commit": self.flush_log_at_trx_commit,
            "wal_sync": if self.periodic.is_none() {
                "at every commit"
            } else {
                "once a second"
            },
            "lock_timeout_ms": self.lock_timeout_ms,
            "transactions": "TransactionDB (pessimistic), deadlock detection on",
            "compression": "none",
        }))
    }

    fn flush(&self) -> Result<(), DbError> {
        let mut sync = WriteOptions::default();
        sync.set_sync(true);
        self.db
            .delete_opt(SYNC_KEY, &sync)
            .map_err(err(format!("sync {}", self.home.dir.display())))
    }

    fn close(mut self: Box<Self>) -> Result<(), DbError> {
        drop(self.periodic.take());
        self.flush()
    }
}

struct RocksSession<'d> {
    db: &'d RocksDatabase,
    names: Vec<(Arc<str>, ())>,
    cfs: Vec<Arc<BoundColumnFamily<'d>>>,
    write: WriteOptions,
    txn: TransactionOptions,
}

impl Session for RocksSession<'_> {
    fn begin(&mut self, _write: bool) -> Result<Box<dyn Transaction + '_>, DbError> {
        self.db.trees.refresh(&mut self.names);
        for (name, ()) in &self.names[self.cfs.len()..] {
            let cf = self.db.db.cf_handle(name).ok_or_else(|| {
                DbError::fatal(NAME, format!("column family {name}"), "not found")
            })?;
            self.cfs.push(cf);
        }
        Ok(Box::new(RocksTxn {
            db: self.db,
            tx: self.db.db.transaction_opt(&self.write, &self.txn),
            names: &self.names,
            cfs: &self.cfs,
        }))
    }
}

struct RocksTxn<'s> {
    db: &'s RocksDatabase,
    tx: rocksdb::Transaction<'s, Tdb>,
    names: &'s [(Arc<str>, ())],
    cfs: &'s [Arc<BoundColumnFamily<'s>>],
}

impl<'s> RocksTxn<'s> {
    fn cf(&self, tree: TreeId) -> Result<(&'s str, &'s Arc<BoundColumnFamily<'s>>), DbError> {
        let name = handle(self.names, NAME, tree)?.0;
        let cf = self
            .cfs
            .get(tree)
            .ok_or_else(|| DbError::fatal(NAME, format!("column family {name}"), "not opened"))?;
        Ok((name, cf))
    }
}

impl Transaction for RocksTxn<'_> {
    fn get(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        let (name, cf) = self.cf(tree)?;
        let v = self
            .tx
            .get_pinned_cf(cf, key)
            .map_err(err(format!("get from {name}")))?;
        Ok(v.map(|v| v.to_vec()))
    }

    fn get_for_update(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        let (name, cf) = self.cf(tree)?;
        self.tx
            .get_for_update_cf(cf, key, true)
            .map_err(err(format!("get for update from {name}")))
    }

    fn put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        let (name, cf) = self.cf(tree)?;
        self.tx
            .put_cf(cf, key, value)
            .map_err(err(format!("put in {name}")))
    }

    fn delete(&mut self, tree: TreeId, key: &[u8]) -> Result<(), DbError> {
        let (name, cf) = self.cf(tree)?;
        self.tx
            .delete_cf(cf, key)
            .map_err(err(format!("delete in {name}")))
    }

    fn range(
        &mut self,
        tree: TreeId,
        span: Span<'_>,
        visit: &mut Visit<'_>,
    ) -> Result<usize, DbError> {
        let Span { from, to, limit } = span;
        let (name, cf) = self.cf(tree)?;
        let mut opts = ReadOptions::default();
        if let Some(to) = to {
            // The bound is exclusive: the smallest key after `to`.
            let mut bound = to.to_vec();
            bound.push(0);
            opts.set_iterate_upper_bound(bound);
        }
        let mut it = self.tx.raw_iterator_cf_opt(cf, opts);
        it.seek(from);
        let mut n = 0;
        while n < limit {
            let (Some(k), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            visit(k, v);
            n += 1;
            it.next();
        }
        it.status().map_err(err(format!("range of {name}")))?;
        Ok(n)
    }

    fn last_key(&mut self, tree: TreeId) -> Result<Option<Vec<u8>>, DbError> {
        let (name, cf) = self.cf(tree)?;
        let mut it = self.tx.raw_iterator_cf(cf);
        it.seek_to_last();
        let key = it.key().map(<[u8]>::to_vec);
        it.status().map_err(err(format!("last key of {name}")))?;
        Ok(key)
    }

    fn commit(self: Box<Self>) -> Result<(), DbError> {
        if let Some(p) = &self.db.periodic {
            p.check()?;
        }
        self.tx.commit().map_err(err("commit"))
    }
}
