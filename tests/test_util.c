#include "gemm.h"
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

/* (The backward may have handed the output's gradient on as an input's, as
 * op_add_layernorm's does: then there is nothing to scale back.) */
static void scaled_backward(Node *n) {
    Tensor *out = n->out;
    for (long i = 0; i < out->n; i++) out->grad[i] *= 1.1f;
    real_backward[op_id(n)](n);
    for (long i = 0; out->grad && i < out->n; i++) out->grad[i] /= 1.1f;
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

double rounding_gamma(long K) {
    const double u = 0x1p-24;
    return (double)K * u / (1.0 - (double)K * u);
}

bool close_to_rounding(const char *what, const float *got, const float *want, const float *moved, const float *base,
                       long n, double slack, char *msg, int msg_size) {
    double move = 0;
    for (long i = 0; i < n; i++) move = fmax(move, fabs((double)moved[i] - base[i]));
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

/* ROUNDING_PASSES: 0 outside, 1 the moving pass, 2 the checking pass. */
static int rp_pass;
static long rp_K;
static double rp_slack;
static Rng rp_rng;
enum { RP_MAX_LOG = 512 };
static float *rp_log[RP_MAX_LOG];
static long rp_log_n[RP_MAX_LOG];
static int rp_logged, rp_at;
static bool rp_failed; /* a comparison of the checking pass failed: it stopped early */

static void rp_clear(void) {
    for (int i = 0; i < rp_logged; i++) free(rp_log[i]);
    rp_logged = rp_at = 0;
}

void rounding_begin(long K, double slack) {
    rp_clear();
    rp_pass = 0;
    rp_K = K;
    rp_slack = slack;
    rng_seed(&rp_rng, 4242);
}

bool rounding_next(void) {
    if (rp_pass == 2) {
        ck_assert_msg(rp_failed || rp_at == rp_logged, "ROUNDING_PASSES: the checking pass made %d comparisons, the moving pass %d",
                      rp_at, rp_logged);
        rp_clear();
        rp_pass = 0;
        return false;
    }
    rp_pass++;
    rp_at = 0;
    rp_failed = false;
    return true;
}

bool rounding_moving(void) { return rp_pass == 1; }

void rounding_move_input(float *x, long n) {
    if (rp_pass == 1) move_by_rounding(x, n, rp_K, &rp_rng);
}

bool rounded_close(const char *what, const float *got, const float *want, long n, char *msg, int size) {
    if (rp_pass == 0) ck_abort_msg("%s: rounded_close outside ROUNDING_PASSES: no bound to compare with", what);
    if (rp_pass == 1) {
        ck_assert_msg(rp_logged < RP_MAX_LOG, "ROUNDING_PASSES: more than %d comparisons", RP_MAX_LOG);
        rp_log[rp_logged] = xmalloc((size_t)n * sizeof(float));
        memcpy(rp_log[rp_logged], got, (size_t)n * sizeof(float));
        rp_log_n[rp_logged++] = n;
        return true;
    }
    if (rp_at >= rp_logged || rp_log_n[rp_at] != n) {
        snprintf(msg, (size_t)size, "%s: the moving pass made no comparison of %ld values here", what, n);
        rp_failed = true;
        return false;
    }
    const float *moved = rp_log[rp_at++];
    bool ok = close_to_rounding(what, got, want, moved, got, n, rp_slack, msg, size);
    rp_failed |= !ok;
    return ok;
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

bool fixture_compare(StFile *sf, const char *c, const char *what, const Tensor *t, const float *got, char *msg,
                     int size) {
    float *want = arena_alloc(engine_arena(), (size_t)t->n * sizeof(float));
    if (!fixture_read(sf, c, what, t, want, msg, size)) return false;
    char name[160];
    snprintf(name, sizeof name, "%s/%s", c, what);
    return rounded_close(name, got, want, t->n, msg, size);
}

Tensor *fixture_tensor(StFile *sf, const char *c, const char *what, int ndim, const int *shape) {
    char name[128];
    Err e;
    snprintf(name, sizeof name, "%s/%s", c, what);
    Tensor *t = tensor_new(ndim, shape);
    if (st_read_expect(sf, name, ndim, shape, t->data, &e) != 0) ck_abort_msg("%s", e.msg);
    return t;
}

const char *const kernel_fx_stage_names[] = {"output", "attention matrix", "gradients", "ok"};

void move_by_rounding(float *x, long n, long K, Rng *rng) {
    double g = rounding_gamma(K);
    for (long i = 0; i < n; i++) x[i] *= (float)(1 + g * (2 * rng_uniform(rng) - 1));
}

long kernel_sum_length(const AttnCall *c) {
    long K = c->T;
    if (c->key_size > K) K = c->key_size;
    if (c->head_size > K) K = c->head_size;
    if (c->H > K) K = c->H;
    return K;
}

/* One evaluation of a kernel on leaves: output, probs (gradients off) and
 * the leaves' gradients for dout, appended to buf (sizes in n[]). */
static long kernel_eval(const AttnKernel *kern, const AttnCall *c, Tensor *const leaf[5], const float *dout,
                        float *buf, long *n) {
    long at = 0;
    tape_reset();
    for (int i = 0; i < 5; i++)
        if (leaf[i]) leaf[i]->grad = NULL, leaf[i]->requires_grad = true;
    /* a parameter in c->params is the same tensor as its leaf */
    Tensor *out = kern->forward(c, leaf[0], leaf[1], leaf[2]);
    memcpy(buf + at, out->data, (size_t)out->n * sizeof(float));
    at += n[0] = out->n;
    bool was = grad_set(false);
    Tensor *P = kern->probs(c, leaf[0], leaf[1]);
    grad_set(was);
    memcpy(buf + at, P->data, (size_t)P->n * sizeof(float));
    at += n[1] = P->n;
    backward_seeded(out, dout);
    for (int i = 0; i < 5; i++) {
        n[2 + i] = 0;
        if (!leaf[i]) continue;
        if (leaf[i]->grad) memcpy(buf + at, leaf[i]->grad, (size_t)leaf[i]->n * sizeof(float));
        else memset(buf + at, 0xff, (size_t)leaf[i]->n * sizeof(float)); /* NaN: no gradient arrived */
        at += n[2 + i] = leaf[i]->n;
    }
    return at;
}

KernelFxStage kernel_fixture_run(StFile *sf, const char *variant, const AttnKernel *kern, const AttnCall *c,
                                 Tensor *const leaf[5], const char *const names[5], double slack, char *msg,
                                 int size) {
    const int ps[4] = {c->B, c->H, c->T, c->T};
    const int os[4] = {c->B, c->H, c->T, c->head_size};
    long total = (long)c->B * c->H * c->T * (c->head_size + c->T);
    for (int i = 0; i < 5; i++)
        if (leaf[i]) total += leaf[i]->n;
    float *got = arena_alloc(engine_arena(), (size_t)total * sizeof(float));
    float *moved = arena_alloc(engine_arena(), (size_t)total * sizeof(float));
    const float *dout = fixture_tensor(sf, variant, "dout", 4, os)->data;
    long n[7], n_moved[7];
    kernel_eval(kern, c, leaf, dout, got, n);
    /* the same with every input moved by its rounding bound, then put back */
    Rng rng;
    rng_seed(&rng, 99);
    float *saved[5] = {NULL};
    for (int i = 0; i < 5; i++) {
        if (!leaf[i]) continue;
        saved[i] = arena_alloc(engine_arena(), (size_t)leaf[i]->n * sizeof(float));
        memcpy(saved[i], leaf[i]->data, (size_t)leaf[i]->n * sizeof(float));
        move_by_rounding(leaf[i]->data, leaf[i]->n, kernel_sum_length(c), &rng);
    }
    kernel_eval(kern, c, leaf, dout, moved, n_moved);
    for (int i = 0; i < 5; i++)
        if (leaf[i]) memcpy(leaf[i]->data, saved[i], (size_t)leaf[i]->n * sizeof(float));
    /* and once more as drawn, so that the leaves' gradients are the unmoved ones */
    kernel_eval(kern, c, leaf, dout, got, n);
    char detail[300];
    if (!close_to_rounding("output", got, fixture_tensor(sf, variant, "out", 4, os)->data, moved, got, n[0], slack, detail,
                           sizeof detail)) {
        snprintf(msg, (size_t)size, "%s", detail);
        return KERNEL_FX_OUTPUT;
    }
    long at = n[0];
    if (!close_to_rounding("probs", got + at, fixture_tensor(sf, variant, "probs", 4, ps)->data, moved + at, got + at, n[1],
                           slack, detail, sizeof detail)) {
        snprintf(msg, (size_t)size, "%s", detail);
        return KERNEL_FX_PROBS;
    }
    at += n[1];
    for (int i = 0; i < 5; i++) {
        if (!leaf[i]) continue;
        char what[40];
        snprintf(what, sizeof what, "grad_%s", names[i]);
        Tensor *want = fixture_tensor(sf, variant, what, leaf[i]->ndim, leaf[i]->shape);
        if (!leaf[i]->grad) {
            snprintf(msg, (size_t)size, "%s: no gradient arrived", names[i]);
            return KERNEL_FX_GRADS;
        }
        if (!close_to_rounding(what, got + at, want->data, moved + at, got + at, n[2 + i], slack, detail, sizeof detail)) {
            snprintf(msg, (size_t)size, "%s", detail);
            return KERNEL_FX_GRADS;
        }
        at += n[2 + i];
    }
    return KERNEL_FX_OK;
}

const char *const fx_stage_names[] = {"reading", "output", "check after the output", "attention matrix",
                                      "gradients", "ok"};

/* One pass of fixture_case_run, in an arena of its own. */
static FxStage fixture_case_once(StFile *sf, const FixtureCase *fc, char *msg, int size) {
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    bool was = grad_set(true);
    tape_reset();
    FxStage stage = FX_READ;
    Tensor *leaf[5] = {NULL};
    const char *names[5] = {NULL};
    int n = fc->leaves(fc->ctx, leaf, names);
    if (fc->matches && !fc->matches(sf, fc->ctx, msg, size)) goto done;
    for (int l = 0; l < n; l++) {
        if (!fixture_read(sf, fc->name, names[l], leaf[l], leaf[l]->data, msg, size)) goto done;
        rounding_move_input(leaf[l]->data, leaf[l]->n);
        leaf[l]->requires_grad = true;
    }
    Tensor *out = fc->forward(fc->ctx, leaf);
    float *R = arena_alloc(&a, (size_t)out->n * sizeof(float));
    if (!fixture_read(sf, fc->name, "R", out, R, msg, size)) goto done;
    rounding_move_input(R, out->n);
    stage = FX_OUT;
    if (!fixture_compare(sf, fc->name, "out", out, out->data, msg, size)) goto done;
    stage = FX_CHECK;
    if (fc->check && !fc->check(fc->ctx, msg, size)) goto done;
    stage = FX_PROBS;
    if (fc->probs) {
        grad_set(false);
        Tensor *P = fc->probs(fc->ctx, leaf);
        grad_set(true);
        if (!fixture_compare(sf, fc->name, "probs", P, P->data, msg, size)) goto done;
    }
    stage = FX_GRADS;
    backward_seeded(out, R);
    for (int l = 0; l < n; l++) {
        char what[16];
        snprintf(what, sizeof what, "grad_%s", names[l]);
        const float *g = leaf[l]->grad ? leaf[l]->grad : arena_calloc(&a, (size_t)leaf[l]->n * sizeof(float));
        if (!fixture_compare(sf, fc->name, what, leaf[l], g, msg, size)) goto done;
    }
    stage = FX_OK;
done:
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
    return stage;
}

FxStage fixture_case_run(StFile *sf, const FixtureCase *fc, char *msg, int size) {
    FxStage r = FX_READ;
    ROUNDING_PASSES(fc->sum_length, KERNEL_ROUNDING_SLACK) r = fixture_case_once(sf, fc, msg, size);
    return r;
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
                                const void *ctx, ComposeRef compose, double slack, char *msg, int size) {
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    bool was = grad_set(true), ok = false;
    char detail[300];
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
    /* The composition on the same draws: first with the kernel's inputs
     * moved by their rounding bound (close_to_rounding), then as drawn. */
    float *moved[5];
    Tensor *P = NULL, *want = NULL;
    for (int pass = 0; pass < 2; pass++) {
        tape_reset();
        rng_seed(&rng, seed);
        draw(&rng, c, ctx, leaves, in);
        if (pass == 0) {
            Rng jitter;
            rng_seed(&jitter, seed ^ 0x5bd1e995u);
            for (int l = 0; l < 3; l++) move_by_rounding(in[l]->data, in[l]->n, kernel_sum_length(c), &jitter);
        }
        want = compose(c, in[0], in[1], in[2], &P);
        backward_seeded(want, g);
        if (pass == 1) break;
        moved[0] = arena_alloc(&a, (size_t)want->n * sizeof(float));
        memcpy(moved[0], want->data, (size_t)want->n * sizeof(float));
        for (int l = 0; l < 3; l++) {
            moved[1 + l] = arena_alloc(&a, (size_t)leaves[l]->n * sizeof(float));
            memcpy(moved[1 + l], leaves[l]->grad, (size_t)leaves[l]->n * sizeof(float));
        }
        moved[4] = arena_alloc(&a, (size_t)P->n * sizeof(float));
        memcpy(moved[4], P->data, (size_t)P->n * sizeof(float));
    }
    if (!close_to_rounding("output", out->data, want->data, moved[0], want->data, out->n, slack, detail, sizeof detail)) {
        snprintf(msg, (size_t)size, "%s", detail);
        goto done;
    }
    for (int l = 0; l < 3; l++)
        if (!close_to_rounding((const char *[]){"gradient of q", "gradient of k", "gradient of v"}[l], grads[l],
                               leaves[l]->grad, moved[1 + l], leaves[l]->grad, leaves[l]->n, slack, detail, sizeof detail)) {
            snprintf(msg, (size_t)size, "%s", detail);
            goto done;
        }
    tape_reset();
    grad_set(false);
    Tensor *Pk = kern->probs(c, in[0], in[1]);
    if (!tensor_same_shape(Pk, P) ||
        !close_to_rounding("probs", Pk->data, P->data, moved[4], P->data, P->n, slack, detail, sizeof detail)) {
        snprintf(msg, (size_t)size, "%s", detail);
        goto done;
    }
    Tensor *pv = op_matmul(Pk, in[2], false, false);
    if (!close_to_rounding("output", out->data, pv->data, moved[0], want->data, out->n, slack, detail, sizeof detail)) {
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

bool bf16_runs_here(const char *who) {
    Err e = {0};
    if (gemm_bf16_check(&e) == 0) return true;
    printf("%s: bf16 tests skipped: %s\n", who, e.msg);
    return false;
}
