//! What the `keel` command's integration tests share: running the binary
//! and collecting what it printed, and engine options small enough for a
//! test.

// Each test file uses some of these.
#![allow(dead_code)]

use std::fmt;
use std::path::Path;
use std::process::{Command, Output};

use keel::Options;

/// Engine options small enough for a test: 4 KiB pages, a 1 MiB pool and
/// log, no syncs.
pub const SMALL_SETS: &[&str] = &[
    "page_size=4096",
    "buffer_pool_size=1MiB",
    "flush_method=nosync",
    "log_file_size=1MiB",
];

/// The `keel` binary under test, ready for its arguments.
pub fn keel_cmd() -> Command {
    Command::new(env!("CARGO_BIN_EXE_keel"))
}

/// Whether `program --version` runs and succeeds.
fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `bash scripts/NAME` with `KEEL` set to the binary under test, ready for
/// its arguments; `None`, after saying the test is skipped, where bash or
/// python3 (which the scripts' tables need) is missing.
pub fn script(name: &str) -> Option<Command> {
    if !have("bash") || !have("python3") {
        eprintln!("SKIPPED: scripts/{name} needs bash and python3");
        return None;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cmd = Command::new("bash");
    cmd.arg(root.join("scripts").join(name))
        .env("KEEL", env!("CARGO_BIN_EXE_keel"));
    Some(cmd)
}

/// Where Prometheus's `promtool` is, if installed (Debian: `apt-get
/// install prometheus`); the tests that use it say plainly when they
/// skipped it.
pub fn promtool() -> Option<&'static str> {
    ["/usr/bin/promtool", "/usr/local/bin/promtool"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

/// What one run of `keel` printed, and how it ended.
pub struct Run {
    /// The exit code; `None` if a signal ended it.
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Did it exit with status 0?
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// Stdout, then stderr.
    pub fn text(&self) -> String {
        self.to_string()
    }

    /// [`ok`](Self::ok) and [`text`](Self::text), for a test that reads
    /// the two outputs as one.
    pub fn ok_and_text(&self) -> (bool, String) {
        (self.ok(), self.text())
    }
}

impl fmt::Display for Run {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.stdout, self.stderr)
    }
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// Run `cmd` to its end.
pub fn run(cmd: &mut Command) -> Run {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
        .into()
}

/// `keel args`, in the test's own directory.
pub fn keel(args: &[&str]) -> Run {
    run(keel_cmd().args(args))
}

/// `keel args` in `cwd`.
pub fn keel_in(cwd: &Path, args: &[&str]) -> Run {
    run(keel_cmd().args(args).current_dir(cwd))
}

/// `--set KEY=VALUE` for each of `sets`.
pub fn set_flags<'a>(sets: &[&'a str]) -> Vec<&'a str> {
    sets.iter().flat_map(|s| ["--set", s]).collect()
}

/// [`SMALL_SETS`], then `extra`, as options to open a database with.
pub fn small_options(extra: &[&str]) -> Options {
    let mut o = Options::default();
    o.apply_sets(SMALL_SETS.iter().chain(extra).copied())
        .unwrap_or_else(|e| panic!("{e}"));
    o
}

/// `keel bench oltp` flags for a tiny run on `threads` threads for `time`
/// seconds: two tables of 500 rows, an interval line every half second,
/// [`SMALL_SETS`] without the doublewrite.
pub fn tiny_oltp_flags(threads: &'static str, time: &'static str) -> Vec<&'static str> {
    let mut flags = vec![
        "--tables",
        "2",
        "--table-size",
        "500",
        "--threads",
        threads,
        "--time",
        time,
        "--report-interval",
        "0.5",
        "--range-size",
        "20",
    ];
    flags.extend(set_flags(&[
        "page_size=4096",
        "buffer_pool_size=1MiB",
        "flush_method=nosync",
        "doublewrite=false",
        "log_file_size=1MiB",
    ]));
    flags
}

/// How a command sent a signal mid-run ended.
pub struct Signalled {
    pub status: std::process::ExitStatus,
    /// Everything it printed on stdout, the lines before the signal included.
    pub stdout: String,
    pub stderr: String,
}

/// Spawn `cmd`, read its stdout until a line contains `at`, call `before`
/// with what it printed so far (the run is then in the state the test
/// wants), send `signal` (if any) to the process alone (not its group),
/// and collect how it ended.
pub fn signal_after(
    cmd: &mut Command,
    at: &str,
    signal: Option<libc::c_int>,
    before: impl FnOnce(&str),
) -> Signalled {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;

    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let mut stderr = child.stderr.take().expect("piped stderr");
    let err_thread = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut out = String::new();
    loop {
        let mut line = String::new();
        let n = stdout.read_line(&mut line).expect("reading stdout");
        if n == 0 {
            let _ = child.wait();
            let err = err_thread.join().unwrap_or_default();
            panic!("stdout ended before a line with `{at}`:\n{out}\nstderr:\n{err}");
        }
        out.push_str(&line);
        if line.contains(at) {
            break;
        }
    }
    before(&out);
    if let Some(signal) = signal {
        let pid = libc::pid_t::try_from(child.id()).expect("a pid");
        // SAFETY: sending a signal to our own child process.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::kill(pid, signal) };
        assert_eq!(rc, 0, "kill({pid}, {signal})");
    }
    stdout.read_to_string(&mut out).expect("reading stdout");
    let status = child.wait().expect("waiting for the child");
    let stderr = err_thread.join().expect("the stderr reader");
    Signalled {
        status,
        stdout: out,
        stderr,
    }
}

/// Every `keel_*` metric name in `text` (a PromQL expression, a rules file).
pub fn metric_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("keel_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}
