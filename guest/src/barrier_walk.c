/*
 * barrier_walk: an OpenMP (libgomp) program shaped like the NPB-like workloads' parallel loops,
 * for watching what a real kernel does with barrier waiters (docs/results/barrier-wait-guest.md).
 * T threads (OMP_NUM_THREADS, unpinned) first-touch their own part of a buffer, then repeat:
 * walk their part (its length jittered per thread and iteration, so that threads arrive at the
 * barrier at different times), then meet at `#pragma omp barrier`. How long a waiter spins
 * before it sleeps is libgomp's (OMP_WAIT_POLICY, GOMP_SPINCOUNT). Each thread reads its CPU
 * (sched_getcpu) after every barrier, so every change of CPU between two iterations is seen,
 * and whether it crossed nodes (the CPU's node from sysfs).
 *
 *   barrier_walk [--mib M] [--iterations N] [--jitter J] [--seed S]
 *                                               (defaults 4 MiB per thread, 400, 0.3, 1)
 *   barrier_walk --noise HZ MEAN_US SECONDS [--seed S]
 *
 * The second form is background noise like the simulator's (docs/scheduler.md, "Background
 * noise"): one unpinned process per online CPU, each sleeping an exponential time of mean
 * 1/HZ s and then computing an exponential time of mean MEAN_US µs, for SECONDS (SIGTERM to the
 * first process stops them all).
 *
 * Output of the first form, two lines: "threads=T seconds=W iterations=N cpu_changes=C
 * node_changes=X migrations=M sleeps=Z checksum=K" and "iteration_ms min=… mean=… max=…". C
 * and X count the changes of CPU (and of node) seen between iterations, over all threads; M is
 * the kernel's count of the threads' migrations (se.nr_migrations in /proc/thread-self/sched,
 * which also sees moves and returns within one iteration) and Z their voluntary context
 * switches (/proc/thread-self/status: a waiter that gave up spinning and slept, mostly), both
 * from the first barrier after the first touch to the end.
 */
#define _GNU_SOURCE
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUS 256

static int node_of_cpu[MAX_CPUS];

static void read_nodes(void) {
    for (int c = 0; c < MAX_CPUS; c++) node_of_cpu[c] = -1;
    for (int n = 0; n < 64; n++) {
        char path[128], text[512] = {0};
        snprintf(path, sizeof path, "/sys/devices/system/node/node%d/cpulist", n);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(text, sizeof text, f)) text[0] = 0;
        fclose(f);
        char *p = text;
        while (*p && *p != '\n') {
            int a = (int)strtol(p, &p, 10), b = a;
            if (*p == '-') b = (int)strtol(p + 1, &p, 10);
            for (int c = a; c <= b && c < MAX_CPUS; c++) node_of_cpu[c] = n;
            if (*p == ',') p++;
            else break;
        }
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* splitmix64: a small seeded generator, so runs with the same seed walk the same lengths. */
static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static double uniform(uint64_t *state) {
    *state = mix(*state);
    return ((*state >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

/* A number from a /proc file of this thread: the first line starting with `key`, its last field. */
static long thread_stat(const char *file, const char *key) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/thread-self/%s", file);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long value = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, strlen(key))) continue;
        char *last = strrchr(line, ' ');
        char *tab = strrchr(line, '\t');
        if (tab > last) last = tab;
        value = atol(last ? last + 1 : line);
        break;
    }
    fclose(f);
    return value;
}

static void busy_for(double seconds) {
    double end = now_s() + seconds;
    volatile uint64_t sink = 0;
    while (now_s() < end)
        for (int i = 0; i < 1000; i++) sink += i;
}

static void stop_noise(int sig) {
    (void)sig;
    kill(0, SIGKILL); /* the noise's own process group: this process and its children */
}

static int noise(double hz, double mean_us, double seconds, uint64_t seed) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    /* A group of its own, so that `kill PID` (SIGTERM) stops every noise process and nothing else. */
    setpgid(0, 0);
    signal(SIGTERM, stop_noise);
    for (long c = 0; c < cpus; c++) {
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 1; }
        if (pid == 0) {
            uint64_t state = seed * 1000003 + (uint64_t)c;
            double end = now_s() + seconds;
            while (now_s() < end) {
                double nap = -log(uniform(&state)) / hz;
                struct timespec ts = { (time_t)nap, (long)((nap - (time_t)nap) * 1e9) };
                nanosleep(&ts, NULL);
                busy_for(-log(uniform(&state)) * mean_us * 1e-6);
            }
            _exit(0);
        }
    }
    while (wait(NULL) > 0) {}
    return 0;
}

