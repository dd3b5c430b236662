//! Scenario presets: `keel bench oltp --preset NAME`. Each one is a
//! scaled-down reproduction of one seed (a field report the project grew
//! from, named by its title), sized to run in two
//! to five minutes (prepare included) on a small machine.
//!
//! Every number lives in this file, one constant per preset, so the
//! presets can be tuned in one place. A preset can build on another
//! (`base`): the base's settings first, then its own (a later setting of
//! the same key wins).
//!
//! How a preset combines with the command line is decided by its caller
//! (`keel bench oltp`): the preset only fills what the user did not give.
//! Its workload parameters replace the defaults; its engine options are
//! applied before the user's `--config` keys, `--set` and `--device`; each
//! of its `--vary` axes is dropped when the user gave that key in any way
//! (a flag, `--set`, `--device`, `--config` or a `--vary` of their own).
//!
//! `prepare` settings are engine options used only while the tables are
//! loaded (see `Plan::prepare_sets`): loading happens on an unthrottled
//! device with a pool larger than the data, so that prepare stays well
//! under a minute whatever the measured scenario's device and pool; the
//! run itself reopens the directory with the scenario's options, its pool
//! cold.

use std::fmt::Write as _;

use keel::Options;
use serde::{Deserialize, Serialize};

use super::{OltpError, OltpParams, VaryAxis};

/// One scenario preset.
#[derive(Debug, PartialEq)]
pub struct Preset {
    /// The name given to `--preset`.
    pub name: &'static str,
    /// Settings taken from this preset first (own settings override them).
    pub base: Option<&'static Preset>,
    /// Number of the seed (the field report) it reproduces.
    pub seed: u32,
    /// Title of the seed, as published (`seeds::SEEDS` cites it whole).
    pub seed_title: &'static str,
    /// One line for `--preset list` and `--help`.
    pub about: &'static str,
    /// The seed's figure this preset reproduces.
    pub figure: &'static str,
    /// What to look at in the report.
    pub look_at: &'static str,
    /// Workload parameters (`OltpParams::set` names).
    pub workload: &'static [(&'static str, &'static str)],
    /// Engine options (`Options::set` names).
    pub options: &'static [(&'static str, &'static str)],
    /// `--vary` axes: key and comma-separated values.
    pub vary: &'static [(&'static str, &'static str)],
    /// Engine options used only while the tables are prepared.
    pub prepare: &'static [(&'static str, &'static str)],
}

/// Prepare fast, whatever the scenario: the real device as it is, a pool
/// that holds the whole data set (no eviction while loading), the log
/// synced once a second, and flushing not held back by a low
/// `io_capacity`. `flush` at the end of prepare writes every page, so
/// nothing of this survives into the run but the data.
const FAST_PREPARE: &[(&str, &str)] = &[
    ("device", "unlimited"),
    ("buffer_pool_size", "512MiB"),
    ("flush_log_at_trx_commit", "2"),
    ("io_capacity", "2000"),
    ("io_capacity_max", "0"),
];

