/* softmax_op.c: the softmax kernel's plain op, attn_softmax: scaled
 * dot-product attention (Vaswani et al. 2017) with the positions that act on
 * the scores (sliding windows, XPOS's blockwise causal attention, log-n
 * scaling and the position schemes' score biases, PosScheme.bias), as one fused op
 * with a hand-written backward. The kernel (softmax.c) runs it unless
 * talking_heads is set (talking.c).
 *
 * Per batch element and head, with s = 1 / sqrt(key_size):
 *   S = s Q K^T,  P = softmax(S + mask),  O = P V
 * where the causal mask removes keys j > i. Backward, from P:
 *   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dP * P)),
 *   dQ = s dS K,  dK = s dS^T Q.
 * P itself is not kept: the op runs in blocks of query rows over each row's
 * keys only, and backward computes each block's P again (below). Heads run in
 * parallel on OpenMP threads; inside a parallel region OpenBLAS runs each
 * sgemm on its calling thread, so there is one pool.
 *
 * Dimensions: q, k [B, H, T, dk], v and the output [B, H, T, dv]. */
#include "gemm.h"
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "attention/positions.h"
#include "attention/softmax.h"
#include "fastmath.h"
#include "op_kernel.h"
#include "softmax_parts.h"
#include "tiles.h"
#include "util.h"

/* ---- the rows' keys and the blocks ------------------------------------------
 *
 * Query i sees keys [lo_i, hi_i]: all of them (bidirectional), j <= i
 * (causal); with window = W > 0 those at distance |i - j| < W (the last W
 * keys when causal, up to W - 1 on each side when bidirectional); or under
 * bca (XPOS's blockwise causal attention, causal) its block of
 * b = max(1, context / 2) keys and the one before,
 * lo_i = max(0, (i / b - 1) b), hi_i = i. Bca is a causal mask: a
 * bidirectional call ignores it (config_validate refuses it with
 * objective = mlm). With
 * n_i = hi_i - lo_i + 1 keys seen, the logits are
 *   z_ij = lambda_i s q_i . k_j + b_h(i - j),
 * lambda_i = max(1, log n_i / log context) under logn (else 1): log-n scaling
 * multiplies the dot-product logits only; the position bias b_h of
 * its position scheme (PosScheme.bias; 0 without one) is added unscaled after it.
 *
 * Queries run in blocks of SoftmaxOpts.query_block rows (64 unless a test
 * sets it); a block [r0, r1) needs keys [lo_r0, hi_(r1-1)] (lo and hi never
 * decrease along i), so it costs one score sgemm, the masked softmax of each
 * row over its own range, and one P V sgemm. Nothing T x T is kept (as FlashAttention-2): forward keeps each
 * row's max and 1 / sum, and backward computes each block's P again from
 * them, with the same operations on the same scores, so the same bits as
 * forward's. Memory is O(T) per head plus one block per thread; time is
 * O(T (window + block)) with a window, and causal attention skips the blocks
 * above the diagonal. Backward, per block, with dz = P * (dP - rowsum(dP * P)):
 *   dV[span] += P^T dO,  dP = dO V[span]^T,
 *   g_h[delta] += dz (the bias's gradient, by distance, per batch element and head),
 *   dQ += s (lambda dz) K[span],  dK[span] += s (lambda dz)^T Q.
 * Heads run in parallel; each (b, h) writes only its own rows and its own g
 * slot, and the slots are summed in order afterwards, so the result does not
 * depend on the thread count. Without gradients nothing is kept: each thread
 * works in one block's scratch. */

/* The plan of the node's call, in the arena. */
static AttnPlan plan_make(const Node *n, int T) {
    const SoftmaxAttrs *a = NODE_ATTRS(n, SoftmaxAttrs);
    return attn_plan(T, a->qb, a->causal, a->window, a->bca, a->context, a->logn);
}

/* The same row again from its kept max and 1 / sum: the same operations on
 * the same scores, so the same bits as forward's P. */
