/* linear_op.c: linear attention (Katharopoulos et al. 2020, "Transformers are
 * RNNs") with the feature maps phi = identity | relu | leakyrelu | elu+1, and
 * cosFormer's cos re-weighting (Qin et al. 2022), as one fused op with a
 * hand-written backward. attn=linear and attn=cosformer (= linear, relu, cos)
 * both run it.
 *
 * Per batch element and head, with features q~_i, k~_j of size F:
 *   reweight = none: q~_i = phi(q_i), F = key_size;
 *   reweight = cos:  q~_i = [phi(q_i) sin t_i, phi(q_i) cos t_i], F = 2 key_size,
 *                    t_i = (pi/2) i / M, i = 1..M, M = the current length T,
 *                    so q~_i . k~_j = phi(q_i) . phi(k_j) cos(pi (i - j) / (2M));
 *   num_i = sum_j (q~_i . k~_j) v_j,  den_i = sum_j q~_i . k~_j  (j <= i when causal)
 *   d_i = max(den_i, 1e-6),  o_i = num_i / d_i.
 * The clamp is the cosFormer reference's (clamp_min(den, eps)): identity and
 * leakyrelu can give a zero or negative denominator, and there the row's
 * gradient through d is zero (torch's clamp_min passes it where den >= eps).
 * Forward adds the clamped rows to attn_stats.den_clamped and all rows to
 * attn_stats.den_rows, so the trainer can log the fraction.
 *
 * No logit scale: call->scale (1 / sqrt(key_size)) is not applied. For the
 * homogeneous maps (identity, relu, leakyrelu) a scale on q cancels between
 * num and den anyway; Katharopoulos et al. and the cosFormer reference apply
 * none, and neither do we, so elu+1 sees q and k as they come.
 *
 * The denominator rides along with the numerator: v' = [v, 1] (dv + 1
 * columns), so [num_i, den_i] = sum_j (q~_i . k~_j) v'_j, and one state
 * S' = [S, z] = sum_j k~_j v'_j^T (F x (dv + 1)) carries both the k v^T sum and
 * z = sum_j k~_j.
 *
 * Causal form, in chunks of C rows (call->chunk). Per chunk t, with M the
 * causal mask inside the chunk (keep j <= i):
 *   A_t = (Q~_t K~_t^T) . M,  [Num_t, den_t] = Q~_t S'_{t-1} + A_t V'_t
 *                                            = [Q~_t | A_t] [S'_{t-1} ; V'_t] (one sgemm),
 *   S'_t = S'_{t-1} + K~_t^T V'_t.
 * Inside a chunk, cos re-weighting uses the identity above: A_t = (phi(Q_t)
 * phi(K_t)^T) . M . W with W_ij = cos(pi (i - j) / 2M), half the work of the
 * 2 dk features; the same holds for the intra-chunk parts of backward. The
 * states, which carry positions across chunks, need the 2 dk features.
 * Bidirectional: S' = K~^T V' over all rows, then [Num, den] = Q~ S'.
 *
 * Backward. With g_i = dL/do_i, the gradient of o_i = num_i / d_i is
 *   g^_i = g_i / d_i (into num_i),  delta_i = -(g_i . o_i) / d_i (into den_i;
 *   0 where the row was clamped),
 * and with g'_i = [g^_i, delta_i] the rest is unnormalised linear attention
 * run backwards on v' and g':
 *   dq~_i = sum_{j<=i} (g'_i . v'_j) k~_j,   dk~_j = sum_{i>=j} (g'_i . v'_j) q~_i,
 *   dv_j  = sum_{i>=j} (q~_i . k~_j) g^_i.
 * In chunks, with D_t = (G'_t V'_t^T) . M and A_t as in forward:
 *   dQ~_t = D_t K~_t + G'_t S'_{t-1}^T            (a sweep forwards: S' as in forward,
 *                                                   from 0)
 *   dK~_t = D_t^T Q~_t + V'_t U'_{t+1}^T          (a sweep backwards, from U' = 0,
 *   dV_t  = A_t^T G^_t + K~_t U_{t+1}              U' = [U, w] = sum_{later chunks} Q~^T G')
 * and U'_t = U'_{t+1} + Q~_t^T G'_t. The states are recomputed by running the
 * chunks again, never stored: forward keeps only den (T floats per head) and
 * the output. Every chunk recomputes its features from q and k too, so the
 * memory per head is O(T (dk + dv)) for q, k, v, o and their gradients plus
 * O(C (C + F + dv) + F dv) scratch per thread; nothing is O(T dk dv).
 *
 * pos = rope (rope_inside: the module leaves q and k alone), RoFormer's linear
 * attention (Su et al. 2021, eq. 19): the features rotate after phi, and only
 * in the numerator, so that the denominator keeps the sign phi gives it:
 *   o_i = sum_j (R_i phi(q_i)) . (R_j phi(k_j)) v_j / max(eps, sum_j phi(q_i) . phi(k_j)),
 * R_t RoPE's rotation of the leading rope_dims / 2 pairs (layers/attention/rope.h).
 * Everything above then runs on q~_i = R_i phi(q_i) with v' = v (no ones
 * column, dv1 = dv), and den_i = phi(q_i) . z_i, z_i = sum_{j <= i} phi(k_j)
 * (all j when bidirectional), is a running sum of its own (den_rope), as is its
 * gradient (den_rope_backward): O(T dk) more work and dk floats of state. The
 * gradient of a rotated feature is R^T times it before phi'. Without RoPE
 * none of this runs.
 *
 * Layouts: q, k, v come as [B, H, T, d] (split), as [B, T, H d] each
 * (packed), or, as the module gives them (forward_qkv), side by side in the
 * one tensor the fused projection made, [B, T, H dk | H dk | H dv] (fused);
 * the output and the gradients take the inputs' layout ([B, T, H dv] for the
 * fused output). Only the row strides differ (see Lin); every sum is the
 * same, so all three layouts give the same bits.
 *
 * A gradient nothing has reached before this op's backward comes unzeroed
 * (tensor_grad_unset), and each head's rows of it are zeroed where a sweep
 * first touches them (zero_rows), while they are in cache.
 *
 * Heads run in parallel on OpenMP threads in groups of adjacent heads of one
 * batch element (group_size), each head with its own scratch; a causal group
 * takes its heads chunk by chunk in turn, and packed rows are prefetched a
 * few rows ahead. Inside a parallel region OpenBLAS runs each sgemm on its
 * calling thread. */
#include "gemm.h"
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "attention/linear.h"
#include "attention/linear_op.h"
#include "attention/positions.h"
#include "attention/rope.h"
#include "fastmath.h"
#include "op_kernel.h"
#include "util.h"

/* The cosFormer reference's clamp on the denominator. */
#define LINEAR_EPS 1e-6f

