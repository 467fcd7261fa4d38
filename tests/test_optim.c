/* test_optim.c: AdamW, the learning-rate schedules and gradient clipping.
 *
 * tests/fixtures/adamw.safetensors holds three training steps run by PyTorch
 * in float64 (tests/reference/adamw.py): two micro-batches' gradients added
 * up, clip_grad_norm_, torch.optim.AdamW and zero_grad. We replay them in
 * float32 (grad_norm, then adamw_step's one pass that clips, updates and
 * zeroes) and compare every parameter and both moments after every step; then
 * we replay with one thing wrong at a time and check that the comparison
 * fails, so the fixture really pins each part of the update down.
 *
 * The one pass must also give the very bits of the separate passes it
 * replaces (scale the gradients, AdamW parameter by parameter, zero the
 * gradients) on any thread count, which a plain copy of those passes here
 * checks on a slab large enough to be threaded. */
#include <assert.h>
#include <cJSON.h>
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim/optim.h"
#include "safetensors.h"
#include "test_util.h"

/* fp32 against a float64 reference: a few float32 roundings per step. */
#define ATOL 1e-6f
#define RTOL 1e-5f

/* The run of tests/reference/adamw.py; keep the two in step. */
#define FX_STEPS 3
#define FX_MICRO 2
#define FX_MAX_NORM 1.0f
#define FX_LR 0.05f
#define FX_MIN_LR 0.005f
#define FX_WARMUP 1
#define FX_TOTAL 4

typedef struct {
    const char *name;
    int ndim;
    int shape[2];
} FixtureParam;

static const FixtureParam fx_params[] = {
    {"w", 2, {4, 3}},
    {"b", 1, {4, 0}},
    {"emb", 2, {5, 3}},
    {"gain", 1, {3, 0}},
};
#define FX_NPARAMS ((int)(sizeof fx_params / sizeof fx_params[0]))

/* One thing wrong at a time; the fixture must tell each from the right update. */
typedef enum {
    VARIANT_RIGHT,
    VARIANT_DECAY_ALL,        /* biases and gains declared as [1, n], so they are decayed too */
    VARIANT_NO_DECAY,         /* weight_decay 0 */
    VARIANT_STEP_OFF_BY_ONE,  /* t = step + 2: the bias corrections of the next step */
    VARIANT_NO_CLIP,          /* max_norm 0 */
    VARIANT_TORCH_BETA2,      /* beta2 0.999 (PyTorch's default) instead of 0.95 */
    VARIANT_LAST_MICRO_BATCH, /* only the last micro-batch's gradient: a zeroing between them */
    VARIANT_BREAK_SCALE,      /* broken_scale: the clipping factor not applied in the pass */
    VARIANT_BREAK_DECAY,      /* broken_decay: each parameter decayed as the one declared before it */
    VARIANT_BREAK_ZERO,       /* broken_zero: the gradients not zeroed, so the next step adds to them */
    VARIANT_COUNT
} Variant;

static const char *const variant_names[] = {
    "right", "weight decay on vectors too", "no weight decay", "step number off by one",
    "no clipping", "beta2 0.999", "only the last micro-batch", "the clipping factor skipped in the pass",
    "the decay of the previous parameter", "the gradients left after the step",
};
static_assert(sizeof variant_names / sizeof variant_names[0] == VARIANT_COUNT, "variant_names and Variant out of step");

/* Reads "<prefix><param name>" (shape from fx_params) into dst. */
static bool read_param(StFile *sf, const char *prefix, int k, float *dst, char *msg, int size) {
    char name[128];
    snprintf(name, sizeof name, "%s%s", prefix, fx_params[k].name);
    Err e;
    if (st_read_expect(sf, name, fx_params[k].ndim, fx_params[k].shape, dst, &e) != 0) {
        snprintf(msg, (size_t)size, "%s", e.msg);
        return false;
    }
    return true;
}

/* Compares `got` (n floats) with the fixture's "<prefix><param name>". */
static bool compare_param(StFile *sf, const char *prefix, int k, const float *got, long n, float *scratch, int step,
                          char *msg, int size) {
    if (!read_param(sf, prefix, k, scratch, msg, size)) return false;
    char detail[256], what[160];
    snprintf(what, sizeof what, "step %d: %s%s", step, prefix, fx_params[k].name);
    if (!rounded_close(what, got, scratch, n, detail, sizeof detail)) {
        snprintf(msg, (size_t)size, "%s", detail);
        return false;
    }
    return true;
}

/* Wrong per-element updates for adamw_update, each wrong in one way, made
 * from the right one (adamw_elements), so that a test can show that its
 * comparison catches it. */
