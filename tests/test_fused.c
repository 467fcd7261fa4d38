/* test_fused.c: gemm_ex's epilogues (core/gemm.h) and the bf16 MLP that uses
 * them (layers/mlp.c).
 *
 * - gemm_ex in gemm's own kernel against its unfused composition, bit for
 *   bit (the order of every sum is the same), over shapes with ragged
 *   tiles, a K past one block, every transpose, and operands stored in bf16.
 * - gemm_ex against a reference the test composes from gemm(), op_gelu's
 *   row functions and rounding to bf16, bit for bit, on both paths; each
 *   deliberate fault of gemm_set_fault (the bias added twice, GELU's
 *   gradient taken at the wrong tensor, the pre-activation not rounded)
 *   fails that comparison.
 * - op_mlp in bf16 against the bf16 rule, composed in the test: the kept h
 *   is x W1^T + b1 rounded to bf16, GELU and its gradient read it, and every
 *   product reads the bf16 values it would round; output and every
 *   gradient bit for bit. An fp32 h kept by mistake (mlp_keep_h32) and each
 *   fault fail it. The op keeps half of fp32's memory for h.
 * - op_linear in bf16, whose backward rounds dy once for both products,
 *   against gemm() on the fp32 values, bit for bit.
 * Without AVX512-BF16 the bf16 parts say why they skip; the fp32
 * composition is checked everywhere. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "layers.h"
#include "ops.h"
#include "rng.h"
#include "test_util.h"

/* uniform on [-2, 2): the tall shape's inputs are many, and normal draws
 * took most of the suite's time */
static void fill(float *x, long n, Rng *r) {
    for (long i = 0; i < n; i++) x[i] = 4.0f * rng_uniform(r) - 2.0f;
}

static void round16(uint16_t *o, const float *x, long n) {
    for (long i = 0; i < n; i++) o[i] = bf16_from_float(x[i]);
}

static void widen16(float *o, const uint16_t *x, long n) {
    for (long i = 0; i < n; i++) o[i] = bf16_to_float(x[i]);
}

/* Which epilogue a case runs. */
enum { EP_NONE, EP_BIAS, EP_BIAS_GELU, EP_BIAS_GELU_PRE16, EP_SLOPE_SUMS, EP_COUNT };
static const char *const ep_names[EP_COUNT] = {"none", "bias", "bias+gelu", "bias+gelu(pre16)+out16",
                                                "slope16+colsum+out16"};

/* One product's inputs and what it wrote. */
typedef struct {
    int ta, tb, M, N, K, a16, b16, ep;
    float *A, *B, *bias, *C0; /* A, B as floats (bf16 values where a16/b16) */
    uint16_t *A16, *B16, *slope;
    /* results */
    float *C, *colsum;
    uint16_t *pre, *out;
} Case;

static long a_len(const Case *c) { return (long)c->M * c->K; }
static long b_len(const Case *c) { return (long)c->K * c->N; }

static void case_make(Case *c, int ta, int tb, int M, int N, int K, int a16, int b16, int ep, uint64_t seed) {
    memset(c, 0, sizeof *c);
    *c = (Case){.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .a16 = a16, .b16 = b16, .ep = ep};
    Rng r;
    rng_seed(&r, seed);
    c->A = malloc(sizeof(float) * a_len(c));
    c->B = malloc(sizeof(float) * b_len(c));
    c->bias = malloc(sizeof(float) * N);
    c->C0 = malloc(sizeof(float) * (size_t)M * N);
    c->A16 = malloc(2 * a_len(c));
    c->B16 = malloc(2 * b_len(c));
    c->slope = malloc(2 * (size_t)M * N);
    fill(c->A, a_len(c), &r);
    fill(c->B, b_len(c), &r);
    fill(c->bias, N, &r);
    fill(c->C0, (long)M * N, &r);
    float *s = malloc(sizeof(float) * (size_t)M * N);
    fill(s, (long)M * N, &r);
    round16(c->slope, s, (long)M * N);
    free(s);
    round16(c->A16, c->A, a_len(c));
    round16(c->B16, c->B, b_len(c));
    if (a16) widen16(c->A, c->A16, a_len(c));
    if (b16) widen16(c->B, c->B16, b_len(c));
    c->C = malloc(sizeof(float) * (size_t)M * N);
    c->colsum = malloc(sizeof(float) * N);
    c->pre = malloc(2 * (size_t)M * N);
    c->out = malloc(2 * (size_t)M * N);
}

