/*
 * A fake CUDA driver (built as libcuda.so.1): a virtual GPU with fixed memory
 * and SM count on which kernels "run" for a duration given at launch. Kernels
 * are named "spin" (duration in ns from kernelParams[0], a uint64_t*) or
 * "spin_<N>us" (fixed). A launch books its kernel on the device's timeline
 * (see fakegpu_state.h), so processes share the device in time, and returns
 * at once (asynchronous launches, up to FAKE_QUEUE_DEPTH kernels queued
 * per stream). Events complete in stream order at the times the device
 * reaches them; synchronisation calls sleep until then.
 * Memory is accounted per process against FAKEGPU_MEM_MIB; pointers are
 * virtual addresses that are never dereferenced.
 */
#include "fakecuda.h"

#include <signal.h>

fake_process g = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};
__thread CUcontext tls_ctx;

static void after_fork_child(void);

static void init_once(void) {
    g.st = fakegpu_attach();
    g.ndev = fakegpu_num_devices();
    g.total = fakegpu_total_mem();
    g.next_addr = 0x7f0000000000ull;
    g.next_handle = 1;
    for (unsigned i = 0; i < FAKEGPU_MAX_DEVICES; i++) g.primary[i].dev = (int)i;
    for (unsigned i = 0; i < FAKEGPU_MAX_DEVICES; i++) g.pools[i].dev = (int)i;
    fakegpu_check(pthread_atfork(NULL, NULL, after_fork_child), "pthread_atfork");
}

int fake_cur_dev(void) { return tls_ctx ? tls_ctx->dev : 0; }

/* ---- what NVML shows of this process (fakeprocs.h) ---- */
fakeprocs_entry *fake_entry(int dev) {
    if (dev < 0 || dev >= FAKEGPU_MAX_DEVICES) return NULL;
    if (g.ent[dev]) return g.ent[dev];
    if (!g.ent_pid) g.ent_pid = getpid();
    if (!g.procs && !g.procs_tried) { /* once: a table this process cannot open stays unopened */
        g.procs = fakeprocs_attach();
        g.procs_tried = 1;
    }
    for (int i = 0; g.procs && i < FAKEPROCS_SLOTS && !g.ent[dev]; i++) {
        fakeprocs_entry *e = &g.procs->e[i];
        uint32_t pid = atomic_load(&e->pid);
        uint32_t me = (uint32_t)g.ent_pid;
        if ((pid == 0 || kill((pid_t)pid, 0) != 0) && atomic_compare_exchange_strong(&e->pid, &pid, me)) {
            e->dev = (uint32_t)dev;
            atomic_store(&e->bytes, (uint64_t)fakegpu_env_uint("FAKEGPU_CTX_RESERVE_MIB", 256) << 20);
            g.ent[dev] = e;
        }
    }
    return g.ent[dev];
}

void fake_entry_add(int dev, uint64_t bytes) {
    fakeprocs_entry *e = fake_entry(dev);
    if (e) atomic_fetch_add(&e->bytes, bytes);
}

void fake_entry_sub(int dev, uint64_t bytes) {
    fakeprocs_entry *e = fake_entry(dev);
    uint64_t v = e ? atomic_load(&e->bytes) : 0;
    while (e && !atomic_compare_exchange_weak(&e->bytes, &v, v - (bytes < v ? bytes : v))) {
    }
}

/* A forked child that goes on using its parent's contexts holds its own on
 * each of those devices (no lock: another thread of the parent may have held
 * g.mu at the fork; the child is single-threaded here). */
static void after_fork_child(void) {
    int had[FAKEGPU_MAX_DEVICES];
    for (int d = 0; d < FAKEGPU_MAX_DEVICES; d++) had[d] = g.ent[d] != NULL;
    memset(g.ent, 0, sizeof g.ent); /* the child's own entries, nothing allocated yet */
    g.ent_pid = getpid();
    for (int d = 0; d < FAKEGPU_MAX_DEVICES; d++)
        if (had[d]) fake_entry(d);
}

