/* talking.c: Talking-Heads attention (Shazeer et al. 2020), the softmax
 * kernel under talking_heads = pre, post or both, as one fused op with its
 * hand-written backward, and its parameters. */
#include "attention/talking.h"

#include "gemm.h"
#include <math.h>
#include <omp.h>
#include <string.h>

#include "attention/softmax.h"
#include "fastmath.h"
#include "layers.h"
#include "op_kernel.h"
#include "softmax_parts.h"
#include "tiles.h"
#include "util.h"

/* ---- Talking-Heads attention (Shazeer et al. 2020) --------------------------
 *
 * With talking_heads = pre, post or both, the H heads of a batch element
 * exchange information through learned H x H matrices, the layer parameters
 *   blocks.{i}.attn.talking_pre.weight   [H, H]  (pre, both)
 *   blocks.{i}.attn.talking_post.weight  [H, H]  (post, both)
 * Each is what nn.Linear(H, H, bias=False) applied over the head axis holds:
 * W[h, h'] weighs input head h' in output head h. They start as the identity,
 * so training starts from plain attention. Per batch element:
 *   S_h  = s Q_h K_h^T
 *   A_h  = sum_h' Wpre[h, h'] S_h'      (pre; else A = S)
 *   P_h  = softmax(A_h + mask)          (the causal mask comes after the mix)
 *   P'_h = sum_h' Wpost[h, h'] P_h'     (post; else P' = P; keeps causal zeros)
 *   O_h  = P'_h V_h
 * Viewing S and P as [H, T*T] matrices, each mix is one sgemm. Forward keeps P;
 * backward computes S and P' again (one product each) rather than keep three
 * [B, H, T, T] tensors:
 *   dV_h = P'_h^T dO_h,   dP'_h = dO_h V_h^T
 *   dWpost = dP' P^T,     dP = Wpost^T dP'       (over [H, T*T])
 *   dA = P * (dP - rowsum(dP * P))
 *   dWpre = dA S^T,       dS = Wpre^T dA
 *   dQ_h = s dS_h K_h,    dK_h = s dS_h^T Q_h
 * Heads interact, so threads split the batch, not the heads (with fewer batch
 * elements than threads, only B threads start). Each batch element's dW goes
 * to its own slot, and the slots are summed in order afterwards, so the result
 * does not depend on the thread count. */

/* S_h = scale Q_h K_h^T for the H heads of one batch element: q, k [H, T, dk]
 * -> S [H, T, T]. */
static void head_scores(const float *q, const float *k, float *S, int H, int T, int dk, float scale) {
    for (int h = 0; h < H; h++)
        gemm(false, true, T, T, dk, scale, q + (long)h * T * dk, dk,
                    k + (long)h * T * dk, dk, 0.0f, S + (long)h * T * T, T);
}

/* Y = W X, or W^T X when `transpose`, with X, Y [H, T*T]: mixes the heads. */
static void mix_heads(const float *W, bool transpose, const float *X, float *Y, int H, int T) {
    int TT = T * T;
    gemm(transpose, false, H, TT, H, 1.0f, W, H, X, TT, 0.0f,
                Y, TT);
}

/* P [H, T, T] of one batch element, before any post-mixing: the scores, mixed
 * by wpre when given, then the masked softmax of every row. X is [H, T, T]
 * scratch. */
static void talking_probs(const float *q, const float *k, const float *wpre, float *P, float *X, int H, int T, int dk,
                          float scale, bool causal) {
    if (!wpre) {
        for (int h = 0; h < H; h++)
            attn_head_probs(q + (long)h * T * dk, k + (long)h * T * dk, P + (long)h * T * T, T, dk, scale, causal);
        return;
    }
    head_scores(q, k, X, H, T, dk, scale);
    mix_heads(wpre, false, X, P, H, T);
    for (long r = 0; r < (long)H * T; r++) attn_softmax_prefix(P + r * T, causal ? (int)(r % T) + 1 : T, T);
}

typedef struct {
    float scale;
    bool causal;
    bool pre, post; /* which mixing matrices the node has */
    bool tiles;     /* bf16: blocks of queries over tiles of keys (below); saved holds the rows' stats */
} TalkingAttrs;
NODE_ATTRS_DECLARE(TalkingAttrs);