static void case_free(Case *c) {
    free(c->A), free(c->B), free(c->bias), free(c->C0), free(c->A16), free(c->B16), free(c->slope);
    free(c->C), free(c->colsum), free(c->pre), free(c->out);
}

static void results_clear(Case *c) {
    memcpy(c->C, c->C0, sizeof(float) * (size_t)c->M * c->N);
    for (int j = 0; j < c->N; j++) c->colsum[j] = 0.25f * (float)j;
    memset(c->pre, 0xee, 2 * (size_t)c->M * c->N);
    memset(c->out, 0xee, 2 * (size_t)c->M * c->N);
}

/* The case through gemm_ex. */
static void run_ex(Case *c) {
    results_clear(c);
    int lda = c->ta ? c->M : c->K, ldb = c->tb ? c->K : c->N, N = c->N;
    GemmEpilogue e = {0};
    float beta = 0.5f;
    if (c->ep == EP_BIAS || c->ep == EP_BIAS_GELU || c->ep == EP_BIAS_GELU_PRE16) e.bias = c->bias, beta = 0;
    if (c->ep == EP_BIAS_GELU || c->ep == EP_BIAS_GELU_PRE16) e.gelu = true;
    if (c->ep == EP_BIAS_GELU_PRE16) e.pre16 = c->pre, e.ld_pre = N, e.out16 = c->out, e.ld_out = N;
    if (c->ep == EP_SLOPE_SUMS) e.slope16 = c->slope, e.ld_slope = N, e.colsum = c->colsum, e.out16 = c->out,
                                e.ld_out = N, beta = 0;
    const void *A = c->a16 ? (const void *)c->A16 : c->A, *B = c->b16 ? (const void *)c->B16 : c->B;
    float *C = c->ep == EP_NONE || c->ep == EP_BIAS || c->ep == EP_BIAS_GELU ? c->C : NULL;
    if (c->ep == EP_BIAS_GELU_PRE16 && c->K > 1024) C = c->C; /* a long K needs C for its blocks: scratch */
    gemm_ex(c->ta, c->tb, c->M, c->N, c->K, 1.0f, A, c->a16, lda, B, c->b16, ldb, beta, C, N,
            c->ep == EP_NONE ? NULL : &e);
}

/* The case composed from gemm(), op_gelu's row functions and rounding, into
 * ref (same layout as c's results). */
static void run_reference(const Case *c, Case *ref) {
    int M = c->M, N = c->N, lda = c->ta ? c->M : c->K, ldb = c->tb ? c->K : c->N;
    long mn = (long)M * N;
    results_clear(ref);
    float *C = ref->C, beta = 0.5f;
    if (c->ep == EP_BIAS || c->ep == EP_BIAS_GELU || c->ep == EP_BIAS_GELU_PRE16) {
        for (int i = 0; i < M; i++) memcpy(C + (long)i * N, c->bias, sizeof(float) * N);
        beta = 1;
    }
    if (c->ep == EP_SLOPE_SUMS) beta = 0;
    gemm(c->ta, c->tb, M, N, c->K, 1.0f, c->A, lda, c->B, ldb, beta, C, N);
    float *x = malloc(sizeof(float) * mn);
    if (c->ep == EP_BIAS_GELU_PRE16) {
        round16(ref->pre, C, mn);
        widen16(x, ref->pre, mn);
        gelu_rows(x, C, mn);
    } else if (c->ep == EP_BIAS_GELU) {
        memcpy(x, C, sizeof(float) * mn);
        gelu_rows(x, C, mn);
    } else if (c->ep == EP_SLOPE_SUMS) {
        widen16(x, c->slope, mn);
        gelu_grad_rows(x, C, C, mn);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) ref->colsum[j] += C[(long)i * N + j];
    }
    if (c->ep == EP_BIAS_GELU_PRE16 || c->ep == EP_SLOPE_SUMS) round16(ref->out, C, mn);
    free(x);
}

/* Whether c's results are ref's bit for bit (only what the epilogue writes);
 * the first difference in msg. */
