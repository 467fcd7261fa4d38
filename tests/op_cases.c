#include "op_cases.h"

#include <math.h>

#define IN(init, nd, ...) {nd, {__VA_ARGS__}, init}
#define N(nd, ...) IN(GC_NORMAL, nd, __VA_ARGS__)
#define NZ(nd, ...) IN(GC_NONZERO, nd, __VA_ARGS__)
#define POS(nd, ...) IN(GC_POSITIVE, nd, __VA_ARGS__)

static Tensor *matmul_nn(Tensor **in) { return op_matmul(in[0], in[1], false, false); }
static Tensor *matmul_nt(Tensor **in) { return op_matmul(in[0], in[1], false, true); }
static Tensor *matmul_tn(Tensor **in) { return op_matmul(in[0], in[1], true, false); }
static Tensor *matmul_tt(Tensor **in) { return op_matmul(in[0], in[1], true, true); }
/* x x^T: one input on both sides */
static Tensor *matmul_twice(Tensor **in) { return op_matmul(in[0], in[0], false, true); }

static Tensor *linear(Tensor **in) { return op_linear(in[0], in[1], in[2]); }
static Tensor *linear_nobias(Tensor **in) { return op_linear(in[0], in[1], NULL); }

static Tensor *add(Tensor **in) { return op_add(in[0], in[1]); }
static Tensor *add_twice(Tensor **in) { return op_add(in[0], in[0]); }
static Tensor *mul(Tensor **in) { return op_mul(in[0], in[1]); }
static Tensor *mul_twice(Tensor **in) { return op_mul(in[0], in[0]); }
static Tensor *div(Tensor **in) { return op_div(in[0], in[1]); }
/* x / (x x): both operands' gradients meet in one leaf */
static Tensor *div_twice(Tensor **in) { return op_div(in[0], op_mul(in[0], in[0])); }
static Tensor *scale(Tensor **in) { return op_scale(in[0], -1.7f); }
static Tensor *sum(Tensor **in) { return op_sum(in[0]); }
static Tensor *mean(Tensor **in) { return op_mean(in[0]); }

static Tensor *reshape(Tensor **in) { return op_reshape(in[0], 2, (int[]){6, 4}); }
static Tensor *split_heads(Tensor **in) { return op_split_heads(in[0], 2); }
static Tensor *merge_heads(Tensor **in) { return op_merge_heads(in[0]); }

static Tensor *gelu(Tensor **in) { return op_gelu(in[0]); }
static Tensor *relu(Tensor **in) { return op_relu(in[0]); }
static Tensor *leakyrelu(Tensor **in) { return op_leakyrelu(in[0], 0.1f); }
static Tensor *elu_plus_one(Tensor **in) { return op_elu(in[0], 1.0f, 1.0f); }
static Tensor *elu_alpha(Tensor **in) { return op_elu(in[0], 0.5f, 0.0f); }
static Tensor *exponential(Tensor **in) { return op_exp(in[0]); }
static Tensor *sigmoid(Tensor **in) { return op_sigmoid(in[0]); }
static Tensor *identity(Tensor **in) { return op_identity(in[0]); }

static Tensor *layernorm(Tensor **in) { return op_layernorm(in[0], in[1], in[2], 1e-5f); }
static Tensor *rmsnorm(Tensor **in) { return op_rmsnorm(in[0], in[1], 1e-5f); }

/* The residual add fused with the norm after it: s = x + y and h = norm(s)
 * both read afterwards (out = s h); h alone (the final norm: nothing else
 * reads s); s alone (the add node's own backward); x added to itself; x and
 * y read again after the op (their gradients are no longer unset when the
 * norm's backward reaches them). */
