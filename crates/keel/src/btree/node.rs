//! Slotted-page layout of a B+tree node, as pure functions over a page image.
//!
//! After the common page header (bytes `[0, 32)`):
//!
//! | offset | size | field                                                  |
//! |-------:|-----:|--------------------------------------------------------|
//! | 32     | 2    | number of cells `n`                                    |
//! | 34     | 2    | start of the cell content area (0 encodes 65536)       |
//! | 36     | 2    | fragmented free bytes inside the content area          |
//! | 38     | 1    | level (0 = leaf)                                       |
//! | 39     | 1    | reserved, zero                                         |
//! | 40     | 4    | leftmost child page number (internal nodes)            |
//! | 44     | 2·n  | slot array: cell offsets, in key order                 |
//!
//! A table's root page also uses bytes `[24, 28)` of the common header
//! (reserved, zero, on every other page): the root of the hidden tree a
//! pending bulk load is building into the table (see `btree::bulk`), 0 if
//! none. Not in the node header: that is rewritten whenever the root
//! changes shape (writes into the table while it loads may split it), and
//! the mark must survive that; the common header's reserved bytes survive
//! every node rewrite, and a root page never moves.
//!
//! Cells are packed downward from the page end. A leaf cell is
//! `key_len u16, value_len u16, key, value`; an internal cell is
//! `key_len u16, child u32, key`. In an internal node the leftmost child holds
//! keys `< key[0]` and the child of cell `i` holds keys `>= key[i]` (and
//! `< key[i+1]`). Children are addressed by position `0..=n`: position 0 is the
//! leftmost child, position `i + 1` the child of cell `i`.

use std::cmp::Ordering;

use crate::error::{Error, Result};
use crate::page::{
    get_u16, get_u32, put_u16, put_u32, set_page_type, PageBytes, PageType, MAX_PAGE_SIZE,
    MIN_PAGE_SIZE, PAGE_HEADER_SIZE,
};

mod validate;

pub use validate::check;
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use validate::exercise;
pub(crate) use validate::validate;

const OFF_N_CELLS: usize = PAGE_HEADER_SIZE;
const OFF_CONTENT: usize = PAGE_HEADER_SIZE + 2;
const OFF_FRAG: usize = PAGE_HEADER_SIZE + 4;
const OFF_LEVEL: usize = PAGE_HEADER_SIZE + 6;
const OFF_LEFTMOST: usize = PAGE_HEADER_SIZE + 8;
/// On a table's root: the hidden root of a pending bulk load (0 = none), in
/// the common header's reserved bytes (see the module doc).
const OFF_BULK_PENDING: usize = 24;
const _: () = assert!(OFF_BULK_PENDING >= 22 && OFF_BULK_PENDING + 4 <= PAGE_HEADER_SIZE);
/// First byte of the slot array.
pub const NODE_HEADER_END: usize = PAGE_HEADER_SIZE + 12;
/// Bytes per slot.
pub const SLOT_SIZE: usize = 2;
/// Leaf cell header: key length, value length.
pub const LEAF_CELL_HEADER: usize = 4;
/// Internal cell header: key length, child page number.
pub const INTERNAL_CELL_HEADER: usize = 6;
/// Absolute key-length cap, whatever the page size: InnoDB's 3072 bytes.
const KEY_LEN_CAP: usize = 3072;

/// Largest key accepted for this page size: InnoDB's rule, 3/16 of the page
/// up to 3072 bytes (768 bytes on 4 KiB pages, 3072 from 16 KiB pages on).
pub const fn max_key_len(page_size: usize) -> usize {
    let k = page_size * 3 / 16;
    if k < KEY_LEN_CAP {
        k
    } else {
        KEY_LEN_CAP
    }
}

/// Largest value accepted for this page size.
pub const fn max_value_len(page_size: usize) -> usize {
    page_size / 4
}

/// Bytes available for slots and cells.
pub const fn usable_bytes(page_size: usize) -> usize {
    page_size - NODE_HEADER_END
}

