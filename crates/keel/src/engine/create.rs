//! Creating a database so that a creation cut short (an I/O error, a full
//! disk, a power loss) is done again at the next open, rather than leaving
//! a directory that every later open refuses.
//!
//! # The order of creation
//!
//! Each step is durable before the next one starts:
//! 0. the directory, if missing, synced into its parent (`Engine::open`,
//!    before it locks the directory);
//! 1. the data files, `data-0`'s header block left zero, each synced, then
//!    the directory (`Tablespace::create`);
//! 2. the redo log files, each allocated whole with its header holding the
//!    creation's checkpoint (number 1, at `redo::START_LSN`) and synced,
//!    then the directory (`Log::create`);
//! 3. the doublewrite files (`flush::doublewrite`: allocated, the directory
//!    synced, `dblwr-0`'s header last; restartable by itself);
//! 4. the space header page and the catalog's root, logged, and the log
//!    synced (`db::format_space`);
//! 5. `data-0`'s header, written and synced
//!    (`Tablespace::finish_creation`): from here on the directory holds a
//!    database, which recovery can rebuild from the log of step 4;
//! 6. a sharp checkpoint, number 2.
//!
//! # What an open finds
//!
//! [`prepare`] looks at `data-0` before anything else is opened:
//! - none: a new database is created (refused if `redo-0` exists: the
//!   files of some other database);
//! - a header: a database, opened (and checked, and recovered) as always;
//! - a header block that is zero as far as the file goes (empty, say): a
//!   creation that stopped before step 5. No `Db` was handed out before
//!   that step, so no commit lives in these files: they are removed, the
//!   directory synced, a warning logged, and the database created again.
//!   `data-0` is removed last, so a removal cut short is still recognized
//!   as unfinished.
//!   One exception guards against destroying a database whose `data-0`
//!   header was lost *after* it was created: if `redo-0` holds a valid
//!   checkpoint numbered above 1 (step 6 happened), the open is refused
//!   naming both files, and nothing is touched.

use std::path::Path;

use crate::error::{Error, Result};
use crate::flush::doublewrite;
use crate::io::{AlignedBuf, FileSystem, OpenMode};
use crate::redo::format::{Checkpoint, CHECKPOINT_SLOTS, LOG_FILE_HDR};
use crate::redo::log_file_name;
use crate::space::data_file_name;

/// The name of file `i` of one kind (`data_file_name`, ...).
type FileName = fn(usize) -> String;

/// What [`inspect`] found in a directory.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// No `data-0`: nothing to open.
    Nothing,
    /// `data-0` has a header: a database.
    Database,
    /// A creation that stopped before its last step; why we think so.
    Unfinished(String),
}

/// The bytes of `data-0` that hold its header (the smallest page size).
const HEADER_BLOCK: u64 = 4096;

/// Decide whether `dir` must be created (true) or holds a database to open
/// (false); the files of an unfinished creation are removed first (module
/// doc).
pub(crate) fn prepare(
    data_fs: &dyn FileSystem,
    log_fs: &dyn FileSystem,
    dir: &Path,
) -> Result<bool> {
    match inspect(data_fs, log_fs, dir)? {
        Found::Database => Ok(false),
        Found::Nothing => {
            let redo0 = dir.join(log_file_name(0));
            if log_fs.exists(&redo0) {
                return Err(Error::BadFile {
                    path: redo0,
                    reason: "exists already while creating a new database (there is no data-0)"
                        .into(),
                });
            }
            Ok(true)
        }
        Found::Unfinished(why) => {
            log::warn!(
                "{}: the creation of this database did not finish ({why}); it holds no \
                 committed data: removing its files and creating it again",
                dir.display()
            );
            discard_unfinished(data_fs, log_fs, dir)?;
            Ok(true)
        }
    }
}

