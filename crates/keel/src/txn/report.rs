//! What the status report's TRANSACTIONS and LATEST DETECTED DEADLOCK
//! sections say of transactions: the ones under way (from the registry in
//! `active`, joined with the lock manager's waits) and the last deadlock
//! the lock manager refused. The module doc of `active` gives what is held
//! while they are read.

use std::collections::HashMap;
use std::fmt;
use std::time::{Instant, SystemTime};

use super::active::{Entry, Phase};
use super::lock::Waiting;
use super::TrxSys;

/// A row lock, as the status report names it: the table and the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowLock {
    /// The table's name.
    pub table: String,
    /// The row's key.
    pub key: Vec<u8>,
}

impl fmt::Display for RowLock {
    /// `row "alice" of table accounts` (a key that is not printable text
    /// in hex: `row 0x00ff of table t`; a long one cut at 64 bytes).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "row {} of table {}", key_text(&self.key), self.table)
    }
}

/// `key` as text if it is printable ASCII, else in hex; cut at 64 bytes.
pub(crate) fn key_text(key: &[u8]) -> String {
    const MAX: usize = 64;
    let shown = &key[..key.len().min(MAX)];
    let more = if key.len() > MAX {
        format!("... ({} bytes)", key.len())
    } else {
        String::new()
    };
    if shown.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("\"{}\"{more}", String::from_utf8_lossy(shown))
    } else {
        let hex: String = shown.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{hex}{more}")
    }
}

/// One transaction under way ([`Status::transactions`](crate::Status)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnStatus {
    /// Its id ([`Txn::id`](crate::Txn::id)).
    pub id: u64,
    /// How long it has been under way, in milliseconds.
    pub age_ms: u64,
    /// The name of the thread that started it, if it has one.
    pub thread: Option<String>,
    /// A one-row commit of `Table::put` or `Table::delete`, not a `Txn`.
    pub autocommit: bool,
    /// Rows it holds locked.
    pub rows_locked: u64,
    /// What it is doing.
    pub state: TxnState,
}

/// What a transaction under way is doing.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TxnState {
    /// Reading or writing (or idle between calls).
    Active,
    /// Waiting for a row lock another transaction holds.
    LockWait(LockWait),
    /// Logging and applying its commit, or waiting for the log.
    Committing,
}

/// A wait for a row lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockWait {
    /// The row waited for.
    pub row: RowLock,
    /// The transaction that holds it.
    pub holder: u64,
    /// How long it has waited, in milliseconds.
    pub waited_ms: u64,
}

/// The last deadlock detected since the database was opened (InnoDB's
/// LATEST DETECTED DEADLOCK).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deadlock {
    /// When it was detected.
    pub at: SystemTime,
    /// How long before the report it was detected, in milliseconds.
    pub age_ms: u64,
    /// The transactions of the cycle, in wait order: each waits for a row
    /// the next one holds, and the last for a row the first holds. The
    /// first is the one whose request closed the cycle.
    pub txns: Vec<DeadlockTxn>,
    /// The transaction rolled back: always the one whose request closed
    /// the cycle (InnoDB picks the smallest transaction instead).
    pub victim: u64,
}

/// One transaction of a deadlock, as it was when the deadlock was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadlockTxn {
    /// Its id.
    pub id: u64,
    /// The row it waited for (or, for the victim, asked for).
    pub waits_for: RowLock,
    /// The transaction that held that row.
    pub holder: u64,
    /// Rows it held locked.
    pub rows_locked: u64,
    /// How long it had been under way, in milliseconds.
    pub age_ms: u64,
    /// The name of the thread that started it, if it has one.
    pub thread: Option<String>,
}

fn ms(since: Instant, now: Instant) -> u64 {
    u64::try_from(now.saturating_duration_since(since).as_millis()).unwrap_or(u64::MAX)
}

fn thread_name(e: &Entry) -> Option<String> {
    e.thread.name().map(str::to_string)
}

impl TrxSys {
    /// The transactions under way, oldest first, each with the row lock it
    /// waits for if it waits (see `active`'s module doc for what this reads
    /// and holds).
    pub(crate) fn transactions(&self) -> Vec<TxnStatus> {
        let entries = self.active.list();
        let mut waits: HashMap<u64, Waiting> =
            self.locks.waits().into_iter().map(|w| (w.txn, w)).collect();
        let now = Instant::now();
        entries
            .iter()
            .map(|e| {
                let state = match (waits.remove(&e.id), e.phase()) {
                    (Some(w), _) => TxnState::LockWait(LockWait {
                        row: RowLock {
                            table: w.table.to_string(),
                            key: w.key.1,
                        },
                        holder: w.owner,
                        waited_ms: ms(w.since, now),
                    }),
                    (None, Phase::Committing) => TxnState::Committing,
                    (None, Phase::Active) => TxnState::Active,
                };
                TxnStatus {
                    id: e.id,
                    age_ms: ms(e.started, now),
                    thread: thread_name(e),
                    autocommit: e.autocommit,
                    rows_locked: e.rows_locked(),
                    state,
                }
            })
            .collect()
    }

    /// Remember the deadlock `cycle` (the lock manager's, requester first)
    /// as the latest one, with what the registry says of its transactions
    /// now. Called by the refused requester, holding no lock.
    pub(crate) fn record_deadlock(&self, cycle: Vec<Waiting>) {
        let now = Instant::now();
        let victim = cycle.first().map_or(0, |w| w.txn);
        let txns = cycle
            .into_iter()
            .map(|w| {
                let e = self.active.get(w.txn);
                DeadlockTxn {
                    id: w.txn,
                    waits_for: RowLock {
                        table: w.table.to_string(),
                        key: w.key.1,
                    },
                    holder: w.owner,
                    rows_locked: e.as_ref().map_or(0, |e| e.rows_locked()),
                    age_ms: e.as_ref().map_or(0, |e| ms(e.started, now)),
                    thread: e.as_deref().and_then(thread_name),
                }
            })
            .collect();
        let d = Deadlock {
            at: SystemTime::now(),
            age_ms: 0,
            txns,
            victim,
        };
        *self.latest_deadlock.lock() = Some((now, d));
    }

    /// The latest deadlock, its age counted up to now.
    pub(crate) fn latest_deadlock(&self) -> Option<Deadlock> {
        let (at, d) = self.latest_deadlock.lock().clone()?;
        Some(Deadlock {
            age_ms: ms(at, Instant::now()),
            ..d
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_show_as_text_or_hex_and_long_ones_are_cut() {
        let row = |key: &[u8]| {
            RowLock {
                table: "t".into(),
                key: key.to_vec(),
            }
            .to_string()
        };
        assert_eq!(row(b"alice 1"), "row \"alice 1\" of table t");
        assert_eq!(row(&[0, 0xff, 7]), "row 0x00ff07 of table t");
        let long = row(&[b'a'; 100]);
        assert!(long.ends_with("aaa\"... (100 bytes) of table t"), "{long}");
    }
}
