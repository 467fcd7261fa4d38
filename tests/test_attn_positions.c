/* test_attn_positions.c: positions inside the plain softmax kernel
 * (layers/attention/softmax_op.c, the schemes' bias hooks, alibi.c, kerple.c, sandwich.c): windows, bca, log-n
 * scaling and the ALiBi, KERPLE and Sandwich score biases.
 *
 * fixture: tests/fixtures/attn_positions.safetensors (tests/reference/
 * attention_positions.py) holds, for every scheme, windows W = 1, 7 and
 * W > T, bca, log-n and combinations, the inputs, PyTorch's output, P and
 * every gradient (q, k, v and the kerple parameters, some heads outside their
 * clamps), computed in float64. The kernel must match at float32 tolerance
 * with query blocks of 64 (one block), 16 and 7 rows, and stop matching when
 * its backward is broken.
 *
 * blocks: the gradient-check cases of tests/cases_positions.c again, with
 * blocks of 2 rows; a backward that ignores the window, or gets the bias
 * parameters' gradient 10% wrong, fails them.
 *
 * memory: with a window the op's arena bytes grow linearly in T; without
 * gradients nothing of size T x T is kept.
 *
 * probs: P v is the output, rows sum to 1, and P is 0 outside each row's keys.
 *
 * model: kerple parameters are declared under their PyTorch names, start as
 * the KERPLE reference draws them, and get gradients. */
#include <cJSON.h>
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/softmax_parts.h"
#include "blas_stub.h"
#include "cases_positions.h"
#include "model.h"
#include "safetensors.h"
#include "test_util.h"

/* float32 against float64; a 10% error in any backward is far outside. */
#define ATOL 1e-5f
#define RTOL 1e-4f

static OpDef *softmax_op(void) {
    const AttnKernel *k = attn_kernel_for(ATTN_SOFTMAX);
    for (int i = 0; k->ops[i]; i++)
        if (strcmp(k->ops[i]->name, "attn_softmax") == 0) return k->ops[i];
    ck_abort_msg("the softmax kernel lists no attn_softmax op");
    return NULL;
}

/* ---- broken backwards of our own -------------------------------------------- */

static void (*real_backward)(Node *);

/* The bias parameters' gradient 10% too large; q, k, v's untouched. */
static void bias_grad_scaled_backward(Node *n) {
    float before[2][64];
    for (int i = 3; i < n->n_in; i++)
        if (n->in[i]->requires_grad) memcpy(before[i - 3], tensor_grad(n->in[i]), (size_t)n->in[i]->n * sizeof(float));
    real_backward(n);
    for (int i = 3; i < n->n_in; i++) {
        if (!n->in[i]->requires_grad) continue;
        float *g = tensor_grad(n->in[i]);
        for (long e = 0; e < n->in[i]->n; e++) g[e] = before[i - 3][e] + 1.1f * (g[e] - before[i - 3][e]);
    }
}

/* Backward as if there were no window (full causal attention). */
static void window_ignored_backward(Node *n) {
    SoftmaxAttrs *a = NODE_ATTRS(n, SoftmaxAttrs);
    int w = a->window;
    a->window = 0;
    real_backward(n);
    a->window = w;
}

typedef enum { BREAK_NONE, BREAK_SCALE, BREAK_DROP, BREAK_BIAS_GRAD, BREAK_WINDOW } Break;

static void break_install(Break b) {
    OpDef *op = softmax_op();
    if (b == BREAK_SCALE || b == BREAK_DROP) {
        kernel_mutation_install(op, b == BREAK_SCALE ? MUTATION_SCALE : MUTATION_DROP);
    } else if (b != BREAK_NONE) {
        real_backward = op->backward;
        op->backward = b == BREAK_BIAS_GRAD ? bias_grad_scaled_backward : window_ignored_backward;
    }
}

static void break_remove(Break b) {
    OpDef *op = softmax_op();
    if (b == BREAK_SCALE || b == BREAK_DROP)
        kernel_mutation_remove(op);
    else if (b != BREAK_NONE)
        op->backward = real_backward;
}

/* ---- the fixture ------------------------------------------------------------- */

