//! SEMAPHORES, LOG and BUFFER POOL AND MEMORY: their figures, read from
//! the metrics, and their text.

use std::fmt;

use super::{pct, section, Get, Rate, MIB};
use crate::config::{FlushPolicyName, Options};
use crate::engine::DoublewriteStatus;

/// The wait events the SEMAPHORES section shows, in its order: what the
/// report calls each, and the metric counting its waits (its time is in
/// the metric of the same name ending in `_ns`).
pub const WAIT_EVENTS: [(&str, &str); 9] = [
    ("page latches", "wait_page_latch"),
    ("page hash", "wait_page_hash_latch"),
    ("buffer pool lists", "wait_buf_pool_mutex"),
    ("flush lists", "wait_flush_list_mutex"),
    ("log append", "wait_log_append_mutex"),
    ("log write", "wait_log_write_mutex"),
    ("row-lock table", "wait_lock_sys_mutex"),
    ("read views", "wait_trx_sys_mutex"),
    ("rollback segments", "wait_rseg_mutex"),
];

/// One wait event: how often a latch or mutex was found held, and how
/// long the waits took (performance_schema's COUNT_STAR and
/// SUM_TIMER_WAIT).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaitEvent {
    /// What was waited for, as the report says it (`page latches`).
    pub name: &'static str,
    /// The metric counting the waits (`wait_page_latch`).
    pub metric: &'static str,
    /// Waits since the database was opened.
    pub waits: u64,
    /// Nanoseconds they took.
    pub waited_ns: u64,
    /// Waits and nanoseconds over the span of the report's rates
    /// ([`Status::with_rates`](super::Status::with_rates)), if it has any.
    pub recent: Option<(u64, u64)>,
}

/// SEMAPHORES: waits on latches and mutexes (requests that found them
/// held), as InnoDB's section counts its wait events.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Semaphores {
    /// The events of [`WAIT_EVENTS`], in its order.
    pub events: Vec<WaitEvent>,
}

impl Semaphores {
    pub(super) fn new(g: Get<'_>) -> Semaphores {
        let events = WAIT_EVENTS
            .iter()
            .map(|&(name, metric)| WaitEvent {
                name,
                metric,
                waits: g(metric),
                waited_ns: g(&format!("{metric}_ns")),
                recent: None,
            })
            .collect();
        Semaphores { events }
    }

    /// The waits over the last `secs` seconds, from the rates per second
    /// of their metrics.
    pub(super) fn set_rates(&mut self, rate: &dyn Fn(&str) -> f64, secs: f64) {
        for e in &mut self.events {
            let over = |n: &str| (rate(n) * secs).round() as u64;
            e.recent = Some((over(e.metric), over(&format!("{}_ns", e.metric))));
        }
    }

    pub(super) fn write(&self, f: &mut fmt::Formatter<'_>, over_s: Option<f64>) -> fmt::Result {
        section(f, "SEMAPHORES")?;
        let list = |each: &dyn Fn(&WaitEvent) -> String| {
            let items: Vec<String> = self
                .events
                .iter()
                .map(|e| format!("{} {}", e.name, each(e)))
                .collect();
            items.join(", ")
        };
        writeln!(
            f,
            "Waits (requests that found it held): {}",
            list(&|e| e.waits.to_string())
        )?;
        writeln!(
            f,
            "Time waited: {}",
            list(&|e| format!("{:.1} ms", e.waited_ns as f64 / 1e6))
        )?;
        let Some(secs) = over_s else {
            return Ok(());
        };
        // The events waited on since the rates' start, longest first: with
        // many threads, the first is where their time went.
        let mut recent: Vec<(&str, u64, u64)> = self
            .events
            .iter()
            .filter_map(|e| e.recent.map(|(n, ns)| (e.name, n, ns)))
            .filter(|&(_, n, _)| n > 0)
            .collect();
        recent.sort_by_key(|e| std::cmp::Reverse(e.2));
        let text = if recent.is_empty() {
            "no waits".to_string()
        } else {
            let items: Vec<String> = recent
                .iter()
                .map(|&(name, n, ns)| {
                    format!(
                        "{name} {:.3} s in {n} waits ({:.2} threads)",
                        ns as f64 / 1e9,
                        ns as f64 / 1e9 / secs.max(1e-9)
                    )
                })
                .collect();
            items.join(", ")
        };
        writeln!(f, "Waited over the last {secs:.1} s: {text}")
    }
}

