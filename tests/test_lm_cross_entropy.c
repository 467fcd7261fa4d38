/* test_lm_cross_entropy.c: the fused LM head + cross-entropy
 * (layers/lm_cross_entropy.c) against finite differences, against PyTorch
 * (tests/fixtures/lm_cross_entropy.safetensors, made by
 * tests/reference/lm_cross_entropy.py), against its composition
 * op_cross_entropy(op_matmul(x, W, false, true)), with broken backwards, on 1
 * and 2 threads, and for the memory a step takes. The model's golden test
 * (tests/test_model.c) runs it too, through model_loss. */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_stub.h"
#include "gradcheck.h"
#include "layers.h"
#include "model.h"
#include "test_util.h"

/* The op's blocks are 64 rows and its groups 1024 rows: the cases cross both. */
enum { GC_B = 2, GC_T = 70, GC_D = 5, GC_V = 9, TIED_T = 40 };

/* Target r: an id in [0, V), or -1 (not counted) on every `every`-th row. */
static void fill_targets(int *t, long n, int V, int every) {
    for (long r = 0; r < n; r++) t[r] = every && r % every == 0 ? -1 : (int)((r * 7 + 3) % V);
}

static int gc_targets[GC_B * GC_T], gc_ids[GC_B * TIED_T], self_targets[GC_V];

static void gc_setup(void) {
    fill_targets(gc_targets, GC_B * GC_T, GC_V, 4);
    for (int r = 0; r < GC_B * TIED_T; r++) gc_ids[r] = (r * 5 + 1) % GC_V;
    fill_targets(self_targets, GC_V, GC_V, 3);
}

static Tensor *blocks(Tensor **in) { return op_lm_cross_entropy(in[0], in[1], gc_targets, -1); }
/* The model's tied embeddings: x = W[ids] + h, W also the head. */
static Tensor *tied(Tensor **in) {
    Tensor *x = op_add(op_embedding(in[0], gc_ids, 2, (int[]){GC_B, TIED_T}), in[1]);
    return op_lm_cross_entropy(x, in[0], gc_targets, -1);
}
/* x and W one tensor: both gradients into one buffer. */
static Tensor *self(Tensor **in) { return op_lm_cross_entropy(in[0], in[0], self_targets, -1); }

static const GradCase gc_cases[] = {
    {"lm_cross_entropy_blocks", 2, {{3, {GC_B, GC_T, GC_D}, GC_NORMAL}, {2, {GC_V, GC_D}, GC_NORMAL}}, blocks},
    {"lm_cross_entropy_tied", 2, {{2, {GC_V, GC_D}, GC_NORMAL}, {3, {GC_B, TIED_T, GC_D}, GC_NORMAL}}, tied},
    {"lm_cross_entropy_self", 1, {{2, {GC_V, GC_D}, GC_NORMAL}}, self},
};
#define N_GC ((int)(sizeof gc_cases / sizeof gc_cases[0]))

/* Gradients here are about 1 / (counted rows): below the default atol of
 * 1e-3, where a 10% error would pass. Finite differences of the float loss
 * are good to about 1e-5 at eps 1e-2, so atol 2e-5 still holds them. */
static const GcOptions gc_opt = {.eps = 1e-2, .atol = 2e-5, .rtol = 1e-2, .max_per_input = 1000};

START_TEST(test_lm_cross_entropy_gradcheck) {
    gc_setup();
    const GradCase *c = &gc_cases[_i];
    GcResult r;
    ck_assert_msg(gradcheck(c, 7 + (uint64_t)_i, &gc_opt, &r), "%s: %s (worst error/tolerance %.3g)", c->name, r.why,
                  r.worst_ratio);
    long all = 0;
    for (int k = 0; k < c->n_in; k++) all += shape_numel(c->in[k].ndim, c->in[k].shape);
    ck_assert_int_eq(r.checked, all); /* every element */
}
END_TEST

/* A 10%-scaled or a missing backward fails the check, in every case. */
START_TEST(test_lm_cross_entropy_gradcheck_catches_broken_backward) {
    gc_setup();
    for (int k = 0; k < N_GC; k++)
        for (int mu = 0; mu < MUTATION_COUNT; mu++) {
            GcResult r;
            kernel_mutation_install(&lm_cross_entropy_op, (Mutation)mu);
            bool ok = gradcheck(&gc_cases[k], 7 + (uint64_t)k, &gc_opt, &r);
            kernel_mutation_remove(&lm_cross_entropy_op);
            ck_assert_msg(!ok, "a %s backward passed the gradient check of %s", mutation_name((Mutation)mu),
                          gc_cases[k].name);
        }
}
END_TEST

