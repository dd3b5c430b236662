//! The metrics registry: named atomic counters and gauges, readable as
//! name → value. Names are InnoDB's where the concept is InnoDB's.
//!
//! Counters only grow; gauges are levels kept up to date by the code that
//! changes them. Both are plain `AtomicU64`s so updating one costs one
//! relaxed atomic add on the hot path.

#![allow(non_snake_case)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! registry {
    ($( $(#[doc = $doc:literal])* $name:ident ),* $(,)?) => {
        /// Every counter and gauge of one engine.
        #[derive(Default, Debug)]
        pub struct Metrics {
            $( $(#[doc = $doc])* pub $name: AtomicU64, )*
        }

        impl Metrics {
            /// Every metric's name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$(stringify!($name)),*];

            /// Every metric as name → current value.
            pub fn snapshot(&self) -> BTreeMap<&'static str, u64> {
                let mut m = BTreeMap::new();
                $( m.insert(stringify!($name), self.$name.load(Ordering::Relaxed)); )*
                m
            }

            /// One metric by name.
            pub fn get(&self, name: &str) -> Option<u64> {
                match name {
                    $( stringify!($name) => Some(self.$name.load(Ordering::Relaxed)), )*
                    _ => None,
                }
            }
        }
    };
}

registry! {
    /// Gauge: frames in the buffer pool.
    buffer_pool_pages_total,
    /// Gauge: frames holding a page.
    buffer_pool_pages_data,
    /// Gauge: frames holding a page with unwritten changes.
    buffer_pool_pages_dirty,
    /// Gauge: frames on the free lists.
    buffer_pool_pages_free,
    /// Page reads from the data files into the pool (misses).
    buffer_pool_reads,
    /// Page requests served by the pool (hits and misses).
    buffer_pool_read_requests,
    /// Pages written to the data files, by any flush.
    buffer_pages_written,
    /// Pages written by LRU batch flushing (page cleaners).
    buffer_LRU_batch_flush_total_pages,
    /// Pages evicted (clean) by LRU batch flushing.
    buffer_LRU_batch_evict_total_pages,
    /// Pages written by flush-list flushing of the page cleaners.
    buffer_flush_background_total_pages,
    /// Times a user thread found no free frame and started a single-page flush scan.
    buffer_LRU_single_flush_num_scan,
    /// Pages written by user threads' single-page flushes.
    buffer_LRU_single_flush_total_pages,
    /// Times a user thread had to wait because every frame was fixed.
    buffer_LRU_get_free_waits,
    /// Clean pages evicted by user threads to get a free frame.
    buffer_LRU_search_evict_total_pages,
    /// Read system calls on the data files.
    os_data_reads,
    /// Write system calls on the data files.
    os_data_writes,
    /// Syncs of the data files.
    os_data_fsyncs,
    /// Bytes read from the data files.
    os_data_read_bytes,
    /// Bytes written to the data files.
    os_data_written_bytes,
    /// Page-cleaner rounds run.
    buffer_flush_cleaner_rounds,
    /// Batches written by page cleaners and shutdown.
    buffer_flush_batches,
    /// Gauge: current LSN (end of the newest mini-transaction).
    log_lsn_current,
    /// Mini-transactions committed.
    mtr_commits,
    /// Pages allocated from the tablespace.
    space_pages_allocated,
    /// Pages returned to the tablespace's free list.
    space_pages_freed,
}

impl Metrics {
    /// Add to a counter.
    #[inline]
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
    /// Subtract from a gauge.
    #[inline]
    pub fn sub(c: &AtomicU64, n: u64) {
        c.fetch_sub(n, Ordering::Relaxed);
    }
    /// Set a gauge.
    #[inline]
    pub fn set(c: &AtomicU64, n: u64) {
        c.store(n, Ordering::Relaxed);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values() {
        let m = Metrics::default();
        Metrics::add(&m.os_data_writes, 3);
        assert_eq!(m.get("os_data_writes"), Some(3));
        assert_eq!(m.get("nope"), None);
        let s = m.snapshot();
        assert_eq!(s.len(), Metrics::NAMES.len());
        assert!(s.contains_key("buffer_LRU_batch_flush_total_pages"));
    }
}
