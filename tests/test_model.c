/* test_model.c: the model of layers/ against PyTorch, and the fused attention
 * kernels against gradient checks and against primitive ops.
 *
 * golden: tests/fixtures/gpt.safetensors holds, per config, PyTorch's weights,
 * a batch, the logits, the loss, every parameter gradient and the parameters
 * after clip_grad_norm_ + one AdamW step, all computed in float64 from the
 * float32 weights (tests/reference/gpt.py). We load the weights by name into
 * model_init's parameters, run forward, loss, backward, grad_norm and the
 * clipped adamw_step in float32 and compare every number; then we break things (the
 * kernel's backward, one weight) and check that the comparison fails.
 *
 * kernels: every kernel of attn_kernels has gradient-check cases and a
 * primitive-op reference in tests/layer_cases.c; its output, gradients and
 * attention matrix must match that reference, and a broken backward must fail
 * its gradient check. */
#include <cJSON.h>
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer_cases.h"
#include "model.h"
#include "optim/optim.h"
#include "options.h"
#include "safetensors.h"
#include "test_util.h"

/* float32 against a float64 reference. The largest error seen is 2e-6 on a
 * logit (1/8 of its tolerance: two layers of rounding, fast exp and tanh);
 * gradients and the stepped parameters stay below 1/30 of theirs (same at 1
 * thread and at 4). A 10% error in any backward is far outside. */
#define ATOL 1e-5f
#define RTOL 1e-4f

/* The step of tests/reference/gpt.py. */
#define GOLDEN_LR 1e-3f
#define GOLDEN_MAX_NORM 1.0f

/* Below this, a clipped gradient is at the level of float32 rounding noise
 * (gradient errors are ~1e-9 for elements this small; the biases of k have a
 * gradient that is exactly 0 in exact arithmetic, since softmax ignores a
 * constant added to a row of scores, and are ~1e-10 in float32). AdamW's
 * first step moves an element by lr g / (|g| + eps), eps 1e-8: for such g the
 * noise decides where in [-lr, lr] it lands, so these elements are compared
 * with tolerance 2 lr. Above it the step's sensitivity lr eps / g^2 is at most
 * 10, so gradient errors of 1e-9 give step errors of 1e-8, well inside ATOL. */
#define GOLDEN_NOISE_GRAD 1e-6f

typedef struct {
    ModelConfig m;
    int B, T;
    int ignored; /* targets of -1 in the batch */
    int talking; /* TalkingHeads (a kernel option: set by golden_model) */
    const char *pos; /* the pos value (set by golden_model) */
} GoldenConfig;

/* The configs of tests/reference/gpt.py, in order; test_golden_fixture_configs
 * checks them against the fixture's JSON. */
static const GoldenConfig golden_configs[] = {
    {{.vocab = 256, .layers = 2, .d_model = 32, .heads = 4, .key_size = 8, .head_size = 8, .mlp_ratio = 4,
      .context = 16, .norm = NORM_LAYERNORM, .tie_embeddings = true, .attn = ATTN_SOFTMAX, .objective = OBJECTIVE_CLM},
     3, 16, 0, TALKING_NONE, "learned"},
    {{.vocab = 97, .layers = 2, .d_model = 24, .heads = 4, .key_size = 12, .head_size = 6, .mlp_ratio = 2,
      .context = 16, .norm = NORM_LAYERNORM, .tie_embeddings = false, .attn = ATTN_SOFTMAX, .objective = OBJECTIVE_CLM},
     2, 11, 3, TALKING_NONE, "learned"},
    {{.vocab = 64, .layers = 1, .d_model = 16, .heads = 2, .key_size = 8, .head_size = 8, .mlp_ratio = 4,
      .context = 8, .norm = NORM_RMSNORM, .tie_embeddings = true, .attn = ATTN_SOFTMAX, .objective = OBJECTIVE_CLM},
     2, 8, 0, TALKING_NONE, "none"},
    {{.vocab = 80, .layers = 2, .d_model = 24, .heads = 3, .key_size = 10, .head_size = 6, .mlp_ratio = 2,
      .context = 12, .norm = NORM_LAYERNORM, .tie_embeddings = false, .attn = ATTN_SOFTMAX,
      .objective = OBJECTIVE_CLM},
     2, 12, 2, TALKING_BOTH, "learned"},
    /* positions */
    {{.vocab = 64, .layers = 2, .d_model = 16, .heads = 2, .key_size = 8, .head_size = 8, .mlp_ratio = 2,
      .context = 8, .norm = NORM_RMSNORM, .tie_embeddings = true, .attn = ATTN_SOFTMAX, .objective = OBJECTIVE_CLM},
     2, 10, 0, TALKING_NONE, "sinusoidal"},
    {{.vocab = 50, .layers = 2, .d_model = 24, .heads = 3, .key_size = 10, .head_size = 6, .mlp_ratio = 2,
      .context = 12, .norm = NORM_LAYERNORM, .tie_embeddings = false, .attn = ATTN_SOFTMAX, .rope_dims = 6, .objective = OBJECTIVE_CLM},
     2, 12, 1, TALKING_NONE, "rope"},
    {{.vocab = 40, .layers = 2, .d_model = 24, .heads = 3, .key_size = 8, .head_size = 8, .mlp_ratio = 2,
      .context = 6, .norm = NORM_LAYERNORM, .tie_embeddings = true, .attn = ATTN_SOFTMAX, .window = 9, .logn = ON, .objective = OBJECTIVE_CLM},
     2, 14, 0, TALKING_NONE, "alibi"},
    {{.vocab = 40, .layers = 2, .d_model = 16, .heads = 4, .key_size = 4, .head_size = 4, .mlp_ratio = 2,
      .context = 8, .norm = NORM_LAYERNORM, .tie_embeddings = true, .attn = ATTN_SOFTMAX, .objective = OBJECTIVE_CLM},
     2, 8, 0, TALKING_NONE, "kerple_power"},
    {{.vocab = 40, .layers = 1, .d_model = 16, .heads = 2, .key_size = 8, .head_size = 8, .mlp_ratio = 2,
      .context = 5, .norm = NORM_LAYERNORM, .tie_embeddings = true, .attn = ATTN_SOFTMAX, .logn = ON, .objective = OBJECTIVE_CLM},
     2, 9, 0, TALKING_NONE, "kerple_log"},
    {{.vocab = 40, .layers = 2, .d_model = 24, .heads = 3, .key_size = 8, .head_size = 8, .mlp_ratio = 2,
      .context = 8, .norm = NORM_LAYERNORM, .tie_embeddings = true, .attn = ATTN_SOFTMAX, .sandwich_lambda = 0.7f, .objective = OBJECTIVE_CLM},
     2, 10, 0, TALKING_NONE, "sandwich"},
    {{.vocab = 40, .layers = 2, .d_model = 16, .heads = 2, .key_size = 8, .head_size = 8, .mlp_ratio = 2,
      .context = 8, .norm = NORM_LAYERNORM, .tie_embeddings = false, .attn = ATTN_SOFTMAX, .rope_dims = 6, .objective = OBJECTIVE_CLM},
     2, 13, 0, TALKING_NONE, "xpos"},
};
#define N_GOLDEN ((int)(sizeof golden_configs / sizeof golden_configs[0]))

