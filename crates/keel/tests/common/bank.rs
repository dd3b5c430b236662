#![allow(dead_code, clippy::unwrap_used)]
//! A bank-transfer workload shared by the crash and fault tests.

use keel::{Db, Error, Options};
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

pub fn account_table(db: &Db, a: u64) -> keel::Table {
    db.table(if a.is_multiple_of(2) {
        "bank_a"
    } else {
        "bank_b"
    })
    .unwrap()
}

pub fn setup(db: &Db) {
    db.create_table("bank_a").unwrap();
    db.create_table("bank_b").unwrap();
    db.create_table("bank_log").unwrap();
    let mut tx = db.begin();
    for a in 0..ACCOUNTS {
        tx.put(
            &account_table(db, a),
            &a.to_be_bytes(),
            &START.to_le_bytes(),
        )
        .unwrap();
    }
    tx.commit().unwrap();
}

/// One transfer; Ok(false) when it must be retried (deadlock, timeout).
pub fn transfer(db: &Db, rng: &mut SmallRng, id: u64) -> Result<bool, Error> {
    let a = rng.gen_range(0..ACCOUNTS);
    let b = (a + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
    let mut tx = db.begin();
    let mut step = |tx: &mut keel::Txn| -> Result<(), Error> {
        let (ta, tb) = (account_table(db, a), account_table(db, b));
        let va = u64::from_le_bytes(
            tx.get_for_update(&ta, &a.to_be_bytes())?
                .unwrap()
                .try_into()
                .unwrap(),
        );
        let vb = u64::from_le_bytes(
            tx.get_for_update(&tb, &b.to_be_bytes())?
                .unwrap()
                .try_into()
                .unwrap(),
        );
        let amount = rng.gen_range(0..=va.min(50));
        tx.put(&ta, &a.to_be_bytes(), &(va - amount).to_le_bytes())?;
        tx.put(&tb, &b.to_be_bytes(), &(vb + amount).to_le_bytes())?;
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

pub fn verify(db: &Db, acked: &[u64]) {
    let mut total = 0;
    for t in ["bank_a", "bank_b"] {
        for r in db.table(t).unwrap().range(..).unwrap() {
            let (_, v) = r.unwrap();
            total += u64::from_le_bytes(v.try_into().unwrap());
        }
    }
    assert_eq!(total, ACCOUNTS * START, "total balance changed");
    let log = db.table("bank_log").unwrap();
    for id in acked {
        assert!(
            log.get(&id.to_be_bytes()).unwrap().is_some(),
            "acknowledged transfer {id} is missing"
        );
    }
    db.check().unwrap();
}