/* Node layout: in = {q, k, v, then Wpre when pre, then Wpost when post}. */
static Tensor *node_wpre(const Node *n) { return NODE_ATTRS(n, TalkingAttrs)->pre ? n->in[3] : NULL; }
static Tensor *node_wpost(const Node *n) {
    const TalkingAttrs *a = NODE_ATTRS(n, TalkingAttrs);
    return a->post ? n->in[3 + a->pre] : NULL;
}

/* Threads for a loop over B batch elements: no more than there are elements. */
static int batch_threads(int B) {
    int t = omp_get_max_threads();
    return t < B ? t : B;
}

/* ---- bf16: every head of a block of queries, in tiles of keys -------------
 *
 * Under precision bf16 each batch element runs in blocks of
 * SOFTMAX_QUERY_BLOCK query rows, all H heads together (the mixes need every
 * head of a score), over the keys ATTN_TILE_KEYS at a time (tiles.c's scores,
 * masks and scratch), so nothing T x T is made or kept: forward keeps each
 * (head, row)'s max and 1 / sum of A = Wpre S, [B, H, T, 2], as the plain
 * kernel does. A tile of head h is [R, wc] at h R wc of a [H, R, wc] buffer,
 * so that each mix is one product over [H, R wc]. Per block:
 *   pass 1, per tile: S_h = s Q_h K_h^T, A = Wpre S, the mask; the running max
 *     m and sum l of each row of A;
 *   pass 2, per tile: S, A and the mask again, P = exp(A - m) / l (whole, so
 *     that Wpost may mix it), P' = Wpost P rounded to bf16 as it is made,
 *     O_h += P'_h V_h[keys].
 * Backward, per block: D_hi = sum_j P_hij dP_hij, from dO_h . O_h without
 * post, else from a pass over the tiles making dP = Wpost^T (dO V^T); then
 * per tile S, A, P and P' again and
 *   dV_h += P'_h^T dO_h,  dP' = dO V^T,  dWpost += dP' P^T,  dP = Wpost^T dP',
 *   dA = P (dP - D),  dWpre += dA S^T,  dS = Wpre^T dA,
 *   dQ_h += s dS_h K_h,  dK_h += s dS_h^T Q_h.
 * A block whose keys fit one tile (T <= 256 causal) makes the stats and P
 * from the same logits, and backward takes D from its one tile; a longer one
 * makes the scores twice in forward (pass 1 for the stats) and, with post,
 * three times in backward: the price of no T x T buffer. Forward runs the
 * (batch element, block) pairs in parallel (each writes its own rows);
 * backward, whose dK, dV and dW sum over blocks, the batch elements. The sums run in another order
 * than the fp32 path's, so bf16 is held to the error analysis
 * (tests/test_bf16.c). */

/* One batch element's call: its plan, q, k [H, T, dk] and v [H, T, dv], and
 * the matrices (NULL: none). */
typedef struct {
    const AttnPlan *p;
    int H, T, dk, dv;
    float scale;
    bool causal;
    const float *q, *k, *v, *wpre, *wpost;
} TalkBatch;

/* Head h of it, for tiles.c. */
static AttnTileHead talk_head(const TalkBatch *t, int h) {
    long T = t->T;
    return (AttnTileHead){.p = t->p,
                          .q = {t->q + h * T * t->dk, false, t->dk},
                          .k = {t->k + h * T * t->dk, false, t->dk},
                          .v = {t->v + h * T * t->dv, false, t->dv},
                          .dk = t->dk,
                          .dv = t->dv,
                          .scale = t->scale,
                          .causal = t->causal};
}

/* Y = W X, or W^T X when `transpose`, with X, Y [H, n]. */
static void mix_tile(const float *W, bool transpose, const float *X, float *Y, int H, long n) {
    gemm(transpose, false, H, (int)n, H, 1.0f, W, H, X, (int)n, 0.0f, Y, (int)n);
}

/* A tile's logits: S [H, R, wc] the heads' s q.k (kept for dWpre), A the
 * mixed and masked logits (A is S without pre). Returns A. */
