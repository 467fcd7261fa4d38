/* test_bf16.c: every op and attention kernel under precision=bf16, against
 * its own fp32 result.
 *
 * Each gradient-check case (tests/op_cases.c, tests/layer_cases.c) runs
 * forward and backward on the same leaves: in fp32; twice more in fp32 with
 * every element of every product's inputs moved by bf16's unit roundoff
 * (x (1 + 2^-8 r), r uniform in [-1, 1]: gemm_set_jitter), which shows how
 * far rounding those inputs to bf16 can move each output and gradient,
 * cancellations included; and in bf16. The bf16 output and gradients must
 * lie within KERNEL_ROUNDING_SLACK times the larger move of the fp32 ones
 * (close_to_rounding, tests/test_util.h): bf16 rounds the same inputs, to
 * nearest, by at most that much each. And the rule itself: in bf16 no
 * product may reach OpenBLAS's sgemm but gemm's own small ones, on rounded
 * inputs (any other would run in fp32), and when the fp32 forward or
 * backward makes products, the bf16 one makes bf16 products in that same
 * phase, so a backward that forgot the rule fails. On a CPU without
 * AVX512-BF16 or AMX-BF16 the tests say why and pass. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/positions.h"
#include "attention/scoremap.h"
#include "attention/softmax_parts.h"
#include "attention/tiles.h"
#include "blas_stub.h"
#include "cases_positions.h"
#include "gemm.h"
#include "layer_cases.h"
#include "op_cases.h"
#include "rng.h"
#include "test_util.h"

/* What one run of a case gave. */
typedef struct {
    float *out, *grad[GC_MAX_IN];
    long n_out, n_in[GC_MAX_IN];
    double sgemm[2]; /* OpenBLAS multiply-adds, forward and backward */
    double small[2]; /* of them, gemm's small bf16 products' (on rounded inputs) */
    long bf16[2];    /* bf16 products, forward and backward */
} CaseRun;

static void case_run_free(CaseRun *r) {
    free(r->out);
    for (int k = 0; k < GC_MAX_IN; k++) free(r->grad[k]);
}

static float *copy_floats(const float *x, long n) {
    float *y = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (n) memcpy(y, x, sizeof(float) * (size_t)n);
    return y;
}

/* Leaves as gradcheck draws them, from seed. */
static void fill_leaves(const GradCase *c, Tensor **leaves, uint64_t seed) {
    Rng r;
    rng_seed(&r, seed);
    for (int k = 0; k < c->n_in; k++)
        for (long i = 0; i < leaves[k]->n; i++) {
            float x = rng_normal(&r);
            if (c->in[k].init == GC_NONZERO && fabsf(x) < 0.1f) x = x < 0 ? x - 0.1f : x + 0.1f;
            if (c->in[k].init == GC_POSITIVE) x = 0.5f + rng_uniform(&r);
            leaves[k]->data[i] = x;
        }
}

/* Forward, then backward seeded with a fixed random R, at precision p; in
 * fp32 with every product's inputs moved (gemm_set_jitter) when jitter_seed
 * is not 0. */