/// Seed 1, "Disaster: MySQL 5.5 Flushing": the periods of **zero
/// transactions** while the checkpoint age sits at the sync mark.
///
/// Scaled down from 58 GB of data, a 52 GB pool, 2 × 1.9 GB of redo, 32
/// threads on RAID10 HDDs: data over 4 × the pool (4 × 80 000 rows ≈ 135 MiB
/// against 32 MiB), redo 2 × 2 MiB (1/8 of the pool), trx_commit 2, 32
/// threads, `hdd-raid10`. InnoDB 5.5's flushing as `classic` can play it:
/// a low `io_capacity` (100, the minimum; `io_capacity_max` 200),
/// `max_dirty_pages_pct` 75 with no low-water mark (5.5's defaults), and
/// `flush_neighbors` 2: 5.5 always flushed the whole area around a page
/// (Percona's "area"); Keel's 1 is Percona's later "cont".
///
/// Two departures from the seed, both measured: the workload is
/// `write_only` with pareto ids, because `read_write` on data 4 × the pool
/// on an HDD is bound by its page reads (about 150 tps whatever the
/// flushing does, hiding the stalls); and `lru_scan_depth` is scaled with
/// the pool (128 of 2 048 pages; InnoDB's 1 024 would keep half of this
/// pool free, where the seed's 1 024 were 0.03 % of its pool).
pub const DISASTER_55: Preset = Preset {
    name: "disaster-55",
    base: None,
    seed: 1,
    seed_title: "Disaster: MySQL 5.5 Flushing",
    about:
        "5.5-style flushing on RAID10 HDDs, redo 1/8 of the pool: zero-tps stalls at the sync mark",
    figure: "alternating normal throughput and 4-minute periods with zero transactions while \
             the checkpoint age sits at the sync mark (the seed: ~75 % of the log; classic's \
             marks sit near 81 % and 86 % of it)",
    look_at: "Throughput: intervals at 0 tps (stall intervals in the summary); Checkpoint age: \
              the age pinned at the sync mark during them; Pages flushed: sync and neighbors \
              pages during the stalls, adaptive pages capped near io_capacity_max (200) between \
              them; sync flush and free-check waits in the status report",
    workload: &[
        ("workload", "write_only"),
        ("tables", "4"),
        ("table_size", "80000"),
        ("threads", "32"),
        ("time", "150"),
        ("report_interval", "1"),
        ("rand_type", "pareto"),
    ],
    options: &[
        ("flush_policy", "classic"),
        ("buffer_pool_size", "32MiB"),
        ("lru_scan_depth", "128"),
        ("buffer_pool_instances", "1"),
        ("log_file_size", "2MiB"),
        ("log_files_in_group", "2"),
        ("flush_log_at_trx_commit", "2"),
        ("io_capacity", "100"),
        ("io_capacity_max", "200"),
        ("max_dirty_pages_pct", "75"),
        ("max_dirty_pages_pct_lwm", "0"),
        ("flush_neighbors", "2"),
        ("device", "hdd-raid10"),
    ],
    vary: &[],
    prepare: FAST_PREPARE,
};

/// Seed 2, "Benchmarks of new innodb_flush_neighbor_pages": the same
/// scenario as `disaster-55` run three times on identical data with
/// neighbor flushing "area" (2), "cont" (1) and "none" (0) on `hdd-raid10`,
/// 60 s each — the seed's comparison of the modes' throughput lines
/// (shallower dips with "cont"; only throttling the dirtying rate would
/// make the line flat).
pub const NEIGHBORS: Preset = Preset {
    name: "neighbors",
    base: Some(&DISASTER_55),
    seed: 2,
    seed_title: "Benchmarks of new innodb_flush_neighbor_pages",
    about:
        "disaster-55 with flush_neighbors = 2 (area), 1 (cont), 0 (none): one run each, overlaid",
    figure: "throughput per neighbor-flushing mode: \"area\" stalls deepest, \"cont\" gives \
             shallower dips, none of them a flat line",
    look_at: "Throughput and the summary's stall intervals and cv per run; Pages flushed: \
              neighbors pages per run against the adaptive/sync pages; pages written per \
              transaction in the summary",
    workload: &[("time", "60")],
    options: &[],
    vary: &[("flush_neighbors", "2,1,0")],
    prepare: &[],
};