static bool same_results(const Case *c, const Case *ref, char *msg, int size) {
    long mn = (long)c->M * c->N;
    bool out16 = c->ep == EP_SLOPE_SUMS || c->ep == EP_BIAS_GELU_PRE16; /* C then holds no result */
    for (long i = 0; i < mn; i++) {
        if (!out16 && memcmp(&c->C[i], &ref->C[i], 4)) {
            snprintf(msg, size, "C[%ld] %.9g, want %.9g", i, c->C[i], ref->C[i]);
            return false;
        }
        if (out16 && c->out[i] != ref->out[i]) {
            snprintf(msg, size, "out16[%ld] %#x, want %#x", i, c->out[i], ref->out[i]);
            return false;
        }
        if (c->ep == EP_BIAS_GELU_PRE16 && c->pre[i] != ref->pre[i]) {
            snprintf(msg, size, "pre16[%ld] %#x, want %#x", i, c->pre[i], ref->pre[i]);
            return false;
        }
    }
    if (c->ep == EP_SLOPE_SUMS)
        for (int j = 0; j < c->N; j++)
            if (memcmp(&c->colsum[j], &ref->colsum[j], 4)) {
                snprintf(msg, size, "colsum[%d] %.9g, want %.9g", j, c->colsum[j], ref->colsum[j]);
                return false;
            }
    return true;
}

/* M, N, K, and whether the product is made to reach oneDNN (its K rule
 * lowered): there gemm_ex hands its bf16-stored operands to oneDNN as they
 * are (K 1100: sums oneDNN may split). 272 x 72 x 1000: on AMX tiles, op(A) in chunks of rows, each
 * with its epilogue's rows. */
static const int shapes[][4] = {{37, 45, 19, 0},   {64, 96, 130, 0},  {8, 32, 2, 0},      {24, 33, 2100, 0},
                                {272, 72, 1000, 0}, {32, 80, 1100, 1}, {64, 96, 384, 1}};
#define N_SHAPES (int)(sizeof shapes / sizeof *shapes)
#define DNNL_SHAPE_MIN_K 256

/* Every case: shape x transposes x bf16 operands x epilogue. fn(c, i) is
 * called on each with a fresh case; returns false to stop. */
static void each_case(bool (*fn)(Case *c, void *ctx), void *ctx) {
    uint64_t seed = 1;
    for (int s = 0; s < N_SHAPES; s++)
        for (int t = 0; t < 4; t++)
            for (int h = 0; h < 4; h++)
                for (int ep = 0; ep < EP_COUNT; ep++) {
                    Case c;
                    case_make(&c, t & 1, t >> 1, shapes[s][0], shapes[s][1], shapes[s][2], h & 1, h >> 1, ep, seed++);
                    int min_k = shapes[s][3] ? gemm_bf16_set_dnnl_min_k(DNNL_SHAPE_MIN_K) : 0;
                    bool go = fn(&c, ctx);
                    if (shapes[s][3]) gemm_bf16_set_dnnl_min_k(min_k);
                    case_free(&c);
                    if (!go) return;
                }
}

static void describe(const Case *c, char *buf, int size) {
    snprintf(buf, size, "%dx%dx%d ta %d tb %d a16 %d b16 %d epilogue %s", c->M, c->N, c->K, c->ta, c->tb, c->a16,
             c->b16, ep_names[c->ep]);
}

typedef struct {
    bool ok;
    char msg[400];
} Verdict;

/* c with result buffers of its own (inputs shared; other_free frees them). */
static Case other_results(const Case *c) {
    Case o = *c;
    o.C = malloc(sizeof(float) * (size_t)c->M * c->N), o.colsum = malloc(sizeof(float) * c->N);
    o.pre = malloc(2 * (size_t)c->M * c->N), o.out = malloc(2 * (size_t)c->M * c->N);
    return o;
}

static void other_free(Case *o) { free(o->C), free(o->colsum), free(o->pre), free(o->out); }

/* Whether c's results are o's, bit for bit; if not, v says so, headed by how. */
static bool judge(Verdict *v, const Case *c, const Case *o, const char *how) {
    char why[200], what[150];
    if (!same_results(c, o, why, sizeof why)) {
        describe(c, what, sizeof what);
        snprintf(v->msg, sizeof v->msg, "%s, %s: %s", how, what, why);
        v->ok = false;
    }
    return v->ok;
}

