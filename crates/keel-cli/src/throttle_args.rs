//! `--throttle-write-iops` / `--throttle-write-bw`: a write limit on the
//! real disk, shared by `keel bench oltp` and `keel bench innodb` so that
//! both engines meet the same slow disk.

use anyhow::{bail, Result};
use clap::Args;
use keel_bench::cgroup::{Throttle, WriteLimit};
use std::path::Path;

#[derive(Args, Debug, Clone, Default)]
pub struct ThrottleArgs {
    /// Limit the engine process's writes to the real disk holding the data
    /// directory to this many write operations per second during the
    /// measurement (not during prepare), through the kernel's cgroup I/O
    /// controller (v1 blkio or v2 io.max; needs root). Give Keel and InnoDB
    /// the same limit to compare them on the same slow disk. Keel then runs on
    /// the real disk, so --device must be unlimited (the default).
    #[arg(long, value_name = "IOPS")]
    pub throttle_write_iops: Option<u64>,
    /// Like --throttle-write-iops, for bytes written per second (e.g. 50MiB).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub throttle_write_bw: Option<u64>,
}

fn parse_size(s: &str) -> std::result::Result<u64, String> {
    keel::Options::parse_size(s)
}

impl ThrottleArgs {
    /// The limit the flags give (none when neither is given).
    pub fn limit(&self) -> Result<WriteLimit> {
        if self.throttle_write_iops == Some(0) || self.throttle_write_bw == Some(0) {
            bail!("--throttle-write-iops and --throttle-write-bw must be above 0");
        }
        Ok(WriteLimit {
            iops: self.throttle_write_iops,
            bytes_per_s: self.throttle_write_bw,
        })
    }

    /// The cgroup holding the limit for the disk of `dir` (created here if
    /// needed, so that a missing controller or permission fails before any
    /// work), or `None` without a limit.
    pub fn throttle(&self, dir: &Path) -> Result<Option<Throttle>> {
        let limit = self.limit()?;
        if limit.is_none() {
            return Ok(None);
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        Ok(Some(Throttle::create(dir, limit)?))
    }
}