/* The clipping factor not applied. */
static void broken_scale(ParamSet *p, int k, long lo, long hi, const AdamWScalars *s) {
    AdamWScalars unscaled = *s;
    unscaled.grad_scale = 1.0f;
    adamw_elements(p, k, lo, hi, &unscaled);
}
/* Each parameter decayed (or not) as the one declared before it. */
static void broken_decay(ParamSet *p, int k, long lo, long hi, const AdamWScalars *s) {
    adamw_elements(p, k > 0 ? k - 1 : k, lo, hi, s);
}
/* The gradients left as they were given, so the next step adds to them. */
static void broken_zero(ParamSet *p, int k, long lo, long hi, const AdamWScalars *s) {
    float *kept = xmalloc((size_t)(hi - lo) * sizeof(float));
    memcpy(kept, p->grad + lo, (size_t)(hi - lo) * sizeof(float));
    adamw_elements(p, k, lo, hi, s);
    memcpy(p->grad + lo, kept, (size_t)(hi - lo) * sizeof(float));
    free(kept);
}
/* A thread's share that starts inside a parameter starts one element late,
 * so that element is never updated. */
static void broken_share(ParamSet *p, int k, long lo, long hi, const AdamWScalars *s) {
    adamw_elements(p, k, lo > p->offset[k] ? lo + 1 : lo, hi, s);
}

/* The per-element update of a variant. */
static AdamWUpdate variant_update(Variant var) {
    switch (var) {
    case VARIANT_BREAK_SCALE: return broken_scale;
    case VARIANT_BREAK_DECAY: return broken_decay;
    case VARIANT_BREAK_ZERO: return broken_zero;
    default: return adamw_elements;
    }
}

/* Replays the fixture's steps with the given variant; false and a message on the first difference. */
static bool replay_once(StFile *sf, Variant var, char *msg, int size) {
    ParamSet p;
    params_init(&p);
    /* the gain is placed right after the weight: slab order w, gain, b, emb against declaration
     * order w, b, emb, gain, so the pass must find each parameter's decay by where it lies */
    const Tensor *first = NULL;
    for (int k = 0; k < FX_NPARAMS; k++) {
        const FixtureParam *fp = &fx_params[k];
        int shape[2] = {1, fp->shape[0]};
        bool as_matrix = var == VARIANT_DECAY_ALL && fp->ndim == 1;
        const int ndim = as_matrix ? 2 : fp->ndim, *sh = as_matrix ? shape : fp->shape;
        if (k == FX_NPARAMS - 1)
            params_add_after(&p, first, fp->name, ndim, sh);
        else if (k == 0)
            first = params_add(&p, fp->name, ndim, sh);
        else
            params_add(&p, fp->name, ndim, sh);
    }
    params_alloc(&p);
    float *scratch = xmalloc((size_t)p.total * sizeof(float)), *part = xmalloc((size_t)p.total * sizeof(float));
    AdamWConfig cfg = adamw_default();
    if (var == VARIANT_NO_DECAY) cfg.weight_decay = 0.0f;
    if (var == VARIANT_TORCH_BETA2) cfg.beta2 = 0.999f;
    float lrs[FX_STEPS], norms[FX_STEPS];
    const int steps_shape[1] = {FX_STEPS};
    Err e;
    bool ok = false;
    if (st_read_expect(sf, "lr", 1, steps_shape, lrs, &e) != 0 || st_read_expect(sf, "norm", 1, steps_shape, norms, &e) != 0) {
        snprintf(msg, (size_t)size, "%s", e.msg);
        goto done;
    }
    for (int k = 0; k < FX_NPARAMS; k++)
        if (!read_param(sf, "init/", k, p.value + p.offset[k], msg, size)) goto done;
    rounding_move_input(p.value, p.total);
    adamw_update = variant_update(var);
    for (int step = 0; step < FX_STEPS; step++) {
        char prefix[64];
        /* each micro-batch's gradient added into the slab, as backward adds */
        for (int j = 0; j < FX_MICRO; j++) {
            snprintf(prefix, sizeof prefix, "step%d/grad%d/", step, j);
            for (int k = 0; k < FX_NPARAMS; k++)
                if (!read_param(sf, prefix, k, part + p.offset[k], msg, size)) goto done;
            rounding_move_input(part, p.total);
            if (var == VARIANT_LAST_MICRO_BATCH && j < FX_MICRO - 1) continue;
            for (long i = 0; i < p.total; i++) p.grad[i] += part[i];
        }
        float lr = lr_at(SCHEDULE_COSINE, step, FX_WARMUP, FX_TOTAL, FX_LR, FX_MIN_LR);
        if (fabsf(lr - lrs[step]) > RTOL * lrs[step]) {
            snprintf(msg, (size_t)size, "step %d: lr_at gives %.8g, the fixture's schedule %.8g", step, lr, lrs[step]);
            goto done;
        }
        const double norm = grad_norm(&p);
        const float got_norm = (float)norm;
        char what[64], detail[256];
        snprintf(what, sizeof what, "step %d: gradient norm", step);
        if (!rounded_close(what, &got_norm, &norms[step], 1, detail, sizeof detail)) {
            snprintf(msg, (size_t)size, "%s", detail);
            goto done;
        }
        const float scale = var == VARIANT_NO_CLIP ? 1.0f : clip_scale(norm, FX_MAX_NORM);
        adamw_step(&p, &cfg, lr, var == VARIANT_STEP_OFF_BY_ONE ? step + 2 : step + 1, scale);
        for (int k = 0; k < FX_NPARAMS; k++) {
            const long off = p.offset[k], n = p.list[k]->n;
            snprintf(prefix, sizeof prefix, "step%d/", step);
            if (!compare_param(sf, prefix, k, p.value + off, n, scratch, step, msg, size)) goto done;
            snprintf(prefix, sizeof prefix, "step%d/exp_avg/", step);
            if (!compare_param(sf, prefix, k, p.state[0] + off, n, scratch, step, msg, size)) goto done;
            snprintf(prefix, sizeof prefix, "step%d/exp_avg_sq/", step);
            if (!compare_param(sf, prefix, k, p.state[1] + off, n, scratch, step, msg, size)) goto done;
        }
    }
    ok = true;
done:
    adamw_update = adamw_elements;
    free(scratch);
    free(part);
    params_free(&p);
    return ok;
}

