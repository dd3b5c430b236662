//! `keel crashtest`: the crash loop with real processes. A child process
//! runs the bank-transfer workload (`keel_bench::bank`) on several threads
//! with `flush_log_at_trx_commit = 1` and prints `ACK <id>` for every
//! transfer whose commit returned; the parent kills it with SIGKILL at a
//! random moment, reopens the database (crash recovery), checks that the
//! total balance is unchanged and that every acknowledged transfer is
//! there, closes it, and starts the next cycle.
//!
//! Reader threads in the child (`--readers`) sum every balance in one
//! snapshot while the transfers run: half of them in a REPEATABLE-READ
//! transaction (its scans of both tables see one snapshot, so the sum must
//! be the total), half with plain `Table::range` calls (one snapshot each:
//! every account of a table, no balance above the total). Each check
//! prints `READ`, or `BAD <what it saw>` when it found a wrong total; any
//! `BAD` line fails the cycle with what was seen and expected. After each
//! recovery the total is checked in a REPEATABLE-READ snapshot too.
//!
//! Layout of the work directory: `db/` is the database, `crash-image/` a
//! copy of it taken after the kill and before recovery (kept on failure, so
//! the recovery that failed can be replayed).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use clap::Args;
use keel::{Db, Options};
use keel_bench::bank::{self, Bank, TransferId};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::engine_args::EngineArgs;

/// Transfer ids of one cycle start at `cycle × CYCLE_IDS`.
const CYCLE_IDS: u64 = 1_000_000_000;
/// Each child thread numbers its transfers from `base + thread × THREAD_IDS`.
const THREAD_IDS: u64 = 10_000_000;
/// Most child threads the id scheme allows.
const MAX_THREADS: usize = (CYCLE_IDS / THREAD_IDS) as usize - 1;
/// Bytes of the child's stderr kept for an error message.
const STDERR_KEPT: usize = 16 << 10;
/// How often the parent looks whether the child died on its own.
const POLL: Duration = Duration::from_millis(5);

