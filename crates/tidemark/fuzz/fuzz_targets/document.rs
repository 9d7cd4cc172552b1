#![no_main]
//! Fuzz target: `tidemark::fuzzing::document` must never panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tidemark::fuzzing::document(data);
});