/* ---- against PyTorch ----------------------------------------------------------- */

/* The cases of tests/reference/lm_cross_entropy.py, in order. */
typedef struct {
    const char *name;
    int B, T, d, V;
    bool tied;
} FxCase;

static const FxCase fx_cases[] = {
    {"blocks", 2, 70, 6, 11, false},
    {"groups", 2, 600, 4, 7, false},
    {"tied", 2, 40, 6, 13, true},
};
#define N_FX ((int)(sizeof fx_cases / sizeof fx_cases[0]))

/* Reads "<case>/<what>" [B, T] of ids stored as F32 into dst; ids lie in [lo, hi). */
static bool fx_ids(StFile *sf, const FxCase *c, const char *what, int lo, int *dst, char *msg, int size) {
    Tensor *f = tensor_2d(c->B, c->T);
    if (!fixture_read(sf, c->name, what, f, f->data, msg, size)) return false;
    for (long i = 0; i < f->n; i++) {
        dst[i] = (int)f->data[i];
        if ((float)dst[i] != f->data[i] || dst[i] < lo || dst[i] >= c->V) {
            snprintf(msg, (size_t)size, "%s/%s[%ld] = %g is not an id in [%d, %d)", c->name, what, i,
                     (double)f->data[i], lo, c->V);
            return false;
        }
    }
    return true;
}

/* Fixture case i's state, for fixture_case_run's hooks (test_util.h). */
typedef struct {
    const FxCase *c;
    int *ids, *targets;
} FxRun;

/* The leaves: w, then x (or h, the residual added to w's rows when tied). */
static int fx_leaves(void *ctx, Tensor **leaf, const char **names) {
    FxRun *r = ctx;
    const FxCase *c = r->c;
    leaf[0] = tensor_2d(c->V, c->d);
    leaf[1] = tensor_3d(c->B, c->T, c->d);
    names[0] = "w", names[1] = c->tied ? "h" : "x";
    return 2;
}

/* The ids the case reads: its targets, and the input ids when tied. */
static bool fx_read_ids(StFile *sf, void *ctx, char *msg, int size) {
    FxRun *r = ctx;
    const FxCase *c = r->c;
    r->targets = arena_alloc(engine_arena(), (size_t)c->B * c->T * sizeof(int));
    r->ids = c->tied ? arena_alloc(engine_arena(), (size_t)c->B * c->T * sizeof(int)) : NULL;
    return fx_ids(sf, c, "targets", -1, r->targets, msg, size) && (!c->tied || fx_ids(sf, c, "ids", 0, r->ids, msg, size));
}

/* The loss, as the fixture's [1]. */
static Tensor *fx_forward(void *ctx, Tensor **leaf) {
    FxRun *r = ctx;
    const FxCase *c = r->c;
    Tensor *w = leaf[0], *x = leaf[1];
    if (c->tied) x = op_add(op_embedding(w, r->ids, 2, (int[]){c->B, c->T}), leaf[1]);
    return op_reshape(op_lm_cross_entropy(x, w, r->targets, -1), 1, (int[]){1});
}

/* Case i on the fixture's inputs: the loss, then the gradients of R loss;
 * the longest sum is dW's, over the rows. */
static bool fx_run(StFile *sf, int i, char *msg, int size) {
    const FxCase *c = &fx_cases[i];
    long K = (long)c->B * c->T;
    if (c->V > K) K = c->V;
    FxRun r = {.c = c};
    FixtureCase fc = {c->name, K, &r, fx_leaves, fx_read_ids, fx_forward, NULL, NULL};
    return fixture_case_run(sf, &fc, msg, size) == FX_OK;
}

START_TEST(test_lm_cross_entropy_matches_pytorch) {
    StFile sf = fixture_open("lm_cross_entropy.safetensors");
    char msg[512] = "";
    bool ok = fx_run(&sf, _i, msg, sizeof msg);
    st_close(&sf);
    ck_assert_msg(ok, "%s differs from PyTorch: %s", fx_cases[_i].name, msg);
}
END_TEST

