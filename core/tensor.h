/* tensor.h: tensors, contiguous and row-major, up to 4 dimensions, of one
 * of two element types: float32 (every tensor unless made otherwise) or
 * bfloat16 storage for an activation that only matrix products read.
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
#include <stdint.h>

#include "arena.h"

#define TENSOR_MAX_DIMS 4

/* A tensor's element type. DTYPE_BF16 is storage only: such a tensor holds
 * its values in `data16` (half of fp32's bytes, from the arena) and its
 * `data` is NULL; its gradient is fp32 like every gradient. Only an op that
 * reads the input through gemm_ex's bf16 operands may take one: OpDef.in16
 * says which of an op's inputs may be bf16, and node_run aborts with the
 * op's name when any other input is (a programming error: an op reading
 * `data` would find NULL). The bf16 values are the ones a bf16 product
 * rounds its inputs to (round to nearest even), so a product reading them
 * gives the bits it gives on the fp32 values. */
typedef enum { DTYPE_F32, DTYPE_BF16 } DType;

typedef struct Tensor {
    float *data; /* the values when dtype is DTYPE_F32; NULL otherwise */
    float *grad; /* fp32 whatever the dtype */
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
    DType dtype;
    uint16_t *data16; /* the values when dtype is DTYPE_BF16; NULL otherwise */
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
/* The same, stored in bf16 (data16; data is NULL). */
Tensor *tensor_new16(int ndim, const int *shape);
/* A tensor of this shape and element type, data uninitialised. */
Tensor *tensor_new_of(DType dtype, int ndim, const int *shape);
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

/* ---- storage of either element type -------------------------------------- */

/* Whether t holds its values now (data or data16 set). */
static inline bool tensor_has_data(const Tensor *t) { return t->data || t->data16; }
/* The values as a product's operand: data16 for bf16, else data (gemm_ex's
 * A or B, with tensor_is16 as its a16 / b16). */
static inline const void *tensor_values(const Tensor *t) {
    return t->dtype == DTYPE_BF16 ? (const void *)t->data16 : (const void *)t->data;
}
static inline bool tensor_is16(const Tensor *t) { return t->dtype == DTYPE_BF16; }
/* Floats of arena memory t's values take: n, or ceil(n / 2) in bf16. */
long tensor_storage_floats(const Tensor *t);
/* t's values' memory from the current arena (tensor_scratch), and back. */
void tensor_storage_alloc(Tensor *t);
void tensor_storage_release(Tensor *t);
/* dst's values become src's (a view's output): the same storage. */
void tensor_storage_share(Tensor *dst, const Tensor *src);
/* t->data, aborting with `who` when t is stored in bf16 (for code that
 * reads values outside the op table's check). */
float *tensor_f32(const Tensor *t, const char *who);

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
