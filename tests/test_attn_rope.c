/* test_attn_rope.c: pos = rope and pos = xpos (layers/attention/rope.c), and
 * linear attention with RoPE inside (layers/attention/linear.c).
 *
 * gradcheck: the rope op for rope (full and partial rope_dims) and xpos (q
 * and k side); the linear kernel with pos = rope for every phi, causal (T = 7
 * in chunks of 3, the last partial; T = 37 in chunks of 8) and bidirectional.
 *
 * properties: RoPE's q . k depends on i - j only; XPOS's q . k is, pair by
 * pair, RoPE's times zeta_p^((i - j) / 512) (checked in double at T = 301,
 * where the decay is far from 1); the linear kernel with RoPE equals an
 * O(T^2) composition of primitive ops (rotations as x C + (x M) S with
 * constant tables and a pair-swap matrix M, numerator from rotated features,
 * denominator from the unrotated ones): output, gradients, probs, probs v.
 *
 * pytorch: tests/fixtures/attn_rope.safetensors (tests/reference/attention_rope.py),
 * outputs, probs and gradients at float32 tolerance.
 *
 * mutations: a 10%-scaled or missing backward of either op makes every
 * gradient check and every fixture case fail at the gradients.
 *
 * module: pos = rope | xpos puts the rope op on the tape for softmax (q and
 * k), never for the linear kernel (rope_inside), whose output changes with
 * pos; the model trains with pos = rope is in tests/test_zoo.c. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attention/rope.h"
#include "model.h"
#include "cases_linear.h"
#include "rng.h"
#include "safetensors.h"
#include "test_util.h"

#define ATOL 1e-5f
#define RTOL 1e-4f
#define FX_B 2
#define FX_H 2

static const char *const phi_names[] = {"identity", "relu", "leakyrelu", "elu"};

/* ---- the cases (the reference script's, in its order) ----------------------- */

typedef struct {
    const char *name;
    const char *pos;
    bool key;
    int T, d, rope_dims;
} RopeCase;

static const RopeCase rope_cases[] = {
    {"rope", "rope", false, 7, 6, 6},
    {"rope_partial", "rope", false, 7, 6, 4},
    {"rope_long", "rope", true, 40, 8, 8},
    {"xpos_q", "xpos", false, 7, 6, 6},
    {"xpos_k", "xpos", true, 8, 6, 6},
    {"xpos_partial_k", "xpos", true, 7, 6, 2},
    {"xpos_long_q", "xpos", false, 301, 4, 4},
    {"xpos_long_k", "xpos", true, 301, 4, 4},
};
#define N_ROPE ((int)(sizeof rope_cases / sizeof rope_cases[0]))

typedef struct {
    const char *name;
    int phi;
    bool causal;
    int T, dk, dv, rope_dims, chunk;
} LinCase;

