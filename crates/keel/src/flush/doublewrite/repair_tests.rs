//! The doublewrite areas repair torn in-place page writes, and only those.

use std::path::PathBuf;
use std::sync::Arc;

use crate::flush::doublewrite::{file_name, Doublewrite, Geometry};
use crate::io::faulty::CrashMode;
use crate::io::{AlignedBuf, FaultyFs, FileSystem, OpenMode};
use crate::metrics::Metrics;
use crate::page::{
    init_page, page_lsn, set_page_lsn, stamp_checksum, verify_page, PageId, PageType,
};
use crate::space::Tablespace;
use crate::Error;

const PS: usize = 4096;

fn geometry(areas: usize, pages_per_area: usize) -> Geometry {
    Geometry {
        files: 2,
        areas,
        pages_per_area,
        page_size: PS,
    }
}

struct Db {
    _dir: tempfile::TempDir,
    ps: usize,
    path: PathBuf,
    fs: Arc<FaultyFs>,
    space: Tablespace,
    metrics: Arc<Metrics>,
}

impl Db {
    /// Data files in memory, created as a database's are (`data-0`'s
    /// header written last).
    fn new() -> Db {
        Db::with_page_size(PS)
    }

    fn with_page_size(ps: usize) -> Db {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFs::new());
        let metrics = Arc::new(Metrics::default());
        let space = Tablespace::create(&*fs, dir.path(), ps, 2, metrics.clone()).unwrap();
        space.finish_creation().unwrap();
        Db {
            path: dir.path().to_owned(),
            _dir: dir,
            ps,
            fs,
            space,
            metrics,
        }
    }

    fn dblwr(&self, g: Geometry) -> crate::Result<Doublewrite> {
        let id = self.space.creation_id();
        Doublewrite::open_or_create(&*self.fs, &self.path, g, id, self.metrics.clone())
    }

    fn id(&self, page_no: u32) -> PageId {
        PageId::new(self.space.space_id(), page_no)
    }

    fn write_in_place(&self, page: &[u8]) {
        let (file, offset) = self.space.locate(crate::page::page_id(page).page_no);
        self.space.write_run(file, offset, page).unwrap();
    }

    fn read(&self, page_no: u32) -> AlignedBuf {
        let mut buf = AlignedBuf::new(self.ps);
        assert!(self.space.read_page_raw(page_no, &mut buf).unwrap());
        buf
    }

    /// Overwrite the first half of a page in the durable image: a torn write.
    fn tear(&self, page_no: u32) {
        let (file, offset) = self.space.locate(page_no);
        let path = self.space.file_path(file);
        self.fs
            .write_durable(path, offset, &vec![0x5a; self.ps / 2])
            .unwrap();
    }

    /// Make the data files' names visible on the real disk, where
    /// `Tablespace::open` still looks for them (it bypasses `FileSystem`).
    fn placeholders(&self) {
        for i in 0..self.space.n_files() {
            std::fs::File::create(self.space.file_path(i)).unwrap();
        }
    }
}

fn page(id: PageId, lsn: u64, fill: u8) -> AlignedBuf {
    sized_page(id, lsn, fill, PS)
}

fn sized_page(id: PageId, lsn: u64, fill: u8, ps: usize) -> AlignedBuf {
    let mut p = AlignedBuf::new(ps);
    init_page(&mut p, id, PageType::BtreeLeaf);
    p[64..ps - 64].fill(fill);
    set_page_lsn(&mut p, lsn);
    stamp_checksum(&mut p);
    p
}

fn batch(pages: &[AlignedBuf]) -> Vec<(PageId, &[u8])> {
    pages
        .iter()
        .map(|p| (crate::page::page_id(p), &p[..]))
        .collect()
}

