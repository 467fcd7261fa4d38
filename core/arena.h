/* arena.h: bump allocation for activations and their gradients.
 *
 * Every tensor made during a training step comes from one arena, and
 * arena_reset() frees them all at once at the start of the next step.
 * The first step may outgrow the arena: the extra memory comes from overflow
 * blocks, and the next reset replaces everything with one block as large as the
 * high-water mark. From then on a step of the same shapes calls malloc zero
 * times; `mallocs` counts the calls so a test can hold us to that. */
#ifndef ATTNLAB_ARENA_H
#define ATTNLAB_ARENA_H

#include <stddef.h>

#define ARENA_ALIGN 64 /* one cache line; also what AVX-512 loads like */

typedef struct ArenaBlock ArenaBlock;

typedef struct {
    char *base;           /* the main block */
    size_t cap, used;     /* bytes in the main block, bytes handed out from it */
    ArenaBlock *overflow; /* blocks taken since the last reset, newest first */
    size_t overflow_used; /* bytes handed out from overflow blocks */
    size_t peak;          /* the most bytes in use at once, over the arena's life */
    size_t mallocs;       /* calls to the system allocator, over the arena's life */
    size_t resets;        /* arena_reset calls: memory handed out before the last one is gone */
    size_t id;            /* unique over the process: an arena at a reused address is another */
} Arena;

void arena_init(Arena *a, size_t cap);
void arena_free(Arena *a);
/* `bytes` of uninitialised memory aligned to ARENA_ALIGN. Never returns NULL. */
void *arena_alloc(Arena *a, size_t bytes);
/* The same, zeroed. */
void *arena_calloc(Arena *a, size_t bytes);
/* Frees everything handed out. Grows the main block if the last cycle overflowed. */
void arena_reset(Arena *a);
/* Bytes handed out since the last reset. */
size_t arena_in_use(const Arena *a);

#endif
