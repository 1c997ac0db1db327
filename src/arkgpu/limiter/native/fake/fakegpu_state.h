/* The fake GPU's device state, shared by every process that loads the fake
 * driver (libcuda.so.1) or the fake NVML: a file mapped MAP_SHARED, path from
 * FAKEGPU_STATE (default /dev/shm/arkgpu-fakegpu). Each virtual device has a
 * timeline: under the device's robust process-shared lock a launch books the
 * next free interval of its kernel's length, so contexts of different
 * processes share the device in time, one kernel at a time in arrival order,
 * as on a GPU without MPS. The device is never idle while work is booked,
 * however late the launching processes are scheduled on the CPU. */
#ifndef ARKGPU_FAKEGPU_STATE_H
#define ARKGPU_FAKEGPU_STATE_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define FAKEGPU_MAX_DEVICES 8
#define FAKEGPU_MAGIC 0x3255504b414641ull /* "AFAKPU2": the timeline layout */

typedef struct {
    pthread_mutex_t lock;
    char pad[64 - sizeof(pthread_mutex_t) % 64];
    int64_t free_at;          /* CLOCK_MONOTONIC ns when the booked work ends */
    _Atomic uint64_t busy_ns; /* cumulative kernel time completed on the device */
} fakegpu_device;

typedef struct {
    uint64_t magic;
    _Atomic uint32_t ready; /* 0 new, 1 initialising, 2 ready */
    uint32_t pad;
    fakegpu_device dev[FAKEGPU_MAX_DEVICES];
} fakegpu_state;

static inline int64_t fakegpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static inline unsigned fakegpu_env_uint(const char *name, unsigned dflt) {
    const char *v = getenv(name);
    return (v && *v) ? (unsigned)strtoul(v, NULL, 10) : dflt;
}

static inline unsigned fakegpu_num_devices(void) {
    unsigned n = fakegpu_env_uint("FAKEGPU_DEVICES", 1);
    return n < 1 ? 1 : (n > FAKEGPU_MAX_DEVICES ? FAKEGPU_MAX_DEVICES : n);
}

static inline unsigned long long fakegpu_total_mem(void) {
    return (unsigned long long)fakegpu_env_uint("FAKEGPU_MEM_MIB", 16384) << 20;
}

/* The fake's pthread calls, checked: a failure is a bug of the test driver,
 * which stops with a message. */
static inline void fakegpu_check(int e, const char *call) {
    if (e == 0) return;
    fprintf(stderr, "fakegpu: %s failed (%s)\n", call, strerror(e));
    abort();
}
static inline void fake_lock(pthread_mutex_t *m) { fakegpu_check(pthread_mutex_lock(m), "pthread_mutex_lock"); }
static inline void fake_unlock(pthread_mutex_t *m) { fakegpu_check(pthread_mutex_unlock(m), "pthread_mutex_unlock"); }

static inline void fakegpu_init_locks(fakegpu_state *s) {
    pthread_mutexattr_t a;
    fakegpu_check(pthread_mutexattr_init(&a), "pthread_mutexattr_init");
    fakegpu_check(pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED), "pthread_mutexattr_setpshared");
    fakegpu_check(pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST), "pthread_mutexattr_setrobust");
    for (int i = 0; i < FAKEGPU_MAX_DEVICES; i++)
        fakegpu_check(pthread_mutex_init(&s->dev[i].lock, &a), "pthread_mutex_init");
    fakegpu_check(pthread_mutexattr_destroy(&a), "pthread_mutexattr_destroy");
    s->magic = FAKEGPU_MAGIC;
}

/* Map the shared state, creating and initialising it on first use. */
static inline fakegpu_state *fakegpu_attach(void) {
    const char *path = getenv("FAKEGPU_STATE");
    if (!path || !*path) path = "/dev/shm/arkgpu-fakegpu";
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return NULL;
    fchmod(fd, 0666);
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size < (off_t)sizeof(fakegpu_state))
        (void)!ftruncate(fd, sizeof(fakegpu_state));
    fakegpu_state *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (s == MAP_FAILED) return NULL;
    uint32_t expect = 0;
    if (atomic_compare_exchange_strong(&s->ready, &expect, 1)) {
        fakegpu_init_locks(s);
        atomic_store(&s->ready, 2);
    }
    for (int i = 0; i < 200000 && atomic_load(&s->ready) != 2; i++) usleep(10);
    if (s->magic != FAKEGPU_MAGIC) { /* a state file of another layout */
        munmap(s, sizeof *s);
        return NULL;
    }
    return s;
}

/* Book ns of device time after everything booked so far; returns the start.
 * A holder that died inside the lock leaves a consistent timeline. */
static inline int64_t fakegpu_book(fakegpu_state *s, int d, int64_t ns) {
    fakegpu_device *dv = &s->dev[d];
    int e = pthread_mutex_lock(&dv->lock);
    if (e == EOWNERDEAD) e = pthread_mutex_consistent(&dv->lock);
    fakegpu_check(e, "pthread_mutex_lock (device timeline)");
    int64_t now = fakegpu_now();
    int64_t start = dv->free_at > now ? dv->free_at : now;
    dv->free_at = start + ns;
    fake_unlock(&dv->lock);
    return start;
}

#endif