static void run_case(const GradCase *c, uint64_t seed, Precision p, uint64_t jitter_seed, CaseRun *res) {
    memset(res, 0, sizeof *res);
    Arena *outer = engine_arena_or_null();
    Arena arena;
    arena_init(&arena, 1 << 20);
    engine_set_arena(&arena);
    bool grad_was = grad_set(true);
    Tensor *leaves[GC_MAX_IN];
    for (int k = 0; k < c->n_in; k++) {
        leaves[k] = tensor_new(c->in[k].ndim, c->in[k].shape);
        leaves[k]->requires_grad = true;
    }
    fill_leaves(c, leaves, seed);
    Precision was = gemm_set_precision(p);
    if (jitter_seed) gemm_set_jitter(0x1p-8, jitter_seed);
    tape_reset();
    gemm_bf16_count_clear();
    blas_record_set(true);
    Tensor *out = c->build(leaves);
    res->sgemm[0] = blas_recorded_madds();
    res->small[0] = gemm_bf16_sgemm_madds();
    res->bf16[0] = gemm_bf16_calls();
    res->n_out = out->n;
    res->out = copy_floats(out->data, out->n);
    Rng r;
    rng_seed(&r, seed + 1);
    float *R = malloc(sizeof(float) * (size_t)out->n);
    rng_fill_normal(&r, R, out->n, 0.0f, 1.0f);
    gemm_bf16_count_clear();
    blas_record_set(true);
    backward_seeded(out, R);
    res->sgemm[1] = blas_recorded_madds();
    res->small[1] = gemm_bf16_sgemm_madds();
    res->bf16[1] = gemm_bf16_calls();
    blas_record_set(false);
    free(R);
    for (int k = 0; k < c->n_in; k++) {
        res->n_in[k] = leaves[k]->n;
        res->grad[k] = leaves[k]->grad ? copy_floats(leaves[k]->grad, leaves[k]->n) : calloc((size_t)leaves[k]->n, 4);
    }
    gemm_set_jitter(0, 0);
    gemm_set_precision(was);
    tape_reset();
    grad_set(grad_was);
    engine_set_arena(outer);
    arena_free(&arena);
}

/* The bf16 run of case c against its fp32 runs: false and the reason in msg. */
static bool case_holds(const GradCase *c, uint64_t seed, char *msg, int size) {
    CaseRun f, moved, moved2, b;
    run_case(c, seed, PRECISION_FP32, 0, &f);
    run_case(c, seed, PRECISION_FP32, seed * 2 + 1, &moved);
    run_case(c, seed, PRECISION_FP32, seed * 2 + 2, &moved2);
    run_case(c, seed, PRECISION_BF16, 0, &b);
    /* the larger move of the two, element by element */
    for (long i = 0; i < f.n_out; i++)
        if (fabsf(moved2.out[i] - f.out[i]) > fabsf(moved.out[i] - f.out[i])) moved.out[i] = moved2.out[i];
    for (int k = 0; k < c->n_in; k++)
        for (long i = 0; i < f.n_in[k]; i++)
            if (fabsf(moved2.grad[k][i] - f.grad[k][i]) > fabsf(moved.grad[k][i] - f.grad[k][i]))
                moved.grad[k][i] = moved2.grad[k][i];
    bool ok = true;
    static const char *const phase[2] = {"forward", "backward"};
    for (int ph = 0; ph < 2 && ok; ph++) {
        if (b.sgemm[ph] > b.small[ph]) {
            snprintf(msg, size, "%s: %s: %.0f multiply-adds went to OpenBLAS (fp32) under bf16", c->name, phase[ph],
                     b.sgemm[ph] - b.small[ph]);
            ok = false;
        } else if (f.sgemm[ph] > 0 && b.bf16[ph] == 0) {
            snprintf(msg, size, "%s: %s: products in fp32, none in bf16", c->name, phase[ph]);
            ok = false;
        }
    }
    char what[160];
    snprintf(what, sizeof what, "%s output", c->name);
    ok = ok && close_to_rounding(what, b.out, f.out, moved.out, f.out, f.n_out, KERNEL_ROUNDING_SLACK, msg, size);
    for (int k = 0; k < c->n_in && ok; k++) {
        snprintf(what, sizeof what, "%s gradient of input %d", c->name, k);
        ok = close_to_rounding(what, b.grad[k], f.grad[k], moved.grad[k], f.grad[k], f.n_in[k], KERNEL_ROUNDING_SLACK,
                               msg, size);
    }
    case_run_free(&f);
    case_run_free(&moved);
    case_run_free(&moved2);
    case_run_free(&b);
    return ok;
}

static bool bf16_here(void) { return bf16_runs_here("test_bf16"); }

