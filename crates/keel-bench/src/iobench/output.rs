//! The results of a sweep as the user sees them: the JSON document, the
//! machine it ran on, the text table and the page-cache note.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::stats::CaseResult;
use super::{files, format_bs, format_size, IobenchConfig, IobenchError, Method, Mode};

/// Version of the JSON document. 2: the `flush` mode, with its `flush`
/// figures in each of its cases and `flush_vs_wrnd` (a version-1 document
/// still reads).
pub const JSON_VERSION: u32 = 2;

/// The machine and the file system the sweep ran on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineInfo {
    /// Host name.
    pub hostname: String,
    /// Kernel release.
    pub kernel: String,
    /// Logical CPUs available to the process.
    pub cpus: usize,
    /// Physical memory, if known.
    pub ram_bytes: Option<u64>,
    /// Directory holding the data files.
    pub dir: String,
    /// The block device under it (`vda`, `nvme0n1p2`), if any.
    pub block_device: Option<String>,
    /// Its logical block size (512 where unknown).
    pub logical_block_bytes: usize,
    /// The file system type (`ext4`, `xfs`, a hexadecimal magic otherwise).
    pub filesystem: String,
    /// The device model the files were accessed through.
    pub device_model: String,
    /// Total size of the data files of one case.
    pub file_size_bytes: u64,
    /// Seconds since the Unix epoch at the start of the sweep.
    pub started_unix_s: u64,
}

impl MachineInfo {
    /// Describe this machine and the directory of `config`.
    pub fn collect(config: &IobenchConfig) -> Self {
        let read = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_owned());
        let block_device = files::block_device_sysfs(&config.dir)
            .and_then(|p| std::fs::canonicalize(p).ok())
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
        Self {
            hostname: read("/proc/sys/kernel/hostname").unwrap_or_default(),
            kernel: read("/proc/sys/kernel/osrelease").unwrap_or_default(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            ram_bytes: crate::sys::total_ram_bytes(),
            dir: config.dir.display().to_string(),
            block_device,
            logical_block_bytes: files::logical_block_bytes(&config.dir),
            filesystem: filesystem_name(&config.dir),
            device_model: config.device.to_string(),
            file_size_bytes: config.file_size_bytes,
            started_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }
}

fn filesystem_name(dir: &Path) -> String {
    let Ok(stat) = rustix::fs::statfs(dir) else {
        return "unknown".to_owned();
    };
    #[allow(clippy::unnecessary_cast)] // f_type's width differs by platform.
    let magic = stat.f_type as u64;
    match magic {
        0xEF53 => "ext4".to_owned(),
        0x5846_5342 => "xfs".to_owned(),
        0x9123_683E => "btrfs".to_owned(),
        0x0102_1994 => "tmpfs".to_owned(),
        0x794C_7630 => "overlayfs".to_owned(),
        0x2FC1_2FC1 => "zfs".to_owned(),
        0xF2F5_2010 => "f2fs".to_owned(),
        other => format!("0x{other:x}"),
    }
}

/// The document `--json` writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IobenchReport {
    /// [`JSON_VERSION`].
    pub version: u32,
    /// Where it ran.
    pub machine: MachineInfo,
    /// One entry per case, in the order they ran.
    pub cases: Vec<CaseResult>,
    /// `flush ÷ wrnd` for every `flush` case whose `wrnd` twin ran.
    #[serde(default)]
    pub flush_vs_wrnd: Vec<FlushRatio>,
}

/// The engine's flusher against the device: a `flush` case's page writes
/// per second divided by the random-write IOPS of the `wrnd` case with the
/// same block size, threads (queue depth), files, method and device model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlushRatio {
    /// Block size (the engine's page size).
    pub bs: usize,
    /// Queue depth: workers for `wrnd`, page writes in flight for `flush`.
    pub threads: usize,
    /// Data files.
    pub files: usize,
    /// Write method.
    pub method: Method,
    /// The device model both ran on.
    pub device: String,
    /// Whether the flusher wrote through the doublewrite area.
    pub doublewrite: bool,
    /// `wrnd`'s IOPS.
    pub wrnd_iops: f64,
    /// `flush`'s page writes per second.
    pub flush_iops: f64,
    /// `flush_iops / wrnd_iops`.
    pub ratio: f64,
}

/// The ratios of every `flush` result in `cases` that has a `wrnd` twin.
pub(super) fn flush_ratios(cases: &[CaseResult], device: &str) -> Vec<FlushRatio> {
    cases
        .iter()
        .filter_map(|r| {
            let f = r.flush.as_ref()?;
            let wrnd = wrnd_twin(cases, r)?;
            Some(FlushRatio {
                bs: r.bs,
                threads: r.threads,
                files: r.files,
                method: r.method,
                device: device.to_owned(),
                doublewrite: f.doublewrite,
                wrnd_iops: wrnd.iops,
                flush_iops: r.iops,
                ratio: r.iops / wrnd.iops,
            })
        })
        .collect()
}

/// The `wrnd` result with the same block size, threads, files and method
/// as `r`, if one ran and measured anything.
pub(super) fn wrnd_twin<'a>(cases: &'a [CaseResult], r: &CaseResult) -> Option<&'a CaseResult> {
    let twin = super::Case {
        mode: Mode::Wrnd,
        ..r.case()
    };
    cases.iter().find(|c| c.case() == twin && c.iops > 0.0)
}

