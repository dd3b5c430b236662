//! Helpers of the bulk-load tests (`bulk_load.rs`, `bulk_load_at_open.rs`):
//! a database on the faulty file system, the leak check against the space
//! header, and a load held at `bulk.leaf` on its own thread.

use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use keel::failpoint::Hold;
use keel::format::data::{self, space_header, FileHeader, HEADER_LEN};
use keel::format::page::{get_u32, verify_page, PageId};
use keel::io::faulty::{CrashMode, FaultyFs};
use keel::{Db, Options, Table};

/// High-water mark and free-page count from the space header (page 0) in
/// an image of `data-0.keel`.
pub fn space_counts(data0: &[u8]) -> (u32, u32) {
    let h = FileHeader::decode(&data0[..HEADER_LEN]).unwrap();
    let ps = h.page_size as usize;
    // Page 0 is the first page after the file header block.
    let page = &data0[ps..2 * ps];
    verify_page(page, PageId::new(h.space_id, 0)).unwrap();
    (
        get_u32(page, space_header::HWM),
        get_u32(page, space_header::FREE_COUNT),
    )
}

/// Pages in use: every tree's, the catalog included, as `Db::check` counts
/// them, and the undo directory's and lists' (`Db::undo_pages`).
pub fn tree_pages(db: &Db) -> u64 {
    let trees: u64 = db
        .check()
        .unwrap()
        .iter()
        .map(|(_, s)| (s.leaf_pages + s.internal_pages + s.overflow_pages) as u64)
        .sum();
    // The undo directory and undo pages are in use too.
    trees + db.undo_pages().unwrap()
}

/// Close `db` and check that no page leaked: the pages the space header
/// counts in use are exactly the trees' pages. `data0` reads the closed
/// `data-0.keel`. Returns the free-page count.
pub fn close_without_leak(db: Db, data0: impl FnOnce() -> Vec<u8>) -> u32 {
    // Purge frees pages: counted with it stopped, they stay counted.
    db.stop_purge();
    let in_trees = tree_pages(&db);
    db.close().unwrap();
    let (hwm, free) = space_counts(&data0());
    let in_use = u64::from(hwm - 1 - free);
    assert_eq!(
        in_use, in_trees,
        "pages leaked: the space header says {in_use} pages are in use (high-water mark \
         {hwm}, {free} free), the trees hold {in_trees}"
    );
    free
}

/// A database on the faulty file system.
pub struct Bed {
    pub dir: tempfile::TempDir,
    pub fs: Arc<FaultyFs>,
    pub opts: Options,
}

impl Bed {
    pub fn new(opts: Options) -> Bed {
        Bed {
            dir: tempfile::tempdir().unwrap(),
            fs: Arc::new(FaultyFs::new()),
            opts,
        }
    }

    pub fn try_open(&self) -> keel::Result<Db> {
        Db::open_with_fs(self.dir.path(), self.opts.clone(), Some(self.fs.clone()))
    }

    pub fn open(&self) -> Db {
        self.try_open().unwrap()
    }

    /// What survives power loss of `data-0.keel`.
    pub fn data0(&self) -> Vec<u8> {
        self.data_image(0)
    }

    /// What survives power loss of data file `index`.
    pub fn data_image(&self, index: usize) -> Vec<u8> {
        self.fs
            .durable_image(&self.dir.path().join(data::file_name(index)))
            .unwrap()
    }

    /// [`close_without_leak`] on this bed's `data-0.keel`.
    pub fn close_without_leak(&self, db: Db) -> u32 {
        close_without_leak(db, || self.data0())
    }

    /// Power fails: every unsynced write is lost, the engine stops.
    pub fn crash(&self, db: Db) {
        self.fs.crash(CrashMode::DropUnsynced);
        db.simulate_crash();
    }

    /// Open with power failing under the open after `n` page writes, for
    /// each `n` of `writes` (an open that gets through loses power at
    /// once): recovery itself crashed. Returns how many opens failed.
    #[allow(dead_code)]
    pub fn crash_opens(&self, writes: std::ops::Range<u64>) -> usize {
        let mut failed = 0;
        for n in writes {
            self.fs.arm("/data-.write:crash", n).unwrap();
            match self.try_open() {
                Ok(db) => {
                    self.fs.disarm();
                    self.crash(db);
                }
                Err(_) => {
                    failed += 1;
                    self.fs.disarm();
                }
            }
        }
        failed
    }
}

/// A bulk load of `row(0..n)` running on its own thread.
pub struct HeldLoad {
    thread: JoinHandle<keel::Result<u64>>,
    hold: Arc<Hold>,
    wait: Duration,
}

impl HeldLoad {
    /// Start loading rows `row(0..n)` into `t` and wait (at most `wait`)
    /// until the load is held at `bulk.leaf`, which the row iterator arms
    /// when it hands over row `hold_at`: the load stops before writing the
    /// leaf that row's push (or the finish) completes, with every leaf
    /// before it in the hidden tree.
    pub fn start(
        db: &Db,
        t: &Table,
        n: u32,
        hold_at: u32,
        row: fn(u32) -> (Vec<u8>, Vec<u8>),
        wait: Duration,
    ) -> HeldLoad {
        let (tx, rx) = mpsc::channel();
        let (db2, t2) = (db.clone(), t.clone());
        let thread = std::thread::spawn(move || {
            let rows = (0..n).map(move |i| {
                if i == hold_at {
                    tx.send(db2.failpoint("bulk.leaf")).unwrap();
                }
                row(i)
            });
            t2.bulk_load(rows)
        });
        let hold = rx
            .recv_timeout(wait)
            .expect("the load never reached the row that arms `bulk.leaf`");
        assert!(
            hold.wait_held(wait),
            "the load was never held at `bulk.leaf`"
        );
        HeldLoad { thread, hold, wait }
    }

    /// Release the load and wait (at most the start's `wait`) for its
    /// result.
    pub fn finish(self) -> keel::Result<u64> {
        self.hold.release();
        let deadline = Instant::now() + self.wait;
        while !self.thread.is_finished() {
            assert!(Instant::now() < deadline, "the released load never ended");
            std::thread::sleep(Duration::from_millis(1));
        }
        self.thread.join().unwrap()
    }
}
