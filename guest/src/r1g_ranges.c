/*
 * r1g_ranges: a dynamically linked test program for `numalab run --policy round-1g`
 * (docs/live.md, "round-1g for launched programs"). It maps RANGES + 1 ranges of private
 * anonymous memory with mmap, writes every page, asks the kernel where each page is
 * (move_pages(2) with no target nodes: status only) and prints, per range
 * k = address / RANGE_BYTES that the mapping covers:
 *   range k=K pages=P node0=A node1=B other=C
 * then copies its numa_maps to standard output between "numa_maps begin/end".
 * Usage: r1g_ranges RANGE_BYTES RANGES
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "range_report.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: r1g_ranges RANGE_BYTES RANGES\n");
        return 2;
    }
    uint64_t range = strtoull(argv[1], NULL, 10), n = strtoull(argv[2], NULL, 10);
    size_t len = (size_t)((n + 1) * range), page = 4096, pages = len / page;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    memset(p, 1, len);
    void **addrs = malloc(pages * sizeof *addrs);
    int *status = malloc(pages * sizeof *status);
    for (size_t i = 0; i < pages; i++)
        addrs[i] = p + i * page;
    if (syscall(SYS_move_pages, 0, pages, addrs, NULL, status, 0) != 0) {
        perror("move_pages");
        return 1;
    }
    report_ranges(addrs, status, pages, range);
    printf("numa_maps begin\n");
    fflush(stdout);
    FILE *f = fopen("/proc/self/numa_maps", "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f))
        fputs(line, stdout);
    printf("numa_maps end\n");
    return 0;
}
