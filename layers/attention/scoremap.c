/* scoremap.c: score-map attention (scoremap.h).
 *
 * Query i sees keys [lo_i, hi_i] under the masks, and its logits are
 *   z_ij = lambda_i s q_i . k_j + b_h(i - j)
 * as in the softmax kernel (softmax.c gives the rules for causal, window, bca
 * and logn; the position scheme the bias b, PosScheme.bias). P = f(z) on those keys and 0 elsewhere.
 * Queries run in blocks of AttnCall.query_block rows (64 by default); a block [r0, r1) needs the
 * keys [lo_r0, hi_(r1-1)], so it costs one score sgemm and one P V sgemm.
 * Because f acts on each score alone, nothing is kept for backward: backward
 * computes each block's z and P again from q and k, the same operations on
 * the same inputs, so the same bits as forward's. Per block, backward does
 *   dV[span] += P^T dO,  dP = dO V[span]^T,  dz = f'(z) dP,
 *   dQ += s (lambda dz) K[span],  dK[span] += s (lambda dz)^T Q.
 * Memory is O(T) per head plus a few blocks per thread. Heads run in parallel;
 * each (b, h) writes only its own rows. */
#include "scoremap.h"

#include "gemm.h"

#include "attention/positions.h"
#include "op_kernel.h"
#include "softmax_parts.h"
#include "tiles.h"

typedef struct {
    const ScoreMap *f;
    float scale;
    int window, context, qb;
    bool causal, bca, logn;
    bool tiles; /* bf16: each block in tiles of keys (tiles.c) */
} ScoreMapAttrs;
NODE_ATTRS_DECLARE(ScoreMapAttrs);

/* The plan of a call (attn_plan) and its bias table [H, T] (NULL without a
 * bias), made once per call (bias_table) and kept for backward. */
typedef struct {
    AttnPlan rows;
    const float *bias;
} Plan;

static Plan plan_make(const ScoreMapAttrs *a, const float *bias, int T) {
    return (Plan){attn_plan(T, a->qb, a->causal, a->window, a->bca, a->context, a->logn), bias};
}

/* The position scheme's bias table [H, T] for q [B, H, T, dk] under c, from
 * the arena; NULL without a bias. */
static float *bias_table(const AttnCall *c, const Tensor *q) {
    const PosScheme *s = pos_scheme(c->cfg->pos);
    if (!s->bias) return NULL;
    int H = q->shape[1], T = q->shape[2];
    float *table = arena_alloc(engine_arena(), (size_t)H * T * sizeof(float));
    s->bias(&(PosBias){.H = H, .T = T, .dk = q->shape[3], .cfg = c->cfg}, table);
    return table;
}

/* Head bh's row of the bias table, or NULL. */
static const float *head_bias(const Plan *p, int bh, int H) { return p->bias ? p->bias + (long)(bh % H) * p->rows.T : NULL; }

/* The block's logits z into Z and P = f(z) into P [r1 - r0, w] (P may be Z),
 * 0 outside each row's keys. q, k are the head's [T, dk]; bias its [T]. */
static void block_map(const ScoreMapAttrs *a, const AttnPlan *p, const AttnBlock *b, const float *q, const float *k,
                      const float *bias, float *Z, float *P, int dk) {
    attn_block_scores(p, b, q, k, dk, a->scale, bias, a->causal, Z);
    for (int r = 0; r < b->r1 - b->r0; r++) {
        int i = b->r0 + r, lo = p->lo[i] - b->k0, e = p->hi[i] - b->k0 + 1; /* the row's keys [lo, e) */
        float *z = Z + (long)r * b->w, *pr = P + (long)r * b->w;
        a->f->map(z + lo, pr + lo, e - lo, p->T);
        for (int c = 0; c < lo; c++) pr[c] = z[c] = 0.0f;
        for (int c = e; c < b->w; c++) pr[c] = z[c] = 0.0f;
    }
}

/* ---- bf16: the blocks in tiles of keys (tiles.c) ----------------------------
 *
 * Under precision bf16 each block runs over its keys ATTN_TILE_KEYS at a
 * time, with f as the tiles' rule: f needs no running max, so a tile's P is
 * final as it is made (rounded to bf16 for P V) and the output is the
 * accumulator itself. Backward makes each tile's z and P again. The products
 * run on the same rounded inputs as the blocks' would, in another order of
 * sums over the keys, so bf16 is held to the error analysis
 * (tests/test_bf16.c). */

/* The rule's context: the map and the sequence length it is told. */
typedef struct {
    const ScoreMap *f;
    int T;
} MapTiles;

static float map_tile_forward(void *ctx, int r, int i, float *z, int lo, int e, int wc) {
    (void)r, (void)i;
    const MapTiles *a = ctx;
    if (e > lo) a->f->map(z + lo, z + lo, e - lo, a->T);
    for (int c = 0; c < lo; c++) z[c] = 0.0f;
    for (int c = e; c < wc; c++) z[c] = 0.0f;
    return 1.0f;
}

