#![no_main]
//! Fuzz target: a line given to `tidemark import` is parsed (and, when it
//! is a document, prepared for insertion) without a panic.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(line) = std::str::from_utf8(data) {
        if let Ok(doc) = tidemark_cli::transfer::parse(line) {
            let mut bytes = Vec::new();
            if doc.to_writer(&mut bytes).is_ok() {
                tidemark::fuzzing::document(&bytes);
            }
        }
    }
});
