#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "gemm.h"
#include "ops.h"

void model_declare(Model *m, const ModelConfig *c) {
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    ParamSet *p = &m->params;
    params_init(p);
    int d = c->d_model;
    m->tok_emb = params_add(p, "tok_emb.weight", 2, (int[]){c->vocab, d});
    if (pos_scheme(c->pos)->table) m->pos_emb = params_add(p, "pos_emb.weight", 2, (int[]){c->context, d});
    m->blocks = xcalloc((size_t)c->layers, sizeof *m->blocks);
    for (int i = 0; i < c->layers; i++) {
        char name[64], buf[128];
        snprintf(name, sizeof name, "blocks.%d", i);
        Block *b = &m->blocks[i];
        norm_declare(&b->ln1, p, param_name(buf, name, "ln1"), c->norm, d);
        attention_declare(&b->attn, p, param_name(buf, name, "attn"), i, c);
        norm_declare(&b->ln2, p, param_name(buf, name, "ln2"), c->norm, d);
        mlp_declare(&b->mlp, p, param_name(buf, name, "mlp"), d, c->mlp_ratio * d);
    }
    norm_declare(&m->ln_f, p, "ln_f", c->norm, d);
    if (!c->tie_embeddings) m->lm_head = params_add(p, "lm_head.weight", 2, (int[]){c->vocab, d});
}

void model_init(Model *m, const ModelConfig *c) {
    model_declare(m, c);
    m->positions = xmalloc((size_t)c->context * sizeof(int));
    for (int t = 0; t < c->context; t++) m->positions[t] = t;
    params_alloc(&m->params);
}

void model_free(Model *m) {
    params_free(&m->params);
    free(m->blocks);
    free(m->positions);
    memset(m, 0, sizeof *m);
}

static bool is_residual_projection(const char *name) {
    size_t n = strlen(name);
    return (n > 15 && strcmp(name + n - 14, ".attn.o.weight") == 0) ||
           (n > 17 && strcmp(name + n - 16, ".mlp.proj.weight") == 0);
}

void model_init_weights(Model *m, Rng *rng) {
    float residual_std = 0.02f / sqrtf(2.0f * (float)m->cfg.layers);
    for (int i = 0; i < params_count(&m->params); i++) {
        Tensor *t = m->params.list[i];
        if (t->ndim >= 2)
            rng_fill_normal(rng, t->data, t->n, 0.0f, is_residual_projection(t->name) ? residual_std : 0.02f);
        else {
            /* 1-D: biases start at 0, norm gains at 1 */
            size_t n = strlen(t->name);
            float value = n > 7 && strcmp(t->name + n - 7, ".weight") == 0 ? 1.0f : 0.0f;
            for (long j = 0; j < t->n; j++) t->data[j] = value;
        }
    }
    /* then the kernels that draw their own parameters their own way */
    for (int i = 0; i < m->cfg.layers; i++) attention_init(&m->blocks[i].attn, i, rng);
}

static Tensor *embed(Model *m, const int *ids, int B, int T) {
    if (m->pos_emb && T > m->cfg.context) DIE("model: length %d beyond the learned positions (%d)", T, m->cfg.context);
    Tensor *x = op_embedding(m->tok_emb, ids, 2, (int[]){B, T});
    if (m->pos_emb) /* rows 0..T-1 of the position table, added to every batch row */
        x = op_add(x, op_embedding(m->pos_emb, m->positions, 1, (int[]){T}));
    if (pos_scheme(m->cfg.pos)->embed) x = pos_scheme(m->cfg.pos)->embed(x);
    return x;
}

/* The residual add and the norm after it, fused (norm_add_forward): returns
 * x + y and sets *h = norm(x + y). y (a projection's or the MLP's output) is
 * read by nothing afterwards: neither the op that made it nor the fused op
 * reads it in backward, so its buffer is handed back for the next tensor of
 * its size. */
/* ln1's and ln2's outputs are read by products alone (the attention's
 * projections, the MLP's first product; their backward reads the norm's
 * input): in bf16 under precision bf16 (layers.h, bf16_store). */