static void touch_context(int dev) {
    fake_lock(&g.mu);
    fake_entry(dev);
    fake_unlock(&g.mu);
}
int fake_ready(void) {
    fakegpu_check(pthread_once(&g.once, init_once), "pthread_once");
    return g.st != NULL;
}

/* ---- initialisation, devices, contexts ---- */
EXPORT CUresult cuInit(unsigned flags) {
    (void)flags;
    return fake_ready() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}
EXPORT CUresult cuDriverGetVersion(int *v) { *v = 12040; return CUDA_SUCCESS; }
EXPORT CUresult cuDeviceGetCount(int *n) { fake_ready(); *n = (int)g.ndev; return CUDA_SUCCESS; }
EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    fake_ready();
    if (ordinal < 0 || (unsigned)ordinal >= g.ndev) return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    (void)d; /* one model on every device, as the GPUs of a real node */
    snprintf(name, (size_t)len, "ArkGPU Fake GPU");
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    (void)d;
    fake_ready();
    *bytes = g.total;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
    (void)d;
    *v = attr == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? (int)fakegpu_env_uint("FAKEGPU_SMS", 108) : 0;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
    fake_ready();
    if (d < 0 || (unsigned)d >= g.ndev) return CUDA_ERROR_INVALID_DEVICE;
    *c = &g.primary[d];
    touch_context(d);
    return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { (void)d; return CUDA_SUCCESS; }
