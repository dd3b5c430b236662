//! Transactions with retry: threads move money between accounts in
//! transactions that lock rows in opposite orders, so some deadlock; the
//! victim is rolled back and retried, and the total never changes.
//!
//! `cargo run --release -p keel --example transactions`

use std::sync::Arc;

use keel::{Db, Error, Options, Table};

/// Move `amount` from `from` to `to` in one transaction.
fn transfer(db: &Db, t: &Table, from: &[u8], to: &[u8], amount: i64) -> keel::Result<()> {
    let mut tx = db.begin();
    let read = |v: Option<Vec<u8>>| -> i64 {
        v.and_then(|v| String::from_utf8(v).ok()?.parse().ok())
            .unwrap_or(0)
    };
    let a = read(tx.get_for_update(t, from)?); // locks the row, then reads
    let b = read(tx.get_for_update(t, to)?);
    tx.put(t, from, (a - amount).to_string().as_bytes())?;
    tx.put(t, to, (b + amount).to_string().as_bytes())?;
    tx.commit() // dropping `tx` instead would roll it back
}

/// Retry what a concurrent transaction made fail; give up on anything else.
fn with_retry(mut f: impl FnMut() -> keel::Result<()>) -> keel::Result<u32> {
    let mut retries = 0;
    loop {
        match f() {
            Ok(()) => return Ok(retries),
            // The deadlock's victim was rolled back: run it again.
            // A lock-wait timeout failed only the call; here the whole
            // transaction (dropped, so rolled back) is simply run again.
            Err(Error::Deadlock { .. } | Error::LockWaitTimeout { .. } | Error::TxnAborted) => {
                retries += 1
            }
            Err(e) => return Err(e),
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("keel-example-txn-{}", std::process::id()));
    let mut opts = Options::default();
    opts.set("buffer_pool_size", "64MiB")?;
    opts.set("lock_wait_timeout", "5")?;
    let db = Db::open(&dir, opts)?;
    let accounts = Arc::new(db.table_or_create("accounts")?);
    let names: Vec<Vec<u8>> = (0..10).map(|i| format!("acct{i}").into_bytes()).collect();
    for n in &names {
        accounts.put(n, b"100")?;
    }
    let handles: Vec<_> = (0..4)
        .map(|w| {
            let (db, t, names) = (db.clone(), Arc::clone(&accounts), names.clone());
            std::thread::spawn(move || -> keel::Result<u32> {
                let mut retries = 0;
                for i in 0..200 {
                    let (x, y) = ((i + w) % names.len(), (i * 7 + 3) % names.len());
                    if x != y {
                        retries += with_retry(|| transfer(&db, &t, &names[x], &names[y], 1))?;
                    }
                }
                Ok(retries)
            })
        })
        .collect();
    let mut retries = 0;
    for h in handles {
        retries += h.join().map_err(|_| "a worker panicked")??;
    }
    let mut total = 0i64;
    for row in accounts.range(..)? {
        let (_, v) = row?;
        total += String::from_utf8(v)?.parse::<i64>()?;
    }
    println!("total {total} (was 1000), {retries} transactions retried");
    assert_eq!(total, 1000);
    db.close()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
