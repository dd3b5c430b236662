//! What the writers do between crashes, and what must hold after recovery.

use std::collections::{HashMap, HashSet};

use keel::{Db, Error, Isolation};
use rand::rngs::SmallRng;

use crate::common::bank::Bank;

/// A workload of small transactions, each acknowledged by id.
pub trait Workload: Send + Sync + 'static {
    /// Create the tables (and any starting rows) of a new database.
    fn setup(&self, db: &Db);
    /// One transaction named `id`: Ok(true) once committed, Ok(false) when
    /// it must be retried (deadlock, timeout), Err when the engine refuses.
    fn step(&self, db: &Db, rng: &mut SmallRng, id: u64) -> Result<bool, Error>;
    /// After recovery: every acknowledged transaction is there, whole, and
    /// the invariants hold.
    fn audit(&self, db: &Db, acked: &[u64]) -> Result<(), String>;
    /// While the writers run: reader `reader` reads in one snapshot (even
    /// readers in a REPEATABLE-READ transaction, odd ones with plain
    /// `Table::range` calls) and checks what must hold at every commit.
    /// `Ok(None)` if it holds, `Ok(Some(what was seen))` if not, Err when
    /// the engine refuses (the device is gone).
    fn read_check(&self, db: &Db, reader: u64) -> Result<Option<String>, Error>;
}

impl Workload for Bank {
    fn setup(&self, db: &Db) {
        Bank::setup(self, db);
        db.flush().unwrap();
    }
    fn step(&self, db: &Db, rng: &mut SmallRng, id: u64) -> Result<bool, Error> {
        self.transfer(db, rng, id)
    }
    fn audit(&self, db: &Db, acked: &[u64]) -> Result<(), String> {
        Bank::audit(self, db, acked)
    }
    fn read_check(&self, db: &Db, reader: u64) -> Result<Option<String>, Error> {
        if reader.is_multiple_of(2) {
            self.snapshot_violation(db)
        } else {
            self.plain_range_violation(db)
        }
    }
}

/// Accounts being opened on a new database: each transaction inserts
/// `rows` padded rows, so the pool overflows within milliseconds and the
/// first in-place writes grow the data files.
pub struct Opening {
    pub rows: u64,
    pub pad: usize,
}

impl Workload for Opening {
    fn setup(&self, db: &Db) {
        db.create_table("opened").unwrap();
    }

    fn step(&self, db: &Db, _rng: &mut SmallRng, id: u64) -> Result<bool, Error> {
        let t = db.table("opened")?;
        let mut tx = db.begin();
        for i in 0..self.rows {
            let mut v = id.to_le_bytes().to_vec();
            v.resize(8 + self.pad, 0xa5);
            tx.put(&t, &((id << 8) | i).to_be_bytes(), &v)?;
        }
        tx.commit().map(|_| true)
    }

    fn audit(&self, db: &Db, acked: &[u64]) -> Result<(), String> {
        let mut found: HashMap<u64, u64> = HashMap::new();
        for r in db.table("opened").unwrap().range(..).unwrap() {
            let (k, _) = r.map_err(|e| format!("scan of opened: {e}"))?;
            *found
                .entry(u64::from_be_bytes(k[..].try_into().unwrap()) >> 8)
                .or_default() += 1;
        }
        if let Some((id, n)) = found.iter().find(|(_, &n)| n != self.rows) {
            return Err(format!(
                "transaction {id:#x} has {n} of its {} rows",
                self.rows
            ));
        }
        if let Some(v) = self
            .read_check(db, 0)
            .map_err(|e| format!("snapshot read: {e}"))?
        {
            return Err(v);
        }
        let found: HashSet<u64> = found.into_keys().collect();
        if let Some(id) = acked.iter().find(|id| !found.contains(id)) {
            return Err(format!("acknowledged transaction {id:#x} is missing"));
        }
        db.check().map_err(|e| format!("check: {e}"))?;
        Ok(())
    }

    /// Every transaction's rows, all or none, in one snapshot: a
    /// REPEATABLE-READ transaction's scan (even readers) or one plain
    /// `Table::range` call (odd readers).
    fn read_check(&self, db: &Db, reader: u64) -> Result<Option<String>, Error> {
        let t = db.table("opened")?;
        let mut found: HashMap<u64, u64> = HashMap::new();
        let mut count = |k: &[u8]| {
            *found
                .entry(u64::from_be_bytes(k.try_into().unwrap()) >> 8)
                .or_default() += 1;
        };
        let how = if reader.is_multiple_of(2) {
            let tx = db.begin_with(Isolation::RepeatableRead);
            for r in tx.scan(&t, ..)? {
                count(&r?.0);
            }
            "REPEATABLE-READ snapshot"
        } else {
            for r in t.range(..)? {
                count(&r?.0);
            }
            "Table::range"
        };
        Ok(found.iter().find(|(_, &n)| n != self.rows).map(|(id, n)| {
            format!(
                "{how} of opened: transaction {id:#x} shows {n} of its {} rows",
                self.rows
            )
        }))
    }
}