/* What every head of one call shares. */
typedef struct {
    int B, H, T, dk, dv;
    /* Row strides of one head's rows: q, k (and dq, dk) ldq apart, v (and
     * dv) ldv apart, o and g ldo apart. dk and dv in the split layout
     * [B, H, T, d]; H dk and H dv in the packed one [B, T, H d]; with q, k, v
     * side by side in one tensor (fused), its row, 2 H dk + H dv, for q, k, v
     * and H dv for o (see head_at). */
    int ldq, ldv, ldo;
    bool packed, fused;
    int F;      /* feature size: dk, or 2 dk with cos re-weighting */
    int dv1;    /* dv + 1: v' = [v, 1] */
    int C;      /* chunk length, at most T */
    int phi;    /* PhiKind */
    float slope;
    bool causal;
    /* cos re-weighting (NULL without): sin t_i, cos t_i for rows i = 0..T-1,
     * and w[m] = cos(pi m / 2T) for m = 0..C-1, the weight of a pair i - j = m */
    const float *sn, *cs, *w;
    /* pos = rope (0 pairs without): the features rotate, q~_i = R_i phi(q_i),
     * by the tables [T, rp] of cos and sin t theta_p (layers/attention/rope.h);
     * then dv1 = dv (no ones column) and den comes from den_rope */
    int rp;
    const float *rc, *rs;
} Lin;

/* Per thread, rows of a chunk (c <= C of them):
 *  x  [C, F + C]: Q~ in columns [0, F), A_t in columns [F, F + c)
 *  y  [F + C, dv1]: the state S' or U' in rows [0, F), V' in rows [F, F + c)
 *  kf [C, F]: K~;  qp, kp [C, dk]: phi(q), phi(k) (with re-weighting)
 *  ob, gb [C, dv1]: forward's [Num, den]; G'
 *  d [C, C]: D;  df [C, F], dp [C, dk]: gradients of the features and of phi */
typedef struct {
    float *x, *y, *kf, *qp, *kp, *ob, *gb, *d, *df, *dp;
    float *rz; /* with RoPE, 3 dk: the running sum z, phi of one row, its gradient */
    int ldx;
} Scratch;

static long scratch_floats(const Lin *L) {
    long C = L->C, F = L->F;
    return C * (F + C) + (F + C) * L->dv1 + C * F + 2 * C * L->dk + 2 * C * L->dv1 + C * C + C * F + C * L->dk +
           (L->rp ? 3L * L->dk : 0);
}

static Scratch scratch_at(const Lin *L, float *base) {
    long C = L->C, F = L->F;
    Scratch s = {.ldx = (int)(F + C)};
    s.x = base;
    s.y = s.x + C * (F + C);
    s.kf = s.y + (F + C) * L->dv1;
    s.qp = s.kf + C * F;
    s.kp = s.qp + C * L->dk;
    s.ob = s.kp + C * L->dk;
    s.gb = s.ob + C * L->dv1;
    s.d = s.gb + C * L->dv1;
    s.df = s.d + C * C;
    s.dp = s.df + C * F;
    s.rz = s.dp + C * L->dk;
    return s;
}

/* ---- features ---------------------------------------------------------------- */

/* f[0, dk) = phi(x) for one row. */
static void phi_row(const Lin *L, const float *restrict x, float *restrict f) {
    int dk = L->dk;
    float slope = L->slope;
    switch (L->phi) {
        case PHI_IDENTITY: memcpy(f, x, (size_t)dk * sizeof(float)); break;
        case PHI_RELU:
            #pragma omp simd
            for (int c = 0; c < dk; c++) f[c] = x[c] > 0.0f ? x[c] : 0.0f;
            break;
        case PHI_LEAKYRELU:
            #pragma omp simd
            for (int c = 0; c < dk; c++) f[c] = x[c] > 0.0f ? x[c] : slope * x[c];
            break;
        case PHI_ELU: /* elu(x) + 1 = x + 1 for x > 0, e^x otherwise */
            #pragma omp simd
            for (int c = 0; c < dk; c++) f[c] = x[c] > 0.0f ? x[c] + 1.0f : fm_expf(x[c]);
            break;
        default: DIE("linear attention: unknown phi %d", L->phi);
    }
}

/* RoPE on the leading rp pairs of one row at position t: f = R_t f, or
 * f = R_t^T f (transpose, for backward). */
static void rotate_row(const Lin *L, float *restrict f, int t, bool transpose) {
    const float *restrict c = L->rc + (long)t * L->rp, *restrict s = L->rs + (long)t * L->rp;
    float sign = transpose ? -1.0f : 1.0f;
    #pragma omp simd
    for (int p = 0; p < L->rp; p++) {
        float x1 = f[2 * p], x2 = f[2 * p + 1], sp = sign * s[p];
        f[2 * p] = c[p] * x1 - sp * x2;
        f[2 * p + 1] = sp * x1 + c[p] * x2;
    }
}

/* Rows PREFETCH_AHEAD rows on in the packed layout, where a head's rows are
 * H d floats apart and the hardware prefetchers miss them. Only a hint: no
 * result depends on it. */
#define PREFETCH_AHEAD 16
static inline void prefetch_row(const Lin *L, const float *x, long ld, int row, int n, int end) {
    if (!L->packed || row + PREFETCH_AHEAD >= end) return;
    const char *p = (const char *)(x + (long)(row + PREFETCH_AHEAD) * ld);
    for (int b = 0; b < n * (int)sizeof(float); b += 64) __builtin_prefetch(p + b);
}

/* Rows [p0, p0 + c) of x [T, dk]: features into f [c, F] (row stride ldf) and,
 * with re-weighting, phi(x) into p [c, dk] (which may be NULL when not needed). */
static void features(const Lin *L, const float *x, int p0, int c, float *f, int ldf, float *p) {
    int dk = L->dk;
    for (int i = 0; i < c; i++) {
        float *fi = f + (long)i * ldf;
        prefetch_row(L, x, L->ldq, p0 + i, dk, L->T);
        if (!L->sn) {
            phi_row(L, x + (long)(p0 + i) * L->ldq, fi);
            if (L->rp) rotate_row(L, fi, p0 + i, false);
            continue;
        }
        float *pi = p ? p + (long)i * dk : fi + dk; /* without p, phi(x) goes to the cos half first */
        phi_row(L, x + (long)(p0 + i) * L->ldq, pi);
        float sn = L->sn[p0 + i], cs = L->cs[p0 + i];
        #pragma omp simd
        for (int e = 0; e < dk; e++) fi[e] = pi[e] * sn;
        #pragma omp simd
        for (int e = 0; e < dk; e++) fi[dk + e] = pi[e] * cs;
    }
}

