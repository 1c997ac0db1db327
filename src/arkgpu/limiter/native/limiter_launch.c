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
 *
 * Bounds (a program may have any number of threads and streams):
 *  - at most PENDING launches are measured in flight; a launch that finds the
 *    queue full waits for the oldest to complete (one waiter polls, the queue
 *    lock released, the others sleep on a condition variable until room is
 *    made), counted in queue_waits; after QUEUE_WAIT_NS of that it is
 *    charged at the running estimate, unmeasured (counted in unmeasured), so a
 *    stream that never completes cannot hang the others;
 *  - the free-event pool holds EVENT_POOL events per device; an event given
 *    back to a full pool is destroyed (counted in events_dropped);
 *  - a launch for which no event can be had is charged at the estimate.
 * Every charge is recorded with its own end event otherwise, so a launch's
 * measured time never includes the queueing of an unmeasured predecessor.
 */
#include "limiter.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PENDING 64
#define EVENT_POOL 256
#define QUEUE_WAIT_NS 1000000000ll
#define POLL_NS 100000
#define MAX_DEBT_NS 60000000000ll /* a bucket never owes more than 60 s of GPU time */
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
    pthread_cond_t room; /* broadcast when harvesting makes room in q */
    int polling;         /* a waiter for room polls the oldest launch */
    pending_launch q[PENDING];
    unsigned head, tail; /* q[head..tail) are in flight, tail - head <= PENDING */
    CUevent pool[ARKGPU_MAX_DEVICES][EVENT_POOL]; /* free events per device (an event belongs to its context) */
    int npool[ARKGPU_MAX_DEVICES];
    int64_t est_ns; /* moving average of measured launch busy time */
    /* elastic mode: the last utilisation sample */
    int64_t sample_t[ARKGPU_MAX_DEVICES];
    uint64_t sample_busy[ARKGPU_MAX_DEVICES];
    int64_t rate_bp[ARKGPU_MAX_DEVICES]; /* elastic fill rate */
} pc = {.mu = PTHREAD_MUTEX_INITIALIZER, .room = PTHREAD_COND_INITIALIZER};

/* A forked child starts with no launches in flight and no events (they
 * belong to the parent's contexts), and an unlocked mutex. */
void arkgpu_launch_after_fork(void) {
    memset(&pc, 0, sizeof pc);
    if (pthread_mutex_init(&pc.mu, NULL) != 0 || pthread_cond_init(&pc.room, NULL) != 0) abort();
}

static void sleep_ns(int64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    nanosleep(&ts, NULL);
}

