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
#include "precision.h"
#include "trainer.h"

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
#include "open.h"
#include "model.h"
#include "page.h"
#include "progress.h"
#include "provenance.h"
#include "run.h"
#include "step.h"
#include "train_folder.h"

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

void train_stop_after(long steps) { stop_after = steps; }

int train_refuses(const Config *cfg, Err *e) {
    if (cfg->model.bca == ON)
        return err_set(e, "--bca on: blockwise causal attention is an inference-time option"),
               err_hint(e, "train without it, then evaluate with ./extrapolate CHECKPOINT corpus.txt --bca on");
    if (cfg->train.precision == PRECISION_BF16 && gemm_bf16_check(e) != 0) return -1;
    return 0;
}

/* Everything one run holds, so that the phases below share it. */
typedef struct {
    const TrainJob *job;
    Config cfg;
    TrainFolder folder; /* written by rank 0 alone */
    Corpus corpus;
    Model m;
    bool model_made;
    bool page_final; /* the page and record of the run's end written */
    long start;
    Rng data_rng, init_rng, sample_rng;
    int rank, ranks; /* data parallel: this rank of `ranks`; else 0 of 1 */
} Run;

/* The data-parallel collectives, which a run of one rank skips: whether flag
 * holds on any rank, and dist_agree. */
static bool any_rank(const Run *run, bool flag) { return run->ranks > 1 ? dist_any(flag) : flag; }
static int agree(const Run *run, int rc, Err *e) { return run->ranks > 1 ? dist_agree(rc, e) : rc; }

/* The checks that can fail on user input, made before the run folder is
 * made or anything is written: the config, the paths, a run already there,
 * the corpus and the memory the model needs. */
static int run_check(Run *run, Err *e) {
    const TrainJob *job = run->job;
    const Config *cfg = &run->cfg;
    if (train_refuses(cfg, e) != 0 || train_folder_paths(&run->folder, job->run_dir, e) != 0 ||
        train_folder_taken(&run->folder, job->resume, e) != 0)
        return -1;
    char what[1200];
    snprintf(what, sizeof what, "%s: batch %d x context %d", job->run_dir, cfg->train.batch, cfg->model.context);
    if (memory_check(what, "lower --layers, --d_model, --batch or --context", &cfg->model, cfg->train.batch,
                     cfg->model.context, MEMORY_TRAIN, engine_threads(), e) != 0)
        return -1;
    return corpus_open(&run->corpus, job->corpus, cfg->train.val_fraction, cfg->model.context, e);
}

/* The model from the checkpoint, with its optimizer state, step and data
 * RNG; *best the best validation bpb so far. */
static int run_resume(Run *run, double *best, Err *e) {
    OpenRun o;
    const char *ckpt = run->folder.ckpt;
    if (open_run(&o, ckpt, e) != 0) return -1;
    if (!o.info.has_optim) {
        open_run_close(&o);
        return err_set(e, "%s: has no optimizer state, so it cannot be resumed", ckpt);
    }
    o.info.cfg.model = run->cfg.model; /* run_check checked its memory */
    if (open_run_load(&o, &run->m, NULL, true, e) != 0) return -1;
    run->model_made = true;
    run->start = o.info.step;
    run->data_rng = o.info.data_rng;
    *best = o.info.best_val_bpb;
    return 0;
}

/* The run folder, locked; the model, fresh or from the checkpoint. *best is
 * the best validation bpb so far. */
static int run_open(Run *run, double *best, Err *e) {
    const TrainJob *job = run->job;
    const TrainConfig *tc = &run->cfg.train;
    rng_stream(&run->init_rng, tc->seed, STREAM_INIT);
    rng_stream(&run->data_rng, tc->seed, STREAM_DATA);
    rng_stream(&run->sample_rng, tc->seed, STREAM_SAMPLE);
    *best = NAN;
    if (run->rank == 0 && train_folder_lock(&run->folder, job->resume, e) != 0) return -1;
    if (run->rank == 0 && job->resume) return run_resume(run, best, e);
    /* rank > 0: the model only, rank 0 sends it (run_share) */
    model_init(&run->m, &run->cfg.model);
    run->model_made = true;
    if (run->rank == 0) model_init_weights(&run->m, &run->init_rng);
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
        for (int k = 0; k < PARAMS_STATE_SLABS; k++) dist_bcast(p->state[k], slab, 0);
    }
    dist_bcast(&run->start, sizeof run->start, 0);
    dist_bcast(&run->data_rng, sizeof run->data_rng, 0);
    dist_bcast(best, sizeof *best, 0);
}