static Tensor *add_layernorm(Tensor **in) {
    Tensor *s, *h = op_add_layernorm(in[0], in[1], in[2], in[3], 1e-5f, &s);
    return op_mul(s, h);
}
static Tensor *add_layernorm_norm_only(Tensor **in) {
    Tensor *s;
    return op_add_layernorm(in[0], in[1], in[2], in[3], 1e-5f, &s);
}
static Tensor *add_layernorm_sum_only(Tensor **in) {
    Tensor *s;
    op_add_layernorm(in[0], in[1], in[2], in[3], 1e-5f, &s);
    return s;
}
static Tensor *add_layernorm_twice(Tensor **in) {
    Tensor *s, *h = op_add_layernorm(in[0], in[0], in[1], in[2], 1e-5f, &s);
    return op_mul(s, h);
}
static Tensor *add_layernorm_reread(Tensor **in) {
    Tensor *s, *h = op_add_layernorm(in[0], in[1], in[2], in[3], 1e-5f, &s);
    return op_mul(op_add(h, in[0]), in[1]);
}
static Tensor *add_rmsnorm(Tensor **in) {
    Tensor *s, *h = op_add_rmsnorm(in[0], in[1], in[2], 1e-5f, &s);
    return op_mul(s, h);
}
static Tensor *add_rmsnorm_norm_only(Tensor **in) {
    Tensor *s;
    return op_add_rmsnorm(in[0], in[1], in[2], 1e-5f, &s);
}
static Tensor *add_rmsnorm_reread(Tensor **in) {
    Tensor *s, *h = op_add_rmsnorm(in[0], in[1], in[2], 1e-5f, &s);
    return op_mul(op_add(h, in[1]), s);
}

static Tensor *softmax(Tensor **in) { return op_softmax(in[0], NULL); }

/* A causal mask [T, T]: key j > query i is removed. */
static Tensor *causal_mask(int T) {
    Tensor *m = tensor_2d(T, T);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) m->data[i * T + j] = j <= i ? 0.0f : -INFINITY;
    return m;
}
static Tensor *softmax_causal(Tensor **in) { return op_softmax(in[0], causal_mask(4)); }
/* The mask is a leaf here: a learned score bias gets its gradient. */
static Tensor *softmax_bias(Tensor **in) { return op_softmax(in[0], in[1]); }
/* Query row 0 sees no key: its output and gradient are zero, not NaN. */
static Tensor *softmax_empty_row(Tensor **in) {
    Tensor *m = causal_mask(3);
    m->data[0] = -INFINITY;
    return op_softmax(in[0], m);
}

static const int embed_ids[8] = {3, 0, 6, 3, 1, 1, 5, 3};
static Tensor *embedding(Tensor **in) { return op_embedding(in[0], embed_ids, 2, (int[]){2, 4}); }

static const int ce_targets[6] = {1, 4, 0, CASE_IGNORE, 2, 4};
static Tensor *cross_entropy(Tensor **in) { return op_cross_entropy(in[0], ce_targets, CASE_IGNORE); }

/* A pre-norm MLP block with its residual: x is used twice, and the ops meet
 * each other's gradients. */
static Tensor *mlp_block(Tensor **in) {
    Tensor *x = in[0], *w1 = in[1], *w2 = in[2], *b1 = in[3];
    Tensor *h = op_rmsnorm(x, op_reshape(op_scale(b1, 0.5f), 1, (int[]){4}), 1e-5f);
    h = op_gelu(op_matmul(h, w1, false, true));
    h = op_matmul(h, w2, false, true);
    return op_add(x, h);
}

