//! Basic use: open a database, write, read and scan a table, close.
//!
//! `cargo run --release -p keel --example basic [DIR]` (default: a new
//! directory under the system's temporary directory, removed at the end).

use keel::{Db, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (dir, temporary) = match std::env::args().nth(1) {
        Some(d) => (std::path::PathBuf::from(d), false),
        None => (
            std::env::temp_dir().join(format!("keel-example-basic-{}", std::process::id())),
            true,
        ),
    };
    let mut opts = Options::default();
    opts.set("buffer_pool_size", "64MiB")?;
    let db = Db::open(&dir, opts)?;
    let users = db.table_or_create("users")?;
    for (name, city) in [("alice", "Lyon"), ("bob", "Oslo"), ("carol", "Quito")] {
        users.put(name.as_bytes(), city.as_bytes())?; // one durable commit each
    }
    let alice = users.get(b"alice")?;
    println!(
        "alice lives in {}",
        String::from_utf8_lossy(&alice.unwrap_or_default())
    );
    for row in users.range(&b"b"[..]..)? {
        let (k, v) = row?;
        println!(
            "{} -> {}",
            String::from_utf8_lossy(&k),
            String::from_utf8_lossy(&v)
        );
    }
    users.delete(b"bob")?;
    assert!(users.get(b"bob")?.is_none());
    db.close()?; // writes every dirty page and takes a checkpoint
    println!("closed {}", dir.display());
    if temporary {
        std::fs::remove_dir_all(&dir)?;
    }
    Ok(())
}
