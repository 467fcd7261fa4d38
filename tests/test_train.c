/* test_train.c: whole training runs through train_run() (experiments/training/trainer.h).
 *
 * - Exact resume: a run stopped part-way (train_stop_after, the test hook that
 *   stops the loop exactly as SIGINT does) and resumed gives the same metrics
 *   and the same final checkpoint, bit for bit, as an uninterrupted run.
 * - A checkpoint without optimizer state cannot be resumed.
 * - The same under objective = mlm.
 * - A short run learns, and writes the whole run folder in the formats docs/formats.md
 *   gives; under objective = mlm, samples.txt is a fill-in demo.
 * - A diverging run stops with TRAIN_DIVERGED and the step, and leaves the last good
 *   checkpoint as it was; a parameter or moment that is not finite is never saved.
 * - Hostile input: a forged all-zero RNG state, a model too large for the memory,
 *   a run folder locked by another run; the best bpb survives a resume.
 *
 * Every run is tiny (1 layer, d_model 32, context 32, batch 4) on a generated
 * pseudo-English corpus of 200 KB, in one temporary folder per test case. */
#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gemm.h"
#include "checkpoint.h"
#include "grid.h"
#include "grid_report.h"
#include "optim.h"
#include "generate.h"
#include "memory.h"
#include "mlm.h"
#include "rng.h"
#include "run.h"
#include "safetensors.h"
#include "trainer.h"
#include "test_util.h"

static char tmp_dir[512], corpus_path[600];

/* ---------------------------------------------------------------- fixtures */

static uint64_t xorshift(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* n bytes of sentences made of a small vocabulary, from a fixed seed. */
static void write_corpus(const char *path, size_t n, uint64_t seed) {
    static const char *const words[] = {
        "the",  "of",    "and",   "to",    "a",     "in",    "is",    "it",     "that",  "was",
        "he",   "for",   "on",    "are",   "with",  "as",    "his",   "they",   "be",    "at",
        "one",  "have",  "this",  "from",  "by",    "hot",   "word",  "but",    "what",  "some",
        "we",   "can",   "out",   "other", "were",  "all",   "there", "when",   "up",    "use",
        "your", "how",   "said",  "an",    "each",  "she",   "which", "do",     "their", "time",
        "if",   "will",  "way",   "about", "many",  "then",  "them",  "write",  "would", "like",
    };
    static const char punct[] = ".,;!?";
    const int n_words = (int)(sizeof words / sizeof words[0]);
    uint64_t s = seed;
    char *buf = malloc(n + 64);
    ck_assert_ptr_nonnull(buf);
    size_t len = 0;
    while (len < n) {
        int k = 3 + (int)(xorshift(&s) % 10);
        for (int i = 0; i < k; i++) {
            const char *w = words[xorshift(&s) % (uint64_t)n_words];
            size_t start = len;
            if (i) buf[len++] = ' ';
            size_t wl = strlen(w);
            memcpy(buf + len, w, wl);
            if (i == 0) buf[start] = (char)(buf[start] - 'a' + 'A');
            len += wl;
            if (len >= n) break;
        }
        buf[len++] = punct[xorshift(&s) % 5];
        buf[len++] = xorshift(&s) % 4 == 0 ? '\n' : ' ';
    }
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
    free(buf);
}

static void setup(void) {
    test_tmpdir(tmp_dir, sizeof tmp_dir, "train");
    snprintf(corpus_path, sizeof corpus_path, "%s/corpus.txt", tmp_dir);
    write_corpus(corpus_path, 200000, 0x5eed5eedULL);
}

static void teardown(void) { test_rmtree(tmp_dir); }

/* ----------------------------------------------------------------- helpers */

static const char *tpath(char *buf, size_t size, const char *a, const char *b) {
    if (b)
        snprintf(buf, size, "%s/%s/%s", tmp_dir, a, b);
    else
        snprintf(buf, size, "%s/%s", tmp_dir, a);
    return buf;
}

static void set(Config *c, const char *key, const char *value) {
    Err e;
    ck_assert_msg(option_set(c, key, value, &e) == 0, "%s", e.msg);
}

/* The tiny configuration of the brief: 30 steps, evaluation every 10, a metrics
 * line every 5, a checkpoint every 10. */
static Config tiny_config(void) {
    Config c;
    config_defaults(&c);
    static const char *const kv[][2] = {
        {"layers", "1"},       {"d_model", "32"},    {"heads", "2"},      {"context", "32"},
        {"batch", "4"},        {"steps", "30"},      {"eval_every", "10"}, {"log_every", "5"},
        {"save_every", "10"},  {"threads", "1"},     {"sample_length", "20"}, {"warmup", "5"},
        {"lr", "3e-3"},        {"eval_batches", "4"},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) set(&c, kv[i][0], kv[i][1]);
    Err e;
    ck_assert_msg(config_validate(&c, &e) == 0, "%s", e.msg);
    return c;
}

/* stdout (the progress lines) to /dev/null; stdout_on puts it back. */
static int stdout_off(void) {
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), null = open("/dev/null", O_WRONLY);
    ck_assert(saved >= 0 && null >= 0);
    dup2(null, STDOUT_FILENO);
    close(null);
    return saved;
}

static void stdout_on(int saved) {
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
}

/* Runs a job with stdout (the progress lines) sent to /dev/null. */
static int run_quiet(const Config *cfg, const char *name, bool resume, TrainResult *r, Err *e) {
    char dir[1024];
    tpath(dir, sizeof dir, name, NULL);
    TrainJob job = {.cfg = *cfg, .corpus = corpus_path, .run_dir = dir, .resume = resume, .label = "test", .quiet = true};
    int saved = stdout_off();
    int rc = train_run(&job, r, e);
    stdout_on(saved);
    return rc;
}

static void run_ok(const Config *cfg, const char *name, bool resume, TrainStatus want, long want_step, TrainResult *r) {
    Err e;
    int rc = run_quiet(cfg, name, resume, r, &e);
    ck_assert_msg(rc == 0, "train_run %s: %s", name, e.msg);
    ck_assert_msg(r->status == want, "train_run %s: status %d, want %d", name, (int)r->status, (int)want);
    ck_assert_int_eq(r->step, want_step);
}

/* The whole file as a NUL-terminated string (NULL if it cannot be read). */
static char *slurp(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (size) *size = (size_t)n;
    return buf;
}

/* metrics.jsonl without the tok_s field of each line (a timing, the one field
 * that may differ between two identical runs). */
static char *metrics_without_timing(const char *run) {
    char path[1024];
    char *text = slurp(tpath(path, sizeof path, run, "metrics.jsonl"), NULL);
    ck_assert_msg(text != NULL, "%s: no metrics.jsonl", run);
    char *out = malloc(strlen(text) + 1), *o = out;
    for (char *line = text, *next; *line; line = next) {
        next = strchr(line, '\n');
        ck_assert_msg(next != NULL, "%s: metrics line without a newline", run);
        *next++ = '\0';
        char *t = strstr(line, ", \"tok_s\": ");
        ck_assert_msg(t != NULL, "%s: metrics line without tok_s: %s", run, line);
        *t = '\0';
        o += sprintf(o, "%s\n", line);
    }
    free(text);
    return out;
}

/* metrics.jsonl's time_s: present on every line, finite, never negative and
 * never going back, also across a resume (the clock continues from the last
 * kept line). */
