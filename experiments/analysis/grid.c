/* grid.c: an ablation grid's plan: its axes, its runs and what their run
 * folders hold. The tables and the plot made from the results are in
 * grid_report.c. */
#include "grid.h"

#include <cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lines.h"
#include "provenance.h"
#include "run.h"

void grid_init(Grid *g) {
    memset(g, 0, sizeof *g);
    config_defaults(&g->base);
    g->seeds = 1;
    g->within = 0.02;
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

/* The ',' in [s, end) that starts the next term: the first one followed
 * (after spaces) by an axis name and '='; NULL when none. Any other comma
 * belongs to the value (linformer_k=64,16 is one term). */
static const char *next_term(const Grid *g, const char *s, const char *end) {
    for (const char *c = memchr(s, ',', (size_t)(end - s)); c; c = memchr(c + 1, ',', (size_t)(end - c - 1))) {
        const char *k = c + 1;
        while (k < end && *k == ' ') k++;
        for (int a = 0; a < g->n_axes; a++) {
            size_t n = strlen(g->axes[a].name);
            if ((size_t)(end - k) > n && !strncmp(k, g->axes[a].name, n) && k[n] == '=') return c;
        }
    }
    return NULL;
}

/* One side of a claim, [s, end) without the spaces around it: "baseline", or
 * key=value terms joined by ','; into c->value[side] and c->baseline[side]. */
static int claim_side(const Grid *g, GridClaim *c, int side, const char *s, const char *end, Err *e) {
    while (s < end && *s == ' ') s++;
    while (end > s && end[-1] == ' ') end--;
    for (int a = 0; a < GRID_MAX_AXES; a++) c->value[side][a] = -1;
    if (s == end) return err_set(e, "--expect \"%s\": a side is empty", c->text);
    if ((size_t)(end - s) == 8 && !strncmp(s, "baseline", 8)) return c->baseline[side] = true, 0;
    while (s < end) {
        while (*s == ' ') s++; /* "phi=relu, reweight=cos" */
        const char *comma = next_term(g, s, end), *stop = comma ? comma : end;
        while (stop > s && stop[-1] == ' ') stop--;
        const char *eq = memchr(s, '=', (size_t)(stop - s));
        int len = (int)(stop - s);
        if (!eq) return err_set(e, "--expect \"%s\": '%.*s' is not key=value (nor baseline)", c->text, len, s);
        int a = 0, klen = (int)(eq - s);
        while (a < g->n_axes && ((int)strlen(g->axes[a].name) != klen || strncmp(g->axes[a].name, s, (size_t)klen))) a++;
        if (a == g->n_axes) return err_set(e, "--expect \"%s\": '%.*s' is not an axis of the grid", c->text, klen, s);
        if (c->value[side][a] >= 0) return err_set(e, "--expect \"%s\": %.*s given twice on one side", c->text, klen, s);
        const GridAxis *ax = &g->axes[a];
        int v = 0, vlen = (int)(stop - eq - 1);
        while (v < ax->n && ((int)strlen(ax->values[v]) != vlen || strncmp(ax->values[v], eq + 1, (size_t)vlen))) v++;
        if (v == ax->n)
            return err_set(e, "--expect \"%s\": '%.*s' is not a value of the axis %s", c->text, len, s, ax->name);
        c->value[side][a] = v;
        s = comma ? comma + 1 : end;
    }
    return 0;
}

int grid_expect(Grid *g, const char *text, Err *e) {
    if (g->n_claims == GRID_MAX_CLAIMS) return err_set(e, "--expect: more than %d claims", GRID_MAX_CLAIMS);
    GridClaim c = {.baseline = {false, false}};
    if (strlen(text) >= sizeof c.text) return err_set(e, "--expect \"%.40s...\": too long", text);
    snprintf(c.text, sizeof c.text, "%s", text);
    const char *lt = strchr(text, '<'), *gt = strchr(text, '>'), *op = lt ? lt : gt;
    if (!op || (lt && gt) || strchr(op + 1, *op))
        return err_set(e, "--expect \"%s\": not one '<' or '>' between two points", text),
               err_hint(e, "--expect \"reweight=cos < reweight=none\" (lower val bpb is better)");
    /* side 0 is the one claimed lower */
    int left = *op == '<' ? 0 : 1;
    if (claim_side(g, &c, left, text, op, e) != 0 || claim_side(g, &c, 1 - left, op + 1, text + strlen(text), e) != 0)
        return -1;
    if (c.baseline[0] && c.baseline[1]) return err_set(e, "--expect \"%s\": the baseline on both sides", text);
    bool same = c.baseline[0] == c.baseline[1];
    for (int a = 0; a < g->n_axes && !c.baseline[0] && !c.baseline[1]; a++) {
        if ((c.value[0][a] < 0) != (c.value[1][a] < 0))
            return err_set(e, "--expect \"%s\": %s is named on one side only", text, g->axes[a].name),
                   err_hint(e, "both sides name the same axes, e.g. \"phi=relu,reweight=cos < phi=relu,reweight=none\"");
        same = same && c.value[0][a] == c.value[1][a];
    }
    if (same) return err_set(e, "--expect \"%s\": the same points on both sides", text);
    g->claims[g->n_claims++] = c;
    return 0;
}

/* Folder-safe form of a run name (grid.h). */
void grid_folder_name(const char *name, char *out, size_t size) {
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < size; p++)
        out[k++] = (*p == '=' ? '-' : *p == ',' || *p == ' ' ? '_' : *p == '/' ? '-' : *p == ':' ? '+' : *p);
    out[k] = '\0';
}

