/* ops_softmax.c: row softmax with an additive mask, and cross-entropy from logits. */
#include <math.h>

#include "fastmath.h"
#include "ops_impl.h"
#include "util.h"

Tensor *op_softmax(Tensor *x, Tensor *mask) {
    SHAPE_CHECK(x->ndim >= 1, "softmax", "needs at least 1 dim", x, mask);
    if (mask) {
        SHAPE_CHECK(mask->ndim >= 1 && mask->ndim <= x->ndim, "softmax", "mask must be a suffix of x's shape", x, mask);
        for (int i = 1; i <= mask->ndim; i++)
            SHAPE_CHECK(x->shape[x->ndim - i] == mask->shape[mask->ndim - i], "softmax",
                        "mask must be a suffix of x's shape", x, mask);
    }
    Node *n = node_with(OP_SOFTMAX, mask ? 2 : 1, x, mask, NULL);
    n->out = tensor_new(x->ndim, x->shape);
    return node_run(n);
}

/* The max as a comparison (see logsumexp_row below): it vectorises. */
void softmax_inplace_stats(float *restrict s, int n, float *mx_out, float *inv_out) {
    float mx = -INFINITY;
    #pragma omp simd reduction(max : mx)
    for (int i = 0; i < n; i++) mx = s[i] > mx ? s[i] : mx;
    *mx_out = mx;
    *inv_out = 0.0f;
    if (mx == -INFINITY) { /* every key masked: no distribution, all zeros */
        for (int i = 0; i < n; i++) s[i] = 0.0f;
        return;
    }
    float sum = 0.0f;
    #pragma omp simd reduction(+ : sum)
    for (int i = 0; i < n; i++) {
        s[i] = fm_expf(s[i] - mx);
        sum += s[i];
    }
    float inv = 1.0f / sum;
    *inv_out = inv;
    #pragma omp simd
    for (int i = 0; i < n; i++) s[i] *= inv;
}

void softmax_inplace(float *restrict s, int n) {
    float mx, inv;
    softmax_inplace_stats(s, n, &mx, &inv);
}

/* One row: y = softmax(x + mask), mask may be NULL. */
static void softmax_row(const float *restrict x, const float *restrict mask, float *restrict y, int V) {
    if (mask) {
        #pragma omp simd
        for (int i = 0; i < V; i++) y[i] = x[i] + mask[i];
    } else {
        #pragma omp simd
        for (int i = 0; i < V; i++) y[i] = x[i];
    }
    softmax_inplace(y, V);
}

void op_softmax_forward(Node *n) {
    const Tensor *x = n->in[0], *mask = n->n_in > 1 ? n->in[1] : NULL;
    int V = x->shape[x->ndim - 1];
    long rows = x->n / V, mask_rows = mask ? mask->n / V : 1;
    #pragma omp parallel for if (x->n > PAR_MIN)
    for (long r = 0; r < rows; r++)
        softmax_row(x->data + r * V, mask ? mask->data + (r % mask_rows) * V : NULL, n->out->data + r * V, V);
}

/* dz = y * (dy - sum(dy * y)); dx += dz, and dmask += dz summed over the rows
 * that share each mask row. */
void op_softmax_backward(Node *n) {
    Tensor *x = n->in[0], *mask = n->n_in > 1 ? n->in[1] : NULL;
    int V = x->shape[x->ndim - 1];
    long rows = x->n / V, mask_rows = mask ? mask->n / V : 1;
    const float *y = n->out->data, *dy = n->out->grad;
    float *dx = x->requires_grad ? tensor_grad(x) : NULL;
    float *dm = mask && mask->requires_grad ? tensor_grad(mask) : NULL;
    if (!dx && !dm) return;
    /* The mask's rows are shared across the leading dims, so writes to dm
     * would race; that (rare, learned-bias) case runs on one thread. */
    #pragma omp parallel for if (x->n > PAR_MIN && !dm)
    for (long r = 0; r < rows; r++) {
        const float *yr = y + r * V, *dyr = dy + r * V;
        float dot = 0.0f;
        for (int i = 0; i < V; i++) dot += dyr[i] * yr[i];
        for (int i = 0; i < V; i++) {
            float dz = yr[i] * (dyr[i] - dot);
            if (dx) dx[r * V + i] += dz;
            if (dm) dm[(r % mask_rows) * V + i] += dz;
        }
    }
}

