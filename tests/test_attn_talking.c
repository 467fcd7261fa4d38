/* test_attn_talking.c: Talking-Heads attention (Shazeer et al. 2020), the
 * softmax kernel's talking_heads = pre | post | both (layers/attention/softmax.c).
 *
 * fixture: tests/fixtures/attn_talking.safetensors (tests/reference/
 * attention_talking.py) holds, for pre, post and both, causal and
 * bidirectional, with key_size != head_size and random mixing matrices, the
 * inputs, PyTorch's output, P' and every gradient (q, k, v and each matrix),
 * computed in float64. The kernel must match them at float32 tolerance, and
 * must stop matching when its backward is broken.
 *
 * mixing: the mixed tensor must reach the output. Identity matrices give plain
 * attention bit for bit; a head permutation as W_pre or W_post gives plain
 * attention with the probabilities of the permuted heads.
 *
 * model: model_init declares the matrices under their PyTorch names, starts
 * them at the identity (so a talking-heads model computes what the same model
 * without them does), and training moves them. */
#include <cJSON.h>
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_stub.h"
#include "model.h"
#include "optim/optim.h"
#include "safetensors.h"
#include "test_util.h"

/* float32 against float64. The largest error seen is 5e-7, 1/50 of its
 * tolerance (a gradient of talking_pre, a sum over B T^2 terms); a 10% error
 * in any backward is far outside. */
#define ATOL 1e-5f
#define RTOL 1e-4f

static bool has_pre(int talking) { return talking == TALKING_PRE || talking == TALKING_BOTH; }
static bool has_post(int talking) { return talking == TALKING_POST || talking == TALKING_BOTH; }

static OpDef *talking_op(void) {
    const AttnKernel *k = attn_kernel_for(ATTN_SOFTMAX);
    for (int i = 0; k->ops[i]; i++)
        if (strcmp(k->ops[i]->name, "attn_talking") == 0) return k->ops[i];
    ck_abort_msg("the softmax kernel lists no attn_talking op");
    return NULL;
}

/* ---- the fixture ----------------------------------------------------------- */

#define MAX_VARIANTS 8

typedef struct {
    char name[32];
    int talking;
    bool causal;
} Variant;

typedef struct {
    int B, H, T, dk, dv;
    int n;
    Variant v[MAX_VARIANTS];
} Fixture;

static int json_int(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    ck_assert_msg(cJSON_IsNumber(v), "fixture JSON: no number %s", key);
    return v->valueint;
}

static Fixture read_fixture(const StFile *sf) {
    Fixture f = {0};
    const char *text = st_meta(sf, "shape");
    ck_assert_msg(text != NULL, "fixture metadata has no shape");
    cJSON *o = cJSON_Parse(text);
    ck_assert_ptr_nonnull(o);
    f.B = json_int(o, "B");
    f.H = json_int(o, "H");
    f.T = json_int(o, "T");
    f.dk = json_int(o, "key_size");
    f.dv = json_int(o, "head_size");
    cJSON_Delete(o);
    ck_assert_msg(f.dk != f.dv, "the fixture should have key_size != head_size");

    text = st_meta(sf, "variants");
    ck_assert_msg(text != NULL, "fixture metadata has no variants");
    o = cJSON_Parse(text);
    ck_assert(cJSON_IsArray(o));
    const cJSON *it;
    cJSON_ArrayForEach(it, o) {
        ck_assert_int_lt(f.n, MAX_VARIANTS);
        Variant *v = &f.v[f.n++];
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *mode = cJSON_GetObjectItemCaseSensitive(it, "talking_heads");
        const cJSON *causal = cJSON_GetObjectItemCaseSensitive(it, "causal");
        ck_assert(cJSON_IsString(name) && cJSON_IsString(mode) && cJSON_IsBool(causal));
        snprintf(v->name, sizeof v->name, "%s", name->valuestring);
        v->talking = !strcmp(mode->valuestring, "pre")    ? TALKING_PRE
                     : !strcmp(mode->valuestring, "post") ? TALKING_POST
                     : !strcmp(mode->valuestring, "both") ? TALKING_BOTH
                                                          : -1;
        ck_assert_msg(v->talking >= 0, "fixture variant %s: talking_heads %s", v->name, mode->valuestring);
        v->causal = cJSON_IsTrue(causal);
    }
    cJSON_Delete(o);
    return f;
}


