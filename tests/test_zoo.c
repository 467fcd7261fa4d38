/* test_zoo.c: every attention variant and every sensible combination trains.
 *
 * The integration test of the attention zoo: one short run through
 * train_run() (what ./train runs) per point of the matrix below, on generated
 * text with a tiny model (1 layer, d_model 32, 2 heads, context 32, batch 4,
 * 12 steps, 1 thread). Each run must finish, keep its loss finite, lower it
 * (the mean of the last 3 logged losses below the mean of the first 3), end
 * with a finite validation bpb, and leave a complete run folder: the five
 * files, config.json naming the variant, one metrics line per step with the 8
 * keys (den_clamped a fraction for the linear kernels, null for the others),
 * and samples.txt in its objective's format.
 *
 * The matrix:
 *   attn=linear: phi (4) x reweight (2) x objective (clm, mlm); clm runs in
 *     chunks of 12, so the 32-byte windows end on a partial chunk;
 *   attn=cosformer: clm (one chunk of 64, beyond the window) and mlm;
 *   attn=linformer (mlm): share x proj, the 10 valid pairs, k = 8;
 *   attn=softmax: talking_heads (4) x objective (2);
 *   key_size != head_size (24 / 8 and 8 / 24) with every kernel;
 *   pos = rope (softmax, clm and mlm, rope_dims 8 of 16; linear elu, relu
 *     under mlm, leakyrelu with rope_dims 8) and pos = xpos, on 2 layers;
 *   pos = sinusoidal (softmax, cosformer), alibi (clm, mlm), kerple_power,
 *     kerple_log (mlm), sandwich, and the masks: alibi with a window of 8
 *     and log-n, rope with a window of 12, log-n alone;
 *   and an mlm run with neither learned positions nor tied embeddings;
 *   every other attn value (a kernel added to the registry, which so needs
 *   no line here): clm (unless bidirectional-only) and mlm with its
 *   defaults, and with alibi, a window of 8 and log-n when it forms a score
 *   matrix.
 * And a check that each kernel runs causally under clm (no logit moves when
 * a later byte changes) and bidirectionally under mlm (the first one does).
 *
 * The kinds are the `attn` option's choices. A kind whose kernel is not in
 * layers/attention/kernels.c (attn_kernel_for aborts for it) has its runs
 * skipped with a note on stdout, and test_zoo_covers_every_kind fails for it,
 * as it does for a kind with no run in the matrix. */
#include <cJSON.h>
#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model.h"
#include "run.h"
#include "trainer.h"
#include "test_util.h"

#define ZOO_STEPS 12
#define MAX_KINDS 16

static char tmp_dir[512], corpus_path[600];
/* The `attn` option's choices (index = AttnKind), and whether attn_kernel_for
 * has a kernel for each (probed in setup). */
static const char *const *kinds;
static int n_kinds;
static bool kind_available[MAX_KINDS];

/* ------------------------------------------------------------------ matrix */

typedef struct {
    char name[96];
    const char *kv[24]; /* key, value, ...; NULL-terminated */
} ZooRun;

static ZooRun runs[96];
static int n_runs;

