//! Real files: positional reads and writes through the OS, opened according to
//! a [`FlushMethod`] (InnoDB's `innodb_flush_method`).
//!
//! With `O_DIRECT` the kernel requires the buffer address, the file offset and
//! the length to be multiples of the logical block size. The engine's pages
//! always are; anything else still works here, through an aligned bounce
//! buffer (reads fetch the aligned superset; writes read, modify and write the
//! aligned superset under an exclusive lock, then trim the file back to its
//! logical length), so callers never see EINVAL for alignment.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;

use super::{
    AlignedBuf, AtomicWriteUnit, Device, DirLock, FileSystem, LockError, OpenMode, IO_ALIGN,
};

const ALIGN_U64: u64 = IO_ALIGN as u64;

/// How data files are opened and made durable (InnoDB's `flush_method`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FlushMethod {
    /// `O_DIRECT`: bypass the page cache; `sync` is `fdatasync`, which still
    /// flushes the device's write cache and any size change. Falls back to
    /// [`FlushMethod::Fsync`] on file systems that refuse `O_DIRECT`.
    #[default]
    ODirect,
    /// Buffered writes; `sync` is `fdatasync`.
    Fsync,
    /// `O_DSYNC`: every write returns once durable; `sync` is still an
    /// `fdatasync` (cheap, nothing is pending) so callers need not care.
    ODsync,
    /// Buffered writes and `sync` does nothing: data is NOT durable. For tests
    /// and benchmarks that must not measure the disk only.
    NoSync,
}

impl FlushMethod {
    /// Every method, in the order they are documented.
    pub const ALL: [FlushMethod; 4] = [Self::ODirect, Self::Fsync, Self::ODsync, Self::NoSync];

    /// The canonical name, as accepted by `from_str` and printed by `Display`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ODirect => "O_DIRECT",
            Self::Fsync => "fsync",
            Self::ODsync => "O_DSYNC",
            Self::NoSync => "nosync",
        }
    }
}

impl fmt::Display for FlushMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A flush method name that is not one of the accepted spellings.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown flush method `{0}`: expected one of O_DIRECT (or direct), fsync, O_DSYNC (or dsync), nosync")]
pub struct ParseFlushMethodError(pub String);

impl FromStr for FlushMethod {
    type Err = ParseFlushMethodError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "o_direct" | "direct" => Ok(Self::ODirect),
            "fsync" => Ok(Self::Fsync),
            "o_dsync" | "dsync" => Ok(Self::ODsync),
            "nosync" => Ok(Self::NoSync),
            _ => Err(ParseFlushMethodError(s.to_owned())),
        }
    }
}

impl serde::Serialize for FlushMethod {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for FlushMethod {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// Opens real files with one [`FlushMethod`].
#[derive(Debug)]
pub struct OsFileSystem {
    method: FlushMethod,
    direct_fallbacks: AtomicU64,
    warned: AtomicBool,
}

impl OsFileSystem {
    /// A file system whose files use `method`.
    pub fn new(method: FlushMethod) -> Self {
        Self {
            method,
            direct_fallbacks: AtomicU64::new(0),
            warned: AtomicBool::new(false),
        }
    }

    /// The method asked for (a file may have fallen back, see
    /// [`OsFile::effective_method`]).
    pub fn method(&self) -> FlushMethod {
        self.method
    }

    /// How many files opened so far fell back from `O_DIRECT` to `fsync`
    /// because their file system refused `O_DIRECT`.
    pub fn direct_fallbacks(&self) -> u64 {
        self.direct_fallbacks.load(Ordering::Relaxed)
    }

    /// Open `path` as a concrete [`OsFile`] (the trait's `open` wraps this).
    pub fn open_file(&self, path: &Path, mode: OpenMode) -> io::Result<OsFile> {
        self.open_with(path, mode, |p| {
            open_raw(p, OpenMode::Existing, libc::O_DIRECT)
        })
    }

