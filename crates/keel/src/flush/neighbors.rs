//! Neighbor flushing (InnoDB's `innodb_flush_neighbors`): when a batch
//! writes a page, it also writes dirty pages next to it on disk. On a
//! rotating disk one longer sequential write is much cheaper than the
//! several random writes those pages would cost later; on flash it mostly
//! spends write bandwidth early, hence the option (off by default).
//!
//! Which pages go with a page is a pure function of its number, its area,
//! the mode and a predicate "is this page dirty and flushable", so it can
//! be tested without a pool. The batch writer (`super::batch`) passes a
//! predicate that tries to add the page to its batch, which is why the
//! predicate is called at most once per page and never for the page itself.

use std::ops::Range;

use crate::space::EXTENT_PAGES;

/// Largest area in pages (InnoDB's read-ahead area).
pub const MAX_AREA: u32 = 64;

/// What the `flush_neighbors` option asks for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NeighborMode {
    /// 0: the page alone.
    #[default]
    Off,
    /// 1: the contiguous run of dirty, flushable pages around the page
    /// (Percona's `cont`), inside its area.
    Contiguous,
    /// 2: every dirty, flushable page of the page's area.
    Area,
}

impl NeighborMode {
    /// The mode for an option value; values the option validation rejects
    /// (above 2) mean no neighbors.
    pub fn from_option(v: u8) -> NeighborMode {
        match v {
            1 => NeighborMode::Contiguous,
            2 => NeighborMode::Area,
            _ => NeighborMode::Off,
        }
    }

    /// The option's value for this mode.
    pub fn as_option(self) -> u8 {
        match self {
            NeighborMode::Off => 0,
            NeighborMode::Contiguous => 1,
            NeighborMode::Area => 2,
        }
    }
}

/// Pages per area for a pool of `pool_frames` frames (over all instances):
/// min(64, frames / 16), at least 1, as InnoDB sizes `buf_flush_area`.
pub fn area_size(pool_frames: usize) -> u32 {
    (pool_frames / 16).clamp(1, MAX_AREA as usize) as u32
}

/// The area of `page_no`: page numbers aligned to multiples of `size`,
/// clipped to the page's extent. With the usual power-of-two sizes the clip
/// changes nothing; with other sizes it keeps every neighbor in the same
/// extent, hence in the same pool instance and contiguous in the same file.
pub fn area_of(page_no: u32, size: u32) -> Range<u32> {
    let size = u64::from(size.max(1));
    let p = u64::from(page_no);
    let extent_low = p / u64::from(EXTENT_PAGES) * u64::from(EXTENT_PAGES);
    let extent_high = extent_low + u64::from(EXTENT_PAGES);
    let aligned = p / size * size;
    let low = aligned.max(extent_low);
    let high = (aligned + size).min(extent_high).min(u64::from(u32::MAX));
    // `low <= page_no <= u32::MAX`, so both fit.
    low as u32..high as u32
}

/// The page numbers to write when page `page_no` is written, ascending,
/// `page_no` included; `flushable(n)` says whether page `n` is in the pool,
/// dirty and can be written now. It is called at most once per page, never
/// for `page_no`, only for pages inside `area`: downwards from `page_no - 1`
/// then upwards from `page_no + 1` in [`NeighborMode::Contiguous`] (each
/// walk stopping at the first page that is not flushable), in ascending
/// order in [`NeighborMode::Area`].
pub fn pages_to_flush(
    page_no: u32,
    area: Range<u32>,
    mode: NeighborMode,
    mut flushable: impl FnMut(u32) -> bool,
) -> Vec<u32> {
    if !area.contains(&page_no) {
        return vec![page_no];
    }
    match mode {
        NeighborMode::Off => vec![page_no],
        NeighborMode::Contiguous => {
            let mut low = page_no;
            while low > area.start && flushable(low - 1) {
                low -= 1;
            }
            let mut high = page_no;
            while high + 1 < area.end && flushable(high + 1) {
                high += 1;
            }
            (low..=high).collect()
        }
        NeighborMode::Area => area.filter(|&n| n == page_no || flushable(n)).collect(),
    }
}

/// Most pages one gap between two runs may hold for a batch to write
/// them (see [`gaps_to_fill`]). The trace of every data write of one 60 s
/// `steady` run on a disk throttled to 300 write IOPS, with the runs
/// merged across gaps of up to 4, 8, 16 and 63 pages: 0.73, 0.70, 0.67
/// and 0.64 of the write calls for 11 %, 16 %, 23 % and 48 % more pages
/// written. Past 8 each call saved costs more pages than the ones before
/// (`docs/flushing.md`, "Gaps filled: what they bought").
pub const MAX_GAP: u32 = 8;