/// One mark the checkpoint age is measured against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogMark {
    /// What it is, e.g. `sync (max_modified_age_sync)`.
    pub name: &'static str,
    /// Where it lies, in bytes of checkpoint age.
    pub bytes: u64,
}

/// LOG: positions, the checkpoint age against every mark of the flushing
/// policy in use (`classic`: async and sync; `steady`: freerun, setpoint
/// and hard level; both: the free-check limit and the capacity).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogStatus {
    /// The log sequence number (`log_lsn_current`).
    pub lsn: u64,
    /// Log flushed (synced) up to (`log_lsn_last_flush`).
    pub flushed_lsn: u64,
    /// The last checkpoint (`log_lsn_last_checkpoint`).
    pub checkpoint_lsn: u64,
    /// LSN minus the last checkpoint, in bytes.
    pub checkpoint_age_bytes: u64,
    /// The log's capacity, in bytes.
    pub capacity_bytes: u64,
    /// The marks, lowest first.
    pub marks: Vec<LogMark>,
    /// Where the age stands among the marks, in words.
    pub age_state: &'static str,
    /// Log writes.
    pub writes: u64,
    /// Bytes written to the log.
    pub bytes_written: u64,
    /// Log syncs.
    pub syncs: u64,
    /// Checkpoints taken.
    pub checkpoints: u64,
    /// Of those, the ones whose slot a log sync round made durable (no
    /// sync of their own).
    pub checkpoints_in_round: u64,
}

const FREE_CHECK: &str = "free-check limit (writers stop)";
const PAST_LIMIT: &str = "past the free-check limit: writers stop until the checkpoint advances";

impl LogStatus {
    pub(super) fn new(o: &Options, g: Get<'_>) -> LogStatus {
        let (age, cap) = (g("log_lsn_checkpoint_age"), g("log_capacity"));
        let limit = g("log_free_check_limit");
        let (async_mark, sync_mark) = (
            g("log_max_modified_age_async"),
            g("log_max_modified_age_sync"),
        );
        let (freerun, setpoint, hard) = (
            g("steady_freerun"),
            g("steady_setpoint"),
            g("steady_hard_limit"),
        );
        let mark = |name, bytes| LogMark { name, bytes };
        let (marks, age_state) = if o.flush_policy == FlushPolicyName::Steady {
            let state = if setpoint == 0 {
                "unknown (steady has not run a round yet)"
            } else if age >= limit {
                PAST_LIMIT
            } else if age >= hard {
                "at the hard level: writers are held until the flusher catches up"
            } else if age > setpoint {
                "above the setpoint: writers slowed, the flusher catching up"
            } else if age > freerun {
                "between the freerun level and the setpoint: writers slowed a little"
            } else {
                "below the freerun level: writers run free"
            };
            let marks = vec![
                mark("freerun F (writers slowed above)", freerun),
                mark("setpoint S (steady holds the age)", setpoint),
                mark("hard level H (writers held to 0)", hard),
                mark(FREE_CHECK, limit),
                mark("log capacity", cap),
            ];
            (marks, state)
        } else {
            let state = if sync_mark == 0 {
                "unknown (no marks yet)"
            } else if age >= limit {
                PAST_LIMIT
            } else if age >= sync_mark {
                "past the sync mark: sync flushing"
            } else if age >= async_mark {
                "past the async mark: async flushing"
            } else {
                "below the async mark"
            };
            let marks = vec![
                mark("async (max_modified_age_async)", async_mark),
                mark("sync (max_modified_age_sync)", sync_mark),
                mark(FREE_CHECK, limit),
                mark("log capacity", cap),
            ];
            (marks, state)
        };
        LogStatus {
            lsn: g("log_lsn_current"),
            flushed_lsn: g("log_lsn_last_flush"),
            checkpoint_lsn: g("log_lsn_last_checkpoint"),
            checkpoint_age_bytes: age,
            capacity_bytes: cap,
            marks,
            age_state,
            writes: g("log_writes"),
            bytes_written: g("log_bytes_written"),
            syncs: g("os_log_fsyncs"),
            checkpoints: g("log_checkpoints"),
            checkpoints_in_round: g("log_checkpoints_in_round"),
        }
    }

