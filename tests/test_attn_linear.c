/* test_attn_linear.c: linear attention and cosFormer (layers/attention/linear.c).
 *
 * pytorch: tests/fixtures/attn_linear.safetensors holds, for every phi x
 * reweight x {causal, bidirectional}, identity with clamped rows, a
 * leakyrelu slope and four cases at T = 37, PyTorch's output, attention matrix
 * and the gradients of sum(out * R), in float64 from float32 inputs, computed
 * the way the cosFormer reference does (tests/reference/attention_linear.py).
 * We compare in float32 (also at 3 threads), check the number of clamped
 * rows, then break the kernel's backward and check that every case notices.
 *
 * composition: the variants that tests/test_model.c's generic tables leave
 * out (identity, relu, leakyrelu, cosFormer, clamped rows: their N(0, 1)
 * inputs can make den cancel to near 0) against linear_compose
 * (tests/cases_linear.c) on prepared inputs: output, gradients, attention
 * matrix, P v.
 *
 * chunks: the chunked causal form against the O(T^2) composition at a T that
 * is not a multiple of the chunk, and chunk = 1, 3, 64 and T against each
 * other; memory: what forward + backward take from the arena grows linearly in
 * T and is far below one T x F x dv cumulative sum; clamp: the clamped rows'
 * gradient has no denominator term (checked against plain loops in double)
 * and attn_stats counts them; model: attn = cosformer runs this kernel with
 * relu and cos, and the logit scale is not applied; layout: the fused
 * layout the module uses (forward_qkv: q, k, v side by side in one
 * [B, T, H (2 dk + dv)] tensor from one product) equals the split one through
 * the module, and, calling the kernel directly, the fused and the packed
 * [B, T, H d] layouts give the split one's numbers bit for bit. */
#include <cJSON.h>
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cases_linear.h"
#include "model.h"
#include "rng.h"
#include "safetensors.h"
#include "blas_stub.h"
#include "test_util.h"

/* float32 against float64: the errors seen are below 1e-6 relative (a few
 * roundings, fast exp); the inputs keep every den clear of 0 or clamped. */
#define ATOL 1e-5f
#define RTOL 1e-4f

static const char *const phi_names[] = {"identity", "relu", "leakyrelu", "elu"};
static const char *const reweight_names[] = {"none", "cos"};

static const AttnKernel *linear_kernel(void) {
    const AttnKernel *k = kernel_by_name("linear");
    ck_assert_ptr_nonnull(k);
    return k;
}

/* A call for [B, H, T, dk] q, k and [B, H, T, dv] v, its config in *m. */
static AttnCall call_for(ModelConfig *m, int B, int H, int T, int dk, int dv, bool causal, int phi, int reweight,
                         int chunk) {
    AttnCall c = linear_call(m, causal, phi, reweight);
    c.B = B;
    c.H = H;
    c.T = T;
    c.key_size = dk;
    c.head_size = dv;
    c.scale = 1.0f / sqrtf((float)dk);
    linear_opts(m)->chunk = chunk;
    return c;
}

/* ---- against PyTorch --------------------------------------------------------- */

/* The fixture's shapes, and its cases in the reference script's order. */
#define FX_B 2
#define FX_H 2
#define FX_DK 3
#define FX_DV 4

typedef struct {
    const char *name;
    int phi, reweight;
    bool causal;
    float slope;
    int T, chunk;
} FxCase;

