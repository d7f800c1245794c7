/*
 * master_workers: the master thread first-touches all of a buffer on node 0; then one worker
 * pinned on each of nodes 0..K-1 (K = --nodes, 2 by default) writes its K-th of it ("half" H
 * for node H), page by page, for a while;
 * at the end the program reports where each half's pages are (move_pages(2) status). The test
 * program of docs/live.md "Tests of the dynamic half" and docs/results/live-vs-kernel.md: a
 * dynamic policy should move half 1 next to its worker. Dynamically linked on purpose (the
 * hinting-fault library is preloaded into it).
 *
 *   master_workers [--mib M] [--seconds S] [--nodes K]     (defaults 8 MiB, 6 s, 2 nodes)
 *
 * Output: "ready pid=P", then "half=H pages=N node0=A node1=B node2=C node3=D other=E" for
 * H = 0..K-1, "passes=P0,P1,..." (the workers' passes over their parts) and "asked_again=N"
 * (pages whose status read as an error and were touched and asked again; see below).
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
#define MAX_PARTS 4
static int parts = 2;
static long passes[MAX_PARTS];

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
    size_t lo = w->half * (pages / parts), hi = lo + pages / parts;
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
        else if (!strcmp(argv[i], "--nodes")) parts = (int)strtol(argv[i + 1], NULL, 10);
        else { fprintf(stderr, "usage: master_workers [--mib M] [--seconds S] [--nodes K]\n"); return 2; }
    }
    if (parts < 1 || parts > MAX_PARTS) { fprintf(stderr, "master_workers: --nodes must be 1..%d\n", MAX_PARTS); return 2; }
    pages = mib * (1 << 20) / PAGE;
    pin(node_cpu(0, 0));
    buf = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) { perror("master_workers: mmap"); return 2; }
    /* Base pages: a transparent huge page would move whole, both halves' users at once. */
    madvise(buf, pages * PAGE, MADV_NOHUGEPAGE);
    memset(buf, 1, pages * PAGE);
    printf("ready pid=%d\n", (int)getpid());
    fflush(stdout);
    /* The master has node 0's first CPU: node 0's worker takes its second. */
    struct worker w[MAX_PARTS];
    for (int i = 0; i < parts; i++) w[i] = (struct worker){i, node_cpu(i, i == 0 ? 1 : 0)};
    pthread_t t[MAX_PARTS];
    for (int i = 0; i < parts; i++) pthread_create(&t[i], NULL, work, &w[i]);
    for (int i = 0; i < parts; i++) pthread_join(t[i], NULL);
    void **addrs = malloc(pages * sizeof *addrs);
    int *status = malloc(pages * sizeof *status);
    for (size_t p = 0; p < pages; p++) addrs[p] = buf + p * PAGE;
    /* A page the hinting-fault library still protects (docs/live.md, "The hinting-fault
     * sampler") reads as an error in a raw move_pages(2), which the library cannot wrap. The
     * master reads such a page (its fault makes the library restore it) and asks again, at
     * most three times; "asked_again" counts those pages. */
    size_t asked_again = 0;
    for (int round = 0;; round++) {
        if (syscall(SYS_move_pages, 0, pages, addrs, NULL, status, 0) != 0) { perror("master_workers: move_pages"); return 2; }
        size_t errors = 0;
        for (size_t p = 0; p < pages; p++)
            if (status[p] < 0) { (void)*(volatile char *)addrs[p]; errors++; }
        if (errors == 0 || round == 3) break;
        asked_again += errors;
    }
    for (int h = 0; h < parts; h++) {
        size_t n[5] = {0, 0, 0, 0, 0};
        for (size_t p = h * (pages / parts); p < (h + 1) * (pages / parts); p++) n[status[p] >= 0 && status[p] < 4 ? status[p] : 4]++;
        printf("half=%d pages=%zu node0=%zu node1=%zu node2=%zu node3=%zu other=%zu\n", h, pages / parts, n[0], n[1], n[2], n[3], n[4]);
    }
    printf("passes=");
    for (int h = 0; h < parts; h++) printf(h ? ",%ld" : "%ld", passes[h]);
    printf("\nasked_again=%zu\n", asked_again);
    return 0;
}
