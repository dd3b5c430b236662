//! Hot backup: a consistent copy of a database while writes go on, the way
//! Percona XtraBackup copies InnoDB (`Db::backup`).
//!
//! # What the copy is
//!
//! The data files copied page by page while the page cleaners keep
//! writing them, and the redo from the checkpoint in effect when the
//! backup began (`C`) to the end of the log when the page copy ended
//! (`E`). Opening the copy is a crash recovery: it replays the redo from
//! `C` over the copied pages and finishes the commits logged but not
//! applied, so the copy opens at `E`, one consistent point: every commit
//! whose record is below `E`, and no other.
//!
//! Why that is enough:
//! - A page on disk at any moment after `C` holds every change below `C`
//!   (that is what the checkpoint says), and a page is written only once
//!   the redo up to its LSN is durable (write-ahead logging), so every
//!   copied page is one that recovery from `C` can bring forward with the
//!   copied redo, whatever its age.
//! - `E` is read after the last page was copied: no copied page holds a
//!   change past it.
//! - Keel never writes a transaction's rows before its commit record is
//!   logged (`txn`), so a copied page holds no row of a commit the copy's
//!   log lacks: nothing needs rolling back.
//!
//! # Protocol with the running engine
//!
//! The log is a ring: its space below the checkpoint is reused. A backup
//! pins the checkpoint at the redo it has not copied yet
//! (`Log::pin_for_backup`, `Log::move_backup_pin`: checkpoints are
//! clamped to the pin under the log's checkpoint mutex), and a copier
//! thread reads the durable redo as it comes, moving the pin behind it. No
//! lock is held while copying; a writer that finds the log full because
//! the pin holds the checkpoint waits for log space as it would for the
//! cleaners, and the copier, which takes no lock a writer holds, frees it.
//! The copier reads only redo that is durable (below `Log::flushed_lsn`),
//! which is never rewritten, except the last block, whose bytes below the
//! durable LSN stay the same.
//!
//! A page is read with the cleaners writing it: a read that meets a write
//! half-done sees a page whose checksum fails, and is read again (up to
//! [`RETRIES`] times; a page that never verifies is corrupt and ends the
//! backup with the error naming it). A page never written (all zeros) is
//! copied as it is.
//!
//! # Failures
//!
//! An error ends the backup and releases the pin; what it wrote into the
//! destination is removed, and the destination too if the backup created
//! it (whatever cannot be removed has no valid checkpoint in `redo-0`, so
//! opening it fails). A destination inside the database's directory is
//! refused. The source is not changed by a backup, save the
//! checkpoint being held back while it runs. One backup at a time.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::io::AlignedBuf;
use crate::page::{verify_page, Lsn, PageCheckError, PageId};
use crate::redo::format::{
    Checkpoint, LogFileHeader, CHECKPOINT_SLOTS, LOG_FILE_ALIGN, LOG_FILE_HDR, LOG_VERSION,
    MAX_LOG_FILES,
};
use crate::redo::log_file_name;
use crate::space::data_file_name;

/// Reads of one page before a checksum that keeps failing is corruption.
pub(crate) const RETRIES: u32 = 1000;
/// Where the copier keeps the redo until the log files are laid out.
const REDO_SPOOL: &str = "backup-redo.tmp";
/// The copier's pause when it has caught up with the durable log.
const COPIER_IDLE: Duration = Duration::from_millis(5);
/// Bytes of redo the copier reads at a time.
const COPY_CHUNK: u64 = 1 << 20;

/// What a backup did (`Db::backup`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BackupReport {
    /// Where the copy is.
    pub dest: PathBuf,
    /// Pages copied (every page slot of every data file).
    pub pages: u64,
    /// Page reads that met a page being written and were read again.
    pub reread_pages: u64,
    /// The checkpoint the copy's recovery starts from.
    pub start_lsn: Lsn,
    /// The end of the copied redo: the copy opens at this point.
    pub end_lsn: Lsn,
    /// Milliseconds the backup took.
    pub time_ms: u64,
}