/// Seed 4, "More on Checkpoints in InnoDB MySQL 8": the **waves** —
/// throughput dropping each time the checkpoint age crosses the
/// max checkpoint age, because a small doublewrite buffer caps flushing
/// below what the log needs.
///
/// Scaled down from a 140 GB pool, ~100 GB data, 20 GB redo, trx_commit 1,
/// doublewrite on, a SATA SSD: data fits in the pool (4 × 75 000 rows ≈
/// 130 MiB in 256 MiB), the redo log is the bottleneck (2 × 16 MiB),
/// `sata-ssd`, `io_capacity` 2000 / `io_capacity_max` 4000, doublewrite in
/// one file of 8 pages per segment, 4 pool instances (so 4 page cleaners,
/// as 8.0 runs them), 16 threads, uniform ids (so many distinct pages are
/// dirtied). The tables are read into the pool before the run (`prewarm`,
/// sysbench's command of that name): the seed's pool held its data, and on
/// `hdd-raid10` a cold pool spends the first 5 s reading it in at 50-470
/// tps, under half the median whatever the flushing policy.
pub const WAVES_80: Preset = Preset {
    name: "waves-80",
    base: None,
    seed: 4,
    seed_title: "More on Checkpoints in InnoDB MySQL 8",
    about: "8.0 on a SATA SSD, data in the pool, small doublewrite: throughput waves as the age hits the limit",
    figure: "\"wave\" throughput: drops each time the checkpoint age reaches the max checkpoint \
             age, flushing capped below io_capacity_max by the doublewrite buffer",
    look_at: "Throughput waves against Checkpoint age touching the sync mark; Pages flushed: \
              adaptive pages flat below the io_capacity_max line; doublewrite batches and pages \
              in the status report",
    workload: &[
        ("workload", "read_write"),
        ("tables", "4"),
        ("table_size", "75000"),
        ("threads", "16"),
        ("time", "150"),
        ("report_interval", "1"),
        ("rand_type", "uniform"),
        ("prewarm", "true"),
    ],
    options: &[
        ("flush_policy", "classic"),
        ("buffer_pool_size", "256MiB"),
        ("buffer_pool_instances", "4"),
        ("log_file_size", "16MiB"),
        ("log_files_in_group", "2"),
        ("flush_log_at_trx_commit", "1"),
        ("io_capacity", "2000"),
        ("io_capacity_max", "4000"),
        ("doublewrite", "true"),
        ("doublewrite_files", "1"),
        ("doublewrite_pages", "8"),
        ("flush_neighbors", "0"),
        ("device", "sata-ssd"),
    ],
    vary: &[],
    prepare: FAST_PREPARE,
};

/// Seed 4's fix: `waves-80` with the parallel doublewrite settings the
/// seed used (2 files, 128 pages per segment), which removed the waves.
pub const WAVES_80_FIX: Preset = Preset {
    name: "waves-80-fix",
    base: Some(&WAVES_80),
    seed: 4,
    seed_title: "More on Checkpoints in InnoDB MySQL 8",
    about:
        "waves-80 with doublewrite_pages = 128 and doublewrite_files = 2: the seed's fix, no waves",
    figure: "with 2 doublewrite files of 128 pages per segment the waves disappear",
    look_at: "Throughput flat where waves-80 waved; Checkpoint age staying under the sync mark; \
              adaptive pages reaching the io_capacity_max line",
    workload: &[],
    options: &[("doublewrite_files", "2"), ("doublewrite_pages", "128")],
    vary: &[],
    prepare: &[],
};

/// Seed 4's surprise: `waves-80-fix` run once per `io_capacity_max`
/// (2000, 3000, 4000, 8000; 50 s each) on identical data — the **lowest
/// value that keeps the checkpoint age under the limit gives the highest
/// throughput** (6,500 → 8,234 tps; 7,000 → 7,936; 8,000 → 7,693 in the
/// seed), because flushing less combines more changes per page write.
/// The sweep starts at `io_capacity` (2000), the lowest valid value.
pub const WAVES_80_SWEEP: Preset = Preset {
    name: "waves-80-sweep",
    base: Some(&WAVES_80_FIX),
    seed: 4,
    seed_title: "More on Checkpoints in InnoDB MySQL 8",
    about: "waves-80-fix once per io_capacity_max = 2000, 3000, 4000, 8000: lower max, higher tps while the age stays under the limit",
    figure: "lower io_capacity_max gives higher throughput as long as the checkpoint age stays \
             under the limit (6,500 → 8,234 tps; 7,000 → 7,936; 8,000 → 7,693)",
    look_at: "Summary: tps avg and pages written per transaction per run; Checkpoint age: which \
              runs stay under the sync mark; the lowest such io_capacity_max should have the \
              highest tps",
    workload: &[("time", "50")],
    options: &[],
    vary: &[("io_capacity_max", "2000,3000,4000,8000")],
    prepare: &[],
};