static void assert_time_grows(const char *run) {
    char path[1024];
    char *text = slurp(tpath(path, sizeof path, run, "metrics.jsonl"), NULL);
    ck_assert_msg(text != NULL, "%s: no metrics.jsonl", run);
    double last = 0.0;
    int lines = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        cJSON *m = cJSON_Parse(line);
        const cJSON *t = m ? cJSON_GetObjectItem(m, "time_s") : NULL;
        ck_assert_msg(cJSON_IsNumber(t), "%s: line %d has no time_s: %s", run, lines + 1, line);
        ck_assert_msg(isfinite(t->valuedouble) && t->valuedouble >= last, "%s: line %d: time_s %g after %g", run,
                      lines + 1, t->valuedouble, last);
        last = t->valuedouble;
        cJSON_Delete(m);
    }
    ck_assert_int_gt(lines, 0);
    free(text);
}

/* Every tensor (parameters and optimizer moments) and the step and data RNG of
 * two checkpoints are equal, bit for bit. */
static void assert_same_checkpoint_keys(const char *path_a, const char *path_b, int n_keys) {
    StFile a, b;
    Err e;
    ck_assert_msg(st_open(&a, path_a, &e) == 0, "%s", e.msg);
    ck_assert_msg(st_open(&b, path_b, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(a.n_entries, b.n_entries);
    ck_assert_int_gt(a.n_entries, 0);
    for (int i = 0; i < a.n_entries; i++) {
        const StEntry *x = &a.entries[i], *y = st_find(&b, x->name);
        ck_assert_msg(y != NULL, "%s: no tensor %s", path_b, x->name);
        ck_assert_uint_eq(x->numel, y->numel);
        float *fx = malloc(x->numel * sizeof(float)), *fy = malloc(y->numel * sizeof(float));
        ck_assert_msg(st_read(&a, x, fx, &e) == 0, "%s", e.msg);
        ck_assert_msg(st_read(&b, y, fy, &e) == 0, "%s", e.msg);
        ck_assert_msg(memcmp(fx, fy, x->numel * sizeof(float)) == 0, "tensor %s differs", x->name);
        free(fx);
        free(fy);
    }
    static const char *const keys[] = {"step", "data_rng", "config"};
    for (int k = 0; k < n_keys; k++) {
        const char *va = st_meta(&a, keys[k]), *vb = st_meta(&b, keys[k]);
        ck_assert_ptr_nonnull(va);
        ck_assert_ptr_nonnull(vb);
        ck_assert_str_eq(va, vb);
    }
    st_close(&a);
    st_close(&b);
}

static void assert_same_checkpoint(const char *path_a, const char *path_b) { assert_same_checkpoint_keys(path_a, path_b, 3); }

static long checkpoint_step(const char *path) {
    StFile st;
    CheckpointInfo info;
    Err e;
    ck_assert_msg(checkpoint_open(&st, path, &info, &e) == 0, "%s", e.msg);
    st_close(&st);
    return info.step;
}

/* No "<name>.tmp" is left in a run folder. */
static void assert_no_tmp(const char *run) {
    static const char *const files[] = {"model.safetensors", "config.json", "metrics.jsonl", "loss.png", "samples.txt"};
    char name[64], path[1024];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "%s.tmp", files[i]);
        ck_assert_msg(!file_exists(tpath(path, sizeof path, run, name)), "%s left behind", path);
    }
}

/* ------------------------------------------------------------------- tests */

/* An uninterrupted run to 30 steps, against the same run stopped and resumed:
 * at step 15 (between checkpoints, on a metrics line), and at steps 7 and 21
 * (before the first save_every checkpoint, off the metrics lines, twice).
 * Run names start with `tag`. */
static void check_resume_exact(const Config *cfg, const char *tag) {
    TrainResult r;
    char full[64], path[1024];
    snprintf(full, sizeof full, "%s_full", tag);
    run_ok(cfg, full, false, TRAIN_DONE, 30, &r);
    char *want = metrics_without_timing(full);
    ck_assert(want[0] != '\0');
    char full_ckpt[1024];
    tpath(full_ckpt, sizeof full_ckpt, full, "model.safetensors");

    static const struct {
        const char *name;
        long stops[3];
    } plans[] = {{"stop15", {15, -1}}, {"stop7_21", {7, 21, -1}}};
    for (int p = 0; p < 2; p++) {
        char name[64];
        snprintf(name, sizeof name, "%s_%s", tag, plans[p].name);
        tpath(path, sizeof path, name, "model.safetensors");
        bool resume = false;
        for (int k = 0; plans[p].stops[k] >= 0; k++) {
            long stop = plans[p].stops[k];
            train_stop_after(stop);
            run_ok(cfg, name, resume, TRAIN_INTERRUPTED, stop, &r);
            ck_assert_int_eq(checkpoint_step(path), stop);
            assert_no_tmp(name);
            resume = true;
        }
        run_ok(cfg, name, true, TRAIN_DONE, 30, &r);
        char *got = metrics_without_timing(name);
        ck_assert_msg(strcmp(got, want) == 0, "%s: metrics differ from the uninterrupted run:\n%s\nwant:\n%s", name, got, want);
        free(got);
        assert_time_grows(name);
        assert_same_checkpoint(path, full_ckpt);
        assert_no_tmp(name);
    }
    free(want);
}

/* Activation checkpointing (--recompute on: each block's forward run again
 * in backward) gives the same bits as keeping the activations in every
 * tensor of the checkpoint (parameters and moments), for a 2-layer model of
 * each kind of attention, and with rmsnorm (each residual add is fused with
 * the norm after it, a span ending at the add); validation, a row at a time
 * then, agrees to float rounding. */
START_TEST(test_recompute_same_bits) {
    static const char *const kinds[][4] = {{"softmax", "pos", "rope", NULL},
                                           {"softmax", "talking_heads", "both", NULL},
                                           {"cosformer", NULL, NULL, NULL},
                                           {"linformer", "objective", "mlm", NULL},
                                           {"softmax", "norm", "rmsnorm", NULL}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        TrainResult r[2];
        char path[2][1024];
        for (int on = 0; on < 2; on++) {
            Config c = tiny_config();
            set(&c, "layers", "2");
            set(&c, "steps", "12");
            set(&c, "attn", kinds[k][0]);
            if (kinds[k][1]) set(&c, kinds[k][1], kinds[k][2]);
            if (!strcmp(kinds[k][0], "linformer")) set(&c, "linformer_k", "8");
            set(&c, "recompute", on ? "on" : "off");
            Err e;
            ck_assert_msg(config_validate(&c, &e) == 0, "%s", e.msg);
            char name[64];
            snprintf(name, sizeof name, "recompute_%zu_%s", k, on ? "on" : "off");
            run_ok(&c, name, false, TRAIN_DONE, 12, &r[on]);
            tpath(path[on], sizeof path[on], name, "model.safetensors");
        }
        assert_same_checkpoint_keys(path[0], path[1], 2); /* (their configs differ in recompute) */
        /* validation goes a row at a time then: the same up to float rounding */
        ck_assert_msg(fabs(r[0].val_bpb - r[1].val_bpb) <= 1e-6 * r[0].val_bpb, "%s: val bpb %.9f with recompute, %.9f without",
                      kinds[k][0], r[1].val_bpb, r[0].val_bpb);
    }
}
END_TEST

START_TEST(test_resume_exact) {
    Config cfg = tiny_config();
    check_resume_exact(&cfg, "clm");
}
END_TEST

/* The same under every optimizer of the registry (optim/optimizers.c) but
 * the default: its state slabs saved under its names and loaded back continue
 * the run exactly. SGD with Nesterov's momentum, so that both its options
 * matter; the checkpoint holds exactly the parameters and its slabs. */
