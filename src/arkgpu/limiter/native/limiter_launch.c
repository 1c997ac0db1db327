/*
 * Compute pacing. Every launch path (cuLaunchKernel, cuLaunchKernelEx,
 * cuLaunchCooperativeKernel, cuGraphLaunch and their per-thread-stream forms)
 * passes one gate. With a full share the gate only counts the launch. Below a
 * full share the container (all its processes) draws on one token bucket per
 * device in the usage region: it fills at share x wall time up to a depth of
 * share x burst_us, each launch takes an estimate of its GPU time, and the
 * estimate is corrected by the busy time measured with a pair of events
 * recorded around the launch. A launch waits while the bucket is empty. Hard
 * mode never fills faster than the share; elastic mode fills faster while the
 * GPU has idle time (see elastic_rate). Either way the bucket also fills at
 * the share lent by lenders with no batch in flight (limiter_lend.c), up to a
 * full GPU; the depth follows the fill rate, so credit gathered from a lender
 * is clipped back to the container's own depth at the first refill after the
 * lender starts a batch.
 */
#include "limiter.h"

#include <string.h>
#include <time.h>

#define PENDING 64
#define ELASTIC_SAMPLE_NS 20000000ll
#define ELASTIC_MARGIN_BP 500
#define ELASTIC_STEP_BP 500

typedef struct {
    CUevent start, end;
    int dev;
    int64_t est_ns;
} pending_launch;

