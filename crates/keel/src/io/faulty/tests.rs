#![allow(clippy::unwrap_used)]

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::*;
use crate::io::AtomicWriteUnit;

fn path(name: &str) -> PathBuf {
    Path::new("/faulty/db").join(name)
}

fn create(fs: &FaultyFs, name: &str) -> Arc<dyn Device> {
    fs.open(&path(name), OpenMode::CreateNew).unwrap()
}

fn reopen(fs: &FaultyFs, name: &str) -> Arc<dyn Device> {
    fs.open(&path(name), OpenMode::Existing).unwrap()
}

fn read_all(dev: &dyn Device) -> Vec<u8> {
    let mut buf = vec![0u8; dev.len().unwrap() as usize];
    dev.read_at(&mut buf, 0).unwrap();
    buf
}

#[test]
fn a_read_only_handle_reads_and_refuses_every_change() {
    let fs = FaultyFs::new();
    create(&fs, "data-0.keel").write_at(&[1; 100], 0).unwrap();
    let ro = fs.open(&path("data-0.keel"), OpenMode::ReadOnly).unwrap();
    assert_eq!(read_all(&*ro), vec![1; 100]);
    let ebadf = |r: io::Result<()>| r.unwrap_err().raw_os_error() == Some(libc::EBADF);
    assert!(ebadf(ro.write_at(&[2; 10], 0)));
    assert!(ebadf(ro.set_len(10)));
    assert!(ebadf(ro.allocate(4096)));
    assert_eq!(read_all(&*reopen(&fs, "data-0.keel")), vec![1; 100]);
    assert!(fs.open(&path("data-9.keel"), OpenMode::ReadOnly).is_err());
}

#[test]
fn crash_drops_unsynced_writes() {
    let fs = FaultyFs::new();
    let dev = create(&fs, "data-0.keel");
    dev.write_at(&[1; 100], 0).unwrap();
    assert_eq!(read_all(&*dev), vec![1; 100], "reads see pending writes");
    fs.crash(CrashMode::DropUnsynced);
    let dev = reopen(&fs, "data-0.keel");
    assert_eq!(dev.len().unwrap(), 0);
}

#[test]
fn synced_writes_survive_a_crash() {
    let fs = FaultyFs::new();
    let dev = create(&fs, "a");
    dev.write_at(&[1; 10], 0).unwrap();
    dev.write_at(&[2; 10], 5).unwrap();
    dev.sync().unwrap();
    dev.write_at(&[3; 10], 0).unwrap();
    let other = create(&fs, "b");
    other.write_at(b"lost", 0).unwrap();
    fs.crash(CrashMode::DropUnsynced);
    let mut want = vec![1u8; 5];
    want.extend([2u8; 10]);
    assert_eq!(read_all(&*reopen(&fs, "a")), want);
    assert_eq!(fs.durable_image(&path("a")).unwrap(), want);
    // A created file survives its (empty) creation.
    assert_eq!(reopen(&fs, "b").len().unwrap(), 0);
}

#[test]
fn random_crash_keeps_some_writes_and_is_deterministic() {
    let image = |seed| {
        let fs = FaultyFs::new();
        let dev = create(&fs, "r");
        for i in 0..64u8 {
            dev.write_at(&[i + 1], u64::from(i)).unwrap();
        }
        fs.crash(CrashMode::Random { seed });
        fs.durable_image(&path("r")).unwrap()
    };
    let a = image(7);
    assert_eq!(a, image(7), "same seed, same image");
    let kept = a.iter().filter(|&&b| b != 0).count();
    assert!((10..54).contains(&kept), "kept {kept} of 64 writes");
    for (i, &b) in a.iter().enumerate() {
        assert!(b == 0 || b == i as u8 + 1, "byte {i} = {b}");
    }
}