#define MAX_VARIANTS 24

typedef struct {
    char name[40];
    int pos, window;
    bool causal, bca, logn;
} Variant;

typedef struct {
    int B, H, T, dk, dv, context;
    float lambda;
    int n;
    Variant v[MAX_VARIANTS];
} Fixture;

static const cJSON *item(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    ck_assert_msg(v != NULL, "fixture JSON: no %s", key);
    return v;
}

static int pos_from_name(const char *s) {
    static const char *const names[] = {"none",         "learned",    "sinusoidal", "rope", "alibi",
                                        "kerple_power", "kerple_log", "sandwich",   "xpos"};
    for (int i = 0; i < 9; i++)
        if (strcmp(s, names[i]) == 0) return i;
    ck_abort_msg("fixture: unknown pos %s", s);
    return -1;
}

static Fixture read_fixture(const StFile *sf) {
    Fixture f = {0};
    const char *text = st_meta(sf, "shape");
    ck_assert_msg(text != NULL, "fixture metadata has no shape");
    cJSON *o = cJSON_Parse(text);
    ck_assert_ptr_nonnull(o);
    f.B = item(o, "B")->valueint;
    f.H = item(o, "H")->valueint;
    f.T = item(o, "T")->valueint;
    f.dk = item(o, "key_size")->valueint;
    f.dv = item(o, "head_size")->valueint;
    f.context = item(o, "context")->valueint;
    f.lambda = (float)item(o, "sandwich_lambda")->valuedouble;
    cJSON_Delete(o);
    text = st_meta(sf, "variants");
    ck_assert_msg(text != NULL, "fixture metadata has no variants");
    o = cJSON_Parse(text);
    ck_assert(cJSON_IsArray(o));
    const cJSON *it;
    cJSON_ArrayForEach(it, o) {
        ck_assert_int_lt(f.n, MAX_VARIANTS);
        Variant *v = &f.v[f.n++];
        snprintf(v->name, sizeof v->name, "%s", item(it, "name")->valuestring);
        v->pos = pos_from_name(item(it, "pos")->valuestring);
        v->causal = cJSON_IsTrue(item(it, "causal"));
        v->window = item(it, "window")->valueint;
        v->bca = cJSON_IsTrue(item(it, "bca"));
        v->logn = cJSON_IsTrue(item(it, "logn"));
    }
    cJSON_Delete(o);
    return f;
}


typedef KernelFxStage Stage;
#define STAGE_GRADS KERNEL_FX_GRADS
#define STAGE_OK KERNEL_FX_OK
#define stage_names kernel_fx_stage_names

/* The call of variant v in blocks of query_block rows, its config in *m. */
static AttnCall fixture_call(ModelConfig *m, const Fixture *f, const Variant *v, int query_block) {
    *m = (ModelConfig){.context = f->context, .pos = v->pos, .sandwich_lambda = f->lambda, .window = v->window,
                       .logn = v->logn, .bca = v->bca};
    softmax_opts(m)->query_block = query_block;
    return (AttnCall){.B = f->B, .H = f->H, .T = f->T, .key_size = f->dk, .head_size = f->dv, .causal = v->causal,
                      .scale = 1.0f / sqrtf((float)f->dk), .cfg = m, .opts = softmax_opts(m)};
}

static const char *kerple_name(int pos, int i) {
    if (pos == pos_of("kerple_power")) return i ? "kerple_p" : "kerple_a";
    return i ? "kerple_r2" : "kerple_r1";
}

