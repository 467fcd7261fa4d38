/* attention/linear_op.h: the fused linear-attention op (linear_op.c) as the
 * linear kernel (linear.c) calls it. */
#ifndef ATTNLAB_ATTENTION_LINEAR_OP_H
#define ATTNLAB_ATTENTION_LINEAR_OP_H

#include "attention/kernel.h"

extern OpDef attn_linear_op;
/* q, k, v [B, H, T, d] (or [B, T, H d]) -> the output in the same layout. */
Tensor *attn_linear(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v);
/* qkv [B, T, H key_size | H key_size | H head_size] -> [B, T, H head_size]. */
Tensor *attn_linear_qkv(const AttnCall *c, Tensor *qkv);
/* The attention matrix P [B, H, T, T] whose product with v is the output. */
Tensor *attn_linear_probs(const AttnCall *c, Tensor *q, Tensor *k);

#endif