static void map_tile_again(void *ctx, int r, int i, const float *z, float *p, int lo, int e, int wc) {
    (void)r, (void)i;
    const MapTiles *a = ctx;
    if (e > lo) a->f->map(z + lo, p + lo, e - lo, a->T);
    for (int c = 0; c < lo; c++) p[c] = 0.0f;
    for (int c = e; c < wc; c++) p[c] = 0.0f;
}

static void map_tile_grad(void *ctx, int r, int i, const float *z, const float *p, float *d, int lo, int e, int wc) {
    (void)r, (void)i;
    const MapTiles *a = ctx;
    if (e > lo) a->f->grad(z + lo, p + lo, d + lo, e - lo, a->T);
    for (int c = 0; c < lo; c++) d[c] = 0.0f;
    for (int c = e; c < wc; c++) d[c] = 0.0f;
}

static const AttnTileRule map_tiles = {map_tile_forward, map_tile_again, map_tile_grad};

static void tiles_forward(Node *n, const ScoreMapAttrs *a, const Plan *p) {
    const Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    int H = q->shape[1], BH = q->shape[0] * H, T = q->shape[2], dv = v->shape[3];
    float *scratch = attn_tiles_scratch(p->rows.qb, 0);
    #pragma omp parallel for
    for (int bh = 0; bh < BH; bh++) {
        AttnTiles t = attn_tiles_of(scratch, p->rows.qb, 0);
        MapTiles x = {a->f, p->rows.T};
        AttnTileHead h = attn_tile_head(&p->rows, q, k, v, bh, a->scale, head_bias(p, bh, H), a->causal);
        float *oh = n->out->data + (long)bh * T * dv;
        for (int i = 0; i < p->rows.n; i++) {
            const AttnBlock *b = &p->rows.b[i];
            attn_tiles_forward(&h, b, &map_tiles, &x, &t, oh + (long)b->r0 * dv, dv);
        }
    }
}

static void tiles_backward(Node *n, const ScoreMapAttrs *a, const Plan *p) {
    const Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    int H = q->shape[1], BH = q->shape[0] * H;
    AttnGrad g = attn_grad_of(n, a->scale);
    float *scratch = attn_tiles_scratch(p->rows.qb, 0);
    #pragma omp parallel for
    for (int bh = 0; bh < BH; bh++) {
        AttnTiles t = attn_tiles_of(scratch, p->rows.qb, 0);
        MapTiles x = {a->f, p->rows.T};
        AttnTileHead h = attn_tile_head(&p->rows, q, k, v, bh, a->scale, head_bias(p, bh, H), a->causal);
        AttnTileGrads tg = attn_tile_grads(&g, bh, NULL);
        for (int i = 0; i < p->rows.n; i++) attn_tiles_backward(&h, &p->rows.b[i], &map_tiles, &x, &tg, &t);
    }
}

static void scoremap_forward(Node *n) {
    const Tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    const ScoreMapAttrs *a = NODE_ATTRS(n, ScoreMapAttrs);
    int H = q->shape[1], BH = q->shape[0] * H, T = q->shape[2], dk = q->shape[3], dv = v->shape[3];
    Plan p = plan_make(a, n->saved, T);
    if (a->tiles) {
        tiles_forward(n, a, &p);
        return;
    }
    float *scratch = attn_block_scratch(&p.rows, 1);
    #pragma omp parallel for
    for (int bh = 0; bh < BH; bh++) {
        const float *qh = q->data + (long)bh * T * dk, *kh = k->data + (long)bh * T * dk;
        const float *vh = v->data + (long)bh * T * dv;
        float *Pb = attn_thread_block(scratch, &p.rows, 1, 0), *oh = n->out->data + (long)bh * T * dv;
        for (int i = 0; i < p.rows.n; i++) {
            const AttnBlock *b = &p.rows.b[i];
            block_map(a, &p.rows, b, qh, kh, head_bias(&p, bh, H), Pb, Pb, dk);
            /* O[r0:r1] = P V[span] */
            gemm(false, false, b->r1 - b->r0, dv, b->w, 1.0f, Pb, b->w, vh + (long)b->k0 * dv, dv, 0.0f,
                 oh + (long)b->r0 * dv, dv);
        }
    }
}

/* dz of one block in place of dP: f'(z) dP on each row's keys, times lambda. */
static void block_grad(const ScoreMapAttrs *a, const AttnPlan *p, const AttnBlock *b, const float *Z, const float *P,
                       float *D) {
    for (int r = 0; r < b->r1 - b->r0; r++) {
        int i = b->r0 + r, lo = p->lo[i] - b->k0, e = p->hi[i] - b->k0 + 1;
        float *d = D + (long)r * b->w;
        a->f->grad(Z + (long)r * b->w + lo, P + (long)r * b->w + lo, d + lo, e - lo, p->T);
        for (int c = lo; c < e; c++) d[c] *= p->lambda[i];
        for (int c = 0; c < lo; c++) d[c] = 0.0f;
        for (int c = e; c < b->w; c++) d[c] = 0.0f;
    }
}

