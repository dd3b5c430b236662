//! `keel inspect DIR`: what can be read from a database directory without
//! opening the engine — nothing is written, no lock is taken, no recovery
//! runs, so it works on a closed or crashed directory and beside a process
//! that has the database open (whose files then change as they are read:
//! the report is a moment's, and may mix two). The file headers, the checkpoint slots, the end of the redo log
//! (how much recovery would replay), the doublewrite files and the space
//! header, as text or as one JSON object.
//!
//! Everything on disk is read through `keel::format`: the engine's own
//! decoders and types (the JSON shows the engine's header structs as they
//! are). Only two pieces of arithmetic are repeated from `docs/format.md`,
//! because the engine's versions live inside its open log and doublewrite
//! objects: where an LSN lies in the log files, and where an area begins.

use std::collections::BTreeSet;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use keel::format::data::{self, space_header};
use keel::format::doublewrite::{self, area_header_len};
use keel::format::page::{get_u32, get_u64, page_lsn, verify_page, Lsn, PageId};
use keel::format::redo::{
    self, decode_group, decode_group_v1, decode_relocation, group_at, kind, Checkpoint,
    LogFileHeader, CHECKPOINT_SLOTS, GROUP_HDR, GROUP_HDR_V1, LOG_FILE_HDR, LOG_VERSION,
    LOG_VERSION_V1,
};
use serde::Serialize;

mod render;
pub use render::render;

/// Print the file headers, checkpoints, log end and page counts of a database
/// directory, without opening it (nothing is written, no lock is taken).
#[derive(Args, Debug, Clone)]
pub struct InspectArgs {
    /// The database directory.
    pub dir: PathBuf,
    /// Print everything as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Bytes read at a time while scanning the log.
const SCAN_CHUNK: usize = 1 << 20;

/// Everything `keel inspect` found.
#[derive(Serialize, Debug)]
pub struct Inspection {
    /// The directory inspected.
    pub dir: PathBuf,
    /// `data-N.keel`, in index order.
    pub data_files: Vec<DataFile>,
    /// Page 0 of the space as it is on disk (recovery may still change it).
    pub space: Option<SpaceHeader>,
    /// The redo log.
    pub redo: Redo,
    /// `dblwr-N.keel`, if any.
    pub doublewrite: Vec<DblwrFile>,
    /// Inconsistencies found on the way (the engine would refuse to open, or
    /// would repair at open).
    pub warnings: Vec<String>,
}

/// One data file.
#[derive(Serialize, Debug)]
pub struct DataFile {
    /// File name.
    pub name: String,
    /// Its header, fields inline in the JSON.
    #[serde(flatten)]
    pub header: data::FileHeader,
    /// Length in bytes.
    pub bytes: u64,
    /// Data pages after the header block.
    pub pages: u64,
}

/// The space header (page 0).
#[derive(Serialize, Debug)]
pub struct SpaceHeader {
    /// Page LSN of page 0.
    pub page_lsn: Lsn,
    /// High-water mark: next never-used page number.
    pub hwm: u32,
    /// First page of the free list (0 = empty).
    pub free_list_head: u32,
    /// Pages on the free list.
    pub free_pages: u32,
    /// Catalog root page number.
    pub catalog_root: u32,
    /// Undo directory page number (0 = none: laid out before undo existed).
    pub undo_dir: u32,
    /// Pages allocated: high-water mark minus free pages.
    pub allocated_pages: u32,
    /// Data pages the files hold (sum over the files).
    pub file_pages: u64,
}

/// The redo log.
#[derive(Serialize, Debug)]
pub struct Redo {
    /// `redo-N.keel`, in index order.
    pub files: Vec<LogFile>,
    /// Bytes of the circular data areas: (file size − header) × files.
    pub capacity: u64,
    /// The two checkpoint slots of file 0.
    pub checkpoints: Vec<CheckpointSlot>,
    /// Index into `checkpoints` of the slot recovery would use.
    pub winner: Option<usize>,
    /// The scan from the winning checkpoint to the end of the log.
    pub scan: Option<LogScan>,
}

/// One redo log file.
#[derive(Serialize, Debug)]
pub struct LogFile {
    /// File name.
    pub name: String,
    /// Redo format version (the header decoded, so the one this build reads).
    pub version: u32,
    /// Its header, fields inline in the JSON.
    #[serde(flatten)]
    pub header: LogFileHeader,
    /// Length on disk.
    pub bytes: u64,
}

/// One checkpoint slot.
#[derive(Serialize, Debug)]
pub struct CheckpointSlot {
    /// Byte offset in `redo-0.keel`.
    pub offset: u64,
    /// Number and LSN as stored, valid or not.
    #[serde(flatten)]
    pub stored: Checkpoint,
    /// Whether recovery would use the slot (`Checkpoint::decode`).
    pub valid: bool,
}

/// The log from the checkpoint to its end.
#[derive(Serialize, Debug)]
pub struct LogScan {
    /// Where the scan started (the winning checkpoint's LSN).
    pub checkpoint_lsn: Lsn,
    /// End of the valid log.
    pub end_lsn: Lsn,
    /// Redo bytes beyond the checkpoint (what recovery would replay).
    pub bytes_beyond_checkpoint: u64,
    /// Valid groups after the checkpoint.
    pub groups: u64,
    /// Mini-transaction groups.
    pub mtr_groups: u64,
    /// Transaction commit groups.
    pub commit_groups: u64,
    /// "Commit applied" groups.
    pub applied_groups: u64,
    /// Groups holding copies of the records of commits in flight.
    pub relocated_groups: u64,
    /// Groups of an unknown kind (recovery would refuse them).
    pub unknown_groups: u64,
    /// Commits without a later "applied" group: recovery finishes them
    /// (re-applies a whole record, rolls back a keys-only one).
    pub commits_to_reapply: u64,
}

/// One doublewrite file.
#[derive(Serialize, Debug)]
pub struct DblwrFile {
    /// File name.
    pub name: String,
    /// Length on disk.
    pub bytes: u64,
    /// The header, None when the file is blank (no copies: formatted afresh at open).
    pub header: Option<DblwrHeader>,
    /// Areas of this file holding a valid batch.
    pub areas_written: u64,
    /// Page copies in those areas.
    pub pages_held: u64,
    /// Newest batch sequence number among them.
    pub newest_seq: Option<u64>,
}

/// A doublewrite file header and its format version.
#[derive(Serialize, Debug)]
pub struct DblwrHeader {
    /// Format version (the header decoded, so the one this build reads).
    pub version: u32,
    /// The header, fields inline in the JSON.
    #[serde(flatten)]
    pub fields: doublewrite::FileHeader,
}

/// Run `keel inspect`.
pub fn run(args: InspectArgs) -> Result<()> {
    let ins = inspect(&args.dir)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&ins)?);
    } else {
        print!("{}", render(&ins));
    }
    Ok(())
}

