/* softmax.c: scaled dot-product attention (Vaswani et al. 2017) as one fused
 * op with a hand-written backward.
 *
 * Per batch element and head, with s = 1 / sqrt(key_size):
 *   S = s Q K^T,  P = softmax(S + mask),  O = P V
 * where the causal mask removes keys j > i. Forward keeps P (T x T per head)
 * for backward:
 *   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dP * P)),
 *   dQ = s dS K,  dK = s dS^T Q.
 * Heads run in parallel on OpenMP threads; inside a parallel region OpenBLAS
 * runs each sgemm on its calling thread, so there is one pool. */
#include <cblas.h>
#include <math.h>

#include "attention.h"
#include "fastmath.h"
#include "kernel.h"

/* Softmax of row i of S in place, over keys [0, n); keys [n, T) get 0. */
static void softmax_prefix(float *restrict s, int n, int T) {
    float mx = -INFINITY, sum = 0.0f;
    #pragma omp simd reduction(max : mx)
    for (int j = 0; j < n; j++) mx = fmaxf(mx, s[j]);
    #pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; j++) {
        s[j] = fm_expf(s[j] - mx);
        sum += s[j];
    }
    float inv = 1.0f / sum;
    #pragma omp simd
    for (int j = 0; j < n; j++) s[j] *= inv;
    for (int j = n; j < T; j++) s[j] = 0.0f;
}

/* P for one head: [T, T] from q, k [T, dk]. */
static void head_probs(const float *q, const float *k, float *P, int T, int dk, float scale, bool causal) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, dk, scale, q, dk, k, dk, 0.0f, P, T);
    for (int i = 0; i < T; i++) softmax_prefix(P + (long)i * T, causal ? i + 1 : T, T);
}

static void attn_softmax_forward(Node *n) {
    const Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    int BH = q->shape[0] * q->shape[1], T = q->shape[2], dk = q->shape[3], dv = v->shape[3];
    float scale = n->f[0], *P = n->saved;
    bool causal = n->i[0];
    #pragma omp parallel for
    for (int h = 0; h < BH; h++) {
        float *Ph = P + (long)h * T * T;
        head_probs(q->data + (long)h * T * dk, k->data + (long)h * T * dk, Ph, T, dk, scale, causal);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, dv, T, 1.0f, Ph, T, v->data + (long)h * T * dv, dv,
                    0.0f, n->out->data + (long)h * T * dv, dv);
    }
}

static void attn_softmax_backward(Node *n) {
    Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    int BH = q->shape[0] * q->shape[1], T = q->shape[2], dk = q->shape[3], dv = v->shape[3];
    float scale = n->f[0];
    const float *P = n->saved, *dO = n->out->grad;
    float *dq = q->requires_grad ? tensor_grad(q) : NULL;
    float *dk_ = k->requires_grad ? tensor_grad(k) : NULL;
    float *dvv = v->requires_grad ? tensor_grad(v) : NULL;
    /* One T x T scratch per thread for dP, then dS in place. */
    int threads = omp_get_max_threads();
    float *scratch = arena_alloc(engine_arena(), (size_t)threads * T * T * sizeof(float));
    #pragma omp parallel for
    for (int h = 0; h < BH; h++) {
        const float *Ph = P + (long)h * T * T, *dOh = dO + (long)h * T * dv;
        const float *qh = q->data + (long)h * T * dk, *kh = k->data + (long)h * T * dk, *vh = v->data + (long)h * T * dv;
        float *dS = scratch + (long)omp_get_thread_num() * T * T;
        if (dvv) /* dV += P^T dO */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, dv, T, 1.0f, Ph, T, dOh, dv, 1.0f,
                        dvv + (long)h * T * dv, dv);
        if (!dq && !dk_) continue;
        /* dP = dO V^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, dv, 1.0f, dOh, dv, vh, dv, 0.0f, dS, T);
        for (int i = 0; i < T; i++) { /* dS = P * (dP - rowsum(dP * P)) */
            const float *restrict p = Ph + (long)i * T;
            float *restrict d = dS + (long)i * T;
            float dot = 0.0f;
            #pragma omp simd reduction(+ : dot)
            for (int j = 0; j < T; j++) dot += p[j] * d[j];
            #pragma omp simd
            for (int j = 0; j < T; j++) d[j] = p[j] * (d[j] - dot);
        }
        if (dq) /* dQ += s dS K */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, dk, T, scale, dS, T, kh, dk, 1.0f,
                        dq + (long)h * T * dk, dk);
        if (dk_) /* dK += s dS^T Q */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, dk, T, scale, dS, T, qh, dk, 1.0f,
                        dk_ + (long)h * T * dk, dk);
    }
}

static OpDef attn_softmax_op = {"attn_softmax", attn_softmax_forward, attn_softmax_backward};

static void check_qkv(const Tensor *q, const Tensor *k, const Tensor *v) {
    const char *name = attn_softmax_op.name;
    SHAPE_CHECK(q->ndim == 4 && k->ndim == 4 && v->ndim == 4, name, "q, k, v must be [B, H, T, d]", q, v);
    SHAPE_CHECK(tensor_same_shape(q, k), name, "q and k differ", q, k);
    for (int i = 0; i < 3; i++) SHAPE_CHECK(q->shape[i] == v->shape[i], name, "q and v differ in B, H or T", q, v);
}

static Tensor *attn_softmax(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v) {
    check_qkv(q, k, v);
    Node *n = node_new(&attn_softmax_op);
    n->n_in = 3;
    n->in[0] = q;
    n->in[1] = k;
    n->in[2] = v;
    n->f[0] = c->scale;
    n->i[0] = c->causal;
    int T = q->shape[2];
    n->saved = arena_alloc(engine_arena(), (size_t)q->shape[0] * q->shape[1] * T * T * sizeof(float));
    n->out = tensor_4d(q->shape[0], q->shape[1], T, v->shape[3]);
    return node_run(n);
}

static Tensor *attn_softmax_probs(const AttnCall *c, Tensor *q, Tensor *k) {
    int BH = q->shape[0] * q->shape[1], T = q->shape[2], dk = q->shape[3];
    Tensor *P = tensor_4d(q->shape[0], q->shape[1], T, T);
    #pragma omp parallel for
    for (int h = 0; h < BH; h++)
        head_probs(q->data + (long)h * T * dk, k->data + (long)h * T * dk, P->data + (long)h * T * T, T, dk, c->scale,
                   c->causal);
    return P;
}

const AttnKernel attn_kernel_softmax = {"softmax", NULL, attn_softmax, attn_softmax_probs, {&attn_softmax_op}};