/// Seed 4's sweep at four times the scale: 8 × 150 000 rows (about 4 × the
/// data) in a 1 GiB pool, a 2 × 64 MiB log (4 × the redo), 32 threads. On
/// the preset's own scale the log holds about a second of redo, so every
/// policy's levels are shares of the log; here it holds several seconds,
/// which is where a band sized by the redo rate (not by the log) lets
/// `steady` hold the age just under the limit. Seed 4 itself ran a 20 GB
/// log against a 140 GB pool.
pub const WAVES_80_X4: Preset = Preset {
    name: "waves-80-x4",
    base: Some(&WAVES_80_SWEEP),
    seed: 4,
    seed_title: "More on Checkpoints in InnoDB MySQL 8",
    about:
        "waves-80-sweep at 4x the scale (8 x 150,000 rows, 1 GiB pool, 2 x 64 MiB log, 32 threads)",
    figure: "lower io_capacity_max gives higher throughput as long as the checkpoint age stays \
             under the limit, at a scale where the log holds seconds of redo",
    look_at: "Summary: tps avg and pages written per transaction per run; Checkpoint age: \
              steady's age just under the limit, classic's at the sync mark for the low \
              io_capacity_max values",
    workload: &[("tables", "8"), ("table_size", "150000"), ("threads", "32")],
    options: &[("buffer_pool_size", "1GiB"), ("log_file_size", "64MiB")],
    vary: &[],
    prepare: &[("buffer_pool_size", "1GiB")],
};

/// Seed 5, "MySQL LRU Flushing and I/O Capacity": **LRU flushing is not
/// bounded by io_capacity** — with data ≫ the pool and a mostly dirty LRU
/// tail, each cleaner pass writes up to `lru_scan_depth` (1024) pages per
/// instance while `io_capacity_max` is 400 (the seed saw one pass write
/// 1,178 LRU + 122 flush-list pages).
///
/// Data ≈ 5 × the pool (4 × 90 000 rows ≈ 160 MiB against 32 MiB), a large
/// log (2 × 64 MiB) so that flush-list flushing is not what limits the
/// run, `io_capacity` 200 / `io_capacity_max` 400, `lru_scan_depth` 1024,
/// `sata-ssd`, oltp_write_only with uniform ids (every page read is
/// dirtied, so the LRU tail is mostly dirty), 16 threads.
pub const LRU_SCAN_DEPTH: Preset = Preset {
    name: "lru-scan-depth",
    base: None,
    seed: 5,
    seed_title: "MySQL LRU Flushing and I/O Capacity",
    about: "data 5x the pool, dirty LRU tail: LRU flushing writes far more than io_capacity_max (400) pages/s",
    figure: "one cleaner pass wrote 1,178 LRU pages + 122 flush-list pages while io_capacity_max \
             was 400: LRU flushing is bounded by lru_scan_depth, not by I/O capacity",
    look_at: "Pages flushed per second: the LRU line far above the io_capacity_max line while the \
              adaptive line stays under it; os_data_writes per second in the JSON",
    workload: &[
        ("workload", "write_only"),
        ("tables", "4"),
        ("table_size", "90000"),
        ("threads", "16"),
        ("time", "120"),
        ("report_interval", "1"),
        ("rand_type", "uniform"),
    ],
    options: &[
        ("flush_policy", "classic"),
        ("buffer_pool_size", "32MiB"),
        ("buffer_pool_instances", "1"),
        ("log_file_size", "64MiB"),
        ("log_files_in_group", "2"),
        ("flush_log_at_trx_commit", "1"),
        ("io_capacity", "200"),
        ("io_capacity_max", "400"),
        ("lru_scan_depth", "1024"),
        ("flush_neighbors", "0"),
        ("device", "sata-ssd"),
    ],
    vary: &[],
    prepare: FAST_PREPARE,
};

