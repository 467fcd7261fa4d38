/* attention/softmax.h: the softmax kernel (attn=softmax): its options, for
 * its files (softmax.c, softmax_op.c, talking.c) and the tests. */
#ifndef ATTNLAB_ATTENTION_SOFTMAX_H
#define ATTNLAB_ATTENTION_SOFTMAX_H

#include "attention/kernel.h"

/* The talking_heads row's choices, in order. */
typedef enum { TALKING_NONE, TALKING_PRE, TALKING_POST, TALKING_BOTH } TalkingHeads;

/* The plain op's query rows per block when query_block is 0. */
#define SOFTMAX_QUERY_BLOCK 64

/* Its options struct (option_rows' offsets are into it). */
typedef struct ATTN_OPTS {
    int talking_heads; /* TalkingHeads */
    /* Query rows per block of the plain op (softmax_op.c); 0: SOFTMAX_QUERY_BLOCK.
     * No option row sets it: the tests lower it so that a short sequence
     * spans several blocks. */
    int query_block;
} SoftmaxOpts;

extern const AttnKernel attn_kernel_softmax;

/* The kernel's options in m (a registry look-up: a kernel's forward reads
 * AttnCall.opts instead). */
static inline SoftmaxOpts *softmax_opts(const ModelConfig *m) { return attn_options(m, &attn_kernel_softmax); }

#endif
