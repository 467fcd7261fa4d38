/* ablate.c: ./ablate key=v1/v2/... [key=v ...] [--key value ...] corpus.txt
 *
 * One training run per point of the grid (the cartesian product of the axes),
 * all with the same seed, data order, budget and validation windows, plus a
 * softmax baseline. Each run is an ordinary run folder under the ablation's
 * folder; an interrupted ablation resumes (finished runs are skipped, an
 * unfinished one resumes from its checkpoint). Writes results.md, results.csv
 * and curves.png (validation bpb against step, every run overlaid). */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "attention/kernel.h"
#include "plot.h"
#include "progress.h"
#include "run.h"
#include "startup.h"
#include "tensor.h"
#include "trainer.h"

#define MAX_AXES 8
#define MAX_VALUES 32
#define MAX_RUNS 512

typedef struct {
    const OptDef *opt;
    const char *values[MAX_VALUES];
    int n;
} Axis;

typedef struct {
    char name[256];   /* "phi=relu,reweight=cos", or "baseline attn=softmax" */
    char folder[1024]; /* path of its run folder */
    Config cfg;
    const char *values[MAX_AXES]; /* its value on each axis (NULL for the baseline) */
    bool skipped;
    char why[512]; /* why it was skipped */
    TrainResult result;
    double den_clamped; /* mean over logged steps, NAN when the kernel has none */
    double *steps, *bpb; /* validation curve */
    int n_points;
} Run;

static void usage(FILE *f) {
    fprintf(f,
            "usage: ./ablate key=v1/v2/... [key=v ...] [--key value ...] [--no-baseline] [--out DIR] corpus.txt\n"
            "\n"
            "Trains one run per point of the grid: every key=v1/v2/... is an axis and the runs are\n"
            "their cartesian product; key=v fixes an option for all runs; --key value sets the\n"
            "shared options (--steps 300, --layers 2 ...). Every run has the same seed, data order,\n"
            "budget and validation windows. When phi or reweight is given, attn=linear is implied.\n"
            "A softmax baseline row is added unless --no-baseline. Combinations that cannot work are\n"
            "listed and skipped, with the reason; a run that diverges is recorded at its step.\n"
            "\n"
            "Runs go to DIR/<run>/ (default DIR: runs/ablate-<axes>); running the same command again\n"
            "resumes: finished runs are skipped and an unfinished one continues from its checkpoint.\n"
            "Writes DIR/results.md, DIR/results.csv and DIR/curves.png.\n"
            "\n"
            "Example: ./ablate phi=identity/leakyrelu/relu/elu reweight=none/cos --steps 1000 data/brown.txt\n");
    fprintf(f, "\nThe options (keys and --keys alike):\n");
    options_print_help(f, 7);
}

/* Folder-safe form of a run name. */
static void folder_name(const char *name, char *out, size_t size) {
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < size; p++)
        out[k++] = (*p == '=' ? '-' : *p == ',' || *p == ' ' ? '_' : *p == '/' ? '-' : *p);
    out[k] = '\0';
}

/* Reads a finished run's result.json, if there is one. */
static bool read_result(const char *folder, TrainResult *r) {
    char path[1100];
    snprintf(path, sizeof path, "%s/result.json", folder);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cJSON *j = cJSON_Parse(buf);
    if (!j) return false;
    const cJSON *st = cJSON_GetObjectItem(j, "status");
    bool ok = cJSON_IsString(st);
    if (ok) {
        memset(r, 0, sizeof *r);
        r->status = strcmp(st->valuestring, "diverged") == 0 ? TRAIN_DIVERGED : TRAIN_DONE;
        const cJSON *x;
        r->step = (x = cJSON_GetObjectItem(j, "step")) && cJSON_IsNumber(x) ? (long)x->valuedouble : 0;
        r->diverged_step = (x = cJSON_GetObjectItem(j, "diverged_step")) && cJSON_IsNumber(x) ? (long)x->valuedouble : 0;
        r->val_bpb = (x = cJSON_GetObjectItem(j, "val_bpb")) && cJSON_IsNumber(x) ? x->valuedouble : NAN;
        r->best_val_bpb = (x = cJSON_GetObjectItem(j, "best_val_bpb")) && cJSON_IsNumber(x) ? x->valuedouble : NAN;
        r->tok_s = (x = cJSON_GetObjectItem(j, "tok_s")) && cJSON_IsNumber(x) ? x->valuedouble : NAN;
    }
    cJSON_Delete(j);
    return ok;
}

