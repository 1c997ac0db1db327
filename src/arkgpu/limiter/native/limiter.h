/* Internal declarations of the interception library (libarkgpu_limiter.so). */
#ifndef ARKGPU_LIMITER_H
#define ARKGPU_LIMITER_H

#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "arkgpu_region.h"
#include "cuda_abi.h"
#include "ptrmap.h"

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)

/* Every symbol the library interposes, in the driver's versioned names. */
#define ARKGPU_CUDA_HOOKS(X)                                                                      \
    X(cuMemAlloc_v2) X(cuMemAllocPitch_v2) X(cuMemAllocManaged) X(cuMemFree_v2) X(cuMemCreate)   \
    X(cuMemRelease) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz) X(cuMemAllocFromPoolAsync)        \
    X(cuMemAllocFromPoolAsync_ptsz) X(cuMemFreeAsync) X(cuMemFreeAsync_ptsz) X(cuArrayCreate_v2) \
    X(cuArray3DCreate_v2) X(cuMipmappedArrayCreate) X(cuArrayDestroy) X(cuMipmappedArrayDestroy) \
    X(cuMemGetInfo_v2) X(cuDeviceTotalMem_v2) X(cuLaunchKernel) X(cuLaunchKernel_ptsz)           \
    X(cuLaunchKernelEx) X(cuLaunchKernelEx_ptsz) X(cuLaunchCooperativeKernel)                    \
    X(cuLaunchCooperativeKernel_ptsz) X(cuGraphLaunch) X(cuGraphLaunch_ptsz) X(cuGetProcAddress) \
    X(cuGetProcAddress_v2)
#define ARKGPU_NVML_HOOKS(X) X(nvmlDeviceGetMemoryInfo) X(nvmlDeviceGetMemoryInfo_v2)

enum hook_id {
#define X(n) H_##n,
    ARKGPU_CUDA_HOOKS(X) ARKGPU_NVML_HOOKS(X)
#undef X
        H_COUNT
};

typedef struct {
    const char *name;
    void *hook; /* ours */
    void *real; /* the driver's, NULL when it lacks the symbol */
} hook_entry;

/* Driver functions the library calls but does not interpose. */
typedef struct {
    CUresult (*cuCtxGetDevice)(CUdevice *);
    CUresult (*cuEventCreate)(CUevent *, unsigned);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventQuery)(CUevent);
    CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*cuEventDestroy_v2)(CUevent);
    CUresult (*cuStreamIsCapturing)(CUstream, int *);
    nvmlReturn_t (*nvmlInit_v2)(void);
    nvmlReturn_t (*nvmlDeviceGetIndex)(nvmlDevice_t, unsigned *);
    nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2)(unsigned, nvmlDevice_t *);
    nvmlReturn_t (*nvmlDeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t *);
    /* nvmlDeviceGetComputeRunningProcesses_v3, else _v2 (same record) */
    nvmlReturn_t (*nvmlProcesses)(nvmlDevice_t, unsigned *, nvmlProcessInfo_t *);
} real_calls;

/* Memory operations of one thread that entered and left the driver. Each
 * thread has its own (plain stores, no locked instruction on the allocation
 * path); threads past the first ARKGPU_DRV_SLOTS - 1 share the last one with
 * atomic increments. */
#define ARKGPU_DRV_SLOTS 256
typedef struct {
    _Atomic uint64_t entered, left;
    char pad[48]; /* one cache line per thread */
} drv_count;

/* The driver reserve (limiter_reserve.c), process-private: measured with NVML
 * outside the region lock, published into this process's slot under it. */
typedef struct {
    pthread_mutex_t mu;  /* one measurement at a time (a private mutex, never the region lock) */
    int nvml;            /* 0 not tried, 1 usable, -1 absent or failing */
    int unlisted_counted, no_nvml_counted; /* each counted once per process */
    _Atomic int64_t measured_ns[ARKGPU_MAX_DEVICES]; /* last measurement; 0: never */
    nvmlDevice_t handle[ARKGPU_MAX_DEVICES];
    /* A measurement is exact only when no memory operation of this process was
     * inside the driver meanwhile (see stable()). */
    drv_count drv[ARKGPU_DRV_SLOTS];
    _Atomic unsigned drv_used; /* slots handed out */
} reserve_state;

/* A consistent copy of the limits record (read through its seqlock). */
typedef struct {
    uint64_t generation;
    uint32_t mode, share_bp, num_devices, burst_us;
    uint64_t mem_limit[ARKGPU_MAX_DEVICES];
    uint32_t lend_count, lend_stale_ms;
    uint32_t lent_bp[ARKGPU_MAX_LENDERS];
    uint32_t reserve_period_ms, reserve_margin_mib;
} limits_view;

/* Places inside the region lock where ARKGPU_DEBUG_HOLD=<site>:<ms> makes the
 * process sleep mid-update (the tests SIGKILL it there). */
enum hold_site { HOLD_NONE, HOLD_CLAIM, HOLD_ALLOC, HOLD_FREE, HOLD_REFILL, HOLD_CHARGE, HOLD_RECLAIM, HOLD_RESERVE };

typedef struct {
    _Atomic int inited;
    pthread_mutex_t init_mu;
    int denied; /* no trusted region: refuse memory and launches */
    char region_dir[4096]; /* the attached region's directory */
    const arkgpu_limits *limits;
    arkgpu_usage *usage;
    arkgpu_proc *me;
    atomic_flag map_busy; /* spinlock guarding ptrs, handles */
    ptrmap ptrs;        /* device pointer or array -> bytes, device << 8 | kind */
    ptrmap handles;     /* cuMemCreate handle -> bytes, device << 8 | kind */
    real_calls real;
    hook_entry hooks[H_COUNT];
    int hold_site;         /* enum hold_site, from ARKGPU_DEBUG_HOLD */
    unsigned hold_ms;
    _Atomic int lock_broken; /* the region lock failed: said once on stderr */
    reserve_state rsv;
} limiter_state;

