//! Writes and sync rounds raced deterministically: a `hold` failpoint of
//! the faulty device pauses a round inside its fdatasync, and the log's
//! `log.round.lead` point pauses a leader before its write-out, while the
//! test appends, writes, syncs and looks. Gathering is tested with a window
//! long enough that only the threads' arrivals can end it.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::{files_between, SyncState, MAX_GATHER};
use crate::error::Result;
use crate::io::faulty::{CrashMode, FaultyFs};
use crate::page::Lsn;
use crate::redo::format::{
    encode_group, kind, Checkpoint, CHECKPOINT_SLOTS, GROUP_HDR, LOG_FILE_HDR,
};
use crate::redo::{log_file_name, Log, START_LSN};

const WAIT: Duration = Duration::from_secs(10);

fn faulty_log(files: usize, area: u64) -> (Arc<FaultyFs>, Arc<Log>) {
    let fs = Arc::new(FaultyFs::new());
    let log = Log::create(
        &*fs,
        Path::new("/db"),
        LOG_FILE_HDR + area,
        files,
        7,
        Arc::default(),
    )
    .unwrap();
    (fs, Arc::new(log))
}

fn path(file: usize) -> PathBuf {
    Path::new("/db").join(log_file_name(file))
}

/// One appended group and its bytes as they must appear in the files.
struct Group {
    start: Lsn,
    end: Lsn,
    bytes: Vec<u8>,
}

fn append(log: &Log, payload_len: usize, fill: u8) -> Group {
    let payload = vec![fill; payload_len];
    let (end, start) = log.append(kind::MTR, &payload, |s, _| s).unwrap();
    let mut bytes = Vec::new();
    encode_group(kind::MTR, start, log.epoch().0, &payload, &mut bytes);
    assert_eq!(start + bytes.len() as u64, end);
    Group { start, end, bytes }
}

/// Append one group that ends exactly at `end`.
fn append_to(log: &Log, end: Lsn, fill: u8) -> Group {
    let len = end - log.lsn() - GROUP_HDR as u64;
    append(log, len as usize, fill)
}

/// What a crash now would leave of `[start, end)`.
fn durable(fs: &FaultyFs, log: &Log, mut lsn: Lsn, end: Lsn) -> Vec<u8> {
    let mut out = Vec::new();
    while lsn < end {
        let (f, off, room) = log.locate(lsn);
        let n = room.min(end - lsn);
        let image = fs.durable_image(&path(f)).unwrap();
        out.extend_from_slice(&image[off as usize..(off + n) as usize]);
        lsn += n;
    }
    out
}

fn fsyncs(log: &Log) -> u64 {
    log.metrics
        .os_log_fsyncs
        .load(std::sync::atomic::Ordering::Relaxed)
}

fn spawn_write(log: &Arc<Log>, lsn: Lsn, sync: bool) -> JoinHandle<Result<()>> {
    let log = log.clone();
    std::thread::spawn(move || log.write_up_to(lsn, sync))
}