#[test]
fn torn_page_is_restored_from_its_copy() {
    let db = Db::new();
    let mut dw = db.dblwr(geometry(3, 8)).unwrap();
    let v1: Vec<_> = (1..=5).map(|n| page(db.id(n), 10, 1)).collect();
    v1.iter().for_each(|p| db.write_in_place(p));
    db.space.sync().unwrap();
    let v2: Vec<_> = (1..=5).map(|n| page(db.id(n), 20, 2)).collect();
    {
        let mut area = dw.claim().unwrap();
        area.write_and_sync(&batch(&v2), false).unwrap();
        v2.iter().for_each(|p| db.write_in_place(p));
        db.space.sync().unwrap();
    }
    assert_eq!(db.metrics.get("dblwr_writes"), Some(1));
    assert_eq!(db.metrics.get("dblwr_pages_written"), Some(5));
    // The files' headers (a page-size block each, written when they were
    // formatted), the area's header blocks and the 5 copies, as written.
    let g = geometry(3, 8);
    assert_eq!(
        db.metrics.get("dblwr_written_bytes"),
        Some(((g.files + g.header_blocks() + 5) * g.page_size) as u64)
    );
    db.tear(3);
    assert!(verify_page(&db.read(3), db.id(3)).is_err());

    let report = dw.repair_torn_pages(&*db.fs, &db.space).unwrap();
    assert_eq!(report.pages_restored, vec![db.id(3)], "{report}");
    assert_eq!((report.pages_checked, report.areas_scanned), (5, 1));
    assert_eq!(report.areas_empty, 2);
    for (n, want) in (1..=5).zip(&v2) {
        assert_eq!(&db.read(n)[..], &want[..], "page {n}");
    }
    // The repair is durable.
    let (file, offset) = db.space.locate(3);
    let image = db.fs.durable_image(db.space.file_path(file)).unwrap();
    let at = offset as usize;
    assert_eq!(&image[at..at + PS], &v2[2][..]);
}

#[test]
fn valid_in_place_page_is_never_overwritten_by_an_older_copy() {
    let db = Db::new();
    let mut dw = db.dblwr(geometry(2, 4)).unwrap();
    let old = page(db.id(9), 10, 1);
    dw.claim()
        .unwrap()
        .write_and_sync(&batch(&[old]), false)
        .unwrap();
    // A later batch wrote the page in place without doublewrite.
    let newer = page(db.id(9), 30, 3);
    db.write_in_place(&newer);
    db.space.sync().unwrap();

    let report = dw.repair_torn_pages(&*db.fs, &db.space).unwrap();
    assert!(report.pages_restored.is_empty(), "{report}");
    assert_eq!(report.pages_checked, 1);
    assert_eq!(&db.read(9)[..], &newer[..]);
}

#[test]
fn newest_valid_copy_wins_and_sequence_numbers_survive_reopen() {
    let db = Db::new();
    let g = geometry(3, 4);
    {
        let dw = db.dblwr(g).unwrap();
        dw.claim()
            .unwrap()
            .write_and_sync(&batch(&[page(db.id(7), 20, 2)]), false)
            .unwrap();
    }
    let mut dw = db.dblwr(g).unwrap();
    let _first = dw.claim().unwrap(); // area 0 keeps the LSN-20 copy
    let newest = page(db.id(7), 30, 3);
    dw.claim()
        .unwrap()
        .write_and_sync(&batch(std::slice::from_ref(&newest)), false)
        .unwrap();
    drop(_first);
    db.tear(7); // never written in place: tearing extends the file
    let report = dw.repair_torn_pages(&*db.fs, &db.space).unwrap();
    assert_eq!(report.pages_restored, vec![db.id(7)]);
    assert_eq!(page_lsn(&db.read(7)), 30);

    // Tear the newest copy's slot too: the older valid copy is used.
    let mut dw = db.dblwr(g).unwrap();
    let slot = PS as u64 + PS as u64; // file 1, area 1: after the file and area headers
    db.fs
        .write_durable(&db.path.join(file_name(1)), slot + 100, &[0xee; 64])
        .unwrap();
    db.tear(7);
    let report = dw.repair_torn_pages(&*db.fs, &db.space).unwrap();
    assert_eq!(report.pages_restored, vec![db.id(7)]);
    assert_eq!(report.copies_rejected, 1);
    assert_eq!(page_lsn(&db.read(7)), 20);
}

#[test]
fn page_past_the_end_of_its_file_is_restored() {
    let db = Db::new();
    let mut dw = db.dblwr(geometry(2, 4)).unwrap();
    let far = page(db.id(5000), 40, 4);
    dw.claim()
        .unwrap()
        .write_and_sync(&batch(std::slice::from_ref(&far)), false)
        .unwrap();
    let mut buf = AlignedBuf::new(PS);
    assert!(!db.space.read_page_raw(5000, &mut buf).unwrap());
    let report = dw.repair_torn_pages(&*db.fs, &db.space).unwrap();
    assert_eq!(report.pages_restored, vec![db.id(5000)]);
    assert_eq!(&db.read(5000)[..], &far[..]);
}

