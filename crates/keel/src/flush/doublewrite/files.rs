//! Opening, checking and formatting the doublewrite files.

use std::path::Path;
use std::sync::Arc;

use super::{file_name, DwFile, FileHeader, Geometry};
use crate::error::{Error, Result};
use crate::io::{AlignedBuf, Device, FileSystem, OpenMode};
use crate::metrics::Metrics;

pub(super) fn bad_file(path: &Path, reason: &str) -> Error {
    Error::BadFile {
        path: path.to_owned(),
        reason: format!("doublewrite file: {reason}"),
    }
}

/// Read file header; `Ok(None)` if the file is blank (shorter than a block
/// or a zero first block): an interrupted format.
pub(super) fn read_file_header(
    dev: &dyn Device,
    path: &Path,
    page_size: usize,
) -> Result<Option<FileHeader>> {
    let len = dev.len().map_err(|e| Error::io(path, "stat", e))?;
    if len < page_size as u64 {
        return Ok(None);
    }
    let mut buf = AlignedBuf::new(page_size);
    dev.read_at(&mut buf, 0)
        .map_err(|e| Error::io(path, "read", e))?;
    if buf.iter().all(|&b| b == 0) {
        return Ok(None);
    }
    let h = FileHeader::decode(&buf).map_err(|reason| bad_file(path, &reason))?;
    if h.page_size as usize != page_size {
        return Err(bad_file(
            path,
            &format!("page size {}, the database has {page_size}", h.page_size),
        ));
    }
    Ok(Some(h))
}

/// Open every file of a set whose geometry `g` `dblwr-0` gave (`first` is
/// `dblwr-0`, open, and its header) and check each against the database.
pub(super) fn open_files(
    fs: &dyn FileSystem,
    dir: &Path,
    g: &Geometry,
    first: (Arc<dyn Device>, FileHeader),
    creation_id: u64,
) -> Result<Vec<DwFile>> {
    let mut files = Vec::with_capacity(g.files);
    let mut first = Some(first);
    for i in 0..g.files {
        let path = dir.join(file_name(i));
        let (dev, h) = match first.take() {
            Some(found) => found,
            None => {
                let dev = fs
                    .open(&path, OpenMode::Existing)
                    .map_err(|e| Error::io(&path, "open", e))?;
                let h = read_file_header(&*dev, &path, g.page_size)?.ok_or_else(|| {
                    bad_file(&path, "blank header, but dblwr-0 says the set is complete")
                })?;
                (dev, h)
            }
        };
        check_file(&*dev, &path, &h, i, g, creation_id)?;
        files.push(DwFile { dev, path });
    }
    Ok(files)
}

/// Check file `i`'s header against the database and the set's geometry
/// (from `dblwr-0`, already validated), and its length.
fn check_file(
    dev: &dyn Device,
    path: &Path,
    h: &FileHeader,
    i: usize,
    g: &Geometry,
    creation_id: u64,
) -> Result<()> {
    if h.creation_id != creation_id {
        return Err(bad_file(
            path,
            &format!(
                "belongs to another database: creation id {:#x}, the data files have {creation_id:#x}",
                h.creation_id
            ),
        ));
    }
    let want = (i, g.files, g.areas, g.areas_in_file(i), g.pages_per_area);
    let got = (
        h.file_index as usize,
        h.n_files as usize,
        h.n_areas as usize,
        h.areas_in_file as usize,
        h.pages_per_area as usize,
    );
    if got != want {
        return Err(bad_file(
            path,
            &format!(
                "header says (file index, files, areas, areas here, pages per area) = {got:?}, \
                 expected {want:?}"
            ),
        ));
    }
    let len = dev.len().map_err(|e| Error::io(path, "stat", e))?;
    if len < g.file_len(i) {
        return Err(bad_file(
            path,
            &format!("truncated: {len} bytes, expected {}", g.file_len(i)),
        ));
    }
    Ok(())
}

/// Format the files for `g`: blank `dblwr-0` first, then every other file
/// complete (allocated, and the directory synced), then `dblwr-0`'s header
/// last (see the module documentation). The headers count in
/// `dblwr_written_bytes`.
pub(super) fn format_files(
    fs: &dyn FileSystem,
    dir: &Path,
    g: &Geometry,
    creation_id: u64,
    metrics: &Metrics,
) -> Result<Vec<DwFile>> {
    let mut files = Vec::with_capacity(g.files);
    for i in 0..g.files {
        let path = dir.join(file_name(i));
        let mode = if fs.exists(&path) {
            OpenMode::Existing
        } else {
            OpenMode::CreateNew
        };
        let dev = fs
            .open(&path, mode)
            .map_err(|e| Error::io(&path, "create", e))?;
        // Allocated whole, as the data files and the log are: a full disk
        // fails the format, not a batch's doublewrite later.
        dev.set_len(0)
            .and_then(|()| dev.allocate(g.file_len(i)))
            .and_then(|()| if i == 0 { dev.sync() } else { Ok(()) })
            .map_err(|e| Error::io(&path, "format", e))?;
        files.push(DwFile { dev, path });
    }
    // Every name durable before `dblwr-0`'s header says the set is complete.
    fs.sync_dir(dir)
        .map_err(|e| Error::io(dir, "sync directory", e))?;
    let mut block = AlignedBuf::new(g.page_size);
    for i in (1..g.files).chain([0]) {
        FileHeader {
            page_size: g.page_size as u32,
            file_index: i as u32,
            n_files: g.files as u32,
            n_areas: g.areas as u32,
            areas_in_file: g.areas_in_file(i) as u32,
            pages_per_area: g.pages_per_area as u32,
            creation_id,
        }
        .encode(&mut block);
        let f = &files[i];
        f.dev
            .write_at(&block, 0)
            .and_then(|()| {
                Metrics::add(&metrics.dblwr_written_bytes, block.len() as u64);
                f.dev.sync()
            })
            .map_err(|e| Error::io(&f.path, "write header", e))?;
    }
    // Files beyond the new count hold nothing of use; free their space.
    for i in g.files.. {
        let path = dir.join(file_name(i));
        if !fs.exists(&path) {
            break;
        }
        fs.open(&path, OpenMode::Existing)
            .and_then(|dev| dev.set_len(0))
            .map_err(|e| Error::io(&path, "truncate", e))?;
    }
    Ok(files)
}
