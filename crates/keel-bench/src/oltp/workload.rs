//! One sysbench transaction of each workload, through an engine's
//! [`Transaction`]. The `k` index is maintained in the same transaction as
//! the row, by the workload, identically for every engine.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::rngs::SmallRng;
use rand::Rng;

use super::engine::{Database, DbError, Session, Span, Transaction, TreeId};
use super::rows::{index_key, index_name, primary_key, row_c, row_k, table_name, Row, C_LEN};
use super::{KeyGen, OltpError, OltpParams, Workload};

/// Point selects per read_write / read_only transaction.
const POINT_SELECTS: usize = 10;

/// One table and its index.
pub(crate) struct SbTable {
    name: String,
    primary: TreeId,
    index: TreeId,
    /// Next id the insert workload uses (above every existing id).
    next_id: AtomicU64,
}

impl SbTable {
    /// The table and its `k` index.
    pub(crate) fn trees(&self) -> [TreeId; 2] {
        [self.primary, self.index]
    }
}

/// The tree `name` of `db`; an error names it if it is missing.
fn open_tree(db: &dyn Database, name: &str) -> Result<TreeId, OltpError> {
    db.tree(name, false)?.ok_or_else(|| {
        OltpError::Data(format!(
            "{} holds no table `{name}`: prepare it first (run without --reuse-data)",
            db.dir().display()
        ))
    })
}

/// Open the tables of `params`; an error names the first one missing.
pub(crate) fn open_tables(
    db: &dyn Database,
    params: &OltpParams,
) -> Result<Vec<SbTable>, OltpError> {
    let mut session = db.session()?;
    (1..=params.tables)
        .map(|n| {
            let primary = open_tree(db, &table_name(n))?;
            let index = open_tree(db, &index_name(n))?;
            let last = {
                let mut tx = session.begin(false)?;
                let last = tx.last_key(primary)?;
                tx.commit()?;
                last
            };
            let last = last
                .and_then(|k| k.as_slice().try_into().ok().map(u64::from_be_bytes))
                .unwrap_or(0);
            Ok(SbTable {
                name: table_name(n),
                primary,
                index,
                next_id: AtomicU64::new(last.max(params.table_size) + 1),
            })
        })
        .collect()
}

/// Queries one transaction of `w` counts, as sysbench counts them
/// (BEGIN and COMMIT included where the script sends them).
pub(crate) fn queries_per_txn(w: Workload) -> u64 {
    match w {
        Workload::ReadWrite => 20,
        Workload::ReadOnly => 16,
        Workload::WriteOnly => 6,
        Workload::UpdateIndex
        | Workload::UpdateNonIndex
        | Workload::PointSelect
        | Workload::Insert => 1,
    }
}

/// One client: its random state and the shared tables.
pub(crate) struct Client<'a> {
    pub(crate) tables: &'a [SbTable],
    pub(crate) params: &'a OltpParams,
    pub(crate) keys: &'a KeyGen,
    pub(crate) rng: SmallRng,
    /// The last range query's result set, reused.
    pub(crate) rows: ResultSet,
}

/// A range query's result set: `k` of every row and, where the query
/// selects it, `c`. Kept by the client across queries.
#[derive(Default)]
pub(crate) struct ResultSet {
    ks: Vec<u32>,
    cs: Vec<[u8; C_LEN]>,
}

impl<'a> Client<'a> {
    /// Run one transaction of the workload in `session`; a retryable
    /// error leaves nothing behind (the transaction is rolled back when
    /// dropped).
    pub(crate) fn transaction(&mut self, session: &mut dyn Session) -> Result<(), DbError> {
        let w = self.params.workload;
        let mut tx = session.begin(w.writes())?;
        let t = &mut *tx;
        if matches!(w, Workload::ReadWrite | Workload::ReadOnly) {
            for _ in 0..POINT_SELECTS {
                self.point_select(t)?;
            }
            self.simple_range(t)?;
            self.sum_range(t)?;
            self.order_range(t)?;
            self.distinct_range(t)?;
        }
        match w {
            Workload::ReadWrite | Workload::WriteOnly => {
                self.index_update(t)?;
                self.non_index_update(t)?;
                self.delete_insert(t)?;
            }
            Workload::UpdateIndex => self.index_update(t)?,
            Workload::UpdateNonIndex => self.non_index_update(t)?,
            Workload::PointSelect => self.point_select(t)?,
            Workload::Insert => self.insert_new(t)?,
            Workload::ReadOnly => {}
        }
        tx.commit()
    }

