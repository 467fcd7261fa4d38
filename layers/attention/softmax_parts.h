/* softmax_parts.h: the pieces of the softmax kernel (softmax.c) shared by
 * its plain op with positions (softmax_op.c) and Talking-Heads attention
 * (talking.c), and the pieces every "scores -> map -> P V" op shares (the
 * plain op, score-map attention in scoremap.c, Linformer's attend): the keys
 * a row sees, the query blocks and their scores, and the backward of the
 * products. Private to layers/attention/ and the tests. */
#ifndef ATTNLAB_SOFTMAX_PARTS_H
#define ATTNLAB_SOFTMAX_PARTS_H

#include "attention/kernel.h"

/* Softmax of row s [T] in place over keys [0, n); keys [n, T) get 0. */
void attn_softmax_prefix(float *s, int n, int T);
/* P for one head: [T, T] from q, k [T, dk]. */
void attn_head_probs(const float *q, const float *k, float *P, int T, int dk, float scale, bool causal);
/* The softmax's backward on `rows` rows of length T, in place: dP into dS. */
void attn_softmax_rows_backward(const float *P, float *dP, long rows, int T);
/* Aborts unless q, k [B, H, T, dk] and v [B, H, T, dv] agree (the op `name`). */
void attn_check_qkv(const char *name, const Tensor *q, const Tensor *k, const Tensor *v);

/* The plain op with positions (softmax_op.c): the kernel's output and P
 * [B, H, T, T] without talking heads, and its OpDef. */
Tensor *attn_softmax_plain(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v);
Tensor *attn_softmax_plain_probs(const AttnCall *c, Tensor *q, Tensor *k);
extern OpDef attn_softmax_op;
/* The keys [*lo, *hi] that query i of T sees under the masks (softmax.c
 * gives the rules for window and bca). */
void attn_row_keys(int i, int T, bool causal, int window, bool bca, int context, int *lo, int *hi);
/* One block of queries: rows [r0, r1) over the keys [k0, k0 + w) they see
 * between them. */
typedef struct {
    int r0, r1;
    int k0, w;
} AttnBlock;
/* The rows of one call in blocks of qb: each row's keys [lo[i], hi[i]] and
 * log-n factor lambda[i] (1 without logn, else max(1, log n_i / log context)
 * for the n_i keys the row sees), the n blocks, and the widest, max_w keys.
 * A block's scratch is qb x max_w. */
typedef struct {
    int T, n, qb, max_w;
    int *lo, *hi;
    float *lambda;
    AttnBlock *b;
} AttnPlan;
/* The plan of T rows, in the arena. */
AttnPlan attn_plan(int T, int qb, bool causal, int window, bool bca, int context, bool logn);
/* k blocks of scratch per thread, from the arena, and this thread's j-th. */
float *attn_block_scratch(const AttnPlan *p, int k);
float *attn_thread_block(float *scratch, const AttnPlan *p, int k, int j);
/* The logits of block b of one head into S [r1 - r0, w]: s q.k over the
 * block's keys (q, k the head's [T, dk]), then on each row's own keys times
 * its log-n factor, plus the bias b(i - j) (bias the head's [T], by |i - j|
 * unless causal; NULL: none). Entries outside a row's keys are left as the
 * product made them. */
void attn_block_scores(const AttnPlan *p, const AttnBlock *b, const float *q, const float *k, int dk, float scale,
                       const float *bias, bool causal, float *S);
/* Lays block b's Pb [r1 - r0, w] into head P [T, T], whose other entries it
 * leaves. */
void attn_block_store(float *P, const AttnBlock *b, const float *Pb, int T);

/* The products of a kernel that forms each row's scores over the keys it
 * sees and multiplies by V, per layer: forward's q.k and P v, backward's q.k
 * again, dP = dO V^T, dV, dQ and dK, 2 H sum_i n_i (4 key_size + 3
 * head_size). A flops hook (AttnKernel.flops) for such kernels. */
double attn_masked_flops(const ModelConfig *m, int T);

/* The backward of O = P V with P a map of the scores s Q K^T, shared by the
 * ops of that form: q [B, H, T, dk], k [B, H, n, dk], v [B, H, n, dv] (n
 * keys: T, or Linformer's k), dO the output's gradient and the gradients
 * wanted (NULL: not). Made once per node (attn_grad_of, before the heads
 * run in parallel); then per block of head bh, rows [r0, r0 + R) and keys
 * [k0, k0 + w):
 *   if (attn_grad_pv(&g, bh, r0, R, k0, w, P, D, false)) {
 *       ... D = dP turned into dz in place (the map's backward) ...
 *       attn_grad_qk(&g, bh, r0, R, k0, w, D);
 *   } */
typedef struct {
    const Tensor *q, *k, *v;
    const float *dO;
    float *dq, *dk, *dv;
    float scale;
} AttnGrad;
/* The node's in[0..2] as q, k, v and its output's gradient. */
AttnGrad attn_grad_of(Node *n, float scale);
/* dV[keys] += P^T dO[rows] with the block's P [R, w]; then, when dQ or dK is
 * wanted or need is true, D [R, w] = dP = dO[rows] V[keys]^T and true; else
 * false. */
bool attn_grad_pv(const AttnGrad *g, long bh, int r0, int R, int k0, int w, const float *P, float *D, bool need);
/* dQ[rows] += s dz K[keys] and dK[keys] += s dz^T Q[rows], dz [R, w] in D. */
void attn_grad_qk(const AttnGrad *g, long bh, int r0, int R, int k0, int w, const float *D);

/* The plain op's attributes (softmax_op.c; here so that
 * tests/test_attn_positions.c can break the window). */
typedef struct {
    float scale;
    int pos;                /* the position scheme: its bias, if any */
    const ModelConfig *cfg; /* the call's, for the bias table: read by forward only (the
                               caller's config need not outlive the call) */
    bool causal;
    int window;  /* 0: all keys (always 0 when bidirectional) */
    bool bca;    /* only when causal */
    bool logn;
    int context; /* the training length, for log-n and BCA */
    int qb;      /* query rows per block, fixed when the node is made so that
                    backward cuts the blocks as forward did */
    bool keep;   /* forward keeps each row's max and 1 / sum for backward */
    bool flash;  /* bf16: each block in tiles of keys (softmax_op.c, flash_*) */
} SoftmaxAttrs;
NODE_ATTRS_DECLARE(SoftmaxAttrs);

/* For the tests: the bf16 tiles of keys made wrong on purpose (0: not):
 * 1 leaves the output's accumulator unscaled when a row's max grows, 2
 * drops the softmax's row sum D_i from backward. */
extern int attn_flash_fault;

#endif
