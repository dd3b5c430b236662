//! The repository's docs, scripts and sources speak of this repository
//! alone: no relative path leaves it, no note kept outside it is named,
//! and every markdown link to a file of the repository (and to a heading
//! of one) lands. A clone is all a reader has.
//!
//! Scanned: README.md, CHANGELOG.md, docs/, contrib/, scripts/, .ci/, fuzz/
//! and every crate's sources and manifests. Each problem is reported as
//! `file:line: what`.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap_or_else(|e| panic!("the repository root: {e}"))
}

/// Names of notes that live outside the repository, and the directory
/// they live in; built from parts so that this file does not name them.
fn outside_names() -> Vec<String> {
    let mut names: Vec<String> = ["SEEDS", "FLUSHING", "DESIGN", "STYLE"]
        .iter()
        .map(|n| format!("{n}.md"))
        .collect();
    names.push(format!("..{}shared", '/'));
    names.push(format!("{}work{}", '/', '/'));
    names
}

/// `path` with `.` and `..` folded, without touching the file system;
/// `None` when a `..` climbs above where it started.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

/// Relative paths starting with `../` in `line`: the text from the first
/// `../` to the next character that cannot be part of a path.
fn parent_paths(line: &str) -> Vec<&str> {
    let bytes = line.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while let Some(at) = line[i..].find("../") {
        let start = i + at;
        // `...`/`....` (ellipses, page drawings) are not paths.
        let prev = start.checked_sub(1).map(|p| bytes[p]);
        if prev == Some(b'.') || prev.is_some_and(|b| b.is_ascii_alphanumeric()) {
            i = start + 3;
            continue;
        }
        let end = line[start..]
            .find(|c: char| c.is_whitespace() || "\"'`()[]<>,;|*\\".contains(c))
            .map_or(line.len(), |e| start + e);
        found.push(&line[start..end]);
        i = end.max(start + 3);
    }
    found
}

/// Paths from the repository root named in `line` (`docs/...`,
/// `crates/...`, ... ending in a file extension).
fn rooted_paths(line: &str) -> Vec<&str> {
    const TOPS: [&str; 6] = ["docs/", "crates/", "scripts/", "contrib/", "fuzz/", ".ci/"];
    const EXTS: [&str; 6] = [".md", ".rs", ".sh", ".toml", ".json", ".txt"];
    let path_char = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut found = Vec::new();
    for (start, _) in line.char_indices() {
        if line[..start].chars().next_back().is_some_and(path_char)
            || !TOPS.iter().any(|t| line[start..].starts_with(t))
        {
            continue;
        }
        let end = line[start..]
            .find(|c: char| !path_char(c))
            .map_or(line.len(), |e| start + e);
        let token = line[start..end].trim_end_matches('.');
        if EXTS.iter().any(|x| token.ends_with(x)) {
            found.push(token);
        }
    }
    found
}

/// Markdown inline links `[text](target)` in `line`: their targets.
fn link_targets(line: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].split_whitespace().next().unwrap_or("");
        found.push(target);
        rest = &after[end..];
    }
    found
}

/// GitHub's anchor for a heading: lower case, letters, digits, `-` and
/// `_` kept, spaces to `-`, everything else dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown text's headings (outside code blocks), with
/// GitHub's `-1`, `-2` suffixes for repeats.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let base = slug(line.trim_start_matches('#'));
        let mut a = base.clone();
        let mut n = 0;
        while seen.contains(&a) {
            n += 1;
            a = format!("{base}-{n}");
        }
        seen.insert(a);
    }
    seen
}

/// Where a relative path in `rel` (a file of the repository) is resolved
/// from: its own directory, or its crate's directory where the line (or
/// the two before it) joins the path onto `CARGO_MANIFEST_DIR`.
fn base_dir(root: &Path, rel: &Path, lines: &[&str], n: usize) -> PathBuf {
    let dir = rel.parent().unwrap_or(Path::new("")).to_path_buf();
    let manifest_joined = lines[n.saturating_sub(2)..=n]
        .iter()
        .any(|l| l.contains("CARGO_MANIFEST_DIR") || l.contains("manifest"));
    if rel.extension().is_some_and(|e| e == "rs") && manifest_joined {
        let mut d = dir.as_path();
        while !d.as_os_str().is_empty() && !root.join(d).join("Cargo.toml").is_file() {
            d = d.parent().unwrap_or(Path::new(""));
        }
        // `d` is relative to the repository root; checked below from there.
        return d.to_path_buf();
    }
    dir
}

