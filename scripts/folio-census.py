#!/usr/bin/env python3
"""How much of a file's cached pages sit in large folios (Linux, as root).

Maps the file privately, touches only pages already in the page cache
(mincore), then reads each page's flags from /proc/kpageflags: a page that
is the head or a tail of a compound page is in a folio larger than 4 KiB.
Nothing is read from the device and the file is not changed.

    scripts/folio-census.py DIR/data.tdm
"""
import ctypes
import mmap
import os
import struct
import sys

PAGE = 4096
HEAD, TAIL = 15, 16  # KPF_COMPOUND_HEAD, KPF_COMPOUND_TAIL


def main(path):
    fd = os.open(path, os.O_RDONLY)
    size = os.fstat(fd).st_size
    m = mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    n = size // PAGE
    vec = (ctypes.c_ubyte * n)()
    if ctypes.CDLL(None).mincore(ctypes.c_void_p(base), ctypes.c_size_t(size), vec) != 0:
        sys.exit("mincore failed")
    resident = [i for i in range(n) if vec[i] & 1]
    for i in resident:
        m[i * PAGE]  # maps the cached page; no device read
    heads = tails = small = 0
    with open("/proc/self/pagemap", "rb") as pm, open("/proc/kpageflags", "rb") as kf:
        for i in resident:
            pm.seek((base // PAGE + i) * 8)
            entry = struct.unpack("<Q", pm.read(8))[0]
            if not entry >> 63:
                continue
            kf.seek((entry & ((1 << 55) - 1)) * 8)
            flags = struct.unpack("<Q", kf.read(8))[0]
            if flags >> HEAD & 1:
                heads += 1
            elif flags >> TAIL & 1:
                tails += 1
            else:
                small += 1
    print(f"{path}: {size >> 20} MiB, {len(resident)} pages cached: "
          f"{heads + tails} in large folios ({heads} folios), {small} in 4 KiB ones")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