#[test]
fn corrupt_area_header_is_skipped_and_reported() {
    let db = Db::new();
    let mut dw = db.dblwr(geometry(2, 4)).unwrap();
    dw.claim()
        .unwrap()
        .write_and_sync(&batch(&[page(db.id(4), 10, 1)]), false)
        .unwrap();
    db.tear(4);
    // Area 0 is the first area of dblwr-0, right after the file header.
    let dblwr0 = db.path.join(file_name(0));
    db.fs
        .write_durable(&dblwr0, PS as u64 + 24, &[0xff])
        .unwrap();

    let report = dw.repair_torn_pages(&*db.fs, &db.space).unwrap();
    assert!(report.pages_restored.is_empty());
    assert_eq!(report.areas_skipped.len(), 1, "{report}");
    let skipped = &report.areas_skipped[0];
    assert_eq!((skipped.area, &skipped.path), (0, &dblwr0));
    assert!(skipped.reason.contains("checksum"), "{}", skipped.reason);
    assert!(report.to_string().contains("1 skipped"), "{report}");
}

#[test]
fn mismatched_creation_id_is_an_error_naming_the_file() {
    let db = Db::new();
    drop(db.dblwr(geometry(2, 4)).unwrap());
    let other = db.space.creation_id() ^ 1;
    let err =
        Doublewrite::open_or_create(&*db.fs, &db.path, geometry(2, 4), other, db.metrics.clone())
            .err()
            .unwrap();
    let Error::BadFile { path, reason } = &err else {
        panic!("{err}")
    };
    assert_eq!(path, &db.path.join(file_name(0)));
    assert!(reason.contains("another database"), "{err}");
}

#[test]
fn geometry_change_takes_effect_after_repair() {
    let db = Db::new();
    let dw = db.dblwr(geometry(2, 4)).unwrap();
    let p = page(db.id(2), 10, 1);
    dw.claim()
        .unwrap()
        .write_and_sync(&batch(std::slice::from_ref(&p)), false)
        .unwrap();
    drop(dw);
    db.tear(2);
    let wanted = Geometry {
        files: 1,
        areas: 3,
        pages_per_area: 300, // two header blocks at 4 KiB
        page_size: PS,
    };
    let mut dw = db.dblwr(wanted).unwrap();
    assert_eq!(dw.geometry(), geometry(2, 4), "old copies stay usable");
    let report = dw.repair_torn_pages(&*db.fs, &db.space).unwrap();
    assert_eq!(report.pages_restored, vec![db.id(2)]);
    assert!(report.reformatted);
    assert_eq!(dw.geometry(), wanted);
    let many: Vec<_> = (100..400).map(|n| page(db.id(n), 50, 5)).collect();
    dw.claim()
        .unwrap()
        .write_and_sync(&batch(&many), false)
        .unwrap();
    many.iter().for_each(|p| db.write_in_place(p));
    db.space.sync().unwrap();
    drop(dw);

    let mut dw = db.dblwr(wanted).unwrap();
    assert_eq!(dw.geometry(), wanted);
    let dblwr1 = db
        .fs
        .open(&db.path.join(file_name(1)), OpenMode::Existing)
        .unwrap();
    assert_eq!(
        dblwr1.len().unwrap(),
        0,
        "a file beyond the new count is emptied"
    );
    db.tear(250);
    let report = dw.repair_torn_pages(&*db.fs, &db.space).unwrap();
    assert_eq!(report.pages_restored, vec![db.id(250)], "{report}");
    assert!(!report.reformatted);
}

#[test]
fn blank_first_file_is_formatted_afresh() {
    let db = Db::new();
    // A crash right after creating dblwr-0, before its header was synced.
    db.fs
        .open(&db.path.join(file_name(0)), OpenMode::CreateNew)
        .unwrap();
    let dw = db.dblwr(geometry(2, 4)).unwrap();
    assert_eq!(dw.geometry(), geometry(2, 4));
    assert!(db.fs.exists(&db.path.join(file_name(1))));
}

