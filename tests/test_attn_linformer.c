/* test_attn_linformer.c: the Linformer kernel (layers/attention/linformer.c).
 *
 * pytorch: tests/fixtures/attn_linformer.safetensors holds, for every
 * linformer_proj x linformer_share at T = n and at T < n, PyTorch's output,
 * attention matrix and the gradients of sum(out * R) for q, k, v, E and F
 * (or the conv kernels), in float64 from float32 inputs
 * (tests/reference/attention_linformer.py). We compare in float32, then break
 * each of the kernel's backward passes and check that every case notices.
 *
 * naive: the forward against plain loops in double, max pooling included
 * (no composition of primitive ops can take a maximum), and the kernel's
 * output against its own attention matrix times the projected values,
 * P (F v).
 *
 * model: model_init with attn = linformer declares the documented parameters
 * per share mode (layerwise: one tensor for every layer), initialises them,
 * and trains: forward and backward run, and a layerwise model's gradient is
 * the sum of the per-layer gradients of the same model with separate copies. */
#include <cJSON.h>
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer_cases.h"
#include "model.h"
#include "safetensors.h"
#include "test_util.h"

/* float32 against float64: errors seen are ~1e-7 (a few roundings, fast exp). */
#define ATOL 1e-5f
#define RTOL 1e-4f

/* In the order of LinformerProj and LinformerShare. */
static const char *const proj_names[] = {"linear", "mean", "max", "conv"};
static const char *const share_names[] = {"none", "headwise", "kv", "layerwise"};

/* The kernel's parameters under proj and share, as lf_declare makes them:
 * returns how many (0, 1 or 2), with their ndim and shape. */
static int lf_param_shapes(int proj, int share, int H, int n, int k, int *ndim, int shape[][3]) {
    if (proj == LF_PROJ_MEAN || proj == LF_PROJ_MAX) return 0;
    int d = 0, one[3];
    if (share == LF_SHARE_NONE) one[d++] = H;
    if (proj == LF_PROJ_LINEAR) {
        one[d++] = k;
        one[d++] = n;
    } else {
        one[d++] = n / k;
    }
    int count = share == LF_SHARE_NONE || share == LF_SHARE_HEADWISE ? 2 : 1;
    for (int i = 0; i < count; i++) {
        ndim[i] = d;
        memcpy(shape[i], one, sizeof one);
    }
    return count;
}

/* The call, its config in *m. */
static AttnCall lf_call(ModelConfig *m, int B, int H, int T, int dk, int dv, int proj, int share, int n, int k) {
    *m = (ModelConfig){.context = n};
    *linformer_opts(m) = (LinformerOpts){.linformer_k = {k}, .linformer_share = share, .linformer_proj = proj};
    return (AttnCall){.B = B, .H = H, .T = T, .key_size = dk, .head_size = dv, .scale = 1.0f / sqrtf((float)dk),
                      .cfg = m, .opts = linformer_opts(m)};
}

static const AttnKernel *linformer(void) {
    const AttnKernel *k = kernel_by_name("linformer");
    ck_assert_ptr_nonnull(k);
    return k;
}

/* ---- against PyTorch --------------------------------------------------------- */

/* The fixture's shapes and cases: proj x share x {full: n = 8, k = 4, T = 8;
 * short: n = 12, k = 3, T = 10}, in the reference script's order. */
#define FX_B 2
#define FX_H 3
#define FX_DK 4
#define FX_DV 5
#define N_FX 32

typedef struct {
    int proj, share, n, k, T;
    char name[48];
} FxCase;

static FxCase fx_case(int i) {
    bool full = i % 2 == 0;
    FxCase c = {.proj = i / 8, .share = i / 2 % 4, .n = full ? 8 : 12, .k = full ? 4 : 3, .T = full ? 8 : 10};
    snprintf(c.name, sizeof c.name, "%s_%s_%s", proj_names[c.proj], share_names[c.share], full ? "full" : "short");
    return c;
}