static void row_softmax_again(float *restrict s, int n, float mx, float inv) {
    if (mx == -INFINITY) {
        for (int i = 0; i < n; i++) s[i] = 0.0f;
        return;
    }
    #pragma omp simd
    for (int i = 0; i < n; i++) s[i] = fm_expf(s[i] - mx);
    #pragma omp simd
    for (int i = 0; i < n; i++) s[i] *= inv;
}

/* P of block b of one head into Pb [r1 - r0, w]: scores, log-n, bias, masked
 * softmax. q, k are the head's [T, dk]; bias its table [T] (NULL: none).
 * stats (NULL: not kept) is the head's [T, 2]: each row's max and 1 / sum,
 * written by forward (again false) and read back by backward (again true),
 * which so recomputes forward's P instead of keeping it. */
static void block_probs(const AttnPlan *p, const AttnBlock *b, const float *q, const float *k, const float *bias,
                        float *Pb, int dk, float scale, bool causal, float *stats, bool again) {
    attn_block_scores(p, b, q, k, dk, scale, bias, causal, Pb);
    for (int r = 0; r < b->r1 - b->r0; r++) {
        int i = b->r0 + r, a = p->lo[i] - b->k0, e = p->hi[i] - b->k0 + 1; /* the row's keys [a, e) */
        float *s = Pb + (long)r * b->w;
        for (int c = 0; c < a; c++) s[c] = 0.0f;
        if (!stats)
            softmax_inplace(s + a, e - a);
        else if (again)
            row_softmax_again(s + a, e - a, stats[2 * i], stats[2 * i + 1]);
        else
            softmax_inplace_stats(s + a, e - a, &stats[2 * i], &stats[2 * i + 1]);
        for (int c = e; c < b->w; c++) s[c] = 0.0f;
    }
}

/* What the node's position scheme's bias hooks get: sizes, the config (in
 * forward; NULL in backward, where the table is forward's) and the values
 * of its learned parameters (the node's inputs from in[3]). */
static PosBias node_pos_bias(const Node *n, int H, int T, int dk, bool forward) {
    const SoftmaxAttrs *a = NODE_ATTRS(n, SoftmaxAttrs);
    PosBias b = {.H = H, .T = T, .dk = dk, .cfg = forward ? a->cfg : NULL};
    for (int i = 0; i < pos_param_count(a->pos); i++) b.params[i] = n->in[3 + i]->data;
    return b;
}

/* The bias table [H, T] of the node's call into the saved buffer's head;
 * NULL without a bias. */
static float *node_bias(const Node *n, int H, int T, int dk) {
    const PosScheme *s = pos_scheme(NODE_ATTRS(n, SoftmaxAttrs)->pos);
    if (!s->bias) return NULL;
    PosBias b = node_pos_bias(n, H, T, dk, true);
    s->bias(&b, n->saved);
    return n->saved;
}

static long bias_floats(int pos, int H, int T) { return pos_scheme(pos)->bias ? (long)H * T : 0; }

/* ---- bf16: a block in tiles of keys (flash-style) ---------------------------
 *
 * Under precision bf16 a block of query rows runs over its keys
 * ATTN_TILE_KEYS at a time (tiles.c, shared with score-map attention), the
 * softmax as its rule. Forward keeps a running max m and sum l per row
 * (online softmax): per tile, P~ = exp(S - m_new), which the tiles round to
 * bf16 for P V, and the output's accumulator and l are rescaled by
 * exp(m_old - m_new); at the end O = acc / l, and the stats are (m, 1 / l)
 * as the fp32 path keeps them. Backward makes each tile's P = exp(S - m) / l
 * again and takes the softmax's row sum as D_i = dO_i . O_i (= sum_j P_ij
 * dP_ij), so no row is needed whole: dz = P (dP - D_i). The sums run in
 * another order than the fp32 path's (and D uses forward's O), so bf16 is
 * held to the error analysis (tests/test_bf16.c), not to fp32's bits; fp32
 * runs as above. */

int attn_flash_fault;

/* A thread's rows of the rule: m and l [qb] (backward: l holds D_i), the
 * head's stats [T, 2] (backward reads them). */