START_TEST(test_resume_exact_every_optimizer) {
    for (int i = 1; i < n_optimizers; i++) {
        Config cfg = tiny_config();
        const Optimizer *opt = optimizer_at(i);
        set(&cfg, "optimizer", opt->name);
        if (!strcmp(opt->name, "sgd")) set(&cfg, "nesterov", "true");
        Err e;
        ck_assert_msg(config_validate(&cfg, &e) == 0, "%s", e.msg);
        char tag[32], path[1024];
        snprintf(tag, sizeof tag, "opt_%s", opt->name);
        check_resume_exact(&cfg, tag);
        char full[64];
        snprintf(full, sizeof full, "%s_full", tag);
        StFile st;
        ck_assert_msg(st_open(&st, tpath(path, sizeof path, full, "model.safetensors"), &e) == 0, "%s", e.msg);
        int params = 0, states[PARAMS_STATE_SLABS] = {0};
        for (int k = 0; k < st.n_entries; k++) {
            const char *name = st.entries[k].name;
            bool slab = false;
            for (int j = 0; j < opt->n_state; j++)
                if (!strncmp(name, opt->state_names[j], strlen(opt->state_names[j]))) states[j]++, slab = true;
            params += !slab;
        }
        int entries = st.n_entries;
        st_close(&st);
        for (int j = 0; j < opt->n_state; j++) ck_assert_int_eq(states[j], params);
        ck_assert_int_eq(entries, params * (1 + opt->n_state));
    }
}
END_TEST

/* The same under objective = mlm: the masks come from the data RNG, so the
 * checkpoint's RNG state is enough to continue exactly. */
START_TEST(test_resume_exact_mlm) {
    Config cfg = tiny_config();
    set(&cfg, "objective", "mlm");
    Err e;
    ck_assert_msg(config_validate(&cfg, &e) == 0, "%s", e.msg);
    check_resume_exact(&cfg, "mlm");
}
END_TEST

/* The same with precision = bf16: the products' bf16 weight copy is made
 * again from the loaded weights, so a resumed run continues exactly. The
 * run differs from the fp32 one (its products did round), and on a CPU
 * without AVX512-BF16 or AMX the test says why and passes. */
START_TEST(test_resume_exact_bf16) {
    Err e = {0};
    if (gemm_bf16_check(&e) != 0) {
        printf("test_resume_exact_bf16: skipped: %s\n", e.msg);
        return;
    }
    Config cfg = tiny_config();
    set(&cfg, "precision", "bf16");
    ck_assert_msg(config_validate(&cfg, &e) == 0, "%s", e.msg);
    check_resume_exact(&cfg, "bf16");
    Config plain = tiny_config();
    TrainResult r;
    run_ok(&plain, "bf16_as_fp32", false, TRAIN_DONE, 30, &r);
    char *bf16 = metrics_without_timing("bf16_full"), *fp32 = metrics_without_timing("bf16_as_fp32");
    ck_assert_msg(strcmp(bf16, fp32) != 0, "the bf16 run gave the fp32 run's metrics");
    free(bf16);
    free(fp32);
    ck_assert_int_eq(gemm_precision(), PRECISION_FP32); /* the run put it back */
}
END_TEST

/* A finished run opened again (./ablate finding a run that ./train
 * finished) trains nothing and reports the final validation its last step
 * made. */
/* How many of the model's parameters in run `name`'s checkpoint differ, bit
 * for bit, from a fresh initialisation of cfg's model from its seed (the
 * trainer's init stream: seed * 3). */
static int differs_from_init(const Config *cfg, const char *name) {
    char path[1024];
    StFile st;
    Err e;
    ck_assert_msg(st_open(&st, tpath(path, sizeof path, name, "model.safetensors"), &e) == 0, "%s", e.msg);
    Model m;
    model_init(&m, &cfg->model);
    Rng rng;
    rng_seed(&rng, (uint64_t)cfg->train.seed * 3);
    model_init_weights(&m, &rng);
    int differ = 0;
    for (int i = 0; i < params_count(&m.params); i++) {
        const Tensor *w = m.params.list[i];
        const StEntry *en = st_find(&st, w->name);
        ck_assert_msg(en != NULL, "%s: no tensor %s", path, w->name);
        ck_assert_uint_eq(en->numel, (size_t)w->n);
        float *got = malloc((size_t)w->n * sizeof(float));
        ck_assert_msg(st_read(&st, en, got, &e) == 0, "%s", e.msg);
        differ += memcmp(got, w->data, (size_t)w->n * sizeof(float)) != 0;
        free(got);
    }
    model_free(&m);
    st_close(&st);
    return differ;
}

/* EXPERIMENTS.md's matched initialisation: one step at learning rate 0 saves
 * the very weights the run started from (AdamW's step is w (1 - lr wd) -
 * lr m / denom), causal, bidirectional with RoPE and cosFormer alike, with or
 * without warmup. One step at a learning rate above 0 moves them, which shows
 * that the comparison can fail. */
START_TEST(test_lr_zero_keeps_init) {
    static const char *const kv[][2] = {{"attn", "softmax"}, {"objective", "mlm"}, {"attn", "cosformer"}};
    for (int i = 0; i < 3; i++) {
        for (int warm = 0; warm < 2; warm++) {
            Config c = tiny_config();
            set(&c, kv[i][0], kv[i][1]);
            if (i == 1) set(&c, "pos", "rope");
            set(&c, "steps", "1"), set(&c, "lr", "0"), set(&c, "min_lr", "0");
            set(&c, "warmup", warm ? "5" : "0");
            Err e;
            ck_assert_msg(config_validate(&c, &e) == 0, "%s", e.msg);
            char name[64];
            snprintf(name, sizeof name, "lr0-%s-%d", kv[i][1], warm);
            TrainResult r;
            run_ok(&c, name, false, TRAIN_DONE, 1, &r);
            ck_assert_msg(differs_from_init(&c, name) == 0, "%s: a step at lr 0 moved the weights", name);
        }
    }
    Config c = tiny_config();
    set(&c, "steps", "1"), set(&c, "warmup", "0");
    TrainResult r;
    run_ok(&c, "lr-moves", false, TRAIN_DONE, 1, &r);
    ck_assert_int_gt(differs_from_init(&c, "lr-moves"), 0);
}
END_TEST

START_TEST(test_finished_run_reports_its_val) {
    Config cfg = tiny_config();
    TrainResult first, again;
    run_ok(&cfg, "finished_twice", false, TRAIN_DONE, 30, &first);
    run_ok(&cfg, "finished_twice", true, TRAIN_DONE, 30, &again);
    ck_assert(isfinite(first.val_bpb));
    ck_assert_msg(again.val_bpb == first.val_bpb, "val bpb %.9f again, %.9f first", again.val_bpb, first.val_bpb);
    /* opened again, it trains no step: it starts at its end, and has no throughput of its own */
    ck_assert(first.start == 0 && again.start == 30);
    ck_assert(isfinite(first.tok_s) && first.tok_s > 0);
    ck_assert_msg(isnan(again.tok_s), "tok_s %g of no step", again.tok_s);
}
END_TEST

/* The stop hook applies to one run only. */
START_TEST(test_stop_hook_is_one_shot) {
    Config cfg = tiny_config();
    set(&cfg, "steps", "10");
    TrainResult r;
    train_stop_after(3);
    run_ok(&cfg, "hook_a", false, TRAIN_INTERRUPTED, 3, &r);
    run_ok(&cfg, "hook_b", false, TRAIN_DONE, 10, &r);
}
END_TEST

/* A checkpoint holding only the parameters (as a model for inference would be
 * shared) is refused by --resume, and nothing in the run folder changes. */