    /// `open_file` with the `O_DIRECT` open injectable, so the fallback can be
    /// tested on file systems that accept `O_DIRECT`.
    fn open_with(
        &self,
        path: &Path,
        mode: OpenMode,
        open_direct: impl FnOnce(&Path) -> io::Result<File>,
    ) -> io::Result<OsFile> {
        let (file, method) = match self.method {
            // Nothing is written through it, so there is nothing to sync,
            // and a plain open reads any file system.
            _ if mode == OpenMode::ReadOnly => (open_raw(path, mode, 0)?, FlushMethod::NoSync),
            FlushMethod::ODirect => {
                // Create the file without O_DIRECT first: on a file system that
                // refuses O_DIRECT, open(O_CREAT|O_DIRECT) may create the file
                // and then fail, leaving a retry with create_new to fail too.
                let plain = match mode {
                    OpenMode::CreateNew => Some(open_raw(path, mode, 0)?),
                    OpenMode::Existing | OpenMode::ReadOnly => None,
                };
                match open_direct(path) {
                    Ok(file) => (file, FlushMethod::ODirect),
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                        self.note_fallback(path);
                        let file = match plain {
                            Some(file) => file,
                            None => open_raw(path, mode, 0)?,
                        };
                        (file, FlushMethod::Fsync)
                    }
                    Err(e) => return Err(e),
                }
            }
            FlushMethod::ODsync => (open_raw(path, mode, libc::O_DSYNC)?, FlushMethod::ODsync),
            method @ (FlushMethod::Fsync | FlushMethod::NoSync) => {
                (open_raw(path, mode, 0)?, method)
            }
        };
        Ok(OsFile {
            file,
            path: path.to_owned(),
            method,
            rmw: RwLock::new(()),
        })
    }

    fn note_fallback(&self, path: &Path) {
        self.direct_fallbacks.fetch_add(1, Ordering::Relaxed);
        if !self.warned.swap(true, Ordering::Relaxed) {
            log::warn!(
                "{}: the file system refuses O_DIRECT (EINVAL); using fsync instead for this \
                 file and any other that refuses it (those are logged at debug level)",
                path.display()
            );
        } else {
            log::debug!("{}: O_DIRECT refused, using fsync", path.display());
        }
    }
}

impl FileSystem for OsFileSystem {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Arc<dyn Device>> {
        Ok(Arc::new(self.open_file(path, mode)?))
    }

    fn lock_dir(&self, dir: &Path) -> Result<DirLock, LockError> {
        super::lock::lock_os(dir)
    }

    fn lock_dir_shared(&self, dir: &Path) -> Result<DirLock, LockError> {
        super::lock::lock_os_shared(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        // `nosync` promises nothing durable, names included.
        if self.method == FlushMethod::NoSync {
            return Ok(());
        }
        File::open(dir)?.sync_all()
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn create_dirs(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        let mut missing: Vec<PathBuf> = dir
            .ancestors()
            .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
            .map(Path::to_path_buf)
            .collect();
        missing.reverse();
        let mut created = Vec::with_capacity(missing.len());
        for d in missing {
            match std::fs::create_dir(&d) {
                Ok(()) => created.push(d),
                // Another process made it meanwhile: not ours to report.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => {}
                Err(e) => return Err(e),
            }
        }
        Ok(created)
    }
}

fn open_raw(path: &Path, mode: OpenMode, flags: libc::c_int) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options
        .read(true)
        .write(mode != OpenMode::ReadOnly)
        .custom_flags(flags);
    if mode == OpenMode::CreateNew {
        options.create_new(true);
    }
    options.open(path)
}

/// One open real file.
#[derive(Debug)]
pub struct OsFile {
    file: File,
    path: PathBuf,
    method: FlushMethod,
    /// Only used with O_DIRECT: aligned writes share it, an unaligned write
    /// (read-modify-write of whole blocks, then a trim) holds it exclusively.
    rmw: RwLock<()>,
}

impl OsFile {
    /// The method in force for this file: [`FlushMethod::Fsync`] where
    /// `O_DIRECT` was asked for but refused by the file system.
    pub fn effective_method(&self) -> FlushMethod {
        self.method
    }

