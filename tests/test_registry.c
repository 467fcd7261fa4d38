/* test_registry.c: a new attention kernel is one file and one registration.
 *
 * A kernel that exists only here, "test_relu2" (squared-ReLU attention, with a
 * power option of its own: P = relu(s q k^T)^p, causally masked, o = P v,
 * made of primitive ops), is added with the one call a kernel of one's own
 * needs, attn_register. Nothing else changes, and yet the option table's attn
 * values and --help list it and its option, validation knows what it can and
 * cannot take (by the generic rules and by its own hook), the config and the
 * model carry its option, and ./bench's row label names it. The built-in
 * values keep the indices their enum gives them. */
#include <cJSON.h>
#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"
#include "bench.h"
#include "grid_report.h"
#include "ops.h"
#include "options.h"
#include "test_util.h"

/* ---- the kernel: all of its file --------------------------------------------- */

/* Its own option, in a struct of its own that the registry places in the
 * ModelConfig. */
typedef struct ATTN_OPTS {
    int power;
} Relu2Opts;
static const OptDef test_relu2_options[] = {
    {"test_relu2_power", OPT_INT, GROUP_MODEL, offsetof(Relu2Opts, power), "2", 1, 4, NULL, 0, "test_relu2 attention's power p", NULL},
    {NULL, 0, 0, 0, NULL, 0, 0, NULL, 0, NULL, NULL},
};
static const AttnKernel attn_kernel_test_relu2;

static int test_relu2_power(const ModelConfig *m) { return ((const Relu2Opts *)attn_options(m, &attn_kernel_test_relu2))->power; }

static Tensor *test_relu2_probs(const AttnCall *c, Tensor *q, Tensor *k) {
    Tensor *s = op_relu(op_scale(op_matmul(q, k, false, true), c->scale)), *p = s;
    for (int i = 1; i < ((const Relu2Opts *)c->opts)->power; i++) p = op_mul(p, s);
    if (!c->causal) return p;
    Tensor *mask = tensor_2d(c->T, c->T);
    for (int i = 0; i < c->T; i++)
        for (int j = 0; j < c->T; j++) mask->data[i * c->T + j] = j <= i ? 1.0f : 0.0f;
    return op_mul(p, mask);
}

static Tensor *test_relu2_forward(const AttnCall *c, Tensor *q, Tensor *k, Tensor *v) {
    return op_matmul(test_relu2_probs(c, q, k), v, false, false);
}

static int test_relu2_validate(const ModelConfig *m, bool (*changed)(const char *name, const void *ctx), const void *ctx,
                          Err *e) {
    (void)changed, (void)ctx;
    if (test_relu2_power(m) > 2 && m->context > 512)
        return err_set(e, "--test_relu2_power %d: scores grow as their p-th power; at most 2 past context 512", test_relu2_power(m));
    return 0;
}

static void test_relu2_describe(const ModelConfig *m, char *buf, size_t size) {
    snprintf(buf, size, " p=%d", test_relu2_power(m));
}

static const AttnKernel attn_kernel_test_relu2 = {
    .name = "test_relu2",
    .forward = test_relu2_forward,
    .probs = test_relu2_probs,
    .qkv16 = attn_qkv_fp32,
    .title = "attn=test_relu2",
    .option_rows = test_relu2_options,
    .options_size = sizeof(Relu2Opts),
    .validate = test_relu2_validate,
    .describe = test_relu2_describe,
};

/* ---- what the registration gives it ------------------------------------------ */

static bool listed(const char *const *names, const char *name) {
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], name)) return true;
    return false;
}

static void config_for(Config *c, const char *const *kv) {
    config_defaults(c);
    Err e;
    for (int i = 0; kv[i]; i += 2) ck_assert_msg(option_set(c, kv[i], kv[i + 1], &e) == 0, "%s", e.msg);
}

