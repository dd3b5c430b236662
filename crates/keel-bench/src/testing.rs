//! What the crate's unit tests share.

/// Engine options small enough for a unit test: 4 KiB pages, a 1 MiB pool
/// and log, no syncs.
#[allow(clippy::unwrap_used)]
pub(crate) fn small_options() -> keel::Options {
    let mut o = keel::Options::default();
    o.apply_sets([
        "page_size=4096",
        "buffer_pool_size=1MiB",
        "flush_method=nosync",
        "log_file_size=1MiB",
    ])
    .unwrap();
    o
}