/* The first thing a run got wrong, or TALK_OK. */
typedef KernelFxStage TalkStage;
#define TALK_GRADS KERNEL_FX_GRADS
#define TALK_OK KERNEL_FX_OK
#define talk_stage_names kernel_fx_stage_names

/* Runs fixture variant v through the softmax kernel and compares. */
static TalkStage run_variant(StFile *sf, const Fixture *f, const Variant *v, char *msg, int size) {
    Arena a;
    arena_init(&a, 1 << 20);
    engine_set_arena(&a);
    tape_reset();
    bool was = grad_set(true);
    const int qs[4] = {f->B, f->H, f->T, f->dk}, vs[4] = {f->B, f->H, f->T, f->dv}, ws[2] = {f->H, f->H};
    /* q, k, v, talking_pre, talking_post; the matrices the variant lacks stay NULL */
    const char *names[5] = {"q", "k", "v", "talking_pre", "talking_post"};
    Tensor *leaf[5] = {fixture_tensor(sf, v->name, "q", 4, qs), fixture_tensor(sf, v->name, "k", 4, qs),
                       fixture_tensor(sf, v->name, "v", 4, vs),
                       has_pre(v->talking) ? fixture_tensor(sf, v->name, "talking_pre", 2, ws) : NULL,
                       has_post(v->talking) ? fixture_tensor(sf, v->name, "talking_post", 2, ws) : NULL};
    ModelConfig m = {0};
    softmax_opts(&m)->talking_heads = v->talking;
    AttnCall c = {.B = f->B, .H = f->H, .T = f->T, .key_size = f->dk, .head_size = f->dv, .causal = v->causal,
                  .scale = 1.0f / sqrtf((float)f->dk), .cfg = &m,
                  .opts = softmax_opts(&m)};
    int np = 0;
    for (int i = 3; i < 5; i++)
        if (leaf[i]) c.params[np++] = leaf[i];
    TalkStage stage = kernel_fixture_run(sf, v->name, attn_kernel_for(ATTN_SOFTMAX), &c, leaf, names, KERNEL_ROUNDING_SLACK, msg, size);
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
    return stage;
}

START_TEST(test_talking_fixture) {
    StFile sf = fixture_open("attn_talking.safetensors");
    Fixture f = read_fixture(&sf);
    ck_assert_int_eq(f.n, 6); /* pre, post, both; causal and bidirectional */
    for (int i = 0; i < f.n; i++) {
        char msg[300] = "";
        TalkStage s = run_variant(&sf, &f, &f.v[i], msg, sizeof msg);
        ck_assert_msg(s == TALK_OK, "talking heads %s differs from PyTorch at the %s: %s", f.v[i].name,
                      talk_stage_names[s], msg);
    }
    st_close(&sf);
}
END_TEST

/* A 10%-scaled or missing backward of attn_talking must break the gradients
 * of every variant (and only them). */
START_TEST(test_talking_fixture_catches_broken_backward) {
    StFile sf = fixture_open("attn_talking.safetensors");
    Fixture f = read_fixture(&sf);
    OpDef *op = talking_op();
    for (int mu = 0; mu < MUTATION_COUNT; mu++)
        for (int i = 0; i < f.n; i++) {
            char msg[300] = "";
            kernel_mutation_install(op, (Mutation)mu);
            TalkStage s = run_variant(&sf, &f, &f.v[i], msg, sizeof msg);
            kernel_mutation_remove(op);
            ck_assert_msg(s == TALK_GRADS, "a %s backward for %s: variant %s stopped at the %s (%s)",
                          mutation_name((Mutation)mu), op->name, f.v[i].name, talk_stage_names[s], msg);
        }
    st_close(&sf);
}
END_TEST

