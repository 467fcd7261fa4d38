/* tiles.c: a block of query rows in tiles of keys (tiles.h).
 *
 * A block [r0, r1) sees keys [k0, k0 + w) between its rows (AttnPlan); it
 * runs over them ATTN_TILE_KEYS at a time, so that a tile's logits, its P
 * and the products' packed operands stay in cache whatever T is (a 64 x
 * 8192 block of fp32 scores is 2 MiB, past a Zen 5 core's L2; a 64 x 256
 * tile is 64 KiB). Per tile, forward:
 *   Z = s Q[rows] K[keys]^T, on each row's keys times lambda_i plus b(i - j),
 *       -inf elsewhere;
 *   P = the rule's map of each row of Z, rounded to bf16 as it is made;
 *   acc[row] *= the rule's factor (the softmax's rescale when a row's max
 *       grows; 1 for a pointwise map), then acc += P V[keys], P read as it is.
 * Backward, per tile, with P made again in fp32 from Z:
 *   dV[keys] += P^T dO[rows],  dP = dO[rows] V[keys]^T,  dz = the rule's
 *   grad, g[|i - j|] += dz,  dz *= lambda_i,
 *   dQ[rows] += s dz K[keys],  dK[keys] += s dz^T Q[rows].
 * Every product goes through gemm_ex, which reads an operand stored in bf16
 * as it is, or, for the scores and P V, through a head's k and v packed once
 * (attn_tile_pack). Each call writes only its head's rows of dq and acc and its
 * head's keys of dk and dv; the caller runs heads in parallel. */
#include "tiles.h"

#include "gemm.h"
#include <math.h>
#include <string.h>

#include "op_kernel.h"

AttnTileFault attn_tile_fault;

/* A head's rows of t from element off, as t stores them. */
static AttnRows head_rows(const Tensor *t, long off, int ld) {
    if (tensor_is16(t)) return (AttnRows){t->data16 + off, true, ld};
    return (AttnRows){t->data + off, false, ld};
}

static long pack_words(int T, int dk, int dv) { return gemm_packed_words(dk, T) + gemm_packed_words(T, dv); }

static long pack_floats(const Tensor *k, const Tensor *v) {
    return (long)omp_get_max_threads() * pack_words(k->shape[2], k->shape[3], v->shape[3]);
}

uint32_t *attn_tile_packs(const Tensor *k, const Tensor *v) {
    if (!tensor_is16(k) || !tensor_is16(v) || !gemm_packed_usable()) return NULL;
    _Static_assert(sizeof(uint32_t) == sizeof(float), "packed words in float scratch");
    return (uint32_t *)tensor_scratch(pack_floats(k, v));
}

void attn_tile_packs_done(uint32_t *space, const Tensor *k, const Tensor *v) {
    if (space) tensor_scratch_release((float *)space, pack_floats(k, v));
}

void attn_tile_pack(uint32_t *space, const Tensor *k, const Tensor *v, long bh, bool with_v, AttnTilePack *pack,
                    AttnTileHead *h) {
    if (!space) return;
    int T = k->shape[2], dk = k->shape[3], dv = v->shape[3];
    uint32_t *w = space + (long)omp_get_thread_num() * pack_words(T, dk, dv);
    pack->kt = gemm_pack_b(w, true, k->data16 + bh * T * dk, dk, dk, T);
    h->kt = &pack->kt;
    if (!with_v) return;
    pack->v = gemm_pack_b(w + gemm_packed_words(dk, T), false, v->data16 + bh * T * dv, dv, T, dv);
    h->vp = &pack->v;
}

AttnTileHead attn_tile_head(const AttnPlan *p, const Tensor *q, const Tensor *k, const Tensor *v, long bh, float scale,
                            const float *bias, bool causal) {
    int T = q->shape[2], dk = q->shape[3], dv = v->shape[3];
    return (AttnTileHead){
        .p = p,
        .q = head_rows(q, bh * T * dk, dk),
        .k = head_rows(k, bh * T * dk, dk),
        .v = head_rows(v, bh * T * dv, dv),
        .dk = dk,
        .dv = dv,
        .scale = scale,
        .bias = bias,
        .causal = causal,
    };
}

AttnTileGrads attn_tile_grads(const AttnGrad *g, long bh, double *gbias) {
    int T = g->q->shape[2], dk = g->q->shape[3], dv = g->v->shape[3];
    return (AttnTileGrads){
        .dO = {g->dO + bh * T * dv, false, dv},
        .dq = g->dq ? g->dq + bh * T * dk : NULL,
        .dk = g->dk ? g->dk + bh * T * dk : NULL,
        .dv = g->dv ? g->dv + bh * T * dv : NULL,
        .ld_dq = dk,
        .ld_dk = dk,
        .ld_dv = dv,
        .gbias = gbias,
    };
}