/* The fixture's JSON for case c says what fx_case says. */
static bool fx_config_matches(StFile *sf, const FxCase *c, char *msg, int size) {
    const char *text = st_meta(sf, c->name);
    cJSON *o = text ? cJSON_Parse(text) : NULL;
    bool ok = o != NULL;
    const char *strs[][2] = {{"proj", proj_names[c->proj]}, {"share", share_names[c->share]}};
    for (int i = 0; ok && i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, strs[i][0]);
        ok = cJSON_IsString(v) && strcmp(v->valuestring, strs[i][1]) == 0;
    }
    const struct {
        const char *key;
        int want;
    } ints[] = {{"context", c->n}, {"k", c->k},         {"length", c->T},    {"batch", FX_B},
                {"heads", FX_H},   {"key_size", FX_DK}, {"head_size", FX_DV}};
    for (size_t i = 0; ok && i < sizeof ints / sizeof ints[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, ints[i].key);
        ok = cJSON_IsNumber(v) && v->valueint == ints[i].want;
    }
    if (!ok) snprintf(msg, (size_t)size, "fixture metadata %s: %s, not the config the test expects", c->name,
                      text ? text : "missing");
    cJSON_Delete(o);
    return ok;
}

/* The longest sum of fixture case i: over positions (n, T), a head's sizes. */
static long fx_sum_length(int i) {
    FxCase fc = fx_case(i);
    long K = fc.n > fc.T ? fc.n : fc.T;
    return K > FX_DV ? K : FX_DV;
}

/* Fixture case i's state, for fixture_case_run's hooks (test_util.h). */
typedef struct {
    FxCase fc;
    ModelConfig m;
    AttnCall c;
} FxRun;

/* q, k, v, then E and F as the case's projections have them. */
static int fx_leaves(void *ctx, Tensor **leaf, const char **names) {
    FxRun *r = ctx;
    FxCase fc = r->fc;
    r->c = lf_call(&r->m, FX_B, FX_H, fc.T, FX_DK, FX_DV, fc.proj, fc.share, fc.n, fc.k);
    static const char *const all[5] = {"q", "k", "v", "E", "F"};
    int n = 3, ndim[2], shape[2][3];
    leaf[0] = tensor_4d(FX_B, FX_H, fc.T, FX_DK);
    leaf[1] = tensor_4d(FX_B, FX_H, fc.T, FX_DK);
    leaf[2] = tensor_4d(FX_B, FX_H, fc.T, FX_DV);
    int n_params = lf_param_shapes(fc.proj, fc.share, FX_H, fc.n, fc.k, ndim, shape);
    for (int p = 0; p < n_params; p++) leaf[n++] = r->c.params[p] = tensor_new(ndim[p], shape[p]);
    for (int l = 0; l < n; l++) names[l] = all[l];
    return n;
}

static bool fx_matches(StFile *sf, void *ctx, char *msg, int size) {
    FxRun *r = ctx;
    return fx_config_matches(sf, &r->fc, msg, size);
}

static Tensor *fx_forward(void *ctx, Tensor **leaf) {
    FxRun *r = ctx;
    return linformer()->forward(&r->c, leaf[0], leaf[1], leaf[2]);
}

static Tensor *fx_probs(void *ctx, Tensor **leaf) {
    FxRun *r = ctx;
    return linformer()->probs(&r->c, leaf[0], leaf[1]);
}

/* Fixture case i: forward, probs, backward, compared stage by stage. */
static FxStage fx_run(StFile *sf, int i, char *msg, int size) {
    FxRun r = {.fc = fx_case(i)};
    FixtureCase c = {r.fc.name, fx_sum_length(i), &r, fx_leaves, fx_matches, fx_forward, NULL, fx_probs};
    return fixture_case_run(sf, &c, msg, size);
}

START_TEST(test_linformer_matches_pytorch) {
    StFile sf = fixture_open("attn_linformer.safetensors");
    char msg[512] = "";
    FxStage s = fx_run(&sf, _i, msg, sizeof msg);
    st_close(&sf);
    ck_assert_msg(s == FX_OK, "%s differs from PyTorch at the %s: %s", fx_case(_i).name, fx_stage_names[s], msg);
}
END_TEST

/* The fixture lists exactly the cases fx_case makes. */
START_TEST(test_linformer_fixture_cases) {
    StFile sf = fixture_open("attn_linformer.safetensors");
    const char *list = st_meta(&sf, "cases");
    ck_assert_msg(list != NULL, "fixture metadata has no \"cases\"; run: make fixtures");
    char want[N_FX * 48] = "";
    for (int i = 0; i < N_FX; i++) {
        if (i) strcat(want, ",");
        strcat(want, fx_case(i).name);
    }
    ck_assert_msg(strcmp(list, want) == 0, "the fixture's cases are %s, the test's %s; run: make fixtures", list, want);
    st_close(&sf);
}
END_TEST

