/* The fake driver's device memory: linear allocations, VMM handles, pools,
 * arrays; accounted per process against FAKEGPU_MEM_MIB. */
#include "fakecuda.h"

/* ---- memory ---- */
/* Account bytes on dev under key (0: a fresh address; 1: a fresh handle). */
static CUresult mem_take(uint64_t bytes, int dev, uint64_t key, unsigned long long *out) {
    if (!fake_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    if (!tls_ctx) return CUDA_ERROR_INVALID_CONTEXT;
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    fake_lock(&g.mu);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (g.used[dev] + bytes <= g.total) {
        if (key == 0) {
            key = g.next_addr;
            g.next_addr += (bytes + 0xfffff) & ~0xfffffull;
        } else if (key == 1) {
            key = g.next_handle++;
        }
        if (ptrmap_put(&g.allocs, key, bytes, (uint64_t)dev) == 0) {
            g.used[dev] += bytes;
            fake_entry_add(dev, bytes);
            *out = key;
            r = CUDA_SUCCESS;
        }
    }
    fake_unlock(&g.mu);
    return r;
}

static CUresult mem_give(uint64_t key) {
    uint64_t bytes, dev;
    fake_lock(&g.mu);
    int r = ptrmap_take(&g.allocs, key, &bytes, &dev);
    if (r == 0) {
        g.used[dev] -= bytes;
        fake_entry_sub((int)dev, bytes);
    }
    fake_unlock(&g.mu);
    return r == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { return mem_take(n, fake_cur_dev(), 0, p); }
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned eb) {
    (void)eb;
    *pitch = (w + 511) & ~(size_t)511;
    return mem_take(*pitch * h, fake_cur_dev(), 0, p);
}
EXPORT CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned flags) {
    (void)flags;
    return mem_take(n, fake_cur_dev(), 0, p);
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) { return mem_give(p); }
EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop,
                            unsigned long long flags) {
    (void)flags;
    int dev = prop ? prop->location.id : 0;
    if (dev < 0 || (unsigned)dev >= g.ndev) return CUDA_ERROR_INVALID_DEVICE;
    return mem_take(n, dev, 1, h);
}
EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) { return mem_give(h); }
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) {
    (void)s;
    return mem_take(n, fake_cur_dev(), 0, p);
}
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s) {
    (void)s;
    return mem_take(n, pool ? pool->dev : fake_cur_dev(), 0, p);
}
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s) { return cuMemAllocAsync(p, n, s); }
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s) {
    return cuMemAllocFromPoolAsync(p, n, pool, s);
}
EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { (void)s; return mem_give(p); }
EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice d) {
    fake_ready();
    *pool = &g.pools[d];
    return CUDA_SUCCESS;
}
EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b) {
    if (!fake_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    fake_lock(&g.mu);
    *free_b = g.total - g.used[fake_cur_dev()];
    *total_b = g.total;
    fake_unlock(&g.mu);
    return CUDA_SUCCESS;
}

static uint64_t elem_bytes(CUarray_format f) {
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    default: return 4;
    }
}

static CUresult array_new(void **out, size_t w, size_t h, size_t d, CUarray_format f, unsigned ch,
                          unsigned levels) {
    uint64_t bytes = 0;
    for (unsigned l = 0; l < (levels ? levels : 1); l++) {
        size_t lw = w >> l ? w >> l : 1, lh = h >> l ? h >> l : 1, ld = d >> l ? d >> l : 1;
        bytes += (uint64_t)lw * (h ? lh : 1) * (d ? ld : 1) * ch * elem_bytes(f);
    }
    struct CUarray_st *a = malloc(sizeof *a);
    if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
    a->bytes = bytes;
    unsigned long long key;
    CUresult r = mem_take(bytes, fake_cur_dev(), (uint64_t)(uintptr_t)a, &key);
    if (r != CUDA_SUCCESS) {
        free(a);
        return r;
    }
    *out = a;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuArrayCreate_v2(CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d) {
    return array_new((void **)a, d->Width, d->Height, 0, d->Format, d->NumChannels, 1);
}
EXPORT CUresult cuArray3DCreate_v2(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    return array_new((void **)a, d->Width, d->Height, d->Depth, d->Format, d->NumChannels, 1);
}
EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *a, const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels) {
    return array_new((void **)a, d->Width, d->Height, d->Depth, d->Format, d->NumChannels, levels);
}
static CUresult array_free(void *a) {
    CUresult r = mem_give((uint64_t)(uintptr_t)a);
    if (r == CUDA_SUCCESS) free(a);
    return r;
}
EXPORT CUresult cuArrayDestroy(CUarray a) { return array_free(a); }
EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray a) { return array_free(a); }
