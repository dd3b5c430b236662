//! The doublewrite areas (InnoDB 8.0.20+'s parallel doublewrite).
//!
//! Before a batch of pages is written in place, the whole batch is written to
//! a doublewrite *area* and synced; then the pages are written in place; the
//! data files are synced; only then is the area reused. A crash can tear an
//! in-place write (part of a page old, part new: a bad checksum) but never
//! both copies, so at recovery [`Doublewrite::repair_torn_pages`] restores
//! every torn page from its copy before redo runs.
//!
//! Areas are spread round-robin over the files `dblwr-{i}.keel`: area `a` is
//! local area `a / files` of file `a % files`. Each file starts with a header
//! block; each area is its header blocks (one page-size block unless the
//! entries need more) followed by `pages_per_area` page slots. The byte
//! layout is in `format` and `docs/format.md` ("Doublewrite files").
//!
//! Which areas are free, claimed or set aside after a failed write, and
//! how a batch waits for one: [`areas`].
//!
//! Crash safety of the files themselves: they are formatted with every file
//! but `dblwr-0` first and `dblwr-0`'s header written and synced last, after
//! `dblwr-0` was made blank and every file allocated whole (a full disk
//! fails the format, never a batch) and the directory synced; a blank
//! `dblwr-0` (or none) means "no copies, format afresh", and a valid one
//! means the whole set is complete.
//!
//! # Modes (`doublewrite`)
//! What is written when, what a crash at each moment leaves, and what
//! recovery can repair:
//!
//! - **`on`**: per batch, one write of the area header (page ids, page
//!   LSNs, magic `KEELDBLW`) and every page image, then a sync of the
//!   area; then the in-place writes; then the data files' sync; then the
//!   area is free. A crash before the area's sync leaves the in-place
//!   pages untouched (a torn area is skipped, or its slots fail their
//!   checks); a crash after it can tear in-place pages, each of which has
//!   its copy: recovery repairs every torn page.
//! - **`detect_only`** (InnoDB 8.0.30's `DETECT_ONLY`): the same steps,
//!   but the area write is the header alone, in whole 4 KiB blocks, under
//!   magic `KEELDBLE`; the slots keep whatever an earlier batch left
//!   there and are never read. A crash after the header's sync can tear
//!   in-place pages, which the header lists: recovery *detects* such a
//!   page (bad checksum) and fails with [`Error::TornPage`] naming it and
//!   its file, rather than open on a corrupt page; it repairs nothing
//!   written under this mode. A page whose write was lost whole (all
//!   zeros, past the end) is not torn: redo rebuilds it, as without
//!   doublewrite.
//! - **`atomic`** and **`off`**: no area is written. Under `atomic` the
//!   engine has checked that the data device promises untorn page writes
//!   (`Tablespace::atomic_write_unit`) and writes each page with
//!   `RWF_ATOMIC`, so no crash tears one; under `off` a torn page is
//!   neither repaired nor detected here (redo meets it, or a later read).
//!
//! ## Switching modes between opens
//! Recovery runs before the new mode applies and uses whatever the areas
//! hold, written under any mode: a crash under `on` is repaired from its
//! copies by an open under `detect_only`, `atomic` or `off`. A page's
//! listings are tried newest batch first, and the search stops at an
//! entries-only listing: that write may have torn the page, and an older
//! copy (from an `on` batch before a switch) is older than it, so
//! restoring it would silently drop the changes the checkpoint already
//! relies on. `off` and `atomic` then remove the files
//! ([`Doublewrite::remove_files`]), so that no copy goes stale while pages
//! are written without one; the next open under `on` or `detect_only`
//! formats them afresh.

mod areas;
mod files;
mod format;
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod repair_tests;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::io::{AlignedBuf, Device, FileSystem, OpenMode, IO_ALIGN};
use crate::metrics::Metrics;
use crate::page::{page_id, page_lsn, verify_page, PageId, MAX_PAGE_SIZE, MIN_PAGE_SIZE};
use crate::space::Tablespace;
use files::{bad_file, format_files, open_files, read_file_header};
pub use format::{area_header_len, AreaHeader, Entry, FileHeader};