/* A 10%-scaled or missing backward in either fused op breaks the gradients of
 * every fixture case, and only them. */
START_TEST(test_linformer_pytorch_catches_broken_backward) {
    StFile sf = fixture_open("attn_linformer.safetensors");
    const AttnKernel *kern = linformer();
    int ops = 0;
    for (int o = 0; kern->ops[o]; o++, ops++)
        for (int mu = 0; mu < MUTATION_COUNT; mu++)
            for (int i = 0; i < N_FX; i++) {
                char msg[512] = "";
                kernel_mutation_install(kern->ops[o], (Mutation)mu);
                FxStage s = fx_run(&sf, i, msg, sizeof msg);
                kernel_mutation_remove(kern->ops[o]);
                ck_assert_msg(s == FX_GRADS, "a %s backward for %s: case %s stopped at the %s (%s)",
                              mutation_name((Mutation)mu), kern->ops[o]->name, fx_case(i).name, fx_stage_names[s],
                              msg);
            }
    ck_assert_int_eq(ops, 2);
    st_close(&sf);
}
END_TEST

/* The parallel loops (OpenMP over batch x heads, shared gradients split by
 * rows) give the same results at 3 threads. */
START_TEST(test_linformer_matches_pytorch_threaded) {
    int was = engine_threads();
    engine_set_threads(3);
    StFile sf = fixture_open("attn_linformer.safetensors");
    for (int i = 0; i < N_FX; i++) {
        char msg[512] = "";
        FxStage s = fx_run(&sf, i, msg, sizeof msg);
        ck_assert_msg(s == FX_OK, "%s at 3 threads differs from PyTorch at the %s: %s", fx_case(i).name,
                      fx_stage_names[s], msg);
    }
    st_close(&sf);
    engine_set_threads(was);
}
END_TEST

/* ---- against plain loops ------------------------------------------------------- */

/* x' [kp, d] of one head's x [T, d], in double, straight from the definitions;
 * w is the head's E [k, n] or conv kernel [n / k], or NULL. */
static void naive_project(int proj, const float *x, const float *w, int T, int d, int n, int k, int kp, double *out) {
    int s = n / k;
    for (int j = 0; j < kp; j++)
        for (int c = 0; c < d; c++) {
            int lo = j * s, hi = lo + s < T ? lo + s : T;
            double acc = proj == LF_PROJ_MAX ? -INFINITY : 0.0;
            if (proj == LF_PROJ_LINEAR)
                for (int t = 0; t < T; t++) acc += (double)w[j * n + t] * x[t * d + c];
            for (int t = lo; proj != LF_PROJ_LINEAR && t < hi; t++) {
                double xt = x[t * d + c];
                if (proj == LF_PROJ_MAX) acc = xt > acc ? xt : acc;
                else acc += (proj == LF_PROJ_CONV ? (double)w[t - lo] : 1.0 / (hi - lo)) * xt;
            }
            out[j * d + c] = acc;
        }
}

/* proj x share x {n = 8, k = 4, T = 7 (stride 2, last window 1 wide);
 * n = 8, k = 2, T = 3 (stride 4: one window, shorter than the stride)}. */
