/*
 * The driver reserve: device memory the driver holds for a process beyond the
 * bytes it asked for (the CUDA context, loaded modules, an allocator's slack).
 * No hooked call asks for it, so the library measures it: NVML's figure for
 * this process (nvmlDeviceGetComputeRunningProcesses, matched by pid) minus
 * the bytes this process has counted on the device. Each process publishes its
 * reserve in its slot (proc.reserve), the region keeps the sum over live
 * processes (usage.reserved), and an allocation fits only when
 *     used + reserved + bytes <= cap.
 *
 * When: before this process's first allocation on a device (the context
 * exists by then; NVML itself is initialised by the reaper thread as the
 * process attaches, so the first allocation rarely waits for nvmlInit), before an allocation that comes within the limits'
 * reserve_margin_mib of the cap or is refused (at most every 10 ms), and every
 * reserve_period_ms in the reaper thread. NVML is called with no region lock
 * held (a private mutex serialises the measurements of one process); only the
 * publication takes the region lock, for a few stores.
 *
 * A measurement taken while another thread of the process was inside the
 * driver for an allocation or a free may be off by that operation's bytes
 * (always low: the count changes before an allocation reaches the driver and
 * after a free left it): it is retried twice, then the larger of the old and
 * new figures is kept.
 *
 * Degraded, counted once per process in the usage region: no usable NVML
 * (libnvidia-ml.so.1 absent, nvmlInit or the call failing: the last figure,
 * initially 0, stays): reserve_no_nvml; NVML does
 * not list this process's pid (a container in its own pid namespace, where
 * NVML reports host pids) or gives no figure for it: reserve_unlisted. The
 * process's reserve is then 0, as before layout 4.
 */
#include "limiter.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define STACK_PROCS 64

static uint64_t my_bytes(int dev) {
    uint64_t sum = 0;
    for (int k = 0; k < ARKGPU_KINDS; k++) sum = sat_addu(sum, LD(arkgpu_st.me->bytes[dev][k]));
    return sum;
}

static int nvml_usable(void) {
    reserve_state *r = &arkgpu_st.rsv;
    if (r->nvml == 0) {
        const real_calls *c = &arkgpu_st.real;
        int ok = c->nvmlInit_v2 && c->nvmlProcesses && c->nvmlDeviceGetHandleByIndex_v2 &&
                 c->nvmlInit_v2() == NVML_SUCCESS;
        r->nvml = ok ? 1 : -1;
    }
    return r->nvml == 1;
}