/* Fill the bucket for the time since its last refill; the caller locks. */
static int64_t refill_locked(int dev, int64_t now, uint32_t share_bp, uint32_t burst_us) {
    arkgpu_usage *u = arkgpu_st.usage;
    int64_t depth = (int64_t)burst_us * 1000 * share_bp / ARKGPU_SHARE_FULL;
    int64_t dt = sat_sub(now, u->refill_ns[dev]);
    if (u->credit_ns[dev] < -MAX_DEBT_NS) u->credit_ns[dev] = -MAX_DEBT_NS; /* garbage written in the region */
    if (u->refill_ns[dev] == 0) { /* a new bucket starts empty: no burst above the share */
        u->refill_ns[dev] = now;
        return u->credit_ns[dev];
    }
    if (dt > 0) {
        int64_t c = sat_add(u->credit_ns[dev], dt > 10000000000ll ? depth : dt * share_bp / ARKGPU_SHARE_FULL);
        arkgpu_debug_hold(HOLD_REFILL);
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
    arkgpu_mutex_lock(&pc.mu);
    if (now - pc.sample_t[dev] >= ELASTIC_SAMPLE_NS) {
        nvmlDevice_t h;
        nvmlUtilization_t util = {0, 0};
        if (r->nvmlInit_v2) r->nvmlInit_v2();
        int ok = r->nvmlDeviceGetHandleByIndex_v2((unsigned)dev, &h) == NVML_SUCCESS &&
                 r->nvmlDeviceGetUtilizationRates(h, &util) == NVML_SUCCESS;
        uint64_t busy = __atomic_load_n(&arkgpu_st.usage->busy_ns[dev], __ATOMIC_RELAXED);
        int64_t rate = pc.rate_bp[dev] < (int64_t)share_bp ? share_bp : pc.rate_bp[dev];
        if (ok && pc.sample_t[dev] && now > pc.sample_t[dev]) {
            uint64_t dt = (uint64_t)(now - pc.sample_t[dev]), own = busy - pc.sample_busy[dev];
            int64_t own_bp = (int64_t)((own < dt ? own : dt) * ARKGPU_SHARE_FULL / dt);
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
    arkgpu_mutex_unlock(&pc.mu);
    return rate;
}

/* Wait until the container may launch on dev; -1 when the region lock failed. */
static int wait_for_share(int dev) {
    int64_t waited = 0;
    for (;;) {
        const limits_view *l = arkgpu_limits_now();
        uint32_t share = l->share_bp, burst = l->burst_us;
        if (share >= ARKGPU_SHARE_FULL) break;
        int64_t now = arkgpu_now_ns();
        if (l->mode == ARKGPU_MODE_ELASTIC) share = elastic_rate(dev, share, now);
        uint32_t rate = share + arkgpu_lent_bp(l, now);
        rate = rate > ARKGPU_SHARE_FULL ? ARKGPU_SHARE_FULL : rate;
        if (arkgpu_usage_lock() != 0) return -1;
        int64_t credit = refill_locked(dev, now, rate, burst ? burst : 20000);
        arkgpu_usage_unlock();
        if (credit > 0) break;
        int64_t debt = credit < -5000000000ll ? 5000000000ll : -credit; /* at most 5 s: the wait is capped below */
        int64_t need = rate ? (debt + 1) * ARKGPU_SHARE_FULL / rate : 5000000;
        need = need < 20000 ? 20000 : (need > 5000000 ? 5000000 : need);
        sleep_ns(need);
        waited += arkgpu_now_ns() - now;
    }
    if (waited) __atomic_fetch_add(&arkgpu_st.me->throttled_ns, (uint64_t)waited, __ATOMIC_RELAXED);
    return 0;
}

/* Back to the device's pool; a full pool destroys the event (counted). */
static void give_event(int dev, CUevent e) {
    if (!e) return;
    if (pc.npool[dev] < EVENT_POOL) {
        pc.pool[dev][pc.npool[dev]++] = e;
        return;
    }
    if (arkgpu_st.real.cuEventDestroy_v2) arkgpu_st.real.cuEventDestroy_v2(e);
    ARKGPU_COUNT(events_dropped);
}

static CUevent take_event(int dev) {
    if (pc.npool[dev] > 0) return pc.pool[dev][--pc.npool[dev]];
    CUevent e = NULL;
    if (arkgpu_st.real.cuEventCreate && arkgpu_st.real.cuEventCreate(&e, 0) != CUDA_SUCCESS) e = NULL;
    return e;
}

/* Take ns off (or, negative, give back to) the bucket; the elastic floor. */
static void charge(int dev, int64_t ns, uint64_t busy) {
    const limits_view *l = arkgpu_limits_now();
    int64_t floor = -(int64_t)l->burst_us * 1000;
    arkgpu_usage *u = arkgpu_st.usage;
    if (arkgpu_usage_lock() != 0) return;
    u->credit_ns[dev] = sat_sub(u->credit_ns[dev], ns);
    arkgpu_debug_hold(HOLD_CHARGE);
    if (l->mode == ARKGPU_MODE_ELASTIC && u->credit_ns[dev] < floor) u->credit_ns[dev] = floor;
    ST(u->busy_ns[dev], LD(u->busy_ns[dev]) + busy); /* unsigned: wraps, never UB */
    arkgpu_usage_unlock();
}

/* Charge measured busy time for launches whose end event has completed. */
static void harvest_locked(void) {
    real_calls *r = &arkgpu_st.real;
    unsigned head0 = pc.head;
    for (; pc.head != pc.tail; pc.head++) {
        pending_launch *p = &pc.q[pc.head % PENDING];
        CUresult q = r->cuEventQuery(p->end);
        if (q == CUDA_ERROR_NOT_READY) break; /* other errors: charge the estimate below */
        float ms = 0;
        int64_t busy = q == CUDA_SUCCESS && r->cuEventElapsedTime(&ms, p->start, p->end) == CUDA_SUCCESS
                           ? (int64_t)(ms * 1e6)
                           : p->est_ns;
        busy = busy < 0 ? 0 : busy;
        charge(p->dev, busy - p->est_ns, (uint64_t)busy);
        __atomic_fetch_add(&arkgpu_st.me->busy_ns, (uint64_t)busy, __ATOMIC_RELAXED);
        pc.est_ns = (pc.est_ns * 7 + busy) / 8;
        give_event(p->dev, p->start);
        give_event(p->dev, p->end);
    }
    if (pc.head != head0 && pthread_cond_broadcast(&pc.room) != 0) abort();
}

/* Sleep on the room condition for at most POLL_NS (CLOCK_REALTIME deadline). */
static void wait_room_signal(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += POLL_NS * 10;
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    int e = pthread_cond_timedwait(&pc.room, &pc.mu, &ts);
    if (e != 0 && e != ETIMEDOUT) {
        fprintf(stderr, "arkgpu-limiter: pthread_cond_timedwait failed (%s); stopping\n", strerror(e));
        abort();
    }
}

/* The queue is full: wait for the oldest launch to complete. One waiter polls
 * it (the lock released while it sleeps; no event is touched unlocked), the
 * others sleep until harvesting makes room. 0 when there is room, -1 after
 * QUEUE_WAIT_NS; the caller locks. */
static int wait_for_room_locked(void) {
    if (pc.tail - pc.head < PENDING) return 0;
    ARKGPU_COUNT(queue_waits);
    int64_t t0 = arkgpu_now_ns();
    while (pc.tail - pc.head >= PENDING) {
        if (arkgpu_now_ns() - t0 > QUEUE_WAIT_NS) return -1;
        if (pc.polling) {
            wait_room_signal();
            continue;
        }
        pc.polling = 1;
        arkgpu_mutex_unlock(&pc.mu);
        sleep_ns(POLL_NS);
        arkgpu_mutex_lock(&pc.mu);
        pc.polling = 0;
        harvest_locked();
    }
    return 0;
}

typedef struct {
    int paced;
    int dev;
    CUevent start;
} gate;

/* 0: launch; CUDA_ERROR_NOT_PERMITTED: refused (no trusted region, broken lock). */
static CUresult gate_enter(gate *g, CUstream s) {
    g->paced = 0;
    if (!arkgpu_ready()) return CUDA_ERROR_NOT_PERMITTED;
    __atomic_fetch_add(&arkgpu_st.me->launches, 1, __ATOMIC_RELAXED);
    if (LIKELY(arkgpu_limits_now()->share_bp >= ARKGPU_SHARE_FULL)) return CUDA_SUCCESS;
    real_calls *r = &arkgpu_st.real;
    if (!r->cuEventRecord || !r->cuEventQuery || !r->cuEventElapsedTime) return CUDA_SUCCESS;
    int capturing = 0; /* a launch into a graph being captured runs later, with cuGraphLaunch */
    if (r->cuStreamIsCapturing && r->cuStreamIsCapturing(s, &capturing) == CUDA_SUCCESS && capturing)
        return CUDA_SUCCESS;
    g->dev = arkgpu_current_device();
    if (g->dev < 0 || g->dev >= ARKGPU_MAX_DEVICES) return CUDA_SUCCESS;
    if (wait_for_share(g->dev) != 0) return CUDA_ERROR_NOT_PERMITTED;
    arkgpu_mutex_lock(&pc.mu);
    g->start = take_event(g->dev);
    arkgpu_mutex_unlock(&pc.mu);
    if (g->start && r->cuEventRecord(g->start, s) != CUDA_SUCCESS) {
        arkgpu_mutex_lock(&pc.mu);
        give_event(g->dev, g->start);
        arkgpu_mutex_unlock(&pc.mu);
        g->start = NULL;
    }
    g->paced = 1;
    return CUDA_SUCCESS;
}

static CUresult gate_leave(gate *g, CUstream s, CUresult launched) {
    if (!g->paced) return launched;
    real_calls *r = &arkgpu_st.real;
    arkgpu_mutex_lock(&pc.mu);
    int room = launched == CUDA_SUCCESS && g->start && wait_for_room_locked() == 0;
    CUevent end = launched == CUDA_SUCCESS && g->start ? take_event(g->dev) : NULL;
    if (end && r->cuEventRecord(end, s) != CUDA_SUCCESS) {
        give_event(g->dev, end);
        end = NULL;
    }
    if (end && !room) { /* recorded all the same, so the stream's next start event
                         * dates from this kernel's end, not an earlier one */
        give_event(g->dev, end);
        end = NULL;
    }
    if (!end) {
        give_event(g->dev, g->start);
        if (launched == CUDA_SUCCESS) { /* no measurement: charge the estimate */
            ARKGPU_COUNT(unmeasured);
            charge(g->dev, pc.est_ns, 0);
        }
    } else {
        pc.q[pc.tail++ % PENDING] = (pending_launch){g->start, end, g->dev, pc.est_ns};
        charge(g->dev, pc.est_ns, 0);
    }
    harvest_locked();
    arkgpu_mutex_unlock(&pc.mu);
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
