//! Page cleaners and the flushing policy they follow.
//!
//! Every tick a cleaner takes a [`Snapshot`] of the engine's state, asks its
//! [`FlushPolicy`] for [`FlushTargets`] (a pure function of the snapshot, so
//! policies are unit-tested and simulated without threads or disks), and
//! carries the targets out through the buffer pool's batch writer.

pub mod cleaner;
pub mod doublewrite;
pub mod pacer;
pub mod policy;

pub use cleaner::Cleaners;
pub use policy::classic::{Classic, ClassicConfig};
pub use policy::{
    Decision, FlushMode, FlushPolicy, FlushTargets, InstanceSnapshot, InstanceTarget, Snapshot,
};
