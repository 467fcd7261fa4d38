/* linformer.c: Linformer attention (Wang et al. 2020, "Linformer:
 * Self-Attention with Linear Complexity"), bidirectional only.
 *
 * Keys and values are projected along the sequence to k' rows before the
 * softmax, so a head costs O(T k') time and memory instead of O(T^2). Per
 * batch element and head, with s = 1 / sqrt(key_size):
 *   K' = E K,  V' = F V                  K' [k', dk], V' [k', dv]
 *   P = softmax(s Q K'^T)  [T, k'],  O = P V'
 * Two fused ops do this, each with a hand-written backward:
 *   linformer_project  x [B, H, T, d] -> x' [B, H, k', d], one per K and V;
 *   linformer_attend   q, K', V' -> O, keeping P for backward.
 *
 * linformer_proj chooses the projection (n = context, k = linformer_k):
 *   linear  x' = E[:, :T] x with a learned E [k, n]: a shorter input (T < n)
 *           uses the first T columns; k' = k. T > n is an error.
 *   mean    average pooling along the sequence, kernel = stride = n / k;
 *   max     max pooling, the same windows;
 *   conv    a learned strided convolution along the sequence, kernel =
 *           stride = n / k, one channel in and out: x'_j = sum_r w_r x_{j s + r}
 *           (s = n / k), applied to every feature channel alike (PyTorch's
 *           Conv1d(1, 1, n / k, stride = n / k, bias = False) over each channel).
 * The paper's pooling and convolution alternatives (its section 5). The
 * windows of pooling and conv are [j s, j s + s) for j < k' = ceil(T / s): for
 * T < n they cover the first T positions, and when s does not divide T the
 * last window is partial (mean divides by the positions present, max takes
 * them, conv sees zeros past the end: PyTorch's avg_pool1d / max_pool1d with
 * ceil_mode = True, and conv1d on a zero-padded input). They need no n, so an
 * input longer than the context just gets more windows.
 *
 * linformer_share chooses which projections are one tensor (the parameters, as
 * a PyTorch module would name them in its state_dict; conv has the kernel
 * [n / k] in place of [k, n]):
 *   none       blocks.{i}.attn.E, blocks.{i}.attn.F  [H, k, n]: per head and layer
 *   headwise   blocks.{i}.attn.E, blocks.{i}.attn.F  [k, n]: shared by the heads
 *   kv         blocks.{i}.attn.E  [k, n], and F = E
 *   layerwise  linformer.E  [k, n]: one tensor for every layer, F = E (the
 *              module holds it once, beside tok_emb, and hands it to each layer)
 * mean and max have no parameters, whatever the share mode.
 *
 * Initialisation: the fan-in scaling of nn.Linear, as a normal: E, F and the
 * conv kernels are N(0, 1 / fan_in) with fan_in = the positions a projected
 * row sums over (n for linear, n / k for conv), so a row of E K has the scale
 * of a row of K. The layerwise E is drawn once.
 *
 * Threads: OpenMP over batch x heads, each writing its own slice; gradients
 * of shared projections are summed by a second loop over their rows, each
 * row owned by one thread, so results do not depend on the thread count. */
#include "gemm.h"
#include <math.h>

#include "attention/linformer.h"
#include "layers.h"
#include "op_kernel.h"
#include "softmax_parts.h"
#include "util.h"

/* ---- linformer_project ------------------------------------------------------ */

/* node: in[0] = x [B, H, T, d], in[1] = E or the conv kernel (absent for mean
 * and max). Output [B, H, k', d]. */
typedef struct {
    int proj;      /* LinformerProj */
    int stride;    /* the pooling stride s */
    bool per_head; /* in[1] has a leading head dimension */
} LfProjectAttrs;
NODE_ATTRS_DECLARE(LfProjectAttrs);

typedef struct {
    int B, H, T, d, kp; /* kp = k', the projected length */
    int proj, s;
    int n;              /* linear: E's columns (lda) */
    long w_head;        /* elements of in[1] per head; 0 when shared */
} Proj;

static Proj proj_of(const Node *nd) {
    const Tensor *x = nd->in[0], *w = nd->n_in > 1 ? nd->in[1] : NULL;
    const LfProjectAttrs *a = NODE_ATTRS(nd, LfProjectAttrs);
    Proj p = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], nd->out->shape[2], a->proj, a->stride, 0, 0};
    if (w) {
        p.n = w->shape[w->ndim - 1];
        p.w_head = a->per_head ? w->n / w->shape[0] : 0;
    }
    return p;
}