static float *talk_logits(const TalkBatch *t, const AttnBlock *b, int c0, int wc, float *S, float *A) {
    int R = b->r1 - b->r0;
    long n = (long)R * wc;
    for (int h = 0; h < t->H; h++) {
        AttnTileHead hd = talk_head(t, h);
        attn_tile_qk(&hd, b->r0, R, c0, wc, S + h * n);
    }
    if (t->wpre)
        mix_tile(t->wpre, false, S, A, t->H, n);
    else
        A = S;
    for (int h = 0; h < t->H; h++) {
        AttnTileHead hd = talk_head(t, h);
        attn_tile_mask(&hd, b->r0, R, c0, wc, A + h * n);
    }
    return A;
}

/* The tile's P = exp(A - m) / l in place, from the rows' stats (st: the
 * batch element's [H, T, 2]). */
static void talk_probs(const TalkBatch *t, const AttnBlock *b, int wc, float *A, const float *st) {
    int R = b->r1 - b->r0;
    for (int h = 0; h < t->H; h++)
        for (int r = 0; r < R; r++) {
            const float *x = st + 2 * ((long)h * t->T + b->r0 + r);
            float *a = A + ((long)h * R + r) * wc, mx = x[0], inv = x[1];
            if (mx == -INFINITY) {
                memset(a, 0, sizeof *a * (size_t)wc);
                continue;
            }
            #pragma omp simd
            for (int c = 0; c < wc; c++) a[c] = fm_expf(a[c] - mx) * inv;
        }
}

/* Floats of a thread's own beside its tiles (tiles.c's S, P, D and P16 for
 * H qb rows): X [H qb, ATTN_TILE_KEYS], then [H qb] for D. */
static long talk_extra(int H, int qb) { return (long)H * qb * ATTN_TILE_KEYS + (long)H * qb; }

/* The tiles over block b's keys, c0 and wc for each. */
#define FOR_TILES(b, c0, wc)                                                                                   \
    for (int c0 = (b)->k0, wc = 0; c0 < (b)->k0 + (b)->w; c0 += ATTN_TILE_KEYS)                                \
        if ((wc = (b)->k0 + (b)->w - c0 < ATTN_TILE_KEYS ? (b)->k0 + (b)->w - c0 : ATTN_TILE_KEYS), true)

/* The rows' running max m and sum l over one more tile of A (st: the batch
 * element's [H, T, 2], holding m and l). */
static void talk_stats(const TalkBatch *t, const AttnBlock *b, int wc, const float *A, float *st) {
    int R = b->r1 - b->r0;
    for (int h = 0; h < t->H; h++)
        for (int r = 0; r < R; r++) {
            float *x = st + 2 * ((long)h * t->T + b->r0 + r), mx = x[0], sum = 0.0f;
            const float *a = A + ((long)h * R + r) * wc;
            #pragma omp simd reduction(max : mx)
            for (int c = 0; c < wc; c++) mx = a[c] > mx ? a[c] : mx;
            if (mx == -INFINITY) continue;
            #pragma omp simd reduction(+ : sum)
            for (int c = 0; c < wc; c++) sum += fm_expf(a[c] - mx);
            x[1] = x[1] * fm_expf(x[0] - mx) + sum;
            x[0] = mx;
        }
}

/* m and l of block b's rows into m and 1 / l. */
static void talk_stats_end(const TalkBatch *t, const AttnBlock *b, float *st) {
    for (int h = 0; h < t->H; h++)
        for (int i = b->r0; i < b->r1; i++) {
            float *x = st + 2 * ((long)h * t->T + i);
            x[1] = x[1] > 0.0f ? 1.0f / x[1] : 0.0f;
        }
}