#define LIN2(phi, name) \
    {"linear_" #name "_causal", phi, true, 7, 4, 3, 4, 3}, {"linear_" #name "_bidirectional", phi, false, 7, 4, 3, 4, 3}

static const LinCase lin_cases[] = {
    LIN2(PHI_IDENTITY, identity),
    LIN2(PHI_RELU, relu),
    LIN2(PHI_LEAKYRELU, leakyrelu),
    LIN2(PHI_ELU, elu),
    {"linear_elu_partial_causal", PHI_ELU, true, 7, 4, 3, 2, 3},
    {"linear_relu_long_causal", PHI_RELU, true, 37, 4, 3, 4, 8},
    {"linear_elu_long_bidirectional", PHI_ELU, false, 37, 4, 3, 4, 8},
};
#define N_LIN ((int)(sizeof lin_cases / sizeof lin_cases[0]))

/* The calls of the cases, their config in *m. */
static AttnCall rope_call(ModelConfig *m, const RopeCase *rc) {
    AttnCall c = kernel_case_call(m, &attn_kernel_softmax, true);
    c.T = rc->T;
    c.key_size = rc->d;
    m->pos = pos_of(rc->pos);
    m->rope_dims = rc->rope_dims;
    return c;
}

static AttnCall lin_call(ModelConfig *m, const LinCase *lc, int B, int H) {
    AttnCall c = linear_call(m, lc->causal, lc->phi, REWEIGHT_NONE);
    c.B = B, c.H = H, c.T = lc->T;
    c.key_size = lc->dk, c.head_size = lc->dv;
    c.scale = 1.0f / sqrtf((float)lc->dk);
    linear_opts(m)->chunk = lc->chunk;
    m->pos = pos_of("rope");
    m->rope_dims = lc->rope_dims;
    return c;
}

static const AttnKernel *linear_kernel(void) {
    const AttnKernel *k = kernel_by_name("linear");
    ck_assert_ptr_nonnull(k);
    return k;
}

static OpDef *linear_op(void) { return linear_kernel()->ops[0]; }

/* ---- gradient checks ---------------------------------------------------------- */

/* GradCase.build takes no context: the case being checked. */
static const RopeCase *gc_rope;
static const LinCase *gc_lin;

static Tensor *build_rope(Tensor **in) {
    ModelConfig m;
    AttnCall c = rope_call(&m, gc_rope);
    return attn_rope(&c, in[0], gc_rope->key);
}

/* relu and leakyrelu get linear_signs (tests/cases_linear.h): column 0
 * positive keeps den clear of 0, the others use the negative branch. */
static Tensor *build_linear(Tensor **in) {
    ModelConfig m;
    AttnCall c = lin_call(&m, gc_lin, FX_B, FX_H);
    Tensor *q = in[0], *k = in[1];
    if (gc_lin->phi == PHI_RELU || gc_lin->phi == PHI_LEAKYRELU) {
        q = linear_signs(q, false);
        k = linear_signs(k, true);
    }
    return linear_kernel()->forward(&c, q, k, in[2]);
}

static GradCase rope_gradcase(int i) {
    const RopeCase *rc = &rope_cases[i];
    gc_rope = rc;
    return (GradCase){rc->name, 1, {{4, {FX_B, FX_H, rc->T, rc->d}, GC_NORMAL}}, build_rope};
}

static GradCase linear_gradcase(int i) {
    const LinCase *lc = &lin_cases[i];
    gc_lin = lc;
    GcInit init = lc->phi == PHI_ELU ? GC_NONZERO : GC_POSITIVE;
    return (GradCase){lc->name, 3,
                      {{4, {FX_B, FX_H, lc->T, lc->dk}, init}, {4, {FX_B, FX_H, lc->T, lc->dk}, init},
                       {4, {FX_B, FX_H, lc->T, lc->dv}, GC_NORMAL}},
                      build_linear};
}

START_TEST(test_rope_gradcheck) {
    GradCase gc = rope_gradcase(_i);
    GcResult r;
    bool ok = gradcheck(&gc, 1100 + (uint64_t)_i, NULL, &r);
    ck_assert_msg(ok, "gradcheck %s failed: %s (worst error/tolerance %.3g)", gc.name, r.why, r.worst_ratio);
    ck_assert_int_gt(r.checked, 0);
}
END_TEST

START_TEST(test_linear_rope_gradcheck) {
    GradCase gc = linear_gradcase(_i);
    GcResult r;
    bool ok = gradcheck(&gc, 1200 + (uint64_t)_i, NULL, &r);
    ck_assert_msg(ok, "gradcheck %s failed: %s (worst error/tolerance %.3g)", gc.name, r.why, r.worst_ratio);
    ck_assert_int_gt(r.checked, 0);
}
END_TEST

/* A broken backward of either op fails every gradient check of its cases. */
START_TEST(test_gradcheck_catches_broken_backward) {
    for (int mu = 0; mu < MUTATION_COUNT; mu++) {
        for (int i = 0; i < N_ROPE; i++) {
            GradCase gc = rope_gradcase(i);
            GcResult r;
            kernel_mutation_install(&attn_rope_op, (Mutation)mu);
            bool ok = gradcheck(&gc, 1100 + (uint64_t)i, NULL, &r);
            kernel_mutation_remove(&attn_rope_op);
            ck_assert_msg(!ok, "a %s backward of attn_rope passes the gradient check of %s",
                          mutation_name((Mutation)mu), gc.name);
        }
        for (int i = 0; i < N_LIN; i++) {
            GradCase gc = linear_gradcase(i);
            GcResult r;
            kernel_mutation_install(linear_op(), (Mutation)mu);
            bool ok = gradcheck(&gc, 1200 + (uint64_t)i, NULL, &r);
            kernel_mutation_remove(linear_op());
            ck_assert_msg(!ok, "a %s backward of attn_linear passes the gradient check of %s",
                          mutation_name((Mutation)mu), gc.name);
        }
    }
}
END_TEST

/* ---- properties ------------------------------------------------------------------ */

/* [1, 1, T, d] with every row equal to row. */
static Tensor *repeated(const float *row, int T, int d) {
    Tensor *t = tensor_4d(1, 1, T, d);
    for (int i = 0; i < T; i++) memcpy(t->data + (long)i * d, row, (size_t)d * sizeof(float));
    return t;
}

static double dot_range(const float *a, const float *b, int lo, int hi) {
    double s = 0;
    for (int e = lo; e < hi; e++) s += (double)a[e] * b[e];
    return s;
}

/* The same q at every position and the same k: R_i q . R_j k is a function of
 * i - j alone, and a real one (it changes with i - j). */
START_TEST(test_rope_score_depends_on_offset_only) {
    const int T = 24, d = 8, dims[] = {8, 4};
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    bool was = grad_set(false);
    Rng rng;
    rng_seed(&rng, 31);
    float qrow[8], krow[8];
    rng_fill_normal(&rng, qrow, d, 0.0f, 1.0f);
    rng_fill_normal(&rng, krow, d, 0.0f, 1.0f);
    for (int di = 0; di < 2; di++) {
        ModelConfig m;
        AttnCall c = kernel_case_call(&m, &attn_kernel_softmax, true);
        m.pos = pos_of("rope");
        m.rope_dims = dims[di];
        Tensor *q = attn_rope(&c, repeated(qrow, T, d), false), *k = attn_rope(&c, repeated(krow, T, d), true);
        double spread = 0;
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                double s = dot_range(q->data + i * d, k->data + j * d, 0, d);
                int i0 = i - (i < j ? i : j), j0 = j - (i < j ? i : j); /* the same offset from position 0 */
                double s0 = dot_range(q->data + i0 * d, k->data + j0 * d, 0, d);
                ck_assert_msg(fabs(s - s0) <= 1e-4 * (1 + fabs(s0)), "rope_dims %d: score(%d, %d) = %g, score(%d, %d) = %g",
                              dims[di], i, j, s, i0, j0, s0);
                spread = fmax(spread, fabs(s - dot_range(q->data, k->data, 0, d)));
            }
        ck_assert_msg(spread > 0.1, "rope_dims %d: the score hardly depends on i - j (%g)", dims[di], spread);
        /* the dimensions past rope_dims do not rotate */
        for (int i = 0; i < T; i++)
            ck_assert(memcmp(q->data + i * d + dims[di], qrow + dims[di], (size_t)(d - dims[di]) * sizeof(float)) == 0);
    }
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
}
END_TEST

