/* grid_report.c: an ablation grid's report (grid_report.h): results.md,
 * results.csv, summary.csv and curves.png, from the runs' results. */
#include "grid_report.h"

#include <math.h>
#include <stdio.h>
#include <unistd.h>
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

/* Whether run r finished with a final val bpb. */
static bool has_value(const GridRun *r) {
    return r && !r->skipped && r->result.status == TRAIN_DONE && isfinite(r->result.val_bpb);
}

/* Point p's runs by seed index (NULL where it has none). */
static void by_seed(const GridRun *runs, int n, int p, const GridRun **out) {
    for (int s = 0; s < GRID_MAX_SEEDS; s++) out[s] = NULL;
    for (int i = 0; i < n; i++)
        if (runs[i].point == p && runs[i].seed_index < GRID_MAX_SEEDS) out[runs[i].seed_index] = &runs[i];
}

/* How seed pairs are counted: the seed plan the intervals follow (stats.h;
 * no looks: one 95% interval over every pair), and whether a pair whose runs
 * ran under different kernels (provenance.h) counts. */
typedef struct {
    const SeedPlan *plan;
    bool mixed_kernels;
} PairRule;

static PairRule grid_rule(const Grid *g) { return (PairRule){&g->plan, g->mixed_kernels}; }

/* Whether runs x and y ran under different kernels, as far as they say: a
 * run that recorded none (made before runs did) differs from nothing. */
static bool kernels_differ(const GridRun *x, const GridRun *y) {
    return x->kernel_mixed || y->kernel_mixed || (x->kernel[0] && y->kernel[0] && strcmp(x->kernel, y->kernel));
}

/* A seed-matched difference b - a: over the seeds where both runs have a
 * value, neither is on the plateau (apart: those where both have a value
 * but one is on it) and, unless the rule allows them, both ran under one
 * kernel (mixed: those that did not); under a plan, over the first pairs of
 * the last look they reach, at the plan's level (beyond: the pairs past
 * it). With its power: the smallest difference the pairs resolve at 95%
 * with 80% power, and the pairs that would resolve the difference seen. */

static GridPaired paired_of(const GridRun *const *a, const GridRun *const *b, int n_seeds, const PairRule *rule) {
    double x[GRID_MAX_PAIRS] = {0}, y[GRID_MAX_PAIRS] = {0};
    GridPaired p = {.pairs = 0, .look = -1, .next_look = -1};
    char why[128];
    int found = 0;
    for (int s = 0; s < n_seeds && found < GRID_MAX_PAIRS; s++) {
        if (!has_value(a[s]) || !has_value(b[s])) continue;
        if (grid_plateau(a[s], why, sizeof why) || grid_plateau(b[s], why, sizeof why)) {
            p.apart++;
            continue;
        }
        if (!rule->mixed_kernels && kernels_differ(a[s], b[s])) {
            p.mixed++;
            continue;
        }
        x[found] = a[s]->result.val_bpb;
        y[found++] = b[s]->result.val_bpb;
    }
    const SeedPlan *plan = rule->plan;
    p.planned = plan && plan->n_looks;
    p.level = p.planned ? seed_plan_level(plan) : 0.95;
    p.pairs = found;
    if (p.planned) {
        p.look = seed_plan_look(plan, found);
        p.pairs = p.look >= 0 ? plan->looks[p.look] : found;
        p.beyond = found - p.pairs;
        p.next_look = p.look + 1 < plan->n_looks ? plan->looks[p.look + 1] : -1;
    }
    for (int i = 0; i < p.pairs; i++) p.diffs[i] = y[i] - x[i];
    p.d = paired_difference_at(y, x, p.pairs, p.level);
    if (p.planned && p.look < 0) p.d.half = NAN, p.d.excludes_zero = false; /* not at the first look yet */
    p.sd = p.pairs > 1 ? p.d.se * sqrt(p.pairs) : NAN;
    p.resolvable = min_resolvable(p.d.se, p.d.df);
    p.needed = isfinite(p.d.half) ? seeds_needed_paired(p.d.diff, p.sd, VERDICT_SEEDS_CAP) : -1;
    return p;
}