/* NVML's figure for pid on h: 1 found, 0 not listed (or no figure), -1 NVML failed. */
static int nvml_figure(nvmlDevice_t h, unsigned pid, uint64_t *out) {
    nvmlProcessInfo_t stack[STACK_PROCS], *infos = stack;
    unsigned room = STACK_PROCS, n = room;
    nvmlReturn_t e = arkgpu_st.real.nvmlProcesses(h, &n, infos);
    if (e == NVML_ERROR_INSUFFICIENT_SIZE && n > 0 && n < (1u << 20)) {
        room = n += 16; /* room for processes started since */
        infos = malloc(room * sizeof *infos);
        e = infos ? arkgpu_st.real.nvmlProcesses(h, &n, infos) : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    int found = e == NVML_SUCCESS ? 0 : -1;
    for (unsigned i = 0; found == 0 && i < n && i < room; i++)
        if (infos[i].pid == pid && infos[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) {
            *out = infos[i].usedGpuMemory;
            found = 1;
        }
    if (infos != stack) free(infos);
    return found;
}

__thread drv_count *arkgpu_tl_drv __attribute__((tls_model("initial-exec")));

drv_count *arkgpu_drv_slot(void) {
    unsigned i = atomic_fetch_add(&arkgpu_st.rsv.drv_used, 1);
    arkgpu_tl_drv = &arkgpu_st.rsv.drv[i < ARKGPU_DRV_SLOTS ? i : ARKGPU_DRV_SLOTS - 1];
    return arkgpu_tl_drv;
}

/* Memory operations of all threads that entered and left the driver. */
static void drv_sums(uint64_t *in, uint64_t *out) {
    reserve_state *r = &arkgpu_st.rsv;
    unsigned n = atomic_load(&r->drv_used);
    *in = *out = 0;
    atomic_thread_fence(memory_order_seq_cst);
    for (unsigned i = 0; i < n && i < ARKGPU_DRV_SLOTS; i++) {
        *out += atomic_load_explicit(&r->drv[i].left, memory_order_acquire);
        *in += atomic_load_explicit(&r->drv[i].entered, memory_order_acquire);
    }
}

/* No allocation or free of this process was in the driver between the two reads. */
static int stable(uint64_t in1, uint64_t out1) {
    uint64_t in2, out2;
    drv_sums(&in2, &out2);
    return in1 == out1 && in2 == in1 && out2 == out1;
}

/* Publishes this process's reserve on dev and the region's sum (region lock). */
static void publish(int dev, uint64_t reserve) {
    arkgpu_usage *u = arkgpu_st.usage;
    uint64_t old = LD(arkgpu_st.me->reserve[dev]);
    if (old == reserve || arkgpu_usage_lock() != 0) return;
    uint64_t sum = LD(u->reserved[dev]);
    sum -= old < sum ? old : sum;
    ST(u->reserved[dev], sat_addu(sum, reserve));
    arkgpu_debug_hold(HOLD_RESERVE);
    ST(arkgpu_st.me->reserve[dev], reserve);
    arkgpu_usage_unlock();
}

static void count_once(int *flag, uint64_t *counter) {
    if (*flag) return;
    *flag = 1;
    __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

/* NVML's figure minus our count, retried while it straddles a driver call;
 * -1 when NVML failed, -2 when it does not list us. */
static int64_t measure_nvml(int dev, nvmlDevice_t h, uint64_t *reserve) {
    int found = 0, exact = 0;
    uint64_t figure = 0, mine = 0;
    for (int attempt = 0; attempt < 3 && !exact; attempt++) {
        uint64_t in1, out1;
        drv_sums(&in1, &out1);
        mine = my_bytes(dev);
        found = nvml_figure(h, (unsigned)getpid(), &figure);
        if (found != 1) return found == 0 ? -2 : -1;
        exact = stable(in1, out1) && my_bytes(dev) == mine;
    }
    *reserve = figure > mine ? figure - mine : 0;
    uint64_t old = LD(arkgpu_st.me->reserve[dev]);
    if (!exact && old > *reserve) *reserve = old; /* inexact figures are low: keep the larger */
    return 0;
}

/* One measurement of dev; the caller holds rsv.mu. */
static void measure_locked(int dev) {
    reserve_state *r = &arkgpu_st.rsv;
    arkgpu_usage *u = arkgpu_st.usage;
    uint64_t reserve = 0;
    int64_t got = -1;
    if (nvml_usable() && (r->handle[dev] ||
                          arkgpu_st.real.nvmlDeviceGetHandleByIndex_v2((unsigned)dev, &r->handle[dev]) ==
                              NVML_SUCCESS))
        got = measure_nvml(dev, r->handle[dev], &reserve);
    if (got == -1) count_once(&r->no_nvml_counted, &u->reserve_no_nvml);
    /* Unlisted counts where NVML must list us: we hold memory or a context there
     * (a first allocation on another device than the context's is not listed yet). */
    if (got == -2 && (my_bytes(dev) > 0 || arkgpu_current_device() == dev))
        count_once(&r->unlisted_counted, &u->reserve_unlisted);
    if (got != -1) publish(dev, got == 0 ? reserve : 0); /* NVML failing: the last figure stays */
    atomic_store(&r->measured_ns[dev], arkgpu_now_ns());
}

void arkgpu_reserve_refresh(int dev, int64_t max_age_ns) {
    reserve_state *r = &arkgpu_st.rsv;
    if (dev < 0 || dev >= ARKGPU_MAX_DEVICES || !arkgpu_st.me) return;
    int64_t seen = atomic_load(&r->measured_ns[dev]); /* fresh enough: no mutex */
    if (seen && arkgpu_now_ns() - seen < max_age_ns) return;
    arkgpu_mutex_lock(&r->mu);
    int64_t last = atomic_load(&r->measured_ns[dev]);
    if (!last || arkgpu_now_ns() - last >= max_age_ns) measure_locked(dev);
    arkgpu_mutex_unlock(&r->mu);
}

void arkgpu_reserve_warm(void) {
    arkgpu_mutex_lock(&arkgpu_st.rsv.mu);
    (void)nvml_usable();
    arkgpu_mutex_unlock(&arkgpu_st.rsv.mu);
}

void arkgpu_reserve_tick(void) {
    uint64_t period_ns = (uint64_t)arkgpu_limits_now()->reserve_period_ms * 1000000ull;
    if (!period_ns) return;
    for (int d = 0; d < ARKGPU_MAX_DEVICES; d++)
        if (atomic_load(&arkgpu_st.rsv.measured_ns[d])) arkgpu_reserve_refresh(d, (int64_t)period_ns);
}

void arkgpu_reserve_after_fork(void) {
    reserve_state *r = &arkgpu_st.rsv;
    if (pthread_mutex_init(&r->mu, NULL) != 0) {
        fprintf(stderr, "arkgpu-limiter: pthread_mutex_init failed after fork; stopping\n");
        _exit(127);
    }
    r->unlisted_counted = r->no_nvml_counted = 0;
    for (int d = 0; d < ARKGPU_MAX_DEVICES; d++) atomic_store(&r->measured_ns[d], 0);
    for (int i = 0; i < ARKGPU_DRV_SLOTS; i++) { /* other threads are gone; this one starts over */
        atomic_store(&r->drv[i].entered, 0);
        atomic_store(&r->drv[i].left, 0);
    }
}
