//! The storage engines `keel bench oltp --engine` runs the workload on:
//! Keel always, and SQLite, redb, LMDB and RocksDB when their cargo
//! features are built (see `docs/engines.md` for what each one's commit
//! means and how the options map).
//!
//! Every engine is reached through three traits carrying exactly what the
//! OLTP workloads use: a [`Database`] (shared by the client threads) opens
//! trees by name and gives each thread a [`Session`] (SQLite needs one
//! connection per thread); a session begins one [`Transaction`] at a time,
//! read-only or read-write, since single-writer engines must start a
//! writing transaction as a writer. The secondary index is maintained by
//! the workload, identically for every engine: it is just another tree.
//!
//! Waiting: a transaction may wait inside the engine (Keel's row locks,
//! SQLite's busy handler, the single writer lock of redb and LMDB,
//! RocksDB's row locks); it holds nothing of this crate while it waits.
//! Creating a tree holds the `Trees` registry's write lock while the
//! engine creates it (which may wait for that engine's writer); sessions
//! take the registry's read lock only when a transaction begins and not
//! while one is open, so the creator's wait always ends.

mod keel;
#[cfg(feature = "lmdb")]
mod lmdb;
#[cfg(any(feature = "lmdb", feature = "rocksdb"))]
mod periodic;
#[cfg(feature = "redb")]
mod redb;
#[cfg(feature = "rocksdb")]
mod rocksdb;
#[cfg(feature = "sqlite")]
mod sqlite;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

pub use self::keel::KeelDatabase;
use super::{OltpError, OltpParams, WORKLOAD_KEYS};

/// A tree of a [`Database`]: the index its registry gave it.
pub type TreeId = usize;

/// An engine's metrics at one instant (Keel's by InnoDB's names).
pub type Metrics = BTreeMap<&'static str, u64>;

/// What a scan calls for each entry, in key order.
pub type Visit<'a> = dyn FnMut(&[u8], &[u8]) + 'a;

/// The entries a scan visits: from `from` to `to` (inclusive; `None`: to
/// the end of the tree), at most `limit`.
#[derive(Clone, Copy, Debug)]
pub struct Span<'k> {
    /// The first key (`[]`: the start of the tree).
    pub from: &'k [u8],
    /// The last key, if any.
    pub to: Option<&'k [u8]>,
    /// At most this many entries.
    pub limit: usize,
}

impl Span<'static> {
    /// The whole tree.
    pub const ALL: Span<'static> = Span {
        from: &[],
        to: None,
        limit: usize::MAX,
    };
}