/* Golden config k's model, its kernel options set. */
static ModelConfig golden_model(int k) {
    ModelConfig m = golden_configs[k].m;
    softmax_opts(&m)->talking_heads = golden_configs[k].talking;
    m.pos = pos_of(golden_configs[k].pos);
    return m;
}

/* ---- golden: the model against PyTorch ------------------------------------- */

/* How far a golden run got: the first stage that differed, or GOLDEN_OK. */
typedef enum { GOLDEN_LOAD, GOLDEN_LOGITS, GOLDEN_LOSS, GOLDEN_GRADS, GOLDEN_NORM, GOLDEN_STEP, GOLDEN_OK } GoldenStage;

static const char *const stage_names[] = {"load", "logits", "loss", "gradients", "gradient norm", "AdamW step", "ok"};

/* One weight changed after loading, to show that the comparison notices. */
typedef struct {
    const char *param;
    long index;
    float delta;
} Perturbation;

static bool fx_read(StFile *sf, const char *name, int ndim, const int *shape, float *dst, char *msg, int size) {
    Err e;
    if (st_read_expect(sf, name, ndim, shape, dst, &e) != 0) {
        snprintf(msg, (size_t)size, "%s", e.msg);
        return false;
    }
    return true;
}

/* Reads "<pre><what>" [B, T] and converts to ints in [lo, hi). */
static bool fx_read_ids(StFile *sf, const char *pre, const char *what, int B, int T, int lo, int hi, int *dst, char *msg,
                        int size) {
    char name[128];
    snprintf(name, sizeof name, "%s%s", pre, what);
    float *f = xmalloc((size_t)B * T * sizeof(float));
    bool ok = fx_read(sf, name, 2, (int[]){B, T}, f, msg, size);
    for (int i = 0; ok && i < B * T; i++) {
        dst[i] = (int)f[i];
        if ((float)dst[i] != f[i] || dst[i] < lo || dst[i] >= hi) {
            snprintf(msg, (size_t)size, "%s[%d] = %g is not an id in [%d, %d)", name, i, f[i], lo, hi);
            ok = false;
        }
    }
    free(f);
    return ok;
}

/* Every "<pre><section>/<name>" in the fixture names a parameter of the model. */
static bool fx_names_known(StFile *sf, const char *pre, const char *section, const ParamSet *p, char *msg, int size) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s%s/", pre, section);
    size_t len = strlen(prefix);
    for (int i = 0; i < sf->n_entries; i++) {
        const char *name = sf->entries[i].name;
        if (strncmp(name, prefix, len) == 0 && !params_find(p, name + len)) {
            snprintf(msg, (size_t)size, "fixture tensor %s: the model has no parameter %s", name, name + len);
            return false;
        }
    }
    return true;
}

/* Compares every parameter's values (or gradients) with "<pre><section>/<name>". */
static bool compare_params(StFile *sf, const char *pre, const char *section, const ParamSet *p, bool grads, float *want,
                           char *msg, int size) {
    for (int i = 0; i < params_count(p); i++) {
        const Tensor *t = p->list[i];
        char name[160], detail[256];
        snprintf(name, sizeof name, "%s%s/%s", pre, section, t->name);
        if (!fx_read(sf, name, t->ndim, t->shape, want, msg, size)) return false;
        const float *got = grads ? p->grad + p->offset[i] : p->value + p->offset[i];
        if (!rounded_close(name, got, want, t->n, detail, sizeof detail)) {
            snprintf(msg, (size_t)size, "%s", detail);
            return false;
        }
    }
    return true;
}

/* The parameters after the step. `ref_grad` is the fixture's gradient slab,
 * `our_grad` ours before the step (which zeroes it) and `clip` the clipping
 * factor, to find the elements whose step float32
 * noise decides (see GOLDEN_NOISE_GRAD). */
