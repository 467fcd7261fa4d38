/* mlp.c: the MLP block as one fused op, y = gelu(x W1^T + b1) W2^T + b2.
 *
 * Composed of op_linear, op_gelu and op_linear, a step would keep both the
 * hidden pre-activation h and g = gelu(h) until backward, two [tokens,
 * hidden] tensors per layer (hidden = 4 d: the largest activations of the
 * model). The fused op keeps h alone: forward makes g in a scratch buffer
 * that it hands back after the second product, and backward makes it again
 * from h for dW2. The same scratch buffer then holds dg = dy W2 and, in
 * place, dh = dg gelu'(h). Every product is one gemm call with transposes
 * as flags, as op_linear does them, so the results are op_linear's (when
 * the rows take one pass: see mlp_scratch_floats).
 *
 * In bf16 (on gemm's own kernel) the products' epilogues do the passes
 * between them (gemm_ex, gemm.h): the first product's tile takes b1, is
 * rounded to bf16 as the kept h (half fp32's memory), and GELU of that
 * rounded value is written in bf16 as g, which the second product reads
 * as it is; backward rounds dy once for its two products, makes g again
 * from h in bf16 for dW2, and the product dg = dy W2 takes gelu'(h) and
 * writes dh in bf16 (both of dh's products read it as it is) while summing
 * its columns into b1's gradient. Every
 * value a product reads is the bf16 one it would have rounded anyway; what
 * bf16 adds is GELU and its gradient read at h rounded to bf16, as
 * PyTorch's autocast has them (tests/test_mlp.c holds the op to that rule
 * bit for bit). */
#include "fastmath.h"
#include "gemm.h"

#include "layers.h"
#include "op_kernel.h"
#include "ops.h"

/* Rows per pass over the hidden layer: the [rows, hidden] scratch that
 * forward's gelu(h) and backward's dh use stays under mlp_scratch_floats
 * (4 Mi floats, 16 MiB), so a long context's step (65536 tokens at T 4096,
 * batch 16) does not hold a second [tokens, hidden] tensor beside h. The
 * reference configuration's step (4096 x 1024) is one pass. dW1, dW2 and the
 * biases' gradients add the passes' products in row order, so the result
 * does not depend on the thread count. */
long mlp_scratch_floats = 1L << 22;
bool mlp_keep_h32;

static long pass_rows(long M, long hid) {
    long r = mlp_scratch_floats / hid;
    return r < 1 ? 1 : r < M ? r : M;
}

/* Whether the node keeps h in bf16 (set when it is made, so that a
 * recomputed forward and the backward agree whatever the precision is
 * later). */
typedef struct {
    bool h16;
} MlpAttrs;
NODE_ATTRS_DECLARE(MlpAttrs);

/* x's values from element off on, as gemm_ex reads them (x may be stored
 * in bf16: the op reads it through products alone). */
static const void *rows_of(const Tensor *x, long off) {
    return tensor_is16(x) ? (const void *)(x->data16 + off) : (const void *)(x->data + off);
}

/* Floats of arena memory that hold n bf16 values. */
static long halves(long n) { return (n + 1) / 2; }

static void mlp_forward16(Node *n) {
    const Tensor *x = n->in[0], *w1 = n->in[1], *b1 = n->in[2], *w2 = n->in[3], *b2 = n->in[4];
    long d = w1->shape[1], hid = w1->shape[0], M = x->n / d, R = pass_rows(M, hid);
    uint16_t *h = (uint16_t *)n->saved, *g = (uint16_t *)tensor_scratch(halves(R * hid));
    for (long r0 = 0; r0 < M; r0 += R) {
        long m = R < M - r0 ? R : M - r0;
        GemmEpilogue e1 = {.bias = b1->data, .gelu = true, .pre16 = h + r0 * hid, .ld_pre = hid, .out16 = g,
                           .ld_out = hid};
        gemm_ex(false, true, m, hid, d, 1.0f, rows_of(x, r0 * d), tensor_is16(x), d, w1->data, false, d, 0.0f, NULL,
                hid, &e1);
        GemmEpilogue e2 = {.bias = b2->data};
        gemm_ex(false, true, m, d, hid, 1.0f, g, true, hid, w2->data, false, hid, 0.0f, n->out->data + r0 * d, d,
                &e2);
    }
    tensor_scratch_release((float *)g, halves(R * hid));
}