/// Wait until `n` threads wait for the round in progress.
fn wait_for_waiters(log: &Log, n: usize) {
    let deadline = Instant::now() + WAIT;
    while log.sync_waiters() < n {
        assert!(Instant::now() < deadline, "{n} sync waiters never came");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn join_within(t: JoinHandle<Result<()>>, what: &str) -> Result<()> {
    let deadline = Instant::now() + WAIT;
    while !t.is_finished() {
        assert!(Instant::now() < deadline, "{what} never returned");
        std::thread::sleep(Duration::from_millis(1));
    }
    t.join().unwrap()
}

#[test]
fn a_write_never_waits_for_a_sync_in_progress() {
    let (fs, log) = faulty_log(2, 16 << 10);
    let a = append(&log, 100, 0xa1);
    let hold = fs.arm("/redo-.sync:hold", 0).unwrap();
    let syncer = spawn_write(&log, a.end, true);
    let held = hold.wait_held(WAIT).unwrap();
    assert_eq!(held.path, path(0));
    let b = append(&log, 100, 0xb2);
    // Written from another thread, so that a write stuck behind the held
    // sync fails the test at once instead of after the hold's timeout.
    let (tx, rx) = mpsc::channel();
    let started = Instant::now();
    {
        let log = log.clone();
        std::thread::spawn(move || tx.send(log.write_up_to(b.end, false)));
    }
    rx.recv_timeout(Duration::from_secs(2))
        .expect("a write waited for the held sync")
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(
        log.written.load(std::sync::atomic::Ordering::Acquire),
        b.end
    );
    assert_eq!(log.flushed_lsn(), START_LSN, "nothing is durable yet");
    hold.release();
    syncer.join().unwrap().unwrap();
    assert_eq!(
        log.flushed_lsn(),
        a.end,
        "the round covers what was written before it began, nothing more"
    );
    let rounds = fsyncs(&log);
    log.write_up_to(b.end, true).unwrap();
    assert_eq!(log.flushed_lsn(), b.end);
    assert_eq!(fsyncs(&log), rounds + 1, "b needed a round of its own");
}

/// Round 1 syncs file 0 only and is held; B, written meanwhile, ends in
/// file 1. A thread covered by round 1 returns when it ends; B's thread
/// waits for round 2, which a crash before it ends would have lost.
#[test]
fn a_sync_covered_by_the_round_in_progress_returns_with_it_and_a_later_write_waits_for_the_next() {
    let area = 16 << 10;
    let (fs, log) = faulty_log(2, area);
    let a = append_to(&log, area - 200, 0xa1);
    let hold1 = fs.arm("/redo-.sync:hold", 0).unwrap();
    let t1 = spawn_write(&log, a.end, true);
    assert_eq!(hold1.wait_held(WAIT).unwrap().path, path(0));
    let b = append(&log, 400, 0xb2);
    assert_eq!(log.locate(b.end - 1).0, 1, "B ends in file 1");
    let covered = spawn_write(&log, a.end, true);
    let later = spawn_write(&log, b.end, true);
    wait_for_waiters(&log, 2);
    assert_eq!(
        log.written.load(std::sync::atomic::Ordering::Acquire),
        b.end,
        "B was written while the round was held"
    );
    // Round 2 syncs files 0 and 1; hold it at file 1.
    let hold2 = fs.arm("/redo-1.sync:hold", 0).unwrap();
    hold1.release();
    join_within(t1, "round 1's thread").unwrap();
    join_within(covered, "the thread round 1 covered").unwrap();
    hold2.wait_held(WAIT).unwrap();
    assert_eq!(log.flushed_lsn(), a.end);
    assert!(
        !later.is_finished(),
        "B's sync returned before a round covered it"
    );
    assert_ne!(
        durable(&fs, &log, b.start, b.end),
        b.bytes,
        "B is not durable yet: returning now would have been a lie"
    );
    hold2.release();
    join_within(later, "B's sync").unwrap();
    assert_eq!(log.flushed_lsn(), b.end);
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(durable(&fs, &log, a.start, a.end), a.bytes);
    assert_eq!(durable(&fs, &log, b.start, b.end), b.bytes);
}

#[test]
fn a_round_syncs_only_the_files_written_since_the_last_round() {
    let area = 16 << 10;
    let (fs, log) = faulty_log(3, area);
    // Never fire: they only count each file's syncs.
    let counts: Vec<_> = (0..3)
        .map(|i| fs.arm(&format!("/redo-{i}.sync:eio"), u64::MAX).unwrap())
        .collect();
    let synced = || counts.iter().map(|c| c.matched()).collect::<Vec<_>>();
    let sync = |g: &Group| log.write_up_to(g.end, true).unwrap();

    sync(&append(&log, 100, 1));
    assert_eq!(synced(), [1, 0, 0]);
    assert_eq!(fsyncs(&log), 1);
    log.write_up_to(log.lsn(), true).unwrap();
    assert_eq!(synced(), [1, 0, 0], "nothing new, nothing synced");
    assert_eq!(fsyncs(&log), 1);

    sync(&append_to(&log, area + 100, 2));
    assert_eq!(synced(), [2, 1, 0], "from file 0 into file 1");
    sync(&append(&log, 100, 3));
    assert_eq!(synced(), [2, 2, 0]);
    sync(&append_to(&log, 3 * area - 100, 4));
    assert_eq!(synced(), [2, 3, 1]);

    // Round the end of the circle: the checkpoint must free the log first
    // (its slot write syncs file 0 once, outside any round).
    log.write_checkpoint(log.flushed_lsn()).unwrap();
    assert_eq!(synced(), [3, 3, 1]);
    let wrapped = append_to(&log, 3 * area + 200, 5);
    sync(&wrapped);
    assert_eq!(synced(), [4, 3, 2], "from file 2 round into file 0");
    assert_eq!(
        fsyncs(&log),
        5,
        "one round per sync that had something to do"
    );
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(
        durable(&fs, &log, wrapped.start, wrapped.end),
        wrapped.bytes
    );
}

#[test]
fn a_failed_round_fails_every_thread_it_was_meant_to_cover_and_poisons_the_log() {
    let area = 16 << 10;
    let (fs, log) = faulty_log(2, area);
    let a = append_to(&log, area + 100, 0xa1);
    let hold = fs.arm("/redo-0.sync:hold", 0).unwrap();
    let eio = fs.arm("/redo-1.sync:eio", 0).unwrap();
    let t1 = spawn_write(&log, a.end, true);
    hold.wait_held(WAIT).unwrap();
    let b = append(&log, 100, 0xb2);
    let covered = spawn_write(&log, a.end, true);
    let later = spawn_write(&log, b.end, true);
    wait_for_waiters(&log, 2);
    hold.release();
    for (t, what) in [(t1, "round"), (covered, "covered"), (later, "later")] {
        let e = join_within(t, what).expect_err(what);
        assert!(e.to_string().contains("redo-"), "{what}: {e}");
    }
    assert_eq!(eio.fired(), 1);
    assert_eq!(eio.matched(), 1, "no round was tried after the failure");
    assert_eq!(log.flushed_lsn(), START_LSN, "nothing became durable");
    assert!(log.check_poisoned().is_err());
    assert!(log.write_up_to(b.end, true).is_err());
    assert!(log.append(kind::MTR, b"x", |_, _| ()).is_err());
}

#[test]
fn files_between_names_each_file_a_range_touches_in_lsn_order() {
    for n in 1..=4usize {
        for area in 1..=4u64 {
            let cap = area * n as u64;
            for from in 0..3 * cap {
                for to in from..=from + cap + 2 {
                    let mut walk: Vec<usize> = Vec::new();
                    for l in from..to {
                        let f = ((l % cap) / area) as usize;
                        if !walk.contains(&f) {
                            walk.push(f);
                        }
                    }
                    let got: Vec<usize> = files_between(from, to, area, n).collect();
                    assert_eq!(got, walk, "n {n} area {area} [{from}, {to})");
                }
            }
        }
    }
}

/// Threads append and ask for their groups written or durable at random,
/// on a device slow enough that writes land during rounds; after a crash
/// that drops every unsynced write, each group whose sync returned Ok is
/// intact.
#[test]
fn concurrent_syncs_lose_nothing_they_acknowledged() {
    let seed: u64 = std::env::var("KEEL_TEST_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("seed {seed} (replay with KEEL_TEST_SEED={seed})");
    let (fs, log) = faulty_log(4, 64 << 10);
    let slow_sync = fs.arm("/redo-.sync:delay=300us", 0).unwrap();
    let slow_write = fs.arm("/redo-.write:delay=20us", 0).unwrap();
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(seed ^ t);
                let mut acked = Vec::new();
                for i in 0..150u64 {
                    let g = append(&log, rng.gen_range(1..200), (t * 50 + i % 50) as u8);
                    let sync = rng.gen_bool(0.5);
                    log.write_up_to(g.end, sync).unwrap();
                    if sync {
                        assert!(log.flushed_lsn() >= g.end);
                        acked.push(g);
                    }
                }
                acked
            })
        })
        .collect();
    let acked: Vec<Group> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert!(slow_sync.fired() > 0 && slow_write.fired() > 0);
    let rounds = fsyncs(&log);
    assert!(
        rounds <= acked.len() as u64,
        "{rounds} rounds for {} syncs",
        acked.len()
    );
    fs.disarm();
    fs.crash(CrashMode::DropUnsynced);
    for g in &acked {
        assert_eq!(
            durable(&fs, &log, g.start, g.end),
            g.bytes,
            "group at {} acknowledged durable but lost",
            g.start
        );
    }
}