START_TEST(test_bf16_op_cases) {
    if (!bf16_here()) return;
    char msg[600];
    ck_assert_msg(case_holds(&op_cases[_i], 4242 + (uint64_t)_i, msg, sizeof msg), "%s", msg);
}
END_TEST

START_TEST(test_bf16_kernel_cases) {
    if (!bf16_here()) return;
    char msg[600];
    ck_assert_msg(case_holds(&kernel_cases[_i].gc, 5151 + (uint64_t)_i, msg, sizeof msg), "%s", msg);
}
END_TEST

/* The check catches a product that stays fp32: with bf16 off inside the
 * case (as a kernel that called OpenBLAS directly would be), it fails. */
static Tensor *fp32_inside(Tensor **in) {
    Precision was = gemm_set_precision(PRECISION_FP32);
    Tensor *out = op_matmul(in[0], in[1], false, false);
    gemm_set_precision(was);
    return out;
}

/* ... and a backward that makes its products in fp32 while the forward is
 * bf16: matmul's backward, run with the precision switched off. */
static void (*real_matmul_backward)(Node *);
static void matmul_backward_fp32(Node *n) {
    Precision was = gemm_set_precision(PRECISION_FP32);
    real_matmul_backward(n);
    gemm_set_precision(was);
}

START_TEST(test_bf16_check_catches_fp32) {
    if (!bf16_here()) return;
    char msg[600];
    GradCase c = {"fp32 inside", 2, {{2, {5, 7}, GC_NORMAL}, {2, {7, 3}, GC_NORMAL}}, fp32_inside};
    ck_assert(!case_holds(&c, 1, msg, sizeof msg));
    ck_assert_msg(strstr(msg, "forward") && strstr(msg, "OpenBLAS"), "%s", msg);
    GradCase mm = {"matmul in bf16", 2, {{2, {5, 7}, GC_NORMAL}, {2, {7, 3}, GC_NORMAL}}, NULL};
    mm.build = NULL;
    for (int i = 0; i < n_op_cases && !mm.build; i++)
        if (!strncmp(op_cases[i].name, "matmul", 6)) mm = op_cases[i];
    ck_assert(mm.build);
    ck_assert_msg(case_holds(&mm, 2, msg, sizeof msg), "%s", msg);
    real_matmul_backward = op_defs[OP_MATMUL].backward;
    op_defs[OP_MATMUL].backward = matmul_backward_fp32;
    bool held = case_holds(&mm, 2, msg, sizeof msg);
    op_defs[OP_MATMUL].backward = real_matmul_backward;
    ck_assert(!held);
    ck_assert_msg(strstr(msg, "backward") && strstr(msg, "OpenBLAS"), "%s", msg);
}
END_TEST

/* The kernels that form scores run each block over tiles of 256 keys in bf16
 * (layers/attention/tiles.c): at T = 600 a block spans up to three, so the
 * softmax's running max and sum carry across tiles, and masks and biases are
 * cut at tile edges. The softmax kernel, and each score-map kernel (every
 * kernel whose ops list scoremap_op, found through the registry: "map"
 * cases), each causal, bidirectional, with a window, a score bias and log-n. */