static int write_result(const char *folder, const TrainResult *r, Err *e) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "status", r->status == TRAIN_DIVERGED ? "diverged" : "done");
    cJSON_AddNumberToObject(j, "step", (double)r->step);
    if (r->status == TRAIN_DIVERGED) cJSON_AddNumberToObject(j, "diverged_step", (double)r->diverged_step);
    if (isfinite(r->val_bpb)) cJSON_AddNumberToObject(j, "val_bpb", r->val_bpb);
    if (isfinite(r->best_val_bpb)) cJSON_AddNumberToObject(j, "best_val_bpb", r->best_val_bpb);
    if (isfinite(r->tok_s)) cJSON_AddNumberToObject(j, "tok_s", r->tok_s);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    char path[1100];
    snprintf(path, sizeof path, "%s/result.json", folder);
    int rc = write_file_atomic(path, text, e);
    free(text);
    return rc;
}

/* The validation curve and the mean clamped-denominator fraction from metrics.jsonl. */
static void read_metrics(Run *run) {
    char path[1100];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run->folder);
    run->den_clamped = NAN;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[4096];
    int cap = 0;
    double clamped = 0;
    int n_clamped = 0;
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        if (!j) continue;
        const cJSON *s = cJSON_GetObjectItem(j, "step"), *v = cJSON_GetObjectItem(j, "val_bpb");
        const cJSON *d = cJSON_GetObjectItem(j, "den_clamped");
        if (cJSON_IsNumber(s) && cJSON_IsNumber(v)) {
            if (run->n_points == cap) {
                cap = cap ? 2 * cap : 64;
                run->steps = realloc(run->steps, (size_t)cap * sizeof(double));
                run->bpb = realloc(run->bpb, (size_t)cap * sizeof(double));
                if (!run->steps || !run->bpb) DIE("out of memory");
            }
            run->steps[run->n_points] = s->valuedouble;
            run->bpb[run->n_points++] = v->valuedouble;
        }
        if (cJSON_IsNumber(d)) {
            clamped += d->valuedouble;
            n_clamped++;
        }
        cJSON_Delete(j);
    }
    fclose(f);
    if (n_clamped) run->den_clamped = clamped / n_clamped;
}

static const char *fmt_num(double x, const char *format, char *buf, size_t size) {
    if (isfinite(x))
        snprintf(buf, size, format, x);
    else
        snprintf(buf, size, "-");
    return buf;
}