/* attn_tile_keys for row i of the block whose rows start at r0, with the
 * mask's fault: a tile past the block's first masked as if it began a tile
 * earlier. */
static void row_keys(const AttnPlan *p, int r0, int i, int c0, int wc, int *lo, int *e) {
    bool shift = attn_tile_fault == ATTN_TILE_FAULT_MASK_SHIFT && c0 > p->lo[r0];
    attn_tile_keys(p, i, shift ? c0 - ATTN_TILE_KEYS : c0, wc, lo, e);
}

void attn_tile_qk(const AttnTileHead *h, int r0, int R, int c0, int wc, float *S) {
    if (h->kt && gemm_packed(false, R, wc, h->dk, h->scale, attn_rows_at(h->q, r0), h->q.bf16, h->q.ld, h->kt, 0, c0,
                             0.0f, S, wc))
        return; /* Kᵀ's columns c0 .. read where the head's packing has them */
    gemm_ex(false, true, R, wc, h->dk, h->scale, attn_rows_at(h->q, r0), h->q.bf16, h->q.ld, attn_rows_at(h->k, c0),
            h->k.bf16, h->k.ld, 0.0f, S, wc, NULL);
}

void attn_tile_mask(const AttnTileHead *h, int r0, int R, int c0, int wc, float *S) {
    const AttnPlan *p = h->p;
    bool later = c0 > p->lo[r0]; /* not the block's first tile (for the fault) */
    const float *bias = later && attn_tile_fault == ATTN_TILE_FAULT_NO_BIAS ? NULL : h->bias;
    for (int r = 0; r < R; r++) {
        int i = r0 + r, lo, e;
        row_keys(p, r0, i, c0, wc, &lo, &e);
        float *s = S + (long)r * wc, l = p->lambda[i];
        for (int c = 0; c < lo; c++) s[c] = -INFINITY;
        for (int c = e; c < wc; c++) s[c] = -INFINITY;
        if (l != 1.0f)
            for (int c = lo; c < e; c++) s[c] *= l;
        if (bias)
            for (int c = lo; c < e; c++) {
                int d = i - (c0 + c);
                s[c] += bias[h->causal ? d : d < 0 ? -d : d];
            }
    }
}

void attn_tile_scores(const AttnTileHead *h, int r0, int R, int c0, int wc, float *S) {
    attn_tile_qk(h, r0, R, c0, wc, S);
    attn_tile_mask(h, r0, R, c0, wc, S);
}

/* Floats per thread: S, P, D, P16 (half as many floats), then the extra. */
static long tiles_floats(int qb, long extra) { return 3L * qb * ATTN_TILE_KEYS + qb * ATTN_TILE_KEYS / 2 + extra + 64; }

float *attn_tiles_scratch(int qb, long extra) {
    return arena_alloc(engine_arena(), sizeof(float) * (size_t)omp_get_max_threads() * (size_t)tiles_floats(qb, extra));
}

AttnTiles attn_tiles_of(float *scratch, int qb, long extra) {
    float *s = scratch + (long)omp_get_thread_num() * tiles_floats(qb, extra);
    long n = (long)qb * ATTN_TILE_KEYS;
    AttnTiles t = {.S = s, .P = s + n, .D = s + 2 * n};
    t.P16 = (uint16_t *)(s + 3 * n);
    t.extra = s + 3 * n + n / 2;
    return t;
}

void attn_tile_round(uint16_t *restrict out, const float *restrict x, long n) {
    if (attn_tile_fault == ATTN_TILE_FAULT_P_TOWARD_ZERO) {
        for (long c = 0; c < n; c++) {
            uint32_t u;
            memcpy(&u, &x[c], sizeof u);
            out[c] = (uint16_t)(u >> 16);
        }
        return;
    }
    #pragma omp simd
    for (long c = 0; c < n; c++) out[c] = bf16_from_float(x[c]);
}

