/*
 * ArkGPU control region, layout version 4: the one definition of the shared
 * memory contract between the node side (Python, arkgpu.limiter.layout mirrors
 * this file and a test checks sizes and offsets) and the interception library.
 *
 * A container's region is a directory with two files:
 *   limits  written only by the node side; the container maps it read-only.
 *   usage   written by the library in each process of the container (and read
 *           by the node side): per-process usage, the pacing bucket, the LC
 *           batch-in-flight counter, the LC latency ring.
 * A best-effort container that borrows idle share also finds, read-only,
 *   lenders/<k>  the usage file of lender k (an LC container on the same GPU).
 */
#ifndef ARKGPU_REGION_H
#define ARKGPU_REGION_H

#include <stdint.h>

#define ARKGPU_LAYOUT_VERSION 4u
#define ARKGPU_LIMITS_MAGIC 0x53544d494c4b5241ull /* "ARKLIMTS" */
#define ARKGPU_USAGE_MAGIC 0x45474153554b5241ull  /* "ARKUSAGE" */
#define ARKGPU_MAX_DEVICES 8
#define ARKGPU_MAX_PROCS 64
#define ARKGPU_LATENCY_SLOTS 1024
#define ARKGPU_MAX_LENDERS 8           /* lenders/<k>, k = 0..7 */
#define ARKGPU_LEND_STALE_MS 5000u     /* default staleness limit of an in-flight count */
#define ARKGPU_SHARE_FULL 10000u       /* compute share unit: basis points */
#define ARKGPU_MEM_UNLIMITED UINT64_MAX /* memory cap meaning "no cap" */
#define ARKGPU_LOCK_BYTES 64           /* room for a pthread_mutex_t */

enum arkgpu_mode { ARKGPU_MODE_HARD = 0, ARKGPU_MODE_ELASTIC = 1 };

/* Kinds of device memory, counted separately per process and device. */
enum arkgpu_kind {
    ARKGPU_KIND_ALLOC = 0,   /* cuMemAlloc, cuMemAllocPitch */
    ARKGPU_KIND_MANAGED = 1, /* cuMemAllocManaged */
    ARKGPU_KIND_VMM = 2,     /* cuMemCreate */
    ARKGPU_KIND_ASYNC = 3,   /* cuMemAllocAsync */
    ARKGPU_KIND_POOL = 4,    /* cuMemAllocFromPoolAsync */
    ARKGPU_KIND_ARRAY = 5,   /* cuArrayCreate, cuArray3DCreate, cuMipmappedArrayCreate */
    ARKGPU_KINDS = 6
};

/* Written by the node side under a seqlock: generation is odd while writing.
 * Every reader (the library, the node side) copies the record and keeps the
 * copy only when it read the same even generation before and after it. */
typedef struct arkgpu_limits {
    uint64_t magic;
    uint32_t version;
    uint32_t size; /* sizeof(arkgpu_limits) */
    uint64_t generation;
    uint32_t mode;        /* enum arkgpu_mode */
    uint32_t share_bp;    /* compute share of each GPU, 0..10000 basis points */
    uint32_t num_devices; /* devices with a memory cap below */
    uint32_t burst_us;    /* pacing bucket depth at full share, microseconds */
    uint64_t mem_limit[ARKGPU_MAX_DEVICES]; /* bytes per device ordinal */
    uint32_t lend_count;    /* lenders with a lent share below */
    uint32_t lend_stale_ms; /* an in-flight count unchanged this long is ignored (0: default) */
    uint32_t lent_bp[ARKGPU_MAX_LENDERS]; /* share lender k lends while idle, basis points */
    /* Driver reserve (layout 4): how often a process measures the memory the
     * driver holds for it beyond its requested bytes (NVML), and how close to
     * the cap an allocation must come to measure it first. */
    uint32_t reserve_period_ms; /* 0: only at the first allocation and near the cap */
    uint32_t reserve_margin_mib;
} arkgpu_limits;