static ZooRun *zoo_add(const char *name) {
    if (n_runs == (int)(sizeof runs / sizeof runs[0])) DIE("test_zoo: more than %d runs", n_runs);
    ZooRun *r = &runs[n_runs++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    return r;
}

static void zoo_set(ZooRun *r, const char *key, const char *value) {
    int n = 0;
    while (r->kv[n]) n += 2;
    if (n + 2 >= (int)(sizeof r->kv / sizeof r->kv[0])) DIE("test_zoo: run %s has too many options", r->name);
    r->kv[n] = key;
    r->kv[n + 1] = value;
}

static const char *const phis[] = {"identity", "relu", "leakyrelu", "elu"};
static const char *const reweights[] = {"none", "cos"};
static const char *const objectives[] = {"clm", "mlm"};
static const char *const talking[] = {"none", "pre", "post", "both"};
static const char *const shares[] = {"none", "headwise", "kv", "layerwise"};
static const char *const projs[] = {"linear", "mean", "max", "conv"};

/* The runs of the matrix with attn = kinds[k]. */
static int runs_of(int k) {
    int count = 0;
    for (int i = 0; i < n_runs; i++) {
        const char *attn = "softmax"; /* the default */
        for (int j = 0; runs[i].kv[j]; j += 2)
            if (!strcmp(runs[i].kv[j], "attn")) attn = runs[i].kv[j + 1];
        count += !strcmp(attn, kinds[k]);
    }
    return count;
}

/* Every attn value the lists above do not name (a kernel added to the
 * registry, layers/attention/kernels.c) trains with its defaults under each
 * objective it has, and, when it forms a score matrix, under a score bias and
 * the masks. */
static void add_registry_runs(void) {
    char name[96];
    for (int k = 0; k < n_kinds; k++) {
        if (runs_of(k) > 0) continue;
        const AttnKernel *kern = attn_kernel_for(k);
        for (int o = kern->bidirectional_only ? 1 : 0; o < 2; o++) {
            snprintf(name, sizeof name, "%s-%s", kinds[k], objectives[o]);
            ZooRun *r = zoo_add(name);
            zoo_set(r, "attn", kinds[k]);
            zoo_set(r, "objective", objectives[o]);
            if (!kern->scores) continue;
            snprintf(name, sizeof name, "%s-%s-alibi-window8-logn", kinds[k], objectives[o]);
            r = zoo_add(name);
            static const char *const masks[] = {"pos", "alibi", "window", "8", "logn", "on", NULL};
            zoo_set(r, "attn", kinds[k]);
            zoo_set(r, "objective", objectives[o]);
            for (int i = 0; masks[i]; i += 2) zoo_set(r, masks[i], masks[i + 1]);
        }
    }
}

static void build_matrix(void) {
    char name[96];
    n_runs = 0;
    for (int p = 0; p < 4; p++)
        for (int w = 0; w < 2; w++)
            for (int o = 0; o < 2; o++) {
                snprintf(name, sizeof name, "linear-%s-%s-%s", phis[p], reweights[w], objectives[o]);
                ZooRun *r = zoo_add(name);
                zoo_set(r, "attn", "linear");
                zoo_set(r, "phi", phis[p]);
                zoo_set(r, "reweight", reweights[w]);
                zoo_set(r, "objective", objectives[o]);
                if (o == 0) zoo_set(r, "chunk", "12");
            }
    for (int o = 0; o < 2; o++) {
        snprintf(name, sizeof name, "cosformer-%s", objectives[o]);
        ZooRun *r = zoo_add(name);
        zoo_set(r, "attn", "cosformer");
        zoo_set(r, "objective", objectives[o]);
    }
    for (int s = 0; s < 4; s++)
        for (int p = 0; p < 4; p++) {
            if ((p == 1 || p == 2) && s != 0) continue; /* mean and max pooling have nothing to share */
            snprintf(name, sizeof name, "linformer-%s-%s", shares[s], projs[p]);
            ZooRun *r = zoo_add(name);
            zoo_set(r, "attn", "linformer");
            zoo_set(r, "objective", "mlm");
            zoo_set(r, "linformer_k", "8");
            zoo_set(r, "linformer_share", shares[s]);
            zoo_set(r, "linformer_proj", projs[p]);
        }
    for (int t = 0; t < 4; t++)
        for (int o = 0; o < 2; o++) {
            snprintf(name, sizeof name, "softmax-talking_%s-%s", talking[t], objectives[o]);
            ZooRun *r = zoo_add(name);
            zoo_set(r, "talking_heads", talking[t]);
            zoo_set(r, "objective", objectives[o]);
        }
    /* the low-rank bottleneck: key size above the head size, and below it */
    static const char *const bottleneck[][8] = {
        {"softmax-k24-v8", "attn", "softmax", NULL},
        {"softmax-k8-v24-mlm", "attn", "softmax", "objective", "mlm", NULL},
        {"softmax-talking_both-k24-v8", "talking_heads", "both", NULL},
        {"linear-elu-k24-v8", "attn", "linear", "phi", "elu", "chunk", "12", NULL},
        {"linear-relu-k8-v24-mlm", "attn", "linear", "objective", "mlm", NULL},
        {"cosformer-k24-v8", "attn", "cosformer", NULL},
        {"linformer-k24-v8", "attn", "linformer", "objective", "mlm", NULL},
    };
    for (size_t b = 0; b < sizeof bottleneck / sizeof bottleneck[0]; b++) {
        ZooRun *r = zoo_add(bottleneck[b][0]);
        for (int i = 1; bottleneck[b][i]; i += 2) zoo_set(r, bottleneck[b][i], bottleneck[b][i + 1]);
        bool big_key = strstr(r->name, "-k24-") != NULL;
        zoo_set(r, "key_size", big_key ? "24" : "8");
        zoo_set(r, "head_size", big_key ? "8" : "24");
        if (strstr(r->name, "linformer")) zoo_set(r, "linformer_k", "8");
    }
    /* rotary positions on a 2-layer model: the module rotates q and k for
     * softmax; linear rotates its features after phi (RoFormer eq. 19) */
    static const char *const rotary[][14] = {
        {"softmax-rope", "pos", "rope", NULL},
        {"softmax-rope-mlm", "pos", "rope", "objective", "mlm", NULL},
        {"softmax-rope_dims8", "pos", "rope", "rope_dims", "8", NULL},
        {"softmax-xpos", "pos", "xpos", NULL},
        {"linear-elu-rope", "attn", "linear", "phi", "elu", "pos", "rope", "chunk", "12", NULL},
        {"linear-relu-rope-mlm", "attn", "linear", "phi", "relu", "pos", "rope", "objective", "mlm", NULL},
        {"linear-leakyrelu-rope_dims8", "attn", "linear", "phi", "leakyrelu", "pos", "rope", "rope_dims", "8", NULL},
        /* the other position schemes, and the softmax kernel's masks */
        {"softmax-sinusoidal", "pos", "sinusoidal", NULL},
        {"cosformer-sinusoidal", "attn", "cosformer", "pos", "sinusoidal", NULL},
        {"softmax-alibi", "pos", "alibi", NULL},
        {"softmax-alibi-mlm", "pos", "alibi", "objective", "mlm", NULL},
        {"softmax-kerple_power", "pos", "kerple_power", NULL},
        {"softmax-kerple_log-mlm", "pos", "kerple_log", "objective", "mlm", NULL},
        {"softmax-sandwich", "pos", "sandwich", "sandwich_lambda", "0.5", NULL},
        {"softmax-alibi-window8-logn", "pos", "alibi", "window", "8", "logn", "on", NULL},
        {"softmax-rope-window12", "pos", "rope", "window", "12", NULL},
        {"softmax-none-logn", "pos", "none", "logn", "on", NULL},
    };
    for (size_t b = 0; b < sizeof rotary / sizeof rotary[0]; b++) {
        ZooRun *r = zoo_add(rotary[b][0]);
        for (int i = 1; rotary[b][i]; i += 2) zoo_set(r, rotary[b][i], rotary[b][i + 1]);
        zoo_set(r, "layers", "2");
    }
    ZooRun *r = zoo_add("softmax-mlm-nopos-untied");
    zoo_set(r, "objective", "mlm");
    zoo_set(r, "pos", "none");
    zoo_set(r, "tie_embeddings", "false");
    add_registry_runs();
}

/* ---------------------------------------------------------------- fixtures */

/* attn_kernel_for(kind) in a child process: it aborts for a kind whose
 * kernel has not landed. */
static bool probe_kind(int kind) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, STDERR_FILENO);
        attn_kernel_for(kind);
        _exit(0);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* About 150 KB of sentences from a small vocabulary, from a fixed seed. */
