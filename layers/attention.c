/* attention.c: the multi-head attention module around a kernel. */
#include "attention.h"

#include <string.h>

#include "gemm.h"
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
    if (!a->kernel->qkv16)
        DIE("attention kernel %s: no qkv16 hook (AttnKernel.qkv16; attn_qkv_fp32 when it reads q, k, v as floats)",
            a->kernel->name);
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

/* [B, T, H d] -> [B, H, T, d], stored as `dtype` says. The projection's
 * output is read by nothing after the split (neither op_linear's backward
 * nor op_split_heads' reads it), so its buffer is handed back for the next
 * tensor of its size. */
static Tensor *split(const Attention *a, Tensor *projected, DType dtype) {
    Tensor *heads = op_split_heads_to(projected, a->heads, dtype);
    tensor_release_data(projected);
    return heads;
}

/* Under precision bf16 (layers.h, bf16_store): q, k and v in bf16 when the
 * kernel's call reads them through products alone (AttnKernel.qkv16) and
 * nothing rotates them first; the merged heads in bf16, since the output
 * projection alone reads them (the kernel's output, which its backward may
 * read, stays fp32). */
static DType stored(unsigned what, bool products_only) {
    return gemm_precision() == PRECISION_BF16 && (bf16_store & what) && products_only ? DTYPE_BF16 : DTYPE_F32;
}

Tensor *attention_forward(const Attention *a, Tensor *x) {
    AttnCall c = attention_call(a, x->shape[0], x->shape[1]);
    if (a->kernel->forward_qkv) { /* one product for q, k, v; [B, T, H d] in and out, no split or merge */
        const Linear *qkv[3] = {&a->q, &a->k, &a->v};
        return linear_forward(&a->o, a->kernel->forward_qkv(&c, linear_fused(qkv, 3, x)));
    }
    bool qkv16 = gemm_precision() == PRECISION_BF16 && a->kernel->qkv16(&c);
    bool rotary = pos_scheme(c.cfg->pos)->rotary && !a->kernel->rope_inside;
    DType qk = stored(BF16_STORE_QKV, qkv16 && !rotary);
    Tensor *q = rotated(a, &c, split(a, linear_forward(&a->q, x), qk), false);
    Tensor *k = rotated(a, &c, split(a, linear_forward(&a->k, x), qk), true);
    Tensor *v = split(a, linear_forward(&a->v, x), stored(BF16_STORE_QKV, qkv16));
    Tensor *y = a->kernel->forward(&c, q, k, v);
    return linear_forward(&a->o, op_merge_heads_to(y, stored(BF16_STORE_MERGED, true)));
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
