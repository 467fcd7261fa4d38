/* softmax_parts.c: the pieces the plain softmax op (softmax.c) and
 * Talking-Heads attention (talking.c) share. */
#include "gemm.h"

#include "fastmath.h"
#include "op_kernel.h"
#include "softmax_parts.h"

/* Softmax of row i of S in place, over keys [0, n); keys [n, T) get 0. */
void attn_softmax_prefix(float *s, int n, int T) {
    softmax_inplace(s, n);
    for (int j = n; j < T; j++) s[j] = 0.0f;
}

/* P for one head: [T, T] from q, k [T, dk]. */
void attn_head_probs(const float *q, const float *k, float *P, int T, int dk, float scale, bool causal) {
    gemm(false, true, T, T, dk, scale, q, dk, k, dk, 0.0f, P, T);
    for (int i = 0; i < T; i++) attn_softmax_prefix(P + (long)i * T, causal ? i + 1 : T, T);
}

/* The softmax's backward on `rows` rows of length T, in place:
 * d = P * (d - rowsum(d * P)) turns dP into dS. */
void attn_softmax_rows_backward(const float *P, float *dP, long rows, int T) {
    for (long i = 0; i < rows; i++) {
        const float *restrict p = P + i * T;
        float *restrict d = dP + i * T;
        float dot = 0.0f;
        #pragma omp simd reduction(+ : dot)
        for (int j = 0; j < T; j++) dot += p[j] * d[j];
        #pragma omp simd
        for (int j = 0; j < T; j++) d[j] = p[j] * (d[j] - dot);
    }
}

void attn_check_qkv(const char *name, const Tensor *q, const Tensor *k, const Tensor *v) {
    SHAPE_CHECK(q->ndim == 4 && k->ndim == 4 && v->ndim == 4, name, "q, k, v must be [B, H, T, d]", q, v);
    SHAPE_CHECK(tensor_same_shape(q, k), name, "q and k differ", q, k);
    for (int i = 0; i < 3; i++) SHAPE_CHECK(q->shape[i] == v->shape[i], name, "q and v differ in B, H or T", q, v);
}
