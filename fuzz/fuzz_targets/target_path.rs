//! libFuzzer target: see `checks::target_path` for the property.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::target_path(data));
