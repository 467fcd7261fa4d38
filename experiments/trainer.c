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
 * samples.txt is a fill-in demo instead of a left-to-right sample.
 *
 * Safety: the run folder is locked for the run's life (run_lock); what the
 * model needs in memory is checked before it is allocated (memory.h); no
 * checkpoint is saved with a parameter or moment that is not finite (the run
 * stops as diverged instead, keeping the last good one); and Ctrl-C or
 * SIGTERM stops every phase (steps, evaluation, sampling) with a checkpoint.
 *
 * Data parallel (job->data_parallel: ./train under mpirun -np N): every rank
 * holds the same model and takes its rows [rank B, (rank + 1) B) of the batch
 * of N B windows one process would draw (corpus_train_rows), so every rank's
 * data RNG is the same and so is the checkpoint's. After backward the
 * gradients are averaged over the ranks (MPI_Allreduce), so each rank takes
 * the same AdamW step; the loss is the ranks' mean, validation is split
 * over the ranks and summed, and a checksum of the parameters is compared
 * every eval_every steps. Rank 0 alone writes the run folder. Every decision
 * that one rank could make alone (a signal, an error, a save that failed) is
 * agreed by a collective at the same point on every rank (dist.h). */
#include "trainer.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "corpus.h"
#include "generate.h"
#include "dist.h"
#include "interrupt.h"
#include "memory.h"
#include "mlm.h"
#include "model.h"
#include "plot.h"
#include "progress.h"
#include "run.h"

/* The test hook (trainer.h): the next run stops after this many steps. */
static long stop_after = -1;

/* The three random streams of a run all come from its seed. */
enum { STREAM_INIT = 0, STREAM_DATA = 1, STREAM_SAMPLE = 2 };
static void rng_stream(Rng *r, int64_t seed, int stream) { rng_seed(r, (uint64_t)seed * 3 + (uint64_t)stream); }

/* data/ knows nothing of layers/: the two must agree on the mask id. */
_Static_assert(MLM_MASK_ID == MASK_ID, "data/mlm.h and layers/config.h disagree on the mask id");

/* Mean validation loss (nats per byte) over the fixed windows; NAN when a
 * signal stops it part-way. Over `ranks` ranks (data parallel), the windows
 * are eval_batches batches of ranks x batch, rank r taking rows [r B, (r + 1)
 * B) of each, and the sums are added over the ranks. */
static double evaluate(Model *m, const Corpus *c, const Config *cfg, int *ids, int *targets, Arena *arena, int rank,
                       int ranks) {
    int B = cfg->train.batch, T = cfg->model.context;
    long max_windows = (long)cfg->train.eval_batches * B * ranks;
    long count = corpus_val_count(c, T, max_windows);
    bool was = grad_set(false);
    double total = 0.0;
    long rows = 0;
    for (long w0 = 0; w0 < count && !interrupt_signal(); w0 += (long)B * ranks) {
        long w = w0 + (long)rank * B;
        if (w >= count) continue;
        int b = (int)(count - w < B ? count - w : B);
        for (int i = 0; i < b; i++) {
            int *in = ids + (long)i * T, *tg = targets + (long)i * T;
            if (cfg->model.objective == OBJECTIVE_MLM)
                mlm_val_window(c, T, max_windows, w + i, in, tg);
            else
                corpus_val_window(c, T, max_windows, w + i, in, tg);
        }
        /* the mean over the batch's counted positions; under mlm every row
         * has the same number of them (mlm_count), so rows weigh alike. With
         * activation checkpointing a batch's forward would keep every
         * activation (nothing is recorded to hand back), so it goes a row at
         * a time. */
        int step = m->checkpoint ? 1 : b;
        for (int i = 0; i < b; i += step) {
            arena_reset(arena);
            Tensor *loss = model_loss(m, ids + (long)i * T, targets + (long)i * T, step, T);
            total += (double)loss->data[0] * step;
        }
        rows += b;
    }
    grad_set(was);
    if (ranks > 1) {
        double sums[3] = {total, (double)rows, interrupt_signal() != 0};
        dist_sum(sums, 3);
        return sums[1] > 0 && sums[2] == 0 ? sums[0] / sums[1] : NAN;
    }
    return rows && !interrupt_signal() ? total / (double)rows : NAN;
}

