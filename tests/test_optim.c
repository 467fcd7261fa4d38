/* test_optim.c: AdamW, the learning-rate schedules and gradient clipping.
 *
 * tests/fixtures/adamw.safetensors holds three steps of clip_grad_norm_ and
 * torch.optim.AdamW run by PyTorch in float64 (tests/reference/adamw.py). We
 * replay them in float32 and compare every parameter and both moments after
 * every step; then we replay with one thing wrong at a time and check that the
 * comparison fails, so the fixture really pins each part of the update down. */
#include <assert.h>
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
    VARIANT_COUNT
} Variant;

static const char *const variant_names[] = {
    "right", "weight decay on vectors too", "no weight decay", "step number off by one",
    "no clipping", "beta2 0.999",
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

/* Replays the fixture's steps with the given variant; false and a message on the first difference. */
static bool replay_once(StFile *sf, Variant var, char *msg, int size) {
    ParamSet p;
    params_init(&p);
    for (int k = 0; k < FX_NPARAMS; k++) {
        const FixtureParam *fp = &fx_params[k];
        if (var == VARIANT_DECAY_ALL && fp->ndim == 1) {
            int shape[2] = {1, fp->shape[0]};
            params_add(&p, fp->name, 2, shape);
        } else {
            params_add(&p, fp->name, fp->ndim, fp->shape);
        }
    }
    params_alloc(&p);
    float *scratch = xmalloc((size_t)p.total * sizeof(float));
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
    for (int step = 0; step < FX_STEPS; step++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "step%d/grad/", step);
        for (int k = 0; k < FX_NPARAMS; k++)
            if (!read_param(sf, prefix, k, p.grad + p.offset[k], msg, size)) goto done;
        rounding_move_input(p.grad, p.total);
        float lr = lr_at(SCHEDULE_COSINE, step, FX_WARMUP, FX_TOTAL, FX_LR, FX_MIN_LR);
        if (fabsf(lr - lrs[step]) > RTOL * lrs[step]) {
            snprintf(msg, (size_t)size, "step %d: lr_at gives %.8g, the fixture's schedule %.8g", step, lr, lrs[step]);
            goto done;
        }
        float norm = clip_grad_norm(&p, var == VARIANT_NO_CLIP ? 0.0f : FX_MAX_NORM);
        if (!rounding_moving() && !(fabsf(norm - norms[step]) <= RTOL * norms[step])) {
            snprintf(msg, (size_t)size, "step %d: gradient norm %.8g, PyTorch %.8g", step, norm, norms[step]);
            goto done;
        }
        adamw_step(&p, &cfg, lr, var == VARIANT_STEP_OFF_BY_ONE ? step + 2 : step + 1);
        for (int k = 0; k < FX_NPARAMS; k++) {
            const long off = p.offset[k], n = p.list[k]->n;
            snprintf(prefix, sizeof prefix, "step%d/", step);
            if (!compare_param(sf, prefix, k, p.value + off, n, scratch, step, msg, size)) goto done;
            snprintf(prefix, sizeof prefix, "step%d/exp_avg/", step);
            if (!compare_param(sf, prefix, k, p.m + off, n, scratch, step, msg, size)) goto done;
            snprintf(prefix, sizeof prefix, "step%d/exp_avg_sq/", step);
            if (!compare_param(sf, prefix, k, p.v + off, n, scratch, step, msg, size)) goto done;
        }
    }
    ok = true;
done:
    free(scratch);
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
    adamw_step(&p, &c, lr, 1);
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
    adamw_step(&p, &c, lr, 1);
    for (int i = 0; i < 6; i++) {
        const float before = i < 4 ? 1.0f + (float)i : -1.0f - (float)(i - 4);
        const float want = before - lr * (g[i] > 0 ? 1.0f : -1.0f);
        ck_assert_msg(fabsf(p.value[i] - want) <= 1e-6f, "element %d: got %.8g, want %.8g", i, p.value[i], want);
        ck_assert_float_eq_tol(p.m[i], 0.1f * g[i], 1e-6f * fabsf(g[i]));
        ck_assert_float_eq_tol(p.v[i], 0.05f * g[i] * g[i], 1e-6f * g[i] * g[i]);
    }
    params_free(&p);
}
END_TEST

