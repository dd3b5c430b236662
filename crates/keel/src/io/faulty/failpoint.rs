//! Failpoints of the faulty file system: where (an operation on files whose
//! path contains a string), when (after `n` matching calls) and how (EIO or
//! ENOSPC, once or until disarmed).

use std::io;
use std::path::Path;

use parking_lot::Mutex;

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

/// How often an armed failpoint fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailKind {
    /// Fail one call, then disarm.
    Once(Errno),
    /// Fail every matching call until [`FaultyFs::disarm`].
    Sticky(Errno),
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
    /// `set_len` on a matching file (a data file growing, say).
    SetLen {
        /// Substring of the path ("" matches every file).
        path_contains: String,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    Read,
    Write,
    Sync,
    SetLen,
}

impl FailPoint {
    /// Parse `"{name}.{op}:{errno}[:sticky]"`, e.g. `"data.write:enospc"`
    /// (see the module documentation).
    pub fn parse(spec: &str) -> Result<(FailPoint, FailKind), String> {
        let bad = |why: &str| format!("failpoint `{spec}`: {why}");
        let mut parts = spec.split(':');
        let point = parts.next().unwrap_or_default();
        let (name, op) = point
            .rsplit_once('.')
            .ok_or_else(|| bad("expected {name}.{op}:{errno}"))?;
        let path_contains = name.to_owned();
        let point = match op {
            "read" => FailPoint::Read { path_contains },
            "write" => FailPoint::Write { path_contains },
            "sync" => FailPoint::Sync { path_contains },
            "set_len" => FailPoint::SetLen { path_contains },
            _ => return Err(bad("op must be read, write, sync or set_len")),
        };
        let errno = match parts.next() {
            Some("eio") => Errno::Eio,
            Some("enospc") => Errno::Enospc,
            _ => return Err(bad("errno must be eio or enospc")),
        };
        let kind = match parts.next() {
            None => FailKind::Once(errno),
            Some("sticky") => FailKind::Sticky(errno),
            Some(_) => return Err(bad("only `sticky` may follow the errno")),
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
        };
        want == op && path.to_string_lossy().contains(pattern.as_str())
    }
}

pub(super) struct Armed {
    pub(super) point: FailPoint,
    /// Matching calls still allowed to succeed.
    pub(super) skip: u64,
    pub(super) kind: FailKind,
}

/// The armed failpoints, shared by the file system and its devices.
#[derive(Default)]
pub(super) struct Failpoints(pub(super) Mutex<Vec<Armed>>);

impl Failpoints {
    pub(super) fn check(&self, op: Op, path: &Path) -> io::Result<()> {
        let mut armed = self.0.lock();
        let mut fired = None;
        armed.retain_mut(|a| {
            if fired.is_some() || !a.point.matches(op, path) {
                return true;
            }
            if a.skip > 0 {
                a.skip -= 1;
                return true;
            }
            match a.kind {
                FailKind::Once(errno) => {
                    fired = Some(errno);
                    false
                }
                FailKind::Sticky(errno) => {
                    fired = Some(errno);
                    true
                }
            }
        });
        match fired {
            Some(errno) => Err(errno.to_error()),
            None => Ok(()),
        }
    }
}
