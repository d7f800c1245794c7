/*
 * master_workers: the master thread first-touches all of a buffer on node 0; then one worker
 * pinned on node 0 and one pinned on node 1 write their half of it, page by page, for a while;
 * at the end the program reports where each half's pages are (move_pages(2) status). The test
 * program of docs/live.md "Tests of the dynamic half" and docs/results/live-vs-kernel.md: a
 * dynamic policy should move half 1 next to its worker. Dynamically linked on purpose (the
 * hinting-fault library is preloaded into it).
 *
 *   master_workers [--mib M] [--seconds S]      (defaults 8 MiB, 6 s)
 *
 * Output: "ready pid=P", then "half=H pages=N node0=A node1=B other=C" for H = 0, 1 and
 * "passes=P0,P1" (the workers' passes over their halves).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL

static char *buf;
static size_t pages;
static double seconds = 6;
static long passes[2];

/* The first CPU (after skipping `skip`) of a node, from sysfs cpulist ("0-1" or "2,3"). */
static int node_cpu(int node, int skip) {
    char path[128], text[256] = {0};
    snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", node);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(text, sizeof text, f)) { fprintf(stderr, "master_workers: cannot read %s\n", path); exit(2); }
    fclose(f);
    int cpus[64], n = 0;
    for (char *p = text; *p && n < 64;) {
        int a = (int)strtol(p, &p, 10), b = a;
        if (*p == '-') b = (int)strtol(p + 1, &p, 10);
        for (int c = a; c <= b && n < 64; c++) cpus[n++] = c;
        if (*p == ',') p++; else break;
    }
    if (n == 0) { fprintf(stderr, "master_workers: node %d has no CPUs\n", node); exit(2); }
    return cpus[skip < n ? skip : n - 1];
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (sched_setaffinity(0, sizeof s, &s) != 0) { perror("master_workers: sched_setaffinity"); exit(2); }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct worker { int half, cpu; };

static void *work(void *arg) {
    struct worker *w = arg;
    pin(w->cpu);
    size_t lo = w->half * (pages / 2), hi = lo + pages / 2;
    double end = now() + seconds;
    while (now() < end) {
        for (size_t p = lo; p < hi; p++) buf[p * PAGE + (size_t)passes[w->half] % PAGE] += 1;
        passes[w->half]++;
    }
    return NULL;
}

int main(int argc, char **argv) {
    size_t mib = 8;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mib")) mib = strtoul(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--seconds")) seconds = strtod(argv[i + 1], NULL);
        else { fprintf(stderr, "usage: master_workers [--mib M] [--seconds S]\n"); return 2; }
    }
    pages = mib * (1 << 20) / PAGE;
    pin(node_cpu(0, 0));
    buf = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) { perror("master_workers: mmap"); return 2; }
    /* Base pages: a transparent huge page would move whole, both halves' users at once. */
    madvise(buf, pages * PAGE, MADV_NOHUGEPAGE);
    memset(buf, 1, pages * PAGE);
    printf("ready pid=%d\n", (int)getpid());
    fflush(stdout);
    struct worker w[2] = {{0, node_cpu(0, 1)}, {1, node_cpu(1, 0)}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, work, &w[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    void **addrs = malloc(pages * sizeof *addrs);
    int *status = malloc(pages * sizeof *status);
    for (size_t p = 0; p < pages; p++) addrs[p] = buf + p * PAGE;
    if (syscall(SYS_move_pages, 0, pages, addrs, NULL, status, 0) != 0) { perror("master_workers: move_pages"); return 2; }
    for (int h = 0; h < 2; h++) {
        size_t n[3] = {0, 0, 0};
        for (size_t p = h * (pages / 2); p < (h + 1) * (pages / 2); p++) n[status[p] == 0 ? 0 : status[p] == 1 ? 1 : 2]++;
        printf("half=%d pages=%zu node0=%zu node1=%zu other=%zu\n", h, pages / 2, n[0], n[1], n[2]);
    }
    printf("passes=%ld,%ld\n", passes[0], passes[1]);
    return 0;
}
