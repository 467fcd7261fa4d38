#include "test_util.h"

#include <check.h>
#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op_cases.h"
#include "util.h"

static void (*real_backward[OP_COUNT])(Node *);

static void scaled_backward(Node *n) {
    Tensor *out = n->out;
    for (long i = 0; i < out->n; i++) out->grad[i] *= 1.1f;
    real_backward[op_id(n)](n);
    for (long i = 0; i < out->n; i++) out->grad[i] /= 1.1f;
}

static void dropped_backward(Node *n) { (void)n; }

void mutation_install(int op, Mutation m) {
    real_backward[op] = op_defs[op].backward;
    op_defs[op].backward = m == MUTATION_SCALE ? scaled_backward : dropped_backward;
}

void mutation_remove(int op) { op_defs[op].backward = real_backward[op]; }

const char *mutation_name(Mutation m) { return m == MUTATION_SCALE ? "10%-scaled" : "missing"; }

static void (*kernel_real_backward)(Node *);

static void kernel_scaled_backward(Node *n) {
    Tensor *out = n->out;
    for (long i = 0; i < out->n; i++) out->grad[i] *= 1.1f;
    kernel_real_backward(n);
    for (long i = 0; i < out->n; i++) out->grad[i] /= 1.1f;
}

void kernel_mutation_install(OpDef *op, Mutation m) {
    kernel_real_backward = op->backward;
    op->backward = m == MUTATION_SCALE ? kernel_scaled_backward : dropped_backward;
}

void kernel_mutation_remove(OpDef *op) { op->backward = kernel_real_backward; }

bool case_covers(int k, int op) {
    static bool known[64][OP_COUNT];
    static bool done[64];
    if (k >= 64) DIE("case_covers: more than 64 cases; raise the limit");
    if (!done[k]) {
        Arena a;
        arena_init(&a, 1 << 16);
        Arena *outer = engine_arena_or_null();
        engine_set_arena(&a);
        const GradCase *c = &op_cases[k];
        Tensor *in[GC_MAX_IN];
        for (int i = 0; i < c->n_in; i++) {
            in[i] = tensor_zeros(c->in[i].ndim, c->in[i].shape);
            in[i]->requires_grad = true;
        }
        bool was = grad_set(true);
        tape_reset();
        c->build(in);
        for (Node *n = tape_last(); n; n = n->prev)
            if (op_id(n) >= 0) known[k][op_id(n)] = true;
        tape_reset();
        grad_set(was);
        engine_set_arena(outer);
        arena_free(&a);
        done[k] = true;
    }
    return known[k][op];
}

int case_find(const char *name) {
    for (int k = 0; k < n_op_cases; k++)
        if (strcmp(op_cases[k].name, name) == 0) return k;
    DIE("no op case named %s", name);
}

bool close_enough(const float *got, const float *want, long n, float atol, float rtol, char *msg, int msg_size) {
    for (long i = 0; i < n; i++) {
        float tol = atol + rtol * fabsf(want[i]);
        if (!(fabsf(got[i] - want[i]) <= tol)) {
            snprintf(msg, (size_t)msg_size, "element %ld: got %.8g, want %.8g (tolerance %.2g)", i, got[i], want[i], tol);
            return false;
        }
    }
    return true;
}

double rounding_gamma(long K) {
    const double u = 0x1p-24;
    return (double)K * u / (1.0 - (double)K * u);
}

bool close_to_rounding(const char *what, const float *got, const float *want, const float *moved, long n,
                       double slack, char *msg, int msg_size) {
    double move = 0;
    for (long i = 0; i < n; i++) move = fmax(move, fabs((double)moved[i] - want[i]));
    for (long i = 0; i < n; i++) {
        double tol = slack * move + 8 * 0x1p-24 * fabs(want[i]);
        if (!(fabs((double)got[i] - want[i]) <= tol)) {
            snprintf(msg, (size_t)msg_size, "%s element %ld of %ld: got %.8g, want %.8g (rounding bound %.2g)", what, i,
                     n, got[i], want[i], tol);
            return false;
        }
    }
    return true;
}

StFile fixture_open(const char *name) {
    const char *dir = getenv("ATTNLAB_FIXTURES");
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/fixtures", name);
    StFile sf;
    Err e;
    if (st_open(&sf, path, &e) != 0) ck_abort_msg("%s (make it with: make fixtures)", e.msg);
    return sf;
}

bool fixture_read(StFile *sf, const char *c, const char *what, const Tensor *t, float *dst, char *msg, int size) {
    char name[128];
    Err e;
    snprintf(name, sizeof name, "%s/%s", c, what);
    if (st_read_expect(sf, name, t->ndim, t->shape, dst, &e) != 0) {
        snprintf(msg, (size_t)size, "%s", e.msg);
        return false;
    }
    return true;
}

bool fixture_compare(StFile *sf, const char *c, const char *what, const Tensor *t, const float *got, float atol,
                     float rtol, char *msg, int size) {
    float *want = arena_alloc(engine_arena(), (size_t)t->n * sizeof(float));
    char detail[256];
    if (!fixture_read(sf, c, what, t, want, msg, size)) return false;
    if (!close_enough(got, want, t->n, atol, rtol, detail, sizeof detail)) {
        snprintf(msg, (size_t)size, "%s/%s: %s", c, what, detail);
        return false;
    }
    return true;
}

Tensor *fixture_tensor(StFile *sf, const char *c, const char *what, int ndim, const int *shape) {
    char name[128];
    Err e;
    snprintf(name, sizeof name, "%s/%s", c, what);
    Tensor *t = tensor_new(ndim, shape);
    if (st_read_expect(sf, name, ndim, shape, t->data, &e) != 0) ck_abort_msg("%s", e.msg);
    return t;
}