/// Kill a process running bank transfers at random moments and check after
/// every recovery that no money appeared or vanished and that no
/// acknowledged transfer was lost.
#[derive(Args, Debug, Clone)]
#[command(mut_arg("sets", |a| a.help(
    "Set one engine option, e.g. --set buffer_pool_size=4MiB (repeatable). \
     flush_log_at_trx_commit is always 1",
)))]
pub struct CrashtestArgs {
    /// Kill-and-recover cycles.
    #[arg(long, default_value_t = 20)]
    pub cycles: u64,
    /// Threads running transfers in the child.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Threads in the child that check, while the transfers run, that every
    /// balance sums to the total in one snapshot (half in a REPEATABLE-READ
    /// transaction, half with plain Table::range calls); 0 for none.
    #[arg(long, default_value_t = 2)]
    pub readers: usize,
    /// Accounts, split over the tables bank_a and bank_b.
    #[arg(long, default_value_t = 200)]
    pub accounts: u64,
    /// Shortest delay between starting the child and killing it, in ms.
    #[arg(long, default_value_t = 50)]
    pub min_ms: u64,
    /// Longest delay between starting the child and killing it, in ms.
    #[arg(long, default_value_t = 400)]
    pub max_ms: u64,
    /// Work directory (the database goes in DIR/db); default: a temporary
    /// directory, removed after a pass and kept after a failure.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Random seed for the kill delays and the transfers (default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    // Passed on to the child.
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// The child side of `keel crashtest` (started by the parent, not by hand).
#[derive(Args, Debug, Clone)]
pub struct ChildArgs {
    /// Database directory, prepared by the parent.
    #[arg(long)]
    pub dir: PathBuf,
    /// Accounts in the bank.
    #[arg(long)]
    pub accounts: u64,
    /// Transfer threads.
    #[arg(long)]
    pub threads: usize,
    /// Snapshot reader threads.
    #[arg(long, default_value_t = 0)]
    pub readers: usize,
    /// Random seed of this child.
    #[arg(long)]
    pub seed: u64,
    /// First transfer id of this child.
    #[arg(long)]
    pub base_id: u64,
    // As the parent was given them.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Stop on its own after this many seconds (in case the parent is gone).
    #[arg(long, default_value_t = 600)]
    pub max_secs: u64,
}

/// The engine options, which must keep `flush_log_at_trx_commit = 1`.
fn options(engine: &EngineArgs) -> Result<Options> {
    let o = engine.options()?;
    ensure!(
        o.flush_log_at_trx_commit == 1,
        "crashtest needs flush_log_at_trx_commit=1 (every acknowledged commit durable)"
    );
    Ok(o)
}

/// `keel crashtest`: the parent, re-running this executable as the child.
pub fn run(args: CrashtestArgs) -> Result<()> {
    let exe = std::env::current_exe().context("finding the keel executable")?;
    run_with_exe(&exe, &["crashtest-child"], &args)
}

/// The parent: `exe` followed by `child_args_prefix` must start [`child`]
/// (tests can point it at any binary that does).
pub fn run_with_exe(exe: &Path, child_args_prefix: &[&str], args: &CrashtestArgs) -> Result<()> {
    check_args(args)?;
    let opts = options(&args.engine)?;
    let seed = args.seed.unwrap_or_else(clock_seed);
    let (work, tmp) = work_dir(args)?;
    let db_dir = work.join("db");
    println!(
        "keel crashtest: {} cycles, {} threads, {} snapshot readers, {} accounts, kill after {}..={} ms, seed {seed}, dir {}",
        args.cycles,
        args.threads,
        args.readers,
        args.accounts,
        args.min_ms,
        args.max_ms,
        work.display()
    );
    let parent = Parent {
        exe,
        prefix: child_args_prefix,
        args,
        opts,
        seed,
        db_dir,
        image_dir: work.join("crash-image"),
    };
    match parent.run_cycles() {
        Ok(()) => {
            if let Some(t) = tmp {
                t.close().context("removing the work directory")?;
            }
            Ok(())
        }
        Err(e) => {
            if let Some(t) = tmp {
                // Keep the evidence.
                let _ = t.keep();
            }
            Err(e.context(format!(
                "crashtest FAILED (seed {seed}); database in {}, copy taken before recovery in {}",
                work.join("db").display(),
                work.join("crash-image").display()
            )))
        }
    }
}

fn check_args(args: &CrashtestArgs) -> Result<()> {
    ensure!(args.cycles >= 1, "--cycles must be at least 1");
    ensure!(
        (1..=MAX_THREADS).contains(&args.threads),
        "--threads must be between 1 and {MAX_THREADS}"
    );
    ensure!(args.accounts >= 2, "--accounts must be at least 2");
    ensure!(
        args.readers <= MAX_THREADS,
        "--readers must be at most {MAX_THREADS}"
    );
    ensure!(
        args.min_ms <= args.max_ms,
        "--min-ms must not exceed --max-ms"
    );
    ensure!(
        args.cycles < u64::MAX / CYCLE_IDS,
        "--cycles is too large for the transfer id scheme"
    );
    Ok(())
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        ^ u64::from(std::process::id())
}

fn work_dir(args: &CrashtestArgs) -> Result<(PathBuf, Option<tempfile::TempDir>)> {
    match &args.dir {
        Some(d) => {
            ensure!(
                !d.join("db").exists(),
                "{} already exists; give an empty or new --dir",
                d.join("db").display()
            );
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
            Ok((d.clone(), None))
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("keel-crashtest-")
                .tempdir()
                .context("creating a temporary directory")?;
            Ok((t.path().to_path_buf(), Some(t)))
        }
    }
}

struct Parent<'a> {
    exe: &'a Path,
    prefix: &'a [&'a str],
    args: &'a CrashtestArgs,
    opts: Options,
    seed: u64,
    db_dir: PathBuf,
    image_dir: PathBuf,
}