static void run_close(Run *run) {
    precision_end();
    train_folder_close(&run->folder);
    corpus_close(&run->corpus);
    if (run->model_made) model_free(&run->m);
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
                           : checkpoint_save(run->folder.ckpt, &run->m, &run->cfg, done, &run->data_rng,
                                             run->job->corpus, r->best_val_bpb, run->ranks, e);
    return agree(run, rc, e) != 0 ? -1 : 1;
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

/* What the steps share: the batch buffers, the step (its arena and the
 * optimizer), the progress display, and the throughput of each logged
 * interval. */
typedef struct {
    int *ids, *targets, *scratch; /* scratch: mlm's rows of the other ranks */
    TrainStep step;
    Progress prog;
    double *rates, t_log;
    int n_rates;
    long tokens_since;
} Loop;

/* Activation checkpointing: on, off, or on when the step would need over 1 GiB without it. */
static void choose_recompute(Run *run) {
    const TrainConfig *tc = &run->cfg.train;
    double need = memory_need(&run->cfg.model, tc->batch, run->cfg.model.context, MEMORY_TRAIN, engine_threads());
    run->m.checkpoint =
        tc->recompute == RECOMPUTE_ON || (tc->recompute == RECOMPUTE_AUTO && need > 1024.0 * 1024 * 1024);
    if (run->m.checkpoint && tc->recompute == RECOMPUTE_AUTO && !run->job->quiet && run->rank == 0)
        printf("note: --recompute auto: on (the step would need about %.1f GiB without it)\n", need / (1 << 30));
}

static void loop_init(Loop *lp, Run *run) {
    const TrainConfig *tc = &run->cfg.train;
    int B = tc->batch, T = run->cfg.model.context;
    memset(lp, 0, sizeof *lp);
    lp->ids = xmalloc((size_t)B * T * sizeof(int));
    lp->targets = xmalloc((size_t)B * T * sizeof(int));
    lp->scratch = run->ranks > 1 ? xmalloc((size_t)2 * T * sizeof(int)) : NULL;
    step_init(&lp->step, &run->m, tc, run->ranks); /* gradients on, and zeroed once */
    progress_init(&lp->prog, run->job->label ? run->job->label : "train", tc->steps, stdout);
    progress_from(&lp->prog, run->start); /* a resumed run counts on from its checkpoint */
    if (run->job->plain_progress) lp->prog.tty = 0; /* redraws of two ranks would overwrite each other */
    /* a metrics line every log_every steps, at every evaluation and at the end */
    lp->rates = xmalloc((size_t)(tc->steps / tc->log_every + tc->steps / tc->eval_every + 2) * sizeof(double));
    lp->t_log = now_seconds();
    run->folder.t0 = lp->t_log;
}

static void loop_free(Loop *lp) {
    free(lp->rates);
    free(lp->ids);
    free(lp->targets);
    free(lp->scratch);
    step_free(&lp->step);
}

/* The batch of step `step`: this rank's rows of it, drawn with the data RNG. */
static void draw_batch(Run *run, Loop *lp) {
    int B = run->cfg.train.batch, T = run->cfg.model.context, N = run->ranks;
    bool mlm = run->cfg.model.objective == OBJECTIVE_MLM;
    if (N > 1 && mlm)
        mlm_train_rows(&run->corpus, &run->data_rng, N * B, run->rank * B, B, T, lp->ids, lp->targets, lp->scratch);
    else if (N > 1)
        corpus_train_rows(&run->corpus, &run->data_rng, N * B, run->rank * B, B, T, lp->ids, lp->targets);
    else if (mlm)
        mlm_train_batch(&run->corpus, &run->data_rng, B, T, lp->ids, lp->targets);
    else
        corpus_train_batch(&run->corpus, &run->data_rng, B, T, lp->ids, lp->targets);
}

/* One step (step.h): forward, backward, the gradients averaged over the
 * ranks, then clipping and AdamW. Fills l (loss, lr, grad_norm,
 * den_clamped); false when the loss or the gradient norm is not finite, and
 * no update is made. */
static bool train_step(Run *run, Loop *lp, long step, StepLog *l) {
    const TrainConfig *tc = &run->cfg.train;
    int B = tc->batch, T = run->cfg.model.context, N = run->ranks;
    draw_batch(run, lp);
    l->lr = lr_at(tc->schedule, step, tc->warmup, tc->steps, tc->lr, tc->min_lr);
    Tensor *loss = step_loss(&lp->step, lp->ids, lp->targets, B, T);
    /* this step's forward only: read before backward and evaluation; under
     * data parallel, the mean loss over the N B rows and every rank's counts */
    double sums[3] = {loss->data[0], (double)attn_stats.den_clamped, (double)attn_stats.den_rows};
    if (N > 1) dist_sum(sums, 3);
    l->loss = sums[0] / N;
    l->den_clamped = sums[2] > 0 ? sums[1] / sums[2] : NAN;
    double norm = NAN; /* in double for clip_scale; logged and checked as a float */
    if (isfinite(l->loss)) {
        step_backward(&lp->step, loss);
        /* the mean of the ranks' mean-loss gradients: the gradient of the mean over N B rows */
        step_average(&lp->step);
        norm = step_norm(&lp->step);
    }
    l->grad_norm = (float)norm;
    if (!isfinite(l->loss) || !isfinite(l->grad_norm)) return false;
    step_update(&lp->step, l->lr, step, norm);
    lp->tokens_since += (long)B * T * N;
    return true;
}

/* The run folder's index.html (page.h), at an evaluation and at the end:
 * never in a step, so no step takes longer for it. A page that cannot be
 * written is said once and the run goes on. */
static void write_page(Run *run, const char *state, long step, const char *why) {
    static bool said;
    Err e;
    PageStatus st = {state, step, run->cfg.train.steps, why};
    if (page_write_run(run->folder.dir, &st, &e) != 0 && !said) {
        said = true;
        fprintf(stderr, "note: %s/index.html not written: %s\n", run->folder.dir, e.msg);
    }
}

/* After step l->step: the validation loss when it is due (into r), and the
 * metrics line when it is due. -1 with e set when the ranks disagree. */
static int after_step(Run *run, Loop *lp, StepLog *l, TrainResult *r, Err *e) {
    const TrainConfig *tc = &run->cfg.train;
    long done = l->step;
    bool eval = done % tc->eval_every == 0 || done == tc->steps;
    l->val = NAN;
    if (eval && run->ranks > 1 && check_ranks_agree(run, done, e) != 0) return -1;
    if (eval) {
        l->val = evaluate(&run->m, &run->corpus, &run->cfg, lp->ids, lp->targets, &lp->step.arena, run->rank, run->ranks);
        if (isfinite(l->val)) {
            r->val_bpb = l->val / M_LN2;
            if (!(r->best_val_bpb <= r->val_bpb)) r->best_val_bpb = r->val_bpb;
        }
    }
    if (done % tc->log_every == 0 || eval) {
        l->tok_s = lp->tokens_since / (now_seconds() - lp->t_log);
        lp->rates[lp->n_rates++] = l->tok_s;
        if (run->rank == 0) {
            char extra[200];
            train_folder_log(&run->folder, l);
            train_folder_progress_text(&run->folder, l, extra, sizeof extra);
            progress_update(&lp->prog, done, extra);
            if (eval && done < tc->steps) write_page(run, "running", done, NULL); /* the last: run_finish's */
        }
        lp->t_log = now_seconds(); /* evaluation and logging are not counted as training time */
        lp->tokens_since = 0;
    }
    return 0;
}

/* The steps from run->start to the configured end, or until a signal, the
 * test hook or a divergence stops them. Fills r's status (TRAIN_DONE,
 * TRAIN_INTERRUPTED or TRAIN_DIVERGED), step and validation numbers; the
 * checkpoint of the last completed step is saved unless the run diverged. */
static int run_steps(Run *run, long stop_at, TrainResult *r, Err *e) {
    const TrainConfig *tc = &run->cfg.train;
    Loop lp;
    choose_recompute(run);
    loop_init(&lp, run);
    int rc = 0;
    long step = run->start;
    bool interrupted = false;
    r->status = TRAIN_DONE;
    r->start = run->start;
    if (step >= tc->steps) { /* a finished run opened again: its final validation, as its last step made it */
        double v = evaluate(&run->m, &run->corpus, &run->cfg, lp.ids, lp.targets, &lp.step.arena, run->rank, run->ranks);
        if (isfinite(v)) r->val_bpb = v / M_LN2;
    }
    for (; step < tc->steps; step++) {
        /* a signal on any rank stops every rank before the same step */
        if (any_rank(run, interrupt_signal() || step == stop_at)) {
            interrupted = true;
            break;
        }
        StepLog l = {.step = step + 1};
        double t_step = now_seconds();
        bool finite = train_step(run, &lp, step, &l);
        /* a signal is seen at the next step: the watchdog waits that long */
        interrupt_grace(2 * (now_seconds() - t_step));
        if (!finite) {
            r->status = TRAIN_DIVERGED;
            r->diverged_step = step + 1;
            r->step = step;
            snprintf(r->why, sizeof r->why, "the %s is not finite", isfinite(l.loss) ? "gradient norm" : "loss");
            break;
        }
        if ((rc = after_step(run, &lp, &l, r, e)) != 0) break;
        if (l.step % tc->save_every == 0 && l.step != tc->steps && !any_rank(run, interrupt_signal()) &&
            (rc = save_if_finite(run, l.step, r, e)) <= 0)
            break;
    }
    if (rc >= 0 && r->status != TRAIN_DIVERGED) {
        /* the end, or the stop: the checkpoint of the last completed step */
        r->step = step;
        rc = save_if_finite(run, step, r, e);
        /* a signal during the last evaluation stops the run after the save */
        if (rc > 0 && (interrupted || any_rank(run, interrupt_signal()))) r->status = TRAIN_INTERRUPTED;
    }
    progress_finish(&lp.prog, r->status == TRAIN_DIVERGED      ? "diverged"
                              : r->status == TRAIN_INTERRUPTED ? "interrupted"
                                                               : "done");
    if (lp.n_rates) r->tok_s = median_of(lp.rates, lp.n_rates);
    loop_free(&lp);
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
    int rc = write_bytes_atomic(run->folder.samples_path, text, len, e);
    if (!run->job->quiet && rc == 0) /* the demo has its own title */
        printf(mlm ? "\n%s\n" : "\nsample:\n%s\n\n", text);
    free(text);
    return rc == 0 ? 1 : -1;
}

/* Rank 0 finishes the run folder: the plot, and the samples when the run is
 * done. A signal during the sampling makes the run TRAIN_INTERRUPTED. */
static int run_finish(Run *run, TrainResult *r, Err *e) {
    int sampled = 1, rc = 0;
    if (run->rank == 0) {
        rc = train_folder_plot(&run->folder, e);
        if (rc == 0 && r->status == TRAIN_DONE && (sampled = run_sample(run, e)) < 0) rc = -1;
        if (rc == 0) {
            bool done = r->status == TRAIN_DONE && sampled > 0, diverged = r->status == TRAIN_DIVERGED;
            const char *state = done ? "done" : diverged ? "diverged" : "interrupted";
            write_page(run, state, diverged ? r->diverged_step : r->step, NULL);
            run->page_final = true;
        }
    }
    if (agree(run, rc, e) != 0) return -1;
    if (run->ranks > 1) dist_bcast(&sampled, sizeof sampled, 0);
    if (r->status == TRAIN_DONE && !sampled) r->status = TRAIN_INTERRUPTED;
    return 0;
}

int train_run(const TrainJob *job, TrainResult *r, Err *e) {
    long stop_at = stop_after;
    stop_after = -1;
    memset(r, 0, sizeof *r);
    r->status = TRAIN_FAILED;
    r->val_bpb = r->best_val_bpb = r->tok_s = NAN; /* tok_s stays NAN when no step is trained */
    Run run = {.job = job, .cfg = job->cfg, .folder = {.lock = -1}, .rank = 0, .ranks = 1};
    if (job->data_parallel) run.rank = dist_rank(), run.ranks = dist_size();
    int rc = -1;
    if (agree(&run, run_check(&run, e), e) == 0 && agree(&run, run_open(&run, &r->best_val_bpb, e), e) == 0) {
        run_share(&run, &r->best_val_bpb);
        precision_begin(run.cfg.train.precision, &run.m.params, false, NULL); /* train_refuses checked the CPU */
        int files = run.rank > 0 ? 0
                                 : train_folder_files(&run.folder, &run.cfg, job->corpus, run.ranks, run.start,
                                                      job->repair, &r->best_val_bpb, e);
        /* where this stretch of the run trains: after the history's checks, before any step */
        if (files == 0 && run.rank == 0)
            files = provenance_record(job->run_dir, run.start, run.cfg.train.precision, engine_threads(), run.ranks, e);
        /* from here every way out rewrites the record and the page (page.h) */
        bool began = files == 0 && run.rank == 0;
        if (began) write_page(&run, "running", run.start, NULL);
        if (agree(&run, files, e) == 0 && run_steps(&run, stop_at, r, e) == 0) rc = run_finish(&run, r, e);
        if (began && rc != 0 && !run.page_final) write_page(&run, "failed", r->step ? r->step : run.start, e->msg);
    }
    run_close(&run);
    return rc;
}
