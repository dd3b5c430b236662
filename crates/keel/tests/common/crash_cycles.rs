#![allow(dead_code, clippy::unwrap_used)]
//! Crash/recover cycles under concurrency, on the faulty in-memory device.
//!
//! Each cycle: writer threads commit small transactions (bank transfers,
//! or accounts being opened on a new database) while four page cleaners
//! flush four buffer pool instances under pressure (a pool of 96 frames,
//! the smallest log); the power fails (the test pulls the plug, or an armed
//! failpoint fires inside the engine's own I/O); the engine is dropped as a
//! crash would drop it and the database is reopened on the same device.
//! After every recovery the workload must audit clean: every acknowledged
//! transaction whole and present, the invariants (total balance), every
//! tree. "Acknowledged" includes commits that returned after the power
//! failed: a crash fails every later call, so such a commit was durable
//! before it. While the writers run, [`READERS`] reader threads read in
//! one snapshot (a REPEATABLE-READ transaction, or plain `Table::range`
//! calls) and check what must hold at every commit (the bank's total);
//! one wrong read fails the cycle, naming what it saw and expected. Every
//! page the crash left torn must have been repaired from its doublewrite
//! copy.
//!
//! Pages are 8 KiB, the smallest a crash tearing at 4 KiB sectors can tear
//! (a 4 KiB page is one sector: kept or lost whole, never torn).
//!
//! Seeds are printed; `KEEL_TEST_SEED` replays the cycle plan (spells,
//! failpoint counts, crash images), not the threads' interleaving.
//! `KEEL_POWER_LOSS_CYCLES=n` runs every scenario for `n` cycles instead of
//! its CI count (a long run: `KEEL_POWER_LOSS_CYCLES=2000`).

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel::format::data::EXTENT_PAGES;
use keel::format::page::{compress, verify_page, PageCheckError, PageId};
use keel::io::faulty::{CrashMode, FaultyFs};
use keel::{Db, DoublewriteMode, Error, FlushPolicyName, Options, PageCompression};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::bank::Bank;
use workload::Workload;

pub mod workload;

/// Writer threads per cycle.
pub const WRITERS: u64 = 4;
/// Snapshot reader threads per cycle: even ones read in a REPEATABLE-READ
/// transaction, odd ones with plain `Table::range` calls.
pub const READERS: u64 = 2;
/// Pause between two reads of one reader, so that the readers (whole-table
/// scans) leave the writers and cleaners most of the cores.
const READ_PAUSE: Duration = Duration::from_millis(2);
/// The page size: the smallest a crash tearing at 4 KiB sectors can tear.
pub const PAGE_SIZE: usize = 8192;
/// Accounts padded to span many pages, so random transfers dirty pages all
/// over the pool and evictions must write them back.
pub const BANK: Bank = Bank {
    accounts: 1000,
    pad: 800,
};
/// How long the writers run before the test pulls the plug itself.
const SPELL_MS: Range<u64> = Range { start: 5, end: 40 };
/// How long a cycle waits for its failpoint to fire before pulling the plug.
const FAILPOINT_PATIENCE: Duration = Duration::from_secs(1);
/// How long the first cycle of a scenario runs before its crash is armed.
const WARM_UP: Duration = Duration::from_millis(1500);

/// The engine under pressure: 4 instances of 24 frames, 4 cleaners, the
/// smallest log `Options::validate` accepts, doublewrite on, neighbors
/// flushed (`flush_neighbors` 1 or 2 by seed), and both flushing policies
/// (`steady`, the default, for seeds 0 and 1 mod 4; `classic` for 2 and 3).
pub fn opts(seed: u64) -> Options {
    opts_in_mode(seed, DoublewriteMode::On)
}

