/* sigmoid.c: sigmoid attention (Ramapuram et al. 2024), each weight on its
 * own, no normalisation over the row:
 *   P = sigmoid(s Q K^T - log T) M,  O = P V
 * (M the masks; the bias -log T keeps a row's sum near 1 at the start). A
 * score map (scoremap.h): f, f' and the kernel's entry are all there is. */
#include <math.h>

#include "fastmath.h"
#include "scoremap.h"

static void sigmoid_map(const float *s, float *p, int n, int T) {
    float b = -logf((float)T);
    #pragma omp simd
    for (int j = 0; j < n; j++) p[j] = fm_sigmoidf(s[j] + b);
}
static void sigmoid_grad(const float *s, const float *p, float *d, int n, int T) {
    (void)s, (void)T;
    #pragma omp simd
    for (int j = 0; j < n; j++) d[j] *= p[j] * (1.0f - p[j]); /* sigmoid' = p (1 - p) */
}
static const ScoreMap sigmoid_map_ = {sigmoid_map, sigmoid_grad};

static Tensor *sigmoid_forward(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v) {
    return scoremap_attention(&sigmoid_map_, c, q, k, v);
}
static Tensor *sigmoid_probs(const AttnCall *c, Tensor *q, Tensor *k) { return scoremap_probs(&sigmoid_map_, c, q, k); }

const AttnKernel attn_kernel_sigmoid = {
    .name = "sigmoid",              /* the attn value */
    .forward = sigmoid_forward,
    .probs = sigmoid_probs,         /* P [B, H, T, T] for ./spectrum */
    .ops = {&scoremap_op},          /* its fused ops, for the tests */
    .qkv16 = attn_qkv_fp32,         /* q, k, v as floats (the score-map op reads no bf16) */
    .title = "attn=sigmoid",        /* how errors name it */
    .validate = scoremap_validate,  /* refuses the learned score biases */
    .flops = scoremap_flops,        /* its products, for ./bench --scaling */
    .scores = true,                 /* it forms a score matrix: biases and masks apply */
};