/* The window [*lo, *hi) of projected row j. */
static inline void window(const Proj *p, int j, int *lo, int *hi) {
    *lo = j * p->s;
    *hi = *lo + p->s < p->T ? *lo + p->s : p->T;
}

static void lf_project_forward(Node *nd) {
    Proj p = proj_of(nd);
    const Tensor *x = nd->in[0];
    const float *w = nd->n_in > 1 ? nd->in[1]->data : NULL;
    #pragma omp parallel for
    for (int bh = 0; bh < p.B * p.H; bh++) {
        const float *xh = x->data + (long)bh * p.T * p.d;
        const float *wh = w ? w + (bh % p.H) * p.w_head : NULL;
        float *o = nd->out->data + (long)bh * p.kp * p.d;
        if (p.proj == LF_PROJ_LINEAR) { /* x' = E[:, :T] x */
            gemm(false, false, p.kp, p.d, p.T, 1.0f, wh, p.n, xh, p.d, 0.0f, o,
                        p.d);
            continue;
        }
        for (int j = 0; j < p.kp; j++) {
            int lo, hi;
            window(&p, j, &lo, &hi);
            float *restrict oj = o + (long)j * p.d;
            const float *restrict x0 = xh + (long)lo * p.d;
            float first = p.proj == LF_PROJ_CONV ? wh[0] : 1.0f;
            for (int c = 0; c < p.d; c++) oj[c] = first * x0[c];
            for (int t = lo + 1; t < hi; t++) {
                const float *restrict xt = xh + (long)t * p.d;
                if (p.proj == LF_PROJ_MAX) /* the first maximum wins, as in PyTorch */
                    for (int c = 0; c < p.d; c++) oj[c] = xt[c] > oj[c] ? xt[c] : oj[c];
                else {
                    float wt = p.proj == LF_PROJ_CONV ? wh[t - lo] : 1.0f;
                    for (int c = 0; c < p.d; c++) oj[c] += wt * xt[c];
                }
            }
            if (p.proj == LF_PROJ_MEAN) {
                float inv = 1.0f / (float)(hi - lo);
                for (int c = 0; c < p.d; c++) oj[c] *= inv;
            }
        }
    }
}

/* dx for one head: the transpose of the forward's map applied to dx'. */
static void project_dx(const Proj *p, const float *xh, const float *oh, const float *wh, const float *dout,
                       float *dx) {
    if (p->proj == LF_PROJ_LINEAR) { /* dx += E[:, :T]^T dx' */
        gemm(true, false, p->T, p->d, p->kp, 1.0f, wh, p->n, dout, p->d, 1.0f,
                    dx, p->d);
        return;
    }
    for (int j = 0; j < p->kp; j++) {
        int lo, hi;
        window(p, j, &lo, &hi);
        const float *restrict g = dout + (long)j * p->d;
        if (p->proj == LF_PROJ_MAX) {
            /* x'_jc = max_t x_tc: the gradient goes to the first t that attains
             * it (found again by equality: x' holds that very value) */
            const float *oj = oh + (long)j * p->d;
            for (int c = 0; c < p->d; c++)
                for (int t = lo; t < hi; t++)
                    if (xh[(long)t * p->d + c] == oj[c]) {
                        dx[(long)t * p->d + c] += g[c];
                        break;
                    }
            continue;
        }
        for (int t = lo; t < hi; t++) { /* mean: x'_j = sum x_t / (hi - lo); conv: x'_j = sum w_{t-lo} x_t */
            float wt = p->proj == LF_PROJ_CONV ? wh[t - lo] : 1.0f / (float)(hi - lo);
            float *restrict dxt = dx + (long)t * p->d;
            for (int c = 0; c < p->d; c++) dxt[c] += wt * g[c];
        }
    }
}