    pub(super) fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        section(f, "LOG")?;
        let (age, cap) = (self.checkpoint_age_bytes, self.capacity_bytes);
        write!(
            f,
            "Log sequence number {}\nLog flushed up to   {}\nLast checkpoint at  {}\n\
             Checkpoint age      {age} bytes ({:.1} MiB), {:.1}% of the log capacity\n",
            self.lsn,
            self.flushed_lsn,
            self.checkpoint_lsn,
            age as f64 / MIB,
            pct(age, cap),
        )?;
        writeln!(
            f,
            "  {:<34} {:>12} {:>10} {:>8} {:>9}",
            "mark", "bytes", "MiB", "% of log", "age/mark"
        )?;
        for m in &self.marks {
            writeln!(
                f,
                "  {:<34} {:>12} {:>10.1} {:>7.1}% {:>8.1}%",
                m.name,
                m.bytes,
                m.bytes as f64 / MIB,
                pct(m.bytes, cap),
                pct(age, m.bytes),
            )?;
        }
        write!(
            f,
            "Checkpoint age is {}\n\
             {} log writes, {} bytes written, {} log syncs, {} checkpoints \
             ({} synced by a log sync round)\n",
            self.age_state,
            self.writes,
            self.bytes_written,
            self.syncs,
            self.checkpoints,
            self.checkpoints_in_round,
        )
    }
}

/// BUFFER POOL AND MEMORY: pages by state, pending writes, reads and
/// writes, the doublewrite mode and the hit rate.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferPoolStatus {
    /// Frames in the pool.
    pub pages_total: u64,
    /// Frames holding a page.
    pub pages_data: u64,
    /// Of those, changed since written.
    pub pages_dirty: u64,
    /// Free frames.
    pub pages_free: u64,
    /// Pages claimed for writing and not yet written, by kind.
    pub pending_writes_lru: u64,
    /// ... by the flush list.
    pub pending_writes_flush_list: u64,
    /// ... one page at a time by a user thread.
    pub pending_writes_single_page: u64,
    /// Pages read from the data files.
    pub pages_read: u64,
    /// Pages allocated in the data files.
    pub pages_created: u64,
    /// Pages written to the data files.
    pub pages_written: u64,
    /// Page requests (hits and reads).
    pub read_requests: u64,
    /// The doublewrite mode in effect and why.
    pub doublewrite: DoublewriteStatus,
    /// Page compression (`page_compression`) and what it did.
    pub compression: CompressionStatus,
    /// Reads, creates and writes per second, over
    /// [`Status::rates_over_s`](crate::Status::rates_over_s).
    pub per_second: Option<PoolRates>,
}

/// Page compression in effect, and its counters since the open.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompressionStatus {
    /// The option.
    pub mode: crate::PageCompression,
    /// The page size.
    pub page_size: u64,
    /// Pages written as compressed images (`num_pages_page_compressed`).
    pub pages_compressed: u64,
    /// Compressed images read (`num_pages_page_decompressed`).
    pub pages_decompressed: u64,
    /// Bytes not written thanks to compression (`page_compression_saved`).
    pub saved_bytes: u64,
}

