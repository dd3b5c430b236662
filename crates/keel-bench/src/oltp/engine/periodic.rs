//! A background thread that makes another engine's commits durable about
//! once a second when `flush_log_at_trx_commit` is 0 or 2 (InnoDB's log
//! flusher, for engines that do not have one).
//!
//! Waiting: the thread sleeps on a condition variable with a one-second
//! timeout and holds nothing while the sync runs; dropping [`Periodic`]
//! wakes it and joins it, which waits for at most one sync. A failed sync
//! is kept and returned by [`Periodic::check`] to the next commit, which
//! fails: nothing claims durability after a sync error.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::{DbError, SYNC_EVERY as EVERY};

#[derive(Default)]
struct State {
    stop: bool,
    failed: Option<String>,
}

/// The running thread; stopped and joined when dropped.
pub(crate) struct Periodic {
    engine: &'static str,
    shared: Arc<(Mutex<State>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Periodic {
    /// Run `sync` every second until dropped.
    pub(crate) fn start(
        engine: &'static str,
        sync: impl Fn() -> Result<(), String> + Send + 'static,
    ) -> Result<Periodic, DbError> {
        let shared = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let theirs = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("{engine}-sync"))
            .spawn(move || loop {
                let (m, cv) = &*theirs;
                let g = lock(m);
                let (g, _) = cv
                    .wait_timeout_while(g, EVERY, |s| !s.stop)
                    .unwrap_or_else(|p| p.into_inner());
                if g.stop {
                    return;
                }
                drop(g);
                if let Err(e) = sync() {
                    lock(m).failed.get_or_insert(e);
                }
            })
            .map_err(|e| DbError::fatal(engine, "cannot start the sync thread", e))?;
        Ok(Periodic {
            engine,
            shared,
            thread: Some(thread),
        })
    }

    /// The first sync error, if one happened.
    pub(crate) fn check(&self) -> Result<(), DbError> {
        match &lock(&self.shared.0).failed {
            None => Ok(()),
            Some(e) => Err(DbError::fatal(
                self.engine,
                "the once-a-second sync failed earlier",
                e.clone(),
            )),
        }
    }
}

impl Drop for Periodic {
    fn drop(&mut self) {
        lock(&self.shared.0).stop = true;
        self.shared.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
