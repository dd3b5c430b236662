//! Consistency probe: do readers ever see money appear or vanish?
//!
//! 300 accounts of 1,000 each. Three threads move money between two random
//! accounts in transactions (`get_for_update` both, `put` both, commit), so
//! the total is always 300,000. Two threads sum every balance, in turn:
//!
//! - (a) with one `Table::range(..)` call;
//! - (b) with one transaction's `scan`;
//! - (c) inside one transaction: read account 0, scan, read account 0
//!   again (the scan's total is checked too, and both later reads of
//!   account 0 must equal the first at REPEATABLE READ).
//!
//! It counts wrong totals for (a) and (b) (and (c)'s scan) and non-repeated
//! reads of account 0 for (c). With consistent reads, every count but (c)'s
//! at READ COMMITTED is 0.
//!
//! `cargo run --release -p keel --example consistency_probe -- [--secs N]
//! [--isolation REPEATABLE-READ|READ-COMMITTED]`

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use keel::{Db, Error, Isolation, Options, Table};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const ACCOUNTS: u64 = 300;
const START: u64 = 1_000;
const TOTAL: u64 = ACCOUNTS * START;

fn usage() -> ExitCode {
    eprintln!(
        "usage: consistency_probe [--secs N] [--isolation REPEATABLE-READ|READ-COMMITTED]\n  \
         --secs N       how long to run (default 8)\n  \
         --isolation L  level of the transactions (default REPEATABLE-READ)"
    );
    ExitCode::from(2)
}

fn key(i: u64) -> Vec<u8> {
    format!("acct{i:03}").into_bytes()
}

fn balance(v: &[u8]) -> u64 {
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.parse().ok())
        .expect("a balance")
}

#[derive(Default)]
struct Counts {
    transfers: AtomicU64,
    retries: AtomicU64,
    a_sums: AtomicU64,
    a_wrong: AtomicU64,
    b_sums: AtomicU64,
    b_wrong: AtomicU64,
    c_runs: AtomicU64,
    c_wrong: AtomicU64,
    c_nonrepeat: AtomicU64,
}

fn transfer(db: &Db, t: &Table, level: Isolation, rng: &mut SmallRng) -> keel::Result<()> {
    let a = rng.gen_range(0..ACCOUNTS);
    let b = (a + rng.gen_range(1..ACCOUNTS)) % ACCOUNTS;
    let (from, to) = (key(a), key(b));
    let mut tx = db.begin_with(level);
    // Lock in key order: no deadlocks among transfers.
    let (lo, hi) = if from < to {
        (&from, &to)
    } else {
        (&to, &from)
    };
    let vlo = balance(&tx.get_for_update(t, lo)?.expect("account"));
    let vhi = balance(&tx.get_for_update(t, hi)?.expect("account"));
    let (vfrom, vto) = if lo == &from { (vlo, vhi) } else { (vhi, vlo) };
    let amount = rng.gen_range(1..=100).min(vfrom);
    tx.put(t, &from, (vfrom - amount).to_string().as_bytes())?;
    tx.put(t, &to, (vto + amount).to_string().as_bytes())?;
    tx.commit()
}

fn sum(rows: impl Iterator<Item = keel::Result<(Vec<u8>, Vec<u8>)>>) -> keel::Result<(u64, u64)> {
    let (mut total, mut n) = (0, 0);
    for r in rows {
        total += balance(&r?.1);
        n += 1;
    }
    Ok((total, n))
}

fn summer(db: &Db, t: &Table, level: Isolation, c: &Counts, stop: &AtomicBool) -> keel::Result<()> {
    let wrong = |(total, n): (u64, u64)| total != TOTAL || n != ACCOUNTS;
    let mut round = 0u64;
    while !stop.load(Relaxed) {
        match round % 3 {
            0 => {
                let s = sum(t.range(..)?)?;
                c.a_sums.fetch_add(1, Relaxed);
                c.a_wrong.fetch_add(u64::from(wrong(s)), Relaxed);
            }
            1 => {
                let tx = db.begin_with(level);
                let s = sum(tx.scan(t, ..)?)?;
                c.b_sums.fetch_add(1, Relaxed);
                c.b_wrong.fetch_add(u64::from(wrong(s)), Relaxed);
            }
            _ => {
                let tx = db.begin_with(level);
                let first = tx.get(t, &key(0))?;
                let mut in_scan = None;
                let (mut total, mut n) = (0, 0);
                for r in tx.scan(t, ..)? {
                    let (k, v) = r?;
                    if k == key(0) {
                        in_scan = Some(v.clone());
                    }
                    total += balance(&v);
                    n += 1;
                }
                let again = tx.get(t, &key(0))?;
                c.c_runs.fetch_add(1, Relaxed);
                c.c_wrong.fetch_add(u64::from(wrong((total, n))), Relaxed);
                let repeated = in_scan == first && again == first;
                c.c_nonrepeat.fetch_add(u64::from(!repeated), Relaxed);
            }
        }
        round += 1;
    }
    Ok(())
}

