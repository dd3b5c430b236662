//! Crash recovery at open, the redo part: replay every complete record
//! group from the checkpoint (idempotently: a page change is applied only
//! when the page is older than the group) and collect the commits whose
//! record is in the log but whose "applied" marker is not. An incomplete
//! tail ends the log. (Torn pages were repaired from the doublewrite area
//! before this runs.)
//!
//! Recovery does not apply those commits itself: it hands them up, and the
//! database (`crate::db`) finishes them once the page cleaners run, through
//! the same path as any commit (the log knows nothing of transactions).
//!
//! # A page that was never written
//!
//! A page read as all zeros, or past the end of its file, was never
//! written in place. That is fine only if the first change redo applies to
//! it creates it (a record that starts from a zeroed page): then redo
//! rebuilds it whole. Any other first change means a write the checkpoint
//! relied on was lost, and applying diffs to zeros would make a silently
//! wrong page; recovery stops with `CorruptPage` naming the page instead.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use super::format::{self, kind, GROUP_HDR};
use super::Log;
use crate::buffer::BufferPool;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::page::Lsn;
use crate::page::{page_lsn, PageId};

/// What recovery did.
#[derive(Debug, Default, Clone)]
pub struct RecoveryReport {
    /// Checkpoint LSN recovery started from.
    pub checkpoint_lsn: Lsn,
    /// End of the valid log.
    pub end_lsn: Lsn,
    /// Record groups found after the checkpoint.
    pub groups: u64,
    /// Page records applied (page older than the record).
    pub page_records_applied: u64,
    /// Page records skipped (page already newer).
    pub page_records_skipped: u64,
    /// Distinct pages touched.
    pub pages_touched: u64,
    /// Transactions whose write sets were re-applied.
    pub txns_reapplied: u64,
    /// Torn pages restored from the doublewrite area.
    pub torn_pages_repaired: u64,
    /// Wall time in milliseconds.
    pub time_ms: u64,
}

impl fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "redo from LSN {} to {} ({} bytes): {} groups, {} page records applied, {} skipped, {} pages touched, \
             {} transactions re-applied, {} torn pages repaired, {} ms",
            self.checkpoint_lsn,
            self.end_lsn,
            self.end_lsn - self.checkpoint_lsn,
            self.groups,
            self.page_records_applied,
            self.page_records_skipped,
            self.pages_touched,
            self.txns_reapplied,
            self.torn_pages_repaired,
            self.time_ms
        )
    }
}

struct Group {
    kind: u8,
    end: Lsn,
    start: Lsn,
    payload: std::ops::Range<usize>,
}

/// A commit whose record recovery found without its "applied" marker.
pub(crate) struct Unfinished {
    /// The commit's id: the LSN of its original record group.
    pub lsn: Lsn,
    /// Its logical record.
    pub record: Arc<[u8]>,
}

/// Replay `log` (just opened) into the pages of `pool` and return what it
/// did and the commits left to finish. `torn_pages_repaired` is what the
/// doublewrite repair did before, for the report.
pub(crate) fn recover(
    log: &Log,
    pool: &BufferPool,
    metrics: &Metrics,
    torn_pages_repaired: u64,
) -> Result<(RecoveryReport, Vec<Unfinished>)> {
    let t0 = Instant::now();
    let mut rep = RecoveryReport {
        checkpoint_lsn: log.checkpoint_lsn(),
        ..Default::default()
    };
    rep.torn_pages_repaired = torn_pages_repaired;
    let (data, groups) = scan(log, rep.checkpoint_lsn)?;
    rep.groups = groups.len() as u64;
    rep.end_lsn = groups.last().map_or(rep.checkpoint_lsn, |g| g.end);
    // Appends continue at the end of the valid log; everything up to there
    // is already durable, so the write-ahead rule holds for replayed pages.
    log.reset_end(rep.end_lsn);
    let mut touched = HashSet::new();
    let mut commits: BTreeMap<Lsn, &[u8]> = BTreeMap::new();
    for g in &groups {
        match g.kind {
            kind::MTR => apply_mtr(
                pool,
                &data[g.payload.clone()],
                g.start,
                g.end,
                &mut rep,
                &mut touched,
            )?,
            kind::TXN_COMMIT => {
                commits.insert(g.start, &data[g.payload.clone()]);
            }
            kind::TXN_RELOCATED => {
                let moved =
                    super::inflight::decode_relocation(&data[g.payload.clone()]).map_err(|m| {
                        Error::Corruption(format!("redo group at LSN {}: {m}", g.start))
                    })?;
                for (lsn, record) in moved {
                    commits.insert(lsn, record);
                }
            }
            kind::TXN_APPLIED => {
                let p = &data[g.payload.clone()];
                let lsn = p.try_into().map(u64::from_le_bytes).map_err(|_| {
                    Error::Corruption(format!(
                        "applied marker at LSN {} has {} bytes",
                        g.start,
                        p.len()
                    ))
                })?;
                commits.remove(&lsn);
            }
            k => {
                return Err(Error::Corruption(format!(
                    "unknown redo group kind {k} at LSN {}",
                    g.start
                )))
            }
        }
    }
    rep.pages_touched = touched.len() as u64;
    let unfinished = commits
        .into_iter()
        .map(|(lsn, record)| Unfinished {
            lsn,
            record: Arc::from(record),
        })
        .collect();
    rep.time_ms = t0.elapsed().as_millis() as u64;
    let m = metrics;
    Metrics::set(&m.recovery_groups_applied, rep.groups);
    Metrics::set(&m.recovery_page_records_applied, rep.page_records_applied);
    Metrics::set(&m.recovery_pages_touched, rep.pages_touched);
    Metrics::set(&m.recovery_torn_pages_repaired, rep.torn_pages_repaired);
    Metrics::set(&m.recovery_time_ms, rep.time_ms);
    Ok((rep, unfinished))
}