static Stage run_variant(StFile *sf, const Fixture *f, const Variant *v, int query_block, char *msg, int size) {
    Arena a;
    arena_init(&a, 1 << 20);
    engine_set_arena(&a);
    tape_reset();
    bool was = grad_set(true);
    const int qs[4] = {f->B, f->H, f->T, f->dk}, vs[4] = {f->B, f->H, f->T, f->dv}, hs[1] = {f->H};
    int np = pos_param_count(v->pos);
    const char *names[5] = {"q", "k", "v", np ? kerple_name(v->pos, 0) : NULL, np ? kerple_name(v->pos, 1) : NULL};
    Tensor *leaf[5] = {fixture_tensor(sf, v->name, "q", 4, qs), fixture_tensor(sf, v->name, "k", 4, qs),
                       fixture_tensor(sf, v->name, "v", 4, vs), np ? fixture_tensor(sf, v->name, names[3], 1, hs) : NULL,
                       np ? fixture_tensor(sf, v->name, names[4], 1, hs) : NULL};
    ModelConfig m;
    AttnCall c = fixture_call(&m, f, v, query_block);
    if (np) c.params[0] = leaf[3], c.params[1] = leaf[4];
    Stage stage = kernel_fixture_run(sf, v->name, attn_kernel_for(ATTN_SOFTMAX), &c, leaf, names, KERNEL_ROUNDING_SLACK,
                                     msg, size);
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
    return stage;
}

static const int block_rows[] = {64, 16, 7};

/* Every variant, with one query block (64 > T = 40) and with several. */
START_TEST(test_positions_fixture) {
    StFile sf = fixture_open("attn_positions.safetensors");
    Fixture f = read_fixture(&sf);
    ck_assert_int_eq(f.n, 21);
    ck_assert_int_lt(f.T, 64);
    for (int b = 0; b < 3; b++) {
        for (int i = 0; i < f.n; i++) {
            char msg[300] = "";
            Stage s = run_variant(&sf, &f, &f.v[i], block_rows[b], msg, sizeof msg);
            ck_assert_msg(s == STAGE_OK, "%s (blocks of %d rows) differs from PyTorch at the %s: %s", f.v[i].name,
                          block_rows[b], stage_names[s], msg);
        }
    }
    st_close(&sf);
}
END_TEST

/* Scaled or missing backward: every variant fails at the gradients. A wrong
 * bias-parameter gradient: every kerple variant does. Window ignored in
 * backward: every variant with a window shorter than T does. */
START_TEST(test_positions_fixture_catches_broken_backward) {
    StFile sf = fixture_open("attn_positions.safetensors");
    Fixture f = read_fixture(&sf);
    const Break breaks[] = {BREAK_SCALE, BREAK_DROP, BREAK_BIAS_GRAD, BREAK_WINDOW};
    for (int bi = 0; bi < 4; bi++) {
        Break br = breaks[bi];
        int hit = 0;
        for (int i = 0; i < f.n; i++) {
            const Variant *v = &f.v[i];
            bool affected = br == BREAK_SCALE || br == BREAK_DROP ||
                            (br == BREAK_BIAS_GRAD && pos_param_count(v->pos)) ||
                            (br == BREAK_WINDOW && v->window > 0 && v->window < f.T);
            char msg[300] = "";
            break_install(br);
            Stage s = run_variant(&sf, &f, v, 16, msg, sizeof msg);
            break_remove(br);
            if (affected) {
                hit++;
                ck_assert_msg(s == STAGE_GRADS, "break %d: variant %s stopped at the %s (%s)", br, v->name,
                              stage_names[s], msg);
            } else {
                ck_assert_msg(s == STAGE_OK, "break %d should not touch %s, which stopped at the %s (%s)", br,
                              v->name, stage_names[s], msg);
            }
        }
        ck_assert_int_gt(hit, 1);
    }
    st_close(&sf);
}
END_TEST

