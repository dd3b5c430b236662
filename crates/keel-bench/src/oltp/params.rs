//! Workload parameters, `--vary` axes, and the options as JSON.

use std::fmt;
use std::str::FromStr;

use keel::Options;
use serde::{Deserialize, Serialize};

use super::{OltpError, RandType};

/// Which sysbench script's transaction to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// oltp_read_write: 10 point selects, 4 range queries, an index update,
    /// a non-index update, a delete and an insert of the same id.
    ReadWrite,
    /// oltp_read_only: the 10 point selects and 4 range queries.
    ReadOnly,
    /// oltp_write_only: the two updates, the delete and the insert.
    WriteOnly,
    /// oltp_update_index: one `k = k + 1` update per transaction.
    UpdateIndex,
    /// oltp_update_non_index: one update of `c` per transaction.
    UpdateNonIndex,
    /// oltp_point_select: one point select per transaction.
    PointSelect,
    /// oltp_insert: one insert of a new id per transaction.
    Insert,
}

impl Workload {
    /// Every workload.
    pub const ALL: [Workload; 7] = [
        Workload::ReadWrite,
        Workload::ReadOnly,
        Workload::WriteOnly,
        Workload::UpdateIndex,
        Workload::UpdateNonIndex,
        Workload::PointSelect,
        Workload::Insert,
    ];

    /// True if the workload changes rows.
    pub fn writes(self) -> bool {
        !matches!(self, Workload::ReadOnly | Workload::PointSelect)
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Workload::ReadWrite => "read_write",
            Workload::ReadOnly => "read_only",
            Workload::WriteOnly => "write_only",
            Workload::UpdateIndex => "update_index",
            Workload::UpdateNonIndex => "update_non_index",
            Workload::PointSelect => "point_select",
            Workload::Insert => "insert",
        })
    }
}

impl FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.strip_prefix("oltp_").unwrap_or(s);
        Workload::ALL
            .into_iter()
            .find(|w| w.to_string() == s)
            .ok_or_else(|| {
                let names: Vec<String> = Workload::ALL.iter().map(|w| w.to_string()).collect();
                format!("`{s}` is not one of {}", names.join(", "))
            })
    }
}

/// Every parameter of a run that is not an engine option.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OltpParams {
    /// The transaction mix.
    pub workload: Workload,
    /// Tables `sbtest1..=tables`.
    pub tables: usize,
    /// Rows per table after prepare.
    pub table_size: u64,
    /// Client threads.
    pub threads: usize,
    /// Measured seconds.
    pub time_s: f64,
    /// Seconds per interval line and per JSON interval.
    pub report_interval_s: f64,
    /// Unmeasured seconds before the measurement.
    pub warmup_s: f64,
    /// Read every table into the buffer pool before the run (sysbench's
    /// `prewarm`), so the run starts warm instead of reading its data in.
    pub prewarm: bool,
    /// Distribution of the ids.
    pub rand_type: RandType,
    /// Rows per range query.
    pub range_size: u64,
    /// Target transactions per second over all threads; 0 = as fast as possible.
    pub rate: f64,
    /// Seed of the data and of the workers' choices.
    pub seed: u64,
}

impl Default for OltpParams {
    fn default() -> Self {
        OltpParams {
            workload: Workload::ReadWrite,
            tables: 4,
            table_size: 100_000,
            threads: 8,
            time_s: 60.0,
            report_interval_s: 1.0,
            warmup_s: 0.0,
            prewarm: false,
            rand_type: RandType::Special,
            range_size: 100,
            rate: 0.0,
            seed: 1,
        }
    }
}

/// The names `OltpParams::set` and `--vary` accept for workload parameters
/// (dashes may be written for underscores).
pub const WORKLOAD_KEYS: &[&str] = &[
    "workload",
    "tables",
    "table_size",
    "threads",
    "time",
    "report_interval",
    "warmup",
    "prewarm",
    "rand_type",
    "range_size",
    "rate",
    "seed",
];

