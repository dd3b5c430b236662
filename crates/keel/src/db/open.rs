//! The steps of `Db::open` after the engine's files are open: laying out
//! a new space, finishing what recovery handed up (commits logged but not
//! applied), and dropping what unfinished bulk loads had built.

use std::ops::Bound;

use crate::btree::bulk;
use crate::btree::BTree;
use crate::catalog::{decode_root, CATALOG_ROOT};
use crate::engine::admission::Purpose;
use crate::engine::{space_header as sh, Engine};
use crate::error::Result;
use crate::metrics::Metrics;
use crate::mtr::{mtr_bound, Mtr};
use crate::page::{init_page, put_u32, PageId, PageType};

/// Finish the commits recovery found logged but not applied, then take a
/// sharp checkpoint. Whole records are re-applied first, oldest first:
/// among them the compensations of an earlier open that a crash cut
/// short. Keys-only records are rolled back after them, newest first
/// (`txn::commit`'s module doc, "Rolling back a commit a crash cut
/// short"); their rows are not any other unfinished commit's (each held
/// its row locks until its marker).
pub(super) fn finish_recovery(
    trx: &crate::txn::TrxSys,
    unfinished: Vec<crate::redo::recovery::Unfinished>,
) -> Result<()> {
    let e = &*trx.engine;
    let mut keys_only = Vec::new();
    let mut reapplied = 0u64;
    for u in unfinished {
        if crate::txn::record::decode(&u.record)?.values {
            crate::txn::finish_unapplied(trx, u.lsn, u.record)?;
            reapplied += 1;
        } else {
            keys_only.push(u);
        }
    }
    let rolled_back = keys_only.len() as u64;
    keys_only.sort_by_key(|u| std::cmp::Reverse(u.lsn));
    for u in keys_only {
        crate::txn::roll_back_unfinished(trx, u.lsn, u.record)?;
    }
    Metrics::set(&e.metrics.recovery_txns_reapplied, reapplied);
    Metrics::set(&e.metrics.recovery_txns_rolled_back, rolled_back);
    if reapplied > 0 {
        log::warn!("recovery: finished {reapplied} commits that were logged but not applied");
    }
    if rolled_back > 0 {
        log::warn!(
            "recovery: rolled back {rolled_back} commits that were logged but not finished \
             (none was acknowledged at flush_log_at_trx_commit = 1)"
        );
    }
    e.flush_and_checkpoint()
}

/// Drop what unfinished bulk loads had built (see `btree::bulk`): every
/// table whose root still carries a pending mark is left empty, and not a
/// page leaks. A mark outlives its load when the database crashed while
/// the load ran, when it was closed meanwhile (the load then fails with
/// `Error::Closed` and may no longer write), or when a failed load could
/// not free its pages (an I/O error); the open cannot tell which.
pub(super) fn finish_bulk_loads(e: &Engine, catalog: BTree, created: bool) -> Result<()> {
    if created {
        return Ok(());
    }
    let entries: Vec<(Vec<u8>, Vec<u8>)> = catalog
        .range(e, Bound::Unbounded, Bound::Unbounded, false)
        .collect::<Result<_>>()?;
    for (name, v) in entries {
        let name = String::from_utf8_lossy(&name);
        // A table whose root cannot be read must not keep the database from
        // opening (reading the table reports the error, as it always did);
        // a load pending into it stays pending until an open can read it.
        let pending = decode_root(e.space_id(), &name, &v)
            .and_then(|root| Ok((root, e.pool.read(root)?)))
            .map(|(root, page)| (root, crate::btree::node::NodeRef::new(&page).pending_bulk()));
        let (root, pending) = match pending {
            Ok(found) => found,
            Err(err) => {
                log::warn!(
                    "table `{name}`: cannot read its root to look for an unfinished bulk \
                     load: {err}"
                );
                continue;
            }
        };
        if let Some(hidden) = pending {
            log::warn!(
                "table `{name}`: a bulk load into it never finished (the database was \
                 closed or crashed while it ran, or the failed load could not free its \
                 pages); freeing what it had written (the table stays empty)"
            );
            bulk::drop_hidden(
                e,
                root,
                PageId::new(e.space_id(), hidden),
                crate::txn::version::free_external,
            )?;
        }
    }
    Ok(())
}

/// Lay out a new space: the header page, an empty catalog tree and the
/// undo directory (every rollback segment empty). Once
/// that is durable in the log, `data-0`'s header marks the database created
/// (`engine::create`).
pub(super) fn format_space(e: &Engine) -> Result<()> {
    let space = e.space_id();
    let budget = e.adm.budget(Purpose::New);
    budget.ensure(mtr_bound(3, e.page_size()))?;
    let mut mtr = Mtr::new(e, &budget);
    let mut hdr = e.pool.create(PageId::new(space, 0))?;
    init_page(&mut hdr, PageId::new(space, 0), PageType::SpaceHeader);
    put_u32(&mut hdr, sh::HWM, CATALOG_ROOT + 1);
    put_u32(&mut hdr, sh::CATALOG_ROOT, CATALOG_ROOT);
    let root_id = PageId::new(space, CATALOG_ROOT);
    let mut root = e.pool.create(root_id)?;
    init_page(&mut root, root_id, PageType::BtreeLeaf);
    BTree::init_root(&mut root);
    mtr.keep_header(hdr)?;
    mtr.keep(root);
    // The undo directory takes the next page (2).
    crate::undo::create_undo_dir(&mut mtr)?;
    mtr.commit()?;
    e.log.write_up_to(e.log.lsn(), true)?;
    e.pool.space.finish_creation()?;
    e.flush_and_checkpoint()
}
