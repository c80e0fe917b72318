//! libFuzzer target: see `checks::request_parser` for the property.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::request_parser(data));
