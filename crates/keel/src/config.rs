//! Engine options: one struct, loadable from TOML, overridable key by key
//! (`--set key=value`), set from Rust with types and units
//! ([`Options::builder`]), validated at open with errors that name the key
//! and the value.
//!
//! Names follow InnoDB's (without the `innodb_` prefix) where the meaning is
//! the same; Keel's own options are `data_files`, `device`, `write_io_threads`.

mod builder;
mod commit;
mod neighbors;
mod size;
mod toml_text;

use std::fmt::Display;
use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use builder::OptionsBuilder;
pub use commit::FlushLogAtTrxCommit;
pub use neighbors::FlushNeighbors;
use size::parse_size;
use size::size_serde;
use size::usize_size_serde;
pub use size::ByteSize;

use crate::error::{Error, Result};
use crate::io::{FlushMethod, ThrottleSpec};
use crate::page::{MAX_PAGE_SIZE, MIN_PAGE_SIZE};
use crate::redo::format::{LOG_FILE_ALIGN, MAX_LOG_FILES, MIN_LOG_FILE_SIZE};
use crate::space::header::MAX_DATA_FILES;

/// Every option the engine understands. `Options::default()` is the best
/// behaviour we know for a user who sets nothing.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Options {
    /// Page size in bytes (4096..=65536, a power of two); fixed at creation.
    /// Accepts "16KiB" style strings in TOML and `--set`, as the other sizes.
    #[serde(with = "usize_size_serde")]
    pub page_size: usize,
    /// Total buffer pool size in bytes (accepts "128MiB" style strings in TOML).
    #[serde(with = "size_serde")]
    pub buffer_pool_size: u64,
    /// Number of buffer pool instances (each with its own lists and mutexes).
    /// 0 = automatic: 1 below 1 GiB of pool, else 8 (InnoDB's rule).
    pub buffer_pool_instances: usize,
    /// Percentage of the LRU list kept as the "old" sublist where new pages enter.
    pub old_blocks_pct: u32,
    /// Milliseconds a page must stay in the old sublist before an access makes it young.
    pub old_blocks_time: u64,
    /// Number of data files the pages are striped over (fixed at creation).
    pub data_files: usize,
    /// How data files are opened and synced: O_DIRECT, fsync, O_DSYNC, nosync (tests only).
    pub flush_method: FlushMethod,
    /// Device model: `unlimited` (the real disk as it is), a preset
    /// (`hdd-raid10`, `sata-ssd`, `nvme`) or a spec such as `iops=1500,bw=120MiB,lat=100us,seek=4ms,qd=8`.
    pub device: String,
    /// Flushing policy: `steady` (the default: Keel's controller, which
    /// measures the device and needs no I/O-capacity knob) or `classic`
    /// (InnoDB 8.0's adaptive flushing, with its knobs below). Under
    /// `steady` the knobs in [`CLASSIC_ONLY`] are accepted and ignored.
    pub flush_policy: FlushPolicyName,
    /// Number of page-cleaner threads (at most `buffer_pool_instances`; more
    /// are reduced to that, as in InnoDB).
    pub page_cleaners: usize,
    /// Classic: free frames each instance's LRU flushing tries to keep
    /// available per cleaner round; also how deep it scans the LRU tail.
    /// (`steady` sizes LRU flushing from the rate of page allocation.)
    pub lru_scan_depth: usize,
    /// Classic: dirty-page percentage the policy aims to stay under.
    pub max_dirty_pages_pct: f64,
    /// Classic: dirty-page percentage at which the policy starts
    /// pre-flushing for dirtiness (0 = only at `max_dirty_pages_pct`).
    pub max_dirty_pages_pct_lwm: f64,
    /// Classic: background page writes per second the device is assumed to
    /// sustain (InnoDB's `innodb_io_capacity`).
    pub io_capacity: u64,
    /// Classic: most flush-list page writes per second in adaptive flushing.
    /// 0 = automatic: max(2 × `io_capacity`, 2000), InnoDB's default.
    pub io_capacity_max: u64,
    /// Classic: flush in proportion to the checkpoint age (adaptive flushing).
    /// Off: flush for age only past the async mark.
    pub adaptive_flushing: bool,
    /// Classic: percentage of the log capacity below which adaptive
    /// flushing for age is off.
    pub adaptive_flushing_lwm: f64,
    /// Classic: seconds over which the page and LSN rates are averaged.
    pub flushing_avg_loops: u64,
    /// Classic: past the sync mark, cleaner rounds run back to back and
    /// ignore `io_capacity`.
    pub flush_sync: bool,
    /// Also write dirty neighbors of a flushed page: 0 = none, 1 = the
    /// contiguous dirty run around it, 2 = every dirty page of its area,
    /// `auto` (the default) = the policy chooses ([`FlushNeighbors`]).
    pub flush_neighbors: FlushNeighbors,
    /// Threads that write one flush batch in parallel (one stream per data file at most).
    pub write_io_threads: usize,
    /// Size of each redo log file in bytes.
    #[serde(with = "size_serde")]
    pub log_file_size: u64,
    /// Number of redo log files; capacity = log_file_size × log_files_in_group.
    pub log_files_in_group: usize,
    /// 1: the log is written and synced at every commit (durable);
    /// 2: written at commit, synced about once a second;
    /// 0: written and synced about once a second.
    pub flush_log_at_trx_commit: u8,
    /// Seconds a transaction waits for a row lock before `LockWaitTimeout`.
    pub lock_wait_timeout: f64,
    /// The isolation level of transactions begun with [`Db::begin`](crate::Db::begin)
    /// (InnoDB's `transaction_isolation`): `REPEATABLE-READ` (the default:
    /// a transaction's plain reads see one snapshot, taken at its first
    /// read) or `READ-COMMITTED` (each read call sees a snapshot taken when
    /// it starts). `SERIALIZABLE` is refused.
    pub transaction_isolation: Isolation,
    /// Background threads that purge the history no read view needs any
    /// more (InnoDB's `innodb_purge_threads`): 1 to 32.
    pub purge_threads: usize,
    /// Percent of each page a bulk load (`Table::bulk_load`) fills, as
    /// InnoDB's `innodb_fill_factor` for sorted index builds: 10 to 100,
    /// where 100 still leaves 1/16 of the page free for rows that grow. A
    /// page goes past it only by what it must hold: a leaf its first row, a
    /// page above the leaves its first two keys.
    pub fill_factor: u8,
    /// How torn page writes are guarded against ([`DoublewriteMode`]):
    /// `on` (the default; also `true`, `ON`, `1`, `DETECT_AND_RECOVER`),
    /// `detect_only`, `atomic`, or `off` (also `false`, `OFF`, `0`).
    pub doublewrite: DoublewriteMode,
    /// Whether pages go to the data files compressed
    /// ([`PageCompression`]): `none` (the default) or `zstd`. May change
    /// at any open: pages are read whichever way they were written.
    pub page_compression: PageCompression,
    /// Number of doublewrite files.
    pub doublewrite_files: usize,
    /// Pages per doublewrite area (one area per page cleaner, plus one for
    /// single-page flushes).
    pub doublewrite_pages: usize,
    /// Open for reading only (InnoDB's `innodb_read_only`): nothing is
    /// written to any file, no page cleaner or purge thread runs, and every
    /// call that would write fails with [`Error::ReadOnly`]. The database
    /// must exist and have been closed cleanly: an open that finds redo
    /// after the last checkpoint (a crash) is refused, since recovering it
    /// would write. Several read-only opens, in one process or in many,
    /// may share a database that nobody has open for writing.
    pub read_only: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: crate::page::DEFAULT_PAGE_SIZE,
            buffer_pool_size: 128 << 20,
            buffer_pool_instances: 0,
            old_blocks_pct: 37,
            old_blocks_time: 1000,
            data_files: 4,
            flush_method: FlushMethod::default(),
            device: "unlimited".to_string(),
            flush_policy: FlushPolicyName::Steady,
            page_cleaners: 4,
            lru_scan_depth: 1024,
            max_dirty_pages_pct: 90.0,
            max_dirty_pages_pct_lwm: 10.0,
            io_capacity: 200,
            io_capacity_max: 0,
            adaptive_flushing: true,
            adaptive_flushing_lwm: 10.0,
            flushing_avg_loops: 30,
            flush_sync: true,
            flush_neighbors: FlushNeighbors::Auto,
            write_io_threads: 4,
            log_file_size: 48 << 20,
            log_files_in_group: 2,
            flush_log_at_trx_commit: 1,
            lock_wait_timeout: 50.0,
            transaction_isolation: Isolation::RepeatableRead,
            purge_threads: 4,
            fill_factor: 100,
            doublewrite: DoublewriteMode::On,
            page_compression: PageCompression::None,
            doublewrite_files: 2,
            doublewrite_pages: 128,
            read_only: false,
        }
    }
}

