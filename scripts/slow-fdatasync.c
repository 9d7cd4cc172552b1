/*
 * A slower disk's flush, for measurements only: an LD_PRELOAD shim that
 * lets every fdatasync(2) complete as usual and then keeps the caller
 * asleep for SLOWSYNC_US more microseconds (0 or unset: no delay). The
 * engine's binary is not changed; what it sees is a disk whose flush
 * takes longer. The sleep runs with a timer slack of 1 ns, so the kernel
 * does not stretch it by its default 50 us.
 *
 * Used by BENCHMARKS.md, "With a slower fsync", to measure `wal-scaling`
 * at the ~220 us fdatasync the brief describes on a disk that does it
 * faster. The sleep's wake adds about 40 us of its own on the VMs these
 * benchmarks run on, so 80-100 gave flushes of 190-265 us there; the
 * bench prints the flush it measured, so check it there:
 *
 *   cc -O2 -shared -fPIC -o target/slow-fdatasync.so scripts/slow-fdatasync.c -ldl
 *   SLOWSYNC_US=100 LD_PRELOAD=$PWD/target/slow-fdatasync.so \
 *       target/release/tidemark-bench wal-scaling --quick --threads 1,64
 *
 * Only fdatasync(2) is slowed, through the C library's dynamic symbol:
 * tidemark's flushes (Rust's File::sync_data) are. The bench's SQLite was
 * not (one thread's `Fsync` commits/s stayed near 5,000 under a 80 us
 * delay), so a peer's row under the shim is not a slower disk's figure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

typedef int (*fdatasync_fn)(int);

static fdatasync_fn next_fdatasync;
static long delay_ns = -1;
static __thread int slack_set;

int fdatasync(int fd)
{
    if (!next_fdatasync)
        next_fdatasync = (fdatasync_fn)dlsym(RTLD_NEXT, "fdatasync");
    if (!next_fdatasync) {
        errno = ENOSYS;
        return -1;
    }
    if (delay_ns < 0) {
        const char *us = getenv("SLOWSYNC_US");
        delay_ns = us ? atol(us) * 1000L : 0;
    }
    int r = next_fdatasync(fd);
    int saved = errno; /* the caller reads the flush's errno, not the sleep's */
    if (delay_ns > 0) {
        if (!slack_set) {
            prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
            slack_set = 1;
        }
        struct timespec ts = { delay_ns / 1000000000L, delay_ns % 1000000000L };
        clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
    }
    errno = saved;
    return r;
}