#define FX4(phi, name)                                                              \
    {#name "_causal", phi, REWEIGHT_NONE, true, 0.01f, 7, 3},                      \
    {#name "_bidirectional", phi, REWEIGHT_NONE, false, 0.01f, 7, 3},              \
    {#name "_cos_causal", phi, REWEIGHT_COS, true, 0.01f, 7, 3},                   \
    {#name "_cos_bidirectional", phi, REWEIGHT_COS, false, 0.01f, 7, 3}

static const FxCase fx_cases[] = {
    FX4(PHI_IDENTITY, identity),
    FX4(PHI_RELU, relu),
    FX4(PHI_LEAKYRELU, leakyrelu),
    FX4(PHI_ELU, elu),
    FX4(PHI_IDENTITY, clamp), /* rows 1 and 4 of q times -1e-6 */
    {"leakyrelu_slope_causal", PHI_LEAKYRELU, REWEIGHT_NONE, true, 0.2f, 7, 3},
    /* chunks of 8 over 37 rows: four full, one partial */
    {"cosformer_long_causal", PHI_RELU, REWEIGHT_COS, true, 0.01f, 37, 8},
    {"cosformer_long_bidirectional", PHI_RELU, REWEIGHT_COS, false, 0.01f, 37, 8},
    {"elu_long_causal", PHI_ELU, REWEIGHT_NONE, true, 0.01f, 37, 8},
    {"clamp_long_causal", PHI_IDENTITY, REWEIGHT_NONE, true, 0.01f, 37, 8},
};
#define N_FX ((int)(sizeof fx_cases / sizeof fx_cases[0]))


/* The fixture's JSON for case c says what fx_cases says; *clamped gets its
 * number of clamped rows. */
static bool fx_config_matches(StFile *sf, const FxCase *c, int *clamped, char *msg, int size) {
    const char *text = st_meta(sf, c->name);
    cJSON *o = text ? cJSON_Parse(text) : NULL;
    const cJSON *phi = cJSON_GetObjectItemCaseSensitive(o, "phi");
    const cJSON *rw = cJSON_GetObjectItemCaseSensitive(o, "reweight");
    const cJSON *causal = cJSON_GetObjectItemCaseSensitive(o, "causal");
    const cJSON *slope = cJSON_GetObjectItemCaseSensitive(o, "slope");
    const cJSON *T = cJSON_GetObjectItemCaseSensitive(o, "T");
    const cJSON *cl = cJSON_GetObjectItemCaseSensitive(o, "clamped");
    bool ok = cJSON_IsString(phi) && strcmp(phi->valuestring, phi_names[c->phi]) == 0 && cJSON_IsString(rw) &&
              strcmp(rw->valuestring, reweight_names[c->reweight]) == 0 && cJSON_IsBool(causal) &&
              cJSON_IsTrue(causal) == c->causal && cJSON_IsNumber(slope) &&
              fabs(slope->valuedouble - c->slope) < 1e-7 && cJSON_IsNumber(T) && T->valueint == c->T &&
              cJSON_IsNumber(cl);
    if (ok) *clamped = cl->valueint;
    else
        snprintf(msg, (size_t)size, "fixture metadata %s: %s, not the config the test expects", c->name,
                 text ? text : "missing");
    cJSON_Delete(o);
    return ok;
}

/* The longest sum of fixture case i: over positions, or a head's sizes. */
static long fx_sum_length(int i) {
    long K = fx_cases[i].T;
    return K > FX_DK ? (K > FX_DV ? K : FX_DV) : (FX_DK > FX_DV ? FX_DK : FX_DV);
}

/* Fixture case i's state, for fixture_case_run's hooks (test_util.h). */
typedef struct {
    const FxCase *fc;
    ModelConfig m;
    AttnCall c;
    AttnStats st; /* what forward counted */
    int clamped;  /* the rows PyTorch clamped */
} FxRun;

static int fx_leaves(void *ctx, Tensor **leaf, const char **names) {
    FxRun *r = ctx;
    const FxCase *fc = r->fc;
    r->c = call_for(&r->m, FX_B, FX_H, fc->T, FX_DK, FX_DV, fc->causal, fc->phi, fc->reweight, fc->chunk);
    linear_opts(&r->m)->leaky_slope = fc->slope;
    names[0] = "q", names[1] = "k", names[2] = "v";
    leaf[0] = tensor_4d(FX_B, FX_H, fc->T, FX_DK);
    leaf[1] = tensor_4d(FX_B, FX_H, fc->T, FX_DK);
    leaf[2] = tensor_4d(FX_B, FX_H, fc->T, FX_DV);
    return 3;
}

static bool fx_matches(StFile *sf, void *ctx, char *msg, int size) {
    FxRun *r = ctx;
    r->clamped = -1;
    return fx_config_matches(sf, r->fc, &r->clamped, msg, size);
}

static Tensor *fx_forward(void *ctx, Tensor **leaf) {
    FxRun *r = ctx;
    attn_stats_reset();
    Tensor *out = linear_kernel()->forward(&r->c, leaf[0], leaf[1], leaf[2]);
    r->st = attn_stats;
    return out;
}

/* The clamped rows, as PyTorch counted them (not on the pass that moves
 * the inputs, which may change the count). */
static bool fx_clamped(void *ctx, char *msg, int size) {
    FxRun *r = ctx;
    long rows = (long)FX_B * FX_H * r->fc->T;
    if (rounding_moving() || (r->st.den_clamped == r->clamped && r->st.den_rows == rows)) return true;
    snprintf(msg, (size_t)size, "%s: attn_stats counts %ld of %ld rows clamped, PyTorch %d of %ld", r->fc->name,
             r->st.den_clamped, r->st.den_rows, r->clamped, rows);
    return false;
}

static Tensor *fx_probs(void *ctx, Tensor **leaf) {
    FxRun *r = ctx;
    return linear_kernel()->probs(&r->c, leaf[0], leaf[1]);
}

/* Fixture case i: forward, clamped rows (FX_CHECK), probs, backward, stage by stage. */
static FxStage fx_run(StFile *sf, int i, char *msg, int size) {
    FxRun r = {.fc = &fx_cases[i]};
    FixtureCase c = {fx_cases[i].name, fx_sum_length(i), &r, fx_leaves, fx_matches, fx_forward, fx_clamped, fx_probs};
    return fixture_case_run(sf, &c, msg, size);
}

START_TEST(test_linear_matches_pytorch) {
    StFile sf = fixture_open("attn_linear.safetensors");
    char msg[512] = "";
    FxStage s = fx_run(&sf, _i, msg, sizeof msg);
    st_close(&sf);
    ck_assert_msg(s == FX_OK, "%s differs from PyTorch at the %s: %s", fx_cases[_i].name, fx_stage_names[s], msg);
}
END_TEST

/* The fixture lists exactly the cases of fx_cases, in order. */
START_TEST(test_linear_fixture_cases) {
    StFile sf = fixture_open("attn_linear.safetensors");
    const char *list = st_meta(&sf, "cases");
    ck_assert_msg(list != NULL, "fixture metadata has no \"cases\"; run: make fixtures");
    char want[N_FX * 48] = "";
    for (int i = 0; i < N_FX; i++) {
        if (i) strcat(want, ",");
        strcat(want, fx_cases[i].name);
    }
    ck_assert_msg(strcmp(list, want) == 0, "the fixture's cases are %s, the test's %s; run: make fixtures", list, want);
    st_close(&sf);
}
END_TEST

/* A 10%-scaled or missing backward breaks the gradients of every fixture
 * case, and only them. */
START_TEST(test_linear_pytorch_catches_broken_backward) {
    StFile sf = fixture_open("attn_linear.safetensors");
    OpDef *op = linear_kernel()->ops[0];
    ck_assert_ptr_nonnull(op);
    ck_assert_ptr_null(linear_kernel()->ops[1]);
    for (int mu = 0; mu < MUTATION_COUNT; mu++)
        for (int i = 0; i < N_FX; i++) {
            char msg[512] = "";
            kernel_mutation_install(op, (Mutation)mu);
            FxStage s = fx_run(&sf, i, msg, sizeof msg);
            kernel_mutation_remove(op);
            ck_assert_msg(s == FX_GRADS, "a %s backward for %s: case %s stopped at the %s (%s)",
                          mutation_name((Mutation)mu), op->name, fx_cases[i].name, fx_stage_names[s], msg);
        }
    st_close(&sf);
}
END_TEST

/* Per-thread scratch and per-head gradients: the same at 3 threads. */
START_TEST(test_linear_matches_pytorch_threaded) {
    int was = engine_threads();
    engine_set_threads(3);
    StFile sf = fixture_open("attn_linear.safetensors");
    for (int i = 0; i < N_FX; i++) {
        char msg[512] = "";
        FxStage s = fx_run(&sf, i, msg, sizeof msg);
        ck_assert_msg(s == FX_OK, "%s at 3 threads differs from PyTorch at the %s: %s", fx_cases[i].name,
                      fx_stage_names[s], msg);
    }
    st_close(&sf);
    engine_set_threads(was);
}
END_TEST

/* ---- against the composition of primitive ops, on prepared inputs -------------- */

typedef enum { IN_POSITIVE, IN_SIGNED, IN_CLAMP, IN_NORMAL } InputKind;

typedef struct {
    const char *name;
    int phi, reweight;
    bool causal;
    InputKind kind;
} Variant;

#define V4(name, phi, kind)                                         \
    {#name " causal", phi, REWEIGHT_NONE, true, kind},              \
    {#name " bidirectional", phi, REWEIGHT_NONE, false, kind},      \
    {#name " reweight=cos causal", phi, REWEIGHT_COS, true, kind},  \
    {#name " reweight=cos bidirectional", phi, REWEIGHT_COS, false, kind}

/* cosFormer is relu with cos re-weighting. */
static const Variant variants[] = {
    V4(identity, PHI_IDENTITY, IN_POSITIVE),
    V4(relu, PHI_RELU, IN_SIGNED),
    V4(leakyrelu, PHI_LEAKYRELU, IN_SIGNED),
    V4(identity with clamped rows, PHI_IDENTITY, IN_CLAMP),
};
#define N_VARIANTS ((int)(sizeof variants / sizeof variants[0]))

/* A leaf [B, H, T, d]: uniform in [0.5, 1.5], or N(0, 1) for IN_NORMAL. */
static Tensor *draw_leaf(Rng *rng, int B, int H, int T, int d, InputKind kind) {
    Tensor *t = tensor_4d(B, H, T, d);
    for (long i = 0; i < t->n; i++) t->data[i] = kind == IN_NORMAL ? rng_normal(rng) : 0.5f + rng_uniform(rng);
    t->requires_grad = true;
    return t;
}

/* Draws the leaves q, k, v and prepares what the kernel gets: signs (relu,
 * leakyrelu) or clamped rows, through primitive ops on the tape. */
static void prepared(Rng *rng, int B, int H, int T, int dk, int dv, InputKind kind, Tensor **leaves, Tensor **in) {
    leaves[0] = draw_leaf(rng, B, H, T, dk, kind);
    leaves[1] = draw_leaf(rng, B, H, T, dk, kind);
    leaves[2] = draw_leaf(rng, B, H, T, dv, IN_NORMAL);
    in[0] = leaves[0], in[1] = leaves[1], in[2] = leaves[2];
    if (kind == IN_SIGNED) {
        in[0] = linear_signs(leaves[0], false);
        in[1] = linear_signs(leaves[1], true);
    }
    if (kind == IN_CLAMP) in[0] = linear_clamp_rows(leaves[0]);
}

/* prepared() as a DrawLeaves, ctx the InputKind. */
static void draw_prepared(Rng *rng, const AttnCall *c, const void *ctx, Tensor **leaves, Tensor **in) {
    prepared(rng, c->B, c->H, c->T, c->key_size, c->head_size, *(const InputKind *)ctx, leaves, in);
}

/* Kernel and composition on the same prepared inputs (kernel_against_composition). */
static bool against_composition(const AttnCall *c, InputKind kind, uint64_t seed, char *msg, int size) {
    return kernel_against_composition(linear_kernel(), c, seed, draw_prepared, &kind, linear_compose, KERNEL_ROUNDING_SLACK, msg,
                                      size);
}

/* At the kernel cases' shapes and chunk = 2 (T = 5: three chunks). */
START_TEST(test_linear_matches_composition) {
    const Variant *var = &variants[_i];
    ModelConfig m;
    AttnCall c = linear_call(&m, var->causal, var->phi, var->reweight);
    char msg[512] = "";
    ck_assert_msg(against_composition(&c, var->kind, 600 + (uint64_t)_i, msg, sizeof msg),
                  "linear %s against its composition: %s", var->name, msg);
}
END_TEST

/* ---- chunks --------------------------------------------------------------------- */

/* The chunked causal form against the O(T^2) composition at T = 37, chunk 8
 * (four full chunks and a partial one). */
START_TEST(test_linear_chunked_matches_naive) {
    const struct {
        int phi, reweight;
        bool causal;
        InputKind kind;
    } cases[] = {
        {PHI_RELU, REWEIGHT_COS, true, IN_SIGNED},      /* cosFormer */
        {PHI_RELU, REWEIGHT_COS, false, IN_SIGNED},
        {PHI_ELU, REWEIGHT_NONE, true, IN_NORMAL},
        {PHI_LEAKYRELU, REWEIGHT_COS, true, IN_SIGNED},
        {PHI_IDENTITY, REWEIGHT_NONE, true, IN_CLAMP},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ModelConfig m;
        AttnCall c = call_for(&m, 2, 2, 37, 4, 5, cases[i].causal, cases[i].phi, cases[i].reweight, 8);
        char msg[512] = "";
        ck_assert_msg(against_composition(&c, cases[i].kind, 70 + i, msg, sizeof msg),
                      "phi %s reweight %s %s, T 37, chunk 8: %s", phi_names[cases[i].phi],
                      reweight_names[cases[i].reweight], cases[i].causal ? "causal" : "bidirectional", msg);
    }
}
END_TEST

/* Output and gradients of one call on fixed inputs; into out and grads (q, k, v). */
static void run_chunk(const AttnCall *c, InputKind kind, uint64_t seed, float *out, float *grads[3]) {
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    bool was = grad_set(true);
    tape_reset();
    Rng rng;
    rng_seed(&rng, seed);
    Tensor *leaves[3], *in[3];
    prepared(&rng, c->B, c->H, c->T, c->key_size, c->head_size, kind, leaves, in);
    for (int l = 0; l < 3; l++) rounding_move_input(in[l]->data, in[l]->n); /* ROUNDING_PASSES' first pass */
    Tensor *o = linear_kernel()->forward(c, in[0], in[1], in[2]);
    float *g = arena_alloc(&a, (size_t)o->n * sizeof(float));
    rng_fill_normal(&rng, g, o->n, 0.0f, 1.0f);
    backward_seeded(o, g);
    memcpy(out, o->data, (size_t)o->n * sizeof(float));
    for (int l = 0; l < 3; l++) memcpy(grads[l], leaves[l]->grad, (size_t)leaves[l]->n * sizeof(float));
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
}

/* chunk = 1, 3, 64 and T give the same output and gradients (T = 50), up to
 * the rounding of their different sums (ROUNDING_PASSES). */
START_TEST(test_linear_chunk_sizes_agree) {
    ROUNDING_PASSES(50, KERNEL_ROUNDING_SLACK) {
        const int B = 1, H = 3, T = 50, dk = 4, dv = 6, chunks[] = {1, 3, 64, T};
        const struct {
            int phi, reweight;
            InputKind kind;
        } cases[] = {{PHI_RELU, REWEIGHT_COS, IN_SIGNED}, {PHI_ELU, REWEIGHT_NONE, IN_NORMAL},
                     {PHI_IDENTITY, REWEIGHT_COS, IN_CLAMP}};
        long nq = (long)B * H * T * dk, nv = (long)B * H * T * dv;
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
            for (int causal = 0; causal < 2; causal++) {
                float *ref_out = xmalloc((size_t)nv * sizeof(float)), *out = xmalloc((size_t)nv * sizeof(float));
                float *ref[3], *g[3];
                long n[3] = {nq, nq, nv};
                for (int l = 0; l < 3; l++) {
                    ref[l] = xmalloc((size_t)n[l] * sizeof(float));
                    g[l] = xmalloc((size_t)n[l] * sizeof(float));
                }
                ModelConfig m;
                AttnCall c = call_for(&m, B, H, T, dk, dv, causal, cases[k].phi, cases[k].reweight, T);
                run_chunk(&c, cases[k].kind, 5 + k, ref_out, ref);
                for (size_t ci = 0; ci + 1 < sizeof chunks / sizeof chunks[0]; ci++) {
                    linear_opts(&m)->chunk = chunks[ci];
                    run_chunk(&c, cases[k].kind, 5 + k, out, g);
                    char detail[256];
                    ck_assert_msg(rounded_close("output", out, ref_out, nv, detail, sizeof detail),
                                  "phi %s %s chunk %d against chunk %d: output %s", phi_names[cases[k].phi],
                                  causal ? "causal" : "bidirectional", chunks[ci], T, detail);
                    for (int l = 0; l < 3; l++)
                        ck_assert_msg(rounded_close("gradient", g[l], ref[l], n[l], detail, sizeof detail),
                                      "phi %s %s chunk %d against chunk %d: gradient of input %d: %s",
                                      phi_names[cases[k].phi], causal ? "causal" : "bidirectional", chunks[ci], T, l,
                                      detail);
                }
                free(ref_out);
                free(out);
                for (int l = 0; l < 3; l++) {
                    free(ref[l]);
                    free(g[l]);
                }
            }
    }
}
END_TEST

/* ---- counted work --------------------------------------------------------------- */

/* The kernel's count of its products (AttnKernel.flops, for ./bench
 * --scaling) is what forward and backward hand to sgemm, at B 1 with every
 * gradient: causal in chunks (first, middle and a short last one) and
 * bidirectional, with and without re-weighting, and with RoPE. */
START_TEST(test_linear_flops_match_sgemm_calls) {
    struct {
        bool causal;
        int reweight, pos, T, chunk;
    } cs[] = {{true, REWEIGHT_COS, pos_of("none"), 11, 4}, {true, REWEIGHT_NONE, pos_of("none"), 11, 4},
              {true, REWEIGHT_NONE, pos_of("rope"), 9, 4},  {true, REWEIGHT_COS, pos_of("none"), 4, 4},
              {false, REWEIGHT_COS, pos_of("none"), 10, 4}, {false, REWEIGHT_NONE, pos_of("rope"), 10, 4}};
    const int H = 2, dk = 4, dv = 6;
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        ModelConfig m;
        AttnCall c = call_for(&m, 1, H, cs[i].T, dk, dv, cs[i].causal, PHI_RELU, cs[i].reweight, cs[i].chunk);
        m.pos = cs[i].pos;
        m.rope_dims = cs[i].pos == pos_of("rope") ? dk : 0;
        m.heads = H, m.d_model = H * dk, m.key_size = dk, m.head_size = dv;
        m.objective = cs[i].causal ? OBJECTIVE_CLM : OBJECTIVE_MLM;
        Arena a;
        arena_init(&a, 1 << 20);
        engine_set_arena(&a);
        bool was = grad_set(true);
        tape_reset();
        Rng rng;
        rng_seed(&rng, 9);
        Tensor *x[3];
        for (int j = 0; j < 3; j++) {
            x[j] = tensor_4d(1, H, cs[i].T, j < 2 ? dk : dv);
            rng_fill_normal(&rng, x[j]->data, x[j]->n, 0.0f, 1.0f);
            x[j]->requires_grad = true;
        }
        blas_record_set(true);
        Tensor *out = linear_kernel()->forward(&c, x[0], x[1], x[2]);
        backward(op_sum(out));
        double counted = 2.0 * blas_recorded_madds();
        blas_record_set(false);
        tape_reset();
        grad_set(was);
        engine_set_arena(NULL);
        arena_free(&a);
        double f = linear_kernel()->flops(&m, cs[i].T);
        ck_assert_msg(f == counted, "case %zu: the kernel counts %g flops, its sgemm calls made %g", i, f, counted);
    }
}
END_TEST

/* ---- memory --------------------------------------------------------------------- */

/* Arena bytes one forward + backward of causal cosFormer takes at length T
 * (inputs drawn before counting). */
static size_t bytes_at(int T, int B, int H, int dk, int dv, bool causal) {
    Arena a;
    arena_init(&a, 1 << 20);
    engine_set_arena(&a);
    bool was = grad_set(true);
    tape_reset();
    Rng rng;
    rng_seed(&rng, 3);
    Tensor *leaves[3], *in[3];
    prepared(&rng, B, H, T, dk, dv, IN_SIGNED, leaves, in);
    Tensor *q = tensor_4d(B, H, T, dk), *k = tensor_4d(B, H, T, dk);
    memcpy(q->data, in[0]->data, (size_t)q->n * sizeof(float));
    memcpy(k->data, in[1]->data, (size_t)k->n * sizeof(float));
    q->requires_grad = k->requires_grad = true;
    float *g = arena_alloc(&a, (size_t)B * H * T * dv * sizeof(float));
    for (long i = 0; i < (long)B * H * T * dv; i++) g[i] = 1.0f;
    tape_reset();
    size_t before = arena_in_use(&a);
    ModelConfig m;
    AttnCall c = call_for(&m, B, H, T, dk, dv, causal, PHI_RELU, REWEIGHT_COS, 64);
    Tensor *out = linear_kernel()->forward(&c, q, k, in[2]);
    backward_seeded(out, g);
    size_t used = arena_in_use(&a) - before;
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
    return used;
}

/* What forward + backward take grows linearly in T: from T to 4T exactly by
 * the per-row tensors (output and its gradient, den, sin/cos, the gradients
 * of q, k, v), the rest (per-thread scratch, the node) staying the same; and
 * at 4T it is well below a single T x F x dv cumulative sum of k~ v^T. */
START_TEST(test_linear_memory_linear_in_T) {
    const int B = 1, H = 2, dk = 32, dv = 32, T = 512, F = 2 * dk;
    for (int causal = 0; causal < 2; causal++) {
        size_t small = bytes_at(T, B, H, dk, dv, causal), big = bytes_at(4 * T, B, H, dk, dv, causal);
        /* floats per row: out, its gradient, dq, dk, dv, den; per position: sin, cos */
        double per_T = 4.0 * ((double)B * H * (dv + dv + dk + dk + dv + 1) + 2);
        double grown = (double)big - (double)small, want = 3.0 * T * per_T;
        ck_assert_msg(grown >= 0.99 * want && grown <= 1.01 * want + 16 * ARENA_ALIGN,
                      "%s: %zu bytes at T = %d, %zu at 4T: grew by %.0f, linear growth is %.0f",
                      causal ? "causal" : "bidirectional", small, T, big, grown, want);
        double cumsum = 4.0 * (double)B * H * 4 * T * F * dv;
        ck_assert_msg((double)big < cumsum / 8, "%s: %zu bytes at 4T; one T F dv cumulative sum is %.0f",
                      causal ? "causal" : "bidirectional", big, cumsum);
    }
}
END_TEST

/* ---- the clamp ------------------------------------------------------------------- */

/* Identity phi, rows 1 and 3 of q times -1e-6 (den < 0): plain loops in
 * double give o_i = num_i / d_i and
 *   dq_i = sum_j k_j (v_j . g_i) / d_i - [den_i >= eps] (g_i . o_i) / d_i sum_j k_j,
 * the second term being the gradient through d_i, absent where it was
 * clamped. The kernel must agree, and attn_stats must count the clamped rows. */
START_TEST(test_linear_clamped_rows_no_den_gradient) {
    const int B = 2, H = 2, T = 6, dk = 3, dv = 4;
    bool causal = _i;
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    bool was = grad_set(true);
    tape_reset();
    Rng rng;
    rng_seed(&rng, 17);
    Tensor *leaves[3], *in[3];
    prepared(&rng, B, H, T, dk, dv, IN_CLAMP, leaves, in);
    Tensor *q = tensor_4d(B, H, T, dk); /* the clamped q itself as the leaf */
    memcpy(q->data, in[0]->data, (size_t)q->n * sizeof(float));
    q->requires_grad = true;
    const float *k = in[1]->data, *v = in[2]->data;
    float *g = arena_alloc(&a, (size_t)B * H * T * dv * sizeof(float));
    rng_fill_normal(&rng, g, (long)B * H * T * dv, 0.0f, 1.0f);
    tape_reset();
    attn_stats_reset();
    ModelConfig m;
    AttnCall c = call_for(&m, B, H, T, dk, dv, causal, PHI_IDENTITY, REWEIGHT_NONE, 4);
    Tensor *out = linear_kernel()->forward(&c, q, in[1], in[2]);
    ck_assert_int_eq(attn_stats.den_clamped, (long)B * H * 2);
    ck_assert_int_eq(attn_stats.den_rows, (long)B * H * T);
    backward_seeded(out, g);
    for (int h = 0; h < B * H; h++)
        for (int i = 0; i < T; i++) {
            const float *qi = q->data + ((long)h * T + i) * dk, *gi = g + ((long)h * T + i) * dv;
            double den = 0, num[4] = {0}, z[3] = {0}, kvg[3] = {0};
            for (int j = 0; j < (causal ? i + 1 : T); j++) {
                const float *kj = k + ((long)h * T + j) * dk, *vj = v + ((long)h * T + j) * dv;
                double s = 0, vg = 0;
                for (int e = 0; e < dk; e++) s += (double)qi[e] * kj[e];
                for (int e = 0; e < dv; e++) vg += (double)vj[e] * gi[e];
                den += s;
                for (int e = 0; e < dv; e++) num[e] += s * vj[e];
                for (int e = 0; e < dk; e++) z[e] += kj[e], kvg[e] += kj[e] * vg;
            }
            bool clamped = den < LINEAR_EPS;
            ck_assert_msg(clamped == LINEAR_CLAMPED_ROW(i), "row %d: den %g", i, den);
            double d = clamped ? LINEAR_EPS : den, go = 0;
            for (int e = 0; e < dv; e++) {
                double o = num[e] / d, got = out->data[((long)h * T + i) * dv + e];
                ck_assert_msg(fabs(got - o) <= 1e-5 + 1e-4 * fabs(o), "head %d row %d: output %g, want %g", h, i,
                              got, o);
                go += gi[e] * o;
            }
            double widest_den = 0, widest_tol = 0;
            for (int e = 0; e < dk; e++) {
                double through_num = kvg[e] / d, through_den = -go / d * z[e];
                double want = through_num + (clamped ? 0.0 : through_den);
                double tol = 1e-4 * (fabs(through_num) + (clamped ? 0.0 : fabs(through_den))) + 1e-5;
                double got = q->grad[((long)h * T + i) * dk + e];
                ck_assert_msg(fabs(got - want) <= tol,
                              "head %d row %d (%s): dq %g, want %g (through num %g, through den %g)", h, i,
                              clamped ? "clamped" : "not clamped", got, want, through_num, through_den);
                widest_den = fmax(widest_den, fabs(through_den));
                widest_tol = fmax(widest_tol, tol);
            }
            /* in a clamped row the term left out is far beyond the tolerance */
            if (clamped) ck_assert_msg(widest_den > 100 * widest_tol, "head %d row %d: den term %g", h, i, widest_den);
        }
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
}
END_TEST

/* ---- the model ------------------------------------------------------------------ */

/* attn = cosformer runs the linear kernel with phi = relu and cos
 * re-weighting whatever phi says; attn = linear keeps phi and reweight. */
START_TEST(test_linear_cosformer_preset) {
    ModelConfig cfg = {.vocab = 256, .layers = 1, .d_model = 16, .heads = 2, .mlp_ratio = 2, .context = 8,
                       .attn = ATTN_COSFORMER, .objective = OBJECTIVE_CLM};
    *linear_opts(&cfg) = (LinearOpts){.phi = PHI_ELU, .leaky_slope = 0.01f, .chunk = 64};
    for (int attn = ATTN_LINEAR; attn <= ATTN_COSFORMER; attn++) {
        cfg.attn = attn;
        ParamSet p;
        params_init(&p);
        Attention at;
        attention_declare(&at, &p, "blocks.0.attn", 0, &cfg);
        ck_assert_str_eq(at.kernel->name, "linear");
        ck_assert_int_eq(((const LinearOpts *)at.call.opts)->phi, attn == ATTN_COSFORMER ? PHI_RELU : PHI_ELU);
        ck_assert_int_eq(((const LinearOpts *)at.call.opts)->reweight, attn == ATTN_COSFORMER ? REWEIGHT_COS : REWEIGHT_NONE);
        ck_assert_int_eq(((const LinearOpts *)at.call.opts)->chunk, 64);
        ck_assert(at.call.causal);
        ck_assert_ptr_eq(at.call.cfg, &at.cfg); /* the layer's options, found once */
        ck_assert_ptr_eq(at.call.opts, linear_opts(&at.cfg));
        params_free(&p);
    }
}
END_TEST

/* No logit scale: the output does not change with call->scale. */
START_TEST(test_linear_ignores_scale) {
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    bool was = grad_set(false);
    Rng rng;
    rng_seed(&rng, 8);
    Tensor *leaves[3], *in[3];
    prepared(&rng, KC_B, KC_H, KC_T, KC_DK, KC_DV, IN_NORMAL, leaves, in);
    ModelConfig m;
    AttnCall c = linear_call(&m, true, PHI_ELU, REWEIGHT_COS);
    Tensor *o1 = linear_kernel()->forward(&c, in[0], in[1], in[2]);
    c.scale = 0.1f;
    Tensor *o2 = linear_kernel()->forward(&c, in[0], in[1], in[2]);
    ck_assert(memcmp(o1->data, o2->data, (size_t)o1->n * sizeof(float)) == 0);
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
}
END_TEST

/* ---- layouts ------------------------------------------------------------------- */

/* One forward + backward of a small attention layer (B 2, T 37, 3 heads of
 * key_size 4, chunk 8: five chunks, the last partial) run by `kernel`; the
 * output, dx and every parameter's gradient, in that order, into out (*n
 * floats), and each one's length into seg (*n_seg of them). With move > 0,
 * x and every parameter are first scaled by (1 + move r), r uniform in
 * [-1, 1] (close_to_rounding). */
static void layer_run(const ModelConfig *cfg, const AttnKernel *kernel, double move, float *out, long *n, long *seg,
                      int *n_seg) {
    ParamSet p;
    params_init(&p);
    Attention at;
    attention_declare(&at, &p, "blocks.0.attn", 0, cfg);
    at.kernel = kernel;
    params_alloc(&p);
    Rng rng, jitter;
    rng_seed(&rng, 21);
    rng_seed(&jitter, 22);
    for (int i = 0; i < params_count(&p); i++) rng_fill_normal(&rng, p.list[i]->data, p.list[i]->n, 0.0f, 0.5f);
    if (move > 0)
        for (long i = 0; i < p.total; i++) p.value[i] *= (float)(1 + move * (2 * rng_uniform(&jitter) - 1));
    params_zero_grad(&p);
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    bool was = grad_set(true);
    tape_reset();
    Tensor *x = tensor_3d(2, 37, cfg->d_model);
    rng_fill_normal(&rng, x->data, x->n, 0.0f, 1.0f);
    if (move > 0)
        for (long i = 0; i < x->n; i++) x->data[i] *= (float)(1 + move * (2 * rng_uniform(&jitter) - 1));
    x->requires_grad = true;
    Tensor *y = attention_forward(&at, x);
    float *g = arena_alloc(&a, (size_t)y->n * sizeof(float));
    rng_fill_normal(&rng, g, y->n, 0.0f, 1.0f);
    backward_seeded(y, g);
    long at_n = 0;
    *n_seg = 0;
    memcpy(out + at_n, y->data, (size_t)y->n * sizeof(float));
    at_n += seg[(*n_seg)++] = y->n;
    memcpy(out + at_n, x->grad, (size_t)x->n * sizeof(float));
    at_n += seg[(*n_seg)++] = x->n;
    for (int i = 0; i < params_count(&p); i++) {
        memcpy(out + at_n, p.list[i]->grad, (size_t)p.list[i]->n * sizeof(float));
        at_n += seg[(*n_seg)++] = p.list[i]->n;
    }
    *n = at_n;
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
    params_free(&p);
}

/* The module runs the kernel on the fused layout (forward_qkv: q, k, v from
 * one product, no split or merge); the same kernel without forward_qkv runs
 * three products and split heads ([B, H, T, d] through op_split_heads and
 * op_merge_heads), and gives the same output, dx and parameter gradients up
 * to the rounding of one product against three. The kernel's own sums are
 * the same (see the next test), so the two differ only in the projections'
 * sums, the longest of which runs over B T = 74 rows (dW); the bound is that
 * rounding carried through the layer (close_to_rounding, every input moved by
 * gamma_74, slack 2). Every phi with reweight none and cos and with
 * pos = rope, causal and bidirectional. */
START_TEST(test_linear_packed_matches_split) {
    const AttnKernel *fused = linear_kernel();
    ck_assert(fused->forward_qkv && fused->rope_inside);
    AttnKernel split = *fused;
    split.forward_qkv = NULL;
    enum { MAX_FLOATS = 2 * (2 * 37 * 12) + 4 * (12 * 12 + 12), MAX_SEG = 16 };
    static float want[MAX_FLOATS], got[MAX_FLOATS], moved[MAX_FLOATS];
    static const char *const kinds[] = {"reweight=none", "reweight=cos", "pos=rope"};
    static const char *const seg_names[] = {"output", "dx", "dq.weight", "dq.bias", "dk.weight", "dk.bias",
                                            "dv.weight", "dv.bias", "do.weight", "do.bias"};
    for (int phi = PHI_IDENTITY; phi <= PHI_ELU; phi++)
        for (int kind = 0; kind < 3; kind++)
            for (int causal = 0; causal < 2; causal++) {
                ModelConfig cfg = {.vocab = 256, .layers = 1, .d_model = 12, .heads = 3, .mlp_ratio = 2,
                                   .context = 37, .attn = ATTN_LINEAR, .pos = kind == 2 ? pos_of("rope") : pos_of("none"),
                                   .objective = causal ? OBJECTIVE_CLM : OBJECTIVE_MLM};
                *linear_opts(&cfg) = (LinearOpts){.phi = phi, .leaky_slope = 0.1f,
                                                  .reweight = kind == 1 ? REWEIGHT_COS : REWEIGHT_NONE, .chunk = 8};
                long n_want, n_got, n_moved, seg[MAX_SEG], seg_got[MAX_SEG], seg_moved[MAX_SEG];
                int n_seg, n_seg_got, n_seg_moved;
                layer_run(&cfg, &split, 0, want, &n_want, seg, &n_seg);
                layer_run(&cfg, &split, rounding_gamma(2 * 37), moved, &n_moved, seg_moved, &n_seg_moved);
                layer_run(&cfg, fused, 0, got, &n_got, seg_got, &n_seg_got);
                ck_assert_int_eq(n_got, n_want);
                ck_assert_int_eq(n_moved, n_want);
                ck_assert_int_le(n_want, MAX_FLOATS);
                ck_assert_int_eq(n_seg, 10);
                char detail[300];
                long at = 0;
                for (int s = 0; s < n_seg; s++) {
                    ck_assert_int_eq(seg_got[s], seg[s]);
                    ck_assert_msg(close_to_rounding(seg_names[s], got + at, want + at, moved + at, want + at, seg[s], 2.0,
                                                    detail, sizeof detail),
                                  "phi %s %s %s: fused differs from split: %s", phi_names[phi], kinds[kind],
                                  causal ? "causal" : "bidirectional", detail);
                    at += seg[s];
                }
            }
}
END_TEST

/* The kernel called directly on packed q, k, v [B, T, H d], and on the fused
 * qkv [B, T, H dk | H dk | H dv] (forward_qkv), equals the call on the same
 * values split into [B, H, T, d]: output and dq, dk, dv, bit for bit
 * (cosFormer, causal; B 2, 3 heads, T 37, dk 4, dv 5, chunk 8). */
START_TEST(test_linear_packed_kernel_call) {
    const int B = 2, H = 3, T = 37, dk = 4, dv = 5;
    ModelConfig m;
    AttnCall c = call_for(&m, B, H, T, dk, dv, true, PHI_RELU, REWEIGHT_COS, 8);
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    bool was = grad_set(true);
    tape_reset();
    Rng rng;
    rng_seed(&rng, 4);
    int d[3] = {dk, dk, dv};
    Tensor *split[3], *packed[3];
    for (int l = 0; l < 3; l++) {
        split[l] = tensor_4d(B, H, T, d[l]);
        packed[l] = tensor_3d(B, T, H * d[l]);
        rng_fill_normal(&rng, split[l]->data, split[l]->n, 0.0f, 1.0f);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++)
                    memcpy(packed[l]->data + (((long)b * T + t) * H + h) * d[l],
                           split[l]->data + (((long)b * H + h) * T + t) * d[l], (size_t)d[l] * sizeof(float));
        split[l]->requires_grad = packed[l]->requires_grad = true;
    }
    float *g = arena_alloc(&a, (size_t)B * H * T * dv * sizeof(float));
    rng_fill_normal(&rng, g, (long)B * H * T * dv, 0.0f, 1.0f);
    Tensor *os = linear_kernel()->forward(&c, split[0], split[1], split[2]);
    backward_seeded(os, g);
    tape_reset();
    float *gp = arena_alloc(&a, (size_t)B * H * T * dv * sizeof(float));
    for (int b = 0; b < B; b++) /* the same seed, packed */
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                memcpy(gp + (((long)b * T + t) * H + h) * dv, g + (((long)b * H + h) * T + t) * dv,
                       (size_t)dv * sizeof(float));
    Tensor *op = linear_kernel()->forward(&c, packed[0], packed[1], packed[2]);
    ck_assert_int_eq(op->ndim, 3);
    ck_assert_int_eq(op->shape[0], B);
    ck_assert_int_eq(op->shape[1], T);
    ck_assert_int_eq(op->shape[2], H * dv);
    backward_seeded(op, gp);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                long si = ((long)b * H + h) * T + t, pi = ((long)b * T + t) * H + h;
                ck_assert(memcmp(op->data + pi * dv, os->data + si * dv, (size_t)dv * sizeof(float)) == 0);
                for (int l = 0; l < 3; l++)
                    ck_assert_msg(memcmp(packed[l]->grad + pi * d[l], split[l]->grad + si * d[l],
                                         (size_t)d[l] * sizeof(float)) == 0,
                                  "gradient of input %d differs at b %d h %d t %d", l, b, h, t);
            }
    tape_reset();
    /* fused: row (b, t) holds q's heads, then k's, then v's */
    const int row = H * (2 * dk + dv), col[3] = {0, H * dk, 2 * H * dk};
    Tensor *qkv = tensor_3d(B, T, row);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int l = 0; l < 3; l++)
                    memcpy(qkv->data + ((long)b * T + t) * row + col[l] + h * d[l],
                           split[l]->data + (((long)b * H + h) * T + t) * d[l], (size_t)d[l] * sizeof(float));
    qkv->requires_grad = true;
    Tensor *of = linear_kernel()->forward_qkv(&c, qkv);
    ck_assert_int_eq(of->ndim, 3);
    ck_assert_int_eq(of->shape[2], H * dv);
    backward_seeded(of, gp);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                long si = ((long)b * H + h) * T + t, pi = ((long)b * T + t) * H + h;
                ck_assert(memcmp(of->data + pi * dv, os->data + si * dv, (size_t)dv * sizeof(float)) == 0);
                for (int l = 0; l < 3; l++)
                    ck_assert_msg(memcmp(qkv->grad + ((long)b * T + t) * row + col[l] + h * d[l],
                                         split[l]->grad + si * d[l], (size_t)d[l] * sizeof(float)) == 0,
                                  "fused: gradient of input %d differs at b %d h %d t %d", l, b, h, t);
            }
    tape_reset();
    grad_set(was);
    engine_set_arena(NULL);
    arena_free(&a);
}
END_TEST

/* A gradient that something else reached first is added to, not
 * overwritten: the kernel starts an unset gradient itself (zeroing its rows
 * where it first touches them, tensor_grad_unset), and must not when the
 * buffer already holds a sum. With dq, dk, dv preset to 1, they come out as
 * 1 plus the fresh gradients: causal and bidirectional, reweight none and cos,
 * and pos = rope (whose denominator pass touches dq and dk first). */
START_TEST(test_linear_adds_to_a_set_gradient) {
    const int B = 1, H = 2, T = 21, dk = 4, dv = 3;
    for (int variant = 0; variant < 6; variant++) {
        bool causal = variant % 2;
        ModelConfig m;
        AttnCall c = call_for(&m, B, H, T, dk, dv, causal, PHI_ELU, variant / 2 == 1 ? REWEIGHT_COS : REWEIGHT_NONE, 8);
        if (variant / 2 == 2) m.pos = pos_of("rope"), m.rope_dims = dk;
        Arena a;
        arena_init(&a, 1 << 16);
        engine_set_arena(&a);
        bool was = grad_set(true);
        Rng rng;
        rng_seed(&rng, 9);
        int d[3] = {dk, dk, dv};
        Tensor *x[3];
        for (int l = 0; l < 3; l++) {
            x[l] = tensor_4d(B, H, T, d[l]);
            rng_fill_normal(&rng, x[l]->data, x[l]->n, 0.0f, 1.0f);
            x[l]->requires_grad = true;
        }
        float *g = arena_alloc(&a, (size_t)B * H * T * dv * sizeof(float));
        rng_fill_normal(&rng, g, (long)B * H * T * dv, 0.0f, 1.0f);
        float *fresh[3];
        for (int pass = 0; pass < 2; pass++) {
            tape_reset();
            for (int l = 0; l < 3; l++) {
                x[l]->grad = NULL;
                if (pass) { /* set: 1 everywhere */
                    float *gl = tensor_grad(x[l]);
                    for (long i = 0; i < x[l]->n; i++) gl[i] = 1.0f;
                }
            }
            backward_seeded(linear_kernel()->forward(&c, x[0], x[1], x[2]), g);
            for (int l = 0; l < 3; l++) {
                if (!pass) {
                    fresh[l] = arena_alloc(&a, (size_t)x[l]->n * sizeof(float));
                    memcpy(fresh[l], x[l]->grad, (size_t)x[l]->n * sizeof(float));
                    continue;
                }
                for (long i = 0; i < x[l]->n; i++)
                    ck_assert_msg(fabs(x[l]->grad[i] - (1.0 + fresh[l][i])) <= 1e-5 * (1.0 + fabs(fresh[l][i])),
                                  "variant %d input %d element %ld: %g, want 1 + %g", variant, l, i,
                                  (double)x[l]->grad[i], (double)fresh[l][i]);
            }
        }
        tape_reset();
        grad_set(was);
        engine_set_arena(NULL);
        arena_free(&a);
    }
}
END_TEST

Suite *attn_linear_suite(void) {
    Suite *s = suite_create("attn_linear");
    TCase *tc = tcase_create("pytorch");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_linear_fixture_cases);
    tcase_add_loop_test(tc, test_linear_matches_pytorch, 0, N_FX);
    tcase_add_test(tc, test_linear_pytorch_catches_broken_backward);
    tcase_add_test(tc, test_linear_matches_pytorch_threaded);
    suite_add_tcase(s, tc);

    tc = tcase_create("composition");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_linear_matches_composition, 0, N_VARIANTS);
    tcase_add_test(tc, test_linear_chunked_matches_naive);
    tcase_add_test(tc, test_linear_chunk_sizes_agree);
    suite_add_tcase(s, tc);

    tc = tcase_create("memory");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_linear_memory_linear_in_T);
    suite_add_tcase(s, tc);

    tc = tcase_create("clamp");
    tcase_add_loop_test(tc, test_linear_clamped_rows_no_den_gradient, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("model");
    tcase_add_test(tc, test_linear_cosformer_preset);
    tcase_add_test(tc, test_linear_ignores_scale);
    tcase_add_test(tc, test_linear_flops_match_sgemm_calls);
    suite_add_tcase(s, tc);

    tc = tcase_create("layout");
    tcase_add_test(tc, test_linear_packed_matches_split);
    tcase_add_test(tc, test_linear_packed_kernel_call);
    tcase_add_test(tc, test_linear_adds_to_a_set_gradient);
    suite_add_tcase(s, tc);
    return s;
}
