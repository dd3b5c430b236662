//! [`OptionsBuilder`]: every option set from Rust with its type and unit.

use std::time::Duration;

use super::{
    ByteSize, DoublewriteMode, FlushLogAtTrxCommit, FlushNeighbors, FlushPolicyName, Isolation,
    Options, PageCompression,
};
use crate::error::Result;
use crate::io::{FlushMethod, ThrottleSpec};

/// Options set from Rust: one method per option, taking the option's type
/// and unit ([`ByteSize`] for sizes, [`Duration`] for times, an enum for a
/// choice), so that a misspelt option or a size without its unit does not
/// compile. Start from the defaults with [`Options::builder`], or from
/// existing options with `OptionsBuilder::from`; [`build`](Self::build)
/// validates as [`Db::open`](crate::Db::open) would. For options given as
/// text (a file, a command line) there is [`Options::set`].
///
/// ```
/// use std::time::Duration;
/// use keel::{ByteSize, Error, FlushLogAtTrxCommit, Isolation, Options};
/// # fn main() -> keel::Result<()> {
/// let opts = Options::builder()
///     .buffer_pool_size(ByteSize::gib(1))
///     .log_file_size(ByteSize::mib(256))
///     .flush_log_at_trx_commit(FlushLogAtTrxCommit::WriteAtCommit)
///     .lock_wait_timeout(Duration::from_secs(5))
///     .transaction_isolation(Isolation::ReadCommitted)
///     .build()?;
/// assert_eq!(opts.buffer_pool_size, 1 << 30);
/// assert_eq!(opts.flush_log_at_trx_commit, 2);
/// // `build` validates: the error names the option and its value.
/// let err = Options::builder().fill_factor(5).build().unwrap_err();
/// assert!(matches!(&err, Error::Config { key, .. } if key == "fill_factor"));
/// assert!(err.to_string().contains("not 5"), "{err}");
/// # Ok(()) }
/// ```
///
/// A size needs its unit:
///
/// ```compile_fail
/// let opts = keel::Options::builder().buffer_pool_size(1 << 30).build();
/// ```
///
/// and a misspelt option is not a method:
///
/// ```compile_fail
/// let opts = keel::Options::builder().bufer_pool_size(keel::ByteSize::gib(1)).build();
/// ```
#[derive(Clone, Debug, Default)]
#[must_use = "an OptionsBuilder does nothing until `build` is called"]
pub struct OptionsBuilder {
    opts: Options,
}

impl Options {
    /// Typed setters over the defaults; see [`OptionsBuilder`].
    pub fn builder() -> OptionsBuilder {
        OptionsBuilder::default()
    }
}

impl From<Options> for OptionsBuilder {
    fn from(opts: Options) -> Self {
        OptionsBuilder { opts }
    }
}

/// Setters whose type is the field's own.
macro_rules! plain_setters {
    ($($name:ident: $ty:ty),* $(,)?) => {
        $(
            #[doc = concat!("[`Options::", stringify!($name), "`].")]
            pub fn $name(mut self, value: $ty) -> Self {
                self.opts.$name = value;
                self
            }
        )*
    };
}

impl OptionsBuilder {
    /// The options, if every one is valid ([`Options::validate`]).
    pub fn build(self) -> Result<Options> {
        self.opts.validate()?;
        Ok(self.opts)
    }

    /// [`Options::page_size`] (4 KiB to 64 KiB, a power of two).
    pub fn page_size(mut self, size: ByteSize) -> Self {
        // Beyond usize is beyond the limit too: validation refuses it.
        self.opts.page_size = usize::try_from(size.as_u64()).unwrap_or(usize::MAX);
        self
    }

    /// [`Options::buffer_pool_size`].
    pub fn buffer_pool_size(mut self, size: ByteSize) -> Self {
        self.opts.buffer_pool_size = size.as_u64();
        self
    }

    /// [`Options::log_file_size`].
    pub fn log_file_size(mut self, size: ByteSize) -> Self {
        self.opts.log_file_size = size.as_u64();
        self
    }

