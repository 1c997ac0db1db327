/* The LC latency channel's writer: a lock-free multi-producer ring in the
 * container's usage region. A writer takes a ticket with fetch-and-add, marks
 * the slot incomplete (seq 0), fills it, then publishes seq = ticket + 1; a
 * reader keeps an entry only when seq reads ticket + 1 before and after. */
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

EXPORT void arkgpu_client_close(arkgpu_client *c) {
    if (!c) return;
    munmap(c->u, sizeof *c->u);
    free(c);
}
