//! The policy interface and the interim policy.
//!
//! The interim policy keeps `lru_scan_depth` free frames per instance by LRU
//! flushing and flushes from the oldest end of the flush list while dirty
//! pages exceed `max_dirty_pages_pct`. InnoDB's adaptive flushing (`classic`)
//! and Keel's controller (`steady`) replace it behind the same interface.

use std::time::Duration;

use crate::Lsn;

/// State of one buffer-pool instance.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InstanceSnapshot {
    /// Frames in the instance.
    pub total: usize,
    /// Frames on the free list.
    pub free: usize,
    /// Pages on the LRU list.
    pub lru_len: usize,
    /// Pages on the flush list.
    pub dirty: usize,
    /// Oldest modification on the flush list.
    pub oldest_modification: Option<Lsn>,
}

/// Everything a policy may look at.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// Time since the engine started (injected, so simulations control it).
    pub now: Duration,
    /// Current LSN.
    pub current_lsn: Lsn,
    /// Per-instance state.
    pub instances: Vec<InstanceSnapshot>,
    /// Option `lru_scan_depth`.
    pub lru_scan_depth: usize,
    /// Option `max_dirty_pages_pct`.
    pub max_dirty_pages_pct: f64,
}

/// What to flush in one instance this tick.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceTarget {
    /// Free frames LRU flushing should produce (0 = no LRU flushing).
    pub lru_want_free: usize,
    /// How deep LRU flushing may scan from the tail.
    pub lru_scan: usize,
    /// Pages to write from the oldest end of the flush list.
    pub list_pages: usize,
    /// Only pages whose oldest modification is below this LSN.
    pub list_lsn_limit: Lsn,
}

/// A policy's answer for one tick.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlushTargets {
    /// One target per instance, in instance order.
    pub instances: Vec<InstanceTarget>,
    /// How long the cleaner may sleep before the next tick (it is woken
    /// earlier when a thread runs short of free frames).
    pub sleep: Duration,
}

/// A flushing policy: a pure function of the snapshot plus its own state.
pub trait FlushPolicy: Send {
    /// Name shown in reports (`interim`, `classic`, `steady`).
    fn name(&self) -> &'static str;
    /// Decide this tick's targets.
    fn decide(&mut self, snap: &Snapshot) -> FlushTargets;
}

/// The interim policy (see the module doc).
#[derive(Debug, Default)]
pub struct Interim;

/// Most pages one flush-list batch of the interim policy writes.
const INTERIM_LIST_BATCH: usize = 1024;

impl FlushPolicy for Interim {
    fn name(&self) -> &'static str {
        "interim"
    }

    fn decide(&mut self, s: &Snapshot) -> FlushTargets {
        let mut busy = false;
        let instances = s
            .instances
            .iter()
            .map(|i| {
                // A small pool cannot keep lru_scan_depth frames free.
                let want = s.lru_scan_depth.min(i.total / 8).max(1);
                let lru_want_free = if i.free < want { want } else { 0 };
                let limit = i.total as f64 * s.max_dirty_pages_pct / 100.0;
                let list_pages = if i.dirty as f64 > limit {
                    // Bring dirty pages 5 % of the instance below the limit.
                    let goal = (limit - i.total as f64 * 0.05).max(0.0);
                    ((i.dirty as f64 - goal).ceil() as usize).min(INTERIM_LIST_BATCH)
                } else {
                    0
                };
                busy |= lru_want_free > 0 || list_pages > 0;
                InstanceTarget {
                    lru_want_free,
                    lru_scan: s.lru_scan_depth.max(want),
                    list_pages,
                    list_lsn_limit: Lsn::MAX,
                }
            })
            .collect();
        FlushTargets {
            instances,
            sleep: if busy {
                Duration::from_millis(1)
            } else {
                Duration::from_millis(100)
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(free: usize, dirty: usize) -> Snapshot {
        Snapshot {
            lru_scan_depth: 1024,
            max_dirty_pages_pct: 90.0,
            instances: vec![InstanceSnapshot {
                total: 10_000,
                free,
                lru_len: 10_000 - free,
                dirty,
                oldest_modification: Some(5),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn idle_pool_needs_nothing() {
        let t = Interim.decide(&snap(5000, 100));
        assert_eq!(t.instances[0].lru_want_free, 0);
        assert_eq!(t.instances[0].list_pages, 0);
        assert_eq!(t.sleep, Duration::from_millis(100));
    }

    #[test]
    fn short_of_free_frames_asks_for_lru_flushing() {
        let t = Interim.decide(&snap(10, 100));
        assert_eq!(t.instances[0].lru_want_free, 1024);
        assert_eq!(t.sleep, Duration::from_millis(1));
    }

    #[test]
    fn above_max_dirty_flushes_the_list() {
        let t = Interim.decide(&snap(5000, 9_300));
        // goal = 9000 - 500 = 8500 → 800 pages
        assert_eq!(t.instances[0].list_pages, 800);
        let t = Interim.decide(&snap(5000, 8_999));
        assert_eq!(t.instances[0].list_pages, 0);
    }
}
