#![allow(clippy::unwrap_used)]
//! The faulty file system's directory entries and allocation: what it
//! records so that tests can check the engine syncs directories and
//! preallocates files.

use std::path::Path;

use super::*;

#[test]
fn allocate_is_recorded_and_durable_where_set_len_is_sparse() {
    let fs = FaultyFs::new();
    let (a, b) = (Path::new("/db/redo-0.keel"), Path::new("/db/redo-1.keel"));
    let sparse = fs.open(a, OpenMode::CreateNew).unwrap();
    sparse.set_len(1 << 16).unwrap();
    let whole = fs.open(b, OpenMode::CreateNew).unwrap();
    whole.write_at(b"head", 0).unwrap();
    whole.allocate(1 << 16).unwrap();
    whole.allocate(100).unwrap();
    assert_eq!(fs.allocated_len(a), Some(0));
    assert_eq!(fs.allocated_len(b), Some(1 << 16), "allocate never shrinks");
    fs.crash(CrashMode::DropUnsynced);
    assert_eq!(
        fs.durable_image(b).unwrap(),
        vec![0; 1 << 16],
        "unsynced write lost, length kept"
    );
    let whole = fs.open(b, OpenMode::Existing).unwrap();
    whole.set_len(4096).unwrap();
    assert_eq!(fs.allocated_len(b), Some(4096), "truncating frees");
}

#[test]
fn allocate_fires_the_set_len_failpoints() {
    let fs = FaultyFs::new();
    let dev = fs
        .open(Path::new("/db/redo-0.keel"), OpenMode::CreateNew)
        .unwrap();
    let t = fs.arm("/redo-.set_len:enospc", 0).unwrap();
    let err = dev.allocate(1 << 20).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    assert_eq!((t.fired(), dev.len().unwrap()), (1, 0));
}

#[test]
fn sync_dir_covers_the_names_created_and_removed_in_that_directory() {
    let fs = FaultyFs::new();
    let (a, b) = (Path::new("/db/a"), Path::new("/other/b"));
    fs.open(a, OpenMode::CreateNew).unwrap();
    fs.open(b, OpenMode::CreateNew).unwrap();
    assert_eq!(fs.unsynced_dir_entries(), vec![a.to_owned(), b.to_owned()]);
    fs.sync_dir(Path::new("/db")).unwrap();
    assert_eq!(fs.unsynced_dir_entries(), vec![b.to_owned()]);
    fs.remove(a).unwrap();
    assert!(!fs.exists(a));
    assert_eq!(fs.unsynced_dir_entries(), vec![a.to_owned(), b.to_owned()]);
    let err = fs.remove(a).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
}

#[test]
fn sync_dir_failpoints_fail_crash_and_parse() {
    let (p, k) = FailPoint::parse(".sync_dir:eio").unwrap();
    assert_eq!(
        (p, k),
        (
            FailPoint::SyncDir {
                path_contains: String::new()
            },
            FailKind::Once(Errno::Eio)
        )
    );
    let fs = FaultyFs::new();
    let dir = Path::new("/db");
    let dev = fs.open(&dir.join("x"), OpenMode::CreateNew).unwrap();
    fs.arm("/db.sync_dir:enospc", 0).unwrap();
    let err = fs.sync_dir(dir).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    assert_eq!(
        fs.unsynced_dir_entries().len(),
        1,
        "a failed sync covers nothing"
    );
    fs.arm(".sync_dir:crash", 0).unwrap();
    assert!(fs.sync_dir(dir).is_err());
    assert_eq!(fs.crash_reports().len(), 1);
    assert!(dev.len().is_err(), "the crash killed the old handles");
}