static void talk_forward_block(const TalkBatch *t, const AttnBlock *b, float *st, float *out, AttnTiles *w) {
    int R = b->r1 - b->r0, H = t->H, dv = t->dv;
    bool one = b->w <= ATTN_TILE_KEYS; /* one tile: the stats and P from the same logits */
    for (int h = 0; h < H; h++)
        for (int r = 0; r < R; r++) {
            float *x = st + 2 * ((long)h * t->T + b->r0 + r);
            x[0] = -INFINITY, x[1] = 0.0f; /* m and l, then 1 / l */
            memset(out + ((long)h * t->T + b->r0 + r) * dv, 0, sizeof(float) * (size_t)dv);
        }
    if (!one) {
        FOR_TILES(b, c0, wc) talk_stats(t, b, wc, talk_logits(t, b, c0, wc, w->S, w->P), st); /* pass 1 */
        talk_stats_end(t, b, st);
    }
    FOR_TILES(b, c0, wc) { /* pass 2: P, P' and P' V */
        long n = (long)R * wc;
        float *P = talk_logits(t, b, c0, wc, w->S, w->P), *Pm = P;
        if (one) {
            talk_stats(t, b, wc, P, st);
            talk_stats_end(t, b, st);
        }
        talk_probs(t, b, wc, P, st);
        if (t->wpost) mix_tile(t->wpost, false, P, Pm = w->extra, H, n);
        attn_tile_round(w->P16, Pm, H * n);
        for (int h = 0; h < H; h++) /* O_h[rows] += P'_h V_h[keys] */
            gemm_ex(false, false, R, dv, wc, 1.0f, w->P16 + h * n, true, wc, t->v + ((long)h * t->T + c0) * dv,
                    false, dv, 1.0f, out + ((long)h * t->T + b->r0) * dv, dv, NULL);
    }
}

/* D_hi += sum_j P_hij dP_hij over one tile's [H, R, wc]. */
static void talk_row_sums(long rows, int wc, const float *P, const float *dP, float *D) {
    for (long rr = 0; rr < rows; rr++) {
        const float *p = P + rr * wc, *d = dP + rr * wc;
        float dot = 0.0f;
        #pragma omp simd reduction(+ : dot)
        for (int c = 0; c < wc; c++) dot += p[c] * d[c];
        D[rr] += dot;
    }
}

/* The gradients of one batch element: dO, O [H, T, dv] in; dq, dk, dv (NULL:
 * not wanted) and its dWpre, dWpost slots [H, H] (NULL: not wanted) added to. */
typedef struct {
    const float *dO, *O;
    float *dq, *dk, *dv, *dwpre, *dwpost;
} TalkGrads;

static void talk_backward_block(const TalkBatch *t, const AttnBlock *b, const float *st, const TalkGrads *g,
                                AttnTiles *w) {
    int R = b->r1 - b->r0, H = t->H, dk = t->dk, dv = t->dv;
    long T = t->T;
    bool need_dA = g->dq || g->dk || g->dwpre, need_dP = need_dA || g->dwpost;
    bool one = b->w <= ATTN_TILE_KEYS; /* one tile: D from the pass below */
    float *X = w->extra, *D = w->extra + (long)H * t->p->qb * ATTN_TILE_KEYS; /* D [H, R] */
    if (!t->wpost) /* D_hi = dO_hi . O_hi */
        for (int h = 0; h < H; h++)
            for (int r = 0; r < R; r++) {
                const float *y = g->dO + (h * T + b->r0 + r) * dv, *o = g->O + (h * T + b->r0 + r) * dv;
                float dot = 0.0f;
                #pragma omp simd reduction(+ : dot)
                for (int d = 0; d < dv; d++) dot += y[d] * o[d];
                D[h * R + r] = dot;
            }
    else if (need_dA) {
        memset(D, 0, sizeof *D * (size_t)H * R);
        if (!one)
            FOR_TILES(b, c0, wc) { /* D_hi = sum_j P_hij dP_hij, dP = Wpost^T (dO V^T) */
                long n = (long)R * wc;
                float *P = talk_logits(t, b, c0, wc, w->S, w->P);
                talk_probs(t, b, wc, P, st);
                for (int h = 0; h < H; h++)
                    gemm(false, true, R, wc, dv, 1.0f, g->dO + (h * T + b->r0) * dv, dv, t->v + (h * T + c0) * dv, dv,
                         0.0f, w->D + h * n, wc);
                mix_tile(t->wpost, true, w->D, X, H, n);
                talk_row_sums((long)H * R, wc, P, X, D);
            }
    }
    FOR_TILES(b, c0, wc) {
        long n = (long)R * wc;
        float *S = w->S, *P = talk_logits(t, b, c0, wc, S, w->P), *Pm = P;
        talk_probs(t, b, wc, P, st);
        if (t->wpost) mix_tile(t->wpost, false, P, Pm = X, H, n);
        if (g->dv) /* dV_h[keys] += P'_h^T dO_h[rows] */
            for (int h = 0; h < H; h++)
                gemm(true, false, wc, dv, R, 1.0f, Pm + h * n, wc, g->dO + (h * T + b->r0) * dv, dv, 1.0f,
                     g->dv + (h * T + c0) * dv, dv);
        if (!need_dP) continue;
        float *dP = w->D; /* dP'_h = dO_h V_h^T */
        for (int h = 0; h < H; h++)
            gemm(false, true, R, wc, dv, 1.0f, g->dO + (h * T + b->r0) * dv, dv, t->v + (h * T + c0) * dv, dv, 0.0f,
                 dP + h * n, wc);
        if (t->wpost) {
            if (g->dwpost) /* dWpost += dP' P^T */
                gemm(false, true, H, H, (int)n, 1.0f, dP, (int)n, P, (int)n, 1.0f, g->dwpost, H);
            if (!need_dA) continue;
            mix_tile(t->wpost, true, dP, X, H, n); /* dP = Wpost^T dP' */
            dP = X;
            if (one) talk_row_sums((long)H * R, wc, P, dP, D); /* the block's one tile: D from it */
        }
        for (int h = 0; h < H; h++) /* dA = P (dP - D) */
            for (int r = 0; r < R; r++) {
                const float *p = P + ((long)h * R + r) * wc;
                float *d = dP + ((long)h * R + r) * wc, Di = D[h * R + r];
                #pragma omp simd
                for (int c = 0; c < wc; c++) d[c] = p[c] * (d[c] - Di);
            }
        float *dS = dP;
        if (t->wpre) {
            if (g->dwpre) /* dWpre += dA S^T */
                gemm(false, true, H, H, (int)n, 1.0f, dP, (int)n, S, (int)n, 1.0f, g->dwpre, H);
            if (!g->dq && !g->dk) continue;
            dS = P; /* P is spent: dS = Wpre^T dA into it */
            mix_tile(t->wpre, true, dP, dS, H, n);
        }
        for (int h = 0; h < H; h++) {
            if (g->dq) /* dQ_h[rows] += s dS_h K_h[keys] */
                gemm(false, false, R, dk, wc, t->scale, dS + h * n, wc, t->k + (h * T + c0) * dk, dk, 1.0f,
                     g->dq + (h * T + b->r0) * dk, dk);
            if (g->dk) /* dK_h[keys] += s dS_h^T Q_h[rows] */
                gemm(true, false, wc, dk, R, t->scale, dS + h * n, wc, t->q + (h * T + b->r0) * dk, dk, 1.0f,
                     g->dk + (h * T + c0) * dk, dk);
        }
    }
}

