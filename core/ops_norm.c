/* ops_norm.c: layernorm and rmsnorm over the last dimension. */
#include <math.h>

#include "ops_impl.h"

/* layernorm's and rmsnorm's: 1 / sqrt(var + eps) */
typedef struct {
    float eps;
} NormAttrs;
NODE_ATTRS_DECLARE(NormAttrs);

static void check_norm(const char *op, const Tensor *x, const Tensor *w) {
    SHAPE_CHECK(x->ndim >= 1, op, "needs at least 1 dim", x, w);
    SHAPE_CHECK(w->ndim == 1 && w->shape[0] == x->shape[x->ndim - 1], op, "weight must be [D], D = last dim", x, w);
}

Tensor *op_layernorm(Tensor *x, Tensor *w, Tensor *b, float eps) {
    check_norm("layernorm", x, w);
    check_norm("layernorm", x, b);
    Node *n = node_with(OP_LAYERNORM, 3, x, w, b);
    NODE_ATTRS(n, NormAttrs)->eps = eps;
    n->out = tensor_new(x->ndim, x->shape);
    long rows = x->n / x->shape[x->ndim - 1];
    n->saved = arena_alloc(engine_arena(), 2 * (size_t)rows * sizeof(float)); /* mean, then rstd */
    return node_run(n);
}

/* y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps), per row.
 * Two passes (mean, then variance about it) for accuracy. The row loops are
 * `omp simd` with reductions: vector code, in a fixed order. */
static void layernorm_row(const float *restrict x, const float *restrict w, const float *restrict b,
                          float *restrict y, int D, float eps, float *mean, float *rstd) {
    float m = 0.0f, v = 0.0f;
    #pragma omp simd reduction(+ : m)
    for (int i = 0; i < D; i++) m += x[i];
    m /= (float)D;
    #pragma omp simd reduction(+ : v)
    for (int i = 0; i < D; i++) v += (x[i] - m) * (x[i] - m);
    float s = 1.0f / sqrtf(v / (float)D + eps);
    #pragma omp simd
    for (int i = 0; i < D; i++) y[i] = (x[i] - m) * s * w[i] + b[i];
    *mean = m;
    *rstd = s;
}

void op_layernorm_forward(Node *n) {
    const Tensor *x = n->in[0];
    const float *w = n->in[1]->data, *b = n->in[2]->data;
    int D = x->shape[x->ndim - 1];
    long rows = x->n / D;
    float eps = NODE_ATTRS(n, NormAttrs)->eps, *mean = n->saved, *rstd = n->saved + rows;
    #pragma omp parallel for if (x->n > PAR_MIN)
    for (long r = 0; r < rows; r++)
        layernorm_row(x->data + r * D, w, b, n->out->data + r * D, D, eps, mean + r, rstd + r);
}

/* dx for one row: with xhat = (x - m) s and g = dy w,
 *   dx += s (g - mean(g) - xhat mean(g xhat)). */
static void layernorm_dx_row(const float *restrict x, const float *restrict dy, const float *restrict w,
                             float *restrict dx, int D, float m, float s) {
    float g_mean = 0.0f, gx_mean = 0.0f;
    #pragma omp simd reduction(+ : g_mean, gx_mean)
    for (int i = 0; i < D; i++) {
        float g = dy[i] * w[i];
        g_mean += g;
        gx_mean += g * (x[i] - m) * s;
    }
    g_mean /= (float)D;
    gx_mean /= (float)D;
    #pragma omp simd
    for (int i = 0; i < D; i++) dx[i] += s * (dy[i] * w[i] - g_mean - (x[i] - m) * s * gx_mean);
}

/* dw += dy xhat and db += dy over all rows, in row order (dw or db may be NULL). */
static void layernorm_dwb_rows(const float *x, const float *dy, const float *mean, const float *rstd, long rows, int D,
                               float *restrict dw, float *restrict db) {
    for (long r = 0; r < rows; r++) {
        const float *restrict xr = x + r * D, *restrict dyr = dy + r * D;
        float m = mean[r], s = rstd[r];
        if (dw) {
            #pragma omp simd
            for (int i = 0; i < D; i++) dw[i] += dyr[i] * (xr[i] - m) * s;
        }
        if (db) {
            #pragma omp simd
            for (int i = 0; i < D; i++) db[i] += dyr[i];
        }
    }
}

