/* Internal declarations shared by the fake driver's source files. */
#ifndef ARKGPU_FAKECUDA_H
#define ARKGPU_FAKECUDA_H
#define _GNU_SOURCE
#include <stdio.h>

#include "../cuda_abi.h"
#include "../ptrmap.h"
#include "fakegpu_state.h"
#include "fakeprocs.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_GRAPH_NODES 256
#define FAKE_QUEUE_DEPTH 4 /* kernels a stream holds before a launch waits */

struct CUfunc_st { int64_t fixed_ns; };
struct CUmod_st { int dummy; };
struct CUctx_st { int dev; };
struct CUevent_st { int64_t t; int recorded; };
struct CUstream_st {
    CUevent pending;      /* recorded last, before any kernel: moves to the next kernel's start */
    int after_kernel;     /* the last work was a kernel */
    int64_t kernel_end;   /* when that kernel ends */
    int64_t starts[FAKE_QUEUE_DEPTH]; /* starts of the last booked kernels, a ring */
    unsigned launches;                /* kernels booked on the stream */
    int64_t last_end;     /* end of the stream's booked work */
};
struct CUgraph_st { int n; uint64_t ns[MAX_GRAPH_NODES]; };
struct CUgraphExec_st { int n; uint64_t ns[MAX_GRAPH_NODES]; };
struct CUgraphNode_st { int idx; };
struct CUarray_st { uint64_t bytes; };
struct CUmipmappedArray_st { uint64_t bytes; };
struct CUmemPoolHandle_st { int dev; };

typedef struct {
    pthread_once_t once;
    pthread_mutex_t mu; /* guards everything below */
    fakegpu_state *st;
    unsigned ndev;
    unsigned long long total;
    unsigned long long used[FAKEGPU_MAX_DEVICES];
    uint64_t next_addr;
    uint64_t next_handle;
    ptrmap allocs; /* address or handle -> bytes, device */
    struct CUctx_st primary[FAKEGPU_MAX_DEVICES];
    struct CUstream_st null_stream;
    struct CUmemPoolHandle_st pools[FAKEGPU_MAX_DEVICES];
    int64_t last_end; /* end of all booked work of this process */
    _Atomic uint64_t proc_busy_ns;
    _Atomic uint64_t launches;
    /* What NVML shows of this process per device (fakeprocs.h): the context's
     * reserve (FAKEGPU_CTX_RESERVE_MIB), loaded modules (FAKEGPU_MODULE_MIB)
     * and the bytes allocated; claimed by the pid that created the context. */
    fakeprocs_table *procs;
    int procs_tried;
    fakeprocs_entry *ent[FAKEGPU_MAX_DEVICES];
    pid_t ent_pid;
} fake_process;

extern fake_process g;

extern __thread CUcontext tls_ctx;

int fake_ready(void);
/* This process's NVML entry on dev, claimed (with the context's reserve) on
 * first use; NULL when the table is full or missing. The caller holds g.mu. */
fakeprocs_entry *fake_entry(int dev);
void fake_entry_add(int dev, uint64_t bytes);
void fake_entry_sub(int dev, uint64_t bytes);
int fake_cur_dev(void);

/* Memory entry points (fakecuda_mem.c), for the cuGetProcAddress table. */
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n);
CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned eb);
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned flags);
CUresult cuMemFree_v2(CUdeviceptr p);
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop,
                     unsigned long long flags);
CUresult cuMemRelease(CUmemGenericAllocationHandle h);
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s);
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice d);
CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b);
CUresult cuArrayCreate_v2(CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d);
CUresult cuArray3DCreate_v2(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d);
CUresult cuMipmappedArrayCreate(CUmipmappedArray *a, const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels);
CUresult cuArrayDestroy(CUarray a);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray a);

#endif