/* ---- the mix reaches the output --------------------------------------------- */

enum { MB = 2, MH = 3, MT = 6, MDK = 4, MDV = 5 };

static Tensor *random_tensor(Rng *rng, int d) {
    Tensor *t = tensor_4d(MB, MH, MT, d);
    rng_fill_normal(rng, t->data, t->n, 0.0f, 1.0f);
    return t;
}

/* W[h, h'] = 1 where h' = (h + shift) mod H: output head h takes head h + shift. */
static Tensor *shift_matrix(int shift) {
    Tensor *w = tensor_zeros(2, (int[]){MH, MH});
    for (int h = 0; h < MH; h++) w->data[h * MH + (h + shift) % MH] = 1.0f;
    return w;
}

static float max_abs_diff(const Tensor *a, const Tensor *b) {
    float m = 0.0f;
    for (long i = 0; i < a->n; i++) m = fmaxf(m, fabsf(a->data[i] - b->data[i]));
    return m;
}

/* out_h = P_{src(h)} V_h from plain attention's P, in double. */
static Tensor *plain_with_heads(const Tensor *P, const Tensor *v, const int *src) {
    Tensor *out = tensor_4d(MB, MH, MT, MDV);
    for (int b = 0; b < MB; b++)
        for (int h = 0; h < MH; h++)
            for (int i = 0; i < MT; i++)
                for (int d = 0; d < MDV; d++) {
                    double s = 0.0;
                    for (int j = 0; j < MT; j++)
                        s += (double)P->data[(((long)b * MH + src[h]) * MT + i) * MT + j] *
                             v->data[(((long)b * MH + h) * MT + j) * MDV + d];
                    out->data[(((long)b * MH + h) * MT + i) * MDV + d] = (float)s;
                }
    return out;
}

/* Identity mixing is plain attention, exactly; a head permutation as W_pre,
 * W_post or both reaches the output as the permuted heads' probabilities. The
 * cyclic shift is not its own transpose, so a mix applied as W^T fails too. */
START_TEST(test_talking_mixing_reaches_output) {
    ROUNDING_PASSES(MT, KERNEL_ROUNDING_SLACK) {
        Arena a;
        arena_init(&a, 1 << 20);
        engine_set_arena(&a);
        bool was = grad_set(false);
        Rng rng;
        rng_seed(&rng, 2020);
        Tensor *q = random_tensor(&rng, MDK), *k = random_tensor(&rng, MDK), *v = random_tensor(&rng, MDV);
        rounding_move_input(q->data, q->n);
        rounding_move_input(k->data, k->n);
        rounding_move_input(v->data, v->n);
        const AttnKernel *kern = attn_kernel_for(ATTN_SOFTMAX);
        Tensor *I = shift_matrix(0), *W = shift_matrix(1);
        for (int causal = 0; causal < 2; causal++) {
            ModelConfig m = {0};
            softmax_opts(&m)->talking_heads = TALKING_NONE;
            AttnCall c = {.B = MB, .H = MH, .T = MT, .key_size = MDK, .head_size = MDV, .causal = causal,
                          .scale = 1.0f / sqrtf((float)MDK), .cfg = &m,
                          .opts = softmax_opts(&m)};
            Tensor *plain = kern->forward(&c, q, k, v), *P = kern->probs(&c, q, k);
            for (int mode = TALKING_PRE; mode <= TALKING_BOTH; mode++) {
                int n = mode == TALKING_BOTH ? 2 : 1;
                softmax_opts(&m)->talking_heads = mode;
                c.params[0] = c.params[1] = I;
                Tensor *same = kern->forward(&c, q, k, v), *Psame = kern->probs(&c, q, k);
                ck_assert_msg(memcmp(same->data, plain->data, (size_t)plain->n * sizeof(float)) == 0,
                              "talking_heads %d causal %d: identity mixing is not plain attention (max diff %g)", mode,
                              causal, (double)max_abs_diff(same, plain));
                ck_assert_msg(memcmp(Psame->data, P->data, (size_t)P->n * sizeof(float)) == 0,
                              "talking_heads %d causal %d: identity mixing changes the attention matrix", mode, causal);
                /* Each matrix in turn, then all, as the shift. */
                for (int which = 0; which <= n; which++) {
                    if (which == n && n == 1) break;
                    int shifts = 0;
                    for (int j = 0; j < n; j++) {
                        bool shifted = which == n || which == j;
                        c.params[j] = shifted ? W : I;
                        shifts += shifted;
                    }
                    int src[MH];
                    for (int h = 0; h < MH; h++) src[h] = (h + shifts) % MH;
                    Tensor *mixed = kern->forward(&c, q, k, v), *want = plain_with_heads(P, v, src);
                    char detail[200];
                    ck_assert_msg(max_abs_diff(mixed, plain) > 1e-2f,
                                  "talking_heads %d causal %d: mixing matrix %d did not change the output", mode, causal,
                                  which);
                    ck_assert_msg(rounded_close("output", mixed->data, want->data, mixed->n, detail, sizeof detail),
                                  "talking_heads %d causal %d, matrix %d shifted: output is not the shifted heads' "
                                  "attention: %s",
                                  mode, causal, which, detail);
                }
                c.params[0] = c.params[1] = NULL;
            }
        }
        grad_set(was);
        engine_set_arena(NULL);
        arena_free(&a);
    }
}
END_TEST