void op_layernorm_backward(Node *n) {
    Tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int D = x->shape[x->ndim - 1];
    long rows = x->n / D;
    const float *dy = n->out->grad, *mean = n->saved, *rstd = n->saved + rows;
    if (x->requires_grad) {
        float *dx = tensor_grad(x);
        #pragma omp parallel for if (x->n > PAR_MIN)
        for (long r = 0; r < rows; r++)
            layernorm_dx_row(x->data + r * D, dy + r * D, w->data, dx + r * D, D, mean[r], rstd[r]);
    }
    /* dw and db sum over rows in row order, so the result does not depend on
     * the thread count. */
    if (w->requires_grad || b->requires_grad)
        layernorm_dwb_rows(x->data, dy, mean, rstd, rows, D, w->requires_grad ? tensor_grad(w) : NULL,
                           b->requires_grad ? tensor_grad(b) : NULL);
}

Tensor *op_rmsnorm(Tensor *x, Tensor *w, float eps) {
    check_norm("rmsnorm", x, w);
    Node *n = node_with(OP_RMSNORM, 2, x, w, NULL);
    NODE_ATTRS(n, NormAttrs)->eps = eps;
    n->out = tensor_new(x->ndim, x->shape);
    n->saved = arena_alloc(engine_arena(), (size_t)(x->n / x->shape[x->ndim - 1]) * sizeof(float)); /* rstd */
    return node_run(n);
}

/* y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps), per row. */
static void rmsnorm_row(const float *restrict x, const float *restrict w, float *restrict y, int D, float eps,
                        float *rstd) {
    float ss = 0.0f;
    #pragma omp simd reduction(+ : ss)
    for (int i = 0; i < D; i++) ss += x[i] * x[i];
    float s = 1.0f / sqrtf(ss / (float)D + eps);
    #pragma omp simd
    for (int i = 0; i < D; i++) y[i] = x[i] * s * w[i];
    *rstd = s;
}

void op_rmsnorm_forward(Node *n) {
    const Tensor *x = n->in[0];
    int D = x->shape[x->ndim - 1];
    long rows = x->n / D;
    float eps = NODE_ATTRS(n, NormAttrs)->eps;
    #pragma omp parallel for if (x->n > PAR_MIN)
    for (long r = 0; r < rows; r++)
        rmsnorm_row(x->data + r * D, n->in[1]->data, n->out->data + r * D, D, eps, n->saved + r);
}

/* With xhat = x * rstd and g = dy * w:  dx = rstd * (g - xhat * mean(g * xhat)). */
static void rmsnorm_dx_row(const float *restrict x, const float *restrict dy, const float *restrict w,
                           float *restrict dx, int D, float s) {
    float gx_mean = 0.0f;
    #pragma omp simd reduction(+ : gx_mean)
    for (int i = 0; i < D; i++) gx_mean += dy[i] * w[i] * x[i] * s;
    gx_mean /= (float)D;
    #pragma omp simd
    for (int i = 0; i < D; i++) dx[i] += s * (dy[i] * w[i] - x[i] * s * gx_mean);
}

/* dw = sum over rows of dy * xhat, in row order. */
void op_rmsnorm_backward(Node *n) {
    Tensor *x = n->in[0], *w = n->in[1];
    int D = x->shape[x->ndim - 1];
    long rows = x->n / D;
    const float *dy = n->out->grad, *rstd = n->saved;
    if (x->requires_grad) {
        float *dx = tensor_grad(x);
        #pragma omp parallel for if (x->n > PAR_MIN)
        for (long r = 0; r < rows; r++) rmsnorm_dx_row(x->data + r * D, dy + r * D, w->data, dx + r * D, D, rstd[r]);
    }
    if (w->requires_grad) {
        float *restrict dw = tensor_grad(w);
        for (long r = 0; r < rows; r++) {
            const float *restrict xr = x->data + r * D, *restrict dyr = dy + r * D;
            float s = rstd[r];
            #pragma omp simd
            for (int i = 0; i < D; i++) dw[i] += dyr[i] * xr[i] * s;
        }
    }
}
