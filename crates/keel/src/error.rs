//! The engine's error type. Every variant names what failed: the file, the
//! page or the option, so that an operator can act on the message alone.

use std::path::PathBuf;

use crate::page::PageId;

/// Result alias used throughout the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in Keel.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed on the named file.
    #[error("{op} failed on {}: {os_error}", path.display())]
    Io {
        /// The file the call was made on.
        path: PathBuf,
        /// What was attempted ("read", "write", "sync", "open", ...).
        op: &'static str,
        /// The OS error. The message above already says it, so it is not
        /// also this error's `source()`: a printer of the whole chain
        /// (anyhow's `{:#}`) would say it twice.
        os_error: std::io::Error,
    },
    /// A page failed its checksum or identity check after a read.
    #[error("corrupt page {page} in {}: {reason}", path.display())]
    CorruptPage {
        /// The page that was read.
        page: PageId,
        /// The data file that holds it.
        path: PathBuf,
        /// Which check failed.
        reason: String,
    },
    /// Recovery found a torn page (its checksum fails after a crash) that
    /// the doublewrite lists without a copy: its last write was made under
    /// `doublewrite = detect_only`. The database is not opened; nothing
    /// was changed but torn pages that had copies, which were repaired.
    #[error("torn page {page} in {}: {reason}", path.display())]
    TornPage {
        /// The page (the first, if several are torn).
        page: PageId,
        /// The data file that holds it.
        path: PathBuf,
        /// What the doublewrite knows of it, and what to do.
        reason: String,
    },
    /// A data file cannot be opened as part of this database (foreign,
    /// mismatched or truncated). Nothing was written to it.
    #[error("cannot use data file {}: {reason}", path.display())]
    BadFile {
        /// The offending file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An option is unknown or has an invalid value.
    #[error("option `{key}`: {reason}")]
    Config {
        /// The option's name.
        key: String,
        /// Why it was rejected.
        reason: String,
    },
    /// Options written in TOML ([`Options::from_toml_file`],
    /// [`Options::from_toml_str`]) are not valid TOML, or a line sets an
    /// unknown option or gives one a value it does not take. No option was
    /// applied.
    ///
    /// [`Options::from_toml_file`]: crate::Options::from_toml_file
    /// [`Options::from_toml_str`]: crate::Options::from_toml_str
    #[error("{}{reason}", toml_place(path.as_deref(), *line, key.as_deref()))]
    ConfigToml {
        /// The file, when the text was read from one.
        path: Option<PathBuf>,
        /// The line the error is on, counted from 1.
        line: usize,
        /// The option the line sets; `None` when the line is not valid TOML.
        key: Option<String>,
        /// What is wrong, with the value (or the line) as written.
        reason: String,
    },
    /// [`Db::set_option`](crate::Db::set_option) was asked to change an
    /// option that only takes effect when the database is opened. Nothing
    /// changed.
    #[error(
        "option `{key}` cannot change while the database is open: give it to Db::open \
         (`--set` on the command line) and it takes effect at the next open. Options that \
         need a restart: {}. Options that change at run time: {}",
        crate::config::Options::restart_only().join(", "),
        crate::config::RUNTIME_OPTIONS.join(", ")
    )]
    RestartRequired {
        /// The option's name.
        key: String,
    },
    /// A key is longer than the tree accepts.
    #[error("key of {len} bytes is longer than the maximum of {max} bytes")]
    KeyTooLarge {
        /// Length given.
        len: usize,
        /// Largest accepted length for this page size.
        max: usize,
    },
    /// A value is longer than the engine takes (1 GiB).
    #[error(
        "value of {len} bytes is longer than the maximum of {max} bytes (values past a \
         quarter page are stored in overflow pages, up to this limit)"
    )]
    ValueTooLarge {
        /// Length given.
        len: usize,
        /// Largest accepted length: 1 GiB on every page size.
        max: usize,
    },
    /// No table of that name exists.
    #[error("no table named `{0}`")]
    TableNotFound(String),
    /// A table of that name already exists.
    #[error("a table named `{0}` already exists")]
    TableExists(String),

    /// A bulk load was refused or failed (`Table::bulk_load`): the table
    /// is not empty, its keys are not strictly ascending, or rows were
    /// written into the table while it loaded. Nothing was loaded.
    #[error("bulk load into table `{table}`: {reason}")]
    BulkLoad {
        /// The table loaded into.
        table: String,
        /// Why.
        reason: String,
    },
    /// A table name is empty or too long.
    #[error("invalid table name `{name}`: {reason}")]
    InvalidTableName {
        /// The rejected name.
        name: String,
        /// Why.
        reason: String,
    },
    /// No buffer-pool frame could be freed: every frame is fixed by a thread.
    #[error("buffer pool exhausted: {0}")]
    BufferPoolExhausted(String),
    /// The tablespace has no more page numbers.
    #[error("tablespace is full: {0}")]
    SpaceFull(String),
    /// An earlier write or sync failed, a logged commit could not be
    /// applied, or the page cleaners kept panicking, so the engine refuses
    /// further writes rather than pretend that data is durable; the reason
    /// says which. A restart recovers from the redo log.
    #[error("engine refuses writes after an earlier failure: {0}")]
    Poisoned(String),
    /// A page that was never written (all zeros, or past the end of its
    /// file) was read where a written page was expected.
    #[error("page {page} in {} was never written ({reason})", path.display())]
    UnwrittenPage {
        /// The page.
        page: PageId,
        /// The data file.
        path: PathBuf,
        /// All zeros or past the end of the file.
        reason: String,
    },
    /// The redo log cannot take more writes: the checkpoint did not advance
    /// in time. Writers get this instead of an endless stall.
    #[error("redo log overloaded: {0}")]
    LogOverloaded(String),
    /// A structure on disk violates an invariant the engine relies on.
    #[error("corruption: {0}")]
    Corruption(String),
    /// A row lock stayed held by another transaction for the whole
    /// `lock_wait_timeout`. Only the statement failed: the transaction keeps
    /// its earlier writes and locks and may retry, commit or roll back.
    #[error("lock wait timeout on a row of table `{table}` after {waited:?}")]
    LockWaitTimeout {
        /// The table whose row was wanted.
        table: String,
        /// How long the transaction waited.
        waited: std::time::Duration,
    },
    /// Waiting for a row lock would have closed a cycle of waiting
    /// transactions; this transaction was chosen as the victim and rolled
    /// back (its writes discarded, its locks released).
    #[error("deadlock on a row of table `{table}`: transaction rolled back")]
    Deadlock {
        /// The table whose row was wanted.
        table: String,
    },
    /// The transaction was rolled back after a deadlock; start a new one.
    #[error("transaction was rolled back after a deadlock; start a new one")]
    TxnAborted,
    /// A transaction's write set is too large for the redo log: its commit
    /// record must fit in the part of the log set aside for commits in
    /// flight. Refused before anything was logged; the transaction is
    /// unchanged and may be split.
    #[error(
        "transaction too large: its write set takes {bytes} bytes of redo, but with a redo log of \
         {log_capacity} bytes a transaction may log at most {limit} (about 1/20 of the log); \
         commit in smaller transactions, or raise log_file_size or log_files_in_group"
    )]
    TransactionTooLarge {
        /// Bytes of the transaction's commit record.
        bytes: u64,
        /// The largest record admitted with this log.
        limit: u64,
        /// Bytes of the redo log.
        log_capacity: u64,
    },
    /// The page cleaners cannot write pages back (a device error), so the
    /// log cannot make room: a writer waiting for log space gives up with
    /// their error instead of waiting out its timeout.
    #[error("redo log full and page write-back failing: {0}")]
    FlushFailed(String),
    /// Page writes to a data file fail (EIO, or ENOSPC where a
    /// copy-on-write file system refuses overwrites on a full disk). Nothing
    /// is lost and nothing is refused for good: the pages stay dirty in
    /// memory, a page whose in-place write may be torn keeps its doublewrite
    /// copy, and the writes are retried with a backoff until the device
    /// takes them; then writes resume by themselves. The call that got this
    /// changed nothing and may be retried.
    #[error(
        "page writes to {} are failing: {reason}; the pages stay in memory and are \
         retried, and writes resume once the device accepts them",
        path.display()
    )]
    WriteBackFailing {
        /// The data file whose write failed (the doublewrite directory when
        /// no area could be had).
        path: PathBuf,
        /// What failed, and what is held for the retry.
        reason: String,
    },
    /// `Db::set_device` on a database whose data files no device model
    /// stands in front of: opened with `device = unlimited` (its files pass
    /// through unwrapped, so that an unthrottled database pays nothing) or
    /// on a caller-supplied file system (`Db::open_with_fs`). Open with a
    /// throttled device (e.g. `device = nvme`) to change it later.
    #[error("option `device` cannot change to `{spec}` while the database runs: {reason}")]
    DeviceNotModelled {
        /// The spec asked for.
        spec: String,
        /// Why there is no model to change.
        reason: String,
    },
    /// The database directory is open already: in another process, or
    /// through another `Db::open` in this one (its lock file `keel.lock` is
    /// locked; see `keel::io::lock`). Nothing was opened or written. A lock
    /// left by a process that died does not cause this.
    #[error(
        "database directory {} is in use: {} has it open, and Keel allows one open \
         database per directory (one process, one Db::open); close it there first",
        dir.display(),
        crate::io::lock::holder(*pid)
    )]
    Locked {
        /// The database directory.
        dir: PathBuf,
        /// The process holding it, where the lock file names it.
        pid: Option<u32>,
    },
    /// The table was dropped (`Db::drop_table`): every call through a
    /// handle of it fails.
    #[error("table `{0}` was dropped")]
    TableDropped(String),
    /// The table was truncated after this transaction began (or this scan
    /// started), or is being truncated: its snapshot of the table is gone.
    /// Retry the transaction (InnoDB: "Table definition has changed").
    #[error(
        "table `{0}` was truncated after this transaction or scan began (or is being \
         truncated): retry it"
    )]
    TableChanged(String),
    /// A hot backup could not be made (`Db::backup`); I/O and page errors
    /// have their own variants.
    #[error("backup: {0}")]
    Backup(String),
    /// The database is closing (or closed): no new writes are taken.
    #[error("the database is closing: no new writes are accepted")]
    Closed,
    /// The database was opened with `read_only` and the call would write,
    /// or a read-only open found a database it cannot open without
    /// writing (redo to apply after a crash).
    #[error("{0}")]
    ReadOnly(String),
    /// A thread would wait for a row lock held by a transaction it is
    /// itself using, and so would wait for itself.
    #[error(
        "a row of table `{table}` is locked by transaction {owner}, which this thread is using: \
         the call would wait for itself; commit or roll back that transaction first, or make \
         the change through it"
    )]
    SelfDeadlock {
        /// The table whose row was wanted.
        table: String,
        /// The transaction holding the lock.
        owner: u64,
    },
    /// The metrics endpoint could not listen on the address given
    /// (`Db::serve_metrics`).
    #[error("cannot serve metrics on `{addr}`: {reason}")]
    MetricsListen {
        /// The address, as given.
        addr: String,
        /// Why (the OS's words).
        reason: String,
    },
}

