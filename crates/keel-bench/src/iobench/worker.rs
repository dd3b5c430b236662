//! One worker: a thread with one request in flight at a time, as IObench's
//! workers (and fio's `psync` engine with `numjobs=N`) have. N workers make a
//! queue depth of N.

use std::sync::Arc;
use std::time::Instant;

use keel::io::{AlignedBuf, Device};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};

use super::stats::Tally;
use super::{Case, Method, Mode};

/// A worker stops after this many failed operations: a broken device must not
/// make it spin for the rest of the case.
const MAX_ERRORS: u64 = 1000;

/// What every worker of a case shares.
pub(super) struct Plan<'a> {
    pub case: Case,
    pub read_pct: u8,
    pub devices: &'a [Arc<dyn Device>],
    pub file_bytes: u64,
    pub seed: u64,
    /// Operations that start before this are not measured.
    pub warm_end: Instant,
    /// No operation starts at or after this.
    pub end: Instant,
}

/// Where a worker's next request goes.
struct Cursor {
    file: usize,
    /// Next block (sequential modes).
    block: u64,
    /// The worker's own region of its file, in blocks: `[first, first+len)`.
    first: u64,
    len: u64,
}

impl Plan<'_> {
    fn blocks_per_file(&self) -> u64 {
        (self.file_bytes / self.case.bs as u64).max(1)
    }

    /// Sequential workers are spread over the files round-robin and split
    /// their file into equal regions, so each streams through its own.
    fn cursor(&self, worker: usize) -> Cursor {
        let files = self.devices.len().max(1);
        let file = worker % files;
        let sharers = (self.case.threads + files - 1 - file) / files;
        let rank = (worker / files) as u64;
        let blocks = self.blocks_per_file();
        let len = (blocks / sharers.max(1) as u64).max(1);
        let first = (rank * len) % blocks;
        Cursor {
            file,
            block: first,
            first,
            len,
        }
    }

    /// The next request: (file, offset, is a read).
    fn next(&self, cursor: &mut Cursor, rng: &mut SmallRng) -> (usize, u64, bool) {
        let bs = self.case.bs as u64;
        let read = match self.case.mode {
            Mode::Rrnd | Mode::Seqr => true,
            Mode::Wrnd | Mode::Seqw | Mode::Flush => false,
            Mode::Rwrnd => rng.gen_range(0..100u8) < self.read_pct,
        };
        if self.case.mode.is_random() {
            let file = rng.gen_range(0..self.devices.len());
            let block = rng.gen_range(0..self.blocks_per_file());
            return (file, block * bs, read);
        }
        let block = cursor.block;
        cursor.block += 1;
        if cursor.block >= cursor.first + cursor.len || cursor.block >= self.blocks_per_file() {
            cursor.block = cursor.first;
        }
        (cursor.file, block * bs, read)
    }

    /// Run worker number `worker` until the plan's end.
    pub fn run(&self, worker: usize) -> Tally {
        let mut tally = Tally::new();
        let mut rng =
            SmallRng::seed_from_u64(self.seed ^ (worker as u64).wrapping_mul(0x9e37_79b9));
        let mut buf = AlignedBuf::new(self.case.bs);
        rng.fill_bytes(&mut buf);
        let mut cursor = self.cursor(worker);
        let sync_each_write = self.case.method == Method::Fsync;
        loop {
            let (file, offset, read) = self.next(&mut cursor, &mut rng);
            let device = &self.devices[file];
            let start = Instant::now();
            if start >= self.end {
                break;
            }
            let result = if read {
                device.read_at(&mut buf, offset)
            } else {
                device.write_at(&buf, offset).and_then(|()| {
                    if sync_each_write {
                        device.sync()
                    } else {
                        Ok(())
                    }
                })
            };
            let latency = start.elapsed();
            if let Err(e) = result {
                tally.errors += 1;
                if tally.first_error.is_none() {
                    let what = if read { "read" } else { "write" };
                    let path = device.path().display();
                    tally.first_error = Some(format!("{what} at {offset} in {path}: {e}"));
                }
                if tally.errors >= MAX_ERRORS {
                    break;
                }
                continue;
            }
            if start < self.warm_end {
                continue;
            }
            let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX).max(1);
            tally.latency_ns.saturating_record(ns);
            if read {
                tally.reads += 1;
            } else {
                tally.writes += 1;
            }
        }
        tally
    }
}