/// Name of doublewrite file `i` inside the database directory.
pub fn file_name(i: usize) -> String {
    format!("dblwr-{i}.keel")
}

/// How the areas are laid out: fixed when the files are formatted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Number of doublewrite files (`doublewrite_files`).
    pub files: usize,
    /// Number of areas: one per concurrent batch writer.
    pub areas: usize,
    /// Page slots per area (`doublewrite_pages`).
    pub pages_per_area: usize,
    /// Page size in bytes.
    pub page_size: usize,
}

impl Geometry {
    fn validate(&self) -> Result<()> {
        if !(MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&self.page_size)
            || !self.page_size.is_power_of_two()
        {
            return Err(Error::config(
                "page_size",
                "must be a power of two in 4096..=65536",
            ));
        }
        if self.files == 0 || self.files > 1024 {
            return Err(Error::config("doublewrite_files", "must be 1..=1024"));
        }
        if self.pages_per_area == 0 || self.pages_per_area > 65536 {
            return Err(Error::config("doublewrite_pages", "must be 1..=65536"));
        }
        if self.areas == 0 || self.areas > 65536 {
            return Err(Error::config(
                "doublewrite",
                format!("{} areas: need 1..=65536", self.areas),
            ));
        }
        Ok(())
    }

    fn areas_in_file(&self, file: usize) -> usize {
        (self.areas + self.files - 1 - file) / self.files
    }

    /// Page-size blocks of an area header holding `pages_per_area` entries.
    fn header_blocks(&self) -> usize {
        area_header_len(self.pages_per_area).div_ceil(self.page_size)
    }

    fn area_bytes(&self) -> u64 {
        ((self.header_blocks() + self.pages_per_area) * self.page_size) as u64
    }

    fn file_len(&self, file: usize) -> u64 {
        self.page_size as u64 + self.areas_in_file(file) as u64 * self.area_bytes()
    }

    /// (file, byte offset) of area `area`'s first header block.
    fn area_location(&self, area: usize) -> (usize, u64) {
        let local = (area / self.files) as u64;
        (
            area % self.files,
            self.page_size as u64 + local * self.area_bytes(),
        )
    }

    fn slot_offset(&self, area: usize, slot: usize) -> (usize, u64) {
        let (file, offset) = self.area_location(area);
        let skip = (self.header_blocks() + slot) * self.page_size;
        (file, offset + skip as u64)
    }
}

struct DwFile {
    dev: Arc<dyn Device>,
    path: PathBuf,
}

/// The doublewrite files of one database, and which areas are free.
pub struct Doublewrite {
    dir: PathBuf,
    /// The geometry the files have on disk.
    geometry: Geometry,
    /// Asked for at open but different from the files': applied by the
    /// next repair, once no copy is needed any more.
    wanted: Option<Geometry>,
    creation_id: u64,
    files: Vec<DwFile>,
    areas: Mutex<areas::Areas>,
    freed: Condvar,
    next_seq: AtomicU64,
    metrics: Arc<Metrics>,
    /// Whether batches write their page images (`on`) or the area header
    /// alone (`detect_only`).
    images: bool,
}

/// An area claimed by one batch writer; dropping it frees the area.
pub struct AreaGuard<'a> {
    dw: &'a Doublewrite,
    area: usize,
}

/// An area whose header failed its checks: its copies were not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedArea {
    /// The doublewrite file.
    pub path: PathBuf,
    /// The area's index over all files.
    pub area: usize,
    /// What was wrong.
    pub reason: String,
}

/// A torn page that the doublewrite lists without a copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DetectedTorn {
    /// The page.
    pub page: PageId,
    /// The data file that holds it.
    pub path: PathBuf,
    /// The entries-only area that lists its last write, and that write's LSN.
    pub area: usize,
    /// The page LSN the write carried.
    pub lsn: u64,
}

