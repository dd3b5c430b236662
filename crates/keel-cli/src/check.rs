//! `keel check DIR`: recover a data directory a crash left behind (and say
//! so), then verify every tree: every page checksum on the way, key order
//! within and across pages, child levels — and, for the bench's tables
//! `sbtestN`, that the `k` index `sbtestN_k` and the rows agree entry for
//! entry. Problems are collected, not fatal: each is one precise line, and
//! any of them makes the command exit with status 1.
//!
//! `--json` prints one object instead of the lines:
//! `{ "ok": bool, "recovered": bool, "tables": [ {"name", "rows", "pages"} ], "problems": [ "..." ] }`
//! where an index is listed as its own entry, `sbtestN.k`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use keel::format::data::{self, FileHeader, HEADER_LEN};
use keel::{Db, Options, TreeStats};
use keel_bench::oltp::{index_vs_rows, INDEX_SUFFIX};

use crate::engine_args::EngineArgs;

/// `keel check`'s arguments.
#[derive(Args)]
pub struct CheckArgs {
    /// The database directory.
    dir: PathBuf,
    /// Print the result as one JSON object: ok, recovered, tables (name, rows, pages), problems.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Engine options for opening the database to check. The page size and the
/// number of data files come from the header of `data-0.keel`, over a
/// config file's; `--set` and `--device` are applied after, so an explicit
/// value wins.
fn options(engine: &EngineArgs, header: Option<&FileHeader>) -> Result<Options> {
    engine.options_with(|o| {
        if let Some(h) = header {
            o.set("page_size", &h.page_size.to_string())?;
            o.set("data_files", &h.n_files.to_string())?;
        }
        Ok(())
    })
}

/// One checked tree, as listed.
struct Entry {
    /// Listed name: the tree's name, or `sbtestN.k` for a bench index.
    name: String,
    /// `None` if the tree failed its check.
    stats: Option<TreeStats>,
    /// Does the index disagree with its rows (set on both trees of a pair)?
    disagrees: bool,
}

/// Everything the check found.
struct Outcome {
    recovered: bool,
    recovery: Option<String>,
    entries: Vec<Entry>,
    problems: Vec<String>,
}

/// Run `keel check`.
pub fn run(args: CheckArgs) -> Result<()> {
    let dir = &args.dir;
    if !dir.join(data::file_name(0)).exists() {
        anyhow::bail!(
            "{} holds no Keel database (no {})",
            dir.display(),
            data::file_name(0)
        );
    }
    let out = check_dir(dir, &args.engine)?;
    // Written, not println!'d: a closed pipe (`| head`) is an error, not a panic.
    let mut stdout = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut stdout, &to_json(&out))?;
        writeln!(stdout)?;
    } else {
        print_human(&mut stdout, &out)?;
    }
    stdout.flush()?;
    if !out.problems.is_empty() {
        anyhow::bail!(
            "{} problem(s) found in {}",
            out.problems.len(),
            dir.display()
        );
    }
    Ok(())
}

fn check_dir(dir: &Path, engine: &EngineArgs) -> Result<Outcome> {
    let mut out = Outcome {
        recovered: false,
        recovery: None,
        entries: Vec::new(),
        problems: Vec::new(),
    };
    let header = match read_header(dir) {
        Ok(h) => Some(h),
        Err(p) => {
            out.problems.push(p);
            None
        }
    };
    let opts = options(engine, header.as_ref())?;
    if header.is_none() {
        // Opening would only fail again on the same file.
        return Ok(out);
    }
    let db = match Db::open(dir, opts) {
        Ok(db) => db,
        Err(e) => {
            out.problems
                .push(format!("cannot open (or recover) the database: {e}"));
            return Ok(out);
        }
    };
    let m = db.metrics();
    let metric = |n: &str| m.get(n).unwrap_or(0);
    let (groups, torn) = (
        metric("recovery_groups_applied"),
        metric("recovery_torn_pages_repaired"),
    );
    if groups > 0 || torn > 0 {
        out.recovered = true;
        out.recovery = Some(format!(
            "{groups} redo group(s) applied ({} transaction(s) reapplied), {torn} torn page(s) repaired from the doublewrite area, in {} ms",
            metric("recovery_txns_reapplied"),
            metric("recovery_time_ms"),
        ));
    }
    let checked = check_trees(&db, &mut out.problems);
    out.entries = pair_up(&db, checked, &mut out.problems);
    if let Err(e) = db.close() {
        out.problems
            .push(format!("closing the database after the check: {e}"));
    }
    Ok(out)
}

/// The header of `data-0.keel`, or the problem with it.
fn read_header(dir: &Path) -> std::result::Result<FileHeader, String> {
    let path = dir.join(data::file_name(0));
    let mut b = [0u8; HEADER_LEN];
    std::fs::File::open(&path)
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| format!("{}: cannot read the file header: {e}", path.display()))?;
    FileHeader::decode(&b).map_err(|e| format!("{}: bad file header: {e}", path.display()))
}

