//! What to measure: the access modes, the write methods, and the sweep (the
//! cartesian product of every list) that [`super::run`] walks through.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use keel::io::{FlushMethod, ThrottleSpec};

use super::IobenchError;

/// The access pattern of one case (IObench's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Random reads.
    Rrnd,
    /// Random writes.
    Wrnd,
    /// Random reads and writes, `read_pct` % of them reads.
    Rwrnd,
    /// Sequential reads: each worker streams through its own region.
    Seqr,
    /// Sequential writes: each worker streams through its own region.
    Seqw,
    /// The engine's own page flusher: random dirty pages of a table held in
    /// the buffer pool written with exactly `threads` page writes in flight
    /// ([`keel::Db::flush_at_depth`]); see `flushcase`.
    Flush,
}

impl Mode {
    /// Every mode, in documentation order.
    pub const ALL: [Mode; 6] = [
        Self::Rrnd,
        Self::Wrnd,
        Self::Rwrnd,
        Self::Seqr,
        Self::Seqw,
        Self::Flush,
    ];

    /// The name accepted by `from_str`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rrnd => "rrnd",
            Self::Wrnd => "wrnd",
            Self::Rwrnd => "rwrnd",
            Self::Seqr => "seqr",
            Self::Seqw => "seqw",
            Self::Flush => "flush",
        }
    }

    /// True for the random modes of the workers, false for the sequential
    /// ones (and for `flush`, which has no workers: the engine chooses the
    /// pages and the order).
    pub fn is_random(self) -> bool {
        matches!(self, Self::Rrnd | Self::Wrnd | Self::Rwrnd)
    }

    /// The share of reads, in percent, given the configured mixed share.
    pub fn read_pct(self, mixed_read_pct: u8) -> u8 {
        match self {
            Self::Rrnd | Self::Seqr => 100,
            Self::Wrnd | Self::Seqw | Self::Flush => 0,
            Self::Rwrnd => mixed_read_pct,
        }
    }
}

/// How writes are made durable (reads are affected too: only `direct`
/// bypasses the page cache).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    /// `O_DIRECT` with aligned buffers; no sync per write (as IObench and
    /// fio's `direct=1` do).
    Direct,
    /// Buffered `write()` then `sync()` (fdatasync, the engine's) on the
    /// same descriptor, for every write.
    Fsync,
    /// Opened with `O_DSYNC`: every write returns once durable.
    Dsync,
}

impl Method {
    /// Every method, in documentation order.
    pub const ALL: [Method; 3] = [Self::Direct, Self::Fsync, Self::Dsync];

    /// The name accepted by `from_str`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Fsync => "fsync",
            Self::Dsync => "dsync",
        }
    }

    /// The engine's flush method that opens files this way.
    pub fn flush_method(self) -> FlushMethod {
        match self {
            Self::Direct => FlushMethod::ODirect,
            Self::Fsync => FlushMethod::Fsync,
            Self::Dsync => FlushMethod::ODsync,
        }
    }

    /// True when reads and writes go through the page cache.
    pub fn is_buffered(self) -> bool {
        self != Self::Direct
    }
}

/// A mode or method name that is not known.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} `{name}`: expected one of {expected}")]
pub struct ParseNameError {
    what: &'static str,
    name: String,
    expected: &'static str,
}

impl FromStr for Mode {
    type Err = ParseNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim().to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|m| m.as_str() == name)
            .ok_or_else(|| ParseNameError {
                what: "mode",
                name: s.to_owned(),
                expected: "rrnd, wrnd, rwrnd, seqr, seqw, flush",
            })
    }
}

impl FromStr for Method {
    type Err = ParseNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "direct" | "o_direct" => Ok(Self::Direct),
            "fsync" => Ok(Self::Fsync),
            "dsync" | "o_dsync" => Ok(Self::Dsync),
            _ => Err(ParseNameError {
                what: "method",
                name: s.to_owned(),
                expected: "direct, fsync, dsync",
            }),
        }
    }
}

macro_rules! named_serde {
    ($ty:ty) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let name = <String as serde::Deserialize>::deserialize(d)?;
                name.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

named_serde!(Mode);
named_serde!(Method);

/// One measured configuration of the sweep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Case {
    /// Access pattern.
    pub mode: Mode,
    /// Bytes per operation (`flush`: the engine's page size).
    pub bs: usize,
    /// Concurrent workers, each with one request in flight (`flush`: page
    /// writes the flusher keeps in flight).
    pub threads: usize,
    /// Data files the requests are spread over.
    pub files: usize,
    /// Write method.
    pub method: Method,
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} bs={} threads={} files={} method={}",
            self.mode,
            super::format_bs(self.bs),
            self.threads,
            self.files,
            self.method
        )
    }
}

