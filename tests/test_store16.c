/* test_store16.c: activations stored in bf16 (core/tensor.h, layers.h's
 * bf16_store) under precision bf16.
 *
 * - The bits: a model's loss and every parameter gradient, forward and
 *   backward in bf16, are the same with the activations stored in bf16 as
 *   with fp32 copies kept (bf16_store = 0), for both norms, a rotary
 *   scheme (q and k then stay fp32, v is bf16), a score bias with a window,
 *   activation checkpointing, and a context past the softmax's key tiles.
 *   The softmax kernel alone, with q, k, v stored in bf16 against the same
 *   values in fp32, gives the same output and gradients.
 * - The memory: the arena's peak falls by exactly the bytes the stored
 *   tensors predict; keeping any one kind in fp32 by mistake (each bit of
 *   bf16_store cleared in turn) misses the prediction, so the check fails.
 * - The refusals: a bf16 tensor given to an op that reads fp32 (a norm,
 *   the softmax and its backward, the loss, a residual add, a kernel that
 *   reads q, k, v elementwise) aborts naming the op; an attention kernel
 *   without its qkv16 declaration is refused when a layer is built.
 * Without AVX512-BF16 the bf16 parts say why they skip. */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/softmax.h"
#include "cases_positions.h"
#include "gemm.h"
#include "layer_cases.h"
#include "layers.h"
#include "model.h"
#include "ops.h"
#include "test_util.h"

/* ---- a model's step in bf16, with a given bf16_store ----------------------- */

typedef struct {
    int B, T, d, heads, norm, pos, window;
    bool checkpoint;
    const char *name;
} Variant;

static const Variant variants[] = {
    {4, 80, 64, 2, NORM_LAYERNORM, -1, 0, false, "layernorm, learned positions"},
    {4, 80, 64, 2, NORM_RMSNORM, -2, 0, false, "rmsnorm, rope (q, k fp32)"},
    {2, 80, 64, 2, NORM_LAYERNORM, -3, 24, false, "alibi, window 24"},
    {4, 80, 64, 2, NORM_LAYERNORM, -1, 0, true, "checkpointing"},
    {1, 300, 32, 2, NORM_LAYERNORM, -1, 0, false, "T 300: two key tiles"},
};

static int variant_pos(const Variant *v) {
    return pos_of(v->pos == -1 ? "learned" : v->pos == -2 ? "rope" : "alibi");
}

typedef struct {
    float loss;
    float *grads; /* the parameters' gradient slab */
    long n;
    size_t peak;
} StepResult;

/* One forward and backward of the variant's model (2 layers, seed fixed)
 * in bf16 with `store`; r->grads is malloc'd. */
static void step_of(const Variant *v, unsigned store, StepResult *r) {
    ModelConfig cfg = {.vocab = 256, .layers = 2, .d_model = v->d, .heads = v->heads, .key_size = v->d / v->heads,
                       .head_size = v->d / v->heads, .mlp_ratio = 4, .context = v->T, .norm = v->norm,
                       .tie_embeddings = true, .attn = ATTN_SOFTMAX, .pos = variant_pos(v), .window = v->window,
                       .objective = OBJECTIVE_CLM};
    Model m;
    model_init(&m, &cfg);
    m.checkpoint = v->checkpoint;
    Rng rng;
    rng_seed(&rng, 16);
    model_init_weights(&m, &rng);
    int n = v->B * v->T, *ids = malloc(sizeof(int) * n), *targets = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) ids[i] = (int)rng_below(&rng, 256), targets[i] = (int)rng_below(&rng, 256);
    unsigned was_store = bf16_store;
    bf16_store = store;
    Precision was = gemm_set_precision(PRECISION_BF16);
    Arena a;
    arena_init(&a, 0);
    engine_set_arena(&a);
    bool grad_was = grad_set(true);
    params_zero_grad(&m.params);
    Tensor *loss = model_loss(&m, ids, targets, v->B, v->T);
    backward(loss);
    r->loss = loss->data[0];
    r->peak = a.peak;
    r->n = m.params.total;
    r->grads = malloc(sizeof(float) * (size_t)r->n);
    memcpy(r->grads, m.params.grad, sizeof(float) * (size_t)r->n);
    grad_set(grad_was);
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&a);
    gemm_set_precision(was);
    bf16_store = was_store;
    model_free(&m);
    free(ids);
    free(targets);
}

