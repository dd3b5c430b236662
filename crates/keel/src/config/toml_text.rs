//! Options from TOML text, applied one key at a time in the order written,
//! so that an error names the line, the option and the value as written.
//! (Deserialising the whole struct at once, toml names the line only of a
//! syntax error, and serde's messages name neither the key nor, always,
//! the value.)

use std::collections::BTreeMap;
use std::path::Path;

use toml::{Spanned, Value};

use super::Options;
use crate::error::Error;

/// What is wrong with options text, and where; a file path makes it an
/// [`Error::ConfigToml`].
#[derive(Debug)]
pub(super) struct TomlIssue {
    line: usize,
    key: Option<String>,
    reason: String,
}

impl TomlIssue {
    pub(super) fn into_error(self, path: Option<&Path>) -> Error {
        Error::ConfigToml {
            path: path.map(Path::to_path_buf),
            line: self.line,
            key: self.key,
            reason: self.reason,
        }
    }
}

/// The defaults, then each key of `text` in the order written.
pub(super) fn parse(text: &str) -> Result<Options, TomlIssue> {
    let doc: BTreeMap<String, Spanned<Value>> =
        toml::from_str(text).map_err(|e| not_toml(text, &e))?;
    let mut items: Vec<(String, Spanned<Value>)> = doc.into_iter().collect();
    items.sort_by_key(|(_, v)| v.span().start);
    let mut opts = Options::default();
    for (key, value) in items {
        let line = line_at(text, value.span().start);
        let value = value.into_inner();
        let shown = format!("`{value}`");
        opts.assign(&key, value, &shown)
            .map_err(|reason| TomlIssue {
                line,
                key: Some(key),
                reason,
            })?;
    }
    Ok(opts)
}

