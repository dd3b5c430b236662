//! Commits in flight: their logical record is in the log, their write set
//! not yet applied to every page. Recovery finishes such a commit from its
//! record (re-applies a whole one, rolls back a keys-only one, by its
//! keys), so the checkpoint must never pass the newest copy of it: each
//! entry's *pin* is the start LSN of the newest record group holding it
//! (kept until the commit's marker is durable, below).
//!
//! # Pinned until the marker is durable
//!
//! A commit leaves the set when its marker is appended
//! ([`InFlight::finish`]), but its pin stays, in a queue of finished
//! commits, until the log is durable through the marker (pruned by
//! [`InFlight::min_pin`] and at every finish). The marker ends a commit
//! in memory, not on disk: its page changes lie between the record and
//! the marker, and a crash may keep some of them and lose the rest (a sync
//! that covered the first operation, not the second). Recovery makes such
//! a commit whole only if it reads the record and no marker; a checkpoint
//! that passed the record as soon as the marker was appended would let it
//! replay the durable operations alone, and a commit nobody was told of
//! would be half there after the crash (found by the power-loss test that
//! crashes the open after a process crash: the first operation of an
//! unacknowledged transfer survived, the rest did not). Once the marker is
//! durable, every page change of the commit is too, and redo alone
//! rebuilds it. A relocation cannot move such a pin (the record left the
//! set), but a log sync releases it: a checkpoint that finds one holding it
//! back syncs the log first ([`InFlight::finished_pin_below`]). The queue holds one entry (16 bytes) per commit whose
//! marker lies in the log's unsynced tail: the commits of the last sync
//! interval (at most about a second at `flush_log_at_trx_commit` 0 or 2,
//! one group commit's worth at 1), never more than that tail's bytes
//! divided by a marker's.
//!
//! A long-running commit (a large write set, or one stalled for log space)
//! would hold the checkpoint back for as long as it runs. To release the
//! pins, the checkpointer relocates every in-flight record into one
//! `TXN_RELOCATED` group appended at the current end of the log; the pins
//! move there, and the checkpoint may pass the original records. Recovery
//! merges both kinds of group into one map keyed by the commit's own LSN,
//! from which `TXN_APPLIED` markers remove the commits that finished.
//!
//! Relocated group payload (integers little-endian):
//!
//! | size | field                                   |
//! |-----:|-----------------------------------------|
//! | 4    | number of commits `n`                   |
//! | n ×  | commit LSN u64, record length u32, record bytes |

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use crate::page::{get_u32, get_u64, Lsn};

/// Bytes a relocated group adds per commit besides its record.
pub(crate) const RELOCATED_ENTRY_OVERHEAD: usize = 12;

struct Entry {
    /// Start of the newest group holding the record.
    pin: Lsn,
    record: Arc<[u8]>,
}

/// The in-flight commits, keyed by the LSN of their `TXN_COMMIT` group.
#[derive(Default)]
pub(crate) struct InFlight {
    map: BTreeMap<Lsn, Entry>,
    record_bytes: usize,
    /// Finished commits whose marker may not be durable yet, as (marker's
    /// end, pin), in the order the markers were appended (module doc).
    unsynced: VecDeque<(Lsn, Lsn)>,
}

impl InFlight {
    pub fn insert(&mut self, commit: Lsn, record: Arc<[u8]>) {
        self.record_bytes += record.len();
        if let Some(old) = self.map.insert(
            commit,
            Entry {
                pin: commit,
                record,
            },
        ) {
            self.record_bytes -= old.record.len();
        }
    }

    /// Enter a commit recovery found unfinished, its newest record copy
    /// starting at `pin`; one already in flight is left as it is.
    pub fn resume(&mut self, commit: Lsn, pin: Lsn, record: Arc<[u8]>) {
        if let std::collections::btree_map::Entry::Vacant(v) = self.map.entry(commit) {
            self.record_bytes += record.len();
            v.insert(Entry { pin, record });
        }
    }

    /// The commit's marker was appended, ending at `marker_end`: it leaves
    /// the set, and its pin holds until the log is durable through the
    /// marker (`durable`: the durable end now). False if it was not in
    /// flight.
    pub fn finish(&mut self, commit: Lsn, marker_end: Lsn, durable: Lsn) -> bool {
        self.prune(durable);
        match self.map.remove(&commit) {
            Some(e) => {
                self.record_bytes -= e.record.len();
                if marker_end > durable {
                    self.unsynced.push_back((marker_end, e.pin));
                }
                true
            }
            None => false,
        }
    }

    /// Drop the pins of finished commits whose markers end at or below
    /// `durable`. Markers are appended in LSN order, so those are a prefix.
    fn prune(&mut self, durable: Lsn) {
        while self
            .unsynced
            .front()
            .is_some_and(|&(end, _)| end <= durable)
        {
            self.unsynced.pop_front();
        }
    }

