//! The row-lock manager: exclusive locks on (table, key), FIFO waiting with
//! a timeout, and deadlock detection at the moment a wait would close a
//! cycle.
//!
//! One mutex guards a hash map (table root, key) → owner and FIFO queue of
//! waiters, and the wait-for graph. A transaction waits for at most one
//! lock at a time (a `Txn` is used by one thread at a time), so the graph
//! maps each waiting transaction to the one owner it waits for and a cycle
//! check is a walk along a single chain.
//!
//! Release hands a lock directly to the first waiter and points the other
//! waiters' edges at the new owner, under the mutex. The new owner is no
//! longer waiting, so a hand-over can never close a cycle; cycles can only
//! be closed by a new request, and the requester that would close one is
//! refused (it is the victim). The graph therefore never holds a cycle.
//! Waiters sleep on one condvar with a deadline: every loop that waits has
//! a timeout.
//!
//! A thread can also wait for itself: it holds an open transaction's lock
//! and asks for the same row through another transaction (a `Table::put`
//! while its `Txn` is open, say). No cycle shows in the graph, since the
//! graph knows transactions, not threads, so the manager also remembers
//! which thread last used each transaction (`note_thread`); a request that
//! would wait for a lock whose owner was last used on the requesting
//! thread is refused at once instead of waiting out its timeout.

use std::collections::{HashMap, VecDeque};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// A lock's name: the table's root page number and the key.
pub(crate) type LockKey = (u32, Vec<u8>);

/// Why a lock was not granted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LockError {
    /// Waiting would close a cycle in the wait-for graph; nothing was queued.
    Deadlock,
    /// The owner kept the lock for the whole timeout; the request was withdrawn.
    Timeout(Duration),
    /// The owner (this transaction id) was last used on the requesting
    /// thread: waiting would wait for itself. Nothing was queued.
    SelfDeadlock(u64),
}

struct Entry {
    owner: u64,
    waiters: VecDeque<u64>,
}

#[derive(Default)]
struct State {
    locks: HashMap<LockKey, Entry>,
    /// Waiting transaction → the owner of the lock it waits for.
    waits_for: HashMap<u64, u64>,
    /// Transaction → the thread that last used it (only those noted).
    threads: HashMap<u64, ThreadId>,
}

/// Exclusive row locks for every transaction of one database.
#[derive(Default)]
pub(crate) struct LockManager {
    state: Mutex<State>,
    granted: Condvar,
}

impl LockManager {
    /// Take `key` for `txn`, waiting up to `timeout` behind its owner.
    /// Returns how long it waited (`None`: granted at once, or already held).
    pub fn lock(
        &self,
        txn: u64,
        key: &LockKey,
        timeout: Duration,
    ) -> Result<Option<Duration>, LockError> {
        let mut st = self.state.lock();
        let State {
            locks,
            waits_for,
            threads,
        } = &mut *st;
        let Some(entry) = locks.get_mut(key) else {
            locks.insert(
                key.clone(),
                Entry {
                    owner: txn,
                    waiters: VecDeque::new(),
                },
            );
            return Ok(None);
        };
        if entry.owner == txn {
            return Ok(None);
        }
        if let (Some(me), Some(owner)) = (threads.get(&txn), threads.get(&entry.owner)) {
            if me == owner {
                return Err(LockError::SelfDeadlock(entry.owner));
            }
        }
        if closes_cycle(waits_for, txn, entry.owner) {
            return Err(LockError::Deadlock);
        }
        entry.waiters.push_back(txn);
        waits_for.insert(txn, entry.owner);
        let start = Instant::now();
        let deadline = start + timeout;
        loop {
            if st.locks.get(key).is_some_and(|e| e.owner == txn) {
                return Ok(Some(start.elapsed()));
            }
            if Instant::now() >= deadline {
                let State {
                    locks, waits_for, ..
                } = &mut *st;
                if let Some(e) = locks.get_mut(key) {
                    e.waiters.retain(|&w| w != txn);
                }
                waits_for.remove(&txn);
                return Err(LockError::Timeout(start.elapsed()));
            }
            self.granted.wait_until(&mut st, deadline);
        }
    }

    /// Remember that `txn` is being used by thread `t` (see the module doc).
    pub fn note_thread(&self, txn: u64, t: ThreadId) {
        self.state.lock().threads.insert(txn, t);
    }

