/* cases_talking.c: Talking-Heads attention (the softmax kernel's
 * talking_heads = pre, post, both) for the kernel tables; see
 * tests/cases_talking.h. */
#include "cases_talking.h"

#include <math.h>

#include "ops.h"
#include "util.h"

/* in = {q, k, v, then the mixing matrices}, through the softmax kernel. */
static Tensor *run_talking(int talking, bool causal, Tensor **in) {
    ModelConfig m;
    AttnCall c = kernel_case_call(&m, &attn_kernel_softmax, causal);
    softmax_opts(&m)->talking_heads = talking;
    c.params[0] = in[3];
    if (talking == TALKING_BOTH) c.params[1] = in[4];
    return kernel_by_name("softmax")->forward(&c, in[0], in[1], in[2]);
}

Tensor *talking_pre_causal(Tensor **in) { return run_talking(TALKING_PRE, true, in); }
Tensor *talking_pre_bidirectional(Tensor **in) { return run_talking(TALKING_PRE, false, in); }
Tensor *talking_post_causal(Tensor **in) { return run_talking(TALKING_POST, true, in); }
Tensor *talking_post_bidirectional(Tensor **in) { return run_talking(TALKING_POST, false, in); }
Tensor *talking_both_causal(Tensor **in) { return run_talking(TALKING_BOTH, true, in); }
Tensor *talking_both_bidirectional(Tensor **in) { return run_talking(TALKING_BOTH, false, in); }

void talking_setup_pre(AttnCall *c, ModelConfig *m) {
    (void)c;
    softmax_opts(m)->talking_heads = TALKING_PRE;
}
void talking_setup_post(AttnCall *c, ModelConfig *m) {
    (void)c;
    softmax_opts(m)->talking_heads = TALKING_POST;
}
void talking_setup_both(AttnCall *c, ModelConfig *m) {
    (void)c;
    softmax_opts(m)->talking_heads = TALKING_BOTH;
}

/* out[b, g] = sum_h W[g, h] x[b, h] for x [B, H, T, T']: x as [B, H, T T', 1]
 * merges to [B, T T', H], whose rows times W^T mix the heads; split_heads
 * brings the head axis back. */
static Tensor *mix_heads(Tensor *x, Tensor *w) {
    int B = x->shape[0], H = x->shape[1], N = x->shape[2] * x->shape[3];
    Tensor *rows = op_merge_heads(op_reshape(x, 4, (int[]){B, H, N, 1})); /* [B, N, H] */
    Tensor *mixed = op_matmul(rows, w, false, true);
    return op_reshape(op_split_heads(mixed, H), 4, x->shape);
}

Tensor *talking_compose(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v, Tensor **probs) {
    int talking = ((const SoftmaxOpts *)c->opts)->talking_heads;
    bool pre = talking == TALKING_PRE || talking == TALKING_BOTH;
    bool post = talking == TALKING_POST || talking == TALKING_BOTH;
    Tensor *wpre = pre ? c->params[0] : NULL, *wpost = post ? c->params[pre] : NULL;
    if ((pre && !wpre) || (post && !wpost)) DIE("talking_compose: a mixing matrix is missing");
    Tensor *mask = NULL;
    int T = q->shape[2];
    if (c->causal) {
        mask = tensor_2d(T, T);
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) mask->data[i * T + j] = j <= i ? 0.0f : -INFINITY;
    }
    Tensor *s = op_scale(op_matmul(q, k, false, true), c->scale);
    if (wpre) s = mix_heads(s, wpre); /* the raw logits, before the mask */
    Tensor *p = op_softmax(s, mask);
    if (wpost) p = mix_heads(p, wpost);
    *probs = p;
    return op_matmul(p, v, false, false);
}
