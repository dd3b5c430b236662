//! Page cleaners and the flushing policy they follow.
//!
//! Every tick a cleaner takes a [`policy::Snapshot`] of the engine's state,
//! asks its [`FlushPolicy`] for [`policy::FlushTargets`] (a pure function of the snapshot, so
//! policies are unit-tested and simulated without threads or disks), and
//! carries the targets out through the batch writer ([`batch`]), which
//! owns write-back: neighbors, doublewrite, the write-ahead check, the
//! in-place writes and their sync. The buffer pool only lends frames.

pub mod batch;
pub mod cleaner;
pub mod doublewrite;
pub mod neighbors;
pub mod pacer;
pub mod policy;
pub mod writeback;

pub use cleaner::{Cleaners, PolicyUpdate};
pub use policy::{Decision, FlushMode};
pub use writeback::{Wal, WriteBack, WriteConfig};
