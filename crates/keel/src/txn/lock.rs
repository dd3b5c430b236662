//! The row-lock manager: exclusive locks on (table, key), FIFO waiting with
//! a timeout, and deadlock detection at the moment a wait would close a
//! cycle.
//!
//! # Shards
//! The locks are spread over [`SHARDS`] shards by a hash of their key, each
//! a mutex over a hash map (table root, key) → owner and FIFO queue of
//! waiters, each waiter with a parker of its own (below). Taking a free lock, and
//! releasing one nobody waits for, touch that key's shard alone: with one
//! mutex for every lock, at 64 threads on 2 cores the manager's mutex was
//! where threads blocked most (2,150 of 4,640 sleeps in 1.5 s of
//! `read_write`), and every hand-over woke every waiter of the database.
//!
//! # The wait-for graph
//! One more mutex, `graph`, guards the wait-for graph. A transaction waits
//! for at most one lock at a time (a `Txn` is used by one thread at a
//! time), so the graph maps each waiting transaction to the one owner it
//! waits for, and a cycle check is a walk along a single chain. `graph` is
//! a leaf: it is taken only while holding the shard of the key concerned,
//! and nothing is taken while holding it. So:
//! - a requester that must wait reads the owner and adds its edge under
//!   the key's shard and `graph` together: the owner cannot hand the lock
//!   on meanwhile (that needs the shard), and every edge in the graph
//!   names the current owner of the lock its waiter is queued on;
//! - release hands a lock directly to its first waiter and points the
//!   other waiters' edges at the new owner, under the shard and `graph`.
//!   The new owner is no longer waiting, so a hand-over can never close a
//!   cycle; cycles can only be closed by a new request, the check and the
//!   edge happen under `graph` at once, and the requester that would close
//!   one is refused (it is the victim). The graph therefore never holds a
//!   cycle.
//!
//! A transaction's locks are released shard by shard, not all at once:
//! while it releases, it waits for nothing, so it is a sink in the graph
//! and its remaining locks cannot be part of a cycle.
//!
//! # Hand-over: the new owner wakes alone, and takes no mutex
//! A waiter queues a [`Parker`] of its own with its transaction id and,
//! having released the shard, parks on the parker's address (with
//! `parking_lot_core`) until its deadline. A release hands the lock to the
//! first waiter under the shard's mutex, sets that waiter's `granted`
//! there, releases the mutex, and only then unparks that one thread. The
//! new owner sees `granted` and returns without touching the shard: until
//! 2026-11-29 every waiter of the shard slept on one condvar, a hand-over
//! woke them all, and each had to take the shard's mutex again to learn
//! whether the lock was now its own; with many more threads than cores
//! they did so one after another, and at 256 threads on 2 cores the shard
//! mutexes became where threads slept most (11,560 of some 18,000 sleeps
//! in 2 s, once the redo log's write-out no longer queued its threads). A
//! condvar per waiter was tried before and not kept: it still retakes the
//! mutex on waking, where this takes nothing.
//!
//! No wakeup is lost: the waiter parks only if, under the parking lot's
//! queue lock for its parker, `granted` is still false; the releaser sets
//! `granted` before it takes that queue lock to unpark, so the waiter
//! either sees it set and does not park, or was queued before the unpark.
//! The releaser keeps its own reference to the parker until the unpark is
//! done, so the address stays the parker's meanwhile. A waiter whose
//! deadline passes takes the shard's mutex, and under it `granted` is
//! final: set, the lock was handed to it first and it returns granted;
//! clear, it leaves the queue and the wait-for graph and times out. Every
//! wait has a deadline.
//!
//! # Waiting for oneself
//! A thread can also wait for itself: it holds an open transaction's lock
//! and asks for the same row through another transaction (a `Table::put`
//! while its `Txn` is open, say). No cycle shows in the graph, since the
//! graph knows transactions, not threads, so the manager also remembers
//! which thread last used each transaction (`note_thread`, in maps sharded
//! by transaction id, each a leaf mutex); a request that would wait for a
//! lock whose owner was last used on the requesting thread is refused at
//! once instead of waiting out its timeout.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Mutex, MutexGuard};

use crate::metrics::{lock_counted, Metrics};

/// A lock's name: the table's root page number and the key.
pub(crate) type LockKey = (u32, Vec<u8>);