    /// [`Options::old_blocks_time`], kept in whole milliseconds (rounded
    /// down).
    pub fn old_blocks_time(mut self, time: Duration) -> Self {
        self.opts.old_blocks_time = u64::try_from(time.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// [`Options::lock_wait_timeout`].
    pub fn lock_wait_timeout(mut self, timeout: Duration) -> Self {
        self.opts.lock_wait_timeout = timeout.as_secs_f64();
        self
    }

    /// [`Options::device`]: a model such as [`ThrottleSpec::nvme`], or
    /// [`ThrottleSpec::unlimited`] for the real disk as it is.
    pub fn device(mut self, spec: &ThrottleSpec) -> Self {
        self.opts.device = spec.to_string();
        self
    }

    /// [`Options::flush_neighbors`].
    /// A [`NeighborMode`](crate::NeighborMode) fixes the mode; [`FlushNeighbors::Auto`] lets the
    /// policy choose.
    pub fn flush_neighbors(mut self, mode: impl Into<FlushNeighbors>) -> Self {
        self.opts.flush_neighbors = mode.into();
        self
    }

    /// [`Options::flush_log_at_trx_commit`].
    pub fn flush_log_at_trx_commit(mut self, mode: FlushLogAtTrxCommit) -> Self {
        self.opts.flush_log_at_trx_commit = mode.as_u8();
        self
    }

    plain_setters!(
        buffer_pool_instances: usize,
        old_blocks_pct: u32,
        data_files: usize,
        flush_method: FlushMethod,
        flush_policy: FlushPolicyName,
        page_cleaners: usize,
        lru_scan_depth: usize,
        max_dirty_pages_pct: f64,
        max_dirty_pages_pct_lwm: f64,
        io_capacity: u64,
        io_capacity_max: u64,
        adaptive_flushing: bool,
        adaptive_flushing_lwm: f64,
        flushing_avg_loops: u64,
        flush_sync: bool,
        write_io_threads: usize,
        log_files_in_group: usize,
        transaction_isolation: Isolation,
        purge_threads: usize,
        fill_factor: u8,
        doublewrite: DoublewriteMode,
        page_compression: PageCompression,
        doublewrite_files: usize,
        doublewrite_pages: usize,
        read_only: bool,
    );
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// Every option set away from its default through the builder.
    fn all_changed() -> OptionsBuilder {
        Options::builder()
            .page_size(ByteSize::kib(4))
            .buffer_pool_size(ByteSize::gib(2))
            .buffer_pool_instances(4)
            .old_blocks_pct(40)
            .old_blocks_time(Duration::from_millis(1500))
            .data_files(2)
            .flush_method(FlushMethod::Fsync)
            .device(&ThrottleSpec::nvme())
            .flush_policy(FlushPolicyName::Classic)
            .page_cleaners(2)
            .lru_scan_depth(512)
            .max_dirty_pages_pct(80.0)
            .max_dirty_pages_pct_lwm(5.0)
            .io_capacity(400)
            .io_capacity_max(4000)
            .adaptive_flushing(false)
            .adaptive_flushing_lwm(20.0)
            .flushing_avg_loops(10)
            .flush_sync(false)
            .flush_neighbors(crate::NeighborMode::Area)
            .write_io_threads(2)
            .log_file_size(ByteSize::mib(64))
            .log_files_in_group(3)
            .flush_log_at_trx_commit(FlushLogAtTrxCommit::OncePerSecond)
            .lock_wait_timeout(Duration::from_millis(2500))
            .transaction_isolation(Isolation::ReadCommitted)
            .purge_threads(2)
            .fill_factor(90)
            .doublewrite(DoublewriteMode::DetectOnly)
            .page_compression(PageCompression::Zstd)
            .doublewrite_files(3)
            .doublewrite_pages(64)
            .read_only(true)
    }

    #[test]
    fn every_option_has_a_setter() {
        let built = all_changed().build().unwrap();
        let defaults = Options::default().entries();
        for ((key, default), (_, value)) in defaults.iter().zip(built.entries()) {
            assert_ne!(
                default, &value,
                "the builder test leaves `{key}` at its default"
            );
        }
        assert_eq!(defaults.len(), built.entries().len());
    }

    #[test]
    fn setters_give_what_the_text_options_give() {
        let built = all_changed().build().unwrap();
        let mut text = Options::default();
        text.apply_sets([
            "page_size=4096",
            "buffer_pool_size=2GiB",
            "buffer_pool_instances=4",
            "old_blocks_pct=40",
            "old_blocks_time=1500",
            "data_files=2",
            "flush_method=fsync",
            "device=nvme",
            "flush_policy=classic",
            "page_cleaners=2",
            "lru_scan_depth=512",
            "max_dirty_pages_pct=80",
            "max_dirty_pages_pct_lwm=5",
            "io_capacity=400",
            "io_capacity_max=4000",
            "adaptive_flushing=off",
            "adaptive_flushing_lwm=20",
            "flushing_avg_loops=10",
            "flush_sync=off",
            "flush_neighbors=2",
            "write_io_threads=2",
            "log_file_size=64MiB",
            "log_files_in_group=3",
            "flush_log_at_trx_commit=0",
            "lock_wait_timeout=2.5",
            "transaction_isolation=READ-COMMITTED",
            "purge_threads=2",
            "fill_factor=90",
            "doublewrite=detect_only",
            "page_compression=zstd",
            "doublewrite_files=3",
            "doublewrite_pages=64",
            "read_only=true",
        ])
        .unwrap();
        assert_eq!(built, text);
    }

    #[test]
    fn build_validates_and_names_the_option_and_value() {
        let e = Options::builder()
            .buffer_pool_size(ByteSize::kib(64))
            .build()
            .unwrap_err();
        assert!(
            matches!(&e, Error::Config { key, .. } if key == "buffer_pool_size"),
            "{e}"
        );
        assert!(e.to_string().contains("65536 bytes"), "{e}");
        let e = Options::builder()
            .lock_wait_timeout(Duration::ZERO)
            .build()
            .unwrap_err();
        assert!(
            matches!(&e, Error::Config { key, .. } if key == "lock_wait_timeout"),
            "{e}"
        );
        assert!(e.to_string().ends_with("not 0"), "{e}");
        let e = Options::builder()
            .page_size(ByteSize::kib(3))
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("not 3072"), "{e}");
        // From existing options: only what is set changes.
        let base = Options::builder().io_capacity(300).build().unwrap();
        let o = OptionsBuilder::from(base)
            .io_capacity_max(900)
            .build()
            .unwrap();
        assert_eq!((o.io_capacity, o.io_capacity_max), (300, 900));
    }
}