/// What [`Doublewrite::repair_torn_pages`] did, for the recovery report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepairReport {
    /// Areas with a valid header whose copies were considered.
    pub areas_scanned: usize,
    /// Areas never written.
    pub areas_empty: usize,
    /// Areas with a corrupt header (a torn area write, normally): skipped.
    pub areas_skipped: Vec<SkippedArea>,
    /// Distinct pages with a copy, read in place and verified.
    pub pages_checked: usize,
    /// Copies tried for a torn page that failed verification or did not
    /// match their header entry (torn or stale slots).
    pub copies_rejected: usize,
    /// Pages restored in place from a copy, in page order.
    pub pages_restored: Vec<PageId>,
    /// Torn pages whose newest listing is in an entries-only area
    /// (`detect_only`): their last write kept no copy, so they are
    /// detected, not repaired ([`Doublewrite::repair_torn_pages`] then
    /// fails with [`Error::TornPage`]).
    pub torn_detected: Vec<DetectedTorn>,
    /// The files were reformatted to the geometry asked for at open.
    pub reformatted: bool,
}

impl fmt::Display for RepairReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "doublewrite: {} areas scanned, {} empty, {} skipped; {} pages checked, {} restored, \
             {} torn without a copy",
            self.areas_scanned,
            self.areas_empty,
            self.areas_skipped.len(),
            self.pages_checked,
            self.pages_restored.len(),
            self.torn_detected.len()
        )?;
        for s in &self.areas_skipped {
            write!(
                f,
                "; skipped area {} of {}: {}",
                s.area,
                s.path.display(),
                s.reason
            )?;
        }
        Ok(())
    }
}

impl Doublewrite {
    /// Open the doublewrite files in `dir`, or format them if there are none
    /// (or `dblwr-0` is blank: an interrupted format). Files of another
    /// database (`creation_id` differs) or of another page size are an
    /// error naming the file. If the files have another geometry than
    /// `geometry`, they keep theirs until [`Self::repair_torn_pages`] has
    /// used their copies, which then reformats them.
    pub fn open_or_create(
        fs: &dyn FileSystem,
        dir: &Path,
        geometry: Geometry,
        creation_id: u64,
        metrics: Arc<Metrics>,
    ) -> Result<Doublewrite> {
        geometry.validate()?;
        let path0 = dir.join(file_name(0));
        let found = if fs.exists(&path0) {
            let dev = fs
                .open(&path0, OpenMode::Existing)
                .map_err(|e| Error::io(&path0, "open", e))?;
            read_file_header(&*dev, &path0, geometry.page_size)?.map(|h| (dev, h))
        } else {
            None
        };
        let Some((dev0, h0)) = found else {
            let files = format_files(fs, dir, &geometry, creation_id, &metrics)?;
            return Ok(Self::new(dir, geometry, None, creation_id, files, metrics));
        };
        let disk = Geometry {
            files: h0.n_files as usize,
            areas: h0.n_areas as usize,
            pages_per_area: h0.pages_per_area as usize,
            page_size: geometry.page_size,
        };
        if let Err(e) = disk.validate() {
            return Err(bad_file(
                &path0,
                &format!("impossible geometry {disk:?}: {e}"),
            ));
        }
        let files = open_files(fs, dir, &disk, (dev0, h0), creation_id)?;
        let wanted = (disk != geometry).then_some(geometry);
        if wanted.is_some() {
            log::info!(
                "{}: doublewrite files have {disk:?}; {geometry:?} takes effect after recovery",
                dir.display()
            );
        }
        let dw = Self::new(dir, disk, wanted, creation_id, files, metrics);
        let newest = (0..disk.areas)
            .filter_map(|a| dw.read_area_header(a).ok().flatten())
            .map(|h| h.seq)
            .max()
            .unwrap_or(0);
        dw.next_seq.store(newest + 1, Ordering::Relaxed);
        Ok(dw)
    }

    fn new(
        dir: &Path,
        geometry: Geometry,
        wanted: Option<Geometry>,
        creation_id: u64,
        files: Vec<DwFile>,
        metrics: Arc<Metrics>,
    ) -> Doublewrite {
        Doublewrite {
            dir: dir.to_owned(),
            geometry,
            wanted,
            creation_id,
            files,
            areas: Mutex::new(areas::Areas::new(geometry.areas)),
            freed: Condvar::new(),
            next_seq: AtomicU64::new(1),
            metrics,
            images: true,
        }
    }

    /// Write the pages' images with each batch (`doublewrite = on`, the
    /// default) or only the area header, which lists them
    /// (`detect_only`). Either way the header is synced before the batch
    /// is written in place.
    pub fn set_page_images(&mut self, images: bool) {
        self.images = images;
    }