impl Error {
    /// Whether this is an I/O error of a full disk (ENOSPC, EDQUOT): one
    /// that freeing space elsewhere can mend.
    pub fn is_full_disk(&self) -> bool {
        match self {
            Error::Io { os_error, .. } => matches!(
                os_error.raw_os_error(),
                Some(libc::ENOSPC) | Some(libc::EDQUOT)
            ),
            _ => false,
        }
    }

    /// Whether this is an I/O error of a device that is gone (unplugged,
    /// powered off: [`crate::io::is_device_gone`]): no retry can outlive it.
    pub fn is_device_gone(&self) -> bool {
        match self {
            Error::Io { os_error, .. } => crate::io::is_device_gone(os_error),
            _ => false,
        }
    }

    /// Whether the condition behind this error can pass by itself: a full
    /// disk, or page writes held for retry. A writer that waited for the
    /// page cleaners and got such an error may try again.
    pub(crate) fn may_pass(&self) -> bool {
        self.is_full_disk() || matches!(self, Error::WriteBackFailing { .. })
    }

    /// Wrap an OS error with the file and operation it came from.
    pub fn io(path: impl Into<PathBuf>, op: &'static str, os_error: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            op,
            os_error,
        }
    }

    /// Shorthand for an option error.
    pub fn config(key: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Config {
            key: key.into(),
            reason: reason.into(),
        }
    }
}

