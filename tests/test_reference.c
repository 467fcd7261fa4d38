/* test_reference.c: every op case against PyTorch.
 *
 * tests/fixtures/ops.safetensors holds, per case of tests/op_cases.c, the
 * inputs, PyTorch's output and the gradients of sum(out * R), computed in
 * float64 (tests/reference/ops.py). We run the same case in float32 and
 * compare with tolerances that fit float32. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layer_cases.h"
#include "op_cases.h"
#include "safetensors.h"
#include "test_util.h"

#define ATOL 1e-5f
#define RTOL 1e-4f

/* Reads "<case>/<what>" with the given shape into arena memory. */
static float *read_tensor(StFile *sf, const char *c, const char *what, int ndim, const int *shape, char *msg, int size) {
    char name[128];
    snprintf(name, sizeof name, "%s/%s", c, what);
    float *dst = arena_alloc(engine_arena(), (size_t)shape_numel(ndim, shape) * sizeof(float));
    Err e;
    if (st_read_expect(sf, name, ndim, shape, dst, &e) != 0) {
        snprintf(msg, (size_t)size, "%s", e.msg);
        return NULL;
    }
    return dst;
}

/* Runs case c on the fixture's inputs; false and a message on any difference. */
static bool reference_case_once(StFile *sf, const GradCase *c, char *msg, int size) {
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    tape_reset();
    bool ok = false;
    Tensor *in[GC_MAX_IN];
    for (int i = 0; i < c->n_in; i++) {
        char what[16];
        snprintf(what, sizeof what, "in%d", i);
        in[i] = tensor_new(c->in[i].ndim, c->in[i].shape);
        float *data = read_tensor(sf, c->name, what, in[i]->ndim, in[i]->shape, msg, size);
        if (!data) goto done;
        rounding_move_input(data, in[i]->n);
        in[i]->data = data;
        in[i]->requires_grad = true;
    }
    Tensor *out = c->build(in);
    float *want = read_tensor(sf, c->name, "out", out->ndim, out->shape, msg, size);
    float *R = read_tensor(sf, c->name, "R", out->ndim, out->shape, msg, size);
    if (!want || !R) goto done;
    rounding_move_input(R, out->n);
    char detail[256];
    if (!rounded_close("output", out->data, want, out->n, detail, sizeof detail)) {
        snprintf(msg, (size_t)size, "%s: output: %s", c->name, detail);
        goto done;
    }
    backward_seeded(out, R);
    for (int i = 0; i < c->n_in; i++) {
        char what[16];
        snprintf(what, sizeof what, "grad%d", i);
        float *g = read_tensor(sf, c->name, what, in[i]->ndim, in[i]->shape, msg, size);
        if (!g) goto done;
        float *got = in[i]->grad ? in[i]->grad : arena_calloc(&a, (size_t)in[i]->n * sizeof(float));
        if (!rounded_close("gradient", got, g, in[i]->n, detail, sizeof detail)) {
            snprintf(msg, (size_t)size, "%s: gradient of input %d: %s", c->name, i, detail);
            goto done;
        }
    }
    ok = true;
done:
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&a);
    return ok;
}

/* The longest sum of case c, bounded by its largest dimension. */
static long case_sum_length(const GradCase *c) {
    long K = 1;
    for (int i = 0; i < c->n_in; i++)
        for (int d = 0; d < c->in[i].ndim; d++)
            if (c->in[i].shape[d] > K) K = c->in[i].shape[d];
    return K;
}

/* reference_case_once in ROUNDING_PASSES (test_util.h): its comparisons allow
 * the rounding carried from its inputs, moved by gamma_K. */
static bool reference_gradcase(StFile *sf, const GradCase *c, char *msg, int size) {
    bool ok = false;
    ROUNDING_PASSES(case_sum_length(c), KERNEL_ROUNDING_SLACK) ok = reference_case_once(sf, c, msg, size);
    return ok;
}

static bool reference_case(StFile *sf, int k, char *msg, int size) { return reference_gradcase(sf, &op_cases[k], msg, size); }

START_TEST(test_reference_case) {
    StFile sf = fixture_open("ops.safetensors");
    char msg[512] = "";
    bool ok = reference_case(&sf, _i, msg, sizeof msg);
    st_close(&sf);
    ck_assert_msg(ok, "%s", msg);
}
END_TEST

/* The fixture and tests/op_cases.c list the same cases. */
START_TEST(test_reference_cases_match) {
    StFile sf = fixture_open("ops.safetensors");
    for (int i = 0; i < sf.n_entries; i++) {
        const char *name = sf.entries[i].name;
        const char *slash = strchr(name, '/');
        ck_assert_ptr_nonnull(slash);
        bool found = false;
        for (int k = 0; k < n_op_cases && !found; k++)
            found = strlen(op_cases[k].name) == (size_t)(slash - name) && strncmp(op_cases[k].name, name, (size_t)(slash - name)) == 0;
        ck_assert_msg(found, "fixture tensor %s has no case in tests/op_cases.c", name);
    }
    for (int k = 0; k < n_op_cases; k++) {
        char name[128];
        snprintf(name, sizeof name, "%s/out", op_cases[k].name);
        ck_assert_msg(st_find(&sf, name) != NULL, "case %s is missing from the fixture; run: make fixtures", op_cases[k].name);
    }
    st_close(&sf);
}
END_TEST