/// What `dir` holds, judged by `data-0`'s header block and, when that is
/// zero, by `redo-0`'s checkpoints (module doc).
pub(crate) fn inspect(
    data_fs: &dyn FileSystem,
    log_fs: &dyn FileSystem,
    dir: &Path,
) -> Result<Found> {
    let data0 = dir.join(data_file_name(0));
    if !data_fs.exists(&data0) {
        return Ok(Found::Nothing);
    }
    let Some(len) = blank_header(data_fs, &data0)? else {
        return Ok(Found::Database);
    };
    let redo0 = dir.join(log_file_name(0));
    match newest_checkpoint(log_fs, &redo0)? {
        Some(cp) if cp.no > 1 => Err(Error::BadFile {
            path: data0,
            reason: format!(
                "no header ({}), but {} holds checkpoint {} at LSN {}: the database was \
                 created in full and this file was truncated or zeroed since; nothing was \
                 changed",
                match len {
                    0 => "the file is empty".to_owned(),
                    _ => format!("its first {} bytes are zero", len.min(HEADER_BLOCK)),
                },
                redo0.display(),
                cp.no,
                cp.lsn
            ),
        }),
        _ => Ok(Found::Unfinished(format!(
            "{} has no header and {} no checkpoint past the creation's",
            data_file_name(0),
            log_file_name(0)
        ))),
    }
}

/// The length of the file at `path` if its header block is blank: zero as
/// far as the file goes (a creation writes it last); `None` if any byte of
/// it is not.
fn blank_header(fs: &dyn FileSystem, path: &Path) -> Result<Option<u64>> {
    let dev = fs
        .open(path, OpenMode::Existing)
        .map_err(|e| Error::io(path, "open", e))?;
    let len = dev.len().map_err(|e| Error::io(path, "stat", e))?;
    let mut block = vec![0u8; len.min(HEADER_BLOCK) as usize];
    dev.read_at(&mut block, 0)
        .map_err(|e| Error::io(path, "read header of", e))?;
    Ok(block.iter().all(|&b| b == 0).then_some(len))
}

/// The newest valid checkpoint in `redo-0`'s header, if the file and one
/// exist.
fn newest_checkpoint(fs: &dyn FileSystem, path: &Path) -> Result<Option<Checkpoint>> {
    if !fs.exists(path) {
        return Ok(None);
    }
    let dev = fs
        .open(path, OpenMode::Existing)
        .map_err(|e| Error::io(path, "open", e))?;
    if dev.len().map_err(|e| Error::io(path, "stat", e))? < LOG_FILE_HDR {
        return Ok(None);
    }
    let mut hdr = AlignedBuf::new(LOG_FILE_HDR as usize);
    dev.read_at(&mut hdr, 0)
        .map_err(|e| Error::io(path, "read header of", e))?;
    Ok(CHECKPOINT_SLOTS
        .iter()
        .filter_map(|&o| Checkpoint::decode(&hdr[o as usize..]))
        .max_by_key(|c| c.no))
}

/// Remove every file of an unfinished creation, `data-0` last, syncing
/// the directory before and after it.
fn discard_unfinished(data_fs: &dyn FileSystem, log_fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    // (file system, file name, first index to remove now)
    let sets: [(&dyn FileSystem, FileName, usize); 3] = [
        (data_fs, data_file_name, 1),
        (log_fs, log_file_name, 0),
        (data_fs, doublewrite::file_name, 0),
    ];
    for (fs, name, first) in sets {
        for i in first.. {
            let path = dir.join(name(i));
            if !fs.exists(&path) {
                break;
            }
            fs.remove(&path)
                .map_err(|e| Error::io(&path, "remove", e))?;
        }
    }
    let sync = || {
        data_fs
            .sync_dir(dir)
            .and_then(|()| log_fs.sync_dir(dir))
            .map_err(|e| Error::io(dir, "sync directory", e))
    };
    sync()?;
    let data0 = dir.join(data_file_name(0));
    data_fs
        .remove(&data0)
        .map_err(|e| Error::io(&data0, "remove", e))?;
    sync()
}