/* The per-batch dW slots make the result independent of the thread count. */
START_TEST(test_talking_threads_same_bits) {
    StFile sf = fixture_open("attn_talking.safetensors");
    Fixture f = read_fixture(&sf);
    const Variant *v = &f.v[0];
    for (int i = 0; i < f.n; i++)
        if (f.v[i].talking == TALKING_BOTH && f.v[i].causal) v = &f.v[i];
    ck_assert_int_eq(v->talking, TALKING_BOTH);
    float *bits[2] = {NULL, NULL};
    long n_bits = 0;
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
        const int qs[4] = {f.B, f.H, f.T, f.dk}, vs[4] = {f.B, f.H, f.T, f.dv}, ws[2] = {f.H, f.H};
        Tensor *leaf[5] = {fixture_tensor(&sf, v->name, "q", 4, qs), fixture_tensor(&sf, v->name, "k", 4, qs),
                           fixture_tensor(&sf, v->name, "v", 4, vs), fixture_tensor(&sf, v->name, "talking_pre", 2, ws),
                           fixture_tensor(&sf, v->name, "talking_post", 2, ws)};
        for (int i = 0; i < 5; i++) leaf[i]->requires_grad = true;
        ModelConfig m = {0};
        softmax_opts(&m)->talking_heads = TALKING_BOTH;
        AttnCall c = {.B = f.B, .H = f.H, .T = f.T, .key_size = f.dk, .head_size = f.dv, .causal = true,
                      .scale = 1.0f / sqrtf((float)f.dk), .params = {leaf[3], leaf[4]}, .cfg = &m,
                      .opts = softmax_opts(&m)};
        Tensor *out = attn_kernel_for(ATTN_SOFTMAX)->forward(&c, leaf[0], leaf[1], leaf[2]);
        backward_seeded(out, fixture_tensor(&sf, v->name, "dout", 4, vs)->data);
        n_bits = out->n;
        for (int i = 0; i < 5; i++) n_bits += leaf[i]->n;
        bits[run] = xmalloc((size_t)n_bits * sizeof(float));
        memcpy(bits[run], out->data, (size_t)out->n * sizeof(float));
        long at = out->n;
        for (int i = 0; i < 5; i++) {
            memcpy(bits[run] + at, leaf[i]->grad, (size_t)leaf[i]->n * sizeof(float));
            at += leaf[i]->n;
        }
        tape_reset();
        grad_set(was);
        engine_set_arena(NULL);
        arena_free(&a);
    }
    engine_set_threads(before);
    blas_stub_set(stub_was);
    ck_assert_msg(memcmp(bits[0], bits[1], (size_t)n_bits * sizeof(float)) == 0,
                  "attn_talking: 1 and 2 threads give different bits");
    free(bits[0]);
    free(bits[1]);
    st_close(&sf);
}
END_TEST

