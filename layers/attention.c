/* attention.c: the multi-head attention module around a kernel. */
#include "attention.h"

#include <math.h>

#include "ops.h"

void attention_declare(Attention *a, ParamSet *p, const char *name, const ModelConfig *c) {
    char buf[128];
    a->heads = c->heads;
    a->key_size = model_key_size(c);
    a->head_size = model_head_size(c);
    a->causal = c->objective == OBJECTIVE_CLM;
    a->kernel = attn_kernels[c->attn];
    linear_declare(&a->q, p, param_name(buf, name, "q"), c->d_model, a->heads * a->key_size, true);
    linear_declare(&a->k, p, param_name(buf, name, "k"), c->d_model, a->heads * a->key_size, true);
    linear_declare(&a->v, p, param_name(buf, name, "v"), c->d_model, a->heads * a->head_size, true);
    linear_declare(&a->o, p, param_name(buf, name, "o"), a->heads * a->head_size, c->d_model, true);
}

static AttnCall call_for(const Attention *a, const Tensor *x) {
    return (AttnCall){
        .B = x->shape[0],
        .H = a->heads,
        .T = x->shape[1],
        .key_size = a->key_size,
        .head_size = a->head_size,
        .causal = a->causal,
        .scale = 1.0f / sqrtf((float)a->key_size),
    };
}

Tensor *attention_forward(const Attention *a, Tensor *x) {
    AttnCall c = call_for(a, x);
    Tensor *q = op_split_heads(linear_forward(&a->q, x), a->heads);
    Tensor *k = op_split_heads(linear_forward(&a->k, x), a->heads);
    Tensor *v = op_split_heads(linear_forward(&a->v, x), a->heads);
    Tensor *y = a->kernel->forward(&c, q, k, v);
    return linear_forward(&a->o, op_merge_heads(y));
}

Tensor *attention_probs(const Attention *a, Tensor *x) {
    bool was = grad_set(false);
    AttnCall c = call_for(a, x);
    Tensor *q = op_split_heads(linear_forward(&a->q, x), a->heads);
    Tensor *k = op_split_heads(linear_forward(&a->k, x), a->heads);
    Tensor *p = a->kernel->probs(&c, q, k);
    grad_set(was);
    return p;
}