/// Every preset, in the order `--preset list` shows them.
pub const PRESETS: &[&Preset] = &[
    &DISASTER_55,
    &NEIGHBORS,
    &WAVES_80,
    &WAVES_80_FIX,
    &WAVES_80_SWEEP,
    &WAVES_80_X4,
    &LRU_SCAN_DEPTH,
];

/// The preset called `name`; the error names every preset.
pub fn find_preset(name: &str) -> Result<&'static Preset, OltpError> {
    PRESETS
        .iter()
        .copied()
        .find(|p| p.name == name.trim())
        .ok_or_else(|| {
            let names: Vec<&str> = PRESETS.iter().map(|p| p.name).collect();
            OltpError::param(
                "preset",
                format!(
                    "unknown preset `{name}`; known presets: {} (or `{}`, or `list`)",
                    names.join(", "),
                    super::SHOWDOWN_NAME
                ),
            )
        })
}

/// The text of `--preset list`: one line per preset with its seed and
/// description, how presets combine with flags, then the seeds cited.
pub fn presets_text() -> String {
    let width = PRESETS
        .iter()
        .map(|p| p.name.len())
        .chain([super::SHOWDOWN_NAME.len()])
        .max()
        .unwrap_or(0);
    let mut out = String::from("Scenario presets (keel bench oltp --preset NAME):\n");
    for p in PRESETS {
        let _ = writeln!(out, "  {:width$}  seed {}: {}", p.name, p.seed, p.about);
    }
    let _ = writeln!(
        out,
        "  {:width$}  {}",
        super::SHOWDOWN_NAME,
        super::SHOWDOWN_ABOUT
    );
    out.push_str(
        "A preset fills only what is not given on the command line: flags, --config, --set, \
         --device and --vary win over it (--set is applied after the preset's options).\n",
    );
    out.push_str(&super::seeds::seeds_text());
    out
}

/// `key` as the parameter tables name it (dashes as underscores).
pub fn normalize_key(key: &str) -> String {
    key.trim().replace('-', "_")
}

/// The preset's settings as JSON, for the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PresetSettings {
    /// The preset's name.
    pub name: String,
    /// Number of the seed (the field report) it reproduces.
    pub seed: u32,
    /// Title of the seed.
    pub seed_title: String,
    /// One-line description.
    pub about: String,
    /// The seed's figure it reproduces.
    pub figure: String,
    /// What to look at in the report.
    pub look_at: String,
    /// Workload parameters it sets.
    pub workload: serde_json::Map<String, serde_json::Value>,
    /// Engine options it sets.
    pub options: serde_json::Map<String, serde_json::Value>,
    /// Its `--vary` axes as `key=v1,v2,...`.
    pub vary: Vec<String>,
    /// Engine options it uses while preparing the tables.
    pub prepare: serde_json::Map<String, serde_json::Value>,
    /// Every key the command line gave (each wins over the preset's value
    /// or adds to it): empty when the run is the preset as defined.
    pub overridden: Vec<String>,
}

fn merged(pairs: Vec<(&'static str, &'static str)>) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for (k, v) in pairs {
        match out.iter_mut().find(|(ok, _)| *ok == k) {
            Some(slot) => slot.1 = v,
            None => out.push((k, v)),
        }
    }
    out
}

/// A setting's value as JSON: integers, booleans and numbers typed, as in
/// the runs' `options`.
pub(crate) fn typed(v: &str) -> serde_json::Value {
    use serde_json::Value;
    if let Ok(n) = v.parse::<i64>() {
        Value::from(n)
    } else if let Ok(b) = v.parse::<bool>() {
        Value::from(b)
    } else if let Some(f) = v.parse::<f64>().ok().filter(|f| f.is_finite()) {
        Value::from(f)
    } else {
        Value::from(v)
    }
}