/* results.md, results.csv and curves.png. */
static int write_outputs(const char *dir, const Axis *axes, int n_axes, Run *runs, int n_runs, Err *e) {
    size_t cap = 4096 + (size_t)n_runs * 512, mlen = 0, clen = 0;
    char *md = xmalloc(cap), *csv = xmalloc(cap);
    mlen += (size_t)snprintf(md + mlen, cap - mlen, "| run |");
    clen += (size_t)snprintf(csv + clen, cap - clen, "run,");
    for (int a = 0; a < n_axes; a++) {
        mlen += (size_t)snprintf(md + mlen, cap - mlen, " %s |", axes[a].opt->name);
        clen += (size_t)snprintf(csv + clen, cap - clen, "%s,", axes[a].opt->name);
    }
    mlen += (size_t)snprintf(md + mlen, cap - mlen,
                             " final val bpb | best val bpb | diverged at | clamped denominators | tok/s |\n|---|");
    clen += (size_t)snprintf(csv + clen, cap - clen, "final_val_bpb,best_val_bpb,diverged_step,den_clamped,tok_s,status\n");
    for (int a = 0; a < n_axes; a++) mlen += (size_t)snprintf(md + mlen, cap - mlen, "---|");
    mlen += (size_t)snprintf(md + mlen, cap - mlen, "---|---|---|---|---|\n");
    for (int i = 0; i < n_runs; i++) {
        Run *r = &runs[i];
        if (r->skipped) continue;
        char b1[32], b2[32], b3[32], b4[32], b5[32];
        const char *diverged = r->result.status == TRAIN_DIVERGED ? (snprintf(b3, sizeof b3, "%ld", r->result.diverged_step), b3) : "-";
        mlen += (size_t)snprintf(md + mlen, cap - mlen, "| %s |", r->name);
        clen += (size_t)snprintf(csv + clen, cap - clen, "\"%s\",", r->name);
        for (int a = 0; a < n_axes; a++) {
            /* the baseline has no value on the axes: "-" */
            char v[320] = "-";
            if (r->values[a]) option_format(&r->cfg, axes[a].opt, v, sizeof v);
            mlen += (size_t)snprintf(md + mlen, cap - mlen, " %s |", v);
            clen += (size_t)snprintf(csv + clen, cap - clen, "%s,", v);
        }
        mlen += (size_t)snprintf(md + mlen, cap - mlen, " %s | %s | %s | %s | %s |\n", fmt_num(r->result.val_bpb, "%.4f", b1, 32),
                                 fmt_num(r->result.best_val_bpb, "%.4f", b2, 32), diverged,
                                 fmt_num(100 * r->den_clamped, "%.2f%%", b4, 32), fmt_num(r->result.tok_s, "%.0f", b5, 32));
        clen += (size_t)snprintf(csv + clen, cap - clen, "%s,%s,%s,%s,%s,%s\n", fmt_num(r->result.val_bpb, "%.6f", b1, 32),
                                 fmt_num(r->result.best_val_bpb, "%.6f", b2, 32),
                                 r->result.status == TRAIN_DIVERGED ? b3 : "", isfinite(r->den_clamped) ? fmt_num(r->den_clamped, "%.6f", b4, 32) : "",
                                 fmt_num(r->result.tok_s, "%.0f", b5, 32),
                                 r->result.status == TRAIN_DIVERGED ? "diverged" : "done");
    }
    bool any_skipped = false;
    for (int i = 0; i < n_runs; i++) any_skipped |= runs[i].skipped;
    if (any_skipped) {
        mlen += (size_t)snprintf(md + mlen, cap - mlen, "\nSkipped, because the combination cannot work:\n\n");
        for (int i = 0; i < n_runs; i++)
            if (runs[i].skipped)
                mlen += (size_t)snprintf(md + mlen, cap - mlen, "- %s: %s\n", runs[i].name, runs[i].why);
    }
    char path[600];
    snprintf(path, sizeof path, "%s/results.md", dir);
    int rc = write_file_atomic(path, md, e);
    snprintf(path, sizeof path, "%s/results.csv", dir);
    if (rc == 0) rc = write_file_atomic(path, csv, e);
    free(md);
    free(csv);
    if (rc != 0) return -1;

    PlotSeries *s = xmalloc((size_t)n_runs * sizeof *s);
    int n = 0;
    for (int i = 0; i < n_runs; i++)
        if (!runs[i].skipped && runs[i].n_points) s[n++] = (PlotSeries){runs[i].name, runs[i].steps, runs[i].bpb, runs[i].n_points, 0};
    snprintf(path, sizeof path, "%s/curves.png", dir);
    PlotSpec spec = {"validation bits per byte", "step", "val bpb", 0, 0, 0, 0, 0};
    rc = n ? plot_lines(path, &spec, s, n, e) : 0;
    free(s);
    return rc;
}

/* The baseline: the default kernel (softmax), with every option that only
 * some kernel takes back at its default. */
static void baseline_config(Config *c) {
    for (int k = 0; k < attn_kernel_count(); k++)
        for (const OptDef *r = attn_kernels[k]->option_rows; r && r->name; r++) option_set(c, r->name, r->def, NULL);
    option_set(c, "attn", option_find("attn")->def, NULL);
}

static bool same_config(const Config *a, const Config *b) {
    for (int i = 0; i < option_count(); i++) {
        char x[320], y[320];
        if (strcmp(option_format(a, option_at(i), x, sizeof x), option_format(b, option_at(i), y, sizeof y)) != 0)
            return false;
    }
    return true;
}

/* What the option table's --key value set: the shared options. */
typedef struct {
    Config *base;
    bool attn_given, eval_given;
} AblateArgs;

static int set_option(const OptDef *o, const char *value, void *ctx) {
    AblateArgs *args = ctx;
    Err e;
    if (option_set(args->base, o->name, value, &e) != 0) {
        err_print(&e);
        return -1;
    }
    args->attn_given |= !strcmp(o->name, "attn");
    args->eval_given |= !strcmp(o->name, "eval_every");
    return 0;
}

