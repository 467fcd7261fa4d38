/* ops_norm.c: layernorm and rmsnorm over the last dimension. */
#include <math.h>

#include "ops_impl.h"

static void check_norm(const char *op, const Tensor *x, const Tensor *w) {
    SHAPE_CHECK(x->ndim >= 1, op, "needs at least 1 dim", x, w);
    SHAPE_CHECK(w->ndim == 1 && w->shape[0] == x->shape[x->ndim - 1], op, "weight must be [D], D = last dim", x, w);
}

Tensor *op_layernorm(Tensor *x, Tensor *w, Tensor *b, float eps) {
    check_norm("layernorm", x, w);
    check_norm("layernorm", x, b);
    Node *n = node_with(OP_LAYERNORM, 3, x, w, b);
    n->f[0] = eps;
    n->out = tensor_new(x->ndim, x->shape);
    long rows = x->n / x->shape[x->ndim - 1];
    n->saved = arena_alloc(engine_arena(), 2 * (size_t)rows * sizeof(float)); /* mean, then rstd */
    return node_run(n);
}

/* y = (x - mean) * rstd * w + b, rstd = 1 / sqrt(var + eps), per row.
 * Two passes (mean, then variance about it) for accuracy. */
void op_layernorm_forward(Node *n) {
    const Tensor *x = n->in[0];
    const float *w = n->in[1]->data, *b = n->in[2]->data;
    int D = x->shape[x->ndim - 1];
    long rows = x->n / D;
    float eps = n->f[0], *mean = n->saved, *rstd = n->saved + rows;
    #pragma omp parallel for if (x->n > PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const float *xr = x->data + r * D;
        float *yr = n->out->data + r * D;
        float m = 0.0f, v = 0.0f;
        for (int i = 0; i < D; i++) m += xr[i];
        m /= (float)D;
        for (int i = 0; i < D; i++) v += (xr[i] - m) * (xr[i] - m);
        float s = 1.0f / sqrtf(v / (float)D + eps);
        for (int i = 0; i < D; i++) yr[i] = (xr[i] - m) * s * w[i] + b[i];
        mean[r] = m;
        rstd[r] = s;
    }
}

/* With xhat = (x - mean) * rstd and g = dy * w:
 *   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dw = sum dy * xhat,  db = sum dy. */
void op_layernorm_backward(Node *n) {
    Tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int D = x->shape[x->ndim - 1];
    long rows = x->n / D;
    const float *dy = n->out->grad, *mean = n->saved, *rstd = n->saved + rows;
    if (x->requires_grad) {
        float *dx = tensor_grad(x);
        #pragma omp parallel for if (x->n > PAR_MIN)
        for (long r = 0; r < rows; r++) {
            const float *xr = x->data + r * D, *dyr = dy + r * D;
            float m = mean[r], s = rstd[r], g_mean = 0.0f, gx_mean = 0.0f;
            for (int i = 0; i < D; i++) {
                float g = dyr[i] * w->data[i];
                g_mean += g;
                gx_mean += g * (xr[i] - m) * s;
            }
            g_mean /= (float)D;
            gx_mean /= (float)D;
            float *dxr = dx + r * D;
            for (int i = 0; i < D; i++) {
                float xhat = (xr[i] - m) * s;
                dxr[i] += s * (dyr[i] * w->data[i] - g_mean - xhat * gx_mean);
            }
        }
    }
    /* dw and db sum over rows in row order, so the result does not depend on
     * the thread count. */
    if (w->requires_grad || b->requires_grad) {
        float *dw = w->requires_grad ? tensor_grad(w) : NULL, *db = b->requires_grad ? tensor_grad(b) : NULL;
        for (long r = 0; r < rows; r++) {
            const float *xr = x->data + r * D, *dyr = dy + r * D;
            float m = mean[r], s = rstd[r];
            if (dw)
                for (int i = 0; i < D; i++) dw[i] += dyr[i] * (xr[i] - m) * s;
            if (db)
                for (int i = 0; i < D; i++) db[i] += dyr[i];
        }
    }
}

Tensor *op_rmsnorm(Tensor *x, Tensor *w, float eps) {
    check_norm("rmsnorm", x, w);
    Node *n = node_with(OP_RMSNORM, 2, x, w, NULL);
    n->f[0] = eps;
    n->out = tensor_new(x->ndim, x->shape);
    n->saved = arena_alloc(engine_arena(), (size_t)(x->n / x->shape[x->ndim - 1]) * sizeof(float)); /* rstd */
    return node_run(n);
}

/* y = x * rstd * w, rstd = 1 / sqrt(mean(x^2) + eps), per row. */
void op_rmsnorm_forward(Node *n) {
    const Tensor *x = n->in[0];
    const float *w = n->in[1]->data;
    int D = x->shape[x->ndim - 1];
    long rows = x->n / D;
    #pragma omp parallel for if (x->n > PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const float *xr = x->data + r * D;
        float ss = 0.0f;
        for (int i = 0; i < D; i++) ss += xr[i] * xr[i];
        float s = 1.0f / sqrtf(ss / (float)D + n->f[0]);
        for (int i = 0; i < D; i++) n->out->data[r * D + i] = xr[i] * s * w[i];
        n->saved[r] = s;
    }
}

/* With xhat = x * rstd and g = dy * w:  dx = rstd * (g - xhat * mean(g * xhat)),  dw = sum dy * xhat. */
void op_rmsnorm_backward(Node *n) {
    Tensor *x = n->in[0], *w = n->in[1];
    int D = x->shape[x->ndim - 1];
    long rows = x->n / D;
    const float *dy = n->out->grad, *rstd = n->saved;
    if (x->requires_grad) {
        float *dx = tensor_grad(x);
        #pragma omp parallel for if (x->n > PAR_MIN)
        for (long r = 0; r < rows; r++) {
            const float *xr = x->data + r * D, *dyr = dy + r * D;
            float s = rstd[r], gx_mean = 0.0f;
            for (int i = 0; i < D; i++) gx_mean += dyr[i] * w->data[i] * xr[i] * s;
            gx_mean /= (float)D;
            for (int i = 0; i < D; i++) dx[r * D + i] += s * (dyr[i] * w->data[i] - xr[i] * s * gx_mean);
        }
    }
    if (w->requires_grad) {
        float *dw = tensor_grad(w);
        for (long r = 0; r < rows; r++)
            for (int i = 0; i < D; i++) dw[i] += dy[r * D + i] * x->data[r * D + i] * rstd[r];
    }
}