/* dx += phi'(x) g for one row. */
static inline void phi_backward_row(const Lin *L, const float *restrict xi, const float *restrict g,
                                    float *restrict dxi) {
    int dk = L->dk;
    float slope = L->slope;
    switch (L->phi) {
        case PHI_IDENTITY:
            #pragma omp simd
            for (int e = 0; e < dk; e++) dxi[e] += g[e];
            break;
        case PHI_RELU:
            #pragma omp simd
            for (int e = 0; e < dk; e++) dxi[e] += xi[e] > 0.0f ? g[e] : 0.0f;
            break;
        case PHI_LEAKYRELU:
            #pragma omp simd
            for (int e = 0; e < dk; e++) dxi[e] += xi[e] > 0.0f ? g[e] : slope * g[e];
            break;
        case PHI_ELU: /* (elu + 1)' = 1 for x > 0, e^x otherwise */
            #pragma omp simd
            for (int e = 0; e < dk; e++) dxi[e] += xi[e] > 0.0f ? g[e] : fm_expf(xi[e]) * g[e];
            break;
        default: DIE("linear attention: unknown phi %d", L->phi);
    }
}

/* dx rows [p0, p0 + c) += phi'(x) g. g, the gradient of phi(x), is dp [c, dk]
 * (scratch, updated in place) plus, with re-weighting, what df [c, 2 dk] (the
 * gradient of the features, or NULL) gives: df_sin sin t + df_cos cos t.
 * phi' at 0 is taken from the left, as op_relu and PyTorch do. */
static void features_backward(const Lin *L, const float *x, int p0, int c, float *dp, const float *df, float *dx) {
    int dk = L->dk;
    for (int i = 0; i < c; i++) {
        const float *restrict xi = x + (long)(p0 + i) * L->ldq;
        prefetch_row(L, x, L->ldq, p0 + i, dk, L->T);
        prefetch_row(L, dx, L->ldq, p0 + i, dk, L->T);
        float *restrict g = dp + (long)i * dk, *restrict dxi = dx + (long)(p0 + i) * L->ldq;
        if (df) {
            const float *restrict dfi = df + (long)i * L->F;
            float sn = L->sn[p0 + i], cs = L->cs[p0 + i];
            #pragma omp simd
            for (int e = 0; e < dk; e++) g[e] += dfi[e] * sn + dfi[dk + e] * cs;
        }
        if (L->rp) rotate_row(L, g, p0 + i, true); /* the gradient of R phi is R^T times it */
        phi_backward_row(L, xi, g, dxi);
    }
}

/* V'_t = [v, 1] for rows [p0, p0 + c) of v [T, dv] into vb [c, dv1]. */
static void v_ones(const Lin *L, const float *v, int p0, int c, float *vb) {
    int dv = L->dv, dv1 = L->dv1;
    for (int i = 0; i < c; i++) {
        prefetch_row(L, v, L->ldv, p0 + i, dv, L->T);
        memcpy(vb + (long)i * dv1, v + (long)(p0 + i) * L->ldv, (size_t)dv * sizeof(float));
        if (dv1 > dv) vb[(long)i * dv1 + dv] = 1.0f; /* not with RoPE */
    }
}

/* The causal mask M times the pair weights on x [c, c] (row stride ld): keeps
 * j <= i, times w[i - j] with re-weighting. */
static void mask_weight(const Lin *L, float *x, int c, int ld) {
    for (int i = 0; i < c; i++) {
        float *restrict row = x + (long)i * ld;
        if (L->w) {
            const float *restrict w = L->w;
            #pragma omp simd
            for (int j = 0; j <= i; j++) row[j] *= w[i - j];
        }
        for (int j = i + 1; j < c; j++) row[j] = 0.0f;
    }
}

/* X = op(A) op(B) (+ X when acc), row-major, all leading dims as given. */
static void mm(bool ta, bool tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb, bool acc,
               float *x, int ldx) {
    gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, acc ? 1.0f : 0.0f, x, ldx);
}

/* A_t = (Q~_t K~_t^T) . M into a [c, c] (row stride lda). With re-weighting
 * q~_i . k~_j = (phi(q_i) . phi(k_j)) w[i - j], which takes half the work of
 * the 2 dk features: phi(q) phi(k)^T, then the weights. */
static void intra_scores(const Lin *L, const Scratch *s, int c, float *a, int lda) {
    if (L->sn) mm(false, true, c, c, L->dk, s->qp, L->dk, s->kp, L->dk, false, a, lda);
    else mm(false, true, c, c, L->F, s->x, s->ldx, s->kf, L->F, false, a, lda);
    mask_weight(L, a, c, lda);
}

/* phi(q) or phi(k) of the chunk, as intra-chunk products take them: the
 * features themselves without re-weighting. */
static const float *phi_of(const Lin *L, const Scratch *s, bool key, int *ld) {
    *ld = L->sn ? L->dk : key ? L->F : s->ldx;
    return L->sn ? (key ? s->kp : s->qp) : (key ? s->kf : s->x);
}

/* ---- forward ------------------------------------------------------------------ */

/* o = num / max(den, eps) for c rows of [Num, den] (ob); saves den; returns
 * how many rows were clamped. With RoPE, ob is Num alone and den is already
 * there (den_rope). */
static long normalise(const Lin *L, const float *ob, int c, float *o, float *den) {
    int dv = L->dv, dv1 = L->dv1;
    long clamped = 0;
    for (int i = 0; i < c; i++) {
        const float *restrict num = ob + (long)i * dv1;
        float *restrict oi = o + (long)i * L->ldo;
        float dn = L->rp ? den[i] : num[dv];
        bool clamp = !(dn >= LINEAR_EPS);
        float inv = 1.0f / (clamp ? LINEAR_EPS : dn);
        den[i] = dn;
        clamped += clamp;
        #pragma omp simd
        for (int j = 0; j < dv; j++) oi[j] = num[j] * inv;
    }
    return clamped;
}

/* With RoPE, den_i = phi(q_i) . z_i from the unrotated features, z_i =
 * sum_{j <= i} phi(k_j) (all j when bidirectional): a running sum, O(T dk). */
static void den_rope(const Lin *L, const float *q, const float *k, float *den, Scratch *s) {
    int T = L->T, dk = L->dk;
    float *restrict z = s->rz, *restrict f = s->rz + dk;
    memset(z, 0, (size_t)dk * sizeof(float));
    for (int j = 0; !L->causal && j < T; j++) {
        phi_row(L, k + (long)j * L->ldq, f);
        for (int e = 0; e < dk; e++) z[e] += f[e];
    }
    for (int i = 0; i < T; i++) {
        if (L->causal) {
            phi_row(L, k + (long)i * L->ldq, f);
            for (int e = 0; e < dk; e++) z[e] += f[e];
        }
        phi_row(L, q + (long)i * L->ldq, f);
        float dn = 0.0f;
        for (int e = 0; e < dk; e++) dn += f[e] * z[e];
        den[i] = dn;
    }
}

