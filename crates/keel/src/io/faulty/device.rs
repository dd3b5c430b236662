//! One open file of a [`FaultyFs`](super::FaultyFs).
//!
//! Every call first runs the failpoints, holding no lock of the file (a
//! hold pauses there, and a crash locks every file), then locks its file and
//! checks that the power has not failed since the handle was opened. So a
//! call either completes before a crash or fails, and a paused call never
//! keeps anyone else from the file.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use super::failpoint::{Action, Op};
use super::{apply, FileState, LastWrite, Pending, Shared, SECTOR};
use crate::io::{AtomicWriteUnit, Device};

pub(super) struct FaultyDevice {
    pub(super) path: PathBuf,
    pub(super) file: Arc<Mutex<FileState>>,
    /// The file's epoch when opened: a crash since then kills this handle.
    pub(super) epoch: u64,
    /// Opened with `OpenMode::ReadOnly`: writes and size changes fail.
    pub(super) read_only: bool,
    pub(super) shared: Arc<Shared>,
}

impl FaultyDevice {
    /// Lock the file, failing if power was lost since this handle was opened.
    fn live(&self) -> io::Result<MutexGuard<'_, FileState>> {
        let state = self.file.lock();
        if state.epoch != self.epoch {
            return Err(self.lost_power("handle opened before a simulated crash"));
        }
        Ok(state)
    }

    /// EBADF, as the OS answers a write through a read-only descriptor.
    fn refuse_if_read_only(&self) -> io::Result<()> {
        if self.read_only {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        Ok(())
    }

    fn lost_power(&self, why: &str) -> io::Error {
        io::Error::other(crate::io::DeviceGone(format!(
            "{}: device lost power (EIO): {why}",
            self.path.display()
        )))
    }

    /// Run the failpoints for `op`, then [`Self::live`]. `write` is the
    /// buffer of a write (and whether it is atomic), which a crash
    /// failpoint leaves pending.
    fn enter(
        &self,
        op: Op,
        write: Option<(u64, &[u8], bool)>,
    ) -> io::Result<MutexGuard<'_, FileState>> {
        // A call on a dead handle neither counts nor fires.
        drop(self.live()?);
        match self.shared.failpoints.check(op, &self.path) {
            Action::Proceed => {}
            Action::Fail(e) => {
                if op == Op::Sync {
                    // Linux after a failed fsync: the dirty pages are marked
                    // clean, so these writes never become durable (but stay
                    // readable).
                    self.live()?.pending.clear();
                }
                return Err(e);
            }
            Action::Crash(mode, trigger) => {
                let last = write.map(|(offset, data, atomic)| LastWrite {
                    file: &self.file,
                    epoch: self.epoch,
                    offset,
                    data,
                    atomic,
                });
                self.shared.crash(mode, last);
                let why = format!("power failed at failpoint `{}`", trigger.spec());
                return Err(self.lost_power(&why));
            }
            Action::Hold(timeout, trigger) => trigger.hold(&self.path, op.name(), timeout)?,
            Action::Delay(pause) => std::thread::sleep(pause),
        }
        self.live()
    }
}

impl FaultyDevice {
    fn write(&self, buf: &[u8], offset: u64, atomic: bool) -> io::Result<()> {
        self.refuse_if_read_only()?;
        let mut state = self.enter(Op::Write, Some((offset, buf, atomic)))?;
        if buf.is_empty() {
            return Ok(());
        }
        apply(&mut state.volatile, offset, buf);
        state.pending.push(Pending {
            offset,
            data: buf.to_vec(),
            atomic,
        });
        Ok(())
    }
}

impl Device for FaultyDevice {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let state = self.enter(Op::Read, None)?;
        let end = offset.checked_add(buf.len() as u64);
        match end {
            Some(end) if end <= state.volatile.len() as u64 => {
                buf.copy_from_slice(&state.volatile[offset as usize..end as usize]);
                Ok(())
            }
            _ => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "read of {} bytes at offset {offset} ends past the end of {} ({} bytes)",
                    buf.len(),
                    self.path.display(),
                    state.volatile.len()
                ),
            )),
        }
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.write(buf, offset, false)
    }

    fn atomic_write_unit(&self) -> AtomicWriteUnit {
        match *self.shared.atomic_unit.lock() {
            Some(max) => AtomicWriteUnit::Untorn { min: SECTOR, max },
            None => AtomicWriteUnit::None(
                "the faulty device models no atomic write unit (FaultyFs::set_atomic_write_unit)"
                    .into(),
            ),
        }
    }

    /// Linux's rules for `RWF_ATOMIC`: EOPNOTSUPP without a unit, EINVAL
    /// for a length that is not a power of two in it or an offset that is
    /// not a multiple of the length; nothing is written then.
    fn write_atomic_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let AtomicWriteUnit::Untorn { min, max } = self.atomic_write_unit() else {
            return Err(io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        };
        let n = buf.len();
        if !n.is_power_of_two() || !(min..=max).contains(&n) || !offset.is_multiple_of(n as u64) {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        self.write(buf, offset, true)
    }

    fn sync(&self) -> io::Result<()> {
        let mut state = self.enter(Op::Sync, None)?;
        let state = &mut *state;
        for w in std::mem::take(&mut state.pending) {
            apply(&mut state.durable, w.offset, &w.data);
        }
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.live()?.volatile.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.refuse_if_read_only()?;
        let len = usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        self.enter(Op::SetLen, None)?.set_len(len);
        Ok(())
    }

    fn allocate(&self, len: u64) -> io::Result<()> {
        self.refuse_if_read_only()?;
        let len = usize::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        let mut state = self.enter(Op::SetLen, None)?;
        if state.volatile.len() < len {
            state.set_len(len);
        }
        state.allocated = state.allocated.max(len);
        Ok(())
    }

    fn path(&self) -> &Path {
        &self.path
    }
}