/// Engine options fixed when the data directory is created: runs that
/// differ in them (or in tables, table_size, seed) cannot share one
/// prepared directory.
pub(crate) const CREATION_OPTIONS: &[&str] = &[
    "page_size",
    "data_files",
    "log_file_size",
    "log_files_in_group",
];

/// Engine options prepare's load reads (`fill_factor`: how full the bulk
/// load leaves the pages): runs that differ in them load their own data,
/// though `--prepare-set` may change them for prepare alone.
const LOAD_OPTIONS: &[&str] = &["fill_factor"];

fn parse<T: FromStr>(key: &str, value: &str) -> Result<T, OltpError> {
    value
        .trim()
        .parse()
        .map_err(|_| OltpError::param(key, format!("`{value}` is not a valid value")))
}

/// A boolean parameter's value: true/false, on/off, yes/no or 1/0.
pub fn parse_bool(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "on" | "1" | "yes" => Ok(true),
        "false" | "off" | "0" | "no" => Ok(false),
        _ => Err(format!(
            "`{value}` is not a valid value: expected true or false"
        )),
    }
}

impl OltpParams {
    /// Set one parameter by name, e.g. `("threads", "16")`.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), OltpError> {
        let key = key.trim().replace('-', "_");
        match key.as_str() {
            "workload" => {
                self.workload = value.parse().map_err(|e| OltpError::param(&key, e))?;
            }
            "rand_type" => {
                self.rand_type = value.parse().map_err(|e| OltpError::param(&key, e))?;
            }
            "tables" => self.tables = parse(&key, value)?,
            "table_size" => self.table_size = parse(&key, value)?,
            "threads" => self.threads = parse(&key, value)?,
            "time" => self.time_s = parse(&key, value)?,
            "report_interval" => self.report_interval_s = parse(&key, value)?,
            "warmup" => self.warmup_s = parse(&key, value)?,
            "prewarm" => self.prewarm = parse_bool(value).map_err(|e| OltpError::param(&key, e))?,
            "range_size" => self.range_size = parse(&key, value)?,
            "rate" => self.rate = parse(&key, value)?,
            "seed" => self.seed = parse(&key, value)?,
            _ => {
                return Err(OltpError::param(
                    &key,
                    format!(
                        "unknown workload parameter; known: {}",
                        WORKLOAD_KEYS.join(", ")
                    ),
                ))
            }
        }
        Ok(())
    }

    /// Check every parameter; the error names the first bad one.
    pub fn validate(&self) -> Result<(), OltpError> {
        let bad = |k: &str, why: &str| Err(OltpError::param(k, why));
        if !(1..=1024).contains(&self.tables) {
            return bad("tables", "must be between 1 and 1024");
        }
        if !(1..=u32::MAX as u64).contains(&self.table_size) {
            return bad("table_size", "must be between 1 and 2^32 - 1");
        }
        if !(1..=4096).contains(&self.threads) {
            return bad("threads", "must be between 1 and 4096");
        }
        if !(self.time_s > 0.0 && self.time_s.is_finite()) {
            return bad("time", "must be a positive number of seconds");
        }
        if !(self.report_interval_s >= 0.05 && self.report_interval_s.is_finite()) {
            return bad("report_interval", "must be at least 0.05 seconds");
        }
        if !(self.warmup_s >= 0.0 && self.warmup_s.is_finite()) {
            return bad("warmup", "must be zero or a positive number of seconds");
        }
        if !(1..=1_000_000).contains(&self.range_size) {
            return bad("range_size", "must be between 1 and 1000000");
        }
        if !(self.rate >= 0.0 && self.rate.is_finite()) {
            return bad(
                "rate",
                "must be zero (unlimited) or a positive number of transactions/s",
            );
        }
        Ok(())
    }
}