static struct {
    pthread_mutex_t mu;
    pending_launch q[PENDING];
    unsigned head, tail; /* q[head..tail) are in flight */
    /* free events per device (an event belongs to its device's context);
     * every event ever created for a device fits */
    CUevent pool[ARKGPU_MAX_DEVICES][2 * PENDING + 4];
    int npool[ARKGPU_MAX_DEVICES];
    int64_t est_ns; /* moving average of measured launch busy time */
    /* elastic mode: the last utilisation sample */
    int64_t sample_t[ARKGPU_MAX_DEVICES];
    uint64_t sample_busy[ARKGPU_MAX_DEVICES];
    int64_t rate_bp[ARKGPU_MAX_DEVICES]; /* elastic fill rate */
} pc = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* A forked child starts with no launches in flight and no events (they
 * belong to the parent's contexts), and an unlocked mutex. */
void arkgpu_launch_after_fork(void) {
    memset(&pc, 0, sizeof pc);
    pthread_mutex_init(&pc.mu, NULL);
}

static void sleep_ns(int64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    nanosleep(&ts, NULL);
}

/* Fill the bucket for the time since its last refill; the caller locks. */
static int64_t refill_locked(int dev, int64_t now, uint32_t share_bp, uint32_t burst_us) {
    arkgpu_usage *u = arkgpu_st.usage;
    int64_t depth = (int64_t)burst_us * 1000 * share_bp / ARKGPU_SHARE_FULL;
    int64_t dt = now - u->refill_ns[dev];
    if (u->refill_ns[dev] == 0) { /* a new bucket starts empty: no burst above the share */
        u->refill_ns[dev] = now;
        return u->credit_ns[dev];
    }
    if (dt > 0) {
        int64_t c = u->credit_ns[dev] + (dt > 10000000000ll ? depth : dt * share_bp / ARKGPU_SHARE_FULL);
        u->credit_ns[dev] = c > depth ? depth : c;
        u->refill_ns[dev] = now;
    }
    return u->credit_ns[dev];
}

/* Elastic: the rate this process fills the bucket at. It starts at the share;
 * every ELASTIC_SAMPLE_NS it grows by a step while the GPU has idle time
 * (NVML utilisation below 100% less a margin) and shrinks back towards the
 * share while the GPU is full and the others get less than the rest of it
 * (the container may be squeezing them), GaiaGPU's soft limit as a control loop. */
static uint32_t elastic_rate(int dev, uint32_t share_bp, int64_t now) {
    real_calls *r = &arkgpu_st.real;
    if (!r->nvmlDeviceGetUtilizationRates || !r->nvmlDeviceGetHandleByIndex_v2) return share_bp;
    pthread_mutex_lock(&pc.mu);
    if (now - pc.sample_t[dev] >= ELASTIC_SAMPLE_NS) {
        nvmlDevice_t h;
        nvmlUtilization_t util = {0, 0};
        if (r->nvmlInit_v2) r->nvmlInit_v2();
        int ok = r->nvmlDeviceGetHandleByIndex_v2((unsigned)dev, &h) == NVML_SUCCESS &&
                 r->nvmlDeviceGetUtilizationRates(h, &util) == NVML_SUCCESS;
        uint64_t busy = __atomic_load_n(&arkgpu_st.usage->busy_ns[dev], __ATOMIC_RELAXED);
        int64_t rate = pc.rate_bp[dev] < (int64_t)share_bp ? share_bp : pc.rate_bp[dev];
        if (ok && pc.sample_t[dev]) {
            int64_t own_bp = (int64_t)(busy - pc.sample_busy[dev]) * ARKGPU_SHARE_FULL / (now - pc.sample_t[dev]);
            int64_t util_bp = (int64_t)util.gpu * 100, others_bp = util_bp - own_bp;
            if (util_bp < ARKGPU_SHARE_FULL - ELASTIC_MARGIN_BP)
                rate += ELASTIC_STEP_BP;
            else if (others_bp < (int64_t)(ARKGPU_SHARE_FULL - share_bp) - ELASTIC_MARGIN_BP)
                rate -= ELASTIC_STEP_BP;
        }
        rate = rate > ARKGPU_SHARE_FULL ? ARKGPU_SHARE_FULL : (rate < (int64_t)share_bp ? share_bp : rate);
        pc.rate_bp[dev] = rate;
        pc.sample_t[dev] = now;
        pc.sample_busy[dev] = busy;
    }
    uint32_t rate = (uint32_t)(pc.rate_bp[dev] < (int64_t)share_bp ? share_bp : pc.rate_bp[dev]);
    pthread_mutex_unlock(&pc.mu);
    return rate;
}

/* Wait until the container may launch on dev. */
static void wait_for_share(int dev) {
    const arkgpu_limits *l = arkgpu_st.limits;
    int64_t waited = 0;
    for (;;) {
        uint32_t share = __atomic_load_n(&l->share_bp, __ATOMIC_RELAXED);
        uint32_t burst = __atomic_load_n(&l->burst_us, __ATOMIC_RELAXED);
        if (share >= ARKGPU_SHARE_FULL) break;
        int64_t now = arkgpu_now_ns();
        if (__atomic_load_n(&l->mode, __ATOMIC_RELAXED) == ARKGPU_MODE_ELASTIC) share = elastic_rate(dev, share, now);
        uint32_t rate = share + arkgpu_lent_bp(now);
        rate = rate > ARKGPU_SHARE_FULL ? ARKGPU_SHARE_FULL : rate;
        arkgpu_usage_lock();
        int64_t credit = refill_locked(dev, now, rate, burst ? burst : 20000);
        arkgpu_usage_unlock();
        if (credit > 0) break;
        int64_t need = rate ? (-credit + 1) * ARKGPU_SHARE_FULL / rate : 5000000;
        need = need < 20000 ? 20000 : (need > 5000000 ? 5000000 : need);
        sleep_ns(need);
        waited += arkgpu_now_ns() - now;
    }
    if (waited) __atomic_fetch_add(&arkgpu_st.me->throttled_ns, (uint64_t)waited, __ATOMIC_RELAXED);
}

static void give_event(int dev, CUevent e) {
    if (e) pc.pool[dev][pc.npool[dev]++] = e;
}

static CUevent take_event(int dev) {
    if (pc.npool[dev]) return pc.pool[dev][--pc.npool[dev]];
    CUevent e = NULL;
    if (arkgpu_st.real.cuEventCreate) arkgpu_st.real.cuEventCreate(&e, 0);
    return e;
}

/* Charge measured busy time for launches whose end event has completed. */
static void harvest_locked(void) {
    real_calls *r = &arkgpu_st.real;
    while (pc.head != pc.tail) {
        pending_launch *p = &pc.q[pc.head % PENDING];
        CUresult q = r->cuEventQuery(p->end);
        if (q == CUDA_ERROR_NOT_READY) break; /* other errors: charge the estimate below */
        float ms = 0;
        int64_t busy = q == CUDA_SUCCESS && r->cuEventElapsedTime(&ms, p->start, p->end) == CUDA_SUCCESS
                           ? (int64_t)(ms * 1e6)
                           : p->est_ns;
        busy = busy < 0 ? 0 : busy;
        arkgpu_usage *u = arkgpu_st.usage;
        int elastic = __atomic_load_n(&arkgpu_st.limits->mode, __ATOMIC_RELAXED) == ARKGPU_MODE_ELASTIC;
        int64_t floor = -(int64_t)__atomic_load_n(&arkgpu_st.limits->burst_us, __ATOMIC_RELAXED) * 1000;
        arkgpu_usage_lock();
        u->credit_ns[p->dev] += p->est_ns - busy;
        if (elastic && u->credit_ns[p->dev] < floor) u->credit_ns[p->dev] = floor;
        u->busy_ns[p->dev] += (uint64_t)busy;
        arkgpu_usage_unlock();
        __atomic_fetch_add(&arkgpu_st.me->busy_ns, (uint64_t)busy, __ATOMIC_RELAXED);
        pc.est_ns = (pc.est_ns * 7 + busy) / 8;
        give_event(p->dev, p->start);
        give_event(p->dev, p->end);
        pc.head++;
    }
}

typedef struct {
    int paced;
    int dev;
    CUevent start;
} gate;

/* 0: launch; CUDA_ERROR_NOT_PERMITTED: refused (no trusted region). */
static CUresult gate_enter(gate *g, CUstream s) {
    g->paced = 0;
    if (!arkgpu_ready()) return CUDA_ERROR_NOT_PERMITTED;
    __atomic_fetch_add(&arkgpu_st.me->launches, 1, __ATOMIC_RELAXED);
    if (LIKELY(__atomic_load_n(&arkgpu_st.limits->share_bp, __ATOMIC_RELAXED) >= ARKGPU_SHARE_FULL))
        return CUDA_SUCCESS;
    real_calls *r = &arkgpu_st.real;
    if (!r->cuEventRecord || !r->cuEventQuery || !r->cuEventElapsedTime) return CUDA_SUCCESS;
    int capturing = 0; /* a launch into a graph being captured runs later, with cuGraphLaunch */
    if (r->cuStreamIsCapturing && r->cuStreamIsCapturing(s, &capturing) == CUDA_SUCCESS && capturing)
        return CUDA_SUCCESS;
    g->dev = arkgpu_current_device();
    if (g->dev < 0 || g->dev >= ARKGPU_MAX_DEVICES) return CUDA_SUCCESS;
    wait_for_share(g->dev);
    pthread_mutex_lock(&pc.mu);
    g->start = take_event(g->dev);
    pthread_mutex_unlock(&pc.mu);
    if (!g->start) return CUDA_SUCCESS;
    r->cuEventRecord(g->start, s);
    g->paced = 1;
    return CUDA_SUCCESS;
}

static CUresult gate_leave(gate *g, CUstream s, CUresult launched) {
    if (!g->paced) return launched;
    real_calls *r = &arkgpu_st.real;
    pthread_mutex_lock(&pc.mu);
    CUevent end = take_event(g->dev);
    if (launched != CUDA_SUCCESS || !end || pc.tail - pc.head >= PENDING) {
        give_event(g->dev, g->start);
        give_event(g->dev, end);
        if (launched == CUDA_SUCCESS) { /* too many in flight to measure: charge the estimate */
            arkgpu_usage_lock();
            arkgpu_st.usage->credit_ns[g->dev] -= pc.est_ns;
            arkgpu_usage_unlock();
            harvest_locked();
        }
        pthread_mutex_unlock(&pc.mu);
        return launched;
    }
    r->cuEventRecord(end, s);
    pc.q[pc.tail++ % PENDING] = (pending_launch){g->start, end, g->dev, pc.est_ns};
    arkgpu_usage_lock();
    arkgpu_st.usage->credit_ns[g->dev] -= pc.est_ns;
    arkgpu_usage_unlock();
    harvest_locked();
    pthread_mutex_unlock(&pc.mu);
    return launched;
}

#define PACED(name, stream, call)                            \
    do {                                                     \
        (void)arkgpu_ready();                                \
        if (!REAL(name)) return CUDA_ERROR_NOT_SUPPORTED;    \
        gate g_;                                             \
        CUresult e_ = gate_enter(&g_, stream);               \
        if (e_ != CUDA_SUCCESS) return e_;                   \
        if (!g_.paced) return call;                          \
        return gate_leave(&g_, stream, call);                \
    } while (0)

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                               unsigned bz, unsigned shm, CUstream s, void **params, void **extra) {
    PACED(cuLaunchKernel, s, REAL(cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shm, s, params, extra));
}
EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                    unsigned by, unsigned bz, unsigned shm, CUstream s, void **params,
                                    void **extra) {
    PACED(cuLaunchKernel_ptsz, s, REAL(cuLaunchKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shm, s, params, extra));
}
EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    PACED(cuLaunchKernelEx, c ? c->hStream : NULL, REAL(cuLaunchKernelEx)(c, f, params, extra));
}
EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    PACED(cuLaunchKernelEx_ptsz, c ? c->hStream : NULL, REAL(cuLaunchKernelEx_ptsz)(c, f, params, extra));
}
EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                          unsigned by, unsigned bz, unsigned shm, CUstream s, void **params) {
    PACED(cuLaunchCooperativeKernel, s, REAL(cuLaunchCooperativeKernel)(f, gx, gy, gz, bx, by, bz, shm, s, params));
}
EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                               unsigned bx, unsigned by, unsigned bz, unsigned shm,
                                               CUstream s, void **params) {
    PACED(cuLaunchCooperativeKernel_ptsz, s,
          REAL(cuLaunchCooperativeKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shm, s, params));
}
EXPORT CUresult cuGraphLaunch(CUgraphExec ex, CUstream s) {
    PACED(cuGraphLaunch, s, REAL(cuGraphLaunch)(ex, s));
}
EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec ex, CUstream s) {
    PACED(cuGraphLaunch_ptsz, s, REAL(cuGraphLaunch_ptsz)(ex, s));
}
