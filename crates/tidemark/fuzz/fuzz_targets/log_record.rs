#![no_main]
//! Fuzz target: `tidemark::fuzzing::log_record` must never panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tidemark::fuzzing::log_record(data);
});
