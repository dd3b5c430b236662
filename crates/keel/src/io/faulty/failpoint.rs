//! Failpoints of the faulty file system: where (an operation on files whose
//! path contains a string), when (after `n` matching calls) and what (fail
//! with EIO or ENOSPC once or until disarmed, lose power, or pause the
//! calling thread).

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::trigger::TriggerState;
use super::CrashMode;

/// The error an armed failpoint returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Errno {
    /// `EIO`: the device failed.
    Eio,
    /// `ENOSPC`: the device is full.
    Enospc,
}

impl Errno {
    fn to_error(self) -> io::Error {
        io::Error::from_raw_os_error(match self {
            Errno::Eio => libc::EIO,
            Errno::Enospc => libc::ENOSPC,
        })
    }
}

/// Longest a [`FailKind::Hold`] armed from text (`…:hold`) keeps a thread.
pub const HOLD_TIMEOUT: Duration = Duration::from_secs(10);

/// What an armed failpoint does when it fires, and how often it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailKind {
    /// Fail one call, then disarm.
    Once(Errno),
    /// Fail every matching call until [`FaultyFs::disarm`](super::FaultyFs::disarm).
    Sticky(Errno),
    /// Lose power at this call, as [`FaultyFs::crash`](super::FaultyFs::crash)
    /// with this mode would, then disarm. A write is first added to the
    /// pending writes, so the crash mode decides its fate like any other
    /// unsynced write; a read, sync or set_len has no effect (the power
    /// fails before it). The call fails with EIO, as does every later call
    /// on a handle opened before the crash.
    Crash(CrashMode),
    /// Pause the calling thread before the operation takes effect, holding
    /// no lock of the file system, until the test releases it through the
    /// [`Trigger`](super::Trigger) the arming returned (or drops it), then
    /// disarm. Released, the call proceeds as if nothing happened, or fails
    /// with EIO if the file system crashed meanwhile. After `timeout`
    /// without a release the call fails with `TimedOut`, having done
    /// nothing.
    Hold {
        /// Longest the thread waits for its release.
        timeout: Duration,
    },
    /// Pause every matching call for this long before it takes effect,
    /// until [`FaultyFs::disarm`](super::FaultyFs::disarm): a slow device
    /// that widens the windows between the engine's bookkeeping and its
    /// I/O, so random tests find the races in them. Holds no lock while it
    /// sleeps.
    Delay(Duration),
}

/// Where a failpoint fires: an operation on files whose path contains a string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailPoint {
    /// `read_at` on a matching file.
    Read {
        /// Substring of the path ("" matches every file).
        path_contains: String,
    },
    /// `write_at` on a matching file.
    Write {
        /// Substring of the path ("" matches every file).
        path_contains: String,
    },
    /// `sync` on a matching file.
    Sync {
        /// Substring of the path ("" matches every file).
        path_contains: String,
    },
    /// `set_len` or `allocate` on a matching file (a data file growing, a
    /// log file allocated at creation).
    SetLen {
        /// Substring of the path ("" matches every file).
        path_contains: String,
    },
    /// `FileSystem::sync_dir` of a matching directory.
    SyncDir {
        /// Substring of the directory's path ("" matches every directory).
        path_contains: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    Read,
    Write,
    Sync,
    SetLen,
    SyncDir,
}

impl Op {
    pub(super) fn name(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Sync => "sync",
            Op::SetLen => "set_len",
            Op::SyncDir => "sync_dir",
        }
    }
}

impl FailPoint {
    /// Parse `"{name}.{op}:{action}[:sticky]"`, e.g. `"data.write:enospc"`
    /// or `"data-.sync:crash-torn=7"` (see the module documentation).
    pub fn parse(spec: &str) -> Result<(FailPoint, FailKind), String> {
        let bad = |why: &str| format!("failpoint `{spec}`: {why}");
        let mut parts = spec.split(':');
        let point = parts.next().unwrap_or_default();
        let (name, op) = point
            .rsplit_once('.')
            .ok_or_else(|| bad("expected {name}.{op}:{action}"))?;
        let path_contains = name.to_owned();
        let point = match op {
            "read" => FailPoint::Read { path_contains },
            "write" => FailPoint::Write { path_contains },
            "sync" => FailPoint::Sync { path_contains },
            "set_len" => FailPoint::SetLen { path_contains },
            "sync_dir" => FailPoint::SyncDir { path_contains },
            _ => return Err(bad("op must be read, write, sync, set_len or sync_dir")),
        };
        let action = parts.next().unwrap_or_default();
        let errno = match action {
            "eio" => Some(Errno::Eio),
            "enospc" => Some(Errno::Enospc),
            _ => None,
        };
        let kind = match (errno, parts.next()) {
            (Some(errno), None) => FailKind::Once(errno),
            (Some(errno), Some("sticky")) => FailKind::Sticky(errno),
            (Some(_), Some(_)) => return Err(bad("only `sticky` may follow the errno")),
            (None, None) => parse_action(action).ok_or_else(|| {
                bad("action must be eio, enospc, crash, crash-random[=SEED], crash-torn[=SEED], crash-lose-oldest, hold or delay={n}us|ms")
            })?,
            (None, Some(_)) => return Err(bad("only eio and enospc may be `sticky`")),
        };
        if parts.next().is_some() {
            return Err(bad("too many `:` parts"));
        }
        Ok((point, kind))
    }