/// One `--vary key=v1,v2,...`: a workload parameter or an engine option.
#[derive(Clone, Debug, PartialEq)]
pub struct VaryAxis {
    /// The parameter or option name.
    pub key: String,
    /// Its values, in the order given.
    pub values: Vec<String>,
}

impl FromStr for VaryAxis {
    type Err = OltpError;
    fn from_str(s: &str) -> Result<Self, OltpError> {
        let (k, vs) = s
            .split_once('=')
            .ok_or_else(|| OltpError::param(s, "--vary expects key=v1,v2,..."))?;
        let values: Vec<String> = vs
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        if values.is_empty() {
            return Err(OltpError::param(k, "--vary needs at least one value"));
        }
        Ok(VaryAxis {
            key: k.trim().to_string(),
            values,
        })
    }
}

impl VaryAxis {
    /// True if the key is a workload parameter rather than an engine option.
    pub fn is_workload(&self) -> bool {
        WORKLOAD_KEYS.contains(&self.key.replace('-', "_").as_str())
    }
}

/// Apply `key=value` to the workload or to the options.
pub(crate) fn apply(
    params: &mut OltpParams,
    opts: &mut Options,
    key: &str,
    value: &str,
) -> Result<(), OltpError> {
    if WORKLOAD_KEYS.contains(&key.replace('-', "_").as_str()) {
        params.set(key, value)
    } else {
        Ok(opts.set(key, value)?)
    }
}

/// True if two runs can use copies of one prepared directory.
pub(crate) fn same_data(a: (&OltpParams, &Options), b: (&OltpParams, &Options)) -> bool {
    let (pa, pb) = (a.0, b.0);
    let data_equal = pa.tables == pb.tables && pa.table_size == pb.table_size && pa.seed == pb.seed;
    let (ea, eb) = (a.1.entries(), b.1.entries());
    let opt =
        |e: &[(String, String)], k: &str| e.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    data_equal
        && CREATION_OPTIONS
            .iter()
            .chain(LOAD_OPTIONS)
            .all(|k| opt(&ea, k) == opt(&eb, k))
}

/// Every effective engine option as JSON (numbers and booleans typed),
/// `flush_policy` among them.
pub fn options_json(opts: &Options) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    for (k, v) in opts.entries() {
        m.insert(k, super::presets::typed(&v));
    }
    m
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn runs_differing_in_fill_factor_load_their_own_data() {
        let p = OltpParams::default();
        let a = Options::default();
        let mut b = a.clone();
        b.set("io_capacity", "1000").unwrap();
        assert!(same_data((&p, &a), (&p, &b)));
        b.set("fill_factor", "70").unwrap();
        assert!(!same_data((&p, &a), (&p, &b)));
    }

    #[test]
    fn params_set_validate_and_name_bad_keys() {
        let mut p = OltpParams::default();
        p.validate().unwrap();
        p.set("threads", "16").unwrap();
        p.set("rand-type", "zipf").unwrap();
        p.set("workload", "oltp_write_only").unwrap();
        assert_eq!(
            (p.threads, p.rand_type, p.workload),
            (16, RandType::Zipf, Workload::WriteOnly)
        );
        let e = p.set("thread", "1").unwrap_err().to_string();
        assert!(e.contains("`thread`"), "{e}");
        let e = p.set("threads", "lots").unwrap_err().to_string();
        assert!(e.contains("threads") && e.contains("lots"), "{e}");
        p.threads = 0;
        assert!(p.validate().unwrap_err().to_string().contains("threads"));
        let v: VaryAxis = "buffer_pool_size=8MiB,16MiB".parse().unwrap();
        assert_eq!(v.values, ["8MiB", "16MiB"]);
        assert!(!v.is_workload());
        assert!("threads".parse::<VaryAxis>().is_err());
        let o = options_json(&Options::default());
        assert_eq!(o["flush_policy"], "steady");
        assert_eq!(o["io_capacity"], 200);
        assert_eq!(o["page_size"], 16384);
        assert_eq!(o["doublewrite"], "on");
    }
}