/* One head's inputs and outputs in forward. */
typedef struct {
    const float *q, *k, *v;
    float *o, *den;
} HeadFwd;

/* The chunk at row p0 of a causal head, its state S'_{t-1} in s->y (zeroed
 * before the first chunk): [Num_t, den_t] = [Q~_t | A_t] [S'_{t-1} ; V'_t],
 * one product. Returns the rows clamped. */
static long forward_chunk(const Lin *L, const HeadFwd *hf, Scratch *s, int p0) {
    int T = L->T, F = L->F, dv1 = L->dv1;
    int c = T - p0 < L->C ? T - p0 : L->C;
    float *vb = s->y + (long)F * dv1;
    features(L, hf->q, p0, c, s->x, s->ldx, s->qp);
    features(L, hf->k, p0, c, s->kf, F, s->kp);
    v_ones(L, hf->v, p0, c, vb);
    intra_scores(L, s, c, s->x + F, s->ldx);
    if (p0 > 0) mm(false, false, c, dv1, F + c, s->x, s->ldx, s->y, dv1, false, s->ob, dv1);
    else mm(false, false, c, dv1, c, s->x + F, s->ldx, vb, dv1, false, s->ob, dv1); /* S'_0 = 0 */
    long clamped = normalise(L, s->ob, c, hf->o + (long)p0 * L->ldo, hf->den + p0);
    /* S'_t = S'_{t-1} + K~_t^T V'_t (not needed after the last chunk) */
    if (p0 + c < T) mm(true, false, F, dv1, c, s->kf, F, vb, dv1, true, s->y, dv1);
    return clamped;
}

/* S' = K~^T V' over all rows, into s->y, chunk by chunk. */
static void full_state(const Lin *L, const float *k, const float *v, Scratch *s) {
    int T = L->T, F = L->F, dv1 = L->dv1;
    float *vb = s->y + (long)F * dv1;
    memset(s->y, 0, (size_t)F * dv1 * sizeof(float));
    for (int p0 = 0; p0 < T; p0 += L->C) {
        int c = T - p0 < L->C ? T - p0 : L->C;
        features(L, k, p0, c, s->kf, F, NULL);
        v_ones(L, v, p0, c, vb);
        mm(true, false, F, dv1, c, s->kf, F, vb, dv1, true, s->y, dv1);
    }
}

static long head_forward_bidirectional(const Lin *L, const HeadFwd *hf, Scratch *s) {
    int T = L->T, F = L->F, dv1 = L->dv1;
    const float *q = hf->q;
    float *o = hf->o, *den = hf->den;
    long clamped = 0;
    full_state(L, hf->k, hf->v, s);
    for (int p0 = 0; p0 < T; p0 += L->C) { /* [Num, den] = Q~ S' */
        int c = T - p0 < L->C ? T - p0 : L->C;
        features(L, q, p0, c, s->x, s->ldx, NULL);
        mm(false, false, c, dv1, F, s->x, s->ldx, s->y, dv1, false, s->ob, dv1);
        clamped += normalise(L, s->ob, c, o + (long)p0 * L->ldo, den + p0);
    }
    return clamped;
}

typedef struct {
    bool causal;
    int phi;        /* PhiKind */
    float slope;    /* phi = leakyrelu's */
    int reweight;   /* ReweightKind */
    int chunk;
    int rope_pairs; /* pos = rope's rotated pairs (0 without) */
    int heads, dk;  /* what the packed and fused layouts do not show */
} LinearAttrs;
NODE_ATTRS_DECLARE(LinearAttrs);

/* The call's shared parameters from a node; the cos tables from its saved
 * memory: [den: B H T][sin t: T][cos t: T][w: C]. */
static Lin lin_of(const Node *n) {
    const Tensor *q = n->in[0], *v = n->in[n->n_in - 1];
    const LinearAttrs *a = NODE_ATTRS(n, LinearAttrs);
    Lin L = {.phi = a->phi, .slope = a->slope, .causal = a->causal, .B = q->shape[0]};
    L.fused = n->n_in == 1;
    L.packed = q->ndim == 3;
    if (L.fused) { /* [B, T, H dk | H dk | H dv] */
        L.H = a->heads;
        L.T = q->shape[1];
        L.dk = a->dk;
        L.dv = (q->shape[2] - 2 * L.H * L.dk) / L.H;
        L.ldq = L.ldv = q->shape[2];
        L.ldo = L.H * L.dv;
    } else if (L.packed) { /* [B, T, H d] */
        L.H = a->heads;
        L.T = q->shape[1];
        L.dk = q->shape[2] / L.H;
        L.dv = v->shape[2] / L.H;
        L.ldq = q->shape[2];
        L.ldv = L.ldo = v->shape[2];
    } else { /* [B, H, T, d] */
        L.H = q->shape[1];
        L.T = q->shape[2];
        L.dk = L.ldq = q->shape[3];
        L.dv = L.ldv = L.ldo = v->shape[3];
    }
    bool cos = a->reweight == REWEIGHT_COS;
    L.F = cos ? 2 * L.dk : L.dk;
    L.rp = a->rope_pairs;
    L.dv1 = L.rp ? L.dv : L.dv + 1;
    L.C = a->chunk < L.T ? a->chunk : L.T;
    if (cos) {
        const float *table = n->saved + (long)L.B * L.H * L.T;
        L.sn = table;
        L.cs = table + L.T;
        L.w = table + 2L * L.T;
    }
    if (L.rp) {
        L.rc = n->saved + (long)L.B * L.H * L.T;
        L.rs = L.rc + (long)L.T * L.rp;
    }
    return L;
}

/* Where head h (of B H, batch-major) starts: its first row in q (qo), k
 * (ko), v (vo) and o (oo), in floats from the start of each one's tensor (of
 * the one tensor when fused); the next rows are ldq, ldv or ldo on. */
typedef struct {
    long qo, ko, vo, oo;
} HeadAt;

static HeadAt head_at(const Lin *L, int h) {
    if (!L->packed) {
        long qo = (long)h * L->T * L->dk, vo = (long)h * L->T * L->dv;
        return (HeadAt){qo, qo, vo, vo};
    }
    int b = h / L->H, e = h % L->H;
    long row = (long)b * L->T * L->ldq, o = (long)b * L->T * L->ldo + (long)e * L->dv;
    if (L->fused) {
        long hk = (long)L->H * L->dk;
        return (HeadAt){row + (long)e * L->dk, row + hk + (long)e * L->dk, row + 2 * hk + (long)e * L->dv, o};
    }
    return (HeadAt){row + (long)e * L->dk, row + (long)e * L->dk, (long)b * L->T * L->ldv + (long)e * L->dv, o};
}

