//! The text form of `keel inspect`.

use std::fmt::Write as _;

use super::{DblwrHeader, Inspection};

fn mib(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / f64::from(1u32 << 20))
}

/// The text form.
pub fn render(ins: &Inspection) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "Keel database {}", ins.dir.display());
    let _ = writeln!(o, "\nDATA FILES");
    for d in &ins.data_files {
        let h = &d.header;
        let _ = writeln!(
            o,
            "  {}: version {}, page size {}, space {}, file {}/{}, {} pages per extent, \
             creation id {:#018x}; {} bytes = {} pages",
            d.name,
            h.version,
            h.page_size,
            h.space_id,
            h.file_index,
            h.n_files,
            h.extent_pages,
            h.creation_id,
            d.bytes,
            d.pages
        );
    }
    match &ins.space {
        Some(s) => {
            let _ = writeln!(
                o,
                "  space header (page 0 as on disk, page LSN {}): high-water mark {}, {} pages allocated, \
                 {} free (list head {}), catalog root {}, undo directory {}; {} data pages in the files",
                s.page_lsn,
                s.hwm,
                s.allocated_pages,
                s.free_pages,
                s.free_list_head,
                s.catalog_root,
                s.undo_dir,
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
            f.name,
            f.version,
            f.header.file_index,
            f.header.n_files,
            f.header.file_size,
            f.header.creation_id,
            f.bytes
        );
    }
    for (i, c) in r.checkpoints.iter().enumerate() {
        let _ = writeln!(
            o,
            "  checkpoint slot {i} (byte {}): number {}, LSN {}, epoch {} from LSN {}, {}{}",
            c.offset,
            c.stored.no,
            c.stored.lsn,
            c.stored.epoch,
            c.stored.epoch_lsn,
            if c.valid { "valid" } else { "invalid" },
            if r.winner == Some(i) { " <- wins" } else { "" }
        );
    }
    match &r.scan {
        Some(s) => {
            let _ = writeln!(
                o,
                "  log end: LSN {} ({} bytes beyond checkpoint LSN {}); {} groups: {} mini-transactions, \
                 {} commits, {} commit-applied, {} relocated-commits{}",
                s.end_lsn,
                s.bytes_beyond_checkpoint,
                s.checkpoint_lsn,
                s.groups,
                s.mtr_groups,
                s.commit_groups,
                s.applied_groups,
                s.relocated_groups,
                if s.unknown_groups > 0 {
                    format!(", {} of unknown kind", s.unknown_groups)
                } else {
                    String::new()
                }
            );
            let _ = writeln!(
                o,
                "  recovery would replay {} bytes / {} groups and finish {} transactions (re-apply or \
                 roll back)",
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
            Some(DblwrHeader { version, fields: h }) => {
                let _ = writeln!(
                    o,
                    "  {}: version {}, page size {}, file {}/{}, {} areas ({} here) of {} pages, \
                     creation id {:#018x}; {} bytes; {} areas written holding {} pages{}",
                    d.name,
                    version,
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
