//! `keel inspect DIR`: what can be read from a closed (or crashed) database
//! directory without opening the engine — nothing is written, no recovery
//! runs. The file headers, the checkpoint slots, the end of the redo log
//! (how much recovery would replay), the doublewrite files and the space
//! header, as text or as one JSON object.
//!
//! The engine's readers of these structures are internal, so the few lines
//! that locate an LSN in the log files, the space-header offsets and the
//! doublewrite area geometry are repeated here from `docs/format.md`, on top
//! of the engine's public decoders (`FileHeader::decode`,
//! `LogFileHeader::decode`, `Checkpoint::decode`, `decode_group`,
//! `AreaHeader::decode`, `verify_page`).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use keel::flush::doublewrite;
use keel::page::{get_u32, get_u64, page_lsn, verify_page, PageId};
use keel::redo::format::{
    decode_group, kind, Checkpoint, LogFileHeader, CHECKPOINT_SLOTS, GROUP_HDR, LOG_FILE_HDR,
};
use keel::space::header::FileHeader;
use keel::Lsn;
use serde::Serialize;

/// Print the file headers, checkpoints, log end and page counts of a closed or
/// crashed database directory, without opening it (nothing is written).
#[derive(Args, Debug, Clone)]
pub struct InspectArgs {
    /// The database directory.
    pub dir: PathBuf,
    /// Print everything as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Space header fields (page 0, body offsets; `docs/format.md`).
const SPACE_HWM: usize = 32;
const SPACE_FREE_HEAD: usize = 36;
const SPACE_FREE_COUNT: usize = 40;
const SPACE_CATALOG_ROOT: usize = 44;
/// Bytes of a doublewrite file header that carry meaning (`docs/format.md`).
const DBLWR_HEADER_LEN: usize = 52;
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
    /// Format version.
    pub version: u32,
    /// Page size in bytes.
    pub page_size: u32,
    /// Space id.
    pub space_id: u32,
    /// This file's index.
    pub file_index: u32,
    /// Files of the space.
    pub n_files: u32,
    /// Pages per extent.
    pub extent_pages: u32,
    /// Creation id.
    pub creation_id: u64,
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
    /// Redo format version.
    pub version: u32,
    /// This file's index.
    pub file_index: u32,
    /// Files in the group.
    pub n_files: u32,
    /// Size of each file (header).
    pub file_size: u64,
    /// Creation id of the data files.
    pub creation_id: u64,
    /// Length on disk.
    pub bytes: u64,
}

