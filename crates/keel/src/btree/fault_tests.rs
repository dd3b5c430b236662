//! Tree and bulk-load steps that fail half-way change nothing: the space
//! header (page 0) is evicted and its next read fails (`FaultyFs`), or an
//! allocation fails after the first page was taken, and every page, the
//! log and the pool must be as before the step (`mtr`'s module doc); then
//! the same work succeeds once the fault is gone, and no page leaks.

use std::sync::Arc;
use std::time::Duration;

use super::bulk::{self, BulkLoad};
use super::test_engine::{engine, engine_on, pages_in_use, TestEngine};
use super::tests::{assert_matches, key_of, new_tree, set_hwm, value, Model};
use super::{node, BTree};
use crate::error::Error;
use crate::io::faulty::FaultyFs;
use crate::page::PageId;

/// An engine on the faulty file system.
fn faulty_engine() -> (TestEngine, Arc<FaultyFs>) {
    let fs = Arc::new(FaultyFs::new());
    (engine_on(4096, Some(fs.clone())), fs)
}

/// Write every dirty page back and evict page 0, then make the next data
/// read (page 0's, as nothing else is out of the pool) fail.
fn fail_next_header_read(e: &TestEngine, fs: &FaultyFs) {
    e.flush_and_checkpoint().unwrap();
    assert!(e.pool.evict_for_test(PageId::new(e.space_id(), 0)));
    fs.arm("/data-.read:eio", 0).unwrap();
}

fn rows(n: u32) -> Model {
    (0..n)
        .map(|i| (key_of(i), value(u64::from(i), 60)))
        .collect()
}

/// The publish latches the table's root, copies the hidden root into it,
/// and then reads page 0 to free the hidden root: the read fails. Before,
/// the copy was logged on the way out and the failed load then freed the
/// hidden root's children, which the table's root now named.
#[test]
fn a_publish_that_cannot_read_the_space_header_publishes_nothing() {
    let (e, fs) = faulty_engine();
    let t = new_tree(&e);
    let before = pages_in_use(&e).unwrap();
    let m = rows(3_000);
    let mut load = BulkLoad::begin(&e, t, "t", 100, super::bulk::owns_nothing).unwrap();
    for (k, v) in &m {
        load.push(k, v).unwrap();
    }
    let hold = e.failpoints.arm("bulk.publish");
    let finished = std::thread::scope(|s| {
        let loader = s.spawn(|| load.finish());
        assert!(hold.wait_held(Duration::from_secs(20)));
        fail_next_header_read(&e, &fs);
        hold.release();
        loader.join().unwrap()
    });
    let err = finished.unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    // The failed load dropped its hidden tree (page 0 reads again): the
    // table is empty and whole, and every page of the load is free.
    assert_eq!(assert_matches(&t, &e, &Model::new()).entries, 0);
    let root = e.pool.read(t.root()).unwrap();
    assert_eq!(node::NodeRef::new(&root).pending_bulk(), None);
    drop(root);
    assert_eq!(pages_in_use(&e).unwrap(), before);
    // And takes the same load again.
    let mut load = BulkLoad::begin(&e, t, "t", 100, super::bulk::owns_nothing).unwrap();
    for (k, v) in &m {
        load.push(k, v).unwrap();
    }
    load.finish().unwrap();
    assert_matches(&t, &e, &m);
}