/// An error of an engine during the workload.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DbError {
    /// Keel failed.
    #[error(transparent)]
    Keel(#[from] ::keel::Error),
    /// Another engine failed.
    #[error("{engine}: {what}: {source}")]
    Other {
        /// The engine's name.
        engine: &'static str,
        /// What was attempted, with the tree or file.
        what: String,
        /// True if the transaction should start again (deadlock, lock wait
        /// timeout, busy); false if the run cannot go on.
        retry: bool,
        /// What the engine said.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl DbError {
    /// True for the errors sysbench retries: the transaction starts again.
    pub fn is_retryable(&self) -> bool {
        match self {
            DbError::Keel(e) => matches!(
                e,
                ::keel::Error::Deadlock { .. }
                    | ::keel::Error::LockWaitTimeout { .. }
                    | ::keel::Error::TxnAborted
            ),
            DbError::Other { retry, .. } => *retry,
        }
    }

    /// A fatal error of `engine` while doing `what`.
    pub(crate) fn fatal(
        engine: &'static str,
        what: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> DbError {
        DbError::Other {
            engine,
            what: what.into(),
            retry: false,
            source: source.into(),
        }
    }
}

/// Which engine a database is and its data directory.
#[derive(Clone, Debug)]
pub struct Home {
    /// The engine.
    pub engine: Engine,
    /// The data directory.
    pub dir: PathBuf,
}

impl Home {
    pub(crate) fn new(engine: Engine, dir: &Path) -> Home {
        Home {
            engine,
            dir: dir.to_path_buf(),
        }
    }
}

/// An open database of one engine, shared by the client threads.
pub trait Database: Send + Sync {
    /// Which engine this is and where it lives.
    fn home(&self) -> &Home;
    /// Which engine this is.
    fn engine(&self) -> Engine {
        self.home().engine
    }
    /// The data directory.
    fn dir(&self) -> &Path {
        &self.home().dir
    }
    /// The tree `name`: `None` if it does not exist and `create` is false.
    fn tree(&self, name: &str, create: bool) -> Result<Option<TreeId>, DbError>;
    /// A session for one client thread.
    fn session(&self) -> Result<Box<dyn Session + '_>, DbError>;
    /// Load `rows`, in strictly ascending key order, into the tree `tree`
    /// (empty, or not: an engine without a faster way just puts them):
    /// the engine's fastest way of loading sorted data. `loaded` is called
    /// with the number of rows as they are loaded. The default puts them
    /// in transactions of [`LOAD_BATCH`] rows through `session`, retrying a
    /// batch the engine asks to retry; Keel builds an empty table bottom-up
    /// (`keel::Table::bulk_load`). Returns the rows loaded.
    fn load_sorted(
        &self,
        session: &mut dyn Session,
        tree: TreeId,
        rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
        loaded: &mut dyn FnMut(u64),
    ) -> Result<u64, DbError> {
        load_in_batches(session, tree, rows, loaded)
    }
    /// The engine's metrics now (empty for an engine that has none here).
    fn metrics(&self) -> Metrics {
        Metrics::new()
    }
    /// The fields of [`Interval`](super::Interval) and
    /// [`Summary`](super::Summary) that stay 0 for this engine.
    fn not_measured(&self) -> &'static [&'static str] {
        super::KEEL_METRIC_FIELDS
    }
    /// The isolation level the workload's transactions run at, in
    /// InnoDB's spelling (`REPEATABLE-READ`), for the report; `None` where
    /// the driver does not say.
    fn isolation(&self) -> Option<String> {
        None
    }
    /// The effective settings, for the report (`key` → value).
    fn settings(&self) -> serde_json::Map<String, serde_json::Value>;
    /// Make everything committed durable and start the run from a clean
    /// state, as far as the engine has one (after prepare).
    fn flush(&self) -> Result<(), DbError>;
    /// Keel's database when the engine is Keel (for its status report,
    /// device changes and metrics).
    fn keel(&self) -> Option<&::keel::Db> {
        None
    }
    /// Close the database, waiting for what it still writes.
    fn close(self: Box<Self>) -> Result<(), DbError>;
}

/// Rows per loading transaction of [`load_in_batches`]: large enough that
/// commits are not the bottleneck, small enough that a batch's redo fits
/// easily in the smallest logs the tests use (2 MiB).
pub const LOAD_BATCH: usize = 100;

/// [`Database::load_sorted`] for any engine: the rows in transactions of
/// [`LOAD_BATCH`], a batch the engine asks to retry (busy, lock timeout)
/// retried with the same rows.
pub fn load_in_batches(
    session: &mut dyn Session,
    tree: TreeId,
    rows: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>,
    loaded: &mut dyn FnMut(u64),
) -> Result<u64, DbError> {
    let mut n = 0;
    loop {
        let batch: Vec<_> = (&mut *rows).take(LOAD_BATCH).collect();
        if batch.is_empty() {
            return Ok(n);
        }
        loop {
            let r = (|| {
                let mut tx = session.begin(true)?;
                for (k, v) in &batch {
                    tx.put(tree, k, v)?;
                }
                tx.commit()
            })();
            match r {
                Err(e) if e.is_retryable() => continue,
                r => r?,
            }
            break;
        }
        n += batch.len() as u64;
        loaded(batch.len() as u64);
    }
}

/// One client thread's access to a [`Database`].
pub trait Session {
    /// Begin a transaction; `write` for one that may write (a
    /// single-writer engine then waits for the writer's place).
    fn begin(&mut self, write: bool) -> Result<Box<dyn Transaction + '_>, DbError>;
}

/// One transaction. Dropping it without [`commit`](Self::commit) rolls it
/// back.
pub trait Transaction {
    /// The value of `key`.
    fn get(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError>;
    /// The value of `key`, locked until the transaction ends where the
    /// engine locks rows (elsewhere the writer holds the whole database).
    fn get_for_update(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError>;
    /// Insert or replace.
    fn put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<(), DbError>;
    /// Delete `key` if present.
    fn delete(&mut self, tree: TreeId, key: &[u8]) -> Result<(), DbError>;
    /// Visit the entries of `span` in key order; returns how many.
    fn range(
        &mut self,
        tree: TreeId,
        span: Span<'_>,
        visit: &mut Visit<'_>,
    ) -> Result<usize, DbError>;
    /// The largest key of the tree.
    fn last_key(&mut self, tree: TreeId) -> Result<Option<Vec<u8>>, DbError>;
    /// Commit (durable as the engine's mapping of
    /// `flush_log_at_trx_commit` says).
    fn commit(self: Box<Self>) -> Result<(), DbError>;
}

/// The engines `--engine` names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// Keel itself.
    #[default]
    Keel,
    /// SQLite (rusqlite, bundled), WAL mode.
    Sqlite,
    /// redb.
    Redb,
    /// LMDB through heed.
    Lmdb,
    /// RocksDB's TransactionDB.
    Rocksdb,
}

/// Keel's options redb reads (see `docs/engines.md`).
const SHARED: &[&str] = &["buffer_pool_size", "flush_log_at_trx_commit"];
/// LMDB has no cache of its own: it reads only the durability.
const DURABILITY: &[&str] = &["flush_log_at_trx_commit"];
/// Options the engines with a lock wait read besides [`SHARED`].
const WITH_LOCK_WAIT: &[&str] = &[
    "buffer_pool_size",
    "flush_log_at_trx_commit",
    "lock_wait_timeout",
];

impl Engine {
    /// Every engine, built or not.
    pub const ALL: [Engine; 5] = [
        Engine::Keel,
        Engine::Sqlite,
        Engine::Redb,
        Engine::Lmdb,
        Engine::Rocksdb,
    ];

    /// The name `--engine` takes.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Keel => "keel",
            Engine::Sqlite => "sqlite",
            Engine::Redb => "redb",
            Engine::Lmdb => "lmdb",
            Engine::Rocksdb => "rocksdb",
        }
    }

    /// Is it in this build?
    pub fn built(self) -> bool {
        match self {
            Engine::Keel => true,
            Engine::Sqlite => cfg!(feature = "sqlite"),
            Engine::Redb => cfg!(feature = "redb"),
            Engine::Lmdb => cfg!(feature = "lmdb"),
            Engine::Rocksdb => cfg!(feature = "rocksdb"),
        }
    }

    /// The engines in this build.
    pub fn built_names() -> Vec<&'static str> {
        Engine::ALL
            .into_iter()
            .filter(|e| e.built())
            .map(Engine::name)
            .collect()
    }

    /// An error naming the cargo feature if the engine is not built.
    pub fn check_built(self) -> Result<(), OltpError> {
        if self.built() {
            return Ok(());
        }
        Err(OltpError::param(
            "engine",
            format!(
                "`{0}` is not in this build of keel (built: {1}); rebuild with the cargo \
                 feature `{0}`, e.g. cargo build --release -p keel-cli --features {0}",
                self.name(),
                Engine::built_names().join(", ")
            ),
        ))
    }

    /// Keel's options this engine reads (empty for Keel, which reads them
    /// all).
    pub fn options(self) -> &'static [&'static str] {
        match self {
            Engine::Keel => &[],
            Engine::Sqlite | Engine::Rocksdb => WITH_LOCK_WAIT,
            Engine::Redb => SHARED,
            Engine::Lmdb => DURABILITY,
        }
    }

    /// Refuse `key` (an engine option or a workload parameter, dashes or
    /// underscores) if this engine would silently ignore it.
    pub fn check_key(self, key: &str) -> Result<(), OltpError> {
        let key = key.trim().replace('-', "_");
        if self == Engine::Keel
            || WORKLOAD_KEYS.contains(&key.as_str())
            || self.options().contains(&key.as_str())
        {
            return Ok(());
        }
        Err(OltpError::param(
            key,
            format!(
                "applies to Keel only: engine {} would ignore it (the options it reads: {}; \
                 every workload parameter applies to every engine)",
                self.name(),
                self.options().join(", ")
            ),
        ))
    }

    /// Refuse options set to other than Keel's default that this engine
    /// would ignore. `buffer_pool_size` passes for every engine: every
    /// scenario sets it (32 MiB by default), and LMDB, which has no cache,
    /// says in its settings that it does not use it; given on the command
    /// line, [`check_key`](Self::check_key) refuses it for LMDB.
    pub fn check_options(self, o: &::keel::Options) -> Result<(), OltpError> {
        let default = ::keel::Options::default().entries();
        for (k, v) in o.entries() {
            if k != "buffer_pool_size" && !default.contains(&(k.clone(), v)) {
                self.check_key(&k)?;
            }
        }
        Ok(())
    }

    /// Does `dir` hold a database of this engine?
    pub fn exists(self, dir: &Path) -> bool {
        match self {
            Engine::Keel => ::keel::Db::exists(dir),
            _ => dir.join(self.marker()).exists(),
        }
    }

    /// The file (or, for RocksDB, the file in its directory) that says a
    /// directory holds this engine's database.
    fn marker(self) -> &'static str {
        match self {
            Engine::Keel => "",
            Engine::Sqlite => "sbtest.sqlite",
            Engine::Redb => "sbtest.redb",
            Engine::Lmdb => "data.mdb",
            Engine::Rocksdb => "CURRENT",
        }
    }

    /// Open (creating if needed) this engine's database in `dir` with the
    /// mapped options; `params` sizes what must be sized up front (LMDB's
    /// map, SQLite's per-connection caches).
    pub fn open(
        self,
        dir: &Path,
        o: &::keel::Options,
        params: &OltpParams,
    ) -> Result<Box<dyn Database>, OltpError> {
        self.check_built()?;
        if self != Engine::Keel {
            std::fs::create_dir_all(dir)
                .map_err(OltpError::io(format!("cannot create {}", dir.display())))?;
        }
        // Unused when neither SQLite nor LMDB is built.
        let _ = params;
        Ok(match self {
            Engine::Keel => Box::new(KeelDatabase::new(::keel::Db::open(dir, o.clone())?)),
            #[cfg(feature = "sqlite")]
            Engine::Sqlite => Box::new(sqlite::SqliteDatabase::open(dir, o, params)?),
            #[cfg(feature = "redb")]
            Engine::Redb => Box::new(redb::RedbDatabase::open(dir, o)?),
            #[cfg(feature = "lmdb")]
            Engine::Lmdb => Box::new(lmdb::LmdbDatabase::open(dir, o, params)?),
            #[cfg(feature = "rocksdb")]
            Engine::Rocksdb => Box::new(rocksdb::RocksDatabase::open(dir, o)?),
            #[allow(unreachable_patterns)]
            _ => unreachable!("check_built refused engine {self} above"),
        })
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Engine::ALL
            .into_iter()
            .find(|e| e.name() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| {
                let names: Vec<&str> = Engine::ALL.iter().map(|e| e.name()).collect();
                format!("`{s}` is not one of {}", names.join(", "))
            })
    }
}