enum { LONG_T = 600 };
/* The score-map kernel the "map" cases run, set before each. */
static const AttnKernel *map_kernel;
static Tensor *long_call(Tensor **in, const AttnKernel *kern, bool causal, int pos, int window, bool logn) {
    ModelConfig m;
    AttnCall c = positions_call(&m, causal, pos, window, false, logn);
    c.B = 1;
    c.T = LONG_T;
    return kern->forward(&c, in[0], in[1], in[2]);
}
static Tensor *long_causal(Tensor **in) {
    return long_call(in, &attn_kernel_softmax, true, pos_find("none"), 0, false);
}
static Tensor *long_bidirectional(Tensor **in) {
    return long_call(in, &attn_kernel_softmax, false, pos_find("none"), 0, false);
}
static Tensor *long_alibi_window(Tensor **in) {
    return long_call(in, &attn_kernel_softmax, true, pos_find("alibi"), 300, false);
}
static Tensor *long_alibi_and_logn(Tensor **in) {
    return long_call(in, &attn_kernel_softmax, false, pos_find("alibi"), 0, true);
}
static Tensor *long_map_causal(Tensor **in) { return long_call(in, map_kernel, true, pos_find("none"), 0, false); }
static Tensor *long_map_bidirectional(Tensor **in) {
    return long_call(in, map_kernel, false, pos_find("none"), 0, false);
}
static Tensor *long_map_window(Tensor **in) { return long_call(in, map_kernel, true, pos_find("none"), 300, false); }
static Tensor *long_map_alibi(Tensor **in) { return long_call(in, map_kernel, true, pos_find("alibi"), 0, false); }
static Tensor *long_map_logn(Tensor **in) { return long_call(in, map_kernel, false, pos_find("none"), 0, true); }

/* Talking-Heads (talking.c): all heads of a block in tiles of keys; leaves
 * q, k, v, then the mixing matrices (not the identity: every mix counts). */
static Tensor *long_talking(Tensor **in, int talking, bool causal) {
    ModelConfig m;
    AttnCall c = kernel_case_call(&m, &attn_kernel_softmax, causal);
    softmax_opts(&m)->talking_heads = talking;
    c.B = 1;
    c.T = LONG_T;
    c.params[0] = in[3];
    if (talking == TALKING_BOTH) c.params[1] = in[4];
    return kernel_by_name("softmax")->forward(&c, in[0], in[1], in[2]);
}
static Tensor *long_talking_pre(Tensor **in) { return long_talking(in, TALKING_PRE, true); }
static Tensor *long_talking_post(Tensor **in) { return long_talking(in, TALKING_POST, false); }
static Tensor *long_talking_both_causal(Tensor **in) { return long_talking(in, TALKING_BOTH, true); }
static Tensor *long_talking_both_bidirectional(Tensor **in) { return long_talking(in, TALKING_BOTH, false); }

#define LONG_QKV {{4, {1, KC_H, LONG_T, KC_DK}, GC_NORMAL}, {4, {1, KC_H, LONG_T, KC_DK}, GC_NORMAL}, \
                  {4, {1, KC_H, LONG_T, KC_DV}, GC_NORMAL}}
#define LONG_W {2, {KC_H, KC_H}, GC_NORMAL}
#define LONG_QKVW {{4, {1, KC_H, LONG_T, KC_DK}, GC_NORMAL}, {4, {1, KC_H, LONG_T, KC_DK}, GC_NORMAL}, \
                   {4, {1, KC_H, LONG_T, KC_DV}, GC_NORMAL}, LONG_W, LONG_W}
static const GradCase long_cases[] = {
    {"softmax causal T 600", 3, LONG_QKV, long_causal},
    {"softmax bidirectional T 600", 3, LONG_QKV, long_bidirectional},
    {"softmax causal alibi window 300 T 600", 3, LONG_QKV, long_alibi_window},
    {"softmax bidirectional alibi logn T 600", 3, LONG_QKV, long_alibi_and_logn},
    {"map causal T 600", 3, LONG_QKV, long_map_causal},
    {"map bidirectional T 600", 3, LONG_QKV, long_map_bidirectional},
    {"map causal window 300 T 600", 3, LONG_QKV, long_map_window},
    {"map causal alibi T 600", 3, LONG_QKV, long_map_alibi},
    {"map bidirectional logn T 600", 3, LONG_QKV, long_map_logn},
    {"talking pre causal T 600", 4, LONG_QKVW, long_talking_pre},
    {"talking post bidirectional T 600", 4, LONG_QKVW, long_talking_post},
    {"talking both causal T 600", 5, LONG_QKVW, long_talking_both_causal},
    {"talking both bidirectional T 600", 5, LONG_QKVW, long_talking_both_bidirectional},
};
enum { N_LONG = (int)(sizeof long_cases / sizeof *long_cases) };

