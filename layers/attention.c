/* attention.c: the multi-head attention module around a kernel. */
#include "attention.h"

#include <string.h>

#include "ops.h"
#include "util.h"

void attention_declare(Attention *a, ParamSet *p, const char *name, int layer, const ModelConfig *c) {
    char buf[128];
    memset(a, 0, sizeof *a);
    a->heads = c->heads;
    a->key_size = model_key_size(c);
    a->head_size = model_head_size(c);
    a->causal = c->objective == OBJECTIVE_CLM;
    a->kernel = attn_kernel_for(c->attn);
    if (a->kernel->forward_qkv && !a->kernel->rope_inside)
        DIE("attention kernel %s: forward_qkv needs rope_inside (the module rotates split heads only)", a->kernel->name);
    if (a->causal && a->kernel->bidirectional_only)
        DIE("attention kernel %s has no causal form (config_validate refuses it with objective=clm)", a->kernel->name);
    a->cfg = attn_effective(c);
    a->call = attn_call(a->kernel, &a->cfg, layer);
    /* q, k, v in this order (the order initialisation draws in), each stored
     * after the one before, so that they also run as one product */
    linear_declare(&a->q, p, param_name(buf, name, "q"), c->d_model, a->heads * a->key_size, true);
    linear_declare_after(&a->k, &a->q, p, param_name(buf, name, "k"), c->d_model, a->heads * a->key_size, true);
    linear_declare_after(&a->v, &a->k, p, param_name(buf, name, "v"), c->d_model, a->heads * a->head_size, true);
    linear_declare(&a->o, p, param_name(buf, name, "o"), a->heads * a->head_size, c->d_model, true);
    if (a->kernel->declare) a->kernel->declare(p, name, layer, &a->cfg, a->call.params);
}

void attention_init(Attention *a, int layer, Rng *rng) {
    if (a->kernel->init) a->kernel->init(a->call.params, layer, &a->cfg, rng);
}

AttnCall attention_call(const Attention *a, int B, int T) {
    AttnCall c = a->call;
    c.B = B;
    c.T = T;
    return c;
}

/* q or k with pos = rope | xpos applied, unless the kernel applies it itself. */
static Tensor *rotated(const Attention *a, const AttnCall *c, Tensor *x, bool key) {
    bool rotary = pos_scheme(c->cfg->pos)->rotary;
    return rotary && !a->kernel->rope_inside ? attn_rope(c, x, key) : x;
}

/* [B, T, H d] -> [B, H, T, d]. The projection's output is read by nothing
 * after the split (neither op_linear's backward nor op_split_heads' reads it),
 * so its buffer is handed back for the next tensor of its size. */
static Tensor *split(const Attention *a, Tensor *projected) {
    Tensor *heads = op_split_heads(projected, a->heads);
    tensor_release_data(projected);
    return heads;
}

Tensor *attention_forward(const Attention *a, Tensor *x) {
    AttnCall c = attention_call(a, x->shape[0], x->shape[1]);
    if (a->kernel->forward_qkv) { /* one product for q, k, v; [B, T, H d] in and out, no split or merge */
        const Linear *qkv[3] = {&a->q, &a->k, &a->v};
        return linear_forward(&a->o, a->kernel->forward_qkv(&c, linear_fused(qkv, 3, x)));
    }
    Tensor *q = rotated(a, &c, split(a, linear_forward(&a->q, x)), false);
    Tensor *k = rotated(a, &c, split(a, linear_forward(&a->k, x)), true);
    Tensor *v = split(a, linear_forward(&a->v, x));
    Tensor *y = a->kernel->forward(&c, q, k, v);
    return linear_forward(&a->o, op_merge_heads(y));
}

Tensor *attention_probs(const Attention *a, Tensor *x) {
    bool was = grad_set(false);
    AttnCall c = attention_call(a, x->shape[0], x->shape[1]);
    Tensor *q = rotated(a, &c, op_split_heads(linear_forward(&a->q, x), a->heads), false);
    Tensor *k = rotated(a, &c, op_split_heads(linear_forward(&a->k, x), a->heads), true);
    Tensor *p = a->kernel->probs(&c, q, k);
    grad_set(was);
    return p;
}