impl Options {
    /// Parse a size as the options take it: a plain number of bytes, or
    /// one with a unit (`16k`, `128MiB`, `1.5GiB`).
    pub fn parse_size(s: &str) -> std::result::Result<u64, String> {
        parse_size(s)
    }

    /// Read options from a TOML file; keys not given keep their defaults.
    /// A file that cannot be read is an [`Error::Io`] naming it; one that
    /// is not TOML, or sets an unknown option or a bad value, is an
    /// [`Error::ConfigToml`] naming the file, the line, the option and the
    /// value as written.
    pub fn from_toml_file(path: &Path) -> Result<Options> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, "read", e))?;
        toml_text::parse(&text).map_err(|e| e.into_error(Some(path)))
    }

    /// Parse options from TOML text; errors as
    /// [`from_toml_file`](Self::from_toml_file)'s, without a file.
    pub fn from_toml_str(text: &str) -> Result<Options> {
        toml_text::parse(text).map_err(|e| e.into_error(None))
    }

    /// Set one option from its textual value, e.g. `("buffer_pool_size", "64MiB")`.
    /// An error is an [`Error::Config`] naming the option and the value.
    pub fn set(&mut self, key: &str, value: &str) -> Result<()> {
        let shown = format!("`{value}`");
        let old = self.current(key, &shown)?;
        let new = coerce(&old, value).ok_or_else(|| {
            Error::config(key, format!("{shown} is not a valid {}", old.type_str()))
        })?;
        self.assign(key, new, &shown)
            .map_err(|reason| Error::config(key, reason))
    }

    /// The value of `key` as TOML; an unknown key is an error that shows
    /// the value it was given (`shown`).
    fn current(&self, key: &str, shown: &str) -> Result<toml::Value> {
        let table = self
            .to_table()
            .map_err(|reason| Error::config(key, reason))?;
        table
            .get(key)
            .cloned()
            .ok_or_else(|| Error::config(key, unknown_option(shown)))
    }

    fn to_table(&self) -> std::result::Result<toml::Table, String> {
        toml::Table::try_from(self).map_err(|e| format!("cannot serialise options: {e}"))
    }

    /// Give `key` the TOML `value`, written `shown` in messages. The error
    /// says what is wrong with the value, naming it.
    fn assign(
        &mut self,
        key: &str,
        value: toml::Value,
        shown: &str,
    ) -> std::result::Result<(), String> {
        let mut table = self.to_table()?;
        if !table.contains_key(key) {
            return Err(unknown_option(shown));
        }
        let raw = match &value {
            toml::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        table.insert(key.to_string(), value);
        *self = toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| toml_text::explain(e.message(), shown, &raw))?;
        Ok(())
    }

    /// Apply `key=value` assignments in order.
    pub fn apply_sets<'a>(&mut self, sets: impl IntoIterator<Item = &'a str>) -> Result<()> {
        for s in sets {
            let (k, v) = s.split_once('=').ok_or_else(|| {
                Error::config(
                    s.trim(),
                    format!("no value given; expected `{}=VALUE`", s.trim()),
                )
            })?;
            self.set(k.trim(), v.trim())?;
        }
        Ok(())
    }

    /// Every option as (name, value-as-text), in declaration order.
    pub fn entries(&self) -> Vec<(String, String)> {
        let table = toml::Table::try_from(self).unwrap_or_default();
        table
            .into_iter()
            .map(|(k, v)| {
                let s = match v {
                    toml::Value::String(s) => s,
                    other => other.to_string(),
                };
                (k, s)
            })
            .collect()
    }

    /// Check every option; the error names the first bad key and its value.
    pub fn validate(&self) -> Result<()> {
        self.validate_pool()?;
        self.validate_flushing()?;
        self.validate_log_and_transactions()?;
        self.device_spec()?;
        Ok(())
    }

    /// The page size, the buffer pool and the data files.
    fn validate_pool(&self) -> Result<()> {
        let ps = self.page_size;
        if !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&ps) || !ps.is_power_of_two() {
            return Err(refuse(
                "page_size",
                format_args!("a power of two between {MIN_PAGE_SIZE} and {MAX_PAGE_SIZE}"),
                ps,
            ));
        }
        let frames = self.buffer_pool_size / ps as u64;
        let inst = self.effective_instances();
        if inst == 0 || inst > 64 {
            return Err(refuse("buffer_pool_instances", "between 1 and 64", inst));
        }
        if frames < 16 * inst as u64 {
            return Err(Error::config(
                "buffer_pool_size",
                format!(
                    "{} bytes gives {frames} pages of {ps} bytes; at least 16 per instance ({} instances) are needed",
                    self.buffer_pool_size, inst
                ),
            ));
        }
        if !(5..=95).contains(&self.old_blocks_pct) {
            return Err(refuse(
                "old_blocks_pct",
                "between 5 and 95",
                self.old_blocks_pct,
            ));
        }
        if !(1..=MAX_DATA_FILES as usize).contains(&self.data_files) {
            let rule = format_args!("between 1 and {MAX_DATA_FILES}");
            return Err(refuse("data_files", rule, self.data_files));
        }
        Ok(())
    }

    /// The page cleaners, the policy's knobs and the doublewrite.
    fn validate_flushing(&self) -> Result<()> {
        if self.page_cleaners == 0 || self.page_cleaners > 64 {
            return Err(refuse(
                "page_cleaners",
                "between 1 and 64",
                self.page_cleaners,
            ));
        }
        if self.lru_scan_depth == 0 {
            return Err(refuse("lru_scan_depth", "at least 1", self.lru_scan_depth));
        }
        let pct = self.max_dirty_pages_pct;
        if !(0.0..=99.99).contains(&pct) {
            return Err(refuse("max_dirty_pages_pct", "between 0 and 99.99", pct));
        }
        let lwm = self.max_dirty_pages_pct_lwm;
        if !(0.0..=99.99).contains(&lwm) || lwm > pct {
            let rule = format_args!("between 0 and max_dirty_pages_pct ({pct})");
            return Err(refuse("max_dirty_pages_pct_lwm", rule, lwm));
        }
        let io = self.io_capacity;
        if io < 100 {
            let reason = format!("{io} is below InnoDB's minimum of 100");
            return Err(Error::config("io_capacity", reason));
        }
        if io > u64::from(u32::MAX) {
            return Err(refuse(
                "io_capacity",
                format_args!("at most {}", u32::MAX),
                io,
            ));
        }
        if self.io_capacity_max != 0 && self.io_capacity_max < self.io_capacity {
            return Err(Error::config(
                "io_capacity_max",
                format!(
                    "{} is below io_capacity ({}); use 0 for the automatic value",
                    self.io_capacity_max, self.io_capacity
                ),
            ));
        }
        let lwm = self.adaptive_flushing_lwm;
        if !(0.0..=70.0).contains(&lwm) {
            let rule = "between 0 and 70 (percent of the log capacity)";
            return Err(refuse("adaptive_flushing_lwm", rule, lwm));
        }
        let loops = self.flushing_avg_loops;
        if !(1..=1000).contains(&loops) {
            return Err(refuse(
                "flushing_avg_loops",
                "between 1 and 1000 seconds",
                loops,
            ));
        }
        let threads = self.write_io_threads;
        if threads == 0 || threads > 64 {
            return Err(refuse("write_io_threads", "between 1 and 64", threads));
        }
        let files = self.doublewrite_files;
        if !(1..=64).contains(&files) {
            return Err(refuse("doublewrite_files", "between 1 and 64", files));
        }
        let pages = self.doublewrite_pages;
        if !(1..=4096).contains(&pages) {
            return Err(refuse("doublewrite_pages", "between 1 and 4096", pages));
        }
        Ok(())
    }

    /// The redo log, commits, locks, purge and bulk loads.
    fn validate_log_and_transactions(&self) -> Result<()> {
        // The log's file header check holds existing logs to the same rule.
        let size = self.log_file_size;
        if size < MIN_LOG_FILE_SIZE || !size.is_multiple_of(LOG_FILE_ALIGN) {
            let rule = "at least 1MiB and a multiple of 4KiB";
            return Err(refuse("log_file_size", rule, format_args!("{size} bytes")));
        }
        let files = self.log_files_in_group;
        if !(1..=MAX_LOG_FILES as usize).contains(&files) {
            let rule = format_args!("between 1 and {MAX_LOG_FILES}");
            return Err(refuse("log_files_in_group", rule, files));
        }
        if FlushLogAtTrxCommit::try_from(self.flush_log_at_trx_commit).is_err() {
            let rule = "0, 1 or 2";
            return Err(refuse(
                "flush_log_at_trx_commit",
                rule,
                self.flush_log_at_trx_commit,
            ));
        }
        if !(1..=32).contains(&self.purge_threads) {
            return Err(refuse(
                "purge_threads",
                "between 1 and 32",
                self.purge_threads,
            ));
        }
        let wait = self.lock_wait_timeout;
        if !(wait > 0.0 && wait <= 1e6) {
            let rule = "a positive number of seconds, at most 1000000";
            return Err(refuse("lock_wait_timeout", rule, wait));
        }
        if !(10..=100).contains(&self.fill_factor) {
            return Err(refuse(
                "fill_factor",
                "between 10 and 100",
                self.fill_factor,
            ));
        }
        Ok(())
    }

    /// The buffer pool instance count after applying the automatic rule.
    pub fn effective_instances(&self) -> usize {
        match self.buffer_pool_instances {
            0 if self.buffer_pool_size >= 1 << 30 => 8,
            0 => 1,
            n => n,
        }
    }

    /// `io_capacity_max` after applying the automatic rule.
    pub fn effective_io_capacity_max(&self) -> u64 {
        match self.io_capacity_max {
            0 => (2 * self.io_capacity).max(2000),
            n => n,
        }
    }

    /// Page cleaners actually started: at most one per instance.
    pub fn effective_page_cleaners(&self) -> usize {
        self.page_cleaners.min(self.effective_instances()).max(1)
    }

    /// The options that change only at the next open: every option not in
    /// [`RUNTIME_OPTIONS`], in alphabetical order.
    pub fn restart_only() -> Vec<String> {
        known_keys()
            .into_iter()
            .filter(|k| !RUNTIME_OPTIONS.contains(&k.as_str()))
            .collect()
    }

    /// Whether `key` is an option that [`Db::set_option`](crate::Db::set_option)
    /// changes while the database runs.
    pub fn is_runtime(key: &str) -> bool {
        RUNTIME_OPTIONS.contains(&key)
    }

    /// The parsed `device` option.
    pub fn device_spec(&self) -> Result<ThrottleSpec> {
        ThrottleSpec::from_str(&self.device).map_err(|e| Error::config("device", e.to_string()))
    }
}