/// A non-root node using fewer bytes than this is underfull.
pub const fn underflow_bytes(page_size: usize) -> usize {
    usable_bytes(page_size) / 4
}

/// Footprint (cell + slot) of the largest possible separator.
pub const fn max_separator_bytes(page_size: usize) -> usize {
    INTERNAL_CELL_HEADER + max_key_len(page_size) + SLOT_SIZE
}

/// Footprint (cell + slot) of the largest possible leaf entry.
pub const fn max_leaf_entry_bytes(page_size: usize) -> usize {
    LEAF_CELL_HEADER + max_key_len(page_size) + max_value_len(page_size) + SLOT_SIZE
}

// A split of an overflowing node (one page plus one cell) leaves each half at
// most usable/2 + one cell, so any cell up to half the usable space can be
// placed. Checked for every supported page size.
const _: () = {
    let mut ps = MIN_PAGE_SIZE;
    while ps <= MAX_PAGE_SIZE {
        assert!(max_leaf_entry_bytes(ps) <= usable_bytes(ps) / 2);
        assert!(2 * max_separator_bytes(ps) <= usable_bytes(ps) / 2);
        ps *= 2;
    }
};

/// Reject keys and values the tree cannot store on pages of this size.
pub fn check_entry(page_size: usize, key: &[u8], value: &[u8]) -> Result<()> {
    check_key(page_size, key)?;
    let max = max_value_len(page_size);
    if value.len() > max {
        return Err(Error::ValueTooLarge {
            len: value.len(),
            max,
        });
    }
    Ok(())
}

/// Reject keys the tree cannot store on pages of this size.
pub fn check_key(page_size: usize, key: &[u8]) -> Result<()> {
    let max = max_key_len(page_size);
    if key.len() > max {
        return Err(Error::KeyTooLarge {
            len: key.len(),
            max,
        });
    }
    Ok(())
}

/// Encode a leaf cell. Lengths must already be checked against the limits.
pub fn leaf_cell(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut c = vec![0u8; LEAF_CELL_HEADER + key.len() + value.len()];
    put_u16(&mut c, 0, key.len() as u16);
    put_u16(&mut c, 2, value.len() as u16);
    c[LEAF_CELL_HEADER..LEAF_CELL_HEADER + key.len()].copy_from_slice(key);
    c[LEAF_CELL_HEADER + key.len()..].copy_from_slice(value);
    c
}

/// Encode an internal cell.
pub fn internal_cell(key: &[u8], child: u32) -> Vec<u8> {
    let mut c = vec![0u8; INTERNAL_CELL_HEADER + key.len()];
    put_u16(&mut c, 0, key.len() as u16);
    put_u32(&mut c, 2, child);
    c[INTERNAL_CELL_HEADER..].copy_from_slice(key);
    c
}

/// The key of an encoded cell.
pub fn cell_key(cell: &[u8], leaf: bool) -> &[u8] {
    let h = if leaf {
        LEAF_CELL_HEADER
    } else {
        INTERNAL_CELL_HEADER
    };
    &cell[h..h + get_u16(cell, 0) as usize]
}

/// The value of an encoded leaf cell.
pub fn cell_value(cell: &[u8]) -> &[u8] {
    let k = get_u16(cell, 0) as usize;
    &cell[LEAF_CELL_HEADER + k..LEAF_CELL_HEADER + k + get_u16(cell, 2) as usize]
}

/// The child of an encoded internal cell.
pub fn cell_child(cell: &[u8]) -> u32 {
    get_u32(cell, 2)
}

/// Size of the cell stored at `off`, read from its header.
fn cell_len_at(b: &[u8], off: usize, leaf: bool) -> usize {
    let k = get_u16(b, off) as usize;
    if leaf {
        LEAF_CELL_HEADER + k + get_u16(b, off + 2) as usize
    } else {
        INTERNAL_CELL_HEADER + k
    }
}