static void write_corpus(const char *path) {
    static const char *const words[] = {"the", "of", "and", "to", "a", "in", "is", "it", "that", "was",
                                        "he", "for", "on", "are", "with", "as", "his", "they", "be", "at",
                                        "one", "have", "this", "from", "by", "word", "but", "what", "some", "we"};
    uint64_t s = 0x200c0ffeeULL;
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    for (long len = 0; len < 150000;) {
        int k = 3 + (int)(s % 9);
        for (int i = 0; i < k; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            const char *w = words[s % 30];
            if (i)
                len += fprintf(f, " %s", w);
            else
                len += fprintf(f, "%c%s", w[0] - 'a' + 'A', w + 1);
        }
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        len += fprintf(f, "%c%c", ".,;!?"[s % 5], s % 4 == 0 ? '\n' : ' ');
    }
    ck_assert_int_eq(fclose(f), 0);
}

static void setup(void) {
    test_tmpdir(tmp_dir, sizeof tmp_dir, "zoo");
    snprintf(corpus_path, sizeof corpus_path, "%s/corpus.txt", tmp_dir);
    write_corpus(corpus_path);
    for (int k = 0; k < n_kinds; k++) {
        kind_available[k] = probe_kind(k);
        if (!kind_available[k]) printf("zoo: attn=%s has no kernel yet; its runs are skipped\n", kinds[k]);
    }
}