START_TEST(test_linformer_matches_loops) {
    const int proj = _i / 8, share = _i / 2 % 4, n = 8, k = _i % 2 ? 2 : 4, T = _i % 2 ? 3 : 7;
    const int B = 2, H = 3, dk = 4, dv = 5;
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    bool was = grad_set(false);
    Rng rng;
    rng_seed(&rng, 31 + (uint64_t)_i);
    ModelConfig m;
    AttnCall c = lf_call(&m, B, H, T, dk, dv, proj, share, n, k);
    int ndim[2], shape[2][3];
    int n_params = lf_param_shapes(proj, share, H, n, k, ndim, shape);
    for (int p = 0; p < n_params; p++) {
        c.params[p] = tensor_new(ndim[p], shape[p]);
        rng_fill_normal(&rng, c.params[p]->data, c.params[p]->n, 0.0f, 0.5f);
    }
    Tensor *q = tensor_4d(B, H, T, dk), *kk = tensor_4d(B, H, T, dk), *v = tensor_4d(B, H, T, dv);
    rng_fill_normal(&rng, q->data, q->n, 0.0f, 1.0f);
    rng_fill_normal(&rng, kk->data, kk->n, 0.0f, 1.0f);
    rng_fill_normal(&rng, v->data, v->n, 0.0f, 1.0f);
    Tensor *out = linformer()->forward(&c, q, kk, v);
    Tensor *P = linformer()->probs(&c, q, kk);
    const int kp = proj == LF_PROJ_LINEAR ? k : (T + n / k - 1) / (n / k);
    ck_assert_int_eq(P->ndim, 4);
    ck_assert_int_eq(P->shape[2], T);
    ck_assert_int_eq(P->shape[3], kp);

    Tensor *E = c.params[0], *F = c.params[1] ? c.params[1] : E;
    double *Kp = arena_alloc(&a, (size_t)kp * dk * sizeof(double));
    double *Vp = arena_alloc(&a, (size_t)kp * dv * sizeof(double));
    double *Ph = arena_alloc(&a, (size_t)T * kp * sizeof(double));
    for (int bh = 0; bh < B * H; bh++) {
        int h = bh % H;
        const float *Eh = E ? E->data + (share == LF_SHARE_NONE ? h * E->n / H : 0) : NULL;
        const float *Fh = F ? F->data + (share == LF_SHARE_NONE ? h * F->n / H : 0) : NULL;
        naive_project(proj, kk->data + (long)bh * T * dk, Eh, T, dk, n, k, kp, Kp);
        naive_project(proj, v->data + (long)bh * T * dv, Fh, T, dv, n, k, kp, Vp);
        const float *qh = q->data + (long)bh * T * dk;
        for (int i = 0; i < T; i++) { /* P = softmax(scale q K'^T) */
            double mx = -INFINITY, sum = 0.0;
            for (int j = 0; j < kp; j++) {
                double sc = 0.0;
                for (int x = 0; x < dk; x++) sc += (double)qh[i * dk + x] * Kp[j * dk + x];
                Ph[i * kp + j] = sc * c.scale;
                mx = fmax(mx, Ph[i * kp + j]);
            }
            for (int j = 0; j < kp; j++) sum += Ph[i * kp + j] = exp(Ph[i * kp + j] - mx);
            for (int j = 0; j < kp; j++) Ph[i * kp + j] /= sum;
        }
        for (int i = 0; i < T; i++)
            for (int j = 0; j < kp; j++) {
                double got = P->data[((long)bh * T + i) * kp + j];
                ck_assert_msg(fabs(got - Ph[i * kp + j]) <= ATOL + RTOL * fabs(Ph[i * kp + j]),
                              "%s share=%s: P[%d][%d][%d] = %g, loops %g", proj_names[proj], share_names[share], bh, i,
                              j, got, Ph[i * kp + j]);
            }
        for (int i = 0; i < T; i++)
            for (int x = 0; x < dv; x++) {
                double want = 0.0, pfv = 0.0; /* P V' with the loops' P, and with the kernel's */
                for (int j = 0; j < kp; j++) {
                    want += Ph[i * kp + j] * Vp[j * dv + x];
                    pfv += (double)P->data[((long)bh * T + i) * kp + j] * Vp[j * dv + x];
                }
                double got = out->data[((long)bh * T + i) * dv + x];
                ck_assert_msg(fabs(got - want) <= ATOL + RTOL * fabs(want),
                              "%s share=%s: out[%d][%d][%d] = %g, loops %g", proj_names[proj], share_names[share], bh,
                              i, x, got, want);
                ck_assert_msg(fabs(got - pfv) <= ATOL + RTOL * fabs(pfv), "%s share=%s: out is not probs . (F v)",
                              proj_names[proj], share_names[share]);
            }
    }
    ck_assert_ptr_null(tape_last());
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
}
END_TEST

/* Max pooling's gradient goes to the window's maximum alone: with out = F v
 * seen through P, dv is zero at every position that is no maximum. */
