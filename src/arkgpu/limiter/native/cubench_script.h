/* arkgpu-cubench script mode: one command per line on stdin, one reply line.
 *   alloc KIND BYTES  KIND: alloc pitch managed vmm vmm1 async pool array array3d mipmap
 *                     -> "ok ID BYTES" (BYTES as the test should count them) | "oom" | "err CODE"
 *   free ID           -> "ok" | "err CODE"
 *   info              -> "FREE TOTAL" from cuMemGetInfo
 *   devtotal          -> cuDeviceTotalMem
 *   nvml              -> "TOTAL FREE USED" from nvmlDeviceGetMemoryInfo
 *   nvml2             -> "TOTAL FREE USED RESERVED" from nvmlDeviceGetMemoryInfo_v2
 *   launch PATH US    -> "ok" | "err CODE"
 *   async US          -> one US-microsecond kernel between two events: "RET READY ELAPSED",
 *                        RET the µs the launch call took, READY "ready"/"notready" for the
 *                        end event just after it, ELAPSED the µs between the events
 *   procaddr NAME     -> "hook" when cuGetProcAddress_v2 returns the limiter's hook, else "real"
 *   procaddr1 NAME    -> the same through cuGetProcAddress (the CUDA 11 signature)
 *   procaddrpt NAME   -> "hook|real SYMBOL": cuGetProcAddress_v2 asked for the
 *                        per-thread-default-stream version, and the symbol it gave
 *   hold MS           -> prints "holding", then holds the region lock for MS ms
 *   forkalloc BYTES MS -> a forked child allocates BYTES, prints "child ok|oom", lives MS ms;
 *                        the parent replies "forked PID"; the two lines come in either order
 *   thread BYTES US   -> a new thread binds the context, creates its own stream, allocates
 *                        BYTES (cuMemAlloc) and launches one US-microsecond kernel on the
 *                        stream, then ends: "ok ID BYTES" | "oom" | "err CODE" as for alloc
 *   limitscheck MS S1 B1 M1 S2 B2 M2 -> "mixed M of N generations G" (see limits_check)
 *   attack PATH       -> tries to write PATH three ways: "open-rw:R mprotect:R mmap-rw:R",
 *                        each R "allowed" or "denied"
 *   module            -> loads a module (the fake driver's FAKEGPU_MODULE_MIB): "ok" | "err CODE"
 *   quit */
#define MAX_ITEMS 65536

typedef struct {
    int kind; /* 0 free slot, 1 linear, 2 async, 3 vmm, 4 array, 5 mipmap */
    uint64_t v;
} item;

static item items[MAX_ITEMS];
static int nitems;

static void reply_alloc(CUresult r, int kind, uint64_t v, uint64_t bytes) {
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        printf("oom\n");
    } else if (r != CUDA_SUCCESS || nitems >= MAX_ITEMS) {
        printf("err %d\n", r);
    } else {
        items[nitems] = (item){kind, v};
        printf("ok %d %llu\n", nitems++, (unsigned long long)bytes);
    }
}

