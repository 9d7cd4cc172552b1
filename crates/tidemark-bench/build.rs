//! Builds the WiredTiger shim when the `peer-wiredtiger` feature is on;
//! does nothing otherwise.

fn main() {
    println!("cargo:rerun-if-changed=src/engines/wt_shim.c");
    println!("cargo:rerun-if-env-changed=WIREDTIGER_DIR");
    if std::env::var_os("CARGO_FEATURE_PEER_WIREDTIGER").is_none() {
        return;
    }
    let Some(dir) = std::env::var_os("WIREDTIGER_DIR") else {
        // A build script reports a missing prerequisite by failing the build.
        panic!(
            "the peer-wiredtiger feature needs WIREDTIGER_DIR, the prefix that \
             scripts/build-wiredtiger.sh installed into (see BENCHMARKS.md)"
        );
    };
    let dir = std::path::PathBuf::from(dir);
    cc::Build::new()
        .file("src/engines/wt_shim.c")
        .include(dir.join("include"))
        .opt_level(2)
        .compile("tmwt_shim");
    println!(
        "cargo:rustc-link-search=native={}",
        dir.join("lib").display()
    );
    println!("cargo:rustc-link-lib=static=wiredtiger");
    for lib in ["pthread", "dl", "m", "rt"] {
        println!("cargo:rustc-link-lib={lib}");
    }
}