static void teardown(void) { test_rmtree(tmp_dir); }

/* ----------------------------------------------------------------- helpers */

static void set(Config *c, const char *key, const char *value) {
    Err e;
    ck_assert_msg(option_set(c, key, value, &e) == 0, "%s", e.msg);
}

/* The tiny configuration with the run's options; false (e set) when
 * config_validate refuses the combination. */
static bool zoo_config_try(const ZooRun *r, Config *out, Err *e) {
    Config c;
    config_defaults(&c);
    static const char *const tiny[][2] = {
        {"layers", "1"},      {"d_model", "32"},      {"heads", "2"},          {"context", "32"},
        {"batch", "4"},       {"steps", "12"},        {"warmup", "2"},         {"lr", "1e-2"},
        {"log_every", "1"},   {"eval_every", "12"},   {"eval_batches", "2"},   {"save_every", "12"},
        {"threads", "1"},     {"sample_length", "32"},
    };
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) set(&c, tiny[i][0], tiny[i][1]);
    for (int i = 0; r->kv[i]; i += 2) set(&c, r->kv[i], r->kv[i + 1]);
    if (config_validate(&c, e) != 0) return false;
    *out = c;
    return true;
}

static Config zoo_config(const ZooRun *r) {
    Config c;
    Err e;
    ck_assert_msg(zoo_config_try(r, &c, &e), "%s: refused: %s", r->name, e.msg);
    return c;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "%s: cannot open", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static const char *run_file(char *buf, size_t size, const char *run, const char *file) {
    snprintf(buf, size, "%s/%s/%s", tmp_dir, run, file);
    return buf;
}

/* ------------------------------------------------------------------- tests */

START_TEST(test_zoo_trains) {
    const ZooRun *zr = &runs[_i];
    Config cfg = zoo_config(zr);
    const ModelConfig *m = &cfg.model;
    if (!kind_available[m->attn]) {
        printf("zoo: %s skipped (attn kind has no kernel yet)\n", zr->name);
        return;
    }
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/%s", tmp_dir, zr->name);
    TrainJob job = {.cfg = cfg, .corpus = corpus_path, .run_dir = dir, .label = zr->name, .quiet = true};
    TrainResult res;
    Err e;
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), null = open("/dev/null", O_WRONLY);
    ck_assert(saved >= 0 && null >= 0);
    dup2(null, STDOUT_FILENO);
    close(null);
    int rc = train_run(&job, &res, &e);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    ck_assert_msg(rc == 0, "%s: %s", zr->name, e.msg);
    ck_assert_msg(res.status == TRAIN_DONE, "%s: status %d (diverged at step %ld)", zr->name, (int)res.status,
                  res.diverged_step);
    ck_assert_int_eq(res.step, ZOO_STEPS);
    ck_assert_msg(isfinite(res.val_bpb) && res.val_bpb > 0.0 && res.val_bpb < 9.0, "%s: val_bpb %g", zr->name, res.val_bpb);

    /* the run folder */
    static const char *const files[] = {"model.safetensors", "config.json", "metrics.jsonl", "loss.png", "samples.txt"};
    for (int i = 0; i < 5; i++) {
        struct stat st;
        ck_assert_msg(stat(run_file(path, sizeof path, zr->name, files[i]), &st) == 0 && st.st_size > 0, "%s: %s missing or empty",
                      zr->name, files[i]);
        char tmp[64];
        snprintf(tmp, sizeof tmp, "%s.tmp", files[i]);
        ck_assert_msg(!file_exists(run_file(path, sizeof path, zr->name, tmp)), "%s: %s left behind", zr->name, tmp);
    }
    char *text = slurp(run_file(path, sizeof path, zr->name, "config.json"));
    cJSON *j = cJSON_Parse(text);
    ck_assert_msg(cJSON_IsObject(j), "%s: config.json does not parse", zr->name);
    for (int i = 0; zr->kv[i]; i += 2) {
        const cJSON *v = cJSON_GetObjectItem(j, zr->kv[i]);
        ck_assert_msg(v != NULL, "%s: config.json lacks %s", zr->name, zr->kv[i]);
        char got[64];
        if (cJSON_IsString(v))
            snprintf(got, sizeof got, "%s", v->valuestring);
        else if (cJSON_IsBool(v))
            snprintf(got, sizeof got, "%s", cJSON_IsTrue(v) ? "true" : "false");
        else
            snprintf(got, sizeof got, "%g", v->valuedouble);
        ck_assert_msg(strcmp(got, zr->kv[i + 1]) == 0, "%s: config.json has %s = %s", zr->name, zr->kv[i], got);
    }
    cJSON_Delete(j);
    free(text);

    /* metrics: a line per step with the 8 keys, finite and falling loss */
    bool linear_kernel = m->attn == ATTN_LINEAR || m->attn == ATTN_COSFORMER;
    text = slurp(run_file(path, sizeof path, zr->name, "metrics.jsonl"));
    double loss[ZOO_STEPS];
    int lines = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *l = cJSON_Parse(line);
        ck_assert_msg(cJSON_IsObject(l), "%s: metrics line %d does not parse: %s", zr->name, lines + 1, line);
        ck_assert_int_lt(lines, ZOO_STEPS);
        ck_assert_int_eq(cJSON_GetArraySize(l), 9);
        ck_assert_int_eq(cJSON_GetObjectItem(l, "step")->valueint, lines + 1);
        loss[lines] = cJSON_GetObjectItem(l, "loss")->valuedouble;
        ck_assert_msg(isfinite(loss[lines]), "%s: step %d loss not finite", zr->name, lines + 1);
        ck_assert(isfinite(cJSON_GetObjectItem(l, "grad_norm")->valuedouble));
        const cJSON *den = cJSON_GetObjectItem(l, "den_clamped");
        if (linear_kernel)
            ck_assert_msg(cJSON_IsNumber(den) && den->valuedouble >= 0.0 && den->valuedouble <= 1.0,
                          "%s: den_clamped should be a fraction: %s", zr->name, line);
        else
            ck_assert_msg(cJSON_IsNull(den), "%s: den_clamped should be null: %s", zr->name, line);
        lines++;
        cJSON_Delete(l);
    }
    free(text);
    ck_assert_int_eq(lines, ZOO_STEPS);
    double first = (loss[0] + loss[1] + loss[2]) / 3, last = (loss[9] + loss[10] + loss[11]) / 3;
    ck_assert_msg(last < first, "%s: loss did not fall: first 3 steps %g, last 3 %g", zr->name, first, last);

    text = slurp(run_file(path, sizeof path, zr->name, "samples.txt"));
    if (m->objective == OBJECTIVE_MLM)
        ck_assert_msg(strncmp(text, "fill-in demo", 12) == 0 && strstr(text, "\nfilled   | "), "%s: samples.txt: %.80s",
                      zr->name, text);
    else
        ck_assert_msg(strncmp(text, cfg.sample.prompt, strlen(cfg.sample.prompt)) == 0, "%s: samples.txt: %.80s",
                      zr->name, text);
    free(text);
}
END_TEST

