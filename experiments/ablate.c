/* ablate.c: ./ablate key=v1/v2/... [key=v ...] [--key value ...] corpus.txt
 *
 * One training run per point of the grid (the cartesian product of the axes),
 * all with the same seed, data order, budget and validation windows, plus a
 * baseline with the default kernel (experiments/grid.h). Each run is an
 * ordinary run folder under the ablation's folder; an interrupted ablation
 * resumes (finished runs are skipped, an unfinished one resumes from its
 * checkpoint; a folder holding a run of other options is refused). Writes
 * results.md, results.csv and curves.png (validation bpb against step, every
 * run overlaid). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "grid.h"
#include "interrupt.h"
#include "progress.h"
#include "run.h"
#include "startup.h"
#include "tensor.h"
#include "trainer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ./ablate key=v1/v2/... [key=v ...] [--key value ...] [--seeds N] [--no-baseline] [--out DIR]\n"
            "                corpus.txt\n"
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
            "and the difference from the baseline with Welch's 95%% interval and whether it excludes\n"
            "zero (also in DIR/summary.csv); curves.png draws each point's mean curve, +- 1 sd faint.\n"
            "\n"
            "Runs go to DIR/<run>/ (default DIR: runs/ablate-<axes>); running the same command again\n"
            "resumes: finished runs are skipped and an unfinished one continues from its checkpoint;\n"
            "a run folder holding a run of other options is refused.\n"
            "Writes DIR/results.md, DIR/results.csv and DIR/curves.png.\n"
            "\n"
            "Example: ./ablate phi=identity/leakyrelu/relu/elu reweight=none/cos --steps 1000 data/brown.txt\n",
            option_find("attn")->def);
    fprintf(f, "\nThe options (keys and --keys alike):\n");
    options_print_help_without(f, 7, "out"); /* --out is the ablation's folder, above */
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

/* Trains the runs not finished before; 0, or the exit status. */
static int train_runs(GridRun *runs, int n_runs, int n_train, const char *corpus) {
    double trained_s = 0;
    int done_here = 0, index = 0;
    Err e;
    for (int i = 0; i < n_runs; i++) {
        GridRun *r = &runs[i];
        if (r->skipped) continue;
        index++;
        int state = grid_run_state(r, corpus, &e);
        if (state < 0) {
            err_print(&e);
            return 1;
        }
        if (state == GRID_FINISHED) {
            printf("run %d/%d %s: finished before (val bpb %.4f)\n", index, n_train, r->name, r->result.val_bpb);
            continue;
        }
        char label[400], eta[32];
        int left = n_train - index + 1;
        if (done_here)
            snprintf(label, sizeof label, "run %d/%d %.250s (all runs: eta %s)", index, n_train, r->name,
                     format_duration(trained_s / done_here * left, eta, sizeof eta));
        else
            snprintf(label, sizeof label, "run %d/%d %.250s", index, n_train, r->name);
        char ckpt[1100];
        snprintf(ckpt, sizeof ckpt, "%s/model.safetensors", r->folder);
        TrainJob job = {.cfg = r->cfg, .corpus = corpus, .run_dir = r->folder,
                        .resume = state == GRID_UNFINISHED && file_exists(ckpt), .label = label, .quiet = true};
        double t0 = now_seconds();
        if (train_run(&job, &r->result, &e) != 0) {
            err_print(&e);
            return 1;
        }
        if (r->result.status == TRAIN_INTERRUPTED) {
            printf("interrupted in run %s; run the same command again to resume\n", r->name);
            return interrupt_exit_status();
        }
        if (r->result.status == TRAIN_DIVERGED)
            printf("run %s diverged at step %ld; going on\n", r->name, r->result.diverged_step);
        if (grid_record(r, &e) != 0) {
            err_print(&e);
            return 1;
        }
        trained_s += now_seconds() - t0;
        done_here++;
    }
    return 0;
}

int main(int argc, char **argv) {
    command_startup(argc, argv);
    static Grid grid;
    grid_init(&grid);
    const char *corpus = NULL, *out = NULL;
    bool no_baseline = false;
    Err e;
    const ArgFlag flags[] = {
        {"--no-baseline", .on = &no_baseline},
        {"--out", .text = &out, .needs = "a folder"},
        {"--seeds", .integer = &grid.seeds, .lo = 1, .hi = GRID_MAX_SEEDS, .needs = "a count"},
    };
    const ArgSpec cli = {.command = "ablate", .usage = usage, .flags = flags, .key_values = true,
                         .n_flags = (int)(sizeof flags / sizeof *flags), .option = set_option, .ctx = &grid};
    ArgPositional pos;
    int status = args_parse(&cli, argc, argv, &pos);
    if (status != ARGS_OK) return status;
    /* The grid's words, key=v1/v2/... and key=v, after the --key value options; and the corpus. */
    for (int i = 0; i < pos.n; i++) {
        const char *a = pos.v[i];
        if (strchr(a, '=')) {
            if (grid_word(&grid, a, &e) != 0) {
                err_print(&e);
                return 2;
            }
        } else if (!corpus) {
            corpus = a;
        } else {
            fprintf(stderr, "error: more than one corpus given ('%s' and '%s')\n", corpus, a);
            return 2;
        }
    }
    if (!corpus) {
        fprintf(stderr, "error: no corpus given\nhint: ./ablate phi=relu/elu data/brown.txt\n");
        return 2;
    }
    if (grid_settle(&grid, &e) != 0) {
        err_print(&e);
        return 2;
    }
    char dir[400];
    if (out)
        snprintf(dir, sizeof dir, "%s", out);
    else
        grid_default_dir(&grid, dir, sizeof dir);
    GridRun *runs;
    int n_runs = grid_plan(&grid, !no_baseline, dir, &runs, &e);
    if (n_runs < 0) {
        err_print(&e);
        return 2;
    }
    int n_train = 0;
    for (int i = 0; i < n_runs; i++) {
        if (runs[i].skipped)
            printf("skip %s: %s\n", runs[i].name, runs[i].why);
        else
            n_train++;
    }
    if (n_train == 0) {
        fprintf(stderr, "error: no combination of the grid can run\n");
        return 2;
    }
    if (make_dirs(dir, &e) != 0) {
        err_print(&e);
        return 1;
    }
    int threads = engine_set_threads(grid.base.train.threads);
    printf("attnlab ablate: %d runs in %s, %s\n", n_train, dir, threads_banner(threads));

    interrupt_install(); /* a run stops at its next step, its checkpoint saved */
    double t_start = now_seconds();
    status = train_runs(runs, n_runs, n_train, corpus);
    if (status == 0 && grid_write_outputs(dir, &grid, runs, n_runs, &e) != 0) {
        err_print(&e);
        status = 1;
    }
    if (status == 0) {
        char *md, *csv, took[32];
        grid_tables(&grid, runs, n_runs, &md, &csv, NULL);
        printf("\n%s\nwrote %s/results.md, %s/results.csv, %s/curves.png (%s)\n", md, dir, dir, dir,
               format_duration(now_seconds() - t_start, took, sizeof took));
        free(md);
        free(csv);
    }
    grid_free(runs, n_runs);
    grid_release(&grid);
    return status;
}
