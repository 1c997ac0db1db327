/*
 * Memory hooks: every device allocation path reserves its bytes against the
 * container's cap (per device, across all the container's processes, under
 * the region lock) before the driver is called, and is refused with
 * CUDA_ERROR_OUT_OF_MEMORY beyond it. Frees and releases give the bytes back.
 * Memory queries report the cap and the container's own use.
 */
#include "limiter.h"

#include <sched.h>

/* 1: the bytes fit, with the requested bytes and the driver reserve of the
 * live processes, within the cap; 2: they fit but land within margin of the
 * cap while this process's reserve was measured over 10 ms ago (measure it,
 * then judge again); 0: they do not fit. The caller locks. */
static int fits(int dev, uint64_t cap, uint64_t bytes, uint64_t margin) {
    uint64_t held = sat_addu(LD(arkgpu_st.usage->used[dev]), LD(arkgpu_st.usage->reserved[dev]));
    if (bytes > cap || held > cap - bytes) return 0;
    if (LIKELY(sat_addu(held + bytes, margin) <= cap)) return 1;
    return arkgpu_now_ns() - atomic_load(&arkgpu_st.rsv.measured_ns[dev]) >= ARKGPU_RESERVE_SLOW_NS ? 2 : 1;
}

/* Reserve bytes under the cap. The process's driver reserve is measured first
 * at its first allocation on dev, and (NVML, without the lock) when the bytes
 * land near the cap or do not fit; when they do not fit, dead processes'
 * memory is also looked for (through /proc, without the lock) and the fit
 * tried again. */
