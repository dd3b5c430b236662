//! `keel report`: merge the JSON files of several `keel bench oltp` (and
//! `keel bench innodb`) invocations into one HTML report, one JSON file and
//! one summary table.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use keel_bench::oltp;

#[derive(Args)]
#[command(
    after_help = "Runs keep their labels unless two would show the same one; then each \
run is named after its file (`steady-300.json` gives `steady-300: read_write`), and runs \
still alike are numbered (#2, #3). A figure an engine does not measure shows as n/a.\n\n\
Example:\n  keel report innodb-300.json classic-300.json steady-300.json --out compare-300"
)]
pub struct ReportArgs {
    /// JSON files written by `keel bench oltp --json` or `keel bench innodb --json`, in the
    /// order their runs should appear.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Directory for the merged report: index.html, report.json and summary.txt.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Also give each configuration's median over its repetitions: the runs of
    /// files named NAME-1.json, NAME-2.json, ... repeat NAME.
    #[arg(long)]
    repeats: bool,
}

pub fn run(a: ReportArgs) -> Result<()> {
    let reports = a
        .files
        .iter()
        .map(|f| Ok((f.clone(), oltp::read_report(f)?)))
        .collect::<Result<Vec<_>>>()?;
    let repeats = if a.repeats {
        format!("\n{}", oltp::repeats_text(&reports))
    } else {
        String::new()
    };
    let merged = oltp::merge(reports);
    let page = oltp::write_html_report(&merged, &a.out)?;
    let json = a.out.join("report.json");
    oltp::write_json(&merged, &json)?;
    let table = oltp::summary_text(&merged) + &repeats;
    let text = a.out.join("summary.txt");
    std::fs::write(&text, &table)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", text.display()))?;
    print!("{table}");
    println!(
        "{} runs from {} files\nreport: {}\nJSON: {}\nsummary: {}",
        merged.runs.len(),
        a.files.len(),
        page.display(),
        json.display(),
        text.display()
    );
    Ok(())
}