#[test]
fn claim_waits_for_a_free_area() {
    let db = Db::new();
    let dw = db.dblwr(geometry(1, 2)).unwrap();
    let held = dw.claim().unwrap();
    assert!(dw.try_claim().is_none());
    std::thread::scope(|s| {
        let waiter = s.spawn(|| dw.claim().unwrap().area());
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!waiter.is_finished());
        drop(held);
        assert_eq!(waiter.join().unwrap(), 0);
    });
}

/// The protocol end to end against power loss: area synced, in-place writes
/// of 16 KiB pages not synced, crash with torn 4 KiB sectors; after repair
/// every page verifies and is the old or the new version, never a mix.
#[test]
fn crash_during_in_place_writes_is_repaired() {
    const BIG: usize = 16384;
    let mut restored = 0;
    for seed in 0..12 {
        let db = Db::with_page_size(BIG);
        let g = Geometry {
            page_size: BIG,
            ..geometry(2, 8)
        };
        let dw = db.dblwr(g).unwrap();
        let old: Vec<_> = (10..18).map(|n| sized_page(db.id(n), 10, 1, BIG)).collect();
        old.iter().for_each(|p| db.write_in_place(p));
        db.space.sync().unwrap();
        let new: Vec<_> = (10..18).map(|n| sized_page(db.id(n), 20, 2, BIG)).collect();
        let mut area = dw.claim().unwrap();
        area.write_and_sync(&batch(&new), false).unwrap();
        let run: Vec<u8> = new.iter().flat_map(|p| p.iter().copied()).collect();
        let (file, offset) = db.space.locate(10);
        db.space.write_run(file, offset, &run).unwrap();
        db.fs.crash(CrashMode::Torn { seed });
        drop(area);
        assert!(db.space.sync().is_err(), "old handles are dead");

        db.placeholders();
        let space = Tablespace::open(&*db.fs, &db.path, BIG, 2, db.metrics.clone()).unwrap();
        let mut dw = db.dblwr(g).unwrap();
        let report = dw.repair_torn_pages(&*db.fs, &space).unwrap();
        restored += report.pages_restored.len();
        for (k, n) in (10..18).enumerate() {
            let mut buf = AlignedBuf::new(BIG);
            assert!(space.read_page_raw(n, &mut buf).unwrap());
            assert_eq!(verify_page(&buf, db.id(n)), Ok(()), "seed {seed} page {n}");
            assert!(
                buf[..] == new[k][..] || buf[..] == old[k][..],
                "seed {seed} page {n}: {report}"
            );
        }
    }
    assert!(restored > 20, "only {restored} torn pages in 12 crashes");
}

/// `detect_only`: a batch writes its area header alone (one 4 KiB block
/// for 5 entries, where `on` writes the header blocks and 5 copies), a
/// torn page it lists fails the repair with `Error::TornPage` naming the
/// page and its file, and the pages that are not torn are left as they
/// are. The bytes per page written to the doublewrite, in both modes,
/// are what `dblwr_written_bytes` counts.
#[test]
fn detect_only_writes_headers_alone_and_reports_a_torn_page() {
    let db = Db::with_page_size(16384);
    let g = Geometry {
        page_size: 16384,
        ..geometry(3, 128)
    };
    let pages = |lsn, fill| -> Vec<AlignedBuf> {
        (1..=128)
            .map(|n| sized_page(db.id(n), lsn, fill, 16384))
            .collect()
    };
    let mut per_page = Vec::new();
    for (images, lsn) in [(true, 10), (false, 20)] {
        let mut dw = db.dblwr(g).unwrap();
        dw.set_page_images(images);
        let before = db.metrics.get("dblwr_written_bytes").unwrap();
        let v = pages(lsn, lsn as u8);
        dw.claim()
            .unwrap()
            .write_and_sync(&batch(&v), false)
            .unwrap();
        v.iter().for_each(|p| db.write_in_place(p));
        db.space.sync().unwrap();
        per_page.push((db.metrics.get("dblwr_written_bytes").unwrap() - before) / 128);
    }
    // on: one 16 KiB header block and 128 copies; detect_only: 4 KiB.
    assert_eq!(per_page, [(129 * 16384) / 128, 4096 / 128]);
    assert_eq!(db.metrics.get("dblwr_pages_written"), Some(256));

    db.tear(7);
    let mut dw = db.dblwr(g).unwrap();
    let err = dw.repair_torn_pages(&*db.fs, &db.space).unwrap_err();
    let msg = err.to_string();
    match &err {
        Error::TornPage { page, path, .. } => {
            assert_eq!(*page, db.id(7));
            assert_eq!(path, db.space.file_path(db.space.locate(7).0));
        }
        other => panic!("not a TornPage error: {other}"),
    }
    assert!(
        msg.contains("detect_only") && msg.contains("LSN 20"),
        "{msg}"
    );
    // Not repaired from the older `on` copy (LSN 10) in the other area.
    assert!(verify_page(&db.read(7), db.id(7)).is_err());
    for n in [1, 6, 8, 128] {
        let p = db.read(n);
        assert_eq!(verify_page(&p, db.id(n)), Ok(()));
        assert_eq!(page_lsn(&p), 20, "page {n}");
    }
    // Nothing torn: the repair passes, touching nothing.
    let good = sized_page(db.id(7), 20, 20, 16384);
    db.write_in_place(&good);
    db.space.sync().unwrap();
    let report = dw.repair_torn_pages(&*db.fs, &db.space).unwrap();
    assert!(report.pages_restored.is_empty() && report.torn_detected.is_empty());
    assert_eq!(report.pages_checked, 128);
}