int main(int argc, char **argv) {
    command_startup(argc, argv);
    Axis axes[MAX_AXES];
    int n_axes = 0;
    Config base;
    config_defaults(&base);
    const char *corpus = NULL, *out = NULL;
    bool no_baseline = false;
    const AttnKernel *implied = NULL; /* the kernel a key=... implies, when attn is not given */
    Err e;
    AblateArgs args = {.base = &base};
    const ArgFlag flags[] = {
        {"--no-baseline", .on = &no_baseline},
        {"--out", .text = &out, .needs = "a folder"},
    };
    const ArgSpec cli = {.command = "ablate", .usage = usage, .flags = flags,
                         .n_flags = (int)(sizeof flags / sizeof *flags), .option = set_option, .ctx = &args};
    ArgPositional pos;
    int status = args_parse(&cli, argc, argv, &pos);
    if (status != ARGS_OK) return status;
    bool baseline = !no_baseline, attn_given = args.attn_given, eval_given = args.eval_given;
    /* The grid's words, key=v1/v2/... and key=v, after the --key value options; and the corpus. */
    for (int i = 0; i < pos.n; i++) {
        char *a = pos.v[i];
        if (strchr(a, '=')) {
            char *eq = strchr(a, '=');
            *eq = '\0';
            const char *key = a, *vals = eq + 1;
            const OptDef *o = option_find(key);
            if (!o || !strcmp(o->name, "out")) {
                fprintf(stderr, "error: unknown key '%s'\nhint: ./ablate --help lists the keys\n", key);
                return 2;
            }
            attn_given |= !strcmp(key, "attn");
            eval_given |= !strcmp(key, "eval_every");
            if (!implied) implied = attn_option_owner(key);
            if (!strchr(vals, '/')) { /* key=v: fixed for every run */
                if (!*vals) {
                    fprintf(stderr, "error: %s=: no value\n", key);
                    return 2;
                }
                if (option_set(&base, key, vals, &e) != 0) {
                    err_print(&e);
                    return 2;
                }
                continue;
            }
            if (n_axes == MAX_AXES) {
                fprintf(stderr, "error: more than %d axes\n", MAX_AXES);
                return 2;
            }
            for (int k = 0; k < n_axes; k++)
                if (axes[k].opt == o) {
                    fprintf(stderr, "error: %s: given as an axis twice\n", key);
                    return 2;
                }
            Axis *ax = &axes[n_axes++];
            ax->opt = o;
            ax->n = 0;
            for (char *v = (char *)vals, *next;; v = next + 1) {
                next = strchr(v, '/');
                if (next) *next = '\0';
                if (!*v) {
                    fprintf(stderr, "error: %s=%s: empty value in the axis\nhint: write key=v1/v2/v3\n", key, vals);
                    return 2;
                }
                Config scratch = base;
                if (option_set(&scratch, key, v, &e) != 0) {
                    err_print(&e);
                    return 2;
                }
                if (ax->n == MAX_VALUES) {
                    fprintf(stderr, "error: %s: more than %d values\n", key, MAX_VALUES);
                    return 2;
                }
                ax->values[ax->n++] = v;
                if (!next) break;
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
    if (n_axes == 0) {
        fprintf(stderr, "error: no axis given\nhint: an axis is key=v1/v2, e.g. phi=relu/identity/elu\n");
        return 2;
    }
    if (implied && !attn_given) option_set(&base, "attn", implied->name, NULL);
    /* The curves want ten or so points per run, whatever the budget. */
    if (!eval_given && base.train.steps < 10 * base.train.eval_every)
        base.train.eval_every = base.train.steps >= 10 ? base.train.steps / 10 : 1;

    /* The grid, then the baseline. */
    static Run runs[MAX_RUNS + 1];
    int n_runs = 1;
    for (int a = 0; a < n_axes; a++) {
        n_runs *= axes[a].n;
        if (n_runs > MAX_RUNS) {
            fprintf(stderr, "error: the grid has more than %d runs\n", MAX_RUNS);
            return 2;
        }
    }
    char dir[400];
    if (out)
        snprintf(dir, sizeof dir, "%s", out);
    else {
        size_t k = (size_t)snprintf(dir, sizeof dir, "runs/ablate");
        for (int a = 0; a < n_axes && k < sizeof dir; a++) k += (size_t)snprintf(dir + k, sizeof dir - k, "-%s", axes[a].opt->name);
    }
    for (int i = 0; i < n_runs; i++) {
        Run *r = &runs[i];
        r->cfg = base;
        size_t k = 0;
        for (int a = 0, rest = i; a < n_axes; a++) {
            int stride = 1;
            for (int b = a + 1; b < n_axes; b++) stride *= axes[b].n;
            const char *v = axes[a].values[(rest / stride) % axes[a].n];
            r->values[a] = v;
            option_set(&r->cfg, axes[a].opt->name, v, NULL);
            k += (size_t)snprintf(r->name + k, sizeof r->name - k, "%s%s=%s", a ? "," : "", axes[a].opt->name, v);
        }
    }
    if (baseline) {
        Run *r = &runs[n_runs];
        r->cfg = base;
        baseline_config(&r->cfg);
        snprintf(r->name, sizeof r->name, "baseline attn=softmax");
        bool duplicate = false;
        Config check = r->cfg;
        if (config_validate(&check, &e) == 0)
            for (int i = 0; i < n_runs; i++) {
                Config other = runs[i].cfg;
                duplicate |= config_validate(&other, NULL) == 0 && same_config(&check, &other);
            }
        if (!duplicate) n_runs++;
    }
    int n_train = 0;
    for (int i = 0; i < n_runs; i++) {
        Run *r = &runs[i];
        char folder[300];
        folder_name(r->name, folder, sizeof folder);
        snprintf(r->folder, sizeof r->folder, "%s/%s", dir, folder);
        if (config_validate(&r->cfg, &e) != 0) {
            r->skipped = true;
            snprintf(r->why, sizeof r->why, "%s", e.msg);
            printf("skip %s: %s\n", r->name, e.msg);
        } else {
            n_train++;
        }
    }
    if (n_train == 0) {
        fprintf(stderr, "error: no combination of the grid can run\n");
        return 2;
    }
    if (make_dirs(dir, &e) != 0) {
        err_print(&e);
        return 1;
    }
    int threads = engine_set_threads(base.train.threads);
    printf("attnlab ablate: %d runs in %s, %s\n", n_train, dir, threads_banner(threads));

    train_install_signal_handlers();
    double t_start = now_seconds(), trained_s = 0;
    int done_here = 0, index = 0;
    for (int i = 0; i < n_runs; i++) {
        Run *r = &runs[i];
        if (r->skipped) continue;
        index++;
        if (read_result(r->folder, &r->result)) {
            printf("run %d/%d %s: finished before (val bpb %.4f)\n", index, n_train, r->name, r->result.val_bpb);
            read_metrics(r);
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
        size_t folder_len = strlen(r->folder);
        if (folder_len >= sizeof r->cfg.train.out) {
            fprintf(stderr, "error: %s: the run folder's path is %zu bytes, at most %zu fit\n", r->folder, folder_len,
                    sizeof r->cfg.train.out - 1);
            fprintf(stderr, "hint: a shorter --out\n");
            return 2;
        }
        memcpy(r->cfg.train.out, r->folder, folder_len + 1);
        TrainJob job = {.cfg = r->cfg, .corpus = corpus, .run_dir = r->folder, .resume = file_exists(ckpt),
                        .label = label, .quiet = true};
        double t0 = now_seconds();
        if (train_run(&job, &r->result, &e) != 0) {
            err_print(&e);
            return 1;
        }
        if (r->result.status == TRAIN_INTERRUPTED) {
            printf("interrupted in run %s; run the same command again to resume\n", r->name);
            return 128 + (train_stop_signal() ? train_stop_signal() : 2);
        }
        if (r->result.status == TRAIN_DIVERGED)
            printf("run %s diverged at step %ld; going on\n", r->name, r->result.diverged_step);
        if (write_result(r->folder, &r->result, &e) != 0) {
            err_print(&e);
            return 1;
        }
        trained_s += now_seconds() - t0;
        done_here++;
        read_metrics(r);
    }
    if (write_outputs(dir, axes, n_axes, runs, n_runs, &e) != 0) {
        err_print(&e);
        return 1;
    }
    char took[32];
    printf("\n");
    char path[600];
    snprintf(path, sizeof path, "%s/results.md", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        char line[1024];
        while (fgets(line, sizeof line, f)) fputs(line, stdout);
        fclose(f);
    }
    printf("\nwrote %s/results.md, %s/results.csv, %s/curves.png (%s)\n", dir, dir, dir,
           format_duration(now_seconds() - t_start, took, sizeof took));
    for (int i = 0; i < n_runs; i++) free(runs[i].steps), free(runs[i].bpb);
    return 0;
}