/* The fixture lists the cases of fx_cases, in order. */
START_TEST(test_lm_cross_entropy_fixture_cases) {
    StFile sf = fixture_open("lm_cross_entropy.safetensors");
    const char *cases = st_meta(&sf, "cases");
    char want[256] = "";
    for (int i = 0; i < N_FX; i++) {
        if (i) strcat(want, ",");
        strcat(want, fx_cases[i].name);
    }
    ck_assert_msg(cases && strcmp(cases, want) == 0, "the fixture has cases %s, the test %s; run: make fixtures",
                  cases ? cases : "(none)", want);
    st_close(&sf);
}
END_TEST

/* A 10%-scaled or a missing backward makes some case differ from PyTorch. */
START_TEST(test_lm_cross_entropy_pytorch_catches_broken_backward) {
    StFile sf = fixture_open("lm_cross_entropy.safetensors");
    for (int mu = 0; mu < MUTATION_COUNT; mu++)
        for (int i = 0; i < N_FX; i++) {
            char msg[512] = "";
            kernel_mutation_install(&lm_cross_entropy_op, (Mutation)mu);
            bool ok = fx_run(&sf, i, msg, sizeof msg);
            kernel_mutation_remove(&lm_cross_entropy_op);
            ck_assert_msg(!ok, "a %s backward matched PyTorch in case %s", mutation_name((Mutation)mu),
                          fx_cases[i].name);
        }
    st_close(&sf);
}
END_TEST

/* ---- against the composition, on threads, memory ----------------------------------- */

/* Rows across two groups, the second partial, its last block partial too. */
enum { CMP_B = 2, CMP_T = 700, CMP_D = 24, CMP_V = 256 };

typedef struct {
    float loss;
    float *dx, *dw; /* malloc'd copies */
    size_t peak;    /* the arena's most bytes in use over forward and backward */
} Eval;

/* One forward and backward, fused or composed, in a fresh arena, on x and W drawn from `seed`. */
static Eval eval_loss(bool fused, uint64_t seed, const int *targets, int T) {
    Arena a;
    arena_init(&a, 0);
    engine_set_arena(&a);
    bool was = grad_set(true);
    tape_reset();
    Rng rng;
    rng_seed(&rng, seed);
    Tensor *x = tensor_3d(CMP_B, T, CMP_D), *w = tensor_2d(CMP_V, CMP_D);
    rng_fill_normal(&rng, x->data, x->n, 0.0f, 1.0f);
    rng_fill_normal(&rng, w->data, w->n, 0.0f, 0.3f);
    x->requires_grad = w->requires_grad = true;
    Tensor *loss = fused ? op_lm_cross_entropy(x, w, targets, -1)
                         : op_cross_entropy(op_matmul(x, w, false, true), targets, -1);
    backward(loss);
    Eval e = {.loss = loss->data[0], .peak = a.peak};
    e.dx = malloc((size_t)x->n * sizeof(float));
    e.dw = malloc((size_t)w->n * sizeof(float));
    ck_assert(e.dx && e.dw);
    if (x->grad) memcpy(e.dx, x->grad, (size_t)x->n * sizeof(float));
    else memset(e.dx, 0xff, (size_t)x->n * sizeof(float)); /* NaN: no gradient came */
    if (w->grad) memcpy(e.dw, w->grad, (size_t)w->n * sizeof(float));
    else memset(e.dw, 0xff, (size_t)w->n * sizeof(float));
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
    return e;
}

static void eval_free(Eval *e) { free(e->dx), free(e->dw); }

static int cmp_targets[CMP_B * CMP_T];

/* With BLAS's products as fixed-order loops (blas_stub.h), the fused op
 * computes each logit, log-sum-exp, loss term and dx value as the
 * composition does: the same bits. dW sums the rows a group at a time,
 * the composition all at once: the same up to float rounding. The fused
 * step's peak is lower by the logits and their gradient, less its one
 * group of scratch: (2 rows - 1024) V floats at least. */
