/* ablate.c: ./ablate key=v1/v2/... [key=v ...] [--key value ...] corpus.txt
 *
 * One training run per point of the grid (the cartesian product of the axes),
 * all with the same seed, data order, budget and validation windows, plus a
 * baseline with the default kernel (experiments/analysis/grid.h). Each run is an
 * ordinary run folder under the ablation's folder; an interrupted ablation
 * resumes (finished runs are skipped, an unfinished one resumes from its
 * checkpoint; a folder holding a run of other options is refused). Writes
 * results.md, results.csv and curves.png (validation bpb against step, every
 * run overlaid); with seeds, paired intervals and power lines, and with
 * --expect the verdict of each claim (grid_report.h). A run that fails (a
 * model too large, a folder in use) is recorded as failed, and the others go
 * on. --paired compares two arms' run folders seed by seed, training nothing.
 *
 * Runs train seed by seed (every point's first seed, then every point's
 * second...), so that a grid stopped part-way holds whole seed pairs. Under
 * mpirun -np N the ranks take the runs in that order as each frees up (dealt
 * by turn when the ranks do not share the folder: deal.h), each training its
 * runs whole, one at a time; rank 0 then gathers every result and curve and
 * writes the tables, the same as a serial run's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "corpus.h"
#include "deal.h"
#include "dist.h"
#include "grid_report.h"
#include "interrupt.h"
#include "ladder.h"
#include "output_check.h"
#include "page.h"
#include "progress.h"
#include "run.h"
#include "startup.h"
#include "tensor.h"
#include "trainer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ./ablate key=v1/v2/... [key=v ...] [--key value ...] [--seeds N] [--no-baseline] [--out DIR]\n"
            "                [--expect \"A < B\" ...] [--within X] [--plan 3,6,12] [--mixed-kernels] [--tables-only] corpus.txt\n"
            "       ./ablate --paired GRID/POINT_A GRID/POINT_B [--within X] [--plan 3,6,12] [--mixed-kernels]\n"
            "       ./ablate --ladder GRID_S0 GRID_S1 ... --expect \"A < B\" ... --out DIR [--plan 3,6,12]\n"
            "\n"
            "Trains one run per point of the grid: every key=v1/v2/... is an axis and the runs are\n"
            "their cartesian product; key=v fixes an option for all runs; --key value sets the\n"
            "shared options (--steps 300, --layers 2 ...). Every run has the same seed, data order,\n"
            "budget and validation windows. A key that only one kernel reads (phi, ...) implies\n"
            "that kernel. A baseline row with the default kernel (attn=%s) is added unless\n"
            "--no-baseline. Combinations that cannot work are listed and skipped, with the reason;\n"
            "a run that diverges is recorded at its step.\n"
            "\n"
            "Keys joined by ':' vary together: d_model:key_size=128:16/96:64 is two runs (for\n"
            "comparisons at equal parameters), one column in the tables.\n"
            "\n"
            "--seeds N runs every point N times, with seeds seed, seed + 1, ... (both the model's\n"
            "initialisation and the data order); results.md then opens with one row per point: the\n"
            "mean final val bpb of its finished runs, their standard deviation, a 95%% interval (t),\n"
            "the difference from the baseline with Welch's 95%% interval and whether it excludes\n"
            "zero; then the seed-matched (paired) difference from the baseline (without one, from\n"
            "the first point) with its t interval, over the seed pairs where neither run is still\n"
            "on the byte plateau, and a power line: the smallest difference those pairs resolve\n"
            "(95%%, 80%% power) and the pairs that would resolve the difference seen (also in\n"
            "DIR/summary.csv). The effects table gets the same paired columns. curves.png draws\n"
            "each point's mean curve, +- 1 sd faint.\n"
            "\n"
            "--expect \"A < B\" (or \"A > B\"; may be given again) is a claim that A has the lower\n"
            "val bpb: each side is key=value terms joined by ',' on the grid's axes (both sides\n"
            "naming the same axes; a value may hold commas, as linformer_k=64,16 does) or\n"
            "`baseline`, e.g. --expect \"reweight=cos < reweight=none\".\n"
            "For each pair of points it names (alike on the other axes), results.md and stdout get\n"
            "a line `verdict: ...` by the rule of EXPERIMENTS.md: agrees or disagrees (the paired\n"
            "interval excludes 0, one way or the other), no effect larger than X (the interval lies\n"
            "within +-X, X at most --within, 0.02 bpb), or inconclusive with the seed pairs needed.\n"
            "A run still on the byte plateau (last val bpb above 3.3, or 3.9 as a masked LM, or\n"
            "first below that only in the last quarter of its steps) is listed apart and never\n"
            "counted, nor its pair.\n"
            "\n"
            "--plan 3,6,12 is the seed plan fixed before the runs: the numbers of seed pairs at which\n"
            "the paired intervals are looked at. Each look's interval is then at 1 - 0.05/looks (98.3%%\n"
            "for three), so that all of them hold together at 95%% whatever was done between looks;\n"
            "a verdict uses the first pairs (by seed) of the last look reached, and an undecided one\n"
            "names the plan's next look. Without --plan every interval is at 95%% over all the pairs,\n"
            "valid only if their number was fixed in advance: adding seeds until an interval decides\n"
            "covers less than 95%% (tests/test_stats.c simulates both).\n"
            "\n"
            "Each run records where it ran (provenance.json: products' path, threads, CPU, build); the\n"
            "every-run table labels the kernels K1, K2, ... and a seed pair whose runs ran under\n"
            "different ones is left out of the paired columns and verdicts (counted as mixed), unless\n"
            "--mixed-kernels.\n"
            "\n"
            "--ladder GRID_S0 GRID_S1 ... trains nothing: the same claims (--expect, each side a point as\n"
            "the grids' tables name it, or baseline) in grids of one model at growing budgets, in order\n"
            "of compute. Per claim and grid: parameters, training tokens, FLOPs, seed pairs, the\n"
            "effect A - B with its interval (under --plan) and the verdict; then the slope of the\n"
            "pairs' effects against log10 FLOPs with its 95%% interval, and whether the first grid's\n"
            "verdict survives. Writes DIR/ladder.md, ladder.csv, ladder.png and index.html.\n"
            "\n"
            "--paired GRID/POINT_A GRID/POINT_B trains nothing: it reads the run folders\n"
            "GRID/POINT_seed-<n> of both arms and prints B - A seed by seed, the runs set apart,\n"
            "the paired interval and the verdict (sh scripts/results.sh paired runs it on archives).\n"
            "\n"
            "--tables-only trains nothing: the tables, plot and page of the runs finished so far, the\n"
            "others listed as not trained yet (a grid that takes several sittings, saved as it goes).\n"
            "A run trained to its last step by ./train with the grid's options into the run's folder\n"
            "counts as finished: recorded from its metrics.jsonl (the val bpb of its last step).\n"
            "\n"
            "Runs go to DIR/<run>/ (default DIR: runs/ablate-<axes>); running the same command again\n"
            "resumes: finished runs are skipped and an unfinished one continues from its checkpoint;\n"
            "a run folder holding a run of other options is refused.\n"
            "Writes DIR/results.md, DIR/results.csv, DIR/curves.png and DIR/index.html (a page with the\n"
            "sortable summary, each point's curves and a link to each run's page; docs/pages.md). A run\n"
            "that fails is recorded as failed and the others go on.\n"
            "\n"
            "Runs train seed by seed (every point's first seed, then every point's second, ...), so\n"
            "that a grid stopped part-way holds whole seed pairs. Under mpirun -np N, each rank trains\n"
            "whole runs, taking the next in that order as it frees up (when the ranks' nodes do not\n"
            "share DIR's disk, the k-th goes to rank k mod N, so a run resumes where its checkpoint\n"
            "is), and rank 0 writes the tables, the same as a serial run's; resuming works as above.\n"
            "\n"
            "Example: ./ablate phi=identity/leakyrelu/relu/elu reweight=none/cos --steps 1000 data/brown.txt\n",
            option_find("attn")->def);
    fprintf(f, "\nThe options (keys and --keys alike):\n");
    options_print_help_without(f, HELP_ALL, "out"); /* --out is the ablation's folder, above */
}

