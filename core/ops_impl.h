/* ops_impl.h: what the core/ops_*.c files share. Not for use outside core. */
#ifndef ATTNLAB_OPS_IMPL_H
#define ATTNLAB_OPS_IMPL_H

#include <omp.h>

#include "ops.h"

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

/* Aborts with "<op>: <why>: a [..], b [..]" (b may be NULL). */
void shape_fail(const char *op, const char *why, const Tensor *a, const Tensor *b)
    __attribute__((noreturn));
#define SHAPE_CHECK(cond, op, why, a, b) \
    do {                                 \
        if (!(cond)) shape_fail(op, why, a, b); \
    } while (0)

/* A new node with its inputs set; the constructor then sets out and attributes. */
Node *node_with(OpId id, int n_in, Tensor *a, Tensor *b, Tensor *c);

#define OP_DECLARE(name)              \
    void name##_forward(Node *n);     \
    void name##_backward(Node *n);

OP_DECLARE(matmul)
OP_DECLARE(add)
OP_DECLARE(mul)
OP_DECLARE(scale)
OP_DECLARE(sum)
OP_DECLARE(mean)
OP_DECLARE(view)
OP_DECLARE(split_heads)
OP_DECLARE(merge_heads)
OP_DECLARE(gelu)
OP_DECLARE(relu)
OP_DECLARE(leakyrelu)
OP_DECLARE(elu)
OP_DECLARE(layernorm)
OP_DECLARE(rmsnorm)
OP_DECLARE(softmax)
OP_DECLARE(embedding)
OP_DECLARE(cross_entropy)

#endif