/* XPOS against RoPE on the same q and k at T = 301: pair p of xpos(q)_i .
 * xpos(k)_j is pair p of rope(q)_i . rope(k)_j times zeta_p^((i - j) / 512),
 * zeta_p = (2p + 0.4 D) / (1.4 D); the unrotated dimensions are left alone.
 * So the score decays with the distance and not with where the window is. */
START_TEST(test_xpos_is_rope_times_decay) {
    const int T = 301, d = 6, dims[] = {6, 4};
    Arena a;
    arena_init(&a, 1 << 20);
    engine_set_arena(&a);
    bool was = grad_set(false);
    Rng rng;
    rng_seed(&rng, 32);
    for (int di = 0; di < 2; di++) {
        int D = dims[di];
        Tensor *qx = tensor_4d(1, 1, T, d), *kx = tensor_4d(1, 1, T, d);
        rng_fill_normal(&rng, qx->data, qx->n, 0.0f, 1.0f);
        rng_fill_normal(&rng, kx->data, kx->n, 0.0f, 1.0f);
        ModelConfig m;
        AttnCall c = kernel_case_call(&m, &attn_kernel_softmax, true);
        m.rope_dims = D;
        m.pos = pos_of("rope");
        Tensor *rq = attn_rope(&c, qx, false), *rk = attn_rope(&c, kx, true);
        m.pos = pos_of("xpos");
        Tensor *xq = attn_rope(&c, qx, false), *xk = attn_rope(&c, kx, true);
        double widest = 0;
        for (int i = 0; i < T; i += 7)
            for (int j = 0; j < T; j += 5) {
                const float *a1 = xq->data + i * d, *b1 = xk->data + j * d, *a0 = rq->data + i * d, *b0 = rk->data + j * d;
                for (int p = 0; p < D / 2; p++) {
                    double zeta = (2.0 * p + 0.4 * D) / (1.4 * D), decay = pow(zeta, (i - j) / 512.0);
                    double got = dot_range(a1, b1, 2 * p, 2 * p + 2), want = decay * dot_range(a0, b0, 2 * p, 2 * p + 2);
                    ck_assert_msg(fabs(got - want) <= 1e-5 * (1 + fabs(want)), "rope_dims %d (%d, %d) pair %d: %g, want %g",
                                  D, i, j, p, got, want);
                    widest = fmax(widest, fabs(decay - 1));
                }
                ck_assert(dot_range(a1, b1, D, d) == dot_range(qx->data + i * d, kx->data + j * d, D, d));
            }
        ck_assert_msg(widest > 0.3, "the decay stays near 1 (%g): the check proves little", widest);
    }
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
}
END_TEST