/* Where two results first differ, in msg; true when they agree bit for bit. */
static bool same_bits(const StepResult *x, const StepResult *y, char *msg, size_t size) {
    if (memcmp(&x->loss, &y->loss, sizeof x->loss)) {
        snprintf(msg, size, "loss %.9g against %.9g", x->loss, y->loss);
        return false;
    }
    for (long i = 0; i < x->n; i++)
        if (memcmp(&x->grads[i], &y->grads[i], sizeof(float))) {
            snprintf(msg, size, "gradient %ld of %ld: %.9g against %.9g", i, x->n, x->grads[i], y->grads[i]);
            return false;
        }
    return true;
}

START_TEST(test_store16_same_bits) {
    if (!bf16_runs_here("test_store16")) return;
    const Variant *v = &variants[_i];
    StepResult kept, stored;
    step_of(v, 0, &kept);
    step_of(v, BF16_STORE_ALL, &stored);
    char msg[200];
    bool same = same_bits(&stored, &kept, msg, sizeof msg);
    size_t peak_kept = kept.peak, peak_stored = stored.peak;
    free(kept.grads);
    free(stored.grads);
    ck_assert_msg(same, "%s: stored in bf16 against fp32 copies: %s", v->name, msg);
    ck_assert_msg(peak_stored < peak_kept, "%s: the peak did not fall (%zu against %zu bytes)", v->name, peak_stored,
                  peak_kept);
}
END_TEST

/* ---- the memory ------------------------------------------------------------
 *
 * The step's peak is at the start of backward, when every layer's kept
 * activations are alive (the norms' outputs are not: the model hands them
 * back after forward and makes them again in backward, tape.h). Per layer,
 * bf16 keeps half of each of q, k, v ([B, H, T, dk] twice and [B, H, T, dv])
 * and of the merged heads ([B, T, H dv]): stored, each saves 2 bytes an
 * element. The norms' outputs save where they are alive: the last layer's
 * ln2 output, made again by the first backward that reads it (the MLP's),
 * is alive at the peak: one [B, T, d] tensor's 2 bytes an element, less
 * the row a thread makes in fp32 before rounding it (d floats a thread,
 * taken once from the arena and reused by every norm after). The peak
 * comes inside the attention's backward, which, with k and v in bf16,
 * packs a head's k once per thread for gemm's kernel (scratch it hands
 * back): that costs what the packing takes. */
static long predicted_saving(const Variant *v, unsigned store, int layers) {
    long tokens = (long)v->B * v->T, saved = 0;
    int dk = v->d / v->heads;
    Precision was = gemm_set_precision(PRECISION_BF16);
    bool packs = gemm_packed_usable();
    gemm_set_precision(was);
    if (store & BF16_STORE_QKV) saved += layers * 3 * tokens * v->d * 2;
    if ((store & BF16_STORE_QKV) && packs)
        saved -= (long)engine_threads() * (gemm_packed_words(dk, v->T) + gemm_packed_words(v->T, dk)) * 4;
    if (store & BF16_STORE_MERGED) saved += layers * tokens * v->d * 2;
    if (store & BF16_STORE_NORM) saved += tokens * v->d * 2 - (long)engine_threads() * v->d * 4;
    return saved;
}