/* Large enough to be threaded, and the same bits with 1 thread and with 4. */
static void run_big(int threads, float *value, float *m, float *v, float *norm) {
    int old = engine_threads();
    engine_set_threads(threads);
    ParamSet p;
    params_init(&p);
    params_add(&p, "w", 2, (int[]){300, 400});
    params_add(&p, "b", 1, (int[]){1000});
    params_alloc(&p);
    for (long i = 0; i < p.total; i++) {
        p.value[i] = sinf((float)i * 0.01f);
        p.grad[i] = cosf((float)i * 0.003f) * 0.01f;
    }
    AdamWConfig c = adamw_default();
    for (int t = 1; t <= 3; t++) {
        *norm = clip_grad_norm(&p, 1.0f);
        adamw_step(&p, &c, 1e-3f, t);
    }
    memcpy(value, p.value, (size_t)p.total * sizeof(float));
    memcpy(m, p.m, (size_t)p.total * sizeof(float));
    memcpy(v, p.v, (size_t)p.total * sizeof(float));
    params_free(&p);
    engine_set_threads(old);
}

START_TEST(test_optim_same_bits_any_thread_count) {
    const size_t n = 300 * 400 + 1000;
    float *r[2][3], norm[2];
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 3; j++) r[k][j] = xmalloc(n * sizeof(float));
    run_big(1, r[0][0], r[0][1], r[0][2], &norm[0]);
    run_big(4, r[1][0], r[1][1], r[1][2], &norm[1]);
    ck_assert(memcmp(&norm[0], &norm[1], sizeof(float)) == 0);
    for (int j = 0; j < 3; j++) ck_assert(memcmp(r[0][j], r[1][j], n * sizeof(float)) == 0);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 3; j++) free(r[k][j]);
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
    ck_assert_float_eq(clip_grad_norm(&p, 0.0f), 13.0f);
    params_free(&p);
}
END_TEST

START_TEST(test_clip_scales_above_max_norm) {
    ParamSet p;
    clip_params(&p);
    ck_assert_float_eq(clip_grad_norm(&p, 6.5f), 13.0f);
    const float scale = (float)(6.5 / (13.0 + 1e-6));
    const float g[5] = {3.0f, 0.0f, 4.0f, 0.0f, 12.0f};
    for (int i = 0; i < 5; i++) ck_assert_float_eq(p.grad[i], g[i] * scale);
    /* the new norm is max_norm, less the 1e-6 safety margin */
    ck_assert_float_eq_tol(clip_grad_norm(&p, 0.0f), 6.5f, 1e-6f);
    params_free(&p);
}
END_TEST

START_TEST(test_clip_leaves_small_gradients) {
    const float g[5] = {3.0f, 0.0f, 4.0f, 0.0f, 12.0f};
    const float max_norms[] = {13.5f, 13.0f, 0.0f, -1.0f}; /* below, exactly at, off, off */
    for (size_t k = 0; k < sizeof max_norms / sizeof max_norms[0]; k++) {
        ParamSet p;
        clip_params(&p);
        ck_assert_float_eq(clip_grad_norm(&p, max_norms[k]), 13.0f);
        ck_assert_msg(memcmp(p.grad, g, sizeof g) == 0, "max_norm %g changed the gradients", max_norms[k]);
        params_free(&p);
    }
}
END_TEST

START_TEST(test_clip_non_finite_norm) {
    ParamSet p;
    clip_params(&p);
    p.grad[1] = INFINITY;
    ck_assert(isinf(clip_grad_norm(&p, 1.0f)));
    ck_assert_float_eq(p.grad[0], 3.0f);
    p.grad[1] = NAN;
    ck_assert(isnan(clip_grad_norm(&p, 1.0f)));
    ck_assert_float_eq(p.grad[4], 12.0f);
    params_free(&p);
}
END_TEST

Suite *optim_suite(void) {
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("adamw");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_adamw_matches_pytorch);
    tcase_add_test(tc, test_adamw_fixture_catches_wrong_update);
    tcase_add_test(tc, test_adamw_decays_matrices_only);
    tcase_add_test(tc, test_adamw_first_step_moves_by_lr);
    tcase_add_test(tc, test_optim_same_bits_any_thread_count);
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