/* replay_once in ROUNDING_PASSES (test_util.h): the parameters and moments
 * within the rounding carried from the weights and gradients, moved by
 * gamma_K, K the gradient norm's sum over every parameter. */
static bool replay(StFile *sf, Variant var, char *msg, int size) {
    long K = 0;
    for (int k = 0; k < FX_NPARAMS; k++) K += fx_params[k].ndim == 1 ? fx_params[k].shape[0] : (long)fx_params[k].shape[0] * fx_params[k].shape[1];
    bool ok = false;
    ROUNDING_PASSES(K, KERNEL_ROUNDING_SLACK) ok = replay_once(sf, var, msg, size);
    return ok;
}

/* ---- AdamW against PyTorch ------------------------------------------------ */

START_TEST(test_adamw_matches_pytorch) {
    StFile sf = fixture_open("adamw.safetensors");
    char msg[512] = "";
    bool ok = replay(&sf, VARIANT_RIGHT, msg, sizeof msg);
    st_close(&sf);
    ck_assert_msg(ok, "%s", msg);
}
END_TEST

START_TEST(test_adamw_fixture_catches_wrong_update) {
    StFile sf = fixture_open("adamw.safetensors");
    for (int var = VARIANT_RIGHT + 1; var < VARIANT_COUNT; var++) {
        char msg[512] = "";
        bool ok = replay(&sf, (Variant)var, msg, sizeof msg);
        ck_assert_msg(!ok, "an AdamW step with %s matched PyTorch", variant_names[var]);
    }
    st_close(&sf);
}
END_TEST

/* ---- every optimizer of the registry against PyTorch -------------------------------
 *
 * tests/fixtures/optimizers.safetensors (tests/reference/optimizers.py) holds
 * cases of three steps each, run in float64 by torch.optim.AdamW, torch.optim.SGD
 * (with momentum, with Nesterov's, without) and Lion written from its paper, on
 * adamw.safetensors' parameters, micro-batches, clipping and schedule. Every
 * optimizer must have a case; each is replayed through its registry step and
 * compared, parameters and every state slab after every step. Then each
 * option off, no clipping, no decay and decay on vectors too must each fail. */

enum { OPT_RIGHT = -1, OPT_NO_CLIP = -2, OPT_NO_DECAY = -3, OPT_DECAY_ALL = -4 };

/* The case's optimizer and its options struct, from the fixture's metadata;
 * `wrong` >= 0 moves that option off its value. -1 and a message when the
 * metadata is wrong, 1 when the moved option is refused (no variant). */
static int case_options(StFile *sf, const char *cs, int *oi, unsigned char *bytes, int wrong, char *msg, int size) {
    char key[640];
    snprintf(key, sizeof key, "%s/optimizer", cs);
    const char *name = st_meta(sf, key);
    if (!name || (*oi = optim_find(name)) < 0)
        return snprintf(msg, (size_t)size, "case %s: optimizer %s is not registered", cs, name ? name : "(none)"), -1;
    snprintf(key, sizeof key, "%s/options", cs);
    cJSON *o = st_meta(sf, key) ? cJSON_Parse(st_meta(sf, key)) : NULL;
    if (!o) return snprintf(msg, (size_t)size, "case %s: no options", cs), -1;
    memset(bytes, 0, OPTIM_OPTION_BYTES);
    int r = 0, rc = 0;
    for (const OptDef *row = optim_rows(*oi); row->name; row++, r++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, row->name);
        if (!v) {
            rc = -1;
            snprintf(msg, (size_t)size, "case %s: option %s is not given", cs, row->name);
            break;
        }
        if (row->type == OPT_BOOL) {
            bool b = cJSON_IsTrue(v) != (r == wrong);
            memcpy(bytes + row->offset, &b, sizeof b);
        } else {
            float f = (float)v->valuedouble;
            if (r == wrong) f = f * 0.9f + 0.05f;
            memcpy(bytes + row->offset, &f, sizeof f);
        }
    }
    cJSON_Delete(o);
    Err e;
    if (rc == 0 && wrong >= 0 && optimizer_at(*oi)->validate &&
        optimizer_at(*oi)->validate(bytes + optim_options_at(*oi), &e) != 0)
        rc = 1;
    return rc;
}

/* Replays case cs with variant var (an option index, or OPT_*); false and a
 * message on the first difference. */