/* What the option table's --key value set: the shared options. */
static int set_option(const OptDef *o, const char *value, void *ctx) {
    Grid *g = ctx;
    Err e;
    if (option_give(&g->base, o->name, value, &e) != 0) {
        err_print(&e);
        return -1;
    }
    grid_option_given(g, o->name);
    return 0;
}

/* What ablate's own flags collect: the claims (--expect, parsed once the
 * axes are known) and --within. */
typedef struct {
    const char *claims[GRID_MAX_CLAIMS + 1];
    int n_claims;
    const char *within, *plan;
    bool mixed_kernels;
} Extra;

/* --plan 3,6,12: the seed plan's looks (stats.h); none when not given. */
static int read_plan(const char *text, SeedPlan *plan) {
    plan->n_looks = 0;
    if (!text) return 0;
    char why[200];
    if (seed_plan_parse(text, plan, why, sizeof why) != 0) {
        fprintf(stderr, "error: --plan: %s\nhint: --plan 3,6,12 (the seed pairs at which intervals are looked at)\n", why);
        return 2;
    }
    return 0;
}

static int add_claim(const char *flag, const char *value, void *ctx) {
    Extra *x = ctx;
    if (x->n_claims > GRID_MAX_CLAIMS) {
        fprintf(stderr, "error: %s: more than %d claims\n", flag, GRID_MAX_CLAIMS);
        return -1;
    }
    x->claims[x->n_claims++] = value;
    return 0;
}

