/* The LC client library, two lock-free channels in the container's usage region.
 *
 * Latency ring, multi-producer: a writer takes a ticket with fetch-and-add,
 * marks the slot incomplete (seq 0), fills it, then publishes seq = ticket + 1;
 * a reader keeps an entry only when seq reads ticket + 1 before and after.
 *
 * Batches in flight (idle-share lending): begin and end move a counter with
 * atomic read-modify-writes and stamp the time of the change first, so that a
 * borrower that sees the new count also sees a change time at least as new
 * (it treats a count left unchanged too long as stale). */
#define _GNU_SOURCE
#include "arkgpu_client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "arkgpu_region.h"

#define EXPORT __attribute__((visibility("default")))

struct arkgpu_client {
    arkgpu_usage *u;
};

EXPORT arkgpu_client *arkgpu_client_open(const char *region_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/usage", region_dir);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return NULL;
    arkgpu_usage *u = mmap(NULL, sizeof *u, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (u == MAP_FAILED) return NULL;
    if (u->magic != ARKGPU_USAGE_MAGIC || u->version != ARKGPU_LAYOUT_VERSION || u->size != sizeof *u) {
        munmap(u, sizeof *u);
        errno = EPROTO;
        return NULL;
    }
    arkgpu_client *c = malloc(sizeof *c);
    if (!c) {
        munmap(u, sizeof *u);
        return NULL;
    }
    c->u = u;
    return c;
}

EXPORT uint64_t arkgpu_client_report(arkgpu_client *c, uint64_t latency_ns, uint64_t batch) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t ticket = __atomic_fetch_add(&c->u->lat_head, 1, __ATOMIC_ACQ_REL);
    arkgpu_latency_entry *e = &c->u->lat[ticket % ARKGPU_LATENCY_SLOTS];
    __atomic_store_n(&e->seq, 0, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&e->t_ns, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, __ATOMIC_RELAXED);
    __atomic_store_n(&e->latency_ns, latency_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&e->batch, batch, __ATOMIC_RELAXED);
    __atomic_store_n(&e->seq, ticket + 1, __ATOMIC_RELEASE);
    return ticket + 1;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* changed_ns only moves forward, whichever thread stamps last. */
static void stamp_change(arkgpu_inflight *f, int64_t now) {
    int64_t seen = __atomic_load_n(&f->changed_ns, __ATOMIC_RELAXED);
    while (seen < now &&
           !__atomic_compare_exchange_n(&f->changed_ns, &seen, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

EXPORT uint64_t arkgpu_client_batch_begin(arkgpu_client *c) {
    arkgpu_inflight *f = &c->u->inflight;
    int64_t now = now_ns();
    stamp_change(f, now);
    uint64_t before = __atomic_fetch_add(&f->count, 1, __ATOMIC_ACQ_REL); /* publishes the stamp */
    if (before == 0) __atomic_store_n(&f->since_ns, now, __ATOMIC_RELEASE);
    __atomic_fetch_add(&f->begun, 1, __ATOMIC_RELAXED);
    return before + 1;
}

EXPORT uint64_t arkgpu_client_batch_end(arkgpu_client *c) {
    arkgpu_inflight *f = &c->u->inflight;
    uint64_t seen = __atomic_load_n(&f->count, __ATOMIC_ACQUIRE);
    if (seen == 0) return 0;
    stamp_change(f, now_ns());
    while (seen > 0 &&
           !__atomic_compare_exchange_n(&f->count, &seen, seen - 1, 1, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    }
    return seen > 0 ? seen - 1 : 0;
}

EXPORT uint64_t arkgpu_client_batches_in_flight(arkgpu_client *c) {
    return __atomic_load_n(&c->u->inflight.count, __ATOMIC_ACQUIRE);
}

EXPORT void arkgpu_client_close(arkgpu_client *c) {
    if (!c) return;
    munmap(c->u, sizeof *c->u);
    free(c);
}