/* Metrics kept in memory for the plot (and re-read on resume). */
typedef struct {
    double *step, *loss_bits, *val_step, *val_bits;
    int n, n_val, cap;
    double time_s; /* the last line's time_s (0 if none): where a resumed run's clock starts */
} Curves;

static void curves_add(Curves *cv, double step, double loss, double val) {
    if (cv->n == cv->cap) {
        cv->cap = cv->cap ? 2 * cv->cap : 256;
        size_t bytes = (size_t)cv->cap * sizeof(double);
        cv->step = realloc(cv->step, bytes);
        cv->loss_bits = realloc(cv->loss_bits, bytes);
        cv->val_step = realloc(cv->val_step, bytes);
        cv->val_bits = realloc(cv->val_bits, bytes);
        if (!cv->step || !cv->loss_bits || !cv->val_step || !cv->val_bits) DIE_OOM(bytes);
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

static int plot_curves(const char *path, const char *run_dir, const Curves *cv, Err *e) {
    PlotSeries s[2] = {{"train", cv->step, cv->loss_bits, cv->n, 0}, {"validation", cv->val_step, cv->val_bits, cv->n_val, 0}};
    char name[256], title[320];
    run_name_of(run_dir, name, sizeof name);
    PlotSpec spec = {plot_title(title, sizeof title, name, "loss"), "step", "bits per byte", 0, 0, 0, 0, 0};
    return plot_lines(path, &spec, s, cv->n_val ? 2 : 1, e);
}

/* On resume: keeps the metrics lines up to the checkpoint's step (later ones
 * will be made again, identically), rewrites the file, and refills the curves
 * and the best validation bpb among the kept lines (*best, NAN if none). A
 * line cut short by a killed run does not parse and is dropped. */
static int metrics_truncate(const char *path, long step, Curves *cv, double *best, Err *e) {
    *best = NAN;
    FILE *f = fopen_regular(path, "r", e);
    if (!f) return errno == ENOENT ? 0 : -1;
    size_t cap = 1 << 16, len = 0;
    char *kept = xmalloc(cap), line[4096];
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        const cJSON *s = j ? cJSON_GetObjectItem(j, "step") : NULL;
        if (s && cJSON_IsNumber(s) && s->valuedouble <= (double)step) {
            size_t n = strlen(line);
            if (len + n + 1 > cap) kept = realloc(kept, cap = 2 * (len + n + 1));
            if (!kept) DIE_OOM(cap);
            memcpy(kept + len, line, n + 1);
            len += n;
            const cJSON *loss = cJSON_GetObjectItem(j, "loss"), *val = cJSON_GetObjectItem(j, "val_loss");
            const cJSON *time_s = cJSON_GetObjectItem(j, "time_s");
            double v = cJSON_IsNumber(val) ? val->valuedouble : NAN;
            if (cJSON_IsNumber(time_s) && isfinite(time_s->valuedouble)) cv->time_s = time_s->valuedouble;
            curves_add(cv, s->valuedouble, cJSON_IsNumber(loss) ? loss->valuedouble : NAN, v);
            if (isfinite(v) && !(*best <= v / M_LN2)) *best = v / M_LN2;
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

/* Everything one run holds, so that the phases below share it. */
typedef struct {
    const TrainJob *job;
    Config cfg;
    char ckpt[1100], metrics_path[1100], plot_path[1100], config_path[1100], samples_path[1100];
    int lock;
    Corpus corpus;
    Model m;
    bool model_made;
    long start;
    Rng data_rng, init_rng, sample_rng;
    Curves cv;
    FILE *metrics;
    double t0; /* now_seconds() at which time_s was cv.time_s */
    int rank, ranks; /* data parallel: this rank of `ranks`; else 0 of 1 */
} Run;

/* The data-parallel collectives, which a run of one rank skips: whether flag
 * holds on any rank, and dist_agree. */
static bool any_rank(const Run *run, bool flag) { return run->ranks > 1 ? dist_any(flag) : flag; }
static int agree(const Run *run, int rc, Err *e) { return run->ranks > 1 ? dist_agree(rc, e) : rc; }

/* The checks that can fail on user input, made before the run folder is
 * made or anything is written: the paths, a run already there, the corpus
 * and the memory the model needs. */
static int run_check(Run *run, Err *e) {
    const TrainJob *job = run->job;
    const Config *cfg = &run->cfg;
    if (cfg->model.bca == ON)
        return err_set(e, "--bca on: blockwise causal attention is an inference-time option"),
               err_hint(e, "train without it, then evaluate with ./extrapolate CHECKPOINT corpus.txt --bca on");
    if (path_join(run->ckpt, sizeof run->ckpt, job->run_dir, "model.safetensors", e) ||
        path_join(run->metrics_path, sizeof run->metrics_path, job->run_dir, "metrics.jsonl", e) ||
        path_join(run->plot_path, sizeof run->plot_path, job->run_dir, "loss.png", e) ||
        path_join(run->config_path, sizeof run->config_path, job->run_dir, "config.json", e) ||
        path_join(run->samples_path, sizeof run->samples_path, job->run_dir, "samples.txt", e))
        return -1;
    if (!job->resume && file_exists(run->ckpt))
        return err_set(e, "%s: a run is already there", job->run_dir),
               err_hint(e, "continue it with --resume %s, or pick another --out", job->run_dir);
    char what[1200];
    snprintf(what, sizeof what, "%s: batch %d x context %d", job->run_dir, cfg->train.batch, cfg->model.context);
    if (memory_check(what, "lower --layers, --d_model, --batch or --context", &cfg->model, cfg->train.batch,
                     cfg->model.context, MEMORY_TRAIN, engine_threads(), e) != 0)
        return -1;
    return corpus_open(&run->corpus, job->corpus, cfg->train.val_fraction, cfg->model.context, e);
}

/* The run folder, locked; the model, fresh or from the checkpoint; config.json
 * and metrics.jsonl (cut back to the checkpoint's step on resume). *best is
 * the best validation bpb so far. */
static int run_open(Run *run, double *best, Err *e) {
    const TrainJob *job = run->job;
    const TrainConfig *tc = &run->cfg.train;
    rng_stream(&run->init_rng, tc->seed, STREAM_INIT);
    rng_stream(&run->data_rng, tc->seed, STREAM_DATA);
    rng_stream(&run->sample_rng, tc->seed, STREAM_SAMPLE);
    *best = NAN;
    if (run->rank > 0) { /* the model only: rank 0 sends it (run_share) */
        model_init(&run->m, &run->cfg.model);
        run->model_made = true;
        return 0;
    }
    if (!job->resume && make_dirs(job->run_dir, e) != 0) return -1;
    if ((run->lock = run_lock(job->run_dir, e)) < 0) return -1;
    /* under the lock: another run may have saved here since run_check */
    if (!job->resume && file_exists(run->ckpt))
        return err_set(e, "%s: a run is already there", job->run_dir),
               err_hint(e, "continue it with --resume %s, or pick another --out", job->run_dir);
    if (job->resume) {
        StFile st;
        CheckpointInfo info;
        if (checkpoint_open(&st, run->ckpt, &info, e) != 0) return -1;
        if (!info.has_optim) {
            st_close(&st);
            return err_set(e, "%s: has no optimizer state, so it cannot be resumed", run->ckpt);
        }
        model_init(&run->m, &run->cfg.model);
        run->model_made = true;
        int rc = checkpoint_load(&st, &run->m, true, e);
        st_close(&st);
        if (rc != 0) return -1;
        run->start = info.step;
        run->data_rng = info.data_rng;
        *best = info.best_val_bpb;
    } else {
        model_init(&run->m, &run->cfg.model);
        run->model_made = true;
        model_init_weights(&run->m, &run->init_rng);
    }
    return 0;
}

/* Data parallel: rank 0's model, optimizer moments, step and data RNG (fresh
 * or resumed) to every rank, so that all start from the same bits whatever
 * each host's libm would have made of the seed. */
static void run_share(Run *run, double *best) {
    if (run->ranks == 1) return;
    ParamSet *p = &run->m.params;
    size_t slab = (size_t)p->total * sizeof(float);
    dist_bcast(p->value, slab, 0);
    if (run->job->resume) {
        dist_bcast(p->m, slab, 0);
        dist_bcast(p->v, slab, 0);
    }
    dist_bcast(&run->start, sizeof run->start, 0);
    dist_bcast(&run->data_rng, sizeof run->data_rng, 0);
    dist_bcast(best, sizeof *best, 0);
}

/* Rank 0: config.json, and metrics.jsonl (cut back to the checkpoint's step
 * on resume). */
static int run_files(Run *run, double *best, Err *e) {
    const TrainJob *job = run->job;
    if (run->rank > 0) return 0;
    cJSON *json = config_to_json(&run->cfg);
    cJSON_AddStringToObject(json, "corpus", job->corpus);
    if (run->ranks > 1) { /* the batch is per rank; a step takes ranks x batch windows */
        cJSON_AddNumberToObject(json, "ranks", run->ranks);
        cJSON_AddNumberToObject(json, "effective_batch", (double)run->ranks * run->cfg.train.batch);
    }
    char *config_text = cJSON_Print(json);
    cJSON_Delete(json);
    size_t tl = strlen(config_text);
    config_text = realloc(config_text, tl + 2);
    if (!config_text) DIE_OOM(tl + 2);
    strcpy(config_text + tl, "\n");
    int rc = write_file_atomic(run->config_path, config_text, e);
    free(config_text);
    double kept_best = NAN;
    if (rc == 0 && job->resume) rc = metrics_truncate(run->metrics_path, run->start, &run->cv, &kept_best, e);
    /* checkpoints before this one did not record it: the metrics did */
    if (!isfinite(*best)) *best = kept_best;
    if (rc == 0) run->metrics = fopen_regular(run->metrics_path, run->start ? "a" : "w", e);
    return rc == 0 && run->metrics ? 0 : -1;
}

static void run_close(Run *run) {
    if (run->metrics) fclose(run->metrics);
    corpus_close(&run->corpus);
    if (run->model_made) model_free(&run->m);
    curves_free(&run->cv);
    run_unlock(run->lock);
}

/* Saves a checkpoint at step `done` unless a parameter or moment is not
 * finite: then r records the divergence (why in r->why) and nothing is
 * written, so the last good checkpoint stays. 1 when saved, 0 when diverged,
 * -1 on a write error. */
static int save_if_finite(Run *run, long done, TrainResult *r, Err *e) {
    Err why;
    /* every rank holds the same parameters, so every rank finds the same */
    if (checkpoint_check_finite(&run->m, &why) != 0) {
        r->status = TRAIN_DIVERGED;
        r->diverged_step = done;
        r->step = done - 1;
        snprintf(r->why, sizeof r->why, "%s", why.msg);
        return 0;
    }
    int rc = run->rank > 0 ? 0
                           : checkpoint_save(run->ckpt, &run->m, &run->cfg, done, &run->data_rng, run->job->corpus,
                                             r->best_val_bpb, run->ranks, e);
    return agree(run, rc, e) != 0 ? -1 : 1;
}

/* One metrics line (and a progress update) for step `done`. val is this
 * step's validation loss (NAN when it did not evaluate); the progress line
 * shows the last one, in bits per byte, with the step it was measured at.
 * time_s is the wall-clock time of the run so far (continued on resume). */
static void log_step(Run *run, Progress *prog, long done, double loss, double val, float lr, float norm,
                     AttnStats stats, double tok_s) {
    FILE *f = run->metrics;
    fprintf(f, "{\"step\": %ld, \"loss\": %.6f, \"val_loss\": ", done, loss);
    if (isfinite(val))
        fprintf(f, "%.6f, \"val_bpb\": %.6f", val, val / M_LN2);
    else
        fprintf(f, "null, \"val_bpb\": null");
    fprintf(f, ", \"lr\": %.6g, \"grad_norm\": %.6f", lr, norm);
    /* the fraction of linear-attention denominators clamped at eps in this
     * step's forward; null for kernels without denominators */
    if (stats.den_rows > 0)
        fprintf(f, ", \"den_clamped\": %.6g", (double)stats.den_clamped / (double)stats.den_rows);
    else
        fprintf(f, ", \"den_clamped\": null");
    fprintf(f, ", \"tok_s\": %.0f, \"time_s\": %.3f}\n", tok_s, run->cv.time_s + (now_seconds() - run->t0));
    fflush(f);
    curves_add(&run->cv, (double)done, loss, val);
    /* the fields, most important first; a narrow terminal drops the last ones */
    char extra[200], shown[48] = "";
    const Curves *cv = &run->cv;
    if (cv->n_val)
        snprintf(shown, sizeof shown, "\tval %.3f bpb @%.0f", cv->val_bits[cv->n_val - 1], cv->val_step[cv->n_val - 1]);
    snprintf(extra, sizeof extra, "loss %.3f bpb%s\tlr %.1e\t%.0f tok/s", loss / M_LN2, shown, lr, tok_s);
    progress_update(prog, done, extra);
}

/* Data parallel: whether every rank holds the same parameters and data
 * stream, as they must (the same gradients, the same AdamW step). -1 with e
 * set when one does not: its arithmetic or its input differed. */
static int check_ranks_agree(Run *run, long done, Err *e) {
    const ParamSet *p = &run->m.params;
    uint64_t h = dist_hash_floats(p->value, p->total, 0xcbf29ce484222325ULL);
    for (int k = 0; k < 4; k++) h = (h ^ run->data_rng.s[k]) * 0x100000001b3ULL;
    int differs;
    if (dist_same(h, &differs)) return 0;
    return err_set(e, "step %ld: rank %d's parameters or data stream differ from rank 0's", done, differs),
           err_hint(e, "every rank must run the same build and corpus; the last checkpoint is from before it");
}

/* The steps from run->start to the configured end, or until a signal, the
 * test hook or a divergence stops them. Fills r's status (TRAIN_DONE,
 * TRAIN_INTERRUPTED or TRAIN_DIVERGED), step and validation numbers; the
 * checkpoint of the last completed step is saved unless the run diverged. */
static int run_steps(Run *run, long stop_at, TrainResult *r, Err *e) {
    const Config *cfg = &run->cfg;
    const TrainConfig *tc = &cfg->train;
    Model *m = &run->m;
    int B = tc->batch, T = cfg->model.context, N = run->ranks;
    int *ids = xmalloc((size_t)B * T * sizeof(int)), *targets = xmalloc((size_t)B * T * sizeof(int));
    int *scratch = N > 1 ? xmalloc((size_t)2 * T * sizeof(int)) : NULL; /* mlm: other ranks' rows */
    Arena arena;
    arena_init(&arena, 0);
    engine_set_arena(&arena);
    AdamWConfig opt = adamw_default();
    opt.weight_decay = tc->weight_decay;
    /* activation checkpointing: on, off, or on when the step would need over 1 GiB without it */
    double need = memory_need(&cfg->model, B, T, MEMORY_TRAIN, engine_threads());
    m->checkpoint = tc->recompute == RECOMPUTE_ON || (tc->recompute == RECOMPUTE_AUTO && need > 1024.0 * 1024 * 1024);
    if (m->checkpoint && tc->recompute == RECOMPUTE_AUTO && !run->job->quiet && run->rank == 0)
        printf("note: --recompute auto: on (the step would need about %.1f GiB without it)\n", need / (1 << 30));

    Progress prog;
    progress_init(&prog, run->job->label ? run->job->label : "train", tc->steps, stdout);
    if (run->job->plain_progress) prog.tty = 0; /* redraws of two ranks would overwrite each other */
    /* A metrics line every log_every steps, at every evaluation and at the end. */
    double *rates = xmalloc((size_t)(tc->steps / tc->log_every + tc->steps / tc->eval_every + 2) * sizeof(double));
    int n_rates = 0, rc = 0;
    double t_log = now_seconds();
    run->t0 = t_log;
    long tokens_since = 0, step = run->start;
    bool interrupted = false;
    r->status = TRAIN_DONE;
    grad_set(true);
    /* once: from here on each step's adamw_step leaves the gradients at 0 */
    params_zero_grad(&m->params);
    for (; step < tc->steps; step++) {
        /* a signal on any rank stops every rank before the same step */
        if (any_rank(run, interrupt_signal() || step == stop_at)) {
            interrupted = true;
            break;
        }
        arena_reset(&arena);
        tape_reset();
        if (N > 1 && cfg->model.objective == OBJECTIVE_MLM)
            mlm_train_rows(&run->corpus, &run->data_rng, N * B, run->rank * B, B, T, ids, targets, scratch);
        else if (N > 1)
            corpus_train_rows(&run->corpus, &run->data_rng, N * B, run->rank * B, B, T, ids, targets);
        else if (cfg->model.objective == OBJECTIVE_MLM)
            mlm_train_batch(&run->corpus, &run->data_rng, B, T, ids, targets);
        else
            corpus_train_batch(&run->corpus, &run->data_rng, B, T, ids, targets);
        float lr = lr_at(tc->schedule, step, tc->warmup, tc->steps, tc->lr, tc->min_lr);
        attn_stats_reset();
        Tensor *l = model_loss(m, ids, targets, B, T);
        double loss = l->data[0];
        /* this step's forward only: read before backward and evaluation */
        AttnStats stats = attn_stats;
        if (N > 1) { /* the mean loss over the N B rows, and every rank's counts */
            double sums[3] = {loss, (double)stats.den_clamped, (double)stats.den_rows};
            dist_sum(sums, 3);
            loss = sums[0] / N;
            stats.den_clamped = (long)sums[1];
            stats.den_rows = (long)sums[2];
        }
        double norm = NAN; /* in double for clip_scale; logged and checked as a float */
        if (isfinite(loss)) {
            backward(l);
            /* the mean of the ranks' mean-loss gradients: the gradient of the mean over N B rows */
            if (N > 1) dist_allreduce_mean(m->params.grad, m->params.total);
            norm = grad_norm(&m->params);
        }
        if (!isfinite(loss) || !isfinite((float)norm)) {
            r->status = TRAIN_DIVERGED;
            r->diverged_step = step + 1;
            r->step = step;
            snprintf(r->why, sizeof r->why, "the %s is not finite", isfinite(loss) ? "gradient norm" : "loss");
            break;
        }
        /* clipping, the update and the zeroing of the gradients, in one pass */
        adamw_step(&m->params, &opt, lr, step + 1, clip_scale(norm, tc->clip));
        tokens_since += (long)B * T * N;
        long done = step + 1;
        bool eval = done % tc->eval_every == 0 || done == tc->steps;
        double val = NAN;
        if (eval && N > 1 && check_ranks_agree(run, done, e) != 0) {
            rc = -1;
            break;
        }
        if (eval) {
            val = evaluate(m, &run->corpus, cfg, ids, targets, &arena, run->rank, N);
            if (isfinite(val)) {
                r->val_bpb = val / M_LN2;
                if (!(r->best_val_bpb <= r->val_bpb)) r->best_val_bpb = r->val_bpb;
            }
        }
        if (done % tc->log_every == 0 || eval) {
            double tok_s = tokens_since / (now_seconds() - t_log);
            rates[n_rates++] = tok_s;
            if (run->rank == 0) log_step(run, &prog, done, loss, val, lr, (float)norm, stats, tok_s);
            t_log = now_seconds(); /* evaluation and logging are not counted as training time */
            tokens_since = 0;
        }
        if (done % tc->save_every == 0 && done != tc->steps && !any_rank(run, interrupt_signal())) {
            if ((rc = save_if_finite(run, done, r, e)) <= 0) break;
        }
    }
    if (rc >= 0 && r->status != TRAIN_DIVERGED) {
        /* the end, or the stop: the checkpoint of the last completed step */
        r->step = step;
        rc = save_if_finite(run, step, r, e);
        /* a signal during the last evaluation stops the run after the save */
        if (rc > 0 && (interrupted || any_rank(run, interrupt_signal()))) r->status = TRAIN_INTERRUPTED;
    }
    progress_finish(&prog, r->status == TRAIN_DIVERGED      ? "diverged"
                           : r->status == TRAIN_INTERRUPTED ? "interrupted"
                                                            : "done");
    if (n_rates) r->tok_s = median_of(rates, n_rates);
    free(rates);
    free(ids);
    free(targets);
    free(scratch);
    tape_reset();
    engine_set_arena(NULL);
    arena_free(&arena);
    return rc < 0 ? -1 : 0;
}

/* samples.txt: text from the finished model, or the fill-in demo under mlm.
 * 1 when written, 0 when a signal stopped the sampling, -1 on error. */
static int run_sample(Run *run, Err *e) {
    size_t len;
    bool mlm = run->cfg.model.objective == OBJECTIVE_MLM;
    char *text = mlm ? generate_fill_in(&run->m, &run->corpus, &run->cfg.sample, &len)
                     : generate_text(&run->m, &run->cfg.sample, &run->sample_rng, &len);
    if (!text) return 0;
    int rc = write_bytes_atomic(run->samples_path, text, len, e);
    if (!run->job->quiet && rc == 0) /* the demo has its own title */
        printf(mlm ? "\n%s\n" : "\nsample:\n%s\n\n", text);
    free(text);
    return rc == 0 ? 1 : -1;
}

int train_run(const TrainJob *job, TrainResult *r, Err *e) {
    long stop_at = stop_after;
    stop_after = -1;
    memset(r, 0, sizeof *r);
    r->status = TRAIN_FAILED;
    r->val_bpb = r->best_val_bpb = NAN;
    Run run = {.job = job, .cfg = job->cfg, .lock = -1, .rank = 0, .ranks = 1};
    if (job->data_parallel) run.rank = dist_rank(), run.ranks = dist_size();
    int rc = -1;
    if (agree(&run, run_check(&run, e), e) != 0 || agree(&run, run_open(&run, &r->best_val_bpb, e), e) != 0)
        goto done;
    run_share(&run, &r->best_val_bpb);
    if (agree(&run, run_files(&run, &r->best_val_bpb, e), e) != 0 || run_steps(&run, stop_at, r, e) != 0) goto done;
    /* rank 0 finishes the run folder: the plot and the samples */
    int sampled = 1, finish = 0;
    if (run.rank == 0) {
        fclose(run.metrics);
        run.metrics = NULL;
        if (run.cv.n && plot_curves(run.plot_path, job->run_dir, &run.cv, e) != 0) finish = -1;
        if (finish == 0 && r->status == TRAIN_DONE && (sampled = run_sample(&run, e)) < 0) finish = -1;
    }
    if (agree(&run, finish, e) != 0) goto done;
    if (run.ranks > 1) dist_bcast(&sampled, sizeof sampled, 0);
    if (r->status == TRAIN_DONE && !sampled) r->status = TRAIN_INTERRUPTED;
    rc = 0;
done:
    run_close(&run);
    return rc;
}