START_TEST(test_lm_cross_entropy_matches_composition) {
    fill_targets(cmp_targets, CMP_B * CMP_T, CMP_V, 6);
    bool stub = blas_stub_set(true);
    Eval f = eval_loss(true, 5, cmp_targets, CMP_T), c = eval_loss(false, 5, cmp_targets, CMP_T);
    blas_stub_set(stub);
    ck_assert_msg(memcmp(&f.loss, &c.loss, sizeof f.loss) == 0, "loss %.9g, composed %.9g", (double)f.loss,
                  (double)c.loss);
    long nx = (long)CMP_B * CMP_T * CMP_D, nw = (long)CMP_V * CMP_D;
    for (long i = 0; i < nx; i++)
        ck_assert_msg(memcmp(&f.dx[i], &c.dx[i], sizeof(float)) == 0, "dx[%ld]: %.9g, composed %.9g", i,
                      (double)f.dx[i], (double)c.dx[i]);
    for (long i = 0; i < nw; i++)
        ck_assert_msg(fabsf(f.dw[i] - c.dw[i]) <= 1e-6f * (1 + fabsf(c.dw[i])), "dW[%ld]: %.9g, composed %.9g", i,
                      (double)f.dw[i], (double)c.dw[i]);
    long rows = (long)CMP_B * CMP_T;
    size_t saved = (size_t)(2 * rows - 1024) * CMP_V * sizeof(float);
    ck_assert_msg(c.peak >= f.peak + saved, "peak: fused %zu bytes, composed %zu (expected %zu less)", f.peak, c.peak,
                  saved);
    eval_free(&f), eval_free(&c);
}
END_TEST

/* No target counted: the loss is 0 and no gradient flows, as with op_cross_entropy. */
START_TEST(test_lm_cross_entropy_all_ignored) {
    int targets[CMP_B * 3];
    for (int i = 0; i < CMP_B * 3; i++) targets[i] = -1;
    for (int fused = 0; fused < 2; fused++) {
        Eval e = eval_loss(fused, 9, targets, 3);
        ck_assert_msg(e.loss == 0.0f, "%s loss %g", fused ? "fused" : "composed", (double)e.loss);
        ck_assert(isnan(e.dx[0]) && isnan(e.dw[0])); /* x and W got no gradient at all */
        eval_free(&e);
    }
}
END_TEST

/* 1 and 2 threads give the same bits, for the loss and both gradients: with
 * the fixed-order stand-in for BLAS (the op's own part), and with OpenBLAS
 * too, since each product is one single-threaded call of a fixed shape. */
START_TEST(test_lm_cross_entropy_thread_invariant) {
    fill_targets(cmp_targets, CMP_B * CMP_T, CMP_V, 6);
    int before = engine_threads();
    for (int stub = 1; stub >= 0; stub--) {
        bool was = blas_stub_set(stub);
        engine_set_threads(1);
        Eval one = eval_loss(true, 13, cmp_targets, CMP_T);
        engine_set_threads(2);
        Eval two = eval_loss(true, 13, cmp_targets, CMP_T);
        engine_set_threads(before);
        blas_stub_set(was);
        const char *blas = stub ? "the stand-in" : "OpenBLAS";
        ck_assert_msg(memcmp(&one.loss, &two.loss, sizeof one.loss) == 0, "%s: loss %.9g on 1 thread, %.9g on 2",
                      blas, (double)one.loss, (double)two.loss);
        ck_assert_msg(memcmp(one.dx, two.dx, (size_t)CMP_B * CMP_T * CMP_D * sizeof(float)) == 0,
                      "%s: dx differs between 1 and 2 threads", blas);
        ck_assert_msg(memcmp(one.dw, two.dw, (size_t)CMP_V * CMP_D * sizeof(float)) == 0,
                      "%s: dW differs between 1 and 2 threads", blas);
        eval_free(&one), eval_free(&two);
    }
}
END_TEST

/* The model's step (model_loss, the fused op) against the same model's
 * logits through op_cross_entropy: the same loss and gradients to rounding,
 * and a peak lower by at least the logits and their gradient less the op's
 * scratch, (2 B T - 1024) V floats. */