extern limiter_state arkgpu_st;

void arkgpu_init_slow(void);
static inline int arkgpu_ready(void) {
    if (!LIKELY(atomic_load_explicit(&arkgpu_st.inited, memory_order_acquire))) arkgpu_init_slow();
    return !arkgpu_st.denied;
}
#define REAL(name) ((__typeof__(&name))arkgpu_st.hooks[H_##name].real)

#define UNLIKELY(x) __builtin_expect(!!(x), 0)
void arkgpu_launch_after_fork(void);
void arkgpu_lend_after_fork(void);
uint32_t arkgpu_lent_bp(const limits_view *l, int64_t now);
const limits_view *arkgpu_limits_now(void);
/* The region lock: 0 when held; -1 when it cannot be taken (the caller refuses
 * its operation: the lock is broken, see lock_errors). */
int arkgpu_usage_lock(void);
void arkgpu_usage_unlock(void);
/* Process-private mutexes: a failure means corrupted memory; the process
 * stops with a message rather than run a critical section unlocked. */
void arkgpu_mutex_lock(pthread_mutex_t *m);
void arkgpu_mutex_unlock(pthread_mutex_t *m);
void arkgpu_hold_point(int site);
static inline void arkgpu_debug_hold(int site) {
    if (UNLIKELY(arkgpu_st.hold_site == site)) arkgpu_hold_point(site);
}
/* Fields also read without the lock (used, pid, start_ticks, busy_ns) are
 * written with relaxed atomic stores, under the lock. */
#define ST(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
#define LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
/* Saturating arithmetic on figures read from the usage region, which the
 * container's processes can write: no signed overflow on any bytes there. */
static inline int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}
static inline int64_t sat_sub(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_sub_overflow(a, b, &r) ? (b < 0 ? INT64_MAX : INT64_MIN) : r;
}
/* a + b, UINT64_MAX when it overflows (figures from the usage region). */
static inline uint64_t sat_addu(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}
#define ARKGPU_COUNT(field) __atomic_fetch_add(&arkgpu_st.usage->field, 1, __ATOMIC_RELAXED)
/* Reclaims the slots of dead processes: /proc is read first, without the lock. */
void arkgpu_reclaim_dead(void);
const char *arkgpu_claim_slot(void);
void arkgpu_start_reaper(void);
void *arkgpu_real_dlsym(void *handle, const char *name);
int64_t arkgpu_now_ns(void);
uint64_t arkgpu_start_ticks(pid_t pid);
int arkgpu_current_device(void);
uint64_t arkgpu_mem_limit(int dev);
void *arkgpu_hook_for_real(void *real);
void *arkgpu_hook_by_name(const char *name);
void arkgpu_parse_debug_hold(void);

/* Driver reserve (limiter_reserve.c). */
#define ARKGPU_RESERVE_SLOW_NS 10000000ll /* near-cap or refused: measure at most every 10 ms */
/* Measures (NVML; the caller holds no region lock) when this process never
 * has on dev or its last measurement is older than max_age_ns. */
void arkgpu_reserve_refresh(int dev, int64_t max_age_ns);
/* The reaper's periodic refresh of the devices this process measured. */
void arkgpu_reserve_tick(void);
/* Initialises NVML ahead of the first measurement (the reaper, at its start). */
void arkgpu_reserve_warm(void);
void arkgpu_reserve_after_fork(void);
/* Brackets a memory operation's trip through the driver: counts in this
 * thread's own slot with a release store (a plain store on x86). */
/* initial-exec: one load from the thread pointer, no __tls_get_addr call (the
 * library is loaded at start-up, LD_PRELOAD or /etc/ld.so.preload). */
extern __thread drv_count *arkgpu_tl_drv __attribute__((tls_model("initial-exec")));
drv_count *arkgpu_drv_slot(void);
static inline void arkgpu_drv_bump(int leave) {
    drv_count *c = arkgpu_tl_drv;
    if (UNLIKELY(!c)) c = arkgpu_drv_slot();
    _Atomic uint64_t *x = leave ? &c->left : &c->entered;
    if (LIKELY(c != &arkgpu_st.rsv.drv[ARKGPU_DRV_SLOTS - 1]))
        atomic_store_explicit(x, atomic_load_explicit(x, memory_order_relaxed) + 1, memory_order_release);
    else
        atomic_fetch_add_explicit(x, 1, memory_order_release);
}
static inline void arkgpu_drv_enter(void) { arkgpu_drv_bump(0); }
static inline void arkgpu_drv_leave(void) { arkgpu_drv_bump(1); }

/* Hooks: declared with the driver's prototypes. */
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemCreate(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, CUstream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *, size_t, CUstream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
CUresult cuArrayCreate_v2(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
CUresult cuArray3DCreate_v2(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
CUresult cuMipmappedArrayCreate(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned);
CUresult cuArrayDestroy(CUarray);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuDeviceTotalMem_v2(size_t *, CUdevice);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        CUstream, void **, void **);
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
CUresult cuLaunchKernelEx(const CUlaunchConfig *, CUfunction, void **, void **);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *, CUfunction, void **, void **);
CUresult cuLaunchCooperativeKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, CUstream, void **);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, unsigned, CUstream, void **);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuGraphLaunch_ptsz(CUgraphExec, CUstream);
CUresult cuGetProcAddress(const char *, void **, int, cuuint64_t);
CUresult cuGetProcAddress_v2(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t *);
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t, nvmlMemory_v2_t *);

#endif