static CUresult reserve(int dev, int kind, uint64_t bytes) {
    if (!arkgpu_ready()) return CUDA_ERROR_OUT_OF_MEMORY;
    if (dev < 0 || dev >= ARKGPU_MAX_DEVICES) return CUDA_ERROR_INVALID_DEVICE;
    const limits_view *l = arkgpu_limits_now();
    uint64_t cap = (unsigned)dev < l->num_devices ? l->mem_limit[dev] : 0;
    uint64_t margin = (uint64_t)l->reserve_margin_mib << 20;
    arkgpu_usage *u = arkgpu_st.usage;
    if (UNLIKELY(!atomic_load_explicit(&arkgpu_st.rsv.measured_ns[dev], memory_order_relaxed)))
        arkgpu_reserve_refresh(dev, 0);
    int fit = 0, reclaimed = 0;
    for (;;) {
        if (arkgpu_usage_lock() != 0) return CUDA_ERROR_OUT_OF_MEMORY;
        fit = fits(dev, cap, bytes, margin);
        if (fit == 1) {
            ST(u->used[dev], LD(u->used[dev]) + bytes);
            arkgpu_debug_hold(HOLD_ALLOC);
            arkgpu_st.me->bytes[dev][kind] += bytes;
        }
        arkgpu_usage_unlock();
        if (fit == 1 || (fit == 0 && reclaimed)) break;
        if (fit == 0) {
            arkgpu_reclaim_dead();
            reclaimed = 1;
        }
        arkgpu_reserve_refresh(dev, ARKGPU_RESERVE_SLOW_NS);
        margin = 0; /* measured now: judge on the figure */
    }
    if (fit != 1) __atomic_fetch_add(&arkgpu_st.me->oom_refusals, 1, __ATOMIC_RELAXED);
    return fit == 1 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Give bytes back; with a broken lock they stay counted (never under-count). */
static void unreserve(int dev, int kind, uint64_t bytes) {
    arkgpu_usage *u = arkgpu_st.usage;
    if (dev < 0 || dev >= ARKGPU_MAX_DEVICES || kind < 0 || kind >= ARKGPU_KINDS) return;
    if (arkgpu_usage_lock() != 0) return;
    uint64_t used = LD(u->used[dev]);
    ST(u->used[dev], used - (bytes < used ? bytes : used));
    arkgpu_debug_hold(HOLD_FREE);
    uint64_t *mine = &arkgpu_st.me->bytes[dev][kind];
    *mine -= bytes < *mine ? bytes : *mine;
    arkgpu_usage_unlock();
}

/* The process's allocation table is guarded by a spinlock: it is held only
 * for a table operation, and is cheaper than a mutex when nobody contends. */
static void map_lock(void) {
    while (atomic_flag_test_and_set_explicit(&arkgpu_st.map_busy, memory_order_acquire)) sched_yield();
}
static void map_unlock(void) { atomic_flag_clear_explicit(&arkgpu_st.map_busy, memory_order_release); }

static void track(ptrmap *m, uint64_t key, uint64_t bytes, int dev, int kind) {
    map_lock();
    int r = ptrmap_put(m, key, bytes, (uint64_t)dev << 8 | (uint64_t)kind);
    map_unlock();
    if (r) unreserve(dev, kind, bytes); /* cannot track: do not count what we cannot free */
}

/* Finish an allocation: keep it when the driver succeeded, else give it back. */
static CUresult settle(CUresult r, ptrmap *m, uint64_t key, uint64_t bytes, int dev, int kind) {
    if (r == CUDA_SUCCESS)
        track(m, key, bytes, dev, kind);
    else
        unreserve(dev, kind, bytes);
    return r;
}

/* Forget key and call the driver's free; restore the entry if the free fails. */
#define RELEASE(map, key, call)                                                              \
    do {                                                                                     \
        if (!arkgpu_ready()) return call;                                                    \
        uint64_t bytes_ = 0, tag_ = 0;                                                       \
        map_lock();                                                   \
        int found_ = ptrmap_take(map, key, &bytes_, &tag_) == 0;                             \
        map_unlock();                                                                        \
        arkgpu_drv_enter();                                                                  \
        CUresult r_ = call;                                                                  \
        if (found_ && r_ == CUDA_SUCCESS)                                                    \
            unreserve((int)(tag_ >> 8), (int)(tag_ & 0xff), bytes_);                         \
        else if (found_) {                                                                   \
            map_lock();                                                                      \
            ptrmap_put(map, key, bytes_, tag_);                                              \
            map_unlock();                                                                    \
        }                                                                                    \
        arkgpu_drv_leave();                                                                  \
        return r_;                                                                           \
    } while (0)

#define NEED(name)       \
    (void)arkgpu_ready(); \
    if (!REAL(name)) return CUDA_ERROR_NOT_SUPPORTED

static CUresult alloc_linear(CUdeviceptr *p, size_t n, int kind, int dev, CUresult (*call)(void *),
                             void *ctx) {
    if (n == 0) return call(ctx);
    arkgpu_drv_enter();
    CUresult r = reserve(dev, kind, n);
    if (r == CUDA_SUCCESS) {
        r = call(ctx); /* before *p is read */
        r = settle(r, &arkgpu_st.ptrs, *p, n, dev, kind);
    }
    arkgpu_drv_leave();
    return r;
}

struct alloc_args {
    CUdeviceptr *p;
    size_t n;
    unsigned flags;
    CUmemoryPool pool;
    CUstream s;
    int ptsz;
};
static CUresult call_alloc(void *c) { struct alloc_args *a = c; return REAL(cuMemAlloc_v2)(a->p, a->n); }
static CUresult call_managed(void *c) {
    struct alloc_args *a = c;
    return REAL(cuMemAllocManaged)(a->p, a->n, a->flags);
}
static CUresult call_async(void *c) {
    struct alloc_args *a = c;
    return a->ptsz ? REAL(cuMemAllocAsync_ptsz)(a->p, a->n, a->s) : REAL(cuMemAllocAsync)(a->p, a->n, a->s);
}
static CUresult call_pool(void *c) {
    struct alloc_args *a = c;
    return a->ptsz ? REAL(cuMemAllocFromPoolAsync_ptsz)(a->p, a->n, a->pool, a->s)
                   : REAL(cuMemAllocFromPoolAsync)(a->p, a->n, a->pool, a->s);
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
    NEED(cuMemAlloc_v2);
    struct alloc_args a = {.p = p, .n = n};
    return alloc_linear(p, n, ARKGPU_KIND_ALLOC, arkgpu_ready() ? arkgpu_current_device() : 0, call_alloc, &a);
}

static CUresult alloc_pitch(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned eb, uint64_t bytes) {
    int dev = arkgpu_ready() ? arkgpu_current_device() : 0;
    CUresult r = reserve(dev, ARKGPU_KIND_ALLOC, bytes);
    if (r != CUDA_SUCCESS) return r;
    r = REAL(cuMemAllocPitch_v2)(p, pitch, w, h, eb);
    uint64_t real = r == CUDA_SUCCESS ? (uint64_t)*pitch * h : bytes;
    if (real < bytes) { /* settle at the driver's size */
        unreserve(dev, ARKGPU_KIND_ALLOC, bytes - real);
    } else if (real > bytes) { /* a wider pitch than reserved: reserve the rest or undo */
        if (reserve(dev, ARKGPU_KIND_ALLOC, real - bytes) != CUDA_SUCCESS) {
            REAL(cuMemFree_v2)(*p);
            unreserve(dev, ARKGPU_KIND_ALLOC, bytes);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    return settle(r, &arkgpu_st.ptrs, *p, r == CUDA_SUCCESS ? real : bytes, dev, ARKGPU_KIND_ALLOC);
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned eb) {
    NEED(cuMemAllocPitch_v2);
    /* The driver picks the pitch; reserve the most it may use (512-byte rows). */
    uint64_t bytes = (uint64_t)((w + 511) & ~(size_t)511) * h;
    if (bytes == 0) return REAL(cuMemAllocPitch_v2)(p, pitch, w, h, eb);
    arkgpu_drv_enter();
    CUresult r = alloc_pitch(p, pitch, w, h, eb, bytes);
    arkgpu_drv_leave();
    return r;
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned flags) {
    NEED(cuMemAllocManaged);
    struct alloc_args a = {.p = p, .n = n, .flags = flags};
    return alloc_linear(p, n, ARKGPU_KIND_MANAGED, arkgpu_ready() ? arkgpu_current_device() : 0, call_managed,
                        &a);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
    NEED(cuMemFree_v2);
    RELEASE(&arkgpu_st.ptrs, p, REAL(cuMemFree_v2)(p));
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop,
                            unsigned long long flags) {
    NEED(cuMemCreate);
    int dev = prop ? prop->location.id : 0;
    if (n == 0) return REAL(cuMemCreate)(h, n, prop, flags);
    arkgpu_drv_enter();
    CUresult r = reserve(dev, ARKGPU_KIND_VMM, n);
    if (r == CUDA_SUCCESS) {
        r = REAL(cuMemCreate)(h, n, prop, flags);
        r = settle(r, &arkgpu_st.handles, *h, n, dev, ARKGPU_KIND_VMM);
    }
    arkgpu_drv_leave();
    return r;
}

EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
    NEED(cuMemRelease);
    RELEASE(&arkgpu_st.handles, h, REAL(cuMemRelease)(h));
}

static CUresult alloc_async(CUdeviceptr *p, size_t n, CUstream s, int ptsz) {
    struct alloc_args a = {.p = p, .n = n, .s = s, .ptsz = ptsz};
    return alloc_linear(p, n, ARKGPU_KIND_ASYNC, arkgpu_ready() ? arkgpu_current_device() : 0, call_async, &a);
}
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) {
    NEED(cuMemAllocAsync);
    return alloc_async(p, n, s, 0);
}
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, CUstream s) {
    NEED(cuMemAllocAsync_ptsz);
    return alloc_async(p, n, s, 1);
}

