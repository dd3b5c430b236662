//! The bank-transfer workload behind the crash loop (`keel crashtest`).
//!
//! Accounts are spread over two tables, `bank_a` (even account numbers) and
//! `bank_b` (odd ones); each row is `account (u64 BE) → balance (u64 LE)`.
//! A transfer locks both accounts in account order, moves an amount and, in
//! the same transaction, inserts `transfer id (u64 BE) → from, to, amount
//! (3 × u64 LE)` into `bank_log`. After any crash, therefore:
//!
//! - the balances sum to `accounts × INITIAL_BALANCE` (no half transfer);
//! - every acknowledged transfer id is in `bank_log` (no lost commit);
//! - every account's balance equals its initial balance plus what the
//!   `bank_log` rows say it received minus what they say it sent (the log
//!   row and the balance changes landed together, or not at all).
//!
//! While transfers run, readers check the snapshots
//! ([`Bank::check_snapshot_total`], [`Bank::check_plain_ranges`]): a
//! REPEATABLE-READ transaction that scans both tables sees one snapshot,
//! so its balances sum to the total whatever commits meanwhile.

use std::collections::HashMap;

use keel::{Db, Error, Isolation, Result, Table, TreeStats};
use rand::Rng;

/// Balance every account starts with.
pub const INITIAL_BALANCE: u64 = 1_000;
/// Largest amount a single transfer tries to move.
pub const MAX_AMOUNT: u64 = 100;
/// Table of the even-numbered accounts.
pub const TABLE_A: &str = "bank_a";
/// Table of the odd-numbered accounts.
pub const TABLE_B: &str = "bank_b";
/// Table of the transfers, keyed by transfer id.
pub const TABLE_LOG: &str = "bank_log";
/// Accounts written per transaction by [`setup`].
const SETUP_BATCH: u64 = 500;
/// Times a transfer is retried after a deadlock or lock wait timeout.
const MAX_RETRIES: usize = 100;
/// Violations kept in a [`VerifyReport`] (the rest are only counted).
const MAX_PROBLEMS: usize = 20;

/// Identifies one transfer; unique over the whole life of a database.
pub type TransferId = u64;

/// One committed transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// Its id (the key of its `bank_log` row).
    pub id: TransferId,
    /// Account debited.
    pub from: u64,
    /// Account credited.
    pub to: u64,
    /// Amount moved (0 when `from` was empty).
    pub amount: u64,
    /// Deadlocks and lock wait timeouts retried before the commit.
    pub retries: usize,
}

impl Transfer {
    fn encode(&self) -> [u8; 24] {
        let mut v = [0u8; 24];
        v[..8].copy_from_slice(&self.from.to_le_bytes());
        v[8..16].copy_from_slice(&self.to.to_le_bytes());
        v[16..].copy_from_slice(&self.amount.to_le_bytes());
        v
    }

    fn decode(key: &[u8], value: &[u8]) -> Option<Transfer> {
        let id = u64::from_be_bytes(key.try_into().ok()?);
        if value.len() != 24 {
            return None;
        }
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_le_bytes(value[i * 8..i * 8 + 8].try_into().ok()?))
        };
        Some(Transfer {
            id,
            from: word(0)?,
            to: word(1)?,
            amount: word(2)?,
            retries: 0,
        })
    }
}

/// Handles on the three tables of the workload.
#[derive(Clone)]
pub struct Bank {
    db: Db,
    a: Table,
    b: Table,
    log: Table,
    accounts: u64,
}

