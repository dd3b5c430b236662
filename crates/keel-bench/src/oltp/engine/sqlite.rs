//! SQLite (rusqlite, bundled) behind the [`Database`] traits: one file
//! `sbtest.sqlite` in WAL mode, each tree a `WITHOUT ROWID` table
//! `(k BLOB PRIMARY KEY, v BLOB)`, one connection per session.
//!
//! A writing transaction is `BEGIN IMMEDIATE`: it takes SQLite's single
//! writer lock at once, waiting in SQLite's busy handler (sleeps of 1 to
//! 100 ms) for up to `lock_wait_timeout`; past that it fails with
//! SQLITE_BUSY, which the workload retries. Readers never wait (WAL). The
//! registry of trees creates tables through a separate connection, held in
//! a mutex while it waits for the writer lock.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::{
    handle, settings_map, sync_each_commit, trees_of, Database, DbError, Engine, Home, Session,
    Span, Transaction, TreeId, Trees, Visit,
};
use crate::oltp::OltpParams;

const NAME: &str = "sqlite";
/// SQLite's page cache floor per connection (its own default is 2 MiB).
const MIN_CACHE_KIB: u64 = 256;

/// The statements of one tree.
struct Sql {
    get: String,
    put: String,
    delete: String,
    range: String,
    range_open: String,
    last: String,
}

impl Sql {
    fn new(table: &str) -> Sql {
        let t = format!("\"{}\"", table.replace('"', "\"\""));
        Sql {
            get: format!("SELECT v FROM {t} WHERE k = ?1"),
            put: format!(
                "INSERT INTO {t} (k, v) VALUES (?1, ?2) ON CONFLICT (k) DO UPDATE SET v = excluded.v"
            ),
            delete: format!("DELETE FROM {t} WHERE k = ?1"),
            range: format!("SELECT k, v FROM {t} WHERE k >= ?1 AND k <= ?2 ORDER BY k LIMIT ?3"),
            range_open: format!("SELECT k, v FROM {t} WHERE k >= ?1 ORDER BY k LIMIT ?2"),
            last: format!("SELECT k FROM {t} ORDER BY k DESC LIMIT 1"),
        }
    }
}

/// What every connection is opened with.
struct Connect {
    path: PathBuf,
    synchronous: &'static str,
    busy: Duration,
    cache_kib: u64,
    statements: usize,
}

impl Connect {
    /// A connection with the run's settings.
    fn open(&self) -> Result<Connection, DbError> {
        let what = || format!("open {}", self.path.display());
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let c = Connection::open_with_flags(&self.path, flags).map_err(err(what()))?;
        c.busy_timeout(self.busy).map_err(err(what()))?;
        c.pragma_update(None, "synchronous", self.synchronous)
            .map_err(err(what()))?;
        c.pragma_update(None, "cache_size", -(self.cache_kib as i64))
            .map_err(err(what()))?;
        c.set_prepared_statement_cache_capacity(self.statements);
        Ok(c)
    }
}

/// A SQLite database for the workloads.
pub(crate) struct SqliteDatabase {
    home: Home,
    connect: Connect,
    flush_log_at_trx_commit: u8,
    buffer_pool_size: u64,
    /// For creating tables and checkpoints.
    admin: Mutex<Connection>,
    trees: Trees<Arc<Sql>>,
}

/// An error of rusqlite while doing `what`; busy and locked are retryable.
fn err(what: impl Into<String>) -> impl FnOnce(rusqlite::Error) -> DbError {
    let what = what.into();
    move |e| {
        let retry = matches!(
            e.sqlite_error_code(),
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
        );
        DbError::Other {
            engine: NAME,
            what,
            retry,
            source: Box::new(e),
        }
    }
}