static bool replay_case_once(StFile *sf, const char *cs, int var, char *msg, int size) {
    int oi;
    unsigned char bytes[OPTIM_OPTION_BYTES];
    if (case_options(sf, cs, &oi, bytes, var, msg, size) != 0) return false;
    const Optimizer *opt = optimizer_at(oi);
    ParamSet p;
    params_init(&p);
    for (int k = 0; k < FX_NPARAMS; k++) {
        const FixtureParam *fp = &fx_params[k];
        bool as_matrix = var == OPT_DECAY_ALL && fp->ndim == 1;
        params_add(&p, fp->name, as_matrix ? 2 : fp->ndim, as_matrix ? (int[]){1, fp->shape[0]} : fp->shape);
    }
    params_alloc(&p);
    float *scratch = xmalloc((size_t)p.total * sizeof(float)), *part = xmalloc((size_t)p.total * sizeof(float));
    float lrs[FX_STEPS], norms[FX_STEPS];
    char prefix[96];
    Err e;
    bool ok = false;
    snprintf(prefix, sizeof prefix, "%s/lr", cs);
    if (st_read_expect(sf, prefix, 1, (int[]){FX_STEPS}, lrs, &e) != 0) goto bad;
    snprintf(prefix, sizeof prefix, "%s/norm", cs);
    if (st_read_expect(sf, prefix, 1, (int[]){FX_STEPS}, norms, &e) != 0) goto bad;
    snprintf(prefix, sizeof prefix, "%s/init/", cs);
    for (int k = 0; k < FX_NPARAMS; k++)
        if (!read_param(sf, prefix, k, p.value + p.offset[k], msg, size)) goto done;
    rounding_move_input(p.value, p.total);
    for (int step = 0; step < FX_STEPS; step++) {
        for (int j = 0; j < FX_MICRO; j++) {
            snprintf(prefix, sizeof prefix, "%s/step%d/grad%d/", cs, step, j);
            for (int k = 0; k < FX_NPARAMS; k++)
                if (!read_param(sf, prefix, k, part + p.offset[k], msg, size)) goto done;
            rounding_move_input(part, p.total);
            for (long i = 0; i < p.total; i++) p.grad[i] += part[i];
        }
        const double norm = grad_norm(&p);
        const float scale = var == OPT_NO_CLIP ? 1.0f : clip_scale(norm, FX_MAX_NORM);
        const OptimStep st = {lrs[step], step + 1, scale, var == OPT_NO_DECAY ? 0.0f : 0.1f,
                              bytes + optim_options_at(oi)};
        opt->step(&p, &st);
        for (int k = 0; k < FX_NPARAMS; k++) {
            const long off = p.offset[k], n = p.list[k]->n;
            snprintf(prefix, sizeof prefix, "%s/step%d/", cs, step);
            if (!compare_param(sf, prefix, k, p.value + off, n, scratch, step, msg, size)) goto done;
            for (int s = 0; s < opt->n_state; s++) {
                snprintf(prefix, sizeof prefix, "%s/step%d/state%d/", cs, step, s);
                char name[128];
                snprintf(name, sizeof name, "%s%s", prefix, fx_params[k].name);
                if (st_find(sf, name) == NULL) continue; /* a slab the case does not use (sgd without momentum) */
                if (!compare_param(sf, prefix, k, p.state[s] + off, n, scratch, step, msg, size)) goto done;
            }
        }
    }
    ok = true;
    goto done;
bad:
    snprintf(msg, (size_t)size, "%s", e.msg);
done:
    free(scratch);
    free(part);
    params_free(&p);
    return ok;
}

static bool replay_case(StFile *sf, const char *cs, int var, char *msg, int size) {
    long K = 0;
    for (int k = 0; k < FX_NPARAMS; k++) K += fx_params[k].ndim == 1 ? fx_params[k].shape[0] : (long)fx_params[k].shape[0] * fx_params[k].shape[1];
    bool ok = false;
    ROUNDING_PASSES(K, KERNEL_ROUNDING_SLACK) ok = replay_case_once(sf, cs, var, msg, size);
    return ok;
}

/* The fixture's cases, comma-separated in its metadata, into names (at most 16). */
static int fixture_cases(StFile *sf, char names[16][32]) {
    const char *list = st_meta(sf, "cases");
    ck_assert_msg(list != NULL, "optimizers.safetensors has no 'cases'");
    int n = 0;
    for (const char *c = list; *c && n < 16;) {
        size_t len = strcspn(c, ",");
        snprintf(names[n++], 32, "%.*s", (int)len, c);
        c += len + (c[len] == ',');
    }
    return n;
}

START_TEST(test_optimizers_match_pytorch) {
    StFile sf = fixture_open("optimizers.safetensors");
    char cases[16][32];
    int n = fixture_cases(&sf, cases);
    for (int i = 0; i < n_optimizers; i++) {
        bool found = false;
        for (int c = 0; c < n && !found; c++) {
            char key[640];
            snprintf(key, sizeof key, "%s/optimizer", cases[c]);
            found = st_meta(&sf, key) && !strcmp(st_meta(&sf, key), optimizers[i]->name);
        }
        ck_assert_msg(found, "optimizer=%s has no PyTorch case: add one to tests/reference/optimizers.py and run "
                      "make fixtures", optimizers[i]->name);
    }
    for (int c = 0; c < n; c++) {
        char msg[512] = "";
        ck_assert_msg(replay_case(&sf, cases[c], OPT_RIGHT, msg, sizeof msg), "case %s: %s", cases[c], msg);
    }
    st_close(&sf);
}
END_TEST