/* Whether kernel k is a score-map kernel (lists scoremap_op). */
static bool is_map_kernel(const AttnKernel *k) {
    for (int i = 0; k->ops[i]; i++)
        if (k->ops[i] == &scoremap_op) return true;
    return false;
}

/* Case c against the error analysis (with the tiles' fault f, which must
 * then fail it): once, or for a "map" case once per score-map kernel (none
 * registered: nothing to check). */
static void long_case_check(const GradCase *c, uint64_t seed, AttnTileFault f) {
    char msg[600], name[160];
    bool map = !strncmp(c->name, "map ", 4);
    for (int i = 0; i < (map ? attn_kernel_count() : 1); i++) {
        if (map && !is_map_kernel(attn_kernels[i])) continue;
        map_kernel = map ? attn_kernels[i] : NULL;
        GradCase k = *c;
        snprintf(name, sizeof name, "%s%s%s", c->name, map ? " attn=" : "", map ? map_kernel->name : "");
        k.name = name;
        ck_assert_msg(case_holds(&k, seed, msg, sizeof msg), "%s", msg);
        if (f == ATTN_TILE_FAULT_NONE) continue;
        attn_tile_fault = f;
        bool held = case_holds(&k, seed, msg, sizeof msg);
        attn_tile_fault = ATTN_TILE_FAULT_NONE;
        ck_assert_msg(!held, "%s: the tiles' fault %d passed", k.name, (int)f);
    }
}

START_TEST(test_bf16_key_tiles) {
    if (!bf16_here()) return;
    long_case_check(&long_cases[_i], 7070 + (uint64_t)_i, ATTN_TILE_FAULT_NONE);
}
END_TEST

/* The long case named `name`. */
static const GradCase *long_case(const char *name) {
    for (int i = 0; i < N_LONG; i++)
        if (!strcmp(long_cases[i].name, name)) return &long_cases[i];
    ck_abort_msg("no long case %s", name);
    return NULL;
}

/* An accumulator left unscaled when a row's max grows, or backward without
 * the softmax's row sum, fails the check (softmax_op.c's faults). */
START_TEST(test_bf16_key_tiles_catch) {
    if (!bf16_here()) return;
    char msg[600];
    for (int f = 1; f <= 2; f++) {
        attn_flash_fault = f;
        bool held = case_holds(&long_cases[0], 7070, msg, sizeof msg);
        attn_flash_fault = 0;
        ck_assert_msg(!held, "the key tiles' fault %d passed", f);
    }
}
END_TEST

/* A wrong tile of the shared piece (tiles.c) fails the check in each kernel
 * that uses it (each score-map kernel for the "map" cases): a mask offset by
 * one tile (causal cases), a tile's bias
 * skipped (ALiBi), P V made in fp32 without rounding P and V. (P rounded
 * toward zero instead of to nearest lies inside the error analysis, element
 * by element: test_bf16_p_unbiased catches it by its mean.) */
static const struct {
    AttnTileFault fault;
    const char *name;
} tile_faults[] = {
    {ATTN_TILE_FAULT_MASK_SHIFT, "softmax causal T 600"},
    {ATTN_TILE_FAULT_MASK_SHIFT, "map causal T 600"},
    {ATTN_TILE_FAULT_MASK_SHIFT, "talking both causal T 600"},
    {ATTN_TILE_FAULT_NO_BIAS, "softmax causal alibi window 300 T 600"},
    {ATTN_TILE_FAULT_NO_BIAS, "map causal alibi T 600"},
    {ATTN_TILE_FAULT_FP32_PV, "softmax causal T 600"},
    {ATTN_TILE_FAULT_FP32_PV, "map causal T 600"},
};