/// The options only `classic` reads: `steady` accepts them (so one
/// configuration file serves both policies) and ignores them.
pub const CLASSIC_ONLY: &[&str] = &[
    "io_capacity",
    "io_capacity_max",
    "max_dirty_pages_pct",
    "max_dirty_pages_pct_lwm",
    "adaptive_flushing",
    "adaptive_flushing_lwm",
    "flushing_avg_loops",
    "flush_sync",
    "lru_scan_depth",
];

/// The options [`Db::set_option`](crate::Db::set_option) changes while the
/// database runs: the ones InnoDB's `SET GLOBAL` changes, plus `device`
/// (the device model, as [`Db::set_device`](crate::Db::set_device)). Every
/// other option is fixed by files on disk or by structures sized at open,
/// and takes effect at the next open ([`Options::restart_only`]).
pub const RUNTIME_OPTIONS: &[&str] = &[
    "flush_policy",
    "io_capacity",
    "io_capacity_max",
    "max_dirty_pages_pct",
    "max_dirty_pages_pct_lwm",
    "adaptive_flushing",
    "adaptive_flushing_lwm",
    "flushing_avg_loops",
    "lru_scan_depth",
    "flush_neighbors",
    "flush_sync",
    "flush_log_at_trx_commit",
    "lock_wait_timeout",
    "transaction_isolation",
    "fill_factor",
    "device",
];