/* --within X: a number of bpb, X > 0. */
static int read_within(const char *text, double *x) {
    char *end;
    double v = text ? strtod(text, &end) : 0.02;
    if (text && (end == text || *end || !(v > 0) || !isfinite(v))) {
        fprintf(stderr, "error: --within: '%s' is not a positive number of bpb\nhint: --within 0.02\n", text);
        return 2;
    }
    *x = v;
    return 0;
}

/* ./ablate --paired A B: the two arms, the only positional words. */
static int paired_main(const ArgPositional *pos, const Extra *x) {
    double within;
    if (pos->n != 2) {
        fprintf(stderr, "error: --paired: takes two arms, GRID/POINT_A GRID/POINT_B (got %d words)\n", pos->n);
        return 2;
    }
    if (x->n_claims) {
        fprintf(stderr, "error: --paired: --expect is for a grid; --paired prints B - A\n");
        return 2;
    }
    if (read_within(x->within, &within) != 0) return 2;
    SeedPlan plan;
    if (read_plan(x->plan, &plan) != 0) return 2;
    Err e;
    if (grid_paired_report(stdout, pos->v[0], pos->v[1], within, &plan, x->mixed_kernels, &e) != 0) {
        err_print(&e);
        return 1;
    }
    return 0;
}

/* ./ablate --ladder GRID... --expect "A < B" ...: a claim across compute,
 * training nothing (ladder.h). */
static int ladder_main(const ArgPositional *pos, const Extra *x, const char *out) {
    if (pos->n < 2 || pos->n > LADDER_MAX_RUNGS) {
        fprintf(stderr, "error: --ladder: takes 2 to %d grid folders, in order of compute (got %d)\n",
                LADDER_MAX_RUNGS, pos->n);
        return 2;
    }
    if (!x->n_claims) {
        fprintf(stderr, "error: --ladder: no claim\nhint: --expect \"reweight=cos < reweight=none\"\n");
        return 2;
    }
    if (!out) {
        fprintf(stderr, "error: --ladder: no --out folder for ladder.md, ladder.csv and ladder.png\n");
        return 2;
    }
    Ladder l = {.n_grids = pos->n, .claims = x->claims, .n_claims = x->n_claims, .mixed_kernels = x->mixed_kernels};
    for (int i = 0; i < pos->n; i++) l.grids[i] = pos->v[i];
    SeedPlan plan;
    if (read_within(x->within, &l.within) != 0 || read_plan(x->plan, &plan) != 0) return 2;
    l.plan = &plan;
    Err e;
    int rc = ladder_run(&l, out, &e);
    if (rc) err_print(&e);
    return rc;
}