fn main() -> ExitCode {
    let mut secs = 8u64;
    let mut level = Isolation::RepeatableRead;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let parsed = match (a.as_str(), args.next()) {
            ("--secs", Some(v)) => v
                .parse()
                .map(|v| secs = v)
                .map_err(|e| format!("--secs {v}: {e}")),
            ("--isolation", Some(v)) => v
                .parse()
                .map(|v| level = v)
                .map_err(|e| format!("--isolation: {e}")),
            (a, _) => Err(format!("unexpected argument `{a}` or missing value")),
        };
        if let Err(why) = parsed {
            eprintln!("consistency_probe: {why}");
            return usage();
        }
    }
    match run(secs, level) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("consistency_probe: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(secs: u64, level: Isolation) -> keel::Result<()> {
    let dir = std::env::temp_dir().join(format!("keel-consistency-probe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut opts = Options::default();
    opts.set("buffer_pool_size", "64MiB")?;
    opts.set("flush_method", "nosync")?; // a probe of visibility, not durability
    opts.set("lock_wait_timeout", "5")?;
    let db = Db::open(&dir, opts)?;
    let t = db.create_table("accounts")?;
    let start = START.to_string();
    t.bulk_load((0..ACCOUNTS).map(|i| (key(i), start.as_bytes())))?;

    let counts = Counts::default();
    let stop = AtomicBool::new(false);
    println!("consistency_probe: {ACCOUNTS} accounts, 3 transfer threads, 2 summing threads, {secs} s at {level}");
    let started = Instant::now();
    std::thread::scope(|s| -> keel::Result<()> {
        let mut handles = Vec::new();
        for seed in 0..3u64 {
            let (db, t, c, stop) = (&db, &t, &counts, &stop);
            handles.push(s.spawn(move || -> keel::Result<()> {
                let mut rng = SmallRng::seed_from_u64(seed);
                while !stop.load(Relaxed) {
                    match transfer(db, t, level, &mut rng) {
                        Ok(()) => c.transfers.fetch_add(1, Relaxed),
                        Err(Error::Deadlock { .. } | Error::LockWaitTimeout { .. }) => {
                            c.retries.fetch_add(1, Relaxed)
                        }
                        Err(e) => return Err(e),
                    };
                }
                Ok(())
            }));
        }
        for _ in 0..2 {
            let (db, t, c, stop) = (&db, &t, &counts, &stop);
            handles.push(s.spawn(move || summer(db, t, level, c, stop)));
        }
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Relaxed);
        for h in handles {
            h.join().expect("probe thread panicked")?;
        }
        Ok(())
    })?;
    let elapsed = started.elapsed();
    let final_total = sum(t.range(..)?)?;
    db.close()?;
    let _ = std::fs::remove_dir_all(&dir);

    let g = |a: &AtomicU64| a.load(Relaxed);
    let c = &counts;
    println!(
        "ran {elapsed:.1?}; transfers committed: {} (retried {})",
        g(&c.transfers),
        g(&c.retries)
    );
    println!(
        "(a) Table::range sums:          {:>8}   wrong totals: {}",
        g(&c.a_sums),
        g(&c.a_wrong)
    );
    println!(
        "(b) transaction scan sums:      {:>8}   wrong totals: {}",
        g(&c.b_sums),
        g(&c.b_wrong)
    );
    println!(
        "(c) get 0, scan, get 0 runs:    {:>8}   wrong totals: {}   non-repeated reads of account 0: {}",
        g(&c.c_runs),
        g(&c.c_wrong),
        g(&c.c_nonrepeat)
    );
    println!(
        "final total: {} over {} accounts (want {TOTAL})",
        final_total.0, final_total.1
    );
    let torn = g(&c.a_wrong) + g(&c.b_wrong) + g(&c.c_wrong);
    let nonrepeat_ok = level == Isolation::ReadCommitted || g(&c.c_nonrepeat) == 0;
    let ok = torn == 0 && nonrepeat_ok && final_total == (TOTAL, ACCOUNTS);
    println!("consistent: {}", if ok { "yes" } else { "NO" });
    Ok(())
}