static void scoremap_backward(Node *n) {
    const Tensor *q = n->in[0], *k = n->in[1];
    const ScoreMapAttrs *a = NODE_ATTRS(n, ScoreMapAttrs);
    int H = q->shape[1], BH = q->shape[0] * H, T = q->shape[2], dk = q->shape[3];
    Plan p = plan_make(a, n->saved, T);
    if (a->tiles) {
        tiles_backward(n, a, &p);
        return;
    }
    AttnGrad g = attn_grad_of(n, a->scale);
    float *scratch = attn_block_scratch(&p.rows, 3);
    #pragma omp parallel for
    for (int bh = 0; bh < BH; bh++) {
        const float *qh = q->data + (long)bh * T * dk, *kh = k->data + (long)bh * T * dk;
        float *Z = attn_thread_block(scratch, &p.rows, 3, 0), *Pb = attn_thread_block(scratch, &p.rows, 3, 1);
        float *D = attn_thread_block(scratch, &p.rows, 3, 2);
        for (int i = 0; i < p.rows.n; i++) {
            const AttnBlock *b = &p.rows.b[i];
            block_map(a, &p.rows, b, qh, kh, head_bias(&p, bh, H), Z, Pb, dk);
            if (!attn_grad_pv(&g, bh, b->r0, b->r1 - b->r0, b->k0, b->w, Pb, D, false)) continue;
            block_grad(a, &p.rows, b, Z, Pb, D); /* dz in place of dP */
            attn_grad_qk(&g, bh, b->r0, b->r1 - b->r0, b->k0, b->w, D);
        }
    }
}

OpDef scoremap_op = {"attn_scoremap", scoremap_forward, scoremap_backward, 0};

static ScoreMapAttrs call_attrs(const ScoreMap *f, const AttnCall *c) {
    if (pos_param_count(c->cfg->pos))
        DIE("%s: pos=%s has learned parameters (scoremap_validate refuses it)", scoremap_op.name, pos_name(c->cfg->pos));
    return (ScoreMapAttrs){
        .f = f,
        .scale = c->scale,
        .window = c->cfg->window,
        .context = c->cfg->context,
        .qb = c->query_block > 0 && c->query_block < 1 << 14 ? c->query_block : 64,
        .causal = c->causal,
        .bca = c->causal && c->cfg->bca,
        .logn = c->cfg->logn,
        .tiles = gemm_precision() == PRECISION_BF16,
    };
}

Tensor *scoremap_attention(const ScoreMap *f, const AttnCall *c, Tensor *q, Tensor *k, Tensor *v) {
    attn_check_qkv(scoremap_op.name, q, k, v);
    Node *n = node_new(&scoremap_op);
    n->n_in = 3;
    n->in[0] = q, n->in[1] = k, n->in[2] = v;
    *NODE_ATTRS(n, ScoreMapAttrs) = call_attrs(f, c);
    n->saved = bias_table(c, q);
    n->out = tensor_4d(q->shape[0], q->shape[1], q->shape[2], v->shape[3]);
    return node_run(n);
}

/* P [B, H, T, T]: forward's blocks laid into the full matrix. */
Tensor *scoremap_probs(const ScoreMap *f, const AttnCall *c, Tensor *q, Tensor *k) {
    attn_check_qkv(scoremap_op.name, q, k, k);
    ScoreMapAttrs a = call_attrs(f, c);
    int H = q->shape[1], BH = q->shape[0] * H, T = q->shape[2], dk = q->shape[3];
    Plan p = plan_make(&a, bias_table(c, q), T);
    Tensor *P = tensor_zeros(4, (int[]){q->shape[0], H, T, T});
    float *scratch = attn_block_scratch(&p.rows, 1);
    #pragma omp parallel for
    for (int bh = 0; bh < BH; bh++) {
        float *Pb = attn_thread_block(scratch, &p.rows, 1, 0);
        for (int i = 0; i < p.rows.n; i++) {
            const AttnBlock *b = &p.rows.b[i];
            block_map(&a, &p.rows, b, q->data + (long)bh * T * dk, k->data + (long)bh * T * dk, head_bias(&p, bh, H),
                      Pb, Pb, dk);
            attn_block_store(P->data + (long)bh * T * T, b, Pb, T);
        }
    }
    return P;
}

double scoremap_flops(const ModelConfig *m, int T) { return attn_masked_flops(m, T); }

int scoremap_validate(const ModelConfig *m, bool (*changed)(const char *name, const void *ctx), const void *ctx,
                      Err *e) {
    (void)changed, (void)ctx;
    if (pos_param_count(m->pos))
        return err_set(e, "--pos %s learns its bias, and a score-map kernel declares no parameters of its own",
                       pos_name(m->pos)),
               err_hint(e, "use --pos alibi or sandwich for a fixed score bias");
    return 0;
}