/* The pool's device is the current context's device (pools are per device);
 * the driver is not asked, to keep the hook cheap. */
static CUresult alloc_pool(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s, int ptsz) {
    struct alloc_args a = {.p = p, .n = n, .pool = pool, .s = s, .ptsz = ptsz};
    return alloc_linear(p, n, ARKGPU_KIND_POOL, arkgpu_ready() ? arkgpu_current_device() : 0, call_pool, &a);
}
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s) {
    NEED(cuMemAllocFromPoolAsync);
    return alloc_pool(p, n, pool, s, 0);
}
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, CUmemoryPool pool, CUstream s) {
    NEED(cuMemAllocFromPoolAsync_ptsz);
    return alloc_pool(p, n, pool, s, 1);
}
EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) {
    NEED(cuMemFreeAsync);
    RELEASE(&arkgpu_st.ptrs, p, REAL(cuMemFreeAsync)(p, s));
}
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) {
    NEED(cuMemFreeAsync_ptsz);
    RELEASE(&arkgpu_st.ptrs, p, REAL(cuMemFreeAsync_ptsz)(p, s));
}

/* ---- arrays: bytes from the descriptor (elements x channels x element size) ---- */
static uint64_t elem_bytes(CUarray_format f) {
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32: case CU_AD_FORMAT_FLOAT: return 4;
    default: return 16; /* unknown formats: count generously */
    }
}

static uint64_t array_bytes(size_t w, size_t h, size_t d, CUarray_format f, unsigned ch, unsigned levels) {
    uint64_t total = 0;
    for (unsigned l = 0; l < (levels ? levels : 1); l++) {
        uint64_t lw = w >> l ? w >> l : 1, lh = h >> l ? h >> l : 1, ld = d >> l ? d >> l : 1;
        total += lw * (h ? lh : 1) * (d ? ld : 1) * ch * elem_bytes(f);
    }
    return total;
}

#define ARRAY_CREATE(name, out, bytes, call)                                              \
    do {                                                                                  \
        NEED(name);                                                                       \
        int dev_ = arkgpu_ready() ? arkgpu_current_device() : 0;                          \
        arkgpu_drv_enter();                                                               \
        CUresult r_ = reserve(dev_, ARKGPU_KIND_ARRAY, bytes);                            \
        if (r_ == CUDA_SUCCESS) {                                                         \
            r_ = call;                                                                    \
            r_ = settle(r_, &arkgpu_st.ptrs, (uint64_t)(uintptr_t)*(out), bytes, dev_,    \
                        ARKGPU_KIND_ARRAY);                                               \
        }                                                                                 \
        arkgpu_drv_leave();                                                               \
        return r_;                                                                        \
    } while (0)