/* The kerple parameters' gradients do not depend on the thread count. */
START_TEST(test_positions_threads_same_bits) {
    StFile sf = fixture_open("attn_positions.safetensors");
    Fixture f = read_fixture(&sf);
    const Variant *v = NULL;
    for (int i = 0; i < f.n; i++)
        if (strcmp(f.v[i].name, "kerple_log_bidirectional") == 0) v = &f.v[i];
    ck_assert_ptr_nonnull(v);
    float bits[2][3 * 4 + 64];
    /* Our kernel's bits, not OpenBLAS's (blas_stub.h). */
    bool stub_was = blas_stub_set(true);
    int before = engine_threads();
    for (int run = 0; run < 2; run++) {
        engine_set_threads(run + 1);
        Arena a;
        arena_init(&a, 1 << 20);
        engine_set_arena(&a);
        tape_reset();
        bool was = grad_set(true);
        const int qs[4] = {f.B, f.H, f.T, f.dk}, vs[4] = {f.B, f.H, f.T, f.dv}, hs[1] = {f.H};
        Tensor *leaf[5] = {fixture_tensor(&sf, v->name, "q", 4, qs), fixture_tensor(&sf, v->name, "k", 4, qs),
                           fixture_tensor(&sf, v->name, "v", 4, vs), fixture_tensor(&sf, v->name, "kerple_r1", 1, hs),
                           fixture_tensor(&sf, v->name, "kerple_r2", 1, hs)};
        for (int i = 0; i < 5; i++) leaf[i]->requires_grad = true;
        ModelConfig m;
        AttnCall c = fixture_call(&m, &f, v, 16);
        c.params[0] = leaf[3];
        c.params[1] = leaf[4];
        Tensor *out = attn_kernel_for(ATTN_SOFTMAX)->forward(&c, leaf[0], leaf[1], leaf[2]);
        backward_seeded(out, fixture_tensor(&sf, v->name, "dout", 4, vs)->data);
        memcpy(bits[run], leaf[3]->grad, (size_t)f.H * sizeof(float));
        memcpy(bits[run] + f.H, leaf[4]->grad, (size_t)f.H * sizeof(float));
        memcpy(bits[run] + 2 * f.H, leaf[0]->grad, 64 * sizeof(float));
        tape_reset();
        grad_set(was);
        engine_set_arena(NULL);
        arena_free(&a);
    }
    engine_set_threads(before);
    blas_stub_set(stub_was);
    ck_assert_msg(memcmp(bits[0], bits[1], (size_t)(2 * f.H + 64) * sizeof(float)) == 0,
                  "attn_softmax with kerple_log: 1 and 2 threads give different bits");
    st_close(&sf);
}
END_TEST

/* ---- the gradient-check cases with several blocks ----------------------------- */

static bool is_position_case(const KernelCase *kc) { return strncmp(kc->gc.name, "attn_pos_", 9) == 0; }

START_TEST(test_positions_gradcheck_small_blocks) {
    int ran = 0;
    positions_query_block = 2;
    for (int c = 0; c < n_kernel_cases; c++) {
        const KernelCase *kc = &kernel_cases[c];
        if (!is_position_case(kc)) continue;
        GcResult r;
        bool ok = gradcheck(&kc->gc, 1234 + (uint64_t)c, NULL, &r);
        ck_assert_msg(ok, "gradcheck %s with 2-row blocks failed: %s (worst error/tolerance %.3g)", kc->gc.name, r.why,
                      r.worst_ratio);
        ran++;
    }
    positions_query_block = 0;
    ck_assert_int_ge(ran, 19);
}
END_TEST

/* The two broken backwards of our own fail the gradient checks they concern:
 * the bias gradient with one block and with several; the window with several
 * (within one block backward reads the window only from P's zeros, so a
 * backward that ignores it is still right there; across blocks it reads the
 * wrong key spans and offsets). */
START_TEST(test_positions_gradcheck_catches_broken_backward) {
    const char *bias_cases[] = {"attn_pos_kerple_power_causal", "attn_pos_kerple_power_bidirectional",
                                "attn_pos_kerple_power_clamp", "attn_pos_kerple_log_causal",
                                "attn_pos_kerple_log_bidirectional", "attn_pos_kerple_log_clamp",
                                "attn_pos_kerple_bca"};
    const char *window_cases[] = {"attn_pos_window1", "attn_pos_window2", "attn_pos_window3",
                                  "attn_pos_alibi_window_logn", "attn_pos_window2_bidirectional",
                                  "attn_pos_alibi_window_logn_bidirectional"};
    for (int qb = 0; qb < 2; qb++) {
        positions_query_block = qb ? 2 : 0;
        for (int w = 0; w < 1 + qb; w++) {
            Break br = w ? BREAK_WINDOW : BREAK_BIAS_GRAD;
            int n = w ? 6 : 7;
            for (int i = 0; i < n; i++) {
                const char *name = w ? window_cases[i] : bias_cases[i];
                const KernelCase *kc = NULL;
                for (int c = 0; c < n_kernel_cases; c++)
                    if (strcmp(kernel_cases[c].gc.name, name) == 0) kc = &kernel_cases[c];
                ck_assert_msg(kc != NULL, "no kernel case %s", name);
                GcResult r;
                break_install(br);
                bool ok = gradcheck(&kc->gc, 99, NULL, &r);
                break_remove(br);
                ck_assert_msg(!ok, "a %s backward passed the gradient check %s (blocks of %d)",
                              w ? "window-ignoring" : "bias-gradient-scaling", name, qb ? 2 : SOFTMAX_QUERY_BLOCK);
            }
        }
    }
    positions_query_block = 0;
}
END_TEST