START_TEST(test_optimizers_fixture_catches_wrong_steps) {
    StFile sf = fixture_open("optimizers.safetensors");
    char cases[16][32];
    int n = fixture_cases(&sf, cases), tried = 0;
    for (int c = 0; c < n; c++) {
        char msg[512] = "", key[640];
        snprintf(key, sizeof key, "%s/optimizer", cases[c]);
        int oi = optim_find(st_meta(&sf, key)), rows = 0;
        while (optim_rows(oi)[rows].name) rows++;
        static const char *const what[] = {"", "without clipping", "without weight decay", "decaying vectors too"};
        for (int var = OPT_DECAY_ALL; var < rows; var++) {
            if (var == OPT_RIGHT) continue;
            unsigned char bytes[OPTIM_OPTION_BYTES];
            if (var >= 0 && case_options(&sf, cases[c], &oi, bytes, var, msg, sizeof msg) == 1) continue;
            tried++;
            ck_assert_msg(!replay_case(&sf, cases[c], var, msg, sizeof msg), "case %s %s%s matched PyTorch", cases[c],
                          var >= 0 ? "with a wrong " : what[-var - 1], var >= 0 ? optim_rows(oi)[var].name : "");
        }
    }
    ck_assert_int_ge(tried, 15);
    st_close(&sf);
}
END_TEST

/* ---- AdamW by hand --------------------------------------------------------- */

/* A weight [2, 2], a bias [2]. */
static void two_params(ParamSet *p, Tensor **w, Tensor **b) {
    params_init(p);
    *w = params_add(p, "w", 2, (int[]){2, 2});
    *b = params_add(p, "b", 1, (int[]){2});
    params_alloc(p);
    for (int i = 0; i < 4; i++) (*w)->data[i] = 1.0f + (float)i;
    for (int i = 0; i < 2; i++) (*b)->data[i] = -1.0f - (float)i;
}

/* With a zero gradient the Adam term is 0 / (0 + eps) = 0: only the decay moves
 * the weights, by exactly (1 - lr wd), and the bias does not move at all. */
START_TEST(test_adamw_decays_matrices_only) {
    ParamSet p;
    Tensor *w, *b;
    two_params(&p, &w, &b);
    AdamWConfig c = adamw_default();
    const float lr = 0.5f;
    adamw_step(&p, &c, lr, 1, 1.0f);
    const float decay = (float)(1.0 - (double)lr * c.weight_decay);
    for (int i = 0; i < 4; i++) ck_assert_float_eq(w->data[i], (1.0f + (float)i) * decay);
    for (int i = 0; i < 2; i++) ck_assert_float_eq(b->data[i], -1.0f - (float)i);
    params_free(&p);
}
END_TEST

/* At t = 1 the bias corrections make m_hat = g and v_hat = g^2, so each weight
 * moves by lr g / (|g| + eps) = lr sign(g) whatever the size of g. */
START_TEST(test_adamw_first_step_moves_by_lr) {
    ParamSet p;
    Tensor *w, *b;
    two_params(&p, &w, &b);
    const float g[6] = {3.0f, -0.25f, 1e-3f, -40.0f, 0.5f, -7.0f};
    memcpy(p.grad, g, sizeof g);
    AdamWConfig c = adamw_default();
    c.weight_decay = 0.0f;
    const float lr = 0.01f;
    adamw_step(&p, &c, lr, 1, 1.0f);
    for (int i = 0; i < 6; i++) {
        const float before = i < 4 ? 1.0f + (float)i : -1.0f - (float)(i - 4);
        const float want = before - lr * (g[i] > 0 ? 1.0f : -1.0f);
        ck_assert_msg(fabsf(p.value[i] - want) <= 1e-6f, "element %d: got %.8g, want %.8g", i, p.value[i], want);
        ck_assert_float_eq_tol(p.state[0][i], 0.1f * g[i], 1e-6f * fabsf(g[i]));
        ck_assert_float_eq_tol(p.state[1][i], 0.05f * g[i] * g[i], 1e-6f * g[i] * g[i]);
    }
    params_free(&p);
}
END_TEST

/* ---- one pass against the separate passes ------------------------------------ */

/* Parameters large enough that both passes are threaded (over adamw.c's and
 * clip.c's thresholds), of sizes that put the threads' share boundaries inside
 * parameters, and with the slab order (emb, gain, w, b, w2, b2) unlike the
 * declaration order, so vectors lie between matrices in the slab. */
static void big_params(ParamSet *p) {
    params_init(p);
    const Tensor *emb = params_add(p, "emb", 2, (int[]){257, 131});
    params_add(p, "w", 2, (int[]){211, 67});
    params_add(p, "b", 1, (int[]){211});
    params_add(p, "w2", 2, (int[]){131, 149});
    params_add_after(p, emb, "gain", 1, (int[]){131});
    params_add(p, "b2", 1, (int[]){131});
    params_alloc(p);
}