/// Shards of the lock table and of the transaction → thread map (a power
/// of two).
pub(crate) const SHARDS: usize = 64;

/// Why a lock was not granted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LockError {
    /// Waiting would close a cycle in the wait-for graph; nothing was
    /// queued. The cycle, starting with the requester.
    Deadlock(Vec<Waiting>),
    /// The owner kept the lock for the whole timeout; the request was withdrawn.
    Timeout(Duration),
    /// The owner (this transaction id) was last used on the requesting
    /// thread: waiting would wait for itself. Nothing was queued.
    SelfDeadlock(u64),
}

struct Entry {
    owner: u64,
    waiters: VecDeque<(u64, Arc<Parker>)>,
}

/// Where one waiting transaction's thread parks, and how it learns the
/// lock is its own (module doc, "Hand-over").
#[derive(Default)]
struct Parker {
    /// Set, under the shard's mutex, when the lock is handed to it.
    granted: AtomicBool,
}

impl Parker {
    /// The parking lot's key: this parker's address.
    fn key(&self) -> usize {
        self as *const Parker as usize
    }

    /// Park until granted, unparked, or `deadline`.
    fn park(&self, deadline: Instant) {
        #[allow(unsafe_code)]
        // SAFETY: the key is this parker's address, kept alive by the
        // waiter's `Arc` and by the releaser's until its unpark is done,
        // and parked on by nothing else; the validation only loads an
        // atomic, and neither it nor the timeout callback panics or enters
        // the parking lot.
        unsafe {
            parking_lot_core::park(
                self.key(),
                || !self.granted.load(Ordering::Acquire),
                || {},
                |_, _| {},
                parking_lot_core::DEFAULT_PARK_TOKEN,
                Some(deadline),
            );
        }
    }

    /// Wake the thread parked here, if any (after `granted` was set).
    fn unpark(&self) {
        #[allow(unsafe_code)]
        // SAFETY: as for `park`: the caller holds an `Arc` of this parker.
        unsafe {
            parking_lot_core::unpark_all(self.key(), parking_lot_core::DEFAULT_UNPARK_TOKEN);
        }
    }
}

/// One edge of the wait-for graph: a transaction waits for the row
/// `key` of `table`, which `owner` holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Waiting {
    /// The waiting transaction.
    pub txn: u64,
    /// The transaction that owns the row now.
    pub owner: u64,
    /// The row's lock.
    pub key: LockKey,
    /// The table's name (a label for reports).
    pub table: Arc<str>,
    /// When the wait began (for a cycle's requester: when it was refused).
    pub since: Instant,
}

/// One shard of the lock table.
struct Shard {
    locks: Mutex<HashMap<LockKey, Entry, RandomState>>,
}

/// Exclusive row locks for every transaction of one database.
pub(crate) struct LockManager {
    shards: Box<[Shard]>,
    /// Picks a key's shard (keys may come from users: a keyed hash, like
    /// the maps').
    hasher: RandomState,
    /// Waiting transaction → the owner of the lock it waits for, and
    /// which lock (`Waiting::txn` is the key).
    graph: Mutex<HashMap<u64, Waiting>>,
    /// Transaction → the thread that last used it (only those noted), by
    /// transaction id modulo [`SHARDS`].
    threads: Box<[Mutex<HashMap<u64, ThreadId>>]>,
    /// Where the shard mutexes' waits are counted (`wait_lock_sys_mutex`).
    metrics: Arc<Metrics>,
}

impl Default for LockManager {
    fn default() -> Self {
        LockManager::new(Arc::default())
    }
}