/* ---- memory -------------------------------------------------------------------- */

/* Arena bytes of one forward + backward of the op (q, k, v made before). */
static size_t op_bytes(int T, int window, bool grads) {
    const int B = 1, H = 2, d = 8;
    Arena a;
    arena_init(&a, 1 << 20);
    engine_set_arena(&a);
    tape_reset();
    bool was = grad_set(grads);
    Rng rng;
    rng_seed(&rng, 3);
    Tensor *x[3];
    for (int i = 0; i < 3; i++) {
        x[i] = tensor_4d(B, H, T, d);
        rng_fill_normal(&rng, x[i]->data, x[i]->n, 0.0f, 1.0f);
        x[i]->requires_grad = grads;
    }
    size_t start = arena_in_use(&a);
    ModelConfig m = {.context = 64, .pos = pos_of("alibi"), .window = window};
    AttnCall c = {.B = B, .H = H, .T = T, .key_size = d, .head_size = d, .causal = true,
                  .scale = 1.0f / sqrtf((float)d), .cfg = &m, .opts = softmax_opts(&m)};
    Tensor *out = attn_kernel_for(ATTN_SOFTMAX)->forward(&c, x[0], x[1], x[2]);
    if (grads) {
        float *seed = xmalloc((size_t)out->n * sizeof(float));
        for (long i = 0; i < out->n; i++) seed[i] = 1.0f;
        backward_seeded(out, seed);
        free(seed);
    }
    size_t used = arena_in_use(&a) - start;
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
    return used;
}

/* Forward and backward keep nothing T x T: each row's max and 1 / sum, and
 * one block of rows per thread, so memory grows linearly in T (each doubling
 * of T adds twice what the one before added), with a window and without. */
START_TEST(test_positions_window_memory_linear) {
    for (int w = 0; w < 2; w++) {
        int window = w ? 64 : 0;
        size_t m1 = op_bytes(1024, window, true), m2 = op_bytes(2048, window, true), m4 = op_bytes(4096, window, true);
        double ratio = (double)(m4 - m2) / (double)(m2 - m1);
        ck_assert_msg(ratio > 1.8 && ratio < 2.2, "window %d: T 1024, 2048, 4096 use %zu, %zu, %zu bytes (growth ratio %.2f, want 2)",
                      window, m1, m2, m4, ratio);
        ck_assert_msg(m4 < (size_t)4096 * 4096 * sizeof(float) / 8, "window %d at T 4096 uses %zu bytes", window, m4);
    }
}
END_TEST

/* Full causal attention at T 2048 keeps far less than the H T^2 / 2 floats
 * of its causal P, with gradients and without. */
START_TEST(test_positions_causal_memory) {
    const int T = 2048;
    size_t with = op_bytes(T, 0, true), without = op_bytes(T, 0, false);
    size_t half = (size_t)2 * T * T / 2 * sizeof(float);
    ck_assert_msg(with < half / 4, "causal, T %d, with gradients: %zu bytes, H T^2 / 2 floats are %zu", T, with, half);
    ck_assert_msg(without < half / 8, "causal, T %d, no gradients: %zu bytes", T, without);
}
END_TEST