EXPORT CUresult cuCtxCreate_v2(CUcontext *c, unsigned flags, CUdevice d) {
    (void)flags;
    CUresult r = cuDevicePrimaryCtxRetain(c, d);
    if (r == CUDA_SUCCESS) tls_ctx = *c;
    return r;
}
EXPORT CUresult cuCtxDestroy_v2(CUcontext c) {
    if (tls_ctx == c) tls_ctx = NULL;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxSetCurrent(CUcontext c) {
    tls_ctx = c;
    if (c) touch_context(c->dev);
    return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxGetCurrent(CUcontext *c) { *c = tls_ctx; return CUDA_SUCCESS; }
EXPORT CUresult cuCtxGetDevice(CUdevice *d) {
    if (!tls_ctx) return CUDA_ERROR_INVALID_CONTEXT;
    *d = tls_ctx->dev;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuGetErrorString(CUresult e, const char **s) {
    *s = e == CUDA_SUCCESS ? "no error" : e == CUDA_ERROR_OUT_OF_MEMORY ? "out of memory" : "error";
    return CUDA_SUCCESS;
}

/* ---- modules and kernels ---- */
EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image) {
    (void)image;
    static struct CUmod_st mod;
    *m = &mod;
    fake_lock(&g.mu); /* the module's image lives on the device: NVML shows it */
    fake_entry_add(fake_cur_dev(), (uint64_t)fakegpu_env_uint("FAKEGPU_MODULE_MIB", 0) << 20);
    fake_unlock(&g.mu);
    return CUDA_SUCCESS;
}
EXPORT CUresult cuModuleLoad(CUmodule *m, const char *fname) { return cuModuleLoadData(m, fname); }
EXPORT CUresult cuModuleUnload(CUmodule m) { (void)m; return CUDA_SUCCESS; }
EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    (void)m;
    int64_t ns = -1;
    if (strncmp(name, "spin_", 5) == 0) {
        char *end;
        unsigned long long us = strtoull(name + 5, &end, 10);
        if (strcmp(end, "us") != 0) return CUDA_ERROR_NOT_FOUND;
        ns = (int64_t)us * 1000;
    } else if (strcmp(name, "spin") != 0) {
        return CUDA_ERROR_NOT_FOUND;
    }
    struct CUfunc_st *fn = malloc(sizeof *fn);
    if (!fn) return CUDA_ERROR_OUT_OF_MEMORY;
    fn->fixed_ns = ns;
    *f = fn;
    return CUDA_SUCCESS;
}

static uint64_t kernel_ns(CUfunction f, void **params) {
    if (f->fixed_ns >= 0) return (uint64_t)f->fixed_ns;
    return (params && params[0]) ? *(const uint64_t *)params[0] : 0;
}

/* ---- streams and events ---- */
static CUstream stream_of(CUstream s) { return s ? s : &g.null_stream; }

static void sleep_until(int64_t t) {
    struct timespec until = {(time_t)(t / 1000000000), (long)(t % 1000000000)};
    while (t > fakegpu_now() && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
    }
}

static int64_t stream_end(CUstream s) {
    fake_lock(&g.mu);
    CUstream st = stream_of(s);
    int64_t end = st->last_end;
    st->pending = NULL;
    st->after_kernel = 0;
    fake_unlock(&g.mu);
    return end;
}

EXPORT CUresult cuStreamCreate(CUstream *s, unsigned flags) {
    (void)flags;
    *s = calloc(1, sizeof **s);
    return *s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
EXPORT CUresult cuStreamDestroy_v2(CUstream s) { free(s); return CUDA_SUCCESS; }
EXPORT CUresult cuStreamSynchronize(CUstream s) {
    sleep_until(stream_end(s));
    return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamQuery(CUstream s) {
    return stream_end(s) <= fakegpu_now() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
EXPORT CUresult cuCtxSynchronize(void) {
    fake_lock(&g.mu);
    int64_t end = g.last_end;
    fake_unlock(&g.mu);
    sleep_until(end);
    return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamIsCapturing(CUstream s, int *status) {
    (void)s;
    *status = 0; /* the fake never captures */
    return CUDA_SUCCESS;
}
EXPORT CUresult cuEventCreate(CUevent *e, unsigned flags) {
    (void)flags;
    *e = calloc(1, sizeof **e);
    return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
EXPORT CUresult cuEventDestroy_v2(CUevent e) {
    fake_lock(&g.mu);
    if (g.null_stream.pending == e) g.null_stream.pending = NULL;
    fake_unlock(&g.mu);
    free(e);
    return CUDA_SUCCESS;
}
/* An event completes when the stream's earlier work has (right after a
 * kernel: when the kernel ends). If a kernel is the next work on the stream,
 * the kernel's start replaces that time: the stream reaches the event only
 * when the device starts this context's kernel. */
EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
    fake_lock(&g.mu);
    CUstream st = stream_of(s);
    int64_t now = fakegpu_now();
    e->t = st->after_kernel ? st->kernel_end : (st->last_end > now ? st->last_end : now);
    e->recorded = 1;
    st->pending = st->after_kernel ? NULL : e;
    st->after_kernel = 0;
    fake_unlock(&g.mu);
    return CUDA_SUCCESS;
}
static int64_t event_time(CUevent e) {
    fake_lock(&g.mu);
    int64_t t = e->t;
    fake_unlock(&g.mu);
    return t;
}
EXPORT CUresult cuEventQuery(CUevent e) {
    return !e->recorded || event_time(e) <= fakegpu_now() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
EXPORT CUresult cuEventSynchronize(CUevent e) {
    if (e->recorded) sleep_until(event_time(e));
    return CUDA_SUCCESS;
}
EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
    if (!a->recorded || !b->recorded) return CUDA_ERROR_INVALID_VALUE;
    int64_t ta = event_time(a), tb = event_time(b), now = fakegpu_now();
    if (ta > now || tb > now) return CUDA_ERROR_NOT_READY;
    *ms = (float)((double)(tb - ta) / 1e6);
    return CUDA_SUCCESS;
}
EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) { return cuEventElapsedTime(ms, a, b); }

/* ---- execution ---- */
/* Book the kernel on the device's timeline and return without waiting for it
 * (launches are asynchronous); a stream holds FAKE_QUEUE_DEPTH kernels that
 * have not started, so a launch first waits for the oldest of them to start,
 * as a full launch queue makes the caller wait. */
static CUresult run_on_device(CUstream s, uint64_t ns) {
    if (!fake_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tls_ctx) return CUDA_ERROR_INVALID_CONTEXT;
    int dev = fake_cur_dev();
    fake_lock(&g.mu);
    CUstream q = stream_of(s);
    int64_t oldest_start = q->starts[q->launches % FAKE_QUEUE_DEPTH];
    fake_unlock(&g.mu);
    sleep_until(oldest_start); /* the queue is full until its oldest kernel starts */
    int64_t t0 = fakegpu_book(g.st, dev, (int64_t)ns), t1 = t0 + (int64_t)ns;
    fake_lock(&g.mu);
    CUstream st = stream_of(s);
    if (st->pending) st->pending->t = t0;
    st->pending = NULL;
    st->after_kernel = 1;
    st->kernel_end = t1;
    st->starts[st->launches++ % FAKE_QUEUE_DEPTH] = t0;
    st->last_end = t1;
    if (t1 > g.last_end) g.last_end = t1;
    fake_unlock(&g.mu);
    atomic_fetch_add(&g.st->dev[dev].busy_ns, ns);
    atomic_fetch_add(&g.proc_busy_ns, ns);
    atomic_fetch_add(&g.launches, 1);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shmem, CUstream s, void **params, void **extra) {
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem, (void)extra;
    if (!f) return CUDA_ERROR_INVALID_VALUE;
    return run_on_device(s, kernel_ns(f, params));
}
EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,
                                    void **extra) {
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}
EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    (void)extra;
    if (!c || !f) return CUDA_ERROR_INVALID_VALUE;
    return run_on_device(c->hStream, kernel_ns(f, params));
}
EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    return cuLaunchKernelEx(c, f, params, extra);
}
EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                          unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params) {
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL);
}
EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                               unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                               CUstream s, void **params) {
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL);
}

