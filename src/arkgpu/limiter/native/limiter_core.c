/*
 * Core of the interception library: finding the real driver, attaching the
 * container's control region, reading the limits through their seqlock, and
 * handing hooks out through cuGetProcAddress (dlsym: limiter_dlsym.c; the
 * region lock and process slots: limiter_lock.c).
 *
 * The region directory comes from ARKGPU_REGION_DIR (default /run/arkgpu).
 * Its limits file must not be writable by this process (the device plugin
 * mounts it read-only); a missing, malformed or writable limits file, or one
 * of another layout version, puts the library in deny mode: every allocation
 * fails with CUDA_ERROR_OUT_OF_MEMORY and every launch with
 * CUDA_ERROR_NOT_PERMITTED, and one line on stderr says why. No environment
 * variable carries a limit.
 */
#include "limiter.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

limiter_state arkgpu_st = {
    .init_mu = PTHREAD_MUTEX_INITIALIZER,
    .map_busy = ATOMIC_FLAG_INIT,
    .rsv = {.mu = PTHREAD_MUTEX_INITIALIZER},
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

void *arkgpu_hook_for_real(void *real) {
    for (int i = 0; i < H_COUNT; i++)
        if (real && arkgpu_st.hooks[i].real == real) return arkgpu_st.hooks[i].hook;
    return NULL;
}

/* ---- region ---- */
static const arkgpu_limits deny_limits = {.magic = ARKGPU_LIMITS_MAGIC, .share_bp = 0};

/* A read lock on the usage file's first byte, owned by this open file description (an
 * OFD lock): the mapping keeps the description, so the lock holds until the process
 * exits (or while a forked child keeps the mapping). The node runtime tests it
 * (F_OFD_GETLK) to know that a process of the container lives, which the pids in the
 * usage file cannot tell from another pid namespace (docs/LIMITER.md, Liveness). Best
 * effort: without OFD locks (Linux < 3.15) nothing is held. A system call, as stat's. */
static void hold_liveness_lock(int fd) {
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    (void)syscall(SYS_fcntl, fd, F_OFD_SETLK, &fl);
}

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
        else if (writable) hold_liveness_lock(fd);
    }
    if (writable_by_me) *writable_by_me = faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) == 0;
    close(fd);
    return p;
}

/* NULL when the header is of this layout, else why not (in why[]). */
static const char *check_header(const char *file, uint64_t magic, uint32_t version, uint32_t size,
                                uint64_t want_magic, size_t want_size, char *why, size_t n) {
    if (magic != want_magic)
        snprintf(why, n, "%s file is not an ArkGPU region file (bad magic)", file);
    else if (version != ARKGPU_LAYOUT_VERSION)
        snprintf(why, n, "%s file has layout version %u, this library reads version %u only "
                         "(node side and library must be upgraded together)", file, version, ARKGPU_LAYOUT_VERSION);
    else if (size != want_size)
        snprintf(why, n, "%s file has the wrong record size %u (want %zu)", file, size, want_size);
    else
        return NULL;
    return why;
}

static const char *attach_region(void) {
    static char why[256];
    const char *dir = getenv("ARKGPU_REGION_DIR");
    if (!dir || !*dir) dir = "/run/arkgpu";
    int writable = 0;
    const arkgpu_limits *l = map_file(dir, "limits", 0, 16, &writable);
    if (!l) return "no limits file";
    if (writable) return "limits file is writable by this process (must be mounted read-only)";
    const char *bad = check_header("limits", l->magic, l->version, l->size, ARKGPU_LIMITS_MAGIC, sizeof *l, why,
                                   sizeof why);
    munmap((void *)l, 16);
    if (bad) return bad;
    l = map_file(dir, "limits", 0, sizeof *l, NULL);
    if (!l) return "limits file is too short";
    arkgpu_usage *u = map_file(dir, "usage", 1, 16, NULL);
    if (!u) return "no writable usage file";
    bad = check_header("usage", u->magic, u->version, u->size, ARKGPU_USAGE_MAGIC, sizeof *u, why, sizeof why);
    munmap(u, 16);
    if (bad) return bad;
    u = map_file(dir, "usage", 1, sizeof *u, NULL);
    if (!u) return "usage file is too short";
    arkgpu_st.limits = l;
    arkgpu_st.usage = u;
    snprintf(arkgpu_st.region_dir, sizeof arkgpu_st.region_dir, "%s", dir);
    return NULL;
}