/// Create the three tables, give `accounts` accounts [`INITIAL_BALANCE`]
/// each, and flush (a sharp checkpoint), so that the starting state does
/// not depend on redo.
pub fn setup(db: &Db, accounts: u64) -> Result<Bank> {
    assert!(accounts >= 2, "the bank needs at least two accounts");
    let bank = Bank {
        db: db.clone(),
        a: db.table_or_create(TABLE_A)?,
        b: db.table_or_create(TABLE_B)?,
        log: db.table_or_create(TABLE_LOG)?,
        accounts,
    };
    let balance = INITIAL_BALANCE.to_le_bytes();
    let mut first = 0;
    while first < accounts {
        let end = (first + SETUP_BATCH).min(accounts);
        let mut tx = db.begin();
        for acct in first..end {
            tx.put(bank.table_of(acct), &acct.to_be_bytes(), &balance)?;
        }
        tx.commit()?;
        first = end;
    }
    db.flush()?;
    Ok(bank)
}

impl Bank {
    /// Handles on the tables of a database that [`setup`] prepared.
    pub fn open(db: &Db, accounts: u64) -> Result<Bank> {
        assert!(accounts >= 2, "the bank needs at least two accounts");
        Ok(Bank {
            db: db.clone(),
            a: db.table(TABLE_A)?,
            b: db.table(TABLE_B)?,
            log: db.table(TABLE_LOG)?,
            accounts,
        })
    }

    /// The number of accounts.
    pub fn accounts(&self) -> u64 {
        self.accounts
    }

    fn table_of(&self, acct: u64) -> &Table {
        if acct.is_multiple_of(2) {
            &self.a
        } else {
            &self.b
        }
    }