START_TEST(test_bf16_tile_faults_caught) {
    if (!bf16_here()) return;
    long_case_check(long_case(tile_faults[_i].name), 7070, tile_faults[_i].fault);
}
END_TEST

/* Rounding P to nearest is unbiased, where rounding toward zero lowers
 * each value by 2^-9 of itself on average (its relative error lies in
 * (-2^-8, 0], to nearest's [-2^-9, 2^-9]), which the element-wise error
 * analysis cannot tell apart. With V all ones (exact in bf16) each output
 * is a weighted mean of P's rounded values (softmax, Talking-Heads mixing
 * logits before it: rows of P sum to 1) or their sum (score maps), so the
 * bf16 output's mean relative error against fp32's, over 600 rows of 4
 * heads, is P's rounding bias plus noise that averages out: to nearest it
 * must stay below 2^-11, and toward zero (ATTN_TILE_FAULT_P_TOWARD_ZERO) it
 * must not. */
static Tensor *(*ones_of)(Tensor **);
static Tensor *v_ones(Tensor **in) {
    for (long i = 0; i < in[2]->n; i++) in[2]->data[i] = 1.0f;
    return ones_of(in);
}

static double p_bias(Tensor *(*build)(Tensor **), int n_in, AttnTileFault f) {
    GradCase c = {"V ones", n_in, LONG_QKVW, v_ones};
    ones_of = build;
    CaseRun r32, r16;
    run_case(&c, 9191, PRECISION_FP32, 0, &r32);
    attn_tile_fault = f;
    run_case(&c, 9191, PRECISION_BF16, 0, &r16);
    attn_tile_fault = ATTN_TILE_FAULT_NONE;
    double s = 0;
    for (long i = 0; i < r32.n_out; i++) s += (r16.out[i] - r32.out[i]) / r32.out[i];
    long n = r32.n_out;
    case_run_free(&r32);
    case_run_free(&r16);
    return s / (double)n;
}

/* P rounded to nearest passes, toward zero fails. */
static void check_unbiased(const char *name, Tensor *(*build)(Tensor **), int n_in) {
    double near = p_bias(build, n_in, ATTN_TILE_FAULT_NONE), zero = p_bias(build, n_in, ATTN_TILE_FAULT_P_TOWARD_ZERO);
    ck_assert_msg(fabs(near) < 0x1p-11, "%s: P rounded to nearest, mean relative error %.3g", name, near);
    ck_assert_msg(fabs(zero) >= 0x1p-11, "%s: P rounded toward zero passed (mean relative error %.3g)", name, zero);
}

START_TEST(test_bf16_p_unbiased) {
    if (!bf16_here()) return;
    check_unbiased("softmax", long_causal, 3);
    check_unbiased("talking pre", long_talking_pre, 4);
    int maps = 0;
    for (int k = 0; k < attn_kernel_count(); k++)
        if (is_map_kernel(attn_kernels[k])) {
            map_kernel = attn_kernels[k], maps++;
            check_unbiased(map_kernel->name, long_map_causal, 3);
        }
    ck_assert_msg(maps > 0, "no score-map kernel registered");
}
END_TEST

Suite *bf16_suite(void) {
    Suite *s = suite_create("bf16");
    TCase *tc = tcase_create("against fp32");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_bf16_op_cases, 0, n_op_cases);
    tcase_add_loop_test(tc, test_bf16_kernel_cases, 0, n_kernel_cases);
    tcase_add_test(tc, test_bf16_check_catches_fp32);
    tcase_add_loop_test(tc, test_bf16_key_tiles, 0, N_LONG);
    tcase_add_test(tc, test_bf16_key_tiles_catch);
    tcase_add_loop_test(tc, test_bf16_tile_faults_caught, 0, (int)(sizeof tile_faults / sizeof *tile_faults));
    tcase_add_test(tc, test_bf16_p_unbiased);
    suite_add_tcase(s, tc);
    return s;
}