/* ---- graphs: kernel nodes only, run back to back as one device occupancy ---- */
EXPORT CUresult cuGraphCreate(CUgraph *gr, unsigned flags) {
    (void)flags;
    *gr = calloc(1, sizeof **gr);
    return *gr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *node, CUgraph gr, const CUgraphNode *deps, size_t ndeps,
                                        const CUDA_KERNEL_NODE_PARAMS *p) {
    (void)deps, (void)ndeps;
    if (!gr || !p || !p->func || gr->n >= MAX_GRAPH_NODES) return CUDA_ERROR_INVALID_VALUE;
    gr->ns[gr->n++] = kernel_ns(p->func, p->kernelParams);
    if (node) *node = NULL;
    return CUDA_SUCCESS;
}
EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *node, CUgraph gr, const CUgraphNode *deps, size_t ndeps,
                                     const CUDA_KERNEL_NODE_PARAMS *p) {
    return cuGraphAddKernelNode_v2(node, gr, deps, ndeps, p);
}
EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *ex, CUgraph gr, unsigned long long flags) {
    (void)flags;
    *ex = malloc(sizeof **ex);
    if (!*ex) return CUDA_ERROR_OUT_OF_MEMORY;
    (*ex)->n = gr->n;
    memcpy((*ex)->ns, gr->ns, sizeof gr->ns);
    return CUDA_SUCCESS;
}
EXPORT CUresult cuGraphLaunch(CUgraphExec ex, CUstream s) {
    uint64_t ns = 0;
    for (int i = 0; i < ex->n; i++) ns += ex->ns[i];
    return run_on_device(s, ns);
}
EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec ex, CUstream s) { return cuGraphLaunch(ex, s); }
EXPORT CUresult cuGraphExecDestroy(CUgraphExec ex) { free(ex); return CUDA_SUCCESS; }
EXPORT CUresult cuGraphDestroy(CUgraph gr) { free(gr); return CUDA_SUCCESS; }

/* ---- fake-only introspection for tests and benchmarks ---- */
EXPORT uint64_t fakegpu_process_busy_ns(void) { return atomic_load(&g.proc_busy_ns); }
EXPORT uint64_t fakegpu_process_launches(void) { return atomic_load(&g.launches); }
EXPORT uint64_t fakegpu_process_used_bytes(int dev) {
    fake_lock(&g.mu);
    uint64_t u = g.used[dev];
    fake_unlock(&g.mu);
    return u;
}

