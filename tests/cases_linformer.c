/* cases_linformer.c: the Linformer kernel for the kernel tables; see
 * tests/cases_linformer.h. */
#include "cases_linformer.h"

#include "ops.h"
#include "util.h"


/* max pooling: d_c((2t + c) mod 5 - 2) for row t, channel c. Neighbours in
 * time differ by at least 2 d, far more than the N(0, s^2) leaves can undo. */
static Tensor *spread(Tensor *x, float s, float d) {
    int T = x->shape[2], D = x->shape[3];
    Tensor *pattern = tensor_2d(T, D);
    for (int t = 0; t < T; t++)
        for (int c = 0; c < D; c++) pattern->data[t * D + c] = d * (float)((2 * t + c) % 5 - 2);
    return op_add(op_scale(x, s), pattern);
}

/* The options of a variant: context n, projected length k. */
static void setup(AttnCall *c, ModelConfig *m, int proj, int share, int n, int k) {
    (void)c;
    linformer_opts(m)->linformer_proj = proj;
    linformer_opts(m)->linformer_share = share;
    m->context = n;
    linformer_opts(m)->linformer_k[0] = k;
}

/* in = {q, k, v, then E and F as the share mode has them}. */
static Tensor *run_case(int proj, int share, Tensor **in) {
    ModelConfig m;
    AttnCall c = kernel_case_call(&m, &attn_kernel_linformer, false);
    setup(&c, &m, proj, share, LF_N, LF_K);
    Tensor *k = in[1], *v = in[2];
    if (proj == LF_PROJ_MAX) {
        k = spread(k, 0.5f, 1.5f);
        v = spread(v, 0.5f, 1.5f);
    }
    if (proj == LF_PROJ_LINEAR || proj == LF_PROJ_CONV) {
        c.params[0] = in[3];
        if (share == LF_SHARE_NONE || share == LF_SHARE_HEADWISE) c.params[1] = in[4];
    }
    return kernel_by_name("linformer")->forward(&c, in[0], k, v);
}

#define LF_CASE_FN(proj, PROJ, share, SHARE) \
    Tensor *lf_case_##proj##_##share(Tensor **in) { return run_case(LF_PROJ_##PROJ, LF_SHARE_##SHARE, in); }
#define LF_CASE_FNS(proj, PROJ)                       \
    LF_CASE_FN(proj, PROJ, none, NONE)                \
    LF_CASE_FN(proj, PROJ, headwise, HEADWISE)        \
    LF_CASE_FN(proj, PROJ, kv, KV)                    \
    LF_CASE_FN(proj, PROJ, layerwise, LAYERWISE)

LF_CASE_FNS(linear, LINEAR)
LF_CASE_FNS(conv, CONV)
LF_CASE_FNS(mean, MEAN)
LF_CASE_FNS(max, MAX)


void lf_setup_linear_none(AttnCall *c, ModelConfig *m) { setup(c, m, LF_PROJ_LINEAR, LF_SHARE_NONE, LF_N, LF_K); }
void lf_setup_linear_headwise(AttnCall *c, ModelConfig *m) { setup(c, m, LF_PROJ_LINEAR, LF_SHARE_HEADWISE, LF_N, LF_K); }
void lf_setup_linear_kv(AttnCall *c, ModelConfig *m) { setup(c, m, LF_PROJ_LINEAR, LF_SHARE_KV, LF_N, LF_K); }
void lf_setup_linear_layerwise(AttnCall *c, ModelConfig *m) { setup(c, m, LF_PROJ_LINEAR, LF_SHARE_LAYERWISE, LF_N, LF_K); }
void lf_setup_linear_none_full(AttnCall *c, ModelConfig *m) { setup(c, m, LF_PROJ_LINEAR, LF_SHARE_NONE, KC_T, LF_K); }
void lf_setup_conv_none(AttnCall *c, ModelConfig *m) { setup(c, m, LF_PROJ_CONV, LF_SHARE_NONE, LF_N, LF_K); }
void lf_setup_conv_headwise(AttnCall *c, ModelConfig *m) { setup(c, m, LF_PROJ_CONV, LF_SHARE_HEADWISE, LF_N, LF_K); }
void lf_setup_conv_kv(AttnCall *c, ModelConfig *m) { setup(c, m, LF_PROJ_CONV, LF_SHARE_KV, LF_N, LF_K); }
void lf_setup_conv_layerwise(AttnCall *c, ModelConfig *m) { setup(c, m, LF_PROJ_CONV, LF_SHARE_LAYERWISE, LF_N, LF_K); }
void lf_setup_conv_n8_k2(AttnCall *c, ModelConfig *m) { setup(c, m, LF_PROJ_CONV, LF_SHARE_KV, 8, 2); }
void lf_setup_mean(AttnCall *c, ModelConfig *m) { setup(c, m, LF_PROJ_MEAN, LF_SHARE_NONE, LF_N, LF_K); }
void lf_setup_mean_n10_k2(AttnCall *c, ModelConfig *m) { setup(c, m, LF_PROJ_MEAN, LF_SHARE_NONE, 10, 2); }

