/* attention/kernel.h: what an attention kernel is, and the list of them.
 *
 * A kernel turns per-head q, k, v into per-head outputs (a kernel with
 * forward_qkv takes them as one fused projection gives them). The module that
 * owns the projections around it is layers/attention.h. Adding a kernel is
 * one file in layers/attention/ and one line in attn_kernels
 * (layers/attention/kernels.c). */
#ifndef ATTNLAB_ATTENTION_KERNEL_H
#define ATTNLAB_ATTENTION_KERNEL_H

#include "config.h"
#include "layers.h"
#include "tape.h"

/* Counters kernels may add to during forward, read by the trainer per step
 * (e.g. how many linear-attention denominators hit the clamp). */
typedef struct {
    long den_clamped, den_rows;
} AttnStats;

/* The process-wide counters; attn_stats_reset() zeroes them. */
extern AttnStats attn_stats;
void attn_stats_reset(void);

#define ATTN_MAX_PARAMS 4

/* What a kernel is told about the call. */
typedef struct {
    int B, H, T;
    int key_size, head_size;
    bool causal;  /* query i sees keys j <= i */
    float scale;  /* logits are scale * q.k; 1 / sqrt(key_size) */
    /* kernel options, from the ModelConfig */
    int phi;
    float leaky_slope;
    int reweight;
    int chunk;
    int talking_heads;
    int linformer_k, linformer_share, linformer_proj;
    int context;  /* the training length n (ModelConfig.context): Linformer's pooling stride is n / linformer_k,
                     log-n scaling divides by log n, BCA's blocks are n / 2 */
    /* positions (layers/attention/rope.c, layers/attention/bias.c) */
    int pos;      /* PosKind */
    int rope_dims;/* rotated dimensions of q and k (even, <= key_size) */
    float sandwich_lambda;
    int window;   /* 0 = full; else query i sees keys (i - window, i] */
    bool logn;    /* logits scaled by max(1, log n_i / log context) */
    bool bca;     /* query i sees its block of context / 2 and the one before */
    /* the kernel's own parameters for this layer, as its declare() made them */
    Tensor *params[ATTN_MAX_PARAMS];
} AttnCall;

typedef struct Attention Attention;

typedef struct {
    const char *name;
    /* Declares the kernel's own parameters of layer `layer` (NULL when it has
     * none) into a->params, named under `prefix` (e.g. "blocks.0.attn") so
     * that they match a PyTorch module's state_dict. */
    void (*declare)(Attention *a, ParamSet *p, const char *prefix, int layer, const ModelConfig *c);
    /* q, k [B, H, T, key_size], v [B, H, T, head_size] -> [B, H, T, head_size] */
    Tensor *(*forward)(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v);
    /* The attention matrix P [B, H, T, T] for the same q, k, with gradients
     * off (for ./spectrum): the kernel's output is P v. Linformer's is
     * [B, H, T, k'] and its output P (F v). */
    Tensor *(*probs)(const AttnCall *c, Tensor *q, Tensor *k);
    /* The kernel's fused ops, so the tests can find and check them
     * (NULL-terminated; empty when the kernel is made of primitive ops). */
    OpDef *ops[4];
    /* Draws the kernel's own parameters of layer `layer` after
     * model_init_weights' generic rule has filled them (NULL: that rule
     * stands). */
    void (*init)(Attention *a, int layer, Rng *rng);
    /* The kernel has no causal form (Linformer mixes positions): the model
     * refuses it under a causal objective and the tests ask for no causal
     * case. */
    bool bidirectional_only;
    /* The kernel applies pos = rope itself (linear kernels rotate the
     * features after phi); otherwise the module rotates q and k before the
     * kernel. */
    bool rope_inside;
    /* Optional: q, k, v as one fused projection makes them, side by side in
     * qkv [B, T, H key_size | H key_size | H head_size] (head h of q in
     * columns [h dk, (h + 1) dk), and so on), -> [B, T, H head_size], the
     * gradient going to qkv in the same layout. When it is set the module
     * runs q, k and v as one product and calls this, without splitting and
     * merging the heads; such a kernel must be rope_inside. probs still gets
     * [B, H, T, d]. */
    Tensor *(*forward_qkv)(const AttnCall *c, Tensor *qkv);
} AttnKernel;

/* Query rows per block of the softmax kernel (64): tests lower it so that a
 * short sequence spans several blocks. */
extern int attn_query_block;

/* Every kernel once (layers/attention/kernels.c). */
extern const AttnKernel *const attn_kernels[];
extern const int n_attn_kernels;

/* The kernel an AttnKind runs (cosformer runs the linear kernel). */
const AttnKernel *attn_kernel_for(int attn);

#endif