/* ---- cuGetProcAddress ---- */
#define PROC(name) {#name, (void *)name}
static const struct { const char *name; void *fn; } procs[] = {
    PROC(cuInit), PROC(cuDriverGetVersion), PROC(cuDeviceGetCount), PROC(cuDeviceGet),
    PROC(cuDeviceGetName), PROC(cuDeviceTotalMem_v2), PROC(cuDeviceGetAttribute),
    PROC(cuDevicePrimaryCtxRetain), PROC(cuDevicePrimaryCtxRelease_v2), PROC(cuCtxCreate_v2),
    PROC(cuCtxDestroy_v2), PROC(cuCtxSetCurrent), PROC(cuCtxGetCurrent), PROC(cuCtxGetDevice),
    PROC(cuCtxSynchronize), PROC(cuGetErrorString), PROC(cuMemAlloc_v2), PROC(cuMemAllocPitch_v2),
    PROC(cuMemAllocManaged), PROC(cuMemFree_v2), PROC(cuMemCreate), PROC(cuMemRelease),
    PROC(cuMemAllocAsync), PROC(cuMemAllocAsync_ptsz), PROC(cuMemAllocFromPoolAsync),
    PROC(cuMemAllocFromPoolAsync_ptsz), PROC(cuMemFreeAsync),
    PROC(cuDeviceGetDefaultMemPool), PROC(cuMemGetInfo_v2), PROC(cuArrayCreate_v2),
    PROC(cuArray3DCreate_v2), PROC(cuMipmappedArrayCreate), PROC(cuArrayDestroy),
    PROC(cuMipmappedArrayDestroy), PROC(cuModuleLoadData), PROC(cuModuleLoad), PROC(cuModuleUnload),
    PROC(cuModuleGetFunction), PROC(cuStreamCreate), PROC(cuStreamDestroy_v2),
    PROC(cuStreamSynchronize), PROC(cuStreamQuery), PROC(cuStreamIsCapturing), PROC(cuEventCreate), PROC(cuEventDestroy_v2),
    PROC(cuEventRecord), PROC(cuEventQuery), PROC(cuEventSynchronize), PROC(cuEventElapsedTime),
    PROC(cuEventElapsedTime_v2), PROC(cuLaunchKernel), PROC(cuLaunchKernel_ptsz),
    PROC(cuLaunchKernelEx), PROC(cuLaunchKernelEx_ptsz), PROC(cuLaunchCooperativeKernel),
    PROC(cuLaunchCooperativeKernel_ptsz), PROC(cuGraphCreate), PROC(cuGraphAddKernelNode_v2),
    PROC(cuGraphAddKernelNode), PROC(cuGraphInstantiateWithFlags), PROC(cuGraphLaunch),
    PROC(cuGraphLaunch_ptsz), PROC(cuGraphExecDestroy), PROC(cuGraphDestroy),
    {"cuGetProcAddress", NULL}, {"cuGetProcAddress_v2", NULL},
};

static void *proc_lookup(const char *name);

EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status) {
    (void)ver;
    char buf[128];
    const char *suffixes[] = {(flags & 2) ? "_ptsz" : "", "_v3", "_v2", ""};
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        snprintf(buf, sizeof buf, "%s%s", sym, suffixes[i]);
        void *fn = proc_lookup(buf);
        if (fn) {
            *pfn = fn;
            if (status) *status = 0;
            return CUDA_SUCCESS;
        }
    }
    *pfn = NULL;
    if (status) *status = 1;
    return CUDA_ERROR_NOT_FOUND;
}
EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags) {
    return cuGetProcAddress_v2(sym, pfn, ver, flags, NULL);
}

static void *proc_lookup(const char *name) {
    if (strcmp(name, "cuGetProcAddress") == 0) return (void *)cuGetProcAddress;
    if (strcmp(name, "cuGetProcAddress_v2") == 0) return (void *)cuGetProcAddress_v2;
    for (size_t i = 0; i < sizeof procs / sizeof *procs; i++)
        if (procs[i].fn && strcmp(procs[i].name, name) == 0) return procs[i].fn;
    return NULL;
}
