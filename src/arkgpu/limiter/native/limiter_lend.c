/*
 * Idle-share lending, the borrower's side. A best-effort container's limits
 * name up to ARKGPU_MAX_LENDERS lenders, each with a lent share; the node side
 * makes lender k's usage file visible, read-only, at <region>/lenders/<k>.
 * While a lender has no batch in flight (its count is 0, or the count has not
 * changed for lend_stale_ms: a crashed LC process must not hold it forever),
 * the container's pacing bucket fills at its own share plus the lent share.
 *
 * A lender's file is read with pread on a descriptor kept open, never mapped:
 * the lender can write and truncate its own usage file, and a mapping of a
 * truncated file would raise SIGBUS in this process. A path that is missing,
 * not a regular file, too short or of another layout lends nothing; the path
 * is looked at again every LEND_RECHECK_NS, so a lender linked, replaced or
 * removed at run time is seen within that time.
 *
 * The sum is kept for LEND_CACHE_NS, so a container launching many short
 * kernels reads its lenders at most 4000 times a second; a lender's change is
 * seen that much later, far inside the bucket's 20 ms.
 */
#include "limiter.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define LEND_RECHECK_NS 1000000000ll
#define LEND_CACHE_NS 250000ll

typedef struct {
    int fd1; /* descriptor + 1; 0 while the lender has no valid file */
    dev_t dev;
    ino_t ino;
    int64_t checked_ns; /* when the path was last looked at; 0: never */
} lender;

static struct {
    pthread_mutex_t mu;
    lender l[ARKGPU_MAX_LENDERS];
    int64_t cached_ns; /* when cached_bp was summed; 0: never (atomic) */
    uint32_t cached_bp; /* the last sum (atomic) */
} ld = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* A forked child keeps the descriptors (pread shares no offset) but gets an
 * unlocked mutex. */
void arkgpu_lend_after_fork(void) {
    if (pthread_mutex_init(&ld.mu, NULL) != 0) abort();
    ld.cached_ns = 0;
}

static void lender_close(lender *x) {
    if (x->fd1) close(x->fd1 - 1);
    x->fd1 = 0;
}

/* An open descriptor of a lender usage file of this layout, or -1. */
static int lender_open(const char *path, struct stat *st) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return -1;
    struct {
        uint64_t magic;
        uint32_t version, size;
    } head;
    if (fstat(fd, st) == 0 && S_ISREG(st->st_mode) && (size_t)st->st_size >= sizeof(arkgpu_usage) &&
        pread(fd, &head, sizeof head, 0) == (ssize_t)sizeof head && head.magic == ARKGPU_USAGE_MAGIC &&
        head.version == ARKGPU_LAYOUT_VERSION && head.size == sizeof(arkgpu_usage))
        return fd;
    close(fd);
    return -1;
}

/* Look at lenders/<k> again when LEND_RECHECK_NS has passed; the caller locks. */
static void lender_refresh(int k, int64_t now) {
    lender *x = &ld.l[k];
    if (x->checked_ns && now - x->checked_ns < LEND_RECHECK_NS) return;
    x->checked_ns = now;
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/lenders/%d", arkgpu_st.region_dir, k);
    if (x->fd1 && stat(path, &st) == 0 && st.st_dev == x->dev && st.st_ino == x->ino) return;
    lender_close(x);
    int fd = lender_open(path, &st);
    if (fd < 0) return;
    x->fd1 = fd + 1;
    x->dev = st.st_dev;
    x->ino = st.st_ino;
}

/* Lender k has no batch in flight, or its count is stale; the caller locks. */
static int lender_idle(int k, int64_t now, int64_t stale_ns) {
    arkgpu_inflight f;
    if (pread(ld.l[k].fd1 - 1, &f, sizeof f, offsetof(arkgpu_usage, inflight)) != (ssize_t)sizeof f) return 0;
    /* the lender's container writes these: a stamp never set (<= 0) counts as
     * stale, one in the future as fresh; no arithmetic can overflow */
    if (f.count == 0 || f.changed_ns <= 0) return 1;
    return f.changed_ns < now && now - f.changed_ns > stale_ns;
}

/* The share, in basis points, that idle lenders lend now (at most a full GPU). */
uint32_t arkgpu_lent_bp(const limits_view *l, int64_t now) {
    uint32_t n = l->lend_count;
    if (n == 0) return 0;
    n = n > ARKGPU_MAX_LENDERS ? ARKGPU_MAX_LENDERS : n;
    int64_t at = __atomic_load_n(&ld.cached_ns, __ATOMIC_ACQUIRE);
    if (at && now >= at && now - at < LEND_CACHE_NS) return __atomic_load_n(&ld.cached_bp, __ATOMIC_RELAXED);
    int64_t stale_ns = (int64_t)(l->lend_stale_ms ? l->lend_stale_ms : ARKGPU_LEND_STALE_MS) * 1000000;
    uint64_t sum = 0;
    arkgpu_mutex_lock(&ld.mu);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t bp = l->lent_bp[k];
        if (bp == 0) { /* not lending: let go of the file, look again once it lends */
            lender_close(&ld.l[k]);
            ld.l[k].checked_ns = 0;
            continue;
        }
        lender_refresh((int)k, now);
        if (ld.l[k].fd1 && lender_idle((int)k, now, stale_ns)) sum += bp;
    }
    uint32_t lent = sum > ARKGPU_SHARE_FULL ? ARKGPU_SHARE_FULL : (uint32_t)sum;
    __atomic_store_n(&ld.cached_bp, lent, __ATOMIC_RELAXED);
    __atomic_store_n(&ld.cached_ns, now, __ATOMIC_RELEASE);
    arkgpu_mutex_unlock(&ld.mu);
    return lent;
}
