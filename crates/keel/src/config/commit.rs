//! [`FlushLogAtTrxCommit`]: the values of `flush_log_at_trx_commit` by name.

/// What a commit does with the redo log (InnoDB's
/// `innodb_flush_log_at_trx_commit`), for [`OptionsBuilder::flush_log_at_trx_commit`](crate::OptionsBuilder::flush_log_at_trx_commit).
/// The option itself ([`Options::flush_log_at_trx_commit`](crate::Options::flush_log_at_trx_commit))
/// keeps InnoDB's numbers, which [`as_u8`](Self::as_u8) and `TryFrom<u8>` convert.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FlushLogAtTrxCommit {
    /// 1: the log is written and synced at every commit, so a committed
    /// transaction survives a crash of the machine. The default.
    #[default]
    SyncAtCommit,
    /// 2: written at commit (a crash of the process loses nothing), synced
    /// about once a second (a crash of the machine may lose that second).
    WriteAtCommit,
    /// 0: written and synced about once a second; any crash may lose up to
    /// that second of commits.
    OncePerSecond,
}

impl FlushLogAtTrxCommit {
    /// InnoDB's number for it.
    pub fn as_u8(self) -> u8 {
        match self {
            Self::OncePerSecond => 0,
            Self::SyncAtCommit => 1,
            Self::WriteAtCommit => 2,
        }
    }
}

/// InnoDB's numbers 0, 1, 2; anything else is returned as the error.
impl TryFrom<u8> for FlushLogAtTrxCommit {
    type Error = u8;

    fn try_from(n: u8) -> Result<Self, u8> {
        match n {
            0 => Ok(Self::OncePerSecond),
            1 => Ok(Self::SyncAtCommit),
            2 => Ok(Self::WriteAtCommit),
            other => Err(other),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn innodb_numbers_round_trip() {
        for n in 0..=2u8 {
            assert_eq!(FlushLogAtTrxCommit::try_from(n).unwrap().as_u8(), n);
        }
        assert_eq!(FlushLogAtTrxCommit::try_from(3), Err(3));
        assert_eq!(FlushLogAtTrxCommit::default().as_u8(), 1);
    }
}
