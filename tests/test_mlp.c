/* test_mlp.c: the fused MLP op (layers/mlp.c) against finite differences,
 * against its composition from op_linear, op_gelu and op_linear, with a
 * broken backward, and for the memory it keeps. (The PyTorch comparison is
 * the golden model of tests/test_model.c, whose blocks all run it; a broken
 * mlp backward fails that test too.) */
#include <check.h>
#include <math.h>
#include <string.h>

#include "gradcheck.h"
#include "layers.h"
#include "test_util.h"

enum { B = 2, T = 3, D = 4, HID = 6 };

static Tensor *fused(Tensor **in) { return op_mlp(in[0], in[1], in[2], in[3], in[4]); }
static Tensor *composed(Tensor **in) { return op_linear(op_gelu(op_linear(in[0], in[1], in[2])), in[3], in[4]); }

static const GradCase mlp_case = {"mlp", 5,
                                  {{3, {B, T, D}, GC_NORMAL},
                                   {2, {HID, D}, GC_NORMAL},
                                   {1, {HID}, GC_NORMAL},
                                   {2, {D, HID}, GC_NORMAL},
                                   {1, {D}, GC_NORMAL}},
                                  fused};

START_TEST(test_mlp_gradcheck) {
    GcResult r;
    ck_assert_msg(gradcheck(&mlp_case, 7, NULL, &r), "%s", r.why);
    ck_assert_int_eq(r.checked, B * T * D + 2 * HID * D + HID + D); /* every element */
}
END_TEST

/* A 10%-scaled or a missing backward fails the check. */
START_TEST(test_mlp_gradcheck_catches_broken_backward) {
    for (int mu = 0; mu < MUTATION_COUNT; mu++) {
        GcResult r;
        kernel_mutation_install(&mlp_op, (Mutation)mu);
        bool ok = gradcheck(&mlp_case, 7, NULL, &r);
        kernel_mutation_remove(&mlp_op);
        ck_assert_msg(!ok, "a %s mlp backward passed the gradient check", mutation_name((Mutation)mu));
    }
}
END_TEST

/* Two ways of computing the block on the same random leaves (seed), each
 * seeded with sum(y^2): fn[w] runs way w, with mlp_scratch_floats set to
 * scratch[w] (0: as it is). Asserts that outputs agree to 1e-5 and every
 * gradient to 1e-4 (relative to 1 + |value|); *kept gets the arena bytes
 * each way keeps from forward to backward. */
static void compare_ways(Tensor *(*const fn[2])(Tensor **), const long scratch[2], uint64_t seed, size_t kept[2]) {
    long saved = mlp_scratch_floats;
    Rng rng;
    rng_seed(&rng, seed);
    Tensor *leaf[2][5];
    const GcInput *in = mlp_case.in;
    Arena a;
    arena_init(&a, 0);
    engine_set_arena(&a);
    float *vals[5];
    for (int k = 0; k < 5; k++) {
        Tensor *t = tensor_new(in[k].ndim, in[k].shape);
        vals[k] = t->data;
        rng_fill_normal(&rng, t->data, t->n, 0.0f, 1.0f);
    }
    float *out[2], *grads[2][5];
    for (int w = 0; w < 2; w++) {
        mlp_scratch_floats = scratch[w] ? scratch[w] : saved;
        for (int k = 0; k < 5; k++) {
            leaf[w][k] = tensor_new(in[k].ndim, in[k].shape);
            memcpy(leaf[w][k]->data, vals[k], (size_t)leaf[w][k]->n * sizeof(float));
            leaf[w][k]->requires_grad = true;
        }
        tape_reset();
        grad_set(true);
        size_t before = arena_in_use(&a);
        Tensor *y = fn[w](leaf[w]);
        kept[w] = arena_in_use(&a) - before;
        out[w] = y->data;
        backward(op_sum(op_mul(y, y)));
        for (int k = 0; k < 5; k++) grads[w][k] = leaf[w][k]->grad;
    }
    mlp_scratch_floats = saved;
    for (long i = 0; i < (long)B * T * D; i++)
        ck_assert_msg(fabsf(out[0][i] - out[1][i]) <= 1e-5f * (1 + fabsf(out[1][i])), "out[%ld]: %g vs %g", i, out[0][i],
                      out[1][i]);
    for (int k = 0; k < 5; k++)
        for (long i = 0; i < leaf[0][k]->n; i++)
            ck_assert_msg(fabsf(grads[0][k][i] - grads[1][k][i]) <= 1e-4f * (1 + fabsf(grads[1][k][i])),
                          "grad of input %d [%ld]: %g vs %g", k, i, grads[0][k][i], grads[1][k][i]);
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&a);
}

/* The same leaves through both: outputs and every gradient agree to float
 * rounding (the same products in the same order, so closely), and the fused
 * op keeps one [tokens, hidden] tensor less until backward. */
START_TEST(test_mlp_matches_composition) {
    Tensor *(*const ways[2])(Tensor **) = {fused, composed};
    size_t kept[2];
    compare_ways(ways, (const long[2]){0, 0}, 11, kept);
    /* the composition keeps h and gelu(h); the fused op h alone */
    ck_assert_msg(kept[1] >= kept[0] + (size_t)B * T * HID * sizeof(float), "fused %zu bytes, composed %zu", kept[0],
                  kept[1]);
}
END_TEST

/* Rows in several passes (1, 2 and 4 rows of the 6; the last pass short):
 * the gradient check holds, and outputs and gradients are the one-pass
 * ones to float rounding. A pass that skipped rows, or wrote them at the
 * wrong offset, fails both. */
START_TEST(test_mlp_passes) {
    long saved = mlp_scratch_floats;
    for (int rows = 1; rows <= 4; rows *= 2) {
        mlp_scratch_floats = (long)rows * HID;
        GcResult r;
        bool ok = gradcheck(&mlp_case, 7, NULL, &r);
        mlp_scratch_floats = saved;
        ck_assert_msg(ok, "%d rows a pass: %s", rows, r.why);
    }
    Tensor *(*const ways[2])(Tensor **) = {fused, fused};
    size_t kept[2];
    compare_ways(ways, (const long[2]){0, 4L * HID}, 5, kept); /* 6 rows: one pass, then 4 + 2 */
}
END_TEST

Suite *mlp_suite(void) {
    Suite *s = suite_create("mlp");
    TCase *tc = tcase_create("fused");
    tcase_add_test(tc, test_mlp_gradcheck);
    tcase_add_test(tc, test_mlp_gradcheck_catches_broken_backward);
    tcase_add_test(tc, test_mlp_matches_composition);
    tcase_add_test(tc, test_mlp_passes);
    suite_add_tcase(s, tc);
    return s;
}