/// Transaction isolation levels (`transaction_isolation`), with InnoDB's
/// names. Written `REPEATABLE-READ` / `READ-COMMITTED` (any case; `_` or a
/// space may stand for `-`). See the `txn` module for what each promises.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Isolation {
    /// A transaction's plain reads all see one snapshot, taken at its first
    /// read, plus its own writes. InnoDB's default, and Keel's.
    #[default]
    RepeatableRead,
    /// Each plain read call sees a snapshot taken when the call starts,
    /// plus the transaction's own writes.
    ReadCommitted,
}

impl Isolation {
    /// The name as written in options and reports (InnoDB's spelling).
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::RepeatableRead => "REPEATABLE-READ",
            Isolation::ReadCommitted => "READ-COMMITTED",
        }
    }
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Isolation {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let norm: String = s
            .trim()
            .chars()
            .map(|c| match c {
                '_' | ' ' => '-',
                c => c.to_ascii_uppercase(),
            })
            .collect();
        match norm.as_str() {
            "REPEATABLE-READ" => Ok(Isolation::RepeatableRead),
            "READ-COMMITTED" => Ok(Isolation::ReadCommitted),
            "SERIALIZABLE" => Err(
                "SERIALIZABLE is not supported: Keel offers REPEATABLE-READ \
                                   (the default) and READ-COMMITTED; for serializable \
                                   read-modify-write, read with get_for_update, which locks"
                    .to_string(),
            ),
            "READ-UNCOMMITTED" => Err("READ-UNCOMMITTED is not supported: Keel never shows \
                                       uncommitted rows; use READ-COMMITTED"
                .to_string()),
            _ => Err(format!(
                "`{s}` is not an isolation level; expected REPEATABLE-READ or READ-COMMITTED"
            )),
        }
    }
}

