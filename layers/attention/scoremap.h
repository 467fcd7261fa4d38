/* scoremap.h: score-map attention, one fused op for every kernel of the form
 *   S = s Q K^T (+ the score bias, under the masks),  P = f(S),  O = P V
 * where f acts on each score alone (sigmoid, ReLU^2, ...). A kernel gives f
 * and f' as a ScoreMap; the op does the rest, with its hand-written backward
 *   dV = P^T dO,  dP = dO V^T,  dS = f'(S) dP,  dQ = s dS K,  dK = s dS^T Q,
 * and the masks and biases the softmax kernel has: causal, window, bca, logn
 * (layers/attention/softmax.c gives the rules) and the fixed score biases of
 * the position schemes' bias hooks (alibi.c, sandwich.c). Under precision bf16
 * it runs in the tiles of keys the softmax kernel shares (tiles.h): no block
 * of scores is written whole. A pointwise variant on it is a kernel of about
 * 20 lines (docs/attention.md). */
#ifndef ATTNLAB_SCOREMAP_H
#define ATTNLAB_SCOREMAP_H

#include "attention/kernel.h"

typedef struct {
    /* p[j] = f(s[j]) for n scores of one query row (p may be s: in place):
     * the keys the row sees in fp32, the part of them in one tile of keys in
     * bf16 (tiles.h), so f acts on each score alone; T is the sequence
     * length. */
    void (*map)(const float *s, float *p, int n, int T);
    /* d[j] = f'(s[j]) d[j], dP into dS in place, given the row's scores s and
     * its map p = f(s). */
    void (*grad)(const float *s, const float *p, float *d, int n, int T);
} ScoreMap;

/* The kernel's forward and probs with map f (f must outlive the tape). */
Tensor *scoremap_attention(const ScoreMap *f, const AttnCall *c, Tensor *q, Tensor *k, Tensor *v);
Tensor *scoremap_probs(const ScoreMap *f, const AttnCall *c, Tensor *q, Tensor *k);

/* The op every score-map kernel lists in its ops. */
extern OpDef scoremap_op;

/* A kernel's validate hook: refuses the learned score biases (kerple_*),
 * whose parameters a score-map kernel does not declare. */
int scoremap_validate(const ModelConfig *m, bool (*changed)(const char *name, const void *ctx), const void *ctx,
                      Err *e);

/* A kernel's flops hook: the products above over the keys each row sees. */
double scoremap_flops(const ModelConfig *m, int T);

#endif