impl SqliteDatabase {
    /// Open or create `dir/sbtest.sqlite`. Each of the `threads` sessions'
    /// connections gets an equal share of `buffer_pool_size` as its page
    /// cache (SQLite's cache is per connection).
    pub(crate) fn open(
        dir: &Path,
        o: &keel::Options,
        params: &OltpParams,
    ) -> Result<SqliteDatabase, DbError> {
        let connect = Connect {
            path: dir.join(Engine::Sqlite.marker()),
            synchronous: if sync_each_commit(o) {
                "FULL"
            } else {
                "NORMAL"
            },
            busy: Duration::from_secs_f64(o.lock_wait_timeout),
            cache_kib: (o.buffer_pool_size / 1024 / params.threads.max(1) as u64)
                .max(MIN_CACHE_KIB),
            statements: 6 * trees_of(params) + 8,
        };
        let admin = connect.open()?;
        let what = || format!("WAL mode on {}", connect.path.display());
        let mode: String = admin
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(err(what()))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(DbError::fatal(
                NAME,
                what(),
                format!("journal_mode is {mode}"),
            ));
        }
        Ok(SqliteDatabase {
            home: Home::new(Engine::Sqlite, dir),
            connect,
            flush_log_at_trx_commit: o.flush_log_at_trx_commit,
            buffer_pool_size: o.buffer_pool_size,
            admin: Mutex::new(admin),
            trees: Trees::new(),
        })
    }

    fn admin(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.admin.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Database for SqliteDatabase {
    fn home(&self) -> &Home {
        &self.home
    }

    fn tree(&self, name: &str, create: bool) -> Result<Option<TreeId>, DbError> {
        self.trees.get_or_open(name, || {
            let c = self.admin();
            let what = || format!("table {name}");
            if create {
                let sql = format!(
                    "CREATE TABLE IF NOT EXISTS \"{}\" (k BLOB PRIMARY KEY, v BLOB NOT NULL) \
                     WITHOUT ROWID",
                    name.replace('"', "\"\"")
                );
                c.execute_batch(&sql).map_err(err(what()))?;
            } else {
                let n: i64 = c
                    .query_row(
                        "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?1",
                        [name],
                        |r| r.get(0),
                    )
                    .map_err(err(what()))?;
                if n == 0 {
                    return Ok(None);
                }
            }
            Ok(Some(Arc::new(Sql::new(name))))
        })
    }

    fn session(&self) -> Result<Box<dyn Session + '_>, DbError> {
        Ok(Box::new(SqliteSession {
            db: self,
            conn: self.connect.open()?,
            cache: Vec::new(),
        }))
    }

    fn settings(&self) -> serde_json::Map<String, serde_json::Value> {
        settings_map(serde_json::json!({
            "sqlite_version": rusqlite::version(),
            "buffer_pool_size": self.buffer_pool_size,
            "cache_size_kib_per_connection": self.connect.cache_kib,
            "flush_log_at_trx_commit": self.flush_log_at_trx_commit,
            "journal_mode": "WAL",
            "synchronous": self.connect.synchronous,
            "busy_timeout_ms": self.connect.busy.as_millis() as u64,
            "table": "WITHOUT ROWID (k BLOB PRIMARY KEY, v BLOB)",
        }))
    }

    fn flush(&self) -> Result<(), DbError> {
        self.admin()
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(err(format!("checkpoint {}", self.connect.path.display())))
    }

    fn close(self: Box<Self>) -> Result<(), DbError> {
        let path = self.connect.path.display().to_string();
        let admin = self.admin.into_inner().unwrap_or_else(|p| p.into_inner());
        admin
            .close()
            .map_err(|(_, e)| err(format!("close {path}"))(e))
    }
}

struct SqliteSession<'d> {
    db: &'d SqliteDatabase,
    conn: Connection,
    cache: Vec<(Arc<str>, Arc<Sql>)>,
}

impl Session for SqliteSession<'_> {
    fn begin(&mut self, write: bool) -> Result<Box<dyn Transaction + '_>, DbError> {
        self.db.trees.refresh(&mut self.cache);
        let sql = if write { "BEGIN IMMEDIATE" } else { "BEGIN" };
        self.conn.execute_batch(sql).map_err(err(sql))?;
        Ok(Box::new(SqliteTxn {
            conn: &self.conn,
            trees: &self.cache,
            open: true,
        }))
    }
}

