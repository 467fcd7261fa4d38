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
 * gradient (den_rope_backward, linear_backward.c): O(T dk) more work and dk floats of state. The
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
 * batch element (lin_group_size), each head with its own scratch; a causal group
 * takes its heads chunk by chunk in turn, and packed rows are prefetched a
 * few rows ahead. Inside a parallel region OpenBLAS runs each sgemm on its
 * calling thread. The op is in three files: this one (the forward and the
 * kernel's entry points), linear_features.c (the features, the scratch, the
 * layouts) and linear_backward.c; linear_parts.h is what they share. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "attention/linear_op.h"
#include "attention/linear_parts.h"
#include "attention/positions.h"
#include "attention/rope.h"

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
        lin_phi_row(L, k + (long)j * L->ldq, f);
        for (int e = 0; e < dk; e++) z[e] += f[e];
    }
    for (int i = 0; i < T; i++) {
        if (L->causal) {
            lin_phi_row(L, k + (long)i * L->ldq, f);
            for (int e = 0; e < dk; e++) z[e] += f[e];
        }
        lin_phi_row(L, q + (long)i * L->ldq, f);
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
    lin_features(L, hf->q, p0, c, s->x, s->ldx, s->qp);
    lin_features(L, hf->k, p0, c, s->kf, F, s->kp);
    lin_v_ones(L, hf->v, p0, c, vb);
    lin_intra_scores(L, s, c, s->x + F, s->ldx);
    if (p0 > 0) mm(false, false, c, dv1, F + c, s->x, s->ldx, s->y, dv1, false, s->ob, dv1);
    else mm(false, false, c, dv1, c, s->x + F, s->ldx, vb, dv1, false, s->ob, dv1); /* S'_0 = 0 */
    long clamped = normalise(L, s->ob, c, hf->o + (long)p0 * L->ldo, hf->den + p0);
    /* S'_t = S'_{t-1} + K~_t^T V'_t (not needed after the last chunk) */
    if (p0 + c < T) mm(true, false, F, dv1, c, s->kf, F, vb, dv1, true, s->y, dv1);
    return clamped;
}

static long head_forward_bidirectional(const Lin *L, const HeadFwd *hf, Scratch *s) {
    int T = L->T, F = L->F, dv1 = L->dv1;
    const float *q = hf->q;
    float *o = hf->o, *den = hf->den;
    long clamped = 0;
    lin_full_state(L, hf->k, hf->v, s);
    for (int p0 = 0; p0 < T; p0 += L->C) { /* [Num, den] = Q~ S' */
        int c = T - p0 < L->C ? T - p0 : L->C;
        lin_features(L, q, p0, c, s->x, s->ldx, NULL);
        mm(false, false, c, dv1, F, s->x, s->ldx, s->y, dv1, false, s->ob, dv1);
        clamped += normalise(L, s->ob, c, o + (long)p0 * L->ldo, den + p0);
    }
    return clamped;
}

static void attn_linear_forward(Node *n) {
    Lin L = lin_of(n);
    /* q, k, v: three tensors, or one (fused) */
    const float *q = n->in[0]->data, *k = n->in[n->n_in > 1]->data, *v = n->in[n->n_in - 1]->data;
    int BH = L.B * L.H;
    float *den = n->saved; /* [BH, T], then the cos tables */
    float *table = den + (long)BH * L.T;
    if (L.sn) lin_cos_tables(L.T, L.C, table, table + L.T, table + 2L * L.T);
    if (L.rp) rope_tables(L.T, L.rp, NULL, false, (float *)L.rc, (float *)L.rs);
    int G = lin_group_size(&L), groups = L.B * ((L.H + G - 1) / G);
    long per = lin_scratch_floats(&L), clamped = 0; /* per head of a group */
    float *scratch = arena_alloc(engine_arena(), (size_t)omp_get_max_threads() * G * per * sizeof(float));
    #pragma omp parallel for reduction(+ : clamped)
    for (int gi = 0; gi < groups; gi++) {
        Scratch s[G];
        HeadFwd hf[G];
        int h0, hn = lin_group_heads(&L, G, gi, &h0);
        for (int j = 0; j < hn; j++) {
            s[j] = lin_scratch_at(&L, scratch + ((long)omp_get_thread_num() * G + j) * per);
            HeadAt at = lin_head_at(&L, h0 + j);
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

OpDef attn_linear_op = {"attn_linear", attn_linear_forward, attn_linear_backward, 0};

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
        lin_cos_tables(T, 1, table, table + T, table + 2 * T); /* w is not used here */
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
        lin_features(&L, q->data + (long)h * T * dk, 0, T, qf, L.F, NULL);
        lin_features(&L, k->data + (long)h * T * dk, 0, T, kf, L.F, NULL);
        mm(false, true, T, T, L.F, qf, L.F, kf, L.F, false, Ph, T);
        if (c->causal) lin_mask_weight(&L, Ph, T, T); /* L.w is NULL: the mask alone */
        float *dens = rp ? kf + (long)T * L.F : NULL;
        if (rp) {
            Lin R = L;
            R.rp = rp, R.rc = rtab, R.rs = rtab + (long)T * rp;
            for (int i = 0; i < T; i++) {
                float *restrict row = Ph + (long)i * T, den = 0.0f;
                #pragma omp simd reduction(+ : den)
                for (int j = 0; j < T; j++) den += row[j];
                dens[i] = den;
                lin_rotate_row(&R, qf + (long)i * L.F, i, false);
                lin_rotate_row(&R, kf + (long)i * L.F, i, false);
            }
            mm(false, true, T, T, L.F, qf, L.F, kf, L.F, false, Ph, T);
            if (c->causal) lin_mask_weight(&L, Ph, T, T);
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
