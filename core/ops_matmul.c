/* ops_matmul.c: C = op(A) op(B) through gemm (core/gemm.h), transposes as flags;
 * and the linear layer y = x W^T + b. */
#include <cblas.h>
#include <string.h>

#include "gemm.h"
#include "ops_impl.h"

/* Whether A and B enter transposed. */
typedef struct {
    bool ta, tb;
} MatmulAttrs;
NODE_ATTRS_DECLARE(MatmulAttrs);

/* Sizes of one product: op(A) is M x K, op(B) is K x N; `batch` products. */
typedef struct {
    int ta, tb;
    long batch, M, K, N;
    long lda, ldb;           /* leading dims of A and B as stored */
    long stride_a, stride_b; /* elements between batch elements (0: shared) */
} MatmulDims;

static MatmulDims matmul_dims(const Node *n) {
    const Tensor *a = n->in[0], *b = n->in[1];
    const MatmulAttrs *at = NODE_ATTRS(n, MatmulAttrs);
    MatmulDims d = {.ta = at->ta, .tb = at->tb, .batch = 1};
    int ar = a->shape[a->ndim - 2], ac = a->shape[a->ndim - 1]; /* A's last two dims as stored */
    int br = b->shape[b->ndim - 2], bc = b->shape[b->ndim - 1];
    if (b->ndim == 2 && !d.ta) {
        /* every row of A (of any rank) times op(B): one product, M = all rows */
        d.K = ac;
        d.M = a->n / (ac ? ac : 1);
    } else {
        d.M = d.ta ? ac : ar;
        d.K = d.ta ? ar : ac;
        for (int i = 0; i < a->ndim - 2; i++) d.batch *= a->shape[i];
    }
    d.N = d.tb ? br : bc;
    d.lda = d.ta ? d.M : d.K;
    d.ldb = d.tb ? d.K : d.N;
    d.stride_a = d.M * d.K;
    d.stride_b = b->ndim == 2 ? 0 : d.K * d.N;
    return d;
}

Tensor *op_matmul(Tensor *a, Tensor *b, bool ta, bool tb) {
    const char *name = "matmul";
    SHAPE_CHECK(a->ndim >= 2, name, "A needs at least 2 dims", a, b);
    SHAPE_CHECK(b->ndim >= 2, name, "B needs at least 2 dims", a, b);
    int bk = tb ? b->shape[b->ndim - 1] : b->shape[b->ndim - 2];
    int out_shape[TENSOR_MAX_DIMS], out_ndim = a->ndim;
    for (int i = 0; i < a->ndim; i++) out_shape[i] = a->shape[i];
    if (b->ndim == 2 && !ta) {
        SHAPE_CHECK(a->shape[a->ndim - 1] == bk, name, "inner dimensions differ", a, b);
    } else if (b->ndim == 2) {
        SHAPE_CHECK(a->ndim == 2, name, "A transposed against a 2-D B must be 2-D", a, b);
        SHAPE_CHECK(a->shape[0] == bk, name, "inner dimensions differ", a, b);
        out_shape[0] = a->shape[1];
    } else {
        SHAPE_CHECK(a->ndim == b->ndim, name, "batched operands need the same rank", a, b);
        for (int i = 0; i < a->ndim - 2; i++)
            SHAPE_CHECK(a->shape[i] == b->shape[i], name, "batch dimensions differ", a, b);
        int ak = ta ? a->shape[a->ndim - 2] : a->shape[a->ndim - 1];
        SHAPE_CHECK(ak == bk, name, "inner dimensions differ", a, b);
        out_shape[a->ndim - 2] = ta ? a->shape[a->ndim - 1] : a->shape[a->ndim - 2];
    }
    out_shape[out_ndim - 1] = tb ? b->shape[b->ndim - 2] : b->shape[b->ndim - 1];

    Node *n = node_with(OP_MATMUL, 2, a, b, NULL);
    *NODE_ATTRS(n, MatmulAttrs) = (MatmulAttrs){.ta = ta, .tb = tb};
    n->out = tensor_new(out_ndim, out_shape);
    return node_run(n);
}

/* One product per batch element. Batches go to OpenMP threads; inside a
 * parallel region OpenBLAS (the OpenMP build) runs each sgemm on one thread,
 * so there is one pool. A single product is threaded by OpenBLAS itself. */
void op_matmul_forward(Node *n) {
    MatmulDims d = matmul_dims(n);
    const float *A = n->in[0]->data, *B = n->in[1]->data;
    float *C = n->out->data;
    #pragma omp parallel for if (d.batch > 1)
    for (long t = 0; t < d.batch; t++) {
        gemm(d.ta, d.tb, d.M, d.N, d.K, 1.0f, A + t * d.stride_a, d.lda,
                    B + t * d.stride_b, d.ldb, 0.0f, C + t * d.M * d.N, d.N);
    }
}