    fn matches(&self, op: Op, path: &Path) -> bool {
        let (want, pattern) = match self {
            FailPoint::Read { path_contains } => (Op::Read, path_contains),
            FailPoint::Write { path_contains } => (Op::Write, path_contains),
            FailPoint::Sync { path_contains } => (Op::Sync, path_contains),
            FailPoint::SetLen { path_contains } => (Op::SetLen, path_contains),
            FailPoint::SyncDir { path_contains } => (Op::SyncDir, path_contains),
        };
        want == op && path.to_string_lossy().contains(pattern.as_str())
    }
}

/// `crash`, `crash-random[=SEED]`, `crash-torn[=SEED]` (seed 0 if omitted),
/// `crash-lose-oldest`, `hold`, or `delay=Nus` / `delay=Nms`.
fn parse_action(action: &str) -> Option<FailKind> {
    if action == "hold" {
        return Some(FailKind::Hold {
            timeout: HOLD_TIMEOUT,
        });
    }
    if let Some(pause) = action.strip_prefix("delay=") {
        let pause = match pause.strip_suffix("us") {
            Some(us) => Duration::from_micros(us.parse().ok()?),
            None => Duration::from_millis(pause.strip_suffix("ms")?.parse().ok()?),
        };
        return Some(FailKind::Delay(pause));
    }
    let (name, seed) = match action.split_once('=') {
        Some((name, seed)) => (name, seed.parse().ok()?),
        None => (action, 0),
    };
    let mode = match name {
        "crash" if !action.contains('=') => CrashMode::DropUnsynced,
        "crash-random" => CrashMode::Random { seed },
        "crash-torn" => CrashMode::Torn { seed },
        "crash-lose-oldest" if !action.contains('=') => CrashMode::LoseOldest,
        _ => return None,
    };
    Some(FailKind::Crash(mode))
}

pub(super) struct Armed {
    pub(super) point: FailPoint,
    /// Matching calls still allowed to succeed.
    pub(super) skip: u64,
    pub(super) kind: FailKind,
    pub(super) trigger: Arc<TriggerState>,
}

/// What a call must do, decided by the armed failpoints.
pub(super) enum Action {
    Proceed,
    Fail(io::Error),
    Crash(CrashMode, Arc<TriggerState>),
    Hold(Duration, Arc<TriggerState>),
    Delay(Duration),
}

/// The armed failpoints, shared by the file system and its devices.
#[derive(Default)]
pub(super) struct Failpoints(pub(super) Mutex<Vec<Armed>>);

impl Failpoints {
    /// Count a call of `op` on `path` against every armed failpoint; the
    /// first that fires decides (the later ones do not count it).
    pub(super) fn check(&self, op: Op, path: &Path) -> Action {
        let mut armed = self.0.lock();
        let mut action = Action::Proceed;
        armed.retain_mut(|a| {
            if !matches!(action, Action::Proceed) || !a.point.matches(op, path) {
                return true;
            }
            a.trigger.count_matched();
            if a.skip > 0 {
                a.skip -= 1;
                return true;
            }
            a.trigger.count_fired();
            let trigger = Arc::clone(&a.trigger);
            let (next, keep) = match a.kind {
                FailKind::Once(errno) => (Action::Fail(errno.to_error()), false),
                FailKind::Sticky(errno) => (Action::Fail(errno.to_error()), true),
                FailKind::Crash(mode) => (Action::Crash(mode, trigger), false),
                FailKind::Hold { timeout } => (Action::Hold(timeout, trigger), false),
                FailKind::Delay(pause) => (Action::Delay(pause), true),
            };
            action = next;
            keep
        });
        action
    }
}
