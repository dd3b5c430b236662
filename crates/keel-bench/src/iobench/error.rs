//! What can stop a device characterization before or while it runs.

use std::io;
use std::path::PathBuf;

/// An error of `keel iobench`. I/O errors of individual measured operations
/// are not errors of the run: they are counted in the case's `errors`.
///
/// The OS error of a variant with a `source` is its [`std::error::Error::source`],
/// not part of its message (print the chain, as `anyhow` does).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IobenchError {
    /// A parameter is out of range or a list is empty.
    #[error("invalid iobench configuration: {0}")]
    Config(String),
    /// The directory for the data files does not exist.
    #[error("directory {} does not exist (create it first, or pass another --dir)", .0.display())]
    DirMissing(PathBuf),
    /// The path given as the directory is not a directory.
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// A file cannot be created in the directory.
    #[error("cannot create files in {}", .dir.display())]
    DirNotWritable {
        /// The directory.
        dir: PathBuf,
        /// What the OS said.
        source: io::Error,
    },
    /// The file system has less free space than the data files need; checked
    /// before anything is written.
    #[error(
        "not enough disk space in {}: the data files need {} more but only {} is available \
         (use a smaller --file-size, or another --dir)",
        .dir.display(), format_size(*.needed_bytes), format_size(*.available_bytes)
    )]
    NotEnoughSpace {
        /// The directory.
        dir: PathBuf,
        /// Bytes still to be written.
        needed_bytes: u64,
        /// Bytes available to this user on that file system.
        available_bytes: u64,
    },
    /// With `direct`, a block size that the device cannot transfer as is.
    #[error(
        "--bs {bs} is not a multiple of {align_bytes} bytes: with the direct method every \
         transfer must be a multiple of the device's logical block size ({logical_block_bytes} B) \
         and of the engine's I/O alignment ({io_align} B)",
        io_align = keel::io::IO_ALIGN
    )]
    UnalignedBlockSize {
        /// The block size asked for.
        bs: usize,
        /// The alignment it must have.
        align_bytes: usize,
        /// The device's logical block size.
        logical_block_bytes: usize,
    },
    /// The file system refuses `O_DIRECT`.
    #[error(
        "the file system of {} refuses O_DIRECT, so the direct method cannot be measured there \
         (use --method fsync or dsync, or a --dir on another file system)",
        .0.display()
    )]
    DirectRefused(PathBuf),
    /// Each data file would be smaller than one block.
    #[error(
        "--file-size {} split over {files} file(s) leaves {} per file, less than --bs {bs}",
        format_size(*.total_bytes), format_size(*.per_file_bytes)
    )]
    FileTooSmall {
        /// Total size asked for.
        total_bytes: u64,
        /// Number of files it is split over.
        files: usize,
        /// Size of each file after rounding.
        per_file_bytes: u64,
        /// The block size.
        bs: usize,
    },
    /// An I/O error while preparing files or writing results.
    #[error("{what}")]
    Io {
        /// What was being done, naming the path.
        what: String,
        /// What the OS said.
        source: io::Error,
    },
    /// `--mode flush`: the engine refused its options or failed while the
    /// table was loaded, dirtied or flushed.
    #[error("{what}")]
    Engine {
        /// What was being done, naming the directory and the case.
        what: String,
        /// What the engine said (it names the option or the file).
        source: keel::Error,
    },
    /// `--mode flush`: the table, held whole in the buffer pool, would not
    /// fit in memory.
    #[error(
        "--mode flush keeps the whole table in the buffer pool: --file-size {} needs a pool of {}, \
         more than {} of the {} of RAM (use a smaller --file-size)",
        format_size(*.file_size_bytes), format_size(*.pool_bytes), format_size(*.limit_bytes),
        format_size(*.ram_bytes)
    )]
    NotEnoughMemory {
        /// `--file-size`.
        file_size_bytes: u64,
        /// The buffer pool it needs.
        pool_bytes: u64,
        /// The most the pool may take.
        limit_bytes: u64,
        /// Physical memory.
        ram_bytes: u64,
    },
    /// The results could not be encoded as JSON.
    #[error("cannot encode the results as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl IobenchError {
    /// Wrap an I/O error with what was being done.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }

    /// Wrap an engine error with what was being done.
    pub(crate) fn engine(what: impl Into<String>) -> impl FnOnce(keel::Error) -> Self {
        let what = what.into();
        move |source| Self::Engine { what, source }
    }
}

/// `bytes` in the largest binary unit that keeps it at least 1: `1.50 GiB`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

/// A block size as the seeds write it: `4k`, `16k`, `1m`, or bytes.
pub fn format_bs(bs: usize) -> String {
    if bs >= 1 << 20 && bs.is_multiple_of(1 << 20) {
        format!("{}m", bs >> 20)
    } else if bs >= 1024 && bs.is_multiple_of(1024) {
        format!("{}k", bs >> 10)
    } else {
        bs.to_string()
    }
}
