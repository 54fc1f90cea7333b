//! The strip rewrite must yield a body that re-inspects to no stripped fields, keeps every
//! other member, and parses to the original object minus the fields.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check_strip(data));