/// A drop step latches the right edge and the children it frees, then
/// page 0, whose read fails. Before, the last cell of the node above the
/// children was removed in memory, never logged, and its child leaked.
#[test]
fn a_drop_step_that_cannot_read_the_space_header_changes_nothing() {
    let (e, fs) = faulty_engine();
    let t = new_tree(&e);
    let before = pages_in_use(&e).unwrap();
    let mut load = BulkLoad::begin(&e, t, "t", 100, super::bulk::owns_nothing).unwrap();
    for (k, v) in &rows(5_000) {
        load.push(k, v).unwrap();
    }
    let hidden = load.leave_for_test();
    let tree = BTree::open(hidden);
    let stats = tree.check(&e).unwrap();
    assert!(stats.height >= 2, "{stats:?}");
    fail_next_header_read(&e, &fs);
    let lsn = e.log.lsn();
    let err = bulk::drop_hidden(&e, t.root(), hidden, bulk::owns_nothing).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert_eq!(tree.check(&e).unwrap(), stats, "the hidden tree changed");
    assert_eq!(e.log.lsn(), lsn, "a failed drop step logged something");
    // Page 0 reads again: the drop finishes and frees every page.
    bulk::drop_hidden(&e, t.root(), hidden, bulk::owns_nothing).unwrap();
    assert_eq!(pages_in_use(&e).unwrap(), before);
    assert_eq!(assert_matches(&t, &e, &Model::new()).entries, 0);
}

/// A delete that merges two leaves frees one of them, which reads page 0:
/// the read fails. Before, the merged images were logged and the page
/// leaked, while the delete reported an error.
#[test]
fn a_merge_that_cannot_read_the_space_header_deletes_nothing() {
    let (e, fs) = faulty_engine();
    let t = new_tree(&e);
    let mut m = rows(2_000);
    for (k, v) in &m {
        t.put(&e, k, v).unwrap();
    }
    fail_next_header_read(&e, &fs);
    let lsn = e.log.lsn();
    let keys: Vec<_> = m.keys().cloned().collect();
    let failed = keys
        .iter()
        .find(|k| match t.delete(&e, k) {
            Ok(found) => {
                assert!(found && m.remove(*k).is_some());
                false
            }
            Err(err) => {
                assert!(matches!(err, Error::Io { .. }), "{err}");
                true
            }
        })
        .expect("no delete merged leaves");
    assert!(e.log.lsn() > lsn, "deletes before the merge are logged");
    assert_matches(&t, &e, &m);
    // Page 0 reads again: the same delete merges, and no page leaked.
    assert!(t.delete(&e, failed).unwrap());
    m.remove(failed);
    let stats = assert_matches(&t, &e, &m);
    assert_eq!(
        pages_in_use(&e).unwrap(),
        stats.leaf_pages + stats.internal_pages
    );
}

/// The second leaf grows the hidden root (a page from the high-water mark)
/// and then cannot allocate the leaf. Before, the page taken was freed and
/// the space header's change logged; now nothing is logged, the header is
/// as it was, and the page is gone from the pool.
#[test]
fn a_leaf_write_failing_half_way_logs_nothing_and_gives_its_page_back() {
    let e = engine(4096);
    let t = new_tree(&e);
    let m = rows(2_000);
    let rows: Vec<_> = m.iter().collect();
    let mut load = BulkLoad::begin(&e, t, "t", 100, super::bulk::owns_nothing).unwrap();
    let mut i = 0;
    while load.progress().0 < 1 {
        load.push(rows[i].0, rows[i].1).unwrap();
        i += 1;
    }
    // One page number left: the growth gets it, the leaf does not.
    let hwm = set_hwm(&e, u32::MAX - 1);
    let header = PageId::new(e.space_id(), 0);
    let hidden = load.progress().1;
    let image = |id| e.pool.read(id).unwrap().to_vec();
    let (hdr, root, lsn) = (image(header), image(hidden), e.log.lsn());
    let failed = loop {
        match load.push(rows[i].0, rows[i].1) {
            Ok(()) => i += 1,
            Err(err) => break err,
        }
    };
    assert!(matches!(failed, Error::SpaceFull(_)), "{failed}");
    assert_eq!(e.log.lsn(), lsn, "a failed leaf write logged something");
    assert_eq!(image(header), hdr);
    assert_eq!(image(hidden), root);
    assert!(!e.pool.contains(PageId::new(e.space_id(), u32::MAX - 1)));
    set_hwm(&e, hwm);
    for (k, v) in &rows[i..] {
        load.push(k, v).unwrap();
    }
    load.finish().unwrap();
    assert_matches(&t, &e, &m);
}
