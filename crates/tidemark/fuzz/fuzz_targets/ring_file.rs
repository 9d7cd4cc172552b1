#![no_main]
//! Fuzz target: `tidemark::fuzzing::ring_file` must never panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tidemark::fuzzing::ring_file(data);
});