/// Every complete group from `start`; stops at the first invalid one. The
/// log is read in chunks, so a short log after a clean shutdown costs one
/// small read rather than the whole capacity.
fn scan(log: &Log, start: Lsn) -> Result<(Vec<u8>, Vec<Group>)> {
    const CHUNK: usize = 1 << 20;
    let cap = log.capacity() as usize;
    let mut data: Vec<u8> = Vec::new();
    let mut out = Vec::new();
    let (mut off, mut lsn) = (0usize, start);
    loop {
        // Make sure a whole header, and then the whole group, is in memory.
        let need = match data.get(off..off + GROUP_HDR) {
            Some(h) => GROUP_HDR + crate::page::get_u32(h, 0) as usize,
            None => GROUP_HDR,
        };
        if data.len() < off + need && data.len() < cap {
            let want = (off + need - data.len()).max(CHUNK).min(cap - data.len());
            let more = log.read_at_lsn(start + data.len() as u64, want)?;
            data.extend_from_slice(&more);
            continue;
        }
        let Some((h, _)) = format::decode_group(&data[off..], lsn) else {
            break;
        };
        let len = GROUP_HDR + h.len as usize;
        out.push(Group {
            kind: h.kind,
            start: lsn,
            end: lsn + len as u64,
            payload: off + GROUP_HDR..off + len,
        });
        off += len;
        lsn += len as u64;
    }
    Ok((data, out))
}

fn apply_mtr(
    pool: &BufferPool,
    payload: &[u8],
    start: Lsn,
    end: Lsn,
    rep: &mut RecoveryReport,
    touched: &mut HashSet<PageId>,
) -> Result<()> {
    let recs = format::decode_page_records(payload, pool.cfg.page_size)
        .map_err(|m| Error::Corruption(format!("redo group ending at LSN {end}: {m}")))?;
    for r in recs {
        let id = PageId::new(r.space, r.page_no);
        let mut page = match pool.write(id) {
            Ok(p) => p,
            // Never written before the crash: fine if this change creates
            // it (module doc), a lost write otherwise.
            Err(Error::UnwrittenPage { page, path, reason }) => {
                if !r.zeroed {
                    return Err(Error::CorruptPage {
                        page,
                        path,
                        reason: format!(
                            "the page was never written ({reason}), but the redo group ending at \
                             LSN {end} changes it without creating it: a page write the last \
                             checkpoint relied on was lost. Only a copy in the doublewrite area \
                             (there is none) or the redo log from the page's creation could \
                             rebuild it; restore the database from a backup"
                        ),
                    });
                }
                pool.create(id)?
            }
            Err(Error::CorruptPage { page, path, reason }) => {
                return Err(Error::CorruptPage {
                    page,
                    path,
                    reason: format!(
                        "{reason}; redo needs this page and the doublewrite area has no valid copy of it \
                         (a torn write with doublewrite off cannot be repaired)"
                    ),
                })
            }
            Err(other) => return Err(other),
        };
        touched.insert(id);
        if page_lsn(&page) >= end {
            rep.page_records_skipped += 1;
            continue;
        }
        format::apply_page_record(&mut page, &r);
        pool.mark_dirty(&mut page, start, end);
        rep.page_records_applied += 1;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use crate::config::Options;
    use crate::io::faulty::{CrashMode, FaultyFs};
    use crate::page::PageId;
    use crate::{Db, Error};

    fn opts() -> Options {
        Options {
            page_size: 4096,
            buffer_pool_size: 256 * 4096,
            data_files: 1,
            doublewrite: false,
            ..Options::default()
        }
    }

    #[test]
    fn a_lost_page_is_reported_not_rebuilt_from_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFs::new());
        let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
        let t = db.create_table("t").unwrap();
        t.put(b"k", b"before").unwrap();
        let root = t.tree.root();
        // The root is written and checkpointed, then changed again.
        db.flush().unwrap();
        t.put(b"k", b"after").unwrap();
        drop(t);
        fs.crash(CrashMode::DropUnsynced);
        db.simulate_crash();
        // The page's image is lost: all zeros where it was.
        let (file, off) = crate::space::locate(root.page_no, 1, 4096);
        let path = dir.path().join(crate::space::data_file_name(file));
        fs.write_durable(&path, off, &[0u8; 4096]).unwrap();
        let err = Db::open_with_fs(dir.path(), opts(), Some(fs.clone()))
            .err()
            .unwrap();
        match &err {
            Error::CorruptPage { page, reason, .. } => {
                assert_eq!(*page, PageId::new(0, root.page_no));
                assert!(
                    reason.contains("never written") && reason.contains("lost"),
                    "{reason}"
                );
            }
            e => panic!("expected CorruptPage, got {e}"),
        }
    }

    #[test]
    fn a_page_created_after_the_checkpoint_is_rebuilt_from_its_redo() {
        let dir = tempfile::tempdir().unwrap();
        let fs = Arc::new(FaultyFs::new());
        let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
        db.flush().unwrap();
        let t = db.create_table("t").unwrap();
        t.put(b"k", b"v").unwrap();
        drop(t);
        db.flush_log().unwrap();
        fs.crash(CrashMode::DropUnsynced);
        db.simulate_crash();
        let db = Db::open_with_fs(dir.path(), opts(), Some(fs.clone())).unwrap();
        let t = db.table("t").unwrap();
        assert_eq!(t.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        t.check().unwrap();
    }
}
