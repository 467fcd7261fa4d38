/* linear_backward.c: the fused linear-attention op's hand-written backward
 * (linear_op.c has the algorithm: g', the sweeps forwards and backwards, the
 * RoPE denominator's own gradient). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "attention/linear_parts.h"
#include "attention/positions.h"
#include "attention/rope.h"

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
            lin_phi_row(L, hg->k + (long)j * L->ldq, f);
            for (int e = 0; e < dk; e++) z[e] += f[e];
        }
        for (int i = 0; i < T; i++) {
            if (L->causal) {
                lin_phi_row(L, hg->k + (long)i * L->ldq, f);
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
            lin_phi_row(L, hg->q + (long)i * L->ldq, f);
            for (int e = 0; e < dk; e++) z[e] += delta * f[e];
        }
        for (int j = T - 1; j >= 0; j--) {
            if (L->causal) {
                float delta = den_delta(L, hg, j);
                lin_phi_row(L, hg->q + (long)j * L->ldq, f);
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
    lin_features(L, hg->k, p0, c, s->kf, F, s->kp);
    lin_v_ones(L, hg->v, p0, c, vb);
    g_prime(L, hg->g, hg->o, hg->den, p0, c, s->gb);
    /* D_t = (G'_t V'_t^T) . M (. w) */
    mm(false, true, c, c, dv1, s->gb, dv1, vb, dv1, false, s->d, c);
    lin_mask_weight(L, s->d, c, c);
    const float *kp = lin_phi_of(L, s, true, &ldk);
    mm(false, false, c, L->dk, c, s->d, c, kp, ldk, false, s->dp, L->dk);
    bool inter = p0 > 0; /* S'_0 = 0 */
    if (inter && !L->sn) mm(false, true, c, F, dv1, s->gb, dv1, s->y, dv1, true, s->dp, L->dk);
    if (inter && L->sn) mm(false, true, c, F, dv1, s->gb, dv1, s->y, dv1, false, s->df, F);
    zero_rows(hg->zq, hg->dq, L->ldq, p0, c, L->dk);
    lin_features_backward(L, hg->q, p0, c, s->dp, inter && L->sn ? s->df : NULL, hg->dq);
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
    lin_features(L, hg->q, p0, c, s->x, s->ldx, s->qp);
    lin_features(L, hg->k, p0, c, s->kf, F, s->kp);
    lin_v_ones(L, hg->v, p0, c, vb);
    g_prime(L, hg->g, hg->o, hg->den, p0, c, s->gb);
    if (hg->dk) {
        mm(false, true, c, c, dv1, s->gb, dv1, vb, dv1, false, s->d, c);
        lin_mask_weight(L, s->d, c, c);
        const float *qp = lin_phi_of(L, s, false, &ldq);
        mm(true, false, c, L->dk, c, s->d, c, qp, ldq, false, s->dp, L->dk);
        if (later && !L->sn) mm(false, true, c, F, dv1, vb, dv1, s->y, dv1, true, s->dp, L->dk);
        if (later && L->sn) mm(false, true, c, F, dv1, vb, dv1, s->y, dv1, false, s->df, F);
        zero_rows(hg->zk, hg->dk, L->ldq, p0, c, L->dk);
        lin_features_backward(L, hg->k, p0, c, s->dp, later && L->sn ? s->df : NULL, hg->dk);
    }
    if (hg->dv) {
        float *dvt = hg->dv + (long)p0 * L->ldv;
        lin_intra_scores(L, s, c, a, s->ldx);
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
    if (hg->dq) lin_full_state(L, hg->k, hg->v, s);
    if (hg->dk || hg->dv) {
        memset(u, 0, (size_t)F * dv1 * sizeof(float));
        for (int p0 = 0; p0 < T; p0 += L->C) {
            int c = T - p0 < L->C ? T - p0 : L->C;
            lin_features(L, hg->q, p0, c, s->x, s->ldx, NULL);
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
            lin_features_backward(L, hg->q, p0, c, s->dp, L->sn ? s->df : NULL, hg->dq);
        }
        if (hg->dk) {
            lin_v_ones(L, hg->v, p0, c, vb);
            feature_grad(L, s, c, vb, u);
            zero_rows(hg->zk, hg->dk, L->ldq, p0, c, L->dk);
            lin_features_backward(L, hg->k, p0, c, s->dp, L->sn ? s->df : NULL, hg->dk);
        }
        if (hg->dv) {
            lin_features(L, hg->k, p0, c, s->kf, F, NULL);
            mm(false, false, c, dv, F, s->kf, F, u, dv1, !hg->zv, hg->dv + (long)p0 * L->ldv, L->ldv);
        }
    }
}

void attn_linear_backward(Node *n) {
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
    int G = lin_group_size(&L), groups = L.B * ((L.H + G - 1) / G);
    long per = lin_scratch_floats(&L) + (long)L.F * L.dv1;
    float *scratch = arena_alloc(engine_arena(), (size_t)omp_get_max_threads() * G * per * sizeof(float));
    size_t state = (size_t)L.F * L.dv1 * sizeof(float);
    #pragma omp parallel for
    for (int gi = 0; gi < groups; gi++) {
        Scratch s[G];
        HeadGrad hg[G];
        int h0, hn = lin_group_heads(&L, G, gi, &h0);
        for (int j = 0; j < hn; j++) {
            float *mine = scratch + ((long)omp_get_thread_num() * G + j) * per;
            s[j] = lin_scratch_at(&L, mine);
            HeadAt at = lin_head_at(&L, h0 + j);
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
            if (!L.causal) head_backward_bidirectional(&L, &hg[j], &s[j], mine + lin_scratch_floats(&L));
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
