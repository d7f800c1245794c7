/*
 * numalab's user-space hinting-fault library (docs/live.md, "The hinting-fault sampler").
 *
 * Preloaded by `numalab run --sampler hinting-faults` into the program it launches. A helper
 * thread protects a bounded, rotating set of the program's private anonymous pages with
 * mprotect(PROT_NONE) every period; the first access of a program thread to one of them
 * raises SIGSEGV, whose handler records (thread id, CPU, page, read/write, time) into a ring
 * shared with the agent and restores access, as the kernel's NUMA scanner does with its own
 * protection. The hazards (docs/live.md lists them) and what this file does about each:
 *  - a system call reading or writing a protected page fails with EFAULT, no signal: the
 *    buffer-taking libc calls are wrapped, restore the pages of their buffers first, and hold
 *    the rotation off while they run;
 *  - the program's own SIGSEGV handler: sigaction() and signal() are wrapped so the program's
 *    handler is kept aside and called for every fault that is not ours;
 *  - each protected page splits its mapping in three: the set is bounded, and shrinks to stay
 *    clear of vm.max_map_count;
 *  - the program's own mprotect/munmap/mremap: pages of the range leave the set first.
 * Which pages: by default a rotating stride over the eligible mappings; once the agent
 * publishes a set (the pages its policy's scan marked, in the request area after the header),
 * exactly those of them that are eligible, protected in runs of adjacent pages, and kept
 * protected until they fault or the agent publishes the next set.
 * The ring layout is the agent's (crates/linux/src/live/hint_sampler.rs); both sides say so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define PAGE 4096UL
#define MAGIC 0x3130544e49484c4eULL /* "NLHINT01" */
#define MAX_SLOTS 4096
#define ST_PROTECTED 1UL
#define ST_RESTORING 2UL
#define ST_RELEASED 4UL /* restored by the library: a fault that raced the restore retries */

/* Header words (u64 index). */
enum {
    H_MAGIC = 0, H_CAPACITY, H_RESERVE, H_TAIL, H_DROPPED, H_PROTECT_ROUNDS, H_PAGES_PROTECTED,
    H_RESTORED_UNTOUCHED, H_MAP_LIMIT, H_SYSCALL_SAVES, H_CHAINED, H_STATUS, H_SKIPPED_INFLIGHT,
    H_HELPER_TID, H_FAULTS, H_ARMED_PAGES, H_ARM_REJECTED, H_ARM_SEEN, H_MPROTECT_RUNS,
    H_EXCL_LEN,
    /* written by the agent */
    H_PERIOD_NS = 64, H_MAX_PAGES, H_MIN_MAPPING_BYTES, H_ARM_GEN, H_ARM_LEN,
};
#define HEADER_BYTES 4096
/* The agent's request area (H_ARM_LEN page addresses, ascending) follows the header; the
 * record ring follows it. The agent writes a new set only once H_ARM_SEEN == H_ARM_GEN. */
#define REQUEST_BYTES (MAX_SLOTS * 8)
/* The excluded ranges (below), published for the agent after the request area: H_EXCL_LEN
 * pairs (lo, hi) of u64, each written before the count that covers it (release), never
 * changed after. The record ring follows. */
#define MAX_EXCL 1024
#define EXCL_BYTES (MAX_EXCL * 16)
#define REASON_OFF 1024 /* status 2: a NUL-terminated reason */

struct rec { uint64_t seq, addr, time_ns; uint32_t tid; uint16_t cpu; uint16_t write; };

static volatile uint64_t *hdr;
static struct rec *ring;
static uint64_t capacity;
static uint64_t *request;
static uint64_t wanted[MAX_SLOTS];
static int nwanted, wanted_pending;
/* Two sets, alternating by period: the current one (protected pages) and the previous one
 * (released pages, kept for a period so that a thread whose fault raced the restore finds its
 * page and retries instead of being taken for a fault of the program's own). Each entry is
 * page address | state; 0 = free. */
static uint64_t slots[2][MAX_SLOTS];
static int nslots[2];
static int cur;
static int active;
static int inflight, protecting;
static struct sigaction prog_segv; /* the program's own SIGSEGV disposition */
static char mapsbuf[1 << 20];