/* ---- against a composition of primitive ops ---------------------------------------- */

static Tensor *phi_op(const AttnCall *c, Tensor *x) {
    const LinearOpts *o = c->opts;
    switch (o->phi) {
        case PHI_IDENTITY: return op_identity(x);
        case PHI_RELU: return op_relu(x);
        case PHI_LEAKYRELU: return op_leakyrelu(x, o->leaky_slope);
        default: return op_elu(x, 1.0f, 1.0f);
    }
}

static Tensor *constant(int rows, int cols, float value) {
    Tensor *t = tensor_2d(rows, cols);
    for (long i = 0; i < t->n; i++) t->data[i] = value;
    return t;
}

/* R_t x = x . C + (x M) . S on [..., T, d]: C, S [T, d] hold cos, sin of
 * t 10000^(-2p / rope_dims) on both elements of pair p (1 and 0 past
 * rope_dims), and M [d, d] maps (x1, x2) to (-x2, x1). */
static Tensor *rotate_compose(Tensor *x, int rope_dims) {
    int T = x->shape[2], d = x->shape[3];
    Tensor *C = constant(T, d, 1.0f), *S = constant(T, d, 0.0f), *M = constant(d, d, 0.0f);
    for (int t = 0; t < T; t++)
        for (int e = 0; e < rope_dims; e++) {
            double angle = t * pow(10000.0, -2.0 * (e / 2) / rope_dims);
            C->data[t * d + e] = (float)cos(angle);
            S->data[t * d + e] = (float)sin(angle);
        }
    for (int p = 0; p < rope_dims / 2; p++) {
        M->data[(2 * p + 1) * d + 2 * p] = -1.0f;
        M->data[(2 * p) * d + 2 * p + 1] = 1.0f;
    }
    return op_add(op_mul(x, C), op_mul(op_matmul(x, M, false, false), S));
}

/* out = P v, P_ij = (R_i phi(q_i)) . (R_j phi(k_j)) / den_i, den_i = sum_j
 * phi(q_i) . phi(k_j) (j <= i when causal); the inputs keep den > 0.1, so no
 * clamp. 1 / den by linear_compose's Newton step. */
static Tensor *linear_rope_compose(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v, Tensor **probs) {
    int T = q->shape[2];
    Tensor *fq = phi_op(c, q), *fk = phi_op(c, k);
    Tensor *A = op_matmul(rotate_compose(fq, c->cfg->rope_dims), rotate_compose(fk, c->cfg->rope_dims), false, true);
    Tensor *A0 = op_matmul(fq, fk, false, true);
    if (c->causal) {
        Tensor *W = constant(T, T, 1.0f);
        for (int i = 0; i < T; i++)
            for (int j = i + 1; j < T; j++) W->data[i * T + j] = 0.0f;
        A = op_mul(A, W);
        A0 = op_mul(A0, W);
    }
    Tensor *den = op_matmul(A0, constant(T, 1, 1.0f), false, false);
    Tensor *r0 = tensor_new(den->ndim, den->shape), *two = tensor_new(den->ndim, den->shape);
    for (long i = 0; i < den->n; i++) {
        ck_assert_msg(den->data[i] > 0.1f, "composition: den %g near 0; the inputs should prevent it", den->data[i]);
        r0->data[i] = 1.0f / den->data[i];
        two->data[i] = 2.0f;
    }
    Tensor *r = op_mul(op_add(op_scale(op_mul(den, r0), -1.0f), two), r0);
    Tensor *P = op_mul(A, op_matmul(r, constant(1, T, 1.0f), false, false));
    *probs = P;
    return op_matmul(P, v, false, false);
}