/* Heads run in groups of G adjacent heads of one batch element, a group to an
 * OpenMP thread, and a causal group runs its heads chunk by chunk in turn:
 * in the packed layout the rows of adjacent heads share cache lines and
 * pages, so a chunk's rows come from memory once for the group. G is the
 * largest (halving from H) that still gives every thread a group. */
static int group_size(const Lin *L) {
    int nt = omp_get_max_threads(), G = L->H;
    while (G > 1 && (long)L->B * ((L->H + G - 1) / G) < nt) G = (G + 1) / 2;
    return G;
}

/* Group gi's first head (of B H, batch-major) and its number of heads. */
static int group_heads(const Lin *L, int G, int gi, int *first) {
    int per_b = (L->H + G - 1) / G, e = gi % per_b * G;
    *first = gi / per_b * L->H + e;
    return L->H - e < G ? L->H - e : G;
}

/* t_i = (pi/2) i / T for i = 1..T at rows 0..T-1, and w[m] = cos(pi m / 2T) =
 * cos(t_i - t_j) for i - j = m < C. */
static void cos_tables(int T, int C, float *sn, float *cs, float *w) {
    for (int p = 0; p < T; p++) {
        double t = M_PI / 2 * (double)(p + 1) / T;
        sn[p] = (float)sin(t);
        cs[p] = (float)cos(t);
    }
    for (int m = 0; m < C; m++) w[m] = (float)cos(M_PI / 2 * (double)m / T);
}

static void attn_linear_forward(Node *n) {
    Lin L = lin_of(n);
    /* q, k, v: three tensors, or one (fused) */
    const float *q = n->in[0]->data, *k = n->in[n->n_in > 1]->data, *v = n->in[n->n_in - 1]->data;
    int BH = L.B * L.H;
    float *den = n->saved; /* [BH, T], then the cos tables */
    float *table = den + (long)BH * L.T;
    if (L.sn) cos_tables(L.T, L.C, table, table + L.T, table + 2L * L.T);
    if (L.rp) rope_tables(L.T, L.rp, NULL, false, (float *)L.rc, (float *)L.rs);
    int G = group_size(&L), groups = L.B * ((L.H + G - 1) / G);
    long per = scratch_floats(&L), clamped = 0; /* per head of a group */
    float *scratch = arena_alloc(engine_arena(), (size_t)omp_get_max_threads() * G * per * sizeof(float));
    #pragma omp parallel for reduction(+ : clamped)
    for (int gi = 0; gi < groups; gi++) {
        Scratch s[G];
        HeadFwd hf[G];
        int h0, hn = group_heads(&L, G, gi, &h0);
        for (int j = 0; j < hn; j++) {
            s[j] = scratch_at(&L, scratch + ((long)omp_get_thread_num() * G + j) * per);
            HeadAt at = head_at(&L, h0 + j);
            hf[j] = (HeadFwd){q + at.qo, k + at.ko, v + at.vo, n->out->data + at.oo, den + (long)(h0 + j) * L.T};
            if (L.rp) den_rope(&L, hf[j].q, hf[j].k, hf[j].den, &s[j]);
            if (!L.causal) clamped += head_forward_bidirectional(&L, &hf[j], &s[j]);
            else memset(s[j].y, 0, (size_t)L.F * L.dv1 * sizeof(float));
        }
        for (int p0 = 0; L.causal && p0 < L.T; p0 += L.C)
            for (int j = 0; j < hn; j++) clamped += forward_chunk(&L, &hf[j], &s[j], p0);
    }
    attn_stats.den_clamped += clamped;
    attn_stats.den_rows += (long)BH * L.T;
}

/* ---- backward ----------------------------------------------------------------- */

/* G'_t = [g / d, delta] for rows [p0, p0 + c): delta = -(g . o) / d, 0 where
 * den was clamped. */
static void g_prime(const Lin *L, const float *g, const float *o, const float *den, int p0, int c, float *gb) {
    int dv = L->dv, dv1 = L->dv1;
    for (int i = 0; i < c; i++) {
        const float *restrict gi = g + (long)(p0 + i) * L->ldo, *restrict oi = o + (long)(p0 + i) * L->ldo;
        prefetch_row(L, g, L->ldo, p0 + i, dv, L->T);
        prefetch_row(L, o, L->ldo, p0 + i, dv, L->T);
        float *restrict out = gb + (long)i * dv1;
        float dn = den[p0 + i];
        bool clamp = !(dn >= LINEAR_EPS);
        float inv = 1.0f / (clamp ? LINEAR_EPS : dn), dot = 0.0f;
        #pragma omp simd reduction(+ : dot)
        for (int j = 0; j < dv; j++) {
            out[j] = gi[j] * inv;
            dot += gi[j] * oi[j];
        }
        if (!L->rp) out[dv] = clamp ? 0.0f : -dot * inv; /* with RoPE, den_rope_backward's */
    }
}

/* Where the gradients of one head go (NULL: not wanted) and what they need.
 * zq, zk, zv: that gradient is still unset (tensor_grad_unset), and its rows
 * are zeroed where they are first touched, or the first product into them
 * overwrites. */
typedef struct {
    const float *q, *k, *v, *o, *g, *den;
    float *dq, *dk, *dv;
    bool zq, zk, zv;
} HeadGrad;

/* Zeroes one head's c rows of a gradient from row p0 when `unset`. */
static void zero_rows(bool unset, float *d, long ld, int p0, int c, int width) {
    for (int i = 0; unset && i < c; i++) memset(d + (long)(p0 + i) * ld, 0, (size_t)width * sizeof(float));
}

/* delta_i = -(g_i . o_i) / d_i, the gradient into den_i (0 where clamped). */
static float den_delta(const Lin *L, const HeadGrad *hg, int i) {
    int dv = L->dv;
    const float *restrict gi = hg->g + (long)i * L->ldo, *restrict oi = hg->o + (long)i * L->ldo;
    float dn = hg->den[i], dot = 0.0f;
    if (!(dn >= LINEAR_EPS)) return 0.0f;
    #pragma omp simd reduction(+ : dot)
    for (int j = 0; j < dv; j++) dot += gi[j] * oi[j];
    return -dot / dn;
}

/* With RoPE, the gradient through den_i = phi(q_i) . z_i (den_rope), added
 * to dq and dk apart from the numerator's (phi' is linear in its gradient):
 *   dphi(q_i) = delta_i z_i,  dphi(k_j) = w_j = sum_{i >= j} delta_i phi(q_i)
 * (all i when bidirectional), z forwards and w backwards as running sums. */