impl Serialize for Isolation {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Isolation {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// What the doublewrite does (`doublewrite`); InnoDB's `innodb_doublewrite`
/// with Keel's `atomic` added. See `flush::doublewrite` for the protocol of
/// each mode and what recovery can repair in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DoublewriteMode {
    /// Page images go to a doublewrite area, synced before the pages are
    /// written in place; recovery repairs a torn page from its copy.
    #[default]
    On,
    /// Only the area header goes to the doublewrite area (page ids and
    /// LSNs, no images: InnoDB 8.0.30's `DETECT_ONLY`); recovery detects a
    /// torn page it lists and refuses to open, naming it.
    DetectOnly,
    /// No doublewrite: the data device promises untorn writes of a whole
    /// page (Linux `statx` `STATX_WRITE_ATOMIC`), and pages are written with
    /// `RWF_ATOMIC`. Refused at open where the device does not promise it.
    Atomic,
    /// No doublewrite and no promise: a torn page cannot be repaired (for
    /// measurements only).
    Off,
}

impl DoublewriteMode {
    /// Every mode, in the order they are documented.
    pub const ALL: [DoublewriteMode; 4] = [Self::On, Self::DetectOnly, Self::Atomic, Self::Off];

    /// The accepted spellings, for messages.
    pub const SPELLINGS: &'static str =
        "on (or true, 1, ON, DETECT_AND_RECOVER), detect_only, atomic, off (or false, 0, OFF)";