/// The trees of one database by name, each with the engine's handle `H`.
/// Sessions copy the handles into a cache of their own when a transaction
/// begins, so that the workload's operations take no shared lock.
pub(crate) struct Trees<H> {
    all: RwLock<Vec<(Arc<str>, H)>>,
    len: AtomicUsize,
}

impl<H: Clone> Trees<H> {
    pub(crate) fn new() -> Self {
        Trees {
            all: RwLock::new(Vec::new()),
            len: AtomicUsize::new(0),
        }
    }

    /// The tree `name`: known already, or opened (or created) by `open`,
    /// which returns `None` for a tree that does not exist. The registry is
    /// held while `open` runs, so a tree is opened once.
    pub(crate) fn get_or_open(
        &self,
        name: &str,
        open: impl FnOnce() -> Result<Option<H>, DbError>,
    ) -> Result<Option<TreeId>, DbError> {
        let mut all = self.all.write().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = all.iter().position(|(n, _)| &**n == name) {
            return Ok(Some(i));
        }
        let Some(h) = open()? else {
            return Ok(None);
        };
        all.push((name.into(), h));
        self.len.store(all.len(), Ordering::Release);
        Ok(Some(all.len() - 1))
    }

    /// Bring `cache` up to date with the trees opened since it was last.
    pub(crate) fn refresh(&self, cache: &mut Vec<(Arc<str>, H)>) {
        if cache.len() == self.len.load(Ordering::Acquire) {
            return;
        }
        let all = self.all.read().unwrap_or_else(|p| p.into_inner());
        cache.extend(all[cache.len()..].iter().cloned());
    }
}