    /// Move a random amount between two random accounts (capped at what the
    /// debited account holds) and record it in `bank_log` under `id`, all
    /// in one transaction. Retries deadlocks and lock wait timeouts. When
    /// this returns `Ok`, the commit has returned `Ok`.
    pub fn transfer(&self, rng: &mut impl Rng, id: TransferId) -> Result<Transfer> {
        let from = rng.gen_range(0..self.accounts);
        let to = (from + rng.gen_range(1..self.accounts)) % self.accounts;
        let want = rng.gen_range(1..=MAX_AMOUNT);
        let mut retries = 0;
        loop {
            match self.try_transfer(id, from, to, want) {
                Ok(mut t) => {
                    t.retries = retries;
                    return Ok(t);
                }
                Err(Error::Deadlock { .. } | Error::LockWaitTimeout { .. } | Error::TxnAborted)
                    if retries < MAX_RETRIES =>
                {
                    retries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn try_transfer(&self, id: TransferId, from: u64, to: u64, want: u64) -> Result<Transfer> {
        let mut tx = self.db.begin();
        // One lock order for every transfer, so two transfers never deadlock.
        let (lo, hi) = (from.min(to), from.max(to));
        let mut balances = [0u64; 2];
        for (slot, acct) in [lo, hi].into_iter().enumerate() {
            let v = tx
                .get_for_update(self.table_of(acct), &acct.to_be_bytes())?
                .ok_or_else(|| Error::Corruption(format!("bank: account {acct} is missing")))?;
            balances[slot] = decode_balance(acct, &v)?;
        }
        let (from_bal, to_bal) = if from == lo {
            (balances[0], balances[1])
        } else {
            (balances[1], balances[0])
        };
        let amount = want.min(from_bal);
        let key = id.to_be_bytes();
        if tx.get(&self.log, &key)?.is_some() {
            return Err(Error::Corruption(format!(
                "bank: transfer id {id} is already in {TABLE_LOG}"
            )));
        }
        let t = Transfer {
            id,
            from,
            to,
            amount,
            retries: 0,
        };
        let to_new = to_bal.checked_add(amount).ok_or_else(|| {
            Error::Corruption(format!("bank: balance of account {to} would overflow"))
        })?;
        tx.put(
            self.table_of(from),
            &from.to_be_bytes(),
            &(from_bal - amount).to_le_bytes(),
        )?;
        tx.put(self.table_of(to), &to.to_be_bytes(), &to_new.to_le_bytes())?;
        tx.put(&self.log, &key, &t.encode())?;
        tx.commit()?;
        Ok(t)
    }

    /// What the balances must sum to: `accounts × INITIAL_BALANCE`.
    pub fn total_expected(&self) -> u128 {
        u128::from(self.accounts) * u128::from(INITIAL_BALANCE)
    }

    /// Sum every balance in one snapshot: a REPEATABLE-READ transaction
    /// scans `bank_a` and `bank_b` (its plain reads all see the snapshot
    /// taken at its first read), then scans `bank_a` again. `Ok(None)` when
    /// the sum is the total and the second scan saw what the first did;
    /// otherwise the violation, naming the totals seen and expected. Takes
    /// no lock and writes nothing.
    pub fn check_snapshot_total(&self) -> Result<Option<String>> {
        let tx = self.db.begin_with(Isolation::RepeatableRead);
        let sum = |tx: &keel::Txn, t: &Table| -> Result<(u128, u64)> {
            let (mut total, mut rows) = (0u128, 0u64);
            for row in tx.scan(t, ..)? {
                let (k, v) = row?;
                let acct = account_of(&k);
                total += u128::from(decode_balance(acct, &v)?);
                rows += 1;
            }
            Ok((total, rows))
        };
        let (a, rows_a) = sum(&tx, &self.a)?;
        let (b, rows_b) = sum(&tx, &self.b)?;
        let (again, rows_again) = sum(&tx, &self.a)?;
        drop(tx);
        let expected = self.total_expected();
        if a + b != expected || rows_a + rows_b != self.accounts {
            return Ok(Some(format!(
                "REPEATABLE-READ snapshot: {} accounts sum to {}, expected {} accounts summing \
                 to {expected} ({TABLE_A} {a} + {TABLE_B} {b})",
                rows_a + rows_b,
                a + b,
                self.accounts
            )));
        }
        if (again, rows_again) != (a, rows_a) {
            return Ok(Some(format!(
                "REPEATABLE-READ snapshot: a second scan of {TABLE_A} in the same transaction \
                 summed to {again} ({rows_again} accounts), the first to {a} ({rows_a} accounts)"
            )));
        }
        Ok(None)
    }

    /// Read each account table with one plain [`Table::range`] call (one
    /// snapshot per call, taken as the call starts): each holds its accounts
    /// (the even ones in `bank_a`, the odd ones in `bank_b`), no balance is
    /// above the bank's total. The accounts are split over two tables, so
    /// two calls are two snapshots and their sum is not an invariant: the
    /// total is asserted by [`check_snapshot_total`](Self::check_snapshot_total).
    pub fn check_plain_ranges(&self) -> Result<Option<String>> {
        let expected = self.total_expected();
        for (table, parity) in [(&self.a, 0), (&self.b, 1)] {
            let want = (self.accounts + 1 - parity) / 2;
            let (mut rows, mut total) = (0u64, 0u128);
            for row in table.range(..)? {
                let (k, v) = row?;
                let acct = account_of(&k);
                let b = decode_balance(acct, &v)?;
                if u128::from(b) > expected {
                    return Ok(Some(format!(
                        "Table::range of {}: account {acct} holds {b}, more than the bank's \
                         total {expected}",
                        table.name()
                    )));
                }
                rows += 1;
                total += u128::from(b);
            }
            if rows != want || total > expected {
                return Ok(Some(format!(
                    "Table::range of {}: {rows} accounts summing to {total}, expected {want} \
                     accounts summing to at most {expected}",
                    table.name()
                )));
            }
        }
        Ok(None)
    }

    /// Check the bank after a crash: see [`verify`].
    pub fn verify(&self, acked: &[TransferId]) -> Result<VerifyReport> {
        let mut r = VerifyReport::default();
        let trees = self.db.check()?;
        r.trees = trees;
        let balances = self.read_balances(&mut r)?;
        let transfers = self.read_log(&mut r)?;
        let mut expected: HashMap<u64, i128> = (0..self.accounts)
            .map(|a| (a, i128::from(INITIAL_BALANCE)))
            .collect();
        for t in transfers.values() {
            for (acct, delta) in [(t.from, -i128::from(t.amount)), (t.to, t.amount.into())] {
                match expected.get_mut(&acct) {
                    Some(b) => *b += delta,
                    None => r.problem(format!(
                        "transfer {} names account {acct}, which does not exist",
                        t.id
                    )),
                }
            }
        }
        for acct in 0..self.accounts {
            let want = expected.get(&acct).copied().unwrap_or_default();
            match balances.get(&acct) {
                None => r.problem(format!("account {acct} is missing")),
                Some(&have) if i128::from(have) != want => r.problem(format!(
                    "account {acct} holds {have} but {TABLE_LOG} implies {want}"
                )),
                Some(_) => {}
            }
        }
        r.total_expected = self.total_expected();
        r.total = balances.values().map(|&b| u128::from(b)).sum();
        if r.total != r.total_expected {
            r.problem(format!(
                "total balance is {} but should be {}",
                r.total, r.total_expected
            ));
        }
        // The same total through a REPEATABLE-READ transaction's snapshot.
        if let Some(v) = self.check_snapshot_total()? {
            r.problem(v);
        }
        let mut missing = 0usize;
        for id in acked {
            if !transfers.contains_key(id) {
                missing += 1;
                if missing <= 5 {
                    r.problem(format!(
                        "acknowledged transfer {id} is missing from {TABLE_LOG}"
                    ));
                }
            }
        }
        if missing > 5 {
            r.problem(format!(
                "{missing} acknowledged transfers in all are missing from {TABLE_LOG}"
            ));
        }
        r.acked_checked = acked.len();
        r.accounts = balances.len();
        r.transfers = transfers.len();
        Ok(r)
    }

    fn read_balances(&self, r: &mut VerifyReport) -> Result<HashMap<u64, u64>> {
        let mut out = HashMap::new();
        for (table, parity) in [(&self.a, 0), (&self.b, 1)] {
            for row in table.range(..)? {
                let (k, v) = row?;
                let Ok(kb) = <[u8; 8]>::try_from(k.as_slice()) else {
                    r.problem(format!("{}: key {k:02x?} is not an account", table.name()));
                    continue;
                };
                let acct = u64::from_be_bytes(kb);
                if acct >= self.accounts || acct % 2 != parity {
                    r.problem(format!("{}: unexpected account {acct}", table.name()));
                    continue;
                }
                match decode_balance(acct, &v) {
                    Ok(b) => {
                        out.insert(acct, b);
                    }
                    Err(e) => r.problem(e.to_string()),
                }
            }
        }
        Ok(out)
    }

    fn read_log(&self, r: &mut VerifyReport) -> Result<HashMap<TransferId, Transfer>> {
        let mut out = HashMap::new();
        for row in self.log.range(..)? {
            let (k, v) = row?;
            match Transfer::decode(&k, &v) {
                Some(t) => {
                    out.insert(t.id, t);
                }
                None => r.problem(format!(
                    "{TABLE_LOG}: row {k:02x?} → {v:02x?} is not a transfer"
                )),
            }
        }
        Ok(out)
    }
}

/// Check a bank after a crash and reopen: every tree's invariants hold,
/// the balances sum to the initial total (read with `Table::range` and in
/// a REPEATABLE-READ transaction's snapshot), every id in `acked` is in
/// `bank_log`, and every balance agrees with the `bank_log` rows. Engine
/// errors are errors; violations are listed in the report.
pub fn verify(db: &Db, accounts: u64, acked: &[TransferId]) -> Result<VerifyReport> {
    Bank::open(db, accounts)?.verify(acked)
}

/// The account a key names (big-endian); `u64::MAX`, no account, for a
/// key of the wrong length, which the checks then report.
fn account_of(key: &[u8]) -> u64 {
    key.try_into().map(u64::from_be_bytes).unwrap_or(u64::MAX)
}

fn decode_balance(acct: u64, v: &[u8]) -> Result<u64> {
    let b: [u8; 8] = v.try_into().map_err(|_| {
        Error::Corruption(format!(
            "bank: balance of account {acct} is {} bytes, expected 8",
            v.len()
        ))
    })?;
    Ok(u64::from_le_bytes(b))
}

/// What [`verify`] found.
#[derive(Debug, Default)]
pub struct VerifyReport {
    /// Account rows found.
    pub accounts: usize,
    /// Transfers found in `bank_log`.
    pub transfers: usize,
    /// Acknowledged ids checked.
    pub acked_checked: usize,
    /// Sum of the balances.
    pub total: u128,
    /// What the sum must be.
    pub total_expected: u128,
    /// Each tree and its shape (from `Db::check`).
    pub trees: Vec<(String, TreeStats)>,
    /// Violations found (at most a few; see `problem_count`).
    pub problems: Vec<String>,
    /// Violations found in all.
    pub problem_count: usize,
}

impl VerifyReport {
    /// True if no violation was found.
    pub fn ok(&self) -> bool {
        self.problem_count == 0
    }

    fn problem(&mut self, p: String) {
        self.problem_count += 1;
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(p);
        }
    }
}

impl std::fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} accounts, {} transfers, {} acknowledged checked, total {} (expected {})",
            self.accounts, self.transfers, self.acked_checked, self.total, self.total_expected
        )?;
        if self.problem_count > 0 {
            write!(f, "; {} violation(s):", self.problem_count)?;
            for p in &self.problems {
                write!(f, "\n  - {p}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::testing::small_options;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn transfers_keep_the_total_and_verify_sees_tampering() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), small_options()).unwrap();
        let bank = setup(&db, 50).unwrap();
        let mut acked = Vec::new();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            // Readers: every snapshot sums to the total while transfers run.
            let readers: Vec<_> = (0..2)
                .map(|r| {
                    let (bank, done) = (bank.clone(), &done);
                    s.spawn(move || {
                        let (mut reads, mut bad) = (0u64, Vec::new());
                        while !done.load(std::sync::atomic::Ordering::Relaxed) || reads == 0 {
                            let v = if r == 0 {
                                bank.check_snapshot_total().unwrap()
                            } else {
                                bank.check_plain_ranges().unwrap()
                            };
                            bad.extend(v);
                            reads += 1;
                        }
                        (reads, bad)
                    })
                })
                .collect();
            let hs: Vec<_> = (0..4u64)
                .map(|w| {
                    let bank = bank.clone();
                    s.spawn(move || {
                        let mut rng = SmallRng::seed_from_u64(w);
                        (0..200)
                            .map(|i| bank.transfer(&mut rng, w * 1_000 + i).unwrap().id)
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for h in hs {
                acked.extend(h.join().unwrap());
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            for h in readers {
                let (reads, bad) = h.join().unwrap();
                assert!(
                    bad.is_empty(),
                    "{} of {reads} snapshot reads during the transfers were wrong; the first: {}",
                    bad.len(),
                    bad[0]
                );
            }
        });
        let r = verify(&db, 50, &acked).unwrap();
        assert!(r.ok(), "{r}");
        assert_eq!((r.accounts, r.transfers), (50, 800));
        // A transfer id that never committed, and a balance changed behind
        // the log's back, are both reported.
        acked.push(999_999);
        bank.a
            .put(&0u64.to_be_bytes(), &7u64.to_le_bytes())
            .unwrap();
        let r = verify(&db, 50, &acked).unwrap();
        assert!(!r.ok());
        let text = r.to_string();
        assert!(
            text.contains("999999") && text.contains("account 0 holds 7"),
            "{text}"
        );
        assert!(text.contains("total balance"), "{text}");
        db.close().unwrap();
    }
}
