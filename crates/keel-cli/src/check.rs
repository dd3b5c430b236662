//! `keel check DIR`: recover a data directory a crash left behind (and say
//! so), then verify every tree: every page checksum on the way, key order
//! within and across pages, child levels — and, for the bench's tables
//! `sbtestN`, that the `k` index `sbtestN_k` and the rows agree entry for
//! entry. Problems are collected, not fatal: each is one precise line, and
//! any of them makes the command exit with status 1.
//!
//! Recovery writes, so the check opens the database as any process does,
//! taking the directory's lock: if another process has it open, the check
//! refuses (exit status 2, naming the holder's pid; 1 means problems were
//! found) and points to `--read-only`.
//!
//! `--read-only` opens no engine: it takes no lock, writes nothing and
//! replays no log; it reads the data files as they stand through
//! `keel::format::tree` and runs the same checks on them (page checksums,
//! trees, the bench's indexes against their rows). It works beside a
//! process that has the database open, and on a crashed directory without
//! changing it. What it cannot see: changes that are in the redo log but
//! not yet in the data files, and pages being written while it reads; so
//! it says that the log was not replayed, and how much of it lay beyond
//! the last checkpoint, and a problem it finds on such a database is no
//! proof of corruption (as with innochecksum on a running InnoDB).
//!
//! `--json` prints one object instead of the lines:
//! `{ "ok": bool, "recovered": bool, "replayed_log": bool, "tables": [ {"name", "rows", "delete_marked", "pages"} ], "problems": [ "..." ] }`
//! where an index is listed as its own entry, `sbtestN.k`, `rows` counts
//! the rows a read sees and `delete_marked` the deleted rows purge has not
//! removed yet (still in the tree; see the README's Transactions); with
//! `--read-only`, `replayed_log` is false, `recovered` too, and
//! `redo_beyond_checkpoint` gives the bytes of log that were not replayed
//! (when the log could be read).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;
use keel::format::data::{self, FileHeader, HEADER_LEN};
use keel::format::tree::OnDisk;
use keel::{Db, Options, TreeStats};
use keel_bench::oltp::{index_vs_rows, index_vs_rows_on_disk, INDEX_SUFFIX};

use crate::engine_args::EngineArgs;

/// `keel check`'s arguments.
#[derive(Args)]
pub struct CheckArgs {
    /// The database directory.
    dir: PathBuf,
    /// Print the result as one JSON object: ok, recovered, replayed_log, tables (name, rows, delete_marked, pages), problems.
    #[arg(long)]
    json: bool,
    /// Verify the data files as they stand, without opening the engine: take no lock, write
    /// nothing, replay no redo. Works while another process has the database open (or on a
    /// crashed one, left as it is); changes still only in the redo log are not seen, so a
    /// problem found on such a database is not proof of corruption. Takes no engine options.
    #[arg(long)]
    read_only: bool,
    #[command(flatten)]
    engine: EngineArgs,
}

/// Engine options for opening the database to check. The page size and the
/// number of data files come from the header of `data-0.keel`, over a
/// config file's; `--set` and `--device` are applied after, so an explicit
/// value wins.
pub(crate) fn options(engine: &EngineArgs, header: Option<&FileHeader>) -> Result<Options> {
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
    /// `None` after recovery; with `--read-only`, the bytes of redo beyond
    /// the last checkpoint, if the log could be read.
    not_replayed: Option<Option<u64>>,
    entries: Vec<Entry>,
    problems: Vec<String>,
}

/// `keel check` refused to recover a database another process has open:
/// nothing was checked. The command exits with [`IN_USE_EXIT`], so that a
/// script tells it from problems found (1).
#[derive(Debug)]
pub struct InUse(String);

impl std::fmt::Display for InUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InUse {}

/// Exit status of a check refused because another process has the
/// database open ([`InUse`]).
pub const IN_USE_EXIT: i32 = 2;

/// Run `keel check`.
pub fn run(args: CheckArgs) -> Result<()> {
    let dir = &args.dir;
    if !dir.join(data::file_name(0)).exists() {
        bail!(
            "{} holds no Keel database (no {})",
            dir.display(),
            data::file_name(0)
        );
    }
    let e = &args.engine;
    if args.read_only && (e.config.is_some() || !e.sets.is_empty() || e.device.is_some()) {
        bail!(
            "--read-only opens no engine, so --config, --set and --device do not apply \
             (the page size and file count come from the files)"
        );
    }
    let out = if args.read_only {
        check_files(dir)
    } else {
        check_dir(dir, &args.engine)?
    };
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
        bail!(
            "{} problem(s) found in {}{}",
            out.problems.len(),
            dir.display(),
            if args.read_only {
                " (read-only: the redo log was not replayed)"
            } else {
                ""
            }
        );
    }
    Ok(())
}

