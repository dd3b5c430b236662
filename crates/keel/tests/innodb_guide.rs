#![allow(clippy::unwrap_used)]
//! `docs/for-innodb-users.md` names only options and metrics that exist.
//!
//! The guide's convention: in its Markdown tables, every backticked name in
//! a column headed "Keel option" is an option `Options::set` accepts, and
//! every backticked name in a column headed "Keel metric" is in
//! `Metrics::NAMES`; a cell in those columns that starts with "—" says Keel
//! has none and is skipped. This test parses those columns (tables inside
//! fenced code blocks are not tables) and checks:
//! - every option named is a key of the serialized `Options` and
//!   `Options::set` accepts it with its own default value, and every key of
//!   `Options` is named, so a new option cannot be left out of the guide;
//! - every metric named is in `Metrics::NAMES`;
//! - every such cell names something or starts with "—", and every table
//!   row has as many cells as its header, so a slip in the Markdown cannot
//!   hide a name;
//! - the rows whose "Read by" cell says "classic only" name exactly
//!   `keel::CLASSIC_ONLY`, and the ones whose "Db::set_option in Keel"
//!   cell says "yes" name only `keel::RUNTIME_OPTIONS` (and "no" none);
//! - at least 15 distinct options and 15 distinct metrics are named, so the
//!   test cannot pass on an empty or unparsed guide;
//! - and, on a small made-up document, that the checks catch made-up names
//!   and malformed cells, each reported with its line.

use std::collections::{BTreeMap, BTreeSet};

use keel::{Metrics, Options, CLASSIC_ONLY, RUNTIME_OPTIONS};

const GUIDE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../docs/for-innodb-users.md"
);

const OPTION_COLUMN: &str = "Keel option";
const METRIC_COLUMN: &str = "Keel metric";
const POLICY_COLUMN: &str = "Read by";
const RUNTIME_COLUMN: &str = "Db::set_option in Keel";
/// How a cell says Keel has no such thing.
const ABSENT: &str = "—";

/// One row of a Markdown table: its 1-based line and its cells by header.
#[derive(Debug)]
struct Row {
    line: usize,
    cells: BTreeMap<String, String>,
}

/// A name found in a table cell, with the line it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Found {
    line: usize,
    name: String,
}

/// The cells of a table line: the text between its outer pipes, split on
/// the inner ones, trimmed.
fn cells(line: &str) -> Vec<String> {
    let t = line.trim();
    let t = t.strip_prefix('|').unwrap_or(t);
    let t = t.strip_suffix('|').unwrap_or(t);
    t.split('|').map(|c| c.trim().to_string()).collect()
}

fn is_separator(cells: &[String]) -> bool {
    cells
        .iter()
        .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':' | ' ')))
}

/// Every body row of every Markdown table in `doc` (outside fenced code
/// blocks), and the structural problems met: a table without its separator
/// line, a row whose cell count differs from its header's.
fn table_rows(doc: &str) -> (Vec<Row>, Vec<String>) {
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    let mut in_fence = false;
    // The header of the table being read, and whether its separator was seen.
    let mut table: Option<(Vec<String>, bool)> = None;
    for (i, raw) in doc.lines().enumerate() {
        let line = i + 1;
        let t = raw.trim();
        if t.starts_with("```") {
            in_fence = !in_fence;
            table = None;
            continue;
        }
        if in_fence || !t.starts_with('|') {
            table = None;
            continue;
        }
        let c = cells(t);
        match &mut table {
            None => table = Some((c, false)),
            Some((_, sep @ false)) => {
                if is_separator(&c) {
                    *sep = true;
                } else {
                    problems.push(format!(
                        "line {line}: a table header not followed by a separator line"
                    ));
                    table = None;
                }
            }
            Some((header, true)) => {
                if c.len() != header.len() {
                    problems.push(format!(
                        "line {line}: {} cells where the header has {}",
                        c.len(),
                        header.len()
                    ));
                    continue;
                }
                rows.push(Row {
                    line,
                    cells: header.iter().cloned().zip(c).collect(),
                });
            }
        }
    }
    (rows, problems)
}