static void do_alloc(const char *kind, uint64_t n) {
    CUdeviceptr p = 0;
    CUresult r;
    if (strcmp(kind, "alloc") == 0) {
        r = p_cuMemAlloc_v2(&p, n);
        reply_alloc(r, 1, p, n);
    } else if (strcmp(kind, "pitch") == 0) { /* rows of 512 bytes: pitch = width */
        size_t pitch;
        r = p_cuMemAllocPitch_v2(&p, &pitch, 512, (n + 511) / 512, 4);
        reply_alloc(r, 1, p, (n + 511) / 512 * 512);
    } else if (strcmp(kind, "managed") == 0) {
        r = p_cuMemAllocManaged(&p, n, 1);
        reply_alloc(r, 1, p, n);
    } else if (strcmp(kind, "async") == 0 || strcmp(kind, "async_ptsz") == 0) {
        r = (kind[5] ? p_cuMemAllocAsync_ptsz : p_cuMemAllocAsync)(&p, n, NULL);
        reply_alloc(r, 2, p, n);
    } else if (strcmp(kind, "pool") == 0 || strcmp(kind, "pool_ptsz") == 0) {
        CUmemoryPool pool;
        p_cuDeviceGetDefaultMemPool(&pool, 0);
        r = (kind[4] ? p_cuMemAllocFromPoolAsync_ptsz : p_cuMemAllocFromPoolAsync)(&p, n, pool, NULL);
        reply_alloc(r, 2, p, n);
    } else if (strcmp(kind, "vmm") == 0 || strcmp(kind, "vmm1") == 0) { /* vmm1: on GPU 1 */
        CUmemGenericAllocationHandle h = 0;
        CUmemAllocationProp prop = {.type = 1, .location = {1, kind[3] == '1'}};
        r = p_cuMemCreate(&h, n, &prop, 0);
        reply_alloc(r, 3, h, n);
    } else if (strcmp(kind, "array") == 0) { /* float4 texels, width n/16 */
        CUarray a = NULL;
        CUDA_ARRAY_DESCRIPTOR d = {(n + 15) / 16, 1, CU_AD_FORMAT_FLOAT, 4};
        r = p_cuArrayCreate_v2(&a, &d);
        reply_alloc(r, 4, (uint64_t)(uintptr_t)a, (n + 15) / 16 * 16);
    } else if (strcmp(kind, "array3d") == 0) { /* 2 x 2 x w bytes */
        CUarray a = NULL;
        uint64_t w = (n + 3) / 4;
        CUDA_ARRAY3D_DESCRIPTOR d = {w, 2, 2, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
        r = p_cuArray3DCreate_v2(&a, &d);
        reply_alloc(r, 4, (uint64_t)(uintptr_t)a, w * 4);
    } else if (strcmp(kind, "mipmap") == 0) { /* 1-D, two levels: w + w/2 bytes */
        CUmipmappedArray a = NULL;
        uint64_t w = (n + 1) / 2 * 2;
        CUDA_ARRAY3D_DESCRIPTOR d = {w, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
        r = p_cuMipmappedArrayCreate(&a, &d, 2);
        reply_alloc(r, 5, (uint64_t)(uintptr_t)a, w + w / 2);
    } else {
        printf("err badkind\n");
    }
}

static void do_free(int id) {
    if (id < 0 || id >= nitems || !items[id].kind) {
        printf("err badid\n");
        return;
    }
    item *it = &items[id];
    CUresult r = it->kind == 1   ? p_cuMemFree_v2(it->v)
                 : it->kind == 2 ? p_cuMemFreeAsync(it->v, NULL)
                 : it->kind == 3 ? p_cuMemRelease(it->v)
                 : it->kind == 4 ? p_cuArrayDestroy((CUarray)(uintptr_t)it->v)
                                 : p_cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)it->v);
    if (r == CUDA_SUCCESS) it->kind = 0;
    if (r == CUDA_SUCCESS)
        printf("ok\n");
    else
        printf("err %d\n", r);
}

typedef struct {
    uint64_t bytes, kernel_ns;
    CUdeviceptr p;
    CUresult alloc, launch;
} thread_job;

static void *thread_body(void *arg) {
    thread_job *j = arg;
    CUstream s = NULL;
    j->alloc = j->launch = CUDA_ERROR_INVALID_CONTEXT;
    if (p_cuCtxSetCurrent(ctx) || p_cuStreamCreate(&s, 0)) return NULL;
    j->alloc = p_cuMemAlloc_v2(&j->p, j->bytes);
    void *params[] = {&j->kernel_ns};
    j->launch = p_cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
    p_cuStreamDestroy_v2(s);
    return NULL;
}