static bool compare_step(StFile *sf, const char *pre, const ParamSet *p, const float *ref_grad, const float *our_grad, float clip,
                         float *want, char *msg, int size) {
    long noisy = 0;
    for (int i = 0; i < params_count(p); i++) {
        const Tensor *t = p->list[i];
        char name[160];
        snprintf(name, sizeof name, "%sstep/%s", pre, t->name);
        if (!fx_read(sf, name, t->ndim, t->shape, want, msg, size)) return false;
        const float *got = p->value + p->offset[i], *g = ref_grad + p->offset[i], *our_g = our_grad + p->offset[i];
        for (long j = 0; j < t->n; j++) {
            /* Both exactly 0 (an embedding row no id picked): only the decay moves it, exactly. */
            bool noise = fabsf(g[j] * clip) < GOLDEN_NOISE_GRAD && !(g[j] == 0.0f && our_g[j] == 0.0f);
            noisy += noise;
            float tol = noise ? 2.0f * GOLDEN_LR + ATOL : ATOL + RTOL * fabsf(want[j]);
            if (!(fabsf(got[j] - want[j]) <= tol)) {
                snprintf(msg, (size_t)size, "%s element %ld: got %.8g, want %.8g (tolerance %.2g; gradient %.3g)", name,
                         j, got[j], want[j], tol, g[j]);
                return false;
            }
        }
    }
    /* The loose tolerance must stay an exception, or the check says little. */
    if (noisy * 100 > p->total) {
        snprintf(msg, (size_t)size, "%s: %ld of %ld gradients are below %g: the fixture pins the step down poorly", pre,
                 noisy, p->total, (double)GOLDEN_NOISE_GRAD);
        return false;
    }
    return true;
}

/* Runs golden case gc with model config mc, its tensors under `pre` in the
 * fixture ("cfg0/"); returns the first stage that differed (with a message)
 * or GOLDEN_OK. */
static GoldenStage golden_run_once(StFile *sf, const GoldenConfig *gc, const ModelConfig *mc, const char *pre,
                                   const Perturbation *perturb, char *msg, int size) {
    const int B = gc->B, T = gc->T, V = mc->vocab;
    Model m;
    model_init(&m, mc);
    ParamSet *p = &m.params;
    Arena a;
    arena_init(&a, 1 << 20);
    engine_set_arena(&a);
    tape_reset();
    bool grad_was = grad_set(false);
    int *ids = xmalloc((size_t)B * T * sizeof(int)), *targets = xmalloc((size_t)B * T * sizeof(int));
    float *want = xmalloc((size_t)(p->total > (long)B * T * V ? p->total : (long)B * T * V) * sizeof(float));
    float *ref_grad = xmalloc((size_t)p->total * sizeof(float)), *our_grad = xmalloc((size_t)p->total * sizeof(float));
    GoldenStage stage = GOLDEN_LOAD;
    char name[160], detail[256];

    /* Every parameter by its name and shape: proves the names match PyTorch's state_dict. */
    for (int i = 0; i < params_count(p); i++) {
        Tensor *t = p->list[i];
        snprintf(name, sizeof name, "%sparam/%s", pre, t->name);
        if (!fx_read(sf, name, t->ndim, t->shape, t->data, msg, size)) goto done;
        rounding_move_input(t->data, t->n);
    }
    if (!fx_names_known(sf, pre, "param", p, msg, size) || !fx_names_known(sf, pre, "grad", p, msg, size) ||
        !fx_names_known(sf, pre, "step", p, msg, size))
        goto done;
    if (!fx_read_ids(sf, pre, "ids", B, T, 0, V, ids, msg, size) ||
        !fx_read_ids(sf, pre, "targets", B, T, -1, V, targets, msg, size))
        goto done;
    if (perturb) {
        Tensor *t = params_find(p, perturb->param);
        if (!t || perturb->index >= t->n) DIE("golden_run: no element %ld of %s", perturb->index, perturb->param);
        t->data[perturb->index] += perturb->delta;
    }

    /* Logits, with gradients off. */
    stage = GOLDEN_LOGITS;
    Tensor *logits = model_forward(&m, ids, B, T);
    snprintf(name, sizeof name, "%slogits", pre);
    if (!fx_read(sf, name, 3, (int[]){B, T, V}, want, msg, size)) goto done;
    if (!rounded_close(name, logits->data, want, logits->n, detail, sizeof detail)) {
        snprintf(msg, (size_t)size, "%s", detail);
        goto done;
    }
    ck_assert_ptr_null(tape_last());

    /* The loss, recorded this time. */
    stage = GOLDEN_LOSS;
    arena_reset(&a);
    grad_set(true);
    params_zero_grad(p);
    Tensor *loss = model_loss(&m, ids, targets, B, T);
    snprintf(name, sizeof name, "%sloss", pre);
    if (!fx_read(sf, name, 1, (int[]){1}, want, msg, size)) goto done;
    if (loss->n != 1 || !rounded_close(name, loss->data, want, 1, detail, sizeof detail)) {
        snprintf(msg, (size_t)size, "%s", detail);
        goto done;
    }

    /* Every parameter gradient. */
    stage = GOLDEN_GRADS;
    backward(loss);
    if (!compare_params(sf, pre, "grad", p, true, want, msg, size)) goto done;
    for (int i = 0; i < params_count(p); i++) {
        snprintf(name, sizeof name, "%sgrad/%s", pre, p->list[i]->name);
        if (!fx_read(sf, name, p->list[i]->ndim, p->list[i]->shape, ref_grad + p->offset[i], msg, size)) goto done;
    }

    /* Clipping, then one AdamW step. */
    stage = GOLDEN_NORM;
    const double norm_sum = grad_norm(p);
    float norm = (float)norm_sum;
    snprintf(name, sizeof name, "%sgrad_norm", pre);
    if (!fx_read(sf, name, 1, (int[]){1}, want, msg, size)) goto done;
    if (!rounded_close("gradient norm", &norm, want, 1, detail, sizeof detail)) {
        snprintf(msg, (size_t)size, "%s", detail);
        goto done;
    }
    stage = GOLDEN_STEP;
    AdamWConfig opt = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f};
    const float clip = clip_scale(norm_sum, GOLDEN_MAX_NORM);
    memcpy(our_grad, p->grad, (size_t)p->total * sizeof(float));
    adamw_step(p, &opt, GOLDEN_LR, 1, clip);
    /* the step has its own analysis (GOLDEN_NOISE_GRAD), on the unmoved pass */
    if (!rounding_moving() && !compare_step(sf, pre, p, ref_grad, our_grad, clip, want, msg, size)) goto done;
    stage = GOLDEN_OK;
