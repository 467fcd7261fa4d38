/* extrapolate_report.c: what ./extrapolate writes (extrapolate.h): the
 * table of bpb by length, the groups of seeds with their intervals,
 * extrapolate.csv, extrapolate-summary.csv and extrapolate.png. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "extrapolate.h"
#include "page.h"
#include "plot.h"
#include "run.h"
#include "stats.h"

/* Appends s to the CSV, quoted when it holds a comma, quote or newline. */
static size_t csv_field(char *buf, size_t cap, size_t len, const char *s) {
    if (!strpbrk(s, ",\"\n")) return len + (size_t)snprintf(buf + len, cap - len, "%s", s);
    len += (size_t)snprintf(buf + len, cap - len, "\"");
    for (const char *c = s; *c; c++) len += (size_t)snprintf(buf + len, cap - len, *c == '"' ? "\"\"" : "%c", *c);
    return len + (size_t)snprintf(buf + len, cap - len, "\"");
}

static void format_ratio(char *buf, size_t size, int T, int context) {
    snprintf(buf, size, "%.4g", (double)T / context);
}

/* Whether every variant has the same training context (then the ratio is
 * in the table's header and the plot's title). */
static bool same_context(const Job *j) {
    for (int i = 0; i < j->nv; i++)
        if (j->vs[i].cfg.model.context != j->vs[0].cfg.model.context) return false;
    return true;
}

/* The table: rows = variants, columns = lengths. */
static void print_table(const Job *j) {
    int ctx0 = j->vs[0].cfg.model.context, width = 7;
    bool same_ctx = same_context(j);
    for (int i = 0; i < j->nv; i++) {
        int n = (int)strlen(j->vs[i].label);
        if (n > width) width = n;
    }
    printf("\nbits per byte on the held-out split, by length%s\n", same_ctx ? " (x the training context)" : "");
    printf("%-*s  %-12s %7s", width, "variant", "pos", "context");
    for (int l = 0; l < j->nl; l++) {
        char head[48], r[16];
        format_ratio(r, sizeof r, j->lengths[l], ctx0);
        if (same_ctx)
            snprintf(head, sizeof head, "%d (%sx)", j->lengths[l], r);
        else
            snprintf(head, sizeof head, "%d", j->lengths[l]);
        printf("  %12s", head);
    }
    printf("\n");
    for (int i = 0; i < j->nv; i++) {
        const Variant *v = &j->vs[i];
        char posbuf[32];
        printf("%-*s  %-12s %7d", width, v->label, option_format(&v->cfg, option_find("pos"), posbuf, sizeof posbuf),
               v->cfg.model.context);
        for (int l = 0; l < j->nl; l++) {
            if (isfinite(v->bpb[l]))
                printf("  %12.4f", v->bpb[l]);
            else
                printf("  %12s", "n/a");
        }
        printf("\n");
    }
}

/* The groups of seeds: the variants of each (runs), its key and label, and
 * per length its mean and 95% interval (sum[g * nl + l]). */
typedef struct {
    int n;
    int *runs;
    char (*keys)[1200], (*labels)[1300];
    Summary *sum;
} Groups;

static Groups make_summaries(Job *j) {
    Groups gr;
    gr.runs = xmalloc((size_t)j->nv * sizeof *gr.runs);
    gr.keys = xmalloc((size_t)j->nv * sizeof *gr.keys);
    gr.labels = xmalloc((size_t)j->nv * sizeof *gr.labels);
    gr.n = xp_make_groups(j->vs, j->nv, gr.runs, gr.keys);
    gr.sum = xcalloc((size_t)gr.n * j->nl, sizeof *gr.sum);
    for (int g = 0; g < gr.n; g++) {
        snprintf(gr.labels[g], sizeof gr.labels[g], "%s (%d run%s)", gr.keys[g], gr.runs[g], gr.runs[g] == 1 ? "" : "s");
        for (int l = 0; l < j->nl; l++) {
            double xs[64];
            int n = 0;
            for (int i = 0; i < j->nv; i++)
                if (j->vs[i].group == g && isfinite(j->vs[i].bpb[l]) && n < 64) xs[n++] = j->vs[i].bpb[l];
            gr.sum[(long)g * j->nl + l] = n ? summarize(xs, n) : (Summary){0, NAN, NAN, NAN};
        }
    }
    return gr;
}

