//! The B+trees as they stand in the data files, read without the engine and
//! without writing: the catalog (the list of tables), a tree's full check,
//! its entries in key order, one key's value. `keel check --read-only`
//! verifies a database through this module, also while another process
//! has it open: it takes no lock, opens every file read-only, reads one
//! page at a time, and so neither waits for nor blocks that process.
//!
//! What it cannot see: no redo is replayed and no torn page is repaired
//! from the doublewrite area, so the pages are the ones the files hold at
//! the moment each is read. After a crash, or while a process has the
//! database open, a page may be older than the log (a change logged and
//! not yet written back: recovery would redo it), a parent may point at a
//! child written after it was read or before its own change reached disk,
//! and a page being written may read half old, half new (a bad checksum
//! that the doublewrite area or the write itself mends). Such differences
//! are reported as errors like corruption, but prove none; on a database
//! closed cleanly (no process holding it, nothing in the log beyond the
//! checkpoint: `keel inspect` shows both) the files are the whole truth.
//!
//! The checks are the engine's own (`Db::check`'s): page checksums and
//! identities, node layout, key order within and across pages, child
//! levels, no page reachable twice; and the undo lists
//! ([`OnDisk::check_undo`]).

use std::path::Path;
use std::sync::Arc;

use crate::btree::{check_tree, expect_node, node, Pages, TreeStats};
use crate::error::{Error, Result};
use crate::io::{AlignedBuf, FileSystem, FlushMethod, OsFileSystem};
use crate::metrics::Metrics;
use crate::page::{get_u32, PageId};
use crate::space::Tablespace;
pub use crate::undo::UndoCheck;

/// The data files of a database directory, opened read-only.
pub struct OnDisk {
    space: Tablespace,
    catalog: PageId,
}

impl OnDisk {
    /// Open the data files in `dir` (page size and file count from the
    /// first file's header) for reading only, and read the space header.
    /// Errors name the file: a missing or foreign file
    /// ([`Error::BadFile`]), an unreadable space header page.
    pub fn open(dir: &Path) -> Result<OnDisk> {
        // The flush method is moot: read-only files are opened plain.
        Self::open_with_fs(dir, &OsFileSystem::new(FlushMethod::NoSync))
    }

    /// [`OnDisk::open`] on another file system (tests).
    pub fn open_with_fs(dir: &Path, fs: &dyn FileSystem) -> Result<OnDisk> {
        let space = Tablespace::open_read_only(fs, dir, Arc::new(Metrics::default()))?;
        let mut od = OnDisk {
            catalog: PageId::new(space.space_id(), 0),
            space,
        };
        let header = od.page(PageId::new(od.space.space_id(), 0))?;
        let root = get_u32(&header, crate::engine::space_header::CATALOG_ROOT);
        od.catalog = PageId::new(od.space.space_id(), root);
        Ok(od)
    }

    /// Bytes per page.
    pub fn page_size(&self) -> usize {
        self.space.page_size()
    }

    /// The root of the catalog, the tree of table names.
    pub fn catalog_root(&self) -> PageId {
        self.catalog
    }

    /// Every table and its root page, in name order, read from the catalog
    /// (which is checked on the way, as [`OnDisk::check`] does).
    pub fn tables(&self) -> Result<Vec<(String, PageId)>> {
        let mut entries = Vec::new();
        self.scan(self.catalog, &mut |k, v| {
            entries.push((k.to_vec(), v.to_vec()))
        })?;
        entries
            .into_iter()
            .map(|(k, v)| {
                let name = String::from_utf8_lossy(&k).into_owned();
                let root = crate::catalog::decode_root(self.space.space_id(), &name, &v)?;
                Ok((name, root))
            })
            .collect()
    }

    /// Check the tree rooted at `root` as `Db::check` checks a table: every
    /// page's checksum and identity, node layout, key order within and
    /// across pages, child levels, no page reachable twice.
    /// `delete_marked` counts the deleted rows purge has not removed yet.
    pub fn check(&self, root: PageId) -> Result<TreeStats> {
        crate::txn::version::check_table(self, root)
    }

    /// Check the catalog's tree (its values are not row versions).
    pub fn check_catalog(&self) -> Result<TreeStats> {
        check_tree(self, self.catalog_root(), None)
    }

    /// Check the undo lists as `Db::check` does (page types, links, record
    /// framing, purge offsets) and count their pages: with the trees' pages
    /// and the free list, every page in use is accounted for. `None` for
    /// a database laid out before undo existed (no undo directory).
    pub fn check_undo(&self) -> Result<Option<UndoCheck>> {
        crate::undo::check_space(self, self.space.space_id())
    }

    /// [`OnDisk::check`], calling `visit` with every entry in key order.
    pub fn scan(&self, root: PageId, visit: &mut dyn FnMut(&[u8], &[u8])) -> Result<TreeStats> {
        check_tree(self, root, Some(visit))
    }

    /// The value of `key` in the tree rooted at `root`; every page on the
    /// way down is checked whole first. A table's values are stored values:
    /// a version header, then the row ([`OnDisk::latest_value`] reads it).
    pub fn get(&self, root: PageId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let (mut id, mut level) = (root, None);
        loop {
            let page = self.page(id)?;
            expect_node(&page, id, level)?;
            node::check(&page)?;
            let n = node::NodeRef::new(&page);
            if n.is_leaf() {
                return Ok(n.search(key).ok().map(|i| n.value(i).to_vec()));
            }
            // An internal node is above level 0, and each step goes one
            // level down: the descent ends.
            level = Some(n.level() - 1);
            id = PageId::new(id.space, n.child(n.child_pos(key)));
        }
    }
}