fn open(path: &Path) -> Result<(File, u64)> {
    let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let len = f
        .metadata()
        .with_context(|| format!("cannot stat {}", path.display()))?
        .len();
    Ok((f, len))
}

/// Read up to `n` bytes at `off` (fewer at the end of the file).
fn read_upto(f: &File, path: &Path, off: u64, n: usize, len: u64) -> Result<Vec<u8>> {
    let n = n.min(len.saturating_sub(off) as usize);
    let mut b = vec![0u8; n];
    f.read_exact_at(&mut b, off)
        .with_context(|| format!("cannot read {}", path.display()))?;
    Ok(b)
}

/// Inspect the database in `dir`.
pub fn inspect(dir: &Path) -> Result<Inspection> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => bail!("{} is not a directory", dir.display()),
        Err(e) => bail!("cannot inspect {}: {e}", dir.display()),
    }
    let first = dir.join(data::file_name(0));
    if !first.exists() {
        bail!(
            "{} holds no Keel database (no {})",
            dir.display(),
            data::file_name(0)
        );
    }
    let mut warnings = Vec::new();
    let (data_files, space) = data(dir, &mut warnings)?;
    let creation_id = data_files[0].header.creation_id;
    let redo = redo(dir, creation_id, &mut warnings)?;
    let doublewrite = dblwr(dir, creation_id, &mut warnings)?;
    Ok(Inspection {
        dir: dir.to_path_buf(),
        data_files,
        space,
        redo,
        doublewrite,
        warnings,
    })
}

