//! Keel's options mapped one to one to MariaDB's InnoDB variables, so that
//! `keel bench innodb --set KEY=VALUE` takes the same keys as `keel bench
//! oltp` and both engines run with the same buffer pool, log, durability
//! and flushing knobs.

use keel::Options;

use crate::oltp::OltpError;

/// How a Keel option reaches InnoDB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapping {
    /// The InnoDB variable of this name, with the same value (sizes in
    /// bytes, booleans as ON/OFF).
    Same(&'static str),
    /// No InnoDB equivalent; setting it is an error that says why.
    Absent(&'static str),
}

/// Every Keel option, in the order `Options` lists them, and its mapping.
/// `log_file_size` × `log_files_in_group` together make
/// `innodb_log_file_size` (MariaDB 10.5+ has one redo file).
pub const MAPPINGS: &[(&str, Mapping)] = &[
    ("page_size", Mapping::Same("innodb_page_size")),
    ("buffer_pool_size", Mapping::Same("innodb_buffer_pool_size")),
    (
        "buffer_pool_instances",
        Mapping::Absent("MariaDB 10.5+ has one buffer pool instance"),
    ),
    ("old_blocks_pct", Mapping::Same("innodb_old_blocks_pct")),
    ("old_blocks_time", Mapping::Same("innodb_old_blocks_time")),
    (
        "data_files",
        Mapping::Absent("InnoDB keeps a file per table (innodb_file_per_table)"),
    ),
    ("flush_method", Mapping::Same("innodb_flush_method")),
    (
        "device",
        Mapping::Absent(
            "InnoDB runs on the real disk only; throttle it with --throttle-write-iops / \
             --throttle-write-bw, and give Keel the same limit",
        ),
    ),
    (
        "flush_policy",
        Mapping::Absent("InnoDB has its own flushing (what Keel's `classic` reproduces)"),
    ),
    (
        "page_cleaners",
        Mapping::Absent("MariaDB 10.5+ has one page cleaner thread"),
    ),
    ("lru_scan_depth", Mapping::Same("innodb_lru_scan_depth")),
    (
        "max_dirty_pages_pct",
        Mapping::Same("innodb_max_dirty_pages_pct"),
    ),
    (
        "max_dirty_pages_pct_lwm",
        Mapping::Same("innodb_max_dirty_pages_pct_lwm"),
    ),
    ("io_capacity", Mapping::Same("innodb_io_capacity")),
    ("io_capacity_max", Mapping::Same("innodb_io_capacity_max")),
    (
        "adaptive_flushing",
        Mapping::Same("innodb_adaptive_flushing"),
    ),
    (
        "adaptive_flushing_lwm",
        Mapping::Same("innodb_adaptive_flushing_lwm"),
    ),
    (
        "flushing_avg_loops",
        Mapping::Same("innodb_flushing_avg_loops"),
    ),
    ("flush_sync", Mapping::Same("innodb_flush_sync")),
    ("flush_neighbors", Mapping::Same("innodb_flush_neighbors")),
    ("write_io_threads", Mapping::Same("innodb_write_io_threads")),
    ("log_file_size", Mapping::Same("innodb_log_file_size")),
    ("log_files_in_group", Mapping::Same("innodb_log_file_size")),
    (
        "flush_log_at_trx_commit",
        Mapping::Same("innodb_flush_log_at_trx_commit"),
    ),
    (
        "lock_wait_timeout",
        Mapping::Same("innodb_lock_wait_timeout"),
    ),
    // MariaDB 10.11 names it `tx_isolation` (`transaction_isolation` from
    // 11.1); the startup flag is `--transaction-isolation` in both.
    ("transaction_isolation", Mapping::Same("tx_isolation")),
    ("purge_threads", Mapping::Same("innodb_purge_threads")),
    ("fill_factor", Mapping::Same("innodb_fill_factor")),
    ("doublewrite", Mapping::Same("innodb_doublewrite")),
    (
        "page_compression",
        Mapping::Absent(
            "MariaDB compresses pages per table (PAGE_COMPRESSED=1, with \
             innodb_compression_algorithm), and the benchmark's tables are created without it",
        ),
    ),
    (
        "doublewrite_files",
        Mapping::Absent("InnoDB's doublewrite buffer is one area of the system tablespace"),
    ),
    (
        "doublewrite_pages",
        Mapping::Absent("InnoDB's doublewrite buffer has a fixed size"),
    ),
    (
        "read_only",
        Mapping::Absent(
            "the benchmark writes; innodb_read_only would refuse it, as Keel's read_only does",
        ),
    ),
];

/// The mapping of option `key`.
pub fn mapping(key: &str) -> Option<Mapping> {
    MAPPINGS.iter().find(|(k, _)| *k == key).map(|(_, m)| *m)
}

/// Keel's options with `sets` (`key=value`) applied, checked for InnoDB:
/// a key with no InnoDB equivalent is an error naming it and why.
pub fn options(sets: &[String]) -> Result<Options, OltpError> {
    let mut o = Options::default();
    for s in sets {
        let Some((k, v)) = s.split_once('=') else {
            return Err(OltpError::param(
                s.as_str(),
                "is not KEY=VALUE (e.g. buffer_pool_size=1GiB)",
            ));
        };
        let k = crate::oltp::normalize_key(k);
        match mapping(&k) {
            Some(Mapping::Same(_)) => o.set(&k, v.trim())?,
            Some(Mapping::Absent(why)) => {
                return Err(OltpError::param(
                    k,
                    format!("has no InnoDB equivalent: {why}"),
                ))
            }
            None => o.set(&k, v.trim())?,
        }
    }
    o.validate()?;
    Ok(o)
}

/// The `mariadbd` command-line options for `o`: every mapped option, so
/// that InnoDB runs with Keel's values (its defaults included) and not
/// its own. `io_capacity_max` 0 (Keel's "automatic") is left to InnoDB,
/// whose rule is the same (twice `io_capacity`, at least 2000).
pub fn server_flags(o: &Options) -> Vec<String> {
    let on = |b: bool| if b { "ON" } else { "OFF" };
    let mut f = vec![
        format!("--innodb-page-size={}", o.page_size),
        format!("--innodb-buffer-pool-size={}", o.buffer_pool_size),
        format!("--innodb-old-blocks-pct={}", o.old_blocks_pct),
        format!("--innodb-old-blocks-time={}", o.old_blocks_time),
        format!("--innodb-flush-method={}", o.flush_method.as_str()),
        format!("--innodb-lru-scan-depth={}", o.lru_scan_depth),
        format!("--innodb-max-dirty-pages-pct={}", o.max_dirty_pages_pct),
        format!(
            "--innodb-max-dirty-pages-pct-lwm={}",
            o.max_dirty_pages_pct_lwm
        ),
        format!("--innodb-io-capacity={}", o.io_capacity),
        format!("--innodb-adaptive-flushing={}", on(o.adaptive_flushing)),
        format!("--innodb-adaptive-flushing-lwm={}", o.adaptive_flushing_lwm),
        format!("--innodb-flushing-avg-loops={}", o.flushing_avg_loops),
        format!("--innodb-flush-sync={}", on(o.flush_sync)),
        // `auto` is Keel's own: InnoDB gets 8.0's default, as `classic`.
        format!(
            "--innodb-flush-neighbors={}",
            o.flush_neighbors.fixed().unwrap_or_default().as_option()
        ),
        format!("--innodb-write-io-threads={}", o.write_io_threads),
        format!(
            "--innodb-log-file-size={}",
            o.log_file_size * o.log_files_in_group as u64
        ),
        format!(
            "--innodb-flush-log-at-trx-commit={}",
            o.flush_log_at_trx_commit
        ),
        format!(
            "--innodb-lock-wait-timeout={}",
            o.lock_wait_timeout.ceil().max(1.0) as u64
        ),
        format!("--transaction-isolation={}", o.transaction_isolation),
        format!("--innodb-purge-threads={}", o.purge_threads),
        format!("--innodb-fill-factor={}", o.fill_factor),
        // MariaDB 10.11's innodb_doublewrite is ON or OFF: Keel's
        // detect_only and atomic write no page images, as OFF writes none.
        format!(
            "--innodb-doublewrite={}",
            on(o.doublewrite == keel::DoublewriteMode::On)
        ),
    ];
    if o.io_capacity_max > 0 {
        f.push(format!("--innodb-io-capacity-max={}", o.io_capacity_max));
    }
    f
}

/// The InnoDB variables the report lists as the run's options (read back
/// from the server, so they say what ran).
pub fn reported_variables() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = MAPPINGS
        .iter()
        .filter_map(|(_, m)| match m {
            Mapping::Same(name) => Some(*name),
            Mapping::Absent(_) => None,
        })
        .collect();
    v.dedup();
    v
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn every_keel_option_has_a_mapping_and_every_flag_is_set() {
        let keys: Vec<String> = Options::default()
            .entries()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        for k in &keys {
            assert!(mapping(k).is_some(), "option `{k}` has no InnoDB mapping");
        }
        assert_eq!(MAPPINGS.len(), keys.len(), "a mapping names no option");
        let o = options(&["buffer_pool_size=1GiB".into(), "log_file_size=32MiB".into()]).unwrap();
        let flags = server_flags(&o);
        assert!(flags.contains(&"--innodb-buffer-pool-size=1073741824".to_string()));
        // Two files of 32 MiB: one InnoDB log of 64 MiB.
        assert!(flags.contains(&"--innodb-log-file-size=67108864".to_string()));
        assert!(flags.contains(&"--innodb-flush-method=O_DIRECT".to_string()));
        assert!(!flags
            .iter()
            .any(|f| f.starts_with("--innodb-io-capacity-max")));
        let vars = reported_variables();
        assert!(vars.contains(&"innodb_log_file_size") && vars.contains(&"innodb_doublewrite"));
        assert!(vars.contains(&"innodb_fill_factor"));
        // Every mapped variable is passed to the server, so that InnoDB runs
        // with Keel's value and not its own default; `io_capacity_max` 0
        // (automatic) alone is left to InnoDB.
        for name in vars {
            // MariaDB 10.11's `tx_isolation` is set by `--transaction-isolation`.
            let flag = match name {
                "tx_isolation" => "--transaction-isolation=".to_string(),
                name => format!("--{}=", name.replace('_', "-")),
            };
            assert!(
                name == "innodb_io_capacity_max" || flags.iter().any(|f| f.starts_with(&flag)),
                "no {flag}... among {flags:?}"
            );
        }
    }

    #[test]
    fn fill_factor_is_innodb_fill_factor_with_its_range() {
        assert_eq!(
            mapping("fill_factor"),
            Some(Mapping::Same("innodb_fill_factor"))
        );
        let flags = server_flags(&options(&[]).unwrap());
        assert!(
            flags.contains(&"--innodb-fill-factor=100".to_string()),
            "{flags:?}"
        );
        let o = options(&["fill_factor=70".into()]).unwrap();
        assert_eq!(o.fill_factor, 70);
        assert!(server_flags(&o).contains(&"--innodb-fill-factor=70".to_string()));
        // MariaDB's range is Keel's: 10 to 100.
        for bad in ["fill_factor=5", "fill_factor=101"] {
            let e = options(&[bad.into()]).unwrap_err().to_string();
            assert!(
                e.contains("fill_factor") && e.contains("between 10 and 100"),
                "{e}"
            );
        }
    }

    #[test]
    fn options_without_an_innodb_equivalent_are_refused_by_name() {
        for (set, needle) in [
            ("flush_policy=steady", "own flushing"),
            ("device=nvme", "--throttle-write-iops"),
            ("data_files=2", "file per table"),
        ] {
            let e = options(&[set.into()]).unwrap_err().to_string();
            assert!(
                e.contains(set.split('=').next().unwrap()) && e.contains(needle),
                "{e}"
            );
        }
        let e = options(&["no_such=1".into()]).unwrap_err().to_string();
        assert!(e.contains("no_such"), "{e}");
        let e = options(&["buffer_pool_size".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("KEY=VALUE"), "{e}");
    }
}