    fn direct(&self) -> bool {
        self.method == FlushMethod::ODirect
    }

    /// `Device::allocate` with the `fallocate` call injectable, so the
    /// fallback can be tested on file systems that have it.
    fn allocate_with(
        &self,
        len: u64,
        fallocate: impl FnOnce(&File, u64, u64) -> rustix::io::Result<()>,
    ) -> io::Result<()> {
        let _exclusive = self.rmw.write();
        let old = self.file.metadata()?.len();
        if old >= len {
            return Ok(());
        }
        // fallocate reserves the blocks (ENOSPC here, not at a later
        // write); a file system without it gets zeros written, which
        // allocate the blocks as well (a sparse extension would not).
        match fallocate(&self.file, old, len - old) {
            Ok(()) => Ok(()),
            Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => {
                self.write_zeros(old, len)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Extend the file from `old` to `len` bytes by writing zeros, in
    /// aligned blocks (O_DIRECT needs them): the block holding `old` is
    /// already allocated, so the zeros start at the next block boundary,
    /// and a last partial block is trimmed back to `len`. The caller holds
    /// `rmw` exclusively.
    fn write_zeros(&self, old: u64, len: u64) -> io::Result<()> {
        const CHUNK: u64 = 1 << 20;
        let start = old.next_multiple_of(ALIGN_U64);
        let end = len.next_multiple_of(ALIGN_U64);
        if start > old {
            self.file.set_len(start.min(len))?;
        }
        let zeros = AlignedBuf::new(CHUNK.min(end.saturating_sub(start)) as usize);
        let mut at = start;
        while at < end {
            let n = (end - at).min(CHUNK) as usize;
            self.file.write_all_at(&zeros[..n], at)?;
            at += n as u64;
        }
        if end > len {
            self.file.set_len(len)?;
        }
        Ok(())
    }

    /// Read into aligned `buf` at aligned `offset` until it is full or the file
    /// ends; returns the number of bytes read.
    fn read_direct_upto(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => {
                    done += n;
                    // O_DIRECT reads stop short of a block boundary only at
                    // the end of the file; continuing would be unaligned.
                    if done % IO_ALIGN != 0 {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    fn read_direct(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if is_aligned(buf.as_ptr(), offset, buf.len()) {
            let n = self.read_direct_upto(buf, offset)?;
            return check_eof(n, buf.len(), offset);
        }
        let (start, end) = aligned_span(offset, buf.len());
        let mut bounce = AlignedBuf::new(span_len(start, end)?);
        let n = self.read_direct_upto(&mut bounce, start)?;
        let skip = (offset - start) as usize;
        check_eof(n.saturating_sub(skip), buf.len(), offset)?;
        buf.copy_from_slice(&bounce[skip..skip + buf.len()]);
        Ok(())
    }

    fn write_direct(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if offset.is_multiple_of(ALIGN_U64) && buf.len().is_multiple_of(IO_ALIGN) {
            let _shared = self.rmw.read();
            if is_aligned(buf.as_ptr(), 0, 0) {
                return self.file.write_all_at(buf, offset);
            }
            return self.file.write_all_at(&AlignedBuf::from_slice(buf), offset);
        }
        let _exclusive = self.rmw.write();
        let old_len = self.file.metadata()?.len();
        let (start, end) = aligned_span(offset, buf.len());
        let mut bounce = AlignedBuf::new(span_len(start, end)?);
        // Only the first and last blocks hold bytes outside `buf`; the
        // superset read fetches them (and zeros past the end of the file).
        self.read_direct_upto(&mut bounce, start)?;
        let skip = (offset - start) as usize;
        bounce[skip..skip + buf.len()].copy_from_slice(buf);
        self.file.write_all_at(&bounce, start)?;
        let new_len = old_len.max(offset + buf.len() as u64);
        if end > new_len {
            self.file.set_len(new_len)?;
        }
        Ok(())
    }
}

fn is_aligned(ptr: *const u8, offset: u64, len: usize) -> bool {
    (ptr as usize).is_multiple_of(IO_ALIGN)
        && offset.is_multiple_of(ALIGN_U64)
        && len.is_multiple_of(IO_ALIGN)
}

/// The block-aligned byte range `[start, end)` covering `len` bytes at `offset`.
fn aligned_span(offset: u64, len: usize) -> (u64, u64) {
    let start = offset - offset % ALIGN_U64;
    let end = (offset + len as u64).div_ceil(ALIGN_U64) * ALIGN_U64;
    (start, end)
}

fn span_len(start: u64, end: u64) -> io::Result<usize> {
    usize::try_from(end - start).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn check_eof(got: usize, want: usize, offset: u64) -> io::Result<()> {
    if got >= want {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("read of {want} bytes at offset {offset} ends past the end of the file"),
    ))
}

impl Device for OsFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        if self.direct() {
            return self.read_direct(buf, offset);
        }
        self.file.read_exact_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        if self.direct() {
            return self.write_direct(buf, offset);
        }
        self.file.write_all_at(buf, offset)
    }

    fn sync(&self) -> io::Result<()> {
        match self.method {
            FlushMethod::NoSync => Ok(()),
            FlushMethod::ODirect | FlushMethod::Fsync | FlushMethod::ODsync => {
                self.file.sync_data()
            }
        }
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let _exclusive = self.rmw.write();
        self.file.set_len(len)
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        self.allocate_with(len, |file, offset, n| {
            rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), offset, n)
        })
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn atomic_write_unit(&self) -> AtomicWriteUnit {
        atomic::unit(&self.file, self.method)
    }

    fn write_atomic_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        if !self.direct() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "{}: untorn writes need O_DIRECT, and the file is opened with {}",
                    self.path.display(),
                    self.method
                ),
            ));
        }
        let _shared = self.rmw.read();
        let bounce;
        let data = if is_aligned(buf.as_ptr(), 0, 0) {
            buf
        } else {
            bounce = AlignedBuf::from_slice(buf);
            &bounce[..]
        };
        let n = atomic::pwrite(&self.file, data, offset)?;
        if n != buf.len() {
            // An atomic write lands whole or fails; a short count is a
            // kernel that ignored the flag.
            return Err(io::Error::other(format!(
                "{}: atomic write of {} bytes at {offset} wrote {n}",
                self.path.display(),
                buf.len()
            )));
        }
        Ok(())
    }
}