void attn_tiles_forward(const AttnTileHead *h, const AttnBlock *b, const AttnTileRule *f, void *ctx, AttnTiles *t,
                        float *acc, int ld_acc) {
    int R = b->r1 - b->r0, dv = h->dv;
    for (int r = 0; r < R; r++) memset(acc + (long)r * ld_acc, 0, sizeof(float) * (size_t)dv);
    for (int c0 = b->k0; c0 < b->k0 + b->w; c0 += ATTN_TILE_KEYS) {
        int wc = b->k0 + b->w - c0 < ATTN_TILE_KEYS ? b->k0 + b->w - c0 : ATTN_TILE_KEYS;
        attn_tile_scores(h, b->r0, R, c0, wc, t->S);
        for (int r = 0; r < R; r++) {
            int i = b->r0 + r, lo, e;
            row_keys(h->p, b->r0, i, c0, wc, &lo, &e);
            float *z = t->S + (long)r * wc;
            float alpha = f->forward(ctx, r, i, z, lo, e, wc);
            attn_tile_round(t->P16 + (long)r * ATTN_TILE_KEYS, z, wc);
            if (alpha != 1.0f) {
                float *a = acc + (long)r * ld_acc;
                #pragma omp simd
                for (int d = 0; d < dv; d++) a[d] *= alpha;
            }
        }
        if (attn_tile_fault == ATTN_TILE_FAULT_FP32_PV && !h->v.bf16)
            gemm_via(GEMM_PATH_SGEMM, false, false, R, dv, wc, 1.0f, t->S, wc,
                     (const float *)h->v.data + (long)c0 * h->v.ld, h->v.ld, 1.0f, acc, ld_acc);
        else if (!h->vp || !gemm_packed(false, R, dv, wc, 1.0f, t->P16, true, ATTN_TILE_KEYS, h->vp, c0, 0, 1.0f, acc,
                                        ld_acc))
            gemm_ex(false, false, R, dv, wc, 1.0f, t->P16, true, ATTN_TILE_KEYS, attn_rows_at(h->v, c0), h->v.bf16,
                    h->v.ld, 1.0f, acc, ld_acc, NULL);
    }
}

void attn_tiles_backward(const AttnTileHead *h, const AttnBlock *b, const AttnTileRule *f, void *ctx,
                         const AttnTileGrads *g, AttnTiles *t) {
    const AttnPlan *p = h->p;
    int R = b->r1 - b->r0, dk = h->dk, dv = h->dv;
    const void *dO = attn_rows_at(g->dO, b->r0);
    for (int c0 = b->k0; c0 < b->k0 + b->w; c0 += ATTN_TILE_KEYS) {
        int wc = b->k0 + b->w - c0 < ATTN_TILE_KEYS ? b->k0 + b->w - c0 : ATTN_TILE_KEYS;
        attn_tile_scores(h, b->r0, R, c0, wc, t->S);
        for (int r = 0; r < R; r++) { /* P again */
            int i = b->r0 + r, lo, e;
            row_keys(p, b->r0, i, c0, wc, &lo, &e);
            f->again(ctx, r, i, t->S + (long)r * wc, t->P + (long)r * wc, lo, e, wc);
        }
        if (g->dv) /* dV[keys] += P^T dO[rows] */
            gemm_ex(true, false, wc, dv, R, 1.0f, t->P, false, wc, dO, g->dO.bf16, g->dO.ld, 1.0f,
                    g->dv + (long)c0 * g->ld_dv, g->ld_dv, NULL);
        if (!g->dq && !g->dk && !g->gbias) continue;
        /* dP = dO[rows] V[keys]^T */
        gemm_ex(false, true, R, wc, dv, 1.0f, dO, g->dO.bf16, g->dO.ld, attn_rows_at(h->v, c0), h->v.bf16, h->v.ld,
                0.0f, t->D, wc, NULL);
        for (int r = 0; r < R; r++) {
            int i = b->r0 + r, lo, e;
            row_keys(p, b->r0, i, c0, wc, &lo, &e);
            float *d = t->D + (long)r * wc, l = p->lambda[i];
            f->grad(ctx, r, i, t->S + (long)r * wc, t->P + (long)r * wc, d, lo, e, wc);
            if (g->gbias)
                for (int c = lo; c < e; c++) {
                    int dist = i - (c0 + c);
                    g->gbias[h->causal ? dist : dist < 0 ? -dist : dist] += d[c];
                }
            if (l != 1.0f)
                for (int c = lo; c < e; c++) d[c] *= l; /* z = lambda s q.k + b */
        }
        if (g->dq) /* dQ[rows] += s dz K[keys] */
            gemm_ex(false, false, R, dk, wc, h->scale, t->D, false, wc, attn_rows_at(h->k, c0), h->k.bf16, h->k.ld,
                    1.0f, g->dq + (long)b->r0 * g->ld_dq, g->ld_dq, NULL);
        if (g->dk) /* dK[keys] += s dz^T Q[rows] */
            gemm_ex(true, false, wc, dk, R, h->scale, t->D, false, wc, attn_rows_at(h->q, b->r0), h->q.bf16, h->q.ld,
                    1.0f, g->dk + (long)c0 * g->ld_dk, g->ld_dk, NULL);
    }
}
