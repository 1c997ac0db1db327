/*
 * The region lock and the process slots. The lock is a robust, process-shared
 * pthread mutex in the usage file, needed by every process of the container
 * for memory accounting and pacing; it is held only for memory updates, never
 * across a system call that may block (no /proc read, no file I/O): dead
 * processes are found by reading /proc without the lock, then reclaimed under
 * it if their slot still names the same process.
 *
 * A holder that dies inside the lock (SIGKILL, crash) leaves it to the next
 * locker with EOWNERDEAD: that one drops the dead holder's slot (known by its
 * IN_LOCK flag), recounts the totals from the live slots and marks the lock
 * consistent. Any other failure of the lock (a corrupted mutex: the container
 * can write its own usage file) refuses the operation, counts it in
 * lock_errors and says so once on stderr.
 */
#include "limiter.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void arkgpu_mutex_lock(pthread_mutex_t *m) {
    int e = pthread_mutex_lock(m);
    if (UNLIKELY(e != 0)) {
        fprintf(stderr, "arkgpu-limiter: pthread_mutex_lock failed (%s); stopping\n", strerror(e));
        abort();
    }
}

void arkgpu_mutex_unlock(pthread_mutex_t *m) {
    int e = pthread_mutex_unlock(m);
    if (UNLIKELY(e != 0)) {
        fprintf(stderr, "arkgpu-limiter: pthread_mutex_unlock failed (%s); stopping\n", strerror(e));
        abort();
    }
}