#[test]
fn torn_crash_keeps_whole_4k_sectors_of_a_page() {
    const PAGE: usize = 16384;
    let mut partial = 0;
    for seed in 0..20 {
        let fs = FaultyFs::new();
        let dev = create(&fs, "t");
        dev.write_at(&vec![0xaa; PAGE], 0).unwrap();
        dev.sync().unwrap();
        dev.write_at(&vec![0xbb; PAGE], 0).unwrap();
        fs.crash(CrashMode::Torn { seed });
        let image = fs.durable_image(&path("t")).unwrap();
        assert_eq!(image.len(), PAGE);
        let sectors: Vec<u8> = image
            .chunks(SECTOR)
            .map(|s| {
                assert!(
                    s.iter().all(|&b| b == s[0]),
                    "seed {seed}: sector torn inside"
                );
                s[0]
            })
            .collect();
        if sectors.contains(&0xaa) && sectors.contains(&0xbb) {
            partial += 1;
        }
    }
    assert!(partial >= 10, "only {partial} of 20 seeds tore the page");
}

#[test]
fn torn_sectors_follow_device_alignment() {
    // A write starting mid-sector keeps or loses the partial first sector
    // as one piece.
    let fs = FaultyFs::new();
    let dev = create(&fs, "u");
    dev.write_at(&vec![5; 3 * SECTOR], 1000).unwrap();
    fs.crash(CrashMode::Torn { seed: 3 });
    let image = fs.durable_image(&path("u")).unwrap();
    let bounds = [1000, SECTOR, 2 * SECTOR, 3 * SECTOR, 3 * SECTOR + 1000];
    for w in bounds.windows(2) {
        let piece = image.get(w[0]..w[1]).unwrap_or(&[]);
        assert!(
            piece.iter().all(|&b| b == 5) || piece.iter().all(|&b| b == 0),
            "{w:?}"
        );
    }
}

#[test]
fn handles_opened_before_a_crash_fail() {
    let fs = FaultyFs::new();
    let dev = create(&fs, "h");
    dev.write_at(&[1; 8], 0).unwrap();
    dev.sync().unwrap();
    fs.crash(CrashMode::DropUnsynced);
    let mut buf = [0u8; 8];
    let errors = [
        dev.read_at(&mut buf, 0).unwrap_err(),
        dev.write_at(&buf, 0).unwrap_err(),
        dev.sync().unwrap_err(),
        dev.len().unwrap_err(),
        dev.set_len(0).unwrap_err(),
    ];
    for e in errors {
        assert!(e.to_string().contains("lost power"), "{e}");
    }
    let fresh = reopen(&fs, "h");
    fresh.read_at(&mut buf, 0).unwrap();
    assert_eq!(buf, [1; 8]);
}

#[test]
fn open_modes_and_exists() {
    let fs = FaultyFs::new();
    let p = path("x");
    assert!(!fs.exists(&p));
    let err = fs.open(&p, OpenMode::Existing).err().unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    create(&fs, "x");
    assert!(fs.exists(&p));
    assert!(
        FileSystem::exists(&fs, Path::new("/faulty/db")),
        "implied directory"
    );
    assert!(!fs.exists(Path::new("/faulty/d")));
    let err = fs.open(&p, OpenMode::CreateNew).err().unwrap();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
    assert_eq!(fs.paths(), vec![p]);
}

#[test]
fn failpoints_fire_after_n_ops_with_the_right_errno() {
    let fs = FaultyFs::new();
    let data = create(&fs, "data-0.keel");
    let log = create(&fs, "log-0.keel");
    fs.arm("data.write:enospc", 2).unwrap();
    data.write_at(&[1], 0).unwrap();
    log.write_at(&[1], 0).unwrap(); // another file: not counted
    data.write_at(&[1], 1).unwrap();
    let e = data.write_at(&[1], 2).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
    data.write_at(&[1], 2).unwrap(); // `once`: disarmed after firing
    assert_eq!(data.len().unwrap(), 3, "the failed write wrote nothing");

    fs.fail_after(
        FailPoint::Sync {
            path_contains: "log".into(),
        },
        0,
        FailKind::Sticky(Errno::Eio),
    );
    for _ in 0..3 {
        assert_eq!(log.sync().unwrap_err().raw_os_error(), Some(libc::EIO));
    }
    data.sync().unwrap();
    fs.disarm();
    log.sync().unwrap();
}

#[test]
fn failed_sync_loses_the_pending_writes() {
    let fs = FaultyFs::new();
    let dev = create(&fs, "s");
    dev.write_at(b"durable?", 0).unwrap();
    fs.arm("s.sync:eio", 0).unwrap();
    assert!(dev.sync().is_err());
    assert_eq!(read_all(&*dev), b"durable?", "still readable");
    dev.sync().unwrap(); // succeeds, but the write is not in it
    fs.crash(CrashMode::DropUnsynced);
    assert!(read_all(&*reopen(&fs, "s")).is_empty());
}

