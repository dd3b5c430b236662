//! Reading rows: the latest version (for locking reads and writes), or the
//! version a read view sees, rebuilt from the undo chain.
//!
//! A reader copies a row out of its leaf under the leaf's shared latch and
//! releases it; if its view does not see that version, it follows the roll
//! pointer to the undo record holding the version before, latching one
//! undo page at a time, until it reaches a version it sees, a version that
//! says the row did not exist, or a delete mark it sees. It holds no latch
//! between steps and never waits for a writer. Its view is registered, so
//! the undo it follows is not purged under it (`view`'s module doc); every
//! undo record read is checked to belong to the same table, key and commit
//! as the version pointing to it, so a broken chain is reported as
//! corruption, never returned as data.

use std::ops::Bound;
use std::sync::Arc;

use crate::btree::{BTree, Cursor, LendRows};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::metrics::Metrics;

use super::version::Version;
use super::view::ReadView;
use super::TrxSys;

/// What a read view sees of one stored row.
enum Seen {
    /// The stored version itself, kept in its leaf: its value is the
    /// stored bytes past the version header.
    Stored,
    /// No row: absent or deleted in the view's snapshot.
    Absent,
    /// A value in a buffer of its own: an older version, rebuilt from the
    /// undo chain, or a large value read from its overflow chain.
    Older(Vec<u8>),
}

/// The value of a stored row as `view` sees it (`None`: absent or deleted
/// in that snapshot). The common case, a version the view sees, returns
/// `stored`'s own buffer with the header cut off: no copy of the value.
pub(crate) fn visible(
    sys: &TrxSys,
    view: &ReadView,
    root: u32,
    key: &[u8],
    stored: Vec<u8>,
) -> Result<Option<Vec<u8>>> {
    Ok(match resolve(sys, view, root, key, &stored)? {
        // Neither deleted nor external (`resolve`): the bytes past the
        // header are the value.
        Seen::Stored => Some(strip(stored)),
        Seen::Absent => None,
        Seen::Older(v) => Some(v),
    })
}

/// Which version of the row `key` stored as `stored` the view sees.
fn resolve(sys: &TrxSys, view: &ReadView, root: u32, key: &[u8], stored: &[u8]) -> Result<Seen> {
    let v = Version::decode(stored, root)?;
    let (deleted, mut roll, mut newer) = (v.deleted, v.roll, v.trx_no);
    // The stored bytes of the version `roll` came from: an undo record
    // may keep its version as a delta of them (`version::rebuild_older`).
    let mut newer_bytes: std::borrow::Cow<'_, [u8]> = std::borrow::Cow::Borrowed(stored);
    if view.sees(newer) {
        return Ok(match (deleted, v.external) {
            (true, _) => Seen::Absent,
            (false, None) => Seen::Stored,
            // A large value: read from its chain into a buffer of its own.
            (false, Some(p)) => {
                // Between the leaf and the chain (tests of a truncate
                // freeing the chain meanwhile).
                sys.engine.failpoints.hit("read.lob");
                Seen::Older(crate::lob::read(&*sys.engine, sys.engine.space_id(), p)?)
            }
        });
    }
    loop {
        let Some(old) = older(sys, root, key, roll, newer, &newer_bytes)? else {
            // The row did not exist before the version this view misses.
            return Ok(Seen::Absent);
        };
        let ov = Version::decode(&old, root)?;
        if view.sees(ov.trx_no) {
            let e = &*sys.engine;
            return Ok(ov.row(e, e.space_id())?.map_or(Seen::Absent, Seen::Older));
        }
        if ov.trx_no >= newer {
            return Err(Error::Corruption(format!(
                "undo record {roll:?} of table page {root} holds a version of commit {} older \
                 than its successor's commit {newer}",
                ov.trx_no
            )));
        }
        roll = ov.roll;
        newer = ov.trx_no;
        newer_bytes = std::borrow::Cow::Owned(old);
    }
}

/// The stored bytes of the version that the one stored as `newer_bytes`
/// (written by commit `newer`, its roll pointer `roll`) replaced, rebuilt
/// from its undo record; `None` if the row did not exist before it.
fn older(
    sys: &TrxSys,
    root: u32,
    key: &[u8],
    roll: crate::undo::RollPtr,
    newer: u64,
    newer_bytes: &[u8],
) -> Result<Option<Vec<u8>>> {
    if roll.is_none() {
        return Ok(None);
    }
    let u = sys.undo.read(&sys.engine, roll)?;
    if u.root != root || u.key != key || u.commit != newer {
        return Err(Error::Corruption(format!(
            "undo record {roll:?} belongs to table page {} commit {}, but the row of table \
             page {root} written by commit {newer} points to it",
            u.root, u.commit
        )));
    }
    Metrics::add(&sys.engine.metrics.trx_versions_rebuilt, 1);
    let Some(old) = u.old else {
        return Ok(None);
    };
    Ok(Some(super::version::rebuild_older(
        old,
        u.delta,
        newer_bytes,
        root,
    )?))
}

/// The value `key` had before the version stored as `stored` was written:
/// the value of the version it replaced (read from its overflow chain if
/// large), `None` if the row was absent or delete-marked then. For rolling
/// back a commit (`commit`'s module doc).
pub(crate) fn before(
    sys: &TrxSys,
    root: u32,
    key: &[u8],
    stored: &[u8],
) -> Result<Option<Vec<u8>>> {
    let v = Version::decode(stored, root)?;
    match older(sys, root, key, v.roll, v.trx_no, stored)? {
        None => Ok(None),
        Some(old) => {
            let e = &*sys.engine;
            Version::decode(&old, root)?.row(e, e.space_id())
        }
    }
}