    /// The canonical name, as written in options and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::On => "on",
            Self::DetectOnly => "detect_only",
            Self::Atomic => "atomic",
            Self::Off => "off",
        }
    }

    /// `on` for true, `off` for false: the option's old boolean meaning.
    pub fn from_bool(on: bool) -> Self {
        if on {
            Self::On
        } else {
            Self::Off
        }
    }

    /// Whether batches go through a doublewrite area (`on`, `detect_only`).
    pub fn uses_areas(self) -> bool {
        matches!(self, Self::On | Self::DetectOnly)
    }
}

impl std::fmt::Display for DoublewriteMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for DoublewriteMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "on" | "true" | "1" | "yes" | "detect_and_recover" => Ok(Self::On),
            "detect_only" => Ok(Self::DetectOnly),
            "atomic" => Ok(Self::Atomic),
            "off" | "false" | "0" | "no" => Ok(Self::Off),
            _ => Err(format!(
                "`{s}` is not a doublewrite mode; expected one of {}",
                Self::SPELLINGS
            )),
        }
    }
}

impl Serialize for DoublewriteMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for DoublewriteMode {
    /// A string, or (as the option was a boolean) `true`/`false`, `1`/`0`.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(DoublewriteVisitor)
    }
}

/// A visitor rather than an untagged enum, so that a value of the wrong
/// type is named in the error.
struct DoublewriteVisitor;

impl serde::de::Visitor<'_> for DoublewriteVisitor {
    type Value = DoublewriteMode;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a doublewrite mode: {}", DoublewriteMode::SPELLINGS)
    }

    fn visit_bool<E: serde::de::Error>(self, b: bool) -> std::result::Result<Self::Value, E> {
        Ok(DoublewriteMode::from_bool(b))
    }

    fn visit_i64<E: serde::de::Error>(self, n: i64) -> std::result::Result<Self::Value, E> {
        match n {
            1 => Ok(DoublewriteMode::On),
            0 => Ok(DoublewriteMode::Off),
            n => Err(not_a_doublewrite_mode(n)),
        }
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> std::result::Result<Self::Value, E> {
        match n {
            1 => Ok(DoublewriteMode::On),
            0 => Ok(DoublewriteMode::Off),
            n => Err(not_a_doublewrite_mode(n)),
        }
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> std::result::Result<Self::Value, E> {
        s.parse().map_err(E::custom)
    }
}

fn not_a_doublewrite_mode<E: serde::de::Error>(n: impl std::fmt::Display) -> E {
    E::custom(format!(
        "`{n}` is not a doublewrite mode; expected one of {}",
        DoublewriteMode::SPELLINGS
    ))
}

/// How pages are stored in the data files (`page_compression`), MariaDB's
/// `PAGE_COMPRESSED` tables with `innodb_compression_algorithm`: a page is
/// compressed on its way to its place in a data file, where that saves a
/// 4 KiB block, and decoded when read. In memory, in the doublewrite area
/// and in the log it is whole. What it saves is bytes written (a 16 KiB
/// leaf of the OLTP tables is stored in about two blocks), for CPU: a
/// compression per page written and a decompression per compressed page
/// read. A page size of 4 KiB is never compressed. See
/// `page::compress` for the stored form.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PageCompression {
    /// Pages are written whole, the default.
    #[default]
    None,
    /// zstd at level 1.
    Zstd,
}

