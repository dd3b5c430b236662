//! The public API's documentation builds with warnings denied: `cargo doc
//! --no-deps -p keel --features prometheus` with `RUSTDOCFLAGS="-D
//! warnings"`, so a broken intra-doc link, a link to a private item, a bad
//! code block or an undocumented public item (`#![warn(missing_docs)]`)
//! fails the tests as it would fail a docs.rs build.
//!
//! It builds into its own directory under the workspace's `target/`
//! (`doc-check`), so that it neither waits for nor invalidates the build
//! the tests run from; the first run checks the dependencies once (about a
//! minute on two cores), later runs only the crate.

use std::path::Path;
use std::process::Command;

#[test]
fn the_public_api_documents_without_warnings() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let workspace = manifest.join("../..");
    let target = workspace.join("target").join("doc-check");
    let out = Command::new(&cargo)
        .current_dir(&workspace)
        .args(["doc", "--no-deps", "-p", "keel", "--features", "prometheus"])
        .env("RUSTDOCFLAGS", "-D warnings")
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo} doc: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cargo doc -p keel with warnings denied failed ({}):\n{stderr}",
        out.status
    );
    assert!(
        target.join("doc").join("keel").join("index.html").exists(),
        "no keel/index.html under {}:\n{stderr}",
        target.display()
    );
}
