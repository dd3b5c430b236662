#![allow(clippy::unwrap_used)]
//! A bad `--config` file or `--set` stops `keel` before it opens anything,
//! with one line that names the file, the line, the option and the value
//! as written; an unreadable file's OS error is said once.

mod common;

use std::path::Path;

use common::{keel_in, Run};

/// `keel bench basic` with `flags`, run in `dir`: it must fail.
fn refused(dir: &Path, flags: &[&str]) -> Run {
    let mut args = vec![
        "bench", "basic", "--rows", "10", "--gets", "1", "--scans", "1",
    ];
    args.extend(flags);
    let run = keel_in(dir, &args);
    assert!(!run.ok(), "{run}");
    assert!(!run.stderr.contains("panicked"), "{run}");
    assert_eq!(run.stderr.lines().count(), 1, "one line: {run}");
    run
}

#[test]
fn a_bad_config_file_names_its_line_option_and_value() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text, want) in [
        (
            "policy.toml",
            "io_capacity = 400\nflush_policy = \"adaptive\"\n",
            "policy.toml, line 2: option `flush_policy`: `\"adaptive\"` is not accepted; \
             expected `classic` or `steady`",
        ),
        (
            "capacity.toml",
            "buffer_pool_size = \"64MiB\"\nio_capacity = \"abc\"\n",
            "capacity.toml, line 2: option `io_capacity`: `\"abc\"` is not accepted; \
             expected a whole number",
        ),
        (
            "syntax.toml",
            "# the pool\nio_capacity = 400\nbuffer_pool_size = = 3\n",
            "syntax.toml, line 3: option `buffer_pool_size`: `buffer_pool_size = = 3` \
             is not valid TOML: ",
        ),
    ] {
        std::fs::write(dir.path().join(name), text).unwrap();
        let run = refused(dir.path(), &["--config", name]);
        let want = format!("keel: error: --config: {want}");
        assert!(run.stderr.starts_with(&want), "{run}\nwanted: {want}");
    }
}

#[test]
fn a_missing_config_file_says_the_os_error_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = refused(dir.path(), &["--config", "missing.toml"]);
    assert!(
        run.stderr
            .starts_with("keel: error: --config: read failed on missing.toml: "),
        "{run}"
    );
    assert_eq!(run.stderr.matches("(os error 2)").count(), 1, "{run}");
}

#[test]
fn a_bad_set_names_its_option_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let run = refused(dir.path(), &["--set", "flush_policy=adaptive"]);
    assert_eq!(
        run.stderr.trim_end(),
        "keel: error: --set flush_policy=adaptive: option `flush_policy`: `adaptive` is not \
         accepted; expected `classic` or `steady`"
    );
    let run = refused(dir.path(), &["--set", "old_blocks_pct=2"]);
    assert_eq!(
        run.stderr.trim_end(),
        "keel: error: option `old_blocks_pct`: must be between 5 and 95, not 2"
    );
}
