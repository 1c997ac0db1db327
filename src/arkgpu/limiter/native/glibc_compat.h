/*
 * Old glibc symbol versions, so that the libraries load in images built on an
 * older glibc than the build machine's (docs/LIMITER.md, "glibc baseline").
 *
 * The Makefile passes `-include glibc_compat.h` to every file. glibc 2.33 and
 * 2.34 moved stat/fstat and the dl and pthread functions to new default
 * versions (GLIBC_2.33, GLIBC_2.34); a library linked against them cannot be
 * preloaded under Ubuntu 20.04 (2.31), UBI 8 or Rocky 8 (2.28): ld.so ignores
 * it and the program runs unlimited. Each .symver below binds a reference to
 * the version that every glibc since 2.17 still exports (as a compat symbol
 * from 2.34 on: the same function), and the Makefile links -ldl and -lpthread,
 * where glibc before 2.34 keeps them. stat and fstat become __xstat and
 * __fxstat, what glibc's own headers called before 2.33.
 *
 * x86-64 only (versions are per architecture); elsewhere nothing is pinned.
 * tests/limiter/test_glibc_baseline.py fails on any version need past
 * GLIBC_2.17. limiter_dlsym.c defines dlsym, so dlsym is not pinned here.
 */
#ifndef ARKGPU_GLIBC_COMPAT_H
#define ARKGPU_GLIBC_COMPAT_H

/* As every file of this folder defines it (identically, so no warning). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/stat.h> /* defines __GLIBC__ too */

#if defined(__x86_64__) && defined(__GLIBC__)

#define ARKGPU_PIN(name, version) __asm__(".symver " #name "," #name "@" version)

ARKGPU_PIN(dlopen, "GLIBC_2.2.5");
ARKGPU_PIN(dlvsym, "GLIBC_2.2.5");
ARKGPU_PIN(dlerror, "GLIBC_2.2.5");
ARKGPU_PIN(dladdr, "GLIBC_2.2.5");
ARKGPU_PIN(pthread_create, "GLIBC_2.2.5");
ARKGPU_PIN(pthread_detach, "GLIBC_2.2.5");
ARKGPU_PIN(pthread_join, "GLIBC_2.2.5");
ARKGPU_PIN(pthread_once, "GLIBC_2.2.5");
ARKGPU_PIN(pthread_mutexattr_init, "GLIBC_2.2.5");
ARKGPU_PIN(pthread_mutexattr_destroy, "GLIBC_2.2.5");
ARKGPU_PIN(pthread_mutexattr_setpshared, "GLIBC_2.2.5");
ARKGPU_PIN(pthread_mutexattr_setrobust, "GLIBC_2.12");
ARKGPU_PIN(pthread_mutex_consistent, "GLIBC_2.12");
ARKGPU_PIN(__xstat, "GLIBC_2.2.5");
ARKGPU_PIN(__fxstat, "GLIBC_2.2.5");

/* _STAT_VER_LINUX of x86-64: the struct stat layout of <sys/stat.h>. */
#define ARKGPU_STAT_VER 1
extern int __xstat(int ver, const char *path, struct stat *st);
extern int __fxstat(int ver, int fd, struct stat *st);

static inline int arkgpu_compat_stat(const char *path, struct stat *st) {
    return __xstat(ARKGPU_STAT_VER, path, st);
}

static inline int arkgpu_compat_fstat(int fd, struct stat *st) {
    return __fxstat(ARKGPU_STAT_VER, fd, st);
}

/* Function-like: `struct stat` (no parenthesis after it) is left alone. */
#define stat(path, st) arkgpu_compat_stat(path, st)
#define fstat(fd, st) arkgpu_compat_fstat(fd, st)

#endif
#endif
