//! The basic load / point-get / scan workload: load N rows in random key
//! order, read random keys back, run short range scans, and verify every
//! value. It is the engine core's smoke benchmark.

use std::time::Instant;

use keel::{Db, Result, Table};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::Serialize;

/// Parameters of one run.
#[derive(Clone, Debug, Serialize)]
pub struct BasicConfig {
    /// Rows to load.
    pub rows: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// Random point gets after the load.
    pub gets: u64,
    /// Range scans after the gets.
    pub scans: u64,
    /// Rows per scan.
    pub scan_len: usize,
    /// Worker threads for each phase.
    pub threads: usize,
    /// Seed for key order and choices.
    pub seed: u64,
}

/// Figures of one phase.
#[derive(Clone, Debug, Serialize)]
pub struct PhaseReport {
    /// Phase name.
    pub name: &'static str,
    /// Operations (rows loaded, gets, scans).
    pub ops: u64,
    /// Rows touched.
    pub rows: u64,
    /// Wall time in seconds.
    pub secs: f64,
    /// Rows per second.
    pub rows_per_s: f64,
    /// Pages read from disk during the phase.
    pub pages_read: u64,
    /// Pages written to disk during the phase.
    pub pages_written: u64,
}

/// The value stored for key number `i`: deterministic so reads can verify it.
pub fn value_for(i: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

fn metric(db: &Db, name: &str) -> u64 {
    db.metrics().get(name).unwrap_or(0)
}

fn phase<F>(db: &Db, name: &'static str, ops: u64, threads: usize, f: F) -> Result<PhaseReport>
where
    F: Fn(usize) -> Result<u64> + Sync,
{
    let r0 = metric(db, "buffer_pool_reads");
    let w0 = metric(db, "buffer_pages_written");
    let t0 = Instant::now();
    let rows = std::thread::scope(|s| {
        let f = &f;
        let hs: Vec<_> = (0..threads).map(|t| s.spawn(move || f(t))).collect();
        let mut rows = 0;
        for h in hs {
            rows += h
                .join()
                .map_err(|_| keel::Error::Corruption("worker thread panicked".into()))??;
        }
        Ok::<u64, keel::Error>(rows)
    })?;
    let secs = t0.elapsed().as_secs_f64().max(1e-9);
    Ok(PhaseReport {
        name,
        ops,
        rows,
        secs,
        rows_per_s: rows as f64 / secs,
        pages_read: metric(db, "buffer_pool_reads") - r0,
        pages_written: metric(db, "buffer_pages_written") - w0,
    })
}

fn check_value(i: u64, got: Option<Vec<u8>>, len: usize) -> Result<()> {
    match got {
        Some(v) if v == value_for(i, len) => Ok(()),
        Some(_) => Err(keel::Error::Corruption(format!(
            "row {i}: wrong value read back"
        ))),
        None => Err(keel::Error::Corruption(format!("row {i}: missing"))),
    }
}

/// Run the three phases on table `t` of `db` (which should be empty).
pub fn run(db: &Db, t: &Table, cfg: &BasicConfig) -> Result<Vec<PhaseReport>> {
    let mut order: Vec<u64> = (0..cfg.rows).collect();
    order.shuffle(&mut SmallRng::seed_from_u64(cfg.seed));
    let threads = cfg.threads.max(1);
    let chunk = order.len().div_ceil(threads).max(1);
    let load = phase(db, "load", cfg.rows, threads, |w| {
        let mine = order.chunks(chunk).nth(w).unwrap_or(&[]);
        for &i in mine {
            t.put(&i.to_be_bytes(), &value_for(i, cfg.value_size))?;
        }
        Ok(mine.len() as u64)
    })?;
    let per = cfg.gets / threads as u64;
    let gets = phase(db, "point_get", per * threads as u64, threads, |w| {
        let mut rng = SmallRng::seed_from_u64(cfg.seed ^ (w as u64 + 1));
        for _ in 0..per {
            let i = rng.gen_range(0..cfg.rows.max(1));
            check_value(i, t.get(&i.to_be_bytes())?, cfg.value_size)?;
        }
        Ok(per)
    })?;
    let per_scan = cfg.scans / threads as u64;
    let scans = phase(db, "scan", per_scan * threads as u64, threads, |w| {
        let mut rng = SmallRng::seed_from_u64(cfg.seed ^ (w as u64 + 1001));
        let mut rows = 0;
        for _ in 0..per_scan {
            let start = rng.gen_range(0..cfg.rows.max(1));
            let lo = start.to_be_bytes();
            for (expect, row) in (start..).zip(t.range(&lo[..]..)?.take(cfg.scan_len)) {
                let (k, v) = row?;
                let got = u64::from_be_bytes(k.as_slice().try_into().map_err(|_| {
                    keel::Error::Corruption(format!("scan returned a {}-byte key", k.len()))
                })?);
                if got != expect {
                    return Err(keel::Error::Corruption(format!(
                        "scan from {start}: expected key {expect}, got {got}"
                    )));
                }
                check_value(got, Some(v), cfg.value_size)?;
                rows += 1;
            }
        }
        Ok(rows)
    })?;
    Ok(vec![load, gets, scans])
}
