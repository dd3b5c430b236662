//! `keel bench oltp --preset showdown`: the seed presets one after another,
//! each as `--preset NAME` with the rest of the command line and
//! `--vary flush_policy=classic,steady` added (unless the command line
//! gives `flush_policy` itself, in any form: then theirs). Each preset gets
//! its own data (`--datadir` is their parent), its own report in
//! `REPORT/NAME/` and its own JSON and CSV files (`runs.json` →
//! `runs-NAME.json`). The verdicts are computed in
//! `keel_bench::oltp::showdown`; the summary page and `showdown.json` are
//! rewritten after every preset, so a showdown cut short keeps what it
//! measured.

use anyhow::{bail, Context, Result};
use keel_bench::oltp::{self, Plan};

use super::{execute, plan, resolve, steady_note, temp_datadir, write_outputs, OltpArgs};

/// Run the showdown.
pub(super) fn run(a: &OltpArgs) -> Result<()> {
    let own_policy = resolve::given_keys(a)?.iter().any(|k| k == "flush_policy");
    let tmp;
    let (parent, temporary) = match &a.datadir {
        Some(d) => (d.clone(), false),
        None => {
            tmp = temp_datadir()?;
            (tmp.path().to_path_buf(), true)
        }
    };
    // Every preset's plan, checked before any work: a bad flag fails at
    // once, not after the first presets ran.
    let mut steps: Vec<(OltpArgs, Plan)> = Vec::new();
    for p in oltp::SHOWDOWN_PRESETS {
        let mut pa = a.clone();
        pa.preset = Some(p.name.to_string());
        if !own_policy {
            pa.vary.push(oltp::SHOWDOWN_VARY.to_string());
        }
        pa.json = a.json.as_deref().map(|f| oltp::preset_file(f, p.name));
        pa.csv = a.csv.as_deref().map(|f| oltp::preset_file(f, p.name));
        pa.report = a.report.join(p.name);
        let dir = parent.join(p.name);
        pa.datadir = Some(dir.clone());
        let plan = plan(&pa, dir).with_context(|| format!("--preset showdown: {}", p.name))?;
        if !a.reuse_data && keel::Db::exists(&plan.datadir) {
            bail!(
                "--preset showdown: {} already holds a Keel database: pass --reuse-data to run \
                 on its tables, or choose another --datadir",
                plan.datadir.display()
            );
        }
        steps.push((pa, plan));
    }
    if let Some((pa, plan)) = steps.first() {
        steady_note(pa, plan)?;
    }
    let names: Vec<String> = steps
        .iter()
        .filter_map(|(pa, _)| pa.preset.clone())
        .collect();
    let runs: usize = steps
        .iter()
        .map(|(_, plan)| plan.runs().map_or(0, |r| r.len()))
        .sum();
    println!(
        "showdown: {} presets, {runs} runs, one after another: {}{}",
        names.len(),
        names.join(", "),
        if own_policy {
            " (flush_policy as given on the command line)"
        } else {
            ", each with --vary flush_policy=classic,steady"
        }
    );
    let metrics = match &a.metrics_listen {
        Some(addr) => Some(super::MetricsEndpoint::start(addr)?),
        None => None,
    };
    let mut verdicts = Vec::new();
    for (i, (pa, plan)) in steps.iter().enumerate() {
        let name = &names[i];
        println!("\n=== showdown {}/{}: {name} ===", i + 1, steps.len());
        let report = execute(plan, None, metrics.as_ref())
            .with_context(|| format!("--preset showdown: {name}"))?;
        write_outputs(pa, &report)?;
        verdicts.push(oltp::judge(name, &format!("{name}/index.html"), &report));
        let summary = oltp::ShowdownReport::new(verdicts.clone(), names[i + 1..].to_vec());
        let (page, json) = oltp::write_showdown(&summary, &a.report)?;
        if i + 1 == steps.len() {
            print!("{}", oltp::showdown_text(&summary));
            println!("showdown report: {}", page.display());
            println!("showdown JSON: {}", json.display());
        }
        // The next preset needs the disk space more than this one's data.
        if temporary {
            match std::fs::remove_dir_all(&plan.datadir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e)
                        .with_context(|| format!("cannot remove {}", plan.datadir.display()));
                }
                _ => {}
            }
        }
    }
    Ok(())
}
