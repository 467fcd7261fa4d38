/* model.h: the GPT-style decoder built from a ModelConfig.
 *
 *   x = tok_emb[ids] (+ pos_emb[0..T) when pos = learned)
 *   each block:  x = x + attn(ln1(x));  x = x + mlp(ln2(x))
 *   logits = ln_f(x) W^T, W = tok_emb.weight when tied, else lm_head.weight
 * Each residual add runs fused with the norm after it (ln2, the next block's
 * ln1, or ln_f): op_add_layernorm / op_add_rmsnorm.
 *
 * Parameter names and shapes are those of the same PyTorch nn.Module
 * (tests/reference/gpt.py), so checkpoints load with load_state_dict. */
#ifndef ATTNLAB_MODEL_H
#define ATTNLAB_MODEL_H

#include "attention.h"
#include "layers.h"
#include "util.h"

typedef struct {
    Norm ln1, ln2;
    Attention attn;
    Mlp mlp;
} Block;

typedef struct {
    ModelConfig cfg;
    ParamSet params;
    Tensor *tok_emb, *pos_emb; /* pos_emb is NULL unless pos = learned */
    Block *blocks;             /* cfg.layers of them */
    Norm ln_f;
    Tensor *lm_head; /* NULL when tied to tok_emb */
    int *positions;  /* 0, 1, ..., context - 1: the ids of the position table */
    bool checkpoint; /* training: each block's activations made again in backward (tape_checkpoint) */
} Model;

/* The declaring half of model_init: every parameter by name and shape
 * (m->params.total counts them), m's fields pointing at them, and nothing
 * large allocated; such a model is only counted (experiments/run/memory.c), then
 * freed with model_free. */
void model_declare(Model *m, const ModelConfig *c);
/* Declares and allocates every parameter (zeroed). */
void model_init(Model *m, const ModelConfig *c);
void model_free(Model *m);
/* GPT-2 initialisation: weights N(0, 0.02), the residual output projections
 * (attn.o, mlp.proj) N(0, 0.02 / sqrt(2 layers)), biases 0, norm gains 1;
 * then each attention kernel's init hook (e.g. Linformer's projections). */
void model_init_weights(Model *m, Rng *rng);
/* ids [B, T] -> logits [B, T, vocab]. T may be at most cfg.context when pos =
 * learned. ids must stay valid until backward. */
Tensor *model_forward(Model *m, const int *ids, int B, int T);
/* Mean cross-entropy of the logits against targets (-1 = not counted), as
 * one op with the LM head (op_lm_cross_entropy): the logits are never whole. */
Tensor *model_loss(Model *m, const int *ids, const int *targets, int B, int T);
/* Runs the model on ids [B, T] with gradients off and hands every layer's
 * attention matrices P [B, H, T, T or k] to fn (for ./spectrum). */
void model_attention_probs(Model *m, const int *ids, int B, int T, void (*fn)(int layer, const Tensor *P, void *ctx),
                           void *ctx);

#endif