EXPORT CUresult cuArrayCreate_v2(CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d) {
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    uint64_t b = array_bytes(d->Width, d->Height, 0, d->Format, d->NumChannels, 1);
    ARRAY_CREATE(cuArrayCreate_v2, a, b, REAL(cuArrayCreate_v2)(a, d));
}
EXPORT CUresult cuArray3DCreate_v2(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    uint64_t b = array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels, 1);
    ARRAY_CREATE(cuArray3DCreate_v2, a, b, REAL(cuArray3DCreate_v2)(a, d));
}
EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *a, const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels) {
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    uint64_t b = array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels, levels);
    ARRAY_CREATE(cuMipmappedArrayCreate, a, b, REAL(cuMipmappedArrayCreate)(a, d, levels));
}
EXPORT CUresult cuArrayDestroy(CUarray a) {
    NEED(cuArrayDestroy);
    RELEASE(&arkgpu_st.ptrs, (uint64_t)(uintptr_t)a, REAL(cuArrayDestroy)(a));
}
EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray a) {
    NEED(cuMipmappedArrayDestroy);
    RELEASE(&arkgpu_st.ptrs, (uint64_t)(uintptr_t)a, REAL(cuMipmappedArrayDestroy)(a));
}

/* ---- queries: the cap and the container's own use; free never below zero ---- */
static void clamp_to_cap(int dev, unsigned long long *free_b, unsigned long long *total_b,
                         unsigned long long *used_b) {
    if (!arkgpu_ready()) {
        *free_b = *total_b = 0;
        if (used_b) *used_b = 0;
        return;
    }
    if (dev < 0 || dev >= ARKGPU_MAX_DEVICES) { /* not a device the region counts: nothing is left */
        *free_b = *total_b = 0;
        if (used_b) *used_b = 0;
        return;
    }
    uint64_t cap = arkgpu_mem_limit(dev);
    uint64_t used = sat_addu(LD(arkgpu_st.usage->used[dev]), LD(arkgpu_st.usage->reserved[dev]));
    if (cap < *total_b) *total_b = cap;
    uint64_t left = used < *total_b ? *total_b - used : 0;
    if (left < *free_b) *free_b = left;
    if (used_b) *used_b = used;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b) {
    NEED(cuMemGetInfo_v2);
    CUresult r = REAL(cuMemGetInfo_v2)(free_b, total_b);
    if (r != CUDA_SUCCESS) return r;
    unsigned long long f = *free_b, t = *total_b;
    clamp_to_cap(arkgpu_ready() ? arkgpu_current_device() : 0, &f, &t, NULL);
    *free_b = f;
    *total_b = t;
    return r;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    NEED(cuDeviceTotalMem_v2);
    CUresult r = REAL(cuDeviceTotalMem_v2)(bytes, d);
    if (r != CUDA_SUCCESS) return r;
    unsigned long long f = *bytes, t = *bytes;
    clamp_to_cap(d, &f, &t, NULL);
    *bytes = t;
    return r;
}

static int nvml_index(nvmlDevice_t dev) {
    unsigned i = 0;
    if (!arkgpu_st.real.nvmlDeviceGetIndex || arkgpu_st.real.nvmlDeviceGetIndex(dev, &i) != NVML_SUCCESS)
        return 0;
    return i < ARKGPU_MAX_DEVICES ? (int)i : ARKGPU_MAX_DEVICES - 1;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *m) {
    (void)arkgpu_ready();
    if (!REAL(nvmlDeviceGetMemoryInfo)) return NVML_ERROR_NOT_FOUND;
    nvmlReturn_t r = REAL(nvmlDeviceGetMemoryInfo)(dev, m);
    if (r == NVML_SUCCESS) {
        clamp_to_cap(nvml_index(dev), &m->free, &m->total, &m->used);
        m->free = m->used < m->total ? m->total - m->used : 0;
    }
    return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *m) {
    (void)arkgpu_ready();
    if (!REAL(nvmlDeviceGetMemoryInfo_v2)) return NVML_ERROR_NOT_FOUND;
    nvmlReturn_t r = REAL(nvmlDeviceGetMemoryInfo_v2)(dev, m);
    if (r == NVML_SUCCESS) {
        clamp_to_cap(nvml_index(dev), &m->free, &m->total, &m->used);
        m->reserved = 0;
        m->free = m->used < m->total ? m->total - m->used : 0;
    }
    return r;
}