/// The backticked names of `cell`, or why it has none it should have.
fn names_in_cell(cell: &str) -> Result<Vec<String>, String> {
    if cell.starts_with(ABSENT) {
        return Ok(Vec::new());
    }
    let parts: Vec<&str> = cell.split('`').collect();
    if parts.len().is_multiple_of(2) {
        return Err(format!("unbalanced backticks in `{cell}`"));
    }
    let names: Vec<String> = parts
        .iter()
        .skip(1)
        .step_by(2)
        .map(|s| s.trim().to_string())
        .collect();
    if names.is_empty() || names.iter().any(String::is_empty) {
        return Err(format!(
            "cell `{cell}` neither names something in backticks nor starts with {ABSENT}"
        ));
    }
    Ok(names)
}

/// The names in every cell of the column headed `column`, and the problems
/// (table structure and cells) met on the way.
fn names_in_column(doc: &str, column: &str) -> (Vec<Found>, Vec<String>) {
    let (rows, mut problems) = table_rows(doc);
    let mut found = Vec::new();
    for row in &rows {
        let Some(cell) = row.cells.get(column) else {
            continue;
        };
        match names_in_cell(cell) {
            Ok(names) => found.extend(names.into_iter().map(|name| Found {
                line: row.line,
                name,
            })),
            Err(why) => problems.push(format!("line {}: {column}: {why}", row.line)),
        }
    }
    (found, problems)
}

/// The names that are not options, each with its line.
fn bad_options(found: &[Found]) -> Vec<String> {
    let defaults: BTreeMap<String, String> = Options::default().entries().into_iter().collect();
    let mut bad = Vec::new();
    for f in found {
        let Some(value) = defaults.get(&f.name) else {
            bad.push(format!(
                "line {}: `{}` is not a Keel option",
                f.line, f.name
            ));
            continue;
        };
        if let Err(e) = Options::default().set(&f.name, value) {
            bad.push(format!(
                "line {}: `{}`: Options::set refuses its own default `{value}`: {e}",
                f.line, f.name
            ));
        }
    }
    bad
}

/// The names that are not metrics, each with its line.
fn bad_metrics(found: &[Found]) -> Vec<String> {
    found
        .iter()
        .filter(|f| !Metrics::NAMES.contains(&f.name.as_str()))
        .map(|f| format!("line {}: `{}` is not a Keel metric", f.line, f.name))
        .collect()
}

fn guide() -> String {
    std::fs::read_to_string(GUIDE).unwrap_or_else(|e| panic!("cannot read {GUIDE}: {e}"))
}

fn distinct(found: &[Found]) -> BTreeSet<&str> {
    found.iter().map(|f| f.name.as_str()).collect()
}

/// Check the names in `column` with `bad` (what is wrong with each), and
/// that at least 15 distinct ones are there.
fn check_column(column: &str, what: &str, bad: fn(&[Found]) -> Vec<String>) {
    let doc = guide();
    let (found, problems) = names_in_column(&doc, column);
    assert!(
        problems.is_empty(),
        "{GUIDE}: malformed tables:\n{}",
        problems.join("\n")
    );
    let bad = bad(&found);
    assert!(
        bad.is_empty(),
        "{GUIDE}: names in a \"{column}\" column that are not {what}:\n{}",
        bad.join("\n")
    );
    let names = distinct(&found);
    assert!(
        names.len() >= 15,
        "{GUIDE}: only {} distinct names found in \"{column}\" columns: {names:?}",
        names.len()
    );
}

#[test]
fn every_option_the_guide_names_exists() {
    check_column(OPTION_COLUMN, "options", bad_options);
}

/// Every option `Options` has is named in a "Keel option" column: the
/// guide maps each one (to its InnoDB variable, or says it has none).
#[test]
fn the_guide_names_every_option() {
    let doc = guide();
    let (found, problems) = names_in_column(&doc, OPTION_COLUMN);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let named = distinct(&found);
    let missing: Vec<String> = Options::default()
        .entries()
        .into_iter()
        .map(|(k, _)| k)
        .filter(|k| !named.contains(k.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{GUIDE}: options named in no \"{OPTION_COLUMN}\" column: {missing:?}"
    );
}

#[test]
fn every_metric_the_guide_names_exists() {
    check_column(METRIC_COLUMN, "in Metrics::NAMES", bad_metrics);
}

#[test]
fn the_options_said_to_be_classic_only_are_classic_only() {
    let doc = guide();
    let (rows, problems) = table_rows(&doc);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let mut said = BTreeSet::new();
    for row in &rows {
        let (Some(option), Some(policy)) =
            (row.cells.get(OPTION_COLUMN), row.cells.get(POLICY_COLUMN))
        else {
            continue;
        };
        if policy == "classic only" {
            said.extend(names_in_cell(option).unwrap());
        }
    }
    let expected: BTreeSet<String> = CLASSIC_ONLY.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        said, expected,
        "{GUIDE}: the options whose \"{POLICY_COLUMN}\" cell says \"classic only\" \
         differ from keel::CLASSIC_ONLY"
    );
}