void grid_default_dir(const Grid *g, char *dir, size_t size) {
    size_t k = (size_t)snprintf(dir, size, "runs/ablate");
    for (int a = 0; a < g->n_axes && k < size; a++) {
        char name[128];
        grid_folder_name(g->axes[a].name, name, sizeof name);
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
        grid_folder_name(r->name, folder, sizeof folder);
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
    /* a value given twice (or two that name one folder) would train two runs into one folder */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(runs[i].folder, runs[j].folder)) {
                err_set(e, "%s and %s: one run folder, %s", runs[j].name, runs[i].name, runs[i].folder),
                    err_hint(e, "give each value of an axis once");
                free(runs);
                return -1;
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

/* The validation curve and the mean clamped-denominator fraction from
 * metrics.jsonl, read a bounded line at a time (lines.h): a line that is not
 * JSON is skipped, an over-long line or a read error is an error (-1 with e
 * set), never the end of the curve; and where the run ran from
 * provenance.json. */
static int read_metrics(GridRun *run, Err *e) {
    char path[1100];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run->folder);
    free(run->steps), free(run->bpb);
    run->steps = run->bpb = NULL;
    run->n_points = 0;
    run->den_clamped = NAN;
    run->time_s = run->logged_tok_s = NAN;
    LineReader lr;
    if (line_open(&lr, path, LINE_MAX_BYTES, e) != 0)
        return errno == ENOENT ? 0 : -1; /* no curve: the table still has the result */
    int cap = 0, n_clamped = 0, got, n_rates = 0, rates_cap = 0;
    double clamped = 0, *rates = NULL;
    while ((got = line_next(&lr, e)) > 0) {
        cJSON *j = cJSON_Parse(lr.line);
        if (!j) continue;
        double s = number(j, "step"), v = number(j, "val_bpb"), d = number(j, "den_clamped"), t = number(j, "time_s");
        if (isfinite(t)) run->time_s = t;
        double k = number(j, "tok_s");
        if (isfinite(k) && k > 0) {
            if (n_rates == rates_cap) {
                rates_cap = rates_cap ? 2 * rates_cap : 64;
                if (!(rates = realloc(rates, (size_t)rates_cap * sizeof *rates))) DIE("out of memory");
            }
            rates[n_rates++] = k;
        }
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
    line_close(&lr);
    if (n_clamped) run->den_clamped = clamped / n_clamped;
    if (n_rates) run->logged_tok_s = median_of(rates, n_rates);
    free(rates);
    /* where it ran, beside its curve (a file not ours counts as unrecorded) */
    if (provenance_read(run->folder, run->kernel, sizeof run->kernel, run->commit, sizeof run->commit,
                        &run->kernel_mixed) < 0)
        run->kernel[0] = run->commit[0] = '\0', run->kernel_mixed = false;
    return got < 0 ? -1 : 0;
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
    /* whole numbers in a long's range, or 0: a forged 1e300 is never cast */
    if (!whole_in_range(number(res, "step"), 0, LONG_MAX, &t->step)) t->step = 0;
    if (!whole_in_range(number(res, "diverged_step"), 0, LONG_MAX, &t->diverged_step)) t->diverged_step = 0;
    t->val_bpb = number(res, "val_bpb");
    t->best_val_bpb = number(res, "best_val_bpb");
    t->tok_s = number(res, "tok_s");
    cJSON_Delete(res);
    if (read_metrics(r, e) != 0) return err_hint(e, "the run's curve cannot be read; remove the folder to train the run again");
    return GRID_FINISHED;
}

int grid_record(GridRun *r, Err *e) {
    TrainResult *t = &r->result;
    /* a finished run opened again (one ./train trained into the grid's
     * folder) trains no step: its throughput is its metrics lines' */
    if (read_metrics(r, e) != 0) return -1;
    if (!isfinite(t->tok_s)) t->tok_s = r->logged_tok_s;
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
    return rc;
}

int grid_record_logged(GridRun *r, Err *e) {
    if (read_metrics(r, e) != 0) return -1;
    if (!r->n_points || r->steps[r->n_points - 1] != (double)r->cfg.train.steps) return 1;
    TrainResult *t = &r->result;
    memset(t, 0, sizeof *t);
    t->status = TRAIN_DONE;
    t->step = r->cfg.train.steps;
    t->val_bpb = t->best_val_bpb = r->bpb[r->n_points - 1];
    for (int i = 0; i < r->n_points; i++)
        if (r->bpb[i] < t->best_val_bpb) t->best_val_bpb = r->bpb[i];
    t->tok_s = NAN; /* grid_record takes the logged lines' median */
    return grid_record(r, e) != 0 ? -1 : 0;
}

bool grid_plateau(const GridRun *r, char *why, size_t size) {
    double level = r->cfg.model.objective == OBJECTIVE_MLM ? 3.9 : 3.3;
    double final = r->n_points ? r->bpb[r->n_points - 1] : r->result.val_bpb;
    double left = 0; /* the first evaluated step below the level */
    for (int i = 0; i < r->n_points && !left; i++)
        if (r->bpb[i] < level) left = r->steps[i];
    if (r->n_points && !left)
        snprintf(why, size, "never below the plateau level");
    else if (final > level)
        snprintf(why, size, "ends above the plateau level");
    else if (left > 0.75 * r->cfg.train.steps)
        snprintf(why, size, "below the plateau level only from step %.0f of %d", left, r->cfg.train.steps);
    else
        return false;
    return true;
}

int grid_read_folder(GridRun *r, const char *folder, Err *e) {
    memset(r, 0, sizeof *r);
    config_defaults(&r->cfg);
    snprintf(r->folder, sizeof r->folder, "%s", folder);
    cJSON *json;
    if (read_json(folder, "config.json", &json, e) != 0) return -1;
    /* the whole config when it parses (a run of this version), else what the
     * verdicts need: its objective, steps and lr */
    cJSON *whole = cJSON_Duplicate(json, true);
    cJSON_DeleteItemFromObject(whole, "corpus");
    cJSON_DeleteItemFromObject(whole, "ranks");
    cJSON_DeleteItemFromObject(whole, "effective_batch");
    Err ignored;
    Config full;
    config_defaults(&full);
    if (whole && config_from_json(&full, whole, &ignored) == 0) r->cfg = full;
    cJSON_Delete(whole);
    const cJSON *o = cJSON_GetObjectItem(json, "objective");
    if (cJSON_IsString(o) && !strcmp(o->valuestring, "mlm")) r->cfg.model.objective = OBJECTIVE_MLM;
    long steps; /* range-checked before it becomes an int: a forged 1e300 is never cast */
    if (whole_in_range(number(json, "steps"), 1, INT_MAX, &steps)) r->cfg.train.steps = (int)steps;
    double lr = number(json, "lr"); /* 0: an initialisation (./spectrum --paired) */
    if (isfinite(lr) && fabs(lr) <= FLT_MAX) r->cfg.train.lr = (float)lr;
    cJSON_Delete(json);
    if (read_metrics(r, e) != 0) return -1;
    if (!r->n_points) return 0; /* not evaluated yet: no final value */
    r->result.status = TRAIN_DONE;
    r->result.val_bpb = r->bpb[r->n_points - 1];
    /* result.json's value, unrounded, when there is one: the grid's tables use it */
    if (read_json(folder, "result.json", &json, &ignored) == 0 && json) {
        double v = number(json, "val_bpb");
        if (isfinite(v) && fabs(v - r->result.val_bpb) < 1e-5) r->result.val_bpb = v;
        cJSON_Delete(json);
    }
    return 0;
}

int grid_train(GridRun *r, const char *corpus, bool unfinished, const char *label, bool plain_progress) {
    char ckpt[1100];
    snprintf(ckpt, sizeof ckpt, "%s/model.safetensors", r->folder);
    TrainJob job = {.cfg = r->cfg, .corpus = corpus, .run_dir = r->folder,
                    .resume = unfinished && file_exists(ckpt), .label = label, .quiet = true,
                    .plain_progress = plain_progress};
    Err e;
    if (train_run(&job, &r->result, &e) == 0) {
        if (r->result.status == TRAIN_INTERRUPTED) return 1;
        if (r->result.status == TRAIN_DIVERGED)
            printf("run %s diverged at step %ld; going on\n", r->name, r->result.diverged_step);
        if (grid_record(r, &e) == 0) return 0; /* else: the run is trained, but not recorded */
    }
    r->result.status = TRAIN_FAILED;
    snprintf(r->result.why, sizeof r->result.why, "%s", e.msg);
    printf("run %s failed: %s; going on\n", r->name, e.msg);
    return -1;
}

static int by_seed(const void *a, const void *b) {
    long long x = ((const GridArmRun *)a)->seed, y = ((const GridArmRun *)b)->seed;
    return (x > y) - (x < y);
}

int grid_arm_folders(const char *arm, GridArmRun *out, int max, Err *e) {
    char dir[1024], prefix[512];
    const char *slash = strrchr(arm, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - arm) : 1, slash ? arm : ".");
    snprintf(prefix, sizeof prefix, "%s_seed-", slash ? slash + 1 : arm);
    DIR *d = opendir(dir);
    if (!d) return err_set(e, "%s: no such grid folder", dir);
    int n = 0, rc = 0;
    size_t len = strlen(prefix);
    struct dirent *ent;
    while ((ent = readdir(d))) {
        const char *tail = ent->d_name + len;
        if (strncmp(ent->d_name, prefix, len) || !*tail || strspn(tail, "0123456789") != strlen(tail) ||
            strlen(tail) > 18)
            continue;
        if (n == max) {
            rc = err_set(e, "%s: more than %d runs", arm, max);
            break;
        }
        snprintf(out[n].folder, sizeof out[n].folder, "%s/%s", dir, ent->d_name);
        out[n++].seed = atoll(tail);
    }
    closedir(d);
    if (rc == 0 && !n) rc = err_set(e, "%s: no runs (%s<n> in %s)", arm, prefix, dir);
    if (rc != 0) return -1;
    qsort(out, (size_t)n, sizeof *out, by_seed);
    return n;
}
