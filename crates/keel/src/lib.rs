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
//! Underneath: `io` (devices and data files), `page` (page format),
//! `buffer` (buffer pool: frames, LRU and flush lists), `mtr`
//! (mini-transactions), `flush` (page cleaners and their policy), `btree`,
//! `txn` (transactions: write sets, row locks, commit records).
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod btree;
pub mod buffer;
pub mod config;
mod db;
mod engine;
mod error;
pub mod flush;
pub mod format;
pub mod io;
pub mod metrics;
mod mtr;
pub mod page;
pub mod redo;
pub mod space;
mod txn;

pub use btree::TreeStats;
pub use config::{FlushPolicyName, Options};
pub use db::{Db, Range, Table};
pub use error::{Error, Result};
pub use flush::{Decision, FlushMode};
pub use metrics::Metrics;
pub use page::Lsn;
pub use txn::{Scan, Txn};