/* points p and q (b - a = q - p) of the grid, paired */
static GridPaired paired_points(const Grid *g, const GridRun *runs, int n, int p, int q) {
    const GridRun *a[GRID_MAX_SEEDS], *b[GRID_MAX_SEEDS];
    by_seed(runs, n, p, a);
    by_seed(runs, n, q, b);
    PairRule rule = grid_rule(g);
    return paired_of(a, b, GRID_MAX_SEEDS, &rule);
}

static const char PAIRED_MD[] = "paired | 95% interval | pairs | differs | resolves | pairs needed";
static const char PAIRED_CSV[] = "pairs,apart,paired_diff,paired_low,paired_high,paired_differs,resolvable,pairs_needed,"
                                 "mixed_kernels,beyond_look,interval_level";
#define PAIRED_COLUMNS 6

/* The paired columns of a row: the difference, its interval, the pairs (and
 * those set apart), whether it excludes 0, and the power. NULL: none. */
static void paired_cells(const GridPaired *p, FILE *md, FILE *csv) {
    if (!p) {
        fputs(" - | - | - | - | - | - |\n", md);
        if (csv) fputs(",,,,,,,,,,", csv);
        return;
    }
    bool interval = isfinite(p->d.half);
    fputc(' ', md);
    put_num(md, p->d.diff, "%+.4f", "-");
    if (interval)
        fprintf(md, " | [%+.4f, %+.4f] | ", p->d.diff - p->d.half, p->d.diff + p->d.half);
    else
        fputs(" | - | ", md);
    fprintf(md, "%d", p->pairs);
    if (p->apart) fprintf(md, " (%d apart)", p->apart);
    if (p->mixed) fprintf(md, " (%d mixed kernels)", p->mixed);
    if (p->beyond) fprintf(md, " (%d past the look)", p->beyond);
    fprintf(md, " | %s | ", interval ? (p->d.excludes_zero ? "yes" : "no") : "-");
    put_num(md, p->resolvable, "%.4f", "-");
    if (!interval)
        fputs(" | - |\n", md);
    else if (p->needed < 0)
        fprintf(md, " | > %d |\n", VERDICT_SEEDS_CAP);
    else
        fprintf(md, " | %d |\n", p->needed);
    if (!csv) return;
    fprintf(csv, "%d,%d,", p->pairs, p->apart);
    put_num(csv, p->d.diff, "%.6f,", ",");
    put_num(csv, p->d.diff - p->d.half, "%.6f,", ",");
    put_num(csv, p->d.diff + p->d.half, "%.6f,", ",");
    fputs(interval ? (p->d.excludes_zero ? "yes," : "no,") : ",", csv);
    put_num(csv, p->resolvable, "%.6f,", ",");
    if (interval && p->needed >= 0) fprintf(csv, "%d", p->needed);
    fprintf(csv, ",%d,%d,%.4f", p->mixed, p->beyond, p->level);
}

/* The effect of each axis: every two points that differ on that axis alone,
 * the later value minus the earlier, with Welch's interval and paired. */
static void effects_table(const Grid *g, const GridRun *runs, int n, const GridRun *const *first, int n_points,
                          FILE *md) {
    bool any = false;
    for (int a = 0; a < g->n_axes; a++) any = any || g->axes[a].n > 1;
    if (!any) return;
    fprintf(md, "\nThe effect of each axis: every two points that differ on that axis alone, the later value "
                "minus the earlier (final val bpb), with Welch's 95%% interval, then seed by seed (paired, over "
                "the pairs off the byte plateau) with the power of those pairs.\n\n"
                "| axis | from | to | other axes | difference | 95%% interval | differs | %s |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
            PAIRED_MD);
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
                    fprintf(md, " | [%+.4f, %+.4f] | %s |", d.diff - d.half, d.diff + d.half,
                            d.excludes_zero ? "yes" : "no");
                else
                    fputs(" | - | - |", md);
                GridPaired pd = paired_points(g, runs, n, p, q);
                paired_cells(&pd, md, NULL);
            }
}