fn json_map(pairs: &[(&str, &str)]) -> serde_json::Map<String, serde_json::Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), typed(v)))
        .collect()
}

impl Preset {
    fn collect(
        &self,
        field: fn(&Preset) -> &'static [(&'static str, &'static str)],
    ) -> Vec<(&'static str, &'static str)> {
        let mut v = self.base.map(|b| b.collect(field)).unwrap_or_default();
        v.extend_from_slice(field(self));
        merged(v)
    }

    /// Workload parameters, the base's first (one entry per key, the last
    /// setting of a key winning).
    pub fn workload_settings(&self) -> Vec<(&'static str, &'static str)> {
        self.collect(|p| p.workload)
    }

    /// Engine options, the base's first (one entry per key).
    pub fn option_settings(&self) -> Vec<(&'static str, &'static str)> {
        self.collect(|p| p.options)
    }

    /// `--vary` axes, the base's first (one per key).
    pub fn vary_settings(&self) -> Vec<(&'static str, &'static str)> {
        self.collect(|p| p.vary)
    }

    /// Engine options for prepare, the base's first (one entry per key).
    pub fn prepare_settings(&self) -> Vec<(&'static str, &'static str)> {
        self.collect(|p| p.prepare)
    }

    /// Set the preset's workload parameters in `params`.
    pub fn apply_workload(&self, params: &mut OltpParams) -> Result<(), OltpError> {
        for (k, v) in self.workload_settings() {
            params.set(k, v)?;
        }
        Ok(())
    }

    /// Set the preset's engine options in `opts`.
    pub fn apply_options(&self, opts: &mut Options) -> Result<(), OltpError> {
        for (k, v) in self.option_settings() {
            opts.set(k, v)?;
        }
        Ok(())
    }

    /// The preset's `--vary` axes, without those on a key in `given` (the
    /// keys the user gave, in any form: theirs win).
    pub fn vary_axes(&self, given: &[String]) -> Result<Vec<VaryAxis>, OltpError> {
        self.vary_settings()
            .into_iter()
            .filter(|(k, _)| !given.iter().any(|g| normalize_key(g) == normalize_key(k)))
            .map(|(k, vs)| format!("{k}={vs}").parse())
            .collect()
    }

    /// The prepare options as `key=value` assignments.
    pub fn prepare_sets(&self) -> Vec<String> {
        self.prepare_settings()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    }

    /// The command line that runs the preset as defined.
    pub fn command_line(&self) -> String {
        format!("keel bench oltp --preset {}", self.name)
    }