START_TEST(test_resume_needs_optimizer_state) {
    Config cfg = tiny_config();
    set(&cfg, "steps", "10");
    TrainResult r;
    run_ok(&cfg, "noopt", false, TRAIN_DONE, 10, &r);

    char path[1024], metrics[1024];
    tpath(path, sizeof path, "noopt", "model.safetensors");
    tpath(metrics, sizeof metrics, "noopt", "metrics.jsonl");
    StFile st;
    Err e;
    ck_assert_msg(st_open(&st, path, &e) == 0, "%s", e.msg);
    StTensor *t = calloc((size_t)st.n_entries, sizeof *t);
    int (*shapes)[ST_MAX_DIMS] = calloc((size_t)st.n_entries, sizeof *shapes);
    int n = 0;
    for (int i = 0; i < st.n_entries; i++) {
        const StEntry *en = &st.entries[i];
        if (strncmp(en->name, "optim.", 6) == 0) continue;
        float *data = malloc(en->numel * sizeof(float));
        ck_assert_msg(st_read(&st, en, data, &e) == 0, "%s", e.msg);
        for (int d = 0; d < en->ndim; d++) shapes[n][d] = (int)en->shape[d];
        t[n] = (StTensor){en->name, en->ndim, shapes[n], data};
        n++;
    }
    ck_assert_int_lt(n, st.n_entries);
    StMeta *meta = calloc((size_t)st.n_meta, sizeof *meta);
    for (int i = 0; i < st.n_meta; i++) meta[i] = (StMeta){st.meta_keys[i], st.meta_vals[i]};
    ck_assert_msg(st_save(path, t, n, meta, st.n_meta, &e) == 0, "%s", e.msg);
    for (int i = 0; i < n; i++) free((void *)t[i].data);
    free(t);
    free(shapes);
    free(meta);
    st_close(&st);

    size_t ckpt_size, metrics_size;
    char *ckpt_before = slurp(path, &ckpt_size), *metrics_before = slurp(metrics, &metrics_size);
    set(&cfg, "steps", "20");
    ck_assert_int_eq(run_quiet(&cfg, "noopt", true, &r, &e), -1);
    ck_assert_msg(strstr(e.msg, "no optimizer state") != NULL, "unexpected error: %s", e.msg);
    size_t n1, n2;
    char *ckpt_after = slurp(path, &n1), *metrics_after = slurp(metrics, &n2);
    ck_assert(n1 == ckpt_size && memcmp(ckpt_before, ckpt_after, n1) == 0);
    ck_assert(n2 == metrics_size && memcmp(metrics_before, metrics_after, n2) == 0);
    free(ckpt_before), free(ckpt_after), free(metrics_before), free(metrics_after);
}
END_TEST

/* 40 steps: finite, falling loss, and every file of the run folder. */
START_TEST(test_run_folder) {
    Config cfg = tiny_config();
    set(&cfg, "steps", "40");
    TrainResult r;
    run_ok(&cfg, "folder", false, TRAIN_DONE, 40, &r);
    ck_assert(isfinite(r.val_bpb) && r.val_bpb > 0.0 && r.val_bpb < 8.0);
    ck_assert(r.best_val_bpb <= r.val_bpb);

    char path[1024];
    static const char *const files[] = {"model.safetensors", "config.json", "metrics.jsonl", "loss.png", "samples.txt"};
    for (int i = 0; i < 5; i++) {
        struct stat st;
        ck_assert_msg(stat(tpath(path, sizeof path, "folder", files[i]), &st) == 0 && st.st_size > 0, "%s missing or empty", files[i]);
    }
    assert_no_tmp("folder");

    /* config.json: a JSON object with every option of the table */
    char *text = slurp(tpath(path, sizeof path, "folder", "config.json"), NULL);
    cJSON *j = cJSON_Parse(text);
    ck_assert_msg(cJSON_IsObject(j), "config.json does not parse as a JSON object");
    for (int i = 0; i < option_count(); i++)
        ck_assert_msg(cJSON_GetObjectItem(j, option_at(i)->name) != NULL, "config.json lacks %s", option_at(i)->name);
    ck_assert_int_eq(cJSON_GetObjectItem(j, "steps")->valueint, 40);
    cJSON_Delete(j);
    free(text);

    /* metrics.jsonl: one line per 5 steps with the 9 keys; falling loss */
    text = slurp(tpath(path, sizeof path, "folder", "metrics.jsonl"), NULL);
    static const char *const keys[] = {"step", "loss", "val_loss", "val_bpb", "lr", "grad_norm", "den_clamped", "tok_s", "time_s"};
    int lines = 0, evals = 0;
    double first = NAN, last = NAN;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *m = cJSON_Parse(line);
        ck_assert_msg(cJSON_IsObject(m), "metrics line %d does not parse: %s", lines + 1, line);
        ck_assert_int_eq(cJSON_GetArraySize(m), 9);
        for (int k = 0; k < 9; k++) ck_assert_msg(cJSON_GetObjectItem(m, keys[k]) != NULL, "line %d lacks %s", lines + 1, keys[k]);
        ck_assert_int_eq(cJSON_GetObjectItem(m, "step")->valueint, 5 * (lines + 1));
        double loss = cJSON_GetObjectItem(m, "loss")->valuedouble;
        ck_assert(isfinite(loss) && loss > 0.0);
        ck_assert(isfinite(cJSON_GetObjectItem(m, "grad_norm")->valuedouble));
        ck_assert(cJSON_GetObjectItem(m, "lr")->valuedouble > 0.0);
        /* softmax attention has no denominators to clamp */
        ck_assert(cJSON_IsNull(cJSON_GetObjectItem(m, "den_clamped")));
        const cJSON *val = cJSON_GetObjectItem(m, "val_loss"), *bpb = cJSON_GetObjectItem(m, "val_bpb");
        if (cJSON_IsNumber(val)) {
            ck_assert(cJSON_IsNumber(bpb));
            ck_assert_double_eq_tol(bpb->valuedouble, val->valuedouble / M_LN2, 1e-5);
            evals++;
        } else {
            ck_assert(cJSON_IsNull(val) && cJSON_IsNull(bpb));
        }
        if (!lines) first = loss;
        last = loss;
        lines++;
        cJSON_Delete(m);
    }
    free(text);
    ck_assert_int_eq(lines, 8);
    ck_assert_int_eq(evals, 4);
    ck_assert_msg(first > last, "loss did not fall: first %g, last %g", first, last);

    /* loss.png is a PNG; samples.txt starts with the prompt */
    text = slurp(tpath(path, sizeof path, "folder", "loss.png"), NULL);
    ck_assert(memcmp(text, "\x89PNG\r\n\x1a\n", 8) == 0);
    free(text);
    text = slurp(tpath(path, sizeof path, "folder", "samples.txt"), NULL);
    ck_assert_msg(strncmp(text, cfg.sample.prompt, strlen(cfg.sample.prompt)) == 0, "samples.txt: %s", text);
    free(text);

    /* the checkpoint: the finished step, with optimizer state */
    ck_assert_int_eq(checkpoint_step(tpath(path, sizeof path, "folder", "model.safetensors")), 40);
    assert_time_grows("folder");
}
END_TEST

/* objective = mlm: the run learns (val_bpb on the masked positions), and
 * samples.txt is the fill-in demo of experiments/training/generate.h: a header, then per
 * window a title and three rows of T columns (original, masked, filled) where
 * the masked row has '_' at exactly the mlm_count(T) chosen positions and
 * agrees with the original elsewhere, and the filled row agrees with the
 * masked one except at the masks. */
