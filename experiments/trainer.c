/* trainer.c: the training loop.
 *
 * Each step: draw a batch with the data RNG, forward, backward, clip, AdamW.
 * Every log_every steps a metrics line; every eval_every steps the validation
 * loss on fixed windows; every save_every steps a checkpoint. The arena is
 * reset at the top of each step, so after the first step the loop makes no
 * malloc.
 *
 * objective = clm: windows of T inputs predicting the next byte each
 * (data/corpus.h). objective = mlm: the same windows, masked (data/mlm.h);
 * the loss, val_loss and val_bpb are on the masked positions only, and
 * samples.txt is a fill-in demo instead of a left-to-right sample. */
#include "trainer.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "corpus.h"
#include "mlm.h"
#include "model.h"
#include "plot.h"
#include "progress.h"
#include "run.h"
#include "sample.h"

static volatile sig_atomic_t stop_signal;
/* The test hook (trainer.h): the next run stops after this many steps. */
static long stop_after = -1;

static void on_signal(int sig) { stop_signal = sig; }

int train_stop_signal(void) { return stop_signal; }

void train_install_signal_handlers(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* a signal during a write must not fail the write */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* The three random streams of a run all come from its seed. */
enum { STREAM_INIT = 0, STREAM_DATA = 1, STREAM_SAMPLE = 2 };
static void rng_stream(Rng *r, int64_t seed, int stream) { rng_seed(r, (uint64_t)seed * 3 + (uint64_t)stream); }

/* data/ knows nothing of layers/: the two must agree on the mask id. */
_Static_assert(MLM_MASK_ID == MASK_ID, "data/mlm.h and layers/config.h disagree on the mask id");

/* Mean validation loss (nats per byte) over the fixed windows. */
static double evaluate(Model *m, const Corpus *c, const Config *cfg, int *ids, int *targets, Arena *arena) {
    int B = cfg->train.batch, T = cfg->model.context;
    long max_windows = (long)cfg->train.eval_batches * B;
    long count = corpus_val_count(c, T, max_windows);
    bool was = grad_set(false);
    double total = 0.0;
    long rows = 0;
    for (long w = 0; w < count; w += B) {
        int b = (int)(count - w < B ? count - w : B);
        for (int i = 0; i < b; i++) {
            int *in = ids + (long)i * T, *tg = targets + (long)i * T;
            if (cfg->model.objective == OBJECTIVE_MLM)
                mlm_val_window(c, T, max_windows, w + i, in, tg);
            else
                corpus_val_window(c, T, max_windows, w + i, in, tg);
        }
        arena_reset(arena);
        /* the mean over the batch's counted positions; under mlm every row
         * has the same number of them (mlm_count), so rows weigh alike */
        Tensor *loss = model_loss(m, ids, targets, b, T);
        total += (double)loss->data[0] * b;
        rows += b;
    }
    grad_set(was);
    return rows ? total / (double)rows : NAN;
}

/* Metrics kept in memory for the plot (and re-read on resume). */
typedef struct {
    double *step, *loss_bits, *val_step, *val_bits;
    int n, n_val, cap;
} Curves;

static void curves_add(Curves *cv, double step, double loss, double val) {
    if (cv->n == cv->cap) {
        cv->cap = cv->cap ? 2 * cv->cap : 256;
        cv->step = realloc(cv->step, (size_t)cv->cap * sizeof(double));
        cv->loss_bits = realloc(cv->loss_bits, (size_t)cv->cap * sizeof(double));
        cv->val_step = realloc(cv->val_step, (size_t)cv->cap * sizeof(double));
        cv->val_bits = realloc(cv->val_bits, (size_t)cv->cap * sizeof(double));
        if (!cv->step || !cv->loss_bits || !cv->val_step || !cv->val_bits) DIE("out of memory");
    }
    cv->step[cv->n] = step;
    cv->loss_bits[cv->n++] = loss / M_LN2;
    if (isfinite(val)) {
        cv->val_step[cv->n_val] = step;
        cv->val_bits[cv->n_val++] = val / M_LN2;
    }
}

static void curves_free(Curves *cv) {
    free(cv->step), free(cv->loss_bits), free(cv->val_step), free(cv->val_bits);
    memset(cv, 0, sizeof *cv);
}

static int plot_curves(const char *path, const Curves *cv, Err *e) {
    PlotSeries s[2] = {{"train", cv->step, cv->loss_bits, cv->n, 0}, {"validation", cv->val_step, cv->val_bits, cv->n_val, 0}};
    PlotSpec spec = {"loss", "step", "bits per byte", 0, 0, 0, 0, 0};
    return plot_lines(path, &spec, s, cv->n_val ? 2 : 1, e);
}

/* On resume: keeps the metrics lines up to the checkpoint's step (later ones
 * will be made again, identically), rewrites the file, and refills the curves. */
static int metrics_truncate(const char *path, long step, Curves *cv, Err *e) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t cap = 1 << 16, len = 0;
    char *kept = xmalloc(cap), line[4096];
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *s = j ? cJSON_GetObjectItem(j, "step") : NULL;
        if (s && cJSON_IsNumber(s) && s->valuedouble <= (double)step) {
            size_t n = strlen(line);
            if (len + n + 1 > cap) kept = realloc(kept, cap = 2 * (len + n + 1));
            if (!kept) DIE("out of memory");
            memcpy(kept + len, line, n + 1);
            len += n;
            const cJSON *loss = cJSON_GetObjectItem(j, "loss"), *val = cJSON_GetObjectItem(j, "val_loss");
            curves_add(cv, s->valuedouble, cJSON_IsNumber(loss) ? loss->valuedouble : NAN,
                       cJSON_IsNumber(val) ? val->valuedouble : NAN);
        }
        cJSON_Delete(j);
    }
    fclose(f);
    kept[len] = '\0';
    int rc = write_file_atomic(path, kept, e);
    free(kept);
    return rc;
}