/* The plain kernel's counted work (./bench --scaling) is 2 (4 dk + 3 dv) per
 * head and key seen, over the keys each row sees: at T 8, 36 causal, 64
 * bidirectional, 21 in a causal window of 3, 34 in a bidirectional one
 * (3 + 4 + 5 x 4 + 4 + 3); at T 16 under bca with context 8 (blocks of 4
 * keys: rows 0-3 see 1-4 keys, every later row its block so far and the
 * one before, 5-8), 10 + 3 x 26 = 88 against causal attention's 136;
 * talking heads is not counted. */
START_TEST(test_positions_flops) {
    struct {
        bool causal;
        int window, bca, T;
        double keys;
    } cs[] = {{true, 0, OFF, 8, 36},  {false, 0, OFF, 8, 64}, {true, 3, OFF, 8, 21},
              {false, 3, OFF, 8, 34}, {true, 0, ON, 16, 88},  {true, 0, OFF, 16, 136}};
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        ModelConfig m = {.heads = 3, .d_model = 12, .key_size = 4, .head_size = 5, .context = 8,
                         .objective = cs[i].causal ? OBJECTIVE_CLM : OBJECTIVE_MLM, .window = cs[i].window,
                         .bca = cs[i].bca};
        double f = attn_kernel_softmax.flops(&m, cs[i].T);
        ck_assert_msg(f == 2.0 * 3 * cs[i].keys * (4 * 4 + 3 * 5), "case %zu: %g flops, want %g", i, f,
                      2.0 * 3 * cs[i].keys * 31);
    }
    ModelConfig m = {.heads = 2, .d_model = 8, .context = 8};
    softmax_opts(&m)->talking_heads = TALKING_BOTH;
    ck_assert(isnan(attn_kernel_softmax.flops(&m, 8)));
}
END_TEST

/* ---- probs ------------------------------------------------------------------------- */

enum { PB = 2, PH = 3, PT = 40, PD = 6 };

START_TEST(test_positions_probs_consistent) {
    ROUNDING_PASSES(PT, KERNEL_ROUNDING_SLACK) {
        struct {
            int pos, window;
            bool causal, bca, logn;
        } vs[] = {{pos_of("none"), 5, true, false, false},   {pos_of("none"), 0, true, true, false},
                  {pos_of("alibi"), 0, true, false, false},  {pos_of("kerple_power"), 0, false, false, false},
                  {pos_of("kerple_log"), 9, true, false, true}, {pos_of("sandwich"), 0, false, false, true},
                  {pos_of("alibi"), 0, true, true, true}};
        Arena a;
        arena_init(&a, 1 << 20);
        engine_set_arena(&a);
        bool was = grad_set(false);
        Rng rng;
        rng_seed(&rng, 41);
        Tensor *x[3];
        for (int i = 0; i < 3; i++) {
            x[i] = tensor_4d(PB, PH, PT, PD);
            rng_fill_normal(&rng, x[i]->data, x[i]->n, 0.0f, 1.0f);
            rounding_move_input(x[i]->data, x[i]->n);
        }
        Tensor *pa = tensor_new(1, (int[]){PH}), *pp = tensor_new(1, (int[]){PH});
        for (int h = 0; h < PH; h++) pa->data[h] = 0.3f + 0.4f * h, pp->data[h] = 0.5f + 0.6f * h;
        for (size_t t = 0; t < sizeof vs / sizeof vs[0]; t++) {
            ModelConfig m = {.context = 16, .pos = vs[t].pos, .sandwich_lambda = 0.8f, .window = vs[t].window,
                             .logn = vs[t].logn, .bca = vs[t].bca};
            softmax_opts(&m)->query_block = 16;
            AttnCall c = {.B = PB, .H = PH, .T = PT, .key_size = PD, .head_size = PD, .causal = vs[t].causal,
                          .scale = 1.0f / sqrtf((float)PD), .params = {pa, pp}, .cfg = &m, .opts = softmax_opts(&m)};
            const AttnKernel *kern = attn_kernel_for(ATTN_SOFTMAX);
            Tensor *out = kern->forward(&c, x[0], x[1], x[2]), *P = kern->probs(&c, x[0], x[1]);
            Tensor *pv = op_matmul(P, x[2], false, false);
            char detail[200];
            ck_assert_msg(rounded_close("output", out->data, pv->data, out->n, detail, sizeof detail),
                          "variant %zu: output is not P v: %s", t, detail);
            float *mask = xmalloc((size_t)PT * PT * sizeof(float)), lambda[PT];
            float *bias = xmalloc((size_t)PH * PT * PT * sizeof(float));
            positions_reference(&c, pa->data, pp->data, mask, lambda, bias);
            for (long bh = 0; bh < PB * PH; bh++)
                for (int i = 0; i < PT; i++) {
                    double sum = 0.0;
                    for (int j = 0; j < PT; j++) {
                        float p = P->data[(bh * PT + i) * PT + j];
                        sum += p;
                        if (mask[i * PT + j] != 0.0f)
                            ck_assert_msg(p == 0.0f, "variant %zu: P[%d, %d] = %g outside the row's keys", t, i, j,
                                          (double)p);
                    }
                    ck_assert_msg(fabs(sum - 1.0) < 1e-5, "variant %zu: row %d sums to %g", t, i, sum);
                }
            free(mask);
            free(bias);
        }
        grad_set(was);
        engine_set_arena(NULL);
        arena_free(&a);
    }
}
END_TEST