/// Read-only view of a node image. On an image that passed [`validate`]
/// with a node type, no accessor panics for any index in range (`cell`,
/// `key` for `i < n_cells()`, `value` on leaves, `child` for `pos <=
/// n_cells()` on internal nodes); the node validation tests prove it.
#[derive(Clone, Copy)]
pub struct NodeRef<'a> {
    b: &'a [u8],
}

impl<'a> NodeRef<'a> {
    /// View a page image as a node (call [`validate`] first on untrusted images).
    pub fn new(b: &'a [u8]) -> Self {
        NodeRef { b }
    }
    /// Number of cells.
    pub fn n_cells(&self) -> usize {
        get_u16(self.b, OFF_N_CELLS) as usize
    }
    /// Level above the leaves (0 = leaf).
    pub fn level(&self) -> u8 {
        self.b[OFF_LEVEL]
    }
    /// Whether this node is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.level() == 0
    }
    /// Start of the cell content area.
    pub fn content_start(&self) -> usize {
        match get_u16(self.b, OFF_CONTENT) as usize {
            0 => self.b.len(),
            s => s,
        }
    }
    /// Free bytes lost between cells.
    pub fn frag_bytes(&self) -> usize {
        get_u16(self.b, OFF_FRAG) as usize
    }
    fn slot_end(&self) -> usize {
        NODE_HEADER_END + SLOT_SIZE * self.n_cells()
    }
    fn offset(&self, i: usize) -> usize {
        get_u16(self.b, NODE_HEADER_END + SLOT_SIZE * i) as usize
    }
    /// Raw bytes of cell `i`.
    pub fn cell(&self, i: usize) -> &'a [u8] {
        let off = self.offset(i);
        &self.b[off..off + cell_len_at(self.b, off, self.is_leaf())]
    }
    /// Key of cell `i`.
    pub fn key(&self, i: usize) -> &'a [u8] {
        self.key_after(i, self.cell_header())
    }
    /// Bytes before a cell's key: [`LEAF_CELL_HEADER`] or
    /// [`INTERNAL_CELL_HEADER`].
    fn cell_header(&self) -> usize {
        if self.is_leaf() {
            LEAF_CELL_HEADER
        } else {
            INTERNAL_CELL_HEADER
        }
    }
    /// Key of cell `i`, its cells' header being `h` bytes: what
    /// [`cell_key`] of [`NodeRef::cell`] returns, without reading the value's
    /// length (a search reads a key at every step).
    fn key_after(&self, i: usize, h: usize) -> &'a [u8] {
        let off = self.offset(i);
        let start = off + h;
        &self.b[start..start + get_u16(self.b, off) as usize]
    }
    /// Ask for cell `i`'s first bytes to be brought into the cache.
    #[inline]
    fn prefetch_cell(&self, i: usize) {
        if let Some(c) = self.b.get(self.offset(i)..) {
            prefetch(c);
        }
    }
    /// Ask for the cells a scan reads next to be brought into the cache:
    /// the first line of cell `far` (its header, unknown until it arrives)
    /// and every line of cell `near`, whose header an earlier call asked
    /// for. A leaf's cells lie in the order they were written, not in key
    /// order, so a scan in key order jumps about the page and each row was
    /// a cache miss or more (the leaf copies were the top entry of a
    /// single-threaded `read_write` profile). Out-of-range indexes are
    /// ignored.
    #[inline]
    pub fn prefetch_scan(&self, near: usize, far: usize) {
        let n = self.n_cells();
        if far < n {
            self.prefetch_cell(far);
        }
        if near < n {
            let off = self.offset(near);
            let len = cell_len_at(self.b, off, self.is_leaf());
            let mut at = off + 64;
            while at < off + len {
                if let Some(c) = self.b.get(at..) {
                    prefetch(c);
                }
                at += 64;
            }
        }
    }
    /// Value of leaf cell `i`.
    pub fn value(&self, i: usize) -> &'a [u8] {
        cell_value(self.cell(i))
    }
    /// Child at position `pos` in `0..=n` (0 = leftmost).
    pub fn child(&self, pos: usize) -> u32 {
        if pos == 0 {
            get_u32(self.b, OFF_LEFTMOST)
        } else {
            cell_child(self.cell(pos - 1))
        }
    }
    /// The root of the hidden tree a pending bulk load is building into
    /// the table whose root this is (see `btree::bulk`), if any. Whatever
    /// the node's level: writes into the table while it loads may have
    /// split the root.
    pub fn pending_bulk(&self) -> Option<u32> {
        let hidden = get_u32(self.b, OFF_BULK_PENDING);
        (hidden != 0).then_some(hidden)
    }
    /// Binary search: `Ok(i)` if cell `i` has `key`, else `Err(insertion point)`.
    ///
    /// Each step reads a cell far from the last one, usually a cache miss
    /// on a page out of the CPU's caches (`key_after` was the top function
    /// of a single-threaded `read_write` profile). So before comparing
    /// with cell `mid`, it asks for the cells of both possible next steps
    /// ([`prefetch`]); the next step then waits for at most what is left
    /// of a miss started one comparison earlier.
    pub fn search(&self, key: &[u8]) -> std::result::Result<usize, usize> {
        let (mut lo, mut hi) = (0, self.n_cells());
        let h = self.cell_header();
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if hi - lo > 2 {
                self.prefetch_cell(lo + (mid - lo) / 2);
                self.prefetch_cell(mid + 1 + (hi - mid - 1) / 2);
            }
            match cmp_keys(self.key_after(mid, h), key) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }
    /// Position of the child whose key range contains `key`.
    pub fn child_pos(&self, key: &[u8]) -> usize {
        match self.search(key) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
    /// Bytes used by cells and slots.
    pub fn used_bytes(&self) -> usize {
        usable_bytes(self.b.len()) - self.free_bytes()
    }
    /// Free bytes, counting fragments (what compaction would yield).
    pub fn free_bytes(&self) -> usize {
        self.content_start() - self.slot_end() + self.frag_bytes()
    }
    /// Cells in key order.
    pub fn cells(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let n = *self;
        (0..n.n_cells()).map(move |i| n.cell(i))
    }
}