/* The point the paired columns compare with: the baseline, else the first that can run. */
static int reference_point(const GridRun *const *first, int n_points, int baseline) {
    if (baseline >= 0) return baseline;
    for (int p = 0; p < n_points; p++)
        if (!first[p]->skipped) return p;
    return 0;
}

/* A point's name: its first run's without ",seed=". */
static void point_name(const GridRun *r, char *name, size_t size) {
    snprintf(name, size, "%s", r->name);
    char *cut = strstr(name, ",seed=");
    if (cut) *cut = '\0';
}

static void plan_sentence(const Grid *g, FILE *md);

/* One row per point: mean, sd, interval, the difference from the baseline
 * (Welch), and the seed-matched difference from the reference with its power. */
static void summary_tables(const Grid *g, const GridRun *runs, int n, FILE *md, FILE *csv) {
    static const GridRun *first[GRID_MAX_RUNS + 1];
    int baseline, n_points = points_of(runs, n, first, &baseline), ref = reference_point(first, n_points, baseline);
    Summary base = baseline >= 0 ? point_summary(runs, n, baseline) : (Summary){0};
    char ref_name[256];
    point_name(first[ref], ref_name, sizeof ref_name);
    fprintf(md, "%d seeds per point (seed %lld on); final val bpb over each point's finished runs, with 95%% "
                "intervals (t); the difference from the baseline with Welch's interval (fractional degrees of "
                "freedom); then the difference from %s seed by seed (paired: each seed fixes the initialisation "
                "and the data order) with its t interval, over the pairs off the byte plateau, the smallest "
                "difference those pairs resolve (95%%, 80%% power) and the pairs that would resolve the "
                "difference seen.",
            g->seeds, (long long)g->base.train.seed, ref_name);
    plan_sentence(g, md);
    fputs("\n\n", md);
    char md_cols[300];
    snprintf(md_cols, sizeof md_cols, "runs | mean | sd | 95%% interval | minus baseline | 95%% interval | differs | %s",
             PAIRED_MD);
    char csv_cols[300];
    snprintf(csv_cols, sizeof csv_cols, "runs,mean,sd,low,high,minus_baseline,diff_low,diff_high,differs,welch_df,"
             "paired_against,%s", PAIRED_CSV);
    table_header(g, md, csv, "point", md_cols, csv_cols, 7 + PAIRED_COLUMNS);
    for (int p = 0; p < n_points; p++) {
        const GridRun *r = first[p];
        if (r->skipped) continue;
        Summary s = point_summary(runs, n, p);
        Difference d = baseline >= 0 && p != baseline ? difference(&s, &base) : (Difference){NAN, NAN, false, NAN, NAN};
        char name[256];
        point_name(r, name, sizeof name);
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
            fprintf(md, "[%+.4f, %+.4f] | %s |", d.diff - d.half, d.diff + d.half, d.excludes_zero ? "yes" : "no");
        else
            fputs("- | - |", md);
        GridPaired pd = p != ref ? paired_points(g, runs, n, ref, p) : (GridPaired){.pairs = 0};
        fprintf(csv, "%d,", s.n);
        put_num(csv, s.mean, "%.6f,", ",");
        put_num(csv, s.sd, "%.6f,", ",");
        put_num(csv, s.mean - s.half, "%.6f,", ",");
        put_num(csv, s.mean + s.half, "%.6f,", ",");
        put_num(csv, d.diff, "%.6f,", ",");
        put_num(csv, d.diff - d.half, "%.6f,", ",");
        put_num(csv, d.diff + d.half, "%.6f,", ",");
        fputs(isfinite(d.half) ? (d.excludes_zero ? "yes," : "no,") : ",", csv);
        put_num(csv, d.df, "%.4f,", ",");
        put_csv(csv, p != ref ? ref_name : "");
        fputc(',', csv);
        paired_cells(p != ref ? &pd : NULL, md, csv);
        fputc('\n', csv);
    }
    effects_table(g, runs, n, first, n_points, md);
}