/* ---- the model ---------------------------------------------------------------- */

static ModelConfig small_config(int talking) {
    ModelConfig m = {.vocab = 256, .layers = 2, .d_model = 16, .heads = 4, .key_size = 6, .head_size = 3,
                     .mlp_ratio = 2, .context = 8, .norm = NORM_LAYERNORM, .tie_embeddings = true,
                     .attn = ATTN_SOFTMAX, .pos = pos_of("learned"), .objective = OBJECTIVE_CLM};
    softmax_opts(&m)->talking_heads = talking;
    return m;
}

/* model_init declares blocks.{i}.attn.talking_pre.weight / talking_post.weight
 * [H, H] as the mode asks, and model_init_weights makes them the identity. */
START_TEST(test_talking_model_declares) {
    for (int mode = TALKING_NONE; mode <= TALKING_BOTH; mode++) {
        ModelConfig cfg = small_config(mode);
        Model m;
        model_init(&m, &cfg);
        Rng rng;
        rng_seed(&rng, 5);
        model_init_weights(&m, &rng);
        int found = 0;
        for (int i = 0; i < cfg.layers; i++)
            for (int j = 0; j < 2; j++) {
                char name[96];
                snprintf(name, sizeof name, "blocks.%d.attn.talking_%s.weight", i, j ? "post" : "pre");
                Tensor *w = params_find(&m.params, name);
                bool want = j ? has_post(mode) : has_pre(mode);
                ck_assert_msg((w != NULL) == want, "talking_heads %d: %s is %s", mode, name,
                              w ? "declared" : "missing");
                if (!w) continue;
                found++;
                ck_assert_int_eq(w->ndim, 2);
                ck_assert_int_eq(w->shape[0], cfg.heads);
                ck_assert_int_eq(w->shape[1], cfg.heads);
                for (int r = 0; r < cfg.heads; r++)
                    for (int s = 0; s < cfg.heads; s++)
                        ck_assert_msg(w->data[r * cfg.heads + s] == (r == s ? 1.0f : 0.0f),
                                      "%s[%d, %d] = %g: not the identity", name, r, s,
                                      (double)w->data[r * cfg.heads + s]);
            }
        ck_assert_int_eq(found, cfg.layers * (has_pre(mode) + has_post(mode)));
        model_free(&m);
    }
}
END_TEST

/* Same weights elsewhere, identity mixing: the logits of a talking-heads
 * model are those of the plain one. */
START_TEST(test_talking_model_starts_as_plain) {
    const int B = 2, T = 8;
    int ids[2 * 8];
    for (int i = 0; i < B * T; i++) ids[i] = (i * 37 + 11) % 256;
    ModelConfig plain_cfg = small_config(TALKING_NONE);
    Model plain;
    model_init(&plain, &plain_cfg);
    Rng rng;
    rng_seed(&rng, 9);
    model_init_weights(&plain, &rng);
    Arena a;
    arena_init(&a, 1 << 20);
    engine_set_arena(&a);
    bool was = grad_set(false);
    Tensor *want = model_forward(&plain, ids, B, T);
    for (int mode = TALKING_PRE; mode <= TALKING_BOTH; mode++) {
        ModelConfig cfg = small_config(mode);
        Model m;
        model_init(&m, &cfg);
        rng_seed(&rng, 9);
        model_init_weights(&m, &rng);
        for (int i = 0; i < params_count(&plain.params); i++) {
            const Tensor *src = plain.params.list[i];
            Tensor *dst = params_find(&m.params, src->name);
            ck_assert_ptr_nonnull(dst);
            memcpy(dst->data, src->data, (size_t)src->n * sizeof(float));
        }
        Tensor *got = model_forward(&m, ids, B, T);
        ck_assert_msg(memcmp(got->data, want->data, (size_t)want->n * sizeof(float)) == 0,
                      "talking_heads %d at the identity: logits differ from plain attention (max diff %g)", mode,
                      (double)max_abs_diff(got, want));
        model_free(&m);
    }
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
    model_free(&plain);
}
END_TEST

