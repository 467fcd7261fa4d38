/* test_gemm.c: the matrix-product entry point (core/gemm.h).
 *
 * bf16 products are held to error analysis: with inputs rounded to bf16
 * (round to nearest even) and sums in fp32, each output differs from the
 * exact product of the rounded inputs by at most gamma_K sum_k |a_k b_k|
 * (gamma_K = K u / (1 - K u), u = 2^-24), plus one rounding of C. The
 * reference is computed in double from the rounded inputs. Each test also
 * shows that the check would catch the two likely mistakes: a product that
 * runs in fp32 (unrounded inputs) and one that rounds by truncation. On a
 * CPU without AVX512-BF16 or AMX-BF16 the bf16 tests say why and pass. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_stub.h"
#include "gemm.h"
#include "gemm_small.h"
#include "rng.h"
#include "test_util.h"

static bool bf16_here(void) { return bf16_runs_here("test_gemm"); }

static float trunc_bf16(float x) {
    union { float f; uint32_t u; } v = {.f = x};
    v.u &= 0xffff0000u;
    return v.f;
}

START_TEST(test_bf16_round_to_nearest_even) {
    /* 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even 1. */
    ck_assert_float_eq(bf16_round(1.0f + 0x1p-8f), 1.0f);
    /* 1 + 3 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up, to even. */
    ck_assert_float_eq(bf16_round(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);
    /* just above halfway rounds up, where truncation would go down */
    float up = 1.0f + 0x1p-8f + 0x1p-20f;
    ck_assert_float_eq(bf16_round(up), 1.0f + 0x1p-7f);
    ck_assert_float_ne(trunc_bf16(up), bf16_round(up));
    ck_assert_float_eq(bf16_round(-up), -(1.0f + 0x1p-7f));
    /* exact values stay; the largest float rounds to infinity; NaN stays NaN */
    ck_assert_float_eq(bf16_round(0.15625f), 0.15625f);
    ck_assert(isinf(bf16_round(3.4028235e38f)));
    ck_assert(isinf(bf16_round(-INFINITY)) && bf16_round(-INFINITY) < 0);
    ck_assert(isnan(bf16_round(NAN)));
    ck_assert_float_eq(bf16_round(0x1p-130f), 0x1p-130f); /* a subnormal with few bits */
    uint16_t out[3];
    float x[3] = {1.0f + 0x1p-8f, up, -2.0f};
    bf16_from_floats(out, x, 3);
    ck_assert_uint_eq(out[0], 0x3f80);
    ck_assert_uint_eq(out[1], 0x3f81);
    ck_assert_uint_eq(out[2], 0xc000);
}
END_TEST

/* One product's problem: A, B, C0 as stored, with padded leading dims. */
typedef struct {
    bool ta, tb;
    int M, N, K, lda, ldb, ldc;
    float alpha, beta;
    float *A, *B, *C0;
} Problem;

static Problem problem(bool ta, bool tb, int M, int N, int K, float alpha, float beta, bool positive, uint64_t seed) {
    Problem p = {ta, tb, M, N, K, (ta ? M : K) + 3, (tb ? K : N) + 2, N + 5, alpha, beta, NULL, NULL, NULL};
    Rng r;
    rng_seed(&r, seed);
    long na = (long)(ta ? K : M) * p.lda, nb = (long)(tb ? N : K) * p.ldb, nc = (long)M * p.ldc;
    p.A = malloc(sizeof(float) * na);
    p.B = malloc(sizeof(float) * nb);
    p.C0 = malloc(sizeof(float) * nc);
    /* positive inputs whose low 16 bits are past halfway make truncation
     * err the same way in every term */
    for (long i = 0; i < na; i++) p.A[i] = positive ? 1.0f + 0x1p-8f + 0x1p-12f * rng_uniform(&r) : rng_normal(&r);
    for (long i = 0; i < nb; i++) p.B[i] = positive ? 1.0f + 0x1p-8f + 0x1p-12f * rng_uniform(&r) : rng_normal(&r);
    for (long i = 0; i < nc; i++) p.C0[i] = rng_normal(&r);
    return p;
}