    /// Whether batches write their page images (see
    /// [`Doublewrite::set_page_images`]).
    pub fn page_images(&self) -> bool {
        self.images
    }

    /// Remove the files, `dblwr-0` first (a missing `dblwr-0` means "no
    /// copies"), and sync the directory: for a mode that writes no areas
    /// (`off`, `atomic`), once [`Self::repair_torn_pages`] has used them.
    /// Copies kept would go stale while pages are written without them,
    /// and a later open under `on` could then restore a torn page from a
    /// copy older than its last write, whose changes since the checkpoint
    /// no redo record brings back.
    pub fn remove_files(self, fs: &dyn FileSystem) -> Result<()> {
        let Doublewrite { dir, files, .. } = self;
        let paths: Vec<PathBuf> = files.into_iter().map(|f| f.path).collect();
        for path in &paths {
            fs.remove(path).map_err(|e| Error::io(path, "remove", e))?;
        }
        fs.sync_dir(&dir)
            .map_err(|e| Error::io(&dir, "sync directory", e))
    }

    /// Page slots per area: the largest batch one area takes.
    pub fn pages_per_area(&self) -> usize {
        self.geometry.pages_per_area
    }

    /// The geometry of the files as they are on disk.
    #[cfg(test)]
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Read and decode area `area`'s header: `Ok(None)` if never written,
    /// `Err(reason)` if corrupt or unreadable.
    fn read_area_header(&self, area: usize) -> Result<Option<AreaHeader>, String> {
        let g = &self.geometry;
        let (file, offset) = g.area_location(area);
        let mut buf = AlignedBuf::new(g.header_blocks() * g.page_size);
        self.files[file]
            .dev
            .read_at(&mut buf, offset)
            .map_err(|e| format!("cannot read the area header: {e}"))?;
        let h = AreaHeader::decode(&buf, g.pages_per_area)?;
        if let Some(h) = &h {
            if h.page_size as usize != g.page_size || h.area as usize != area {
                return Err(format!(
                    "header names area {} with page size {}, expected area {area} with {}",
                    h.area, h.page_size, g.page_size
                ));
            }
        }
        Ok(h)
    }