impl Outcome {
    fn new() -> Outcome {
        Outcome {
            recovered: false,
            recovery: None,
            not_replayed: None,
            entries: Vec::new(),
            problems: Vec::new(),
        }
    }
}

fn check_dir(dir: &Path, engine: &EngineArgs) -> Result<Outcome> {
    let mut out = Outcome::new();
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
        Err(keel::Error::Locked { pid, .. }) => {
            return Err(InUse(format!(
                "{} is open in {}: keel check recovers a database before checking it, which \
                 writes to it, and Keel allows one process per database. Close it there first, \
                 or run `keel check --read-only {}` to verify the files as they stand (without \
                 replaying the redo log)",
                dir.display(),
                keel::io::lock::holder(pid),
                dir.display()
            ))
            .into())
        }
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
            "{groups} redo group(s) applied ({} transaction(s) reapplied, {} rolled back), {torn} torn page(s) repaired from the doublewrite area, in {} ms",
            metric("recovery_txns_reapplied"),
            metric("recovery_txns_rolled_back"),
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

/// `--read-only`: the files as they stand, with no engine, lock or write.
fn check_files(dir: &Path) -> Outcome {
    let mut out = Outcome::new();
    // How much log lies beyond the checkpoint, as `keel inspect` reads it:
    // what recovery would replay, and so what this check cannot see.
    out.not_replayed = Some(
        crate::inspect::inspect(dir)
            .ok()
            .and_then(|i| i.redo.scan)
            .map(|s| s.bytes_beyond_checkpoint),
    );
    if let Err(p) = read_header(dir) {
        out.problems.push(p);
        return out;
    }
    let disk = match OnDisk::open(dir) {
        Ok(d) => d,
        Err(e) => {
            out.problems
                .push(format!("cannot read the data files: {e}"));
            return out;
        }
    };
    let checked = check_trees(&disk, &mut out.problems);
    out.entries = pair_up(&disk, checked, &mut out.problems);
    if let Err(e) = disk.check_undo() {
        out.problems.push(format!("undo lists: {e}"));
    } else if let Err(e) = disk.history_chain_pages() {
        out.problems
            .push(format!("overflow chains of old versions: {e}"));
    }
    out
}

/// Where the check reads the trees: the engine after recovery, or the data
/// files as they stand (`--read-only`). Errors are the lines reported.
trait Trees {
    /// The catalog's check and every table's, in name order; fails at the
    /// first tree that fails.
    fn check_all(&self) -> std::result::Result<Vec<(String, TreeStats)>, String>;
    /// The tables, in name order.
    fn table_names(&self) -> std::result::Result<Vec<String>, String>;
    /// One table's check.
    fn check_table(&self, name: &str) -> std::result::Result<TreeStats, String>;
    /// `keel_bench::oltp::index_vs_rows` of a bench table and its index.
    fn index_vs_rows(&self, table: &str, index: &str) -> std::result::Result<Vec<String>, String>;
}

impl Trees for Db {
    fn check_all(&self) -> std::result::Result<Vec<(String, TreeStats)>, String> {
        self.check().map_err(|e| e.to_string())
    }
    fn table_names(&self) -> std::result::Result<Vec<String>, String> {
        Db::table_names(self).map_err(|e| e.to_string())
    }
    fn check_table(&self, name: &str) -> std::result::Result<TreeStats, String> {
        self.table(name)
            .and_then(|t| t.check())
            .map_err(|e| e.to_string())
    }
    fn index_vs_rows(&self, table: &str, index: &str) -> std::result::Result<Vec<String>, String> {
        index_vs_rows(self, table, index).map_err(|e| e.to_string())
    }
}

impl Trees for OnDisk {
    fn check_all(&self) -> std::result::Result<Vec<(String, TreeStats)>, String> {
        let catalog = self.check_catalog();
        let mut all = vec![("<catalog>".to_string(), catalog.map_err(|e| e.to_string())?)];
        for (name, root) in self.tables().map_err(|e| e.to_string())? {
            let stats = self.check(root).map_err(|e| e.to_string())?;
            all.push((name, stats));
        }
        Ok(all)
    }
    fn table_names(&self) -> std::result::Result<Vec<String>, String> {
        let tables = self.tables().map_err(|e| e.to_string())?;
        Ok(tables.into_iter().map(|(n, _)| n).collect())
    }
    fn check_table(&self, name: &str) -> std::result::Result<TreeStats, String> {
        let tables = self.tables().map_err(|e| e.to_string())?;
        match tables.into_iter().find(|(n, _)| n == name) {
            Some((_, root)) => self.check(root).map_err(|e| e.to_string()),
            None => Err(keel::Error::TableNotFound(name.to_string()).to_string()),
        }
    }
    fn index_vs_rows(&self, table: &str, index: &str) -> std::result::Result<Vec<String>, String> {
        index_vs_rows_on_disk(self, table, index).map_err(|e| e.to_string())
    }
}

/// The header of `data-0.keel`, or the problem with it.
pub(crate) fn read_header(dir: &Path) -> std::result::Result<FileHeader, String> {
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
fn check_trees(db: &dyn Trees, problems: &mut Vec<String>) -> Vec<(String, Option<TreeStats>)> {
    let whole = match db.check_all() {
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
        match db.check_table(&name) {
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
    db: &dyn Trees,
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
            let found = match db.index_vs_rows(name, ix_name) {
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
    s.leaf_pages + s.internal_pages + s.overflow_pages
}

/// `--json`'s object, fields in this order.
#[derive(serde::Serialize)]
struct JsonOut<'a> {
    ok: bool,
    recovered: bool,
    replayed_log: bool,
    /// `--read-only` only: the redo that was not replayed.
    #[serde(skip_serializing_if = "Option::is_none")]
    redo_beyond_checkpoint: Option<u64>,
    tables: Vec<JsonTable<'a>>,
    problems: &'a [String],
}

#[derive(serde::Serialize)]
struct JsonTable<'a> {
    name: &'a str,
    rows: usize,
    delete_marked: usize,
    pages: usize,
}

/// Trees that failed their own check are not listed (their counts are
/// unknown); the problems name them.
fn to_json(out: &Outcome) -> JsonOut<'_> {
    JsonOut {
        ok: out.problems.is_empty(),
        recovered: out.recovered,
        replayed_log: out.not_replayed.is_none(),
        redo_beyond_checkpoint: out.not_replayed.flatten(),
        tables: out
            .entries
            .iter()
            .filter_map(|e| {
                let s = e.stats.as_ref()?;
                Some(JsonTable {
                    name: &e.name,
                    rows: s.entries - s.delete_marked,
                    delete_marked: s.delete_marked,
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
    if let Some(redo) = out.not_replayed {
        let beyond = match redo {
            Some(0) => "nothing lay beyond its last checkpoint when it was read".to_string(),
            Some(n) => format!("{n} bytes lay beyond its last checkpoint when it was read"),
            None => "it could not be read".to_string(),
        };
        writeln!(
            w,
            "read-only: the redo log was not replayed ({beyond}); the data files are checked as \
             they stand, so pages older than the log, or being written, may show problems that \
             are no proof of corruption"
        )?;
    }
    let width = out.entries.iter().map(|e| e.name.len()).max().unwrap_or(0);
    for e in &out.entries {
        match &e.stats {
            Some(s) => writeln!(
                w,
                "{:<width$}  {:>10} rows  {:>8} pages  height {}  {}{}",
                e.name,
                s.entries - s.delete_marked,
                pages(s),
                s.height,
                if e.disagrees {
                    "index and rows disagree"
                } else {
                    "ok"
                },
                match s.delete_marked {
                    0 => String::new(),
                    n => format!(" ({n} deleted rows await purge)"),
                }
            )?,
            None => writeln!(w, "{:<width$}  FAILED (see problems)", e.name)?,
        }
    }
    let how = if out.not_replayed.is_some() {
        " (read-only, redo log not replayed)"
    } else {
        ""
    };
    if out.problems.is_empty() {
        return writeln!(w, "check passed{how}");
    }
    writeln!(w, "problems:")?;
    for p in &out.problems {
        writeln!(w, "  {p}")?;
    }
    writeln!(w, "check FAILED{how}")
}