    /// The commits in flight, ascending.
    pub fn commits(&self) -> Vec<Lsn> {
        self.map.keys().copied().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The oldest pin, of a commit in flight or of a finished one whose
    /// marker is not durable (`durable`: the durable end now): the
    /// checkpoint may not pass it.
    pub fn min_pin(&mut self, durable: Lsn) -> Option<Lsn> {
        let (in_flight, finished) = self.oldest_pins(durable);
        in_flight.into_iter().chain(finished).min()
    }

    /// Whether the oldest pin is a finished commit's whose marker is not
    /// durable (`durable`: the durable end now), and lies below `below`:
    /// a log sync would release it, where a relocation cannot.
    pub fn finished_pin_below(&mut self, below: Lsn, durable: Lsn) -> bool {
        let (in_flight, finished) = self.oldest_pins(durable);
        finished.is_some_and(|p| p < below && in_flight.is_none_or(|q| p < q))
    }

    /// The oldest pin of a commit in flight, and the oldest of a finished
    /// commit whose marker is not durable through `durable`.
    fn oldest_pins(&mut self, durable: Lsn) -> (Option<Lsn>, Option<Lsn>) {
        self.prune(durable);
        let in_flight = self.map.values().map(|e| e.pin).min();
        let finished = self.unsynced.iter().map(|&(_, pin)| pin).min();
        (in_flight, finished)
    }

    /// Payload bytes of a relocated group holding every in-flight record.
    pub fn relocation_len(&self) -> usize {
        4 + self.map.len() * RELOCATED_ENTRY_OVERHEAD + self.record_bytes
    }

    /// Encode the relocated group's payload.
    pub fn encode_relocation(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.relocation_len());
        out.extend_from_slice(&(self.map.len() as u32).to_le_bytes());
        for (&commit, e) in &self.map {
            out.extend_from_slice(&commit.to_le_bytes());
            out.extend_from_slice(&(e.record.len() as u32).to_le_bytes());
            out.extend_from_slice(&e.record);
        }
        out
    }

    /// Every record now also lives in the group starting at `pin`.
    pub fn move_pins(&mut self, pin: Lsn) {
        for e in self.map.values_mut() {
            e.pin = pin;
        }
    }
}