/* Address ranges never protected: every thread stack (with its guard) the program creates
 * through pthread_create and the library's own helper's, and the library's own data. A
 * thread stack cannot be told from a data mapping in /proc/self/maps (the kernel merges a
 * stack with an adjacent anonymous mapping), so the library records them as they are made. */
static struct { uint64_t lo, hi; } excl[MAX_EXCL];
static volatile uint64_t *excl_shared;
static int nexcl, excl_full, excl_lock;
static int (*real_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static void exclude(uint64_t lo, uint64_t hi) {
    while (__atomic_exchange_n(&excl_lock, 1, __ATOMIC_ACQUIRE)) sched_yield();
    if (nexcl < MAX_EXCL) {
        excl[nexcl].lo = lo & ~(PAGE - 1);
        excl[nexcl].hi = hi;
        /* The agent leaves these pages out of its sets (docs/live.md, "The agent chooses the
         * protected pages"). */
        if (excl_shared) {
            excl_shared[2 * nexcl] = excl[nexcl].lo;
            excl_shared[2 * nexcl + 1] = hi;
            __atomic_store_n(&hdr[H_EXCL_LEN], (uint64_t)nexcl + 1, __ATOMIC_RELEASE);
        }
        __atomic_store_n(&nexcl, nexcl + 1, __ATOMIC_RELEASE);
    } else excl_full = 1;
    __atomic_store_n(&excl_lock, 0, __ATOMIC_RELEASE);
}

static int excluded(uint64_t page) {
    int n = __atomic_load_n(&nexcl, __ATOMIC_ACQUIRE);
    for (int i = 0; i < n; i++) if (page + PAGE > excl[i].lo && page < excl[i].hi) return 1;
    return 0;
}

/* The stack of a thread just created, guard included, joins the excluded ranges. */
static void exclude_stack(pthread_t t) {
    pthread_attr_t a;
    void *addr;
    size_t size, guard = 0;
    if (pthread_getattr_np(t, &a) != 0) { excl_full = 1; return; }
    if (pthread_attr_getstack(&a, &addr, &size) == 0) {
        pthread_attr_getguardsize(&a, &guard);
        exclude((uint64_t)addr - guard, (uint64_t)addr + size);
    } else excl_full = 1;
    pthread_attr_destroy(&a);
}

static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
static int (*real_mprotect)(void *, size_t, int);
static int (*real_munmap)(void *, size_t);
static void *(*real_mremap)(void *, size_t, size_t, int, ...);
static ssize_t (*real_read)(int, void *, size_t);
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pread)(int, void *, size_t, off_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_readv)(int, const struct iovec *, int);
static ssize_t (*real_writev)(int, const struct iovec *, int);
static ssize_t (*real_recv)(int, void *, size_t, int);
static ssize_t (*real_send)(int, const void *, size_t, int);
static ssize_t (*real_recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
static ssize_t (*real_sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void bump(int word, uint64_t n) { if (hdr) __atomic_fetch_add(&hdr[word], n, __ATOMIC_RELAXED); }

/* Give a slot's page its access back (PROTECTED -> RESTORING -> RELEASED). */
static int release_slot(uint64_t *slot, int do_mprotect) {
    uint64_t v = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if ((v & ST_PROTECTED) == 0) return 0;
    uint64_t page = v & ~(PAGE - 1);
    if (!__atomic_compare_exchange_n(slot, &v, page | ST_RESTORING, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return 0;
    if (do_mprotect) real_mprotect((void *)page, PAGE, PROT_READ | PROT_WRITE);
    __atomic_store_n(slot, page | ST_RELEASED, __ATOMIC_RELEASE);
    return 1;
}

/* The program changes [addr, addr+len) itself (or hands it to the kernel): its pages leave
 * both sets (restored first when `do_mprotect`), released ones forgotten, so that a later
 * fault of the program's own there is the program's. */
static int release_range(const void *addr, size_t len, int do_mprotect) {
    uint64_t lo = (uint64_t)addr & ~(PAGE - 1), hi = (uint64_t)addr + len;
    int n = 0;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < nslots[s]; i++) {
            uint64_t p = __atomic_load_n(&slots[s][i], __ATOMIC_ACQUIRE) & ~(PAGE - 1);
            if (!p || p < lo || p >= hi) continue;
            n += release_slot(&slots[s][i], do_mprotect);
            uint64_t v = __atomic_load_n(&slots[s][i], __ATOMIC_ACQUIRE);
            if (v & ST_RELEASED) __atomic_compare_exchange_n(&slots[s][i], &v, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        }
    return n;
}

/* A wrapped call is about to hand [addr, addr+len) to the kernel: hold the rotation off and
 * restore the pages of the buffer (Dekker: either the helper sees `inflight` and skips its
 * protect phase, or we see `protecting` and wait for it to end). */
static void enter(const void *addr, size_t len) {
    if (!active) return;
    __atomic_fetch_add(&inflight, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&protecting, __ATOMIC_SEQ_CST)) sched_yield();
    if (addr && len) {
        int n = release_range(addr, len, 1);
        if (n) bump(H_SYSCALL_SAVES, (uint64_t)n);
    }
}
static void leave(void) { if (active) __atomic_fetch_sub(&inflight, 1, __ATOMIC_SEQ_CST); }

static void record(uint64_t addr, int write) {
    uint64_t r, t;
    do {
        r = __atomic_load_n(&hdr[H_RESERVE], __ATOMIC_ACQUIRE);
        t = __atomic_load_n(&hdr[H_TAIL], __ATOMIC_ACQUIRE);
        if (r - t >= capacity) { bump(H_DROPPED, 1); return; }
    } while (!__atomic_compare_exchange_n(&hdr[H_RESERVE], &r, r + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
    struct rec *e = &ring[r & (capacity - 1)];
    e->addr = addr;
    e->time_ns = now_ns();
    e->tid = (uint32_t)syscall(SYS_gettid);
    int cpu = sched_getcpu();
    e->cpu = cpu < 0 ? 0xffff : (uint16_t)cpu;
    e->write = (uint16_t)write;
    __atomic_store_n(&e->seq, r + 1, __ATOMIC_RELEASE);
}

static void on_segv(int sig, siginfo_t *si, void *uc) {
    int saved = errno;
    uint64_t page = (uint64_t)si->si_addr & ~(PAGE - 1);
    if (active && si->si_code == SEGV_ACCERR) {
        /* A page can be in both sets (released in the previous one, protected again in the
         * current one: the agent hands the same marked page in consecutive sets), so the
         * protected slot is looked for first; a released or restoring one only means retry. */
        int known = 0;
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < nslots[s]; i++) {
                uint64_t v = __atomic_load_n(&slots[s][i], __ATOMIC_ACQUIRE);
                if (v == 0 || (v & ~(PAGE - 1)) != page) continue;
                known = 1;
                if ((v & ST_PROTECTED) == 0) continue;
                if (release_slot(&slots[s][i], 1)) {
                    int write = 0;
#if defined(__x86_64__)
                    write = (((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#endif
                    record(page, write);
                    bump(H_FAULTS, 1);
                }
                errno = saved;
                return;
            }
        /* Restored (by us, or by another thread or the helper meanwhile): retry. */
        if (known) { errno = saved; return; }
    }
    /* Not ours: the program's own disposition. */
    bump(H_CHAINED, 1);
    errno = saved;
    if (prog_segv.sa_flags & SA_SIGINFO) {
        if (prog_segv.sa_sigaction) { prog_segv.sa_sigaction(sig, si, uc); return; }
    } else if (prog_segv.sa_handler != SIG_DFL && prog_segv.sa_handler != SIG_IGN) {
        prog_segv.sa_handler(sig);
        return;
    }
    /* Default: take the default action on the retried access. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    real_sigaction(SIGSEGV, &dfl, NULL);
}

/* ---- the rotation ---- */

static long max_map_count(void) {
    int fd = open("/proc/sys/vm/max_map_count", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 65530;
    char b[32] = {0};
    ssize_t n = real_read(fd, b, sizeof b - 1);
    close(fd);
    return n > 0 ? strtol(b, NULL, 10) : 65530;
}

static size_t read_maps(void) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    size_t len = 0;
    ssize_t n;
    while (len < sizeof mapsbuf - 1 && (n = real_read(fd, mapsbuf + len, sizeof mapsbuf - 1 - len)) > 0) len += (size_t)n;
    close(fd);
    mapsbuf[len] = 0;
    return len;
}

struct range { uint64_t lo, hi; };
static struct range elig[4096];

/* Eligible mappings: private anonymous read-write (no file, or [heap]), at least
 * H_MIN_MAPPING_BYTES, not [stack], and not holding this library's own data; pages of the
 * excluded ranges (thread stacks) are skipped when chosen. */
static int eligible(long *nmaps) {
    int n = 0;
    uint64_t min_bytes = hdr[H_MIN_MAPPING_BYTES];
    uint64_t own = (uint64_t)(uintptr_t)slots;
    *nmaps = 0;
    for (char *line = mapsbuf; *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = 0;
        (*nmaps)++;
        unsigned long lo, hi, off, ino;
        char perms[8] = {0}, dev[16] = {0};
        int pos = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %15s %lu %n", &lo, &hi, perms, &off, dev, &ino, &pos) >= 6) {
            const char *path = line + pos;
            while (*path == ' ') path++;
            int anon = ino == 0 && (*path == 0 || strcmp(path, "[heap]") == 0);
            if (anon && strcmp(perms, "rw-p") == 0 && hi - lo >= min_bytes && !(own >= lo && own < hi) &&
                n < (int)(sizeof elig / sizeof elig[0]))
                elig[n++] = (struct range){lo, hi};
        }
        if (!end) break;
        line = end + 1;
    }
    return n;
}

/* Protect [lo, lo + n pages) with one mprotect: the run's slots first (as the per-page
 * path does), cleared again if the call fails. Returns 0, or the errno. */
static int protect_run(uint64_t lo, int n) {
    int j0 = nslots[cur];
    for (int i = 0; i < n; i++) __atomic_store_n(&slots[cur][j0 + i], (lo + (uint64_t)i * PAGE) | ST_PROTECTED, __ATOMIC_RELEASE);
    __atomic_store_n(&nslots[cur], j0 + n, __ATOMIC_RELEASE);
    if (real_mprotect((void *)lo, (size_t)n * PAGE, PROT_NONE) != 0) {
        int e = errno;
        for (int i = 0; i < n; i++) __atomic_store_n(&slots[cur][j0 + i], 0, __ATOMIC_RELEASE);
        __atomic_store_n(&nslots[cur], j0, __ATOMIC_RELEASE);
        return e;
    }
    bump(H_PAGES_PROTECTED, (uint64_t)n);
    bump(H_ARMED_PAGES, (uint64_t)n);
    bump(H_MPROTECT_RUNS, 1);
    return 0;
}

static int in_eligible(uint64_t page, int n) {
    for (int i = 0; i < n; i++) if (page >= elig[i].lo && page + PAGE <= elig[i].hi) return 1;
    return 0;
}

/* The agent's set: the requested pages that are eligible and not excluded, at most k, in
 * runs of adjacent pages (one mprotect per run). */
static void protect_wanted(int len, int n, uint64_t k) {
    uint64_t done = 0, run_lo = 0;
    int run_n = 0, rejected = 0;
    for (int i = 0; i <= len && done + (uint64_t)run_n <= k; i++) {
        uint64_t page = i < len ? wanted[i] & ~(PAGE - 1) : 0;
        int ok = i < len && in_eligible(page, n) && !excluded(page);
        if (i < len && !ok) rejected++;
        if (ok && run_n > 0 && page == run_lo + (uint64_t)run_n * PAGE && done + (uint64_t)run_n < k) { run_n++; continue; }
        if (run_n > 0) {
            int e = protect_run(run_lo, run_n);
            if (e == ENOMEM) { bump(H_MAP_LIMIT, 1); break; }
            if (e == 0) done += (uint64_t)run_n;
            run_n = 0;
        }
        if (ok && done < k) { run_lo = page; run_n = 1; }
    }
    if (rejected) bump(H_ARM_REJECTED, (uint64_t)rejected);
}

static void rotate(uint64_t round) {
    /* Agent mode: nothing changes until the agent publishes its next set. */
    uint64_t gen = __atomic_load_n(&hdr[H_ARM_GEN], __ATOMIC_ACQUIRE);
    if (gen != 0) {
        if (gen != __atomic_load_n(&hdr[H_ARM_SEEN], __ATOMIC_ACQUIRE)) {
            uint64_t l = __atomic_load_n(&hdr[H_ARM_LEN], __ATOMIC_ACQUIRE);
            nwanted = l > MAX_SLOTS ? MAX_SLOTS : (int)l;
            for (int i = 0; i < nwanted; i++) wanted[i] = request[i];
            /* Copied: the agent may write its next set. */
            __atomic_store_n(&hdr[H_ARM_SEEN], gen, __ATOMIC_RELEASE);
            wanted_pending = 1;
        }
        if (!wanted_pending) return;
    }
    int untouched = 0;
    for (int i = 0; i < nslots[cur]; i++) untouched += release_slot(&slots[cur][i], 1);
    if (untouched) bump(H_RESTORED_UNTOUCHED, (uint64_t)untouched);
    /* The other set was released a period ago: it is refilled. */
    int next = 1 - cur;
    __atomic_store_n(&nslots[next], 0, __ATOMIC_RELEASE);
    for (int i = 0; i < MAX_SLOTS; i++) __atomic_store_n(&slots[next][i], 0, __ATOMIC_RELAXED);
    cur = next;
    if (!read_maps()) return;
    long nmaps;
    int n = eligible(&nmaps);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) total += (elig[i].hi - elig[i].lo) / PAGE;
    /* Every protected page may split a mapping in three: keep 2k + a margin of 1000 under
     * the limit (and under half of it). */
    long room = (max_map_count() / 2 - nmaps - 1000) / 2;
    uint64_t k = hdr[H_MAX_PAGES];
    if (k > MAX_SLOTS) k = MAX_SLOTS;
    if (room < (long)k) { bump(H_MAP_LIMIT, 1); k = room > 0 ? (uint64_t)room : 0; }
    if (k > total) k = total;
    if (k == 0 || excl_full) return; /* a thread stack it could not record: protect nothing */
    if (gen != 0) {
        __atomic_store_n(&protecting, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&inflight, __ATOMIC_SEQ_CST) != 0) {
            /* Still pending: protected at the next period. */
            __atomic_store_n(&protecting, 0, __ATOMIC_SEQ_CST);
            bump(H_SKIPPED_INFLIGHT, 1);
            return;
        }
        protect_wanted(nwanted, n, k);
        wanted_pending = 0;
        __atomic_store_n(&protecting, 0, __ATOMIC_SEQ_CST);
        bump(H_PROTECT_ROUNDS, 1);
        return;
    }
    uint64_t stride = total / k, start = round % stride;
    __atomic_store_n(&protecting, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&inflight, __ATOMIC_SEQ_CST) != 0) {
        __atomic_store_n(&protecting, 0, __ATOMIC_SEQ_CST);
        bump(H_SKIPPED_INFLIGHT, 1);
        return;
    }
    int r = 0;
    uint64_t base = 0;
    for (uint64_t j = 0; j < k; j++) {
        uint64_t idx = start + j * stride;
        while (r < n && idx - base >= (elig[r].hi - elig[r].lo) / PAGE) { base += (elig[r].hi - elig[r].lo) / PAGE; r++; }
        if (r >= n) break;
        uint64_t page = elig[r].lo + (idx - base) * PAGE;
        if (excluded(page)) continue;
        int j2 = nslots[cur];
        __atomic_store_n(&slots[cur][j2], page | ST_PROTECTED, __ATOMIC_RELEASE);
        __atomic_store_n(&nslots[cur], j2 + 1, __ATOMIC_RELEASE);
        if (real_mprotect((void *)page, PAGE, PROT_NONE) != 0) {
            int e = errno;
            __atomic_store_n(&slots[cur][j2], 0, __ATOMIC_RELEASE);
            __atomic_store_n(&nslots[cur], j2, __ATOMIC_RELEASE);
            if (e == ENOMEM) { bump(H_MAP_LIMIT, 1); break; }
            continue;
        }
        bump(H_PAGES_PROTECTED, 1);
    }
    __atomic_store_n(&protecting, 0, __ATOMIC_SEQ_CST);
    bump(H_PROTECT_ROUNDS, 1);
}

static void *helper(void *arg) {
    (void)arg;
    hdr[H_HELPER_TID] = (uint64_t)syscall(SYS_gettid);
    uint64_t period = hdr[H_PERIOD_NS];
    for (uint64_t round = 0;; round++) {
        struct timespec ts = {(time_t)(period / 1000000000ULL), (long)(period % 1000000000ULL)};
        nanosleep(&ts, NULL);
        rotate(round);
    }
    return NULL;
}

static void refuse(const char *why) {
    strncpy((char *)hdr + REASON_OFF, why, 255);
    __atomic_store_n(&hdr[H_STATUS], 2, __ATOMIC_RELEASE);
}

__attribute__((constructor)) static void numalab_hint_init(void) {
#define REAL(f) real_##f = dlsym(RTLD_NEXT, #f)
    REAL(sigaction); REAL(mprotect); REAL(munmap); REAL(read); REAL(write); REAL(pread); REAL(pwrite);
    REAL(readv); REAL(writev); REAL(recv); REAL(send); REAL(recvfrom); REAL(sendto);
    real_mremap = (void *(*)(void *, size_t, size_t, int, ...))dlsym(RTLD_NEXT, "mremap");
    const char *fd_s = getenv("NUMALAB_HINT_FD"), *ppid_s = getenv("NUMALAB_HINT_PPID");
    /* Only the program numalab launched (whatever image it execs: a wrapper script that execs
     * the real program keeps the parent, the environment and the fds), never the processes it
     * starts itself: their parent is the program. */
    if (!fd_s || !ppid_s || strtol(ppid_s, NULL, 10) != (long)getppid()) return;
    int fd = (int)strtol(fd_s, NULL, 10);
    void *m = mmap(NULL, HEADER_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return;
    hdr = m;
    if (hdr[H_MAGIC] != MAGIC) { munmap(m, HEADER_BYTES); hdr = NULL; return; }
    capacity = hdr[H_CAPACITY];
    munmap(m, HEADER_BYTES);
    m = mmap(NULL, HEADER_BYTES + REQUEST_BYTES + EXCL_BYTES + capacity * sizeof(struct rec), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) { hdr = NULL; return; }
    hdr = m;
    request = (uint64_t *)((char *)m + HEADER_BYTES);
    excl_shared = (uint64_t *)((char *)m + HEADER_BYTES + REQUEST_BYTES);
    ring = (struct rec *)((char *)m + HEADER_BYTES + REQUEST_BYTES + EXCL_BYTES);
    if (!real_sigaction || !real_mprotect || !real_read) { refuse("the C library does not export sigaction/mprotect/read to dlsym"); return; }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (real_sigaction(SIGSEGV, &sa, &prog_segv) != 0) { refuse("sigaction(SIGSEGV) failed"); return; }
    /* The helper runs with every signal blocked: the program's signals go to its threads. */
    sigset_t all, prev;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &prev);
    pthread_t t;
    real_pthread_create = dlsym(RTLD_NEXT, "pthread_create");
    if (!real_pthread_create) real_pthread_create = pthread_create;
    /* The library's own data: the pages of its variables. */
    const void *own[] = {slots, &slots[1][MAX_SLOTS - 1], mapsbuf, mapsbuf + sizeof mapsbuf, elig, excl, &hdr, &inflight, &prog_segv};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) exclude((uint64_t)own[i], (uint64_t)own[i] + PAGE);
    exclude((uint64_t)slots, (uint64_t)slots + sizeof slots);
    exclude((uint64_t)mapsbuf, (uint64_t)(mapsbuf + sizeof mapsbuf));
    active = 1;
    int e = real_pthread_create(&t, NULL, helper, NULL);
    pthread_sigmask(SIG_SETMASK, &prev, NULL);
    if (e != 0) { active = 0; refuse("pthread_create failed"); return; }
    exclude_stack(t);
    pthread_detach(t);
    __atomic_store_n(&hdr[H_STATUS], 1, __ATOMIC_RELEASE);
}

/* ---- the program's SIGSEGV disposition stays the program's ---- */

int sigaction(int sig, const struct sigaction *act, struct sigaction *oldact) {
    if (!real_sigaction) real_sigaction = dlsym(RTLD_NEXT, "sigaction");
    if (sig != SIGSEGV || !active) return real_sigaction(sig, act, oldact);
    if (oldact) *oldact = prog_segv;
    if (act) prog_segv = *act;
    return 0;
}

sighandler_t signal(int sig, sighandler_t handler) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, &old) != 0) return SIG_ERR;
    return old.sa_handler;
}