START_TEST(test_linformer_max_routes_to_argmax) {
    const int B = 1, H = 2, T = 7, dk = 3, dv = 4, n = 8, k = 4; /* stride 2 */
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    bool was = grad_set(true);
    tape_reset();
    Rng rng;
    rng_seed(&rng, 5);
    ModelConfig m;
    AttnCall c = lf_call(&m, B, H, T, dk, dv, LF_PROJ_MAX, LF_SHARE_NONE, n, k);
    Tensor *q = tensor_4d(B, H, T, dk), *kk = tensor_4d(B, H, T, dk), *v = tensor_4d(B, H, T, dv);
    Tensor *in[3] = {q, kk, v};
    for (int i = 0; i < 3; i++) {
        rng_fill_normal(&rng, in[i]->data, in[i]->n, 0.0f, 1.0f);
        in[i]->requires_grad = true;
    }
    Tensor *out = linformer()->forward(&c, q, kk, v);
    float *seed = arena_alloc(&a, (size_t)out->n * sizeof(float));
    rng_fill_normal(&rng, seed, out->n, 0.0f, 1.0f);
    backward_seeded(out, seed);
    int nonzero = 0;
    for (int h = 0; h < B * H; h++)
        for (int t = 0; t < T; t++)
            for (int x = 0; x < dv; x++) {
                int lo = t / 2 * 2, hi = lo + 2 < T ? lo + 2 : T;
                const float *col = v->data + (long)h * T * dv + x;
                bool is_max = true;
                for (int u = lo; u < hi; u++)
                    if (col[u * dv] > col[t * dv] || (col[u * dv] == col[t * dv] && u < t)) is_max = false;
                float g = v->grad[((long)h * T + t) * dv + x];
                if (!is_max) ck_assert_msg(g == 0.0f, "v[%d][%d][%d] is no maximum but has gradient %g", h, t, x, g);
                nonzero += g != 0.0f;
            }
    ck_assert_int_eq(nonzero, B * H * 4 * dv); /* one per window and channel: 4 windows */
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
}
END_TEST

START_TEST(test_linformer_refuses_causal) {
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    ModelConfig m;
    AttnCall c = lf_call(&m, 1, 1, 4, 2, 2, LF_PROJ_MEAN, LF_SHARE_NONE, 4, 2);
    c.causal = true;
    Tensor *q = tensor_zeros(4, (int[]){1, 1, 4, 2});
    linformer()->forward(&c, q, q, q); /* aborts */
}
END_TEST

START_TEST(test_linformer_linear_refuses_longer_input) {
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    ModelConfig m;
    AttnCall c = lf_call(&m, 1, 1, 5, 2, 2, LF_PROJ_LINEAR, LF_SHARE_KV, 4, 2);
    c.params[0] = tensor_zeros(2, (int[]){2, 4});
    Tensor *q = tensor_zeros(4, (int[]){1, 1, 5, 2});
    linformer()->forward(&c, q, q, q); /* T = 5 > n = 4: aborts */
}
END_TEST

/* ---- in the model --------------------------------------------------------------- */

#define M_LAYERS 2
#define M_HEADS 2
#define M_N 8
#define M_K 4

static ModelConfig lf_model_config(int proj, int share) {
    ModelConfig m = {.vocab = VOCAB_BYTES + 1, .layers = M_LAYERS, .d_model = 16, .heads = M_HEADS,
                     .mlp_ratio = 2, .context = M_N, .norm = NORM_LAYERNORM, .tie_embeddings = true,
                     .attn = ATTN_LINFORMER, .pos = pos_of("learned"), .objective = OBJECTIVE_MLM};
    *linformer_opts(&m) = (LinformerOpts){.linformer_k = {M_K}, .linformer_share = share, .linformer_proj = proj};
    return m;
}

static bool is_linformer_param(const char *name) {
    size_t n = strlen(name);
    return strncmp(name, "linformer.", 10) == 0 || (n > 7 && (strcmp(name + n - 7, ".attn.E") == 0 ||
                                                              strcmp(name + n - 7, ".attn.F") == 0));
}

/* The parameters of header comment of layers/attention/linformer.c, per
 * proj x share, and nothing else beside the softmax model's. */
