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
    CUresult (*cuStreamIsCapturing)(CUstream, int *);
    nvmlReturn_t (*nvmlInit_v2)(void);
    nvmlReturn_t (*nvmlDeviceGetIndex)(nvmlDevice_t, unsigned *);
    nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2)(unsigned, nvmlDevice_t *);
    nvmlReturn_t (*nvmlDeviceGetUtilizationRates)(nvmlDevice_t, nvmlUtilization_t *);
} real_calls;

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
} limiter_state;

extern limiter_state arkgpu_st;

void arkgpu_init_slow(void);
static inline int arkgpu_ready(void) {
    if (!LIKELY(atomic_load_explicit(&arkgpu_st.inited, memory_order_acquire))) arkgpu_init_slow();
    return !arkgpu_st.denied;
}
#define REAL(name) ((__typeof__(&name))arkgpu_st.hooks[H_##name].real)

void arkgpu_launch_after_fork(void);
void arkgpu_lend_after_fork(void);
uint32_t arkgpu_lent_bp(int64_t now);
void arkgpu_usage_lock(void);
void arkgpu_usage_unlock(void);
void arkgpu_reclaim_dead_locked(void);
int64_t arkgpu_now_ns(void);
int arkgpu_current_device(void);
uint64_t arkgpu_mem_limit(int dev);
void *arkgpu_hook_for_real(void *real);
void *arkgpu_hook_by_name(const char *name);

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
