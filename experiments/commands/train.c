/* train.c: ./train [--key value ...] corpus.txt
 *          ./train --resume RUN_DIR [--steps N ...]
 *          mpirun -np N ./train ...   (data parallel: trainer.c, dist.h) */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "args.h"
#include "checkpoint.h"
#include "dist.h"
#include "interrupt.h"
#include "output_check.h"
#include "run.h"
#include "startup.h"
#include "tensor.h"
#include "trainer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ./train [--key value ...] corpus.txt\n"
            "       ./train --resume RUN_DIR [--repair] [--key value ...] [corpus.txt]\n"
            "\n"
            "Trains a byte-level language model on corpus.txt (any text; the last val_fraction\n"
            "is held out). The run folder gets model.safetensors, config.json, metrics.jsonl,\n"
            "loss.png and samples.txt (under --objective mlm, a fill-in demo: masked\n"
            "validation windows and the model's predictions), and index.html, a page of the\n"
            "curves, config and samples, written at each evaluation and at the end (while the\n"
            "run trains it reloads itself; docs/pages.md). Ctrl-C saves a checkpoint and\n"
            "stops; --resume continues the run exactly (training, sampling and threads options\n"
            "may change; model options may not). A resume reads the run's metrics.jsonl and stops\n"
            "at a line that is cut short, binary or garbage, naming it; --repair then keeps the\n"
            "lines before it, keeps the original beside as metrics.jsonl.broken-<date>-<time>, and\n"
            "resumes.\n"
            "\n"
            "Under mpirun -np N, the N processes (ranks) train one model together: each step\n"
            "takes N x batch windows, rank r taking rows [r batch, (r + 1) batch) of the batch\n"
            "one process with --batch N x batch would draw, so the run follows that process's\n"
            "up to float rounding (effective batch N x batch; the learning rate is not\n"
            "scaled). Gradients are averaged with MPI_Allreduce; rank 0 writes the run\n"
            "folder; --threads 0 gives each rank its share of the host's cores. A run resumes\n"
            "on as many ranks as trained it.\n"
            "\n"
            "./train --describe prints the option table, the attention kernels, the position\n"
            "schemes and the optimizers as JSON (python/attnlab_tables.json is made from it).\n");
    options_print_help(f, HELP_ALL);
}

/* Options given on the command line, in order, to apply over a resumed config. */
typedef struct {
    Config *cfg;
    const char *keys[128], *values[128];
    int n_set;
} TrainArgs;

static int set_option(const OptDef *o, const char *value, void *ctx) {
    TrainArgs *t = ctx;
    if (t->n_set == 128) {
        fprintf(stderr, "error: too many options\n");
        return -1;
    }
    t->keys[t->n_set] = o->name;
    t->values[t->n_set++] = value;
    Err e;
    if (option_give(t->cfg, o->name, value, &e) != 0) {
        err_print(&e);
        return -1;
    }
    return 0;
}

/* Whether --out names the folder being resumed (as written, or the same
 * folder by another path). */