static void talking_tiles_forward(Node *n) {
    const Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *wpre = node_wpre(n), *wpost = node_wpost(n);
    const TalkingAttrs *a = NODE_ATTRS(n, TalkingAttrs);
    int B = q->shape[0], H = q->shape[1], T = q->shape[2], dk = q->shape[3], dv = v->shape[3];
    AttnPlan p = attn_plan(T, SOFTMAX_QUERY_BLOCK, a->causal, 0, false, 0, false);
    float *scratch = attn_tiles_scratch(H * p.qb, talk_extra(H, p.qb));
    /* each (batch element, block) writes only its rows: they run in parallel */
    #pragma omp parallel for schedule(static)
    for (long j = 0; j < (long)B * p.n; j++) {
        AttnTiles w = attn_tiles_of(scratch, H * p.qb, talk_extra(H, p.qb));
        long e = j / p.n * H * T;
        TalkBatch t = {&p, H, T, dk, dv, a->scale, a->causal, q->data + e * dk, k->data + e * dk, v->data + e * dv,
                       wpre ? wpre->data : NULL, wpost ? wpost->data : NULL};
        talk_forward_block(&t, &p.b[j % p.n], n->saved + 2 * e, n->out->data + e * dv, &w);
    }
}

static void talking_tiles_backward(Node *n) {
    Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *wpre = node_wpre(n), *wpost = node_wpost(n);
    const TalkingAttrs *a = NODE_ATTRS(n, TalkingAttrs);
    int B = q->shape[0], H = q->shape[1], T = q->shape[2], dk = q->shape[3], dv = v->shape[3];
    long HH = (long)H * H;
    AttnPlan p = attn_plan(T, SOFTMAX_QUERY_BLOCK, a->causal, 0, false, 0, false);
    float *dq = q->requires_grad ? tensor_grad(q) : NULL, *dk_ = k->requires_grad ? tensor_grad(k) : NULL;
    float *dvv = v->requires_grad ? tensor_grad(v) : NULL;
    bool d_pre = wpre && wpre->requires_grad, d_post = wpost && wpost->requires_grad;
    float *dw = arena_calloc(engine_arena(), (size_t)B * 2 * HH * sizeof(float));
    int nt = batch_threads(B);
    float *scratch = attn_tiles_scratch(H * p.qb, talk_extra(H, p.qb));
    #pragma omp parallel for num_threads(nt) schedule(static)
    for (int b = 0; b < B; b++) {
        AttnTiles w = attn_tiles_of(scratch, H * p.qb, talk_extra(H, p.qb));
        long e = (long)b * H * T;
        TalkBatch t = {&p, H, T, dk, dv, a->scale, a->causal, q->data + e * dk, k->data + e * dk, v->data + e * dv,
                       wpre ? wpre->data : NULL, wpost ? wpost->data : NULL};
        TalkGrads g = {n->out->grad + e * dv,    n->out->data + e * dv,
                       dq ? dq + e * dk : NULL,  dk_ ? dk_ + e * dk : NULL,
                       dvv ? dvv + e * dv : NULL, d_pre ? dw + 2L * b * HH : NULL,
                       d_post ? dw + (2L * b + 1) * HH : NULL};
        for (int i = 0; i < p.n; i++) talk_backward_block(&t, &p.b[i], n->saved + 2 * e, &g, &w);
    }
    float *gpre = d_pre ? tensor_grad(wpre) : NULL, *gpost = d_post ? tensor_grad(wpost) : NULL;
    for (int b = 0; b < B; b++) /* the batch elements' dW, summed in order */
        for (long i = 0; i < HH; i++) {
            if (gpre) gpre[i] += dw[2L * b * HH + i];
            if (gpost) gpost[i] += dw[(2L * b + 1) * HH + i];
        }
}

