//! A write limit on a real block device, through the kernel's cgroup I/O
//! controller, so that Keel and another engine (MariaDB's InnoDB) meet the
//! same slow disk: cgroup v1's `blkio.throttle.write_iops_device` /
//! `write_bps_device`, or cgroup v2's `io.max` (`wiops=`, `wbps=`).
//!
//! [`Throttle::create`] makes a cgroup of its own (`keel-throttle-PID`)
//! with the limit on the device holding a given path (the whole disk when
//! the path is on a partition); [`Throttle::add`] moves a process (every
//! thread of it) into the cgroup. Dropping the [`Throttle`] moves the
//! processes still in it back to the root cgroup and removes it, so that a
//! failed run leaves no limit behind.
//!
//! What the kernel throttles: writes issued by the cgroup's processes.
//! Direct I/O (Keel's data files and InnoDB's with `O_DIRECT`) is counted
//! as issued. Buffered writes that the kernel writes back later (a redo
//! log without `O_DIRECT`) are counted under cgroup v2 (writeback is
//! attributed to the cgroup that dirtied the pages) but not under v1,
//! where they escape the limit; both engines are then treated alike.
//! Needs root; an error says what is missing.

use std::path::{Path, PathBuf};

/// A limit on writes to one device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteLimit {
    /// Write operations per second (`None`: not limited).
    pub iops: Option<u64>,
    /// Bytes written per second (`None`: not limited).
    pub bytes_per_s: Option<u64>,
}

impl WriteLimit {
    /// True if neither the IOPS nor the bandwidth is limited.
    pub fn is_none(&self) -> bool {
        self.iops.is_none() && self.bytes_per_s.is_none()
    }
}

impl std::fmt::Display for WriteLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(n) = self.iops {
            parts.push(format!("{n} write IOPS"));
        }
        if let Some(b) = self.bytes_per_s {
            parts.push(format!(
                "{:.1} MiB/s written",
                b as f64 / f64::from(1 << 20)
            ));
        }
        if parts.is_empty() {
            parts.push("no write limit".to_string());
        }
        f.write_str(&parts.join(", "))
    }
}

/// Why a throttle could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("cannot throttle writes to the disk of {path}: {reason}")]
pub struct ThrottleError {
    /// The path whose device was to be throttled.
    pub path: PathBuf,
    /// What went wrong, and what would fix it.
    pub reason: String,
}

/// Which cgroup interface holds the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// A cgroup limiting writes to one device; see the module doc.
#[derive(Debug)]
pub struct Throttle {
    dir: PathBuf,
    root: PathBuf,
    version: Version,
    device: (u32, u32),
    limit: WriteLimit,
}

const V1_ROOT: &str = "/sys/fs/cgroup/blkio";

/// The cgroup v2 root: `/sys/fs/cgroup` on a unified system, or the
/// `unified` mount of a hybrid one, if its controllers include `io`.
fn v2_root() -> Option<PathBuf> {
    ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| {
            std::fs::read_to_string(p.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|w| w == "io"))
        })
}

/// The whole disk holding `path`, as (major, minor): the device of its
/// file system, or that partition's parent disk.
fn disk_of(path: &Path) -> Result<(u32, u32), String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot stat it: {e}"))?;
    let dev = std::os::unix::fs::MetadataExt::dev(&meta);
    let (major, minor) = (rustix::fs::major(dev), rustix::fs::minor(dev));
    let sys = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    if !sys.exists() {
        return Err(format!(
            "its file system is on device {major}:{minor}, which is not a block device \
             (a tmpfs, overlay or network file system cannot be throttled; use a directory \
             on a real disk)"
        ));
    }
    if !sys.join("partition").exists() {
        return Ok((major, minor));
    }
    let parent = std::fs::read_to_string(sys.join("..").join("dev"))
        .map_err(|e| format!("cannot find the disk of partition {major}:{minor}: {e}"))?;
    parse_dev(parent.trim()).ok_or_else(|| format!("cannot read the disk number `{parent}`"))
}

fn parse_dev(s: &str) -> Option<(u32, u32)> {
    let (a, b) = s.split_once(':')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text)
        .map_err(|e| format!("cannot write `{text}` to {}: {e}", path.display()))
}