/// Switching modes between opens. A crash under `on` is repaired from
/// its copies whatever the next open's mode (here: a `Doublewrite` set for
/// entries only, as `detect_only` opens it). And a page whose newest
/// listing is in an entries-only area is never "repaired" from an older
/// `on` copy: that copy is older than the write that tore the page.
#[test]
fn copies_from_another_mode_are_used_and_stale_ones_never() {
    let db = Db::new();
    let g = geometry(2, 4);
    let v1: Vec<_> = (1..=4).map(|n| page(db.id(n), 10, 1)).collect();
    {
        let dw = db.dblwr(g).unwrap();
        dw.claim()
            .unwrap()
            .write_and_sync(&batch(&v1), false)
            .unwrap();
    }
    v1.iter().for_each(|p| db.write_in_place(p));
    db.tear(2);
    // Opened for detect_only: the `on` copy still repairs page 2.
    let mut dw = db.dblwr(g).unwrap();
    dw.set_page_images(false);
    let report = dw.repair_torn_pages(&*db.fs, &db.space).unwrap();
    assert_eq!(report.pages_restored, vec![db.id(2)], "{report}");
    for (n, want) in (1..=4).zip(&v1) {
        assert_eq!(&db.read(n)[..], &want[..], "page {n}");
    }
    // Pages 1 and 2 written again under detect_only, into the other area
    // (area 0 stays claimed, its `on` copies of LSN 10 intact); page 1's
    // write is torn.
    let v2: Vec<_> = (1..=2).map(|n| page(db.id(n), 30, 3)).collect();
    {
        let _keep_area_0 = dw.claim().unwrap();
        let mut area = dw.claim().unwrap();
        assert_eq!(area.area(), 1);
        area.write_and_sync(&batch(&v2), false).unwrap();
    }
    v2.iter().for_each(|p| db.write_in_place(p));
    db.tear(1);
    for images in [false, true] {
        // Whatever the mode of the open.
        let mut dw = db.dblwr(g).unwrap();
        dw.set_page_images(images);
        let err = dw.repair_torn_pages(&*db.fs, &db.space).unwrap_err();
        assert!(
            matches!(&err, Error::TornPage { page, .. } if *page == db.id(1)),
            "{err}"
        );
        assert!(err.to_string().contains("LSN 30"), "{err}");
        assert!(
            verify_page(&db.read(1), db.id(1)).is_err(),
            "page 1 was rewritten"
        );
        assert_eq!(
            &db.read(2)[..],
            &v2[1][..],
            "page 2 is untorn and untouched"
        );
    }
}

