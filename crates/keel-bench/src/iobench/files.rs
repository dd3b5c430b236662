//! The data files: checks made before anything is written (directory,
//! O_DIRECT, block alignment, free space), writing each set in full, and
//! opening it through the engine's device layer for one case.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel::io::{Device, FileSystem, FlushMethod, OpenMode, OsFileSystem, ThrottledFileSystem};
use keel::io::{ThrottleSpec, IO_ALIGN};
use rand::rngs::SmallRng;
use rand::{RngCore, SeedableRng};

use super::{IobenchConfig, IobenchError, Method, Mode};

/// Each file's size is a multiple of this, so every common block size tiles it.
const FILE_GRAIN: u64 = 64 << 10;
/// Chunk in which the files are filled.
const FILL_CHUNK: usize = 1 << 20;

/// The size of each of `files` data files for a total of `total` bytes.
pub fn per_file_bytes(total: u64, files: usize) -> u64 {
    (total / files.max(1) as u64) / FILE_GRAIN * FILE_GRAIN
}

/// The paths of a set of `files` data files in `dir`.
pub fn file_paths(dir: &Path, files: usize) -> Vec<PathBuf> {
    (0..files)
        .map(|i| dir.join(format!("keel-iobench-{files}f-{i}.dat")))
        .collect()
}

/// Fail unless `dir` is an existing directory in which files can be created.
pub fn check_dir(dir: &Path) -> Result<(), IobenchError> {
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Err(IobenchError::NotADirectory(dir.to_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(IobenchError::DirMissing(dir.to_owned()))
        }
        Err(source) => {
            return Err(IobenchError::DirNotWritable {
                dir: dir.to_owned(),
                source,
            })
        }
    }
    let probe = probe_path(dir, "write");
    let written = File::create_new(&probe).and_then(|mut f| f.write_all(&[0u8; 4096]));
    // Best effort: the probe may not exist if its creation failed.
    let _ = fs::remove_file(&probe);
    written.map_err(|source| IobenchError::DirNotWritable {
        dir: dir.to_owned(),
        source,
    })
}

fn probe_path(dir: &Path, what: &str) -> PathBuf {
    dir.join(format!(".keel-iobench-{what}-probe-{}", std::process::id()))
}

/// Fail if the file system of `dir` refuses O_DIRECT (the device layer would
/// silently fall back to fsync, and the numbers would be buffered ones).
pub fn check_direct(dir: &Path) -> Result<(), IobenchError> {
    let probe = probe_path(dir, "direct");
    let opened = OsFileSystem::new(FlushMethod::ODirect).open_file(&probe, OpenMode::CreateNew);
    let _ = fs::remove_file(&probe);
    let file = opened.map_err(IobenchError::io(format!(
        "cannot open a probe file in {} with O_DIRECT",
        dir.display()
    )))?;
    if file.effective_method() != FlushMethod::ODirect {
        return Err(IobenchError::DirectRefused(dir.to_owned()));
    }
    Ok(())
}

/// The logical block size of the block device under `dir`, from sysfs;
/// 512 (the smallest there is) where it cannot be found (tmpfs, overlays).
pub fn logical_block_bytes(dir: &Path) -> usize {
    block_device_sysfs(dir)
        .and_then(|sys| {
            let direct = sys.join("queue/logical_block_size");
            // A partition has no queue/ of its own: its disk's is one up.
            let parent = sys.join("../queue/logical_block_size");
            fs::read_to_string(direct)
                .or_else(|_| fs::read_to_string(parent))
                .ok()
        })
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(512)
}

/// `/sys/dev/block/MAJ:MIN` of the device holding `dir`, if it has one.
pub fn block_device_sysfs(dir: &Path) -> Option<PathBuf> {
    let dev = fs::metadata(dir).ok()?.dev();
    let sys = PathBuf::from(format!(
        "/sys/dev/block/{}:{}",
        rustix::fs::major(dev),
        rustix::fs::minor(dev)
    ));
    sys.exists().then_some(sys)
}

/// Fail if a block size cannot be used with O_DIRECT as is: the device layer
/// would bounce it through read-modify-write and measure something else.
pub fn check_alignment(config: &IobenchConfig, logical: usize) -> Result<(), IobenchError> {
    if !config.methods.contains(&Method::Direct) {
        return Ok(());
    }
    let align = logical.max(IO_ALIGN);
    match config
        .block_sizes
        .iter()
        .find(|&&bs| !bs.is_multiple_of(align))
    {
        Some(&bs) => Err(IobenchError::UnalignedBlockSize {
            bs,
            align_bytes: align,
            logical_block_bytes: logical,
        }),
        None => Ok(()),
    }
}

/// Fail if a file set would hold files smaller than the largest block.
pub fn check_file_sizes(config: &IobenchConfig) -> Result<(), IobenchError> {
    let bs = config.block_sizes.iter().copied().max().unwrap_or(0);
    for &files in &config.files {
        let per_file = per_file_bytes(config.file_size_bytes, files);
        if per_file < bs as u64 || per_file == 0 {
            return Err(IobenchError::FileTooSmall {
                total_bytes: config.file_size_bytes,
                files,
                per_file_bytes: per_file,
                bs,
            });
        }
    }
    Ok(())
}