/* arkgpu_proc.flags bits */
#define ARKGPU_PROC_IN_LOCK 1u /* this process holds the usage lock */

/* One process's usage; pid 0 marks a free slot. */
typedef struct arkgpu_proc {
    int32_t pid;
    uint32_t flags;       /* ARKGPU_PROC_* bits */
    uint64_t start_ticks; /* /proc/<pid>/stat starttime: tells pid reuse apart */
    uint64_t bytes[ARKGPU_MAX_DEVICES][ARKGPU_KINDS];
    uint64_t busy_ns;      /* GPU busy time measured with events */
    uint64_t launches;     /* kernel and graph launches */
    uint64_t throttled_ns; /* time launches waited for the compute share */
    uint64_t oom_refusals; /* allocations refused at the cap */
    /* Device memory the driver holds for this process beyond its requested
     * bytes (context, modules, allocator slack): NVML's per-process figure
     * minus bytes[dev][*], 0 while unmeasured (layout 4). Counted in the cap. */
    uint64_t reserve[ARKGPU_MAX_DEVICES];
} arkgpu_proc;

typedef struct arkgpu_latency_entry {
    uint64_t seq; /* index + 1 once complete; 0 while being written */
    uint64_t t_ns; /* CLOCK_MONOTONIC when reported */
    uint64_t latency_ns;
    uint64_t batch;
} arkgpu_latency_entry;

/* The LC side of idle-share lending, one cache line: written lock-free by the
 * client library (arkgpu_client_batch_begin/end), read by borrowers. */
typedef struct arkgpu_inflight {
    uint64_t count;     /* batches executing now: begins - ends, never below 0 */
    int64_t since_ns;   /* CLOCK_MONOTONIC when count last went from 0 to 1 */
    int64_t changed_ns; /* CLOCK_MONOTONIC of the last begin or end */
    uint64_t begun;     /* batches begun so far */
    uint64_t pad[4];
} arkgpu_inflight;

typedef struct arkgpu_usage {
    uint64_t magic;
    uint32_t version;
    uint32_t size; /* sizeof(arkgpu_usage) */
    uint8_t lock[ARKGPU_LOCK_BYTES]; /* robust, process-shared pthread mutex */
    uint64_t used[ARKGPU_MAX_DEVICES]; /* bytes of live processes, per device */
    int64_t credit_ns[ARKGPU_MAX_DEVICES]; /* pacing bucket per device */
    int64_t refill_ns[ARKGPU_MAX_DEVICES]; /* CLOCK_MONOTONIC of last refill */
    uint64_t busy_ns[ARKGPU_MAX_DEVICES];  /* container busy time per device */
    uint64_t reserved[ARKGPU_MAX_DEVICES]; /* driver reserve of live processes, per device (layout 4) */
    uint64_t reclaimed_bytes; /* bytes taken back from dead processes */
    uint64_t lock_recoveries; /* times the lock was found with a dead owner */
    /* Degraded paths taken (layout 3), counted so that the node side sees them: */
    uint64_t queue_waits;      /* launches that waited for the oldest of PENDING in-flight launches */
    uint64_t unmeasured;       /* launches charged at the estimate, without events (no event, timeout) */
    uint64_t events_dropped;   /* pacing events destroyed because the event pool was full */
    uint64_t limits_waits;     /* limit reads that found a write in progress for over 100 ms */
    uint64_t lock_errors;      /* region lock calls that failed (the operation was refused) */
    uint64_t slot_refusals;    /* processes refused for want of a free process slot */
    uint64_t reserve_unlisted; /* processes NVML did not list (pid namespace): reserve taken as 0 */
    uint64_t reserve_no_nvml;  /* processes without a usable NVML: reserve taken as 0 */
    arkgpu_proc procs[ARKGPU_MAX_PROCS];
    arkgpu_inflight inflight;
    uint64_t lat_head; /* next latency ticket, fetch-and-add */
    uint64_t lat_pad[7];
    arkgpu_latency_entry lat[ARKGPU_LATENCY_SLOTS];
} arkgpu_usage;

#endif