#[test]
fn set_len_is_durable_and_clips_pending_writes() {
    let fs = FaultyFs::new();
    let dev = create(&fs, "l");
    dev.set_len(100).unwrap();
    dev.write_at(&[9; 50], 40).unwrap();
    dev.set_len(60).unwrap();
    dev.set_len(100).unwrap();
    let image = read_all(&*dev);
    assert_eq!(&image[40..60], &[9; 20]);
    assert_eq!(&image[60..], &[0; 40], "clipped by the shrink");
    dev.sync().unwrap();
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(read_all(&*reopen(&fs, "l")), image);
    let err = reopen(&fs, "l").read_at(&mut [0; 8], 96).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
}

#[test]
fn failpoint_specs_parse() {
    let (p, k) = FailPoint::parse("dblwr.sync:eio:sticky").unwrap();
    assert_eq!(
        p,
        FailPoint::Sync {
            path_contains: "dblwr".into()
        }
    );
    assert_eq!(k, FailKind::Sticky(Errno::Eio));
    let (p, k) = FailPoint::parse(".set_len:enospc").unwrap();
    assert_eq!(
        p,
        FailPoint::SetLen {
            path_contains: String::new()
        }
    );
    assert_eq!(k, FailKind::Once(Errno::Enospc));
    for bad in [
        "data",
        "data.flush:eio",
        "data.write:eperm",
        "data.write:eio:x",
    ] {
        let e = FailPoint::parse(bad).unwrap_err();
        assert!(e.contains(bad), "{e}");
    }
}

#[test]
fn crash_and_hold_specs_parse() {
    let ok = [
        ("data-.sync:crash", FailKind::Crash(CrashMode::DropUnsynced)),
        (
            "dblwr.write:crash-random=7",
            FailKind::Crash(CrashMode::Random { seed: 7 }),
        ),
        (
            "data.sync:crash-torn",
            FailKind::Crash(CrashMode::Torn { seed: 0 }),
        ),
        (
            "redo.read:hold",
            FailKind::Hold {
                timeout: HOLD_TIMEOUT,
            },
        ),
    ];
    for (spec, want) in ok {
        assert_eq!(FailPoint::parse(spec).unwrap().1, want, "{spec}");
    }
    for bad in [
        "data.sync:crash:sticky",
        "data.sync:hold:sticky",
        "data.sync:crash=3",
        "data.sync:crash-torn=x",
        "data.sync:crash-sideways",
        "data.sync:",
    ] {
        let e = FailPoint::parse(bad).unwrap_err();
        assert!(e.contains(bad), "{e}");
    }
}

/// Two files: `data-0` with 0xaa synced and `page` bytes of 0xbb pending
/// over it, `redo-0` with one synced byte.
fn two_files(page: usize) -> (FaultyFs, Arc<dyn Device>, Arc<dyn Device>) {
    let fs = FaultyFs::new();
    let data = create(&fs, "data-0.keel");
    data.write_at(&vec![0xaa; page], 0).unwrap();
    data.sync().unwrap();
    data.write_at(&vec![0xbb; page], 0).unwrap();
    let redo = create(&fs, "redo-0.keel");
    redo.write_at(&[1], 0).unwrap();
    redo.sync().unwrap();
    (fs, data, redo)
}

#[test]
fn crash_at_a_sync_loses_power_before_the_sync_and_kills_every_handle() {
    let (fs, data, redo) = two_files(SECTOR);
    let trigger = fs.arm("data-.sync:crash", 1).unwrap();
    redo.sync().unwrap(); // another file: not counted
    data.sync().unwrap(); // the one call let through: 0xbb is durable
    data.write_at(&[0xcc; 8], 0).unwrap();
    redo.write_at(&[2], 1).unwrap();
    assert_eq!((trigger.matched(), trigger.fired()), (1, 0));
    let e = data.sync().unwrap_err();
    assert!(e.to_string().contains("lost power") && e.to_string().contains("data-.sync:crash"));
    assert_eq!(trigger.fired(), 1);
    // Every handle opened before the crash is dead, on every file.
    assert!(redo.sync().unwrap_err().to_string().contains("lost power"));
    assert!(data.len().unwrap_err().to_string().contains("lost power"));
    // The sync made nothing durable; the pending writes were dropped.
    let image = read_all(&*reopen(&fs, "data-0.keel"));
    assert!(
        image == vec![0xbb; SECTOR],
        "the sync at the crash took effect"
    );
    assert_eq!(read_all(&*reopen(&fs, "redo-0.keel")), vec![1]);
    // Fired once, then disarmed.
    reopen(&fs, "data-0.keel").sync().unwrap();
}