/// Decode a relocated group's payload into (commit LSN, record) pairs.
pub fn decode_relocation(p: &[u8]) -> Result<Vec<(Lsn, &[u8])>, String> {
    let bad = |what: &str| Err(format!("relocated commits group: {what}"));
    if p.len() < 4 {
        return bad("shorter than its count");
    }
    let n = get_u32(p, 0) as usize;
    // Never trust `n` for an allocation larger than the bytes can hold.
    let mut out = Vec::with_capacity(n.min(p.len() / RELOCATED_ENTRY_OVERHEAD));
    let mut at = 4;
    for i in 0..n {
        let Some(head) = p.get(at..at + RELOCATED_ENTRY_OVERHEAD) else {
            return bad(&format!("entry {i} of {n} truncated"));
        };
        let (commit, len) = (get_u64(head, 0), get_u32(head, 8) as usize);
        at += RELOCATED_ENTRY_OVERHEAD;
        let Some(record) = p.get(at..at.saturating_add(len)) else {
            return bad(&format!(
                "record {i} of {n} ({len} bytes) runs past the group"
            ));
        };
        out.push((commit, record));
        at += len;
    }
    if at != p.len() {
        return bad(&format!("{} trailing bytes", p.len() - at));
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn relocation_round_trips_and_moves_every_pin() {
        let mut f = InFlight::default();
        f.insert(100, Arc::from(&b"abc"[..]));
        f.insert(250, Arc::from(&b""[..]));
        f.insert(300, Arc::from(&b"hello"[..]));
        assert!(f.finish(250, 260, 260));
        assert!(!f.finish(250, 270, 270));
        assert_eq!(f.min_pin(0), Some(100));
        let p = f.encode_relocation();
        assert_eq!(p.len(), f.relocation_len());
        let d = decode_relocation(&p).unwrap();
        assert_eq!(d, vec![(100, &b"abc"[..]), (300, &b"hello"[..])]);
        f.move_pins(9000);
        assert_eq!(f.min_pin(0), Some(9000));
        f.finish(100, 9100, 9100);
        f.finish(300, 9200, 9200);
        assert!(f.is_empty());
        assert_eq!(f.relocation_len(), 4);
    }

    #[test]
    fn a_resumed_commit_is_pinned_at_its_newest_copy_and_resuming_again_keeps_it() {
        let mut f = InFlight::default();
        // Relocated at 900: recovery resumes commit 100 pinned there.
        f.resume(100, 900, Arc::from(&b"abc"[..]));
        assert_eq!(f.min_pin(0), Some(900));
        // The open's own resume (pin = the id) changes nothing.
        f.resume(100, 100, Arc::from(&b"abc"[..]));
        assert_eq!(f.min_pin(0), Some(900));
        assert_eq!(f.relocation_len(), 4 + RELOCATED_ENTRY_OVERHEAD + 3);
        assert!(f.finish(100, 1000, 1000));
        assert!(f.is_empty());
        assert_eq!(f.relocation_len(), 4);
    }

    #[test]
    fn a_finished_commit_stays_pinned_until_its_marker_is_durable() {
        let mut f = InFlight::default();
        f.insert(100, Arc::from(&b"a"[..]));
        f.insert(200, Arc::from(&b"b"[..]));
        // 100 finishes with its marker ending at 500, not yet durable.
        assert!(f.finish(100, 500, 300));
        assert_eq!(f.commits(), vec![200], "finished commits leave the set");
        assert_eq!(f.min_pin(300), Some(100), "its pin holds");
        assert_eq!(f.min_pin(499), Some(100));
        assert_eq!(f.min_pin(500), Some(200), "durable through the marker");
        // Relocated before finishing: the pin it keeps is the newest copy.
        f.move_pins(600);
        assert!(f.finish(200, 700, 650));
        assert_eq!(f.min_pin(650), Some(600));
        assert_eq!(f.min_pin(700), None);
        // A marker durable when appended pins nothing.
        f.insert(800, Arc::from(&b"c"[..]));
        assert!(f.finish(800, 850, 900));
        assert_eq!(f.min_pin(900), None);
    }

    /// One step of the model test below, whose model says by brute force
    /// what the checkpoint may not pass: the pin of every commit in flight,
    /// and of every finished one whose marker ends past the durable end.
    #[derive(Clone, Debug)]
    enum Step {
        Commit,
        Finish(usize),
        Relocate,
        Sync(u64),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            3 => Just(Step::Commit),
            3 => any::<usize>().prop_map(Step::Finish),
            1 => Just(Step::Relocate),
            2 => any::<u64>().prop_map(Step::Sync),
        ]
    }

    proptest! {
        #[test]
        fn min_pin_is_the_oldest_pin_of_a_commit_not_durably_finished(
            steps in proptest::collection::vec(step(), 1..200),
        ) {
            let mut f = InFlight::default();
            // commit -> (pin, marker end once finished)
            let mut model: BTreeMap<Lsn, (Lsn, Option<Lsn>)> = BTreeMap::new();
            let (mut lsn, mut durable) = (100u64, 100u64);
            for s in steps {
                lsn += 10;
                match s {
                    Step::Commit => {
                        f.insert(lsn, Arc::from(&b"r"[..]));
                        model.insert(lsn, (lsn, None));
                    }
                    Step::Finish(i) => {
                        let open: Vec<Lsn> = model
                            .iter()
                            .filter(|(_, v)| v.1.is_none())
                            .map(|(k, _)| *k)
                            .collect();
                        if open.is_empty() {
                            continue;
                        }
                        let c = open[i % open.len()];
                        prop_assert!(f.finish(c, lsn, durable));
                        if let Some(e) = model.get_mut(&c) {
                            e.1 = Some(lsn);
                        }
                    }
                    Step::Relocate => {
                        f.move_pins(lsn);
                        for e in model.values_mut().filter(|e| e.1.is_none()) {
                            e.0 = lsn;
                        }
                    }
                    Step::Sync(to) => durable = durable.max(to % (lsn + 1)),
                }
                let want = model
                    .values()
                    .filter(|e| e.1.is_none_or(|end| end > durable))
                    .map(|e| e.0)
                    .min();
                prop_assert_eq!(f.min_pin(durable), want);
                let finished = model
                    .values()
                    .filter(|e| e.1.is_some_and(|end| end > durable))
                    .map(|e| e.0)
                    .min();
                let flying = model.values().filter(|e| e.1.is_none()).map(|e| e.0).min();
                for below in [durable, lsn, lsn + 1] {
                    let binds = finished
                        .is_some_and(|p| p < below && flying.is_none_or(|q| p < q));
                    prop_assert_eq!(f.finished_pin_below(below, durable), binds);
                }
                let open: Vec<Lsn> = model
                    .iter()
                    .filter(|(_, v)| v.1.is_none())
                    .map(|(k, _)| *k)
                    .collect();
                prop_assert_eq!(f.commits(), open);
            }
        }

        #[test]
        fn decoding_any_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_relocation(&bytes);
        }
    }
}