START_TEST(test_linformer_model_declares) {
    const int proj = _i / 4, share = _i % 4;
    ModelConfig cfg = lf_model_config(proj, share);
    Model m, base;
    model_init(&m, &cfg);
    ModelConfig softmax_cfg = cfg;
    softmax_cfg.attn = ATTN_SOFTMAX;
    model_init(&base, &softmax_cfg);

    int ndim[2], shape[2][3];
    int per_layer = lf_param_shapes(proj, share, M_HEADS, M_N, M_K, ndim, shape);
    int want = share == LF_SHARE_LAYERWISE ? (per_layer > 0) : per_layer * M_LAYERS, found = 0;
    for (int i = 0; i < params_count(&m.params); i++) {
        const Tensor *t = m.params.list[i];
        if (!is_linformer_param(t->name)) continue;
        found++;
        int slot = t->name[strlen(t->name) - 1] == 'F';
        if (share == LF_SHARE_LAYERWISE) ck_assert_str_eq(t->name, "linformer.E");
        ck_assert_msg(slot < per_layer, "%s: unexpected parameter %s", proj_names[proj], t->name);
        ck_assert_int_eq(t->ndim, ndim[slot]);
        for (int d = 0; d < t->ndim; d++) ck_assert_int_eq(t->shape[d], shape[slot][d]);
    }
    ck_assert_msg(found == want, "proj %s share %s: %d Linformer parameters, want %d", proj_names[proj],
                  share_names[share], found, want);
    ck_assert_int_eq(params_count(&m.params), params_count(&base.params) + want);
    for (int l = 0; l < M_LAYERS; l++) {
        const Attention *at = &m.blocks[l].attn;
        char name[64];
        for (int p = 0; p < 2; p++) {
            if (p >= per_layer) {
                ck_assert_ptr_null(at->call.params[p]);
                continue;
            }
            if (share == LF_SHARE_LAYERWISE) {
                ck_assert_ptr_eq(at->call.params[p], params_find(&m.params, "linformer.E"));
                continue;
            }
            snprintf(name, sizeof name, "blocks.%d.attn.%c", l, p ? 'F' : 'E');
            ck_assert_ptr_eq(at->call.params[p], params_find(&m.params, name));
        }
    }
    model_free(&base);
    model_free(&m);
}
END_TEST

/* Initialisation N(0, 1 / fan_in): fan_in = n for E, n / k for conv. */
START_TEST(test_linformer_model_init) {
    const int proj = _i / 4 ? LF_PROJ_CONV : LF_PROJ_LINEAR, share = _i % 4;
    ModelConfig cfg = lf_model_config(proj, share);
    cfg.context = 64;
    linformer_opts(&cfg)->linformer_k[0] = 4; /* E [4, 64], conv kernels of 16 */
    Model m;
    model_init(&m, &cfg);
    Rng rng;
    rng_seed(&rng, 3);
    model_init_weights(&m, &rng);
    double sq = 0.0;
    long count = 0;
    float fan = proj == LF_PROJ_LINEAR ? 64.0f : 16.0f;
    for (int i = 0; i < params_count(&m.params); i++) {
        const Tensor *t = m.params.list[i];
        if (!is_linformer_param(t->name)) continue;
        for (long j = 0; j < t->n; j++) sq += (double)t->data[j] * t->data[j];
        count += t->n;
    }
    ck_assert_int_gt(count, 0);
    /* the sample's std scaled by sqrt(fan_in): 1 within 3 standard errors */
    double std = sqrt(sq / (double)count) * sqrt(fan), tol = 3.0 / sqrt(2.0 * (double)count);
    ck_assert_msg(fabs(std - 1.0) < tol, "%s share %s: std sqrt(fan_in) = %g, want 1 +- %g", proj_names[proj],
                  share_names[share], std, tol);
    model_free(&m);
}
END_TEST

/* Loss and gradients of the model on a fixed batch of length T; copies the
 * gradient slab into grads (params total) and returns the loss. */
static float model_loss_grads(Model *m, int T, float *grads) {
    enum { B = 2 };
    int ids[B * M_N], targets[B * M_N];
    Rng rng;
    rng_seed(&rng, 11);
    for (int i = 0; i < B * T; i++) {
        ids[i] = (int)rng_below(&rng, VOCAB_BYTES + 1);
        targets[i] = i % 3 ? (int)rng_below(&rng, VOCAB_BYTES) : -1;
    }
    Arena a;
    arena_init(&a, 1 << 20);
    engine_set_arena(&a);
    bool was = grad_set(true);
    tape_reset();
    params_zero_grad(&m->params);
    Tensor *loss = model_loss(m, ids, targets, B, T);
    backward(loss);
    float l = loss->data[0];
    memcpy(grads, m->params.grad, (size_t)m->params.total * sizeof(float));
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
    return l;
}

/* Forward and backward at the context length and shorter: a finite loss and
 * finite gradients, which reach every Linformer parameter. */
