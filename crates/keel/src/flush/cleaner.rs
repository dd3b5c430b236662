//! Page-cleaner threads. Cleaner `c` serves the instances `i` with
//! `i % page_cleaners == c`, so instances are flushed in parallel rather than
//! one after another (the seeds show sequential instance flushing leaving the
//! globally oldest page unflushed).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::policy::{FlushPolicy, InstanceSnapshot, Snapshot};
use crate::buffer::flush::FlushKind;
use crate::buffer::BufferPool;
use crate::metrics::Metrics;

/// What a cleaner needs from the engine.
pub trait CleanerHost: Send + Sync + 'static {
    /// The buffer pool to flush.
    fn pool(&self) -> &BufferPool;
    /// The current LSN.
    fn current_lsn(&self) -> crate::Lsn;
    /// Option values the policy reads.
    fn lru_scan_depth(&self) -> usize;
    /// Option `max_dirty_pages_pct`.
    fn max_dirty_pages_pct(&self) -> f64;
    /// Periodic engine work done by the first cleaner after each round
    /// (background log flush, checkpoint).
    fn tick(&self) -> crate::error::Result<()>;
}

/// The running cleaner threads.
pub struct Cleaners {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Cleaners {
    /// Start `n` cleaners, each with its own policy instance.
    pub fn start<H: CleanerHost>(
        host: Arc<H>,
        n: usize,
        make_policy: impl Fn() -> Box<dyn FlushPolicy>,
    ) -> std::io::Result<Cleaners> {
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let mut threads = Vec::with_capacity(n);
        for c in 0..n {
            let host = host.clone();
            let stop = stop.clone();
            let mut policy = make_policy();
            let t = std::thread::Builder::new()
                .name(format!("keel-cleaner-{c}"))
                .spawn(move || run(&*host, c, n, &mut *policy, &stop, started))?;
            threads.push(t);
        }
        Ok(Cleaners { stop, threads })
    }

    /// Stop and join every cleaner.
    pub fn stop(&mut self, pool: &BufferPool) {
        self.stop.store(true, Ordering::Release);
        pool.wake_cleaners();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Take a snapshot of the whole engine.
pub fn snapshot<H: CleanerHost + ?Sized>(host: &H, started: Instant) -> Snapshot {
    let pool = host.pool();
    let instances = pool
        .instances
        .iter()
        .map(|i| {
            let (free, lru_len, dirty, oldest) = i.state();
            InstanceSnapshot {
                total: i.frames.len(),
                free,
                lru_len,
                dirty,
                oldest_modification: oldest,
            }
        })
        .collect();
    Snapshot {
        now: started.elapsed(),
        current_lsn: host.current_lsn(),
        instances,
        lru_scan_depth: host.lru_scan_depth(),
        max_dirty_pages_pct: host.max_dirty_pages_pct(),
    }
}

fn run<H: CleanerHost + ?Sized>(
    host: &H,
    me: usize,
    n: usize,
    policy: &mut dyn FlushPolicy,
    stop: &AtomicBool,
    started: Instant,
) {
    let pool = host.pool();
    let mut backoff = Duration::ZERO;
    while !stop.load(Ordering::Acquire) {
        let snap = snapshot(host, started);
        let targets = policy.decide(&snap);
        Metrics::add(&pool.metrics.buffer_flush_cleaner_rounds, 1);
        let mut failed = false;
        for (i, t) in targets.instances.iter().enumerate() {
            if i % n != me {
                continue;
            }
            if t.lru_want_free > 0 {
                if let Err(e) = pool.lru_flush(i, t.lru_scan, t.lru_want_free) {
                    log::error!("page cleaner {me}: LRU flush of instance {i} failed: {e}");
                    failed = true;
                }
            }
            if t.list_pages > 0 {
                if let Err(e) =
                    pool.flush_list_batch(i, t.list_pages, t.list_lsn_limit, FlushKind::List)
                {
                    log::error!("page cleaner {me}: flush-list batch of instance {i} failed: {e}");
                    failed = true;
                }
            }
        }
        if me == 0 {
            if let Err(e) = host.tick() {
                log::error!("page cleaner {me}: log flush or checkpoint failed: {e}");
                failed = true;
            }
        }
        // After an I/O error, retry with a growing pause rather than spin.
        backoff = if failed {
            (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1))
        } else {
            Duration::ZERO
        };
        let sleep = targets.sleep.max(backoff);
        let (m, c) = &pool.cleaner_wakeup;
        let mut g = m.lock();
        if !stop.load(Ordering::Acquire) {
            c.wait_for(&mut g, sleep);
        }
    }
}