/* Causal under clm, bidirectional under mlm, for every kernel: change the
 * last byte of a window and see which logits move. */
START_TEST(test_zoo_directions) {
    enum { T = 16 };
    int covered = 0;
    for (int k = 0; k < n_kinds; k++) {
        if (!kind_available[k]) {
            printf("zoo: attn=%s skipped in the direction check (no kernel yet)\n", kinds[k]);
            continue;
        }
        for (int o = 0; o < 2; o++) {
            ZooRun r = {.kv = {"attn", kinds[k], "objective", objectives[o], "context", "16"}};
            snprintf(r.name, sizeof r.name, "%s-%s", kinds[k], objectives[o]);
            if (!strcmp(kinds[k], "linformer")) r.kv[6] = "linformer_k", r.kv[7] = "8";
            Config cfg;
            Err e;
            if (!zoo_config_try(&r, &cfg, &e)) {
                /* a kind without a causal form (Linformer) is refused under
                 * clm; every kind must run under mlm */
                ck_assert_msg(o == OBJECTIVE_CLM, "%s: refused: %s", r.name, e.msg);
                continue;
            }
            Model model;
            model_init(&model, &cfg.model);
            Rng rng;
            rng_seed(&rng, 7);
            model_init_weights(&model, &rng);
            Arena arena;
            arena_init(&arena, 0);
            engine_set_arena(&arena);
            bool was = grad_set(false);
            int ids[T];
            for (int t = 0; t < T; t++) ids[t] = 'a' + (t * 5) % 26;
            Tensor *a = model_forward(&model, ids, 1, T);
            ids[T - 1] = 'Z';
            Tensor *b = model_forward(&model, ids, 1, T);
            long V = a->shape[2];
            /* rows 0 .. T-2 depend on the last byte only when bidirectional */
            bool moved = memcmp(a->data, b->data, (size_t)(T - 1) * V * sizeof(float)) != 0;
            bool last_moved = memcmp(a->data + (T - 1) * V, b->data + (T - 1) * V, (size_t)V * sizeof(float)) != 0;
            ck_assert_msg(last_moved, "%s: the changed position's own logits did not move", r.name);
            if (o == OBJECTIVE_CLM)
                ck_assert_msg(!moved, "%s: an earlier position saw a later byte under clm", r.name);
            else
                ck_assert_msg(moved, "%s: earlier positions did not see the last byte under mlm", r.name);
            grad_set(was);
            engine_set_arena(NULL);
            arena_free(&arena);
            model_free(&model);
            covered++;
        }
    }
    ck_assert_int_gt(covered, 0);
}
END_TEST

