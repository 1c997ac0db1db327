/*
 * Core of the interception library: finding the real driver, attaching the
 * container's control region, the robust region lock, reclaiming dead
 * processes, and handing hooks out through dlsym and cuGetProcAddress.
 *
 * The region directory comes from ARKGPU_REGION_DIR (default /run/arkgpu).
 * Its limits file must not be writable by this process (the device plugin
 * mounts it read-only); a missing, malformed or writable limits file puts the
 * library in deny mode: every allocation fails with CUDA_ERROR_OUT_OF_MEMORY
 * and every launch with CUDA_ERROR_NOT_PERMITTED. No environment variable
 * carries a limit.
 */
#include "limiter.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

limiter_state arkgpu_st = {
    .init_mu = PTHREAD_MUTEX_INITIALIZER,
    .map_busy = ATOMIC_FLAG_INIT,
    .hooks = {
#define X(n) [H_##n] = {#n, (void *)n, NULL},
        ARKGPU_CUDA_HOOKS(X) ARKGPU_NVML_HOOKS(X)
#undef X
    },
};

int64_t arkgpu_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* ---- dlsym: the real one, and ours ---- */
typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn real_dlsym_ptr;
static pthread_once_t dlsym_once = PTHREAD_ONCE_INIT;
static void find_real_dlsym(void) {
    real_dlsym_ptr = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!real_dlsym_ptr) real_dlsym_ptr = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
}
static void *real_dlsym(void *handle, const char *name) {
    pthread_once(&dlsym_once, find_real_dlsym);
    return real_dlsym_ptr ? real_dlsym_ptr(handle, name) : NULL;
}

void *arkgpu_hook_by_name(const char *name) {
    for (int i = 0; i < H_COUNT; i++)
        if (strcmp(arkgpu_st.hooks[i].name, name) == 0) return arkgpu_st.hooks[i].hook;
    return NULL;
}

void *arkgpu_hook_for_real(void *real) {
    for (int i = 0; i < H_COUNT; i++)
        if (real && arkgpu_st.hooks[i].real == real) return arkgpu_st.hooks[i].hook;
    return NULL;
}

/* An application that looks a hooked driver symbol up by handle (as cudart and
 * ctypes do) gets the hook, not the driver's function. */
EXPORT void *dlsym(void *handle, const char *name) {
    void *r = real_dlsym(handle, name);
    if (r && ((name[0] == 'c' && name[1] == 'u') || strncmp(name, "nvml", 4) == 0)) {
        void *h = arkgpu_hook_by_name(name);
        if (h) return h;
    }
    return r;
}

/* ---- region ---- */
static const arkgpu_limits deny_limits = {.magic = ARKGPU_LIMITS_MAGIC, .share_bp = 0};

static void *map_file(const char *dir, const char *name, int writable, size_t size, int *writable_by_me) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    void *p = NULL;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size >= size) {
        p = mmap(NULL, size, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) p = NULL;
    }
    if (writable_by_me) *writable_by_me = faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0;
    close(fd);
    return p;
}

static const char *attach_region(void) {
    const char *dir = getenv("ARKGPU_REGION_DIR");
    if (!dir || !*dir) dir = "/run/arkgpu";
    int writable = 0;
    const arkgpu_limits *l = map_file(dir, "limits", 0, sizeof *l, &writable);
    if (!l) return "no limits file";
    if (writable) return "limits file is writable by this process (must be mounted read-only)";
    if (l->magic != ARKGPU_LIMITS_MAGIC || l->version != ARKGPU_LAYOUT_VERSION || l->size != sizeof *l)
        return "limits file has the wrong layout";
    arkgpu_usage *u = map_file(dir, "usage", 1, sizeof *u, NULL);
    if (!u) return "no writable usage file";
    if (u->magic != ARKGPU_USAGE_MAGIC || u->version != ARKGPU_LAYOUT_VERSION || u->size != sizeof *u)
        return "usage file has the wrong layout";
    arkgpu_st.limits = l;
    arkgpu_st.usage = u;
    snprintf(arkgpu_st.region_dir, sizeof arkgpu_st.region_dir, "%s", dir);
    return NULL;
}