START_TEST(test_mlm_run_folder) {
    Config cfg = tiny_config();
    set(&cfg, "objective", "mlm");
    set(&cfg, "steps", "40");
    set(&cfg, "sample_length", "70"); /* ceil(70 / 32) = 3 windows */
    Err e;
    ck_assert_msg(config_validate(&cfg, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(cfg.model.vocab, 257);
    TrainResult r;
    run_ok(&cfg, "mlm", false, TRAIN_DONE, 40, &r);
    ck_assert(isfinite(r.val_bpb) && r.val_bpb > 0.0 && r.val_bpb < 8.0);

    char path[1024];
    char *text = slurp(tpath(path, sizeof path, "mlm", "metrics.jsonl"), NULL);
    double first = NAN, last = NAN;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *m = cJSON_Parse(line);
        ck_assert_msg(cJSON_IsObject(m), "metrics line does not parse: %s", line);
        ck_assert_int_eq(cJSON_GetArraySize(m), 9);
        double loss = cJSON_GetObjectItem(m, "loss")->valuedouble;
        ck_assert(isfinite(loss));
        if (isnan(first)) first = loss;
        last = loss;
        cJSON_Delete(m);
    }
    free(text);
    ck_assert_msg(first > last, "mlm loss did not fall: first %g, last %g", first, last);

    const int T = cfg.model.context;
    text = slurp(tpath(path, sizeof path, "mlm", "samples.txt"), NULL);
    ck_assert_msg(strncmp(text, "fill-in demo", 12) == 0, "samples.txt: %s", text);
    int windows = 0;
    for (char *w = strstr(text, "\nwindow "); w; w = strstr(w + 1, "\nwindow ")) {
        windows++;
        char want[32];
        snprintf(want, sizeof want, "\nwindow %d of 3, bytes ", windows);
        ck_assert_msg(strncmp(w, want, strlen(want)) == 0, "window title: %.60s", w);
        char *orig = strstr(w, "\noriginal | "), *masked = strstr(w, "\nmasked   | "), *filled = strstr(w, "\nfilled   | ");
        ck_assert_msg(orig && masked && filled && orig < masked && masked < filled, "window %d: rows missing", windows);
        orig += 12, masked += 12, filled += 12;
        ck_assert(orig[T] == '\n' && masked[T] == '\n' && filled[T] == '\n');
        int n_masks = 0;
        for (int t = 0; t < T; t++) {
            if (masked[t] == '_') {
                n_masks++;
                ck_assert(filled[t] != '_');
            } else {
                ck_assert_int_eq(masked[t], orig[t]);
                ck_assert_int_eq(filled[t], orig[t]);
            }
        }
        ck_assert_int_eq(n_masks, mlm_count(T));
    }
    ck_assert_int_eq(windows, 3);
    ck_assert_msg(strstr(text, "\nall windows: ") != NULL, "no total line");
    free(text);
}
END_TEST

/* Regression: with eval_every below log_every a metrics line is written at
 * every evaluation; the timing buffer was sized for log_every alone and
 * overflowed (caught by make check-asan). */
START_TEST(test_eval_more_often_than_log) {
    Config cfg = tiny_config();
    set(&cfg, "steps", "20");
    set(&cfg, "log_every", "10");
    set(&cfg, "eval_every", "1");
    set(&cfg, "eval_batches", "1");
    TrainResult r;
    run_ok(&cfg, "evallog", false, TRAIN_DONE, 20, &r);
    char *m = metrics_without_timing("evallog");
    int lines = 0;
    for (char *c = m; *c; c++) lines += *c == '\n';
    ck_assert_int_eq(lines, 20);
    free(m);
}
END_TEST

/* Divergence, made deterministic: AdamW's decoupled weight decay multiplies
 * every matrix by (1 - lr * weight_decay) = 1 - 10 * 10 = -99 each step, so the
 * weights grow 99-fold per step and the loss overflows to inf/NaN at step 8
 * (the same for seeds 1, 2 and 3; lr 10 alone, with clip 0, does not diverge:
 * LayerNorm keeps the loss finite). With a constant schedule and no warmup the
 * learning rate does not depend on --steps, so a run that stops at the last
 * checkpoint's step must leave exactly the same checkpoint. */
START_TEST(test_diverged_keeps_last_good_checkpoint) {
    Config cfg = tiny_config();
    static const char *const kv[][2] = {
        {"steps", "60"},       {"lr", "10"},        {"min_lr", "0"},     {"weight_decay", "10"}, {"clip", "0"},
        {"warmup", "0"},       {"schedule", "constant"}, {"save_every", "5"}, {"log_every", "1"},  {"eval_every", "100"},
    };
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) set(&cfg, kv[i][0], kv[i][1]);
    TrainResult r;
    Err e;
    ck_assert_msg(run_quiet(&cfg, "bad", false, &r, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r.status, TRAIN_DIVERGED);
    ck_assert_int_eq(r.diverged_step, 8);
    ck_assert_int_eq(r.step, r.diverged_step - 1);
    char bad[1024], good[1024];
    tpath(bad, sizeof bad, "bad", "model.safetensors");
    long saved = checkpoint_step(bad);
    ck_assert_int_eq(saved, (r.diverged_step - 1) / 5 * 5);
    assert_no_tmp("bad");
    ck_assert(!file_exists(tpath(good, sizeof good, "bad", "samples.txt")));

    /* metrics: every completed step, all finite, none for the diverged one */
    char *m = metrics_without_timing("bad");
    int lines = 0;
    for (char *line = strtok(m, "\n"); line; line = strtok(NULL, "\n")) {
        char full[512];
        snprintf(full, sizeof full, "%s}", line);
        cJSON *j = cJSON_Parse(full);
        ck_assert_msg(j != NULL, "bad metrics line: %s", line);
        ck_assert(isfinite(cJSON_GetObjectItem(j, "loss")->valuedouble));
        lines++;
        cJSON_Delete(j);
    }
    free(m);
    ck_assert_int_eq(lines, r.diverged_step - 1);

    /* the same run, stopped where the checkpoint was taken */
    char steps[32];
    snprintf(steps, sizeof steps, "%ld", saved);
    set(&cfg, "steps", steps);
    Config ref = cfg;
    set(&ref, "save_every", steps);
    run_ok(&ref, "good", false, TRAIN_DONE, saved, &r);
    /* the configs differ in steps and save_every only; compare the tensors */
    StFile a, b;
    ck_assert_msg(st_open(&a, bad, &e) == 0, "%s", e.msg);
    ck_assert_msg(st_open(&b, tpath(good, sizeof good, "good", "model.safetensors"), &e) == 0, "%s", e.msg);
    ck_assert_int_eq(a.n_entries, b.n_entries);
    for (int i = 0; i < a.n_entries; i++) {
        const StEntry *x = &a.entries[i], *y = st_find(&b, x->name);
        ck_assert_ptr_nonnull(y);
        ck_assert_uint_eq(x->numel, y->numel);
        float *fx = malloc(x->numel * sizeof(float)), *fy = malloc(y->numel * sizeof(float));
        ck_assert(st_read(&a, x, fx, &e) == 0 && st_read(&b, y, fy, &e) == 0);
        for (size_t k = 0; k < x->numel; k++) ck_assert_msg(isfinite(fx[k]), "%s[%zu] not finite", x->name, k);
        ck_assert_msg(memcmp(fx, fy, x->numel * sizeof(float)) == 0, "tensor %s differs from step %ld's", x->name, saved);
        free(fx);
        free(fy);
    }
    ck_assert_str_eq(st_meta(&a, "step"), st_meta(&b, "step"));
    ck_assert_str_eq(st_meta(&a, "data_rng"), st_meta(&b, "data_rng"));
    st_close(&a);
    st_close(&b);

    /* and it resumes: training on from the kept checkpoint diverges at the same step */
    set(&cfg, "steps", "60");
    ck_assert_msg(run_quiet(&cfg, "bad", true, &r, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r.status, TRAIN_DIVERGED);
    ck_assert_int_eq(r.diverged_step, 8);
    ck_assert_int_eq(checkpoint_step(bad), saved);
}
END_TEST

/* Rewrites a checkpoint: metadata `key` set to `value` (when key is not NULL)
 * and value `index` of tensor `tensor` set to x (when tensor is not NULL). */
static void rewrite_checkpoint(const char *path, const char *key, const char *value, const char *tensor, long index,
                               float x) {
    StFile st;
    Err e;
    ck_assert_msg(st_open(&st, path, &e) == 0, "%s", e.msg);
    StTensor *t = calloc((size_t)st.n_entries, sizeof *t);
    int (*shapes)[ST_MAX_DIMS] = calloc((size_t)st.n_entries, sizeof *shapes);
    for (int i = 0; i < st.n_entries; i++) {
        const StEntry *en = &st.entries[i];
        float *data = malloc(en->numel * sizeof(float));
        ck_assert_msg(st_read(&st, en, data, &e) == 0, "%s", e.msg);
        if (tensor && !strcmp(en->name, tensor)) data[index] = x;
        for (int d = 0; d < en->ndim; d++) shapes[i][d] = (int)en->shape[d];
        t[i] = (StTensor){en->name, en->ndim, shapes[i], data};
    }
    StMeta *meta = calloc((size_t)st.n_meta, sizeof *meta);
    for (int i = 0; i < st.n_meta; i++)
        meta[i] = (StMeta){st.meta_keys[i], key && !strcmp(st.meta_keys[i], key) ? value : st.meta_vals[i]};
    ck_assert_msg(st_save(path, t, st.n_entries, meta, st.n_meta, &e) == 0, "%s", e.msg);
    for (int i = 0; i < st.n_entries; i++) free((void *)t[i].data);
    free(t), free(shapes), free(meta);
    st_close(&st);
}

/* A forged checkpoint whose data RNG is all zero (xoshiro then gives zeros
 * forever, and drawing a batch spun without end) is refused on open. */
START_TEST(test_zero_rng_refused) {
    Config cfg = tiny_config();
    set(&cfg, "steps", "10");
    TrainResult r;
    train_stop_after(5);
    run_ok(&cfg, "zero_rng", false, TRAIN_INTERRUPTED, 5, &r);
    char path[1024];
    tpath(path, sizeof path, "zero_rng", "model.safetensors");
    rewrite_checkpoint(path, "data_rng", "0000000000000000 0000000000000000 0000000000000000 0000000000000000", NULL, 0,
                       0);
    Err e;
    ck_assert_int_eq(run_quiet(&cfg, "zero_rng", true, &r, &e), -1);
    ck_assert_msg(strstr(e.msg, "'data_rng' in metadata is all zero"), "got '%s'", e.msg);
    /* and a state that is not four words of 16 lowercase hex digits (as they are written): the
     * message says which digits, so that uppercase ones are not refused as "not hex" */
    static const char *const bad[] = {"0x1 2 3 4", "1 2 3", "0000000000000001 0000000000000000 0000000000000000",
                                      "000000000000000g 0000000000000000 0000000000000000 0000000000000000",
                                      " 0000000000000001 0000000000000000 0000000000000000 000000000000000",
                                      "000000000000000A 0000000000000000 0000000000000000 0000000000000000"};
    for (int i = 0; i < 6; i++) {
        rewrite_checkpoint(path, "data_rng", bad[i], NULL, 0, 0);
        ck_assert_int_eq(run_quiet(&cfg, "zero_rng", true, &r, &e), -1);
        ck_assert_msg(strstr(e.msg, "bad or missing 'data_rng' in metadata (four words of 16 lowercase hex digits)"),
                      "'%s': got '%s'", bad[i], e.msg);
    }
}
END_TEST

/* A parameter or AdamW moment that is not finite is never saved. With untied
 * embeddings, row 255 of tok_emb is read only for byte 255, which the corpus
 * never holds: a huge (finite) first moment there makes AdamW's next update
 * infinite (m / (sqrt(v) + eps) with v = 0) while the loss and the gradient
 * stay finite. The run must stop as diverged at its next save, naming the
 * parameter, and leave the last good checkpoint as it was. */
START_TEST(test_nonfinite_never_saved) {
    Config cfg = tiny_config();
    set(&cfg, "tie_embeddings", "false");
    set(&cfg, "steps", "20");
    set(&cfg, "save_every", "5");
    TrainResult r;
    train_stop_after(10);
    run_ok(&cfg, "nonfinite", false, TRAIN_INTERRUPTED, 10, &r);
    char path[1024];
    tpath(path, sizeof path, "nonfinite", "model.safetensors");
    rewrite_checkpoint(path, NULL, NULL, "optim.m.tok_emb.weight", 255L * 32, 3e38f);
    size_t n_before;
    char *before = slurp(path, &n_before);
    Err e;
    ck_assert_msg(run_quiet(&cfg, "nonfinite", true, &r, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(r.status, TRAIN_DIVERGED);
    ck_assert_int_eq(r.diverged_step, 15);
    ck_assert_msg(strstr(r.why, "parameter 'tok_emb.weight'"), "why: '%s'", r.why);
    size_t n_after;
    char *after = slurp(path, &n_after);
    ck_assert_msg(n_before == n_after && memcmp(before, after, n_before) == 0, "the step-10 checkpoint was replaced");
    free(before), free(after);
    assert_no_tmp("nonfinite");
    /* a checkpoint holding a value that is not finite does not load */
    rewrite_checkpoint(path, NULL, NULL, "ln_f.weight", 3, NAN);
    ck_assert_int_eq(run_quiet(&cfg, "nonfinite", true, &r, &e), -1);
    ck_assert_msg(strstr(e.msg, "tensor 'ln_f.weight': value 3 is nan"), "got '%s'", e.msg);
    rewrite_checkpoint(path, NULL, NULL, "ln_f.weight", 3, 1.0f);
    rewrite_checkpoint(path, NULL, NULL, "optim.v.ln_f.bias", 0, -1.0f);
    ck_assert_int_eq(run_quiet(&cfg, "nonfinite", true, &r, &e), -1);
    ck_assert_msg(strstr(e.msg, "tensor 'optim.v.ln_f.bias': value 0 is -1"), "got '%s'", e.msg);
}
END_TEST

/* The best validation bpb is the best of the whole run, across a resume:
 * here the run is resumed with a learning rate that makes it worse, so its
 * best is the evaluation at step 10, before the stop. */
START_TEST(test_best_across_resume) {
    Config cfg = tiny_config();
    set(&cfg, "steps", "20");
    set(&cfg, "schedule", "constant");
    TrainResult r;
    train_stop_after(10);
    run_ok(&cfg, "best", false, TRAIN_INTERRUPTED, 10, &r);
    double at10 = r.best_val_bpb;
    ck_assert(isfinite(at10));
    set(&cfg, "lr", "1");
    run_ok(&cfg, "best", true, TRAIN_DONE, 20, &r);
    ck_assert_msg(r.val_bpb > at10, "the resumed run did not get worse (%g, then %g): the test proves nothing", at10,
                  r.val_bpb);
    ck_assert_msg(r.best_val_bpb == at10, "best %.9g, want step 10's %.9g", r.best_val_bpb, at10);
    /* a checkpoint that does not record it (made before it was recorded):
     * metrics.jsonl does, to its 6 decimals */
    char path[1024];
    set(&cfg, "steps", "30");
    tpath(path, sizeof path, "best", "model.safetensors");
    rewrite_checkpoint(path, "best_val_bpb", "", NULL, 0, 0);
    run_ok(&cfg, "best", true, TRAIN_DONE, 30, &r);
    ck_assert_msg(fabs(r.best_val_bpb - at10) < 1e-5, "best %.9g, want step 10's %.9g", r.best_val_bpb, at10);
}
END_TEST

/* A model too large for the machine is refused before anything is allocated
 * or written, with what it needs and what is available. */
START_TEST(test_memory_refused) {
    Config cfg = tiny_config();
    set(&cfg, "layers", "64");
    set(&cfg, "d_model", "8192");
    set(&cfg, "heads", "8");
    TrainResult r;
    Err e;
    ck_assert_int_eq(run_quiet(&cfg, "huge", false, &r, &e), -1);
    ck_assert_msg(strstr(e.msg, "51.5 billion parameters") && strstr(e.msg, "needs") && strstr(e.msg, "available"),
                  "got '%s'", e.msg);
    ck_assert_msg(strstr(e.hint, "parameters alone need"), "hint '%s'", e.hint);
    char dir[1024];
    ck_assert(!file_exists(tpath(dir, sizeof dir, "huge", NULL)));
    /* the count comes from the model's own declarations */
    static const char *const kv[][2] = {{"attn", "softmax"}, {"attn", "cosformer"}, {"talking_heads", "both"},
                                        {"pos", "learned"},   {"tie_embeddings", "false"}};
    for (int i = 0; i < 5; i++) {
        Config c = tiny_config();
        set(&c, kv[i][0], kv[i][1]);
        ck_assert_msg(config_validate(&c, &e) == 0, "%s", e.msg);
        Model m;
        model_init(&m, &c.model);
        ck_assert_int_eq(model_param_count(&c.model), m.params.total);
        Model d; /* declared only: the same parameters, no slab */
        model_declare(&d, &c.model);
        ck_assert_int_eq(params_count(&d.params), params_count(&m.params));
        ck_assert_int_eq(d.params.total, m.params.total);
        ck_assert(!d.params.value && !d.params.grad && !d.params.state[0] && !d.params.state[1] && !d.params.list[0]->data);
        model_free(&d);
        model_free(&m);
        ck_assert(memory_need(&c.model, 4, 32, MEMORY_TRAIN, 1) > 16.0 * (double)model_param_count(&c.model));
        ck_assert_int_eq(memory_check("tiny", NULL, &c.model, 4, 32, MEMORY_TRAIN, 1, &e), 0);
    }
}
END_TEST

/* A fault through AdamW's swappable update (optim.h): after the 5th update
 * of parameter 0, one of its values is NaN, so the loss of the next step is
 * not finite. Nothing in the optimizer knows of it. */
static int fault_updates;
static void update_then_fault(ParamSet *p, int k, long lo, long hi, const AdamWScalars *s) {
    adamw_elements(p, k, lo, hi, s);
    if (k == 0 && lo == 0 && ++fault_updates == 5) p->value[p->offset[k]] = NAN;
}

/* The two-run grid of tiny models the ablate tests train, in dir. */
static int tiny_grid(Grid *g, const char *dir, GridRun **runs) {
    static const char *const words[] = {"layers=1", "d_model=32", "heads=2",  "context=32", "batch=4", "steps=12",
                                        "eval_every=4", "log_every=2", "threads=1", "sample_length=20",
                                        "lr=0.001/0.002"};
    Err e;
    grid_init(g);
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        ck_assert_msg(grid_word(g, words[i], &e) == 0, "%s: %s", words[i], e.msg);
    ck_assert_int_eq(grid_settle(g, &e), 0);
    int n = grid_plan(g, false, dir, runs, &e);
    ck_assert_msg(n == 2, "%d runs: %s", n, e.msg);
    return n;
}

/* A diverged run as ./ablate records it: of a two-run grid, trained by
 * grid_train (ablate's own call), the second diverges at step 5 through the
 * fault above; results.csv and results.md say so at its step, and the first
 * run finishes. */
START_TEST(test_ablate_records_diverged_run) {
    Grid g;
    Err e;
    char dir[1024];
    tpath(dir, sizeof dir, "grid", NULL);
    GridRun *runs = NULL;
    int n = tiny_grid(&g, dir, &runs);
    int saved = stdout_off();
    int got[2];
    for (int i = 0; i < 2; i++) {
        fault_updates = 0;
        adamw_update = i == 1 ? update_then_fault : adamw_elements;
        got[i] = grid_train(&runs[i], corpus_path, false, "test", true);
        adamw_update = adamw_elements;
    }
    stdout_on(saved);
    ck_assert_int_eq(got[0], 0);
    ck_assert_int_eq(got[1], 0);
    ck_assert_int_eq(runs[0].result.status, TRAIN_DONE);
    ck_assert_int_eq(runs[0].result.step, 12);
    ck_assert_int_eq(runs[1].result.status, TRAIN_DIVERGED);
    ck_assert_int_eq(runs[1].result.diverged_step, 6);
    ck_assert_int_eq(grid_write_outputs(dir, &g, runs, n, &e), 0);
    char path[1100];
    char *csv = slurp(tpath(path, sizeof path, "grid", "results.csv"), NULL);
    char *md = slurp(tpath(path, sizeof path, "grid", "results.md"), NULL);
    ck_assert(csv && md);
    /* the diverged run's row: its step in diverged_step, status diverged; the other's: done */
    const char *row = strstr(csv, runs[1].name);
    ck_assert_msg(row && strstr(row, ",6,") && strstr(row, ",diverged,"), "%s", csv);
    row = strstr(csv, runs[0].name);
    ck_assert_msg(row && strstr(row, ",done,"), "%s", csv);
    ck_assert_msg(strstr(md, "| 6 |"), "%s", md);
    free(csv), free(md);
    grid_free(runs, n);
    grid_release(&g);
}
END_TEST

/* A run ./train finished in a grid's folder (same options: no result.json,
 * its checkpoint at its last step) is taken by ./ablate as it is: opened
 * again, it trains no step, and its result.json gets the val bpb the run's
 * last step made and the throughput its metrics lines logged, not 0. */
START_TEST(test_ablate_adopts_finished_run) {
    Grid g;
    Err e;
    char dir[1024];
    tpath(dir, sizeof dir, "adopt", NULL);
    GridRun *runs = NULL;
    int n = tiny_grid(&g, dir, &runs);
    GridRun *r = &runs[0];
    TrainResult by_train;
    run_ok(&r->cfg, "adopt/lr-0.001", false, TRAIN_DONE, 12, &by_train);
    ck_assert_msg(!strcmp(r->folder + strlen(r->folder) - strlen("adopt/lr-0.001"), "adopt/lr-0.001"), "%s", r->folder);
    ck_assert_int_eq(grid_run_state(r, corpus_path, &e), GRID_UNFINISHED);
    int saved = stdout_off();
    int got = grid_train(r, corpus_path, true, "test", true);
    stdout_on(saved);
    ck_assert_int_eq(got, 0);
    ck_assert(r->result.status == TRAIN_DONE && r->result.step == 12 && r->result.start == 12);
    ck_assert_msg(r->result.val_bpb == by_train.val_bpb, "%.9f, ./train had %.9f", r->result.val_bpb, by_train.val_bpb);
    ck_assert_msg(isfinite(r->logged_tok_s) && r->logged_tok_s > 0 && r->result.tok_s == r->logged_tok_s,
                  "tok_s %g, logged %g", r->result.tok_s, r->logged_tok_s);
    /* as the next ./ablate reads it: finished, with that throughput */
    double tok_s = r->result.tok_s;
    ck_assert_int_eq(grid_run_state(r, corpus_path, &e), GRID_FINISHED);
    ck_assert_msg(r->result.tok_s == tok_s && r->result.step == 12, "tok_s %g, step %ld", r->result.tok_s, r->result.step);
    grid_free(runs, n);
    grid_release(&g);
}
END_TEST

/* One run folder, one training at a time: the lock is exclusive between any
 * two holders (two processes, or two opens in one), and released on unlock. */
START_TEST(test_run_folder_locked) {
    char dir[1024];
    tpath(dir, sizeof dir, "locked", NULL);
    Err e;
    ck_assert_int_eq(make_dirs(dir, &e), 0);
    int fd = run_lock(dir, &e);
    ck_assert_msg(fd >= 0, "%s", e.msg);
    ck_assert_int_eq(run_lock(dir, &e), -1);
    char pid[64];
    snprintf(pid, sizeof pid, ", pid %ld)", (long)getpid());
    ck_assert_msg(strstr(e.msg, "in use by another command (./") && strstr(e.msg, pid), "got '%s'", e.msg);
    /* train_run into the folder is refused while it is held */
    Config cfg = tiny_config();
    TrainResult r;
    ck_assert_int_eq(run_quiet(&cfg, "locked", false, &r, &e), -1);
    ck_assert_msg(strstr(e.msg, "in use by another command"), "got '%s'", e.msg);
    char path[1024];
    ck_assert(!file_exists(tpath(path, sizeof path, "locked", "config.json")));
    run_unlock(fd);
    fd = run_lock(dir, &e);
    ck_assert_msg(fd >= 0, "%s", e.msg);
    run_unlock(fd);
}
END_TEST

/* Errors before training starts leave no run folder behind. */
START_TEST(test_bad_corpus_makes_no_folder) {
    Config cfg = tiny_config();
    char dir[1024], missing[1024];
    tpath(dir, sizeof dir, "never", NULL);
    tpath(missing, sizeof missing, "missing.txt", NULL);
    TrainJob job = {.cfg = cfg, .corpus = missing, .run_dir = dir, .label = "test", .quiet = true};
    TrainResult r;
    Err e;
    ck_assert_int_eq(train_run(&job, &r, &e), -1);
    ck_assert_msg(strstr(e.msg, "missing.txt") != NULL, "%s", e.msg);
    ck_assert(!file_exists(dir));
}
END_TEST

/* A config that can be evaluated but not trained (--bca on) is refused by
 * train_run itself, so ./ablate's runs are refused as ./train is, and
 * nothing is written. */
START_TEST(test_inference_only_refused) {
    Config cfg = tiny_config();
    Err e;
    ck_assert_int_eq(option_set(&cfg, "pos", "xpos", &e), 0);
    ck_assert_int_eq(option_set(&cfg, "bca", "on", &e), 0);
    ck_assert_msg(config_validate(&cfg, &e) == 0, "%s", e.msg);
    char dir[1024], corpus[1024];
    tpath(dir, sizeof dir, "bca", NULL);
    TrainJob job = {.cfg = cfg, .corpus = tpath(corpus, sizeof corpus, "missing.txt", NULL), .run_dir = dir,
                    .label = "test", .quiet = true};
    TrainResult r;
    ck_assert_int_eq(train_refuses(&cfg, &e), -1);
    ck_assert_int_eq(train_run(&job, &r, &e), -1);
    ck_assert_msg(strstr(e.msg, "--bca on: blockwise causal attention is an inference-time option") != NULL, "%s",
                  e.msg);
    ck_assert(!file_exists(dir));
    ck_assert_int_eq(option_set(&cfg, "bca", "off", &e), 0);
    ck_assert_int_eq(train_refuses(&cfg, &e), 0);
}
END_TEST

/* Fills a stretch of the stack with huge floats, where the next call's locals
 * will be, so that a read of a slot before it is written shows. */
__attribute__((noinline)) static float poison_stack(void) {
    volatile float junk[1024];
    for (int i = 0; i < 1024; i++) junk[i] = 1e30f;
    return junk[7];
}

/* Top-k sampling draws from the k largest logits only, and from each of them;
 * k = 0 and k = V draw from all; temperature 0 is the argmax. (The k-th
 * insertion once compared against a slot not yet written: with huge values
 * on the stack the cut went to infinity and only the argmax came out.) */
START_TEST(test_generate_draw_top_k) {
    enum { V = 256, DRAWS = 4000 };
    float z[V];
    Rng rng;
    rng_seed(&rng, 12);
    for (int i = 0; i < V; i++) z[i] = 0.01f * (float)(i % 17) - 0.3f;
    z[40] = 2.0f, z[7] = 1.9f, z[200] = 1.8f; /* the top 3 */
    for (int k = 1; k <= 3; k++) {
        int seen[V] = {0};
        for (int d = 0; d < DRAWS; d++) {
            poison_stack();
            seen[generate_draw(z, V, 1.0f, k, &rng)]++;
        }
        int outside = 0;
        for (int i = 0; i < V; i++) outside += (i != 40 && i != 7 && i != 200) ? seen[i] : 0;
        ck_assert_msg(outside == 0, "top_k %d drew %d bytes outside the top %d", k, outside, k);
        ck_assert_msg(seen[40] > 0 && (k < 2 || seen[7] > 0) && (k < 3 || seen[200] > 0),
                      "top_k %d: drew 40 %d, 7 %d, 200 %d times", k, seen[40], seen[7], seen[200]);
    }
    int others = 0;
    for (int d = 0; d < DRAWS; d++) {
        int b = generate_draw(z, V, 1.0f, 0, &rng);
        others += b != 40 && b != 7 && b != 200;
        ck_assert_int_eq(generate_draw(z, V, 1.0f, V, &rng) >= 0, 1);
    }
    ck_assert_msg(others > 0, "top_k 0 never drew beyond the top 3");
    ck_assert_int_eq(generate_draw(z, V, 0.0f, 5, &rng), 40);
}
END_TEST

Suite *train_suite(void) {
    Suite *s = suite_create("train");
    TCase *tc = tcase_create("train_run");
    /* one temporary folder and corpus per case, made and removed outside the
     * forked test, so a failing test cannot leave it behind */
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_resume_exact);
    tcase_add_test(tc, test_recompute_same_bits);
    tcase_add_test(tc, test_resume_exact_mlm);
    tcase_add_test(tc, test_resume_exact_every_optimizer);
    tcase_add_test(tc, test_resume_exact_bf16);
    tcase_add_test(tc, test_finished_run_reports_its_val);
    tcase_add_test(tc, test_lr_zero_keeps_init);
    tcase_add_test(tc, test_stop_hook_is_one_shot);
    tcase_add_test(tc, test_resume_needs_optimizer_state);
    tcase_add_test(tc, test_run_folder);
    tcase_add_test(tc, test_mlm_run_folder);
    tcase_add_test(tc, test_eval_more_often_than_log);
    tcase_add_test(tc, test_diverged_keeps_last_good_checkpoint);
    tcase_add_test(tc, test_bad_corpus_makes_no_folder);
    tcase_add_test(tc, test_zero_rng_refused);
    tcase_add_test(tc, test_nonfinite_never_saved);
    tcase_add_test(tc, test_best_across_resume);
    tcase_add_test(tc, test_memory_refused);
    tcase_add_test(tc, test_run_folder_locked);
    tcase_add_test(tc, test_ablate_records_diverged_run);
    tcase_add_test(tc, test_ablate_adopts_finished_run);
    tcase_add_test(tc, test_inference_only_refused);
    tcase_add_test(tc, test_generate_draw_top_k);
    suite_add_tcase(s, tc);
    return s;
}
