/*
 * dlsym, the real one and ours. This file alone is never built with
 * AddressSanitizer: ASan's start-up calls dlsym before its shadow memory
 * exists, so our dlsym and everything it calls must not touch the shadow.
 * It calls only glibc's dlvsym and code in this file: no pthread call either,
 * since ThreadSanitizer intercepts those and its start-up calls dlsym too.
 */
#include "limiter.h"

#include <dlfcn.h>

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn real_dlsym_ptr;

/* Threads that race here all find the same function: storing it twice is harmless. */
void *arkgpu_real_dlsym(void *handle, const char *name) {
    dlsym_fn f = __atomic_load_n(&real_dlsym_ptr, __ATOMIC_ACQUIRE);
    if (!f) {
        f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!f) f = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        __atomic_store_n(&real_dlsym_ptr, f, __ATOMIC_RELEASE);
    }
    return f ? f(handle, name) : NULL;
}

static int same_name(const char *a, const char *b) {
    while (*a && *a == *b) a++, b++;
    return *a == *b;
}

void *arkgpu_hook_by_name(const char *name) {
    for (int i = 0; i < H_COUNT; i++)
        if (same_name(arkgpu_st.hooks[i].name, name)) return arkgpu_st.hooks[i].hook;
    return NULL;
}

/* An application that looks a hooked driver symbol up by handle (as cudart and
 * ctypes do) gets the hook, not the driver's function. */
EXPORT void *dlsym(void *handle, const char *name) {
    void *r = arkgpu_real_dlsym(handle, name);
    if (r && ((name[0] == 'c' && name[1] == 'u') ||
                      (name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l'))) {
        void *h = arkgpu_hook_by_name(name);
        if (h) return h;
    }
    return r;
}