/// [`opts`] with doublewrite `mode`.
pub fn opts_in_mode(seed: u64, mode: DoublewriteMode) -> Options {
    Options {
        page_size: PAGE_SIZE,
        buffer_pool_size: 4 * 24 * PAGE_SIZE as u64,
        buffer_pool_instances: 4,
        page_cleaners: 4,
        flush_neighbors: keel::FlushNeighbors::from_code(1 + (seed % 2) as u8),
        data_files: 2,
        lru_scan_depth: 8,
        log_file_size: 1 << 20,
        log_files_in_group: 2,
        lock_wait_timeout: 1.0,
        doublewrite: mode,
        doublewrite_pages: 16,
        flush_policy: if (seed / 2).is_multiple_of(2) {
            FlushPolicyName::Steady
        } else {
            FlushPolicyName::Classic
        },
        ..Default::default()
    }
}

/// What power loss does to unsynced writes (see [`CrashMode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    DropUnsynced,
    Random,
    Torn,
}

impl Mode {
    fn crash_mode(self, seed: u64) -> CrashMode {
        match self {
            Mode::DropUnsynced => CrashMode::DropUnsynced,
            Mode::Random => CrashMode::Random { seed },
            Mode::Torn => CrashMode::Torn { seed },
        }
    }

    /// The failpoint action, e.g. `crash-torn=7`.
    fn action(self, seed: u64) -> String {
        match self {
            Mode::DropUnsynced => "crash".into(),
            Mode::Random => format!("crash-random={seed}"),
            Mode::Torn => format!("crash-torn={seed}"),
        }
    }
}

/// How each cycle's power loss comes.
#[derive(Clone, Debug)]
pub enum Crash {
    /// The test cuts the power after a spell of 5–40 ms.
    Unplug(Mode),
    /// The power fails at a failpoint of the engine's I/O, e.g.
    /// `/data-.sync`, after a random number (in `after`) of matching
    /// calls; if it does not fire within a while, the test unplugs.
    At {
        point: &'static str,
        after: Range<u64>,
        mode: Mode,
    },
    /// The process dies (the machine stays up) while the writers' commits
    /// are written to the log and their syncs are slowed, so the log has
    /// a tail no sync covered; then the power fails during the next open,
    /// at a failpoint of its I/O (`point`, after a random number of matching
    /// calls in `after`), or, if that open ends first, right after it.
    KillThenPowerLossInOpen {
        point: &'static str,
        after: Range<u64>,
        mode: Mode,
    },
}

/// How long redo syncs are slowed before a [`Crash::KillThenPowerLossInOpen`]
/// kills the process: commits written and not synced pile up meanwhile.
const KILL_SYNC_DELAY: &str = "/redo-.sync:delay=20ms";

/// What a scenario's cycles did, summed.
#[derive(Debug, Default)]
pub struct Totals {
    pub cycles: u64,
    /// Cycles that armed a failpoint, and those whose failpoint fired (the
    /// others were unplugged).
    pub armed: u64,
    pub fired: u64,
    /// For each failpoint that did not fire: the matching calls it saw.
    pub unfired_matched: Vec<u64>,
    pub acked: usize,
    /// Snapshot reads the readers finished while the writers ran.
    pub snapshot_reads: u64,
    /// Pages of the crash images that were torn (neither blank nor valid).
    pub torn_in_image: u64,
    /// Recovery's `recovery_torn_pages_repaired`, summed.
    pub torn_repaired: u64,
    /// Recoveries refused with `Error::TornPage` (`detect_only`), each
    /// naming a page the crash image shows torn.
    pub torn_detected: u64,
    /// `dblwr_written_bytes` over the runs.
    pub dblwr_written_bytes: u64,
    /// Recovery's `recovery_page_records_applied`, summed.
    pub replayed: u64,
    /// What the crashes did to unsynced writes (all files), summed.
    pub writes_kept: u64,
    pub writes_lost: u64,
    pub writes_torn: u64,
    /// The engine's write-back counters ([`WRITE_BACK`]), summed over the
    /// cycles' runs.
    pub write_back: BTreeMap<&'static str, u64>,
}