impl std::fmt::Display for BackupReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "backup in {}: {} pages ({} read again while being written), redo from LSN {} to {} \
             ({} bytes), {} ms; opening it recovers it to LSN {}",
            self.dest.display(),
            self.pages,
            self.reread_pages,
            self.start_lsn,
            self.end_lsn,
            self.end_lsn - self.start_lsn,
            self.time_ms,
            self.end_lsn
        )
    }
}

/// Copy the database of `e` into `dest` (module doc). `dest` must not
/// exist, or be an empty directory.
pub(crate) fn backup(e: &Engine, dest: &Path) -> Result<BackupReport> {
    let t0 = Instant::now();
    let created = !dest.exists();
    let src = e.pool.space.file_path(0).parent().unwrap_or(Path::new("."));
    prepare_dest(src, dest)?;
    let Some(cp) = e.log.pin_for_backup() else {
        discard(e, dest, created);
        return Err(Error::Backup(
            "another backup of this database is running; one at a time".into(),
        ));
    };
    let r = copy(e, dest, cp);
    e.log.move_backup_pin(u64::MAX);
    let mut rep = match r {
        Ok(rep) => rep,
        Err(err) => {
            discard(e, dest, created);
            return Err(err);
        }
    };
    rep.time_ms = t0.elapsed().as_millis() as u64;
    log::info!("{rep}");
    Ok(rep)
}

fn copy(e: &Engine, dest: &Path, cp: Checkpoint) -> Result<BackupReport> {
    let spool_path = dest.join(REDO_SPOOL);
    let spool = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&spool_path)
        .map_err(|err| Error::io(&spool_path, "create", err))?;
    let stop = AtomicBool::new(false);
    let mut rep = BackupReport {
        dest: dest.to_path_buf(),
        start_lsn: cp.lsn,
        ..Default::default()
    };
    let end = std::thread::scope(|s| -> Result<Lsn> {
        let copier = s.spawn(|| copy_redo(e, &spool, &spool_path, cp.lsn, &stop));
        e.failpoints.hit("backup.copying");
        let pages = copy_pages(e, dest, &mut rep);
        // The end: every copied page's changes are below it. In a
        // read-only open nothing is buffered, and nothing may be written.
        let end = pages.and_then(|()| {
            if !e.opts.read_only {
                e.log.write_up_to(e.log.lsn(), true)?;
            }
            Ok(e.log.flushed_lsn())
        });
        stop.store(true, Ordering::Release);
        let copied = copier
            .join()
            .unwrap_or_else(|_| Err(Error::Backup("the redo copier thread panicked".into())));
        let end = end?;
        let copied = copied?;
        if copied < end {
            return Err(Error::Backup(format!(
                "the redo copier stopped at LSN {copied}, before the end of the copy at {end}"
            )));
        }
        Ok(end)
    })?;
    rep.end_lsn = end;
    write_log(e, dest, &spool, cp, end)?;
    std::fs::remove_file(&spool_path).map_err(|err| Error::io(&spool_path, "remove", err))?;
    sync_dir(dest)?;
    Ok(rep)
}

/// After a failed backup: remove what it wrote into `dest` (which was
/// empty), and `dest` itself if the backup created it. Best effort: what
/// cannot be removed is logged, and the copy left has no valid checkpoint,
/// so it does not open.
fn discard(e: &Engine, dest: &Path, created: bool) {
    let mut names: Vec<String> = (0..e.pool.space.n_files()).map(data_file_name).collect();
    names.extend((0..MAX_LOG_FILES as usize).map(log_file_name));
    names.push(REDO_SPOOL.to_string());
    for name in names {
        let path = dest.join(name);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => log::warn!("failed backup: cannot remove {}: {err}", path.display()),
        }
    }
    if created {
        if let Err(err) = std::fs::remove_dir(dest) {
            log::warn!("failed backup: cannot remove {}: {err}", dest.display());
        }
    }
}

