#include "tensor.h"

#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util.h"

static Arena *current_arena;

void engine_set_arena(Arena *a) { current_arena = a; }

Arena *engine_arena(void) {
    if (!current_arena) DIE("no arena: call engine_set_arena() before making tensors");
    return current_arena;
}

Arena *engine_arena_or_null(void) { return current_arena; }

/* The most threads OpenBLAS has been set to, this process: it keeps a buffer
 * per thread once made, so this is how many it holds. 0 until first asked. */
static int blas_most;

int engine_blas_buffers(void) {
    if (!blas_most) blas_most = openblas_get_num_threads(); /* what it made when it loaded */
    return blas_most;
}

int engine_set_threads(int n) {
    if (n > 0) {
        if (n > engine_blas_buffers()) blas_most = n;
        omp_set_num_threads(n);
        openblas_set_num_threads(n);
    }
    return engine_threads();
}

int engine_threads(void) { return omp_get_max_threads(); }

const char *engine_blas_kernel(void) { return openblas_get_corename(); }

bool blas_kernel_is_avx512(const char *kernel) {
    static const char *const avx512[] = {"skylakex", "cooperlake", "sapphirerapids"};
    for (size_t i = 0; i < sizeof avx512 / sizeof *avx512; i++)
        if (!strcasecmp(kernel, avx512[i])) return true;
    return false;
}

bool cpu_has_avx512(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#else
    return false;
#endif
}

bool blas_kernel_note(bool cpu_avx512, const char *coretype, const char *kernel, char *buf, size_t size) {
    if (!cpu_avx512 || !coretype || !*coretype || blas_kernel_is_avx512(kernel)) return false;
    snprintf(buf, size,
             "note: OPENBLAS_CORETYPE=%s runs OpenBLAS's %s kernel (no AVX-512) on this AVX-512 CPU; with the "
             "variable unset, OpenBLAS picks its AVX-512 kernel, the faster one here",
             coretype, kernel);
    return true;
}

long shape_numel(int ndim, const int *shape) {
    if (ndim < 0 || ndim > TENSOR_MAX_DIMS) DIE("tensor: %d dimensions (at most %d)", ndim, TENSOR_MAX_DIMS);
    long n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) DIE("tensor: negative dimension %d", shape[i]);
        if (shape[i] && n > LONG_MAX / shape[i]) DIE("tensor: element count overflows");
        n *= shape[i];
    }
    return n;
}

void tensor_wrap(Tensor *t, float *data, int ndim, const int *shape) {
    memset(t, 0, sizeof *t);
    t->n = shape_numel(ndim, shape);
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->data = data;
}

Tensor *tensor_new(int ndim, const int *shape) {
    Arena *a = engine_arena();
    Tensor *t = arena_alloc(a, sizeof *t);
    long n = shape_numel(ndim, shape);
    tensor_wrap(t, tensor_scratch(n), ndim, shape);
    return t;
}

Tensor *tensor_new_of(DType dtype, int ndim, const int *shape) {
    if (dtype == DTYPE_F32) return tensor_new(ndim, shape);
    Arena *a = engine_arena();
    Tensor *t = arena_alloc(a, sizeof *t);
    tensor_wrap(t, NULL, ndim, shape);
    t->dtype = DTYPE_BF16;
    tensor_storage_alloc(t);
    return t;
}

Tensor *tensor_new16(int ndim, const int *shape) { return tensor_new_of(DTYPE_BF16, ndim, shape); }

long tensor_storage_floats(const Tensor *t) { return t->dtype == DTYPE_BF16 ? (t->n + 1) / 2 : t->n; }

void tensor_storage_alloc(Tensor *t) {
    float *p = tensor_scratch(tensor_storage_floats(t));
    if (t->dtype == DTYPE_BF16)
        t->data16 = (uint16_t *)p;
    else
        t->data = p;
}

void tensor_storage_release(Tensor *t) {
    float *p = t->dtype == DTYPE_BF16 ? (float *)t->data16 : t->data;
    tensor_scratch_release(p, tensor_storage_floats(t));
    t->data = NULL;
    t->data16 = NULL;
}

void tensor_storage_share(Tensor *dst, const Tensor *src) {
    dst->dtype = src->dtype;
    dst->data = src->data;
    dst->data16 = src->data16;
}

float *tensor_f32(const Tensor *t, const char *who) {
    if (t->dtype != DTYPE_F32)
        DIE("%s: reads a tensor stored in bf16 as fp32 (its values are in data16; only products may read it)", who);
    return t->data;
}

void tensor_release_data(Tensor *t) {
    tensor_storage_release(t);
    t->read_once = true;
}

Tensor *tensor_zeros(int ndim, const int *shape) {
    Tensor *t = tensor_new(ndim, shape);
    memset(t->data, 0, (size_t)t->n * sizeof(float));
    return t;
}

Tensor *tensor_1d(int a) { return tensor_new(1, (int[]){a}); }
Tensor *tensor_2d(int a, int b) { return tensor_new(2, (int[]){a, b}); }
Tensor *tensor_3d(int a, int b, int c) { return tensor_new(3, (int[]){a, b, c}); }
Tensor *tensor_4d(int a, int b, int c, int d) { return tensor_new(4, (int[]){a, b, c, d}); }

/* Gradient buffers that backward has finished with (tensor_grad_release), by
 * size, for the next gradient of that size in the same arena cycle: the
 * layers repeat their shapes, so a step's gradients take about one layer's
 * worth of memory instead of all of them. Forgotten when the arena is reset. */
#define MAX_SPARES 512
typedef struct {
    float *p;
    size_t bytes;
} Spare;
static Spare spares[MAX_SPARES];
static int n_spares;
static size_t spares_arena, spares_resets;

static void spares_check(const Arena *a) {
    if (spares_arena != a->id || spares_resets != a->resets) {
        n_spares = 0;
        spares_arena = a->id;
        spares_resets = a->resets;
    }
}

float *tensor_scratch(long n) {
    Arena *a = engine_arena();
    size_t bytes = (size_t)n * sizeof(float);
    spares_check(a);
    for (int i = n_spares - 1; i >= 0; i--)
        if (spares[i].bytes == bytes) {
            float *p = spares[i].p;
            spares[i] = spares[--n_spares];
            return p;
        }
    return arena_alloc(a, bytes);
}

void tensor_scratch_release(float *p, long n) {
    Arena *a = engine_arena_or_null();
    if (!a || !p) return;
    spares_check(a);
    if (n_spares < MAX_SPARES) spares[n_spares++] = (Spare){p, (size_t)n * sizeof(float)};
}

float *tensor_grad_unset(Tensor *t, bool *fresh) {
    *fresh = !t->grad;
    if (!t->grad) t->grad = tensor_scratch(t->n);
    return t->grad;
}

void tensor_grad_release(Tensor *t) {
    tensor_scratch_release(t->grad, t->n);
    t->grad = NULL;
}

float *tensor_grad(Tensor *t) {
    bool fresh;
    float *g = tensor_grad_unset(t, &fresh);
    if (fresh) memset(g, 0, (size_t)t->n * sizeof(float));
    return g;
}

const char *tensor_shape_str(const Tensor *t, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < t->ndim && k < size; i++)
        k += (size_t)snprintf(buf + k, size - k, i ? ", %d" : "%d", t->shape[i]);
    if (k < size) snprintf(buf + k, size - k, "]");
    return buf;
}

bool tensor_same_shape(const Tensor *a, const Tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}
