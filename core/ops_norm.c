/* ops_norm.c: layernorm and rmsnorm over the last dimension, and each fused
 * with the residual add before it (op_add_layernorm, op_add_rmsnorm). */
#include <math.h>
#include <string.h>

#include "gemm.h"
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

/* Where a norm's rows go. An fp32 output's rows are written in place; a
 * bf16 output's (the norm's only readers are products: ops.h) are made in
 * this thread's row of tmp, as fp32's are, then rounded into it, so its
 * values are fp32's rounded to nearest even, the ones a product would read. */
typedef struct {
    float *y, *tmp;
    uint16_t *y16;
    int D, threads;
} NormOut;

static NormOut norm_out_begin(Tensor *out) {
    int D = out->shape[out->ndim - 1];
    NormOut o = {.y = out->data, .y16 = out->data16, .D = D};
    if (out->dtype == DTYPE_BF16) {
        o.threads = omp_get_max_threads();
        o.tmp = tensor_scratch((long)o.threads * D);
    }
    return o;
}

static float *norm_out_row(const NormOut *o, long r) {
    return o->y ? o->y + r * o->D : o->tmp + (long)omp_get_thread_num() * o->D;
}

/* Row r, made in `row` (norm_out_row's), is done. */
static void norm_out_row_done(const NormOut *o, long r, const float *row) {
    if (!o->y16) return;
    uint16_t *h = o->y16 + r * o->D;
    #pragma omp simd
    for (int i = 0; i < o->D; i++) h[i] = bf16_from_float(row[i]);
}

static void norm_out_end(NormOut *o) {
    if (o->tmp) tensor_scratch_release(o->tmp, (long)o->threads * o->D);
}

Tensor *op_layernorm(Tensor *x, Tensor *w, Tensor *b, float eps) { return op_layernorm_to(x, w, b, eps, DTYPE_F32); }