/* Without gradients the output is the same, bit for bit. */
START_TEST(test_positions_no_grad_same_output) {
    Arena a;
    arena_init(&a, 1 << 20);
    engine_set_arena(&a);
    Rng rng;
    rng_seed(&rng, 43);
    Tensor *x[3];
    for (int i = 0; i < 3; i++) {
        x[i] = tensor_4d(PB, PH, PT, PD);
        rng_fill_normal(&rng, x[i]->data, x[i]->n, 0.0f, 1.0f);
        x[i]->requires_grad = true;
    }
    ModelConfig m = {.context = 16, .pos = pos_of("sandwich"), .sandwich_lambda = 1.0f, .window = 11, .logn = true};
    softmax_opts(&m)->query_block = 16;
    AttnCall c = {.B = PB, .H = PH, .T = PT, .key_size = PD, .head_size = PD, .causal = true,
                  .scale = 1.0f / sqrtf((float)PD), .cfg = &m, .opts = softmax_opts(&m)};
    bool was = grad_set(true);
    Tensor *with = attn_kernel_for(ATTN_SOFTMAX)->forward(&c, x[0], x[1], x[2]);
    grad_set(false);
    Tensor *without = attn_kernel_for(ATTN_SOFTMAX)->forward(&c, x[0], x[1], x[2]);
    ck_assert(memcmp(with->data, without->data, (size_t)with->n * sizeof(float)) == 0);
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
}
END_TEST

/* ---- the schemes' constants ------------------------------------------------------- */

START_TEST(test_positions_alibi_slopes) {
    float m[8];
    alibi_slopes(8, m);
    for (int h = 0; h < 8; h++) ck_assert_float_eq_tol(m[h], powf(2.0f, -(float)(h + 1)), 1e-9f);
    alibi_slopes(3, m); /* 2^-4, 2^-8 (two heads), then 2^-2, the first of four heads' odd ones */
    ck_assert_float_eq_tol(m[0], 1.0f / 16, 1e-9f);
    ck_assert_float_eq_tol(m[1], 1.0f / 256, 1e-9f);
    ck_assert_float_eq_tol(m[2], 1.0f / 4, 1e-9f);
    alibi_slopes(6, m); /* four heads: 2^-2 .. 2^-8; then 2^-1, 2^-3 */
    const float want6[6] = {0.25f, 1.0f / 16, 1.0f / 64, 1.0f / 256, 0.5f, 0.125f};
    for (int h = 0; h < 6; h++) ck_assert_float_eq_tol(m[h], want6[h], 1e-9f);
}
END_TEST

/* ---- the model -------------------------------------------------------------------- */

static ModelConfig small_config(int pos) {
    return (ModelConfig){.vocab = 256, .layers = 2, .d_model = 16, .heads = 4, .mlp_ratio = 2, .context = 8,
                         .norm = NORM_LAYERNORM, .tie_embeddings = true, .attn = ATTN_SOFTMAX, .pos = pos,
                         .sandwich_lambda = 1.0f, .objective = OBJECTIVE_CLM};
}