#[test]
fn crash_at_a_write_leaves_the_write_pending_for_the_crash_mode() {
    const PAGE: usize = 4 * SECTOR;
    let outcome = |spec: &str| {
        let (fs, data, _redo) = two_files(PAGE);
        data.sync().unwrap();
        let trigger = fs.arm(spec, 0).unwrap();
        let e = data.write_at(&vec![0xcc; PAGE], 0).unwrap_err();
        assert!(e.to_string().contains("lost power"), "{e}");
        assert_eq!(trigger.fired(), 1);
        let image = fs.durable_image(&path("data-0.keel")).unwrap();
        let sectors: Vec<u8> = image.chunks(SECTOR).map(|s| s[0]).collect();
        assert!(sectors.iter().all(|&b| b == 0xbb || b == 0xcc), "{spec}");
        (sectors.contains(&0xbb), sectors.contains(&0xcc))
    };
    assert_eq!(outcome("data.write:crash"), (true, false), "dropped");
    let (mut kept, mut lost, mut torn) = (0, 0, 0);
    for seed in 0..20 {
        match outcome(&format!("data.write:crash-random={seed}")) {
            (false, true) => kept += 1,
            (true, false) => lost += 1,
            other => panic!("random crash tore a write: {other:?}"),
        }
        if outcome(&format!("data.write:crash-torn={seed}")) == (true, true) {
            torn += 1;
        }
    }
    assert!(kept >= 3 && lost >= 3, "kept {kept}, lost {lost} of 20");
    assert!(torn >= 10, "only {torn} of 20 seeds tore the page");
}

#[test]
fn crash_at_set_len_and_read_has_no_effect_before_the_power_fails() {
    let (fs, data, _redo) = two_files(SECTOR);
    fs.arm("data.set_len:crash", 0).unwrap();
    assert!(data.set_len(10 * SECTOR as u64).is_err());
    assert_eq!(reopen(&fs, "data-0.keel").len().unwrap(), SECTOR as u64);
    let data = reopen(&fs, "data-0.keel");
    data.write_at(&[0xdd; 8], 0).unwrap();
    let trigger = fs.arm("data.read:crash", 0).unwrap();
    assert!(data.read_at(&mut [0; 8], 0).is_err());
    assert_eq!(trigger.fired(), 1);
    let image = read_all(&*reopen(&fs, "data-0.keel"));
    assert!(image == vec![0xaa; SECTOR], "the unsynced write survived");
}

#[test]
fn calls_on_dead_handles_neither_count_nor_fire() {
    let (fs, data, _redo) = two_files(SECTOR);
    fs.crash(CrashMode::DropUnsynced);
    let trigger = fs.arm("data.write:eio", 1).unwrap();
    for _ in 0..3 {
        assert!(data
            .write_at(&[1], 0)
            .unwrap_err()
            .to_string()
            .contains("lost power"));
    }
    assert_eq!((trigger.matched(), trigger.fired()), (0, 0));
    let fresh = reopen(&fs, "data-0.keel");
    fresh.write_at(&[1], 0).unwrap();
    assert_eq!(
        fresh.write_at(&[1], 0).unwrap_err().raw_os_error(),
        Some(libc::EIO)
    );
    assert_eq!(trigger.fired(), 1);
    trigger.wait_fired(Duration::ZERO).unwrap();
}

const PATIENCE: Duration = Duration::from_secs(10);

/// Write `data` at 0 on a thread named `writer`.
fn write_on_a_thread(dev: &Arc<dyn Device>, data: Vec<u8>) -> JoinHandle<io::Result<()>> {
    let dev = Arc::clone(dev);
    std::thread::Builder::new()
        .name("writer".into())
        .spawn(move || dev.write_at(&data, 0))
        .unwrap()
}