/// Counters that show the cleaners and writers flushing during the runs.
pub const WRITE_BACK: [&str; 12] = [
    "buffer_pages_written",
    "buffer_LRU_batch_flush_total_pages",
    "buffer_LRU_single_flush_total_pages",
    "buffer_flush_adaptive_total_pages",
    "buffer_flush_sync_total_pages",
    "buffer_flush_neighbor_total_pages",
    "buffer_flush_background_total_pages",
    "buffer_flush_cleaner_rounds",
    "dblwr_writes",
    "log_bytes_written",
    "log_checkpoints",
    "num_pages_page_compressed",
];

impl Totals {
    fn count_run(&mut self, before: &BTreeMap<&str, u64>, after: &BTreeMap<&str, u64>) {
        for k in WRITE_BACK {
            *self.write_back.entry(k).or_default() += after[k] - before[k];
        }
        self.dblwr_written_bytes += after["dblwr_written_bytes"] - before["dblwr_written_bytes"];
    }

    /// Transfers ran, recovery had work, and most failpoints fired (a cycle
    /// too short for its failpoint is unplugged instead).
    pub fn assert_ran(&self) {
        assert!(
            self.acked as u64 > 20 * self.cycles,
            "too few transfers ran: {self:?}"
        );
        assert!(self.replayed > 0, "recovery never had work to do: {self:?}");
        assert!(
            self.snapshot_reads > 0,
            "the readers finished no snapshot read: {self:?}"
        );
        assert!(
            self.fired * 4 >= self.armed * 3,
            "fewer than 3 in 4 failpoints fired: {self:?}"
        );
    }

    /// The page cleaners wrote batches during the runs, besides the
    /// writers' own single-page flushes: the pressure is real.
    pub fn assert_cleaners_flushed(&self) {
        let batches: u64 = [
            "buffer_LRU_batch_flush_total_pages",
            "buffer_flush_adaptive_total_pages",
            "buffer_flush_sync_total_pages",
            "buffer_flush_background_total_pages",
        ]
        .iter()
        .map(|k| self.write_back[k])
        .sum();
        assert!(batches > 0, "the page cleaners wrote nothing: {self:?}");
    }
}

/// `default` cycles, or `KEEL_POWER_LOSS_CYCLES`.
pub fn cycles(default: u64) -> u64 {
    std::env::var("KEEL_POWER_LOSS_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Where the cycles run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifetime {
    /// One database lives through every cycle; acknowledged transactions
    /// accumulate and are all audited after every recovery.
    Persistent,
    /// Each cycle creates a new database (on a new device).
    FreshEachCycle,
}

/// Run `cycles` crash/recover cycles of the bank (persistent database),
/// each crashing as `crash` says. Panics naming the scenario, seed and
/// cycle at the first failure.
pub fn run(scenario: &str, cycles: u64, crash: impl Fn(&mut SmallRng) -> Crash) -> Totals {
    run_in_mode(scenario, cycles, DoublewriteMode::On, crash)
}

/// [`run`] with doublewrite `mode` (and page compression, given a
/// [`Setup`]); under `atomic` the device promises untorn writes of a page
/// (`FaultyFs::set_atomic_write_unit`).
pub fn run_in_mode(
    scenario: &str,
    cycles: u64,
    mode: impl Into<Setup>,
    crash: impl Fn(&mut SmallRng) -> Crash,
) -> Totals {
    let bank = Arc::new(BANK);
    run_workload_in_mode(
        scenario,
        cycles,
        Lifetime::Persistent,
        bank,
        None,
        mode,
        crash,
    )
}

/// [`run`] on a slow device: `slow` (e.g. `/data-.write:delay=100us`) is
/// armed for every cycle's run.
pub fn run_slowed(
    scenario: &str,
    cycles: u64,
    slow: &str,
    crash: impl Fn(&mut SmallRng) -> Crash,
) -> Totals {
    let bank = Arc::new(BANK);
    run_workload(
        scenario,
        cycles,
        Lifetime::Persistent,
        bank,
        Some(slow),
        crash,
    )
}

/// How a scenario's database writes its pages: the doublewrite mode and
/// the page compression (a `DoublewriteMode` alone is that mode, pages
/// written whole).
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    pub mode: DoublewriteMode,
    pub compression: PageCompression,
}