static void thread_alloc_launch(uint64_t bytes, uint64_t us) {
    thread_job j = {.bytes = bytes, .kernel_ns = us * 1000};
    pthread_t t;
    if (pthread_create(&t, NULL, thread_body, &j) != 0 || pthread_join(t, NULL) != 0) {
        printf("err thread\n");
        return;
    }
    if (j.launch != CUDA_SUCCESS && j.alloc == CUDA_SUCCESS) p_cuMemFree_v2(j.p);
    if (j.launch != CUDA_SUCCESS)
        printf("err %d\n", j.launch);
    else
        reply_alloc(j.alloc, 1, j.p, bytes);
}

static void attack(const char *path) {
    int fd = open(path, O_RDWR);
    printf("open-rw:%s ", fd >= 0 ? "allowed" : "denied");
    if (fd >= 0) close(fd);
    fd = open(path, O_RDONLY);
    void *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    printf("mprotect:%s ", p != MAP_FAILED && mprotect(p, 4096, PROT_READ | PROT_WRITE) == 0 ? "allowed" : "denied");
    void *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    printf("mmap-rw:%s\n", w != MAP_FAILED ? "allowed" : "denied");
    close(fd);
}

/* limitscheck MS S1 B1 M1 S2 B2 M2: read the limits the library acts on for
 * MS milliseconds; count reads that are neither record 1 nor record 2
 * (share, burst, mode) and the changes of generation seen. */
static void limits_check(const char *args) {
    unsigned long long n, want[6];
    if (sscanf(args, "%llu %llu %llu %llu %llu %llu %llu", &n, &want[0], &want[1], &want[2], &want[3], &want[4],
               &want[5]) != 7) {
        printf("err args\n");
        return;
    }
    int (*get)(uint64_t *) = (int (*)(uint64_t *))dlsym(RTLD_DEFAULT, "arkgpu_limiter_debug_limits");
    if (!get) {
        printf("err nohook\n");
        return;
    }
    unsigned long long mixed = 0, gens = 0, last_gen = ~0ull, reads = 0;
    int64_t end = now_ns() + (int64_t)n * 1000000;
    for (unsigned long long i = 0; (i & 1023) || now_ns() < end; i++, reads++) {
        uint64_t v[4];
        if (get(v) != 0) {
            printf("err denied\n");
            return;
        }
        int one = v[0] == want[0] && v[1] == want[1] && v[2] == want[2];
        int two = v[0] == want[3] && v[1] == want[4] && v[2] == want[5];
        mixed += !one && !two;
        gens += v[3] != last_gen;
        last_gen = v[3];
    }
    printf("mixed %llu of %llu generations %llu\n", mixed, reads, gens);
}

