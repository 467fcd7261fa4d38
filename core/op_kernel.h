/* op_kernel.h: what an op needs, inside core or out (a fused attention kernel in
 * layers/ is an op like the primitives: an OpDef with forward and backward). */
#ifndef ATTNLAB_OP_KERNEL_H
#define ATTNLAB_OP_KERNEL_H

#include <omp.h>

#include "tape.h"

/* Elementwise loops go parallel above this many elements; below it the thread
 * start-up costs more than it saves. */
#define PAR_MIN 32768

/* The contiguous part [lo, hi) of [0, n) that this OpenMP thread owns; all of
 * it outside a parallel region. */
static inline void thread_range(long n, long *lo, long *hi) {
    int t = omp_get_thread_num(), nt = omp_get_num_threads();
    long per = (n + nt - 1) / nt;
    *lo = t * per < n ? t * per : n;
    *hi = *lo + per < n ? *lo + per : n;
}

/* Softmax of s[0, n) in place: exp(s - max s) / sum. A row whose entries are
 * all -INFINITY (every key masked) becomes all zeros, not NaN. Vector loops;
 * the sums use `omp simd reduction`, a fixed order. */
void softmax_inplace(float *s, int n);
/* The same, keeping the row's max and 1 / sum (max -inf: all masked, zeros),
 * so that a backward can compute the same row again bit for bit:
 * s_i = fm_expf(s_i - max) * inv. */
void softmax_inplace_stats(float *s, int n, float *mx, float *inv);

/* Aborts with "<op>: <why>: a [..], b [..]" (b may be NULL). */
void shape_fail(const char *op, const char *why, const Tensor *a, const Tensor *b)
    __attribute__((noreturn));
#define SHAPE_CHECK(cond, op, why, a, b) \
    do {                                 \
        if (!(cond)) shape_fail(op, why, a, b); \
    } while (0)

#endif
