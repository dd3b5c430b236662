//! The test's handle on one armed failpoint: how often it fired, and for a
//! hold, the rendezvous with the paused thread.
//!
//! Waiting, and what is held while waiting:
//! - A thread paused at a hold waits on the trigger's own condition
//!   variable, holding nothing else: no file's state lock, not the file
//!   table, not the failpoint list. Other threads (and the test) can use
//!   every file meanwhile, the paused one included, and can crash the file
//!   system. [`Trigger::release`] (or dropping the trigger) wakes it; after
//!   its timeout it gives up and its call fails with `TimedOut`, having done
//!   nothing, so a test that forgot to release fails instead of hanging
//!   (the engine sees an I/O error from that call). The engine's own locks
//!   the paused thread holds stay held, which is what a race test wants: so
//!   the test must release it before waiting on anything it owns.
//! - [`Trigger::wait_held`] and [`Trigger::wait_fired`] wait on the same
//!   condition variable, woken when the failpoint fires; each has a timeout
//!   and returns an error naming the failpoint when it runs out.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// A call paused at a hold failpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldCall {
    /// The file the call is on.
    pub path: PathBuf,
    /// `read`, `write`, `sync`, `set_len` or `sync_dir`.
    pub op: &'static str,
    /// The paused thread's name, if it has one (`keel-cleaner-2`, say).
    pub thread: Option<String>,
}

#[derive(Clone, Debug)]
enum Phase {
    /// No thread has reached the hold yet.
    Armed,
    Held(HeldCall),
    /// Released (or the trigger dropped): a thread reaching the hold now
    /// passes at once.
    Released,
    /// The paused thread gave up waiting; its call failed.
    TimedOut(HeldCall),
}

pub(super) struct TriggerState {
    spec: String,
    /// Matching calls counted against the failpoint, fired at or not.
    matched: AtomicU64,
    /// Firings, and the hold's phase.
    state: Mutex<(u64, Phase)>,
    changed: Condvar,
}

impl TriggerState {
    pub(super) fn new(spec: String) -> Arc<TriggerState> {
        Arc::new(TriggerState {
            spec,
            matched: AtomicU64::new(0),
            state: Mutex::new((0, Phase::Armed)),
            changed: Condvar::new(),
        })
    }

    pub(super) fn spec(&self) -> &str {
        &self.spec
    }

    pub(super) fn count_matched(&self) {
        self.matched.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn count_fired(&self) {
        self.state.lock().0 += 1;
        self.changed.notify_all();
    }

    /// Pause the calling thread until released or `timeout` runs out. The
    /// caller holds no lock of the file system.
    pub(super) fn hold(&self, path: &Path, op: &'static str, timeout: Duration) -> io::Result<()> {
        let call = HeldCall {
            path: path.to_owned(),
            op,
            thread: std::thread::current().name().map(str::to_owned),
        };
        let deadline = Instant::now() + timeout;
        let mut state = self.state.lock();
        if matches!(state.1, Phase::Released) {
            return Ok(());
        }
        state.1 = Phase::Held(call.clone());
        self.changed.notify_all();
        while matches!(state.1, Phase::Held(_)) {
            if self.changed.wait_until(&mut state, deadline).timed_out()
                && matches!(state.1, Phase::Held(_))
            {
                state.1 = Phase::TimedOut(call);
                self.changed.notify_all();
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{}: {op} held at failpoint `{}` for {timeout:?} and never released",
                        path.display(),
                        self.spec
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// The handle of one armed failpoint, returned by
/// [`FaultyFs::arm`](super::FaultyFs::arm) and
/// [`FaultyFs::fail_after`](super::FaultyFs::fail_after).
///
/// Dropping it releases a thread held at it (and lets a thread that reaches
/// a hold later pass at once); it does not disarm an error or crash
/// failpoint, so `fs.arm("data.sync:eio", 0)?;` keeps its meaning. Keep the
/// trigger of a hold for as long as the hold should hold.
pub struct Trigger {
    state: Arc<TriggerState>,
}

impl Trigger {
    pub(super) fn new(state: Arc<TriggerState>) -> Trigger {
        Trigger { state }
    }

    /// Times the failpoint fired so far (a hold counts when a thread
    /// reaches it; a crash when the power fails).
    pub fn fired(&self) -> u64 {
        self.state.state.lock().0
    }

    /// Matching calls counted against the failpoint so far: those let
    /// through and those it fired at (a call that an earlier armed
    /// failpoint fired at is not counted).
    pub fn matched(&self) -> u64 {
        self.state.matched.load(Ordering::Relaxed)
    }

    /// Wait until the failpoint has fired at least once. An error, naming
    /// the failpoint, if it did not within `timeout`.
    pub fn wait_fired(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let mut state = self.state.state.lock();
        while state.0 == 0 {
            if self
                .state
                .changed
                .wait_until(&mut state, deadline)
                .timed_out()
                && state.0 == 0
            {
                return Err(format!(
                    "failpoint `{}` did not fire within {timeout:?}",
                    self.state.spec
                ));
            }
        }
        Ok(())
    }

    /// Wait until a thread is paused at this hold, and say which call it
    /// is. An error if none arrived within `timeout`, if the hold was
    /// released already, or if the paused thread gave up waiting.
    pub fn wait_held(&self, timeout: Duration) -> Result<HeldCall, String> {
        let spec = &self.state.spec;
        let deadline = Instant::now() + timeout;
        let mut state = self.state.state.lock();
        loop {
            match &state.1 {
                Phase::Held(call) => return Ok(call.clone()),
                Phase::Released => return Err(format!("hold `{spec}` was released already")),
                Phase::TimedOut(call) => {
                    return Err(format!(
                        "the {} of {} held at `{spec}` gave up waiting for its release",
                        call.op,
                        call.path.display()
                    ))
                }
                Phase::Armed => {}
            }
            if self
                .state
                .changed
                .wait_until(&mut state, deadline)
                .timed_out()
                && matches!(state.1, Phase::Armed)
            {
                return Err(format!(
                    "no thread reached hold `{spec}` within {timeout:?}"
                ));
            }
        }
    }

    /// Let the held thread go on (its call then proceeds, or fails if the
    /// file system crashed meanwhile). Before any thread arrived: the hold
    /// will not pause anyone. Returns whether a thread was held.
    pub fn release(&self) -> bool {
        let mut state = self.state.state.lock();
        let was_held = matches!(state.1, Phase::Held(_));
        if !matches!(state.1, Phase::TimedOut(_)) {
            state.1 = Phase::Released;
        }
        self.state.changed.notify_all();
        was_held
    }
}

impl Drop for Trigger {
    fn drop(&mut self) {
        self.release();
    }
}

impl std::fmt::Debug for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.state.lock();
        f.debug_struct("Trigger")
            .field("spec", &self.state.spec)
            .field("matched", &self.state.matched.load(Ordering::Relaxed))
            .field("fired", &state.0)
            .field("phase", &state.1)
            .finish()
    }
}
