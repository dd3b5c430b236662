#![allow(clippy::unwrap_used)]
//! `scripts/scaling.sh` end to end, at the smallest size: it runs the
//! thread sweep on Keel (and on one other engine of this build, if any),
//! prints the median table and the scaling ratios, and writes the chart
//! and the merged report. Skipped, saying so, where bash or python3 is
//! missing (the script needs python3 for its table and chart).

mod common;

use common::{run, script};

#[test]
fn the_scaling_script_prints_its_table_and_writes_its_chart() {
    let Some(mut cmd) = script("scaling.sh") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (out, work) = (dir.path().join("out"), dir.path().join("work"));
    let other = keel_bench::oltp::Engine::ALL
        .into_iter()
        .find(|e| *e != keel_bench::oltp::Engine::Keel && e.built());
    let engines = match other {
        Some(e) => format!("keel,{}", e.name()),
        None => "keel".to_string(),
    };
    let r = run(cmd
        .args([
            "--threads-list",
            "1,2",
            "--tables",
            "1",
            "--table-size",
            "300",
        ])
        .args(["--time", "1", "--pool", "16MiB", "--engines", &engines])
        .arg("--out")
        .arg(&out)
        .arg("--work")
        .arg(&work));
    let text = r.text();
    assert!(r.ok(), "scaling.sh failed:\n{text}");
    // The table: a header with both thread counts, a row per engine with
    // a figure for each, and the ratios' header.
    let table = std::fs::read_to_string(out.join("scaling.txt")).unwrap();
    assert!(text.contains(table.lines().next().unwrap()), "{text}");
    let header = table
        .lines()
        .find(|l| l.starts_with("engine \\ threads"))
        .unwrap_or_else(|| panic!("no header in:\n{table}"));
    assert_eq!(
        header.split_whitespace().skip(3).collect::<Vec<_>>(),
        ["1", "2"]
    );
    for engine in engines.split(',') {
        let row = table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(engine))
            .unwrap_or_else(|| panic!("no row for {engine} in:\n{table}"));
        let figures: Vec<f64> = row
            .split_whitespace()
            .skip(1)
            .take(2)
            .map(|f| f.parse().unwrap())
            .collect();
        assert!(figures.iter().all(|&f| f > 0.0), "{row}");
    }
    assert!(table.contains("tps(16)/tps(1)"), "{table}");
    let chart = std::fs::read_to_string(out.join("scaling.html")).unwrap();
    assert!(chart.contains("<svg"), "no chart in scaling.html");
    assert!(out.join("report/index.html").exists(), "no merged report");
}