static void den_rope_backward(const Lin *L, const HeadGrad *hg, Scratch *s) {
    int T = L->T, dk = L->dk;
    float *restrict z = s->rz, *restrict f = s->rz + dk, *restrict g = s->rz + 2 * dk;
    if (hg->dq) {
        memset(z, 0, (size_t)dk * sizeof(float));
        for (int j = 0; !L->causal && j < T; j++) {
            phi_row(L, hg->k + (long)j * L->ldq, f);
            for (int e = 0; e < dk; e++) z[e] += f[e];
        }
        for (int i = 0; i < T; i++) {
            if (L->causal) {
                phi_row(L, hg->k + (long)i * L->ldq, f);
                for (int e = 0; e < dk; e++) z[e] += f[e];
            }
            float delta = den_delta(L, hg, i);
            for (int e = 0; e < dk; e++) g[e] = delta * z[e];
            zero_rows(hg->zq, hg->dq, L->ldq, i, 1, dk);
            phi_backward_row(L, hg->q + (long)i * L->ldq, g, hg->dq + (long)i * L->ldq);
        }
    }
    if (hg->dk) { /* z holds w */
        memset(z, 0, (size_t)dk * sizeof(float));
        for (int i = 0; !L->causal && i < T; i++) {
            float delta = den_delta(L, hg, i);
            phi_row(L, hg->q + (long)i * L->ldq, f);
            for (int e = 0; e < dk; e++) z[e] += delta * f[e];
        }
        for (int j = T - 1; j >= 0; j--) {
            if (L->causal) {
                float delta = den_delta(L, hg, j);
                phi_row(L, hg->q + (long)j * L->ldq, f);
                for (int e = 0; e < dk; e++) z[e] += delta * f[e];
            }
            zero_rows(hg->zk, hg->dk, L->ldq, j, 1, dk);
            phi_backward_row(L, hg->k + (long)j * L->ldq, z, hg->dk + (long)j * L->ldq);
        }
    }
}

/* dQ~_t = D_t K~_t + G'_t S'_{t-1}^T, sweeping forwards (this is the chunk
 * at row p0; s->y holds S'_{t-1}, zeroed before the first chunk). The
 * intra-chunk part goes to phi(q) directly ((D_t . w) phi(K_t) with
 * re-weighting). */
static void dq_chunk(const Lin *L, const HeadGrad *hg, Scratch *s, int p0) {
    int T = L->T, F = L->F, dv1 = L->dv1, ldk;
    float *vb = s->y + (long)F * dv1;
    int c = T - p0 < L->C ? T - p0 : L->C;
    features(L, hg->k, p0, c, s->kf, F, s->kp);
    v_ones(L, hg->v, p0, c, vb);
    g_prime(L, hg->g, hg->o, hg->den, p0, c, s->gb);
    /* D_t = (G'_t V'_t^T) . M (. w) */
    mm(false, true, c, c, dv1, s->gb, dv1, vb, dv1, false, s->d, c);
    mask_weight(L, s->d, c, c);
    const float *kp = phi_of(L, s, true, &ldk);
    mm(false, false, c, L->dk, c, s->d, c, kp, ldk, false, s->dp, L->dk);
    bool inter = p0 > 0; /* S'_0 = 0 */
    if (inter && !L->sn) mm(false, true, c, F, dv1, s->gb, dv1, s->y, dv1, true, s->dp, L->dk);
    if (inter && L->sn) mm(false, true, c, F, dv1, s->gb, dv1, s->y, dv1, false, s->df, F);
    zero_rows(hg->zq, hg->dq, L->ldq, p0, c, L->dk);
    features_backward(L, hg->q, p0, c, s->dp, inter && L->sn ? s->df : NULL, hg->dq);
    if (p0 + c < T) mm(true, false, F, dv1, c, s->kf, F, vb, dv1, true, s->y, dv1);
}

/* dK~_t = D_t^T Q~_t + V'_t U'_{t+1}^T and dV_t = A_t^T G^_t + K~_t U_{t+1},
 * sweeping backwards with U'_t = U'_{t+1} + Q~_t^T G'_t (this is the chunk
 * at row p0; s->y holds U'_{t+1}, zeroed before the last chunk). */
static void dkv_chunk(const Lin *L, const HeadGrad *hg, Scratch *s, int p0) {
    int T = L->T, F = L->F, dv = L->dv, dv1 = L->dv1, ldq;
    int last = (T - 1) / L->C * L->C;
    float *vb = s->y + (long)F * dv1, *a = s->x + F;
    int c = T - p0 < L->C ? T - p0 : L->C;
    bool later = p0 != last; /* U'_{t+1} = 0 for the last chunk */
    features(L, hg->q, p0, c, s->x, s->ldx, s->qp);
    features(L, hg->k, p0, c, s->kf, F, s->kp);
    v_ones(L, hg->v, p0, c, vb);
    g_prime(L, hg->g, hg->o, hg->den, p0, c, s->gb);
    if (hg->dk) {
        mm(false, true, c, c, dv1, s->gb, dv1, vb, dv1, false, s->d, c);
        mask_weight(L, s->d, c, c);
        const float *qp = phi_of(L, s, false, &ldq);
        mm(true, false, c, L->dk, c, s->d, c, qp, ldq, false, s->dp, L->dk);
        if (later && !L->sn) mm(false, true, c, F, dv1, vb, dv1, s->y, dv1, true, s->dp, L->dk);
        if (later && L->sn) mm(false, true, c, F, dv1, vb, dv1, s->y, dv1, false, s->df, F);
        zero_rows(hg->zk, hg->dk, L->ldq, p0, c, L->dk);
        features_backward(L, hg->k, p0, c, s->dp, later && L->sn ? s->df : NULL, hg->dk);
    }
    if (hg->dv) {
        float *dvt = hg->dv + (long)p0 * L->ldv;
        intra_scores(L, s, c, a, s->ldx);
        mm(true, false, c, dv, c, a, s->ldx, s->gb, dv1, !hg->zv, dvt, L->ldv); /* unset: overwrites */
        if (later) mm(false, false, c, dv, F, s->kf, F, s->y, dv1, true, dvt, L->ldv);
    }
    if (p0 > 0) mm(true, false, F, dv1, c, s->x, s->ldx, s->gb, dv1, true, s->y, dv1);
}

/* The gradient of the features, a [c, dv1] times state^T [dv1, F]: into
 * s->dp without re-weighting (F = dk), else into s->df with s->dp zeroed, as
 * features_backward takes them. */
static void feature_grad(const Lin *L, Scratch *s, int c, const float *a, const float *state) {
    if (!L->sn) {
        mm(false, true, c, L->F, L->dv1, a, L->dv1, state, L->dv1, false, s->dp, L->dk);
        return;
    }
    mm(false, true, c, L->F, L->dv1, a, L->dv1, state, L->dv1, false, s->df, L->F);
    memset(s->dp, 0, (size_t)c * L->dk * sizeof(float));
}

