//! libFuzzer target: see `checks::range_conditional` for the property.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::range_conditional(data));
