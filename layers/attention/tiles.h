/* tiles.h: one block of query rows over its keys in tiles of ATTN_TILE_KEYS
 * keys (flash-style), the piece every kernel that forms scores shares under
 * precision bf16: the softmax kernel (softmax_op.c), score-map attention
 * (scoremap.c) and, its scores, masks and tiles, Talking-Heads (talking.c).
 * A tile's logits z = lambda s q.k + b(i - j) under the masks (AttnPlan's
 * rows), its P made by the kernel's rule (AttnTileRule) and
 * rounded to bf16 as it is made, and P V added into an accumulator, so that
 * no score row is written whole: memory is O(T) per head plus a few tiles
 * per thread whatever T is. Backward makes each tile's z and P again and
 * does the products of O = P V for the tile, the rule turning dP into dz.
 * Operands are rows given by pointer and stride, stored in fp32 or bf16
 * (AttnRows), read as gemm_ex reads them. Private to layers/attention/ and
 * the tests. */
#ifndef ATTNLAB_ATTENTION_TILES_H
#define ATTNLAB_ATTENTION_TILES_H

#include <stdint.h>

#include "gemm.h"
#include "softmax_parts.h"

#define ATTN_TILE_KEYS 256

/* A matrix as stored: row i at data + i ld elements, fp32 or (bf16) uint16_t. */
typedef struct {
    const void *data;
    bool bf16;
    int ld;
} AttnRows;

/* Row i of m onward, as a pointer gemm_ex takes. */
static inline const void *attn_rows_at(AttnRows m, long i) {
    if (m.bf16) return (const uint16_t *)m.data + i * m.ld;
    return (const float *)m.data + i * m.ld;
}

/* One head of a call: its rows' keys (the plan), q, k [T, dk], v [T, dv],
 * the scale s, the head's bias table [T] (by |i - j| unless causal; NULL:
 * none). */
typedef struct {
    const AttnPlan *p;
    AttnRows q, k, v;
    int dk, dv;
    float scale;
    const float *bias;
    bool causal;
    /* k as Kᵀ [dk, T] and v [T, dv] packed once for the head as gemm's
     * kernel reads them (attn_tile_pack), which the tiles' scores and P V
     * then read where a tile falls on the packing's grid; NULL: not packed */
    const GemmPackedB *kt, *vp;
} AttnTileHead;

/* Head bh of a call on q, k [B, H, T, dk] and v [B, H, T, dv] as tensors
 * hold them (fp32, or bf16 where the module stored them so: tensor.h);
 * bias the head's table or NULL. */
AttnTileHead attn_tile_head(const AttnPlan *p, const Tensor *q, const Tensor *k, const Tensor *v, long bh, float scale,
                            const float *bias, bool causal);

/* Packing a head's k and v once instead of at every block's every tile,
 * when both are stored in bf16 and gemm's kernel runs the products (the same
 * pairs and sums as gemm_ex's, so the same bits): every thread's space, from
 * the arena's scratch (NULL: no packing here), given back by
 * attn_tile_packs_done; then per head, this thread's packing of k (and of v
 * when with_v), pointed at by h. */
typedef struct {
    GemmPackedB kt, v;
} AttnTilePack;
uint32_t *attn_tile_packs(const Tensor *k, const Tensor *v);
void attn_tile_packs_done(uint32_t *space, const Tensor *k, const Tensor *v);
void attn_tile_pack(uint32_t *space, const Tensor *k, const Tensor *v, long bh, bool with_v, AttnTilePack *pack,
                    AttnTileHead *h);

/* The keys [*lo, *e) of query i inside the tile of keys [c0, c0 + wc), as
 * columns of the tile (empty: *lo == *e). */
static inline void attn_tile_keys(const AttnPlan *p, int i, int c0, int wc, int *lo, int *e) {
    int a = p->lo[i] - c0, b = p->hi[i] - c0 + 1;
    a = a < 0 ? 0 : a > wc ? wc : a;
    b = b > wc ? wc : b < a ? a : b;
    *lo = a, *e = b;
}

/* The logits of rows [r0, r0 + R) against keys [c0, c0 + wc) into S [R, wc]
 * (row stride wc): s q.k through gemm (attn_tile_qk), then on each row's
 * keys its log-n factor and the bias, -inf outside them (attn_tile_mask, on
 * its own for Talking-Heads, which mixes the heads' s q.k before the mask). */
