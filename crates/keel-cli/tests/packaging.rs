//! What a user of the crates relies on beyond the code: the licence files
//! the `license` field names, a changelog, each crate's metadata, and a
//! minimum supported Rust version that the locked dependencies build with
//! (the workspace's `rust-version` at least every locked package's), as
//! the README and `.ci/run` state them.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|e| panic!("the repository root: {e}"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `cargo metadata` of the workspace, with `extra` flags.
fn metadata(extra: &[&str]) -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .args(extra)
        .current_dir(repo_root())
        .output()
        .unwrap_or_else(|e| panic!("cargo metadata: {e}"));
    assert!(
        out.status.success(),
        "cargo metadata {extra:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("cargo metadata's JSON: {e}"))
}

/// The workspace's own packages (not its dependencies).
fn members(meta: &Value) -> Vec<&Value> {
    let ids: Vec<&Value> = meta["workspace_members"]
        .as_array()
        .expect("members")
        .iter()
        .collect();
    meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| ids.contains(&&p["id"]))
        .collect()
}

/// "1.88" or "1.85.0" as (major, minor, patch).
fn version(v: &str) -> (u32, u32, u32) {
    let mut parts = v.split('.').map(|p| {
        p.parse::<u32>()
            .unwrap_or_else(|e| panic!("rust-version {v:?}: {e}"))
    });
    let mut next = || parts.next().unwrap_or(0);
    (next(), next(), next())
}

#[test]
fn the_licence_files_are_the_ones_the_license_field_names_and_every_crate_carries_them() {
    let root = repo_root();
    let mit = read(&root.join("LICENSE-MIT"));
    assert!(
        mit.contains("Permission is hereby granted, free of charge")
            && mit.contains("Copyright (c) The Keel developers"),
        "LICENSE-MIT is not the MIT licence of the Keel developers"
    );
    let apache = read(&root.join("LICENSE-APACHE"));
    assert!(
        apache.contains("Apache License") && apache.contains("Version 2.0, January 2004"),
        "LICENSE-APACHE is not the Apache License 2.0"
    );
    let meta = metadata(&["--no-deps"]);
    for p in members(&meta) {
        let name = p["name"].as_str().expect("name");
        assert_eq!(p["license"], "MIT OR Apache-2.0", "{name}");
        // `cargo package` takes what is in the crate's directory: each
        // crate holds both files (links to the repository's).
        let dir = Path::new(p["manifest_path"].as_str().expect("manifest")).parent();
        let dir = dir.expect("crate directory");
        assert_eq!(read(&dir.join("LICENSE-MIT")), mit, "{name}");
        assert_eq!(read(&dir.join("LICENSE-APACHE")), apache, "{name}");
    }
}

#[test]
fn the_changelog_has_an_entry_for_the_version() {
    let root = repo_root();
    let log = read(&root.join("CHANGELOG.md"));
    assert!(
        log.contains("Keep a Changelog"),
        "CHANGELOG.md does not say its format"
    );
    let meta = metadata(&["--no-deps"]);
    for p in members(&meta) {
        let v = p["version"].as_str().expect("version");
        assert!(
            log.contains(&format!("## [{v}]"))
                || log.contains(&format!("## [Unreleased]\n\nThe first version, {v}")),
            "CHANGELOG.md has no entry for {v}"
        );
    }
}