/// The flushing policies (`flush_policy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlushPolicyName {
    /// InnoDB 8.0's adaptive flushing, with every knob.
    Classic,
    /// Keel's controller, the default: no I/O-capacity knob, the checkpoint
    /// age held at a setpoint, writers slowed smoothly (see
    /// `docs/flushing.md`).
    #[default]
    Steady,
}

impl FlushPolicyName {
    /// The options this policy accepts but ignores.
    pub fn ignored_options(self) -> &'static [&'static str] {
        match self {
            FlushPolicyName::Classic => &[],
            FlushPolicyName::Steady => CLASSIC_ONLY,
        }
    }

    /// The name as written in options and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FlushPolicyName::Classic => "classic",
            FlushPolicyName::Steady => "steady",
        }
    }
}

fn known_keys() -> Vec<String> {
    Options::default()
        .entries()
        .into_iter()
        .map(|(k, _)| k)
        .collect()
}

fn unknown_option(shown: &str) -> String {
    format!(
        "unknown option (given {shown}); known options: {}",
        known_keys().join(", ")
    )
}

/// A validation error: `key` must be `rule`, and is `value`.
fn refuse(key: &str, rule: impl Display, value: impl Display) -> Error {
    Error::config(key, format!("must be {rule}, not {value}"))
}

