/* test_ops.c: the op table, the gradient check of every op, and proof that
 * the check catches a wrong backward. */
#include <check.h>
#include <signal.h>
#include <string.h>

#include "gradcheck.h"
#include "op_cases.h"
#include "test_util.h"

START_TEST(test_op_table_complete) {
    for (int i = 0; i < OP_COUNT; i++) {
        ck_assert_msg(op_defs[i].name && op_defs[i].forward && op_defs[i].backward, "op %d has an empty table entry", i);
        for (int j = 0; j < i; j++) ck_assert_str_ne(op_defs[i].name, op_defs[j].name);
    }
}
END_TEST

/* Each case of tests/op_cases.c, checked against central differences. */
START_TEST(test_gradcheck_case) {
    const GradCase *c = &op_cases[_i];
    GcResult r;
    bool ok = gradcheck(c, 1234 + (uint64_t)_i, NULL, &r);
    ck_assert_msg(ok, "gradcheck %s failed: %s (worst error/tolerance %.3g)", c->name, r.why, r.worst_ratio);
    ck_assert_int_gt(r.checked, 0);
}
END_TEST

/* Walks the op table: every primitive must be on the tape of some case. */
START_TEST(test_every_op_has_gradcheck) {
    bool covered[OP_COUNT] = {0};
    for (int k = 0; k < n_op_cases; k++) {
        GcResult r;
        gradcheck(&op_cases[k], 7, &(GcOptions){.max_per_input = 1}, &r);
        for (int i = 0; i < OP_COUNT; i++) covered[i] |= r.covered[i];
    }
    for (int i = 0; i < OP_COUNT; i++) ck_assert_msg(covered[i], "op %s has no gradient-check case in tests/op_cases.c", op_defs[i].name);
}
END_TEST

/* Breaks one op's backward and expects the gradient check to notice: every
 * kind of wrong backward, for every op. */
START_TEST(test_gradcheck_catches_broken_backward) {
    for (int op = 0; op < OP_COUNT; op++) {
        for (int m = 0; m < MUTATION_COUNT; m++) {
            mutation_install(op, m);
            bool caught = false;
            int ran = 0;
            for (int k = 0; k < n_op_cases && !caught; k++) {
                if (!case_covers(k, op)) continue;
                GcResult r;
                ran++;
                caught = !gradcheck(&op_cases[k], 99, NULL, &r);
            }
            mutation_remove(op);
            ck_assert_int_gt(ran, 0);
            ck_assert_msg(caught, "a %s backward for %s passed the gradient check", mutation_name(m), op_defs[op].name);
        }
    }
}
END_TEST

/* The checker itself: a hand-made wrong derivative (relu's backward in place of
 * gelu's) must fail, and the failure must say where. */
START_TEST(test_gradcheck_reports_failure) {
    void (*real)(Node *) = op_defs[OP_GELU].backward;
    op_defs[OP_GELU].backward = op_defs[OP_RELU].backward;
    const GradCase *gelu = NULL;
    for (int k = 0; k < n_op_cases; k++)
        if (strcmp(op_cases[k].name, "gelu") == 0) gelu = &op_cases[k];
    ck_assert_ptr_nonnull(gelu);
    GcResult r;
    bool ok = gradcheck(gelu, 5, NULL, &r);
    op_defs[OP_GELU].backward = real;
    ck_assert(!ok);
    ck_assert(r.worst_ratio >= 1.0);
    ck_assert_msg(strstr(r.why, "analytic") != NULL, "unhelpful failure message: %s", r.why);
}
END_TEST

/* A non-finite gradient fails even where the numeric one is finite. */
static void nan_backward(Node *n) {
    float *dx = tensor_grad(n->in[0]);
    dx[0] = NAN;
}
START_TEST(test_gradcheck_rejects_nan) {
    void (*real)(Node *) = op_defs[OP_SCALE].backward;
    op_defs[OP_SCALE].backward = nan_backward;
    const GradCase c = {"scale_nan", 1, {{2, {2, 2}, GC_NORMAL}}, op_cases[case_find("scale")].build};
    GcResult r;
    bool ok = gradcheck(&c, 5, NULL, &r);
    op_defs[OP_SCALE].backward = real;
    ck_assert(!ok);
    ck_assert_msg(strstr(r.why, "not finite") != NULL, "%s", r.why);
}
END_TEST

/* With gradients off nothing is recorded, and outputs need no gradient. */
START_TEST(test_no_grad_records_nothing) {
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    tape_reset();
    Tensor *x = tensor_2d(2, 3);
    for (int i = 0; i < 6; i++) x->data[i] = (float)i;
    x->requires_grad = true;
    bool was = grad_set(false);
    Tensor *y = op_gelu(op_scale(x, 2.0f));
    grad_set(was);
    ck_assert_ptr_null(tape_last());
    ck_assert(!y->requires_grad);
    Tensor *z = op_gelu(x);
    ck_assert_ptr_nonnull(tape_last());
    ck_assert(z->requires_grad);
    tape_reset();
    arena_free(&a);
}
END_TEST

/* Shape mismatches are programming errors: they abort with the op's name. */
static void with_arena(void) {
    static Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
}
START_TEST(test_matmul_shape_mismatch_aborts) {
    with_arena();
    op_matmul(tensor_2d(3, 4), tensor_2d(5, 6), false, false);
}
END_TEST
START_TEST(test_add_shape_mismatch_aborts) {
    with_arena();
    op_add(tensor_2d(3, 4), tensor_1d(3));
}
END_TEST
START_TEST(test_batched_matmul_mismatch_aborts) {
    with_arena();
    op_matmul(tensor_3d(2, 3, 4), tensor_3d(3, 4, 5), false, false);
}
END_TEST
START_TEST(test_reshape_count_mismatch_aborts) {
    with_arena();
    op_reshape(tensor_2d(3, 4), 1, (int[]){13});
}
END_TEST

Suite *ops_suite(void) {
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("gradcheck");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_op_table_complete);
    tcase_add_loop_test(tc, test_gradcheck_case, 0, n_op_cases);
    tcase_add_test(tc, test_every_op_has_gradcheck);
    tcase_add_test(tc, test_gradcheck_catches_broken_backward);
    tcase_add_test(tc, test_gradcheck_reports_failure);
    tcase_add_test(tc, test_gradcheck_rejects_nan);
    tcase_add_test(tc, test_no_grad_records_nothing);
    suite_add_tcase(s, tc);

    TCase *shapes = tcase_create("shape checks");
    tcase_add_test_raise_signal(shapes, test_matmul_shape_mismatch_aborts, SIGABRT);
    tcase_add_test_raise_signal(shapes, test_add_shape_mismatch_aborts, SIGABRT);
    tcase_add_test_raise_signal(shapes, test_batched_matmul_mismatch_aborts, SIGABRT);
    tcase_add_test_raise_signal(shapes, test_reshape_count_mismatch_aborts, SIGABRT);
    suite_add_tcase(s, shapes);
    return s;
}