/// Check every tree. The whole-database check first (it also covers the
/// catalog); if it fails, each table alone, so that every failing table is
/// named and the others are still listed.
fn check_trees(db: &Db, problems: &mut Vec<String>) -> Vec<(String, Option<TreeStats>)> {
    let whole = match db.check() {
        // The first tree is the catalog, which is not a table.
        Ok(trees) => {
            return trees
                .into_iter()
                .skip(1)
                .map(|(n, s)| (n, Some(s)))
                .collect()
        }
        Err(e) => e,
    };
    let names = match db.table_names() {
        Ok(n) => n,
        Err(e) => {
            problems.push(format!("catalog (the list of tables): {e}"));
            return Vec::new();
        }
    };
    let mut trees = Vec::with_capacity(names.len());
    let mut table_failed = false;
    for name in names {
        match db.table(&name).and_then(|t| t.check()) {
            Ok(s) => trees.push((name, Some(s))),
            Err(e) => {
                problems.push(format!("{name}: {e}"));
                table_failed = true;
                trees.push((name, None));
            }
        }
    }
    if !table_failed {
        problems.push(format!("catalog (the list of tables): {whole}"));
    }
    trees
}

/// Order the trees for listing (each bench table followed by its index,
/// listed as `sbtestN.k`) and check every bench table against its index.
fn pair_up(
    db: &Db,
    trees: Vec<(String, Option<TreeStats>)>,
    problems: &mut Vec<String>,
) -> Vec<Entry> {
    let names: Vec<&str> = trees.iter().map(|(n, _)| n.as_str()).collect();
    let index_of = |table: &str| -> Option<usize> {
        let digits = table.strip_prefix("sbtest")?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let ix = format!("{table}{INDEX_SUFFIX}");
        names.iter().position(|n| *n == ix)
    };
    let pairs: Vec<Option<usize>> = names.iter().map(|n| index_of(n)).collect();
    let is_paired_index = |i: usize| pairs.contains(&Some(i));
    let mut entries = Vec::with_capacity(trees.len());
    for (i, (name, stats)) in trees.iter().enumerate() {
        if is_paired_index(i) {
            continue;
        }
        let mut entry = Entry {
            name: name.clone(),
            stats: stats.clone(),
            disagrees: false,
        };
        let Some(j) = pairs[i] else {
            entries.push(entry);
            continue;
        };
        let (ix_name, ix_stats) = &trees[j];
        let mut ix_entry = Entry {
            name: format!("{name}.k"),
            stats: ix_stats.clone(),
            disagrees: false,
        };
        // A tree that failed its own check is not scanned again.
        if stats.is_some() && ix_stats.is_some() {
            let found = match index_vs_rows(db, name, ix_name) {
                Ok(found) => found,
                Err(e) => vec![format!("{name}: comparing with index {ix_name}: {e}")],
            };
            entry.disagrees = !found.is_empty();
            ix_entry.disagrees = !found.is_empty();
            problems.extend(found);
        }
        entries.push(entry);
        entries.push(ix_entry);
    }
    entries
}

fn pages(s: &TreeStats) -> usize {
    s.leaf_pages + s.internal_pages
}

/// `--json`'s object, fields in this order.
#[derive(serde::Serialize)]
struct JsonOut<'a> {
    ok: bool,
    recovered: bool,
    tables: Vec<JsonTable<'a>>,
    problems: &'a [String],
}

#[derive(serde::Serialize)]
struct JsonTable<'a> {
    name: &'a str,
    rows: usize,
    pages: usize,
}

/// Trees that failed their own check are not listed (their counts are
/// unknown); the problems name them.
fn to_json(out: &Outcome) -> JsonOut<'_> {
    JsonOut {
        ok: out.problems.is_empty(),
        recovered: out.recovered,
        tables: out
            .entries
            .iter()
            .filter_map(|e| {
                let s = e.stats.as_ref()?;
                Some(JsonTable {
                    name: &e.name,
                    rows: s.entries,
                    pages: pages(s),
                })
            })
            .collect(),
        problems: &out.problems,
    }
}

fn print_human(w: &mut impl Write, out: &Outcome) -> std::io::Result<()> {
    if let Some(r) = &out.recovery {
        writeln!(w, "recovered: {r}")?;
    }
    let width = out.entries.iter().map(|e| e.name.len()).max().unwrap_or(0);
    for e in &out.entries {
        match &e.stats {
            Some(s) => writeln!(
                w,
                "{:<width$}  {:>10} rows  {:>8} pages  height {}  {}",
                e.name,
                s.entries,
                pages(s),
                s.height,
                if e.disagrees {
                    "index and rows disagree"
                } else {
                    "ok"
                }
            )?,
            None => writeln!(w, "{:<width$}  FAILED (see problems)", e.name)?,
        }
    }
    if out.problems.is_empty() {
        return writeln!(w, "check passed");
    }
    writeln!(w, "problems:")?;
    for p in &out.problems {
        writeln!(w, "  {p}")?;
    }
    writeln!(w, "check FAILED")
}
