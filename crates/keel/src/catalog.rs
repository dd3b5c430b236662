//! The catalog: the tree that maps table names to their root pages, and a
//! cache of the entries read so far.
//!
//! The catalog's root is page 1, fixed at creation. Its entries are written
//! by DDL only ([`Catalog::create`], one at a time under the `ddl` mutex),
//! directly to the tree: a table exists for every reader as soon as its
//! creation returns, and it is not versioned (as InnoDB's data dictionary
//! is not, for plain reads).

use std::collections::HashMap;
use std::ops::Bound;

use parking_lot::{Mutex, RwLock};

use crate::btree::BTree;
use crate::engine::admission::Purpose;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::mtr::{mtr_bound, Mtr};
use crate::page::PageId;

/// Page number of the catalog's root (fixed at creation).
pub(crate) const CATALOG_ROOT: u32 = 1;
/// Longest table name in bytes.
const MAX_TABLE_NAME: usize = 255;

/// The catalog tree and the roots looked up so far.
pub(crate) struct Catalog {
    pub(crate) tree: BTree,
    tables: RwLock<HashMap<String, PageId>>,
    /// Held by a table's creation from its lookup to its catalog entry.
    ddl: Mutex<()>,
}

impl Catalog {
    /// The catalog of the space `e` opened.
    pub(crate) fn open(e: &Engine) -> Catalog {
        Catalog {
            tree: BTree::open(PageId::new(e.space_id(), CATALOG_ROOT)),
            tables: RwLock::new(HashMap::new()),
            ddl: Mutex::new(()),
        }
    }

    /// Create table `name`: its root page, then its entry, then a log sync
    /// (the table is durable when this returns). Errors if it exists.
    pub(crate) fn create(&self, e: &Engine, name: &str) -> Result<PageId> {
        check_name(name)?;
        e.adm.check_writable(Purpose::New)?;
        let _ddl = self.ddl.lock();
        if self.tree.get(e, name.as_bytes())?.is_some() {
            return Err(Error::TableExists(name.to_string()));
        }
        // The root page and the space header page.
        let budget = e.adm.budget(Purpose::New);
        budget.ensure(mtr_bound(2, e.page_size()))?;
        let mut mtr = Mtr::new(e, &budget);
        let tree = BTree::create(&mut mtr)?;
        mtr.commit()?;
        let root = tree.root();
        self.tree
            .put(e, name.as_bytes(), &root.page_no.to_le_bytes())?;
        e.log.write_up_to(e.log.lsn(), true)?;
        self.tables.write().insert(name.to_string(), root);
        Ok(root)
    }

    /// The root of table `name`, or [`Error::TableNotFound`].
    pub(crate) fn lookup(&self, e: &Engine, name: &str) -> Result<PageId> {
        if let Some(&root) = self.tables.read().get(name) {
            return Ok(root);
        }
        let v = self
            .tree
            .get(e, name.as_bytes())?
            .ok_or_else(|| Error::TableNotFound(name.to_string()))?;
        let root = decode_root(e.space_id(), name, &v)?;
        self.tables.write().insert(name.to_string(), root);
        Ok(root)
    }

    /// Every table's name, sorted.
    pub(crate) fn names(&self, e: &Engine) -> Result<Vec<String>> {
        self.tree
            .range(e, Bound::Unbounded, Bound::Unbounded, false)
            .map(|r| r.map(|(k, _)| String::from_utf8_lossy(&k).into_owned()))
            .collect()
    }
}

fn check_name(name: &str) -> Result<()> {
    let bad = |reason: &str| Error::InvalidTableName {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() {
        return Err(bad("empty"));
    }
    if name.len() > MAX_TABLE_NAME {
        return Err(bad("longer than 255 bytes"));
    }
    Ok(())
}

/// A catalog entry's value: the table's root page number. Page 0 (the space
/// header) and the catalog's own root are never a table's root.
pub(crate) fn decode_root(space: u32, name: &str, v: &[u8]) -> Result<PageId> {
    let b: [u8; 4] = v.try_into().map_err(|_| {
        Error::Corruption(format!(
            "catalog entry of table `{name}` is {} bytes, expected 4",
            v.len()
        ))
    })?;
    match u32::from_le_bytes(b) {
        r @ (0 | CATALOG_ROOT) => Err(Error::Corruption(format!(
            "catalog entry of table `{name}` names page {r}, which is no table's root"
        ))),
        r => Ok(PageId::new(space, r)),
    }
}