impl Throttle {
    /// A new cgroup limiting writes to the disk holding `path` to `limit`.
    pub fn create(path: &Path, limit: WriteLimit) -> Result<Throttle, ThrottleError> {
        let fail = |reason: String| ThrottleError {
            path: path.to_path_buf(),
            reason,
        };
        if limit.is_none() {
            return Err(fail("no limit was given".into()));
        }
        let device = disk_of(path).map_err(fail)?;
        let (root, version) = if Path::new(V1_ROOT).join("cgroup.procs").exists() {
            (PathBuf::from(V1_ROOT), Version::V1)
        } else if let Some(r) = v2_root() {
            (r, Version::V2)
        } else {
            return Err(fail(
                "this kernel offers neither cgroup v1's blkio controller nor cgroup v2's io \
                 controller"
                    .into(),
            ));
        };
        let dir = root.join(format!("keel-throttle-{}", std::process::id()));
        if version == Version::V2 {
            // Let children of the root use the io controller (harmless if set).
            let _ = std::fs::write(root.join("cgroup.subtree_control"), "+io");
        }
        std::fs::create_dir_all(&dir).map_err(|e| {
            fail(format!(
                "cannot create the cgroup {} ({e}); this needs root",
                dir.display()
            ))
        })?;
        let t = Throttle {
            dir,
            root,
            version,
            device,
            limit,
        };
        t.set_limit().map_err(fail)?;
        Ok(t)
    }

    fn set_limit(&self) -> Result<(), String> {
        let (major, minor) = self.device;
        match self.version {
            Version::V1 => {
                if let Some(n) = self.limit.iops {
                    write(
                        &self.dir.join("blkio.throttle.write_iops_device"),
                        &format!("{major}:{minor} {n}"),
                    )?;
                }
                if let Some(b) = self.limit.bytes_per_s {
                    write(
                        &self.dir.join("blkio.throttle.write_bps_device"),
                        &format!("{major}:{minor} {b}"),
                    )?;
                }
                Ok(())
            }
            Version::V2 => {
                let mut line = format!("{major}:{minor}");
                if let Some(n) = self.limit.iops {
                    line.push_str(&format!(" wiops={n}"));
                }
                if let Some(b) = self.limit.bytes_per_s {
                    line.push_str(&format!(" wbps={b}"));
                }
                write(&self.dir.join("io.max"), &line)
            }
        }
    }

    /// Move process `pid` (all its threads) into the cgroup.
    pub fn add(&self, pid: u32) -> Result<(), ThrottleError> {
        write(&self.dir.join("cgroup.procs"), &pid.to_string()).map_err(|reason| ThrottleError {
            path: self.dir.clone(),
            reason,
        })
    }

    /// Move process `pid` back to the root cgroup (its writes are no
    /// longer limited).
    pub fn remove(&self, pid: u32) -> Result<(), ThrottleError> {
        write(&self.root.join("cgroup.procs"), &pid.to_string()).map_err(|reason| ThrottleError {
            path: self.root.clone(),
            reason,
        })
    }

    /// The limit, as given.
    pub fn limit(&self) -> WriteLimit {
        self.limit
    }

    /// The throttled disk as `major:minor`.
    pub fn device(&self) -> String {
        format!("{}:{}", self.device.0, self.device.1)
    }

    /// The cgroup's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.split_whitespace() {
            let _ = std::fs::write(self.root.join("cgroup.procs"), pid);
        }
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            log::warn!("cannot remove the cgroup {}: {e}", self.dir.display());
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn limits_read_as_they_are_given() {
        let l = WriteLimit {
            iops: Some(300),
            bytes_per_s: Some(100 << 20),
        };
        assert_eq!(l.to_string(), "300 write IOPS, 100.0 MiB/s written");
        assert!(WriteLimit::default().is_none());
        assert_eq!(parse_dev("254:0"), Some((254, 0)));
        assert_eq!(parse_dev("254"), None);
    }

    #[test]
    fn a_throttle_on_a_file_system_without_a_disk_says_so() {
        // /proc is never on a block device.
        let e = Throttle::create(
            Path::new("/proc"),
            WriteLimit {
                iops: Some(10),
                bytes_per_s: None,
            },
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("/proc") && e.contains("not a block device"),
            "{e}"
        );
    }
}
