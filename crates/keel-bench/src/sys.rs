//! Facts about the running process and machine, for reports.

/// Peak resident set size of this process in bytes (VmHWM), if known.
pub fn peak_rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// CPU time (user + system, every thread) this process has used so far,
/// in microseconds, if known.
pub fn process_cpu_us() -> Option<u64> {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::uninit();
    // SAFETY: getrusage writes a whole `rusage` into the pointer it is
    // given and reads nothing from it; it is read only on success.
    #[allow(unsafe_code)]
    let ru = unsafe {
        if libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) != 0 {
            return None;
        }
        ru.assume_init()
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Some(us(ru.ru_utime) + us(ru.ru_stime))
}

/// Total physical memory in bytes, if known.
pub fn total_ram_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// `write_bytes` of `/proc/PID/io` of process `pid` (this process if
/// `None`): `None` off Linux, without task I/O accounting, or if the
/// process is not ours to read.
///
/// This is **not** the bytes the process wrote to storage, and no figure
/// of the bench is derived from it (it is kept as a raw, labelled field).
/// The kernel's Documentation/filesystems/proc.rst defines the field as
/// "the number of bytes which this process caused to be sent to the
/// storage layer", and counts it when a page-cache page is *dirtied*, by
/// the size of the page (folio) dirtied, not by the bytes written into it.
/// On a file system with large folios (ext4 and XFS on recent kernels)
/// every small buffered write followed by a sync (a redo log's commit)
/// dirties a whole folio again, and is charged all of it: 1000 writes of
/// 500 bytes, each followed by `fdatasync`, were charged 2 GB on a 6.18
/// kernel. Bytes written are measured by the engine's own counters and by
/// the disk's ([`BlockDevice::written_bytes`]).
pub fn process_write_bytes(pid: Option<u32>) -> Option<u64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/io"),
        None => "/proc/self/io".to_string(),
    };
    let s = std::fs::read_to_string(path).ok()?;
    let line = s.lines().find(|l| l.starts_with("write_bytes:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The block device a directory's file system is on: the device its
/// `st_dev` names, which is the partition (not the whole disk) when the
/// file system is on a partition, or a device-mapper or md device. Its
/// sectors-written counter is what reached the disk from that file system,
/// from every process that wrote to it (the bench's run is not alone on a
/// shared machine), after the page cache merged or dropped what it could.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDevice {
    /// Major device number.
    pub major: u32,
    /// Minor device number.
    pub minor: u32,
    /// The kernel's name for it (`sda2`, `nvme0n1p1`, `vda`, `dm-0`).
    pub name: String,
    /// True if it is a partition of a disk.
    pub partition: bool,
}

impl BlockDevice {
    /// The block device holding `path`; an error saying why there is none
    /// (a tmpfs, overlay, btrfs or network file system has no single block
    /// device behind its `st_dev`).
    pub fn of(path: &std::path::Path) -> Result<BlockDevice, String> {
        let meta =
            std::fs::metadata(path).map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
        let dev = std::os::unix::fs::MetadataExt::dev(&meta);
        let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
        let sys = std::path::PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
        if !sys.join("stat").exists() {
            return Err(format!(
                "the file system of {} is on device {major}:{minor}, which is not a block \
                 device (tmpfs, overlay, btrfs or a network file system)",
                path.display()
            ));
        }
        let name = std::fs::canonicalize(&sys)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| format!("{major}:{minor}"));
        Ok(BlockDevice {
            major,
            minor,
            name,
            partition: sys.join("partition").exists(),
        })
    }

    /// Bytes written to the device since boot: its sectors written (the
    /// seventh field of `/sys/dev/block/MAJ:MIN/stat`, the same counter as
    /// in `/proc/diskstats`; always in 512-byte units, whatever the
    /// device's sector size: the kernel's Documentation/block/stat.rst)
    /// times 512. `None` if it cannot be read.
    pub fn written_bytes(&self) -> Option<u64> {
        let s =
            std::fs::read_to_string(format!("/sys/dev/block/{}:{}/stat", self.major, self.minor))
                .ok()?;
        parse_sectors_written(&s).map(|n| n * 512)
    }
}

impl std::fmt::Display for BlockDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}:{}, {})",
            self.name,
            self.major,
            self.minor,
            if self.partition {
                "partition"
            } else {
                "whole device"
            }
        )
    }
}

/// Sectors written: the seventh field of a block device's `stat` file.
fn parse_sectors_written(stat: &str) -> Option<u64> {
    stat.split_whitespace().nth(6)?.parse().ok()
}

/// Peak resident set size of process `pid` in bytes (VmHWM), if known.
pub fn peak_rss_bytes_of(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Give the memory the allocator holds free back to the kernel (glibc's
/// `malloc_trim`; nothing elsewhere). Loading leaves megabytes free in
/// each thread's malloc arena (the loaders' rows and index entries), which
/// glibc keeps, and which would otherwise count in the next run's RSS as
/// if the engine used it.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim only returns free memory to the kernel; it has no
    // preconditions and touches no memory in use.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Start this process's peak resident set size afresh (Linux: `5` to
/// `/proc/self/clear_refs`), so that a run's peak is its own and not an
/// earlier run's in the same process. False if the kernel refused.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sectors_written_is_the_seventh_field() {
        let stat = "32201471    12160 1001680842  4869947 27295785   222312 1366032640  5011435 \
                    0  1963308 10185748    91439       13 246099776    16191  3690179   288173\n";
        assert_eq!(parse_sectors_written(stat), Some(1_366_032_640));
        assert_eq!(parse_sectors_written("1 2 3"), None);
    }

    #[test]
    fn a_directory_in_memory_has_no_block_device() {
        // /dev/shm is a tmpfs on Linux: not measured, not zero.
        let shm = std::path::Path::new("/dev/shm");
        if shm.exists() {
            let e = BlockDevice::of(shm).unwrap_err();
            assert!(e.contains("not a block device"), "{e}");
        }
    }

    #[test]
    fn a_directory_on_a_disk_has_a_growing_counter() {
        let dir = tempfile::tempdir().unwrap();
        let Ok(dev) = BlockDevice::of(dir.path()) else {
            return; // the temporary directory is in memory here
        };
        let before = dev.written_bytes().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, vec![1u8; 1 << 20]).unwrap();
        std::fs::File::open(&f).unwrap().sync_all().unwrap();
        let after = dev.written_bytes().unwrap();
        assert!(after >= before + (1 << 20), "{dev}: {before} -> {after}");
    }
}