void op_matmul_backward(Node *n) {
    MatmulDims d = matmul_dims(n);
    Tensor *a = n->in[0], *b = n->in[1];
    const float *dC = n->out->grad;
    if (a->requires_grad) {
        float *dA = tensor_grad(a);
        const float *B = b->data;
        #pragma omp parallel for if (d.batch > 1)
        for (long t = 0; t < d.batch; t++) {
            const float *Bt = B + t * d.stride_b, *dCt = dC + t * d.M * d.N;
            float *dAt = dA + t * d.stride_a;
            if (!d.ta) /* dA (M x K) += dC op(B)^T */
                gemm(false, !d.tb, d.M, d.K, d.N, 1.0f, dCt, d.N, Bt,
                            d.ldb, 1.0f, dAt, d.K);
            else /* A is stored K x M: dA += op(B) dC^T */
                gemm(d.tb, true, d.K, d.M, d.N, 1.0f, Bt, d.ldb, dCt, d.N,
                            1.0f, dAt, d.M);
        }
    }
    if (b->requires_grad) {
        float *dB = tensor_grad(b);
        const float *A = a->data;
        /* A 2-D B is shared by every row of A; then batch is 1 and stride_b 0. */
        #pragma omp parallel for if (d.batch > 1)
        for (long t = 0; t < d.batch; t++) {
            const float *At = A + t * d.stride_a, *dCt = dC + t * d.M * d.N;
            float *dBt = dB + t * d.stride_b;
            if (!d.tb) /* dB (K x N) += op(A)^T dC */
                gemm(!d.ta, false, d.K, d.N, d.M, 1.0f, At, d.lda, dCt,
                            d.N, 1.0f, dBt, d.N);
            else /* B is stored N x K: dB += dC^T op(A) */
                gemm(true, d.ta, d.N, d.K, d.M, 1.0f, dCt, d.N, At,
                            d.lda, 1.0f, dBt, d.K);
        }
    }
}

Tensor *op_linear(Tensor *x, Tensor *w, Tensor *b) {
    const char *name = "linear";
    SHAPE_CHECK(x->ndim >= 1 && w->ndim == 2, name, "wants x [..., in] and W [out, in]", x, w);
    SHAPE_CHECK(x->shape[x->ndim - 1] == w->shape[1], name, "x's last dim differs from W's in", x, w);
    if (b) SHAPE_CHECK(b->ndim == 1 && b->shape[0] == w->shape[0], name, "bias must be [out]", w, b);
    int shape[TENSOR_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = w->shape[0];
    Node *n = node_with(OP_LINEAR, b ? 3 : 2, x, w, b);
    n->out = tensor_new(x->ndim, shape);
    return node_run(n);
}

/* y = x W^T + b: rows of y start as b, then sgemm adds x W^T (beta = 1). In
 * bf16 the bias is the product's epilogue instead (gemm_ex: the same bits,
 * without the pass that copies it). */
void linear_rows(float *y, const void *x, bool x16, const Tensor *w, const Tensor *b, long M) {
    long N = w->shape[0], K = w->shape[1];
    if (x16 || (b && gemm_precision() == PRECISION_BF16)) {
        gemm_ex(false, true, M, N, K, 1.0f, x, x16, K, w->data, false, K, 0.0f, y, N,
                b ? &(GemmEpilogue){.bias = b->data} : NULL);
        return;
    }
    if (b) {
        #pragma omp parallel for if (M * N > PAR_MIN)
        for (long r = 0; r < M; r++) memcpy(y + r * N, b->data, (size_t)N * sizeof(float));
    }
    gemm(false, true, M, N, K, 1.0f, x, K, w->data, K, b ? 1.0f : 0.0f, y, N);
}

void bias_grad_rows(Tensor *b, const float *dy, long M) {
    long N = b->n;
    float *ones = tensor_scratch(M);
    for (long r = 0; r < M; r++) ones[r] = 1.0f;
    cblas_sgemv(CblasRowMajor, CblasTrans, M, N, 1.0f, dy, N, ones, 1, 1.0f, tensor_grad(b), 1);
    tensor_scratch_release(ones, M);
}

void op_linear_forward(Node *n) {
    const Tensor *x = n->in[0], *w = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
    linear_rows(n->out->data, tensor_values(x), tensor_is16(x), w, b, x->n / w->shape[1]);
}

/* dx += dy W,  dW += dy^T x,  db += dy^T 1 (column sums). In bf16 both
 * products read dy rounded to bf16: it is rounded once, into scratch, and
 * both read that (the value each product's own packing would have made, so
 * the same bits, one rounding pass fewer); db sums the fp32 dy. */
void op_linear_backward(Node *n) {
    Tensor *x = n->in[0], *w = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
    long N = w->shape[0], K = w->shape[1], M = x->n / K, halves = (M * N + 1) / 2;
    const float *dy = n->out->grad;
    uint16_t *dy16 = NULL;
    if (gemm_precision() == PRECISION_BF16 && x->requires_grad && w->requires_grad) {
        dy16 = (uint16_t *)tensor_scratch(halves);
        bf16_from_floats(dy16, dy, M * N);
    }
    const void *a = dy16 ? (const void *)dy16 : (const void *)dy;
    if (x->requires_grad)
        gemm_ex(false, false, M, K, N, 1.0f, a, dy16 != NULL, N, w->data, false, K, 1.0f, tensor_grad(x), K, NULL);
    if (w->requires_grad)
        gemm_ex(true, false, N, K, M, 1.0f, a, dy16 != NULL, N, tensor_values(x), tensor_is16(x), K, 1.0f,
                tensor_grad(w), K, NULL);
    if (dy16) tensor_scratch_release((float *)dy16, halves);
    if (b && b->requires_grad) bias_grad_rows(b, dy, M);
}
