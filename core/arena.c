#include "arena.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "util.h"

struct ArenaBlock {
    ArenaBlock *next;
    size_t size;
    char *data;
};

static size_t round_up(size_t n) { return (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1); }

/* Blocks of HUGE_MIN bytes or more start on a 2 MiB boundary and ask for
 * transparent huge pages (Linux, THP in "madvise" mode): the long strided
 * walks over activations (a head's rows in [B, T, H d]) then miss the TLB far
 * less. Only a hint. */
#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_MIN ((size_t)8 << 20)

static char *block_alloc(Arena *a, size_t bytes) {
    bytes = round_up(bytes ? bytes : ARENA_ALIGN);
    bool huge = bytes >= HUGE_MIN;
    if (huge) bytes = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1); /* aligned_alloc wants a multiple */
    void *p = aligned_alloc(huge ? HUGE_PAGE : ARENA_ALIGN, bytes);
    if (!p) DIE_OOM(bytes);
#ifdef MADV_HUGEPAGE
    if (huge) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    a->mallocs++;
    return p;
}

void arena_init(Arena *a, size_t cap) {
    static _Atomic size_t next_id;
    memset(a, 0, sizeof *a);
    a->id = ++next_id;
    a->cap = round_up(cap);
    a->base = a->cap ? block_alloc(a, a->cap) : NULL;
}

static void free_overflow(Arena *a) {
    for (ArenaBlock *b = a->overflow, *next; b; b = next) {
        next = b->next;
        free(b->data);
        free(b);
    }
    a->overflow = NULL;
    a->overflow_used = 0;
}

void arena_free(Arena *a) {
    free_overflow(a);
    free(a->base);
    memset(a, 0, sizeof *a);
}

size_t arena_in_use(const Arena *a) { return a->used + a->overflow_used; }

void *arena_alloc(Arena *a, size_t bytes) {
    bytes = round_up(bytes);
    void *p;
    if (a->used + bytes <= a->cap) {
        p = a->base + a->used;
        a->used += bytes;
    } else {
        /* Each overflow request gets a block of its own: simple, and it only
         * happens until the next reset sizes the main block. */
        ArenaBlock *b = malloc(sizeof *b);
        if (!b) DIE_OOM(sizeof *b);
        a->mallocs++;
        b->size = bytes;
        b->data = block_alloc(a, bytes);
        b->next = a->overflow;
        a->overflow = b;
        a->overflow_used += bytes;
        p = b->data;
    }
    size_t in_use = arena_in_use(a);
    if (in_use > a->peak) a->peak = in_use;
    return p;
}

void *arena_calloc(Arena *a, size_t bytes) {
    void *p = arena_alloc(a, bytes);
    memset(p, 0, bytes);
    return p;
}

void arena_reset(Arena *a) {
    a->resets++;
    if (a->overflow) {
        free_overflow(a);
        free(a->base);
        a->cap = round_up(a->peak);
        a->base = block_alloc(a, a->cap);
    }
    a->used = 0;
}
