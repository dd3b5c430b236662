#![allow(dead_code, clippy::unwrap_used)]
//! A bank-transfer workload shared by the crash and fault tests.

use std::collections::HashSet;

use keel::{Db, Error, Isolation, Options};
use rand::rngs::SmallRng;
use rand::Rng;

pub const ACCOUNTS: u64 = 120;
pub const START: u64 = 1000;

pub fn opts() -> Options {
    Options {
        page_size: 16384,
        buffer_pool_size: 48 * 16384,
        data_files: 2,
        lru_scan_depth: 8,
        log_file_size: 1 << 20,
        log_files_in_group: 2,
        lock_wait_timeout: 1.0,
        doublewrite_pages: 16,
        ..Default::default()
    }
}

/// A bank: `accounts` accounts starting at [`START`], alternating between
/// tables `bank_a` and `bank_b`, each row a little-endian balance followed
/// by `pad` filler bytes (so the accounts can span many pages); every
/// transfer also inserts a row into `bank_log`.
#[derive(Clone, Copy, Debug)]
pub struct Bank {
    pub accounts: u64,
    pub pad: usize,
}

/// The bank of the free functions below: 120 unpadded accounts.
pub const SMALL: Bank = Bank {
    accounts: ACCOUNTS,
    pad: 0,
};

pub fn account_table(db: &Db, a: u64) -> keel::Table {
    db.table(if a.is_multiple_of(2) {
        "bank_a"
    } else {
        "bank_b"
    })
    .unwrap()
}

fn balance(v: &[u8]) -> u64 {
    u64::from_le_bytes(v[..8].try_into().unwrap())
}

impl Bank {
    fn row(&self, balance: u64) -> Vec<u8> {
        let mut v = balance.to_le_bytes().to_vec();
        v.resize(8 + self.pad, 0x5a);
        v
    }

    /// Create the tables and the accounts, committed (not flushed) 128 to
    /// a transaction (a bigger one may not fit in the smallest log).
    pub fn setup(&self, db: &Db) {
        db.create_table("bank_a").unwrap();
        db.create_table("bank_b").unwrap();
        db.create_table("bank_log").unwrap();
        for chunk in (0..self.accounts).collect::<Vec<_>>().chunks(128) {
            let mut tx = db.begin();
            for &a in chunk {
                tx.put(&account_table(db, a), &a.to_be_bytes(), &self.row(START))
                    .unwrap();
            }
            tx.commit().unwrap();
        }
    }