/* Run r's result and curve, from the rank that has them to every rank. */
static void share_result(GridRun *r, int owner) {
    dist_bcast(&r->result, sizeof r->result, owner);
    dist_bcast(&r->den_clamped, sizeof r->den_clamped, owner);
    dist_bcast(&r->n_points, sizeof r->n_points, owner);
    dist_bcast(r->kernel, sizeof r->kernel, owner);
    dist_bcast(r->commit, sizeof r->commit, owner);
    dist_bcast(&r->kernel_mixed, sizeof r->kernel_mixed, owner);
    if (dist_rank() != owner) {
        free(r->steps), free(r->bpb);
        r->steps = r->n_points ? xmalloc((size_t)r->n_points * sizeof *r->steps) : NULL;
        r->bpb = r->n_points ? xmalloc((size_t)r->n_points * sizeof *r->bpb) : NULL;
    }
    if (r->n_points) {
        dist_bcast(r->steps, (size_t)r->n_points * sizeof *r->steps, owner);
        dist_bcast(r->bpb, (size_t)r->n_points * sizeof *r->bpb, owner);
    }
}

/* The order runs train in: seed by seed (every point's first seed, then
 * every point's second, ...), so that a grid stopped part-way, or resumed
 * on another machine, leaves whole seed pairs, each made by one build on one
 * machine, side by side under mpirun. order[k] is the run trained k-th. */
static void training_order(const GridRun *runs, int n_runs, int *order) {
    int k = 0, seeds = 0;
    for (int i = 0; i < n_runs; i++) seeds = runs[i].seed_index + 1 > seeds ? runs[i].seed_index + 1 : seeds;
    for (int s = 0; s < seeds; s++)
        for (int i = 0; i < n_runs; i++)
            if (runs[i].seed_index == s) order[k++] = i;
}

/* --tables-only: a run ./train took to its last step in the grid's folder is
 * recorded from its log; any other is left for a later command. */
static void record_logged(GridRun *r, int state, int index, int n_train) {
    Err e;
    int got = state == GRID_UNFINISHED ? grid_record_logged(r, &e) : 1;
    if (got == 0) {
        printf("run %d/%d %s: trained to its last step by ./train: recorded from its metrics (val bpb %.4f)\n", index,
               n_train, r->name, r->result.val_bpb);
        return;
    }
    if (got < 0) printf("run %s: not recorded: %s\n", r->name, e.msg);
    r->pending = r->skipped = true;
}

/* The steps left to this rank from the k-th run of order on, for the ETA (a
 * resumed run's whole count: its checkpoint's step is not read until it
 * trains): by turn its own runs; claimed, the k-th and its share of those
 * after. */
static double steps_left(const GridRun *runs, int n_runs, const int *order, const int *state, const int *owner, int k,
                         bool shared) {
    double left = runs[order[k]].cfg.train.steps;
    for (int l = k + 1; l < n_runs; l++) {
        const GridRun *o = &runs[order[l]];
        if (o->skipped || state[order[l]] == GRID_FINISHED) continue;
        if (shared)
            left += (double)o->cfg.train.steps / dist_size();
        else if (owner[order[l]] == dist_rank())
            left += o->cfg.train.steps;
    }
    return left;
}

/* Under mpirun, when every rank is done: each run's result and curve from
 * the rank that trained it (trained_by: 1 + that rank, 0 when none did this
 * time) or read its folder (owner) to every rank. */
static void share_results(GridRun *runs, int n_runs, double *trained_by, const int *owner, Deal *deal) {
    /* the ranks' shares may end hours apart: wait for the others asleep */
    double waited, cpu;
    dist_wait_idle(&waited, &cpu);
    if (waited >= 1)
        printf("rank %d: waited %.1f s for the other ranks' runs, asleep (%.2f s of CPU)\n", dist_rank(), waited, cpu);
    fflush(stdout);
    deal_close(deal);
    dist_sum(trained_by, n_runs);
    for (int i = 0; i < n_runs; i++)
        if (!runs[i].skipped) share_result(&runs[i], trained_by[i] > 0 ? (int)trained_by[i] - 1 : owner[i]);
}

/* Trains the runs not finished before, in training_order: this rank's share
 * of them (deal.h: claimed as the ranks free up, or the k-th run that can
 * run to rank k mod N), then every result goes to every rank. 0, or the exit
 * status; *some_failed when a run failed on any rank. */