/// The whole characterization: every list is swept, the cases are the
/// cartesian product, run one after another.
#[derive(Clone, Debug)]
pub struct IobenchConfig {
    /// Access patterns.
    pub modes: Vec<Mode>,
    /// Bytes per operation.
    pub block_sizes: Vec<usize>,
    /// Numbers of concurrent workers.
    pub threads: Vec<usize>,
    /// Numbers of data files.
    pub files: Vec<usize>,
    /// Write methods.
    pub methods: Vec<Method>,
    /// Total size of the data files of one case, split evenly over them.
    pub file_size_bytes: u64,
    /// Share of reads in `rwrnd`, in percent.
    pub read_pct: u8,
    /// Measured time of each case.
    pub time: Duration,
    /// Unmeasured run before each case's measurement.
    pub warmup: Duration,
    /// Where the data files are created.
    pub dir: PathBuf,
    /// The device model the files are accessed through (unlimited: the real
    /// device as is).
    pub device: ThrottleSpec,
    /// Leave the data files in place after the run (a later run reuses them).
    pub keep_files: bool,
    /// Seed of every worker's random offsets (and of the rows `flush`
    /// updates).
    pub seed: u64,
    /// `flush`: write each batch to the doublewrite area (and sync it)
    /// before writing it in place, as the engine does by default; off, the
    /// pages go straight to the data files.
    pub doublewrite: bool,
    /// `flush`: the most pages dirtied before each timed flush (at most an
    /// eighth of the table's pages are: see `flushcase`).
    pub flush_dirty_pages: usize,
}

impl Default for IobenchConfig {
    fn default() -> Self {
        let time = Duration::from_secs(10);
        Self {
            modes: vec![Mode::Rrnd, Mode::Wrnd, Mode::Rwrnd],
            block_sizes: vec![4096, 16384],
            threads: vec![1, 4, 16, 64],
            files: vec![1],
            methods: vec![Method::Direct],
            file_size_bytes: 1 << 30,
            read_pct: 50,
            time,
            warmup: Self::default_warmup(time),
            dir: PathBuf::from("."),
            device: ThrottleSpec::unlimited(),
            keep_files: false,
            seed: 0x10be_4c4e,
            doublewrite: false,
            flush_dirty_pages: super::flushcase::DEFAULT_DIRTY_PAGES,
        }
    }
}

/// Most threads a case may ask for: each is an OS thread.
pub const MAX_THREADS: usize = 4096;
/// Most data files a case may spread over.
pub const MAX_FILES: usize = 1024;
/// Largest block size.
pub const MAX_BS: usize = 64 << 20;

impl IobenchConfig {
    /// The warm-up for a measured time: a fifth of it, between 0.2 s and 2 s.
    pub fn default_warmup(time: Duration) -> Duration {
        (time / 5).clamp(Duration::from_millis(200), Duration::from_secs(2))
    }

    /// Every case, files outermost (each file set is written once), then
    /// method, mode, block size and threads.
    pub fn cases(&self) -> Vec<Case> {
        let mut cases = Vec::new();
        for &files in &self.files {
            for &method in &self.methods {
                for &mode in &self.modes {
                    for &bs in &self.block_sizes {
                        for &threads in &self.threads {
                            cases.push(Case {
                                mode,
                                bs,
                                threads,
                                files,
                                method,
                            });
                        }
                    }
                }
            }
        }
        cases
    }

    /// Check the ranges that need no file system.
    pub fn validate(&self) -> Result<(), IobenchError> {
        let bad = |msg: String| Err(IobenchError::Config(msg));
        for (name, empty) in [
            ("--mode", self.modes.is_empty()),
            ("--bs", self.block_sizes.is_empty()),
            ("--threads", self.threads.is_empty()),
            ("--files", self.files.is_empty()),
            ("--method", self.methods.is_empty()),
        ] {
            if empty {
                return bad(format!("{name} needs at least one value"));
            }
        }
        if let Some(&bs) = self.block_sizes.iter().find(|&&bs| bs == 0 || bs > MAX_BS) {
            return bad(format!("--bs {bs} must be between 1 byte and 64 MiB"));
        }
        if let Some(&t) = self.threads.iter().find(|&&t| t == 0 || t > MAX_THREADS) {
            return bad(format!("--threads {t} must be between 1 and {MAX_THREADS}"));
        }
        if let Some(&f) = self.files.iter().find(|&&f| f == 0 || f > MAX_FILES) {
            return bad(format!("--files {f} must be between 1 and {MAX_FILES}"));
        }
        if self.read_pct > 100 {
            return bad(format!("--read-pct {} must be at most 100", self.read_pct));
        }
        if self.time.is_zero() {
            return bad("--time must be positive".to_owned());
        }
        if self.modes.contains(&Mode::Flush) {
            super::flushcase::validate(self)?;
        }
        self.device
            .validate()
            .map_err(|e| IobenchError::Config(e.to_string()))
    }

    /// The nominal duration of the sweep's measurements (warm-ups included,
    /// file preparation not).
    pub fn nominal_duration(&self) -> Duration {
        (self.warmup + self.time) * self.cases().len() as u32
    }
}
