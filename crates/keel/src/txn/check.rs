//! The history's check (part of `Db::check`): the undo lists are well
//! formed, every row's version header decodes, and every version chain a
//! read view could still follow is whole.
//!
//! A chain may be followed from a row whose commit is at or above the purge
//! limit (`view`'s module doc); from each such row the check walks the
//! chain down to the first version below the limit, and requires that each
//! undo record on the way is live (not purged), belongs to the same table,
//! key and commit as the version pointing to it, and holds an older
//! commit's version. Pointers below the limit are never followed by any
//! reader and may name purged undo, as InnoDB's may.

use std::ops::Bound;

use crate::btree::BTree;
use crate::error::{Error, Result};

use super::version::Version;
use super::TrxSys;

/// What [`TrxSys::check_history`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HistoryCheck {
    /// Rows read.
    pub rows: u64,
    /// Of those, delete marks not purged yet.
    pub delete_marks: u64,
    /// Older versions reached through undo records.
    pub versions: u64,
    /// Undo pages and records not yet purged.
    pub undo_pages: u64,
    pub undo_records: u64,
}

impl TrxSys {
    /// Check the undo lists and the version chains of the tables rooted at
    /// `roots` (module doc). Writers may run meanwhile; purge is stopped by
    /// the caller or runs (a purged record is then a live one a moment
    /// before: the check reads the lists first, so it only reports undo
    /// purged before its start as missing when a view could still need it).
    pub(crate) fn check_history(&self, roots: &[(String, BTree)]) -> Result<HistoryCheck> {
        let e = &*self.engine;
        // A view first: purge never passes its `min` while the check runs,
        // so every record a chain at or above it needs stays live; and every
        // commit it sees had written its undo before the lists are read.
        let hold = self.view(0);
        let limit = hold.min();
        let undo = self.undo.check(e)?;
        let mut out = HistoryCheck {
            undo_pages: undo.pages,
            undo_records: undo.unpurged,
            ..HistoryCheck::default()
        };
        for (name, tree) in roots {
            let root = tree.root().page_no;
            for row in tree.range(e, Bound::Unbounded, Bound::Unbounded, false) {
                let (key, stored) = row?;
                out.rows += 1;
                let v = Version::decode(&stored, root)
                    .map_err(|err| Error::Corruption(format!("table `{name}`: {err}")))?;
                out.delete_marks += u64::from(v.deleted);
                let (mut roll, mut newer) = (v.roll, v.trx_no);
                let mut newer_bytes = stored;
                while !roll.is_none() && newer >= limit {
                    let bad = |what: String| {
                        Error::Corruption(format!(
                            "table `{name}`, a row written by commit {newer}: its roll pointer \
                             {roll:?} {what}"
                        ))
                    };
                    if hold.sees(newer) && !undo.live.contains(&roll.raw()) {
                        return Err(bad("names no live undo record".to_string()));
                    }
                    let u = self.undo.read(e, roll)?;
                    if u.root != root || u.key != key || u.commit != newer {
                        return Err(bad(format!(
                            "names an undo record of table page {} commit {}",
                            u.root, u.commit
                        )));
                    }
                    out.versions += 1;
                    let Some(old) = u.old else { break };
                    let old = super::version::rebuild_older(old, u.delta, &newer_bytes, root)
                        .map_err(|err| bad(err.to_string()))?;
                    let ov = Version::decode(&old, root)?;
                    if ov.trx_no >= newer {
                        return Err(bad(format!(
                            "leads to a version of commit {}, not older",
                            ov.trx_no
                        )));
                    }
                    roll = ov.roll;
                    newer = ov.trx_no;
                    newer_bytes = old;
                }
            }
        }
        Ok(out)
    }
}
