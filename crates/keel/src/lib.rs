//! Keel: an embedded, transactional, page-based storage engine whose page
//! flushing never stops the world.
//!
//! The public face fits on one screen:
//!
//! ```no_run
//! use keel::{Db, Options};
//! # fn main() -> keel::Result<()> {
//! let db = Db::open("/tmp/keel-doc", Options::default())?;
//! let t = db.create_table("accounts")?;
//! t.put(b"alice", b"100")?;
//! assert_eq!(t.get(b"alice")?.as_deref(), Some(&b"100"[..]));
//! let mut tx = db.begin(); // READ COMMITTED, row locks, see `Txn`
//! tx.put(&t, b"bob", b"50")?;
//! tx.commit()?;
//! for row in t.range(..)? {
//!     let (key, value) = row?;
//!     println!("{key:?} = {value:?}");
//! }
//! db.close()?;
//! # Ok(()) }
//! ```
//!
//! Options are set from Rust with [`Options::builder`], one typed method
//! per option ([`ByteSize`] for sizes, `Duration` for times, an enum for a
//! choice), or as text with [`Options::set`] and
//! [`Options::from_toml_file`], whose errors name the option, the value
//! and, in a file, the line.
//!
//! # Loading data
//!
//! [`Table::bulk_load`] fills an empty table from rows in strictly
//! ascending key order, building its B+tree bottom-up: each page is filled
//! in memory to `fill_factor` percent ([`Options::fill_factor`], InnoDB's
//! `innodb_fill_factor`) and written once. A secondary index is another
//! table, loaded the same way from its entries, sorted first:
//!
//! ```
//! use keel::{Db, Error, Options};
//! # fn main() -> keel::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! # let mut opts = Options::default();
//! # opts.set("buffer_pool_size", "16MiB")?;
//! # opts.set("log_file_size", "4MiB")?;
//! let db = Db::open(dir.path(), opts)?;
//! // Users by id (big-endian, so in key order already) with their city.
//! let users: Vec<(Vec<u8>, Vec<u8>)> = (1..=1000u32)
//!     .map(|id| (id.to_be_bytes().to_vec(), format!("city-{}", id % 7).into_bytes()))
//!     .collect();
//! // The index on the city: (city, 0, id) -> empty, in its own key order.
//! let mut by_city: Vec<(Vec<u8>, Vec<u8>)> = users
//!     .iter()
//!     .map(|(id, city)| ([&city[..], &[0u8][..], &id[..]].concat(), Vec::new()))
//!     .collect();
//! by_city.sort();
//! let t = db.create_table("users")?;
//! assert_eq!(t.bulk_load(users)?, 1000); // all rows, durable on return
//! let index = db.create_table("users_by_city")?;
//! assert_eq!(index.bulk_load(by_city)?, 1000);
//! assert_eq!(t.get(&7u32.to_be_bytes())?.as_deref(), Some(&b"city-0"[..]));
//! // Only an empty table takes a bulk load.
//! let again = t.bulk_load([(b"x", b"y")]);
//! assert!(matches!(again, Err(Error::BulkLoad { .. })));
//! db.close()?;
//! # Ok(()) }
//! ```
//!
//! A bulk load is all or nothing: the rows become visible together when it
//! ends, and it is durable when it returns `Ok`, whatever
//! `flush_log_at_trx_commit` says; a crash or an error before that leaves
//! none of them (the pages it had written are freed). It fails with
//! [`Error::BulkLoad`] if the table is not empty, a key is not greater
//! than the one before, or the table was written to while it loaded (those
//! writes stay), and with the errors of any write otherwise (for example
//! [`Error::KeyTooLarge`]). Every page is redo-logged like any change.
//!
//! A database is open in one process at a time, and once in it:
//! [`Db::open`] locks the directory, and a second open fails at once with
//! [`Error::Locked`] (a crashed process's lock goes with it).
//!
//! Besides that: [`io`], the device layer `keel iobench` measures, and
//! [`format`](mod@format), a read-only view of the files for tools such as `keel
//! inspect` and `keel check` (which read a database another process has
//! open without its lock: [`format::tree`]).
//!
//! Underneath, from the bottom up (each layer knows only those below it):
//! `io` (devices), `page` (page format, LSNs, sealed headers), `space`
//! (striped data files), `buffer` (frames, page hash, LRU and flush lists,
//! latches), `redo` (log, group commit, commits in flight, recovery),
//! `flush` (write-back: batches, neighbors, doublewrite, page cleaners and
//! their policy), `engine` (wiring, log-space admission, commit tickets),
//! `mtr` (mini-transactions), `btree`, `txn` (write sets, row locks,
//! commit records), and the public face in `db`, with `status` (the status
//! report, [`Db::status`]).
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod backup;
mod btree;
mod buffer;
mod catalog;
mod config;
mod db;
mod engine;
mod error;
#[cfg(feature = "prometheus")]
mod exporter;
#[doc(hidden)]
pub mod failpoint;
mod flush;
pub mod format;
pub mod io;
mod lob;
mod metrics;
mod mtr;
mod page;
mod redo;
mod space;
mod status;
mod table;
mod txn;
pub(crate) mod undo;

pub use backup::BackupReport;
pub use btree::TreeStats;
pub use config::{
    ByteSize, DoublewriteMode, FlushLogAtTrxCommit, FlushNeighbors, FlushPolicyName, Isolation,
    Options, OptionsBuilder, PageCompression, CLASSIC_ONLY, RUNTIME_OPTIONS,
};
pub use db::Db;
pub use engine::DoublewriteStatus;
pub use error::{Error, Result};
#[cfg(feature = "prometheus")]
pub use exporter::MetricsServer;
pub use flush::neighbors::NeighborMode;
pub use flush::{Decision, FlushMode};
pub use metrics::{
    is_gauge, pause_buckets, pause_quantile, prometheus_name, Histogram, Metrics,
    COMMIT_BUCKETS_US, PAUSE_BUCKETS_US, PROMETHEUS_CONTENT_TYPE,
};
pub use page::Lsn;
pub use status::{
    BufferPoolStatus, ClassicFigures, CompressionStatus, FlushingStatus, LogMark, LogStatus,
    PagesByKind, PoolRates, PurgeRates, Semaphores, Status, StatusSource, SteadyStatus,
    TransactionsStatus, WaitEvent, MAX_LISTED_TXNS, WAIT_EVENTS,
};
pub use table::{Range, Table};
pub use txn::{
    Deadlock, DeadlockTxn, HistoryStatus, LockWait, RowLock, Scan, Txn, TxnState, TxnStatus,
    ViewInfo,
};