fn data(dir: &Path, warnings: &mut Vec<String>) -> Result<(Vec<DataFile>, Option<SpaceHeader>)> {
    let mut files: Vec<DataFile> = Vec::new();
    let mut handles = Vec::new();
    let mut i = 0usize;
    loop {
        let name = data::file_name(i);
        let path = dir.join(&name);
        if !path.exists() {
            if let Some(f0) = files.first() {
                if i < f0.header.n_files as usize {
                    warnings.push(format!(
                        "{name} is missing ({} data files expected)",
                        f0.header.n_files
                    ));
                    i += 1;
                    continue;
                }
            }
            break;
        }
        let (f, len) = open(&path)?;
        if len < 4096 {
            bail!(
                "{}: truncated ({len} bytes, less than a header block)",
                path.display()
            );
        }
        let b = read_upto(&f, &path, 0, 4096, len)?;
        let h =
            data::FileHeader::decode(&b).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let ps = u64::from(h.page_size);
        if len % ps != 0 {
            warnings.push(format!(
                "{name}: {len} bytes is not a whole number of {ps}-byte pages (truncated or torn)"
            ));
        }
        if h.file_index as usize != i {
            warnings.push(format!("{name}: header says file index {}", h.file_index));
        }
        if let Some(f0) = files.first().map(|f| &f.header) {
            if h.creation_id != f0.creation_id {
                warnings.push(format!(
                    "{name}: creation id {:#018x} differs from data-0's (a file of another database)",
                    h.creation_id
                ));
            }
            if (h.page_size, h.n_files, h.extent_pages)
                != (f0.page_size, f0.n_files, f0.extent_pages)
            {
                warnings.push(format!(
                    "{name}: page size, file count or extent size differs from data-0's"
                ));
            }
        }
        files.push(DataFile {
            name,
            header: h,
            bytes: len,
            pages: (len / ps).saturating_sub(1),
        });
        handles.push((f, path, len));
        i += 1;
    }
    // Page 0: extent 0 of file 0, right after the header block.
    let f0 = &files[0];
    let ps = f0.header.page_size as usize;
    let (f, path, len) = &handles[0];
    let page = read_upto(f, path, ps as u64, ps, *len)?;
    let space = if page.len() < ps {
        warnings.push(format!("{}: page 0 (the space header) is missing", f0.name));
        None
    } else if let Err(e) = verify_page(&page, PageId::new(f0.header.space_id, 0)) {
        warnings.push(format!(
            "{}: page 0 (the space header) is unreadable: {e} (the doublewrite area may hold a copy)",
            f0.name
        ));
        None
    } else {
        // A verified page is `ps` ≥ 4096 bytes: the offsets are inside it.
        let hwm = get_u32(&page, space_header::HWM);
        let free = get_u32(&page, space_header::FREE_COUNT);
        Some(SpaceHeader {
            page_lsn: page_lsn(&page),
            hwm,
            free_list_head: get_u32(&page, space_header::FREE_HEAD),
            free_pages: free,
            catalog_root: get_u32(&page, space_header::CATALOG_ROOT),
            undo_dir: get_u32(&page, space_header::UNDO_DIR),
            allocated_pages: hwm.saturating_sub(free),
            file_pages: files.iter().map(|d| d.pages).sum(),
        })
    };
    Ok((files, space))
}

/// The log files, addressed like the engine does: LSN `l` at file
/// `(l mod C) / A`, offset `LOG_FILE_HDR + (l mod C) mod A`.
struct LogReader {
    files: Vec<(File, PathBuf)>,
    area: u64,
    /// A log of format version 1 (20-byte group headers that store their
    /// LSN), which the engine opens only when it has nothing to recover.
    v1: bool,
}

impl LogReader {
    fn capacity(&self) -> u64 {
        self.area * self.files.len() as u64
    }

    fn read(&self, mut lsn: Lsn, len: usize) -> Result<Vec<u8>> {
        let mut out = vec![0u8; len];
        let mut done = 0;
        while done < len {
            let pos = lsn % self.capacity();
            let (f, within) = ((pos / self.area) as usize, pos % self.area);
            let n = ((self.area - within) as usize).min(len - done);
            let (file, path) = &self.files[f];
            file.read_exact_at(&mut out[done..done + n], LOG_FILE_HDR + within)
                .with_context(|| format!("cannot read {}", path.display()))?;
            done += n;
            lsn += n as u64;
        }
        Ok(out)
    }

