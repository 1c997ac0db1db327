/*
 * A fake NVML (built as libnvidia-ml.so.1) over the fake GPU's shared state.
 * Utilisation is the fraction of time a kernel held the device since this
 * process's previous sample (at least 10 ms apart); memory reports the fake's
 * total as free (the fake driver accounts memory per process). The node
 * runtime's discovery (nvidia-ml-py) also asks for nvmlInitWithFlags, the
 * UUID ("GPU-fake-<index>"), the MIG mode (always disabled) and the driver
 * version.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "../cuda_abi.h"
#include "fakegpu_state.h"
#include "fakeprocs.h"
#include <signal.h>

#define EXPORT __attribute__((visibility("default")))

static struct {
    pthread_once_t once;
    pthread_mutex_t mu;
    fakegpu_state *st;
    int64_t last_t[FAKEGPU_MAX_DEVICES];
    uint64_t last_busy[FAKEGPU_MAX_DEVICES];
    unsigned last_util[FAKEGPU_MAX_DEVICES];
} g = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static void init_once(void) { g.st = fakegpu_attach(); }
static int index_of(nvmlDevice_t d) { return (int)((uintptr_t)d - 0x1000); }
static int valid(nvmlDevice_t d) {
    int i = index_of(d);
    return i >= 0 && (unsigned)i < fakegpu_num_devices();
}

/* Health (the device plugin's tests): while the file "$FAKEGPU_STATE.lost-<index>" exists,
 * the device's UUID and memory queries answer NVML_ERROR_GPU_IS_LOST, as NVML does for a
 * GPU that fell off the bus. */
#define FAKE_NVML_ERROR_GPU_IS_LOST 15
static int lost(nvmlDevice_t d) {
    const char *state = getenv("FAKEGPU_STATE");
    char path[4096];
    snprintf(path, sizeof path, "%s.lost-%d", state && *state ? state : "/dev/shm/arkgpu-fakegpu",
             index_of(d));
    return access(path, F_OK) == 0;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) {
    if (fakegpu_env_uint("FAKEGPU_NVML_BROKEN", 0)) return NVML_ERROR_NOT_FOUND; /* no driver, for tests */
    fakegpu_check(pthread_once(&g.once, init_once), "pthread_once");
    return g.st ? NVML_SUCCESS : NVML_ERROR_NOT_FOUND;
}
EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned flags) {
    (void)flags;
    return nvmlInit_v2();
}
EXPORT nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n) { *n = fakegpu_num_devices(); return NVML_SUCCESS; }
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d) {
    if (i >= fakegpu_num_devices()) return NVML_ERROR_INVALID_ARGUMENT;
    *d = (nvmlDevice_t)(uintptr_t)(0x1000 + i);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned *i) {
    if (!valid(d)) return NVML_ERROR_INVALID_ARGUMENT;
    *i = (unsigned)index_of(d);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned len) {
    (void)d; /* one model on every device, as the GPUs of a real node */
    snprintf(name, len, "ArkGPU Fake GPU");
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    if (!valid(d)) return NVML_ERROR_INVALID_ARGUMENT;
    if (lost(d)) return FAKE_NVML_ERROR_GPU_IS_LOST;
    m->total = m->free = fakegpu_total_mem();
    m->used = 0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    if (!valid(d)) return NVML_ERROR_INVALID_ARGUMENT;
    if (lost(d)) return FAKE_NVML_ERROR_GPU_IS_LOST;
    m->total = m->free = fakegpu_total_mem();
    m->used = m->reserved = 0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    if (!valid(d) || nvmlInit_v2() != NVML_SUCCESS) return NVML_ERROR_INVALID_ARGUMENT;
    int i = index_of(d);
    int64_t now = fakegpu_now();
    uint64_t busy = atomic_load(&g.st->dev[i].busy_ns);
    fake_lock(&g.mu);
    if (now - g.last_t[i] >= 10000000) {
        if (g.last_t[i]) {
            double f = (double)(busy - g.last_busy[i]) / (double)(now - g.last_t[i]);
            g.last_util[i] = f >= 1.0 ? 100u : (unsigned)(f * 100.0 + 0.5);
        }
        g.last_t[i] = now;
        g.last_busy[i] = busy;
    }
    u->gpu = g.last_util[i];
    u->memory = 0;
    fake_unlock(&g.mu);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned len) {
    if (!valid(d)) return NVML_ERROR_INVALID_ARGUMENT;
    if (lost(d)) return FAKE_NVML_ERROR_GPU_IS_LOST;
    snprintf(uuid, len, "GPU-fake-%d", index_of(d));
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned *current, unsigned *pending) {
    if (!valid(d)) return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = 0; /* NVML_DEVICE_MIG_DISABLE */
    return NVML_SUCCESS;
}
/* The device node's minor number (/dev/nvidia<minor>): the index plus
 * FAKEGPU_NVML_MINOR_OFFSET (default 0), so a test can tell the two apart as on
 * hosts where the driver numbered the GPUs in another order than NVML's index. */
EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned *minor) {
    if (!valid(d)) return NVML_ERROR_INVALID_ARGUMENT;
    if (lost(d)) return FAKE_NVML_ERROR_GPU_IS_LOST;
    const char *offset = getenv("FAKEGPU_NVML_MINOR_OFFSET");
    *minor = (unsigned)(index_of(d) + (offset ? atoi(offset) : 0));
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned len) {
    snprintf(version, len, "fake-550.0");
    return NVML_SUCCESS;
}

/* Per-process memory (fakeprocs.h): the processes alive in the table on device d
 * (a context's reserve, its modules and its allocations, or an escape's bytes).
 * For tests: FAKEGPU_NVML_DELAY_MS makes each call sleep that long first (and
 * create the file FAKEGPU_NVML_DELAY_MARK then); FAKEGPU_NVML_PID_OFFSET adds
 * to every pid (as NVML's host pids seen from a container's pid namespace);
 * FAKEGPU_NVML_BROKEN=1 makes nvmlInit fail. */
typedef struct {
    unsigned pid;
    unsigned long long usedGpuMemory;
    unsigned gpuInstanceId, computeInstanceId;
} fake_process_info;

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned *count,
                                                            fake_process_info *infos) {
    if (!valid(d) || !count) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned delay_ms = fakegpu_env_uint("FAKEGPU_NVML_DELAY_MS", 0); /* a slow driver, for tests */
    const char *mark = getenv("FAKEGPU_NVML_DELAY_MARK");
    if (delay_ms && mark && *mark) { /* says "in the slow call now" */
        FILE *f = fopen(mark, "w");
        if (f) fclose(f);
    }
    if (delay_ms) usleep(delay_ms * 1000u);
    unsigned pid_offset = fakegpu_env_uint("FAKEGPU_NVML_PID_OFFSET", 0); /* pids of another namespace */
    fakeprocs_table *t = fakeprocs_attach();
    unsigned n = 0, room = *count;
    for (int i = 0; t && i < FAKEPROCS_SLOTS; i++) {
        uint32_t pid = atomic_load(&t->e[i].pid);
        if (!pid || t->e[i].dev != (uint32_t)index_of(d) || kill((pid_t)pid, 0) != 0) continue;
        if (infos && n < room)
            infos[n] = (fake_process_info){pid + pid_offset, atomic_load(&t->e[i].bytes), 0xFFFFFFFFu,
                                           0xFFFFFFFFu};
        n++;
    }
    if (t) munmap(t, sizeof *t);
    *count = n;
    return (infos && n <= room) || n == 0 ? NVML_SUCCESS : 7 /* NVML_ERROR_INSUFFICIENT_SIZE */;
}
