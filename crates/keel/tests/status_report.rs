#![allow(clippy::unwrap_used)]
//! The status report of a live database (`Db::status`): a transaction
//! waiting for another's row lock shows in TRANSACTIONS with the row and
//! its holder; a deadlock shows in LATEST DETECTED DEADLOCK with its cycle
//! and victim; the metrics endpoint's `/status` serves the same report,
//! and says so once the database is gone.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use keel::{Db, Error, Options, RowLock, Status, TxnState, TxnStatus};

fn opts() -> Options {
    Options {
        lock_wait_timeout: 50.0,
        ..common::small_opts(256)
    }
}

/// The report, once `ready` says it shows what a test set up (the other
/// threads get there on their own time; 30 s is a hang, not slowness).
fn status_when(db: &Db, ready: impl Fn(&Status) -> bool) -> Status {
    let t0 = Instant::now();
    loop {
        let s = db.status();
        if ready(&s) {
            return s;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "never ready:\n{s}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn txn(s: &Status, id: u64) -> &TxnStatus {
    s.transactions
        .active
        .iter()
        .find(|t| t.id == id)
        .unwrap_or_else(|| panic!("transaction {id} not listed:\n{s}"))
}

fn waits(s: &Status, id: u64) -> bool {
    s.transactions
        .active
        .iter()
        .any(|t| t.id == id && matches!(t.state, TxnState::LockWait(_)))
}

/// `GET path` from `addr`: (status line, body).
fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// The report's lines that do not move with time: section titles, the
/// transaction lines without their ages.
fn shape(report: &str) -> Vec<String> {
    report
        .lines()
        .filter(|l| {
            l.chars().all(|c| c.is_ascii_uppercase() || c == ' ')
                || l.starts_with("---TRANSACTION")
                || l.starts_with("------- TRX")
        })
        .map(|l| match l.split_once(": ") {
            Some((_, row)) if l.starts_with("------- TRX") => row.to_string(),
            _ => l.split(", ACTIVE").next().unwrap_or(l).to_string(),
        })
        .collect()
}

#[test]
fn a_transaction_waiting_for_a_row_lock_shows_the_row_and_its_holder() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("accounts").unwrap();
    let server = db.serve_metrics("127.0.0.1:0").unwrap();
    let (locked_tx, locked) = mpsc::channel();
    let (commit_tx, commit) = mpsc::channel::<()>();
    let (waiter_tx, waiter_id) = mpsc::channel();
    std::thread::scope(|s| {
        let (db, t) = (&db, &t);
        std::thread::Builder::new()
            .name("holder".into())
            .spawn_scoped(s, move || {
                let mut a = db.begin();
                a.put(t, b"alice", b"1").unwrap();
                a.put(t, b"bob", b"2").unwrap();
                locked_tx.send(a.id()).unwrap();
                commit.recv().unwrap();
                a.commit().unwrap();
            })
            .unwrap();
        let holder = locked.recv().unwrap();
        std::thread::Builder::new()
            .name("waiter".into())
            .spawn_scoped(s, move || {
                let mut b = db.begin();
                b.put(t, b"carol", b"3").unwrap();
                waiter_tx.send(b.id()).unwrap();
                b.put(t, b"alice", b"4").unwrap();
                b.commit().unwrap();
            })
            .unwrap();
        let waiter = waiter_id.recv().unwrap();
        let st = status_when(db, |s| waits(s, waiter));

        // The fields.
        let h = txn(&st, holder);
        assert_eq!(h.state, TxnState::Active);
        assert_eq!(h.rows_locked, 2);
        assert_eq!(h.thread.as_deref(), Some("holder"));
        assert!(!h.autocommit);
        let w = txn(&st, waiter);
        assert_eq!(w.rows_locked, 1);
        assert_eq!(w.thread.as_deref(), Some("waiter"));
        let TxnState::LockWait(lw) = &w.state else {
            panic!("{w:?}")
        };
        assert_eq!(
            lw.row,
            RowLock {
                table: "accounts".into(),
                key: b"alice".to_vec()
            }
        );
        assert_eq!(lw.holder, holder);

        // The text.
        let text = st.to_string();
        assert!(
            text.contains(&format!(
                "\n---TRANSACTION {holder}, ACTIVE {:.1} s, 2 rows locked, thread holder\n",
                h.age_ms as f64 / 1000.0
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!("\n---TRANSACTION {waiter}, ACTIVE ")),
            "{text}"
        );
        assert!(
            text.contains(
                " s LOCK WAIT, 1 row locked, thread waiter\n------- TRX HAS BEEN WAITING "
            ),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                " FOR THIS LOCK TO BE GRANTED: row \"alice\" of table accounts, held by \
                 transaction {holder}\n"
            )),
            "{text}"
        );
        assert!(text.contains("Transactions under way: 2 (1 waiting for a row lock)"));

        // The endpoint serves the same report.
        let (code, body) = get(server.local_addr(), "/status");
        assert!(code.contains(" 200 "), "{code}");
        assert_eq!(shape(&body), shape(&text), "{body}");
        assert!(shape(&text).len() > 6, "{text}");

        commit_tx.send(()).unwrap();
    });
    let after = status_when(&db, |s| s.transactions.active.is_empty());
    assert!(after
        .to_string()
        .contains("Transactions under way: 0 (0 waiting for a row lock)"));
    assert_eq!(t.get(b"alice").unwrap().as_deref(), Some(&b"4"[..]));

    // Gone: the endpoint outlives the database and says so.
    drop(t);
    db.close().unwrap();
    let (code, body) = get(server.local_addr(), "/status");
    assert!(code.contains(" 503 "), "{code}: {body}");
    assert!(get(server.local_addr(), "/metrics").0.contains(" 200 "));
}