done:
    tape_reset();
    grad_set(grad_was);
    engine_set_arena(NULL);
    arena_free(&a);
    free(ids);
    free(targets);
    free(want);
    free(ref_grad);
    free(our_grad);
    model_free(&m);
    return stage;
}

/* The longest sum of golden case gc: over the B T positions (weight
 * gradients), the MLP's hidden width, or the vocabulary. */
static long golden_sum_length(const GoldenConfig *gc) {
    long K = (long)gc->B * gc->T, hidden = (long)gc->m.mlp_ratio * gc->m.d_model;
    if (hidden > K) K = hidden;
    return gc->m.vocab > K ? gc->m.vocab : K;
}

/* golden_run_once in ROUNDING_PASSES (test_util.h): logits, loss, gradients
 * and their norm within the rounding carried from the weights, moved by
 * gamma_K. */
static GoldenStage golden_run_case(StFile *sf, const GoldenConfig *gc, const ModelConfig *mc, const char *pre,
                                   const Perturbation *perturb, char *msg, int size) {
    GoldenStage r = GOLDEN_LOAD;
    ROUNDING_PASSES(golden_sum_length(gc), KERNEL_ROUNDING_SLACK)
    r = golden_run_once(sf, gc, mc, pre, perturb, msg, size);
    return r;
}

/* Golden config k of gpt.safetensors. */
static GoldenStage golden_run(StFile *sf, int k, const Perturbation *perturb, char *msg, int size) {
    char pre[16];
    snprintf(pre, sizeof pre, "cfg%d/", k);
    ModelConfig mc = golden_model(k);
    return golden_run_case(sf, &golden_configs[k], &mc, pre, perturb, msg, size);
}

START_TEST(test_golden_config) {
    StFile sf = fixture_open("gpt.safetensors");
    char msg[512] = "";
    GoldenStage s = golden_run(&sf, _i, NULL, msg, sizeof msg);
    st_close(&sf);
    ck_assert_msg(s == GOLDEN_OK, "cfg%d differs from PyTorch at the %s: %s", _i, stage_names[s], msg);
}
END_TEST

static int json_int(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    ck_assert_msg(cJSON_IsNumber(v), "config JSON: no number %s", key);
    return v->valueint;
}

static const char *json_str(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    ck_assert_msg(cJSON_IsString(v), "config JSON: no string %s", key);
    return v->valuestring;
}

/* golden_configs and the fixture's configs are the same list. */
START_TEST(test_golden_fixture_configs) {
    StFile sf = fixture_open("gpt.safetensors");
    const char *n = st_meta(&sf, "configs");
    ck_assert_ptr_nonnull(n);
    ck_assert_msg(atoi(n) == N_GOLDEN, "the fixture has %s configs, tests/test_model.c %d; run: make fixtures", n,
                  N_GOLDEN);
    for (int k = 0; k < N_GOLDEN; k++) {
        char key[32];
        snprintf(key, sizeof key, "cfg%d/config", k);
        const char *text = st_meta(&sf, key);
        ck_assert_msg(text != NULL, "fixture metadata has no %s", key);
        cJSON *o = cJSON_Parse(text);
        ck_assert_msg(o != NULL, "%s is not JSON", key);
        const GoldenConfig *g = &golden_configs[k];
        const ModelConfig gm = golden_model(k), *c = &gm;
        ck_assert_int_eq(json_int(o, "vocab"), c->vocab);
        ck_assert_int_eq(json_int(o, "layers"), c->layers);
        ck_assert_int_eq(json_int(o, "d_model"), c->d_model);
        ck_assert_int_eq(json_int(o, "heads"), c->heads);
        ck_assert_int_eq(json_int(o, "key_size"), model_key_size(c));
        ck_assert_int_eq(json_int(o, "head_size"), model_head_size(c));
        ck_assert_int_eq(json_int(o, "mlp_ratio"), c->mlp_ratio);
        ck_assert_int_eq(json_int(o, "context"), c->context);
        ck_assert_int_eq(json_int(o, "batch"), g->B);
        ck_assert_int_eq(json_int(o, "length"), g->T);
        ck_assert_int_eq(json_int(o, "ignored"), g->ignored);
        ck_assert_str_eq(json_str(o, "norm"), c->norm == NORM_LAYERNORM ? "layernorm" : "rmsnorm");
        ck_assert_str_eq(json_str(o, "pos"), g->pos);
        const cJSON *rd = cJSON_GetObjectItemCaseSensitive(o, "rope_dims"), *w = cJSON_GetObjectItemCaseSensitive(o, "window");
        const cJSON *logn = cJSON_GetObjectItemCaseSensitive(o, "logn"); /* absent: all dims, 0, off */
        ck_assert_int_eq(cJSON_IsNumber(rd) ? rd->valueint : 0, c->rope_dims);
        ck_assert_int_eq(cJSON_IsNumber(w) ? w->valueint : 0, c->window);
        ck_assert_str_eq(cJSON_IsString(logn) ? logn->valuestring : "off", c->logn == ON ? "on" : "off");
        const cJSON *lambda = cJSON_GetObjectItemCaseSensitive(o, "sandwich_lambda");
        if (!strcmp(g->pos, "sandwich"))
            ck_assert(cJSON_IsNumber(lambda) && fabs(lambda->valuedouble - c->sandwich_lambda) < 1e-6);
        static const char *const talking[] = {"none", "pre", "post", "both"};
        const cJSON *th = cJSON_GetObjectItemCaseSensitive(o, "talking_heads"); /* absent: none */
        ck_assert_str_eq(cJSON_IsString(th) ? th->valuestring : "none", talking[softmax_opts(c)->talking_heads]);
        ck_assert(cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(o, "tie_embeddings")));
        ck_assert_int_eq(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "tie_embeddings")), c->tie_embeddings);
        cJSON_Delete(o);
    }
    st_close(&sf);
}
END_TEST