    /// Every valid group from the checkpoint `cp` to the first invalid
    /// one, or the first an earlier run left past where `cp`'s run began
    /// (`Checkpoint::admits`), as recovery reads them.
    fn scan(&self, cp: &Checkpoint) -> Result<LogScan> {
        let start = cp.lsn;
        let cap = self.capacity();
        let mut s = LogScan {
            checkpoint_lsn: start,
            end_lsn: start,
            bytes_beyond_checkpoint: 0,
            groups: 0,
            mtr_groups: 0,
            commit_groups: 0,
            applied_groups: 0,
            unknown_groups: 0,
            relocated_groups: 0,
            commits_to_reapply: 0,
        };
        let mut commits = BTreeSet::new();
        // A window of the log: `buf` holds the bytes from `buf_lsn` on.
        let (mut buf_lsn, mut buf) = (start, Vec::<u8>::new());
        let mut lsn = start;
        type Decode = for<'a> fn(&'a [u8], Lsn) -> Option<(redo::GroupHeader, &'a [u8])>;
        let (hdr, decode): (usize, Decode) = if self.v1 {
            (GROUP_HDR_V1, decode_group_v1)
        } else {
            (GROUP_HDR, decode_group)
        };
        loop {
            let off = (lsn - buf_lsn) as usize;
            let need = match buf.get(off..off + hdr) {
                // A version-2 header keeps its LSN's low 32 bits: one an
                // earlier lap left is refused before the length it claims
                // is read in, as recovery's reader does.
                Some(h) if !self.v1 && !group_at(h, lsn) => break,
                Some(h) => hdr as u64 + u64::from(get_u32(h, 0)),
                None => hdr as u64,
            };
            // A group never extends past one lap of the log.
            if lsn - start + need > cap {
                break;
            }
            if (buf.len() - off) < need as usize {
                buf.drain(..off);
                buf_lsn = lsn;
                let have_end = buf_lsn + buf.len() as u64;
                let want = (need as usize - buf.len())
                    .max(SCAN_CHUNK)
                    .min((start + cap - have_end) as usize);
                let more = self.read(have_end, want)?;
                buf.extend_from_slice(&more);
                continue;
            }
            let Some((h, payload)) =
                decode(&buf[off..], lsn).filter(|(h, _)| cp.admits(lsn, h.epoch))
            else {
                break;
            };
            s.groups += 1;
            match h.kind {
                kind::MTR => s.mtr_groups += 1,
                kind::TXN_COMMIT => {
                    s.commit_groups += 1;
                    commits.insert(lsn);
                }
                kind::TXN_APPLIED => {
                    s.applied_groups += 1;
                    if payload.len() == 8 {
                        commits.remove(&get_u64(payload, 0));
                    }
                }
                kind::TXN_RELOCATED => {
                    s.relocated_groups += 1;
                    // A malformed group is the engine's business at
                    // recovery; here it only adds no commits.
                    for (commit, _) in decode_relocation(payload).unwrap_or_default() {
                        commits.insert(commit);
                    }
                }
                _ => s.unknown_groups += 1,
            }
            lsn += need;
        }
        s.end_lsn = lsn;
        s.bytes_beyond_checkpoint = lsn - start;
        s.commits_to_reapply = commits.len() as u64;
        Ok(s)
    }
}