/* Whether point x is on side `side` of claim c. */
static bool claim_side_has(const Grid *g, const GridClaim *c, int side, const GridRun *x) {
    if (x->skipped || !x->values[0]) return c->baseline[side] && !x->skipped && !x->values[0];
    if (c->baseline[side]) return false;
    for (int a = 0; a < g->n_axes; a++)
        if (c->value[side][a] >= 0 && strcmp(x->values[a], g->axes[a].values[c->value[side][a]])) return false;
    return true;
}

/* Whether points x (side 0) and y (side 1) are one of claim c's pairs: the
 * same on every axis the claim leaves free (unless one is the baseline). */
static bool claim_pair(const Grid *g, const GridClaim *c, const GridRun *x, const GridRun *y) {
    if (!claim_side_has(g, c, 0, x) || !claim_side_has(g, c, 1, y)) return false;
    for (int a = 0; a < g->n_axes && !c->baseline[0] && !c->baseline[1]; a++)
        if (c->value[0][a] < 0 && strcmp(x->values[a], y->values[a])) return false;
    return true;
}

/* A verdict in words, for the claim "lower < higher" tested on d = lower - higher. */
static void verdict_words(const Verdict *v, const GridPaired *p, char *buf, size_t size) {
    const Difference *d = &p->d;
    switch (v->kind) {
    case VERDICT_AGREES: snprintf(buf, size, "agrees"); break;
    case VERDICT_DISAGREES: snprintf(buf, size, "disagrees"); break;
    case VERDICT_NO_EFFECT: snprintf(buf, size, "no effect larger than %.4f bpb", v->bound); break;
    default:
        if (p->planned && p->look < 0)
            snprintf(buf, size, "inconclusive; the plan's first look is at %d pairs off the plateau, %d so far",
                     p->next_look, p->pairs);
        else if (!isfinite(d->half))
            snprintf(buf, size, "inconclusive; fewer than 2 seed pairs off the plateau");
        else if (p->planned && p->next_look > 0)
            snprintf(buf, size, "inconclusive at look %d; the plan's next look: %d pairs", p->look + 1, p->next_look);
        else if (p->planned)
            snprintf(buf, size, "inconclusive at the plan's last look");
        else if (v->seeds_needed < 0)
            snprintf(buf, size, "inconclusive; over %d seed pairs would resolve %+.4f (95%%, 80%% power)",
                     VERDICT_SEEDS_CAP, d->diff);
        else
            snprintf(buf, size, "inconclusive; %d seed pairs would resolve %+.4f (95%%, 80%% power)", v->seeds_needed,
                     d->diff);
    }
}