impl LockManager {
    /// A lock manager counting its mutex waits in `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        let hasher = RandomState::new();
        LockManager {
            shards: (0..SHARDS)
                .map(|_| Shard {
                    locks: Mutex::new(HashMap::with_hasher(hasher.clone())),
                })
                .collect(),
            hasher,
            graph: Mutex::new(HashMap::new()),
            threads: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            metrics,
        }
    }

    /// The lock table of `shard`, locked.
    fn table<'a>(&self, shard: &'a Shard) -> MutexGuard<'a, HashMap<LockKey, Entry, RandomState>> {
        lock_counted(
            &shard.locks,
            &self.metrics.wait_lock_sys_mutex,
            &self.metrics.wait_lock_sys_mutex_ns,
        )
    }

    fn shard(&self, key: &LockKey) -> &Shard {
        let h = self.hasher.hash_one(key);
        &self.shards[(h >> 32) as usize & (SHARDS - 1)]
    }

    fn thread_of(&self, txn: u64) -> Option<ThreadId> {
        self.threads[txn as usize & (SHARDS - 1)]
            .lock()
            .get(&txn)
            .copied()
    }

    /// Take `key` (a row of the table named `table`) for `txn`, waiting up
    /// to `timeout` behind its owner. Returns how long it waited (`None`:
    /// granted at once, or already held).
    pub fn lock(
        &self,
        txn: u64,
        key: &LockKey,
        table: &Arc<str>,
        timeout: Duration,
    ) -> Result<Option<Duration>, LockError> {
        let shard = self.shard(key);
        let mut st = self.table(shard);
        let Some(entry) = st.get_mut(key) else {
            st.insert(
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
        if let (Some(me), Some(owner)) = (self.thread_of(txn), self.thread_of(entry.owner)) {
            if me == owner {
                return Err(LockError::SelfDeadlock(entry.owner));
            }
        }
        let start = Instant::now();
        {
            let mut graph = self.graph.lock();
            let edge = Waiting {
                txn,
                owner: entry.owner,
                key: key.clone(),
                table: Arc::clone(table),
                since: start,
            };
            if closes_cycle(&graph, txn, entry.owner) {
                return Err(LockError::Deadlock(cycle(&graph, edge)));
            }
            graph.insert(txn, edge);
        }
        let parker = Arc::new(Parker::default());
        entry.waiters.push_back((txn, Arc::clone(&parker)));
        drop(st);
        let deadline = start + timeout;
        loop {
            parker.park(deadline);
            if parker.granted.load(Ordering::Acquire) {
                return Ok(Some(start.elapsed()));
            }
            if Instant::now() >= deadline {
                let mut st = self.table(shard);
                // Under the mutex `granted` is final (module doc).
                if parker.granted.load(Ordering::Acquire) {
                    return Ok(Some(start.elapsed()));
                }
                if let Some(e) = st.get_mut(key) {
                    e.waiters.retain(|(w, _)| *w != txn);
                }
                self.graph.lock().remove(&txn);
                return Err(LockError::Timeout(start.elapsed()));
            }
        }
    }

    /// Remember that `txn` is being used by thread `t` (see the module doc).
    pub fn note_thread(&self, txn: u64, t: ThreadId) {
        self.threads[txn as usize & (SHARDS - 1)]
            .lock()
            .insert(txn, t);
    }

    /// Release every lock in `keys` that `txn` owns, handing each to its
    /// first waiter; `txn` is done (its thread is forgotten).
    pub fn release<'k>(&self, txn: u64, keys: impl IntoIterator<Item = &'k LockKey>) {
        self.threads[txn as usize & (SHARDS - 1)]
            .lock()
            .remove(&txn);
        for key in keys {
            let shard = self.shard(key);
            let mut st = self.table(shard);
            let Some(entry) = st.get_mut(key) else {
                continue;
            };
            if entry.owner != txn {
                continue;
            }
            match entry.waiters.pop_front() {
                None => {
                    st.remove(key);
                }
                Some((next, parker)) => {
                    entry.owner = next;
                    {
                        let mut graph = self.graph.lock();
                        graph.remove(&next);
                        for (w, _) in &entry.waiters {
                            if let Some(edge) = graph.get_mut(w) {
                                edge.owner = next;
                            }
                        }
                    }
                    parker.granted.store(true, Ordering::Release);
                    drop(st);
                    parker.unpark();
                }
            }
        }
    }

    /// The waits under way now, one per waiting transaction (a copy of
    /// the wait-for graph's edges, taken under `graph` alone).
    pub fn waits(&self) -> Vec<Waiting> {
        self.graph.lock().values().cloned().collect()
    }

    /// Locks currently held.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.shards.iter().map(|s| s.locks.lock().len()).sum()
    }

    /// Edges of the wait-for graph: waiting transaction → owner.
    #[cfg(test)]
    fn waits_for(&self) -> HashMap<u64, u64> {
        self.graph
            .lock()
            .iter()
            .map(|(&t, w)| (t, w.owner))
            .collect()
    }
}

