/* custom_kernel.c: an attention kernel of one's own, outside the tree, registered with the
 * installed library and trained with.
 *
 * The kernel is squared-ReLU attention, P = relu(S)^2 / T with S = s Q K^T
 * under the masks, O = P V: a score map (attnlab/scoremap.h), so f and f'
 * are all it writes; the score-map op does the products, the masks and the
 * backward. One call, attn_register, makes it a value of the `attn` option
 * like the built-in ones: the option table, validation and the model find it
 * there. Its gradient is checked against central differences, then a 2-layer
 * model with it learns a paragraph of text.
 *
 *   cc custom_kernel.c $(pkg-config --cflags --libs attnlab) -o custom_kernel
 *   ./custom_kernel                  the check, then 150 steps; exits 1 unless both hold
 *   ./custom_kernel --wrong-backward the same with f' off by 10%: the check must fail */
#include <stdio.h>
#include <string.h>

#include <attnlab/gradcheck.h>
#include <attnlab/model.h>
#include <attnlab/optim.h>
#include <attnlab/options.h>
#include <attnlab/scoremap.h>

/* ---- the kernel: all of it ------------------------------------------------- */

static bool wrong_backward; /* --wrong-backward: f' off by 10% */

static void relu2_map(const float *s, float *p, int n, int T) {
    for (int j = 0; j < n; j++) p[j] = s[j] > 0 ? s[j] * s[j] / (float)T : 0.0f;
}
static void relu2_grad(const float *s, const float *p, float *d, int n, int T) {
    (void)p;
    float k = wrong_backward ? 2.2f : 2.0f;
    for (int j = 0; j < n; j++) d[j] *= s[j] > 0 ? k * s[j] / (float)T : 0.0f;
}
static const ScoreMap relu2 = {relu2_map, relu2_grad};

static Tensor *relu2_forward(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v) {
    return scoremap_attention(&relu2, c, q, k, v);
}
static Tensor *relu2_probs(const AttnCall *c, Tensor *q, Tensor *k) { return scoremap_probs(&relu2, c, q, k); }

static const AttnKernel attn_kernel_relu2 = {
    .name = "relu2",
    .forward = relu2_forward,
    .probs = relu2_probs,
    .ops = {&scoremap_op},
    .qkv16 = attn_qkv_fp32,
    .title = "attn=relu2",
    .validate = scoremap_validate,
    .flops = scoremap_flops,
    .scores = true,
};

/* ---- its gradient check: q, k, v -> the kernel's output --------------------- */

enum { GB = 2, GH = 2, GT = 6, GD = 4 };
static AttnCall check_call;

static Tensor *relu2_case(Tensor **in) { return attn_kernel_relu2.forward(&check_call, in[0], in[1], in[2]); }

static bool check_gradient(const Config *base) {
    ModelConfig m = base->model;
    m.heads = GH, m.key_size = GD, m.head_size = GD, m.d_model = GH * GD;
    check_call = attn_call(&attn_kernel_relu2, &m, 0);
    check_call.B = GB, check_call.T = GT;
    GradCase c = {"relu2 causal", 3,
                  {{4, {GB, GH, GT, GD}, GC_NORMAL}, {4, {GB, GH, GT, GD}, GC_NORMAL}, {4, {GB, GH, GT, GD}, GC_NORMAL}},
                  relu2_case};
    GcResult r;
    bool ok = gradcheck(&c, 11, NULL, &r);
    printf("gradcheck relu2: %s, %d elements, worst error %.3f of the tolerance%s%s\n", ok ? "ok" : "FAILED",
           r.checked, r.worst_ratio, ok ? "" : ": ", r.why);
    return ok;
}

/* ---- a model with it, trained ---------------------------------------------- */

static const char text[] =
    "It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
    "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, "
    "it was the season of Darkness, it was the spring of hope, it was the winter of despair.";

static int set(Config *c, const char *name, const char *value) {
    Err e;
    if (option_set(c, name, value, &e) == 0) return 0;
    err_print(&e);
    return -1;
}

int main(int argc, char **argv) {
    wrong_backward = argc > 1 && !strcmp(argv[1], "--wrong-backward");
    engine_set_threads(1);
    attn_register(&attn_kernel_relu2); /* before the option table is first read */

    /* the model's options by name, as ./train takes them */
    Config c;
    config_defaults(&c);
    const char *opts[][2] = {{"attn", "relu2"}, {"layers", "2"}, {"d_model", "64"}, {"heads", "4"},
                             {"context", "32"}, {"pos", "learned"}};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++)
        if (set(&c, opts[i][0], opts[i][1]) != 0) return 1;
    Err e;
    if (config_validate(&c, &e) != 0) {
        err_print(&e);
        return 1;
    }

    Arena arena;
    arena_init(&arena, 0);
    engine_set_arena(&arena);
    if (!check_gradient(&c)) return 1;

    Model m;
    model_init(&m, &c.model);
    Rng rng;
    rng_seed(&rng, 1);
    model_init_weights(&m, &rng);
    AdamWConfig opt = adamw_default();
    enum { B = 8, T = 32, STEPS = 150 };
    int n = (int)strlen(text), ids[B * T], targets[B * T];
    float first = 0, last = 0;
    grad_set(true);
    params_zero_grad(&m.params);
    for (int step = 0; step < STEPS; step++) {
        for (int b = 0; b < B; b++) {
            int at = (int)rng_below(&rng, (uint32_t)(n - T - 1));
            for (int t = 0; t < T; t++) {
                ids[b * T + t] = (unsigned char)text[at + t];
                targets[b * T + t] = (unsigned char)text[at + t + 1];
            }
        }
        arena_reset(&arena);
        tape_reset();
        Tensor *loss = model_loss(&m, ids, targets, B, T);
        backward(loss);
        float lr = lr_at(SCHEDULE_COSINE, step, 10, STEPS, 3e-3f, 3e-4f);
        adamw_step(&m.params, &opt, lr, step + 1, clip_scale(grad_norm(&m.params), 1.0f));
        if (step == 0) first = loss->data[0];
        last = loss->data[0];
        if (step % 50 == 0 || step == STEPS - 1) printf("step %3d: loss %.4f\n", step, loss->data[0]);
    }
    tape_reset();
    model_free(&m);
    engine_set_arena(NULL);
    arena_free(&arena);
    /* from ln 256 = 5.55 nats; the paragraph's repetitions are learnt below 2.5 */
    bool learnt = last < 2.5f && last < first;
    printf("trained with attn=relu2: loss %.4f -> %.4f: %s\n", first, last, learnt ? "ok" : "FAILED");
    return learnt ? 0 : 1;
}