const GradCase op_cases[] = {
    {"matmul_nn", 2, {N(2, 5, 4), N(2, 4, 3)}, matmul_nn},
    {"matmul_nt", 2, {N(2, 5, 4), N(2, 3, 4)}, matmul_nt},
    {"matmul_tn", 2, {N(2, 4, 5), N(2, 4, 3)}, matmul_tn},
    {"matmul_tt", 2, {N(2, 4, 5), N(2, 3, 4)}, matmul_tt},
    {"matmul_rows", 2, {N(3, 2, 3, 4), N(2, 5, 4)}, matmul_nt},
    {"bmm_nt", 2, {N(4, 2, 2, 3, 4), N(4, 2, 2, 5, 4)}, matmul_nt},
    {"bmm_nn", 2, {N(4, 2, 2, 3, 5), N(4, 2, 2, 5, 4)}, matmul_nn},
    {"bmm_tn", 2, {N(3, 2, 3, 4), N(3, 2, 3, 5)}, matmul_tn},
    {"bmm_tt", 2, {N(3, 2, 3, 4), N(3, 2, 5, 3)}, matmul_tt},
    {"matmul_twice", 1, {N(2, 4, 3)}, matmul_twice},
    {"linear", 3, {N(3, 2, 3, 4), N(2, 5, 4), N(1, 5)}, linear},
    {"linear_nobias", 2, {N(2, 6, 4), N(2, 3, 4)}, linear_nobias},
    {"add_same", 2, {N(2, 3, 4), N(2, 3, 4)}, add},
    {"add_bias", 2, {N(3, 2, 3, 4), N(1, 4)}, add},
    {"add_table", 2, {N(3, 2, 3, 4), N(2, 3, 4)}, add},
    {"add_twice", 1, {N(2, 3, 4)}, add_twice},
    {"mul_same", 2, {N(2, 3, 4), N(2, 3, 4)}, mul},
    {"mul_bias", 2, {N(3, 2, 3, 4), N(1, 4)}, mul},
    {"mul_twice", 1, {N(2, 3, 4)}, mul_twice},
    {"div_same", 2, {N(2, 3, 4), POS(2, 3, 4)}, div},
    {"div_bias", 2, {N(3, 2, 3, 4), POS(1, 4)}, div},
    {"div_twice", 1, {POS(2, 3, 4)}, div_twice},
    {"scale", 1, {N(2, 3, 4)}, scale},
    {"sum", 1, {N(2, 3, 4)}, sum},
    {"mean", 1, {N(3, 2, 3, 4)}, mean},
    {"reshape", 1, {N(3, 2, 3, 4)}, reshape},
    {"split_heads", 1, {N(3, 2, 3, 8)}, split_heads},
    {"merge_heads", 1, {N(4, 2, 2, 3, 4)}, merge_heads},
    {"gelu", 1, {N(2, 4, 5)}, gelu},
    {"relu", 1, {NZ(2, 4, 5)}, relu},
    {"leakyrelu", 1, {NZ(2, 4, 5)}, leakyrelu},
    {"elu_plus_one", 1, {NZ(2, 4, 5)}, elu_plus_one},
    {"elu_alpha", 1, {NZ(2, 4, 5)}, elu_alpha},
    {"exp", 1, {N(2, 4, 5)}, exponential},
    {"sigmoid", 1, {N(2, 4, 5)}, sigmoid},
    {"identity", 1, {N(2, 4, 5)}, identity},
    {"layernorm", 3, {N(3, 3, 4, 6), N(1, 6), N(1, 6)}, layernorm},
    {"rmsnorm", 2, {N(2, 3, 6), N(1, 6)}, rmsnorm},
    {"softmax", 1, {N(2, 3, 5)}, softmax},
    {"softmax_causal", 1, {N(4, 2, 2, 4, 4)}, softmax_causal},
    {"softmax_bias", 2, {N(3, 2, 4, 4), N(2, 4, 4)}, softmax_bias},
    {"softmax_empty_row", 1, {N(3, 2, 3, 3)}, softmax_empty_row},
    {"embedding", 1, {N(2, CASE_VOCAB, 3)}, embedding},
    {"cross_entropy", 1, {N(2, 6, 5)}, cross_entropy},
    {"mlp_block", 4, {N(3, 2, 3, 4), N(2, 8, 4), N(2, 4, 8), POS(1, 4)}, mlp_block},
    {"add_layernorm", 4, {N(3, 2, 3, 6), N(3, 2, 3, 6), N(1, 6), N(1, 6)}, add_layernorm},
    {"add_layernorm_norm_only", 4, {N(2, 4, 5), N(2, 4, 5), N(1, 5), N(1, 5)}, add_layernorm_norm_only},
    {"add_layernorm_sum_only", 4, {N(2, 4, 5), N(2, 4, 5), N(1, 5), N(1, 5)}, add_layernorm_sum_only},
    {"add_layernorm_twice", 3, {N(3, 2, 3, 6), N(1, 6), N(1, 6)}, add_layernorm_twice},
    {"add_layernorm_reread", 4, {N(2, 4, 6), N(2, 4, 6), N(1, 6), N(1, 6)}, add_layernorm_reread},
    {"add_rmsnorm", 3, {N(3, 2, 3, 6), N(3, 2, 3, 6), N(1, 6)}, add_rmsnorm},
    {"add_rmsnorm_norm_only", 3, {N(2, 3, 5), N(2, 3, 5), N(1, 5)}, add_rmsnorm_norm_only},
    {"add_rmsnorm_reread", 3, {N(2, 4, 6), N(2, 4, 6), N(1, 6)}, add_rmsnorm_reread},
};
const int n_op_cases = (int)(sizeof op_cases / sizeof op_cases[0]);
