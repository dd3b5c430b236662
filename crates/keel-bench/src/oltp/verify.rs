//! The check that a sysbench table and its `k` index agree, entry for
//! entry, in any engine: `keel check` runs it on every `sbtestN` of a
//! directory, and the workload's tests after every run. It reads in
//! read-only transactions and waits for nothing but the engine's reads;
//! `keel check --read-only` runs it on Keel's files as they stand, with no
//! engine ([`index_vs_rows_on_disk`]).

use keel::format::page::PageId;
use keel::format::tree::OnDisk;
use keel::Db;

use super::engine::{Database, DbError, KeelDatabase, Session, Span, TreeId};
use super::rows::{index_key, primary_key, Row};

/// One of the two trees compared.
#[derive(Clone, Copy)]
enum Which {
    Table,
    Index,
}

/// What the comparison reads: either tree in key order, and rows by key.
trait Trees {
    /// Visit every entry of `which`, in key order.
    fn scan(&mut self, which: Which, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<(), DbError>;
    /// The table's rows at `keys`.
    fn rows(&mut self, keys: &[[u8; 8]]) -> Result<Vec<Option<Vec<u8>>>, DbError>;
}

/// The trees through an engine's session, in read-only transactions.
struct InSession<'s> {
    s: &'s mut dyn Session,
    table: TreeId,
    index: TreeId,
}

impl Trees for InSession<'_> {
    fn scan(&mut self, which: Which, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<(), DbError> {
        let tree = match which {
            Which::Table => self.table,
            Which::Index => self.index,
        };
        let mut tx = self.s.begin(false)?;
        tx.range(tree, Span::ALL, visit)?;
        tx.commit()
    }

    fn rows(&mut self, keys: &[[u8; 8]]) -> Result<Vec<Option<Vec<u8>>>, DbError> {
        let mut tx = self.s.begin(false)?;
        let rows = keys
            .iter()
            .map(|k| tx.get(self.table, k))
            .collect::<Result<_, _>>()?;
        tx.commit()?;
        Ok(rows)
    }
}

/// Keel's trees as the data files hold them (each scan also checks its tree).
struct Files<'d> {
    disk: &'d OnDisk,
    table: PageId,
    index: PageId,
}

impl Trees for Files<'_> {
    /// Each table row's latest version (its stored value less the version
    /// header; delete marks not purged yet are skipped).
    fn scan(&mut self, which: Which, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<(), DbError> {
        let root = match which {
            Which::Table => self.table,
            Which::Index => self.index,
        };
        let mut bad = None;
        let disk = self.disk;
        disk.scan(root, &mut |k, stored| match disk.latest_value(stored) {
            Ok(Some(v)) => visit(k, &v),
            Ok(None) => {}
            Err(e) => {
                bad.get_or_insert(e);
            }
        })?;
        match bad {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    fn rows(&mut self, keys: &[[u8; 8]]) -> Result<Vec<Option<Vec<u8>>>, DbError> {
        let mut rows = Vec::with_capacity(keys.len());
        for k in keys {
            rows.push(match self.disk.get(self.table, k)? {
                Some(stored) => self.disk.latest_value(&stored)?,
                None => None,
            });
        }
        Ok(rows)
    }
}

/// Mismatches shown by id in one problem line; the rest are counted.
const SHOW: usize = 5;

/// Checks that every row of `table` has exactly one entry (k, id) in
/// `index`, and that every entry of `index` is the (k, id) of an existing
/// row, with an empty value.
///
/// Returns the problems found, empty when the two agree: at most one line
/// per kind of mismatch (rows that cannot be decoded, rows without an
/// entry, malformed entries, entries pointing to no row with that k), each
/// starting with `table:`, naming the first few ids and counting the rest.
/// An `Err` is a tree that cannot be opened or a read that failed during
/// the scans.
///
/// One scan of each tree: the rows' expected entries (12 bytes per row) are
/// sorted and merged with the index, which is in (k, id) order.
pub fn index_vs_rows(db: &Db, table: &str, index: &str) -> Result<Vec<String>, DbError> {
    index_vs_rows_in(&KeelDatabase::new(db.clone()), table, index)
}

/// [`index_vs_rows`] in a database of any engine.
pub fn index_vs_rows_in(
    db: &dyn Database,
    table: &str,
    index: &str,
) -> Result<Vec<String>, DbError> {
    let open = |name: &str| {
        db.tree(name, false)?
            .ok_or_else(|| DbError::Keel(keel::Error::TableNotFound(name.to_string())))
    };
    let (t, ix) = (open(table)?, open(index)?);
    let mut session = db.session()?;
    let mut trees = InSession {
        s: &mut *session,
        table: t,
        index: ix,
    };
    compare(&mut trees, table, index)
}

/// [`index_vs_rows`] on Keel's data files as they stand, read by `disk`
/// with no engine: no lock, no recovery (see `keel::format::tree` for what
/// that cannot see). The scans check both trees as `OnDisk::check` does;
/// an `Err` is a table missing from the catalog or a page that failed.
pub fn index_vs_rows_on_disk(
    disk: &OnDisk,
    table: &str,
    index: &str,
) -> Result<Vec<String>, DbError> {
    let tables = disk.tables()?;
    let root = |name: &str| {
        tables
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, root)| *root)
            .ok_or_else(|| DbError::Keel(keel::Error::TableNotFound(name.to_string())))
    };
    let mut trees = Files {
        disk,
        table: root(table)?,
        index: root(index)?,
    };
    compare(&mut trees, table, index)
}