/* The passes the one pass replaces, as they were: the clipping pass that
 * scaled the gradients (only when clipping), AdamW parameter by parameter,
 * and params_zero_grad; on one thread. */
static void separate_passes(ParamSet *p, const AdamWConfig *c, float lr, long t, float scale) {
    if (scale != 1.0f)
        for (long i = 0; i < p->total; i++) p->grad[i] *= scale;
    const float b1 = c->beta1, b2 = c->beta2, eps = c->eps;
    const float one_minus_b1 = (float)(1.0 - b1), one_minus_b2 = (float)(1.0 - b2);
    const double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    const float step_size = (float)((double)lr / bc1);
    const float bc2_sqrt = (float)sqrt(bc2);
    for (int k = 0; k < params_count(p); k++) {
        const Tensor *tn = p->list[k];
        const float decay = tn->ndim >= 2 ? (float)(1.0 - (double)lr * c->weight_decay) : 1.0f;
        float *w = p->value + p->offset[k], *g = p->grad + p->offset[k];
        float *m = p->state[0] + p->offset[k], *v = p->state[1] + p->offset[k];
        for (long i = 0; i < tn->n; i++) {
            const float gi = g[i];
            m[i] = b1 * m[i] + one_minus_b1 * gi;
            v[i] = b2 * v[i] + one_minus_b2 * gi * gi;
            const float denom = sqrtf(v[i]) / bc2_sqrt + eps;
            w[i] = w[i] * decay;
            w[i] = w[i] - step_size * m[i] / denom;
        }
    }
    params_zero_grad(p);
}

enum { BIG_STEPS = 2, BIG_SLABS = 4 };
static const char *const big_slab_names[BIG_SLABS] = {"value", "m", "v", "grad"};

/* BIG_STEPS steps on `threads` threads, by the one pass or by the separate
 * passes: the first step's gradient clipped (norm about 13 against max_norm
 * 1), the second's not (about 0.3). Each step's gradient is added into the
 * slab the step before left. out gets the four slabs after the last step, one
 * after the other; norms each step's gradient norm. */
static void big_run(int threads, bool one_pass, float *out, double norms[BIG_STEPS]) {
    const int old = engine_threads();
    engine_set_threads(threads);
    ParamSet p;
    big_params(&p);
    Rng rng;
    rng_seed(&rng, 7);
    rng_fill_normal(&rng, p.value, p.total, 0.0f, 1.0f);
    rng_fill_normal(&rng, p.state[0], p.total, 0.0f, 0.01f);
    rng_fill_normal(&rng, p.state[1], p.total, 0.0f, 0.01f);
    for (long i = 0; i < p.total; i++) p.state[1][i] *= p.state[1][i];
    AdamWConfig c = adamw_default();
    const float sizes[BIG_STEPS] = {0.05f, 0.001f};
    for (int s = 0; s < BIG_STEPS; s++) {
        for (long i = 0; i < p.total; i++) p.grad[i] += sizes[s] * rng_normal(&rng);
        norms[s] = grad_norm(&p);
        const float lr = 1e-2f * (float)(s + 1), scale = clip_scale(norms[s], 1.0f);
        if (one_pass)
            adamw_step(&p, &c, lr, s + 1, scale);
        else
            separate_passes(&p, &c, lr, s + 1, scale);
    }
    const float *slab[BIG_SLABS] = {p.value, p.state[0], p.state[1], p.grad};
    for (int j = 0; j < BIG_SLABS; j++) memcpy(out + j * p.total, slab[j], (size_t)p.total * sizeof(float));
    params_free(&p);
    engine_set_threads(old);
}

/* The one pass on `threads` threads with the per-element update `update`
 * against the separate passes: true when every bit and both norms agree,
 * else false and the first difference in msg. */
static bool big_same_bits(int threads, AdamWUpdate update, char *msg, int size) {
    ParamSet shape;
    big_params(&shape);
    const long n = shape.total;
    params_free(&shape);
    ck_assert_int_gt(n, 1L << 16); /* both passes threaded */
    float *want = xmalloc((size_t)BIG_SLABS * n * sizeof(float)), *got = xmalloc((size_t)BIG_SLABS * n * sizeof(float));
    double want_norms[BIG_STEPS], got_norms[BIG_STEPS];
    big_run(1, false, want, want_norms);
    adamw_update = update;
    big_run(threads, true, got, got_norms);
    adamw_update = adamw_elements;
    ck_assert_double_gt(want_norms[0], 1.0);
    ck_assert_double_lt(want_norms[1], 1.0);
    bool same = true;
    for (int s = 0; s < BIG_STEPS && same; s++)
        if (memcmp(&want_norms[s], &got_norms[s], sizeof(double)) != 0) {
            snprintf(msg, (size_t)size, "%d threads: step %d's gradient norm %.17g, separately %.17g", threads, s,
                     got_norms[s], want_norms[s]);
            same = false;
        }
    for (long i = 0; i < BIG_SLABS * n && same; i++)
        if (memcmp(&want[i], &got[i], sizeof(float)) != 0) {
            snprintf(msg, (size_t)size, "%d threads: %s[%ld] is %.9g, separately %.9g", threads,
                     big_slab_names[i / n], i % n, got[i], want[i]);
            same = false;
        }
    free(want);
    free(got);
    return same;
}

