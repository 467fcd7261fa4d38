/* grid_report.c: an ablation grid's report (grid_report.h): results.md,
 * results.csv, summary.csv and curves.png, from the runs' results. */
#include "grid_report.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory.h"
#include "plot.h"
#include "run.h"
#include "stats.h"

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