START_TEST(test_new_kernel_is_one_registration) {
    ck_assert_int_eq(attn_find("test_relu2"), -1);
    int kernels = attn_kernel_count();
    attn_register(&attn_kernel_test_relu2);
    ck_assert_int_eq(attn_kernel_count(), kernels + 1);
    int id = attn_find("test_relu2");
    ck_assert_int_ge(id, 0);
    ck_assert_ptr_eq(attn_kernel_for(id), &attn_kernel_test_relu2);

    /* the attn option's values, and --help */
    ck_assert(listed(option_choices(option_find("attn")), "test_relu2"));
    char *help = NULL;
    size_t help_len = 0;
    FILE *f = open_memstream(&help, &help_len);
    ck_assert_ptr_nonnull(f);
    options_print_help(f, HELP_MODEL);
    fclose(f);
    const char *line = strstr(help, "--attn");
    ck_assert_ptr_nonnull(line);
    const char *end = strchr(line, '\n');
    ck_assert_msg(strstr(line, "test_relu2") && strstr(line, "test_relu2") < end, "--help's attn line: %.*s", (int)(end - line),
                  line);
    ck_assert_msg(strstr(help, "--test_relu2_power"), "--help lacks test_relu2's own option");
    free(help);

    /* validation: it takes what a kernel without a score matrix takes */
    Config c;
    Err e;
    config_for(&c, (const char *[]){"attn", "test_relu2", NULL});
    ck_assert_msg(config_validate(&c, &e) == 0, "%s", e.msg);
    config_for(&c, (const char *[]){"attn", "test_relu2", "pos", "rope", "objective", "mlm", NULL});
    ck_assert_msg(config_validate(&c, &e) == 0, "%s", e.msg);
    config_for(&c, (const char *[]){"attn", "test_relu2", "phi", "elu", NULL});
    ck_assert_int_ne(config_validate(&c, &e), 0);
    ck_assert_msg(strstr(e.msg, "--phi applies to linear attention, not attn=test_relu2"), "%s", e.msg);
    config_for(&c, (const char *[]){"attn", "test_relu2", "pos", "alibi", NULL});
    ck_assert_int_ne(config_validate(&c, &e), 0);
    /* (the kernels with a score matrix are listed between the two) */
    ck_assert_msg(strstr(e.msg, "needs an explicit score matrix: attn=softmax") && strstr(e.msg, ", not test_relu2"), "%s",
                  e.msg);
    config_for(&c, (const char *[]){"attn", "test_relu2", "window", "8", NULL});
    ck_assert_int_ne(config_validate(&c, &e), 0);
    ck_assert_msg(strstr(e.msg, "--window acts on an explicit score matrix"), "%s", e.msg);
    /* its own option: for it alone, within its range, through its own rule */
    config_for(&c, (const char *[]){"test_relu2_power", "3", NULL});
    ck_assert_int_ne(config_validate(&c, &e), 0);
    ck_assert_msg(strstr(e.msg, "--test_relu2_power applies to attn=test_relu2, not attn=softmax"), "%s", e.msg);
    config_defaults(&c);
    ck_assert_int_ne(option_set(&c, "test_relu2_power", "5", &e), 0);
    ck_assert_msg(strstr(e.msg, "--test_relu2_power: expected an integer in [1, 4]"), "%s", e.msg);
    config_for(&c, (const char *[]){"attn", "test_relu2", "test_relu2_power", "3", "context", "1024", NULL});
    ck_assert_int_ne(config_validate(&c, &e), 0);
    ck_assert_msg(strstr(e.msg, "--test_relu2_power 3: scores grow"), "%s", e.msg);
    /* and through config.json, as checkpoints keep it */
    config_for(&c, (const char *[]){"attn", "test_relu2", "test_relu2_power", "3", NULL});
    cJSON *json = config_to_json(&c);
    char *text = cJSON_PrintUnformatted(json);
    cJSON_Delete(json);
    ck_assert_msg(strstr(text, "\"test_relu2_power\":3"), "%s", text);
    json = cJSON_Parse(text);
    free(text);
    Config back;
    config_defaults(&back);
    ck_assert_msg(config_from_json(&back, json, &e) == 0, "%s", e.msg);
    cJSON_Delete(json);
    ck_assert_int_eq(attn_option_int(&back.model, &attn_kernel_test_relu2, "test_relu2_power"), 3);

    /* ./bench's label */
    char label[128];
    config_for(&c, (const char *[]){"attn", "test_relu2", NULL});
    ck_assert_str_eq(bench_kernel_label(&c.model, label, sizeof label), "test_relu2 p=2 causal");
    config_for(&c, (const char *[]){"attn", "test_relu2", "test_relu2_power", "3", NULL});
    ck_assert_str_eq(bench_kernel_label(&c.model, label, sizeof label), "test_relu2 p=3 causal");

    /* ./ablate: its option as a grid key implies it, the baseline puts the
     * option back, and the tables have its column */
    Grid g;
    grid_init(&g);
    ck_assert_msg(grid_word(&g, "test_relu2_power=1/3", &e) == 0, "%s", e.msg);
    ck_assert_msg(grid_settle(&g, &e) == 0, "%s", e.msg);
    ck_assert_ptr_eq(g.implied, &attn_kernel_test_relu2);
    GridRun *runs;
    int n_runs = grid_plan(&g, true, "ablation", &runs, &e);
    ck_assert_msg(n_runs == 3, "%d runs: %s", n_runs, e.msg);
    for (int i = 0; i < 2; i++) {
        ck_assert_ptr_eq(attn_kernel_for(runs[i].cfg.model.attn), &attn_kernel_test_relu2);
        ck_assert_int_eq(attn_option_int(&runs[i].cfg.model, &attn_kernel_test_relu2, "test_relu2_power"), i ? 3 : 1);
        ck_assert(!runs[i].skipped);
    }
    ck_assert_str_eq(runs[1].folder, "ablation/test_relu2_power-3");
    ck_assert_int_eq(runs[2].cfg.model.attn, attn_find(option_find("attn")->def));
    ck_assert_int_eq(attn_option_int(&runs[2].cfg.model, &attn_kernel_test_relu2, "test_relu2_power"), 2);
    char *md, *csv;
    grid_tables(&g, runs, n_runs, &md, &csv, NULL);
    ck_assert_msg(strstr(md, "| run | test_relu2_power | final val bpb |"), "%s", md);
    ck_assert_msg(strstr(md, "| test_relu2_power=3 | 3 |"), "%s", md);
    ck_assert_msg(strstr(csv, "run,test_relu2_power,final_val_bpb,"), "%s", csv);
    free(md);
    free(csv);
    grid_free(runs, n_runs);
    grid_release(&g);

    /* the model runs it: a layer forward and backward, causal */
    config_for(&c, (const char *[]){"attn", "test_relu2", "d_model", "8", "heads", "2", "context", "6", NULL});
    ck_assert_msg(config_validate(&c, &e) == 0, "%s", e.msg);
    ParamSet p;
    params_init(&p);
    Attention at;
    attention_declare(&at, &p, "blocks.0.attn", 0, &c.model);
    ck_assert_ptr_eq(at.kernel, &attn_kernel_test_relu2);
    params_alloc(&p);
    Rng rng;
    rng_seed(&rng, 5);
    rng_fill_normal(&rng, p.value, p.total, 0.0f, 0.3f);
    params_zero_grad(&p);
    Arena a;
    arena_init(&a, 1 << 16);
    engine_set_arena(&a);
    bool was = grad_set(true);
    tape_reset();
    Tensor *x = tensor_3d(1, 6, 8);
    rng_fill_normal(&rng, x->data, x->n, 0.0f, 1.0f);
    x->requires_grad = true;
    Tensor *y = attention_forward(&at, x);
    ck_assert_int_eq(y->n, x->n);
    backward(op_sum(op_mul(y, y)));
    for (long i = 0; i < x->n; i++) ck_assert(isfinite(x->grad[i]));
    /* causal: the first position's output depends on the first input alone */
    Tensor *y0 = tensor_3d(1, 6, 8);
    memcpy(y0->data, y->data, (size_t)y->n * sizeof(float));
    x->data[5 * 8] += 1.0f;
    grad_set(false);
    Tensor *y1 = attention_forward(&at, x);
    for (int d = 0; d < 8; d++) ck_assert_float_eq(y1->data[d], y0->data[d]);
    /* the kernel reads its own option from the layer's config */
    Config c3 = c;
    ck_assert_msg(option_set(&c3, "test_relu2_power", "3", &e) == 0, "%s", e.msg);
    at.cfg = attn_effective(&c3.model); /* what at.call points to */
    Tensor *y3 = attention_forward(&at, x);
    bool differs = false;
    for (long i = 0; i < y3->n; i++) differs |= y3->data[i] != y1->data[i];
    ck_assert_msg(differs, "test_relu2_power 3 gives the output of test_relu2_power 2");
    grad_set(was);
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&a);
    params_free(&p);

    attn_unregister(&attn_kernel_test_relu2);
    ck_assert_int_eq(attn_find("test_relu2"), -1);
    ck_assert_int_eq(attn_kernel_count(), kernels);
}
END_TEST

