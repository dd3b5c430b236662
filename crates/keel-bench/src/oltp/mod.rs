//! `keel bench oltp`: sysbench's OLTP workloads (oltp_read_write and its
//! relatives) over Keel's transaction API, or over another embedded engine
//! through the same driver ([`engine`]), sampled every report interval
//! into rows that feed the per-interval line, the JSON and CSV files and the
//! HTML report.
//!
//! The tables follow sysbench's schema: `sbtestN` is a primary B+tree keyed
//! by `id` (u64 big-endian) whose value is `k` (u32 little-endian), `c`
//! (120 bytes) and `pad` (60 bytes); `sbtestN_k` is the secondary index on
//! `k`, keyed by `k` (u32 big-endian) ++ `id` (u64 big-endian) with an empty
//! value. A sysbench transaction is one Keel transaction, so the index and
//! the rows always agree. Another engine stores the same keys and values
//! in trees of the same names.

mod bench;
mod device_change;
pub mod engine;
mod error;
mod hold_view;
mod keys;
mod merge;
mod option_change;
mod output;
mod params;
mod prepare;
mod presets;
mod report;
mod rows;
mod runner;
mod sample;
mod seeds;
mod showdown;
mod summary;
mod verify;
mod workload;

pub use bench::{run_plan, Event, OltpReport, Plan, RunResult};
pub use device_change::{DeviceChange, DEVICE_CHANGE_FLAG};
pub use engine::{
    Database, DbError, Engine, Home, KeelDatabase, Session, Span, Transaction, TreeId,
};
pub use error::OltpError;
pub use hold_view::{HoldView, HOLD_VIEW_FLAG};
pub use keys::{KeyGen, RandType};
pub use merge::{below_average, merge, read_report, repeats_text, summary_text};
pub use option_change::{OptionChange, SET_AT_FLAG};
pub use output::{
    csv_text, device_change_line, interval_line, option_change_line, view_line, write_csv,
    write_json,
};
pub use params::{options_json, parse_bool, OltpParams, VaryAxis, Workload, WORKLOAD_KEYS};
pub use prepare::{has_tables, prepare, prewarm};
pub use presets::{
    find_preset, normalize_key, presets_text, Preset, PresetSettings, DISASTER_55, LRU_SCAN_DEPTH,
    NEIGHBORS, PRESETS, WAVES_80, WAVES_80_FIX, WAVES_80_SWEEP,
};
pub use report::{render_html, write_html_report, CHART_TITLES};
pub use rows::{index_key, index_name, table_name, Row, INDEX_SUFFIX};
pub(crate) use runner::device_label;
pub use runner::{run, Measured, Tick};
pub(crate) use sample::{
    Counts, Snapshot, DEVICE_WRITE_BYTES, PROCESS_WRITE_BYTES, UNDO_PAGES_IN_POOL,
};
pub use sample::{Interval, PagesFlushed, KEEL_METRIC_FIELDS};
pub use seeds::{seed, seeds_text, Seed, SEEDS};
pub use showdown::{
    criteria, judge, preset_file, render_showdown_html, showdown_text, write_showdown, Check,
    PresetVerdict, RunRow, RunVerdict, ShowdownReport, DISASTER_MIN_TPS_RATIO, MAX_LATENCY_MS,
    MAX_P999_OVER_P50, MIN_SHARE_OF_MEDIAN, SHOWDOWN_ABOUT, SHOWDOWN_NAME, SHOWDOWN_PRESETS,
    SHOWDOWN_RUN_SECONDS, SHOWDOWN_VARY,
};
pub use summary::{LatencyMs, Summary};
pub use verify::{index_vs_rows, index_vs_rows_in, index_vs_rows_on_disk};
