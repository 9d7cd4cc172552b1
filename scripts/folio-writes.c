/*
 * folio-writes: how the page cache's folio size changes the cost of the
 * block writes tidemark makes, without the engine.
 *
 * Prepares a file of SIZE_MIB MiB in one of two ways, then has two threads
 * write 12 KiB at random 16 KiB-aligned offsets for SECS seconds, printing
 * each second: writes, mean pwrite time (us), and the kernel's Dirty MB.
 *
 *   mode A: fallocate, then posix_fadvise(WILLNEED) per 16 KiB block
 *           (tidemark's data file preparation until 2026-11-25: 4 KiB folios)
 *   mode B: fallocate, then one 16 KiB write of zeros per block
 *           (one 16 KiB folio per block; tried in the engine, not kept)
 *   mode R: fallocate, then 16 KiB reads through the file in order
 *           (readahead ramps up: folios much larger than a block)
 *
 * Build and run (the file is created in the current directory):
 *   cc -O2 -o folio-writes scripts/folio-writes.c -lpthread
 *   ./folio-writes A 1536 100 > a.txt; sync; ./folio-writes B 1536 100 > b.txt
 *
 * With 4 KiB folios a 12 KiB write leaves 3/4 of the file dirty (Dirty
 * settles near 0.75 x SIZE); with 16 KiB folios the whole file is.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 16384
#define WRITE 12288

static int fd;
static long nblocks;
static atomic_long writes, nanos;
static atomic_int stop;

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void *writer(void *arg) {
    unsigned long s = (unsigned long)arg * 7919 + 1;
    char *buf = aligned_alloc(4096, BLOCK);
    memset(buf, 1, BLOCK);
    while (!atomic_load(&stop)) {
        s = s * 6364136223846793005UL + 1442695040888963407UL;
        long b = (long)((s >> 20) % (unsigned long)nblocks);
        long t0 = now_ns();
        if (pwrite(fd, buf, WRITE, b * BLOCK) != WRITE) {
            perror("pwrite");
            exit(1);
        }
        atomic_fetch_add(&nanos, now_ns() - t0);
        atomic_fetch_add(&writes, 1);
    }
    return NULL;
}

static long dirty_mb(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "Dirty:", 6)) sscanf(line + 6, "%ld", &kb);
    if (f) fclose(f);
    return kb / 1024;
}

int main(int argc, char **argv) {
    if (argc != 4 || !strchr("ABR", argv[1][0])) {
        fprintf(stderr, "usage: %s A|B|R SIZE_MIB SECS\n", argv[0]);
        return 2;
    }
    char mode = argv[1][0];
    long size = atol(argv[2]) << 20;
    int secs = atoi(argv[3]);
    nblocks = size / BLOCK;
    unlink("folio-writes.data");
    fd = open("folio-writes.data", O_RDWR | O_CREAT, 0644);
    if (fd < 0 || fallocate(fd, 0, 0, size) != 0) {
        perror("folio-writes.data");
        return 1;
    }
    char *zeros = calloc(1, BLOCK);
    for (long off = 0; off < size; off += BLOCK) {
        if (mode == 'A')
            posix_fadvise(fd, off, BLOCK, POSIX_FADV_WILLNEED);
        else if (mode == 'R' && pread(fd, zeros, BLOCK, off) != BLOCK) {
            perror("pread");
            return 1;
        } else if (mode == 'B' && pwrite(fd, zeros, BLOCK, off) != BLOCK) {
            perror("pwrite");
            return 1;
        }
    }
    fdatasync(fd);
    pthread_t th[2];
    for (long i = 0; i < 2; i++) pthread_create(&th[i], NULL, writer, (void *)i);
    long last_w = 0, last_n = 0;
    for (int s = 0; s < secs; s++) {
        sleep(1);
        long w = atomic_load(&writes), n = atomic_load(&nanos);
        printf("%d %ld writes/s %.2f us dirty %ld MB\n", s, w - last_w,
               (n - last_n) / 1000.0 / (double)(w - last_w + 1), dirty_mb());
        fflush(stdout);
        last_w = w;
        last_n = n;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    unlink("folio-writes.data");
    return 0;
}
