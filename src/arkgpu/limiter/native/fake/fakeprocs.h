/* Per-process device memory the fake GPU's "kernel driver" sees: a table in a
 * file beside the fake GPU's state ($FAKEGPU_STATE.procs), filled by
 * allocations that bypass libcuda (arkgpu-fake-escape: a statically linked
 * program or one calling the driver by ioctl), read by the fake NVML's
 * nvmlDeviceGetComputeRunningProcesses_v3. An entry whose process is gone
 * counts for nothing (the driver frees a dead process's memory). */
#ifndef ARKGPU_FAKEPROCS_H
#define ARKGPU_FAKEPROCS_H

#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define FAKEPROCS_SLOTS 256

typedef struct {
    _Atomic uint32_t pid; /* 0: free */
    uint32_t dev;
    _Atomic uint64_t bytes;
} fakeprocs_entry;

typedef struct {
    fakeprocs_entry e[FAKEPROCS_SLOTS];
} fakeprocs_table;

static inline fakeprocs_table *fakeprocs_attach(void) {
    const char *state = getenv("FAKEGPU_STATE");
    char path[4096];
    snprintf(path, sizeof path, "%s.procs", state && *state ? state : "/dev/shm/arkgpu-fakegpu");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return NULL;
    fchmod(fd, 0666);
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size < (off_t)sizeof(fakeprocs_table))
        (void)!ftruncate(fd, sizeof(fakeprocs_table));
    fakeprocs_table *t = mmap(NULL, sizeof *t, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return t == MAP_FAILED ? NULL : t;
}

#endif
