/* tensor.h: float32 tensors, contiguous and row-major, up to 4 dimensions.
 *
 * A tensor is a header and a pointer. Activations live in the engine's current
 * arena (see engine_set_arena); parameters point into the slabs of a ParamSet.
 * `grad` stays NULL until a gradient reaches the tensor during backward, when
 * it is allocated zeroed from the arena; a parameter's grad points into its
 * slab from the start. */
#ifndef ATTNLAB_TENSOR_H
#define ATTNLAB_TENSOR_H

#include <stdbool.h>
#include <stddef.h>

#include "arena.h"

#define TENSOR_MAX_DIMS 4

typedef struct Tensor {
    float *data;
    float *grad;
    int ndim; /* 0 for a scalar */
    int shape[TENSOR_MAX_DIMS];
    long n; /* number of elements */
    bool requires_grad;
    const char *name; /* parameters only */
    /* the recorded node that made it (NULL for leaves and unrecorded ops) */
    struct Node *producer;
    /* its data was handed back after forward, to be made again in backward
     * (tensor_release_recomputable) */
    bool recompute;
    /* handed back by tensor_release_data after its one reader ran: when a
     * checkpointed span runs again, it is handed back after that reader again */
    bool read_once;
} Tensor;

/* ---- the engine: where activations go, and whether ops record ----------- */

/* Activations and tape records come from this arena until it is changed. */
void engine_set_arena(Arena *a);
Arena *engine_arena(void);
/* The same, but NULL when none is set (for code that saves and restores it). */
Arena *engine_arena_or_null(void);
/* Sets the thread count of OpenMP and OpenBLAS (one pool for both: OpenBLAS is
 * the OpenMP build). n <= 0 keeps the default. Returns the count in effect. */
int engine_set_threads(int n);
int engine_threads(void);
/* The per-thread buffers OpenBLAS holds: the most threads it has been set to
 * (when it loaded, then by engine_set_threads); it never frees one. */
int engine_blas_buffers(void);

/* The OpenBLAS kernel in use ("Cooperlake", "SkylakeX", "Haswell", ...): its
 * DYNAMIC_ARCH build picks one for the CPU when the library loads, unless the
 * environment variable OPENBLAS_CORETYPE names one. */
const char *engine_blas_kernel(void);
/* Whether a kernel name is one of OpenBLAS's AVX-512 kernels. */
bool blas_kernel_is_avx512(const char *kernel);
/* Whether the CPU has AVX-512 (F, BW, DQ and VL, what those kernels use). */
bool cpu_has_avx512(void);
/* When OPENBLAS_CORETYPE (coretype; NULL when unset) has put an AVX2 kernel
 * on an AVX-512 CPU, a one-line note saying what unsetting it would give,
 * in buf; otherwise false. */
bool blas_kernel_note(bool cpu_avx512, const char *coretype, const char *kernel, char *buf, size_t size);

/* ---- making tensors ------------------------------------------------------ */

/* A tensor of this shape in the current arena, data uninitialised. */
Tensor *tensor_new(int ndim, const int *shape);
Tensor *tensor_zeros(int ndim, const int *shape);
/* Shorthands: tensor_2d(3, 4) is a [3, 4] tensor. */
Tensor *tensor_1d(int a);
Tensor *tensor_2d(int a, int b);
Tensor *tensor_3d(int a, int b, int c);
Tensor *tensor_4d(int a, int b, int c, int d);
/* A header for memory owned elsewhere (a parameter slab, a caller's buffer). */
void tensor_wrap(Tensor *t, float *data, int ndim, const int *shape);

/* n floats of the current arena for an op's temporary, uninitialised: a buffer
 * of that size handed back earlier in this arena cycle when there is one.
 * Give it back with tensor_scratch_release once nothing reads it. */
float *tensor_scratch(long n);
void tensor_scratch_release(float *p, long n);
/* Hands t's data back for reuse (an activation that nothing reads any more,
 * forward or backward, once its one reader has run: the caller knows) and
 * sets t->data to NULL. */
void tensor_release_data(Tensor *t);
/* Hands t's gradient buffer back for reuse (an activation's, once backward has
 * passed the node that made t; never a parameter's) and sets t->grad to NULL. */
void tensor_grad_release(Tensor *t);
/* The gradient buffer, allocated zeroed on first use. */
float *tensor_grad(Tensor *t);
/* The same for an op that can start the gradient itself: when nothing has
 * reached t yet (*fresh), the buffer comes unzeroed and the op must set every
 * element before it adds to any (a fused kernel zeroes each row as it first
 * touches it, while the row is in cache, instead of a pass over all of it). */
float *tensor_grad_unset(Tensor *t, bool *fresh);
/* Writes "[2, 3, 4]" into buf. */
const char *tensor_shape_str(const Tensor *t, char *buf, size_t size);
bool tensor_same_shape(const Tensor *a, const Tensor *b);
/* Number of elements of a shape; aborts on overflow. */
long shape_numel(int ndim, const int *shape);

#endif