/* ---- the program's own protection changes take precedence ---- */

int mprotect(void *addr, size_t len, int prot) {
    if (!real_mprotect) real_mprotect = dlsym(RTLD_NEXT, "mprotect");
    enter(NULL, 0);
    /* Restored first: if the program's call fails, its pages must not stay PROT_NONE with
     * nothing left to restore them. */
    if (active) release_range(addr, len, 1);
    int r = real_mprotect(addr, len, prot);
    leave();
    return r;
}

int munmap(void *addr, size_t len) {
    if (!real_munmap) real_munmap = dlsym(RTLD_NEXT, "munmap");
    enter(NULL, 0);
    if (active) release_range(addr, len, 0);
    int r = real_munmap(addr, len);
    leave();
    return r;
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    void *new_addr = va_arg(ap, void *);
    va_end(ap);
    if (!real_mremap) real_mremap = (void *(*)(void *, size_t, size_t, int, ...))dlsym(RTLD_NEXT, "mremap");
    enter(old, old_len); /* moved pages keep their protection: restore them first */
    void *r = real_mremap(old, old_len, new_len, flags, new_addr);
    leave();
    return r;
}

/* ---- buffer-taking calls: restore the buffer's pages before the kernel touches them ---- */

#define WRAP_BUF(ret, name, proto, buf, len, args)                      \
    ret name proto {                                                    \
        if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name);       \
        enter(buf, len);                                                \
        ret r = real_##name args;                                       \
        int e = errno;                                                  \
        leave();                                                        \
        errno = e;                                                      \
        return r;                                                       \
    }