    fn table(&mut self) -> &'a SbTable {
        let tables = self.tables;
        &tables[self.rng.gen_range(0..tables.len())]
    }

    fn id(&mut self) -> u64 {
        self.keys.next(&mut self.rng)
    }

    /// `SELECT c FROM sbtest WHERE id = ?`
    fn point_select(&mut self, tx: &mut dyn Transaction) -> Result<(), DbError> {
        let id = self.id();
        let t = self.table();
        let v = tx.get(t.primary, &primary_key(id))?;
        black_box(v.as_deref().and_then(row_c));
        Ok(())
    }

    /// The rows of `id BETWEEN ? AND ? + range_size - 1` into the client's
    /// result set: `k` of each, and `c` too where `with_c`. The result set
    /// is reused from one query to the next, as a server reuses its buffers,
    /// so that the driver allocates nothing per row and the figures measure
    /// the engine, not the driver's allocator.
    fn range(&mut self, tx: &mut dyn Transaction, with_c: bool) -> Result<(), DbError> {
        let lo = self.id();
        let hi = lo.saturating_add(self.params.range_size - 1);
        let n = self.params.range_size as usize;
        let t = self.table();
        let (lo, hi) = (primary_key(lo), primary_key(hi));
        let rows = &mut self.rows;
        rows.ks.clear();
        rows.cs.clear();
        let span = Span {
            from: &lo,
            to: Some(&hi),
            limit: n,
        };
        tx.range(t.primary, span, &mut |_, v| {
            rows.ks.push(row_k(v).unwrap_or(0));
            if with_c {
                let mut c = [0u8; C_LEN];
                if let Some(src) = row_c(v) {
                    c.copy_from_slice(src);
                }
                rows.cs.push(c);
            }
        })?;
        Ok(())
    }

    /// `SELECT c FROM sbtest WHERE id BETWEEN ? AND ?`
    fn simple_range(&mut self, tx: &mut dyn Transaction) -> Result<(), DbError> {
        self.range(tx, true)?;
        black_box(&self.rows.cs);
        Ok(())
    }

    /// `SELECT SUM(k) FROM sbtest WHERE id BETWEEN ? AND ?`
    fn sum_range(&mut self, tx: &mut dyn Transaction) -> Result<(), DbError> {
        self.range(tx, false)?;
        let sum: u64 = self.rows.ks.iter().map(|&k| u64::from(k)).sum();
        black_box(sum);
        Ok(())
    }

    /// `SELECT c FROM sbtest WHERE id BETWEEN ? AND ? ORDER BY c`
    fn order_range(&mut self, tx: &mut dyn Transaction) -> Result<(), DbError> {
        self.range(tx, true)?;
        self.rows.cs.sort_unstable();
        black_box(&self.rows.cs);
        Ok(())
    }

    /// `SELECT DISTINCT c FROM sbtest WHERE id BETWEEN ? AND ? ORDER BY c`
    fn distinct_range(&mut self, tx: &mut dyn Transaction) -> Result<(), DbError> {
        self.range(tx, true)?;
        self.rows.cs.sort_unstable();
        self.rows.cs.dedup();
        black_box(&self.rows.cs);
        Ok(())
    }

    /// `UPDATE sbtest SET k = k + 1 WHERE id = ?`: the row and its index
    /// entry (delete the old entry, insert the new one).
    fn index_update(&mut self, tx: &mut dyn Transaction) -> Result<(), DbError> {
        let id = self.id();
        let t = self.table();
        let Some(mut row) = row_for_update(tx, t, id)? else {
            return Ok(());
        };
        tx.delete(t.index, &index_key(row.k, id))?;
        row.k = row.k.wrapping_add(1);
        tx.put(t.index, &index_key(row.k, id), &[])?;
        tx.put(t.primary, &primary_key(id), &row.encode())
    }

    /// `UPDATE sbtest SET c = ? WHERE id = ?`
    fn non_index_update(&mut self, tx: &mut dyn Transaction) -> Result<(), DbError> {
        let id = self.id();
        let fresh = Row::random(0, &mut self.rng);
        let t = self.table();
        let Some(mut row) = row_for_update(tx, t, id)? else {
            return Ok(());
        };
        row.c = fresh.c;
        tx.put(t.primary, &primary_key(id), &row.encode())
    }

    /// `DELETE FROM sbtest WHERE id = ?` then `INSERT` of a new row with
    /// the same id.
    fn delete_insert(&mut self, tx: &mut dyn Transaction) -> Result<(), DbError> {
        let id = self.id();
        let k = self.keys.next(&mut self.rng).min(u32::MAX as u64) as u32;
        let row = Row::random(k, &mut self.rng);
        let t = self.table();
        let key = primary_key(id);
        if let Some(v) = tx.get_for_update(t.primary, &key)? {
            let old_k = row_k(&v).ok_or_else(|| bad_row(t, id))?;
            tx.delete(t.primary, &key)?;
            tx.delete(t.index, &index_key(old_k, id))?;
        }
        tx.put(t.primary, &key, &row.encode())?;
        tx.put(t.index, &index_key(row.k, id), &[])
    }

    /// `INSERT INTO sbtest (id, k, c, pad)` with a new id.
    fn insert_new(&mut self, tx: &mut dyn Transaction) -> Result<(), DbError> {
        let k = self.keys.next(&mut self.rng).min(u32::MAX as u64) as u32;
        let row = Row::random(k, &mut self.rng);
        let t = self.table();
        let id = t.next_id.fetch_add(1, Ordering::Relaxed);
        tx.put(t.primary, &primary_key(id), &row.encode())?;
        tx.put(t.index, &index_key(row.k, id), &[])
    }
}

/// Row `id` of `t`, locked for update; `None` if there is no such row.
fn row_for_update(tx: &mut dyn Transaction, t: &SbTable, id: u64) -> Result<Option<Row>, DbError> {
    let Some(v) = tx.get_for_update(t.primary, &primary_key(id))? else {
        return Ok(None);
    };
    Row::decode(&v).map(Some).ok_or_else(|| bad_row(t, id))
}

fn bad_row(t: &SbTable, id: u64) -> DbError {
    DbError::Keel(keel::Error::Corruption(format!(
        "table `{}`: row {id} is not a {}-byte sysbench row",
        t.name,
        super::rows::ROW_LEN
    )))
}