typedef struct {
    float *m, *l;
    const float *stats;
} SoftmaxTiles;

static float softmax_tile_forward(void *ctx, int r, int i, float *z, int lo, int e, int wc) {
    (void)i, (void)lo, (void)e;
    SoftmaxTiles *x = ctx;
    float mx = x->m[r];
    #pragma omp simd reduction(max : mx)
    for (int c = 0; c < wc; c++) mx = z[c] > mx ? z[c] : mx;
    if (mx == -INFINITY) { /* no key of the row yet */
        memset(z, 0, sizeof *z * (size_t)wc);
        return 1.0f;
    }
    float alpha = fm_expf(x->m[r] - mx), sum = 0.0f; /* 0 when m was -inf */
    #pragma omp simd reduction(+ : sum)
    for (int c = 0; c < wc; c++) {
        float p = fm_expf(z[c] - mx);
        sum += p;
        z[c] = p;
    }
    x->l[r] = x->l[r] * alpha + sum;
    x->m[r] = mx;
    return attn_flash_fault == 1 ? 1.0f : alpha;
}

static void softmax_tile_again(void *ctx, int r, int i, const float *z, float *p, int lo, int e, int wc) {
    (void)r, (void)lo, (void)e;
    const SoftmaxTiles *x = ctx;
    float mx = x->stats[2 * i], inv = x->stats[2 * i + 1];
    if (mx == -INFINITY) {
        memset(p, 0, sizeof *p * (size_t)wc);
        return;
    }
    #pragma omp simd
    for (int c = 0; c < wc; c++) p[c] = fm_expf(z[c] - mx) * inv;
}

static void softmax_tile_grad(void *ctx, int r, int i, const float *z, const float *p, float *d, int lo, int e,
                              int wc) {
    (void)i, (void)z, (void)lo, (void)e;
    float Di = ((const SoftmaxTiles *)ctx)->l[r];
    #pragma omp simd
    for (int c = 0; c < wc; c++) d[c] = p[c] * (d[c] - Di); /* dz; 0 where P is */
}

static const AttnTileRule softmax_tiles = {softmax_tile_forward, softmax_tile_again, softmax_tile_grad};

/* Floats of a thread's own beside its tiles: the accumulator [qb, dv], m, l. */
static long softmax_tile_extra(int qb, int dv) { return (long)qb * dv + 2L * qb; }

static void flash_forward_block(const AttnTileHead *h, const AttnBlock *b, float *stats, float *oh, AttnTiles *t) {
    int R = b->r1 - b->r0, dv = h->dv, qb = h->p->qb;
    float *acc = t->extra;
    SoftmaxTiles x = {.m = acc + (long)qb * dv, .l = acc + (long)qb * dv + qb};
    for (int r = 0; r < R; r++) x.m[r] = -INFINITY, x.l[r] = 0.0f;
    attn_tiles_forward(h, b, &softmax_tiles, &x, t, acc, dv);
    for (int r = 0; r < R; r++) {
        int i = b->r0 + r;
        float inv = x.l[r] > 0.0f ? 1.0f / x.l[r] : 0.0f;
        const float *a = acc + (long)r * dv;
        float *o = oh + (long)i * dv;
        #pragma omp simd
        for (int d = 0; d < dv; d++) o[d] = a[d] * inv;
        if (stats) stats[2 * i] = x.m[r], stats[2 * i + 1] = inv;
    }
}

static void flash_backward_block(const AttnTileHead *h, const AttnBlock *b, const AttnTileGrads *g, const float *oh,
                                 const float *stats, AttnTiles *t) {
    int R = b->r1 - b->r0, dv = h->dv;
    SoftmaxTiles x = {.l = t->extra, .stats = stats};
    const float *dO = (const float *)attn_rows_at(g->dO, b->r0);
    for (int r = 0; r < R; r++) { /* D_i = dO_i . O_i */
        const float *y = dO + (long)r * g->dO.ld, *o = oh + (long)(b->r0 + r) * dv;
        float dot = 0.0f;
        #pragma omp simd reduction(+ : dot)
        for (int d = 0; d < dv; d++) dot += y[d] * o[d];
        x.l[r] = attn_flash_fault == 2 ? 0.0f : dot;
    }
    attn_tiles_backward(h, b, &softmax_tiles, &x, g, t);
}