WRAP_BUF(ssize_t, read, (int fd, void *b, size_t n), b, n, (fd, b, n))
WRAP_BUF(ssize_t, write, (int fd, const void *b, size_t n), b, n, (fd, b, n))
WRAP_BUF(ssize_t, pread, (int fd, void *b, size_t n, off_t o), b, n, (fd, b, n, o))
WRAP_BUF(ssize_t, pwrite, (int fd, const void *b, size_t n, off_t o), b, n, (fd, b, n, o))
WRAP_BUF(ssize_t, recv, (int fd, void *b, size_t n, int f), b, n, (fd, b, n, f))
WRAP_BUF(ssize_t, send, (int fd, const void *b, size_t n, int f), b, n, (fd, b, n, f))
WRAP_BUF(ssize_t, recvfrom, (int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l), b, n, (fd, b, n, f, a, l))
WRAP_BUF(ssize_t, sendto, (int fd, const void *b, size_t n, int f, const struct sockaddr *a, socklen_t l), b, n, (fd, b, n, f, a, l))

static ssize_t iov_call(ssize_t (*f)(int, const struct iovec *, int), int fd, const struct iovec *iov, int cnt) {
    enter(iov, sizeof *iov * (size_t)(cnt > 0 ? cnt : 0));
    if (active)
        for (int i = 0; i < cnt; i++) {
            int n = release_range(iov[i].iov_base, iov[i].iov_len, 1);
            if (n) bump(H_SYSCALL_SAVES, (uint64_t)n);
        }
    ssize_t r = f(fd, iov, cnt);
    int e = errno;
    leave();
    errno = e;
    return r;
}
ssize_t readv(int fd, const struct iovec *iov, int cnt) {
    if (!real_readv) real_readv = dlsym(RTLD_NEXT, "readv");
    return iov_call(real_readv, fd, iov, cnt);
}
ssize_t writev(int fd, const struct iovec *iov, int cnt) {
    if (!real_writev) real_writev = dlsym(RTLD_NEXT, "writev");
    return iov_call(real_writev, fd, iov, cnt);
}

/* ---- thread stacks are never protected ---- */

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*start)(void *), void *arg) {
    if (!real_pthread_create) real_pthread_create = dlsym(RTLD_NEXT, "pthread_create");
    /* The new thread may touch its stack before its range is recorded: hold the rotation off
     * until it is (the same in-flight count the system-call wrappers use). */
    enter(NULL, 0);
    int r = real_pthread_create(t, attr, start, arg);
    if (r == 0 && active) exclude_stack(*t);
    leave();
    return r;
}
