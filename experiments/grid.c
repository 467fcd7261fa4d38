/* grid.c: an ablation grid's axes, runs, run folders and result tables. */
#include "grid.h"

#include <cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory.h"
#include "plot.h"
#include "run.h"
#include "stats.h"

void grid_init(Grid *g) {
    memset(g, 0, sizeof *g);
    config_defaults(&g->base);
    g->seeds = 1;
}

void grid_option_given(Grid *g, const char *name) {
    g->attn_given |= !strcmp(name, "attn");
    g->eval_given |= !strcmp(name, "eval_every");
}

/* The option named name[0, len), or NULL with e set (and a did-you-mean). */
static const OptDef *grid_key(const char *name, size_t len, Err *e) {
    char key[64];
    if (len >= sizeof key) return err_set(e, "%.40s...: no such key", name), NULL;
    memcpy(key, name, len);
    key[len] = '\0';
    const OptDef *o = option_find(key);
    if (o && strcmp(o->name, "out")) return o;
    const char *names[256];
    int n = 0;
    for (int i = 0; i < option_count() && n < 256; i++)
        if (strcmp(option_at(i)->name, "out")) names[n++] = option_at(i)->name;
    const char *near = closest_word(key, names, n);
    err_set(e, "unknown key '%s'", key);
    if (near)
        err_hint(e, "did you mean %s=...? (./ablate --help lists the keys)", near);
    else
        err_hint(e, "./ablate --help lists the keys");
    return NULL;
}

/* value ("128:16" for a linked axis) into c, one part per option of ax. */
static int set_linked(Config *c, const GridAxis *ax, const char *value, bool give, Err *e) {
    const char *part = value;
    for (int i = 0; i < ax->n_opts; i++) {
        const char *end = strchr(part, ':');
        if (i + 1 < ax->n_opts && !end)
            return err_set(e, "%s=%s: %d values joined by ':', one per key", ax->name, value, ax->n_opts);
        if (i + 1 == ax->n_opts && end)
            return err_set(e, "%s=%s: %d values joined by ':', not more", ax->name, value, ax->n_opts);
        char one[320];
        size_t len = end ? (size_t)(end - part) : strlen(part);
        if (!len || len >= sizeof one) return err_set(e, "%s=%s: an empty or too long value", ax->name, value);
        memcpy(one, part, len);
        one[len] = '\0';
        int rc = give ? option_give(c, ax->opts[i]->name, one, e) : option_set(c, ax->opts[i]->name, one, e);
        if (rc != 0) return -1;
        part = end + 1;
    }
    return 0;
}

int grid_word(Grid *g, const char *word, Err *e) {
    const char *eq = strchr(word, '=');
    if (!eq) return err_set(e, "%s: not key=value", word);
    /* the key, or keys linked by ':' that vary together (d_model:key_size=128:16/96:64) */
    GridAxis ax = {.n_opts = 0};
    if ((size_t)(eq - word) >= sizeof ax.name) return err_set(e, "%.40s...: no such key", word);
    memcpy(ax.name, word, (size_t)(eq - word));
    ax.name[eq - word] = '\0';
    for (const char *k = ax.name;;) {
        const char *end = strchr(k, ':');
        size_t len = end ? (size_t)(end - k) : strlen(k);
        if (ax.n_opts == GRID_MAX_LINKED) return err_set(e, "%s: more than %d linked keys", ax.name, GRID_MAX_LINKED);
        const OptDef *o = grid_key(k, len, e);
        if (!o) return -1;
        for (int a = 0; a < g->n_axes; a++)
            for (int i = 0; i < g->axes[a].n_opts; i++)
                if (g->axes[a].opts[i] == o) return err_set(e, "%s: given as an axis twice", o->name);
        for (int i = 0; i < ax.n_opts; i++)
            if (ax.opts[i] == o) return err_set(e, "%s: linked to itself", o->name);
        ax.opts[ax.n_opts++] = o;
        grid_option_given(g, o->name);
        if (!g->implied) g->implied = attn_option_owner(o->name);
        if (!end) break;
        k = end + 1;
    }
    const char *vals = eq + 1;
    if (!strchr(vals, '/')) { /* key=v: the same for every run */
        if (!*vals) return err_set(e, "%s=: no value", ax.name);
        return set_linked(&g->base, &ax, vals, true, e);
    }
    if (g->n_axes == GRID_MAX_AXES) return err_set(e, "%s: more than %d axes", ax.name, GRID_MAX_AXES);
    int rc = 0;
    for (const char *v = vals;; v++) {
        const char *end = strchr(v, '/');
        size_t len = end ? (size_t)(end - v) : strlen(v);
        if (!len) {
            rc = err_set(e, "%s=%s: an empty value in the axis", ax.name, vals), err_hint(e, "write key=v1/v2/v3");
            break;
        }
        if (ax.n == GRID_MAX_VALUES) {
            rc = err_set(e, "%s: more than %d values", ax.name, GRID_MAX_VALUES);
            break;
        }
        char *value = xmalloc(len + 1);
        memcpy(value, v, len);
        value[len] = '\0';
        ax.values[ax.n++] = value;
        Config scratch = g->base;
        if ((rc = set_linked(&scratch, &ax, value, false, e)) != 0) break;
        if (!end) break;
        v = end;
    }
    if (rc != 0) {
        for (int i = 0; i < ax.n; i++) free(ax.values[i]);
        return -1;
    }
    g->axes[g->n_axes++] = ax;
    return 0;
}

