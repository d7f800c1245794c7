/*
 * hot_cold: a test program for the DAMON sampler (docs/live.md, "The DAMON sampler"). It maps
 * two private anonymous areas of MIB MiB each, a hot one and a cold one, with an unmapped
 * gap of one page between them, writes every page of both once, prints
 *   hot=0xADDR cold=0xADDR bytes=B
 *   ready pid=P
 * and then, for SECONDS seconds, writes one byte of every page of the hot area again and
 * again (the cold area is never touched again), and prints "hot passes=N" at the end.
 * Usage: hot_cold MIB SECONDS
 *
 * After each pass it changes the protection of a small area of its own twice, which makes the
 * kernel flush the process's TLB entries (more than 33 pages: a full flush on x86). DAMON finds
 * a page accessed by the Accessed bit the CPU sets when it walks the page table; x86 clears
 * that bit without a TLB flush, which real CPUs tolerate because their TLBs evict entries
 * within microseconds. qemu's software TLB (TCG) keeps millions of entries, so a hot area that
 * stays in it is never walked again and DAMON sees it idle: seen in CI (stop 31), the second
 * run of this program in one guest writing 20 times faster and DAMON finding nothing.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL

static uint64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: hot_cold MIB SECONDS\n");
        return 2;
    }
    size_t bytes = (size_t)strtoull(argv[1], NULL, 10) << 20;
    uint64_t run_ms = strtoull(argv[2], NULL, 10) * 1000;
    /* One reservation, split into hot | gap page | cold, so the two areas are distinct
     * mappings at known addresses. */
    char *all = mmap(NULL, 2 * bytes + PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (all == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    if (munmap(all + bytes, PAGE) != 0) {
        perror("munmap");
        return 1;
    }
    volatile char *hot = all, *cold = all + bytes + PAGE;
    for (size_t o = 0; o < bytes; o += PAGE) {
        hot[o] = 1;
        cold[o] = 1;
    }
    /* The area whose protection changes: 64 pages, written so that each change touches
     * present page-table entries (only those make the kernel flush). */
    size_t flush_bytes = 64 * PAGE;
    char *flush = mmap(NULL, flush_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (flush == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    for (size_t o = 0; o < flush_bytes; o += PAGE)
        flush[o] = 1;
    printf("hot=%p cold=%p bytes=%zu\nready pid=%d\n", (void *)hot, (void *)cold, bytes, (int)getpid());
    fflush(stdout);
    uint64_t start = now_ms(), passes = 0;
    while (now_ms() - start < run_ms) {
        for (size_t o = 0; o < bytes; o += PAGE)
            hot[o] = (char)passes;
        passes++;
        if (mprotect(flush, flush_bytes, PROT_READ) != 0 || mprotect(flush, flush_bytes, PROT_READ | PROT_WRITE) != 0) {
            perror("mprotect");
            return 1;
        }
    }
    printf("hot passes=%llu\n", (unsigned long long)passes);
    return 0;
}