/* The verdict lines of claim c: one per pair of points it names. */
static int claim_lines(const Grid *g, const GridClaim *c, const GridRun *runs, int n, FILE *md) {
    static const GridRun *first[GRID_MAX_RUNS + 1];
    int baseline, n_points = points_of(runs, n, first, &baseline), lines = 0;
    for (int p = 0; p < n_points; p++)
        for (int q = 0; q < n_points; q++) {
            if (p == q || !claim_pair(g, c, first[p], first[q])) continue;
            lines++;
            if (!md) continue;
            /* the axes the claim leaves free, from the point that has them */
            const GridRun *x = first[p]->values[0] ? first[p] : first[q];
            char at[256] = "";
            size_t k = 0;
            for (int a = 0; a < g->n_axes && k < sizeof at; a++)
                if (c->value[c->baseline[0] ? 1 : 0][a] < 0)
                    k += (size_t)snprintf(at + k, sizeof at - k, "%s%s=%s", k ? "," : " at ", g->axes[a].name,
                                          x->values[a]);
            GridPaired pd = paired_points(g, runs, n, q, p); /* lower - higher */
            Verdict v = verdict_rule(&pd.d, g->within);
            char words[160];
            verdict_words(&v, &pd, words, sizeof words);
            fprintf(md, "verdict: %s%s: %s (paired ", c->text, at, words);
            put_num(md, pd.d.diff, "%+.4f", "-");
            if (isfinite(pd.d.half)) fprintf(md, " [%+.4f, %+.4f]", pd.d.diff - pd.d.half, pd.d.diff + pd.d.half);
            if (pd.planned) fprintf(md, " at %.1f%%", 100 * pd.level);
            fprintf(md, ", %d pairs", pd.pairs);
            if (pd.apart) fprintf(md, ", %d apart", pd.apart);
            if (pd.mixed) fprintf(md, ", %d of mixed kernels left out", pd.mixed);
            if (pd.beyond) fprintf(md, ", %d past the look", pd.beyond);
            fputs(")\n", md);
        }
    return lines;
}

int grid_check_claims(const Grid *g, const GridRun *runs, int n, Err *e) {
    for (int c = 0; c < g->n_claims; c++)
        if (!claim_lines(g, &g->claims[c], runs, n, NULL))
            return err_set(e, "--expect \"%s\": no two points of the grid to compare", g->claims[c].text),
                   err_hint(e, "the baseline is not run under --no-baseline, nor a combination that cannot work");
    return 0;
}

/* What the paired intervals follow: the seed plan and the kernels rule. */
static void plan_sentence(const Grid *g, FILE *md) {
    const SeedPlan *p = &g->plan;
    if (p->n_looks) {
        fprintf(md, " The seed plan fixed before the runs (--plan) looks at ");
        for (int i = 0; i < p->n_looks; i++)
            fprintf(md, "%s%d", i ? (i == p->n_looks - 1 ? " and " : ", ") : "", p->looks[i]);
        fprintf(md, " seed pairs, each look's interval at %.1f%% so that together they hold at 95%% (Bonferroni); a "
                    "verdict uses the first pairs of the last look reached.", 100 * seed_plan_level(p));
    } else {
        fprintf(md, " Every interval is at 95%% over all the pairs there are: valid when their number was fixed "
                    "before the runs (--plan says how it was).");
    }
    if (g->mixed_kernels)
        fprintf(md, " Pairs whose runs ran under different kernels are counted (--mixed-kernels).");
    else
        fprintf(md, " A pair whose runs ran under different kernels (provenance.json) is left out.");
}

/* The claims' verdicts, and the runs set apart for being on the plateau. */
static void verdicts(const Grid *g, const GridRun *runs, int n, FILE *md) {
    if (g->n_claims) {
        fprintf(md, "%sThe claims (--expect; lower val bpb is better), by the verdict rule of EXPERIMENTS.md: the "
                    "claimed-lower minus the claimed-higher, seed by seed over the pairs off the byte plateau; "
                    "no effect larger than X when X is at most %g bpb.",
                ftell(md) ? "\n" : "", g->within);
        plan_sentence(g, md);
        fputs("\n\n", md);
        for (int c = 0; c < g->n_claims; c++) claim_lines(g, &g->claims[c], runs, n, md);
    }
    bool any = false;
    char why[128];
    for (int i = 0; i < n; i++) {
        if (!has_value(&runs[i]) || !grid_plateau(&runs[i], why, sizeof why)) continue;
        if (!any) fputs("\nSet apart from the paired columns and the verdicts, still on the byte plateau:\n\n", md);
        any = true;
        fprintf(md, "- %s: %s\n", runs[i].name, why);
    }
}