/// A syntax error: its line, quoted, with the option it seems to set.
fn not_toml(text: &str, e: &toml::de::Error) -> TomlIssue {
    // toml gives every syntax error a span; line 1 is only a fallback.
    let line = e.span().map_or(1, |s| line_at(text, s.start));
    let written = text.lines().nth(line - 1).unwrap_or("").trim();
    let key = written
        .split_once('=')
        .map(|(k, _)| k.trim())
        .filter(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(str::to_string);
    let message = one_line(e.message());
    let reason = if written.is_empty() {
        format!("not valid TOML: {message}")
    } else {
        format!("`{written}` is not valid TOML: {message}")
    };
    TomlIssue { line, key, reason }
}

/// The line (from 1) holding byte `offset` of `text`.
fn line_at(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

fn one_line(message: &str) -> String {
    message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why a value (written `shown`; `raw` is its text without TOML quoting)
/// was refused, from serde's `message`: its own wording when that names
/// the value, else the value followed by what was expected.
pub(super) fn explain(message: &str, shown: &str, raw: &str) -> String {
    let message = one_line(message);
    let serde_words = ["invalid type: ", "invalid value: ", "unknown variant "];
    if serde_words.iter().any(|w| message.starts_with(w)) {
        if let Some((_, expected)) = message.split_once(", expected ") {
            return format!("{shown} is not accepted; expected {}", plain_type(expected));
        }
    }
    if message.contains(raw) {
        message
    } else {
        format!("{shown} is not accepted: {message}")
    }
}

/// Rust's primitive type names, as serde puts them, in words.
fn plain_type(expected: &str) -> &str {
    match expected {
        "u8" => "a whole number from 0 to 255",
        "u16" | "u32" | "u64" | "usize" => "a whole number",
        "f32" | "f64" => "a number",
        other => other,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn issue(text: &str) -> TomlIssue {
        match parse(text) {
            Ok(o) => panic!("{text:?} was accepted: {o:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn keys_apply_in_the_order_written_over_the_defaults() {
        let o =
            parse("io_capacity = 400\n\nbuffer_pool_size = \"64MiB\"\nmax_dirty_pages_pct = 75\n")
                .unwrap();
        assert_eq!((o.io_capacity, o.buffer_pool_size), (400, 64 << 20));
        assert_eq!(o.max_dirty_pages_pct, 75.0);
        assert_eq!(o.page_size, Options::default().page_size);
        assert_eq!(parse("").unwrap(), Options::default());
    }

    #[test]
    fn a_bad_variant_names_its_option_value_and_line() {
        let e = issue("io_capacity = 400\nflush_policy = \"adaptive\"\n");
        assert_eq!((e.line, e.key.as_deref()), (2, Some("flush_policy")));
        assert_eq!(
            e.reason,
            "`\"adaptive\"` is not accepted; expected `classic` or `steady`"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_names_its_option_value_and_line() {
        let e = issue("buffer_pool_size = \"64MiB\"\nio_capacity = \"abc\"\n");
        assert_eq!((e.line, e.key.as_deref()), (2, Some("io_capacity")));
        assert_eq!(
            e.reason,
            "`\"abc\"` is not accepted; expected a whole number"
        );
        let e = issue("\n\nflush_log_at_trx_commit = 300");
        assert_eq!(
            (e.line, e.key.as_deref()),
            (3, Some("flush_log_at_trx_commit"))
        );
        assert!(
            e.reason.contains("`300`") && e.reason.contains("0 to 255"),
            "{}",
            e.reason
        );
        let e = issue("flush_neighbors = 3");
        assert_eq!(e.key.as_deref(), Some("flush_neighbors"));
        assert!(
            e.reason.contains("`3` is not a neighbor mode"),
            "{}",
            e.reason
        );
        let e = issue("log_file_size = true");
        assert!(
            e.reason
                .starts_with("`true` is not accepted; expected a size"),
            "{}",
            e.reason
        );
        // A message of the option's own that names the value stays as it is.
        let e = issue("transaction_isolation = \"snapshot\"");
        assert!(
            e.reason.starts_with("`snapshot` is not an isolation level"),
            "{}",
            e.reason
        );
    }

    #[test]
    fn an_unknown_option_is_named_with_its_value_and_line() {
        let e = issue("# pool\nbufer_pool_size = \"1GiB\"");
        assert_eq!((e.line, e.key.as_deref()), (2, Some("bufer_pool_size")));
        assert!(
            e.reason
                .starts_with("unknown option (given `\"1GiB\"`); known options: ")
                && e.reason.contains("buffer_pool_size"),
            "{}",
            e.reason
        );
    }

    #[test]
    fn a_syntax_error_quotes_its_line() {
        let e = issue("io_capacity = 400\nbuffer_pool_size = = 3\n");
        assert_eq!((e.line, e.key.as_deref()), (2, Some("buffer_pool_size")));
        assert!(
            e.reason
                .starts_with("`buffer_pool_size = = 3` is not valid TOML: "),
            "{}",
            e.reason
        );
        assert!(!e.reason.contains('\n'), "{}", e.reason);
        let e = issue("io_capacity = 400\nio_capacity = 500\n");
        assert_eq!((e.line, e.key.as_deref()), (2, Some("io_capacity")));
    }

    #[test]
    fn toml_file_errors_name_the_file_line_option_and_value() {
        let dir = tempfile::tempdir().unwrap();
        for (name, text, key, want) in [
            (
                "policy.toml",
                "io_capacity = 400\nflush_policy = \"adaptive\"\n",
                Some("flush_policy"),
                "line 2: option `flush_policy`: `\"adaptive\"` is not accepted; expected `classic` or `steady`",
            ),
            (
                "capacity.toml",
                "# the disk\n\nio_capacity = \"abc\"\n",
                Some("io_capacity"),
                "line 3: option `io_capacity`: `\"abc\"` is not accepted; expected a whole number",
            ),
            (
                "syntax.toml",
                "io_capacity = 400\nbuffer_pool_size = = 3\n",
                Some("buffer_pool_size"),
                "line 2: option `buffer_pool_size`: `buffer_pool_size = = 3` is not valid TOML: ",
            ),
            (
                "unknown.toml",
                "[pool]\nsize = 3\n",
                Some("pool"),
                "line 1: option `pool`: unknown option (given `{ size = 3 }`)",
            ),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            let e = Options::from_toml_file(&path).unwrap_err();
            match &e {
                Error::ConfigToml { path: Some(p), key: k, .. } => {
                    assert_eq!((p, k.as_deref()), (&path, key), "{e}");
                }
                other => panic!("{name}: expected Error::ConfigToml, got {other:?}"),
            }
            let text = e.to_string();
            let want = format!("{}, {want}", path.display());
            assert!(text.starts_with(&want), "{text}\nwanted: {want}");
            assert!(!text.contains('\n'), "{text}");
            // Without a file, the same error without its path.
            let bare = Options::from_toml_str(&std::fs::read_to_string(&path).unwrap())
                .unwrap_err()
                .to_string();
            assert_eq!(text, format!("{}, {bare}", path.display()));
        }
    }

    #[test]
    fn a_missing_toml_file_says_the_os_error_once() {
        let path = std::path::PathBuf::from("/nonexistent/keel.toml");
        let e = Options::from_toml_file(&path).unwrap_err();
        assert!(
            matches!(&e, Error::Io { path: p, op: "read", .. } if *p == path),
            "{e:?}"
        );
        let text = e.to_string();
        assert!(
            text.starts_with("read failed on /nonexistent/keel.toml: "),
            "{text}"
        );
        // The message says the OS error, so it is not also the source a
        // chain printer would add.
        assert!(std::error::Error::source(&e).is_none(), "{e:?}");
    }

    #[test]
    fn explain_words() {
        assert_eq!(
            explain("invalid type: string \"x\", expected u64", "`x`", "x"),
            "`x` is not accepted; expected a whole number"
        );
        assert_eq!(
            explain("too big", "`9`", "9"),
            "`9` is not accepted: too big"
        );
        assert_eq!(explain("`9` is too big", "`9`", "9"), "`9` is too big");
    }
}