impl fmt::Display for CompressionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::PageCompression as P;
        match self.mode {
            P::None => f.write_str("none")?,
            P::Zstd => {
                let full = self.pages_compressed * self.page_size;
                write!(
                    f,
                    "zstd, {} pages written compressed, {:.1}% of their bytes saved ({:.1} MiB)",
                    self.pages_compressed,
                    pct(self.saved_bytes, full),
                    self.saved_bytes as f64 / (1u64 << 20) as f64
                )?;
                if self.page_size <= crate::page::compress::STORED_BLOCK as u64 {
                    f.write_str(" (pages of 4 KiB never save a block)")?;
                }
            }
        }
        if self.pages_decompressed > 0 || self.mode != P::None {
            write!(f, "; {} compressed pages read", self.pages_decompressed)?;
        }
        Ok(())
    }
}

/// Pages read, created and written per second.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PoolRates {
    /// Pages read per second.
    pub reads: f64,
    /// Pages created per second.
    pub creates: f64,
    /// Pages written per second.
    pub writes: f64,
}

impl BufferPoolStatus {
    pub(super) fn new(
        g: Get<'_>,
        doublewrite: DoublewriteStatus,
        options: &crate::Options,
    ) -> BufferPoolStatus {
        BufferPoolStatus {
            pages_total: g("buffer_pool_pages_total"),
            pages_data: g("buffer_pool_pages_data"),
            pages_dirty: g("buffer_pool_pages_dirty"),
            pages_free: g("buffer_pool_pages_free"),
            pending_writes_lru: g("buffer_pending_writes_lru"),
            pending_writes_flush_list: g("buffer_pending_writes_flush_list"),
            pending_writes_single_page: g("buffer_pending_writes_single_page"),
            pages_read: g("buffer_pool_reads"),
            pages_created: g("space_pages_allocated"),
            pages_written: g("buffer_pages_written"),
            read_requests: g("buffer_pool_read_requests"),
            doublewrite,
            compression: CompressionStatus {
                mode: options.page_compression,
                page_size: options.page_size as u64,
                pages_compressed: g("num_pages_page_compressed"),
                pages_decompressed: g("num_pages_page_decompressed"),
                saved_bytes: g("page_compression_saved"),
            },
            per_second: None,
        }
    }

    pub(super) fn set_rates(&mut self, r: Rate<'_>) {
        self.per_second = Some(PoolRates {
            reads: r("buffer_pool_reads"),
            creates: r("space_pages_allocated"),
            writes: r("buffer_pages_written"),
        });
    }

    pub(super) fn write(&self, f: &mut fmt::Formatter<'_>, over_s: Option<f64>) -> fmt::Result {
        section(f, "BUFFER POOL AND MEMORY")?;
        let total = self.pages_total;
        write!(
            f,
            "Buffer pool size    {total} pages\nDatabase pages      {}\n\
             Modified db pages   {} ({:.1}%)\nFree buffers        {} ({:.1}%)\n\
             Pending writes: LRU {}, flush list {}, single page {}\n\
             Pages read {}, created {}, written {}\n",
            self.pages_data,
            self.pages_dirty,
            pct(self.pages_dirty, total),
            self.pages_free,
            pct(self.pages_free, total),
            self.pending_writes_lru,
            self.pending_writes_flush_list,
            self.pending_writes_single_page,
            self.pages_read,
            self.pages_created,
            self.pages_written,
        )?;
        let d = &self.doublewrite;
        if d.detail.is_empty() {
            writeln!(f, "Doublewrite: {}", d.mode)?;
        } else {
            writeln!(f, "Doublewrite: {d}")?;
        }
        writeln!(f, "Page compression: {}", self.compression)?;
        if let (Some(r), Some(secs)) = (self.per_second, over_s) {
            writeln!(
                f,
                "{:.2} reads/s, {:.2} creates/s, {:.2} writes/s (over the last {secs:.1} s)",
                r.reads, r.creates, r.writes,
            )?;
        }
        writeln!(
            f,
            "Buffer pool hit rate {:.1}% of {} page requests",
            100.0 - pct(self.pages_read, self.read_requests),
            self.read_requests
        )
    }
}