static void attn_talking_forward(Node *n) {
    if (NODE_ATTRS(n, TalkingAttrs)->tiles) {
        talking_tiles_forward(n);
        return;
    }
    const Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *wpre = node_wpre(n), *wpost = node_wpost(n);
    int B = q->shape[0], H = q->shape[1], T = q->shape[2], dk = q->shape[3], dv = v->shape[3];
    long TT = (long)T * T, HTT = H * TT;
    const TalkingAttrs *a = NODE_ATTRS(n, TalkingAttrs);
    int nt = batch_threads(B);
    float *scratch = arena_alloc(engine_arena(), (size_t)nt * HTT * sizeof(float));
    #pragma omp parallel for num_threads(nt) schedule(static)
    for (int b = 0; b < B; b++) {
        float *X = scratch + omp_get_thread_num() * HTT, *P = n->saved + b * HTT;
        talking_probs(q->data + (long)b * H * T * dk, k->data + (long)b * H * T * dk, wpre ? wpre->data : NULL, P, X,
                      H, T, dk, a->scale, a->causal);
        const float *Pm = P; /* P', the matrix that multiplies V */
        if (wpost) {
            mix_heads(wpost->data, false, P, X, H, T);
            Pm = X;
        }
        for (int h = 0; h < H; h++) {
            long bh = (long)b * H + h;
            gemm(false, false, T, dv, T, 1.0f, Pm + h * TT, T,
                        v->data + bh * T * dv, dv, 0.0f, n->out->data + bh * T * dv, dv);
        }
    }
}

