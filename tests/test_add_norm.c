/* test_add_norm.c: the residual add fused with the norm after it
 * (op_add_layernorm, op_add_rmsnorm; core/ops_norm.c). Its gradient check,
 * PyTorch comparison and broken-backward tests are those of every op
 * (tests/op_cases.c, tests/reference/ops.py; the golden model of
 * tests/test_model.c runs it in every block). Here: the same values as
 * op_add then the norm, in no more memory; its normed output handed back and
 * made again from the sum alone; and activation checkpointing, whose spans
 * end at the sum, the norm after it starting the next. */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

enum { B = 3, T = 7, D = 40, N = B * T * D, OUT = 5 };
#define EPS 1e-5f

static Tensor *leaf(Rng *rng, int ndim, const int *shape) {
    Tensor *t = tensor_new(ndim, shape);
    rng_fill_normal(rng, t->data, t->n, 0.0f, 1.0f);
    t->requires_grad = true;
    return t;
}

/* norm(x + y) with x + y in *sum: fused, or op_add then the norm. */
static Tensor *add_norm(bool rms, bool fused, Tensor *x, Tensor *y, Tensor *w, Tensor *b, Tensor **sum) {
    if (fused) return rms ? op_add_rmsnorm(x, y, w, EPS, sum) : op_add_layernorm(x, y, w, b, EPS, sum);
    *sum = op_add(x, y);
    return rms ? op_rmsnorm(*sum, w, EPS) : op_layernorm(*sum, w, b, EPS);
}

typedef struct {
    float s[N], h[N], grad[4][N]; /* the gradients of x, y, w and b */
    size_t kept, used;            /* arena bytes after forward, after backward */
} Run;

/* f = sum(h R2) (+ sum(s R1) when read_sum) on the same leaves each time. */
static void run_once(bool rms, bool read_sum, bool fused, Run *r) {
    Arena a;
    arena_init(&a, 0);
    engine_set_arena(&a);
    tape_reset();
    Rng rng;
    rng_seed(&rng, 17);
    Tensor *in[4] = {leaf(&rng, 3, (int[]){B, T, D}), leaf(&rng, 3, (int[]){B, T, D}), leaf(&rng, 1, (int[]){D}),
                     leaf(&rng, 1, (int[]){D})};
    Tensor *r1 = leaf(&rng, 3, (int[]){B, T, D}), *r2 = leaf(&rng, 3, (int[]){B, T, D});
    r1->requires_grad = r2->requires_grad = false;
    size_t before = arena_in_use(&a);
    Tensor *s, *h = add_norm(rms, fused, in[0], in[1], in[2], in[3], &s);
    r->kept = arena_in_use(&a) - before;
    memcpy(r->s, s->data, sizeof r->s);
    memcpy(r->h, h->data, sizeof r->h);
    Tensor *f = op_mul(h, r2);
    if (read_sum) f = op_add(f, op_mul(s, r1));
    backward(op_sum(f));
    r->used = arena_in_use(&a) - before;
    for (int k = 0; k < 4; k++) {
        memset(r->grad[k], 0, sizeof r->grad[k]);
        if (in[k]->grad) memcpy(r->grad[k], in[k]->grad, (size_t)in[k]->n * sizeof(float));
    }
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&a);
}

/* Both kinds, with the sum read afterwards (as the next residual reads it)
 * and without (as before ln_f): the sum, the normed output and every
 * gradient are equal to the composition's, value for value (the same
 * arithmetic per element: an exact zero may differ in sign), and the fused
 * op takes no more arena memory forward or backward (one [B, T, D] buffer
 * less when nothing else reads the sum). */
