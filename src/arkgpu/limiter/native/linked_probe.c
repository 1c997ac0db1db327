/* A client linked against libcuda.so.1 at build time (no dlsym): checks that
 * the preloaded library's exported functions win symbol resolution.
 * Usage: arkgpu-linked-probe BYTES -> prints the cuMemAlloc_v2 result code. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_abi.h"

CUresult cuInit(unsigned);
CUresult cuCtxCreate_v2(CUcontext *, unsigned, CUdevice);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);

int main(int argc, char **argv) {
    CUcontext ctx;
    CUdeviceptr p;
    if (argc < 2 || cuInit(0) || cuCtxCreate_v2(&ctx, 0, 0)) return 2;
    printf("%d\n", cuMemAlloc_v2(&p, strtoull(argv[1], NULL, 10)));
    return 0;
}