/// Where a [`Error::ConfigToml`] is: `FILE, line N: option `KEY`: `.
fn toml_place(path: Option<&std::path::Path>, line: usize, key: Option<&str>) -> String {
    let file = path
        .map(|p| format!("{}, ", p.display()))
        .unwrap_or_default();
    let option = key.map(|k| format!("option `{k}`: ")).unwrap_or_default();
    format!("{file}line {line}: {option}")
}

/// A one-way "refuse writes" switch with the reason, for a layer that can no
/// longer vouch for durability (a failed sync, an unapplied commit, bytes
/// the redo log accepted and then lost). Cheap to check on hot paths.
#[derive(Default)]
pub(crate) struct Poison {
    set: std::sync::atomic::AtomicBool,
    reason: parking_lot::Mutex<String>,
}

impl Poison {
    /// Refuse writes from now on; the first reason is kept.
    pub(crate) fn set(&self, reason: impl Into<String>) {
        let mut r = self.reason.lock();
        if !self.set.load(std::sync::atomic::Ordering::Acquire) {
            *r = reason.into();
            self.set.store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// Whether writes are refused.
    pub(crate) fn is_set(&self) -> bool {
        self.set.load(std::sync::atomic::Ordering::Acquire)
    }

    /// `Error::Poisoned` with the reason, if set.
    pub(crate) fn check(&self) -> Result<()> {
        if self.is_set() {
            return Err(Error::Poisoned(self.reason.lock().clone()));
        }
        Ok(())
    }
}