static int run_script(void) {
    char line[512], a[128];
    unsigned long long n;
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin)) {
        if (sscanf(line, "alloc %127s %llu", a, &n) == 2) {
            do_alloc(a, n);
        } else if (sscanf(line, "free %llu", &n) == 1) {
            do_free((int)n);
        } else if (strncmp(line, "info", 4) == 0) {
            size_t f = 0, t = 0;
            CUresult r = p_cuMemGetInfo_v2(&f, &t);
            if (r)
                printf("err %d\n", r);
            else
                printf("%zu %zu\n", f, t);
        } else if (strncmp(line, "devtotal", 8) == 0) {
            size_t t = 0;
            p_cuDeviceTotalMem_v2(&t, 0);
            printf("%zu\n", t);
        } else if (strncmp(line, "nvml2", 5) == 0) {
            nvmlDevice_t d;
            /* nvmlMemory_v2: the struct size with version 2 in the top byte */
            nvmlMemory_v2_t m = {.version = (unsigned)sizeof(nvmlMemory_v2_t) | (2u << 24)};
            if (!p_nvmlInit_v2 || p_nvmlInit_v2() || p_nvmlDeviceGetHandleByIndex_v2(0, &d) ||
                p_nvmlDeviceGetMemoryInfo_v2(d, &m))
                printf("err nvml\n");
            else
                printf("%llu %llu %llu %llu\n", m.total, m.free, m.used, m.reserved);
        } else if (strncmp(line, "nvml", 4) == 0) {
            nvmlDevice_t d;
            nvmlMemory_t m = {0, 0, 0};
            if (!p_nvmlInit_v2 || p_nvmlInit_v2() || p_nvmlDeviceGetHandleByIndex_v2(0, &d) ||
                p_nvmlDeviceGetMemoryInfo(d, &m))
                printf("err nvml\n");
            else
                printf("%llu %llu %llu\n", m.total, m.free, m.used);
        } else if (sscanf(line, "launch %127s %llu", a, &n) == 2) {
            CUresult r = launch_path(a, n * 1000);
            if (r)
                printf("err %d\n", r);
            else
                printf("ok\n");
        } else if (sscanf(line, "async %llu", &n) == 1) {
            CUevent s0, e0;
            float ms = 0;
            p_cuEventCreate(&s0, 0);
            p_cuEventCreate(&e0, 0);
            p_cuEventRecord(s0, NULL);
            int64_t t0 = now_ns();
            launch_path("kernel", n * 1000);
            int64_t ret = now_ns() - t0;
            p_cuEventRecord(e0, NULL);
            int ready = p_cuEventQuery(e0) == CUDA_SUCCESS;
            p_cuEventSynchronize(e0);
            p_cuEventElapsedTime(&ms, s0, e0);
            printf("%lld %s %.0f\n", (long long)(ret / 1000), ready ? "ready" : "notready", ms * 1000.0);
        } else if (sscanf(line, "procaddrpt %127s", a) == 1) {
            void *fn = NULL;
            p_cuGetProcAddress_v2(a, &fn, 12040, 2 /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */, NULL);
            Dl_info info;
            int found = fn && dladdr(fn, &info);
            printf("%s %s\n", found && strstr(info.dli_fname, "arkgpu_limiter") ? "hook" : "real",
                   found && info.dli_sname ? info.dli_sname : "?");
        } else if (sscanf(line, "procaddr1 %127s", a) == 1 || sscanf(line, "procaddr %127s", a) == 1) {
            void *fn = NULL;
            if (line[8] == '1')
                p_cuGetProcAddress(a, &fn, 11080, 0);
            else
                p_cuGetProcAddress_v2(a, &fn, 12040, 0, NULL);
            Dl_info info;
            printf("%s\n", fn && dladdr(fn, &info) && strstr(info.dli_fname, "arkgpu_limiter") ? "hook" : "real");
        } else if (sscanf(line, "hold %llu", &n) == 1) {
            int (*hold)(unsigned) = (int (*)(unsigned))dlsym(RTLD_DEFAULT, "arkgpu_limiter_debug_hold_lock");
            printf("holding\n");
            fflush(stdout);
            if (hold) hold((unsigned)n);
            printf(hold ? "released\n" : "err nohook\n");
        } else if (sscanf(line, "forkalloc %llu %127s", &n, a) == 2) {
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                CUdeviceptr p = 0;
                CUresult r = p_cuMemAlloc_v2(&p, n);
                printf("child %s\n", r == CUDA_SUCCESS ? "ok" : r == CUDA_ERROR_OUT_OF_MEMORY ? "oom" : "err");
                fflush(stdout);
                usleep((useconds_t)atol(a) * 1000);
                _exit(0);
            }
            printf("forked %d\n", (int)pid);
        } else if (sscanf(line, "thread %llu %127s", &n, a) == 2) {
            thread_alloc_launch(n, strtoull(a, NULL, 10));
        } else if (strncmp(line, "limitscheck ", 12) == 0) {
            limits_check(line + 12);
        } else if (sscanf(line, "attack %127s", a) == 1) {
            attack(a);
        } else if (strncmp(line, "module", 6) == 0) {
            CUmodule m;
            CUresult r = p_cuModuleLoadData(&m, "");
            if (r) printf("err %d\n", r); else printf("ok\n");
        } else if (strncmp(line, "quit", 4) == 0) {
            return 0;
        } else {
            printf("err badcmd\n");
        }
    }
    return 0;
}