int main(int argc, char **argv) {
    double mib = 4, jitter = 0.3;
    long iterations = 400;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--noise") && i + 3 < argc) {
            double hz = atof(argv[i + 1]), mean_us = atof(argv[i + 2]), seconds = atof(argv[i + 3]);
            for (int j = i + 4; j + 1 < argc; j++)
                if (!strcmp(argv[j], "--seed")) seed = strtoull(argv[j + 1], NULL, 10);
            if (hz <= 0 || mean_us <= 0 || seconds <= 0) {
                fprintf(stderr, "barrier_walk: --noise needs HZ, MEAN_US and SECONDS above 0\n");
                return 2;
            }
            return noise(hz, mean_us, seconds, seed);
        } else if (!strcmp(argv[i], "--mib") && i + 1 < argc) mib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--iterations") && i + 1 < argc) iterations = atol(argv[++i]);
        else if (!strcmp(argv[i], "--jitter") && i + 1 < argc) jitter = atof(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "barrier_walk: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (mib <= 0 || iterations <= 0 || jitter < 0 || jitter >= 1) {
        fprintf(stderr, "barrier_walk: --mib and --iterations must be above 0, --jitter in [0, 1)\n");
        return 2;
    }
    read_nodes();
    int threads = omp_get_max_threads();
    size_t words = (size_t)(mib * 1048576.0) / sizeof(uint64_t);
    uint64_t *buf = malloc(words * sizeof(uint64_t) * (size_t)threads);
    if (!buf) { perror("malloc"); return 1; }
    double *iteration_s = calloc((size_t)iterations, sizeof(double));
    if (!iteration_s) { perror("calloc"); return 1; }
    long cpu_changes = 0, node_changes = 0, migrations = 0, sleeps = 0;
    uint64_t checksum = 0;
    double start = 0, end = 0;
#pragma omp parallel reduction(+ : cpu_changes, node_changes, migrations, sleeps, checksum)
    {
        int t = omp_get_thread_num();
        uint64_t *part = buf + (size_t)t * words;
        for (size_t w = 0; w < words; w++) part[w] = w ^ (uint64_t)t; /* first touch */
        uint64_t state = mix(seed * 7919 + (uint64_t)t);
#pragma omp barrier
        long migrations_at_start = thread_stat("sched", "se.nr_migrations");
        long sleeps_at_start = thread_stat("status", "voluntary_ctxt_switches");
        int cpu = sched_getcpu(); /* after the counts: both see the same moves */
#pragma omp barrier
#pragma omp master
        start = now_s();
        for (long it = 0; it < iterations; it++) {
            double share = 1.0 - jitter * uniform(&state);
            size_t n = (size_t)(share * (double)words);
            uint64_t sum = 0;
            for (size_t w = 0; w < n; w++) sum += part[w];
            checksum += sum;
#pragma omp barrier
#pragma omp master
            {
                iteration_s[it] = now_s(); /* when the barrier let the master go */
            }
            int now = sched_getcpu();
            if (now != cpu) {
                cpu_changes++;
                if (now >= 0 && cpu >= 0 && now < MAX_CPUS && cpu < MAX_CPUS && node_of_cpu[now] != node_of_cpu[cpu])
                    node_changes++;
                cpu = now;
            }
        }
#pragma omp barrier
#pragma omp master
        end = now_s();
        migrations += thread_stat("sched", "se.nr_migrations") - migrations_at_start;
        sleeps += thread_stat("status", "voluntary_ctxt_switches") - sleeps_at_start;
    }
    double min = 1e30, max = 0, total = 0;
    for (long it = 0; it < iterations; it++) {
        double d = iteration_s[it] - (it ? iteration_s[it - 1] : start);
        if (d < min) min = d;
        if (d > max) max = d;
        total += d;
    }
    printf("threads=%d seconds=%.6f iterations=%ld cpu_changes=%ld node_changes=%ld migrations=%ld sleeps=%ld checksum=%llu\n",
           threads, end - start, iterations, cpu_changes, node_changes, migrations, sleeps,
           (unsigned long long)(checksum & 0xffff));
    printf("iteration_ms min=%.3f mean=%.3f max=%.3f\n", min * 1e3, total / iterations * 1e3, max * 1e3);
    free(iteration_s);
    free(buf);
    return 0;
}