static bool same_folder(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    while (na > 1 && a[na - 1] == '/') na--;
    while (nb > 1 && b[nb - 1] == '/') nb--;
    if (na == nb && strncmp(a, b, na) == 0) return true;
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Says what a resume changes: every option given a new value, and the
 * learning rate of the next step when the schedule moves (a new --steps
 * stretches the cosine decay). Notes on stdout, after the start-up line. */
static void note_resume_changes(const Config *was, const Config *now, long step) {
    char line[1024] = "", a[320], b[320];
    size_t len = 0;
    for (int i = 0; i < option_count(); i++) {
        const OptDef *o = option_at(i);
        if (!strcmp(o->name, "out")) continue; /* the run stays in its folder */
        option_format(was, o, a, sizeof a);
        option_format(now, o, b, sizeof b);
        if (strcmp(a, b) != 0 && len < sizeof line)
            len += (size_t)snprintf(line + len, sizeof line - len, "%s%s %s -> %s", len ? ", " : "", o->name, a, b);
    }
    if (len) printf("note: resuming with %s\n", line);
    const TrainConfig *w = &was->train, *n = &now->train;
    float planned = lr_at(w->schedule, step, w->warmup, w->steps, w->lr, w->min_lr);
    float lr = lr_at(n->schedule, step, n->warmup, n->steps, n->lr, n->min_lr);
    if (planned != lr)
        printf("note: the learning rate at step %ld changes from %.3g (as the run planned) to %.3g, on a schedule "
               "that now ends at step %d\n", step + 1, planned, lr, n->steps);
}

/* The checkpoint's config with the options given applied over it (a model
 * option may not change, and --out may only name the same folder), and
 * where the corpus and the step are. 0, or the status to exit with. */
static int resume_config(const TrainArgs *args, const char *resume, CheckpointInfo *info, Config *cfg) {
    char ckpt[1100];
    StFile st;
    Err e;
    int opened = path_join(ckpt, sizeof ckpt, resume, "model.safetensors", &e) == 0 &&
                         checkpoint_open(&st, ckpt, info, &e) == 0 ? 0 : -1;
    if (opened == 0) st_close(&st);
    if (dist_agree(opened, &e) != 0) { /* every rank reads it: a host without it says so */
        err_print(&e);
        return 1;
    }
    if (info->ranks != dist_size()) {
        fprintf(stderr, "error: %s: trained on %d rank%s (effective batch %d x %d), resumed on %d: its batches, and "
                        "so the run, would change\n", resume, info->ranks, info->ranks == 1 ? "" : "s", info->ranks,
                info->cfg.train.batch, dist_size());
        if (info->ranks > 1)
            fprintf(stderr, "hint: mpirun -np %d ./train --resume %s\n", info->ranks, resume);
        else
            fprintf(stderr, "hint: resume it without mpirun: ./train --resume %s\n", resume);
        return 2;
    }
    const Config given = *cfg;
    *cfg = info->cfg;
    for (int k = 0; k < args->n_set; k++)
        if (!strcmp(args->keys[k], "out") && !same_folder(given.train.out, resume)) {
            fprintf(stderr, "error: --out %s: a resumed run stays in its folder (%s)\n"
                            "hint: drop --out, or copy the run folder to %s and resume that copy\n",
                    given.train.out, resume, given.train.out);
            return 2;
        }
    for (int k = 0; k < args->n_set; k++) {
        const OptDef *o = option_find(args->keys[k]);
        char a[320], b[320];
        if (o->group == GROUP_MODEL &&
            strcmp(option_format(&given, o, a, sizeof a), option_format(cfg, o, b, sizeof b)) != 0) {
            fprintf(stderr, "error: --%s: a model option cannot change when resuming (the run has %s)\n", o->name, b);
            return 2;
        }
        option_set(cfg, args->keys[k], args->values[k], NULL);
    }
    if (info->step >= cfg->train.steps) {
        fprintf(stderr, "error: %s: already trained for %ld steps (--steps %d)\nhint: raise --steps to train further\n",
                resume, info->step, cfg->train.steps);
        return 2;
    }
    return 0;
}

/* A new run's folder: --out, or runs/<name>-<date>-<time>. */
static void new_run_dir(const Config *cfg, char *run_dir, size_t size) {
    if (cfg->train.out[0]) {
        snprintf(run_dir, size, "%s", cfg->train.out);
        return;
    }
    char stamp[32], name[128];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", localtime(&now));
    config_run_name(cfg, name, sizeof name);
    snprintf(run_dir, size, "runs/%s-%s", name, stamp);
}

/* The threads, then the start-up line: the run folder, the threads, and the
 * ranks when data parallel. 0, or -1 with e set when the threads do not fit. */
static int print_banner(const Config *cfg, const char *run_dir, bool resumed, Err *e) {
    int N = dist_size();
    int threads = command_threads(cfg->train.threads || N == 1 ? cfg->train.threads : dist_default_threads(), stdout, e);
    if (threads < 0) return -1;
    if (N > 1)
        printf("attnlab train: %s%s, %d ranks x %s\ndata parallel: effective batch %d = %d ranks x batch %d\n", run_dir,
               resumed ? " (resumed)" : "", N, threads_banner(threads), N * cfg->train.batch, N, cfg->train.batch);
    else
        printf("attnlab train: %s%s, %s\n", run_dir, resumed ? " (resumed)" : "", threads_banner(threads));
    return 0;
}

/* What the run came to, on stdout or stderr; the status to exit with. */
static int report(const TrainResult *r, const Config *cfg, const char *run_dir) {
    int N = dist_size();
    switch (r->status) {
        case TRAIN_DIVERGED: {
            char ckpt[1100];
            fprintf(stderr, "error: step %ld: %s; stopped\n", r->diverged_step, r->why);
            if (path_join(ckpt, sizeof ckpt, run_dir, "model.safetensors", NULL) == 0 && file_exists(ckpt))
                fprintf(stderr, "hint: the last good checkpoint is %s; try a lower --lr\n", ckpt);
            else
                fprintf(stderr, "hint: no checkpoint was saved before it; try a lower --lr\n");
            return 1;
        }
        case TRAIN_INTERRUPTED: {
            if (r->step < cfg->train.steps) {
                char launch[32] = "";
                if (N > 1) snprintf(launch, sizeof launch, "mpirun -np %d ", N);
                printf("interrupted at step %ld; checkpoint saved.\ncontinue with: %s./train --resume %s\n", r->step,
                       launch, run_dir);
            }
            else /* in the final evaluation or the sampling: training itself is done */
                printf("interrupted after the last step (%ld); checkpoint saved, samples.txt not written.\n", r->step);
            /* the shell's convention: 130 for Ctrl-C, 143 for SIGTERM; data parallel, every rank exits
             * with the status of the signal some rank received */
            int status = dist_max(interrupt_signal() ? interrupt_exit_status() : 0);
            return status ? status : interrupt_exit_status();
        }
        default:
            printf("val bpb %.4f (best %.4f)%s after %ld steps", r->val_bpb, r->best_val_bpb,
                   cfg->model.objective == OBJECTIVE_MLM ? " on the masked bytes" : "", r->step);
            if (isfinite(r->tok_s)) printf(", %.0f tok/s", r->tok_s);
            printf("\n");
            printf("run folder: %s (loss plot: %s/loss.png, page: %s/index.html)\n", run_dir, run_dir, run_dir);
            return 0;
    }
}

/* The command line: the options into args->cfg, --resume and the corpus.
 * ARGS_OK, or the status to exit with (0 after --help). */
static int parse(int argc, char **argv, TrainArgs *args, const char **resume, bool *repair, const char **corpus) {
    bool describe = false;
    const ArgFlag flags[] = {{"--resume", .text = resume, .needs = "a run folder"}, {"--repair", .on = repair},
                             {"--describe", .on = &describe}};
    const ArgSpec cli = {.command = "train", .usage = usage, .flags = flags,
                         .n_flags = (int)(sizeof flags / sizeof *flags), .option = set_option, .ctx = args};
    ArgPositional pos;
    int status = args_parse(&cli, argc, argv, &pos);
    if (status != ARGS_OK) return status;
    if (describe) /* the tables, for python/attnlab_tables.json */
        return options_describe(stdout) == 0 ? 0 : (fprintf(stderr, "error: --describe: cannot write\n"), 1);
    if (pos.n > 1) {
        fprintf(stderr, "error: more than one corpus given ('%s' and '%s')\n", pos.v[0], pos.v[1]);
        return 2;
    }
    if (pos.n) *corpus = pos.v[0];
    if (*repair && !*resume) {
        fprintf(stderr, "error: --repair: only with --resume, which reads the run's metrics.jsonl\n"
                        "hint: ./train --resume RUN_DIR --repair\n");
        return 2;
    }
    if (!*resume && !*corpus) {
        fprintf(stderr, "error: no corpus given\nhint: ./train corpus.txt (make data fetches data/brown.txt)\n");
        return 2;
    }
    return ARGS_OK;
}

static int train_main(int argc, char **argv) {
    Config cfg;
    config_defaults(&cfg);
    const char *corpus = NULL, *resume = NULL;
    bool repair = false;
    TrainArgs args = {.cfg = &cfg};
    int status = parse(argc, argv, &args, &resume, &repair, &corpus);
    if (status != ARGS_OK) return status;
    char run_dir[1024];
    CheckpointInfo info;
    if (resume) {
        if ((status = resume_config(&args, resume, &info, &cfg)) != 0) return status;
        if (!corpus) corpus = info.corpus;
        snprintf(run_dir, sizeof run_dir, "%s", resume);
    } else {
        new_run_dir(&cfg, run_dir, sizeof run_dir);
    }
    Err e;
    /* the run's name is printed by the plot and the page: checked before the work (output_check.h) */
    if (config_validate(&cfg, &e) != 0 || train_refuses(&cfg, &e) != 0 ||
        (!resume && output_name_check("--out", run_dir, &e) != 0)) {
        err_print(&e);
        return 2;
    }
    if (output_dir_check(resume ? "--resume" : "--out", run_dir, resume ? NULL : "--out DIR", &e) != 0) {
        err_print(&e);
        return 1;
    }
    if (print_banner(&cfg, run_dir, resume != NULL, &e) != 0) {
        err_print(&e);
        return 1;
    }
    if (resume) note_resume_changes(&info.cfg, &cfg, info.step);
    fflush(stdout); /* seen at once in a log, before the first step */

    interrupt_install(); /* the loop saves a checkpoint and stops */
    int N = dist_size();
    char label[64] = "train";
    if (N > 1) snprintf(label, sizeof label, "train %dx%d=%d", N, cfg.train.batch, N * cfg.train.batch);
    TrainJob job = {.cfg = cfg, .corpus = corpus, .run_dir = run_dir, .resume = resume != NULL, .repair = repair, .label = label,
                    .data_parallel = N > 1};
    TrainResult r;
    if (train_run(&job, &r, &e) != 0) {
        err_print(&e);
        return 1;
    }
    return report(&r, &cfg, run_dir);
}

int main(int argc, char **argv) { return command_main_distributed(argc, argv, train_main); }
