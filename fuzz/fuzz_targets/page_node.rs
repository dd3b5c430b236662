//! Page verification and B+tree node validation: on every image that
//! passes `validate`, every node accessor and method must hold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| keel::format::fuzz::page_and_node(data));