/* A 10%-scaled or missing backward in the attention kernel must break the
 * gradients (and only them: logits and loss still match): plain attention's
 * op in the reference config, Talking-Heads attention's in cfg3; then the
 * fused MLP's and the fused residual add + norm's. */
START_TEST(test_golden_catches_broken_kernel_backward) {
    StFile sf = fixture_open("gpt.safetensors");
    const struct {
        int config;
        const char *op;
    } runs[] = {{0, "attn_softmax"}, {3, "attn_talking"}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        const int k = runs[r].config;
        const AttnKernel *kern = attn_kernel_for(golden_configs[k].m.attn);
        OpDef *op = NULL;
        for (int o = 0; kern->ops[o]; o++)
            if (strcmp(kern->ops[o]->name, runs[r].op) == 0) op = kern->ops[o];
        ck_assert_msg(op != NULL, "kernel %s has no op %s", kern->name, runs[r].op);
        for (int mu = 0; mu < MUTATION_COUNT; mu++) {
            char msg[512] = "";
            kernel_mutation_install(op, (Mutation)mu);
            GoldenStage s = golden_run(&sf, k, NULL, msg, sizeof msg);
            kernel_mutation_remove(op);
            ck_assert_msg(s == GOLDEN_GRADS, "a %s backward for %s: golden cfg%d stopped at the %s (%s)",
                          mutation_name((Mutation)mu), op->name, k, stage_names[s], msg);
        }
    }
    /* the fused MLP of every block, against the same PyTorch model */
    for (int mu = 0; mu < MUTATION_COUNT; mu++) {
        char msg[512] = "";
        kernel_mutation_install(&mlp_op, (Mutation)mu);
        GoldenStage s = golden_run(&sf, 0, NULL, msg, sizeof msg);
        kernel_mutation_remove(&mlp_op);
        ck_assert_msg(s == GOLDEN_GRADS, "a %s backward for mlp: golden cfg0 stopped at the %s (%s)",
                      mutation_name((Mutation)mu), stage_names[s], msg);
    }
    /* the fused LM head + loss, tied (cfg0) and untied with ignored targets (cfg1) */
    for (int k = 0; k < 2; k++)
        for (int mu = 0; mu < MUTATION_COUNT; mu++) {
            char msg[512] = "";
            kernel_mutation_install(&lm_cross_entropy_op, (Mutation)mu);
            GoldenStage s = golden_run(&sf, k, NULL, msg, sizeof msg);
            kernel_mutation_remove(&lm_cross_entropy_op);
            ck_assert_msg(s == GOLDEN_GRADS, "a %s backward for lm_cross_entropy: golden cfg%d stopped at the %s (%s)",
                          mutation_name((Mutation)mu), k, stage_names[s], msg);
        }
    /* the residual adds fused with the norms after them: layernorm (cfg0), rmsnorm (cfg2) */
    const struct {
        int config, op;
    } fused[] = {{0, OP_ADD_LAYERNORM}, {2, OP_ADD_RMSNORM}};
    for (size_t f = 0; f < sizeof fused / sizeof fused[0]; f++)
        for (int mu = 0; mu < MUTATION_COUNT; mu++) {
            char msg[512] = "";
            mutation_install(fused[f].op, (Mutation)mu);
            GoldenStage s = golden_run(&sf, fused[f].config, NULL, msg, sizeof msg);
            mutation_remove(fused[f].op);
            ck_assert_msg(s == GOLDEN_GRADS, "a %s backward for %s: golden cfg%d stopped at the %s (%s)",
                          mutation_name((Mutation)mu), op_defs[fused[f].op].name, fused[f].config, stage_names[s], msg);
        }
    st_close(&sf);
}
END_TEST

/* One weight deep in the model, slightly changed, must break the logits. */
START_TEST(test_golden_catches_perturbed_weight) {
    StFile sf = fixture_open("gpt.safetensors");
    const Perturbation perturbs[] = {
        {"blocks.0.attn.k.weight", 5, 0.01f},
        {"blocks.1.mlp.fc.bias", 3, 0.01f},
        {"pos_emb.weight", 40, 0.01f},
        {"blocks.0.ln1.bias", 7, 0.01f},
    };
    for (size_t i = 0; i < sizeof perturbs / sizeof perturbs[0]; i++) {
        char msg[512] = "";
        GoldenStage s = golden_run(&sf, 0, &perturbs[i], msg, sizeof msg);
        ck_assert_msg(s == GOLDEN_LOGITS, "%s[%ld] + %g: the golden run stopped at the %s (%s)", perturbs[i].param,
                      perturbs[i].index, (double)perturbs[i].delta, stage_names[s], msg);
    }
    st_close(&sf);
}
END_TEST

/* ---- kernels ----------------------------------------------------------------- */

START_TEST(test_kernel_gradcheck) {
    const KernelCase *kc = &kernel_cases[_i];
    GcResult r;
    bool ok = gradcheck(&kc->gc, 4321 + (uint64_t)_i, NULL, &r);
    ck_assert_msg(ok, "gradcheck %s failed: %s (worst error/tolerance %.3g)", kc->gc.name, r.why, r.worst_ratio);
    ck_assert_int_gt(r.checked, 0);
}
END_TEST

/* The longest sum of a kernel case: over the KC_T positions or a head's size. */
#define KERNEL_CASE_SUM (KC_T > KC_DV ? (KC_T > KC_DK ? KC_T : KC_DK) : KC_DV)

static Tensor *random_leaf(Rng *rng, int d) {
    Tensor *t = tensor_4d(KC_B, KC_H, KC_T, d);
    rng_fill_normal(rng, t->data, t->n, 0.0f, 1.0f);
    rounding_move_input(t->data, t->n);
    t->requires_grad = true;
    return t;
}

static float *copy_of(const float *x, long n) {
    float *c = arena_alloc(engine_arena(), (size_t)n * sizeof(float));
    memcpy(c, x, (size_t)n * sizeof(float));
    return c;
}