/* gemm_ex in the kernel against gemm_ex unfused. */
static bool fused_vs_unfused(Case *c, void *ctx) {
    Case u = other_results(c);
    run_ex(c);
    bool was = gemm_set_unfused(true);
    run_ex(&u);
    gemm_set_unfused(was);
    bool ok = judge(ctx, c, &u, "fused against unfused");
    other_free(&u);
    return ok;
}

START_TEST(test_fused_matches_unfused) {
    if (!bf16_runs_here("test_fused")) return;
    Precision was = gemm_set_precision(PRECISION_BF16);
    Verdict v = {true, ""};
    each_case(fused_vs_unfused, &v);
    gemm_set_precision(was);
    ck_assert_msg(v.ok, "%s", v.msg);
}
END_TEST

/* gemm_ex against the test's own composition. */
static bool against_reference(Case *c, void *ctx) {
    Case ref = other_results(c);
    run_ex(c);
    run_reference(c, &ref);
    bool ok = judge(ctx, c, &ref, "gemm_ex against its reference");
    other_free(&ref);
    return ok;
}

static bool all_match_reference(Precision p, bool unfused, char *msg, int size) {
    Precision was = gemm_set_precision(p);
    bool uwas = gemm_set_unfused(unfused);
    Verdict v = {true, ""};
    each_case(against_reference, &v);
    gemm_set_unfused(uwas);
    gemm_set_precision(was);
    snprintf(msg, size, "%s", v.msg);
    return v.ok;
}

START_TEST(test_fused_matches_reference) {
    char msg[400];
    /* fp32: the unfused composition, on any CPU */
    ck_assert_msg(all_match_reference(PRECISION_FP32, false, msg, sizeof msg), "fp32: %s", msg);
    if (!bf16_runs_here("test_fused")) return;
    ck_assert_msg(all_match_reference(PRECISION_BF16, false, msg, sizeof msg), "bf16 fused: %s", msg);
    ck_assert_msg(all_match_reference(PRECISION_BF16, true, msg, sizeof msg), "bf16 unfused: %s", msg);
}
END_TEST

/* The oneDNN shape above does reach oneDNN, its stored operands unwidened. */
START_TEST(test_fused_dnnl_shape_reaches_dnnl) {
    if (!bf16_runs_here("test_fused")) return;
    const int *sh = shapes[N_SHAPES - 1];
    ck_assert_int_eq(sh[3], 1);
    Precision was = gemm_set_precision(PRECISION_BF16);
    int min_k = gemm_bf16_set_dnnl_min_k(DNNL_SHAPE_MIN_K);
    ck_assert(gemm_bf16_to_dnnl(sh[0], sh[1], sh[2]));
    Case c;
    case_make(&c, 0, 1, sh[0], sh[1], sh[2], 1, 1, EP_BIAS_GELU_PRE16, 7);
    gemm_bf16_count_clear();
    run_ex(&c);
    double madds = (double)sh[0] * sh[1] * sh[2];
    ck_assert_msg(gemm_bf16_madds() == madds && gemm_bf16_sgemm_madds() == 0,
                  "%g multiply-adds in bf16, %g of them in gemm's own kernel; want %g in oneDNN", gemm_bf16_madds(),
                  gemm_bf16_sgemm_madds(), madds);
    case_free(&c);
    gemm_bf16_set_dnnl_min_k(min_k);
    gemm_set_precision(was);
}
END_TEST

/* Each wrong epilogue fails the comparison, on both paths. */
START_TEST(test_fused_faults_caught) {
    static const GemmFault faults[] = {GEMM_FAULT_BIAS_TWICE, GEMM_FAULT_SLOPE_OF_OUT, GEMM_FAULT_NO_PRE_ROUND};
    static const char *const names[] = {"bias twice", "GELU's gradient at the product", "pre-activation unrounded"};
    bool bf16 = bf16_runs_here("test_fused");
    for (int f = 0; f < 3; f++)
        for (int path = 0; path < (bf16 ? 3 : 1); path++) {
            char msg[400];
            GemmFault was = gemm_set_fault(faults[f]);
            bool ok = all_match_reference(path ? PRECISION_BF16 : PRECISION_FP32, path == 2, msg, sizeof msg);
            gemm_set_fault(was);
            ck_assert_msg(!ok, "%s passed (path %d)", names[f], path);
        }
}
END_TEST