static void lf_project_backward(Node *nd) {
    Proj p = proj_of(nd);
    Tensor *x = nd->in[0], *w = nd->n_in > 1 ? nd->in[1] : NULL;
    const float *dout = nd->out->grad, *out = nd->out->data;
    const int BH = p.B * p.H;
    if (x->requires_grad) {
        float *dx = tensor_grad(x);
        #pragma omp parallel for
        for (int bh = 0; bh < BH; bh++)
            project_dx(&p, x->data + (long)bh * p.T * p.d, out + (long)bh * p.kp * p.d,
                       w ? w->data + (bh % p.H) * p.w_head : NULL, dout + (long)bh * p.kp * p.d,
                       dx + (long)bh * p.T * p.d);
    }
    if (!w || !w->requires_grad) return;
    float *dw = tensor_grad(w);
    /* G projections: one per head, or one for all. Head h feeds projection
     * h % G with every batch element. */
    const int G = p.w_head ? p.H : 1;
    if (p.proj == LF_PROJ_LINEAR) {
        /* dE[:, :T] += dx' x^T, summed over the (b, h) that use E; the G k
         * rows of dE are split between the threads */
        #pragma omp parallel
        {
            long lo, hi;
            thread_range((long)G * p.kp, &lo, &hi);
            while (lo < hi) {
                int g = (int)(lo / p.kp), r0 = (int)(lo % p.kp);
                int r1 = (long)p.kp < r0 + (hi - lo) ? p.kp : r0 + (int)(hi - lo);
                for (int b = 0; b < p.B; b++)
                    for (int h = G == 1 ? 0 : g; h < (G == 1 ? p.H : g + 1); h++) {
                        long bh = (long)b * p.H + h;
                        gemm(false, true, r1 - r0, p.T, p.d, 1.0f,
                                    dout + (bh * p.kp + r0) * p.d, p.d, x->data + bh * p.T * p.d, p.d, 1.0f,
                                    dw + (long)g * p.w_head + (long)r0 * p.n, p.n);
                    }
                lo += r1 - r0;
            }
        }
        return;
    }
    /* conv: dw_r += sum_j dx'_j . x_{j s + r}, one (g, r) per iteration */
    #pragma omp parallel for
    for (int gr = 0; gr < G * p.s; gr++) {
        int g = gr / p.s, r = gr % p.s;
        double acc = 0.0;
        for (int b = 0; b < p.B; b++)
            for (int h = G == 1 ? 0 : g; h < (G == 1 ? p.H : g + 1); h++) {
                long bh = (long)b * p.H + h;
                for (int j = 0; j < p.kp && j * p.s + r < p.T; j++) {
                    const float *g_ = dout + (bh * p.kp + j) * p.d, *xt = x->data + (bh * p.T + j * p.s + r) * p.d;
                    float dot = 0.0f;
                    for (int c = 0; c < p.d; c++) dot += g_[c] * xt[c];
                    acc += dot;
                }
            }
        dw[(long)g * p.w_head + r] += (float)acc;
    }
}

static OpDef lf_project_op = {"linformer_project", lf_project_forward, lf_project_backward, 0};

/* x' of x [B, H, T, d] under the call's projection; w is E or F (NULL for
 * mean and max). */
static Tensor *lf_project(const AttnCall *c, Tensor *x, Tensor *w) {
    const LinformerOpts *o = c->opts;
    const char *name = lf_project_op.name;
    SHAPE_CHECK(x->ndim == 4, name, "x must be [B, H, T, d]", x, NULL);
    const int H = x->shape[1], T = x->shape[2], proj = o->linformer_proj;
    int s = 0, kp;
    bool per_head = false;
    if (proj == LF_PROJ_LINEAR) {
        SHAPE_CHECK(w && (w->ndim == 2 || w->ndim == 3), name, "E must be [k, n] or [H, k, n]", x, w);
        per_head = w->ndim == 3;
        kp = w->shape[w->ndim - 2];
        SHAPE_CHECK(w->shape[w->ndim - 1] >= T, name, "the input is longer than E's n columns", x, w);
    } else {
        int k = lf_k(o, c->layer);
        if (k <= 0 || c->cfg->context < k) DIE("%s: context %d and linformer_k %d give no pooling stride", name, c->cfg->context, k);
        s = c->cfg->context / k;
        kp = (T + s - 1) / s;
        if (proj == LF_PROJ_CONV) {
            SHAPE_CHECK(w && (w->ndim == 1 || w->ndim == 2), name, "the conv kernel must be [n/k] or [H, n/k]", x, w);
            per_head = w->ndim == 2;
            SHAPE_CHECK(w->shape[w->ndim - 1] == s, name, "the conv kernel's length is not n / k", x, w);
        } else {
            SHAPE_CHECK(!w, name, "pooling takes no parameter", x, w);
        }
    }
    if (per_head) SHAPE_CHECK(w->shape[0] == H, name, "per-head parameters and x differ in heads", x, w);
    Node *nd = node_new(&lf_project_op);
    nd->n_in = w ? 2 : 1;
    nd->in[0] = x;
    nd->in[1] = w;
    *NODE_ATTRS(nd, LfProjectAttrs) = (LfProjectAttrs){.proj = proj, .stride = s, .per_head = per_head};
    nd->out = tensor_4d(x->shape[0], H, kp, x->shape[3]);
    return node_run(nd);
}