fn gathers(log: &Log) -> u64 {
    log.metrics
        .log_sync_gathers
        .load(std::sync::atomic::Ordering::Relaxed)
}

fn written(log: &Log) -> Lsn {
    log.written.load(std::sync::atomic::Ordering::Acquire)
}

/// Wait until the leader of the round in progress gathers.
fn wait_for_gathering(log: &Log) {
    let deadline = Instant::now() + WAIT;
    while !log.sync.lock().gathering {
        assert!(Instant::now() < deadline, "no leader ever gathered");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Append a group and ask for it durable from another thread.
fn spawn_commit(log: &Arc<Log>, fill: u8) -> (Group, JoinHandle<Result<()>>) {
    let g = append(log, 100, fill);
    let t = spawn_write(log, g.end, true);
    (g, t)
}

/// The leader is held after it took the round: a group whose thread wrote
/// it and joined the round, and one appended after it and not written by
/// anyone, are both covered by that one round, and a crash after it keeps
/// both.
#[test]
fn a_leader_writes_out_and_covers_everything_appended_before_its_target() {
    let (fs, log) = faulty_log(2, 16 << 10);
    let a = append(&log, 100, 0xa1);
    let lead = log.failpoints.arm("log.round.lead");
    let leader = spawn_write(&log, a.end, true);
    assert!(
        lead.wait_held(WAIT),
        "the leader never reached its write-out"
    );
    // Written and joined.
    let (c, joined) = spawn_commit(&log, 0xc3);
    wait_for_waiters(&log, 1);
    assert_eq!(written(&log), c.end, "C was written by its own thread");
    // Appended only: its thread has not asked for anything yet.
    let b = append(&log, 100, 0xb2);
    assert_eq!(fsyncs(&log), 0);
    lead.release();
    join_within(leader, "the leader").unwrap();
    join_within(joined, "the thread that joined").unwrap();
    assert_eq!(
        log.flushed_lsn(),
        b.end,
        "the round covers everything appended before the leader read its target"
    );
    assert_eq!(fsyncs(&log), 1, "one round for all three");
    // B's thread finds its group durable and syncs nothing.
    log.write_up_to(b.end, true).unwrap();
    assert_eq!(fsyncs(&log), 1);
    fs.crash(CrashMode::DropUnsynced);
    for g in [&a, &b, &c] {
        assert_eq!(durable(&fs, &log, g.start, g.end), g.bytes);
    }
}

/// Threads that arrive while a round is inside its fdatasync are covered
/// by exactly one more round, which one of them leads; none is lost or
/// left waiting. The demand the next leader expects counts them.
#[test]
fn threads_arriving_during_a_sync_are_covered_by_exactly_one_more_round() {
    let (fs, log) = faulty_log(2, 16 << 10);
    let a = append(&log, 100, 0xa1);
    let hold = fs.arm("/redo-.sync:hold", 0).unwrap();
    let leader = spawn_write(&log, a.end, true);
    hold.wait_held(WAIT).unwrap();
    let arrivals: Vec<_> = (0..3).map(|i| spawn_commit(&log, 0xb0 + i)).collect();
    wait_for_waiters(&log, 3);
    hold.release();
    join_within(leader, "the first round's leader").unwrap();
    for (g, t) in arrivals {
        join_within(t, "a thread that arrived during the sync").unwrap();
        assert!(log.flushed_lsn() >= g.end);
    }
    assert_eq!(fsyncs(&log), 2, "one round for the three that arrived");
    assert_eq!(log.sync_waiters(), 0);
    assert!(!log.sync.lock().running);
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(log.flushed_lsn(), log.lsn());
}

/// The last round had three threads; the next leader waits for two more
/// before it syncs, and the second's arrival, not the window, ends the
/// wait: one round covers all three.
#[test]
fn a_leader_gathers_as_many_threads_as_the_last_round_had() {
    let (fs, log) = faulty_log(2, 16 << 10);
    log.set_gather_window_for_test(WAIT);
    // A round with a leader and two threads that joined it.
    let hold = fs.arm("/redo-.sync:hold", 0).unwrap();
    let (_, first) = spawn_commit(&log, 1);
    hold.wait_held(WAIT).unwrap();
    let joined: Vec<_> = (0..2).map(|i| spawn_commit(&log, 2 + i)).collect();
    wait_for_waiters(&log, 2);
    // The joined threads need a round of their own: let its leader not
    // gather (nobody else is coming), then look at the demand.
    log.sync.lock().window_for_test = Some(Duration::ZERO);
    hold.release();
    join_within(first, "the first round").unwrap();
    for (_, t) in joined {
        join_within(t, "a joined thread").unwrap();
    }
    let rounds = fsyncs(&log);
    assert_eq!(rounds, 2);
    assert_eq!(gathers(&log), 0);
    log.sync.lock().demand = 3;
    log.set_gather_window_for_test(WAIT);

    let (_, leader) = spawn_commit(&log, 0xa1);
    wait_for_gathering(&log);
    let (_, f1) = spawn_commit(&log, 0xb2);
    wait_for_waiters(&log, 1);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(fsyncs(&log), rounds, "the leader synced before two joined");
    assert!(log.sync.lock().gathering);
    let arrived = Instant::now();
    let (c, f2) = spawn_commit(&log, 0xc3);
    for (t, what) in [(leader, "leader"), (f1, "first"), (f2, "second")] {
        join_within(t, what).unwrap();
    }
    assert!(
        arrived.elapsed() < WAIT / 2,
        "the second arrival ended the gathering, not the window"
    );
    assert_eq!(fsyncs(&log), rounds + 1, "one round for the three");
    assert_eq!(gathers(&log), 1);
    assert_eq!(log.flushed_lsn(), c.end);
    assert_eq!(log.sync.lock().demand, 3);
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(durable(&fs, &log, c.start, c.end), c.bytes);
}

/// A leader that expects threads which never come waits for its window
/// and no longer, then syncs; the next demand counts only who came, so the
/// next leader does not wait at all.
#[test]
fn a_leader_gathers_for_its_window_at_most_and_then_expects_only_who_came() {
    let (_fs, log) = faulty_log(2, 16 << 10);
    let window = Duration::from_millis(100);
    log.set_gather_window_for_test(window);
    log.sync.lock().demand = 8;
    let a = append(&log, 100, 0xa1);
    let started = Instant::now();
    log.write_up_to(a.end, true).unwrap();
    assert!(started.elapsed() >= window);
    assert_eq!(gathers(&log), 1);
    assert_eq!(fsyncs(&log), 1);
    assert_eq!(log.sync.lock().demand, 1);
    let b = append(&log, 100, 0xb2);
    log.write_up_to(b.end, true).unwrap();
    assert_eq!(gathers(&log), 1, "a lone thread does not gather");
    assert_eq!(fsyncs(&log), 2);
}

#[test]
fn the_gathering_window_is_a_tenth_of_the_sync_time_within_bounds() {
    let window = |sync_us| {
        SyncState {
            sync_us,
            ..Default::default()
        }
        .gather_window()
    };
    assert_eq!(window(0), Duration::ZERO);
    assert_eq!(window(3_000), Duration::from_micros(300));
    assert_eq!(window(50_000), MAX_GATHER);
}

/// Threads gathered by a leader whose round's fdatasync fails all fail;
/// the log is poisoned and nothing is tried again.
#[test]
fn a_failed_sync_fails_the_leader_and_every_thread_it_gathered() {
    let (fs, log) = faulty_log(2, 16 << 10);
    log.set_gather_window_for_test(WAIT);
    log.sync.lock().demand = 3;
    let eio = fs.arm("/redo-.sync:eio", 0).unwrap();
    let (_, leader) = spawn_commit(&log, 0xa1);
    wait_for_gathering(&log);
    let followers: Vec<_> = (0..2).map(|i| spawn_commit(&log, 0xb0 + i).1).collect();
    let e = join_within(leader, "the leader").expect_err("leader");
    assert!(e.to_string().contains("redo-0"), "{e}");
    for t in followers {
        let e = join_within(t, "a follower").expect_err("follower");
        assert!(e.to_string().contains("redo-"), "{e}");
    }
    assert_eq!(eio.fired(), 1);
    assert_eq!(eio.matched(), 1, "no round was tried after the failure");
    assert_eq!(fsyncs(&log), 0);
    assert_eq!(log.flushed_lsn(), START_LSN);
    assert!(log.check_poisoned().is_err());
}

/// The leader's write-out of what others appended fails while a thread
/// whose own bytes were written waits: that thread fails too (its bytes
/// were never synced), no fdatasync runs, and the log is poisoned.
#[test]
fn a_failed_write_out_by_the_leader_fails_the_threads_waiting_for_its_round() {
    let (fs, log) = faulty_log(2, 16 << 10);
    let a = append(&log, 100, 0xa1);
    let lead = log.failpoints.arm("log.round.lead");
    let leader = spawn_write(&log, a.end, true);
    assert!(lead.wait_held(WAIT));
    let (b, waiter) = spawn_commit(&log, 0xb2);
    wait_for_waiters(&log, 1);
    assert_eq!(written(&log), b.end);
    append(&log, 100, 0xc3);
    let counted = fs.arm("/redo-.sync:eio", u64::MAX).unwrap();
    let eio = fs.arm("/redo-.write:eio", 0).unwrap();
    lead.release();
    let e = join_within(leader, "the leader").expect_err("leader");
    assert!(e.to_string().contains("redo-0"), "{e}");
    let e = join_within(waiter, "the waiting thread").expect_err("waiter");
    assert!(e.to_string().contains("redo log write failed"), "{e}");
    assert_eq!(eio.fired(), 1);
    assert_eq!(counted.matched(), 0, "nothing was synced");
    assert_eq!(log.flushed_lsn(), START_LSN);
    assert!(log.check_poisoned().is_err());
    assert!(log.write_up_to(b.end, true).is_err());
}

fn log_writes(log: &Log) -> u64 {
    log.metrics
        .log_writes
        .load(std::sync::atomic::Ordering::Relaxed)
}

/// Wait until `n` threads wait for the write-out in progress.
fn wait_for_write_waiters(log: &Log, n: usize) {
    let deadline = Instant::now() + WAIT;
    while log.write_waiting.load(std::sync::atomic::Ordering::Relaxed) < n {
        assert!(Instant::now() < deadline, "{n} write waiters never came");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A writer is held after it took the buffer, holding the `write` mutex.
/// Threads needing their bytes written wait for it instead of queueing on
/// the mutex: the one whose bytes it took returns when it is done, without
/// writing; of the two that appended after it took the buffer, one writes
/// both groups, once. Nobody returns before its bytes are written.
#[test]
fn threads_finding_a_write_under_way_wait_for_it_and_one_more_write_covers_the_rest() {
    let (fs, log) = faulty_log(2, 16 << 10);
    let a = append(&log, 100, 0xa1);
    let b = append(&log, 100, 0xb2);
    let taken = log.failpoints.arm("log.write.taken");
    let writer = spawn_write(&log, a.end, false);
    assert!(taken.wait_held(WAIT), "the writer never took the buffer");
    let c = append(&log, 100, 0xc3);
    let d = append(&log, 100, 0xd4);
    let waiters: Vec<_> = [&b, &c, &d]
        .into_iter()
        .map(|g| spawn_write(&log, g.end, false))
        .collect();
    wait_for_write_waiters(&log, 3);
    assert_eq!(log_writes(&log), 0);
    assert!(written(&log) < a.end);
    assert!(waiters.iter().all(|t| !t.is_finished()));
    taken.release();
    join_within(writer, "the held writer").unwrap();
    for t in waiters {
        join_within(t, "a thread waiting for the write").unwrap();
    }
    assert_eq!(written(&log), d.end);
    assert_eq!(log_writes(&log), 2, "the held write, then one for C and D");
    assert_eq!(
        log.write_waiting.load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    log.write_up_to(d.end, true).unwrap();
    fs.crash(CrashMode::DropUnsynced);
    for g in [&a, &b, &c, &d] {
        assert_eq!(durable(&fs, &log, g.start, g.end), g.bytes);
    }
}

/// A writer that panics after it took the buffer poisons the log as its
/// hold of `write` ends (the same guard that wakes the waiters): a thread
/// whose bytes it took fails instead of finding them written by nobody,
/// and nothing more is appended (a write after the lost buffer would leave
/// a hole).
#[test]
fn a_writer_panicking_with_the_buffer_poisons_the_log() {
    let (_fs, log) = faulty_log(2, 16 << 10);
    let a = append(&log, 100, 0xa1);
    let b = append(&log, 100, 0xb2);
    let _panic = log.failpoints.arm_panic("log.write.taken");
    let writer = spawn_write(&log, a.end, false);
    let deadline = Instant::now() + WAIT;
    while !writer.is_finished() {
        assert!(Instant::now() < deadline, "the writer never panicked");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(writer.join().is_err(), "the writer panicked");
    let e = log.write_up_to(b.end, false).unwrap_err();
    assert!(e.to_string().contains("abandoned by a panic"), "{e}");
    assert!(log.append(kind::MTR, &[1; 10], |s, _| s).is_err());
    assert!(written(&log) < a.end);
    assert!(!log.write.is_locked());
}

fn checkpoints_in_round(log: &Log) -> u64 {
    log.metrics
        .log_checkpoints_in_round
        .load(std::sync::atomic::Ordering::Relaxed)
}

/// The checkpoint a crash now would recover from: the newest valid slot
/// in file 0's durable image.
fn recovered_checkpoint(fs: &Arc<FaultyFs>) -> Lsn {
    fs.crash(CrashMode::DropUnsynced);
    let image = fs.durable_image(&path(0)).unwrap();
    CHECKPOINT_SLOTS
        .iter()
        .filter_map(|&o| Checkpoint::decode(&image[o as usize..]))
        .max_by_key(|c| c.no)
        .unwrap()
        .lsn
}

/// With the end of the log in file 0 the slot is made durable by the
/// round the checkpoint runs to the end (file 0 synced once, `flushed`
/// raised); with the end in file 1 by a sync of file 0 of its own.
#[test]
fn a_checkpoint_rides_a_round_when_the_end_is_in_file_0_and_syncs_its_slot_alone_otherwise() {
    let area = 16 << 10;
    let (fs, log) = faulty_log(2, area);
    // Never fire: they only count each file's syncs.
    let counts: Vec<_> = (0..2)
        .map(|i| fs.arm(&format!("/redo-{i}.sync:eio"), u64::MAX).unwrap())
        .collect();
    let synced = || counts.iter().map(|c| c.matched()).collect::<Vec<_>>();
    let a = append(&log, 100, 1);
    log.write_up_to(a.end, true).unwrap();
    let b = append(&log, 100, 2);
    log.write_up_to(b.end, false).unwrap();
    assert_eq!(synced(), [1, 0]);

    assert!(log.write_checkpoint(a.end).unwrap());
    assert_eq!(synced(), [2, 0], "one sync of file 0: the round's");
    assert_eq!(checkpoints_in_round(&log), 1);
    assert_eq!(log.flushed_lsn(), b.end, "the round synced the log's end");
    assert_eq!(log.checkpoint_lsn(), a.end);

    let c = append_to(&log, area + 100, 3);
    log.write_up_to(c.end, true).unwrap();
    assert_eq!(synced(), [3, 1]);
    assert!(log.write_checkpoint(b.end).unwrap());
    assert_eq!(synced(), [4, 1], "the slot's own sync");
    assert_eq!(checkpoints_in_round(&log), 1);
    assert_eq!(log.checkpoint_lsn(), b.end);
    assert_eq!(recovered_checkpoint(&fs), b.end);
}

/// A round whose fdatasync of file 0 began before the slot was written
/// (held there while the checkpoint writes its slot and joins it) does not
/// count for the slot: the checkpoint syncs file 0 once more. (The faulty
/// device applies a held sync only when released, after the slot's write,
/// so only the count of syncs can tell the two apart here; a real
/// device's sync may miss a write that lands while it runs.)
#[test]
fn a_round_begun_before_the_slot_was_written_does_not_make_it_durable() {
    let area = 16 << 10;
    let (fs, log) = faulty_log(2, area);
    let count0 = fs.arm("/redo-0.sync:eio", u64::MAX).unwrap();
    let a = append(&log, 100, 1);
    log.write_up_to(a.end, true).unwrap();
    assert_eq!(count0.matched(), 1);
    let b = append(&log, 100, 2);
    let hold = fs.arm("/redo-0.sync:hold", 0).unwrap();
    let round = spawn_write(&log, b.end, true);
    hold.wait_held(WAIT).unwrap();
    let checkpoint = {
        let log = log.clone();
        std::thread::spawn(move || log.write_checkpoint(a.end).map(|_| ()))
    };
    // The checkpoint wrote its slot and waits for the held round.
    wait_for_waiters(&log, 1);
    assert_eq!(
        log.checkpoint_lsn(),
        START_LSN,
        "not durable: not yet counted"
    );
    hold.release();
    join_within(round, "the held round").unwrap();
    join_within(checkpoint, "the checkpoint").unwrap();
    assert_eq!(
        count0.matched(),
        3,
        "the held round's sync, then the slot's own"
    );
    assert_eq!(checkpoints_in_round(&log), 0);
    assert_eq!(log.checkpoint_lsn(), a.end);
    assert_eq!(recovered_checkpoint(&fs), a.end);
}

/// A failed sync of the slot poisons the log and the checkpoint does not
/// count: the previous slot is the one a restart finds.
#[test]
fn a_checkpoint_whose_slot_cannot_be_synced_does_not_count_and_poisons_the_log() {
    let area = 16 << 10;
    let (fs, log) = faulty_log(2, area);
    let a = append(&log, 100, 1);
    log.write_up_to(a.end, true).unwrap();
    let b = append(&log, 100, 2);
    log.write_up_to(b.end, true).unwrap();
    let _fail = fs.arm("/redo-0.sync:eio", 0).unwrap();
    assert!(log.write_checkpoint(a.end).is_err());
    assert_eq!(log.checkpoint_lsn(), START_LSN);
    assert!(
        log.append(kind::MTR, &[3; 10], |s, _| s).is_err(),
        "poisoned"
    );
    assert_eq!(recovered_checkpoint(&fs), START_LSN);
}

/// Between its slot's write and the sync that covers it (failpoint
/// `checkpoint.slot_written`), a checkpoint does not count: the log space
/// below it is not free yet, and a crash there recovers from the slot
/// before, whose place the new one did not take.
#[test]
fn a_checkpoint_counts_only_once_its_slot_is_durable() {
    let area = 16 << 10;
    let (fs, log) = faulty_log(2, area);
    let a = append(&log, 100, 1);
    log.write_up_to(a.end, true).unwrap();
    assert!(log.write_checkpoint(a.end).unwrap());
    let b = append(&log, 100, 2);
    log.write_up_to(b.end, true).unwrap();
    let hold = log.failpoints.arm("checkpoint.slot_written");
    let checkpoint = {
        let log = log.clone();
        std::thread::spawn(move || log.write_checkpoint(b.end).map(|_| ()))
    };
    assert!(hold.wait_held(WAIT), "the checkpoint never wrote its slot");
    assert_eq!(log.checkpoint_lsn(), a.end, "counted before it is durable");
    assert_eq!(log.age(), b.end - a.end);
    fs.kill_process();
    assert_eq!(recovered_checkpoint(&fs), a.end);
    hold.release();
    assert!(
        join_within(checkpoint, "the checkpoint").is_err(),
        "its sync fails on a dead handle"
    );
    assert_eq!(log.checkpoint_lsn(), a.end);
}