/* ---- the MLP in bf16 ---------------------------------------------------- */

enum { MB = 2, MT = 12, MD = 16, MH = 40, MROWS = MB * MT };

typedef struct {
    float out[MROWS * MD], dx[MROWS * MD], dw1[MH * MD], db1[MH], dw2[MD * MH];
    size_t saved_bytes;
} MlpRun;

static void mlp_inputs(float *x, float *w1, float *b1, float *w2, float *b2, float *R) {
    Rng r;
    rng_seed(&r, 99);
    fill(x, MROWS * MD, &r);
    fill(w1, MH * MD, &r);
    fill(b1, MH, &r);
    fill(w2, MD * MH, &r);
    fill(b2, MD, &r);
    fill(R, MROWS * MD, &r);
    for (int i = 0; i < MH * MD; i++) w1[i] *= 0.5f, w2[i] *= 0.3f;
}

/* An op's run in the test: its own arena and tape, gradients on (the
 * previous setting returned for op_end). */
static bool op_begin(Arena *a) {
    arena_init(a, 1 << 20);
    engine_set_arena(a);
    bool gwas = grad_set(true);
    tape_reset();
    return gwas;
}

static void op_end(Arena *a, bool gwas) {
    tape_reset();
    grad_set(gwas);
    engine_set_arena(NULL);
    arena_free(a);
}

/* holds() on gemm's fused path, then on the unfused composition (oneDNN's
 * and other CPUs' route). */
static void assert_both_routes(bool (*holds)(char *, int)) {
    char msg[300];
    ck_assert_msg(holds(msg, sizeof msg), "%s", msg);
    bool uwas = gemm_set_unfused(true);
    bool ok = holds(msg, sizeof msg);
    gemm_set_unfused(uwas);
    ck_assert_msg(ok, "unfused: %s", msg);
}

/* op_mlp in bf16, backward seeded with R. */
static void mlp_op_run(MlpRun *res) {
    static float x[MROWS * MD], w1[MH * MD], b1[MH], w2[MD * MH], b2[MD], R[MROWS * MD];
    mlp_inputs(x, w1, b1, w2, b2, R);
    Arena a;
    bool gwas = op_begin(&a);
    Tensor *t[5];
    const float *v[5] = {x, w1, b1, w2, b2};
    int shapes5[5][3] = {{MB, MT, MD}, {MH, MD}, {MH}, {MD, MH}, {MD}}, nd[5] = {3, 2, 1, 2, 1};
    for (int k = 0; k < 5; k++) {
        t[k] = tensor_new(nd[k], shapes5[k]);
        memcpy(t[k]->data, v[k], sizeof(float) * t[k]->n);
        t[k]->requires_grad = true;
    }
    Tensor *y = op_mlp(t[0], t[1], t[2], t[3], t[4]);
    res->saved_bytes = sizeof(float) * (size_t)y->producer->saved_n;
    memcpy(res->out, y->data, sizeof res->out);
    backward_seeded(y, R);
    memcpy(res->dx, t[0]->grad, sizeof res->dx);
    memcpy(res->dw1, t[1]->grad, sizeof res->dw1);
    memcpy(res->db1, t[2]->grad, sizeof res->db1);
    memcpy(res->dw2, t[3]->grad, sizeof res->dw2);
    op_end(&a, gwas);
}

/* The bf16 rule composed here: gemm() in bf16, h rounded to bf16, GELU and
 * its gradient at the rounded h, g and dh rounded where products read them. */