START_TEST(test_linformer_model_trains) {
    const int proj = _i / 4, share = _i % 4;
    ModelConfig cfg = lf_model_config(proj, share);
    Model m;
    model_init(&m, &cfg);
    Rng rng;
    rng_seed(&rng, 7);
    model_init_weights(&m, &rng);
    float *grads = malloc((size_t)m.params.total * sizeof(float));
    for (int T = M_N; T >= M_N - 3; T -= 3) {
        float loss = model_loss_grads(&m, T, grads);
        ck_assert_msg(isfinite(loss), "%s share %s T %d: loss %g", proj_names[proj], share_names[share], T, loss);
        for (long j = 0; j < m.params.total; j++) ck_assert(isfinite(grads[j]));
        for (int i = 0; i < params_count(&m.params); i++) {
            const Tensor *t = m.params.list[i];
            if (!is_linformer_param(t->name)) continue;
            double norm = 0.0;
            for (long j = 0; j < t->n; j++) norm += fabs(grads[m.params.offset[i] + j]);
            ck_assert_msg(norm > 0.0, "%s T %d: no gradient", t->name, T);
        }
    }
    free(grads);
    model_free(&m);
}
END_TEST

static void record_width(int layer, const Tensor *P, void *ctx) { ((int *)ctx)[layer] = P->shape[3]; }

/* A per-layer k (--linformer_k 4,2): each layer's projection has its own k
 * (E [H, k_l, n] linear, conv kernels of n / k_l), the model trains, and the
 * attention matrix of each layer is [T, k_l]. Pooling runs at the layer's own
 * stride. */
START_TEST(test_linformer_per_layer_k) {
    const int proj = _i; /* linear, mean, max, conv */
    ModelConfig cfg = lf_model_config(proj, LF_SHARE_NONE);
    *linformer_opts(&cfg) = (LinformerOpts){.linformer_k = {4, 2}, .linformer_share = LF_SHARE_NONE, .linformer_proj = proj};
    ck_assert_int_eq(lf_k(linformer_opts(&cfg), 0), 4);
    ck_assert_int_eq(lf_k(linformer_opts(&cfg), 1), 2);
    ck_assert_int_eq(lf_k(linformer_opts(&cfg), 7), 2); /* past the list: its last */
    Model m;
    model_init(&m, &cfg);
    for (int l = 0; l < M_LAYERS; l++) {
        char name[64];
        snprintf(name, sizeof name, "blocks.%d.attn.E", l);
        const Tensor *E = params_find(&m.params, name);
        if (proj == LF_PROJ_MEAN || proj == LF_PROJ_MAX) {
            ck_assert_ptr_null(E);
            continue;
        }
        ck_assert_ptr_nonnull(E);
        int want = proj == LF_PROJ_LINEAR ? (l ? 2 : 4) : M_N / (l ? 2 : 4);
        ck_assert_msg(E->shape[1] == want, "%s: shape[1] %d, want %d", name, E->shape[1], want);
    }
    Rng rng;
    rng_seed(&rng, 11);
    model_init_weights(&m, &rng);
    float *grads = malloc((size_t)m.params.total * sizeof(float));
    float loss = model_loss_grads(&m, M_N, grads);
    ck_assert(isfinite(loss));
    for (long j = 0; j < m.params.total; j++) ck_assert(isfinite(grads[j]));
    free(grads);
    /* each layer's attention matrix is [B, H, T, k_l] */
    int ids[M_N], widths[M_LAYERS] = {0};
    for (int t = 0; t < M_N; t++) ids[t] = 'a' + t;
    Arena a;
    arena_init(&a, 1 << 20);
    engine_set_arena(&a);
    model_attention_probs(&m, ids, 1, M_N, record_width, widths);
    for (int l = 0; l < M_LAYERS; l++) ck_assert_int_eq(widths[l], l ? 2 : 4);
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&a);
    model_free(&m);
}
END_TEST

/* Layerwise sharing sums the layers' gradients: the same model with a copy of
 * linformer.E in each layer (share = kv) gives the same loss, and its
 * per-layer gradients add up to the shared one. */