/* Every choice of the `attn` option has runs in the matrix (add_registry_runs
 * gives a new kind its own), and every kind has its kernel by now. */
START_TEST(test_zoo_covers_every_kind) {
    for (int k = 0; k < n_kinds; k++) {
        int count = runs_of(k);
        ck_assert_msg(count > 0, "attn=%s has no run in the zoo's matrix (tests/test_zoo.c build_matrix)", kinds[k]);
        ck_assert_msg(kind_available[k], "attn=%s has no kernel in layers/attention/kernels.c", kinds[k]);
    }
}
END_TEST

Suite *zoo_suite(void) {
    Suite *s = suite_create("zoo");
    TCase *tc = tcase_create("train every variant");
    /* the corpus and the kernel probe once, outside the forked tests */
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    kinds = option_choices(option_find("attn"));
    for (n_kinds = 0; kinds[n_kinds]; n_kinds++)
        if (n_kinds == MAX_KINDS) DIE("test_zoo: more than %d attention kinds", MAX_KINDS);
    build_matrix();
    tcase_add_test(tc, test_zoo_covers_every_kind);
    tcase_add_loop_test(tc, test_zoo_trains, 0, n_runs);
    tcase_add_test(tc, test_zoo_directions);
    suite_add_tcase(s, tc);
    return s;
}