static void attn_talking_backward(Node *n) {
    if (NODE_ATTRS(n, TalkingAttrs)->tiles) {
        talking_tiles_backward(n);
        return;
    }
    Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *wpre = node_wpre(n), *wpost = node_wpost(n);
    int B = q->shape[0], H = q->shape[1], T = q->shape[2], dk = q->shape[3], dv = v->shape[3];
    long TT = (long)T * T, HTT = H * TT, HH = (long)H * H;
    float scale = NODE_ATTRS(n, TalkingAttrs)->scale;
    const float *dO = n->out->grad;
    float *dq = q->requires_grad ? tensor_grad(q) : NULL;
    float *dk_ = k->requires_grad ? tensor_grad(k) : NULL;
    float *dvv = v->requires_grad ? tensor_grad(v) : NULL;
    bool d_pre = wpre && wpre->requires_grad, d_post = wpost && wpost->requires_grad;
    bool need_dA = dq || dk_ || d_pre, need_dP = need_dA || d_post;
    int nt = batch_threads(B);
    /* Two [H, T, T] buffers per thread; per batch element its dWpre and dWpost. */
    float *scratch = arena_alloc(engine_arena(), (size_t)nt * 2 * HTT * sizeof(float));
    float *dw = arena_calloc(engine_arena(), (size_t)B * 2 * HH * sizeof(float));
    #pragma omp parallel for num_threads(nt) schedule(static)
    for (int b = 0; b < B; b++) {
        float *X = scratch + omp_get_thread_num() * 2 * HTT, *Y = X + HTT;
        const float *P = (const float *)n->saved + b * HTT;
        const float *qb = q->data + (long)b * H * T * dk, *kb = k->data + (long)b * H * T * dk;
        const float *vb = v->data + (long)b * H * T * dv, *dOb = dO + (long)b * H * T * dv;
        if (dvv) { /* dV_h += P'_h^T dO_h, P' = Wpost P again */
            const float *Pm = P;
            if (wpost) {
                mix_heads(wpost->data, false, P, X, H, T);
                Pm = X;
            }
            for (int h = 0; h < H; h++)
                gemm(true, false, T, dv, T, 1.0f, Pm + h * TT, T,
                            dOb + h * T * (long)dv, dv, 1.0f, dvv + ((long)b * H + h) * T * dv, dv);
        }
        if (!need_dP) continue;
        for (int h = 0; h < H; h++) /* dP'_h = dO_h V_h^T */
            gemm(false, true, T, T, dv, 1.0f, dOb + h * T * (long)dv, dv,
                        vb + h * T * (long)dv, dv, 0.0f, Y + h * TT, T);
        float *D = Y, *F = X; /* D: the gradient on its way back; F: free */
        if (wpost) {
            if (d_post) /* dWpost = dP' P^T */
                gemm(false, true, H, H, (int)TT, 1.0f, Y, (int)TT, P, (int)TT, 0.0f,
                            dw + (2L * b + 1) * HH, H);
            if (!need_dA) continue;
            mix_heads(wpost->data, true, Y, X, H, T); /* dP = Wpost^T dP' */
            D = X;
            F = Y;
        }
        attn_softmax_rows_backward(P, D, (long)H * T, T); /* dA */
        if (wpre) {
            head_scores(qb, kb, F, H, T, dk, scale); /* S again */
            if (d_pre) /* dWpre = dA S^T */
                gemm(false, true, H, H, (int)TT, 1.0f, D, (int)TT, F, (int)TT, 0.0f,
                            dw + 2L * b * HH, H);
            if (!dq && !dk_) continue;
            mix_heads(wpre->data, true, D, F, H, T); /* dS = Wpre^T dA */
            D = F;
        }
        for (int h = 0; h < H; h++) {
            long bh = (long)b * H + h;
            if (dq) /* dQ += s dS K */
                gemm(false, false, T, dk, T, scale, D + h * TT, T,
                            kb + h * T * (long)dk, dk, 1.0f, dq + bh * T * dk, dk);
            if (dk_) /* dK += s dS^T Q */
                gemm(true, false, T, dk, T, scale, D + h * TT, T,
                            qb + h * T * (long)dk, dk, 1.0f, dk_ + bh * T * dk, dk);
        }
    }
    /* The batch elements' dW, summed in order. */
    float *gpre = d_pre ? tensor_grad(wpre) : NULL, *gpost = d_post ? tensor_grad(wpost) : NULL;
    for (int b = 0; b < B; b++)
        for (long e = 0; e < HH; e++) {
            if (gpre) gpre[e] += dw[2L * b * HH + e];
            if (gpost) gpost[e] += dw[(2L * b + 1) * HH + e];
        }
}

OpDef attn_talking_op = {"attn_talking", attn_talking_forward, attn_talking_backward, 0};

/* The mixing matrices of a call: c->params holds them in declaration order,
 * talking_pre's (pre, both) then talking_post's (post, both). */