/// Linux's untorn writes: `statx` with `STATX_WRITE_ATOMIC` reports the
/// unit (`stx_atomic_write_unit_min`/`_max`, Linux 6.11+), and `pwritev2`
/// with `RWF_ATOMIC` writes within it. Constants from the kernel's uapi
/// headers (`include/uapi/linux/stat.h`: `STATX_WRITE_ATOMIC 0x00010000`,
/// `STATX_ATTR_WRITE_ATOMIC 0x00400000`; `include/uapi/linux/fs.h`:
/// `RWF_ATOMIC 0x00000040`), through the `libc` crate, which has them.
/// The rules (kernel documentation, "Atomic writes", and `statx(2)`): the
/// file must be opened with `O_DIRECT`; a write's length must be a power
/// of two in the unit and its offset a multiple of its length.
#[cfg(target_os = "linux")]
mod atomic {
    use std::fs::File;
    use std::io;

    use super::{AtomicWriteUnit, FlushMethod};

    const STATX_ATTR_WRITE_ATOMIC: u64 = 0x0040_0000;

    pub(super) fn unit(file: &File, method: FlushMethod) -> AtomicWriteUnit {
        use rustix::fs::{statx, AtFlags, StatxFlags};
        let mask = StatxFlags::from_bits_retain(libc::STATX_WRITE_ATOMIC);
        let st = match statx(file, "", AtFlags::EMPTY_PATH, mask) {
            Ok(st) => st,
            Err(e) if e == rustix::io::Errno::NOSYS => {
                return AtomicWriteUnit::None("the kernel has no statx".into())
            }
            Err(e) => return AtomicWriteUnit::None(format!("statx failed: {e}")),
        };
        if st.stx_mask & libc::STATX_WRITE_ATOMIC == 0 {
            return AtomicWriteUnit::None(
                "the kernel reports no atomic write unit (statx STATX_WRITE_ATOMIC needs Linux \
                 6.11 or later)"
                    .into(),
            );
        }
        let supported = st.stx_attributes.bits() & STATX_ATTR_WRITE_ATOMIC != 0;
        let (min, max) = (
            st.stx_atomic_write_unit_min as usize,
            st.stx_atomic_write_unit_max as usize,
        );
        if !supported || max == 0 {
            return AtomicWriteUnit::None(
                "the file system or device does not support untorn writes (statx reports no \
                 atomic write unit for the file)"
                    .into(),
            );
        }
        if method != FlushMethod::ODirect {
            return AtomicWriteUnit::None(format!(
                "the device supports untorn writes of {min}..={max} bytes, but only with \
                 O_DIRECT and the file is opened with {method}; set flush_method = O_DIRECT"
            ));
        }
        AtomicWriteUnit::Untorn { min, max }
    }

