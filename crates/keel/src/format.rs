//! The on-disk format, read-only: everything a tool needs to read a closed
//! (or crashed) database directory without opening the engine, as the
//! engine's own types. `keel inspect` and `keel check` read the files
//! through this module and nothing else. Nothing here takes the
//! directory's lock, so a tool may also read a database another process
//! has open (what it then sees is a moving target: see [`tree`]).
//!
//! Every decoder here accepts any bytes and returns what is wrong with them
//! instead of panicking; a header that decodes has a geometry that can be
//! used for arithmetic (no zero page size, no file index past the file
//! count). Nothing here writes: [`tree`], the one part that opens files,
//! opens them read-only. Byte layouts: `docs/format.md`.

/// Pages: the common header every page carries, and its verification.
/// `get_u32` and `get_u64` panic past the end of their buffer: they are for
/// fields of a page that passed `verify_page` (at least 4096 bytes) and of
/// buffers whose length was checked.
pub mod page {
    /// Compressed page images (`page_compression`): decode one read from a
    /// data file before verifying it.
    pub use crate::page::compress;
    pub use crate::page::{
        get_u32, get_u64, page_id, page_lsn, page_type, verify_page, Lsn, PageCheckError, PageId,
        PageType, MAX_PAGE_SIZE, MIN_PAGE_SIZE, PAGE_HEADER_SIZE,
    };
}

/// Data files `data-N.keel`: the file header and the space header (page 0).
pub mod data {
    pub use crate::space::data_file_name as file_name;
    pub use crate::space::header::{FileHeader, FORMAT_VERSION, HEADER_LEN, MAGIC};
    pub use crate::space::EXTENT_PAGES;

    /// Fields of the space header (page 0): byte offsets in the page, as
    /// the engine reads them.
    pub mod space_header {
        pub use crate::engine::space_header::{CATALOG_ROOT, FREE_COUNT, FREE_HEAD, HWM, UNDO_DIR};
    }
}

/// Redo log files `redo-N.keel`: file header, checkpoint slots, groups.
pub mod redo {
    pub use crate::redo::format::{
        decode_group, decode_group_v1, group_at, kind, Checkpoint, GroupHeader, LogFileHeader,
        CHECKPOINT_LEN, CHECKPOINT_SLOTS, GROUP_HDR, GROUP_HDR_V1, LOG_FILE_HDR, LOG_HEADER_LEN,
        LOG_MAGIC, LOG_VERSION, LOG_VERSION_V1,
    };
    pub use crate::redo::inflight::decode_relocation;
    pub use crate::redo::{log_file_name as file_name, START_LSN};
}

/// Doublewrite files `dblwr-N.keel`: file header and area headers.
pub mod doublewrite {
    pub use crate::flush::doublewrite::{
        area_header_len, file_name, AreaHeader, Entry, FileHeader,
    };
}

pub mod tree;

#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzz;
