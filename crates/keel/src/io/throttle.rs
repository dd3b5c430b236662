//! A throttled file system: any disk made to behave like a slower one, so that
//! slow-disk behaviour (checkpoint-age waves, sync-flush stalls) reproduces on
//! a laptop's NVMe drive.
//!
//! # The model
//! One model per [`ThrottledFileSystem`], shared by every file opened through
//! it, since it stands for one disk. A request of B bytes
//! 1. takes a queue slot: at most `qd` requests are in service at once
//!    (unbounded without `qd`); a slot is held until the request completes;
//! 2. then starts when two token buckets allow: `iops` (one token per request)
//!    and `bw` (B tokens);
//! 3. completes `lat` after its start, plus `seek` unless it begins exactly
//!    where the previous request on the same file ended.
//!
//! `sync` is a request of no bytes that takes a queue slot, no tokens and costs
//! one `lat`. The wrapper performs the real I/O at once and then sleeps until
//! the modelled completion, so the real device's time overlaps the model's and
//! the model is a floor: a request lasts as long as the model says or as long
//! as the real device takes, whichever is longer.
//!
//! # Virtual time
//! `thread::sleep` overshoots by 50–100 µs on Linux, and on a loaded CPU a
//! woken thread may wait milliseconds to run; a model that timed each request
//! from "now" would lose that on every request and run slow. Instead every
//! bucket and slot keeps the virtual instant at which it is next free, and
//! requests are scheduled against those instants:
//! - a bucket grants tokens from `max(next free, queued − CATCH_UP)`: it keeps
//!   at most [`CATCH_UP`] of unused credit (its burst size), so a request that
//!   comes late catches up on the throughput it missed;
//! - a thread's arrival is "now" minus how late the thread was scheduled after
//!   its previous request's modelled completion (capped at
//!   [`LATE_CREDIT_MAX`]), as if it had woken on time; lateness caused by slow
//!   real I/O earns no credit. So back-to-back requests at queue depth 1 keep
//!   the modelled latency, and N requests take what the model predicts.
//!
//! # Changing the disk while it runs
//! [`ThrottledFileSystem::set_spec`] stands for a disk whose speed changes
//! under load (a RAID controller whose battery fails and drops its write
//! cache, a backup taking half the disk): every file follows the new spec
//! from its next request on. Requests already admitted finish under the old
//! spec: their completion was fixed at admission and their threads sleep
//! towards it, and a real disk, too, finishes the commands it has queued
//! at the speed it had when it took them. At most `qd` requests (or one per
//! thread) are in that state, so the old spec outlives the change by one
//! queue's worth of requests at most. The virtual-time state carries over
//! so that the new spec holds from the first request (see
//! `Scheduler::respec` for the exact rules): the token buckets restart
//! empty, so no credit saved under the old spec becomes a burst under the
//! new one, but requests granted before the change keep their place ahead
//! of later ones; a smaller queue depth waits for the old requests in
//! service to drain below it. A file system created unlimited hands out its
//! files unwrapped and has nothing to change (see [`SetSpecError`]).
//!
//! Between threads: the model's state (spec, buckets, slots, counters) sits
//! behind one mutex. A request holds it only while it is admitted (takes
//! a slot and tokens and learns its completion), never during its real I/O
//! or its sleep; `set_spec` holds it only for the swap. So every request is
//! admitted wholly under one spec, the old or the new, and neither a change
//! nor a request waits for the other beyond that moment. Nobody wakes
//! anybody: a thread in the throttle sleeps (`thread::sleep`, no condition
//! variable) until the completion it was given, and a change neither wakes
//! nor re-times it; the new spec reaches that thread at its next request.
//!
//! # Presets
//! | name | spec | what it stands for |
//! |---|---|---|
//! | `unlimited` | (nothing) | no throttling: files pass through unwrapped, at no cost |
//! | `hdd-raid10` | `iops=1500,bw=300MiB,lat=200us,seek=5ms,qd=8` | the seed reports' eight 7.2k-rpm disks in RAID10 |
//! | `sata-ssd` | `iops=30000,bw=468MiB,lat=100us,seek=0,qd=32` | the seed reports' SATA SSD |
//! | `nvme` | `iops=200000,bw=2GiB,lat=20us,qd=128` | a mid-range PCIe NVMe drive |
//!
//! `hdd-raid10`: a 7.2k-rpm spindle serves ~150–200 random requests per second
//! (an average seek plus half a rotation, ~4 ms + 4.2 ms, shortened by command
//! queueing to ~5 ms); eight of them give ~1500 IOPS. One request in flight per
//! spindle (`qd=8`) at 5.2 ms each also gives ~1540 IOPS, so the two limits
//! agree. Four stripes of ~75 MiB/s sequential give `bw=300MiB`; `lat` is the
//! controller and the transfer of a 16 KiB page.
//! `sata-ssd`: the seeds measured 468 MiB/s, or 30 K IOPS of 16 KiB random
//! writes (468 MiB / 16 KiB ≈ 30 K); no seek; NCQ's depth of 32; ~100 µs per
//! write into the drive's cache.
//! `nvme`: a PCIe 3.0 ×4 drive under a sustained mixed load, conservatively.