    pub(super) fn pwrite(file: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
        use rustix::io::{pwritev2, ReadWriteFlags};
        let flags = ReadWriteFlags::from_bits_retain(libc::RWF_ATOMIC as u32);
        loop {
            match pwritev2(file, &[io::IoSlice::new(buf)], offset, flags) {
                Ok(n) => return Ok(n),
                Err(e) if e == rustix::io::Errno::INTR => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod atomic {
    use std::fs::File;
    use std::io;

    use super::{AtomicWriteUnit, FlushMethod};

    pub(super) fn unit(_: &File, _: FlushMethod) -> AtomicWriteUnit {
        AtomicWriteUnit::None("untorn writes are detected on Linux only (statx)".into())
    }

    pub(super) fn pwrite(_: &File, _: &[u8], _: u64) -> io::Result<usize> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    fn open(method: FlushMethod, dir: &Path, name: &str) -> OsFile {
        OsFileSystem::new(method)
            .open_file(&dir.join(name), OpenMode::CreateNew)
            .unwrap()
    }

    #[test]
    fn round_trip_for_each_method() {
        let dir = tempfile::tempdir().unwrap();
        for method in FlushMethod::ALL {
            let name = format!("f-{method}");
            let file = open(method, dir.path(), &name);
            let page = AlignedBuf::from_slice(&pattern(16384, 7));
            file.write_at(&page, 16384).unwrap();
            file.sync().unwrap();
            assert_eq!(file.len().unwrap(), 32768);
            let mut back = AlignedBuf::new(16384);
            file.read_at(&mut back, 16384).unwrap();
            assert_eq!(back, page, "{method}");
            let mut hole = AlignedBuf::new(4096);
            file.read_at(&mut hole, 0).unwrap();
            assert!(hole.iter().all(|&b| b == 0), "{method}");
            assert_eq!(file.path(), dir.path().join(&name));
            drop(file);

            let fs = OsFileSystem::new(method);
            let again = fs
                .open(&dir.path().join(&name), OpenMode::Existing)
                .unwrap();
            let mut back = vec![0; 16384];
            again.read_at(&mut back, 16384).unwrap();
            assert_eq!(back, &page[..], "{method} after reopen");
        }
    }

    #[test]
    fn direct_io_accepts_unaligned_buffers_offsets_and_lengths() {
        let dir = tempfile::tempdir().unwrap();
        let file = open(FlushMethod::ODirect, dir.path(), "direct");
        let mut model = vec![0u8; 0];
        // Unaligned memory (a Vec slice at odd offset), offsets and lengths,
        // including ones that straddle blocks and extend the file.
        let cases: [(u64, usize); 6] = [
            (0, 100),
            (4000, 200),
            (8192, 4096),
            (10_000, 9000),
            (5, 1),
            (30_000, 3),
        ];
        for (i, &(offset, len)) in cases.iter().enumerate() {
            let backing = pattern(len + 1, i as u8);
            let data = &backing[1..];
            file.write_at(data, offset).unwrap();
            let end = offset as usize + len;
            if model.len() < end {
                model.resize(end, 0);
            }
            model[offset as usize..end].copy_from_slice(data);
            assert_eq!(file.len().unwrap(), model.len() as u64, "case {i}");
        }
        let mut all = vec![0u8; model.len() + 1];
        file.read_at(&mut all[1..], 0).unwrap();
        assert_eq!(&all[1..], &model[..]);
        let mut piece = vec![0u8; 7000];
        file.read_at(&mut piece, 3333).unwrap();
        assert_eq!(&piece[..], &model[3333..10_333]);
        let mut tail = vec![0u8; 3];
        file.read_at(&mut tail, 30_000).unwrap();
        assert_eq!(&tail[..], &model[30_000..]);
        if file.effective_method() != FlushMethod::ODirect {
            eprintln!(
                "O_DIRECT refused in {}: the buffered path was tested",
                dir.path().display()
            );
        }
    }

    #[test]
    fn concurrent_unaligned_direct_writes_lose_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = open(FlushMethod::ODirect, dir.path(), "shared");
        const RECORD: usize = 100;
        // Four threads interleave 100-byte records, so every 4 KiB block is
        // read, modified and written by all of them.
        std::thread::scope(|scope| {
            for t in 0..4usize {
                let file = &file;
                scope.spawn(move || {
                    for i in 0..60usize {
                        let record = [(t * 60 + i) as u8; RECORD];
                        file.write_at(&record, ((i * 4 + t) * RECORD) as u64)
                            .unwrap();
                    }
                });
            }
        });
        let mut all = vec![0u8; 240 * RECORD];
        file.read_at(&mut all, 0).unwrap();
        for (n, record) in all.chunks(RECORD).enumerate() {
            let (i, t) = (n / 4, n % 4);
            assert!(
                record.iter().all(|&b| b == (t * 60 + i) as u8),
                "record {n}"
            );
        }
        assert_eq!(file.len().unwrap(), all.len() as u64);
    }

    #[test]
    fn read_past_end_is_unexpected_eof() {
        let dir = tempfile::tempdir().unwrap();
        for method in FlushMethod::ALL {
            let file = open(method, dir.path(), &format!("eof-{method}"));
            file.write_at(&AlignedBuf::from_slice(&[1; 4096]), 0)
                .unwrap();
            let mut buf = AlignedBuf::new(8192);
            let err = file.read_at(&mut buf, 0).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{method}");
            let err = file.read_at(&mut buf[..4096], 4096).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{method}");
            let mut odd = vec![0; 10];
            let err = file.read_at(&mut odd, 4090).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{method}");
        }
    }

    #[test]
    fn direct_read_of_file_with_partial_last_block() {
        let dir = tempfile::tempdir().unwrap();
        let file = open(FlushMethod::ODirect, dir.path(), "partial");
        file.set_len(5000).unwrap();
        let mut buf = AlignedBuf::new(8192);
        let err = file.read_at(&mut buf, 0).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        let mut first = AlignedBuf::new(4096);
        file.read_at(&mut first, 0).unwrap();
        let mut rest = vec![1u8; 904];
        file.read_at(&mut rest, 4096).unwrap();
        assert!(rest.iter().all(|&b| b == 0));
    }

    #[test]
    fn create_new_on_existing_file_fails() {
        let dir = tempfile::tempdir().unwrap();
        for method in FlushMethod::ALL {
            let path = dir.path().join(format!("x-{method}"));
            let fs = OsFileSystem::new(method);
            fs.open(&path, OpenMode::CreateNew).unwrap();
            let err = fs.open(&path, OpenMode::CreateNew).err().unwrap();
            assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{method}");
        }
    }

    #[test]
    fn existing_requires_the_file() {
        let dir = tempfile::tempdir().unwrap();
        for method in FlushMethod::ALL {
            let fs = OsFileSystem::new(method);
            let err = fs
                .open(&dir.path().join("missing"), OpenMode::Existing)
                .err()
                .unwrap();
            assert_eq!(err.kind(), io::ErrorKind::NotFound, "{method}");
        }
    }

    #[test]
    fn set_len_grows_and_truncates() {
        let dir = tempfile::tempdir().unwrap();
        let file = open(FlushMethod::ODirect, dir.path(), "len");
        file.set_len(1 << 20).unwrap();
        assert_eq!(file.len().unwrap(), 1 << 20);
        file.set_len(4096).unwrap();
        assert_eq!(file.len().unwrap(), 4096);
    }

    /// Bytes of disk the file holds.
    fn allocated(file: &OsFile) -> u64 {
        use std::os::unix::fs::MetadataExt;
        file.file.metadata().unwrap().blocks() * 512
    }

    /// `allocate` leaves no hole, through fallocate or, where the file
    /// system has none, by writing zeros; what the file held stays, and
    /// the rest reads as zeros.
    #[test]
    fn allocate_reserves_every_block_with_or_without_fallocate() {
        let dir = tempfile::tempdir().unwrap();
        for method in FlushMethod::ALL {
            for fallback in [false, true] {
                let file = open(method, dir.path(), &format!("alloc-{method}-{fallback}"));
                file.write_at(&pattern(5000, 3), 0).unwrap();
                let len = (3 << 20) + 100;
                if fallback {
                    let refuse = |_: &File, _, _| Err(rustix::io::Errno::OPNOTSUPP);
                    file.allocate_with(len, refuse).unwrap();
                } else {
                    file.allocate(len).unwrap();
                }
                let case = format!("{method}, fallback {fallback}");
                assert_eq!(file.len().unwrap(), len, "{case}");
                assert!(
                    allocated(&file) >= len,
                    "{case}: {} bytes",
                    allocated(&file)
                );
                let mut back = vec![0; len as usize];
                file.read_at(&mut back, 0).unwrap();
                assert_eq!(&back[..5000], &pattern(5000, 3)[..], "{case}");
                assert!(back[5000..].iter().all(|&b| b == 0), "{case}");
                file.allocate(4096).unwrap();
                assert_eq!(file.len().unwrap(), len, "{case}: allocate never shrinks");
            }
        }
    }

    #[test]
    fn remove_and_sync_dir() {
        let dir = tempfile::tempdir().unwrap();
        for method in FlushMethod::ALL {
            let fs = OsFileSystem::new(method);
            let path = dir.path().join(format!("gone-{method}"));
            fs.open(&path, OpenMode::CreateNew).unwrap();
            fs.sync_dir(dir.path()).unwrap();
            fs.remove(&path).unwrap();
            fs.sync_dir(dir.path()).unwrap();
            assert!(!path.exists(), "{method}");
            assert!(fs.remove(&path).is_err(), "{method}");
        }
    }

    #[test]
    fn create_dirs_reports_the_directories_it_made_outermost_first() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem::new(FlushMethod::Fsync);
        let leaf = dir.path().join("a/b/c");
        let made = fs.create_dirs(&leaf).unwrap();
        let want: Vec<PathBuf> = ["a", "a/b", "a/b/c"]
            .iter()
            .map(|d| dir.path().join(d))
            .collect();
        assert_eq!(made, want);
        assert!(leaf.is_dir());
        assert_eq!(fs.create_dirs(&leaf).unwrap(), Vec::<PathBuf>::new());
        // A file in the way is an error, not a directory.
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        assert!(fs.create_dirs(&dir.path().join("f/g")).is_err());
    }

    #[test]
    fn refused_direct_falls_back_to_fsync() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem::new(FlushMethod::ODirect);
        let einval = |_: &Path| Err(io::Error::from_raw_os_error(libc::EINVAL));
        for mode in [OpenMode::CreateNew, OpenMode::Existing] {
            let file = fs
                .open_with(&dir.path().join("fallback"), mode, einval)
                .unwrap();
            assert_eq!(file.effective_method(), FlushMethod::Fsync);
            file.write_at(b"odd length", 3).unwrap();
            let mut back = [0u8; 10];
            file.read_at(&mut back, 3).unwrap();
            assert_eq!(&back, b"odd length");
            file.sync().unwrap();
        }
        assert_eq!(fs.direct_fallbacks(), 2);
        assert_eq!(fs.method(), FlushMethod::ODirect);

        let other = |_: &Path| Err(io::Error::from_raw_os_error(libc::EACCES));
        let err = fs
            .open_with(&dir.path().join("fallback"), OpenMode::Existing, other)
            .err()
            .unwrap();
        assert_eq!(err.raw_os_error(), Some(libc::EACCES));
    }

    #[test]
    fn direct_io_on_tmpfs_works_either_way() {
        let Ok(dir) = tempfile::tempdir_in("/dev/shm") else {
            return;
        };
        let file = open(FlushMethod::ODirect, dir.path(), "shm");
        assert!(matches!(
            file.effective_method(),
            FlushMethod::ODirect | FlushMethod::Fsync
        ));
        file.write_at(&pattern(5000, 1), 1).unwrap();
        let mut back = vec![0; 5000];
        file.read_at(&mut back, 1).unwrap();
        assert_eq!(back, pattern(5000, 1));
    }

    #[test]
    fn flush_method_parses_and_prints() {
        let cases = [
            ("O_DIRECT", FlushMethod::ODirect),
            ("o_direct", FlushMethod::ODirect),
            ("Direct", FlushMethod::ODirect),
            ("fsync", FlushMethod::Fsync),
            ("FSYNC", FlushMethod::Fsync),
            ("O_DSYNC", FlushMethod::ODsync),
            ("dsync", FlushMethod::ODsync),
            ("nosync", FlushMethod::NoSync),
            ("NoSync", FlushMethod::NoSync),
        ];
        for (text, method) in cases {
            assert_eq!(text.parse::<FlushMethod>().unwrap(), method, "{text}");
        }
        for method in FlushMethod::ALL {
            assert_eq!(method.to_string().parse::<FlushMethod>().unwrap(), method);
        }
        assert_eq!(FlushMethod::ODirect.to_string(), "O_DIRECT");
        assert_eq!(FlushMethod::ODsync.to_string(), "O_DSYNC");
        assert_eq!(FlushMethod::default(), FlushMethod::ODirect);
        let err = "O_SYNC".parse::<FlushMethod>().unwrap_err().to_string();
        assert!(
            err.contains("`O_SYNC`") && err.contains("fsync") && err.contains("nosync"),
            "{err}"
        );
    }

    #[test]
    fn flush_method_serde_uses_names() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct Opts {
            flush_method: FlushMethod,
        }
        let text = toml::to_string(&Opts {
            flush_method: FlushMethod::ODsync,
        })
        .unwrap();
        assert_eq!(text.trim(), "flush_method = \"O_DSYNC\"");
        let opts: Opts = toml::from_str("flush_method = \"direct\"").unwrap();
        assert_eq!(opts.flush_method, FlushMethod::ODirect);
        let err = toml::from_str::<Opts>("flush_method = \"sometimes\"")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("unknown flush method"), "{err}");
    }
}