/* The built-in values' enum (for the tests and layers/attention/) is the
 * registry's order. */
START_TEST(test_builtin_indices) {
    ck_assert_int_eq(attn_find("softmax"), ATTN_SOFTMAX);
    ck_assert_int_eq(attn_find("linear"), ATTN_LINEAR);
    ck_assert_int_eq(attn_find("cosformer"), ATTN_COSFORMER);
    ck_assert_int_eq(attn_find("linformer"), ATTN_LINFORMER);
    ck_assert_str_eq(option_find("attn")->def, attn_choice(0)->name);
    /* a preset runs its kernel with what it fixes */
    ModelConfig m = {.attn = ATTN_COSFORMER};
    *linear_opts(&m) = (LinearOpts){.phi = PHI_ELU, .reweight = REWEIGHT_NONE};
    ModelConfig eff = attn_effective(&m);
    ck_assert_ptr_eq(attn_kernel_for(ATTN_COSFORMER), attn_kernel_for(ATTN_LINEAR));
    ck_assert_int_eq(linear_opts(&eff)->phi, PHI_RELU);
    ck_assert_int_eq(linear_opts(&eff)->reweight, REWEIGHT_COS);
}
END_TEST

Suite *registry_suite(void) {
    Suite *s = suite_create("registry");
    TCase *tc = tcase_create("registry");
    tcase_add_test(tc, test_builtin_indices);
    tcase_add_test(tc, test_new_kernel_is_one_registration);
    suite_add_tcase(s, tc);
    return s;
}