/// What one cycle saw.
struct Cycle {
    killed_after_ms: u128,
    acked: Vec<TransferId>,
    /// Snapshot checks the child's readers finished.
    reads: u64,
    /// What the readers saw that was wrong (one line each).
    bad: Vec<String>,
}

/// What the child printed before it was killed.
#[derive(Default)]
struct ChildLines {
    acked: Vec<TransferId>,
    reads: u64,
    bad: Vec<String>,
}

impl Parent<'_> {
    fn run_cycles(&self) -> Result<()> {
        let started = Instant::now();
        let db = Db::open(&self.db_dir, self.opts.clone())
            .with_context(|| format!("creating {}", self.db_dir.display()))?;
        bank::setup(&db, self.args.accounts).context("setting up the bank")?;
        db.close()?;
        let mut rng = SmallRng::seed_from_u64(self.seed);
        let mut acked: Vec<TransferId> = Vec::new();
        let mut reads = 0u64;
        for cycle in 1..=self.args.cycles {
            let c = self
                .kill_child(cycle, &mut rng)
                .with_context(|| format!("cycle {cycle}: child process"))?;
            let new = c.acked.len();
            acked.extend(c.acked);
            reads += c.reads;
            self.recover_and_verify(cycle, c.killed_after_ms, new, c.reads, &acked)
                .with_context(|| format!("cycle {cycle} of {}", self.args.cycles))?;
            if let Some(first) = c.bad.first() {
                bail!(
                    "cycle {cycle} of {}: {} of {} snapshot reads during the transfers saw a \
                     wrong total (expected {}); the first: {first}",
                    self.args.cycles,
                    c.bad.len(),
                    c.reads + c.bad.len() as u64,
                    u128::from(self.args.accounts) * u128::from(bank::INITIAL_BALANCE),
                );
            }
        }
        ensure!(
            !acked.is_empty(),
            "the child never acknowledged a transfer: raise --max-ms"
        );
        println!(
            "crashtest passed: {} cycles, {} acknowledged transfers, all present, {reads} snapshot reads right, in {:.1} s (seed {})",
            self.args.cycles,
            acked.len(),
            started.elapsed().as_secs_f64(),
            self.seed
        );
        Ok(())
    }

    fn spawn_child(&self, cycle: u64, child_seed: u64) -> Result<Child> {
        let mut cmd = Command::new(self.exe);
        cmd.args(self.prefix)
            .arg("--dir")
            .arg(&self.db_dir)
            .args(["--accounts", &self.args.accounts.to_string()])
            .args(["--threads", &self.args.threads.to_string()])
            .args(["--readers", &self.args.readers.to_string()])
            .args(["--seed", &child_seed.to_string()])
            .args(["--base-id", &(cycle * CYCLE_IDS).to_string()])
            .args(self.args.engine.to_args());
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {}", self.exe.display()))
    }

    /// Start the child, let it run for a random time, SIGKILL it, and
    /// collect every ACK line it finished writing.
    fn kill_child(&self, cycle: u64, rng: &mut SmallRng) -> Result<Cycle> {
        let delay = Duration::from_millis(rng.gen_range(self.args.min_ms..=self.args.max_ms));
        let child_seed: u64 = rng.gen();
        let started = Instant::now();
        let mut child = self.spawn_child(cycle, child_seed)?;
        let out = child
            .stdout
            .take()
            .context("no pipe for the child's stdout")?;
        let err = child
            .stderr
            .take()
            .context("no pipe for the child's stderr")?;
        let acks = std::thread::spawn(|| read_acks(out));
        let errs = std::thread::spawn(|| read_tail(err));
        let mut early = None;
        while started.elapsed() < delay {
            if let Some(status) = child.try_wait()? {
                early = Some(status);
                break;
            }
            std::thread::sleep(POLL.min(delay.saturating_sub(started.elapsed())));
        }
        let killed_after_ms = started.elapsed().as_millis();
        if early.is_none() {
            child.kill().context("sending SIGKILL")?;
        }
        let status = child.wait()?;
        let lines = join(acks)?;
        let stderr = join(errs)?;
        if !killed_by_sigkill(&status) {
            bail!(
                "child ended on its own ({status}) after {killed_after_ms} ms; its stderr:\n{}",
                String::from_utf8_lossy(&stderr)
            );
        }
        let lines = lines
            .with_context(|| format!("child stderr:\n{}", String::from_utf8_lossy(&stderr)))?;
        Ok(Cycle {
            killed_after_ms,
            acked: lines.acked,
            reads: lines.reads,
            bad: lines.bad,
        })
    }

    fn recover_and_verify(
        &self,
        cycle: u64,
        killed_after_ms: u128,
        new_acks: usize,
        reads: u64,
        acked: &[TransferId],
    ) -> Result<()> {
        copy_dir(&self.db_dir, &self.image_dir).context("copying the crash image")?;
        let t0 = Instant::now();
        let db = Db::open(&self.db_dir, self.opts.clone()).context("reopening (recovery)")?;
        let open_ms = t0.elapsed().as_millis();
        let m = db.metrics();
        let metric = |n: &str| m.get(n).unwrap_or(0);
        let report = bank::verify(&db, self.args.accounts, acked).context("verifying")?;
        println!(
            "cycle {cycle:>5}/{}: killed after {killed_after_ms:>4} ms, {new_acks:>5} acked ({} in all), {reads} snapshot reads, {} transfers in log; recovery {} ms (open {open_ms} ms), {} page records applied, {} txns reapplied, {} rolled back",
            self.args.cycles,
            acked.len(),
            report.transfers,
            metric("recovery_time_ms"),
            metric("recovery_page_records_applied"),
            metric("recovery_txns_reapplied"),
            metric("recovery_txns_rolled_back"),
        );
        if !report.ok() {
            // Leave the database as recovery left it, without a clean close.
            db.simulate_crash();
            bail!("verify failed: {report}");
        }
        db.close().context("closing after verify")?;
        Ok(())
    }
}

