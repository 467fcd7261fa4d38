/* cases_positions.c: positions in the plain softmax kernel for the kernel
 * tables; see tests/cases_positions.h. */
#include "cases_positions.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "test_util.h"
#include "util.h"

int positions_query_block;

/* The position options of a variant in m. */
static void set(ModelConfig *m, int pos, int window, bool bca, bool logn) {
    m->context = POS_CONTEXT;
    m->pos = pos;
    m->window = window;
    m->bca = bca;
    m->logn = logn;
    m->sandwich_lambda = 0.7f;
    softmax_opts(m)->query_block = positions_query_block;
}

AttnCall positions_call(ModelConfig *m, bool causal, int pos, int window, bool bca, bool logn) {
    AttnCall c = kernel_case_call(m, &attn_kernel_softmax, causal);
    set(m, pos, window, bca, logn);
    return c;
}

/* ---- the definitions, written out ------------------------------------------ */

/* ALiBi's slopes as the paper's code defines them, recursively: a power of
 * two n gives start, start^2, ... with start = 2^(-8 / n); otherwise the
 * nearest lower power of two, then every other slope of twice that. */
static void slopes(int n, double *m) {
    int p2 = 1;
    while (p2 * 2 <= n) p2 *= 2;
    double start = pow(2.0, -8.0 / p2);
    for (int h = 0; h < p2; h++) m[h] = pow(start, h + 1);
    if (p2 == n) return;
    double twice[2 * p2];
    slopes(2 * p2, twice);
    for (int h = p2; h < n; h++) m[h] = twice[2 * (h - p2)];
}

static double bias_at(const AttnCall *c, const float *p0, const float *p1, int h, int delta) {
    const char *pos = pos_name(c->cfg->pos);
    if (!strcmp(pos, "alibi")) {
        double m[c->H];
        slopes(c->H, m);
        return -m[h] * delta;
    }
    if (!strcmp(pos, "kerple_power")) {
        double a = fmax(p0[h], 0.01), p = fmin(fmax(p1[h], 0.01), 2.0);
        return delta == 0 ? 0.0 : -a * pow(delta, p);
    }
    if (!strcmp(pos, "kerple_log")) return -fmax(p0[h], 0.01) * log(1.0 + fmax(p1[h], 0.01) * delta);
    if (!strcmp(pos, "sandwich")) {
        int d = c->H * c->key_size;
        double dot = 0.0;
        for (int k = 0; k < d / 2; k++) dot += cos(delta * pow(10000.0, -2.0 * k / d));
        return c->cfg->sandwich_lambda * dot / (8.0 * (h + 1) / c->H);
    }
    return 0.0;
}

void positions_reference(const AttnCall *c, const float *p0, const float *p1, float *mask, float *lambda, float *bias) {
    int T = c->T;
    int blen = c->cfg->context / 2 > 1 ? c->cfg->context / 2 : 1;
    for (int i = 0; i < T; i++) {
        int seen = 0;
        for (int j = 0; j < T; j++) {
            bool ok = !c->causal || j <= i;
            if (c->cfg->window > 0) ok = ok && abs(i - j) < c->cfg->window; /* both sides when bidirectional */
            if (c->causal && c->cfg->bca) ok = ok && j / blen >= i / blen - 1;
            mask[i * T + j] = ok ? 0.0f : -INFINITY;
            seen += ok;
        }
        double l = c->cfg->logn ? log((double)seen) / log((double)c->cfg->context) : 1.0;
        lambda[i] = (float)(l > 1.0 ? l : 1.0);
        for (int h = 0; h < c->H; h++)
            for (int j = 0; j < T; j++)
                bias[((long)h * T + i) * T + j] = mask[i * T + j] == 0.0f /* masked: 0, not kerple's NaN at delta < 0 */
                                                      ? (float)bias_at(c, p0, p1, h, c->causal ? i - j : abs(i - j))
                                                      : 0.0f;
    }
}

Tensor *positions_compose(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v, Tensor **probs) {
    int T = q->shape[2], H = q->shape[1];
    AttnCall cc = *c;
    cc.T = T;
    cc.H = H;
    cc.key_size = q->shape[3];
    Tensor *mask = tensor_2d(T, T), *L = tensor_2d(T, T), *bias = tensor_new(3, (int[]){H, T, T});
    float lambda[T];
    bool has_p = pos_param_count(c->cfg->pos) > 0;
    positions_reference(&cc, has_p ? c->params[0]->data : NULL, has_p ? c->params[1]->data : NULL, mask->data, lambda,
                        bias->data);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) L->data[i * T + j] = lambda[i];
    Tensor *s = op_scale(op_matmul(q, k, false, true), c->scale);
    if (c->cfg->logn) s = op_mul(s, L);
    if (pos_scheme(c->cfg->pos)->bias) s = op_add(s, bias);
    Tensor *p = op_softmax(s, mask);
    *probs = p;
    return op_matmul(p, v, false, false);
}

/* ---- gradient-check builds --------------------------------------------------- */

static Tensor *run(Tensor **in, bool causal, int pos, int window, bool bca, bool logn) {
    ModelConfig m;
    AttnCall c = positions_call(&m, causal, pos, window, bca, logn);
    if (pos_param_count(pos)) {
        c.params[0] = in[3];
        c.params[1] = in[4];
    }
    return kernel_by_name("softmax")->forward(&c, in[0], in[1], in[2]);
}