/* A broken backward, for every op and every kind of break, makes some
 * reference comparison fail. */
START_TEST(test_reference_catches_broken_backward) {
    StFile sf = fixture_open("ops.safetensors");
    for (int op = 0; op < OP_COUNT; op++) {
        for (int m = 0; m < MUTATION_COUNT; m++) {
            mutation_install(op, m);
            bool caught = false;
            for (int k = 0; k < n_op_cases && !caught; k++) {
                char msg[512];
                if (case_covers(k, op)) caught = !reference_case(&sf, k, msg, sizeof msg);
            }
            mutation_remove(op);
            ck_assert_msg(caught, "a %s backward for %s matched PyTorch", mutation_name(m), op_defs[op].name);
        }
    }
    st_close(&sf);
}
END_TEST

/* ---- kernels: a kernel's gradient-check cases (tests/layer_cases.c) against
 * tests/fixtures/kernel_<name>.safetensors, in ops.safetensors' format
 * (made by tests/reference/kernel_<name>.py), for every kernel that has one;
 * the built-in kernels have fixtures of their own formats, tests/test_attn_*.c. */

/* Opens kernel kern's fixture; false when it has none. */
static bool kernel_fixture_open(const AttnKernel *kern, StFile *sf) {
    char name[128], path[600];
    snprintf(name, sizeof name, "kernel_%s.safetensors", kern->name);
    const char *dir = getenv("ATTNLAB_FIXTURES");
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/fixtures", name);
    if (access(path, R_OK) != 0) return false;
    *sf = fixture_open(name);
    return true;
}

/* Every case of a kernel with a fixture is in it and matches; every tensor
 * of the fixture belongs to one of the kernel's cases, and it has some. */
START_TEST(test_kernel_reference) {
    for (int i = 0; i < attn_kernel_count(); i++) {
        int checked = 0;
        StFile sf;
        if (!kernel_fixture_open(attn_kernels[i], &sf)) continue;
        for (int e = 0; e < sf.n_entries; e++) {
            bool found = false;
            for (int c = 0; c < n_kernel_cases && !found; c++) {
                size_t len = strlen(kernel_cases[c].gc.name);
                found = !strcmp(kernel_cases[c].kernel, attn_kernels[i]->name) &&
                        !strncmp(sf.entries[e].name, kernel_cases[c].gc.name, len) && sf.entries[e].name[len] == '/';
            }
            ck_assert_msg(found, "fixture tensor %s is no case of kernel %s", sf.entries[e].name, attn_kernels[i]->name);
        }
        for (int c = 0; c < n_kernel_cases; c++) {
            if (strcmp(kernel_cases[c].kernel, attn_kernels[i]->name)) continue;
            char msg[512] = "";
            ck_assert_msg(reference_gradcase(&sf, &kernel_cases[c].gc, msg, sizeof msg), "%s", msg);
            checked++;
        }
        st_close(&sf);
        ck_assert_msg(checked > 0, "kernel %s has a fixture but no gradient-check case", attn_kernels[i]->name);
    }
}
END_TEST

/* Each fused op of a kernel with a fixture, its backward 10% scaled or
 * missing, fails a comparison. */
START_TEST(test_kernel_reference_catches_broken_backward) {
    for (int i = 0; i < attn_kernel_count(); i++) {
        const AttnKernel *kern = attn_kernels[i];
        StFile sf;
        if (!kernel_fixture_open(kern, &sf)) continue;
        for (int o = 0; kern->ops[o]; o++)
            for (int m = 0; m < MUTATION_COUNT; m++) {
                bool caught = false;
                kernel_mutation_install(kern->ops[o], (Mutation)m);
                for (int c = 0; c < n_kernel_cases && !caught; c++) {
                    char msg[512];
                    if (!strcmp(kernel_cases[c].kernel, kern->name))
                        caught = !reference_gradcase(&sf, &kernel_cases[c].gc, msg, sizeof msg);
                }
                kernel_mutation_remove(kern->ops[o]);
                ck_assert_msg(caught, "a %s backward for %s matched PyTorch", mutation_name((Mutation)m), kern->ops[o]->name);
            }
        st_close(&sf);
    }
}
END_TEST

Suite *reference_suite(void) {
    Suite *s = suite_create("reference");
    TCase *tc = tcase_create("pytorch");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_reference_case, 0, n_op_cases);
    tcase_add_test(tc, test_reference_cases_match);
    tcase_add_test(tc, test_reference_catches_broken_backward);
    tcase_add_test(tc, test_kernel_reference);
    tcase_add_test(tc, test_kernel_reference_catches_broken_backward);
    suite_add_tcase(s, tc);
    return s;
}