int grid_settle(Grid *g, Err *e) {
    if (g->n_axes == 0)
        return err_set(e, "no axis given"), err_hint(e, "an axis is key=v1/v2, e.g. phi=relu/identity/elu");
    if (g->implied && !g->attn_given) option_set(&g->base, "attn", g->implied->name, NULL);
    /* The curves want ten or so points per run, whatever the budget. */
    TrainConfig *t = &g->base.train;
    if (!g->eval_given && t->steps < 10 * t->eval_every) t->eval_every = t->steps >= 10 ? t->steps / 10 : 1;
    return 0;
}

/* Folder-safe form of a run name. */
static void folder_name(const char *name, char *out, size_t size) {
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < size; p++)
        out[k++] = (*p == '=' ? '-' : *p == ',' || *p == ' ' ? '_' : *p == '/' ? '-' : *p == ':' ? '+' : *p);
    out[k] = '\0';
}

void grid_default_dir(const Grid *g, char *dir, size_t size) {
    size_t k = (size_t)snprintf(dir, size, "runs/ablate");
    for (int a = 0; a < g->n_axes && k < size; a++) {
        char name[128];
        folder_name(g->axes[a].name, name, sizeof name);
        k += (size_t)snprintf(dir + k, size - k, "-%s", name);
    }
}


/* The baseline: the default kernel, with every option that only some kernel
 * takes back at its default. */
static void baseline_config(Config *c) {
    for (int k = 0; k < attn_kernel_count(); k++)
        for (const OptDef *r = attn_kernels[k]->option_rows; r && r->name; r++) {
            option_set(c, r->name, r->def, NULL);
            option_forget(c, r->name);
        }
    option_set(c, "attn", option_find("attn")->def, NULL);
    option_forget(c, "attn");
}

/* The options a and b differ in, as "name a -> b, ..." into buf (empty when none). */
static void differences(const Config *a, const Config *b, char *buf, size_t size) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < option_count(); i++) {
        const OptDef *o = option_at(i);
        if (option_bookkeeping(o)) continue;
        char x[320], y[320];
        if (!strcmp(option_format(a, o, x, sizeof x), option_format(b, o, y, sizeof y))) continue;
        if (k < size) k += (size_t)snprintf(buf + k, size - k, "%s%s %s -> %s", k ? ", " : "", o->name, x, y);
    }
}