fn redo(dir: &Path, creation_id: u64, warnings: &mut Vec<String>) -> Result<Redo> {
    let mut files: Vec<LogFile> = Vec::new();
    let mut reader = LogReader {
        files: Vec::new(),
        area: 0,
        v1: false,
    };
    let mut checkpoints: Vec<CheckpointSlot> = Vec::new();
    for i in 0.. {
        let name = redo::file_name(i);
        let path = dir.join(&name);
        if !path.exists() {
            match files.first() {
                None => warnings.push(format!(
                    "{name} is missing: the data files exist but the redo log does not"
                )),
                Some(f0) => warnings.push(format!(
                    "{name} is missing ({} log files expected)",
                    f0.header.n_files
                )),
            }
            break;
        }
        let (f, len) = open(&path)?;
        let hdr = read_upto(&f, &path, 0, LOG_FILE_HDR as usize, len)?;
        let h =
            LogFileHeader::decode(&hdr).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if h.creation_id != creation_id {
            warnings.push(format!(
                "{name}: redo log of another database (creation id {:#018x} differs from the data files')",
                h.creation_id
            ));
        }
        if h.file_index != i as u32 {
            warnings.push(format!("{name}: header says file index {}", h.file_index));
        }
        if len < h.file_size {
            warnings.push(format!(
                "{name}: truncated: {len} bytes, header says {}",
                h.file_size
            ));
        }
        if i == 0 {
            for &o in &CHECKPOINT_SLOTS {
                let b = hdr.get(o as usize..).unwrap_or_default();
                checkpoints.push(CheckpointSlot {
                    offset: o,
                    // As recovery reads a valid slot (one of the earlier
                    // layout as epoch 0), else the bytes as they lie.
                    stored: Checkpoint::open(b).unwrap_or_else(|_| Checkpoint::stored(b)),
                    valid: Checkpoint::decode(b).is_some(),
                });
            }
        } else if h.file_size != files.first().map_or(0, |f0| f0.header.file_size) {
            warnings.push(format!("{name}: file size differs from redo-0's"));
        }
        files.push(LogFile {
            name,
            version: h.version,
            header: h,
            bytes: len,
        });
        reader.v1 |= h.version == LOG_VERSION_V1;
        reader.files.push((f, path));
        if files.len() == files[0].header.n_files as usize {
            break;
        }
    }
    let winner = checkpoints
        .iter()
        .enumerate()
        .filter(|(_, c)| c.valid)
        .max_by_key(|(_, c)| c.stored.no)
        .map(|(i, _)| i);
    if winner.is_none() && !files.is_empty() {
        warnings.push("redo-0.keel: no valid checkpoint slot".into());
    }
    // A decoded header's file size exceeds LOG_FILE_HDR: the area is not empty.
    let capacity = match files.first() {
        Some(f0) => {
            reader.area = f0.header.file_size - LOG_FILE_HDR;
            reader.capacity()
        }
        None => 0,
    };
    let scan = match winner {
        Some(w) if capacity > 0 => Some(reader.scan(&checkpoints[w].stored)?),
        _ => None,
    };
    if reader.v1 {
        warnings.push(format!(
            "the redo log is of format version {LOG_VERSION_V1} (an earlier Keel): this Keel opens \
             it only if it has nothing to recover (then rewrites it as version {LOG_VERSION}); \
             otherwise open it once with the earlier Keel first"
        ));
    }
    if let Some(s) = &scan {
        if s.unknown_groups > 0 {
            warnings.push(format!(
                "{} redo groups of an unknown kind after the checkpoint (recovery would refuse them)",
                s.unknown_groups
            ));
        }
    }
    Ok(Redo {
        files,
        capacity,
        checkpoints,
        winner,
        scan,
    })
}

fn dblwr(dir: &Path, creation_id: u64, warnings: &mut Vec<String>) -> Result<Vec<DblwrFile>> {
    let mut out = Vec::new();
    for i in 0.. {
        let name = doublewrite::file_name(i);
        let path = dir.join(&name);
        if !path.exists() {
            break;
        }
        let (f, len) = open(&path)?;
        let b = read_upto(&f, &path, 0, 4096, len)?;
        let mut file = DblwrFile {
            name: name.clone(),
            bytes: len,
            header: None,
            areas_written: 0,
            pages_held: 0,
            newest_seq: None,
        };
        if b.len() < doublewrite::FileHeader::LEN || b.iter().all(|&x| x == 0) {
            // Blank (or empty): no copies; the engine formats afresh.
            out.push(file);
            continue;
        }
        let h = doublewrite::FileHeader::decode(&b)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        if h.creation_id != creation_id {
            warnings.push(format!(
                "{name}: creation id {:#018x} differs from the data files'",
                h.creation_id
            ));
        }
        // Area geometry: H header blocks then P slots; local area k at
        // page_size × (1 + k × (H + P)). The decoded header bounds P and
        // the areas, so none of this overflows.
        let (ps, p) = (u64::from(h.page_size), u64::from(h.pages_per_area));
        let hdr_blocks = (area_header_len(p as usize) as u64).div_ceil(ps);
        for k in 0..u64::from(h.areas_in_file) {
            let off = ps * (1 + k * (hdr_blocks + p));
            let a = read_upto(&f, &path, off, (hdr_blocks * ps) as usize, len)?;
            match doublewrite::AreaHeader::decode(&a, p as usize) {
                Ok(Some(area)) => {
                    file.areas_written += 1;
                    file.pages_held += area.entries.len() as u64;
                    file.newest_seq = file.newest_seq.max(Some(area.seq));
                }
                Ok(None) => {}
                Err(e) => warnings.push(format!("{name}: local area {k} skipped at recovery: {e}")),
            }
        }
        file.header = Some(DblwrHeader {
            version: doublewrite::FileHeader::VERSION,
            fields: h,
        });
        out.push(file);
    }
    Ok(out)
}