/* ---- limits, through the seqlock ---- */
/* Each thread keeps the last consistent copy and the generation it was read
 * at: while the generation is unchanged a read costs one load. */
static __thread limits_view tl_view;
static __thread const arkgpu_limits *tl_src;
static __thread uint64_t tl_gen1; /* generation + 1 of tl_view; 0: none */
static __thread uint64_t tl_stuck1; /* odd generation + 1 waited out once; 0: none */

#define LOAD(f) __atomic_load_n(&l->f, __ATOMIC_RELAXED)

static int read_once(const arkgpu_limits *l, limits_view *v) {
    uint64_t g = __atomic_load_n(&l->generation, __ATOMIC_ACQUIRE);
    if (g & 1) return 0;
    v->mode = LOAD(mode);
    v->share_bp = LOAD(share_bp);
    v->num_devices = LOAD(num_devices);
    v->burst_us = LOAD(burst_us);
    for (int d = 0; d < ARKGPU_MAX_DEVICES; d++) v->mem_limit[d] = LOAD(mem_limit[d]);
    v->lend_count = LOAD(lend_count);
    v->lend_stale_ms = LOAD(lend_stale_ms);
    for (int k = 0; k < ARKGPU_MAX_LENDERS; k++) v->lent_bp[k] = LOAD(lent_bp[k]);
    v->reserve_period_ms = LOAD(reserve_period_ms);
    v->reserve_margin_mib = LOAD(reserve_margin_mib);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&l->generation, __ATOMIC_RELAXED) != g) return 0;
    v->generation = g;
    return 1;
}

/* Retry while a write is in progress; after 100 ms of that keep acting on the
 * last consistent copy (if this thread has one) and count the wait. A write
 * still in progress at that same generation later (its writer died mid-write)
 * is not waited for again: the copy stands until a new write completes. A
 * mixed record is never returned. */