START_TEST(test_positions_model_params) {
    const int pos[] = {pos_of("alibi"), pos_of("kerple_power"), pos_of("kerple_log"), pos_of("sandwich")};
    for (int t = 0; t < 4; t++) {
        ModelConfig cfg = small_config(pos[t]);
        Model m;
        model_init(&m, &cfg);
        Rng rng;
        rng_seed(&rng, 8);
        model_init_weights(&m, &rng);
        int found = 0;
        for (int l = 0; l < cfg.layers; l++)
            for (int i = 0; i < 4; i++) {
                const char *names[4] = {"kerple_a", "kerple_p", "kerple_r1", "kerple_r2"};
                char name[64];
                snprintf(name, sizeof name, "blocks.%d.attn.%s", l, names[i]);
                Tensor *w = params_find(&m.params, name);
                bool want = (pos[t] == pos_of("kerple_power") && i < 2) || (pos[t] == pos_of("kerple_log") && i >= 2);
                ck_assert_msg((w != NULL) == want, "pos %d: %s is %s", pos[t], name, w ? "declared" : "missing");
                if (!w) continue;
                found++;
                ck_assert_int_eq(w->ndim, 1);
                ck_assert_int_eq(w->shape[0], cfg.heads);
                float hi = i == 1 || i == 2 ? 2.0f : 1.0f; /* p, r1 in [0, 2); a, r2 in [0, 1) */
                for (int h = 0; h < cfg.heads; h++)
                    ck_assert_msg(w->data[h] >= 0.01f && w->data[h] <= hi, "%s[%d] = %g", name, h,
                                  (double)w->data[h]);
            }
        ck_assert_int_eq(found, pos_param_count(pos[t]) * cfg.layers);
        /* one step: finite loss; kerple parameters get finite, non-zero gradients */
        int ids[2 * 8], targets[2 * 8];
        for (int i = 0; i < 16; i++) ids[i] = (i * 37 + 11) % 256, targets[i] = (i * 53 + 5) % 256;
        Arena a;
        arena_init(&a, 1 << 20);
        engine_set_arena(&a);
        bool was = grad_set(true);
        params_zero_grad(&m.params);
        Tensor *loss = model_loss(&m, ids, targets, 2, 8);
        backward(loss);
        ck_assert(isfinite(loss->data[0]));
        for (int i = 0; i < params_count(&m.params); i++) {
            const Tensor *p = m.params.list[i];
            if (!strstr(p->name, ".kerple_")) continue;
            double g2 = 0.0;
            for (long e = 0; e < p->n; e++) g2 += (double)p->grad[e] * p->grad[e];
            ck_assert_msg(isfinite(g2) && g2 > 0.0, "%s: gradient norm^2 %g", p->name, g2);
        }
        tape_reset();
        grad_set(was);
        engine_set_arena(NULL);
        arena_free(&a);
        model_free(&m);
    }
}
END_TEST

Suite *attn_positions_suite(void) {
    Suite *s = suite_create("attn_positions");
    TCase *tc = tcase_create("fixture");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_positions_fixture);
    tcase_add_test(tc, test_positions_fixture_catches_broken_backward);
    tcase_add_test(tc, test_positions_threads_same_bits);
    suite_add_tcase(s, tc);

    tc = tcase_create("blocks");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_positions_gradcheck_small_blocks);
    tcase_add_test(tc, test_positions_gradcheck_catches_broken_backward);
    tcase_add_test(tc, test_positions_probs_consistent);
    tcase_add_test(tc, test_positions_no_grad_same_output);
    tcase_add_test(tc, test_positions_alibi_slopes);
    suite_add_tcase(s, tc);

    tc = tcase_create("memory");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_positions_window_memory_linear);
    tcase_add_test(tc, test_positions_causal_memory);
    tcase_add_test(tc, test_positions_flops);
    suite_add_tcase(s, tc);

    tc = tcase_create("model");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_positions_model_params);
    suite_add_tcase(s, tc);
    return s;
}