#[test]
fn hold_pauses_a_write_before_it_takes_effect_and_leaves_the_file_usable() {
    let fs = FaultyFs::new();
    let dev = create(&fs, "data-0.keel");
    let hold = fs.arm("data.write:hold", 1).unwrap();
    dev.write_at(&[1; 4], 0).unwrap(); // let through
    let writer = write_on_a_thread(&dev, vec![2; 8]);
    let held = hold.wait_held(PATIENCE).unwrap();
    assert_eq!(held.path, path("data-0.keel"));
    assert_eq!((held.op, held.thread.as_deref()), ("write", Some("writer")));
    assert_eq!(hold.fired(), 1);
    // The paused thread holds no lock: the same file can be read, written
    // and synced meanwhile, through the same handle too.
    assert_eq!(
        read_all(&*dev),
        vec![1; 4],
        "the held write did nothing yet"
    );
    dev.write_at(&[3; 2], 4).unwrap();
    dev.sync().unwrap();
    assert!(hold.release());
    writer.join().unwrap().unwrap();
    assert_eq!(
        read_all(&*dev),
        vec![2; 8],
        "released, the write took effect"
    );
    // ... after the sync: it is pending, and a crash drops it.
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(read_all(&*reopen(&fs, "data-0.keel")), [1, 1, 1, 1, 3, 3]);
}

#[test]
fn a_sync_held_covers_writes_issued_while_it_waits() {
    // A sync paused before it takes effect makes durable what was written
    // meanwhile: the race "write, then a concurrent sync, then release".
    let fs = FaultyFs::new();
    let dev = create(&fs, "data-0.keel");
    let hold = fs.arm("data.sync:hold", 0).unwrap();
    let syncer = {
        let dev = Arc::clone(&dev);
        std::thread::spawn(move || dev.sync())
    };
    assert_eq!(hold.wait_held(PATIENCE).unwrap().op, "sync");
    dev.write_at(&[7; 16], 0).unwrap();
    hold.release();
    syncer.join().unwrap().unwrap();
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(read_all(&*reopen(&fs, "data-0.keel")), vec![7; 16]);
}

#[test]
fn a_held_call_fails_if_the_power_failed_meanwhile() {
    let fs = FaultyFs::new();
    let dev = create(&fs, "data-0.keel");
    let hold = fs.arm("data.write:hold", 0).unwrap();
    let writer = write_on_a_thread(&dev, vec![2; 8]);
    hold.wait_held(PATIENCE).unwrap();
    fs.crash(CrashMode::Random { seed: 1 });
    hold.release();
    let e = writer.join().unwrap().unwrap_err();
    assert!(e.to_string().contains("lost power"), "{e}");
    assert_eq!(reopen(&fs, "data-0.keel").len().unwrap(), 0);
}

#[test]
fn dropping_the_trigger_releases_the_held_thread() {
    let fs = FaultyFs::new();
    let dev = create(&fs, "data-0.keel");
    let hold = fs.arm("data.write:hold", 0).unwrap();
    let writer = write_on_a_thread(&dev, vec![2; 8]);
    hold.wait_held(PATIENCE).unwrap();
    drop(hold);
    writer.join().unwrap().unwrap();
    assert_eq!(read_all(&*dev), vec![2; 8]);
}

#[test]
fn a_hold_released_before_anyone_arrives_pauses_no_one() {
    let fs = FaultyFs::new();
    let dev = create(&fs, "data-0.keel");
    let hold = fs.arm("data.write:hold", 0).unwrap();
    assert!(!hold.release(), "nobody was held");
    dev.write_at(&[1], 0).unwrap();
    assert_eq!(hold.fired(), 1);
    let e = hold.wait_held(Duration::ZERO).unwrap_err();
    assert!(e.contains("released already"), "{e}");
}

