/* A small open-addressing map from 64-bit keys (device pointers, handles) to
 * two 64-bit values, with backward-shift deletion; the caller locks. */
#ifndef ARKGPU_PTRMAP_H
#define ARKGPU_PTRMAP_H

#include <stdint.h>
#include <stdlib.h>

typedef struct {
    uint64_t key; /* 0 marks an empty entry */
    uint64_t a, b;
} ptrmap_entry;

typedef struct {
    ptrmap_entry *e;
    size_t cap; /* power of two */
    size_t n;
} ptrmap;

static inline size_t ptrmap_slot(const ptrmap *m, uint64_t key) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (m->cap - 1);
}

static inline int ptrmap_put(ptrmap *m, uint64_t key, uint64_t a, uint64_t b);

static inline int ptrmap_grow(ptrmap *m) {
    ptrmap old = *m;
    size_t cap = old.cap ? old.cap * 2 : 1024;
    m->e = calloc(cap, sizeof(ptrmap_entry));
    if (!m->e) {
        *m = old;
        return -1;
    }
    m->cap = cap;
    m->n = 0;
    for (size_t i = 0; i < old.cap; i++)
        if (old.e[i].key) ptrmap_put(m, old.e[i].key, old.e[i].a, old.e[i].b);
    free(old.e);
    return 0;
}

/* Insert or replace; -1 when memory runs out. */
static inline int ptrmap_put(ptrmap *m, uint64_t key, uint64_t a, uint64_t b) {
    if ((m->n + 1) * 2 > m->cap && ptrmap_grow(m)) return -1;
    size_t i = ptrmap_slot(m, key);
    while (m->e[i].key && m->e[i].key != key) i = (i + 1) & (m->cap - 1);
    if (!m->e[i].key) m->n++;
    m->e[i] = (ptrmap_entry){key, a, b};
    return 0;
}

/* Remove key; 0 and its values when present, -1 when absent. */
static inline int ptrmap_take(ptrmap *m, uint64_t key, uint64_t *a, uint64_t *b) {
    if (!m->cap || !key) return -1;
    size_t i = ptrmap_slot(m, key);
    while (m->e[i].key != key) {
        if (!m->e[i].key) return -1;
        i = (i + 1) & (m->cap - 1);
    }
    *a = m->e[i].a;
    *b = m->e[i].b;
    size_t j = i;
    for (;;) { /* backward shift: keep every probe chain unbroken */
        j = (j + 1) & (m->cap - 1);
        if (!m->e[j].key) break;
        size_t home = ptrmap_slot(m, m->e[j].key);
        int between = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (!between) {
            m->e[i] = m->e[j];
            i = j;
        }
    }
    m->e[i].key = 0;
    m->n--;
    return 0;
}

static inline void ptrmap_clear(ptrmap *m) {
    free(m->e);
    m->e = NULL;
    m->cap = m->n = 0;
}

#endif