/* ---- processes: liveness and slots ---- */
/* starttime of pid from /proc (0 when it is gone or a zombie). */
static uint64_t start_ticks(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X') return 0;
    p += 2; /* field 3, state */
    for (int field = 3; field < 22 && p; field++) p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

static int proc_dead(const arkgpu_proc *pr) { return start_ticks(pr->pid) != pr->start_ticks; }

/* Gives a dead process's bytes back to the container and frees its slot. */
static void reclaim_slot(arkgpu_proc *pr) {
    arkgpu_usage *u = arkgpu_st.usage;
    for (int d = 0; d < ARKGPU_MAX_DEVICES; d++)
        for (int k = 0; k < ARKGPU_KINDS; k++) {
            uint64_t b = pr->bytes[d][k];
            u->used[d] -= b < u->used[d] ? b : u->used[d];
            u->reclaimed_bytes += b;
        }
    memset(pr, 0, sizeof *pr);
}

void arkgpu_reclaim_dead_locked(void) {
    arkgpu_usage *u = arkgpu_st.usage;
    for (int i = 0; i < ARKGPU_MAX_PROCS; i++) {
        arkgpu_proc *pr = &u->procs[i];
        if (pr->pid && pr != arkgpu_st.me && proc_dead(pr)) reclaim_slot(pr);
    }
}

/* After a holder died inside the lock: drop its slot and other dead ones,
 * recount totals. The owner is known by its IN_LOCK flag: the kernel releases
 * a robust mutex early in process exit, before /proc shows the process as a
 * zombie, so its liveness cannot be read from /proc yet. */
static void recover_locked(void) {
    arkgpu_usage *u = arkgpu_st.usage;
    u->lock_recoveries++;
    for (int i = 0; i < ARKGPU_MAX_PROCS; i++) {
        arkgpu_proc *pr = &u->procs[i];
        if (pr->pid && pr != arkgpu_st.me && (pr->flags & ARKGPU_PROC_IN_LOCK)) reclaim_slot(pr);
    }
    arkgpu_reclaim_dead_locked();
    for (int d = 0; d < ARKGPU_MAX_DEVICES; d++) {
        uint64_t sum = 0;
        for (int i = 0; i < ARKGPU_MAX_PROCS; i++)
            if (u->procs[i].pid)
                for (int k = 0; k < ARKGPU_KINDS; k++) sum += u->procs[i].bytes[d][k];
        u->used[d] = sum;
    }
}

void arkgpu_usage_lock(void) {
    pthread_mutex_t *m = (pthread_mutex_t *)arkgpu_st.usage->lock;
    if (pthread_mutex_lock(m) == EOWNERDEAD) {
        recover_locked();
        pthread_mutex_consistent(m);
    }
    if (arkgpu_st.me) arkgpu_st.me->flags |= ARKGPU_PROC_IN_LOCK;
}

void arkgpu_usage_unlock(void) {
    if (arkgpu_st.me) arkgpu_st.me->flags &= ~ARKGPU_PROC_IN_LOCK;
    pthread_mutex_unlock((pthread_mutex_t *)arkgpu_st.usage->lock);
}

static const char *claim_slot(void) {
    arkgpu_usage *u = arkgpu_st.usage;
    pid_t pid = getpid();
    arkgpu_usage_lock();
    arkgpu_reclaim_dead_locked();
    for (int i = 0; i < ARKGPU_MAX_PROCS && !arkgpu_st.me; i++)
        if (!u->procs[i].pid) {
            memset(&u->procs[i], 0, sizeof u->procs[i]);
            u->procs[i].start_ticks = start_ticks(pid);
            u->procs[i].pid = pid;
            arkgpu_st.me = &u->procs[i];
        }
    arkgpu_usage_unlock();
    return arkgpu_st.me ? NULL : "no free process slot in the usage region";
}

/* Takes dead processes' memory back a few times a second. */
static void *reaper(void *arg) {
    (void)arg;
    struct timespec ts = {0, 200000000};
    for (;;) {
        nanosleep(&ts, NULL);
        arkgpu_usage_lock();
        arkgpu_reclaim_dead_locked();
        arkgpu_usage_unlock();
    }
    return NULL;
}

/* Test hook: hold the region lock for ms milliseconds (the SIGKILL test). */
EXPORT int arkgpu_limiter_debug_hold_lock(unsigned ms) {
    if (!arkgpu_ready()) return -1;
    arkgpu_usage_lock();
    usleep(ms * 1000u);
    arkgpu_usage_unlock();
    return 0;
}

/* ---- initialisation ---- */
static void resolve_real(void) {
    const char *lib = "libcuda.so.1";
    void *cuda = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
    for (int i = 0; i < H_COUNT; i++) {
        void *h = arkgpu_st.hooks[i].name[0] == 'n' ? nvml : cuda;
        arkgpu_st.hooks[i].real = h ? real_dlsym(h, arkgpu_st.hooks[i].name) : NULL;
    }
    real_calls *r = &arkgpu_st.real;
    if (cuda) {
        *(void **)&r->cuCtxGetDevice = real_dlsym(cuda, "cuCtxGetDevice");
        *(void **)&r->cuEventCreate = real_dlsym(cuda, "cuEventCreate");
        *(void **)&r->cuEventRecord = real_dlsym(cuda, "cuEventRecord");
        *(void **)&r->cuEventQuery = real_dlsym(cuda, "cuEventQuery");
        *(void **)&r->cuEventElapsedTime = real_dlsym(cuda, "cuEventElapsedTime");
        *(void **)&r->cuStreamIsCapturing = real_dlsym(cuda, "cuStreamIsCapturing");
    }
    if (nvml) {
        *(void **)&r->nvmlInit_v2 = real_dlsym(nvml, "nvmlInit_v2");
        *(void **)&r->nvmlDeviceGetIndex = real_dlsym(nvml, "nvmlDeviceGetIndex");
        *(void **)&r->nvmlDeviceGetHandleByIndex_v2 = real_dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2");
        *(void **)&r->nvmlDeviceGetUtilizationRates = real_dlsym(nvml, "nvmlDeviceGetUtilizationRates");
    }
}

/* A forked child is a new process: it attaches again on its first call. */
static void after_fork_child(void) {
    atomic_store(&arkgpu_st.inited, 0);
    pthread_mutex_init(&arkgpu_st.init_mu, NULL);
    atomic_flag_clear(&arkgpu_st.map_busy);
    ptrmap_clear(&arkgpu_st.ptrs);
    ptrmap_clear(&arkgpu_st.handles);
    arkgpu_st.me = NULL;
    arkgpu_launch_after_fork();
    arkgpu_lend_after_fork();
}

void arkgpu_init_slow(void) {
    static int once_per_image;
    pthread_mutex_lock(&arkgpu_st.init_mu);
    if (!atomic_load(&arkgpu_st.inited)) {
        if (!once_per_image) {
            once_per_image = 1;
            resolve_real();
            pthread_atfork(NULL, NULL, after_fork_child);
        }
        const char *why = arkgpu_st.usage ? NULL : attach_region();
        if (!why) why = claim_slot();
        arkgpu_st.denied = why != NULL;
        if (why) {
            arkgpu_st.limits = &deny_limits;
            fprintf(stderr, "arkgpu-limiter: %s; device memory and launches are refused\n", why);
        } else {
            pthread_t t;
            if (pthread_create(&t, NULL, reaper, NULL) == 0) pthread_detach(t);
        }
        atomic_store_explicit(&arkgpu_st.inited, 1, memory_order_release);
    }
    pthread_mutex_unlock(&arkgpu_st.init_mu);
}

/* ---- cuGetProcAddress: an application asking for a hooked symbol gets the hook ---- */
static void swap_in_hook(CUresult r, void **pfn) {
    if (r != CUDA_SUCCESS || !pfn || !*pfn) return;
    void *h = arkgpu_hook_for_real(*pfn);
    if (h) *pfn = h;
}

EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags) {
    arkgpu_ready();
    if (!REAL(cuGetProcAddress)) return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = REAL(cuGetProcAddress)(sym, pfn, ver, flags);
    swap_in_hook(r, pfn);
    return r;
}

EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status) {
    arkgpu_ready();
    if (!REAL(cuGetProcAddress_v2)) return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r = REAL(cuGetProcAddress_v2)(sym, pfn, ver, flags, status);
    swap_in_hook(r, pfn);
    return r;
}

int arkgpu_current_device(void) {
    CUdevice d = 0;
    if (!arkgpu_st.real.cuCtxGetDevice || arkgpu_st.real.cuCtxGetDevice(&d) != CUDA_SUCCESS) return 0;
    return d;
}

uint64_t arkgpu_mem_limit(int dev) {
    const arkgpu_limits *l = arkgpu_st.limits;
    if (dev < 0 || dev >= ARKGPU_MAX_DEVICES || (unsigned)dev >= __atomic_load_n(&l->num_devices, __ATOMIC_RELAXED))
        return 0;
    return __atomic_load_n(&l->mem_limit[dev], __ATOMIC_RELAXED);
}