/// Bytes available to this user on the file system of `dir` (statvfs).
pub fn available_bytes(dir: &Path) -> Result<u64, IobenchError> {
    let stat = rustix::fs::statvfs(dir).map_err(|e| IobenchError::Io {
        what: format!("cannot read the free space of {}", dir.display()),
        source: e.into(),
    })?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// True if `path` is already a fully allocated file of `len` bytes, which a
/// previous `--keep-files` run left: it is reused instead of rewritten.
fn reusable(path: &Path, len: u64) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == len && m.blocks() * 512 >= len)
}

/// Bytes that still have to be written for a set of `files` files.
fn bytes_to_write(config: &IobenchConfig, files: usize) -> u64 {
    let len = per_file_bytes(config.file_size_bytes, files);
    let paths = file_paths(&config.dir, files);
    let missing = paths.iter().filter(|p| !reusable(p, len)).count();
    len * missing as u64
}

/// Fail before writing anything if the free space is short: with
/// `keep_files` every set stays, else only one set exists at a time; a
/// `flush` database (one at a time) may exist beside a set.
pub fn check_space(config: &IobenchConfig) -> Result<(), IobenchError> {
    let workers = config.modes.iter().any(|&m| m != Mode::Flush);
    let per_set = config.files.iter().map(|&f| {
        if workers {
            bytes_to_write(config, f)
        } else {
            0
        }
    });
    let sets: u64 = if config.keep_files {
        per_set.sum()
    } else {
        per_set.max().unwrap_or(0)
    };
    let flush_db = if config.modes.contains(&Mode::Flush) {
        super::flushcase::disk_bytes(config)
    } else {
        0
    };
    let needed = sets + flush_db;
    let available = available_bytes(&config.dir)?;
    if needed > available {
        return Err(IobenchError::NotEnoughSpace {
            dir: config.dir.clone(),
            needed_bytes: needed,
            available_bytes: available,
        });
    }
    Ok(())
}

/// One set of data files, written in full; removed on drop unless kept.
#[derive(Debug)]
pub struct FileSet {
    paths: Vec<PathBuf>,
    file_bytes: u64,
    keep: bool,
    /// Bytes written to prepare the set (0 when every file was reused).
    pub written_bytes: u64,
}

impl FileSet {
    /// Create (or reuse) the set of `files` files and fill every byte.
    pub fn prepare(config: &IobenchConfig, files: usize) -> Result<Self, IobenchError> {
        let file_bytes = per_file_bytes(config.file_size_bytes, files);
        let mut set = Self {
            paths: file_paths(&config.dir, files),
            file_bytes,
            keep: config.keep_files,
            written_bytes: 0,
        };
        let mut rng = SmallRng::seed_from_u64(config.seed);
        for path in &set.paths {
            if !reusable(path, file_bytes) {
                fill(path, file_bytes, &mut rng)?;
                set.written_bytes += file_bytes;
            }
            drop_cache(path);
        }
        Ok(set)
    }

    /// Number of files.
    pub fn files(&self) -> usize {
        self.paths.len()
    }

    /// Size of each file.
    pub fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    /// Evict the set's pages from the page cache, so that buffered reads
    /// start from the device.
    pub fn drop_cache(&self) {
        self.paths.iter().for_each(|p| drop_cache(p));
    }

    /// Open every file with `method`, through the throttled model of
    /// `device` (one model shared by the set: it stands for one disk).
    pub fn open(
        &self,
        method: Method,
        device: &ThrottleSpec,
    ) -> Result<Vec<Arc<dyn Device>>, IobenchError> {
        let os = Arc::new(OsFileSystem::new(method.flush_method()));
        let mut devices: Vec<Arc<dyn Device>> = Vec::with_capacity(self.paths.len());
        for path in &self.paths {
            let what = || format!("cannot open {} ({method})", path.display());
            let file = os
                .open_file(path, OpenMode::Existing)
                .map_err(IobenchError::io(what()))?;
            if file.effective_method() != method.flush_method() {
                let dir = path.parent().unwrap_or(path).to_owned();
                return Err(IobenchError::DirectRefused(dir));
            }
            devices.push(Arc::new(file));
        }
        if device.is_unlimited() {
            return Ok(devices);
        }
        let throttled = ThrottledFileSystem::new(os, device.clone());
        self.paths
            .iter()
            .map(|path| {
                let what = format!("cannot open {} through the device model", path.display());
                throttled
                    .open(path, OpenMode::Existing)
                    .map_err(IobenchError::io(what))
            })
            .collect()
    }
}

impl Drop for FileSet {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        for path in &self.paths {
            if let Err(e) = fs::remove_file(path) {
                log::warn!("cannot remove {}: {e}", path.display());
            }
        }
    }
}

/// Write `len` bytes of random data to `path` (not sparse: every block is
/// allocated), then make them durable.
fn fill(path: &Path, len: u64, rng: &mut SmallRng) -> Result<(), IobenchError> {
    let what = || format!("cannot write the data file {}", path.display());
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(IobenchError::io(what()))?;
    let mut chunk = vec![0u8; FILL_CHUNK];
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(FILL_CHUNK as u64) as usize;
        rng.fill_bytes(&mut chunk[..n]);
        file.write_all(&chunk[..n])
            .map_err(IobenchError::io(what()))?;
        done += n as u64;
    }
    file.sync_all().map_err(IobenchError::io(what()))
}

/// Ask the kernel to drop the clean cached pages of `path`; best effort (a
/// file system without a page cache has nothing to drop).
fn drop_cache(path: &Path) {
    let Ok(file) = File::open(path) else {
        return;
    };
    if let Err(e) = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed) {
        log::debug!("posix_fadvise(DONTNEED) on {}: {e}", path.display());
    }
}