/// `dest` must not exist or be empty, and must not lie inside the source
/// directory `src`; it is created (with its parents) if missing.
fn prepare_dest(src: &Path, dest: &Path) -> Result<()> {
    let src = std::fs::canonicalize(src).map_err(|err| Error::io(src, "resolve", err))?;
    let mut probe = dest.to_path_buf();
    // The nearest part of `dest` that exists, resolved, and the rest.
    let mut rest = Vec::new();
    while !probe.exists() {
        match (probe.file_name(), probe.parent()) {
            (Some(n), Some(p)) => {
                rest.push(n.to_os_string());
                probe = p.to_path_buf();
            }
            _ => break,
        }
        if probe.as_os_str().is_empty() {
            probe = PathBuf::from(".");
        }
    }
    let mut full =
        std::fs::canonicalize(&probe).map_err(|err| Error::io(&probe, "resolve", err))?;
    full.extend(rest.iter().rev());
    if full.starts_with(&src) {
        return Err(Error::Backup(format!(
            "{} is inside the database directory {}: put the copy elsewhere",
            dest.display(),
            src.display()
        )));
    }
    if dest.exists() {
        let mut entries =
            std::fs::read_dir(dest).map_err(|err| Error::io(dest, "read directory", err))?;
        if entries.next().is_some() {
            return Err(Error::Backup(format!(
                "{} is not empty: a backup goes into a new or empty directory",
                dest.display()
            )));
        }
    }
    std::fs::create_dir_all(dest).map_err(|err| Error::io(dest, "create directory", err))
}

/// The copier thread: append the durable redo from `from` to the spool,
/// moving the backup pin behind it, until `stop` is set and everything
/// durable then is copied. Returns where it stopped.
fn copy_redo(e: &Engine, spool: &File, path: &Path, from: Lsn, stop: &AtomicBool) -> Result<Lsn> {
    let mut at = from;
    let mut buf = Vec::new();
    loop {
        e.failpoints.hit("backup.redo");
        // Read `stop` before the durable end: once stopped, everything
        // durable when the page copy ended is below this end.
        let stopping = stop.load(Ordering::Acquire);
        let durable = e.log.flushed_lsn();
        if durable > at {
            let n = (durable - at).min(COPY_CHUNK);
            buf.resize(n as usize, 0);
            e.log.read_into(at, &mut buf)?;
            spool
                .write_all_at(&buf, at - from)
                .map_err(|err| Error::io(path, "write", err))?;
            at += n;
            e.log.move_backup_pin(at);
            continue;
        }
        if stopping {
            spool
                .sync_data()
                .map_err(|err| Error::io(path, "sync", err))?;
            return Ok(at);
        }
        std::thread::sleep(COPIER_IDLE);
    }
}

/// Copy every page slot of every data file, verifying each page read and
/// reading again one caught half-written.
fn copy_pages(e: &Engine, dest: &Path, rep: &mut BackupReport) -> Result<()> {
    let space = &e.pool.space;
    let ps = space.page_size();
    let n_files = space.n_files();
    let mut buf = AlignedBuf::new(ps);
    for f in 0..n_files {
        let src = space.file_path(f).to_path_buf();
        let len = std::fs::metadata(&src)
            .map_err(|err| Error::io(&src, "stat", err))?
            .len();
        let out_path = dest.join(data_file_name(f));
        let out = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&out_path)
            .map_err(|err| Error::io(&out_path, "create", err))?;
        // The file header block: written at creation, never again.
        let mut header = vec![0u8; ps];
        File::open(&src)
            .and_then(|h| h.read_exact_at(&mut header, 0))
            .map_err(|err| Error::io(&src, "read", err))?;
        out.write_all_at(&header, 0)
            .map_err(|err| Error::io(&out_path, "write", err))?;
        let slots = (len / ps as u64).saturating_sub(1);
        for j in 0..slots {
            let page_no = page_at(f, j, n_files);
            let id = PageId::new(space.space_id(), page_no);
            let mut tries = 0;
            loop {
                if !space.read_page_raw(page_no, &mut buf)? {
                    // Past the end of the file now: it was shorter than
                    // stat said? Never shrinks; treat as never written.
                    buf.fill(0);
                }
                match verify_page(&buf, id) {
                    Ok(()) | Err(PageCheckError::AllZero) => break,
                    Err(_) if tries < RETRIES => {
                        tries += 1;
                        rep.reread_pages += 1;
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    Err(err) => {
                        return Err(Error::CorruptPage {
                            page: id,
                            path: src.clone(),
                            reason: format!("{err}, in {RETRIES} reads during a backup"),
                        })
                    }
                }
            }
            out.write_all_at(&buf, (1 + j) * ps as u64)
                .map_err(|err| Error::io(&out_path, "write", err))?;
            rep.pages += 1;
        }
        out.sync_all()
            .map_err(|err| Error::io(&out_path, "sync", err))?;
    }
    Ok(())
}