static int train_runs(GridRun *runs, int n_runs, int n_train, const char *dir, const char *corpus, bool tables_only,
                      bool *some_failed) {
    const int rank = dist_rank(), ranks = dist_size();
    double trained_s = 0, trained_steps = 0; /* this rank's, for the ETA: seconds per step trained */
    int index = 0, rc = 0, failed = 0;
    bool interrupted = false;
    Err e;
    Deal deal;
    if (deal_open(&deal, dir, &e) != 0) {
        err_print(&e);
        return 1;
    }
    int *state = xcalloc((size_t)n_runs, sizeof *state), *owner = xcalloc((size_t)n_runs, sizeof *owner);
    int *order = xcalloc((size_t)n_runs, sizeof *order);
    double *trained_by = xcalloc((size_t)n_runs, sizeof *trained_by); /* 1 + the rank that trained it */
    training_order(runs, n_runs, order);
    /* first what the run folders hold (a rank reads those it sees: all when
     * claimed, its own share when by turn): a folder of other options stops
     * the whole grid before anything is trained */
    for (int k = 0; k < n_runs; k++) {
        int i = order[k];
        if (runs[i].skipped) continue;
        owner[i] = deal.shared ? 0 : deal_turn(index); /* a claimed run's owner is known once trained */
        index++;
        if ((deal.shared || owner[i] == rank) && rc == 0 && (state[i] = grid_run_state(&runs[i], corpus, &e)) < 0)
            rc = -1;
    }
    if (dist_agree(rc, &e) != 0) {
        err_print(&e);
        deal_close(&deal);
        free(state), free(owner), free(order), free(trained_by);
        return 1;
    }
    char tag[32] = "";
    if (ranks > 1) snprintf(tag, sizeof tag, " [rank %d]", rank);
    index = 0;
    for (int k = 0; k < n_runs && !interrupted; k++) {
        int i = order[k];
        GridRun *r = &runs[i];
        if (r->skipped) continue;
        index++;
        if (state[i] == GRID_FINISHED) { /* known to the ranks that read its folder: one says so */
            if (!deal.shared || rank == 0)
                printf("run %d/%d %s%s: finished before (val bpb %.4f)\n", index, n_train, r->name, tag,
                       r->result.val_bpb);
            continue;
        }
        if (!deal_take(&deal, index - 1)) continue;
        if (tables_only) { /* (refused under mpirun: one rank) */
            record_logged(r, state[i], index, n_train);
            continue;
        }
        char label[400], eta[32];
        double left = steps_left(runs, n_runs, order, state, owner, k, deal.shared);
        if (trained_steps > 0)
            snprintf(label, sizeof label, "run %d/%d %.250s%s (all runs: eta %s)", index, n_train, r->name, tag,
                     format_duration(trained_s / trained_steps * left, eta, sizeof eta));
        else
            snprintf(label, sizeof label, "run %d/%d %.250s%s", index, n_train, r->name, tag);
        double t0 = now_seconds();
        trained_by[i] = rank + 1;
        int got = grid_train(r, corpus, state[i] == GRID_UNFINISHED, label, dist_size() > 1);
        interrupted = got == 1;
        failed += got < 0;
        if (got == 0 && r->result.step > r->result.start) {
            trained_s += now_seconds() - t0;
            trained_steps += (double)(r->result.step - r->result.start);
        }
    }
    fflush(stdout);
    if (ranks > 1) share_results(runs, n_runs, trained_by, owner, &deal);
    free(state), free(owner), free(order), free(trained_by);
    int stop = dist_max(interrupted ? interrupt_exit_status() : 0);
    if (stop) {
        printf("interrupted; run the same command again to resume\n");
        return stop;
    }
    *some_failed = dist_any(failed > 0);
    return 0;
}

/* The positional words: the grid's key=v1/v2/... and key=v (after the
 * --key value options, so that they win), and the corpus. 0, or the status
 * to exit with. */
