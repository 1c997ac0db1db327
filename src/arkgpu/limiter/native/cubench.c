/*
 * arkgpu-cubench: a CUDA driver client for the limiter's tests and benchmarks.
 * It loads libcuda.so.1 with dlopen and dlsym, as the CUDA runtime does.
 *   launch N          ns per cuLaunchKernel of a zero-length kernel (median of 7 runs)
 *   mem N             ns per cuMemAlloc_v2 + cuMemFree_v2 pair (median of 7 runs)
 *   memcpu N          the same in this thread's CPU time (no preemption counted: a loaded machine)
 *   load SECONDS US [PATH]  launch US-microsecond kernels back to back for SECONDS;
 *                     PATH is kernel, ex, coop or graph, each also with _ptsz
 *                     (per-thread default stream); prints JSON with the
 *                     achieved busy share and a (time, busy) sample per launch;
 *                     SIGTERM or SIGINT ends it early, with the same JSON
 *                     ("stopped": 1), as a container's process must when the
 *                     kubelet stops it
 *   streams THREADS SECONDS US [WARMUP]  THREADS threads, each with its own
 *                     context binding and stream, launch US-microsecond kernels
 *                     for SECONDS; prints JSON: the busy share over the run and
 *                     after WARMUP seconds, and how long after the end the last
 *                     thread left its launch (a thread left blocked shows here)
 *   script            read commands from stdin (see usage in run_script)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_abi.h"

#define FN(ret, name, args) static ret(*p_##name) args
FN(CUresult, cuInit, (unsigned));
FN(CUresult, cuCtxCreate_v2, (CUcontext *, unsigned, CUdevice));
FN(CUresult, cuCtxSetCurrent, (CUcontext));
FN(CUresult, cuStreamCreate, (CUstream *, unsigned));
FN(CUresult, cuStreamDestroy_v2, (CUstream));
FN(CUresult, cuModuleLoadData, (CUmodule *, const void *));
FN(CUresult, cuModuleGetFunction, (CUfunction *, CUmodule, const char *));
FN(CUresult, cuLaunchKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                              CUstream, void **, void **));
FN(CUresult, cuLaunchKernelEx, (const CUlaunchConfig *, CUfunction, void **, void **));
FN(CUresult, cuLaunchCooperativeKernel, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                         unsigned, CUstream, void **));
FN(CUresult, cuLaunchKernel_ptsz, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, CUstream, void **, void **));
FN(CUresult, cuLaunchKernelEx_ptsz, (const CUlaunchConfig *, CUfunction, void **, void **));
FN(CUresult, cuLaunchCooperativeKernel_ptsz, (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                              unsigned, unsigned, CUstream, void **));
FN(CUresult, cuGraphLaunch_ptsz, (CUgraphExec, CUstream));
FN(CUresult, cuGraphCreate, (CUgraph *, unsigned));
FN(CUresult, cuGraphAddKernelNode_v2, (CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                       const CUDA_KERNEL_NODE_PARAMS *));
FN(CUresult, cuGraphInstantiateWithFlags, (CUgraphExec *, CUgraph, unsigned long long));
FN(CUresult, cuGraphLaunch, (CUgraphExec, CUstream));
FN(CUresult, cuGraphExecDestroy, (CUgraphExec));
FN(CUresult, cuMemAlloc_v2, (CUdeviceptr *, size_t));
FN(CUresult, cuMemAllocPitch_v2, (CUdeviceptr *, size_t *, size_t, size_t, unsigned));
FN(CUresult, cuMemAllocManaged, (CUdeviceptr *, size_t, unsigned));
FN(CUresult, cuMemFree_v2, (CUdeviceptr));
FN(CUresult, cuMemCreate, (CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long));
FN(CUresult, cuMemRelease, (CUmemGenericAllocationHandle));
FN(CUresult, cuMemAllocAsync, (CUdeviceptr *, size_t, CUstream));
FN(CUresult, cuMemAllocFromPoolAsync, (CUdeviceptr *, size_t, CUmemoryPool, CUstream));
FN(CUresult, cuMemAllocAsync_ptsz, (CUdeviceptr *, size_t, CUstream));
FN(CUresult, cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr *, size_t, CUmemoryPool, CUstream));
FN(CUresult, cuMemFreeAsync, (CUdeviceptr, CUstream));
FN(CUresult, cuDeviceGetDefaultMemPool, (CUmemoryPool *, CUdevice));
FN(CUresult, cuArrayCreate_v2, (CUarray *, const CUDA_ARRAY_DESCRIPTOR *));
FN(CUresult, cuArray3DCreate_v2, (CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *));
FN(CUresult, cuMipmappedArrayCreate, (CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *, unsigned));
FN(CUresult, cuArrayDestroy, (CUarray));
FN(CUresult, cuMipmappedArrayDestroy, (CUmipmappedArray));
FN(CUresult, cuMemGetInfo_v2, (size_t *, size_t *));
FN(CUresult, cuDeviceTotalMem_v2, (size_t *, CUdevice));
FN(CUresult, cuGetProcAddress, (const char *, void **, int, cuuint64_t));
FN(CUresult, cuGetProcAddress_v2, (const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *));
FN(uint64_t, fakegpu_process_busy_ns, (void));
FN(CUresult, cuEventCreate, (CUevent *, unsigned));
FN(CUresult, cuEventRecord, (CUevent, CUstream));
FN(CUresult, cuEventQuery, (CUevent));
FN(CUresult, cuEventSynchronize, (CUevent));
FN(CUresult, cuEventElapsedTime, (float *, CUevent, CUevent));
FN(nvmlReturn_t, nvmlInit_v2, (void));
FN(nvmlReturn_t, nvmlDeviceGetHandleByIndex_v2, (unsigned, nvmlDevice_t *));
FN(nvmlReturn_t, nvmlDeviceGetMemoryInfo, (nvmlDevice_t, nvmlMemory_t *));
FN(nvmlReturn_t, nvmlDeviceGetMemoryInfo_v2, (nvmlDevice_t, nvmlMemory_v2_t *));

static void *load(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "arkgpu-cubench: %s not found\n", name);
        exit(3);
    }
    return p;
}
#define LOAD(lib, name) *(void **)&p_##name = load(lib, #name)

static CUfunction spin, spin0;
static CUcontext ctx;

static void setup(void) {
    void *cu = dlopen("libcuda.so.1", RTLD_NOW);
    if (!cu) {
        fprintf(stderr, "arkgpu-cubench: %s\n", dlerror());
        exit(3);
    }
    LOAD(cu, cuInit); LOAD(cu, cuCtxCreate_v2); LOAD(cu, cuCtxSetCurrent); LOAD(cu, cuStreamCreate); LOAD(cu, cuStreamDestroy_v2); LOAD(cu, cuModuleLoadData); LOAD(cu, cuModuleGetFunction);
    LOAD(cu, cuLaunchKernel); LOAD(cu, cuLaunchKernelEx); LOAD(cu, cuLaunchCooperativeKernel);
    LOAD(cu, cuGraphCreate); LOAD(cu, cuGraphAddKernelNode_v2); LOAD(cu, cuGraphInstantiateWithFlags);
    LOAD(cu, cuGraphLaunch); LOAD(cu, cuGraphExecDestroy); LOAD(cu, cuMemAlloc_v2); LOAD(cu, cuMemAllocPitch_v2);
    LOAD(cu, cuMemAllocManaged); LOAD(cu, cuMemFree_v2); LOAD(cu, cuMemCreate); LOAD(cu, cuMemRelease);
    LOAD(cu, cuMemAllocAsync); LOAD(cu, cuMemAllocFromPoolAsync); LOAD(cu, cuMemFreeAsync);
    LOAD(cu, cuMemAllocAsync_ptsz); LOAD(cu, cuMemAllocFromPoolAsync_ptsz); LOAD(cu, cuLaunchKernel_ptsz);
    LOAD(cu, cuLaunchKernelEx_ptsz); LOAD(cu, cuLaunchCooperativeKernel_ptsz); LOAD(cu, cuGraphLaunch_ptsz);
    LOAD(cu, cuDeviceGetDefaultMemPool); LOAD(cu, cuArrayCreate_v2); LOAD(cu, cuArray3DCreate_v2);
    LOAD(cu, cuMipmappedArrayCreate); LOAD(cu, cuArrayDestroy); LOAD(cu, cuMipmappedArrayDestroy);
    LOAD(cu, cuMemGetInfo_v2); LOAD(cu, cuDeviceTotalMem_v2); LOAD(cu, cuGetProcAddress_v2); LOAD(cu, cuGetProcAddress);
    LOAD(cu, fakegpu_process_busy_ns); LOAD(cu, cuEventCreate); LOAD(cu, cuEventRecord);
    LOAD(cu, cuEventQuery); LOAD(cu, cuEventSynchronize); LOAD(cu, cuEventElapsedTime);
    void *nv = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (nv) {
        LOAD(nv, nvmlInit_v2); LOAD(nv, nvmlDeviceGetHandleByIndex_v2); LOAD(nv, nvmlDeviceGetMemoryInfo);
        LOAD(nv, nvmlDeviceGetMemoryInfo_v2);
    }
    CUmodule mod;
    if (p_cuInit(0) || p_cuCtxCreate_v2(&ctx, 0, 0) || p_cuModuleLoadData(&mod, "") ||
        p_cuModuleGetFunction(&spin, mod, "spin") || p_cuModuleGetFunction(&spin0, mod, "spin_0us")) {
        fprintf(stderr, "arkgpu-cubench: driver setup failed\n");
        exit(3);
    }
}

static clockid_t bench_clock = CLOCK_MONOTONIC; /* memcpu: this thread's CPU time */
static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}
static int64_t bench_ns(void) {
    struct timespec ts;
    clock_gettime(bench_clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void bench_launch(long n) {
    double runs[7];
    for (int r = 0; r < 7; r++) {
        int64_t t0 = now_ns();
        for (long i = 0; i < n; i++) p_cuLaunchKernel(spin0, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
        runs[r] = (double)(now_ns() - t0) / (double)n;
    }
    qsort(runs, 7, sizeof *runs, cmp_double);
    printf("{\"ns_per_call\": %.1f, \"runs\": [", runs[3]);
    for (int r = 0; r < 7; r++) printf("%s%.1f", r ? ", " : "", runs[r]);
    printf("]}\n");
}

static void bench_mem(long n) {
    double runs[7];
    for (int r = 0; r < 7; r++) {
        int64_t t0 = bench_ns();
        for (long i = 0; i < n; i++) {
            CUdeviceptr p;
            if (p_cuMemAlloc_v2(&p, 4096) == CUDA_SUCCESS) p_cuMemFree_v2(p);
        }
        runs[r] = (double)(bench_ns() - t0) / (double)n;
    }
    qsort(runs, 7, sizeof *runs, cmp_double);
    printf("{\"ns_per_pair\": %.1f, \"runs\": [", runs[3]);
    for (int r = 0; r < 7; r++) printf("%s%.1f", r ? ", " : "", runs[r]);
    printf("]}\n");
}

/* PATH is kernel, ex, coop or graph, with "_ptsz" for the per-thread-stream entry point. */
static CUresult launch_path(const char *path, uint64_t ns) {
    void *params[] = {&ns};
    size_t len = strlen(path);
    int ptsz = len > 5 && strcmp(path + len - 5, "_ptsz") == 0;
    if (ptsz) len -= 5;
    if (len == 2 && strncmp(path, "ex", 2) == 0) {
        CUlaunchConfig c = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1};
        return (ptsz ? p_cuLaunchKernelEx_ptsz : p_cuLaunchKernelEx)(&c, spin, params, NULL);
    }
    if (len == 4 && strncmp(path, "coop", 4) == 0)
        return (ptsz ? p_cuLaunchCooperativeKernel_ptsz : p_cuLaunchCooperativeKernel)(spin, 1, 1, 1, 1, 1, 1, 0,
                                                                                       NULL, params);
    if (len == 5 && strncmp(path, "graph", 5) == 0) {
        CUgraph g;
        CUgraphExec ex;
        CUDA_KERNEL_NODE_PARAMS kp = {.func = spin, .kernelParams = params};
        CUgraphNode node;
        if (p_cuGraphCreate(&g, 0) || p_cuGraphAddKernelNode_v2(&node, g, NULL, 0, &kp) ||
            p_cuGraphInstantiateWithFlags(&ex, g, 0))
            return CUDA_ERROR_INVALID_VALUE;
        CUresult r = (ptsz ? p_cuGraphLaunch_ptsz : p_cuGraphLaunch)(ex, NULL);
        p_cuGraphExecDestroy(ex);
        return r;
    }
    return (ptsz ? p_cuLaunchKernel_ptsz : p_cuLaunchKernel)(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
}

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* SIGTERM and SIGINT set stop_requested instead of ending the process (PID 1 of a
 * container ignores a signal it has no handler for: the kubelet would wait out the
 * pod's whole grace period). */
static void stop_on_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

static void bench_load(double seconds, double us, const char *path) {
    size_t cap = (size_t)(seconds * 1e6 / (us > 1 ? us : 1)) + 1024, n = 0;
    int64_t *t = malloc(cap * sizeof *t), *b = malloc(cap * sizeof *b);
    int64_t t0 = now_ns(), b0 = (int64_t)p_fakegpu_process_busy_ns(), end = t0 + (int64_t)(seconds * 1e9);
    CUresult err = CUDA_SUCCESS;
    while (now_ns() < end && err == CUDA_SUCCESS && !stop_requested) {
        err = launch_path(path, (uint64_t)(us * 1000));
        if (n < cap) {
            t[n] = now_ns();
            b[n++] = (int64_t)p_fakegpu_process_busy_ns() - b0;
        }
    }
    int64_t wall = now_ns() - t0, busy = (int64_t)p_fakegpu_process_busy_ns() - b0;
    printf("{\"error\": %d, \"stopped\": %d, \"wall_ns\": %lld, \"busy_ns\": %lld, \"share\": %.5f, "
           "\"t_ns\": [", err, (int)stop_requested, (long long)wall, (long long)busy,
           (double)busy / (double)wall);
    for (size_t i = 0; i < n; i++) printf("%s%lld", i ? "," : "", (long long)t[i]);
    printf("], \"busy_at\": [");
    for (size_t i = 0; i < n; i++) printf("%s%lld", i ? "," : "", (long long)b[i]);
    printf("]}\n");
}

/* ---- many threads, one stream each ---- */
typedef struct {
    int64_t end_ns;
    uint64_t kernel_ns;
    _Atomic int64_t last_exit_ns;
    _Atomic long launches, errors;
} streams_run;

static void *stream_worker(void *arg) {
    streams_run *run = arg;
    CUstream s = NULL;
    if (p_cuCtxSetCurrent(ctx) || p_cuStreamCreate(&s, 0)) {
        atomic_fetch_add(&run->errors, 1);
        return NULL;
    }
    void *params[] = {&run->kernel_ns};
    while (now_ns() < run->end_ns) {
        if (p_cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, params, NULL) != CUDA_SUCCESS)
            atomic_fetch_add(&run->errors, 1);
        atomic_fetch_add(&run->launches, 1);
    }
    p_cuStreamDestroy_v2(s);
    int64_t t = now_ns(), seen = atomic_load(&run->last_exit_ns);
    while (t > seen && !atomic_compare_exchange_weak(&run->last_exit_ns, &seen, t)) {
    }
    return NULL;
}

static void sleep_until_ns(int64_t t) {
    int64_t d = t - now_ns();
    if (d <= 0) return;
    struct timespec ts = {(time_t)(d / 1000000000), (long)(d % 1000000000)};
    nanosleep(&ts, NULL);
}

static void bench_streams(int threads, double seconds, double us, double warmup) {
    static pthread_t tid[1024];
    threads = threads < 1 ? 1 : (threads > 1024 ? 1024 : threads);
    streams_run run = {.kernel_ns = (uint64_t)(us * 1000)};
    int64_t t0 = now_ns(), b0 = (int64_t)p_fakegpu_process_busy_ns();
    run.end_ns = t0 + (int64_t)(seconds * 1e9);
    int started = 0;
    for (; started < threads; started++)
        if (pthread_create(&tid[started], NULL, stream_worker, &run) != 0) break;
    sleep_until_ns(t0 + (int64_t)(warmup * 1e9));
    int64_t tw = now_ns(), bw = (int64_t)p_fakegpu_process_busy_ns();
    sleep_until_ns(run.end_ns);
    int64_t te = now_ns(), be = (int64_t)p_fakegpu_process_busy_ns();
    for (int i = 0; i < started; i++) pthread_join(tid[i], NULL);
    printf("{\"threads\": %d, \"share\": %.5f, \"share_after_warmup\": %.5f, \"launches\": %ld, "
           "\"errors\": %ld, \"last_exit_after_end_ns\": %lld}\n",
           started, (double)(be - b0) / (double)(te - t0), (double)(be - bw) / (double)(te - tw),
           atomic_load(&run.launches), atomic_load(&run.errors),
           (long long)(atomic_load(&run.last_exit_ns) - run.end_ns));
}

#include "cubench_script.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: arkgpu-cubench launch N | mem N | memcpu N | load SECONDS US [PATH] | streams THREADS SECONDS US [WARMUP] | script\n");
        return 2;
    }
    if (strcmp(argv[1], "load") == 0) stop_on_signals(); /* before the driver's set-up */
    setup();
    if (strcmp(argv[1], "launch") == 0 && argc > 2) bench_launch(atol(argv[2]));
    else if (strcmp(argv[1], "mem") == 0 && argc > 2) bench_mem(atol(argv[2]));
    else if (strcmp(argv[1], "memcpu") == 0 && argc > 2) {
        bench_clock = CLOCK_THREAD_CPUTIME_ID; /* immune to preemption on a loaded machine */
        bench_mem(atol(argv[2]));
    }
    else if (strcmp(argv[1], "load") == 0 && argc > 3) bench_load(atof(argv[2]), atof(argv[3]), argc > 4 ? argv[4] : "kernel");
    else if (strcmp(argv[1], "streams") == 0 && argc > 4)
        bench_streams(atoi(argv[2]), atof(argv[3]), atof(argv[4]), argc > 5 ? atof(argv[5]) : 0.0);
    else if (strcmp(argv[1], "script") == 0) return run_script();
    else return 2;
    return 0;
}