#[test]
fn a_deadlock_shows_its_cycle_rows_and_victim() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    assert!(db.status().latest_deadlock.is_none());
    assert!(!db.status().to_string().contains("LATEST DETECTED DEADLOCK"));
    let (locked_tx, locked) = mpsc::channel();
    let (go_tx, go) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let (db, t) = (&db, &t);
        let other = s.spawn(move || {
            let mut a = db.begin();
            a.put(t, b"a", b"1").unwrap();
            locked_tx.send(a.id()).unwrap();
            go.recv().unwrap();
            // Waits for `b`, which the victim gives up.
            a.put(t, b"b", b"1").unwrap();
            a.commit().unwrap();
        });
        let a = locked.recv().unwrap();
        let mut b = db.begin();
        b.put(t, b"b", b"2").unwrap();
        go_tx.send(()).unwrap();
        status_when(db, |s| waits(s, a));
        let e = b.put(t, b"a", b"2").unwrap_err();
        assert!(matches!(e, Error::Deadlock { .. }), "{e}");
        let victim = b.id();
        drop(b);
        other.join().unwrap();

        let st = db.status();
        let d = st.latest_deadlock.clone().expect("a deadlock");
        assert_eq!(d.victim, victim);
        let cycle: Vec<(u64, &[u8], u64)> = d
            .txns
            .iter()
            .map(|x| (x.id, &x.waits_for.key[..], x.holder))
            .collect();
        assert_eq!(cycle, [(victim, &b"a"[..], a), (a, &b"b"[..], victim)]);
        assert!(d
            .txns
            .iter()
            .all(|x| x.rows_locked == 1 && x.waits_for.table == "t"));
        let text = st.to_string();
        let (_, dl) = text.split_once("LATEST DETECTED DEADLOCK\n").unwrap();
        assert!(
            dl.contains(&format!(
                "*** (1) TRANSACTION {victim}, ACTIVE {:.1} s, 1 row locked",
                d.txns[0].age_ms as f64 / 1000.0
            )),
            "{text}"
        );
        assert!(dl.contains(&format!(
            "*** (1) WAITING FOR THIS LOCK TO BE GRANTED: row \"a\" of table t, held by \
             transaction {a}\n"
        )));
        assert!(dl.contains("*** (2) HOLDS THE LOCK: row \"a\" of table t\n"));
        assert!(dl.contains(&format!("*** WE ROLLED BACK TRANSACTION {victim}\n")));
        assert!(dl.find("TRANSACTIONS\n") > dl.find("WE ROLLED BACK"));
        assert_eq!(st.transactions.deadlocks, 1);
    });
}

/// A one-row `Table::put` waiting for a row lock is listed too, marked as
/// such.
#[test]
fn an_autocommit_write_waiting_for_a_row_lock_is_listed() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), opts()).unwrap();
    let t = db.create_table("t").unwrap();
    let mut a = db.begin();
    a.put(&t, b"k", b"1").unwrap();
    std::thread::scope(|s| {
        let w = s.spawn(|| t.put(b"k", b"2").unwrap());
        let st = status_when(&db, |s| {
            s.transactions
                .active
                .iter()
                .any(|x| x.autocommit && matches!(x.state, TxnState::LockWait(_)))
        });
        let put = st
            .transactions
            .active
            .iter()
            .find(|x| x.autocommit)
            .unwrap();
        let TxnState::LockWait(lw) = &put.state else {
            unreachable!()
        };
        assert_eq!(lw.holder, a.id());
        assert!(st
            .to_string()
            .contains(&format!("---TRANSACTION {} (Table::put/delete), ", put.id)));
        a.commit().unwrap();
        w.join().unwrap();
    });
    assert!(db.status().transactions.active.is_empty());
}