typedef struct {
    int ignore_index;
    int counted; /* rows whose target is not ignore_index: set by forward, for backward */
} CrossEntropyAttrs;
NODE_ATTRS_DECLARE(CrossEntropyAttrs);

Tensor *op_cross_entropy(Tensor *logits, const int *targets, int ignore_index) {
    SHAPE_CHECK(logits->ndim >= 1 && logits->shape[logits->ndim - 1] > 0, "cross_entropy", "needs [..., V]", logits, NULL);
    Node *n = node_with(OP_CROSS_ENTROPY, 1, logits, NULL, NULL);
    n->ids = targets;
    NODE_ATTRS(n, CrossEntropyAttrs)->ignore_index = ignore_index;
    long rows = logits->n / logits->shape[logits->ndim - 1];
    n->saved = arena_alloc(engine_arena(), (size_t)rows * sizeof(float)); /* log-sum-exp per row */
    n->out = tensor_new(0, NULL);
    return node_run(n);
}

/* The max as a comparison, not fmaxf: GCC calls libm's fmaxf per element
 * (its NaN and signed-zero rules) instead of vectorising the loop, which made
 * this pass cost several times the exp pass after it. The max is the same. */
float logsumexp_row(const float *restrict z, int n) {
    float mx = -INFINITY, sum = 0.0f;
    #pragma omp simd reduction(max : mx)
    for (int i = 0; i < n; i++) mx = z[i] > mx ? z[i] : mx;
    #pragma omp simd reduction(+ : sum)
    for (int i = 0; i < n; i++) sum += fm_expf(z[i] - mx);
    return mx + logf(sum);
}

/* loss = mean over counted rows r of (logsumexp(z_r) - z_r[t_r]). Rows run in
 * parallel; the mean is summed in row order, so it does not depend on threads. */
void op_cross_entropy_forward(Node *n) {
    const Tensor *z = n->in[0];
    CrossEntropyAttrs *a = NODE_ATTRS(n, CrossEntropyAttrs);
    int V = z->shape[z->ndim - 1], ignore = a->ignore_index;
    long rows = z->n / V;
    for (long r = 0; r < rows; r++) {
        int t = n->ids[r];
        if (t != ignore && (t < 0 || t >= V)) DIE("cross_entropy: target %d at row %ld is outside [0, %d)", t, r, V);
    }
    #pragma omp parallel for if (z->n > PAR_MIN)
    for (long r = 0; r < rows; r++)
        if (n->ids[r] != ignore) n->saved[r] = logsumexp_row(z->data + r * V, V);
    long count = 0;
    double total = 0.0;
    for (long r = 0; r < rows; r++) {
        int t = n->ids[r];
        if (t == ignore) continue;
        total += n->saved[r] - z->data[r * V + t];
        count++;
    }
    a->counted = (int)count;
    n->out->data[0] = count ? (float)(total / (double)count) : 0.0f;
}

/* dz_r = dloss / count * (softmax(z_r) - onehot(t_r)) on counted rows. */
void op_cross_entropy_backward(Node *n) {
    Tensor *z = n->in[0];
    const CrossEntropyAttrs *a = NODE_ATTRS(n, CrossEntropyAttrs);
    if (!z->requires_grad || a->counted == 0) return;
    int V = z->shape[z->ndim - 1], ignore = a->ignore_index;
    long rows = z->n / V;
    float scale = n->out->grad[0] / (float)a->counted, *dz = tensor_grad(z);
    #pragma omp parallel for if (z->n > PAR_MIN)
    for (long r = 0; r < rows; r++) {
        int t = n->ids[r];
        if (t == ignore) continue;
        const float *restrict zr = z->data + r * V;
        float *restrict dzr = dz + r * V;
        float lse = n->saved[r];
        #pragma omp simd
        for (int i = 0; i < V; i++) dzr[i] += scale * fm_expf(zr[i] - lse);
        dzr[t] -= scale;
    }
}