    /// Recovery, before redo: every page listed in a valid area is read in
    /// place; if it fails verification (torn, all zeros, past the end of
    /// its file) it is overwritten with its newest copy that verifies and
    /// matches its header entry. A valid in-place page is never touched.
    /// The listings of a page are tried newest first, and the search stops
    /// at an entries-only one (`detect_only`): that write may have reached
    /// the page in place, so every older copy may be older than the page
    /// (module doc, "Switching modes"). A torn page (bad checksum) whose
    /// search stopped there is *detected*: once the other pages are
    /// repaired and synced, this fails with [`Error::TornPage`] naming it.
    /// Any other page left unrepaired is for the caller to judge. Then
    /// every data file is synced (in-place writes of the previous run may
    /// still sit in a volatile cache, and reusing an area loses its copies)
    /// and, if the geometry changed, the files are reformatted. `fs` is the
    /// file system the files were opened with.
    pub fn repair_torn_pages(
        &mut self,
        fs: &dyn FileSystem,
        space: &Tablespace,
    ) -> Result<RepairReport> {
        let mut report = RepairReport::default();
        let copies = self.collect_copies(space.space_id(), &mut report);
        let ps = self.geometry.page_size;
        let mut in_place = AlignedBuf::new(ps);
        let mut copy = AlignedBuf::new(ps);
        for (id, mut candidates) in copies {
            report.pages_checked += 1;
            let present = space.read_page_raw(id.page_no, &mut in_place)?;
            let why = if !present {
                "past the end of its file (never written in place)"
            } else {
                match verify_page(&in_place, id) {
                    Ok(()) => continue,
                    Err(crate::page::PageCheckError::AllZero) => {
                        "all zeros (never written in place)"
                    }
                    Err(_) => "torn or corrupt",
                }
            };
            candidates.sort_by_key(|c| std::cmp::Reverse(c.seq));
            let mut restored = false;
            let mut no_copy = None;
            for c in candidates {
                if !c.images {
                    no_copy = Some(c);
                    break;
                }
                if !self.read_copy(c, &mut copy) || verify_page(&copy, id).is_err() {
                    report.copies_rejected += 1;
                    continue;
                }
                if page_lsn(&copy) != c.lsn {
                    report.copies_rejected += 1;
                    continue;
                }
                let (file, offset) = space.locate(id.page_no);
                space.write_run(file, offset, &copy)?;
                log::warn!(
                    "page {id} in {} was {why}; restored from doublewrite area {} (LSN {})",
                    space.file_path(file).display(),
                    c.area,
                    c.lsn
                );
                report.pages_restored.push(id);
                restored = true;
                break;
            }
            // A page never written in place (all zeros, past the end) is
            // redo's to rebuild or report, as without doublewrite.
            if let (false, Some(c), "torn or corrupt") = (restored, no_copy, why) {
                let path = space.file_path(space.locate(id.page_no).0).to_owned();
                log::error!(
                    "page {id} in {} is torn; its last write (LSN {}) is listed in \
                     entries-only doublewrite area {} (detect_only), which holds no copy",
                    path.display(),
                    c.lsn,
                    c.area
                );
                report.torn_detected.push(DetectedTorn {
                    page: id,
                    path,
                    area: c.area,
                    lsn: c.lsn,
                });
            }
        }
        for i in 0..space.n_files() {
            let path = space.file_path(i);
            let dev = fs
                .open(path, OpenMode::Existing)
                .map_err(|e| Error::io(path, "open", e))?;
            dev.sync().map_err(|e| Error::io(path, "sync", e))?;
        }
        if let Some(first) = report.torn_detected.first() {
            let others = report.torn_detected.len() - 1;
            return Err(Error::TornPage {
                page: first.page,
                path: first.path.clone(),
                reason: format!(
                    "its checksum fails: the write of LSN {} was torn by the crash, and it was \
                     made under doublewrite = detect_only, whose area {} lists the page but \
                     keeps no copy to repair it from{}. The database is not opened rather than \
                     run on a corrupt page; restore it from a backup (doublewrite = on repairs \
                     such pages)",
                    first.lsn,
                    first.area,
                    if others == 0 {
                        String::new()
                    } else {
                        format!(
                            "; {others} other torn pages too: {}",
                            report.torn_detected[1..]
                                .iter()
                                .map(|t| t.page.to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    }
                ),
            });
        }
        if let Some(wanted) = self.wanted.take() {
            self.files = format_files(fs, &self.dir, &wanted, self.creation_id, &self.metrics)?;
            self.geometry = wanted;
            *self.areas.get_mut() = areas::Areas::new(wanted.areas);
            self.next_seq.store(1, Ordering::Relaxed);
            report.reformatted = true;
        }
        Ok(report)
    }

    /// Every page copy named by a valid area header of space `space_id`.
    fn collect_copies(
        &self,
        space_id: u32,
        report: &mut RepairReport,
    ) -> BTreeMap<PageId, Vec<CopyRef>> {
        let mut copies: BTreeMap<PageId, Vec<CopyRef>> = BTreeMap::new();
        for area in 0..self.geometry.areas {
            match self.read_area_header(area) {
                Ok(None) => report.areas_empty += 1,
                Err(reason) => {
                    let path = self.files[self.geometry.area_location(area).0].path.clone();
                    log::warn!(
                        "doublewrite area {area} of {}: {reason}; skipped",
                        path.display()
                    );
                    report
                        .areas_skipped
                        .push(SkippedArea { path, area, reason });
                }
                Ok(Some(h)) => {
                    report.areas_scanned += 1;
                    for (slot, e) in h.entries.iter().enumerate() {
                        if e.id.space == space_id {
                            copies.entry(e.id).or_default().push(CopyRef {
                                seq: h.seq,
                                area,
                                slot,
                                lsn: e.lsn,
                                images: h.images,
                            });
                        }
                    }
                }
            }
        }
        copies
    }

    /// Read a copy's slot; false if it cannot be read.
    fn read_copy(&self, c: CopyRef, buf: &mut [u8]) -> bool {
        let (file, offset) = self.geometry.slot_offset(c.area, c.slot);
        self.files[file].dev.read_at(buf, offset).is_ok()
    }
}

/// Where one page copy is, and what its area header says about it.
#[derive(Clone, Copy, Debug)]
struct CopyRef {
    seq: u64,
    area: usize,
    slot: usize,
    lsn: u64,
    /// False for an entries-only area: the slot is no copy.
    images: bool,
}

impl AreaGuard<'_> {
    /// Write `pages` (each `page_size` bytes, checksummed, at most
    /// `pages_per_area` of them) with their ids into the area, in one write,
    /// and sync its file. On error (of the write or of the sync) the area's
    /// content is unknown and the caller must not write the batch in place;
    /// nothing else depends on the area's content (no in-place write of
    /// this batch was made, and recovery uses a copy only for a torn page
    /// whose copy verifies), so the caller gives the area back and keeps
    /// the pages dirty: nothing was lost, nothing is poisoned.
    ///
    /// `alone`: the caller saw no in-place data write in flight as it
    /// began, so the write's time is what the device charges for it, not
    /// a wait behind other writes; it is counted apart
    /// (`dblwr_alone_*`, which `steady`'s write cost reads).
    ///
    /// # Panics
    /// On more pages than slots, or a page of the wrong size or whose header
    /// names another page: the batch writer broke its contract.
    pub fn write_and_sync(&mut self, pages: &[(PageId, &[u8])], alone: bool) -> Result<()> {
        if pages.is_empty() {
            return Ok(());
        }
        let dw = self.dw;
        let g = &dw.geometry;
        let ps = g.page_size;
        assert!(
            pages.len() <= g.pages_per_area,
            "doublewrite batch of {} pages exceeds the {} slots of an area",
            pages.len(),
            g.pages_per_area
        );
        let hb = g.header_blocks();
        // Entries only: the header, in whole I/O blocks; the slots keep
        // whatever they held (the entries-only magic says they are no copies).
        let len = if dw.images {
            (hb + pages.len()) * ps
        } else {
            area_header_len(pages.len()).next_multiple_of(IO_ALIGN)
        };
        let mut buf = AlignedBuf::new(len);
        let mut entries = Vec::with_capacity(pages.len());
        for (k, &(id, page)) in pages.iter().enumerate() {
            assert_eq!(
                page.len(),
                ps,
                "doublewrite copy of page {id}: wrong length"
            );
            assert_eq!(
                page_id(page),
                id,
                "doublewrite copy of page {id} names another page"
            );
            debug_assert_eq!(
                verify_page(page, id),
                Ok(()),
                "doublewrite copy of page {id}"
            );
            entries.push(Entry {
                id,
                lsn: page_lsn(page),
            });
            if dw.images {
                buf[(hb + k) * ps..(hb + k + 1) * ps].copy_from_slice(page);
            }
        }
        let header_len = len.min(hb * ps);
        AreaHeader {
            page_size: ps as u32,
            area: self.area as u32,
            seq: dw.next_seq.fetch_add(1, Ordering::Relaxed),
            images: dw.images,
            entries,
        }
        .encode(&mut buf[..header_len]);
        let (file, offset) = g.area_location(self.area);
        let f = &dw.files[file];
        let started = std::time::Instant::now();
        f.dev
            .write_at(&buf, offset)
            .map_err(|e| Error::io(&f.path, "write", e))?;
        // The write alone, not its sync: the policy compares it with the
        // in-place writes (see `policy::steady::merge`).
        let took = started.elapsed().as_micros() as u64;
        Metrics::add(&dw.metrics.dblwr_write_us_total, took);
        if alone {
            Metrics::add(&dw.metrics.dblwr_alone_writes, 1);
            Metrics::add(&dw.metrics.dblwr_alone_pages, pages.len() as u64);
            Metrics::add(&dw.metrics.dblwr_alone_write_us_total, took);
        }
        Metrics::add(&dw.metrics.dblwr_written_bytes, buf.len() as u64);
        f.dev.sync().map_err(|e| Error::io(&f.path, "sync", e))?;
        Metrics::add(&dw.metrics.dblwr_writes, 1);
        Metrics::add(&dw.metrics.dblwr_pages_written, pages.len() as u64);
        Ok(())
    }
}