/// The largest gap worth filling on a device where one write costs as
/// much as `cost` pages beyond those it carries (`steady::merge`'s `a /
/// b`): filling a gap of `g` pages saves one write for `2 g` page writes
/// (each page goes to the doublewrite area too), so gaps under half the
/// cost, at most [`MAX_GAP`]; none where the cost is not known.
pub fn gap_bound(cost: f64) -> u32 {
    if cost.is_nan() {
        return 0;
    }
    (cost / 2.0).clamp(0.0, f64::from(MAX_GAP)) as u32
}

/// The gaps a batch fills, given the pages it writes in write order
/// (`pages[k]` = (space, page number), sorted by file and offset): each
/// `(k, range)` says the pages of `range` go between `pages[k]` and
/// `pages[k + 1]`. A gap is filled only between two pages of one space
/// and one extent (contiguous in one file, cached by one pool instance),
/// and only when it holds at most `bound` pages. Whether each page of a
/// gap can be written (cached, not latched exclusively, not being
/// written) the caller finds out when it claims it.
pub fn gaps_to_fill(pages: &[(u32, u32)], bound: u32) -> Vec<(usize, Range<u32>)> {
    if bound == 0 {
        return Vec::new();
    }
    let extent = |p: u32| p / EXTENT_PAGES;
    pages
        .windows(2)
        .enumerate()
        .filter_map(|(k, w)| {
            let ((sa, a), (sb, b)) = (w[0], w[1]);
            let gap = b.checked_sub(a)?.checked_sub(1)?;
            (sa == sb && extent(a) == extent(b) && (1..=bound).contains(&gap))
                .then(|| (k, a + 1..b))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The issue's pattern, positions 0..15 of one area: the page asked for
    /// is at 11 (`P`), `D` is dirty, `.` clean or not in the pool.
    const PATTERN: &str = "..D..D..DDDPD..D";

    fn dirty(pattern: &str, base: u32) -> impl Fn(u32) -> bool + '_ {
        move |n| {
            n.checked_sub(base)
                .and_then(|i| pattern.as_bytes().get(i as usize))
                .is_some_and(|&c| c == b'D' || c == b'P')
        }
    }

    /// `pages_to_flush` for the pattern, checking the predicate contract.
    fn run(mode: NeighborMode, base: u32, size: u32) -> Vec<u32> {
        let p = base + 11;
        let area = area_of(p, size);
        let is_dirty = dirty(PATTERN, base);
        let mut asked = Vec::new();
        let out = pages_to_flush(p, area.clone(), mode, |n| {
            asked.push(n);
            is_dirty(n)
        });
        let mut sorted = asked.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            asked.len(),
            "a page was asked twice: {asked:?}"
        );
        assert!(!asked.contains(&p), "the page itself was asked");
        assert!(
            asked.iter().all(|n| area.contains(n)),
            "asked outside the area"
        );
        assert!(
            out.windows(2).all(|w| w[0] < w[1]),
            "not ascending: {out:?}"
        );
        out
    }

    #[test]
    fn issue_pattern_per_mode() {
        let off = |v: &[u32]| v.iter().map(|&n| n - 64).collect::<Vec<_>>();
        assert_eq!(off(&run(NeighborMode::Off, 64, 16)), [11]);
        assert_eq!(
            off(&run(NeighborMode::Contiguous, 64, 16)),
            [8, 9, 10, 11, 12]
        );
        assert_eq!(
            off(&run(NeighborMode::Area, 64, 16)),
            [2, 5, 8, 9, 10, 11, 12, 15]
        );
    }

    #[test]
    fn contiguous_walk_stops_at_first_gap() {
        let mut asked = Vec::new();
        let out = pages_to_flush(75, area_of(75, 16), NeighborMode::Contiguous, |n| {
            asked.push(n);
            dirty(PATTERN, 64)(n)
        });
        assert_eq!(out, [72, 73, 74, 75, 76]);
        // Down to the first clean page (71), then up to the next (77).
        assert_eq!(asked, [74, 73, 72, 71, 76, 77]);
    }

    #[test]
    fn never_leaves_the_area() {
        // Everything dirty: the whole area and nothing else.
        let all = |_: u32| true;
        let area = area_of(21, 16);
        assert_eq!(area, 16..32);
        let c = pages_to_flush(21, area.clone(), NeighborMode::Contiguous, all);
        assert_eq!(c, (16..32).collect::<Vec<_>>());
        let a = pages_to_flush(21, area, NeighborMode::Area, all);
        assert_eq!(a, (16..32).collect::<Vec<_>>());
        // The first and last page of an area.
        assert_eq!(
            pages_to_flush(16, 16..32, NeighborMode::Contiguous, all),
            (16..32).collect::<Vec<_>>()
        );
        assert_eq!(
            pages_to_flush(31, 16..32, NeighborMode::Contiguous, all),
            (16..32).collect::<Vec<_>>()
        );
        // An area of one page has no neighbors.
        let never = |n: u32| -> bool { panic!("asked for {n} in a one-page area") };
        assert_eq!(
            pages_to_flush(5, area_of(5, 1), NeighborMode::Area, never),
            [5]
        );
        assert_eq!(
            pages_to_flush(5, area_of(5, 1), NeighborMode::Contiguous, never),
            [5]
        );
    }

    #[test]
    fn the_page_is_written_even_if_the_predicate_says_no() {
        let none = |_: u32| false;
        for mode in [
            NeighborMode::Off,
            NeighborMode::Contiguous,
            NeighborMode::Area,
        ] {
            assert_eq!(pages_to_flush(40, area_of(40, 64), mode, none), [40]);
        }
    }

    #[test]
    fn area_size_follows_the_pool() {
        assert_eq!(area_size(0), 1);
        assert_eq!(area_size(16), 1);
        assert_eq!(area_size(256), 16);
        assert_eq!(area_size(1024), 64);
        assert_eq!(area_size(1 << 20), 64);
    }

    #[test]
    fn areas_are_aligned_and_stay_in_one_extent() {
        assert_eq!(area_of(0, 64), 0..64);
        assert_eq!(area_of(63, 64), 0..64);
        assert_eq!(area_of(64, 64), 64..128);
        assert_eq!(area_of(75, 16), 64..80);
        // A size that does not divide the extent: clipped at extent ends.
        assert_eq!(area_of(70, 50), 64..100);
        assert_eq!(area_of(60, 50), 50..64);
        assert_eq!(area_of(130, 50), 128..150);
        // The last page numbers do not overflow.
        let last = area_of(u32::MAX - 1, 64);
        assert_eq!(last.start, u32::MAX - 63);
        assert!(last.contains(&(u32::MAX - 1)));
    }

    #[test]
    fn gaps_are_filled_up_to_the_bound_within_one_extent() {
        let e = EXTENT_PAGES;
        let pages = [
            (0, 3),
            (0, 4),
            (0, 6),     // gap of 1 (5)
            (0, 10),    // gap of 3 (7..10)
            (0, 30),    // gap of 19: too long
            (0, e - 1), // gap of e - 32: too long
            (0, e + 1), // next extent: never across
            (1, e + 3), // another space: never across
            (1, e + 5), // gap of 1
        ];
        let g = gaps_to_fill(&pages, 3);
        assert_eq!(g, vec![(1, 5..6), (2, 7..10), (7, 4 + e..5 + e)]);
        assert!(gaps_to_fill(&pages, 0).is_empty());
        // Out of order (another file between) or equal pages: no gap.
        assert!(gaps_to_fill(&[(0, 9), (0, 5), (0, 5)], 8).is_empty());
        // The last page numbers do not overflow.
        assert_eq!(
            gaps_to_fill(&[(0, u32::MAX - 2), (0, u32::MAX)], 8),
            vec![(0, u32::MAX - 1..u32::MAX)]
        );
    }

    #[test]
    fn the_gap_bound_is_half_the_write_cost_up_to_the_most() {
        assert_eq!(gap_bound(0.0), 0);
        assert_eq!(gap_bound(3.9), 1);
        assert_eq!(gap_bound(9.0), 4);
        assert_eq!(gap_bound(20.0), MAX_GAP);
        assert_eq!(gap_bound(f64::INFINITY), MAX_GAP);
        assert_eq!(gap_bound(f64::NAN), 0);
        assert_eq!(gap_bound(-3.0), 0);
    }

    #[test]
    fn option_values() {
        assert_eq!(NeighborMode::from_option(0), NeighborMode::Off);
        assert_eq!(NeighborMode::from_option(1), NeighborMode::Contiguous);
        assert_eq!(NeighborMode::from_option(2), NeighborMode::Area);
        assert_eq!(NeighborMode::from_option(9), NeighborMode::Off);
    }
}
