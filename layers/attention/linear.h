/* attention/linear.h: the linear kernel (attn=linear, and its preset
 * attn=cosformer): its options, for its files (linear.c, linear_op.c) and the
 * tests. */
#ifndef ATTNLAB_ATTENTION_LINEAR_H
#define ATTNLAB_ATTENTION_LINEAR_H

#include "attention/kernel.h"

/* Its option rows' choices, in order. */
typedef enum { PHI_IDENTITY, PHI_RELU, PHI_LEAKYRELU, PHI_ELU } PhiKind;
typedef enum { REWEIGHT_NONE, REWEIGHT_COS } ReweightKind;

/* Its options struct (option_rows' offsets are into it). */
typedef struct ATTN_OPTS {
    int phi;           /* PhiKind: the feature map */
    float leaky_slope; /* phi = leakyrelu's slope */
    int reweight;      /* ReweightKind */
    int chunk;         /* causal linear attention's chunk length */
} LinearOpts;

extern const AttnKernel attn_kernel_linear;

/* The kernel's options in m (a registry look-up: a kernel's forward reads
 * AttnCall.opts instead). */
static inline LinearOpts *linear_opts(const ModelConfig *m) { return attn_options(m, &attn_kernel_linear); }

#endif
