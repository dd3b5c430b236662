//! Ctrl-C (SIGINT), SIGTERM and SIGHUP during `keel bench innodb`.
//!
//! `mariadbd` ignores SIGINT, so a `keel` that died of Ctrl-C would leave
//! its private server running, with its files, its socket and (when
//! throttled) its cgroup. Instead, for the length of a run, these signals
//! only raise a flag ([`Interrupt`]); the run looks at it wherever it
//! waits (the server's start, sysbench's prepare and run, the flush of
//! dirty pages) and returns [`OltpError::Interrupted`], after killing the
//! sysbench it started. Returning unwinds as any error does: the throttle
//! is removed and the [`super::server::Server`] is dropped, which stops the
//! server cleanly and removes its files.
//!
//! What is held while the run waits for the flag: nothing the signal
//! handler needs (it only stores to an atomic). Who wakes the waiter: no
//! one; every wait polls at least every [`POLL`], and sysbench's run prints
//! a line every `--report-interval`. What an interruption leaves behind:
//! nothing, unless the server does not stop within its shutdown timeout
//! (it is then killed, and said so), or `keel` itself is killed with
//! SIGKILL (the server keeps running and must be stopped by hand).

use std::process::{Child, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::oltp::OltpError;

/// How often a wait looks at the flag.
pub const POLL: Duration = Duration::from_millis(100);

/// The signals that interrupt a run.
#[cfg(unix)]
const SIGNALS: [i32; 3] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
];

/// The interruption flag, with its signal handlers registered until it is
/// dropped (then the signals are fatal again, as before the run).
pub struct Interrupt {
    flag: Arc<AtomicBool>,
    #[cfg(unix)]
    ids: Vec<signal_hook::SigId>,
}

impl Interrupt {
    /// Register the handlers. A signal that cannot be handled keeps its
    /// default action (a warning says so).
    pub fn register() -> Interrupt {
        let flag = Arc::new(AtomicBool::new(false));
        #[cfg(unix)]
        let ids = SIGNALS
            .iter()
            .filter_map(
                |&sig| match signal_hook::flag::register(sig, Arc::clone(&flag)) {
                    Ok(id) => Some(id),
                    Err(e) => {
                        log::warn!("cannot handle signal {sig}: it will not stop the server: {e}");
                        None
                    }
                },
            )
            .collect();
        Interrupt {
            flag,
            #[cfg(unix)]
            ids,
        }
    }

    /// A flag nobody raises but [`Interrupt::raise`] (tests).
    pub fn unregistered() -> Interrupt {
        Interrupt {
            flag: Arc::new(AtomicBool::new(false)),
            #[cfg(unix)]
            ids: Vec::new(),
        }
    }

    /// Raise the flag as a signal would.
    pub fn raise(&self) {
        self.flag.store(true, Ordering::Release);
    }

    /// Whether a signal came.
    pub fn raised(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// `Err(Interrupted)` if a signal came.
    pub fn check(&self) -> Result<(), OltpError> {
        if self.raised() {
            Err(OltpError::Interrupted)
        } else {
            Ok(())
        }
    }

    /// Sleep `d` in steps of [`POLL`], returning early on a signal.
    pub fn sleep(&self, d: Duration) -> Result<(), OltpError> {
        let mut left = d;
        while !left.is_zero() {
            self.check()?;
            let step = left.min(POLL);
            std::thread::sleep(step);
            left -= step;
        }
        self.check()
    }

    /// Wait for `child` to exit; on a signal, kill it and return
    /// `Err(Interrupted)`. (A child in the terminal's process group may
    /// have died of the same Ctrl-C: the flag is looked at first.)
    pub fn wait(&self, child: &mut Child, what: &str) -> Result<ExitStatus, OltpError> {
        loop {
            if self.raised() {
                kill(child);
                return Err(OltpError::Interrupted);
            }
            match child.try_wait() {
                Ok(Some(status)) => {
                    self.check()?;
                    return Ok(status);
                }
                Ok(None) => std::thread::sleep(POLL),
                Err(e) => {
                    kill(child);
                    return Err(OltpError::Io {
                        context: format!("cannot wait for {what}"),
                        source: e,
                    });
                }
            }
        }
    }
}

/// Kill `child` and reap it (it may have exited already).
pub fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

impl Drop for Interrupt {
    fn drop(&mut self) {
        #[cfg(unix)]
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::Instant;

    #[test]
    fn a_raised_flag_kills_the_child_it_waits_for() {
        let i = Interrupt::unregistered();
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(200));
                i.raise();
            });
            let t0 = Instant::now();
            let r = i.wait(&mut child, "sleep");
            assert!(matches!(r, Err(OltpError::Interrupted)), "{r:?}");
            assert!(t0.elapsed() < Duration::from_secs(10));
        });
        // Reaped: nothing left to wait for.
        assert!(child.try_wait().unwrap().is_some());
    }

    #[test]
    fn a_child_that_ends_first_gives_its_status_and_sleep_returns_on_the_flag() {
        let i = Interrupt::unregistered();
        let mut child = Command::new("true").spawn().unwrap();
        assert!(i.wait(&mut child, "true").unwrap().success());
        assert!(i.sleep(Duration::from_millis(1)).is_ok());
        i.raise();
        let t0 = Instant::now();
        assert!(matches!(
            i.sleep(Duration::from_secs(30)),
            Err(OltpError::Interrupted)
        ));
        assert!(t0.elapsed() < Duration::from_secs(10));
    }
}
