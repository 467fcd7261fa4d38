/* softmax_parts.c: the pieces the attention ops share (softmax_parts.h). */
#include "gemm.h"

#include <math.h>
#include <string.h>

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

void attn_row_keys(int i, int T, bool causal, int window, bool bca, int context, int *lo, int *hi) {
    int blen = context / 2 > 1 ? context / 2 : 1;
    *lo = 0, *hi = causal ? i : T - 1;
    if (window > 0) *lo = i - window + 1 > 0 ? i - window + 1 : 0;
    if (window > 0 && !causal) *hi = i + window - 1 < T - 1 ? i + window - 1 : T - 1;
    if (causal && bca) *lo = (i / blen - 1) * blen > 0 ? (i / blen - 1) * blen : 0;
}

AttnPlan attn_plan(int T, int qb, bool causal, int window, bool bca, int context, bool logn) {
    Arena *ar = engine_arena();
    AttnPlan p = {.T = T, .n = (T + qb - 1) / qb, .qb = qb};
    p.lo = arena_alloc(ar, (size_t)T * sizeof(int));
    p.hi = arena_alloc(ar, (size_t)T * sizeof(int));
    p.lambda = arena_alloc(ar, (size_t)T * sizeof(float));
    p.b = arena_alloc(ar, (size_t)p.n * sizeof(AttnBlock));
    double log_ctx = context > 1 ? log((double)context) : 0.0;
    for (int i = 0; i < T; i++) {
        attn_row_keys(i, T, causal, window, bca, context, &p.lo[i], &p.hi[i]);
        double l = logn && log_ctx > 0.0 ? log((double)(p.hi[i] - p.lo[i] + 1)) / log_ctx : 1.0;
        p.lambda[i] = l > 1.0 ? (float)l : 1.0f;
    }
    for (int k = 0; k < p.n; k++) {
        AttnBlock *b = &p.b[k];
        b->r0 = k * qb;
        b->r1 = b->r0 + qb < T ? b->r0 + qb : T;
        b->k0 = p.lo[b->r0];
        b->w = p.hi[b->r1 - 1] - b->k0 + 1;
        if (b->w > p.max_w) p.max_w = b->w;
    }
    return p;
}

float *attn_block_scratch(const AttnPlan *p, int k) {
    return arena_alloc(engine_arena(), (size_t)omp_get_max_threads() * k * p->qb * p->max_w * sizeof(float));
}

float *attn_thread_block(float *scratch, const AttnPlan *p, int k, int j) {
    return scratch + ((long)omp_get_thread_num() * k + j) * p->qb * p->max_w;
}

void attn_block_scores(const AttnPlan *p, const AttnBlock *b, const float *q, const float *k, int dk, float scale,
                       const float *bias, bool causal, float *S) {
    int R = b->r1 - b->r0, w = b->w;
    gemm(false, true, R, w, dk, scale, q + (long)b->r0 * dk, dk, k + (long)b->k0 * dk, dk, 0.0f, S, w);
    for (int r = 0; r < R; r++) {
        int i = b->r0 + r, lo = p->lo[i] - b->k0, e = p->hi[i] - b->k0 + 1; /* the row's keys [lo, e) */
        float *s = S + (long)r * w, l = p->lambda[i];
        if (l != 1.0f)
            for (int c = lo; c < e; c++) s[c] *= l;
        if (bias)
            for (int c = lo; c < e; c++) {
                int d = i - (b->k0 + c);
                s[c] += bias[causal ? d : d < 0 ? -d : d];
            }
    }
}

void attn_block_store(float *P, const AttnBlock *b, const float *Pb, int T) {
    for (int r = 0; r < b->r1 - b->r0; r++)
        memcpy(P + (long)(b->r0 + r) * T + b->k0, Pb + (long)r * b->w, (size_t)b->w * sizeof(float));
}

double attn_masked_flops(const ModelConfig *m, int T) {
    bool causal = m->objective == OBJECTIVE_CLM;
    double keys = 0;
    for (int i = 0; i < T; i++) {
        int lo, hi;
        attn_row_keys(i, T, causal, m->window, causal && m->bca == ON, m->context, &lo, &hi);
        keys += hi - lo + 1;
    }
    return 2.0 * m->heads * keys * (4.0 * model_key_size(m) + 3.0 * model_head_size(m));
}

AttnGrad attn_grad_of(Node *n, float scale) {
    Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    return (AttnGrad){
        .q = q,
        .k = k,
        .v = v,
        .dO = n->out->grad,
        .dq = q->requires_grad ? tensor_grad(q) : NULL,
        .dk = k->requires_grad ? tensor_grad(k) : NULL,
        .dv = v->requires_grad ? tensor_grad(v) : NULL,
        .scale = scale,
    };
}

/* Where row r of head bh starts in a [B, H, rows, cols] buffer. */
static long at(long bh, int rows, int r, int cols) { return (bh * rows + r) * cols; }

/* C = alpha op(A) op(B) + beta C with B = t's values from element off on, t
 * stored in fp32 or in bf16 (tensor.h; an op that reads q, k or v only
 * here and in products may take them in bf16). */
static void gemm_by(bool ta, bool tb, int M, int N, int K, float alpha, const float *A, int lda, const Tensor *t,
                    long off, int ldb, float beta, float *C, int ldc) {
    if (tensor_is16(t))
        gemm_ex(ta, tb, M, N, K, alpha, A, false, lda, t->data16 + off, true, ldb, beta, C, ldc, NULL);
    else
        gemm(ta, tb, M, N, K, alpha, A, lda, t->data + off, ldb, beta, C, ldc);
}

bool attn_grad_pv(const AttnGrad *g, long bh, int r0, int R, int k0, int w, const float *P, float *D, bool need) {
    int T = g->q->shape[2], n = g->k->shape[2], dv = g->v->shape[3];
    const float *dO = g->dO + at(bh, T, r0, dv);
    if (g->dv) /* dV[keys] += P^T dO[rows] */
        gemm(true, false, w, dv, R, 1.0f, P, w, dO, dv, 1.0f, g->dv + at(bh, n, k0, dv), dv);
    if (!g->dq && !g->dk && !need) return false;
    gemm_by(false, true, R, w, dv, 1.0f, dO, dv, g->v, at(bh, n, k0, dv), dv, 0.0f, D, w); /* dP = dO[rows] V[keys]^T */
    return true;
}

void attn_grad_qk(const AttnGrad *g, long bh, int r0, int R, int k0, int w, const float *D) {
    int T = g->q->shape[2], n = g->k->shape[2], dk = g->q->shape[3];
    if (g->dq) /* dQ[rows] += s dz K[keys] */
        gemm_by(false, false, R, dk, w, g->scale, D, w, g->k, at(bh, n, k0, dk), dk, 1.0f, g->dq + at(bh, T, r0, dk),
                dk);
    if (g->dk) /* dK[keys] += s dz^T Q[rows] */
        gemm_by(true, false, w, dk, R, g->scale, D, w, g->q, at(bh, T, r0, dk), dk, 1.0f, g->dk + at(bh, n, k0, dk),
                dk);
}