static void attn_softmax_forward(Node *n) {
    const Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    int H = q->shape[1], BH = q->shape[0] * H, T = q->shape[2], dk = q->shape[3], dv = v->shape[3];
    const SoftmaxAttrs *a = NODE_ATTRS(n, SoftmaxAttrs);
    float scale = a->scale;
    bool causal = a->causal, keep = a->keep;
    AttnPlan p = plan_make(n, T);
    const float *bias = node_bias(n, H, T, dk);
    float *stats = keep ? n->saved + bias_floats(a->pos, H, T) : NULL;
    if (a->flash) {
        float *tiles = attn_tiles_scratch(p.qb, softmax_tile_extra(p.qb, dv));
        uint32_t *packs = attn_tile_packs(k, v);
        #pragma omp parallel for
        for (int bh = 0; bh < BH; bh++) {
            AttnTiles t = attn_tiles_of(tiles, p.qb, softmax_tile_extra(p.qb, dv));
            AttnTileHead h = attn_tile_head(&p, q, k, v, bh, scale, bias ? bias + (long)(bh % H) * T : NULL, causal);
            AttnTilePack pack;
            attn_tile_pack(packs, k, v, bh, true, &pack, &h);
            for (int b = 0; b < p.n; b++)
                flash_forward_block(&h, &p.b[b], stats ? stats + 2L * bh * T : NULL, n->out->data + (long)bh * T * dv,
                                    &t);
        }
        attn_tile_packs_done(packs, k, v);
        return;
    }
    float *scratch = attn_block_scratch(&p, 1);
    #pragma omp parallel for
    for (int bh = 0; bh < BH; bh++) {
        const float *qh = q->data + (long)bh * T * dk, *kh = k->data + (long)bh * T * dk;
        const float *vh = v->data + (long)bh * T * dv;
        const float *bias_h = bias ? bias + (long)(bh % H) * T : NULL;
        float *oh = n->out->data + (long)bh * T * dv;
        for (int b = 0; b < p.n; b++) {
            const AttnBlock *blk = &p.b[b];
            float *Pb = attn_thread_block(scratch, &p, 1, 0);
            block_probs(&p, blk, qh, kh, bias_h, Pb, dk, scale, causal, stats ? stats + 2L * bh * T : NULL, false);
            /* O[r0:r1] = P V[span] */
            gemm(false, false, blk->r1 - blk->r0, dv, blk->w, 1.0f, Pb, blk->w,
                        vh + (long)blk->k0 * dv, dv, 0.0f, oh + (long)blk->r0 * dv, dv);
        }
    }
}