static void problem_free(Problem *p) {
    free(p->A);
    free(p->B);
    free(p->C0);
}

static float get_a(const Problem *p, int i, int k) { return p->ta ? p->A[(long)k * p->lda + i] : p->A[(long)i * p->lda + k]; }
static float get_b(const Problem *p, int k, int j) { return p->tb ? p->B[(long)j * p->ldb + k] : p->B[(long)k * p->ldb + j]; }

/* The largest |got - ref| / bound over C, where ref is the product of the
 * inputs as `round` makes them, in double, and bound the error analysis's
 * gamma_K sum |a b| + u |ref|. Below 1: within the analysis. */
static double worst_ratio(const Problem *p, const float *C, float (*round)(float)) {
    double worst = 0, g = rounding_gamma(p->K + 2);
    for (int i = 0; i < p->M; i++)
        for (int j = 0; j < p->N; j++) {
            double ref = 0, mag = 0;
            for (int k = 0; k < p->K; k++) {
                double t = (double)round(get_a(p, i, k)) * round(get_b(p, k, j));
                ref += t;
                mag += fabs(t);
            }
            double c0 = p->C0[(long)i * p->ldc + j];
            ref = p->alpha * ref + p->beta * c0;
            double bound = g * (fabs(p->alpha) * mag + fabs(p->beta * c0)) + 0x1p-24 * fabs(ref) + 1e-30;
            worst = fmax(worst, fabs(C[(long)i * p->ldc + j] - ref) / bound);
        }
    return worst;
}

static float as_is(float x) { return x; }

static float *run(const Problem *p) {
    float *C = malloc(sizeof(float) * (long)p->M * p->ldc);
    memcpy(C, p->C0, sizeof(float) * (long)p->M * p->ldc);
    gemm(p->ta, p->tb, p->M, p->N, p->K, p->alpha, p->A, p->lda, p->B, p->ldb, p->beta, C, p->ldc);
    return C;
}

/* Every transpose, alpha and beta, padded leading dims: bf16 within the
 * analysis of rounded inputs, and far from fp32 inputs (so a product that
 * silently ran in fp32 fails); fp32 within it of the unrounded inputs. */
START_TEST(test_gemm_bf16_rounds_inputs) {
    if (!bf16_here()) return;
    bool ta = _i & 1, tb = _i & 2, big = _i & 8;
    float alpha = _i & 4 ? 0.5f : 1.0f, beta = _i & 4 ? 1.0f : 0.0f;
    /* small: gemm's own kernel; big (2.2M multiply-adds, K over GEMM_BF16_DNNL_MIN_K): oneDNN,
     * with inputs that rounding moves one way, since the analysis's bound grows as K^2 and
     * random rounding errors as sqrt(K) */
    Problem p = big ? problem(ta, tb, 40, 36, 1500, alpha, beta, true, 100 + (uint64_t)_i)
                    : problem(ta, tb, 37, 29, 53, alpha, beta, false, 100 + (uint64_t)_i);
    int min_k = gemm_bf16_set_dnnl_min_k(1024);
    ck_assert(big == gemm_bf16_to_dnnl(p.M, p.N, p.K) || (big && !gemm_small_available()));
    Precision was = gemm_set_precision(PRECISION_BF16);
    gemm_bf16_count_clear();
    float *C = run(&p);
    ck_assert_int_eq(gemm_bf16_calls(), 1);
    ck_assert_double_eq(gemm_bf16_sgemm_madds(), big ? 0 : (double)p.M * p.N * p.K);
    double r_bf16 = worst_ratio(&p, C, bf16_round), r_fp32in = worst_ratio(&p, C, as_is);
    ck_assert_msg(r_bf16 < 1, "bf16 product off the rounded-input reference: %.3g of the bound", r_bf16);
    /* 20 times the bound: the two references are told apart by more than an order of magnitude */
    ck_assert_msg(r_fp32in > 20, "bf16 product too close to the fp32 inputs (%.3g): not rounded?", r_fp32in);
    gemm_set_precision(PRECISION_FP32);
    float *C32 = run(&p);
    double r32 = worst_ratio(&p, C32, as_is);
    ck_assert_msg(r32 < 1, "fp32 product off its reference: %.3g of the bound", r32);
    ck_assert_msg(worst_ratio(&p, C32, bf16_round) > 20, "the check cannot tell an fp32 product from a bf16 one");
    gemm_set_precision(was);
    gemm_bf16_set_dnnl_min_k(min_k);
    free(C);
    free(C32);
    problem_free(&p);
}
END_TEST