static void groups_free(Groups *gr) { free(gr->runs), free(gr->keys), free(gr->labels), free(gr->sum); }

/* The second table, for groups of more than one: mean +- the 95% interval. */
static void print_groups(const Job *j, const Groups *gr) {
    int gw = 7;
    for (int g = 0; g < gr->n; g++) gw = (int)strlen(gr->keys[g]) + 10 > gw ? (int)strlen(gr->keys[g]) + 10 : gw;
    printf("\nthe runs of each group (their names differ only in _seed-N): mean +- the 95%% interval (t)\n");
    printf("%-*s", gw, "group");
    for (int l = 0; l < j->nl; l++) printf("  %18d", j->lengths[l]);
    printf("\n");
    for (int g = 0; g < gr->n; g++) {
        printf("%-*s", gw, gr->labels[g]);
        for (int l = 0; l < j->nl; l++) {
            const Summary *s = &gr->sum[(long)g * j->nl + l];
            char cell[48];
            if (!s->n)
                snprintf(cell, sizeof cell, "n/a");
            else if (isfinite(s->half))
                snprintf(cell, sizeof cell, "%.4f +- %.4f", s->mean, s->half);
            else
                snprintf(cell, sizeof cell, "%.4f", s->mean);
            printf("  %18s", cell);
        }
        printf("\n");
    }
}

/* extrapolate.csv, one row per variant and length. */
static char *variants_csv(const Job *j) {
    size_t cap = 128, len = 0; /* a quoted label is at most twice its length plus 2 */
    for (int i = 0; i < j->nv; i++) cap += (size_t)j->nl * (2 * strlen(j->vs[i].label) + 200);
    char *csv = xmalloc(cap);
    len += (size_t)snprintf(csv, cap, "label,pos,train_context,length,ratio,bpb,windows,bytes\n");
    for (int i = 0; i < j->nv; i++) {
        const Variant *v = &j->vs[i];
        char posbuf[32], r[16], bpb[32];
        option_format(&v->cfg, option_find("pos"), posbuf, sizeof posbuf);
        for (int l = 0; l < j->nl; l++) {
            format_ratio(r, sizeof r, j->lengths[l], v->cfg.model.context);
            if (isfinite(v->bpb[l]))
                snprintf(bpb, sizeof bpb, "%.9f", v->bpb[l]);
            else
                bpb[0] = '\0';
            len = csv_field(csv, cap, len, v->label);
            len += (size_t)snprintf(csv + len, cap - len, ",%s,%d,%d,%s,%s,%ld,%ld\n", posbuf, v->cfg.model.context,
                                    j->lengths[l], r, bpb, v->windows[l], v->bytes[l]);
        }
    }
    return csv;
}

/* extrapolate-summary.csv, one row per group and length. */
static char *groups_csv(const Job *j, const Groups *gr) {
    size_t cap = 128 + (size_t)gr->n * j->nl * (2 * 1200 + 160), len = 0;
    char *sum = xmalloc(cap);
    len += (size_t)snprintf(sum, cap, "group,length,runs,mean,sd,low,high\n");
    for (int g = 0; g < gr->n; g++)
        for (int l = 0; l < j->nl; l++) {
            const Summary *s = &gr->sum[(long)g * j->nl + l];
            len = csv_field(sum, cap, len, gr->keys[g]);
            len += (size_t)snprintf(sum + len, cap - len, ",%d,%d", j->lengths[l], s->n);
            if (s->n)
                len += (size_t)snprintf(sum + len, cap - len, ",%.9f", s->mean);
            else
                len += (size_t)snprintf(sum + len, cap - len, ",");
            if (isfinite(s->half))
                len += (size_t)snprintf(sum + len, cap - len, ",%.9f,%.9f,%.9f\n", s->sd, s->mean - s->half,
                                        s->mean + s->half);
            else
                len += (size_t)snprintf(sum + len, cap - len, ",,,\n");
        }
    return sum;
}

/* The plot's lines, into series (and their values into y, nv x nl or, when
 * grouped, 3 ng x nl): a line per variant, or each group's mean over faint
 * +- 1 sd lines. Returns the number of series. */
