//! Every sealed header: data file, log file, checkpoint slot, doublewrite
//! file and area, as given and with the checksum recomputed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| keel::format::fuzz::headers(data));
