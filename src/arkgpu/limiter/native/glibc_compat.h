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
 * where glibc before 2.34 keeps them. stat and fstat become their system
 * calls: pinning __xstat or __fxstat (what glibc's headers called before 2.33)
 * made ld 2.40 leave a null PLT relocation in the ASan and TSan builds, whose
 * runtimes define those names too ("unexpected PLT reloc type 0x00").
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
#include <fcntl.h>
#include <sys/stat.h> /* defines __GLIBC__ too */
#include <sys/syscall.h>
#include <unistd.h>

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

/* x86-64's struct stat is the kernel's: the system calls fill it as glibc does. */
static inline int arkgpu_compat_stat(const char *path, struct stat *st) {
    return (int)syscall(SYS_newfstatat, AT_FDCWD, path, st, 0);
}

static inline int arkgpu_compat_fstat(int fd, struct stat *st) {
    return (int)syscall(SYS_fstat, fd, st);
}

/* Function-like: `struct stat` (no parenthesis after it) is left alone. */
#define stat(path, st) arkgpu_compat_stat(path, st)
#define fstat(fd, st) arkgpu_compat_fstat(fd, st)

#endif
#endif
