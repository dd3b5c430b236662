//! The transactions under way, for the status report (InnoDB's list of
//! transactions in `trx_sys`): each `Txn` and each one-row commit behind
//! `Table::put`/`Table::delete` is entered at its start and removed when
//! it ends, with when it started, the thread that started it, how many
//! rows it has locked and whether it is committing.
//!
//! # Protocol
//! The registry is [`SHARDS`] mutexes over maps keyed by transaction id
//! (id modulo `SHARDS`), so that transactions started on different
//! threads rarely meet on one. Each mutex is a leaf: it is taken to insert
//! an entry at the start, to remove it at the end, and by the report to
//! copy that shard's entries, and nothing is taken while it is held. A
//! transaction updates its own entry (rows locked, state) through relaxed
//! atomics in an `Arc` it shares with the registry, taking no mutex.
//!
//! The report copies the shards one after another, then the lock
//! manager's waits (its `graph` mutex, alone). It is not one atomic
//! picture: a transaction that starts or ends meanwhile may be missing or
//! listed once more, and a wait is matched with the entry of its
//! transaction only if both were seen. Nothing waits for the report but
//! for the few moments it holds one of these leaf mutexes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use super::lock::SHARDS;

/// What a registered transaction is doing (besides waiting for a row
/// lock, which the lock manager knows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Reading and writing its write set.
    Active = 0,
    /// Logging and applying its commit record, or waiting for the log.
    Committing = 1,
}

/// One transaction under way.
#[derive(Debug)]
pub(crate) struct Entry {
    pub id: u64,
    pub started: Instant,
    /// The thread that started it (a cheap handle; its name is read by the
    /// report).
    pub thread: std::thread::Thread,
    /// A one-row commit of `Table::put`/`Table::delete`.
    pub autocommit: bool,
    rows_locked: AtomicU64,
    phase: AtomicU8,
}

impl Entry {
    /// Rows locked so far.
    pub fn rows_locked(&self) -> u64 {
        self.rows_locked.load(Ordering::Relaxed)
    }

    /// Set the number of rows locked.
    pub fn set_rows_locked(&self, n: usize) {
        self.rows_locked.store(n as u64, Ordering::Relaxed);
    }

    /// What it is doing.
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            0 => Phase::Active,
            _ => Phase::Committing,
        }
    }

    /// Say what it is doing.
    pub fn set_phase(&self, p: Phase) {
        self.phase.store(p as u8, Ordering::Relaxed);
    }
}

/// One shard of the registry: transaction id → entry.
type Shard = Mutex<HashMap<u64, Arc<Entry>>>;

/// The registry (module doc).
pub(crate) struct Active {
    shards: Box<[Shard]>,
}

impl Active {
    pub(crate) fn new() -> Active {
        Active {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }

    fn shard(&self, id: u64) -> &Shard {
        &self.shards[id as usize & (SHARDS - 1)]
    }

    /// Enter transaction `id`, started now on this thread.
    pub(crate) fn register(&self, id: u64, autocommit: bool) -> Arc<Entry> {
        let e = Arc::new(Entry {
            id,
            started: Instant::now(),
            thread: std::thread::current(),
            autocommit,
            rows_locked: AtomicU64::new(0),
            phase: AtomicU8::new(Phase::Active as u8),
        });
        self.shard(id).lock().insert(id, Arc::clone(&e));
        e
    }

    /// Transaction `id` ended (a second call is a no-op).
    pub(crate) fn remove(&self, id: u64) {
        self.shard(id).lock().remove(&id);
    }

    /// Transaction `id`'s entry, if it is under way.
    pub(crate) fn get(&self, id: u64) -> Option<Arc<Entry>> {
        self.shard(id).lock().get(&id).cloned()
    }

    /// Every entry, oldest first (copied shard by shard: module doc).
    pub(crate) fn list(&self) -> Vec<Arc<Entry>> {
        let mut out: Vec<Arc<Entry>> = Vec::new();
        for s in self.shards.iter() {
            out.extend(s.lock().values().cloned());
        }
        out.sort_by_key(|e| (e.started, e.id));
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn entries_come_and_go_and_list_oldest_first() {
        let a = Active::new();
        let one = a.register(1, false);
        let two = a.register(2, true);
        // Ids in one shard and in others.
        let far = a.register(1 + SHARDS as u64, false);
        one.set_rows_locked(3);
        two.set_phase(Phase::Committing);
        let ids: Vec<u64> = a.list().iter().map(|e| e.id).collect();
        assert_eq!(ids, [1, 2, 1 + SHARDS as u64]);
        assert_eq!(a.get(1).unwrap().rows_locked(), 3);
        assert_eq!(a.get(2).unwrap().phase(), Phase::Committing);
        assert!(a.get(2).unwrap().autocommit);
        a.remove(1);
        a.remove(1);
        assert!(a.get(1).is_none());
        assert_eq!(a.list().len(), 2);
        drop(far);
        a.remove(2);
        a.remove(1 + SHARDS as u64);
        assert!(a.list().is_empty());
    }
}