impl From<DoublewriteMode> for Setup {
    fn from(mode: DoublewriteMode) -> Setup {
        Setup {
            mode,
            compression: PageCompression::None,
        }
    }
}

impl Setup {
    fn opts(self, seed: u64) -> Options {
        Options {
            page_compression: self.compression,
            ..opts_in_mode(seed, self.mode)
        }
    }
}

/// Database, device and acknowledgements of the cycles.
struct Bed {
    dir: tempfile::TempDir,
    fs: Arc<FaultyFs>,
    /// None only while the crashed engine is replaced by the recovered one.
    db: Option<Db>,
    acked: Arc<Mutex<Vec<u64>>>,
    setup: Setup,
}

impl Bed {
    fn new(seed: u64, workload: &dyn Workload, setup: Setup) -> Bed {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFs::new());
        if setup.mode == DoublewriteMode::Atomic {
            fs.set_atomic_write_unit(Some(PAGE_SIZE));
        }
        let db = Db::open_with_fs(dir.path(), setup.opts(seed), Some(fs.clone())).unwrap();
        workload.setup(&db);
        Bed {
            dir,
            fs,
            db: Some(db),
            acked: Arc::default(),
            setup,
        }
    }

    fn opts(&self, seed: u64) -> Options {
        self.setup.opts(seed)
    }

    fn db(&self) -> &Db {
        self.db.as_ref().unwrap()
    }
}

/// [`run`] with any workload and database lifetime.
pub fn run_workload<W: Workload>(
    scenario: &str,
    cycles: u64,
    lifetime: Lifetime,
    workload: Arc<W>,
    slow: Option<&str>,
    crash: impl Fn(&mut SmallRng) -> Crash,
) -> Totals {
    run_workload_in_mode(
        scenario,
        cycles,
        lifetime,
        workload,
        slow,
        DoublewriteMode::On,
        crash,
    )
}

/// [`run_workload`] with doublewrite `mode`.
pub fn run_workload_in_mode<W: Workload>(
    scenario: &str,
    cycles: u64,
    lifetime: Lifetime,
    workload: Arc<W>,
    slow: Option<&str>,
    setup: impl Into<Setup>,
    crash: impl Fn(&mut SmallRng) -> Crash,
) -> Totals {
    let seed = super::seed(scenario);
    let mut rng = SmallRng::seed_from_u64(seed);
    let setup = setup.into();
    let mut bed = Bed::new(seed, &*workload, setup);
    let mut totals = Totals::default();
    for cycle in 0..cycles {
        if lifetime == Lifetime::FreshEachCycle && cycle > 0 {
            bed.db.take().unwrap().close().unwrap();
            bed = Bed::new(seed ^ cycle, &*workload, setup);
        }
        let plan = crash(&mut rng);
        let before = bed.db().metrics().snapshot();
        let crashes_before = bed.fs.crash_reports().len();
        let (outcome, reads) = power_loss(&bed, &workload, &plan, slow, seed, cycle, &mut rng);
        totals.count_run(&before, &bed.db().metrics().snapshot());
        totals.snapshot_reads += reads.done;
        if let Some(first) = reads.wrong.first() {
            panic!(
                "{scenario}: seed {seed} cycle {cycle}: {} of {} snapshot reads while the writers \
                 ran were wrong; the first: {first} (replay with KEEL_TEST_SEED={seed})",
                reads.wrong.len(),
                reads.done + reads.wrong.len() as u64
            );
        }
        let open_crash = match &plan {
            Crash::KillThenPowerLossInOpen { point, after, mode } => {
                Some((*point, rng.gen_range(after.clone()), *mode, rng.gen()))
            }
            _ => None,
        };
        if let Some((point, after, mode, crash_seed)) = open_crash {
            let fired = power_loss_in_open(&mut bed, seed ^ cycle, point, after, mode, crash_seed);
            totals.armed += 1;
            totals.fired += u64::from(fired);
        }
        for r in &bed.fs.crash_reports()[crashes_before..] {
            totals.writes_kept += r.writes_kept;
            totals.writes_lost += r.writes_lost;
            totals.writes_torn += r.writes_torn;
        }
        match recover(&mut bed, &*workload, seed ^ cycle, &mut totals) {
            Err(e) => panic!(
                "{scenario}: seed {seed} cycle {cycle}: after {plan:?}: {e} \
                 (replay with KEEL_TEST_SEED={seed})"
            ),
            Ok(Recovered::Open) => {}
            Ok(Recovered::TornDetected) => {
                // The database is refused for good: go on with a new one.
                totals.acked += std::mem::take(&mut *bed.acked.lock().unwrap()).len();
                bed = Bed::new(seed ^ cycle ^ (1 << 40), &*workload, setup);
            }
        }
        totals.armed += u64::from(outcome.is_some());
        match outcome {
            Some(Ok(())) => totals.fired += 1,
            Some(Err(matched)) => totals.unfired_matched.push(matched),
            None => {}
        }
        totals.cycles += 1;
        if lifetime == Lifetime::FreshEachCycle {
            totals.acked += std::mem::take(&mut *bed.acked.lock().unwrap()).len();
        }
    }
    totals.acked += bed.acked.lock().unwrap().len();
    eprintln!("{scenario}: {totals:?}");
    bed.db.take().unwrap().close().unwrap();
    totals
}