START_TEST(test_store16_peak) {
    if (!bf16_runs_here("test_store16")) return;
    const Variant *v = &variants[0];
    StepResult kept, r;
    step_of(v, 0, &kept);
    free(kept.grads);
    step_of(v, BF16_STORE_ALL, &r);
    free(r.grads);
    long fell = (long)kept.peak - (long)r.peak, want = predicted_saving(v, BF16_STORE_ALL, 2);
    ck_assert_msg(fell == want, "the peak fell by %ld bytes (%zu to %zu); stored in bf16 predicts %ld", fell,
                  kept.peak, r.peak, want);
    /* an fp32 copy kept by mistake: each kind in turn; the check must fail */
    const unsigned kinds[] = {BF16_STORE_NORM, BF16_STORE_QKV, BF16_STORE_MERGED};
    for (int k = 0; k < 3; k++) {
        step_of(v, BF16_STORE_ALL & ~kinds[k], &r);
        free(r.grads);
        long fell_k = (long)kept.peak - (long)r.peak;
        ck_assert_msg(fell_k != want, "with kind %u kept in fp32 the peak still fell by the predicted %ld bytes",
                      kinds[k], want);
    }
}
END_TEST

/* ---- the softmax kernel with q, k, v stored in bf16 ------------------------ */

/* The kernel's output and q, k, v's gradients on in[0..2] (fp32 values
 * already rounded to bf16), passed either as they are or stored in bf16;
 * each a malloc'd copy in out[0..3]. */
static void kernel_run(AttnCall *c, float *const in[3], const int shapes[3][4], bool store16, float *out[4],
                       long n_out[4], const float *seed) {
    Arena a;
    arena_init(&a, 0);
    engine_set_arena(&a);
    bool grad_was = grad_set(true);
    Tensor *t[3];
    for (int i = 0; i < 3; i++) {
        t[i] = tensor_new_of(store16 ? DTYPE_BF16 : DTYPE_F32, 4, shapes[i]);
        if (store16)
            bf16_from_floats(t[i]->data16, in[i], t[i]->n);
        else
            memcpy(t[i]->data, in[i], sizeof(float) * (size_t)t[i]->n);
        t[i]->requires_grad = true;
    }
    Tensor *y = attn_kernel_softmax.forward(c, t[0], t[1], t[2]);
    backward_seeded(y, seed);
    out[0] = malloc(sizeof(float) * (size_t)y->n);
    memcpy(out[0], y->data, sizeof(float) * (size_t)y->n);
    n_out[0] = y->n;
    for (int i = 0; i < 3; i++) {
        out[i + 1] = malloc(sizeof(float) * (size_t)t[i]->n);
        memcpy(out[i + 1], t[i]->grad, sizeof(float) * (size_t)t[i]->n);
        n_out[i + 1] = t[i]->n;
    }
    grad_set(grad_was);
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&a);
}

typedef struct {
    bool causal;
    const char *pos;
    int window;
    bool logn;
    int T;
} TileCase;

static const TileCase tile_cases[] = {
    {true, "none", 0, false, 600},    {false, "none", 0, false, 300}, {true, "alibi", 200, false, 600},
    {false, "alibi", 0, true, 300},   {true, "none", 0, false, 70},
};

START_TEST(test_store16_softmax_kernel) {
    if (!bf16_runs_here("test_store16")) return;
    const TileCase *kc = &tile_cases[_i];
    enum { H = 2, DK = 16, DV = 32 };
    int T = kc->T;
    const int shapes[3][4] = {{1, H, T, DK}, {1, H, T, DK}, {1, H, T, DV}};
    Rng rng;
    rng_seed(&rng, 90 + (uint64_t)_i);
    float *in[3];
    for (int i = 0; i < 3; i++) {
        long n = (long)H * T * (i == 2 ? DV : DK);
        in[i] = malloc(sizeof(float) * (size_t)n);
        for (long j = 0; j < n; j++) in[i][j] = bf16_round(rng_normal(&rng));
    }
    float *seed = malloc(sizeof(float) * (size_t)H * T * DV);
    for (long j = 0; j < (long)H * T * DV; j++) seed[j] = rng_normal(&rng);
    Precision was = gemm_set_precision(PRECISION_BF16);
    ModelConfig m;
    AttnCall c = positions_call(&m, kc->causal, pos_of(kc->pos), kc->window, false, kc->logn);
    c.B = 1, c.H = H, c.T = T, c.key_size = DK, c.head_size = DV, c.scale = 1.0f / sqrtf((float)DK);
    m.heads = H;
    m.context = T;
    float *as32[4], *as16[4];
    long n[4];
    kernel_run(&c, in, shapes, false, as32, n, seed);
    kernel_run(&c, in, shapes, true, as16, n, seed);
    gemm_set_precision(was);
    static const char *const what[4] = {"output", "dq", "dk", "dv"};
    int bad = -1;
    long at = 0;
    for (int i = 0; i < 4 && bad < 0; i++)
        for (long j = 0; j < n[i]; j++)
            if (memcmp(&as32[i][j], &as16[i][j], sizeof(float))) {
                bad = i, at = j;
                break;
            }
    char msg[200] = "";
    if (bad >= 0)
        snprintf(msg, sizeof msg, "%s[%ld]: %.9g stored in bf16, %.9g in fp32", what[bad], at, as16[bad][at],
                 as32[bad][at]);
    for (int i = 0; i < 4; i++) free(as32[i]), free(as16[i]);
    for (int i = 0; i < 3; i++) free(in[i]);
    free(seed);
    ck_assert_msg(bad < 0, "softmax %s pos %s window %d logn %d T %d: %s", kc->causal ? "causal" : "bidirectional",
                  kc->pos, kc->window, kc->logn, T, msg);
}
END_TEST