/* The call of reference r on kernel kern, its config in *m, with random
 * leaves for the kernel's parameters. */
static AttnCall ref_call(const KernelRef *r, const AttnKernel *kern, ModelConfig *m, Rng *rng) {
    AttnCall c = kernel_case_call(m, kern, r->causal);
    if (r->setup) r->setup(&c, m);
    for (int i = 0; i < r->n_params; i++) {
        Tensor *p = tensor_new(r->params[i].ndim, r->params[i].shape);
        rng_fill_normal(rng, p->data, p->n, 0.0f, 0.5f);
        rounding_move_input(p->data, p->n);
        p->requires_grad = true;
        c.params[i] = p;
    }
    return c;
}

/* Output and gradients of reference variant _i's kernel against its
 * composition of primitive ops, for the same q, k, v, parameters and seed. */
START_TEST(test_kernel_matches_composition) {
    ROUNDING_PASSES(KERNEL_CASE_SUM, KERNEL_ROUNDING_SLACK) {
        const KernelRef *ref = &kernel_refs[_i];
        const AttnKernel *kern = kernel_by_name(ref->kernel);
        ck_assert_msg(kern != NULL, "reference %s: no kernel named %s", ref->name, ref->kernel);
        Arena a;
        arena_init(&a, 1 << 16);
        engine_set_arena(&a);
        bool was = grad_set(true);
        Rng rng;
        rng_seed(&rng, 77 + (uint64_t)_i);
        ModelConfig m;
        AttnCall c = ref_call(ref, kern, &m, &rng);
        Tensor *in[3] = {random_leaf(&rng, KC_DK), random_leaf(&rng, KC_DK), random_leaf(&rng, KC_DV)};
        const long n_out = (long)KC_B * KC_H * KC_T * KC_DV;
        float *seed = arena_alloc(&a, (size_t)n_out * sizeof(float));
        rng_fill_normal(&rng, seed, n_out, 0.0f, 1.0f);

        tape_reset();
        Tensor *out = kern->forward(&c, in[0], in[1], in[2]);
        backward_seeded(out, seed);
        int n_leaves = 3 + ref->n_params;
        Tensor *leaves[3 + ATTN_MAX_PARAMS] = {in[0], in[1], in[2]};
        for (int i = 0; i < ref->n_params; i++) leaves[3 + i] = c.params[i];
        float *grads[3 + ATTN_MAX_PARAMS];
        for (int i = 0; i < n_leaves; i++) {
            ck_assert_msg(leaves[i]->grad != NULL, "%s: leaf %d got no gradient", ref->name, i);
            grads[i] = copy_of(leaves[i]->grad, leaves[i]->n);
            leaves[i]->grad = NULL;
        }
        tape_reset();
        Tensor *P;
        Tensor *want = ref->compose(&c, in[0], in[1], in[2], &P);
        backward_seeded(want, seed);

        char detail[256];
        ck_assert(tensor_same_shape(out, want));
        ck_assert_msg(rounded_close("output", out->data, want->data, out->n, detail, sizeof detail), "%s %s",
                      ref->name, detail);
        for (int i = 0; i < n_leaves; i++) {
            ck_assert_msg(leaves[i]->grad != NULL, "%s: the composition gives leaf %d no gradient", ref->name, i);
            ck_assert_msg(rounded_close("gradient", grads[i], leaves[i]->grad, leaves[i]->n, detail, sizeof detail),
                          "%s gradient of leaf %d (q, k, v, then parameters): %s", ref->name, i, detail);
        }
        tape_reset();
        grad_set(was);
        engine_set_arena(NULL);
        arena_free(&a);
    }
}
END_TEST

/* kernel->probs against the composition's attention matrix, and P v against
 * the kernel's output where that holds; causal P is exactly 0 above the
 * diagonal. */
START_TEST(test_kernel_probs) {
    ROUNDING_PASSES(KERNEL_CASE_SUM, KERNEL_ROUNDING_SLACK) {
        const KernelRef *ref = &kernel_refs[_i];
        const AttnKernel *kern = kernel_by_name(ref->kernel);
        ck_assert_msg(kern != NULL, "reference %s: no kernel named %s", ref->name, ref->kernel);
        ck_assert_ptr_nonnull(kern->probs);
        Arena a;
        arena_init(&a, 1 << 16);
        engine_set_arena(&a);
        bool was = grad_set(false);
        Rng rng;
        rng_seed(&rng, 991 + (uint64_t)_i);
        ModelConfig m;
        AttnCall c = ref_call(ref, kern, &m, &rng);
        Tensor *q = random_leaf(&rng, KC_DK), *k = random_leaf(&rng, KC_DK), *v = random_leaf(&rng, KC_DV);
        Tensor *out = kern->forward(&c, q, k, v);
        Tensor *P = kern->probs(&c, q, k);
        Tensor *P_ref;
        ref->compose(&c, q, k, v, &P_ref);
        ck_assert_ptr_null(tape_last());

        char detail[256], s1[64], s2[64];
        ck_assert_msg(tensor_same_shape(P, P_ref), "%s probs: shape %s, want %s", ref->name,
                      tensor_shape_str(P, s1, sizeof s1), tensor_shape_str(P_ref, s2, sizeof s2));
        ck_assert_msg(rounded_close("probs", P->data, P_ref->data, P->n, detail, sizeof detail), "%s %s",
                      ref->name, detail);
        if (c.causal && P->shape[3] == KC_T)
            for (long h = 0; h < (long)KC_B * KC_H; h++)
                for (int i = 0; i < KC_T; i++)
                    for (int j = i + 1; j < KC_T; j++)
                        ck_assert_msg(P->data[(h * KC_T + i) * KC_T + j] == 0.0f, "%s probs: P[%d, %d] != 0", ref->name,
                                      i, j);
        if (ref->probs_times_v) {
            Tensor *pv = op_matmul(P, v, false, false);
            ck_assert_msg(rounded_close("output", out->data, pv->data, out->n, detail, sizeof detail),
                          "%s: output is not probs . v: %s", ref->name, detail);
        }
        grad_set(was);
        engine_set_arena(NULL);
        arena_free(&a);
    }
}
END_TEST