START_TEST(test_add_norm_matches_composition) {
    bool rms = _i & 1, read_sum = _i & 2;
    static Run run[2];
    for (int fused = 0; fused < 2; fused++) run_once(rms, read_sum, fused, &run[fused]);
    const char *what = rms ? "add_rmsnorm" : "add_layernorm";
    for (long i = 0; i < N; i++) {
        ck_assert_msg(run[1].s[i] == run[0].s[i], "%s: sum[%ld] %a vs %a", what, i, run[1].s[i], run[0].s[i]);
        ck_assert_msg(run[1].h[i] == run[0].h[i], "%s: norm[%ld] %a vs %a", what, i, run[1].h[i], run[0].h[i]);
    }
    for (int k = 0; k < 4; k++)
        for (long i = 0; i < (k < 2 ? N : D); i++)
            ck_assert_msg(run[1].grad[k][i] == run[0].grad[k][i], "%s (sum %s): gradient of input %d [%ld]: %a vs %a",
                          what, read_sum ? "read" : "not read", k, i, run[1].grad[k][i], run[0].grad[k][i]);
    ck_assert_msg(run[1].kept <= run[0].kept, "%s: forward keeps %zu bytes, the composition %zu", what, run[1].kept,
                  run[0].kept);
    ck_assert_msg(run[1].used <= run[0].used, "%s: forward and backward take %zu bytes, the composition %zu", what,
                  run[1].used, run[0].used);
    /* with nothing else reading s, the composition makes s a gradient of its own */
    if (!read_sum)
        ck_assert_msg(run[1].used + N * sizeof(float) <= run[0].used,
                      "%s: forward and backward take %zu bytes, the composition %zu", what, run[1].used, run[0].used);
}
END_TEST

/* As the model does: y = x W is handed back once added (tensor_release_data)
 * and the normed output after forward (tensor_release_recomputable). Backward
 * then gives the same bits as with both kept; h is made again from the sum
 * alone and handed back again, and y is never made again (neither the
 * fused op's backward nor h's recompute reads it). */
START_TEST(test_add_norm_recomputed_same_bits) {
    bool rms = _i;
    float *grads[2][5];
    for (int pass = 0; pass < 2; pass++) {
        Arena a;
        arena_init(&a, 0);
        engine_set_arena(&a);
        tape_reset();
        Rng rng;
        rng_seed(&rng, 23);
        Tensor *x = leaf(&rng, 3, (int[]){B, T, D}), *W = leaf(&rng, 2, (int[]){D, D}), *w = leaf(&rng, 1, (int[]){D});
        Tensor *b = leaf(&rng, 1, (int[]){D}), *W2 = leaf(&rng, 2, (int[]){OUT, D});
        Tensor *y = op_linear(x, W, NULL), *s, *h = add_norm(rms, true, x, y, w, b, &s);
        Tensor *z = op_linear(h, W2, NULL); /* its dW2 reads h */
        Tensor *loss = op_add(op_sum(op_mul(z, z)), op_sum(op_mul(s, s)));
        if (pass) {
            tensor_release_data(y);
            tensor_release_recomputable(h);
            ck_assert_ptr_null(h->data);
        }
        backward(loss);
        if (pass) {
            ck_assert_ptr_null(h->data); /* handed back again */
            ck_assert_ptr_null(y->data);
        }
        Tensor *leaves[5] = {x, W, w, b, W2};
        for (int k = 0; k < 5; k++) {
            grads[pass][k] = malloc((size_t)leaves[k]->n * sizeof(float));
            ck_assert_ptr_nonnull(grads[pass][k]);
            if (rms && k == 3) /* rmsnorm has no bias */
                memset(grads[pass][k], 0, (size_t)leaves[k]->n * sizeof(float));
            else
                memcpy(grads[pass][k], leaves[k]->grad, (size_t)leaves[k]->n * sizeof(float));
        }
        tape_reset();
        engine_set_arena(NULL);
        arena_free(&a);
    }
    const long n[5] = {N, D * D, D, D, OUT * D};
    for (int k = 0; k < 5; k++) {
        ck_assert_msg(memcmp(grads[0][k], grads[1][k], (size_t)n[k] * sizeof(float)) == 0,
                      "%s: leaf %d's gradient differs with h made again", rms ? "add_rmsnorm" : "add_layernorm", k);
        free(grads[0][k]);
        free(grads[1][k]);
    }
}
END_TEST

