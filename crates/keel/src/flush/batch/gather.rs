//! Which pages a flush call writes: the pages asked for and, as
//! `flush_neighbors` says, their dirty neighbors, claimed group by group
//! and handed to the call's pipeline (see the parent module).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::{FlushKind, Item, Pipeline, CLAIM_GROUP};
use crate::buffer::BufferPool;
use crate::flush::neighbors::{self, NeighborMode};
use crate::flush::WriteBack;
use crate::page::PageId;

impl WriteBack {
    /// Claim `fids` (and their neighbors) group by group and hand each
    /// group to `p`, until every page is handed over (true) or `p` has
    /// failed (false). `first` says whether this is the call's first list,
    /// whose first claim alone may wait for a latch.
    pub(super) fn gather<'a>(
        &self,
        p: &mut Pipeline<'_, 'a, '_>,
        inst: usize,
        fids: &[u32],
        kind: FlushKind,
        first: bool,
    ) -> bool {
        let pool = p.pool;
        let mode = match kind {
            FlushKind::Single => NeighborMode::Off,
            _ => self.flush_neighbors(),
        };
        // A flush-list batch's first page is the list's oldest: its claim,
        // taken holding nothing, may wait a little for a user thread's
        // latch (see `buffer::claim`, "The oldest page").
        // Only the call's first claim: a later one would wait holding the
        // claims of the group being formed (batch module doc, "One batch
        // across instances").
        let mut wait = match kind {
            FlushKind::Lru | FlushKind::Single => Duration::ZERO,
            _ if first => self.oldest_latch_wait(),
            _ => Duration::ZERO,
        };
        if mode == NeighborMode::Off {
            for group in fids.chunks(CLAIM_GROUP) {
                let items: Vec<Item<'a>> = group
                    .iter()
                    .filter_map(|&fid| {
                        self.item(pool, inst, fid, None, false, std::mem::take(&mut wait))
                    })
                    .collect();
                if !p.push(items) {
                    return false;
                }
            }
            return true;
        }
        let area_size = neighbors::area_size(pool.total_frames());
        let cap = CLAIM_GROUP;
        // Pages this call writes at most, neighbors included, when the
        // policy asks so (`FlushTargets::neighbors_in_batch_size`), but for
        // the rest of the contiguous run under way (below).
        let size = if self
            .neighbors_in_batch_size
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            fids.len()
        } else {
            usize::MAX
        };
        let requested: HashSet<u32> = fids.iter().copied().collect();
        // Every frame this call has put in a batch, with the page it held.
        let mut taken: HashMap<u32, PageId> = HashMap::new();
        // Areas already swept whole (NeighborMode::Area).
        let mut swept: HashSet<u32> = HashSet::new();
        let mut items: Vec<Item<'a>> = Vec::new();
        for &fid in fids {
            if taken.len() >= size {
                break;
            }
            // Already written or batched as a neighbor of an earlier page:
            // its own run or area was covered then.
            if taken.contains_key(&fid) {
                continue;
            }
            let Some(item) = self.item(pool, inst, fid, None, false, std::mem::take(&mut wait))
            else {
                continue;
            };
            let id = item.claim.id;
            taken.insert(fid, id);
            items.push(item);
            let area = neighbors::area_of(id.page_no, area_size);
            if mode == NeighborMode::Area && !swept.insert(area.start) {
                continue;
            }
            // The predicate adds the neighbor to the batch when it can.
            neighbors::pages_to_flush(id.page_no, area, mode, |page_no| {
                // A contiguous run goes out as one write whatever its
                // length: cut at the batch's size, its rest would cost
                // another write later. It ends within its area, so a
                // batch passes its size by less than an area.
                if taken.len() >= size && mode != NeighborMode::Contiguous {
                    return false;
                }
                let nid = PageId::new(id.space, page_no);
                let Some(nfid) = pool.frame_of(inst, nid) else {
                    return false;
                };
                if let Some(&held) = taken.get(&nfid) {
                    return held == nid;
                }
                match self.item(
                    pool,
                    inst,
                    nfid,
                    Some(nid),
                    !requested.contains(&nfid),
                    Duration::ZERO,
                ) {
                    Some(it) => {
                        taken.insert(nfid, nid);
                        items.push(it);
                        true
                    }
                    None => false,
                }
            });
            if items.len() >= cap && !p.push(std::mem::take(&mut items)) {
                return false;
            }
        }
        p.push(items)
    }

    /// Fill the short gaps between the runs of `items` (sorted by file
    /// and offset) with the pages cached there, so that one write carries
    /// both runs (parent module, "Gaps"): clean pages, and dirty ones as
    /// neighbors. A gap is filled whole or not at all: if one of its pages
    /// is not cached, latched exclusively or being written, the pages of
    /// that gap already claimed are given back. Claims never wait.
    /// `items` stays sorted.
    pub(super) fn fill_gaps<'a>(
        &self,
        pool: &'a BufferPool,
        items: &mut Vec<Item<'a>>,
        kind: FlushKind,
    ) {
        let bound = match kind {
            FlushKind::Single => 0,
            _ => self.gap_pages(),
        };
        if bound == 0 || items.len() < 2 {
            return;
        }
        let pages: Vec<(u32, u32)> = items.iter().map(Item::page).collect();
        let mut filled = Vec::new();
        for (k, range) in neighbors::gaps_to_fill(&pages, bound) {
            if let Some(mut gap) = self.claim_gap(pool, pages[k].0, range) {
                filled.append(&mut gap);
            }
        }
        if !filled.is_empty() {
            items.append(&mut filled);
            items.sort_by_key(|i| (i.file, i.offset));
        }
    }

    /// Every page of `range` in `space`, claimed (see
    /// [`WriteBack::fill_gaps`]), or none: the pages claimed before one
    /// that cannot be are given back.
    fn claim_gap<'a>(
        &self,
        pool: &'a BufferPool,
        space: u32,
        range: std::ops::Range<u32>,
    ) -> Option<Vec<Item<'a>>> {
        let mut gap = Vec::with_capacity(range.len());
        for page_no in range {
            let id = PageId::new(space, page_no);
            let inst = pool.instance_of(id);
            // A dirty page in a gap (dirtied after the walk for neighbors
            // passed it, or latched then) is claimed as any neighbor.
            let claim = pool.frame_of(inst, id).and_then(|fid| {
                pool.claim_clean(inst, fid, id)
                    .or_else(|| pool.claim(inst, fid, Some(id), Duration::ZERO))
            });
            let Some(claim) = claim else {
                gap.into_iter()
                    .for_each(|it: Item<'a>| pool.release_unwritten(it.claim));
                return None;
            };
            let (file, offset) = self.space.locate(page_no);
            let neighbor = !claim.is_clean();
            gap.push(Item {
                claim,
                file,
                offset,
                neighbor,
            });
        }
        Some(gap)
    }

    fn item<'a>(
        &self,
        pool: &'a BufferPool,
        inst: usize,
        fid: u32,
        expect: Option<PageId>,
        neighbor: bool,
        wait: Duration,
    ) -> Option<Item<'a>> {
        let claim = pool.claim(inst, fid, expect, wait)?;
        let (file, offset) = self.space.locate(claim.id.page_no);
        Some(Item {
            claim,
            file,
            offset,
            neighbor,
        })
    }
}
