//! What can stop an OLTP benchmark.

use std::io;

/// An error of `keel bench oltp`. Deadlocks and lock-wait timeouts are not
/// errors of the run: the transaction is retried and counted in `errors`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OltpError {
    /// A workload parameter or a `--vary` axis is unknown or out of range.
    #[error("invalid oltp parameter `{name}`: {reason}")]
    Param {
        /// The parameter's name (`threads`, `rand_type`, ...).
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The engine failed (bad option, I/O error, corruption).
    #[error(transparent)]
    Engine(#[from] keel::Error),
    /// Another engine than Keel failed (`--engine`).
    #[error(transparent)]
    Other(super::DbError),
    /// A file of the benchmark (JSON, CSV, report, a copied data directory)
    /// could not be read or written.
    #[error("{context}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// What the OS said.
        source: io::Error,
    },
    /// The data directory does not hold what the run needs.
    #[error("{0}")]
    Data(String),
    /// A write limit (`--throttle-write-iops`) could not be set up.
    #[error(transparent)]
    Throttle(#[from] crate::cgroup::ThrottleError),
    /// A worker thread panicked.
    #[error("an oltp worker thread panicked")]
    WorkerPanicked,
    /// A signal (Ctrl-C, SIGTERM, SIGHUP) stopped the run; what it had
    /// started (a server, sysbench, a cgroup) was stopped and removed.
    #[error("interrupted by a signal; the run was stopped and its server and files removed")]
    Interrupted,
}

impl From<super::DbError> for OltpError {
    fn from(e: super::DbError) -> Self {
        match e {
            super::DbError::Keel(e) => OltpError::Engine(e),
            other => OltpError::Other(other),
        }
    }
}

impl OltpError {
    /// A `Param` error.
    pub fn param(name: impl Into<String>, reason: impl Into<String>) -> Self {
        OltpError::Param {
            name: name.into(),
            reason: reason.into(),
        }
    }

    /// A closure wrapping an OS error with its context, for `map_err`.
    pub fn io(context: impl Into<String>) -> impl FnOnce(io::Error) -> OltpError {
        let context = context.into();
        move |source| OltpError::Io { context, source }
    }
}