/// Every problem in `text`, the contents of `rel` (a path relative to
/// `root`), as `rel:line: what`.
fn problems_in(root: &Path, rel: &Path, text: &str) -> Vec<String> {
    let names = outside_names();
    let lines: Vec<&str> = text.lines().collect();
    let is_md = rel.extension().is_some_and(|e| e == "md");
    let mut out = Vec::new();
    let mut fenced = false;
    for (n, line) in lines.iter().enumerate() {
        let at = format!("{}:{}", rel.display(), n + 1);
        for name in &names {
            if line.contains(name.as_str()) {
                out.push(format!(
                    "{at}: names {name:?}, which is not in this repository"
                ));
            }
        }
        let cwd = root.join(base_dir(root, rel, &lines, n));
        for p in parent_paths(line) {
            if is_md && line.contains(&format!("]({p}")) {
                continue; // a link target: checked as a link below
            }
            let inside = cwd
                .strip_prefix(root)
                .ok()
                .and_then(|d| normalize(&d.join(p)));
            if inside.is_none() {
                out.push(format!("{at}: {p:?} leaves the repository"));
            }
        }
        for p in rooted_paths(line) {
            if !root.join(p).exists() {
                out.push(format!("{at}: names {p}, which does not exist"));
            }
        }
        if is_md && line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if !is_md || fenced {
            continue;
        }
        for target in link_targets(line) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
            let dir = rel.parent().unwrap_or(Path::new(""));
            let Some(dest) = normalize(&dir.join(file)) else {
                out.push(format!("{at}: link {target:?} leaves the repository"));
                continue;
            };
            let dest_abs = root.join(&dest);
            if !file.is_empty() && !dest_abs.exists() {
                out.push(format!("{at}: link {target:?}: no file {}", dest.display()));
                continue;
            }
            let is_md_dest = file.is_empty() || file.ends_with(".md");
            if anchor.is_empty() || !is_md_dest {
                continue;
            }
            let page = if file.is_empty() {
                text.to_string()
            } else {
                std::fs::read_to_string(&dest_abs).unwrap_or_default()
            };
            if !anchors(&page).contains(anchor) {
                out.push(format!("{at}: link {target:?}: no heading #{anchor}"));
            }
        }
    }
    out
}

/// The files scanned, relative to `root`.
fn scanned_files(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, keep: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let rel = dir.join(&name);
            if name == "target" || name == ".git" {
                continue;
            }
            if e.path().is_dir() {
                walk(root, &rel, keep, out);
            } else if keep(&rel) {
                out.push(rel);
            }
        }
    }
    let mut files = Vec::new();
    for top in ["README.md", "CHANGELOG.md", "Cargo.toml"] {
        if root.join(top).is_file() {
            files.push(PathBuf::from(top));
        }
    }
    let all = |_: &Path| true;
    for dir in ["docs", "contrib", "scripts", ".ci", "fuzz"] {
        walk(root, Path::new(dir), &all, &mut files);
    }
    let sources = |p: &Path| {
        p.extension().is_some_and(|e| e == "rs" || e == "md")
            || p.file_name().is_some_and(|n| n == "Cargo.toml")
    };
    walk(root, Path::new("crates"), &sources, &mut files);
    files.sort();
    files
}

#[test]
fn docs_scripts_and_sources_point_only_inside_the_repository() {
    let root = repo_root();
    let files = scanned_files(&root);
    for must in ["README.md", "docs/flushing.md", "crates/keel/src/lib.rs"] {
        assert!(
            files.iter().any(|f| f == Path::new(must)),
            "{must} was not scanned: {files:?}"
        );
    }
    let mut problems = Vec::new();
    for rel in &files {
        let Ok(text) = std::fs::read_to_string(root.join(rel)) else {
            continue; // not text
        };
        problems.extend(problems_in(&root, rel, &text));
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The checks find what they are for, with file and line.
#[test]
fn the_checks_catch_outside_paths_names_and_broken_links() {
    let root = repo_root();
    let text = format!(
        "# Title\n\
         ok [flushing](../docs/flushing.md#steady-the-default) and [top](#title)\n\
         see {}/{}.md here\n\
         read [notes](../../../elsewhere.md) and ../../../x/y\n\
         a [missing](nothing-here.md) and [bad anchor](#nowhere)\n\
         ```\n[inside a fence](nothing-here.md)\n```\n\
         fine: ../README.md, 1...5, ....P....; not: {}/gone.rs\n",
        format_args!("..{}shared", '/'),
        "FLUSHING",
        "crates"
    );
    // A directory outside the scanned ones, so that this file names no
    // missing file of its own.
    let found = problems_in(&root, Path::new("notes/example.md"), &text);
    let expect = [
        (
            "notes/example.md:3:",
            "names \"..",
            "not in this repository",
        ),
        (
            "notes/example.md:3:",
            "names \"FLUSHING",
            "not in this repository",
        ),
        (
            "notes/example.md:4:",
            "link \"../../../elsewhere.md\"",
            "leaves",
        ),
        ("notes/example.md:4:", "\"../../../x/y\"", "leaves"),
        ("notes/example.md:5:", "link \"nothing-here.md\"", "no file"),
        ("notes/example.md:5:", "link \"#nowhere\"", "no heading"),
        ("notes/example.md:9:", "/gone.rs", "does not exist"),
    ];
    for (at, what, why) in expect {
        assert!(
            found
                .iter()
                .any(|p| p.starts_with(at) && p.contains(what) && p.contains(why)),
            "{at} {what} {why} not found in {found:#?}"
        );
    }
    assert_eq!(found.len(), expect.len(), "{found:#?}");

    // A Rust source's path joined onto its crate's directory is read from
    // there: three levels up leaves, two is the repository root.
    let up = ["..", "..", ".."].join("/");
    let src = format!("let p = Path::new(env!(\"CARGO_MANIFEST_DIR\")).join(\"{up}\");\n");
    let found = problems_in(&root, Path::new("crates/keel/tests/api_docs.rs"), &src);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with(&format!("crates/keel/tests/api_docs.rs:1: \"{up}\" leaves")),
        "{found:?}"
    );
    let src = src.replace(&up, &up[3..]);
    assert!(problems_in(&root, Path::new("crates/keel/tests/api_docs.rs"), &src).is_empty());
}