int grid_plan(const Grid *g, bool baseline, const char *dir, GridRun **out, Err *e) {
    *out = NULL;
    const int S = g->seeds;
    long points = 1;
    for (int a = 0; a < g->n_axes; a++)
        if ((points *= g->axes[a].n) * S > GRID_MAX_RUNS)
            return err_set(e, "the grid has more than %d runs", GRID_MAX_RUNS);
    GridRun *runs = xcalloc((size_t)(points + 1) * S, sizeof *runs);
    for (int p = 0; p < points; p++) {
        GridRun *r = &runs[p * S];
        r->cfg = g->base;
        size_t k = 0;
        for (int a = 0, stride = (int)points; a < g->n_axes; a++) {
            const GridAxis *ax = &g->axes[a];
            stride /= ax->n;
            const char *v = ax->values[(p / stride) % ax->n];
            r->values[a] = v;
            set_linked(&r->cfg, ax, v, false, NULL); /* checked by grid_word */
            if (k < sizeof r->name)
                k += (size_t)snprintf(r->name + k, sizeof r->name - k, "%s%s=%s", a ? "," : "", ax->name, v);
        }
    }
    int n_points = (int)points;
    if (baseline) {
        GridRun *r = &runs[points * S];
        r->cfg = g->base;
        baseline_config(&r->cfg);
        snprintf(r->name, sizeof r->name, "baseline attn=%s", option_find("attn")->def);
        Config check = r->cfg;
        bool duplicate = false;
        if (config_validate(&check, NULL) == 0)
            for (int p = 0; p < points && !duplicate; p++) {
                Config other = runs[p * S].cfg;
                char diff[64];
                differences(&check, &other, diff, sizeof diff);
                duplicate = config_validate(&other, NULL) == 0 && !diff[0];
            }
        if (!duplicate) n_points++;
    }
    /* each point's runs: seed, seed + 1, ... */
    for (int p = 0; p < n_points; p++)
        for (int s = S - 1; s >= 0; s--) {
            GridRun *r = &runs[p * S + s];
            if (s) *r = runs[p * S];
            r->cfg.train.seed += s;
            size_t k = strlen(r->name);
            if (S > 1 && k < sizeof r->name)
                snprintf(r->name + k, sizeof r->name - k, ",seed=%lld", (long long)r->cfg.train.seed);
            r->point = p;
            r->seed_index = s;
        }
    int n = n_points * S;
    for (int i = 0; i < n; i++) {
        GridRun *r = &runs[i];
        /* the name as a folder; a long one cut, with the run's index to keep it apart */
        char folder[200];
        folder_name(r->name, folder, sizeof folder);
        if (strlen(r->name) >= sizeof folder - 1) snprintf(folder + 160, sizeof folder - 160, "-%d", i + 1);
        if ((size_t)snprintf(r->folder, sizeof r->folder, "%s/%s", dir, folder) >= sizeof r->folder ||
            strlen(r->folder) >= sizeof r->cfg.train.out) {
            free(runs);
            return err_set(e, "%s/%s: the run folder's path is too long (at most %zu bytes)", dir, folder,
                           sizeof r->cfg.train.out - 1),
                   err_hint(e, "a shorter --out, or shorter values");
        }
        memcpy(r->cfg.train.out, r->folder, strlen(r->folder) + 1); /* it fits: checked above */
        r->den_clamped = NAN;
        Err why;
        if (config_validate(&r->cfg, &why) != 0) {
            r->skipped = true;
            snprintf(r->why, sizeof r->why, "%s", why.msg);
        }
    }
    *out = runs;
    return n;
}

void grid_release(Grid *g) {
    for (int a = 0; a < g->n_axes; a++)
        for (int i = 0; i < g->axes[a].n; i++) free(g->axes[a].values[i]);
    g->n_axes = 0;
}

void grid_free(GridRun *runs, int n) {
    for (int i = 0; i < n; i++) free(runs[i].steps), free(runs[i].bpb);
    free(runs);
}

/* A small JSON file of a run folder (config.json, result.json), parsed; NULL
 * when it is missing. -1 with e set when it is there but not JSON. */
static int read_json(const char *folder, const char *file, cJSON **out, Err *e) {
    char path[1100];
    *out = NULL;
    snprintf(path, sizeof path, "%s/%s", folder, file);
    FILE *f = fopen_regular(path, "r", e); /* a FIFO left there must not hang the grid */
    if (!f) return errno == ENOENT ? 0 : -1;
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    bool whole = feof(f);
    fclose(f);
    buf[n] = '\0';
    if (!whole || !(*out = cJSON_Parse(buf)))
        return err_set(e, "%s: not the file a run writes", path),
               err_hint(e, "remove the folder to train the run again, or give another --out");
    return 0;
}