/* The one pass gives the bits of the separate passes (so clipping inside it
 * is scaling first, and the gradients are 0 after it) on 1 to 4 threads:
 * which also makes the step and the norm the same bits for any thread count. */
START_TEST(test_adamw_one_pass_same_bits) {
    for (int threads = 1; threads <= 4; threads++) {
        char msg[256] = "";
        ck_assert_msg(big_same_bits(threads, adamw_elements, msg, sizeof msg), "%s", msg);
    }
}
END_TEST

/* ... and that comparison fails when the pass is wrong in any of the ways
 * above, on 3 threads (the share boundaries fall inside parameters). */
START_TEST(test_adamw_one_pass_check_catches_breaks) {
    static const struct {
        const char *name;
        AdamWUpdate update;
    } breaks[] = {
        {"no clipping factor", broken_scale},
        {"the previous parameter's decay", broken_decay},
        {"no zeroing", broken_zero},
        {"a shifted thread share", broken_share},
    };
    for (size_t b = 0; b < sizeof breaks / sizeof breaks[0]; b++) {
        char msg[256] = "";
        ck_assert_msg(!big_same_bits(3, breaks[b].update, msg, sizeof msg),
                      "the one pass with %s matched the separate passes", breaks[b].name);
    }
}
END_TEST

/* ---- schedules -------------------------------------------------------------- */

#define LR 1e-3f
#define MIN_LR 1e-4f

START_TEST(test_schedule_warmup) {
    for (int s = 0; s < SCHEDULE_COUNT; s++) {
        /* linear from 0: the first step gets lr / warmup, the last warmup step lr */
        ck_assert_float_eq_tol(lr_at((Schedule)s, 0, 10, 100, LR, MIN_LR), LR / 10, 1e-10f);
        ck_assert_float_eq_tol(lr_at((Schedule)s, 4, 10, 100, LR, MIN_LR), LR * 0.5f, 1e-10f);
        ck_assert_float_eq(lr_at((Schedule)s, 9, 10, 100, LR, MIN_LR), LR);
        /* the first step after warmup is the peak */
        ck_assert_float_eq(lr_at((Schedule)s, 10, 10, 100, LR, MIN_LR), LR);
        /* no warmup: step 0 is the peak */
        ck_assert_float_eq(lr_at((Schedule)s, 0, 0, 100, LR, MIN_LR), LR);
    }
}
END_TEST

START_TEST(test_schedule_cosine) {
    /* decay over steps 10..109: progress (step - 10) / 100 */
    ck_assert_float_eq_tol(lr_at(SCHEDULE_COSINE, 60, 10, 110, LR, MIN_LR), (LR + MIN_LR) / 2, 1e-10f);
    const double quarter = MIN_LR + (LR - MIN_LR) * 0.5 * (1 + cos(M_PI / 4));
    ck_assert_float_eq_tol(lr_at(SCHEDULE_COSINE, 35, 10, 110, LR, MIN_LR), (float)quarter, 1e-10f);
    /* strictly decreasing, the last step just above min_lr, the end exactly min_lr */
    for (long s = 10; s < 109; s++)
        ck_assert_float_gt(lr_at(SCHEDULE_COSINE, s, 10, 110, LR, MIN_LR), lr_at(SCHEDULE_COSINE, s + 1, 10, 110, LR, MIN_LR));
    ck_assert_float_gt(lr_at(SCHEDULE_COSINE, 109, 10, 110, LR, MIN_LR), MIN_LR);
    ck_assert_float_eq(lr_at(SCHEDULE_COSINE, 110, 10, 110, LR, MIN_LR), MIN_LR);
}
END_TEST

START_TEST(test_schedule_linear) {
    ck_assert_float_eq_tol(lr_at(SCHEDULE_LINEAR, 60, 10, 110, LR, MIN_LR), (LR + MIN_LR) / 2, 1e-10f);
    ck_assert_float_eq_tol(lr_at(SCHEDULE_LINEAR, 35, 10, 110, LR, MIN_LR), MIN_LR + 0.75f * (LR - MIN_LR), 1e-10f);
    ck_assert_float_eq_tol(lr_at(SCHEDULE_LINEAR, 109, 10, 110, LR, MIN_LR), MIN_LR + 0.01f * (LR - MIN_LR), 1e-10f);
    ck_assert_float_eq(lr_at(SCHEDULE_LINEAR, 110, 10, 110, LR, MIN_LR), MIN_LR);
}
END_TEST

START_TEST(test_schedule_constant) {
    for (long s = 10; s < 200; s += 7) ck_assert_float_eq(lr_at(SCHEDULE_CONSTANT, s, 10, 110, LR, MIN_LR), LR);
    ck_assert_float_eq(lr_at(SCHEDULE_CONSTANT, 0, 0, 0, LR, MIN_LR), LR);
}
END_TEST