#[test]
fn every_crate_has_the_metadata_a_registry_shows() {
    let meta = metadata(&["--no-deps"]);
    let found = members(&meta);
    assert_eq!(found.len(), 3, "keel, keel-bench, keel-cli");
    for p in found {
        let name = p["name"].as_str().expect("name");
        for field in [
            "description",
            "repository",
            "readme",
            "documentation",
            "rust_version",
        ] {
            let v = p[field].as_str().unwrap_or("");
            assert!(!v.trim().is_empty(), "{name}: no {field}");
        }
        let repo = p["repository"].as_str().unwrap_or("");
        assert!(
            repo.starts_with("https://") && !repo.contains("TODO"),
            "{name}: {repo}"
        );
        let keywords = p["keywords"].as_array().expect("keywords");
        assert!(
            (1..=5).contains(&keywords.len()),
            "{name}: crates.io takes 1 to 5 keywords: {keywords:?}"
        );
        for k in keywords {
            let k = k.as_str().expect("keyword");
            assert!(
                k.len() <= 20
                    && k.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{name}: keyword {k:?}"
            );
        }
        let categories = p["categories"].as_array().expect("categories");
        assert!(!categories.is_empty(), "{name}: no categories");
        // Every dependency on a sibling crate carries a version, or the
        // crate could not be packaged.
        for d in p["dependencies"].as_array().expect("dependencies") {
            if d["path"].is_string() && d["kind"].is_null() {
                assert_ne!(
                    d["req"], "*",
                    "{name}: {} has a path and no version",
                    d["name"]
                );
            }
        }
    }
    let keel = members(&meta)
        .into_iter()
        .find(|p| p["name"] == "keel")
        .expect("keel");
    let docs_rs = &keel["metadata"]["docs"]["rs"]["features"];
    assert!(
        docs_rs
            .as_array()
            .is_some_and(|f| f.iter().any(|x| x == "prometheus")),
        "docs.rs should build keel with `prometheus` (Db::serve_metrics): {docs_rs}"
    );
}

/// The workspace's `rust-version` is at least every locked package's, so
/// a toolchain of that version can build the lockfile; the README says
/// which version and how it is derived.
#[test]
fn the_rust_version_covers_every_locked_dependency_and_the_readme_states_it() {
    let meta = metadata(&["--all-features", "--locked"]);
    let ours: Vec<&Value> = members(&meta);
    let rv = ours[0]["rust_version"].as_str().expect("rust-version");
    for p in &ours {
        assert_eq!(
            p["rust_version"], rv,
            "{}: the workspace's rust-version",
            p["name"]
        );
    }
    let mut highest = ("", "", "0");
    for p in meta["packages"].as_array().expect("packages") {
        let (Some(v), Some(name)) = (p["rust_version"].as_str(), p["name"].as_str()) else {
            continue;
        };
        if version(v) > version(highest.2) {
            highest = (name, p["version"].as_str().unwrap_or("?"), v);
        }
        assert!(
            version(v) <= version(rv),
            "{name} {} needs Rust {v}, above the workspace's rust-version {rv}: raise it \
             (and the README's Prerequisites) or lock an older {name}",
            p["version"].as_str().unwrap_or("?")
        );
    }
    assert_eq!(
        version(highest.2),
        version(rv),
        "rust-version {rv} is above what any locked package needs ({} {} needs {}): \
         the README says it is derived from them",
        highest.0,
        highest.1,
        highest.2
    );
    let readme = read(&repo_root().join("README.md"));
    assert!(
        readme.contains(&format!("**Rust {rv} or newer**")) && readme.contains("cargo metadata"),
        "the README's Prerequisites should state Rust {rv} and how it is derived"
    );
}

/// `.ci/run` checks formatting and lints before the tests, and its last
/// command is the README's test command, exactly.
#[test]
fn ci_checks_format_and_lints_then_runs_the_readme_test_command() {
    let root = repo_root();
    let ci = read(&root.join(".ci/run"));
    let commands: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("cargo "))
        .collect();
    let test = "cargo test --workspace --release";
    assert_eq!(commands.last(), Some(&test), "{commands:?}");
    let at = |c: &str| {
        commands
            .iter()
            .position(|l| *l == c)
            .unwrap_or_else(|| panic!("{c:?} not in .ci/run: {commands:?}"))
    };
    let test_at = commands.len() - 1;
    assert!(at("cargo fmt --all -- --check") < test_at);
    assert!(at("cargo clippy --workspace --all-targets --release -- -D warnings") < test_at);
    assert!(
        ci.contains("rustup component add"),
        "components are not installed"
    );
    let readme = read(&root.join("README.md"));
    assert!(
        readme
            .lines()
            .any(|l| l.starts_with(test) && l[test.len()..].trim_start().starts_with('#')),
        "the README's test command is not {test:?}"
    );
}