/* ---- refusals: a bf16 tensor where fp32 is read ---------------------------- */

static Arena refuse_arena;

static Tensor *bf16_tensor(int ndim, const int *shape) {
    arena_init(&refuse_arena, 0);
    engine_set_arena(&refuse_arena);
    Tensor *t = tensor_new16(ndim, shape);
    memset(t->data16, 0, sizeof(uint16_t) * (size_t)t->n);
    return t;
}

static Tensor *ones(int ndim, const int *shape) {
    Tensor *t = tensor_new(ndim, shape);
    for (long i = 0; i < t->n; i++) t->data[i] = 1.0f;
    return t;
}

START_TEST(test_refuse_layernorm) {
    Tensor *x = bf16_tensor(2, (int[]){3, 8});
    op_layernorm(x, ones(1, (int[]){8}), ones(1, (int[]){8}), 1e-5f);
}
END_TEST

START_TEST(test_refuse_add_rmsnorm) {
    Tensor *x = bf16_tensor(2, (int[]){3, 8}), *sum;
    op_add_rmsnorm(x, ones(2, (int[]){3, 8}), ones(1, (int[]){8}), 1e-5f, &sum);
}
END_TEST

START_TEST(test_refuse_softmax) {
    op_softmax(bf16_tensor(2, (int[]){3, 8}), NULL);
}
END_TEST

START_TEST(test_refuse_cross_entropy) {
    static const int targets[3] = {1, 2, 3};
    op_cross_entropy(bf16_tensor(2, (int[]){3, 8}), targets, -1);
}
END_TEST

START_TEST(test_refuse_lm_loss) {
    static const int targets[3] = {1, 2, 3};
    Tensor *x = bf16_tensor(2, (int[]){3, 8});
    op_lm_cross_entropy(x, ones(2, (int[]){16, 8}), targets, -1);
}
END_TEST

START_TEST(test_refuse_residual_add) {
    Tensor *x = bf16_tensor(2, (int[]){3, 8});
    op_add(ones(2, (int[]){3, 8}), x);
}
END_TEST

/* The softmax kernel's fp32 blocks (precision fp32) read floats. */
START_TEST(test_refuse_softmax_fp32_blocks) {
    Tensor *q = bf16_tensor(4, (int[]){1, KC_H, 5, KC_DK});
    ModelConfig m;
    AttnCall c = positions_call(&m, true, pos_of("none"), 0, false, false);
    c.T = 5;
    attn_kernel_softmax.forward(&c, q, ones(4, (int[]){1, KC_H, 5, KC_DK}), ones(4, (int[]){1, KC_H, 5, KC_DV}));
}
END_TEST

/* Linear attention reads q, k through its feature map. */
START_TEST(test_refuse_linear_kernel) {
    const AttnKernel *lin = attn_kernel_for(ATTN_LINEAR);
    ModelConfig m;
    AttnCall c = kernel_case_call(&m, lin, true);
    c.T = 5;
    Tensor *v = bf16_tensor(3, (int[]){1, 5, KC_H * (2 * KC_DK + KC_DV)});
    lin->forward_qkv(&c, v);
}
END_TEST