/* ---- liveness, read from /proc without the lock ---- */
/* starttime of pid from /proc (0 when it is gone or a zombie). */
uint64_t arkgpu_start_ticks(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X') return 0;
    p += 2; /* field 3, state */
    for (int field = 3; field < 22 && p; field++) p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

typedef struct {
    int32_t pid;
    uint64_t ticks;
} slot_id;

/* Zero a slot's usage (pid and start_ticks aside); the caller locks. */
static void clear_usage(arkgpu_proc *pr) {
    pr->flags = 0;
    memset(pr->bytes, 0, sizeof pr->bytes);
    for (int d = 0; d < ARKGPU_MAX_DEVICES; d++) ST(pr->reserve[d], 0);
    ST(pr->busy_ns, 0);
    ST(pr->launches, 0);
    ST(pr->throttled_ns, 0);
    ST(pr->oom_refusals, 0);
}

/* Gives a dead process's bytes back to the container and frees its slot. */
static void reclaim_slot(arkgpu_proc *pr) {
    arkgpu_usage *u = arkgpu_st.usage;
    for (int d = 0; d < ARKGPU_MAX_DEVICES; d++)
        for (int k = 0; k < ARKGPU_KINDS; k++) {
            uint64_t b = pr->bytes[d][k], used = LD(u->used[d]);
            ST(u->used[d], used - (b < used ? b : used));
            u->reclaimed_bytes += b;
            if (d == 0 && k == 0) arkgpu_debug_hold(HOLD_RECLAIM);
        }
    for (int d = 0; d < ARKGPU_MAX_DEVICES; d++) { /* the driver frees a dead process's reserve */
        uint64_t r = pr->reserve[d], held = LD(u->reserved[d]);
        ST(u->reserved[d], held - (r < held ? r : held));
    }
    ST(pr->pid, 0);
    ST(pr->start_ticks, 0);
    clear_usage(pr);
}

/* Slots (other than ours) whose process is gone; dead[i].pid 0 where alive. */
static int find_dead(slot_id dead[ARKGPU_MAX_PROCS]) {
    arkgpu_usage *u = arkgpu_st.usage;
    int n = 0;
    for (int i = 0; i < ARKGPU_MAX_PROCS; i++) {
        arkgpu_proc *pr = &u->procs[i];
        dead[i].pid = __atomic_load_n(&pr->pid, __ATOMIC_RELAXED);
        dead[i].ticks = __atomic_load_n(&pr->start_ticks, __ATOMIC_RELAXED);
        if (!dead[i].pid || pr == arkgpu_st.me || arkgpu_start_ticks(dead[i].pid) == dead[i].ticks)
            dead[i].pid = 0;
        n += dead[i].pid != 0;
    }
    return n;
}

/* Reclaim the slots found dead that still name the same process; the caller locks. */
static void reclaim_found_locked(const slot_id dead[ARKGPU_MAX_PROCS]) {
    arkgpu_usage *u = arkgpu_st.usage;
    for (int i = 0; i < ARKGPU_MAX_PROCS; i++) {
        arkgpu_proc *pr = &u->procs[i];
        if (dead[i].pid && pr->pid == dead[i].pid && pr->start_ticks == dead[i].ticks) reclaim_slot(pr);
    }
}

void arkgpu_reclaim_dead(void) {
    slot_id dead[ARKGPU_MAX_PROCS];
    if (!find_dead(dead) || arkgpu_usage_lock() != 0) return;
    reclaim_found_locked(dead);
    arkgpu_usage_unlock();
}

/* ---- the lock ---- */
/* After a holder died inside the lock: drop its slot and recount the totals.
 * The owner is known by its IN_LOCK flag: the kernel releases a robust mutex
 * early in process exit, before /proc shows the process as a zombie. Other
 * dead processes are left to the reaper (no /proc read under the lock). */
static void recover_locked(void) {
    arkgpu_usage *u = arkgpu_st.usage;
    u->lock_recoveries++;
    for (int i = 0; i < ARKGPU_MAX_PROCS; i++) {
        arkgpu_proc *pr = &u->procs[i];
        if (pr->pid && pr != arkgpu_st.me && (pr->flags & ARKGPU_PROC_IN_LOCK)) reclaim_slot(pr);
    }
    for (int d = 0; d < ARKGPU_MAX_DEVICES; d++) {
        uint64_t sum = 0, reserved = 0;
        for (int i = 0; i < ARKGPU_MAX_PROCS; i++)
            if (u->procs[i].pid) {
                for (int k = 0; k < ARKGPU_KINDS; k++) sum = sat_addu(sum, u->procs[i].bytes[d][k]);
                reserved = sat_addu(reserved, u->procs[i].reserve[d]);
            }
        ST(u->used[d], sum);
        ST(u->reserved[d], reserved);
    }
}

static void lock_failed(const char *call, int e) {
    ARKGPU_COUNT(lock_errors);
    if (!atomic_exchange(&arkgpu_st.lock_broken, 1))
        fprintf(stderr, "arkgpu-limiter: the region lock failed (%s: %s); memory and launches that need it "
                        "are refused\n", call, strerror(e));
}

int arkgpu_usage_lock(void) {
    pthread_mutex_t *m = (pthread_mutex_t *)arkgpu_st.usage->lock;
    int e = pthread_mutex_lock(m);
    if (e == EOWNERDEAD) {
        recover_locked();
        e = pthread_mutex_consistent(m);
        if (e != 0) {
            lock_failed("pthread_mutex_consistent", e);
            int u = pthread_mutex_unlock(m); /* leaves it unrecoverable: later locks fail, counted */
            if (u != 0) lock_failed("pthread_mutex_unlock", u);
            return -1;
        }
    } else if (e != 0) {
        lock_failed("pthread_mutex_lock", e);
        return -1;
    }
    if (arkgpu_st.me) arkgpu_st.me->flags |= ARKGPU_PROC_IN_LOCK;
    return 0;
}

void arkgpu_usage_unlock(void) {
    if (arkgpu_st.me) arkgpu_st.me->flags &= ~ARKGPU_PROC_IN_LOCK;
    int e = pthread_mutex_unlock((pthread_mutex_t *)arkgpu_st.usage->lock);
    if (e != 0) lock_failed("pthread_mutex_unlock", e);
}

/* ---- slots ---- */
const char *arkgpu_claim_slot(void) {
    arkgpu_usage *u = arkgpu_st.usage;
    pid_t pid = getpid();
    uint64_t ticks = arkgpu_start_ticks(pid);
    slot_id dead[ARKGPU_MAX_PROCS];
    int any_dead = find_dead(dead);
    if (arkgpu_usage_lock() != 0) return "the region lock failed";
    if (any_dead) reclaim_found_locked(dead);
    for (int i = 0; i < ARKGPU_MAX_PROCS && !arkgpu_st.me; i++)
        if (!LD(u->procs[i].pid)) {
            clear_usage(&u->procs[i]);
            ST(u->procs[i].start_ticks, ticks);
            u->procs[i].flags = ARKGPU_PROC_IN_LOCK;
            ST(u->procs[i].pid, pid);
            arkgpu_st.me = &u->procs[i];
            arkgpu_debug_hold(HOLD_CLAIM);
        }
    arkgpu_usage_unlock();
    if (arkgpu_st.me) return NULL;
    ARKGPU_COUNT(slot_refusals);
    return "no free process slot in the usage region (" "64 processes per container)";
}

/* Takes dead processes' memory back a few times a second and measures this
 * process's driver reserve every reserve_period_ms (rounded up to its 200 ms). */
static void *reaper(void *arg) {
    (void)arg;
    struct timespec ts = {0, 200000000};
    arkgpu_reserve_warm();
    for (;;) {
        nanosleep(&ts, NULL);
        arkgpu_reclaim_dead();
        arkgpu_reserve_tick();
    }
    return NULL;
}

void arkgpu_start_reaper(void) {
    pthread_t t;
    int e = pthread_create(&t, NULL, reaper, NULL);
    if (e == 0) e = pthread_detach(t);
    if (e != 0) /* dead processes are then reclaimed only when an allocation needs room */
        fprintf(stderr, "arkgpu-limiter: no reaper thread (%s)\n", strerror(e));
}

/* ---- test hooks ---- */
void arkgpu_parse_debug_hold(void) {
    static const char *const names[] = {"", "claim", "alloc", "free", "refill", "charge", "reclaim", "reserve"};
    const char *v = getenv("ARKGPU_DEBUG_HOLD");
    if (!v || !*v) return;
    const char *colon = strchr(v, ':');
    size_t len = colon ? (size_t)(colon - v) : strlen(v);
    for (int i = 1; i < (int)(sizeof names / sizeof *names); i++)
        if (strlen(names[i]) == len && strncmp(v, names[i], len) == 0) arkgpu_st.hold_site = i;
    arkgpu_st.hold_ms = colon ? (unsigned)strtoul(colon + 1, NULL, 10) : 60000u;
}

void arkgpu_hold_point(int site) {
    (void)site;
    struct timespec ts = {(time_t)(arkgpu_st.hold_ms / 1000), (long)(arkgpu_st.hold_ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Hold the region lock for ms milliseconds (the SIGKILL test). */
EXPORT int arkgpu_limiter_debug_hold_lock(unsigned ms) {
    if (!arkgpu_ready() || arkgpu_usage_lock() != 0) return -1;
    usleep(ms * 1000u);
    arkgpu_usage_unlock();
    return 0;
}