/// Scan, merge and describe: the body of both checks.
fn compare(trees: &mut dyn Trees, table: &str, index: &str) -> Result<Vec<String>, DbError> {
    let (expected, undecodable) = expected_entries(trees)?;
    let merged = merge(trees, &expected)?;
    let strays = explain_strays(trees, &merged)?;

    let mut problems = Vec::new();
    undecodable.report(&mut problems, |n| {
        format!(
            "{table}: {} that cannot be decoded as sysbench rows",
            plural(n, "row", "rows")
        )
    });
    merged.missing.report(&mut problems, |n| {
        format!(
            "{table}: {} no entry in index {index}",
            plural(n, "row has", "rows have")
        )
    });
    merged.malformed.report(&mut problems, |n| {
        format!(
            "{table}: {} of index {index} malformed",
            plural(n, "entry is", "entries are")
        )
    });
    strays.report(&mut problems, |n| {
        format!(
            "{table}: {} of index {index} {} no row with that k",
            plural(n, "entry", "entries"),
            if n == 1 { "points to" } else { "point to" }
        )
    });
    Ok(problems)
}

/// The index entries the table's rows call for, sorted, and the rows that
/// cannot be decoded.
fn expected_entries(trees: &mut dyn Trees) -> Result<(Vec<[u8; 12]>, Samples), DbError> {
    let mut undecodable = Samples::default();
    let mut expected: Vec<[u8; 12]> = Vec::new();
    trees.scan(Which::Table, &mut |key, value| {
        let Ok(id) = <[u8; 8]>::try_from(key).map(u64::from_be_bytes) else {
            undecodable.add(|| format!("key {key:02x?} is {} bytes, not 8", key.len()));
            return;
        };
        match Row::decode(value) {
            Some(row) => expected.push(index_key(row.k, id)),
            None => undecodable.add(|| format!("id {id}: value is {} bytes", value.len())),
        }
    })?;
    expected.sort_unstable();
    Ok((expected, undecodable))
}

/// What merging the index with the expected entries found.
#[derive(Default)]
struct Merged {
    missing: Samples,
    malformed: Samples,
    /// The first [`SHOW`] entries with no row, as (k, id).
    stray: Vec<(u32, u64)>,
    stray_count: usize,
}