/// Parse a value given on the command line into the type the option has.
fn coerce(old: &toml::Value, v: &str) -> Option<toml::Value> {
    use toml::Value;
    Some(match old {
        Value::Integer(_) => match v.parse::<i64>() {
            Ok(n) => Value::Integer(n),
            Err(_) => Value::String(v.to_string()),
        },
        Value::Float(_) => Value::Float(v.parse::<f64>().ok()?),
        Value::Boolean(_) => Value::Boolean(match v.to_ascii_lowercase().as_str() {
            "1" | "on" | "true" | "yes" => true,
            "0" | "off" | "false" | "no" => false,
            _ => return None,
        }),
        _ => Value::String(v.to_string()),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Options::default().validate().unwrap();
    }

    #[test]
    fn set_parses_types_and_names_bad_keys() {
        let mut o = Options::default();
        o.set("buffer_pool_size", "64MiB").unwrap();
        assert_eq!(o.buffer_pool_size, 64 << 20);
        o.set("page_size", "4KiB").unwrap();
        assert_eq!(o.page_size, 4096);
        o.set("page_size", "8192").unwrap();
        assert_eq!(o.page_size, 8192);
        o.set("page_cleaners", "3").unwrap();
        assert_eq!(o.page_cleaners, 3);
        o.set("flush_method", "fsync").unwrap();
        assert_eq!(o.flush_method, FlushMethod::Fsync);
        o.set("max_dirty_pages_pct", "75").unwrap();
        assert_eq!(o.max_dirty_pages_pct, 75.0);
        let e = o.set("no_such_knob", "1").unwrap_err();
        assert!(e.to_string().contains("no_such_knob"), "{e}");
        let e = o.set("page_cleaners", "many").unwrap_err();
        assert!(e.to_string().contains("page_cleaners"), "{e}");
        let e = o.set("flush_method", "sometimes").unwrap_err();
        assert!(e.to_string().contains("flush_method"), "{e}");
    }

    #[test]
    fn toml_round_trip_and_validation() {
        let o = Options::from_toml_str("buffer_pool_size = \"1GiB\"\ndata_files = 8\n").unwrap();
        assert_eq!(o.buffer_pool_size, 1 << 30);
        assert_eq!(o.effective_instances(), 8);
        let e = Options::from_toml_str("bogus = 1").unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let o = Options {
            page_size: 3000,
            ..Default::default()
        };
        assert!(o.validate().unwrap_err().to_string().contains("page_size"));
        let o = Options {
            device: "iops=abc".into(),
            ..Default::default()
        };
        assert!(o.validate().unwrap_err().to_string().contains("device"));
    }

    #[test]
    fn doublewrite_accepts_every_spelling_and_names_the_option_when_wrong() {
        use DoublewriteMode::*;
        let cases = [
            ("on", On),
            ("ON", On),
            ("true", On),
            ("1", On),
            ("DETECT_AND_RECOVER", On),
            ("detect_only", DetectOnly),
            ("DETECT_ONLY", DetectOnly),
            ("detect-only", DetectOnly),
            ("atomic", Atomic),
            ("ATOMIC", Atomic),
            ("off", Off),
            ("OFF", Off),
            ("false", Off),
            ("0", Off),
        ];
        for (text, want) in cases {
            let mut o = Options::default();
            o.set("doublewrite", text).unwrap();
            assert_eq!(o.doublewrite, want, "--set doublewrite={text}");
            assert_eq!(text.parse::<DoublewriteMode>().unwrap(), want);
        }
        // TOML: booleans and 0/1 as the option used to take, and strings.
        for (toml, want) in [
            ("doublewrite = true", On),
            ("doublewrite = false", Off),
            ("doublewrite = 1", On),
            ("doublewrite = 0", Off),
            ("doublewrite = \"detect_only\"", DetectOnly),
            ("doublewrite = \"atomic\"", Atomic),
        ] {
            assert_eq!(
                Options::from_toml_str(toml).unwrap().doublewrite,
                want,
                "{toml}"
            );
        }
        // Printed by its canonical name, which parses back.
        for m in DoublewriteMode::ALL {
            let o = Options {
                doublewrite: m,
                ..Default::default()
            };
            let printed = o.entries().into_iter().find(|(k, _)| k == "doublewrite");
            assert_eq!(printed, Some(("doublewrite".into(), m.as_str().into())));
            assert_eq!(m.to_string().parse::<DoublewriteMode>().unwrap(), m);
        }
        for bad in ["sometimes", "2", "detect"] {
            let e = Options::default().set("doublewrite", bad).unwrap_err();
            let msg = e.to_string();
            assert!(
                matches!(e, Error::Config { ref key, .. } if key == "doublewrite"),
                "{msg}"
            );
            assert!(
                msg.contains(bad) && msg.contains("detect_only, atomic, off"),
                "{msg}"
            );
            // Read as a person reads it: no run of spaces from a broken
            // string continuation.
            assert!(!msg.contains("  "), "{msg}");
        }
        let e = Options::from_toml_str("doublewrite = 2").unwrap_err();
        assert!(e.to_string().contains("doublewrite"), "{e}");
        assert!(e.to_string().contains("detect_only"), "{e}");
    }

    #[test]
    fn set_errors_name_the_option_and_the_value() {
        let mut o = Options::default();
        for (key, value, want) in [
            (
                "io_capacity",
                "abc",
                "option `io_capacity`: `abc` is not accepted; expected a whole number",
            ),
            (
                "flush_policy",
                "adaptive",
                "option `flush_policy`: `adaptive` is not accepted; expected `classic` or `steady`",
            ),
            (
                "flush_sync",
                "maybe",
                "option `flush_sync`: `maybe` is not a valid boolean",
            ),
            (
                "max_dirty_pages_pct",
                "most",
                "option `max_dirty_pages_pct`: `most` is not a valid float",
            ),
            (
                "buffer_pool_size",
                "12 parsecs",
                "option `buffer_pool_size`: unknown size unit `parsecs` in `12 parsecs`",
            ),
        ] {
            let e = o.set(key, value).unwrap_err();
            assert!(
                matches!(&e, Error::Config { key: k, .. } if k == key),
                "{e}"
            );
            assert_eq!(e.to_string(), want);
        }
        let e = o.set("bufer_pool_size", "1GiB").unwrap_err();
        assert!(
            e.to_string().starts_with(
                "option `bufer_pool_size`: unknown option (given `1GiB`); known options: "
            ),
            "{e}"
        );
        let e = o.apply_sets(["io_capacity"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "option `io_capacity`: no value given; expected `io_capacity=VALUE`"
        );
        // Nothing was changed by the refused values.
        assert_eq!(o, Options::default());
    }

    #[test]
    fn validation_names_the_option_and_the_value() {
        let o = Options {
            old_blocks_pct: 3,
            ..Default::default()
        };
        let e = o.validate().unwrap_err();
        assert_eq!(
            e.to_string(),
            "option `old_blocks_pct`: must be between 5 and 95, not 3"
        );
        let o = Options {
            log_file_size: 5000,
            ..Default::default()
        };
        let e = o.validate().unwrap_err();
        assert!(e.to_string().ends_with("not 5000 bytes"), "{e}");
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("16k").unwrap(), 16384);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert!(parse_size("12 parsecs").is_err());
    }
}