struct SqliteTxn<'s> {
    conn: &'s Connection,
    trees: &'s [(Arc<str>, Arc<Sql>)],
    open: bool,
}

impl<'s> SqliteTxn<'s> {
    fn sql(&self, tree: TreeId) -> Result<(&'s str, &'s Sql), DbError> {
        let (name, sql) = handle(self.trees, NAME, tree)?;
        Ok((name, sql))
    }

    /// Run the statement `pick` chooses, `what` (`put`, `delete`) naming it.
    fn exec(
        &self,
        tree: TreeId,
        what: &str,
        pick: fn(&Sql) -> &str,
        params: impl rusqlite::Params,
    ) -> Result<(), DbError> {
        let (name, sql) = self.sql(tree)?;
        self.conn
            .prepare_cached(pick(sql))
            .and_then(|mut s| s.execute(params))
            .map_err(err(format!("{what} in {name}")))?;
        Ok(())
    }
}

impl Transaction for SqliteTxn<'_> {
    fn get(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        let (name, sql) = self.sql(tree)?;
        let mut s = self
            .conn
            .prepare_cached(&sql.get)
            .map_err(err(format!("get from {name}")))?;
        let mut rows = s.query([key]).map_err(err(format!("get from {name}")))?;
        match rows.next().map_err(err(format!("get from {name}")))? {
            Some(r) => Ok(Some(r.get(0).map_err(err(format!("get from {name}")))?)),
            None => Ok(None),
        }
    }

    /// The writer holds the whole database (`BEGIN IMMEDIATE`).
    fn get_for_update(&mut self, tree: TreeId, key: &[u8]) -> Result<Option<Vec<u8>>, DbError> {
        self.get(tree, key)
    }

    fn put(&mut self, tree: TreeId, key: &[u8], value: &[u8]) -> Result<(), DbError> {
        self.exec(tree, "put", |s| &s.put, (key, value))
    }

    fn delete(&mut self, tree: TreeId, key: &[u8]) -> Result<(), DbError> {
        self.exec(tree, "delete", |s| &s.delete, [key])
    }

    fn range(
        &mut self,
        tree: TreeId,
        span: Span<'_>,
        visit: &mut Visit<'_>,
    ) -> Result<usize, DbError> {
        let Span { from, to, limit } = span;
        let (name, sql) = self.sql(tree)?;
        let e = || err(format!("range of {name}"));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut s = match to {
            Some(_) => self.conn.prepare_cached(&sql.range),
            None => self.conn.prepare_cached(&sql.range_open),
        }
        .map_err(e())?;
        let mut rows = match to {
            Some(to) => s.query(rusqlite::params![from, to, limit]),
            None => s.query(rusqlite::params![from, limit]),
        }
        .map_err(e())?;
        let mut n = 0;
        while let Some(r) = rows.next().map_err(e())? {
            let k = r.get_ref(0).and_then(|v| Ok(v.as_blob()?)).map_err(e())?;
            let v = r.get_ref(1).and_then(|v| Ok(v.as_blob()?)).map_err(e())?;
            visit(k, v);
            n += 1;
        }
        Ok(n)
    }

    fn last_key(&mut self, tree: TreeId) -> Result<Option<Vec<u8>>, DbError> {
        let (name, sql) = self.sql(tree)?;
        let e = || err(format!("last key of {name}"));
        let mut s = self.conn.prepare_cached(&sql.last).map_err(e())?;
        let mut rows = s.query([]).map_err(e())?;
        match rows.next().map_err(e())? {
            Some(r) => Ok(Some(r.get(0).map_err(e())?)),
            None => Ok(None),
        }
    }

    fn commit(mut self: Box<Self>) -> Result<(), DbError> {
        self.conn.execute_batch("COMMIT").map_err(err("COMMIT"))?;
        self.open = false;
        Ok(())
    }
}

impl Drop for SqliteTxn<'_> {
    fn drop(&mut self) {
        if self.open {
            // A failed rollback leaves nothing to do: the connection's next
            // BEGIN fails and names the problem.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}
