//! The parts of the `tidemark` command that other crates reuse: drawing
//! statistics logs (`report`), the live view (`stat`), and Extended JSON
//! import and export (`transfer`, which `tidemark-bench import-export`
//! measures).

pub mod report;
pub mod stat;
pub mod transfer;