/* Whether building the case puts `op` on the tape. */
static bool case_runs_op(const KernelCase *kc, const OpDef *op) {
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    bool was = grad_set(true);
    tape_reset();
    Tensor *in[GC_MAX_IN];
    for (int i = 0; i < kc->gc.n_in; i++) {
        in[i] = tensor_zeros(kc->gc.in[i].ndim, kc->gc.in[i].shape);
        in[i]->requires_grad = true;
    }
    kc->gc.build(in);
    bool found = false;
    for (Node *n = tape_last(); n; n = n->prev) found |= n->def == op;
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
    return found;
}

/* Walks attn_kernels: each kernel is complete, has a causal (unless it is
 * bidirectional-only) and a bidirectional gradient-check case that run its
 * fused ops, and a reference;
 * and every case and reference names a kernel that exists. */
START_TEST(test_every_kernel_has_cases) {
    ck_assert_int_gt(attn_kernel_count(), 0);
    for (int i = 0; i < attn_kernel_count(); i++) {
        const AttnKernel *kern = attn_kernels[i];
        ck_assert_msg(kern != NULL, "attn_kernels[%d] is empty", i);
        ck_assert_msg(kern->name && kern->forward && kern->probs, "attn_kernels[%d] is incomplete", i);
        for (int j = 0; j < i; j++) ck_assert_str_ne(kern->name, attn_kernels[j]->name);
        for (int o = 0; kern->ops[o]; o++)
            ck_assert_msg(kern->ops[o]->forward && kern->ops[o]->backward, "kernel %s: op incomplete", kern->name);
        bool has[2] = {false, false};
        for (int c = 0; c < n_kernel_cases; c++)
            if (strcmp(kernel_cases[c].kernel, kern->name) == 0) has[kernel_cases[c].causal] = true;
        for (int o = 0; kern->ops[o]; o++) {
            bool run = false;
            for (int c = 0; c < n_kernel_cases && !run; c++)
                run = strcmp(kernel_cases[c].kernel, kern->name) == 0 && case_runs_op(&kernel_cases[c], kern->ops[o]);
            ck_assert_msg(run, "no gradient-check case runs the op %s of kernel %s", kern->ops[o]->name, kern->name);
        }
        if (kern->bidirectional_only)
            ck_assert_msg(!has[1], "kernel %s is bidirectional-only but has a causal case", kern->name);
        else
            ck_assert_msg(has[1], "kernel %s has no causal gradient-check case in tests/layer_cases.c", kern->name);
        ck_assert_msg(has[0], "kernel %s has no bidirectional gradient-check case in tests/layer_cases.c", kern->name);
        bool has_ref = false;
        for (int r = 0; r < n_kernel_refs; r++) has_ref |= strcmp(kernel_refs[r].kernel, kern->name) == 0;
        ck_assert_msg(has_ref, "kernel %s has no primitive-op reference in tests/layer_cases.c", kern->name);
    }
    for (int c = 0; c < n_kernel_cases; c++)
        ck_assert_msg(kernel_by_name(kernel_cases[c].kernel) != NULL, "case %s: no kernel named %s",
                      kernel_cases[c].gc.name, kernel_cases[c].kernel);
    for (int r = 0; r < n_kernel_refs; r++)
        ck_assert_msg(kernel_by_name(kernel_refs[r].kernel) != NULL, "reference: no kernel named %s",
                      kernel_refs[r].kernel);
}
END_TEST

/* Each kernel's fused backward, 10% scaled or missing, fails every one of its
 * gradient-check cases. */
START_TEST(test_kernel_gradcheck_catches_broken_backward) {
    for (int i = 0; i < attn_kernel_count(); i++) {
        const AttnKernel *kern = attn_kernels[i];
        for (int o = 0; kern->ops[o]; o++) { /* primitive ops: tests/test_ops.c checks those */
            OpDef *op = kern->ops[o];
            for (int mu = 0; mu < MUTATION_COUNT; mu++) {
                int ran = 0;
                for (int c = 0; c < n_kernel_cases; c++) {
                    const KernelCase *kc = &kernel_cases[c];
                    if (strcmp(kc->kernel, kern->name) != 0 || !case_runs_op(kc, op)) continue;
                    GcResult r;
                    kernel_mutation_install(op, (Mutation)mu);
                    bool ok = gradcheck(&kc->gc, 99, NULL, &r);
                    kernel_mutation_remove(op);
                    ran++;
                    ck_assert_msg(!ok, "a %s backward for %s passed the gradient check %s",
                                  mutation_name((Mutation)mu), op->name, kc->gc.name);
                }
                ck_assert_int_gt(ran, 0);
            }
        }
    }
}
END_TEST

/* ---- positions: every scheme of the registry ------------------------------------
 *
 * A scheme is a few hooks (layers/attention/positions.h); one that is listed
 * but whose hook is missing trains the model of pos=none. So every scheme
 * must change the model's output against pos=none on the same weights, and
 * must match its case in tests/fixtures/positions_model.safetensors, the
 * same small model run by PyTorch (tests/reference/positions_model.py,
 * through gpt.py's model) to the logits, loss, every gradient and one AdamW
 * step. */

/* tests/reference/positions_model.py's TEMPLATE; keep the two in step. */
static const GoldenConfig pos_case = {{.vocab = 40, .layers = 2, .d_model = 16, .heads = 3, .key_size = 8,
                                       .head_size = 6, .mlp_ratio = 2, .context = 8, .norm = NORM_LAYERNORM,
                                       .tie_embeddings = true, .objective = OBJECTIVE_CLM},
                                      2, 8, 1, TALKING_NONE, NULL};