static double number(const cJSON *j, const char *key) {
    const cJSON *x = cJSON_GetObjectItem(j, key);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

/* The validation curve and the mean clamped-denominator fraction from metrics.jsonl. */
static void read_metrics(GridRun *run) {
    char path[1100];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run->folder);
    free(run->steps), free(run->bpb);
    run->steps = run->bpb = NULL;
    run->n_points = 0;
    run->den_clamped = NAN;
    FILE *f = fopen_regular(path, "r", NULL);
    if (!f) return; /* no curve: the table still has the result */
    char line[4096];
    int cap = 0, n_clamped = 0;
    double clamped = 0;
    while (fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        if (!j) continue;
        double s = number(j, "step"), v = number(j, "val_bpb"), d = number(j, "den_clamped");
        if (isfinite(s) && !isnan(v)) {
            if (run->n_points == cap) {
                cap = cap ? 2 * cap : 64;
                run->steps = realloc(run->steps, (size_t)cap * sizeof(double));
                run->bpb = realloc(run->bpb, (size_t)cap * sizeof(double));
                if (!run->steps || !run->bpb) DIE("out of memory");
            }
            run->steps[run->n_points] = s;
            run->bpb[run->n_points++] = v;
        }
        if (!isnan(d)) clamped += d, n_clamped++;
        cJSON_Delete(j);
    }
    fclose(f);
    if (n_clamped) run->den_clamped = clamped / n_clamped;
}

static bool same_file(const char *a, const char *b) {
    char ra[PATH_MAX], rb[PATH_MAX];
    if (realpath(a, ra) && realpath(b, rb)) return !strcmp(ra, rb);
    return !strcmp(a, b);
}

int grid_run_state(GridRun *r, const char *corpus, Err *e) {
    cJSON *json;
    if (read_json(r->folder, "config.json", &json, e) != 0) return -1;
    if (!json) return GRID_NEW;
    /* the folder's run: the options it was trained with, and its corpus */
    Config had;
    config_defaults(&had);
    cJSON *c = cJSON_DetachItemFromObject(json, "corpus");
    /* a data-parallel run's notes (trainer.c), not options */
    cJSON_DeleteItemFromObject(json, "ranks");
    cJSON_DeleteItemFromObject(json, "effective_batch");
    Err sub;
    int rc = config_from_json(&had, json, &sub);
    cJSON_Delete(json);
    if (rc != 0) {
        cJSON_Delete(c);
        return err_set(e, "%s/config.json: %s", r->folder, sub.msg),
               err_hint(e, "remove the folder to train the run again, or give another --out");
    }
    char diff[400];
    differences(&had, &r->cfg, diff, sizeof diff);
    if (!cJSON_IsString(c) || !same_file(c->valuestring, corpus)) {
        size_t k = strlen(diff);
        snprintf(diff + k, sizeof diff - k, "%scorpus %s -> %s", k ? ", " : "",
                 cJSON_IsString(c) ? c->valuestring : "?", corpus);
    }
    cJSON_Delete(c);
    if (diff[0])
        return err_set(e, "%s: holds a run with other options (%s)", r->folder, diff),
               err_hint(e, "give another --out, or remove the folder to train the run again");
    cJSON *res;
    if (read_json(r->folder, "result.json", &res, e) != 0) return -1;
    const cJSON *st = cJSON_GetObjectItem(res, "status");
    if (!cJSON_IsString(st)) {
        cJSON_Delete(res);
        return GRID_UNFINISHED;
    }
    TrainResult *t = &r->result;
    memset(t, 0, sizeof *t);
    t->status = !strcmp(st->valuestring, "diverged") ? TRAIN_DIVERGED : TRAIN_DONE;
    double x;
    t->step = isfinite(x = number(res, "step")) ? (long)x : 0;
    t->diverged_step = isfinite(x = number(res, "diverged_step")) ? (long)x : 0;
    t->val_bpb = number(res, "val_bpb");
    t->best_val_bpb = number(res, "best_val_bpb");
    t->tok_s = number(res, "tok_s");
    cJSON_Delete(res);
    read_metrics(r);
    return GRID_FINISHED;
}