static void attn_softmax_backward(Node *n) {
    Tensor *q = n->in[0], *k = n->in[1];
    int H = q->shape[1], BH = q->shape[0] * H, T = q->shape[2], dk = q->shape[3];
    const SoftmaxAttrs *a = NODE_ATTRS(n, SoftmaxAttrs);
    const PosScheme *scheme = pos_scheme(a->pos);
    int n_params = pos_param_count(a->pos);
    bool causal = a->causal;
    AttnPlan p = plan_make(n, T);
    AttnGrad ag = attn_grad_of(n, a->scale);
    float *stats = n->saved + bias_floats(a->pos, H, T);
    const float *bias = scheme->bias ? n->saved : NULL; /* forward's bias table */
    bool d_bias = false;
    for (int i = 0; i < n_params; i++) d_bias |= n->in[3 + i]->requires_grad;
    double *g = d_bias ? arena_calloc(engine_arena(), (size_t)BH * T * sizeof(double)) : NULL;
    if (a->flash) {
        int dv = ag.v->shape[3];
        float *tiles = attn_tiles_scratch(p.qb, softmax_tile_extra(p.qb, dv));
        uint32_t *packs = attn_tile_packs(k, ag.v);
        #pragma omp parallel for
        for (int bh = 0; bh < BH; bh++) {
            AttnTiles t = attn_tiles_of(tiles, p.qb, softmax_tile_extra(p.qb, dv));
            AttnTileHead h = attn_tile_head(&p, q, k, ag.v, bh, a->scale, bias ? bias + (long)(bh % H) * T : NULL,
                                            causal);
            AttnTilePack pack;
            attn_tile_pack(packs, k, ag.v, bh, false, &pack, &h); /* backward's products read v as it is */
            AttnTileGrads tg = attn_tile_grads(&ag, bh, g ? g + (long)bh * T : NULL);
            for (int b = 0; b < p.n; b++)
                flash_backward_block(&h, &p.b[b], &tg, n->out->data + (long)bh * T * dv, stats + 2L * bh * T, &t);
        }
        attn_tile_packs_done(packs, k, ag.v);
    } else {
        /* One block's P again and its dP, then dz in place, per thread; per (b, h) its g. */
        float *scratch = attn_block_scratch(&p, 1), *scratch_p = attn_block_scratch(&p, 1);
        #pragma omp parallel for
        for (int bh = 0; bh < BH; bh++) {
            const float *qh = q->data + (long)bh * T * dk, *kh = k->data + (long)bh * T * dk;
            const float *bias_h = bias ? bias + (long)(bh % H) * T : NULL;
            float *dS = attn_thread_block(scratch, &p, 1, 0), *Pb = attn_thread_block(scratch_p, &p, 1, 0);
            double *gh = g ? g + (long)bh * T : NULL;
            for (int b = 0; b < p.n; b++) {
                const AttnBlock *blk = &p.b[b];
                int R = blk->r1 - blk->r0, w = blk->w;
                block_probs(&p, blk, qh, kh, bias_h, Pb, dk, a->scale, causal, stats + 2L * bh * T, true);
                if (!attn_grad_pv(&ag, bh, blk->r0, R, blk->k0, w, Pb, dS, gh != NULL)) continue;
                attn_softmax_rows_backward(Pb, dS, R, w); /* dz; 0 where P is */
                for (int r = 0; r < R; r++) {
                    int i = blk->r0 + r, lo = p.lo[i] - blk->k0, e = p.hi[i] - blk->k0 + 1;
                    float *d = dS + (long)r * w, l = p.lambda[i];
                    if (gh)
                        for (int c = lo; c < e; c++) {
                            int dist = i - (blk->k0 + c);
                            gh[causal ? dist : dist < 0 ? -dist : dist] += d[c];
                        }
                    if (l != 1.0f)
                        for (int c = lo; c < e; c++) d[c] *= l; /* z = lambda s q.k + b */
                }
                attn_grad_qk(&ag, bh, blk->r0, R, blk->k0, w, dS);
            }
        }
    }
    if (!g) return;
    /* g_h = sum over the batch of the (b, h) slots, in order */
    double *gsum = arena_calloc(engine_arena(), (size_t)H * T * sizeof(double));
    for (int bh = 0; bh < BH; bh++)
        for (int d = 0; d < T; d++) gsum[(long)(bh % H) * T + d] += g[(long)bh * T + d];
    PosBias b = node_pos_bias(n, H, T, dk, false);
    float *dp[POS_MAX_PARAMS] = {NULL};
    for (int i = 0; i < n_params; i++) dp[i] = n->in[3 + i]->requires_grad ? tensor_grad(n->in[3 + i]) : NULL;
    scheme->param_grads(&b, gsum, dp);
}

/* q, k, v may be stored in bf16 on the key tiles' path (flash: precision
 * bf16), which reads them through products alone; plain_node refuses them
 * otherwise. */
OpDef attn_softmax_op = {"attn_softmax", attn_softmax_forward, attn_softmax_backward, .in16 = 7u};