/// `off` and `atomic` remove the files once recovery has used them, so
/// that no copy can go stale while pages are written without one.
#[test]
fn files_removed_after_use_leave_no_stale_copy() {
    let db = Db::new();
    let g = geometry(2, 4);
    let dw = db.dblwr(g).unwrap();
    dw.claim()
        .unwrap()
        .write_and_sync(&batch(&[page(db.id(1), 10, 1)]), false)
        .unwrap();
    dw.remove_files(&*db.fs).unwrap();
    for i in 0..2 {
        assert!(!db.fs.exists(&db.path.join(file_name(i))), "dblwr-{i}");
    }
    assert!(db.fs.unsynced_dir_entries().is_empty());
    // A later open formats afresh: no area holds anything.
    let mut dw = db.dblwr(g).unwrap();
    db.write_in_place(&page(db.id(1), 40, 4));
    db.space.sync().unwrap();
    db.tear(1);
    let report = dw.repair_torn_pages(&*db.fs, &db.space).unwrap();
    assert_eq!((report.areas_empty, report.pages_checked), (2, 0));
}

/// A 16 KiB page of pseudo-random digits (as the OLTP rows' strings) over
/// its first 12 KiB: zstd stores it in two or three blocks.
fn digits_page(id: PageId, lsn: u64, seed: u64) -> AlignedBuf {
    const BIG: usize = 16384;
    let mut p = AlignedBuf::new(BIG);
    init_page(&mut p, id, PageType::BtreeLeaf);
    let mut x = seed | 1;
    for b in &mut p[64..12 * 1024] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = b'0' + (x % 10) as u8;
    }
    set_page_lsn(&mut p, lsn);
    stamp_checksum(&mut p);
    p
}

/// `page_compression = zstd`: a page stored compressed over two blocks or
/// more, whose write tore after its first block (the rest of the slot
/// still the older image's), fails its checksum when read, reads back as
/// the torn bytes (which no page check accepts), and is restored from its
/// doublewrite copy, compressed again.
#[test]
fn a_torn_compressed_image_is_restored_from_its_copy() {
    use crate::page::compress::{is_compressed, STORED_BLOCK};
    const BIG: usize = 16384;
    let db = Db::with_page_size(BIG);
    db.space.set_page_compression(true);
    let g = Geometry {
        page_size: BIG,
        ..geometry(2, 4)
    };
    let mut dw = db.dblwr(g).unwrap();
    let v1 = digits_page(db.id(3), 10, 1);
    db.write_in_place(&v1);
    db.space.sync().unwrap();
    let written = db.metrics.get("os_data_written_bytes").unwrap();
    assert_eq!(db.metrics.get("num_pages_page_compressed"), Some(1));
    assert!(
        written >= 2 * STORED_BLOCK as u64 && written < BIG as u64,
        "stored in {written} bytes"
    );
    assert_eq!(
        db.metrics.get("page_compression_saved"),
        Some(BIG as u64 - written)
    );
    assert_eq!(&db.read(3)[..], &v1[..]);

    let v2 = digits_page(db.id(3), 20, 2);
    dw.claim()
        .unwrap()
        .write_and_sync(std::slice::from_ref(&(db.id(3), &v2[..])), false)
        .unwrap();
    db.write_in_place(&v2);
    db.space.sync().unwrap();
    // Torn: the second block is still v1's image.
    let (file, offset) = db.space.locate(3);
    let path = db.space.file_path(file).to_owned();
    let mut v1_image = AlignedBuf::new(BIG);
    assert!(crate::page::compress::encode(&v1, &mut v1_image).is_some());
    db.fs
        .write_durable(
            &path,
            offset + STORED_BLOCK as u64,
            &v1_image[STORED_BLOCK..2 * STORED_BLOCK],
        )
        .unwrap();
    let raw = db.read(3);
    assert!(is_compressed(&raw), "left as read");
    assert!(verify_page(&raw, db.id(3)).is_err());
    let mut buf = AlignedBuf::new(BIG);
    let err = db.space.read_page(db.id(3), &mut buf).unwrap_err();
    assert!(
        matches!(&err, Error::CorruptPage { .. }) && err.to_string().contains("checksum"),
        "{err}"
    );

    let report = dw.repair_torn_pages(&*db.fs, &db.space).unwrap();
    assert_eq!(report.pages_restored, vec![db.id(3)], "{report}");
    assert_eq!(&db.read(3)[..], &v2[..]);
    db.space.read_page(db.id(3), &mut buf).unwrap();
    assert_eq!(&buf[..], &v2[..]);
    let image = db.fs.durable_image(&path).unwrap();
    assert!(
        is_compressed(&image[offset as usize..]),
        "written compressed again"
    );
}