/* The D_i of the key tiles' backward reads the kernel's output O, which the
 * kernel makes in fp32 (the merged copy is the bf16 one): O in bf16 would
 * reach merge_heads, whose forward reads floats. */
START_TEST(test_refuse_merge_of_bf16) {
    op_merge_heads(bf16_tensor(4, (int[]){1, 2, 3, 4}));
}
END_TEST

/* ---- the kernels' declarations ---------------------------------------------- */

START_TEST(test_store16_every_kernel_declares) {
    for (int k = 0; k < attn_kernel_count(); k++) {
        const AttnKernel *kern = attn_kernels[k];
        ck_assert_msg(kern->qkv16,
                      "attention kernel %s does not say whether it reads q, k, v in bf16 (AttnKernel.qkv16)",
                      kern->name);
        if (kern->forward_qkv) continue; /* the module splits nothing for it */
        ModelConfig m;
        AttnCall c = kernel_case_call(&m, kern, !kern->bidirectional_only);
        if (kern->qkv16(&c))
            ck_assert_msg(kern->ops[0] && (kern->ops[0]->in16 & 7u) == 7u,
                          "attention kernel %s takes q, k, v in bf16, and its op %s does not declare them (OpDef.in16)",
                          kern->name, kern->ops[0] ? kern->ops[0]->name : "(none)");
    }
}
END_TEST

static const AttnKernel *undeclared_base;
static AttnKernel undeclared;

/* A kernel registered without qkv16: building a layer with it aborts. */
START_TEST(test_store16_undeclared_kernel_refused) {
    undeclared_base = attn_kernel_for(ATTN_SOFTMAX);
    undeclared = *undeclared_base;
    undeclared.name = "test_undeclared";
    undeclared.presets = NULL;
    undeclared.option_rows = NULL;
    undeclared.options_size = 0;
    undeclared.qkv16 = NULL;
    attn_register(&undeclared);
    ModelConfig cfg = {.vocab = 256, .layers = 1, .d_model = 8, .heads = 2, .key_size = 4, .head_size = 4,
                       .mlp_ratio = 2, .context = 8, .norm = NORM_LAYERNORM, .tie_embeddings = true,
                       .attn = attn_find("test_undeclared"), .pos = pos_of("none"), .objective = OBJECTIVE_CLM};
    Model m;
    model_init(&m, &cfg);
}
END_TEST

Suite *store16_suite(void) {
    Suite *s = suite_create("store16");
    TCase *tc = tcase_create("bits and memory");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_store16_same_bits, 0, (int)(sizeof variants / sizeof *variants));
    tcase_add_test(tc, test_store16_peak);
    tcase_add_loop_test(tc, test_store16_softmax_kernel, 0, (int)(sizeof tile_cases / sizeof *tile_cases));
    tcase_add_test(tc, test_store16_every_kernel_declares);
    suite_add_tcase(s, tc);
    TCase *rf = tcase_create("refusals");
    tcase_add_test_raise_signal(rf, test_refuse_layernorm, SIGABRT);
    tcase_add_test_raise_signal(rf, test_refuse_add_rmsnorm, SIGABRT);
    tcase_add_test_raise_signal(rf, test_refuse_softmax, SIGABRT);
    tcase_add_test_raise_signal(rf, test_refuse_cross_entropy, SIGABRT);
    tcase_add_test_raise_signal(rf, test_refuse_lm_loss, SIGABRT);
    tcase_add_test_raise_signal(rf, test_refuse_residual_add, SIGABRT);
    tcase_add_test_raise_signal(rf, test_refuse_softmax_fp32_blocks, SIGABRT);
    tcase_add_test_raise_signal(rf, test_refuse_linear_kernel, SIGABRT);
    tcase_add_test_raise_signal(rf, test_refuse_merge_of_bf16, SIGABRT);
    tcase_add_test_raise_signal(rf, test_store16_undeclared_kernel_refused, SIGABRT);
    suite_add_tcase(s, rf);
    return s;
}
