/* Prints the control region's layout as JSON, for the test that checks the
 * Python mirror (arkgpu.limiter.layout) against arkgpu_region.h. */
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>

#include "arkgpu_region.h"

#define F(t, f) printf("  \"%s.%s\": [%zu, %zu],\n", #t, #f, offsetof(t, f), sizeof(((t *)0)->f))

int main(void) {
    printf("{\n");
    F(arkgpu_limits, magic); F(arkgpu_limits, version); F(arkgpu_limits, size);
    F(arkgpu_limits, generation); F(arkgpu_limits, mode); F(arkgpu_limits, share_bp);
    F(arkgpu_limits, num_devices); F(arkgpu_limits, burst_us); F(arkgpu_limits, mem_limit);
    F(arkgpu_limits, lend_count); F(arkgpu_limits, lend_stale_ms); F(arkgpu_limits, lent_bp);
    F(arkgpu_limits, reserve_period_ms); F(arkgpu_limits, reserve_margin_mib);
    F(arkgpu_proc, pid); F(arkgpu_proc, flags); F(arkgpu_proc, start_ticks); F(arkgpu_proc, bytes);
    F(arkgpu_proc, busy_ns); F(arkgpu_proc, launches); F(arkgpu_proc, throttled_ns);
    F(arkgpu_proc, oom_refusals); F(arkgpu_proc, reserve);
    F(arkgpu_latency_entry, seq); F(arkgpu_latency_entry, t_ns); F(arkgpu_latency_entry, latency_ns);
    F(arkgpu_latency_entry, batch);
    F(arkgpu_inflight, count); F(arkgpu_inflight, since_ns); F(arkgpu_inflight, changed_ns);
    F(arkgpu_inflight, begun); F(arkgpu_inflight, pad);
    F(arkgpu_usage, magic); F(arkgpu_usage, version); F(arkgpu_usage, size); F(arkgpu_usage, lock);
    F(arkgpu_usage, used); F(arkgpu_usage, credit_ns); F(arkgpu_usage, refill_ns); F(arkgpu_usage, busy_ns);
    F(arkgpu_usage, reserved);
    F(arkgpu_usage, reclaimed_bytes); F(arkgpu_usage, lock_recoveries);
    F(arkgpu_usage, queue_waits); F(arkgpu_usage, unmeasured); F(arkgpu_usage, events_dropped);
    F(arkgpu_usage, limits_waits); F(arkgpu_usage, lock_errors); F(arkgpu_usage, slot_refusals);
    F(arkgpu_usage, reserve_unlisted); F(arkgpu_usage, reserve_no_nvml); F(arkgpu_usage, procs);
    F(arkgpu_usage, inflight);
    F(arkgpu_usage, lat_head); F(arkgpu_usage, lat_pad); F(arkgpu_usage, lat);
    printf("  \"sizeof.arkgpu_limits\": %zu,\n", sizeof(arkgpu_limits));
    printf("  \"sizeof.arkgpu_proc\": %zu,\n", sizeof(arkgpu_proc));
    printf("  \"sizeof.arkgpu_latency_entry\": %zu,\n", sizeof(arkgpu_latency_entry));
    printf("  \"sizeof.arkgpu_inflight\": %zu,\n", sizeof(arkgpu_inflight));
    printf("  \"sizeof.arkgpu_usage\": %zu,\n", sizeof(arkgpu_usage));
    printf("  \"sizeof.pthread_mutex_t\": %zu,\n", sizeof(pthread_mutex_t));
    printf("  \"const.ARKGPU_LAYOUT_VERSION\": %u,\n", ARKGPU_LAYOUT_VERSION);
    printf("  \"const.ARKGPU_LIMITS_MAGIC\": %llu,\n", ARKGPU_LIMITS_MAGIC);
    printf("  \"const.ARKGPU_USAGE_MAGIC\": %llu,\n", ARKGPU_USAGE_MAGIC);
    printf("  \"const.ARKGPU_MAX_DEVICES\": %d,\n", ARKGPU_MAX_DEVICES);
    printf("  \"const.ARKGPU_MAX_PROCS\": %d,\n", ARKGPU_MAX_PROCS);
    printf("  \"const.ARKGPU_KINDS\": %d,\n", ARKGPU_KINDS);
    printf("  \"const.ARKGPU_LATENCY_SLOTS\": %d,\n", ARKGPU_LATENCY_SLOTS);
    printf("  \"const.ARKGPU_MAX_LENDERS\": %d,\n", ARKGPU_MAX_LENDERS);
    printf("  \"const.ARKGPU_LEND_STALE_MS\": %u\n", ARKGPU_LEND_STALE_MS);
    printf("}\n");
    return 0;
}
