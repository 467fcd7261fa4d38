/* ops_softmax.c: row softmax with an additive mask, and cross-entropy from logits. */
#include <math.h>

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

/* y = exp(z - max z) / sum exp(z - max z), z = x + mask, per row. */
void softmax_forward(Node *n) {
    const Tensor *x = n->in[0], *mask = n->n_in > 1 ? n->in[1] : NULL;
    int V = x->shape[x->ndim - 1];
    long rows = x->n / V, mask_rows = mask ? mask->n / V : 1;
    #pragma omp parallel for if (x->n > PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const float *xr = x->data + r * V, *mr = mask ? mask->data + (r % mask_rows) * V : NULL;
        float *yr = n->out->data + r * V;
        float mx = -INFINITY;
        for (int i = 0; i < V; i++) {
            yr[i] = mr ? xr[i] + mr[i] : xr[i];
            mx = fmaxf(mx, yr[i]);
        }
        if (mx == -INFINITY) { /* every key masked: no distribution, all zeros */
            for (int i = 0; i < V; i++) yr[i] = 0.0f;
            continue;
        }
        float sum = 0.0f;
        for (int i = 0; i < V; i++) {
            yr[i] = expf(yr[i] - mx);
            sum += yr[i];
        }
        float inv = 1.0f / sum;
        for (int i = 0; i < V; i++) yr[i] *= inv;
    }
}

/* dz = y * (dy - sum(dy * y)); dx += dz, and dmask += dz summed over the rows
 * that share each mask row. */
void softmax_backward(Node *n) {
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

Tensor *op_cross_entropy(Tensor *logits, const int *targets, int ignore_index) {
    SHAPE_CHECK(logits->ndim >= 1 && logits->shape[logits->ndim - 1] > 0, "cross_entropy", "needs [..., V]", logits, NULL);
    Node *n = node_with(OP_CROSS_ENTROPY, 1, logits, NULL, NULL);
    n->ids = targets;
    n->i[0] = ignore_index;
    long rows = logits->n / logits->shape[logits->ndim - 1];
    n->saved = arena_alloc(engine_arena(), (size_t)rows * sizeof(float)); /* log-sum-exp per row */
    n->out = tensor_new(0, NULL);
    return node_run(n);
}

/* loss = mean over counted rows r of (logsumexp(z_r) - z_r[t_r]). */
void cross_entropy_forward(Node *n) {
    const Tensor *z = n->in[0];
    int V = z->shape[z->ndim - 1];
    long rows = z->n / V, count = 0;
    double total = 0.0;
    for (long r = 0; r < rows; r++) {
        int t = n->ids[r];
        if (t == n->i[0]) continue;
        if (t < 0 || t >= V) DIE("cross_entropy: target %d at row %ld is outside [0, %d)", t, r, V);
        const float *zr = z->data + r * V;
        float mx = -INFINITY, sum = 0.0f;
        for (int i = 0; i < V; i++) mx = fmaxf(mx, zr[i]);
        for (int i = 0; i < V; i++) sum += expf(zr[i] - mx);
        float lse = mx + logf(sum);
        n->saved[r] = lse;
        total += lse - zr[t];
        count++;
    }
    n->i[1] = (int)count;
    n->out->data[0] = count ? (float)(total / (double)count) : 0.0f;
}

/* dz_r = dloss / count * (softmax(z_r) - onehot(t_r)) on counted rows. */
void cross_entropy_backward(Node *n) {
    Tensor *z = n->in[0];
    if (!z->requires_grad || n->i[1] == 0) return;
    int V = z->shape[z->ndim - 1];
    long rows = z->n / V;
    float scale = n->out->grad[0] / (float)n->i[1], *dz = tensor_grad(z);
    #pragma omp parallel for if (z->n > PAR_MIN)
    for (long r = 0; r < rows; r++) {
        int t = n->ids[r];
        if (t == n->i[0]) continue;
        const float *zr = z->data + r * V;
        float *dzr = dz + r * V;
        for (int i = 0; i < V; i++) dzr[i] += scale * expf(zr[i] - n->saved[r]);
        dzr[t] -= scale;
    }
}