use std::fmt;
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::{Device, FileSystem, OpenMode};

mod model;
mod spec;

use model::Model;
pub use model::{ThrottleStats, CATCH_UP, LATE_CREDIT_MAX};
pub use spec::{ParseThrottleSpecError, ThrottleSpec};

/// A [`FileSystem`] whose devices behave like the disk a [`ThrottleSpec`]
/// describes (or slower, if the real one is).
pub struct ThrottledFileSystem {
    inner: Arc<dyn FileSystem>,
    /// `None` when created unlimited: devices are the inner ones, unwrapped.
    model: Option<Arc<Model>>,
}

/// Why [`ThrottledFileSystem::set_spec`] refused a spec.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SetSpecError {
    /// The new spec holds a value [`ThrottleSpec::validate`] refuses.
    #[error(transparent)]
    Invalid(#[from] ParseThrottleSpecError),
    /// The file system was created unlimited: its files were handed out
    /// unwrapped, at no cost, so no model stands between them and the disk.
    #[error(
        "the file system was created unlimited and hands out its files unwrapped: \
         there is no device model to change"
    )]
    Unwrapped,
}

impl ThrottledFileSystem {
    /// Throttle `inner` by `spec`. Call [`ThrottleSpec::validate`] first on a
    /// hand-built spec: here a rate that is not positive and finite means no
    /// limit and a queue depth of 0 means 1. An unlimited spec wraps nothing
    /// (files pass through at no cost) and cannot be changed later.
    pub fn new(inner: Arc<dyn FileSystem>, spec: ThrottleSpec) -> Self {
        let model = (!spec.is_unlimited()).then(|| Arc::new(Model::new(&spec)));
        Self { inner, model }
    }

    /// The spec this file system models now.
    pub fn spec(&self) -> ThrottleSpec {
        self.model
            .as_ref()
            .map_or_else(ThrottleSpec::unlimited, |model| model.spec())
    }

    /// Model `spec` from every file's next request on; requests already in
    /// service finish under the old one (see the module documentation).
    /// `spec` may be unlimited: the model then delays nothing, and a later
    /// call may throttle again.
    pub fn set_spec(&self, spec: &ThrottleSpec) -> Result<(), SetSpecError> {
        spec.validate()?;
        let model = self.model.as_ref().ok_or(SetSpecError::Unwrapped)?;
        model.set_spec(spec);
        Ok(())
    }

    /// Counters of the model so far (all zero when unlimited).
    pub fn stats(&self) -> ThrottleStats {
        self.model
            .as_ref()
            .map_or_else(ThrottleStats::default, |model| model.stats())
    }
}

impl fmt::Debug for ThrottledFileSystem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThrottledFileSystem")
            .field("spec", &self.spec().to_string())
            .finish_non_exhaustive()
    }
}

impl FileSystem for ThrottledFileSystem {
    fn open(&self, path: &Path, mode: OpenMode) -> std::io::Result<Arc<dyn Device>> {
        let inner = self.inner.open(path, mode)?;
        let Some(model) = &self.model else {
            return Ok(inner);
        };
        Ok(Arc::new(ThrottledDevice {
            inner,
            model: Arc::clone(model),
            last_end: AtomicU64::new(u64::MAX),
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }

    fn lock_dir(&self, dir: &Path) -> Result<super::DirLock, super::LockError> {
        self.inner.lock_dir(dir)
    }

    fn lock_dir_shared(&self, dir: &Path) -> Result<super::DirLock, super::LockError> {
        self.inner.lock_dir_shared(dir)
    }

    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.sync_dir(dir)
    }

    fn remove(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove(path)
    }

    fn create_dirs(&self, dir: &Path) -> std::io::Result<Vec<std::path::PathBuf>> {
        self.inner.create_dirs(dir)
    }
}

/// One file on the throttled disk.
struct ThrottledDevice {
    inner: Arc<dyn Device>,
    model: Arc<Model>,
    /// Where the previous request on this file ended (`u64::MAX`: none yet).
    last_end: AtomicU64,
}

impl Device for ThrottledDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let ticket = self
            .model
            .admit_io(&self.last_end, offset, buf.len() as u64);
        let result = self.inner.read_at(buf, offset);
        self.model.wait(ticket);
        result
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let ticket = self
            .model
            .admit_io(&self.last_end, offset, buf.len() as u64);
        let result = self.inner.write_at(buf, offset);
        self.model.wait(ticket);
        result
    }