/* The node of a call, its inputs and attributes set, nothing run. */
static Node *plain_node(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v) {
    attn_check_qkv(attn_softmax_op.name, q, k, v);
    Node *n = node_new(&attn_softmax_op);
    n->n_in = 3;
    n->in[0] = q;
    n->in[1] = k;
    n->in[2] = v;
    int H = q->shape[1];
    for (int i = 0; i < pos_param_count(c->cfg->pos); i++) {
        Tensor *w = c->params[i];
        if (!w) DIE("%s: pos=%s without its parameters in AttnCall.params", attn_softmax_op.name, pos_name(c->cfg->pos));
        SHAPE_CHECK(w->ndim == 1 && w->shape[0] == H, attn_softmax_op.name,
                    "a position parameter must be [H] for q [B, H, T, d]", w, q);
        n->in[n->n_in++] = w;
    }
    bool causal = c->causal;
    int qb = ((const SoftmaxOpts *)c->opts)->query_block;
    *NODE_ATTRS(n, SoftmaxAttrs) = (SoftmaxAttrs){
        .scale = c->scale,
        .pos = c->cfg->pos,
        .cfg = c->cfg,
        .causal = causal,
        .window = c->cfg->window,
        .bca = causal && c->cfg->bca,
        .logn = c->cfg->logn,
        .context = c->cfg->context,
        .qb = qb > 0 && qb < 1 << 14 ? qb : SOFTMAX_QUERY_BLOCK,
        .flash = gemm_precision() == PRECISION_BF16,
    };
    if (!NODE_ATTRS(n, SoftmaxAttrs)->flash)
        for (int i = 0; i < 3; i++)
            if (tensor_is16(n->in[i]))
                DIE("%s: q, k, v stored in bf16 need precision bf16's key tiles (the fp32 blocks read floats)",
                    attn_softmax_op.name);
    return n;
}

Tensor *attn_softmax_plain(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v) {
    Node *n = plain_node(c, q, k, v);
    bool keep = false;
    for (int i = 0; i < n->n_in; i++) keep |= n->in[i]->requires_grad;
    keep = keep && grad_enabled();
    NODE_ATTRS(n, SoftmaxAttrs)->keep = keep; /* forward keeps each row's max and 1 / sum for backward */
    int H = q->shape[1], T = q->shape[2];
    long floats = bias_floats(c->cfg->pos, H, T) + (keep ? 2L * q->shape[0] * H * T : 0);
    n->saved = arena_alloc(engine_arena(), (size_t)(floats + 1) * sizeof(float));
    n->out = tensor_4d(q->shape[0], H, T, v->shape[3]);
    return node_run(n);
}

/* P [B, H, T, T], zeros outside each row's keys: the blocks of forward laid
 * into the full matrix. */
Tensor *attn_softmax_plain_probs(const AttnCall *c, Tensor *q, Tensor *k) {
    int H = q->shape[1], BH = q->shape[0] * H, T = q->shape[2], dk = q->shape[3];
    Node *n = plain_node(c, q, k, q);
    (void)tensor_f32(q, "attn_softmax probs"), (void)tensor_f32(k, "attn_softmax probs"); /* block_probs reads floats */
    AttnPlan p = plan_make(n, T);
    n->saved = arena_alloc(engine_arena(), (size_t)(bias_floats(c->cfg->pos, H, T) + 1) * sizeof(float));
    const float *bias = node_bias(n, H, T, dk);
    Tensor *P = tensor_zeros(4, (int[]){q->shape[0], H, T, T});
    float *scratch = attn_block_scratch(&p, 1);
    #pragma omp parallel for
    for (int bh = 0; bh < BH; bh++) {
        float *Pb = attn_thread_block(scratch, &p, 1, 0);
        for (int b = 0; b < p.n; b++) {
            const AttnBlock *blk = &p.b[b];
            block_probs(&p, blk, q->data + (long)bh * T * dk, k->data + (long)bh * T * dk,
                        bias ? bias + (long)(bh % H) * T : NULL, Pb, dk, c->scale, c->causal, NULL, false);
            attn_block_store(P->data + (long)bh * T * T, blk, Pb, T);
        }
    }
    return P;
}