/// Would `requester` waiting for `owner` close a cycle? The graph holds no
/// cycle, so the chain from `owner` ends within `waits_for.len()` steps.
fn closes_cycle(waits_for: &HashMap<u64, Waiting>, requester: u64, owner: u64) -> bool {
    let mut cur = owner;
    for _ in 0..=waits_for.len() {
        if cur == requester {
            return true;
        }
        match waits_for.get(&cur) {
            Some(next) => cur = next.owner,
            None => return false,
        }
    }
    panic!("lock manager: the wait-for graph holds a cycle not through txn {requester}");
}

/// The cycle the refused request `first` would close, starting with it:
/// the edges from its owner on, until the requester (which
/// [`closes_cycle`] found on that chain, so the walk ends there).
fn cycle(waits_for: &HashMap<u64, Waiting>, first: Waiting) -> Vec<Waiting> {
    let requester = first.txn;
    let mut cur = first.owner;
    let mut out = vec![first];
    while cur != requester && out.len() <= waits_for.len() {
        let Some(edge) = waits_for.get(&cur) else {
            break;
        };
        cur = edge.owner;
        out.push(edge.clone());
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn k(s: &str) -> LockKey {
        (1, s.as_bytes().to_vec())
    }

    /// `m.lock` on a row of table `t`.
    fn lk(
        m: &LockManager,
        txn: u64,
        key: &LockKey,
        timeout: Duration,
    ) -> Result<Option<Duration>, LockError> {
        m.lock(txn, key, &Arc::from("t"), timeout)
    }

    /// The cycle of a refused request: (waiter, owner, key) per edge.
    fn edges(e: Result<Option<Duration>, LockError>) -> Vec<(u64, u64, LockKey)> {
        match e {
            Err(LockError::Deadlock(c)) => c.into_iter().map(|w| (w.txn, w.owner, w.key)).collect(),
            other => panic!("expected a deadlock, got {other:?}"),
        }
    }
    const T: Duration = Duration::from_secs(5);

    #[test]
    fn grant_reenter_release() {
        let m = LockManager::default();
        assert_eq!(lk(&m, 1, &k("a"), T), Ok(None));
        assert_eq!(lk(&m, 1, &k("a"), T), Ok(None));
        assert_eq!(m.held(), 1);
        m.release(1, [&k("a")]);
        assert_eq!(m.held(), 0);
        // Releasing what one does not own is a no-op.
        lk(&m, 2, &k("b"), T).unwrap();
        m.release(3, [&k("b")]);
        assert_eq!(m.held(), 1);
    }

    #[test]
    fn timeout_withdraws_the_request() {
        let m = LockManager::default();
        lk(&m, 1, &k("a"), T).unwrap();
        let e = lk(&m, 2, &k("a"), Duration::from_millis(30)).unwrap_err();
        assert!(matches!(e, LockError::Timeout(w) if w >= Duration::from_millis(30)));
        // 2 no longer waits, so 1 waiting for a lock of 2 is no deadlock.
        lk(&m, 2, &k("b"), T).unwrap();
        let e = lk(&m, 1, &k("b"), Duration::from_millis(10)).unwrap_err();
        assert!(matches!(e, LockError::Timeout(_)));
        m.release(1, [&k("a")]);
        assert_eq!(m.held(), 1);
    }

    /// The new owner learns of the hand-over without the shard's mutex:
    /// held by the test right after the release, it does not keep the
    /// waiter from returning granted. The other waiter of the same lock
    /// stays parked until the next hand-over, and a waiter whose deadline
    /// passes while the mutex is held times out once it gets it.
    #[test]
    fn a_hand_over_wakes_the_new_owner_alone_and_it_takes_no_mutex() {
        let m = Arc::new(LockManager::default());
        lk(&m, 1, &k("a"), T).unwrap();
        let spawn = |txn: u64, timeout: Duration| {
            let m = m.clone();
            std::thread::spawn(move || lk(&m, txn, &k("a"), timeout))
        };
        let h2 = spawn(2, T);
        while m.waits_for().is_empty() {
            std::thread::yield_now();
        }
        let h3 = spawn(3, T);
        while m.waits_for().len() < 2 {
            std::thread::yield_now();
        }
        let h4 = spawn(4, Duration::from_millis(50));
        while m.waits_for().len() < 3 {
            std::thread::yield_now();
        }
        m.release(1, [&k("a")]);
        let held = m.table(m.shard(&k("a")));
        let deadline = Instant::now() + T;
        while !h2.is_finished() {
            assert!(
                Instant::now() < deadline,
                "the new owner waited for the shard's mutex"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(h2.join().unwrap().unwrap().is_some());
        std::thread::sleep(Duration::from_millis(100));
        assert!(!h3.is_finished(), "a waiter not handed the lock returned");
        assert!(
            !h4.is_finished(),
            "a timed-out waiter left without the shard's mutex"
        );
        drop(held);
        assert!(matches!(h4.join().unwrap(), Err(LockError::Timeout(_))));
        assert_eq!(m.waits_for().get(&3), Some(&2));
        m.release(2, [&k("a")]);
        assert!(h3.join().unwrap().unwrap().is_some());
        m.release(3, [&k("a")]);
        assert_eq!(m.held(), 0);
    }

    #[test]
    fn hand_over_is_fifo_and_retargets_waiters() {
        let m = Arc::new(LockManager::default());
        lk(&m, 1, &k("a"), T).unwrap();
        let h2 = {
            let m = m.clone();
            std::thread::spawn(move || lk(&m, 2, &k("a"), T))
        };
        while m.waits_for().is_empty() {
            std::thread::yield_now();
        }
        let h3 = {
            let m = m.clone();
            std::thread::spawn(move || lk(&m, 3, &k("a"), T))
        };
        while m.waits_for().len() < 2 {
            std::thread::yield_now();
        }
        m.release(1, [&k("a")]);
        assert!(h2.join().unwrap().unwrap().is_some());
        assert_eq!(m.waits_for().get(&3), Some(&2));
        // 2 now owns `a` and 3 waits for 2: 2 asking for a lock of 3 is a deadlock.
        lk(&m, 3, &k("c"), Duration::ZERO).ok();
        assert_eq!(
            edges(lk(&m, 2, &k("c"), T)),
            [(2, 3, k("c")), (3, 2, k("a"))]
        );
        m.release(2, [&k("a")]);
        assert!(h3.join().unwrap().unwrap().is_some());
    }

    #[test]
    fn a_thread_asking_for_a_lock_its_own_open_transaction_holds_is_refused_at_once() {
        let m = LockManager::default();
        let me = std::thread::current().id();
        m.note_thread(1, me);
        lk(&m, 1, &k("a"), T).unwrap();
        m.note_thread(2, me);
        let started = Instant::now();
        assert_eq!(lk(&m, 2, &k("a"), T), Err(LockError::SelfDeadlock(1)));
        assert!(started.elapsed() < Duration::from_millis(100));
        // Another thread's transaction waits normally.
        let other = std::thread::spawn(|| std::thread::current().id())
            .join()
            .unwrap();
        m.note_thread(3, other);
        assert!(matches!(
            lk(&m, 3, &k("a"), Duration::from_millis(10)),
            Err(LockError::Timeout(_))
        ));
        m.release(1, [&k("a")]);
        assert_eq!(m.held(), 0);
    }

    /// Two keys whose locks live in different shards.
    fn keys_in_two_shards(m: &LockManager) -> (LockKey, LockKey) {
        let a = k("a");
        let shard_a = m.shard(&a) as *const Shard;
        let b = (0..)
            .map(|i| k(&format!("b{i}")))
            .find(|b| !std::ptr::eq(m.shard(b), shard_a))
            .unwrap();
        (a, b)
    }

    /// A cycle through locks of two shards is found: the graph is one for
    /// the whole manager.
    #[test]
    fn a_deadlock_across_shards_is_detected() {
        let m = Arc::new(LockManager::default());
        let (a, b) = keys_in_two_shards(&m);
        lk(&m, 1, &a, T).unwrap();
        lk(&m, 2, &b, T).unwrap();
        let h1 = {
            let (m, b) = (m.clone(), b.clone());
            std::thread::spawn(move || lk(&m, 1, &b, T))
        };
        while m.waits_for().get(&1) != Some(&2) {
            std::thread::yield_now();
        }
        assert_eq!(
            edges(lk(&m, 2, &a, T)),
            [(2, 1, a.clone()), (1, 2, b.clone())]
        );
        // The report's copy of the waits names the row and the table.
        let w = m.waits();
        assert_eq!(w.len(), 1);
        assert_eq!(
            (w[0].txn, w[0].owner, &w[0].key, &*w[0].table),
            (1, 2, &b, "t")
        );
        // The victim gives up its lock; the waiter gets it.
        m.release(2, [&b]);
        assert!(h1.join().unwrap().unwrap().is_some());
        m.release(1, [&a, &b]);
        assert_eq!(m.held(), 0);
        assert!(m.waits_for().is_empty());
    }

    /// Many threads take random sets of few keys in random order, against
    /// a model of ownership: a granted lock is never owned by another
    /// transaction, a refused one (deadlock, timeout) leaves its requester
    /// free to release and retry, and at the end no lock is held and no
    /// edge is left in the graph. Keys are few, so waits, hand-overs and
    /// deadlocks are frequent; every key's shard differs or not at random.
    #[test]
    fn random_transactions_keep_locks_exclusive() {
        use rand::{Rng, SeedableRng};
        use std::sync::atomic::{AtomicU64, Ordering};
        const KEYS: usize = 12;
        const THREADS: u64 = 8;
        let m = Arc::new(LockManager::default());
        let owners: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
        let next_txn = Arc::new(AtomicU64::new(1));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (m, owners, next_txn) = (m.clone(), owners.clone(), next_txn.clone());
                std::thread::spawn(move || {
                    let mut rng = rand::rngs::SmallRng::seed_from_u64(t);
                    let (mut granted, mut waited) = (0u32, 0u32);
                    for _ in 0..400 {
                        let txn = next_txn.fetch_add(1, Ordering::Relaxed);
                        m.note_thread(txn, std::thread::current().id());
                        let mut held: Vec<usize> = Vec::new();
                        for _ in 0..rng.gen_range(1..=3) {
                            let i = rng.gen_range(0..KEYS);
                            let key = k(&format!("k{i}"));
                            match lk(&m, txn, &key, Duration::from_millis(20)) {
                                Ok(w) => {
                                    waited += u32::from(w.is_some());
                                    let prev = owners[i].swap(txn, Ordering::SeqCst);
                                    assert!(
                                        prev == 0 || prev == txn,
                                        "key {i} granted to {txn} while {prev} owns it"
                                    );
                                    if prev == 0 {
                                        held.push(i);
                                    }
                                    granted += 1;
                                }
                                Err(LockError::SelfDeadlock(o)) => {
                                    panic!("txn {txn} refused for its own thread's txn {o}")
                                }
                                Err(_) => break,
                            }
                        }
                        // Hold the locks a while, so that others queue.
                        if rng.gen_bool(0.3) {
                            std::thread::sleep(Duration::from_micros(50));
                        }
                        let keys: Vec<LockKey> = held.iter().map(|i| k(&format!("k{i}"))).collect();
                        for &i in &held {
                            assert_eq!(owners[i].swap(0, Ordering::SeqCst), txn);
                        }
                        m.release(txn, &keys);
                    }
                    (granted, waited)
                })
            })
            .collect();
        let (mut granted, mut waited) = (0, 0);
        for h in handles {
            let (g, w) = h.join().unwrap();
            granted += g;
            waited += w;
        }
        assert!(
            granted > 0 && waited > 0,
            "granted {granted}, after a wait {waited}"
        );
        assert_eq!(m.held(), 0);
        assert!(m.waits_for().is_empty());
    }

    #[test]
    fn no_cycle_means_false() {
        let edge = |txn, owner| Waiting {
            txn,
            owner,
            key: k("x"),
            table: Arc::from("t"),
            since: Instant::now(),
        };
        let g: HashMap<u64, Waiting> = [(2, edge(2, 3)), (3, edge(3, 4))].into();
        assert!(!closes_cycle(&g, 1, 2));
        assert!(closes_cycle(&g, 4, 2));
        // 4 asking for 2's row closes 4 → 2 → 3 → 4.
        let c: Vec<(u64, u64)> = cycle(&g, edge(4, 2))
            .iter()
            .map(|w| (w.txn, w.owner))
            .collect();
        assert_eq!(c, [(4, 2), (2, 3), (3, 4)]);
    }
}