static int read_words(Grid *grid, const ArgPositional *pos, const Extra *x, const char **corpus) {
    Err e;
    for (int i = 0; i < pos->n; i++) {
        const char *a = pos->v[i];
        if (strchr(a, '=')) {
            if (grid_word(grid, a, &e) != 0) {
                err_print(&e);
                return 2;
            }
        } else if (!*corpus) {
            *corpus = a;
        } else {
            fprintf(stderr, "error: more than one corpus given ('%s' and '%s')\n", *corpus, a);
            return 2;
        }
    }
    if (!*corpus) {
        fprintf(stderr, "error: no corpus given\nhint: ./ablate phi=relu/elu data/brown.txt\n");
        return 2;
    }
    if (grid_settle(grid, &e) != 0) {
        err_print(&e);
        return 2;
    }
    for (int i = 0; i < x->n_claims; i++)
        if (grid_expect(grid, x->claims[i], &e) != 0) {
            err_print(&e);
            return 2;
        }
    grid->mixed_kernels = x->mixed_kernels;
    if (read_plan(x->plan, &grid->plan) != 0) return 2;
    return read_within(x->within, &grid->within);
}

/* The runs in dir (*runs, *n_runs), those that cannot run listed with the
 * reason; *n_train those that can. 0, or the status to exit with. */
static int plan(const Grid *grid, bool baseline, const char *dir, GridRun **runs, int *n_runs, int *n_train) {
    Err e;
    if ((*n_runs = grid_plan(grid, baseline, dir, runs, &e)) < 0) {
        err_print(&e);
        return 2;
    }
    *n_train = 0;
    for (int i = 0; i < *n_runs; i++) {
        if ((*runs)[i].skipped)
            printf("skip %s: %s\n", (*runs)[i].name, (*runs)[i].why);
        else
            ++*n_train;
    }
    if (*n_train == 0) {
        fprintf(stderr, "error: no combination of the grid can run\n");
        return 2;
    }
    if (grid_check_claims(grid, *runs, *n_runs, &e) != 0) {
        err_print(&e);
        return 2;
    }
    return 0;
}

/* The grid's folder, made and locked for the command's life (run_lock; the
 * process's end releases it). A run's own folder is refused: the grid's
 * results and run subfolders would go in among its files. */
static int grid_folder_lock(const char *dir, Err *e) {
    static const char *const run_files[] = {"model.safetensors", "config.json", "metrics.jsonl"};
    for (size_t i = 0; i < sizeof run_files / sizeof *run_files; i++) {
        char path[1100];
        if (path_join(path, sizeof path, dir, run_files[i], e) != 0) return -1;
        if (file_exists(path))
            return err_set(e, "--out %s: a run's folder (it holds %s), not a grid's", dir, run_files[i]),
                   err_hint(e, "pick another --out: ./ablate writes a run folder per point inside it");
    }
    if (make_dirs(dir, e) != 0) return -1;
    return run_lock(dir, e) < 0 ? -1 : 0; /* held until the process ends */
}

/* Before any run: the corpus (once for all runs: a missing file is the
 * command's error, not every run's) and the folder; then the start-up line. */
static int prepare(const Grid *grid, const char *corpus, const char *dir, int n_train) {
    Err e;
    Corpus check;
    if (corpus_open(&check, corpus, grid->base.train.val_fraction, 1, &e) != 0) {
        err_print(&e);
        return 1;
    }
    corpus_close(&check);
    if (dist_agree(dist_rank() == 0 ? grid_folder_lock(dir, &e) : 0, &e) != 0) {
        err_print(&e);
        return 1;
    }
    int ranks = dist_size(), wanted = grid->base.train.threads;
    int threads = command_threads(wanted || ranks == 1 ? wanted : dist_default_threads(), stdout, &e);
    if (dist_agree(threads < 0 ? -1 : 0, &e) != 0) {
        err_print(&e);
        return 1;
    }
    if (ranks > 1)
        printf("attnlab ablate: %d runs in %s, %d ranks x %s\n", n_train, dir, ranks, threads_banner(threads));
    else
        printf("attnlab ablate: %d runs in %s, %s\n", n_train, dir, threads_banner(threads));
    fflush(stdout);
    return 0;
}