/* Inputs where truncation errs the same way in every term: the product
 * matches round-to-nearest-even and is far from truncation's, on both
 * paths (small, and oneDNN's). */
START_TEST(test_gemm_bf16_not_truncated) {
    if (!bf16_here()) return;
    Problem p = _i ? problem(false, true, 40, 36, 1500, 1.0f, 0.0f, true, 7) : problem(false, true, 16, 24, 64, 1.0f, 0.0f, true, 7);
    int min_k = gemm_bf16_set_dnnl_min_k(1024);
    ck_assert(_i == gemm_bf16_to_dnnl(p.M, p.N, p.K));
    Precision was = gemm_set_precision(PRECISION_BF16);
    float *C = run(&p);
    gemm_set_precision(was);
    gemm_bf16_set_dnnl_min_k(min_k);
    double r_rne = worst_ratio(&p, C, bf16_round), r_trunc = worst_ratio(&p, C, trunc_bf16);
    ck_assert_msg(r_rne < 1, "off the round-to-nearest-even reference: %.3g of the bound", r_rne);
    ck_assert_msg(r_trunc > 100, "truncated inputs would pass too (%.3g): the check is blind", r_trunc);
    free(C);
    problem_free(&p);
}
END_TEST

/* Small and degenerate sizes: 1 x 1 x 1, a row, a column, K = 0 (C = beta C). */
START_TEST(test_gemm_bf16_edges) {
    if (!bf16_here()) return;
    static const int sizes[][3] = {{1, 1, 1}, {1, 17, 9}, {13, 1, 5}, {3, 4, 1}};
    Precision was = gemm_set_precision(PRECISION_BF16);
    for (int s = 0; s < 4; s++) {
        Problem p = problem(s & 1, false, sizes[s][0], sizes[s][1], sizes[s][2], 1.0f, 0.5f, false, 40 + (uint64_t)s);
        float *C = run(&p);
        ck_assert_msg(worst_ratio(&p, C, bf16_round) < 1, "size %d x %d x %d", p.M, p.N, p.K);
        free(C);
        problem_free(&p);
    }
    float c[2] = {2.0f, -4.0f}, a = 1, b = 1;
    gemm(false, false, 1, 2, 0, 1.0f, &a, 1, &b, 2, 0.5f, c, 2);
    ck_assert_float_eq(c[0], 1.0f);
    ck_assert_float_eq(c[1], -2.0f);
    gemm_set_precision(was);
}
END_TEST

/* Called from the threads of a parallel region at once, each on a shape of
 * its own and one shared: every result as a lone call gives it, bit for bit
 * (the same call on one thread is deterministic). */
START_TEST(test_gemm_bf16_threads) {
    if (!bf16_here()) return;
    enum { N_PROB = 8 };
    Problem p[N_PROB];
    float *lone[N_PROB], *par[N_PROB];
    Precision was = gemm_set_precision(PRECISION_BF16);
    for (int i = 0; i < N_PROB; i++) {
        p[i] = problem(i & 1, i & 2, 20 + (i % 3), 18, 33 + i % 2, 1.0f, 0.0f, false, 300 + (uint64_t)i);
        lone[i] = run(&p[i]);
    }
#pragma omp parallel for num_threads(2) schedule(dynamic)
    for (int i = 0; i < N_PROB; i++) par[i] = run(&p[i]);
    for (int i = 0; i < N_PROB; i++) {
        ck_assert_msg(!memcmp(lone[i], par[i], sizeof(float) * (long)p[i].M * p[i].ldc), "product %d differs", i);
        free(lone[i]);
        free(par[i]);
        problem_free(&p[i]);
    }
    gemm_set_precision(was);
}
END_TEST

