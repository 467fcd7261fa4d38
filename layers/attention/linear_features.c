/* linear_features.c: the fused linear-attention op's features (phi, the cos
 * re-weighting, RoPE's rotation, and their backward), its per-thread scratch
 * and state, and where each head's rows are (linear_op.c has the algorithm). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "attention/linear_parts.h"
#include "attention/positions.h"
#include "attention/rope.h"

long lin_scratch_floats(const Lin *L) {
    long C = L->C, F = L->F;
    return C * (F + C) + (F + C) * L->dv1 + C * F + 2 * C * L->dk + 2 * C * L->dv1 + C * C + C * F + C * L->dk +
           (L->rp ? 3L * L->dk : 0);
}

Scratch lin_scratch_at(const Lin *L, float *base) {
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
void lin_phi_row(const Lin *L, const float *restrict x, float *restrict f) {
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
void lin_rotate_row(const Lin *L, float *restrict f, int t, bool transpose) {
    const float *restrict c = L->rc + (long)t * L->rp, *restrict s = L->rs + (long)t * L->rp;
    float sign = transpose ? -1.0f : 1.0f;
    #pragma omp simd
    for (int p = 0; p < L->rp; p++) {
        float x1 = f[2 * p], x2 = f[2 * p + 1], sp = sign * s[p];
        f[2 * p] = c[p] * x1 - sp * x2;
        f[2 * p + 1] = sp * x1 + c[p] * x2;
    }
}

/* Rows [p0, p0 + c) of x [T, dk]: features into f [c, F] (row stride ldf) and,
 * with re-weighting, phi(x) into p [c, dk] (which may be NULL when not needed). */
void lin_features(const Lin *L, const float *x, int p0, int c, float *f, int ldf, float *p) {
    int dk = L->dk;
    for (int i = 0; i < c; i++) {
        float *fi = f + (long)i * ldf;
        prefetch_row(L, x, L->ldq, p0 + i, dk, L->T);
        if (!L->sn) {
            lin_phi_row(L, x + (long)(p0 + i) * L->ldq, fi);
            if (L->rp) lin_rotate_row(L, fi, p0 + i, false);
            continue;
        }
        float *pi = p ? p + (long)i * dk : fi + dk; /* without p, phi(x) goes to the cos half first */
        lin_phi_row(L, x + (long)(p0 + i) * L->ldq, pi);
        float sn = L->sn[p0 + i], cs = L->cs[p0 + i];
        #pragma omp simd
        for (int e = 0; e < dk; e++) fi[e] = pi[e] * sn;
        #pragma omp simd
        for (int e = 0; e < dk; e++) fi[dk + e] = pi[e] * cs;
    }
}

/* dx rows [p0, p0 + c) += phi'(x) g. g, the gradient of phi(x), is dp [c, dk]
 * (scratch, updated in place) plus, with re-weighting, what df [c, 2 dk] (the
 * gradient of the features, or NULL) gives: df_sin sin t + df_cos cos t.
 * phi' at 0 is taken from the left, as op_relu and PyTorch do. */
void lin_features_backward(const Lin *L, const float *x, int p0, int c, float *dp, const float *df, float *dx) {
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
        if (L->rp) lin_rotate_row(L, g, p0 + i, true); /* the gradient of R phi is R^T times it */
        phi_backward_row(L, xi, g, dxi);
    }
}

/* V'_t = [v, 1] for rows [p0, p0 + c) of v [T, dv] into vb [c, dv1]. */
void lin_v_ones(const Lin *L, const float *v, int p0, int c, float *vb) {
    int dv = L->dv, dv1 = L->dv1;
    for (int i = 0; i < c; i++) {
        prefetch_row(L, v, L->ldv, p0 + i, dv, L->T);
        memcpy(vb + (long)i * dv1, v + (long)(p0 + i) * L->ldv, (size_t)dv * sizeof(float));
        if (dv1 > dv) vb[(long)i * dv1 + dv] = 1.0f; /* not with RoPE */
    }
}

/* The causal mask M times the pair weights on x [c, c] (row stride ld): keeps
 * j <= i, times w[i - j] with re-weighting. */
void lin_mask_weight(const Lin *L, float *x, int c, int ld) {
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

/* A_t = (Q~_t K~_t^T) . M into a [c, c] (row stride lda). With re-weighting
 * q~_i . k~_j = (phi(q_i) . phi(k_j)) w[i - j], which takes half the work of
 * the 2 dk features: phi(q) phi(k)^T, then the weights. */
void lin_intra_scores(const Lin *L, const Scratch *s, int c, float *a, int lda) {
    if (L->sn) mm(false, true, c, c, L->dk, s->qp, L->dk, s->kp, L->dk, false, a, lda);
    else mm(false, true, c, c, L->F, s->x, s->ldx, s->kf, L->F, false, a, lda);
    lin_mask_weight(L, a, c, lda);
}

/* phi(q) or phi(k) of the chunk, as intra-chunk products take them: the
 * features themselves without re-weighting. */
const float *lin_phi_of(const Lin *L, const Scratch *s, bool key, int *ld) {
    *ld = L->sn ? L->dk : key ? L->F : s->ldx;
    return L->sn ? (key ? s->kp : s->qp) : (key ? s->kf : s->x);
}

/* S' = K~^T V' over all rows, into s->y, chunk by chunk. */
void lin_full_state(const Lin *L, const float *k, const float *v, Scratch *s) {
    int T = L->T, F = L->F, dv1 = L->dv1;
    float *vb = s->y + (long)F * dv1;
    memset(s->y, 0, (size_t)F * dv1 * sizeof(float));
    for (int p0 = 0; p0 < T; p0 += L->C) {
        int c = T - p0 < L->C ? T - p0 : L->C;
        lin_features(L, k, p0, c, s->kf, F, NULL);
        lin_v_ones(L, v, p0, c, vb);
        mm(true, false, F, dv1, c, s->kf, F, vb, dv1, true, s->y, dv1);
    }
}

/* The call's shared parameters from a node; the cos tables from its saved
 * memory: [den: B H T][sin t: T][cos t: T][w: C]. */
Lin lin_of(const Node *n) {
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

HeadAt lin_head_at(const Lin *L, int h) {
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
int lin_group_size(const Lin *L) {
    int nt = omp_get_max_threads(), G = L->H;
    while (G > 1 && (long)L->B * ((L->H + G - 1) / G) < nt) G = (G + 1) / 2;
    return G;
}

/* Group gi's first head (of B H, batch-major) and its number of heads. */
int lin_group_heads(const Lin *L, int G, int gi, int *first) {
    int per_b = (L->H + G - 1) / G, e = gi % per_b * G;
    *first = gi / per_b * L->H + e;
    return L->H - e < G ? L->H - e : G;
}

/* t_i = (pi/2) i / T for i = 1..T at rows 0..T-1, and w[m] = cos(pi m / 2T) =
 * cos(t_i - t_j) for i - j = m < C. */
void lin_cos_tables(int T, int C, float *sn, float *cs, float *w) {
    for (int p = 0; p < T; p++) {
        double t = M_PI / 2 * (double)(p + 1) / T;
        sn[p] = (float)sin(t);
        cs[p] = (float)cos(t);
    }
    for (int m = 0; m < C; m++) w[m] = (float)cos(M_PI / 2 * (double)m / T);
}
