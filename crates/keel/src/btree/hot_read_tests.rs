//! The pool's guesses of the frames of roots and internal nodes
//! (`BufferPool::read_hot`) are hints: a guess whose frame no longer holds
//! the page, or holds another one, falls back to the page hash, and a
//! guessed frame latched exclusively is waited for like any other.

use std::time::Duration;

use super::test_engine::engine;
use super::tests::{key_of, new_tree, value};
use super::NodeRef;
use crate::page::{page_id, PageId};

/// A tree of `n` rows (an internal root at 4 KiB pages), every page clean.
fn tree_of(e: &crate::engine::Engine, n: u32) -> super::BTree {
    let t = new_tree(e);
    for i in 0..n {
        t.put(e, &key_of(i), &value(u64::from(i), 60)).unwrap();
    }
    e.flush_and_checkpoint().unwrap();
    t
}

/// The root is evicted and its frame reused for a leaf: the guess now
/// names a frame holding another page, and the next read of the root must
/// load the root, not lend the leaf; every row is still found.
#[test]
fn a_guess_whose_frame_holds_another_page_falls_back_to_the_page_hash() {
    let e = engine(4096);
    let t = tree_of(&e, 3_000);
    let root = t.root();
    let leaf = {
        let r = e.pool.read_hot(root).unwrap();
        let n = NodeRef::new(&r);
        assert!(!n.is_leaf(), "3,000 rows need an internal root");
        PageId::new(root.space, n.child(0))
    };
    let guessed = e.pool.guess_for_test(root).expect("a read leaves a guess");
    assert!(e.pool.evict_for_test(leaf));
    assert!(e.pool.evict_for_test(root));
    // The last frame freed is the first one taken: the leaf goes where the
    // root was.
    let l = e.pool.read(leaf).unwrap();
    assert_eq!(
        e.pool.guess_for_test(root),
        Some(guessed),
        "nothing but a hot read changes a guess"
    );
    let inst = e.pool.instance_of(leaf);
    assert_eq!(
        Some((inst, e.pool.frame_of(inst, leaf).unwrap())),
        Some(guessed),
        "the leaf was to be loaded into the root's old frame"
    );
    drop(l);
    let r = e.pool.read_hot(root).unwrap();
    assert_eq!(page_id(&r), root);
    drop(r);
    assert_ne!(e.pool.guess_for_test(root), Some(guessed));
    for i in (0..3_000).step_by(7) {
        assert_eq!(
            t.get(&e, &key_of(i)).unwrap(),
            Some(value(u64::from(i), 60))
        );
    }
}

/// With the root's guessed frame latched exclusively, a hot read neither
/// lends it nor passes the latch: it waits, and gets the page once the
/// writer lets go.
#[test]
fn a_guessed_frame_latched_exclusively_is_waited_for() {
    let e = engine(4096);
    let t = tree_of(&e, 3_000);
    let root = t.root();
    drop(e.pool.read_hot(root).unwrap());
    assert!(e.pool.guess_for_test(root).is_some());
    let w = e.pool.write(root).unwrap();
    std::thread::scope(|s| {
        let reader = s.spawn(|| page_id(&e.pool.read_hot(root).unwrap()));
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !reader.is_finished(),
            "a hot read passed an exclusive latch"
        );
        drop(w);
        assert_eq!(reader.join().unwrap(), root);
    });
}