/* g = gelu(h) in bf16, from h in bf16 (n values), threaded as the ops are. */
static void gelu16(const uint16_t *h, uint16_t *g, long n) {
    #pragma omp parallel for simd schedule(static) if (n > PAR_MIN)
    for (long i = 0; i < n; i++) g[i] = bf16_from_float(fm_gelu(bf16_to_float(h[i])));
}

static void mlp_backward16(Node *n) {
    Tensor *x = n->in[0], *w1 = n->in[1], *b1 = n->in[2], *w2 = n->in[3], *b2 = n->in[4];
    long d = w1->shape[1], hid = w1->shape[0], M = x->n / d, R = pass_rows(M, hid);
    const float *dy_all = n->out->grad;
    const uint16_t *h_all = (const uint16_t *)n->saved;
    uint16_t *buf = (uint16_t *)tensor_scratch(halves(R * hid));
    /* each pass's dy rounded to bf16 once for its two products (dW2 and
     * dy W2): the values each would round as it packs, so the same bits */
    uint16_t *dy = (uint16_t *)tensor_scratch(halves(R * d));
    if (b2->requires_grad) bias_grad_rows(b2, dy_all, M);
    for (long r0 = 0; r0 < M; r0 += R) {
        long m = R < M - r0 ? R : M - r0;
        bf16_from_floats(dy, dy_all + r0 * d, m * d);
        const uint16_t *h = h_all + r0 * hid;
        if (w2->requires_grad) {
            gelu16(h, buf, m * hid); /* g again */
            gemm_ex(true, false, d, hid, m, 1.0f, dy, true, d, buf, true, hid, 1.0f, tensor_grad(w2), hid, NULL);
        }
        /* dh = (dy W2) gelu'(h) in bf16, its column sums into b1's gradient */
        GemmEpilogue e = {.slope16 = h, .ld_slope = hid, .colsum = b1->requires_grad ? tensor_grad(b1) : NULL,
                          .out16 = buf, .ld_out = hid};
        gemm_ex(false, false, m, hid, d, 1.0f, dy, true, d, w2->data, false, hid, 0.0f, NULL, hid, &e);
        if (x->requires_grad)
            gemm_ex(false, false, m, d, hid, 1.0f, buf, true, hid, w1->data, false, d, 1.0f, tensor_grad(x) + r0 * d,
                    d, NULL);
        if (w1->requires_grad)
            gemm_ex(true, false, hid, d, m, 1.0f, buf, true, hid, rows_of(x, r0 * d), tensor_is16(x), d, 1.0f,
                    tensor_grad(w1), d, NULL);
    }
    tensor_scratch_release((float *)dy, halves(R * d));
    tensor_scratch_release((float *)buf, halves(R * hid));
}

static void mlp_forward_op(Node *n) {
    if (NODE_ATTRS(n, MlpAttrs)->h16) {
        mlp_forward16(n);
        return;
    }
    const Tensor *x = n->in[0], *w1 = n->in[1], *b1 = n->in[2], *w2 = n->in[3], *b2 = n->in[4];
    long d = w1->shape[1], hid = w1->shape[0], M = x->n / d, R = pass_rows(M, hid);
    float *h = n->saved, *g = tensor_scratch(R * hid);
    linear_rows(h, tensor_values(x), tensor_is16(x), w1, b1, M);
    for (long r0 = 0; r0 < M; r0 += R) {
        long m = R < M - r0 ? R : M - r0;
        gelu_rows(h + r0 * hid, g, m * hid);
        linear_rows(n->out->data + r0 * d, g, false, w2, b2, m);
    }
    tensor_scratch_release(g, R * hid);
}