#[test]
fn every_wait_of_a_hold_times_out() {
    let fs = FaultyFs::new();
    let dev = create(&fs, "data-0.keel");
    let point = FailPoint::Write {
        path_contains: "data".into(),
    };
    let timeout = Duration::from_millis(30);
    let hold = fs.fail_after(point, 0, FailKind::Hold { timeout });
    // Nobody arrives: the test's wait gives up.
    let e = hold.wait_held(Duration::from_millis(10)).unwrap_err();
    assert!(
        e.contains("no thread reached") && e.contains("data.write:hold"),
        "{e}"
    );
    let e = hold.wait_fired(Duration::from_millis(10)).unwrap_err();
    assert!(e.contains("did not fire"), "{e}");
    // Nobody releases: the held call gives up, having written nothing.
    let started = Instant::now();
    let e = dev.write_at(&[1], 0).unwrap_err();
    assert!(started.elapsed() >= timeout);
    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
    assert!(e.to_string().contains("never released"), "{e}");
    assert_eq!(dev.len().unwrap(), 0);
    let e = hold.wait_held(PATIENCE).unwrap_err();
    assert!(e.contains("gave up"), "{e}");
    dev.write_at(&[1], 0).unwrap(); // fired once, then disarmed
}

#[test]
fn crash_reports_say_what_became_of_each_unsynced_write() {
    let crash_with = |mode| {
        let fs = FaultyFs::new();
        let dev = create(&fs, "data-0.keel");
        for i in 0..32u64 {
            dev.write_at(&vec![1; 4 * SECTOR], i * 4 * SECTOR as u64)
                .unwrap();
        }
        let report = fs.crash(mode);
        assert_eq!(fs.crash_reports(), vec![report]);
        assert_eq!(
            report.writes_kept + report.writes_lost + report.writes_torn,
            32
        );
        report
    };
    let r = crash_with(CrashMode::DropUnsynced);
    assert_eq!((r.writes_kept, r.writes_lost, r.writes_torn), (0, 32, 0));
    let r = crash_with(CrashMode::Random { seed: 3 });
    assert!(
        r.writes_kept > 0 && r.writes_lost > 0 && r.writes_torn == 0,
        "{r:?}"
    );
    let r = crash_with(CrashMode::Torn { seed: 3 });
    assert!(r.writes_torn > 10, "{r:?}");

    // A crash fired by a failpoint is reported too, the write it hit included.
    let fs = FaultyFs::new();
    let dev = create(&fs, "data-0.keel");
    fs.arm("data.write:crash", 0).unwrap();
    dev.write_at(&[1], 0).unwrap_err();
    let r = fs.crash_reports();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].writes_lost, 1);
}

#[test]
fn a_delay_slows_every_matching_call_until_disarmed() {
    let (p, k) = FailPoint::parse("data.write:delay=30ms").unwrap();
    assert_eq!(k, FailKind::Delay(Duration::from_millis(30)));
    assert_eq!(
        FailPoint::parse("data.write:delay=5us").unwrap().1,
        FailKind::Delay(Duration::from_micros(5))
    );
    for bad in [
        "data.write:delay=5",
        "data.write:delay=xms",
        "data.write:delay=5ms:sticky",
    ] {
        assert!(FailPoint::parse(bad).is_err(), "{bad}");
    }
    let fs = FaultyFs::new();
    let dev = create(&fs, "data-0.keel");
    let slow = fs.fail_after(p, 1, k);
    let started = Instant::now();
    for i in 0..3 {
        dev.write_at(&[i], u64::from(i)).unwrap();
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(60),
        "two delayed writes took {took:?}"
    );
    assert_eq!((slow.matched(), slow.fired()), (3, 2));
    assert_eq!(read_all(&*dev), [0, 1, 2]);
    fs.disarm();
    let started = Instant::now();
    dev.write_at(&[3], 3).unwrap();
    assert!(started.elapsed() < Duration::from_millis(30));
}

#[test]
fn a_killed_process_leaves_its_unsynced_writes_readable_and_not_durable() {
    let fs = FaultyFs::new();
    let dev = create(&fs, "redo-0.keel");
    dev.write_at(&[1; 10], 0).unwrap();
    dev.sync().unwrap();
    dev.write_at(&[2; 10], 10).unwrap();
    fs.kill_process();
    assert!(
        dev.read_at(&mut [0u8; 1], 0).is_err(),
        "the dead process's handle"
    );
    assert!(fs.crash_reports().is_empty(), "not a crash");
    // The next process reads what was written, synced or not ...
    let dev = reopen(&fs, "redo-0.keel");
    let mut want = vec![1u8; 10];
    want.extend([2u8; 10]);
    assert_eq!(read_all(&*dev), want);
    // ... but only a sync makes it durable; a power loss first loses it.
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(read_all(&*reopen(&fs, "redo-0.keel")), vec![1u8; 10]);
    let dev = reopen(&fs, "redo-0.keel");
    dev.write_at(&[3; 10], 10).unwrap();
    fs.kill_process();
    reopen(&fs, "redo-0.keel").sync().unwrap();
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(read_all(&*reopen(&fs, "redo-0.keel"))[10..], [3u8; 10]);
}