/// What the readers of one cycle found.
#[derive(Debug, Default)]
struct Reads {
    /// Reads that found what must hold.
    done: u64,
    /// What the others saw.
    wrong: Vec<String>,
}

/// Run the writers and readers until the power fails as `plan` says. For
/// a failpoint: `Ok` if it fired, else `Err(matching calls it saw)` (the
/// test unplugged); and what the readers found.
fn power_loss<W: Workload>(
    bed: &Bed,
    workload: &Arc<W>,
    plan: &Crash,
    slow: Option<&str>,
    seed: u64,
    cycle: u64,
    rng: &mut SmallRng,
) -> (Option<Result<(), u64>>, Reads) {
    let crash_seed = rng.gen();
    let _slow = slow.map(|spec| bed.fs.arm(spec, 0).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let writers = spawn_writers(bed, workload, seed, cycle, &stop);
    let readers = spawn_readers(bed, workload, &stop);
    if cycle == 0 {
        // Most cycles crash within a fraction of a second, before the page
        // cleaners' next round (a second under `classic`); the first runs
        // long enough for their batches to be part of what crashes.
        std::thread::sleep(WARM_UP);
    }
    let trigger = match plan {
        Crash::Unplug(_) | Crash::KillThenPowerLossInOpen { .. } => None,
        Crash::At { point, after, mode } => {
            let spec = format!("{point}:{}", mode.action(crash_seed));
            Some(bed.fs.arm(&spec, rng.gen_range(after.clone())).unwrap())
        }
    };
    let outcome = match (plan, &trigger) {
        (Crash::Unplug(mode), _) => {
            std::thread::sleep(Duration::from_millis(rng.gen_range(SPELL_MS)));
            bed.fs.crash(mode.crash_mode(crash_seed));
            None
        }
        (Crash::KillThenPowerLossInOpen { .. }, _) => {
            std::thread::sleep(Duration::from_millis(rng.gen_range(SPELL_MS)));
            let _slowed = bed.fs.arm(KILL_SYNC_DELAY, 0).unwrap();
            std::thread::sleep(Duration::from_millis(rng.gen_range(2..10)));
            // The syncs in their delay fail once it ends: the handles died.
            bed.fs.kill_process();
            None
        }
        (Crash::At { mode, .. }, Some(t)) => {
            let fired = t.wait_fired(FAILPOINT_PATIENCE).map_err(|_| t.matched());
            if fired.is_err() {
                bed.fs.crash(mode.crash_mode(crash_seed));
            }
            Some(fired)
        }
        (Crash::At { .. }, None) => unreachable!("a failpoint crash arms a trigger"),
    };
    stop.store(true, Ordering::Release);
    // The process is dead from here on: nothing of it retries (a commit
    // whose page writes are held for retry would retry for minutes against
    // the dead device). `recover` drops the last handle as a crash.
    bed.db().clone().simulate_crash();
    for w in writers {
        w.join().unwrap();
    }
    let mut reads = Reads::default();
    for r in readers {
        let (done, wrong) = r.join().unwrap();
        reads.done += done;
        reads.wrong.extend(wrong);
    }
    bed.fs.disarm();
    (outcome, reads)
}

/// After a process crash: drop the dead engine and reopen, with the power
/// failing at `point` (after `after` matching calls) during the open, or
/// right after it if the open ends first. True if the failpoint fired. An
/// engine the open returned is left for [`recover`] to drop as a crash.
fn power_loss_in_open(
    bed: &mut Bed,
    seed: u64,
    point: &str,
    after: u64,
    mode: Mode,
    crash_seed: u64,
) -> bool {
    bed.db.take().unwrap().simulate_crash();
    let spec = format!("{point}:{}", mode.action(crash_seed));
    let trigger = bed.fs.arm(&spec, after).unwrap();
    let opened = Db::open_with_fs(bed.dir.path(), bed.opts(seed), Some(bed.fs.clone()));
    let fired = trigger.fired() > 0;
    bed.fs.disarm();
    match opened {
        Ok(db) => {
            if !fired {
                bed.fs.crash(mode.crash_mode(crash_seed));
            }
            bed.db = Some(db);
        }
        Err(e) => assert!(fired, "the open after a process crash failed: {e}"),
    }
    fired
}

/// How a recovery ended.
enum Recovered {
    /// Opened and audited clean.
    Open,
    /// Refused, rightly, naming a torn page (`detect_only`).
    TornDetected,
}

/// Drop the crashed engine, reopen, and audit. Every page the crash left
/// torn must have been repaired: it was being written in place, so its
/// doublewrite copy was still there. Under `detect_only` a crash that tore
/// a page must fail the open instead, naming one of the torn pages; under
/// `atomic` no page may be torn, and no doublewrite file may exist.
fn recover(
    bed: &mut Bed,
    workload: &dyn Workload,
    seed: u64,
    totals: &mut Totals,
) -> Result<Recovered, String> {
    if let Some(db) = bed.db.take() {
        db.simulate_crash();
    }
    let torn_ids = torn_pages(&bed.fs, bed.dir.path());
    let torn = torn_ids.len() as u64;
    totals.torn_in_image += torn;
    if bed.setup.mode == DoublewriteMode::Atomic {
        if torn > 0 {
            return Err(format!(
                "the crash tore {torn} pages ({torn_ids:?}) of a device that promises untorn \
                 page writes"
            ));
        }
        if bed.fs.exists(&bed.dir.path().join("dblwr-0.keel")) {
            return Err("doublewrite = atomic left a doublewrite file".into());
        }
    }
    let opened = Db::open_with_fs(bed.dir.path(), bed.opts(seed), Some(bed.fs.clone()));
    if bed.setup.mode == DoublewriteMode::DetectOnly && torn > 0 {
        return match opened {
            Err(Error::TornPage { page, path, reason }) => {
                let named = (path.clone(), page);
                if !torn_ids.contains(&named) {
                    return Err(format!(
                        "the open named page {page} of {} torn, which the image shows intact; \
                         torn: {torn_ids:?}",
                        path.display()
                    ));
                }
                if !reason.contains("detect_only") {
                    return Err(format!("the error does not say why: {reason}"));
                }
                totals.torn_detected += 1;
                Ok(Recovered::TornDetected)
            }
            Err(e) => Err(format!("a torn page was reported as another error: {e}")),
            Ok(db) => {
                bed.db = Some(db);
                Err(format!(
                    "the crash tore {torn} pages ({torn_ids:?}), and detect_only opened the \
                     database anyway"
                ))
            }
        };
    }
    let db = opened.map_err(|e| format!("reopen failed: {e}"))?;
    let m = db.metrics();
    let repaired = m.get("recovery_torn_pages_repaired").unwrap();
    totals.torn_repaired += repaired;
    totals.replayed += m.get("recovery_page_records_applied").unwrap();
    let acked = bed.acked.lock().unwrap().clone();
    let audit = workload.audit(&db, &acked);
    bed.db = Some(db);
    audit?;
    if repaired < torn {
        return Err(format!(
            "the crash tore {torn} pages, recovery repaired {repaired}"
        ));
    }
    Ok(Recovered::Open)
}

fn spawn_writers<W: Workload>(
    bed: &Bed,
    workload: &Arc<W>,
    seed: u64,
    cycle: u64,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..WRITERS)
        .map(|t| {
            let (d, stop, acked) = (bed.db().clone(), stop.clone(), bed.acked.clone());
            let workload = workload.clone();
            let mut rng = SmallRng::seed_from_u64(seed ^ (cycle << 8) ^ t);
            std::thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Acquire) {
                    let id = (cycle << 32) | (t << 24) | n;
                    match workload.step(&d, &mut rng, id) {
                        Ok(true) => {
                            acked.lock().unwrap().push(id);
                            n += 1;
                        }
                        Ok(false) => {}
                        Err(_) => break, // the device is gone
                    }
                }
            })
        })
        .collect()
}