/// The `flush ÷ wrnd` block printed after the table; `None` without ratios.
pub fn flush_ratio_table(ratios: &[FlushRatio]) -> Option<String> {
    let first = ratios.first()?;
    let mut out = format!(
        "flush ÷ wrnd (the engine's page writes per second against the device's random-write \
         IOPS at the same queue depth; device {}, doublewrite {}):\n{:>4} {:>7} {:>5} {:<6} {:>10} {:>10} {:>11}",
        first.device,
        if first.doublewrite { "on" } else { "off" },
        "bs",
        "threads",
        "files",
        "method",
        "wrnd IOPS",
        "flush IOPS",
        "flush÷wrnd"
    );
    for r in ratios {
        out.push_str(&format!(
            "\n{:>4} {:>7} {:>5} {:<6} {:>10.0} {:>10.0} {:>11.2}",
            format_bs(r.bs),
            r.threads,
            r.files,
            r.method.as_str(),
            r.wrnd_iops,
            r.flush_iops,
            r.ratio
        ));
    }
    Some(out)
}

impl IobenchReport {
    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> Result<String, IobenchError> {
        Ok(serde_json::to_string_pretty(self)?)
    }

    /// Write the JSON to `path`.
    pub fn write_json(&self, path: &Path) -> Result<(), IobenchError> {
        let text = self.to_json()?;
        std::fs::write(path, text + "\n")
            .map_err(IobenchError::io(format!("cannot write {}", path.display())))
    }
}

/// The header of the text table, matching [`table_row`].
pub fn table_header() -> String {
    format!(
        "{:<5} {:>4} {:>7} {:>5} {:<6} {:>10} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9}",
        "mode",
        "bs",
        "threads",
        "files",
        "method",
        "IOPS",
        "MiB/s",
        "avg ms",
        "p50 ms",
        "p95 ms",
        "p99 ms",
        "max ms"
    )
}

/// One row of the text table. A `flush` row has no latency percentiles
/// (`-`), and ends with its ratio to `wrnd` (when that ran first), its
/// pages per write call, the writes it kept in flight on average and
/// whether doublewrite was on.
pub fn table_row(r: &CaseResult) -> String {
    let ms = |v: f64| {
        if r.flush.is_some() {
            "-".to_owned()
        } else {
            format!("{v:.3}")
        }
    };
    let mut row = format!(
        "{:<5} {:>4} {:>7} {:>5} {:<6} {:>10.0} {:>9.1} {:>8.3} {:>8} {:>8} {:>8} {:>9}",
        r.mode.as_str(),
        format_bs(r.bs),
        r.threads,
        r.files,
        r.method.as_str(),
        r.iops,
        r.mib_s,
        r.lat_ms.avg,
        ms(r.lat_ms.p50),
        ms(r.lat_ms.p95),
        ms(r.lat_ms.p99),
        ms(r.lat_ms.max)
    );
    if let Some(f) = &r.flush {
        if let Some(ratio) = f.vs_wrnd {
            row.push_str(&format!("  flush÷wrnd {ratio:.2};"));
        } else {
            row.push(' ');
        }
        let per_call = if f.write_requests > 0 {
            r.writes as f64 / f.write_requests as f64
        } else {
            0.0
        };
        row.push_str(&format!(
            " {per_call:.2} pages/write, {:.1} in flight, doublewrite {}",
            f.mean_writes_in_flight,
            if f.doublewrite { "on" } else { "off" }
        ));
    }
    if r.errors > 0 {
        row.push_str(&format!("  ({} errors)", r.errors));
    }
    row
}

/// What the user must know about the data size: how it compares with RAM,
/// and which methods can be served from the page cache.
pub fn data_size_note(config: &IobenchConfig, ram_bytes: Option<u64>) -> String {
    let size = format_size(config.file_size_bytes);
    let mut note = match ram_bytes {
        Some(ram) if ram > 0 => format!(
            "data: {size} per case ({:.1} % of {} RAM)",
            100.0 * config.file_size_bytes as f64 / ram as f64,
            format_size(ram)
        ),
        _ => format!("data: {size} per case (RAM size unknown)"),
    };
    if config.methods.contains(&Method::Direct) {
        note.push_str("; direct bypasses the page cache");
    }
    let buffered: Vec<&str> = config
        .methods
        .iter()
        .filter(|m| m.is_buffered())
        .map(|m| m.as_str())
        .collect();
    if !buffered.is_empty() {
        let fits = !matches!(ram_bytes, Some(ram) if config.file_size_bytes >= ram);
        note.push_str(&format!(
            "; with {} reads go through the page cache{} (the cache is dropped before each case)",
            buffered.join("/"),
            if fits {
                " and, as the data fits in RAM, may be served from memory"
            } else {
                ", partly served from memory"
            }
        ));
    }
    if config.modes.contains(&Mode::Flush) {
        note.push_str(&format!(
            "\nflush: a database in {}/keel-iobench-flush-{}, its table of {size} held whole in \
             the buffer pool; before each timed flush, row updates dirty up to {} random pages \
             (at most an eighth of the table's); doublewrite {}",
            config.dir.display(),
            std::process::id(),
            config.flush_dirty_pages,
            if config.doublewrite { "on" } else { "off" }
        ));
    }
    note
}
