#![allow(clippy::unwrap_used)]
//! `scripts/at-scale.sh` end to end, at the smallest size: two
//! repetitions of seed 4 under both flushing policies on one prepared set
//! of tables, the merged report, and the table of each policy's medians
//! with the figures the at-scale criteria read (the median age as a share
//! of the free-check limit, the free-check waits, the longest pause).
//! Skipped, saying so, where bash or python3 is missing.

mod common;

use common::{run, script};

#[test]
fn the_at_scale_script_prints_each_policys_medians() {
    let Some(mut cmd) = script("at-scale.sh") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (out, work) = (dir.path().join("out"), dir.path().join("work"));
    let r = run(cmd
        .args(["--tables", "1", "--table-size", "2000", "--threads", "2"])
        .args(["--pool", "16MiB", "--instances", "1", "--log", "1MiB"])
        .args(["--time", "2", "--runs", "2"])
        .arg("--out")
        .arg(&out)
        .arg("--work")
        .arg(&work));
    let text = r.text();
    assert!(r.ok(), "at-scale.sh failed:\n{text}");
    let table = std::fs::read_to_string(out.join("at-scale.txt")).unwrap();
    assert!(text.contains(table.lines().nth(1).unwrap()), "{text}");
    assert!(
        table.contains("median age / free-check limit") && table.contains("free-check waits"),
        "{table}"
    );
    for policy in ["classic", "steady"] {
        let row = table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(policy))
            .unwrap_or_else(|| panic!("no row for {policy} in:\n{table}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        // Two runs, and a positive tps median with its range.
        assert_eq!(cells[1], "2", "{row}");
        assert!(cells[2].parse::<f64>().unwrap() > 0.0, "{row}");
        assert!(cells[3].starts_with('(') && cells[3].contains('-'), "{row}");
    }
    assert!(out.join("report/index.html").exists(), "no merged report");
    assert!(out.join("seed4-2.json").exists(), "no second repetition");
    // The prepared tables and the runs' copies are gone.
    assert!(
        !work.join("data").exists(),
        "the work directory was left behind"
    );
}