/// [`READERS`] threads reading in one snapshot until `stop` or an engine
/// error (the device is gone); each returns its good reads and what its
/// wrong ones saw.
fn spawn_readers<W: Workload>(
    bed: &Bed,
    workload: &Arc<W>,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<(u64, Vec<String>)>> {
    (0..READERS)
        .map(|r| {
            let (d, stop, workload) = (bed.db().clone(), stop.clone(), workload.clone());
            std::thread::spawn(move || {
                let (mut done, mut wrong) = (0, Vec::new());
                while !stop.load(Ordering::Acquire) {
                    match workload.read_check(&d, r) {
                        Ok(None) => done += 1,
                        Ok(Some(seen)) => wrong.push(seen),
                        Err(_) => break, // the device is gone
                    }
                    std::thread::sleep(READ_PAUSE);
                }
                (done, wrong)
            })
        })
        .collect()
}

/// Pages of the data files' durable images that are neither blank nor
/// valid: what a torn write leaves for the doublewrite repair. Each as
/// (data file, page id), the page number found from where it lies (the
/// files stripe extents round robin, after one header block each).
fn torn_pages(fs: &FaultyFs, dir: &std::path::Path) -> Vec<(std::path::PathBuf, PageId)> {
    let n_files = (0..)
        .take_while(|i| fs.exists(&dir.join(format!("data-{i}.keel"))))
        .count() as u32;
    let mut torn = Vec::new();
    for i in 0..n_files {
        let path = dir.join(format!("data-{i}.keel"));
        let Some(image) = fs.durable_image(&path) else {
            break;
        };
        for (j, page) in image.chunks_exact(PAGE_SIZE).skip(1).enumerate() {
            let j = j as u32;
            let extent = (j / EXTENT_PAGES) * n_files + i;
            let id = PageId::new(0, extent * EXTENT_PAGES + j % EXTENT_PAGES);
            let mut decoded;
            let page = if compress::is_compressed(page) {
                decoded = page.to_vec();
                if compress::decode(&mut decoded).is_err() {
                    torn.push((path.clone(), id));
                    continue;
                }
                &decoded[..]
            } else {
                page
            };
            match verify_page(page, id) {
                Ok(()) | Err(PageCheckError::AllZero) => {}
                Err(_) => torn.push((path.clone(), id)),
            }
        }
    }
    torn
}