void train_stop_after(long steps) { stop_after = steps; }

int train_run(const TrainJob *job, TrainResult *r, Err *e) {
    long stop_at = stop_after;
    stop_after = -1;
    memset(r, 0, sizeof *r);
    r->status = TRAIN_FAILED;
    r->val_bpb = r->best_val_bpb = NAN;
    Config cfg = job->cfg;
    const TrainConfig *tc = &cfg.train;
    if (cfg.model.bca == ON)
        return err_set(e, "--bca on: blockwise causal attention is an inference-time option"),
               err_hint(e, "train without it, then evaluate with ./extrapolate CHECKPOINT corpus.txt --bca on");
    char ckpt[1100], metrics_path[1100], plot_path[1100], config_path[1100], samples_path[1100];
    if (path_join(ckpt, sizeof ckpt, job->run_dir, "model.safetensors", e) ||
        path_join(metrics_path, sizeof metrics_path, job->run_dir, "metrics.jsonl", e) ||
        path_join(plot_path, sizeof plot_path, job->run_dir, "loss.png", e) ||
        path_join(config_path, sizeof config_path, job->run_dir, "config.json", e) ||
        path_join(samples_path, sizeof samples_path, job->run_dir, "samples.txt", e))
        return -1;

    /* Everything that can fail on user input is checked before the run folder
     * is made or anything is written. */
    if (!job->resume && file_exists(ckpt))
        return err_set(e, "%s: a run is already there", job->run_dir),
               err_hint(e, "continue it with --resume %s, or pick another --out", job->run_dir);
    Corpus corpus;
    if (corpus_open(&corpus, job->corpus, tc->val_fraction, cfg.model.context, e) != 0) return -1;
    Model m;
    long start = 0;
    Rng data_rng, init_rng, sample_rng;
    rng_stream(&init_rng, tc->seed, STREAM_INIT);
    rng_stream(&data_rng, tc->seed, STREAM_DATA);
    rng_stream(&sample_rng, tc->seed, STREAM_SAMPLE);
    if (job->resume) {
        StFile st;
        CheckpointInfo info;
        if (checkpoint_open(&st, ckpt, &info, e) != 0) {
            corpus_close(&corpus);
            return -1;
        }
        if (!info.has_optim) {
            st_close(&st);
            corpus_close(&corpus);
            return err_set(e, "%s: has no optimizer state, so it cannot be resumed", ckpt);
        }
        model_init(&m, &cfg.model);
        int rc = checkpoint_load(&st, &m, true, e);
        st_close(&st);
        if (rc != 0) {
            model_free(&m);
            corpus_close(&corpus);
            return -1;
        }
        start = info.step;
        data_rng = info.data_rng;
    } else {
        if (make_dirs(job->run_dir, e) != 0) {
            corpus_close(&corpus);
            return -1;
        }
        model_init(&m, &cfg.model);
        model_init_weights(&m, &init_rng);
    }

    cJSON *json = config_to_json(&cfg);
    cJSON_AddStringToObject(json, "corpus", job->corpus);
    char *config_text = cJSON_Print(json);
    cJSON_Delete(json);
    size_t tl = strlen(config_text);
    config_text = realloc(config_text, tl + 2);
    if (!config_text) DIE("out of memory");
    strcpy(config_text + tl, "\n");
    int rc = write_file_atomic(config_path, config_text, e);
    free(config_text);
    Curves cv = {0};
    if (rc == 0 && job->resume) rc = metrics_truncate(metrics_path, start, &cv, e);
    FILE *metrics = rc == 0 ? fopen(metrics_path, start ? "a" : "w") : NULL;
    if (rc == 0 && !metrics) rc = err_set(e, "%s: cannot write", metrics_path);
    if (rc != 0) {
        corpus_close(&corpus);
        model_free(&m);
        curves_free(&cv);
        return -1;
    }

    int B = tc->batch, T = cfg.model.context;
    int *ids = xmalloc((size_t)B * T * sizeof(int)), *targets = xmalloc((size_t)B * T * sizeof(int));
    Arena arena;
    arena_init(&arena, 0);
    engine_set_arena(&arena);
    AdamWConfig opt = adamw_default();
    opt.weight_decay = tc->weight_decay;

    Progress prog;
    progress_init(&prog, job->label ? job->label : "train", tc->steps, stdout);
    /* A metrics line every log_every steps, at every evaluation and at the end. */
    double *rates = xmalloc((size_t)(tc->steps / tc->log_every + tc->steps / tc->eval_every + 2) * sizeof(double));
    int n_rates = 0;
    double t_log = now_seconds(), loss = NAN, val = NAN;
    long tokens_since = 0, step = start;
    bool interrupted = false, diverged = false;
    grad_set(true);
    for (; step < tc->steps; step++) {
        if (stop_signal || step == stop_at) {
            interrupted = true;
            break;
        }
        arena_reset(&arena);
        tape_reset();
        params_zero_grad(&m.params);
        if (cfg.model.objective == OBJECTIVE_MLM)
            mlm_train_batch(&corpus, &data_rng, B, T, ids, targets);
        else
            corpus_train_batch(&corpus, &data_rng, B, T, ids, targets);
        float lr = lr_at(tc->schedule, step, tc->warmup, tc->steps, tc->lr, tc->min_lr);
        attn_stats_reset();
        Tensor *l = model_loss(&m, ids, targets, B, T);
        loss = l->data[0];
        /* this step's forward only: read before backward and evaluation */
        AttnStats stats = attn_stats;
        if (!isfinite(loss)) {
            diverged = true;
            break;
        }
        backward(l);
        float norm = clip_grad_norm(&m.params, tc->clip);
        if (!isfinite(norm)) {
            loss = norm;
            diverged = true;
            break;
        }
        adamw_step(&m.params, &opt, lr, step + 1);
        tokens_since += (long)B * T;
        long done = step + 1;
        bool eval = done % tc->eval_every == 0 || done == tc->steps;
        if (eval) {
            val = evaluate(&m, &corpus, &cfg, ids, targets, &arena);
            r->val_bpb = val / M_LN2;
            if (!(r->best_val_bpb <= r->val_bpb)) r->best_val_bpb = r->val_bpb;
        }
        if (done % tc->log_every == 0 || eval || done == tc->steps) {
            double t = now_seconds(), tok_s = tokens_since / (t - t_log);
            rates[n_rates++] = tok_s;
            fprintf(metrics, "{\"step\": %ld, \"loss\": %.6f, \"val_loss\": ", done, loss);
            if (eval)
                fprintf(metrics, "%.6f, \"val_bpb\": %.6f", val, val / M_LN2);
            else
                fprintf(metrics, "null, \"val_bpb\": null");
            fprintf(metrics, ", \"lr\": %.6g, \"grad_norm\": %.6f", lr, norm);
            /* the fraction of linear-attention denominators clamped at eps in
             * this step's forward; null for kernels without denominators */
            if (stats.den_rows > 0)
                fprintf(metrics, ", \"den_clamped\": %.6g", (double)stats.den_clamped / (double)stats.den_rows);
            else
                fprintf(metrics, ", \"den_clamped\": null");
            fprintf(metrics, ", \"tok_s\": %.0f}\n", tok_s);
            fflush(metrics);
            curves_add(&cv, (double)done, loss, eval ? val : NAN);
            char extra[160];
            if (isfinite(r->val_bpb))
                snprintf(extra, sizeof extra, "loss %.3f val_bpb %.3f lr %.1e %.0f tok/s", loss, r->val_bpb, lr, tok_s);
            else
                snprintf(extra, sizeof extra, "loss %.3f lr %.1e %.0f tok/s", loss, lr, tok_s);
            progress_update(&prog, done, extra);
            t_log = now_seconds(); /* evaluation and logging are not counted as training time */
            tokens_since = 0;
        }
        if (done % tc->save_every == 0 && done != tc->steps && checkpoint_save(ckpt, &m, &cfg, done, &data_rng, job->corpus, e) != 0)
            goto io_fail;
    }
    fclose(metrics);
    metrics = NULL;
    r->step = step;
    if (n_rates) {
        r->tok_s = median_of(rates, n_rates);
    }
    if (diverged) { /* keep the last good checkpoint */
        progress_finish(&prog, "diverged");
        r->status = TRAIN_DIVERGED;
        r->diverged_step = step + 1;
    } else {
        if (checkpoint_save(ckpt, &m, &cfg, step, &data_rng, job->corpus, e) != 0) goto io_fail;
        progress_finish(&prog, interrupted ? "interrupted" : "done");
        r->status = interrupted ? TRAIN_INTERRUPTED : TRAIN_DONE;
    }
    if (cv.n && plot_curves(plot_path, &cv, e) != 0) goto io_fail;
    if (r->status == TRAIN_DONE) {
        size_t len;
        bool mlm = cfg.model.objective == OBJECTIVE_MLM;
        char *text = mlm ? sample_fill_in(&m, &corpus, &cfg.sample, &len) : sample_text(&m, &cfg.sample, &sample_rng, &len);
        int src = write_bytes_atomic(samples_path, text, len, e);
        if (!job->quiet && src == 0) printf(mlm ? "\n%s\n" : "\nsample:\n%s\n\n", text); /* the demo has its own title */
        free(text);
        if (src != 0) goto io_fail;
    }
    rc = 0;
    goto done;
io_fail:
    rc = -1;
    if (metrics) fclose(metrics);
done:
    free(rates);
    free(ids);
    free(targets);
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&arena);
    corpus_close(&corpus);
    model_free(&m);
    curves_free(&cv);
    return rc;
}