static void mlp_backward_op(Node *n) {
    if (NODE_ATTRS(n, MlpAttrs)->h16) {
        mlp_backward16(n);
        return;
    }
    Tensor *x = n->in[0], *w1 = n->in[1], *b1 = n->in[2], *w2 = n->in[3], *b2 = n->in[4];
    long d = w1->shape[1], hid = w1->shape[0], M = x->n / d, R = pass_rows(M, hid);
    const float *dy_all = n->out->grad, *h_all = n->saved;
    float *buf = tensor_scratch(R * hid);
    if (b2->requires_grad) bias_grad_rows(b2, dy_all, M);
    for (long r0 = 0; r0 < M; r0 += R) {
        long m = R < M - r0 ? R : M - r0;
        const float *dy = dy_all + r0 * d, *h = h_all + r0 * hid;
        if (w2->requires_grad) {
            gelu_rows(h, buf, m * hid); /* g again */
            gemm(true, false, d, hid, m, 1.0f, dy, d, buf, hid, 1.0f,
                        tensor_grad(w2), hid);
        }
        /* dg = dy W2, then dh = dg gelu'(h) in place */
        gemm(false, false, m, hid, d, 1.0f, dy, d, w2->data, hid, 0.0f, buf, hid);
        gelu_grad_rows(h, buf, buf, m * hid);
        if (x->requires_grad)
            gemm(false, false, m, d, hid, 1.0f, buf, hid, w1->data, d, 1.0f,
                        tensor_grad(x) + r0 * d, d);
        if (w1->requires_grad && tensor_is16(x))
            gemm_ex(true, false, hid, d, m, 1.0f, buf, false, hid, rows_of(x, r0 * d), true, d, 1.0f, tensor_grad(w1),
                    d, NULL);
        else if (w1->requires_grad)
            gemm(true, false, hid, d, m, 1.0f, buf, hid, x->data + r0 * d, d, 1.0f, tensor_grad(w1), d);
        if (b1->requires_grad) bias_grad_rows(b1, buf, m);
    }
    tensor_scratch_release(buf, R * hid);
}

/* x (in[0]) may be stored in bf16: only products read it, forward and backward. */
OpDef mlp_op = {"mlp", mlp_forward_op, mlp_backward_op, .in16 = 1u << 0};

Tensor *op_mlp(Tensor *x, Tensor *w1, Tensor *b1, Tensor *w2, Tensor *b2) {
    const char *name = mlp_op.name;
    SHAPE_CHECK(w1->ndim == 2 && w2->ndim == 2, name, "weights must be 2-D", w1, w2);
    long hid = w1->shape[0], d = w1->shape[1];
    SHAPE_CHECK(x->ndim >= 1 && x->shape[x->ndim - 1] == d, name, "x's last dim must be W1's in", x, w1);
    SHAPE_CHECK(w2->shape[0] == d && w2->shape[1] == hid, name, "W2 must be [in, hidden] of W1 [hidden, in]", w1, w2);
    SHAPE_CHECK(b1->ndim == 1 && b1->n == hid && b2->ndim == 1 && b2->n == d, name, "biases must be [hidden], [in]", b1,
                b2);
    Node *n = node_new(&mlp_op);
    n->n_in = 5;
    n->in[0] = x, n->in[1] = w1, n->in[2] = b1, n->in[3] = w2, n->in[4] = b2;
    /* h in bf16 when the products are bf16 (on any route: gemm_ex gives the same bits) */
    bool h16 = gemm_precision() == PRECISION_BF16 && !mlp_keep_h32;
    NODE_ATTRS(n, MlpAttrs)->h16 = h16;
    n->saved_n = h16 ? halves((x->n / d) * hid) : (x->n / d) * hid;
    n->saved = tensor_scratch(n->saved_n);
    n->out = tensor_new(x->ndim, x->shape);
    return node_run(n);
}
