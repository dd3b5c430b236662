//! Large values: JSON documents from 10 KiB to 8 MiB in one table, stored
//! off-page in overflow chains (a value past a quarter page), read back
//! whole, kept for a snapshot that began before they were replaced, and
//! freed by purge once no snapshot needs them.
//!
//! `cargo run --release -p keel --example documents`

use keel::{Db, Options};

/// A JSON document of about `len` bytes.
fn document(id: u32, len: usize) -> Vec<u8> {
    let mut doc = format!("{{\"id\":{id},\"items\":[");
    let mut i = 0;
    while doc.len() + 40 < len {
        doc.push_str(&format!("{{\"n\":{i},\"tag\":\"item-{id}-{i}\"}},"));
        i += 1;
    }
    doc.push_str("{}]}");
    doc.into_bytes()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("keel-example-docs-{}", std::process::id()));
    let mut opts = Options::default();
    opts.set("buffer_pool_size", "64MiB")?;
    let db = Db::open(&dir, opts)?;
    let docs = db.table_or_create("docs")?;
    let sizes = [10 << 10, 100 << 10, 1 << 20, 8 << 20];
    for (id, &len) in (0u32..).zip(&sizes) {
        docs.put(format!("doc{id}").as_bytes(), &document(id, len))?;
    }
    for row in docs.range(..)? {
        let (key, value) = row?;
        println!(
            "{}: {} bytes, ends with {}",
            String::from_utf8_lossy(&key),
            value.len(),
            String::from_utf8_lossy(&value[value.len() - 4..])
        );
    }

    // A snapshot keeps reading the document as it was when it began.
    let snapshot = db.begin();
    let before = snapshot.get(&docs, b"doc3")?.ok_or("doc3 is missing")?;
    docs.put(b"doc3", &document(99, 2 << 20))?;
    let still = snapshot.get(&docs, b"doc3")?.ok_or("doc3 is missing")?;
    assert_eq!(before, still);
    println!(
        "snapshot still reads the {}-byte doc3; a new read sees {} bytes",
        still.len(),
        docs.get(b"doc3")?.map_or(0, |v| v.len())
    );
    snapshot.commit()?;

    let m = db.metrics();
    println!(
        "overflow chains written {}, pages {}, freed so far {} (purge frees the old doc3 \
         once no snapshot needs it)",
        m.get("lob_chains_written").unwrap_or(0),
        m.get("lob_pages_written").unwrap_or(0),
        m.get("lob_chains_freed").unwrap_or(0)
    );
    db.check()?;
    db.close()?;
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
