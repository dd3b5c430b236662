//! How the b-tree tests get an engine: a real one over a temporary
//! directory, with a formatted space header (page 0) and no catalog, and a
//! pool large enough that the tests never need eviction (no page cleaners
//! run here).

use std::ops::Deref;

use parking_lot::Mutex;

use crate::config::Options;
use crate::engine::admission::Purpose;
use crate::engine::{space_header as sh, Engine};
use crate::mtr::{mtr_bound, Mtr};
use crate::page::{get_u32, init_page, put_u32, PageId, PageType};

/// An engine and the directory that holds its files.
pub(crate) struct TestEngine {
    engine: Engine,
    /// Allocation state saved while the allocation failpoint is on.
    saved: Mutex<Option<[u32; 3]>>,
    _dir: tempfile::TempDir,
}

impl Deref for TestEngine {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.engine
    }
}

/// A fresh engine with pages of `page_size` bytes.
pub(crate) fn engine(page_size: usize) -> TestEngine {
    engine_on(page_size, None)
}

/// [`engine`] on file system `fs` (the faulty one, for I/O failures), or
/// the real one.
pub(crate) fn engine_on(
    page_size: usize,
    fs: Option<std::sync::Arc<dyn crate::io::FileSystem>>,
) -> TestEngine {
    let dir = tempfile::tempdir().unwrap();
    let o = Options {
        page_size,
        buffer_pool_size: 16 << 20,
        flush_method: "nosync".parse().unwrap(),
        data_files: 2,
        ..Options::default()
    };
    let (engine, created) = Engine::open(dir.path(), o, fs, super::node::validate).unwrap();
    assert!(created);
    let id = PageId::new(engine.space_id(), 0);
    {
        let budget = engine.adm.budget(Purpose::New);
        budget.ensure(mtr_bound(1, page_size)).unwrap();
        let mut mtr = Mtr::new(&engine, &budget);
        let mut hdr = engine.pool.create(id).unwrap();
        init_page(&mut hdr, id, PageType::SpaceHeader);
        put_u32(&mut hdr, sh::HWM, 1);
        mtr.keep(hdr);
        mtr.commit().unwrap();
    }
    TestEngine {
        engine,
        saved: Mutex::new(None),
        _dir: dir,
    }
}

fn header_fields() -> [usize; 3] {
    [sh::HWM, sh::FREE_HEAD, sh::FREE_COUNT]
}

/// Pages allocated and not freed, page 0 excluded.
pub(super) fn pages_in_use(e: &TestEngine) -> Option<usize> {
    let hdr = e.pool.read(PageId::new(e.space_id(), 0)).unwrap();
    Some((get_u32(&hdr, sh::HWM) - 1 - get_u32(&hdr, sh::FREE_COUNT)) as usize)
}

/// Make allocations fail (`Some(0)`) or work again (`None`) by hiding the
/// free list and moving the high-water mark to the last page number. Other
/// counts cannot be emulated: returns false.
pub(super) fn set_alloc_failpoint(e: &TestEngine, n: Option<usize>) -> bool {
    if n.is_some_and(|n| n > 0) {
        return false;
    }
    let mut saved = e.saved.lock();
    let budget = e.adm.budget(Purpose::New);
    budget.ensure(mtr_bound(1, e.page_size())).unwrap();
    let mut mtr = Mtr::new(e, &budget);
    let mut hdr = e.pool.write(PageId::new(e.space_id(), 0)).unwrap();
    match (n, saved.take()) {
        (Some(_), None) => {
            let f = header_fields();
            *saved = Some(f.map(|off| get_u32(&hdr, off)));
            for (off, v) in f.into_iter().zip([u32::MAX, 0, 0]) {
                put_u32(&mut hdr, off, v);
            }
        }
        (None, Some(old)) => {
            for (off, v) in header_fields().into_iter().zip(old) {
                put_u32(&mut hdr, off, v);
            }
        }
        (_, old) => *saved = old,
    }
    mtr.keep(hdr);
    mtr.commit().unwrap();
    true
}
