//! The writers of one flush call: threads that stand for the whole call
//! and take page-write runs from a queue, so that the next group of pages
//! is claimed, copied and (with doublewrite) copied to its area while the
//! writes of the previous group are in flight, and the depth does not
//! fall to zero between groups.
//!
//! # Protocol
//! - The producer (the flushing thread) pushes the runs of a [`Unit`] and
//!   later waits for the unit; a writer pops a run, writes it holding
//!   nothing, and counts it done on its unit, waking the producer when it
//!   was the unit's last. Nobody holds a page latch, a frame claim's
//!   buffer-pool mutex or the queue's mutex while writing or waiting for
//!   a write: the producer holds page claims (not latches) and at most
//!   two doublewrite areas while it waits, and writers need none of them.
//! - Writers sleep on the queue's condvar while the queue is empty and it
//!   is open; pushing notifies, and closing (when the call ends, also by
//!   unwinding, see [`Crew::close`]) wakes them all to exit, so the scope
//!   that runs them always ends.
//! - A failed write is recorded on its unit (the first error wins) and
//!   the writer goes on with the next run: the producer decides what the
//!   failure means for the unit's pages. A writer that panics records a
//!   failure instead of leaving its unit waiting forever.
//! - With `shared` off, the runs of file `f` go only to writer
//!   `f % writers`: one stream per data file, as `classic` asks.

use std::collections::VecDeque;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::error::{Error, Result};
use crate::io::AlignedBuf;
use crate::space::Tablespace;

/// The page-write runs of one group of copies, and whether they are done.
pub(super) struct Unit {
    /// Runs not yet written, and the first error.
    state: Mutex<(usize, Option<Error>)>,
    done: Condvar,
}

impl Unit {
    fn new(runs: usize) -> Arc<Unit> {
        Arc::new(Unit {
            state: Mutex::new((runs, None)),
            done: Condvar::new(),
        })
    }

    fn complete(&self, r: Result<()>) {
        let mut s = self.state.lock();
        s.0 -= 1;
        if let Err(e) = r {
            s.1.get_or_insert(e);
        }
        if s.0 == 0 {
            self.done.notify_all();
        }
    }

    /// Wait until every run of the unit has been written or has failed;
    /// the first failure, if any.
    pub(super) fn wait(&self) -> Result<()> {
        let mut s = self.state.lock();
        while s.0 > 0 {
            self.done.wait(&mut s);
        }
        match s.1.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// One contiguous write: `buf[bytes]` to `offset` of data file `file`.
struct Run {
    file: usize,
    offset: u64,
    buf: Arc<AlignedBuf>,
    bytes: Range<usize>,
    unit: Arc<Unit>,
}

struct Queues {
    /// One queue (shared) or one per writer.
    runs: Vec<VecDeque<Run>>,
    closed: bool,
}

/// The writers' queue. Create it, run [`Crew::work`] on `writers` scoped
/// threads, push units, and [`Crew::close`] it before the scope ends.
pub(super) struct Crew<'s> {
    space: &'s Tablespace,
    queues: Mutex<Queues>,
    wake: Condvar,
    writers: usize,
    shared: bool,
}

impl<'s> Crew<'s> {
    pub(super) fn new(space: &'s Tablespace, writers: usize, shared: bool) -> Crew<'s> {
        let writers = writers.max(1);
        Crew {
            space,
            queues: Mutex::new(Queues {
                runs: (0..if shared { 1 } else { writers })
                    .map(|_| VecDeque::new())
                    .collect(),
                closed: false,
            }),
            wake: Condvar::new(),
            writers,
            shared,
        }
    }

    pub(super) fn writers(&self) -> usize {
        self.writers
    }

    /// Queue one write per contiguous run of `places` (page `k` of `buf`
    /// goes to `places[k]`, sorted by file and offset); returns the unit
    /// to wait for. With `inline`, the runs are written here, now.
    pub(super) fn submit(
        &self,
        places: impl Iterator<Item = (usize, u64)>,
        buf: Arc<AlignedBuf>,
        inline: bool,
    ) -> Arc<Unit> {
        let runs = runs_of(places, self.space.page_size());
        let unit = Unit::new(runs.len());
        if runs.is_empty() {
            return unit;
        }
        let ps = self.space.page_size();
        let as_run = |(file, offset, first, n): (usize, u64, usize, usize)| Run {
            file,
            offset,
            buf: Arc::clone(&buf),
            bytes: first * ps..(first + n) * ps,
            unit: Arc::clone(&unit),
        };
        if inline {
            for r in runs {
                self.write(as_run(r));
            }
            return unit;
        }
        let mut q = self.queues.lock();
        for r in runs {
            let k = if self.shared { 0 } else { r.0 % self.writers };
            q.runs[k].push_back(as_run(r));
        }
        drop(q);
        self.wake.notify_all();
        unit
    }

    /// A writer's loop: until the crew is closed and its queue is empty.
    pub(super) fn work(&self, writer: usize) {
        let k = if self.shared { 0 } else { writer };
        loop {
            let run = {
                let mut q = self.queues.lock();
                loop {
                    if let Some(r) = q.runs[k].pop_front() {
                        break r;
                    }
                    if q.closed {
                        return;
                    }
                    self.wake.wait(&mut q);
                }
            };
            self.write(run);
        }
    }

    fn write(&self, run: Run) {
        let r = catch_unwind(AssertUnwindSafe(|| {
            self.space
                .write_run(run.file, run.offset, &run.buf[run.bytes.clone()])
        }))
        .unwrap_or_else(|_| {
            Err(Error::FlushFailed(format!(
                "a page writer panicked writing {} bytes at offset {} of data file {}",
                run.bytes.len(),
                run.offset,
                run.file
            )))
        });
        run.unit.complete(r);
    }

    /// Let the writers exit once the queue is empty.
    pub(super) fn close(&self) {
        self.queues.lock().closed = true;
        self.wake.notify_all();
    }
}

/// Closes the crew when dropped, also while unwinding, so that a panic in
/// the producer cannot leave the scope waiting for its writers.
pub(super) struct CloseOnDrop<'c, 's>(pub(super) &'c Crew<'s>);

impl Drop for CloseOnDrop<'_, '_> {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// (file, offset, first page, page count) of each contiguous run.
pub(super) fn runs_of(
    places: impl Iterator<Item = (usize, u64)>,
    ps: usize,
) -> Vec<(usize, u64, usize, usize)> {
    let mut runs: Vec<(usize, u64, usize, usize)> = Vec::new();
    for (k, (file, offset)) in places.enumerate() {
        match runs.last_mut() {
            Some(r) if r.0 == file && r.1 + (r.3 * ps) as u64 == offset => r.3 += 1,
            _ => runs.push((file, offset, k, 1)),
        }
    }
    runs
}