/* A few AdamW steps on one batch: the mixing matrices get finite, non-zero
 * gradients at every step and leave the identity, and the loss falls. */
START_TEST(test_talking_model_training_reaches_params) {
    const int B = 2, T = 8, steps = 4;
    int ids[2 * 8], targets[2 * 8];
    Rng rng;
    rng_seed(&rng, 17);
    for (int i = 0; i < B * T; i++) {
        ids[i] = (int)rng_below(&rng, 256);
        targets[i] = (int)rng_below(&rng, 256);
    }
    for (int mode = TALKING_PRE; mode <= TALKING_BOTH; mode++) {
        ModelConfig cfg = small_config(mode);
        Model m;
        model_init(&m, &cfg);
        model_init_weights(&m, &rng);
        Tensor *mats[8];
        int n = 0;
        for (int i = 0; i < params_count(&m.params); i++)
            if (strstr(m.params.list[i]->name, ".attn.talking_")) mats[n++] = m.params.list[i];
        ck_assert_int_eq(n, cfg.layers * (has_pre(mode) + has_post(mode)));
        Arena a;
        arena_init(&a, 1 << 20);
        engine_set_arena(&a);
        bool was = grad_set(true);
        AdamWConfig opt = adamw_default();
        float first = 0.0f, last = 0.0f;
        for (int step = 0; step < steps; step++) {
            arena_reset(&a);
            tape_reset();
            params_zero_grad(&m.params);
            Tensor *loss = model_loss(&m, ids, targets, B, T);
            backward(loss);
            if (step == 0) first = loss->data[0];
            last = loss->data[0];
            for (int j = 0; j < n; j++) {
                double g2 = 0.0;
                for (long e = 0; e < mats[j]->n; e++) g2 += (double)mats[j]->grad[e] * mats[j]->grad[e];
                ck_assert_msg(isfinite(g2) && g2 > 0.0, "step %d: %s got gradient norm^2 %g", step, mats[j]->name,
                              g2);
            }
            adamw_step(&m.params, &opt, 1e-2f, step + 1, 1.0f);
        }
        for (int j = 0; j < n; j++) {
            float moved = 0.0f;
            for (long e = 0; e < mats[j]->n; e++)
                moved = fmaxf(moved, fabsf(mats[j]->data[e] - (e / cfg.heads == e % cfg.heads ? 1.0f : 0.0f)));
            ck_assert_msg(moved > 1e-3f, "%s stayed at the identity", mats[j]->name);
        }
        ck_assert_msg(last < first, "talking_heads %d: loss %g after %d steps on one batch, %g at first", mode,
                      (double)last, steps, (double)first);
        tape_reset();
        grad_set(was);
        engine_set_arena(NULL);
        arena_free(&a);
        model_free(&m);
    }
}
END_TEST

Suite *attn_talking_suite(void) {
    Suite *s = suite_create("attn_talking");
    TCase *tc = tcase_create("fixture");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_talking_fixture);
    tcase_add_test(tc, test_talking_fixture_catches_broken_backward);
    tcase_add_test(tc, test_talking_threads_same_bits);
    suite_add_tcase(s, tc);

    tc = tcase_create("mixing");
    tcase_add_test(tc, test_talking_mixing_reaches_output);
    suite_add_tcase(s, tc);

    tc = tcase_create("model");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_talking_model_declares);
    tcase_add_test(tc, test_talking_model_starts_as_plain);
    tcase_add_test(tc, test_talking_model_training_reaches_params);
    suite_add_tcase(s, tc);
    return s;
}