/* On AVX512-BF16, small products run in gemm's own kernel (nothing reaches
 * OpenBLAS), within the same analysis as sgemm on rounded inputs, which the
 * fallback still runs; a product big enough to be split over the threads
 * gives the same bits on 1 and 2 threads. Where the CPU has AMX, each case
 * runs on its tiles (_i < 4) and on the vector kernel (_i >= 4), and the
 * count of tile products shows which ran. */
START_TEST(test_gemm_small_kernel) {
    if (!bf16_here()) return;
    if (!gemm_small_available()) {
        printf("test_gemm: the small-product kernel is not tested: this CPU has no AVX512-BF16\n");
        return;
    }
    bool tiles = !(_i & 4) && gemm_small_amx(), amx_was = gemm_small_set_amx(!(_i & 4));
    long amx_before = gemm_small_amx_products();
    Precision was = gemm_set_precision(PRECISION_BF16);
    for (int fallback = 0; fallback < 2; fallback++) {
        Problem p = problem(_i & 1, _i & 2, 37, 29, 53, 1.0f, 0.0f, false, 500 + (uint64_t)_i);
        bool fb_was = gemm_small_set_fallback(fallback);
        blas_record_set(true);
        float *C = run(&p);
        blas_record_set(false);
        gemm_small_set_fallback(fb_was);
        ck_assert_double_eq(blas_recorded_madds(), fallback ? (double)p.M * p.N * p.K : 0);
        double r = worst_ratio(&p, C, bf16_round);
        ck_assert_msg(r < 1, "%s: off the rounded-input reference: %.3g of the bound", fallback ? "sgemm" : "kernel", r);
        free(C);
        problem_free(&p);
    }
    /* a long K, taken GEMM_SMALL_KC values at a time, the last block odd */
    Problem l = problem(_i & 1, _i & 2, 24, 20, 2 * GEMM_SMALL_KC + 53, 0.5f, 1.0f, false, 700 + (uint64_t)_i);
    ck_assert(!gemm_bf16_to_dnnl(l.M, l.N, l.K));
    float *CL = run(&l);
    double rl = worst_ratio(&l, CL, bf16_round);
    ck_assert_msg(rl < 1, "K %d in blocks: off the rounded-input reference: %.3g of the bound", l.K, rl);
    free(CL);
    problem_free(&l);
    Problem q = problem(_i & 1, _i & 2, 96, 80, 64, 1.0f, 0.5f, false, 600 + (uint64_t)_i);
    ck_assert((long)q.M * q.N * q.K >= GEMM_SMALL_PARALLEL_MADDS && (long)q.M * q.N * q.K < GEMM_BF16_MIN_MADDS);
    int threads = engine_threads();
    engine_set_threads(1);
    float *C1 = run(&q);
    engine_set_threads(2);
    float *C2 = run(&q);
    engine_set_threads(threads);
    ck_assert_msg(!memcmp(C1, C2, sizeof(float) * (long)q.M * q.ldc), "1 and 2 threads give different bits");
    ck_assert(worst_ratio(&q, C2, bf16_round) < 1);
    free(C1);
    free(C2);
    problem_free(&q);
    gemm_set_precision(was);
    /* three products on the kernel (the fallback's is not), the long one in three blocks of K, the
     * split one on each of two thread counts */
    ck_assert_int_eq(gemm_small_amx_products() - amx_before, tiles ? 1 + 3 + 2 : 0);
    gemm_small_set_amx(amx_was);
}
END_TEST

