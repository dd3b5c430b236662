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
//! Besides that: [`io`], the device layer `keel iobench` measures, and
//! [`format`](mod@format), a read-only view of the files for tools such as `keel
//! inspect` and `keel check`.
//!
//! Underneath, from the bottom up (each layer knows only those below it):
//! `io` (devices), `page` (page format, LSNs, sealed headers), `space`
//! (striped data files), `buffer` (frames, page hash, LRU and flush lists,
//! latches), `redo` (log, group commit, commits in flight, recovery),
//! `flush` (write-back: batches, neighbors, doublewrite, page cleaners and
//! their policy), `engine` (wiring, log-space admission, commit tickets),
//! `mtr` (mini-transactions), `btree`, `txn` (write sets, row locks,
//! commit records), and the public face in `db`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod btree;
mod buffer;
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
mod metrics;
mod mtr;
mod page;
mod redo;
mod space;
mod txn;

pub use btree::TreeStats;
pub use config::{FlushPolicyName, Options, CLASSIC_ONLY, RUNTIME_OPTIONS};
pub use db::{Db, Range, Table};
pub use error::{Error, Result};
#[cfg(feature = "prometheus")]
pub use exporter::MetricsServer;
pub use flush::{Decision, FlushMode};
pub use metrics::{
    is_gauge, prometheus_name, Histogram, Metrics, COMMIT_BUCKETS_US, PAUSE_BUCKETS_US,
    PROMETHEUS_CONTENT_TYPE,
};
pub use page::Lsn;
pub use txn::{Scan, Txn};
