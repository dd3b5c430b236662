//! How `keel bench oltp` combines its inputs: the built-in defaults, a
//! scenario preset and the command line. A preset only fills what the
//! command line does not give. Workload parameters: defaults, then the
//! preset's, then each flag given. Engine options: the default scenario,
//! then the preset's options, then the keys a --config file sets, then
//! --set in order, then --device. --vary: the preset's axes except those on
//! a key the command line gives in any form, then the user's axes. Prepare
//! options: the preset's, then --prepare-set. Device changes: the command
//! line's only (a preset has none).

use std::path::Path;

use anyhow::{Context, Result};
use keel::Options;
use keel_bench::oltp::{self, DeviceChange, HoldView, OltpParams, OptionChange, Preset, VaryAxis};

use super::OltpArgs;

/// The default scenario's engine options: a pool smaller than the data.
const SCENARIO: &[(&str, &str)] = &[("buffer_pool_size", "32MiB")];

/// The preset named by --preset (None for none or `list`).
pub(crate) fn chosen_preset(a: &OltpArgs) -> Result<Option<&'static Preset>> {
    match a.preset.as_deref() {
        None | Some("list") => Ok(None),
        Some(name) => Ok(Some(oltp::find_preset(name)?)),
    }
}

/// The option keys a `--config` file sets (those, and only those, override).
fn config_keys(path: &Path) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k.trim())
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(str::to_string)
        .collect())
}

/// Scenario defaults, then the preset's options, then the keys the TOML file
/// sets, then --set, then --device: each step wins over the ones before.
fn engine_options(a: &OltpArgs, preset: Option<&Preset>) -> Result<Options> {
    let mut o = Options::default();
    for (k, v) in SCENARIO {
        o.set(k, v)?;
    }
    if let Some(p) = preset {
        p.apply_options(&mut o)?;
    }
    if let Some(path) = &a.engine.config {
        let file = Options::from_toml_file(path).context("--config")?;
        let given = config_keys(path)?;
        for (k, v) in file.entries() {
            if given.contains(&k) {
                o.set(&k, &v)?;
            }
        }
    }
    a.engine.apply_overrides(&mut o)?;
    Ok(o)
}

/// The defaults, then the preset's workload, then every flag given.
fn params(a: &OltpArgs, preset: Option<&Preset>) -> Result<OltpParams> {
    let mut p = OltpParams::default();
    if let Some(pr) = preset {
        pr.apply_workload(&mut p)?;
    }
    macro_rules! given {
        ($($field:ident => $target:ident),* $(,)?) => {
            $( if let Some(v) = a.$field { p.$target = v; } )*
        };
    }
    given!(
        workload => workload,
        tables => tables,
        table_size => table_size,
        threads => threads,
        time => time_s,
        report_interval => report_interval_s,
        warmup => warmup_s,
        prewarm => prewarm,
        rand_type => rand_type,
        range_size => range_size,
        rate => rate,
        seed => seed,
    );
    Ok(p)
}

/// Every parameter and option key the command line gives, in any form: a
/// workload flag, --config, --set, --device, --vary (and `device_change`
/// for --device-change). These win over a preset.
pub(super) fn given_keys(a: &OltpArgs) -> Result<Vec<String>> {
    let flags: [(&str, bool); 12] = [
        ("workload", a.workload.is_some()),
        ("tables", a.tables.is_some()),
        ("table_size", a.table_size.is_some()),
        ("threads", a.threads.is_some()),
        ("time", a.time.is_some()),
        ("report_interval", a.report_interval.is_some()),
        ("warmup", a.warmup.is_some()),
        ("prewarm", a.prewarm.is_some()),
        ("rand_type", a.rand_type.is_some()),
        ("range_size", a.range_size.is_some()),
        ("rate", a.rate.is_some()),
        ("seed", a.seed.is_some()),
    ];
    let mut keys: Vec<String> = flags
        .iter()
        .filter(|(_, given)| *given)
        .map(|(k, _)| k.to_string())
        .collect();
    if let Some(path) = &a.engine.config {
        keys.extend(config_keys(path)?);
    }
    keys.extend(
        a.engine
            .sets
            .iter()
            .filter_map(|s| s.split_once('='))
            .map(|(k, _)| k.trim().to_string()),
    );
    if a.engine.device.is_some() {
        keys.push("device".into());
    }
    // Not a key a preset sets, but the run is no longer the preset as
    // defined, and the report says so.
    if !a.device_changes.is_empty() {
        keys.push("device_change".into());
    }
    if !a.option_changes.is_empty() {
        keys.push("set_at".into());
    }
    if a.hold_view.is_some() {
        keys.push("hold_view".into());
    }
    keys.extend(
        a.vary
            .iter()
            .filter_map(|v| v.split_once('='))
            .map(|(k, _)| k.trim().to_string()),
    );
    let mut out: Vec<String> = Vec::new();
    for k in keys.iter().map(|k| oltp::normalize_key(k)) {
        if !out.contains(&k) {
            out.push(k);
        }
    }
    Ok(out)
}

