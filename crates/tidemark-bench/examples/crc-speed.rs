//! Time per CRC-32C of the sizes the engine checksums (a whole 16 KiB
//! page, a packed page, a log record, a small record), `crc-fast` (what
//! the engine uses, `checksum.rs`) against the `crc32c` crate (what it
//! used before), on one thread, the data in the CPU's cache as it is
//! right after a page is read or assembled.
//!
//! `cargo run --release -p tidemark-bench --example crc-speed`

use std::hint::black_box;
use std::time::Instant;

/// Microseconds per call of `f` over `len` bytes, the median of 5 runs of
/// about 0.2 s each; offsets vary within 8 bytes, as buffers do.
fn time_us(buf: &[u8], len: usize, f: fn(&[u8]) -> u32) -> f64 {
    let calls = (400_000_000 / len.max(100)).max(1000);
    let mut runs: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            let mut acc = 0u32;
            for i in 0..calls {
                let at = i & 7;
                acc ^= f(black_box(&buf[at..at + len]));
            }
            black_box(acc);
            t.elapsed().as_secs_f64() * 1e6 / calls as f64
        })
        .collect();
    runs.sort_by(f64::total_cmp);
    runs[2]
}

fn main() {
    let buf: Vec<u8> = (0..16_400u32).map(|i| (i * 7 + i / 13) as u8).collect();
    for len in [16_352usize, 12_000, 4_096, 1_100, 100] {
        assert_eq!(
            crc_fast::crc32_iscsi(&buf[..len]),
            crc32c::crc32c(&buf[..len]),
            "the two crates disagree"
        );
    }
    println!(
        "{:>8} {:>14} {:>14} {:>8} {:>14}",
        "bytes", "crc32c us", "crc-fast us", "ratio", "crc-fast GB/s"
    );
    for len in [16_352usize, 12_000, 4_096, 1_100, 100] {
        let old = time_us(&buf, len, crc32c::crc32c);
        let new = time_us(&buf, len, crc_fast::crc32_iscsi);
        println!(
            "{len:>8} {old:>14.3} {new:>14.3} {:>8.2} {:>14.1}",
            old / new,
            len as f64 / new / 1e3
        );
    }
}