START_TEST(test_lm_cross_entropy_model_step) {
    enum { B = 6, T = 256 };
    ModelConfig cfg = {.vocab = 256, .layers = 1, .d_model = 16, .heads = 2, .key_size = 8, .head_size = 8,
                       .mlp_ratio = 2, .context = T, .norm = NORM_LAYERNORM, .tie_embeddings = true,
                       .attn = ATTN_SOFTMAX, .pos = pos_of("learned"), .objective = OBJECTIVE_CLM};
    Model m;
    model_init(&m, &cfg);
    Rng rng;
    rng_seed(&rng, 21);
    model_init_weights(&m, &rng);
    static int ids[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (int)rng_below(&rng, 256), targets[i] = (int)rng_below(&rng, 256);
    float loss[2], *grad[2];
    size_t peak[2];
    for (int fused = 0; fused < 2; fused++) {
        Arena a;
        arena_init(&a, 0);
        engine_set_arena(&a);
        bool was = grad_set(true);
        tape_reset();
        params_zero_grad(&m.params);
        Tensor *l = fused ? model_loss(&m, ids, targets, B, T)
                          : op_cross_entropy(model_forward(&m, ids, B, T), targets, -1);
        backward(l);
        loss[fused] = l->data[0];
        peak[fused] = a.peak;
        grad[fused] = malloc((size_t)m.params.total * sizeof(float));
        ck_assert_ptr_nonnull(grad[fused]);
        memcpy(grad[fused], m.params.grad, (size_t)m.params.total * sizeof(float));
        tape_reset();
        grad_set(was);
        engine_set_arena(NULL);
        arena_free(&a);
    }
    ck_assert_msg(fabsf(loss[1] - loss[0]) <= 1e-6f * fabsf(loss[0]), "loss %.9g, composed %.9g", (double)loss[1],
                  (double)loss[0]);
    for (long i = 0; i < m.params.total; i++)
        ck_assert_msg(fabsf(grad[1][i] - grad[0][i]) <= 1e-5f * (1e-3f + fabsf(grad[0][i])),
                      "gradient [%ld]: %.9g, composed %.9g", i, (double)grad[1][i], (double)grad[0][i]);
    size_t saved = (size_t)(2 * B * T - 1024) * 256 * sizeof(float);
    ck_assert_msg(peak[0] >= peak[1] + saved, "peak: fused %zu bytes, composed %zu (expected %zu less)", peak[1],
                  peak[0], saved);
    free(grad[0]), free(grad[1]);
    model_free(&m);
}
END_TEST

/* ---- programming errors abort ------------------------------------------------------ */

static void with_arena(void) {
    static Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
}

START_TEST(test_lm_cross_entropy_shape_mismatch_aborts) {
    with_arena();
    static const int t[3] = {0, 1, 2};
    op_lm_cross_entropy(tensor_2d(3, 4), tensor_2d(5, 6), t, -1);
}
END_TEST

START_TEST(test_lm_cross_entropy_bad_target_aborts) {
    with_arena();
    static const int t[3] = {0, 5, 2};
    Tensor *x = tensor_zeros(2, (int[]){3, 4}), *w = tensor_zeros(2, (int[]){5, 4});
    op_lm_cross_entropy(x, w, t, -1);
}
END_TEST

Suite *lm_cross_entropy_suite(void) {
    Suite *s = suite_create("lm_cross_entropy");
    TCase *tc = tcase_create("fused");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_lm_cross_entropy_gradcheck, 0, N_GC);
    tcase_add_test(tc, test_lm_cross_entropy_gradcheck_catches_broken_backward);
    tcase_add_loop_test(tc, test_lm_cross_entropy_matches_pytorch, 0, N_FX);
    tcase_add_test(tc, test_lm_cross_entropy_fixture_cases);
    tcase_add_test(tc, test_lm_cross_entropy_pytorch_catches_broken_backward);
    tcase_add_test(tc, test_lm_cross_entropy_matches_composition);
    tcase_add_test(tc, test_lm_cross_entropy_all_ignored);
    tcase_add_test(tc, test_lm_cross_entropy_thread_invariant);
    tcase_add_test(tc, test_lm_cross_entropy_model_step);
    suite_add_tcase(s, tc);
    TCase *aborts = tcase_create("aborts");
    tcase_add_test_raise_signal(aborts, test_lm_cross_entropy_shape_mismatch_aborts, SIGABRT);
    tcase_add_test_raise_signal(aborts, test_lm_cross_entropy_bad_target_aborts, SIGABRT);
    suite_add_tcase(s, aborts);
    return s;
}