void attn_tile_scores(const AttnTileHead *h, int r0, int R, int c0, int wc, float *S);
void attn_tile_qk(const AttnTileHead *h, int r0, int R, int c0, int wc, float *S);
void attn_tile_mask(const AttnTileHead *h, int r0, int R, int c0, int wc, float *S);

/* What a kernel makes of its logits, row by row (query i, row r of the
 * block), on a tile of wc keys whose columns [lo, e) are the row's keys; ctx
 * is the kernel's. */
typedef struct {
    /* Forward: the row's logits z [wc] (-inf outside [lo, e)) into its P,
     * in place, 0 outside [lo, e); the tiles round it to bf16 for P V.
     * Returns the factor the row's accumulator takes before the tile's P V
     * is added (1: none). */
    float (*forward)(void *ctx, int r, int i, float *z, int lo, int e, int wc);
    /* Backward: the row's P again, in fp32, into p [wc], 0 outside [lo, e). */
    void (*again)(void *ctx, int r, int i, const float *z, float *p, int lo, int e, int wc);
    /* Backward: d [wc], dP on entry, into dz = dP/dz, 0 outside [lo, e),
     * given the row's z and p (the log-n factor and the bias's gradient are
     * the block's, not the rule's). */
    void (*grad)(void *ctx, int r, int i, const float *z, const float *p, float *d, int lo, int e, int wc);
} AttnTileRule;

/* One thread's tiles: S, P, D [qb, ATTN_TILE_KEYS] floats, P16 the same in
 * bf16, and `extra` floats of the kernel's own. */
typedef struct {
    float *S, *P, *D, *extra;
    uint16_t *P16;
} AttnTiles;
/* Every thread's tiles with `extra` floats each, from the arena; this
 * thread's. */
float *attn_tiles_scratch(int qb, long extra);
AttnTiles attn_tiles_of(float *scratch, int qb, long extra);

/* Forward of block b: acc [R, dv] (row stride ld_acc; R = r1 - r0) = sum over
 * the tiles of P V, each row scaled by the rule's factor before a tile adds
 * to it. acc is set, not added to. */
void attn_tiles_forward(const AttnTileHead *h, const AttnBlock *b, const AttnTileRule *f, void *ctx, AttnTiles *t,
                        float *acc, int ld_acc);

/* The head's gradients: dO [T, dv] in, dq, dk [T, dk] and dv [T, dv] added
 * to (row strides ld_*; NULL: not wanted), and the bias's gradient by
 * distance, gbias [T] (NULL: not wanted). */
typedef struct {
    AttnRows dO;
    float *dq, *dk, *dv;
    int ld_dq, ld_dk, ld_dv;
    double *gbias;
} AttnTileGrads;

/* Head bh's part of a node's gradients (attn_grad_of). */
AttnTileGrads attn_tile_grads(const AttnGrad *g, long bh, double *gbias);

/* Backward of block b, per tile: z and P again (the rule's again), dV +=
 * P^T dO, dP = dO V^T, dz (the rule's grad), gbias[|i - j|] += dz, dz times
 * the row's log-n factor, dQ += s dz K, dK += s dz^T Q. */
void attn_tiles_backward(const AttnTileHead *h, const AttnBlock *b, const AttnTileRule *f, void *ctx,
                         const AttnTileGrads *g, AttnTiles *t);

/* P's n values rounded to bf16, to nearest, for the P V product (a row of
 * a tile, or a block's heads in Talking-Heads; bf16_from_floats would open a
 * parallel region per row). */
void attn_tile_round(uint16_t *restrict out, const float *restrict x, long n);

/* For the tests: the tiles made wrong on purpose (ATTN_TILE_FAULT_NONE at
 * start), to show that the checks catch them. */
typedef enum {
    ATTN_TILE_FAULT_NONE,
    ATTN_TILE_FAULT_MASK_SHIFT, /* each tile past a block's first masks as if it began a tile earlier */
    ATTN_TILE_FAULT_NO_BIAS,    /* the bias is skipped on each tile past a block's first */
    ATTN_TILE_FAULT_FP32_PV,    /* P V made in fp32 (sgemm), P and V not rounded (fp32 V only) */
    ATTN_TILE_FAULT_P_TOWARD_ZERO, /* P rounded toward zero (its low bits dropped) instead of to nearest */
} AttnTileFault;
extern AttnTileFault attn_tile_fault;

#endif