    /// Release every lock in `keys` that `txn` owns, handing each to its
    /// first waiter; `txn` is done (its thread is forgotten).
    pub fn release<'k>(&self, txn: u64, keys: impl IntoIterator<Item = &'k LockKey>) {
        let mut handed_over = false;
        {
            let mut st = self.state.lock();
            let State {
                locks,
                waits_for,
                threads,
            } = &mut *st;
            threads.remove(&txn);
            for key in keys {
                let Some(entry) = locks.get_mut(key) else {
                    continue;
                };
                if entry.owner != txn {
                    continue;
                }
                match entry.waiters.pop_front() {
                    None => {
                        locks.remove(key);
                    }
                    Some(next) => {
                        entry.owner = next;
                        waits_for.remove(&next);
                        for &w in &entry.waiters {
                            waits_for.insert(w, next);
                        }
                        handed_over = true;
                    }
                }
            }
        }
        if handed_over {
            self.granted.notify_all();
        }
    }

    /// Locks currently held.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.state.lock().locks.len()
    }
}

/// Would `requester` waiting for `owner` close a cycle? The graph holds no
/// cycle, so the chain from `owner` ends within `waits_for.len()` steps.
fn closes_cycle(waits_for: &HashMap<u64, u64>, requester: u64, owner: u64) -> bool {
    let mut cur = owner;
    for _ in 0..=waits_for.len() {
        if cur == requester {
            return true;
        }
        match waits_for.get(&cur) {
            Some(&next) => cur = next,
            None => return false,
        }
    }
    panic!("lock manager: the wait-for graph holds a cycle not through txn {requester}");
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn k(s: &str) -> LockKey {
        (1, s.as_bytes().to_vec())
    }
    const T: Duration = Duration::from_secs(5);

    #[test]
    fn grant_reenter_release() {
        let m = LockManager::default();
        assert_eq!(m.lock(1, &k("a"), T), Ok(None));
        assert_eq!(m.lock(1, &k("a"), T), Ok(None));
        assert_eq!(m.held(), 1);
        m.release(1, [&k("a")]);
        assert_eq!(m.held(), 0);
        // Releasing what one does not own is a no-op.
        m.lock(2, &k("b"), T).unwrap();
        m.release(3, [&k("b")]);
        assert_eq!(m.held(), 1);
    }

    #[test]
    fn timeout_withdraws_the_request() {
        let m = LockManager::default();
        m.lock(1, &k("a"), T).unwrap();
        let e = m.lock(2, &k("a"), Duration::from_millis(30)).unwrap_err();
        assert!(matches!(e, LockError::Timeout(w) if w >= Duration::from_millis(30)));
        // 2 no longer waits, so 1 waiting for a lock of 2 is no deadlock.
        m.lock(2, &k("b"), T).unwrap();
        let e = m.lock(1, &k("b"), Duration::from_millis(10)).unwrap_err();
        assert!(matches!(e, LockError::Timeout(_)));
        m.release(1, [&k("a")]);
        assert_eq!(m.held(), 1);
    }

    #[test]
    fn hand_over_is_fifo_and_retargets_waiters() {
        let m = Arc::new(LockManager::default());
        m.lock(1, &k("a"), T).unwrap();
        let h2 = {
            let m = m.clone();
            std::thread::spawn(move || m.lock(2, &k("a"), T))
        };
        while m.state.lock().waits_for.is_empty() {
            std::thread::yield_now();
        }
        let h3 = {
            let m = m.clone();
            std::thread::spawn(move || m.lock(3, &k("a"), T))
        };
        while m.state.lock().waits_for.len() < 2 {
            std::thread::yield_now();
        }
        m.release(1, [&k("a")]);
        assert!(h2.join().unwrap().unwrap().is_some());
        assert_eq!(m.state.lock().waits_for.get(&3), Some(&2));
        // 2 now owns `a` and 3 waits for 2: 2 asking for a lock of 3 is a deadlock.
        m.lock(3, &k("c"), Duration::ZERO).ok();
        assert_eq!(m.lock(2, &k("c"), T), Err(LockError::Deadlock));
        m.release(2, [&k("a")]);
        assert!(h3.join().unwrap().unwrap().is_some());
    }

    #[test]
    fn a_thread_asking_for_a_lock_its_own_open_transaction_holds_is_refused_at_once() {
        let m = LockManager::default();
        let me = std::thread::current().id();
        m.note_thread(1, me);
        m.lock(1, &k("a"), T).unwrap();
        m.note_thread(2, me);
        let started = Instant::now();
        assert_eq!(m.lock(2, &k("a"), T), Err(LockError::SelfDeadlock(1)));
        assert!(started.elapsed() < Duration::from_millis(100));
        // Another thread's transaction waits normally.
        let other = std::thread::spawn(|| std::thread::current().id())
            .join()
            .unwrap();
        m.note_thread(3, other);
        assert!(matches!(
            m.lock(3, &k("a"), Duration::from_millis(10)),
            Err(LockError::Timeout(_))
        ));
        m.release(1, [&k("a")]);
        assert_eq!(m.held(), 0);
    }

    #[test]
    fn no_cycle_means_false() {
        let mut g = HashMap::new();
        g.insert(2, 3);
        g.insert(3, 4);
        assert!(!closes_cycle(&g, 1, 2));
        assert!(closes_cycle(&g, 4, 2));
    }
}
