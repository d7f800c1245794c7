/*
 * r1g_malloc: a test program for round-1g by moving pages (docs/live.md, "round-1g by moving
 * pages"). It allocates BLOCKS blocks of BLOCK_BYTES with malloc — above glibc's mmap
 * threshold (128 KiB), so glibc maps them through its internal __mmap, which round-1g's
 * preload library cannot see — writes every page, prints "ready pid=P", then asks the kernel
 * every 100 ms where each page is (move_pages(2) with no target nodes: status only) until
 * every page of range k = address / RANGE_BYTES is on node k mod 2, or WAIT_S seconds passed.
 * It then prints, per range the blocks cover:
 *   range k=K pages=P node0=A node1=B other=C
 * and "placed after_ms=T" (or "not placed after_ms=T").
 * Usage: r1g_malloc RANGE_BYTES BLOCKS BLOCK_BYTES WAIT_S
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "range_report.h"

#define PAGE 4096UL

static uint64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: r1g_malloc RANGE_BYTES BLOCKS BLOCK_BYTES WAIT_S\n");
        return 2;
    }
    uint64_t range = strtoull(argv[1], NULL, 10), blocks = strtoull(argv[2], NULL, 10);
    size_t block = (size_t)strtoull(argv[3], NULL, 10);
    uint64_t wait_ms = strtoull(argv[4], NULL, 10) * 1000;
    size_t per_block = (block + PAGE - 1) / PAGE, pages = 0;
    void **addrs = malloc(blocks * (per_block + 1) * sizeof *addrs);
    for (uint64_t b = 0; b < blocks; b++) {
        char *p = malloc(block);
        if (!p) {
            perror("malloc");
            return 1;
        }
        memset(p, 1, block);
        /* The pages whose first byte lies in the block (the block starts after malloc's
         * header, not on a page boundary). */
        uintptr_t first = ((uintptr_t)p + PAGE - 1) & ~(PAGE - 1);
        for (uintptr_t a = first; a < (uintptr_t)p + block; a += PAGE)
            addrs[pages++] = (void *)a;
    }
    int *status = malloc(pages * sizeof *status);
    printf("ready pid=%d\n", (int)getpid());
    fflush(stdout);
    uint64_t start = now_ms(), elapsed;
    int placed;
    for (;;) {
        if (syscall(SYS_move_pages, 0, pages, addrs, NULL, status, 0) != 0) {
            perror("move_pages");
            return 1;
        }
        placed = 1;
        for (size_t i = 0; i < pages; i++)
            if (status[i] != (int)(((uint64_t)(uintptr_t)addrs[i] / range) % 2))
                placed = 0;
        elapsed = now_ms() - start;
        if (placed || elapsed >= wait_ms)
            break;
        usleep(100000);
    }
    report_ranges(addrs, status, pages, range);
    printf("%s after_ms=%llu\n", placed ? "placed" : "not placed", (unsigned long long)elapsed);
    return 0;
}
