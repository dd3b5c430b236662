//! An unpacked node: its cells as a vector. Structural changes (split, merge,
//! redistribution, root growth and collapse) are computed on these copies,
//! so a whole operation can be planned, and everything fallible done, before
//! the first byte of a latched page changes.

use super::node::{
    self, cell_child, cell_key, internal_cell, shortest_separator, split_point, NodeMut, NodeRef,
    SLOT_SIZE,
};
use crate::error::{Error, Result};

/// A node's content outside any page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NodeBuf {
    pub level: u8,
    pub leftmost: u32,
    pub cells: Vec<Vec<u8>>,
}

impl NodeBuf {
    /// Copy a node out of a page image.
    pub fn from_page(b: &[u8]) -> NodeBuf {
        let r = NodeRef::new(b);
        NodeBuf {
            level: r.level(),
            leftmost: r.child(0),
            cells: r.cells().map(|c| c.to_vec()).collect(),
        }
    }

    pub fn is_leaf(&self) -> bool {
        self.level == 0
    }

    pub fn key(&self, i: usize) -> &[u8] {
        cell_key(&self.cells[i], self.is_leaf())
    }

    /// Binary search by key, as `slice::binary_search`.
    pub fn search(&self, key: &[u8]) -> std::result::Result<usize, usize> {
        let leaf = self.is_leaf();
        self.cells.binary_search_by(|c| cell_key(c, leaf).cmp(key))
    }

    /// Bytes of cells and slots.
    pub fn used_bytes(&self) -> usize {
        self.cells.iter().map(|c| c.len() + SLOT_SIZE).sum()
    }

    pub fn fits(&self, page_size: usize) -> bool {
        self.used_bytes() <= node::usable_bytes(page_size)
    }

    /// Format `page` with this content (keeps the common header's identity).
    pub fn write_to(&self, page: &mut [u8]) {
        let mut n = NodeMut::init(page, self.level, self.leftmost);
        for (i, c) in self.cells.iter().enumerate() {
            let fitted = n.insert_cell(i, c);
            assert!(fitted, "planned node image does not fit its page");
        }
    }

    /// Split an overflowing node in two halves that both fit, and return the
    /// separator for the parent. For a leaf the separator is the shortest key
    /// between the halves; for an internal node the middle cell moves up and
    /// its child becomes the right half's leftmost child.
    pub fn split(mut self, page_size: usize) -> Result<(NodeBuf, NodeBuf, Vec<u8>)> {
        let leaf = self.is_leaf();
        let sizes: Vec<usize> = self.cells.iter().map(|c| c.len() + SLOT_SIZE).collect();
        let m = split_point(&sizes, node::usable_bytes(page_size), !leaf).ok_or_else(|| {
            // Unreachable with the entry limits (checked at compile time in
            // `node`); reported rather than panicking on a corrupt page.
            Error::Corruption(format!(
                "no split point for {} cells of {} bytes",
                sizes.len(),
                self.used_bytes()
            ))
        })?;
        let right_cells = self.cells.split_off(m);
        if leaf {
            let sep = shortest_separator(self.key(m - 1), cell_key(&right_cells[0], true));
            let right = NodeBuf {
                level: 0,
                leftmost: 0,
                cells: right_cells,
            };
            return Ok((self, right, sep));
        }
        let mut rest = right_cells.into_iter();
        let up = rest
            .next()
            .ok_or_else(|| Error::Corruption("empty split".into()))?;
        let right = NodeBuf {
            level: self.level,
            leftmost: cell_child(&up),
            cells: rest.collect(),
        };
        Ok((self, right, cell_key(&up, false).to_vec()))
    }

    /// Concatenate two adjacent siblings. For internal nodes the parent's
    /// separator comes down as the cell pointing at the right node's leftmost
    /// child.
    pub fn merge(mut left: NodeBuf, sep: &[u8], right: NodeBuf) -> NodeBuf {
        if !left.is_leaf() {
            left.cells.push(internal_cell(sep, right.leftmost));
        }
        left.cells.extend(right.cells);
        left
    }
}