Tensor *op_layernorm_to(Tensor *x, Tensor *w, Tensor *b, float eps, DType out) {
    check_norm("layernorm", x, w);
    check_norm("layernorm", x, b);
    Node *n = node_with(OP_LAYERNORM, 3, x, w, b);
    NODE_ATTRS(n, NormAttrs)->eps = eps;
    n->out = tensor_new_of(out, x->ndim, x->shape);
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

/* y = layernorm(x), saved = the rows' means, then their rstd */
static void layernorm_rows(const Tensor *x, const Tensor *w, const Tensor *b, Tensor *y, float eps, float *saved) {
    int D = x->shape[x->ndim - 1];
    long rows = x->n / D;
    NormOut o = norm_out_begin(y);
    #pragma omp parallel for if (x->n > PAR_MIN)
    for (long r = 0; r < rows; r++) {
        float *yr = norm_out_row(&o, r);
        layernorm_row(x->data + r * D, w->data, b->data, yr, D, eps, saved + r, saved + rows + r);
        norm_out_row_done(&o, r, yr);
    }
    norm_out_end(&o);
}

void op_layernorm_forward(Node *n) {
    layernorm_rows(n->in[0], n->in[1], n->in[2], n->out, NODE_ATTRS(n, NormAttrs)->eps, n->saved);
}

/* dx for one row: with xhat = (x - m) s and g = dy w,
 *   dx = base + s (g - mean(g) - xhat mean(g xhat)),
 * base NULL meaning 0; dx may be base (dx +=) or dy (formed in place). */
static void layernorm_dx_row(const float *restrict x, const float *dy, const float *restrict w, const float *base,
                             float *dx, int D, float m, float s) {
    float g_mean = 0.0f, gx_mean = 0.0f;
    #pragma omp simd reduction(+ : g_mean, gx_mean)
    for (int i = 0; i < D; i++) {
        float g = dy[i] * w[i];
        g_mean += g;
        gx_mean += g * (x[i] - m) * s;
    }
    g_mean /= (float)D;
    gx_mean /= (float)D;
    if (base) {
        #pragma omp simd
        for (int i = 0; i < D; i++) dx[i] = base[i] + s * (dy[i] * w[i] - g_mean - (x[i] - m) * s * gx_mean);
    } else {
        #pragma omp simd
        for (int i = 0; i < D; i++) dx[i] = s * (dy[i] * w[i] - g_mean - (x[i] - m) * s * gx_mean);
    }
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

/* dw and db sum over rows in row order, so the result does not depend on the
 * thread count. */
static void layernorm_dwb(Node *n) {
    Tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int D = x->shape[x->ndim - 1];
    long rows = x->n / D;
    if (w->requires_grad || b->requires_grad)
        layernorm_dwb_rows(x->data, n->out->grad, n->saved, n->saved + rows, rows, D,
                           w->requires_grad ? tensor_grad(w) : NULL, b->requires_grad ? tensor_grad(b) : NULL);
}

void op_layernorm_backward(Node *n) {
    Tensor *x = n->in[0], *w = n->in[1];
    int D = x->shape[x->ndim - 1];
    long rows = x->n / D;
    const float *dy = n->out->grad, *mean = n->saved, *rstd = n->saved + rows;
    if (x->requires_grad) {
        float *dx = tensor_grad(x);
        #pragma omp parallel for if (x->n > PAR_MIN)
        for (long r = 0; r < rows; r++)
            layernorm_dx_row(x->data + r * D, dy + r * D, w->data, dx + r * D, dx + r * D, D, mean[r], rstd[r]);
    }
    layernorm_dwb(n);
}

Tensor *op_rmsnorm(Tensor *x, Tensor *w, float eps) { return op_rmsnorm_to(x, w, eps, DTYPE_F32); }

Tensor *op_rmsnorm_to(Tensor *x, Tensor *w, float eps, DType out) {
    check_norm("rmsnorm", x, w);
    Node *n = node_with(OP_RMSNORM, 2, x, w, NULL);
    NODE_ATTRS(n, NormAttrs)->eps = eps;
    n->out = tensor_new_of(out, x->ndim, x->shape);
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

/* y = rmsnorm(x), saved = the rows' rstd */
static void rmsnorm_rows(const Tensor *x, const Tensor *w, Tensor *y, float eps, float *saved) {
    int D = x->shape[x->ndim - 1];
    long rows = x->n / D;
    NormOut o = norm_out_begin(y);
    #pragma omp parallel for if (x->n > PAR_MIN)
    for (long r = 0; r < rows; r++) {
        float *yr = norm_out_row(&o, r);
        rmsnorm_row(x->data + r * D, w->data, yr, D, eps, saved + r);
        norm_out_row_done(&o, r, yr);
    }
    norm_out_end(&o);
}

void op_rmsnorm_forward(Node *n) {
    rmsnorm_rows(n->in[0], n->in[1], n->out, NODE_ATTRS(n, NormAttrs)->eps, n->saved);
}

/* With xhat = x * rstd and g = dy * w:  dx = base + rstd * (g - xhat * mean(g * xhat)),
 * base NULL meaning 0; dx may be base (dx +=) or dy (formed in place). */
static void rmsnorm_dx_row(const float *restrict x, const float *dy, const float *restrict w, const float *base,
                           float *dx, int D, float s) {
    float gx_mean = 0.0f;
    #pragma omp simd reduction(+ : gx_mean)
    for (int i = 0; i < D; i++) gx_mean += dy[i] * w[i] * x[i] * s;
    gx_mean /= (float)D;
    if (base) {
        #pragma omp simd
        for (int i = 0; i < D; i++) dx[i] = base[i] + s * (dy[i] * w[i] - x[i] * s * gx_mean);
    } else {
        #pragma omp simd
        for (int i = 0; i < D; i++) dx[i] = s * (dy[i] * w[i] - x[i] * s * gx_mean);
    }
}

/* dw = sum over rows of dy * xhat, in row order. */
static void rmsnorm_dw(Node *n) {
    Tensor *x = n->in[0], *w = n->in[1];
    if (!w->requires_grad) return;
    int D = x->shape[x->ndim - 1];
    long rows = x->n / D;
    const float *dy = n->out->grad, *rstd = n->saved;
    float *restrict dw = tensor_grad(w);
    for (long r = 0; r < rows; r++) {
        const float *restrict xr = x->data + r * D, *restrict dyr = dy + r * D;
        float s = rstd[r];
        #pragma omp simd
        for (int i = 0; i < D; i++) dw[i] += dyr[i] * xr[i] * s;
    }
}

void op_rmsnorm_backward(Node *n) {
    Tensor *x = n->in[0], *w = n->in[1];
    int D = x->shape[x->ndim - 1];
    long rows = x->n / D;
    const float *dy = n->out->grad, *rstd = n->saved;
    if (x->requires_grad) {
        float *dx = tensor_grad(x);
        #pragma omp parallel for if (x->n > PAR_MIN)
        for (long r = 0; r < rows; r++)
            rmsnorm_dx_row(x->data + r * D, dy + r * D, w->data, dx + r * D, dx + r * D, D, rstd[r]);
    }
    rmsnorm_dw(n);
}

/* ---- the residual add and the norm after it, fused -------------------------
 *
 * In a pre-norm block the residual stream s = x + y (y a sub-block's output)
 * is read by the next residual add and by the next norm, h = norm(s). As
 * op_add then op_layernorm, each is a pass over memory of its own; counting
 * the [rows, D] tensors read or written:
 *   forward   add: x, y in, s out; norm: s in, h out                     5
 *   backward  norm: s, dh, ds in, ds out (ds zeroed first when nothing
 *             else read s), then s, dh again for dw and db; add: dx and
 *             dy zeroed, then ds, dx, dy in, dx, dy out                 13
 * Fused, one pass over the rows adds and normalises each row while it is in
 * cache (x, y in, s, h out: 4). Backward takes dw and db first (s, dh in),
 * then forms each row of ds = (s's gradient from its other readers) + (the
 * norm's dx) in place, in dh and in s's gradient (s, dh, ds in, dh, ds out:
 * 7 in all), and hands the two buffers on to x and y as theirs: in the model
 * nothing has reached x or y yet, so backward takes no new gradient buffer
 * where the composition takes two. The arithmetic of every element is
 * op_add's and the norm's, so the values are theirs.
 *
 * On the tape the op is two nodes, so that each output has a producer of its
 * own: an OP_ADD node for s, then the norm node for h = norm(s). Their own
 * forwards are op_add's and the norm's, for recompute and tape_checkpoint:
 * h is made again from s alone, so x and y need not be kept (the model hands
 * y back once added). The norm node's backward does the add node's too:
 * nothing reads s between the two nodes, so when backward reaches the norm
 * node, s's gradient holds every other reader's share; it adds the norm's,
 * passes the sum to x and y and takes s's gradient away, and the add node,
 * left with no gradient, is skipped. When h gets no gradient, the add node's
 * own backward passes s's on. */

typedef struct {
    float eps;
    Node *sum; /* the add node that makes the norm's input s = x + y */
} AddNormAttrs;
NODE_ATTRS_DECLARE(AddNormAttrs);

/* Where ds goes. Each row of ds is formed in place in `ds`, the norm's output
 * gradient dh (read for the last time there), on `base`, s's gradient so far
 * (NULL: nothing else read s); then stored or added into `to`. x's gradient,
 * when nothing has reached x yet, is the dh buffer itself; y's then is s's
 * gradient (ds stored there too) or, without one, a new buffer. */
typedef struct {
    const float *base;
    float *ds;
    float *to[2];
    bool store[2]; /* to[k] was unset: ds is stored there, not added */
    int n_to;
} SumGrad;

/* Call after the norm's dw and db, which read dh. */
static SumGrad sum_grad_begin(Node *n) {
    Node *sum = NODE_ATTRS(n, AddNormAttrs)->sum;
    Tensor *s = sum->out, *h = n->out;
    SumGrad g = {.base = s->grad, .ds = h->grad};
    for (int k = 0; k < 2; k++) { /* y may be x: by then x's gradient is set */
        Tensor *t = sum->in[k];
        if (!t->requires_grad) continue;
        if (!t->grad && h->grad) { /* dh's buffer, handed on */
            t->grad = h->grad;
            h->grad = NULL;
            continue;
        }
        if (!t->grad && s->grad) { /* s's gradient's, handed on */
            t->grad = s->grad;
            s->grad = NULL;
            g.to[g.n_to] = t->grad;
            g.store[g.n_to++] = true;
            continue;
        }
        bool unset;
        g.to[g.n_to] = tensor_grad_unset(t, &unset);
        g.store[g.n_to++] = unset;
    }
    return g;
}

/* The row at `off` of ds, formed, into the destinations. */
static void sum_grad_row(const SumGrad *g, long off, int D) {
    const float *ds = g->ds + off;
    for (int k = 0; k < g->n_to; k++) {
        float *d = g->to[k] + off; /* may be ds itself (y = x): then ds doubles */
        if (g->store[k]) {
            if (d != ds) memcpy(d, ds, (size_t)D * sizeof(float));
        } else {
            #pragma omp simd
            for (int i = 0; i < D; i++) d[i] += ds[i];
        }
    }
}

/* s's gradient has gone to x and y (when not handed on, it is handed back):
 * the add node is skipped. */
static void sum_grad_end(Node *n) { tensor_grad_release(NODE_ATTRS(n, AddNormAttrs)->sum->out); }

static Node *sum_node(const char *op, Tensor *x, Tensor *y) {
    SHAPE_CHECK(tensor_same_shape(x, y), op, "x and y must have the same shape", x, y);
    Node *sum = node_with(OP_ADD, 2, x, y, NULL);
    sum->out = tensor_new(x->ndim, x->shape);
    return sum;
}

/* s = x + y, one row */
static void add_row(const float *restrict x, const float *restrict y, float *restrict s, int D) {
    #pragma omp simd
    for (int i = 0; i < D; i++) s[i] = x[i] + y[i];
}

/* The forward at the op's call: s = x + y and h = layernorm(s), one row at a
 * time. */
static void add_layernorm_fused(Node *n) {
    const AddNormAttrs *a = NODE_ATTRS((const Node *)n, AddNormAttrs);
    const Tensor *x = a->sum->in[0], *y = a->sum->in[1];
    Tensor *s = n->in[0];
    const float *w = n->in[1]->data, *b = n->in[2]->data;
    int D = s->shape[s->ndim - 1];
    long rows = s->n / D;
    NormOut o = norm_out_begin(n->out);
    #pragma omp parallel for if (s->n > PAR_MIN)
    for (long r = 0; r < rows; r++) {
        float *hr = norm_out_row(&o, r);
        add_row(x->data + r * D, y->data + r * D, s->data + r * D, D);
        layernorm_row(s->data + r * D, w, b, hr, D, a->eps, n->saved + r, n->saved + rows + r);
        norm_out_row_done(&o, r, hr);
    }
    norm_out_end(&o);
}

Tensor *op_add_layernorm(Tensor *x, Tensor *y, Tensor *w, Tensor *b, float eps, Tensor **sum_out) {
    return op_add_layernorm_to(x, y, w, b, eps, sum_out, DTYPE_F32);
}

Tensor *op_add_layernorm_to(Tensor *x, Tensor *y, Tensor *w, Tensor *b, float eps, Tensor **sum_out, DType out) {
    const char *op = op_defs[OP_ADD_LAYERNORM].name;
    check_norm(op, x, w);
    check_norm(op, x, b);
    Node *sum = sum_node(op, x, y);
    Node *n = node_with(OP_ADD_LAYERNORM, 3, sum->out, w, b);
    *NODE_ATTRS(n, AddNormAttrs) = (AddNormAttrs){eps, sum};
    n->out = tensor_new_of(out, x->ndim, x->shape);
    long rows = x->n / x->shape[x->ndim - 1];
    n->saved = arena_alloc(engine_arena(), 2 * (size_t)rows * sizeof(float)); /* mean, then rstd */
    *sum_out = sum->out;
    return node_run_fused(sum, n, add_layernorm_fused);
}

/* The node's own forward, h = layernorm(s): h made again from s. */
void op_add_layernorm_forward(Node *n) {
    layernorm_rows(n->in[0], n->in[1], n->in[2], n->out, NODE_ATTRS(n, AddNormAttrs)->eps, n->saved);
}

/* dw and db; then ds = s's gradient + layernorm's dx, formed in dh, into dx
 * and dy. */
void op_add_layernorm_backward(Node *n) {
    Tensor *s = n->in[0], *w = n->in[1];
    int D = s->shape[s->ndim - 1];
    long rows = s->n / D;
    const float *mean = n->saved, *rstd = n->saved + rows;
    layernorm_dwb(n);
    if (!s->requires_grad) return;
    SumGrad g = sum_grad_begin(n);
    #pragma omp parallel for if (s->n > PAR_MIN)
    for (long r = 0; r < rows; r++) {
        layernorm_dx_row(s->data + r * D, g.ds + r * D, w->data, g.base ? g.base + r * D : NULL, g.ds + r * D, D,
                         mean[r], rstd[r]);
        sum_grad_row(&g, r * D, D);
    }
    sum_grad_end(n);
}

/* The forward at the op's call: s = x + y and h = rmsnorm(s), one row at a
 * time. */
static void add_rmsnorm_fused(Node *n) {
    const AddNormAttrs *a = NODE_ATTRS((const Node *)n, AddNormAttrs);
    const Tensor *x = a->sum->in[0], *y = a->sum->in[1];
    Tensor *s = n->in[0];
    int D = s->shape[s->ndim - 1];
    long rows = s->n / D;
    NormOut o = norm_out_begin(n->out);
    #pragma omp parallel for if (s->n > PAR_MIN)
    for (long r = 0; r < rows; r++) {
        float *hr = norm_out_row(&o, r);
        add_row(x->data + r * D, y->data + r * D, s->data + r * D, D);
        rmsnorm_row(s->data + r * D, n->in[1]->data, hr, D, a->eps, n->saved + r);
        norm_out_row_done(&o, r, hr);
    }
    norm_out_end(&o);
}

Tensor *op_add_rmsnorm(Tensor *x, Tensor *y, Tensor *w, float eps, Tensor **sum_out) {
    return op_add_rmsnorm_to(x, y, w, eps, sum_out, DTYPE_F32);
}

Tensor *op_add_rmsnorm_to(Tensor *x, Tensor *y, Tensor *w, float eps, Tensor **sum_out, DType out) {
    const char *op = op_defs[OP_ADD_RMSNORM].name;
    check_norm(op, x, w);
    Node *sum = sum_node(op, x, y);
    Node *n = node_with(OP_ADD_RMSNORM, 2, sum->out, w, NULL);
    *NODE_ATTRS(n, AddNormAttrs) = (AddNormAttrs){eps, sum};
    n->out = tensor_new_of(out, x->ndim, x->shape);
    n->saved = arena_alloc(engine_arena(), (size_t)(x->n / x->shape[x->ndim - 1]) * sizeof(float)); /* rstd */
    *sum_out = sum->out;
    return node_run_fused(sum, n, add_rmsnorm_fused);
}

/* The node's own forward, h = rmsnorm(s): h made again from s. */
void op_add_rmsnorm_forward(Node *n) {
    rmsnorm_rows(n->in[0], n->in[1], n->out, NODE_ATTRS(n, AddNormAttrs)->eps, n->saved);
}

/* dw; then ds = s's gradient + rmsnorm's dx, formed in dh, into dx and dy. */
void op_add_rmsnorm_backward(Node *n) {
    Tensor *s = n->in[0], *w = n->in[1];
    int D = s->shape[s->ndim - 1];
    long rows = s->n / D;
    const float *rstd = n->saved;
    rmsnorm_dw(n);
    if (!s->requires_grad) return;
    SumGrad g = sum_grad_begin(n);
    #pragma omp parallel for if (s->n > PAR_MIN)
    for (long r = 0; r < rows; r++) {
        rmsnorm_dx_row(s->data + r * D, g.ds + r * D, w->data, g.base ? g.base + r * D : NULL, g.ds + r * D, D,
                       rstd[r]);
        sum_grad_row(&g, r * D, D);
    }
    sum_grad_end(n);
}