/* Three blocks x = x + h W_i, each add fused with the norm after it, with
 * activation checkpointing: each span ends at its sum (keep's producer), so
 * the norm node after it, and its output, which the next block reads, stay
 * out of it; the previous norm's output, inside, is handed back. The
 * gradients are the same bits as without checkpoints. */
START_TEST(test_add_norm_checkpointed_same_bits) {
    bool rms = _i;
    enum { L = 3 };
    float *grads[2][L + 3];
    for (int ckpt = 0; ckpt < 2; ckpt++) {
        Arena a;
        arena_init(&a, 0);
        engine_set_arena(&a);
        tape_reset();
        Rng rng;
        rng_seed(&rng, 29);
        Tensor *leaves[L + 3];
        Tensor *x = leaves[0] = leaf(&rng, 3, (int[]){B, T, D});
        Tensor *w = leaves[1] = leaf(&rng, 1, (int[]){D}), *b = leaves[2] = leaf(&rng, 1, (int[]){D});
        for (int i = 0; i < L; i++) leaves[3 + i] = leaf(&rng, 2, (int[]){D, D});
        Node *before = tape_last();
        Tensor *h = rms ? op_rmsnorm(x, w, EPS) : op_layernorm(x, w, b, EPS);
        for (int i = 0; i < L; i++) {
            Tensor *y = op_linear(h, leaves[3 + i], NULL), *prev = h;
            h = add_norm(rms, true, x, y, w, b, &x);
            tensor_release_data(y);
            if (ckpt) {
                tape_checkpoint(before, x);
                before = x->producer;
                ck_assert_ptr_nonnull(x->data);
                ck_assert_ptr_nonnull(h->data);
                ck_assert_ptr_null(prev->data);
            }
        }
        backward(op_sum(op_mul(h, h)));
        for (int k = 0; k < L + 3; k++) {
            grads[ckpt][k] = malloc((size_t)leaves[k]->n * sizeof(float));
            ck_assert_ptr_nonnull(grads[ckpt][k]);
            if (rms && k == 2)
                memset(grads[ckpt][k], 0, (size_t)leaves[k]->n * sizeof(float));
            else
                memcpy(grads[ckpt][k], leaves[k]->grad, (size_t)leaves[k]->n * sizeof(float));
        }
        tape_reset();
        engine_set_arena(NULL);
        arena_free(&a);
    }
    for (int k = 0; k < L + 3; k++) {
        long n = k == 0 ? N : k < 3 ? D : D * D;
        ck_assert_msg(memcmp(grads[0][k], grads[1][k], (size_t)n * sizeof(float)) == 0,
                      "%s: leaf %d's gradient differs with checkpoints", rms ? "add_rmsnorm" : "add_layernorm", k);
        free(grads[0][k]);
        free(grads[1][k]);
    }
}
END_TEST

/* x and y must have one shape: a row bias is op_add's job. */
START_TEST(test_add_norm_shape_mismatch_aborts) {
    static Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    Tensor *s;
    op_add_layernorm(tensor_2d(3, 4), tensor_1d(4), tensor_1d(4), tensor_1d(4), EPS, &s);
}
END_TEST

Suite *add_norm_suite(void) {
    Suite *s = suite_create("add_norm");
    TCase *tc = tcase_create("fused");
    tcase_add_loop_test(tc, test_add_norm_matches_composition, 0, 4);
    tcase_add_loop_test(tc, test_add_norm_recomputed_same_bits, 0, 2);
    tcase_add_loop_test(tc, test_add_norm_checkpointed_same_bits, 0, 2);
    tcase_add_test_raise_signal(tc, test_add_norm_shape_mismatch_aborts, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}