/* The case's model with scheme `pos`: the option table's defaults (the
 * scheme's own options among them), the template's sizes, attn=softmax. */
static ModelConfig pos_case_model(int pos) {
    Config c;
    config_defaults(&c);
    ModelConfig m = c.model;
    const ModelConfig *t = &pos_case.m;
    m.vocab = t->vocab, m.layers = t->layers, m.d_model = t->d_model, m.heads = t->heads;
    m.key_size = t->key_size, m.head_size = t->head_size, m.mlp_ratio = t->mlp_ratio, m.context = t->context;
    m.norm = t->norm, m.tie_embeddings = t->tie_embeddings, m.objective = t->objective;
    m.attn = attn_find("softmax"), m.pos = pos;
    c.model = m;
    Err e;
    ck_assert_msg(config_validate(&c, &e) == 0, "pos=%s refuses the case's model: %s", pos_name(pos), e.msg);
    return m;
}

/* The logits [B, T, V] of model m on the case's ids, gradients off; freed by the caller. */
static float *pos_case_logits(Model *m) {
    int B = pos_case.B, T = pos_case.T, V = m->cfg.vocab, ids[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (i * 7 + 3) % V;
    Arena a;
    arena_init(&a, 1 << 20);
    engine_set_arena(&a);
    bool was = grad_set(false);
    Tensor *y = model_forward(m, ids, B, T);
    float *out = xmalloc((size_t)B * T * V * sizeof(float));
    memcpy(out, y->data, (size_t)B * T * V * sizeof(float));
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
    return out;
}

/* Each scheme, weights drawn, against pos=none with those same weights (the
 * ones both have, by name): the logits must differ. */
START_TEST(test_positions_change_the_model) {
    int none = pos_of("none");
    for (int pos = 0; pos < n_pos_schemes; pos++) {
        if (pos == none) continue;
        ModelConfig cx = pos_case_model(pos), cn = pos_case_model(none);
        Model x, n;
        model_init(&x, &cx);
        model_init(&n, &cn);
        Rng rng;
        rng_seed(&rng, 35);
        model_init_weights(&x, &rng);
        for (int i = 0; i < params_count(&n.params); i++) {
            Tensor *t = n.params.list[i], *from = params_find(&x.params, t->name);
            ck_assert_msg(from && from->n == t->n, "pos=%s: no %s like pos=none's", pos_name(pos), t->name);
            memcpy(t->data, from->data, (size_t)t->n * sizeof(float));
        }
        float *lx = pos_case_logits(&x), *ln = pos_case_logits(&n);
        double most = 0;
        for (long i = 0; i < (long)pos_case.B * pos_case.T * cx.vocab; i++)
            if (fabs(lx[i] - ln[i]) > most) most = fabs(lx[i] - ln[i]);
        ck_assert_msg(most > 1e-5, "pos=%s gives the logits of pos=none (largest difference %g): a hook of its PosScheme "
                      "is missing, or does nothing", pos_name(pos), most);
        free(lx);
        free(ln);
        model_free(&x);
        model_free(&n);
    }
}
END_TEST

/* Each scheme against its PyTorch case, and a wrong weight noticed. */
START_TEST(test_positions_match_pytorch) {
    StFile sf = fixture_open("positions_model.safetensors");
    for (int pos = 0; pos < n_pos_schemes; pos++) {
        char pre[64], key[80], msg[512] = "";
        snprintf(pre, sizeof pre, "%s/", pos_name(pos));
        snprintf(key, sizeof key, "%sconfig", pre);
        const char *cfg = st_meta(&sf, key);
        ck_assert_msg(cfg != NULL, "pos=%s has no PyTorch case: add it to tests/reference/positions_model.py and run "
                      "make fixtures", pos_name(pos));
        cJSON *o = cJSON_Parse(cfg);
        ck_assert(o != NULL);
        ck_assert_str_eq(json_str(o, "pos"), pos_name(pos));
        ck_assert_int_eq(json_int(o, "heads"), pos_case.m.heads);
        ck_assert_int_eq(json_int(o, "length"), pos_case.T);
        cJSON_Delete(o);
        ModelConfig m = pos_case_model(pos);
        GoldenStage st = golden_run_case(&sf, &pos_case, &m, pre, NULL, msg, sizeof msg);
        ck_assert_msg(st == GOLDEN_OK, "pos=%s differs from PyTorch at the %s: %s", pos_name(pos), stage_names[st], msg);
        Perturbation wrong = {"blocks.0.attn.q.weight", 5, 0.01f};
        st = golden_run_case(&sf, &pos_case, &m, pre, &wrong, msg, sizeof msg);
        ck_assert_msg(st == GOLDEN_LOGITS, "pos=%s: a weight off by 0.01 stopped at the %s", pos_name(pos),
                      stage_names[st]);
    }
    st_close(&sf);
}
END_TEST

Suite *model_suite(void) {
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_golden_fixture_configs);
    tcase_add_loop_test(tc, test_golden_config, 0, N_GOLDEN);
    tcase_add_test(tc, test_golden_catches_broken_kernel_backward);
    tcase_add_test(tc, test_golden_catches_perturbed_weight);
    suite_add_tcase(s, tc);

    tc = tcase_create("positions");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_positions_change_the_model);
    tcase_add_test(tc, test_positions_match_pytorch);
    suite_add_tcase(s, tc);

    tc = tcase_create("kernels");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_every_kernel_has_cases);
    tcase_add_loop_test(tc, test_kernel_gradcheck, 0, n_kernel_cases);
    tcase_add_loop_test(tc, test_kernel_matches_composition, 0, n_kernel_refs);
    tcase_add_loop_test(tc, test_kernel_probs, 0, n_kernel_refs);
    tcase_add_test(tc, test_kernel_gradcheck_catches_broken_backward);
    suite_add_tcase(s, tc);
    return s;
}