/// Every line the child finished: `ACK <id>` for a transfer, `READ` for
/// a snapshot check that found the total, `BAD <what>` for one that did
/// not. A line cut by the kill (no newline) is ignored: that transfer was
/// not acknowledged.
fn read_acks(out: impl Read) -> Result<ChildLines> {
    let mut r = BufReader::new(out);
    let mut lines = ChildLines::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        if r.read_until(b'\n', &mut line)? == 0 || line.last() != Some(&b'\n') {
            return Ok(lines);
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        if text == "READ" {
            lines.reads += 1;
        } else if let Some(what) = text.strip_prefix("BAD ") {
            lines.bad.push(what.to_string());
        } else {
            let id = text
                .strip_prefix("ACK ")
                .and_then(|s| s.parse::<TransferId>().ok())
                .with_context(|| format!("unexpected line from the child: {text:?}"))?;
            lines.acked.push(id);
        }
    }
}

/// The last `STDERR_KEPT` bytes of the child's stderr.
fn read_tail(mut err: impl Read) -> Vec<u8> {
    let mut tail = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = err.read(&mut buf) {
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 2 * STDERR_KEPT {
            tail.drain(..tail.len() - STDERR_KEPT);
        }
    }
    tail
}

fn join<T>(h: JoinHandle<T>) -> Result<T> {
    h.join()
        .map_err(|_| anyhow::anyhow!("a reader thread panicked"))
}

#[cfg(unix)]
fn killed_by_sigkill(status: &std::process::ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(9)
}