/// One scan of the index, merged with `expected` (sorted).
fn merge(trees: &mut dyn Trees, expected: &[[u8; 12]]) -> Result<Merged, DbError> {
    let mut m = Merged::default();
    let mut exp = expected.iter().peekable();
    trees.scan(Which::Index, &mut |key, value| {
        let Ok(key12) = <[u8; 12]>::try_from(key) else {
            m.malformed
                .add(|| format!("key {key:02x?} is {} bytes, not 12", key.len()));
            return;
        };
        if !value.is_empty() {
            let (k, id) = split_index_key(&key12);
            m.malformed
                .add(|| format!("(k {k}, id {id}) has a {}-byte value", value.len()));
        }
        while let Some(e) = exp.next_if(|e| **e < key12) {
            note_missing(e, &mut m.missing);
        }
        if exp.next_if(|e| **e == key12).is_none() {
            if m.stray.len() < SHOW {
                m.stray.push(split_index_key(&key12));
            }
            m.stray_count += 1;
        }
    })?;
    for e in exp {
        note_missing(e, &mut m.missing);
    }
    Ok(m)
}

/// The stray entries, each shown with what its id points at in the table.
fn explain_strays(trees: &mut dyn Trees, m: &Merged) -> Result<Samples, DbError> {
    let mut strays = Samples::default();
    let keys: Vec<[u8; 8]> = m.stray.iter().map(|&(_, id)| primary_key(id)).collect();
    let rows = trees.rows(&keys)?;
    for (&(k, id), row) in m.stray.iter().zip(rows) {
        let why = match row {
            None => format!("no row with id {id}"),
            Some(v) => match Row::decode(&v) {
                Some(row) => format!("row id {id} has k {}", row.k),
                None => format!("row id {id} cannot be decoded"),
            },
        };
        strays.add(|| format!("(k {k}, id {id}): {why}"));
    }
    strays.count = m.stray_count;
    Ok(strays)
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

/// Mismatches of one kind: the first [`SHOW`] described, the rest counted.
#[derive(Default)]
struct Samples {
    count: usize,
    shown: Vec<String>,
}

impl Samples {
    fn add(&mut self, what: impl FnOnce() -> String) {
        if self.shown.len() < SHOW {
            self.shown.push(what());
        }
        self.count += 1;
    }

    /// One problem line, `head(count): shown; ...; and N more`; none if
    /// nothing was found.
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::testing::small_options;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn agreeing_trees_pass_and_each_kind_of_mismatch_is_one_line_in_the_engine_and_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), small_options()).unwrap();
        let t = db.create_table("sbtest1").unwrap();
        let ix = db.create_table("sbtest1_k").unwrap();
        let mut rng = SmallRng::seed_from_u64(1);
        for id in 1..=20u64 {
            let row = Row::random(id as u32 % 7, &mut rng);
            t.put(&primary_key(id), &row.encode()).unwrap();
            ix.put(&index_key(row.k, id), &[]).unwrap();
        }
        assert!(index_vs_rows(&db, "sbtest1", "sbtest1_k")
            .unwrap()
            .is_empty());

        // Rows 1..=7 lose their entries; row 8 its row; row 9 gets a value.
        for id in 1..=7u64 {
            ix.delete(&index_key(id as u32 % 7, id)).unwrap();
        }
        t.delete(&primary_key(8)).unwrap();
        ix.put(&index_key(2, 9), b"x").unwrap();
        let p = index_vs_rows(&db, "sbtest1", "sbtest1_k").unwrap();
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(
            p[0].starts_with("sbtest1: 7 rows have no entry in index sbtest1_k: ")
                && p[0].ends_with("; and 2 more"),
            "{p:?}"
        );
        assert_eq!(
            p[1],
            "sbtest1: 1 entry is of index sbtest1_k malformed: (k 2, id 9) has a 1-byte value"
        );
        assert_eq!(
            p[2],
            "sbtest1: 1 entry of index sbtest1_k points to no row with that k: \
             (k 1, id 8): no row with id 8"
        );
        drop((t, ix));
        db.close().unwrap();

        // The files, read without the engine, give the same answers.
        let disk = OnDisk::open(dir.path()).unwrap();
        assert_eq!(
            index_vs_rows_on_disk(&disk, "sbtest1", "sbtest1_k").unwrap(),
            p
        );
        assert!(matches!(
            index_vs_rows_on_disk(&disk, "sbtest1", "sbtest9_k"),
            Err(DbError::Keel(keel::Error::TableNotFound(n))) if n == "sbtest9_k"
        ));
    }
}