    /// One transfer; Ok(false) when it must be retried (deadlock, timeout).
    pub fn transfer(&self, db: &Db, rng: &mut SmallRng, id: u64) -> Result<bool, Error> {
        let n = self.accounts;
        let a = rng.gen_range(0..n);
        let b = (a + rng.gen_range(1..n)) % n;
        let mut tx = db.begin();
        let mut step = |tx: &mut keel::Txn| -> Result<(), Error> {
            let (ta, tb) = (account_table(db, a), account_table(db, b));
            let va = balance(&tx.get_for_update(&ta, &a.to_be_bytes())?.unwrap());
            let vb = balance(&tx.get_for_update(&tb, &b.to_be_bytes())?.unwrap());
            let amount = rng.gen_range(0..=va.min(50));
            tx.put(&ta, &a.to_be_bytes(), &self.row(va - amount))?;
            tx.put(&tb, &b.to_be_bytes(), &self.row(vb + amount))?;
            let mut rec = Vec::new();
            rec.extend_from_slice(&a.to_le_bytes());
            rec.extend_from_slice(&b.to_le_bytes());
            rec.extend_from_slice(&amount.to_le_bytes());
            tx.put(&db.table("bank_log").unwrap(), &id.to_be_bytes(), &rec)?;
            Ok(())
        };
        match step(&mut tx) {
            Ok(()) => tx.commit().map(|_| true),
            Err(Error::Deadlock { .. } | Error::LockWaitTimeout { .. } | Error::TxnAborted) => {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Sum every balance in one snapshot: a REPEATABLE-READ transaction
    /// scans `bank_a` and `bank_b` (its plain reads see the snapshot of its
    /// first read). `Ok(None)` when the accounts are all there and sum to
    /// the total, else what was seen and expected.
    pub fn snapshot_violation(&self, db: &Db) -> Result<Option<String>, Error> {
        let tx = db.begin_with(Isolation::RepeatableRead);
        let (mut total, mut accounts) = (0u64, 0u64);
        for t in ["bank_a", "bank_b"] {
            for r in tx.scan(&db.table(t)?, ..)? {
                total += balance(&r?.1);
                accounts += 1;
            }
        }
        drop(tx);
        let want = (self.accounts, self.accounts * START);
        Ok(((accounts, total) != want).then(|| {
            format!(
                "REPEATABLE-READ snapshot: {accounts} accounts with a total balance of {total}, \
                 expected {} with {}",
                want.0, want.1
            )
        }))
    }

    /// Each account table in one plain `Table::range` call (one snapshot
    /// per call): all of its accounts, none holding more than the bank's
    /// total. The accounts alternate between two tables, so two calls are
    /// two snapshots and their sum is no invariant: the total is
    /// [`snapshot_violation`](Self::snapshot_violation)'s to check.
    pub fn plain_range_violation(&self, db: &Db) -> Result<Option<String>, Error> {
        let all = self.accounts * START;
        for (t, parity) in [("bank_a", 0), ("bank_b", 1)] {
            let want = (self.accounts + 1 - parity) / 2;
            let (mut total, mut accounts) = (0u64, 0u64);
            for r in db.table(t)?.range(..)? {
                let b = balance(&r?.1);
                total += b;
                accounts += 1;
                if b > all {
                    return Ok(Some(format!(
                        "Table::range of {t}: a balance of {b}, above the bank's total {all}"
                    )));
                }
            }
            if accounts != want || total > all {
                return Ok(Some(format!(
                    "Table::range of {t}: {accounts} accounts with a total balance of {total}, \
                     expected {want} with at most {all}"
                )));
            }
        }
        Ok(None)
    }

    /// For a failed audit: the accounts whose balance differs from what
    /// the transfers in `bank_log` add up to (a transfer whose rows are
    /// there in part), each with the difference.
    fn disagreements(&self, db: &Db) -> String {
        let mut want = vec![START as i128; self.accounts as usize];
        let Ok(log) = db.table("bank_log") else {
            return String::new();
        };
        let Ok(rows) = log.range(..) else {
            return String::new();
        };
        for (_, v) in rows.flatten() {
            let word = |i: usize| u64::from_le_bytes(v[i * 8..i * 8 + 8].try_into().unwrap());
            let (a, b, amount) = (word(0), word(1), word(2) as i128);
            want[a as usize] -= amount;
            want[b as usize] += amount;
        }
        let mut off = Vec::new();
        for t in ["bank_a", "bank_b"] {
            let Ok(table) = db.table(t) else { continue };
            let Ok(rows) = table.range(..) else { continue };
            for (k, v) in rows.flatten() {
                let a = u64::from_be_bytes(k[..].try_into().unwrap());
                let d = balance(&v) as i128 - want[a as usize];
                if d != 0 {
                    off.push(format!("account {a} by {d:+}"));
                }
            }
        }
        format!(
            "; against the transfers in bank_log, off: {}",
            if off.is_empty() {
                "none".into()
            } else {
                off.join(", ")
            }
        )
    }

    /// The total balance is unchanged (read with `Table::range` and in a
    /// REPEATABLE-READ snapshot), every acknowledged transfer is in
    /// `bank_log`, and every tree checks out.
    pub fn audit(&self, db: &Db, acked: &[u64]) -> Result<(), String> {
        let mut total = 0;
        let mut accounts = 0;
        for t in ["bank_a", "bank_b"] {
            for r in db.table(t).map_err(|e| e.to_string())?.range(..).unwrap() {
                let (_, v) = r.map_err(|e| format!("scan of {t}: {e}"))?;
                total += balance(&v);
                accounts += 1;
            }
        }
        if (accounts, total) != (self.accounts, self.accounts * START) {
            return Err(format!(
                "{accounts} accounts with a total balance of {total}, expected {} with {}{}",
                self.accounts,
                self.accounts * START,
                self.disagreements(db)
            ));
        }
        if let Some(v) = self.snapshot_violation(db).map_err(|e| e.to_string())? {
            return Err(v);
        }
        let mut logged = HashSet::new();
        for r in db.table("bank_log").unwrap().range(..).unwrap() {
            let (k, _) = r.map_err(|e| format!("scan of bank_log: {e}"))?;
            logged.insert(u64::from_be_bytes(k[..].try_into().unwrap()));
        }
        let missing: Vec<u64> = acked
            .iter()
            .copied()
            .filter(|id| !logged.contains(id))
            .collect();
        if let Some(id) = missing.first() {
            return Err(format!(
                "{} of {} acknowledged transfers are missing, the first {id:#x}",
                missing.len(),
                acked.len()
            ));
        }
        db.check().map_err(|e| format!("check: {e}"))?;
        Ok(())
    }
}

pub fn setup(db: &Db) {
    SMALL.setup(db);
}

/// One transfer; Ok(false) when it must be retried (deadlock, timeout).
pub fn transfer(db: &Db, rng: &mut SmallRng, id: u64) -> Result<bool, Error> {
    SMALL.transfer(db, rng, id)
}

pub fn verify(db: &Db, acked: &[u64]) {
    if let Err(e) = SMALL.audit(db, acked) {
        panic!("{e}");
    }
}