START_TEST(test_schedule_clamps_after_total) {
    for (int s = SCHEDULE_COSINE; s <= SCHEDULE_LINEAR; s++) {
        ck_assert_float_eq(lr_at((Schedule)s, 111, 10, 110, LR, MIN_LR), MIN_LR);
        ck_assert_float_eq(lr_at((Schedule)s, 1000000, 10, 110, LR, MIN_LR), MIN_LR);
        /* warmup as long as the run: the warmup completes, then min_lr */
        ck_assert_float_eq(lr_at((Schedule)s, 9, 10, 10, LR, MIN_LR), LR);
        ck_assert_float_eq(lr_at((Schedule)s, 10, 10, 10, LR, MIN_LR), MIN_LR);
    }
}
END_TEST

START_TEST(test_schedule_names) {
    ck_assert_str_eq(schedule_name(SCHEDULE_COSINE), "cosine");
    ck_assert_str_eq(schedule_name(SCHEDULE_LINEAR), "linear");
    ck_assert_str_eq(schedule_name(SCHEDULE_CONSTANT), "constant");
}
END_TEST

/* ---- clipping ----------------------------------------------------------------- */

/* Gradients (3, 0 | 4, 0, 12): the norm is sqrt(9 + 16 + 144) = 13 across both parameters. */
static void clip_params(ParamSet *p) {
    params_init(p);
    params_add(p, "a", 1, (int[]){2});
    params_add(p, "b", 2, (int[]){1, 3});
    params_alloc(p);
    const float g[5] = {3.0f, 0.0f, 4.0f, 0.0f, 12.0f};
    memcpy(p->grad, g, sizeof g);
}

START_TEST(test_clip_norm_by_hand) {
    ParamSet p;
    clip_params(&p);
    ck_assert_double_eq(grad_norm(&p), 13.0);
    params_free(&p);
}
END_TEST

/* Above max_norm the factor is torch's max_norm / (norm + 1e-6): the clipped
 * gradients' norm is max_norm, less the 1e-6 safety margin. */
START_TEST(test_clip_scales_above_max_norm) {
    ParamSet p;
    clip_params(&p);
    const double norm = grad_norm(&p);
    const float scale = clip_scale(norm, 6.5f);
    ck_assert_float_eq(scale, (float)(6.5 / (13.0 + 1e-6)));
    for (int i = 0; i < 5; i++) p.grad[i] *= scale;
    ck_assert_double_eq_tol(grad_norm(&p), 6.5, 1e-6);
    params_free(&p);
}
END_TEST

START_TEST(test_clip_leaves_small_gradients) {
    const float max_norms[] = {13.5f, 13.0f, 0.0f, -1.0f}; /* below, exactly at, off, off */
    for (size_t k = 0; k < sizeof max_norms / sizeof max_norms[0]; k++)
        ck_assert_msg(clip_scale(13.0, max_norms[k]) == 1.0f, "max_norm %g scales a norm of 13", max_norms[k]);
}
END_TEST

/* A non-finite norm is reported, and its factor is 1: scaling by it would
 * turn every gradient into NaN or 0. */
START_TEST(test_clip_non_finite_norm) {
    ParamSet p;
    clip_params(&p);
    p.grad[1] = INFINITY;
    const double inf_norm = grad_norm(&p);
    ck_assert(isinf(inf_norm));
    ck_assert_float_eq(clip_scale(inf_norm, 1.0f), 1.0f);
    p.grad[1] = NAN;
    const double nan_norm = grad_norm(&p);
    ck_assert(isnan(nan_norm));
    ck_assert_float_eq(clip_scale(nan_norm, 1.0f), 1.0f);
    params_free(&p);
}
END_TEST

Suite *optim_suite(void) {
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("adamw");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_adamw_matches_pytorch);
    tcase_add_test(tc, test_adamw_fixture_catches_wrong_update);
    tcase_add_test(tc, test_optimizers_match_pytorch);
    tcase_add_test(tc, test_optimizers_fixture_catches_wrong_steps);
    tcase_add_test(tc, test_adamw_decays_matrices_only);
    tcase_add_test(tc, test_adamw_first_step_moves_by_lr);
    tcase_add_test(tc, test_adamw_one_pass_same_bits);
    tcase_add_test(tc, test_adamw_one_pass_check_catches_breaks);
    suite_add_tcase(s, tc);
    tc = tcase_create("schedule");
    tcase_add_test(tc, test_schedule_warmup);
    tcase_add_test(tc, test_schedule_cosine);
    tcase_add_test(tc, test_schedule_linear);
    tcase_add_test(tc, test_schedule_constant);
    tcase_add_test(tc, test_schedule_clamps_after_total);
    tcase_add_test(tc, test_schedule_names);
    suite_add_tcase(s, tc);
    tc = tcase_create("clip");
    tcase_add_test(tc, test_clip_norm_by_hand);
    tcase_add_test(tc, test_clip_scales_above_max_norm);
    tcase_add_test(tc, test_clip_leaves_small_gradients);
    tcase_add_test(tc, test_clip_non_finite_norm);
    suite_add_tcase(s, tc);
    return s;
}
