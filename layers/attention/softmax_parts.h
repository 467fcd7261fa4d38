/* softmax_parts.h: the pieces of the softmax kernel (softmax.c) shared by
 * its plain op with positions (softmax_op.c) and Talking-Heads attention
 * (talking.c); private to layers/attention/ and the tests. */
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
/* The keys [*lo, *hi] that query i of T sees under the call's masks (the rule
 * in softmax_op.c); the kernel's flops hook counts them. */
void attn_row_keys(int i, int T, bool causal, int window, bool bca, int context, int *lo, int *hi);

/* The plain op's attributes (softmax_op.c; here so that
 * tests/test_attn_positions.c can break the window). */
typedef struct {
    float scale;
    float sandwich_lambda;
    int pos;     /* PosKind: the score bias, if any */
    bool causal;
    int window;  /* 0: all keys (always 0 when bidirectional) */
    bool bca;    /* only when causal */
    bool logn;
    int context; /* the training length, for log-n and BCA */
    int qb;      /* query rows per block, fixed when the node is made so that
                    backward cuts the blocks as forward did */
    bool keep;   /* forward keeps each row's max and 1 / sum for backward */
} SoftmaxAttrs;
NODE_ATTRS_DECLARE(SoftmaxAttrs);

#endif