/* Leaves q, k (uniform [0.5, 1.5], signs for relu and leakyrelu; N(0, 1)
 * for elu), v N(0, 1); the kernel's inputs through the prepared ops. */
static void draw_inputs(Rng *rng, const AttnCall *c, const void *ctx, Tensor **leaves, Tensor **in) {
    (void)ctx;
    int shape_k[4] = {c->B, c->H, c->T, c->key_size}, shape_v[4] = {c->B, c->H, c->T, c->head_size};
    for (int l = 0; l < 3; l++) {
        leaves[l] = tensor_new(4, l < 2 ? shape_k : shape_v);
        for (long i = 0; i < leaves[l]->n; i++)
            leaves[l]->data[i] = l == 2 || ((const LinearOpts *)c->opts)->phi == PHI_ELU ? rng_normal(rng) : 0.5f + rng_uniform(rng);
        leaves[l]->requires_grad = true;
        in[l] = leaves[l];
    }
    if (((const LinearOpts *)c->opts)->phi == PHI_RELU || ((const LinearOpts *)c->opts)->phi == PHI_LEAKYRELU) {
        in[0] = linear_signs(leaves[0], false);
        in[1] = linear_signs(leaves[1], true);
    }
}

/* Kernel and composition on the same inputs (kernel_against_composition). */
static bool against_composition(const AttnCall *c, uint64_t seed, char *msg, int size) {
    return kernel_against_composition(linear_kernel(), c, seed, draw_inputs, NULL, linear_rope_compose, KERNEL_ROUNDING_SLACK,
                                      msg, size);
}

/* Every case of the table, and a long one per phi: T = 50 in chunks of 8
 * (the last one partial) and of 1, at B 1, H 3. */
START_TEST(test_linear_rope_matches_composition) {
    char msg[512] = "";
    ModelConfig m;
    AttnCall c = lin_call(&m, &lin_cases[_i % N_LIN], FX_B, FX_H);
    if (_i >= N_LIN) {
        int phi = (_i - N_LIN) / 2;
        c = lin_call(&m, &(LinCase){"long", phi, (_i - N_LIN) % 2 == 0, 50, 6, 5, phi == PHI_RELU ? 4 : 6, 8}, 1, 3);
    }
    ck_assert_msg(against_composition(&c, 900 + (uint64_t)_i, msg, sizeof msg),
                  "linear phi=%s %s T %d rope_dims %d chunk %d against its composition: %s", phi_names[linear_opts(&m)->phi],
                  c.causal ? "causal" : "bidirectional", c.T, m.rope_dims, linear_opts(&m)->chunk, msg);
    if (_i >= N_LIN && c.causal) {
        linear_opts(&m)->chunk = 1;
        ck_assert_msg(against_composition(&c, 900 + (uint64_t)_i, msg, sizeof msg), "chunk 1: %s", msg);
    }
}
END_TEST

/* ---- against PyTorch ------------------------------------------------------------- */

/* The longest sum of fixture case i: over positions, or a head's sizes. */
static long fx_sum_length(int i) {
    if (i < N_ROPE) return rope_cases[i].T > rope_cases[i].d ? rope_cases[i].T : rope_cases[i].d;
    const LinCase *lc = &lin_cases[i - N_ROPE];
    long K = lc->T > lc->dk ? lc->T : lc->dk;
    return K > lc->dv ? K : lc->dv;
}

/* Fixture case i: the rope cases, then the linear ones. */
static const char *fx_name(int i) { return i < N_ROPE ? rope_cases[i].name : lin_cases[i - N_ROPE].name; }