/// A session's copy of the trees' handles: the handle and name of a tree,
/// or an error naming the id if the tree was opened after the transaction
/// began (the workload opens every tree first).
pub(crate) fn handle<'a, H>(
    cache: &'a [(Arc<str>, H)],
    engine: &'static str,
    tree: TreeId,
) -> Result<(&'a str, &'a H), DbError> {
    cache
        .get(tree)
        .map(|(n, h)| (&**n, h))
        .ok_or_else(|| DbError::fatal(engine, format!("tree #{tree}"), "no such tree"))
}

/// The durability `flush_log_at_trx_commit` asks of another engine: 1 →
/// every commit is durable when it returns; 0 and 2 → no sync at commit,
/// commits made durable about once a second (SQLite: at its next WAL
/// checkpoint). What each engine loses on a crash is in `docs/engines.md`.
#[cfg(any(
    feature = "sqlite",
    feature = "redb",
    feature = "lmdb",
    feature = "rocksdb"
))]
pub(crate) fn sync_each_commit(o: &::keel::Options) -> bool {
    o.flush_log_at_trx_commit == 1
}

/// How often commits are made durable when `flush_log_at_trx_commit` is 0
/// or 2 (InnoDB flushes its log once a second then).
#[cfg(any(feature = "redb", feature = "lmdb", feature = "rocksdb"))]
pub(crate) const SYNC_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// A JSON object's map (`settings` of an engine).
#[cfg(any(
    feature = "sqlite",
    feature = "redb",
    feature = "lmdb",
    feature = "rocksdb"
))]
pub(crate) fn settings_map(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match v {
        serde_json::Value::Object(m) => m,
        other => {
            let mut m = serde_json::Map::new();
            m.insert("settings".into(), other);
            m
        }
    }
}

/// The number of trees the workload's `tables` open (rows and `k` index).
#[cfg(any(feature = "sqlite", feature = "lmdb"))]
pub(crate) fn trees_of(params: &OltpParams) -> usize {
    params.tables * 2
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Options only Keel reads (its flushing knobs, `fill_factor` for its
    /// bulk load) are refused by every other engine, built or not, whether
    /// named on the command line or set in the options; Keel takes them.
    #[test]
    fn keel_only_options_are_refused_by_every_other_engine() {
        let mut o = ::keel::Options::default();
        o.set("fill_factor", "70").unwrap();
        for e in Engine::ALL.into_iter().filter(|e| *e != Engine::Keel) {
            for key in ["fill_factor", "fill-factor", "io_capacity", "flush_policy"] {
                let err = e.check_key(key).unwrap_err().to_string();
                assert!(
                    err.contains(&key.replace('-', "_")) && err.contains("Keel only"),
                    "{e}: {err}"
                );
            }
            let err = e.check_options(&o).unwrap_err().to_string();
            assert!(err.contains("fill_factor"), "{e}: {err}");
        }
        Engine::Keel.check_key("fill_factor").unwrap();
        Engine::Keel.check_options(&o).unwrap();
    }
}