/* Rank 0 writes the tables, the plot and the page, and prints results.md. */
static int report(const Grid *grid, const GridRun *runs, int n_runs, const char *dir, double t_start,
                  bool some_failed) {
    Err e;
    int rc = dist_rank() == 0 ? grid_write_outputs(dir, grid, runs, n_runs, &e) : 0;
    if (rc == 0 && dist_rank() == 0) rc = page_write_grid(dir, &e);
    if (dist_agree(rc, &e) != 0) {
        err_print(&e);
        return 1;
    }
    if (dist_rank() != 0) return 0;
    char *md, *csv, took[32];
    grid_tables(grid, runs, n_runs, &md, &csv, NULL);
    char curves[1100];
    snprintf(curves, sizeof curves, "%s/curves.png", dir);
    bool plotted = file_exists(curves); /* none when no run has a curve */
    printf("\n%s\nwrote %s/results.md, %s/results.csv%s%s%s, %s/index.html (%s)\n", md, dir, dir, plotted ? ", " : "",
           plotted ? curves : "", plotted ? "" : " (no curves.png: no run has a validation curve)", dir,
           format_duration(now_seconds() - t_start, took, sizeof took));
    if (some_failed) printf("some runs failed (see results.md); run the same command again to retry them\n");
    free(md);
    free(csv);
    return 0;
}

static int ablate_main(int argc, char **argv) {
    static Grid grid;
    grid_init(&grid);
    const char *corpus = NULL, *out = NULL;
    bool no_baseline = false, paired = false, ladder = false, tables_only = false;
    Extra extra = {.n_claims = 0};
    const ArgFlag flags[] = {
        {"--no-baseline", .on = &no_baseline},
        {"--out", .text = &out, .needs = "a folder"},
        {"--seeds", .integer = &grid.seeds, .lo = 1, .hi = GRID_MAX_SEEDS, .needs = "a count"},
        {"--expect", .call = add_claim, .ctx = &extra, .needs = "a claim, \"A < B\"", .repeat = true},
        {"--within", .text = &extra.within, .needs = "a number of bpb"},
        {"--plan", .text = &extra.plan, .needs = "the looks' seed pairs, 3,6,12"},
        {"--mixed-kernels", .on = &extra.mixed_kernels},
        {"--paired", .on = &paired},
        {"--ladder", .on = &ladder},
        {"--tables-only", .on = &tables_only},
    };
    const ArgSpec cli = {.command = "ablate", .usage = usage, .flags = flags, .key_values = true,
                         .n_flags = (int)(sizeof flags / sizeof *flags), .option = set_option, .ctx = &grid};
    ArgPositional pos;
    int status = args_parse(&cli, argc, argv, &pos);
    if (status != ARGS_OK) return status;
    if (paired && ladder) {
        fprintf(stderr, "error: --paired and --ladder: one at a time\n");
        return 2;
    }
    if ((tables_only || paired || ladder) && dist_size() > 1) {
        /* every rank would write the same tables */
        fprintf(stderr, "error: %s: trains nothing, so it runs without mpirun\n",
                tables_only ? "--tables-only" : paired ? "--paired" : "--ladder");
        return dist_refused();
    }
    if (paired) return paired_main(&pos, &extra);
    if (ladder) return ladder_main(&pos, &extra, out);
    if ((status = read_words(&grid, &pos, &extra, &corpus)) != 0) return status;
    char dir[400];
    if (out)
        snprintf(dir, sizeof dir, "%s", out);
    else
        grid_default_dir(&grid, dir, sizeof dir);
    Err e; /* the grid's name is printed by its plots and pages: checked before any run (output_check.h) */
    if (output_name_check("--out", dir, &e) != 0) return err_print(&e), 2;
    if (output_dir_check("--out", dir, "--out DIR", &e) != 0) return err_print(&e), 1;
    GridRun *runs = NULL;
    int n_runs = 0, n_train;
    status = plan(&grid, !no_baseline, dir, &runs, &n_runs, &n_train);
    if (status == 0) status = prepare(&grid, corpus, dir, n_train);
    if (status == 0) {
        interrupt_install(); /* a run stops at its next step, its checkpoint saved */
        double t_start = now_seconds();
        dist_show_output(); /* every rank shows its own runs' progress */
        bool some_failed = false;
        status = train_runs(runs, n_runs, n_train, dir, corpus, tables_only, &some_failed);
        if (status == 0) status = report(&grid, runs, n_runs, dir, t_start, some_failed);
        if (status == 0 && some_failed) status = 1;
    }
    grid_free(runs, n_runs > 0 ? n_runs : 0);
    grid_release(&grid);
    return status;
}

int main(int argc, char **argv) { return command_main_distributed(argc, argv, ablate_main); }
