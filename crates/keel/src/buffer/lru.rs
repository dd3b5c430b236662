//! The LRU list of one buffer-pool instance, with InnoDB's midpoint
//! insertion: a page read from disk enters at the head of the "old" sublist
//! (the last `old_blocks_pct` % of the list) and moves to the young head only
//! when it is accessed again at least `old_blocks_time` after its first
//! access, so one scan cannot flush the hot pages out of the pool.
//!
//! An intrusive doubly linked list over frame indices; O(1) per operation.
//! Callers hold the instance's LRU mutex.

const NIL: u32 = u32::MAX;

/// Bytes of list links per frame (for the memory bound in `instance`).
#[cfg(test)]
pub(super) const LINK_BYTES: usize = std::mem::size_of::<Link>();

#[derive(Clone, Copy)]
struct Link {
    prev: u32,
    next: u32,
    in_list: bool,
    old: bool,
}

/// LRU list over frame ids `0..n`. Head = most recently used (young end),
/// tail = least recently used (eviction end).
pub(crate) struct Lru {
    links: Vec<Link>,
    head: u32,
    tail: u32,
    /// First frame of the old sublist (towards the tail), or NIL.
    old_head: u32,
    len: usize,
    old_len: usize,
    old_pct: usize,
}

impl Lru {
    pub fn new(n: usize, old_pct: u32) -> Lru {
        Lru {
            links: vec![
                Link {
                    prev: NIL,
                    next: NIL,
                    in_list: false,
                    old: false
                };
                n
            ],
            head: NIL,
            tail: NIL,
            old_head: NIL,
            len: 0,
            old_len: 0,
            old_pct: old_pct as usize,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub fn old_len(&self) -> usize {
        self.old_len
    }

    pub fn contains(&self, f: u32) -> bool {
        self.links[f as usize].in_list
    }

    pub fn is_old(&self, f: u32) -> bool {
        self.links[f as usize].old
    }

    /// Insert a page just read: at the midpoint (head of the old sublist).
    pub fn insert_midpoint(&mut self, f: u32) {
        debug_assert!(!self.contains(f));
        if self.old_head == NIL {
            self.link_before(f, NIL); // at the tail
        } else {
            let before = self.old_head;
            self.link_before(f, before);
        }
        self.links[f as usize].old = true;
        self.old_head = f;
        self.old_len += 1;
        self.rebalance();
    }

    /// Move to the young head.
    pub fn make_young(&mut self, f: u32) {
        if !self.contains(f) {
            return;
        }
        self.remove(f);
        let head = self.head;
        self.link_before(f, head);
        self.rebalance();
    }

    pub fn remove(&mut self, f: u32) {
        let l = self.links[f as usize];
        if !l.in_list {
            return;
        }
        if self.old_head == f {
            self.old_head = l.next;
        }
        if l.old {
            self.old_len -= 1;
        }
        match l.prev {
            NIL => self.head = l.next,
            p => self.links[p as usize].next = l.next,
        }
        match l.next {
            NIL => self.tail = l.prev,
            n => self.links[n as usize].prev = l.prev,
        }
        self.links[f as usize] = Link {
            prev: NIL,
            next: NIL,
            in_list: false,
            old: false,
        };
        self.len -= 1;
        self.rebalance();
    }

    /// Frames from the tail towards the head, at most `max`.
    pub fn iter_from_tail(&self, max: usize) -> impl Iterator<Item = u32> + '_ {
        let mut cur = self.tail;
        let mut left = max;
        std::iter::from_fn(move || {
            if cur == NIL || left == 0 {
                return None;
            }
            let f = cur;
            cur = self.links[f as usize].prev;
            left -= 1;
            Some(f)
        })
    }

    /// Link `f` in front of `before` (NIL = append at the tail). Young by default.
    fn link_before(&mut self, f: u32, before: u32) {
        let prev = if before == NIL {
            self.tail
        } else {
            self.links[before as usize].prev
        };
        self.links[f as usize] = Link {
            prev,
            next: before,
            in_list: true,
            old: false,
        };
        match prev {
            NIL => self.head = f,
            p => self.links[p as usize].next = f,
        }
        match before {
            NIL => self.tail = f,
            n => self.links[n as usize].prev = f,
        }
        self.len += 1;
    }

    /// Move the old/young boundary so the old sublist is `old_pct` % of the list.
    fn rebalance(&mut self) {
        let target = self.len * self.old_pct / 100;
        while self.old_len > target && self.old_head != NIL {
            let f = self.old_head;
            self.links[f as usize].old = false;
            self.old_head = self.links[f as usize].next;
            self.old_len -= 1;
        }
        while self.old_len < target {
            let cand = if self.old_head == NIL {
                self.tail
            } else {
                self.links[self.old_head as usize].prev
            };
            if cand == NIL {
                break;
            }
            self.links[cand as usize].old = true;
            self.old_head = cand;
            self.old_len += 1;
        }
    }

    #[cfg(test)]
    fn order(&self) -> Vec<u32> {
        let mut v = Vec::new();
        let mut c = self.head;
        while c != NIL {
            v.push(c);
            c = self.links[c as usize].next;
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn midpoint_insertion_keeps_hot_pages() {
        let mut l = Lru::new(200, 37);
        for f in 0..100 {
            l.insert_midpoint(f);
        }
        for f in 0..10 {
            l.make_young(f); // hot pages, accessed again
        }
        for f in 100..200 {
            l.insert_midpoint(f); // a scan of new pages
        }
        assert_eq!(l.len(), 200);
        assert_eq!(l.old_len(), 74);
        let order = l.order();
        for &f in &order[..126] {
            assert!(!l.is_old(f));
        }
        for &f in &order[126..] {
            assert!(l.is_old(f));
        }
        // The hot pages are young; the eviction end holds only cold pages.
        for f in 0..10 {
            assert!(!l.is_old(f), "hot page {f} went old");
        }
        let tail: Vec<u32> = l.iter_from_tail(74).collect();
        assert!(
            tail.iter().all(|&f| f >= 10),
            "hot pages must not be at the tail"
        );
    }

    #[test]
    fn remove_and_reinsert_keep_counts() {
        let mut l = Lru::new(50, 25);
        for f in 0..50 {
            l.insert_midpoint(f);
        }
        for f in (0..50).step_by(3) {
            l.remove(f);
        }
        let order = l.order();
        assert_eq!(order.len(), l.len());
        assert_eq!(order.iter().filter(|&&f| l.is_old(f)).count(), l.old_len());
        assert_eq!(l.old_len(), l.len() * 25 / 100);
        for f in (0..50).step_by(3) {
            l.insert_midpoint(f);
        }
        assert_eq!(l.len(), 50);
        assert_eq!(l.iter_from_tail(usize::MAX).count(), 50);
    }
}