int grid_record(GridRun *r, Err *e) {
    const TrainResult *t = &r->result;
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "status", t->status == TRAIN_DIVERGED ? "diverged" : "done");
    cJSON_AddNumberToObject(j, "step", (double)t->step);
    if (t->status == TRAIN_DIVERGED) cJSON_AddNumberToObject(j, "diverged_step", (double)t->diverged_step);
    if (isfinite(t->val_bpb)) cJSON_AddNumberToObject(j, "val_bpb", t->val_bpb);
    if (isfinite(t->best_val_bpb)) cJSON_AddNumberToObject(j, "best_val_bpb", t->best_val_bpb);
    if (isfinite(t->tok_s)) cJSON_AddNumberToObject(j, "tok_s", t->tok_s);
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    char path[1100];
    snprintf(path, sizeof path, "%s/result.json", r->folder);
    int rc = write_file_atomic(path, text, e);
    free(text);
    read_metrics(r);
    return rc;
}

/* x with format, or "-" (results.md) / "" (results.csv) when it is not a number. */
static void put_num(FILE *f, double x, const char *format, const char *none) {
    if (isfinite(x))
        fprintf(f, format, x);
    else
        fputs(none, f);
}

/* A CSV field, quoted when it holds a comma, a quote or a line break. */
static void put_csv(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* A run's value on an axis, as the option table prints it ("128:16" linked). */
static void axis_value(const Config *c, const GridAxis *ax, char *buf, size_t size) {
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; i < ax->n_opts && k < size; i++) {
        char one[320];
        k += (size_t)snprintf(buf + k, size - k, "%s%s", i ? ":" : "", option_format(c, ax->opts[i], one, sizeof one));
    }
}

/* A table's header: `first`, a column per axis, then `rest` (markdown
 * columns; CSV names); n_rest columns after the axes. */
static void table_header(const Grid *g, FILE *md, FILE *csv, const char *first, const char *rest_md,
                         const char *rest_csv, int n_rest) {
    fprintf(md, "| %s |", first);
    fprintf(csv, "%s,", first);
    for (int a = 0; a < g->n_axes; a++) {
        fprintf(md, " %s |", g->axes[a].name);
        put_csv(csv, g->axes[a].name);
        fputc(',', csv);
    }
    fprintf(md, " %s |\n|---|", rest_md);
    fprintf(csv, "%s\n", rest_csv);
    for (int a = 0; a < g->n_axes + n_rest; a++) fputs("---|", md);
    fputc('\n', md);
}

/* A row's first cell, name, then its value on each axis ("-" for the baseline). */
static void row_start(const Grid *g, const GridRun *r, const char *name, FILE *md, FILE *csv) {
    fprintf(md, "| %s |", name);
    put_csv(csv, name);
    fputc(',', csv);
    for (int a = 0; a < g->n_axes; a++) {
        char v[320] = "-";
        if (r->values[a]) axis_value(&r->cfg, &g->axes[a], v, sizeof v);
        fprintf(md, " %s |", v);
        put_csv(csv, v);
        fputc(',', csv);
    }
}

/* The final val bpb of point p's runs that finished without diverging. */
static Summary point_summary(const GridRun *runs, int n, int p) {
    double x[GRID_MAX_SEEDS];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (runs[i].point == p && !runs[i].skipped && runs[i].result.status == TRAIN_DONE &&
            isfinite(runs[i].result.val_bpb) && k < GRID_MAX_SEEDS)
            x[k++] = runs[i].result.val_bpb;
    return summarize(x, k);
}

/* The first run of each point, and which point is the baseline (-1: none). */
static int points_of(const GridRun *runs, int n, const GridRun **first, int *baseline) {
    int n_points = 0;
    *baseline = -1;
    for (int i = 0; i < n; i++)
        if (runs[i].seed_index == 0) {
            first[n_points] = &runs[i];
            if (!runs[i].values[0]) *baseline = n_points;
            n_points++;
        }
    return n_points;
}