impl OnDisk {
    /// The row a table's stored value holds in its latest version (the
    /// version header first; `docs/format.md`, "Row versions"): `None` for
    /// a delete mark not purged yet; a large value is read from its
    /// overflow chain. Older versions live in undo pages.
    pub fn latest_value(&self, stored: &[u8]) -> Result<Option<Vec<u8>>> {
        let v = crate::txn::version::Version::decode(stored, 0)?;
        v.row(self, self.space.space_id())
    }

    /// Pages of overflow chains no row's latest version names (old
    /// versions' and those in flight, checked whole) and the overflow
    /// directory: with the trees' pages (their `overflow_pages` included)
    /// and the undo pages, every page in use.
    pub fn history_chain_pages(&self) -> Result<u64> {
        crate::txn::version::history_chain_pages(self, self.space.space_id())
    }
}

impl Pages for OnDisk {
    type Page<'a> = AlignedBuf;

    fn page(&self, id: PageId) -> Result<AlignedBuf> {
        if id.space != self.space.space_id() {
            return Err(Error::Corruption(format!(
                "page {id} is not in this database's space {}",
                self.space.space_id()
            )));
        }
        let mut buf = AlignedBuf::new(self.space.page_size());
        self.space.read_page(id, &mut buf)?;
        Ok(buf)
    }

    fn page_size(&self) -> usize {
        self.space.page_size()
    }
}

impl std::fmt::Debug for OnDisk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnDisk")
            .field("dir", &self.space.file_path(0).parent())
            .field("page_size", &self.space.page_size())
            .field("catalog", &self.catalog)
            .finish()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::io::FaultyFs;
    use crate::{Db, Options};

    fn opts() -> Options {
        Options {
            page_size: 4096,
            buffer_pool_size: 64 * 4096,
            data_files: 2,
            ..Options::default()
        }
    }

    /// Table `a` of 3000 rows (several levels), `b` of 3.
    fn populate(db: &Db) {
        let a = db.create_table("a").unwrap();
        for i in 0..3000u32 {
            a.put(&i.to_be_bytes(), &[i as u8; 40]).unwrap();
        }
        let b = db.create_table("b").unwrap();
        for k in [b"x", b"y", b"z"] {
            b.put(k, b"v").unwrap();
        }
    }

    #[test]
    fn the_files_of_a_closed_database_check_as_the_engine_checks_them() {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFs::new());
        let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
        populate(&db);
        let engine_view = db.check().unwrap();
        db.close().unwrap();
        let images = |fs: &FaultyFs| -> Vec<_> {
            fs.paths()
                .iter()
                .map(|p| fs.durable_image(p).unwrap())
                .collect()
        };
        let before = images(&fs);

        let od = OnDisk::open_with_fs(dir.path(), &*fs).unwrap();
        assert_eq!(od.check_catalog().unwrap(), engine_view[0].1);
        let tables = od.tables().unwrap();
        let names: Vec<&str> = tables.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        for ((name, root), (engine_name, stats)) in tables.iter().zip(&engine_view[1..]) {
            assert_eq!(name, engine_name);
            assert_eq!(&od.check(*root).unwrap(), stats, "{name}");
        }
        let a = tables[0].1;
        assert!(od.check(a).unwrap().height > 1);
        let mut keys = Vec::new();
        od.scan(a, &mut |k, _| keys.push(k.to_vec())).unwrap();
        let expected: Vec<Vec<u8>> = (0..3000u32).map(|i| i.to_be_bytes().to_vec()).collect();
        assert_eq!(keys, expected);
        let stored = od.get(a, &2999u32.to_be_bytes()).unwrap().unwrap();
        assert_eq!(
            od.latest_value(&stored).unwrap(),
            Some(vec![2999u32 as u8; 40])
        );
        assert_eq!(od.get(a, &3000u32.to_be_bytes()).unwrap(), None);
        // Read, not written: every file's image is as the close left it.
        assert_eq!(images(&fs), before);
    }

    #[test]
    fn the_files_are_read_while_the_engine_holds_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFs::new());
        let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
        populate(&db);
        db.flush().unwrap();
        assert!(matches!(
            Db::open_with_fs(dir.path(), opts(), Some(fs.clone())),
            Err(Error::Locked { .. })
        ));
        let od = OnDisk::open_with_fs(dir.path(), &*fs).unwrap();
        let (name, b) = od.tables().unwrap().pop().unwrap();
        assert_eq!(name, "b");
        let stored = od.get(b, b"y").unwrap().unwrap();
        assert_eq!(
            od.latest_value(&stored).unwrap().as_deref(),
            Some(&b"v"[..])
        );
        db.close().unwrap();
    }

    #[test]
    fn a_flipped_byte_is_a_corrupt_page_naming_page_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFs::new());
        let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
        populate(&db);
        let root = db.table("b").unwrap().tree.root();
        db.close().unwrap();
        let (file, off) = crate::space::locate(root.page_no, 2, 4096);
        let path = dir.path().join(crate::space::data_file_name(file));
        let byte = fs.durable_image(&path).unwrap()[off as usize + 2000];
        fs.write_durable(&path, off + 2000, &[!byte]).unwrap();
        let od = OnDisk::open_with_fs(dir.path(), &*fs).unwrap();
        match od.check(root) {
            Err(Error::CorruptPage {
                page,
                path: p,
                reason,
            }) => {
                assert_eq!((page, p), (root, path));
                assert!(reason.contains("checksum"), "{reason}");
            }
            other => panic!("expected CorruptPage, got {other:?}"),
        }
    }
}