/// Mutable view of a node image. On an image that passed [`validate`], every
/// method with an index in range and a well-formed cell of the node's kind
/// keeps the image valid and never panics.
pub struct NodeMut<'a, P: PageBytes + ?Sized = [u8]> {
    b: &'a mut P,
}

impl<'a, P: PageBytes + ?Sized> NodeMut<'a, P> {
    /// View a (valid) node image for modification. Every write goes
    /// through [`PageBytes::range_mut`] with the bytes it may change, so
    /// that a page guard keeps and diffs only those (`buffer::guard`).
    pub fn new(b: &'a mut P) -> Self {
        NodeMut { b }
    }

    /// Format the page as an empty node, keeping the common header's identity
    /// and setting its type from the level.
    pub fn init(b: &'a mut P, level: u8, leftmost: u32) -> Self {
        let t = if level == 0 {
            PageType::BtreeLeaf
        } else {
            PageType::BtreeInternal
        };
        let len = b.bytes().len();
        let all = b.range_mut(0..len);
        set_page_type(all, t);
        all[PAGE_HEADER_SIZE..].fill(0);
        all[OFF_LEVEL] = level;
        let mut n = NodeMut { b };
        n.set_content_start(len);
        n.set_leftmost(leftmost);
        n
    }

    /// Read-only view.
    pub fn as_ref(&self) -> NodeRef<'_> {
        NodeRef::new(self.b.bytes())
    }

    fn len(&self) -> usize {
        self.b.bytes().len()
    }
    fn set_n_cells(&mut self, n: usize) {
        self.b.set_u16(OFF_N_CELLS, n as u16);
    }
    fn set_content_start(&mut self, s: usize) {
        // 65536 only occurs for an empty 64 KiB page; 0 encodes it.
        self.b.set_u16(OFF_CONTENT, (s & 0xffff) as u16);
    }
    fn set_frag(&mut self, f: usize) {
        self.b.set_u16(OFF_FRAG, f as u16);
    }
    fn set_offset(&mut self, i: usize, off: usize) {
        self.b.set_u16(NODE_HEADER_END + SLOT_SIZE * i, off as u16);
    }

    /// Set the leftmost child.
    pub fn set_leftmost(&mut self, child: u32) {
        self.b.set_u32(OFF_LEFTMOST, child);
    }

    /// Mark this table root as the target of a bulk load building the
    /// hidden tree rooted at `hidden` (never page 0, the space header), or
    /// (`None`) clear the mark. The node itself is left as it is.
    pub fn set_pending_bulk(&mut self, hidden: Option<u32>) {
        self.b.set_u32(OFF_BULK_PENDING, hidden.unwrap_or(0));
    }

    /// Append a leaf entry after the last cell (the caller keeps keys in
    /// order and the lengths within the limits); false (and nothing
    /// changed) if it does not fit. The bulk load's way of filling a leaf:
    /// no cell is built outside the page.
    pub fn append_leaf(&mut self, key: &[u8], value: &[u8]) -> bool {
        let r = self.as_ref();
        let n = r.n_cells();
        let len = LEAF_CELL_HEADER + key.len() + value.len();
        if r.free_bytes() < len + SLOT_SIZE {
            return false;
        }
        if r.content_start() - r.slot_end() < len + SLOT_SIZE {
            self.compact();
        }
        let start = self.as_ref().content_start() - len;
        let c = self.b.range_mut(start..start + len);
        put_u16(c, 0, key.len() as u16);
        put_u16(c, 2, value.len() as u16);
        c[LEAF_CELL_HEADER..LEAF_CELL_HEADER + key.len()].copy_from_slice(key);
        c[LEAF_CELL_HEADER + key.len()..].copy_from_slice(value);
        self.set_offset(n, start);
        self.set_n_cells(n + 1);
        self.set_content_start(start);
        true
    }

    /// Insert `cell` as cell `i`; false (and nothing changed) if it does not fit.
    pub fn insert_cell(&mut self, i: usize, cell: &[u8]) -> bool {
        let r = self.as_ref();
        let n = r.n_cells();
        debug_assert!(i <= n, "insert position {i} beyond {n} cells");
        let need = cell.len() + SLOT_SIZE;
        if r.free_bytes() < need {
            return false;
        }
        if r.content_start() - r.slot_end() < need {
            self.compact();
        }
        let start = self.as_ref().content_start() - cell.len();
        self.b
            .range_mut(start..start + cell.len())
            .copy_from_slice(cell);
        let slots = NODE_HEADER_END + SLOT_SIZE * i;
        let slots_end = NODE_HEADER_END + SLOT_SIZE * n;
        self.b
            .range_mut(slots..slots_end + SLOT_SIZE)
            .copy_within(0..slots_end - slots, SLOT_SIZE);
        self.set_offset(i, start);
        self.set_n_cells(n + 1);
        self.set_content_start(start);
        true
    }

    /// Remove cell `i`.
    pub fn remove_cell(&mut self, i: usize) {
        let r = self.as_ref();
        let n = r.n_cells();
        let (off, len) = (r.offset(i), r.cell(i).len());
        let (start, frag) = (r.content_start(), r.frag_bytes());
        let slot = NODE_HEADER_END + SLOT_SIZE * i;
        let slots_end = NODE_HEADER_END + SLOT_SIZE * n;
        self.b
            .range_mut(slot..slots_end)
            .copy_within(SLOT_SIZE.., 0);
        self.set_n_cells(n - 1);
        if n == 1 {
            self.set_content_start(self.len());
            self.set_frag(0);
        } else if off == start {
            self.set_content_start(start + len);
        } else {
            self.set_frag(frag + len);
        }
    }

    /// Replace cell `i` with `cell`; false (and nothing changed) if it does not fit.
    pub fn replace_cell(&mut self, i: usize, cell: &[u8]) -> bool {
        let r = self.as_ref();
        let old = r.cell(i).len();
        if old == cell.len() {
            let off = r.offset(i);
            self.b.range_mut(off..off + old).copy_from_slice(cell);
            return true;
        }
        if r.free_bytes() + old < cell.len() {
            return false;
        }
        self.remove_cell(i);
        let fitted = self.insert_cell(i, cell);
        debug_assert!(
            fitted,
            "replacement cell must fit after removing the old one"
        );
        fitted
    }

    /// Move every cell to the end of the page, turning fragments into
    /// contiguous free space.
    pub fn compact(&mut self) {
        let r = self.as_ref();
        let n = r.n_cells();
        let cells: Vec<Vec<u8>> = r.cells().map(|c| c.to_vec()).collect();
        let len = self.len();
        let mut start = len;
        // The cells and the slots, each written once: one range each.
        let low = len - cells.iter().map(Vec::len).sum::<usize>();
        let area = self.b.range_mut(low..len);
        for c in &cells {
            start -= c.len();
            area[start - low..start - low + c.len()].copy_from_slice(c);
        }
        debug_assert_eq!(start, low);
        let slots = self
            .b
            .range_mut(NODE_HEADER_END..NODE_HEADER_END + SLOT_SIZE * n);
        let mut at = len;
        for (i, c) in cells.iter().enumerate() {
            at -= c.len();
            put_u16(slots, SLOT_SIZE * i, at as u16);
        }
        debug_assert_eq!(cells.len(), n);
        self.set_content_start(start);
        self.set_frag(0);
    }
}