    fn sync(&self) -> std::io::Result<()> {
        let ticket = self.model.admit_sync();
        let result = self.inner.sync();
        self.model.wait(ticket);
        result
    }

    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.inner.set_len(len)
    }

    fn allocate(&self, len: u64) -> std::io::Result<()> {
        self.inner.allocate(len)
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }

    /// The model slows writes; it tears none: the device it wraps says.
    fn atomic_write_unit(&self) -> super::AtomicWriteUnit {
        self.inner.atomic_write_unit()
    }

    fn write_atomic_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let ticket = self
            .model
            .admit_io(&self.last_end, offset, buf.len() as u64);
        let result = self.inner.write_atomic_at(buf, offset);
        self.model.wait(ticket);
        result
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::io::{FlushMethod, OsFileSystem};

    const PAGE: usize = 16384;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn throttled(spec: &str) -> (tempfile::TempDir, ThrottledFileSystem) {
        let dir = tempfile::tempdir().unwrap();
        let inner: Arc<dyn FileSystem> = Arc::new(OsFileSystem::new(FlushMethod::NoSync));
        (dir, ThrottledFileSystem::new(inner, spec.parse().unwrap()))
    }

    fn create(fs: &ThrottledFileSystem, dir: &tempfile::TempDir, name: &str) -> Arc<dyn Device> {
        fs.open(&dir.path().join(name), OpenMode::CreateNew)
            .unwrap()
    }

    fn assert_close(what: &str, elapsed: Duration, expected: Duration) {
        let ratio = elapsed.as_secs_f64() / expected.as_secs_f64();
        assert!(
            (0.85..=1.15).contains(&ratio),
            "{what}: took {elapsed:?}, the model predicts {expected:?}"
        );
    }

    /// Run `work(i)` on `threads` fresh threads (no sleep credit carried in)
    /// started together, and return the time from the first start to the last
    /// finish, less each thread's final sleep overshoot: no model can take
    /// back the lateness of a wake-up that no request follows.
    fn timed(threads: usize, work: impl Fn(usize) + Sync) -> Duration {
        let barrier = std::sync::Barrier::new(threads);
        let spans: Vec<(Instant, Instant)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|i| {
                    let (barrier, work) = (&barrier, &work);
                    scope.spawn(move || {
                        barrier.wait();
                        let begin = Instant::now();
                        work(i);
                        (begin, Instant::now() - model::lateness())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let begin = spans.iter().map(|s| s.0).min().unwrap();
        let end = spans.iter().map(|s| s.1).max().unwrap();
        end - begin
    }

    #[test]
    fn one_thread_gets_the_iops_limit() {
        let (dir, fs) = throttled("iops=2000");
        let file = create(&fs, &dir, "a");
        let page = vec![7u8; PAGE];
        let elapsed = timed(1, |_| {
            for i in 0..400u64 {
                file.write_at(&page, (i % 64) * PAGE as u64).unwrap();
            }
        });
        assert_close("400 writes at 2000 IOPS", elapsed, ms(200));
        let stats = fs.stats();
        assert_eq!((stats.requests, stats.bytes), (400, 400 * PAGE as u64));
        assert!(stats.delay > ms(100), "{stats:?}");
    }

    #[test]
    fn four_threads_share_the_iops_limit() {
        let (dir, fs) = throttled("iops=2000");
        let files: Vec<_> = (0..4)
            .map(|t| create(&fs, &dir, &format!("t{t}")))
            .collect();
        let elapsed = timed(4, |t| {
            let page = vec![t as u8; PAGE];
            for i in 0..200u64 {
                files[t].write_at(&page, (i % 16) * PAGE as u64).unwrap();
            }
        });
        assert_close("800 writes from 4 threads at 2000 IOPS", elapsed, ms(400));
        assert_eq!(fs.stats().requests, 800);
    }

    #[test]
    fn seeks_cost_only_non_contiguous_requests() {
        let (dir, fs) = throttled("qd=1,lat=1ms,seek=4ms");
        let page = vec![1u8; PAGE];
        let seed = 0x5eed_u64;
        let mut rng = <rand::rngs::SmallRng as rand::SeedableRng>::seed_from_u64(seed);
        let mut offsets = Vec::new();
        let mut end = u64::MAX;
        while offsets.len() < 50 {
            let offset = rand::Rng::gen_range(&mut rng, 0..256u64) * PAGE as u64;
            if offset != end {
                offsets.push(offset);
                end = offset + PAGE as u64;
            }
        }
        let random = create(&fs, &dir, "random");
        let elapsed = timed(1, |_| {
            for &offset in &offsets {
                random.write_at(&page, offset).unwrap();
            }
        });
        assert_close(&format!("50 random writes (seed {seed})"), elapsed, ms(250));
        assert_eq!(fs.stats().seeks, 50);

        let contiguous = create(&fs, &dir, "contiguous");
        let elapsed = timed(1, |_| {
            for i in 0..50u64 {
                contiguous.write_at(&page, i * PAGE as u64).unwrap();
            }
        });
        // The first write seeks: the model knows no previous end on a new file.
        assert_close("50 contiguous writes", elapsed, ms(4 + 50));
        assert_eq!(fs.stats().seeks, 51);
    }

    #[test]
    fn bandwidth_limits_large_writes() {
        let (dir, fs) = throttled("bw=16MiB");
        let file = create(&fs, &dir, "bw");
        let chunk = vec![3u8; 256 << 10];
        let elapsed = timed(1, |_| {
            for i in 0..40u64 {
                file.write_at(&chunk, (i % 8) * chunk.len() as u64).unwrap();
            }
        });
        // 40 x 256 KiB = 10 MiB at 16 MiB/s.
        assert_close("10 MiB at 16 MiB/s", elapsed, ms(625));
    }

    #[test]
    fn sync_costs_one_latency() {
        let (dir, fs) = throttled("lat=2ms");
        let file = create(&fs, &dir, "sync");
        let elapsed = timed(1, |_| {
            for _ in 0..20 {
                file.sync().unwrap();
            }
        });
        assert_close("20 syncs at lat=2ms", elapsed, ms(40));
        let stats = fs.stats();
        assert_eq!((stats.syncs, stats.requests), (20, 0));
    }

    #[test]
    fn throttled_reads_and_writes_reach_the_inner_device() {
        let (dir, fs) = throttled("iops=100000,lat=10us");
        let file = create(&fs, &dir, "data");
        file.write_at(b"hello", 10).unwrap();
        let mut back = [0u8; 5];
        file.read_at(&mut back, 10).unwrap();
        assert_eq!(&back, b"hello");
        let err = file.read_at(&mut back, 100).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
        file.set_len(4096).unwrap();
        assert_eq!(file.len().unwrap(), 4096);
        assert_eq!(file.path(), dir.path().join("data"));
        assert_eq!(fs.stats().requests, 3);
    }

    #[test]
    fn unlimited_passes_through() {
        let (dir, fs) = throttled("unlimited");
        assert!(fs.spec().is_unlimited());
        let file = create(&fs, &dir, "u");
        for i in 0..100u64 {
            file.write_at(&[1; 512], i * 512).unwrap();
        }
        file.sync().unwrap();
        assert_eq!(fs.stats(), ThrottleStats::default());
        // Nothing wraps its files: there is no model to change.
        let err = fs.set_spec(&ThrottleSpec::nvme()).unwrap_err();
        assert_eq!(err, SetSpecError::Unwrapped);
        assert!(fs.spec().is_unlimited());
    }

    #[test]
    fn a_changed_spec_holds_from_the_next_request_on() {
        let (dir, fs) = throttled("iops=1000");
        // Opened before the changes: open files follow them too.
        let files: Vec<_> = (0..2)
            .map(|t| create(&fs, &dir, &format!("t{t}")))
            .collect();
        let page = vec![5u8; PAGE];
        // Two threads share the disk, so each phase also shows that no
        // thread is left behind a slot or a bucket of the old spec.
        let phase = |writes_per_thread: u64| {
            timed(2, |t| {
                for i in 0..writes_per_thread {
                    files[t].write_at(&page, (i % 16) * PAGE as u64).unwrap();
                }
            })
        };
        assert_close("300 writes at 1000 IOPS", phase(150), ms(300));
        fs.set_spec(&"iops=250".parse().unwrap()).unwrap();
        assert_eq!(fs.spec().to_string(), "iops=250");
        assert_close("75 writes after a change to 250 IOPS", phase(38), ms(304));
        fs.set_spec(&"iops=1000".parse().unwrap()).unwrap();
        assert_close(
            "300 writes after a change back to 1000",
            phase(150),
            ms(300),
        );
        assert_eq!(fs.stats().requests, 300 + 76 + 300);
        // An invalid spec is refused, naming the bad value; nothing changes.
        let bad = ThrottleSpec {
            qd: Some(0),
            ..ThrottleSpec::default()
        };
        let err = fs.set_spec(&bad).unwrap_err().to_string();
        assert!(err.contains("`qd` must be at least 1"), "{err}");
        assert_eq!(fs.spec().to_string(), "iops=1000");
    }
}