/* Bidirectional: dQ~ = G' S'^T, dK~ = V' U'^T, dV = K~ U with S' = K~^T V' and
 * U' = Q~^T G' over all rows. s->y holds S'; U' goes to u. */
static void head_backward_bidirectional(const Lin *L, const HeadGrad *hg, Scratch *s, float *u) {
    int T = L->T, F = L->F, dv = L->dv, dv1 = L->dv1;
    float *vb = s->y + (long)F * dv1;
    if (hg->dq) full_state(L, hg->k, hg->v, s);
    if (hg->dk || hg->dv) {
        memset(u, 0, (size_t)F * dv1 * sizeof(float));
        for (int p0 = 0; p0 < T; p0 += L->C) {
            int c = T - p0 < L->C ? T - p0 : L->C;
            features(L, hg->q, p0, c, s->x, s->ldx, NULL);
            g_prime(L, hg->g, hg->o, hg->den, p0, c, s->gb);
            mm(true, false, F, dv1, c, s->x, s->ldx, s->gb, dv1, true, u, dv1);
        }
    }
    for (int p0 = 0; p0 < T; p0 += L->C) {
        int c = T - p0 < L->C ? T - p0 : L->C;
        if (hg->dq) {
            g_prime(L, hg->g, hg->o, hg->den, p0, c, s->gb);
            feature_grad(L, s, c, s->gb, s->y);
            zero_rows(hg->zq, hg->dq, L->ldq, p0, c, L->dk);
            features_backward(L, hg->q, p0, c, s->dp, L->sn ? s->df : NULL, hg->dq);
        }
        if (hg->dk) {
            v_ones(L, hg->v, p0, c, vb);
            feature_grad(L, s, c, vb, u);
            zero_rows(hg->zk, hg->dk, L->ldq, p0, c, L->dk);
            features_backward(L, hg->k, p0, c, s->dp, L->sn ? s->df : NULL, hg->dk);
        }
        if (hg->dv) {
            features(L, hg->k, p0, c, s->kf, F, NULL);
            mm(false, false, c, dv, F, s->kf, F, u, dv1, !hg->zv, hg->dv + (long)p0 * L->ldv, L->ldv);
        }
    }
}

static void attn_linear_backward(Node *n) {
    Tensor *q = n->in[0], *k = n->in[n->n_in > 1], *v = n->in[n->n_in - 1]; /* one tensor when fused */
    Lin L = lin_of(n);
    /* A gradient nothing has reached yet comes unzeroed, and every row is
     * zeroed where the sweeps first touch it, in cache (zero_rows): one pass
     * over dq, dk, dv fewer. The same tensor twice (fused) is unset once. */
    bool uq = false, uk = false, uv = false;
    float *dq = q->requires_grad ? tensor_grad_unset(q, &uq) : NULL;
    float *dk = !k->requires_grad ? NULL : k == q ? (uk = uq, dq) : tensor_grad_unset(k, &uk);
    float *dv = !v->requires_grad ? NULL : v == q ? (uv = uq, dq) : v == k ? (uv = uk, dk) : tensor_grad_unset(v, &uv);
    /* per head of a group: the scratch, then U' for the bidirectional form */
    int G = group_size(&L), groups = L.B * ((L.H + G - 1) / G);
    long per = scratch_floats(&L) + (long)L.F * L.dv1;
    float *scratch = arena_alloc(engine_arena(), (size_t)omp_get_max_threads() * G * per * sizeof(float));
    size_t state = (size_t)L.F * L.dv1 * sizeof(float);
    #pragma omp parallel for
    for (int gi = 0; gi < groups; gi++) {
        Scratch s[G];
        HeadGrad hg[G];
        int h0, hn = group_heads(&L, G, gi, &h0);
        for (int j = 0; j < hn; j++) {
            float *mine = scratch + ((long)omp_get_thread_num() * G + j) * per;
            s[j] = scratch_at(&L, mine);
            HeadAt at = head_at(&L, h0 + j);
            hg[j] = (HeadGrad){
                .q = q->data + at.qo,
                .k = k->data + at.ko,
                .v = v->data + at.vo,
                .o = n->out->data + at.oo,
                .g = n->out->grad + at.oo,
                .den = n->saved + (long)(h0 + j) * L.T,
                .dq = dq ? dq + at.qo : NULL,
                .dk = dk ? dk + at.ko : NULL,
                .dv = dv ? dv + at.vo : NULL,
                .zq = uq,
                .zk = uk,
                .zv = uv,
            };
            if (L.rp) {
                den_rope_backward(&L, &hg[j], &s[j]); /* which touches every row of dq and dk first */
                hg[j].zq = hg[j].zk = false;
            }
            if (!L.causal) head_backward_bidirectional(&L, &hg[j], &s[j], mine + scratch_floats(&L));
        }
        if (!L.causal) continue;
        if (dq) { /* the heads' sweeps forwards, chunk by chunk in turn */
            for (int j = 0; j < hn; j++) memset(s[j].y, 0, state);
            for (int p0 = 0; p0 < L.T; p0 += L.C)
                for (int j = 0; j < hn; j++) dq_chunk(&L, &hg[j], &s[j], p0);
        }
        if (dk || dv) { /* and backwards */
            for (int j = 0; j < hn; j++) memset(s[j].y, 0, state);
            for (int p0 = (L.T - 1) / L.C * L.C; p0 >= 0; p0 -= L.C)
                for (int j = 0; j < hn; j++) dkv_chunk(&L, &hg[j], &s[j], p0);
        }
    }
}

OpDef attn_linear_op = {"attn_linear", attn_linear_forward, attn_linear_backward};

/* ---- the op as the kernel calls it ------------------------------------------- */

/* q, k, v as [B, H, T, d] (split) or as [B, T, H d] (packed, H = c->H). */
static void check_qkv(const AttnCall *c, const Tensor *q, const Tensor *k, const Tensor *v) {
    const char *name = attn_linear_op.name;
    SHAPE_CHECK(tensor_same_shape(q, k), name, "q and k differ", q, k);
    if (q->ndim == 3) {
        SHAPE_CHECK(v->ndim == 3, name, "q, k, v must all be [B, T, H d] or all [B, H, T, d]", q, v);
        SHAPE_CHECK(c->H > 0 && q->shape[2] % c->H == 0 && v->shape[2] % c->H == 0, name,
                    "the last dims of q and v must divide into the call's heads", q, v);
        for (int i = 0; i < 2; i++) SHAPE_CHECK(q->shape[i] == v->shape[i], name, "q and v differ in B or T", q, v);
        return;
    }
    SHAPE_CHECK(q->ndim == 4 && v->ndim == 4, name, "q, k, v must be [B, H, T, d] or [B, T, H d]", q, v);
    for (int i = 0; i < 3; i++) SHAPE_CHECK(q->shape[i] == v->shape[i], name, "q and v differ in B, H or T", q, v);
}