    /// The settings for the report; `overridden` = the keys the command
    /// line gave.
    pub fn settings(&self, overridden: &[String]) -> PresetSettings {
        PresetSettings {
            name: self.name.to_string(),
            seed: self.seed,
            seed_title: self.seed_title.to_string(),
            about: self.about.to_string(),
            figure: self.figure.to_string(),
            look_at: self.look_at.to_string(),
            workload: json_map(&self.workload_settings()),
            options: json_map(&self.option_settings()),
            vary: self
                .vary_settings()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect(),
            prepare: json_map(&self.prepare_settings()),
            overridden: overridden.to_vec(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::oltp::{Workload, WORKLOAD_KEYS};

    #[test]
    fn every_preset_applies_validates_and_names_its_seed() {
        let mut names = Vec::new();
        for p in PRESETS {
            assert!(!names.contains(&p.name), "{} twice", p.name);
            names.push(p.name);
            assert!((1..=5).contains(&p.seed), "{}", p.name);
            assert!(!p.about.is_empty() && !p.about.contains('\n'), "{}", p.name);
            for (k, _) in p.workload_settings() {
                assert!(WORKLOAD_KEYS.contains(&k), "{}: {k}", p.name);
            }
            let mut params = OltpParams::default();
            p.apply_workload(&mut params).unwrap();
            params.validate().unwrap();
            let mut o = Options::default();
            p.apply_options(&mut o).unwrap();
            o.validate().unwrap();
            assert_eq!(o.flush_policy.as_str(), "classic", "{}", p.name);
            // Every run of the preset validates, prepare options included.
            for axis in p.vary_axes(&[]).unwrap() {
                for v in &axis.values {
                    let mut o = o.clone();
                    o.set(&axis.key, v).unwrap();
                    o.validate().unwrap();
                }
            }
            let mut prep = o.clone();
            prep.apply_sets(p.prepare_sets().iter().map(String::as_str))
                .unwrap();
            prep.validate().unwrap();
            // Prepare holds the whole data set in its pool.
            let approx_data = params.tables as u64 * params.table_size * 450;
            assert!(prep.buffer_pool_size > approx_data, "{}", p.name);
            assert!(find_preset(p.name).unwrap() == *p);
        }
    }

    #[test]
    fn presets_build_on_their_base_and_own_settings_win() {
        let n = find_preset("neighbors").unwrap();
        let w = n.workload_settings();
        assert!(w.contains(&("threads", "32")) && w.contains(&("time", "60")));
        assert!(!w.contains(&("time", "150")));
        assert_eq!(n.option_settings(), DISASTER_55.option_settings());
        assert_eq!(n.vary_settings(), [("flush_neighbors", "2,1,0")]);
        assert_eq!(n.prepare_settings(), DISASTER_55.prepare_settings());
        let s = find_preset("waves-80-sweep").unwrap();
        let o = s.option_settings();
        assert!(o.contains(&("doublewrite_pages", "128")) && o.contains(&("device", "sata-ssd")));
        assert_eq!(
            o.iter().filter(|(k, _)| *k == "doublewrite_pages").count(),
            1
        );
        let mut p = OltpParams::default();
        s.apply_workload(&mut p).unwrap();
        assert_eq!((p.threads, p.time_s), (16, 50.0));
        let d = find_preset("disaster-55").unwrap();
        let mut p = OltpParams::default();
        d.apply_workload(&mut p).unwrap();
        assert_eq!((p.workload, p.threads), (Workload::WriteOnly, 32));
        let mut o = Options::default();
        d.apply_options(&mut o).unwrap();
        assert_eq!((o.io_capacity, o.io_capacity_max), (100, 200));
        assert_eq!((o.log_file_size, o.log_files_in_group), (2 << 20, 2));
        assert!(o.buffer_pool_size >= 8 * o.log_file_size * o.log_files_in_group as u64);
        assert_eq!(o.device, "hdd-raid10");
    }

    #[test]
    fn vary_axes_given_by_the_user_are_dropped() {
        let n = find_preset("neighbors").unwrap();
        assert_eq!(n.vary_axes(&[]).unwrap()[0].values, ["2", "1", "0"]);
        assert!(n.vary_axes(&["flush_neighbors".into()]).unwrap().is_empty());
        assert!(n.vary_axes(&["flush-neighbors".into()]).unwrap().is_empty());
        assert_eq!(n.vary_axes(&["threads".into()]).unwrap().len(), 1);
    }

    #[test]
    fn unknown_presets_are_refused_naming_the_known_ones_and_list_shows_all() {
        let e = find_preset("disaster-56").unwrap_err().to_string();
        assert!(e.contains("disaster-56"), "{e}");
        for p in PRESETS {
            assert!(e.contains(p.name), "{e}");
        }
        let list = presets_text();
        for p in PRESETS {
            assert!(
                list.lines()
                    .any(|l| l.trim_start().starts_with(p.name) && l.contains(p.about)),
                "{list}"
            );
        }
        let s = find_preset("waves-80").unwrap().settings(&["time".into()]);
        assert_eq!(s.options["doublewrite_pages"], 8);
        assert_eq!(s.options["device"], "sata-ssd");
        assert_eq!(s.overridden, ["time"]);
        assert_eq!(s.prepare["device"], "unlimited");
    }
}
