#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;

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