/* One row per point: mean, sd, interval, and the difference from the baseline. */
/* The effect of each axis: every two points that differ on that axis alone,
 * the later value minus the earlier, with Welch's interval. */
static void effects_table(const Grid *g, const GridRun *runs, int n, const GridRun *const *first, int n_points,
                          FILE *md) {
    bool any = false;
    for (int a = 0; a < g->n_axes; a++) any = any || g->axes[a].n > 1;
    if (!any) return;
    fputs("\nThe effect of each axis: every two points that differ on that axis alone, the later value "
          "minus the earlier (final val bpb), with Welch's 95% interval.\n\n"
          "| axis | from | to | other axes | difference | 95% interval | differs |\n"
          "|---|---|---|---|---|---|---|\n",
          md);
    for (int a = 0; a < g->n_axes; a++)
        for (int p = 0; p < n_points; p++)
            for (int q = p + 1; q < n_points; q++) {
                const GridRun *x = first[p], *y = first[q];
                if (!x->values[0] || !y->values[0] || x->skipped || y->skipped || !strcmp(x->values[a], y->values[a]))
                    continue;
                bool alone = true;
                for (int b = 0; b < g->n_axes; b++) alone = alone && (b == a || !strcmp(x->values[b], y->values[b]));
                if (!alone) continue;
                char others[256] = "";
                size_t k = 0;
                for (int b = 0; b < g->n_axes && k < sizeof others; b++)
                    if (b != a)
                        k += (size_t)snprintf(others + k, sizeof others - k, "%s%s=%s", k ? "," : "", g->axes[b].name,
                                              x->values[b]);
                Summary sx = point_summary(runs, n, p), sy = point_summary(runs, n, q);
                Difference d = difference(&sy, &sx);
                fprintf(md, "| %s | %s | %s | %s | ", g->axes[a].name, x->values[a], y->values[a], k ? others : "-");
                put_num(md, d.diff, "%+.4f", "-");
                if (isfinite(d.half))
                    fprintf(md, " | [%+.4f, %+.4f] | %s |\n", d.diff - d.half, d.diff + d.half,
                            d.excludes_zero ? "yes" : "no");
                else
                    fputs(" | - | - |\n", md);
            }
}

static void summary_tables(const Grid *g, const GridRun *runs, int n, FILE *md, FILE *csv) {
    static const GridRun *first[GRID_MAX_RUNS + 1];
    int baseline, n_points = points_of(runs, n, first, &baseline);
    Summary base = baseline >= 0 ? point_summary(runs, n, baseline) : (Summary){0};
    fprintf(md, "%d seeds per point (seed %lld on); final val bpb over each point's finished runs, with 95%% "
                "intervals (t); the difference from the baseline with Welch's interval.\n\n",
            g->seeds, (long long)g->base.train.seed);
    table_header(g, md, csv, "point", "runs | mean | sd | 95% interval | minus baseline | 95% interval | differs",
                 "runs,mean,sd,low,high,minus_baseline,diff_low,diff_high,differs", 7);
    for (int p = 0; p < n_points; p++) {
        const GridRun *r = first[p];
        if (r->skipped) continue;
        Summary s = point_summary(runs, n, p);
        Difference d = baseline >= 0 && p != baseline ? difference(&s, &base) : (Difference){NAN, NAN, false, NAN, NAN};
        char name[256];
        snprintf(name, sizeof name, "%s", r->name);
        char *cut = strstr(name, ",seed=");
        if (cut) *cut = '\0';
        row_start(g, r, name, md, csv);
        fprintf(md, " %d/%d | ", s.n, g->seeds);
        put_num(md, s.mean, "%.4f", "-");
        fputs(" | ", md);
        put_num(md, s.sd, "%.4f", "-");
        fputs(" | ", md);
        if (isfinite(s.half))
            fprintf(md, "[%.4f, %.4f]", s.mean - s.half, s.mean + s.half);
        else
            fputs("-", md);
        fputs(" | ", md);
        put_num(md, d.diff, "%+.4f", "-");
        fputs(" | ", md);
        if (isfinite(d.half))
            fprintf(md, "[%+.4f, %+.4f] | %s |\n", d.diff - d.half, d.diff + d.half, d.excludes_zero ? "yes" : "no");
        else
            fputs("- | - |\n", md);
        fprintf(csv, "%d,", s.n);
        put_num(csv, s.mean, "%.6f,", ",");
        put_num(csv, s.sd, "%.6f,", ",");
        put_num(csv, s.mean - s.half, "%.6f,", ",");
        put_num(csv, s.mean + s.half, "%.6f,", ",");
        put_num(csv, d.diff, "%.6f,", ",");
        put_num(csv, d.diff - d.half, "%.6f,", ",");
        put_num(csv, d.diff + d.half, "%.6f,", ",");
        fputs(isfinite(d.half) ? (d.excludes_zero ? "yes\n" : "no\n") : "\n", csv);
    }
    effects_table(g, runs, n, first, n_points, md);
    fputs("\nEvery run:\n\n", md);
}