/* ---- linformer_attend --------------------------------------------------------- */

/* P for one head: [T, kp] = softmax(scale q k'^T) from q [T, dk], k' [kp, dk]. */
static void head_probs(const float *q, const float *kp_, float *P, int T, int kp, int dk, float scale) {
    gemm(false, true, T, kp, dk, scale, q, dk, kp_, dk, 0.0f, P, kp);
    for (int i = 0; i < T; i++) softmax_inplace(P + (long)i * kp, kp);
}

/* node: in = q [B, H, T, dk], k' [B, H, kp, dk], v' [B, H, kp, dv];
 * saved = P [B, H, T, kp]. */
typedef struct {
    float scale;
} LfAttendAttrs;
NODE_ATTRS_DECLARE(LfAttendAttrs);

static void lf_attend_forward(Node *nd) {
    const Tensor *q = nd->in[0], *k = nd->in[1], *v = nd->in[2];
    int BH = q->shape[0] * q->shape[1], T = q->shape[2], dk = q->shape[3], kp = k->shape[2], dv = v->shape[3];
    float scale = NODE_ATTRS(nd, LfAttendAttrs)->scale;
    #pragma omp parallel for
    for (int h = 0; h < BH; h++) {
        float *P = nd->saved + (long)h * T * kp;
        head_probs(q->data + (long)h * T * dk, k->data + (long)h * kp * dk, P, T, kp, dk, scale);
        /* O = P V' */
        gemm(false, false, T, dv, kp, 1.0f, P, kp, v->data + (long)h * kp * dv,
                    dv, 0.0f, nd->out->data + (long)h * T * dv, dv);
    }
}

/* dV' = P^T dO,  dP = dO V'^T,  dS = P * (dP - rowsum(dP * P)),
 * dQ = s dS K',  dK' = s dS^T Q: the heads whole, as one block each. */
static void lf_attend_backward(Node *nd) {
    const Tensor *q = nd->in[0], *k = nd->in[1];
    int BH = q->shape[0] * q->shape[1], T = q->shape[2], kp = k->shape[2];
    AttnGrad g = attn_grad_of(nd, NODE_ATTRS(nd, LfAttendAttrs)->scale);
    float *scratch = arena_alloc(engine_arena(), (size_t)omp_get_max_threads() * T * kp * sizeof(float));
    #pragma omp parallel for
    for (int h = 0; h < BH; h++) {
        const float *P = nd->saved + (long)h * T * kp;
        float *dS = scratch + (long)omp_get_thread_num() * T * kp;
        if (!attn_grad_pv(&g, h, 0, T, 0, kp, P, dS, false)) continue;
        attn_softmax_rows_backward(P, dS, T, kp);
        attn_grad_qk(&g, h, 0, T, 0, kp, dS);
    }
}

static OpDef lf_attend_op = {"linformer_attend", lf_attend_forward, lf_attend_backward, 0};

