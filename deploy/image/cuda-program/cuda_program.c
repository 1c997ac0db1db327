/*
 * A user's CUDA program, as small as can be: the workload of the "plain image"
 * (docs/IMAGE.md). It calls the CUDA driver API the way the CUDA runtime does:
 * libcuda.so.1 is opened with dlopen at run time, never linked at build time,
 * so the image carries no driver; the node hands its driver to the container
 * (NVIDIA's container toolkit in CDI mode; the project's fake driver in tests).
 *
 *   cuda-program info              {"free_mib": F, "total_mib": T}   (cuMemGetInfo)
 *   cuda-program alloc MIB         {"mib": M, "result": "ok" | "out_of_memory" | "error N"}
 *                                  exit status 0, 2 when out of memory, 1 on another error
 *   cuda-program busy SECONDS US   launches a US-microsecond kernel back to back for SECONDS,
 *                                  each awaited; {"seconds": S, "launches": N, "busy_share": B},
 *                                  B = N * US / wall time (the share of time the GPU ran it)
 *
 * The kernel is "spin" (PTX below: it waits on the GPU's global timer for the
 * number of nanoseconds in its parameter), which the fake driver also knows.
 * Build: gcc -O2 -o cuda-program cuda_program.c -ldl (no CUDA toolkit).
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream;
typedef unsigned long long CUdeviceptr;
#define CUDA_ERROR_OUT_OF_MEMORY 2

static const char SPIN_PTX[] =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry spin(.param .u64 ns)\n{\n"
    "  .reg .pred %p<2>;\n  .reg .b64 %rd<6>;\n"
    "  ld.param.u64 %rd1, [ns];\n  mov.u64 %rd2, %globaltimer;\n"
    "WAIT:\n  mov.u64 %rd3, %globaltimer;\n  sub.u64 %rd4, %rd3, %rd2;\n"
    "  setp.lt.u64 %p1, %rd4, %rd1;\n  @%p1 bra WAIT;\n  ret;\n}\n";

static struct {
    CUresult (*init)(unsigned);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*ctx_create)(CUcontext *, unsigned, CUdevice);
    CUresult (*mem_get_info)(size_t *, size_t *);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t);
    CUresult (*module_load_data)(CUmodule *, const void *);
    CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
    CUresult (*launch)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                       CUstream, void **, void **);
    CUresult (*ctx_synchronize)(void);
} cu;

static void *symbol(void *lib, const char *name) {
    void *found = dlsym(lib, name);
    if (!found) {
        fprintf(stderr, "cuda-program: libcuda.so.1 has no %s\n", name);
        exit(1);
    }
    return found;
}

static void check(CUresult r, const char *what) {
    if (r != 0) {
        fprintf(stderr, "cuda-program: %s failed: CUresult %d\n", what, r);
        exit(1);
    }
}

static void open_driver(void) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "cuda-program: no CUDA driver in this container: %s\n", dlerror());
        exit(1);
    }
    *(void **)&cu.init = symbol(lib, "cuInit");
    *(void **)&cu.device_get = symbol(lib, "cuDeviceGet");
    *(void **)&cu.ctx_create = symbol(lib, "cuCtxCreate_v2");
    *(void **)&cu.mem_get_info = symbol(lib, "cuMemGetInfo_v2");
    *(void **)&cu.mem_alloc = symbol(lib, "cuMemAlloc_v2");
    *(void **)&cu.module_load_data = symbol(lib, "cuModuleLoadData");
    *(void **)&cu.module_get_function = symbol(lib, "cuModuleGetFunction");
    *(void **)&cu.launch = symbol(lib, "cuLaunchKernel");
    *(void **)&cu.ctx_synchronize = symbol(lib, "cuCtxSynchronize");
    CUdevice dev;
    CUcontext ctx;
    check(cu.init(0), "cuInit");
    check(cu.device_get(&dev, 0), "cuDeviceGet");
    check(cu.ctx_create(&ctx, 0, dev), "cuCtxCreate");
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int info(void) {
    size_t free_b, total_b;
    check(cu.mem_get_info(&free_b, &total_b), "cuMemGetInfo");
    printf("{\"free_mib\": %zu, \"total_mib\": %zu}\n", free_b >> 20, total_b >> 20);
    return 0;
}

static int alloc(const char *mib_text) {
    size_t mib = strtoull(mib_text, NULL, 10);
    CUdeviceptr p;
    CUresult r = cu.mem_alloc(&p, mib << 20);
    if (r == 0) printf("{\"mib\": %zu, \"result\": \"ok\"}\n", mib);
    else if (r == CUDA_ERROR_OUT_OF_MEMORY) printf("{\"mib\": %zu, \"result\": \"out_of_memory\"}\n", mib);
    else printf("{\"mib\": %zu, \"result\": \"error %d\"}\n", mib, r);
    return r == 0 ? 0 : r == CUDA_ERROR_OUT_OF_MEMORY ? 2 : 1;
}

static int busy(const char *seconds_text, const char *us_text) {
    double seconds = atof(seconds_text), us = atof(us_text);
    uint64_t ns = (uint64_t)(us * 1000.0);
    void *params[] = {&ns};
    CUmodule mod;
    CUfunction spin;
    check(cu.module_load_data(&mod, SPIN_PTX), "cuModuleLoadData");
    check(cu.module_get_function(&spin, mod, "spin"), "cuModuleGetFunction");
    long launches = 0;
    double start = now_s(), end = start + seconds;
    while (now_s() < end) {
        check(cu.launch(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), "cuLaunchKernel");
        check(cu.ctx_synchronize(), "cuCtxSynchronize");
        launches++;
    }
    double wall = now_s() - start;
    printf("{\"seconds\": %.3f, \"launches\": %ld, \"busy_share\": %.4f}\n", wall, launches,
           (double)launches * us / 1e6 / wall);
    return 0;
}

int main(int argc, char **argv) {
    const char *command = argc > 1 ? argv[1] : "info";
    if (strcmp(command, "info") == 0 && argc <= 2) return open_driver(), info();
    if (strcmp(command, "alloc") == 0 && argc == 3) return open_driver(), alloc(argv[2]);
    if (strcmp(command, "busy") == 0 && argc == 4) return open_driver(), busy(argv[2], argv[3]);
    fprintf(stderr, "usage: cuda-program info | alloc MIB | busy SECONDS KERNEL_US\n");
    return 64;
}
