/*
 * numalab's round-1g library (docs/live.md, "round-1g for launched programs").
 *
 * Preloaded by `numalab run --policy round-1g` into the program it launches. It interposes
 * mmap (and mmap64): after a successful call that creates private anonymous memory, every
 * piece of the new mapping that falls in one range [k * R, (k + 1) * R) of the virtual
 * address space (R = the range size, 1 GiB unless the agent says otherwise) gets the memory
 * policy MPOL_PREFERRED for node nodes[k mod N] with mbind(2): pages the program touches
 * there later come from that node while it has free memory, and from the nearest other node
 * when it has none, as the simulator's round-1g falls back to the next node with a free
 * extent. The same map as the agent's (numalab_policy::statics::round_1g::range_node).
 * Everything else (the heap grown by brk, the stacks, mappings that existed before this
 * library ran, and glibc's own internal mmap calls, which do not go through the symbol this
 * file replaces) keeps the process-wide interleave over the same nodes the agent set before
 * exec.
 *
 * Settings come from the environment: NUMALAB_R1G_NODES (kernel node ids, comma-separated),
 * NUMALAB_R1G_RANGE_BYTES (a power of two, a multiple of the page size) and NUMALAB_R1G_FD
 * (a memfd of one page the agent reads afterwards: words below).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAGIC 0x3130314752414c4eULL /* "NLAR1G01" */
#define MPOL_PREFERRED_ 1
#define MAX_NODES 1024
/* Status words (u64 index), read by the agent (crates/linux/src/act/range_bind.rs). */
enum { S_MAGIC = 0, S_LOADED, S_MAPPINGS, S_PIECES, S_FAILED, S_LAST_ERRNO };

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
static mmap_fn real_mmap, real_mmap64;
static volatile uint64_t *status;
static int nodes[MAX_NODES];
static int nnodes;
static uint64_t range_bytes;

static void *resolve(const char *name) { return dlsym(RTLD_NEXT, name); }

__attribute__((constructor)) static void r1g_init(void) {
    real_mmap = (mmap_fn)resolve("mmap");
    real_mmap64 = (mmap_fn)resolve("mmap64");
    const char *fd = getenv("NUMALAB_R1G_FD");
    const char *ns = getenv("NUMALAB_R1G_NODES");
    const char *rb = getenv("NUMALAB_R1G_RANGE_BYTES");
    if (!fd || !ns || !rb || !real_mmap)
        return;
    void *p = real_mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, atoi(fd), 0);
    if (p == MAP_FAILED)
        return;
    /* The memfd stays open: the agent's copy is what it reads; ours is closed so the
     * program does not see a stray descriptor. */
    close(atoi(fd));
    uint64_t r = strtoull(rb, NULL, 10);
    if (r == 0 || (r & (r - 1)) != 0)
        return;
    for (const char *c = ns; *c && nnodes < MAX_NODES;) {
        char *end;
        long n = strtol(c, &end, 10);
        if (end == c || n < 0 || n >= MAX_NODES)
            return;
        nodes[nnodes++] = (int)n;
        c = *end == ',' ? end + 1 : end;
    }
    if (nnodes == 0)
        return;
    range_bytes = r;
    status = (volatile uint64_t *)p;
    status[S_LOADED] = 1;
    __atomic_store_n(&status[S_MAGIC], MAGIC, __ATOMIC_RELEASE);
}

/* mbind each range-aligned piece of [addr, addr + len) to its range's node. */
static void bind_ranges(void *addr, size_t len) {
    int saved = errno;
    uintptr_t start = (uintptr_t)addr, end = start + len;
    unsigned long mask[MAX_NODES / (8 * sizeof(unsigned long))];
    __atomic_fetch_add(&status[S_MAPPINGS], 1, __ATOMIC_RELAXED);
    while (start < end) {
        uint64_t k = start / range_bytes;
        uintptr_t piece_end = (uintptr_t)((k + 1) * range_bytes);
        if (piece_end > end || piece_end == 0)
            piece_end = end;
        int node = nodes[k % (uint64_t)nnodes];
        memset(mask, 0, sizeof mask);
        mask[node / (8 * sizeof(unsigned long))] = 1UL << (node % (8 * sizeof(unsigned long)));
        /* maxnode: the kernel reads maxnode - 1 bits (mm/mempolicy.c get_nodes decrements
         * it), so the bit count plus one. */
        long rc = syscall(SYS_mbind, start, piece_end - start, MPOL_PREFERRED_, mask,
                          (unsigned long)(MAX_NODES + 1), 0UL);
        if (rc == 0) {
            __atomic_fetch_add(&status[S_PIECES], 1, __ATOMIC_RELAXED);
        } else {
            __atomic_fetch_add(&status[S_FAILED], 1, __ATOMIC_RELAXED);
            status[S_LAST_ERRNO] = (uint64_t)errno;
        }
        start = piece_end;
    }
    errno = saved;
}

static void *after(void *p, size_t len, int flags) {
    if (p != MAP_FAILED && status && (flags & MAP_ANONYMOUS) && (flags & MAP_PRIVATE))
        bind_ranges(p, len);
    return p;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (!real_mmap) {
        real_mmap = (mmap_fn)resolve("mmap");
        if (!real_mmap) {
            errno = ENOSYS;
            return MAP_FAILED;
        }
    }
    return after(real_mmap(addr, len, prot, flags, fd, off), len, flags);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (!real_mmap64) {
        real_mmap64 = (mmap_fn)resolve("mmap64");
        if (!real_mmap64) {
            errno = ENOSYS;
            return MAP_FAILED;
        }
    }
    return after(real_mmap64(addr, len, prot, flags, fd, off), len, flags);
}