void grid_tables(const Grid *g, const GridRun *runs, int n, char **md_out, char **csv_out, char **summary_out) {
    size_t md_len, csv_len, sum_len;
    char *sum_text = NULL;
    FILE *md = open_memstream(md_out, &md_len), *csv = open_memstream(csv_out, &csv_len);
    FILE *sum = open_memstream(&sum_text, &sum_len);
    if (!md || !csv || !sum) DIE("out of memory");
    if (g->seeds > 1) summary_tables(g, runs, n, md, sum);
    table_header(g, md, csv, "run", "final val bpb | best val bpb | diverged at | clamped denominators | tok/s | params",
                 "final_val_bpb,best_val_bpb,diverged_step,den_clamped,tok_s,status,params", 6);
    for (int i = 0; i < n; i++) {
        const GridRun *r = &runs[i];
        if (r->skipped) continue;
        const TrainResult *t = &r->result;
        bool diverged = t->status == TRAIN_DIVERGED, failed = t->status == TRAIN_FAILED;
        row_start(g, r, r->name, md, csv);
        fputc(' ', md);
        put_num(md, t->val_bpb, "%.4f", "-");
        fputs(" | ", md);
        put_num(md, t->best_val_bpb, "%.4f", "-");
        fputs(" | ", md);
        put_num(md, diverged ? (double)t->diverged_step : NAN, "%.0f", "-");
        fputs(" | ", md);
        put_num(md, 100 * r->den_clamped, "%.2f%%", "-");
        fputs(" | ", md);
        put_num(md, t->tok_s, "%.0f", "-");
        long params = model_param_count(&r->cfg.model);
        fprintf(md, " | %ld |\n", params);
        put_num(csv, t->val_bpb, "%.6f,", ",");
        put_num(csv, t->best_val_bpb, "%.6f,", ",");
        put_num(csv, diverged ? (double)t->diverged_step : NAN, "%.0f,", ",");
        put_num(csv, r->den_clamped, "%.6f,", ",");
        put_num(csv, t->tok_s, "%.0f,", ",");
        fprintf(csv, "%s,%ld\n", diverged ? "diverged" : failed ? "failed" : "done", params);
    }
    bool any_failed = false;
    for (int i = 0; i < n; i++) any_failed |= !runs[i].skipped && runs[i].result.status == TRAIN_FAILED;
    if (any_failed) {
        fputs("\nFailed (running the command again retries them):\n\n", md);
        for (int i = 0; i < n; i++)
            if (!runs[i].skipped && runs[i].result.status == TRAIN_FAILED)
                fprintf(md, "- %s: %s\n", runs[i].name, runs[i].result.why);
    }
    bool any_skipped = false;
    for (int i = 0; i < n; i++) any_skipped |= runs[i].skipped;
    if (any_skipped) {
        fputs("\nSkipped, because the combination cannot work:\n\n", md);
        for (int i = 0; i < n; i++)
            if (runs[i].skipped) fprintf(md, "- %s: %s\n", runs[i].name, runs[i].why);
    }
    if (fclose(md) != 0 || fclose(csv) != 0 || fclose(sum) != 0) DIE("out of memory");
    if (summary_out)
        *summary_out = sum_text;
    else
        free(sum_text);
}

/* Point p's mean curve and the curves one sd above and below, over the
 * steps its runs all reached (they share a budget, so the same steps). */