START_TEST(test_linformer_layerwise_sums_layers) {
    const int proj = _i ? LF_PROJ_CONV : LF_PROJ_LINEAR;
    ModelConfig shared_cfg = lf_model_config(proj, LF_SHARE_LAYERWISE), copies_cfg = lf_model_config(proj, LF_SHARE_KV);
    Model shared, copies;
    model_init(&shared, &shared_cfg);
    model_init(&copies, &copies_cfg);
    Rng rng;
    rng_seed(&rng, 9);
    model_init_weights(&shared, &rng);
    const Tensor *E = params_find(&shared.params, "linformer.E");
    ck_assert_ptr_nonnull(E);
    for (int i = 0; i < params_count(&copies.params); i++) { /* every weight by name; E into each layer */
        Tensor *t = copies.params.list[i];
        const Tensor *src = is_linformer_param(t->name) ? E : params_find(&shared.params, t->name);
        ck_assert_msg(src && src->n == t->n, "%s has no counterpart", t->name);
        memcpy(t->data, src->data, (size_t)t->n * sizeof(float));
    }
    float *g_shared = malloc((size_t)shared.params.total * sizeof(float));
    float *g_copies = malloc((size_t)copies.params.total * sizeof(float));
    float l_shared = model_loss_grads(&shared, M_N, g_shared), l_copies = model_loss_grads(&copies, M_N, g_copies);
    ck_assert_msg(fabsf(l_shared - l_copies) <= 1e-6f, "losses %g and %g", l_shared, l_copies);
    const float *gE = g_shared + shared.params.offset[0];
    for (int i = 0; i < params_count(&shared.params); i++)
        if (shared.params.list[i] == E) gE = g_shared + shared.params.offset[i];
    long off[M_LAYERS];
    for (int l = 0; l < M_LAYERS; l++) {
        char name[64];
        snprintf(name, sizeof name, "blocks.%d.attn.E", l);
        for (int i = 0; i < params_count(&copies.params); i++)
            if (strcmp(copies.params.list[i]->name, name) == 0) off[l] = copies.params.offset[i];
    }
    bool differ = false;
    for (long j = 0; j < E->n; j++) {
        float g0 = g_copies[off[0] + j], g1 = g_copies[off[1] + j], sum = g0 + g1;
        ck_assert_msg(fabsf(gE[j] - sum) <= 1e-6f + 1e-4f * fabsf(sum), "dE[%ld] = %g, layers give %g + %g", j, gE[j],
                      g0, g1);
        differ |= fabsf(g0) > 1e-6f && fabsf(g1) > 1e-6f;
    }
    ck_assert_msg(differ, "one layer gives E no gradient: the check would not see a lost layer");
    free(g_shared);
    free(g_copies);
    model_free(&shared);
    model_free(&copies);
}
END_TEST

START_TEST(test_linformer_model_refuses_clm) {
    ModelConfig cfg = lf_model_config(LF_PROJ_LINEAR, LF_SHARE_NONE);
    cfg.objective = OBJECTIVE_CLM;
    Model m;
    model_init(&m, &cfg); /* aborts */
}
END_TEST

Suite *attn_linformer_suite(void);

Suite *attn_linformer_suite(void) {
    Suite *s = suite_create("attn_linformer");
    TCase *tc = tcase_create("pytorch");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_linformer_fixture_cases);
    tcase_add_loop_test(tc, test_linformer_matches_pytorch, 0, N_FX);
    tcase_add_test(tc, test_linformer_pytorch_catches_broken_backward);
    tcase_add_test(tc, test_linformer_matches_pytorch_threaded);
    suite_add_tcase(s, tc);

    tc = tcase_create("loops");
    tcase_add_loop_test(tc, test_linformer_matches_loops, 0, 32);
    tcase_add_test(tc, test_linformer_max_routes_to_argmax);
    tcase_add_test_raise_signal(tc, test_linformer_refuses_causal, SIGABRT);
    tcase_add_test_raise_signal(tc, test_linformer_linear_refuses_longer_input, SIGABRT);
    suite_add_tcase(s, tc);

    tc = tcase_create("model");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_linformer_model_declares, 0, 16);
    tcase_add_loop_test(tc, test_linformer_model_init, 0, 8);
    tcase_add_loop_test(tc, test_linformer_model_trains, 0, 16);
    tcase_add_loop_test(tc, test_linformer_layerwise_sums_layers, 0, 2);
    tcase_add_loop_test(tc, test_linformer_per_layer_k, 0, 4);
    tcase_add_test_raise_signal(tc, test_linformer_model_refuses_clm, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}