#[cfg(not(unix))]
fn killed_by_sigkill(status: &std::process::ExitStatus) -> bool {
    !status.success()
}

/// Replace `to` with a copy of the directory tree `from`.
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    if to.exists() {
        std::fs::remove_dir_all(to)?;
    }
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &dest)?;
        } else {
            std::fs::copy(entry.path(), dest)?;
        }
    }
    Ok(())
}

/// `keel crashtest-child`: run transfers on `threads` threads until killed,
/// printing `ACK <id>` (flushed) after each commit that returned `Ok`, and
/// snapshot checks on `readers` threads, printing `READ` or `BAD <what>`
/// after each.
pub fn child(args: ChildArgs) -> Result<()> {
    ensure!(
        (1..=MAX_THREADS).contains(&args.threads),
        "--threads must be between 1 and {MAX_THREADS}"
    );
    let opts = options(&args.engine)?;
    let db =
        Db::open(&args.dir, opts).with_context(|| format!("opening {}", args.dir.display()))?;
    let bank = Bank::open(&db, args.accounts)?;
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_secs(args.max_secs);
    let r = std::thread::scope(|s| -> Result<()> {
        let hs: Vec<_> = (0..args.threads as u64)
            .map(|t| {
                let (bank, stop) = (&bank, &stop);
                let first = args.base_id + t * THREAD_IDS;
                let seed = args.seed ^ t.wrapping_mul(0x9e37_79b9_7f4a_7c15);
                s.spawn(move || {
                    let r = transfer_loop(bank, seed, first, stop, deadline);
                    stop.store(true, Ordering::Relaxed);
                    r
                })
            })
            .collect();
        let rs: Vec<_> = (0..args.readers)
            .map(|r| {
                let (bank, stop) = (&bank, &stop);
                s.spawn(move || read_loop(bank, r % 2 == 0, stop, deadline))
            })
            .collect();
        for h in hs {
            h.join()
                .map_err(|_| anyhow::anyhow!("a transfer thread panicked"))??;
        }
        for h in rs {
            h.join()
                .map_err(|_| anyhow::anyhow!("a reader thread panicked"))??;
        }
        Ok(())
    });
    drop(bank);
    db.close()?;
    r
}

/// Pause between two snapshot checks of one reader, so that the readers
/// take a share of the cores and do not starve the transfers.
const READ_PAUSE: Duration = Duration::from_millis(2);

/// Check snapshots until `stop` or `deadline`: in a REPEATABLE-READ
/// transaction (`snapshot`) or with plain `Table::range` calls.
fn read_loop(bank: &Bank, snapshot: bool, stop: &AtomicBool, deadline: Instant) -> Result<()> {
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let found = if snapshot {
            bank.check_snapshot_total()
        } else {
            bank.check_plain_ranges()
        }
        .context("snapshot read")?;
        let line = match found {
            None => "READ\n".to_string(),
            Some(what) => format!("BAD {}\n", what.replace('\n', " ")),
        };
        let mut out = std::io::stdout().lock();
        out.write_all(line.as_bytes())?;
        out.flush()?;
        drop(out);
        std::thread::sleep(READ_PAUSE);
    }
    Ok(())
}

fn transfer_loop(
    bank: &Bank,
    seed: u64,
    first: TransferId,
    stop: &AtomicBool,
    deadline: Instant,
) -> Result<()> {
    let mut rng = SmallRng::seed_from_u64(seed);
    for id in first..first + THREAD_IDS {
        if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
            return Ok(());
        }
        let t = bank
            .transfer(&mut rng, id)
            .with_context(|| format!("transfer {id}"))?;
        // One write of a whole line, so a kill cuts at most this line.
        let line = format!("ACK {}\n", t.id);
        let mut out = std::io::stdout().lock();
        out.write_all(line.as_bytes())?;
        out.flush()?;
    }
    bail!("thread ran out of transfer ids ({THREAD_IDS} per thread and cycle)")
}