/// A hint to bring the cache line holding `b`'s first byte into the cache
/// (a no-op off x86-64).
#[inline]
fn prefetch(b: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unsafe_code)]
    // SAFETY: a prefetch reads nothing the program sees and never faults,
    // whatever the address; this one is inside a live slice anyway. SSE,
    // which the instruction needs, is part of every x86-64 CPU.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(b.as_ptr().cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = b;
}

/// `a.cmp(b)` (byte-wise, shorter first on a tie), deciding most pairs of
/// keys from their first eight bytes as one big-endian integer instead of
/// a `memcmp` call: a search compares keys at every step, and the call was
/// most of the comparison for keys this short.
#[inline]
pub fn cmp_keys(a: &[u8], b: &[u8]) -> Ordering {
    if let (Some(x), Some(y)) = (a.first_chunk::<8>(), b.first_chunk::<8>()) {
        let (x, y) = (u64::from_be_bytes(*x), u64::from_be_bytes(*y));
        if x != y {
            return x.cmp(&y);
        }
        return a[8..].cmp(&b[8..]);
    }
    a.cmp(b)
}

/// Where to cut an overflowing sequence of cells, by bytes.
///
/// `sizes` are footprints (cell + slot). With `promote`, the cell at the cut
/// moves up to the parent (internal split): the halves are `[0, m)` and
/// `(m, n)`; otherwise `[0, m)` and `[m, n)`. Returns the cut that makes the
/// larger half smallest among those where both halves are non-empty and fit
/// into `usable` bytes, or `None` if there is none.
pub fn split_point(sizes: &[usize], usable: usize, promote: bool) -> Option<usize> {
    let total: usize = sizes.iter().sum();
    let n = sizes.len();
    let mut left = 0;
    let mut best: Option<(usize, usize)> = None;
    for m in 1..n {
        left += sizes[m - 1];
        let right = total - left - if promote { sizes[m] } else { 0 };
        let right_cells = if promote { n - m - 1 } else { n - m };
        if right_cells == 0 || left > usable || right > usable {
            continue;
        }
        let worst = left.max(right);
        if !matches!(best, Some((w, _)) if w <= worst) {
            best = Some((worst, m));
        }
    }
    best.map(|(_, m)| m)
}

/// The shortest key `s` with `a < s <= b` (requires `a < b`): a separator
/// that routes both neighbours correctly while using little parent space.
pub fn shortest_separator(a: &[u8], b: &[u8]) -> Vec<u8> {
    debug_assert!(a < b, "separator needs a < b");
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    b[..(common + 1).min(b.len())].to_vec()
}
