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
use keel::space::header::{FileHeader, HEADER_LEN};
use keel::{Db, Options, TreeStats};
use keel_bench::oltp::{index_key, Row, INDEX_SUFFIX};

/// Mismatches shown by id in one problem line; the rest are counted.
const SHOW: usize = 5;

/// `keel check`'s arguments.
#[derive(Args)]
pub struct CheckArgs {
    /// The database directory.
    dir: PathBuf,
    /// Print the result as one JSON object: ok, recovered, tables (name, rows, pages), problems.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    engine: CheckEngineArgs,
}

/// Engine options for opening the database to check. The page size and the
/// number of data files come from the header of `data-0.keel`; a config
/// file, `--set` and `--device` are applied after, so an explicit value wins.
#[derive(Args)]
struct CheckEngineArgs {
    /// TOML file with engine options.
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// Set one engine option, e.g. --set buffer_pool_size=64MiB (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Device model: unlimited, hdd-raid10, sata-ssd, nvme, or a spec like iops=1500,bw=120MiB,lat=100us,seek=4ms,qd=8.
    #[arg(long, value_name = "SPEC")]
    device: Option<String>,
}

impl CheckEngineArgs {
    fn options(&self, header: Option<&FileHeader>) -> Result<Options> {
        let mut o = match &self.config {
            Some(p) => Options::from_toml_file(p)?,
            None => Options::default(),
        };
        if let Some(h) = header {
            o.set("page_size", &h.page_size.to_string())?;
            o.set("data_files", &h.n_files.to_string())?;
        }
        o.apply_sets(self.sets.iter().map(String::as_str))?;
        if let Some(d) = &self.device {
            o.set("device", d)?;
        }
        o.validate()?;
        Ok(o)
    }
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
    if !keel::space::Tablespace::exists(dir) {
        anyhow::bail!(
            "{} holds no Keel database (no {})",
            dir.display(),
            keel::space::data_file_name(0)
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

fn check_dir(dir: &Path, engine: &CheckEngineArgs) -> Result<Outcome> {
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
    let opts = engine.options(header.as_ref())?;
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
    let path = dir.join(keel::space::data_file_name(0));
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

/// Mismatches of one kind: the first [`SHOW`] described, the rest counted.
#[derive(Default)]
struct Samples {
    count: usize,
    shown: Vec<String>,
}

impl Samples {
    fn wants_more(&self) -> bool {
        self.shown.len() < SHOW
    }
    fn add(&mut self, what: impl FnOnce() -> String) {
        if self.wants_more() {
            self.shown.push(what());
        }
        self.count += 1;
    }
    fn report(&self, problems: &mut Vec<String>, head: impl FnOnce(usize) -> String) {
        if self.count == 0 {
            return;
        }
        let mut line = format!("{}: {}", head(self.count), self.shown.join("; "));
        if self.count > self.shown.len() {
            line += &format!("; and {} more", self.count - self.shown.len());
        }
        problems.push(line);
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Every row of `table` has exactly one entry (k, id) in `index`, and every
/// entry of `index` is (k, id) of an existing row. Returns the problems
/// found; an `Err` is a read that failed during the scans.
///
/// One scan of each tree: the rows' expected entries (12 bytes per row) are
/// sorted and merged with the index, which is in (k, id) order.
fn index_vs_rows(db: &Db, table: &str, index: &str) -> keel::Result<Vec<String>> {
    let t = db.table(table)?;
    let ix = db.table(index)?;
    let mut problems = Vec::new();

    let mut undecodable = Samples::default();
    let mut expected: Vec<[u8; 12]> = Vec::new();
    for r in t.range(..)? {
        let (key, value) = r?;
        let Ok(id) = <[u8; 8]>::try_from(key.as_slice()).map(u64::from_be_bytes) else {
            undecodable.add(|| format!("key {key:02x?} is {} bytes, not 8", key.len()));
            continue;
        };
        match Row::decode(&value) {
            Some(row) => expected.push(index_key(row.k, id)),
            None => undecodable.add(|| format!("id {id}: value is {} bytes", value.len())),
        }
    }
    expected.sort_unstable();

    let mut missing = Samples::default();
    let mut stray: Vec<(u32, u64)> = Vec::new();
    let mut stray_count = 0usize;
    let mut malformed = Samples::default();
    let mut exp = expected.iter().peekable();
    for r in ix.range(..)? {
        let (key, value) = r?;
        let Ok(key12) = <[u8; 12]>::try_from(key.as_slice()) else {
            malformed.add(|| format!("key {key:02x?} is {} bytes, not 12", key.len()));
            continue;
        };
        if !value.is_empty() {
            let (k, id) = split_index_key(&key12);
            malformed.add(|| format!("(k {k}, id {id}) has a {}-byte value", value.len()));
        }
        while let Some(e) = exp.next_if(|e| **e < key12) {
            note_missing(e, &mut missing);
        }
        if exp.next_if(|e| **e == key12).is_none() {
            if stray.len() < SHOW {
                stray.push(split_index_key(&key12));
            }
            stray_count += 1;
        }
    }
    for e in exp {
        note_missing(e, &mut missing);
    }

    undecodable.report(&mut problems, |n| {
        format!(
            "{table}: {} that cannot be decoded as sysbench rows",
            plural(n, "row", "rows")
        )
    });
    missing.report(&mut problems, |n| {
        format!(
            "{table}: {} no entry in index {index}",
            plural(n, "row has", "rows have")
        )
    });
    malformed.report(&mut problems, |n| {
        format!(
            "{table}: {} of index {index} malformed",
            plural(n, "entry is", "entries are")
        )
    });
    // Say what each shown stray entry points at.
    let mut strays = Samples::default();
    for &(k, id) in &stray {
        let why = match t.get(&id.to_be_bytes())? {
            None => format!("no row with id {id}"),
            Some(v) => match Row::decode(&v) {
                Some(row) => format!("row id {id} has k {}", row.k),
                None => format!("row id {id} cannot be decoded"),
            },
        };
        strays.add(|| format!("(k {k}, id {id}): {why}"));
    }
    strays.count = stray_count;
    strays.report(&mut problems, |n| {
        format!(
            "{table}: {} of index {index} {} no row with that k",
            plural(n, "entry", "entries"),
            if n == 1 { "points to" } else { "point to" }
        )
    });
    Ok(problems)
}

fn note_missing(e: &[u8; 12], missing: &mut Samples) {
    let (k, id) = split_index_key(e);
    missing.add(|| format!("id {id} (k {k})"));
}

fn split_index_key(key: &[u8; 12]) -> (u32, u64) {
    let mut k = [0u8; 4];
    let mut id = [0u8; 8];
    k.copy_from_slice(&key[..4]);
    id.copy_from_slice(&key[4..]);
    (u32::from_be_bytes(k), u64::from_be_bytes(id))
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