static int plot_series(const Job *j, const Groups *gr, bool grouped, const double *x, double *y, PlotSeries *series) {
    int nl = j->nl, n = 0;
    if (!grouped) {
        for (int i = 0; i < j->nv; i++) {
            for (int l = 0; l < nl; l++) y[(long)i * nl + l] = j->vs[i].bpb[l];
            series[n++] = (PlotSeries){j->vs[i].label, x, y + (long)i * nl, nl, 0};
        }
        return n;
    }
    for (int g = 0; g < gr->n; g++) {
        double *m = y + (long)g * 3 * nl, *lo = m + nl, *hi = lo + nl;
        for (int l = 0; l < nl; l++) {
            const Summary *s = &gr->sum[(long)g * nl + l];
            m[l] = s->n ? s->mean : NAN;
            lo[l] = isfinite(s->sd) ? s->mean - s->sd : NAN;
            hi[l] = isfinite(s->sd) ? s->mean + s->sd : NAN;
        }
        series[n++] = (PlotSeries){gr->labels[g], x, m, nl, 0};
        series[n++] = (PlotSeries){NULL, x, lo, nl, 1};
        series[n++] = (PlotSeries){NULL, x, hi, nl, 1};
    }
    return n;
}

/* extrapolate.png: titled with the run, or the grid of runs that --out names. */
static int write_plot(const Job *j, const Groups *gr, bool grouped, Err *e) {
    int nv = j->nv, nl = j->nl, rows = grouped ? 3 * gr->n : nv;
    double *x = xmalloc((size_t)nl * sizeof(double)), *y = xmalloc((size_t)rows * nl * sizeof(double));
    PlotSeries *series = xmalloc((size_t)rows * sizeof *series);
    for (int l = 0; l < nl; l++) x[l] = j->lengths[l];
    int n_series = plot_series(j, gr, grouped, x, y, series);
    char title[400], what[160], name[256];
    if (same_context(j))
        snprintf(what, sizeof what, "length extrapolation (trained at %d bytes)", j->vs[0].cfg.model.context);
    else
        snprintf(what, sizeof what, "length extrapolation");
    bool one_run = true;
    for (int i = 1; i < nv; i++) one_run = one_run && !strcmp(j->vs[i].name, j->vs[0].name);
    if (one_run)
        snprintf(name, sizeof name, "%.255s", j->vs[0].name);
    else if (j->out_arg)
        run_name_of(j->out_arg, name, sizeof name);
    else
        snprintf(name, sizeof name, "%d checkpoints", nv);
    plot_title(title, sizeof title, name, what);
    int shown = grouped ? gr->n : nv;
    PlotSpec spec = {title, "length in bytes (log scale)", "bits per byte (held-out)", 1, 0, shown > 4 ? 1200 : 0, 0,
                     shown > 4};
    int rc = plot_lines(j->png_path, &spec, series, n_series, e);
    free(x), free(y), free(series);
    return rc;
}

/* The tables, then the CSV(s) and the plot, each written to a temporary
 * file and renamed. The exit status. */
int xp_report(Job *j) {
    print_table(j);
    Groups gr = make_summaries(j);
    bool grouped = gr.n < j->nv;
    if (grouped) print_groups(j, &gr);
    char *csv = variants_csv(j), *sum = grouped ? groups_csv(j, &gr) : NULL;
    Err e;
    int status = 0;
    if (path_join(j->sum_path, sizeof j->sum_path, j->out_dir, "extrapolate-summary.csv", &e) != 0) {
        status = 2;
    } else if (make_dirs(j->out_dir, &e) != 0 || (j->lock < 0 && (j->lock = run_lock(j->out_dir, &e)) < 0) ||
               write_plot(j, &gr, grouped, &e) != 0 ||
               write_file_atomic(j->csv_path, csv, &e) != 0 || (grouped && write_file_atomic(j->sum_path, sum, &e) != 0)) {
        status = 1;
    } else {
        if (!grouped) unlink(j->sum_path); /* a summary from an earlier, grouped table would not match */
        if (grouped)
            printf("\nwrote %s, %s, %s\n", j->csv_path, j->sum_path, j->png_path);
        else
            printf("\nwrote %s, %s\n", j->csv_path, j->png_path);
        char why[200]; /* a run folder's page gets the extrapolation's chart */
        if (page_kind(j->out_dir, why, sizeof why) == PAGE_RUN) {
            if (page_write_run(j->out_dir, NULL, &e) != 0)
                status = 1;
            else
                printf("page: %s/index.html\n", j->out_dir);
        }
    }
    if (status != 0) err_print(&e);
    free(csv), free(sum);
    groups_free(&gr);
    return status;
}
