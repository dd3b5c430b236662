//! Redo record groups, page records and commit records.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| keel::format::fuzz::redo(data));