static void mlp_rule(MlpRun *res) {
    static float x[MROWS * MD], w1[MH * MD], b1[MH], w2[MD * MH], b2[MD], R[MROWS * MD];
    static float h[MROWS * MH], g[MROWS * MH], dg[MROWS * MH];
    static uint16_t h16[MROWS * MH], tmp16[MROWS * MH];
    mlp_inputs(x, w1, b1, w2, b2, R);
    for (int i = 0; i < MROWS; i++) memcpy(h + i * MH, b1, sizeof b1);
    gemm(false, true, MROWS, MH, MD, 1, x, MD, w1, MD, 1, h, MH);
    round16(h16, h, MROWS * MH);
    widen16(h, h16, MROWS * MH); /* h as kept */
    gelu_rows(h, g, MROWS * MH);
    round16(tmp16, g, MROWS * MH);
    widen16(g, tmp16, MROWS * MH);
    for (int i = 0; i < MROWS; i++) memcpy(res->out + i * MD, b2, sizeof b2);
    gemm(false, true, MROWS, MD, MH, 1, g, MH, w2, MH, 1, res->out, MD);
    memset(res->dw2, 0, sizeof res->dw2);
    gemm(true, false, MD, MH, MROWS, 1, R, MD, g, MH, 1, res->dw2, MH);
    gemm(false, false, MROWS, MH, MD, 1, R, MD, w2, MH, 0, dg, MH);
    gelu_grad_rows(h, dg, dg, MROWS * MH);
    memset(res->db1, 0, sizeof res->db1);
    for (int i = 0; i < MROWS; i++)
        for (int j = 0; j < MH; j++) res->db1[j] += dg[i * MH + j];
    round16(tmp16, dg, MROWS * MH);
    widen16(dg, tmp16, MROWS * MH);
    memset(res->dx, 0, sizeof res->dx);
    memset(res->dw1, 0, sizeof res->dw1);
    gemm(false, false, MROWS, MD, MH, 1, dg, MH, w1, MD, 1, res->dx, MD);
    gemm(true, false, MH, MD, MROWS, 1, dg, MH, x, MD, 1, res->dw1, MD);
}

static bool same_floats(const char *what, const float *a, const float *b, int n, char *msg, int size) {
    for (int i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], 4)) {
            snprintf(msg, size, "%s[%d] %.9g, the bf16 rule gives %.9g", what, i, a[i], b[i]);
            return false;
        }
    return true;
}

static bool mlp_holds(char *msg, int size) {
    Precision was = gemm_set_precision(PRECISION_BF16);
    static MlpRun got, want;
    mlp_op_run(&got);
    mlp_rule(&want);
    gemm_set_precision(was);
    return same_floats("output", got.out, want.out, MROWS * MD, msg, size) &&
           same_floats("dx", got.dx, want.dx, MROWS * MD, msg, size) &&
           same_floats("dW1", got.dw1, want.dw1, MH * MD, msg, size) &&
           same_floats("db1", got.db1, want.db1, MH, msg, size) &&
           same_floats("dW2", got.dw2, want.dw2, MD * MH, msg, size);
}

START_TEST(test_fused_mlp_bf16_rule) {
    if (!bf16_runs_here("test_fused")) return;
    assert_both_routes(mlp_holds);
    /* h kept in bf16: half of fp32's bytes */
    static MlpRun r;
    Precision was = gemm_set_precision(PRECISION_BF16);
    mlp_op_run(&r);
    gemm_set_precision(was);
    ck_assert_uint_eq(r.saved_bytes, (size_t)MROWS * MH * 2);
}
END_TEST

/* An fp32 h kept by mistake, and each wrong epilogue, break the rule. */
START_TEST(test_fused_mlp_catches) {
    if (!bf16_runs_here("test_fused")) return;
    char msg[300];
    mlp_keep_h32 = true;
    bool ok = mlp_holds(msg, sizeof msg);
    mlp_keep_h32 = false;
    ck_assert_msg(!ok, "an fp32 h passed the bf16 rule");
    static const GemmFault faults[] = {GEMM_FAULT_BIAS_TWICE, GEMM_FAULT_SLOPE_OF_OUT, GEMM_FAULT_NO_PRE_ROUND};
    for (int f = 0; f < 3; f++) {
        GemmFault was = gemm_set_fault(faults[f]);
        ok = mlp_holds(msg, sizeof msg);
        gemm_set_fault(was);
        ck_assert_msg(!ok, "fault %d passed the bf16 rule", f);
    }
}
END_TEST

/* op_linear in bf16: its backward rounds dy to bf16 once for both products;
 * output, dx and dW are gemm()'s in bf16 on the fp32 values (each product
 * rounding dy as it packs it), bit for bit. */
typedef struct {
    float out[MROWS * MH], dx[MROWS * MD], dw[MH * MD];
} LinearRun;