/// The column "Db::set_option in Keel" says "yes" exactly for the options
/// in `keel::RUNTIME_OPTIONS`.
#[test]
fn the_options_said_to_change_at_run_time_do() {
    let doc = guide();
    let (rows, problems) = table_rows(&doc);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    let mut seen = 0;
    for row in &rows {
        let (Some(option), Some(runtime)) =
            (row.cells.get(OPTION_COLUMN), row.cells.get(RUNTIME_COLUMN))
        else {
            continue;
        };
        seen += 1;
        let names = names_in_cell(option).unwrap();
        let all_runtime = names.iter().all(|n| RUNTIME_OPTIONS.contains(&n.as_str()));
        assert_eq!(
            runtime == "yes",
            all_runtime && !names.is_empty(),
            "{GUIDE}:{}: `{option}` says \"{runtime}\" under \"{RUNTIME_COLUMN}\"",
            row.line
        );
        assert!(
            runtime == "yes" || runtime == "no",
            "{GUIDE}:{}: \"{runtime}\" is neither yes nor no",
            row.line
        );
    }
    assert!(
        seen >= 20,
        "only {seen} rows have a \"{RUNTIME_COLUMN}\" cell"
    );
}

#[test]
fn the_checks_catch_made_up_names_and_malformed_cells() {
    let doc = "\
# A made-up guide

| InnoDB variable | Keel option | Notes |
|---|---|---|
| `innodb_x` | `no_such_option` | made up |
| `innodb_y` | `page_size` | real |
| `innodb_z` | — | absent: skipped |

| InnoDB metric | Keel metric |
|---|---|
| x | `no_such_metric`, `log_lsn_checkpoint_age` |
| y | no backticks here |
| z | `os_data_writes` | one cell too many |

```text
| Keel metric |
|---|
| `inside_a_code_block` |
```
";
    let (options, problems) = names_in_column(doc, OPTION_COLUMN);
    assert_eq!(
        options,
        vec![
            Found {
                line: 5,
                name: "no_such_option".into()
            },
            Found {
                line: 6,
                name: "page_size".into()
            },
        ]
    );
    assert_eq!(
        bad_options(&options),
        vec!["line 5: `no_such_option` is not a Keel option".to_string()]
    );
    assert_eq!(problems, vec!["line 13: 3 cells where the header has 2"]);

    let (metrics, problems) = names_in_column(doc, METRIC_COLUMN);
    let names: Vec<&str> = metrics.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["no_such_metric", "log_lsn_checkpoint_age"]);
    assert_eq!(
        bad_metrics(&metrics),
        vec!["line 11: `no_such_metric` is not a Keel metric".to_string()]
    );
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].starts_with("line 13: "), "{problems:?}");
    assert!(
        problems[1].starts_with("line 12: Keel metric: cell `no backticks here`"),
        "{problems:?}"
    );
    assert!(names_in_cell("`a` and `b").is_err());
    assert_eq!(names_in_cell("— absent: why"), Ok(Vec::new()));
}

#[test]
fn every_prometheus_name_the_guide_gives_is_one_keel_serves() {
    let text = std::fs::read_to_string(GUIDE).unwrap();
    let mut served: BTreeSet<String> = Metrics::NAMES
        .iter()
        .map(|n| keel::prometheus_name(n))
        .collect();
    served.extend(
        [
            "keel_writer_pause_seconds",
            "keel_trx_commit_latency_seconds",
        ]
        .map(String::from),
    );
    let mut named = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for (j, part) in line.split('`').enumerate() {
            // Odd parts are inside backticks.
            if j % 2 == 1
                && part.len() > 5
                && part.starts_with("keel_")
                && !part.contains(['(', ' ', '.'])
            {
                named.push((i + 1, part.to_string()));
            }
        }
    }
    assert!(named.len() >= 5, "the guide names no Prometheus series");
    let bad: Vec<_> = named.iter().filter(|(_, n)| !served.contains(n)).collect();
    assert!(bad.is_empty(), "not served by Keel: {bad:?}");
}