void grid_tables(const Grid *g, const GridRun *runs, int n, char **md_out, char **csv_out, char **summary_out) {
    size_t md_len, csv_len, sum_len;
    char *sum_text = NULL;
    FILE *md = open_memstream(md_out, &md_len), *csv = open_memstream(csv_out, &csv_len);
    FILE *sum = open_memstream(&sum_text, &sum_len);
    if (!md || !csv || !sum) DIE("out of memory");
    if (g->seeds > 1) summary_tables(g, runs, n, md, sum);
    if (g->seeds > 1 || g->n_claims) {
        verdicts(g, runs, n, md);
        fputs(ftell(md) ? "\nEvery run:\n\n" : "Every run:\n\n", md);
    }
    /* the kernels the runs ran under, labelled K1, K2, ... in order of first use */
    static const char *kernels[GRID_MAX_RUNS + 1];
    int n_kernels = 0;
    for (int i = 0; i < n; i++) {
        if (runs[i].skipped || !runs[i].kernel[0]) continue;
        int k = 0;
        while (k < n_kernels && strcmp(kernels[k], runs[i].kernel)) k++;
        if (k == n_kernels) kernels[n_kernels++] = runs[i].kernel;
    }
    table_header(g, md, csv, "run",
                 "final val bpb | best val bpb | diverged at | clamped denominators | tok/s | params | kernel",
                 "final_val_bpb,best_val_bpb,diverged_step,den_clamped,tok_s,status,params,kernel,commit", 7);
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
        fprintf(md, " | %ld | ", params);
        int k = 0;
        while (k < n_kernels && strcmp(kernels[k], r->kernel)) k++;
        if (r->kernel[0])
            fprintf(md, "K%d%s |\n", k + 1, r->kernel_mixed ? " (mixed)" : "");
        else
            fputs("- |\n", md);
        put_num(csv, t->val_bpb, "%.6f,", ",");
        put_num(csv, t->best_val_bpb, "%.6f,", ",");
        put_num(csv, diverged ? (double)t->diverged_step : NAN, "%.0f,", ",");
        put_num(csv, r->den_clamped, "%.6f,", ",");
        put_num(csv, t->tok_s, "%.0f,", ",");
        fprintf(csv, "%s,%ld,", diverged ? "diverged" : failed ? "failed" : "done", params);
        put_csv(csv, r->kernel_mixed ? "mixed" : r->kernel);
        fputc(',', csv);
        put_csv(csv, r->commit);
        fputc('\n', csv);
    }
    if (n_kernels) {
        fputs("\nWhere the runs ran (provenance.json: products, threads, CPU and the ISA the build targets):\n\n", md);
        for (int k = 0; k < n_kernels; k++) fprintf(md, "- K%d: %s\n", k + 1, kernels[k]);
        bool any_mixed = false, any_unknown = false;
        for (int i = 0; i < n; i++)
            if (!runs[i].skipped && has_value(&runs[i]))
                any_mixed |= runs[i].kernel_mixed, any_unknown |= !runs[i].kernel[0];
        if (any_mixed) fputs("- (mixed): a run resumed under another kernel than it started with\n", md);
        if (any_unknown) fputs("- -: a run made before runs recorded where they ran\n", md);
    }
    bool any_failed = false;
    for (int i = 0; i < n; i++) any_failed |= !runs[i].skipped && runs[i].result.status == TRAIN_FAILED;
    if (any_failed) {
        fputs("\nFailed (running the command again retries them):\n\n", md);
        for (int i = 0; i < n; i++)
            if (!runs[i].skipped && runs[i].result.status == TRAIN_FAILED)
                fprintf(md, "- %s: %s\n", runs[i].name, runs[i].result.why);
    }
    bool any_skipped = false, any_pending = false;
    for (int i = 0; i < n; i++) any_skipped |= runs[i].skipped && !runs[i].pending, any_pending |= runs[i].pending;
    if (any_skipped) {
        fputs("\nSkipped, because the combination cannot work:\n\n", md);
        for (int i = 0; i < n; i++)
            if (runs[i].skipped && !runs[i].pending) fprintf(md, "- %s: %s\n", runs[i].name, runs[i].why);
    }
    if (any_pending) {
        fputs("\nNot trained yet (the tables are of the finished runs; the same ./ablate command without "
              "--tables-only trains the rest):\n\n",
              md);
        for (int i = 0; i < n; i++)
            if (runs[i].pending) fprintf(md, "- %s\n", runs[i].name);
    }
    if (fclose(md) != 0 || fclose(csv) != 0 || fclose(sum) != 0) DIE("out of memory");
    if (summary_out)
        *summary_out = sum_text;
    else
        free(sum_text);
}