static void talking_matrices(const AttnCall *c, const Tensor *q, Tensor **pre, Tensor **post) {
    const SoftmaxOpts *o = c->opts;
    bool has_pre = o->talking_heads == TALKING_PRE || o->talking_heads == TALKING_BOTH;
    bool has_post = o->talking_heads == TALKING_POST || o->talking_heads == TALKING_BOTH;
    int i = 0;
    *pre = has_pre ? c->params[i++] : NULL;
    *post = has_post ? c->params[i++] : NULL;
    if ((has_pre && !*pre) || (has_post && !*post))
        DIE("%s: talking_heads %d without its mixing matrices in AttnCall.params", attn_talking_op.name,
            o->talking_heads);
    int H = q->shape[1];
    for (int j = 0; j < 2; j++) {
        const Tensor *w = j ? *post : *pre;
        if (w)
            SHAPE_CHECK(w->ndim == 2 && w->shape[0] == H && w->shape[1] == H, attn_talking_op.name,
                        "a mixing matrix must be [H, H] for q [B, H, T, d]", w, q);
    }
}

Tensor *attn_talking(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v) {
    attn_check_qkv(attn_talking_op.name, q, k, v);
    Tensor *pre, *post;
    talking_matrices(c, q, &pre, &post);
    Node *n = node_new(&attn_talking_op);
    n->n_in = 3;
    n->in[0] = q;
    n->in[1] = k;
    n->in[2] = v;
    if (pre) n->in[n->n_in++] = pre;
    if (post) n->in[n->n_in++] = post;
    bool tiles = gemm_precision() == PRECISION_BF16;
    *NODE_ATTRS(n, TalkingAttrs) = (TalkingAttrs){
        .scale = c->scale, .causal = c->causal, .pre = pre != NULL, .post = post != NULL, .tiles = tiles};
    int T = q->shape[2];
    /* P [B, H, T, T]; in tiles each row's max and 1 / sum [B, H, T, 2] */
    n->saved = arena_alloc(engine_arena(), (size_t)q->shape[0] * q->shape[1] * T * (tiles ? 2 : T) * sizeof(float));
    n->out = tensor_4d(q->shape[0], q->shape[1], T, v->shape[3]);
    return node_run(n);
}

/* P' [B, H, T, T]: the post-mixed matrix when there is one, as it multiplies V. */
Tensor *attn_talking_probs(const AttnCall *c, Tensor *q, Tensor *k) {
    Tensor *pre, *post;
    talking_matrices(c, q, &pre, &post);
    int B = q->shape[0], H = q->shape[1], T = q->shape[2], dk = q->shape[3];
    long HTT = (long)H * T * T;
    Tensor *out = tensor_4d(B, H, T, T);
    int nt = batch_threads(B);
    float *scratch = arena_alloc(engine_arena(), (size_t)nt * HTT * sizeof(float));
    #pragma omp parallel for num_threads(nt) schedule(static)
    for (int b = 0; b < B; b++) {
        float *X = scratch + omp_get_thread_num() * HTT, *Pb = out->data + b * HTT;
        const float *qb = q->data + (long)b * H * T * dk, *kb = k->data + (long)b * H * T * dk;
        if (post) { /* P into the scratch, then P' = Wpost P */
            talking_probs(qb, kb, pre ? pre->data : NULL, X, Pb, H, T, dk, c->scale, c->causal);
            mix_heads(post->data, false, X, Pb, H, T);
        } else {
            talking_probs(qb, kb, pre->data, Pb, X, H, T, dk, c->scale, c->causal);
        }
    }
    return out;
}

/* ---- the parameters ---------------------------------------------------------- */

void talking_declare(ParamSet *p, const char *prefix, int talking_heads, int H, Tensor **params) {
    char buf[128];
    int i = 0;
    if (talking_heads == TALKING_PRE || talking_heads == TALKING_BOTH)
        params[i++] = params_add(p, param_name(buf, prefix, "talking_pre.weight"), 2, (int[]){H, H});
    if (talking_heads == TALKING_POST || talking_heads == TALKING_BOTH)
        params[i++] = params_add(p, param_name(buf, prefix, "talking_post.weight"), 2, (int[]){H, H});
}

void talking_init(Tensor **params) {
    for (int i = 0; i < ATTN_MAX_PARAMS && params[i]; i++) {
        Tensor *w = params[i];
        for (long e = 0; e < w->n; e++) w->data[e] = e / w->shape[1] == e % w->shape[1] ? 1.0f : 0.0f;
    }
}