static Tensor *lf_attend(Tensor *q, Tensor *k, Tensor *v, float scale) {
    const char *name = lf_attend_op.name;
    SHAPE_CHECK(k->ndim == 4 && v->ndim == 4, name, "K' and V' must be [B, H, k, d]", k, v);
    SHAPE_CHECK(q->shape[3] == k->shape[3], name, "q and K' differ in key_size", q, k);
    for (int i = 0; i < 3; i++) SHAPE_CHECK(k->shape[i] == v->shape[i], name, "K' and V' differ in B, H or k", k, v);
    for (int i = 0; i < 2; i++) SHAPE_CHECK(q->shape[i] == k->shape[i], name, "q and K' differ in B or H", q, k);
    Node *nd = node_new(&lf_attend_op);
    nd->n_in = 3;
    nd->in[0] = q;
    nd->in[1] = k;
    nd->in[2] = v;
    NODE_ATTRS(nd, LfAttendAttrs)->scale = scale;
    int B = q->shape[0], H = q->shape[1], T = q->shape[2];
    nd->saved = arena_alloc(engine_arena(), (size_t)B * H * T * k->shape[2] * sizeof(float));
    nd->out = tensor_4d(B, H, T, v->shape[3]);
    return node_run(nd);
}

/* ---- the kernel ------------------------------------------------------------------ */

static void check_qkv(const AttnCall *c, const Tensor *q, const Tensor *k, const Tensor *v) {
    if (c->causal) DIE("linformer: the kernel has no causal form (it mixes positions before the softmax)");
    attn_check_qkv("linformer", q, k, v);
}

/* E is params[0]; F is params[1], or E when the share mode makes them one. */
static Tensor *attn_linformer(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v) {
    check_qkv(c, q, k, v);
    Tensor *E = c->params[0], *F = c->params[1] ? c->params[1] : E;
    return lf_attend(q, lf_project(c, k, E), lf_project(c, v, F), c->scale);
}

static Tensor *attn_linformer_probs(const AttnCall *c, Tensor *q, Tensor *k) {
    check_qkv(c, q, k, k);
    bool was = grad_set(false);
    Tensor *kp = lf_project(c, k, c->params[0]);
    grad_set(was);
    int BH = q->shape[0] * q->shape[1], T = q->shape[2], dk = q->shape[3], n = kp->shape[2];
    Tensor *P = tensor_4d(q->shape[0], q->shape[1], T, n);
    #pragma omp parallel for
    for (int h = 0; h < BH; h++)
        head_probs(q->data + (long)h * T * dk, kp->data + (long)h * n * dk, P->data + (long)h * T * n, T, n, dk,
                   c->scale);
    return P;
}

/* The names and shapes of the header comment. */
static void lf_declare(ParamSet *p, const char *prefix, int layer, const ModelConfig *c, Tensor **params) {
    const LinformerOpts *o = linformer_opts(c);
    int proj = o->linformer_proj, share = o->linformer_share;
    if (proj == LF_PROJ_MEAN || proj == LF_PROJ_MAX) return;
    int shape[3], nd = 0;
    if (share == LF_SHARE_NONE) shape[nd++] = c->heads;
    if (proj == LF_PROJ_LINEAR) {
        shape[nd++] = lf_k(o, layer);
        shape[nd++] = c->context;
    } else {
        shape[nd++] = c->context / lf_k(o, layer);
    }
    if (share == LF_SHARE_LAYERWISE) {
        params[0] = layer == 0 ? params_add(p, "linformer.E", nd, shape) : params_find(p, "linformer.E");
        if (!params[0]) DIE("linformer: layer %d declared before layer 0's shared linformer.E", layer);
        return;
    }
    char buf[128];
    params[0] = params_add(p, param_name(buf, prefix, "E"), nd, shape);
    if (share != LF_SHARE_KV) params[1] = params_add(p, param_name(buf, prefix, "F"), nd, shape);
}

/* N(0, 1 / fan_in), fan_in = the last dimension: n for E, n / k for conv. */
static void lf_init(Tensor **params, int layer, const ModelConfig *c, Rng *rng) {
    if (linformer_opts(c)->linformer_share == LF_SHARE_LAYERWISE && layer > 0) return; /* layer 0 drew it */
    for (int i = 0; i < 2; i++) {
        Tensor *t = params[i];
        if (t) rng_fill_normal(rng, t->data, t->n, 0.0f, 1.0f / sqrtf((float)t->shape[t->ndim - 1]));
    }
}

/* ---- what the rest of the program asks of this kernel ------------------------ */