/* The op on n_in inputs (q, k, v, or the one fused tensor) of B, H, T, dk, with
 * its output out. */
static Tensor *linear_node(const AttnCall *c, Tensor **in, int n_in, int B, int H, int T, int dk, Tensor *out) {
    const LinearOpts *o = c->opts;
    if (o->chunk < 1) DIE("linear attention: chunk %d < 1", o->chunk);
    if (o->phi < PHI_IDENTITY || o->phi > PHI_ELU) DIE("linear attention: unknown phi %d", o->phi);
    /* the option table refuses these: the module leaves positions to this kernel (rope_inside) */
    const PosScheme *scheme = pos_scheme(c->cfg->pos);
    if (scheme->decay) DIE("linear attention: pos=%s decays, so it is for softmax attention only", scheme->name);
    bool rope = scheme->rotary;
    if (rope && o->reweight == REWEIGHT_COS) DIE("linear attention: pos=rope with reweight=cos");
    int rp = rope ? rope_pairs(c->cfg->rope_dims, dk) : 0;
    Node *n = node_new(&attn_linear_op);
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    *NODE_ATTRS(n, LinearAttrs) = (LinearAttrs){.causal = c->causal, .phi = o->phi, .slope = o->leaky_slope,
                                                 .reweight = o->reweight, .chunk = o->chunk, .rope_pairs = rp,
                                                 .heads = H, .dk = dk};
    int C = o->chunk < T ? o->chunk : T;
    /* den per row, then the cos tables or the RoPE tables (see lin_of) */
    long saved = (long)B * H * T + (o->reweight == REWEIGHT_COS ? 2L * T + C : 0) + 2L * T * rp;
    n->saved = arena_alloc(engine_arena(), (size_t)saved * sizeof(float));
    n->out = out;
    return node_run(n);
}

Tensor *attn_linear(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v) {
    check_qkv(c, q, k, v);
    bool packed = q->ndim == 3;
    int B = q->shape[0], H = packed ? c->H : q->shape[1], T = packed ? q->shape[1] : q->shape[2];
    int dk = packed ? q->shape[2] / H : q->shape[3];
    /* the output in the inputs' layout */
    Tensor *out = packed ? tensor_3d(B, T, v->shape[2]) : tensor_4d(B, H, T, v->shape[3]);
    return linear_node(c, (Tensor *[]){q, k, v}, 3, B, H, T, dk, out);
}

/* qkv [B, T, H key_size | H key_size | H head_size] -> [B, T, H head_size]. */
Tensor *attn_linear_qkv(const AttnCall *c, Tensor *qkv) {
    const char *name = attn_linear_op.name;
    int H = c->H, dk = c->key_size, dv = c->head_size;
    SHAPE_CHECK(qkv->ndim == 3 && H > 0 && qkv->shape[2] == H * (2 * dk + dv), name,
                "qkv must be [B, T, H (2 key_size + head_size)] for the call's sizes", qkv, qkv);
    int B = qkv->shape[0], T = qkv->shape[1];
    return linear_node(c, (Tensor *[]){qkv}, 1, B, H, T, dk, tensor_3d(B, T, H * dv));
}

/* P [B, H, T, T]: P_ij = q~_i . k~_j / max(den_i, eps) (0 for j > i when
 * causal), so that P v is the kernel's output. With RoPE, den_i comes from
 * the unrotated features first (the row sums of phi(Q) phi(K)^T), then the
 * features rotate and P_ij = (R_i phi(q_i)) . (R_j phi(k_j)) / max(den_i, eps). */
Tensor *attn_linear_probs(const AttnCall *c, Tensor *q, Tensor *k) {
    const LinearOpts *o = c->opts;
    int BH = q->shape[0] * q->shape[1], T = q->shape[2], dk = q->shape[3];
    bool cos = o->reweight == REWEIGHT_COS;
    Lin L = {.T = T, .dk = dk, .ldq = dk, .F = cos ? 2 * dk : dk, .C = T, .phi = o->phi, .slope = o->leaky_slope};
    float *table = NULL;
    if (cos) {
        table = arena_alloc(engine_arena(), (2 * (size_t)T + 1) * sizeof(float));
        cos_tables(T, 1, table, table + T, table + 2 * T); /* w is not used here */
        L.sn = table;
        L.cs = table + T;
    }
    int rp = pos_scheme(c->cfg->pos)->rotary ? rope_pairs(c->cfg->rope_dims, dk) : 0;
    float *rtab = rp ? arena_alloc(engine_arena(), 2 * (size_t)T * rp * sizeof(float)) : NULL;
    if (rp) rope_tables(T, rp, NULL, false, rtab, rtab + (long)T * rp);
    Tensor *P = tensor_4d(q->shape[0], q->shape[1], T, T);
    long per = 2L * T * L.F + (rp ? T : 0);
    float *scratch = arena_alloc(engine_arena(), (size_t)omp_get_max_threads() * per * sizeof(float));
    #pragma omp parallel for
    for (int h = 0; h < BH; h++) {
        float *qf = scratch + omp_get_thread_num() * per, *kf = qf + (long)T * L.F;
        float *Ph = P->data + (long)h * T * T;
        features(&L, q->data + (long)h * T * dk, 0, T, qf, L.F, NULL);
        features(&L, k->data + (long)h * T * dk, 0, T, kf, L.F, NULL);
        mm(false, true, T, T, L.F, qf, L.F, kf, L.F, false, Ph, T);
        if (c->causal) mask_weight(&L, Ph, T, T); /* L.w is NULL: the mask alone */
        float *dens = rp ? kf + (long)T * L.F : NULL;
        if (rp) {
            Lin R = L;
            R.rp = rp, R.rc = rtab, R.rs = rtab + (long)T * rp;
            for (int i = 0; i < T; i++) {
                float *restrict row = Ph + (long)i * T, den = 0.0f;
                #pragma omp simd reduction(+ : den)
                for (int j = 0; j < T; j++) den += row[j];
                dens[i] = den;
                rotate_row(&R, qf + (long)i * L.F, i, false);
                rotate_row(&R, kf + (long)i * L.F, i, false);
            }
            mm(false, true, T, T, L.F, qf, L.F, kf, L.F, false, Ph, T);
            if (c->causal) mask_weight(&L, Ph, T, T);
        }
        for (int i = 0; i < T; i++) {
            float *restrict row = Ph + (long)i * T, den = 0.0f;
            if (rp) den = dens[i];
            else {
                #pragma omp simd reduction(+ : den)
                for (int j = 0; j < T; j++) den += row[j];
            }
            float inv = 1.0f / (den >= LINEAR_EPS ? den : LINEAR_EPS);
            #pragma omp simd
            for (int j = 0; j < T; j++) row[j] *= inv;
        }
    }
    return P;
}