static DType block_norm_out(void) {
    return gemm_precision() == PRECISION_BF16 && (bf16_store & BF16_STORE_NORM) ? DTYPE_BF16 : DTYPE_F32;
}

static Tensor *residual_norm(const Norm *norm, Tensor *x, Tensor *y, Tensor **h, DType out) {
    Tensor *sum;
    *h = norm_add_forward_to(norm, x, y, &sum, out);
    tensor_release_data(y);
    return sum;
}

/* x is the residual stream and *h = ln1(x), made by the add that ended the
 * previous block (or the first norm); returns x after the block and sets *h =
 * next(x), next being the following block's ln1 or ln_f. The normed input
 * of a sub-block is read again only by the backward of its products (their
 * dW): it is handed back after forward and made again from x in backward
 * (tape.h), one [B, T, d] tensor a sub-block for one more norm. */
static Tensor *block_forward(Block *b, Tensor *x, Tensor **h, const Norm *next, DType next_out) {
    Tensor *y = attention_forward(&b->attn, *h);
    tensor_release_recomputable(*h);
    x = residual_norm(&b->ln2, x, y, h, block_norm_out());
    y = mlp_forward(&b->mlp, *h);
    tensor_release_recomputable(*h);
    return residual_norm(next, x, y, h, next_out);
}

/* The norm after block i: the next block's ln1, or ln_f after the last. */
static const Norm *norm_after(Model *m, int i) { return i + 1 < m->cfg.layers ? &m->blocks[i + 1].ln1 : &m->ln_f; }

/* How that norm's output is stored: ln1's (read by the projections alone)
 * as block_norm_out says; ln_f's, the loss's input, in fp32. */
static DType norm_after_out(Model *m, int i) { return i + 1 < m->cfg.layers ? block_norm_out() : DTYPE_F32; }

/* ln_f of the last block's output: the LM head's input [B, T, d]. Each
 * residual add is fused with the norm after it, so a block's tape ends with
 * its last add (the block's result) and then the next block's ln1: the
 * checkpointed span of a block runs from the node after the previous block's
 * last add up to its own (tape_checkpoint ends a span at keep's producer). */
static Tensor *model_features(Model *m, const int *ids, int B, int T) {
    const ModelConfig *c = &m->cfg;
    Tensor *x = embed(m, ids, B, T);
    Node *before = tape_last();
    Tensor *h = norm_forward_to(norm_after(m, -1), x, norm_after_out(m, -1));
    for (int i = 0; i < c->layers; i++) {
        x = block_forward(&m->blocks[i], x, &h, norm_after(m, i), norm_after_out(m, i));
        if (m->checkpoint && grad_enabled() && x->producer) {
            tape_checkpoint(before, x);
            before = x->producer;
        }
    }
    return h;
}

static Tensor *head_weight(const Model *m) { return m->lm_head ? m->lm_head : m->tok_emb; }

Tensor *model_forward(Model *m, const int *ids, int B, int T) {
    return op_matmul(model_features(m, ids, B, T), head_weight(m), false, true);
}

/* The head and the loss as one op: no [B, T, V] logits or gradient. */
Tensor *model_loss(Model *m, const int *ids, const int *targets, int B, int T) {
    return op_lm_cross_entropy(model_features(m, ids, B, T), head_weight(m), targets, -1);
}

void model_attention_probs(Model *m, const int *ids, int B, int T, void (*fn)(int layer, const Tensor *P, void *ctx),
                           void *ctx) {
    bool was = grad_set(false);
    Tensor *x = embed(m, ids, B, T);
    Tensor *h = norm_forward_to(norm_after(m, -1), x, norm_after_out(m, -1));
    for (int i = 0; i < m->cfg.layers; i++) {
        Block *b = &m->blocks[i];
        fn(i, attention_probs(&b->attn, h), ctx);
        x = block_forward(b, x, &h, norm_after(m, i), norm_after_out(m, i));
    }
    grad_set(was);
}