/// The latest committed value of `key` (for locking reads and writes, which
/// hold the row lock: no commit can be changing the row meanwhile).
pub(crate) fn latest(e: &Engine, tree: BTree, key: &[u8]) -> Result<Option<Vec<u8>>> {
    let root = tree.root().page_no;
    match tree.get(e, key)? {
        None => Ok(None),
        Some(stored) => value_of(e, root, stored),
    }
}

/// The user's value of a stored version (`None` for a delete mark): in
/// `stored`'s own buffer, or read from its overflow chain.
fn value_of(e: &Engine, root: u32, stored: Vec<u8>) -> Result<Option<Vec<u8>>> {
    let v = Version::decode(&stored, root)?;
    if v.deleted {
        return Ok(None);
    }
    if let Some(p) = v.external {
        return crate::lob::read(e, e.space_id(), p).map(Some);
    }
    Ok(Some(strip(stored)))
}

/// The value of a stored version kept in its leaf: the bytes past the
/// header, in the stored value's own buffer.
fn strip(mut stored: Vec<u8>) -> Vec<u8> {
    stored.drain(..super::version::HEADER);
    stored
}

/// `key` of `tree` as `view` sees it.
pub(crate) fn get(
    sys: &TrxSys,
    view: &ReadView,
    tree: BTree,
    key: &[u8],
) -> Result<Option<Vec<u8>>> {
    match tree.get(&sys.engine, key)? {
        None => Ok(None),
        Some(stored) => visible(sys, view, tree.root().page_no, key, stored),
    }
}

/// The rows of one table in a key range as one read view sees them
/// (`Table::range`, and the tree side of a transaction's scan).
///
/// Rows are lent out of the cursor's buffer ([`LendRows`]); only a
/// version rebuilt from undo is copied, into a buffer of the snapshot's
/// own.
pub(crate) struct Snapshot<'t> {
    sys: &'t TrxSys,
    view: Arc<ReadView>,
    root: u32,
    cursor: Cursor<'t>,
    /// The current row's value when the view sees an older version than
    /// the stored one; `None` when it sees the stored one.
    rebuilt: Option<Vec<u8>>,
    /// The cursor's current row is one the view sees (`rebuilt` set).
    ready: bool,
    done: bool,
    /// The table's DDL state, checked after every step of the cursor,
    /// and the DDL epoch the scan began at (`catalog`'s module doc).
    ddl: Option<(Arc<crate::catalog::TableMeta>, Arc<str>, u64)>,
}

impl<'t> Snapshot<'t> {
    pub(crate) fn new(
        sys: &'t TrxSys,
        view: Arc<ReadView>,
        tree: BTree,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        reverse: bool,
    ) -> Snapshot<'t> {
        Snapshot {
            sys,
            view,
            root: tree.root().page_no,
            cursor: tree.range(&sys.engine, lo, hi, reverse),
            rebuilt: None,
            ready: false,
            done: false,
            ddl: None,
        }
    }

    /// Fail with `TableDropped` or `TableChanged` at the first step after
    /// `table` was dropped, or truncated after DDL epoch `since`.
    pub(crate) fn checking_ddl(mut self, table: &crate::Table, since: u64) -> Self {
        self.ddl = Some((table.meta.clone(), table.name.clone(), since));
        self
    }
}

impl LendRows for Snapshot<'_> {
    /// Make [`LendRows::current`] a row the view sees, skipping those it
    /// does not: `None` at the end, `Some(Err)` on an I/O error or a broken
    /// undo chain (the snapshot then ends).
    fn ensure(&mut self) -> Option<Result<()>> {
        while !self.ready {
            if self.done {
                return None;
            }
            let step = self.cursor.ensure();
            if let Some((meta, name, since)) = &self.ddl {
                if let Err(e) = meta.check(name, *since) {
                    self.done = true;
                    return Some(Err(e));
                }
            }
            let seen = match step {
                None => Ok(None),
                Some(Ok(())) => {
                    let (key, stored) = self.cursor.current();
                    resolve(self.sys, &self.view, self.root, key, stored).map(Some)
                }
                Some(Err(e)) => Err(e),
            };
            match seen {
                Ok(None) => self.done = true,
                Ok(Some(Seen::Absent)) => self.cursor.advance(),
                Ok(Some(Seen::Stored)) => self.ready = true,
                Ok(Some(Seen::Older(v))) => {
                    self.rebuilt = Some(v);
                    self.ready = true;
                }
                Err(e) => {
                    self.done = true;
                    // A truncate or drop may have freed a large value's
                    // chain under the scan: report the table's change.
                    if let Some((meta, name, since)) = &self.ddl {
                        if let Err(ddl) = meta.check(name, *since) {
                            return Some(Err(ddl));
                        }
                    }
                    return Some(Err(e));
                }
            }
        }
        Some(Ok(()))
    }

    /// The row [`LendRows::ensure`] found: `(key, value)` as the view sees
    /// it.
    ///
    /// # Panics
    /// If `ensure` did not return `Some(Ok(()))` since the last
    /// [`LendRows::advance`].
    fn current(&self) -> (&[u8], &[u8]) {
        assert!(self.ready, "Snapshot::current without a row");
        let (key, stored) = self.cursor.current();
        match &self.rebuilt {
            Some(v) => (key, v),
            None => (key, &stored[super::version::HEADER..]),
        }
    }

    /// Step past the current row.
    fn advance(&mut self) {
        if self.ready {
            self.cursor.advance();
            self.rebuilt = None;
            self.ready = false;
        }
    }
}

impl Iterator for Snapshot<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_owned()
    }
}