/// One checkpoint slot.
#[derive(Serialize, Debug)]
pub struct CheckpointSlot {
    /// Byte offset in `redo-0.keel`.
    pub offset: u64,
    /// Checkpoint number as stored.
    pub no: u64,
    /// Checkpoint LSN as stored.
    pub lsn: Lsn,
    /// Non-zero number and matching checksum.
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
    /// Groups of an unknown kind (recovery would refuse them).
    pub unknown_groups: u64,
    /// Commits without a later "applied" group: recovery re-applies them.
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

/// A doublewrite file header.
#[derive(Serialize, Debug)]
pub struct DblwrHeader {
    /// Format version.
    pub version: u32,
    /// Page size in bytes.
    pub page_size: u32,
    /// This file's index.
    pub file_index: u32,
    /// Doublewrite files.
    pub n_files: u32,
    /// Areas over all files.
    pub n_areas: u32,
    /// Areas in this file.
    pub areas_in_file: u32,
    /// Page slots per area.
    pub pages_per_area: u32,
    /// Creation id of the data files.
    pub creation_id: u64,
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
    let first = dir.join(keel::space::data_file_name(0));
    if !first.exists() {
        bail!(
            "{} holds no Keel database (no {})",
            dir.display(),
            keel::space::data_file_name(0)
        );
    }
    let mut warnings = Vec::new();
    let (data_files, space) = data(dir, &mut warnings)?;
    let creation_id = data_files[0].creation_id;
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
        let name = keel::space::data_file_name(i);
        let path = dir.join(&name);
        if !path.exists() {
            if let Some(f0) = files.first() {
                if i < f0.n_files as usize {
                    warnings.push(format!(
                        "{name} is missing ({} data files expected)",
                        f0.n_files
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
        let h = FileHeader::decode(&b).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let ps = u64::from(h.page_size.max(1));
        if len % ps != 0 {
            warnings.push(format!(
                "{name}: {len} bytes is not a whole number of {ps}-byte pages (truncated or torn)"
            ));
        }
        if h.file_index as usize != i {
            warnings.push(format!("{name}: header says file index {}", h.file_index));
        }
        if let Some(f0) = files.first() {
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
            version: h.version,
            page_size: h.page_size,
            space_id: h.space_id,
            file_index: h.file_index,
            n_files: h.n_files,
            extent_pages: h.extent_pages,
            creation_id: h.creation_id,
            bytes: len,
            pages: (len / ps).saturating_sub(1),
        });
        handles.push((f, path, len));
        i += 1;
    }
    // Page 0: extent 0 of file 0, right after the header block.
    let f0 = &files[0];
    let ps = f0.page_size as usize;
    let (f, path, len) = &handles[0];
    let page = read_upto(f, path, ps as u64, ps, *len)?;
    let space = if page.len() < ps {
        warnings.push(format!("{}: page 0 (the space header) is missing", f0.name));
        None
    } else if let Err(e) = verify_page(&page, PageId::new(f0.space_id, 0)) {
        warnings.push(format!(
            "{}: page 0 (the space header) is unreadable: {e} (the doublewrite area may hold a copy)",
            f0.name
        ));
        None
    } else {
        let hwm = get_u32(&page, SPACE_HWM);
        let free = get_u32(&page, SPACE_FREE_COUNT);
        Some(SpaceHeader {
            page_lsn: page_lsn(&page),
            hwm,
            free_list_head: get_u32(&page, SPACE_FREE_HEAD),
            free_pages: free,
            catalog_root: get_u32(&page, SPACE_CATALOG_ROOT),
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

    /// Every valid group from `start` to the first invalid one.
    fn scan(&self, start: Lsn) -> Result<LogScan> {
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
            commits_to_reapply: 0,
        };
        let mut commits = BTreeSet::new();
        // A window of the log: `buf` holds the bytes from `buf_lsn` on.
        let (mut buf_lsn, mut buf) = (start, Vec::<u8>::new());
        let mut lsn = start;
        loop {
            let off = (lsn - buf_lsn) as usize;
            let need = match buf.get(off..off + GROUP_HDR) {
                Some(h) => GROUP_HDR as u64 + u64::from(get_u32(h, 0)),
                None => GROUP_HDR as u64,
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
            let Some((h, payload)) = decode_group(&buf[off..], lsn) else {
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
    };
    let mut checkpoints: Vec<CheckpointSlot> = Vec::new();
    for i in 0.. {
        let name = keel::redo::log_file_name(i);
        let path = dir.join(&name);
        if !path.exists() {
            match files.first() {
                None => warnings.push(format!(
                    "{name} is missing: the data files exist but the redo log does not"
                )),
                Some(f0) => warnings.push(format!(
                    "{name} is missing ({} log files expected)",
                    f0.n_files
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
                let b = hdr.get(o as usize..o as usize + 20).unwrap_or(&[]);
                let cp = Checkpoint::decode(b);
                checkpoints.push(CheckpointSlot {
                    offset: o,
                    no: if b.len() >= 8 { get_u64(b, 0) } else { 0 },
                    lsn: if b.len() >= 16 { get_u64(b, 8) } else { 0 },
                    valid: cp.is_some(),
                });
            }
        } else if h.file_size != files.first().map_or(0, |f0| f0.file_size) {
            warnings.push(format!("{name}: file size differs from redo-0's"));
        }
        files.push(LogFile {
            name,
            version: get_u32(&hdr, 8),
            file_index: h.file_index,
            n_files: h.n_files,
            file_size: h.file_size,
            creation_id: h.creation_id,
            bytes: len,
        });
        reader.files.push((f, path));
        if files.len() == files[0].n_files as usize {
            break;
        }
    }
    let winner = checkpoints
        .iter()
        .enumerate()
        .filter(|(_, c)| c.valid)
        .max_by_key(|(_, c)| c.no)
        .map(|(i, _)| i);
    if winner.is_none() && !files.is_empty() {
        warnings.push("redo-0.keel: no valid checkpoint slot".into());
    }
    let capacity = match files.first() {
        Some(f0) if f0.file_size > LOG_FILE_HDR => {
            reader.area = f0.file_size - LOG_FILE_HDR;
            reader.capacity()
        }
        _ => 0,
    };
    let scan = match winner {
        Some(w) if capacity > 0 => Some(reader.scan(checkpoints[w].lsn)?),
        _ => None,
    };
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
        if b.len() < DBLWR_HEADER_LEN || b.iter().all(|&x| x == 0) {
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
        // page_size × (1 + k × (H + P)).
        let (ps, p) = (u64::from(h.page_size.max(1)), u64::from(h.pages_per_area));
        let hdr_blocks = (36 + 16 * p).div_ceil(ps);
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
            version: get_u32(&b, 8),
            page_size: h.page_size,
            file_index: h.file_index,
            n_files: h.n_files,
            n_areas: h.n_areas,
            areas_in_file: h.areas_in_file,
            pages_per_area: h.pages_per_area,
            creation_id: h.creation_id,
        });
        out.push(file);
    }
    Ok(out)
}

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20))
}

/// The text form.
pub fn render(ins: &Inspection) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "Keel database {}", ins.dir.display());
    let _ = writeln!(o, "\nDATA FILES");
    for d in &ins.data_files {
        let _ = writeln!(
            o,
            "  {}: version {}, page size {}, space {}, file {}/{}, {} pages per extent, \
             creation id {:#018x}; {} bytes = {} pages",
            d.name,
            d.version,
            d.page_size,
            d.space_id,
            d.file_index,
            d.n_files,
            d.extent_pages,
            d.creation_id,
            d.bytes,
            d.pages
        );
    }
    match &ins.space {
        Some(s) => {
            let _ = writeln!(
                o,
                "  space header (page 0 as on disk, page LSN {}): high-water mark {}, {} pages allocated, \
                 {} free (list head {}), catalog root {}; {} data pages in the files",
                s.page_lsn,
                s.hwm,
                s.allocated_pages,
                s.free_pages,
                s.free_list_head,
                s.catalog_root,
                s.file_pages
            );
        }
        None => {
            let _ = writeln!(o, "  space header: unreadable (see warnings)");
        }
    }
    let r = &ins.redo;
    let _ = writeln!(
        o,
        "\nREDO LOG ({} files, capacity {} = {} bytes)",
        r.files.len(),
        mib(r.capacity),
        r.capacity
    );
    for f in &r.files {
        let _ = writeln!(
            o,
            "  {}: version {}, file {}/{}, file size {} bytes, creation id {:#018x}; {} bytes on disk",
            f.name, f.version, f.file_index, f.n_files, f.file_size, f.creation_id, f.bytes
        );
    }
    for (i, c) in r.checkpoints.iter().enumerate() {
        let _ = writeln!(
            o,
            "  checkpoint slot {i} (byte {}): number {}, LSN {}, {}{}",
            c.offset,
            c.no,
            c.lsn,
            if c.valid { "valid" } else { "invalid" },
            if r.winner == Some(i) { " <- wins" } else { "" }
        );
    }
    match &r.scan {
        Some(s) => {
            let _ = writeln!(
                o,
                "  log end: LSN {} ({} bytes beyond checkpoint LSN {}); {} groups: {} mini-transactions, \
                 {} commits, {} commit-applied{}",
                s.end_lsn,
                s.bytes_beyond_checkpoint,
                s.checkpoint_lsn,
                s.groups,
                s.mtr_groups,
                s.commit_groups,
                s.applied_groups,
                if s.unknown_groups > 0 {
                    format!(", {} of unknown kind", s.unknown_groups)
                } else {
                    String::new()
                }
            );
            let _ = writeln!(
                o,
                "  recovery would replay {} bytes / {} groups and re-apply {} transactions",
                s.bytes_beyond_checkpoint, s.groups, s.commits_to_reapply
            );
        }
        None => {
            let _ = writeln!(o, "  log end: unknown (no valid checkpoint)");
        }
    }
    let _ = writeln!(o, "\nDOUBLEWRITE");
    if ins.doublewrite.is_empty() {
        let _ = writeln!(o, "  no doublewrite files");
    }
    for d in &ins.doublewrite {
        match &d.header {
            None => {
                let _ = writeln!(o, "  {}: blank ({} bytes): no copies", d.name, d.bytes);
            }
            Some(h) => {
                let _ = writeln!(
                    o,
                    "  {}: version {}, page size {}, file {}/{}, {} areas ({} here) of {} pages, \
                     creation id {:#018x}; {} bytes; {} areas written holding {} pages{}",
                    d.name,
                    h.version,
                    h.page_size,
                    h.file_index,
                    h.n_files,
                    h.n_areas,
                    h.areas_in_file,
                    h.pages_per_area,
                    h.creation_id,
                    d.bytes,
                    d.areas_written,
                    d.pages_held,
                    d.newest_seq
                        .map_or(String::new(), |s| format!(", newest batch {s}"))
                );
            }
        }
    }
    if !ins.warnings.is_empty() {
        let _ = writeln!(o, "\nWARNINGS");
        for w in &ins.warnings {
            let _ = writeln!(o, "  {w}");
        }
    }
    o
}