static const limits_view *limits_slow(const arkgpu_limits *l) {
    limits_view v;
    int64_t t0 = 0;
    int counted = 0;
    for (unsigned i = 0;; i++) {
        if (read_once(l, &v)) break;
        uint64_t g = __atomic_load_n(&l->generation, __ATOMIC_RELAXED);
        if (tl_gen1 && tl_src == l && g + 1 == tl_stuck1) return &tl_view;
        if (i < 256) continue;
        if (!t0) t0 = arkgpu_now_ns();
        if (arkgpu_now_ns() - t0 > 100000000ll) {
            if (!counted && arkgpu_st.usage) ARKGPU_COUNT(limits_waits);
            counted = 1;
            if (tl_gen1 && tl_src == l) {
                if (g & 1) tl_stuck1 = g + 1;
                return &tl_view;
            }
        }
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    tl_view = v;
    tl_src = l;
    tl_gen1 = v.generation + 1;
    return &tl_view;
}

const limits_view *arkgpu_limits_now(void) {
    const arkgpu_limits *l = arkgpu_st.limits;
    uint64_t g = __atomic_load_n(&l->generation, __ATOMIC_ACQUIRE);
    if (LIKELY(g + 1 == tl_gen1 && tl_src == l)) return &tl_view;
    return limits_slow(l);
}

/* Test hook: the share, burst, mode and generation this thread acts on now. */
EXPORT int arkgpu_limiter_debug_limits(uint64_t out[4]) {
    if (!arkgpu_ready()) return -1;
    const limits_view *v = arkgpu_limits_now();
    out[0] = v->share_bp;
    out[1] = v->burst_us;
    out[2] = v->mode;
    out[3] = v->generation;
    return 0;
}

/* ---- initialisation ---- */
static void resolve_real(void) {
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
    for (int i = 0; i < H_COUNT; i++) {
        void *h = arkgpu_st.hooks[i].name[0] == 'n' ? nvml : cuda;
        arkgpu_st.hooks[i].real = h ? arkgpu_real_dlsym(h, arkgpu_st.hooks[i].name) : NULL;
    }
    real_calls *r = &arkgpu_st.real;
#define RESOLVE(lib, name) *(void **)&r->name = arkgpu_real_dlsym(lib, #name)
    if (cuda) {
        RESOLVE(cuda, cuCtxGetDevice);
        RESOLVE(cuda, cuEventCreate);
        RESOLVE(cuda, cuEventRecord);
        RESOLVE(cuda, cuEventQuery);
        RESOLVE(cuda, cuEventElapsedTime);
        RESOLVE(cuda, cuEventDestroy_v2);
        RESOLVE(cuda, cuStreamIsCapturing);
    }
    if (nvml) {
        RESOLVE(nvml, nvmlInit_v2);
        RESOLVE(nvml, nvmlDeviceGetIndex);
        RESOLVE(nvml, nvmlDeviceGetHandleByIndex_v2);
        RESOLVE(nvml, nvmlDeviceGetUtilizationRates);
        *(void **)&r->nvmlProcesses = arkgpu_real_dlsym(nvml, "nvmlDeviceGetComputeRunningProcesses_v3");
        if (!r->nvmlProcesses)
            *(void **)&r->nvmlProcesses = arkgpu_real_dlsym(nvml, "nvmlDeviceGetComputeRunningProcesses_v2");
    }
#undef RESOLVE
}

/* A forked child is a new process: it attaches again on its first call. */
static void after_fork_child(void) {
    atomic_store(&arkgpu_st.inited, 0);
    if (pthread_mutex_init(&arkgpu_st.init_mu, NULL) != 0) {
        fprintf(stderr, "arkgpu-limiter: pthread_mutex_init failed after fork; stopping\n");
        _exit(127);
    }
    atomic_flag_clear(&arkgpu_st.map_busy);
    ptrmap_clear(&arkgpu_st.ptrs);
    ptrmap_clear(&arkgpu_st.handles);
    arkgpu_st.me = NULL;
    arkgpu_launch_after_fork();
    arkgpu_lend_after_fork();
    arkgpu_reserve_after_fork();
}

static void init_locked(void) {
    static int once_per_image;
    if (!once_per_image) {
        once_per_image = 1;
        resolve_real();
        arkgpu_parse_debug_hold();
        int e = pthread_atfork(NULL, NULL, after_fork_child);
        if (e != 0) fprintf(stderr, "arkgpu-limiter: pthread_atfork failed (%s)\n", strerror(e));
    }
    const char *why = arkgpu_st.usage ? NULL : attach_region();
    if (!why) why = arkgpu_claim_slot();
    arkgpu_st.denied = why != NULL;
    if (why) {
        arkgpu_st.limits = &deny_limits;
        fprintf(stderr, "arkgpu-limiter: %s; device memory and launches are refused\n", why);
    } else {
        arkgpu_start_reaper();
    }
}

void arkgpu_init_slow(void) {
    arkgpu_mutex_lock(&arkgpu_st.init_mu);
    if (!atomic_load(&arkgpu_st.inited)) {
        init_locked();
        atomic_store_explicit(&arkgpu_st.inited, 1, memory_order_release);
    }
    arkgpu_mutex_unlock(&arkgpu_st.init_mu);
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
    const limits_view *l = arkgpu_limits_now();
    if (dev < 0 || dev >= ARKGPU_MAX_DEVICES || (unsigned)dev >= l->num_devices) return 0;
    return l->mem_limit[dev];
}