/// Everything a plan needs but its data directory.
#[derive(Debug)]
pub(crate) struct Resolved {
    /// Workload parameters.
    pub params: OltpParams,
    /// Engine options, validated.
    pub options: Options,
    /// The preset's --vary axes not overridden, then the user's.
    pub vary: Vec<VaryAxis>,
    /// Options for prepare only: the preset's, then --prepare-set.
    pub prepare_sets: Vec<String>,
    /// The preset with every key the command line gave (a run differing
    /// from the preset as defined).
    pub preset: Option<(&'static Preset, Vec<String>)>,
    /// --device-change, in the order given (the plan checks it per run).
    pub device_changes: Vec<DeviceChange>,
    /// --set-at, in the order given (the plan checks it per run).
    pub option_changes: Vec<OptionChange>,
    /// --hold-view (the plan checks it per run).
    pub hold_view: Option<HoldView>,
}

/// Combine the defaults, the preset and the command line (see the module doc).
pub(crate) fn resolve(a: &OltpArgs) -> Result<Resolved> {
    let preset = chosen_preset(a)?;
    let options = engine_options(a, preset)?;
    let params = params(a, preset)?;
    let given = given_keys(a)?;
    let mut vary = match preset {
        Some(p) => p.vary_axes(&given)?,
        None => Vec::new(),
    };
    for v in &a.vary {
        vary.push(v.parse::<VaryAxis>()?);
    }
    let mut prepare_sets = preset.map(|p| p.prepare_sets()).unwrap_or_default();
    prepare_sets.extend(a.prepare_sets.iter().cloned());
    // Every key given counts: the run is not the preset as defined.
    let preset = preset.map(|p| (p, given));
    Ok(Resolved {
        params,
        options,
        vary,
        prepare_sets,
        preset,
        device_changes: a.device_changes.clone(),
        option_changes: a.option_changes.clone(),
        hold_view: a.hold_view.clone(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::Parser;
    use keel_bench::oltp::Workload;

    type Tuple = (
        OltpParams,
        Options,
        Vec<VaryAxis>,
        Vec<String>,
        Option<(&'static Preset, Vec<String>)>,
    );

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: OltpArgs,
    }

    fn args(flags: &[&str]) -> OltpArgs {
        let mut argv = vec!["oltp"];
        argv.extend(flags);
        Cli::try_parse_from(argv).unwrap().a
    }

    fn resolved(flags: &[&str]) -> Tuple {
        let r = resolve(&args(flags)).unwrap();
        (r.params, r.options, r.vary, r.prepare_sets, r.preset)
    }

    #[test]
    fn without_a_preset_the_defaults_are_the_old_ones() {
        let (p, o, vary, prep, preset) = resolved(&[]);
        assert_eq!(p, OltpParams::default());
        assert_eq!(o.buffer_pool_size, 32 << 20);
        assert_eq!(o.flush_policy.as_str(), "steady");
        assert!(vary.is_empty() && prep.is_empty() && preset.is_none());
    }

    #[test]
    fn a_preset_fills_what_the_user_did_not_give() {
        let (p, o, vary, prep, preset) = resolved(&["--preset", "disaster-55"]);
        assert_eq!((p.threads, p.tables, p.table_size), (32, 4, 80_000));
        assert_eq!((p.time_s, p.report_interval_s), (150.0, 1.0));
        assert_eq!(p.workload, Workload::WriteOnly);
        assert_eq!((o.io_capacity, o.io_capacity_max), (100, 200));
        assert_eq!((o.log_file_size, o.log_files_in_group), (2 << 20, 2));
        assert_eq!(
            (o.flush_log_at_trx_commit, o.flush_neighbors.code()),
            (2, 2)
        );
        assert_eq!(o.device, "hdd-raid10");
        assert!(vary.is_empty());
        assert!(prep.contains(&"device=unlimited".to_string()), "{prep:?}");
        let (preset, given) = preset.unwrap();
        assert_eq!(preset.name, "disaster-55");
        assert!(given.is_empty());
        // A preset with --vary axes brings them.
        let (_, _, vary, _, _) = resolved(&["--preset", "waves-80-sweep"]);
        assert_eq!(vary.len(), 1);
        assert_eq!(vary[0].key, "io_capacity_max");
        assert_eq!(vary[0].values, ["2000", "3000", "4000", "8000"]);
    }

    #[test]
    fn user_flags_win_over_the_preset() {
        let (p, o, _, _, preset) = resolved(&[
            "--preset",
            "disaster-55",
            "--threads",
            "4",
            "--time",
            "2",
            "--tables",
            "1",
            "--table-size",
            "2000",
            "--workload",
            "write_only",
            "--device",
            "unlimited",
        ]);
        assert_eq!(
            (p.threads, p.time_s, p.tables, p.table_size),
            (4, 2.0, 1, 2000)
        );
        assert_eq!(p.workload, Workload::WriteOnly);
        // What the user did not give still comes from the preset.
        assert_eq!(p.report_interval_s, 1.0);
        assert_eq!(o.device, "unlimited");
        assert_eq!(o.io_capacity, 100);
        let (_, given) = preset.unwrap();
        assert_eq!(
            given,
            [
                "workload",
                "tables",
                "table_size",
                "threads",
                "time",
                "device"
            ]
        );
    }

    #[test]
    fn user_sets_apply_after_the_preset_and_drop_its_vary_axis_on_that_key() {
        // The preset's io_capacity_max (200) is below the user's
        // io_capacity (300): valid only because the user's sets come after
        // the preset's options and win.
        let (_, o, _, _, _) = resolved(&[
            "--preset",
            "disaster-55",
            "--set",
            "io_capacity=300",
            "--set",
            "io_capacity_max=600",
            "--set",
            "log_file_size=8MiB",
        ]);
        assert_eq!((o.io_capacity, o.io_capacity_max), (300, 600));
        assert_eq!(o.log_file_size, 8 << 20);
        assert_eq!(o.buffer_pool_size, 32 << 20);
        // --set on a key the preset varies: one run with the user's value.
        let (_, o, vary, _, _) = resolved(&["--preset", "neighbors", "--set", "flush_neighbors=0"]);
        assert!(vary.is_empty(), "{vary:?}");
        assert_eq!(o.flush_neighbors, keel::NeighborMode::Off.into());
        // The user's own --vary on that key replaces the preset's; on
        // another key it adds an axis.
        let (_, _, vary, _, _) =
            resolved(&["--preset", "neighbors", "--vary", "flush_neighbors=1,0"]);
        assert_eq!(vary.len(), 1);
        assert_eq!(vary[0].values, ["1", "0"]);
        let (_, _, vary, _, _) = resolved(&["--preset", "neighbors", "--vary", "threads=8,32"]);
        let keys: Vec<&str> = vary.iter().map(|v| v.key.as_str()).collect();
        assert_eq!(keys, ["flush_neighbors", "threads"]);
        // A workload flag on a varied workload key drops that axis too.
        let (_, _, vary, _, _) = resolved(&[
            "--preset",
            "neighbors",
            "--vary",
            "threads=8,32",
            "--threads",
            "2",
        ]);
        assert_eq!(vary.len(), 2);
    }

    #[test]
    fn prepare_sets_follow_the_presets_and_a_config_file_wins_over_the_preset() {
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("k.toml");
        std::fs::write(&toml, "io_capacity = 400\nio_capacity_max = 800\n").unwrap();
        let (_, o, _, prep, preset) = resolved(&[
            "--preset",
            "lru-scan-depth",
            "--config",
            toml.to_str().unwrap(),
            "--prepare-set",
            "device=nvme",
        ]);
        assert_eq!((o.io_capacity, o.io_capacity_max), (400, 800));
        assert_eq!(o.lru_scan_depth, 1024);
        assert_eq!(prep.first().map(String::as_str), Some("device=unlimited"));
        assert_eq!(prep.last().map(String::as_str), Some("device=nvme"));
        let (_, given) = preset.unwrap();
        assert_eq!(given, ["io_capacity", "io_capacity_max"]);
    }

    #[test]
    fn preset_names_are_checked_by_the_parser_and_list_is_one_of_them() {
        let a = args(&["--preset", "list"]);
        assert_eq!(a.preset.as_deref(), Some("list"));
        assert!(chosen_preset(&a).unwrap().is_none());
        let e = Cli::try_parse_from(["oltp", "--preset", "disaster-56"])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("disaster-56"), "{e}");
        for p in oltp::PRESETS {
            assert!(e.contains(p.name), "{e}");
        }
    }
}