/* A constant (no gradient) of this shape, zeroed. */
static Tensor *constant(int ndim, const int *shape) { return tensor_zeros(ndim, shape); }

Tensor *lf_compose_projection(const AttnCall *c, Tensor *w, int B, int T) {
    const LinformerOpts *o = c->opts;
    const int H = c->H, proj = o->linformer_proj;
    if (proj == LF_PROJ_MAX) DIE("lf_compose_projection: max pooling is no matrix");
    int s = c->cfg->context / lf_k(o, c->layer);
    int kp = proj == LF_PROJ_LINEAR ? w->shape[w->ndim - 2] : (T + s - 1) / s;
    Tensor *zeros = constant(4, (int[]){B, H, kp, T});
    if (proj == LF_PROJ_MEAN) { /* row j: 1 / |window j| on the window */
        Tensor *A = constant(2, (int[]){kp, T});
        for (int j = 0; j < kp; j++) {
            int lo = j * s, hi = lo + s < T ? lo + s : T;
            for (int t = lo; t < hi; t++) A->data[j * T + t] = 1.0f / (float)(hi - lo);
        }
        return op_add(zeros, A);
    }
    if (proj == LF_PROJ_LINEAR) { /* E [.., k, n] times the 0/1 [n, T] that keeps columns 0..T-1 */
        int n = w->shape[w->ndim - 1];
        Tensor *pick = constant(2, (int[]){n, T});
        for (int t = 0; t < T; t++) pick->data[t * T + t] = 1.0f;
        return op_add(zeros, op_matmul(w, pick, false, false));
    }
    /* conv: w [.., s] times M [s, k' T] with M[r, (j, t)] = [t = j s + r]: row
     * j of the result holds w_r at column j s + r */
    Tensor *M = constant(2, (int[]){s, kp * T});
    for (int j = 0; j < kp; j++)
        for (int r = 0; r < s && j * s + r < T; r++) M->data[(long)r * kp * T + j * T + j * s + r] = 1.0f;
    bool per_head = w->ndim == 2;
    Tensor *w2 = per_head ? w : op_reshape(w, 2, (int[]){1, s});
    Tensor *spread = op_matmul(w2, M, false, false); /* [H or 1, k' T] */
    Tensor *E = per_head ? op_reshape(spread, 3, (int[]){H, kp, T}) : op_reshape(spread, 2, (int[]){kp, T});
    return op_add(zeros, E);
}

/* P = softmax(scale q (E k)^T), out = P (F v). */
Tensor *lf_compose(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v, Tensor **probs) {
    int B = q->shape[0], T = q->shape[2];
    Tensor *E = c->params[0], *F = c->params[1] ? c->params[1] : E;
    Tensor *kp = op_matmul(lf_compose_projection(c, E, B, T), k, false, false);
    Tensor *vp = op_matmul(lf_compose_projection(c, F, B, T), v, false, false);
    Tensor *p = op_softmax(op_scale(op_matmul(q, kp, false, true), c->scale), NULL);
    *probs = p;
    return op_matmul(p, vp, false, false);
}