/* gemm_packed reads blocks of a packing in place and gives the bits gemm_ex
 * gives for the same block of op(B): every transpose of A, A in floats and
 * in bf16, blocks at the packing's start and inside it, the last one odd;
 * on AMX tiles and on the vector kernel where the CPU has AMX. */
START_TEST(test_gemm_packed_matches_ex) {
    if (!bf16_here()) return;
    Precision was = gemm_set_precision(PRECISION_BF16);
    if (!gemm_packed_usable()) {
        printf("test_gemm: gemm_packed is not tested: gemm's kernel does not run on this CPU\n");
        gemm_set_precision(was);
        return;
    }
    bool amx_was = gemm_small_set_amx(!(_i & 4)), ta = _i & 1, tb = _i & 2, a16 = _i & 1;
    enum { PK = 77, PN = 96 };
    Rng r;
    rng_seed(&r, 900 + (uint64_t)_i);
    int ldb = tb ? PK + 3 : PN + 5;
    uint16_t *B = malloc(sizeof *B * (size_t)(tb ? PN : PK) * ldb);
    for (long i = 0; i < (long)(tb ? PN : PK) * ldb; i++) B[i] = bf16_from_float(rng_normal(&r));
    uint32_t *words = malloc(sizeof *words * (size_t)gemm_packed_words(PK, PN));
    GemmPackedB pb = gemm_pack_b(words, tb, B, ldb, PK, PN);
    static const int blocks[][5] = {/* M, N, K, k0, n0 */ {37, 96, 77, 0, 0}, {16, 64, 32, 0, 32},
                                    {45, 33, 48, 20, 0},  {8, 32, 31, 46, 64}};
    for (int s = 0; s < 4; s++) {
        int M = blocks[s][0], N = blocks[s][1], K = blocks[s][2], k0 = blocks[s][3], n0 = blocks[s][4];
        int lda = (ta ? M : K) + 3;
        long na = (long)(ta ? K : M) * lda;
        float *A = malloc(sizeof *A * na), *C0 = malloc(sizeof *C0 * (size_t)M * N);
        uint16_t *A16 = malloc(sizeof *A16 * na);
        for (long i = 0; i < na; i++) A[i] = rng_normal(&r), A16[i] = bf16_from_float(A[i]);
        for (long i = 0; i < (long)M * N; i++) C0[i] = rng_normal(&r);
        float *got = malloc(sizeof *got * (size_t)M * N), *want = malloc(sizeof *want * (size_t)M * N);
        memcpy(got, C0, sizeof *got * (size_t)M * N);
        memcpy(want, C0, sizeof *want * (size_t)M * N);
        const void *a = a16 ? (const void *)A16 : (const void *)A;
        ck_assert_msg(gemm_packed(ta, M, N, K, 0.5f, a, a16, lda, &pb, k0, n0, 1.0f, got, N), "block %d not run", s);
        const uint16_t *bblock = tb ? B + (long)n0 * ldb + k0 : B + (long)k0 * ldb + n0;
        gemm_ex(ta, tb, M, N, K, 0.5f, a, a16, lda, bblock, true, ldb, 1.0f, want, N, NULL);
        ck_assert_msg(!memcmp(got, want, sizeof *got * (size_t)M * N), "block %d (%d x %d x %d at k %d, n %d) differs",
                      s, M, N, K, k0, n0);
        free(A), free(A16), free(C0), free(got), free(want);
    }
    free(B);
    free(words);
    gemm_small_set_amx(amx_was);
    gemm_set_precision(was);
}
END_TEST

/* B inside the bound weights is read from their bf16 copy: the same bits
 * as rounding it at the product, and a change reaches products only through
 * gemm_weights_changed. */
