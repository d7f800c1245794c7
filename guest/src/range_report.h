/* Shared by the round-1g guest programs (r1g_ranges.c, r1g_malloc.c): one line per range of
 * `range` bytes that the pages `addrs` cover, with how many of them move_pages' `status` puts on
 * node 0, on node 1 and anywhere else. The guest tests of crates/cli/tests/live_guest.rs read
 * these lines. */
#include <stdint.h>
#include <stdio.h>

static void report_ranges(void **addrs, const int *status, size_t pages, uint64_t range) {
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < pages; i++) {
        uint64_t k = (uint64_t)(uintptr_t)addrs[i] / range;
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
    }
    for (uint64_t k = lo; k <= hi && pages > 0; k++) {
        uint64_t count = 0, on[2] = {0, 0}, other = 0;
        for (size_t i = 0; i < pages; i++) {
            if ((uint64_t)(uintptr_t)addrs[i] / range != k)
                continue;
            count++;
            if (status[i] == 0 || status[i] == 1)
                on[status[i]]++;
            else
                other++;
        }
        if (count > 0)
            printf("range k=%llu pages=%llu node0=%llu node1=%llu other=%llu\n", (unsigned long long)k,
                   (unsigned long long)count, (unsigned long long)on[0], (unsigned long long)on[1],
                   (unsigned long long)other);
    }
}