#define ARM_MAX_RUNS GRID_MAX_PAIRS

static void grid_free_runs_only(GridRun *runs, int n) {
    for (int i = 0; i < n; i++) free(runs[i].steps), free(runs[i].bpb);
}

/* The runs of an arm, DIR/POINT: the folders DIR/POINT_seed-<n>, read with
 * grid_read_folder, by seed; a run not yet evaluated (no final value) is
 * left out. The count, or -1 with e set. */
static int arm_runs(const char *arm, GridRun *runs, long long *seeds, Err *e) {
    static GridArmRun folders[ARM_MAX_RUNS];
    int found = grid_arm_folders(arm, folders, ARM_MAX_RUNS, e), n = 0;
    for (int i = 0; i < found; i++) {
        if (grid_read_folder(&runs[n], folders[i].folder, e) != 0) {
            free(runs[n].steps), free(runs[n].bpb);
            grid_free_runs_only(runs, n);
            return -1;
        }
        if (runs[n].n_points)
            seeds[n++] = folders[i].seed;
        else
            free(runs[n].steps), free(runs[n].bpb);
    }
    if (found > 0 && !n) return err_set(e, "%s: no runs with a final value", arm);
    return found < 0 ? -1 : n;
}

/* The verdict rule on b - a, with no claim: which way the interval excludes 0. */
static void paired_verdict(FILE *out, const GridPaired *p, double within) {
    if (p->mixed) fprintf(out, "left out: %d seed pair(s) whose runs ran under different kernels\n", p->mixed);
    if (p->planned && p->look < 0) {
        fprintf(out, "paired: %d seed pair(s) off the plateau; the plan's first look is at %d: inconclusive\n",
                p->pairs, p->next_look);
        return;
    }
    if (!isfinite(p->d.half)) {
        fprintf(out, "paired: %d seed pair(s) off the plateau, too few for an interval: inconclusive\n", p->pairs);
        return;
    }
    double lo = p->d.diff - p->d.half, hi = p->d.diff + p->d.half;
    fprintf(out, "paired: n %d, mean %+.4f, sd %.4f, %.4g%% interval [%+.4f, %+.4f]", p->pairs, p->d.diff, p->sd,
            100 * p->level, lo, hi);
    if (p->planned) fprintf(out, " (the plan's look %d%s)", p->look + 1, p->beyond ? ", later pairs past it" : "");
    fputc('\n', out);
    Verdict v = verdict_rule(&p->d, within);
    if (v.kind == VERDICT_AGREES || v.kind == VERDICT_DISAGREES)
        fprintf(out, "verdict: excludes 0, B %c A\n", v.kind == VERDICT_AGREES ? '<' : '>');
    else if (v.kind == VERDICT_NO_EFFECT)
        fprintf(out, "verdict: no effect larger than %.4f bpb (X = %g)\n", v.bound, within);
    else if (p->planned && p->next_look > 0)
        fprintf(out, "verdict: inconclusive; the plan's next look: %d pairs\n", p->next_look);
    else if (p->planned)
        fprintf(out, "verdict: inconclusive at the plan's last look\n");
    else if (v.seeds_needed < 0)
        fprintf(out, "verdict: inconclusive; over %d seed pairs would resolve %+.4f (95%%, 80%% power)\n",
                VERDICT_SEEDS_CAP, p->d.diff);
    else
        fprintf(out, "verdict: inconclusive; %d seed pairs would resolve %+.4f (95%%, 80%% power)\n", v.seeds_needed,
                p->d.diff);
}