/* Fixture case i's state, for fixture_case_run's hooks (test_util.h). */
typedef struct {
    int i;
    ModelConfig m;
    AttnCall c;
} FxRun;

/* x for a rope case; q, k, v for a linear one. */
static int fx_leaves(void *ctx, Tensor **leaf, const char **names) {
    FxRun *r = ctx;
    if (r->i < N_ROPE) {
        const RopeCase *rc = &rope_cases[r->i];
        r->c = rope_call(&r->m, rc);
        names[0] = "x";
        leaf[0] = tensor_4d(FX_B, FX_H, rc->T, rc->d);
        return 1;
    }
    const LinCase *lc = &lin_cases[r->i - N_ROPE];
    r->c = lin_call(&r->m, lc, FX_B, FX_H);
    names[0] = "q", names[1] = "k", names[2] = "v";
    leaf[0] = tensor_4d(FX_B, FX_H, lc->T, lc->dk);
    leaf[1] = tensor_4d(FX_B, FX_H, lc->T, lc->dk);
    leaf[2] = tensor_4d(FX_B, FX_H, lc->T, lc->dv);
    return 3;
}

static Tensor *fx_forward(void *ctx, Tensor **leaf) {
    FxRun *r = ctx;
    return r->i < N_ROPE ? attn_rope(&r->c, leaf[0], rope_cases[r->i].key)
                         : linear_kernel()->forward(&r->c, leaf[0], leaf[1], leaf[2]);
}

static Tensor *fx_probs(void *ctx, Tensor **leaf) {
    FxRun *r = ctx;
    return linear_kernel()->probs(&r->c, leaf[0], leaf[1]);
}

/* Fixture case i: forward, probs (the linear cases), backward, stage by stage. */
static FxStage fx_run(StFile *sf, int i, char *msg, int size) {
    FxRun r = {.i = i};
    FixtureCase c = {fx_name(i), fx_sum_length(i), &r, fx_leaves, NULL, fx_forward, NULL, i < N_ROPE ? NULL : fx_probs};
    return fixture_case_run(sf, &c, msg, size);
}

START_TEST(test_rope_fixture_cases) {
    StFile sf = fixture_open("attn_rope.safetensors");
    const char *list = st_meta(&sf, "cases");
    ck_assert_msg(list != NULL, "fixture metadata has no \"cases\"; run tests/reference/attention_rope.py");
    char want[2048] = "";
    for (int i = 0; i < N_ROPE + N_LIN; i++) {
        if (i) strcat(want, ",");
        strcat(want, fx_name(i));
    }
    ck_assert_msg(strcmp(list, want) == 0, "the fixture's cases are %s, the test's %s", list, want);
    st_close(&sf);
}
END_TEST

START_TEST(test_rope_matches_pytorch) {
    StFile sf = fixture_open("attn_rope.safetensors");
    char msg[512] = "";
    FxStage s = fx_run(&sf, _i, msg, sizeof msg);
    st_close(&sf);
    ck_assert_msg(s == FX_OK, "%s differs from PyTorch at the %s: %s", fx_name(_i), fx_stage_names[s], msg);
}
END_TEST

/* The same at 3 threads (rows and heads on threads). */
START_TEST(test_rope_matches_pytorch_threaded) {
    int was = engine_threads();
    engine_set_threads(3);
    StFile sf = fixture_open("attn_rope.safetensors");
    for (int i = 0; i < N_ROPE + N_LIN; i++) {
        char msg[512] = "";
        FxStage s = fx_run(&sf, i, msg, sizeof msg);
        ck_assert_msg(s == FX_OK, "%s at 3 threads differs from PyTorch at the %s: %s", fx_name(i),
                      fx_stage_names[s], msg);
    }
    st_close(&sf);
    engine_set_threads(was);
}
END_TEST

/* A 10%-scaled or missing backward breaks the gradients of every fixture
 * case of its op, and only them. */
START_TEST(test_rope_pytorch_catches_broken_backward) {
    StFile sf = fixture_open("attn_rope.safetensors");
    for (int mu = 0; mu < MUTATION_COUNT; mu++)
        for (int i = 0; i < N_ROPE + N_LIN; i++) {
            OpDef *op = i < N_ROPE ? &attn_rope_op : linear_op();
            char msg[512] = "";
            kernel_mutation_install(op, (Mutation)mu);
            FxStage s = fx_run(&sf, i, msg, sizeof msg);
            kernel_mutation_remove(op);
            ck_assert_msg(s == FX_GRADS, "a %s backward for %s: case %s stopped at the %s (%s)",
                          mutation_name((Mutation)mu), op->name, fx_name(i), fx_stage_names[s], msg);
        }
    st_close(&sf);
}
END_TEST

