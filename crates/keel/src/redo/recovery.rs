//! Crash recovery at open: repair torn pages from the doublewrite area,
//! replay every complete record group from the checkpoint (idempotently: a
//! page change is applied only when the page is older than the group), then
//! re-apply the write sets of transactions whose commit record is in the log
//! but whose "applied" marker is not. An incomplete tail ends the log.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::time::Instant;

use super::format::{self, kind, GROUP_HDR};
use crate::engine::Engine;
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

/// Recover the database behind `e` (whose log was just opened).
pub(crate) fn recover(e: &Engine) -> Result<RecoveryReport> {
    let t0 = Instant::now();
    let mut rep = RecoveryReport {
        checkpoint_lsn: e.log.checkpoint_lsn(),
        ..Default::default()
    };
    rep.torn_pages_repaired = e.torn_pages_repaired;
    let (data, groups) = scan(e, rep.checkpoint_lsn)?;
    rep.groups = groups.len() as u64;
    rep.end_lsn = groups.last().map_or(rep.checkpoint_lsn, |g| g.end);
    // Appends continue at the end of the valid log; everything up to there
    // is already durable, so the write-ahead rule holds for replayed pages.
    e.log.reset_end(rep.end_lsn);
    let mut touched = HashSet::new();
    let mut commits: BTreeMap<Lsn, std::ops::Range<usize>> = BTreeMap::new();
    for g in &groups {
        match g.kind {
            kind::MTR => apply_mtr(
                e,
                &data[g.payload.clone()],
                g.start,
                g.end,
                &mut rep,
                &mut touched,
            )?,
            kind::TXN_COMMIT => {
                commits.insert(g.start, g.payload.clone());
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
    for payload in commits.values() {
        crate::txn::apply_record(e, &data[payload.clone()])?;
        rep.txns_reapplied += 1;
    }
    e.shutdown_flush()?;
    rep.time_ms = t0.elapsed().as_millis() as u64;
    let m = &e.metrics;
    Metrics::set(&m.recovery_groups_applied, rep.groups);
    Metrics::set(&m.recovery_page_records_applied, rep.page_records_applied);
    Metrics::set(&m.recovery_pages_touched, rep.pages_touched);
    Metrics::set(&m.recovery_txns_reapplied, rep.txns_reapplied);
    Metrics::set(&m.recovery_torn_pages_repaired, rep.torn_pages_repaired);
    Metrics::set(&m.recovery_time_ms, rep.time_ms);
    Ok(rep)
}

/// Every complete group from `start`; stops at the first invalid one. The
/// log is read in chunks, so a short log after a clean shutdown costs one
/// small read rather than the whole capacity.
fn scan(e: &Engine, start: Lsn) -> Result<(Vec<u8>, Vec<Group>)> {
    const CHUNK: usize = 1 << 20;
    let cap = e.log.capacity() as usize;
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
            let more = e.log.read_at_lsn(start + data.len() as u64, want)?;
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
    e: &Engine,
    payload: &[u8],
    start: Lsn,
    end: Lsn,
    rep: &mut RecoveryReport,
    touched: &mut HashSet<PageId>,
) -> Result<()> {
    let recs = format::decode_page_records(payload, e.page_size())
        .map_err(|m| Error::Corruption(format!("redo group ending at LSN {end}: {m}")))?;
    for r in recs {
        let id = PageId::new(r.space, r.page_no);
        let mut page = match e.pool.write(id) {
            Ok(p) => p,
            // Never written before the crash: it starts from zeros.
            Err(Error::UnwrittenPage { .. }) => e.pool.create(id)?,
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
        e.pool.mark_dirty(&mut page, start, end);
        rep.page_records_applied += 1;
    }
    Ok(())
}
