/* attention/linear_parts.h: what the pieces of the fused linear-attention op
 * share (linear_op.c has the algorithm and the forward; linear_features.c the
 * features, the scratch and the layouts; linear_backward.c the backward).
 * Private to them. */
#ifndef ATTNLAB_ATTENTION_LINEAR_PARTS_H
#define ATTNLAB_ATTENTION_LINEAR_PARTS_H

#include "attention/linear.h"
#include "fastmath.h"
#include "gemm.h"
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

/* Rows PREFETCH_AHEAD rows on in the packed layout, where a head's rows are
 * H d floats apart and the hardware prefetchers miss them. Only a hint: no
 * result depends on it. */
#define PREFETCH_AHEAD 16
static inline void prefetch_row(const Lin *L, const float *x, long ld, int row, int n, int end) {
    if (!L->packed || row + PREFETCH_AHEAD >= end) return;
    const char *p = (const char *)(x + (long)(row + PREFETCH_AHEAD) * ld);
    for (int b = 0; b < n * (int)sizeof(float); b += 64) __builtin_prefetch(p + b);
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

/* X = op(A) op(B) (+ X when acc), row-major, all leading dims as given. */
static inline void mm(bool ta, bool tb, int m, int n, int k, const float *a, int lda, const float *b, int ldb, bool acc,
                      float *x, int ldx) {
    gemm(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, acc ? 1.0f : 0.0f, x, ldx);
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

/* Where head h (of B H, batch-major) starts: its first row in q (qo), k
 * (ko), v (vo) and o (oo), in floats from the start of each one's tensor (of
 * the one tensor when fused); the next rows are ldq, ldv or ldo on. */
typedef struct {
    long qo, ko, vo, oo;
} HeadAt;

/* ---- linear_features.c ---- */
long lin_scratch_floats(const Lin *L);
Scratch lin_scratch_at(const Lin *L, float *base);
/* f[0, dk) = phi(x) for one row. */
void lin_phi_row(const Lin *L, const float *restrict x, float *restrict f);
/* RoPE on the leading rp pairs of one row at position t: f = R_t f, or
 * f = R_t^T f (transpose, for backward). */
void lin_rotate_row(const Lin *L, float *restrict f, int t, bool transpose);
/* Rows [p0, p0 + c) of x [T, dk]: features into f [c, F] (row stride ldf) and,
 * with re-weighting, phi(x) into p [c, dk] (which may be NULL when not needed). */
void lin_features(const Lin *L, const float *x, int p0, int c, float *f, int ldf, float *p);
/* dx rows [p0, p0 + c) += phi'(x) g (linear_features.c says what g is). */
void lin_features_backward(const Lin *L, const float *x, int p0, int c, float *dp, const float *df, float *dx);
/* V'_t = [v, 1] for rows [p0, p0 + c) of v [T, dv] into vb [c, dv1]. */
void lin_v_ones(const Lin *L, const float *v, int p0, int c, float *vb);
/* The causal mask M times the pair weights on x [c, c] (row stride ld). */
void lin_mask_weight(const Lin *L, float *x, int c, int ld);
/* A_t = (Q~_t K~_t^T) . M into a [c, c] (row stride lda). */
void lin_intra_scores(const Lin *L, const Scratch *s, int c, float *a, int lda);
/* phi(q) or phi(k) of the chunk, as intra-chunk products take them. */
const float *lin_phi_of(const Lin *L, const Scratch *s, bool key, int *ld);
/* S' = K~^T V' over all rows, into s->y. */
void lin_full_state(const Lin *L, const float *k, const float *v, Scratch *s);
/* The call's shared parameters from a node. */
Lin lin_of(const Node *n);
/* Where head h (of B H, batch-major) starts. */
HeadAt lin_head_at(const Lin *L, int h);
/* The heads of a group (an OpenMP thread's), and group gi's first head and count. */
int lin_group_size(const Lin *L);
int lin_group_heads(const Lin *L, int G, int gi, int *first);
/* The cos re-weighting tables: sin t_i, cos t_i, and the pair weights w. */
void lin_cos_tables(int T, int C, float *sn, float *cs, float *w);

/* ---- linear_backward.c ---- */
void attn_linear_backward(Node *n);

#endif
