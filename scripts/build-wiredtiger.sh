#!/usr/bin/env bash
# Builds WiredTiger 11.3.1 (the engine of seeds 001 and 003) as a static
# library for `tidemark-bench --features peer-wiredtiger`.
#
# The source is the `wiredtiger` source package on PyPI, checked against its
# published sha256. Needs cmake, swig is not needed for the C library (only
# for WiredTiger's Python bindings, which are not built), and a C compiler.
# About 5 minutes on 2 cores. Usage:
#
#     scripts/build-wiredtiger.sh [PREFIX]     # default: target/wiredtiger
#     export WIREDTIGER_DIR=$PWD/target/wiredtiger
#     cargo build --release -p tidemark-bench --features peer-wiredtiger
set -euo pipefail

VERSION=11.3.1
SHA256=95052d1b6fc06921dd617aafa1ba2a773d8dbbbf2eb74f77147290a630e598d0
PREFIX=$(realpath -m "${1:-target/wiredtiger}")
WORK="$PREFIX/src"

if [ -f "$PREFIX/lib/libwiredtiger.a" ] || [ -f "$PREFIX/lib64/libwiredtiger.a" ]; then
    echo "WiredTiger $VERSION already built in $PREFIX"
    exit 0
fi
command -v cmake >/dev/null || { echo "cmake is needed (Debian: apt-get install cmake)" >&2; exit 1; }

mkdir -p "$WORK"
cd "$WORK"
if [ ! -f "wiredtiger-$VERSION.tar.gz" ]; then
    python3 -m pip download --quiet --no-deps --no-binary :all: -d . "wiredtiger==$VERSION"
fi
echo "$SHA256  wiredtiger-$VERSION.tar.gz" | sha256sum -c -
rm -rf "wiredtiger-$VERSION"
tar xzf "wiredtiger-$VERSION.tar.gz"
cd "wiredtiger-$VERSION"
# Release build, no diagnostics, no Python, no compression extensions: the
# library's own defaults for a release build (block compression is off by
# default in WiredTiger, as it is in tidemark).
cmake -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DENABLE_STATIC=1 -DENABLE_SHARED=0 -DWITH_PIC=1 -DENABLE_PYTHON=0 \
    -DHAVE_DIAGNOSTIC=0 -DHAVE_UNITTEST=0 -DENABLE_STRICT=0 \
    -DENABLE_LZ4=0 -DENABLE_SNAPPY=0 -DENABLE_ZLIB=0 -DENABLE_ZSTD=0 >/dev/null
cmake --build build -j "$(nproc)" --target wiredtiger_static
mkdir -p "$PREFIX/lib" "$PREFIX/include"
cp "$(find build -name 'libwiredtiger.a' | head -1)" "$PREFIX/lib/"
cp build/include/wiredtiger.h "$PREFIX/include/" 2>/dev/null || cp "$(find build -name wiredtiger.h | head -1)" "$PREFIX/include/"
echo "WiredTiger $VERSION: $PREFIX/lib/libwiredtiger.a"