/// The page in slot `j` of data file `f` (the inverse of `space::locate`:
/// extents of 64 pages, dealt round-robin over the files).
fn page_at(f: usize, j: u64, n_files: usize) -> u32 {
    let extent = (j / 64) * n_files as u64 + f as u64;
    (extent * 64 + j % 64) as u32
}

/// Lay out the copy's redo log: files of the source's size, as many as
/// the copied redo needs (more than the source's if the backup outlasted a
/// lap of its log; larger files past [`MAX_LOG_FILES`]), the spooled redo
/// at the places its LSNs have in them, and a checkpoint at `cp.lsn` in
/// the slot recovery reads. `redo-0` is written last.
fn write_log(e: &Engine, dest: &Path, spool: &File, cp: Checkpoint, end: Lsn) -> Result<()> {
    let (src_size, src_n) = e.log.geometry();
    let need = end - cp.lsn + LOG_FILE_ALIGN;
    let area = src_size - LOG_FILE_HDR;
    let mut n = (need.div_ceil(area) + 1).max(src_n as u64);
    let mut size = src_size;
    if n > u64::from(MAX_LOG_FILES) {
        n = u64::from(MAX_LOG_FILES);
        let per = need.div_ceil(n - 1);
        size = LOG_FILE_HDR + per.div_ceil(LOG_FILE_ALIGN) * LOG_FILE_ALIGN;
    }
    let area = size - LOG_FILE_HDR;
    let capacity = area * n;
    let files: Vec<(File, PathBuf)> = (0..n as usize)
        .rev()
        .map(|i| {
            let path = dest.join(log_file_name(i));
            let f = OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(|err| Error::io(&path, "create", err))?;
            f.set_len(size)
                .map_err(|err| Error::io(&path, "size", err))?;
            Ok((f, path))
        })
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .rev()
        .collect();
    // The redo, from the spool, at `lsn % capacity` as the log places it.
    let mut buf = vec![0u8; COPY_CHUNK as usize];
    let mut lsn = cp.lsn;
    while lsn < end {
        let n_read = (end - lsn).min(COPY_CHUNK) as usize;
        spool
            .read_exact_at(&mut buf[..n_read], lsn - cp.lsn)
            .map_err(|err| Error::io(dest.join(REDO_SPOOL), "read", err))?;
        let mut done = 0;
        while done < n_read {
            let pos = (lsn + done as u64) % capacity;
            let (fi, off) = ((pos / area) as usize, pos % area);
            let room = (area - off) as usize;
            let k = room.min(n_read - done);
            let (file, path) = &files[fi];
            file.write_all_at(&buf[done..done + k], LOG_FILE_HDR + off)
                .map_err(|err| Error::io(path, "write", err))?;
            done += k;
        }
        lsn += n_read as u64;
    }
    for (i, (file, path)) in files.iter().enumerate().rev() {
        let mut hdr = vec![0u8; LOG_FILE_HDR as usize];
        LogFileHeader {
            version: LOG_VERSION,
            file_index: i as u32,
            n_files: n as u32,
            file_size: size,
            creation_id: e.pool.space.creation_id(),
        }
        .encode(&mut hdr);
        if i == 0 {
            let slot = Checkpoint { no: 2, ..cp };
            slot.encode(&mut hdr[CHECKPOINT_SLOTS[0] as usize..]);
        }
        file.write_all_at(&hdr, 0)
            .map_err(|err| Error::io(path, "write", err))?;
        file.sync_all()
            .map_err(|err| Error::io(path, "sync", err))?;
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|err| Error::io(dir, "sync directory", err))
}