static int mean_curve(const GridRun *runs, int n, int p, double *steps, double *mean, double *lo, double *hi, int cap) {
    const GridRun *in[GRID_MAX_SEEDS];
    int k = 0, len = cap;
    for (int i = 0; i < n; i++)
        if (runs[i].point == p && !runs[i].skipped && runs[i].n_points && k < GRID_MAX_SEEDS) {
            in[k++] = &runs[i];
            if (runs[i].n_points < len) len = runs[i].n_points;
        }
    if (!k) return 0;
    for (int j = 0; j < len; j++) {
        double x[GRID_MAX_SEEDS];
        for (int r = 0; r < k; r++) x[r] = in[r]->bpb[j];
        Summary s = summarize(x, k);
        steps[j] = in[0]->steps[j];
        mean[j] = s.mean;
        lo[j] = k > 1 ? s.mean - s.sd : NAN;
        hi[j] = k > 1 ? s.mean + s.sd : NAN;
    }
    return len;
}

int grid_write_outputs(const char *dir, const Grid *g, const GridRun *runs, int n, Err *e) {
    char *md, *csv, *summary, path[1100];
    grid_tables(g, runs, n, &md, &csv, &summary);
    snprintf(path, sizeof path, "%s/results.md", dir);
    int rc = write_file_atomic(path, md, e);
    snprintf(path, sizeof path, "%s/results.csv", dir);
    if (rc == 0) rc = write_file_atomic(path, csv, e);
    snprintf(path, sizeof path, "%s/summary.csv", dir);
    if (rc == 0 && g->seeds > 1) rc = write_file_atomic(path, summary, e);
    free(md);
    free(csv);
    free(summary);
    if (rc != 0) return -1;
    PlotSeries *s = xmalloc(3 * (size_t)n * sizeof *s);
    double *buf = NULL;
    char (*labels)[256] = NULL;
    int k = 0;
    if (g->seeds == 1) {
        for (int i = 0; i < n; i++)
            if (!runs[i].skipped && runs[i].n_points)
                s[k++] = (PlotSeries){runs[i].name, runs[i].steps, runs[i].bpb, runs[i].n_points, 0};
    } else {
        static const GridRun *first[GRID_MAX_RUNS + 1];
        int baseline, n_points = points_of(runs, n, first, &baseline), cap = 0;
        for (int i = 0; i < n; i++) cap = runs[i].n_points > cap ? runs[i].n_points : cap;
        buf = xmalloc((size_t)n_points * 4 * ((size_t)cap + 1) * sizeof *buf);
        labels = xmalloc((size_t)n_points * sizeof *labels);
        for (int p = 0; p < n_points; p++) {
            double *st = buf + (size_t)p * 4 * ((size_t)cap + 1), *mean = st + cap + 1, *lo = mean + cap + 1,
                   *hi = lo + cap + 1;
            int len = cap ? mean_curve(runs, n, p, st, mean, lo, hi, cap) : 0;
            if (!len) continue;
            snprintf(labels[p], sizeof labels[p], "%s", first[p]->name);
            char *cut = strstr(labels[p], ",seed=");
            if (cut) *cut = '\0';
            s[k++] = (PlotSeries){labels[p], st, mean, len, 0};
            s[k++] = (PlotSeries){NULL, st, lo, len, 1};
            s[k++] = (PlotSeries){NULL, st, hi, len, 1};
        }
    }
    snprintf(path, sizeof path, "%s/curves.png", dir);
    char name[256], title[320];
    run_name_of(dir, name, sizeof name);
    plot_title(title, sizeof title, name, g->seeds > 1 ? "val bpb, mean of the seeds (faint: +- 1 sd)" : "val bpb");
    /* more than four curves: the legend beside the plot, not over the curves */
    int labelled = 0;
    for (int i = 0; i < k; i++) labelled += !s[i].faint;
    PlotSpec spec = {title, "step", "val bpb", 0, 0, labelled > 4 ? 1300 : 0, 0, labelled > 4};
    rc = k ? plot_lines(path, &spec, s, k, e) : 0;
    free(s);
    free(buf);
    free(labels);
    return rc;
}