#[test]
fn lose_oldest_keeps_every_pending_write_but_each_files_first() {
    let fs = FaultyFs::new();
    let a = create(&fs, "a");
    let b = create(&fs, "b");
    a.write_at(&[1; 4], 0).unwrap();
    a.write_at(&[2; 4], 4).unwrap();
    a.write_at(&[3; 4], 8).unwrap();
    b.write_at(&[4; 4], 0).unwrap();
    let report = fs.crash(CrashMode::LoseOldest);
    assert_eq!((report.writes_lost, report.writes_kept), (2, 2));
    let mut want = vec![0u8; 4];
    want.extend([2u8; 4]);
    want.extend([3u8; 4]);
    assert_eq!(
        read_all(&*reopen(&fs, "a")),
        want,
        "a hole, then valid data"
    );
    assert_eq!(reopen(&fs, "b").len().unwrap(), 0);
    assert!(matches!(
        FailPoint::parse("/redo-.write:crash-lose-oldest"),
        Ok((_, FailKind::Crash(CrashMode::LoseOldest)))
    ));
}

/// A device that promises untorn 16 KiB writes: a torn crash keeps or
/// loses each atomic 16 KiB write whole, while the same crash tears plain
/// writes of the same size at 4 KiB sectors. Without the promise, atomic
/// writes are refused; outside the unit, they fail with EINVAL.
#[test]
fn atomic_writes_within_the_unit_are_never_torn() {
    const PAGE: usize = 16384;
    let fs = FaultyFs::new();
    let dev = create(&fs, "data-0.keel");
    let eopnotsupp = dev.write_atomic_at(&[1; PAGE], 0).unwrap_err();
    assert_eq!(eopnotsupp.raw_os_error(), Some(libc::EOPNOTSUPP));
    assert!(matches!(dev.atomic_write_unit(), AtomicWriteUnit::None(_)));
    fs.set_atomic_write_unit(Some(PAGE));
    assert_eq!(
        dev.atomic_write_unit(),
        AtomicWriteUnit::Untorn {
            min: SECTOR,
            max: PAGE
        }
    );
    assert_eq!(dev.atomic_write_unit().check_page(PAGE), Ok(PAGE));
    assert!(dev.atomic_write_unit().check_page(2 * PAGE).is_err());
    let einval = |r: io::Result<()>| r.unwrap_err().raw_os_error() == Some(libc::EINVAL);
    assert!(
        einval(dev.write_atomic_at(&[1; 2 * PAGE], 0)),
        "past the unit"
    );
    assert!(
        einval(dev.write_atomic_at(&[1; 12288], 0)),
        "not a power of two"
    );
    assert!(einval(dev.write_atomic_at(&[1; PAGE], 4096)), "misaligned");
    let (mut atomic_torn, mut plain_torn) = (0, 0);
    for seed in 0..32u64 {
        let fs = FaultyFs::new();
        fs.set_atomic_write_unit(Some(PAGE));
        let atomic = create(&fs, "atomic");
        let plain = create(&fs, "plain");
        for i in 0..8u8 {
            atomic
                .write_atomic_at(&[i + 1; PAGE], u64::from(i) * PAGE as u64)
                .unwrap();
            plain
                .write_at(&[i + 1; PAGE], u64::from(i) * PAGE as u64)
                .unwrap();
        }
        fs.crash(CrashMode::Torn { seed });
        let torn = |name: &str| {
            let image = fs.durable_image(&path(name)).unwrap_or_default();
            image
                .chunks(PAGE)
                .filter(|page| page.iter().any(|&b| b != page[0]))
                .count()
        };
        atomic_torn += torn("atomic");
        plain_torn += torn("plain");
    }
    assert_eq!(atomic_torn, 0, "an atomic write was torn");
    assert!(
        plain_torn > 0,
        "the torn crash tore no plain write: the test proves nothing"
    );
}
