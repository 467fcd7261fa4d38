#include "layer_cases.h"

#include <math.h>
#include <string.h>

#include "cases_linear.h"
#include "cases_linformer.h"
#include "cases_positions.h"
#include "cases_talking.h"
#include "attention/positions.h"
#include "ops.h"
#include "options.h"
#include "test_util.h"
#include "util.h"

const AttnKernel *kernel_by_name(const char *name) {
    for (int i = 0; i < attn_kernel_count(); i++)
        if (attn_kernels[i] && strcmp(attn_kernels[i]->name, name) == 0) return attn_kernels[i];
    return NULL;
}

AttnCall kernel_case_call(ModelConfig *m, const AttnKernel *kern, bool causal) {
    Config defaults;
    config_defaults(&defaults);
    *m = (ModelConfig){.heads = KC_H, .key_size = KC_DK, .head_size = KC_DV, .d_model = KC_H * KC_DK,
                       .objective = causal ? OBJECTIVE_CLM : OBJECTIVE_MLM};
    memcpy(m->kernel_options, defaults.model.kernel_options, sizeof m->kernel_options);
    AttnCall c = attn_call(kern, m, 0);
    c.B = KC_B;
    c.T = KC_T;
    return c;
}

/* in = {q, k, v}, through the named kernel's forward. */
static Tensor *run_kernel(const char *name, bool causal, Tensor **in) {
    const AttnKernel *k = kernel_by_name(name);
    if (!k) DIE("no attention kernel named %s", name);
    ModelConfig m;
    AttnCall c = kernel_case_call(&m, k, causal);
    return k->forward(&c, in[0], in[1], in[2]);
}

/* ---- softmax -------------------------------------------------------------- */

static Tensor *softmax_causal(Tensor **in) { return run_kernel("softmax", true, in); }
static Tensor *softmax_bidirectional(Tensor **in) { return run_kernel("softmax", false, in); }

/* P = softmax(scale q k^T + mask), out = P v, with op_softmax's -INFINITY mask
 * removing keys j > i when causal. */
static Tensor *softmax_compose(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v, Tensor **probs) {
    Tensor *mask = NULL;
    if (c->causal) {
        int T = c->T;
        mask = tensor_2d(T, T);
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) mask->data[i * T + j] = j <= i ? 0.0f : -INFINITY;
    }
    Tensor *s = op_scale(op_matmul(q, k, false, true), c->scale);
    Tensor *p = op_softmax(s, mask);
    *probs = p;
    return op_matmul(p, v, false, false);
}

/* ---- sigmoid (layers/attention/sigmoid.c): its cases, and its lines in the
 * tables below, are all a kernel needs here ---------------------------------- */

static Tensor *sigmoid_causal(Tensor **in) { return run_kernel("sigmoid", true, in); }
static Tensor *sigmoid_bidirectional(Tensor **in) { return run_kernel("sigmoid", false, in); }

/* The score-map op's masks and bias: a window of 3 with ALiBi and log-n
 * (context 2, so a row that sees 3 keys scales its logits by log 3 / log 2),
 * and causally BCA with ALiBi, in blocks of 2 query rows. */
static Tensor *sigmoid_masked(Tensor **in, bool causal, int window, bool bca) {
    const AttnKernel *kern = kernel_by_name("sigmoid");
    ModelConfig m;
    AttnCall c = kernel_case_call(&m, kern, causal);
    m.window = window, m.bca = bca ? ON : OFF, m.logn = window ? ON : OFF;
    m.pos = pos_of("alibi"), m.context = 2;
    c.query_block = 2;
    return kern->forward(&c, in[0], in[1], in[2]);
}
static Tensor *sigmoid_window_causal(Tensor **in) { return sigmoid_masked(in, true, 3, false); }
static Tensor *sigmoid_window_bidirectional(Tensor **in) { return sigmoid_masked(in, false, 3, false); }
static Tensor *sigmoid_bca(Tensor **in) { return sigmoid_masked(in, true, 0, true); }

/* P = sigmoid(scale q k^T - log T) M from core's ops, M zeroing keys j > i
 * when causal. */
static Tensor *sigmoid_compose(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v, Tensor **probs) {
    int T = c->T;
    Tensor *shift = tensor_new(0, NULL);
    shift->data[0] = -logf((float)T);
    Tensor *p = op_sigmoid(op_add(op_scale(op_matmul(q, k, false, true), c->scale), shift));
    if (c->causal) {
        Tensor *mask = tensor_2d(T, T);
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) mask->data[i * T + j] = j <= i ? 1.0f : 0.0f;
        p = op_mul(p, mask);
    }
    *probs = p;
    return op_matmul(p, v, false, false);
}

/* ---- the tables ------------------------------------------------------------ */

#define QKV {{4, {KC_B, KC_H, KC_T, KC_DK}, GC_NORMAL}, {4, {KC_B, KC_H, KC_T, KC_DK}, GC_NORMAL}, \
             {4, {KC_B, KC_H, KC_T, KC_DV}, GC_NORMAL}}

const KernelCase kernel_cases[] = {
    {{"attn_softmax_causal", 3, QKV, softmax_causal}, "softmax", true},
    {{"attn_softmax_bidirectional", 3, QKV, softmax_bidirectional}, "softmax", false},
    TALKING_KERNEL_CASES, /* tests/cases_talking.c */
    POSITIONS_KERNEL_CASES, /* tests/cases_positions.c */
    LINFORMER_KERNEL_CASES, /* tests/cases_linformer.c */
    LINEAR_KERNEL_CASES, /* tests/cases_linear.c */
    {{"attn_sigmoid_causal", 3, QKV, sigmoid_causal}, "sigmoid", true},
    {{"attn_sigmoid_bidirectional", 3, QKV, sigmoid_bidirectional}, "sigmoid", false},
    {{"attn_sigmoid_window_causal", 3, QKV, sigmoid_window_causal}, "sigmoid", true},
    {{"attn_sigmoid_window_bidirectional", 3, QKV, sigmoid_window_bidirectional}, "sigmoid", false},
    {{"attn_sigmoid_bca", 3, QKV, sigmoid_bca}, "sigmoid", true},
};
const int n_kernel_cases = (int)(sizeof kernel_cases / sizeof kernel_cases[0]);

const KernelRef kernel_refs[] = {
    {"softmax causal", "softmax", true, NULL, 0, {{0}}, softmax_compose, true},
    {"softmax bidirectional", "softmax", false, NULL, 0, {{0}}, softmax_compose, true},
    TALKING_KERNEL_REFS, /* tests/cases_talking.c */
    POSITIONS_KERNEL_REFS, /* tests/cases_positions.c */
    LINFORMER_KERNEL_REFS, /* tests/cases_linformer.c */
    LINEAR_KERNEL_REFS, /* tests/cases_linear.c */
    {"sigmoid causal", "sigmoid", true, NULL, 0, {{0}}, sigmoid_compose, true},
    {"sigmoid bidirectional", "sigmoid", false, NULL, 0, {{0}}, sigmoid_compose, true},
};
const int n_kernel_refs = (int)(sizeof kernel_refs / sizeof kernel_refs[0]);