bool differs(const char *what, const float *got, const float *want, long n, float atol, float rtol, char *msg,
             int size) {
    char detail[200];
    if (close_enough(got, want, n, atol, rtol, detail, sizeof detail)) return false;
    snprintf(msg, (size_t)size, "%s: %s", what, detail);
    return true;
}

const char *const kernel_fx_stage_names[] = {"output", "attention matrix", "gradients", "ok"};

KernelFxStage kernel_fixture_run(StFile *sf, const char *variant, const AttnKernel *kern, const AttnCall *c,
                                 Tensor *const leaf[5], const char *const names[5], float atol, float rtol, char *msg,
                                 int size) {
    const int ps[4] = {c->B, c->H, c->T, c->T};
    for (int i = 0; i < 5; i++)
        if (leaf[i]) leaf[i]->requires_grad = true;
    Tensor *out = kern->forward(c, leaf[0], leaf[1], leaf[2]);
    Tensor *want = fixture_tensor(sf, variant, "out", out->ndim, out->shape);
    if (differs("output", out->data, want->data, out->n, atol, rtol, msg, size)) return KERNEL_FX_OUTPUT;
    bool was = grad_set(false);
    Tensor *P = kern->probs(c, leaf[0], leaf[1]);
    grad_set(was);
    if (differs("probs", P->data, fixture_tensor(sf, variant, "probs", 4, ps)->data, P->n, atol, rtol, msg, size))
        return KERNEL_FX_PROBS;
    backward_seeded(out, fixture_tensor(sf, variant, "dout", out->ndim, out->shape)->data);
    for (int i = 0; i < 5; i++) {
        if (!leaf[i]) continue;
        char what[40];
        snprintf(what, sizeof what, "grad_%s", names[i]);
        want = fixture_tensor(sf, variant, what, leaf[i]->ndim, leaf[i]->shape);
        if (!leaf[i]->grad) {
            snprintf(msg, (size_t)size, "%s: no gradient arrived", names[i]);
            return KERNEL_FX_GRADS;
        }
        if (differs(what, leaf[i]->grad, want->data, want->n, atol, rtol, msg, size)) return KERNEL_FX_GRADS;
    }
    return KERNEL_FX_OK;
}

void test_tmpdir(char *dir, size_t size, const char *tag) {
    const char *base = getenv("TMPDIR");
    if (!base || !base[0]) base = "/tmp";
    snprintf(dir, size, "%s/attnlab_%s_XXXXXX", base, tag);
    ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp failed under %s", base);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

void test_rmtree(const char *dir) {
    if (dir[0]) nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

bool kernel_against_composition(const AttnKernel *kern, const AttnCall *c, uint64_t seed, DrawLeaves draw,
                                const void *ctx, ComposeRef compose, float atol, float rtol, char *msg, int size) {
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    bool was = grad_set(true), ok = false;
    char detail[256];
    Rng rng;
    rng_seed(&rng, seed);
    tape_reset();
    Tensor *leaves[3], *in[3];
    draw(&rng, c, ctx, leaves, in);
    long n_out = (long)c->B * c->H * c->T * c->head_size;
    float *g = arena_alloc(&a, (size_t)n_out * sizeof(float));
    rng_fill_normal(&rng, g, n_out, 0.0f, 1.0f);
    Tensor *out = kern->forward(c, in[0], in[1], in[2]);
    backward_seeded(out, g);
    float *grads[3];
    for (int l = 0; l < 3; l++) {
        grads[l] = arena_alloc(&a, (size_t)leaves[l]->n * sizeof(float));
        memcpy(grads[l], leaves[l]->grad, (size_t)leaves[l]->n * sizeof(float));
    }
    /* the same draws again, for the composition */
    tape_reset();
    rng_seed(&rng, seed);
    draw(&rng, c, ctx, leaves, in);
    Tensor *P;
    Tensor *want = compose(c, in[0], in[1], in[2], &P);
    backward_seeded(want, g);
    if (!close_enough(out->data, want->data, out->n, atol, rtol, detail, sizeof detail)) {
        snprintf(msg, (size_t)size, "output: %s", detail);
        goto done;
    }
    for (int l = 0; l < 3; l++)
        if (!close_enough(grads[l], leaves[l]->grad, leaves[l]->n, atol, rtol, detail, sizeof detail)) {
            snprintf(msg, (size_t)size, "gradient of %s: %s", (const char *[]){"q", "k", "v"}[l], detail);
            goto done;
        }
    tape_reset();
    grad_set(false);
    Tensor *Pk = kern->probs(c, in[0], in[1]);
    if (!tensor_same_shape(Pk, P) || !close_enough(Pk->data, P->data, P->n, atol, rtol, detail, sizeof detail)) {
        snprintf(msg, (size_t)size, "probs: %s", detail);
        goto done;
    }
    Tensor *pv = op_matmul(Pk, in[2], false, false);
    if (!close_enough(out->data, pv->data, out->n, atol, rtol, detail, sizeof detail)) {
        snprintf(msg, (size_t)size, "output is not probs . v: %s", detail);
        goto done;
    }
    for (long h = 0; c->causal && h < (long)c->B * c->H; h++)
        for (int i = 0; i < c->T; i++)
            for (int j = i + 1; j < c->T; j++)
                if (Pk->data[(h * c->T + i) * c->T + j] != 0.0f) {
                    snprintf(msg, (size_t)size, "probs[%d, %d] = %g above the diagonal", i, j,
                             Pk->data[(h * c->T + i) * c->T + j]);
                    goto done;
                }
    ok = true;
done:
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
    return ok;
}
