//! `inspect` must not panic on any input, at any depth limit.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check_inspect(data));