/* Two arms paired seed by seed: *p their difference b - a by the rule, *cfg
 * arm a's first run's config; each seed's line on out unless NULL. */
static int arms_paired(FILE *out, const char *arm_a, const char *arm_b, const PairRule *rule, GridPaired *p,
                       Config *cfg, Err *e) {
    static GridRun ra[ARM_MAX_RUNS], rb[ARM_MAX_RUNS];
    static long long sa[ARM_MAX_RUNS], sb[ARM_MAX_RUNS];
    int na = arm_runs(arm_a, ra, sa, e);
    if (na < 0) return -1;
    int nb = arm_runs(arm_b, rb, sb, e);
    if (nb < 0) {
        grid_free_runs_only(ra, na);
        return -1;
    }
    if (out) fprintf(out, "B - A, final val bpb, by seed\n  A = %s\n  B = %s\n", arm_a, arm_b);
    const GridRun *a[ARM_MAX_RUNS] = {0}, *b[ARM_MAX_RUNS] = {0};
    int k = 0;
    for (int j = 0; j < nb; j++) {
        int i = 0;
        while (i < na && sa[i] != sb[j]) i++;
        if (i == na) continue;
        a[k] = &ra[i], b[k++] = &rb[j];
        if (!out) continue;
        double d = rb[j].result.val_bpb - ra[i].result.val_bpb;
        char wa[128], wb[128];
        bool pa = grid_plateau(&ra[i], wa, sizeof wa), pb = grid_plateau(&rb[j], wb, sizeof wb);
        fprintf(out, "  seed %lld: A %.4f  B %.4f  B - A %+.4f", sb[j], ra[i].result.val_bpb, rb[j].result.val_bpb, d);
        if (kernels_differ(&ra[i], &rb[j])) fprintf(out, "  kernels differ%s", rule->mixed_kernels ? "" : ": left out");
        if (pa || pb)
            fprintf(out, "  apart: %s%s%s%s%s", pa ? "A " : "", pa ? wa : "", pa && pb ? "; " : "", pb ? "B " : "",
                    pb ? wb : "");
        fputc('\n', out);
    }
    *p = paired_of(a, b, k, rule);
    p->time_s = 0;
    for (int i = 0; i < na; i++) p->time_s += isfinite(ra[i].time_s) ? ra[i].time_s : 0;
    for (int j = 0; j < nb; j++) p->time_s += isfinite(rb[j].time_s) ? rb[j].time_s : 0;
    if (cfg) *cfg = ra[0].cfg;
    grid_free_runs_only(ra, na);
    grid_free_runs_only(rb, nb);
    return 0;
}

int grid_paired_report(FILE *out, const char *arm_a, const char *arm_b, double within, const SeedPlan *plan,
                       bool mixed_kernels, Err *e) {
    static GridPaired p;
    PairRule rule = {plan, mixed_kernels};
    if (arms_paired(out, arm_a, arm_b, &rule, &p, NULL, e) != 0) return -1;
    paired_verdict(out, &p, within);
    return 0;
}

int grid_arm_pairs(const char *arm_a, const char *arm_b, const SeedPlan *plan, bool mixed_kernels, GridPaired *out,
                   Config *cfg, Err *e) {
    PairRule rule = {plan, mixed_kernels};
    return arms_paired(NULL, arm_a, arm_b, &rule, out, cfg, e);
}

void grid_verdict_words(const GridPaired *p, double within, char *buf, size_t size) {
    Verdict v = verdict_rule(&p->d, within);
    verdict_words(&v, p, buf, size);
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
    /* no run has a curve (every one failed): no plot, and none left from before */
    rc = k ? plot_lines(path, &spec, s, k, e) : (unlink(path), 0);
    free(s);
    free(buf);
    free(labels);
    return rc;
}