/* x [H] (H = 2) times the fixed factors (f0, f1), on the tape. */
static Tensor *times(Tensor *x, float f0, float f1) {
    Tensor *f = tensor_new(1, (int[]){KC_H});
    f->data[0] = f0;
    f->data[1] = f1;
    return op_mul(x, f);
}

Tensor *pos_alibi_causal(Tensor **in) { return run(in, true, pos_of("alibi"), 0, false, false); }
Tensor *pos_alibi_bidirectional(Tensor **in) { return run(in, false, pos_of("alibi"), 0, false, false); }
Tensor *pos_kerple_power_causal(Tensor **in) { return run(in, true, pos_of("kerple_power"), 0, false, false); }
Tensor *pos_kerple_power_bidirectional(Tensor **in) { return run(in, false, pos_of("kerple_power"), 0, false, false); }
/* head 1: a < 0 (clamped to 0.01), p in [2.5, 7.5] > 2 (clamped to 2) */
Tensor *pos_kerple_power_clamp(Tensor **in) {
    Tensor *x[5] = {in[0], in[1], in[2], times(in[3], 1.0f, -1.0f), times(in[4], 1.0f, 5.0f)};
    return run(x, true, pos_of("kerple_power"), 0, false, false);
}
Tensor *pos_kerple_log_causal(Tensor **in) { return run(in, true, pos_of("kerple_log"), 0, false, false); }
Tensor *pos_kerple_log_bidirectional(Tensor **in) { return run(in, false, pos_of("kerple_log"), 0, false, false); }
/* head 1: r1 < 0 and r2 < 0, both clamped to 0.01 */
Tensor *pos_kerple_log_clamp(Tensor **in) {
    Tensor *x[5] = {in[0], in[1], in[2], times(in[3], 1.0f, -1.0f), times(in[4], 1.0f, -1.0f)};
    return run(x, false, pos_of("kerple_log"), 0, false, false);
}
Tensor *pos_sandwich_causal(Tensor **in) { return run(in, true, pos_of("sandwich"), 0, false, false); }
Tensor *pos_sandwich_bidirectional(Tensor **in) { return run(in, false, pos_of("sandwich"), 0, false, false); }
Tensor *pos_window1(Tensor **in) { return run(in, true, pos_of("none"), 1, false, false); }
Tensor *pos_window2(Tensor **in) { return run(in, true, pos_of("none"), 2, false, false); }
Tensor *pos_window3(Tensor **in) { return run(in, true, pos_of("none"), 3, false, false); }
Tensor *pos_window8(Tensor **in) { return run(in, true, pos_of("none"), 8, false, false); }
Tensor *pos_window1_bidirectional(Tensor **in) { return run(in, false, pos_of("none"), 1, false, false); }
Tensor *pos_window2_bidirectional(Tensor **in) { return run(in, false, pos_of("none"), 2, false, false); }
Tensor *pos_alibi_window_logn_bidirectional(Tensor **in) { return run(in, false, pos_of("alibi"), 2, false, true); }
Tensor *pos_bca(Tensor **in) { return run(in, true, pos_of("none"), 0, true, false); }
Tensor *pos_logn_causal(Tensor **in) { return run(in, true, pos_of("none"), 0, false, true); }
Tensor *pos_logn_bidirectional(Tensor **in) { return run(in, false, pos_of("none"), 0, false, true); }
Tensor *pos_alibi_window_logn(Tensor **in) { return run(in, true, pos_of("alibi"), 2, false, true); }
Tensor *pos_kerple_bca(Tensor **in) { return run(in, true, pos_of("kerple_power"), 0, true, false); }

/* ---- reference setups --------------------------------------------------------- */

/* Fixed [H] parameters: head 0 inside the clamps, head 1 outside. */
static void kerple_params(AttnCall *c, float a0, float a1, float b0, float b1) {
    for (int i = 0; i < 2; i++) {
        Tensor *t = tensor_new(1, (int[]){KC_H});
        t->data[0] = i ? b0 : a0;
        t->data[1] = i ? b1 : a1;
        c->params[i] = t;
    }
}

void pos_setup_alibi(AttnCall *c, ModelConfig *m) {
    (void)c;
    set(m, pos_of("alibi"), 0, false, false);
}
void pos_setup_kerple_power(AttnCall *c, ModelConfig *m) {
    set(m, pos_of("kerple_power"), 0, false, false);
    kerple_params(c, 0.6f, -0.3f, 0.8f, 2.7f);
}
void pos_setup_kerple_log(AttnCall *c, ModelConfig *m) {
    set(m, pos_of("kerple_log"), 0, false, false);
    kerple_params(c, 1.3f, 0.002f, 0.4f, -0.5f);
}
void pos_setup_sandwich(AttnCall *c, ModelConfig *m) {
    (void)c;
    set(m, pos_of("sandwich"), 0, false, false);
}
void pos_setup_window2(AttnCall *c, ModelConfig *m) {
    (void)c;
    set(m, pos_of("none"), 2, false, false);
}
void pos_setup_bca(AttnCall *c, ModelConfig *m) {
    (void)c;
    set(m, pos_of("none"), 0, true, false);
}
void pos_setup_logn(AttnCall *c, ModelConfig *m) {
    (void)c;
    set(m, pos_of("none"), 0, false, true);
}
void pos_setup_alibi_window_logn(AttnCall *c, ModelConfig *m) {
    (void)c;
    set(m, pos_of("alibi"), 2, false, true);
}
void pos_setup_kerple_bca(AttnCall *c, ModelConfig *m) {
    set(m, pos_of("kerple_power"), 0, true, false);
    kerple_params(c, 0.6f, 1.1f, 0.5f, 1.6f);
}