START_TEST(test_gemm_bf16_weights_mirror) {
    if (!bf16_here()) return;
    Problem p = problem(false, true, 40, 36, 1500, 1.0f, 0.0f, false, 77); /* oneDNN's path reads the copy */
    int min_k = gemm_bf16_set_dnnl_min_k(1024);
    ck_assert(gemm_bf16_to_dnnl(p.M, p.N, p.K));
    Precision was = gemm_set_precision(PRECISION_BF16);
    float *plain = run(&p);
    long nb = (long)p.N * p.ldb;
    gemm_bind_weights(p.B, nb);
    float *bound = run(&p);
    ck_assert(!memcmp(plain, bound, sizeof(float) * (long)p.M * p.ldc));
    for (long i = 0; i < nb; i++) p.B[i] *= 2;
    float *stale = run(&p);
    ck_assert(!memcmp(plain, stale, sizeof(float) * (long)p.M * p.ldc));
    gemm_weights_changed();
    float *fresh = run(&p);
    ck_assert_msg(worst_ratio(&p, fresh, bf16_round) < 1, "the refreshed copy is not the weights");
    gemm_bind_weights(NULL, 0);
    gemm_set_precision(was);
    gemm_bf16_set_dnnl_min_k(min_k);
    free(plain);
    free(bound);
    free(stale);
    free(fresh);
    problem_free(&p);
}
END_TEST

/* Where the kernel says the CPU has AMX, it runs on it: a CPU whose flags
 * (as Linux shows them) list AMX-TILE and AMX-BF16 gets gemm_small_amx(),
 * unless ATTNLAB_NO_AMX is set, and the route names the tiles. */
START_TEST(test_gemm_amx_found) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[8192];
    bool tile = false, bf16 = false;
    while (fgets(line, sizeof line, f) && !(tile && bf16))
        if (!strncmp(line, "flags", 5)) tile = strstr(line, " amx_tile") != NULL, bf16 = strstr(line, " amx_bf16") != NULL;
    fclose(f);
    const char *off = getenv("ATTNLAB_NO_AMX"), *no_bf16 = getenv("ATTNLAB_NO_AVX512BF16");
    if (!tile || !bf16 || (off && *off) || (no_bf16 && *no_bf16) || !gemm_small_available()) {
        ck_assert(!gemm_small_amx());
        return;
    }
    ck_assert_msg(gemm_small_amx(), "the CPU lists amx_tile and amx_bf16, and the kernel does not use them");
    Err e = {0};
    if (gemm_bf16_check(&e) == 0) ck_assert_msg(strstr(gemm_bf16_route(), "gemm_small amx"), "route: %s", gemm_bf16_route());
}
END_TEST

START_TEST(test_gemm_isa_named) {
    const char *isa = gemm_dnnl_isa();
    ck_assert(isa && *isa);
    Err e = {0};
    if (gemm_bf16_check(&e) == 0) {
        ck_assert_msg(strstr(isa, "bf16") || strstr(isa, "amx"), "bf16 accepted on ISA %s", isa);
    } else {
        ck_assert_msg(strstr(e.msg, "AVX512-BF16"), "the refusal names what is missing: %s", e.msg);
        ck_assert(strstr(e.hint, "fp32"));
    }
}
END_TEST

Suite *gemm_suite(void) {
    Suite *s = suite_create("gemm");
    TCase *tc = tcase_create("bf16");
    tcase_add_test(tc, test_bf16_round_to_nearest_even);
    tcase_add_loop_test(tc, test_gemm_bf16_rounds_inputs, 0, 16);
    tcase_add_loop_test(tc, test_gemm_bf16_not_truncated, 0, 2);
    tcase_add_test(tc, test_gemm_bf16_edges);
    tcase_add_test(tc, test_gemm_bf16_threads);
    tcase_add_loop_test(tc, test_gemm_small_kernel, 0, 8);
    tcase_add_loop_test(tc, test_gemm_packed_matches_ex, 0, 8);
    tcase_add_test(tc, test_gemm_bf16_weights_mirror);
    tcase_add_test(tc, test_gemm_isa_named);
    tcase_add_test(tc, test_gemm_amx_found);
    suite_add_tcase(s, tc);
    return s;
}