static void linear_inputs(float *x, float *w, float *b, float *R) {
    Rng r;
    rng_seed(&r, 7);
    fill(x, MROWS * MD, &r);
    fill(w, MH * MD, &r);
    fill(b, MH, &r);
    fill(R, MROWS * MH, &r);
}

static void linear_op_run(LinearRun *res) {
    static float x[MROWS * MD], w[MH * MD], b[MH], R[MROWS * MH];
    linear_inputs(x, w, b, R);
    Arena a;
    bool gwas = op_begin(&a);
    int sx[3] = {MB, MT, MD}, sw[2] = {MH, MD}, sb[1] = {MH};
    Tensor *t[3] = {tensor_new(3, sx), tensor_new(2, sw), tensor_new(1, sb)};
    const float *v[3] = {x, w, b};
    for (int k = 0; k < 3; k++) {
        memcpy(t[k]->data, v[k], sizeof(float) * t[k]->n);
        t[k]->requires_grad = true;
    }
    Tensor *y = op_linear(t[0], t[1], t[2]);
    memcpy(res->out, y->data, sizeof res->out);
    backward_seeded(y, R);
    memcpy(res->dx, t[0]->grad, sizeof res->dx);
    memcpy(res->dw, t[1]->grad, sizeof res->dw);
    op_end(&a, gwas);
}

static bool linear_holds(char *msg, int size) {
    static float x[MROWS * MD], w[MH * MD], b[MH], R[MROWS * MH];
    static LinearRun got, want;
    Precision was = gemm_set_precision(PRECISION_BF16);
    linear_op_run(&got);
    linear_inputs(x, w, b, R);
    for (int i = 0; i < MROWS; i++) memcpy(want.out + i * MH, b, sizeof b);
    gemm(false, true, MROWS, MH, MD, 1, x, MD, w, MD, 1, want.out, MH);
    memset(&want.dx, 0, sizeof want.dx);
    memset(&want.dw, 0, sizeof want.dw);
    gemm(false, false, MROWS, MD, MH, 1, R, MH, w, MD, 1, want.dx, MD);
    gemm(true, false, MH, MD, MROWS, 1, R, MH, x, MD, 1, want.dw, MD);
    gemm_set_precision(was);
    return same_floats("output", got.out, want.out, MROWS * MH, msg, size) &&
           same_floats("dx", got.dx, want.dx, MROWS * MD, msg, size) &&
           same_floats("dW", got.dw, want.dw, MH * MD, msg, size);
}

START_TEST(test_fused_linear_bf16_rule) {
    if (!bf16_runs_here("test_fused")) return;
    assert_both_routes(linear_holds);
}
END_TEST

/* The products of every case (the tall shape's too, whose chunks of rows
 * are packed by the threads together, and whose column sums must stay one
 * thread's, in row order) give the same bits on 2 threads as on 1. */
static bool two_threads_as_one(Case *c, void *ctx) {
    Case one = other_results(c);
    int threads = engine_threads();
    engine_set_threads(1);
    run_ex(&one);
    engine_set_threads(2);
    run_ex(c);
    engine_set_threads(threads);
    bool ok = judge(ctx, c, &one, "2 threads against 1");
    other_free(&one);
    return ok;
}

START_TEST(test_fused_threads) {
    if (!bf16_runs_here("test_fused")) return;
    Precision was = gemm_set_precision(PRECISION_BF16);
    Verdict v = {true, ""};
    each_case(two_threads_as_one, &v);
    gemm_set_precision(was);
    ck_assert_msg(v.ok, "%s", v.msg);
}
END_TEST

Suite *fused_suite(void) {
    Suite *s = suite_create("fused");
    TCase *tc = tcase_create("epilogues");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_fused_matches_unfused);
    tcase_add_test(tc, test_fused_matches_reference);
    tcase_add_test(tc, test_fused_threads);
    tcase_add_test(tc, test_fused_dnnl_shape_reaches_dnnl);
    tcase_add_test(tc, test_fused_faults_caught);
    tcase_add_test(tc, test_fused_mlp_bf16_rule);
    tcase_add_test(tc, test_fused_mlp_catches);
    tcase_add_test(tc, test_fused_linear_bf16_rule);
    suite_add_tcase(s, tc);
    return s;
}