static const char *const lf_share_names[] = {"none", "headwise", "kv", "layerwise", NULL};
static const char *const lf_proj_names[] = {"linear", "mean", "max", "conv", NULL};
#define M(field) offsetof(LinformerOpts, field)
static const OptDef linformer_options[] = {
    {.name = "linformer_k",
     .type = OPT_INTS,
     .group = GROUP_MODEL,
     .offset = M(linformer_k),
     .def = "64",
     .min = 1,
     .max = 65536,
     .size = LF_MAX_LAYERS,
     .help = "Linformer's projected length; per layer as 64,32 (later layers take the last)"},
    {.name = "linformer_share",
     .type = OPT_CHOICE,
     .group = GROUP_MODEL,
     .offset = M(linformer_share),
     .def = "none",
     .choices = lf_share_names,
     .help = "Linformer's E, F: per head, shared by heads, F = E, one E for all layers"},
    {.name = "linformer_proj",
     .type = OPT_CHOICE,
     .group = GROUP_MODEL,
     .offset = M(linformer_proj),
     .def = "linear",
     .choices = lf_proj_names,
     .help = "Linformer's projection along the sequence"},
    {.name = NULL},
};
#undef M

static int linformer_validate(const ModelConfig *m, bool (*changed)(const char *name, const void *ctx), const void *ctx,
                              Err *e) {
    const LinformerOpts *o = linformer_opts(m);
    (void)changed, (void)ctx;
    if (m->objective == OBJECTIVE_CLM)
        return err_set(e, "attn=linformer projects keys and values along the sequence, so it cannot be causal"),
               err_hint(e, "add --objective mlm");
    int given = 0;
    while (given < LF_MAX_LAYERS && o->linformer_k[given]) given++;
    if (given > m->layers)
        return err_set(e, "--linformer_k: %d values for %d layers", given, m->layers),
               err_hint(e, "one value per layer at most; later layers take the last");
    for (int l = 0; l < given; l++) {
        int k = o->linformer_k[l];
        if (k > m->context) return err_set(e, "--linformer_k %d is longer than --context %d", k, m->context);
        if (o->linformer_proj != LF_PROJ_LINEAR && m->context % k != 0)
            return err_set(e, "--linformer_proj %s pools with kernel = stride = context / k, so --linformer_k %d must divide --context %d",
                           lf_proj_names[o->linformer_proj], k, m->context);
    }
    if (given > 1 && o->linformer_share == LF_SHARE_LAYERWISE)
        return err_set(e, "--linformer_share layerwise: one E for all layers, so one --linformer_k, not %d", given);
    if ((o->linformer_proj == LF_PROJ_MEAN || o->linformer_proj == LF_PROJ_MAX) && o->linformer_share != LF_SHARE_NONE)
        return err_set(e, "--linformer_share %s: linformer_proj=%s pools without parameters, so there is nothing to share",
                       lf_share_names[o->linformer_share], lf_proj_names[o->linformer_proj]),
               err_hint(e, "sharing applies to linformer_proj linear or conv");
    return 0;
}

static void linformer_describe(const ModelConfig *m, char *buf, size_t size) {
    const LinformerOpts *o = linformer_opts(m);
    size_t n = (size_t)snprintf(buf, size, " k=%d", o->linformer_k[0]);
    for (int l = 1; l < LF_MAX_LAYERS && o->linformer_k[l] && n < size; l++)
        n += (size_t)snprintf(buf + n, size - n, ",%d", o->linformer_k[l]);
}

static int linformer_check_length(const ModelConfig *m, int T, Err *e) {
    const LinformerOpts *o = linformer_opts(m);
    for (int l = 0; l < m->layers; l++) {
        int k = lf_k(o, l);
        if (T < k) return err_set(e, "linformer_k %d is longer than T %d", k, T);
        if (T != m->context && o->linformer_proj != LF_PROJ_LINEAR && T % (m->context / k))
            return err_set(e, "--length %d: Linformer's pooling needs a multiple of %d", T, m->context / k);
    }
    return 0;
}

const AttnKernel attn_kernel_linformer = {
    .name = "linformer",
    .declare = lf_declare,
    .forward = attn_linformer,
    .probs = attn_linformer_probs,
    .ops = {&lf_project_op, &lf_attend_op},
    .qkv16 = attn_qkv_fp32, /* the pooled projections read k, v as floats */
    .init = lf_init,
    .bidirectional_only = true,
    .title = "attn=linformer",
    .option_rows = linformer_options,
    .options_size = sizeof(LinformerOpts),
    .validate = linformer_validate,
    .describe = linformer_describe,
    .check_length = linformer_check_length,
    .projected_probs = true,
};