/* ---- the module ------------------------------------------------------------------ */

/* How many rope ops one attention_forward of a tiny layer records, and its output. */
static int rope_nodes(int attn, int pos, float *out, long *n) {
    ModelConfig cfg = {.vocab = 256, .layers = 1, .d_model = 8, .heads = 2, .mlp_ratio = 2, .context = 6,
                       .attn = attn, .pos = pos, .objective = OBJECTIVE_CLM};
    *linear_opts(&cfg) = (LinearOpts){.phi = PHI_ELU, .leaky_slope = 0.01f, .chunk = 4};
    ParamSet p;
    params_init(&p);
    Attention at;
    attention_declare(&at, &p, "blocks.0.attn", 0, &cfg);
    params_alloc(&p);
    Rng rng;
    rng_seed(&rng, 5);
    for (int i = 0; i < params_count(&p); i++) {
        Tensor *w = p.list[i];
        rng_fill_normal(&rng, w->data, w->n, 0.0f, 0.5f);
    }
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    bool was = grad_set(true);
    tape_reset();
    Tensor *x = tensor_3d(2, 6, 8);
    rng_fill_normal(&rng, x->data, x->n, 0.0f, 1.0f);
    x->requires_grad = true;
    Tensor *y = attention_forward(&at, x);
    int count = 0;
    for (Node *nd = tape_last(); nd; nd = nd->prev) count += nd->def == &attn_rope_op;
    memcpy(out, y->data, (size_t)y->n * sizeof(float));
    *n = y->n;
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
    params_free(&p);
    return count;
}

START_TEST(test_module_rotates_q_and_k) {
    float base[96], out[96];
    long n;
    ck_assert_int_eq(rope_nodes(ATTN_SOFTMAX, pos_of("none"), base, &n), 0);
    ck_assert_int_eq(rope_nodes(ATTN_SOFTMAX, pos_of("rope"), out, &n), 2);
    ck_assert(memcmp(base, out, (size_t)n * sizeof(float)) != 0);
    ck_assert_int_eq(rope_nodes(ATTN_SOFTMAX, pos_of("xpos"), out, &n), 2);
    /* the linear kernel rotates its features itself */
    ck_assert(linear_kernel()->rope_inside);
    ck_assert_int_eq(rope_nodes(ATTN_LINEAR, pos_of("none"), base, &n), 0);
    ck_assert_int_eq(rope_nodes(ATTN_LINEAR, pos_of("rope"), out, &n), 0);
    ck_assert_msg(memcmp(base, out, (size_t)n * sizeof(float)) != 0, "pos=rope changes nothing in the linear kernel");
}
END_TEST

Suite *attn_rope_suite(void) {
    Suite *s = suite_create("attn_rope");
    TCase *tc = tcase_create("gradcheck");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_rope_gradcheck, 0, N_ROPE);
    tcase_add_loop_test(tc, test_linear_rope_gradcheck, 0, N_LIN);
    tcase_add_test(tc, test_gradcheck_catches_broken_backward);
    suite_add_tcase(s, tc);

    tc = tcase_create("properties");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_rope_score_depends_on_offset_only);
    tcase_add_test(tc, test_xpos_is_rope_times_decay);
    tcase_add_loop_test(tc, test_linear_rope_matches_composition, 0, N_LIN + 8);
    suite_add_tcase(s, tc);

    tc = tcase_create("pytorch");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_rope_fixture_cases);
    tcase_add_loop_test(tc, test_rope_matches_pytorch, 0, N_ROPE + N_LIN);
    tcase_add_test(tc, test_rope_matches_pytorch_threaded);
    tcase_add_test(tc, test_rope_pytorch_catches_broken_backward);
    suite_add_tcase(s, tc);

    tc = tcase_create("module");
    tcase_add_test(tc, test_module_rotates_q_and_k);
    suite_add_tcase(s, tc);
    return s;
}
