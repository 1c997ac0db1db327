/*
 * arkgpu-fake-escape MIB SECONDS [DEVICE]: holds MIB MiB of fake device memory
 * for SECONDS through a path the interception library does not see (the fake
 * driver's per-process table, fakeprocs.h), as a statically linked program or
 * one calling the driver by ioctl would; prints "escaped PID" once it holds it.
 * The node runtime's backstop finds it through NVML's per-process memory.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <time.h>

#include "fakeprocs.h"

static fakeprocs_entry *slot;

static void release(int sig) {
    if (slot) atomic_store(&slot->pid, 0);
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: arkgpu-fake-escape MIB SECONDS [DEVICE]\n");
        return 2;
    }
    fakeprocs_table *t = fakeprocs_attach();
    if (!t) {
        perror("arkgpu-fake-escape: cannot map the fake driver's process table");
        return 1;
    }
    uint32_t me = (uint32_t)getpid();
    for (int i = 0; i < FAKEPROCS_SLOTS && !slot; i++) {
        uint32_t pid = atomic_load(&t->e[i].pid);
        int free_slot = pid == 0 || (kill((pid_t)pid, 0) != 0);
        if (free_slot && atomic_compare_exchange_strong(&t->e[i].pid, &pid, me)) slot = &t->e[i];
    }
    if (!slot) {
        fprintf(stderr, "arkgpu-fake-escape: process table full\n");
        return 1;
    }
    slot->dev = argc > 3 ? (uint32_t)atoi(argv[3]) : 0;
    atomic_store(&slot->bytes, (uint64_t)strtoull(argv[1], NULL, 10) << 20);
    signal(SIGTERM, release);
    signal(SIGINT, release);
    printf("escaped %u\n", me);
    fflush(stdout);
    struct timespec ts = {.tv_sec = (time_t)atof(argv[2]), .tv_nsec = 0};
    nanosleep(&ts, NULL);
    atomic_store(&slot->pid, 0);
    return 0;
}
